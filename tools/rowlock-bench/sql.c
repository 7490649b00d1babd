/*
 * rowlock-bench: raw libmysqlclient helpers (the floors) and table maintenance.
 */
#include "bench.h"
#include "rowlock_int.h"

#include <sys/mman.h>

/* ---- raw libmysqlclient helpers --------------------------------------------- */

/* rowlock's own keys: not Connector/C's. */
static int not_for_connector(const char *key, void *arg)
{
    (void)arg;
    return strcmp(key, "table") == 0 || strcmp(key, "single-node") == 0;
}

/* Read the option files as the library does (src/optfile.c: the same files
 * and groups; a file others can write is refused when named, skipped with a
 * warning in the default search list) and give Connector/C what was read
 * through a memfd, so it never reads the user's files itself. Returns the
 * descriptor to close after connecting, -1 when no option files are read, or
 * -2 on error (message in err). */
static int raw_options(MYSQL *m, const rowlock_client_options *o, char *err, size_t cap)
{
    static const char *const groups[] = { "client", "client-server", "client-mariadb", "rowlock", NULL };
    rowlock__opts files;
    char path[64], *text;
    size_t len = 0, off = 0;
    int fd;
    if (!o->defaults_file && !(o->flags & ROWLOCK_CLIENT_READ_DEFAULT_FILES))
        return -1;
    if (rowlock__opts_load(&files, o->defaults_file, 1, groups) != 0) {
        setf(err, cap, "raw connect: %s", files.err);
        return -2;
    }
    text = rowlock__opts_render(&files, not_for_connector, NULL, &len, err, cap);
    rowlock__opts_free(&files);
    if (text == NULL)
        return -2;
    fd = memfd_create("rowlock-bench-options", MFD_CLOEXEC);
    while (fd >= 0 && off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    memset(text, 0, len);
    free(text);
    if (fd < 0 || off < len) {
        setf(err, cap, "raw connect: cannot hand the option files to the MySQL library: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -2;
    }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    mysql_optionsv(m, MYSQL_READ_DEFAULT_FILE, path);
    mysql_optionsv(m, MYSQL_READ_DEFAULT_GROUP, "rowlock");
    return fd;
}

/* Open a raw connection configured exactly as the library configures its own. */
MYSQL *raw_connect(const rowlock_client_options *o, char *err, size_t cap)
{
    MYSQL *m = mysql_init(NULL);
    my_bool yes = 1, no = 0;
    unsigned int ct;
    int ofd;

    if (m == NULL) {
        setf(err, cap, "raw connect: out of memory");
        return NULL;
    }
    ct = o->connect_timeout_ms ? (o->connect_timeout_ms + 999) / 1000 : 10;
    mysql_optionsv(m, MYSQL_OPT_CONNECT_TIMEOUT, &ct);
    ofd = raw_options(m, o, err, cap);
    if (ofd == -2) {
        mysql_close(m);
        return NULL;
    }
    mysql_optionsv(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    switch (o->tls_mode) {
    case ROWLOCK_TLS_DEFAULT:
        break;
    case ROWLOCK_TLS_DISABLED:
        mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &no);
        break;
    case ROWLOCK_TLS_PREFERRED:
        mysql_ssl_set(m, NULL, NULL, o->tls_ca, NULL, NULL);
        break;
    case ROWLOCK_TLS_REQUIRED:
        mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &yes);
        break;
    case ROWLOCK_TLS_VERIFY_CA:
    case ROWLOCK_TLS_VERIFY_IDENTITY:
        mysql_ssl_set(m, NULL, NULL, o->tls_ca, NULL, NULL);
        mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &yes);
        mysql_optionsv(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &yes);
        break;
    }
    if (!mysql_real_connect(m, o->host, o->user, o->password, o->database, o->port,
                            o->unix_socket, 0)) {
        setf(err, cap, "raw connect: %s (%u)", mysql_error(m), mysql_errno(m));
        mysql_close(m);
        if (ofd >= 0)
            close(ofd);
        return NULL;
    }
    if (ofd >= 0)
        close(ofd);
    return m;
}

