/*
 * Shared by the command-line tools (rowlock, rowlock-reaper, rowlock-bench,
 * rowlock-demo): connection options, option files, password prompt, exit codes.
 * Built only on the public API (rowlock.h).
 */
#ifndef ROWLOCK_TOOLS_COMMON_CLI_H
#define ROWLOCK_TOOLS_COMMON_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rowlock.h"

/*
 * THE table of exit codes (sysexits-style), one row per code: the enum, the
 * value, and what it means. Every command maps library errors through
 * cli_exit_for() into it; `rowlock --help`, `run --help` and `lock --help`
 * print it (cli_print_exit_codes), and docs/cli.md lists the same rows.
 */
#define CLI_EXIT_MAP(X)                                                                                         \
    X(CLI_EX_OK, 0, "success (run: COMMAND's own status; 128+N if COMMAND was killed by signal N)")             \
    X(CLI_EX_CONFLICT, 1, "not acquired with -n or within -w (the conflict code, -E; status: not held)")       \
    X(CLI_EX_USAGE, 64, "usage error: bad option or argument, unreadable defaults file")                       \
    X(CLI_EX_UNAVAILABLE, 69, "database unavailable (a transient state outlasted -w, or a permanent error: "   \
                              "access denied), or the schema is missing/outdated")                             \
    X(CLI_EX_TEMPFAIL, 75, "the lock was lost while held (lease not renewed in time, released by force, "     \
                           "row deleted, session ended); COMMAND was stopped")                                 \
    X(CLI_EX_CONFIG, 78, "not supported here: shared locks or semaphores on a Galera cluster, for-update on " \
                         "a cluster node, shared mode with optimistic")                                        \
    X(CLI_EX_NOEXEC, 126, "run: COMMAND not executable")                                                       \
    X(CLI_EX_NOTFOUND, 127, "run: COMMAND not found")

enum {
#define CLI_EXIT_ENUM_(name, value, text) name = value,
    CLI_EXIT_MAP(CLI_EXIT_ENUM_)
#undef CLI_EXIT_ENUM_
};

/*
 * 1 in the parser fuzz target (tests/fuzz/fuzz_cli.c compiles the tools'
 * sources with -DCLI_PARSE_ONLY=1), 0 in the tools. Each command tests it
 * where its arguments are parsed and checked and nothing is done yet (no
 * connection, fork, signal mask or socket): `if (CLI_PARSE_ONLY) return 0;`.
 * A constant, so the tools' code is unchanged.
 */
#ifndef CLI_PARSE_ONLY
#define CLI_PARSE_ONLY 0
#endif

/* rowlock_release(), tried again with backoff for at most budget_ms while
 * it fails transiently (a failover: the next call reconnects), so a caller
 * warns only when the release finally failed. */
int cli_release_retrying(rowlock_lock *l, rowlock_client *c, int64_t budget_ms);

/* Print the table above, one "  NNN  meaning" line per code. */
void cli_print_exit_codes(FILE *f);

typedef struct cli_conn {
    rowlock_client_options opts; /* strings point into argv or into owned buffers below */
    int prompt_password;         /* --password given without a value */
    char *owned[16];             /* strings this struct must free */
    int nowned;
} cli_conn;

/* Set defaults: read the standard option files, ROWLOCK_DEFAULTS_FILE from the environment. */
void cli_conn_init(cli_conn *cc);

/*
 * If argv[*i] is a connection option (--host=H, --host H, --port, --socket,
 * --user, --database, --table, --ssl-mode, --ssl-ca, --connect-timeout,
 * --defaults-file, --password, --single-node), consume it (and its value), advance *i past
 * it and return 1. Return 0 if it is not one. On a bad value print one line
 * "PROG: ..." to stderr and return -1 (the caller exits CLI_EX_USAGE).
 * A password on the command line (--password=X) is refused: -1.
 */
int cli_conn_parse(cli_conn *cc, const char *prog, int argc, char **argv, int *i);

/*
 * Prompt for the password if asked, check the defaults file is readable, and
 * connect. Extra client flags (e.g. ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK) are
 * OR-ed in. On failure print one line "PROG: <message>" (with a hint to run
 * `rowlock migrate` for ROWLOCK_ESCHEMA) and return the exit code to use
 * (CLI_EX_USAGE for a bad option/unreadable defaults file, CLI_EX_UNAVAILABLE
 * otherwise); *out is NULL then. Returns 0 on success.
 */
int cli_conn_open(cli_conn *cc, const char *prog, unsigned int extra_flags, rowlock_client **out);
/* The same, for a command that waits for a lock (wait_ms as rowlock_acquire:
 * 0 try once, ROWLOCK_WAIT_FOREVER): a transient connect failure
 * (rowlock_client_transient) is retried with backoff until the wait is
 * spent or SIGTERM/SIGINT/SIGHUP is pending; `verbose` says each retry.
 * Only a finite wait (> 0) retries the first connect: a forever wait
 * reports a server that is down at start at once (once connected, its
 * lock wait rides out transient states). */
int cli_conn_open_wait(cli_conn *cc, const char *prog, unsigned int extra_flags, int64_t wait_ms, int verbose,
                       rowlock_client **out);

