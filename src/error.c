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

rowlock__dbclass rowlock__db_classify(unsigned int e)
{
    switch (e) {
    case ER_LOCK_WAIT_TIMEOUT:   /* 1205: row lock wait ran out (also NOWAIT) */
    case ER_LOCK_DEADLOCK:       /* 1213: two waiters' inserts on a just-freed key */
    case ER_STATEMENT_TIMEOUT:   /* 1969: max_statement_time bounded a server-side wait */
    case ER_QUERY_INTERRUPTED:   /* 1317 */
    /* Galera: a certification failure or a brute-force abort by a replicated
     * write set arrives as 1213 (above); a conflict detected at commit can
     * also come as 1180. Both rolled the statement back: busy, retry. */
    case ER_ERROR_DURING_COMMIT: /* 1180 */
        return ROWLOCK__DB_BUSY;
    case ER_NO_SUCH_TABLE:       /* 1146 */
    case ER_BAD_FIELD_ERROR:     /* 1054 */
    case ER_BAD_DB_ERROR:        /* 1049 */
    case ER_UNKNOWN_SEQUENCES:   /* 4091 */
    case ER_NOT_SEQUENCE:        /* 4089 */
        return ROWLOCK__DB_SCHEMA;
    case CR_CONNECTION_ERROR:    /* 2002 */
    case CR_CONN_HOST_ERROR:     /* 2003 */
    case CR_UNKNOWN_HOST:        /* 2005 */
    case CR_SERVER_GONE_ERROR:   /* 2006 */
    case CR_SERVER_LOST:         /* 2013 */
    case CR_COMMANDS_OUT_OF_SYNC:/* 2014: the connection is unusable */
    case CR_SERVER_LOST_EXTENDED:/* 2055 */
    case ER_CONNECTION_KILLED:   /* 1927 */
    case ER_SERVER_SHUTDOWN:     /* 1053 */
    case ER_NEW_ABORTING_CONNECTION: /* 1184 */
    /* Galera: "WSREP has not yet prepared node for application use": the
     * node left the primary component or is not synced. This node cannot
     * serve us; reconnect (to the next host, if several are given). */
    case ER_UNKNOWN_COM_ERROR:   /* 1047 */
        return ROWLOCK__DB_CONN;
    case ER_DUP_ENTRY:           /* 1062 */
        return ROWLOCK__DB_DUP;
    default:
        return ROWLOCK__DB_OTHER;
    }
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
