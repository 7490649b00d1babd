/*
 * lease_rule.h: how leases are judged, one rule per connection.
 *
 * Offers: struct rowlock__lease_rule, the table of one rule (what differs
 * between a single server and a Galera cluster for the lease strategies),
 * the two rules (lease_server.c, lease_cluster.c), and the choice between
 * them (lease_rule.c): one probe of @@global.wsrep_on per connection,
 * cached in the client until its session ends, as a VFS is chosen once.
 * Called by: lease.c (wait loop, renew, adopt), holders.c (modes exist under
 * the rule or not), lock.c (causal reads for inspect), admin.c (reap),
 * client.c (free),
 * strategy_for_update.c (refused on a Galera node): through the table or
 * rowlock__lease_rule_get(), never by a rule's name.
 *
 * A rule calls down only (row.c, the db layer, util.c); it never calls lease.c. What
 * it must ask of the lease protocol it leaves in the handle's lease state
 * (rowlock__lease_lock: hint_owed).
 */
#ifndef ROWLOCK_LEASE_RULE_H
#define ROWLOCK_LEASE_RULE_H

enum {
    ROWLOCK__RULE_QUEUE = 1u << 0,  /* the waiter queue's hand-off may be used (it is node-local) */
    ROWLOCK__RULE_CLOCK = 1u << 1,  /* leases are judged by the server's clock (expires_at against
                                       UTC_TIMESTAMP): one server. Without it (a cluster) holders.c
                                       watches entries as the cluster rule watches rows, and
                                       downgrade is refused */
    ROWLOCK__RULE_CAUSAL = 1u << 2  /* a read that must see every grant committed anywhere (inspect)
                                       waits for the cluster (wsrep_sync_wait) */
};

typedef struct rowlock__lease_rule {
    const char *name;   /* "server", "cluster" */
    unsigned int flags; /* ROWLOCK__RULE_* */
    /* 0, or the longest wait on the (node-local) wake-up hint between looks
     * at the row, in s: a release elsewhere wakes nobody here. */
    double slice_max_s;
    /* May be NULL: then the strategy's own attempt (which judges leases by
     * the server's clock). Else one attempt of a lease strategy's claim
     * under this rule, called by lease.c's wait loop instead of the
     * strategy's; same contract (rowlock__wait_loop). */
    int (*attempt)(rowlock_lock *l, int64_t lease_ms, int64_t remaining_ms, unsigned flags);
    /* May be NULL. The end of a lease strategy's wait (rc: its result). */
    void (*wait_end)(rowlock_lock *l, int rc);
    /* Must provide. Renewal of a lease row. Params: `lease_args` times the
     * lease in µs, then name, owner, token, strategy. Rows changed: 1
     * renewed, 0 lost. */
    const char *renew_sql;
    /* Must provide. Adopting our owner's live row of the strategy (count 1,
     * the lease re-armed, the token in LAST_INSERT_ID). Params: `lease_args`
     * times the lease in µs, then name, owner, strategy. Rows: 1 adopted. */
    const char *adopt_sql;
    unsigned int lease_args;
    /* May be NULL: then admin.c's batches by expires_at (and its dry run's
     * counts by the same predicate). rowlock_admin_reap()'s work under this
     * rule, dry run included (admin.c has checked the options); adds to st
     * and sets st->complete. wait_leases: rowlock_reap_options'. */
    int (*reap)(rowlock_client *c, int64_t grace_ms, uint64_t batch, int64_t max_us, int wait_leases, int dry_run,
                int64_t start, rowlock_reap_stats *st);
    /* May be NULL. The client is freed: free what the rule kept in it. */
    void (*client_free)(rowlock_client *c);
} rowlock__lease_rule;

extern const rowlock__lease_rule rowlock__lease_rule_server;
extern const rowlock__lease_rule rowlock__lease_rule_cluster;

/* The cluster rule's wait (lease_cluster.c): how long a taker must see a
 * lease row or holder entry unchanged, on its own monotonic clock, before it
 * may take it over, for a lease of lease_us: the lease plus the drift and
 * margin allowances. */
int64_t rowlock__cluster_wait_us(int64_t lease_us);

/* The rule of c's connection in *out: chosen at its first use after a
 * connect (one probe, rowlock__galera_node), then cached. The test builds
 * (ROWLOCK_FAULT_INJECTION) also read ROWLOCK_LEASE_RULE=server|cluster to
 * force one; the installed library never does. 0 or the probe's error. */
int rowlock__lease_rule_get(rowlock_client *c, const rowlock__lease_rule **out);
/* *on = 1 when c's server is a Galera node (wsrep_on): the one probe, cached
 * per connection (forgotten when the session ends:
 * rowlock__lease_rule_session_ended). */
int rowlock__galera_node(rowlock_client *c, int *on);
/* The session ended (client.c's session_ended hook, which the db layer calls
 * when it closes a connection): the next one may be on another server, so
 * the probe and the rule are asked again. Runs no SQL. */
void rowlock__lease_rule_session_ended(rowlock_client *c);
/* Every rule's client_free (client.c, when the client is freed). */
void rowlock__lease_rules_client_free(rowlock_client *c);

#endif
