"""The Python binding (python/rowlock) against the real test server.

Run by ctest (test `python`, label db) with ROWLOCK_DEFAULTS_FILE (the
sandbox's option file), ROWLOCK_LIBRARY (the library just built) and
PYTHONPATH=python/. Its own lock table: t_python. Waits are generous (a slow
2-core machine): nothing depends on a tight timing.
"""

import ctypes
import os
import threading
import time
import unittest

import rowlock

DEFAULTS = os.environ.get("ROWLOCK_DEFAULTS_FILE")
TABLE = "t_python"


def client(**kw):
    kw.setdefault("table", TABLE)
    return rowlock.Client(defaults_file=DEFAULTS, **kw)


def setUpModule():
    if not DEFAULTS:
        raise unittest.SkipTest("ROWLOCK_DEFAULTS_FILE not set (run through ctest)")
    with client(skip_schema_check=True) as c:
        c.migrate()


class Layout(unittest.TestCase):
    """The ctypes mirrors of rowlock.h's structs: sizes and offsets as a C
    compiler lays them out on LP64 (x86-64, aarch64)."""

    def test_struct_layout(self):
        if ctypes.sizeof(ctypes.c_void_p) != 8:
            self.skipTest("offsets below are LP64")
        expect = {
            rowlock._ClientOptions: (104, {"defaults_file": 8, "port": 24, "table": 64,
                                           "connect_timeout_ms": 72, "tls_mode": 84,
                                           "tls_ca": 88, "flags": 96}),
            rowlock._LockOptions: (16, {"strategy": 4, "mode": 8, "permits": 12}),
            rowlock._KeepInfo: (320, {"state": 4, "safe_until_us": 8, "code": 24, "token": 32,
                                      "session_id": 56, "reason": 64}),
            rowlock._KeepOptions: (48, {"lease_ms": 8, "warn_ms": 24, "on_event": 32, "arg": 40}),
            rowlock._Info: (512, {"token": 24, "count": 32, "expires_in_ms": 56, "name": 64,
                                  "owner": 320}),
        }
        for st, (size, offs) in expect.items():
            self.assertEqual(ctypes.sizeof(st), size, st.__name__)
            for f, off in offs.items():
                self.assertEqual(getattr(st, f).offset, off, "%s.%s" % (st.__name__, f))


