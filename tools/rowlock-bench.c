/*
 * rowlock-bench: measure rowlock's three strategies against the server's own
 * GET_LOCK()/RELEASE_LOCK() and raw SQL floors (DO 1, a bare INSERT+DELETE),
 * in the same run so that the ratios hold on a noisy machine.
 *
 * Scenarios (docs/bench.md says what each one measures and how):
 *   uncontended  1 client, acquire+release cycles; round trips and CPU per op
 *   hot          one name, 2/8/32 clients each holding ~50 us: grants/s,
 *                hand-off latency, fairness, mutual exclusion checked
 *   many         one name per client: aggregate grants/s
 *   table_size   acquire latency with 0 / 100k / 1M other rows in the table
 *   reaper       seconds to purge 1M stale rows and live latency meanwhile
 *
 * One client per thread (the library's rule). The raw baselines use
 * libmysqlclient directly with prepared statements, as the library does, so
 * that both sides pay the same protocol costs. Every wait is bounded: lock
 * waits by the server, phases by a watchdog thread that aborts the process
 * if a phase overruns its limit.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>

#include "cli_common.h"
#include "rowlock.h"

static const char PROG[] = "rowlock-bench";

/* ---- strategies and scenarios ------------------------------------------- */

enum { ST_INSERT, ST_FOR_UPDATE, ST_OPTIMISTIC, ST_GET_LOCK, ST_RAW, ST_DO1, ST_COUNT };
static const char *const st_names[ST_COUNT] = {
    "insert", "for-update", "optimistic", "get_lock", "raw_insert_delete", "do1"
};
#define ST_IS_LIB(s) ((s) <= ST_OPTIMISTIC)

enum { SC_UNCONTENDED, SC_HOT, SC_MANY, SC_TABLE_SIZE, SC_REAPER, SC_COUNT };
static const char *const sc_names[SC_COUNT] = {
    "uncontended", "hot", "many", "table_size", "reaper"
};

/* Whether a scenario runs a strategy: do1 holds nothing, so it has no hot
 * scenario; everything else runs everywhere. */
static int sc_applies(int sc, int st)
{
    return !(sc == SC_HOT && st == ST_DO1);
}

/* Raw client-polling backoff (hot raw_insert_delete): full jitter between
 * half and all of min(cap, base * 2^attempt). */
#define RAW_BACKOFF_BASE_US 100
#define RAW_BACKOFF_CAP_US 3200

#define LEASE_MS 30000
#define SAMPLES_MAX ((size_t)1 << 24)

/* ---- small utilities ------------------------------------------------------ */

#define A_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define A_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define A_XCHG(p, v) __atomic_exchange_n((p), (v), __ATOMIC_ACQ_REL)
#define A_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_ACQ_REL)

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts;
    if (ns <= 0)
        return;
    ts.tv_sec = (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int64_t thread_cpu_ns(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return 0;
    return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
           ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

static uint32_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return (uint32_t)(x >> 32);
}

static void setf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void setf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

/* Growable sample vector (ns). Samples beyond SAMPLES_MAX or after an
 * allocation failure are dropped (counted). */
typedef struct vec {
    int64_t *v;
    size_t n, cap;
    size_t dropped;
} vec;

static void vec_push(vec *a, int64_t x)
{
    if (a->n == a->cap) {
        size_t ncap = a->cap ? a->cap * 2 : 4096;
        int64_t *nv;
        if (ncap > SAMPLES_MAX || (nv = realloc(a->v, ncap * sizeof *nv)) == NULL) {
            a->dropped++;
            return;
        }
        a->v = nv;
        a->cap = ncap;
    }
    a->v[a->n++] = x;
}

static void vec_free(vec *a)
{
    free(a->v);
    memset(a, 0, sizeof *a);
}

static int cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* Nearest-rank percentile of n samples (sorted in place), in microseconds. */
static double pct_us(int64_t *v, size_t n, double p)
{
    size_t k;
    if (n == 0)
        return NAN;
    k = (size_t)ceil(p / 100.0 * (double)n);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return (double)v[k - 1] / 1000.0;
}

/* ---- the watchdog: every phase has a time limit ---------------------------- */

static int64_t wd_deadline;       /* ns, 0: none */
static const char *wd_phase = ""; /* static strings only */
static int wd_quit;
static volatile sig_atomic_t g_interrupted;

static void wd_arm(const char *phase, double seconds)
{
    A_STORE(&wd_phase, phase);
    A_STORE(&wd_deadline, now_ns() + (int64_t)(seconds * 1e9));
}

static void wd_disarm(void)
{
    A_STORE(&wd_deadline, (int64_t)0);
}

static void *wd_main(void *arg)
{
    (void)arg;
    while (!A_LOAD(&wd_quit)) {
        int64_t d = A_LOAD(&wd_deadline);
        if (d != 0 && now_ns() > d) {
            fprintf(stderr, "%s: %s did not finish within its time limit; aborting\n", PROG,
                    A_LOAD(&wd_phase));
            fflush(NULL);
            _exit(1);
        }
        sleep_ns(100000000);
    }
    return NULL;
}

static void on_signal(int sig)
{
    (void)sig;
    g_interrupted = 1;
}

/* ---- raw libmysqlclient helpers --------------------------------------------- */

/* Open a raw connection configured exactly as the library configures its own. */
static MYSQL *raw_connect(const rowlock_client_options *o, char *err, size_t cap)
{
    MYSQL *m = mysql_init(NULL);
    my_bool yes = 1, no = 0;
    unsigned int ct;

    if (m == NULL) {
        setf(err, cap, "raw connect: out of memory");
        return NULL;
    }
    ct = o->connect_timeout_ms ? (o->connect_timeout_ms + 999) / 1000 : 10;
    mysql_optionsv(m, MYSQL_OPT_CONNECT_TIMEOUT, &ct);
    if (o->defaults_file)
        mysql_optionsv(m, MYSQL_READ_DEFAULT_FILE, o->defaults_file);
    if (o->defaults_file || (o->flags & ROWLOCK_CLIENT_READ_DEFAULT_FILES))
        mysql_optionsv(m, MYSQL_READ_DEFAULT_GROUP, "rowlock");
    mysql_optionsv(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    switch (o->tls_mode) {
    case ROWLOCK_TLS_DEFAULT:
        break;
    case ROWLOCK_TLS_DISABLED:
        mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &no);
        break;
    case ROWLOCK_TLS_PREFERRED:
        mysql_ssl_set(m, NULL, NULL, o->tls_ca, NULL, NULL);
        break;
    case ROWLOCK_TLS_REQUIRED:
        mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &yes);
        break;
    case ROWLOCK_TLS_VERIFY_CA:
    case ROWLOCK_TLS_VERIFY_IDENTITY:
        mysql_ssl_set(m, NULL, NULL, o->tls_ca, NULL, NULL);
        mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &yes);
        mysql_optionsv(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &yes);
        break;
    }
    if (!mysql_real_connect(m, o->host, o->user, o->password, o->database, o->port,
                            o->unix_socket, 0)) {
        setf(err, cap, "raw connect: %s (%u)", mysql_error(m), mysql_errno(m));
        mysql_close(m);
        return NULL;
    }
    return m;
}

