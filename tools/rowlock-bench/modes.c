/*
 * rowlock-bench --modes: shared locks and semaphores, against exclusive
 * locks on separate names.
 *
 *   rowlock-bench --modes [--seconds S] [--hold-us N] [CONNECTION OPTIONS]
 *
 * Each client is a process with its own connection that acquires one name,
 * holds it N µs (default 1000), releases it, in a loop (wait forever, lease
 * 30 s) for S seconds; the figure is the aggregate grants per second of all
 * clients. Rows:
 *   exclusive on one name at 1, 8 and 32 clients (the 32-client row also
 *   gives the exclusive hand-off);
 *   exclusive on separate names: 8 names with 1 client each, 32 names with
 *   1 client each, 4 names with 8 clients each: what the same number of
 *   independent exclusive locks deliver on this server, the yardstick of
 *   the rows below (issue 27 item 2);
 *   shared readers at 1, 8 and 32 clients (they share the lock, so the
 *   aggregate should grow with the clients, unlike exclusive);
 *   a semaphore of 4 permits at 32 clients (also its hand-off), which also
 *   checks that never more than 4 clients held it at once.
 * Mutual exclusion is checked per name from counters in shared memory
 * (holders now, most seen at once); a row over its limit fails the run.
 * Hand-off: the time from the start of a release to the grant it let in.
 * On one name under saturation (32 clients, far more than the permits)
 * every release lets one waiter in; releases are queued in order (start
 * times) and each grant that follows one is paired with the oldest release
 * not yet paired (the first grants, made with permits free, pair with none).
 * For one exclusive name this is exactly "previous holder's release to the
 * next grant".
 * Last, readers queued behind a writer (DRAIN_READERS reader threads, one
 * client each, wait shared on a name a writer holds; the writer
 * releases): the time from the start of that release until every reader
 * was granted, the most readers that held at once (each holds 20 ms), and
 * that time ÷ the exclusive hand-off p50 of this run (one hand-off would
 * be 1; a queue granted one reader at a time, about the readers). A reader
 * granted before the writer's release began fails the run.
 * Then the ratios the issue asks for, each from this run: shared readers ÷
 * exclusive on as many separate names (goal ≥ 0.8), the semaphore ÷ 4
 * names shared by its 32 clients (goal ≥ 0.8), semaphore hand-off p50 ÷ the
 * exclusive hand-off p50 (goal ≤ 1.2).
 * Ratios, not timed assertions: the figures depend on the machine. The lock
 * table (default bench_modes) is migrated, and its rows deleted at the end.
 */
#include "bench.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MODES_MAXC 64     /* clients (and names) of one row */
#define MODES_RING 65536  /* releases not yet paired with a grant */
#define MODES_HO_MAX (1u << 20)

typedef struct modes_shared {
    volatile int go;                   /* 1: start, 2: stop */
    volatile int current[MODES_MAXC];  /* holders now, per name */
    volatile int max_seen;             /* most holders of one name at once */
    volatile long grants[MODES_MAXC];
    volatile int failed;
    pthread_mutex_t mu;                /* process-shared: the release queue */
    uint64_t rel_head, rel_tail;       /* under mu */
    int64_t rel_ns[MODES_RING];
    uint64_t ho_n;                     /* under mu */
    int64_t ho[MODES_HO_MAX];
} modes_shared;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static long g_hold_us = 1000;

/* A release started at t (ns). */
static void rel_push(modes_shared *s, int64_t t)
{
    pthread_mutex_lock(&s->mu);
    if (s->rel_tail - s->rel_head < MODES_RING)
        s->rel_ns[s->rel_tail++ % MODES_RING] = t;
    pthread_mutex_unlock(&s->mu);
}

/* A grant at t (ns): paired with the oldest unpaired release, if any. */
static void grant_pop(modes_shared *s, int64_t t)
{
    pthread_mutex_lock(&s->mu);
    if (s->rel_head < s->rel_tail) {
        int64_t r = s->rel_ns[s->rel_head++ % MODES_RING];
        if (s->ho_n < MODES_HO_MAX)
            s->ho[s->ho_n++] = t - r;
    }
    pthread_mutex_unlock(&s->mu);
}

