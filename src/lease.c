/*
 * The lease protocol shared by the lease strategies (insert, optimistic):
 * the wake-up hint, the waiter queue and the wait loop built on them, and
 * the release and renew of a lease row. The strategies call down into it;
 * it calls down into row.c and the db layer (db.h), never back up, and reaches the
 * connection's lease rule (lease_rule.h: one server or a Galera cluster)
 * through the rule's table only: which attempt claims, whether the waiter
 * queue's hand-off applies, how long a hint slice lasts, which statements
 * renew and adopt.
 */
#include "rowlock_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Wake-up hints for the lease strategies (insert, optimistic).
 *
 * A waiter must learn of a release without hammering the server. Each holder
 * of a lease lock also holds a server-side named lock, GET_LOCK(hint), where
 * hint is derived from the table and lock name. A waiting acquirer queues in
 * GET_LOCK(hint, up to 1 s) and then tries the row; the holder's release
 * frees the hint inside its release statement, after it has locked the row,
 * so the server wakes the first queued waiter, whose claim waits on the row
 * lock only until the release commits and then takes the row at once. The
 * waiter keeps the hint as the new holder.
 *
 * Round trips: none of their own on the fast path. The claim statement takes
 * the hint itself (ROWLOCK__HINT_TRY) and the release statement frees it
 * (ROWLOCK__HINT_FREE), so an uncontended cycle is one statement each way,
 * like a bare INSERT + DELETE. A claim of a free row is "gated": it is granted
 * only if this session holds or gets the hint, so a newcomer cannot overtake
 * the waiter the server just woke (no barging; hand-off stays FIFO).
 *
 * The row stays the only truth: a hint can be missing (a crashed holder's
 * session is gone; GET_LOCK is node-local on Galera), held by a session whose
 * lease ended or whose row an administrator released, or shared by two names
 * (a 64-bit hash). So the gate is dropped when a waiter's slice in the hint
 * queue runs out and for the second try of a try-once that found the row
 * free; the head of the queue polls the row with capped backoff while the
 * row's holder keeps no hint. Slices: 1 s, but the queue's head, whose wait
 * statement also reads the row, waits again without a claim when a slice
 * ends with the row held (not by us) by the server's clock, in a slice up
 * to that lease's end and up to a quarter of the time the row has had
 * this grant (its token): a live holder that keeps its hint and renews
 * costs the head one statement per slice of up to 30 s, while a holder
 * that got the row without the hint (its predecessor, paused past its
 * lease, kept it) and so frees none at its release is noticed within a
 * quarter of its hold, as is an administrator's release.
 *
 * GET_LOCK nests in MariaDB (a session that takes a lock twice must free it
 * twice), so every take is guarded by IS_USED_LOCK(hint) = CONNECTION_ID():
 * a session holds a hint at most once, and one RELEASE_LOCK frees it.
 * l->hint_held therefore means "may hold": a stray RELEASE_LOCK of a hint
 * this session does not hold is a no-op.
 *
 * Hand-off through the waiter queue (schema 0002). With the hint alone a
 * hand-off is two durable commits in series: the release's, then the woken
 * waiter's claim, whose log flush cannot start before the release's ends.
 * So the release statement itself names the next holder when there is one:
 *
 *   - a waiter writes its row in <table>_queue (MEMORY: no log flush): its
 *     CONNECTION_ID(), the name, its owner and lease; then queues on a second
 *     named lock, the queue head (qname), in slices of up to 30 s
 *     (rowlock__queue_slice_s). The server grants it in FIFO order, so
 *     exactly one waiter is the head.
 *   - the head waits on the hint. The holder's release statement, if the
 *     holder still holds the hint, looks up the row of the session that
 *     holds the queue head (IS_USED_LOCK) for the same name, and if there is
 *     one it writes that owner, a new token and the waiter's lease into the
 *     lock row instead of clearing it. One durable commit moves the lock.
 *   - the release keeps the hint through its commit and lets it go only
 *     after the server reported the commit (one more round trip), so the
 *     head wakes only once the hand-off is durable. It then reads the row:
 *     ours (owner, live lease) means granted, and the same statement lets
 *     the queue head go, so the next waiter becomes head at once and is
 *     registered before the new holder releases.
 *
 * Anything else falls back to the hint protocol above: no head or no queue
 * row (the release clears the row and frees the hint in its statement), a
 * holder without the hint, a full queue table, another Galera node. A head
 * that leaves the queue for any reason other than that read (deadline,
 * error) lets the head lock go first and then tries the row once more with
 * ROWLOCK__TRY_HANDED: a release may have named it just before, and the
 * claim's own write makes that grant durable before it is reported. Queue
 * rows of ended sessions are inert (their head lock is gone).
 */
