/*
 * rowlock-demo: several processes contend for one lock and show who held it
 * with which fencing token; the parent then checks that the tokens were
 * strictly increasing in the order the lock was granted.
 *
 *   rowlock-demo [connection options] [--procs N] [--rounds K]
 *                [--strategy insert|for-update|optimistic] [--hold-ms M]
 *                [--name NAME]
 *
 * Exit status: 0 when every grant succeeded and the tokens were strictly
 * increasing in grant order; 1 when that check failed; 64 bad usage; 69 the
 * database is unavailable.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cli.h"
#include "rowlock.h"

static const char *prog = "rowlock-demo";

#define MAX_PROCS 64
#define MAX_ROUNDS 10000

typedef struct shared {
    unsigned int ticket;  /* grant order, taken inside the critical section */
    int inside;           /* 1 while a process is in the critical section */
    int overlaps;         /* times a process found someone else inside */
    uint64_t tokens[];    /* by ticket */
} shared;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_ms(unsigned int ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* One line with a single write(2), so lines of different processes never mix. */
static void say(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
static void say(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf)
        n = (int)sizeof buf - 1;
    if (write(STDOUT_FILENO, buf, (size_t)n) < 0) { /* nothing to do about it */ }
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: %s [connection options] [--procs N] [--rounds K] [--strategy S]\n"
            "                    [--hold-ms M] [--name NAME]\n"
            "\n"
            "Migrate the lock table, then fork N processes (default 4) that each take lock\n"
            "NAME (default \"demo\") K times (default 5) and hold it M ms (default 50),\n"
            "printing the fencing token of every grant. Exits 0 if the tokens were strictly\n"
            "increasing in grant order, 1 if not.\n"
            "\n"
            "  --strategy S   insert (default), for-update or optimistic\n"
            "\n%s",
            prog, cli_conn_help);
}

typedef struct demo_opts {
    unsigned int procs, rounds, hold_ms;
    rowlock_strategy strategy;
    const char *name;
} demo_opts;

static int child(cli_conn *cc, const demo_opts *o, shared *sh, unsigned int idx)
{
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    rowlock_lock_options lo = ROWLOCK_LOCK_OPTIONS_INIT;
    int rc;
    (void)idx;
    rc = cli_conn_open(cc, prog, 0, &c);
    if (rc != 0)
        return rc;
    lo.strategy = o->strategy;
    rc = rowlock_lock_new(&l, c, o->name, &lo);
    if (rc != 0) {
        cli_report(prog, "lock", c, rc);
        rowlock_client_free(c);
        return cli_exit_for(rc);
    }
    for (unsigned int r = 0; r < o->rounds; r++) {
        int64_t t0 = now_us();
        unsigned int t;
        rc = rowlock_acquire(l, ROWLOCK_WAIT_FOREVER, 30000);
        if (rc != 0) {
            cli_report(prog, "acquire", c, rc);
            break;
        }
        if (__atomic_exchange_n(&sh->inside, 1, __ATOMIC_SEQ_CST) != 0)
            __atomic_fetch_add(&sh->overlaps, 1, __ATOMIC_SEQ_CST);
        t = __atomic_fetch_add(&sh->ticket, 1, __ATOMIC_SEQ_CST);
        if (t < o->procs * o->rounds)
            sh->tokens[t] = rowlock_lock_token(l);
        say("pid %ld holds %s  token %llu  (waited %.1f ms)\n", (long)getpid(), o->name,
            (unsigned long long)rowlock_lock_token(l), (double)(now_us() - t0) / 1000.0);
        sleep_ms(o->hold_ms);
        __atomic_store_n(&sh->inside, 0, __ATOMIC_SEQ_CST);
        rc = rowlock_release(l);
        if (rc != 0) {
            cli_report(prog, "release", c, rc);
            break;
        }
    }
    rowlock_lock_free(l);
    rowlock_client_free(c);
    return rc == 0 ? 0 : 1;
}

enum { O_PROCS = 1, O_ROUNDS, O_HOLD, O_STRATEGY, O_NAME, O_HELP };

static const cli_optspec specs[] = {
    { "procs", 0, 1, O_PROCS },
    { "rounds", 0, 1, O_ROUNDS },
    { "hold-ms", 0, 1, O_HOLD },
    { "strategy", 0, 1, O_STRATEGY },
    { "name", 0, 1, O_NAME },
    { "help", 'h', 0, O_HELP },
    { NULL, 0, 0, 0 },
};

