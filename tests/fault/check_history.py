#!/usr/bin/env python3
"""Check a history of critical sections written by the fault suite.

Usage: check_history.py [--json] LOG [DIR]

LOG is the history (JSON lines); DIR holds the counter and fenced-store files
(counter.NAME, fence.NAME, fence.NAME.rejects, and dbfence.tsv: the rows the
database-fenced writes committed) when their final state is to be checked too. Exit status 0 if the history is clean, 1 if it is not (each
problem is printed on one line), 2 on bad input.

Record format
-------------
One JSON object per line. All times ("t", "req", "t0", "t1") are
CLOCK_MONOTONIC in microseconds, the same clock in every process of the one
machine (C: clock_gettime(CLOCK_MONOTONIC); Python: time.monotonic_ns()).
"gid" names one critical section (one grant), unique in the history:
"PID-START.SEQ" (START: the process's start time, so a reused pid gets new ids).

Written by the worker (tests/fault/fault_worker.c):
  begin  name gid pid ppid token strategy via(lib|cli|nolock) req t lease_ms
         t: the grant was in hand (acquire returned / COMMAND started);
         req: when the acquire request was sent (for `rowlock run`: when the
         orchestrator started it, a lower bound)
  inc    name gid pid token read prev wrote t0 t1
         the non-atomic counter: read value `read` (last written by section
         `prev`, "-" for none) at t0, wrote `wrote` = read+1 at t1
  renew  name gid pid token req t rc      (rc: ROWLOCK_* name, "ROWLOCK_OK")
  fence  name gid pid token ok highest t  one fenced write, logged under the
         store's flock (so per name the log order is the store's order)
  dbfence name gid pid token seq rc committed form t
         one write in the application's own transaction, fenced in it by
         rowlock_fence() (form "c") or CALL `<table>_fence` (form "sql"), or
         not fenced at all (form "none": the planted bug skip-fence): seq is
         the value of the name's counter row the transaction incremented
         (the commit order: the row lock serialises them), rc the fence's
         ROWLOCK_* name (SQL form: ROWLOCK_EFENCED for SQLSTATE RLF01),
         committed 1 if COMMIT succeeded. Logged after the transaction ended
  releasing name gid pid t                the release is about to be called
  end    name gid pid token t how rc      t: end of the protected work;
         how: completed | lost (ROWLOCK_ENOTOWNER) | terminated (SIGTERM from
         `rowlock run`, lease lost) | unknown (release kept failing)

Written by the orchestrator (tests/fault/faultrun.py):
  fault  kind pid t   kind: kill | pause | resume | server_kill | server_up |
                      relay_drop | relay_blackhole | relay_restore |
                      shutdown; pid: the process group hit (a worker, or a
                      `rowlock run` and its COMMAND), 0 for server/relay faults
  cli_exit pid rc t   `rowlock run` (pid = its process group) exited with rc
  tick gid pid t next  a slow-to-stop COMMAND was alive at t; had it lived to
                      `next`, another tick would have come
  sigterm gid pid t   a slow-to-stop COMMAND got SIGTERM (and went on)

What is checked
---------------
A section is EXCUSED ("paused or had its lock taken") when its process group
was paused during it, or, for a library section, the product told it the
lock was lost (end.how lost or terminated): the library worker finishes its
section anyway, and the fenced store judges its writes. A `rowlock run`
section is never excused by its exit 75: `rowlock run` promises that
COMMAND is gone before the lock could pass on (issue 24), so its end must
come before the next grant, with one exception, documented: a for-update
section whose session the server ended early (relay_drop, server_kill:
the server ends the session and grants the next waiter at once, or as soon
as it is back, and COMMAND hears of it later, then has its grace: only the
token covers that). A section without an end record ends
at the kill of its process group (how = killed), or at its `releasing`
record if it wrote one: its protected work was over then, and a kill inside
the release call does not extend it (a next holder granted in between is no
double grant; the counter and the fenced store still judge every write); a
slow-to-stop COMMAND (FAULT_SLOW_STOP) that `rowlock run` killed ends where
its ticks say it could last have been alive (how = stopped).

1. double grant: two sections of one name from different grants overlap in
   time and neither is excused;
2. token order: per name, in grant order (begin time), tokens strictly
   increase (equal tokens of two processes are a double grant too; one
   process given its previous token again is a hidden re-entrant hold).
   Nothing is excused: the checker has one mode, strict;
3. lost update: per name, the counter writes in write order must each have
   read the previous write (inc.prev == the previous writer's gid); a write
   that did not is a lost update unless one of the two sections is excused;
   without lost updates the final counter value equals the number of
   increments (and the counter file agrees, or is one write ahead by a
   section whose process died between writing it and logging it);
4. lease: (insert, optimistic) a section that follows one that never
   released (killed, paused, lost) must begin no earlier than that holder's
   last acquire/renew request + its lease; or, when that holder's release
   call lost its connection (a `dberr` op release, rc ROWLOCK_EDB, errno
   2006/2013/2055, not injected) and its retry then found the row no longer
   its own (end rc ROWLOCK_ENOTOWNER), no earlier than its `releasing`
   record: the cut attempt may have committed;
5. fence: per name, each write was accepted iff its token >= every token
   accepted before it; every rejected write came from an excused or killed
   section; DIR's reject journal agrees with the log write by write (token
   and gid), except a last write of a section whose process died between
   journalling it and logging it.
6. db fence: (writes fenced inside the application's transaction) per name,
   the rows the database committed (DIR/dbfence.tsv), in commit order (seq),
   have non-decreasing tokens: a row of an older grant committed after a
   newer grant's row is a stale grant's fenced write that committed (the
   failure the fence exists to prevent); every write the log says committed
   is in the table; a refused fence (ROWLOCK_EFENCED) came from an excused or
   killed section (an unpaused holder's fenced writes all commit).
"""
import collections
import json
import os
import sys

