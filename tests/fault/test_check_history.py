#!/usr/bin/env python3
"""Unit tests of check_history.py on synthetic histories (no server).

Each bad history is the smallest one that shows the problem; each has a
twin that differs only in what makes it legitimate (the holder was paused,
told it lost the lock, ...), which must pass.
"""
import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_history as ch  # noqa: E402

MS = 1000


class H:
    """A history builder: sections with tokens, times in ms."""

    def __init__(self):
        self.recs = []
        self.counter = {}

    def section(self, gid, token, begin, end, name="n", strategy="insert", via="lib", how="completed",
                req=None, lease_ms=2000, inc=True, inc_prev=None, fence=None, ppid=1,
                renew=None):
        pid = int(gid.split(".")[0].split("-")[0])
        self.recs.append({"ev": "begin", "name": name, "gid": gid, "pid": pid, "ppid": ppid,
                          "token": token, "strategy": strategy, "via": via,
                          "req": (begin - 1 if req is None else req) * MS, "t": begin * MS,
                          "lease_ms": lease_ms})
        if inc:
            prev_gid, v = self.counter.get(name, ("-", 0))
            if inc_prev is not None:          # the read saw an older write
                prev_gid, v = inc_prev
            self.recs.append({"ev": "inc", "name": name, "gid": gid, "pid": pid, "token": token,
                              "read": v, "prev": prev_gid, "wrote": v + 1, "t0": begin * MS + 1,
                              "t1": begin * MS + 5})
            self.counter[name] = (gid, v + 1)
        if renew is not None:
            self.recs.append({"ev": "renew", "name": name, "gid": gid, "pid": pid, "token": token,
                              "req": renew * MS, "t": renew * MS + 1, "rc": "ROWLOCK_OK"})
        if fence is not None:
            t, ok, highest = fence
            self.recs.append({"ev": "fence", "name": name, "gid": gid, "pid": pid, "token": token,
                              "ok": ok, "highest": highest, "t": t * MS})
        if end is not None:
            self.recs.append({"ev": "end", "name": name, "gid": gid, "pid": pid, "token": token,
                              "t": end * MS, "how": how, "rc": "ROWLOCK_OK"})
        return self

    def fault(self, kind, pid, t):
        self.recs.append({"ev": "fault", "kind": kind, "pid": pid, "t": t * MS})
        return self

    def cli_exit(self, pid, rc, t):
        self.recs.append({"ev": "cli_exit", "pid": pid, "rc": rc, "t": t * MS})
        return self

    def check(self):
        # Records are checked in time order as a real log would hold them.
        recs = sorted(self.recs, key=lambda r: r.get("t", r.get("t1", 0)))
        return ch.check(recs)


class TestClean(unittest.TestCase):
    def test_sequential_sections_pass(self):
        h = H().section("1.1", 10, 0, 100).section("2.1", 11, 101, 200).section("1.2", 12, 201, 300)
        r = h.check()
        self.assertEqual(r.errors, [])
        self.assertEqual(r.stats["grants"], 3)
        self.assertEqual(r.stats["increments"], 3)


