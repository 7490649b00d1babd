/*
 * Helpers shared by the database tests (tests/test_*.c).
 *
 * Environment (set by tests/CMakeLists.txt for every db test):
 *   ROWLOCK_DEFAULTS_FILE  option file of the shared test server ([client])
 *   ROWLOCK_SANDBOX        path of tools/rowlock-sandbox (private servers)
 *   ROWLOCK_SANDBOX_DIR    the shared sandbox's directory (informational)
 *
 * Rules the helpers follow so that tests stay leak-free (ASan) and do not
 * leave processes behind when an assertion fails half-way:
 *   - clients and locks made with tu_client()/tu_lock() are registered and
 *     freed by tu_teardown() (locks first); free them earlier with
 *     tu_lock_free()/tu_client_free();
 *   - children forked with tu_fork() are registered; tu_teardown() kills and
 *     reaps the ones still running; a private sandbox started with
 *     tu_sandbox_start() is stopped by tu_teardown();
 *   - code running in a child never calls cmocka (no assert_*): it returns an
 *     exit code that the parent checks, and the child ends with _exit().
 *
 * Every test function should be registered with tu_setup/tu_teardown
 * (TU_TEST(fn) does that).
 */
#ifndef ROWLOCK_TESTUTIL_H
#define ROWLOCK_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include <cmocka.h>

#include "rowlock.h"

/* Generous bounds for a loaded 2-core machine running under ASan. */
#define TU_SLACK_MS 700    /* allowed lateness of a bounded wait */
#define TU_FAST_MS 1500    /* "returns at once": a try-once or a refusal */
#define TU_LEASE_LONG 60000

#define TU_TEST(fn) cmocka_unit_test_setup_teardown(fn, tu_setup, tu_teardown)

int tu_setup(void **state);
int tu_teardown(void **state);

/* Initialise the library, run the cmocka group `name` (n tests; when
 * fresh_table is not NULL, that lock table is dropped and migrated anew
 * first), end the library. `filter` (may be NULL) selects tests by
 * name ("test_wait*"). Returns cmocka's result. */
int tu_main(const char *name, const struct CMUnitTest *tests, size_t n, const char *fresh_table,
            const char *filter);

/* ---- environment --------------------------------------------------------- */

/* The shared server's option file (ROWLOCK_DEFAULTS_FILE); fails the test if unset. */
const char *tu_defaults_file(void);
/* The same, but NULL when unset (for children). */
const char *tu_defaults_file_or_null(void);

/* ---- clients and locks (registered; freed by tu_teardown) ----------------- */

/* Drop `table` (its rows, sequence and schema record) on the server of
 * `defaults_file` (NULL: the shared one) and migrate it afresh. */
void tu_table_fresh(const char *defaults_file, const char *table);
/* A connected client on `table` (schema checked). Asserts success. */
rowlock_client *tu_client(const char *table);
/* The same on another server (a private sandbox's my.cnf). */
rowlock_client *tu_client_at(const char *defaults_file, const char *table);
/* A lock handle. Asserts success. */
rowlock_lock *tu_lock(rowlock_client *c, const char *name, rowlock_strategy s);
/* A lock handle of a mode (shared, or a semaphore of `permits`), exactly as
 * asked (ROWLOCK_TEST_LOCK_MODE does not apply). Asserts success. */
rowlock_lock *tu_lock_mode(rowlock_client *c, const char *name, rowlock_strategy s, rowlock_mode mode,
                           unsigned permits);
void tu_lock_free(rowlock_lock *l);
void tu_client_free(rowlock_client *c);
/* Register a client made elsewhere (so tu_teardown frees it). */
void tu_register_client(rowlock_client *c);
/* A handle made without tu_lock(): freed by tu_teardown too. */
void tu_register_lock(rowlock_lock *l);

/* Not registered, no cmocka: for children. Returns NULL on failure (and
 * prints the reason to stderr). */
rowlock_client *tu_child_client(const char *defaults_file, const char *table);

/* For children: a client on `table` of the shared server and a handle for
 * `name` with strategy `s`. Returns 0, or the exit code the child returns
 * (10: no client, 11: no handle; the reason is printed to stderr). The
 * client is freed when the child exits. */
int tu_child_lock(const char *table, const char *name, rowlock_strategy s, rowlock_client **c, rowlock_lock **l);

