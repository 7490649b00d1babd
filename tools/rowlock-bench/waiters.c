/*
 * rowlock-bench --waiters N: what idle waiters cost the server.
 *
 *   rowlock-bench --waiters N [--seconds S] [--kinds LIST] [--rowlock PATH]
 *                 [CONNECTION OPTIONS]
 *
 * For each kind of waiter, one holder takes a name (four holders for the
 * semaphore of 4 permits), N waiters then wait on it, and while nothing
 * changes for S seconds the server is sampled: statements per second
 * (`Questions` of SHOW GLOBAL STATUS, less the sampler's own) and the
 * server's CPU (utime+stime of the mariadbd process named by @@pid_file,
 * when this machine can read it). Then the holders release and the time
 * until every waiter has been granted and released is the drain time.
 * GET_LOCK waiters are measured in the same run: the ratios are what the
 * goals are stated in (issue 27: <= 0.1 statements/s per waiter; server CPU
 * within 2x GET_LOCK's; drain time / GET_LOCK's).
 *
 * Kinds (library waiters are threads, one client and connection each, in
 * this process; `cli-*` kinds are `rowlock run` processes, given --rowlock):
 *   get_lock     SELECT GET_LOCK(name, 600) on a raw connection
 *   insert, for-update, optimistic
 *                an exclusive rowlock_acquire() of that strategy
 *   shared       shared waiters (insert) behind an exclusive holder
 *   semaphore    waiters on a 4-permit semaphore (insert) whose 4 permits
 *                are held
 *   cli-insert, cli-shared, cli-semaphore
 *                the same through `rowlock run -w 600 ... NAME true`,
 *                with this run's connection options passed on
 * Memory: the process's RSS growth per waiting thread; for `rowlock run`
 * waiters, the mean proportional set size (Pss) of one waiting process.
 * Mutual exclusion is checked during the drain (exclusive: never two; the
 * semaphore: never five).
 *
 * The server needs max_connections >= N + 10. The lock table defaults to
 * bench_waiters; it is migrated, and its rows are deleted at the end.
 */
#include "bench.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>

enum {
    WK_GET_LOCK, WK_INSERT, WK_FOR_UPDATE, WK_OPTIMISTIC, WK_SHARED, WK_SEMAPHORE,
    WK_CLI_INSERT, WK_CLI_SHARED, WK_CLI_SEMAPHORE, WK_COUNT
};

static const char *const wk_names[WK_COUNT] = {
    "get_lock", "insert", "for-update", "optimistic", "shared", "semaphore",
    "cli-insert", "cli-shared", "cli-semaphore",
};

#define WK_PERMITS 4
#define WK_LEASE_MS 60000 /* the epoch table's default longest lease */
#define WK_WAIT_S 600
#define WK_RENEW_NS 15000000000LL /* the holders renew this often while sampled */
#define WK_MAX 4096

typedef struct wshared {
    volatile int ready, done, failed;
    volatile int current, max_seen;
} wshared;

typedef struct wjob {
    cli_conn *cc;
    int kind;
    const char *name;
    wshared *s;
    pthread_t th;
} wjob;

typedef struct wrow {
    int kind, ok;
    double stmt_s, cpu_pct, drain_s, mem_kb;
    char err[200];
} wrow;

