/*
 * rowlock_acquire_many / rowlock_release_many: several names granted all
 * or none, built on rowlock_acquire and rowlock_release (lock.c) and
 * nothing below them: every name is an ordinary grant of its handle's
 * strategy and mode (its own lease, token, keeper and re-entry count).
 *
 * Why no deadlock. The handles are taken in one global order, by name bytes
 * (strcmp, the order a C caller in any process computes alike), then by lock
 * table. A caller that waits for name k holds only names before k in that
 * order, so every edge of the wait-for graph goes from a smaller name to a
 * larger one (or, within one name, along its FIFO queue, which is acyclic):
 * no cycle, whatever the overlap of the sets, their modes and the
 * strategies' queues. This holds as long as callers hold no other names,
 * outside the set, while they wait (names held before the call and also in
 * the set are re-entries: granted at once, no wait).
 *
 * One deadline. wait_ms is the budget of the whole call; each name gets what
 * is left of it (0: every name tried once; ROWLOCK_WAIT_FOREVER: each waits
 * as long as it takes).
 *
 * Leases while waiting. A name granted early must not end its lease while the
 * call waits for a later one: while this call holds names, each later name is
 * waited for in slices of at most a third of the lease, and between slices
 * every name this call acquired is renewed (rowlock_renew, one round trip
 * each; a lost name fails the call). Before returning, a name whose grant or
 * renewal was sent more than a tenth of the lease ago is renewed once more,
 * so each name has at least nine tenths of lease_ms left when the call
 * returns. Uncontended, nothing of this happens: n grants, n round trips.
 * (A slice that ends gives up the waiter's place in the name's queue; the
 * next slice joins it again. Fairness, not safety.)
 *
 * All or none. When a name cannot be had (busy at the deadline, an error),
 * the names this call acquired are released in reverse order (one release
 * each: a re-entry only gives back the count it added). A release that fails
 * (the server unreachable) cannot be retried here: the handle then stops
 * counting that grant (rowlock_lock_held() 0, its keeper forgets it) and the
 * server ends it with its lease, at most lease_ms after its last renewal; a
 * lease-row grant is marked so that the handle's next acquire adopts it
 * instead of re-entering it (lock.c: adopt_leftover). The caller's message
 * says so.
 *
 * for-update. Its lock is a transaction on its client's connection: a
 * second name on that connection could not be a transaction of its own, and
 * a lease name on it could not commit on its own while the transaction is
 * open. So a for-update handle in a set must be the only handle of the set
 * on its client (ROWLOCK_EUNSUPPORTED before anything is acquired); give
 * each for-update name a client of its own.
 *
 * Statements: none of its own (those of rowlock_acquire, rowlock_renew and
 * rowlock_release).
 */
#include "rowlock_int.h"

#include <stdlib.h>
#include <string.h>

/* One handle of the set: where it is in the caller's array, and what this
 * call did with it. */
typedef struct many_item {
    rowlock_lock *l;
    size_t idx;          /* index in the caller's array */
    int acquired;        /* this call acquired it (one count) */
    int64_t sent_us;     /* when its grant or last renewal was sent */
} many_item;

/* The global order: name bytes, then the lock table. Two handles of one
 * name in one table compare equal (refused as duplicates). */
static int item_cmp(const void *a, const void *b)
{
    const many_item *x = a, *y = b;
    int r = strcmp(x->l->name, y->l->name);
    if (r == 0)
        r = strcmp(x->l->client->table, y->l->client->table);
    if (r == 0)
        r = (x->idx > y->idx) - (x->idx < y->idx); /* stable, for the message */
    return r;
}

/* Check the set and sort it into v (n items). Returns 0 or a code, with
 * *bad the caller's index to blame. */
