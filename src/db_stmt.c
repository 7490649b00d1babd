/*
 * Statements: SQL templates ({{table}}, {{wait}}, {{waits}}), the
 * per-client cache of prepared statements, parameter binding and result
 * fetch, the text-protocol path for fixed SQL, and reading a statement's
 * error (recorded by db_connect.c's rowlock__db_capture). Everything
 * that reaches the server goes through rowlock__db_run() (prepared
 * statements, cached per client) or rowlock__db_simple() (fixed SQL without
 * user data), so these are the one seam for tests, tracing and fault
 * injection (fault.c).
 *
 * Errors: every failure is captured into the client (errno, SQLSTATE, one
 * line) and translated by rowlock__db_classify() (error.c): busy → EBUSY,
 * missing table/sequence → ESCHEMA, anything else → EDB.
 */
#include "rowlock_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>

#include <errmsg.h>
#include <mysql.h>

#define MYSQLP(c) ((MYSQL *)(c)->mysql)

#ifdef MARIADB_PACKAGE_VERSION_ID
/*
 * A statement that waits in the server (s->wait_s: a queue slice, GET_LOCK
 * or SLEEP) on a connection opened non-blocking runs through Connector/C's
 * non-blocking calls, and this poll decides when a read has waited too
 * long: the read timeout counted from the end of the server-side wait. A
 * blocking call counts the read timeout from the request, so a slice could
 * not be longer than it (`rowlock run` has a read timeout of half its
 * lease: 14 s slices, twice the statements of the library's 30 s ones).
 * The events for the _cont call. At the deadline the socket is shut down
 * and the call told of a timeout as well: over TLS, Connector/C's read
 * does not look at MYSQL_WAIT_TIMEOUT (it reads again, and would wait one
 * more read timeout per turn for ever against a server that stopped
 * answering; found by review), while a read from a shut socket fails on
 * every path: the statement ends with "lost connection" as a timed-out
 * blocking read does, and the next statement reconnects. An interrupt
 * (rowlock_client_interrupt shuts the socket down) makes it readable.
 */
static int await_io(MYSQL *m, int status, int64_t deadline)
{
    for (;;) {
        const int64_t left = deadline - rowlock__now_us();
        if (left <= 0) {
            (void)shutdown((int)mysql_get_socket(m), SHUT_RDWR);
            return MYSQL_WAIT_TIMEOUT | (status & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE | MYSQL_WAIT_EXCEPT));
        }
        struct pollfd p = { .fd = (int)mysql_get_socket(m), .events = 0, .revents = 0 };
        if (status & MYSQL_WAIT_READ)
            p.events |= POLLIN;
        if (status & MYSQL_WAIT_WRITE)
            p.events |= POLLOUT;
        if (status & MYSQL_WAIT_EXCEPT)
            p.events |= POLLPRI;
        const int ms = left / 1000 + 1 > INT_MAX ? INT_MAX : (int)(left / 1000 + 1);
        const int r = poll(&p, 1, ms);
        if (r < 0 && errno != EINTR)
            deadline = 0; /* poll itself failed: end the statement (above) */
        if (r <= 0)
            continue;
        if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
            return status & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE | MYSQL_WAIT_EXCEPT); /* the call sees the end */
        int ev = 0;
        if (p.revents & POLLIN)
            ev |= MYSQL_WAIT_READ;
        if (p.revents & POLLOUT)
            ev |= MYSQL_WAIT_WRITE;
        if (p.revents & POLLPRI)
            ev |= MYSQL_WAIT_EXCEPT;
        if (ev)
            return ev;
    }
}

/* mysql_stmt_execute, and the whole result read into the client (the
 * server's wait may come before the metadata or before the first row),
 * within wait_s plus the read timeout. 0, or non-zero as
 * mysql_stmt_execute (the error is on the statement or the connection). */
static int execute_waiting(rowlock_client *c, MYSQL_STMT *st, double wait_s)
{
    MYSQL *m = MYSQLP(c);
    const int64_t deadline = rowlock__now_us() + (int64_t)(wait_s * 1e6) + (int64_t)c->read_timeout_ms * 1000;
    int err = 0;
    int status = mysql_stmt_execute_start(&err, st);
    while (status)
        status = mysql_stmt_execute_cont(&err, st, await_io(m, status, deadline));
    if (err || mysql_stmt_field_count(st) == 0)
        return err;
    status = mysql_stmt_store_result_start(&err, st);
    while (status)
        status = mysql_stmt_store_result_cont(&err, st, await_io(m, status, deadline));
    return err;
}
#endif

/* The statement's execution: blocking, or, for one that waits in the
 * server longer than the read timeout allows, through execute_waiting. */
