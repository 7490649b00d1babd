/*
 * rowlock_lock: handles, and the thin wrappers through which every strategy
 * is called. The wrappers own argument checks and the handle's bookkeeping
 * (hold count, token, lost flag), so the strategies contain only SQL.
 */
#include "rowlock_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keeper (keeper.c) sits above this file: it makes shadow handles here
 * and renews through rowlock_renew(). What it must hear from here goes
 * through the hooks rowlock_keep() set on the client (NULL: nothing kept). */
#define KEEPER(c, hook, ...)                      \
    do {                                          \
        if ((c)->keeper_hooks)                    \
            (c)->keeper_hooks->hook(__VA_ARGS__); \
    } while (0)

/* The name as shown in messages: quoted, control bytes escaped, so a
 * message stays one readable line whatever the name holds. */
static void quote_name(char *out, size_t cap, const char *name)
{
    out[0] = '\'';
    size_t o = 1 + rowlock_escape(out + 1, cap - 2, name, strlen(name));
    out[o++] = '\'';
    out[o] = '\0';
}

ROWLOCK_EXTERN int rowlock_lock_new(rowlock_lock **out, rowlock_client *c, const char *name,
                                    const rowlock_lock_options *opts)
{
    if (out == NULL || c == NULL)
        return c ? rowlock__fail(c, ROWLOCK_EINVALID, "lock_new: out is NULL") : ROWLOCK_EINVALID;
    *out = NULL;
    rowlock__clear_error(c);
    if (opts && (opts->version < 1 || opts->version > ROWLOCK_LOCK_OPTIONS_VERSION))
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "lock_new: rowlock_lock_options.version is %u, this library knows 1-%d (start from "
                             "ROWLOCK_LOCK_OPTIONS_INIT)",
                             opts->version, ROWLOCK_LOCK_OPTIONS_VERSION);
    rowlock_strategy s = opts && opts->strategy ? opts->strategy : rowlock__strategy_default()->id;
    const rowlock__strategy_ops *ops = rowlock__strategy_find(s);
    if (ops == NULL || ops->version != ROWLOCK__STRATEGY_OPS_VERSION)
        return rowlock__fail(c, ROWLOCK_EINVALID, "lock_new: unknown strategy %d", (int)s);
    /* Version 1 callers have no mode: exclusive. */
    int mode = opts && opts->version >= 2 ? (int)opts->mode : ROWLOCK_MODE_EXCLUSIVE;
    unsigned int permits = opts && opts->version >= 2 ? opts->permits : 0;
    if (mode != ROWLOCK_MODE_EXCLUSIVE && mode != ROWLOCK_MODE_SHARED)
        return rowlock__fail(c, ROWLOCK_EINVALID, "lock_new: unknown mode %d", mode);
    if (permits > ROWLOCK_PERMITS_MAX)
        return rowlock__fail(c, ROWLOCK_EINVALID, "lock_new: %u permits is over the limit (%u)", permits,
                             ROWLOCK_PERMITS_MAX);
    /* A mode is a strategy's capability (ops->modes): refused here when
     * the strategy has none, naming the strategies that have it. */
    if (permits > 0 && !(ops->modes & ROWLOCK__M_PERMITS)) {
        const rowlock__strategy_ops *with = rowlock__strategy_offering(ROWLOCK__M_PERMITS);
        return rowlock__fail(c, ROWLOCK_EUNSUPPORTED, "lock_new: semaphores (permits) need the %s strategy, not %s",
                             with ? with->name : "(no)", ops->name);
    }
    if (mode == ROWLOCK_MODE_SHARED && !(ops->modes & ROWLOCK__M_SHARED)) {
        char with[64] = "";
        for (size_t i = 0; rowlock__strategy_at(i); i++) {
            const rowlock__strategy_ops *o = rowlock__strategy_at(i);
            if (o->modes & ROWLOCK__M_SHARED)
                snprintf(with + strlen(with), sizeof with - strlen(with), "%s%s", with[0] ? " or " : "", o->name);
        }
        return rowlock__fail(c, ROWLOCK_EUNSUPPORTED, "lock_new: the %s strategy has no shared mode (%s); use %s",
                             ops->name, ops->modes_note ? ops->modes_note : "it has one holder per name", with);
    }

    if (name == NULL)
        return rowlock__fail(c, ROWLOCK_EINVALID, "lock_new: lock name is NULL");
    size_t n = strlen(name);
    if (n == 0)
        return rowlock__fail(c, ROWLOCK_EINVALID, "lock_new: lock name is empty (names are 1-255 bytes of UTF-8)");
    if (n > ROWLOCK_NAME_MAX)
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "lock_new: lock name is %zu bytes long, the limit is %d (names are never truncated)", n,
                             ROWLOCK_NAME_MAX);
    size_t bad = 0;
    const char *why = rowlock__utf8_check((const unsigned char *)name, n, &bad);
    if (why)
        return rowlock__fail(c, ROWLOCK_EINVALID, "lock_new: lock name is not valid UTF-8: %s at byte %zu", why,
                             bad);

    if (rowlock__strategy_client_attach(c, ops))
        return rowlock__fail(c, ROWLOCK_ENOMEM, "lock_new: out of memory");
    /* The strategy's private state follows the handle, aligned for any type. */
    const size_t head = (sizeof(rowlock_lock) + 15) & ~(size_t)15;
    rowlock_lock *l = calloc(1, head + ops->lock_state_size);
    if (!l)
        return rowlock__fail(c, ROWLOCK_ENOMEM, "lock_new: out of memory");
    l->client = c;
    l->ops = ops;
    l->state = ops->lock_state_size ? (char *)l + head : NULL;
    memcpy(l->name, name, n + 1);
    l->name_len = n;
    l->mode = mode;
    l->mode_made = mode;
    l->permits = permits;
    quote_name(l->shown, sizeof l->shown, name);
    int rc = ops->lock_init ? ops->lock_init(l) : 0;
    if (rc) {
        free(l);
        return rc;
    }
    l->next = c->locks;
    if (c->locks)
        c->locks->prev = l;
    c->locks = l;
    *out = l;
    return 0;
}

