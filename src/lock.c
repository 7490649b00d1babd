/*
 * rowlock_lock: handles, and the thin wrappers through which every strategy
 * is called. The wrappers own argument checks and the handle's bookkeeping
 * (hold count, token, lost flag), so the strategies contain only SQL.
 */
#include "rowlock_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_ROW[] = "SELECT " ROWLOCK__ROW_COLUMNS " FROM `{{table}}` WHERE name = ?";
/* The same under a shared row lock for the statement: waits (variant: lock
 * wait) for a writer of the row to commit, then reads what it committed. */
static const char SQL_ROW_SHARED[] = "SET STATEMENT innodb_lock_wait_timeout={{waits}} FOR "
                                     "SELECT " ROWLOCK__ROW_COLUMNS " FROM `{{table}}` WHERE name = ? LOCK IN SHARE MODE";

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
 * queue (at most 1 s) runs out and for the second try of a try-once that
 * found the row free; the head of the queue polls the row with capped
 * backoff while the row's holder keeps no hint.
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
 *     named lock, the queue head (qname), in 1 s slices. The server grants
 *     it in FIFO order, so exactly one waiter is the head.
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
static const char SQL_HINT_WAIT[] = "SELECT " LOCK_WAIT_EXPR;
static const char SQL_HINT_DROP[] = "SELECT RELEASE_LOCK(?)";

static void hint_name(rowlock_lock *l)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a over table NUL name */
    const char *parts[2] = { l->client->table, l->name };
    for (int k = 0; k < 2; k++) {
        for (const unsigned char *p = (const unsigned char *)parts[k]; *p; p++)
            h = (h ^ *p) * 0x100000001b3ULL;
        h = (h ^ 0) * 0x100000001b3ULL;
    }
    snprintf(l->hint, sizeof l->hint, "rowlock.%016llx", (unsigned long long)h);
    l->hint_len = strlen(l->hint);
    snprintf(l->qname, sizeof l->qname, "%s.q", l->hint);
    l->qname_len = strlen(l->qname);
}

/* Params: name, owner, lease µs, strategy. */
static const char SQL_QUEUE_JOIN[] = "REPLACE INTO `{{table}}_queue` (conn, name, owner, lease_us, strategy) "
                                     "VALUES (CONNECTION_ID(), ?, ?, ?, ?)";
static const char SQL_QUEUE_FORGET[] = "DELETE FROM `{{table}}_queue` WHERE conn = CONNECTION_ID()";
/*
 * The head's wait: GET_LOCK(hint) as SQL_HINT_WAIT, and once it returns 1,
 * in the same statement, the lock row: was the lock handed to us? If so the
 * queue head is let go by the same statement. The GET_LOCK sits in a
 * derived table, which the server evaluates before it reads the lock row
 * (and before the statement's read view exists), so the row is read after
 * the wake-up, as committed by the release that woke us. Params: owner,
 * strategy, qname, then hint, hint, wait seconds (LOCK_WAIT_EXPR), name.
 */
static const char SQL_HEAD_WAIT[] =
    "SELECT w.g, t.token, IF(t.owner = ? AND t.count > 0 AND t.expires_at > UTC_TIMESTAMP(6) AND t.strategy = ?,"
    " 1 + 0 * IFNULL(RELEASE_LOCK(?), 0), 0) "
    "FROM (SELECT " LOCK_WAIT_EXPR " AS g) AS w "
    "LEFT JOIN `{{table}}` t ON t.name = ? AND w.g = 1";

/* The hint and queue statements never fail the lock operation: an error
 * is reported to the caller as "not done" and the client keeps the message
 * of the operation it is part of. */
static int exec_quiet(rowlock_client *c, const char *sql, const rowlock__param *p, unsigned np, rowlock__col *cols,
                      unsigned ncols)
{
    char keep[ROWLOCK__ERRMSG_MAX];
    memcpy(keep, c->errmsg, sizeof keep);
    int rc = rowlock__db_exec(c, "hint", sql, 0, p, np, cols, ncols, NULL, NULL, NULL);
    memcpy(c->errmsg, keep, sizeof keep);
    return rc;
}

