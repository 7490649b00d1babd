/*
 * Failover-safe leases on a primary-replica pair: the failover epoch.
 *
 * The problem. A primary grants a lock and dies before the commit reached
 * its replica; the replica is promoted. On the new primary the name is free
 * (or shows an older grant), so a waiter is granted at once while the old
 * holder still runs its critical section; and the new primary's tokens may
 * repeat or be lower than the old one's (its sequence and clock are not the
 * old server's). Semi-synchronous replication does not close this: the
 * replica acknowledges what it *received*, and a promotion discards what it
 * received but did not apply (tools/rowlock-replica promote says so); with
 * AFTER_SYNC the old primary's commit may also be in its own binlog and
 * visible to nobody, yet its client was told nothing -- but the holder of
 * an earlier grant that was acknowledged is still running, and the replica
 * cannot know whether any renewal arrived after the last one it applied.
 * So semi-sync skips nothing here: the wait below is the same.
 *
 * The record. `<table>_epoch` (sql/0006_server_epoch.sql) has one row: the
 * identity of the server that grants on this table (server, as
 * CONCAT(@@server_id, '/', @@server_uid): a replica needs its own server_id
 * to replicate, and the uid tells apart servers that reuse one), an epoch
 * number, safe_after (that server's UTC clock), max_lease_ms (the longest
 * lease or renewal a grant may ask for: longer ones are refused with
 * ROWLOCK_EINVALID, not clamped, so no holder ever believes in a lease the
 * failover wait does not cover) and a token floor. The row replicates like
 * any other, so a promoted replica carries its old primary's identity.
 *
 * The check (rowlock__epoch_grant_check, before every grant attempt of
 * every strategy and mode, from lock.c): once per session, one read
 * (rowlock:epoch-read) compares the recorded identity with the server's.
 * Same identity and safe_after passed: cached until the session ends (the
 * session_ended hook), so the usual cost is one round trip per connection.
 * A different identity: the first client to see it takes over in one
 * statement (rowlock:epoch-take, a conditional UPDATE: one winner): the
 * identity becomes this server's, epoch + 1, safe_after = now (the new
 * server's clock) + max_lease_ms * 1.02 + 100 ms, and the token floor rises
 * above every token the old server could have issued: above every token
 * the tables show, the floor, and the new server's clock in µs, by 2^40
 * (12.7 days of µs: the old server's clock may have been ahead, and its
 * sequence may have moved on by up to that many grants that never arrived).
 * Before that UPDATE the token sequence is set past the new floor
 * (rowlock:epoch-floor, SETVAL: it only moves forward), so every token drawn
 * afterwards by any strategy (ROWLOCK__NEW_TOKEN takes NEXTVAL) is above it;
 * a taker that dies between the two leaves a higher sequence and no
 * takeover, which the next client repeats. Every client then grants nothing
 * until the server's clock passes safe_after: it sleeps in slices of at most
 * 1 s and reads again (the server's clock decides, not ours), within the
 * caller's wait; a shorter wait ends in ROWLOCK_EBUSY, "the server failed
 * over ...: grants resume in N ms".
 *
 * Why that is enough. Every grant or renewal G the old server committed
 * asked for at most max_lease_ms, and its holder counts the lease from
 * before it sent the request (lock.c: grant_sent_us), so the holder believes
 * in G no longer than max_lease_ms after the old server's last commit, which
 * came before the takeover. The takeover's safe_after is max_lease_ms (plus
 * 2 % and 100 ms) after it, by the new server's clock. Assumptions: (1) the
 * lease is bounded (max_lease_ms, enforced for grants and renewals of every
 * strategy; a for-update lock's lease is its session's wait_timeout, and its
 * holder must stop at its lease too, as the keeper does); (2) the clocks of
 * the holder and of the new server advance at the same rate within 2 %
 * (steps of the new server's wall clock during the wait shorten it: run NTP
 * slewing, not stepping); (3) a holder stops before its lease ends (the
 * keeper's watcher reports LOST at the safe time; `rowlock run` stops its
 * command and exits 75); (4) the server identities differ (distinct
 * server_id, as replication requires). The old primary's grants are not
 * trusted to have arrived: none is needed.
 *
 * A grant made on a session that was not checked. The db layer reconnects
 * inside a statement (idle check, host list), so a claim can reach a new
 * server without this file seeing it: lock.c compares c->session_gen with
 * the checked one after the grant (rowlock__epoch_grant_valid) and, when it
 * moved, checks the new session; a grant that falls before safe_after or
 * under another identity is released unreported and the acquire starts
 * again (the caller never saw it, so nothing overlapped).
 *
 * Renewals and releases (rowlock__epoch_renew_check, lock.c's
 * rowlock_renew, so the keeper's too, and rowlock_release: a release on the
 * new primary would free nothing of ours, and a release retried against a
 * read-only replica would wait for nothing): a handle remembers the epoch of its grant (l->epoch); a
 * renewal on a session whose server has another identity, or whose row
 * shows another epoch, is refused as ROWLOCK_ENOTOWNER, the lock is LOST:
 * the holder stops before a taker on the new primary can start (the taker
 * waits max_lease). It never renews on the new primary.
 *
 * Not applicable: a Galera node (the cluster rule judges leases by the
 * taker's own clock and has its own token floor; nodes have different
 * identities by design), and a table without `<table>_epoch` (a client that
 * skipped the schema check on an older schema). A wrapped connection that
 * reconnects behind rowlock's back is not seen as a new session.
 */