/* 2: this session already held it, 1: got it, 0: timed out. Params: name,
 * name, wait seconds. */
#define LOCK_WAIT_EXPR "IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 2, GET_LOCK(?, ?))"
static const char SQL_HINT_WAIT[] = "/* rowlock:hint-wait */ SELECT " LOCK_WAIT_EXPR;
static const char SQL_HINT_DROP[] = "/* rowlock:hint-drop */ SELECT RELEASE_LOCK(?)";

/* The waiter queue row this session wrote (per client): valid while
 * queue_conn is the session's id. */
typedef struct lease_client {
    int queue_row;
    unsigned long queue_conn;
    int64_t queue_lease_ms;
    int queue_strategy;
    char queue_name[ROWLOCK_NAME_MAX + 1];
} lease_client;

static lease_client *lease_client_of(rowlock_client *c)
{
    if (c->lease == NULL)
        c->lease = calloc(1, sizeof(lease_client));
    return c->lease;
}

static void hint_name(rowlock_lock *l)
{
    rowlock__lease_lock *L = ROWLOCK__LEASE(l);
    /* FNV-1a over table NUL name NUL */
    uint64_t h = rowlock__fnv1a(ROWLOCK__FNV1A_START, l->client->table, strlen(l->client->table) + 1);
    h = rowlock__fnv1a(h, l->name, l->name_len + 1);
    snprintf(L->hint, sizeof L->hint, "rowlock.%016llx", (unsigned long long)h);
    L->hint_len = strlen(L->hint);
    snprintf(L->qname, sizeof L->qname, "%s.q", L->hint);
    L->qname_len = strlen(L->qname);
}

/* Params: name, owner, lease µs, strategy. */
static const char SQL_QUEUE_JOIN[] = "/* rowlock:queue-join */ REPLACE INTO `{{table}}_queue` (conn, name, owner, lease_us, strategy) "
                                     "VALUES (CONNECTION_ID(), ?, ?, ?, ?)";
static const char SQL_QUEUE_FORGET[] = "/* rowlock:queue-forget */ DELETE FROM `{{table}}_queue` WHERE conn = CONNECTION_ID()";
/*
 * The head's wait: GET_LOCK(hint) as SQL_HINT_WAIT, and once it returns 1,
 * in the same statement, the lock row: was the lock handed to us? If so the
 * queue head is let go by the same statement. The GET_LOCK sits in a
 * derived table, which the server evaluates before it reads the lock row
 * (and before the statement's read view exists), so the row is read after
 * the wake-up, as committed by the release that woke us. When the wait
 * timed out, the same read says whether the row is free by the server's
 * clock (or ours: a hand-off whose hint the releaser had not yet let go)
 * and how long its lease has left, both as of the statement's start
 * (UTC_TIMESTAMP is the statement's time): a head whose holder is alive
 * waits again without a claim (wait_loop). Params: owner, strategy, qname,
 * owner, then hint, hint, wait seconds (LOCK_WAIT_EXPR), name. Columns: the
 * wait's result, the row's token, handed (1/0), the row free or ours (1/0;
 * no row: 1), its lease left in ms.
 */
static const char SQL_HEAD_WAIT[] =
    "/* rowlock:head-wait */ SELECT w.g, t.token,"
    " IF(w.g = 1 AND t.owner = ? AND t.count > 0 AND t.expires_at > UTC_TIMESTAMP(6) AND t.strategy = ?,"
    " 1 + 0 * IFNULL(RELEASE_LOCK(?), 0), 0),"
    " IFNULL(t.owner IS NULL OR t.owner = ? OR t.expires_at <= UTC_TIMESTAMP(6), 1),"
    " IFNULL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), t.expires_at) DIV 1000, 0) "
    "FROM (SELECT " LOCK_WAIT_EXPR " AS g) AS w "
    "LEFT JOIN `{{table}}` t ON t.name = ?";

/*
 * A waiter behind the head: GET_LOCK(qname) as SQL_HINT_WAIT, and when the
 * wait timed out, in the same statement, whether the lock row is free by
 * the server's clock (no row, released, or its lease ended): only then is
 * a claim worth a statement (a head stuck in a paused process). So an idle
 * waiter costs one statement per slice. Params: qname, qname, wait
 * seconds, name. Columns: the wait's result, the row free (1/0; NULL after
 * a wait that did not time out).
 */
static const char SQL_QUEUE_WAIT[] =
    "/* rowlock:queue-wait */ SELECT w.g, IF(w.g = 0, IFNULL(t.owner IS NULL OR t.expires_at <= UTC_TIMESTAMP(6), 1), NULL) "
    "FROM (SELECT " LOCK_WAIT_EXPR " AS g) AS w "
    "LEFT JOIN `{{table}}` t ON t.name = ? AND w.g = 0";