/* Returns SQL_HINT_WAIT's result (2, 1 or 0), or RELEASE_LOCK's, or -1 on
 * error. */
static int named_call(rowlock_lock *l, const char *sql, const char *name, size_t len, double wait_s)
{
    rowlock__param p[3] = { RL_STR(name, len), RL_STR(name, len), { ROWLOCK__T_DBL, NULL, 0, 0, 0, wait_s } };
    rowlock__col col = { .type = ROWLOCK__T_I64 };
    int rc = exec_quiet(l->client, sql, p, sql == SQL_HINT_WAIT ? 3 : 1, &col, 1);
    if (rc || col.is_null)
        return -1;
    return (int)col.i;
}

static int hint_call(rowlock_lock *l, const char *sql, double wait_s)
{
    return named_call(l, sql, l->hint, l->hint_len, wait_s);
}

/* Register as a waiter (0) or not (-1: e.g. the MEMORY table is full). The
 * row is written only when it would change: a session waiting again for
 * the same name and lease is registered already. */
static int queue_join(rowlock_lock *l, int64_t lease_ms)
{
    rowlock_client *c = l->client;
    unsigned long conn = rowlock__db_thread_id(c);
    if (c->queue_conn != 0 && c->queue_conn == conn && c->queue_lease_ms == lease_ms &&
        c->queue_strategy == (int)l->ops->id && strcmp(c->queue_name, l->name) == 0)
        return 0;
    rowlock__param p[4] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len), RL_I64(lease_ms * 1000),
                            RL_I64(l->ops->id) };
    c->queue_conn = 0;
    c->queue_row = 1;
    if (exec_quiet(c, SQL_QUEUE_JOIN, p, 4, NULL, 0))
        return -1;
    c->queue_conn = conn;
    c->queue_lease_ms = lease_ms;
    c->queue_strategy = (int)l->ops->id;
    memcpy(c->queue_name, l->name, l->name_len + 1);
    return 0;
}

/* The head waits on the hint (SQL_HEAD_WAIT). Returns as SQL_HINT_WAIT
 * (2, 1, 0 or -1); *handed is set when the lock was handed to us (l->token
 * set; the queue head was let go). */
static int head_wait(rowlock_lock *l, double wait_s, int *handed)
{
    rowlock_client *c = l->client;
    rowlock__param p[7] = { RL_STR(c->owner, c->owner_len),  RL_I64(l->ops->id),
                            RL_STR(l->qname, l->qname_len),  RL_STR(l->hint, l->hint_len),
                            RL_STR(l->hint, l->hint_len),    { ROWLOCK__T_DBL, NULL, 0, 0, 0, wait_s },
                            RL_STR(l->name, l->name_len) };
    rowlock__col cols[3] = { { .type = ROWLOCK__T_I64 }, { .type = ROWLOCK__T_U64 }, { .type = ROWLOCK__T_I64 } };
    *handed = 0;
    if (exec_quiet(c, SQL_HEAD_WAIT, p, 7, cols, 3) || cols[0].is_null)
        return -1;
    if (cols[0].i == 1 && !cols[2].is_null && cols[2].i == 1) {
        l->token = l->version = cols[1].u;
        *handed = 1;
    }
    return (int)cols[0].i;
}

void rowlock__queue_forget(rowlock_client *c)
{
    if (c->queue_row && c->connected)
        (void)rowlock__db_exec(c, "queue", SQL_QUEUE_FORGET, 0, NULL, 0, NULL, 0, NULL, NULL, NULL);
    c->queue_row = 0;
    c->queue_conn = 0;
}

static void hint_drop(rowlock_lock *l)
{
    if (l->hint_held) {
        (void)hint_call(l, SQL_HINT_DROP, 0);
        l->hint_held = 0;
    }
}

void rowlock__hint_take(rowlock_lock *l)
{
    l->hint_held = 1;
    (void)hint_call(l, SQL_HINT_WAIT, 0);
}

