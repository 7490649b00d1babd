/*
 * The insert strategy: a row per lock name, claimed by a unique-key INSERT.
 *
 * SQL and round trips
 *   acquire  1 round trip: ACQUIRE below. A new name inserts its row; an
 *            existing row is taken over in the same statement (ON DUPLICATE
 *            KEY UPDATE) when it is free or its lease ended by the server's
 *            UTC_TIMESTAMP(6) and this session holds or gets the wake-up hint
 *            (ROWLOCK__HINT_TRY; lease.c). A client that already holds the
 *            name re-enters with REENTER instead (count + 1, 1 round trip;
 *            if its lease ended, the claim follows).
 *            The outcome comes back through LAST_INSERT_ID(expr), which the
 *            statement sets to the grant's token, or to 0 when nothing was
 *            granted. A new row takes the hint with one more round trip. A
 *            loser makes one more read to learn whether the name belongs to
 *            another strategy, then joins the waiter queue and waits (lease.c)
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
 *   waiters on a just-freed key) mean "busy, retry"; a try-once that meets
 *   them re-reads the row and says busy only if someone holds the name
 *   (try_once_lock_wait); 1146 means the schema is
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

/*
 * Named pieces of ACQUIRE's ON DUPLICATE KEY UPDATE, where LAST_INSERT_ID()
 * is the outcome so far:
 *   DENY       keep the token and record "nothing granted" (LAST_INSERT_ID 0)
 *   GRANTED    the first assignment granted the row
 */
#define DENY "token + 0 * LAST_INSERT_ID(0)"
#define GRANTED "LAST_INSERT_ID() <> 0"

/* Params: name, owner, lease µs, RL_HINT_TRY. Variant: lock-wait
 * milliseconds (0 = try once). A row that is not free is never granted here,
 * not even to our own owner: re-entry is REENTER's, tried only when this
 * client holds the name (or heads its queue), so a grant can never be counted
 * as a re-entry by accident. The nested IF tries the hint only on a free row
 * of this strategy. */
static const char ACQUIRE[] =
    "/* rowlock:claim */ SET STATEMENT innodb_lock_wait_timeout={{waits}} FOR "
    "INSERT INTO `{{table}}` (name, strategy, owner, count, token, acquired_at, expires_at) "
    "VALUES (?, 1, ?, 1, LAST_INSERT_ID(" ROWLOCK__NEW_TOKEN "), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) "
    "ON DUPLICATE KEY UPDATE "
    " token = IF(strategy = 1 AND " ROWLOCK__SQL_FREE_ROW ","
    "          IF(" ROWLOCK__HINT_TRY ", LAST_INSERT_ID(GREATEST(token + 1, VALUES(token))), " DENY "), " DENY "),"
    " count = IF(" GRANTED ", 1, count),"
    " acquired_at = IF(" GRANTED ", UTC_TIMESTAMP(6), acquired_at),"
    " expires_at = IF(" GRANTED ", VALUES(expires_at), expires_at),"
    " owner = IF(" GRANTED ", VALUES(owner), owner)";

/* Params: re-entry increment (1; 0 with ROWLOCK__TRY_HANDED: a release
 * handed our owner the row, and this write makes that durable before we
 * report it), lease µs, name, owner. Our owner's live row only; the token
 * comes back through LAST_INSERT_ID(token). */
static const char REENTER[] =
    "/* rowlock:reenter */ SET STATEMENT innodb_lock_wait_timeout={{waits}} FOR "
    "UPDATE `{{table}}` SET count = count + ?, token = LAST_INSERT_ID(token),"
    " expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) "
    "WHERE name = ? AND owner = ? AND strategy = 1 AND expires_at > UTC_TIMESTAMP(6)";

