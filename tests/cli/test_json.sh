#!/usr/bin/env bash
# tests/cli/test_json.sh — machine output: --json on every command that
# prints a result (migrate, release --force, status, list, lock, permits,
# metrics, the reaper) is one valid JSON document with the documented keys,
# and shows every holder (exclusive, shared, semaphore, waiting, crashed);
# a flag that does not apply (--version --json, --help --json, --json
# --quiet, run --json) is refused with 64. The Prometheus exposition of
# `rowlock metrics` and `rowlock-reaper --metrics-file` is parsed strictly.
#
# Environment (set by tests/cli/cli.cmake): ROWLOCK_BIN_DIR, ROWLOCK_DEFAULTS_FILE.
# Validates with python3's json module (tools/install-deps installs python3).
# Own lock table (cli_json_locks). Output: "ok N - ..." lines, "P passed, F failed".
set -u
export LC_ALL=C
: "${ROWLOCK_BIN_DIR:?set ROWLOCK_BIN_DIR}"
: "${ROWLOCK_DEFAULTS_FILE:?set ROWLOCK_DEFAULTS_FILE}"
export ROWLOCK_DEFAULTS_FILE
RL=$ROWLOCK_BIN_DIR/rowlock
RP=$ROWLOCK_BIN_DIR/rowlock-reaper
T=cli_json_locks
P="js$$-"

# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"
# json_ok DESC TEXT PYTHON_EXPR: TEXT is exactly one JSON document on one line
# and EXPR (over `d`) is true.
json_ok() {
    local out
    if out=$(python3 -c '
import json, sys
text = sys.argv[1]
assert text.endswith("\n") and text.count("\n") == 1, "not one line: %r" % text
d = json.loads(text)
ok = eval(sys.argv[2])
sys.exit(0 if ok else 1)' "$2"$'\n' "$3" 2>&1); then
        pass "$1"
    else
        fail "$1" "output: $2" "check: $3" "$out"
    fi
}

out=$("$RL" --table=$T migrate --json)
json_ok "migrate --json: table, schema_from, schema_to, dry_run" "$out" \
    "d['table'] == '$T' and d['schema_to'] >= 1 and d['dry_run'] is False and isinstance(d['schema_from'], int)"
out=$("$RL" --table=$T migrate --json --dry-run)
json_ok "migrate --json --dry-run: nothing to do" "$out" \
    "d['dry_run'] is True and d['schema_from'] == d['schema_to']"

n="${P}a \"quoted\" name"
eval "$("$RL" --table=$T lock -l 60 "$n")" || fail "lock for the JSON checks"
out=$("$RL" --table=$T status --json "$n")
json_ok "status --json: the lock object" "$out" \
    "d['name'] == '''$n''' and d['held'] is True and d['token'] == $ROWLOCK_TOKEN and d['owner'] == '$ROWLOCK_OWNER'"
out=$("$RL" --table=$T list --json)
json_ok "list --json: an array of lock objects" "$out" \
    "isinstance(d, list) and any(x['name'] == '''$n''' and x['token'] == $ROWLOCK_TOKEN for x in d)"
out=$("$RL" --table=$T release --force --json "$n")
rc=$?
json_ok "release --force --json: released, and the lock as it was" "$out" \
    "d['released'] is True and d['lock']['name'] == '''$n''' and d['lock']['token'] == $ROWLOCK_TOKEN and d['lock']['held'] is True"
[[ $rc == 0 ]] && pass "release --force --json: exit 0" || fail "release --force --json: exit 0" "exit $rc"
out=$("$RL" --table=$T release --force --json "$n")
rc=$?
json_ok "release --force --json of a free name: released false" "$out" \
    "d['released'] is False and d['lock']['name'] == '''$n''' and d['lock']['held'] is False"
[[ $rc == 1 ]] && pass "release --force --json of a free name: exit 1" || fail "release --force --json of a free name: exit 1" "exit $rc"
"$RL" unlock >/dev/null 2>&1 # lost (75): the supervisor ends

out=$(bash -c '"$1" --table="$2" lock --json "$3"' _ "$RL" $T "${P}j")
json_ok "lock --json: handle, name, token, names, tokens, owner, strategy, lease_ms, pids" "$out" \
    "set(d) == {'handle','name','token','names','tokens','owner','strategy','lease_ms','supervisor_pid','watched_pid'} and d['name'] == '${P}j' and d['names'] == ['${P}j'] and d['tokens'] == [d['token']] and d['strategy'] == 'insert' and d['lease_ms'] == 30000"

out=$("$RP" --table=$T --grace 0 --json)
json_ok "rowlock-reaper --json: the summary object" "$out" \
    "d['table'] == '$T' and isinstance(d['purged'], int) and d['complete'] is True"

# ---- issue 25 item 7: every holder, in every command's JSON -----------------
# An exclusive lock: mode, permits and its one holder (the same keys as a
# shared holder's).
e="${P}excl"
eval "$("$RL" --table=$T lock -l 60 "$e")" || fail "lock $e"
EO=$ROWLOCK_OWNER ET=$ROWLOCK_TOKEN EH=$ROWLOCK_HANDLE
HKEYS="{'owner','mode','granted','live','count','token','ticket','acquired_at','acquired_at_us','expires_at','expires_at_us','expires_in_ms'}"
out=$("$RL" --table=$T status --json "$e")
json_ok "status --json of an exclusive lock: mode, permits, its one holder" "$out" \
    "d['mode'] == 'exclusive' and d['permits'] == 0 and len(d['holders']) == 1 and set(d['holders'][0]) == $HKEYS and d['holders'][0]['owner'] == '$EO' and d['holders'][0]['token'] == $ET and d['holders'][0]['granted'] is True and d['holders'][0]['live'] is True"

# A for-update lock: a row lock, whose owner and mode the row does not say.
f="${P}forupdate"
eval "$("$RL" --table=$T lock -S for-update --pid $$ "$f")" || fail "lock -S for-update"
out=$("$RL" --table=$T status --json "$f")
json_ok "status --json of a for-update lock: held, one holder, owner and mode null" "$out" \
    "d['held'] is True and d['strategy'] == 'for-update' and d['mode'] is None and len(d['holders']) == 1 and set(d['holders'][0]) == $HKEYS and d['holders'][0]['owner'] is None and d['holders'][0]['mode'] is None"
"$RL" unlock >/dev/null 2>&1

# Two shared holders (their supervisors watch this shell), then a queued
# exclusive waiter.
s="${P}shared \"q\""
eval "$("$RL" --table=$T lock -s -l 60 --pid $$ "$s")" || fail "lock -s (1)"
S1=$ROWLOCK_OWNER
eval "$("$RL" --table=$T lock -s -l 60 --pid $$ "$s")" || fail "lock -s (2)"
S2=$ROWLOCK_OWNER SH2=$ROWLOCK_HANDLE
"$RL" --table=$T lock -w 60 --pid $$ "$s" >/dev/null 2>&1 &
WAITER=$!
for _ in $(seq 50); do
    "$RL" --table=$T status --json "$s" 2>/dev/null | grep -q '"granted":false' && break
    sleep 0.1
done
out=$("$RL" --table=$T status --json "$s")
json_ok "status --json of a shared lock: mode shared, both holders and the waiter" "$out" \
    "d['held'] is True and d['mode'] == 'shared' and d['count'] == 2 and sorted(h['owner'] for h in d['holders'] if h['granted']) == sorted(['$S1', '$S2']) and all(h['mode'] == 'shared' and set(h) == $HKEYS for h in d['holders'] if h['granted']) and [h['mode'] for h in d['holders'] if not h['granted']] == ['exclusive']"
out=$("$RL" --table=$T list --json)
json_ok "list --json: the exclusive lock and the shared one with every holder, ordered by name" "$out" \
    "[x['name'] for x in d] == sorted([x['name'] for x in d], key=lambda n: n.encode()) and any(x['name'] == '$e' and x['holders'][0]['owner'] == '$EO' for x in d) and any(x['name'] == '''$s''' and x['mode'] == 'shared' and x['held'] is True and len([h for h in x['holders'] if h['granted']]) == 2 for x in d)"

# A semaphore: its permits, in status and from permits --json.
m="${P}sem"
eval "$("$RL" --table=$T lock --permits=3 -l 60 --pid $$ "$m")" || fail "lock --permits=3"
out=$("$RL" --table=$T status --json "$m")
json_ok "status --json of a semaphore: permits 3, one shared holder" "$out" \
    "d['permits'] == 3 and d['mode'] == 'shared' and len(d['holders']) == 1 and d['holders'][0]['owner'] == '$ROWLOCK_OWNER'"
out=$("$RL" --table=$T status "$m")
[[ $out == *"HOLDERS OF"*" shared "*"permits: 3"* ]] && pass "status (text) of a semaphore with one holder: its holder line and permits" \
    || fail "status (text) of a semaphore with one holder: its holder line and permits" "$out"
out=$("$RL" --table=$T permits --json "$m" 5)
json_ok "permits --json: name and permits" "$out" "d == {'name': '$m', 'permits': 5}"
out=$("$RL" --table=$T status --json "$m")
json_ok "status --json after permits 5: permits 5" "$out" "d['permits'] == 5"

# release --force --owner: the exclusive holder too (it exited 1 before).
out=$("$RL" --table=$T release --force --owner="nobody:1:x" --json "$e")
rc=$?
json_ok "release --force --owner=OTHER --json of an exclusive lock: not released, still held" "$out" \
    "d['released'] is False and d['released_count'] == 0 and d['lock']['owner'] == '$EO'"
[[ $rc == 1 ]] && pass "release --force --owner=OTHER: exit 1" || fail "release --force --owner=OTHER: exit 1" "exit $rc"
out=$("$RL" --table=$T release --force --owner="$EO" --json "$e")
rc=$?
json_ok "release --force --owner=HOLDER --json of an exclusive lock: released, the lock as it was" "$out" \
    "d['released'] is True and d['released_count'] == 1 and d['lock']['held'] is True and d['lock']['holders'][0]['owner'] == '$EO' and d['lock']['token'] == $ET"
[[ $rc == 0 ]] && pass "release --force --owner=HOLDER of an exclusive lock: exit 0" || fail "release --force --owner=HOLDER of an exclusive lock: exit 0" "exit $rc"
"$RL" --table=$T status "$e" >/dev/null
rc=$?
[[ $rc == 1 ]] && pass "... and it is free afterwards (status 1)" || fail "... and it is free afterwards (status 1)" "exit $rc"
ROWLOCK_HANDLE=$EH "$RL" unlock >/dev/null 2>&1 # lost (75)
out=$("$RL" --table=$T release --force --owner="$S2" --json "$s")
rc=$?
json_ok "release --force --owner=ONE --json of a shared lock: one released, both in the lock" "$out" \
    "d['released'] is True and d['released_count'] == 1 and len([h for h in d['lock']['holders'] if h['granted']]) == 2"
[[ $rc == 0 ]] && pass "release --force --owner=ONE of a shared lock: exit 0" || fail "release --force --owner=ONE of a shared lock: exit 0" "exit $rc"
ROWLOCK_HANDLE=$SH2 "$RL" unlock >/dev/null 2>&1

# A crashed shared holder: list --stale --json shows it.
c="${P}crashed"
eval "$("$RL" --table=$T lock -s -l 1 --pid $$ "$c")" || fail "lock -s -l 1"
kill -9 "${ROWLOCK_HANDLE%%.*}" 2>/dev/null
sleep 1.5
out=$("$RL" --table=$T list --stale --json)
json_ok "list --stale --json: a shared lock whose only holder crashed" "$out" \
    "any(x['name'] == '$c' and x['stale'] is True and x['held'] is False and x['holders'][0]['live'] is False for x in d)"

# ---- issue 25 item 9: metrics -------------------------------------------------
# prom_ok DESC TEXT EXPR: TEXT is a valid text exposition (every sample
# after its HELP and TYPE, names rowlock_*, counters *_total, label values
# escaped); EXPR holds, with g(NAME, LABEL=VALUE...) a sample's value (None
# if absent) and v every sample ((name, frozenset(labels)) -> value).
prom_ok() {
    local out
    if out=$(python3 -c '
import re, sys
text = sys.argv[1]
assert text.endswith("\n"), "no final newline"
typed, helped, v = {}, set(), {}
lab = r"([a-zA-Z_][a-zA-Z0-9_]*)=\"((?:[^\"\\\n]|\\[\\\"n])*)\""
for line in text[:-1].split("\n"):
    m = re.fullmatch(r"# HELP (rowlock_[a-z_]+) \S.*", line)
    if m:
        helped.add(m.group(1)); continue
    m = re.fullmatch(r"# TYPE (rowlock_[a-z_]+) (gauge|counter)", line)
    if m:
        assert m.group(1) in helped, "TYPE before HELP: " + line
        assert m.group(1) not in typed, "TYPE twice: " + line
        typed[m.group(1)] = m.group(2); continue
    m = re.fullmatch(r"(rowlock_[a-z_]+)\{(" + lab + r"(?:," + lab + r")*)\} (-?[0-9.]+(?:e[+-]?[0-9]+)?)", line)
    assert m, "bad line: %r" % line
    name = m.group(1)
    assert name in typed, "sample before TYPE: " + line
    assert (typed[name] == "counter") == name.endswith("_total"), "counter naming: " + line
    labels = {}
    for k, val in re.findall(lab, m.group(2)):
        labels[k] = re.sub(r"\\(.)", lambda x: {"n": "\n"}.get(x.group(1), x.group(1)), val)
    key = (name, frozenset(labels.items()))
    assert key not in v, "sample twice: " + line
    v[key] = float(m.group(m.lastindex))
def g(*metric, **labels):
    return v.get((metric[0], frozenset(labels.items())))
sys.exit(0 if eval(sys.argv[2]) else 1)' "$2"$'\n' "$3" 2>&1); then
        pass "$1"
    else
        fail "$1" "output: $2" "check: $3" "$out"
    fi
}
sleep 1.2 # the oldest grant is over a second old
n3="${P}odd \"label\" \\ name"
eval "$("$RL" --table=$T lock -l 60 --pid $$ "$n3")" || fail "lock for the metrics label"
out=$("$RL" --table=$T metrics)
prom_ok "metrics: a valid exposition; names held, holders and waiters per mode, stale rows, oldest lease age" "$out" \
    "g('rowlock_names_held', table='$T') >= 3 and g('rowlock_holders', table='$T', mode='shared') >= 2 and g('rowlock_holders', table='$T', mode='exclusive') >= 1 and g('rowlock_waiters', table='$T', mode='exclusive') == 1 and g('rowlock_waiters', table='$T', mode='shared') == 0 and g('rowlock_stale_rows', table='$T') >= 1 and g('rowlock_oldest_lease_age_seconds', table='$T') >= 1 and g('rowlock_oldest_stale_age_seconds', table='$T') > 0 and g('rowlock_rows', table='$T') >= 4 and not any(k[0] == 'rowlock_lock_held_seconds' for k in v)"
out=$("$RL" --table=$T metrics --names)
prom_ok "metrics --names: one series per held name, the label value escaped" "$out" \
    "g('rowlock_lock_held_seconds', table='$T', name='''$n3''', mode='exclusive') is not None and g('rowlock_lock_held_seconds', table='$T', name='''$s''', mode='shared') >= 1 and len([k for k in v if k[0] == 'rowlock_lock_held_seconds']) == g('rowlock_names_held', table='$T')"
out=$("$RL" --table=$T metrics --json --names)
json_ok "metrics --json --names: the same counts as one object" "$out" \
    "d['table'] == '$T' and d['holders_shared'] >= 2 and d['waiters_exclusive'] == 1 and isinstance(d['counted_at_us'], int) and any(x['name'] == '''$n3''' for x in d['held_names'])"
kill "$WAITER" 2>/dev/null; wait "$WAITER" 2>/dev/null

# rowlock-reaper --metrics-file: written atomically (a new file each run,
# no temporary left), readable by a collector running as another user,
# counters carried over from run to run, a failed run recorded.
MD=$(mktemp -d)
MF=$MD/rowlock.prom
umask 022
"$RP" --table=$T --grace 0 --quiet --metrics-file "$MF"
rc=$?
[[ $rc == 0 ]] && pass "reaper --metrics-file: exit 0" || fail "reaper --metrics-file: exit 0" "exit $rc"
ino1=$(stat -c %i "$MF" 2>/dev/null)
prom_ok "reaper --metrics-file: the table's gauges, one run, the stale shared holder purged" "$(cat "$MF" 2>/dev/null)" \
    "g('rowlock_reaper_runs_total', table='$T') == 1 and g('rowlock_reaper_failures_total', table='$T') == 0 and g('rowlock_reaper_purged_rows_total', table='$T') >= 1 and g('rowlock_reaper_last_run_purged_rows', table='$T') == g('rowlock_reaper_purged_rows_total', table='$T') and g('rowlock_reaper_last_run_success', table='$T') == 1 and g('rowlock_reaper_last_run_complete', table='$T') == 1 and g('rowlock_stale_rows', table='$T') == 0 and g('rowlock_reaper_last_run_timestamp_seconds', table='$T') > 1.7e9"
p1=$(sed -n 's/^rowlock_reaper_purged_rows_total{[^}]*} \([0-9]*\)$/\1/p' "$MF" 2>/dev/null)
"$RP" --table=$T --grace 0 --quiet --metrics-file "$MF"
prom_ok "reaper --metrics-file, second run: counters carried over" "$(cat "$MF" 2>/dev/null)" \
    "g('rowlock_reaper_runs_total', table='$T') == 2 and g('rowlock_reaper_purged_rows_total', table='$T') == ${p1:-0} + g('rowlock_reaper_last_run_purged_rows', table='$T')"
ino2=$(stat -c %i "$MF" 2>/dev/null)
[[ -n $ino1 && $ino1 != "$ino2" ]] && pass "reaper --metrics-file: replaced by rename, not rewritten in place" \
    || fail "reaper --metrics-file: replaced by rename, not rewritten in place" "inodes $ino1 $ino2"
[[ $(stat -c %a "$MF" 2>/dev/null) == 644 ]] && pass "reaper --metrics-file: mode 644 under umask 022" \
    || fail "reaper --metrics-file: mode 644 under umask 022" "mode $(stat -c %a "$MF" 2>/dev/null)"
left=$(find "$MD" -mindepth 1 ! -name rowlock.prom)
[[ -z $left ]] && pass "reaper --metrics-file: no temporary file left" || fail "reaper --metrics-file: no temporary file left" "$left"
"$RP" --table=$T --host=127.0.0.1 --port=1 --connect-timeout=2 --quiet --metrics-file "$MF" 2>/dev/null
rc=$?
prom_ok "reaper --metrics-file, a run that cannot connect: recorded as a failure (exit $rc)" "$(cat "$MF" 2>/dev/null)" \
    "$rc == 69 and g('rowlock_reaper_runs_total', table='$T') == 3 and g('rowlock_reaper_failures_total', table='$T') == 1 and g('rowlock_reaper_last_run_success', table='$T') == 0 and g('rowlock_rows', table='$T') is None"
"$RP" --table=$T --dry-run --metrics-file "$MF" >/dev/null 2>&1
rc=$?
[[ $rc == 64 ]] && pass "reaper --metrics-file --dry-run: refused (64)" || fail "reaper --metrics-file --dry-run: refused (64)" "exit $rc"
rm -rf "$MD"

# Flags that do not apply are refused, not ignored.
for args in "--version --json" "--json --version" "--version extra" "--help --json" "run --json x true" \
    "unlock --json" "metrics extra"; do
    # shellcheck disable=SC2086 # word-split on purpose
    "$RL" $args >/dev/null 2>&1
    rc=$?
    [[ $rc == 64 ]] && pass "rowlock $args: refused (64)" || fail "rowlock $args: refused (64)" "exit $rc"
done
for args in "--version --json" "--json --quiet" "--help --json"; do
    # shellcheck disable=SC2086
    "$RP" $args >/dev/null 2>&1
    rc=$?
    [[ $rc == 64 ]] && pass "rowlock-reaper $args: refused (64)" || fail "rowlock-reaper $args: refused (64)" "exit $rc"
done
"$RL" --version >/dev/null && pass "rowlock --version alone: 0" || fail "rowlock --version alone: 0"
"$RL" --help status >/dev/null && pass "rowlock --help COMMAND: 0" || fail "rowlock --help COMMAND: 0"

tap_done
