/*
 * The `rowlock` tool's own declarations, shared by its files:
 *
 *   rowlock.c         main, the command table, help
 *   rowlock_run.c     run: acquire, start COMMAND, renew, supervise, release
 *   rowlock_admin.c   status, list, release --force, migrate
 *   rowlock_output.c  tables and JSON for lock rows
 *   rowlock_lock.c    lock/unlock: a lock held across shell commands by a supervisor
 *   rowlock_modes.c   permits; the holders of shared locks and semaphores
 *
 * Connection options, the option parser, exit codes and small helpers shared
 * with the other tools are in cli_common.h.
 */
#ifndef ROWLOCK_CLI_H
#define ROWLOCK_CLI_H

#include <stdio.h>

#include "cli_common.h"

#define PROG "rowlock"

/* A command: argv[0] is its name. Returns the process's exit status. */
typedef int (*rowlock_cmd_fn)(cli_conn *cc, int argc, char **argv);

/* Print a command's usage followed by the connection options. */
void rl_print_cmd_help(const char *usage);

/* rowlock_run.c */
extern const char rl_usage_run[];
int rl_cmd_run(cli_conn *cc, int argc, char **argv);

/* rowlock_admin.c */
extern const char rl_usage_status[], rl_usage_list[], rl_usage_release[], rl_usage_migrate[];
int rl_cmd_status(cli_conn *cc, int argc, char **argv);
int rl_cmd_list(cli_conn *cc, int argc, char **argv);
int rl_cmd_release(cli_conn *cc, int argc, char **argv);
int rl_cmd_migrate(cli_conn *cc, int argc, char **argv);

/* rowlock_modes.c: multi-holder names (shared locks, semaphores) */
extern const char rl_usage_permits[];
int rl_cmd_permits(cli_conn *cc, int argc, char **argv);
/* Print the holders of `name` (NULL: of every multi-holder name) as a table
 * (nothing when none), or as a JSON member "holders":[...]. Returns 0 or an
 * exit code (message printed). */
int rl_print_holders(rowlock_client *c, const char *name, int json);

/* rowlock_lock.c */
extern const char rl_usage_lock[], rl_usage_unlock[];
int rl_cmd_lock(cli_conn *cc, int argc, char **argv);
int rl_cmd_unlock(cli_conn *cc, int argc, char **argv);

/* rowlock_output.c */
/* "insert", ... or "unknown". */
const char *rl_strategy_str(rowlock_strategy s);
/* One lock row as a JSON object (no newline). */
void rl_json_info(FILE *f, const rowlock_info *in);
/* Rows as aligned columns on stdout. 0 ok, -1 out of memory. */
int rl_print_table(const rowlock_info *rows, size_t n);

#endif
