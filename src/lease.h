/*
 * lease.h: the lease protocol of the lease-row strategies (lease.c).
 *
 * Offers: the wait loop (wake-up hint, waiter queue, hand-off), the
 * per-lock state a lease strategy starts with (rowlock__lease_lock), the
 * release, renewal and adoption of a lease row, the retrying runner of
 * release and renew statements, and the SQL pieces claims and releases
 * share (hint gate, free row, new token). Called by: strategy_insert.c and
 * strategy_optimistic.c (their tables point at it), holders.c (a one-row
 * holder's hint, retrying statements), lease_cluster.c (the state and SQL
 * pieces only: a rule never calls lease.c). lease.c reaches the lease rule
 * through its table (lease_rule.h).
 *
 * Included by rowlock_int.h (after the types it needs); include that.
 */
#ifndef ROWLOCK_LEASE_H
#define ROWLOCK_LEASE_H

/* The lease strategies' wait loop (they use the wake-up hint): calls
 * `attempt` (or, when the connection's lease rule has one, the rule's
 * attempt instead) until it returns something other than ROWLOCK_EBUSY or
 * the deadline passes, queueing on the hint between attempts. It also stops,
 * with ROWLOCK_EBUSY, once l->found_multi is set (the name has a
 * multi-holder row, which no one-row claim takes). */
#define ROWLOCK__TRY_UNGATED 1u /* grant a free row even without the hint */
#define ROWLOCK__TRY_HANDED 2u  /* this call has headed the waiter queue, so a
                                   row held by our owner was handed to us by a
                                   release: take it without counting a re-entry
                                   (the claim's write also makes the hand-off
                                   durable before we report it) */
int rowlock__wait_loop(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms,
                       int (*attempt)(rowlock_lock *l, int64_t lease_ms, int64_t remaining_ms, unsigned flags));
/* The longest slice (s) of one waiting statement of c, or less to reach
 * the deadline (rowlock__now_us() µs; INT64_MAX: none): at most 30 s and
 * within c's read timeout. */
double rowlock__queue_slice_s(const rowlock_client *c, int64_t deadline);
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
    int queued;          /* the last acquire's session joined the waiter queue:
                            a release may have handed it the lock (lock.c's
                            give-back after an interrupt) */
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
/* Run a release or renewal statement: a lock wait timeout or deadlock
 * rolled it back without effect, so it runs again (8 tries, backoff, a
 * BUSY_RETRY event each), then fails as ROWLOCK_EDB (lease.c, holders.c). */
int rowlock__lease_exec_retrying(rowlock_lock *l, const char *what, const char *sql, const rowlock__param *p,
                                 unsigned np, rowlock__res *res);
/* Release and renew of a lease row (insert and optimistic). */
int rowlock__lease_release(rowlock_lock *l);
int rowlock__lease_renew(rowlock_lock *l, int64_t lease_ms);
/* Adopt our owner's live row of l's strategy (a claim that committed after
 * its connection died): count 1, the lease re-armed to lease_ms from now,
 * l->token set. 0 adopted; ROWLOCK_EBUSY no such row; else an error. */
int rowlock__lease_adopt(rowlock_lock *l, int64_t lease_ms);
/* Whether l's last acquire joined the waiter queue (a release may have
 * handed its session the lock). */
int rowlock__lease_was_queued(const rowlock_lock *l);
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
/* The same on a Galera cluster (lease_cluster.c, holders.c): also above the
 * token floor, which the reaper raises to the largest token it deletes. */
#define ROWLOCK__CL_NEW_TOKEN                                                                                 \
    "GREATEST(NEXTVAL(`{{table}}_token`), TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)),"         \
    " IFNULL((SELECT f.token + 1 FROM `{{table}}_floor` f WHERE f.id = 1 LOCK IN SHARE MODE), 1))"

#endif