# Clock allowance for check 4: the lease is timed by the server's clock and
# the history by this host's monotonic clock (same machine; NTP slewing is at
# most 500 ppm).
LEASE_EPS_US = 1000
LEASE_EPS_PPM = 1000

# MySQL client errors of a connection lost during a statement (CR_SERVER_GONE_ERROR,
# CR_SERVER_LOST, CR_SERVER_LOST_EXTENDED): the server may have run it.
CONNECTION_LOST = (2006, 2013, 2055)


# How a section ends when it has no end record: its process died (killed
# by the orchestrator, still open at the end of the log, or SIGKILLed by its
# own `rowlock run`), so its last file write may lack its log record.
DIED = ("killed", "open", "stopped")


class Section:
    __slots__ = ("gid", "name", "pid", "ppid", "token", "strategy", "via", "req",
                 "begin", "end", "how", "rc", "lease_ms", "last_req", "paused",
                 "released", "releasing", "fences", "incs", "alive_until", "session_cut",
                 "dbfences", "release_cut")

    def __init__(self, r):
        self.gid = r["gid"]
        self.name = r["name"]
        self.pid = r["pid"]
        self.ppid = r.get("ppid", 0)
        self.token = int(r.get("token", 0))
        self.strategy = r.get("strategy", "?")
        self.via = r.get("via", "lib")
        self.req = int(r.get("req", 0))
        self.begin = int(r["t"])
        self.lease_ms = int(r.get("lease_ms", 0))
        self.last_req = self.req
        self.end = None
        self.how = None
        self.rc = None
        self.paused = False
        self.released = None   # True: released; False: did not; None: unknown
        self.releasing = None
        self.fences = []
        self.dbfences = []
        self.incs = []
        self.alive_until = None
        self.session_cut = False
        self.release_cut = False   # a release attempt lost its connection

    @property
    def groups(self):
        return (self.pid, self.ppid) if self.via == "cli" else (self.pid,)

    @property
    def excused(self):
        if self.via == "cli":
            return self.paused or self.session_cut
        return self.paused or self.how in ("lost", "terminated")

    def __repr__(self):
        return "%s(token %d, %s/%s, %s)" % (self.gid, self.token, self.strategy, self.via, self.how)


