/*
 * rowlock — distributed locks kept in a MariaDB table.
 *
 * Servers: MariaDB 10.6 or later (tested on 10.11). The library uses
 * MariaDB-only SQL (SET STATEMENT, sequences, max_statement_time) and
 * refuses other servers, MySQL included, at connect with ROWLOCK_EUNSUPPORTED.
 *
 * Conventions (read once, they hold for every function below):
 *
 *  - Functions return int: 0 on success or a negative ROWLOCK_E* code; a
 *    code says what the caller does next, and each call lists the codes it
 *    returns (see Errors below for which code means what).
 *    After a failure, rowlock_client_errmsg() holds one line naming the lock
 *    and the strategy; it stays valid until the next call on that client.
 *  - Names: rowlock_<group>_<what>, the group being what the call is about:
 *    rowlock_client_* (a client: make, connect, free, its state, its log
 *    hook), rowlock_lock_* (a lock handle's life and state: new, free,
 *    token, held, name, strategy, mode), rowlock_admin_* (the lock table as
 *    a whole and locks the caller need not hold: list, holders, stats,
 *    force_release, force_release_holder, set_permits, reap; the prefix
 *    marks at the call site that these act on other owners' locks),
 *    rowlock_schema_* (the lock table's schema: version, version_expected,
 *    migrate), rowlock_library_*, and one group per value type
 *    (rowlock_strategy_*, rowlock_error_name, rowlock_name_check,
 *    rowlock_log_level_name, rowlock_event_kind_name). Two exceptions, both
 *    closed lists: the operations on a lock handle are its verb alone,
 *    rowlock_acquire, rowlock_release, rowlock_renew, rowlock_inspect,
 *    rowlock_keep (and rowlock_keep_status, keep's reader), rowlock_downgrade
 *    (0.2.0: it changes the grant as release does), rowlock_fence,
 *    because they are
 *    the calls every program writes, read as sentences with their handle
 *    (as pthread_mutex_lock does), and a group would only repeat what the
 *    handle argument says (rowlock_fence joined them in 0.2.0: it is the
 *    call a holder writes between acquire and release, in every transaction
 *    it makes under the lock; rowlock_acquire_many and rowlock_release_many
 *    are the same two verbs on a set of handles, and are named so); and the four calls about no object at all keep
 *    the short names of what they mirror: rowlock_version, rowlock_strerror
 *    (strerror(3)), rowlock_escape, rowlock_monotonic_us. A call's option,
 *    result and flag names drop the group (rowlock_admin_reap takes
 *    rowlock_reap_options; rowlock_admin_list ROWLOCK_LIST_STALE). A new
 *    call joins a group; a new exception needs a reason written here.
 *  - Argument order: the object a call acts on (client or lock) comes
 *    first, then its inputs, then its out-parameters, as in libmysqlclient
 *    and the rest of this API. Only calls without such an object, which
 *    make or parse a value (rowlock_client_new, rowlock_lock_new,
 *    rowlock_strategy_parse), put their out-parameter first. (An earlier
 *    rule, "out-parameters first", was followed by those alone; the rule
 *    now says what the API does.) Every *_free() is void and accepts NULL.
 *  - Versioned structs. Every struct that crosses the API starts with an
 *    `unsigned int version` and has a ROWLOCK_<STRUCT>_VERSION macro; fields
 *    are only ever added at the end, each addition raising the version. Who
 *    writes the struct decides the rule, and there are three cases:
 *      1. Options the caller fills and the library reads (rowlock_client_options,
 *         rowlock_lock_options, rowlock_keep_options, rowlock_reap_options):
 *         start from the _INIT macro, which sets `version`, then set fields.
 *         The library accepts every version from 1 to its own and reads only
 *         the fields that version has (an older caller keeps its behaviour);
 *         it refuses 0 and a version newer than its own with ROWLOCK_EINVALID
 *         (the message names both), since ignoring a field it does not know
 *         could change what the caller asked for.
 *      2. Results the caller passes for the library to fill (rowlock_info,
 *         rowlock_stats_info, rowlock_keep_info, rowlock_reap_stats): start
 *         from the _INIT macro. The library accepts every version but 0
 *         (ROWLOCK_EINVALID) and fills the fields that both the caller's
 *         version and its own have; `version` stays as the caller set it,
 *         and a field newer than the library keeps the caller's value (the
 *         _INIT macro's 0, which every field added later reads as "unknown").
 *      3. Structs the library fills and hands to a callback (rowlock_event,
 *         rowlock_holder_info, the rowlock_info of rowlock_admin_list()): the
 *         library sets `version` to the version it fills; a callback compiled
 *         with an older header reads the fields it knows, one compiled with a
 *         newer header checks `version` before reading a later field.
 *    No struct borrows another's version.
 *  - rowlock_acquire, rowlock_release and rowlock_renew warn when their
 *    result is ignored: an ignored ROWLOCK_EBUSY means running without the
 *    lock.
 *  - Input strings are copied. Returned const char * are borrowed and live
 *    as long as the object they came from. No call that returns a string
 *    returns NULL, so its result can always be printed: a call that names a
 *    value (rowlock_strerror, rowlock_error_name, rowlock_strategy_name,
 *    rowlock_log_level_name, rowlock_event_kind_name) gives a fixed string
 *    for a value it does not know ("unknown error", "ROWLOCK_EUNKNOWN",
 *    "unknown"), and an accessor given NULL gives "" (rowlock_client_errmsg:
 *    "no client"; rowlock_client_sqlstate: "00000").
 *  - Threads: a rowlock_client and the locks bound to it belong to one
 *    thread at a time (like a MYSQL *). Different clients may be used from
 *    different threads concurrently. The library keeps no global mutable
 *    state after rowlock_library_init().
 *  - Time: whether a lease has ended is decided by the database server's
 *    clock (UTC_TIMESTAMP(6), in UTC whatever the session time zone), never by this process's clock. Waits (wait_ms) are
 *    measured on this process's monotonic clock.
 *  - Blocking: every call that talks to the server blocks for at most the
 *    round trips it documents, each bounded by the client's read/write
 *    timeouts, plus any wait the caller asked for.
 *
 * The public header never includes mysql.h; a MYSQL * crosses the API as
 * void * (rowlock_client_wrap()).
 */
#ifndef ROWLOCK_H
#define ROWLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "rowlock_version.h"

/* Exported symbols (the library is built with hidden visibility); GCC and
 * Clang only: there is no Windows build. */
#if defined(__GNUC__)
#  define ROWLOCK_EXTERN __attribute__((visibility("default")))
#  define ROWLOCK_WARN_UNUSED __attribute__((warn_unused_result))
#else
#  define ROWLOCK_EXTERN
#  define ROWLOCK_WARN_UNUSED
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/**
 * Result codes: one list gives the enum, rowlock_strerror() and
 * rowlock_error_name(). 0 is success; every failure is one of these.
 *
 * The rule: a code says what the caller does next, not where the failure
 * was found; two failures share a code when the caller's next step is the
 * same, and the one-line message (rowlock_client_errmsg()) says which it
 * was. Each call's comment lists the codes it returns and when.
 *
 *  ROWLOCK_EBUSY        Wait or try later. The lock is held by another owner:
 *                       try-once failed or the wait expired. (One exception:
 *                       rowlock_admin_set_permits also says EBUSY for a name of
 *                       another strategy, which its one statement cannot
 *                       tell from a name an exclusive holder holds.)
 *  ROWLOCK_ENOTOWNER    Stop acting under the lock: release/renew of a lock we
 *                       no longer hold (the lease ended and someone else took
 *                       it, the reaper purged it, an admin force-released it,
 *                       or the transaction or connection that held it ended).
 *                       Nothing was changed.
 *  ROWLOCK_EINVALID     Fix the program or its configuration: the call, as
 *                       made, fails the same way however often it is retried
 *                       (nothing on the server has to change; ENOTOWNER is
 *                       the one loss of state that gets its own code). Only
 *                       these four cases:
 *                       (a) an argument out of its documented range: NULL
 *                           where a pointer is needed, a lock name that is not
 *                           1-255 bytes of UTF-8, an unknown enum, flag or
 *                           level, a number out of range, a struct version 0
 *                           (or, for options, newer than the library: see
 *                           Versioned structs), a bad option or option file;
 *                       (b) an object in the wrong state for the call:
 *                           release/renew of a handle that holds nothing,
 *                           a client not connected, a lock
 *                           handle whose client was freed (and a NULL client
 *                           or handle: these two leave no message, there is no
 *                           client to keep it);
 *                       (c) a connection inside a transaction where the call
 *                           needs none: acquire, release and renew of insert
 *                           and optimistic locks (their rows commit on their
 *                           own), acquire and inspect of a for-update lock (it
 *                           starts its own transaction); end the application's
 *                           transaction first;
 *                       (d) a name managed by another strategy (acquire):
 *                           programs that share a name
 *                           must use one strategy for it; the message names
 *                           the name's (a name changes strategy only after the
 *                           reaper purges its row).
 *  ROWLOCK_EDB          Server or connection error. rowlock_client_transient()
 *                       says whether trying again may help;
 *                       rowlock_client_db_errno() and rowlock_client_sqlstate()
 *                       keep the server's error.
 *  ROWLOCK_ESCHEMA      Run rowlock_schema_migrate(): the lock table is missing or
 *                       its schema version is not the one this library needs;
 *                       the message names expected and found versions.
 *  ROWLOCK_EUNSUPPORTED Choose another strategy, server or client kind: the
 *                       call cannot succeed here whatever its arguments, for
 *                       example a server that is not MariaDB 10.6+, the
 *                       for-update strategy on a multi-primary (Galera)
 *                       cluster, a shared optimistic lock.
 *  ROWLOCK_ENOMEM       Out of memory.
 *  ROWLOCK_EFENCED      Roll back the application's transaction and stop
 *                       acting under the lock: rowlock_fence() found that the
 *                       grant is no longer the current one (the lease ended
 *                       and another owner took the lock, or it was released,
 *                       force-released or purged), so the transaction must not
 *                       commit. (The SQL form, CALL `<table>_fence`, says
 *                       SQLSTATE 'RLF01' instead.)
 *  ROWLOCK_EUPGRADE     Release the shared hold first (or downgrade instead
 *                       of upgrading): an exclusive acquire by a client that
 *                       holds the name shared is refused at once, never
 *                       waited on: two readers upgrading would each wait for
 *                       the other's shared hold to end, for ever. Nothing was
 *                       changed; the shared hold stays.
 */
