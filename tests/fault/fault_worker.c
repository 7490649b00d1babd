/*
 * fault_worker: the library-side worker of the fault-injection suite
 * (tests/fault/). It takes a lock through librowlock (or runs as COMMAND of
 * `rowlock run`), does a critical section and writes what happened to a
 * history log that tests/fault/check_history.py judges.
 *
 *   fault_worker loop --defaults-file F --table T --name N --strategy S
 *                     --log LOG --dir DIR [--lease-ms L] [--wait-ms W]
 *                     [--hold-ms H] [--count K] [--seconds S]
 *                     [--io-timeout-ms MS] [--counter-ms MS] [--keep 1]
 *                     [--db-fence c|sql]
 *                     [--plant skip-lock|reuse-token|counter-outside|skip-fence]
 *   fault_worker section --log LOG --dir DIR [--hold-ms H] [--counter-ms MS]
 *                     (COMMAND of `rowlock run`: name and token come from
 *                      ROWLOCK_NAME / ROWLOCK_TOKEN; FAULT_SPAWN_US, set by
 *                      the orchestrator, is when `rowlock run` was started;
 *                      FAULT_SLOW_STOP=ignore makes it deaf to SIGTERM, =MS
 *                      makes it take MS ms to stop after SIGTERM: a COMMAND
 *                      slow to stop, which `rowlock run` must still end
 *                      before the lease could; it then logs a "tick" record
 *                      every 50 ms, every 10 ms after SIGTERM, so the
 *                      checker knows until when a SIGKILLed one ran)
 *                     (with FAULT_DB_FENCE=sql, FAULT_DB_CNF=F, FAULT_DB_TABLE=T
 *                      in its environment: also a database-fenced write, SQL form)
 *   fault_worker fence --dir DIR --name N --token T [--log LOG]
 *                     (one fenced write; exit 0 accepted, 3 rejected)
 *
 * One critical section ("section", identified by gid = pid-start.seq, where
 * start is this process's start on CLOCK_MONOTONIC in µs, hex: a long soak
 * spawns more processes than pid_max, so a pid alone repeats):
 *   begin   acquire returned (or COMMAND started)
 *   inc     the deliberately non-atomic counter: read DIR/counter.NAME,
 *           sleep --counter-ms, write value+1 (no lock of its own: two
 *           overlapping holders lose an update)
 *   hold    sleep --hold-ms; the library worker renews every lease/3, or
 *           with --keep 1 has the library's keeper renew (for-update: keep
 *           the session alive) and ends the section early, how = lost, once
 *           the lock is lost or its safe time is 100 ms from running out
 *           (the application's side of "stop before the lock can pass on")
 *   fence   a write to the fenced store DIR/fence.NAME with the token: accepted
 *           only if token >= the highest the store has seen (flock(2) makes
 *           the compare-and-write atomic); rejected writes are also appended
 *           to DIR/fence.NAME.rejects
 *   dbfence (--db-fence) a write fenced inside the worker's own transaction on
 *           its own connection: START TRANSACTION; the name's counter row
 *           in table fault_dbfence_ctr + 1 (its new value `seq` is the commit
 *           order); a row (name, seq, gid, token) in fault_dbfence; the fence
 *           (rowlock_fence(), or CALL `<table>_fence`(name, token)); COMMIT,
 *           or ROLLBACK when the fence refused
 *   end     release (library) or COMMAND exits (CLI); how = completed | lost
 *           (release/renew said ROWLOCK_ENOTOWNER) | terminated (SIGTERM from
 *           `rowlock run`: lease lost)
 *
 * History records: one JSON object per line, appended with one write(2) to an
 * O_APPEND file (atomic between processes for lines this short). Times are
 * CLOCK_MONOTONIC in microseconds (Python's time.monotonic_ns() reads the
 * same clock). Fields: see check_history.py, "Record format".
 *
 * Plants (bugs on purpose, to show that the checker catches them):
 *   skip-lock        never acquires: sections overlap (double grant, lost update)
 *   reuse-token      logs and fences with its first grant's token ever after
 *                    (a client caching a stale token: tokens out of order)
 *   counter-outside  increments the counter after releasing (lost update
 *                    without overlapping sections)
 *   skip-fence       makes its database write without the fence (a stale
 *                    grant's write then commits)
 *
 * Exit status: 0, 2 usage, 69 could not connect at all (loop mode).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>

#include "rowlock.h"

static int log_fd = -1;
static volatile sig_atomic_t got_term;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* "pid-start": names this process uniquely for the whole run (gid prefix). */
static char proc_id[48];
static void proc_id_init(void)
{
    snprintf(proc_id, sizeof proc_id, "%d-%llx", (int)getpid(), (unsigned long long)now_us());
}

