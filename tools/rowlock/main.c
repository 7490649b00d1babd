/*
 * rowlock — take a distributed lock kept in a MariaDB table from the
 * shell, run a command under it, inspect and administer locks.
 *
 *   rowlock [CONNECTION OPTIONS] COMMAND [ARGS]
 *
 * See docs/cli.md. Uses only the public API (rowlock.h).
 */
#include "commands.h"

#include <signal.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_main[] =
    "Usage: rowlock [CONNECTION OPTIONS] COMMAND [ARGS]\n"
    "\n"
    "Distributed locks kept in a MariaDB table (MariaDB 10.6 or later; MySQL is not\n"
    "supported yet).\n"
    "\n"
    "Commands:\n"
    "  run [OPTIONS] NAME [--] COMMAND [ARG...]   run COMMAND while holding lock NAME\n"
    "  run [OPTIONS] NAME -c 'SHELL COMMAND'      the same, through /bin/sh -c\n"
    "  status [--json] NAME                       who holds NAME (exit 0 held, 1 free)\n"
    "  list [--json] [--stale]                    every held lock (or every stale row)\n"
    "  release --force [--owner=OWNER] NAME       administrative release of NAME\n"
    "  migrate [--dry-run] [--json]               create or upgrade the lock table\n"
    "  lock [OPTIONS] NAME                        hold NAME until unlock or the shell exits\n"
    "                                             (eval \"$(rowlock lock NAME)\")\n"
    "  unlock [--check] [HANDLE]                  release a lock taken with lock\n"
    "  permits [--json] NAME N                    let N holders share NAME (semaphore)\n"
    "  metrics [--names] [--json]                 the lock table for Prometheus\n"
    "  help [COMMAND]                             show help\n"
    "\n"
    "Options:\n"
    "  -h, --help       show this help (rowlock COMMAND --help: help for COMMAND)\n"
    "  -V, --version    show the version\n"
    "\n";

/* The commands: adding one means a file with its function and usage text,
 * and one line here. */
static const struct command {
    const char *name;
    rowlock_cmd_fn fn;
    const char *usage;
} commands[] = {
    { "run", rl_cmd_run, rl_usage_run },
    { "status", rl_cmd_status, rl_usage_status },
    { "list", rl_cmd_list, rl_usage_list },
    { "release", rl_cmd_release, rl_usage_release },
    { "migrate", rl_cmd_migrate, rl_usage_migrate },
    { "lock", rl_cmd_lock, rl_usage_lock },
    { "unlock", rl_cmd_unlock, rl_usage_unlock },
    { "permits", rl_cmd_permits, rl_usage_permits },
    { "metrics", rl_cmd_metrics, rl_usage_metrics },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

/* "run, status, ..., help": the names of the table above, and help (which
 * dispatch() answers before the table), for "unknown command" messages. */
static const char *command_names(char *buf, size_t cap)
{
    size_t k, n = 0;
    for (k = 0; k < NCOMMANDS && n < cap; k++)
        n += (size_t)snprintf(buf + n, cap - n, "%s, ", commands[k].name);
    if (n < cap)
        snprintf(buf + n, cap - n, "help");
    return buf;
}

static void print_main_help(void)
{
    fputs(usage_main, stdout);
    fputs(cli_conn_help, stdout);
    fputc('\n', stdout);
    cli_print_exit_codes(stdout);
}

/* The lock-taking commands list every exit code (each one applies). */
static void print_cmd_help(const struct command *c)
{
    rl_print_cmd_help(c->usage, c->usage == rl_usage_run || c->usage == rl_usage_lock);
}

static const struct command *find_command(const char *name)
{
    size_t k;
    for (k = 0; k < NCOMMANDS; k++)
        if (strcmp(name, commands[k].name) == 0)
            return &commands[k];
    return NULL;
}

static int cmd_help(int argc, char **argv)
{
    const struct command *c;
    size_t w;
    char *h;

    if (argc > 2) {
        h = cli_human_str(argv[2], &w);
        fprintf(stderr, "%s: help: unexpected argument '%s'\n", PROG, h ? h : "?");
        free(h);
        return CLI_EX_USAGE;
    }
    /* help, help help, help --help: help is a command of --help's list too. */
    if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        print_main_help();
        return cli_finish_stdout(PROG, 0);
    }
    c = find_command(argv[1]);
    if (c == NULL) {
        h = cli_human_str(argv[1], &w);
        fprintf(stderr, "%s: help: unknown command '%s'\n", PROG, h ? h : "?");
        free(h);
        return CLI_EX_USAGE;
    }
    print_cmd_help(c);
    return cli_finish_stdout(PROG, 0);
}

