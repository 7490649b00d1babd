/*
 * rowlock lock / rowlock unlock: hold a lock across several shell commands.
 *
 *   eval "$(rowlock lock [OPTIONS] NAME)"    # sets ROWLOCK_HANDLE, _NAME, _TOKEN, _OWNER
 *   ...
 *   rowlock unlock                            # "$ROWLOCK_HANDLE" by default
 *
 * `lock` forks a supervisor before it connects (the connection never crosses
 * a fork). The supervisor keeps none of the caller's descriptors but stderr,
 * connects (a --password prompt still has the terminal), leaves the caller's
 * session (setsid), acquires the lock, reports through a pipe to
 * the front process (which prints the handle and exits), then keeps the
 * lock with the library's lease keeper (rowlock_keep: renewals every third
 * of the lease on the supervisor's one connection, as for `run`) until one of:
 *   - `rowlock unlock HANDLE`: it releases and answers with the result;
 *     (`rowlock unlock --downgrade HANDLE` makes an exclusive lock shared
 *     without letting go, rowlock_downgrade, and the supervisor goes on);
 *   - the watched process exits (the shell that ran `rowlock lock`: its
 *     parent, or --pid PID), seen at once through a pidfd (polling with
 *     kill(pid, 0) every second where pidfd_open is missing): it releases;
 *   - SIGTERM, SIGINT or SIGHUP sent to it: it releases.
 * Lost-lock rules as for `run`: the lock is lost when the keeper says so (a
 * renewal found it gone, or a for-update session ended), or when renewals
 * keep failing until max(1 s, lease/6) before the keeper's safe-until time
 * (this host's monotonic clock). The supervisor cannot stop the shell's
 * commands: it stops renewing, says so on stderr, answers `unlock --check`
 * with 75 and `unlock` with 75, and stays until unlock or the shell's exit.
 *
 * The handle is "PID.SECRET" (the supervisor's pid, 128 random bits). The
 * supervisor listens on the abstract unix socket "rowlock-lock/<handle>"; it
 * answers only peers with its own uid (or root), and `unlock` believes only a
 * peer (SO_PEERCRED) that is the handle's pid running as its own uid: any
 * user can bind the name once the supervisor is gone. Protocol: one request
 * line ("unlock", "check" or "downgrade"), one reply line "<exit code> <message>".
 */
#include "commands.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

const char rl_usage_lock[] =
    "Usage: eval \"$(rowlock [CONNECTION OPTIONS] lock [OPTIONS] NAME)\"\n"
    "       eval \"$(rowlock [CONNECTION OPTIONS] lock [OPTIONS] -N NAME [-N NAME...])\"\n"
    "\n"
    "Acquire lock NAME and hold it after rowlock returns: a supervisor process\n"
    "renews the lease in the background until `rowlock unlock`, or until the\n"
    "shell that ran `rowlock lock` exits. Prints shell assignments for eval:\n"
    "ROWLOCK_HANDLE (for unlock), ROWLOCK_NAME, ROWLOCK_TOKEN (the fencing token)\n"
    "and ROWLOCK_OWNER; also ROWLOCK_COUNT, ROWLOCK_NAME_1.., ROWLOCK_TOKEN_1.. and\n"
    "ROWLOCK_TOKENS (space-separated). With several names (-N, repeated; no NAME\n"
    "operand) all are acquired together, all or none, in one global order; then\n"
    "ROWLOCK_NAME and ROWLOCK_TOKEN are unset (use the numbered ones), unlock\n"
    "releases all, and losing any one loses the set.\n"
    "\n"
    "Options:\n"
    "  -s, --shared                 take a shared lock (any number of shared holders)\n"
    "  -x, -e, --exclusive          take an exclusive lock (the default)\n"
    "      --permits=N              a counting semaphore of N (implies --shared)\n"
    "  -S, --strategy=S             insert (default), for-update or optimistic\n"
    "  -N, --name=NAME              one lock of several (repeat it; at most 64): all\n"
    "                               with the same options; for-update takes one name\n"
    "  -n, --nb, --nonblock         fail at once if the lock is held (same as -w 0)\n"
    "  -w, --wait=SECONDS           wait at most SECONDS for the lock (alias: --timeout);\n"
    "                               without -n/-w wait forever\n"
    "  -l, --lease=SECONDS          lease length (default 30, minimum 1); renewed every\n"
    "                               third of it\n"
    "  -E, --conflict-exit-code=N   exit status when the lock is not acquired (default 1)\n"
    "      --pid=PID                release when process PID exits (default: the parent\n"
    "                               of rowlock, i.e. the shell; a subshell that $(...) or\n"
    "                               a pipeline makes counts as the shell it copies; use\n"
    "                               --pid \"$$\" if rowlock is run by another program)\n"
    "      --verbose                the supervisor reports renewals and the release on stderr;\n"
    "                               on a conflict, name the holder; and the library's events\n"
    "                               (rowlock: LEVEL KIND: MESSAGE)\n"
    "      --json                   print one JSON object instead of shell assignments\n"
    "  -h, --help                   show this help\n"
    "\n"
    "The supervisor cannot stop the script's commands if the lock is lost (released\n"
    "by force, lease ended while the database was unreachable): it stops renewing\n"
    "and says so on stderr. Check with `rowlock unlock --check` before a step that\n"
    "needs the lock, and give ROWLOCK_TOKEN to the resource you protect.\n";

