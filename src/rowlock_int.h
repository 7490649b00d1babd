/*
 * Internal declarations shared by the library's files. Not installed.
 *
 * Layout of src/:
 *   error.c      the code table (strerror / names) and the one function that
 *                maps MySQL error numbers to rowlock codes
 *   util.c       clocks, randomness, UTF-8 name check, backoff
 *   optfile.c    reading [rowlock] keys from MySQL option files
 *   db.c         the only file that calls mysql_*: connect, prepared-statement
 *                cache, parameter binding, error capture
 *   client.c     rowlock_client_*
 *   schema.c     migrations and the schema-version check
 *   lock.c       rowlock_lock_* and the thin wrappers that call strategies
 *   admin.c      list, force release, reap
 *   strategy_*.c one file per strategy
 */
#ifndef ROWLOCK_INT_H
#define ROWLOCK_INT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "rowlock.h"

#define ROWLOCK_TABLE_DEFAULT "rowlock_locks"
/* The table name also names its sequence (<table>_token), which must fit in
 * MySQL's 64-byte identifier limit. */
#define ROWLOCK_TABLE_MAX 57

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
int rowlock__table_name_check(const char *t);
size_t rowlock__strlcpy(char *dst, const char *src, size_t cap);

/* ---- error.c --------------------------------------------------------------- */
/* How a MySQL error number should be treated. The one place that knows. */
typedef enum rowlock__dbclass {
    ROWLOCK__DB_OTHER = 0,
    ROWLOCK__DB_BUSY,      /* lock wait timeout, deadlock, statement timeout: held by someone */
    ROWLOCK__DB_SCHEMA,    /* table/sequence/column missing */
    ROWLOCK__DB_CONN,      /* connection lost or refused: the session (and its locks) is gone */
    ROWLOCK__DB_DUP        /* duplicate key */
} rowlock__dbclass;
rowlock__dbclass rowlock__db_classify(unsigned int mysql_errno);

/* ---- optfile.c ------------------------------------------------------------- */
/* Find `key` in `group` of MySQL option files: only `defaults_file` if not
 * NULL, else the standard files when read_default_files. The last occurrence
 * wins, as in MySQL. Returns 1 found, 0 not found, -1 unreadable
 * defaults_file (errno set). */
int rowlock__optfile_get(const char *defaults_file, int read_default_files, const char *group,
                         const char *key, char *out, size_t outcap);

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
/* Next entry of a host list "h1[:port],[v6]:port,h3": the host into buf, its
 * port into *port (0 if none); returns the rest of the list, NULL at its end. */
const char *rowlock__db_next_host(const char *list, char *buf, size_t cap, unsigned int *port);
void rowlock__db_close(rowlock_client *c);
void rowlock__db_drop_statements(rowlock_client *c);
int rowlock__db_in_transaction(rowlock_client *c);
int rowlock__db_found_rows_flag(rowlock_client *c);
const char *rowlock__db_server_info(rowlock_client *c);
unsigned long rowlock__db_thread_id(rowlock_client *c);

/* ---- client.c -------------------------------------------------------------- */
#define ROWLOCK__STMT_CACHE 48
#define ROWLOCK__ERRMSG_MAX 512

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

    /* Last error. */
    char errmsg[ROWLOCK__ERRMSG_MAX];
    unsigned int db_errno;
    char sqlstate[6];

    rowlock__stmt stmts[ROWLOCK__STMT_CACHE];
    uint64_t stmt_clock;
    uint64_t rng;

    /* for-update: the one transaction this client may hold open. */
    char fu_name[ROWLOCK_NAME_MAX + 1];
    unsigned int fu_count; /* acquisitions across handles; 0: no transaction */
    uint64_t fu_token;
    int wsrep_checked; /* 0 unknown, 1 not a cluster, 2 cluster (wsrep_on) */
    /* The waiter queue (lock.c): this session wrote a row in <table>_queue;
     * and what the row holds, valid while queue_conn is the session's id. */
    int queue_row;
    unsigned long queue_conn;
    int64_t queue_lease_ms;
    int queue_strategy;
    char queue_name[ROWLOCK_NAME_MAX + 1];
};

