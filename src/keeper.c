/*
 * The lease keeper: two threads per client. The renewer renews the kept
 * lease locks on a connection of its own; the watcher tracks how long each
 * lock is safe to act on, runs the callbacks, and watches the sessions of
 * for-update holders. A renewal that blocks (a locked row, a server that
 * does not answer) delays only the renewer: the watcher never waits on the
 * database, so a callback comes on time whatever the network does.
 *
 * Why a connection of its own: a renewal on the application's connection
 * would need the application's thread (a MYSQL * serves one thread at a
 * time), and a holder busy in a long query on it could not renew. The
 * keeper's client is a copy of the application's (same settings, same owner
 * identity, so the renewal's owner check matches) and is used by the keeper
 * thread only.
 *
 * One connection (ROWLOCK_KEEP_SAME_CONNECTION): a holder whose thread does
 * not use its client while it holds the lock (the CLI's supervisors) has the
 * renewals run on its own connection instead, so a holder costs the server
 * one connection, and a grant is never wasted for want of a second. The
 * renewer then calls rowlock_renew() on the application's handle itself,
 * holding the client's connection mutex for the whole call
 * (rowlock__db_try_hold: never while the application's thread holds it, as
 * rowlock_renew() and rowlock_release() do for their whole call, nor inside
 * a transaction), and puts the application's last error back afterwards.
 * The final release (and rowlock_keep(l, NULL)) forgets the entry first,
 * waiting for a renewal in flight. A lost connection is reconnected by the
 * renewal's statement, as on the keeper's own client.
 *
 * Renewal: the strategy's own renew, through a shadow handle bound to the
 * keeper's client (same name, strategy and token). It never re-acquires: it
 * changes the row only while owner and token match and the lease has not
 * ended, so a lock that is gone stays gone (LOST).
 *
 * for-update: the lock is the holding session's transaction. The keeper
 * polls that session's socket for hang-up (POLLRDHUP/POLLHUP/POLLERR) and
 * never reads or writes it, so the application may use its connection
 * meanwhile. A hang-up means the server ended the session and the lock.
 *
 * Safe-until: before each renewal the keeper notes the monotonic time it
 * sends it; the server computes the new lease end from its own clock when it
 * runs the statement, later than that send. So, for a confirmed renewal,
 * sent + lease is a lower bound of the lease end, up to the rate difference
 * of the two clocks (ROWLOCK__KEEP_DRIFT_PPM of the lease is taken off).
 * The grant itself counts the same way from the start of the acquire call.
 *
 * Locking: one mutex per keeper guards its list and every entry's state.
 * The application's thread takes it to add and remove entries and to read
 * status; the keeper's threads drop it around every round trip and callback,
 * marking the entry busy, and keeper_forget() waits until an entry
 * is not busy before unlinking it, so a renewal never races a release.
 */
#include "rowlock_int.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* Clock-rate drift allowed between this host and the server: 1000 ppm
 * (0.1 %), twice NTP's maximum slew rate. */
#define ROWLOCK__KEEP_DRIFT_PPM 1000
/* Backoff between failed renewals: 100 ms doubling to 1 s. */
#define KEEP_RETRY_BASE_US 100000
#define KEEP_RETRY_CAP_US 1000000
/* The keeper wakes at least this often (a new entry wakes it at once). */
#define KEEP_TICK_US 1000000

struct rowlock__kept {
    rowlock__kept *next;
    rowlock_lock *lock;      /* the application's handle: identity only */
    rowlock_lock *shadow;    /* bound to the keeper's client (lease strategies);
                                made, used and freed by the renewer thread only */
    char name[ROWLOCK_NAME_MAX + 1];
    rowlock_strategy strategy;
    uint64_t token;
    int held_multi;          /* a holders-table grant (shared, semaphore: holders.c) */
    uint64_t epoch;          /* the grant's failover epoch (epoch.c): the shadow renews under it */
    int fd;                  /* for-update: the holding session's socket; else -1 */
    int ping;                /* for-update on a connection of ours: keep the session alive */
    int same;                /* a lease lock renewed on the application's client
                                (ROWLOCK_KEEP_SAME_CONNECTION): no shadow */
    int64_t lease_ms, interval_us, warn_us;
    int64_t next_us;         /* next renewal (monotonic µs) */
    unsigned attempt;        /* failed renewals in a row */
    int busy;                /* keeper threads working on it without the mutex */
    int renewing;            /* the renewer has a round trip in flight for it */
    int notified;            /* the callback ran (a loss, or a safe time running
                                out); a renewal that moves the safe time away
                                again re-arms it */
    int64_t safe_until;
    rowlock_keep_info st;
    rowlock_keep_fn fn;
    void *arg;
};

