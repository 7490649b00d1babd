/*
 * Internal declarations shared by the library's files. Not installed.
 *
 * Layout of src/:
 *   error.c      the code table (strerror / names), the one function that
 *                maps MySQL error numbers to rowlock codes, the client's
 *                last error (fail, clear, save/restore)
 *   util.c       clocks, randomness, UTF-8 name check, backoff, which
 *                servers are supported
 *   optfile.c    reading [rowlock] keys from MySQL option files
 *   db.c         the only file that calls mysql_*: connect, prepared-statement
 *                cache, parameter binding, error capture
 *   client.c     rowlock_client_*
 *   schema.c     migrations and the schema-version check
 *   lock.c       rowlock_lock_* and the thin wrappers that call strategies
 *   lease.c      the lease protocol of the lease strategies: wake-up hint,
 *                waiter queue, wait loop, lease release and renew
 *   row.c        reading a lock row; messages that explain a refusal
 *   admin.c      list, force release, reap
 *   keeper.c     the lease keeper: renewer and watcher threads per client
 *   log.c        the logging hook: registration, level and kind names, and
 *                the one function that builds and delivers an event
 *   strategy_*.c one file per strategy
 *   holders.c    shared locks and semaphores of the insert strategy: names
 *                with several holders, in <table>_hold (its opening comment
 *                is the design: schema, SQL, round trips, FIFO, tokens)
 *   strategy.c   the one list of strategies (ROWLOCK__STRATEGY_LIST), names,
 *                per-client strategy state
 *
 * Calls flow downward only: public call -> lock.c (wrapper) -> strategy ->
 * lease.c / row.c -> db.c -> libmysqlclient. Nothing below lock.c calls
 * into it. (db.c tells strategy.c when a session ends: a notification
 * through the session_ended hooks, which run no SQL.)
 *
 * Adding a strategy: one new file and one line in ROWLOCK__STRATEGY_LIST;
 * the steps are written above struct rowlock__strategy_ops below.
 * Fault injection for tests: see rowlock__fault_set below (db.c section).
 */
#ifndef ROWLOCK_INT_H
#define ROWLOCK_INT_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "rowlock.h"

#define ROWLOCK_TABLE_DEFAULT "rowlock_locks"
/* The table name also names its sequence (<table>_token), which must fit in
 * MySQL's 64-byte identifier limit. */
#define ROWLOCK_TABLE_MAX 57

struct rowlock_client;

/* ---- util.c ---------------------------------------------------------------- */
int64_t rowlock__now_us(void); /* monotonic clock */
int rowlock__random_bytes(void *buf, size_t n);
/* Exponential backoff with equal jitter: the delay before retry `attempt`
 * (0-based), in µs, uniform in [step/2, step] where step = min(cap,
 * base * 2^attempt). `rnd` is a uniformly random 32-bit value (passed in so
 * tests are deterministic). */
int64_t rowlock__backoff_us(unsigned attempt, int64_t base_us, int64_t cap_us, uint32_t rnd);
uint32_t rowlock__rand32(uint64_t *state);
void rowlock__sleep_us(int64_t us);
/* Returns NULL if valid, else a static reason. */
const char *rowlock__utf8_check(const unsigned char *s, size_t n, size_t *bad_at);
/* 0 valid; ROWLOCK_EINVALID (bad characters or length); ROWLOCK__TABLE_RESERVED
 * (rowlock's own objects: rowlock__table_reserved_text() lists them). */
#define ROWLOCK__TABLE_RESERVED 1
int rowlock__table_name_check(const char *t);
/* "rowlock_schema and names ending in _token, ...": the names that
 * rowlock__table_name_check() refuses as reserved, from the same list, in
 * buf (64 bytes are enough). Returns buf. */
const char *rowlock__table_reserved_text(char *buf, size_t cap);
/* NULL if the server (mysql_get_server_info, mysql_get_server_version) is
 * one rowlock supports (MariaDB 10.6+), else a static reason. */
const char *rowlock__server_check(const char *info, unsigned long version);
/* Orphan every live handle of a client being freed (lock.c). */
void rowlock__locks_orphan(struct rowlock_client *c);
size_t rowlock__strlcpy(char *dst, const char *src, size_t cap);

/* ---- error.c --------------------------------------------------------------- */
/* How a MySQL error number should be treated. The one place that knows. */
typedef enum rowlock__dbclass {
    ROWLOCK__DB_OTHER = 0,
    ROWLOCK__DB_BUSY,      /* lock wait timeout, deadlock, statement timeout: held by someone */
    ROWLOCK__DB_SCHEMA,    /* table/sequence/column missing */
    ROWLOCK__DB_CONN,      /* connection lost or refused: the session (and its locks) is gone */
    ROWLOCK__DB_DUP,       /* duplicate key */
    ROWLOCK__DB_REFUSED    /* the server refuses the statement for now (read-only); the session is fine */
} rowlock__dbclass;
rowlock__dbclass rowlock__db_classify(unsigned int mysql_errno);
/* What a waiter waits for when `mysql_errno` is transient (a server state
 * that ends by itself: read-only, connection limit, restart, Galera node
 * not ready, lock wait timeout, deadlock); NULL when it is permanent. */