static int many_prepare(rowlock_lock *const *locks, size_t n, const char *what, many_item *v, size_t *bad)
{
    for (size_t i = 0; i < n; i++) {
        if (locks[i] == NULL || locks[i]->client == NULL) {
            *bad = i;
            /* No client to keep a message: a NULL or orphaned handle. Tell
             * the first client of the set, if there is one. */
            for (size_t j = 0; j < n; j++)
                if (locks[j] && locks[j]->client)
                    return rowlock__fail(locks[j]->client, ROWLOCK_EINVALID,
                                         "%s: handle %zu of the set is %s", what, i,
                                         locks[i] == NULL ? "NULL" : "an orphan (its client was freed)");
            return ROWLOCK_EINVALID;
        }
        v[i].l = locks[i];
        v[i].idx = i;
        v[i].acquired = 0;
        v[i].sent_us = 0;
    }
    for (size_t i = 0; i < n; i++)
        rowlock__clear_error(v[i].l->client);
    qsort(v, n, sizeof *v, item_cmp);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(v[i].l->name, v[i - 1].l->name) == 0 &&
            strcmp(v[i].l->client->table, v[i - 1].l->client->table) == 0) {
            *bad = v[i].idx;
            return rowlock__fail(v[i].l->client, ROWLOCK_EINVALID,
                                 "%s: %s is in the set twice (handles %zu and %zu, table %s): name each lock once",
                                 what, v[i].l->shown, v[i - 1].idx, v[i].idx, v[i].l->client->table);
        }
    }
    /* A for-update handle owns its client's connection (its transaction). */
    for (size_t i = 0; i < n; i++) {
        if (!(v[i].l->ops->flags & ROWLOCK__S_TRANSACTION))
            continue;
        for (size_t j = 0; j < n; j++) {
            if (j != i && v[j].l->client == v[i].l->client) {
                *bad = v[j].idx;
                return rowlock__fail(v[i].l->client, ROWLOCK_EUNSUPPORTED,
                                     "%s: %s (%s) holds a transaction on its client's connection, which %s (handle "
                                     "%zu) shares: give each for-update name of a set a client of its own",
                                     what, v[i].l->shown, v[i].l->ops->name, v[j].l->shown, v[j].idx);
            }
        }
    }
    return 0;
}

/* A grant this call made and could not give back: the handle stops counting
 * it, the keeper forgets it, the server ends it with its lease. */
static void many_abandon(many_item *it)
{
    rowlock_lock *l = it->l;
    if (rowlock_lock_held(l) == 0)
        return; /* lost meanwhile: nothing to abandon */
    if (l->held > 1) {
        l->held--; /* a re-entry's count: the earlier grant stays the caller's */
        return;
    }
    if (l->keep_on && l->client->keeper_hooks)
        l->client->keeper_hooks->forget(l);
    l->held = 0;
    l->token = 0;
    /* The row may still name us with a live lease: the next acquire adopts
     * it (count 1) instead of re-entering it. */
    l->claim_uncertain = 1;
}

/* Give back what this call acquired, last first. Returns how many releases
 * failed (their grants abandoned). */
static size_t many_undo(many_item *v, size_t n)
{
    size_t failed = 0;
    for (size_t i = n; i-- > 0;) {
        if (!v[i].acquired)
            continue;
        v[i].acquired = 0;
        int rc = rowlock_release(v[i].l);
        if (rc != 0 && rc != ROWLOCK_ENOTOWNER) {
            many_abandon(&v[i]);
            failed++;
        }
    }
    return failed;
}

/* Renew every name this call acquired (all of them: force), or those whose
 * grant or renewal was sent more than `older_us` ago. Returns 0 or the code
 * of the first failure, *bad its position in v. */
static int many_renew(many_item *v, size_t upto, int64_t lease_ms, int64_t older_us, size_t *bad)
{
    for (size_t i = 0; i < upto; i++) {
        if (!v[i].acquired)
            continue;
        int64_t now = rowlock__now_us();
        if (older_us > 0 && now - v[i].sent_us <= older_us)
            continue;
        int rc = rowlock_renew(v[i].l, lease_ms);
        if (rc != 0) {
            *bad = i;
            return rc;
        }
        v[i].sent_us = now;
    }
    return 0;
}