const char rl_usage_unlock[] =
    "Usage: rowlock unlock [--check | --downgrade] [HANDLE]\n"
    "\n"
    "Release a lock taken with `rowlock lock` (HANDLE defaults to $ROWLOCK_HANDLE)\n"
    "and end its supervisor. With --check, release nothing: tell whether the lock\n"
    "is still held.\n"
    "\n"
    "  --check      exit 0 if the lock is still held, 75 if it was lost\n"
    "  --downgrade  release nothing: make the exclusive lock shared without letting\n"
    "               go (other shared holders may join, no exclusive one before the\n"
    "               unlock; the token stays); insert strategy only\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 released (--check: held; --downgrade: shared now, or already);\n"
    "1 no such lock supervisor of yours\n"
    "(already unlocked, or its shell exited; another process or user answering on\n"
    "the handle's socket is not believed); 64 usage error; 69 the supervisor did\n"
    "not answer (--downgrade: or the database failed; the lock is still exclusive);\n"
    "75 the lock was lost before unlock (the commands since then ran without it);\n"
    "78 --downgrade of a strategy that cannot (for-update, optimistic) or on a Galera\n"
    "cluster (not done there yet).\n";

/* run's options (the shared list, rowlock_cli.h) plus lock's own. */
enum { LO_PID = 1, LO_JSON };

static const cli_optspec lock_specs[] = {
    RL_LOCK_OPTSPECS,
    { "pid", 0, 1, LO_PID },
    { "json", 0, 0, LO_JSON },
    { NULL, 0, 0, 0 },
};

enum { UO_CHECK = 1, UO_HELP, UO_DOWNGRADE };
static const cli_optspec unlock_specs[] = {
    { "check", 0, 0, UO_CHECK },
    { "downgrade", 0, 0, UO_DOWNGRADE },
    { "help", 'h', 0, UO_HELP },
    { NULL, 0, 0, 0 },
};

#define SECRET_HEX 32
/* What the supervisor prints for eval: 64 names of 255 bytes, each quoted
 * (a quote becomes 4 bytes), with their assignments. */
#define LOCK_OUT_MAX (RL_NAMES_MAX * (4 * ROWLOCK_NAME_MAX + 128) + 1024)
#define HANDLE_MAX 64

typedef struct lock_args {
    rl_lock_opts o; /* how to take the lock: the options run and lock share */
    int json;
    pid_t watch;
    const char *name;
} lock_args;

/* ---- small helpers -------------------------------------------------------- */

/* Write all of s; on a socket (sock != 0) with send(MSG_NOSIGNAL), so a
 * peer that is gone is EPIPE, never SIGPIPE. */
static int io_all(int fd, const char *s, size_t n, int sock)
{
    while (n > 0) {
        ssize_t w = sock ? send(fd, s, n, MSG_NOSIGNAL) : write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Append 'v' single-quoted for sh to buf (always safe for eval). */
static int sh_quote(char *buf, size_t cap, size_t *len, const char *v)
{
    size_t n = *len;
    if (n + 1 >= cap)
        return -1;
    buf[n++] = '\'';
    for (; *v; v++) {
        if (*v == '\'') {
            if (n + 4 >= cap)
                return -1;
            memcpy(buf + n, "'\\''", 4);
            n += 4;
        } else {
            if (n + 1 >= cap)
                return -1;
            buf[n++] = *v;
        }
    }
    if (n + 1 >= cap)
        return -1;
    buf[n++] = '\'';
    buf[n] = '\0';
    *len = n;
    return 0;
}

static int sock_addr(struct sockaddr_un *sa, socklen_t *len, const char *handle)
{
    int n;
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    /* Abstract namespace: sun_path[0] == '\0', no file to clean up. */
    n = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "rowlock-lock/%s", handle);
    if (n < 0 || (size_t)n >= sizeof sa->sun_path - 1)
        return -1;
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    return 0;
}

/* "PID.HEX32"; 0 ok. */
static int handle_check(const char *h, pid_t *pid)
{
    char *end;
    long p;
    size_t k;
    if (h[0] < '1' || h[0] > '9')
        return -1;
    errno = 0;
    p = strtol(h, &end, 10);
    if (errno != 0 || p <= 0 || p > INT_MAX || *end != '.')
        return -1;
    end++;
    for (k = 0; k < SECRET_HEX; k++)
        if (!((end[k] >= '0' && end[k] <= '9') || (end[k] >= 'a' && end[k] <= 'f')))
            return -1;
    if (end[SECRET_HEX] != '\0')
        return -1;
    *pid = (pid_t)p;
    return 0;
}

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/* Close every descriptor >= 3 but keep. */
static void close_fds_except(int keep)
{
    int fd;
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536)
        max = 65536;
    for (fd = 3; fd < max; fd++)
        if (fd != keep)
            (void)close(fd);
}

/* ---- which process to watch ---------------------------------------------------- */

/* Read /proc/PID/WHAT (at most cap bytes); its length, or -1. */
static ssize_t proc_read(pid_t pid, const char *what, char *buf, size_t cap)
{
    char path[64];
    ssize_t n, r;
    int fd;
    snprintf(path, sizeof path, "/proc/%ld/%s", (long)pid, what);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    for (n = 0; (size_t)n < cap;) {
        r = read(fd, buf + n, cap - (size_t)n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            n = -1;
            break;
        }
        if (r == 0)
            break;
        n += r;
    }
    (void)close(fd);
    return (size_t)n == cap ? -1 : n; /* too long to compare: say "unknown" */
}

/* The parent of pid from /proc/PID/stat (after the command name in
 * parentheses, which may hold anything), or -1. */
static pid_t proc_parent(pid_t pid)
{
    char buf[1024], *p;
    long pp;
    ssize_t n = proc_read(pid, "stat", buf, sizeof buf - 1);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 1, " %*c %ld", &pp) != 1 || pp <= 0)
        return -1;
    return (pid_t)pp;
}

/* Is `pid` a copy of `parent` made by fork() without an exec: a subshell, as
 * a shell makes for $(...), a pipeline's elements or ( ... )? Then its
 * executable, argument list and initial environment are the parent's. A
 * shell started from a shell is not: it was exec'd (bash and zsh also raise
 * SHLVL in its environment). Unknown (no /proc, another user's process) is
 * "no". */
