/*
 * The `rowlock` tool's own declarations, shared by its files:
 *
 *   main.c     main, the command table, help
 *   run.c      run: acquire, start COMMAND, renew, supervise, release
 *   admin.c    status, list, release --force, migrate
 *   output.c   tables and JSON for lock rows
 *   lock.c     lock/unlock: a lock held across shell commands by a supervisor
 *   hold.c     what run and lock share: the lock options, the held and kept lock
 *   modes.c    permits; the holders of shared locks and semaphores
 *   metrics.c  metrics: the lock table as a Prometheus exposition
 *
 * Connection options, the option parser, exit codes and small helpers shared
 * with the other tools are in tools/common/cli.h.
 */
#ifndef ROWLOCK_TOOLS_ROWLOCK_COMMANDS_H
#define ROWLOCK_TOOLS_ROWLOCK_COMMANDS_H

#include <signal.h>
#include <stdio.h>

#include "common/cli.h"

#define PROG "rowlock"

/* A command: argv[0] is its name. Returns the process's exit status. */
typedef int (*rowlock_cmd_fn)(cli_conn *cc, int argc, char **argv);

/* The whole program but the final rowlock_library_end() (main.c); main()
 * calls it, and so does the parser fuzz target, once per input. */
int rl_main(int argc, char **argv);
/* SIGPIPE's disposition when rl_main began (main.c), for COMMAND (run.c). */
extern struct sigaction rl_sigpipe_at_start;
extern int rl_sigpipe_saved;


/* run.c */
extern const char rl_usage_run[];
int rl_cmd_run(cli_conn *cc, int argc, char **argv);

/*
 * The options that say how to take a lock, shared by `run` and `lock`: one
 * list (RL_LOCK_OPTSPECS, spliced into each command's cli_optspec table)
 * and one parser (rl_lock_opt, hold.c), so an option added here
 * applies to both commands. Command-specific options use ids below
 * RL_LO_FIRST.
 */
enum {
    RL_LO_FIRST = 100,
    RL_LO_STRATEGY = RL_LO_FIRST, RL_LO_NONBLOCK, RL_LO_WAIT, RL_LO_LEASE, RL_LO_CONFLICT, RL_LO_VERBOSE,
    RL_LO_HELP, RL_LO_SHARED, RL_LO_EXCLUSIVE, RL_LO_PERMITS,
    RL_LO_NAME /* -N/--name: one name of several (issue 28) */
};
/* As flock(1): -s shared, -x/-e exclusive; the strategy's short form is -S. */
#define RL_LOCK_OPTSPECS                              \
    { "strategy", 'S', 1, RL_LO_STRATEGY },           \
    { "shared", 's', 0, RL_LO_SHARED },               \
    { "exclusive", 'x', 0, RL_LO_EXCLUSIVE },         \
    { NULL, 'e', 0, RL_LO_EXCLUSIVE },                \
    { "permits", 0, 1, RL_LO_PERMITS },               \
    { "nonblock", 'n', 0, RL_LO_NONBLOCK },           \
    { "nb", 0, 0, RL_LO_NONBLOCK },                   \
    { "wait", 'w', 1, RL_LO_WAIT },                   \
    { "timeout", 0, 1, RL_LO_WAIT },                  \
    { "lease", 'l', 1, RL_LO_LEASE },                 \
    { "conflict-exit-code", 'E', 1, RL_LO_CONFLICT }, \
    { "verbose", 0, 0, RL_LO_VERBOSE },               \
    { "help", 'h', 0, RL_LO_HELP },                   \
    { "name", 'N', 1, RL_LO_NAME }

/* The most names one run or lock takes with -N. */
#define RL_NAMES_MAX 64

typedef struct rl_lock_opts {
    rowlock_strategy strategy;
    rowlock_mode mode;      /* exclusive (the default) or shared */
    unsigned int permits;   /* 0, or a semaphore of N (implies shared) */
    int64_t wait_ms;   /* ROWLOCK_WAIT_FOREVER (the default), 0, or ms */
    int64_t lease_ms;
    int conflict_code;
    int verbose;
    int nonblock;
    /* -N/--name, repeatable: several names taken together, all or none
     * (rowlock_acquire_many); with any, the command takes no NAME operand.
     * Pointers into argv. */
    const char *names[RL_NAMES_MAX];
    size_t n_names;
} rl_lock_opts;