class TestDoubleGrant(unittest.TestCase):
    def test_overlap_of_two_live_holders_fails(self):
        r = H().section("1.1", 10, 0, 100).section("2.1", 11, 50, 150, inc=False).check()
        self.assertIn("double grant", r.kinds())

    def test_overlap_with_a_paused_holder_passes(self):
        h = H().section("1.1", 10, 0, 3000).section("2.1", 11, 2500, 2600, inc=False)
        h.fault("pause", 1, 100).fault("resume", 1, 2900)
        r = h.check()
        self.assertNotIn("double grant", r.kinds())
        self.assertEqual(r.stats["excused_overlaps"], 1)

    def test_overlap_with_a_holder_told_it_lost_the_lock_passes(self):
        r = H().section("1.1", 10, 0, 3000, how="lost").section("2.1", 11, 2500, 2600,
                                                                 inc=False).check()
        self.assertNotIn("double grant", r.kinds())

    def test_cli_holder_is_not_excused_by_its_exit_75(self):
        # `rowlock run` promises COMMAND is gone before the lock can pass on
        # (issue 24): its exit 75 excuses no overlap, whatever COMMAND's end.
        for how in ("completed", "terminated"):
            h = H().section("1.1", 10, 0, 3000, via="cli", ppid=7, how=how).section(
                "2.1", 11, 2500, 2600, inc=False)
            h.cli_exit(7, 75, 3001)
            self.assertIn("double grant", h.check().kinds(), how)
        # Stopped before the next grant: fine.
        h = H().section("1.1", 10, 0, 2400, via="cli", ppid=7, how="terminated").section(
            "2.1", 11, 2500, 2600)
        h.cli_exit(7, 75, 2401)
        self.assertEqual(h.check().errors, [])
        # A paused `rowlock run` group is the paused-holder case: excused.
        h = H().section("1.1", 10, 0, 3000, via="cli", ppid=7).section("2.1", 11, 2500, 2600,
                                                                       inc=False)
        h.fault("pause", 7, 100).cli_exit(7, 75, 3001)
        self.assertNotIn("double grant", h.check().kinds())

    def test_a_slow_command_killed_by_rowlock_run_ends_with_its_ticks(self):
        # FAULT_SLOW_STOP: COMMAND ignores SIGTERM and ticks; rowlock run
        # SIGKILLs it (no end record). Ticks until 2300: fine before a grant
        # at 2500, a double grant when they go on to 2600.
        for last, bad in ((2300, False), (2600, True)):
            h = H().section("1.1", 10, 0, None, via="cli", ppid=7)
            for t in range(0, last + 1, 50):
                h.recs.append({"ev": "tick", "gid": "1.1", "pid": 1, "t": t * MS, "next": (t + 55) * MS})
            h.section("2.1", 11, 2500, 2700, inc=False).cli_exit(7, 75, 2800)
            self.assertEqual("double grant" in h.check().kinds(), bad, last)

    def test_a_dropped_for_update_session_excuses_a_cli_holder(self):
        # The documented exception: the server ends a dropped session and
        # grants the next waiter at once; COMMAND hears of it ms later.
        def hist(strategy, drop):
            h = H().section("1.1", 10, 0, 1010, via="cli", ppid=7, how="terminated",
                            strategy=strategy)
            if drop:
                h.recs.append({"ev": "fault", "kind": "relay_drop", "pid": 7, "group": "n", "t": 1000 * MS})
            return h.section("2.1", 11, 1002, 1100, inc=False, strategy=strategy).cli_exit(7, 75, 1011)
        self.assertNotIn("double grant", hist("for-update", True).check().kinds())
        self.assertIn("double grant", hist("for-update", False).check().kinds())
        self.assertIn("double grant", hist("insert", True).check().kinds())

    def test_a_killed_holder_ends_at_the_kill(self):
        # Killed at 100 (no end record); the next grant at 2200 does not overlap.
        h = H().section("1.1", 10, 0, None).fault("kill", 1, 100).section("2.1", 11, 2200, 2300)
        self.assertEqual(h.check().errors, [])
        # Granted while the killed holder was still alive: a double grant.
        h = H().section("1.1", 10, 0, None).fault("kill", 1, 100).section("2.1", 11, 50, 60,
                                                                          inc=False)
        self.assertIn("double grant", h.check().kinds())

    def test_a_holder_killed_after_releasing_ends_at_releasing(self):
        # fault_db_error on a fresh machine: holder 1 logged `releasing` at
        # 490, its release committed, holder 2 was granted at 492, and the
        # scenario's shutdown killed holder 1 at 493, inside its release
        # call. Its protected work ended at 490: no double grant.
        h = H().section("1.1", 10, 0, None)
        h.recs.append({"ev": "releasing", "name": "n", "gid": "1.1", "pid": 1, "t": 490 * MS})
        h.section("2.1", 11, 492, 600).fault("shutdown", 1, 493)
        self.assertEqual(h.check().errors, [])
        # Killed before it logged `releasing`: still inside its protected
        # work when holder 2 was granted, a double grant.
        h = H().section("1.1", 10, 0, None).section("2.1", 11, 492, 600).fault("shutdown", 1, 493)
        self.assertIn("double grant", h.check().kinds())
        # `releasing` after the next grant does not hide the overlap.
        h = H().section("1.1", 10, 0, None)
        h.recs.append({"ev": "releasing", "name": "n", "gid": "1.1", "pid": 1, "t": 495 * MS})
        h.section("2.1", 11, 492, 600).fault("shutdown", 1, 497)
        self.assertIn("double grant", h.check().kinds())

    def test_the_same_token_twice_is_a_double_grant(self):
        r = H().section("1.1", 10, 0, 100).section("2.1", 10, 200, 300).check()
        self.assertIn("double grant", r.kinds())


