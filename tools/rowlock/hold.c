/*
 * What `rowlock run` and `rowlock lock` share: the options that say how to
 * take a lock, and the lock their supervisor holds. Both supervisors
 * connect with round trips bounded by the lease, acquire in one long wait
 * that costs the server nothing while nothing changes, which a watcher
 * thread ends (rowlock_client_interrupt) as soon as a signal arrives or the
 * watched shell exits, wait out a transient server state like a busy lock, hand the
 * lease to the library's keeper (rowlock_keep: renewals every third of the
 * lease on the holder's own connection, ROWLOCK_KEEP_SAME_CONNECTION, so a
 * holder costs one server connection and a grant is never refused a second;
 * or the holding session watched for for-update), are woken by the keeper's callback through a pipe, and take
 * the lock for lost by the same rule. What each does with that differs and
 * stays in its file: run starts COMMAND, stops it before the lease could
 * end and exits with its status (run.c); lock answers `unlock` on a socket
 * until the shell that ran it exits (lock.c).
 */
#include "commands.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the options: how to take the lock ------------------------------------ */

void rl_lock_opts_init(rl_lock_opts *o)
{
    memset(o, 0, sizeof *o);
    o->strategy = ROWLOCK_STRATEGY_INSERT;
    o->wait_ms = ROWLOCK_WAIT_FOREVER;
    o->lease_ms = ROWLOCK_LEASE_DEFAULT_MS;
    o->conflict_code = CLI_EX_CONFLICT;
}

int rl_lock_opt(rl_lock_opts *o, const char *cmd, const char *usage, int id, const char *val)
{
    double s;
    unsigned long long u;
    switch (id) {
    case RL_LO_HELP:
        rl_print_cmd_help(usage, 1); /* run's, lock's: the lock-taking commands */
        return -1;
    case RL_LO_STRATEGY:
        if (rowlock_strategy_parse(&o->strategy, val) != 0) {
            fprintf(stderr, "%s: %s: unknown strategy '%s' (insert, for-update, optimistic)\n", PROG, cmd,
                    cli_q(val));
            return CLI_EX_USAGE;
        }
        return 1;
    case RL_LO_NONBLOCK:
        o->nonblock = 1;
        return 1;
    case RL_LO_WAIT:
        s = cli_parse_seconds(val);
        if (s < 0) {
            fprintf(stderr, "%s: %s: --wait: '%s' is not a non-negative number of seconds\n", PROG, cmd,
                    cli_q(val));
            return CLI_EX_USAGE;
        }
        o->wait_ms = (int64_t)llround(s * 1000.0);
        return 1;
    case RL_LO_LEASE:
        s = cli_parse_seconds(val);
        if (s < 1.0 || s * 1000.0 > (double)ROWLOCK_LEASE_MAX_MS) {
            fprintf(stderr, "%s: %s: --lease: '%s' is not a number of seconds between 1 and %lld\n", PROG, cmd,
                    cli_q(val), (long long)(ROWLOCK_LEASE_MAX_MS / 1000));
            return CLI_EX_USAGE;
        }
        o->lease_ms = (int64_t)llround(s * 1000.0);
        return 1;
    case RL_LO_CONFLICT:
        if (cli_parse_uint(val, 0, 255, &u) != 0) {
            fprintf(stderr, "%s: %s: --conflict-exit-code: '%s' is not an exit status 0-255\n", PROG, cmd,
                    cli_q(val));
            return CLI_EX_USAGE;
        }
        o->conflict_code = (int)u;
        return 1;
    case RL_LO_VERBOSE:
        o->verbose = 1;
        return 1;
    case RL_LO_SHARED:
        o->mode = ROWLOCK_MODE_SHARED;
        return 1;
    case RL_LO_EXCLUSIVE:
        o->mode = ROWLOCK_MODE_EXCLUSIVE;
        return 1;
    case RL_LO_PERMITS:
        if (cli_parse_uint(val, 1, ROWLOCK_PERMITS_MAX, &u) != 0) {
            fprintf(stderr, "%s: %s: --permits: '%s' is not a number of permits 1-%u\n", PROG, cmd, cli_q(val),
                    ROWLOCK_PERMITS_MAX);
            return CLI_EX_USAGE;
        }
        o->permits = (unsigned int)u;
        o->mode = ROWLOCK_MODE_SHARED;
        return 1;
    case RL_LO_NAME:
        if (cli_check_name(PROG, cmd, val) != 0)
            return CLI_EX_USAGE;
        if (o->n_names == RL_NAMES_MAX) {
            fprintf(stderr, "%s: %s: at most %d names (-N) at once\n", PROG, cmd, RL_NAMES_MAX);
            return CLI_EX_USAGE;
        }
        o->names[o->n_names++] = val;
        return 1;
    default:
        return 0;
    }
}

