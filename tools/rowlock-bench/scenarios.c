/*
 * rowlock-bench: the scenarios: uncontended, hot, many, table_size, reaper.
 */
#include "bench.h"

/* ---- scenarios ------------------------------------------------------------------ */

static int want(const bench *b, int sc, int st)
{
    return (b->cfg.sc_mask & (1u << sc)) && (b->cfg.st_mask & (1u << st)) && sc_applies(sc, st) &&
           !g_interrupted;
}

static void lock_name(const bench *b, int sc, int st, char *out, size_t cap)
{
    if (st == ST_GET_LOCK) /* server-wide namespace: make it ours */
        setf(out, cap, "rlb-%s-%s", b->tag, sc_names[sc]);
    else
        setf(out, cap, "bench-%s-%s", sc_names[sc], st_names[st]);
}

static void run_entries(bench *b, entry *e, size_t ne)
{
    unsigned round;
    size_t k;
    double per = b->cfg.seconds / b->cfg.rounds;
    for (round = 0; round < b->cfg.rounds && !g_interrupted; round++)
        for (k = 0; k < ne && !g_interrupted; k++)
            run_round(b, &e[k].m, per, NULL, NULL, &e[k].a, &b->res[e[k].res]);
    for (k = 0; k < ne; k++) {
        result *r = &b->res[e[k].res];
        acc_finish(&e[k].a, r, e[k].m.n, e[k].m.hot);
        if (g_interrupted)
            res_fail(r, "interrupted");
        else if (r->ops == 0)
            res_fail(r, "no operation completed");
    }
}

/* Add an entry (and its result) unless the scenario skips the strategy. */
static int add_entry(bench *b, entry *e, size_t *ne, int sc, int st, unsigned n, int hot,
                     uint64_t rows, const char *table, const char *rawtable)
{
    entry *x = &e[*ne];
    result *r;
    if (!want(b, sc, st))
        return 0;
    r = res_new(b, sc, st, n, rows);
    if (r == NULL)
        return -1;
    memset(x, 0, sizeof *x);
    lock_name(b, sc, st, x->name, sizeof x->name);
    x->m.sc = sc;
    x->m.st = st;
    x->m.n = n;
    x->m.hot = hot;
    x->m.name = x->name;
    x->m.table = table;
    x->m.rawtable = rawtable;
    x->res = (size_t)(r - b->res);
    (*ne)++;
    return 0;
}

void scenario_simple(bench *b, int sc)
{
    entry e[ST_COUNT * MAX_HOT];
    size_t ne = 0, k;
    unsigned c;
    int st;

    if (sc == SC_HOT) {
        for (c = 0; c < b->cfg.nhot; c++)
            for (st = 0; st < ST_COUNT; st++)
                if (add_entry(b, e, &ne, sc, st, b->cfg.hot[c], 1, 0, b->table, b->scratch) != 0)
                    return;
    } else {
        for (st = 0; st < ST_COUNT; st++)
            if (add_entry(b, e, &ne, sc, st, sc == SC_MANY ? b->cfg.many : 1, 0, 0, b->table,
                          b->scratch) != 0)
                return;
    }
    run_entries(b, e, ne);
    if (sc == SC_UNCONTENDED)
        for (k = 0; k < ne && !g_interrupted; k++)
            count_round_trips(b, e[k].m.st, b->scratch, &b->res[e[k].res]);
}

/*
 * Acquire latency against table size: one lock table per size, each filled
 * once, so that the sizes can take turns within every round like the
 * strategies do. raw INSERT+DELETE goes to the filled table itself.
 */
