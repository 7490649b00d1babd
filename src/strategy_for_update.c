/*
 * The for-update strategy: a transaction holds the name's row with
 * SELECT ... FOR UPDATE until release commits it.
 *
 * SQL and round trips
 *   acquire  2 round trips: START TRANSACTION, then LOCK_* below, which waits
 *            in the server's row-lock queue (no client polling): NOWAIT for a
 *            try, max_statement_time for a bounded wait (InnoDB's own lock
 *            wait is whole seconds; the statement timer has microseconds),
 *            or a year-long lock wait for "forever". The same statement takes
 *            the fencing token from the table's sequence, after the row lock
 *            is granted, so tokens follow grant order. Nothing is written:
 *            the commit at release costs no redo-log flush, and a token
 *            survives the holder's rollback because sequences are not
 *            transactional, and the clock part covers a server crash (see
 *            ROWLOCK__NEW_TOKEN in rowlock_int.h, FU_TOKEN below). First use of
 *            a name: 4 more round trips (ROLLBACK, an autocommitted INSERT
 *            IGNORE of its row, then the two acquire statements again).
 *   release  1 round trip: COMMIT.
 *   renew    1 round trip: DO 1 (SET SESSION wait_timeout when the lease
 *            changes): proves the session (and so the row lock) is alive and
 *            restarts the server's idle timer for it.
 * Lease: the lock lives as long as its session, and the session as long as
 *   its holder is heard: at the grant the session's wait_timeout becomes the
 *   lease (whole seconds, rounded up; at most 365 days, the server's limit),
 *   so a holder that sends nothing for that long (a dead host, a silent
 *   partition, a NAT that forgot the flow, or a holder that neither renews
 *   nor keeps) has its session ended by the server, which rolls back and
 *   grants the next waiter. The server's timer needs nothing from the client
 *   or the network, and a statement of the application's own in the lock's
 *   transaction restarts it too. Cost: one SET on a session's first grant
 *   (or when the lease changes), none after; the keeper's keep-alive (DO 1)
 *   every third of the lease while kept. A session of ours stays at the
 *   lease after the release, and when it idles longer the server closes it
 *   and the next call opens another (db_connect.c sees the close without a round
 *   trip); a wrapped session (the application's) is given back its own
 *   wait_timeout at the release (one more round trip each way).
 * Shared mode: the same with LOCK IN SHARE MODE instead of FOR UPDATE
 *   (LOCK_*_SHARED): InnoDB's S locks coexist and exclude an X lock. Fair
 *   across modes: InnoDB queues a new S request behind a waiting X request
 *   on the row (it checks waiting locks too), so a writer is not starved by
 *   a stream of readers. Each reader's token is drawn after its grant; a
 *   writer's is drawn after the readers before it committed. No semaphore
 *   (permits): InnoDB has no counted lock.
 * Holder crash: the server rolls the transaction back when it notices the
 *   connection is gone, and the next waiter is granted at once; no lease, no
 *   reaper. Rows are never purged (expires_at stays NULL).
 * One client holds one for-update transaction: a second name on the same
 *   client would share its fate (commit releases both), so it is refused.
 * The application may run its own SQL in the lock's transaction on the same
 *   connection; if it commits or rolls back, the lock is released with it and
 *   rowlock_release() then says ENOTOWNER.
 * Galera: FOR UPDATE locks rows on one node only; refused on wsrep_on=ON
 *   unless the client declared ROWLOCK_CLIENT_SINGLE_NODE.
 * Errors: 1205 (NOWAIT / lock wait timeout) and 1969 (statement timer) mean
 *   busy; a lost connection at release means ENOTOWNER.
 */
#include "rowlock_int.h"

#include <stdio.h>
#include <string.h>

/* The token's clock part must be read when the row lock is granted, not when
 * the statement started waiting: SYSDATE(6) (evaluated per row, after the
 * lock) in UTC, rather than the statement-constant UTC_TIMESTAMP(6). */
#define FU_TOKEN \
    "GREATEST(NEXTVAL(`{{table}}_token`), TIMESTAMPDIFF(MICROSECOND, '1970-01-01', SYSDATE(6)))"
