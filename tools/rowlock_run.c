/*
 * rowlock run: acquire a lock, run COMMAND as a child while a thread renews
 * the lease, and end COMMAND (SIGTERM, then SIGKILL) before the lease could
 * end unrenewed. Signals sent to rowlock are forwarded to COMMAND; the
 * database connection is never inherited by it.
 */
#include "rowlock_cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char rl_usage_run[] =
    "Usage: rowlock [CONNECTION OPTIONS] run [OPTIONS] NAME [--] COMMAND [ARG...]\n"
    "       rowlock [CONNECTION OPTIONS] run [OPTIONS] NAME -c 'SHELL COMMAND'\n"
    "\n"
    "Acquire lock NAME, run COMMAND as a child while renewing the lease, release\n"
    "the lock when COMMAND ends. Options stop at the first non-option (NAME).\n"
    "\n"
    "Options:\n"
    "  -s, --strategy=S             insert (default), for-update or optimistic\n"
    "  -n, --nonblock               fail at once if the lock is held (same as -w 0)\n"
    "  -w, --wait=SECONDS           wait at most SECONDS (fractions allowed) for the lock;\n"
    "                               without -n/-w wait forever (alias: --timeout)\n"
    "  -l, --lease=SECONDS          lease length (default 30, minimum 1); renewed every\n"
    "                               third of it while COMMAND runs\n"
    "  -E, --conflict-exit-code=N   exit status when the lock is not acquired (0-255,\n"
    "                               default 1)\n"
    "  -c, --command 'CMD'          (after NAME) run CMD with /bin/sh -c\n"
    "      --verbose                report acquisition time, token and renewals on stderr\n"
    "  -h, --help                   show this help\n"
    "\n"
    "COMMAND gets ROWLOCK_NAME, ROWLOCK_TOKEN (the fencing token of this grant) and\n"
    "ROWLOCK_OWNER in its environment. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and\n"
    "SIGUSR2 sent to rowlock are forwarded to COMMAND. If the lease cannot be renewed\n"
    "(lock lost or database unreachable), COMMAND gets SIGTERM before the lease ends,\n"
    "SIGKILL 5 s later, and rowlock exits 75.\n"
    "\n"
    "Exit status: COMMAND's status; 128+N if COMMAND was killed by signal N; the\n"
    "conflict code (default 1) if the lock was not acquired with -n or within -w;\n"
    "64 usage error; 69 database unavailable or schema missing/outdated; 75 lease\n"
    "lost while running; 126 COMMAND not executable; 127 COMMAND not found.\n";


enum {
    RO_STRATEGY = 1, RO_NONBLOCK, RO_WAIT, RO_LEASE, RO_CONFLICT, RO_VERBOSE, RO_HELP
};

static const cli_optspec run_specs[] = {
    { "strategy", 's', 1, RO_STRATEGY },
    { "nonblock", 'n', 0, RO_NONBLOCK },
    { "nb", 0, 0, RO_NONBLOCK },
    { "wait", 'w', 1, RO_WAIT },
    { "timeout", 0, 1, RO_WAIT },
    { "lease", 'l', 1, RO_LEASE },
    { "conflict-exit-code", 'E', 1, RO_CONFLICT },
    { "verbose", 0, 0, RO_VERBOSE },
    { "help", 'h', 0, RO_HELP },
    { NULL, 0, 0, 0 },
};

/* Signals forwarded to COMMAND. */
static const int fwd_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
#define NFWD ((int)(sizeof fwd_signals / sizeof fwd_signals[0]))

#define KILL_AFTER_US (5 * 1000000LL)
#define RETRY_US 1000000LL

/* State shared between the main thread and the renewal thread. */
typedef struct renewer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    int64_t last_ok_us;   /* monotonic time a successful renew (or the acquire) was sent */
    int lost;             /* renew said the lock is gone */
    int lost_code;
    char lost_msg[256];
    int wake_fd;          /* write end: tells the main thread about `lost` */
    rowlock_lock *lock;
    const char *shown;    /* the lock name, printable */
    rowlock_client *client;
    int64_t lease_ms;
    int verbose;
    uint64_t token;
} renewer;

