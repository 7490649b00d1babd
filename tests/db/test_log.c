/*
 * The logging hook (rowlock_client_set_log), against the shared test server:
 * which events an application receives, in which order, from which thread,
 * and what filtering and unregistering do. Built with the fault seam
 * (ROWLOCK_FAULT_INJECTION, src/rowlock_int.h) so a deadlock retry and a
 * lost connection happen on cue.
 *
 *     test_log            all tests
 *     test_log FILTER     the tests whose name matches (cmocka filter)
 */
#include "testutil.h"

#include <pthread.h>
#include <stdlib.h>

#include "rowlock_int.h"

#define TABLE "t_log"
#define MAXEV 256

typedef struct rec {
    rowlock_log_level level;
    rowlock_event_kind kind;
    char name[ROWLOCK_NAME_MAX + 1];
    rowlock_strategy strategy;
    uint64_t token;
    int64_t waited_us, elapsed_us;
    unsigned attempt;
    int code;
    unsigned db_errno;
    rowlock_keep_state keep_state;
    int main_thread;
    char message[800];
} rec;

typedef struct recorder {
    pthread_mutex_t mu;
    int n;
    rec ev[MAXEV];
} recorder;

static pthread_t main_thread;

static void on_log(const rowlock_event *ev, void *arg)
{
    recorder *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->n < MAXEV) {
        rec *e = &r->ev[r->n++];
        if (ev->version != ROWLOCK_EVENT_VERSION)
            fail_msg("event version %u, the header says %d", ev->version, ROWLOCK_EVENT_VERSION);
        e->level = ev->level;
        e->kind = ev->kind;
        snprintf(e->name, sizeof e->name, "%s", ev->lock_name);
        e->strategy = ev->strategy;
        e->token = ev->token;
        e->waited_us = ev->waited_us;
        e->elapsed_us = ev->elapsed_us;
        e->attempt = ev->attempt;
        e->code = ev->code;
        e->db_errno = ev->db_errno;
        e->keep_state = ev->keep_state;
        e->main_thread = pthread_equal(pthread_self(), main_thread);
        snprintf(e->message, sizeof e->message, "%s", ev->message);
    }
    pthread_mutex_unlock(&r->mu);
}

/* Recorders live for the whole program: a hook still set when a test ends
 * (its clients are freed by the teardown, which may release) writes into
 * memory that stays valid; each test starts from empty ones. */
static recorder recorders[2];
static int recorders_used;

static recorder *rec_new(void)
{
    assert_true(recorders_used < 2);
    recorder *r = &recorders[recorders_used++];
    pthread_mutex_lock(&r->mu);
    r->n = 0;
    pthread_mutex_unlock(&r->mu);
    return r;
}

static void rec_free(recorder *r)
{
    (void)r;
}

static int rec_count(recorder *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* The kinds recorded, as "acquired,released", for messages and comparisons. */
static const char *rec_kinds(recorder *r, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? "," : "", rowlock_event_kind_name(r->ev[i].kind));
    pthread_mutex_unlock(&r->mu);
    return buf;
}

static void expect_kinds(recorder *r, const char *want)
{
    char got[4096];
    rec_kinds(r, got, sizeof got);
    if (strcmp(got, want) != 0) {
        pthread_mutex_lock(&r->mu);
        for (int i = 0; i < r->n; i++)
            fprintf(stderr, "#   %s %s: %s\n", rowlock_log_level_name(r->ev[i].level),
                    rowlock_event_kind_name(r->ev[i].kind), r->ev[i].message);
        pthread_mutex_unlock(&r->mu);
        fail_msg("events: got [%s], want [%s]", got, want);
    }
}

/* The first event of `kind` at index >= from, or -1. */
static int rec_find(recorder *r, rowlock_event_kind kind, int from)
{
    pthread_mutex_lock(&r->mu);
    int at = -1;
    for (int i = from; i < r->n; i++)
        if (r->ev[i].kind == kind) {
            at = i;
            break;
        }
    pthread_mutex_unlock(&r->mu);
    return at;
}

/* Wait up to ms for an event of `kind`. */
static int rec_await(recorder *r, rowlock_event_kind kind, int64_t ms)
{
    int64_t t0 = tu_now_us();
    int at;
    while ((at = rec_find(r, kind, 0)) < 0 && tu_ms_since(t0) < (double)ms)
        tu_sleep_ms(10);
    return at;
}