class TestPidReuse(unittest.TestCase):
    """A long soak spawns more processes than pid_max: pids repeat."""

    def test_one_gid_beginning_twice_is_refused(self):
        h = H().section("1.0", 10, 0, 100).section("1.0", 11, 200, 300)
        with self.assertRaises(ValueError):
            h.check()

    def test_a_reused_rowlock_run_pid_is_matched_by_time(self):
        # Two sections whose `rowlock run` had pid 7: the first exited 75
        # (it lost the lock), the second exited 0 later. The second exit
        # must not be taken for the first: one section counts as lost.
        h = H().section("5-a.0", 10, 0, 3000, via="cli", ppid=7)
        h.cli_exit(7, 75, 3001)
        h.section("6-c.0", 12, 5000, 5100, via="cli", ppid=7).cli_exit(7, 0, 5101)
        r = h.check()
        self.assertEqual(r.errors, [])
        self.assertEqual(r.stats["lost"], 1)


class TestTokens(unittest.TestCase):
    def test_token_not_increasing_in_grant_order_fails(self):
        r = H().section("1.1", 10, 0, 100).section("2.1", 9, 101, 200).check()
        self.assertIn("token order", r.kinds())

    def test_one_process_given_the_same_token_again_is_token_order_not_double_grant(self):
        r = H().section("1.1", 10, 0, 100).section("1.2", 10, 101, 200).check()
        self.assertEqual(r.kinds(), ["token order"])

    def test_repeated_token_after_a_failed_acquire_fails_too(self):
        # Once excused as "known bug (late claim)": the checker excuses no
        # failure class, so the bug's return would be seen.
        h = H().section("1.1", 10, 0, 100)
        h.recs.append({"ev": "dberr", "name": "n", "gid": "-", "pid": 1, "op": "acquire",
                       "rc": "ROWLOCK_EDB", "errno": 2013, "injected": 0, "t": 150 * MS})
        h.section("1.2", 11, 200, 300).section("1.3", 11, 301, 400)
        self.assertEqual(h.check().kinds(), ["token order"])

    def test_names_are_independent(self):
        r = H().section("1.1", 10, 0, 100, name="a").section("2.1", 9, 50, 200, name="b").check()
        self.assertEqual(r.errors, [])


class TestLostUpdate(unittest.TestCase):
    def test_write_that_did_not_see_the_previous_one_fails(self):
        # 2.1 read the value before 1.1's write (both read 0): 1.1's increment is lost.
        h = H().section("1.1", 10, 0, 100).section("2.1", 11, 101, 200, inc_prev=("-", 0))
        self.assertIn("lost update", h.check().kinds())

    def test_lost_update_by_a_paused_holder_is_excused(self):
        h = H().section("1.1", 10, 0, 100).section("2.1", 11, 101, 200, inc_prev=("-", 0))
        h.fault("pause", 2, 150).fault("resume", 2, 160)
        r = h.check()
        self.assertNotIn("lost update", r.kinds())
        self.assertEqual(r.stats["excused_lost_updates"], 1)

    def test_final_counter_file_must_agree(self):
        h = H().section("1.1", 10, 0, 100).section("2.1", 11, 101, 200)
        recs = sorted(h.recs, key=lambda r: r.get("t", r.get("t1", 0)))
        ok = ch.check(recs, {"counter": {"n": (2, "2.1")}, "rejects": {}})
        self.assertEqual(ok.errors, [])
        bad = ch.check(recs, {"counter": {"n": (1, "2.1")}, "rejects": {}})
        self.assertIn("lost update", bad.kinds())

    def test_counter_file_one_ahead_by_a_writer_killed_before_its_record(self):
        # 3.1 wrote 3 and was killed before logging it: excused; the same
        # file by a section that lived to its end record is not.
        for end, ok in ((None, True), (400, False)):
            h = H().section("1.1", 10, 0, 100).section("2.1", 11, 101, 200)
            h.section("3.1", 12, 201, end, inc=False)
            if end is None:
                h.fault("kill", 3, 300)
            recs = sorted(h.recs, key=lambda r: r.get("t", r.get("t1", 0)))
            r = ch.check(recs, {"counter": {"n": (3, "3.1")}, "rejects": {}})
            if ok:
                self.assertEqual(r.errors, [])
                self.assertEqual(r.stats["unlogged_increments"], 1)
            else:
                self.assertIn("lost update", r.kinds())


