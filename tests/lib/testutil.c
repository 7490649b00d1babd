/* Helpers shared by the database tests; see testutil.h. */
#define _GNU_SOURCE 1

#include "testutil.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>

/* ---- registries ---------------------------------------------------------------- */

#define TU_MAX_CLIENTS 64
#define TU_MAX_LOCKS 256
#define TU_MAX_PIDS 64

static rowlock_client *reg_clients[TU_MAX_CLIENTS];
static rowlock_lock *reg_locks[TU_MAX_LOCKS];
static pid_t reg_pids[TU_MAX_PIDS];
/* A copy, not a pointer: a failed assertion longjmps out of the test whose
 * stack held the caller's tu_sandbox. */
static tu_sandbox reg_sandbox;
static pid_t tu_parent_pid;

static void reg_add(void **arr, size_t n, void *p, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (arr[i] == NULL) {
            arr[i] = p;
            return;
        }
    }
    fail_msg("testutil: too many %s", what);
}

static int reg_del(void **arr, size_t n, void *p)
{
    for (size_t i = 0; i < n; i++) {
        if (arr[i] == p) {
            arr[i] = NULL;
            return 1;
        }
    }
    return 0;
}

static void pid_add(pid_t pid)
{
    for (size_t i = 0; i < TU_MAX_PIDS; i++) {
        if (reg_pids[i] == 0) {
            reg_pids[i] = pid;
            return;
        }
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fail_msg("testutil: too many children");
}

static void pid_del(pid_t pid)
{
    for (size_t i = 0; i < TU_MAX_PIDS; i++)
        if (reg_pids[i] == pid)
            reg_pids[i] = 0;
}

int tu_setup(void **state)
{
    (void)state;
    tu_parent_pid = getpid();
    memset(reg_clients, 0, sizeof reg_clients);
    memset(reg_locks, 0, sizeof reg_locks);
    memset(reg_pids, 0, sizeof reg_pids);
    memset(&reg_sandbox, 0, sizeof reg_sandbox);
    return 0;
}

int tu_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < TU_MAX_PIDS; i++) {
        if (reg_pids[i] > 0) {
            kill(reg_pids[i], SIGKILL);
            waitpid(reg_pids[i], NULL, 0);
            reg_pids[i] = 0;
        }
    }
    for (size_t i = 0; i < TU_MAX_LOCKS; i++) {
        rowlock_lock_free(reg_locks[i]);
        reg_locks[i] = NULL;
    }
    for (size_t i = 0; i < TU_MAX_CLIENTS; i++) {
        rowlock_client_free(reg_clients[i]);
        reg_clients[i] = NULL;
    }
    if (reg_sandbox.started)
        tu_sandbox_stop(&reg_sandbox);
    return 0;
}

static const char *main_fresh_table;

/* Group setup: every program starts from its own freshly migrated table. */
static int fresh_table_setup(void **state)
{
    (void)state;
    tu_setup(NULL);
    tu_table_fresh(NULL, main_fresh_table);
    tu_teardown(NULL);
    return 0;
}

int tu_main(const char *name, const struct CMUnitTest *tests, size_t n, const char *fresh_table,
            const char *filter)
{
    int rc;
    main_fresh_table = fresh_table;
    CMFixtureFunction group_setup = fresh_table ? fresh_table_setup : NULL;
    if (filter != NULL && filter[0] != '\0')
        cmocka_set_test_filter(filter);
    if (rowlock_library_init() != 0) {
        fprintf(stderr, "rowlock_library_init failed\n");
        return 1;
    }
    rc = _cmocka_run_group_tests(name, tests, n, group_setup, NULL);
    rowlock_library_end();
    return rc;
}

/* ---- environment ------------------------------------------------------------------ */

const char *tu_defaults_file_or_null(void)
{
    const char *f = getenv("ROWLOCK_DEFAULTS_FILE");
    return (f != NULL && f[0] != '\0') ? f : NULL;
}

const char *tu_defaults_file(void)
{
    const char *f = tu_defaults_file_or_null();
    if (f == NULL)
        fail_msg("ROWLOCK_DEFAULTS_FILE is not set (run the tests through ctest, "
                 "or export it from `tools/rowlock-sandbox start`)");
    return f;
}

/* ---- assertions -------------------------------------------------------------------- */

