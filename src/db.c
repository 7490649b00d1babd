/*
 * The only file that calls libmysqlclient. Everything that reaches the
 * server goes through rowlock__db_exec() (prepared statements, cached per
 * client) or rowlock__db_simple() (fixed SQL without user data), so this is
 * the one seam for tests, tracing and fault injection.
 *
 * Errors: every failure is captured into the client (errno, SQLSTATE, one
 * line) and translated by rowlock__db_classify() (error.c): busy → EBUSY,
 * missing table/sequence → ESCHEMA, anything else → EDB. A lost connection
 * marks the client disconnected; the next call on a connection the client
 * owns reconnects (statements are prepared again). A wrapped connection is
 * never reconnected by rowlock.
 */
#include "rowlock_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>

#define MYSQLP(c) ((MYSQL *)(c)->mysql)

static int capture(rowlock_client *c, const char *what, unsigned int err, const char *state, const char *msg)
{
    c->db_errno = err;
    rowlock__strlcpy(c->sqlstate, state && *state ? state : "HY000", sizeof c->sqlstate);
    rowlock__dbclass cls = rowlock__db_classify(err);
    if (cls == ROWLOCK__DB_CONN && c->owns_mysql) {
        /* The session is gone: its statements, transaction and row locks too. */
        c->connected = 0;
    }
    int code = cls == ROWLOCK__DB_BUSY ? ROWLOCK_EBUSY : cls == ROWLOCK__DB_SCHEMA ? ROWLOCK_ESCHEMA : ROWLOCK_EDB;
    if (cls == ROWLOCK__DB_SCHEMA)
        return rowlock__fail(c, code, "%s: lock table `%s` is not installed or outdated (%s); run `rowlock migrate`",
                             what, c->table, msg);
    return rowlock__fail(c, code, "%s: %s (MySQL error %u, SQLSTATE %s)", what, msg, err, c->sqlstate);
}

static int capture_mysql(rowlock_client *c, const char *what)
{
    MYSQL *m = MYSQLP(c);
    return capture(c, what, mysql_errno(m), mysql_sqlstate(m), mysql_error(m));
}

/* A statement's error; libmariadb keeps an error that arrives while a result
 * is fetched (e.g. Galera aborting a reader: 1213) on the connection, not on
 * the statement, so that one is read when the statement has none. */
static int capture_stmt(rowlock_client *c, const char *what, MYSQL_STMT *st)
{
    if (mysql_stmt_errno(st) == 0 && mysql_errno(MYSQLP(c)) != 0)
        return capture_mysql(c, what);
    if (mysql_stmt_errno(st) == 0)
        return capture(c, what, CR_UNKNOWN_ERROR, "HY000", "unknown client error (no error number reported)");
    return capture(c, what, mysql_stmt_errno(st), mysql_stmt_sqlstate(st), mysql_stmt_error(st));
}

void rowlock__db_drop_statements(rowlock_client *c)
{
    for (int i = 0; i < ROWLOCK__STMT_CACHE; i++) {
        if (c->stmts[i].stmt)
            mysql_stmt_close((MYSQL_STMT *)c->stmts[i].stmt);
        memset(&c->stmts[i], 0, sizeof c->stmts[i]);
    }
}

void rowlock__db_close(rowlock_client *c)
{
    rowlock__db_drop_statements(c);
    if (c->mysql && c->owns_mysql)
        mysql_close(MYSQLP(c));
    if (c->owns_mysql)
        c->mysql = NULL;
    c->connected = 0;
    c->wsrep_checked = 0;
    c->fu_count = 0;
    c->fu_name[0] = '\0';
}

static int set_tls(rowlock_client *c, MYSQL *m)
{
    my_bool yes = 1, no = 0;
    switch (c->tls_mode) {
    case ROWLOCK_TLS_DEFAULT:
        return 0;
    case ROWLOCK_TLS_DISABLED:
        /* Connector/C only starts TLS when asked; make sure nothing asks. */
        mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &no);
        return 0;
    case ROWLOCK_TLS_PREFERRED:
        mysql_ssl_set(m, NULL, NULL, c->tls_ca, NULL, NULL);
        return 0;
    case ROWLOCK_TLS_REQUIRED:
        mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &yes);
        mysql_optionsv(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &no);
        return 0;
    case ROWLOCK_TLS_VERIFY_CA:
    case ROWLOCK_TLS_VERIFY_IDENTITY:
        if (c->tls_ca == NULL)
            return rowlock__fail(c, ROWLOCK_EINVALID, "connect: TLS mode %s needs a CA file (tls_ca / --ssl-ca)",
                                 c->tls_mode == ROWLOCK_TLS_VERIFY_CA ? "VERIFY_CA" : "VERIFY_IDENTITY");
        mysql_ssl_set(m, NULL, NULL, c->tls_ca, NULL, NULL);
        mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &yes);
        mysql_optionsv(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &yes);
        return 0;
    }
    return rowlock__fail(c, ROWLOCK_EINVALID, "connect: unknown TLS mode %d", (int)c->tls_mode);
}

