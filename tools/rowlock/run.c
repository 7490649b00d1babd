/*
 * rowlock run: acquire a lock, run COMMAND as a child while a thread renews
 * the lease, and end COMMAND (SIGTERM, then SIGKILL) before the lease could
 * end unrenewed. Signals sent to rowlock are forwarded to COMMAND; the
 * database connection is never inherited by it.
 */
#include "commands.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char rl_usage_run[] =
    "Usage: rowlock [CONNECTION OPTIONS] run [OPTIONS] NAME [--] COMMAND [ARG...]\n"
    "       rowlock [CONNECTION OPTIONS] run [OPTIONS] NAME -c 'SHELL COMMAND'\n"
    "       rowlock [CONNECTION OPTIONS] run [OPTIONS] -N NAME [-N NAME...] [--] COMMAND [ARG...]\n"
    "\n"
    "Acquire lock NAME, run COMMAND as a child while renewing the lease, release\n"
    "the lock when COMMAND ends. Options stop at the first non-option (NAME).\n"
    "With -N, every name comes from -N (no NAME operand): all are acquired\n"
    "together, all or none, in one global order (no deadlock between sets).\n"
    "\n"
    "Options (those of flock(1), with a lock NAME instead of a file):\n"
    "  -s, --shared                 take a shared lock: any number of shared holders\n"
    "                               at once, never with an exclusive one\n"
    "  -x, -e, --exclusive          take an exclusive lock (the default)\n"
    "      --permits=N              a counting semaphore: at most N holders at once\n"
    "                               (implies --shared; insert strategy)\n"
    "  -S, --strategy=S             insert (default), for-update or optimistic\n"
    "  -N, --name=NAME              one lock of several (repeat it; at most 64): all\n"
    "                               with the same options; for-update takes one name\n"
    "  -n, --nb, --nonblock         fail at once if the lock is held (same as -w 0)\n"
    "  -w, --wait=SECONDS           wait at most SECONDS (fractions allowed) for the lock;\n"
    "                               without -n/-w wait forever (alias: --timeout)\n"
    "  -l, --lease=SECONDS          lease length (default 30, minimum 1); renewed every\n"
    "                               third of it while COMMAND runs\n"
    "  -E, --conflict-exit-code=N   exit status when the lock is not acquired (0-255,\n"
    "                               default 1)\n"
    "  -c, --command 'CMD'          (after NAME, or among the options with -N) run CMD\n"
    "                               with /bin/sh -c\n"
    "  -o, --close                  accepted for flock(1) compatibility: COMMAND never\n"
    "                               inherits the database connection anyway\n"
    "  -F, --no-fork                refused: the lease needs rowlock to stay as\n"
    "                               COMMAND's parent, which renews it and stops COMMAND\n"
    "                               before it ends (signals are forwarded to COMMAND)\n"
    "  -k, --kill-after=SECONDS     when the lease cannot be renewed, COMMAND gets SIGTERM\n"
    "                               this long before SIGKILL, and SIGKILL comes before the\n"
    "                               lease could end (default: a quarter of the lease, at\n"
    "                               most 5 s); must fit in half the lease\n"
    "      --verbose                report acquisition time, token and renewals on stderr;\n"
    "                               on a conflict, name the holder; and the library's\n"
    "                               events (rowlock: LEVEL KIND: MESSAGE)\n"
    "  -V, --version                show the version\n"
    "  -h, --help                   show this help\n"
    "\n"
    "COMMAND gets ROWLOCK_NAME, ROWLOCK_TOKEN (the fencing token of this grant) and\n"
    "ROWLOCK_OWNER in its environment; with several names (-N) no ROWLOCK_NAME and\n"
    "ROWLOCK_TOKEN, but ROWLOCK_COUNT=N, ROWLOCK_NAME_1..N, ROWLOCK_TOKEN_1..N (in\n"
    "the order given) and ROWLOCK_TOKENS (the tokens, space-separated); one name\n"
    "sets ROWLOCK_COUNT, ROWLOCK_NAME_1 and ROWLOCK_TOKEN_1 too. Losing any one\n"
    "name loses the run (exit 75). SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and\n"
    "SIGUSR2 sent to rowlock are forwarded to COMMAND. If the lease cannot be renewed\n"
    "(lock lost or database unreachable), COMMAND gets SIGTERM, SIGKILL --kill-after\n"
    "seconds later, and is gone before the lease could end; rowlock exits 75.\n";


/* run's options: the shared ones (rowlock_cli.h), plus flock(1)'s -o, -F
 * and -V. -c/--command comes after NAME and is read by parse_run itself. */
enum { RO_CLOSE = 1, RO_NO_FORK, RO_VERSION, RO_KILL_AFTER, RO_COMMAND };

static const cli_optspec run_specs[] = {
    RL_LOCK_OPTSPECS,
    { "close", 'o', 0, RO_CLOSE },
    { "no-fork", 'F', 0, RO_NO_FORK },
    { "version", 'V', 0, RO_VERSION },
    { "kill-after", 'k', 1, RO_KILL_AFTER },
    { "command", 'c', 1, RO_COMMAND }, /* an option only with -N: after NAME otherwise */
    { NULL, 0, 0, 0 },
};

/* Signals forwarded to COMMAND. */
static const int fwd_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
#define NFWD ((int)(sizeof fwd_signals / sizeof fwd_signals[0]))

#define RETRY_US 1000000LL

/*
 * The stop schedule. The keeper's safe-until time is the earliest moment the
 * server could end the lease (the last confirmed renewal's request time plus
 * the lease, on this host's monotonic clock). COMMAND must be gone by then,
 * however long it takes to honour SIGTERM:
 *
 *   SIGTERM at  safe_until - grace - reap
 *   SIGKILL at  safe_until - reap        (earlier if the lock is already lost)
 *
 * `reap` covers delivering SIGKILL and the supervisor's own wake-up latency
 * (a tenth of the lease, 250 ms to 1 s). Renewals run every third of the
 * lease, so after a healthy renewal at least two thirds of it are left:
 * grace + reap must stay below half the lease, or a single late renewal
 * would stop COMMAND. --kill-after beyond that is refused at start.
 */
static int64_t reap_us_for(int64_t lease_ms)
{
    int64_t r = lease_ms * 100; /* a tenth of the lease, in us */
    if (r < 250000)
        r = 250000;
    if (r > 1000000)
        r = 1000000;
    return r;
}

