/*
 * rowlock-bench: what its files share. The tool is split along its sections,
 * listed here from the bottom up: each file calls only those above it in
 * this list, never one below (main.c alone calls modes.c and waiters.c).
 *
 *   util.c       clocks, sample vectors, percentiles, and the watchdog that bounds every phase
 *   results.c    the result records of a run, and their keys: strategies and scenarios
 *   sql.c        raw libmysqlclient helpers (the floors), table maintenance
 *   client.c     one client of any kind: a rowlock strategy, GET_LOCK, or raw SQL
 *   measure.c    a measurement: N threads, one client each, in rounds; round-trip counting
 *   scenarios.c  the scenarios: uncontended, hot, many, table_size, reaper
 *   output.c     the results table, JSON lines and the targets with their ratios
 *   modes.c      rowlock-bench --modes: shared readers and semaphores
 *   waiters.c    rowlock-bench --waiters N: what idle waiters cost the server
 *   main.c       command line, setup, main
 */
#ifndef ROWLOCK_TOOLS_BENCH_H
#define ROWLOCK_TOOLS_BENCH_H

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
#include "common/cli.h"
#include "rowlock.h"

#define PROG "rowlock-bench"

enum { ST_INSERT, ST_FOR_UPDATE, ST_OPTIMISTIC, ST_GET_LOCK, ST_RAW, ST_DO1, ST_COUNT };

#define ST_IS_LIB(s) ((s) <= ST_OPTIMISTIC)

enum { SC_UNCONTENDED, SC_HOT, SC_MANY, SC_TABLE_SIZE, SC_REAPER, SC_COUNT };

/* Raw client-polling backoff (hot raw_insert_delete): full jitter between
 * half and all of min(cap, base * 2^attempt). */
#define RAW_BACKOFF_BASE_US 100
#define RAW_BACKOFF_CAP_US 3200
#define LEASE_MS 30000
#define SAMPLES_MAX ((size_t)1 << 24)
#define A_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define A_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define A_XCHG(p, v) __atomic_exchange_n((p), (v), __ATOMIC_ACQ_REL)
#define A_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_ACQ_REL)

/* Growable sample vector (ns). Samples beyond SAMPLES_MAX or after an
 * allocation failure are dropped (counted). */
typedef struct vec {
    int64_t *v;
    size_t n, cap;
    size_t dropped;
} vec;

/* A prepared statement with string parameters and at most one integer result
 * column (the first row's value is kept). */
typedef struct rstmt {
    MYSQL_STMT *st;
} rstmt;

#define MAX_HOT 8
#define MAX_NODES 8
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
    /* --nodes: option files of cluster nodes; the library clients of a
     * measurement connect to them in turn (client i to node i % nnodes). */
    char *nodes[MAX_NODES];
    unsigned nnodes;
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

typedef struct reap_arg {
    int rc;
    rowlock_reap_stats stats;
    double wall_s;
    char err[400];
} reap_arg;

/* A field of a result, NAN when the result is missing. */
#define RV(r, field) ((r) != NULL ? (r)->field : NAN)

enum {
    O_QUICK = 1, O_NODES, O_JSON, O_VERBOSE, O_HELP, O_VERSION, O_SCENARIO, O_STRATEGIES, O_SECONDS,
    O_CLIENTS, O_MANY, O_ROWS, O_REAPER_ROWS, O_REAPER_BATCH, O_REAPER_PAUSE, O_ROUNDS, O_HOLD
};

/* ---- shared state and functions, by file (bottom up) ---- */

/* util.c */
extern int wd_quit;
extern volatile sig_atomic_t g_interrupted;
int64_t now_ns(void);
void sleep_ns(int64_t ns);
int64_t thread_cpu_ns(void);
uint32_t rng_next(uint64_t *s);
void setf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void vec_push(vec *a, int64_t x);
void vec_free(vec *a);
int cmp_i64(const void *pa, const void *pb);
double pct_us(int64_t *v, size_t n, double p);
void wd_arm(const char *phase, double seconds);
void wd_disarm(void);
void *wd_main(void *arg);
void on_signal(int sig);

/* results.c */
extern const char *const st_names[ST_COUNT];
extern const char *const sc_names[SC_COUNT];
int sc_applies(int sc, int st);
result *res_new(bench *b, int sc, int st, unsigned clients, uint64_t rows);
void res_fail(result *r, const char *msg);
const result *res_find(const bench *b, int sc, int st, unsigned clients, uint64_t rows);

/* sql.c */
MYSQL *raw_connect(const rowlock_client_options *o, char *err, size_t cap);
unsigned q_exec(MYSQL *m, const char *sql, uint64_t *affected, char *err, size_t cap);
unsigned q_str(MYSQL *m, const char *sql, unsigned col, char *out, size_t outcap, char *err,
               size_t cap);
unsigned q_u64(MYSQL *m, const char *sql, unsigned col, uint64_t *out, char *err, size_t cap);
int rs_prepare(MYSQL *m, rstmt *s, const char *sql, char *err, size_t cap);
void rs_close(rstmt *s);
unsigned rs_exec(rstmt *s, const char *const *p, unsigned np, long long *val, int *isnull,
                 uint64_t *affected, char *err, size_t cap);
int clean_table(bench *b, const char *table, char *err, size_t cap);
int fill_rows(bench *b, const char *table, uint64_t from, uint64_t to, int stale, char *err,
              size_t cap);
int make_table(bench *b, const char *table, char *err, size_t cap);
int drop_table(bench *b, const char *table, char *err, size_t cap);

/* client.c */
void bc_close(bclient *c);
int bc_open(bench *b, bclient *c, int st, const char *name, const char *table,
            const char *rawtable, unsigned id);
int bc_acquire(bclient *c, int64_t wait_ms);
int bc_release(bclient *c);
int bc_renew(bclient *c);

/* measure.c */
void run_round(bench *b, const mspec *m, double seconds, void (*during)(bench *, void *),
                      void *arg, acc *a, result *res);
void acc_finish(acc *a, result *res, unsigned n, int hot);
void count_round_trips(bench *b, int st, const char *rawtable, result *res);

/* scenarios.c */
void scenario_simple(bench *b, int sc);
void scenario_table_size(bench *b);
void scenario_reaper(bench *b);

/* output.c */
void print_json(const bench *b, const result *r);
void print_table(const bench *b, FILE *f);
void print_targets(const bench *b, FILE *f);

/* modes.c: rowlock-bench --modes, shared readers and semaphores */
int bench_modes_main(int argc, char **argv);

/* waiters.c: rowlock-bench --waiters N, what idle waiters cost the server */
int bench_waiters_main(int argc, char **argv);

#endif
