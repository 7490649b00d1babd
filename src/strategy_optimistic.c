/*
 * The optimistic strategy: a version column and compare-and-set UPDATE.
 *
 * The row's `token` column is the version. A claim updates the row only if
 * the version is still the one the claimer saw (and, re-checked by the server
 * in the same statement, the row is free or its lease ended): exactly one of
 * several concurrent claimers changes the row; the others see 0 rows changed
 * and wait (lease.c). The new version is GREATEST(version + 1, a new token)
 * (rowlock_int.h), so it also keeps increasing after the reaper deletes the
 * row: it is the fencing token.
 *
 * SQL and round trips
 *   acquire  1 round trip when the handle knows the row's version (it saw
 *            it at its own last grant or release, which leaves the version
 *            as it was): CLAIM with that version. Otherwise, or when the
 *            version moved, 2: a locking row read (row.c), then CLAIM (free
 *            or expired row), REENTER (our own live row) or CREATE (no row
 *            yet; + 1 to take the hint), or ADOPT (lease.c: a live row of
 *            our owner that no handle holds, a claim whose reply was
 *            lost). The read is LOCK IN SHARE MODE for
 *            one statement: a waiter woken by a release's hint waits the few
 *            microseconds until that release commits instead of reading the
 *            row as it was before it. CLAIM takes the wake-up hint in the
 *            same statement (ROWLOCK__HINT_TRY; lease.c).
 *   release  1 round trip (lease row, shared with insert: LEASE_RELEASE; it
 *            hands the lock to the head of the waiter queue, with a new
 *            version, or frees it and the hint). A hand-off takes one more
 *            round trip, after the commit, to let the hint go; the waiter is
 *            then granted by one read (lease.c).
 *   renew    1 round trip (LEASE_RENEW).
 * Holder crash: as insert — the lease ends, the next claim takes the row.
 * Errors: a duplicate key on CREATE (another creator won) and 1205/1213
 *   mean busy; 1146 is ESCHEMA; others EDB.
 */
#include "rowlock_int.h"

#include <string.h>

/* Params: owner, lease µs, name, version seen, RL_HINT_TRY. The hint is
 * tried last, only on the row that matched the rest. */
static const char CLAIM[] =
    "/* rowlock:claim-cas */ SET STATEMENT innodb_lock_wait_timeout={{waits}} FOR "
    "UPDATE `{{table}}` SET owner = ?, count = 1, token = LAST_INSERT_ID(GREATEST(token + 1, " ROWLOCK__NEW_TOKEN ")),"
    " acquired_at = UTC_TIMESTAMP(6), expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND "
    "WHERE name = ? AND token = ? AND strategy = 3 AND " ROWLOCK__SQL_FREE_ROW " AND "
    ROWLOCK__HINT_TRY;

/* Params: re-entry increment (1; 0 with ROWLOCK__TRY_HANDED: a release
 * handed our owner the row, and this write makes that durable), lease µs,
 * name, version, owner. */
static const char REENTER[] =
    "/* rowlock:reenter */ SET STATEMENT innodb_lock_wait_timeout={{waits}} FOR "
    "UPDATE `{{table}}` SET count = count + ?, expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) "
    "WHERE name = ? AND token = ? AND owner = ? AND strategy = 3 AND expires_at > UTC_TIMESTAMP(6)";

/* Params: name, owner, lease µs. */
static const char CREATE[] =
    "/* rowlock:create */ SET STATEMENT innodb_lock_wait_timeout={{waits}} FOR "
    "INSERT INTO `{{table}}` (name, strategy, owner, count, token, acquired_at, expires_at) "
    "VALUES (?, 3, ?, 1, LAST_INSERT_ID(" ROWLOCK__NEW_TOKEN "), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)";

/* Per-lock state: the lease module's, then the version. */
typedef struct optimistic_lock {
    rowlock__lease_lock lease;
    uint64_t version; /* the row's version as last seen by this handle (its
                         own grant or release); 0 = unknown */
} optimistic_lock;
#define ST(l) ((optimistic_lock *)(l)->state)

static int claim(rowlock_lock *l, int64_t lease_ms, long waits, unsigned flags, uint64_t version)
{
    rowlock_client *c = l->client;
    rowlock__param p[7] = { RL_STR(c->owner, c->owner_len), RL_I64(lease_ms * 1000), RL_STR(l->name, l->name_len),
                            RL_U64(version), RL_HINT_TRY(l, flags) };
    rowlock__res res;
    int rc = rowlock__db_run(c, RL_STMT(.what = "acquire (optimistic)", .tmpl = CLAIM, .variant = waits, .params = p,
                                        .nparams = 7, .res = &res));
    if (rc)
        return rc;
    if (res.affected != 1)
        return ROWLOCK_EBUSY; /* the version moved, the row is taken, or the hint's waiter is first */
    l->token = ST(l)->version = res.insert_id;
    return 0;
}