/* Run one text statement, discarding any result. 0 or the server's errno. */
unsigned q_exec(MYSQL *m, const char *sql, uint64_t *affected, char *err, size_t cap)
{
    MYSQL_RES *res;
    if (mysql_real_query(m, sql, (unsigned long)strlen(sql)) != 0) {
        setf(err, cap, "%.80s: %s (%u)", sql, mysql_error(m), mysql_errno(m));
        return mysql_errno(m) ? mysql_errno(m) : 1;
    }
    res = mysql_store_result(m);
    if (res != NULL)
        mysql_free_result(res);
    if (affected)
        *affected = res ? 0 : (uint64_t)mysql_affected_rows(m);
    return 0;
}

/* Run a query and copy column `col` of its first row into out. */
unsigned q_str(MYSQL *m, const char *sql, unsigned col, char *out, size_t outcap, char *err,
               size_t cap)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    if (mysql_real_query(m, sql, (unsigned long)strlen(sql)) != 0) {
        setf(err, cap, "%.80s: %s (%u)", sql, mysql_error(m), mysql_errno(m));
        return mysql_errno(m) ? mysql_errno(m) : 1;
    }
    res = mysql_store_result(m);
    if (res == NULL) {
        setf(err, cap, "%.80s: no result", sql);
        return 1;
    }
    row = mysql_fetch_row(res);
    if (row == NULL || col >= mysql_num_fields(res)) {
        setf(err, cap, "%.80s: no row", sql);
        mysql_free_result(res);
        return 1;
    }
    setf(out, outcap, "%s", row[col] ? row[col] : "NULL");
    mysql_free_result(res);
    return 0;
}

unsigned q_u64(MYSQL *m, const char *sql, unsigned col, uint64_t *out, char *err, size_t cap)
{
    char buf[64];
    unsigned rc = q_str(m, sql, col, buf, sizeof buf, err, cap);
    if (rc == 0)
        *out = strtoull(buf, NULL, 10);
    return rc;
}

int rs_prepare(MYSQL *m, rstmt *s, const char *sql, char *err, size_t cap)
{
    s->st = mysql_stmt_init(m);
    if (s->st == NULL) {
        setf(err, cap, "prepare: out of memory");
        return -1;
    }
    if (mysql_stmt_prepare(s->st, sql, (unsigned long)strlen(sql)) != 0) {
        setf(err, cap, "prepare %.60s: %s (%u)", sql, mysql_stmt_error(s->st),
             mysql_stmt_errno(s->st));
        mysql_stmt_close(s->st);
        s->st = NULL;
        return -1;
    }
    return 0;
}

void rs_close(rstmt *s)
{
    if (s->st)
        mysql_stmt_close(s->st);
    s->st = NULL;
}

/* 0 or the server's errno (message in err). */
unsigned rs_exec(rstmt *s, const char *const *p, unsigned np, long long *val, int *isnull,
                 uint64_t *affected, char *err, size_t cap)
{
    MYSQL_BIND b[4];
    unsigned long lens[4];
    unsigned k;

    memset(b, 0, sizeof b);
    for (k = 0; k < np && k < 4; k++) {
        lens[k] = (unsigned long)strlen(p[k]);
        b[k].buffer_type = MYSQL_TYPE_STRING;
        b[k].buffer = (void *)(uintptr_t)p[k];
        b[k].buffer_length = lens[k];
        b[k].length = &lens[k];
    }
    if ((np > 0 && mysql_stmt_bind_param(s->st, b) != 0) || mysql_stmt_execute(s->st) != 0)
        goto fail;
    if (mysql_stmt_field_count(s->st) > 0) {
        MYSQL_BIND r;
        long long v = 0;
        my_bool nul = 1;
        int frc;
        memset(&r, 0, sizeof r);
        r.buffer_type = MYSQL_TYPE_LONGLONG;
        r.buffer = &v;
        r.is_null = &nul;
        if (mysql_stmt_bind_result(s->st, &r) != 0)
            goto fail;
        frc = mysql_stmt_fetch(s->st);
        if (frc == 1)
            goto fail;
        if (val)
            *val = v;
        if (isnull)
            *isnull = frc == MYSQL_NO_DATA ? 1 : (int)nul;
        while (frc == 0 || frc == MYSQL_DATA_TRUNCATED)
            frc = mysql_stmt_fetch(s->st);
        mysql_stmt_free_result(s->st);
    }
    if (affected)
        *affected = (uint64_t)mysql_stmt_affected_rows(s->st);
    return 0;
fail:
    setf(err, cap, "%s (%u)", mysql_stmt_error(s->st), mysql_stmt_errno(s->st));
    return mysql_stmt_errno(s->st) ? mysql_stmt_errno(s->st) : 1;
}