/* The defaults: insert, wait forever, the default lease, conflict exit 1. */
void rl_lock_opts_init(rl_lock_opts *o);
/* Apply option `id` (value `val`) of command `cmd` ("run", "lock"). Returns
 * 1 when the option is one of RL_LOCK_OPTSPECS and was taken, 0 when it is
 * not (the command's own), CLI_EX_USAGE after printing why the value is
 * bad, or -1 for --help (printed with `usage`). */
int rl_lock_opt(rl_lock_opts *o, const char *cmd, const char *usage, int id, const char *val);
/* After the last option: -n beats -w. */
void rl_lock_opts_done(rl_lock_opts *o);

/*
 * The lock a supervisor (run's, lock's) holds: its client and handle, and
 * the pipe through which the keeper's callback wakes the supervisor (hold.c
 * says what the two commands share, and what stays in each). Calls in
 * order: init, connect, new, acquire, keep, confirm; then check in the
 * supervisor's loop; done at the end, whatever happened. Those returning an
 * exit status have reported why on stderr.
 */
typedef struct rl_hold {
    rowlock_client *c;
    rowlock_lock *l;
    uint64_t token;          /* the grant's fencing token, once acquired */
    int wake[2];             /* the keeper writes a byte to [1]; poll [0] */
    int64_t t_start;         /* cli_mono_us(): the first acquire began */
    int64_t t_try;           /* the last (granting) acquire call began */
    int64_t t_acq;           /* it returned */
    uint64_t renewals_seen;  /* for rl_hold_check's `renewed` */
    /* Several names (-N): every handle, in the order given, all on client c;
     * l is ls[0] and token tokens[0]. n is 1 for one name. */
    size_t n;
    rowlock_lock *ls[RL_NAMES_MAX];
    uint64_t tokens[RL_NAMES_MAX];
    uint64_t renewals_each[RL_NAMES_MAX];
    unsigned int read_timeout_ms; /* the connection's (rl_hold_connect) */
} rl_hold;

void rl_hold_init(rl_hold *h);
/* Connect, each round trip bounded by the lease (half of it, 2-30 s, unless
 * --read-timeout/--write-timeout say otherwise), waiting out a server that
 * is starting up for at most o->wait_ms; --verbose logs the library's events.
 * Returns 0 or an exit status. */
int rl_hold_connect(rl_hold *h, cli_conn *cc, const rl_lock_opts *o);
/* The lock handle for NAME (strategy, mode, permits of o); a refusal is
 * reported as `cmd`'s. Returns 0 or an exit status. */
int rl_hold_new(rl_hold *h, const rl_lock_opts *o, const char *cmd, const char *name);
/* The same for several names (n >= 1, in the order given): one client,
 * one handle each, acquired together by rl_hold_acquire (all or none). */
int rl_hold_new_set(rl_hold *h, const rl_lock_opts *o, const char *cmd, const char *const *names, size_t n);
/* Give back every name held (each retried over a failover within
 * budget_ms; names no longer held are skipped). Returns 0 or the first
 * failure's code, its handle in *bad and the client's message about it
 * in errmsg (cap bytes). */
int rl_hold_release(rl_hold *h, int64_t budget_ms, rowlock_lock **bad, char *errmsg, size_t cap);
/* Stop keeping every name (stopping never fails). */
void rl_hold_unkeep(rl_hold *h);
/* 1 when any name is still counted as held by its handle. */
int rl_hold_any_held(const rl_hold *h);
/* 1 when every name is (and there is one). */
int rl_hold_all_held(const rl_hold *h);
/* The names for messages, escaped: "a" for one, "a', 'b" for several (the
 * message puts quotes around it). malloc'd, NULL when out of memory. */
char *rl_names_shown(const char *const *names, size_t n, size_t *w);
/* Acquire within o->wait_ms, in slices of at most 1 s; after each busy
 * slice stop(arg) is asked, and a nonzero answer ends the wait (it is left
 * in *stopped). Returns the library's code (nothing is reported). */
int rl_hold_acquire(rl_hold *h, const rl_lock_opts *o, int (*stop)(void *arg), void *arg, int *stopped);
/* Hand the lease to the library's keeper, which wakes the supervisor
 * through h->wake. A refusal is reported as `fail`. Returns 0 or an exit
 * status. */
int rl_hold_keep(rl_hold *h, const rl_lock_opts *o, const char *cmd, const char *fail);
/* When the granting call waited, renew once: its start is no bound for the
 * lease's. Returns 0, or CLI_EX_TEMPFAIL when the lock is already gone
 * (reported as `fail`). */
