"""rowlock: distributed locks kept in a MariaDB table.

A small binding over the C library librowlock.so.1 (ctypes, standard library
only: nothing to compile at install)::

    import rowlock

    with rowlock.Client(defaults_file="/etc/rowlock/app.cnf") as client:
        with client.lock("nightly-report", wait=10, lease=60) as lock:
            run_report(fencing_token=lock.token)

The library is found through, in order: the ROWLOCK_LIBRARY environment
variable (a path), the system's librowlock.so.1, ctypes.util.find_library,
then a build tree next to this source (build/librowlock.so.1).

Threads: one Client per thread. A Client and its locks may only be used from
the thread that created the Client (the C client is not thread-safe); any
other thread gets rowlock.WrongThread. Lock.keep_status() is the exception:
any thread may call it. Callbacks given to Lock.keep() run on a thread of
the library, not on yours (see Lock.keep()).

Errors are exceptions: rowlock.Error and its subclasses, each with .code
(the negative ROWLOCK_E* number), .name ("ROWLOCK_EBUSY") and .message (the
library's one line naming the lock and the strategy).
"""

import atexit
import ctypes
import ctypes.util
import os
import sys
import threading
import weakref
from collections import namedtuple

__all__ = [
    "Client", "Lock", "KeepInfo", "Error", "Busy", "NotOwner", "InvalidArgument",
    "WrongThread", "DatabaseError", "SchemaError", "Unsupported", "OutOfMemory", "Fenced", "NoUpgrade",
    "library_version", "error_name",
]

# ---------------------------------------------------------------------------
# The library
# ---------------------------------------------------------------------------

_SONAME = "librowlock.so.1"


def _load_library():
    path = os.environ.get("ROWLOCK_LIBRARY")
    if path:  # named explicitly: no fallback
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            raise ImportError("rowlock: cannot load ROWLOCK_LIBRARY=%s: %s" % (path, e)) from None
    tried = []
    try:
        return ctypes.CDLL(_SONAME)
    except OSError as e:
        tried.append(str(e))
    found = ctypes.util.find_library("rowlock")
    if found:
        try:
            return ctypes.CDLL(found)
        except OSError as e:
            tried.append(str(e))
    here = os.path.dirname(os.path.abspath(__file__))
    local = os.path.join(here, os.pardir, os.pardir, "build", _SONAME)
    if os.path.exists(local):
        return ctypes.CDLL(os.path.normpath(local))
    raise ImportError("rowlock: cannot load %s (set ROWLOCK_LIBRARY to its path): %s"
                      % (_SONAME, "; ".join(tried)))


_lib = _load_library()

_c_int = ctypes.c_int
_c_uint = ctypes.c_uint
_c_char_p = ctypes.c_char_p
_c_void_p = ctypes.c_void_p
_i64 = ctypes.c_int64
_u64 = ctypes.c_uint64

# Mirrors of include/rowlock.h. Enums are C ints. Sizes and offsets are
# checked by tests/db/test_python.py against the x86-64/aarch64 (LP64) ABI.
_NAME_MAX = 255
_OWNER_MAX = 190


class _ClientOptions(ctypes.Structure):
    _fields_ = [
        ("version", _c_uint),
        ("defaults_file", _c_char_p),
        ("host", _c_char_p),
        ("port", _c_uint),
        ("unix_socket", _c_char_p),
        ("user", _c_char_p),
        ("password", _c_char_p),
        ("database", _c_char_p),
        ("table", _c_char_p),
        ("connect_timeout_ms", _c_uint),
        ("read_timeout_ms", _c_uint),
        ("write_timeout_ms", _c_uint),
        ("tls_mode", _c_int),
        ("tls_ca", _c_char_p),
        ("flags", _c_uint),
    ]


_CLIENT_OPTIONS_VERSION = 1


class _LockOptions(ctypes.Structure):
    _fields_ = [
        ("version", _c_uint),
        ("strategy", _c_int),
        ("mode", _c_int),
        ("permits", _c_uint),
    ]


_LOCK_OPTIONS_VERSION = 2


class _KeepInfo(ctypes.Structure):
    _fields_ = [
        ("version", _c_uint),
        ("state", _c_int),
        ("safe_until_us", _i64),
        ("safe_ms", _i64),
        ("code", _c_int),
        ("token", _u64),
        ("renewals", _u64),
        ("failures", _u64),
        ("session_id", _u64),
        ("reason", ctypes.c_char * 256),
    ]