/* The keeper's shadow handle: made like any handle (so its strategy state
 * is set up the same way, and a failure is reported on k like
 * rowlock_lock_new's), then marked as holding the grant it renews. */
int rowlock__lock_shadow(rowlock_lock **out, rowlock_client *k, const char *name, rowlock_strategy strategy,
                         uint64_t token, int held_multi)
{
    rowlock_lock_options o = ROWLOCK_LOCK_OPTIONS_INIT;
    o.strategy = strategy;
    int rc = rowlock_lock_new(out, k, name, &o);
    if (rc == 0) {
        (*out)->held = 1; /* renews only: never acquires or releases */
        (*out)->token = token;
        (*out)->held_multi = held_multi;
    }
    return rc;
}

void rowlock__lock_shadow_free(rowlock_lock *shadow)
{
    if (shadow == NULL)
        return;
    shadow->held = 0; /* the grant is the application's: nothing to release */
    rowlock_lock_free(shadow);
}

void rowlock__locks_orphan(rowlock_client *c)
{
    for (rowlock_lock *l = c->locks, *next; l; l = next) {
        next = l->next;
        l->client = NULL;
        l->next = l->prev = NULL;
    }
    c->locks = NULL;
}

/* A handle whose client was freed: nothing to talk to, no message to set. */
#define CHECK_HANDLE(l)                        \
    do {                                       \
        if ((l) == NULL || (l)->client == NULL) \
            return ROWLOCK_EINVALID;           \
    } while (0)

ROWLOCK_EXTERN void rowlock_lock_free(rowlock_lock *l)
{
    if (l == NULL)
        return;
    rowlock_client *c = l->client;
    if (c) {
        KEEPER(l->client, forget, l);
        /* Through the public call, so a release here is checked and counted
         * like any other. */
        while (rowlock_lock_held(l) > 0) {
            if (rowlock_release(l) != 0)
                break;
        }
        if (l->ops->lock_free)
            l->ops->lock_free(l);
        rowlock__holders_lock_free(l);
        if (l->prev)
            l->prev->next = l->next;
        else
            c->locks = l->next;
        if (l->next)
            l->next->prev = l->prev;
    }
    free(l);
}

static int check_lease(rowlock_lock *l, const char *what, int64_t *lease_ms)
{
    if (*lease_ms == 0)
        *lease_ms = ROWLOCK_LEASE_DEFAULT_MS;
    if (*lease_ms < 0 || *lease_ms > ROWLOCK_LEASE_MAX_MS)
        return rowlock__fail(l->client, ROWLOCK_EINVALID, "%s %s (%s): lease %lld ms is out of range (1..%lld)", what,
                             l->shown, l->ops->name, (long long)*lease_ms, (long long)ROWLOCK_LEASE_MAX_MS);
    return 0;
}

/* A strategy that holds no transaction writes rows that must commit on their
 * own: inside an open transaction they would commit with it, or never. */
