/*
 * rowlock-bench: the results table, JSON lines and the targets with their ratios.
 */
#include "bench.h"

/* ---- output ------------------------------------------------------------------- */

static void json_num(FILE *f, const char *key, double v, int prec)
{
    if (isnan(v) || isinf(v))
        fprintf(f, ",\"%s\":null", key);
    else
        fprintf(f, ",\"%s\":%.*f", key, prec, v);
}

void print_json(const bench *b, const result *r)
{
    FILE *f = stdout;
    fprintf(f, "{\"scenario\":\"%s\",\"strategy\":\"%s\",\"clients\":%u,\"rows\":%" PRIu64,
            sc_names[r->sc], st_names[r->st], r->clients, r->rows);
    json_num(f, "seconds", r->seconds, 3);
    fprintf(f, ",\"ops\":%" PRIu64, r->ops);
    json_num(f, "ops_per_s", r->ops_per_s, 1);
    json_num(f, "p50_us", r->p50, 1);
    json_num(f, "p99_us", r->p99, 1);
    json_num(f, "acquire_p50_us", r->acq_p50, 1);
    json_num(f, "acquire_p99_us", r->acq_p99, 1);
    json_num(f, "handoff_p50_us", r->ho_p50, 1);
    json_num(f, "handoff_p99_us", r->ho_p99, 1);
    json_num(f, "handoff_samples", r->ho_n, 0);
    json_num(f, "grants_min", r->gmin, 0);
    json_num(f, "grants_max", r->gmax, 0);
    json_num(f, "fairness", r->fairness, 3);
    json_num(f, "round_trips_per_cycle", r->rt_cycle, 2);
    json_num(f, "round_trips_acquire", r->rt_acq, 2);
    json_num(f, "round_trips_release", r->rt_rel, 2);
    json_num(f, "round_trips_renew", r->rt_renew, 2);
    json_num(f, "cpu_us_per_op", r->cpu_us, 1);
    json_num(f, "purge_s", r->purge_s, 3);
    json_num(f, "purged_rows", r->purged, 0);
    json_num(f, "baseline_acquire_p99_us", r->base_acq_p99, 1);
    fprintf(f, ",\"hold_us\":%u,\"ok\":%s,\"error\":", r->sc == SC_HOT ? b->cfg.hold_us : 0,
            r->ok ? "true" : "false");
    if (r->ok)
        fputs("null", f);
    else
        cli_json_string(f, r->err);
    fputs(",\"server_version\":", f);
    cli_json_string(f, b->version);
    fprintf(f, ",\"innodb_flush_log_at_trx_commit\":%s,\"sync_binlog\":%s,\"log_bin\":%s}\n",
            b->flush, b->sync_binlog, strcmp(b->log_bin, "1") == 0 ? "true" : "false");
}

/* Format v with `prec` decimals, "-" for not applicable. */
static const char *fmtd(char *buf, size_t cap, double v, int prec)
{
    if (isnan(v) || isinf(v))
        setf(buf, cap, "-");
    else
        setf(buf, cap, "%.*f", prec, v);
    return buf;
}

