/*
 * The insert strategy: a row per lock name, claimed by a unique-key INSERT.
 *
 * SQL and round trips
 *   acquire  1 round trip: ACQUIRE below. A new name inserts its row; an
 *            existing row is taken over in the same statement (ON DUPLICATE
 *            KEY UPDATE) when it is free or its lease ended by the server's
 *            UTC_TIMESTAMP(6) and this session holds or gets the wake-up hint
 *            (ROWLOCK__HINT_TRY; lock.c); the same owner re-enters (count + 1).
 *            The outcome comes back through LAST_INSERT_ID(expr), which the
 *            statement sets to the grant's token, or to 0 when nothing was
 *            granted. A new row takes the hint with one more round trip. A
 *            loser makes one more read to learn whether the name belongs to
 *            another strategy, then joins the waiter queue and waits (lock.c)
 *            until its deadline; a waiter the lock is handed to is granted by
 *            one read after it wakes, writing nothing.
 *   release  1 round trip: LEASE_RELEASE (count - 1; at 0 the lock is handed
 *            to the head of the waiter queue, or else the owner is cleared,
 *            expires_at set to UTC_TIMESTAMP(6) and the hint freed; the row
 *            and its token stay). A hand-off takes one more round trip, after
 *            the commit, to let the hint go. A handle that met no contention
 *            since its last release runs LEASE_RELEASE_PLAIN instead (the
 *            same without the queue lookup), and LEASE_RELEASE after it only
 *            when a waiter heads the queue (+1 round trip).
 *   renew    1 round trip: LEASE_RENEW, only while owner and token match and
 *            the lease has not ended. A loser of release/renew makes one read
 *            for the message.
 * Holder crash: the row stays until its lease ends; then the next acquire
 *   takes it over, or the reaper purges it after a grace period.
 * Errors: 1205/1213 (two acquirers' INSERTs on one key, a deadlock between
 *   waiters on a just-freed key) mean "busy, retry"; 1146 means the schema is
 *   missing (ESCHEMA); anything else is EDB.
 * Tokens: VALUES(token) is the new token the statement computed for the
 *   insert (ROWLOCK__NEW_TOKEN, evaluated before the duplicate key is found),
 *   so a takeover reuses it instead of drawing the sequence a second time.
 * Why ODKU assignments look the way they do: MySQL evaluates them left to
 *   right with updated values, MariaDB's SIMULTANEOUS_ASSIGNMENT mode with old
 *   ones. Every condition reads only columns not yet assigned, plus
 *   LAST_INSERT_ID() (a session value), so both orders give the same row.
 *   The hint is tried in the first assignment only, so at most once.
 * Replication: GET_LOCK/RELEASE_LOCK make these statements unsafe for
 *   statement-based binary logging; with binlog_format=MIXED (MariaDB's
 *   default) or ROW they are logged as rows, as Galera requires anyway.
 */
#include "rowlock_int.h"

#include <string.h>

/* Params: name, owner, lease µs, RL_HINT_TRY, re-entry increment (1; 0 with
 * ROWLOCK__TRY_HANDED: our owner's live row was handed to us by a release).
 * Variant: lock-wait milliseconds (0 = try once). */
static const char ACQUIRE[] =
    "SET STATEMENT innodb_lock_wait_timeout={{waits}} FOR "
    "INSERT INTO `{{table}}` (name, strategy, owner, count, token, acquired_at, expires_at) "
    "VALUES (?, 1, ?, 1, LAST_INSERT_ID(" ROWLOCK__NEW_TOKEN "), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) "
    "ON DUPLICATE KEY UPDATE "
    " token = IF(strategy <> 1, token + 0 * LAST_INSERT_ID(0),"
    "          IF(owner IS NULL OR expires_at <= UTC_TIMESTAMP(6),"
    "             IF(" ROWLOCK__HINT_TRY ", LAST_INSERT_ID(GREATEST(token + 1, VALUES(token))),"
    "                token + 0 * LAST_INSERT_ID(0)),"
    "          IF(owner = VALUES(owner), LAST_INSERT_ID(token), token + 0 * LAST_INSERT_ID(0)))),"
    " count = IF(LAST_INSERT_ID() = 0, count,"
    "          IF(owner = VALUES(owner) AND expires_at > UTC_TIMESTAMP(6), count + ?, 1)),"
    " acquired_at = IF(LAST_INSERT_ID() = 0 OR (owner = VALUES(owner) AND expires_at > UTC_TIMESTAMP(6)),"
    "          acquired_at, UTC_TIMESTAMP(6)),"
    " expires_at = IF(LAST_INSERT_ID() = 0, expires_at,"
    "          IF(owner = VALUES(owner) AND expires_at > UTC_TIMESTAMP(6),"
    "             GREATEST(expires_at, VALUES(expires_at)), VALUES(expires_at))),"
    " owner = IF(LAST_INSERT_ID() = 0, owner, VALUES(owner))";