void rowlock__hint_release(rowlock_lock *l)
{
    (void)hint_call(l, SQL_HINT_DROP, 0);
    l->hint_held = 0;
}

static const rowlock__strategy_ops *ops_for(rowlock_strategy s)
{
    switch (s) {
    case ROWLOCK_STRATEGY_INSERT: return &rowlock__strategy_insert;
    case ROWLOCK_STRATEGY_FOR_UPDATE: return &rowlock__strategy_for_update;
    case ROWLOCK_STRATEGY_OPTIMISTIC: return &rowlock__strategy_optimistic;
    }
    return NULL;
}

/* The name as shown in messages: quoted, control bytes escaped, so a
 * message stays one readable line whatever the name holds. */
static void quote_name(char *out, size_t cap, const char *name)
{
    out[0] = '\'';
    size_t o = 1 + rowlock_escape(out + 1, cap - 2, name, strlen(name));
    out[o++] = '\'';
    out[o] = '\0';
}

ROWLOCK_EXTERN int rowlock_lock_new(rowlock_lock **out, rowlock_client *c, const char *name,
                                    const rowlock_lock_options *opts)
{
    if (out == NULL || c == NULL)
        return c ? rowlock__fail(c, ROWLOCK_EINVALID, "lock_new: out is NULL") : ROWLOCK_EINVALID;
    *out = NULL;
    rowlock__clear_error(c);
    if (opts && opts->version != ROWLOCK_LOCK_OPTIONS_VERSION)
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "lock_new: rowlock_lock_options.version is %u, this library knows %d", opts->version,
                             ROWLOCK_LOCK_OPTIONS_VERSION);
    rowlock_strategy s = opts && opts->strategy ? opts->strategy : ROWLOCK_STRATEGY_INSERT;
    const rowlock__strategy_ops *ops = ops_for(s);
    if (ops == NULL || ops->version != ROWLOCK__STRATEGY_OPS_VERSION)
        return rowlock__fail(c, ROWLOCK_EINVALID, "lock_new: unknown strategy %d", (int)s);

    if (name == NULL)
        return rowlock__fail(c, ROWLOCK_EINVALID, "lock_new: lock name is NULL");
    size_t n = strlen(name);
    if (n == 0)
        return rowlock__fail(c, ROWLOCK_EINVALID, "lock_new: lock name is empty (names are 1-255 bytes of UTF-8)");
    if (n > ROWLOCK_NAME_MAX)
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "lock_new: lock name is %zu bytes long, the limit is %d (names are never truncated)", n,
                             ROWLOCK_NAME_MAX);
    size_t bad = 0;
    const char *why = rowlock__utf8_check((const unsigned char *)name, n, &bad);
    if (why)
        return rowlock__fail(c, ROWLOCK_EINVALID, "lock_new: lock name is not valid UTF-8: %s at byte %zu", why,
                             bad);

    rowlock_lock *l = calloc(1, sizeof *l);
    if (!l)
        return rowlock__fail(c, ROWLOCK_ENOMEM, "lock_new: out of memory");
    l->client = c;
    l->ops = ops;
    memcpy(l->name, name, n + 1);
    l->name_len = n;
    quote_name(l->shown, sizeof l->shown, name);
    hint_name(l);
    *out = l;
    return 0;
}

ROWLOCK_EXTERN void rowlock_lock_free(rowlock_lock *l)
{
    if (l == NULL)
        return;
    while (l->held > 0 && !l->lost) {
        if (l->ops->release(l) != 0)
            break;
        l->held--;
    }
    if (l->client->connected)
        hint_drop(l);
    free(l);
}

static int check_lease(rowlock_lock *l, const char *what, int64_t *lease_ms)
{
    if (*lease_ms == 0)
        *lease_ms = ROWLOCK_LEASE_DEFAULT_MS;
    if (*lease_ms < 0 || *lease_ms > ROWLOCK_LEASE_MAX_MS)
        return rowlock__fail(l->client, ROWLOCK_EINVALID, "%s %s (%s): lease %lld ms is out of range (1..%lld)", what,
                             l->shown, l->ops->name, (long long)*lease_ms, (long long)ROWLOCK_LEASE_MAX_MS);
    return 0;
}