/* Sleep until the monotonic time `until_us` (absolute: after a SIGSTOP
 * longer than the rest of the sleep, it returns at once on SIGCONT). Returns
 * early when SIGTERM arrived. */
static void sleep_until(int64_t until_us)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(until_us / 1000000);
    ts.tv_nsec = (long)(until_us % 1000000) * 1000;
    while (!got_term && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void sleep_ms(int64_t ms)
{
    sleep_until(now_us() + ms * 1000);
}

static void on_term(int sig)
{
    (void)sig;
    got_term = 1;
}

/* One history record: a JSON object on one line, one write(2). */
static void rec(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
static void rec(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    int n;
    if (log_fd < 0)
        return;
    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf - 1)
        return;
    buf[n++] = '\n';
    if (write(log_fd, buf, (size_t)n) != n) {
        /* Nothing better to do: the checker will see a missing record. */
    }
}

#ifdef ROWLOCK_FAULT_INJECTION
/* The seam's own count (src/fault.c; this worker is linked with the test-only
 * library objects when built as fault_worker_seam). */
unsigned rowlock__fault_fired_total(void);
#endif

/* With the fault seam: a "seam" record whenever more of its rules have fired
 * (errors the library absorbed included), so the db_error scenario can tell
 * "the seam never fired" from "every injected error was absorbed". No "pid"
 * field: the orchestrator's per-process state ignores it. */
static void rec_seam(void)
{
#ifdef ROWLOCK_FAULT_INJECTION
    static unsigned reported;
    unsigned n = rowlock__fault_fired_total();
    if (n != reported) {
        reported = n;
        rec("{\"ev\":\"seam\",\"wpid\":%d,\"fired\":%u,\"t\":%" PRId64 "}", (int)getpid(), n, now_us());
    }
#endif
}

/* A failed library call: its code and the server error kept with it
 * (an error injected by the test-only fault seam says "injected fault"). */
static void rec_err(const char *op, const char *name, const char *gid, const rowlock_client *c, int rc)
{
    const char *msg = c != NULL ? rowlock_client_errmsg(c) : "";
    rec("{\"ev\":\"dberr\",\"name\":\"%s\",\"gid\":\"%s\",\"pid\":%d,\"op\":\"%s\",\"rc\":\"%s\","
        "\"errno\":%u,\"injected\":%d,\"t\":%" PRId64 "}",
        name, gid, (int)getpid(), op, rowlock_error_name(rc), c != NULL ? rowlock_client_db_errno(c) : 0,
        strstr(msg, "injected fault") != NULL, now_us());
}

static void open_log(const char *path)
{
    log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        fprintf(stderr, "fault_worker: cannot open log %s: %s\n", path, strerror(errno));
        exit(2);
    }
}

/* ---- the non-atomic counter ------------------------------------------------------- */

/* DIR/counter.NAME holds "VALUE GID\n" (GID of the last writer). Read it,
 * sleep, write VALUE+1: on purpose without any lock of its own. */
static void counter_inc(const char *dir, const char *name, uint64_t token, const char *gid,
                        int counter_ms)
{
    char path[4096], buf[256], prev_gid[64] = "-";
    long long v = 0;
    int64_t t0, t1;
    int fd;
    ssize_t n;

    snprintf(path, sizeof path, "%s/counter.%s", dir, name);
    t0 = now_us();
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = '\0';
            if (sscanf(buf, "%lld %63s", &v, prev_gid) < 1)
                v = 0;
        }
    }
    sleep_ms(counter_ms);
    fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        int len = snprintf(buf, sizeof buf, "%lld %s\n", v + 1, gid);
        /* Same-width or longer text each time, so no truncation is needed
         * except when the value's digits shrink (never: it only grows). */
        if (pwrite(fd, buf, (size_t)len, 0) != len) {
        }
        close(fd);
    }
    t1 = now_us();
    rec("{\"ev\":\"inc\",\"name\":\"%s\",\"gid\":\"%s\",\"pid\":%d,\"token\":%" PRIu64
        ",\"read\":%lld,\"prev\":\"%s\",\"wrote\":%lld,\"t0\":%" PRId64 ",\"t1\":%" PRId64 "}",
        name, gid, (int)getpid(), token, v, prev_gid, v + 1, t0, t1);
}