#define ROWLOCK_ERRNO_MAP(X)                                                    \
    X(ROWLOCK_OK, 0, "success")                                                 \
    X(ROWLOCK_EBUSY, -1, "lock is held by another owner")                       \
    X(ROWLOCK_ENOTOWNER, -2, "lock is no longer held by this owner")            \
    X(ROWLOCK_EINVALID, -3, "invalid argument")                                 \
    X(ROWLOCK_EDB, -4, "database error")                                        \
    X(ROWLOCK_ESCHEMA, -5, "lock table schema is missing or outdated")          \
    X(ROWLOCK_EUNSUPPORTED, -6, "not supported by this strategy or server")     \
    X(ROWLOCK_ENOMEM, -7, "out of memory")                                      \
    X(ROWLOCK_EFENCED, -8, "the grant is no longer current: roll the transaction back") \
    X(ROWLOCK_EUPGRADE, -9, "no upgrade: this client holds the name shared")

typedef enum rowlock_error {
#define ROWLOCK_ERROR_ENUM_(name, value, msg) name = value,
    ROWLOCK_ERRNO_MAP(ROWLOCK_ERROR_ENUM_) /* a trailing comma: C99, C++11 */
#undef ROWLOCK_ERROR_ENUM_
} rowlock_error;

/** A static English sentence for a code ("lock is held by another owner").
 *  Unknown codes give "unknown error". Never NULL. */
ROWLOCK_EXTERN const char *rowlock_strerror(int code);

/** The symbolic name of a code ("ROWLOCK_EBUSY"), for logs and CLI output.
 *  Unknown codes give "ROWLOCK_EUNKNOWN". Never NULL. */
ROWLOCK_EXTERN const char *rowlock_error_name(int code);

/**
 * Copy `n` bytes of untrusted text `s` into `out` (`cap` bytes, always
 * NUL-terminated) so that it is safe to show on a terminal and in a log
 * line: C0 controls (newline included), DEL, bytes that are not valid UTF-8
 * and the backslash itself are written as \xNN (a backslash as \\); C1
 * controls (U+0080-U+009F, which include the 8-bit CSI and OSC), the line
 * and paragraph separators (U+2028, U+2029) and the bidirectional controls
 * (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) as one \uXXXX
 * each (\u009b, \u202e); so no input can end the line, start a terminal
 * escape sequence, reorder what the reader sees or forge another message. What does not fit is cut at a
 * character boundary and ends in "...". Returns the length written. Every
 * rowlock message that quotes user input uses it.
 */
ROWLOCK_EXTERN size_t rowlock_escape(char *out, size_t cap, const char *s, size_t n);

/** The library's version string (the project version, "0.2.0" for this
 *  release), for checking the runtime library against ROWLOCK_VERSION_STRING
 *  from the header. */
ROWLOCK_EXTERN const char *rowlock_version(void);

/** The schema version this library needs (the number of the newest embedded
 *  migration in sql/). */
ROWLOCK_EXTERN int rowlock_schema_version_expected(void);

/**
 * Initialise libmysqlclient. Optional: rowlock_client_connect() calls it on
 * first use. Call it once from the main thread before starting threads that
 * open clients (libmysqlclient's own rule). Returns 0 or ROWLOCK_EDB.
 */
ROWLOCK_EXTERN int rowlock_library_init(void);

/** Release libmysqlclient's global state; call last, after freeing every client. */
ROWLOCK_EXTERN void rowlock_library_end(void);

/* ------------------------------------------------------------------------ */
/* Clients                                                                   */
/* ------------------------------------------------------------------------ */

/** A database connection, its settings, its owner identity and its last error. */
typedef struct rowlock_client rowlock_client;

/** TLS modes, as in the mysql client's --ssl-mode. An explicit mode beats
 *  every TLS key of the option files. tls_ca is used only by the VERIFY
 *  modes (with DEFAULT it means VERIFY_CA; with the others connect refuses
 *  it: EINVALID); they may take the CA from ssl-ca= of the option file. */
typedef enum rowlock_tls_mode {
    ROWLOCK_TLS_DEFAULT = 0,      /**< whatever the option files/library default say */
    ROWLOCK_TLS_DISABLED,         /**< no TLS, whatever the option files say */
    ROWLOCK_TLS_PREFERRED,        /**< TLS if the server offers it, nothing verified */
    ROWLOCK_TLS_REQUIRED,         /**< fail unless encrypted (server not verified) */
    ROWLOCK_TLS_VERIFY_CA,        /**< encrypted and the server's certificate chains to the CA;
                                       the host name is not compared */
    ROWLOCK_TLS_VERIFY_IDENTITY   /**< VERIFY_CA and the certificate names the host */
} rowlock_tls_mode;

/** Flags for rowlock_client_options.flags. */
enum {
    /** Do not check the schema version at connect (used by migrate tools). */
    ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK = 1u << 0,
    /** Read the standard MySQL option files (/etc/my.cnf, /etc/mysql/my.cnf,
     *  ~/.my.cnf, ...) groups [client] and [rowlock]. Ignored when
     *  defaults_file is set (then only that file is read). A file other
     *  users can write (o+w, or g+w and owned by neither the user nor root)
     *  is skipped with a warning on stderr, as the mariadb client does. */
    ROWLOCK_CLIENT_READ_DEFAULT_FILES = 1u << 1,
    /** Declare that all lock traffic goes to one node of a multi-primary
     *  (Galera) cluster, which makes the for-update strategy safe there. */
    ROWLOCK_CLIENT_SINGLE_NODE = 1u << 2
};

#define ROWLOCK_CLIENT_OPTIONS_VERSION 1

/**
 * How to connect. NULL strings and zero numbers mean "not set": then the
 * option files decide (when read), then libmysqlclient's defaults. Explicit
 * fields override option files, as on the mysql command line. The option
 * files (groups [client], [client-server], [client-mariadb], [rowlock]) are
 * read once by rowlock at connect, which hands libmysqlclient their content
 * without the keys explicit fields supersede; a pipe works, devices, sockets
 * and files over 1 MiB are refused (EINVALID). The password is `password`,
 * else the option files'; the MYSQL_PWD environment variable is never read.
 */
typedef struct rowlock_client_options {
    unsigned int version;        /**< ROWLOCK_CLIENT_OPTIONS_VERSION */
    const char *defaults_file;   /**< read only this option file (a regular file or a pipe); refused
                                      (ROWLOCK_EINVALID) if other users can write it or a file it includes */
    const char *host;
    unsigned int port;
    const char *unix_socket;
    const char *user;
    const char *password;
    const char *database;
    const char *table;           /**< lock table; default "rowlock_locks" (or [rowlock] table=);
                                      not rowlock_schema nor ending in _queue, _token, _floor, _hold or _fence */
    unsigned int connect_timeout_ms;  /**< default 10000 */
    unsigned int read_timeout_ms;     /**< default 0: libmysqlclient's default; lock waits are
                                           never cut by it: a statement that waits in the server
                                           gets the read timeout after the end of its wait (the
                                           connection is opened non-blocking for it, ~12 KB) */
    unsigned int write_timeout_ms;    /**< default 0: libmysqlclient's default */
    rowlock_tls_mode tls_mode;
    const char *tls_ca;          /**< CA file for VERIFY_CA / VERIFY_IDENTITY */
    unsigned int flags;          /**< ROWLOCK_CLIENT_* */
} rowlock_client_options;

#define ROWLOCK_CLIENT_OPTIONS_INIT \
    { ROWLOCK_CLIENT_OPTIONS_VERSION, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, \
      ROWLOCK_TLS_DEFAULT, NULL, 0u }

/**
 * Allocate a client, not yet connected. Its owner identity (128 random bits
 * from the OS, plus host name and pid for humans) is made here.
 * @return 0, ROWLOCK_ENOMEM, or ROWLOCK_EDB if the OS random source failed.
 * Does not block on the network.
 */
ROWLOCK_EXTERN int rowlock_client_new(rowlock_client **out);

/**
 * Open the client's own connection and check the lock table's schema.
 * @return 0;
 *   ROWLOCK_EUNSUPPORTED the server is not MariaDB 10.6 or later (MySQL is
 *                     refused: the library uses MariaDB-only SQL);
 *   ROWLOCK_EINVALID  bad options (unknown version, bad table name, unreadable
 *                     defaults_file, TLS mode without what it needs);
 *   ROWLOCK_EDB       cannot connect or authenticate (message has the server's);
 *   ROWLOCK_ESCHEMA   table missing or schema version mismatch (message names
 *                     expected and found) — unless SKIP_SCHEMA_CHECK;
 *   ROWLOCK_ENOMEM.
 * Blocks for connect (connect_timeout_ms) plus one round trip. On failure the
 * client stays unconnected and may be connected again.
 */
ROWLOCK_EXTERN int rowlock_client_connect(rowlock_client *c, const rowlock_client_options *opts);

/**
 * Use an application's existing connection (a MYSQL *, passed as void *).
 * The client does not take ownership: rowlock_client_free() never closes it.
 * The connection must outlive the client and must not be used by another
 * thread while rowlock calls run. rowlock prepares its statements on it (and
 * closes them on free) and never changes its session settings; while an
 * insert or optimistic lock is held, the session also holds a named lock
 * GET_LOCK('rowlock.<hash>') that waiters use as a wake-up hint (taken and
 * freed inside the claim and release statements, which is why those are
 * "unsafe" for binlog_format=STATEMENT: use MIXED, MariaDB's default, or
 * ROW); while it waits for one, it holds GET_LOCK('rowlock.<hash>.q') when
 * it heads the waiter queue and has a row, keyed by CONNECTION_ID(), in the
 * MEMORY table <table>_queue (deleted by rowlock_client_free()). The insert
 * and optimistic strategies refuse to run while the connection is inside an
 * application transaction (their rows must commit on their own); a
 * connection opened with CLIENT_FOUND_ROWS is refused (affected-row counts
 * would lie). Only opts->table, opts->flags are used from opts (may be NULL).
 * @return 0, ROWLOCK_EINVALID, ROWLOCK_EUNSUPPORTED (not MariaDB 10.6+),
 *   ROWLOCK_ESCHEMA, ROWLOCK_EDB, ROWLOCK_ENOMEM.
 * One round trip (the schema check).
 */