void rl_lock_opts_done(rl_lock_opts *o)
{
    if (o->nonblock)
        o->wait_ms = 0;
}

/* ---- the held lock -------------------------------------------------------------- */

void rl_hold_init(rl_hold *h)
{
    memset(h, 0, sizeof *h);
    h->wake[0] = h->wake[1] = -1;
}

int rl_hold_connect(rl_hold *h, cli_conn *cc, const rl_lock_opts *o)
{
    int rc;
    /* Bound each round trip so a hung server cannot stall rowlock for long
     * (the lease deadline is enforced independently of the renewals). */
    int64_t io_ms = o->lease_ms / 2;
    if (io_ms < 2000)
        io_ms = 2000;
    if (io_ms > 30000)
        io_ms = 30000;
    if (cc->opts.read_timeout_ms == 0)
        cc->opts.read_timeout_ms = (unsigned int)io_ms;
    if (cc->opts.write_timeout_ms == 0)
        cc->opts.write_timeout_ms = (unsigned int)io_ms;
    h->read_timeout_ms = cc->opts.read_timeout_ms;
    rc = cli_conn_open_wait(cc, PROG, 0, o->wait_ms, o->verbose, &h->c); /* may prompt on /dev/tty (--password) */
    if (rc != 0)
        return rc;
    if (o->verbose)
        (void)cli_log_to_stderr(h->c, PROG, ROWLOCK_LOG_INFO); /* the library's events, one line each */
    return 0;
}

int rl_hold_new(rl_hold *h, const rl_lock_opts *o, const char *cmd, const char *name)
{
    return rl_hold_new_set(h, o, cmd, &name, 1);
}

int rl_hold_new_set(rl_hold *h, const rl_lock_opts *o, const char *cmd, const char *const *names, size_t n)
{
    rowlock_lock_options lo = ROWLOCK_LOCK_OPTIONS_INIT;
    int rc;
    lo.strategy = o->strategy;
    lo.mode = o->mode;
    lo.permits = o->permits;
    for (h->n = 0; h->n < n; h->n++) {
        rc = rowlock_lock_new(&h->ls[h->n], h->c, names[h->n], &lo);
        if (rc != 0) {
            cli_report(PROG, cmd, h->c, rc);
            return cli_exit_for(rc);
        }
        h->l = h->ls[0];
    }
    return 0;
}

int rl_hold_release(rl_hold *h, int64_t budget_ms, rowlock_lock **bad, char *errmsg, size_t cap)
{
    int first = 0;
    *bad = NULL;
    if (cap > 0)
        errmsg[0] = '\0';
    /* Last first, as rowlock_release_many; each retried over a failover.
     * The first failure is returned, its message copied (a later release on
     * h->c replaces the client's). */
    for (size_t i = h->n; i-- > 0;) {
        if (rowlock_lock_held(h->ls[i]) == 0)
            continue; /* nothing held (lost: the caller reports that) */
        int rc = cli_release_retrying(h->ls[i], h->c, budget_ms);
        if (rc != 0 && first == 0) {
            first = rc;
            *bad = h->ls[i];
            if (cap > 0)
                snprintf(errmsg, cap, "%s", rowlock_client_errmsg(h->c));
        }
    }
    return first;
}