/*
 * Params: queue head name, name, strategy, hint, hint, name, owner, token,
 * strategy.
 * Rows changed: 1 released, 0 lost. LAST_INSERT_ID() comes back as the
 * lease (µs) of the waiter the lock was handed to, or 0.
 *
 * The final release (count 1) hands the lock over when this session holds
 * the hint and the session heading the waiter queue has a queue row for
 * this name (lock.c): the row gets that waiter's owner, a new token and its
 * lease, in this one durable commit, and the hint is kept; the caller lets
 * it go once the commit is reported, which wakes the new holder. Otherwise
 * the owner is cleared, expires_at set to now and the hint freed after the
 * row is locked and before the commit: a waiter woken by it claims the row,
 * waiting on the row lock only until this commit.
 *
 * The first assignment sets LAST_INSERT_ID() (0, or the waiter's lease from
 * inside the subquery); the others read only it and columns not yet
 * assigned, so MariaDB's SIMULTANEOUS_ASSIGNMENT mode gives the same row.
 */
static const char LEASE_RELEASE[] =
    "UPDATE `{{table}}` SET "
    " owner = IF(LAST_INSERT_ID(0) <> 0 OR count > 1, owner,"
    "   (SELECT IF(LAST_INSERT_ID(q.lease_us) <> 0, q.owner, NULL) FROM `{{table}}_queue` q"
    "     WHERE q.conn = IS_USED_LOCK(?) AND q.conn <> CONNECTION_ID() AND q.name = ? AND q.strategy = ?"
    "       AND IS_USED_LOCK(?) <=> CONNECTION_ID())),"
    " token = IF(LAST_INSERT_ID() = 0, token, GREATEST(token + 1, " ROWLOCK__NEW_TOKEN ")),"
    " acquired_at = IF(LAST_INSERT_ID() = 0, acquired_at, UTC_TIMESTAMP(6)),"
    " expires_at = IF(count <= 1, UTC_TIMESTAMP(6) + INTERVAL LAST_INSERT_ID() MICROSECOND, expires_at),"
    " count = IF(count <= 1, IF(LAST_INSERT_ID() = 0, " ROWLOCK__HINT_FREE ", 1), count - 1) "
    "WHERE name = ? AND owner = ? AND token = ? AND strategy = ?";

/*
 * The release when no waiter heads the queue, without LEASE_RELEASE's
 * subquery (opening and optimising the queue table cost 25-80 µs of server
 * time per statement here, up to a fifth of an uncontended cycle). Params: hint, name,
 * owner, token, strategy, queue head name. Rows changed: 1 released, 0 lost
 * *or* a waiter heads the queue (IS_FREE_LOCK is false): then the caller
 * runs LEASE_RELEASE, which hands the lock over or tells a lost lock.
 * Assignments read only `count`, assigned last, so both assignment orders
 * give the same row.
 */
static const char LEASE_RELEASE_PLAIN[] =
    "UPDATE `{{table}}` SET "
    " owner = IF(count > 1, owner, NULL),"
    " expires_at = IF(count > 1, expires_at, UTC_TIMESTAMP(6)),"
    " count = IF(count > 1, count - 1, " ROWLOCK__HINT_FREE ") "
    "WHERE name = ? AND owner = ? AND token = ? AND strategy = ? AND (count > 1 OR IS_FREE_LOCK(?))";

/* Params: lease µs, name, owner, token, strategy. Rows changed: 1 renewed, 0 lost. */
static const char LEASE_RENEW[] =
    "UPDATE `{{table}}` SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND "
    "WHERE name = ? AND owner = ? AND token = ? AND strategy = ? AND expires_at > UTC_TIMESTAMP(6)";

static int insert_attempt(rowlock_lock *l, int64_t lease_ms, int64_t remaining_ms, unsigned flags)
{
    rowlock_client *c = l->client;
    rowlock__param p[7] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len), RL_I64(lease_ms * 1000),
                            RL_HINT_TRY(l, flags), RL_I64((flags & ROWLOCK__TRY_HANDED) ? 0 : 1) };
    rowlock__res res;
    /* A try-once does not wait on row locks at all; a waiter waits up to 1 s
     * for the concurrent statement holding the row (normally microseconds;
     * a for-update holder of a name we may not use holds it longer). */
    long waits = remaining_ms == 0 ? 0 : 1000;
    int rc = rowlock__db_exec(c, "acquire (insert)", ACQUIRE, waits, p, 7, NULL, 0, NULL, NULL, &res);
    if (rc)
        return rc;
    if (res.insert_id == 0)
        return ROWLOCK_EBUSY;
    l->token = res.insert_id;
    if (res.affected == 1)
        rowlock__hint_take(l); /* a new row: its INSERT took no hint */
    return 0;
}