ROWLOCK_EXTERN int rowlock_client_wrap(rowlock_client *c, void *mysql, const rowlock_client_options *opts);

/**
 * Close the client's connection (if it owns it) and free it. Locks still held
 * are NOT released by free (bind lock lifetimes to the client: free locks
 * first, which releases them). A for-update lock dies with the connection.
 * Lock handles of this client that are still alive become orphans: every
 * call on them returns ROWLOCK_EINVALID (there is no client left for a
 * message) and rowlock_lock_free() only frees them. NULL-safe.
 */
ROWLOCK_EXTERN void rowlock_client_free(rowlock_client *c);

/**
 * Make a rowlock_acquire() or rowlock_acquire_many() of c that is waiting,
 * or the next one if none is, return ROWLOCK_EBUSY soon ("interrupted"),
 * whatever its wait: for a program that waits with a long wait (no
 * statements while nothing changes) and must still answer a signal or a
 * shutdown. Call it from another thread (it is thread-safe, not
 * async-signal-safe); c's own connection is cut (shutdown(2)) so that a
 * statement blocked in the server returns at once, and the next call
 * reconnects. The acquire that returns clears the request. The cut server
 * session lives on until the server notices it, and a release in that
 * moment may hand it the lock (insert and optimistic on one server: the
 * waiter queue's hand-off). So before it returns, an acquire that was cut
 * while it waited in the queue (or whose claim's answer the cut lost, or,
 * for rowlock_acquire_many, whose release of a name it had taken could not
 * run) ends that session (KILL CONNECTION from a new connection, which an
 * account may do to its own sessions; only the session with that id and,
 * over TCP, that client port, and only while it runs a rowlock statement),
 * then adopts a grant in its owner's name and releases it (a shared or
 * semaphore handle on one server: deletes its entry of the name, waiting,
 * granted to it by another reader's acquire, or granted by its own
 * statement whose answer the cut lost, unless another handle of the
 * client holds the name): a few ms on a
 * reachable server; at most about 2 s per host tried when the server
 * cannot be reached (2 s timeouts), and then the grant lapses with its
 * lease, as after a crash. A connection of rowlock_client_wrap() is not
 * cut: the acquire returns at the end of its current wait slice.
 */
ROWLOCK_EXTERN void rowlock_client_interrupt(rowlock_client *c);

/** One line about the last failure on this client ("" if none). Borrowed. */
ROWLOCK_EXTERN const char *rowlock_client_errmsg(const rowlock_client *c);
/** The last server/connection error number kept with ROWLOCK_EDB (0 if none). */
ROWLOCK_EXTERN unsigned int rowlock_client_db_errno(const rowlock_client *c);
/** 1 when the last error says the client's connection is gone or could not
 *  be made (the server stopped, restarted, is unreachable, ended the session,
 *  or a Galera node left the cluster): everything the session held (a
 *  for-update lock, the wake-up hint) is gone, and the next call on a
 *  connection the client owns reconnects, so a caller that waits may go on
 *  waiting. 0 otherwise (also for NULL). The same classification the library
 *  uses itself; no round trip. */
ROWLOCK_EXTERN int rowlock_client_conn_lost(const rowlock_client *c);
/** 1 when the last error is transient: a server state that ends by itself
 *  (read-only, max_connections reached, connection refused or lost, server
 *  shutting down, Galera node not ready, lock wait timeout, deadlock), so a
 *  caller with time left may try again; 0 for a permanent one (access
 *  denied, unknown table, bad schema, ...) and for NULL. The library's own
 *  table (the same one its waits use); no round trip. */
ROWLOCK_EXTERN int rowlock_client_transient(const rowlock_client *c);
/** The last SQLSTATE kept with ROWLOCK_EDB ("00000" if none). Borrowed. */
ROWLOCK_EXTERN const char *rowlock_client_sqlstate(const rowlock_client *c);
/** This client's owner identity as stored in the lock table. Borrowed. */
ROWLOCK_EXTERN const char *rowlock_client_owner(const rowlock_client *c);
/** The lock table name in use. Borrowed. */
ROWLOCK_EXTERN const char *rowlock_client_table(const rowlock_client *c);
/** The server's version string ("10.11.19-MariaDB..."), or "" if unconnected. */
ROWLOCK_EXTERN const char *rowlock_client_server_info(const rowlock_client *c);

/* ------------------------------------------------------------------------ */
/* Schema                                                                    */
/* ------------------------------------------------------------------------ */

/**
 * The schema version found on the server for this client's table.
 * @param found set to 0 when nothing is installed.
 * @return 0 or ROWLOCK_EDB. One round trip.
 */
ROWLOCK_EXTERN int rowlock_schema_version(rowlock_client *c, int *found);

/** Flags for rowlock_schema_migrate(). */
enum { ROWLOCK_MIGRATE_DRY_RUN = 1u << 0 };

/**
 * Apply the pending migrations embedded from sql/ (forward only). Idempotent,
 * and safe when several processes run it at once: it serialises on a
 * server-side named lock (GET_LOCK) and re-reads the version under it.
 * Needs CREATE/ALTER privileges (the lock-taking user does not).
 * @param from, to  set to the version before and after (either may be NULL);
 *                  with DRY_RUN, `to` is what a real run would reach.
 * @return 0, ROWLOCK_ESCHEMA if the server's version is newer than this
 *         library knows, ROWLOCK_EDB, ROWLOCK_ENOMEM.
 * Blocks up to 60 s waiting for a concurrent migrator, plus the DDL.
 */
ROWLOCK_EXTERN int rowlock_schema_migrate(rowlock_client *c, unsigned int flags, int *from, int *to);

/* ------------------------------------------------------------------------ */
/* Locks                                                                     */
/* ------------------------------------------------------------------------ */

/** A named lock bound to a client and a strategy. */
typedef struct rowlock_lock rowlock_lock;

/** How a lock is kept in the table. See README "Choosing a strategy". */
typedef enum rowlock_strategy {
    /** Unique-key INSERT of a row with owner, count and lease. */
    ROWLOCK_STRATEGY_INSERT = 1,
    /** A transaction holding the row with SELECT ... FOR UPDATE. */
    ROWLOCK_STRATEGY_FOR_UPDATE = 2,
    /** Compare-and-set UPDATE on a version column, with a lease. */
    ROWLOCK_STRATEGY_OPTIMISTIC = 3
} rowlock_strategy;

/** "insert", "for-update", "optimistic"; "unknown" for any other value. Never NULL. */
ROWLOCK_EXTERN const char *rowlock_strategy_name(rowlock_strategy s);
/** Parse a strategy name. @return 0 or ROWLOCK_EINVALID. */
ROWLOCK_EXTERN int rowlock_strategy_parse(rowlock_strategy *out, const char *name);

/* Version 2 added mode and permits; version 1 structs (without them) are
 * still accepted and make exclusive handles. */
#define ROWLOCK_LOCK_OPTIONS_VERSION 2

/** How a handle holds its lock. */
typedef enum rowlock_mode {
    /** One holder at a time (the default). */
    ROWLOCK_MODE_EXCLUSIVE = 0,
    /** Any number of shared holders at once (at most `permits` when it is
     *  set), never together with an exclusive holder. insert and for-update
     *  (LOCK IN SHARE MODE); optimistic refuses it (ROWLOCK_EUNSUPPORTED). */
    ROWLOCK_MODE_SHARED = 1
} rowlock_mode;

/** Options for a lock handle. */
typedef struct rowlock_lock_options {
    unsigned int version;          /**< ROWLOCK_LOCK_OPTIONS_VERSION */
    rowlock_strategy strategy;     /**< default (0): ROWLOCK_STRATEGY_INSERT */
    /* version 2 */
    rowlock_mode mode;             /**< default (0): ROWLOCK_MODE_EXCLUSIVE */
    /** A counting semaphore: the name admits at most `permits` shared
     *  holders at once (insert strategy only; 0: no limit). A name without
     *  a limit takes the first N a handle asks for; after that only
     *  rowlock_admin_set_permits() changes it (a handle asking another N gets the
     *  name's). */
    unsigned int permits;
} rowlock_lock_options;

#define ROWLOCK_LOCK_OPTIONS_INIT { ROWLOCK_LOCK_OPTIONS_VERSION, (rowlock_strategy)0, ROWLOCK_MODE_EXCLUSIVE, 0u }
/** The largest number of permits. */
#define ROWLOCK_PERMITS_MAX 1000000u

/** Longest lock name, in bytes. */
#define ROWLOCK_NAME_MAX 255
/** Longest owner identity, in bytes (without the NUL). */
#define ROWLOCK_OWNER_MAX 190

/**
 * Check a lock name without a client: 1-255 bytes of valid UTF-8 (no
 * overlong forms, no surrogates), case-sensitive, any other bytes allowed
 * (quotes, backslashes, % and _ are plain characters).
 * @param why  if not NULL, set to a static reason on failure.
 * @return 0 or ROWLOCK_EINVALID.
 */
ROWLOCK_EXTERN int rowlock_name_check(const char *name, const char **why);

/**
 * Make a handle for lock `name` on client `c`. Does not talk to the server.
 * @param opts may be NULL (insert strategy).
 * @return 0; ROWLOCK_EINVALID for a bad name (message says why: empty, too
 *         long with its length, invalid UTF-8 at which byte) or options;
 *         ROWLOCK_ENOMEM.
 */
ROWLOCK_EXTERN int rowlock_lock_new(rowlock_lock **out, rowlock_client *c, const char *name,
                                    const rowlock_lock_options *opts);

/**
 * Release whatever this handle still holds (each of its acquisitions), then
 * free it. Errors while releasing are ignored: a lease-based lock then ends
 * with its lease. NULL-safe.
 */
ROWLOCK_EXTERN void rowlock_lock_free(rowlock_lock *l);

/** Wait forever (for rowlock_acquire's wait_ms). */
#define ROWLOCK_WAIT_FOREVER (-1)
/** Longest lease: 365 days (the server's longest wait_timeout, which is a
 *  for-update lock's lease). */
