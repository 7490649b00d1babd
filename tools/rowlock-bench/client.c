/*
 * rowlock-bench: one client of any kind: a rowlock strategy, GET_LOCK, or raw SQL.
 */
#include "bench.h"

/* ---- one client of any kind ------------------------------------------------- */

void bc_close(bclient *c)
{
    rowlock_lock_free(c->lk); /* releases anything still held */
    c->lk = NULL;
    rowlock_client_free(c->rc);
    c->rc = NULL;
    rs_close(&c->acq);
    rs_close(&c->rel);
    if (c->m)
        mysql_close(c->m);
    c->m = NULL;
}

/*
 * Connect and make the lock handle: rowlock clients on lock table `table`,
 * raw INSERT+DELETE on `rawtable`. Names are already unique per bench run and scenario.
 */
int bc_open(bench *b, bclient *c, int st, const char *name, const char *table,
            const char *rawtable, unsigned id)
{
    char sql[512];
    int rc;

    memset(c, 0, sizeof *c);
    c->st = st;
    c->rng = ((uint64_t)now_ns() ^ ((uint64_t)id << 32) ^ (uint64_t)(uintptr_t)c) | 1;
    setf(c->name, sizeof c->name, "%s", name);
    setf(c->owner, sizeof c->owner, "rlb-%s-%u", b->tag, id);
    if (ST_IS_LIB(st)) {
        rowlock_lock_options lo = ROWLOCK_LOCK_OPTIONS_INIT;
        lo.strategy = st == ST_INSERT       ? ROWLOCK_STRATEGY_INSERT
                      : st == ST_FOR_UPDATE ? ROWLOCK_STRATEGY_FOR_UPDATE
                                            : ROWLOCK_STRATEGY_OPTIMISTIC;
        rowlock_client_options o = b->wopts;
        o.table = table;
        if (b->cfg.nnodes > 0)
            o.defaults_file = b->cfg.nodes[id % b->cfg.nnodes];
        rc = rowlock_client_new(&c->rc);
        if (rc == 0)
            rc = rowlock_client_connect(c->rc, &o);
        if (rc == 0)
            rc = rowlock_lock_new(&c->lk, c->rc, name, &lo);
        if (rc != 0) {
            setf(c->err, sizeof c->err, "connect/lock_new: %s (%s)",
                 c->rc ? rowlock_client_errmsg(c->rc) : rowlock_strerror(rc), rowlock_error_name(rc));
            bc_close(c);
            return -1;
        }
        return 0;
    }
    c->m = raw_connect(&b->wopts, c->err, sizeof c->err);
    if (c->m == NULL)
        return -1;
    switch (st) {
    case ST_GET_LOCK:
        rc = rs_prepare(c->m, &c->acq, "SELECT GET_LOCK(?, ?)", c->err, sizeof c->err);
        if (rc == 0)
            rc = rs_prepare(c->m, &c->rel, "SELECT RELEASE_LOCK(?)", c->err, sizeof c->err);
        break;
    case ST_RAW:
        setf(sql, sizeof sql,
             "INSERT INTO `%s` (name, strategy, mode, owner, count, token, acquired_at, expires_at) "
             "VALUES (?, 1, 0, ?, 1, 1, NOW(6), NOW(6) + INTERVAL 30 SECOND)", rawtable);
        rc = rs_prepare(c->m, &c->acq, sql, c->err, sizeof c->err);
        setf(sql, sizeof sql, "DELETE FROM `%s` WHERE name = ? AND owner = ?", rawtable);
        if (rc == 0)
            rc = rs_prepare(c->m, &c->rel, sql, c->err, sizeof c->err);
        break;
    default: /* ST_DO1 */
        rc = rs_prepare(c->m, &c->acq, "DO 1", c->err, sizeof c->err);
        break;
    }
    if (rc != 0) {
        bc_close(c);
        return -1;
    }
    return 0;
}

static int raw_busy_errno(unsigned e)
{
    return e == 1062 /* duplicate key */ || e == 1213 /* deadlock */ || e == 1205 /* lock wait */;
}

