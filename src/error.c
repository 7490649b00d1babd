/*
 * The error table (ROWLOCK_ERRNO_MAP in rowlock.h, which also makes the
 * enum): one row per code gives its symbolic name and sentence, so
 * rowlock_strerror() and rowlock_error_name() can never disagree. Also the
 * one function that knows what MySQL error numbers mean to a lock.
 */
#include "rowlock_int.h"

#include <stdio.h>
#include <string.h>

#include <errmsg.h>
#include <mysqld_error.h>

ROWLOCK_EXTERN const char *rowlock_strerror(int code)
{
    switch (code) {
#define X(c, value, msg) case c: return msg;
        ROWLOCK_ERRNO_MAP(X)
#undef X
    }
    return "unknown error";
}

ROWLOCK_EXTERN const char *rowlock_error_name(int code)
{
    switch (code) {
#define X(c, value, msg) case c: return #c;
        ROWLOCK_ERRNO_MAP(X)
#undef X
    }
    return "ROWLOCK_EUNKNOWN";
}

/*
 * THE table: what each MySQL error number means to a lock, and, for the
 * transient ones (a server state that ends by itself within seconds on a
 * healthy deployment), what a waiter waits for. Everything else decides
 * from here: rowlock__db_capture() (db_stmt.c) maps the class to a return code; a waiting
 * acquire (lock.c) and the CLI's wait loops retry every row with a
 * `waits_for` until their deadline; the lease keeper retries renewals on
 * any failure but "not the owner" until the safe time runs out. An error
 * number not in the table is permanent (ROWLOCK__DB_OTHER: access denied,
 * bad syntax, ...), as are the SCHEMA rows: those fail at once.
 */
static const struct db_error_row {
    unsigned int e;
    rowlock__dbclass cls;
    const char *waits_for; /* NULL: permanent */
} db_errors[] = {
    /* Busy: the statement was rolled back; the row is someone else's now. */
    { ER_LOCK_WAIT_TIMEOUT, ROWLOCK__DB_BUSY, "a row lock (lock wait timeout, 1205)" },
    { ER_LOCK_DEADLOCK, ROWLOCK__DB_BUSY, "a row lock (deadlock or Galera conflict, 1213)" },
    { ER_STATEMENT_TIMEOUT, ROWLOCK__DB_BUSY, "a row lock (max_statement_time, 1969)" },
    { ER_QUERY_INTERRUPTED, ROWLOCK__DB_BUSY, "the server (statement interrupted, 1317)" },
    /* Galera: a conflict detected at commit; rolled back: busy, retry. */
    { ER_ERROR_DURING_COMMIT, ROWLOCK__DB_BUSY, "a row lock (Galera commit conflict, 1180)" },
    /* Schema: permanent until someone runs `rowlock migrate`. */
    { ER_NO_SUCH_TABLE, ROWLOCK__DB_SCHEMA, NULL },
    { ER_BAD_FIELD_ERROR, ROWLOCK__DB_SCHEMA, NULL },
    { ER_BAD_DB_ERROR, ROWLOCK__DB_SCHEMA, NULL },
    { ER_UNKNOWN_SEQUENCES, ROWLOCK__DB_SCHEMA, NULL },
    { ER_NOT_SEQUENCE, ROWLOCK__DB_SCHEMA, NULL },
    /* The connection is gone or could not be made: reconnect. */
    { CR_CONNECTION_ERROR, ROWLOCK__DB_CONN, "the server to accept connections (connect failed, 2002)" },
    { CR_CONN_HOST_ERROR, ROWLOCK__DB_CONN, "the server to accept connections (connect refused, 2003)" },
    { CR_UNKNOWN_HOST, ROWLOCK__DB_CONN, "the server's host name to resolve (2005)" },
    { CR_SERVER_GONE_ERROR, ROWLOCK__DB_CONN, "the server to come back (server has gone away, 2006)" },
    { CR_SERVER_LOST, ROWLOCK__DB_CONN, "the server to come back (connection lost, 2013)" },
    { CR_COMMANDS_OUT_OF_SYNC, ROWLOCK__DB_CONN, "a new connection (2014)" },
    { CR_SERVER_LOST_EXTENDED, ROWLOCK__DB_CONN, "the server to come back (connection lost, 2055)" },
    { ER_CONNECTION_KILLED, ROWLOCK__DB_CONN, "a new connection (session killed, 1927)" },
    { ER_SERVER_SHUTDOWN, ROWLOCK__DB_CONN, "the server to restart (server shutting down, 1053)" },
    { ER_NEW_ABORTING_CONNECTION, ROWLOCK__DB_CONN, "a new connection (connection aborted, 1184)" },
    { ER_CON_COUNT_ERROR, ROWLOCK__DB_CONN, "a free connection slot (max_connections reached, 1040)" },
    { ER_TOO_MANY_USER_CONNECTIONS, ROWLOCK__DB_CONN,
      "a free connection slot (max_user_connections reached, 1203)" },
    /* Galera: "WSREP has not yet prepared node for application use": the
     * node left the primary component or is not synced. This node cannot
     * serve us; reconnect (to the next host, if several are given). */
    { ER_UNKNOWN_COM_ERROR, ROWLOCK__DB_CONN, "the Galera node to be ready (WSREP not prepared, 1047)" },
    /* The server refuses writes for now (SET GLOBAL read_only=ON, what a
     * switchover does): the session is fine, the statement did nothing. */
    { ER_OPTION_PREVENTS_STATEMENT, ROWLOCK__DB_REFUSED, "the server to leave read-only mode (1290)" },
    { ER_DUP_ENTRY, ROWLOCK__DB_DUP, NULL },
};

static const struct db_error_row *db_error_row(unsigned int e)
{
    for (size_t i = 0; i < sizeof db_errors / sizeof db_errors[0]; i++)
        if (db_errors[i].e == e)
            return &db_errors[i];
    return NULL;
}

rowlock__dbclass rowlock__db_classify(unsigned int e)
{
    const struct db_error_row *r = db_error_row(e);
    return r ? r->cls : ROWLOCK__DB_OTHER;
}

const char *rowlock__db_transient(unsigned int e)
{
    const struct db_error_row *r = e ? db_error_row(e) : NULL;
    return r ? r->waits_for : NULL;
}

/* ---- the client's last error ----------------------------------------------- */

int rowlock__fail(rowlock_client *c, int code, const char *fmt, ...)
{
    if (c == NULL)
        return code;
    /* Format aside first: callers may pass c->errmsg itself as an argument. */
    char tmp[ROWLOCK__ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    /* One line, always. */
    for (char *p = tmp; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    memcpy(c->errmsg, tmp, sizeof tmp);
    return code;
}

void rowlock__clear_error(rowlock_client *c)
{
    c->errmsg[0] = '\0';
    c->db_errno = 0;
    memcpy(c->sqlstate, "00000", 6);
}

void rowlock__error_save(const rowlock_client *c, rowlock__errsave *s)
{
    memcpy(s->msg, c->errmsg, sizeof s->msg);
    s->db_errno = c->db_errno;
    memcpy(s->sqlstate, c->sqlstate, sizeof s->sqlstate);
}

void rowlock__error_restore(rowlock_client *c, const rowlock__errsave *s)
{
    memcpy(c->errmsg, s->msg, sizeof s->msg);
    c->db_errno = s->db_errno;
    memcpy(c->sqlstate, s->sqlstate, sizeof s->sqlstate);
}