/* SQL_QUEUE_WAIT: 1 or 2 we head the queue now, 0 the slice passed and the
 * row is held (wait again), 3 the slice passed and the row looks free (try
 * it), -1 an error. */
static int queue_wait(rowlock_lock *l, double wait_s)
{
    rowlock__lease_lock *L = ROWLOCK__LEASE(l);
    rowlock__param p[4] = { RL_STR(L->qname, L->qname_len), RL_STR(L->qname, L->qname_len),
                            { ROWLOCK__T_DBL, NULL, 0, 0, 0, wait_s }, RL_STR(l->name, l->name_len) };
    rowlock__col cols[2] = { { .type = ROWLOCK__T_I64 }, { .type = ROWLOCK__T_I64 } };
    int rc = rowlock__db_run_quiet(l->client, RL_STMT(.what = "queue wait", .tmpl = SQL_QUEUE_WAIT, .params = p,
                                                      .nparams = 4, .cols = cols, .ncols = 2, .wait_s = wait_s));
    if (rc || cols[0].is_null)
        return -1;
    if (cols[0].i != 0)
        return (int)cols[0].i;
    return !cols[1].is_null && cols[1].i ? 3 : 0;
}

/* The hint and queue statements never fail the lock operation: an error
 * is reported to the caller as "not done" and the client keeps the message
 * of the operation it is part of (rowlock__db_run_quiet). */

/* Returns SQL_HINT_WAIT's result (2, 1 or 0), or RELEASE_LOCK's, or -1 on
 * error. */
static int named_call(rowlock_lock *l, const char *sql, const char *name, size_t len, double wait_s)
{
    rowlock__param p[3] = { RL_STR(name, len), RL_STR(name, len), { ROWLOCK__T_DBL, NULL, 0, 0, 0, wait_s } };
    rowlock__col col = { .type = ROWLOCK__T_I64 };
    int rc = rowlock__db_run_quiet(l->client, RL_STMT(.what = "hint", .tmpl = sql, .params = p,
                                                      .nparams = sql == SQL_HINT_WAIT ? 3 : 1, .cols = &col,
                                                      .ncols = 1));
    if (rc || col.is_null)
        return -1;
    return (int)col.i;
}

static int hint_call(rowlock_lock *l, const char *sql, double wait_s)
{
    return named_call(l, sql, ROWLOCK__LEASE(l)->hint, ROWLOCK__LEASE(l)->hint_len, wait_s);
}

/* Register as a waiter (0) or not (-1: e.g. the MEMORY table is full). The
 * row is written only when it would change: a session waiting again for
 * the same name and lease is registered already. */
static int queue_join(rowlock_lock *l, int64_t lease_ms)
{
    rowlock_client *c = l->client;
    lease_client *q = lease_client_of(c);
    if (q == NULL)
        return -1; /* out of memory: wait on the hint alone */
    const rowlock__lease_rule *rule = ROWLOCK__LEASE(l)->rule;
    if (rule && !(rule->flags & ROWLOCK__RULE_QUEUE))
        return -1; /* a cluster: the queue is node-local and its hand-off
                      writes no gen/lease_us (lease_cluster.c) */
    unsigned long conn = rowlock__db_thread_id(c);
    if (q->queue_conn != 0 && q->queue_conn == conn && q->queue_lease_ms == lease_ms &&
        q->queue_strategy == (int)l->ops->id && strcmp(q->queue_name, l->name) == 0)
        return 0;
    rowlock__param p[4] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len), RL_I64(lease_ms * 1000),
                            RL_I64(l->ops->id) };
    q->queue_conn = 0;
    q->queue_row = 1;
    if (rowlock__db_run_quiet(c, RL_STMT(.what = "hint", .tmpl = SQL_QUEUE_JOIN, .params = p, .nparams = 4)))
        return -1;
    q->queue_conn = conn;
    q->queue_lease_ms = lease_ms;
    q->queue_strategy = (int)l->ops->id;
    memcpy(q->queue_name, l->name, l->name_len + 1);
    return 0;
}

/* The head waits on the hint (SQL_HEAD_WAIT). Returns as SQL_HINT_WAIT
 * (2, 1, 0 or -1); *handed is set when the lock was handed to us (l->token
 * set; the queue head was let go). After a wait that timed out (0),
 * *held_ms is the row's lease left now, when it is held by another owner
 * by the server's clock, and *token the row's token; else *held_ms is -1
 * (free, ours, or not known). */
