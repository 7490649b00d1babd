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
 *   strategy_*.c one file per strategy (strategy.h: the ops table)
 *   strategy.c   the one list of strategies (ROWLOCK__STRATEGY_LIST), names,
 *                lookups by id, mode and row kind, per-client strategy state
 *   holders.c    the insert strategy's modes (holders.h): shared locks and
 *                semaphores, names with several holders in <table>_hold (its
 *                opening comment is the design: schema, SQL, round trips,
 *                FIFO, tokens)
 *   lease.c      the lease protocol of the lease strategies (lease.h):
 *                wake-up hint, waiter queue, wait loop, lease release,
 *                renew and adopt, the retrying release/renew runner
 *   lease_rule.c the lease rule of a connection (lease_rule.h: the ops
 *                table), chosen once per connection by one wsrep probe;
 *   lease_server.c  the rule of one server (leases by the server's clock),
 *   lease_cluster.c the rule of a Galera cluster (leases by elapsed time
 *                seen by the taker; the cluster reaper)
 *   row.c        reading a lock row; messages that explain a refusal (row.h)
 *   admin.c      list, stats, force release, reap (public calls only)
 *   keeper.c     the lease keeper: renewer and watcher threads per client
 *   log.c        the logging hook: registration, level and kind names, and
 *                the one function that builds and delivers an event
 *
 * Calls flow downward only: public call -> lock.c (wrapper) -> strategy ->
 * holders.c -> lease.c -> lease rule (through its table) -> row.c -> db.c
 * -> libmysqlclient. Nothing below lock.c calls into it; a lease rule never
 * calls lease.c (what it needs done, it leaves in the handle's lease state).
 * (db.c tells strategy.c when a session ends: a notification through the
 * session_ended hooks, which run no SQL; it also forgets the connection's
 * lease rule then.) Nothing outside a strategy's own file tests its id:
 * other modules ask its table (flags, modes); the strategy ids in SQL are
 * bound parameters.
 *
 * Adding a strategy, or a mode: one new file and one line in
 * ROWLOCK__STRATEGY_LIST (or one bit in a table's `modes`); the steps are
 * written above struct rowlock__strategy_ops (strategy.h).
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
/* FNV-1a over n bytes, from h (start with ROWLOCK__FNV1A_START). */
#define ROWLOCK__FNV1A_START 0xcbf29ce484222325ULL
uint64_t rowlock__fnv1a(uint64_t h, const void *data, size_t n);

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
    int found_multi;         /* out: the one-row acquire stopped (ROWLOCK_EBUSY)
                                because the name has a multi-holder row (row.c's
                                explaining read, the cluster rule's read) */
    uint64_t ticket;         /* the queue place of a wait that ended without a
                                grant: the next waiting acquire takes it again */
    int64_t ticket_left_us;  /* when that wait ended (monotonic) */
    rowlock_keep_options keep;
};

#include "strategy.h"
#include "row.h"
#include "lease.h"
#include "lease_rule.h"
#include "holders.h"

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