/* ---- the fenced store ------------------------------------------------------------------ */

/* DIR/fence.NAME holds "HIGHEST_TOKEN GID\n". Under flock(LOCK_EX) on the
 * file: accept (rewrite it) if token >= HIGHEST, else refuse and append a
 * line to DIR/fence.NAME.rejects. Returns 1 accepted, 0 rejected, -1 error. */
static int fence_write(const char *dir, const char *name, uint64_t token, const char *gid)
{
    char path[4096], buf[256];
    unsigned long long highest = 0;
    int fd, ok = -1;
    ssize_t n;
    int64_t t;

    snprintf(path, sizeof path, "%s/fence.%s", dir, name);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    }
    n = pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0) {
        buf[n] = '\0';
        if (sscanf(buf, "%llu", &highest) != 1)
            highest = 0;
    }
    t = now_us();
    if (token >= highest) {
        int len = snprintf(buf, sizeof buf, "%" PRIu64 " %s\n", token, gid);
        if (ftruncate(fd, 0) == 0 && pwrite(fd, buf, (size_t)len, 0) == len)
            ok = 1;
    } else {
        char rpath[4200];
        int rfd;
        snprintf(rpath, sizeof rpath, "%s.rejects", path);
        rfd = open(rpath, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (rfd >= 0) {
            int len = snprintf(buf, sizeof buf, "%" PRIu64 " %s %llu %" PRId64 "\n", token, gid,
                               highest, t);
            if (write(rfd, buf, (size_t)len) != len) {
            }
            close(rfd);
        }
        ok = 0;
    }
    /* Logged while the flock is held, so the log's order of fence records
     * per name is the store's order. */
    rec("{\"ev\":\"fence\",\"name\":\"%s\",\"gid\":\"%s\",\"pid\":%d,\"token\":%" PRIu64
        ",\"ok\":%d,\"highest\":%llu,\"t\":%" PRId64 "}",
        name, gid, (int)getpid(), token, ok == 1, highest, t);
    close(fd); /* drops the flock */
    return ok;
}

/* ---- writes fenced in the worker's own transaction ------------------------------------- */

static MYSQL *dbf;          /* the worker's own connection ("the application's") */

static int dbf_query(const char *sql)
{
    return mysql_query(dbf, sql) == 0 ? 0 : -1;
}

/* Connect (once, again after an error) and make the tables. 0 or -1. */
static int dbf_open(const char *cnf, const char *name)
{
    char esc[600], sql[1024];
    unsigned int t = 2;
    if (dbf != NULL)
        return 0;
    dbf = mysql_init(NULL);
    if (dbf == NULL)
        return -1;
    mysql_options(dbf, MYSQL_READ_DEFAULT_FILE, cnf);
    mysql_options(dbf, MYSQL_READ_DEFAULT_GROUP, "client");
    mysql_options(dbf, MYSQL_OPT_CONNECT_TIMEOUT, &t);
    if (mysql_real_connect(dbf, NULL, NULL, NULL, NULL, 0, NULL, 0) == NULL)
        goto fail;
    mysql_real_escape_string(dbf, esc, name, (unsigned long)strlen(name));
    snprintf(sql, sizeof sql, "INSERT IGNORE INTO fault_dbfence_ctr (name, v) VALUES ('%s', 0)", esc);
    if (dbf_query("CREATE TABLE IF NOT EXISTS fault_dbfence_ctr (name VARCHAR(255) PRIMARY KEY, v BIGINT NOT NULL) "
                  "ENGINE=InnoDB") ||
        dbf_query("CREATE TABLE IF NOT EXISTS fault_dbfence (name VARCHAR(255) NOT NULL, seq BIGINT NOT NULL, "
                  "gid VARCHAR(96) NOT NULL, token BIGINT UNSIGNED NOT NULL, PRIMARY KEY (name, seq)) ENGINE=InnoDB") ||
        dbf_query(sql))
        goto fail;
    return 0;
fail:
    fprintf(stderr, "fault_worker: db fence connection: %s\n", mysql_error(dbf));
    mysql_close(dbf);
    dbf = NULL;
    return -1;
}