struct rowlock__keeper {
    pthread_mutex_t mu;
    pthread_cond_t idle;     /* an entry stopped being busy */
    pthread_cond_t work;     /* wakes the renewer (CLOCK_MONOTONIC) */
    pthread_t renewer, watcher;
    int threads;             /* how many of the two started */
    int efd;                 /* eventfd: wakes the watcher */
    int stop;
    pid_t pid;               /* the process the thread runs in */
    rowlock_client *conn;    /* the keeper's own client (lease strategies) */
    rowlock__kept *head;
    rowlock__kept *dead;     /* unlinked entries whose shadows the renewer frees */
    uint64_t rng;
    rowlock__logsink *log;   /* the application client's logging hook */
};

/* An event of a kept lock (mutex held: the entry and its handle are alive). */
#define KEEP_LOG(k, e, level, kind, x, ...)                                                                   \
    do {                                                                                                     \
        if (rowlock__log_on((k)->log, (level)))                                                              \
            rowlock__log_emit((k)->log, (level), ROWLOCK_EVENT_##kind, (e)->name, (e)->strategy, (e)->token,  \
                              (x), __VA_ARGS__);                                                             \
    } while (0)

static const char *const state_names[] = { "none", "held", "unknown", "lost" };

/* The entry's state just changed to e->st.state: tell the hook. */
static void state_event(rowlock__keeper *k, rowlock__kept *e)
{
    rowlock_keep_state to = e->st.state;
    int level = to == ROWLOCK_KEEP_LOST ? ROWLOCK_LOG_ERROR : to == ROWLOCK_KEEP_UNKNOWN ? ROWLOCK_LOG_WARN : ROWLOCK_LOG_INFO;
    KEEP_LOG(k, e, level, KEEP_STATE, RL_EVX(.code = e->st.code, .keep_state = to), "%s (%s): keeper: %s%s%s",
             e->lock->shown, rowlock_strategy_name(e->strategy), state_names[to], e->st.reason[0] ? ": " : "",
             e->st.reason);
}

ROWLOCK_EXTERN int64_t rowlock_monotonic_us(void)
{
    return rowlock__now_us();
}

static int64_t drift_us(int64_t lease_ms)
{
    return lease_ms * 1000 / 1000000 * ROWLOCK__KEEP_DRIFT_PPM + 1;
}

/* A lock that lives in its session (a transaction), not in a lease row. */
static int is_session_lock(const rowlock_lock *l)
{
    return (l->ops->flags & ROWLOCK__S_TRANSACTION) != 0;
}

/* Wake both threads (mutex held or not). */
static void wake(rowlock__keeper *k)
{
    pthread_cond_signal(&k->work);
    uint64_t one = 1;
    ssize_t w;
    do {
        w = write(k->efd, &one, sizeof one);
    } while (w < 0 && errno == EINTR);
    /* EAGAIN: the counter is full, so the thread wakes anyway */
}