const char *rowlock__db_transient(unsigned int mysql_errno);

/* Set the client's message (printf-style); returns `code`. */
int rowlock__fail(struct rowlock_client *c, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void rowlock__clear_error(struct rowlock_client *c);
/* The client's whole error state (message, errno, SQLSTATE), kept aside
 * while a helper statement runs whose failure must not replace the error
 * of the operation it is part of. */
#define ROWLOCK__ERRMSG_MAX 512
typedef struct rowlock__errsave {
    char msg[ROWLOCK__ERRMSG_MAX];
    unsigned int db_errno;
    char sqlstate[6];
} rowlock__errsave;
void rowlock__error_save(const struct rowlock_client *c, rowlock__errsave *s);
void rowlock__error_restore(struct rowlock_client *c, const rowlock__errsave *s);

/* ---- optfile.c ------------------------------------------------------------- */
/* Find `key` in `group` of MySQL option files: only `defaults_file` if not
 * NULL, else the standard files when read_default_files. The last occurrence
 * wins, as in MySQL. Returns 1 found, 0 not found, -1 unreadable
 * defaults_file (errno set). */
int rowlock__optfile_get(const char *defaults_file, int read_default_files, const char *group,
                         const char *key, char *out, size_t outcap);

/* Everything read from option files for one connect: each key of the
 * groups asked for, in file order (key with '_' written '-'; a flag has
 * has_val 0 and val ""). */
typedef struct rowlock__optent {
    char *key;
    char *val;
    int has_val;
    int group; /* index into the groups given to rowlock__opts_load */
} rowlock__optent;
typedef struct rowlock__opts {
    rowlock__optent *v;
    size_t n, cap;
    char err[400]; /* why loading failed (user input escaped) */
} rowlock__opts;
/* Read `defaults_file` (or, when NULL and read_default_files, the standard
 * files) once. Returns 0, or -1 with o->err and errno set (then o is empty).
 * Non-regular files other than pipes, files over 1 MiB and lookups over
 * 8 MiB are refused, included files too. */
int rowlock__opts_load(rowlock__opts *o, const char *defaults_file, int read_default_files,
                       const char *const *groups);
/* The last entry of `key` in group index `group` (-1: any group), or NULL. */
const rowlock__optent *rowlock__opts_find(const rowlock__opts *o, int group, const char *key);
/* The entries as one "[client]" option file for Connector/C, without those
 * for which drop(key) is true (keys are given with '-'). NULL on error
 * (message in err). The result may hold a password: zero it before free. */
char *rowlock__opts_render(const rowlock__opts *o, int (*drop)(const char *key, void *arg), void *arg,
                           size_t *len, char *err, size_t errcap);
void rowlock__opts_free(rowlock__opts *o);

/* ---- db.c ------------------------------------------------------------------ */
enum { ROWLOCK__T_STR = 1, ROWLOCK__T_U64, ROWLOCK__T_I64, ROWLOCK__T_DBL };

typedef struct rowlock__param {
    int type;
    const char *s;
    unsigned long len;
    uint64_t u;
    int64_t i;
    double d;
} rowlock__param;

#define RL_STR(str, n) ((rowlock__param){ ROWLOCK__T_STR, (str), (unsigned long)(n), 0, 0, 0 })
#define RL_U64(v) ((rowlock__param){ ROWLOCK__T_U64, NULL, 0, (uint64_t)(v), 0, 0 })
#define RL_I64(v) ((rowlock__param){ ROWLOCK__T_I64, NULL, 0, 0, (int64_t)(v), 0 })

/* A result column. STR columns are NUL-terminated in buf (cap bytes). */
typedef struct rowlock__col {
    int type;
    char *buf;
    unsigned long cap;
    unsigned long len;
    uint64_t u;
    int64_t i;
    char is_null;
    char truncated;
} rowlock__col;

typedef struct rowlock__res {
    uint64_t affected;
    uint64_t insert_id; /* LAST_INSERT_ID(expr) set by the statement */
    uint64_t rows;      /* rows fetched */
} rowlock__res;

/*
 * Run a prepared statement. `tmpl` is an SQL template with {{table}} for the
 * lock table; `variant` (>= 0) replaces {{n}} (a number the library formats
 * itself, never user data) and is part of the cache key. The statement is
 * prepared once per client and cached. Result rows are fetched into `cols`;
 * `row_fn` (may be NULL) is called for each row, otherwise only the first row
 * is kept. Returns 0 or ROWLOCK_EDB with the error captured in the client
 * (message prefixed by `what`).
 */
int rowlock__db_exec(rowlock_client *c, const char *what, const char *tmpl, long variant,
                     const rowlock__param *params, unsigned nparams, rowlock__col *cols, unsigned ncols,
                     int (*row_fn)(void *arg), void *arg, rowlock__res *res);
/* A statement without parameters (fixed SQL, {{table}} expanded), over the
 * text protocol; any result is discarded. */
int rowlock__db_simple(rowlock_client *c, const char *what, const char *sql);
/* Connect (c->host may be a comma-separated failover list, tried in order;
 * see rowlock__db_next_host). */
int rowlock__db_connect(rowlock_client *c);
/* EUNSUPPORTED unless the connected server is MariaDB 10.6+. */
int rowlock__db_server_check(rowlock_client *c, const char *what);

/*
 * Fault injection: compiled only with ROWLOCK_FAULT_INJECTION, which the
 * installed library never has (CMake builds rowlock_fault_objects for the
 * fault tests). Every statement starts with a tag comment, the text
 * "rowlock:<tag>" between comment delimiters (claim, renew, hold-draw,
 * cl-claim, ...): tests, tools/handoff-profile and the processlist name
 * statements by it. The build collects the tags from the library sources into
 * generated/fault_tags.c (cmake/fault_tags.cmake): that list, read from the
 * code, is the only one, and the seam refuses any tag not on it.
 *
 * rowlock__fault_set(client, tag, nth, kind, value) arms a rule: the nth
 * execution (1-based, counted from now; 0: every execution) of a statement
 * with that tag on that client (NULL: any client)
 *   ROWLOCK__FAULT_ERROR       fails without running, as if the server had
 *                              returned MySQL error `value` (1205, 1213,
 *                              2006, 2013, 1146, 1235, ...); a connection
 *                              error also cuts the connection (the server
 *                              ends the session, as on a network failure);
 *   ROWLOCK__FAULT_STALL       runs after sleeping `value` ms;
 *   ROWLOCK__FAULT_DROP_AFTER  runs, then the connection is cut before its
 *                              result is read (the caller sees 2013).
 * Returns 0, ROWLOCK_EINVALID (a tag no statement carries, or a bad kind) or
 * ROWLOCK_ENOMEM (32 rules). rowlock__fault_tag_known(tag) is 1 for a tag a
 * statement carries.
 * rowlock__fault_clear(client) removes a client's rules (NULL: all rules);
 * rowlock__fault_fired(client, tag) counts how often its rules fired.
 * The environment variable ROWLOCK_FAULTS="tag:nth:spec,..." (spec: an
 * error number, stall=MS or drop) arms rules for any client at the first
 * statement, so a worker process can be driven from a script; a bad entry
 * (unknown tag included) aborts the process.
 */
typedef enum rowlock__fault_kind {
    ROWLOCK__FAULT_ERROR = 1,
    ROWLOCK__FAULT_STALL,
    ROWLOCK__FAULT_DROP_AFTER
} rowlock__fault_kind;
#ifdef ROWLOCK_FAULT_INJECTION
int rowlock__fault_set(const struct rowlock_client *c, const char *tag, unsigned nth, rowlock__fault_kind kind,
                       unsigned value);
void rowlock__fault_clear(const struct rowlock_client *c);
int rowlock__fault_tag_known(const char *tag);
unsigned rowlock__fault_fired(const struct rowlock_client *c, const char *tag);
#endif
/* Next entry of a host list "h1[:port],[v6]:port,h3": the host into buf, its
 * port into *port (0 if none); returns the rest of the list, NULL at its end. */
const char *rowlock__db_next_host(const char *list, char *buf, size_t cap, unsigned int *port);
void rowlock__db_close(rowlock_client *c);
void rowlock__db_drop_statements(rowlock_client *c);
int rowlock__db_in_transaction(rowlock_client *c);
int rowlock__db_found_rows_flag(rowlock_client *c);
const char *rowlock__db_server_info(rowlock_client *c);
unsigned long rowlock__db_thread_id(rowlock_client *c);

int rowlock__db_socket(rowlock_client *c);          /* the connection's socket, or -1 */
/* The connection's mutex (recursive): held by rowlock__db_exec/simple for a
 * whole statement and by rowlock__db_ping_session, so the keeper's thread
 * may keep a for-update session alive on the application's own connection
 * without ever sharing a round trip with the application's thread. */
void rowlock__db_mutex_init(rowlock_client *c);
void rowlock__db_mutex_destroy(rowlock_client *c);
/*
 * Keeper thread: prove that the session with server id `session_id` is
 * alive (one `DO 1`, which also resets the server's idle timer for it,
 * wait_timeout), waiting for the answer until `deadline_us` (monotonic) at
 * most. *sent_us is when it was sent. Never reconnects. Returns 0 (alive),
 * ROWLOCK_EBUSY (the application's thread is using the connection: try again
 * shortly, nothing was sent), ROWLOCK_ENOTOWNER (the session is not up, or
 * it ended, or no answer came by the deadline: then the connection is cut
 * here, so every later use fails at once and reconnects), or ROWLOCK_EDB.
 * msg (cap bytes) says why on failure.
 */
int rowlock__db_ping_session(rowlock_client *c, unsigned long session_id, int64_t deadline_us, int64_t *sent_us,
                             char *msg, size_t cap);
void rowlock__db_abandon(rowlock_client *c);        /* close our descriptor without a COM_QUIT (fork child) */
void rowlock__db_thread_init(void);
void rowlock__db_thread_end(void);

/* ---- log.c ----------------------------------------------------------------- */
/* Where a client's events go. A clone (the keeper's client) points at its
 * parent's sink, so one registration covers both. min_level is read with a
 * relaxed atomic load before anything else: ROWLOCK__LOG_OFF while no hook is
 * set, so an event without a hook costs a load and a compare. fn and arg are
 * read and called under the read lock; rowlock_client_set_log() takes the
 * write lock, so no call to an old hook survives its return. */
#define ROWLOCK__LOG_OFF 100
typedef struct rowlock__logsink {
    int min_level; /* atomic */
    pthread_rwlock_t rw;
    rowlock_log_fn fn;
    void *arg;
} rowlock__logsink;
/* What an event carries besides its level, kind, lock and message. */
typedef struct rowlock__evx {
    int code;
    unsigned int db_errno;
    int64_t waited_us, elapsed_us;
    unsigned attempt;
    rowlock_keep_state keep_state;
} rowlock__evx;
#define RL_EVX(...) ((rowlock__evx){ __VA_ARGS__ })
void rowlock__log_init(rowlock__logsink *s);
void rowlock__log_destroy(rowlock__logsink *s);
static inline int rowlock__log_on(rowlock__logsink *s, int level)
{
    return level >= __atomic_load_n(&s->min_level, __ATOMIC_RELAXED);
}
/* Build the event (message printf-style: quote user data with l->shown or
 * rowlock_escape) and call the hook. Call through the macros below. */
void rowlock__log_emit(rowlock__logsink *s, int level, rowlock_event_kind kind, const char *name,
                       rowlock_strategy strategy, uint64_t token, rowlock__evx x, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 8, 9)))