void tu_assert_rc(int rc, int expected, const rowlock_client *c, const char *expr,
                  const char *file, int line)
{
    if (rc == expected)
        return;
    print_error("%s:%d: %s returned %s (%d), expected %s (%d); client message: \"%s\"\n", file,
                line, expr, rowlock_error_name(rc), rc, rowlock_error_name(expected), expected,
                c != NULL ? rowlock_client_errmsg(c) : "(no client)");
    _fail(file, line);
}

const char *tu_strcasestr(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    if (hay == NULL)
        return NULL;
    for (; *hay != '\0'; hay++)
        if (strncasecmp(hay, needle, n) == 0)
            return hay;
    return n == 0 ? hay : NULL;
}

void tu_assert_msg_has(const rowlock_client *c, const char *needle, const char *file, int line)
{
    const char *m = rowlock_client_errmsg(c);
    if (m != NULL && tu_strcasestr(m, needle) != NULL)
        return;
    print_error("%s:%d: client message \"%s\" does not contain \"%s\"\n", file, line,
                m != NULL ? m : "(NULL)", needle);
    _fail(file, line);
}

/* ---- clients and locks ---------------------------------------------------------------- */

void tu_register_client(rowlock_client *c)
{
    reg_add((void **)reg_clients, TU_MAX_CLIENTS, c, "clients");
}

void tu_register_lock(rowlock_lock *l)
{
    reg_add((void **)reg_locks, TU_MAX_LOCKS, l, "locks");
}

static int open_client(rowlock_client **out, const char *defaults_file, const char *table,
                       unsigned int flags)
{
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    rowlock_client *c = NULL;
    int rc;
    *out = NULL;
    rc = rowlock_client_new(&c);
    if (rc != 0)
        return rc;
    o.defaults_file = defaults_file;
    o.table = table;
    o.flags = flags;
    rc = rowlock_client_connect(c, &o);
    *out = c;
    return rc;
}

rowlock_client *tu_client_at(const char *defaults_file, const char *table)
{
    rowlock_client *c = NULL;
    int rc = open_client(&c, defaults_file, table, 0);
    if (c == NULL)
        fail_msg("rowlock_client_new: %s", rowlock_error_name(rc));
    tu_register_client(c);
    assert_rc(rc, 0, c);
    return c;
}

rowlock_client *tu_client(const char *table)
{
    return tu_client_at(tu_defaults_file(), table);
}

/* ROWLOCK_TEST_LOCK_MODE=semaphore1: insert handles are semaphores of one
 * permit (the behaviour suite run through the holders table, issue 17). */
static void test_lock_mode(rowlock_lock_options *lo)
{
    const char *m = getenv("ROWLOCK_TEST_LOCK_MODE");
    if (m && strcmp(m, "semaphore1") == 0 && lo->strategy == ROWLOCK_STRATEGY_INSERT) {
        lo->mode = ROWLOCK_MODE_SHARED;
        lo->permits = 1;
    }
}

int tu_child_lock(const char *table, const char *name, rowlock_strategy s, rowlock_client **c, rowlock_lock **l)
{
    rowlock_lock_options lo = ROWLOCK_LOCK_OPTIONS_INIT;
    *l = NULL;
    *c = tu_child_client(NULL, table);
    if (*c == NULL)
        return 10;
    lo.strategy = s;
    test_lock_mode(&lo);
    int rc = rowlock_lock_new(l, *c, name, &lo);
    if (rc != 0) {
        fprintf(stderr, "child: lock_new '%s': %s: %s\n", name, rowlock_error_name(rc), rowlock_client_errmsg(*c));
        return 11;
    }
    return 0;
}

rowlock_client *tu_child_client(const char *defaults_file, const char *table)
{
    rowlock_client *c = NULL;
    int rc;
    if (defaults_file == NULL)
        defaults_file = tu_defaults_file_or_null();
    rc = open_client(&c, defaults_file, table, 0);
    if (rc != 0) {
        fprintf(stderr, "child %d: connect: %s: %s\n", (int)getpid(), rowlock_error_name(rc),
                c != NULL ? rowlock_client_errmsg(c) : "");
        rowlock_client_free(c);
        return NULL;
    }
    return c;
}

void tu_client_free(rowlock_client *c)
{
    reg_del((void **)reg_clients, TU_MAX_CLIENTS, c);
    rowlock_client_free(c);
}

