/*
 * rowlock-bench: the result records of a run, and their keys: the
 * strategies and scenarios (their names, and which scenario runs which).
 */
#include "bench.h"

/* ---- strategies and scenarios ------------------------------------------- */

const char *const st_names[ST_COUNT] = {
    "insert", "for-update", "optimistic", "get_lock", "raw_insert_delete", "do1"
};

const char *const sc_names[SC_COUNT] = {
    "uncontended", "hot", "many", "table_size", "reaper"
};

/* Whether a scenario runs a strategy: do1 holds nothing, so it has no hot
 * scenario; everything else runs everywhere. */
int sc_applies(int sc, int st)
{
    return !(sc == SC_HOT && st == ST_DO1);
}

/* ---- configuration, results ------------------------------------------------ */

result *res_new(bench *b, int sc, int st, unsigned clients, uint64_t rows)
{
    result *r;
    if (b->nres == b->capres) {
        size_t ncap = b->capres ? b->capres * 2 : 64;
        result *nr = realloc(b->res, ncap * sizeof *nr);
        if (nr == NULL)
            return NULL;
        b->res = nr;
        b->capres = ncap;
    }
    r = &b->res[b->nres++];
    memset(r, 0, sizeof *r);
    r->sc = sc;
    r->st = st;
    r->clients = clients;
    r->rows = rows;
    r->ok = 1;
    r->ops_per_s = r->p50 = r->p99 = r->acq_p50 = r->acq_p99 = NAN;
    r->ho_p50 = r->ho_p99 = r->ho_n = r->gmin = r->gmax = r->fairness = NAN;
    r->rt_cycle = r->rt_acq = r->rt_rel = r->rt_renew = r->cpu_us = NAN;
    r->purge_s = r->purged = r->base_acq_p99 = NAN;
    return r;
}

void res_fail(result *r, const char *msg)
{
    r->ok = 0;
    if (r->err[0] == '\0')
        setf(r->err, sizeof r->err, "%s", msg);
}

const result *res_find(const bench *b, int sc, int st, unsigned clients, uint64_t rows)
{
    size_t k;
    for (k = 0; k < b->nres; k++) {
        const result *r = &b->res[k];
        if (r->sc == sc && r->st == st && r->clients == clients && r->rows == rows)
            return r;
    }
    return NULL;
}