static const char LOCK_TRY[] =
    "/* rowlock:fu-lock-try */ SET STATEMENT time_zone='+00:00' FOR "
    "SELECT strategy, " FU_TOKEN " FROM `{{table}}` WHERE name = ? FOR UPDATE NOWAIT";
static const char LOCK_WAIT[] =
    "/* rowlock:fu-lock-wait */ SET STATEMENT time_zone='+00:00', max_statement_time={{wait}}, innodb_lock_wait_timeout={{waits}} FOR "
    "SELECT strategy, " FU_TOKEN " FROM `{{table}}` WHERE name = ? FOR UPDATE";
static const char LOCK_FOREVER[] =
    "/* rowlock:fu-lock-forever */ SET STATEMENT time_zone='+00:00', innodb_lock_wait_timeout=100000000 FOR "
    "SELECT strategy, " FU_TOKEN " FROM `{{table}}` WHERE name = ? FOR UPDATE";
static const char LOCK_TRY_SHARED[] =
    "/* rowlock:fu-lock-try */ SET STATEMENT time_zone='+00:00' FOR "
    "SELECT strategy, " FU_TOKEN " FROM `{{table}}` WHERE name = ? LOCK IN SHARE MODE NOWAIT";
static const char LOCK_WAIT_SHARED[] =
    "/* rowlock:fu-lock-wait */ SET STATEMENT time_zone='+00:00', max_statement_time={{wait}}, innodb_lock_wait_timeout={{waits}} FOR "
    "SELECT strategy, " FU_TOKEN " FROM `{{table}}` WHERE name = ? LOCK IN SHARE MODE";
static const char LOCK_FOREVER_SHARED[] =
    "/* rowlock:fu-lock-forever */ SET STATEMENT time_zone='+00:00', innodb_lock_wait_timeout=100000000 FOR "
    "SELECT strategy, " FU_TOKEN " FROM `{{table}}` WHERE name = ? LOCK IN SHARE MODE";
static const char CREATE_ROW[] =
    "/* rowlock:fu-create-row */ INSERT IGNORE INTO `{{table}}` (name, strategy, owner, count, token) VALUES (?, 2, NULL, 0, 0)";
/* Non-waiting probe for inspect: autocommit, so the share lock ends with it. */
static const char PROBE[] = "/* rowlock:fu-probe */ SELECT 1 FROM `{{table}}` WHERE name = ? LOCK IN SHARE MODE NOWAIT";

/* Per-client state: the one transaction this client may hold open. */
typedef struct fu_client {
    char name[ROWLOCK_NAME_MAX + 1];
    unsigned int count; /* acquisitions across handles; 0: no transaction */
    int mode;           /* the mode the transaction holds the row in */
    uint64_t token;
    long wait_s;        /* the session's wait_timeout as set by us; 0: not set on this session
                           (wrapped: while set, the application's own is in @rowlock_wait_timeout) */
} fu_client;
#define FU(c) ((fu_client *)rowlock__strategy_client_state((c), &rowlock__strategy_for_update))

/* The session ended: its transaction (and the lock) with it; the next one
 * may be on another server. */
static void fu_session_ended(rowlock_client *c, void *state)
{
    (void)c;
    fu_client *f = state;
    f->count = 0;
    f->name[0] = '\0';
    f->wait_s = 0;
}

/* ROWLOCK_LEASE_MAX_MS is the server's limit for wait_timeout (365 days),
 * so every lease fits. */
static long wait_seconds(int64_t lease_ms)
{
    long s = (long)((lease_ms + 999) / 1000);
    return s < 1 ? 1 : s;
}

/* Make the session's wait_timeout the lease (see the head of this file). */
static int set_wait(rowlock_client *c, fu_client *f, long wait_s, const char *what)
{
    if (f->wait_s == wait_s)
        return 0;
    char sql[160];
    if (!c->owns_mysql && f->wait_s == 0)
        snprintf(sql, sizeof sql,
                 "/* rowlock:fu-wait-timeout */ SET @rowlock_wait_timeout = @@session.wait_timeout, "
                 "SESSION wait_timeout = %ld", wait_s);
    else
        snprintf(sql, sizeof sql, "/* rowlock:fu-wait-timeout */ SET SESSION wait_timeout = %ld", wait_s);
    int rc = rowlock__db_simple(c, what, sql);
    if (rc == 0)
        f->wait_s = wait_s;
    return rc;
}