class Basics(unittest.TestCase):
    def setUp(self):
        self.a = client()
        self.b = client()

    def tearDown(self):
        self.a.close()
        self.b.close()

    def test_acquire_release(self):
        lk = self.a.lock("py-basic")
        self.assertEqual(lk.held, 0)
        self.assertEqual(lk.token, 0)
        tok = lk.acquire(wait=0, lease=60)
        self.assertGreater(tok, 0)
        self.assertEqual(lk.token, tok)
        self.assertEqual(lk.held, 1)
        info = lk.inspect()
        self.assertTrue(info["held"])
        self.assertEqual(info["owner"], self.a.owner)
        lk.release()
        self.assertEqual(lk.held, 0)
        self.assertFalse(lk.inspect()["held"])

    def test_busy_from_second_client(self):
        la = self.a.lock("py-busy")
        lb = self.b.lock("py-busy")
        la.acquire(lease=60)
        with self.assertRaises(rowlock.Busy) as cm:
            lb.acquire(wait=0)
        e = cm.exception
        self.assertEqual(e.code, -1)
        self.assertEqual(e.name, "ROWLOCK_EBUSY")
        self.assertIn("py-busy", e.message)
        self.assertIn("ROWLOCK_EBUSY", str(e))
        self.assertIsInstance(e, rowlock.Error)
        la.release()
        lb.acquire(wait=0)  # free now
        lb.release()

    def test_wait_then_granted(self):
        la = self.a.lock("py-wait")
        la.acquire(lease=60)
        # The other client waits (on its own thread and client) until released.
        got = {}

        def waiter():
            try:
                with client() as c2:
                    with c2.lock("py-wait", wait=120) as l2:
                        got["token"] = l2.token
            except BaseException as e:  # reported below
                got["error"] = e

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.5)
        first = la.token
        la.release()
        t.join(180)
        self.assertFalse(t.is_alive())
        self.assertNotIn("error", got, got.get("error"))
        self.assertGreater(got["token"], first)

    def test_with_releases_on_exception(self):
        lk = self.a.lock("py-with", wait=5, lease=60)
        with self.assertRaises(KeyError):
            with lk:
                self.assertEqual(lk.held, 1)
                raise KeyError("boom")
        self.assertEqual(lk.held, 0)
        # Another client can take it at once: it was released, not left to expire.
        with self.b.lock("py-with") as other:
            self.assertGreater(other.token, 0)

    def test_tokens_increase(self):
        lk = self.a.lock("py-token")
        seen = []
        for c in (self.a, self.b, self.a):
            with c.lock("py-token", lease=60) as held:
                seen.append(held.token)
        self.assertEqual(seen, sorted(set(seen)), seen)
        self.assertEqual(len(seen), 3)
        del lk

    def test_lock_defaults_for_acquire(self):
        lk = self.a.lock("py-defaults", lease=50)  # within the table's longest lease (60 s)
        lk.acquire()
        self.assertGreater(lk.inspect()["expires_in_ms"], 40000)
        lk.release()
        lk.acquire(lease=5)
        self.assertLess(lk.inspect()["expires_in_ms"], 6000)
        lk.release()

    def test_reentrant(self):
        lk = self.a.lock("py-reentrant")
        t1 = lk.acquire(lease=60)
        t2 = lk.acquire(lease=60)
        self.assertEqual(t1, t2)
        self.assertEqual(lk.held, 2)
        lk.release()
        lk.release()
        self.assertEqual(lk.held, 0)

    def test_nul_in_name_refused(self):
        for bad in ("py-nul\0tail", b"py-nul\0tail", "\0"):
            with self.assertRaises(rowlock.InvalidArgument) as cm:
                self.a.lock(bad)
            self.assertEqual(cm.exception.name, "ROWLOCK_EINVALID")
            self.assertIn("NUL", cm.exception.message)
        # Nothing was locked under the truncated name.
        with self.b.lock("py-nul") as lk:
            self.assertEqual(lk.held, 1)

    def test_bad_name_from_library(self):
        with self.assertRaises(rowlock.InvalidArgument) as cm:
            self.a.lock("x" * 256)
        self.assertEqual(cm.exception.code, -3)
        self.assertIn("256", cm.exception.message)
        with self.assertRaises(rowlock.InvalidArgument):
            self.a.lock("")
        with self.assertRaises(rowlock.InvalidArgument):
            self.a.lock("py-surrogate-\udc80")

    def test_unicode_name(self):
        with self.a.lock("py-ünï-€") as lk:
            self.assertEqual(lk.inspect()["owner"], self.a.owner)

    def test_release_not_held(self):
        lk = self.a.lock("py-notheld")
        with self.assertRaises(rowlock.InvalidArgument) as cm:
            lk.release()
        self.assertEqual(cm.exception.name, "ROWLOCK_EINVALID")

    def test_not_owner_after_force_release(self):
        lk = self.a.lock("py-force")
        lk.acquire(lease=60)
        self.assertTrue(self.b.force_release("py-force"))
        with self.assertRaises(rowlock.NotOwner) as cm:
            lk.renew(60)
        self.assertEqual(cm.exception.name, "ROWLOCK_ENOTOWNER")
        self.assertEqual(cm.exception.code, -2)
        with self.assertRaises(rowlock.NotOwner):
            lk.release()

    def test_wrong_thread(self):
        lk = self.a.lock("py-thread")
        errors = []

        def other():
            for f in (lambda: lk.acquire(), lambda: self.a.lock("py-thread"),
                      lambda: self.a.owner, lambda: self.a.close()):
                try:
                    f()
                    errors.append(None)
                except rowlock.WrongThread as e:
                    errors.append(e)

        t = threading.Thread(target=other)
        t.start()
        t.join(60)
        self.assertEqual(len(errors), 4)
        for e in errors:
            self.assertIsInstance(e, rowlock.WrongThread)
            self.assertEqual(e.name, "ROWLOCK_EINVALID")
            self.assertIn("one Client per thread", e.message)
        self.assertFalse(self.a.closed)
        self.assertEqual(lk.held, 0)
        lk.acquire()  # still usable on its own thread
        lk.release()

    def test_closed_client(self):
        c = client()
        lk = c.lock("py-closed")
        lk.acquire(lease=60)
        c.close()
        # Closing freed the handle, which released the lock.
        with self.b.lock("py-closed") as other:
            self.assertEqual(other.held, 1)
        with self.assertRaises(rowlock.InvalidArgument):
            lk.acquire()
        c.close()  # idempotent

    def test_database_error(self):
        # Nothing listens on port 1: the connect is refused (a transient state).
        with self.assertRaises(rowlock.DatabaseError) as cm:
            rowlock.Client(host="127.0.0.1", port=1, user="nobody", table=TABLE,
                           connect_timeout=30)
        e = cm.exception
        self.assertEqual(e.name, "ROWLOCK_EDB")
        self.assertEqual(e.code, -4)
        self.assertNotEqual(e.db_errno, 0)
        self.assertTrue(e.transient)

    def test_bad_strategy(self):
        with self.assertRaises(rowlock.InvalidArgument):
            self.a.lock("py-strategy", strategy="sideways")
        with self.assertRaises(TypeError):
            self.a.lock("py-strategy", strategy=None)
        with self.a.lock("py-strategy-opt", strategy="optimistic") as lk:
            self.assertGreater(lk.token, 0)

    def test_schema_error(self):
        with self.assertRaises(rowlock.SchemaError) as cm:
            client(table="t_python_never_migrated")
        self.assertEqual(cm.exception.name, "ROWLOCK_ESCHEMA")
        self.assertIn("migrate", cm.exception.message)

    def test_connect_error(self):
        with self.assertRaises(rowlock.Error) as cm:
            rowlock.Client(defaults_file="/nonexistent/rowlock-python.cnf", table=TABLE)
        self.assertTrue(cm.exception.name.startswith("ROWLOCK_E"))
        self.assertTrue(cm.exception.message)

    def test_error_names(self):
        self.assertEqual(rowlock.error_name(-1), "ROWLOCK_EBUSY")
        self.assertEqual(rowlock.error_name(-6), "ROWLOCK_EUNSUPPORTED")
        self.assertTrue(rowlock.library_version())


