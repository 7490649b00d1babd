/*
 * Fenced writes: rowlock_fence() makes the application's own transaction,
 * on its own connection, commit only while a lease lock's grant is the
 * current one (schema: sql/0005_fenced_writes.sql, which also installs the
 * SQL form, the procedure `<table>_fence`, with the same statements).
 *
 * Design
 *
 * The check is a write. The fence UPDATEs the grant's row in the
 * application's transaction, conditioned on the grant's token (and owner):
 * `SET fences = fences + 1 WHERE name = ? AND owner = ? AND token = ?`.
 * 0 rows: the grant is gone (ROWLOCK_EFENCED, nothing was written). 1 row:
 * the row is now part of the transaction, and
 *   - on one server it carries the transaction's exclusive row lock until
 *     COMMIT or ROLLBACK. Every statement that ends a grant and lets another
 *     owner in writes that row (a claim of a free or expired row draws a new
 *     token, a hand-off or release rewrites owner and count, a take-over on a
 *     cluster node CASes token and gen, a force release clears owner, the
 *     reaper deletes, a multi-holder conversion sets owner ''), so it waits
 *     for the application's commit: there is no window between the check
 *     and the commit. A read lock would not do: a taker's write would wait
 *     for it, but the check would then have to be repeated at commit.
 *   - on Galera the row's key is in the transaction's write set (a read
 *     lock is node-local and is not certified; an UPDATE that changes
 *     nothing is neither certified nor logged, hence the counter). A
 *     take-over committed on another node conflicts with it in
 *     certification: whichever is ordered first commits and the other is
 *     rolled back (1213). If the fenced transaction is first, its writes
 *     were committed while the old grant was current in the cluster's total
 *     order; if the take-over is first, the fence's COMMIT fails, or, once
 *     the take-over is applied locally, the fence finds the new token.
 *
 * The cluster rule (lease_cluster.c). Its takers judge a lease by watching
 * (token, gen) unchanged for lease_us on their own clock and then CAS on
 * exactly that pair. The fence writes neither token nor gen, so it is no
 * proof of life: a holder that fences but no longer renews still loses the
 * lock after its lease, and the fence then fails (as it must: the keeper's
 * safe-until is the only promise the holder has). The CAS and the fence
 * write the same row, so a take-over and a fenced transaction running at
 * the same time certify against each other (above); a fenced transaction
 * committed first is simply ordered before the take-over, whose CAS still
 * matches (token, gen) and succeeds. A reservation (cl-reserve) also writes
 * the row: a waiter's reservation on another node can make a fenced
 * transaction fail certification (1213: retry), never the reverse harm.
 *
 * A lease that ended but was not taken: the exclusive row is matched by
 * token, not by expires_at, so it still fences. Safe, since any taker must
 * rewrite the row first (above), and the same rule holds on a cluster, where
 * no node's clock may decide. Holders-table entries (shared, semaphore, an
 * exclusive holder of a multi-holder name) are different: a taker reads the
 * entries with LOCK IN SHARE MODE and passes over one whose lease ended
 * without writing it, so the entry's fence also requires
 * `expires_at > SYSDATE(6)` (the clock once the entry is locked, not the
 * statement's start: found by a review). Such a taker's shared read waits for the
 * fence's exclusive entry lock and then sees the lease ended only after the
 * fenced commit; a fence that waits for a taker's read finds, once the taker
 * committed, a lease the taker saw ended (one server: one clock). On a
 * cluster (no ROWLOCK__RULE_CLOCK) a taker passes over an entry only by
 * deleting it, conditioned on the (token, gen) it watched (holders.c), so
 * there the entry's fence is matched by token alone, as the row's is: the
 * delete and the fence write the same row (a lock wait on one node, a
 * certification conflict across nodes).
 *
 * for-update locks are refused (ROWLOCK_EUNSUPPORTED): the lock is a row
 * lock held by the lock's own transaction, which a fence on another
 * connection would wait for until the lock is released; the application's
 * writes on the lock's own connection are fenced by construction (they die
 * with the lock's transaction).
 *
 * Cost: one round trip on the application's connection (prepare and
 * execute in one packet, rowlock__db_run_on), no flush of its own (the row
 * commits with the application's data). What it blocks while the
 * transaction is open: takers of the name, the lock's own renewals (the
 * keeper's renewal waits and retries) and its release (commit first), and,
 * for an exclusive lock, a second fenced transaction of the same grant.
 * Statements: rowlock:fence, rowlock:fence-hold.
 */
#include "rowlock_int.h"

#include <mysql.h>