class TestLease(unittest.TestCase):
    def test_grant_before_a_killed_holders_lease_ended_fails(self):
        # Holder 1 asked at 0 with a 2000 ms lease and was killed at 100: nobody
        # may begin before 2000.
        h = H().section("1.1", 10, 1, None, req=0).fault("kill", 1, 100)
        h.section("2.1", 11, 1500, 1600)
        self.assertIn("lease", h.check().kinds())

    def test_grant_after_the_lease_passes_and_renewals_count(self):
        h = H().section("1.1", 10, 1, None, req=0).fault("kill", 1, 100).section("2.1", 11, 2001, 2100)
        self.assertEqual(h.check().errors, [])
        # Renewed at 600: the lease ran to 2600.
        h = H().section("1.1", 10, 1, None, req=0, renew=600).fault("kill", 1, 700)
        h.section("2.1", 11, 2100, 2200)
        self.assertIn("lease", h.check().kinds())

    def test_a_rowlock_run_that_exited_75_may_have_released(self):
        # `rowlock run` terminated COMMAND (lease in doubt) and then released
        # on a fresh connection: the next grant may come before the lease end.
        h = H().section("1.1", 10, 1, 500, req=0, via="cli", ppid=7, how="terminated")
        h.cli_exit(7, 75, 510).section("2.1", 11, 600, 700)
        self.assertEqual(h.check().errors, [])
        # Killed (no release possible): the lease holds.
        h = H().section("1.1", 10, 1, None, req=0, via="cli", ppid=7).fault("kill", 7, 500)
        h.section("2.1", 11, 600, 700)
        self.assertIn("lease", h.check().kinds())

    def test_a_release_cut_off_may_have_committed(self):
        # Holder 1 renewed at 600 (lease to 2600) and called release at 620;
        # the connection was cut (a blackhole) before the reply, the retry
        # found the row not its own: lost. Its first attempt may have
        # committed, so holder 2 may begin any time after 620 (fault_soak,
        # seed 2684: begun 520 ms after the last renewal).
        def history(cut, begin2, errno=2013, injected=0, rc="ROWLOCK_ENOTOWNER"):
            h = H().section("1.1", 10, 1, None, req=0, renew=600, inc=False)
            h.recs.append({"ev": "releasing", "name": "n", "gid": "1.1", "pid": 1, "t": 620 * MS})
            if cut:
                h.recs.append({"ev": "dberr", "name": "n", "gid": "1.1", "pid": 1, "op": "release",
                               "rc": "ROWLOCK_EDB", "errno": errno, "injected": injected, "t": 1620 * MS})
            h.recs.append({"ev": "end", "name": "n", "gid": "1.1", "pid": 1, "token": 10,
                           "t": 620 * MS, "how": "lost", "rc": rc})
            return h.section("2.1", 11, begin2, begin2 + 100)
        self.assertEqual(history(True, 1100).check().errors, [])
        # The release answered "not yours" at once: the lock had been taken
        # before it, and the lease bounds that.
        self.assertIn("lease", history(False, 1100).check().kinds())
        # Cut, but the next grant came before the release was even sent.
        self.assertIn("lease", history(True, 610).check().kinds())
        # An injected error fails the statement before it is sent; busy
        # retries (1205) rolled back; a retry that released (rc 0, the
        # section lost by its keeper) held the row until then: no excuse.
        self.assertIn("lease", history(True, 1100, injected=1).check().kinds())
        self.assertIn("lease", history(True, 1100, errno=1205).check().kinds())
        self.assertIn("lease", history(True, 1100, rc="ROWLOCK_OK").check().kinds())

    def test_for_update_has_no_lease(self):
        h = H().section("1.1", 10, 1, None, req=0, strategy="for-update").fault("kill", 1, 100)
        h.section("2.1", 11, 150, 200, strategy="for-update")
        self.assertEqual(h.check().errors, [])

    def test_a_released_lock_may_be_taken_at_once(self):
        h = H().section("1.1", 10, 1, 100, req=0).section("2.1", 11, 101, 200)
        self.assertEqual(h.check().errors, [])