static int reenter(rowlock_lock *l, int64_t lease_ms, long waits, int64_t increment)
{
    rowlock_client *c = l->client;
    rowlock__param p[4] = { RL_I64(increment), RL_I64(lease_ms * 1000), RL_STR(l->name, l->name_len),
                            RL_STR(c->owner, c->owner_len) };
    rowlock__res res;
    int rc = rowlock__db_run(c, RL_STMT(.what = "acquire (insert)", .tmpl = REENTER, .variant = waits, .params = p,
                                        .nparams = 4, .res = &res));
    if (rc)
        return rc;
    if (res.affected != 1)
        return ROWLOCK_EBUSY;
    l->token = res.insert_id;
    return 0;
}

/*
 * A try-once claim runs with innodb_lock_wait_timeout=0, so any row lock in
 * its way fails it at once with 1205 (or 1213). That is not "held": another
 * transaction's gap or next-key lock on the names index (a shared acquire of
 * another new name: holders.c's DRAW on a missing row, then its INSERT, lock
 * the gap our new row goes into until their commit, microseconds later; the
 * reaper's DELETE of a neighbouring row) stops the INSERT of a name nobody
 * holds. So a try-once that met a lock: read the row without locking; if
 * someone holds the name (or another strategy owns it, or it is a
 * multi-holder name), it is busy as before and the caller's explaining read
 * says why. Otherwise run the claim again after a short backoff, still
 * without waiting on row locks (a for-update holder keeps its row locked for
 * as long as it holds the name: never wait for that). A lock still there
 * after TRY_ONCE_LOCKED_US is busy after all: no gap lock lasts that long,
 * but an uncommitted claim of the name in an application's transaction
 * (rowlock_client_wrap) does, and it holds the name once it commits.
 */
#define TRY_ONCE_LOCKED_US 1000000
static int try_once_lock_wait(rowlock_lock *l, const rowlock__param *p, rowlock__res *res)
{
    rowlock_client *c = l->client;
    int rc = ROWLOCK_EBUSY;
    int64_t give_up = rowlock__now_us() + TRY_ONCE_LOCKED_US;
    for (unsigned attempt = 1; rc == ROWLOCK_EBUSY && rowlock__now_us() < give_up; attempt++) {
        rowlock_info info = ROWLOCK_INFO_INIT;
        unsigned int db_errno = c->db_errno;
        /* Not rowlock__db_run_quiet: the claim's error is restored only
         * when the read confirms the busy result; a failed read's error is
         * the result. */
        rowlock__errsave keep;
        rowlock__error_save(c, &keep);
        int rrc = rowlock__row_read(c, l->name, l->name_len, &info);
        if (rrc)
            return rrc;
        if (info.exists && (info.held || info.strategy != ROWLOCK_STRATEGY_INSERT)) {
            rowlock__error_restore(c, &keep);
            return ROWLOCK_EBUSY; /* someone holds it: busy indeed */
        }
        int64_t pause = rowlock__backoff_us(attempt, 1000, 100000, rowlock__rand32(&c->rng));
        ROWLOCK__LOG_LOCK(l, ROWLOCK_LOG_INFO, BUSY_RETRY,
                          RL_EVX(.db_errno = db_errno, .waited_us = pause, .attempt = attempt),
                          "acquire %s (%s): try-once claim met a row lock (MySQL error %u) on a name nobody "
                          "holds; retry %u in %.3f s",
                          l->shown, l->ops->name, db_errno, attempt, (double)pause / 1e6);
        rowlock__sleep_us(pause);
        rc = rowlock__db_run(c, RL_STMT(.what = "acquire (insert)", .tmpl = ACQUIRE, .params = p, .nparams = 6,
                                        .res = res));
    }
    if (rc == ROWLOCK_EBUSY)
        return rowlock__fail(c, ROWLOCK_EBUSY, "acquire %s (%s): busy: no committed holder, but another "
                             "transaction kept the name's row locked for %.1f s (an uncommitted claim?): %s",
                             l->shown, l->ops->name, TRY_ONCE_LOCKED_US / 1e6, c->errmsg);
    return rc;
}