/* Run one text statement, discarding any result. 0 or the server's errno. */
static unsigned q_exec(MYSQL *m, const char *sql, uint64_t *affected, char *err, size_t cap)
{
    MYSQL_RES *res;
    if (mysql_real_query(m, sql, (unsigned long)strlen(sql)) != 0) {
        setf(err, cap, "%.80s: %s (%u)", sql, mysql_error(m), mysql_errno(m));
        return mysql_errno(m) ? mysql_errno(m) : 1;
    }
    res = mysql_store_result(m);
    if (res != NULL)
        mysql_free_result(res);
    if (affected)
        *affected = res ? 0 : (uint64_t)mysql_affected_rows(m);
    return 0;
}

/* Run a query and copy column `col` of its first row into out. */
static unsigned q_str(MYSQL *m, const char *sql, unsigned col, char *out, size_t outcap, char *err,
                      size_t cap)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    if (mysql_real_query(m, sql, (unsigned long)strlen(sql)) != 0) {
        setf(err, cap, "%.80s: %s (%u)", sql, mysql_error(m), mysql_errno(m));
        return mysql_errno(m) ? mysql_errno(m) : 1;
    }
    res = mysql_store_result(m);
    if (res == NULL) {
        setf(err, cap, "%.80s: no result", sql);
        return 1;
    }
    row = mysql_fetch_row(res);
    if (row == NULL || col >= mysql_num_fields(res)) {
        setf(err, cap, "%.80s: no row", sql);
        mysql_free_result(res);
        return 1;
    }
    setf(out, outcap, "%s", row[col] ? row[col] : "NULL");
    mysql_free_result(res);
    return 0;
}

static unsigned q_u64(MYSQL *m, const char *sql, unsigned col, uint64_t *out, char *err, size_t cap)
{
    char buf[64];
    unsigned rc = q_str(m, sql, col, buf, sizeof buf, err, cap);
    if (rc == 0)
        *out = strtoull(buf, NULL, 10);
    return rc;
}

/* A prepared statement with string parameters and at most one integer result
 * column (the first row's value is kept). */
typedef struct rstmt {
    MYSQL_STMT *st;
} rstmt;

static int rs_prepare(MYSQL *m, rstmt *s, const char *sql, char *err, size_t cap)
{
    s->st = mysql_stmt_init(m);
    if (s->st == NULL) {
        setf(err, cap, "prepare: out of memory");
        return -1;
    }
    if (mysql_stmt_prepare(s->st, sql, (unsigned long)strlen(sql)) != 0) {
        setf(err, cap, "prepare %.60s: %s (%u)", sql, mysql_stmt_error(s->st),
             mysql_stmt_errno(s->st));
        mysql_stmt_close(s->st);
        s->st = NULL;
        return -1;
    }
    return 0;
}

static void rs_close(rstmt *s)
{
    if (s->st)
        mysql_stmt_close(s->st);
    s->st = NULL;
}

