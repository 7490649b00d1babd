/*
 * The list of strategies (ROWLOCK__STRATEGY_LIST in strategy.h is the only
 * one), their names, and the strategies' private per-client state.
 *
 * Per-client state is allocated when a client makes its first handle of a
 * strategy (ops->client_state_size bytes, zeroed), freed with the client
 * after ops->client_free, and told by ops->session_ended when the client's
 * session ends (client.c's session_ended hook, which the db layer calls
 * when it closes a connection, calls rowlock__strategy_session_ended(): a
 * notification, not a call by name up the layers; it runs no SQL).
 */
#include "rowlock_int.h"

#include <stdlib.h>
#include <string.h>

static const rowlock__strategy_ops *const all[] = {
#define X(n) &rowlock__strategy_##n,
    ROWLOCK__STRATEGY_LIST(X)
#undef X
};
#define NALL (sizeof all / sizeof all[0])

const rowlock__strategy_ops *rowlock__strategy_at(size_t i)
{
    return i < NALL ? all[i] : NULL;
}

const rowlock__strategy_ops *rowlock__strategy_default(void)
{
    return all[0];
}

const rowlock__strategy_ops *rowlock__strategy_offering(unsigned int mode)
{
    for (size_t i = 0; i < NALL; i++)
        if (all[i]->modes & mode)
            return all[i];
    return NULL;
}

int rowlock__strategy_multi_row(const rowlock_info *info)
{
    const rowlock__strategy_ops *ops = rowlock__strategy_find(info->strategy);
    return ops && (ops->flags & ROWLOCK__S_MULTI_ROWS) && info->held && !info->owner[0];
}

const rowlock__strategy_ops *rowlock__strategy_find(rowlock_strategy id)
{
    for (size_t i = 0; i < NALL; i++)
        if (all[i]->id == id)
            return all[i];
    return NULL;
}

void *rowlock__strategy_client_state(rowlock_client *c, const rowlock__strategy_ops *ops)
{
    unsigned id = (unsigned)ops->id;
    return id < ROWLOCK__STRATEGY_SLOTS ? c->strategy_state[id] : NULL;
}

int rowlock__strategy_client_attach(rowlock_client *c, const rowlock__strategy_ops *ops)
{
    unsigned id = (unsigned)ops->id;
    if (id >= ROWLOCK__STRATEGY_SLOTS)
        return ROWLOCK_EINVALID;
    if (ops->client_state_size == 0 || c->strategy_state[id])
        return 0;
    c->strategy_state[id] = calloc(1, ops->client_state_size);
    return c->strategy_state[id] ? 0 : ROWLOCK_ENOMEM;
}

void rowlock__strategy_client_free(rowlock_client *c)
{
    for (size_t i = 0; i < NALL; i++) {
        unsigned id = (unsigned)all[i]->id;
        if (all[i]->client_free)
            all[i]->client_free(c, id < ROWLOCK__STRATEGY_SLOTS ? c->strategy_state[id] : NULL);
    }
    for (unsigned id = 0; id < ROWLOCK__STRATEGY_SLOTS; id++) {
        free(c->strategy_state[id]);
        c->strategy_state[id] = NULL;
    }
}

void rowlock__strategy_session_ended(rowlock_client *c)
{
    for (size_t i = 0; i < NALL; i++) {
        unsigned id = (unsigned)all[i]->id;
        void *st = id < ROWLOCK__STRATEGY_SLOTS ? c->strategy_state[id] : NULL;
        if (all[i]->session_ended && st)
            all[i]->session_ended(c, st);
    }
}

ROWLOCK_EXTERN const char *rowlock_strategy_name(rowlock_strategy s)
{
    /* A name call never returns NULL (conventions, rowlock.h): its result
     * goes straight into messages. */
    const rowlock__strategy_ops *ops = rowlock__strategy_find(s);
    return ops ? ops->name : "unknown";
}

ROWLOCK_EXTERN int rowlock_strategy_parse(rowlock_strategy *out, const char *name)
{
    if (out == NULL || name == NULL)
        return ROWLOCK_EINVALID;
    for (size_t i = 0; i < NALL; i++) {
        if (strcmp(name, all[i]->name) == 0) {
            *out = all[i]->id;
            return 0;
        }
    }
    return ROWLOCK_EINVALID;
}
