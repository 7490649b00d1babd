/*
 * rowlock-bench --modes: shared locks and semaphores.
 *
 *   rowlock-bench --modes [--seconds S] [--hold-us N] [CONNECTION OPTIONS]
 *
 * Each client is a process with its own connection that acquires one name,
 * holds it N µs (default 1000), releases it, in a loop (wait forever, lease
 * 30 s) for S seconds; the
 * figure is the aggregate grants per second of all clients. Rows:
 *   exclusive (insert, one-row protocol) at 1 and 8 clients, for scale;
 *   shared readers at 1, 8 and 32 clients (they share the lock, so the
 *   aggregate should grow with the clients, unlike exclusive);
 *   a semaphore of 4 permits at 32 clients, which also checks that never
 *   more than 4 clients held it at once (a counter in shared memory).
 * Ratios, not timed assertions: the figures depend on the machine. The lock
 * table (default bench_modes) is migrated, and its rows deleted at the end.
 */
#include "bench.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct modes_shared {
    volatile int go;          /* 1: start, 2: stop */
    volatile int current, max_seen;
    volatile long grants[64];
    volatile int failed;
} modes_shared;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static long g_hold_us = 1000;

static int client_loop(cli_conn *cc, modes_shared *s, int idx, const char *name, rowlock_mode mode,
                       unsigned permits)
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
        int now = __atomic_add_fetch(&s->current, 1, __ATOMIC_SEQ_CST);
        int m = s->max_seen;
        while (now > m && !__atomic_compare_exchange_n(&s->max_seen, &m, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
        if (g_hold_us > 0)
            usleep((useconds_t)g_hold_us);
        __atomic_sub_fetch(&s->current, 1, __ATOMIC_SEQ_CST);
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

/* Aggregate grants/s of `n` clients on `name`, or -1. */
static double run_row(cli_conn *cc, modes_shared *s, int n, const char *name, rowlock_mode mode, unsigned permits,
                      double seconds, int *max_seen)
{
    pid_t pids[64];
    memset((void *)s, 0, sizeof *s);
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(client_loop(cc, s, i, name, mode, permits));
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
    if (bad || s->failed)
        return -1;
    return (double)total / ((double)(t1 - t0) / 1e9);
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
    static const struct {
        const char *label, *name;
        rowlock_mode mode;
        unsigned permits;
        int n;
    } rows[] = {
        { "exclusive (one-row)", "bm-excl", ROWLOCK_MODE_EXCLUSIVE, 0, 1 },
        { "exclusive (one-row)", "bm-excl", ROWLOCK_MODE_EXCLUSIVE, 0, 8 },
        { "shared readers", "bm-shared", ROWLOCK_MODE_SHARED, 0, 1 },
        { "shared readers", "bm-shared", ROWLOCK_MODE_SHARED, 0, 8 },
        { "shared readers", "bm-shared", ROWLOCK_MODE_SHARED, 0, 32 },
        { "semaphore N=4", "bm-sem4", ROWLOCK_MODE_SHARED, 4, 32 },
    };
    double base_shared = 0;
    printf("%-22s %8s %14s %10s %14s\n", "rowlock-bench --modes", "clients", "grants/s", "vs 1", "max holders");
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        int max_seen = 0;
        double g = run_row(&cc, s, rows[k].n, rows[k].name, rows[k].mode, rows[k].permits, seconds, &max_seen);
        if (g < 0) {
            printf("%-22s %8d %14s\n", rows[k].label, rows[k].n, "FAILED");
            ok = 0;
            continue;
        }
        if (rows[k].mode == ROWLOCK_MODE_SHARED && rows[k].permits == 0 && rows[k].n == 1)
            base_shared = g;
        char ratio[32] = "";
        if (rows[k].mode == ROWLOCK_MODE_SHARED && rows[k].permits == 0 && base_shared > 0)
            snprintf(ratio, sizeof ratio, "%.2fx", g / base_shared);
        printf("%-22s %8d %14.0f %10s %14d\n", rows[k].label, rows[k].n, g, ratio, max_seen);
        if (rows[k].permits && max_seen > (int)rows[k].permits) {
            printf("  FAILED: %d holders at once, over %u permits\n", max_seen, rows[k].permits);
            ok = 0;
        }
        if (rows[k].mode == ROWLOCK_MODE_EXCLUSIVE && max_seen > 1) {
            printf("  FAILED: %d exclusive holders at once\n", max_seen);
            ok = 0;
        }
        fflush(stdout);
    }
    munmap(s, sizeof *s);
    /* Leave no rows behind. */
    rowlock_info in = ROWLOCK_INFO_INIT;
    static const char *const names[] = { "bm-excl", "bm-shared", "bm-sem4" };
    for (size_t k = 0; k < 3; k++)
        (void)rowlock_admin_force_release(c, names[k], &in);
    rowlock_reap_options ro = ROWLOCK_REAP_OPTIONS_INIT;
    ro.grace_ms = 0;
    (void)rowlock_admin_reap(c, &ro, NULL);
    rowlock_client_free(c);
    cli_conn_free(&cc);
    return ok ? 0 : 1;
}