/* The insert and optimistic strategies write rows that must commit on their
 * own: inside an open transaction they would commit with it, or never. */
static int check_autocommit(rowlock_lock *l, const char *what)
{
    if (l->ops->id == ROWLOCK_STRATEGY_FOR_UPDATE || !rowlock__db_in_transaction(l->client))
        return 0;
    return rowlock__fail(l->client, ROWLOCK_EINVALID,
                         "%s %s (%s): the connection is inside a transaction (a for-update lock or the "
                         "application's); lease locks must commit on their own",
                         what, l->shown, l->ops->name);
}

ROWLOCK_EXTERN int rowlock_acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    if (l == NULL)
        return ROWLOCK_EINVALID;
    rowlock__clear_error(l->client);
    int rc;
    if (wait_ms < 0 && wait_ms != ROWLOCK_WAIT_FOREVER)
        return rowlock__fail(l->client, ROWLOCK_EINVALID,
                             "acquire %s (%s): wait %lld ms is negative (use 0 to try once or ROWLOCK_WAIT_FOREVER)",
                             l->shown, l->ops->name, (long long)wait_ms);
    if ((rc = check_lease(l, "acquire", &lease_ms)) || (rc = check_autocommit(l, "acquire")))
        return rc;
    if (l->lost) {
        l->lost = 0;
        l->held = 0;
        l->token = 0;
    }
    uint64_t before = l->token;
    rc = l->ops->acquire(l, wait_ms, lease_ms);
    if (rc == 0) {
        l->strategy_seen = 1; /* a grant proves the row is this strategy's */
        if (l->held > 0 && l->token != before) {
            /* Our earlier grant had lapsed and this is a new one. */
            l->held = 0;
        }
        l->held++;
    } else if (l->held == 0) {
        hint_drop(l);
    }
    return rc;
}

ROWLOCK_EXTERN int rowlock_release(rowlock_lock *l)
{
    if (l == NULL)
        return ROWLOCK_EINVALID;
    rowlock__clear_error(l->client);
    if (l->lost)
        return rowlock__fail(l->client, ROWLOCK_ENOTOWNER, "release %s (%s): the lock was already lost", l->shown,
                             l->ops->name);
    if (l->held == 0)
        return rowlock__fail(l->client, ROWLOCK_EINVALID, "release %s (%s): this handle does not hold the lock",
                             l->shown, l->ops->name);
    int rc = check_autocommit(l, "release");
    if (rc)
        return rc;
    rc = l->ops->release(l);
    if (rc == 0) {
        if (--l->held == 0) {
            l->token = 0;
            l->hint_held = 0; /* the release statement freed it (or another
                                 handle of this session still holds the row) */
        }
    } else if (rc == ROWLOCK_ENOTOWNER) {
        l->lost = 1;
        l->version = 0;
        hint_drop(l);
    }
    return rc;
}

ROWLOCK_EXTERN int rowlock_renew(rowlock_lock *l, int64_t lease_ms)
{
    if (l == NULL)
        return ROWLOCK_EINVALID;
    rowlock__clear_error(l->client);
    if (l->lost)
        return rowlock__fail(l->client, ROWLOCK_ENOTOWNER, "renew %s (%s): the lock was already lost", l->shown,
                             l->ops->name);
    if (l->held == 0)
        return rowlock__fail(l->client, ROWLOCK_EINVALID, "renew %s (%s): this handle does not hold the lock",
                             l->shown, l->ops->name);
    int rc;
    if ((rc = check_lease(l, "renew", &lease_ms)) || (rc = check_autocommit(l, "renew")))
        return rc;
    rc = l->ops->renew(l, lease_ms);
    if (rc == ROWLOCK_ENOTOWNER) {
        l->lost = 1;
        hint_drop(l);
    }
    return rc;
}