static int is_subshell_of(pid_t pid, pid_t parent)
{
    static char a[65536], b[65536];
    static const char *const what[] = { "cmdline", "environ" };
    char la[PATH_MAX], lb[PATH_MAX], pa[64], pb[64];
    ssize_t na, nb;
    size_t k;
    snprintf(pa, sizeof pa, "/proc/%ld/exe", (long)pid);
    snprintf(pb, sizeof pb, "/proc/%ld/exe", (long)parent);
    na = readlink(pa, la, sizeof la);
    nb = readlink(pb, lb, sizeof lb);
    if (na <= 0 || na != nb || (size_t)na >= sizeof la || memcmp(la, lb, (size_t)na) != 0)
        return 0;
    for (k = 0; k < sizeof what / sizeof what[0]; k++) {
        na = proc_read(pid, what[k], a, sizeof a);
        nb = proc_read(parent, what[k], b, sizeof b);
        if (na < 0 || na != nb || memcmp(a, b, (size_t)na) != 0)
            return 0;
    }
    return 1;
}

/* The process whose exit ends the lock by default: our parent, or, when the
 * parent is a subshell (eval "$(rowlock lock N 2>/dev/null)", "... | cat",
 * "... 2>&1": bash then runs rowlock in a forked copy of the script's shell
 * that exits as soon as rowlock does), the shell it is a copy of. Watching
 * the subshell gave the lock up at once while lock reported success. */
static pid_t default_watch(void)
{
    pid_t pid = getppid();
    for (int depth = 0; depth < 16 && pid > 1; depth++) {
        pid_t up = proc_parent(pid);
        if (up <= 1 || !is_subshell_of(pid, up))
            break;
        pid = up;
    }
    return pid;
}

/* ---- parsing -------------------------------------------------------------- */

static int parse_lock(cli_conn *cc, int argc, char **argv, lock_args *la)
{
    cli_optparser p;
    const char *val;
    int id;
    rl_lock_opts o;

    cli_opt_init(&p, PROG, "lock", argc, argv, 1);
    memset(la, 0, sizeof *la);
    rl_lock_opts_init(&o);
    la->watch = 0; /* default_watch() unless --pid */

    while ((id = cli_next_opt(&p, lock_specs, cc, &val)) != CLI_OP_END) {
        unsigned long long u;
        int rc;
        if (id == CLI_OP_ERR)
            return CLI_EX_USAGE;
        if (id == CLI_OP_CONN)
            continue;
        rc = rl_lock_opt(&o, "lock", rl_usage_lock, id, val);
        if (rc == 1)
            continue;
        if (rc != 0)
            return rc; /* CLI_EX_USAGE, or -1 after --help */
        switch (id) {
        case LO_PID:
            /* EPERM: it runs, as another user; its exit is seen all the same. */
            if (cli_parse_uint(val, 1, INT_MAX, &u) != 0 || (kill((pid_t)u, 0) != 0 && errno != EPERM)) {
                fprintf(stderr, "%s: lock: --pid: '%s' is not a running process\n", PROG, cli_q(val));
                return CLI_EX_USAGE;
            }
            if (u == 1) {
                fprintf(stderr, "%s: lock: --pid 1: process 1 is init, which outlives every shell, so its "
                                "exit would never release the lock; give the pid whose exit should release "
                                "it (the shell's: --pid \"$$\")\n", PROG);
                return CLI_EX_USAGE;
            }
            if ((pid_t)u == getpid()) {
                fprintf(stderr, "%s: lock: --pid %llu: that is this rowlock process, which exits once "
                                "it prints the handle (so the lock would be released at once); give the "
                                "pid of the shell, e.g. --pid \"$$\"\n", PROG, u);
                return CLI_EX_USAGE;
            }
            la->watch = (pid_t)u;
            break;
        case LO_JSON:
            la->json = 1;
            break;
        default:
            break;
        }
    }
    rl_lock_opts_done(&o);
    la->o = o;
    if (o.n_names > 0) {
        la->name = la->o.names[0];
        if (o.strategy == ROWLOCK_STRATEGY_FOR_UPDATE && o.n_names > 1) {
            fprintf(stderr, "%s: lock: the for-update strategy takes one name: its lock is its connection's "
                            "transaction, which cannot hold several names apart (use insert or optimistic)\n",
                    PROG);
            return CLI_EX_USAGE;
        }
        if (p.i < argc) {
            fprintf(stderr, "%s: lock: unexpected argument '%s': with -N every name is given with -N\n", PROG,
                    cli_q(argv[p.i]));
            return CLI_EX_USAGE;
        }
    } else if (p.i >= argc) {
        fprintf(stderr, "%s: lock: missing lock NAME (see rowlock lock --help)\n", PROG);
        return CLI_EX_USAGE;
    }
    if (o.n_names == 0) {
        la->name = argv[p.i++];
        if (cli_check_name(PROG, "lock", la->name) != 0)
            return CLI_EX_USAGE;
    }
    if (p.i < argc) {
        fprintf(stderr, "%s: lock: unexpected argument after NAME (a command? use rowlock run)\n",
                PROG);
        return CLI_EX_USAGE;
    }
    if (la->watch == 0)
        la->watch = default_watch();
    if (la->watch <= 1) {
        /* Our parent is init: whoever ran rowlock has exited already, or
         * init itself started it; either way no shell is there to watch. */
        fprintf(stderr, "%s: lock: the process that ran rowlock is gone (rowlock's parent is init now), "
                        "so no shell's exit can release the lock; name the process to watch with --pid PID\n",
                PROG);
        return CLI_EX_USAGE;
    }
    return 0;
}

/* ---- the supervisor ------------------------------------------------------------ */

typedef struct sup {
    lock_args *la;
    rl_hold h;        /* the lock, its keeper and the keeper's wake-up pipe */
    char *shown;
    int lost;
    char lost_msg[400];
    int64_t margin;   /* the lock is taken for lost this long before its safe time */
    int unkept;       /* keeping stopped (after the loss) */
} sup;