rowlock_lock *tu_lock(rowlock_client *c, const char *name, rowlock_strategy s)
{
    rowlock_lock_options lo = ROWLOCK_LOCK_OPTIONS_INIT;
    rowlock_lock *l = NULL;
    int rc;
    lo.strategy = s;
    test_lock_mode(&lo);
    rc = rowlock_lock_new(&l, c, name, &lo);
    assert_rc(rc, 0, c);
    assert_non_null(l);
    reg_add((void **)reg_locks, TU_MAX_LOCKS, l, "locks");
    return l;
}

rowlock_lock *tu_lock_mode(rowlock_client *c, const char *name, rowlock_strategy s, rowlock_mode mode,
                           unsigned permits)
{
    rowlock_lock_options lo = ROWLOCK_LOCK_OPTIONS_INIT;
    rowlock_lock *l = NULL;
    lo.strategy = s;
    lo.mode = mode;
    lo.permits = permits;
    assert_rc(rowlock_lock_new(&l, c, name, &lo), 0, c);
    assert_non_null(l);
    reg_add((void **)reg_locks, TU_MAX_LOCKS, l, "locks");
    return l;
}

void tu_lock_free(rowlock_lock *l)
{
    reg_del((void **)reg_locks, TU_MAX_LOCKS, l);
    rowlock_lock_free(l);
}

void tu_wait_lease_ended(rowlock_lock *l, int64_t timeout_ms)
{
    int64_t t0 = tu_now_us();
    rowlock_info info;
    for (;;) {
        tu_inspect(l, &info);
        if (info.exists && info.expires_in_ms < 0)
            return;
        if (tu_ms_since(t0) > (double)timeout_ms)
            fail_msg("the lease of '%s' did not end within %lld ms (expires_in_ms %lld)", rowlock_lock_name(l),
                     (long long)timeout_ms, (long long)info.expires_in_ms);
        tu_sleep_ms(info.expires_in_ms > 0 && info.expires_in_ms < 200 ? info.expires_in_ms + 5 : 50);
    }
}

void tu_inspect(rowlock_lock *l, rowlock_info *info)
{
    rowlock_info init = ROWLOCK_INFO_INIT;
    int rc;
    *info = init;
    rc = rowlock_inspect(l, info);
    if (rc != 0) {
        print_error("rowlock_inspect(%s): %s\n", rowlock_lock_name(l), rowlock_error_name(rc));
        fail();
    }
}

void tu_table_fresh(const char *defaults_file, const char *table)
{
    rowlock_client *c = NULL;
    int rc, from = -1, to = -1;
    if (defaults_file == NULL)
        defaults_file = tu_defaults_file();
    /* 1146: rowlock_schema does not exist yet on a brand-new server. */
    assert_int_equal(tu_sql(defaults_file, 0, "DROP TABLE IF EXISTS `%s`", table), 0);
    assert_int_equal(tu_sql(defaults_file, 0, "DROP SEQUENCE IF EXISTS `%s_token`", table), 0);
    assert_int_equal(tu_sql(defaults_file, 0, "DROP TABLE IF EXISTS `%s_queue`", table), 0);
    assert_int_equal(tu_sql(defaults_file, 0, "DROP TABLE IF EXISTS `%s_hold`", table), 0);
    assert_int_equal(tu_sql(defaults_file, 0, "DROP TABLE IF EXISTS `%s_epoch`", table), 0);
    unsigned int e = tu_sql(defaults_file, 1146, "DELETE FROM rowlock_schema WHERE lock_table = '%s'", table);
    assert_true(e == 0 || e == 1146);

    rc = open_client(&c, defaults_file, table, ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK);
    if (c == NULL)
        fail_msg("rowlock_client_new: %s", rowlock_error_name(rc));
    tu_register_client(c);
    assert_rc(rc, 0, c);
    rc = rowlock_schema_migrate(c, 0, &from, &to);
    assert_rc(rc, 0, c);
    assert_int_equal(from, 0);
    assert_int_equal(to, rowlock_schema_version_expected());
    tu_client_free(c);
}

/* ---- raw SQL -------------------------------------------------------------------------------- */