static void copy_msg(char *dst, size_t cap, const char *src)
{
    size_t k;
    for (k = 0; k + 1 < cap && src[k]; k++)
        dst[k] = ((unsigned char)src[k] < 0x20) ? ' ' : src[k];
    dst[k] = '\0';
}

static void cond_wait_until(renewer *r, int64_t until_us)
{
    /* The condvar uses CLOCK_MONOTONIC (see cmd_run). */
    struct timespec ts;
    ts.tv_sec = (time_t)(until_us / 1000000);
    ts.tv_nsec = (long)(until_us % 1000000) * 1000;
    (void)pthread_cond_timedwait(&r->cv, &r->mu, &ts); /* timeout/spurious: caller re-checks */
}

static void *renew_thread(void *arg)
{
    renewer *r = arg;
    int64_t interval = r->lease_ms * 1000 / 3, next;

    if (pthread_mutex_lock(&r->mu) != 0)
        return NULL;
    next = r->last_ok_us + interval;
    while (!r->stop) {
        int64_t t0, t1;
        int rc;
        char msg[256];

        if (cli_mono_us() < next) {
            cond_wait_until(r, next);
            continue;
        }
        pthread_mutex_unlock(&r->mu);
        t0 = cli_mono_us();
        rc = rowlock_renew(r->lock, r->lease_ms);
        t1 = cli_mono_us();
        if (rc != 0) {
            const char *m = rowlock_client_errmsg(r->client);
            copy_msg(msg, sizeof msg, m[0] ? m : rowlock_strerror(rc));
        }
        if (pthread_mutex_lock(&r->mu) != 0)
            return NULL; /* cannot happen with a default mutex */
        if (rc == 0) {
            if (r->verbose) {
                fprintf(stderr, "%s: renewed '%s' (token %" PRIu64 ", lease %.3g s, took %.3f s)\n",
                        PROG, r->shown, r->token, (double)r->lease_ms / 1000.0,
                        (double)(t1 - t0) / 1e6);
            }
            r->last_ok_us = t0; /* the new lease ends after t0 + lease */
            next = t0 + interval;
        } else if (rc == ROWLOCK_EDB || rc == ROWLOCK_ENOMEM) {
            /* Maybe transient: retry every second; the main thread enforces the deadline. */
            if (r->verbose)
                fprintf(stderr, "%s: renewing '%s' failed: %s (%s); retrying\n", PROG,
                        r->shown, msg, rowlock_error_name(rc));
            r->lost_code = rc;
            memcpy(r->lost_msg, msg, sizeof r->lost_msg);
            next = t1 + RETRY_US;
        } else {
            /* ENOTOWNER (lost) or EINVALID (no longer held): the lock is gone. */
            r->lost = 1;
            r->lost_code = rc;
            memcpy(r->lost_msg, msg, sizeof r->lost_msg);
            if (r->wake_fd >= 0) {
                char b = 1;
                ssize_t w;
                do {
                    w = write(r->wake_fd, &b, 1);
                } while (w < 0 && errno == EINTR);
                /* EAGAIN: the pipe is full, the main thread wakes anyway */
            }
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* ---- file descriptors: keep the database connection out of COMMAND ------- */

#define FDMAP_MAX 4096
typedef struct fdmap {
    unsigned char open[FDMAP_MAX / 8];
    int valid;
} fdmap;

static void fdmap_scan(fdmap *m)
{
    DIR *d;
    struct dirent *e;

    memset(m, 0, sizeof *m);
    d = opendir("/proc/self/fd");
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end != '\0' || e->d_name[0] == '\0' || fd < 0 || fd >= FDMAP_MAX)
            continue;
        if (fd == dirfd(d))
            continue;
        m->open[fd / 8] |= (unsigned char)(1u << (fd % 8));
    }
    if (closedir(d) != 0) { /* read-only directory stream: nothing lost */ }
    m->valid = 1;
}

/* Mark close-on-exec every descriptor opened since `before` (the database
 * connection and whatever the client library opened), so COMMAND does not
 * inherit it; descriptors rowlock itself inherited are passed on untouched. */
static void cloexec_new_fds(const fdmap *before)
{
    fdmap now;
    int fd;

    if (!before->valid)
        return;
    fdmap_scan(&now);
    if (!now.valid)
        return;
    for (fd = 3; fd < FDMAP_MAX; fd++) {
        int was = (before->open[fd / 8] >> (fd % 8)) & 1;
        int is = (now.open[fd / 8] >> (fd % 8)) & 1;
        if (is && !was) {
            int fl = fcntl(fd, F_GETFD);
            if (fl >= 0 && !(fl & FD_CLOEXEC) && fcntl(fd, F_SETFD, fl | FD_CLOEXEC) != 0)
                fprintf(stderr, "%s: warning: cannot set close-on-exec on fd %d: %s\n", PROG, fd,
                        strerror(errno));
        }
    }
}

/* ---- the run command ---------------------------------------------------- */

typedef struct run_args {
    rowlock_strategy strategy;
    int64_t wait_ms; /* ROWLOCK_WAIT_FOREVER, 0, or ms */
    int64_t lease_ms;
    int conflict_code;
    int verbose;
    const char *name;
    char **cmd_argv; /* NULL-terminated */
    const char *shell_cmd;
} run_args;

static int parse_run(cli_conn *cc, int argc, char **argv, run_args *ra)
{
    cli_optparser p;
    const char *val;
    int id;
    int nonblock = 0;

    cli_opt_init(&p, PROG, "run", argc, argv, 1);
    memset(ra, 0, sizeof *ra);
    ra->strategy = ROWLOCK_STRATEGY_INSERT;
    ra->wait_ms = ROWLOCK_WAIT_FOREVER;
    ra->lease_ms = ROWLOCK_LEASE_DEFAULT_MS;
    ra->conflict_code = CLI_EX_CONFLICT;

    while ((id = cli_next_opt(&p, run_specs, cc, &val)) != CLI_OP_END) {
        double s;
        unsigned long long u;
        switch (id) {
        case CLI_OP_ERR:
            return CLI_EX_USAGE;
        case CLI_OP_CONN:
            break;
        case RO_HELP:
            rl_print_cmd_help(rl_usage_run);
            return -1;
        case RO_STRATEGY:
            if (rowlock_strategy_parse(&ra->strategy, val) != 0) {
                fprintf(stderr, "%s: run: unknown strategy '%s' (insert, for-update, optimistic)\n",
                        PROG, val);
                return CLI_EX_USAGE;
            }
            break;
        case RO_NONBLOCK:
            nonblock = 1;
            break;
        case RO_WAIT:
            s = cli_parse_seconds(val);
            if (s < 0) {
                fprintf(stderr, "%s: run: --wait: '%s' is not a non-negative number of seconds\n",
                        PROG, val);
                return CLI_EX_USAGE;
            }
            ra->wait_ms = (int64_t)llround(s * 1000.0);
            break;
        case RO_LEASE:
            s = cli_parse_seconds(val);
            if (s < 1.0 || s * 1000.0 > (double)ROWLOCK_LEASE_MAX_MS) {
                fprintf(stderr, "%s: run: --lease: '%s' is not a number of seconds between 1 and "
                                "%lld\n", PROG, val, (long long)(ROWLOCK_LEASE_MAX_MS / 1000));
                return CLI_EX_USAGE;
            }
            ra->lease_ms = (int64_t)llround(s * 1000.0);
            break;
        case RO_CONFLICT:
            if (cli_parse_uint(val, 0, 255, &u) != 0) {
                fprintf(stderr, "%s: run: --conflict-exit-code: '%s' is not an exit status 0-255\n",
                        PROG, val);
                return CLI_EX_USAGE;
            }
            ra->conflict_code = (int)u;
            break;
        case RO_VERBOSE:
            ra->verbose = 1;
            break;
        default:
            break;
        }
    }
    if (nonblock)
        ra->wait_ms = 0;

    if (p.i >= argc) {
        fprintf(stderr, "%s: run: missing lock NAME and COMMAND (see rowlock run --help)\n", PROG);
        return CLI_EX_USAGE;
    }
    ra->name = argv[p.i++];
    if (cli_check_name(PROG, "run", ra->name) != 0)
        return CLI_EX_USAGE;

    if (p.i < argc && (strcmp(argv[p.i], "-c") == 0 || strcmp(argv[p.i], "--command") == 0)) {
        if (argc != p.i + 2) {
            fprintf(stderr, "%s: run: %s needs exactly one argument, the shell command\n", PROG,
                    argv[p.i]);
            return CLI_EX_USAGE;
        }
        ra->shell_cmd = argv[p.i + 1];
        return 0;
    }
    if (p.i < argc && strncmp(argv[p.i], "--command=", 10) == 0) {
        if (argc != p.i + 1) {
            fprintf(stderr, "%s: run: --command needs exactly one argument, the shell command\n",
                    PROG);
            return CLI_EX_USAGE;
        }
        ra->shell_cmd = argv[p.i] + 10;
        return 0;
    }
    if (p.i < argc && strcmp(argv[p.i], "--") == 0)
        p.i++;
    if (p.i >= argc || argv[p.i][0] == '\0') {
        fprintf(stderr, "%s: run: missing COMMAND to run under lock '%s'\n", PROG, ra->name);
        return CLI_EX_USAGE;
    }
    ra->cmd_argv = argv + p.i;
    return 0;
}

/* Restore the default action of sig and re-raise it (we die by it). */
static void die_by_signal(int sig, const sigset_t *oldmask)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0) { /* fall back to the exit below */ }
    if (raise(sig) != 0) { /* fall back to the exit below */ }
    if (sigprocmask(SIG_SETMASK, oldmask, NULL) != 0) { /* fall back to the exit below */ }
    exit(128 + sig);
}