/* A wrapped session gets the application's wait_timeout back. */
static void restore_wait(rowlock_client *c, fu_client *f)
{
    if (c->owns_mysql || f->wait_s == 0)
        return;
    (void)rowlock__db_simple_quiet(c, "release (for-update): restore wait_timeout",
                                   "/* rowlock:fu-wait-restore */ SET SESSION wait_timeout = @rowlock_wait_timeout");
    f->wait_s = 0;
}

static int check_cluster(rowlock_lock *l)
{
    rowlock_client *c = l->client;
    int galera = 0;
    int rc = rowlock__galera_node(c, &galera); /* the connection's one probe (lease_rule.c) */
    if (rc)
        return rc;
    if (galera && !(c->flags & ROWLOCK_CLIENT_SINGLE_NODE))
        return rowlock__fail(c, ROWLOCK_EUNSUPPORTED,
                             "acquire %s (for-update): the server is a Galera cluster node (wsrep_on=ON), where "
                             "SELECT ... FOR UPDATE locks one node only; use the insert or optimistic strategy, or "
                             "set ROWLOCK_CLIENT_SINGLE_NODE if all lock traffic goes to one node",
                             l->shown);
    return 0;
}

static int rollback(rowlock_client *c)
{
    rowlock__db_rollback(c, "rollback", "/* rowlock:fu-rollback */ ROLLBACK");
    return 0;
}

static int touch(rowlock_lock *l, int64_t lease_ms, const char *what);

