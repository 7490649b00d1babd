/*
 * rowlock-bench: a measurement: N threads, one client each, in rounds; and
 * the round trips of one client's calls, counted by the server.
 */
#include "bench.h"

/* ---- a measurement: N threads, one client each ------------------------------ */

static void spin_ns(int64_t ns)
{
    int64_t end = now_ns() + ns;
    while (now_ns() < end) {
    }
}

static void w_fail(worker *w, const char *what)
{
    if (!w->failed)
        setf(w->err, sizeof w->err, "client %u: %s: %s", w->id, what, w->c.err);
    w->failed = 1;
}

static void loop_hot(worker *w)
{
    run *r = w->r;
    while (!A_LOAD(&r->stop)) {
        int64_t t0 = now_ns(), tg, tr, t_stop, s0;
        uint64_t v;
        int prev, counted;
        int rc = bc_acquire(&w->c, ROWLOCK_WAIT_FOREVER);
        if (rc != 0) {
            w_fail(w, rc > 0 ? "acquire gave up" : "acquire");
            return;
        }
        tg = now_ns();
        t_stop = A_LOAD(&r->t_stop);
        counted = tg <= t_stop;
        if (A_XCHG(&r->holder, 1) != 0)
            A_STORE(&r->overlap, 1);
        prev = A_LOAD(&r->last_holder);
        if (counted && prev >= 0 && prev != (int)w->id) {
            size_t k = A_ADD(&r->ho_n, (size_t)1);
            if (k < r->ho_cap)
                r->ho[k] = tg - A_LOAD(&r->last_rel_ns);
        }
        if (w->c.token != 0) {
            if (w->c.token <= A_LOAD(&r->last_token))
                A_STORE(&r->token_bad, 1);
            A_STORE(&r->last_token, w->c.token);
        }
        /* A read-modify-write that is only correct under mutual exclusion. */
        v = A_LOAD(&r->counter);
        s0 = now_ns();
        spin_ns(r->hold_ns);
        w->spin_ns += now_ns() - s0;
        A_STORE(&r->counter, v + 1);
        A_ADD(&r->grants, (uint64_t)1);
        if (counted) {
            w->ops++;
            vec_push(&w->acq, tg - t0);
        }
        w->ops_all++;
        A_STORE(&r->last_holder, (int)w->id);
        tr = now_ns();
        A_STORE(&r->last_rel_ns, tr);
        A_STORE(&r->holder, 0);
        if (bc_release(&w->c) != 0) {
            w_fail(w, "release");
            return;
        }
    }
}

static void loop_own(worker *w)
{
    run *r = w->r;
    while (!A_LOAD(&r->stop)) {
        int64_t t0 = now_ns(), t1, t2;
        int rc = bc_acquire(&w->c, r->wait_ms);
        t1 = now_ns();
        if (rc != 0) {
            w_fail(w, rc > 0 ? "acquire of an uncontended name was refused" : "acquire");
            return;
        }
        if (w->c.token != 0) {
            if (w->c.token <= w->last_token)
                A_STORE(&r->token_bad, 1);
            w->last_token = w->c.token;
        }
        if (bc_release(&w->c) != 0) {
            w_fail(w, "release");
            return;
        }
        t2 = now_ns();
        w->ops_all++;
        if (t2 <= A_LOAD(&r->t_stop)) {
            w->ops++;
            vec_push(&w->cyc, t2 - t0);
            vec_push(&w->acq, t1 - t0);
        }
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    run *r = w->r;
    char name[160];
    int ok, k;

    if (r->hot)
        setf(name, sizeof name, "%s", r->name);
    else
        setf(name, sizeof name, "%s-%u", r->name, w->id);
    ok = bc_open(r->b, &w->c, r->st, name, r->table, r->rawtable, w->id) == 0;
    if (!ok)
        w_fail(w, "connect");
    /* Warm up: prepared statements, first row insert, connection buffers. */
    for (k = 0; ok && k < 2; k++) {
        int rc = bc_acquire(&w->c, r->hot ? ROWLOCK_WAIT_FOREVER : r->wait_ms);
        if (rc != 0) {
            w_fail(w, "warm-up acquire");
            ok = 0;
        } else if (bc_release(&w->c) != 0) {
            w_fail(w, "warm-up release");
            ok = 0;
        }
    }
    if (ok && w->c.token != 0)
        w->last_token = w->c.token;

    pthread_mutex_lock(&r->mu);
    r->ready++;
    pthread_cond_broadcast(&r->cv);
    while (!r->go)
        pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);

    if (ok) {
        int64_t c0 = thread_cpu_ns();
        if (r->hot)
            loop_hot(w);
        else
            loop_own(w);
        w->cpu_ns = thread_cpu_ns() - c0;
    }
    bc_close(&w->c);
    return NULL;
}