static int insert_attempt(rowlock_lock *l, int64_t lease_ms, int64_t remaining_ms, unsigned flags)
{
    rowlock_client *c = l->client;
    /* A try-once does not wait on row locks at all; a waiter waits up to 1 s
     * for the concurrent statement holding the row (normally microseconds;
     * a for-update holder of a name we may not use holds it longer). */
    long waits = remaining_ms == 0 ? 0 : 1000;
    int rc;
    if (rowlock__lease_client_holds(l)) {
        /* A re-entry: one statement. It matches nothing only when our lease
         * ended; then the name is claimed like any other. */
        rc = reenter(l, lease_ms, waits, 1);
        if (rc != ROWLOCK_EBUSY)
            return rc;
    }
    rowlock__param p[6] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len), RL_I64(lease_ms * 1000),
                            RL_HINT_TRY(l, flags) };
    rowlock__res res;
    rc = rowlock__db_run(c, RL_STMT(.what = "acquire (insert)", .tmpl = ACQUIRE, .variant = waits, .params = p,
                                    .nparams = 6, .res = &res));
    if (rc == ROWLOCK_EBUSY && waits == 0)
        rc = try_once_lock_wait(l, p, &res);
    if (rc)
        return rc;
    if (res.insert_id == 0) {
        /* Denied. While heading the queue, a release may have handed our
         * owner the row: take it (one more statement, waiters only). */
        if (flags & ROWLOCK__TRY_HANDED)
            return reenter(l, lease_ms, waits, 0);
        return ROWLOCK_EBUSY;
    }
    l->token = res.insert_id;
    if (res.affected == 1)
        rowlock__hint_take(l); /* a new row: its INSERT took no hint */
    return 0;
}

/* The one-row protocol (the rest of this file). */
static int one_row_acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    return rowlock__wait_loop(l, wait_ms, lease_ms, insert_attempt);
}

/*
 * Modes (shared, permits): names with several holders, in the holders
 * table (holders.c, whose opening comment is the design). A shared or
 * semaphore handle always acquires there; an exclusive one takes the
 * one-row protocol until a claim finds the name's row turned into a
 * multi-holder row, then acquires there too. A grant's release and renewal
 * follow where it was made (l->held_multi).
 */
static int insert_lock_init(rowlock_lock *l)
{
    l->multi = l->mode == ROWLOCK_MODE_SHARED || l->permits > 0;
    return rowlock__lease_lock_init(l);
}

static int insert_acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    return rowlock__holders_acquire(l, wait_ms, lease_ms, one_row_acquire);
}

static int insert_release(rowlock_lock *l)
{
    return l->held_multi ? rowlock__holders_release(l) : rowlock__lease_release(l);
}

static int insert_renew(rowlock_lock *l, int64_t lease_ms)
{
    return l->held_multi ? rowlock__holders_renew(l, lease_ms) : rowlock__lease_renew(l, lease_ms);
}

/* Exclusive to shared without letting go: holders.c (its downgrade comment). */
static int insert_downgrade(rowlock_lock *l, int64_t lease_ms)
{
    return rowlock__holders_downgrade(l, lease_ms);
}

/* A multi-holder name's row shows owner '' and a lease to 9999: its
 * holders say who holds it. */
static int insert_inspect(rowlock_lock *l, rowlock_info *info)
{
    return rowlock__holders_inspect(l->client, info);
}

const rowlock__strategy_ops rowlock__strategy_insert = {
    .version = ROWLOCK__STRATEGY_OPS_VERSION,
    .id = ROWLOCK_STRATEGY_INSERT,
    .name = "insert",
    .flags = ROWLOCK__S_LEASE_ROW | ROWLOCK__S_MULTI_ROWS,
    .modes = ROWLOCK__M_SHARED | ROWLOCK__M_PERMITS,
    .lock_state_size = sizeof(rowlock__lease_lock),
    .lock_init = insert_lock_init,
    .lock_free = rowlock__lease_lock_free,
    .client_free = rowlock__lease_client_free,
    .acquire = insert_acquire,
    .release = insert_release,
    .renew = insert_renew,
    .inspect = insert_inspect,
    .downgrade = insert_downgrade,
};