#endif
    ;
/* An event of lock l (name, strategy and token from the handle). */
#define ROWLOCK__LOG_LOCK(l, level, kind, x, ...)                                                             \
    do {                                                                                                     \
        if (rowlock__log_on((l)->client->log, (level)))                                                      \
            rowlock__log_emit((l)->client->log, (level), ROWLOCK_EVENT_##kind, (l)->name, (l)->ops->id,       \
                              (l)->token, (x), __VA_ARGS__);                                                 \
    } while (0)
/* An event of client c (a connection). */
#define ROWLOCK__LOG_CLIENT(c, level, kind, x, ...)                                                          \
    do {                                                                                                     \
        if (rowlock__log_on((c)->log, (level)))                                                              \
            rowlock__log_emit((c)->log, (level), ROWLOCK_EVENT_##kind, "", (rowlock_strategy)0, 0, (x),       \
                              __VA_ARGS__);                                                                  \
    } while (0)

/* ---- client.c -------------------------------------------------------------- */
/* The option-file groups a connection reads (Connector/C's three and ours). */
#define ROWLOCK__GROUP_ROWLOCK 3
extern const char *const rowlock__conn_groups[];
#define ROWLOCK__STMT_CACHE 48
#define ROWLOCK__STRATEGY_SLOTS 8 /* strategy ids 0-7 */