static int check_autocommit(rowlock_lock *l, const char *what)
{
    if ((l->ops->flags & ROWLOCK__S_TRANSACTION) || !rowlock__db_in_transaction(l->client))
        return 0;
    return rowlock__fail(l->client, ROWLOCK_EINVALID,
                         "%s %s (%s): the connection is inside a transaction (a for-update lock or the "
                         "application's); lease locks must commit on their own",
                         what, l->shown, l->ops->name);
}

/* The release that just ran handed a lease lock to a waiter (lease.c). */
static int handed_over(const rowlock_lock *l)
{
    return (l->ops->flags & ROWLOCK__S_LEASE_ROW) && ROWLOCK__LEASE(l)->handed_over;
}

/* Backoff between reconnect attempts of a waiting acquire: 50 ms doubling
 * to 2 s (with jitter, so waiters do not return to a restarted server at
 * once). */
#define RECONNECT_BASE_US 50000
#define RECONNECT_CAP_US 2000000
/* The lease a grant handed to an interrupted wait's session is re-armed to
 * while it is given back (so a failed give-back ends soon). */
#define GIVE_BACK_LEASE_MS 1000
/* The connect, read and write timeouts of the give-back's connection. */
#define GIVE_BACK_TIMEOUT_MS 2000

/*
 * A claim whose connection died may still have committed: the row then names
 * our owner with a fresh token, and nobody is told. A later claim by this
 * owner would find the row taken (a claim grants only a free row) and wait
 * for its own lease to end; optimistic would count it as a re-entry (one
 * hold too many: held until the lease ends, two grants sharing a token). So
 * after such a failure the handle is marked uncertain, and before its next
 * claim, if no other handle of this client holds the name (then a row of
 * ours cannot be a re-entry), one statement decides (lease.c): a live row of
 * ours with this strategy is that lost grant, adopted with its token, count
 * 1 and a lease re-armed from now. Re-armed, not taken as it is: the lost
 * claim's lease started before this call, maybe most of a lease ago, and
 * this acquire promises lease_ms from its own start (a soak found one
 * adopted with 100 ms left of 2 s, taken over by a waiter at once).
 * Lease-row strategies only: a for-update lock died with its session.
 */
static int adopt_leftover(rowlock_lock *l, int64_t lease_ms, int *adopted)
{
    *adopted = 0;
    if (!(l->ops->flags & ROWLOCK__S_LEASE_ROW) || l->held > 0 || l->multi) {
        /* (holders.c adopts a multi-holder grant of ours itself) */
        l->claim_uncertain = 0;
        return 0;
    }
    if (rowlock__lease_client_holds(l)) {
        l->claim_uncertain = 0; /* a row of ours is another handle's: a re-entry */
        return 0;
    }
    int rc = rowlock__lease_adopt(l, lease_ms);
    if (rc != 0 && rc != ROWLOCK_EBUSY)
        return rc; /* still uncertain: asked again at the next attempt */
    l->claim_uncertain = 0;
    *adopted = rc == 0;
    return 0;
}

/*
 * The strategy's acquire, started again when the client's own connection was
 * lost, or the server refused it for a while (any error the table in error.c
 * calls transient: read-only, connection limit, Galera node not ready,
 * shutdown), and the caller's wait has time left: a server restart, a
 * switchover or a network blip then costs the waiter its place in the
 * queue, not its wait (WAIT_RETRY events say what it waits for). The next
 * statement reconnects (db_connect.c). Only while this handle holds nothing: a lost
 * session held no for-update lock. A claim that committed just before the
 * connection died is adopted, not re-entered (adopt_leftover above). Wrapped
 * connections are the application's to reconnect. Try-once calls (wait 0)
 * fail at once, as before.
 */