/* 0 or the server's errno (message in err). */
static unsigned rs_exec(rstmt *s, const char *const *p, unsigned np, long long *val, int *isnull,
                        uint64_t *affected, char *err, size_t cap)
{
    MYSQL_BIND b[4];
    unsigned long lens[4];
    unsigned k;

    memset(b, 0, sizeof b);
    for (k = 0; k < np && k < 4; k++) {
        lens[k] = (unsigned long)strlen(p[k]);
        b[k].buffer_type = MYSQL_TYPE_STRING;
        b[k].buffer = (void *)(uintptr_t)p[k];
        b[k].buffer_length = lens[k];
        b[k].length = &lens[k];
    }
    if ((np > 0 && mysql_stmt_bind_param(s->st, b) != 0) || mysql_stmt_execute(s->st) != 0)
        goto fail;
    if (mysql_stmt_field_count(s->st) > 0) {
        MYSQL_BIND r;
        long long v = 0;
        my_bool nul = 1;
        int frc;
        memset(&r, 0, sizeof r);
        r.buffer_type = MYSQL_TYPE_LONGLONG;
        r.buffer = &v;
        r.is_null = &nul;
        if (mysql_stmt_bind_result(s->st, &r) != 0)
            goto fail;
        frc = mysql_stmt_fetch(s->st);
        if (frc == 1)
            goto fail;
        if (val)
            *val = v;
        if (isnull)
            *isnull = frc == MYSQL_NO_DATA ? 1 : (int)nul;
        while (frc == 0 || frc == MYSQL_DATA_TRUNCATED)
            frc = mysql_stmt_fetch(s->st);
        mysql_stmt_free_result(s->st);
    }
    if (affected)
        *affected = (uint64_t)mysql_stmt_affected_rows(s->st);
    return 0;
fail:
    setf(err, cap, "%s (%u)", mysql_stmt_error(s->st), mysql_stmt_errno(s->st));
    return mysql_stmt_errno(s->st) ? mysql_stmt_errno(s->st) : 1;
}

/* ---- configuration, results ------------------------------------------------ */

#define MAX_HOT 8
#define MAX_SIZES 8

typedef struct bench_cfg {
    double seconds;
    int quick, json, verbose;
    unsigned sc_mask, st_mask;
    unsigned hot[MAX_HOT];
    unsigned nhot;
    unsigned many;
    uint64_t sizes[MAX_SIZES];
    unsigned nsizes;
    uint64_t reaper_rows;
    unsigned reaper_batch; /* 0: the library's default */
    int64_t reaper_pause; /* ms between reaper batches (0: none; ROWLOCK_REAP_PAUSE_AUTO) */
    unsigned hold_us;
    unsigned rounds;
} bench_cfg;

typedef struct result {
    int sc, st;
    unsigned clients;
    uint64_t rows;
    double seconds;
    uint64_t ops;
    double ops_per_s, p50, p99, acq_p50, acq_p99, ho_p50, ho_p99, ho_n;
    double gmin, gmax, fairness;
    double rt_cycle, rt_acq, rt_rel, rt_renew, cpu_us;
    double purge_s, purged, base_acq_p99;
    int ok;
    char err[320];
} result;

typedef struct bench {
    bench_cfg cfg;
    cli_conn cc;
    rowlock_client_options wopts; /* for workers: schema checked */
    rowlock_client *admin;        /* main thread only: migrate, reap */
    MYSQL *mon;                   /* main thread only: fills, counts, Questions */
    char table[65], scratch[72], db[65];
    char tag[16];
    char version[128];
    char flush[16], sync_binlog[16], log_bin[16];
    result *res;
    size_t nres, capres;
    int cleanup_ok;
} bench;

static result *res_new(bench *b, int sc, int st, unsigned clients, uint64_t rows)
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

static void res_fail(result *r, const char *msg)
{
    r->ok = 0;
    if (r->err[0] == '\0')
        setf(r->err, sizeof r->err, "%s", msg);
}

static const result *res_find(const bench *b, int sc, int st, unsigned clients, uint64_t rows)
{
    size_t k;
    for (k = 0; k < b->nres; k++) {
        const result *r = &b->res[k];
        if (r->sc == sc && r->st == st && r->clients == clients && r->rows == rows)
            return r;
    }
    return NULL;
}

/* ---- one client of any kind ------------------------------------------------- */

typedef struct bclient {
    int st;
    rowlock_client *rc;
    rowlock_lock *lk;
    MYSQL *m;
    rstmt acq, rel;
    char name[160];
    char owner[48];
    char timeout[16]; /* GET_LOCK timeout, as text */
    uint64_t token;
    uint64_t rng;
    char err[320];
} bclient;