/* A new MYSQL handle with the client's options, connected to host/port
 * (NULL/0: the option files' or libmysqlclient's defaults). 0, or an error
 * captured in the client (*m is NULL then). */
static int open_one(rowlock_client *c, const char *host, unsigned int port, MYSQL **out)
{
    *out = NULL;
    MYSQL *m = mysql_init(NULL);
    if (m == NULL)
        return rowlock__fail(c, ROWLOCK_ENOMEM, "connect: out of memory");
    unsigned int ct = c->connect_timeout_ms ? (c->connect_timeout_ms + 999) / 1000 : 10;
    mysql_optionsv(m, MYSQL_OPT_CONNECT_TIMEOUT, &ct);
    if (c->read_timeout_ms) {
        unsigned int rt = (c->read_timeout_ms + 999) / 1000;
        mysql_optionsv(m, MYSQL_OPT_READ_TIMEOUT, &rt);
    }
    if (c->write_timeout_ms) {
        unsigned int wt = (c->write_timeout_ms + 999) / 1000;
        mysql_optionsv(m, MYSQL_OPT_WRITE_TIMEOUT, &wt);
    }
    if (c->defaults_file)
        mysql_optionsv(m, MYSQL_READ_DEFAULT_FILE, c->defaults_file);
    if (c->defaults_file || (c->flags & ROWLOCK_CLIENT_READ_DEFAULT_FILES))
        mysql_optionsv(m, MYSQL_READ_DEFAULT_GROUP, "rowlock");
    mysql_optionsv(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    int rc = set_tls(c, m);
    if (rc) {
        mysql_close(m);
        return rc;
    }
    /* No CLIENT_FOUND_ROWS: the strategies read "rows changed" counts. */
    if (!mysql_real_connect(m, host, c->user, c->password, c->database, port, c->unix_socket, 0)) {
        capture(c, "connect", mysql_errno(m), mysql_sqlstate(m), mysql_error(m));
        mysql_close(m);
        return ROWLOCK_EDB;
    }
    *out = m;
    return 0;
}

/* With several hosts, a Galera node that is not ready (left the primary
 * component, still joining) accepts connections but refuses every query
 * (1047): skip it. 1 ready (or not a Galera node), 0 not ready. */
static int node_ready(MYSQL *m)
{
    static const char q[] = "SELECT IFNULL((SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                            "WHERE VARIABLE_NAME = 'WSREP_READY'), 'ON')";
    if (mysql_real_query(m, q, (unsigned long)strlen(q)))
        return 0;
    MYSQL_RES *r = mysql_store_result(m);
    if (!r)
        return 0;
    MYSQL_ROW row = mysql_fetch_row(r);
    int ok = row && row[0] && strcmp(row[0], "ON") == 0;
    mysql_free_result(r);
    return ok;
}

/* Next entry of a comma-separated host list "h1[:port],[v6addr]:port,h3":
 * copies the host into buf, sets *port (0 if none); returns the rest of the
 * list, or NULL at its end. */
const char *rowlock__db_next_host(const char *list, char *buf, size_t cap, unsigned int *port)
{
    while (*list == ' ' || *list == ',')
        list++;
    if (*list == '\0')
        return NULL;
    size_t n = strcspn(list, ",");
    const char *rest = list + n;
    while (n > 0 && list[n - 1] == ' ')
        n--;
    const char *colon = NULL;
    const char *h = list;
    size_t hl = n;
    *port = 0;
    if (h[0] == '[') { /* [v6]:port or [v6] */
        const char *close = memchr(h, ']', n);
        if (close) {
            if (close + 1 < h + n && close[1] == ':')
                colon = close + 1;
            h++;
            hl = (size_t)(close - h);
        }
    } else {
        const char *c1 = memchr(h, ':', n);
        if (c1 && !memchr(c1 + 1, ':', (size_t)(h + n - c1 - 1))) /* one colon: host:port; more: bare v6 */
            colon = c1;
        if (colon)
            hl = (size_t)(colon - h);
    }
    if (colon) {
        unsigned long v = 0;
        const char *p = colon + 1;
        int digits = 0;
        while (p < list + n && *p >= '0' && *p <= '9' && v <= 65535) {
            v = v * 10 + (unsigned long)(*p++ - '0');
            digits++;
        }
        if (digits && p == list + n && v > 0 && v <= 65535)
            *port = (unsigned int)v;
        else
            hl = n, h = list; /* not a port: keep the entry whole (the server will say) */
    }
    if (hl >= cap)
        hl = cap - 1;
    memcpy(buf, h, hl);
    buf[hl] = '\0';
    return rest;
}