static int head_wait(rowlock_lock *l, double wait_s, int *handed, int64_t *held_ms, uint64_t *token)
{
    rowlock_client *c = l->client;
    rowlock__lease_lock *L = ROWLOCK__LEASE(l);
    rowlock__param p[8] = { RL_STR(c->owner, c->owner_len),  RL_I64(l->ops->id),
                            RL_STR(L->qname, L->qname_len),  RL_STR(c->owner, c->owner_len),
                            RL_STR(L->hint, L->hint_len),    RL_STR(L->hint, L->hint_len),
                            { ROWLOCK__T_DBL, NULL, 0, 0, 0, wait_s }, RL_STR(l->name, l->name_len) };
    rowlock__col cols[5] = { { .type = ROWLOCK__T_I64 },
                             { .type = ROWLOCK__T_U64 },
                             { .type = ROWLOCK__T_I64 },
                             { .type = ROWLOCK__T_I64 },
                             { .type = ROWLOCK__T_I64 } };
    *handed = 0;
    *held_ms = -1;
    const int64_t sent = rowlock__now_us();
    if (rowlock__db_run_quiet(c, RL_STMT(.what = "hint", .tmpl = SQL_HEAD_WAIT, .params = p, .nparams = 8,
                                         .cols = cols, .ncols = 5, .wait_s = wait_s)) ||
        cols[0].is_null)
        return -1;
    if (cols[0].i == 1 && !cols[2].is_null && cols[2].i == 1) {
        l->token = cols[1].u;
        *handed = 1;
    }
    if (cols[0].i == 0 && !cols[3].is_null && cols[3].i == 0 && !cols[4].is_null && !cols[1].is_null) {
        /* read as of the statement's start: take off the slice since */
        int64_t left = cols[4].i - (rowlock__now_us() - sent) / 1000;
        if (left > 0) {
            *held_ms = left;
            *token = cols[1].u;
        }
    }
    return (int)cols[0].i;
}

/* Delete this session's row of the waiter queue, and the client's state. */
void rowlock__lease_client_free(rowlock_client *c, void *state)
{
    (void)state;
    lease_client *q = c->lease;
    if (q == NULL)
        return;
    if (q->queue_row && c->connected)
        (void)rowlock__db_run(c, RL_STMT(.what = "queue", .tmpl = SQL_QUEUE_FORGET));
    free(q);
    c->lease = NULL;
}

static void hint_drop(rowlock_lock *l)
{
    if (ROWLOCK__LEASE(l)->hint_held) {
        (void)hint_call(l, SQL_HINT_DROP, 0);
        ROWLOCK__LEASE(l)->hint_held = 0;
    }
}

int rowlock__lease_client_holds(const rowlock_lock *l)
{
    for (const rowlock_lock *h = l->client->locks; h; h = h->next)
        if (h->ops == l->ops && h->held > 0 && !h->lost && h->name_len == l->name_len &&
            memcmp(h->name, l->name, l->name_len) == 0)
            return 1;
    return 0;
}

int rowlock__lease_lock_init(rowlock_lock *l)
{
    hint_name(l);
    return 0;
}

void rowlock__lease_lock_free(rowlock_lock *l)
{
    if (l->client->connected)
        hint_drop(l);
}

void rowlock__hint_take(rowlock_lock *l)
{
    ROWLOCK__LEASE(l)->hint_held = 1;
    (void)hint_call(l, SQL_HINT_WAIT, 0);
}

void rowlock__hint_release(rowlock_lock *l)
{
    (void)hint_call(l, SQL_HINT_DROP, 0);
    ROWLOCK__LEASE(l)->hint_held = 0;
}

/* A wait that ends busy: the message of the first loss, or, when that loss
 * was not read (the handle knew the name's strategy), a read now. */
static int busy_result(rowlock_lock *l, int explained, const char *why)
{
    if (!explained)
        return rowlock__explain_busy_row(l, NULL);
    memcpy(l->client->errmsg, why, ROWLOCK__ERRMSG_MAX);
    return ROWLOCK_EBUSY;
}

/* Slice of a wait: at most 1 s, at least 0, in seconds. */
static double slice_s(int64_t deadline)
{
    int64_t left = deadline - rowlock__now_us();
    if (left > 1000000)
        left = 1000000;
    return left > 0 ? (double)left / 1e6 : 0;
}

/* A waiter behind the queue's head waits on the head lock (the server
 * grants it in FIFO order when the head leaves) in slices this long, one
 * statement each (SQL_QUEUE_WAIT); the head alone looks at the row, in
 * slices of 1 s or more (wait_loop). After a slice it tries the row ungated only if the row looks
 * free (a head stuck in a paused process delays those behind it by at most
 * this much: a hand-off to such a head costs a lease anyway). On a
 * connection rowlock opened (c->nonblock) the statement runs with its
 * slice as its wait (rowlock__stmt.wait_s): the read timeout counts from
 * the slice's end. Otherwise (an application's wrapped connection, a
 * client library without the non-blocking API) not longer than the read
 * timeout allows (a wait the client library cut would cost a reconnect). */
#define QUEUE_SLICE_MAX_S 30.0