static void bc_close(bclient *c)
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
static int bc_open(bench *b, bclient *c, int st, const char *name, const char *table,
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
static int bc_acquire(bclient *c, int64_t wait_ms)
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

static int bc_release(bclient *c)
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

static int bc_renew(bclient *c)
{
    int rc = rowlock_renew(c->lk, LEASE_MS);
    if (rc == 0)
        return 0;
    setf(c->err, sizeof c->err, "renew: %s (%s)", rowlock_client_errmsg(c->rc), rowlock_error_name(rc));
    return -1;
}

/* ---- a measurement: N threads, one client each ------------------------------ */

#define MAX_ROUNDS 16

/* What to measure. */
typedef struct mspec {
    int sc, st;
    unsigned n;            /* clients, one thread each */
    int hot;               /* all clients on one name (else one name each) */
    const char *name;      /* lock name (hot) or its prefix */
    const char *table;     /* lock table of the rowlock clients */
    const char *rawtable;  /* table of raw INSERT+DELETE */
} mspec;

/* What the rounds of one result accumulate. */
typedef struct acc {
    vec cyc, acq, ho;
    uint64_t ops, ops_all;
    double elapsed;
    int64_t cpu_ns;
    unsigned rounds;
    uint64_t gmin[MAX_ROUNDS], gmax[MAX_ROUNDS];
} acc;

typedef struct run run;

typedef struct worker {
    run *r;
    unsigned id;
    pthread_t th;
    bclient c;
    vec cyc, acq;
    uint64_t ops;     /* cycles (grants) completed before the stop time */
    uint64_t ops_all; /* including those after it (draining) */
    uint64_t last_token;
    int64_t cpu_ns, spin_ns;
    int failed;
    char err[320];
} worker;

struct run {
    bench *b;
    int st;
    unsigned n;
    int hot;
    int64_t wait_ms, hold_ns;
    char name[96], table[72], rawtable[72];

    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned ready;
    int go;

    int stop;
    int64_t t_start, t_stop;

    /* hot: shared state, written inside the critical section */
    int holder, overlap, token_bad, last_holder;
    int64_t last_rel_ns;
    uint64_t counter, grants, last_token;
    int64_t *ho;
    size_t ho_cap, ho_n;

    worker *w;
};

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
static void run_round(bench *b, const mspec *m, double seconds, void (*during)(bench *, void *),
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
static void acc_finish(acc *a, result *res, unsigned n, int hot)
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
static void count_round_trips(bench *b, int st, const char *rawtable, result *res)
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

/* ---- table maintenance (raw, monitor connection) ------------------------------ */

/* Delete every row this bench may have left in `table`. */
static int clean_table(bench *b, const char *table, char *err, size_t cap)
{
    char sql[256];
    uint64_t aff = 0;
    int guard;
    setf(sql, sizeof sql,
         "DELETE FROM `%s` WHERE name LIKE 'bench-%%' OR name LIKE 'fill-%%' LIMIT 100000", table);
    wd_arm("cleaning the lock table", 600.0);
    for (guard = 0; guard < 10000; guard++) {
        if (q_exec(b->mon, sql, &aff, err, cap) != 0)
            return -1;
        if (aff < 100000)
            break;
    }
    wd_disarm();
    return 0;
}

/* Insert fill rows fill-<from>..fill-<to> (valid lock rows of the insert
 * strategy), 100k per statement, from MariaDB's Sequence engine. `stale`:
 * rows held by a crashed owner whose lease ended an hour ago; otherwise
 * released rows (owner NULL, count 0). */
static int fill_rows(bench *b, const char *table, uint64_t from, uint64_t to, int stale, char *err,
                     size_t cap)
{
    char sql[768];
    uint64_t a, aff = 0;
    if (from > to)
        return 0;
    if (b->cfg.verbose)
        fprintf(stderr, "%s: filling %s with rows %" PRIu64 "..%" PRIu64 "\n", PROG, table, from, to);
    wd_arm("filling the lock table", 900.0);
    for (a = from; a <= to; a += 100000) {
        uint64_t z = a + 99999 < to ? a + 99999 : to;
        setf(sql, sizeof sql,
             "INSERT INTO `%s` (name, strategy, mode, owner, count, token, acquired_at, expires_at) "
             "SELECT CONCAT('fill-', LPAD(seq, 8, '0')), 1, 0, %s, %d, 1, "
             "NOW(6) - INTERVAL %s, NOW(6) - INTERVAL %s FROM seq_%" PRIu64 "_to_%" PRIu64,
             table, stale ? "'bench-crashed-owner'" : "NULL", stale ? 1 : 0,
             stale ? "2 HOUR" : "1 MINUTE", stale ? "1 HOUR" : "1 MINUTE", a, z);
        if (q_exec(b->mon, sql, &aff, err, cap) != 0)
            return -1;
        if (aff != z - a + 1) {
            setf(err, cap, "fill: inserted %" PRIu64 " rows, expected %" PRIu64, aff, z - a + 1);
            return -1;
        }
    }
    wd_disarm();
    return 0;
}

/* Create (migrate) a lock table of the bench's own, empty. */
static int make_table(bench *b, const char *table, char *err, size_t cap)
{
    rowlock_client_options o = b->wopts;
    rowlock_client *c = NULL;
    int rc;
    o.table = table;
    o.flags |= ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK;
    rc = rowlock_client_new(&c);
    if (rc == 0)
        rc = rowlock_client_connect(c, &o);
    if (rc == 0)
        rc = rowlock_migrate(c, 0, NULL, NULL);
    if (rc != 0)
        setf(err, cap, "creating lock table %s: %s (%s)", table,
             c ? rowlock_client_errmsg(c) : rowlock_strerror(rc), rowlock_error_name(rc));
    rowlock_client_free(c);
    if (rc != 0)
        return -1;
    return clean_table(b, table, err, cap);
}

/* Drop a lock table made by make_table(): the table, its token sequence,
 * its waiter queue and its schema-version row. */
static int drop_table(bench *b, const char *table, char *err, size_t cap)
{
    char sql[256];
    setf(sql, sizeof sql, "DROP TABLE IF EXISTS `%s`", table);
    if (q_exec(b->mon, sql, NULL, err, cap) != 0)
        return -1;
    setf(sql, sizeof sql, "DROP SEQUENCE IF EXISTS `%s_token`", table);
    if (q_exec(b->mon, sql, NULL, err, cap) != 0)
        return -1;
    setf(sql, sizeof sql, "DROP TABLE IF EXISTS `%s_queue`", table);
    if (q_exec(b->mon, sql, NULL, err, cap) != 0)
        return -1;
    setf(sql, sizeof sql, "DELETE FROM rowlock_schema WHERE lock_table = '%s'", table);
    return q_exec(b->mon, sql, NULL, err, cap) != 0 ? -1 : 0;
}

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

/*
 * One result per entry of `specs`, measured in cfg.rounds rounds of
 * seconds/rounds each, the entries taking turns within every round: load
 * from elsewhere that comes and goes then lands on all of them alike.
 */
typedef struct entry {
    mspec m;
    char name[96];
    size_t res; /* index into b->res (the array may move) */
    acc a;
} entry;

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

static void scenario_simple(bench *b, int sc)
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
static void scenario_table_size(bench *b)
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

typedef struct reap_arg {
    int rc;
    rowlock_reap_stats stats;
    double wall_s;
    char err[400];
} reap_arg;

static void reap_during(bench *b, void *arg)
{
    reap_arg *ra = arg;
    rowlock_reap_options o = ROWLOCK_REAP_OPTIONS_INIT;
    rowlock_reap_stats st0 = { ROWLOCK_REAP_OPTIONS_VERSION, 0, 0, 0, 0, 0 };
    int64_t t0 = now_ns();
    o.grace_ms = 0;
    o.batch = b->cfg.reaper_batch;
    o.pause_ms = b->cfg.reaper_pause;
    o.max_ms = 600000;
    ra->stats = st0;
    ra->rc = rowlock_reap(b->admin, &o, &ra->stats);
    ra->wall_s = (double)(now_ns() - t0) / 1e9;
    if (ra->rc != 0)
        setf(ra->err, sizeof ra->err, "reap: %s (%s)", rowlock_client_errmsg(b->admin),
             rowlock_error_name(ra->rc));
}

/*
 * The reaper: fill the lock table with stale rows, then run a live client's
 * acquire+release loop while rowlock_reap() purges them (grace 0) from the
 * main thread. The baseline is the same loop without the reaper, half just
 * before the purge (stale rows present) and half just after it, so that it
 * brackets the purge in time.
 */
static void scenario_reaper(bench *b)
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

/* ---- output ------------------------------------------------------------------- */

static void json_num(FILE *f, const char *key, double v, int prec)
{
    if (isnan(v) || isinf(v))
        fprintf(f, ",\"%s\":null", key);
    else
        fprintf(f, ",\"%s\":%.*f", key, prec, v);
}

static void print_json(const bench *b, const result *r)
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

static void print_table(const bench *b, FILE *f)
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

/* A field of a result, NAN when the result is missing. */
#define RV(r, field) ((r) != NULL ? (r)->field : NAN)

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

static void print_targets(const bench *b, FILE *f)
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

/* ---- command line ----------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: %s [OPTIONS] [CONNECTION OPTIONS]\n"
            "Measure rowlock's strategies against GET_LOCK() and raw SQL floors.\n"
            "\n"
            "  --quick              short run for smoke tests (0.5 s per result, small tables)\n"
            "  --json               one JSON object per result on stdout (the table goes to stderr)\n"
            "  --scenario LIST      uncontended,hot,many,table_size,reaper (default: all)\n"
            "  --strategies LIST    insert,for-update,optimistic,get_lock,raw_insert_delete,do1\n"
            "                       (default: all)\n"
            "  --seconds S          seconds per result (default 4, --quick 0.5)\n"
            "  --rounds N           split each result into N rounds, taking turns with the\n"
            "                       other strategies/sizes of its scenario (default 4, --quick 1)\n"
            "  --clients LIST       client counts of the hot scenario (default 2,8,32)\n"
            "  --many-clients N     clients of the many scenario (default 8)\n"
            "  --rows LIST          table sizes for table_size (default 0,100000,1000000;\n"
            "                       --quick 0,1000,10000)\n"
            "  --reaper-rows N      stale rows the reaper purges (default 1000000; --quick 10000)\n"
            "  --reaper-batch N     rows per reaper DELETE (default: the library's)\n"
            "  --reaper-pause MS    pause between reaper DELETEs: auto (default: as long as\n"
            "                       the last one took), 0 (none) or milliseconds\n"
            "  --hold-us N          time each hot holder keeps the lock (default 50)\n"
            "  -v, --verbose        progress on stderr\n"
            "  --help, --version\n"
            "\n"
            "The lock table defaults to bench_locks (not rowlock_locks); the bench migrates it,\n"
            "fills it and deletes every row it wrote, and refuses a table holding other rows.\n"
            "Exit status: 0 when every result's correctness check held, 1 otherwise,\n"
            "64 usage error, 69 database unavailable.\n\n%s",
            PROG, cli_conn_help);
}

/* Parse a comma list of names from `names` into a bit mask. */
static int parse_names(const char *arg, const char *const *names, int n, unsigned *mask)
{
    const char *p = arg;
    *mask = 0;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int k, found = 0;
        if (len == 3 && strncmp(p, "all", 3) == 0) {
            *mask |= (1u << n) - 1;
            found = 1;
        }
        for (k = 0; k < n && !found; k++) {
            if (strlen(names[k]) == len && strncmp(p, names[k], len) == 0) {
                *mask |= 1u << k;
                found = 1;
            }
        }
        if (!found || len == 0)
            return -1;
        p += len;
        if (*p == ',')
            p++;
    }
    return *mask ? 0 : -1;
}

static int parse_u64_list(const char *arg, uint64_t *out, unsigned maxn, unsigned *n,
                          unsigned long long lo, unsigned long long hi)
{
    char buf[256];
    char *tok, *save = NULL;
    setf(buf, sizeof buf, "%s", arg);
    *n = 0;
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned long long v;
        if (*n >= maxn || cli_parse_uint(tok, lo, hi, &v) != 0)
            return -1;
        out[(*n)++] = v;
    }
    return *n ? 0 : -1;
}