/* A forwarded signal pending? Returns it (consumed) or 0. */
static int pending_fwd_signal(const sigset_t *fwdset)
{
    sigset_t pend;
    int k;
    if (sigpending(&pend) != 0)
        return 0;
    for (k = 0; k < NFWD; k++) {
        if (sigismember(fwdset, fwd_signals[k]) && sigismember(&pend, fwd_signals[k])) {
            sigset_t one;
            struct timespec zero = { 0, 0 };
            sigemptyset(&one);
            sigaddset(&one, fwd_signals[k]);
            if (sigtimedwait(&one, NULL, &zero) == fwd_signals[k])
                return fwd_signals[k];
        }
    }
    return 0;
}

static int set_env(const char *k, const char *v)
{
    if (setenv(k, v, 1) != 0) {
        fprintf(stderr, "%s: run: cannot set %s in the environment: %s\n", PROG, k,
                strerror(errno));
        return -1;
    }
    return 0;
}

/*
 * Wait for the child (pid), forwarding signals and enforcing the lease.
 * Returns the exit status to use. *lost set when the lock was lost.
 */
static int supervise(pid_t pid, renewer *r, int sfd, int wake_rd, const char *name,
                     const char *what, int *lost)
{
    int64_t margin, kill_at = 0;
    int lost_state = 0, killed = 0, status = 0;
    int64_t lease_us = r->lease_ms * 1000;

    margin = lease_us / 6;
    if (margin < 1000000)
        margin = 1000000;
    if (margin > lease_us / 2)
        margin = lease_us / 2;

    for (;;) {
        struct pollfd pfd[2];
        int64_t now = cli_mono_us(), last_ok, deadline = -1;
        int rlost, lcode, timeout_ms, pr;
        char lmsg[256];

        if (pthread_mutex_lock(&r->mu) != 0)
            abort();
        last_ok = r->last_ok_us;
        rlost = r->lost;
        lcode = r->lost_code;
        memcpy(lmsg, r->lost_msg, sizeof lmsg);
        pthread_mutex_unlock(&r->mu);

        if (!lost_state && (rlost || now >= last_ok + lease_us - margin)) {
            char msg[400];
            lost_state = 1;
            if (rlost) {
                snprintf(msg, sizeof msg, "the lock was lost: %s (%s)", lmsg,
                         rowlock_error_name(lcode));
            } else if (lcode != 0) {
                snprintf(msg, sizeof msg,
                         "the lease could not be renewed for %.1f s and ends in %.1f s: %s (%s)",
                         (double)(now - last_ok) / 1e6, (double)(last_ok + lease_us - now) / 1e6,
                         lmsg, rowlock_error_name(lcode));
            } else {
                snprintf(msg, sizeof msg,
                         "no renewal completed for %.1f s (the database does not answer); the "
                         "lease ends in %.1f s", (double)(now - last_ok) / 1e6,
                         (double)(last_ok + lease_us - now) / 1e6);
            }
            fprintf(stderr, "%s: lock '%s': %s; sending SIGTERM to %s (pid %ld)\n", PROG, name,
                    msg, what, (long)pid);
            if (kill(pid, SIGTERM) != 0 && errno != ESRCH)
                fprintf(stderr, "%s: kill(SIGTERM): %s\n", PROG, strerror(errno));
            kill_at = now + KILL_AFTER_US;
            /* No more renewals: the lock is given up. */
            if (pthread_mutex_lock(&r->mu) != 0)
                abort();
            r->stop = 1;
            pthread_cond_signal(&r->cv);
            pthread_mutex_unlock(&r->mu);
        }
        if (lost_state && !killed && now >= kill_at) {
            fprintf(stderr, "%s: %s (pid %ld) still running 5 s after SIGTERM; sending SIGKILL\n",
                    PROG, what, (long)pid);
            if (kill(pid, SIGKILL) != 0 && errno != ESRCH)
                fprintf(stderr, "%s: kill(SIGKILL): %s\n", PROG, strerror(errno));
            killed = 1;
        }

        if (!lost_state)
            deadline = last_ok + lease_us - margin;
        else if (!killed)
            deadline = kill_at;
        if (deadline < 0) {
            timeout_ms = -1;
        } else {
            int64_t d = deadline - now;
            if (d < 0)
                d = 0;
            d = (d + 999) / 1000;
            timeout_ms = d > INT_MAX ? INT_MAX : (int)d;
        }

        pfd[0].fd = sfd;
        pfd[0].events = POLLIN;
        pfd[0].revents = 0;
        pfd[1].fd = wake_rd;
        pfd[1].events = POLLIN;
        pfd[1].revents = 0;
        pr = poll(pfd, 2, timeout_ms);
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "%s: poll: %s\n", PROG, strerror(errno));
            abort();
        }
        if (pfd[1].revents & POLLIN) {
            char buf[16];
            ssize_t n = read(wake_rd, buf, sizeof buf);
            (void)n; /* only a wake-up; state is read under the mutex */
        }
        if (pfd[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            ssize_t n = read(sfd, &si, sizeof si);
            if (n < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (n != (ssize_t)sizeof si) {
                fprintf(stderr, "%s: reading signalfd: %s\n", PROG,
                        n < 0 ? strerror(errno) : "short read");
                abort();
            }
            if ((int)si.ssi_signo == SIGCHLD) {
                pid_t w;
                do {
                    w = waitpid(pid, &status, WNOHANG);
                } while (w < 0 && errno == EINTR);
                if (w == pid)
                    break;
                if (w < 0) {
                    fprintf(stderr, "%s: waitpid: %s\n", PROG, strerror(errno));
                    status = 0;
                    *lost = lost_state;
                    return CLI_EX_UNAVAILABLE;
                }
            } else if (si.ssi_code != SI_KERNEL) {
                /* Sent by kill()/sigqueue(): forward. A signal from the terminal
                 * (SI_KERNEL) already reached COMMAND, which is in our process group. */
                if (kill(pid, (int)si.ssi_signo) != 0 && errno != ESRCH)
                    fprintf(stderr, "%s: forwarding signal %u: %s\n", PROG, si.ssi_signo,
                            strerror(errno));
            }
        }
    }
    *lost = lost_state;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return CLI_EX_UNAVAILABLE;
}

