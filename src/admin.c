/*
 * Administration: list, force release, reap. What the rowlock and
 * rowlock-reaper tools call; built on the same row layout as the strategies.
 *
 * Reaping: one DELETE per batch whose WHERE is the staleness condition itself,
 * evaluated by the server on each row as it deletes it, so a row renewed or
 * re-acquired after any earlier read survives. It runs at READ COMMITTED so
 * it takes no gap locks on the expiry index (acquirers inserting new rows are
 * never blocked; SET TRANSACTION applies to the next transaction only, so a
 * wrapped connection's session is left as it was), and waits at most 1 s for a row locked by a live statement.
 * Several reapers at once just share the work.
 */
#include "rowlock_int.h"

#include <stddef.h>
#include <string.h>

static const char LIST_HELD[] =
    "/* rowlock:list-held */ SELECT " ROWLOCK__ROW_COLUMNS " FROM `{{table}}` WHERE owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6) ORDER BY name";
static const char LIST_STALE[] =
    "/* rowlock:list-stale */ SELECT " ROWLOCK__ROW_COLUMNS " FROM `{{table}}` WHERE owner IS NOT NULL AND expires_at <= UTC_TIMESTAMP(6) ORDER BY name";

/* Params: name, owner, token, strategy (one that keeps a lease row). Only
 * clears exactly the grant that was read. */
static const char FORCE_RELEASE[] =
    "/* rowlock:force-release */ UPDATE `{{table}}` SET owner = NULL, count = 0, expires_at = UTC_TIMESTAMP(6) "
    "WHERE name = ? AND owner = ? AND token = ? AND strategy = ? AND expires_at > UTC_TIMESTAMP(6)";

/* Params: grace µs. */
static const char REAP_SURVEY[] =
    "/* rowlock:reap-survey */ SELECT COUNT(*), IFNULL(FLOOR(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', MIN(expires_at))),0) FROM `{{table}}` "
    "WHERE expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND";
/* Params: grace µs, grace µs. 1 if a stale row or holder entry is left
 * (asked when the budget stopped a purge: "more remain" must be true). */
static const char REAP_LEFT[] =
    "/* rowlock:reap-left */ SELECT EXISTS(SELECT 1 FROM `{{table}}` WHERE expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)"
    " OR EXISTS(SELECT 1 FROM `{{table}}_hold` WHERE expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)";
/* Params: grace µs, batch. */
static const char REAP_DELETE[] =
    "/* rowlock:reap-delete */ SET STATEMENT innodb_lock_wait_timeout=1 FOR "
    "DELETE FROM `{{table}}` WHERE expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND ORDER BY expires_at LIMIT ?";

/* One row, every column a count or µs, all by one UTC_TIMESTAMP(6) (constant
 * within a statement). One-row grants: owner set and not '' (multi-holder
 * rows have owner ''; for-update rows store no owner). Entries of
 * <table>_hold: granted 1 holders, granted 0 queued waiters (live ones:
 * below). */
#define STATS_NOW "UTC_TIMESTAMP(6)"
#define STATS_AGE(col) "IFNULL(TIMESTAMPDIFF(MICROSECOND, " col ", " STATS_NOW "), 0)"
#define STATS_SQL(waiter_live)                                                                               \
    "/* rowlock:stats */ SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', " STATS_NOW ")," \
    " (SELECT COUNT(*) FROM `{{table}}`)," \
    " (SELECT COUNT(*) FROM `{{table}}` WHERE owner <> '' AND expires_at > " STATS_NOW ")," \
    " (SELECT COUNT(*) FROM `{{table}}` WHERE owner <> '' AND expires_at <= " STATS_NOW ")," \
    " (SELECT " STATS_AGE("MIN(acquired_at)") " FROM `{{table}}` WHERE owner <> '' AND expires_at > " STATS_NOW ")," \
    " (SELECT " STATS_AGE("MIN(expires_at)") " FROM `{{table}}` WHERE owner <> '' AND expires_at <= " STATS_NOW ")," \
    " (SELECT COUNT(DISTINCT name) FROM `{{table}}_hold` WHERE granted = 1 AND expires_at > " STATS_NOW ")," \
    " (SELECT COUNT(*) FROM `{{table}}_hold` WHERE granted = 1 AND mode = 0 AND expires_at > " STATS_NOW ")," \
    " (SELECT COUNT(*) FROM `{{table}}_hold` WHERE granted = 1 AND mode = 1 AND expires_at > " STATS_NOW ")," \
    " (SELECT COUNT(*) FROM `{{table}}_hold` h WHERE granted = 0 AND mode = 0 AND " waiter_live ")," \
    " (SELECT COUNT(*) FROM `{{table}}_hold` h WHERE granted = 0 AND mode = 1 AND " waiter_live ")," \
    " (SELECT COUNT(*) FROM `{{table}}_hold` WHERE granted = 1 AND expires_at <= " STATS_NOW ")," \
    " (SELECT " STATS_AGE("MIN(acquired_at)") " FROM `{{table}}_hold` WHERE granted = 1 AND expires_at > " STATS_NOW ")," \
    " (SELECT " STATS_AGE("MIN(expires_at)") " FROM `{{table}}_hold` WHERE granted = 1 AND expires_at <= " STATS_NOW ")"