void print_table(const bench *b, FILE *f)
{
    size_t k;
    char c[12][32];

    fprintf(f, "\nrowlock-bench %s: server %s, innodb_flush_log_at_trx_commit=%s sync_binlog=%s "
               "log_bin=%s; table %s.%s; %.1f s per result in %u round%s%s; hold %u us (hot); %ld CPUs here\n",
            rowlock_version(), b->version, b->flush, b->sync_binlog,
            strcmp(b->log_bin, "1") == 0 ? "ON" : "OFF", b->db, b->table, b->cfg.seconds,
            b->cfg.rounds, b->cfg.rounds == 1 ? "" : "s",
            b->cfg.quick ? " (--quick)" : "", b->cfg.hold_us, sysconf(_SC_NPROCESSORS_ONLN));
    fprintf(f, "%-11s %-17s %4s %8s %9s %8s %8s %8s %8s %8s %13s %5s %5s %6s %-4s %s\n", "scenario",
            "strategy", "cli", "rows", "ops/s", "p50 us", "p99 us", "acq p99", "ho p50", "ho p99",
            "grants min/max", "fair", "rt", "cpu us", "ok", "notes");
    for (k = 0; k < b->nres; k++) {
        const result *r = &b->res[k];
        char grants[40], note[400];
        note[0] = '\0';
        if (isnan(r->gmin) || r->clients < 2)
            setf(grants, sizeof grants, "-");
        else
            setf(grants, sizeof grants, "%.0f/%.0f", r->gmin, r->gmax);
        if (r->sc == SC_UNCONTENDED && !isnan(r->rt_acq))
            setf(note, sizeof note, "rt acquire %.2f release %.2f renew %s", r->rt_acq, r->rt_rel,
                 fmtd(c[11], sizeof c[11], r->rt_renew, 2));
        if (r->sc == SC_REAPER && !isnan(r->purge_s))
            setf(note, sizeof note, "purged %.0f rows in %.2f s; acq p99 without reaper %s us",
                 r->purged, r->purge_s, fmtd(c[11], sizeof c[11], r->base_acq_p99, 1));
        if (!r->ok) {
            size_t l = strlen(note);
            setf(note + l, sizeof note - l, "%s%s", l ? "; " : "", r->err);
        }
        fprintf(f, "%-11s %-17s %4u %8" PRIu64 " %9s %8s %8s %8s %8s %8s %13s %5s %5s %6s %-4s %s\n",
                sc_names[r->sc], st_names[r->st], r->clients, r->rows,
                fmtd(c[0], 32, r->ops_per_s, 0), fmtd(c[1], 32, r->p50, 1), fmtd(c[2], 32, r->p99, 1),
                fmtd(c[3], 32, r->acq_p99, 1), fmtd(c[4], 32, r->ho_p50, 1),
                fmtd(c[5], 32, r->ho_p99, 1), grants,
                r->clients >= 2 ? fmtd(c[6], 32, r->fairness, 2) : "-",
                fmtd(c[7], 32, r->rt_cycle, 2), fmtd(c[8], 32, r->cpu_us, 1), r->ok ? "ok" : "FAIL",
                note);
    }
}

/* One target line: "<what>  <value>  (<cmp> <limit>)  PASS|MISS", or n/a
 * when a figure is missing. */
static void target(FILE *f, const char *what, double v, const char *cmp, double limit)
{
    int ok;
    if (isnan(v) || isinf(v) || isnan(limit)) {
        fprintf(f, "  %-64s %9s  %-13s n/a\n", what, "-", "");
        return;
    }
    ok = cmp[0] == '>' ? v >= limit : v <= limit;
    /* A value that rounds onto its limit gets the digits that decide it. */
    fprintf(f, "  %-64s %9.*f  (%s %7.3f)  %s\n", what, fabs(v - limit) < 0.0005 ? 5 : 3, v, cmp,
            limit, ok ? "PASS" : "MISS");
}

/* A figure printed for context, without a target. */
static void info(FILE *f, const char *what, double v)
{
    if (isnan(v) || isinf(v))
        fprintf(f, "  %-64s %9s\n", what, "-");
    else
        fprintf(f, "  %-64s %9.3f\n", what, v);
}

static double ratio(double a, double b)
{
    if (isnan(a) || isnan(b) || b == 0)
        return NAN;
    return a / b;
}