void *tu_mysql_connect(const char *defaults_file, unsigned long client_flags)
{
    MYSQL *m = mysql_init(NULL);
    if (m == NULL)
        return NULL;
    if (defaults_file == NULL)
        defaults_file = tu_defaults_file_or_null();
    if (defaults_file != NULL)
        mysql_options(m, MYSQL_READ_DEFAULT_FILE, defaults_file);
    mysql_options(m, MYSQL_READ_DEFAULT_GROUP, "client");
    if (mysql_real_connect(m, NULL, NULL, NULL, NULL, 0, NULL, client_flags) == NULL) {
        fprintf(stderr, "tu_mysql_connect(%s): %s\n", defaults_file ? defaults_file : "-",
                mysql_error(m));
        mysql_close(m);
        return NULL;
    }
    /* On the test cluster every statement a test makes on the lock data is
     * causal: a node answers only after applying every write set committed
     * anywhere before the statement (a read on node 1 right after a write
     * through node 2 otherwise may see the old row; it did, on a fresh
     * machine). All statement kinds (15: reads, UPDATE/DELETE,
     * INSERT/REPLACE, SHOW). Not on the admin files rowlock-cluster writes
     * (rootN.cnf): tests read node status and variables through them, also
     * from a node that is not ready, where a causal read fails (1047). */
    const char *cl = getenv("ROWLOCK_CLUSTER_DIR");
    const char *base = defaults_file != NULL ? strrchr(defaults_file, '/') : NULL;
    base = base != NULL ? base + 1 : defaults_file;
    if (cl != NULL && *cl != '\0' && base != NULL && strncmp(base, "root", 4) != 0 &&
        mysql_query(m, "SET SESSION wsrep_sync_wait = 15") != 0) {
        fprintf(stderr, "tu_mysql_connect(%s): SET wsrep_sync_wait: %s\n", defaults_file ? defaults_file : "-",
                mysql_error(m));
        mysql_close(m);
        return NULL;
    }
    return m;
}

void tu_mysql_close(void *mysql)
{
    if (mysql != NULL)
        mysql_close((MYSQL *)mysql);
}

unsigned long tu_mysql_thread_id(void *mysql)
{
    return mysql_thread_id((MYSQL *)mysql);
}

unsigned int tu_mysql_query(void *mysql, const char *sql)
{
    MYSQL *m = mysql;
    if (mysql_query(m, sql) != 0)
        return mysql_errno(m);
    do {
        MYSQL_RES *r = mysql_store_result(m);
        if (r != NULL)
            mysql_free_result(r);
        else if (mysql_field_count(m) != 0)
            return mysql_errno(m);
    } while (mysql_next_result(m) == 0);
    return 0;
}

/* Run `sql` on `m`; the first column of its first row into *val. */
static unsigned int query_int(MYSQL *m, const char *sql, unsigned int ignore, long long *val, int *ok)
{
    unsigned int err = 0;
    if (ok != NULL)
        *ok = 0;
    if (mysql_query(m, sql) != 0) {
        err = mysql_errno(m);
        if (err != ignore)
            fprintf(stderr, "tu_sql: %s: %s (%u)\n", sql, mysql_error(m), err);
    } else {
        MYSQL_RES *r = mysql_store_result(m);
        if (r != NULL) {
            MYSQL_ROW row = mysql_fetch_row(r);
            if (row != NULL && row[0] != NULL && val != NULL) {
                *val = strtoll(row[0], NULL, 10);
                if (ok != NULL)
                    *ok = 1;
            }
            mysql_free_result(r);
        }
    }
    return err;
}

long long tu_mysql_int(void *mysql, int *ok, const char *sql)
{
    long long v = 0;
    (void)query_int(mysql, sql, 0, &v, ok);
    return v;
}

#if defined(__GNUC__)
__attribute__((format(printf, 5, 0)))
#endif
static unsigned int vsql(const char *defaults_file, unsigned int ignore, long long *val, int *ok,
                         const char *fmt, va_list ap)
{
    char sql[4096];
    MYSQL *m;
    unsigned int err;
    if (ok != NULL)
        *ok = 0;
    vsnprintf(sql, sizeof sql, fmt, ap);
    m = tu_mysql_connect(defaults_file, 0);
    if (m == NULL)
        return 2003;
    err = query_int(m, sql, ignore, val, ok);
    mysql_close(m);
    return err;
}

unsigned int tu_sql(const char *defaults_file, unsigned int ignore, const char *fmt, ...)
{
    va_list ap;
    unsigned int e;
    va_start(ap, fmt);
    e = vsql(defaults_file, ignore, NULL, NULL, fmt, ap);
    va_end(ap);
    return e;
}