/*
 * Run one round of a measurement: start n threads, wait until all are
 * connected and warm, then measure for `seconds` (or while `during` runs, in
 * the main thread), stop, let queued waiters drain, and add what was seen to
 * `a`. Failed checks go to `res`.
 */
void run_round(bench *b, const mspec *m, double seconds, void (*during)(bench *, void *),
                      void *arg, acc *a, result *res)
{
    run r;
    unsigned k, started = 0;
    uint64_t gmin = UINT64_MAX, gmax = 0;

    memset(&r, 0, sizeof r);
    r.b = b;
    r.st = m->st;
    r.n = m->n;
    r.hot = m->hot;
    r.wait_ms = 5000;
    r.hold_ns = m->hot ? (int64_t)b->cfg.hold_us * 1000 : 0;
    r.last_holder = -1;
    r.t_stop = INT64_MAX;
    setf(r.name, sizeof r.name, "%s", m->name);
    setf(r.table, sizeof r.table, "%s", m->table);
    setf(r.rawtable, sizeof r.rawtable, "%s", m->rawtable);
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    r.w = calloc(m->n, sizeof *r.w);
    if (m->hot) {
        r.ho_cap = (size_t)(seconds * 100000.0) + 100000;
        if (r.ho_cap > SAMPLES_MAX)
            r.ho_cap = SAMPLES_MAX;
        r.ho = malloc(r.ho_cap * sizeof *r.ho);
    }
    if (r.w == NULL || (m->hot && r.ho == NULL)) {
        res_fail(res, "out of memory");
        goto out;
    }

    if (b->cfg.verbose)
        fprintf(stderr, "%s: %s %s, %u client%s, %s\n", PROG, sc_names[m->sc], st_names[m->st],
                m->n, m->n == 1 ? "" : "s", m->table);
    wd_arm("connecting and warming up", 60.0 + m->n);
    for (k = 0; k < m->n; k++) {
        r.w[k].r = &r;
        r.w[k].id = k;
        if (pthread_create(&r.w[k].th, NULL, worker_main, &r.w[k]) != 0) {
            r.w[k].failed = 1;
            setf(r.w[k].err, sizeof r.w[k].err, "client %u: cannot start a thread", k);
            break;
        }
        started++;
    }
    pthread_mutex_lock(&r.mu);
    while (r.ready < started)
        pthread_cond_wait(&r.cv, &r.mu);
    r.t_start = now_ns();
    r.go = 1;
    pthread_cond_broadcast(&r.cv);
    pthread_mutex_unlock(&r.mu);

    if (during != NULL) {
        wd_arm("the reaper", 900.0);
        during(b, arg);
    } else {
        int64_t end = r.t_start + (int64_t)(seconds * 1e9);
        wd_arm("a measurement", seconds + 60.0);
        while (!g_interrupted && now_ns() < end)
            sleep_ns(end - now_ns() < 50000000 ? end - now_ns() : 50000000);
    }
    A_STORE(&r.t_stop, now_ns());
    A_STORE(&r.stop, 1);
    /* Waiters still queued get the lock once more each, then leave. */
    wd_arm("stopping the clients", 120.0 + m->n);
    for (k = 0; k < started; k++)
        pthread_join(r.w[k].th, NULL);
    wd_disarm();

    a->elapsed += (double)(r.t_stop - r.t_start) / 1e9;
    for (k = 0; k < m->n; k++) {
        worker *w = &r.w[k];
        size_t j;
        if (w->failed)
            res_fail(res, w->err);
        a->ops += w->ops;
        a->ops_all += w->ops_all;
        a->cpu_ns += w->cpu_ns - w->spin_ns;
        if (w->ops < gmin)
            gmin = w->ops;
        if (w->ops > gmax)
            gmax = w->ops;
        for (j = 0; j < w->cyc.n; j++)
            vec_push(&a->cyc, w->cyc.v[j]);
        for (j = 0; j < w->acq.n; j++)
            vec_push(&a->acq, w->acq.v[j]);
        vec_free(&w->cyc);
        vec_free(&w->acq);
    }
    if (a->rounds < MAX_ROUNDS) {
        a->gmin[a->rounds] = gmin;
        a->gmax[a->rounds] = gmax;
        a->rounds++;
    }
    if (m->hot) {
        size_t hn = A_LOAD(&r.ho_n), j;
        if (hn > r.ho_cap)
            hn = r.ho_cap;
        for (j = 0; j < hn; j++)
            vec_push(&a->ho, r.ho[j]);
        if (r.overlap)
            res_fail(res, "two clients held the lock at once");
        if (r.counter != r.grants) {
            char msg[160];
            setf(msg, sizeof msg, "shared counter %" PRIu64 " != %" PRIu64 " grants (lost updates)",
                 r.counter, r.grants);
            res_fail(res, msg);
        }
    }
    if (r.token_bad)
        res_fail(res, "fencing tokens did not strictly increase");
    if (g_interrupted)
        res_fail(res, "interrupted");
out:
    free(r.ho);
    free(r.w);
    pthread_mutex_destroy(&r.mu);
    pthread_cond_destroy(&r.cv);
}

