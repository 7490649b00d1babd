/*
 * error.c: the code table behind rowlock_strerror()/rowlock_error_name(),
 * the one function that classifies MySQL error numbers, and the client's
 * last error (set, clear, keep aside while a helper statement runs). Called
 * by every module that fails a call; it calls nothing above util.c.
 */
#ifndef ROWLOCK_ERROR_H
#define ROWLOCK_ERROR_H

#include "rowlock.h"

struct rowlock_client;

/* How a MySQL error number should be treated. The one place that knows. */
typedef enum rowlock__dbclass {
    ROWLOCK__DB_OTHER = 0,
    ROWLOCK__DB_BUSY,      /* lock wait timeout, deadlock, statement timeout: held by someone */
    ROWLOCK__DB_SCHEMA,    /* table/sequence/column missing */
    ROWLOCK__DB_CONN,      /* connection lost or refused: the session (and its locks) is gone */
    ROWLOCK__DB_DUP,       /* duplicate key */
    ROWLOCK__DB_REFUSED    /* the server refuses the statement for now (read-only); the session is fine */
} rowlock__dbclass;
rowlock__dbclass rowlock__db_classify(unsigned int mysql_errno);
/* What a waiter waits for when `mysql_errno` is transient (a server state
 * that ends by itself: read-only, connection limit, restart, Galera node
 * not ready, lock wait timeout, deadlock); NULL when it is permanent. */
const char *rowlock__db_transient(unsigned int mysql_errno);

/* Set the client's message (printf-style); returns `code`. */
int rowlock__fail(struct rowlock_client *c, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void rowlock__clear_error(struct rowlock_client *c);
/* The client's whole error state (message, errno, SQLSTATE), kept aside
 * while a helper statement runs whose failure must not replace the error
 * of the operation it is part of. */
#define ROWLOCK__ERRMSG_MAX 512
typedef struct rowlock__errsave {
    char msg[ROWLOCK__ERRMSG_MAX];
    unsigned int db_errno;
    char sqlstate[6];
} rowlock__errsave;
void rowlock__error_save(const struct rowlock_client *c, rowlock__errsave *s);
void rowlock__error_restore(struct rowlock_client *c, const rowlock__errsave *s);

#endif /* ROWLOCK_ERROR_H */