int rl_hold_confirm(rl_hold *h, const rl_lock_opts *o, const char *fail);
/* The keeper's status in *ki (*renewed: a renewal since the last check).
 * Returns 1 when the lock must be taken for lost: the keeper says so, or no
 * renewal was confirmed until `margin` us before its safe-until time. */
int rl_hold_check(rl_hold *h, int64_t now, int64_t margin, rowlock_keep_info *ki, int *renewed);
/* Empty the wake-up pipe (the status is read with rl_hold_check). */
void rl_hold_wake_drain(rl_hold *h);
/* Stop keeping, close the pipe, free the handle (what is still held is
 * given back, one attempt) and the client. */
void rl_hold_done(rl_hold *h);

/* admin.c */
extern const char rl_usage_status[], rl_usage_list[], rl_usage_release[], rl_usage_migrate[];
int rl_cmd_status(cli_conn *cc, int argc, char **argv);
int rl_cmd_list(cli_conn *cc, int argc, char **argv);
int rl_cmd_release(cli_conn *cc, int argc, char **argv);
int rl_cmd_migrate(cli_conn *cc, int argc, char **argv);

/* modes.c: multi-holder names (shared locks, semaphores) */
extern const char rl_usage_permits[];
int rl_cmd_permits(cli_conn *cc, int argc, char **argv);
/* Print the holders of `name` (NULL: of every multi-holder name) as a table
 * (nothing when none). Returns 0 or an exit code (message printed). */
int rl_print_holders(rowlock_client *c, const char *name);
/* The holders and waiters of `name` (NULL: of every multi-holder name), in
 * name and queue order, into a malloc'd *v (free it). Returns 0 or an exit
 * code (message printed). */
int rl_get_holders(rowlock_client *c, const char *name, rowlock_holder_info **v, size_t *n);
/* One lock of the table: a one-row lock (nh 0) or a multi-holder name with
 * its entries h[0..nh) (info summarises them: rl_holders_info). */
typedef struct rl_listed {
    rowlock_info info;
    const rowlock_holder_info *h;
    size_t nh;
} rl_listed;
typedef struct rl_locks {
    rl_listed *v;
    size_t n;
    rowlock_holder_info *holders; /* what the entries' h point into */
} rl_locks;
/* Every held lock (stale: every stale one) ordered by name, as `list --json`
 * and `metrics --names` show them. Returns 0 or an exit code (message
 * printed, naming `what`); free with rl_locks_free. */
int rl_locks_collect(rowlock_client *c, const char *what, int stale, rl_locks *out);
void rl_locks_free(rl_locks *l);

/* metrics.c */
extern const char rl_usage_metrics[];
int rl_cmd_metrics(cli_conn *cc, int argc, char **argv);

/* lock.c */
extern const char rl_usage_lock[], rl_usage_unlock[];
int rl_cmd_lock(cli_conn *cc, int argc, char **argv);
int rl_cmd_unlock(cli_conn *cc, int argc, char **argv);

/* output.c */
/* Print a command's usage, every exit code (all_codes: run and lock, to
 * which every code applies), then the connection options. */
void rl_print_cmd_help(const char *usage, int all_codes);
/* "insert", ... or "unknown". */
const char *rl_strategy_str(rowlock_strategy s);
/* One lock row as a JSON object (no newline): the keys of rowlock_info only. */
void rl_json_info(FILE *f, const rowlock_info *in);
/* A lock object (no newline): rl_json_info's keys, then mode, permits and
 * holders. `h`/`nh`: the entries of a multi-holder name (rowlock_admin_holders());
 * nh 0: a one-row lock, whose holder comes from `in`. */
void rl_json_lock(FILE *f, const rowlock_info *in, const rowlock_holder_info *h, size_t nh);
/* One holder or waiter as a JSON object (no newline). */
void rl_json_holder(FILE *f, const rowlock_holder_info *h);
/* The lock fields of a multi-holder name from its entries `h` (n > 0, one
 * name, in queue order), as rowlock_inspect() computes them. */
void rl_holders_info(const rowlock_holder_info *h, size_t n, rowlock_info *out);
/* Rows as aligned columns on stdout. 0 ok, -1 out of memory. */
int rl_print_table(const rowlock_info *rows, size_t n);

#endif