static void mark_lost(sup *s, const char *why);

/* What the keeper says now: marks the lock lost when it is, or when its
 * safe time is within the margin with no renewal confirmed; and, if
 * may_block, stops keeping a lost lock (that waits for a renewal in
 * flight: never while a client waits for an answer). Returns when to look
 * again (monotonic µs; -1: no deadline). */
static int64_t lock_status(sup *s, int64_t now, int may_block)
{
    char msg[1024];
    int64_t wake = -1;
    if (s->lost) {
        if (may_block && !s->unkept) {
            rl_hold_unkeep(&s->h);
            s->unkept = 1;
        }
        return -1;
    }
    rowlock_keep_info ki = ROWLOCK_KEEP_INFO_INIT;
    int renewed, expired = rl_hold_check(&s->h, now, s->margin, &ki, &renewed);
    if (s->la->o.verbose && renewed)
        fprintf(stderr, "%s: lock supervisor: renewed '%s' (token %" PRIu64 ")\n", PROG, s->shown, s->h.token);
    if (ki.state == ROWLOCK_KEEP_LOST || ki.state == ROWLOCK_KEEP_NONE) {
        snprintf(msg, sizeof msg, "the lock was lost: %s", ki.reason[0] ? ki.reason : "the keeper no longer holds it");
        mark_lost(s, msg);
    } else if (expired) {
        snprintf(msg, sizeof msg, "the lease could not be renewed (%s) and ends in %.1f s",
                 ki.reason[0] ? ki.reason : "no renewal confirmed", (double)(ki.safe_until_us - now) / 1e6);
        mark_lost(s, msg);
    } else if (ki.safe_until_us != INT64_MAX) {
        wake = ki.safe_until_us - s->margin;
    }
    if (s->lost && may_block) {
        rl_hold_unkeep(&s->h);
        s->unkept = 1;
    }
    return wake;
}

static void release_now(sup *s, int *code, char *msg, size_t cap)
{
    int rc;
    rowlock_lock *bad = NULL;
    char why[512];
    if (s->lost || !rl_hold_all_held(&s->h)) {
        /* Losing one name of a set loses the set: the others are given back. */
        if (rl_hold_release(&s->h, s->la->o.lease_ms / 2, &bad, why, sizeof why) != 0) { /* leases end them */ }
        *code = CLI_EX_TEMPFAIL;
        snprintf(msg, cap, "lock '%s' was lost before unlock: %s", s->shown, s->lost_msg);
        return;
    }
    rc = rl_hold_release(&s->h, s->la->o.lease_ms / 2, &bad, why, sizeof why); /* retried over a failover */
    if (rc == 0) {
        *code = 0;
        snprintf(msg, cap, "released '%s' (token %" PRIu64 ")", s->shown, s->h.token);
    } else if (rc == ROWLOCK_ENOTOWNER || rc == ROWLOCK_EINVALID) {
        *code = CLI_EX_TEMPFAIL;
        snprintf(msg, cap, "lock '%s' was lost before unlock: %s (%s)", s->shown, why, rowlock_error_name(rc));
    } else {
        *code = CLI_EX_UNAVAILABLE;
        snprintf(msg, cap, "cannot release '%s' (it ends with its lease): %s (%s)", s->shown, why,
                 rowlock_error_name(rc));
    }
    if (s->la->o.verbose || *code != 0)
        fprintf(stderr, "%s: lock supervisor: %s\n", PROG, msg);
}

/* `rowlock unlock --downgrade`: exclusive to shared, still held
 * (rowlock_downgrade; the library's keeper goes on keeping it). */
static void downgrade_now(sup *s, int *code, char *msg, size_t cap)
{
    int rc;
    if (s->lost || rowlock_lock_held(s->h.l) == 0) {
        *code = CLI_EX_TEMPFAIL;
        snprintf(msg, cap, "lock '%s' was lost before the downgrade: %s", s->shown, s->lost_msg);
        return;
    }
    /* Several names (-N): each in turn; a failure stops there, and the
     * names before it stay shared (still held: weaker, never unsafe). */
    size_t i = 0;
    for (rc = 0; rc == 0 && i < s->h.n; i++)
        rc = rowlock_downgrade(s->h.ls[i]);
    if (rc != 0 && s->h.n > 1)
        fprintf(stderr, "%s: lock supervisor: %zu of %zu names downgraded before the failure\n", PROG, i - 1,
                s->h.n);
    if (rc == 0) {
        *code = 0;
        snprintf(msg, cap, "'%s' is shared now (token %" PRIu64 ")", s->shown, s->h.token);
        s->h.renewals_seen = 0; /* the keeper counts the shared grant's renewals afresh */
    } else if (rc == ROWLOCK_ENOTOWNER) {
        *code = CLI_EX_TEMPFAIL;
        snprintf(msg, cap, "lock '%s' was lost before the downgrade: %s (%s)", s->shown,
                 rowlock_client_errmsg(s->h.c), rowlock_error_name(rc));
        mark_lost(s, msg);
    } else {
        *code = cli_exit_for(rc); /* 78: a strategy or server that cannot; 69: still exclusive */
        snprintf(msg, cap, "cannot downgrade '%s' (still held exclusive): %s (%s)", s->shown,
                 rowlock_client_errmsg(s->h.c), rowlock_error_name(rc));
    }
    if (s->la->o.verbose || *code != 0)
        fprintf(stderr, "%s: lock supervisor: %s\n", PROG, msg);
}

static void mark_lost(sup *s, const char *why)
{
    size_t k;
    s->lost = 1;
    for (k = 0; k + 1 < sizeof s->lost_msg && why[k]; k++)
        s->lost_msg[k] = why[k];
    s->lost_msg[k] = '\0';
    fprintf(stderr, "%s: lock '%s': %s; no longer renewed: the commands of pid %ld now run "
                    "WITHOUT the lock\n", PROG, s->shown, why, (long)s->la->watch);
}