enum {
    O_QUICK = 1, O_JSON, O_VERBOSE, O_HELP, O_VERSION, O_SCENARIO, O_STRATEGIES, O_SECONDS,
    O_CLIENTS, O_MANY, O_ROWS, O_REAPER_ROWS, O_REAPER_BATCH, O_REAPER_PAUSE, O_ROUNDS, O_HOLD
};

static const cli_optspec specs[] = {
    { "quick", 0, 0, O_QUICK },
    { "json", 0, 0, O_JSON },
    { "verbose", 'v', 0, O_VERBOSE },
    { "help", 'h', 0, O_HELP },
    { "version", 0, 0, O_VERSION },
    { "scenario", 0, 1, O_SCENARIO },
    { "strategies", 0, 1, O_STRATEGIES },
    { "seconds", 0, 1, O_SECONDS },
    { "clients", 0, 1, O_CLIENTS },
    { "many-clients", 0, 1, O_MANY },
    { "rows", 0, 1, O_ROWS },
    { "reaper-rows", 0, 1, O_REAPER_ROWS },
    { "reaper-batch", 0, 1, O_REAPER_BATCH },
    { "reaper-pause", 0, 1, O_REAPER_PAUSE },
    { "rounds", 0, 1, O_ROUNDS },
    { "hold-us", 0, 1, O_HOLD },
    { NULL, 0, 0, 0 },
};