static int optimistic_attempt(rowlock_lock *l, int64_t lease_ms, int64_t remaining_ms, unsigned flags)
{
    rowlock_client *c = l->client;
    long waits = remaining_ms == 0 ? 0 : 1000;
    int rc;
    if (ST(l)->version != 0 && l->held == 0) {
        /* The version this handle left at its own release: if nobody took
         * the lock since, one statement claims it. */
        uint64_t v = ST(l)->version;
        ST(l)->version = 0;
        rc = claim(l, lease_ms, waits, flags, v);
        if (rc != ROWLOCK_EBUSY)
            return rc;
    }
    rowlock_info row = ROWLOCK_INFO_INIT;
    rowlock__res res;
    rc = rowlock__row_read_shared(c, l->name, l->name_len, waits, &row);
    if (rc)
        return rc;
    if (!row.exists) {
        rowlock__param p[3] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len),
                                RL_I64(lease_ms * 1000) };
        rc = rowlock__db_run(c, RL_STMT(.what = "acquire (optimistic)", .tmpl = CREATE, .variant = waits, .params = p,
                                        .nparams = 3, .res = &res));
        if (rc == ROWLOCK_EDB && rowlock__db_classify(c->db_errno) == ROWLOCK__DB_DUP)
            return ROWLOCK_EBUSY; /* another creator won the race */
        if (rc)
            return rc;
        l->token = ST(l)->version = res.insert_id;
        rowlock__hint_take(l); /* a new row: its INSERT took no hint */
        return 0;
    }
    if (row.strategy != ROWLOCK_STRATEGY_OPTIMISTIC)
        return rowlock__explain_busy(l);
    if (row.held && strcmp(row.owner, c->owner) == 0 && !(flags & ROWLOCK__TRY_HANDED) &&
        !rowlock__lease_client_holds(l)) {
        /* Our owner's live row that no handle of this client holds: a claim
         * of ours that committed after its statement failed (its reply lost,
         * or delivered late by the network after a retry). Nobody was told
         * of that grant: adopt it (count 1, its token, the lease re-armed),
         * never count it as a re-entry, which left a hidden hold after the
         * release and the same token again for the next grant (the fault
         * soak's strict checker saw it). insert already never re-enters
         * such a row (strategy_insert.c). */
        rc = rowlock__lease_adopt(l, lease_ms);
        if (rc == 0)
            ST(l)->version = l->token;
        return rc;
    }
    if (row.held && strcmp(row.owner, c->owner) == 0) {
        rowlock__param p[5] = { RL_I64((flags & ROWLOCK__TRY_HANDED) ? 0 : 1), RL_I64(lease_ms * 1000),
                                RL_STR(l->name, l->name_len), RL_U64(row.token), RL_STR(c->owner, c->owner_len) };
        rc = rowlock__db_run(c, RL_STMT(.what = "acquire (optimistic)", .tmpl = REENTER, .variant = waits, .params = p,
                                        .nparams = 5, .res = &res));
        if (rc)
            return rc;
        if (res.affected != 1)
            return ROWLOCK_EBUSY;
        l->token = ST(l)->version = row.token;
        return 0;
    }
    if (row.held)
        return ROWLOCK_EBUSY;
    return claim(l, lease_ms, waits, flags, row.token);
}

static int optimistic_acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    int rc = rowlock__wait_loop(l, wait_ms, lease_ms, optimistic_attempt);
    if (rc == 0)
        ST(l)->version = l->token; /* also for a grant handed over by a release */
    return rc;
}

static int optimistic_release(rowlock_lock *l)
{
    int rc = rowlock__lease_release(l);
    if (rc == ROWLOCK_ENOTOWNER)
        ST(l)->version = 0;
    return rc;
}

const rowlock__strategy_ops rowlock__strategy_optimistic = {
    .version = ROWLOCK__STRATEGY_OPS_VERSION,
    .id = ROWLOCK_STRATEGY_OPTIMISTIC,
    .name = "optimistic",
    .flags = ROWLOCK__S_LEASE_ROW,
    .modes = 0,
    .modes_note = "its version row has one owner, and a compare-and-set cannot count readers",
    .lock_state_size = sizeof(optimistic_lock),
    .lock_init = rowlock__lease_lock_init,
    .lock_free = rowlock__lease_lock_free,
    .client_free = rowlock__lease_client_free,
    .acquire = optimistic_acquire,
    .release = optimistic_release,
    .renew = rowlock__lease_renew,
};