/* Serve one request on a connected socket; returns 1 if the supervisor must end. */
static int serve(sup *s, int fd)
{
    char req[32], reply[1100], msg[1024];
    ssize_t n;
    struct ucred cr;
    socklen_t crl = sizeof cr;
    int code, end = 0;
    struct timeval tv = { 2, 0 };

    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) != 0 ||
        (cr.uid != getuid() && cr.uid != 0))
        return 0; /* not ours to answer */
    do {
        n = read(fd, req, sizeof req - 1);
    } while (n < 0 && errno == EINTR);
    if (n <= 0)
        return 0;
    req[n] = '\0';
    if (strncmp(req, "unlock", 6) == 0) {
        release_now(s, &code, msg, sizeof msg);
        end = 1;
    } else if (strncmp(req, "downgrade", 9) == 0) {
        downgrade_now(s, &code, msg, sizeof msg);
    } else if (strncmp(req, "check", 5) == 0) {
        (void)lock_status(s, cli_mono_us(), 0); /* the keeper's word now, not as of our last wake-up */
        if (s->lost) {
            code = CLI_EX_TEMPFAIL;
            snprintf(msg, sizeof msg, "lock '%s' was lost: %s", s->shown, s->lost_msg);
        } else {
            code = 0;
            snprintf(msg, sizeof msg, "held '%s' (token %" PRIu64 "%s)", s->shown, s->h.token,
                     rowlock_lock_mode(s->h.l) == ROWLOCK_MODE_SHARED ? ", shared" : "");
        }
    } else {
        return 0;
    }
    snprintf(reply, sizeof reply, "%d %s\n", code, msg);
    (void)io_all(fd, reply, strlen(reply), 1);
    return end;
}

/* After the grant: the library's keeper renews (rowlock_keep, as for `run`);
 * the supervisor answers, watches, and decides when the lock must be taken
 * for lost. Returns the supervisor's exit status. */