double rowlock__queue_slice_s(const rowlock_client *c, int64_t deadline)
{
    double cap = QUEUE_SLICE_MAX_S;
    if (c->read_timeout_ms > 0 && !c->nonblock) {
        /* the client library rounds the read timeout up to whole seconds */
        double rt = (double)((c->read_timeout_ms + 999) / 1000) - 1.0;
        if (rt < cap)
            cap = rt < 1.0 ? 1.0 : rt;
    }
    int64_t left = deadline - rowlock__now_us();
    if ((double)left / 1e6 > cap)
        return cap;
    return left > 0 ? (double)left / 1e6 : 0;
}

typedef int (*attempt_fn)(rowlock_lock *l, int64_t lease_ms, int64_t remaining_ms, unsigned flags);

/* One attempt under the connection's lease rule: the rule's own attempt
 * when it has one (the cluster rule), else the strategy's. A rule that
 * created a row leaves the wake-up hint to take here (hint_owed). */
static int rule_attempt(rowlock_lock *l, attempt_fn strategy_attempt, int64_t lease_ms, int64_t remaining_ms,
                        unsigned flags)
{
    rowlock__lease_lock *L = ROWLOCK__LEASE(l);
    const rowlock__lease_rule *rule;
    int rc = rowlock__lease_rule_get(l->client, &rule);
    if (rc)
        return rc;
    L->rule = rule;
    if (rule->attempt == NULL)
        return strategy_attempt(l, lease_ms, remaining_ms, flags);
    L->hint_owed = 0;
    rc = rule->attempt(l, lease_ms, remaining_ms, flags);
    if (L->hint_owed) {
        L->hint_owed = 0;
        rowlock__hint_take(l);
    }
    return rc;
}