class Keeper(unittest.TestCase):
    def test_keeper_renews(self):
        with client() as c:
            lk = c.lock("py-keep-renew")
            lk.keep(interval=1)      # a long lease: a slow machine never loses it
            lk.acquire(lease=30)
            deadline = time.monotonic() + 60
            st = lk.keep_status()
            while st.renewals < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
                st = lk.keep_status()
            self.assertGreaterEqual(st.renewals, 2, st)
            self.assertEqual(st.state, "held")
            self.assertEqual(st.token, lk.token)
            lk.release()

    def test_keeper_callback_on_lost(self):
        events = []
        called = threading.Event()

        def on_event(lock, info):
            events.append((lock, info, threading.get_ident()))
            called.set()

        with client() as c, client() as admin:
            lk = c.lock("py-keep-lost")
            lk.keep(on_event=on_event, interval=1)
            lk.acquire(lease=30)
            token = lk.token
            self.assertTrue(admin.force_release("py-keep-lost"))
            # The next renewal (every second) finds it gone.
            self.assertTrue(called.wait(60), "keep callback not called")
            lock, info, tid = events[0]
            self.assertIs(lock, lk)
            self.assertEqual(info.state, "lost")
            self.assertEqual(info.code_name, "ROWLOCK_ENOTOWNER")
            self.assertEqual(info.token, token)
            self.assertNotEqual(tid, threading.get_ident())  # the keeper's thread
            self.assertEqual(lk.keep_status().state, "lost")
            with self.assertRaises(rowlock.NotOwner):
                lk.release()

    def test_callback_exception_does_not_escape(self):
        called = threading.Event()

        def bad(lock, info):
            called.set()
            raise RuntimeError("a bug in the callback")

        with client() as c, client() as admin:
            lk = c.lock("py-keep-raise")
            lk.keep(on_event=bad, interval=1)
            lk.acquire(lease=30)
            admin.force_release("py-keep-raise")
            self.assertTrue(called.wait(60))
            time.sleep(0.2)
            # The process and the client go on.
            with self.assertRaises(rowlock.NotOwner):
                lk.release()
            lk.acquire(lease=30)
            lk.release()


if __name__ == "__main__":
    unittest.main(verbosity=2)