static int supervise_lock(sup *s, int lfd, int pidfd, int sfd)
{
    int64_t lease_us = s->la->o.lease_ms * 1000;
    int code;
    char msg[1024];

    s->margin = lease_us / 6;
    if (s->margin < 1000000)
        s->margin = 1000000;
    if (s->margin > lease_us / 2)
        s->margin = lease_us / 2;
    for (;;) {
        struct pollfd pfd[4];
        int64_t now = cli_mono_us(), wake = lock_status(s, now, 1);
        int nfd = 0, timeout_ms, pr, k, ipid = -1;

        /* --verbose reports renewals within a second; without a pidfd the
         * watched pid is polled every second. */
        if ((s->la->o.verbose || pidfd < 0) && (wake < 0 || wake > now + 1000000))
            wake = now + 1000000;
        if (wake < 0) {
            timeout_ms = -1;
        } else {
            int64_t d = (wake - now + 999) / 1000;
            timeout_ms = d < 0 ? 0 : d > INT_MAX ? INT_MAX : (int)d;
        }
        pfd[nfd].fd = lfd;
        pfd[nfd++].events = POLLIN;
        pfd[nfd].fd = sfd;
        pfd[nfd++].events = POLLIN;
        pfd[nfd].fd = s->h.wake[0];
        pfd[nfd++].events = POLLIN;
        if (pidfd >= 0) {
            ipid = nfd;
            pfd[nfd].fd = pidfd;
            pfd[nfd++].events = POLLIN;
        }
        for (k = 0; k < nfd; k++)
            pfd[k].revents = 0;
        pr = poll(pfd, (nfds_t)nfd, timeout_ms);
        if (pr < 0 && errno != EINTR)
            return CLI_EX_UNAVAILABLE;
        if (pr <= 0) {
            if (pidfd < 0 && kill(s->la->watch, 0) != 0 && errno == ESRCH)
                goto watched_gone;
            continue;
        }
        if (pfd[2].revents & POLLIN)
            rl_hold_wake_drain(&s->h); /* the status is read at the top */
        if (pfd[0].revents & POLLIN) {
            int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (cfd >= 0) {
                int end = serve(s, cfd);
                (void)close(cfd);
                if (end)
                    return 0;
            }
        }
        if (pfd[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            ssize_t n = read(sfd, &si, sizeof si);
            if (n == (ssize_t)sizeof si) {
                if (s->la->o.verbose)
                    fprintf(stderr, "%s: lock supervisor: signal %u; releasing '%s'\n", PROG,
                            si.ssi_signo, s->shown);
                if (!s->lost)
                    release_now(s, &code, msg, sizeof msg);
                return 0;
            }
        }
        if (ipid >= 0 && (pfd[ipid].revents & (POLLIN | POLLHUP)))
            goto watched_gone;
    }
watched_gone:
    if (s->la->o.verbose)
        fprintf(stderr, "%s: lock supervisor: pid %ld exited; releasing '%s'\n", PROG,
                (long)s->la->watch, s->shown);
    if (!s->lost)
        release_now(s, &code, msg, sizeof msg);
    return 0;
}

/* While waiting for the lock: SIGTERM, SIGINT or SIGHUP (forwarded by the
 * front, or sent to us) or the watched shell's exit ends the wait. */
static int acquire_stop(void *arg)
{
    const lock_args *la = arg;
    sigset_t pend;
    return (sigpending(&pend) == 0 && (sigismember(&pend, SIGTERM) || sigismember(&pend, SIGINT) ||
                                       sigismember(&pend, SIGHUP))) ||
           (kill(la->watch, 0) != 0 && errno == ESRCH);
}

/* The supervisor process: acquire, report on rfd, then supervise_lock. */
static int run_supervisor(cli_conn *cc, lock_args *la, int rfd)
{
    sup s;
    sigset_t set;
    int rc, ex = 0, lfd = -1, pidfd = -1, sfd = -1, devnull, rnd, stopped;
    unsigned char secret[SECRET_HEX / 2];
    char handle[HANDLE_MAX], head[16];
    static char out[LOCK_OUT_MAX]; /* the assignments: up to 64 names of 255 bytes, quoted */
    rowlock_lock *bad = NULL;
    char why[512];
    size_t len = 0, k, w;
    struct sockaddr_un sa;
    socklen_t salen;
    struct stat st_err, st_out;

    memset(&s, 0, sizeof s);
    s.la = la;
    rl_hold_init(&s.h);
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    (void)sigprocmask(SIG_BLOCK, &set, NULL);
    (void)signal(SIGPIPE, SIG_IGN);
    /* Keep none of the caller's descriptors but stderr: a pipe we kept open
     * would keep its reader (the caller's $(...)) waiting. stderr too if it
     * is the same pipe as the front's stdout (2>&1 inside $(...)). */
    if (fstat(2, &st_err) == 0 && fstat(1, &st_out) == 0 && st_err.st_dev == st_out.st_dev &&
        st_err.st_ino == st_out.st_ino && !isatty(2)) {
        devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            (void)dup2(devnull, 2);
            (void)close(devnull);
        }
    }
    devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        (void)dup2(devnull, 0);
        (void)dup2(devnull, 1);
        if (devnull > 2)
            (void)close(devnull);
    }
    if (rfd != 3) {
        if (dup2(rfd, 3) < 0)
            return CLI_EX_UNAVAILABLE;
        (void)close(rfd);
        rfd = 3;
    }
    close_fds_except(rfd);

    s.shown = la->o.n_names > 0 ? rl_names_shown(la->o.names, la->o.n_names, &w) : cli_human_str(la->name, &w);
    if (s.shown == NULL)
        return CLI_EX_UNAVAILABLE;
    pidfd = pidfd_open_(la->watch);
    if (pidfd >= 0)
        (void)fcntl(pidfd, F_SETFD, FD_CLOEXEC);
    sfd = signalfd(-1, &set, SFD_CLOEXEC);

    ex = rl_hold_connect(&s.h, cc, &la->o); /* may prompt on /dev/tty (--password) */
    if (ex != 0)
        goto report;
    /* Out of the caller's session (after the prompt, which needs its
     * terminal): the terminal's signals are not ours; the front process
     * forwards SIGINT/SIGTERM/SIGHUP while we wait. */
    (void)setsid();
    ex = la->o.n_names > 0 ? rl_hold_new_set(&s.h, &la->o, "lock", la->o.names, la->o.n_names)
                           : rl_hold_new(&s.h, &la->o, "lock", la->name);
    if (ex != 0)
        goto report;
    rc = rl_hold_acquire(&s.h, &la->o, acquire_stop, la, &stopped);
    if (stopped) {
        ex = 128 + SIGTERM; /* the front was interrupted, or the shell is gone */
        goto report;
    }
    if (rc == ROWLOCK_EBUSY) {
        if (la->o.verbose)
            fprintf(stderr, "%s: not acquired: %s\n", PROG, rowlock_client_errmsg(s.h.c));
        ex = la->o.conflict_code;
        goto report;
    }
    if (rc != 0) {
        cli_report(PROG, "cannot acquire the lock", s.h.c, rc);
        ex = cli_exit_for(rc); /* the one mapping: 78 for EUNSUPPORTED, as run */
        goto report;
    }

    /* The library's keeper renews the lease on our one connection (or,
     * for for-update, watches the holding session); its callback wakes the
     * supervisor. */
    ex = rl_hold_keep(&s.h, &la->o, "lock", "cannot keep the lock");
    if (ex == 0)
        ex = rl_hold_confirm(&s.h, &la->o, "lost the lock right after acquiring it");
    if (ex != 0)
        goto report;

    /* The handle and its socket. */
    rnd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (rnd < 0 || read(rnd, secret, sizeof secret) != (ssize_t)sizeof secret) {
        fprintf(stderr, "%s: lock: cannot read /dev/urandom\n", PROG);
        if (rnd >= 0)
            (void)close(rnd);
        ex = CLI_EX_UNAVAILABLE;
        goto report;
    }
    (void)close(rnd);
    len = (size_t)snprintf(handle, sizeof handle, "%ld.", (long)getpid());
    for (k = 0; k < sizeof secret; k++)
        len += (size_t)snprintf(handle + len, sizeof handle - len, "%02x", secret[k]);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || sock_addr(&sa, &salen, handle) != 0 ||
        bind(lfd, (struct sockaddr *)&sa, salen) != 0 || listen(lfd, 8) != 0) {
        fprintf(stderr, "%s: lock: cannot listen for unlock: %s\n", PROG, strerror(errno));
        ex = CLI_EX_UNAVAILABLE;
        goto report;
    }

    if (la->json) {
        char *js = NULL;
        size_t jn = 0;
        FILE *f = open_memstream(&js, &jn);
        if (f == NULL)
            goto toolong;
        fputs("{\"handle\":", f);
        cli_json_string(f, handle);
        if (s.h.n == 1) {
            fputs(",\"name\":", f);
            cli_json_string(f, la->name);
            fprintf(f, ",\"token\":%" PRIu64, s.h.token);
        }
        fputs(",\"names\":[", f); /* every name and token, in the order given */
        for (k = 0; k < s.h.n; k++) {
            fputs(k ? "," : "", f);
            cli_json_string(f, rowlock_lock_name(s.h.ls[k]));
        }
        fputs("],\"tokens\":[", f);
        for (k = 0; k < s.h.n; k++)
            fprintf(f, "%s%" PRIu64, k ? "," : "", s.h.tokens[k]);
        fputs("],\"owner\":", f);
        cli_json_string(f, rowlock_client_owner(s.h.c));
        fputs(",\"strategy\":", f);
        cli_json_string(f, rl_strategy_str(la->o.strategy));
        fprintf(f, ",\"lease_ms\":%" PRId64 ",\"supervisor_pid\":%ld,\"watched_pid\":%ld}\n",
                la->o.lease_ms, (long)getpid(), (long)la->watch);
        if (fclose(f) != 0 || jn >= sizeof out) {
            free(js);
            goto toolong;
        }
        memcpy(out, js, jn + 1);
        len = jn;
        free(js);
        goto verbose;
    }
    len = 0;
    if (s.h.n == 1) {
        len += (size_t)snprintf(out + len, sizeof out - len, "ROWLOCK_HANDLE=%s; export ROWLOCK_HANDLE;\n"
                                "ROWLOCK_TOKEN=%" PRIu64 "; export ROWLOCK_TOKEN;\nROWLOCK_NAME=",
                                handle, s.h.token);
        if (sh_quote(out, sizeof out, &len, la->name) != 0)
            goto toolong;
        len += (size_t)snprintf(out + len, sizeof out - len, "; export ROWLOCK_NAME;\n");
    } else {
        len += (size_t)snprintf(out + len, sizeof out - len, "ROWLOCK_HANDLE=%s; export ROWLOCK_HANDLE;\n"
                                "unset ROWLOCK_NAME ROWLOCK_TOKEN;\n", handle);
    }
    /* Every name, numbered from 1 in the order given, and the tokens. */
    len += (size_t)snprintf(out + len, sizeof out - len, "ROWLOCK_COUNT=%zu; export ROWLOCK_COUNT;\n", s.h.n);
    for (k = 0; k < s.h.n && len < sizeof out; k++) {
        len += (size_t)snprintf(out + len, sizeof out - len, "ROWLOCK_NAME_%zu=", k + 1);
        if (len >= sizeof out || sh_quote(out, sizeof out, &len, rowlock_lock_name(s.h.ls[k])) != 0)
            goto toolong;
        len += (size_t)snprintf(out + len, sizeof out - len,
                                "; export ROWLOCK_NAME_%zu;\nROWLOCK_TOKEN_%zu=%" PRIu64 "; export ROWLOCK_TOKEN_%zu;\n",
                                k + 1, k + 1, s.h.tokens[k], k + 1);
    }
    if (len < sizeof out)
        len += (size_t)snprintf(out + len, sizeof out - len, "ROWLOCK_TOKENS='");
    for (k = 0; k < s.h.n && len < sizeof out; k++)
        len += (size_t)snprintf(out + len, sizeof out - len, "%s%" PRIu64, k ? " " : "", s.h.tokens[k]);
    if (len < sizeof out)
        len += (size_t)snprintf(out + len, sizeof out - len, "'; export ROWLOCK_TOKENS;\nROWLOCK_OWNER=");
    if (len >= sizeof out || sh_quote(out, sizeof out, &len, rowlock_client_owner(s.h.c)) != 0)
        goto toolong;
    len += (size_t)snprintf(out + len, sizeof out - len, "; export ROWLOCK_OWNER;\n");
    if (len >= sizeof out)
        goto toolong;
