/*
 * Internal declarations shared by the library's files. Not installed.
 * Every .c file includes this umbrella; each module's own header says what
 * the module offers and who calls it.
 *
 * Layout of src/ (header in brackets):
 *   util.c       clocks, randomness, UTF-8 name check, backoff, which
 *                servers are supported [util.h]
 *   error.c      the code table (strerror / names), the one function that
 *                maps MySQL error numbers to rowlock codes, the client's
 *                last error (fail, clear, save/restore) [error.h]
 *   log.c        the logging hook: registration, level and kind names, and
 *                the one function that builds and delivers an event [log.h]
 *   optfile.c    reading [rowlock] keys from MySQL option files [optfile.h]
 *   db_connect.c connect, TLS, failover host list, the connection's mutex,
 *                idle check and reconnect, the keeper's keep-alive ping
 *   db_stmt.c    SQL templates, prepared-statement cache, parameter binding,
 *                result fetch, error capture
 *   fault.c      the fault seam (ROWLOCK_FAULT_INJECTION test builds only)
 *                [db.h: the only files that call mysql_*, one interface]
 *   client.c     rowlock_client_*; the client and lock structs [client.h]
 *   schema.c     migrations and the schema-version check [schema.h]
 *   lock.c       rowlock_lock_* and the thin wrappers that call strategies;
 *                the keeper's shadow handles [client.h]
 *   keeper.c     the lease keeper: renewer and watcher threads per client,
 *                rowlock_keep() [keeper.h]
 *   lease.c      the lease protocol of the lease strategies: wake-up hint,
 *                waiter queue, wait loop, lease release and renew
 *   lease_cluster.c  the cluster (Galera) lease rule
 *   row.c        reading a lock row; messages that explain a refusal
 *   admin.c      list, force release, reap
 *   strategy_*.c one file per strategy
 *   holders.c    shared locks and semaphores of the insert strategy: names
 *                with several holders, in <table>_hold (its opening comment
 *                is the design: schema, SQL, round trips, FIFO, tokens)
 *   strategy.c   the one list of strategies (ROWLOCK__STRATEGY_LIST), names,
 *                per-client strategy state
 *
 * Calls flow one way, down this list of layers:
 *   keeper.c -> client.c -> lock.c (wrappers) -> strategy_*.c
 *   -> lease.c / holders.c / row.c -> schema.c / db_*.c -> libmysqlclient,
 * with util.c, error.c, log.c and optfile.c below everything, and
 * strategy.c (the table of strategies, their names and per-client state)
 * beside them: any layer may look a strategy up; it calls nothing by name
 * (a strategy's session_ended through its table only). Where a lower
 * layer must tell a higher one something it calls a hook the higher one set
 * on the client, never a function by name: db_connect.c tells the
 * strategies that a session ended (c->session_ended, strategy.c's
 * rowlock__strategy_session_ended, set by client.c when the client is made,
 * calls each strategy's ops->session_ended), lock.c and client.c tell the keeper about grants, renewals,
 * losses, releases and the client's end (c->keeper_hooks, set by
 * rowlock_keep()).
 *
 * Adding a strategy: one new file and one line in ROWLOCK__STRATEGY_LIST;
 * the steps are written above struct rowlock__strategy_ops below.
 * Fault injection for tests: see rowlock__fault_set in db.h.
 */
#ifndef ROWLOCK_INT_H
#define ROWLOCK_INT_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "rowlock.h"

#include "util.h"
#include "error.h"
#include "optfile.h"
#include "log.h"
#include "db.h"
#include "client.h"
#include "schema.h"
#include "keeper.h"


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
 *      the behaviour suite's strategy list in tests/db/db.cmake.
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
/* The client's session ended: calls ops->session_ended. client.c sets it as
 * the client's session_ended hook, which db.c calls on close. */
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



/* ---- lease_cluster.c -------------------------------------------------------- */
/* Rates of monotonic clocks may differ by this much between a holder and a
 * taker, beyond the holder's own allowance (keeper.c); plus a fixed margin. */
#define ROWLOCK__CLUSTER_DRIFT_PPM 1000
#define ROWLOCK__CLUSTER_MARGIN_US 1000
/* A reservation of the next grant (fairness) that nobody used while the
 * row stayed unchanged this long beyond its lease is ignored. */
#define ROWLOCK__CLUSTER_RESERVE_GRACE_US 500000
/* A waiter's longest wait on the (node-local) wake-up hint between looks at
 * the row on a cluster, in s: a release on another node wakes nobody here,
 * and a waiter the next grant is reserved for must not sleep through it. */
#define ROWLOCK__CLUSTER_SLICE_S 0.05
/* *on = 1 when leases must be judged by the cluster rule (a Galera node, or
 * ROWLOCK_LEASE_RULE=cluster in the environment, for tests); one query per
 * client, the first time. */
int rowlock__cluster_rule(rowlock_client *c, int *on);
int64_t rowlock__cluster_wait_us(int64_t lease_us);
/* A lease strategy's attempt under the cluster rule (insert and optimistic). */
int rowlock__cluster_attempt(rowlock_lock *l, int64_t lease_ms, int64_t remaining_ms, unsigned flags);
/* Params: lease µs, lease µs, name, owner, token, strategy. */
extern const char rowlock__cluster_renew_sql[];
/* The end of a wait under the cluster rule (rc: its result): forget the
 * waiter's age, and give up a reservation it may hold if not granted. */
void rowlock__cluster_wait_end(rowlock_lock *l, int rc);
/* rowlock_admin_reap's work under the cluster rule (admin.c has checked the
 * options and made the survey); adds to st. */
int rowlock__cluster_reap(rowlock_client *c, int64_t grace_ms, uint64_t batch, int64_t max_us, int dry_run,
                          int64_t start, rowlock_reap_stats *st);
void rowlock__cluster_client_free(rowlock_client *c);
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
#endif