static int acquire_surviving_restarts(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms, int64_t start)
{
    rowlock_client *c = l->client;
    for (unsigned attempt = 0;; attempt++) {
        if (rowlock__interrupted(c) && wait_ms != 0)
            return rowlock__fail(c, ROWLOCK_EBUSY, "acquire %s (%s): interrupted (rowlock_client_interrupt)", l->shown,
                                 l->ops->name);
        int64_t left = wait_ms;
        if (wait_ms > 0) {
            left = wait_ms - (rowlock__now_us() - start) / 1000;
            if (left < 0)
                left = 0;
        }
        int rc = 0, adopted = 0;
        /* After a failover no grant before the old server's leases ended
         * (epoch.c); a wait shorter than that ends in EBUSY. */
        if (l->held == 0)
            rc = rowlock__epoch_grant_check(l, wait_ms, start, lease_ms);
        if (rc == 0 && l->claim_uncertain)
            rc = adopt_leftover(l, lease_ms, &adopted);
        if (rc == 0 && !adopted)
            rc = l->ops->acquire(l, left, lease_ms);
        if (rc == 0 && l->held == 0 && !rowlock__epoch_grant_valid(l)) {
            /* The grant reached a session nobody checked, on a server that
             * failed over: nobody saw it; release it and start again, checked. */
            ROWLOCK__LOG_LOCK(l, ROWLOCK_LOG_WARN, WAIT_RETRY, RL_EVX(.attempt = attempt + 1),
                              "%s (%s): granted on a new session of a server that failed over: released unreported, "
                              "waiting for the failover check",
                              l->shown, l->ops->name);
            l->held = 1;
            rowlock__errsave keep;
            rowlock__error_save(c, &keep);
            (void)l->ops->release(l);
            rowlock__error_restore(c, &keep);
            l->held = 0;
            l->token = 0;
            c->epoch_state = 0;
            continue;
        }
        if (adopted)
            return 0;
        if (rc == ROWLOCK_EDB && l->held == 0 && rowlock__db_classify(c->db_errno) == ROWLOCK__DB_CONN)
            l->claim_uncertain = 1;
        if (rc != 0 && wait_ms != 0 && rowlock__interrupted(c))
            return rowlock__fail(c, ROWLOCK_EBUSY, "acquire %s (%s): interrupted (rowlock_client_interrupt)", l->shown,
                                 l->ops->name);
        /* The one table (error.c) says which errors end by themselves. */
        const char *waits_for = rc == ROWLOCK_EDB ? rowlock__db_transient(c->db_errno) : NULL;
        if (waits_for == NULL || wait_ms == 0 || l->held > 0 ||
            (!c->owns_mysql && rowlock__db_classify(c->db_errno) == ROWLOCK__DB_CONN))
            return rc;
        int64_t pause = rowlock__backoff_us(attempt < 16 ? attempt : 16, RECONNECT_BASE_US, RECONNECT_CAP_US,
                                            rowlock__rand32(&c->rng));
        ROWLOCK__LOG_LOCK(l, ROWLOCK_LOG_INFO, WAIT_RETRY,
                          RL_EVX(.code = rc, .db_errno = c->db_errno, .waited_us = pause, .attempt = attempt + 1),
                          "%s (%s): waiting for %s; try %u again in %.3f s", l->shown, l->ops->name, waits_for,
                          attempt + 1, (double)pause / 1e6);
        if (wait_ms > 0) {
            int64_t remaining = wait_ms * 1000 - (rowlock__now_us() - start);
            if (remaining <= pause) {
                /* The wait is spent waiting, not returned early. */
                rowlock__sleep_us(remaining > 0 ? remaining : 0);
                return rc; /* the message names the connection error */
            }
        }
        rowlock__sleep_us(pause);
    }
}

/*
 * After an interrupt cut a waiting acquire (rowlock_client_interrupt): its
 * server session lives on until the statement it waits in ends, and while
 * it heads the waiter queue a release hands it the lock (lease.c), in our
 * owner's name with a lease nobody renews, though the interrupted caller
 * was told "busy". So, for each handle of the set on c that holds nothing
 * and may have a grant in the server (its wait joined the queue, or a
 * claim or release of it went unanswered: claim_uncertain, as when
 * rowlock_acquire_many could not give back a name it had taken; a
 * multi-holder acquire on one server, whatever it wrote: hold_wrote): end that
 * session (KILL from a new session, then wait until it is not listed: no
 * release can name it any more), then adopt a grant of ours, as the next
 * acquire would, and release it at once (the next waiter's claim takes the
 * row). The caller's result and message are kept; a failure is logged and
 * leaves such a grant to its lease. Bounded: this reconnect and its
 * statements get 2 s timeouts, and the connection is closed afterwards
 * (the next call reconnects with the client's own). On one server only
 * (the queue hand-off is node-local; a cluster rule has none) and on the
 * client's own connection (a wrapped one is never cut).
 */
static int give_back_wanted(const rowlock_client *c, const rowlock_lock *l)
{
    return l != NULL && l->client == c && l->held == 0 && (l->ops->flags & ROWLOCK__S_LEASE_ROW) &&
           (l->multi ? l->hold_wrote : rowlock__lease_was_queued(l) || l->claim_uncertain);
}