#include "rowlock_int.h"

#include <stdio.h>
#include <string.h>

#define EPOCH_IDENTITY "CONCAT(@@server_id, '/', @@server_uid)"
/* The token floor's margin over what the new server can see: 2^40. */
#define EPOCH_TOKEN_GAP "1099511627776"
/* The longest sleep between two reads of safe_after. */
#define EPOCH_SLICE_US 1000000

static const char SQL_EPOCH_READ[] =
    "/* rowlock:epoch-read */ SELECT server, " EPOCH_IDENTITY ", epoch, max_lease_ms, "
    "GREATEST(0, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), safe_after)) FROM `{{table}}_epoch` WHERE id = 1";
/* A missing row (deleted by hand): a row no server matches, so the next
 * check takes over and waits, as after a failover. */
static const char SQL_EPOCH_SEED[] =
    "/* rowlock:epoch-seed */ INSERT IGNORE INTO `{{table}}_epoch` (id, server, epoch, safe_after) "
    "VALUES (1, '', 0, UTC_TIMESTAMP(6))";
/* The floor a takeover records: above every token the new server can see
 * and above its clock, by the gap. */
static const char SQL_EPOCH_NEXT_FLOOR[] =
    "/* rowlock:epoch-next-floor */ SELECT GREATEST(e.token_floor, "
    "(SELECT IFNULL(MAX(token), 0) FROM `{{table}}`), (SELECT IFNULL(MAX(token), 0) FROM `{{table}}_hold`), "
    "(SELECT IFNULL(MAX(token), 0) FROM `{{table}}_floor`), "
    "TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))) + " EPOCH_TOKEN_GAP
    " FROM `{{table}}_epoch` e WHERE e.id = 1";
/* SETVAL takes no `?`: the number is the library's own ({{number}}). It
 * never moves a sequence back (NULL then). */
static const char SQL_EPOCH_FLOOR[] = "/* rowlock:epoch-floor */ SELECT SETVAL(`{{table}}_token`, {{number}})";
static const char SQL_EPOCH_TAKE[] =
    "/* rowlock:epoch-take */ UPDATE `{{table}}_epoch` SET epoch = epoch + 1, "
    "safe_after = UTC_TIMESTAMP(6) + INTERVAL (max_lease_ms * 1020 + 100000) MICROSECOND, "
    "token_floor = GREATEST(token_floor, ?), server = " EPOCH_IDENTITY " WHERE id = 1 AND server <> " EPOCH_IDENTITY;

typedef struct {
    int found;                /* the row exists */
    int same;                 /* its identity is this server's */
    uint64_t epoch;
    int64_t max_lease_ms;
    int64_t wait_us;          /* until safe_after, by the server's clock (0: passed) */
    char server[130], current[130];
} epoch_row;

/* One read. 0 with *applicable = 0 on a Galera node or without the table. */
static int epoch_read(rowlock_client *c, epoch_row *r, int *applicable)
{
    memset(r, 0, sizeof *r);
    *applicable = 1;
    int galera = 0;
    int rc = rowlock__galera_node(c, &galera);
    if (rc)
        return rc;
    if (galera) {
        *applicable = 0;
        return 0;
    }
    rowlock__col col[5] = { { .type = ROWLOCK__T_STR, .buf = r->server, .cap = sizeof r->server },
                            { .type = ROWLOCK__T_STR, .buf = r->current, .cap = sizeof r->current },
                            { .type = ROWLOCK__T_U64 },
                            { .type = ROWLOCK__T_I64 },
                            { .type = ROWLOCK__T_I64 } };
    rowlock__res res;
    rowlock__errsave keep;
    rowlock__error_save(c, &keep);
    rc = rowlock__db_run(c, RL_STMT(.what = "failover check", .tmpl = SQL_EPOCH_READ, .cols = col, .ncols = 5,
                                    .res = &res));
    if (rc == ROWLOCK_ESCHEMA && c->db_errno == 1146 /* no such table: an older schema */) {
        rowlock__error_restore(c, &keep);
        *applicable = 0;
        return 0;
    }
    if (rc)
        return rc;
    if (res.rows == 0)
        return 0;
    r->found = 1;
    r->same = strcmp(r->server, r->current) == 0;
    r->epoch = col[2].u;
    r->max_lease_ms = col[3].i;
    r->wait_us = col[4].is_null ? 0 : col[4].i;
    return 0;
}