typedef struct rowlock__stmt {
    const char *tmpl;
    long variant;
    void *stmt; /* MYSQL_STMT * */
    uint64_t last_use;
} rowlock__stmt;

struct rowlock_client {
    void *mysql;         /* MYSQL * */
    int owns_mysql;
    int connected;
    unsigned int flags;
    char table[ROWLOCK_TABLE_MAX + 1];
    char owner[ROWLOCK_OWNER_MAX + 1];
    size_t owner_len;

    /* Settings kept for reconnecting (owned copies). */
    char *host, *user, *password, *database, *unix_socket, *defaults_file, *tls_ca;
    unsigned int port, connect_timeout_ms, read_timeout_ms, write_timeout_ms;
    rowlock_tls_mode tls_mode;
    /* What the option files said, read once at connect (optfile.c); the
     * connection (and every reconnect) gets it through db.c, never the
     * files themselves. */
    rowlock__opts opts;

    /* Last error. */
    char errmsg[ROWLOCK__ERRMSG_MAX];
    unsigned int db_errno;
    char sqlstate[6];

    rowlock__stmt stmts[ROWLOCK__STMT_CACHE];
    uint64_t stmt_clock;
    uint64_t rng;

    /* The strategies' private per-client state, by strategy id (strategy.c),
     * and the lease module's (lease.c). */
    void *strategy_state[ROWLOCK__STRATEGY_SLOTS];
    void *lease;
    /* Live lock handles (lock.c): orphaned when the client is freed. */
    struct rowlock_lock *locks;