static int64_t rss_kb(pid_t pid)
{
    char path[64], line[256];
    FILE *f;
    int64_t kb = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtoll(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

static int64_t pss_kb(pid_t pid)
{
    char path[64], line[256];
    FILE *f;
    int64_t kb = -1;
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Pss:", 4) == 0)
            kb = strtoll(line + 4, NULL, 10);
    fclose(f);
    return kb;
}

/* utime+stime of `pid` in clock ticks, or -1. */
static int64_t proc_ticks(pid_t pid)
{
    char path[64], buf[1024], *p;
    FILE *f;
    unsigned long long ut = 0, stt = 0;
    size_t n;
    if (pid <= 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* the command may hold spaces */
    if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &stt) != 2)
        return -1;
    return (int64_t)(ut + stt);
}

static pid_t server_pid(MYSQL *m)
{
    char path[512] = "", err[200];
    char buf[32] = "";
    FILE *f;
    if (q_str(m, "SELECT @@pid_file", 0, path, sizeof path, err, sizeof err) != 0 || path[0] != '/')
        return -1;
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    if (fgets(buf, sizeof buf, f) == NULL)
        buf[0] = '\0';
    fclose(f);
    return (pid_t)atol(buf);
}

static uint64_t questions(MYSQL *m)
{
    char v[64] = "", err[200];
    if (q_str(m, "SHOW GLOBAL STATUS LIKE 'Questions'", 1, v, sizeof v, err, sizeof err) != 0)
        return 0;
    return strtoull(v, NULL, 10);
}

static void enter(wshared *s, int limit)
{
    int now = __atomic_add_fetch(&s->current, 1, __ATOMIC_SEQ_CST);
    int m = s->max_seen;
    while (now > m && !__atomic_compare_exchange_n(&s->max_seen, &m, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    if (now > limit)
        s->failed = 1;
    __atomic_sub_fetch(&s->current, 1, __ATOMIC_SEQ_CST);
}

static void *waiter_main(void *arg)
{
    wjob *j = arg;
    wshared *s = j->s;
    if (j->kind == WK_GET_LOCK) {
        char err[320], sql[256];
        uint64_t got = 0;
        MYSQL *m = raw_connect(&j->cc->opts, err, sizeof err);
        if (m == NULL) {
            fprintf(stderr, "%s: waiter: %s\n", PROG, err);
            s->failed = 1;
            __atomic_add_fetch(&s->ready, 1, __ATOMIC_SEQ_CST);
            __atomic_add_fetch(&s->done, 1, __ATOMIC_SEQ_CST);
            return NULL;
        }
        setf(sql, sizeof sql, "SELECT GET_LOCK('%s', %d)", j->name, WK_WAIT_S);
        __atomic_add_fetch(&s->ready, 1, __ATOMIC_SEQ_CST);
        if (q_u64(m, sql, 0, &got, err, sizeof err) != 0 || got != 1) {
            fprintf(stderr, "%s: GET_LOCK waiter: %s\n", PROG, got != 1 ? "not granted" : err);
            s->failed = 1;
        } else {
            enter(s, 1);
            setf(sql, sizeof sql, "DO RELEASE_LOCK('%s')", j->name);
            if (q_exec(m, sql, NULL, err, sizeof err) != 0)
                s->failed = 1;
        }
        mysql_close(m);
    } else {
        rowlock_client *c = NULL;
        rowlock_lock *l = NULL;
        rowlock_lock_options o = ROWLOCK_LOCK_OPTIONS_INIT;
        int limit = 1;
        if (j->kind == WK_FOR_UPDATE)
            o.strategy = ROWLOCK_STRATEGY_FOR_UPDATE;
        else if (j->kind == WK_OPTIMISTIC)
            o.strategy = ROWLOCK_STRATEGY_OPTIMISTIC;
        if (j->kind == WK_SHARED) {
            o.mode = ROWLOCK_MODE_SHARED;
            limit = WK_MAX;
        } else if (j->kind == WK_SEMAPHORE) {
            o.mode = ROWLOCK_MODE_SHARED;
            o.permits = WK_PERMITS;
            limit = WK_PERMITS;
        }
        if (cli_conn_open(j->cc, PROG, 0, &c) != 0 || rowlock_lock_new(&l, c, j->name, &o) != 0) {
            s->failed = 1;
            __atomic_add_fetch(&s->ready, 1, __ATOMIC_SEQ_CST);
        } else {
            __atomic_add_fetch(&s->ready, 1, __ATOMIC_SEQ_CST);
            if (rowlock_acquire(l, (int64_t)WK_WAIT_S * 1000, WK_LEASE_MS) != 0) {
                fprintf(stderr, "%s: %s waiter: %s\n", PROG, wk_names[j->kind], rowlock_client_errmsg(c));
                s->failed = 1;
            } else {
                /* shared waiters share with each other: count only the limit that applies */
                if (j->kind != WK_SHARED)
                    enter(s, limit);
                if (rowlock_release(l) != 0)
                    s->failed = 1;
            }
        }
        rowlock_lock_free(l);
        rowlock_client_free(c);
    }
    __atomic_add_fetch(&s->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* The holders: a rowlock lock (or a raw GET_LOCK connection) per permit held. */
typedef struct wholder {
    rowlock_client *c[WK_PERMITS];
    rowlock_lock *l[WK_PERMITS];
    MYSQL *m;
    int n;
} wholder;

static int hold(cli_conn *cc, int kind, const char *name, wholder *h, char *err, size_t cap)
{
    int k;
    memset(h, 0, sizeof *h);
    if (kind == WK_GET_LOCK) {
        char sql[256];
        uint64_t got = 0;
        if ((h->m = raw_connect(&cc->opts, err, cap)) == NULL)
            return -1;
        setf(sql, sizeof sql, "SELECT GET_LOCK('%s', 0)", name);
        if (q_u64(h->m, sql, 0, &got, err, cap) != 0 || got != 1) {
            if (got != 1)
                setf(err, cap, "the holder's GET_LOCK was not granted");
            return -1;
        }
        return 0;
    }
    h->n = (kind == WK_SEMAPHORE || kind == WK_CLI_SEMAPHORE) ? WK_PERMITS : 1;
    for (k = 0; k < h->n; k++) {
        rowlock_lock_options o = ROWLOCK_LOCK_OPTIONS_INIT;
        if (kind == WK_FOR_UPDATE)
            o.strategy = ROWLOCK_STRATEGY_FOR_UPDATE;
        else if (kind == WK_OPTIMISTIC)
            o.strategy = ROWLOCK_STRATEGY_OPTIMISTIC;
        if (h->n > 1) {
            o.mode = ROWLOCK_MODE_SHARED;
            o.permits = WK_PERMITS;
        }
        if (cli_conn_open(cc, PROG, 0, &h->c[k]) != 0)
            return setf(err, cap, "holder: cannot connect"), -1;
        if (rowlock_lock_new(&h->l[k], h->c[k], name, &o) != 0 ||
            rowlock_acquire(h->l[k], 10000, WK_LEASE_MS) != 0) {
            setf(err, cap, "holder: %s", rowlock_client_errmsg(h->c[k]));
            return -1;
        }
    }
    return 0;
}

static void unhold(wholder *h)
{
    int k;
    if (h->m != NULL)
        mysql_close(h->m); /* ends the session: frees the GET_LOCK */
    for (k = 0; k < h->n; k++) {
        if (h->l[k] != NULL && rowlock_lock_held(h->l[k]) && rowlock_release(h->l[k]) != 0)
            fprintf(stderr, "%s: holder release: %s\n", PROG, rowlock_client_errmsg(h->c[k]));
        rowlock_lock_free(h->l[k]);
        rowlock_client_free(h->c[k]);
    }
    memset(h, 0, sizeof *h);
}

/* Renew every holder's lease (rowlock holders; a GET_LOCK holder needs
 * none). *stmts, when given, grows by the statements this took, counted
 * by the server (`Questions`, its two samples included). 0, or -1 when a
 * renewal failed. */
static int keep_holders(MYSQL *mon, wholder *h, uint64_t *stmts)
{
    uint64_t q0 = 0, q1 = 0;
    int rc = 0;
    if (h->n == 0)
        return 0;
    if (stmts != NULL)
        q0 = questions(mon);
    for (int k = 0; k < h->n; k++)
        if (h->l[k] != NULL && rowlock_renew(h->l[k], WK_LEASE_MS) != 0) {
            fprintf(stderr, "%s: holder renew: %s\n", PROG, rowlock_client_errmsg(h->c[k]));
            rc = -1;
        }
    if (stmts != NULL) {
        q1 = questions(mon);
        *stmts += q1 - q0 + 1;
    }
    return rc;
}

/* `rowlock run` waiters: argv of one, connection options copied from ours. */
static pid_t spawn_cli(const char *rowlock, int kind, const char *name, const char *table, char **conn_argv,
                       int nconn)
{
    char *av[64], tbl[80];
    int n = 0, k;
    pid_t pid;
    av[n++] = (char *)rowlock;
    av[n++] = (char *)"run";
    av[n++] = (char *)"-w";
    av[n++] = (char *)"600";
    if (kind == WK_CLI_SHARED)
        av[n++] = (char *)"-s";
    if (kind == WK_CLI_SEMAPHORE) {
        av[n++] = (char *)"--permits";
        av[n++] = (char *)"4";
    }
    for (k = 0; k < nconn && n < 57; k++)
        av[n++] = conn_argv[k];
    setf(tbl, sizeof tbl, "--table=%s", table); /* ours, also when it is the default */
    av[n++] = tbl;
    av[n++] = (char *)name;
    av[n++] = (char *)"true";
    av[n] = NULL;
    pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            close(fd);
        }
        execv(rowlock, av);
        _exit(127);
    }
    return pid;
}

static uint64_t threads_connected(MYSQL *m)
{
    char v[64] = "", err[200];
    if (q_str(m, "SHOW GLOBAL STATUS LIKE 'Threads_connected'", 1, v, sizeof v, err, sizeof err) != 0)
        return 0;
    return strtoull(v, NULL, 10);
}

static void measure_kind(cli_conn *cc, MYSQL *mon, pid_t spid, int kind, unsigned n, double seconds,
                         const char *rowlock, char **conn_argv, int nconn, const char *tag, wrow *row)
{
    char name[96], err[320] = "";
    wholder h;
    wshared *s;
    wjob *jobs = NULL;
    pid_t *pids = NULL;
    pthread_attr_t attr;
    unsigned i, started = 0;
    int cli = kind >= WK_CLI_INSERT;
    int64_t rss0, t0, t1, c0, c1, t_rel, deadline;
    uint64_t q0, q1, base_conn = 0;

    memset(row, 0, sizeof *row);
    row->kind = kind;
    row->cpu_pct = NAN;
    row->mem_kb = NAN;
    row->drain_s = NAN;
    row->stmt_s = NAN;
    if (kind == WK_GET_LOCK)
        setf(name, sizeof name, "rlbw-%s-get_lock", tag);
    else
        setf(name, sizeof name, "bench-waiters-%s", wk_names[kind]);
    s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) {
        setf(row->err, sizeof row->err, "out of memory");
        return;
    }
    memset((void *)s, 0, sizeof *s);
    if (hold(cc, kind, name, &h, err, sizeof err) != 0) {
        setf(row->err, sizeof row->err, "%s", err);
        unhold(&h);
        munmap(s, sizeof *s);
        return;
    }
    rss0 = rss_kb(getpid());
    base_conn = threads_connected(mon);
    if (cli) {
        pids = calloc(n, sizeof *pids);
        for (i = 0; pids != NULL && i < n; i++) {
            pids[i] = spawn_cli(rowlock, kind, name, cc->opts.table, conn_argv, nconn);
            if (pids[i] > 0)
                started++;
        }
        /* a waiting `rowlock run` holds one connection: wait until all are in */
        deadline = now_ns() + (int64_t)60e9;
        while (threads_connected(mon) < base_conn + n && now_ns() < deadline && !g_interrupted)
            sleep_ns(100000000);
    } else {
        jobs = calloc(n, sizeof *jobs);
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        for (i = 0; jobs != NULL && i < n; i++) {
            jobs[i].cc = cc;
            jobs[i].kind = kind;
            jobs[i].name = name;
            jobs[i].s = s;
            if (pthread_create(&jobs[i].th, &attr, waiter_main, &jobs[i]) != 0)
                break;
            started++;
        }
        pthread_attr_destroy(&attr);
        deadline = now_ns() + (int64_t)60e9;
        while ((unsigned)s->ready < started && now_ns() < deadline && !g_interrupted)
            sleep_ns(50000000);
    }
    if (started < n) {
        setf(row->err, sizeof row->err, "started %u of %u waiters", started, n);
        s->failed = 1;
    }
    sleep_ns((int64_t)2e9); /* settle: every waiter in its wait */
    if (cli) {
        int64_t sum = 0, got = 0, v;
        for (i = 0; i < started; i++)
            if ((v = pss_kb(pids[i])) > 0) {
                sum += v;
                got++;
            }
        if (got > 0)
            row->mem_kb = (double)sum / (double)got;
    } else {
        int64_t r1 = rss_kb(getpid());
        if (rss0 > 0 && r1 > 0 && started > 0)
            row->mem_kb = (double)(r1 - rss0) / started;
    }
    /* The holders' leases (60 s) are kept through the setup and the
     * sample: a holder whose lease ended would let the waiters in while
     * they are being measured (seen with --seconds 60). */
    if (keep_holders(mon, &h, NULL) != 0) {
        setf(row->err, sizeof row->err, "holder: cannot renew its lease");
        s->failed = 1;
    }
    c0 = proc_ticks(spid);
    q0 = questions(mon);
    t0 = now_ns();
    uint64_t kept = 0;
    for (int64_t end = t0 + (int64_t)(seconds * 1e9), left; (left = end - now_ns()) > 0;) {
        sleep_ns(left < WK_RENEW_NS ? left : WK_RENEW_NS);
        if (end - now_ns() > 0 && keep_holders(mon, &h, &kept) != 0) {
            setf(row->err, sizeof row->err, "holder: cannot renew its lease");
            s->failed = 1;
        }
    }
    q1 = questions(mon);
    t1 = now_ns();
    c1 = proc_ticks(spid);
    /* the sampler's own SHOW is counted once per sample, and the holders'
     * renewals are not the waiters' */
    row->stmt_s = (double)(q1 - q0 - 1 - kept) / ((double)(t1 - t0) / 1e9);
    if (c0 >= 0 && c1 >= 0)
        row->cpu_pct = 100.0 * (double)(c1 - c0) / (double)sysconf(_SC_CLK_TCK) / ((double)(t1 - t0) / 1e9);

    t_rel = now_ns();
    unhold(&h);
    if (cli) {
        int bad = 0;
        for (i = 0; i < started; i++) {
            int st = 0;
            if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                bad++;
        }
        if (bad)
            setf(row->err, sizeof row->err, "%d rowlock run waiters failed", bad);
        free(pids);
    } else {
        deadline = t_rel + (int64_t)(WK_WAIT_S + 30) * 1000000000;
        while ((unsigned)s->done < started && now_ns() < deadline)
            sleep_ns(1000000);
        for (i = 0; i < started; i++)
            pthread_join(jobs[i].th, NULL);
        free(jobs);
    }
    row->drain_s = (double)(now_ns() - t_rel) / 1e9;
    if (s->failed && row->err[0] == '\0')
        setf(row->err, sizeof row->err, "a waiter failed (or a mutual exclusion check: max %d at once)",
             s->max_seen);
    row->ok = row->err[0] == '\0';
    munmap(s, sizeof *s);
}

int bench_waiters_main(int argc, char **argv)
{
    cli_conn cc;
    double seconds = 5;
    unsigned long long n = 0;
    unsigned mask = (1u << WK_CLI_INSERT) - 1;
    const char *rowlock = NULL;
    char *conn_argv[32];
    int nconn = 0, ok = 1, k, kinds_given = 0;
    char err[320], tag[16];
    MYSQL *mon;
    pid_t spid;
    uint64_t maxc = 0;
    wrow rows[WK_COUNT];
    const wrow *gl = NULL;
    rowlock_client *admin = NULL;

    cli_conn_init(&cc);
    cc.opts.table = "bench_waiters";
    if (argc < 2 || cli_parse_uint(argv[1], 1, WK_MAX, &n) != 0) {
        fprintf(stderr, "%s --waiters: N must be 1-%d\n", PROG, WK_MAX);
        return CLI_EX_USAGE;
    }
    for (int i = 2; i < argc;) {
        int j = i, r = cli_conn_parse(&cc, PROG, argc, argv, &i);
        if (r < 0)
            return CLI_EX_USAGE;
        if (r > 0) {
            for (; j < i && nconn < 32; j++)
                conn_argv[nconn++] = argv[j];
            continue;
        }
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = cli_parse_seconds(argv[i + 1]);
            i += 2;
        } else if (strcmp(argv[i], "--rowlock") == 0 && i + 1 < argc) {
            rowlock = argv[i + 1];
            if (!kinds_given)
                mask |= ((1u << WK_COUNT) - 1) & ~((1u << WK_CLI_INSERT) - 1);
            i += 2;
        } else if (strcmp(argv[i], "--kinds") == 0 && i + 1 < argc) {
            const char *p = argv[i + 1];
            mask = 0;
            kinds_given = 1;
            while (*p) {
                size_t len = strcspn(p, ",");
                int found = 0;
                for (k = 0; k < WK_COUNT; k++)
                    if (strlen(wk_names[k]) == len && strncmp(p, wk_names[k], len) == 0) {
                        mask |= 1u << k;
                        found = 1;
                    }
                if (!found) {
                    fprintf(stderr, "%s --waiters: unknown kind in '%s'\n", PROG, cli_q(argv[i + 1]));
                    return CLI_EX_USAGE;
                }
                p += len + (p[len] == ',');
            }
            i += 2;
        } else {
            fprintf(stderr, "%s --waiters: unknown argument '%s'\n", PROG, cli_q(argv[i]));
            return CLI_EX_USAGE;
        }
    }
    if (seconds <= 0 || seconds > 480) {
        fprintf(stderr, "%s --waiters: --seconds must be in (0, 480] (the waiters wait 600 s)\n", PROG);
        return CLI_EX_USAGE;
    }
    if ((mask & ~((1u << WK_CLI_INSERT) - 1)) && rowlock == NULL) {
        fprintf(stderr, "%s --waiters: the cli-* kinds need --rowlock PATH\n", PROG);
        return CLI_EX_USAGE;
    }
    if (rowlock_library_init() != 0)
        return CLI_EX_UNAVAILABLE;
    if ((k = cli_conn_open(&cc, PROG, ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK, &admin)) != 0)
        return k;
    if (rowlock_schema_migrate(admin, 0, NULL, NULL) != 0) {
        fprintf(stderr, "%s: migrate: %s\n", PROG, rowlock_client_errmsg(admin));
        rowlock_client_free(admin);
        return CLI_EX_UNAVAILABLE;
    }
    if ((mon = raw_connect(&cc.opts, err, sizeof err)) == NULL) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        rowlock_client_free(admin);
        return CLI_EX_UNAVAILABLE;
    }
    if (q_u64(mon, "SELECT @@max_connections", 0, &maxc, err, sizeof err) == 0 && maxc < n + 10) {
        fprintf(stderr, "%s --waiters: the server's max_connections is %" PRIu64 "; %llu waiters need %llu\n",
                PROG, maxc, n, n + 10);
        mysql_close(mon);
        rowlock_client_free(admin);
        return CLI_EX_USAGE;
    }
    spid = server_pid(mon);
    setf(tag, sizeof tag, "%d", (int)getpid());
    for (k = 0; k < WK_COUNT && !g_interrupted; k++) {
        if (!(mask & (1u << k)))
            continue;
        measure_kind(&cc, mon, spid, k, (unsigned)n, seconds, rowlock, conn_argv, nconn, tag, &rows[k]);
        if (k == WK_GET_LOCK && rows[k].ok)
            gl = &rows[k];
        fprintf(stderr, "%s: %s done\n", PROG, wk_names[k]);
    }
    printf("rowlock-bench --waiters %llu (%.1f s idle sample; server pid %s)\n", n, seconds,
           spid > 0 ? "readable" : "not readable: no CPU figures");
    printf("%-14s %12s %12s %10s %10s %10s %10s %12s\n", "kind", "stmts/s", "per waiter", "server CPU",
           "CPU/GL", "drain s", "drain/GL", "mem/waiter");
    for (k = 0; k < WK_COUNT; k++) {
        const wrow *r = &rows[k];
        char cr[16] = "-", dr[16] = "-";
        if (!(mask & (1u << k)))
            continue;
        if (!r->ok) {
            printf("%-14s FAILED: %s\n", wk_names[k], r->err);
            ok = 0;
            continue;
        }
        if (gl != NULL && gl->cpu_pct > 0 && !isnan(r->cpu_pct))
            setf(cr, sizeof cr, "%.2fx", r->cpu_pct / gl->cpu_pct);
        else if (gl != NULL && !isnan(r->cpu_pct))
            setf(cr, sizeof cr, "(GL 0)");
        if (gl != NULL && gl->drain_s > 0)
            setf(dr, sizeof dr, "%.2fx", r->drain_s / gl->drain_s);
        printf("%-14s %12.1f %12.3f %9.1f%% %10s %10.2f %10s %9.0f KB\n", wk_names[k], r->stmt_s,
               r->stmt_s / (double)n, r->cpu_pct, cr, r->drain_s, dr, r->mem_kb);
    }
    /* Leave no rows behind. */
    {
        rowlock_reap_options ro = ROWLOCK_REAP_OPTIONS_INIT;
        ro.grace_ms = 0;
        (void)rowlock_admin_reap(admin, &ro, NULL);
    }
    mysql_close(mon);
    rowlock_client_free(admin);
    cli_conn_free(&cc);
    return ok ? 0 : 1;
}