int rowlock__db_connect(rowlock_client *c)
{
    rowlock__db_close(c);
    c->mysql = NULL;
    c->owns_mysql = 1;
    MYSQL *m = NULL;
    int rc;
    if (c->host == NULL || strchr(c->host, ',') == NULL) {
        rc = open_one(c, c->host, c->port, &m);
    } else {
        /* Failover: the hosts in order, at every (re)connect; the first that
         * answers and, on Galera, is ready, wins. */
        char host[256], tried[ROWLOCK__ERRMSG_MAX / 2] = "";
        unsigned int port;
        const char *p = c->host;
        size_t tl = 0;
        rc = rowlock__fail(c, ROWLOCK_EINVALID, "connect: empty host list");
        while ((p = rowlock__db_next_host(p, host, sizeof host, &port)) != NULL) {
            rc = open_one(c, host, port ? port : c->port, &m);
            if (rc == 0 && node_ready(m))
                break;
            int not_ready = rc == 0;
            if (not_ready) {
                mysql_close(m);
                m = NULL;
                c->db_errno = ER_UNKNOWN_COM_ERROR;
                rowlock__strlcpy(c->sqlstate, "08S01", sizeof c->sqlstate);
                rc = rowlock__fail(c, ROWLOCK_EDB, "connect: Galera node not ready (wsrep_ready=OFF)");
            }
            if (rc == ROWLOCK_ENOMEM || rc == ROWLOCK_EINVALID)
                break;
            char why[32];
            if (not_ready)
                snprintf(why, sizeof why, "not ready");
            else
                snprintf(why, sizeof why, "error %u", c->db_errno);
            tl += (size_t)snprintf(tried + tl, tl < sizeof tried ? sizeof tried - tl : 0, "%s%s%s%.0u (%s)",
                                   tl ? ", " : "", host, port ? ":" : "", port, why);
            if (tl >= sizeof tried)
                tl = sizeof tried - 1;
        }
        if (rc == ROWLOCK_EDB) {
            char last[ROWLOCK__ERRMSG_MAX];
            rowlock__strlcpy(last, c->errmsg, sizeof last);
            rc = rowlock__fail(c, ROWLOCK_EDB, "connect: no host of the list answered (tried %s); last: %s", tried,
                               last);
        }
    }
    if (rc)
        return rc;
    c->mysql = m;
    c->connected = 1;
    return 0;
}

static int ensure_connected(rowlock_client *c, const char *what)
{
    if (c->connected)
        return 0;
    if (!c->owns_mysql)
        return rowlock__fail(c, ROWLOCK_EINVALID, "%s: client is not connected", what);
    /* Our own connection was lost earlier: a new session (any for-update
     * transaction died with the old one; lease locks live in rows). */
    int rc = rowlock__db_connect(c);
    if (rc)
        return rowlock__fail(c, rc, "%s: reconnect failed: %s", what, c->errmsg);
    return 0;
}