class TestFence(unittest.TestCase):
    def test_rejected_write_from_a_paused_holder_passes(self):
        h = H().section("2.1", 11, 2100, 2200, fence=(2150, 1, 0))
        h.section("1.1", 10, 0, 3000, fence=(2900, 0, 11), how="lost", inc=False)
        h.fault("pause", 1, 100)
        r = h.check()
        self.assertEqual(r.errors, [])
        self.assertEqual(r.stats["rejected"], 1)

    def test_rejected_write_from_a_live_holder_fails(self):
        h = H().section("1.1", 10, 0, 100, fence=(90, 1, 0))
        h.section("2.1", 13, 101, 200, fence=(150, 1, 10))
        h.section("3.1", 12, 201, 300, fence=(250, 0, 13))   # a stale token, yet never told
        self.assertIn("fence", h.check().kinds())

    def test_store_that_accepts_an_older_token_fails(self):
        h = H().section("2.1", 11, 101, 200, fence=(150, 1, 0))
        h.section("1.1", 10, 0, 3000, fence=(2900, 1, 11), how="lost", inc=False)
        self.assertIn("fence", h.check().kinds())


    @staticmethod
    def paused_then_killed(end):
        # 1.1 (token 10) is paused past its lease; 2.1 (11) takes the lock and
        # writes; 1.1 resumes and its write is rejected. With end=None it is
        # killed at 2900, after journalling the reject and before logging it.
        h = H().section("2.1", 11, 2100, 2200, fence=(2150, 1, 0))
        h.section("1.1", 10, 0, end, how="lost", inc=False)
        h.fault("pause", 1, 100).fault("resume", 1, 2800)
        if end is None:
            h.fault("kill", 1, 2900)
        return sorted(h.recs, key=lambda r: r.get("t", r.get("t1", 0)))

    def test_journal_line_of_a_writer_killed_before_its_record_passes(self):
        r = ch.check(self.paused_then_killed(None), {"counter": {}, "rejects": {"n": [(10, "1.1")]}})
        self.assertEqual(r.errors, [])
        self.assertEqual(r.stats["unlogged_rejects"], 1)

    def test_journal_line_the_log_lacks_of_a_living_writer_fails(self):
        r = ch.check(self.paused_then_killed(3000), {"counter": {}, "rejects": {"n": [(10, "1.1")]}})
        self.assertIn("fence", r.kinds())

    def test_logged_reject_the_journal_lacks_fails(self):
        h = H().section("2.1", 11, 2100, 2200, fence=(2150, 1, 0))
        h.section("1.1", 10, 0, 3000, fence=(2900, 0, 11), how="lost", inc=False)
        h.fault("pause", 1, 100)
        recs = sorted(h.recs, key=lambda r: r.get("t", r.get("t1", 0)))
        self.assertEqual(ch.check(recs, {"counter": {}, "rejects": {"n": [(10, "1.1")]}}).errors, [])
        self.assertIn("fence", ch.check(recs, {"counter": {}, "rejects": {"n": []}}).kinds())
        self.assertIn("fence", ch.check(recs, {"counter": {}, "rejects": {"n": [(10, "9.1")]}}).kinds())