#define ROWLOCK_LEASE_MAX_MS (365LL * 24 * 3600 * 1000)
/** Lease used when 0 is given. */
#define ROWLOCK_LEASE_DEFAULT_MS 30000

/**
 * Acquire the lock.
 *
 * Re-entrant: if this client already holds it (through this or another handle
 * on the same client), the hold count goes up, the lease is extended to at
 * least now + lease_ms, and the token stays the same. Each acquire needs its
 * own release.
 *
 * @param wait_ms  0: try once; N > 0: wait up to N ms; ROWLOCK_WAIT_FOREVER.
 * @param lease_ms how long the grant lasts without renew (0 =
 *                 ROWLOCK_LEASE_DEFAULT_MS). for-update: the lock lasts until
 *                 release or until its session ends, and the server ends the
 *                 session when it has sent nothing for lease_ms (the
 *                 session's wait_timeout becomes the lease, whole seconds
 *                 rounded up, at most 365 days): renew, keep, or run SQL in
 *                 the lock's transaction to hold it longer.
 * @return 0 (then rowlock_lock_token() is the grant's fencing token);
 *   ROWLOCK_EBUSY        held by another owner (after the wait);
 *   ROWLOCK_EINVALID     bad wait/lease, the name is managed by another
 *                        strategy (message names it), or the connection is
 *                        inside an application transaction;
 *   ROWLOCK_EUNSUPPORTED for-update on a Galera cluster without SINGLE_NODE,
 *                        or a second for-update name on one client;
 *   ROWLOCK_EDB, ROWLOCK_ENOMEM.
 * Shared and semaphore handles (ROWLOCK_MODE_SHARED, permits): a shared
 * holder asking exclusive through another handle of the same client is
 * refused with ROWLOCK_EUPGRADE (no upgrade). An exclusive holder asking
 * shared through another handle re-enters its grant when the name has been
 * used shared (its grant is a holders entry); when its grant is a plain
 * one-row lock the shared acquire is refused at once with ROWLOCK_EBUSY
 * ("this client holds it exclusively through another handle"), whatever
 * wait_ms: waiting could only wait for the client itself.
 * Blocks at most wait_ms plus a few round trips (and the client's timeouts):
 * an uncontended insert or optimistic grant is one statement; a refusal
 * adds a read that names the holder. An insert grant on a name used shared
 * or as a semaphore (a multi-holder name) is one transaction of 5 round
 * trips (src/holders.c); an exclusive handle meeting such a name for the
 * first time pays the refused one-row claim and its read before it.
 */
ROWLOCK_EXTERN ROWLOCK_WARN_UNUSED int rowlock_acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms);

/**
 * Release one acquisition made through this handle. When the client's count
 * reaches 0 the lock is free for others (the row keeps its token).
 * @return 0; ROWLOCK_ENOTOWNER if the lock was lost (someone else holds it,
 *   it was purged or force-released, or the holding transaction/connection
 *   ended) — nothing is changed then; a grant held as an entry of a
 *   multi-holder name (shared, semaphore, or exclusive on a name used so)
 *   on one server also when its lease had ended: others pass over such an
 *   entry without removing it, so whether one held the name meanwhile
 *   cannot be told (then the entry is removed, or, while another handle of
 *   the client shares it, one count taken off: one or two more
 *   round trips); ROWLOCK_EINVALID if this handle holds
 *   nothing, or (insert, optimistic) the connection is inside a
 *   transaction; ROWLOCK_EDB.
 * A release that failed with ROWLOCK_EDB because the connection was lost
 * may have committed before it was (the reply is what got lost): the handle
 * still counts the hold, and calling rowlock_release() again, on the new
 * connection, then reports ROWLOCK_ENOTOWNER, as it would for a lease that
 * ended and was taken. Either way the lock is no longer this client's.
 * One round trip. insert/optimistic: a final release that hands the lock to
 * the waiter heading the queue takes one more, after its commit, to wake it;
 * and one more first when a waiter began heading the queue while the handle
 * saw no contention (its first, plain release statement then refuses).
 */
ROWLOCK_EXTERN ROWLOCK_WARN_UNUSED int rowlock_release(rowlock_lock *l);

/**
 * Extend the lease to now + lease_ms (server clock). Never re-acquires: if
 * the lease already ended or the row changed hands, nothing changes. Never
 * shortens it either: a lease that ends later than now + lease_ms (a longer
 * lease given at the acquire, or by another handle of this client sharing
 * the grant) keeps its end (0.2.0; before, a renewal could end it sooner
 * than the keeper's safe time said).
 * for-update: checks that the holding transaction is still alive, which
 * restarts the server's idle timer for the session (and makes lease_ms its
 * wait_timeout when it changed).
 * @return 0; ROWLOCK_ENOTOWNER (lost, as for release, or lease already
 *   ended); ROWLOCK_EINVALID if not held, bad lease, or (insert,
 *   optimistic) the connection is inside a transaction; ROWLOCK_EDB.
 * One round trip.
 */
ROWLOCK_EXTERN ROWLOCK_WARN_UNUSED int rowlock_renew(rowlock_lock *l, int64_t lease_ms);

/**
 * Downgrade this handle's exclusive grant to shared without letting go
 * (a write lock becoming a read lock): other shared acquirers may join at
 * once, while no exclusive acquirer is granted at any moment before this
 * handle's release. (0.2.0)
 *
 * The grant goes on: the fencing token stays the same (every grant after
 * it, shared or exclusive, still gets a greater one), the lease becomes at
 * least the acquire's lease_ms from now (never shorter), and a kept lock
 * (rowlock_keep) stays kept. Until the final release the handle holds the
 * name shared: rowlock_lock_mode() says ROWLOCK_MODE_SHARED, and a
 * re-entry through this handle is a shared one; after it, the handle's
 * acquires ask for the mode it was made with again. Readers queued behind
 * the exclusive grant are woken and granted unless an exclusive waiter is
 * ahead of them in the queue (FIFO across modes, as always; waiters of a
 * name that was only ever held exclusively have no place in that queue
 * yet, and are granted in the order they come back).
 *
 * There is no upgrade: an exclusive acquire by a client that holds the
 * name shared is refused with ROWLOCK_EUPGRADE (two readers that both
 * waited to upgrade would wait for each other for ever); release the
 * shared hold and acquire exclusive, then check again what was read.
 *
 * @return 0 (also when the handle holds the name shared already: nothing
 *   changes); ROWLOCK_ENOTOWNER the lock was lost (as for release; the
 *   handle holds nothing then); ROWLOCK_EINVALID the handle holds nothing,
 *   holds it more than once or another handle of the client holds it too
 *   (a downgrade would change every hold under their feet: release the
 *   re-entries first), or the connection is inside a transaction;
 *   ROWLOCK_EUNSUPPORTED a strategy that cannot: optimistic (no shared
 *   mode), for-update (InnoDB keeps a transaction's exclusive row lock
 *   until it ends), insert on a Galera cluster (not done there yet);
 *   ROWLOCK_EDB (nothing changed). When the connection died during the
 *   downgrade, its server session is ended first (it may still be running
 *   the change, e.g. in a lock wait past the read timeout), then the grant
 *   is read: a change that committed returns 0, one that did not
 *   ROWLOCK_EDB; if the session cannot be ended or the grant read,
 *   ROWLOCK_ENOTOWNER: the lock is given up (it ends with its lease). After
 *   a failover (the epoch rule), ROWLOCK_ENOTOWNER as for a renewal.
 * insert: a grant on a name used shared before (a holders-table entry) is
 * one statement, plus one to wake readers; a grant of the one-row protocol
 * turns the name into a multi-holder name in one transaction of 5 round
 * trips, plus one to wake waiters. Blocks for those round trips (and up to
 * 5 s while woken readers pass the wake lock along).
 */
ROWLOCK_EXTERN ROWLOCK_WARN_UNUSED int rowlock_downgrade(rowlock_lock *l);

/**
 * Acquire several locks at once, all or none (a multi-lock): `locks` are n
 * handles made with rowlock_lock_new(), each with its own name, strategy and
 * mode, on one client or several. Each becomes an ordinary grant of its
 * handle: its own lease, token (rowlock_lock_token()), hold count, keeper
 * (rowlock_keep() on a handle works as for rowlock_acquire) and release.
 *
 * No deadlock: the names are taken in one global order, by name bytes
 * (strcmp), then by lock table, whatever the order of the array; two callers
 * whose sets overlap cannot wait for each other in a cycle, as long as they
 * hold no other names while they wait. One deadline: wait_ms is the budget
 * of the whole call (0: each name is tried once; ROWLOCK_WAIT_FOREVER). While
 * it waits for a name it renews the names it already holds (every third of
 * the lease), and before it returns it renews a name granted more than a
 * tenth of the lease ago: each name has at least nine tenths of lease_ms
 * left at return.
 *
 * Re-entrant per name, as rowlock_acquire: a handle that already holds its
 * lock (or another handle of the same client holds the name) counts one more
 * hold. Each name must appear once per set: two handles of one name in one
 * lock table are refused (ROWLOCK_EINVALID), even on different clients
 * (which would wait for each other).
 *
 * All or none: when a name cannot be had, the names this call acquired are
 * released (one release each, newest first) before it returns. A release
 * that fails (the server unreachable) is not retried: that handle then
 * counts no hold for it (rowlock_lock_held() 0, the keeper forgets it) and
 * the server ends the grant with its lease; the message says so. After
 * rowlock_client_interrupt(), such grants of the interrupted client are
 * given back before the call returns (see there).
 *
 * for-update: a for-update lock is a transaction on its client's
 * connection, so a for-update handle must be the only handle of the set on
 * its client (give each for-update name a client of its own).
 *
 * @param locks    n handles (the array is not changed or reordered).
 * @param n        0: nothing to do, returns 0.
 * @param wait_ms, lease_ms  as for rowlock_acquire (the lease of each name).
 * @param failed   if not NULL: on failure the index in `locks` of the handle
 *                 whose failure is returned (its client holds the message,
 *                 which names the set); n on success.
 * @return 0 (all held); on failure nothing of this call is held and:
 *   ROWLOCK_EBUSY        a name is held by another owner (at the deadline);
 *   ROWLOCK_EINVALID     a NULL or orphaned handle, a name twice, bad
 *                        wait/lease, or what rowlock_acquire refuses;
 *   ROWLOCK_EUNSUPPORTED a for-update handle shares its client with another
 *                        handle of the set; or what rowlock_acquire refuses;
 *   ROWLOCK_ENOTOWNER    a name acquired by this call was lost while it
 *                        waited for another (force-released, or a lease far
 *                        shorter than the round trips);
 *   ROWLOCK_EDB, ROWLOCK_ENOMEM.
 * Blocks at most wait_ms plus the round trips of n acquires (uncontended: n
 * round trips, one per name, as rowlock_acquire), plus one renew per held
 * name every third of the lease while waiting, plus n releases on failure.
 */