    /* The lease keeper (keeper.c): NULL until rowlock_keep() needs one. */
    struct rowlock__keeper *keeper;
    /* The process that opened our own connection: a fork child's copy of
     * the client must not close (COM_QUIT) the parent's session. */
    long conn_pid;
    /* Run at every connect (MYSQL_INIT_COMMAND): the keeper's connection
     * bounds its lock waits. Static string or NULL. */
    const char *init_command;
    /* The logging hook (log.c): `log` is &log_own, or the parent's sink for
     * the keeper's client. conn_role names the connection in events. */
    rowlock__logsink log_own;
    rowlock__logsink *log;
    const char *conn_role;
    int64_t conn_lost_us; /* monotonic time the connection was found lost, 0 none */
    /* Monotonic time the last statement on the connection ended (db.c): an
     * idle connection is checked for a server-side close before it is used. */
    int64_t last_io_us;
    pthread_mutex_t conn_mu; /* see rowlock__db_mutex_init */
    long conn_mu_pid;        /* the process that initialised it (fork) */
    /* The connection's lease rule (lease_rule.h), NULL until its first use,
     * and the one wsrep probe it was chosen by (0 not asked yet, 1 not a
     * Galera node, 2 a Galera node): both forgotten when the session ends. */
    const struct rowlock__lease_rule *rule;
    int wsrep;
    /* The cluster reaper's record of stale rows (lease_cluster.c). */
    void *cluster;
};

/* A new, unconnected client with c's settings, table and owner identity
 * (the keeper's connection renews as the same owner). */
int rowlock__client_clone(rowlock_client **out, const rowlock_client *c);

/* ---- schema.c -------------------------------------------------------------- */
typedef struct rowlock__migration {
    int number;
    const char *file;
    const char *sql;
} rowlock__migration;
extern const rowlock__migration rowlock__migrations[];
extern const int rowlock__migration_count;
int rowlock__schema_check(rowlock_client *c);

/* ---- lock.c / strategies ----------------------------------------------------- */
struct rowlock_lock {
    rowlock_client *client;
    const struct rowlock__strategy_ops *ops;
    char name[ROWLOCK_NAME_MAX + 1];
    size_t name_len;
    unsigned int held;   /* acquisitions made through this handle */
    uint64_t token;      /* token of the current grant (0 when not held) */
    int lost;            /* release/renew found it gone: sticky ENOTOWNER until
                            the next acquire */
    char shown[4 * ROWLOCK_NAME_MAX + 3]; /* the name quoted for messages */
    struct rowlock_lock *next, *prev; /* the client's live handles */
    void *state;         /* the strategy's private state: ops->lock_state_size
                            bytes, zeroed, allocated with the handle */
    /* The lease keeper (keeper.c). */
    int64_t lease_ms;        /* the lease of the current grant's acquire */
    int64_t grant_sent_us;   /* monotonic time the acquire call that made the current grant began */
    int keep_on;             /* rowlock_keep() asked to keep this handle's grants */
    int keep_error;          /* keeping the current grant could not start */
    unsigned attempts;       /* claims made by the running acquire (events) */
    int waited;              /* the running acquire found the lock held (events) */
    int claim_uncertain;     /* an acquire lost its connection after its claim
                                may have committed (lock.c: adopt_leftover) */
    /* Modes (holders.c). */
    int mode;                /* ROWLOCK_MODE_* asked for */
    unsigned int permits;    /* semaphore permits asked for (0: none) */
    int multi;               /* acquire through holders.c: a shared or semaphore
                                handle, or the name has a multi-holder row */
    int held_multi;          /* the current grant is a holders-table entry */
    uint64_t ticket;         /* the queue place of a wait that ended without a
                                grant: the next waiting acquire takes it again */
    int64_t ticket_left_us;  /* when that wait ended (monotonic) */
    rowlock_keep_options keep;
};