/* 0 granted, 1 busy (wait expired), -1 error (c->err). */
int bc_acquire(bclient *c, int64_t wait_ms)
{
    const char *p[2];
    long long v = 0;
    int isnull = 0;
    unsigned e;

    c->token = 0;
    switch (c->st) {
    case ST_INSERT:
    case ST_FOR_UPDATE:
    case ST_OPTIMISTIC: {
        int rc = rowlock_acquire(c->lk, wait_ms, LEASE_MS);
        if (rc == 0) {
            c->token = rowlock_lock_token(c->lk);
            return 0;
        }
        setf(c->err, sizeof c->err, "acquire: %s (%s)", rowlock_client_errmsg(c->rc),
             rowlock_error_name(rc));
        return rc == ROWLOCK_EBUSY ? 1 : -1;
    }
    case ST_GET_LOCK: {
        /* MariaDB has no "forever" for GET_LOCK: wait in 30 s slices. */
        int forever = wait_ms < 0;
        if (forever)
            setf(c->timeout, sizeof c->timeout, "30");
        else
            setf(c->timeout, sizeof c->timeout, "%.3f", (double)wait_ms / 1000.0);
        p[0] = c->name;
        p[1] = c->timeout;
        for (;;) {
            e = rs_exec(&c->acq, p, 2, &v, &isnull, NULL, c->err, sizeof c->err);
            if (e != 0)
                return -1;
            if (isnull) {
                setf(c->err, sizeof c->err, "GET_LOCK returned NULL");
                return -1;
            }
            if (v == 1)
                return 0;
            if (!forever || g_interrupted) {
                setf(c->err, sizeof c->err, "GET_LOCK timed out");
                return 1;
            }
        }
    }
    case ST_RAW: {
        int64_t deadline = wait_ms < 0 ? INT64_MAX : now_ns() + wait_ms * 1000000;
        unsigned attempt = 0;
        p[0] = c->name;
        p[1] = c->owner;
        for (;;) {
            int64_t d;
            e = rs_exec(&c->acq, p, 2, NULL, NULL, NULL, c->err, sizeof c->err);
            if (e == 0)
                return 0;
            if (!raw_busy_errno(e))
                return -1;
            if (wait_ms == 0 || now_ns() >= deadline || g_interrupted)
                return 1;
            d = (int64_t)RAW_BACKOFF_BASE_US << (attempt < 16 ? attempt : 16);
            if (d > RAW_BACKOFF_CAP_US)
                d = RAW_BACKOFF_CAP_US;
            d = d / 2 + (int64_t)(rng_next(&c->rng) % (uint32_t)(d / 2 + 1));
            sleep_ns(d * 1000);
            attempt++;
        }
    }
    default: /* do1: one round trip, nothing held */
        e = rs_exec(&c->acq, NULL, 0, NULL, NULL, NULL, c->err, sizeof c->err);
        return e == 0 ? 0 : -1;
    }
}

int bc_release(bclient *c)
{
    const char *p[2];
    long long v = 0;
    int isnull = 0, tries;
    uint64_t aff = 0;
    unsigned e;

    switch (c->st) {
    case ST_INSERT:
    case ST_FOR_UPDATE:
    case ST_OPTIMISTIC: {
        int rc = rowlock_release(c->lk);
        if (rc == 0)
            return 0;
        setf(c->err, sizeof c->err, "release: %s (%s)", rowlock_client_errmsg(c->rc),
             rowlock_error_name(rc));
        return -1;
    }
    case ST_GET_LOCK:
        p[0] = c->name;
        if (rs_exec(&c->rel, p, 1, &v, &isnull, NULL, c->err, sizeof c->err) != 0)
            return -1;
        if (isnull || v != 1) {
            setf(c->err, sizeof c->err, "RELEASE_LOCK returned %s", isnull ? "NULL" : "0");
            return -1;
        }
        return 0;
    case ST_RAW:
        p[0] = c->name;
        p[1] = c->owner;
        /* Pollers' duplicate-key checks take shared locks on the row, so the
         * DELETE may meet a deadlock: retry it (bounded). */
        for (tries = 0; tries < 100; tries++) {
            e = rs_exec(&c->rel, p, 2, NULL, NULL, &aff, c->err, sizeof c->err);
            if (e == 0) {
                if (aff != 1) {
                    setf(c->err, sizeof c->err, "raw DELETE removed %" PRIu64 " rows", aff);
                    return -1;
                }
                return 0;
            }
            if (!raw_busy_errno(e))
                return -1;
        }
        return -1;
    default:
        return 0;
    }
}

int bc_renew(bclient *c)
{
    int rc = rowlock_renew(c->lk, LEASE_MS);
    if (rc == 0)
        return 0;
    setf(c->err, sizeof c->err, "renew: %s (%s)", rowlock_client_errmsg(c->rc), rowlock_error_name(rc));
    return -1;
}