void rowlock__give_back_after_cut(rowlock_client *c, unsigned long session, unsigned int port,
                                  rowlock_lock *const *locks, size_t n)
{
    int any = 0;
    for (size_t i = 0; i < n; i++)
        any |= give_back_wanted(c, locks[i]);
    if (!any || !c->owns_mysql)
        return;
    const rowlock__lease_rule *used = NULL;
    for (size_t i = 0; i < n && used == NULL; i++)
        if (give_back_wanted(c, locks[i]))
            used = ROWLOCK__LEASE(locks[i])->rule;
    if (used && !(used->flags & ROWLOCK__RULE_QUEUE))
        return; /* a cluster: no hand-off to give back; a KILL by id could reach another node */
    rowlock__errsave keep;
    rowlock__error_save(c, &keep);
    rowlock__db_hold(c);
    const unsigned int ct = c->connect_timeout_ms, rt = c->read_timeout_ms, wt = c->write_timeout_ms;
    c->connect_timeout_ms = ct && ct < GIVE_BACK_TIMEOUT_MS ? ct : GIVE_BACK_TIMEOUT_MS;
    c->read_timeout_ms = rt && rt < GIVE_BACK_TIMEOUT_MS ? rt : GIVE_BACK_TIMEOUT_MS;
    c->write_timeout_ms = wt && wt < GIVE_BACK_TIMEOUT_MS ? wt : GIVE_BACK_TIMEOUT_MS;
    if (c->connected)
        rowlock__db_close(c); /* reconnect with these timeouts */
    int rc = rowlock__db_end_cut_session(c, session, port);
    for (size_t i = 0; i < n; i++) {
        rowlock_lock *l = locks[i];
        if (!give_back_wanted(c, l))
            continue;
        if (l->multi) {
            /* A multi-holder name: our entry (a waiter's, a grant another
             * reader's attempt made for us: holders.c, "Readers granted
             * together", or our own join's or attempt's grant whose reply
             * the cut lost) goes, unless a handle of ours holds it. */
            int gone = rc ? rc : rowlock__holders_give_back(l);
            l->hold_wrote = 0;
            if (gone)
                ROWLOCK__LOG_LOCK(l, gone < 0 ? ROWLOCK_LOG_WARN : ROWLOCK_LOG_INFO, RELEASED,
                                  RL_EVX(.code = gone < 0 ? gone : 0, .db_errno = c->db_errno),
                                  "%s (%s): after the interrupted wait: %s%s", l->shown, l->ops->name,
                                  gone < 0 ? "its entry may stand until it expires: " : "its entry was removed",
                                  gone < 0 ? c->errmsg : "");
            continue;
        }
        if (rowlock__lease_client_holds(l))
            continue;
        int got = rc ? rc : rowlock__lease_adopt(l, GIVE_BACK_LEASE_MS);
        int rel = 0;
        if (got == 0) {
            l->held = 1;
            rel = l->ops->release(l);
            l->held = 0;
        }
        if (got == 0 || got != ROWLOCK_EBUSY)
            ROWLOCK__LOG_LOCK(l, got || rel ? ROWLOCK_LOG_WARN : ROWLOCK_LOG_INFO, RELEASED,
                              RL_EVX(.code = got ? got : rel, .db_errno = c->db_errno),
                              "%s (%s): after the interrupted wait: %s%s", l->shown, l->ops->name,
                              got ? "a grant to it may stand until its lease ends: " :
                              rel ? "its session had been handed the lock; giving it back failed (it ends with "
                                    "its lease): " :
                                    "its session had been handed the lock: given back",
                              got || rel ? c->errmsg : "");
        ROWLOCK__LEASE(l)->queued = 0;
        if (got == 0 || got == ROWLOCK_EBUSY)
            l->claim_uncertain = 0;
        l->token = 0;
    }
    rowlock__db_close(c);
    c->connect_timeout_ms = ct;
    c->read_timeout_ms = rt;
    c->write_timeout_ms = wt;
    rowlock__db_unhold(c);
    rowlock__error_restore(c, &keep);
}

/* rowlock_acquire() and the calls made for it, and the clearing of an
 * interrupt request once it returned (rowlock_acquire_many() calls
 * rowlock__acquire and clears at its own end). */
ROWLOCK_EXTERN int rowlock_acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    if (l == NULL || l->client == NULL)
        return ROWLOCK_EINVALID;
    rowlock__acquiring(l->client, 1, NULL);
    int rc = rowlock__acquire(l, wait_ms, lease_ms);
    unsigned int port = 0;
    unsigned long cut = rowlock__acquiring(l->client, -1, &port);
    rowlock__interrupt_clear(l->client);
    if (cut != 0 && rc != 0)
        rowlock__give_back_after_cut(l->client, cut, port, &l, 1);
    return rc;
}