/* The first client to find another server's identity takes over (see the
 * essay): the sequence first, then the row. */
static int epoch_take_over(rowlock_client *c, const epoch_row *r)
{
    int rc;
    if (!r->found &&
        (rc = rowlock__db_run(c, RL_STMT(.what = "failover check: recreate the epoch row", .tmpl = SQL_EPOCH_SEED))))
        return rc;
    rowlock__col fl = { .type = ROWLOCK__T_U64 };
    rowlock__res res;
    if ((rc = rowlock__db_run(c, RL_STMT(.what = "failover takeover: token floor", .tmpl = SQL_EPOCH_NEXT_FLOOR,
                                         .cols = &fl, .ncols = 1, .res = &res))))
        return rc;
    if (res.rows == 0 || fl.is_null || fl.u > (uint64_t)INT64_MAX / 2)
        return rowlock__fail(c, ROWLOCK_EDB, "failover takeover of `%s`: no token floor could be computed (%s)",
                             c->table, res.rows == 0 ? "the epoch row is missing" : "out of range");
    rowlock__col ign = { .type = ROWLOCK__T_I64 };
    if ((rc = rowlock__db_run(c, RL_STMT(.what = "failover takeover: raise the token sequence",
                                         .tmpl = SQL_EPOCH_FLOOR, .variant = (long)fl.u, .cols = &ign, .ncols = 1))))
        return rc;
    rowlock__param p = RL_U64(fl.u);
    if ((rc = rowlock__db_run(c, RL_STMT(.what = "failover takeover", .tmpl = SQL_EPOCH_TAKE, .params = &p,
                                         .nparams = 1, .res = &res))))
        return rc;
    if (res.affected == 1)
        ROWLOCK__LOG_CLIENT(c, ROWLOCK_LOG_WARN, WAIT_RETRY, RL_EVX(.db_errno = 0),
                            "lock table `%s`: granted by server %s until now, this is %s: the server failed over; "
                            "new epoch, tokens from %llu, grants wait one max lease (%lld ms)",
                            c->table, r->found ? r->server : "(unknown)", r->current,
                            (unsigned long long)fl.u, (long long)r->max_lease_ms);
    return 0;
}

static int lease_over(rowlock_lock *l, const char *what, int64_t lease_ms)
{
    rowlock_client *c = l->client;
    if (c->epoch_state != 1 || c->max_lease_ms <= 0 || lease_ms <= c->max_lease_ms)
        return 0;
    return rowlock__fail(c, ROWLOCK_EINVALID,
                         "%s %s (%s): lease %lld ms is over the longest lease of table `%s` (%lld ms, "
                         "`%s_epoch`.max_lease_ms: how long a failover makes grants wait)",
                         what, l->shown, l->ops->name, (long long)lease_ms, c->table, (long long)c->max_lease_ms,
                         c->table);
}