static int dispatch(cli_conn *cc, int argc, char **argv)
{
    const struct command *c;
    size_t w;
    char *h, names[256];

    if (strcmp(argv[0], "help") == 0)
        return cmd_help(argc, argv);
    c = find_command(argv[0]);
    if (c != NULL)
        return c->fn(cc, argc, argv);
    h = cli_human_str(argv[0], &w);
    fprintf(stderr, "%s: unknown command '%s' (%s; see rowlock --help)\n", PROG, h ? h : "?",
            command_names(names, sizeof names));
    free(h);
    return CLI_EX_USAGE;
}

/* SIGPIPE's disposition as whoever started us left it: Connector/C's
 * library init ignores SIGPIPE for the whole process, and `rowlock run`
 * gives COMMAND this one back (a pipeline in COMMAND must die of SIGPIPE as
 * it would under flock(1)). */
struct sigaction rl_sigpipe_at_start;
int rl_sigpipe_saved;

int rl_main(int argc, char **argv)
{
    cli_conn cc;
    int i = 1, ex;

    if (!rl_sigpipe_saved && sigaction(SIGPIPE, NULL, &rl_sigpipe_at_start) == 0)
        rl_sigpipe_saved = 1;
    cli_conn_init(&cc);
    while (i < argc) {
        const char *a = argv[i];
        int r;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            /* `rowlock --help [COMMAND]`; anything else would be ignored. */
            const struct command *c = i + 2 == argc ? find_command(argv[i + 1]) : NULL;
            int help_help = i + 2 == argc && strcmp(argv[i + 1], "help") == 0; /* rowlock --help help */
            if (i != 1 || (argc > 2 && c == NULL && !help_help)) {
                fprintf(stderr, "%s: --help takes no other arguments than a COMMAND\n", PROG);
                cli_conn_free(&cc);
                return CLI_EX_USAGE;
            }
            if (c != NULL)
                print_cmd_help(c);
            else
                print_main_help();
            return cli_finish_stdout(PROG, 0);
        }
        if ((strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) && (i != 1 || argc != 2)) {
            fprintf(stderr, "%s: --version takes no other arguments\n", PROG);
            cli_conn_free(&cc);
            return CLI_EX_USAGE;
        }
        if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
            printf("rowlock %s (library %s, schema version %d)\n", ROWLOCK_VERSION_STRING,
                   rowlock_version(), rowlock_schema_version_expected());
            return cli_finish_stdout(PROG, 0);
        }
        r = cli_conn_parse(&cc, PROG, argc, argv, &i);
        if (r < 0) {
            cli_conn_free(&cc);
            return CLI_EX_USAGE;
        }
        if (r > 0)
            continue;
        if (a[0] == '-') {
            size_t w;
            char *h = cli_human_str(a, &w);
            fprintf(stderr, "%s: unknown option '%s' (see rowlock --help)\n", PROG, h ? h : "?");
            free(h);
            cli_conn_free(&cc);
            return CLI_EX_USAGE;
        }
        break;
    }
    if (i >= argc) {
        char names[256];
        fprintf(stderr, "%s: missing COMMAND (%s; see rowlock --help)\n", PROG,
                command_names(names, sizeof names));
        cli_conn_free(&cc);
        return CLI_EX_USAGE;
    }
    if (i > 1 && strcmp(argv[i - 1], "--password") == 0 && strcmp(argv[i], "help") != 0 && find_command(argv[i]) == NULL) {
        /* Probably "--password SECRET": never echo it. */
        fprintf(stderr, "%s: unknown command after --password (it takes no value: the password "
                        "is asked on the terminal, or read from an option file)\n", PROG);
        cli_conn_free(&cc);
        return CLI_EX_USAGE;
    }
    ex = dispatch(&cc, argc - i, argv + i);
    cli_conn_free(&cc);
    return ex;
}

#if !CLI_PARSE_ONLY
int main(int argc, char **argv)
{
    int ex = rl_main(argc, argv);
    rowlock_library_end();
    return ex;
}
#endif