static int fu_acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    rowlock_client *c = l->client;
    fu_client *f = FU(c);
    if (f->count > 0) {
        if (strcmp(f->name, l->name) == 0) {
            if (f->mode == ROWLOCK_MODE_SHARED && l->mode == ROWLOCK_MODE_EXCLUSIVE)
                return rowlock__fail(c, ROWLOCK_EUPGRADE,
                                     "acquire %s (for-update, exclusive): this client holds it shared; release it "
                                     "first (no upgrade from shared to exclusive)",
                                     l->shown);
            /* Re-entry: the transaction already holds the row. It extends
             * the lease (lock.c), so it must reach the session: touch(). */
            int rc = touch(l, lease_ms, "acquire");
            if (rc)
                return rc;
            f->count++;
            l->token = f->token;
            return 0;
        }
        char held[64];
        rowlock_escape(held, sizeof held, f->name, strlen(f->name));
        return rowlock__fail(c, ROWLOCK_EUNSUPPORTED,
                             "acquire %s (for-update): this client already holds for-update lock '%s' in its "
                             "transaction; use another client for a second for-update lock",
                             l->shown, held);
    }
    int rc = check_cluster(l);
    if (rc)
        return rc;
    if (rowlock__db_in_transaction(c))
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "acquire %s (for-update): the connection is already inside a transaction; the lock "
                             "starts its own",
                             l->shown);

    /* A wait beyond the longest lease is a wait for ever (and keeps the
     * arithmetic below and the statement's seconds from overflowing). */
    if (wait_ms > ROWLOCK_LEASE_MAX_MS)
        wait_ms = ROWLOCK_WAIT_FOREVER;
    const int64_t start = rowlock__now_us();
    for (int created = 0;; created = 1) {
        if ((rc = rowlock__db_simple(c, "acquire (for-update): begin", "/* rowlock:fu-begin */ START TRANSACTION")))
            return rc;
        /* Inside the transaction: the session cannot be swapped for a new
         * one (db_connect.c's idle check never replaces one in a transaction). */
        if ((rc = set_wait(c, f, wait_seconds(lease_ms), "acquire (for-update): lease"))) {
            if (c->connected)
                rollback(c);
            return rc;
        }
        const int shared = l->mode == ROWLOCK_MODE_SHARED;
        const char *sql = shared ? LOCK_FOREVER_SHARED : LOCK_FOREVER;
        long variant = 0;
        if (wait_ms == 0) {
            sql = shared ? LOCK_TRY_SHARED : LOCK_TRY;
        } else if (wait_ms != ROWLOCK_WAIT_FOREVER) {
            int64_t left = wait_ms - (rowlock__now_us() - start) / 1000;
            sql = shared ? LOCK_WAIT_SHARED : LOCK_WAIT;
            variant = (long)(left < 1 ? 1 : left);
        }
        rowlock__col cols[2] = { { .type = ROWLOCK__T_I64 }, { .type = ROWLOCK__T_U64 } };
        rowlock__param p = RL_STR(l->name, l->name_len);
        rowlock__res res;
        /* The whole wait is this one statement: with a read timeout, that
         * counts from the end of the server's wait (db_stmt.c), so a wait
         * longer than the read timeout is not cut (a reconnect, the place
         * in InnoDB's queue lost). The server ends it by max_statement_time
         * (whole seconds of lock wait, rounded up: + 1 s); for ever: by
         * LOCK_FOREVER's innodb_lock_wait_timeout. */
        const double wait_s = wait_ms == 0 ? 0 : variant ? (double)variant / 1e3 + 1.0 : 100000000.0 + 1.0;
        rc = rowlock__db_run(c, RL_STMT(.what = "acquire (for-update)", .tmpl = sql, .variant = variant,
                                        .params = &p, .nparams = 1, .cols = cols, .ncols = 2, .res = &res,
                                        .wait_s = wait_s));
        if (rc == ROWLOCK_EBUSY && wait_ms == ROWLOCK_WAIT_FOREVER) {
            rollback(c);
            created = 0;
            ROWLOCK__LOG_LOCK(l, ROWLOCK_LOG_INFO, BUSY_RETRY, RL_EVX(.db_errno = c->db_errno),
                              "acquire %s (for-update): rolled back (MySQL error %u), waiting again", l->shown,
                              c->db_errno);
            continue; /* a year-long wait ended, or a deadlock victim: queue again */
        }
        if (rc) {
            if (c->connected)
                rollback(c);
            if (rc == ROWLOCK_EBUSY)
                return rowlock__fail(c, ROWLOCK_EBUSY,
                                     "acquire %s (for-update%s): held by another transaction (waited %lld ms)",
                                     l->shown, shared ? ", shared" : "", (long long)((rowlock__now_us() - start) / 1000));
            return rc;
        }
        if (res.rows == 1 && cols[0].i != ROWLOCK_STRATEGY_FOR_UPDATE) {
            rollback(c);
            return rowlock__explain_busy(l);
        }
        if (res.rows == 1) {
            f->count = 1;
            f->mode = l->mode;
            memcpy(f->name, l->name, l->name_len + 1);
            f->token = cols[1].u;
            l->token = f->token;
            return 0;
        }
        /* No row yet: create it outside the transaction (a SELECT ... FOR
         * UPDATE on a missing key would hold a gap lock), then queue again. */
        rollback(c);
        if (created)
            return rowlock__fail(c, ROWLOCK_EDB, "acquire %s (for-update): the row vanished while creating it",
                                 l->shown);
        if ((rc = rowlock__db_run(c, RL_STMT(.what = "acquire (for-update): create row", .tmpl = CREATE_ROW,
                                             .params = &p, .nparams = 1))))
            return rc;
    }
}

static int lost(rowlock_lock *l, const char *what)
{
    rowlock_client *c = l->client;
    fu_client *f = FU(c);
    f->count = 0;
    f->name[0] = '\0';
    restore_wait(c, f);
    return rowlock__fail(c, ROWLOCK_ENOTOWNER,
                         "%s %s (for-update): not the owner any more: the transaction holding it ended "
                         "(connection lost, the server ended the session after a lease without a statement "
                         "from the holder, or the application committed or rolled back)",
                         what, l->shown);
}