verbose:
    if (la->o.verbose)
        fprintf(stderr, "%s: lock supervisor (pid %ld): acquired '%s' (token %" PRIu64
                        "); released when pid %ld exits\n", PROG, (long)getpid(), s.shown,
                s.h.token, (long)la->watch);

report:
    snprintf(head, sizeof head, "%d\n", ex);
    if (io_all(rfd, head, strlen(head), 0) != 0 || (ex == 0 && io_all(rfd, out, len, 0) != 0)) {
        /* The front is gone (killed): nobody knows the handle; give the lock back. */
        if (ex == 0 && rl_hold_release(&s.h, 0, &bad, why, sizeof why) != 0) { /* leases end them */ }
        ex = ex == 0 ? CLI_EX_UNAVAILABLE : ex;
    } else if (ex == 0) {
        (void)close(rfd);
        rfd = -1;
        ex = supervise_lock(&s, lfd, pidfd, sfd);
    }
    goto out;
toolong:
    fprintf(stderr, "%s: lock: handle text too long\n", PROG);
    ex = CLI_EX_UNAVAILABLE;
    if (rl_hold_release(&s.h, 0, &bad, why, sizeof why) != 0) { /* leases end them */ }
    goto report;
out:
    if (rfd >= 0)
        (void)close(rfd);
    if (lfd >= 0)
        (void)close(lfd);
    if (pidfd >= 0)
        (void)close(pidfd);
    if (sfd >= 0)
        (void)close(sfd);
    rl_hold_done(&s.h);
    free(s.shown);
    return ex;
}

/* ---- the front: rowlock lock ------------------------------------------------ */

static volatile sig_atomic_t front_child;

static void front_on_signal(int sig)
{
    if (front_child > 0)
        (void)kill((pid_t)front_child, SIGTERM);
    (void)signal(sig, SIG_DFL);
    (void)raise(sig);
}