/* ---- table maintenance (raw, monitor connection) ------------------------------ */

/* Delete every row this bench may have left in `table`. */
int clean_table(bench *b, const char *table, char *err, size_t cap)
{
    char sql[256];
    uint64_t aff = 0;
    int guard;
    setf(sql, sizeof sql,
         "DELETE FROM `%s` WHERE name LIKE 'bench-%%' OR name LIKE 'fill-%%' LIMIT 100000", table);
    wd_arm("cleaning the lock table", 600.0);
    for (guard = 0; guard < 10000; guard++) {
        if (q_exec(b->mon, sql, &aff, err, cap) != 0)
            return -1;
        if (aff < 100000)
            break;
    }
    wd_disarm();
    return 0;
}

/* Insert fill rows fill-<from>..fill-<to> (valid lock rows of the insert
 * strategy), 100k per statement, from MariaDB's Sequence engine. `stale`:
 * rows held by a crashed owner whose lease ended an hour ago; otherwise
 * released rows (owner NULL, count 0). */
int fill_rows(bench *b, const char *table, uint64_t from, uint64_t to, int stale, char *err,
              size_t cap)
{
    char sql[768];
    uint64_t a, aff = 0;
    if (from > to)
        return 0;
    if (b->cfg.verbose)
        fprintf(stderr, "%s: filling %s with rows %" PRIu64 "..%" PRIu64 "\n", PROG, table, from, to);
    wd_arm("filling the lock table", 900.0);
    for (a = from; a <= to; a += 100000) {
        uint64_t z = a + 99999 < to ? a + 99999 : to;
        setf(sql, sizeof sql,
             "INSERT INTO `%s` (name, strategy, mode, owner, count, token, acquired_at, expires_at) "
             "SELECT CONCAT('fill-', LPAD(seq, 8, '0')), 1, 0, %s, %d, 1, "
             "NOW(6) - INTERVAL %s, NOW(6) - INTERVAL %s FROM seq_%" PRIu64 "_to_%" PRIu64,
             table, stale ? "'bench-crashed-owner'" : "NULL", stale ? 1 : 0,
             stale ? "2 HOUR" : "1 MINUTE", stale ? "1 HOUR" : "1 MINUTE", a, z);
        if (q_exec(b->mon, sql, &aff, err, cap) != 0)
            return -1;
        if (aff != z - a + 1) {
            setf(err, cap, "fill: inserted %" PRIu64 " rows, expected %" PRIu64, aff, z - a + 1);
            return -1;
        }
    }
    wd_disarm();
    return 0;
}

/* Create (migrate) a lock table of the bench's own, empty. */
int make_table(bench *b, const char *table, char *err, size_t cap)
{
    rowlock_client_options o = b->wopts;
    rowlock_client *c = NULL;
    int rc;
    o.table = table;
    o.flags |= ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK;
    rc = rowlock_client_new(&c);
    if (rc == 0)
        rc = rowlock_client_connect(c, &o);
    if (rc == 0)
        rc = rowlock_schema_migrate(c, 0, NULL, NULL);
    if (rc != 0)
        setf(err, cap, "creating lock table %s: %s (%s)", table,
             c ? rowlock_client_errmsg(c) : rowlock_strerror(rc), rowlock_error_name(rc));
    rowlock_client_free(c);
    if (rc != 0)
        return -1;
    return clean_table(b, table, err, cap);
}

/* Drop a lock table made by make_table(): the table, its token sequence,
 * its waiter queue and its schema-version row. */
int drop_table(bench *b, const char *table, char *err, size_t cap)
{
    char sql[256];
    setf(sql, sizeof sql, "DROP TABLE IF EXISTS `%s`", table);
    if (q_exec(b->mon, sql, NULL, err, cap) != 0)
        return -1;
    setf(sql, sizeof sql, "DROP SEQUENCE IF EXISTS `%s_token`", table);
    if (q_exec(b->mon, sql, NULL, err, cap) != 0)
        return -1;
    setf(sql, sizeof sql, "DROP TABLE IF EXISTS `%s_queue`", table);
    if (q_exec(b->mon, sql, NULL, err, cap) != 0)
        return -1;
    setf(sql, sizeof sql, "DELETE FROM rowlock_schema WHERE lock_table = '%s'", table);
    return q_exec(b->mon, sql, NULL, err, cap) != 0 ? -1 : 0;
}