long long tu_sql_int(const char *defaults_file, int *ok, const char *fmt, ...)
{
    va_list ap;
    long long v = 0;
    va_start(ap, fmt);
    vsql(defaults_file, 0, &v, ok, fmt, ap);
    va_end(ap);
    return v;
}

static char *trim(char *s)
{
    char *e;
    while (isspace((unsigned char)*s))
        s++;
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

int tu_optfile_get(const char *path, const char *group, const char *key, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int in_group = 0, found = 0;
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f) != NULL) {
        char *s = trim(line), *eq;
        if (*s == '#' || *s == ';' || *s == '\0')
            continue;
        if (*s == '[') {
            char *e = strchr(s, ']');
            if (e != NULL)
                *e = '\0';
            in_group = strcmp(trim(s + 1), group) == 0;
            continue;
        }
        if (!in_group || (eq = strchr(s, '=')) == NULL)
            continue;
        *eq = '\0';
        if (strcmp(trim(s), key) == 0) {
            snprintf(out, cap, "%s", trim(eq + 1));
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* ---- time ---------------------------------------------------------------------------------------- */

int64_t tu_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

double tu_ms_since(int64_t t0_us)
{
    return (double)(tu_now_us() - t0_us) / 1000.0;
}

void tu_sleep_ms(int64_t ms)
{
    struct timespec ts;
    if (ms <= 0)
        return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- shared memory ------------------------------------------------------------------------------------- */

void *tu_shm(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        fail_msg("mmap(%zu): %s", size, strerror(errno));
    memset(p, 0, size);
    return p;
}

void tu_shm_free(void *p, size_t size)
{
    if (p != NULL)
        munmap(p, size);
}

/* ---- processes ---------------------------------------------------------------------------------------- */

pid_t tu_fork(int (*fn)(void *arg, int idx), void *arg, int idx)
{
    pid_t pid;
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0)
        fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        /* cmocka's handlers would longjmp back into the test runner and let
         * the child run the following tests: a crash must kill the child. */
        static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            signal(sigs[i], SIG_DFL);
        int rc = fn(arg, idx);
        fflush(stdout);
        fflush(stderr);
        _exit(rc & 0xff);
    }
    pid_add(pid);
    return pid;
}

static int decode_status(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return 255;
}

int tu_wait(pid_t pid, int64_t timeout_ms)
{
    int64_t deadline = tu_now_us() + timeout_ms * 1000;
    for (;;) {
        int st = 0;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            pid_del(pid);
            return decode_status(st);
        }
        if (r < 0 && errno != EINTR) {
            pid_del(pid);
            return 255;
        }
        if (tu_now_us() >= deadline) {
            fprintf(stderr, "tu_wait: child %d still running after %lld ms: killing it\n",
                    (int)pid, (long long)timeout_ms);
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            pid_del(pid);
            return -1;
        }
        tu_sleep_ms(5);
    }
}

int tu_run_children(int n, int (*fn)(void *arg, int idx), void *arg, int *status, int64_t timeout_ms)
{
    pid_t pids[TU_MAX_PIDS];
    int bad = 0;
    int64_t deadline = tu_now_us() + timeout_ms * 1000;
    assert_true(n > 0 && n <= TU_MAX_PIDS);
    for (int i = 0; i < n; i++)
        pids[i] = tu_fork(fn, arg, i);
    for (int i = 0; i < n; i++) {
        int64_t left = (deadline - tu_now_us()) / 1000;
        int st = tu_wait(pids[i], left > 0 ? left : 1);
        if (status != NULL)
            status[i] = st;
        if (st != 0) {
            fprintf(stderr, "child %d (pid %d) exited with %d\n", i, (int)pids[i], st);
            bad++;
        }
    }
    return bad;
}

void tu_pipe_open(tu_pipe *p)
{
    int fd[2];
    if (pipe(fd) != 0)
        fail_msg("pipe: %s", strerror(errno));
    p->rd = fd[0];
    p->wr = fd[1];
}

void tu_pipe_close(tu_pipe *p)
{
    if (p->rd >= 0)
        close(p->rd);
    if (p->wr >= 0)
        close(p->wr);
    p->rd = p->wr = -1;
}

int tu_signal(tu_pipe *p, char c)
{
    ssize_t n;
    do {
        n = write(p->wr, &c, 1);
    } while (n < 0 && errno == EINTR);
    return n == 1 ? 0 : -1;
}