static int insert_acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    return rowlock__wait_loop(l, wait_ms, lease_ms, insert_attempt);
}

int rowlock__explain_lost(rowlock_lock *l, const char *what)
{
    rowlock_info info = ROWLOCK_INFO_INIT;
    int rc = rowlock__row_read(l->client, l->name, l->name_len, &info);
    if (rc)
        return rc;
    const char *why;
    if (!info.exists)
        why = "its row was purged (lease ended long ago)";
    else if (info.token != l->token && info.owner[0])
        why = "another owner took it after the lease ended";
    else if (info.token != l->token || !info.owner[0] || strcmp(info.owner, l->client->owner) != 0)
        why = "it was released (by an administrator or after the lease ended)";
    else
        why = "its lease had already ended";
    return rowlock__fail(l->client, ROWLOCK_ENOTOWNER, "%s %s (%s): not the owner any more: %s", what, l->shown,
                         l->ops->name, why);
}

/*
 * Release and renew must not report "busy": a lock wait timeout or deadlock
 * (1205/1213, e.g. against a reaper's DELETE of a neighbouring row) rolled
 * the statement back without effect, so it is simply run again, a few times,
 * then reported as a database error.
 */
static int exec_retrying(rowlock_client *c, const char *what, const char *sql, const rowlock__param *p, unsigned np,
                         rowlock__res *res)
{
    int rc = ROWLOCK_EBUSY;
    for (unsigned attempt = 0; attempt < 8 && rc == ROWLOCK_EBUSY; attempt++) {
        if (attempt)
            rowlock__sleep_us(rowlock__backoff_us(attempt, 1000, 100000, rowlock__rand32(&c->rng)));
        rc = rowlock__db_exec(c, what, sql, 0, p, np, NULL, 0, NULL, NULL, res);
    }
    if (rc == ROWLOCK_EBUSY)
        return rowlock__fail(c, ROWLOCK_EDB, "%s", c->errmsg);
    return rc;
}

/*
 * Which release statement first: one that can hand the lock over costs a
 * subquery that an uncontended release does not need. A handle that saw no
 * contention since its last release tries LEASE_RELEASE_PLAIN, which refuses
 * (0 rows) when a waiter heads the queue; then, or when the lock was wanted
 * lately, LEASE_RELEASE. A misguess costs one round trip, never a grant:
 * a waiter that heads the queue only after the plain release's check is
 * woken by the hint it frees and claims the row itself.
 */
int rowlock__lease_release(rowlock_lock *l)
{
    rowlock_client *c = l->client;
    rowlock__res res;
    int rc;
    if (!l->contended) {
        rowlock__param pp[6] = { RL_STR(l->hint, l->hint_len), RL_STR(l->name, l->name_len),
                                 RL_STR(c->owner, c->owner_len), RL_U64(l->token),
                                 RL_I64(l->ops->id),           RL_STR(l->qname, l->qname_len) };
        if ((rc = exec_retrying(c, "release", LEASE_RELEASE_PLAIN, pp, 6, &res)))
            return rc;
        if (res.affected == 1)
            return 0;
        l->contended = 1; /* a waiter heads the queue, or the lock was lost */
    }
    rowlock__param p[9] = { RL_STR(l->qname, l->qname_len), RL_STR(l->name, l->name_len), RL_I64(l->ops->id),
                            RL_STR(l->hint, l->hint_len),   RL_STR(l->hint, l->hint_len),
                            RL_STR(l->name, l->name_len),   RL_STR(c->owner, c->owner_len),
                            RL_U64(l->token),               RL_I64(l->ops->id) };
    if ((rc = exec_retrying(c, "release", LEASE_RELEASE, p, 9, &res)))
        return rc;
    if (res.affected != 1)
        return rowlock__explain_lost(l, "release");
    if (res.insert_id != 0) {
        rowlock__hint_release(l); /* handed over, durably: wake the new holder */
        l->handed_over = 1;
    } else if (l->held == 1)
        l->contended = 0; /* the final release found nobody to hand it to */
    return 0;
}

int rowlock__lease_renew(rowlock_lock *l, int64_t lease_ms)
{
    rowlock_client *c = l->client;
    rowlock__param p[5] = { RL_I64(lease_ms * 1000), RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len),
                            RL_U64(l->token), RL_I64(l->ops->id) };
    rowlock__res res;
    int rc = exec_retrying(c, "renew", LEASE_RENEW, p, 5, &res);
    if (rc)
        return rc;
    return res.affected == 1 ? 0 : rowlock__explain_lost(l, "renew");
}

const rowlock__strategy_ops rowlock__strategy_insert = {
    ROWLOCK__STRATEGY_OPS_VERSION, ROWLOCK_STRATEGY_INSERT, "insert",
    insert_acquire, rowlock__lease_release, rowlock__lease_renew, NULL,
};