ROWLOCK_EXTERN ROWLOCK_WARN_UNUSED int rowlock_acquire_many(rowlock_lock *const *locks, size_t n, int64_t wait_ms,
                                                            int64_t lease_ms, size_t *failed);

/**
 * Release one acquisition of each of n handles (what rowlock_acquire_many
 * granted), in reverse name order. Every handle is released even when one
 * fails; the first failure is returned and its client keeps the message.
 * @param failed  if not NULL: the index in `locks` of that handle; n when
 *                all were released.
 * @return 0; or the first failure, as rowlock_release (ROWLOCK_ENOTOWNER a
 *   lock was lost, ROWLOCK_EINVALID a handle holds nothing or is NULL or
 *   named twice, ROWLOCK_EDB).
 * One round trip per handle (as rowlock_release).
 */
ROWLOCK_EXTERN ROWLOCK_WARN_UNUSED int rowlock_release_many(rowlock_lock *const *locks, size_t n, size_t *failed);

/** The fencing token of this handle's current grant, 0 if it holds nothing.
 *  Tokens are strictly increasing per name across releases, expiry
 *  takeovers, purges and server restarts: pass them to the resource you
 *  protect and have it refuse smaller ones. One exception, which that rule
 *  tolerates: shared (read) grants of an insert lock without permits with
 *  no exclusive holder or waiter between them may share a token (on one
 *  server, readers join the name a reader opened without drawing a new
 *  one). An exclusive grant's token is still greater than every token
 *  granted before it, and a reader's is greater than every exclusive
 *  grant's before it and smaller than the next one's. Semaphore holders'
 *  tokens are all distinct. */
ROWLOCK_EXTERN uint64_t rowlock_lock_token(const rowlock_lock *l);

/** How many acquisitions this handle holds (0 if none). No round trip. */
ROWLOCK_EXTERN unsigned int rowlock_lock_held(const rowlock_lock *l);

/** The lock's name. Borrowed. */
ROWLOCK_EXTERN const char *rowlock_lock_name(const rowlock_lock *l);

/** The handle's strategy. */
ROWLOCK_EXTERN rowlock_strategy rowlock_lock_strategy(const rowlock_lock *l);

/** The handle's mode (ROWLOCK_MODE_EXCLUSIVE for version 1 options); while
 *  it holds a grant it downgraded (rowlock_downgrade), ROWLOCK_MODE_SHARED. */
ROWLOCK_EXTERN rowlock_mode rowlock_lock_mode(const rowlock_lock *l);

/* rowlock_info: filled by the library (versioned structs, case 2; given to
 * rowlock_admin_list()'s callback, case 3). */
#define ROWLOCK_INFO_VERSION 1

/** What the table says about one lock name. */
typedef struct rowlock_info {
    unsigned int version;       /**< set by the caller: ROWLOCK_INFO_VERSION (in rowlock_admin_list()'s
                                     callback: by the library, the version it fills) */
    int exists;                 /**< a row exists for this name */
    int held;                   /**< held now (by the server clock) */
    int stale;                  /**< has an owner whose lease ended: a crashed holder */
    rowlock_strategy strategy;  /**< the strategy that manages the name */
    uint64_t token;             /**< last granted fencing token (the version, for optimistic) */
    unsigned int count;         /**< re-entrant hold count */
    int64_t acquired_at_us;     /**< grant time, server clock, µs since the epoch (UTC); 0 unknown */
    int64_t expires_at_us;      /**< lease end, same clock; 0 if none */
    int64_t expires_in_ms;      /**< lease end minus the server clock; negative once ended */
    char name[ROWLOCK_NAME_MAX + 1];
    char owner[ROWLOCK_OWNER_MAX + 1]; /**< "" if unknown or free */
} rowlock_info;

#define ROWLOCK_INFO_INIT { ROWLOCK_INFO_VERSION, 0, 0, 0, (rowlock_strategy)0, 0, 0, 0, 0, 0, "", "" }

/**
 * Read the lock's row. A for-update lock's holder is not written to the
 * row; `held` is found with a non-waiting probe and `owner` is "". For a
 * shared lock or semaphore: held if any holder holds it, count = the holds
 * of all holders, owner = the first holder, token = the latest grant's,
 * the latest lease end (one more round trip; rowlock_admin_holders() lists them).
 * On a Galera node the read is causal (wsrep_sync_wait): it shows every
 * grant committed anywhere in the cluster before it, waiting for the node
 * to apply them.
 * @return 0 (info->exists tells whether there is a row), ROWLOCK_EINVALID
 *   (info NULL or version 0; for-update: the connection is inside a
 *   transaction, where the probe's lock would stay), ROWLOCK_EDB. One or two round trips (one more,
 *   once per connection, if nothing on it has asked yet whether the server
 *   is a Galera node).
 */
ROWLOCK_EXTERN int rowlock_inspect(rowlock_lock *l, rowlock_info *info);

/**
 * Fence the application's open transaction on this handle's grant: after a
 * 0 the transaction commits only while the grant is the current one, and
 * if the lease ended and another owner took the lock, the transaction
 * cannot commit (nothing it wrote is kept).
 *
 * `mysql` is the application's MYSQL * (as void *): its own connection to
 * the same server or cluster (any node), inside the transaction that makes
 * the writes to protect (START TRANSACTION, or autocommit off). Call it once
 * per transaction, anywhere before COMMIT; the lock's own client connection
 * is never used. The call writes the lock's row (the holder's entry for a
 * shared lock or semaphore), conditioned on its token, in that transaction:
 *  - one server: the row's exclusive lock is held until the application
 *    commits or rolls back, so no taker can take the lock in between; a
 *    fenced transaction blocks, for its duration, takers of the name and
 *    this lock's own renewals (the keeper's included): keep it short next
 *    to the lease, and commit it before releasing the lock;
 *  - Galera: the row is in the transaction's write set, so a take-over
 *    committed on another node makes the COMMIT (or this call) fail
 *    certification (MySQL error 1213): roll back and retry; the retried
 *    fence then says ROWLOCK_EFENCED.
 * A lease that ended but that nobody took yet still fences the exclusive
 * row (a taker must rewrite it, which waits for this transaction); a shared
 * or semaphore holder's lease must still be live.
 * Cost: one round trip on `mysql` (prepare and execute sent together), and
 * no commit of its own: the write commits with the application's data.
 * SQL form: CALL `<table>_fence`(name, token) (sql/0005_fenced_writes.sql).
 * Readers that joined share a token (rowlock_lock_token()), so (name,
 * token) names no single entry. While the name is still open at that token
 * (no writer drew one since), the SQL form share-locks the name's row, not
 * an entry (writers wait for the commit; readers' renewals go on), and
 * commits for that token whoever calls it: also for a reader of that spell
 * whose lease ended or who released (no writer got in since, and none can
 * before the commit). After a writer drew (schema 9): on a name without
 * permits it fences a live entry of that token (the greatest owner's among
 * the live ones), which may be another reader's, locked until the commit:
 * it commits while any reader of the token is live (no writer can be
 * granted meanwhile), refused once none is; on a name a semaphore acquirer
 * has since given permits, it refuses every reader of a shared token (a
 * lapsed reader's permit may have gone to another holder, and the
 * procedure cannot tell the caller's entry). The C form fences the
 * caller's own entry: prefer it for readers. Both forms judge a
 * holders-table entry's lease by the server's clock once the entry is
 * locked, not when the statement began (schema 10): a fence that waited
 * for a taker that saw the lease ended is refused.
 * @return 0; ROWLOCK_EFENCED the grant is not current: roll back (nothing
 *   was written by this call); ROWLOCK_EINVALID (mysql NULL, the handle holds
 *   nothing, or `mysql` is not inside a transaction: autocommit would commit
 *   the fence at once); ROWLOCK_EUNSUPPORTED (for-update: the lock is the
 *   transaction of its own connection, so write on that connection and the
 *   writes die with the lock); ROWLOCK_ESCHEMA (schema older than 5);
 *   ROWLOCK_EDB (an error on `mysql`: rowlock_client_db_errno() and
 *   rowlock_client_transient() say which; 1213 and 1205: roll back and
 *   retry). The message and error numbers are kept in the lock's client
 *   (rowlock_client_errmsg()); `mysql` keeps its own. Blocks while another transaction
 *   holds the row (a taker's claim, another fenced transaction of the same
 *   exclusive lock), up to `mysql`'s innodb_lock_wait_timeout.
 */
ROWLOCK_EXTERN int rowlock_fence(rowlock_lock *l, void *mysql);

/* ------------------------------------------------------------------------ */
/* Lease keeper                                                              */
/* ------------------------------------------------------------------------ */