/* Params: name, owner, token. Rows changed: 1 fenced, 0 not current. */
static const char SQL_FENCE[] = "/* rowlock:fence */ UPDATE `{{table}}` SET fences = fences + 1 "
                                "WHERE name = ? AND owner = ? AND token = ? AND count > 0";

/* Params: name, owner, token. The holders-table entry, by its primary key. */
/* The lease is judged by the clock when the entry's lock is granted
 * (SYSDATE(6) in UTC, evaluated on the locked row), not when the statement
 * started (UTC_TIMESTAMP(6)): a fence that started before the lease's end
 * and waited for a taker that saw it ended must not find it running. */
static const char SQL_FENCE_HOLD[] = "/* rowlock:fence-hold */ SET STATEMENT time_zone='+00:00' FOR "
                                     "UPDATE `{{table}}_hold` SET fences = fences + 1 "
                                     "WHERE name = ? AND owner = ? AND token = ? AND granted = 1 "
                                     "AND expires_at > SYSDATE(6)";
/* The same on a cluster: no clock. A taker there passes over an entry only
 * by deleting it (holders.c), so an entry that is still there is current. */
static const char SQL_FENCE_HOLD_CL[] = "/* rowlock:fence-hold-cl */ UPDATE `{{table}}_hold` SET fences = fences + 1 "
                                        "WHERE name = ? AND owner = ? AND token = ? AND granted = 1";

/* Inside a transaction, or autocommit off (the server's last word on this
 * connection: the status flags of its latest reply). */
static int in_transaction(MYSQL *m)
{
    unsigned int status = 0;
    if (mariadb_get_infov(m, MARIADB_CONNECTION_SERVER_STATUS, &status) != 0)
        return 0;
    return (status & SERVER_STATUS_IN_TRANS) != 0 || (status & SERVER_STATUS_AUTOCOMMIT) == 0;
}

static int fence_held(rowlock_lock *l, void *mysql);

/* The lock's client is held for the call, as release and renew hold it: a
 * keeper renewing on that client's connection (ROWLOCK_KEEP_SAME_CONNECTION)
 * does not write the client's error fields while the fence reports in them. */
ROWLOCK_EXTERN int rowlock_fence(rowlock_lock *l, void *mysql)
{
    if (l == NULL || l->client == NULL)
        return ROWLOCK_EINVALID;
    rowlock__db_hold(l->client);
    int rc = fence_held(l, mysql);
    rowlock__db_unhold(l->client);
    return rc;
}

static int fence_held(rowlock_lock *l, void *mysql)
{
    rowlock_client *c = l->client;
    rowlock__clear_error(c);
    if (mysql == NULL)
        return rowlock__fail(c, ROWLOCK_EINVALID, "fence %s (%s): the application's connection is NULL", l->shown,
                             l->ops->name);
    if (!(l->ops->flags & ROWLOCK__S_LEASE_ROW))
        return rowlock__fail(c, ROWLOCK_EUNSUPPORTED,
                             "fence %s (%s): a for-update lock is its own connection's transaction: make the "
                             "writes on that connection (they end with the lock)",
                             l->shown, l->ops->name);
    if (l->held == 0 || l->token == 0)
        return rowlock__fail(c, ROWLOCK_EINVALID, "fence %s (%s): this handle holds nothing", l->shown,
                             l->ops->name);
    if (!in_transaction((MYSQL *)mysql))
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "fence %s (%s): the application's connection is not inside a transaction (START "
                             "TRANSACTION first: with autocommit the fence would commit at once)",
                             l->shown, l->ops->name);
    const char *tmpl = SQL_FENCE;
    if (l->held_multi) {
        const rowlock__lease_rule *rule;
        int rc = rowlock__lease_rule_get(c, &rule); /* the grant's connection's rule (cached) */
        if (rc)
            return rc;
        tmpl = (rule->flags & ROWLOCK__RULE_CLOCK) ? SQL_FENCE_HOLD : SQL_FENCE_HOLD_CL;
    }
    rowlock__param p[3] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len), RL_U64(l->token) };
    rowlock__res res = { 0 };
    int rc = rowlock__db_run_on(c, mysql, RL_STMT(.what = "fence", .tmpl = tmpl, .params = p, .nparams = 3, .res = &res));
    if (rc == ROWLOCK_EBUSY)
        rc = ROWLOCK_EDB; /* a lock wait timeout or deadlock on the application's transaction: its to retry */
    if (rc)
        return rc;
    if (res.affected == 0)
        return rowlock__fail(c, ROWLOCK_EFENCED,
                             "fence %s (%s): grant %llu is no longer the current one (lease ended and taken, "
                             "released or purged): roll the transaction back",
                             l->shown, l->ops->name, (unsigned long long)l->token);
    return 0;
}