static int64_t default_grace_us(int64_t lease_ms)
{
    int64_t g = lease_ms * 250; /* a quarter of the lease, in us */
    return g > 5000000 ? 5000000 : g;
}

/* What the supervisor knows besides the keeper's status. */
typedef struct watch {
    rl_hold *h;           /* the lock, its keeper and the keeper's wake-up pipe */
    const char *shown;    /* the lock name, printable */
    int64_t lease_ms;
    int64_t grace_us;     /* SIGTERM -> SIGKILL (--kill-after) */
    int64_t reap_us;      /* SIGKILL -> safe-until */
    int verbose;
} watch;

/* ---- the watchdog: COMMAND never outlives the lease, even if we stop ------ */

/*
 * A second child, forked right after COMMAND, that kills COMMAND at its
 * deadline (safe-until minus half the reap allowance: after the supervisor's
 * own SIGKILL time, before the lease could end) unless the supervisor moves
 * the deadline on. The supervisor alone can be stopped (SIGSTOP of its pid,
 * not the group), starved or killed while COMMAND runs on; its keeper
 * threads stop with it, the lease ends on the server, and without this a
 * next holder would overlap COMMAND. The watchdog:
 *   - reads deadlines (CLOCK_MONOTONIC us, int64) from a socket; INT64_MAX
 *     means none; -1 means "done, exit";
 *   - holds a pidfd of COMMAND, opened by the supervisor before COMMAND
 *     could be reaped, so a reused pid is never hit; it exits as soon as
 *     COMMAND has exited (the pidfd turns readable);
 *   - on EOF (the supervisor died) keeps the last deadline; for a
 *     for-update lock it kills COMMAND at once instead: the lock is the
 *     supervisor's session, which its death closes, and the server grants
 *     the next waiter as soon as it sees the close;
 *   - ignores the signals a terminal or a group kill sends, so it outlives
 *     neither COMMAND's guard duty nor less than COMMAND;
 *   - makes only system calls (it is forked from a threaded process).
 * Where pidfds are missing (Linux < 5.3) there is no watchdog: --verbose
 * says so, and only the supervisor stops COMMAND.
 */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

static int64_t wd_now_us(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- what COMMAND started ---------------------------------------------------
 *
 * A lost lock stops COMMAND and everything it started: a script's programs,
 * `make`'s jobs, a pipeline, a daemon that forked away. rowlock makes
 * itself a child subreaper (PR_SET_CHILD_SUBREAPER) before it forks
 * COMMAND, so a descendant orphaned by its parent's exit is re-parented to
 * rowlock rather than to init, and stays findable by its parent links in
 * /proc: setsid() and a double fork do not take it out of the tree. What a
 * process moves out by other means (a service manager asked to start it,
 * a container runtime) is not COMMAND's to stop. The walk below uses only
 * async-signal-safe calls (the watchdog, a child of a threaded process,
 * runs it), and signals through a pidfd opened after the parent link was
 * read and checked again, so a pid reused meanwhile is never signalled. */

#define TREE_MAX 4096 /* descendants followed per walk */

struct linux_dirent64_ {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Process pid's state letter and parent from /proc/PID/stat: 0, or -1 if
 * it is gone or unreadable. */
static int proc_stat(pid_t pid, char *state, pid_t *ppid)
{
    char path[32] = "/proc/", buf[512], digits[16];
    size_t n = 0, k = 6;
    unsigned long v = (unsigned long)pid;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < sizeof digits);
    while (n)
        path[k++] = digits[--n];
    memcpy(path + k, "/stat", 6);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t r;
    do {
        r = read(fd, buf, sizeof buf - 1);
    } while (r < 0 && errno == EINTR);
    close(fd);
    if (r <= 0)
        return -1;
    buf[r] = '\0';
    char *e = strrchr(buf, ')'); /* the command name may hold anything */
    if (e == NULL || e[1] != ' ' || e[2] == '\0' || e[3] != ' ')
        return -1;
    *state = e[2];
    long pp = 0;
    for (const char *d = e + 4; *d >= '0' && *d <= '9'; d++)
        pp = pp * 10 + (*d - '0');
    *ppid = (pid_t)pp;
    return 0;
}

static int in_set(const pid_t *set, size_t n, pid_t p)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == p)
            return 1;
    return 0;
}

/* rowlock's own children when it forked COMMAND (a process may exec
 * rowlock with children already running: `sidecar & exec rowlock run ...`):
 * they and their trees are not COMMAND's, and no walk goes below them. */
#define SPARE_MAX 256
static pid_t spare_pids[SPARE_MAX];
static size_t n_spare;

/* Calls fn(pid, state, ppid, arg) for every process in /proc; fn returns
 * nonzero to stop. -1 if /proc cannot be read. Async-signal-safe. */
static int each_proc(int (*fn)(pid_t p, char st, pid_t pp, void *arg), void *arg)
{
    int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    for (;;) {
        union {
            uint64_t align;
            char b[4096];
        } dbuf;
        long got = syscall(SYS_getdents64, dfd, dbuf.b, sizeof dbuf.b);
        if (got <= 0)
            break;
        for (long off = 0; off < got;) {
            const struct linux_dirent64_ *d = (const struct linux_dirent64_ *)(void *)(dbuf.b + off);
            off += d->d_reclen;
            long p = 0;
            const char *c = d->d_name;
            for (; *c >= '0' && *c <= '9' && p < INT_MAX / 10; c++)
                p = p * 10 + (*c - '0');
            char st;
            pid_t pp;
            if (*c != '\0' || p <= 0 || proc_stat((pid_t)p, &st, &pp) != 0)
                continue;
            if (fn((pid_t)p, st, pp, arg)) {
                close(dfd);
                return 0;
            }
        }
    }
    close(dfd);
    return 0;
}

static int note_child(pid_t p, char st, pid_t pp, void *arg)
{
    (void)st;
    if (pp == *(const pid_t *)arg && n_spare < SPARE_MAX)
        spare_pids[n_spare++] = p;
    return 0;
}

/* Before the fork: rowlock's children so far (see spare_pids). */
static void note_children(void)
{
    pid_t self = getpid();
    n_spare = 0;
    (void)each_proc(note_child, &self);
}

typedef struct tree_walk {
    pid_t set[TREE_MAX]; /* the root and the descendants found */
    size_t n;
    int added, live, full;
    pid_t spare, self;
} tree_walk;