/*
 * A lease keeper renews a lock for its holder and says, without a round
 * trip, whether the lock is still held and for how long it is safe to act.
 *
 * Threads. rowlock_keep() starts a keeper for the client (the first time it
 * is called on that client): two threads, a renewer with a database
 * connection of its own, opened with the client's settings and owner
 * identity, so renewals go on while the application's thread is busy (in a
 * long query on its own connection, in a computation, anywhere), and a
 * watcher that never waits on the database, so callbacks come on time even
 * when a renewal hangs. Each lease lock costs its renewals, the keeper
 * nothing more; rowlock_client_free() stops both threads. The keeper never touches the
 * application's connection unless asked to renew there (ROWLOCK_KEEP_SAME_CONNECTION:
 * then it opens none of its own), with one exception: for a for-update lock it
 * watches that connection's socket (poll(2) for hang-up, never reading or
 * writing it), because a for-update lock lives exactly as long as the session.
 * The application keeps using the client and its locks from one thread, as
 * always; rowlock_keep_status() may be called from any thread at any time,
 * also from the keeper's callback, but not while another thread calls
 * rowlock_keep(), rowlock_lock_free() or rowlock_client_free() on the same
 * lock or client. The callback runs on the watcher thread: it must return
 * quickly and must not call any rowlock function but rowlock_keep_status()
 * (set a flag, write to a pipe, signal a condition variable): a release from
 * the callback would wait for the callback to return, forever.
 *
 * What is kept. Every grant made through the handle after rowlock_keep()
 * (and the current one, if held) is kept until its final release, until it is
 * lost, or until rowlock_keep(l, NULL). Keeping adds no round trip to
 * acquire or release. The keeper never re-acquires: a renewal that finds the
 * lock gone (lease ended, force-released, purged, taken) marks it LOST.
 * Transient errors (lock wait timeout, deadlock, a lost connection, which it
 * reconnects) are retried with backoff for as long as the lease still leaves.
 *
 * Safe-until. safe_until_us is on this process's monotonic clock
 * (rowlock_monotonic_us()): the send time of the newest renewal (or grant)
 * the server confirmed, plus its lease, minus 0.1 % of the lease for clock-
 * rate drift. The server may have granted a later end; it never ended the
 * lease earlier, unless the server's clock was stepped forward. Check it
 * before each side effect, and pass the fencing token to the resource: a
 * pause between the check and the act (GC, swap, SIGSTOP) is covered only by
 * the token.
 *
 * for-update: the server ends the holding session after a lease without a
 * statement from it (its wait_timeout), so the keeper keeps the session
 * alive: a `DO 1` on the client's own connection every third of the lease,
 * when the application's thread is not using the connection (a statement
 * of the application's restarts the server's timer as well). safe_until_us
 * is the send time of the newest answered keep-alive (or the grant, or
 * rowlock_renew()) plus the lease, as above. A keep-alive waits for its
 * answer until the safe time at most; without one (a silent partition) the
 * keeper cuts the connection and the lock is LOST: by then the server may
 * have ended the session and granted the lock to the next waiter, never
 * earlier. When the client's socket reports that the server ended the
 * session (KILL, restart, a dropped connection), the lock is LOST at once.
 * A wrapped client's session (the application's connection) is not kept
 * alive by the keeper: renew it yourself; safe_until_us counts from your
 * renewals.
 *
 * fork(): a child does not inherit the keeper thread; its copies of kept
 * locks report ROWLOCK_KEEP_NONE, and freeing its copy of the client never
 * touches the parent's connections.
 */

/** What the keeper knows of a lock. */
typedef enum rowlock_keep_state {
    /** Not kept: rowlock_keep() not called, not held, or a fork child's copy. */
    ROWLOCK_KEEP_NONE = 0,
    /** Held: the newest renewal (or the grant) was confirmed by the server. */
    ROWLOCK_KEEP_HELD = 1,
    /** The keeper cannot renew (no answer, errors) and retries. The lock is
     *  safe until safe_until_us and must be presumed lost after it. */
    ROWLOCK_KEEP_UNKNOWN = 2,
    /** Lost: the server said the lock is no longer ours, or the session
     *  holding a for-update lock ended. Final for this grant. */
    ROWLOCK_KEEP_LOST = 3
} rowlock_keep_state;

/* rowlock_keep_info: filled by the library (versioned structs, case 2). */
#define ROWLOCK_KEEP_INFO_VERSION 1

/** A snapshot of a kept lock (rowlock_keep_status()). */
typedef struct rowlock_keep_info {
    unsigned int version;       /**< set by the caller: ROWLOCK_KEEP_INFO_VERSION */
    rowlock_keep_state state;
    int64_t safe_until_us;      /**< monotonic µs (rowlock_monotonic_us()) before which acting is
                                     safe; 0 when nothing is (NONE, LOST) */
    int64_t safe_ms;            /**< safe_until_us minus now, in ms, never negative */
    int code;                   /**< ROWLOCK_E* of the newest failure (ENOTOWNER when LOST);
                                     0 when none */
    uint64_t token;             /**< the kept grant's fencing token */
    uint64_t renewals;          /**< renewals the server confirmed */
    uint64_t failures;          /**< renewal attempts that failed */
    uint64_t session_id;        /**< server connection id renewing it (for-update: the holding
                                     session); 0 if none */
    char reason[256];           /**< one line: why LOST or UNKNOWN; "" when HELD */
} rowlock_keep_info;

#define ROWLOCK_KEEP_INFO_INIT { ROWLOCK_KEEP_INFO_VERSION, ROWLOCK_KEEP_NONE, 0, 0, 0, 0, 0, 0, 0, "" }

/** Called on the keeper thread when the lock is LOST, or when its
 *  safe-until time comes closer than warn_ms (renewals failing: UNKNOWN;
 *  or one taking too long). Once per grant, until a confirmed renewal moves
 *  the safe time further than warn_ms away again: that re-arms it (0.2.0:
 *  before, never, so a lock kept after a long wait, warned at once, was
 *  never told of a later loss). */
typedef void (*rowlock_keep_fn)(rowlock_lock *l, const rowlock_keep_info *st, void *arg);

/* 2: flags. */
#define ROWLOCK_KEEP_OPTIONS_VERSION 2

/**
 * rowlock_keep_options.flags.
 *
 * ROWLOCK_KEEP_SAME_CONNECTION: renew a lease lock on the client's own
 * connection instead of a connection of the keeper's, so that holding a
 * kept lock costs one server connection, not two, and a grant can never be
 * refused a second connection (a full max_connections). For a program whose
 * thread does not use the client while it holds the lock (a supervisor
 * waiting for a child process, as `rowlock run` and `rowlock lock`): while
 * such a grant is kept, that thread calls on the client only
 * rowlock_keep_status(), rowlock_renew() and rowlock_release() of the kept
 * handle, rowlock_keep(), rowlock_lock_free(), rowlock_client_free() and
 * the accessors (rowlock_client_errmsg(), rowlock_lock_held(), ...): the
 * renewal runs on the keeper's thread under the connection's mutex, which
 * rowlock_renew() and rowlock_release() hold for their whole call, and
 * stopping (rowlock_keep(l, NULL), the final release, a free) waits for a
 * renewal in flight. A renewal is put off (10 ms) while the application's
 * thread has a statement on the connection or the session is inside a
 * transaction (it would commit with it). A lost connection is reconnected
 * by the renewal, as the keeper's own would be (the lease lives in its row;
 * the session's wake-up hint is gone, so waiters poll until the release).
 * Renewals wait for row locks as long as the session's
 * innodb_lock_wait_timeout and for an answer as long as the client's read
 * timeout (the keeper's own connection: 1 s and 3 s); the keeper's status and
 * callback come on time regardless. Needs a client connected with
 * rowlock_client_connect() (ROWLOCK_EUNSUPPORTED on a wrapped client). A
 * for-update lock is always kept on its own session (see above): the flag
 * changes nothing for it.
 */
#define ROWLOCK_KEEP_SAME_CONNECTION 0x1u

typedef struct rowlock_keep_options {
    unsigned int version;       /**< ROWLOCK_KEEP_OPTIONS_VERSION */
    int64_t lease_ms;           /**< lease each renewal asks for; 0: the acquire's lease */
    int64_t interval_ms;        /**< time between renewals; 0: a third of the lease */
    int64_t warn_ms;            /**< notify when an UNKNOWN lock's safe time is below this;
                                     0: a sixth of the lease, at least 1000 (at most half) */
    rowlock_keep_fn on_event;   /**< may be NULL */
    void *arg;                  /**< passed to on_event */
    unsigned int flags;         /**< ROWLOCK_KEEP_* (version 2); 0: a connection of the keeper's */
} rowlock_keep_options;

#define ROWLOCK_KEEP_OPTIONS_INIT { ROWLOCK_KEEP_OPTIONS_VERSION, 0, 0, 0, NULL, NULL, 0 }

/**
 * Keep this handle's grants: renew them in the background and track them.
 * @param opts  NULL stops keeping (the current grant stays held until its
 *              lease ends or it is released).
 * @return 0; ROWLOCK_EINVALID (bad options, an unknown flag, or an interval
 *   not shorter than the lease); ROWLOCK_EUNSUPPORTED (a lease lock on a wrapped client: the
 *   keeper needs a connection of its own, so connect the client with
 *   rowlock_client_connect()); ROWLOCK_EDB (the keeper's connection could
 *   not be opened); ROWLOCK_ENOMEM.
 * Blocks for one connect the first time on a client (a lease lock, without
 * ROWLOCK_KEEP_SAME_CONNECTION), then no round trip. Not thread-safe with other calls on the same client.
 */
ROWLOCK_EXTERN int rowlock_keep(rowlock_lock *l, const rowlock_keep_options *opts);

/**
 * What the keeper knows of this handle's lock. No round trip, thread-safe
 * (any thread, also from the keeper's callback).
 * @return 0 or ROWLOCK_EINVALID (NULL, or st->version 0).
 */
ROWLOCK_EXTERN int rowlock_keep_status(const rowlock_lock *l, rowlock_keep_info *st);

/** The monotonic clock safe_until_us is measured on (CLOCK_MONOTONIC, µs). */
ROWLOCK_EXTERN int64_t rowlock_monotonic_us(void);

/* ------------------------------------------------------------------------ */
/* Events (a logging hook)                                                   */
/* ------------------------------------------------------------------------ */

/*
 * An application can route what rowlock does into its own logs: it
 * registers one function per client (rowlock_client_set_log()), which
 * receives each event at or above a level as a rowlock_event.
 *
 * Why a struct and not a printf-style callback: a log line is rarely all an
 * application wants (it counts retries, alerts on "lost", puts the token in
 * a structured field), and a struct with a version grows without breaking
 * callers. The one-line `message` is there for those who only print.
 *
 * Threads. fn runs on the thread that notices the event: the application's
 * thread inside its rowlock calls (acquire, release, renew, reconnects of its
 * connection, ...); the keeper's renewer thread (renewals, renew retries,
 * reconnects of the keeper's own connection, a lease found lost); the
 * keeper's watcher thread (keeper state changes, a for-update session that
 * ended); or a thread calling rowlock_keep_status() (which may notice that a
 * renewal is overdue). So fn must be thread-safe, and two calls may overlap.
 * fn must return quickly and must not call rowlock functions that take a
 * client or a lock (it may run while the library holds the keeper's mutex):
 * only the pure ones (rowlock_strerror, rowlock_error_name,
 * rowlock_log_level_name, rowlock_event_kind_name, rowlock_escape,
 * rowlock_monotonic_us). Copy what it needs: the event and its strings live
 * only during the call.
 *
 * Cost. Without a hook, or below min_level, an event costs one relaxed atomic
 * load and a comparison: no formatting, no allocation, no lock.
 */