static int acquire_many(rowlock_lock *const *locks, size_t n, int64_t wait_ms, int64_t lease_ms, size_t *failed);

/* An interrupt request (rowlock_client_interrupt) ends the set's wait and is
 * cleared once the call returns, on every client of the set. */
ROWLOCK_EXTERN int rowlock_acquire_many(rowlock_lock *const *locks, size_t n, int64_t wait_ms, int64_t lease_ms,
                                        size_t *failed)
{
    for (size_t i = 0; locks != NULL && i < n; i++)
        if (locks[i] != NULL && locks[i]->client != NULL)
            rowlock__acquiring(locks[i]->client, 1, NULL);
    int rc = acquire_many(locks, n, wait_ms, lease_ms, failed);
    for (size_t i = 0; locks != NULL && i < n; i++)
        if (locks[i] != NULL && locks[i]->client != NULL) {
            unsigned int port = 0;
            unsigned long cut = rowlock__acquiring(locks[i]->client, -1, &port);
            rowlock__interrupt_clear(locks[i]->client);
            if (cut != 0 && rc != 0)
                rowlock__give_back_after_cut(locks[i]->client, cut, port, locks, n);
        }
    return rc;
}

static int acquire_many(rowlock_lock *const *locks, size_t n, int64_t wait_ms, int64_t lease_ms, size_t *failed)
{
    static const char what[] = "acquire_many";
    size_t bad = n;
    if (failed)
        *failed = n;
    if (n == 0)
        return 0;
    if (locks == NULL)
        return ROWLOCK_EINVALID; /* no handle, no client for a message */
    many_item *v = malloc(n * sizeof *v);
    if (v == NULL) {
        for (size_t j = 0; j < n; j++)
            if (locks[j] && locks[j]->client)
                return rowlock__fail(locks[j]->client, ROWLOCK_ENOMEM, "%s: out of memory", what);
        return ROWLOCK_ENOMEM;
    }
    int rc = many_prepare(locks, n, what, v, &bad);
    if (rc == 0 && wait_ms < 0 && wait_ms != ROWLOCK_WAIT_FOREVER)
        rc = rowlock__fail(v[0].l->client, ROWLOCK_EINVALID,
                           "%s: wait %lld ms is negative (use 0 to try once or ROWLOCK_WAIT_FOREVER)", what,
                           (long long)wait_ms);
    if (rc == 0 && lease_ms == 0)
        lease_ms = ROWLOCK_LEASE_DEFAULT_MS;
    if (rc != 0) {
        if (failed)
            *failed = bad;
        free(v);
        return rc;
    }

    const int64_t start = rowlock__now_us();
    const int64_t deadline = wait_ms > 0 ? start + wait_ms * 1000 : 0;
    /* A third of the lease: the longest a held name goes unrenewed while a
     * later one is waited for (the keeper's own interval). */
    const int64_t slice_max = lease_ms > 0 && lease_ms / 3 > 0 ? lease_ms / 3 : 1;
    size_t at = 0, held = 0, renew_bad = n;
    for (at = 0; at < n; at++) {
        many_item *it = &v[at];
        for (;;) {
            int64_t left; /* the budget left for this name, in the units of wait_ms */
            if (wait_ms == 0 || wait_ms == ROWLOCK_WAIT_FOREVER) {
                left = wait_ms;
            } else {
                left = (deadline - rowlock__now_us() + 999) / 1000;
                if (left < 0)
                    left = 0;
            }
            int64_t slice = left;
            if (held > 0 && left != 0 && (left == ROWLOCK_WAIT_FOREVER || left > slice_max))
                slice = slice_max;
            int64_t sent = rowlock__now_us();
            rc = rowlock__acquire(it->l, slice, lease_ms);
            if (rc == 0) {
                it->acquired = 1;
                it->sent_us = sent;
                held++;
                break;
            }
            /* A slice ended with time left: renew what we hold, go on. */
            int more = slice != left && !rowlock__interrupted(it->l->client) &&
                       (rc == ROWLOCK_EBUSY || (rc == ROWLOCK_EDB && rowlock_client_transient(it->l->client)));
            if (!more)
                break;
            rc = many_renew(v, at, lease_ms, 0, &renew_bad);
            if (rc != 0)
                break;
        }
        if (rc != 0)
            break;
    }
    if (rc == 0) {
        /* Names granted long before the last one get their lease back. */
        rc = many_renew(v, n, lease_ms, lease_ms * 100, &renew_bad);
        if (rc != 0)
            at = n;
    }
    if (rc == 0) {
        free(v);
        return 0;
    }

    /* The failing handle: the one being acquired, or a held one whose
     * renewal failed. Its client keeps the message, prefixed with the set. */
    many_item *culprit = renew_bad < n ? &v[renew_bad] : &v[at];
    rowlock_client *fc = culprit->l->client;
    rowlock__errsave saved;
    rowlock__error_save(fc, &saved);
    size_t granted = held;
    size_t undone_failed = many_undo(v, n);
    rowlock__error_restore(fc, &saved);
    char orig[ROWLOCK__ERRMSG_MAX];
    memcpy(orig, fc->errmsg, sizeof orig);
    if (undone_failed > 0)
        rowlock__fail(fc, rc,
                      "%s (%zu names, %s is name %zu in name order): %s; %zu of the %zu names this call acquired "
                      "could not be released: they end with their leases",
                      what, n, culprit->l->shown, (size_t)(culprit - v) + 1, orig, undone_failed, granted);
    else if (granted > 0)
        rowlock__fail(fc, rc, "%s (%zu names, %s is name %zu in name order): %s; released the %zu acquired before it",
                      what, n, culprit->l->shown, (size_t)(culprit - v) + 1, orig, granted);
    else
        rowlock__fail(fc, rc, "%s (%zu names, %s is name %zu in name order): %s; nothing was acquired before it",
                      what, n, culprit->l->shown, (size_t)(culprit - v) + 1, orig);
    if (failed)
        *failed = culprit->idx;
    free(v);
    return rc;
}