static int parse_args(int argc, char **argv, cli_conn *cc, demo_opts *o)
{
    cli_optparser p;
    const char *val, *opt = NULL;
    unsigned long long v;
    int id;

    cli_opt_init(&p, prog, NULL, argc, argv, 1);
    while ((id = cli_next_opt(&p, specs, cc, &val)) != CLI_OP_END) {
        switch (id) {
        case CLI_OP_ERR:
            return CLI_EX_USAGE;
        case CLI_OP_CONN:
            break;
        case O_HELP:
            usage(stdout);
            exit(0);
        case O_PROCS:
            opt = "--procs";
            if (cli_parse_uint(val, 1, MAX_PROCS, &v) != 0)
                goto bad;
            o->procs = (unsigned int)v;
            break;
        case O_ROUNDS:
            opt = "--rounds";
            if (cli_parse_uint(val, 1, MAX_ROUNDS, &v) != 0)
                goto bad;
            o->rounds = (unsigned int)v;
            break;
        case O_HOLD:
            opt = "--hold-ms";
            if (cli_parse_uint(val, 0, 60000, &v) != 0)
                goto bad;
            o->hold_ms = (unsigned int)v;
            break;
        case O_STRATEGY:
            opt = "--strategy";
            if (rowlock_strategy_parse(&o->strategy, val) != 0)
                goto bad;
            break;
        case O_NAME:
            if (cli_check_name(prog, "--name", val) != 0)
                return CLI_EX_USAGE;
            o->name = val;
            break;
        default:
            break;
        }
    }
    if (p.i < argc) {
        size_t w;
        char *h = cli_human_str(argv[p.i], &w);
        fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, h ? h : "?");
        free(h);
        return CLI_EX_USAGE;
    }
    return 0;
bad:
    fprintf(stderr, "%s: bad value for %s (see --help)\n", prog, opt);
    return CLI_EX_USAGE;
}

int main(int argc, char **argv)
{
    cli_conn cc;
    demo_opts o = { 4, 5, 50, ROWLOCK_STRATEGY_INSERT, "demo" };
    rowlock_client *c = NULL;
    shared *sh;
    size_t shsize;
    pid_t pids[MAX_PROCS];
    unsigned int grants, failed = 0;
    int rc, from = 0, to = 0, ok = 1;

    cli_conn_init(&cc);
    rc = parse_args(argc, argv, &cc, &o);
    if (rc != 0) {
        cli_conn_free(&cc);
        return rc;
    }
    grants = o.procs * o.rounds;

    /* Install or upgrade the lock table, then close the parent's connection:
     * children must not share it (each opens its own after fork). */
    rc = cli_conn_open(&cc, prog, ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK, &c);
    if (rc != 0) {
        cli_conn_free(&cc);
        return rc;
    }
    rc = rowlock_schema_migrate(c, 0, &from, &to);
    if (rc != 0) {
        cli_report(prog, "migrate", c, rc);
        rowlock_client_free(c);
        cli_conn_free(&cc);
        return cli_exit_for(rc);
    }
    say("%s: table %s at schema version %d; %u processes x %u rounds on lock '%s' (%s)\n", prog,
        rowlock_client_table(c), to, o.procs, o.rounds, o.name, rowlock_strategy_name(o.strategy));
    rowlock_client_free(c);
    cc.opts.flags &= ~(unsigned int)ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK;

    shsize = sizeof *sh + sizeof sh->tokens[0] * grants;
    sh = mmap(NULL, shsize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        fprintf(stderr, "%s: mmap: %s\n", prog, strerror(errno));
        cli_conn_free(&cc);
        return 1;
    }
    memset(sh, 0, shsize);

    fflush(stdout);
    fflush(stderr);
    for (unsigned int k = 0; k < o.procs; k++) {
        pids[k] = fork();
        if (pids[k] < 0) {
            fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
            for (unsigned int j = 0; j < k; j++)
                kill(pids[j], SIGTERM);
            o.procs = k;
            ok = 0;
            break;
        }
        if (pids[k] == 0) {
            int crc = child(&cc, &o, sh, k);
            cli_conn_free(&cc);
            fflush(stdout);
            fflush(stderr);
            _exit(crc);
        }
    }
    for (unsigned int k = 0; k < o.procs; k++) {
        int st = 0;
        while (waitpid(pids[k], &st, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "%s: process %ld failed (status %d)\n", prog, (long)pids[k], st);
            failed++;
        }
    }

    if (failed > 0 || sh->ticket != grants) {
        fprintf(stderr, "%s: only %u of %u grants happened\n", prog, sh->ticket, grants);
        ok = 0;
    }
    if (sh->overlaps != 0) {
        fprintf(stderr, "%s: %d times two processes held the lock at once\n", prog, sh->overlaps);
        ok = 0;
    }
    for (unsigned int t = 1; t < sh->ticket && t < grants; t++) {
        if (sh->tokens[t] <= sh->tokens[t - 1]) {
            fprintf(stderr, "%s: grant %u got token %llu after grant %u's %llu: not increasing\n", prog, t,
                    (unsigned long long)sh->tokens[t], t - 1, (unsigned long long)sh->tokens[t - 1]);
            ok = 0;
        }
    }
    if (ok)
        say("%s: OK: %u grants by %u processes, tokens %llu..%llu strictly increasing in grant order\n", prog,
            grants, o.procs, (unsigned long long)sh->tokens[0], (unsigned long long)sh->tokens[grants - 1]);
    else
        say("%s: FAILED: see the messages above\n", prog);
    munmap(sh, shsize);
    cli_conn_free(&cc);
    return ok ? 0 : 1;
}