int rowlock__epoch_grant_check(rowlock_lock *l, int64_t wait_ms, int64_t start_us, int64_t lease_ms)
{
    rowlock_client *c = l->client;
    if (c->epoch_state != 0 && c->epoch_gen == c->session_gen)
        return c->epoch_state == 2 ? 0 : lease_over(l, "acquire", lease_ms);
    c->epoch_state = 0;
    unsigned takeovers = 0;
    for (unsigned slices = 0;; slices++) {
        epoch_row r;
        int applicable;
        int rc = epoch_read(c, &r, &applicable);
        if (rc)
            return rc;
        uint64_t gen = c->session_gen; /* the session the read ran on */
        if (!applicable) {
            c->epoch_state = 2;
            c->epoch_gen = gen;
            return 0;
        }
        if (!r.found || !r.same) {
            if (++takeovers > 3) /* the UPDATE does not stick (a trigger, a filter): never loop */
                return rowlock__fail(c, ROWLOCK_EDB,
                                     "acquire %s (%s): the failover takeover of `%s_epoch` did not take effect "
                                     "(server %s, this is %s)",
                                     l->shown, l->ops->name, c->table, r.server, r.current);
            if ((rc = epoch_take_over(c, &r)))
                return rc;
            continue; /* read again: the winner's safe_after */
        }
        if (r.wait_us <= 0) {
            c->epoch_state = 1;
            c->epoch_gen = gen;
            c->epoch = r.epoch;
            c->max_lease_ms = r.max_lease_ms;
            return lease_over(l, "acquire", lease_ms);
        }
        int64_t left_us = wait_ms == ROWLOCK_WAIT_FOREVER ? INT64_MAX : wait_ms * 1000 - (rowlock__now_us() - start_us);
        if (left_us <= 0)
            return rowlock__fail(c, ROWLOCK_EBUSY,
                                 "acquire %s (%s): the server failed over (lock table `%s`, epoch %llu): grants "
                                 "resume in %lld ms, when every lease granted before has ended",
                                 l->shown, l->ops->name, c->table, (unsigned long long)r.epoch,
                                 (long long)((r.wait_us + 999) / 1000));
        int64_t pause = r.wait_us < EPOCH_SLICE_US ? r.wait_us : EPOCH_SLICE_US;
        if (pause > left_us)
            pause = left_us;
        if (slices == 0)
            ROWLOCK__LOG_LOCK(l, ROWLOCK_LOG_INFO, WAIT_RETRY, RL_EVX(.waited_us = r.wait_us),
                              "%s (%s): the server failed over (epoch %llu): grants resume in %.3f s", l->shown,
                              l->ops->name, (unsigned long long)r.epoch, (double)r.wait_us / 1e6);
        rowlock__sleep_us(pause);
    }
}

int rowlock__epoch_grant_valid(rowlock_lock *l)
{
    rowlock_client *c = l->client;
    if (c->epoch_state != 0 && c->epoch_gen == c->session_gen)
        return 1;
    /* The grant went to a session nobody checked: it stands if that session's
     * server is the checked one's, in the same epoch, past safe_after. */
    epoch_row r;
    int applicable;
    rowlock__errsave keep;
    rowlock__error_save(c, &keep);
    int rc = epoch_read(c, &r, &applicable);
    rowlock__error_restore(c, &keep);
    if (rc)
        return 0;
    if (!applicable) {
        c->epoch_state = 2;
        c->epoch_gen = c->session_gen;
        return 1;
    }
    if (!r.found || !r.same || r.wait_us > 0)
        return 0;
    c->epoch_state = 1;
    c->epoch_gen = c->session_gen;
    c->epoch = r.epoch;
    c->max_lease_ms = r.max_lease_ms;
    return 1;
}

int rowlock__epoch_renew_check(rowlock_lock *l, const char *what, int64_t lease_ms)
{
    rowlock_client *c = l->client;
    if (c->epoch_state == 0 || c->epoch_gen != c->session_gen) {
        epoch_row r;
        int applicable;
        int rc = epoch_read(c, &r, &applicable);
        if (rc)
            return rc;
        c->epoch_gen = c->session_gen;
        if (!applicable) {
            c->epoch_state = 2;
        } else if (!r.found || !r.same) {
            c->epoch_state = 0; /* a grant here must take over first */
            return rowlock__fail(c, ROWLOCK_ENOTOWNER,
                                 "%s %s (%s): the server failed over (lock table `%s` was granted by server %s, "
                                 "this is %s): the lock is lost",
                                 what, l->shown, l->ops->name, c->table, r.found ? r.server : "(unknown)", r.current);
        } else {
            c->epoch_state = 1;
            c->epoch = r.epoch;
            c->max_lease_ms = r.max_lease_ms;
        }
    }
    if (c->epoch_state == 1 && l->epoch != c->epoch)
        return rowlock__fail(c, ROWLOCK_ENOTOWNER,
                             "%s %s (%s): the server failed over since the grant (lock table `%s`, epoch %llu, "
                             "the grant's %llu): the lock is lost",
                             what, l->shown, l->ops->name, c->table, (unsigned long long)c->epoch,
                             (unsigned long long)l->epoch);
    return lease_over(l, what, lease_ms);
}

uint64_t rowlock__epoch_of_grant(const rowlock_client *c)
{
    return c->epoch_state == 1 ? c->epoch : 0;
}

void rowlock__epoch_session_ended(rowlock_client *c)
{
    c->epoch_state = 0;
}