ROWLOCK_EXTERN uint64_t rowlock_lock_token(const rowlock_lock *l)
{
    return l && l->held && !l->lost ? l->token : 0;
}

ROWLOCK_EXTERN unsigned int rowlock_lock_held(const rowlock_lock *l)
{
    return l && !l->lost ? l->held : 0;
}

ROWLOCK_EXTERN const char *rowlock_lock_name(const rowlock_lock *l)
{
    return l ? l->name : "";
}

ROWLOCK_EXTERN rowlock_strategy rowlock_lock_strategy(const rowlock_lock *l)
{
    return l ? l->ops->id : (rowlock_strategy)0;
}

/* ---- rows ------------------------------------------------------------------ */

void rowlock__row_cols_init(rowlock__col *cols, rowlock_info *info)
{
    memset(cols, 0, sizeof(rowlock__col) * ROWLOCK__ROW_NCOLS);
    cols[0] = (rowlock__col){ .type = ROWLOCK__T_STR, .buf = info->name, .cap = sizeof info->name };
    cols[1].type = ROWLOCK__T_I64;
    cols[2] = (rowlock__col){ .type = ROWLOCK__T_STR, .buf = info->owner, .cap = sizeof info->owner };
    cols[3].type = ROWLOCK__T_I64;
    cols[4].type = ROWLOCK__T_U64;
    for (int i = 5; i < ROWLOCK__ROW_NCOLS; i++)
        cols[i].type = ROWLOCK__T_I64;
}

void rowlock__row_cols_store(const rowlock__col *cols, rowlock_info *info)
{
    info->exists = 1;
    info->strategy = (rowlock_strategy)cols[1].i;
    info->count = (unsigned int)cols[3].i;
    info->token = cols[4].u;
    info->acquired_at_us = cols[5].i;
    info->expires_at_us = cols[6].i;
    info->expires_in_ms = cols[7].i;
    info->held = (int)cols[8].i;
    info->stale = (int)cols[9].i;
}

static void info_reset(rowlock_info *info)
{
    unsigned int v = info->version;
    memset(info, 0, sizeof *info);
    info->version = v;
}

static int row_read(rowlock_client *c, const char *sql, long variant, const char *name, size_t name_len,
                    rowlock_info *info)
{
    rowlock__col cols[ROWLOCK__ROW_NCOLS];
    info_reset(info);
    rowlock__row_cols_init(cols, info);
    rowlock__param p = RL_STR(name, name_len);
    rowlock__res res;
    int rc = rowlock__db_exec(c, "read lock row", sql, variant, &p, 1, cols, ROWLOCK__ROW_NCOLS, NULL, NULL, &res);
    if (rc)
        return rc;
    if (res.rows == 0) {
        info_reset(info);
        rowlock__strlcpy(info->name, name, sizeof info->name);
        return 0;
    }
    rowlock__row_cols_store(cols, info);
    return 0;
}

int rowlock__row_read(rowlock_client *c, const char *name, size_t name_len, rowlock_info *info)
{
    return row_read(c, SQL_ROW, 0, name, name_len, info);
}

int rowlock__row_read_shared(rowlock_client *c, const char *name, size_t name_len, long lock_wait_ms,
                             rowlock_info *info)
{
    return row_read(c, SQL_ROW_SHARED, lock_wait_ms, name, name_len, info);
}

/* Explain a lost claim; *free_row is set when the row was free or its lease
 * had ended (the claim lost only to the hint gate or to a race). */
