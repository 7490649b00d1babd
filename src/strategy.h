/*
 * strategy.h: the strategy seam.
 *
 * Offers: struct rowlock__strategy_ops (one table per strategy, one file
 * each: strategy_insert.c, strategy_for_update.c, strategy_optimistic.c),
 * ROWLOCK__STRATEGY_LIST (the one list), the strategies' flags and modes,
 * and strategy.c's lookups and per-client state. Called by: lock.c (every
 * public lock call goes through a table), admin.c and holders.c (what a row
 * of a strategy means: flags, modes), row.c (multi-holder rows), client.c
 * (its session_ended hook) and the tools' names (rowlock_strategy_name/parse).
 *
 * Included by rowlock_int.h (after the types it needs); include that.
 */
#ifndef ROWLOCK_STRATEGY_H
#define ROWLOCK_STRATEGY_H

/*
 * A strategy: a versioned table of functions, one file each. lock.c calls
 * them through thin wrappers that validate arguments first, so a strategy
 * sees only a handle with a valid name, a non-negative lease and a sane wait.
 * Nothing outside a strategy's own file tests its id: what other files need
 * to know is in `flags` (what its rows mean) and `modes` (which modes it
 * implements); the id reaches SQL only as a bound parameter (l->ops->id).
 * How leases are judged (one server, a Galera cluster) is not a strategy's
 * business: lease.c's wait loop, renew and adopt ask the connection's lease
 * rule (lease_rule.h).
 *
 * Adding a strategy (one new file, one table line, its tests):
 *   1. src/strategy_<name>.c: open with the comment every strategy file has
 *      (SQL, round trips, a holder's crash, error mapping), and end with
 *      `const rowlock__strategy_ops rowlock__strategy_<name> = {...}`.
 *      Keep its state in its own structs (lock_state_size,
 *      client_state_size); a lease-row strategy starts its per-lock state
 *      with rowlock__lease_lock and uses lease.c's wait loop, release and
 *      renew (see strategy_optimistic.c); it then runs under either lease
 *      rule without a line of its own.
 *   2. Add X(<name>) to ROWLOCK__STRATEGY_LIST below (the one list: names,
 *      parsing, lookup by id, the default (the first) all come from it).
 *   3. Give it a public id in include/rowlock.h (enum rowlock_strategy; the
 *      id is also the row's `strategy` column, so ids are never reused).
 *   4. Add the file to ROWLOCK_SOURCES in CMakeLists.txt, and its name to
 *      ROWLOCK_TEST_STRATEGIES in tests/db/db.cmake (the per-strategy suites).
 *
 * Giving a strategy a mode (shared, permits; or a new ROWLOCK__M_*):
 *   1. Implement it in the strategy's acquire, release and renew (they see
 *      l->mode and l->permits), or hand it to a module that does: the
 *      insert strategy's modes live in holders.c, reached from its own
 *      acquire (rowlock__holders_acquire) and its release and renew
 *      (l->held_multi).
 *   2. Set the bit in the table's `modes` (and ROWLOCK__S_MULTI_ROWS if its
 *      rows can become multi-holder rows: list, force release and inspect
 *      then ask their holders). lock.c refuses a handle asking for a mode
 *      its strategy lacks (EUNSUPPORTED), naming the strategies that have
 *      it; `modes_note` says why a strategy has no shared mode.
 *   3. A new mode also needs its public option (rowlock_lock_options) and
 *      its bit here; tests: the modes suite (tests/db/test_modes.c) per
 *      strategy.
 */
#define ROWLOCK__STRATEGY_OPS_VERSION 2
enum {
    ROWLOCK__S_LEASE_ROW = 1u << 0,   /* keeps owner/token/lease in its row: force
                                         release and the reaper's list apply */
    ROWLOCK__S_TRANSACTION = 1u << 1, /* holds a transaction open on the client's
                                         connection while held (so may run inside
                                         one; lease strategies refuse to) */
    ROWLOCK__S_MULTI_ROWS = 1u << 2   /* its rows may be multi-holder rows (held, owner
                                         '': holders.c); list, force release and
                                         inspect look at their holders instead */
};
/* Modes besides exclusive that a strategy offers (ops->modes). lock.c
 * refuses a handle asking for one its strategy lacks. */
enum {
    ROWLOCK__M_SHARED = 1u << 0,  /* ROWLOCK_MODE_SHARED */
    ROWLOCK__M_PERMITS = 1u << 1  /* semaphores (rowlock_lock_options.permits) */
};
typedef struct rowlock__strategy_ops {
    int version;              /* ROWLOCK__STRATEGY_OPS_VERSION: checked by lock.c */
    rowlock_strategy id;      /* < ROWLOCK__STRATEGY_SLOTS */
    const char *name;
    unsigned int flags;       /* ROWLOCK__S_* */
    unsigned int modes;       /* ROWLOCK__M_*: the strategy's acquire, release
                                 and renew implement them (l->mode, l->permits) */
    const char *modes_note;   /* may be NULL: why it has no shared mode (lock.c's
                                 refusal says it) */
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
    /* May be NULL: then rowlock_downgrade() refuses (EUNSUPPORTED). Turn
     * the handle's held exclusive grant into a shared one without a moment
     * at which another exclusive acquirer could be granted; the token
     * stays, the lease becomes at least lease_ms from now. Must refuse
     * (EINVALID) when l->held > 1 or another handle of the client holds
     * the name (lock.c cannot tell the latter for every strategy); lock.c
     * has checked the rest and sets l->mode. */
    int (*downgrade)(rowlock_lock *l, int64_t lease_ms);
} rowlock__strategy_ops;

/* The one list of strategies, in the order tools list them. */
#define ROWLOCK__STRATEGY_LIST(X) X(insert) X(for_update) X(optimistic)
#define X(n) extern const rowlock__strategy_ops rowlock__strategy_##n;
ROWLOCK__STRATEGY_LIST(X)
#undef X

/* ---- strategy.c: the table, per-client state ------------------------------- */
const rowlock__strategy_ops *rowlock__strategy_find(rowlock_strategy id); /* NULL: unknown */
/* The default strategy: the first of ROWLOCK__STRATEGY_LIST. */
const rowlock__strategy_ops *rowlock__strategy_default(void);
/* The first strategy offering `mode` (ROWLOCK__M_*), or NULL. */
const rowlock__strategy_ops *rowlock__strategy_offering(unsigned int mode);
/* 1 when a row (as read) is a multi-holder row: held, owner '', of a
 * strategy with ROWLOCK__S_MULTI_ROWS. */
int rowlock__strategy_multi_row(const rowlock_info *info);
const rowlock__strategy_ops *rowlock__strategy_at(size_t i);              /* NULL past the end */
/* This client's state for `ops` (NULL if it never made such a handle). */
void *rowlock__strategy_client_state(rowlock_client *c, const rowlock__strategy_ops *ops);
int rowlock__strategy_client_attach(rowlock_client *c, const rowlock__strategy_ops *ops);
void rowlock__strategy_client_free(rowlock_client *c);
/* The client's session ended (client.c's session_ended hook, which the db
 * layer calls on close): calls each ops->session_ended. */
void rowlock__strategy_session_ended(rowlock_client *c);

#endif