static int client_loop(cli_conn *cc, modes_shared *s, int idx, const char *name, int slot, int handoff,
                       rowlock_mode mode, unsigned permits)
{
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    rowlock_lock_options o = ROWLOCK_LOCK_OPTIONS_INIT;
    if (cli_conn_open(cc, "rowlock-bench", 0, &c) != 0)
        return 10;
    o.mode = mode;
    o.permits = permits;
    if (rowlock_lock_new(&l, c, name, &o) != 0)
        return 11;
    while (s->go == 0)
        usleep(1000);
    long n = 0;
    while (s->go == 1) {
        int rc = rowlock_acquire(l, ROWLOCK_WAIT_FOREVER, 30000);
        if (rc) {
            fprintf(stderr, "rowlock-bench: client %d: %s\n", idx, rowlock_client_errmsg(c));
            s->failed = 1;
            break;
        }
        if (handoff && s->go == 1)
            grant_pop(s, mono_ns());
        int now = __atomic_add_fetch(&s->current[slot], 1, __ATOMIC_SEQ_CST);
        int m = s->max_seen;
        while (now > m && !__atomic_compare_exchange_n(&s->max_seen, &m, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
        if (g_hold_us > 0)
            usleep((useconds_t)g_hold_us);
        __atomic_sub_fetch(&s->current[slot], 1, __ATOMIC_SEQ_CST);
        if (handoff && s->go == 1)
            rel_push(s, mono_ns());
        if (rowlock_release(l) != 0) {
            fprintf(stderr, "rowlock-bench: client %d: release: %s\n", idx, rowlock_client_errmsg(c));
            s->failed = 1;
            break;
        }
        n++;
    }
    s->grants[idx] = n;
    rowlock_lock_free(l);
    rowlock_client_free(c);
    return 0;
}

/* Aggregate grants/s of `n` clients on `names` names (client i on name
 * base, or base-<i % names>), or -1; *max_seen: most holders of one name
 * at once; with handoff (one name only), *ho_p50_us. */
static double run_row(cli_conn *cc, modes_shared *s, int n, int names, const char *base, rowlock_mode mode,
                      unsigned permits, int handoff, double seconds, int *max_seen, double *ho_p50_us)
{
    pid_t pids[MODES_MAXC];
    pthread_mutexattr_t ma;
    memset((void *)s, 0, sizeof *s);
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&s->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            char name[64];
            if (names > 1)
                snprintf(name, sizeof name, "%s-%d", base, i % names);
            else
                snprintf(name, sizeof name, "%s", base);
            _exit(client_loop(cc, s, i, name, i % names, handoff, mode, permits));
        }
    }
    usleep(300000); /* connected */
    int64_t t0 = mono_ns();
    s->go = 1;
    usleep((useconds_t)(seconds * 1e6));
    s->go = 2;
    int64_t t1 = mono_ns();
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad = 1;
    }
    long total = 0;
    for (int i = 0; i < n; i++)
        total += s->grants[i];
    *max_seen = s->max_seen;
    *ho_p50_us = NAN;
    if (handoff && s->ho_n > 0) {
        qsort(s->ho, s->ho_n, sizeof s->ho[0], cmp_i64);
        *ho_p50_us = pct_us(s->ho, s->ho_n, 50);
    }
    pthread_mutex_destroy(&s->mu);
    if (bad || s->failed)
        return -1;
    return (double)total / ((double)(t1 - t0) / 1e9);
}

#define DRAIN_READERS 32
#define DRAIN_HOLD_US 20000

typedef struct drain_reader {
    rowlock_client *c;
    rowlock_lock *l;
    volatile int *queued, *now, *most;
    int64_t granted_ns;
    int rc;
} drain_reader;