int tu_await(tu_pipe *p, int64_t timeout_ms)
{
    int64_t deadline = tu_now_us() + timeout_ms * 1000;
    for (;;) {
        struct pollfd pfd = { p->rd, POLLIN, 0 };
        int64_t left = (deadline - tu_now_us()) / 1000;
        int r;
        if (left < 0)
            return -1;
        r = poll(&pfd, 1, (int)(left > 1000000 ? 1000000 : left));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        {
            unsigned char c;
            ssize_t n = read(p->rd, &c, 1);
            if (n == 1)
                return c;
            if (n < 0 && errno == EINTR)
                continue;
            return -1;
        }
    }
}

/* ---- private sandbox ---------------------------------------------------------------------------------- */

/* Run `script cmd dir`, output to base/sandbox.log; returns the exit code. */
static int run_script(tu_sandbox *sb, const char *cmd)
{
    const char *script = getenv("ROWLOCK_SANDBOX");
    char log[320];
    pid_t pid;
    int st = 0;
    snprintf(log, sizeof log, "%s/sandbox.log", sb->base);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int devnull = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            if (fd > 2)
                close(fd);
        }
        if (devnull >= 0) {
            dup2(devnull, 0);
            if (devnull > 2)
                close(devnull);
        }
        /* Nothing else of ours (client sockets, test pipes) may leak into
         * the script or the server it starts. */
        for (int i = 3; i < 1024; i++)
            close(i);
        execl(script, script, cmd, sb->dir, (char *)NULL);
        _exit(127);
    }
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return decode_status(st);
}

static void dump_log(tu_sandbox *sb)
{
    char log[320], line[512];
    FILE *f;
    snprintf(log, sizeof log, "%s/sandbox.log", sb->base);
    f = fopen(log, "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof line, f) != NULL)
        fprintf(stderr, "  sandbox: %s", line);
    fclose(f);
}

int tu_sandbox_start(tu_sandbox *sb)
{
    const char *script = getenv("ROWLOCK_SANDBOX");
    int rc;
    memset(sb, 0, sizeof *sb);
    if (script == NULL || access(script, X_OK) != 0) {
        print_message("ROWLOCK_SANDBOX not set or not executable: no private server, skipping\n");
        return -1;
    }
    if (system("PATH=\"$PATH:/usr/sbin:/sbin\"; command -v mariadbd >/dev/null 2>&1 || "
               "command -v mysqld >/dev/null 2>&1") != 0) {
        print_message("mariadbd not installed: no private server, skipping\n");
        return -1;
    }
    snprintf(sb->base, sizeof sb->base, "/tmp/rowlock-test.XXXXXX");
    if (mkdtemp(sb->base) == NULL)
        fail_msg("mkdtemp: %s", strerror(errno));
    chmod(sb->base, 0755); /* the server may run as user mysql */
    snprintf(sb->dir, sizeof sb->dir, "%s/sbx", sb->base);
    snprintf(sb->cnf, sizeof sb->cnf, "%s/my.cnf", sb->dir);
    sb->started = 1;
    reg_sandbox = *sb;
    rc = run_script(sb, "start");
    if (rc != 0) {
        dump_log(sb);
        fail_msg("%s start %s exited with %d", script, sb->dir, rc);
    }
    return 0;
}

void tu_sandbox_cmd(tu_sandbox *sb, const char *cmd)
{
    int rc = run_script(sb, cmd);
    if (rc != 0) {
        dump_log(sb);
        fail_msg("rowlock-sandbox %s %s exited with %d", cmd, sb->dir, rc);
    }
}

void tu_sandbox_stop(tu_sandbox *sb)
{
    char log[320];
    tu_sandbox copy;
    if (sb == NULL || !sb->started)
        return;
    /* Only the process that started it stops it (not a forked child). */
    if (tu_parent_pid != 0 && getpid() != tu_parent_pid)
        return;
    copy = *sb; /* sb may be the registry's copy, cleared below */
    sb->started = 0;
    if (strcmp(reg_sandbox.dir, copy.dir) == 0)
        memset(&reg_sandbox, 0, sizeof reg_sandbox);
    if (run_script(&copy, "stop") != 0)
        dump_log(&copy);
    snprintf(log, sizeof log, "%s/sandbox.log", copy.base);
    unlink(log);
    rmdir(copy.base);
}