void cli_conn_free(cli_conn *cc);

/* The help text for the connection options (for --help outputs). */
extern const char cli_conn_help[];

/* Parse seconds with fractions ("0.5", "30"); -1 on error. */
double cli_parse_seconds(const char *s);

/* ---- helpers shared by the tools (added; compatible extension) ---------- */

/* Parse a decimal unsigned integer in [min, max]; 0 ok, -1 error. */
int cli_parse_uint(const char *s, unsigned long long min, unsigned long long max,
                   unsigned long long *out);

/* Parse a reaper pause: "auto" (ROWLOCK_REAP_PAUSE_AUTO) or milliseconds
 * 0-60000, as rowlock_reap_options.pause_ms takes it; 0 ok, -1 error. */
int cli_parse_pause(const char *s, int64_t *out);

/* Write s as a JSON string literal (quotes included). Bytes >= 0x80 are
 * copied when they form valid UTF-8, else written as U+FFFD; '"', '\\' and
 * control characters are escaped (\n, \t, ... or \u00XX). Always valid JSON. */
void cli_json_string(FILE *f, const char *s);

/* Format µs since the epoch as UTC ISO 8601 "2024-05-01T12:34:56.789012Z"
 * into buf (at least 32 bytes); "-" when us is 0. Returns buf. */
char *cli_format_utc_us(char *buf, size_t cap, int64_t us);

/* Print "PROG: <what>: <client message> (ROWLOCK_E...)" as one line, with the
 * `rowlock migrate` hint for ROWLOCK_ESCHEMA. c may be NULL. */
void cli_report(const char *prog, const char *what, const rowlock_client *c, int code);

/* --verbose: send the library's events at `min_level` and above (ROWLOCK_LOG_*)
 * to stderr, one line each: "PROG: <level> <kind>: <message>" (kinds and
 * levels as rowlock_event_kind_name/rowlock_log_level_name name them, so a
 * script can grep "PROG: info released:"). Returns rowlock_client_set_log's
 * code. `prog` must outlive the client. */
int cli_log_to_stderr(rowlock_client *c, const char *prog, int min_level);

/* The exit code for a library error code: CLI_EX_USAGE for ROWLOCK_EINVALID,
 * CLI_EX_CONFIG for ROWLOCK_EUNSUPPORTED, CLI_EX_UNAVAILABLE otherwise. */
int cli_exit_for(int code);

/* ---- one option parser for every tool ------------------------------------ */

/*
 * Options are described by a table of cli_optspec (ended by an entry with
 * id 0) and read one at a time with cli_next_opt(). GNU conventions: short
 * options cluster ("-nw5"), a value follows its letter or comes as the next
 * argument; long options take "--name=V" or "--name V"; "--" ends options.
 * The connection options (cli_conn_parse) are accepted wherever the table's
 * own options are. Nothing is printed except one line on a bad option.
 */
typedef struct cli_optspec {
    const char *lng; /* long name without "--", or NULL */
    char shrt;       /* short letter, or 0 */
    int has_arg;
    int id;          /* > 0 */
} cli_optspec;

enum { CLI_OP_END = -1, CLI_OP_ERR = -2, CLI_OP_CONN = -3 };

typedef struct cli_optparser {
    int argc;
    char **argv;
    int i;               /* next argv index */
    const char *cluster; /* rest of a short-option cluster ("-nw5") */
    int dashdash;        /* "--" was seen */
    const char *prog;    /* for messages: "PROG: CMD: ..." */
    const char *cmd;     /* may be NULL: then "PROG: ..." */
} cli_optparser;

/* Start parsing argv[first..argc). */
void cli_opt_init(cli_optparser *p, const char *prog, const char *cmd, int argc, char **argv, int first);

/*
 * The next option: its id (its value, if it takes one, in *val);
 * CLI_OP_END at the first non-option (p->i indexes it) or after "--"
 * (p->dashdash set, p->i past it); CLI_OP_CONN for a connection option
 * consumed into cc (cc may be NULL: then connection options are unknown);
 * CLI_OP_ERR after printing one line to stderr.
 */
int cli_next_opt(cli_optparser *p, const cli_optspec *specs, cli_conn *cc, const char **val);

/* Check a lock name given on the command line; 0 ok, else prints one line
 * "PROG: CMD: bad lock name: WHY" and returns -1. */
int cli_check_name(const char *prog, const char *cmd, const char *name);

/* ---- output and time ------------------------------------------------------ */

/* This process's monotonic clock, µs. */
int64_t cli_mono_us(void);

/* A malloc'd copy of s for terminal output: control bytes as \xNN. *width is
 * its length in code points (for column alignment). NULL on ENOMEM. */
char *cli_human_str(const char *s, size_t *width);
/* `s` escaped with rowlock_escape() for a message (one of 4 rotating static
 * buffers: at most 4 in one printf; long input is cut, ending in "...").
 * Every message that quotes user input uses it or cli_human_str(). */
const char *cli_q(const char *s);

/* Flush stdout; a write error (full disk, closed pipe) is a failure: prints
 * one line and returns CLI_EX_UNAVAILABLE (or `code` if already non-zero). */
int cli_finish_stdout(const char *prog, int code);

#endif