/* One server: a waiter is live as ROWLOCK__HOLD_WAITER_LIVE says. A
 * cluster: while its entry's expires_at has not passed (its queue lock is
 * node-local; a cluster waiter's entry lives 5 s past its last try). */
static const char STATS[] = STATS_SQL(ROWLOCK__HOLD_WAITER_LIVE);
static const char STATS_CL[] = STATS_SQL("h.expires_at > " STATS_NOW);
enum { STATS_NCOLS = 14 };

struct list_ctx {
    rowlock__col cols[ROWLOCK__ROW_NCOLS];
    rowlock_info info;
    int (*fn)(const rowlock_info *, void *);
    void *arg;
};

static int list_row(void *p)
{
    struct list_ctx *x = p;
    rowlock__row_cols_store(x->cols, &x->info);
    if (rowlock__strategy_multi_row(&x->info))
        return 0; /* a multi-holder name: its holders are listed by rowlock_admin_holders() */
    return x->fn(&x->info, x->arg);
}

ROWLOCK_EXTERN int rowlock_admin_list(rowlock_client *c, unsigned int flags,
                                int (*fn)(const rowlock_info *info, void *arg), void *arg)
{
    if (c == NULL)
        return ROWLOCK_EINVALID;
    rowlock__clear_error(c);
    if (fn == NULL)
        return rowlock__fail(c, ROWLOCK_EINVALID, "list: callback is NULL");
    struct list_ctx x;
    memset(&x, 0, sizeof x);
    x.info.version = ROWLOCK_INFO_VERSION;
    x.fn = fn;
    x.arg = arg;
    rowlock__row_cols_init(x.cols, &x.info);
    return rowlock__db_run(c, RL_STMT(.what = "list", .tmpl = (flags & ROWLOCK_LIST_STALE) ? LIST_STALE : LIST_HELD,
                                      .cols = x.cols, .ncols = ROWLOCK__ROW_NCOLS, .row_fn = list_row, .arg = &x));
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

ROWLOCK_EXTERN int rowlock_admin_stats(rowlock_client *c, rowlock_stats_info *st)
{
    if (c == NULL)
        return ROWLOCK_EINVALID;
    rowlock__clear_error(c);
    /* A struct the library fills: any version but 0 (conventions, rowlock.h). */
    if (st == NULL || st->version == 0)
        return rowlock__fail(c, ROWLOCK_EINVALID, "stats: st is NULL or st->version is 0 (start from "
                             "ROWLOCK_STATS_INFO_INIT)");
    rowlock__col k[STATS_NCOLS];
    memset(k, 0, sizeof k);
    for (int i = 0; i < STATS_NCOLS; i++)
        k[i].type = ROWLOCK__T_I64;
    const rowlock__lease_rule *rule;
    int rc = rowlock__lease_rule_get(c, &rule);
    if (rc)
        return rc;
    rc = rowlock__db_run(c, RL_STMT(.what = "stats", .tmpl = (rule->flags & ROWLOCK__RULE_CLOCK) ? STATS : STATS_CL,
                                    .cols = k, .ncols = STATS_NCOLS));
    if (rc)
        return rc;
    /* Only version 1 fields exist so far: a version 1 struct is all of it,
     * and a newer caller's struct has at least these fields (the ones this
     * library does not know keep what the caller set: its _INIT's zeros). */
    rowlock_stats_info r = ROWLOCK_STATS_INFO_INIT;
    r.version = st->version;
    r.server_now_us = k[0].i;
    r.rows = (uint64_t)k[1].i;
    r.names_held = (uint64_t)(k[2].i + k[6].i);
    r.holders_exclusive = (uint64_t)(k[2].i + k[7].i);
    r.holders_shared = (uint64_t)k[8].i;
    r.waiters_exclusive = (uint64_t)k[9].i;
    r.waiters_shared = (uint64_t)k[10].i;
    r.stale = (uint64_t)(k[3].i + k[11].i);
    r.oldest_grant_age_ms = max64(k[4].i, k[12].i) / 1000;
    r.oldest_stale_age_ms = max64(k[5].i, k[13].i) / 1000;
    *st = r;
    return 0;
}

ROWLOCK_EXTERN int rowlock_admin_force_release(rowlock_client *c, const char *name, rowlock_info *released)
{
    if (c == NULL)
        return ROWLOCK_EINVALID;
    rowlock__clear_error(c);
    const char *why = NULL;
    if (rowlock_name_check(name, &why))
        return rowlock__fail(c, ROWLOCK_EINVALID, "force release: %s", why);
    /* Checked before anything is changed: an error must mean "nothing done". */
    if (released && rowlock__info_check(released->version))
        return rowlock__fail(c, ROWLOCK_EINVALID, "force release: released->version is 0 (start from ROWLOCK_INFO_INIT)");
    rowlock_info info = ROWLOCK_INFO_INIT;
    int rc = rowlock__row_read(c, name, strlen(name), &info);
    if (rc)
        return rc;
    const rowlock__strategy_ops *ops = info.exists ? rowlock__strategy_find(info.strategy) : NULL;
    if (ops && !(ops->flags & ROWLOCK__S_LEASE_ROW)) {
        char shown[4 * ROWLOCK_NAME_MAX + 8];
        rowlock_escape(shown, sizeof shown, info.name, strlen(info.name));
        return rowlock__fail(c, ROWLOCK_EUNSUPPORTED,
                             "force release '%s': a %s lock is %s; end that connection (KILL) to release it",
                             shown, ops->name,
                             (ops->flags & ROWLOCK__S_TRANSACTION) ? "a row lock of its holder's transaction"
                                                                   : "not kept in its row");
    }
    int was_held = ops && info.held;
    if (was_held && rowlock__strategy_multi_row(&info)) {
        /* A multi-holder name: release every holder (holders.c). */
        unsigned n = 0;
        if ((rc = rowlock_admin_force_release_holder(c, name, NULL, &n)))
            return rc;
        was_held = n > 0;
    } else if (was_held) {
        rowlock__param p[4] = { RL_STR(name, strlen(name)), RL_STR(info.owner, strlen(info.owner)),
                                RL_U64(info.token), RL_I64(info.strategy) };
        rowlock__res res;
        if ((rc = rowlock__db_run(c, RL_STMT(.what = "force release", .tmpl = FORCE_RELEASE, .params = p, .nparams = 4,
                                             .res = &res))))
            return rc;
        was_held = res.affected == 1; /* 0: it was released or expired meanwhile */
    }
    if (released) {
        info.held = was_held;
        rowlock__info_copy_out(released, &info);
    }
    return 0;
}

/* Pause between batches, cut short by the budget (deadline 0: none). */
static void reap_pause(int64_t pause_ms, int64_t took_us, int64_t deadline)
{
    int64_t us = pause_ms == ROWLOCK_REAP_PAUSE_AUTO ? (took_us < 60000000 ? took_us : 60000000) : pause_ms * 1000;
    if (deadline > 0) {
        const int64_t left = deadline - rowlock__now_us();
        us = us < left ? us : left;
    }
    if (us > 0)
        rowlock__sleep_us(us);
}

/* Copy out the fields of stats' version (rowlock.h: versions 1 and 2 end at
 * complete; a newer caller's later fields keep what it set). */
static void reap_stats_out(rowlock_reap_stats *out, const rowlock_reap_stats *st)
{
    const unsigned int v = out->version;
    if (v >= 3)
        memcpy(out, st, sizeof *st);
    else
        memcpy(out, st, offsetof(rowlock_reap_stats, unjudged));
    out->version = v;
}

ROWLOCK_EXTERN int rowlock_admin_reap(rowlock_client *c, const rowlock_reap_options *o, rowlock_reap_stats *stats)
{
    if (c == NULL)
        return ROWLOCK_EINVALID;
    rowlock__clear_error(c);
    rowlock_reap_options d = ROWLOCK_REAP_OPTIONS_INIT;
    if (o == NULL)
        o = &d;
    if (o->version < 1 || o->version > ROWLOCK_REAP_OPTIONS_VERSION)
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "reap: rowlock_reap_options.version is %u, this library knows 1-%d (start from "
                             "ROWLOCK_REAP_OPTIONS_INIT)",
                             o->version, ROWLOCK_REAP_OPTIONS_VERSION);
    /* stats is filled by the library: any version but 0 (a caller built
     * before ROWLOCK_REAP_STATS_VERSION existed set the options' 1 or 2). */
    if (stats && stats->version == 0)
        return rowlock__fail(c, ROWLOCK_EINVALID, "reap: stats->version is 0 (start from ROWLOCK_REAP_STATS_INIT)");
    /* An older caller's struct ends before the later fields: never read them. */
    const int64_t pause_ms = o->version >= 2 ? o->pause_ms : 0;
    const int wait_leases = o->version >= 3 ? o->wait_leases != 0 : 0;
    if ((pause_ms < 0 && pause_ms != ROWLOCK_REAP_PAUSE_AUTO) || pause_ms > 60000)
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "reap: pause %lld ms is out of range (0..60000, or ROWLOCK_REAP_PAUSE_AUTO)",
                             (long long)pause_ms);
    int64_t grace_ms = o->grace_ms < 0 ? 60000 : o->grace_ms;
    if (grace_ms > ROWLOCK_LEASE_MAX_MS * 10)
        return rowlock__fail(c, ROWLOCK_EINVALID, "reap: grace %lld ms is too large", (long long)grace_ms);
    uint64_t batch = o->batch ? o->batch : 1000;
    if (o->max_ms < 0)
        return rowlock__fail(c, ROWLOCK_EINVALID, "reap: max_ms %lld is negative", (long long)o->max_ms);

    /* A budget beyond a year is no budget (and max_ms * 1000 must not overflow). */
    const int64_t max_us = o->max_ms > ROWLOCK_LEASE_MAX_MS ? 0 : o->max_ms * 1000;

    rowlock_reap_stats st;
    memset(&st, 0, sizeof st);
    st.version = ROWLOCK_REAP_STATS_VERSION;
    const int64_t start = rowlock__now_us();
    const int64_t deadline = max_us > 0 ? start + max_us : 0;
    rowlock__param pg = RL_I64(grace_ms * 1000);
    rowlock__col survey[2] = { { .type = ROWLOCK__T_I64 }, { .type = ROWLOCK__T_I64 } };
    int rc = rowlock__db_run(c, RL_STMT(.what = "reap: survey", .tmpl = REAP_SURVEY, .params = &pg, .nparams = 1,
                                        .cols = survey, .ncols = 2));
    if (rc)
        goto out;
    st.oldest_expiry_us = survey[1].i;
    const rowlock__lease_rule *rule;
    if ((rc = rowlock__lease_rule_get(c, &rule)))
        goto out;
    if (rule->reap) {
        /* The rule's own (a cluster: no node clock judges a held lease);
         * a dry run there counts by the same rule. */
        rc = rule->reap(c, grace_ms, batch, max_us, wait_leases, o->dry_run, start, &st);
        goto out;
    }
    if (o->dry_run) {
        /* The predicate of REAP_DELETE and of holders.c's purge. */
        st.purged = (uint64_t)survey[0].i;
        st.complete = 1;
        rc = rowlock__holders_reap(c, grace_ms, batch, 1, &st.purged);
        goto out;
    }
    for (;;) {
        if (deadline > 0 && rowlock__now_us() >= deadline) {
            /* Stopped by the budget: "more remain" only if some do. */
            rowlock__param pl[2] = { RL_I64(grace_ms * 1000), RL_I64(grace_ms * 1000) };
            rowlock__col left = { .type = ROWLOCK__T_I64 };
            rc = rowlock__db_run(c, RL_STMT(.what = "reap: rows left", .tmpl = REAP_LEFT, .params = pl, .nparams = 2,
                                            .cols = &left, .ncols = 1));
            st.complete = rc == 0 && left.i == 0;
            break;
        }
        rowlock__param p[2] = { RL_I64(grace_ms * 1000), RL_U64(batch) };
        rowlock__res res;
        if ((rc = rowlock__db_simple(c, "reap: isolation", "/* rowlock:reap-isolation */ SET TRANSACTION ISOLATION LEVEL READ COMMITTED")))
            goto out;
        const int64_t t0 = rowlock__now_us();
        rc = rowlock__db_run(c, RL_STMT(.what = "reap: delete", .tmpl = REAP_DELETE, .params = p, .nparams = 2,
                                        .res = &res));
        const int64_t took_us = rowlock__now_us() - t0;
        if (rc == ROWLOCK_EBUSY) {
            rc = 0; /* a row held by a live statement: try again next batch */
            ROWLOCK__LOG_CLIENT(c, ROWLOCK_LOG_INFO, BUSY_RETRY, RL_EVX(.db_errno = c->db_errno, .waited_us = 1000),
                                "reap: a batch was rolled back (MySQL error %u), retry in 0.001 s", c->db_errno);
            rowlock__sleep_us(1000);
            continue;
        }
        if (rc)
            goto out;
        st.batches++;
        st.purged += res.affected;
        if (res.affected < batch) {
            /* Then the holder entries of multi-holder names (holders.c). */
            rc = rowlock__holders_reap(c, grace_ms, batch, 0, &st.purged);
            st.complete = rc == 0;
            break;
        }
        if (pause_ms != 0)
            reap_pause(pause_ms, took_us, deadline);
    }
out:
    st.elapsed_us = rowlock__now_us() - start;
    if (stats)
        reap_stats_out(stats, &st);
    return rc;
}