int rl_cmd_lock(cli_conn *cc, int argc, char **argv)
{
    lock_args la;
    int rc, p[2], k, status;
    pid_t pid;
    static char buf[LOCK_OUT_MAX + 32];
    size_t n = 0;
    ssize_t r;
    long code;
    char *nl, *end;
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };

    rc = parse_lock(cc, argc, argv, &la);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (CLI_PARSE_ONLY)
        return 0;
    if (pipe2(p, O_CLOEXEC) != 0) {
        fprintf(stderr, "%s: lock: pipe: %s\n", PROG, strerror(errno));
        return CLI_EX_UNAVAILABLE;
    }
    if (fflush(NULL) != 0) { /* nothing buffered matters */ }
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "%s: lock: fork: %s\n", PROG, strerror(errno));
        return CLI_EX_UNAVAILABLE;
    }
    if (pid == 0) {
        int ex;
        (void)close(p[0]);
        ex = run_supervisor(cc, &la, p[1]);
        cli_conn_free(cc);
        rowlock_library_end();
        _exit(ex);
    }
    (void)close(p[1]);
    front_child = pid;
    for (k = 0; k < 3; k++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = front_on_signal;
        sigemptyset(&sa.sa_mask);
        (void)sigaction(sigs[k], &sa, NULL);
    }
    /* Everything the supervisor reports, until it closes its end (it does
     * before it starts supervising, or by exiting). */
    for (;;) {
        r = read(p[0], buf + n, sizeof buf - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n >= sizeof buf - 1)
            break;
    }
    (void)close(p[0]);
    buf[n] = '\0';
    nl = strchr(buf, '\n');
    errno = 0;
    code = strtol(buf, &end, 10);
    if (nl == NULL || end != nl || errno != 0 || code < 0 || code > 255) {
        /* The supervisor died before reporting: collect its status. */
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        fprintf(stderr, "%s: lock: the lock supervisor ended without a result\n", PROG);
        return CLI_EX_UNAVAILABLE;
    }
    if (code != 0) {
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        return (int)code;
    }
    /* The supervisor lives on; it is reparented when we exit. */
    fputs(nl + 1, stdout);
    return cli_finish_stdout(PROG, 0);
}

/* ---- rowlock unlock ------------------------------------------------------------ */

int rl_cmd_unlock(cli_conn *cc, int argc, char **argv)
{
    cli_optparser p;
    const char *val, *handle;
    int id, check = 0, downgrade = 0, fd, code;
    pid_t spid;
    struct sockaddr_un sa;
    socklen_t salen;
    char reply[1100], *sp, *end;
    size_t n = 0;
    ssize_t r;
    struct timeval tv = { 60, 0 };
    struct ucred cr;
    socklen_t crl = sizeof cr;

    (void)cc;
    cli_opt_init(&p, PROG, "unlock", argc, argv, 1);
    while ((id = cli_next_opt(&p, unlock_specs, NULL, &val)) != CLI_OP_END) {
        if (id == CLI_OP_ERR)
            return CLI_EX_USAGE;
        if (id == UO_HELP) {
            fputs(rl_usage_unlock, stdout);
            return cli_finish_stdout(PROG, 0);
        }
        if (id == UO_CHECK)
            check = 1;
        if (id == UO_DOWNGRADE)
            downgrade = 1;
    }
    if (check && downgrade) {
        fprintf(stderr, "%s: unlock: --check and --downgrade exclude each other\n", PROG);
        return CLI_EX_USAGE;
    }
    if (p.i < argc) {
        handle = argv[p.i++];
    } else {
        handle = getenv("ROWLOCK_HANDLE");
        if (handle == NULL || handle[0] == '\0') {
            fprintf(stderr, "%s: unlock: no HANDLE given and ROWLOCK_HANDLE is not set\n", PROG);
            return CLI_EX_USAGE;
        }
    }
    if (p.i < argc) {
        fprintf(stderr, "%s: unlock: unexpected argument after HANDLE\n", PROG);
        return CLI_EX_USAGE;
    }
    if (handle_check(handle, &spid) != 0 || sock_addr(&sa, &salen, handle) != 0) {
        size_t w;
        char *h = cli_human_str(handle, &w);
        fprintf(stderr, "%s: unlock: '%s' is not a handle from rowlock lock (PID.SECRET)\n", PROG,
                h ? h : "?");
        free(h);
        return CLI_EX_USAGE;
    }
    if (CLI_PARSE_ONLY)
        return 0;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, salen) != 0) {
        fprintf(stderr, "%s: unlock: no lock supervisor for handle %ld.... (already unlocked, or "
                        "the shell that locked it exited)\n", PROG, (long)spid);
        if (fd >= 0)
            (void)close(fd);
        return CLI_EX_CONFLICT;
    }
    /* The name is in the abstract namespace, which any local user can bind
     * once our supervisor is gone (and read in /proc/net/unix): believe only
     * the process the handle names, running as us. */
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) != 0) {
        fprintf(stderr, "%s: unlock: cannot tell who answers for handle %ld....: %s\n", PROG, (long)spid,
                strerror(errno));
        (void)close(fd);
        return CLI_EX_UNAVAILABLE;
    }
    if (cr.uid != geteuid() || cr.pid != spid) {
        fprintf(stderr, "%s: unlock: no lock supervisor of yours for handle %ld....: its socket is answered by "
                        "pid %ld of uid %ld (already unlocked, or the shell that locked it exited)\n",
                PROG, (long)spid, (long)cr.pid, (long)cr.uid);
        (void)close(fd);
        return CLI_EX_CONFLICT;
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const char *req = check ? "check\n" : downgrade ? "downgrade\n" : "unlock\n";
    if (io_all(fd, req, strlen(req), 1) != 0) {
        fprintf(stderr, "%s: unlock: the lock supervisor (pid %ld) closed the connection: %s\n", PROG, (long)spid,
                strerror(errno));
        (void)close(fd);
        return CLI_EX_UNAVAILABLE;
    }
    for (;;) {
        r = read(fd, reply + n, sizeof reply - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n >= sizeof reply - 1 || memchr(reply, '\n', n) != NULL)
            break;
    }
    (void)close(fd);
    reply[n] = '\0';
    errno = 0;
    code = (int)strtol(reply, &end, 10);
    if (n == 0 || end == reply || *end != ' ' || errno != 0) {
        fprintf(stderr, "%s: unlock: no answer from the lock supervisor (pid %ld)\n", PROG,
                (long)spid);
        return CLI_EX_UNAVAILABLE;
    }
    sp = end + 1;
    sp[strcspn(sp, "\n")] = '\0';
    if (code != 0)
        fprintf(stderr, "%s: unlock: %s\n", PROG, sp);
    return code;
}
