/*
 * log.c: the logging hook (rowlock_client_set_log), level and kind names,
 * and the one function that builds and delivers an event. Every module
 * reports through the ROWLOCK__LOG_LOCK / ROWLOCK__LOG_CLIENT macros, which
 * test the level first, so an event without a hook costs a load and a
 * compare.
 */
#ifndef ROWLOCK_LOG_H
#define ROWLOCK_LOG_H

#include <pthread.h>
#include <stdint.h>

#include "rowlock.h"

/* Where a client's events go. A clone (the keeper's client) points at its
 * parent's sink, so one registration covers both. min_level is read with a
 * relaxed atomic load before anything else: ROWLOCK__LOG_OFF while no hook is
 * set, so an event without a hook costs a load and a compare. fn and arg are
 * read and called under the read lock; rowlock_client_set_log() takes the
 * write lock, so no call to an old hook survives its return. */
#define ROWLOCK__LOG_OFF 100
typedef struct rowlock__logsink {
    int min_level; /* atomic */
    pthread_rwlock_t rw;
    rowlock_log_fn fn;
    void *arg;
} rowlock__logsink;
/* What an event carries besides its level, kind, lock and message. */
typedef struct rowlock__evx {
    int code;
    unsigned int db_errno;
    int64_t waited_us, elapsed_us;
    unsigned attempt;
    rowlock_keep_state keep_state;
} rowlock__evx;
#define RL_EVX(...) ((rowlock__evx){ __VA_ARGS__ })
void rowlock__log_init(rowlock__logsink *s);
void rowlock__log_destroy(rowlock__logsink *s);
static inline int rowlock__log_on(rowlock__logsink *s, int level)
{
    return level >= __atomic_load_n(&s->min_level, __ATOMIC_RELAXED);
}
/* Build the event (message printf-style: quote user data with l->shown or
 * rowlock_escape) and call the hook. Call through the macros below. */
void rowlock__log_emit(rowlock__logsink *s, int level, rowlock_event_kind kind, const char *name,
                       rowlock_strategy strategy, uint64_t token, rowlock__evx x, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 8, 9)))
#endif
    ;
/* An event of lock l (name, strategy and token from the handle). */
#define ROWLOCK__LOG_LOCK(l, level, kind, x, ...)                                                             \
    do {                                                                                                     \
        if (rowlock__log_on((l)->client->log, (level)))                                                      \
            rowlock__log_emit((l)->client->log, (level), ROWLOCK_EVENT_##kind, (l)->name, (l)->ops->id,       \
                              (l)->token, (x), __VA_ARGS__);                                                 \
    } while (0)
/* An event of client c (a connection). */
#define ROWLOCK__LOG_CLIENT(c, level, kind, x, ...)                                                          \
    do {                                                                                                     \
        if (rowlock__log_on((c)->log, (level)))                                                              \
            rowlock__log_emit((c)->log, (level), ROWLOCK_EVENT_##kind, "", (rowlock_strategy)0, 0, (x),       \
                              __VA_ARGS__);                                                                  \
    } while (0)

#endif /* ROWLOCK_LOG_H */