class TestDbFence(unittest.TestCase):
    """Writes fenced inside the application's transaction (check 6)."""

    @staticmethod
    def dbfence(h, gid, token, seq, t, rc="ROWLOCK_OK", committed=1, name="n"):
        pid = int(gid.split(".")[0].split("-")[0])
        h.recs.append({"ev": "dbfence", "name": name, "gid": gid, "pid": pid, "token": token,
                       "seq": seq, "rc": rc, "committed": committed, "form": "c", "t": t * MS})

    def paused_history(self, late_rc, late_committed):
        # 1.1 is paused past its lease; 2.1 takes over and commits seq 2;
        # 1.1, resumed, tries a fenced write at 2900.
        h = H().section("2.1", 11, 2100, 2200, fence=(2150, 1, 0))
        h.section("1.1", 10, 0, 3000, fence=(2950, 0, 11), how="lost", inc=False)
        h.fault("pause", 1, 100)
        self.dbfence(h, "1.1", 10, 1, 50)
        self.dbfence(h, "2.1", 11, 2, 2160)
        self.dbfence(h, "1.1", 10, 3 if late_committed else 0, 2900, rc=late_rc, committed=late_committed)
        rows = [(1, 10, "1.1"), (2, 11, "2.1")] + ([(3, 10, "1.1")] if late_committed else [])
        files = {"counter": {}, "rejects": {}, "dbfence": {"n": rows}}
        recs = sorted(h.recs, key=lambda r: r.get("t", r.get("t1", 0)))
        return ch.check(recs, files)

    def test_a_paused_holders_refused_fence_passes(self):
        r = self.paused_history("ROWLOCK_EFENCED", 0)
        self.assertEqual(r.errors, [])
        self.assertEqual(r.stats["db_fence_refused"], 1)
        self.assertEqual(r.stats["db_fenced_commits"], 2)

    def test_a_stale_grants_committed_write_fails(self):
        # The fence skipped (or ignoring the token): the late write commits.
        r = self.paused_history("ROWLOCK_OK", 1)
        self.assertIn("db fence", r.kinds())
        self.assertTrue(any("stale grant" in e for e in r.errors), r.errors)

    def test_a_live_holders_refused_fence_fails(self):
        h = H().section("1.1", 10, 0, 100)
        self.dbfence(h, "1.1", 10, 0, 50, rc="ROWLOCK_EFENCED", committed=0)
        self.assertIn("db fence", h.check().kinds())

    def test_a_committed_write_missing_from_the_table_fails(self):
        h = H().section("1.1", 10, 0, 100)
        self.dbfence(h, "1.1", 10, 1, 50)
        recs = sorted(h.recs, key=lambda r: r.get("t", r.get("t1", 0)))
        r = ch.check(recs, {"counter": {}, "rejects": {}, "dbfence": {"n": []}})
        self.assertIn("db fence", r.kinds())

    def test_dbfence_tsv_is_read(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "dbfence.tsv"), "w") as f:
                f.write("n\t1\t10\t1.1\nn\t2\t9\t2.1\n")
            files = ch.read_files(d, {"n"})
            self.assertEqual(files["dbfence"]["n"], [(1, 10, "1.1"), (2, 9, "2.1")])
            r = ch.check([], files)
            self.assertIn("db fence", r.kinds())


class TestCommandLine(unittest.TestCase):
    def test_exit_status_and_one_line_per_problem(self):
        h = H().section("1.1", 10, 0, 100).section("2.1", 9, 50, 150, inc=False)
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
            for r in h.recs:
                f.write(ch.json.dumps(r) + "\n")
        try:
            p = subprocess.run([sys.executable, ch.__file__, f.name], capture_output=True, text=True)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("double grant", p.stdout)
            self.assertIn("token order", p.stdout)
            with open(f.name, "a") as g:
                g.write("not json\n")
            p = subprocess.run([sys.executable, ch.__file__, f.name], capture_output=True, text=True)
            self.assertEqual(p.returncode, 2)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main(verbosity=1)