class Result:
    def __init__(self):
        self.errors = []
        self.stats = collections.Counter()
        self.by_key = collections.defaultdict(collections.Counter)  # (strategy, via) -> counts

    def error(self, kind, msg):
        self.stats["err_" + kind] += 1
        self.errors.append("%s: %s" % (kind, msg))

    @property
    def ok(self):
        return not self.errors

    def kinds(self):
        return sorted({e.split(":", 1)[0] for e in self.errors})


def load(path):
    recs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                recs.append(json.loads(line))
            except ValueError:
                # A worker killed mid-write can leave a torn last line only if
                # the write was split, which O_APPEND + one write() prevents.
                raise ValueError("%s:%d: not a JSON record: %.80r" % (path, n, line))
    return recs


def build(recs):
    """Sections by gid, plus the fault and exit events."""
    secs = {}
    faults = []
    cli_exit = {}
    for r in recs:
        ev = r.get("ev")
        if ev == "begin":
            if r["gid"] in secs:
                # Two sections under one id would be checked as one: refuse
                # the history rather than judge it wrongly.
                raise ValueError("gid %r begins twice: section ids must be unique" % r["gid"])
            secs[r["gid"]] = Section(r)
        elif ev in ("inc", "renew", "fence", "dbfence", "releasing", "end", "tick", "sigterm", "dberr"):
            s = secs.get(r["gid"])
            if s is None:
                continue
            if ev == "inc":
                s.incs.append(r)
            elif ev == "renew":
                if r.get("rc") == "ROWLOCK_OK":
                    s.last_req = max(s.last_req, int(r["req"]))
            elif ev == "fence":
                s.fences.append(r)
            elif ev == "dbfence":
                s.dbfences.append(r)
            elif ev == "releasing":
                s.releasing = int(r["t"])
            elif ev == "tick":
                s.alive_until = max(s.alive_until or 0, int(r["next"]))
            elif ev == "sigterm":
                pass
            elif ev == "dberr":
                # A release the server may have run and committed: the
                # connection was lost during it (not an injected error, which
                # fails before sending; not busy retries, which rolled back).
                if (r.get("op") == "release" and r.get("rc") == "ROWLOCK_EDB" and not r.get("injected")
                        and int(r.get("errno", 0)) in CONNECTION_LOST):
                    s.release_cut = True
            else:
                s.end = int(r["t"])
                s.how = r.get("how", "completed")
                s.rc = r.get("rc")
        elif ev == "fault":
            faults.append(r)
        elif ev == "cli_exit":
            # A long run reuses pids: keep every exit of a pid, in time order.
            cli_exit.setdefault(r["pid"], []).append(r)
    t_last = max([int(r.get("t", r.get("t1", 0))) for r in recs] or [0])
    kills = collections.defaultdict(list)
    pauses = collections.defaultdict(list)
    for f in faults:
        if f["kind"] in ("kill", "shutdown"):
            kills[f["pid"]].append(int(f["t"]))
        elif f["kind"] == "pause":
            pauses[f["pid"]].append(int(f["t"]))
    drops = collections.defaultdict(list)   # lock name (None: every name) -> [(pgid, t)]
    for f in faults:
        if f["kind"] in ("relay_drop", "server_kill"):
            drops[f.get("group")].append((f.get("pid"), int(f["t"])))
    for s in secs.values():
        if s.end is None:
            ks = [t for g in s.groups for t in kills.get(g, []) if t >= s.begin]
            s.end = min(ks) if ks else t_last
            s.how = "killed" if ks else "open"
            if not ks and s.alive_until is not None:
                # Killed by its own `rowlock run` (SIGKILL after the grace):
                # alive until its ticks stop.
                s.end = min(s.alive_until, t_last)
                s.how = "stopped"
            if s.releasing is not None and s.releasing < s.end:
                # Killed (or cut off) inside its release: its protected work
                # ended when it logged `releasing`.
                s.end = s.releasing
        if any(s.begin <= t <= s.end for g in s.groups for t in pauses.get(g, [])):
            s.paused = True
        if s.strategy == "for-update" and any(
                s.begin <= t <= s.end and (pid in s.groups or not pid)
                for pid, t in drops.get(s.name, []) + drops.get(None, [])):
            s.session_cut = True
        if s.via == "cli":
            # The exit of this section's `rowlock run`: the first exit of
            # its pid after the section began (a later process may reuse it).
            ex = next((e for e in sorted(cli_exit.get(s.ppid, []), key=lambda e: int(e["t"]))
                       if int(e["t"]) >= s.begin), None)
            if ex is not None and int(ex["rc"]) == 75:
                s.how = "lost" if s.how == "completed" else s.how
            if s.how == "killed":
                s.released = False
            elif ex is not None and int(ex["rc"]) == 0:
                s.released = True
            else:
                # Exit 75 or unknown: `rowlock run` may still have released
                # the lock after terminating COMMAND (its final release can
                # succeed on a new connection).
                s.released = None
        elif s.via == "lib":
            if s.how == "completed":
                s.released = True
            elif s.how in ("killed", "open") and s.releasing is not None:
                s.released = None        # killed inside release: may have released
            else:
                s.released = False
    return secs, faults