static void targets_uncontended(const bench *b, FILE *f)
{
    const result *x, *y, *g;
    char what[160];
    int st;

    x = res_find(b, SC_UNCONTENDED, ST_FOR_UPDATE, 1, 0);
    g = res_find(b, SC_UNCONTENDED, ST_GET_LOCK, 1, 0);
    target(f, "uncontended for-update rate / get_lock rate",
           ratio(RV(x, ops_per_s), RV(g, ops_per_s)), ">=", 0.5);
    y = res_find(b, SC_UNCONTENDED, ST_RAW, 1, 0);
    for (st = ST_INSERT; st <= ST_OPTIMISTIC; st += 2) {
        x = res_find(b, SC_UNCONTENDED, st, 1, 0);
        setf(what, sizeof what, "uncontended %s rate / raw_insert_delete rate", st_names[st]);
        target(f, what, ratio(RV(x, ops_per_s), RV(y, ops_per_s)), ">=", 0.8);
    }
    y = res_find(b, SC_UNCONTENDED, ST_DO1, 1, 0);
    for (st = ST_INSERT; st <= ST_RAW; st++) {
        x = res_find(b, SC_UNCONTENDED, st, 1, 0);
        setf(what, sizeof what, "  uncontended %s cycle p50 / DO 1 p50", st_names[st]);
        info(f, what, ratio(RV(x, p50), RV(y, p50)));
    }
}

static void targets_hot(const bench *b, FILE *f)
{
    const result *x, *y, *g;
    char what[160];
    unsigned lo = UINT32_MAX, hi = 0, k;
    int st;

    for (k = 0; k < b->cfg.nhot; k++) {
        if (b->cfg.hot[k] < lo)
            lo = b->cfg.hot[k];
        if (b->cfg.hot[k] > hi)
            hi = b->cfg.hot[k];
    }
    if (hi == 0)
        return;
    if (lo < hi) {
        double glr;
        g = res_find(b, SC_HOT, ST_GET_LOCK, hi, 0);
        y = res_find(b, SC_HOT, ST_GET_LOCK, lo, 0);
        glr = ratio(RV(g, ops_per_s), RV(y, ops_per_s));
        for (st = ST_INSERT; st <= ST_RAW; st++) {
            x = res_find(b, SC_HOT, st, hi, 0);
            y = res_find(b, SC_HOT, st, lo, 0);
            setf(what, sizeof what, "%shot %s grants/s, %u / %u clients%s", ST_IS_LIB(st) ? "" : "  ",
                 st_names[st], hi, lo, ST_IS_LIB(st) ? " (>= get_lock's)" : "");
            if (ST_IS_LIB(st))
                target(f, what, ratio(RV(x, ops_per_s), RV(y, ops_per_s)), ">=", glr);
            else
                info(f, what, ratio(RV(x, ops_per_s), RV(y, ops_per_s)));
        }
    }
    g = res_find(b, SC_HOT, ST_GET_LOCK, hi, 0);
    x = res_find(b, SC_HOT, ST_FOR_UPDATE, hi, 0);
    setf(what, sizeof what, "hot %u clients: for-update hand-off p50 / get_lock's", hi);
    target(f, what, ratio(RV(x, ho_p50), RV(g, ho_p50)), "<=", 2.0);
    for (st = ST_INSERT; st <= ST_OPTIMISTIC; st += 2) {
        x = res_find(b, SC_HOT, st, hi, 0);
        setf(what, sizeof what, "hot %u clients: %s hand-off p50 (us)", hi, st_names[st]);
        target(f, what, RV(x, ho_p50), "<=", 500);
        setf(what, sizeof what, "hot %u clients: %s hand-off p99 (us)", hi, st_names[st]);
        target(f, what, RV(x, ho_p99), "<=", 1500);
    }
    /* The same targets relative to this disk: a durable hand-off cannot
     * beat one commit's flush, and the raw INSERT+DELETE cycle (two such
     * commits) measures it here. The 500 us were set against a
     * 390 us cycle: a ratio of 1.28. */
    y = res_find(b, SC_UNCONTENDED, ST_RAW, 1, 0);
    for (st = ST_INSERT; st <= ST_OPTIMISTIC; st += 2) {
        x = res_find(b, SC_HOT, st, hi, 0);
        setf(what, sizeof what, "  hot %u clients: %s hand-off p50 / raw INSERT+DELETE cycle p50", hi,
             st_names[st]);
        info(f, what, ratio(RV(x, ho_p50), RV(y, p50)));
    }
    for (st = ST_GET_LOCK; st <= ST_RAW; st++) {
        x = res_find(b, SC_HOT, st, hi, 0);
        setf(what, sizeof what, "  hot %u clients: %s hand-off p50 (us)", hi, st_names[st]);
        info(f, what, RV(x, ho_p50));
        setf(what, sizeof what, "  hot %u clients: %s hand-off p99 (us)", hi, st_names[st]);
        info(f, what, RV(x, ho_p99));
    }
    for (k = 0; k < b->cfg.nhot; k++) {
        if (b->cfg.hot[k] < 8)
            continue;
        for (st = ST_INSERT; st <= ST_RAW; st++) {
            x = res_find(b, SC_HOT, st, b->cfg.hot[k], 0);
            setf(what, sizeof what, "%shot %u clients: %s fairness (fewest/most grants)",
                 ST_IS_LIB(st) ? "" : "  ", b->cfg.hot[k], st_names[st]);
            if (ST_IS_LIB(st))
                target(f, what, RV(x, fairness), ">=", 0.5);
            else
                info(f, what, RV(x, fairness));
        }
    }
}