static int wait_loop(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms, attempt_fn attempt)
{
    rowlock__lease_lock *L = ROWLOCK__LEASE(l);
    const int64_t start = rowlock__now_us();
    /* Waits beyond a year are "forever" (and cannot overflow). */
    const int64_t deadline =
        wait_ms == ROWLOCK_WAIT_FOREVER || wait_ms > ROWLOCK_LEASE_MAX_MS ? INT64_MAX : start + wait_ms * 1000;
    int explained = 0, free_row = 0;
    int joined = 0, head = 0; /* in the waiter queue; holding its head lock */
    int64_t held_ms = -1;     /* the head's last slice: the row held, its lease left */
    uint64_t held_token = 0, seen_token = 0; /* ... its token; the token first seen held, since: */
    int64_t seen_since = 0;
    unsigned flags = 0;
    char why[ROWLOCK__ERRMSG_MAX] = "";
    unsigned polls = 0;
    int rc;
    /* Our last release handed the lock to a waiter, so it is held: a claim
     * now would only fail, and while it ran it would hold the row lock the
     * new holder's release needs. A waiting acquire queues at once (a try-
     * once still tries). If the lock is free by the time we head the queue,
     * the hint is free too and the claim after it takes the row. */
    int skip_claim = L->handed_over && wait_ms != 0;
    L->handed_over = 0;
    L->queued = 0;
    for (;;) {
        if (wait_ms != 0 && rowlock__interrupted(l->client)) {
            /* rowlock_client_interrupt(): give up the wait (lock.c says so) */
            rc = rowlock__fail(l->client, ROWLOCK_EBUSY, "acquire %s (%s): interrupted", l->shown, l->ops->name);
            break;
        }
        int64_t now = rowlock__now_us();
        int64_t remaining_ms = deadline == INT64_MAX ? -1 : (deadline - now) / 1000;
        if (skip_claim) {
            skip_claim = 0;
            rc = ROWLOCK_EBUSY;
        } else {
            L->hint_held = 1; /* the claim statement may take it */
            l->attempts++;
            rc = rule_attempt(l, attempt, lease_ms, remaining_ms < 0 && deadline != INT64_MAX ? 0 : remaining_ms,
                              flags);
        }
        if (rc != ROWLOCK_EBUSY || l->found_multi)
            break;
        L->contended = 1; /* others want it too: our release may hand it over */
        if (!explained && (wait_ms == 0 || !L->strategy_seen)) {
            /* First loss: one read to tell "busy" from "wrong strategy"
             * (which waiting cannot fix; a row's strategy only changes after
             * a purge) and to name the holder in the final message. A
             * handle that saw its strategy's row before skips it when it
             * waits, and reads at the deadline instead. */
            rc = rowlock__explain_busy_row(l, &free_row);
            if (rc != ROWLOCK_EBUSY || l->found_multi)
                return rc;
            memcpy(why, l->client->errmsg, sizeof why);
            explained = 1;
            L->strategy_seen = 1;
            if (wait_ms == 0 && free_row && !(flags & ROWLOCK__TRY_UNGATED)) {
                /* A try-once lost to the gate on a free row: the hint may be
                 * held by a session that holds no row (its lease ended or
                 * an administrator released it). Try once more, ungated. */
                flags |= ROWLOCK__TRY_UNGATED;
                continue;
            }
        }
        if (wait_ms != 0 && !l->waited) {
            l->waited = 1; /* once per acquire */
            ROWLOCK__LOG_LOCK(l, ROWLOCK_LOG_DEBUG, WAITING, RL_EVX(.attempt = l->attempts), "%s (%s): held, waiting%s%s",
                              l->shown, l->ops->name, explained ? ": " : "", explained ? why : "");
        }
        if (rowlock__now_us() >= deadline) {
            if (!(flags & ROWLOCK__TRY_HANDED))
                return busy_result(l, explained, why);
            break; /* leave the queue (below) */
        }
        if (!joined) {
            joined = queue_join(l, lease_ms) == 0 ? 1 : -1;
            L->queued = joined == 1;
        }
        if (joined == 1 && !head) {
            /* Queue for the head lock: the server grants it in FIFO order. */
            int q = queue_wait(l, rowlock__queue_slice_s(l->client, deadline));
            if (q == 0) {
                if (rowlock__now_us() >= deadline)
                    continue; /* the deadline check above ends the wait */
                skip_claim = 1; /* a whole slice passed, the row is held: wait again */
                continue;
            }
            if (q == 3) {
                flags |= ROWLOCK__TRY_UNGATED; /* the row looks free: try it */
                continue;
            }
            if (q < 0) {
                joined = -1; /* the queue failed: wait on the hint alone */
            } else {
                head = 1;
                flags |= ROWLOCK__TRY_HANDED;
            }
        }
        /* Wait on the hint (the queue's head, or every waiter when the queue
         * failed): the holder lets it go at its release, and a newcomer
         * cannot overtake (its claim is gated on the hint). A slice of at
         * most 1 s, then the row is tried without the gate: a hint can be
         * held by a session whose lease already ended. The head, once a
         * slice showed the row held by another owner, waits without a
         * claim in slices up to that lease's end and up to a quarter of
         * the time it has seen that grant (at least 1 s; within
         * rowlock__queue_slice_s): see "Slices" above. */
        int handed = 0;
        double slice = slice_s(deadline);
        if (head && held_ms > 0) {
            if (held_token != seen_token) {
                seen_token = held_token;
                seen_since = rowlock__now_us();
            }
            /* a quarter of this grant's time, at least 1 s, up to its lease's end */
            const double cap = rowlock__quarter_slice_s(rowlock__now_us() - seen_since, 1.0,
                                                        (double)held_ms / 1e3 + 0.001);
            slice = rowlock__queue_slice_s(l->client, deadline);
            if (slice > cap)
                slice = cap;
        }
        if (L->rule && L->rule->slice_max_s > 0 && slice > L->rule->slice_max_s)
            slice = L->rule->slice_max_s; /* the hint is node-local: look at the row often */
        int h = head ? head_wait(l, slice, &handed, &held_ms, &held_token) : hint_call(l, SQL_HINT_WAIT, slice);
        if (handed) {
            ROWLOCK__LOG_LOCK(l, ROWLOCK_LOG_INFO, HANDED_OVER, RL_EVX(.attempt = l->attempts),
                              "%s (%s): handed over by its releaser, token %llu", l->shown, l->ops->name,
                              (unsigned long long)l->token);
            return 0; /* the statement let the head lock go; we hold the hint */
        }
        if (h == 1) {
            if (head && l->client->lease)
                ((lease_client *)l->client->lease)->queue_conn = 0; /* not handed: write our queue
                                                                       row again next time */
            flags &= ~ROWLOCK__TRY_UNGATED; /* the hint is ours: the row is free now */
            continue;
        }
        flags |= ROWLOCK__TRY_UNGATED;
        if (h == 0 && head && held_ms > 0) {
            skip_claim = 1; /* the head's slice passed, the row is held (renewed): wait again */
            continue;
        }
        if (h == 0)
            continue; /* a whole slice passed: look at the row again */
        /* First in the queue (we hold the hint) but the row is still taken:
         * its holder has no hint (crashed, paused past its lease, or on
         * another Galera node); or the hint call failed. Poll the row with
         * capped backoff; the others wait on the hint behind us. Now and
         * then read the row: it may have become a multi-holder row, which
         * no claim takes (a holder downgraded to shared, rowlock_downgrade;
         * a shared acquirer converted it as it was released), and a handle
         * that explained its first loss would otherwise poll to its deadline. */
        if (polls % 16 == 0) {
            rowlock__errsave keep;
            rowlock__error_save(l->client, &keep);
            (void)rowlock__explain_busy_row(l, NULL);
            if (l->found_multi) {
                rc = ROWLOCK_EBUSY;
                break;
            }
            rowlock__error_restore(l->client, &keep);
        }
        now = rowlock__now_us();
        int64_t delay = rowlock__backoff_us(polls++, 500, 50000, rowlock__rand32(&l->client->rng));
        if (delay > deadline - now)
            delay = deadline - now; /* one last try exactly at the deadline */
        if (delay > 0)
            rowlock__sleep_us(delay);
    }
    /* Granted, failed or out of time while heading the queue (or after):
     * let the next waiter be head now, so it is registered before this
     * holder releases. */
    if (head)
        (void)named_call(l, SQL_HINT_DROP, L->qname, L->qname_len, 0);
    if (l->found_multi)
        return rc; /* a multi-holder name: no one-row claim can take it */
    if (rc != 0 && (flags & ROWLOCK__TRY_HANDED) && l->client->connected) {
        /* Not granted, but a release may have named us while we headed the
         * queue, just before we let the head go: look once more. The claim
         * waits (up to 1 s) for such a release's row lock, and its own
         * write makes that hand-off durable before we report it. The first
         * attempt's error is restored only when this one tells no more. */
        rowlock__errsave keep;
        rowlock__error_save(l->client, &keep);
        int again = rule_attempt(l, attempt, lease_ms, 1000, flags);
        if (again == 0)
            rc = 0;
        else if (rc == ROWLOCK_EBUSY && again != ROWLOCK_EBUSY)
            rc = again;
        else
            rowlock__error_restore(l->client, &keep);
        if (rc == ROWLOCK_EBUSY)
            return busy_result(l, explained, why);
    }
    if (rc == 0 && (flags & ROWLOCK__TRY_HANDED))
        rowlock__hint_take(l); /* a grant taken as a hand-off took no hint */
    return rc;
}