static int parse_args(bench *b, int argc, char **argv)
{
    bench_cfg *c = &b->cfg;
    int id, seconds_set = 0, sizes_set = 0, reaper_set = 0;
    unsigned long long v;
    cli_optparser p;
    const char *val;

    c->sc_mask = (1u << SC_COUNT) - 1;
    c->st_mask = (1u << ST_COUNT) - 1;
    c->hot[0] = 2;
    c->hot[1] = 8;
    c->hot[2] = 32;
    c->nhot = 3;
    c->many = 8;
    c->hold_us = 50;
    c->reaper_pause = ROWLOCK_REAP_PAUSE_AUTO; /* the library's default */
    cli_opt_init(&p, PROG, NULL, argc, argv, 1);
    while ((id = cli_next_opt(&p, specs, &b->cc, &val)) != CLI_OP_END) {
        switch (id) {
        case CLI_OP_ERR:
            return CLI_EX_USAGE;
        case CLI_OP_CONN:
            break;
        case O_HELP:
            usage(stdout);
            return -1;
        case O_VERSION:
            printf("%s %s\n", PROG, rowlock_version());
            return -1;
        case O_QUICK:
            c->quick = 1;
            break;
        case O_JSON:
            c->json = 1;
            break;
        case O_VERBOSE:
            c->verbose = 1;
            break;
        case O_SCENARIO: {
            unsigned m;
            if (parse_names(val, sc_names, SC_COUNT, &m) != 0) {
                fprintf(stderr, "%s: --scenario: '%s' is not a list of uncontended, hot, many, "
                                "table_size, reaper\n", PROG, val);
                return CLI_EX_USAGE;
            }
            c->sc_mask = m;
            break;
        }
        case O_STRATEGIES: {
            unsigned m;
            if (parse_names(val, st_names, ST_COUNT, &m) != 0) {
                fprintf(stderr, "%s: --strategies: '%s' is not a list of insert, for-update, "
                                "optimistic, get_lock, raw_insert_delete, do1\n", PROG, val);
                return CLI_EX_USAGE;
            }
            c->st_mask = m;
            break;
        }
        case O_SECONDS:
            c->seconds = cli_parse_seconds(val);
            if (c->seconds < 0.05 || c->seconds > 3600) {
                fprintf(stderr, "%s: --seconds: '%s' is not a number of seconds in 0.05-3600\n", PROG, val);
                return CLI_EX_USAGE;
            }
            seconds_set = 1;
            break;
        case O_CLIENTS: {
            uint64_t l[MAX_HOT];
            unsigned n, k;
            if (parse_u64_list(val, l, MAX_HOT, &n, 1, 256) != 0) {
                fprintf(stderr, "%s: --clients: '%s' is not a list of 1-256 (at most %d)\n", PROG, val, MAX_HOT);
                return CLI_EX_USAGE;
            }
            for (k = 0; k < n; k++)
                c->hot[k] = (unsigned)l[k];
            c->nhot = n;
            break;
        }
        case O_MANY:
            if (cli_parse_uint(val, 1, 256, &v) != 0) {
                fprintf(stderr, "%s: --many-clients: '%s' is not a number in 1-256\n", PROG, val);
                return CLI_EX_USAGE;
            }
            c->many = (unsigned)v;
            break;
        case O_ROWS:
            if (parse_u64_list(val, c->sizes, MAX_SIZES, &c->nsizes, 0, 100000000) != 0) {
                fprintf(stderr, "%s: --rows: '%s' is not a list of row counts (at most %d, each <= 1e8)\n",
                        PROG, val, MAX_SIZES);
                return CLI_EX_USAGE;
            }
            sizes_set = 1;
            break;
        case O_REAPER_ROWS:
            if (cli_parse_uint(val, 1, 100000000, &v) != 0) {
                fprintf(stderr, "%s: --reaper-rows: '%s' is not a number in 1-1e8\n", PROG, val);
                return CLI_EX_USAGE;
            }
            c->reaper_rows = v;
            reaper_set = 1;
            break;
        case O_REAPER_BATCH:
            if (cli_parse_uint(val, 1, 1000000, &v) != 0) {
                fprintf(stderr, "%s: --reaper-batch: '%s' is not a number in 1-1000000\n", PROG, val);
                return CLI_EX_USAGE;
            }
            c->reaper_batch = (unsigned)v;
            break;
        case O_REAPER_PAUSE:
            if (cli_parse_pause(val, &c->reaper_pause) != 0) {
                fprintf(stderr, "%s: --reaper-pause: '%s' is not 'auto' or a number of ms in 0-60000\n", PROG, val);
                return CLI_EX_USAGE;
            }
            break;
        case O_ROUNDS:
            if (cli_parse_uint(val, 1, MAX_ROUNDS, &v) != 0) {
                fprintf(stderr, "%s: --rounds: '%s' is not a number in 1-%d\n", PROG, val, MAX_ROUNDS);
                return CLI_EX_USAGE;
            }
            c->rounds = (unsigned)v;
            break;
        case O_HOLD:
            if (cli_parse_uint(val, 0, 1000000, &v) != 0) {
                fprintf(stderr, "%s: --hold-us: '%s' is not a number in 0-1000000\n", PROG, val);
                return CLI_EX_USAGE;
            }
            c->hold_us = (unsigned)v;
            break;
        default:
            break;
        }
    }
    if (p.i < argc) {
        size_t w;
        char *h = cli_human_str(argv[p.i], &w);
        fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", PROG, h ? h : "?");
        free(h);
        return CLI_EX_USAGE;
    }
    if (!seconds_set)
        c->seconds = c->quick ? 0.5 : 4.0;
    if (c->rounds == 0)
        c->rounds = c->quick ? 1 : 4;
    if (!sizes_set) {
        c->sizes[0] = 0;
        c->sizes[1] = c->quick ? 1000 : 100000;
        c->sizes[2] = c->quick ? 10000 : 1000000;
        c->nsizes = 3;
    } else {
        /* ascending: the table is filled incrementally */
        unsigned x, y;
        for (x = 1; x < c->nsizes; x++)
            for (y = x; y > 0 && c->sizes[y - 1] > c->sizes[y]; y--) {
                uint64_t t = c->sizes[y];
                c->sizes[y] = c->sizes[y - 1];
                c->sizes[y - 1] = t;
            }
    }
    if (!reaper_set)
        c->reaper_rows = c->quick ? 10000 : 1000000;
    return 0;
}