/* One fenced write: l != NULL the C form, else the SQL form on `table`
 * (form "none": no fence at all, the planted bug). Logged after it ended. */
static void dbf_write(const char *cnf, const char *table, rowlock_lock *l, const char *form, const char *name,
                      uint64_t token, const char *gid)
{
    char esc[600], sql[1400];
    const char *rc = "db-error";
    long long seq = 0;
    int committed = 0;
    if (dbf_open(cnf, name) != 0)
        goto out;
    mysql_real_escape_string(dbf, esc, name, (unsigned long)strlen(name));
    if (dbf_query("START TRANSACTION"))
        goto err;
    snprintf(sql, sizeof sql, "UPDATE fault_dbfence_ctr SET v = LAST_INSERT_ID(v + 1) WHERE name = '%s'", esc);
    if (dbf_query(sql))
        goto err;
    seq = (long long)mysql_insert_id(dbf);
    snprintf(sql, sizeof sql, "INSERT INTO fault_dbfence (name, seq, gid, token) VALUES ('%s', %lld, '%s', %" PRIu64 ")",
             esc, seq, gid, token);
    if (dbf_query(sql))
        goto err;
    if (strcmp(form, "c") == 0) {
        int r = rowlock_fence(l, dbf);
        rc = rowlock_error_name(r);
        if (r != 0) {
            (void)dbf_query("ROLLBACK");
            goto out;
        }
    } else if (strcmp(form, "sql") == 0) {
        snprintf(sql, sizeof sql, "CALL `%s_fence`('%s', %" PRIu64 ")", table, esc, token);
        if (dbf_query(sql)) {
            int fenced = strcmp(mysql_sqlstate(dbf), "RLF01") == 0;
            rc = fenced ? "ROWLOCK_EFENCED" : "db-error";
            (void)dbf_query("ROLLBACK");
            if (fenced)
                goto out;
            goto err;
        }
        rc = "ROWLOCK_OK";
    } else {
        rc = "ROWLOCK_OK"; /* skip-fence: nothing checked */
    }
    if (dbf_query("COMMIT")) {
        rc = "commit-failed";
        goto err;
    }
    committed = 1;
    goto out;
err:
    fprintf(stderr, "fault_worker: db fence: %s\n", mysql_error(dbf));
    mysql_close(dbf); /* a new connection next time (the server may have restarted) */
    dbf = NULL;
out:
    rec("{\"ev\":\"dbfence\",\"name\":\"%s\",\"gid\":\"%s\",\"pid\":%d,\"token\":%" PRIu64
        ",\"seq\":%lld,\"rc\":\"%s\",\"committed\":%d,\"form\":\"%s\",\"t\":%" PRId64 "}",
        name, gid, (int)getpid(), token, seq, rc, committed, form, now_us());
}

/* ---- options ------------------------------------------------------------------------------ */

typedef struct opts {
    const char *defaults_file, *table, *name, *strategy, *log, *dir, *plant, *db_fence;
    int64_t lease_ms, wait_ms, hold_ms, seconds, io_timeout_ms;
    int counter_ms, keep;
    long count;
    uint64_t token;
} opts;

static void usage(void)
{
    fprintf(stderr, "usage: fault_worker loop|section|fence [options] (see the source's header)\n");
    exit(2);
}