/** Event levels (min_level of rowlock_client_set_log()). */
#define ROWLOCK_LOG_LEVEL_MAP(X) \
    X(ROWLOCK_LOG_DEBUG, 1, "debug") \
    X(ROWLOCK_LOG_INFO, 2, "info")   \
    X(ROWLOCK_LOG_WARN, 3, "warn")   \
    X(ROWLOCK_LOG_ERROR, 4, "error")

typedef enum rowlock_log_level {
#define ROWLOCK_LOG_LEVEL_ENUM_(name, value, str) name = value,
    ROWLOCK_LOG_LEVEL_MAP(ROWLOCK_LOG_LEVEL_ENUM_)
#undef ROWLOCK_LOG_LEVEL_ENUM_
} rowlock_log_level;

/**
 * What happened: one list gives the enum (ROWLOCK_EVENT_<name>) and
 * rowlock_event_kind_name() (the string, stable for grep and for log
 * fields). New kinds are only ever added at the end; a callback must
 * accept kinds it does not know. The level given is the one the library
 * uses for the kind (keep-state: by the new state).
 *
 *  ACQUIRED        info   A grant by rowlock_acquire (debug for a re-entry):
 *                         waited_us is the time the call took, attempt the
 *                         claims it made; the message says "after waiting"
 *                         when a claim found the lock held first.
 *  HANDED_OVER     info   A waiting acquire was handed the lock by its
 *                         releaser (the waiter queue); ACQUIRED follows.
 *  WAITING         debug  An acquire found the lock held and waits; the
 *                         message names the holder (insert, optimistic: a
 *                         for-update acquire waits inside the server).
 *  RELEASED        info   rowlock_release(): elapsed_us since the grant; the
 *                         message says whether it went to a waiter. debug
 *                         for a release that leaves re-entries held.
 *  RENEWED         debug  A renewal confirmed by the server (rowlock_renew,
 *                         or the keeper's renewer thread).
 *  RENEW_RETRY     warn   The keeper's renewal failed transiently; it retries
 *                         after waited_us (backoff), attempt counts failures.
 *  BUSY_RETRY      info   A statement was rolled back by a lock wait timeout,
 *                         deadlock or Galera certification failure and the
 *                         library runs it again after waited_us; db_errno.
 *  DISCONNECTED    warn   The client's connection was lost (db_errno): the
 *                         session and what it held (for-update) are gone.
 *  RECONNECTED     info   A new connection replaced a lost one.
 *  RECONNECT_FAILED warn  Reconnecting failed (code, db_errno).
 *  LOST            error  A lock is no longer ours: force-released, lease
 *                         ended and taken, purged, or its session ended.
 *  KEEP_STATE      info/warn/error  The keeper's view of a kept lock changed
 *                         (keep_state: HELD again info, UNKNOWN warn, LOST error).
 *  WAIT_RETRY      info   A waiting acquire met a transient server condition
 *                         (db_errno: read-only, connection limit, restart,
 *                         Galera node not ready, ...) and tries again after
 *                         waited_us, until its wait ends; the message says
 *                         what it waits for.
 */
#define ROWLOCK_EVENT_KIND_MAP(X)                   \
    X(ACQUIRED, 1, "acquired")                      \
    X(HANDED_OVER, 2, "handed-over")                \
    X(WAITING, 3, "waiting")                        \
    X(RELEASED, 4, "released")                      \
    X(RENEWED, 5, "renewed")                        \
    X(RENEW_RETRY, 6, "renew-retry")                \
    X(BUSY_RETRY, 7, "busy-retry")                  \
    X(DISCONNECTED, 8, "disconnected")              \
    X(RECONNECTED, 9, "reconnected")                \
    X(RECONNECT_FAILED, 10, "reconnect-failed")     \
    X(LOST, 11, "lost")                             \
    X(KEEP_STATE, 12, "keep-state")                \
    X(WAIT_RETRY, 13, "wait-retry")

typedef enum rowlock_event_kind {
#define ROWLOCK_EVENT_KIND_ENUM_(name, value, str) ROWLOCK_EVENT_##name = value,
    ROWLOCK_EVENT_KIND_MAP(ROWLOCK_EVENT_KIND_ENUM_)
#undef ROWLOCK_EVENT_KIND_ENUM_
} rowlock_event_kind;

/** "debug", "info", "warn", "error"; "unknown" otherwise. Never NULL. */
ROWLOCK_EXTERN const char *rowlock_log_level_name(int level);
/** "acquired", "handed-over", ... (the list above); "unknown" otherwise. Never NULL. */
ROWLOCK_EXTERN const char *rowlock_event_kind_name(int kind);

#define ROWLOCK_EVENT_VERSION 1

/**
 * One event. Filled by the library, which sets `version` to the version it
 * fills: fields are only ever added at the end, so a callback compiled with
 * an older header reads the fields it knows, and one compiled with a newer
 * header checks `version` before reading fields added later. Fields that do
 * not apply to a kind are 0 (strings: "").
 */
typedef struct rowlock_event {
    unsigned int version;        /**< ROWLOCK_EVENT_VERSION of the library that filled it */
    rowlock_log_level level;
    rowlock_event_kind kind;
    const char *lock_name;       /**< the lock's name as given (raw bytes: escape it before
                                      printing); "" for client events (connections) */
    rowlock_strategy strategy;   /**< 0 for client events */
    uint64_t token;              /**< the grant's fencing token, 0 if none */
    int64_t waited_us;           /**< acquired: the acquire call's duration; renew-retry and
                                      busy-retry: the backoff before the next attempt */
    int64_t elapsed_us;          /**< released: time since the grant; reconnected: time since the
                                      connection was found lost (0 if unknown) */
    unsigned int attempt;        /**< acquired: claims made (1: at once); retries: 1-based count */
    int code;                    /**< ROWLOCK_E* of a failure, 0 if none */
    unsigned int db_errno;       /**< the server's/client's error number, 0 if none */
    rowlock_keep_state keep_state; /**< keep-state: the new state; else ROWLOCK_KEEP_NONE */
    const char *message;         /**< one line, lock names and server text escaped
                                      (rowlock_escape); never NULL */
} rowlock_event;

/** A logging hook; `arg` is what was given to rowlock_client_set_log(). */
typedef void (*rowlock_log_fn)(const rowlock_event *ev, void *arg);

/**
 * Send this client's events at or above `min_level` to `fn` (NULL: none).
 * The client's keeper (its threads, its own connection) reports to the same
 * hook. Safe at any time, from any thread, also while a keeper runs: when it
 * returns, no call to the previous fn is running or will start (so its arg
 * may be freed), except from fn itself, which must not call it (that would
 * wait for itself). Events of calls running at the same time go to either
 * hook.
 * @return 0, or ROWLOCK_EINVALID (c NULL, or fn set and min_level not one of
 *   ROWLOCK_LOG_DEBUG..ROWLOCK_LOG_ERROR). No round trip.
 */
ROWLOCK_EXTERN int rowlock_client_set_log(rowlock_client *c, int min_level, rowlock_log_fn fn, void *arg);

/* ------------------------------------------------------------------------ */
/* Administration (what the rowlock and rowlock-reaper tools use)            */
/* ------------------------------------------------------------------------ */

/** Flags for rowlock_admin_list(). */
enum { ROWLOCK_LIST_STALE = 1u << 0 /**< only rows whose lease ended */ };

/**
 * Call `fn` for every held lock (owner set, lease live), or with
 * ROWLOCK_LIST_STALE for every row whose owner's lease ended, ordered by
 * name. `fn` returns 0 to go on, anything else to stop (rowlock_admin_list then
 * returns that value). `fn` must not call rowlock on the same client.
 * for-update locks are not listed (their holders are row locks, not rows),
 * nor are shared locks and semaphores (several holders: rowlock_admin_holders()).
 * @return 0, fn's non-zero value, ROWLOCK_EDB, ROWLOCK_ENOMEM. One round trip.
 */
ROWLOCK_EXTERN int rowlock_admin_list(rowlock_client *c, unsigned int flags,
                                int (*fn)(const rowlock_info *info, void *arg), void *arg);

/**
 * Administrative release of whoever holds `name` (insert and optimistic):
 * clears the owner and keeps the token. The previous holder's release and
 * renew then fail with ROWLOCK_ENOTOWNER.
 * @param released if not NULL, filled with what was released (released->held
 *        is 0 when nothing was held).
 * @return 0 (released or nothing to release), ROWLOCK_EINVALID (bad name),
 *   ROWLOCK_EUNSUPPORTED (a for-update name: end the holder's connection),
 *   ROWLOCK_EDB. Two round trips.
 */
ROWLOCK_EXTERN int rowlock_admin_force_release(rowlock_client *c, const char *name, rowlock_info *released);

/* Shared locks and semaphores: multi-holder names (insert strategy).
 * Version 2 added acquired_at_us and expires_at_us. The library fills the
 * struct it passes to the callback (versioned structs, case 3): a callback
 * compiled with version 1 reads fewer fields. */
#define ROWLOCK_HOLDER_INFO_VERSION 2

/** One holder (or queued waiter) of a multi-holder name. */
typedef struct rowlock_holder_info {
    unsigned int version;       /**< set by the library: the version it fills */
    char name[ROWLOCK_NAME_MAX + 1];
    char owner[ROWLOCK_OWNER_MAX + 1];
    rowlock_mode mode;
    int granted;                /**< 1 holds it, 0 waits in the queue */
    int live;                   /**< a holder: its lease has not ended; a waiter: it still waits
                                     (one server: its session waits or wrote its entry < 5 s ago;
                                     a cluster: its entry's end has not passed) */
    unsigned int count;         /**< re-entrant hold count */
    uint64_t token;             /**< fencing token of the grant (0 while waiting) */
    uint64_t ticket;            /**< place in the name's FIFO queue */
    int64_t expires_in_ms;      /**< lease end minus the server clock; negative once ended (a
                                     waiter's entry: when the reaper may drop it, not a lease;
                                     `rowlock holders` shows "-") */
    unsigned int permits;       /**< the name's permits (0: no limit) */
    /* version 2 */
    int64_t acquired_at_us;     /**< grant time, server clock, µs since the epoch (UTC); 0 while waiting */
    int64_t expires_at_us;      /**< lease end (a waiter's: its entry's end), same clock */
} rowlock_holder_info;