/* The session holding the transaction is gone (our connection or a wrapped
 * one): the server has rolled it back, so the lock is gone too. */
static int session_lost(rowlock_client *c, int rc)
{
    return rc != 0 && (!c->connected || rowlock__db_classify(c->db_errno) == ROWLOCK__DB_CONN);
}

static int fu_alive(rowlock_lock *l, const char *what)
{
    rowlock_client *c = l->client;
    fu_client *f = FU(c);
    /* (db_in_transaction is 0 on a connection the keeper's keep-alive cut) */
    if (f->count == 0 || strcmp(f->name, l->name) != 0 || !rowlock__db_in_transaction(c))
        return lost(l, what);
    return 0;
}

static int fu_release(rowlock_lock *l)
{
    rowlock_client *c = l->client;
    fu_client *f = FU(c);
    int rc = fu_alive(l, "release");
    if (rc)
        return rc;
    if (f->count > 1) {
        f->count--;
        return 0;
    }
    rc = rowlock__db_simple(c, "release (for-update)", "/* rowlock:fu-commit */ COMMIT");
    if (session_lost(c, rc))
        return lost(l, "release");
    f->count = 0;
    f->name[0] = '\0';
    if (rc == 0)
        restore_wait(c, f);
    return rc;
}

/* One statement on the holding session (renew, re-entry): the new lease if
 * it changed, else DO 1. It proves the session (and the row lock) alive and
 * restarts the server's idle timer for it. */
static int touch(rowlock_lock *l, int64_t lease_ms, const char *what)
{
    rowlock_client *c = l->client;
    fu_client *f = FU(c);
    char step[40];
    int rc = fu_alive(l, what);
    if (rc)
        return rc;
    snprintf(step, sizeof step, "%s (for-update)", what);
    if (f->wait_s != wait_seconds(lease_ms))
        rc = set_wait(c, f, wait_seconds(lease_ms), step);
    else
        rc = rowlock__db_simple(c, step, "/* rowlock:fu-renew */ DO 1");
    if (session_lost(c, rc))
        return lost(l, what);
    return rc ? rc : fu_alive(l, what);
}

static int fu_renew(rowlock_lock *l, int64_t lease_ms)
{
    return touch(l, lease_ms, "renew");
}

/* Called by rowlock_inspect() with the row already read into info. */
static int fu_inspect(rowlock_lock *l, rowlock_info *info)
{
    rowlock_client *c = l->client;
    fu_client *f = FU(c); /* NULL: this client never made a for-update handle */
    int rc;
    if (f && f->count > 0 && strcmp(f->name, l->name) == 0) {
        info->held = 1;
        info->count = f->count;
        info->token = f->token;
        rowlock__strlcpy(info->owner, c->owner, sizeof info->owner);
        return 0;
    }
    if (rowlock__db_in_transaction(c))
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "inspect %s (for-update): cannot probe from inside a transaction (it would keep the "
                             "probe's lock)",
                             l->shown);
    rowlock__col col = { .type = ROWLOCK__T_I64 };
    rowlock__param p = RL_STR(l->name, l->name_len);
    rc = rowlock__db_run(c, RL_STMT(.what = "inspect (for-update)", .tmpl = PROBE, .params = &p, .nparams = 1,
                                    .cols = &col, .ncols = 1));
    if (rc == ROWLOCK_EBUSY) {
        info->held = 1; /* someone's transaction holds the row; who is not recorded */
        rowlock__clear_error(c);
        return 0;
    }
    return rc;
}

const rowlock__strategy_ops rowlock__strategy_for_update = {
    .version = ROWLOCK__STRATEGY_OPS_VERSION,
    .id = ROWLOCK_STRATEGY_FOR_UPDATE,
    .name = "for-update",
    .flags = ROWLOCK__S_TRANSACTION,
    .modes = ROWLOCK__M_SHARED, /* a share lock on the row (no permits: InnoDB has no counted lock) */
    .client_state_size = sizeof(fu_client),
    .session_ended = fu_session_ended,
    .acquire = fu_acquire,
    .release = fu_release,
    .renew = fu_renew,
    .inspect = fu_inspect,
};
