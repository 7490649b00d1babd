/*
 * The error table: one row per code gives its symbolic name and sentence, so
 * rowlock_strerror() and rowlock_error_name() can never disagree. Also the
 * one function that knows what MySQL error numbers mean to a lock.
 */
#include "rowlock_int.h"

#include <errmsg.h>
#include <mysqld_error.h>

#define ROWLOCK_ERRNO_MAP(X)                                                            \
    X(ROWLOCK_OK, "success")                                                            \
    X(ROWLOCK_EBUSY, "lock is held by another owner")                                   \
    X(ROWLOCK_ENOTOWNER, "lock is no longer held by this owner")                        \
    X(ROWLOCK_EINVALID, "invalid argument")                                             \
    X(ROWLOCK_EDB, "database error")                                                    \
    X(ROWLOCK_ESCHEMA, "lock table schema is missing or outdated")                      \
    X(ROWLOCK_EUNSUPPORTED, "not supported by this strategy or server")                 \
    X(ROWLOCK_ENOMEM, "out of memory")

ROWLOCK_EXTERN const char *rowlock_strerror(int code)
{
    switch (code) {
#define X(c, msg) case c: return msg;
        ROWLOCK_ERRNO_MAP(X)
#undef X
    }
    return "unknown error";
}

ROWLOCK_EXTERN const char *rowlock_error_name(int code)
{
    switch (code) {
#define X(c, msg) case c: return #c;
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