static rowlock_client *C(void)
{
    return tu_client(TABLE);
}

static int setup_log(void **state)
{
    recorders_used = 0;
    return tu_setup(state);
}

static int teardown_faults(void **state)
{
    rowlock__fault_clear(NULL);
    return tu_teardown(state);
}

#define LT(fn) cmocka_unit_test_setup_teardown(fn, setup_log, teardown_faults)

/* ---- names and registration ------------------------------------------------------------- */

static void test_names__levels_and_kinds_come_from_their_lists(void **state)
{
    (void)state;
    assert_string_equal(rowlock_log_level_name(ROWLOCK_LOG_DEBUG), "debug");
    assert_string_equal(rowlock_log_level_name(ROWLOCK_LOG_ERROR), "error");
    assert_string_equal(rowlock_log_level_name(0), "unknown");
    assert_string_equal(rowlock_event_kind_name(ROWLOCK_EVENT_ACQUIRED), "acquired");
    assert_string_equal(rowlock_event_kind_name(ROWLOCK_EVENT_HANDED_OVER), "handed-over");
    assert_string_equal(rowlock_event_kind_name(ROWLOCK_EVENT_KEEP_STATE), "keep-state");
    assert_string_equal(rowlock_event_kind_name(ROWLOCK_EVENT_WAIT_RETRY), "wait-retry");
    assert_string_equal(rowlock_event_kind_name(999), "unknown");
}

static void test_set_log__a_level_out_of_range_is_einvalid(void **state)
{
    (void)state;
    rowlock_client *c = C();
    recorder *r = rec_new();
    assert_rc(rowlock_client_set_log(c, 0, on_log, r), ROWLOCK_EINVALID, c);
    assert_msg_has(c, "min_level");
    assert_rc(rowlock_client_set_log(c, ROWLOCK_LOG_ERROR + 1, on_log, r), ROWLOCK_EINVALID, c);
    assert_int_equal(rowlock_client_set_log(NULL, ROWLOCK_LOG_INFO, on_log, r), ROWLOCK_EINVALID);
    assert_rc(rowlock_client_set_log(c, 0, NULL, NULL), 0, c); /* unsetting needs no level */
    rec_free(r);
}

/* ---- what an application sees ----------------------------------------------------------- */

static void test_uncontended__acquired_then_released(void **state)
{
    (void)state;
    rowlock_client *c = C();
    recorder *r = rec_new();
    rowlock_lock *l = tu_lock(c, "plain\nname", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_client_set_log(c, ROWLOCK_LOG_INFO, on_log, r), 0, c);
    assert_rc(rowlock_acquire(l, 0, TU_LEASE_LONG), 0, c);
    uint64_t token = rowlock_lock_token(l);
    assert_rc(rowlock_release(l), 0, c);
    expect_kinds(r, "acquired,released");
    rec *a = &r->ev[0], *z = &r->ev[1];
    assert_int_equal(a->level, ROWLOCK_LOG_INFO);
    assert_string_equal(a->name, "plain\nname"); /* raw */
    assert_int_equal(a->strategy, ROWLOCK_STRATEGY_INSERT);
    assert_true(a->token == token && token != 0);
    assert_int_equal(a->attempt, 1);
    assert_true(a->waited_us > 0);
    assert_true(a->main_thread);
    assert_non_null(strstr(a->message, "'plain\\x0aname'")); /* escaped, one line */
    assert_null(strchr(a->message, '\n'));
    assert_non_null(strstr(a->message, "granted"));
    assert_null(strstr(a->message, "after waiting"));
    assert_true(z->token == token);
    assert_int_equal(z->level, ROWLOCK_LOG_INFO);
    assert_non_null(strstr(z->message, "released"));
    rec_free(r);
}

typedef struct waiter {
    rowlock_lock *l;
    int64_t wait_ms;
    int rc;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->rc = rowlock_acquire(w->l, w->wait_ms, TU_LEASE_LONG);
    return NULL;
}