void rl_hold_unkeep(rl_hold *h)
{
    for (size_t i = 0; i < h->n; i++)
        if (rowlock_keep(h->ls[i], NULL) != 0) { /* stopping never fails */ }
}

int rl_hold_all_held(const rl_hold *h)
{
    for (size_t i = 0; i < h->n; i++)
        if (rowlock_lock_held(h->ls[i]) == 0)
            return 0;
    return h->n > 0;
}

char *rl_names_shown(const char *const *names, size_t n, size_t *w)
{
    size_t cap = 1, len = 0;
    char *out = NULL;
    if (n == 1)
        return cli_human_str(names[0], w);
    for (size_t i = 0; i < n; i++) {
        size_t one_w;
        char *one = cli_human_str(names[i], &one_w);
        if (one == NULL) {
            free(out);
            return NULL;
        }
        size_t k = strlen(one);
        char *grown = realloc(out, cap + k + 4);
        if (grown == NULL) {
            free(one);
            free(out);
            return NULL;
        }
        out = grown;
        cap += k + 4;
        if (i > 0) {
            memcpy(out + len, "', '", 4);
            len += 4;
        }
        memcpy(out + len, one, k);
        len += k;
        out[len] = '\0';
        free(one);
    }
    *w = len;
    return out;
}

int rl_hold_any_held(const rl_hold *h)
{
    for (size_t i = 0; i < h->n; i++)
        if (rowlock_lock_held(h->ls[i]) > 0)
            return 1;
    return 0;
}

/*
 * The watcher of a waiting acquire: a thread that asks `stop` every 50 ms
 * (pending signals, the watched shell; no statement) and, once it answers,
 * interrupts the client's wait (rowlock_client_interrupt: the blocked
 * statement returns at once). So the acquire itself can wait in one call,
 * and an idle waiter costs the server what the library's wait costs (a
 * waiter behind the queue's head: a statement or two per 30 s), not a new
 * acquire every second.
 */
typedef struct acq_watch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;    /* the acquire returned: stop watching */
    int stopped; /* what `stop` answered (0 nothing) */
    int (*stop)(void *arg);
    void *arg;
    rowlock_client *c;
} acq_watch;

#define WATCH_PERIOD_NS 50000000L

static void *acq_watch_main(void *p)
{
    acq_watch *w = p;
    pthread_mutex_lock(&w->mu);
    while (!w->done) {
        pthread_mutex_unlock(&w->mu);
        int s = w->stop(w->arg);
        pthread_mutex_lock(&w->mu);
        if (s != 0) {
            w->stopped = s;
            if (!w->done)
                rowlock_client_interrupt(w->c);
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += WATCH_PERIOD_NS;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (!w->done)
            (void)pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* 0 started, -1 not (the caller then waits in 1 s slices, as before). */
static int acq_watch_start(acq_watch *w, pthread_t *t, rowlock_client *c, int (*stop)(void *), void *arg)
{
    pthread_condattr_t ca;
    memset(w, 0, sizeof *w);
    w->stop = stop;
    w->arg = arg;
    w->c = c;
    if (pthread_condattr_init(&ca) != 0)
        return -1;
    int ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&w->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok)
        return -1;
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        pthread_cond_destroy(&w->cv);
        return -1;
    }
    if (pthread_create(t, NULL, acq_watch_main, w) != 0) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        return -1;
    }
    return 0;
}