static void parse(opts *o, int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            usage();
        i++;
        if (strcmp(a, "--defaults-file") == 0)
            o->defaults_file = v;
        else if (strcmp(a, "--table") == 0)
            o->table = v;
        else if (strcmp(a, "--name") == 0)
            o->name = v;
        else if (strcmp(a, "--strategy") == 0)
            o->strategy = v;
        else if (strcmp(a, "--log") == 0)
            o->log = v;
        else if (strcmp(a, "--dir") == 0)
            o->dir = v;
        else if (strcmp(a, "--plant") == 0)
            o->plant = v;
        else if (strcmp(a, "--db-fence") == 0)
            o->db_fence = v;
        else if (strcmp(a, "--lease-ms") == 0)
            o->lease_ms = atoll(v);
        else if (strcmp(a, "--wait-ms") == 0)
            o->wait_ms = atoll(v);
        else if (strcmp(a, "--hold-ms") == 0)
            o->hold_ms = atoll(v);
        else if (strcmp(a, "--seconds") == 0)
            o->seconds = atoll(v);
        else if (strcmp(a, "--io-timeout-ms") == 0)
            o->io_timeout_ms = atoll(v);
        else if (strcmp(a, "--counter-ms") == 0)
            o->counter_ms = atoi(v);
        else if (strcmp(a, "--keep") == 0)
            o->keep = atoi(v);
        else if (strcmp(a, "--count") == 0)
            o->count = atol(v);
        else if (strcmp(a, "--token") == 0)
            o->token = strtoull(v, NULL, 10);
        else
            usage();
    }
    if (o->dir == NULL)
        usage();
}

/* ---- section mode: COMMAND of `rowlock run` --------------------------------------------- */

static int run_section(opts *o)
{
    const char *name = getenv("ROWLOCK_NAME"), *tok = getenv("ROWLOCK_TOKEN");
    const char *spawn = getenv("FAULT_SPAWN_US"), *strategy = getenv("FAULT_STRATEGY");
    const char *lease = getenv("FAULT_LEASE_MS");
    char gid[96];
    uint64_t token;
    int64_t t_begin, t_end;
    int ok;
    struct sigaction sa;

    if (name == NULL || tok == NULL || o->log == NULL)
        usage();
    token = strtoull(tok, NULL, 10);
    open_log(o->log);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    snprintf(gid, sizeof gid, "%s.0", proc_id);
    t_begin = now_us();
    rec("{\"ev\":\"begin\",\"name\":\"%s\",\"gid\":\"%s\",\"pid\":%d,\"ppid\":%d,\"token\":%" PRIu64
        ",\"strategy\":\"%s\",\"via\":\"cli\",\"req\":%s,\"t\":%" PRId64 ",\"lease_ms\":%s}",
        name, gid, (int)getpid(), (int)getppid(), token, strategy ? strategy : "?",
        spawn ? spawn : "0", t_begin, lease ? lease : "0");
    counter_inc(o->dir, name, token, gid, o->counter_ms);
    const char *slow = getenv("FAULT_SLOW_STOP");
    if (slow != NULL && *slow != '\0') {
        /* Slow to stop: SIGTERM is noted and the hold goes on (for ever,
         * or MS ms more), ticking, until it ends or SIGKILL comes. */
        int64_t hold_end = t_begin + o->hold_ms * 1000, stop_at = INT64_MAX;
        int termed = 0;
        for (;;) {
            int64_t now = now_us(), period = termed ? 10000 : 50000;
            if (got_term && !termed) {
                termed = 1;
                rec("{\"ev\":\"sigterm\",\"gid\":\"%s\",\"pid\":%d,\"t\":%" PRId64 "}", gid, (int)getpid(), now);
                if (strcmp(slow, "ignore") != 0)
                    stop_at = now + atoll(slow) * 1000;
                period = 10000;
            }
            if (now >= hold_end || now >= stop_at)
                break;
            rec("{\"ev\":\"tick\",\"gid\":\"%s\",\"pid\":%d,\"t\":%" PRId64 ",\"next\":%" PRId64 "}", gid,
                (int)getpid(), now, now + period + 5000);
            int64_t until = now + period;
            struct timespec ts = { (time_t)(until / 1000000), (long)(until % 1000000) * 1000 };
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR && !(got_term && !termed)) {
            }
        }
    } else {
        /* A SIGTERM (lease lost) ends the hold at once and goes on to the
         * write: the worst case a fenced resource must survive. */
        sleep_until(t_begin + o->hold_ms * 1000);
    }
    t_end = now_us();
    ok = fence_write(o->dir, name, token, gid);
    (void)ok;
    {
        const char *df = getenv("FAULT_DB_FENCE"), *cnf = getenv("FAULT_DB_CNF"), *tbl = getenv("FAULT_DB_TABLE");
        if (df != NULL && strcmp(df, "sql") == 0 && cnf != NULL && tbl != NULL)
            dbf_write(cnf, tbl, NULL, "sql", name, token, gid);
    }
    rec("{\"ev\":\"end\",\"name\":\"%s\",\"gid\":\"%s\",\"pid\":%d,\"token\":%" PRIu64
        ",\"t\":%" PRId64 ",\"how\":\"%s\",\"rc\":0}",
        name, gid, (int)getpid(), token, t_end, got_term ? "terminated" : "completed");
    return got_term ? 143 : 0;
}