/* Assertions on rowlock results, printing names and the client's message. */
#define assert_rc(rc, expected, client) \
    tu_assert_rc((rc), (expected), (client), #rc, __FILE__, __LINE__)
void tu_assert_rc(int rc, int expected, const rowlock_client *c, const char *expr,
                  const char *file, int line);
/* The client's message contains `needle` (case-insensitive). */
#define assert_msg_has(client, needle) \
    tu_assert_msg_has((client), (needle), __FILE__, __LINE__)
void tu_assert_msg_has(const rowlock_client *c, const char *needle, const char *file, int line);
/* Case-insensitive strstr. */
const char *tu_strcasestr(const char *hay, const char *needle);

/* Inspect `l` into *info (asserts the call succeeds). */
void tu_inspect(rowlock_lock *l, rowlock_info *info);
/* Poll inspect until the lease of `l`'s row has ended by the server clock
 * (fails the test after timeout_ms). */
void tu_wait_lease_ended(rowlock_lock *l, int64_t timeout_ms);

/* ---- raw SQL on the test server (libmysqlclient, for setup only) ---------- */

/* Run one statement; returns 0 or the server's error number (message to stderr
 * unless the error is in the optional `ignore` errno). defaults_file NULL: the
 * shared server. */
unsigned int tu_sql(const char *defaults_file, unsigned int ignore, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* First column of the first row as an integer; `*ok` 0 if no row / NULL / error. */
long long tu_sql_int(const char *defaults_file, int *ok, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* A MYSQL * (as void *) connected with `defaults_file`, client_flags for
 * mysql_real_connect. NULL on failure (message to stderr). */
void *tu_mysql_connect(const char *defaults_file, unsigned long client_flags);
void tu_mysql_close(void *mysql);
/* mysql_thread_id() of a connection from tu_mysql_connect. */
unsigned long tu_mysql_thread_id(void *mysql);
/* Run one statement on `mysql` (results discarded); 0 or the error number. */
unsigned int tu_mysql_query(void *mysql, const char *sql);
/* First column of the first row of `sql` on `mysql`; `*ok` 0 if no row / NULL / error. */
long long tu_mysql_int(void *mysql, int *ok, const char *sql);

/* Read `key` from `group` of a simple option file into out; 1 found, 0 not. */
int tu_optfile_get(const char *path, const char *group, const char *key, char *out, size_t cap);

/* ---- time ------------------------------------------------------------------ */

int64_t tu_now_us(void);                 /* CLOCK_MONOTONIC, µs (same clock in all processes) */
double tu_ms_since(int64_t t0_us);
void tu_sleep_ms(int64_t ms);
/* Run `call` and store its duration in ms in `ms_out`. */
#define TU_TIMED(ms_out, call) \
    do { int64_t tu_t0_ = tu_now_us(); call; (ms_out) = tu_ms_since(tu_t0_); } while (0)

/* ---- shared memory ------------------------------------------------------------ */

/* Zeroed MAP_SHARED|MAP_ANONYMOUS memory visible to children forked later. */
void *tu_shm(size_t size);
void tu_shm_free(void *p, size_t size);

/* ---- processes --------------------------------------------------------------- */

/* Fork a child that runs fn(arg, idx) and _exit()s with its return value.
 * Registered: tu_teardown kills it if still running. */
pid_t tu_fork(int (*fn)(void *arg, int idx), void *arg, int idx);
/* Wait up to timeout_ms for `pid`; returns its exit code, 128+signal if it
 * was killed, or -1 on timeout (then it is SIGKILLed and reaped). */
int tu_wait(pid_t pid, int64_t timeout_ms);
/* Fork n children running fn(arg, 0..n-1), wait for all (timeout for the
 * whole group), store exit codes in status[] (may be NULL). Returns the
 * number of children that did not exit with 0. */
int tu_run_children(int n, int (*fn)(void *arg, int idx), void *arg, int *status, int64_t timeout_ms);

/* Pipes for handshakes between processes. */
typedef struct tu_pipe { int rd, wr; } tu_pipe;
void tu_pipe_open(tu_pipe *p);
void tu_pipe_close(tu_pipe *p);
/* Write one byte (returns 0 or -1). Safe in children. */
int tu_signal(tu_pipe *p, char c);
/* Read one byte within timeout_ms: returns the byte (0-255), -1 timeout/EOF. */
int tu_await(tu_pipe *p, int64_t timeout_ms);

/* ---- private sandbox (a throwaway server of this test's own) --------------- */

typedef struct tu_sandbox {
    char base[256];  /* mkdtemp directory */
    char dir[300];   /* the sandbox directory inside it */
    char cnf[320];   /* dir/my.cnf */
    int started;
} tu_sandbox;

/* Start a private sandbox with $ROWLOCK_SANDBOX. Returns 0, or -1 if the
 * script is unavailable (the caller skips the test). Registered for
 * tu_teardown. Fails the test if the script exists but cannot start. */
int tu_sandbox_start(tu_sandbox *sb);
/* "restart", "kill", "start", "stop": run the script; asserts success. */
void tu_sandbox_cmd(tu_sandbox *sb, const char *cmd);
void tu_sandbox_stop(tu_sandbox *sb);

#endif