static int explain_busy_row(rowlock_lock *l, rowlock_strategy want, int *free_row)
{
    rowlock_info info = ROWLOCK_INFO_INIT;
    char keep[ROWLOCK__ERRMSG_MAX];
    memcpy(keep, l->client->errmsg, sizeof keep);
    int rc = rowlock__row_read(l->client, l->name, l->name_len, &info);
    if (rc)
        return rc;
    if (free_row)
        *free_row = !info.exists || !info.held;
    if (info.exists && info.strategy != want) {
        const char *other = rowlock_strategy_name(info.strategy);
        return rowlock__fail(l->client, ROWLOCK_EINVALID,
                             "acquire %s (%s): the name is managed by the %s strategy; use %s for it (a name "
                             "changes strategy only after the reaper purges its row)",
                             l->shown, l->ops->name, other ? other : "unknown", other ? other : "the same strategy");
    }
    if (info.exists && info.held && info.owner[0]) {
        char owner[4 * ROWLOCK_OWNER_MAX + 8]; /* written by another client: escaped */
        rowlock_escape(owner, sizeof owner, info.owner, strlen(info.owner));
        return rowlock__fail(l->client, ROWLOCK_EBUSY, "acquire %s (%s): held by %s for another %lld ms", l->shown,
                             l->ops->name, owner, (long long)info.expires_in_ms);
    }
    if (keep[0])
        return rowlock__fail(l->client, ROWLOCK_EBUSY, "acquire %s (%s): busy: %s", l->shown, l->ops->name, keep);
    return rowlock__fail(l->client, ROWLOCK_EBUSY,
                         "acquire %s (%s): held by another owner (or being handed to a waiter)", l->shown,
                         l->ops->name);
}

int rowlock__explain_busy(rowlock_lock *l, rowlock_strategy want)
{
    return explain_busy_row(l, want, NULL);
}

/* A wait that ends busy: the message of the first loss, or, when that loss
 * was not read (the handle knew the name's strategy), a read now. */