static int execute(rowlock_client *c, MYSQL_STMT *st, const rowlock__stmt *s)
{
#ifdef MARIADB_PACKAGE_VERSION_ID
    if (s->wait_s > 0 && c->nonblock && c->read_timeout_ms > 0)
        return execute_waiting(c, st, s->wait_s);
#endif
    return mysql_stmt_execute(st);
}

/* A statement's error; libmariadb keeps an error that arrives while a result
 * is fetched (e.g. Galera aborting a reader: 1213) on the connection, not on
 * the statement, so that one is read when the statement has none. */
static int capture_stmt(rowlock_client *c, const char *what, MYSQL_STMT *st)
{
    if (mysql_stmt_errno(st) == 0 && mysql_errno(MYSQLP(c)) != 0)
        return rowlock__db_capture_conn(c, what);
    if (mysql_stmt_errno(st) == 0)
        return rowlock__db_capture(c, what, CR_UNKNOWN_ERROR, "HY000", "unknown client error (no error number reported)");
    return rowlock__db_capture(c, what, mysql_stmt_errno(st), mysql_stmt_sqlstate(st), mysql_stmt_error(st));
}

/* Expand {{table}}, {{wait}} (variant ms as seconds "S.mmm"), {{waits}} and
 * {{number}} (variant as it is: epoch.c's SETVAL, which takes no `?`). */
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
        } else if (strncmp(p, "{{number}}", 10) == 0) {
            o += (size_t)snprintf(out + o, cap - o, "%ld", variant);
            p += 10;
        } else if (strncmp(p, "{{waits}}", 9) == 0) {
            o += (size_t)snprintf(out + o, cap - o, "%ld", variant / 1000 + (variant % 1000 != 0));
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
    rowlock__stmt_slot *victim = &c->stmts[0];
    for (int i = 0; i < ROWLOCK__STMT_CACHE; i++) {
        rowlock__stmt_slot *s = &c->stmts[i];
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

#define MAX_BIND 24

/* Bind n parameters (pb, plen and pnull have room for MAX_BIND). */
static void bind_params(MYSQL_BIND *pb, unsigned long *plen, my_bool *pnull, const rowlock__param *params,
                        unsigned nparams)
{
    memset(pb, 0, sizeof *pb * MAX_BIND);
    for (unsigned i = 0; i < nparams; i++) {
        const rowlock__param *p = &params[i];
        pnull[i] = p->type == ROWLOCK__T_STR && p->s == NULL; /* a string NULL is SQL NULL */
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
}

static int exec_locked(rowlock_client *c, const rowlock__stmt *s);

int rowlock__db_run(rowlock_client *c, const rowlock__stmt *s)
{
    rowlock__db_enter(c);
    int rc = exec_locked(c, s);
    rowlock__db_leave(c);
    return rc;
}

int rowlock__db_run_quiet(rowlock_client *c, const rowlock__stmt *s)
{
    rowlock__errsave keep;
    rowlock__error_save(c, &keep);
    int rc = rowlock__db_run(c, s);
    rowlock__error_restore(c, &keep);
    return rc;
}

int rowlock__db_simple_quiet(rowlock_client *c, const char *what, const char *sql)
{
    rowlock__errsave keep;
    rowlock__error_save(c, &keep);
    int rc = rowlock__db_simple(c, what, sql);
    rowlock__error_restore(c, &keep);
    return rc;
}

void rowlock__db_rollback(rowlock_client *c, const char *what, const char *sql)
{
    (void)rowlock__db_simple_quiet(c, what, sql);
}

static int exec_locked(rowlock_client *c, const rowlock__stmt *s)
{
    const char *what = s->what, *tmpl = s->tmpl;
    long variant = s->variant;
    const rowlock__param *params = s->params;
    unsigned nparams = s->nparams, ncols = s->ncols;
    rowlock__col *cols = s->cols;
    int (*row_fn)(void *arg) = s->row_fn;
    void *arg = s->arg;
    rowlock__res *res = s->res;
    int rc = rowlock__db_ensure(c, what);
    if (rc)
        return rc;
    if (nparams > MAX_BIND || ncols > MAX_BIND)
        return rowlock__fail(c, ROWLOCK_EINVALID, "%s: internal error: too many parameters or columns", what);
    MYSQL_STMT *st = get_stmt(c, what, tmpl, variant, &rc);
    if (!st)
        return rc;
    if (mysql_stmt_param_count(st) != nparams)
        return rowlock__fail(c, ROWLOCK_EDB, "%s: internal error: the statement takes %lu parameters, %u given", what,
                             (unsigned long)mysql_stmt_param_count(st), nparams);

    MYSQL_BIND pb[MAX_BIND], cb[MAX_BIND];
    unsigned long plen[MAX_BIND];
    my_bool pnull[MAX_BIND];
    bind_params(pb, plen, pnull, params, nparams);
    if (nparams && mysql_stmt_bind_param(st, pb))
        return capture_stmt(c, what, st);

    int drop_after = 0;
    if ((rc = rowlock__fault_before(c, what, tmpl, &drop_after)) != 0 || execute(c, st, s) ||
        ((drop_after == 1 || drop_after == 3) && (rc = rowlock__fault_after(c, what, drop_after)) != 0)) {
        if (rc == 0)
            rc = capture_stmt(c, what, st);
        if (!c->connected || rc == ROWLOCK_ESCHEMA)
            forget_stmt(c, st); /* prepared again after a reconnect / migrate */
        return rc;
    }

    if (res) {
        res->affected = (uint64_t)mysql_stmt_affected_rows(st);
        res->insert_id = drop_after == 2 ? 0 : (uint64_t)mysql_stmt_insert_id(st);
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

static int simple_locked(rowlock_client *c, const char *what, const char *sql);

int rowlock__db_simple(rowlock_client *c, const char *what, const char *sql)
{
    rowlock__db_enter(c);
    int rc = simple_locked(c, what, sql);
    rowlock__db_leave(c);
    return rc;
}

static int simple_locked(rowlock_client *c, const char *what, const char *sql)
{
    int rc = rowlock__db_ensure(c, what);
    if (rc)
        return rc;
    char *text = expand(c, sql, 0);
    if (!text)
        return rowlock__fail(c, ROWLOCK_ENOMEM, "%s: out of memory", what);
    int drop_after = 0;
    if ((rc = rowlock__fault_before(c, what, text, &drop_after)) != 0) {
        free(text);
        return rc;
    }
    int failed = mysql_real_query(MYSQLP(c), text, (unsigned long)strlen(text)) != 0;
    free(text);
    if (failed)
        return rowlock__db_capture_conn(c, what);
    if (drop_after == 1 || drop_after == 3)
        return rowlock__fault_after(c, what, drop_after);
    /* Discard any result (e.g. DO/SET produce none; SELECT would). */
    MYSQL_RES *r = mysql_store_result(MYSQLP(c));
    if (r)
        mysql_free_result(r);
    return 0;
}

int rowlock__db_run_on(rowlock_client *c, void *mysql, const rowlock__stmt *s)
{
    const char *what = s->what;
    MYSQL *m = mysql;
    if (s->nparams > MAX_BIND)
        return rowlock__fail(c, ROWLOCK_EINVALID, "%s: internal error: too many parameters", what);
    char *text = expand(c, s->tmpl, s->variant);
    if (!text)
        return rowlock__fail(c, ROWLOCK_ENOMEM, "%s: out of memory", what);
    int drop_after = 0, rc = rowlock__fault_before(c, what, s->tmpl, &drop_after);
    if (rc) {
        free(text);
        return rc;
    }
    MYSQL_STMT *st = mysql_stmt_init(m);
    if (!st) {
        free(text);
        return rowlock__db_capture_other(c, what, mysql_errno(m), mysql_sqlstate(m), mysql_error(m));
    }
    MYSQL_BIND pb[MAX_BIND];
    unsigned long plen[MAX_BIND];
    my_bool pnull[MAX_BIND];
    unsigned int n = s->nparams;
    bind_params(pb, plen, pnull, s->params, n);
    /* execute_direct: the parameters are bound before the statement is
     * known (STMT_ATTR_PREBIND_PARAMS), prepare and execute go in one packet. */
    if (mysql_stmt_attr_set(st, STMT_ATTR_PREBIND_PARAMS, &n) || (n && mysql_stmt_bind_param(st, pb)) ||
        mariadb_stmt_execute_direct(st, text, strlen(text))) {
        if (mysql_stmt_errno(st))
            rc = rowlock__db_capture_other(c, what, mysql_stmt_errno(st), mysql_stmt_sqlstate(st),
                                           mysql_stmt_error(st));
        else
            rc = rowlock__db_capture_other(c, what, mysql_errno(m), mysql_sqlstate(m), mysql_error(m));
    } else if (s->res) {
        s->res->affected = (uint64_t)mysql_stmt_affected_rows(st);
        s->res->insert_id = (uint64_t)mysql_stmt_insert_id(st);
        s->res->rows = 0;
    }
    mysql_stmt_close(st);
    free(text);
    (void)drop_after; /* the seam's "lose the reply" needs the client's own connection */
    return rc;
}