int rl_cmd_run(cli_conn *cc, int argc, char **argv)
{
    run_args ra;
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    rowlock_lock_options lo = ROWLOCK_LOCK_OPTIONS_INIT;
    sigset_t fwdset, blockset, oldmask;
    struct sigaction sa_dfl, old_chld;
    fdmap fds_before;
    int rc, k, ex = 0;
    int64_t t_start, t_acq, t_try = 0, deadline = 0, io_ms;
    char tokbuf[32];
    int epipe[2] = { -1, -1 }, wpipe[2] = { -1, -1 }, sfd = -1;
    pid_t pid;
    const char *const what = "COMMAND"; /* how messages name the child */
    char *sh_argv[4];
    char **cargv;
    renewer rn;
    pthread_t th;
    pthread_condattr_t ca;
    int th_started = 0, lost = 0;
    char *shown;
    size_t shown_w;

    rc = parse_run(cc, argc, argv, &ra);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    shown = cli_human_str(ra.name, &shown_w);
    if (shown == NULL) {
        fprintf(stderr, "%s: out of memory\n", PROG);
        return CLI_EX_UNAVAILABLE;
    }

    /* Signals to forward: those not ignored by whoever started us (an ignored
     * signal stays ignored, and COMMAND inherits that). Blocked from here on:
     * while waiting for the lock they end rowlock cleanly, later they go to
     * COMMAND through a signalfd. */
    sigemptyset(&fwdset);
    for (k = 0; k < NFWD; k++) {
        struct sigaction cur;
        if (sigaction(fwd_signals[k], NULL, &cur) == 0 && cur.sa_handler != SIG_IGN)
            sigaddset(&fwdset, fwd_signals[k]);
    }
    /* SIGCHLD must not be ignored, or the child is reaped behind our back. */
    memset(&sa_dfl, 0, sizeof sa_dfl);
    sa_dfl.sa_handler = SIG_DFL;
    sigemptyset(&sa_dfl.sa_mask);
    if (sigaction(SIGCHLD, &sa_dfl, &old_chld) != 0) {
        fprintf(stderr, "%s: run: sigaction: %s\n", PROG, strerror(errno));
        ex = CLI_EX_UNAVAILABLE;
        goto out;
    }
    blockset = fwdset;
    sigaddset(&blockset, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &blockset, &oldmask) != 0) {
        fprintf(stderr, "%s: run: sigprocmask: %s\n", PROG, strerror(errno));
        ex = CLI_EX_UNAVAILABLE;
        goto out;
    }

    fdmap_scan(&fds_before);
    /* Bound each round trip so a hung server cannot stall rowlock for long
     * (the lease deadline is enforced independently of the renewals). */
    io_ms = ra.lease_ms / 2;
    if (io_ms < 2000)
        io_ms = 2000;
    if (io_ms > 30000)
        io_ms = 30000;
    if (cc->opts.read_timeout_ms == 0)
        cc->opts.read_timeout_ms = (unsigned int)io_ms;
    if (cc->opts.write_timeout_ms == 0)
        cc->opts.write_timeout_ms = (unsigned int)io_ms;

    rc = cli_conn_open(cc, PROG, 0, &c);
    if (rc != 0) {
        ex = rc;
        goto out;
    }

    lo.strategy = ra.strategy;
    rc = rowlock_lock_new(&l, c, ra.name, &lo);
    if (rc != 0) {
        cli_report(PROG, "run", c, rc);
        ex = cli_exit_for(rc);
        goto out;
    }

    /* Acquire, in slices of at most 1 s so a signal ends the wait promptly. */
    t_start = cli_mono_us();
    if (ra.wait_ms > 0)
        deadline = t_start + ra.wait_ms * 1000;
    for (;;) {
        int64_t slice;
        int sig;
        if (ra.wait_ms == 0) {
            slice = 0;
        } else if (ra.wait_ms == ROWLOCK_WAIT_FOREVER) {
            slice = 1000;
        } else {
            slice = (deadline - cli_mono_us() + 999) / 1000;
            if (slice > 1000)
                slice = 1000;
            if (slice < 0)
                slice = 0;
        }
        t_try = cli_mono_us();
        rc = rowlock_acquire(l, slice, ra.lease_ms);
        if (rc != ROWLOCK_EBUSY)
            break;
        sig = pending_fwd_signal(&fwdset);
        if (sig != 0) {
            rowlock_lock_free(l);
            rowlock_client_free(c);
            cli_conn_free(cc);
            free(shown);
            rowlock_library_end();
            die_by_signal(sig, &oldmask);
        }
        if (ra.wait_ms == 0 || (ra.wait_ms > 0 && cli_mono_us() >= deadline))
            break;
    }
    t_acq = cli_mono_us();
    if (rc == ROWLOCK_EBUSY) {
        if (ra.verbose)
            fprintf(stderr, "%s: lock '%s' is held by another owner; gave up after %.3f s\n", PROG,
                    shown, (double)(t_acq - t_start) / 1e6);
        ex = ra.conflict_code;
        goto out;
    }
    if (rc != 0) {
        cli_report(PROG, "cannot acquire the lock", c, rc);
        ex = cli_exit_for(rc);
        goto out;
    }
    if (t_acq - t_try > 100000) {
        /* The successful call waited: the grant was made somewhere within it,
         * so t_try is a poor lower bound for the lease start. Renew once to
         * know exactly (a failure here is handled like any failed renewal). */
        int64_t t0 = cli_mono_us();
        int r2 = rowlock_renew(l, ra.lease_ms);
        if (r2 == 0) {
            t_try = t0;
        } else if (r2 != ROWLOCK_EDB) {
            cli_report(PROG, "lost the lock right after acquiring it; COMMAND not started", c, r2);
            ex = CLI_EX_TEMPFAIL;
            goto out;
        }
    }
    snprintf(tokbuf, sizeof tokbuf, "%" PRIu64, rowlock_lock_token(l));
    if (ra.verbose)
        fprintf(stderr, "%s: acquired '%s' in %.3f s (strategy %s, token %s, lease %.3g s)\n", PROG,
                shown, (double)(t_acq - t_start) / 1e6, rl_strategy_str(ra.strategy), tokbuf,
                (double)ra.lease_ms / 1000.0);

    if (set_env("ROWLOCK_NAME", ra.name) != 0 || set_env("ROWLOCK_TOKEN", tokbuf) != 0 ||
        set_env("ROWLOCK_OWNER", rowlock_client_owner(c)) != 0) {
        ex = CLI_EX_UNAVAILABLE;
        goto release;
    }
    if (ra.shell_cmd) {
        sh_argv[0] = (char *)"sh";
        sh_argv[1] = (char *)"-c";
        sh_argv[2] = (char *)ra.shell_cmd;
        sh_argv[3] = NULL;
        cargv = sh_argv;
    } else {
        cargv = ra.cmd_argv;
    }

    cloexec_new_fds(&fds_before);
    if (pipe2(epipe, O_CLOEXEC) != 0 || pipe2(wpipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "%s: run: pipe: %s\n", PROG, strerror(errno));
        ex = CLI_EX_UNAVAILABLE;
        goto release;
    }
    sfd = signalfd(-1, &blockset, SFD_CLOEXEC);
    if (sfd < 0) {
        fprintf(stderr, "%s: run: signalfd: %s\n", PROG, strerror(errno));
        ex = CLI_EX_UNAVAILABLE;
        goto release;
    }
    if (fflush(NULL) != 0) { /* nothing buffered matters to the child */ }

    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "%s: run: fork: %s\n", PROG, strerror(errno));
        ex = CLI_EX_UNAVAILABLE;
        goto release;
    }
    if (pid == 0) {
        /* Child: only async-signal-safe calls until exec. */
        int e;
        if (sigaction(SIGCHLD, &old_chld, NULL) != 0) { /* keep going */ }
        if (sigprocmask(SIG_SETMASK, &oldmask, NULL) != 0) { /* keep going */ }
        if (ra.shell_cmd)
            execv("/bin/sh", cargv);
        else
            execvp(cargv[0], cargv);
        e = errno;
        while (write(epipe[1], &e, sizeof e) < 0 && errno == EINTR) {
        }
        _exit(e == ENOENT ? CLI_EX_NOTFOUND : CLI_EX_NOEXEC);
    }

    /* Parent. Did exec work? The pipe closes on exec, or carries errno. */
    if (close(epipe[1]) != 0) { /* the read below still works */ }
    epipe[1] = -1;
    {
        int e = 0;
        ssize_t n;
        do {
            n = read(epipe[0], &e, sizeof e);
        } while (n < 0 && errno == EINTR);
        if (n == (ssize_t)sizeof e) {
            int st;
            pid_t w;
            do {
                w = waitpid(pid, &st, 0);
            } while (w < 0 && errno == EINTR);
            fprintf(stderr, "%s: run: cannot run '%s': %s\n", PROG,
                    ra.shell_cmd ? "/bin/sh" : cargv[0], strerror(e));
            ex = (e == ENOENT || e == ENOTDIR) ? CLI_EX_NOTFOUND : CLI_EX_NOEXEC;
            goto release;
        }
    }

    /* Renewal thread. */
    memset(&rn, 0, sizeof rn);
    rn.lock = l;
    rn.shown = shown;
    rn.client = c;
    rn.lease_ms = ra.lease_ms;
    rn.verbose = ra.verbose;
    rn.token = rowlock_lock_token(l);
    /* The grant was made after the successful call was sent: its lease ends
     * after t_try + lease on our clock (a lower bound, as for renewals). */
    rn.last_ok_us = t_try;
    rn.wake_fd = wpipe[1];
    if (pthread_condattr_init(&ca) != 0 || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_mutex_init(&rn.mu, NULL) != 0 || pthread_cond_init(&rn.cv, &ca) != 0) {
        fprintf(stderr, "%s: run: cannot set up the renewal thread\n", PROG);
        abort();
    }
    pthread_condattr_destroy(&ca);
    if (pthread_create(&th, NULL, renew_thread, &rn) != 0) {
        /* Cannot renew: the lock is safe only for one lease. Treat as lost at once. */
        fprintf(stderr, "%s: run: cannot start the renewal thread\n", PROG);
        rn.lost = 1;
        rn.lost_code = ROWLOCK_ENOMEM;
        copy_msg(rn.lost_msg, sizeof rn.lost_msg, "cannot start the renewal thread");
    } else {
        th_started = 1;
    }

    ex = supervise(pid, &rn, sfd, wpipe[0], shown, what, &lost);

    if (th_started) {
        if (pthread_mutex_lock(&rn.mu) != 0)
            abort();
        rn.stop = 1;
        pthread_cond_signal(&rn.cv);
        pthread_mutex_unlock(&rn.mu);
        if (pthread_join(th, NULL) != 0)
            abort();
    }
    pthread_cond_destroy(&rn.cv);
    pthread_mutex_destroy(&rn.mu);

    if (lost) {
        /* What may remain is given back by rowlock_lock_free() below (one
         * attempt, errors ignored: the lease ends by itself). */
        fprintf(stderr, "%s: %s ended (%s %d) after lock '%s' was lost; exit %d\n", PROG, what,
                ex >= 128 ? "signal" : "status", ex >= 128 ? ex - 128 : ex, shown,
                CLI_EX_TEMPFAIL);
        ex = CLI_EX_TEMPFAIL;
        goto out;
    }

release:
    if (rowlock_lock_held(l) > 0) {
        int r2 = rowlock_release(l);
        if (r2 == ROWLOCK_ENOTOWNER) {
            cli_report(PROG, "the lock was lost before COMMAND ended", c, r2);
            ex = CLI_EX_TEMPFAIL;
        } else if (r2 != 0) {
            cli_report(PROG, "warning: cannot release the lock (it ends with its lease)", c, r2);
        } else if (ra.verbose) {
            fprintf(stderr, "%s: released '%s' (token %s)\n", PROG, shown, tokbuf);
        }
    }

out:
    if (sfd >= 0 && close(sfd) != 0) { /* nothing to do */ }
    for (k = 0; k < 2; k++) {
        if (epipe[k] >= 0 && close(epipe[k]) != 0) { /* nothing to do */ }
        if (wpipe[k] >= 0 && close(wpipe[k]) != 0) { /* nothing to do */ }
    }
    rowlock_lock_free(l);
    rowlock_client_free(c);
    free(shown);
    return ex;
}

