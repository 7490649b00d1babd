/*
 * The optimistic strategy: a version column and compare-and-set UPDATE.
 *
 * The row's `token` column is the version. A claim reads the row, then
 * updates it only if the version is still the one read (and, re-checked by
 * the server in the same statement, the row is free or its lease ended):
 * exactly one of several concurrent claimers changes the row; the others see
 * 0 rows changed and retry with backoff until their deadline. The new version
 * is GREATEST(version + 1, a new token) (rowlock_int.h), so it also keeps
 * increasing after the reaper deletes the row: it is the fencing token.
 *
 * SQL and round trips
 *   acquire  2 round trips: READ (lock.c's row read), then CLAIM (free or
 *            expired row), REENTER (our own live row) or CREATE (no row yet).
 *   release  1 round trip (lease row, shared with insert: LEASE_RELEASE).
 *   renew    1 round trip (LEASE_RENEW).
 *   + hints  one round trip at a fresh grant, one at the final release (the
 *            wake-up hint, lock.c).
 * Holder crash: as insert — the lease ends, the next claim takes the row.
 * Errors: a duplicate key on CREATE (another creator won) and 1205/1213
 *   mean busy; 1146 is ESCHEMA; others EDB.
 */
#include "rowlock_int.h"

#include <string.h>

/* Params: owner, lease µs, name, version read. */
static const char CLAIM[] =
    "SET STATEMENT innodb_lock_wait_timeout={{waits}} FOR "
    "UPDATE `{{table}}` SET owner = ?, count = 1, token = LAST_INSERT_ID(GREATEST(token + 1, " ROWLOCK__NEW_TOKEN ")),"
    " acquired_at = UTC_TIMESTAMP(6), expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND "
    "WHERE name = ? AND token = ? AND strategy = 3 AND (owner IS NULL OR expires_at <= UTC_TIMESTAMP(6))";

/* Params: lease µs, name, version, owner. */
static const char REENTER[] =
    "SET STATEMENT innodb_lock_wait_timeout={{waits}} FOR "
    "UPDATE `{{table}}` SET count = count + 1, expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) "
    "WHERE name = ? AND token = ? AND owner = ? AND strategy = 3 AND expires_at > UTC_TIMESTAMP(6)";

/* Params: name, owner, lease µs. */
static const char CREATE[] =
    "SET STATEMENT innodb_lock_wait_timeout={{waits}} FOR "
    "INSERT INTO `{{table}}` (name, strategy, owner, count, token, acquired_at, expires_at) "
    "VALUES (?, 3, ?, 1, LAST_INSERT_ID(" ROWLOCK__NEW_TOKEN "), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)";

static int optimistic_attempt(rowlock_lock *l, int64_t lease_ms, int64_t remaining_ms)
{
    rowlock_client *c = l->client;
    long waits = remaining_ms == 0 ? 0 : 1000;
    rowlock_info row = ROWLOCK_INFO_INIT;
    int rc = rowlock__row_read(c, l->name, l->name_len, &row);
    if (rc)
        return rc;
    rowlock__res res;
    if (!row.exists) {
        rowlock__param p[3] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len),
                                RL_I64(lease_ms * 1000) };
        rc = rowlock__db_exec(c, "acquire (optimistic)", CREATE, waits, p, 3, NULL, 0, NULL, NULL, &res);
        if (rc == ROWLOCK_EDB && rowlock__db_classify(c->db_errno) == ROWLOCK__DB_DUP)
            return ROWLOCK_EBUSY; /* another creator won the race */
        if (rc)
            return rc;
        l->token = res.insert_id;
        return 0;
    }
    if (row.strategy != ROWLOCK_STRATEGY_OPTIMISTIC)
        return rowlock__explain_busy(l, ROWLOCK_STRATEGY_OPTIMISTIC);
    if (row.held && strcmp(row.owner, c->owner) == 0) {
        rowlock__param p[4] = { RL_I64(lease_ms * 1000), RL_STR(l->name, l->name_len), RL_U64(row.token),
                                RL_STR(c->owner, c->owner_len) };
        rc = rowlock__db_exec(c, "acquire (optimistic)", REENTER, waits, p, 4, NULL, 0, NULL, NULL, &res);
        if (rc)
            return rc;
        if (res.affected != 1)
            return ROWLOCK_EBUSY;
        l->token = row.token;
        return 0;
    }
    if (row.held)
        return ROWLOCK_EBUSY;
    rowlock__param p[4] = { RL_STR(c->owner, c->owner_len), RL_I64(lease_ms * 1000), RL_STR(l->name, l->name_len),
                            RL_U64(row.token) };
    rc = rowlock__db_exec(c, "acquire (optimistic)", CLAIM, waits, p, 4, NULL, 0, NULL, NULL, &res);
    if (rc)
        return rc;
    if (res.affected != 1)
        return ROWLOCK_EBUSY; /* the version moved: someone else claimed it first */
    l->token = res.insert_id;
    return 0;
}

static int optimistic_acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    return rowlock__wait_loop(l, wait_ms, lease_ms, optimistic_attempt);
}

const rowlock__strategy_ops rowlock__strategy_optimistic = {
    ROWLOCK__STRATEGY_OPS_VERSION, ROWLOCK_STRATEGY_OPTIMISTIC, "optimistic",
    optimistic_acquire, rowlock__lease_release, rowlock__lease_renew, NULL,
};