ROWLOCK_EXTERN int rowlock_release_many(rowlock_lock *const *locks, size_t n, size_t *failed)
{
    static const char what[] = "release_many";
    size_t bad = n;
    if (failed)
        *failed = n;
    if (n == 0)
        return 0;
    if (locks == NULL)
        return ROWLOCK_EINVALID;
    many_item *v = malloc(n * sizeof *v);
    if (v == NULL) {
        for (size_t j = 0; j < n; j++)
            if (locks[j] && locks[j]->client)
                return rowlock__fail(locks[j]->client, ROWLOCK_ENOMEM, "%s: out of memory", what);
        return ROWLOCK_ENOMEM;
    }
    int rc = many_prepare(locks, n, what, v, &bad);
    if (rc != 0) {
        if (failed)
            *failed = bad;
        free(v);
        return rc;
    }
    /* Reverse name order; every handle is released even after a failure,
     * and the first failure is what the call returns (its message stays on
     * its client: a later release on the same client is not allowed to
     * replace it). */
    int first = 0;
    rowlock_client *fc = NULL;
    rowlock__errsave saved;
    for (size_t i = n; i-- > 0;) {
        int r = rowlock_release(v[i].l);
        if (r != 0 && first == 0) {
            first = r;
            fc = v[i].l->client;
            rowlock__error_save(fc, &saved);
            bad = v[i].idx;
        }
    }
    if (first != 0) {
        rowlock__error_restore(fc, &saved);
        if (failed)
            *failed = bad;
    }
    free(v);
    return first;
}