/* ---- loop mode: the library worker ------------------------------------------------------- */

static int connect_client(rowlock_client **cp, const opts *o)
{
    rowlock_client_options co = ROWLOCK_CLIENT_OPTIONS_INIT;
    rowlock_client *c = NULL;
    int rc;
    co.defaults_file = o->defaults_file;
    co.table = o->table;
    co.connect_timeout_ms = 2000;
    if (o->io_timeout_ms > 0) {
        co.read_timeout_ms = (unsigned int)o->io_timeout_ms;
        co.write_timeout_ms = (unsigned int)o->io_timeout_ms;
    }
    rc = rowlock_client_new(&c);
    if (rc == 0)
        rc = rowlock_client_connect(c, &co);
    if (rc != 0) {
        rowlock_client_free(c);
        return rc;
    }
    *cp = c;
    return 0;
}

static int run_loop(opts *o)
{
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    rowlock_lock_options lo = ROWLOCK_LOCK_OPTIONS_INIT;
    int skip = o->plant && strcmp(o->plant, "skip-lock") == 0;
    int reuse = o->plant && strcmp(o->plant, "reuse-token") == 0;
    int outside = o->plant && strcmp(o->plant, "counter-outside") == 0;
    uint64_t first_token = 0;
    int64_t deadline = o->seconds > 0 ? now_us() + o->seconds * 1000000 : INT64_MAX;
    int64_t connect_deadline = now_us() + 60 * 1000000LL;
    long seq = 0;
    int rc;
    struct sigaction sa;

    if (o->name == NULL || o->strategy == NULL || o->log == NULL || (!skip && o->defaults_file == NULL))
        usage();
    if (rowlock_strategy_parse(&lo.strategy, o->strategy) != 0)
        usage();
    open_log(o->log);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);

    while (!got_term && (o->count <= 0 || seq < o->count) && now_us() < deadline) {
        rec_seam();
        char gid[96];
        uint64_t token = 0;
        int64_t t_req, t_begin, t_end, last_req, hold_end;
        const char *how = "completed";
        int lost = 0;

        if (!skip && c == NULL) {
            rc = connect_client(&c, o);
            if (rc != 0) {
                if (now_us() > connect_deadline)
                    return 69;
                sleep_ms(100);
                continue;
            }
            if (rowlock_lock_new(&l, c, o->name, &lo) != 0) {
                fprintf(stderr, "fault_worker: %s\n", rowlock_client_errmsg(c));
                return 2;
            }
            rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
            if (o->keep && rowlock_keep(l, &ko) != 0) {
                fprintf(stderr, "fault_worker: keep: %s\n", rowlock_client_errmsg(c));
                return 2;
            }
        }
        t_req = now_us();
        if (!skip) {
            rc = rowlock_acquire(l, o->wait_ms, o->lease_ms);
            if (rc == ROWLOCK_EBUSY)
                continue;
            if (rc != 0) {
                /* Server gone, connection cut: try again shortly (the next
                 * call reconnects). */
                rec_err("acquire", o->name, "-", c, rc);
                sleep_ms(50 + rand() % 100);
                continue;
            }
            token = rowlock_lock_token(l);
        }
        if (reuse) {
            if (first_token == 0)
                first_token = token;
            else
                token = first_token;
        }
        seq++;
        snprintf(gid, sizeof gid, "%s.%ld", proc_id, seq);
        t_begin = now_us();
        last_req = t_req;
        rec("{\"ev\":\"begin\",\"name\":\"%s\",\"gid\":\"%s\",\"pid\":%d,\"ppid\":%d,\"token\":%" PRIu64
            ",\"strategy\":\"%s\",\"via\":\"%s\",\"req\":%" PRId64 ",\"t\":%" PRId64
            ",\"lease_ms\":%" PRId64 "}",
            o->name, gid, (int)getpid(), (int)getppid(), token, o->strategy,
            skip ? "nolock" : "lib", t_req, t_begin, o->lease_ms);
        if (!outside)
            counter_inc(o->dir, o->name, token, gid, o->counter_ms);
        /* Hold, renewing every third of the lease. After a SIGSTOP longer
         * than the hold, the sleep ends at once and no renewal is tried:
         * the late write below is the one fencing must refuse. */
        hold_end = t_begin + o->hold_ms * 1000;
        while (o->keep && !skip) {
            rowlock_keep_info ki = ROWLOCK_KEEP_INFO_INIT;
            int64_t now = now_us();
            if (got_term || now >= hold_end)
                break;
            if (rowlock_keep_status(l, &ki) != 0 || ki.state == ROWLOCK_KEEP_LOST ||
                ki.state == ROWLOCK_KEEP_NONE || now >= ki.safe_until_us - 100000) {
                how = "lost";
                lost = 1;
                break;
            }
            sleep_until(now + 20000 < hold_end ? now + 20000 : hold_end);
        }
        for (; !o->keep || skip;) {
            int64_t next = last_req + o->lease_ms * 1000 / 3;
            if (skip || lost || next > hold_end)
                next = hold_end;
            sleep_until(next);
            if (got_term || now_us() >= hold_end)
                break;
            {
                int64_t r = now_us();
                rc = rowlock_renew(l, o->lease_ms);
                rec("{\"ev\":\"renew\",\"name\":\"%s\",\"gid\":\"%s\",\"pid\":%d,\"token\":%" PRIu64
                    ",\"req\":%" PRId64 ",\"t\":%" PRId64 ",\"rc\":\"%s\"}",
                    o->name, gid, (int)getpid(), token, r, now_us(), rowlock_error_name(rc));
                if (rc != 0)
                    rec_err("renew", o->name, gid, c, rc);
                if (rc == 0)
                    last_req = r;
                else if (rc == ROWLOCK_ENOTOWNER) {
                    how = "lost";    /* no more renewals; finish the section anyway */
                    lost = 1;
                }
                else
                    sleep_until(now_us() + 200000 < hold_end ? now_us() + 200000 : hold_end);
            }
        }
        fence_write(o->dir, o->name, token, gid);
        if (o->db_fence != NULL && !skip)
            dbf_write(o->defaults_file, o->table, l,
                      o->plant && strcmp(o->plant, "skip-fence") == 0 ? "none" : o->db_fence, o->name, token, gid);
        t_end = now_us();
        rec("{\"ev\":\"releasing\",\"name\":\"%s\",\"gid\":\"%s\",\"pid\":%d,\"t\":%" PRId64 "}",
            o->name, gid, (int)getpid(), t_end);
        rc = 0;
        if (!skip) {
            /* A release that cannot reach the server is retried (the server
             * may be restarting); it ends as 0 or ENOTOWNER. */
            int64_t give_up = now_us() + 30 * 1000000LL;
            for (;;) {
                rc = rowlock_release(l);
                if (rc != 0)
                    rec_err("release", o->name, gid, c, rc);
                if (rc != ROWLOCK_EDB || now_us() > give_up)
                    break;
                sleep_ms(100);
            }
            if (rc == ROWLOCK_ENOTOWNER)
                how = "lost";
            else if (rc != 0 && !lost)
                how = "unknown"; /* (lost: the keeper or a renewal said so already) */
            if (rc != 0 && rowlock_lock_held(l) > 0) {
                /* Start over with a fresh handle and connection. */
                rowlock_lock_free(l);
                rowlock_client_free(c);
                l = NULL;
                c = NULL;
            }
        }
        rec("{\"ev\":\"end\",\"name\":\"%s\",\"gid\":\"%s\",\"pid\":%d,\"token\":%" PRIu64
            ",\"t\":%" PRId64 ",\"how\":\"%s\",\"rc\":\"%s\"}",
            o->name, gid, (int)getpid(), token, t_end, how, rowlock_error_name(rc));
        if (outside)
            counter_inc(o->dir, o->name, token, gid, o->counter_ms);
        /* Give the others a chance (a releasing holder re-queues at once). */
        sleep_ms(rand() % 20);
    }
    rowlock_lock_free(l);
    rowlock_client_free(c);
    if (dbf != NULL)
        mysql_close(dbf);
    return 0;
}