def check(recs, files=None):
    """files: {"counter": {name: (value, gid)}, "rejects": {name: [(token, gid)]},
    "dbfence": {name: [(seq, token, gid)]}} or None."""
    res = Result()
    secs, faults = build(recs)
    by_name = collections.defaultdict(list)
    for s in secs.values():
        by_name[s.name].append(s)
        key = (s.strategy, s.via)
        res.by_key[key]["grants"] += 1
        res.stats["grants"] += 1
        if s.excused:
            res.stats["excused_sections"] += 1
        if s.paused:
            res.stats["paused"] += 1
        if s.how in ("lost", "terminated"):
            res.stats["lost"] += 1
        if s.how == "killed":
            res.stats["killed"] += 1
    for name, ss in sorted(by_name.items()):
        ss.sort(key=lambda s: (s.begin, s.token))
        check_overlaps(res, name, ss)
        check_tokens(res, name, ss)
        check_leases(res, name, ss)
        check_counter(res, name, ss, files)
        check_fence(res, name, ss, files)
        check_dbfence(res, name, ss, files)
    for name in sorted(set((files or {}).get("dbfence", {})) - set(by_name)):
        check_dbfence(res, name, [], files)    # rows of sections the log lost
    return res


def check_overlaps(res, name, ss):
    for i, a in enumerate(ss):
        for b in ss[i + 1:]:
            if b.begin >= a.end:
                break    # sorted by begin: nothing later overlaps a
            if a.pid == b.pid:
                continue
            if a.excused or b.excused:
                res.stats["excused_overlaps"] += 1
                res.by_key[(b.strategy, b.via)]["excused_overlaps"] += 1
                continue
            res.by_key[(b.strategy, b.via)]["double_grants"] += 1
            res.error("double grant",
                      "%r: %s [%d, %d] and %s [%d, %d] overlap by %.1f ms, neither paused "
                      "nor told it lost the lock" % (name, a, a.begin, a.end, b, b.begin, b.end,
                                                     (min(a.end, b.end) - b.begin) / 1000.0))


def check_tokens(res, name, ss):
    seen = {}
    for a, b in zip(ss, ss[1:]):
        if b.token <= a.token:
            res.error("token order",
                      "%r: %s began after %s but its token is not larger (%d <= %d)"
                      % (name, b, a, b.token, a.token))
    for s in ss:
        o = seen.get(s.token)
        if o is not None and s.token != 0 and o.pid != s.pid:
            res.error("double grant", "%r: token %d granted twice: %s and %s" % (name, s.token, o, s))
        elif o is not None and s.token != 0:
            # One process got the same token for two grants with a release
            # in between (failed above as token order): a hidden re-entrant
            # hold, e.g. a claim that committed after its acquire reported
            # an error (faultrun.py late_claim reproduces that case).
            res.stats["repeated_tokens"] += 1
        seen[s.token] = s