/* Turn the rounds of one result into its figures, and free them. */
void acc_finish(acc *a, result *res, unsigned n, int hot)
{
    unsigned k, best = 0, order[MAX_ROUNDS];

    res->seconds = a->elapsed;
    res->ops = a->ops;
    res->ops_per_s = a->elapsed > 0 ? (double)a->ops / a->elapsed : NAN;
    qsort(a->acq.v, a->acq.n, sizeof *a->acq.v, cmp_i64);
    res->acq_p50 = pct_us(a->acq.v, a->acq.n, 50);
    res->acq_p99 = pct_us(a->acq.v, a->acq.n, 99);
    if (hot) {
        /* For hot, the latency columns are the wait for a grant. */
        res->p50 = res->acq_p50;
        res->p99 = res->acq_p99;
        qsort(a->ho.v, a->ho.n, sizeof *a->ho.v, cmp_i64);
        res->ho_p50 = pct_us(a->ho.v, a->ho.n, 50);
        res->ho_p99 = pct_us(a->ho.v, a->ho.n, 99);
        res->ho_n = (double)a->ho.n;
    } else {
        qsort(a->cyc.v, a->cyc.n, sizeof *a->cyc.v, cmp_i64);
        res->p50 = pct_us(a->cyc.v, a->cyc.n, 50);
        res->p99 = pct_us(a->cyc.v, a->cyc.n, 99);
    }
    /* Fairness is a property of one continuous run: summing per-client grants
     * over rounds would even it out. Report the round with the median
     * fairness (the lower median for an even count). */
    if (a->rounds > 0) {
        for (k = 0; k < a->rounds; k++)
            order[k] = k;
        for (k = 1; k < a->rounds; k++) {
            unsigned j = k, t;
            while (j > 0 && a->gmin[order[j - 1]] * a->gmax[order[j]] >
                                a->gmin[order[j]] * a->gmax[order[j - 1]]) {
                t = order[j];
                order[j] = order[j - 1];
                order[j - 1] = t;
                j--;
            }
        }
        best = order[(a->rounds - 1) / 2];
        res->gmin = (double)a->gmin[best];
        res->gmax = (double)a->gmax[best];
        if (n >= 2 && a->gmax[best] > 0)
            res->fairness = res->gmin / res->gmax;
    }
    if (a->ops_all > 0)
        res->cpu_us = (double)a->cpu_ns / 1000.0 / (double)a->ops_all;
    vec_free(&a->cyc);
    vec_free(&a->acq);
    vec_free(&a->ho);
    memset(a, 0, sizeof *a);
}