/* Ends the watcher; returns what `stop` answered while it watched. */
static int acq_watch_end(acq_watch *w, pthread_t t)
{
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    (void)pthread_join(t, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    return w->stopped;
}

int rl_hold_acquire(rl_hold *h, const rl_lock_opts *o, int (*stop)(void *arg), void *arg, int *stopped)
{
    int64_t deadline = 0;
    int rc;
    acq_watch w;
    pthread_t wt;
    int watching = 0;

    *stopped = 0;
    h->t_start = cli_mono_us();
    if (o->wait_ms > 0)
        deadline = h->t_start + o->wait_ms * 1000;
    if (o->wait_ms != 0)
        watching = acq_watch_start(&w, &wt, h->c, stop, arg) == 0;
    for (;;) {
        int64_t slice;
        /* With the watcher, one name: the whole wait in one call (transient
         * server states end it early: the loop goes on; for-update: slices
         * within the read timeout). Several names stay
         * in 1 s slices, each all or none (a set that cannot be had within
         * one gives back what it took, so names are not held while others
         * are waited for). Without the watcher: 1 s slices, and `stop`
         * asked between them. */
        int64_t cap = watching && h->n == 1 ? INT64_MAX : 1000;
        if (cap == INT64_MAX && o->strategy == ROWLOCK_STRATEGY_FOR_UPDATE) {
            /* for-update waits in one statement: within the read timeout,
             * or the client library would cut it (a reconnect, and the
             * waiter's place in InnoDB's queue lost) */
            cap = h->read_timeout_ms > 2000 ? (int64_t)h->read_timeout_ms - 1000 : 1000;
        }
        if (o->wait_ms == 0) {
            slice = 0;
        } else if (o->wait_ms == ROWLOCK_WAIT_FOREVER) {
            slice = cap == INT64_MAX ? ROWLOCK_WAIT_FOREVER : cap;
        } else {
            slice = (deadline - cli_mono_us() + 999) / 1000;
            if (slice > cap)
                slice = cap;
            if (slice < 0)
                slice = 0;
        }
        h->t_try = cli_mono_us();
        if (h->n > 1) {
            /* Several names: each slice is all or none (rowlock_acquire_many
             * gives back what it took when a name stays busy). */
            size_t failed;
            rc = rowlock_acquire_many(h->ls, h->n, slice, o->lease_ms, &failed);
        } else {
            rc = rowlock_acquire(h->l, slice, o->lease_ms);
        }
        /* A transient server state (a restart, read-only, a connection
         * limit: rowlock_client_transient) is waited out like a busy lock:
         * the library retries with backoff within each slice. */
        if (rc != ROWLOCK_EBUSY && !(rc == ROWLOCK_EDB && o->wait_ms != 0 && rowlock_client_transient(h->c)))
            break;
        if (watching) {
            pthread_mutex_lock(&w.mu);
            *stopped = w.stopped;
            pthread_mutex_unlock(&w.mu);
        } else {
            *stopped = stop(arg);
        }
        if (*stopped != 0)
            break;
        if (o->wait_ms == 0 || (o->wait_ms > 0 && cli_mono_us() >= deadline))
            break;
    }
    if (watching) {
        /* What the watcher saw counts even if the acquire was granted in
         * the meantime (it may have cut the connection and consumed the
         * signal): the caller stops and releases, as for a signal that
         * ended the wait; the grant lapses with its lease if the release
         * cannot reach the server. */
        int s = acq_watch_end(&w, wt);
        if (*stopped == 0)
            *stopped = s;
        /* (a lock that a release handed to the cut wait's session in that
         * moment was given back by the library before the acquire returned) */
    }
    h->t_acq = cli_mono_us();
    if (rc == 0) {
        for (size_t i = 0; i < h->n; i++)
            h->tokens[i] = rowlock_lock_token(h->ls[i]);
        h->token = h->tokens[0];
    }
    return rc;
}

/* The keeper's callback (keeper thread): only a wake-up; the supervisor
 * reads the status itself. */
static void on_keep_event(rowlock_lock *l, const rowlock_keep_info *st, void *arg)
{
    const rl_hold *h = arg;
    char b = 1;
    ssize_t n;
    (void)l;
    (void)st;
    do {
        n = write(h->wake[1], &b, 1);
    } while (n < 0 && errno == EINTR);
    /* EAGAIN: the pipe is full, the supervisor wakes anyway */
}

int rl_hold_keep(rl_hold *h, const rl_lock_opts *o, const char *cmd, const char *fail)
{
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    int rc;
    if (pipe2(h->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        h->wake[0] = h->wake[1] = -1;
        fprintf(stderr, "%s: %s: pipe: %s\n", PROG, cmd, strerror(errno));
        return CLI_EX_UNAVAILABLE;
    }
    ko.lease_ms = o->lease_ms;
    ko.on_event = on_keep_event;
    ko.arg = h;
    /* One connection: the supervisor's thread does not use it while it
     * holds the lock (it waits for COMMAND, or for `unlock`); the names of
     * a set (-N) take turns on it. */
    ko.flags = ROWLOCK_KEEP_SAME_CONNECTION;
    for (size_t i = 0; i < h->n; i++) {
        rc = rowlock_keep(h->ls[i], &ko);
        if (rc != 0) {
            cli_report(PROG, fail, h->c, rc);
            return cli_exit_for(rc);
        }
    }
    return 0;
}

int rl_hold_confirm(rl_hold *h, const rl_lock_opts *o, const char *fail)
{
    if (h->t_acq - h->t_try > 100000) {
        /* The successful call waited: the grant was made somewhere within it,
         * so its start is a poor lower bound for the lease start. Renew once
         * to know exactly (a failure here is handled like any failed renewal). */
        for (size_t i = 0; i < h->n; i++) {
            int rc = rowlock_renew(h->ls[i], o->lease_ms);
            if (rc != 0 && rc != ROWLOCK_EDB) {
                cli_report(PROG, fail, h->c, rc);
                return CLI_EX_TEMPFAIL;
            }
        }
    }
    return 0;
}

int rl_hold_check(rl_hold *h, int64_t now, int64_t margin, rowlock_keep_info *ki, int *renewed)
{
    /* Several names: the set is as safe as its least safe name, and lost
     * when any name is (the command ran on all of them). *ki is that name's
     * status; *renewed says any name was renewed. */
    uint64_t total = 0;
    int lost = 0;
    for (size_t i = 0; i < h->n; i++) {
        rowlock_keep_info one = ROWLOCK_KEEP_INFO_INIT;
        if (rowlock_keep_status(h->ls[i], &one) != 0)
            abort(); /* a valid handle and info: cannot fail */
        total += one.renewals;
        int gone = one.state == ROWLOCK_KEEP_LOST || one.state == ROWLOCK_KEEP_NONE;
        if (i == 0 || (gone && !lost) || (!lost && one.safe_until_us < ki->safe_until_us))
            *ki = one;
        lost |= gone;
    }
    *renewed = total > h->renewals_seen;
    if (*renewed)
        h->renewals_seen = total;
    return ki->state == ROWLOCK_KEEP_LOST || ki->state == ROWLOCK_KEEP_NONE ||
           (ki->safe_until_us != INT64_MAX && now >= ki->safe_until_us - margin);
}

void rl_hold_wake_drain(rl_hold *h)
{
    char buf[64];
    while (read(h->wake[0], buf, sizeof buf) > 0) {
    } /* only a wake-up: the status is read under the keeper's mutex */
}

void rl_hold_done(rl_hold *h)
{
    int k;
    /* Keeping ends before the pipe its callback writes to is closed. */
    rl_hold_unkeep(h);
    for (k = 0; k < 2; k++)
        if (h->wake[k] >= 0)
            (void)close(h->wake[k]);
    h->wake[0] = h->wake[1] = -1;
    for (size_t i = 0; i < h->n; i++)
        rowlock_lock_free(h->ls[i]);
    h->n = 0;
    rowlock_client_free(h->c);
    h->l = NULL;
    h->c = NULL;
}