static void test_contended__waiting_then_acquired_with_the_time_waited(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    recorder *r = rec_new();
    rowlock_lock *la = tu_lock(a, "contended", ROWLOCK_STRATEGY_OPTIMISTIC);
    rowlock_lock *lb = tu_lock(b, "contended", ROWLOCK_STRATEGY_OPTIMISTIC);
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_client_set_log(b, ROWLOCK_LOG_DEBUG, on_log, r), 0, b);
    waiter w = { lb, 10000, -100 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    assert_true(rec_await(r, ROWLOCK_EVENT_WAITING, 5000) >= 0);
    tu_sleep_ms(300);
    assert_rc(rowlock_release(la), 0, a);
    pthread_join(t, NULL);
    assert_rc(w.rc, 0, b);
    int wa = rec_find(r, ROWLOCK_EVENT_WAITING, 0), ac = rec_find(r, ROWLOCK_EVENT_ACQUIRED, 0);
    assert_true(wa >= 0 && ac > wa);
    assert_int_equal(r->ev[wa].level, ROWLOCK_LOG_DEBUG);
    assert_non_null(strstr(r->ev[wa].message, "contended")); /* names the lock (and its holder) */
    assert_true(r->ev[ac].waited_us >= 300000);
    assert_non_null(strstr(r->ev[ac].message, "after waiting"));
    assert_true(r->ev[ac].token == rowlock_lock_token(lb));
    assert_int_equal(r->ev[ac].strategy, ROWLOCK_STRATEGY_OPTIMISTIC);
    assert_false(r->ev[ac].main_thread); /* the thread that called acquire */
    assert_rc(rowlock_release(lb), 0, b);
    rec_free(r);
}

/* A waiter that heads the queue is handed the lock by the release: the
 * waiter sees handed-over then acquired; the releaser's event says so. */