/* ---- round trips per operation, counted by the server ------------------------- */

static int questions(bench *b, uint64_t *out)
{
    char err[256];
    return q_u64(b->mon, "SHOW GLOBAL STATUS LIKE 'Questions'", 1, out, err, sizeof err) == 0 ? 0 : -1;
}

/*
 * Count statements the server received per acquire, renew and release: read
 * the global Questions counter from the monitor connection around each call.
 * The monitor's own SHOW is calibrated (two SHOWs back to back) and
 * subtracted. Concurrent traffic from others only adds, so the smallest of
 * three passes is kept.
 */
void count_round_trips(bench *b, int st, const char *rawtable, result *res)
{
    enum { N = 40, PASSES = 3 };
    bclient c;
    char name[96];
    uint64_t q0, q1, ovh = UINT64_MAX;
    double best_acq = INFINITY, best_rel = INFINITY, best_ren = INFINITY;
    int pass, i, failed = 0;

    setf(name, sizeof name, "bench-rt-%s", st_names[st]);
    if (st == ST_GET_LOCK)
        setf(name, sizeof name, "rlb-%s-rt", b->tag);
    if (bc_open(b, &c, st, name, b->table, rawtable, 9999) != 0) {
        res_fail(res, c.err);
        return;
    }
    wd_arm("counting round trips", 120.0);
    for (i = 0; i < 3 && !failed; i++)
        failed = bc_acquire(&c, 5000) != 0 || bc_release(&c) != 0;
    for (i = 0; i < 5 && !failed; i++) {
        if (questions(b, &q0) != 0 || questions(b, &q1) != 0) {
            failed = 1;
            setf(c.err, sizeof c.err, "SHOW GLOBAL STATUS failed");
        } else if (q1 - q0 < ovh) {
            ovh = q1 - q0;
        }
    }
    for (pass = 0; pass < PASSES && !failed; pass++) {
        uint64_t sa = 0, sr = 0, sn = 0;
        for (i = 0; i < N && !failed; i++) {
            uint64_t qa, qb, qc, qd;
            failed = questions(b, &qa) != 0 || bc_acquire(&c, 5000) != 0 || questions(b, &qb) != 0;
            if (!failed && ST_IS_LIB(st))
                failed = bc_renew(&c) != 0;
            if (!failed)
                failed = questions(b, &qc) != 0 || bc_release(&c) != 0 || questions(b, &qd) != 0;
            if (!failed) {
                sa += qb - qa - ovh;
                sn += qc - qb - ovh;
                sr += qd - qc - ovh;
            }
        }
        if (!failed) {
            if ((double)sa / N < best_acq)
                best_acq = (double)sa / N;
            if ((double)sn / N < best_ren)
                best_ren = (double)sn / N;
            if ((double)sr / N < best_rel)
                best_rel = (double)sr / N;
        }
    }
    wd_disarm();
    if (failed) {
        char m[400];
        setf(m, sizeof m, "counting round trips: %s", c.err);
        res_fail(res, m);
    } else {
        res->rt_acq = best_acq;
        res->rt_rel = best_rel;
        res->rt_renew = ST_IS_LIB(st) ? best_ren : NAN;
        res->rt_cycle = best_acq + best_rel;
    }
    bc_close(&c);
}