/*
 * A strategy: a versioned table of functions, one file each. lock.c calls
 * them through thin wrappers that validate arguments first, so a strategy
 * sees only a handle with a valid name, a non-negative lease and a sane wait.
 * Nothing outside a strategy's own file tests its id: what other files need
 * to know is in `flags`.
 *
 * Adding a strategy (one new file plus one line in a list):
 *   1. src/strategy_<name>.c: open with the comment every strategy file has
 *      (SQL, round trips, a holder's crash, error mapping), and end with
 *      `const rowlock__strategy_ops rowlock__strategy_<name> = {...}`.
 *      Keep its state in its own structs (lock_state_size,
 *      client_state_size); a lease-row strategy starts its per-lock state
 *      with rowlock__lease_lock and uses lease.c's wait loop, release and
 *      renew (see strategy_optimistic.c).
 *   2. Add X(<name>) to ROWLOCK__STRATEGY_LIST below (the one list: names,
 *      parsing, lookup by id all come from it).
 *   3. Give it a public id in include/rowlock.h (enum rowlock_strategy; the
 *      id is also the row's `strategy` column, so ids are never reused).
 *   4. Add the file to ROWLOCK_SOURCES in CMakeLists.txt, and its name to
 *      the behaviour suite's strategy list in tests/CMakeLists.txt.
 */
#define ROWLOCK__STRATEGY_OPS_VERSION 2
enum {
    ROWLOCK__S_LEASE_ROW = 1u << 0,   /* keeps owner/token/lease in its row: force
                                         release and the reaper's list apply */
    ROWLOCK__S_TRANSACTION = 1u << 1  /* holds a transaction open on the client's
                                         connection while held (so may run inside
                                         one; lease strategies refuse to) */
};
typedef struct rowlock__strategy_ops {
    int version;              /* ROWLOCK__STRATEGY_OPS_VERSION: checked by lock.c */
    rowlock_strategy id;      /* < ROWLOCK__STRATEGY_SLOTS */
    const char *name;
    unsigned int flags;       /* ROWLOCK__S_* */
    size_t lock_state_size;   /* bytes of l->state (0: none) */
    size_t client_state_size; /* bytes of per-client state (0: none), see
                                 rowlock__strategy_client_state() */
    /* May be NULL. After a handle is made (l->state zeroed); non-zero fails
     * rowlock_lock_new with that code. */
    int (*lock_init)(rowlock_lock *l);
    /* May be NULL. Before a handle is freed (after its releases). */
    void (*lock_free)(rowlock_lock *l);
    /* May be NULL. Before the client closes its connection and frees
     * `state` (NULL if the client never used this strategy). */
    void (*client_free)(rowlock_client *c, void *state);
    /* May be NULL. The client's session ended (its connection closed, also
     * before a reconnect): everything the session held (transactions, named
     * locks) is gone. Must not run SQL. */
    void (*session_ended)(rowlock_client *c, void *state);
    /* Must provide. On 0: set l->token; lock.c counts l->held. */
    int (*acquire)(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms);
    /* Must provide. Called only when l->held > 0. */
    int (*release)(rowlock_lock *l);
    /* Must provide. Called only when l->held > 0. */
    int (*renew)(rowlock_lock *l, int64_t lease_ms);
    /* May be NULL: then the row as read is the answer. Called by
     * rowlock_inspect() with `info` already filled from the row, when the
     * row belongs to this strategy, to add what the row cannot show. `l` may
     * be a handle of another strategy. */
    int (*inspect)(rowlock_lock *l, rowlock_info *info);
} rowlock__strategy_ops;

/* The one list of strategies, in the order tools list them. */
#define ROWLOCK__STRATEGY_LIST(X) X(insert) X(for_update) X(optimistic)
#define X(n) extern const rowlock__strategy_ops rowlock__strategy_##n;
ROWLOCK__STRATEGY_LIST(X)
#undef X

/* ---- strategy.c: the table, per-client state ------------------------------- */
const rowlock__strategy_ops *rowlock__strategy_find(rowlock_strategy id); /* NULL: unknown */
const rowlock__strategy_ops *rowlock__strategy_at(size_t i);              /* NULL past the end */
/* This client's state for `ops` (NULL if it never made such a handle). */
void *rowlock__strategy_client_state(rowlock_client *c, const rowlock__strategy_ops *ops);
int rowlock__strategy_client_attach(rowlock_client *c, const rowlock__strategy_ops *ops);
void rowlock__strategy_client_free(rowlock_client *c);
/* The client's session ended (db.c, on close): calls ops->session_ended. */
void rowlock__strategy_session_ended(rowlock_client *c);

/* ---- row.c: reading a row, explaining a refusal ------------------------------ */
/* Versioned rowlock_info for callers: 0 if the caller's version is known
 * (any version >= 1), else ROWLOCK_EINVALID; copy_out fills the fields of
 * dst->version from a full struct and keeps dst->version. */
int rowlock__info_check(unsigned int version);
void rowlock__info_copy_out(rowlock_info *dst, const rowlock_info *src);
int rowlock__row_read(rowlock_client *c, const char *name, size_t name_len, rowlock_info *info);
/* The same, causal on a Galera node (sees every grant committed anywhere in
 * the cluster before it): for inspect, one round trip (plus the cached
 * cluster probe the first time). */