static int busy_result(rowlock_lock *l, int explained, const char *why)
{
    if (!explained)
        return explain_busy_row(l, l->ops->id, NULL);
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

int rowlock__wait_loop(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms,
                       int (*attempt)(rowlock_lock *l, int64_t lease_ms, int64_t remaining_ms, unsigned flags))
{
    const int64_t start = rowlock__now_us();
    /* Waits beyond a year are "forever" (and cannot overflow). */
    const int64_t deadline =
        wait_ms == ROWLOCK_WAIT_FOREVER || wait_ms > ROWLOCK_LEASE_MAX_MS ? INT64_MAX : start + wait_ms * 1000;
    int explained = 0, free_row = 0;
    int joined = 0, head = 0; /* in the waiter queue; holding its head lock */
    unsigned flags = 0;
    char why[ROWLOCK__ERRMSG_MAX] = "";
    unsigned polls = 0;
    int rc;
    /* Our last release handed the lock to a waiter, so it is held: a claim
     * now would only fail, and while it ran it would hold the row lock the
     * new holder's release needs. A waiting acquire queues at once (a try-
     * once still tries). If the lock is free by the time we head the queue,
     * the hint is free too and the claim after it takes the row. */
    int skip_claim = l->handed_over && wait_ms != 0;
    l->handed_over = 0;
    for (;;) {
        int64_t now = rowlock__now_us();
        int64_t remaining_ms = deadline == INT64_MAX ? -1 : (deadline - now) / 1000;
        if (skip_claim) {
            skip_claim = 0;
            rc = ROWLOCK_EBUSY;
        } else {
            l->hint_held = 1; /* the claim statement may take it */
            rc = attempt(l, lease_ms, remaining_ms < 0 && deadline != INT64_MAX ? 0 : remaining_ms, flags);
        }
        if (rc != ROWLOCK_EBUSY)
            break;
        l->contended = 1; /* others want it too: our release may hand it over */
        if (!explained && (wait_ms == 0 || !l->strategy_seen)) {
            /* First loss: one read to tell "busy" from "wrong strategy"
             * (which waiting cannot fix; a row's strategy only changes after
             * a purge) and to name the holder in the final message. A
             * handle that saw its strategy's row before skips it when it
             * waits, and reads at the deadline instead. */
            rc = explain_busy_row(l, l->ops->id, &free_row);
            if (rc != ROWLOCK_EBUSY)
                return rc;
            memcpy(why, l->client->errmsg, sizeof why);
            explained = 1;
            l->strategy_seen = 1;
            if (wait_ms == 0 && free_row && !(flags & ROWLOCK__TRY_UNGATED)) {
                /* A try-once lost to the gate on a free row: the hint may be
                 * held by a session that holds no row (its lease ended or
                 * an administrator released it). Try once more, ungated. */
                flags |= ROWLOCK__TRY_UNGATED;
                continue;
            }
        }
        if (rowlock__now_us() >= deadline) {
            if (!(flags & ROWLOCK__TRY_HANDED))
                return busy_result(l, explained, why);
            break; /* leave the queue (below) */
        }
        if (!joined)
            joined = queue_join(l, lease_ms) == 0 ? 1 : -1;
        if (joined == 1 && !head) {
            /* Queue for the head lock: the server grants it in FIFO order. */
            int q = named_call(l, SQL_HINT_WAIT, l->qname, l->qname_len, slice_s(deadline));
            if (q == 0) {
                flags |= ROWLOCK__TRY_UNGATED; /* a whole slice passed: look at the row again */
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
         * held by a session whose lease already ended. */
        int handed = 0;
        int h = head ? head_wait(l, slice_s(deadline), &handed) : hint_call(l, SQL_HINT_WAIT, slice_s(deadline));
        if (handed)
            return 0; /* the statement let the head lock go; we hold the hint */
        if (h == 1) {
            if (head)
                l->client->queue_conn = 0; /* not handed: write our queue row again next time */
            flags &= ~ROWLOCK__TRY_UNGATED; /* the hint is ours: the row is free now */
            continue;
        }
        flags |= ROWLOCK__TRY_UNGATED;
        if (h == 0)
            continue; /* a whole slice passed: look at the row again */
        /* First in the queue (we hold the hint) but the row is still taken:
         * its holder has no hint (crashed, paused past its lease, or on
         * another Galera node); or the hint call failed. Poll the row with
         * capped backoff; the others wait on the hint behind us. */
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
        (void)named_call(l, SQL_HINT_DROP, l->qname, l->qname_len, 0);
    if (rc != 0 && (flags & ROWLOCK__TRY_HANDED) && l->client->connected) {
        /* Not granted, but a release may have named us while we headed the
         * queue, just before we let the head go: look once more. The claim
         * waits (up to 1 s) for such a release's row lock, and its own
         * write makes that hand-off durable before we report it. */
        char keep[ROWLOCK__ERRMSG_MAX];
        memcpy(keep, l->client->errmsg, sizeof keep);
        int again = attempt(l, lease_ms, 1000, flags);
        if (again == 0)
            rc = 0;
        else if (rc == ROWLOCK_EBUSY && again != ROWLOCK_EBUSY)
            rc = again;
        else
            memcpy(l->client->errmsg, keep, sizeof keep);
        if (rc == ROWLOCK_EBUSY)
            return busy_result(l, explained, why);
    }
    if (rc == 0 && (flags & ROWLOCK__TRY_HANDED))
        rowlock__hint_take(l); /* a grant taken as a hand-off took no hint */
    return rc;
}

ROWLOCK_EXTERN int rowlock_inspect(rowlock_lock *l, rowlock_info *info)
{
    if (l == NULL)
        return ROWLOCK_EINVALID;
    rowlock__clear_error(l->client);
    if (info == NULL || info->version != ROWLOCK_INFO_VERSION)
        return rowlock__fail(l->client, ROWLOCK_EINVALID,
                             "inspect %s: info is NULL or its version is not ROWLOCK_INFO_VERSION", l->shown);
    /* What the row says decides how to look, not the handle's strategy: a
     * for-update holder is a row lock and needs the strategy's probe. */
    int rc = rowlock__row_read(l->client, l->name, l->name_len, info);
    if (rc || !info->exists)
        return rc;
    const rowlock__strategy_ops *row_ops = ops_for(info->strategy);
    if (row_ops && row_ops->inspect)
        return row_ops->inspect(l, info);
    return 0;
}
