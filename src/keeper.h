/*
 * keeper.c: the lease keeper (rowlock_keep, rowlock_keep_status): two
 * threads per client that renew kept lease locks on a connection of their
 * own and watch for-update sessions. It sits above client.c and lock.c: it
 * clones the client, makes shadow handles (rowlock__lock_shadow) and renews
 * through rowlock_renew(). What they must tell it (grants, renewals, losses,
 * releases, the client's end) comes through the hooks below, which
 * rowlock_keep() sets on the client.
 */
#ifndef ROWLOCK_KEEPER_H
#define ROWLOCK_KEEPER_H

#include <stdint.h>

#include "rowlock.h"

typedef struct rowlock__kept rowlock__kept;
typedef struct rowlock__keeper rowlock__keeper;
/* What lock.c and client.c tell the keeper (c->keeper_hooks, set by
 * rowlock_keep()): grants, renewals, losses and releases of a handle, and
 * the client's end. */
typedef struct rowlock__keep_hooks {
    void (*granted)(rowlock_lock *l, int64_t sent_us, int64_t lease_ms, int new_grant);
    void (*renewed)(rowlock_lock *l, int64_t sent_us, int64_t lease_ms);
    void (*lost)(rowlock_lock *l);
    void (*forget)(rowlock_lock *l); /* waits while a renewal of l is in flight */
    void (*client_free)(rowlock_client *c);
} rowlock__keep_hooks;

#endif /* ROWLOCK_KEEPER_H */