static int tree_step(pid_t p, char st, pid_t pp, void *arg)
{
    tree_walk *w = arg;
    if (!in_set(w->set, w->n, pp) || in_set(w->set, w->n, p) || p == w->self || p == w->spare ||
        in_set(spare_pids, n_spare, p))
        return 0; /* not below the root, known, or spared with its tree */
    if (w->n < TREE_MAX) {
        w->set[w->n++] = p;
        w->added = 1;
    } else {
        w->full = 1; /* its own children go unwalked this time; the caller walks again */
    }
    if (st == 'Z' || st == 'X')
        return 0;
    w->live++;
    int pfd = (int)syscall(SYS_pidfd_open, p, 0u);
    if (pfd >= 0) {
        /* Still the process whose parent we read? */
        char st2;
        pid_t pp2;
        if (proc_stat(p, &st2, &pp2) == 0 && in_set(w->set, w->n, pp2))
            (void)syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0u);
        close(pfd);
    } else if (errno == ENOSYS) {
        (void)kill(p, SIGKILL); /* Linux before 5.3 */
    }
    return 0;
}

/* SIGKILL every live process below root (its children, theirs, ...), but
 * not `spare`, the caller, nor rowlock's children from before the fork
 * (spare_pids) with their trees. Returns how many live ones it found (0:
 * the tree below root is empty, zombies aside), -1 if /proc cannot be
 * read. Async-signal-safe (the watchdog calls it). */
static int kill_below(pid_t root, pid_t spare)
{
    static tree_walk w; /* 16 KB: not on the stack (one thread calls it) */
    w.n = 1;
    w.set[0] = root;
    w.live = 0;
    w.full = 0;
    w.spare = spare;
    w.self = getpid();
    do {
        w.added = 0;
        if (each_proc(tree_step, &w) != 0)
            return -1;
    } while (w.added);
    return w.live + w.full;
}

static void sleep_us_(int64_t us)
{
    struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* kill_below(root, spare) until the tree is empty or `bound_us` passed.
 * Returns 1 if it is empty. */
static int kill_tree(pid_t root, pid_t spare, int64_t bound_us)
{
    const int64_t until = wd_now_us() + bound_us;
    for (;;) {
        int a = kill_below(root, spare);
        if (a == 0)
            return 1;
        if (a < 0 || wd_now_us() >= until)
            return 0;
        sleep_us_(5000);
    }
}

static int reap_one(pid_t p, char st, pid_t pp, void *arg)
{
    const pid_t *keep = arg; /* self, COMMAND, the watchdog */
    if (st == 'Z' && pp == keep[0] && p != keep[1] && p != keep[2])
        (void)waitpid(p, NULL, WNOHANG);
    return 0;
}

/* Reap rowlock's exited children other than COMMAND and the watchdog: as
 * a subreaper it inherits COMMAND's orphans, and nobody else waits for
 * them (init did, before). */
static void reap_orphans(pid_t cmd, pid_t wd)
{
    pid_t keep[3] = { getpid(), cmd, wd };
    (void)each_proc(reap_one, keep);
}

/* The watchdog's kill: what COMMAND started, COMMAND, then whatever is left
 * below COMMAND (while it has not exited: its pid could be reused once it
 * is reaped) and below the supervisor (while it is still our parent, the
 * subreaper COMMAND's orphans go to), within a second. */
static void wd_kill(int pidfd, pid_t cmd_pid, pid_t super)
{
    (void)kill_below(cmd_pid, 0);
    (void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0u);
    const int64_t until = wd_now_us() + 1000000;
    for (;;) {
        struct pollfd pf = { pidfd, POLLIN, 0 };
        int cmd_alive = poll(&pf, 1, 0) == 0;
        int a = cmd_alive ? kill_below(cmd_pid, 0) : 0;
        int b = getppid() == super ? kill_below(super, getpid()) : 0;
        if ((a == 0 && b == 0) || a < 0 || b < 0 || wd_now_us() >= until)
            return;
        sleep_us_(5000);
    }
}

static void watchdog_main(int rd, int pidfd, int kill_on_eof, pid_t cmd_pid, pid_t super)
{
    static const int ign[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGTSTP };
    struct sigaction sa;
    sigset_t none;
    int64_t deadline = INT64_MAX;
    int open_pipe = 1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < sizeof ign / sizeof ign[0]; k++)
        (void)sigaction(ign[k], &sa, NULL);
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    /* Keep only the pipe and the pidfd: move them to 3 and 4, close the rest
     * (the database connections, the signalfd, a caller's lock files). */
    if (pidfd == 3 && (pidfd = fcntl(pidfd, F_DUPFD, 5)) < 0) /* dup2(rd, 3) would close it */
        _exit(70);
    if (dup2(rd, 3) < 0 || dup2(pidfd, 4) < 0)
        _exit(70);
    rd = 3;
    pidfd = 4;
#if defined(SYS_close_range)
    if (syscall(SYS_close_range, 5u, ~0u, 0u) != 0)
#endif
    {
        for (int fd = 5; fd < 1024; fd++)
            (void)close(fd);
    }
    for (;;) {
        struct pollfd pfd[2];
        int timeout = -1, n = 1;
        int64_t now = wd_now_us();
        if (deadline != INT64_MAX) {
            int64_t d = deadline - now;
            if (d <= 0) {
                wd_kill(pidfd, cmd_pid, super);
                _exit(0);
            }
            d = (d + 999) / 1000;
            timeout = d > INT_MAX ? INT_MAX : (int)d;
        }
        pfd[0].fd = pidfd;
        pfd[0].events = POLLIN;
        pfd[0].revents = 0;
        if (open_pipe) {
            pfd[1].fd = rd;
            pfd[1].events = POLLIN;
            pfd[1].revents = 0;
            n = 2;
        }
        if (poll(pfd, (nfds_t)n, timeout) < 0)
            continue; /* EINTR: nothing to handle, only ignored signals */
        if (pfd[0].revents)
            _exit(0); /* COMMAND has exited */
        if (n == 2 && pfd[1].revents) {
            int64_t v;
            ssize_t r = read(rd, &v, sizeof v);
            if (r == (ssize_t)sizeof v) {
                if (v == -1)
                    _exit(0);
                deadline = v;
            } else if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
                if (kill_on_eof) {
                    wd_kill(pidfd, cmd_pid, super);
                    _exit(0);
                }
                open_pipe = 0; /* the supervisor is gone: the last deadline stands */
            }
        }
    }
}

typedef struct watchdog {
    pid_t pid;          /* 0: none */
    int wr;             /* write end of its pipe */
    int64_t sent;       /* the last deadline sent */
} watchdog;