def check_leases(res, name, ss):
    for p, n in zip(ss, ss[1:]):
        if p.strategy not in ("insert", "optimistic") or p.released is not False:
            continue
        if p.lease_ms <= 0:
            continue
        earliest = p.last_req + p.lease_ms * 1000
        if p.release_cut and p.releasing is not None and p.rc == "ROWLOCK_ENOTOWNER":
            # Its release statement may have committed before the
            # connection was cut (the reply is what was lost); the lock was
            # then free from that commit, which came after `releasing`.
            earliest = min(earliest, p.releasing)
        eps = LEASE_EPS_US + p.lease_ms * LEASE_EPS_PPM // 1000
        res.stats["lease_checks"] += 1
        if n.begin < earliest - eps:
            res.error("lease",
                      "%r: %s began %.1f ms before the lease of %s (%s, last request at %d, lease "
                      "%d ms) could have ended" % (name, n, (earliest - n.begin) / 1000.0, p, p.how,
                                                  p.last_req, p.lease_ms))


def check_counter(res, name, ss, files):
    incs = [i for s in ss for i in s.incs]
    if not incs:
        return
    by_gid = {s.gid: s for s in ss}
    incs.sort(key=lambda i: (int(i["t1"]), int(i["t0"])))
    prev = None
    events = 0
    for i in incs:
        want = prev["gid"] if prev is not None else None
        if want is not None and i["prev"] == want:
            prev = i
            continue
        if want is None and i["prev"] == "-" and int(i["read"]) == 0:
            prev = i
            continue
        if want is None:
            # The first write of this log did not start from 0: an earlier
            # history (not ours) or a writer with no record.
            pass
        events += 1
        res.stats["lost_updates"] += 1
        a = by_gid.get(i["gid"])
        b = by_gid.get(want) if want else None
        c = by_gid.get(i["prev"])
        excused = any(x is not None and (x.excused or x.how == "killed") for x in (a, b, c))
        if excused:
            res.stats["excused_lost_updates"] += 1
        else:
            res.error("lost update",
                      "%r: counter write by %s (read %s written by %s) overwrote the increment of %s"
                      % (name, a, i["read"], i["prev"], b))
        prev = i
    final = int(prev["wrote"])
    if events == 0 and final != len(incs) + int(incs[0]["read"]):
        res.error("lost update", "%r: counter ends at %d after %d increments" % (name, final, len(incs)))
    if files is not None and name in files.get("counter", {}):
        fv, fg = files["counter"][name]
        if fv == final + 1 and fg != prev["gid"] and fg in by_gid and by_gid[fg].how in DIED:
            # Its writer died between the write and the record (the worker
            # writes the file, then logs): one more increment, unlogged.
            res.stats["unlogged_increments"] += 1
        elif (fv, fg) != (final, prev["gid"]):
            res.error("lost update", "%r: counter file says %d by %s, the history %d by %s"
                      % (name, fv, fg, final, prev["gid"]))
    res.stats["increments"] += len(incs)


def check_fence(res, name, ss, files):
    fences = [(f, s) for s in ss for f in s.fences]
    if not fences:
        return
    # Per name the log order is the store's order: sort by time, then keep
    # the log order for equal times (the sort is stable).
    fences.sort(key=lambda fs: int(fs[0]["t"]))
    highest = None
    rejected = 0
    for f, s in fences:
        tok = int(f["token"])
        should = highest is None or tok >= highest
        if bool(f["ok"]) != should:
            res.error("fence", "%r: store %s token %d with highest %s" % (
                name, "accepted" if f["ok"] else "rejected", tok, highest))
        if f["ok"]:
            highest = tok if highest is None else max(highest, tok)
        else:
            rejected += 1
            res.by_key[(s.strategy, s.via)]["rejected"] += 1
            if not (s.excused or s.how in ("killed",)):
                res.error("fence", "%r: write of %s rejected (token %d < %d) though it was neither "
                          "paused nor told it lost the lock" % (name, s, tok, int(f["highest"])))
    res.stats["rejected"] += rejected
    res.stats["fenced_writes"] += len(fences)
    if files is None or name not in files.get("rejects", {}):
        return
    # The journal against the log, write by write. The worker appends to the
    # journal before it logs the record, so a process killed in between
    # leaves a journal line the log lacks: excused only for a section that
    # died without an end record (killed, open, stopped by `rowlock run`).
    logged = collections.Counter((int(f["token"]), f["gid"]) for f, s in fences if not f["ok"])
    journal = collections.Counter(files["rejects"][name])
    by_gid = {s.gid: s for s in ss}
    for (tok, gid), n in sorted((journal - logged).items()):
        s = by_gid.get(gid)
        if s is not None and s.how in DIED and n == 1:
            res.stats["unlogged_rejects"] += 1
            continue
        res.error("fence", "%r: the store's journal has %d rejected write(s) of %s (token %d) the "
                  "history lacks" % (name, n, s if s is not None else gid, tok))
    for (tok, gid), n in sorted((logged - journal).items()):
        res.error("fence", "%r: the history has %d rejected write(s) of %s (token %d) the store's "
                  "journal lacks" % (name, n, by_gid.get(gid, gid), tok))