/* Expand {{table}} and {{wait}} (variant ms as seconds "S.mmm"). */
static char *expand(rowlock_client *c, const char *tmpl, long variant)
{
    size_t cap = strlen(tmpl) + 8 * (strlen(c->table) + 24) + 1;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t o = 0;
    for (const char *p = tmpl; *p;) {
        if (strncmp(p, "{{table}}", 9) == 0) {
            o += (size_t)snprintf(out + o, cap - o, "%s", c->table);
            p += 9;
        } else if (strncmp(p, "{{wait}}", 8) == 0) {
            o += (size_t)snprintf(out + o, cap - o, "%ld.%03ld", variant / 1000, variant % 1000);
            p += 8;
        } else if (strncmp(p, "{{waits}}", 9) == 0) {
            o += (size_t)snprintf(out + o, cap - o, "%ld", (variant + 999) / 1000);
            p += 9;
        } else {
            if (o + 1 >= cap)
                break;
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    return out;
}

static MYSQL_STMT *get_stmt(rowlock_client *c, const char *what, const char *tmpl, long variant, int *rc)
{
    rowlock__stmt *victim = &c->stmts[0];
    for (int i = 0; i < ROWLOCK__STMT_CACHE; i++) {
        rowlock__stmt *s = &c->stmts[i];
        if (s->stmt && s->tmpl == tmpl && s->variant == variant) {
            s->last_use = ++c->stmt_clock;
            return (MYSQL_STMT *)s->stmt;
        }
        if (!s->stmt || (victim->stmt && s->last_use < victim->last_use))
            victim = s;
    }
    if (victim->stmt)
        mysql_stmt_close((MYSQL_STMT *)victim->stmt);
    memset(victim, 0, sizeof *victim);

    MYSQL_STMT *st = mysql_stmt_init(MYSQLP(c));
    if (!st) {
        *rc = rowlock__fail(c, ROWLOCK_ENOMEM, "%s: out of memory", what);
        return NULL;
    }
    char *sql = expand(c, tmpl, variant);
    if (!sql) {
        mysql_stmt_close(st);
        *rc = rowlock__fail(c, ROWLOCK_ENOMEM, "%s: out of memory", what);
        return NULL;
    }
    if (mysql_stmt_prepare(st, sql, (unsigned long)strlen(sql))) {
        *rc = capture_stmt(c, what, st);
        mysql_stmt_close(st);
        free(sql);
        return NULL;
    }
    free(sql);
    victim->tmpl = tmpl;
    victim->variant = variant;
    victim->stmt = st;
    victim->last_use = ++c->stmt_clock;
    return st;
}

static void forget_stmt(rowlock_client *c, MYSQL_STMT *st)
{
    for (int i = 0; i < ROWLOCK__STMT_CACHE; i++) {
        if (c->stmts[i].stmt == st) {
            mysql_stmt_close(st);
            memset(&c->stmts[i], 0, sizeof c->stmts[i]);
            return;
        }
    }
}

#define MAX_BIND 12

int rowlock__db_exec(rowlock_client *c, const char *what, const char *tmpl, long variant,
                     const rowlock__param *params, unsigned nparams, rowlock__col *cols, unsigned ncols,
                     int (*row_fn)(void *arg), void *arg, rowlock__res *res)
{
    int rc = ensure_connected(c, what);
    if (rc)
        return rc;
    if (nparams > MAX_BIND || ncols > MAX_BIND)
        return rowlock__fail(c, ROWLOCK_EINVALID, "%s: internal error: too many columns", what);
    MYSQL_STMT *st = get_stmt(c, what, tmpl, variant, &rc);
    if (!st)
        return rc;

    MYSQL_BIND pb[MAX_BIND], cb[MAX_BIND];
    unsigned long plen[MAX_BIND];
    my_bool pnull[MAX_BIND];
    memset(pb, 0, sizeof pb);
    for (unsigned i = 0; i < nparams; i++) {
        const rowlock__param *p = &params[i];
        pnull[i] = 0;
        pb[i].is_null = &pnull[i];
        switch (p->type) {
        case ROWLOCK__T_STR:
            pb[i].buffer_type = MYSQL_TYPE_STRING;
            pb[i].buffer = (void *)p->s;
            plen[i] = p->len;
            pb[i].buffer_length = p->len;
            pb[i].length = &plen[i];
            break;
        case ROWLOCK__T_U64:
            pb[i].buffer_type = MYSQL_TYPE_LONGLONG;
            pb[i].buffer = (void *)&p->u;
            pb[i].is_unsigned = 1;
            break;
        case ROWLOCK__T_I64:
            pb[i].buffer_type = MYSQL_TYPE_LONGLONG;
            pb[i].buffer = (void *)&p->i;
            break;
        default:
            pb[i].buffer_type = MYSQL_TYPE_DOUBLE;
            pb[i].buffer = (void *)&p->d;
            break;
        }
    }
    if (nparams && mysql_stmt_bind_param(st, pb))
        return capture_stmt(c, what, st);

    if (mysql_stmt_execute(st)) {
        rc = capture_stmt(c, what, st);
        if (!c->connected || rc == ROWLOCK_ESCHEMA)
            forget_stmt(c, st); /* prepared again after a reconnect / migrate */
        return rc;
    }

    if (res) {
        res->affected = (uint64_t)mysql_stmt_affected_rows(st);
        res->insert_id = (uint64_t)mysql_stmt_insert_id(st);
        res->rows = 0;
    }
    if (mysql_stmt_field_count(st) == 0)
        return 0;

    memset(cb, 0, sizeof cb);
    my_bool cnull[MAX_BIND], cerr[MAX_BIND];
    for (unsigned i = 0; i < ncols; i++) {
        rowlock__col *col = &cols[i];
        cb[i].is_null = &cnull[i];
        cb[i].error = &cerr[i];
        cb[i].length = &col->len;
        switch (col->type) {
        case ROWLOCK__T_STR:
            cb[i].buffer_type = MYSQL_TYPE_STRING;
            cb[i].buffer = col->buf;
            cb[i].buffer_length = col->cap ? col->cap - 1 : 0;
            break;
        case ROWLOCK__T_U64:
            cb[i].buffer_type = MYSQL_TYPE_LONGLONG;
            cb[i].buffer = &col->u;
            cb[i].is_unsigned = 1;
            break;
        default:
            cb[i].buffer_type = MYSQL_TYPE_LONGLONG;
            cb[i].buffer = &col->i;
            break;
        }
    }
    if (ncols && mysql_stmt_bind_result(st, cb)) {
        rc = capture_stmt(c, what, st);
        mysql_stmt_free_result(st);
        return rc;
    }
    uint64_t nrows = 0;
    int stop = 0;
    for (;;) {
        int f = mysql_stmt_fetch(st);
        if (f == MYSQL_NO_DATA)
            break;
        if (f == 1) {
            rc = capture_stmt(c, what, st);
            mysql_stmt_free_result(st);
            forget_stmt(c, st); /* its result ended in an error: prepare it afresh */
            return rc;
        }
        if (stop || (nrows > 0 && row_fn == NULL))
            continue; /* drain: keep the first row / stop after fn asked */
        for (unsigned i = 0; i < ncols; i++) {
            cols[i].is_null = (char)cnull[i];
            cols[i].truncated = (char)(f == MYSQL_DATA_TRUNCATED && cerr[i]);
            if (cols[i].type == ROWLOCK__T_STR && cols[i].cap) {
                unsigned long n = cnull[i] ? 0 : cols[i].len;
                if (n > cols[i].cap - 1)
                    n = cols[i].cap - 1;
                cols[i].buf[n] = '\0';
            }
        }
        nrows++;
        if (row_fn) {
            int r = row_fn(arg);
            if (r) {
                rc = r;
                stop = 1;
            }
        }
    }
    mysql_stmt_free_result(st);
    if (res)
        res->rows = nrows;
    return rc;
}

int rowlock__db_simple(rowlock_client *c, const char *what, const char *sql)
{
    int rc = ensure_connected(c, what);
    if (rc)
        return rc;
    char *text = expand(c, sql, 0);
    if (!text)
        return rowlock__fail(c, ROWLOCK_ENOMEM, "%s: out of memory", what);
    int failed = mysql_real_query(MYSQLP(c), text, (unsigned long)strlen(text)) != 0;
    free(text);
    if (failed)
        return capture_mysql(c, what);
    /* Discard any result (e.g. DO/SET produce none; SELECT would). */
    MYSQL_RES *r = mysql_store_result(MYSQLP(c));
    if (r)
        mysql_free_result(r);
    return 0;
}

int rowlock__db_in_transaction(rowlock_client *c)
{
    if (!c->mysql || !c->connected)
        return 0;
    unsigned int status = 0;
    if (mariadb_get_infov(MYSQLP(c), MARIADB_CONNECTION_SERVER_STATUS, &status))
        return 0;
    return (status & SERVER_STATUS_IN_TRANS) != 0;
}

int rowlock__db_found_rows_flag(rowlock_client *c)
{
    unsigned long flags = 0;
    if (!c->mysql || mariadb_get_infov(MYSQLP(c), MARIADB_CONNECTION_CLIENT_CAPABILITIES, &flags))
        return 0;
    return (flags & CLIENT_FOUND_ROWS) != 0;
}

const char *rowlock__db_server_info(rowlock_client *c)
{
    if (!c->mysql || !c->connected)
        return "";
    const char *s = mysql_get_server_info(MYSQLP(c));
    return s ? s : "";
}

unsigned long rowlock__db_thread_id(rowlock_client *c)
{
    return c->mysql ? mysql_thread_id(MYSQLP(c)) : 0;
}

ROWLOCK_EXTERN int rowlock_library_init(void)
{
    return mysql_library_init(0, NULL, NULL) == 0 ? 0 : ROWLOCK_EDB;
}

ROWLOCK_EXTERN void rowlock_library_end(void)
{
    mysql_library_end();
}