int rowlock__row_read_current(rowlock_client *c, const char *name, size_t name_len, rowlock_info *info);
/* The same as a locking read (LOCK IN SHARE MODE, waiting up to lock_wait_ms
 * for a writer of the row to commit). */
int rowlock__row_read_shared(rowlock_client *c, const char *name, size_t name_len, long lock_wait_ms,
                             rowlock_info *info);
/* After a failed grant: explain why, as EBUSY or EINVALID (other strategy). */
int rowlock__explain_busy(rowlock_lock *l, rowlock_strategy want);
/* The same; *free_row (may be NULL) is set when the row was free or its
 * lease had ended (the claim lost only to the hint gate or to a race). */
int rowlock__explain_busy_row(rowlock_lock *l, rowlock_strategy want, int *free_row);
/* After a release/renew matched no row: ENOTOWNER naming what happened. */
int rowlock__explain_lost(rowlock_lock *l, const char *what);

/* ---- lease.c: the lease protocol (hint, waiter queue, wait loop, release) ---- */
/* The lease strategies' wait loop (they use the wake-up hint): calls
 * `attempt` until it returns something other than ROWLOCK_EBUSY or the
 * deadline passes, queueing on the hint between attempts. */
#define ROWLOCK__TRY_UNGATED 1u /* grant a free row even without the hint */
#define ROWLOCK__TRY_HANDED 2u  /* this call has headed the waiter queue, so a
                                   row held by our owner was handed to us by a
                                   release: take it without counting a re-entry
                                   (the claim's write also makes the hand-off
                                   durable before we report it) */
int rowlock__wait_loop(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms,
                       int (*attempt)(rowlock_lock *l, int64_t lease_ms, int64_t remaining_ms, unsigned flags));
/* The per-lock state of a lease strategy starts with this (lease.c's only). */
typedef struct rowlock__lease_lock {
    char hint[40];       /* GET_LOCK name used as a wake-up hint */
    size_t hint_len;
    char qname[44];      /* GET_LOCK name held by the head of the waiter queue */
    size_t qname_len;
    int hint_held;       /* this session may hold the hint for this handle
                            (0: it certainly does not) */
    int strategy_seen;   /* a read or a grant showed the name's row is this strategy's: a
                            later wait skips the explaining read */
    int contended;       /* another session held or wanted the lock lately, so
                            the release starts with the statement that can
                            hand it over */
    int handed_over;     /* our last release handed the lock to a waiter: the
                            next waiting acquire queues without a claim that
                            could only fail */
    /* The lease rule of the last attempt (lease_rule.h), and a request of
     * that rule's attempt: take the wake-up hint now (it created the row). */
    const struct rowlock__lease_rule *rule;
    int hint_owed;
    /* Cluster lease rule (lease_cluster.c): the row's (token, gen) as this
     * handle last saw it, and since when (monotonic µs, after the read). */
    int cl_seen;
    uint64_t cl_token, cl_gen, cl_next; /* cl_next: hash of the row's next_owner */
    int cl_held;
    int64_t cl_since_us;
    /* Fairness across nodes: grants seen pass while this handle waited, the
     * token they were counted from, and whether it may hold the row's
     * reservation of the next grant. */
    unsigned cl_age;
    uint64_t cl_age_token;
    int cl_reserved;
} rowlock__lease_lock;
#define ROWLOCK__LEASE(l) ((rowlock__lease_lock *)(l)->state)
/* Hooks for a lease strategy's table. */
int rowlock__lease_lock_init(rowlock_lock *l);
void rowlock__lease_lock_free(rowlock_lock *l);
void rowlock__lease_client_free(rowlock_client *c, void *state);
/* Whether a handle of l's client (l included) holds l's name with l's
 * strategy: an acquire then is a re-entry. */
int rowlock__lease_client_holds(const rowlock_lock *l);
/* Take the wake-up hint after a grant whose statement could not (a new row). */
void rowlock__hint_take(rowlock_lock *l);
/* Let the hint go after a release that handed the lock over (its statement
 * kept the hint so the waiter wakes only once the hand-off is durable). */
void rowlock__hint_release(rowlock_lock *l);
/* Release and renew of a lease row (insert and optimistic). */
int rowlock__lease_release(rowlock_lock *l);
int rowlock__lease_renew(rowlock_lock *l, int64_t lease_ms);
/* Adopt our owner's live row of l's strategy (a claim that committed after
 * its connection died): count 1, the lease re-armed to lease_ms from now,
 * l->token set. 0 adopted; ROWLOCK_EBUSY no such row; else an error. */