/* Start the watchdog for COMMAND (pid, not yet reaped). Returns 0, or -1
 * when there is none (no pidfd support, or fork failed: then only the
 * supervisor stops COMMAND). */
static int watchdog_start(watchdog *wd, pid_t cmd_pid, int verbose, int kill_on_eof)
{
    int p[2], pidfd;
    wd->pid = 0;
    wd->wr = -1;
    wd->sent = INT64_MAX;
    pidfd = (int)syscall(SYS_pidfd_open, cmd_pid, 0u);
    if (pidfd < 0) {
        if (verbose)
            fprintf(stderr, "%s: no watchdog (pidfd_open: %s): only rowlock itself stops COMMAND at the end of its "
                            "safe time\n", PROG, strerror(errno));
        return -1;
    }
    /* A socket pair, not a pipe: send() with MSG_NOSIGNAL, so a watchdog
     * that has already exited (COMMAND ended) costs us no SIGPIPE. */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) != 0) {
        close(pidfd);
        return -1;
    }
    wd->pid = fork();
    if (wd->pid == 0) {
        close(p[1]);
        watchdog_main(p[0], pidfd, kill_on_eof, cmd_pid, getppid());
        _exit(0);
    }
    close(p[0]);
    close(pidfd);
    if (wd->pid < 0) {
        wd->pid = 0;
        close(p[1]);
        return -1;
    }
    wd->wr = p[1];
    return 0;
}

static void watchdog_send(watchdog *wd, int64_t v)
{
    ssize_t n;
    if (wd->wr < 0 || v == wd->sent)
        return;
    do {
        n = send(wd->wr, &v, sizeof v, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof v)
        wd->sent = v;
}

/* COMMAND has been reaped: tell the watchdog to go, and reap it. */
static void watchdog_stop(watchdog *wd)
{
    if (wd->pid > 0) {
        pid_t w;
        watchdog_send(wd, -1);
        do {
            w = waitpid(wd->pid, NULL, 0);
        } while (w < 0 && errno == EINTR);
    }
    if (wd->wr >= 0)
        close(wd->wr);
    wd->pid = 0;
    wd->wr = -1;
}

/* ---- file descriptors: keep the database connection out of COMMAND ------- */

/* The descriptors open at one moment, from /proc/self/fd (no upper bound:
 * a descriptor >= 4096 counts like any other). */
typedef struct fdmap {
    int *fds; /* sorted */
    size_t n;
    int valid;
} fdmap;

static int int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void fdmap_scan(fdmap *m)
{
    DIR *d;
    struct dirent *e;
    size_t cap = 0;

    memset(m, 0, sizeof *m);
    d = opendir("/proc/self/fd");
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end != '\0' || e->d_name[0] == '\0' || fd < 0 || fd > INT_MAX || fd == dirfd(d))
            continue;
        if (m->n == cap) {
            int *v = realloc(m->fds, (cap ? cap * 2 : 64) * sizeof *v);
            if (v == NULL) {
                free(m->fds);
                m->fds = NULL;
                m->n = 0;
                if (closedir(d) != 0) { /* read-only directory stream */ }
                return;
            }
            m->fds = v;
            cap = cap ? cap * 2 : 64;
        }
        m->fds[m->n++] = (int)fd;
    }
    if (closedir(d) != 0) { /* read-only directory stream: nothing lost */ }
    qsort(m->fds, m->n, sizeof *m->fds, int_cmp);
    m->valid = 1;
}

static void fdmap_free(fdmap *m)
{
    free(m->fds);
    memset(m, 0, sizeof *m);
}

static void set_cloexec(int fd)
{
    int fl = fcntl(fd, F_GETFD);
    if (fl >= 0 && !(fl & FD_CLOEXEC) && fcntl(fd, F_SETFD, fl | FD_CLOEXEC) != 0)
        fprintf(stderr, "%s: warning: cannot set close-on-exec on fd %d: %s\n", PROG, fd, strerror(errno));
}

/* Mark close-on-exec every descriptor opened since `before` (the database
 * connection and whatever the client library opened), so COMMAND does not
 * inherit it; descriptors rowlock itself inherited are passed on untouched.
 * Without /proc, every descriptor from 3 up is marked (close_range with
 * CLOSE_RANGE_CLOEXEC where the kernel has it): COMMAND then inherits
 * nothing but 0-2, which is safe. */
static void cloexec_new_fds(const fdmap *before)
{
    fdmap now;
    size_t k = 0;

    if (before->valid)
        fdmap_scan(&now);
    if (!before->valid || !now.valid) {
#if defined(SYS_close_range) && defined(CLOSE_RANGE_CLOEXEC)
        if (syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) == 0)
            return;
#endif
        long max = sysconf(_SC_OPEN_MAX);
        for (long fd = 3; fd < (max > 0 && max < 1048576 ? max : 1048576); fd++)
            set_cloexec((int)fd);
        return;
    }
    for (size_t i = 0; i < now.n; i++) {
        int fd = now.fds[i];
        while (k < before->n && before->fds[k] < fd)
            k++;
        if (fd >= 3 && !(k < before->n && before->fds[k] == fd))
            set_cloexec(fd);
    }
    fdmap_free(&now);
}

/* ---- the run command ---------------------------------------------------- */

typedef struct run_args {
    rl_lock_opts o; /* how to take the lock: the options run and lock share */
    int64_t grace_us; /* --kill-after; -1: the default for the lease */
    const char *name;
    char **cmd_argv; /* NULL-terminated */
    const char *shell_cmd;
} run_args;

/* With -N: the names are the options', and what follows the options is
 * COMMAND (or nothing, after -c). */
static int parse_run_names(run_args *ra, cli_optparser *p, int argc, char **argv)
{
    ra->name = ra->o.names[0];
    if (ra->o.strategy == ROWLOCK_STRATEGY_FOR_UPDATE && ra->o.n_names > 1) {
        fprintf(stderr, "%s: run: the for-update strategy takes one name: its lock is its connection's "
                        "transaction, which cannot hold several names apart (use insert or optimistic)\n", PROG);
        return CLI_EX_USAGE;
    }
    if (p->i > 0 && !p->dashdash && strcmp(argv[p->i - 1], "--password") == 0 && p->i < argc) {
        fprintf(stderr, "%s: run: --password takes no value (it asks on the terminal); the word after it would "
                        "be taken as COMMAND: put --password before another option\n", PROG);
        return CLI_EX_USAGE;
    }
    if (ra->shell_cmd) {
        if (p->i < argc) {
            fprintf(stderr, "%s: run: -c/--command takes the whole COMMAND: unexpected '%s'\n", PROG,
                    cli_q(argv[p->i]));
            return CLI_EX_USAGE;
        }
        return 0;
    }
    if (p->i >= argc || argv[p->i][0] == '\0') {
        fprintf(stderr, "%s: run: missing COMMAND to run under the %zu locks given with -N\n", PROG,
                ra->o.n_names);
        return CLI_EX_USAGE;
    }
    ra->cmd_argv = argv + p->i;
    return 0;
}