int rowlock__acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    CHECK_HANDLE(l);
    rowlock__clear_error(l->client);
    int rc;
    if (wait_ms < 0 && wait_ms != ROWLOCK_WAIT_FOREVER)
        return rowlock__fail(l->client, ROWLOCK_EINVALID,
                             "acquire %s (%s): wait %lld ms is negative (use 0 to try once or ROWLOCK_WAIT_FOREVER)",
                             l->shown, l->ops->name, (long long)wait_ms);
    if ((rc = check_lease(l, "acquire", &lease_ms)) || (rc = check_autocommit(l, "acquire")))
        return rc;
    if (l->lost) {
        l->lost = 0;
        l->held = 0;
        l->token = 0;
        l->mode = l->mode_made; /* a lost downgraded grant ended */
    }
    uint64_t before = l->token;
    int64_t sent = rowlock__now_us();
    l->attempts = 0;
    l->waited = 0;
    rc = acquire_surviving_restarts(l, wait_ms, lease_ms, sent);
    if (rc == 0) {
        /* A wait records why its first claims lost (the holder): stale now. */
        rowlock__clear_error(l->client);
        if (l->held > 0 && l->token != before) {
            /* Our earlier grant had lapsed and this is a new one. */
            l->held = 0;
        }
        int new_grant = l->held == 0;
        l->held++;
        if (new_grant) {
            l->lease_ms = lease_ms;
            l->grant_sent_us = sent;
            l->epoch = rowlock__epoch_of_grant(l->client);
        }
        KEEPER(l->client, granted, l, sent, lease_ms, new_grant);
        int64_t took = rowlock__now_us() - sent;
        ROWLOCK__LOG_LOCK(l, new_grant ? ROWLOCK_LOG_INFO : ROWLOCK_LOG_DEBUG, ACQUIRED,
                          RL_EVX(.waited_us = took, .attempt = l->attempts ? l->attempts : 1),
                          "%s (%s): %s, token %llu, %s %.3f s (%u claim%s)", l->shown, l->ops->name,
                          new_grant ? "granted" : "re-entered", (unsigned long long)l->token,
                          l->waited ? "after waiting" : "in", (double)took / 1e6, l->attempts ? l->attempts : 1,
                          l->attempts > 1 ? "s" : "");
    }
    return rc;
}

/* The connection's mutex is held for the whole release and renew, so a
 * keeper renewing on this client's connection (ROWLOCK_KEEP_SAME_CONNECTION)
 * never runs between their statements or writes the error they report. */
static int release_held(rowlock_lock *l);
static int renew_held(rowlock_lock *l, int64_t lease_ms);

ROWLOCK_EXTERN int rowlock_release(rowlock_lock *l)
{
    CHECK_HANDLE(l);
    rowlock_client *c = l->client;
    rowlock__db_hold(c);
    int rc = release_held(l);
    rowlock__db_unhold(c);
    return rc;
}

ROWLOCK_EXTERN int rowlock_renew(rowlock_lock *l, int64_t lease_ms)
{
    CHECK_HANDLE(l);
    rowlock_client *c = l->client;
    rowlock__db_hold(c);
    int rc = renew_held(l, lease_ms);
    rowlock__db_unhold(c);
    return rc;
}

static int release_held(rowlock_lock *l)
{
    rowlock__clear_error(l->client);
    if (l->lost)
        return rowlock__fail(l->client, ROWLOCK_ENOTOWNER, "release %s (%s): the lock was already lost", l->shown,
                             l->ops->name);
    if (l->held == 0)
        return rowlock__fail(l->client, ROWLOCK_EINVALID, "release %s (%s): this handle does not hold the lock",
                             l->shown, l->ops->name);
    int rc = check_autocommit(l, "release");
    if (rc)
        return rc;
    /* The final release ends keeping first, so no renewal follows it. */
    int kept = l->held == 1 && l->keep_on;
    if (kept)
        KEEPER(l->client, forget, l);
    /* After a failover the grant is gone with the old server: lost (epoch.c). */
    rc = rowlock__epoch_renew_check(l, "release", 0);
    if (rc == 0)
        rc = l->ops->release(l);
    if (kept && rc != 0 && rc != ROWLOCK_ENOTOWNER)
        KEEPER(l->client, granted, l, l->grant_sent_us, l->lease_ms, 1); /* still held: keep it again */
    if (rc == 0) {
        ROWLOCK__LOG_LOCK(l, l->held == 1 ? ROWLOCK_LOG_INFO : ROWLOCK_LOG_DEBUG, RELEASED,
                          RL_EVX(.elapsed_us = rowlock__now_us() - l->grant_sent_us),
                          "%s (%s): token %llu, %s after %.3f s", l->shown, l->ops->name,
                          (unsigned long long)l->token, l->held > 1 ? "one re-entry released" : handed_over(l) ?
                          "handed to the next waiter" : "released", (double)(rowlock__now_us() - l->grant_sent_us) / 1e6);
        if (--l->held == 0) {
            l->token = 0;
            l->mode = l->mode_made; /* a downgraded grant ended: the handle asks its own mode again */
        }
    } else if (rc == ROWLOCK_ENOTOWNER) {
        l->lost = 1;
        ROWLOCK__LOG_LOCK(l, ROWLOCK_LOG_ERROR, LOST, RL_EVX(.code = rc), "%s", l->client->errmsg);
        KEEPER(l->client, lost, l);
    }
    return rc;
}