/* reason = prefix + detail, truncated, one line. */
static void set_reason(rowlock__kept *e, const char *prefix, const char *detail)
{
    size_t n = rowlock__strlcpy(e->st.reason, prefix, sizeof e->st.reason);
    if (n < sizeof e->st.reason)
        rowlock__strlcpy(e->st.reason + n, detail, sizeof e->st.reason - n);
    for (char *p = e->st.reason; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

/* Called with the mutex held: the entry's state after `now`. */
static void refresh(rowlock__keeper *k, rowlock__kept *e, int64_t now)
{
    if (e->st.state == ROWLOCK_KEEP_LOST) {
        e->st.safe_until_us = 0;
        e->st.safe_ms = 0;
        return;
    }
    e->st.safe_until_us = e->safe_until;
    if (e->st.state == ROWLOCK_KEEP_HELD && now >= e->safe_until - e->warn_us) {
        /* A renewal is overdue (in flight, blocked): say so before the
         * renewer can. */
        e->st.state = ROWLOCK_KEEP_UNKNOWN;
        e->st.code = ROWLOCK_EDB;
        set_reason(e, "", "no renewal confirmed in time (the server does not answer, or the row is locked)");
        state_event(k, e);
    }
    if (e->safe_until == INT64_MAX)
        e->st.safe_ms = INT64_MAX / 1000;
    else
        e->st.safe_ms = e->safe_until > now ? (e->safe_until - now) / 1000 : 0;
}

/* ---- the keeper's threads ------------------------------------------------- */

static void entry_free(rowlock__kept *e);

/* A confirmed renewal moved the safe time out of the warning window, even
 * as of the next renewal's time: a later warning, or the loss, is told
 * again (mutex held). A warn_ms so long that every healthy renewal leaves
 * the safe time inside the window re-arms nothing (a review: it warned
 * once per interval for ever); such a lock is told once per grant, as
 * before. */
static void rearm(rowlock__kept *e, int64_t now)
{
    const int64_t next = e->next_us > now ? e->next_us : now;
    if (e->notified && e->st.state != ROWLOCK_KEEP_LOST && e->safe_until - e->warn_us > next)
        e->notified = 0;
}

/* Run the callback once for this grant (again only after rearm()), without
 * the mutex (the entry is busy meanwhile, so it cannot be unlinked).
 * Watcher thread only. */
static void notify(rowlock__keeper *k, rowlock__kept *e)
{
    e->notified = 1;
    if (e->fn == NULL)
        return;
    refresh(k, e, rowlock__now_us());
    rowlock_keep_info snap = e->st;
    e->busy++;
    pthread_mutex_unlock(&k->mu);
    e->fn(e->lock, &snap, e->arg);
    pthread_mutex_lock(&k->mu);
    e->busy--;
    pthread_cond_broadcast(&k->idle);
}

static void mark_lost(rowlock__keeper *k, rowlock__kept *e, int code, const char *prefix, const char *detail)
{
    e->st.state = ROWLOCK_KEEP_LOST;
    e->st.code = code;
    e->safe_until = 0;
    set_reason(e, prefix, detail);
    state_event(k, e);
    wake(k); /* the watcher runs the callback */
}

/* One renewal of a lease lock, mutex held on entry and exit. Renewer thread. */
static void renew_one(rowlock__keeper *k, rowlock__kept *e)
{
    int64_t lease_ms = e->lease_ms, safe_until = e->safe_until;
    uint64_t session = e->st.session_id;
    e->busy++;
    e->renewing = 1;
    pthread_mutex_unlock(&k->mu);
    int rc = 0;
    if (e->shadow == NULL && e->fd < 0 && !e->same) {
        /* Made here: the renewer is the only thread that uses k->conn. */
        rc = rowlock__lock_shadow(&e->shadow, k->conn, e->name, e->strategy, e->token, e->held_multi);
        if (rc == 0)
            e->shadow->epoch = e->epoch;
    }
    int64_t sent = rowlock__now_us();
    char msg[ROWLOCK__ERRMSG_MAX];
    uint64_t sid;
    int app_busy = 0;
    if (e->fd >= 0) {
        /* for-update: the lock is the session; its keep-alive runs on the
         * application's connection when the application is not using it
         * (db_connect.c's connection mutex), and waits for the answer no longer
         * than the safe time. */
        rowlock_client *ac = e->lock->client;
        sid = session;
        msg[0] = '\0';
        rc = rowlock__db_ping_session(ac, (unsigned long)sid, safe_until, &sent, msg, sizeof msg);
        app_busy = rc == ROWLOCK_EBUSY;
    } else if (e->same) {
        /* One connection: the application's handle renews on its own
         * client, under the connection's mutex for the whole renewal; its
         * thread is not using the client (or waits for the mutex). */
        rowlock_client *ac = e->lock->client;
        sid = session;
        msg[0] = '\0';
        if (rowlock__db_try_hold(ac) != 0) {
            rc = ROWLOCK_EBUSY;
            app_busy = 1;
        } else {
            rowlock__errsave saved;
            rowlock__error_save(ac, &saved);
            sent = rowlock__now_us();
            rc = rowlock_renew(e->lock, lease_ms);
            rowlock__strlcpy(msg, ac->errmsg, sizeof msg);
            sid = rowlock__db_thread_id(ac);
            rowlock__error_restore(ac, &saved); /* the application's last error stays its own */
            rowlock__db_unhold(ac);
        }
    } else {
        if (rc == 0)
            rc = rowlock_renew(e->shadow, lease_ms);
        rowlock__strlcpy(msg, rowlock_client_errmsg(k->conn), sizeof msg);
        sid = rowlock__db_thread_id(k->conn);
    }
    int64_t done = rowlock__now_us();
    pthread_mutex_lock(&k->mu);
    e->busy--;
    e->renewing = 0;
    pthread_cond_broadcast(&k->idle);
    if (app_busy) {
        /* The application's thread has a statement on the connection, which
         * keeps the session alive too: nothing was sent; look again soon. */
        e->next_us = rowlock__now_us() + 10000;
        return;
    }
    e->st.session_id = sid;
    if (e->st.state == ROWLOCK_KEEP_LOST) {
        /* The application learned of the loss meanwhile, or (one connection)
         * the renewal through its handle told keeper_lost(): the watcher
         * runs the callback. */
        wake(k);
        return;
    }
    if (rc == 0) {
        int was = e->st.state;
        e->st.renewals++;
        e->attempt = 0;
        e->st.state = ROWLOCK_KEEP_HELD;
        e->st.code = 0;
        e->st.reason[0] = '\0';
        if (was != ROWLOCK_KEEP_HELD)
            state_event(k, e);
        if (sent + lease_ms * 1000 - drift_us(lease_ms) > e->safe_until)
            e->safe_until = sent + lease_ms * 1000 - drift_us(lease_ms);
        e->next_us = sent + e->interval_us;
        rearm(e, done);
        wake(k); /* the watcher's next deadline moved */
        return;
    }
    e->st.failures++;
    if (rc == ROWLOCK_ENOTOWNER || rc == ROWLOCK_EINVALID) {
        mark_lost(k, e, ROWLOCK_ENOTOWNER, "", msg);
        return;
    }
    /* Transient (EDB, EBUSY: a lock wait, a lost connection the next call
     * reconnects, ENOMEM): retry with backoff while the lease lasts. */
    int was = e->st.state;
    e->st.state = ROWLOCK_KEEP_UNKNOWN;
    e->st.code = rc;
    set_reason(e, "renewal failed, retrying: ", msg);
    /* Backoff capped at a tenth of the lease (50 ms to 1 s): on a short
     * lease the retries must still come several times before the safe time
     * runs out, so a server read-only for a moment (a switchover) is ridden
     * out instead of found too late. */
    int64_t cap = (int64_t)lease_ms * 100;
    cap = cap < 50000 ? 50000 : cap > KEEP_RETRY_CAP_US ? KEEP_RETRY_CAP_US : cap;
    int64_t pause = rowlock__backoff_us(e->attempt < 16 ? e->attempt : 16, cap < KEEP_RETRY_BASE_US ? cap : KEEP_RETRY_BASE_US,
                                        cap, rowlock__rand32(&k->rng));
    e->next_us = done + pause;
    e->attempt++;
    KEEP_LOG(k, e, ROWLOCK_LOG_WARN, RENEW_RETRY, RL_EVX(.code = rc, .waited_us = pause, .attempt = e->attempt),
             "%s (%s): renewal %u failed, retry in %.3f s: %s", e->lock->shown, rowlock_strategy_name(e->strategy),
             e->attempt, (double)pause / 1e6, msg);
    if (was != ROWLOCK_KEEP_UNKNOWN)
        state_event(k, e);
}

/*
 * The renewer: renews each lease entry when it is due, one round trip at a
 * time on the keeper's connection. A round trip can block (a row lock held
 * by someone else, a server that does not answer): that delays the other
 * renewals, never a callback, which the watcher thread runs.
 */
static void *renewer_main(void *arg)
{
    rowlock__keeper *k = arg;
    rowlock__db_thread_init();
    pthread_mutex_lock(&k->mu);
    while (!k->stop) {
        if (k->dead) {
            rowlock__kept *d = k->dead;
            k->dead = NULL;
            pthread_mutex_unlock(&k->mu);
            while (d) {
                rowlock__kept *n = d->next;
                entry_free(d);
                d = n;
            }
            pthread_mutex_lock(&k->mu);
            continue;
        }
        int64_t now = rowlock__now_us(), next = now + KEEP_TICK_US;
        rowlock__kept *due = NULL;
        for (rowlock__kept *e = k->head; e; e = e->next) {
            if ((e->fd >= 0 && !e->ping) || e->st.state == ROWLOCK_KEEP_LOST || e->renewing)
                continue;
            if (e->next_us <= now) {
                due = e;
                break;
            }
            if (e->next_us < next)
                next = e->next_us;
        }
        if (due != NULL) {
            renew_one(k, due);
            continue;
        }
        struct timespec ts = { (time_t)(next / 1000000), (long)(next % 1000000) * 1000 };
        (void)pthread_cond_timedwait(&k->work, &k->mu, &ts); /* timeout or a new entry: scan again */
    }
    pthread_mutex_unlock(&k->mu);
    rowlock__db_thread_end();
    return NULL;
}

/*
 * The watcher: runs the callbacks (a lost lock; a lock whose safe-until time
 * comes within warn_ms with no renewal confirmed) and watches the sockets of
 * for-update holders for hang-up. It never waits on the database.
 */
static void *watcher_main(void *arg)
{
    rowlock__keeper *k = arg;
    pthread_mutex_lock(&k->mu);
    while (!k->stop) {
        int64_t now = rowlock__now_us(), next = now + KEEP_TICK_US;
        rowlock__kept *due = NULL;
        for (rowlock__kept *e = k->head; e; e = e->next) {
            if (e->notified)
                continue;
            if (e->st.state == ROWLOCK_KEEP_LOST || now >= e->safe_until - e->warn_us) {
                due = e;
                break;
            }
            if (e->safe_until - e->warn_us < next)
                next = e->safe_until - e->warn_us;
        }
        if (due != NULL) {
            notify(k, due);
            continue; /* the list may have changed meanwhile */
        }

        /* Wait for the next deadline, a wake-up, or a session's hang-up. */
        struct pollfd pf[1 + 64];
        rowlock__kept *who[1 + 64];
        int n = 0;
        pf[n].fd = k->efd;
        pf[n].events = POLLIN;
        who[n++] = NULL;
        for (rowlock__kept *e = k->head; e && n < (int)(sizeof pf / sizeof pf[0]); e = e->next) {
            if (e->fd >= 0 && e->st.state != ROWLOCK_KEEP_LOST) {
                pf[n].fd = e->fd;
                pf[n].events = POLLRDHUP;
                who[n++] = e;
            }
        }
        int64_t wait_us = next - now;
        int timeout = wait_us <= 0 ? 0 : (int)((wait_us + 999) / 1000);
        pthread_mutex_unlock(&k->mu);
        int pr = poll(pf, (nfds_t)n, timeout);
        pthread_mutex_lock(&k->mu);
        if (pr <= 0)
            continue; /* timeout, or EINTR: recompute */
        if (pf[0].revents & POLLIN) {
            uint64_t v;
            ssize_t r = read(k->efd, &v, sizeof v);
            (void)r; /* only a wake-up */
        }
        for (int i = 1; i < n; i++) {
            if (!(pf[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
                continue;
            /* Still ours? Entries may have been removed while we polled. */
            for (rowlock__kept *e = k->head; e; e = e->next) {
                if (e == who[i] && e->fd == pf[i].fd && e->st.state != ROWLOCK_KEEP_LOST) {
                    KEEP_LOG(k, e, ROWLOCK_LOG_ERROR, LOST, RL_EVX(.code = ROWLOCK_ENOTOWNER),
                             "%s (for-update): the holding session ended", e->lock->shown);
                    mark_lost(k, e, ROWLOCK_ENOTOWNER, "",
                              "the session holding the for-update lock ended (the server closed the "
                              "connection)");
                    break;
                }
            }
        }
    }
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

/* ---- the client's side ---------------------------------------------------- */

/* Stop the threads that started, free everything (this process's keeper). */
static void keeper_destroy(rowlock__keeper *k)
{
    pthread_mutex_lock(&k->mu);
    k->stop = 1;
    pthread_mutex_unlock(&k->mu);
    wake(k);
    if (k->threads >= 1)
        pthread_join(k->renewer, NULL);
    if (k->threads >= 2)
        pthread_join(k->watcher, NULL);
    while (k->head) {
        rowlock__kept *e = k->head;
        k->head = e->next;
        entry_free(e);
    }
    while (k->dead) {
        rowlock__kept *e = k->dead;
        k->dead = e->next;
        entry_free(e);
    }
    rowlock_client_free(k->conn);
    close(k->efd);
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->idle);
    pthread_cond_destroy(&k->work);
    free(k);
}

static int keeper_get(rowlock_client *c, rowlock__keeper **out)
{
    if (c->keeper && c->keeper->pid == getpid()) {
        *out = c->keeper;
        return 0;
    }
    if (c->keeper) /* a fork child's copy: not ours to use or to free */
        c->keeper = NULL;
    rowlock__keeper *k = calloc(1, sizeof *k);
    if (k == NULL)
        return rowlock__fail(c, ROWLOCK_ENOMEM, "keep: out of memory");
    k->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (k->efd < 0) {
        free(k);
        return rowlock__fail(c, ROWLOCK_ENOMEM, "keep: eventfd: %s", strerror(errno));
    }
    k->pid = getpid();
    k->rng = c->rng ^ 0x9e3779b97f4a7c15ull;
    k->log = c->log;
    pthread_condattr_t ca;
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->idle, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&k->work, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&k->renewer, NULL, renewer_main, k) == 0) {
        k->threads = 1;
        if (pthread_create(&k->watcher, NULL, watcher_main, k) == 0)
            k->threads = 2;
    }
    if (k->threads < 2) {
        keeper_destroy(k);
        return rowlock__fail(c, ROWLOCK_ENOMEM, "keep: cannot start the keeper's threads");
    }
    c->keeper = k;
    *out = k;
    return 0;
}

static int wrapped_unsupported(rowlock_client *c, const char *shown)
{
    return rowlock__fail(c, ROWLOCK_EUNSUPPORTED,
                         "keep %s: the keeper renews on a connection of its own, which a wrapped client "
                         "cannot open: connect the client with rowlock_client_connect(), or renew yourself",
                         shown);
}

/* The keeper's own connection, opened on first need (application thread). */
static int keeper_conn(rowlock_client *c, rowlock__keeper *k, const char *shown)
{
    if (k->conn)
        return 0;
    if (!c->owns_mysql)
        return wrapped_unsupported(c, shown);
    rowlock_client *kc = NULL;
    int rc = rowlock__client_clone(&kc, c);
    if (rc == 0) {
        /* Bound every renewal: 1 s for a row lock, 3 s for an answer. */
        kc->init_command = "SET SESSION innodb_lock_wait_timeout = 1";
        kc->conn_role = "keeper connection";
        kc->read_timeout_ms = kc->write_timeout_ms = 3000;
        if (kc->connect_timeout_ms == 0 || kc->connect_timeout_ms > 3000)
            kc->connect_timeout_ms = 3000;
        rc = rowlock__db_connect(kc);
    }
    if (rc) {
        rowlock__fail(c, rc, "keep %s: cannot open the keeper's connection: %s", shown,
                      kc ? kc->errmsg : "out of memory");
        rowlock_client_free(kc);
        return rc;
    }
    pthread_mutex_lock(&k->mu);
    k->conn = kc;
    pthread_mutex_unlock(&k->mu);
    return 0;
}

static rowlock__kept *find(rowlock__keeper *k, const rowlock_lock *l)
{
    for (rowlock__kept *e = k->head; e; e = e->next)
        if (e->lock == l)
            return e;
    return NULL;
}

/* Renewer thread, or after both threads ended. */
static void entry_free(rowlock__kept *e)
{
    rowlock__lock_shadow_free(e->shadow);
    free(e);
}

/* Unlink and free l's entry, waiting while the keeper thread works on it. */
static void keeper_forget(rowlock_lock *l)
{
    rowlock__keeper *k = l->client->keeper;
    if (k == NULL || k->pid != getpid())
        return;
    pthread_mutex_lock(&k->mu);
    rowlock__kept *e;
    while ((e = find(k, l)) != NULL && e->busy)
        pthread_cond_wait(&k->idle, &k->mu);
    if (e != NULL) {
        for (rowlock__kept **pp = &k->head; *pp; pp = &(*pp)->next) {
            if (*pp == e) {
                *pp = e->next;
                break;
            }
        }
        /* Its shadow belongs to the renewer's connection: freed there. */
        e->next = k->dead;
        k->dead = e;
        wake(k);
    }
    pthread_mutex_unlock(&k->mu);
}

/* Start keeping l's current grant (l->held > 0). */
static int track(rowlock_lock *l, int64_t sent_us)
{
    rowlock_client *c = l->client;
    rowlock__keeper *k = NULL;
    int rc = keeper_get(c, &k);
    if (rc)
        return rc;
    int session = is_session_lock(l);
    int same = !session && (l->keep.flags & ROWLOCK_KEEP_SAME_CONNECTION);
    if (!session && !same && (rc = keeper_conn(c, k, l->shown)))
        return rc;
    rowlock__kept *e = calloc(1, sizeof *e);
    if (e == NULL)
        return rowlock__fail(c, ROWLOCK_ENOMEM, "keep %s: out of memory", l->shown);
    e->lock = l;
    e->fd = -1;
    e->same = same;
    memcpy(e->name, l->name, l->name_len + 1);
    e->strategy = l->ops->id;
    e->token = l->token;
    e->held_multi = l->held_multi;
    e->epoch = l->epoch;
    e->fn = l->keep.on_event;
    e->arg = l->keep.arg;
    /* for-update: the lease is the holding session's wait_timeout, set at
     * the grant (or by rowlock_renew()); a keep-alive does not change it. */
    e->lease_ms = l->keep.lease_ms && !session ? l->keep.lease_ms : l->lease_ms;
    e->interval_us = (l->keep.interval_ms ? l->keep.interval_ms : e->lease_ms / 3) * 1000;
    if (e->interval_us < 1000)
        e->interval_us = 1000;
    int64_t warn = l->keep.warn_ms;
    if (warn == 0) {
        warn = e->lease_ms / 6;
        if (warn < 1000)
            warn = 1000;
        if (warn > e->lease_ms / 2)
            warn = e->lease_ms / 2;
    }
    e->warn_us = warn * 1000;
    e->st.version = ROWLOCK_KEEP_INFO_VERSION;
    e->st.state = ROWLOCK_KEEP_HELD;
    e->st.token = l->token;
    if (session) {
        e->fd = rowlock__db_socket(c);
        e->ping = c->owns_mysql;
        e->st.session_id = rowlock__db_thread_id(c);
        if (e->fd < 0) {
            free(e);
            return rowlock__fail(c, ROWLOCK_EDB, "keep %s (for-update): the client has no open connection", l->shown);
        }
    }
    /* The renewer makes the shadow handle on its first renewal. The
     * grant's own lease counts from the start of the acquire call; for
     * for-update, the server ends the holding session after the lease
     * without a statement on it (its wait_timeout), so the same bound holds. */
    e->safe_until = sent_us + l->lease_ms * 1000 - drift_us(l->lease_ms);
    e->next_us = sent_us + e->interval_us;
    pthread_mutex_lock(&k->mu);
    e->next = k->head;
    k->head = e;
    pthread_mutex_unlock(&k->mu);
    wake(k);
    return 0;
}

static void keeper_renewed(rowlock_lock *l, int64_t sent_us, int64_t lease_ms);

static void keeper_granted(rowlock_lock *l, int64_t sent_us, int64_t lease_ms, int new_grant)
{
    if (!l->keep_on)
        return;
    if (new_grant) {
        keeper_forget(l); /* a lapsed grant's entry, if any (lock.c has set l->grant_sent_us) */
        if (track(l, sent_us) != 0)
            l->keep_error = 1; /* reported by rowlock_keep_status() */
        return;
    }
    keeper_renewed(l, sent_us, lease_ms);
}

static void keeper_renewed(rowlock_lock *l, int64_t sent_us, int64_t lease_ms)
{
    rowlock__keeper *k = l->client->keeper;
    if (k == NULL || k->pid != getpid())
        return;
    pthread_mutex_lock(&k->mu);
    rowlock__kept *e = find(k, l);
    if (e && e->st.state != ROWLOCK_KEEP_LOST) {
        int64_t until = sent_us + lease_ms * 1000 - drift_us(lease_ms);
        if (e->fd >= 0 && lease_ms != e->lease_ms) {
            /* for-update: the session's wait_timeout is now this lease, and
             * the keep-alives count with it; a shorter one ends the old
             * bound (the renewal ran after any keep-alive: db_connect.c's mutex). */
            e->lease_ms = lease_ms;
            e->interval_us = lease_ms * 1000 / 3 < 1000 ? 1000 : lease_ms * 1000 / 3;
            e->safe_until = until;
        } else if (until > e->safe_until)
            e->safe_until = until;
        rearm(e, rowlock__now_us());
        if (e->st.state == ROWLOCK_KEEP_UNKNOWN) {
            e->st.state = ROWLOCK_KEEP_HELD;
            e->st.code = 0;
            e->st.reason[0] = '\0';
            state_event(k, e);
        }
    }
    pthread_mutex_unlock(&k->mu);
}

static void keeper_lost(rowlock_lock *l)
{
    rowlock__keeper *k = l->client->keeper;
    if (k == NULL || k->pid != getpid())
        return;
    pthread_mutex_lock(&k->mu);
    rowlock__kept *e = find(k, l);
    if (e && e->st.state != ROWLOCK_KEEP_LOST) {
        e->st.state = ROWLOCK_KEEP_LOST;
        e->st.code = ROWLOCK_ENOTOWNER;
        e->safe_until = 0;
        set_reason(e, "", l->client->errmsg);
        state_event(k, e);
    }
    pthread_mutex_unlock(&k->mu);
}

static void keeper_free(rowlock_client *c)
{
    rowlock__keeper *k = c->keeper;
    if (k == NULL)
        return;
    c->keeper = NULL;
    if (k->pid != getpid()) {
        /* A fork child's copy: the thread does not exist here, and the
         * connection belongs to the parent. Close our descriptors only. */
        if (k->conn)
            rowlock__db_abandon(k->conn);
        rowlock_client_free(k->conn);
        close(k->efd);
        return; /* the entries and the struct are the parent's memory image: leaked on purpose */
    }
    keeper_destroy(k);
}

/* What lock.c and client.c tell the keeper, through the client (set by
 * rowlock_keep(), so a client that never keeps costs them a NULL test). */
static const rowlock__keep_hooks keeper_hooks = {
    .granted = keeper_granted,
    .renewed = keeper_renewed,
    .lost = keeper_lost,
    .forget = keeper_forget,
    .client_free = keeper_free,
};

/* ---- public --------------------------------------------------------------- */

ROWLOCK_EXTERN int rowlock_keep(rowlock_lock *l, const rowlock_keep_options *opts)
{
    if (l == NULL || l->client == NULL)
        return ROWLOCK_EINVALID;
    rowlock_client *c = l->client;
    c->keeper_hooks = &keeper_hooks;
    if (opts == NULL) {
        l->keep_on = 0;
        keeper_forget(l); /* first: a renewal on this client's connection may be in flight */
        rowlock__clear_error(c);
        return 0;
    }
    rowlock__clear_error(c);
    if (opts->version < 1 || opts->version > ROWLOCK_KEEP_OPTIONS_VERSION)
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "keep %s: rowlock_keep_options.version is %u, this library knows 1-%d (start from "
                             "ROWLOCK_KEEP_OPTIONS_INIT)",
                             l->shown, opts->version, ROWLOCK_KEEP_OPTIONS_VERSION);
    /* The fields the caller's version has (an older struct is shorter). */
    rowlock_keep_options o = ROWLOCK_KEEP_OPTIONS_INIT;
    memcpy(&o, opts, offsetof(rowlock_keep_options, flags));
    o.version = ROWLOCK_KEEP_OPTIONS_VERSION;
    if (opts->version >= 2)
        o.flags = opts->flags;
    opts = &o;
    if (o.flags & ~ROWLOCK_KEEP_SAME_CONNECTION)
        return rowlock__fail(c, ROWLOCK_EINVALID, "keep %s: unknown flags 0x%x in rowlock_keep_options.flags",
                             l->shown, o.flags & ~ROWLOCK_KEEP_SAME_CONNECTION);
    if (opts->lease_ms < 0 || opts->lease_ms > ROWLOCK_LEASE_MAX_MS || opts->interval_ms < 0 ||
        opts->warn_ms < 0 || opts->interval_ms > ROWLOCK_LEASE_MAX_MS || opts->warn_ms > ROWLOCK_LEASE_MAX_MS)
        return rowlock__fail(c, ROWLOCK_EINVALID, "keep %s: lease, interval and warn must be 0..%lld ms",
                             l->shown, (long long)ROWLOCK_LEASE_MAX_MS);
    if (opts->interval_ms && opts->lease_ms && opts->interval_ms >= opts->lease_ms)
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "keep %s: renewing every %lld ms cannot keep a %lld ms lease (use at most a third)",
                             l->shown, (long long)opts->interval_ms, (long long)opts->lease_ms);
    if (!is_session_lock(l) && !c->owns_mysql) {
        if (o.flags & ROWLOCK_KEEP_SAME_CONNECTION)
            return rowlock__fail(c, ROWLOCK_EUNSUPPORTED,
                                 "keep %s: the keeper renews on the client's connection only when the client "
                                 "opened it (rowlock_client_connect()), not on a wrapped one: renew yourself",
                                 l->shown);
        return wrapped_unsupported(c, l->shown);
    }
    keeper_forget(l);
    l->keep = o;
    l->keep_on = 1;
    l->keep_error = 0;
    if (l->held > 0 && !l->lost) {
        int rc = track(l, l->grant_sent_us);
        if (rc) {
            l->keep_on = 0;
            return rc;
        }
    } else if (!is_session_lock(l) && !(o.flags & ROWLOCK_KEEP_SAME_CONNECTION)) {
        /* Open the keeper's connection now, so a later acquire costs no connect
         * (and a grant is never refused a second connection). */
        rowlock__keeper *k = NULL;
        int rc = keeper_get(c, &k);
        if (rc == 0)
            rc = keeper_conn(c, k, l->shown);
        if (rc) {
            l->keep_on = 0;
            return rc;
        }
    }
    return 0;
}

ROWLOCK_EXTERN int rowlock_keep_status(const rowlock_lock *l, rowlock_keep_info *st)
{
    /* A struct the library fills: any version but 0 (conventions, rowlock.h);
     * only version 1 exists, so every accepted struct has all its fields. */
    if (st == NULL || l == NULL || l->client == NULL || st->version == 0)
        return ROWLOCK_EINVALID;
    const unsigned int version = st->version;
    rowlock_keep_info fresh = ROWLOCK_KEEP_INFO_INIT;
    rowlock__keeper *k = l->client->keeper;
    if (k == NULL || k->pid != getpid() || !l->keep_on) {
        if (l->keep_on && l->keep_error) {
            fresh.state = ROWLOCK_KEEP_UNKNOWN;
            rowlock__strlcpy(fresh.reason, "the keeper could not start keeping this grant", sizeof fresh.reason);
        }
        fresh.version = version;
        *st = fresh;
        return 0;
    }
    pthread_mutex_lock(&k->mu);
    rowlock__kept *e = find(k, l);
    if (e) {
        refresh(k, e, rowlock__now_us());
        fresh = e->st;
    } else if (l->keep_error) {
        fresh.state = ROWLOCK_KEEP_UNKNOWN;
        rowlock__strlcpy(fresh.reason, "the keeper could not start keeping this grant", sizeof fresh.reason);
    }
    pthread_mutex_unlock(&k->mu);
    fresh.version = version;
    *st = fresh;
    return 0;
}