void scenario_table_size(bench *b)
{
    char tables[MAX_SIZES][72], err[400] = "";
    entry e[ST_COUNT * MAX_SIZES];
    size_t ne = 0, k;
    unsigned i, made = 0;
    int st, failed = 0;

    for (i = 0; i < b->cfg.nsizes; i++) {
        setf(tables[i], sizeof tables[i], "%s_ts%u", b->table, i);
        for (st = 0; st < ST_COUNT; st++)
            if (add_entry(b, e, &ne, SC_TABLE_SIZE, st, 1, 0, b->cfg.sizes[i], tables[i],
                          tables[i]) != 0)
                return;
    }
    if (ne == 0)
        return;
    for (i = 0; i < b->cfg.nsizes && !failed; i++) {
        if (strlen(tables[i]) > 57) {
            setf(err, sizeof err, "table name %s is too long: shorten --table", tables[i]);
            failed = 1;
        } else if (make_table(b, tables[i], err, sizeof err) != 0) {
            failed = 1;
        } else {
            made = i + 1;
            failed = fill_rows(b, tables[i], 1, b->cfg.sizes[i], 0, err, sizeof err) != 0;
        }
    }
    if (failed) {
        for (k = 0; k < ne; k++)
            res_fail(&b->res[e[k].res], err);
    } else {
        run_entries(b, e, ne);
    }
    for (i = 0; i < made; i++) {
        if (drop_table(b, tables[i], err, sizeof err) != 0) {
            fprintf(stderr, "%s: cleanup: %s\n", PROG, err);
            b->cleanup_ok = 0;
        }
    }
}

static void reap_during(bench *b, void *arg)
{
    reap_arg *ra = arg;
    rowlock_reap_options o = ROWLOCK_REAP_OPTIONS_INIT;
    rowlock_reap_stats st0 = ROWLOCK_REAP_STATS_INIT;
    int64_t t0 = now_ns();
    o.grace_ms = 0;
    o.batch = b->cfg.reaper_batch;
    o.pause_ms = b->cfg.reaper_pause;
    o.max_ms = 600000;
    ra->stats = st0;
    ra->rc = rowlock_admin_reap(b->admin, &o, &ra->stats);
    ra->wall_s = (double)(now_ns() - t0) / 1e9;
    if (ra->rc != 0)
        setf(ra->err, sizeof ra->err, "reap: %s (%s)", rowlock_client_errmsg(b->admin),
             rowlock_error_name(ra->rc));
}

/*
 * The reaper: fill the lock table with stale rows, then run a live client's
 * acquire+release loop while rowlock_admin_reap() purges them (grace 0) from the
 * main thread. The baseline is the same loop without the reaper, half just
 * before the purge (stale rows present) and half just after it, so that it
 * brackets the purge in time.
 */
void scenario_reaper(bench *b)
{
    uint64_t rows = b->cfg.reaper_rows;
    int st;
    for (st = 0; st < ST_COUNT; st++) {
        char err[400], sql[256];
        entry e;
        result *r, base;
        acc ab;
        reap_arg ra;
        size_t ne = 0;
        uint64_t left = 0;
        if (add_entry(b, &e, &ne, SC_REAPER, st, 1, 0, rows, b->table, b->table) != 0)
            return;
        if (ne == 0)
            continue;
        if (clean_table(b, b->table, err, sizeof err) != 0 ||
            fill_rows(b, b->table, 1, rows, 1, err, sizeof err) != 0) {
            res_fail(&b->res[e.res], err);
            continue;
        }
        memset(&base, 0, sizeof base);
        memset(&ab, 0, sizeof ab);
        memset(&ra, 0, sizeof ra);
        base.ok = 1;
        run_round(b, &e.m, b->cfg.seconds / 2, NULL, NULL, &ab, &base);
        run_round(b, &e.m, 0, reap_during, &ra, &e.a, &b->res[e.res]);
        run_round(b, &e.m, b->cfg.seconds / 2, NULL, NULL, &ab, &base);
        acc_finish(&ab, &base, 1, 0);
        r = &b->res[e.res];
        acc_finish(&e.a, r, 1, 0);
        if (!base.ok)
            res_fail(r, base.err);
        else if (base.ops == 0 && !g_interrupted)
            res_fail(r, "no operation completed without the reaper");
        r->base_acq_p99 = base.acq_p99;
        r->purge_s = ra.wall_s;
        r->purged = (double)ra.stats.purged;
        if (ra.rc != 0)
            res_fail(r, ra.err);
        else if (!ra.stats.complete)
            res_fail(r, "reap stopped before purging everything");
        setf(sql, sizeof sql, "SELECT COUNT(*) FROM `%s` WHERE name LIKE 'fill-%%'", b->table);
        if (q_u64(b->mon, sql, 0, &left, err, sizeof err) != 0) {
            res_fail(r, err);
        } else if (left != 0) {
            setf(err, sizeof err, "%" PRIu64 " stale rows left after the purge", left);
            res_fail(r, err);
        }
        if (clean_table(b, b->table, err, sizeof err) != 0)
            b->cleanup_ok = 0;
    }
}