static int parse_run(cli_conn *cc, int argc, char **argv, run_args *ra)
{
    cli_optparser p;
    const char *val;
    int id, rc;
    rl_lock_opts o;

    cli_opt_init(&p, PROG, "run", argc, argv, 1);
    memset(ra, 0, sizeof *ra);
    ra->grace_us = -1;
    rl_lock_opts_init(&o);
    while ((id = cli_next_opt(&p, run_specs, cc, &val)) != CLI_OP_END) {
        if (id == CLI_OP_ERR)
            return CLI_EX_USAGE;
        if (id == CLI_OP_CONN)
            continue;
        rc = rl_lock_opt(&o, "run", rl_usage_run, id, val);
        if (rc != 0 && rc != 1)
            return rc; /* CLI_EX_USAGE, or -1 after --help */
        if (rc == 1)
            continue;
        switch (id) {
        case RO_CLOSE:
            break; /* COMMAND never inherits the connection: nothing to close */
        case RO_KILL_AFTER: {
            double g = cli_parse_seconds(val);
            if (g < 0) {
                fprintf(stderr, "%s: run: --kill-after: '%s' is not a non-negative number of seconds\n", PROG,
                        cli_q(val));
                return CLI_EX_USAGE;
            }
            ra->grace_us = (int64_t)llround(g * 1e6);
            break;
        }
        case RO_NO_FORK:
            /* Why not a holder process beside an exec'd COMMAND: docs/cli.md, "Why no -F". */
            fprintf(stderr, "%s: run: -F/--no-fork is not supported: the lease needs a live process that renews "
                            "it and stops COMMAND before it ends, so rowlock stays as COMMAND's parent (it "
                            "forwards signals to COMMAND and exits with its status)\n", PROG);
            return CLI_EX_USAGE;
        case RO_COMMAND:
            ra->shell_cmd = val;
            break;
        case RO_VERSION:
            printf("rowlock %s (library %s, schema version %d)\n", ROWLOCK_VERSION_STRING, rowlock_version(),
                   rowlock_schema_version_expected());
            return -1;
        default:
            break;
        }
    }
    rl_lock_opts_done(&o);
    ra->o = o;
    if (ra->grace_us >= 0 &&
        (ra->grace_us + reap_us_for(o.lease_ms)) * 2 > o.lease_ms * 1000) {
        int64_t need_ms = (ra->grace_us + reap_us_for(o.lease_ms)) * 2 / 1000;
        fprintf(stderr,
                "%s: run: a lease of %.3g s is too short for --kill-after %.3g s: SIGTERM, the grace and "
                "SIGKILL must fit in half the lease (here at least %.3g s): raise -l or lower --kill-after\n",
                PROG, (double)o.lease_ms / 1000.0, (double)ra->grace_us / 1e6, (double)need_ms / 1000.0);
        return CLI_EX_USAGE;
    }
    if (ra->grace_us < 0)
        ra->grace_us = default_grace_us(o.lease_ms);

    if (o.n_names > 0)
        return parse_run_names(ra, &p, argc, argv);
    if (ra->shell_cmd) {
        fprintf(stderr, "%s: run: -c/--command goes after NAME (or use -N NAME)\n", PROG);
        return CLI_EX_USAGE;
    }

    if (p.i >= argc) {
        fprintf(stderr, "%s: run: missing lock NAME and COMMAND (see rowlock run --help)\n", PROG);
        return CLI_EX_USAGE;
    }
    /* Grammar (as flock(1)): options, then NAME, then COMMAND. A word right
     * after --password is never taken as NAME: --password takes no value
     * (it prompts), so "--password SECRET" would make the secret the lock
     * name, written to the shared table and COMMAND's environment. The word
     * is not echoed. */
    if (p.i > 0 && strcmp(argv[p.i - 1], "--password") == 0) {
        fprintf(stderr, "%s: run: --password takes no value (it asks on the terminal); the word after it would "
                        "be taken as the lock NAME: put --password before another option or write "
                        "'--password --' before NAME\n", PROG);
        return CLI_EX_USAGE;
    }
    ra->name = argv[p.i++];
    if (cli_check_name(PROG, "run", ra->name) != 0)
        return CLI_EX_USAGE;
    /* Options after NAME are refused, not run as COMMAND (or parsed): use
     * "--" before a COMMAND that starts with '-'. */
    if (p.i < argc && argv[p.i][0] == '-' && strcmp(argv[p.i], "--") != 0 && strcmp(argv[p.i], "-c") != 0 &&
        strcmp(argv[p.i], "--command") != 0 && strncmp(argv[p.i], "--command=", 10) != 0) {
        fprintf(stderr, "%s: run: option '%s' after the lock name %s: options go before NAME (write '--' "
                        "before a COMMAND that starts with '-')\n", PROG,
                strncmp(argv[p.i], "--password", 10) == 0 ? "--password" : cli_q(argv[p.i]), cli_q(ra->name));
        return CLI_EX_USAGE;
    }

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
        fprintf(stderr, "%s: run: missing COMMAND to run under lock '%s'\n", PROG, cli_q(ra->name));
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
 * Wait for the child (pid), forwarding signals and enforcing the lease: the
 * keeper (the library's) renews it; COMMAND gets SIGTERM as soon as the
 * keeper says the lock is lost, or `margin` before its safe-until time when
 * renewals stopped being confirmed. Returns the exit status to use; *lost
 * set when the lock was lost.
 */
static int supervise(pid_t pid, const watch *wt, watchdog *wd, int sfd, const char *what, int *lost)
{
    int64_t margin, kill_at = 0, term_at = 0, last_loop = 0, expect_wake = 0, paused_us = 0;
    int lost_state = 0, killed = 0, status = 0;

    /* SIGTERM this long before safe-until (see the stop schedule above). */
    margin = wt->grace_us + wt->reap_us;

    for (;;) {
        struct pollfd pfd[2];
        int64_t now = cli_mono_us(), deadline = -1;
        int timeout_ms, pr;
        rowlock_keep_info ki = ROWLOCK_KEEP_INFO_INIT;
        int renewed, expired = rl_hold_check(wt->h, now, margin, &ki, &renewed);

        if (wt->verbose && renewed)
            fprintf(stderr, "%s: renewed '%s' (token %" PRIu64 ", lease %.3g s, %" PRIu64 " renewals, safe "
                            "for %.1f s)\n", PROG, wt->shown, wt->h->token, (double)wt->lease_ms / 1000.0,
                    ki.renewals, (double)ki.safe_ms / 1000.0);

        if (!lost_state && expired) {
            char msg[600];
            lost_state = 1;
            if (paused_us > 0) {
                snprintf(msg, sizeof msg,
                         "rowlock itself was stopped for %.1f s (SIGSTOP, or the host was suspended), longer "
                         "than its lease could be trusted%s%s",
                         (double)paused_us / 1e6, ki.state == ROWLOCK_KEEP_LOST ? "; the lock was lost: " : "",
                         ki.state == ROWLOCK_KEEP_LOST ? ki.reason : "");
            } else if (ki.state == ROWLOCK_KEEP_LOST || ki.state == ROWLOCK_KEEP_NONE) {
                snprintf(msg, sizeof msg, "the lock was lost: %s (%s)",
                         ki.reason[0] ? ki.reason : "the keeper stopped",
                         rowlock_error_name(ki.code ? ki.code : ROWLOCK_ENOTOWNER));
            } else if (ki.state == ROWLOCK_KEEP_UNKNOWN) {
                snprintf(msg, sizeof msg,
                         "the lease could not be renewed (%" PRIu64 " attempts failed) and is safe for %.1f s "
                         "more: %s (%s)", ki.failures, (double)(ki.safe_until_us - now) / 1e6, ki.reason,
                         rowlock_error_name(ki.code));
            } else {
                snprintf(msg, sizeof msg,
                         "no renewal completed in time (the database does not answer); the lease is safe "
                         "for %.1f s more", (double)(ki.safe_until_us - now) / 1e6);
            }
            fprintf(stderr, "%s: lock '%s': %s; sending SIGTERM to %s (pid %ld)\n", PROG, wt->shown,
                    msg, what, (long)pid);
            if (kill(pid, SIGTERM) != 0 && errno != ESRCH)
                fprintf(stderr, "%s: kill(SIGTERM): %s\n", PROG, strerror(errno));
            /* SIGKILL after the grace. While the lock may still be ours
             * (renewals failing, or we were paused), never later than reap
             * before safe-until, at once if that is past. Once the server
             * said it is gone (or the for-update session ended), there is
             * no safe time left to protect: COMMAND gets its grace. */
            term_at = now;
            kill_at = now + wt->grace_us;
            if (ki.state != ROWLOCK_KEEP_LOST && ki.state != ROWLOCK_KEEP_NONE && ki.safe_until_us != INT64_MAX &&
                kill_at > ki.safe_until_us - wt->reap_us)
                kill_at = ki.safe_until_us - wt->reap_us;
            if (kill_at < now)
                kill_at = now;
            /* Keeping goes on until COMMAND is gone (run() stops it then):
             * stopping it here waited for a renewal in flight, which can
             * sit in a reconnect or a read timeout for seconds, and the
             * SIGKILL below came late (found by a review). A renewal that
             * still succeeds only lengthens the lease while COMMAND dies. */
        }
        /* The watchdog's deadline: a backstop half a reap allowance after
         * our own SIGKILL time (still before safe-until), so that it acts
         * only when we could not (stopped, starved, killed); the keeper
         * reports no safe time once the lock is lost: then it follows the
         * kill time set above. */
        if (!lost_state)
            watchdog_send(wd, ki.safe_until_us == INT64_MAX ? INT64_MAX : ki.safe_until_us - wt->reap_us / 2);
        else
            watchdog_send(wd, kill_at + wt->reap_us / 2);
        if (lost_state && !killed && now >= kill_at) {
            fprintf(stderr, "%s: %s (pid %ld) still running %.2f s after SIGTERM; sending SIGKILL\n",
                    PROG, what, (long)pid, (double)(now - term_at) / 1e6);
            (void)kill_below(pid, 0); /* what it started, first: then none is orphaned */
            if (kill(pid, SIGKILL) != 0 && errno != ESRCH)
                fprintf(stderr, "%s: kill(SIGKILL): %s\n", PROG, strerror(errno));
            (void)kill_below(getpid(), wd->pid);
            killed = 1;
        }

        if (!lost_state) {
            deadline = ki.safe_until_us == INT64_MAX ? -1 : ki.safe_until_us - margin;
            /* Wake at least every second: the keeper's renewals are reported
             * (--verbose) and a pause is noticed. */
            if (deadline < 0 || deadline > now + 1000000)
                deadline = now + 1000000;
        } else if (!killed) {
            deadline = kill_at;
        }
        if (deadline < 0) {
            timeout_ms = -1;
            expect_wake = 0;
        } else {
            int64_t d = deadline - now;
            if (d < 0)
                d = 0;
            expect_wake = now + d;
            d = (d + 999) / 1000;
            timeout_ms = d > INT_MAX ? INT_MAX : (int)d;
        }

        pfd[0].fd = sfd;
        pfd[0].events = POLLIN;
        pfd[0].revents = 0;
        pfd[1].fd = wt->h->wake[0];
        pfd[1].events = POLLIN;
        pfd[1].revents = 0;
        last_loop = cli_mono_us();
        pr = poll(pfd, 2, timeout_ms);
        {
            /* This process itself was stopped (SIGSTOP, a suspended host):
             * poll returned far later than its timeout allowed, whatever
             * woke it (the keeper's threads resume too, and may wake us). */
            int64_t back = cli_mono_us();
            if (expect_wake > 0 && back - expect_wake > 1000000)
                paused_us = back - last_loop;
        }
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "%s: poll: %s\n", PROG, strerror(errno));
            abort();
        }
        if (pfd[1].revents & POLLIN)
            rl_hold_wake_drain(wt->h);
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
                reap_orphans(pid, wd->pid); /* COMMAND's orphans that exited (we are their subreaper) */
                do {
                    w = waitpid(pid, &status, WNOHANG);
                } while (w < 0 && errno == EINTR);
                if (w == pid) {
                    if (lost_state && !killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
                        fprintf(stderr, "%s: %s (pid %ld) was still running after SIGTERM; the watchdog sent "
                                        "SIGKILL\n", PROG, what, (long)pid);
                    /* Ended at or after the watchdog's deadline: the watchdog
                     * killed it (we were stopped or starved past our safe
                     * time), or it ended as the safe time ran out. Either
                     * way the lock could not be trusted any more. */
                    if (!lost_state && wd->sent != INT64_MAX && cli_mono_us() >= wd->sent) {
                        lost_state = 1;
                        if (paused_us > 0)
                            fprintf(stderr,
                                    "%s: lock '%s': rowlock itself was stopped for %.1f s (SIGSTOP, or the host was "
                                    "suspended), longer than its lease could be trusted; the watchdog stopped %s (pid "
                                    "%ld)\n", PROG, wt->shown, (double)paused_us / 1e6, what, (long)pid);
                        else
                            fprintf(stderr, "%s: lock '%s': its safe time ran out; the watchdog stopped %s (pid %ld)\n",
                                    PROG, wt->shown, what, (long)pid);
                    }
                    break;
                }
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

/* The names as messages show them (rl_names_shown). */
static char *run_shown(const run_args *ra, size_t *w)
{
    if (ra->o.n_names == 0)
        return cli_human_str(ra->name, w);
    return rl_names_shown(ra->o.names, ra->o.n_names, w);
}

/* COMMAND's environment: ROWLOCK_NAME/ROWLOCK_TOKEN for one name (and
 * nothing of them, not even inherited, for several), ROWLOCK_COUNT,
 * ROWLOCK_NAME_<i>, ROWLOCK_TOKEN_<i> (1-based, in the order given) and
 * ROWLOCK_TOKENS for any number. */
static int set_env_names(const rl_hold *h)
{
    char k[48], v[32], *all; /* k: "ROWLOCK_TOKEN_" + any size_t */
    size_t len = 0;
    if (h->n == 1) {
        snprintf(v, sizeof v, "%" PRIu64, h->tokens[0]);
        if (set_env("ROWLOCK_NAME", rowlock_lock_name(h->ls[0])) != 0 || set_env("ROWLOCK_TOKEN", v) != 0)
            return -1;
    } else if (unsetenv("ROWLOCK_NAME") != 0 || unsetenv("ROWLOCK_TOKEN") != 0) {
        fprintf(stderr, "%s: run: cannot clear ROWLOCK_NAME: %s\n", PROG, strerror(errno));
        return -1;
    }
    snprintf(v, sizeof v, "%zu", h->n);
    if (set_env("ROWLOCK_COUNT", v) != 0)
        return -1;
    all = malloc(h->n * 21 + 1);
    if (all == NULL) {
        fprintf(stderr, "%s: out of memory\n", PROG);
        return -1;
    }
    all[0] = '\0';
    for (size_t i = 0; i < h->n; i++) {
        snprintf(k, sizeof k, "ROWLOCK_NAME_%zu", i + 1);
        snprintf(v, sizeof v, "%" PRIu64, h->tokens[i]);
        len += (size_t)sprintf(all + len, "%s%s", i ? " " : "", v);
        if (set_env(k, rowlock_lock_name(h->ls[i])) != 0)
            break;
        snprintf(k, sizeof k, "ROWLOCK_TOKEN_%zu", i + 1);
        if (set_env(k, v) != 0)
            break;
        if (i + 1 == h->n) {
            int r = set_env("ROWLOCK_TOKENS", all);
            free(all);
            /* Numbered variables past ours, inherited from an outer `rowlock
             * run` with more names, would read as names we hold. */
            for (size_t j = h->n + 1; r == 0 && j <= RL_NAMES_MAX + 1; j++) {
                snprintf(k, sizeof k, "ROWLOCK_NAME_%zu", j);
                if (unsetenv(k) != 0)
                    r = -1;
                snprintf(k, sizeof k, "ROWLOCK_TOKEN_%zu", j);
                if (unsetenv(k) != 0)
                    r = -1;
            }
            return r;
        }
    }
    free(all);
    return -1;
}

/* While waiting for the lock: a forwarded signal ends the wait (rl_hold_acquire). */
static int acquire_stop(void *fwdset)
{
    return pending_fwd_signal(fwdset);
}

int rl_cmd_run(cli_conn *cc, int argc, char **argv)
{
    run_args ra;
    rl_hold h;
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    sigset_t fwdset, blockset, oldmask;
    struct sigaction sa_dfl, old_chld;
    fdmap fds_before = { NULL, 0, 0 };
    int rc, k, sig, ex = 0;
    char tokbuf[32];
    int epipe[2] = { -1, -1 }, sfd = -1;
    pid_t pid;
    const char *const what = "COMMAND"; /* how messages name the child */
    char *sh_argv[4];
    char **cargv;
    watch wt;
    int lost = 0, early_sig = 0;
    char *shown;
    size_t shown_w;

    rc = parse_run(cc, argc, argv, &ra);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (CLI_PARSE_ONLY)
        return 0;
    rl_hold_init(&h);
    shown = run_shown(&ra, &shown_w);
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
    ex = rl_hold_connect(&h, cc, &ra.o);
    if (ex == 0)
        ex = ra.o.n_names > 0 ? rl_hold_new_set(&h, &ra.o, "run", ra.o.names, ra.o.n_names)
                              : rl_hold_new(&h, &ra.o, "run", ra.name);
    if (ex != 0)
        goto out;
    c = h.c;
    l = h.l;

    /* Acquire; a forwarded signal ends the wait, and rowlock with it. */
    rc = rl_hold_acquire(&h, &ra.o, acquire_stop, &fwdset, &sig);
    if (sig != 0) {
        rl_hold_done(&h);
        cli_conn_free(cc);
        free(shown);
        rowlock_library_end();
        die_by_signal(sig, &oldmask);
    }
    if (rc == ROWLOCK_EBUSY) {
        if (ra.o.verbose)
            fprintf(stderr, "%s: gave up after %.3f s: %s\n", PROG, (double)(h.t_acq - h.t_start) / 1e6,
                    rowlock_client_errmsg(c));
        ex = ra.o.conflict_code;
        goto out;
    }
    if (rc != 0) {
        cli_report(PROG, "cannot acquire the lock", c, rc);
        ex = cli_exit_for(rc);
        goto out;
    }
    /* The library's keeper renews the lease (on our one connection)
     * or, for for-update, watches the holding session; its callback wakes
     * the supervisor. */
    memset(&wt, 0, sizeof wt);
    wt.h = &h;
    wt.shown = shown;
    wt.lease_ms = ra.o.lease_ms;
    wt.grace_us = ra.grace_us;
    wt.reap_us = reap_us_for(ra.o.lease_ms);
    wt.verbose = ra.o.verbose;
    ex = rl_hold_keep(&h, &ra.o, "run", "cannot keep the lock (COMMAND not started)");
    if (ex != 0)
        goto release;
    ex = rl_hold_confirm(&h, &ra.o, "lost the lock right after acquiring it; COMMAND not started");
    if (ex != 0)
        goto out;
    snprintf(tokbuf, sizeof tokbuf, "%" PRIu64, rowlock_lock_token(l));
    if (ra.o.verbose)
        fprintf(stderr, "%s: acquired '%s' in %.3f s (strategy %s, token %s, lease %.3g s)\n", PROG,
                shown, (double)(h.t_acq - h.t_start) / 1e6, rl_strategy_str(ra.o.strategy), tokbuf,
                (double)ra.o.lease_ms / 1000.0);

    /* The password never reaches COMMAND: rowlock does not read MYSQL_PWD,
     * and a child must not inherit a credential through it either. */
    if (getenv("MYSQL_PWD") != NULL && unsetenv("MYSQL_PWD") != 0) {
        fprintf(stderr, "%s: run: cannot remove MYSQL_PWD from the environment: %s\n", PROG, strerror(errno));
        ex = CLI_EX_UNAVAILABLE;
        goto release;
    }
    if (set_env_names(&h) != 0 || set_env("ROWLOCK_OWNER", rowlock_client_owner(c)) != 0) {
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
    if (pipe2(epipe, O_CLOEXEC) != 0) {
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
    /* What COMMAND starts stays below us when its parent exits (see "what
     * COMMAND started"): a lost lock stops all of it, and not what we had
     * started before (there is nothing, unless our caller exec'd us with
     * children of its own). */
    note_children();
    if (prctl(PR_SET_CHILD_SUBREAPER, 1UL, 0UL, 0UL, 0UL) != 0 && ra.o.verbose)
        fprintf(stderr, "%s: run: cannot become a subreaper (%s): processes COMMAND starts and leaves are not "
                        "stopped with it\n", PROG, strerror(errno));
    /* A signal that came after the grant and before COMMAND exists (a
     * terminal's Ctrl-C reached only us then) ends rowlock as it would
     * have ended the wait: the lock is released, COMMAND never starts
     * (found by a review: it was consumed as "already delivered to
     * COMMAND" and COMMAND ran). One that comes between this check and
     * the fork still reaches COMMAND only if it is sent to us (forwarded);
     * a terminal's is lost, as before. */
    if ((early_sig = pending_fwd_signal(&fwdset)) != 0) {
        if (ra.o.verbose)
            fprintf(stderr, "%s: signal %d before COMMAND started; releasing '%s'\n", PROG, early_sig, shown);
        ex = 128 + early_sig;
        goto release;
    }

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
        if (rl_sigpipe_saved && sigaction(SIGPIPE, &rl_sigpipe_at_start, NULL) != 0) { /* keep going */ }
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
                    ra.shell_cmd ? "/bin/sh" : cli_q(cargv[0]), strerror(e));
            ex = (e == ENOENT || e == ENOTDIR) ? CLI_EX_NOTFOUND : CLI_EX_NOEXEC;
            goto release;
        }
    }

    if (ra.o.verbose && ra.o.strategy == ROWLOCK_STRATEGY_FOR_UPDATE) {
        rowlock_keep_info ki = ROWLOCK_KEEP_INFO_INIT;
        if (rowlock_keep_status(l, &ki) == 0)
            fprintf(stderr, "%s: keeping '%s': watching the holding session %" PRIu64 " and keeping it alive (the "
                            "server ends it after %.3g s without a statement: the lease)\n",
                    PROG, shown, ki.session_id, (double)ra.o.lease_ms / 1000.0);
    }
    {
        watchdog wd;
        (void)watchdog_start(&wd, pid, ra.o.verbose, ra.o.strategy == ROWLOCK_STRATEGY_FOR_UPDATE);
        ex = supervise(pid, &wt, &wd, sfd, what, &lost);
        /* The keeper may have found the lock lost after COMMAND ended (e.g.
         * both woke from a SIGSTOP together): the handle may then hold
         * nothing and the release below would be skipped, so report the
         * loss here, and stop what COMMAND left running as for any loss. */
        for (size_t i = 0; i < h.n; i++) {
            rowlock_keep_info ki = ROWLOCK_KEEP_INFO_INIT;
            if (rowlock_keep_status(h.ls[i], &ki) == 0 && ki.state == ROWLOCK_KEEP_LOST)
                lost = 1;
        }
        if (lost && kill_tree(getpid(), wd.pid, 1000000) == 0)
            fprintf(stderr, "%s: some processes %s started were still running 1 s after SIGKILL\n", PROG, what);
        watchdog_stop(&wd);
        reap_orphans(pid, 0);
    }
    rl_hold_unkeep(&h);

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
    if (rl_hold_any_held(&h)) {
        /* A failover between grant and release loses the connection: the
         * release reconnects and is tried again within the lease, and the
         * warning below is only for a release that finally failed. */
        rowlock_lock *bad = NULL;
        char why[512];
        int r2 = rl_hold_release(&h, ra.o.lease_ms / 2, &bad, why, sizeof why);
        if (r2 == ROWLOCK_ENOTOWNER) {
            fprintf(stderr, "%s: the lock was lost before COMMAND ended: %s (%s)\n", PROG, why,
                    rowlock_error_name(r2));
            ex = CLI_EX_TEMPFAIL;
        } else if (r2 != 0) {
            fprintf(stderr, "%s: warning: cannot release the lock (it ends with its lease): %s (%s)\n", PROG, why,
                    rowlock_error_name(r2));
        } else if (ra.o.verbose) {
            fprintf(stderr, "%s: released '%s' (token %s)\n", PROG, shown, tokbuf);
        }
    }

out:
    if (sfd >= 0 && close(sfd) != 0) { /* nothing to do */ }
    for (k = 0; k < 2; k++) {
        if (epipe[k] >= 0 && close(epipe[k]) != 0) { /* nothing to do */ }
    }
    rl_hold_done(&h);
    fdmap_free(&fds_before);
    free(shown);
    if (early_sig != 0) {
        cli_conn_free(cc);
        rowlock_library_end();
        die_by_signal(early_sig, &oldmask);
    }
    return ex;
}