def check_dbfence(res, name, ss, files):
    recs = [(f, s) for s in ss for f in s.dbfences]
    rows = None if files is None else files.get("dbfence", {}).get(name)
    if not recs and not rows:
        return
    for f, s in recs:
        if f["rc"] == "ROWLOCK_EFENCED":
            res.stats["db_fence_refused"] += 1
            res.by_key[(s.strategy, s.via)]["rejected"] += 1
            if not (s.excused or s.how in ("killed",)):
                res.error("db fence", "%r: fenced write of %s refused (token %d) though it was neither "
                          "paused nor told it lost the lock" % (name, s, int(f["token"])))
        elif f.get("committed"):
            res.stats["db_fenced_commits"] += 1
    if rows is None:
        return
    by_seq = {}
    newest = None    # (token, seq, gid) of the newest grant's committed row so far
    for seq, tok, gid in sorted(rows):
        by_seq[seq] = (tok, gid)
        if newest is not None and tok < newest[0]:
            res.error("db fence", "%r: a stale grant's write committed: %s token %d at seq %d, after "
                      "%s token %d at seq %d" % (name, gid, tok, seq, newest[2], newest[0], newest[1]))
        if newest is None or tok > newest[0]:
            newest = (tok, seq, gid)
    for f, s in recs:
        if f.get("committed") and by_seq.get(int(f["seq"])) != (int(f["token"]), f["gid"]):
            res.error("db fence", "%r: %s logged a committed write (seq %s, token %s) the table does not "
                      "have" % (name, s, f["seq"], f["token"]))


def read_files(d, names):
    files = {"counter": {}, "rejects": {}, "dbfence": {}}
    for n in names:
        p = os.path.join(d, "counter." + n)
        if os.path.exists(p):
            with open(p) as f:
                v, g = f.read().split()[:2]
            files["counter"][n] = (int(v), g)
        p = os.path.join(d, "fence." + n + ".rejects")
        files["rejects"][n] = []
        if os.path.exists(p):
            with open(p) as f:
                for line in f:
                    if line.strip():
                        tok, gid = line.split()[:2]     # "TOKEN GID HIGHEST T"
                        files["rejects"][n].append((int(tok), gid))
    p = os.path.join(d, "dbfence.tsv")
    if os.path.exists(p):
        with open(p) as f:
            for line in f:
                if not line.strip():
                    continue
                n, seq, tok, gid = line.rstrip("\n").split("\t")
                files["dbfence"].setdefault(n, []).append((int(seq), int(tok), gid))
    return files


def check_paths(log, d=None):
    recs = load(log)
    files = None
    if d is not None:
        names = {r["name"] for r in recs if r.get("ev") == "begin"}
        files = read_files(d, names)
    return check(recs, files)


def main(argv):
    as_json = "--json" in argv
    args = [a for a in argv[1:] if a != "--json"]
    if not 1 <= len(args) <= 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        res = check_paths(*args)
    except (OSError, ValueError, KeyError) as e:
        print("check_history: %s" % e, file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps({"ok": res.ok, "errors": res.errors, "stats": dict(res.stats)}))
    else:
        for e in res.errors:
            print("check_history: " + e)
        print("check_history: %s; %s" % ("OK" if res.ok else "FAILED",
                                         ", ".join("%s %d" % kv for kv in sorted(res.stats.items()))))
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