/* ---- setup and teardown ------------------------------------------------------------ */

static int setup(bench *b)
{
    char err[400], sql[512];
    uint64_t n = 0, r;
    int from = 0, to = 0, rc;
    unsigned char rnd[4];
    FILE *ur;

    rc = cli_conn_open(&b->cc, PROG, ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK, &b->admin);
    if (rc != 0)
        return rc;
    rc = rowlock_migrate(b->admin, 0, &from, &to);
    if (rc != 0) {
        cli_report(PROG, "migrate", b->admin, rc);
        return cli_exit_for(rc);
    }
    setf(b->table, sizeof b->table, "%s", rowlock_client_table(b->admin));
    setf(b->scratch, sizeof b->scratch, "%s_raw", b->table);
    b->wopts = b->cc.opts;
    b->wopts.flags &= ~(unsigned int)ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK;

    b->mon = raw_connect(&b->wopts, err, sizeof err);
    if (b->mon == NULL) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return CLI_EX_UNAVAILABLE;
    }
    if (q_str(b->mon, "SELECT VERSION()", 0, b->version, sizeof b->version, err, sizeof err) ||
        q_str(b->mon, "SELECT @@innodb_flush_log_at_trx_commit", 0, b->flush, sizeof b->flush, err, sizeof err) ||
        q_str(b->mon, "SELECT @@sync_binlog", 0, b->sync_binlog, sizeof b->sync_binlog, err, sizeof err) ||
        q_str(b->mon, "SELECT @@log_bin", 0, b->log_bin, sizeof b->log_bin, err, sizeof err) ||
        q_str(b->mon, "SELECT IFNULL(DATABASE(), '')", 0, b->db, sizeof b->db, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return CLI_EX_UNAVAILABLE;
    }
    /* The bench deletes what it wrote; refuse a table that holds anything else. */
    setf(sql, sizeof sql,
         "SELECT COUNT(*) FROM (SELECT 1 FROM `%s` WHERE name NOT LIKE 'bench-%%' AND "
         "name NOT LIKE 'fill-%%' LIMIT 1) AS x", b->table);
    if (q_u64(b->mon, sql, 0, &n, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return CLI_EX_UNAVAILABLE;
    }
    if (n != 0) {
        fprintf(stderr, "%s: table %s holds locks that rowlock-bench did not write; "
                        "use a table of its own (--table=bench_locks)\n", PROG, b->table);
        return CLI_EX_USAGE;
    }
    if (b->cfg.sc_mask & ((1u << SC_TABLE_SIZE) | (1u << SC_REAPER))) {
        if (q_u64(b->mon, "SELECT COUNT(*) FROM seq_1_to_1", 0, &n, err, sizeof err) != 0) {
            fprintf(stderr, "%s: table_size and reaper fill the table from MariaDB's Sequence "
                            "engine: %s\n", PROG, err);
            return CLI_EX_UNAVAILABLE;
        }
    }
    setf(sql, sizeof sql, "CREATE TABLE IF NOT EXISTS `%s` LIKE `%s`", b->scratch, b->table);
    if (q_exec(b->mon, sql, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return CLI_EX_UNAVAILABLE;
    }
    setf(sql, sizeof sql, "DELETE FROM `%s`", b->scratch);
    if (q_exec(b->mon, sql, NULL, err, sizeof err) != 0 || clean_table(b, b->table, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return CLI_EX_UNAVAILABLE;
    }

    r = (uint64_t)now_ns() ^ (uint64_t)getpid() << 20;
    ur = fopen("/dev/urandom", "rb");
    if (ur != NULL) {
        if (fread(rnd, 1, sizeof rnd, ur) == sizeof rnd)
            r ^= (uint64_t)rnd[0] | (uint64_t)rnd[1] << 8 | (uint64_t)rnd[2] << 16 | (uint64_t)rnd[3] << 24;
        fclose(ur);
    }
    setf(b->tag, sizeof b->tag, "%08x", (unsigned)(r & 0xffffffffu));
    return 0;
}

static void teardown(bench *b)
{
    char err[400], sql[256];
    if (b->mon != NULL) {
        if (clean_table(b, b->table, err, sizeof err) != 0) {
            fprintf(stderr, "%s: cleanup: %s\n", PROG, err);
            b->cleanup_ok = 0;
        }
        setf(sql, sizeof sql, "DROP TABLE IF EXISTS `%s`", b->scratch);
        if (b->scratch[0] && q_exec(b->mon, sql, NULL, err, sizeof err) != 0) {
            fprintf(stderr, "%s: cleanup: %s\n", PROG, err);
            b->cleanup_ok = 0;
        }
        mysql_close(b->mon);
        b->mon = NULL;
    }
    rowlock_client_free(b->admin);
    b->admin = NULL;
}

int main(int argc, char **argv)
{
    bench b;
    pthread_t wd;
    struct sigaction sa;
    int rc, all_ok = 1, wd_started;
    size_t k;
    int64_t t0 = now_ns();

    memset(&b, 0, sizeof b);
    b.cleanup_ok = 1;
    cli_conn_init(&b.cc);
    rc = parse_args(&b, argc, argv);
    if (rc != 0) {
        cli_conn_free(&b.cc);
        return rc < 0 ? 0 : rc;
    }
    if (b.cc.opts.table == NULL)
        b.cc.opts.table = "bench_locks";

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* the clients' reads carry on; loops poll the flag */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    if (rowlock_library_init() != 0) {
        fprintf(stderr, "%s: cannot initialise libmysqlclient\n", PROG);
        cli_conn_free(&b.cc);
        return CLI_EX_UNAVAILABLE;
    }
    wd_started = pthread_create(&wd, NULL, wd_main, NULL) == 0;
    wd_arm("connecting", 120.0);
    rc = setup(&b);
    wd_disarm();
    if (rc == 0) {
        if (b.cfg.sc_mask & (1u << SC_UNCONTENDED))
            scenario_simple(&b, SC_UNCONTENDED);
        if (b.cfg.sc_mask & (1u << SC_HOT))
            scenario_simple(&b, SC_HOT);
        if (b.cfg.sc_mask & (1u << SC_MANY))
            scenario_simple(&b, SC_MANY);
        if (b.cfg.sc_mask & (1u << SC_TABLE_SIZE))
            scenario_table_size(&b);
        if (b.cfg.sc_mask & (1u << SC_REAPER))
            scenario_reaper(&b);
        wd_arm("cleaning up", 600.0);
    }
    teardown(&b);
    wd_disarm();
    if (wd_started) {
        A_STORE(&wd_quit, 1);
        pthread_join(wd, NULL);
    }

    if (rc == 0) {
        FILE *tf = b.cfg.json ? stderr : stdout;
        for (k = 0; k < b.nres; k++) {
            if (!b.res[k].ok)
                all_ok = 0;
            if (b.cfg.json)
                print_json(&b, &b.res[k]);
        }
        print_table(&b, tf);
        print_targets(&b, tf);
        fprintf(tf, "\n%zu results, %s; wall time %.1f s\n", b.nres,
                all_ok ? "all correctness checks held" : "SOME CORRECTNESS CHECKS FAILED",
                (double)(now_ns() - t0) / 1e9);
        if (!b.cleanup_ok) {
            fprintf(stderr, "%s: could not remove every row the bench wrote\n", PROG);
            all_ok = 0;
        }
        if (g_interrupted || b.nres == 0)
            all_ok = 0;
        rc = all_ok ? 0 : 1;
    }
    free(b.res);
    cli_conn_free(&b.cc);
    rowlock_library_end();
    fflush(stdout);
    return rc;
}