_KEEP_INFO_VERSION = 1

_KeepFn = ctypes.CFUNCTYPE(None, _c_void_p, ctypes.POINTER(_KeepInfo), _c_void_p)


class _KeepOptions(ctypes.Structure):
    _fields_ = [
        ("version", _c_uint),
        ("lease_ms", _i64),
        ("interval_ms", _i64),
        ("warn_ms", _i64),
        ("on_event", _KeepFn),
        ("arg", _c_void_p),
    ]


_KEEP_OPTIONS_VERSION = 1


class _Info(ctypes.Structure):
    _fields_ = [
        ("version", _c_uint),
        ("exists", _c_int),
        ("held", _c_int),
        ("stale", _c_int),
        ("strategy", _c_int),
        ("token", _u64),
        ("count", _c_uint),
        ("acquired_at_us", _i64),
        ("expires_at_us", _i64),
        ("expires_in_ms", _i64),
        ("name", ctypes.c_char * (_NAME_MAX + 1)),
        ("owner", ctypes.c_char * (_OWNER_MAX + 1)),
    ]


_INFO_VERSION = 1


def _fn(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_P = _c_void_p  # opaque rowlock_client * / rowlock_lock *
_strerror = _fn("rowlock_strerror", _c_char_p, _c_int)
_error_name = _fn("rowlock_error_name", _c_char_p, _c_int)
_version = _fn("rowlock_version", _c_char_p)
_library_init = _fn("rowlock_library_init", _c_int)
_client_new = _fn("rowlock_client_new", _c_int, ctypes.POINTER(_P))
_client_connect = _fn("rowlock_client_connect", _c_int, _P, ctypes.POINTER(_ClientOptions))
_client_free = _fn("rowlock_client_free", None, _P)
_client_errmsg = _fn("rowlock_client_errmsg", _c_char_p, _P)
_client_db_errno = _fn("rowlock_client_db_errno", _c_uint, _P)
_client_sqlstate = _fn("rowlock_client_sqlstate", _c_char_p, _P)
_client_transient = _fn("rowlock_client_transient", _c_int, _P)
_client_owner = _fn("rowlock_client_owner", _c_char_p, _P)
_client_table = _fn("rowlock_client_table", _c_char_p, _P)
_client_server_info = _fn("rowlock_client_server_info", _c_char_p, _P)
_schema_version = _fn("rowlock_schema_version", _c_int, _P, ctypes.POINTER(_c_int))
_migrate = _fn("rowlock_schema_migrate", _c_int, _P, _c_uint, ctypes.POINTER(_c_int), ctypes.POINTER(_c_int))
_strategy_parse = _fn("rowlock_strategy_parse", _c_int, ctypes.POINTER(_c_int), _c_char_p)
_strategy_name = _fn("rowlock_strategy_name", _c_char_p, _c_int)
_lock_new = _fn("rowlock_lock_new", _c_int, ctypes.POINTER(_P), _P, _c_char_p,
                ctypes.POINTER(_LockOptions))
_lock_free = _fn("rowlock_lock_free", None, _P)
_acquire = _fn("rowlock_acquire", _c_int, _P, _i64, _i64)
_release = _fn("rowlock_release", _c_int, _P)
_renew = _fn("rowlock_renew", _c_int, _P, _i64)
_lock_token = _fn("rowlock_lock_token", _u64, _P)
_lock_held = _fn("rowlock_lock_held", _c_uint, _P)
_inspect = _fn("rowlock_inspect", _c_int, _P, ctypes.POINTER(_Info))
_keep = _fn("rowlock_keep", _c_int, _P, ctypes.POINTER(_KeepOptions))
_keep_status = _fn("rowlock_keep_status", _c_int, _P, ctypes.POINTER(_KeepInfo))
_force_release = _fn("rowlock_admin_force_release", _c_int, _P, _c_char_p, ctypes.POINTER(_Info))


def library_version():
    """The C library's version string ("0.2.0")."""
    return _version().decode()


def error_name(code):
    """The symbolic name of a ROWLOCK_E* code ("ROWLOCK_EBUSY")."""
    return _error_name(code).decode()


# libmysqlclient's global init, from the importing (normally the main) thread.
_library_init()

# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

EBUSY, ENOTOWNER, EINVALID, EDB, ESCHEMA, EUNSUPPORTED, ENOMEM = -1, -2, -3, -4, -5, -6, -7
EFENCED, EUPGRADE = -8, -9


class Error(Exception):
    """A rowlock failure. .code: the ROWLOCK_E* number (negative); .name: its
    symbolic name ("ROWLOCK_EBUSY"); .message: the library's one line."""

    def __init__(self, code, message=None):
        self.code = code
        self.name = error_name(code)
        self.message = message or _strerror(code).decode()
        super().__init__("%s: %s" % (self.name, self.message))


class Busy(Error):
    """ROWLOCK_EBUSY: another owner holds the lock (try-once, or the wait ended)."""


class NotOwner(Error):
    """ROWLOCK_ENOTOWNER: the lock is no longer ours (lease ended and taken,
    force-released, purged, or its session ended)."""


class InvalidArgument(Error, ValueError):
    """ROWLOCK_EINVALID: the call as made fails however often it is retried:
    a bad name, option or value, a call in the wrong state, a connection
    inside a transaction, or a name managed by another strategy."""


class WrongThread(InvalidArgument):
    """A Client (or one of its locks) used from a thread other than the one
    that created it (code ROWLOCK_EINVALID)."""


class DatabaseError(Error):
    """ROWLOCK_EDB: a server or connection error. .db_errno, .sqlstate and
    .transient (a state that ends by itself: worth trying again)."""

    db_errno = 0
    sqlstate = "00000"
    transient = False


class SchemaError(Error):
    """ROWLOCK_ESCHEMA: the lock table is missing or has another schema
    version (Client.migrate() fixes it)."""


class Unsupported(Error):
    """ROWLOCK_EUNSUPPORTED: not possible on this server or with this strategy."""


class OutOfMemory(Error, MemoryError):
    """ROWLOCK_ENOMEM."""


class Fenced(Error):
    """ROWLOCK_EFENCED: the grant is no longer the current one (a fence
    failed): roll the application's transaction back."""


class NoUpgrade(Error):
    """ROWLOCK_EUPGRADE: an exclusive acquire by a client that holds the name
    shared (refused at once: release the shared hold first)."""


_CLASSES = {EBUSY: Busy, ENOTOWNER: NotOwner, EINVALID: InvalidArgument, EDB: DatabaseError,
            ESCHEMA: SchemaError, EUNSUPPORTED: Unsupported, ENOMEM: OutOfMemory,
            EFENCED: Fenced, EUPGRADE: NoUpgrade}


def _decode(b):
    return b.decode("utf-8", "replace") if b is not None else ""


def _raise(rc, cptr):
    msg = _decode(_client_errmsg(cptr)) if cptr else ""
    err = _CLASSES.get(rc, Error)(rc, msg or None)
    if rc == EDB and cptr:
        err.db_errno = _client_db_errno(cptr)
        err.sqlstate = _decode(_client_sqlstate(cptr))
        err.transient = bool(_client_transient(cptr))
    raise err


def _invalid(message):
    return InvalidArgument(EINVALID, message)


def _cstr(value, what):
    """str or bytes to a C string: UTF-8, and a NUL inside is refused (C
    would silently cut the string there)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise _invalid("%s is not valid UTF-8 (%s)" % (what, e.reason)) from None
    elif isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value)
    else:
        raise TypeError("%s must be str or bytes, not %s" % (what, type(value).__name__))
    if b"\0" in value:
        raise _invalid("%s contains a NUL character (at byte %d)" % (what, value.index(b"\0")))
    return value


def _ms(seconds, what, allow_none=False):
    if seconds is None:
        if allow_none:
            return None
        raise _invalid("%s must be a number of seconds" % what)
    ms = int(round(float(seconds) * 1000))
    if ms < 0:
        raise _invalid("%s must not be negative (%r)" % (what, seconds))
    return ms


# ---------------------------------------------------------------------------
# Client
# ---------------------------------------------------------------------------

_TLS_MODES = {None: 0, "default": 0, "disabled": 1, "preferred": 2, "required": 3,
              "verify-ca": 4, "verify-identity": 5}
_FLAG_SKIP_SCHEMA_CHECK = 1
_FLAG_READ_DEFAULT_FILES = 2
_FLAG_SINGLE_NODE = 4

_open_clients = weakref.WeakSet()


class Client:
    """A database connection with an owner identity (rowlock_client).

    Connects at construction. Strings may be str or bytes; None and 0 mean
    "not set" (then the option files, then libmysqlclient decide). Timeouts
    are in seconds. read_default_files=True reads the standard option files
    (my.cnf, ~/.my.cnf; ignored when defaults_file is given).
    skip_schema_check=True connects to a table that is missing or outdated,
    for Client.migrate().

    One Client per thread: it may only be used from the thread that created
    it (else WrongThread). Use it as a context manager, or call close().
    """

    def __init__(self, defaults_file=None, *, host=None, port=0, unix_socket=None, user=None,
                 password=None, database=None, table=None, connect_timeout=None,
                 read_timeout=None, write_timeout=None, tls_mode=None, tls_ca=None,
                 read_default_files=False, skip_schema_check=False, single_node=False):
        self._thread = threading.get_ident()
        self._ptr = None
        self._locks = weakref.WeakSet()
        if tls_mode not in _TLS_MODES:
            raise _invalid("tls_mode must be one of %s" % ", ".join(
                sorted(k for k in _TLS_MODES if k)))
        o = _ClientOptions()
        o.version = _CLIENT_OPTIONS_VERSION
        # Keep the encoded strings alive for the call (ctypes does not copy).
        self._keep = [_cstr(defaults_file, "defaults_file"), _cstr(host, "host"),
                      _cstr(unix_socket, "unix_socket"), _cstr(user, "user"),
                      _cstr(password, "password"), _cstr(database, "database"),
                      _cstr(table, "table"), _cstr(tls_ca, "tls_ca")]
        (o.defaults_file, o.host, o.unix_socket, o.user, o.password, o.database, o.table,
         o.tls_ca) = self._keep
        o.port = int(port or 0)
        o.connect_timeout_ms = _ms(connect_timeout, "connect_timeout", True) or 0
        o.read_timeout_ms = _ms(read_timeout, "read_timeout", True) or 0
        o.write_timeout_ms = _ms(write_timeout, "write_timeout", True) or 0
        o.tls_mode = _TLS_MODES[tls_mode]
        o.flags = ((_FLAG_SKIP_SCHEMA_CHECK if skip_schema_check else 0)
                   | (_FLAG_READ_DEFAULT_FILES if read_default_files else 0)
                   | (_FLAG_SINGLE_NODE if single_node else 0))
        p = _P()
        rc = _client_new(ctypes.byref(p))
        if rc < 0:
            _raise(rc, None)
        rc = _client_connect(p, ctypes.byref(o))
        del self._keep
        if rc < 0:
            try:
                _raise(rc, p)
            finally:
                _client_free(p)
        self._ptr = p
        _open_clients.add(self)

    # -- plumbing
    def _check(self):
        if self._ptr is None:
            raise _invalid("the client is closed")
        if threading.get_ident() != self._thread:
            raise WrongThread(EINVALID, "a rowlock Client is used from thread %d but belongs to "
                              "thread %d: one Client per thread" % (threading.get_ident(),
                                                                    self._thread))
        return self._ptr

    def _call(self, rc):
        if rc < 0:
            _raise(rc, self._ptr)
        return rc

    # -- life cycle
    def close(self):
        """Free the locks made by this client (which releases what they hold),
        stop the keeper and close the connection. Idempotent."""
        if self._ptr is None:
            return
        if threading.get_ident() != self._thread and not _exiting:
            self._check()
        for lock in list(self._locks):
            lock._free()
        p, self._ptr = self._ptr, None
        _client_free(p)
        _open_clients.discard(self)

    def __enter__(self):
        self._check()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        # Garbage collection may run on any thread; nothing else uses the
        # client by then, so freeing it there is safe.
        if getattr(self, "_ptr", None) is not None:
            for lock in list(self._locks):
                lock._free()
            p, self._ptr = self._ptr, None
            _client_free(p)

    @property
    def closed(self):
        return self._ptr is None

    # -- information
    @property
    def owner(self):
        """This client's owner identity as stored in the lock table."""
        return _decode(_client_owner(self._check()))

    @property
    def table(self):
        return _decode(_client_table(self._check()))

    @property
    def server_info(self):
        return _decode(_client_server_info(self._check()))

    # -- schema and administration
    def schema_version(self):
        """The schema version installed for this client's table (0: none)."""
        found = _c_int()
        self._call(_schema_version(self._check(), ctypes.byref(found)))
        return found.value

    def migrate(self, dry_run=False):
        """Apply pending migrations; returns (from_version, to_version)."""
        a, b = _c_int(), _c_int()
        self._call(_migrate(self._check(), 1 if dry_run else 0, ctypes.byref(a), ctypes.byref(b)))
        return a.value, b.value

    def force_release(self, name):
        """Administrative release of whoever holds `name`; returns True when
        something was held. The holder's release and renew then raise
        NotOwner."""
        info = _Info()
        info.version = _INFO_VERSION
        self._call(_force_release(self._check(), _cstr(name, "lock name"), ctypes.byref(info)))
        return bool(info.held)

    def lock(self, name, strategy="insert", mode="exclusive", permits=0, *, wait=0, lease=None):
        """A handle for lock `name` (no round trip). strategy: "insert",
        "for-update" or "optimistic"; mode: "exclusive" or "shared"; permits:
        a semaphore's N. `wait` and `lease` are acquire()'s defaults (and so
        the with-statement's): see Lock.acquire()."""
        return Lock(self, name, strategy=strategy, mode=mode, permits=permits, wait=wait,
                    lease=lease)


_exiting = False


@atexit.register
def _close_all():
    # Stop keeper threads before the interpreter goes away: a callback into
    # a finalising interpreter would crash.
    global _exiting
    _exiting = True
    for c in list(_open_clients):
        try:
            c.close()
        except Exception:
            pass


# ---------------------------------------------------------------------------
# Locks
# ---------------------------------------------------------------------------

KeepInfo = namedtuple("KeepInfo", "state safe_until_us safe_ms code code_name token renewals "
                                  "failures session_id reason")
KeepInfo.__doc__ = """What the keeper knows of a lock (Lock.keep_status(), keep callbacks).
state: "none", "held", "unknown" or "lost"; safe_ms: how long acting is still
safe; code/code_name: the newest failure (0/"ROWLOCK_OK" if none); token: the
kept grant's fencing token; reason: why lost or unknown ("" when held)."""

_KEEP_STATES = {0: "none", 1: "held", 2: "unknown", 3: "lost"}


def _keep_info(st):
    return KeepInfo(_KEEP_STATES.get(st.state, "unknown"), st.safe_until_us, st.safe_ms,
                    st.code, error_name(st.code), st.token, st.renewals, st.failures,
                    st.session_id, _decode(st.reason))


_UNSET = object()


class Lock:
    """A named lock bound to a client (rowlock_lock). Make it with
    Client.lock(). As a context manager it acquires (with the wait and
    lease given to Client.lock()) and releases."""

    _ptr = None

    def __init__(self, client, name, strategy="insert", mode="exclusive", permits=0,
                 wait=0, lease=None):
        cp = client._check()
        bname = _cstr(name, "lock name")
        o = _LockOptions()
        o.version = _LOCK_OPTIONS_VERSION
        s = _c_int()
        if not isinstance(strategy, (str, bytes)):
            raise TypeError("strategy must be a str such as 'insert', not %r" % (strategy,))
        if isinstance(strategy, str):
            strategy = strategy.encode()
        if _strategy_parse(ctypes.byref(s), strategy) < 0:
            raise _invalid("unknown strategy %r (insert, for-update, optimistic)" % strategy)
        o.strategy = s.value
        if mode not in ("exclusive", "shared"):
            raise _invalid("mode must be 'exclusive' or 'shared', not %r" % (mode,))
        o.mode = 1 if mode == "shared" else 0
        o.permits = int(permits)
        self._wait, self._lease = wait, lease
        _ms(wait, "wait", True)
        _ms(lease, "lease", True)
        p = _P()
        rc = _lock_new(ctypes.byref(p), cp, bname, ctypes.byref(o))
        if rc < 0:
            _raise(rc, cp)
        self._ptr = p
        self._client = client
        self._name = name
        self._keep_cb = None
        client._locks.add(self)

    def _check(self):
        cp = self._client._check()
        if self._ptr is None:
            raise _invalid("the lock handle is freed")
        return cp

    def _free(self):
        p, self._ptr = self._ptr, None
        if p is not None:
            _lock_free(p)
        self._keep_cb = None

    def __del__(self):
        self._free()

    def close(self):
        """Release whatever this handle still holds and free it."""
        if self._ptr is not None:
            self._check()
            self._free()

    @property
    def name(self):
        return self._name

    @property
    def token(self):
        """The fencing token of the current grant (0 when not held)."""
        self._check()
        return _lock_token(self._ptr)

    @property
    def held(self):
        """How many acquisitions this handle holds (0: none)."""
        self._check()
        return _lock_held(self._ptr)

    def acquire(self, wait=_UNSET, lease=_UNSET):
        """Acquire the lock; returns its fencing token. wait: 0 tries once, N
        waits up to N seconds, None waits forever. lease: seconds (None: the
        library's default, 30 s; for-update: the session's wait_timeout). Either one not
        given: the one given to Client.lock(). Raises Busy when another
        owner holds it. Re-entrant: each acquire needs a release."""
        cp = self._check()
        if wait is _UNSET:
            wait = self._wait
        if lease is _UNSET:
            lease = self._lease
        wait_ms = _ms(wait, "wait", True)
        rc = _acquire(self._ptr, -1 if wait_ms is None else wait_ms,
                      _ms(lease, "lease", True) or 0)
        if rc < 0:
            _raise(rc, cp)
        return _lock_token(self._ptr)

    def release(self):
        """Release one acquisition. NotOwner: the lock was lost meanwhile."""
        cp = self._check()
        rc = _release(self._ptr)
        if rc < 0:
            _raise(rc, cp)

    def renew(self, lease=None):
        """Extend the lease to now + lease seconds (None: the default)."""
        cp = self._check()
        rc = _renew(self._ptr, _ms(lease, "lease", True) or 0)
        if rc < 0:
            _raise(rc, cp)

    def inspect(self):
        """What the table says about this name: a dict (exists, held, stale,
        strategy, token, count, owner, expires_in_ms). One round trip."""
        cp = self._check()
        info = _Info()
        info.version = _INFO_VERSION
        rc = _inspect(self._ptr, ctypes.byref(info))
        if rc < 0:
            _raise(rc, cp)
        return {"exists": bool(info.exists), "held": bool(info.held), "stale": bool(info.stale),
                "strategy": _decode(_strategy_name(info.strategy)) if info.strategy else None,
                "token": info.token, "count": info.count, "owner": _decode(info.owner),
                "expires_in_ms": info.expires_in_ms}

    def keep(self, on_event=None, lease=None, interval=None, warn=None):
        """Have the library's keeper renew this handle's grants in the
        background (rowlock_keep); check keep_status() before each side
        effect. lease, interval, warn: seconds (None: the library's defaults:
        the acquire's lease, a third of it, a sixth of it).

        on_event(lock, info) is called (at most once per grant) when the
        lock is lost, or when renewals fail and its safe time runs below
        `warn`; info is a KeepInfo. It runs on the keeper's thread, not
        yours: it must return quickly and must not call rowlock (except
        keep_status()); set a flag or an Event. Exceptions it raises are
        printed to stderr and otherwise ignored (they cannot reach C).

        keep(False) stops keeping (the grant stays held until its lease
        ends or it is released)."""
        cp = self._check()
        if on_event is False:
            rc = _keep(self._ptr, None)
            if rc < 0:
                _raise(rc, cp)
            self._keep_cb = None
            return
        if on_event is not None and not callable(on_event):
            raise TypeError("on_event must be callable")
        o = _KeepOptions()
        o.version = _KEEP_OPTIONS_VERSION
        o.lease_ms = _ms(lease, "lease", True) or 0
        o.interval_ms = _ms(interval, "interval", True) or 0
        o.warn_ms = _ms(warn, "warn", True) or 0
        cb = None
        if on_event is not None:
            me = weakref.ref(self)

            def trampoline(_lp, st, _arg):
                # Never let an exception (or anything) escape into C.
                try:
                    lock = me()
                    if lock is not None:
                        on_event(lock, _keep_info(st.contents))
                except BaseException:
                    try:
                        sys.excepthook(*sys.exc_info())
                    except BaseException:
                        pass

            cb = _KeepFn(trampoline)
            o.on_event = cb
        rc = _keep(self._ptr, ctypes.byref(o))
        if rc < 0:
            _raise(rc, cp)
        # The C keeper calls cb until the handle is freed or keeping stops:
        # the ctypes object must live as long (the handle holds it).
        self._keep_cb = cb

    def keep_status(self):
        """A KeepInfo snapshot from the keeper. No round trip; any thread."""
        p = self._ptr
        if p is None:
            raise _invalid("the lock handle is freed")
        st = _KeepInfo()
        st.version = _KEEP_INFO_VERSION
        rc = _keep_status(p, ctypes.byref(st))
        if rc < 0:
            raise Error(rc)
        return _keep_info(st)

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.release()  # NotOwner here: the lock was lost during the block
        else:
            try:
                self.release()
            except Error:
                pass  # the block's exception is the one to see
        return False

    def __repr__(self):
        return "<rowlock.Lock %r%s>" % (self._name, " freed" if self._ptr is None else "")