static void *drain_reader_run(void *arg)
{
    drain_reader *r = arg;
    __atomic_add_fetch(r->queued, 1, __ATOMIC_SEQ_CST);
    r->rc = rowlock_acquire(r->l, 60000, 30000);
    r->granted_ns = mono_ns();
    if (r->rc != 0) {
        fprintf(stderr, "rowlock-bench: drain reader: %s\n", rowlock_client_errmsg(r->c));
        return NULL;
    }
    int now = __atomic_add_fetch(r->now, 1, __ATOMIC_SEQ_CST);
    int m = *r->most;
    while (now > m && !__atomic_compare_exchange_n(r->most, &m, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    usleep(DRAIN_HOLD_US);
    __atomic_sub_fetch(r->now, 1, __ATOMIC_SEQ_CST);
    if (rowlock_release(r->l) != 0) {
        fprintf(stderr, "rowlock-bench: drain reader: release: %s\n", rowlock_client_errmsg(r->c));
        r->rc = -1;
    }
    return NULL;
}

/* Readers queued behind a writer on `name` (made a shared name first): ms
 * from the writer's release until every reader was granted, or -1 (an
 * error, or a reader granted before the writer let go); *most: the most
 * readers that held at once. */
static double drain_row(cli_conn *cc, const char *name, int *most)
{
    rowlock_client *wc = NULL;
    rowlock_lock *wl = NULL, *sl = NULL;
    rowlock_lock_options wo = ROWLOCK_LOCK_OPTIONS_INIT, so = ROWLOCK_LOCK_OPTIONS_INIT;
    drain_reader r[DRAIN_READERS];
    pthread_t t[DRAIN_READERS];
    volatile int queued = 0, now = 0;
    int started = 0, bad = 0;
    int64_t t0 = 0;
    double ms = -1;
    *most = 0;
    memset(r, 0, sizeof r);
    so.mode = ROWLOCK_MODE_SHARED;
    if (cli_conn_open(cc, "rowlock-bench", 0, &wc) != 0)
        return -1;
    if (rowlock_lock_new(&wl, wc, name, &wo) != 0 || rowlock_lock_new(&sl, wc, name, &so) != 0 ||
        rowlock_acquire(sl, 5000, 30000) != 0 || rowlock_release(sl) != 0 || /* a shared name */
        rowlock_acquire(wl, 5000, 60000) != 0) {
        fprintf(stderr, "rowlock-bench: drain writer: %s\n", rowlock_client_errmsg(wc));
        goto out;
    }
    for (int i = 0; i < DRAIN_READERS; i++) {
        r[i].queued = &queued;
        r[i].now = &now;
        r[i].most = most;
        if (cli_conn_open(cc, "rowlock-bench", 0, &r[i].c) != 0 || rowlock_lock_new(&r[i].l, r[i].c, name, &so) != 0) {
            bad = 1;
            goto join;
        }
    }
    for (; started < DRAIN_READERS; started++)
        if (pthread_create(&t[started], NULL, drain_reader_run, &r[started]) != 0) {
            bad = 1;
            break;
        }
    while (queued < started)
        usleep(1000);
    usleep(1500000); /* every reader has queued (a late one would join, not wait) */
    t0 = mono_ns();
    if (rowlock_release(wl) != 0) {
        fprintf(stderr, "rowlock-bench: drain writer: release: %s\n", rowlock_client_errmsg(wc));
        bad = 1;
    }
join:
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    if (!bad) {
        int64_t last = t0;
        for (int i = 0; i < DRAIN_READERS; i++) {
            if (r[i].rc != 0)
                bad = 1;
            else if (r[i].granted_ns < t0) {
                printf("  FAILED: a reader was granted %.3f ms before the writer let go\n",
                       (double)(t0 - r[i].granted_ns) / 1e6);
                bad = 1;
            } else if (r[i].granted_ns > last)
                last = r[i].granted_ns;
        }
        if (!bad)
            ms = (double)(last - t0) / 1e6;
    }
    for (int i = 0; i < DRAIN_READERS; i++) {
        rowlock_lock_free(r[i].l);
        rowlock_client_free(r[i].c);
    }
out:
    rowlock_lock_free(sl);
    rowlock_lock_free(wl);
    rowlock_client_free(wc);
    return ms;
}

int bench_modes_main(int argc, char **argv)
{
    cli_conn cc;
    double seconds = 3;
    int ok = 1;
    cli_conn_init(&cc);
    cc.opts.table = "bench_modes";
    for (int i = 1; i < argc;) {
        int r = cli_conn_parse(&cc, "rowlock-bench", argc, argv, &i);
        if (r < 0)
            return CLI_EX_USAGE;
        if (r > 0)
            continue;
        if (strcmp(argv[i], "--hold-us") == 0 && i + 1 < argc) {
            g_hold_us = atol(argv[i + 1]);
            if (g_hold_us < 0 || g_hold_us > 10000000) {
                fprintf(stderr, "rowlock-bench --modes: --hold-us must be 0-10000000\n");
                return CLI_EX_USAGE;
            }
            i += 2;
            continue;
        }
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = atof(argv[i + 1]);
            i += 2;
            continue;
        }
        fprintf(stderr, "rowlock-bench --modes: unknown argument '%s'\n", cli_q(argv[i]));
        return CLI_EX_USAGE;
    }
    if (seconds <= 0 || seconds > 600) {
        fprintf(stderr, "rowlock-bench --modes: --seconds must be in (0, 600]\n");
        return CLI_EX_USAGE;
    }
    rowlock_client *c = NULL;
    int rc = cli_conn_open(&cc, "rowlock-bench", ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK, &c);
    if (rc)
        return rc;
    if ((rc = rowlock_schema_migrate(c, 0, NULL, NULL)) != 0) {
        fprintf(stderr, "rowlock-bench: migrate: %s\n", rowlock_client_errmsg(c));
        rowlock_client_free(c);
        return CLI_EX_UNAVAILABLE;
    }
    modes_shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        return CLI_EX_UNAVAILABLE;
    enum { R_X1, R_X8, R_X32, R_N8, R_N32, R_N4x8, R_S1, R_S8, R_S32, R_SEM, R_COUNT };
    static const struct {
        const char *label, *name;
        rowlock_mode mode;
        unsigned permits;
        int n, names, handoff;
    } rows[R_COUNT] = {
        [R_X1] = { "exclusive, 1 name", "bm-excl", ROWLOCK_MODE_EXCLUSIVE, 0, 1, 1, 0 },
        [R_X8] = { "exclusive, 1 name", "bm-excl", ROWLOCK_MODE_EXCLUSIVE, 0, 8, 1, 0 },
        [R_X32] = { "exclusive, 1 name", "bm-excl", ROWLOCK_MODE_EXCLUSIVE, 0, 32, 1, 1 },
        [R_N8] = { "exclusive, 8 names", "bm-names", ROWLOCK_MODE_EXCLUSIVE, 0, 8, 8, 0 },
        [R_N32] = { "exclusive, 32 names", "bm-names", ROWLOCK_MODE_EXCLUSIVE, 0, 32, 32, 0 },
        [R_N4x8] = { "exclusive, 4 names", "bm-names", ROWLOCK_MODE_EXCLUSIVE, 0, 32, 4, 0 },
        [R_S1] = { "shared readers", "bm-shared", ROWLOCK_MODE_SHARED, 0, 1, 1, 0 },
        [R_S8] = { "shared readers", "bm-shared", ROWLOCK_MODE_SHARED, 0, 8, 1, 0 },
        [R_S32] = { "shared readers", "bm-shared", ROWLOCK_MODE_SHARED, 0, 32, 1, 0 },
        [R_SEM] = { "semaphore N=4", "bm-sem4", ROWLOCK_MODE_SHARED, 4, 32, 1, 1 },
    };
    double g[R_COUNT], ho[R_COUNT];
    printf("%-22s %8s %14s %10s %12s %14s\n", "rowlock-bench --modes", "clients", "grants/s", "vs 1",
           "hand-off p50", "max holders");
    for (size_t k = 0; k < R_COUNT; k++) {
        int max_seen = 0;
        g[k] = run_row(&cc, s, rows[k].n, rows[k].names, rows[k].name, rows[k].mode, rows[k].permits,
                       rows[k].handoff, seconds, &max_seen, &ho[k]);
        if (g[k] < 0) {
            printf("%-22s %8d %14s\n", rows[k].label, rows[k].n, "FAILED");
            ok = 0;
            continue;
        }
        char ratio[32] = "", hos[32] = "";
        if (k == R_S8 || k == R_S32)
            snprintf(ratio, sizeof ratio, "%.2fx", g[R_S1] > 0 ? g[k] / g[R_S1] : NAN);
        if (k == R_X8 || k == R_X32)
            snprintf(ratio, sizeof ratio, "%.2fx", g[R_X1] > 0 ? g[k] / g[R_X1] : NAN);
        if (rows[k].handoff)
            snprintf(hos, sizeof hos, "%.0f us", ho[k]);
        printf("%-22s %8d %14.0f %10s %12s %14d\n", rows[k].label, rows[k].n, g[k], ratio, hos, max_seen);
        unsigned limit = rows[k].permits ? rows[k].permits : rows[k].mode == ROWLOCK_MODE_EXCLUSIVE ? 1 : 0;
        if (limit && max_seen > (int)limit) {
            printf("  FAILED: %d holders of one name at once, over %u\n", max_seen, limit);
            ok = 0;
        }
        fflush(stdout);
    }
    int most = 0;
    double drain_ms = drain_row(&cc, "bm-drain", &most);
    if (drain_ms < 0) {
        printf("%-22s %8d %14s\n", "readers behind writer", DRAIN_READERS, "FAILED");
        ok = 0;
    } else
        printf("%-22s %8d %11.1f ms %10s %12s %14d\n", "readers behind writer", DRAIN_READERS, drain_ms, "", "",
               most);
    /* The goals, each a ratio of this run (NaN: a row failed). */
    printf("goals (issue 27 item 2), this run:\n");
    printf("  shared, 8 readers / exclusive on 8 names:            %.2f (>= 0.8)\n",
           g[R_S8] > 0 && g[R_N8] > 0 ? g[R_S8] / g[R_N8] : NAN);
    printf("  shared, 32 readers / exclusive on 32 names:          %.2f (>= 0.8)\n",
           g[R_S32] > 0 && g[R_N32] > 0 ? g[R_S32] / g[R_N32] : NAN);
    printf("  semaphore N=4, 32 clients / exclusive on 4 names:    %.2f (>= 0.8)\n",
           g[R_SEM] > 0 && g[R_N4x8] > 0 ? g[R_SEM] / g[R_N4x8] : NAN);
    printf("  semaphore hand-off p50 / exclusive hand-off p50:     %.2f (<= 1.2)\n", ho[R_SEM] / ho[R_X32]);
    printf("  %d readers behind a writer, all granted / exclusive hand-off p50: %.1f (informational)\n",
           DRAIN_READERS, drain_ms >= 0 ? drain_ms * 1e3 / ho[R_X32] : NAN);
    munmap(s, sizeof *s);
    /* Leave no rows behind. */
    rowlock_info in = ROWLOCK_INFO_INIT;
    static const char *const names[] = { "bm-excl", "bm-shared", "bm-sem4", "bm-drain" };
    for (size_t k = 0; k < 4; k++)
        (void)rowlock_admin_force_release(c, names[k], &in);
    for (int k = 0; k < 32; k++) {
        char nm[32];
        snprintf(nm, sizeof nm, "bm-names-%d", k);
        (void)rowlock_admin_force_release(c, nm, &in);
    }
    rowlock_reap_options ro = ROWLOCK_REAP_OPTIONS_INIT;
    ro.grace_ms = 0;
    (void)rowlock_admin_reap(c, &ro, NULL);
    rowlock_client_free(c);
    cli_conn_free(&cc);
    return ok ? 0 : 1;
}