static int renew_held(rowlock_lock *l, int64_t lease_ms)
{
    rowlock__clear_error(l->client);
    if (l->lost)
        return rowlock__fail(l->client, ROWLOCK_ENOTOWNER, "renew %s (%s): the lock was already lost", l->shown,
                             l->ops->name);
    if (l->held == 0)
        return rowlock__fail(l->client, ROWLOCK_EINVALID, "renew %s (%s): this handle does not hold the lock",
                             l->shown, l->ops->name);
    int rc;
    if ((rc = check_lease(l, "renew", &lease_ms)) || (rc = check_autocommit(l, "renew")))
        return rc;
    int64_t sent = rowlock__now_us();
    /* A renewal under another server identity or epoch than the grant's
     * is refused: the lock is lost (epoch.c). So is one that reached a new
     * session of another server (checked after it: the renewal then extended
     * a row nobody will honour, and the loss is reported all the same). */
    rc = rowlock__epoch_renew_check(l, "renew", lease_ms);
    if (rc == 0) {
        uint64_t gen = l->client->session_gen;
        rc = l->ops->renew(l, lease_ms);
        if (rc == 0 && l->client->session_gen != gen)
            rc = rowlock__epoch_renew_check(l, "renew", lease_ms);
    }
    if (rc == 0) {
        ROWLOCK__LOG_LOCK(l, ROWLOCK_LOG_DEBUG, RENEWED, RL_EVX(.elapsed_us = rowlock__now_us() - sent),
                          "%s (%s): token %llu, lease %lld ms (%s)", l->shown, l->ops->name,
                          (unsigned long long)l->token, (long long)lease_ms, l->client->conn_role);
        KEEPER(l->client, renewed, l, sent, lease_ms);
    } else if (rc == ROWLOCK_ENOTOWNER) {
        l->lost = 1;
        ROWLOCK__LOG_LOCK(l, ROWLOCK_LOG_ERROR, LOST, RL_EVX(.code = rc), "%s", l->client->errmsg);
        KEEPER(l->client, lost, l);
    }
    return rc;
}

/*
 * Exclusive to shared without letting go. The strategy's downgrade does the
 * SQL (insert: holders.c); here the checks every strategy shares, and the
 * keeper: its shadow handle renews by the grant's kind (one-row row or
 * holders-table entry), which the downgrade may change, so keeping stops
 * before it (no renewal of the old kind runs after the change) and starts
 * again after it, counting the lease from the downgrade's start (the
 * downgrade sets the lease to at least l->lease_ms from the server's now).
 */
static int downgrade_held(rowlock_lock *l);

/* Held for the whole call as release and renew are (above): a keeper
 * renewing other locks on this connection never runs between its statements. */
ROWLOCK_EXTERN int rowlock_downgrade(rowlock_lock *l)
{
    CHECK_HANDLE(l);
    rowlock_client *c = l->client;
    rowlock__db_hold(c);
    int rc = downgrade_held(l);
    rowlock__db_unhold(c);
    return rc;
}