/**
 * Call `fn` for every holder and queued waiter of multi-holder name `name`
 * (NULL: of every such name), in name and queue order, live or not. `fn`
 * returns 0 to go on; it must not call rowlock on the same client.
 * @return 0, fn's non-zero value, ROWLOCK_EINVALID (bad name), ROWLOCK_EDB.
 *   One round trip.
 */
ROWLOCK_EXTERN int rowlock_admin_holders(rowlock_client *c, const char *name,
                                   int (*fn)(const rowlock_holder_info *h, void *arg), void *arg);

/**
 * Set the permits of a name (0: any number of shared holders; N: a counting
 * semaphore of N). 0 makes it a name without a limit again, which takes
 * the N the next semaphore handle asks for (rowlock_lock_options.permits).
 * Holders keep their grants when N shrinks; new ones wait
 * until fewer than N hold it. A free name without a row becomes a
 * multi-holder name.
 * @return 0, ROWLOCK_EINVALID (bad name, N over ROWLOCK_PERMITS_MAX),
 *   ROWLOCK_EBUSY (an exclusive one-row holder holds it now, or the name
 *   belongs to another strategy: the one statement that tries cannot tell
 *   which; the message names both), ROWLOCK_EDB. One or two round trips.
 */
ROWLOCK_EXTERN int rowlock_admin_set_permits(rowlock_client *c, const char *name, unsigned int permits);

/**
 * Administrative release of holders of a multi-holder name: the holder
 * `owner`, or every holder and waiter when owner is NULL. Their release and
 * renew then fail with ROWLOCK_ENOTOWNER. (rowlock_admin_force_release() on such
 * a name releases all.) With an owner that holds no entry, the exclusive
 * one-row holder of `name` is released if it is `owner` and its lease is
 * live (insert and optimistic; checked in the releasing statement, so
 * another owner's grant is never touched); it then counts as 1.
 * @param released  if not NULL, set to the number of entries removed.
 * @return 0, ROWLOCK_EINVALID, ROWLOCK_EDB. One round trip (two when an
 *   owner is given and held no entry).
 */
ROWLOCK_EXTERN int rowlock_admin_force_release_holder(rowlock_client *c, const char *name, const char *owner,
                                                unsigned int *released);

/* rowlock_stats_info: filled by the library (versioned structs, case 2). */
#define ROWLOCK_STATS_INFO_VERSION 1

/** Counts over the whole lock table, one snapshot by the server's clock
 *  (what `rowlock metrics` exports). A "grant" is a one-row holder (insert,
 *  optimistic) or a granted entry of a multi-holder name. for-update
 *  holders are row locks, not rows, and are not counted; nor are waiters of
 *  the one-row protocol, which wait on server named locks (waiters_* count
 *  the queued entries of multi-holder names). */
typedef struct rowlock_stats_info {
    unsigned int version;         /**< set by the caller: ROWLOCK_STATS_INFO_VERSION */
    uint64_t rows;                /**< rows of the lock table (names used and not purged) */
    uint64_t names_held;          /**< names with at least one live grant */
    uint64_t holders_exclusive;   /**< live exclusive grants */
    uint64_t holders_shared;      /**< live shared grants (shared locks and semaphores) */
    uint64_t waiters_exclusive;   /**< queued exclusive waiters of multi-holder names */
    uint64_t waiters_shared;      /**< queued shared waiters of multi-holder names */
    uint64_t stale;               /**< grants whose lease ended (crashed holders; what the reaper purges after its grace) */
    int64_t oldest_grant_age_ms;  /**< server clock minus the earliest grant time of a live grant; 0 when none */
    int64_t oldest_stale_age_ms;  /**< server clock minus the earliest lease end of a stale grant; 0 when none */
    int64_t server_now_us;        /**< the server's clock (UTC) when it counted, µs since the epoch */
} rowlock_stats_info;

#define ROWLOCK_STATS_INFO_INIT { ROWLOCK_STATS_INFO_VERSION, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/**
 * Count the lock table's names, grants, waiters and stale grants in one
 * statement (one consistent read; it scans the lock table and the holders
 * table, so its cost grows with their size: for a scrape every few seconds
 * keep the reaper running).
 * @return 0, ROWLOCK_EINVALID (st NULL or st->version 0), ROWLOCK_EDB.
 *   One round trip.
 */
ROWLOCK_EXTERN int rowlock_admin_stats(rowlock_client *c, rowlock_stats_info *st);

/* Version 2 added pause_ms, version 3 wait_leases; older structs (without
 * them) are still accepted. */
#define ROWLOCK_REAP_OPTIONS_VERSION 3

typedef struct rowlock_reap_options {
    unsigned int version;     /**< ROWLOCK_REAP_OPTIONS_VERSION */
    int64_t grace_ms;         /**< purge leases that ended more than this ago (default 60000 when <0) */
    unsigned int batch;       /**< rows per deleting statement (default 1000 when 0) */
    int64_t max_ms;           /**< stop starting new batches after this long (0: no limit) */
    int dry_run;              /**< count what would be purged, change nothing */
    /* version 2 */
    int64_t pause_ms;         /**< sleep between deleting statements: ROWLOCK_REAP_PAUSE_AUTO (the
                                   default) as long as the last one took, so a long purge keeps
                                   the disk busy about half the time; 0 none (full speed); else
                                   ms, at most 60000. Spreads the purge's redo and page writes so
                                   live locks' commits wait less; a purge of one batch never waits */
    /* version 3 */
    int wait_leases;          /**< a Galera cluster only (one server: ignored, the server's clock
                                   judges every lease). A held row whose lease ended by the node's
                                   clock is purged only once this client has seen its (token,
                                   generation) unchanged for its lease + 0.1 % + 1 ms on its own
                                   monotonic clock, like a taker (no node clock decides). 1: watch
                                   such rows within this call (one lease, bounded by max_ms) and
                                   purge those their holders did not write meanwhile, with a
                                   compare-and-set delete. 0 (the default): purge only the ones
                                   this client watched a lease ago (an earlier call on the same
                                   client) and count the rest in stats->unjudged */
} rowlock_reap_options;
/** pause_ms: pause as long as the previous deleting statement took. */
#define ROWLOCK_REAP_PAUSE_AUTO (-1)

#define ROWLOCK_REAP_OPTIONS_INIT { ROWLOCK_REAP_OPTIONS_VERSION, -1, 0, 0, 0, ROWLOCK_REAP_PAUSE_AUTO, 0 }

/* rowlock_reap_stats: filled by the library (versioned structs, case 2).
 * Its own version since 0.2.0: 0.1.0 callers set ROWLOCK_REAP_OPTIONS_VERSION
 * here, which is still accepted (any version but 0 is). Version 3 added
 * unjudged, changed and waited_us; there is no version 2 of its own (a
 * 0.1.0 caller's 2 was the options' version, and its struct ends at
 * complete: versions 1 and 2 get the version 1 fields). */
#define ROWLOCK_REAP_STATS_VERSION 3

typedef struct rowlock_reap_stats {
    unsigned int version;      /**< set by the caller: ROWLOCK_REAP_STATS_VERSION */
    uint64_t purged;           /**< rows deleted (dry run: rows that would be) */
    uint64_t batches;          /**< deleting statements run */
    int64_t oldest_expiry_us;  /**< oldest lease end among them, server clock, µs epoch; 0 none */
    int64_t elapsed_us;        /**< wall time spent */
    int complete;              /**< 0 if max_ms stopped it while purgeable rows were left (or,
                                    with wait_leases, held rows whose lease it could not watch
                                    within max_ms: counted in unjudged); else 1 */
    /* version 3 */
    uint64_t unjudged;         /**< a cluster: held rows whose lease ended by the node's clock
                                    and which this client has not watched for a lease (wait_leases
                                    0, or max_ms too short): left in place; 0 on one server */
    uint64_t changed;          /**< a cluster: held rows watched for a lease whose holder wrote
                                    meanwhile (renewed, released or taken over): left in place */
    int64_t waited_us;         /**< time spent waiting for leases to be watched (wait_leases) */
} rowlock_reap_stats;

#define ROWLOCK_REAP_STATS_INIT { ROWLOCK_REAP_STATS_VERSION, 0, 0, 0, 0, 0, 0, 0, 0 }

/**
 * Purge stale rows (lease ended more than grace ago) in batches. The expiry
 * condition is re-checked by the server inside each deleting statement, so
 * a lock renewed or re-acquired meanwhile survives; rows locked by a live
 * transaction are skipped. Safe to run from several hosts at once. Tokens
 * stay strictly increasing after a purge (they come from a sequence and the
 * server's clock, not from the row alone).
 * @param opts   may be NULL (the _INIT defaults).
 * @param stats  may be NULL; else filled (its version not 0).
 * On a Galera cluster no node's clock decides that a held lease ended:
 * released rows are purged by age as above, and a held row only once this
 * client has seen it unchanged for its lease (see wait_leases), then with a
 * delete conditional on the (token, generation) it saw, which a renewal
 * committed meanwhile on any node defeats (its row changed, or the delete
 * fails certification); the token floor is raised in the same transaction.
 * @return 0, ROWLOCK_EINVALID (bad options: a version 0 or newer than this
 *   library, a value out of range; stats->version 0), ROWLOCK_EDB.
 * Blocks up to max_ms plus one batch; with wait_leases on a cluster and no
 * max_ms, up to the longest lease among the held rows it watches (+ 0.1 %)
 * plus the purge. A dry run with wait_leases watches too (and deletes
 * nothing), so it counts what a real run would purge.
 */
ROWLOCK_EXTERN int rowlock_admin_reap(rowlock_client *c, const rowlock_reap_options *opts,
                                rowlock_reap_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* ROWLOCK_H */