int rowlock__wait_loop(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms,
                       int (*attempt)(rowlock_lock *l, int64_t lease_ms, int64_t remaining_ms, unsigned flags))
{
    l->found_multi = 0;
    int rc = wait_loop(l, wait_ms, lease_ms, attempt);
    const rowlock__lease_rule *rule = ROWLOCK__LEASE(l)->rule;
    if (rule && rule->wait_end)
        rule->wait_end(l, rc);
    if (rc == 0)
        ROWLOCK__LEASE(l)->strategy_seen = 1; /* a grant proves the row is this strategy's */
    else if (l->held == 0)
        hint_drop(l);
    return rc;
}

/*
 * Params: queue head name, name, strategy, hint, hint, name, owner, token,
 * strategy.
 * Rows changed: 1 released, 0 lost. LAST_INSERT_ID() comes back as the
 * lease (µs) of the waiter the lock was handed to, or 0.
 *
 * The final release (count 1) hands the lock over when this session holds
 * the hint and the session heading the waiter queue has a queue row for
 * this name (above): the row gets that waiter's owner, a new token and its
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
    "/* rowlock:release-handoff */ UPDATE `{{table}}` SET "
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
    "/* rowlock:release */ UPDATE `{{table}}` SET "
    " owner = IF(count > 1, owner, NULL),"
    " expires_at = IF(count > 1, expires_at, UTC_TIMESTAMP(6)),"
    " count = IF(count > 1, count - 1, " ROWLOCK__HINT_FREE ") "
    "WHERE name = ? AND owner = ? AND token = ? AND strategy = ? AND (count > 1 OR IS_FREE_LOCK(?))";

/*
 * Release and renew must not report "busy": a lock wait timeout or deadlock
 * (1205/1213, e.g. against a reaper's DELETE of a neighbouring row) rolled
 * the statement back without effect, so it is simply run again, a few times,
 * then reported as a database error.
 */
