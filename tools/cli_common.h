/*
 * Shared by the command-line tools (rowlock, rowlock-reaper, rowlock-bench,
 * rowlock-demo): connection options, option files, password prompt, exit codes.
 * Built only on the public API (rowlock.h).
 */
#ifndef ROWLOCK_CLI_COMMON_H
#define ROWLOCK_CLI_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rowlock.h"

/* sysexits-style exit codes used by the tools (see README). */
enum {
    CLI_EX_OK = 0,
    CLI_EX_CONFLICT = 1,     /* default conflict code for run; "not held" for status */
    CLI_EX_USAGE = 64,
    CLI_EX_UNAVAILABLE = 69, /* database unavailable or schema missing/outdated */
    CLI_EX_TEMPFAIL = 75,    /* lease lost while running */
    CLI_EX_CONFIG = 78,      /* not supported here (e.g. for-update on a Galera node) */
    CLI_EX_NOEXEC = 126,
    CLI_EX_NOTFOUND = 127
};

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

/* The exit code for a library error code: CLI_EX_USAGE for ROWLOCK_EINVALID,
 * CLI_EX_CONFIG for ROWLOCK_EUNSUPPORTED, CLI_EX_UNAVAILABLE otherwise. */
int cli_exit_for(int code);

#endif