static void targets_table_size(const bench *b, FILE *f)
{
    const result *x, *y;
    char what[160];
    uint64_t small = b->cfg.sizes[0], big = b->cfg.sizes[b->cfg.nsizes - 1];
    int st;

    if (b->cfg.nsizes < 2)
        return;
    for (st = ST_INSERT; st <= ST_RAW; st++) {
        x = res_find(b, SC_TABLE_SIZE, st, 1, big);
        y = res_find(b, SC_TABLE_SIZE, st, 1, small);
        setf(what, sizeof what, "%s%s acquire p50 at %" PRIu64 " rows / at %" PRIu64 " rows",
             ST_IS_LIB(st) ? "" : "  ", st_names[st], big, small);
        if (ST_IS_LIB(st))
            target(f, what, ratio(RV(x, acq_p50), RV(y, acq_p50)), "<=", 1.2);
        else
            info(f, what, ratio(RV(x, acq_p50), RV(y, acq_p50)));
    }
}

static void targets_reaper(const bench *b, FILE *f)
{
    const result *x;
    char what[160];
    int st;

    for (st = 0; st < ST_COUNT; st++) {
        x = res_find(b, SC_REAPER, st, 1, b->cfg.reaper_rows);
        if (x == NULL)
            continue;
        setf(what, sizeof what, "%sreaper: seconds to purge %" PRIu64 " rows (live %s)",
             ST_IS_LIB(st) ? "" : "  ", b->cfg.reaper_rows, st_names[st]);
        if (ST_IS_LIB(st))
            target(f, what, RV(x, purge_s), "<=", 60);
        else
            info(f, what, RV(x, purge_s));
        setf(what, sizeof what, "%sreaper: %s acquire p99 during purge / without",
             ST_IS_LIB(st) ? "" : "  ", st_names[st]);
        if (ST_IS_LIB(st))
            target(f, what, ratio(RV(x, acq_p99), RV(x, base_acq_p99)), "<=", 2.0);
        else
            info(f, what, ratio(RV(x, acq_p99), RV(x, base_acq_p99)));
    }
}

void print_targets(const bench *b, FILE *f)
{
    fprintf(f, "\nratios and targets (informational: the exit code reflects only the ok column)\n");
    if (b->cfg.sc_mask & (1u << SC_UNCONTENDED))
        targets_uncontended(b, f);
    if (b->cfg.sc_mask & (1u << SC_HOT))
        targets_hot(b, f);
    if (b->cfg.sc_mask & (1u << SC_TABLE_SIZE))
        targets_table_size(b, f);
    if (b->cfg.sc_mask & (1u << SC_REAPER))
        targets_reaper(b, f);
}