int rowlock__lease_exec_retrying(rowlock_lock *l, const char *what, const char *sql, const rowlock__param *p,
                                 unsigned np, rowlock__res *res)
{
    rowlock_client *c = l->client;
    int rc = ROWLOCK_EBUSY;
    for (unsigned attempt = 0; attempt < 8 && rc == ROWLOCK_EBUSY; attempt++) {
        if (attempt) {
            int64_t pause = rowlock__backoff_us(attempt, 1000, 100000, rowlock__rand32(&c->rng));
            ROWLOCK__LOG_LOCK(l, ROWLOCK_LOG_INFO, BUSY_RETRY,
                              RL_EVX(.db_errno = c->db_errno, .waited_us = pause, .attempt = attempt),
                              "%s %s (%s) rolled back (MySQL error %u), retry %u in %.3f s", what, l->shown,
                              l->ops->name, c->db_errno, attempt, (double)pause / 1e6);
            rowlock__sleep_us(pause);
        }
        rc = rowlock__db_run(c, RL_STMT(.what = what, .tmpl = sql, .params = p, .nparams = np, .res = res));
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
static int lease_release(rowlock_lock *l)
{
    rowlock_client *c = l->client;
    rowlock__lease_lock *L = ROWLOCK__LEASE(l);
    rowlock__res res;
    int rc;
    if (!L->contended) {
        rowlock__param pp[6] = { RL_STR(L->hint, L->hint_len), RL_STR(l->name, l->name_len),
                                 RL_STR(c->owner, c->owner_len), RL_U64(l->token),
                                 RL_I64(l->ops->id),           RL_STR(L->qname, L->qname_len) };
        if ((rc = rowlock__lease_exec_retrying(l, "release", LEASE_RELEASE_PLAIN, pp, 6, &res)))
            return rc;
        if (res.affected == 1)
            return 0;
        L->contended = 1; /* a waiter heads the queue, or the lock was lost */
    }
    rowlock__param p[9] = { RL_STR(L->qname, L->qname_len), RL_STR(l->name, l->name_len), RL_I64(l->ops->id),
                            RL_STR(L->hint, L->hint_len),   RL_STR(L->hint, L->hint_len),
                            RL_STR(l->name, l->name_len),   RL_STR(c->owner, c->owner_len),
                            RL_U64(l->token),               RL_I64(l->ops->id) };
    if ((rc = rowlock__lease_exec_retrying(l, "release", LEASE_RELEASE, p, 9, &res)))
        return rc;
    if (res.affected != 1)
        return rowlock__explain_lost(l, "release");
    if (res.insert_id != 0) {
        rowlock__hint_release(l); /* handed over, durably: wake the new holder */
        L->handed_over = 1;
    } else if (l->held == 1)
        L->contended = 0; /* the final release found nobody to hand it to */
    return 0;
}

int rowlock__lease_release(rowlock_lock *l)
{
    unsigned final = l->held == 1;
    int rc = lease_release(l);
    if (rc == 0 && final)
        ROWLOCK__LEASE(l)->hint_held = 0; /* the release statement freed it (or another
                                             handle of this session still holds the row) */
    else if (rc == ROWLOCK_ENOTOWNER)
        hint_drop(l);
    return rc;
}

/* The lease parameters a rule's statement starts with, then `rest`. */
static unsigned rule_params(const rowlock__lease_rule *rule, int64_t lease_ms, const rowlock__param *rest,
                            unsigned nrest, rowlock__param *out)
{
    unsigned n = 0;
    while (n < rule->lease_args)
        out[n++] = RL_I64(lease_ms * 1000);
    for (unsigned i = 0; i < nrest; i++)
        out[n++] = rest[i];
    return n;
}

int rowlock__lease_adopt(rowlock_lock *l, int64_t lease_ms)
{
    rowlock_client *c = l->client;
    const rowlock__lease_rule *rule;
    int rc = rowlock__lease_rule_get(c, &rule);
    if (rc)
        return rc;
    rowlock__param rest[3] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len), RL_I64(l->ops->id) };
    rowlock__param p[5];
    unsigned np = rule_params(rule, lease_ms, rest, 3, p);
    rowlock__res res;
    rc = rowlock__db_run(c, RL_STMT(.what = "acquire", .tmpl = rule->adopt_sql, .params = p, .nparams = np,
                                    .res = &res));
    if (rc == ROWLOCK_EBUSY)
        rc = ROWLOCK_EDB; /* a row lock held a second: undecided, not "none" */
    if (rc)
        return rc;
    if (res.affected != 1)
        return ROWLOCK_EBUSY; /* nothing of ours to adopt */
    l->token = res.insert_id;
    return 0;
}

int rowlock__lease_was_queued(const rowlock_lock *l)
{
    return (l->ops->flags & ROWLOCK__S_LEASE_ROW) && !l->multi && ROWLOCK__LEASE(l)->queued;
}

int rowlock__lease_renew(rowlock_lock *l, int64_t lease_ms)
{
    rowlock_client *c = l->client;
    const rowlock__lease_rule *rule;
    int rc = rowlock__lease_rule_get(c, &rule);
    if (rc)
        return rc;
    rowlock__param rest[4] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len), RL_U64(l->token),
                               RL_I64(l->ops->id) };
    rowlock__param p[6];
    unsigned np = rule_params(rule, lease_ms, rest, 4, p);
    rowlock__res res;
    rc = rowlock__lease_exec_retrying(l, "renew", rule->renew_sql, p, np, &res);
    if (rc)
        return rc;
    if (res.affected == 1)
        return 0;
    rc = rowlock__explain_lost(l, "renew");
    if (rc == ROWLOCK_ENOTOWNER)
        hint_drop(l);
    return rc;
}
