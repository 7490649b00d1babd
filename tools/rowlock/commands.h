/*
 * The `rowlock` tool's own declarations, shared by its files:
 *
 *   main.c     main, the command table, help
 *   run.c      run: acquire, start COMMAND, renew, supervise, release
 *   admin.c    status, list, release --force, migrate
 *   output.c   tables and JSON for lock rows
 *   lock.c     lock/unlock: a lock held across shell commands by a supervisor
 *   modes.c    permits; the holders of shared locks and semaphores
 *   metrics.c  metrics: the lock table as a Prometheus exposition
 *
 * Connection options, the option parser, exit codes and small helpers shared
 * with the other tools are in tools/common/cli.h.
 */
#ifndef ROWLOCK_TOOLS_ROWLOCK_COMMANDS_H
#define ROWLOCK_TOOLS_ROWLOCK_COMMANDS_H

#include <stdio.h>

#include "common/cli.h"

#define PROG "rowlock"

/* A command: argv[0] is its name. Returns the process's exit status. */
typedef int (*rowlock_cmd_fn)(cli_conn *cc, int argc, char **argv);

/* The whole program but the final rowlock_library_end() (main.c); main()
 * calls it, and so does the parser fuzz target, once per input. */
int rl_main(int argc, char **argv);

/* Print a command's usage followed by the connection options. */
void rl_print_cmd_help(const char *usage);

/* run.c */
extern const char rl_usage_run[];
int rl_cmd_run(cli_conn *cc, int argc, char **argv);

/*
 * The options that say how to take a lock, shared by `run` and `lock`: one
 * list (RL_LOCK_OPTSPECS, spliced into each command's cli_optspec table)
 * and one parser (rl_lock_opt, run.c), so an option added here
 * applies to both commands. Command-specific options use ids below
 * RL_LO_FIRST.
 */
enum {
    RL_LO_FIRST = 100,
    RL_LO_STRATEGY = RL_LO_FIRST, RL_LO_NONBLOCK, RL_LO_WAIT, RL_LO_LEASE, RL_LO_CONFLICT, RL_LO_VERBOSE,
    RL_LO_HELP, RL_LO_SHARED, RL_LO_EXCLUSIVE, RL_LO_PERMITS
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
    { "help", 'h', 0, RL_LO_HELP }

typedef struct rl_lock_opts {
    rowlock_strategy strategy;
    rowlock_mode mode;      /* exclusive (the default) or shared */
    unsigned int permits;   /* 0, or a semaphore of N (implies shared) */
    int64_t wait_ms;   /* ROWLOCK_WAIT_FOREVER (the default), 0, or ms */
    int64_t lease_ms;
    int conflict_code;
    int verbose;
    int nonblock;
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
/* "insert", ... or "unknown". */
const char *rl_strategy_str(rowlock_strategy s);
/* One lock row as a JSON object (no newline): the keys of rowlock_info only. */
void rl_json_info(FILE *f, const rowlock_info *in);
/* A lock object (no newline): rl_json_info's keys, then mode, permits and
 * holders. `h`/`nh`: the entries of a multi-holder name (rowlock_holders());
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