static int downgrade_held(rowlock_lock *l)
{
    rowlock_client *c = l->client;
    rowlock__clear_error(c);
    if (l->lost)
        return rowlock__fail(c, ROWLOCK_ENOTOWNER, "downgrade %s (%s): the lock was already lost", l->shown,
                             l->ops->name);
    if (l->held == 0)
        return rowlock__fail(c, ROWLOCK_EINVALID, "downgrade %s (%s): this handle does not hold the lock", l->shown,
                             l->ops->name);
    if (l->mode == ROWLOCK_MODE_SHARED)
        return 0; /* shared already: nothing to change */
    if (!(l->ops->modes & ROWLOCK__M_SHARED))
        return rowlock__fail(c, ROWLOCK_EUNSUPPORTED, "downgrade %s: the %s strategy has no shared mode (%s)",
                             l->shown, l->ops->name, l->ops->modes_note ? l->ops->modes_note : "one holder per name");
    if (l->ops->downgrade == NULL)
        return rowlock__fail(c, ROWLOCK_EUNSUPPORTED,
                             "downgrade %s: the %s strategy cannot turn a held exclusive lock into a shared one "
                             "(%s); release it and acquire shared, or use the insert strategy",
                             l->shown, l->ops->name,
                             (l->ops->flags & ROWLOCK__S_TRANSACTION)
                                 ? "InnoDB keeps a transaction's exclusive row lock until the transaction ends"
                                 : "not implemented");
    int rc = check_autocommit(l, "downgrade");
    if (rc)
        return rc;
    /* After a failover the grant is gone with the old server, as for a
     * release or a renewal (epoch.c): lost, not downgraded (found by a
     * review: a downgrade extended a grant the epoch rule says is lost). */
    if ((rc = rowlock__epoch_renew_check(l, "downgrade", l->lease_ms))) {
        if (rc == ROWLOCK_ENOTOWNER) {
            l->lost = 1;
            ROWLOCK__LOG_LOCK(l, ROWLOCK_LOG_ERROR, LOST, RL_EVX(.code = rc), "%s", c->errmsg);
            KEEPER(c, lost, l);
        }
        return rc;
    }
    int kept = l->keep_on;
    if (kept)
        KEEPER(c, forget, l);
    int64_t sent = rowlock__now_us();
    rc = l->ops->downgrade(l, l->lease_ms);
    if (rc == 0) {
        l->mode = ROWLOCK_MODE_SHARED;
        if (kept)
            KEEPER(c, granted, l, sent, l->lease_ms, 1);
    } else if (rc == ROWLOCK_ENOTOWNER) {
        l->lost = 1;
        ROWLOCK__LOG_LOCK(l, ROWLOCK_LOG_ERROR, LOST, RL_EVX(.code = rc), "%s", c->errmsg);
    } else if (kept) {
        KEEPER(c, granted, l, l->grant_sent_us, l->lease_ms, 1); /* still held exclusive: keep it again */
    }
    return rc;
}

ROWLOCK_EXTERN uint64_t rowlock_lock_token(const rowlock_lock *l)
{
    return l && l->held && !l->lost ? l->token : 0;
}

ROWLOCK_EXTERN unsigned int rowlock_lock_held(const rowlock_lock *l)
{
    return l && !l->lost ? l->held : 0;
}

ROWLOCK_EXTERN const char *rowlock_lock_name(const rowlock_lock *l)
{
    return l ? l->name : "";
}

ROWLOCK_EXTERN rowlock_strategy rowlock_lock_strategy(const rowlock_lock *l)
{
    return l ? l->ops->id : (rowlock_strategy)0;
}

ROWLOCK_EXTERN rowlock_mode rowlock_lock_mode(const rowlock_lock *l)
{
    return l ? (rowlock_mode)l->mode : ROWLOCK_MODE_EXCLUSIVE;
}

ROWLOCK_EXTERN int rowlock_inspect(rowlock_lock *l, rowlock_info *info)
{
    CHECK_HANDLE(l);
    rowlock__clear_error(l->client);
    if (info == NULL || rowlock__info_check(info->version))
        return rowlock__fail(l->client, ROWLOCK_EINVALID,
                             "inspect %s: info is NULL or its version is 0 (start from ROWLOCK_INFO_INIT)", l->shown);
    /* What the row says decides how to look, not the handle's strategy: a
     * for-update holder is a row lock and needs the strategy's probe. */
    rowlock_info full = ROWLOCK_INFO_INIT;
    const rowlock__lease_rule *rule;
    int rc = rowlock__lease_rule_get(l->client, &rule); /* a cluster's reads must be causal */
    if (rc == 0)
        rc = rowlock__row_read_current(l->client, (rule->flags & ROWLOCK__RULE_CAUSAL) != 0, l->name, l->name_len,
                                       &full);
    if (rc == 0 && full.exists) {
        const rowlock__strategy_ops *row_ops = rowlock__strategy_find(full.strategy);
        if (row_ops && row_ops->inspect)
            rc = row_ops->inspect(l, &full);
    }
    if (rc == 0)
        rowlock__info_copy_out(info, &full);
    return rc;
}