/* Set the client's message (printf-style); returns `code`. */
int rowlock__fail(rowlock_client *c, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void rowlock__clear_error(rowlock_client *c);

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
    char hint[40];       /* GET_LOCK name used as a wake-up hint (lock.c) */
    size_t hint_len;
    char qname[44];      /* GET_LOCK name held by the head of the waiter queue */
    size_t qname_len;
    int hint_held;       /* this session may hold the hint for this handle
                            (0: it certainly does not) */
    uint64_t version;    /* optimistic: the row's version as last seen by this
                            handle (its own grant or release); 0 = unknown */
    int strategy_seen;   /* a read or a grant showed the name's row is this strategy's: a
                            later wait skips the explaining read (lock.c) */
    int contended;       /* lease strategies: another session held or wanted
                            the lock lately, so the release starts with the
                            statement that can hand it over (strategy_insert.c) */
    int handed_over;     /* our last release handed the lock to a waiter: the
                            next waiting acquire queues without a claim that
                            could only fail (lock.c) */
};

/*
 * A strategy: a versioned table of functions, one file each. lock.c calls
 * them through thin wrappers that validate arguments first, so a strategy
 * sees only a handle with a valid name, a non-negative lease and a sane wait.
 */
#define ROWLOCK__STRATEGY_OPS_VERSION 1
typedef struct rowlock__strategy_ops {
    int version;              /* ROWLOCK__STRATEGY_OPS_VERSION */
    rowlock_strategy id;
    const char *name;
    /* Must provide. On 0: set l->token; lock.c counts l->held. */
    int (*acquire)(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms);
    /* Must provide. Called only when l->held > 0. */
    int (*release)(rowlock_lock *l);
    /* Must provide. Called only when l->held > 0. */
    int (*renew)(rowlock_lock *l, int64_t lease_ms);
    /* May be NULL: then the row as read is the answer. Called by
     * rowlock_inspect() with `info` already filled from the row, when the
     * row belongs to this strategy, to add what the row cannot show. */
    int (*inspect)(rowlock_lock *l, rowlock_info *info);
} rowlock__strategy_ops;

extern const rowlock__strategy_ops rowlock__strategy_insert;
extern const rowlock__strategy_ops rowlock__strategy_for_update;
extern const rowlock__strategy_ops rowlock__strategy_optimistic;

/* Shared row helpers (lock.c). */
int rowlock__row_read(rowlock_client *c, const char *name, size_t name_len, rowlock_info *info);
/* The same as a locking read (LOCK IN SHARE MODE, waiting up to lock_wait_ms
 * for a writer of the row to commit). */
int rowlock__row_read_shared(rowlock_client *c, const char *name, size_t name_len, long lock_wait_ms,
                             rowlock_info *info);
/* After a failed grant: explain why, as EBUSY or EINVALID (other strategy). */
int rowlock__explain_busy(rowlock_lock *l, rowlock_strategy want);
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
/* Take the wake-up hint after a grant whose statement could not (a new row). */
void rowlock__hint_take(rowlock_lock *l);
/* Let the hint go after a release that handed the lock over (its statement
 * kept the hint so the waiter wakes only once the hand-off is durable). */
void rowlock__hint_release(rowlock_lock *l);
/* Delete this session's row of the waiter queue (client free). */
void rowlock__queue_forget(rowlock_client *c);
/*
 * SQL pieces for the wake-up hint inside claim and release statements
 * (lock.c explains the hint). HINT_TRY is true when this session holds or
 * gets the hint, or the ungated flag is set; params: hint, hint, ungated. HINT_FREE frees it and is
 * always 0; params: hint.
 */
#define ROWLOCK__HINT_TRY "(IS_USED_LOCK(?) <=> CONNECTION_ID() OR GET_LOCK(?, 0) = 1 OR ?)"
#define ROWLOCK__HINT_FREE "0 * IFNULL(RELEASE_LOCK(?), 0)"
#define RL_HINT_TRY(l, flags) \
    RL_STR((l)->hint, (l)->hint_len), RL_STR((l)->hint, (l)->hint_len), RL_I64(((flags) & ROWLOCK__TRY_UNGATED) ? 1 : 0)
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



/* Lease rows (insert and optimistic share them; strategy_insert.c). */
int rowlock__lease_release(rowlock_lock *l);
int rowlock__lease_renew(rowlock_lock *l, int64_t lease_ms);
/* After a release/renew matched no row: ENOTOWNER naming what happened. */
int rowlock__explain_lost(rowlock_lock *l, const char *what);
#endif