int rowlock__lease_adopt(rowlock_lock *l, int64_t lease_ms);
/*
 * SQL pieces for the wake-up hint inside claim and release statements
 * (lease.c explains the hint). HINT_TRY is true when this session holds or
 * gets the hint, or the ungated flag is set; params: hint, hint, ungated. HINT_FREE frees it and is
 * always 0; params: hint.
 */
#define ROWLOCK__HINT_TRY "(IS_USED_LOCK(?) <=> CONNECTION_ID() OR GET_LOCK(?, 0) = 1 OR ?)"
#define ROWLOCK__HINT_FREE "0 * IFNULL(RELEASE_LOCK(?), 0)"
/* A lease row nobody holds: free, or its lease ended by the server clock. */
#define ROWLOCK__SQL_FREE_ROW "(owner IS NULL OR expires_at <= UTC_TIMESTAMP(6))"
#define RL_HINT_TRY(l, flags)                                                        \
    RL_STR(ROWLOCK__LEASE(l)->hint, ROWLOCK__LEASE(l)->hint_len),                       \
        RL_STR(ROWLOCK__LEASE(l)->hint, ROWLOCK__LEASE(l)->hint_len), RL_I64(((flags) & ROWLOCK__TRY_UNGATED) ? 1 : 0)
/*
 * A new fencing token: the later of the table's sequence and the server's
 * UTC clock in microseconds. The sequence alone is not enough: its cached
 * block is written without a log flush, so a server crash can hand out a
 * value again, and the for-update strategy commits nothing that would flush
 * it. The clock alone is not enough either: it may step back while the server
 * runs. Grants of one name are at least a round trip apart, so the clock part
 * moves on between them; row-based strategies also take GREATEST with the
 * row's token + 1, which holds while the row exists. for-update (no row
 * write) and a purged name rely on the server's UTC clock not stepping back.
 */
#define ROWLOCK__NEW_TOKEN \
    "GREATEST(NEXTVAL(`{{table}}_token`), TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)))"

/* Column list and conversion used by every read of a whole row. */
#define ROWLOCK__ROW_COLUMNS                                                              \
    "name, strategy, IFNULL(owner,''), count, token, "                                   \
    "IFNULL(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', acquired_at),0), "                              \
    "IFNULL(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires_at),0), "                               \
    "IFNULL(FLOOR(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)/1000),0), "             \
    "owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6), owner IS NOT NULL AND expires_at <= UTC_TIMESTAMP(6)"
#define ROWLOCK__ROW_NCOLS 10
void rowlock__row_cols_init(rowlock__col *cols, rowlock_info *info);
void rowlock__row_cols_store(const rowlock__col *cols, rowlock_info *info);



#include "lease_rule.h"

/* ---- holders.c: multi-holder names (shared, semaphore) ----------------------- */
/* Internal result of an insert claim whose explaining read found a
 * multi-holder row (row.c): lock.c then acquires through holders.c. */
#define ROWLOCK__EMULTI 1000
/* The acquire lock.c calls: the strategy's, or holders.c's for multi-holder
 * names; release and renew follow l->held_multi. */
int rowlock__mode_acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms);
int rowlock__holders_acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms);
int rowlock__holders_release(rowlock_lock *l);
int rowlock__holders_renew(rowlock_lock *l, int64_t lease_ms);
/* rowlock_inspect() of a multi-holder name (info read from its row, which
 * shows owner '' and a lease to 9999): held, count (holders), owner (the
 * first in the queue), stale and lease end from the holders. No-op for other
 * rows. */
int rowlock__holders_inspect(rowlock_client *c, rowlock_info *info);
/* The reaper's part (admin.c): delete holder entries whose lease ended more
 * than grace_ms ago, `batch` per statement (dry run: count them); adds the
 * number to *purged. Multi-holder names' rows stay (their tokens). */
int rowlock__holders_reap(rowlock_client *c, int64_t grace_ms, uint64_t batch, int dry_run, uint64_t *purged);

/* ---- keeper.c --------------------------------------------------------------- */
typedef struct rowlock__kept rowlock__kept;
typedef struct rowlock__keeper rowlock__keeper;
/* lock.c tells the keeper about grants, renewals, losses and releases. */
void rowlock__keeper_granted(rowlock_lock *l, int64_t sent_us, int64_t lease_ms, int new_grant);
void rowlock__keeper_renewed(rowlock_lock *l, int64_t sent_us, int64_t lease_ms);
void rowlock__keeper_lost(rowlock_lock *l);
void rowlock__keeper_forget(rowlock_lock *l); /* waits while a renewal of l is in flight */
void rowlock__keeper_free(rowlock_client *c);
/* A handle on client k for l's name, strategy and token, made and freed
 * without any SQL and without touching k's error state (lock.c). */
rowlock_lock *rowlock__lock_shadow(const rowlock_lock *l, rowlock_client *k);
void rowlock__lock_shadow_free(rowlock_lock *shadow);
#endif