/* ---- repro-late-claim: a claim delivered after its acquire gave up ---------------------- */

/* Steps driven by the orchestrator over stdin/stdout (one line each way):
 * the worker, connected through a relay, says "acquire" and waits; the
 * orchestrator blackholes the relay and answers; the acquire times out
 * (ROWLOCK_EDB); the worker says "heal", the orchestrator lets the relay
 * deliver what it held (the claim reaches the server late) and answers; the
 * worker then acquires and releases twice and prints both tokens and
 * whether the lock is free after the second release ("free"/"held", from the
 * orchestrator's `rowlock status` on a direct connection). */
static int await_line(void)
{
    char line[64];
    fflush(stdout);
    return fgets(line, sizeof line, stdin) != NULL ? 0 : -1;
}

static int run_repro(opts *o)
{
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    rowlock_lock_options lo = ROWLOCK_LOCK_OPTIONS_INIT;
    uint64_t t1, t2;
    int rc;
    if (o->name == NULL || o->strategy == NULL || rowlock_strategy_parse(&lo.strategy, o->strategy) != 0)
        usage();
    if (connect_client(&c, o) != 0 || rowlock_lock_new(&l, c, o->name, &lo) != 0) {
        printf("error connect\n");
        return 2;
    }
    /* Warm up: the statements are prepared on this connection, so the
     * blackholed acquire sends only its execution. */
    rc = rowlock_acquire(l, 0, o->lease_ms);
    if (rc == 0)
        rc = rowlock_release(l);
    printf("warm-up %s\n", rowlock_error_name(rc));
    printf("acquire\n");
    if (await_line() != 0)
        return 2;
    rc = rowlock_acquire(l, 0, o->lease_ms);
    printf("first-acquire %s\n", rowlock_error_name(rc));
    printf("heal\n");
    if (await_line() != 0)
        return 2;
    sleep_ms(500);
    rc = rowlock_acquire(l, 0, o->lease_ms);
    t1 = rowlock_lock_token(l);
    printf("acquire %s token %" PRIu64 "\n", rowlock_error_name(rc), t1);
    rc = rowlock_release(l);
    printf("release %s\n", rowlock_error_name(rc));
    rc = rowlock_acquire(l, 0, o->lease_ms);
    t2 = rowlock_lock_token(l);
    printf("acquire %s token %" PRIu64 "\n", rowlock_error_name(rc), t2);
    rc = rowlock_release(l);
    printf("release %s\n", rowlock_error_name(rc));
    printf("status?\n");
    if (await_line() != 0)
        return 2;
    printf("tokens %s\n", t2 > t1 ? "increasing" : "REPEATED");
    fflush(stdout);
    rowlock_lock_free(l);
    rowlock_client_free(c);
    return 0;
}

int main(int argc, char **argv)
{
    opts o;
    proc_id_init();
    memset(&o, 0, sizeof o);
    o.lease_ms = 2000;
    o.wait_ms = 5000;
    o.hold_ms = 100;
    o.counter_ms = 5;
    if (argc < 2)
        usage();
    parse(&o, argc, argv);
    srand((unsigned int)getpid() ^ (unsigned int)now_us());
    if (strcmp(argv[1], "loop") == 0)
        return run_loop(&o);
    if (strcmp(argv[1], "repro-late-claim") == 0)
        return run_repro(&o);
    if (strcmp(argv[1], "section") == 0)
        return run_section(&o);
    if (strcmp(argv[1], "fence") == 0) {
        char gid[96];
        if (o.name == NULL)
            usage();
        if (o.log != NULL)
            open_log(o.log);
        snprintf(gid, sizeof gid, "%s.0", proc_id);
        int r = fence_write(o.dir, o.name, o.token, gid);
        return r == 1 ? 0 : r == 0 ? 3 : 1;
    }
    usage();
    return 2;
}