static void test_handoff__the_waiter_sees_handed_over_and_the_releaser_says_so(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    recorder *ra = rec_new(), *rb = rec_new();
    rowlock_lock *la = tu_lock(a, "handoff", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *lb = tu_lock(b, "handoff", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_client_set_log(a, ROWLOCK_LOG_INFO, on_log, ra), 0, a);
    assert_rc(rowlock_client_set_log(b, ROWLOCK_LOG_INFO, on_log, rb), 0, b);
    waiter w = { lb, 20000, -100 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    /* Until b heads the queue with its queue row (then the release names it). */
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM `" TABLE "_queue` WHERE conn = IS_USED_LOCK('%s') AND name = 'handoff'",
             ROWLOCK__LEASE(lb)->qname);
    int ok = 0, i;
    for (i = 0; i < 2000 && tu_sql_int(NULL, &ok, "%s", sql) != 1; i++)
        tu_sleep_ms(10);
    assert_true(ok && i < 2000);
    assert_rc(rowlock_release(la), 0, a);
    pthread_join(t, NULL);
    assert_rc(w.rc, 0, b);
    expect_kinds(rb, "handed-over,acquired");
    assert_true(rb->ev[0].token == rowlock_lock_token(lb) && rb->ev[1].token == rb->ev[0].token);
    assert_non_null(strstr(rb->ev[1].message, "after waiting"));
    expect_kinds(ra, "released");
    assert_non_null(strstr(ra->ev[0].message, "handed to the next waiter"));
    assert_rc(rowlock_release(lb), 0, b);
    rec_free(ra);
    rec_free(rb);
}

/* The keeper renews on its own thread and reports there, to the client's hook. */
static void test_keeper__renewals_are_reported_from_the_keeper_thread(void **state)
{
    (void)state;
    rowlock_client *c = C();
    recorder *r = rec_new();
    rowlock_lock *l = tu_lock(c, "kept", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_client_set_log(c, ROWLOCK_LOG_DEBUG, on_log, r), 0, c);
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    ko.interval_ms = 200;
    assert_rc(rowlock_acquire(l, 0, 3000), 0, c);
    assert_rc(rowlock_keep(l, &ko), 0, c);
    int at = rec_await(r, ROWLOCK_EVENT_RENEWED, 5000);
    assert_true(at >= 0);
    rec *e = &r->ev[at];
    assert_false(e->main_thread);
    assert_string_equal(e->name, "kept");
    assert_true(e->token == rowlock_lock_token(l));
    assert_non_null(strstr(e->message, "keeper connection"));
    assert_rc(rowlock_release(l), 0, c);
    assert_true(rec_find(r, ROWLOCK_EVENT_RELEASED, 0) > at);
    assert_int_equal(rec_find(r, ROWLOCK_EVENT_LOST, 0), -1);
    rec_free(r);
}

/* An administrator's force release: the keeper's renewal finds the lock gone
 * and reports it lost, then its state LOST. */
static void test_keeper__a_force_release_is_reported_lost(void **state)
{
    (void)state;
    rowlock_client *c = C(), *adm = C();
    recorder *r = rec_new();
    rowlock_lock *l = tu_lock(c, "forced", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_client_set_log(c, ROWLOCK_LOG_WARN, on_log, r), 0, c);
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    ko.interval_ms = 200;
    assert_rc(rowlock_acquire(l, 0, 10000), 0, c);
    uint64_t token = rowlock_lock_token(l);
    assert_rc(rowlock_keep(l, &ko), 0, c);
    assert_rc(rowlock_admin_force_release(adm, "forced", NULL), 0, adm);
    int ks = rec_await(r, ROWLOCK_EVENT_KEEP_STATE, 5000);
    assert_true(ks >= 0);
    int lost = rec_find(r, ROWLOCK_EVENT_LOST, 0);
    assert_true(lost >= 0 && lost < ks);
    assert_int_equal(r->ev[lost].level, ROWLOCK_LOG_ERROR);
    assert_int_equal(r->ev[lost].code, ROWLOCK_ENOTOWNER);
    assert_true(r->ev[lost].token == token);
    assert_int_equal(r->ev[ks].keep_state, ROWLOCK_KEEP_LOST);
    assert_int_equal(r->ev[ks].level, ROWLOCK_LOG_ERROR);
    assert_false(r->ev[ks].main_thread);
    assert_rc(rowlock_release(l), ROWLOCK_ENOTOWNER, c);
    rec_free(r);
}

/* ---- retries inside the library (fault seam) --------------------------------------------- */

static void test_busy_retry__a_deadlocked_renewal_is_retried_and_reported(void **state)
{
    (void)state;
    rowlock_client *c = C();
    recorder *r = rec_new();
    rowlock_lock *l = tu_lock(c, "busy", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(l, 0, TU_LEASE_LONG), 0, c);
    assert_rc(rowlock_client_set_log(c, ROWLOCK_LOG_DEBUG, on_log, r), 0, c);
    assert_int_equal(rowlock__fault_set(c, "renew", 1, ROWLOCK__FAULT_ERROR, 1213), 0);
    assert_rc(rowlock_renew(l, TU_LEASE_LONG), 0, c);
    expect_kinds(r, "busy-retry,renewed");
    assert_int_equal(r->ev[0].db_errno, 1213);
    assert_int_equal(r->ev[0].attempt, 1);
    assert_true(r->ev[0].waited_us > 0);
    assert_string_equal(r->ev[0].name, "busy");
    assert_rc(rowlock_release(l), 0, c);
    rec_free(r);
}

/* The same for a shared lock (holders.c's renewal goes through lease.c's
 * retrying runner too): the retry is reported, not silent. */
static void test_busy_retry__a_shared_holder_s_deadlocked_renewal_is_reported(void **state)
{
    (void)state;
    rowlock_client *c = C();
    recorder *r = rec_new();
    rowlock_lock_options o = ROWLOCK_LOCK_OPTIONS_INIT;
    rowlock_lock *l = NULL;
    o.strategy = ROWLOCK_STRATEGY_INSERT;
    o.mode = ROWLOCK_MODE_SHARED;
    assert_rc(rowlock_lock_new(&l, c, "busy-shared", &o), 0, c);
    tu_register_lock(l);
    assert_rc(rowlock_acquire(l, 0, TU_LEASE_LONG), 0, c);
    assert_rc(rowlock_client_set_log(c, ROWLOCK_LOG_DEBUG, on_log, r), 0, c);
    assert_int_equal(rowlock__fault_set(c, "hold-renew", 1, ROWLOCK__FAULT_ERROR, 1213), 0);
    assert_rc(rowlock_renew(l, TU_LEASE_LONG), 0, c);
    expect_kinds(r, "busy-retry,renewed");
    assert_int_equal(r->ev[0].db_errno, 1213);
    assert_int_equal(r->ev[0].attempt, 1);
    assert_string_equal(r->ev[0].name, "busy-shared");
    assert_rc(rowlock_release(l), 0, c);
    rec_free(r);
}

static void test_reconnect__a_lost_connection_in_a_wait_is_reported_and_survived(void **state)
{
    (void)state;
    rowlock_client *c = C();
    recorder *r = rec_new();
    rowlock_lock *l = tu_lock(c, "reconnect", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_client_set_log(c, ROWLOCK_LOG_INFO, on_log, r), 0, c);
    assert_int_equal(rowlock__fault_set(c, "claim", 1, ROWLOCK__FAULT_ERROR, 2013), 0);
    assert_rc(rowlock_acquire(l, 5000, TU_LEASE_LONG), 0, c);
    /* wait-retry: the wait says what it waits for (issue 24 item 3) */
    expect_kinds(r, "disconnected,reconnected,wait-retry,acquired");
    assert_int_equal(r->ev[0].level, ROWLOCK_LOG_WARN);
    assert_int_equal(r->ev[0].db_errno, 2013);
    assert_string_equal(r->ev[0].name, "");
    assert_int_equal(r->ev[1].level, ROWLOCK_LOG_INFO);
    assert_true(r->ev[1].elapsed_us > 0);
    assert_rc(rowlock_release(l), 0, c);
    rec_free(r);
}

/* ---- filtering and unregistering ---------------------------------------------------------- */

static void test_min_level__events_below_it_are_not_delivered(void **state)
{
    (void)state;
    rowlock_client *c = C();
    recorder *r = rec_new();
    rowlock_lock *l = tu_lock(c, "filtered", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_client_set_log(c, ROWLOCK_LOG_WARN, on_log, r), 0, c);
    assert_int_equal(rowlock__fault_set(c, "claim", 1, ROWLOCK__FAULT_ERROR, 2013), 0);
    assert_rc(rowlock_acquire(l, 5000, TU_LEASE_LONG), 0, c);
    assert_int_equal(rowlock__fault_set(c, "renew", 1, ROWLOCK__FAULT_ERROR, 1213), 0);
    assert_rc(rowlock_renew(l, TU_LEASE_LONG), 0, c);
    assert_rc(rowlock_release(l), 0, c);
    expect_kinds(r, "disconnected"); /* reconnected, acquired, busy-retry, renewed, released: below warn */
    rec_free(r);
}

static void test_no_hook__nothing_after_unregistering(void **state)
{
    (void)state;
    rowlock_client *c = C();
    recorder *r = rec_new();
    rowlock_lock *l = tu_lock(c, "unhooked", ROWLOCK_STRATEGY_INSERT);
    assert_false(rowlock__log_on(c->log, ROWLOCK_LOG_ERROR)); /* a new client has no hook */
    assert_rc(rowlock_client_set_log(c, ROWLOCK_LOG_DEBUG, on_log, r), 0, c);
    assert_true(rowlock__log_on(c->log, ROWLOCK_LOG_DEBUG));
    assert_rc(rowlock_client_set_log(c, ROWLOCK_LOG_DEBUG, NULL, r), 0, c);
    assert_false(rowlock__log_on(c->log, ROWLOCK_LOG_ERROR));
    assert_int_equal(rowlock__fault_set(c, "claim", 1, ROWLOCK__FAULT_ERROR, 2013), 0);
    assert_rc(rowlock_acquire(l, 5000, TU_LEASE_LONG), 0, c);
    assert_rc(rowlock_release(l), 0, c);
    assert_int_equal(rec_count(r), 0);
    rec_free(r);
}

int main(int argc, char **argv)
{
    main_thread = pthread_self();
    for (int i = 0; i < 2; i++)
        pthread_mutex_init(&recorders[i].mu, NULL);
    const struct CMUnitTest tests[] = {
        LT(test_names__levels_and_kinds_come_from_their_lists),
        LT(test_set_log__a_level_out_of_range_is_einvalid),
        LT(test_uncontended__acquired_then_released),
        LT(test_contended__waiting_then_acquired_with_the_time_waited),
        LT(test_handoff__the_waiter_sees_handed_over_and_the_releaser_says_so),
        LT(test_keeper__renewals_are_reported_from_the_keeper_thread),
        LT(test_keeper__a_force_release_is_reported_lost),
        LT(test_busy_retry__a_deadlocked_renewal_is_retried_and_reported),
        LT(test_busy_retry__a_shared_holder_s_deadlocked_renewal_is_reported),
        LT(test_reconnect__a_lost_connection_in_a_wait_is_reported_and_survived),
        LT(test_min_level__events_below_it_are_not_delivered),
        LT(test_no_hook__nothing_after_unregistering),
    };
    return tu_main("log", tests, sizeof tests / sizeof tests[0], TABLE, argc > 1 ? argv[1] : NULL);
}
