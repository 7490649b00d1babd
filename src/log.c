/*
 * The logging hook (include/rowlock.h, "Events"): registration, the names of
 * levels and kinds, and rowlock__log_emit(), the one place that builds an
 * event. Call sites go through ROWLOCK__LOG_LOCK / ROWLOCK__LOG_CLIENT
 * (rowlock_int.h), which test the level before evaluating any argument, so
 * a client without a hook pays a relaxed load and a compare per event.
 */
#include "rowlock_int.h"

#include <stdio.h>
#include <string.h>

ROWLOCK_EXTERN const char *rowlock_log_level_name(int level)
{
    switch (level) {
#define X(name, value, str) \
    case value:             \
        return str;
        ROWLOCK_LOG_LEVEL_MAP(X)
#undef X
    }
    return "unknown";
}

ROWLOCK_EXTERN const char *rowlock_event_kind_name(int kind)
{
    switch (kind) {
#define X(name, value, str) \
    case value:             \
        return str;
        ROWLOCK_EVENT_KIND_MAP(X)
#undef X
    }
    return "unknown";
}

void rowlock__log_init(rowlock__logsink *s)
{
    pthread_rwlock_init(&s->rw, NULL);
    s->fn = NULL;
    s->arg = NULL;
    __atomic_store_n(&s->min_level, ROWLOCK__LOG_OFF, __ATOMIC_RELAXED);
}

void rowlock__log_destroy(rowlock__logsink *s)
{
    pthread_rwlock_destroy(&s->rw);
}

ROWLOCK_EXTERN int rowlock_client_set_log(rowlock_client *c, int min_level, rowlock_log_fn fn, void *arg)
{
    if (c == NULL)
        return ROWLOCK_EINVALID;
    if (fn != NULL && (min_level < ROWLOCK_LOG_DEBUG || min_level > ROWLOCK_LOG_ERROR))
        return rowlock__fail(c, ROWLOCK_EINVALID, "set_log: min_level %d is not a level (%d debug .. %d error)",
                             min_level, ROWLOCK_LOG_DEBUG, ROWLOCK_LOG_ERROR);
    rowlock__logsink *s = &c->log_own;
    /* The write lock waits for calls of the previous hook to return. */
    pthread_rwlock_wrlock(&s->rw);
    s->fn = fn;
    s->arg = arg;
    __atomic_store_n(&s->min_level, fn ? min_level : ROWLOCK__LOG_OFF, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&s->rw);
    return 0;
}

void rowlock__log_emit(rowlock__logsink *s, int level, rowlock_event_kind kind, const char *name,
                       rowlock_strategy strategy, uint64_t token, rowlock__evx x, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        msg[0] = '\0';
    /* One line whatever a server message held (user data is escaped at
     * its source; this only guards the line). */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    rowlock_event ev;
    memset(&ev, 0, sizeof ev);
    ev.version = ROWLOCK_EVENT_VERSION;
    ev.level = (rowlock_log_level)level;
    ev.kind = kind;
    ev.lock_name = name ? name : "";
    ev.strategy = strategy;
    ev.token = token;
    ev.waited_us = x.waited_us;
    ev.elapsed_us = x.elapsed_us;
    ev.attempt = x.attempt;
    ev.code = x.code;
    ev.db_errno = x.db_errno;
    ev.keep_state = x.keep_state;
    ev.message = msg;
    pthread_rwlock_rdlock(&s->rw);
    /* Checked again under the lock: the hook may have gone meanwhile. */
    if (s->fn != NULL && level >= s->min_level)
        s->fn(&ev, s->arg);
    pthread_rwlock_unlock(&s->rw);
}
