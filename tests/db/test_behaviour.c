/*
 * The behaviour every strategy shares, run once per strategy:
 *     test_behaviour insert | for-update | optimistic   [cmocka filter]
 *
 * Each run uses its own lock table (t_behaviour_<strategy>), dropped and
 * migrated afresh at start, so the three runs (and the other test programs)
 * can share one server in parallel.
 */
#include "testutil.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static rowlock_strategy S;
static const char *SN; /* "insert", "for-update", "optimistic" */
static char TABLE[64];

static int lease_based(void)
{
    return S != ROWLOCK_STRATEGY_FOR_UPDATE;
}

static rowlock_lock *L(rowlock_client *c, const char *name)
{
    return tu_lock(c, name, S);
}

static rowlock_client *C(void)
{
    return tu_client(TABLE);
}

/* B's try on a name must say EBUSY, name the lock and the strategy. */
static void expect_busy(rowlock_lock *l, rowlock_client *c)
{
    int rc = rowlock_acquire(l, 0, TU_LEASE_LONG);
    assert_rc(rc, ROWLOCK_EBUSY, c);
    assert_int_equal(rowlock_lock_held(l), 0);
    assert_int_equal(rowlock_lock_token(l), 0);
    assert_msg_has(c, SN);
}

static void expect_free(rowlock_lock *l, rowlock_client *c)
{
    assert_rc(rowlock_acquire(l, 0, TU_LEASE_LONG), 0, c);
    assert_int_equal(rowlock_lock_held(l), 1);
    assert_rc(rowlock_release(l), 0, c);
    assert_int_equal(rowlock_lock_held(l), 0);
}

/* ---- basics ------------------------------------------------------------------------- */

static void test_acquire_release__grants_a_token_and_frees_the_lock_for_others(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "basic"), *lb = L(b, "basic");
    uint64_t ta;

    assert_int_equal(rowlock_lock_strategy(la), S);
    assert_string_equal(rowlock_lock_name(la), "basic");
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    assert_int_equal(rowlock_lock_held(la), 1);
    ta = rowlock_lock_token(la);
    assert_true(ta > 0);
    expect_busy(lb, b);
    assert_msg_has(b, "basic");

    assert_rc(rowlock_release(la), 0, a);
    assert_int_equal(rowlock_lock_held(la), 0);
    assert_int_equal(rowlock_lock_token(la), 0);

    assert_rc(rowlock_acquire(lb, 0, TU_LEASE_LONG), 0, b);
    assert_true(rowlock_lock_token(lb) > ta);
    expect_busy(la, a);
    assert_rc(rowlock_release(lb), 0, b);
}

static void test_try_acquire__on_a_lock_held_by_another_client_is_busy_at_once(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "try"), *lb = L(b, "try");
    double worst = 0;
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    for (int i = 0; i < 5; i++) {
        double ms;
        int rc;
        TU_TIMED(ms, rc = rowlock_acquire(lb, 0, TU_LEASE_LONG));
        assert_rc(rc, ROWLOCK_EBUSY, b);
        if (ms > worst)
            worst = ms;
    }
    if (worst > TU_FAST_MS)
        fail_msg("a try-once on a held lock took %.1f ms (bound %d ms)", worst, TU_FAST_MS);
    assert_rc(rowlock_release(la), 0, a);
}

/* The hint's GET_LOCK name, computed as lock.c does (FNV-1a of table NUL name NUL). */
static void hint_of(const char *name, char *out, size_t cap)
{
    unsigned long long h = 0xcbf29ce484222325ULL;
    const char *parts[2] = { TABLE, name };
    for (int k = 0; k < 2; k++) {
        for (const unsigned char *p = (const unsigned char *)parts[k]; *p; p++)
            h = (h ^ *p) * 0x100000001b3ULL;
        h = (h ^ 0) * 0x100000001b3ULL;
    }
    snprintf(out, cap, "rowlock.%016llx", h);
}

static long long hint_holder(const char *hint)
{
    int ok = 0;
    long long v = tu_sql_int(NULL, &ok, "SELECT IFNULL(IS_USED_LOCK('%s'), 0)", hint);
    assert_true(ok);
    return v;
}

/* ---- waiting --------------------------------------------------------------------------- */

typedef struct wait_shared {
    volatile int64_t t_release_start; /* monotonic µs, same clock in every process */
    volatile int64_t t_release_end;
    volatile uint64_t token;
} wait_shared;

static tu_pipe hold_pipe;

/* Takes "waitrel", tells the parent, keeps it ~300 ms, releases. */
static int holder_releasing_after_300ms(void *arg, int idx)
{
    wait_shared *sh = arg;
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    int rc;
    (void)idx;
    int setup = tu_child_lock(TABLE, "waitrel", S, &c, &l);
    if (setup)
        return setup;
    rc = rowlock_acquire(l, 0, TU_LEASE_LONG);
    if (rc != 0) {
        fprintf(stderr, "holder: acquire: %s: %s\n", rowlock_error_name(rc), rowlock_client_errmsg(c));
        return 12;
    }
    sh->token = rowlock_lock_token(l);
    tu_signal(&hold_pipe, 'A');
    tu_sleep_ms(300);
    sh->t_release_start = tu_now_us();
    rc = rowlock_release(l);
    sh->t_release_end = tu_now_us();
    if (rc != 0) {
        fprintf(stderr, "holder: release: %s: %s\n", rowlock_error_name(rc), rowlock_client_errmsg(c));
        return 13;
    }
    rowlock_lock_free(l);
    rowlock_client_free(c);
    return 0;
}

static void test_wait__succeeds_when_the_holder_releases_and_not_before(void **state)
{
    (void)state;
    wait_shared *sh = tu_shm(sizeof *sh);
    rowlock_client *b = C();
    rowlock_lock *lb = L(b, "waitrel");
    pid_t pid;
    int64_t t0, t1, rel;
    int rc;

    tu_pipe_open(&hold_pipe);
    pid = tu_fork(holder_releasing_after_300ms, sh, 0);
    if (tu_await(&hold_pipe, 30000) != 'A')
        fail_msg("the holder process did not get the lock (exit %d)", tu_wait(pid, 1000));
    t0 = tu_now_us();
    rc = rowlock_acquire(lb, 5000, TU_LEASE_LONG);
    t1 = tu_now_us();
    rel = sh->t_release_start;
    assert_rc(rc, 0, b);
    if (rel == 0 || t1 < rel)
        fail_msg("the waiter was granted the lock before the holder started releasing it");
    if ((t1 - t0) / 1000 > 5000 + TU_SLACK_MS)
        fail_msg("the wait took %lld ms", (long long)(t1 - t0) / 1000);
    assert_true(rowlock_lock_token(lb) > sh->token);
    assert_int_equal(tu_wait(pid, 30000), 0);
    assert_rc(rowlock_release(lb), 0, b);
    if (lease_based()) {
        /* The waiter took the hint while queued, then claimed with it: its
         * release must leave the hint free, not still held once more. */
        char hint[64];
        hint_of("waitrel", hint, sizeof hint);
        assert_int_equal(hint_holder(hint), 0);
    }
    tu_pipe_close(&hold_pipe);
    tu_shm_free(sh, sizeof *sh);
}

static void test_wait__times_out_within_its_bound(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "waitbound"), *lb = L(b, "waitbound");
    double ms;
    int rc;
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    TU_TIMED(ms, rc = rowlock_acquire(lb, 500, TU_LEASE_LONG));
    assert_rc(rc, ROWLOCK_EBUSY, b);
    assert_msg_has(b, "waitbound");
    if (ms < 500 || ms > 500 + TU_SLACK_MS)
        fail_msg("a 500 ms wait on a held lock returned after %.1f ms", ms);
    assert_int_equal(rowlock_lock_held(lb), 0);
    assert_rc(rowlock_release(la), 0, a);
}

/* ---- re-entrancy ------------------------------------------------------------------------- */

static void test_reentrancy__same_handle_counts_acquisitions_and_keeps_the_token(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "reent1"), *lb = L(b, "reent1");
    uint64_t t1;
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    t1 = rowlock_lock_token(la);
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    assert_int_equal(rowlock_lock_token(la), t1);
    assert_int_equal(rowlock_lock_held(la), 2);
    expect_busy(lb, b);
    assert_rc(rowlock_release(la), 0, a);
    assert_int_equal(rowlock_lock_held(la), 1);
    assert_int_equal(rowlock_lock_token(la), t1);
    expect_busy(lb, b);
    assert_rc(rowlock_release(la), 0, a);
    assert_int_equal(rowlock_lock_held(la), 0);
    expect_free(lb, b);
}

static void test_reentrancy__through_a_second_handle_on_the_same_client(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la1 = L(a, "reent2"), *la2 = L(a, "reent2"), *lb = L(b, "reent2");
    rowlock_info info;
    uint64_t t1;
    assert_rc(rowlock_acquire(la1, 0, TU_LEASE_LONG), 0, a);
    t1 = rowlock_lock_token(la1);
    assert_rc(rowlock_acquire(la2, 0, TU_LEASE_LONG), 0, a);
    assert_int_equal(rowlock_lock_token(la2), t1);
    assert_int_equal(rowlock_lock_held(la1), 1);
    assert_int_equal(rowlock_lock_held(la2), 1);
    if (lease_based()) {
        tu_inspect(lb, &info);
        assert_int_equal(info.count, 2);
        assert_int_equal(info.token, t1);
    }
    expect_busy(lb, b);
    assert_rc(rowlock_release(la1), 0, a);
    expect_busy(lb, b);
    assert_rc(rowlock_release(la2), 0, a);
    expect_free(lb, b);
}

/* ---- release / renew by the wrong party ----------------------------------------------------- */

static void test_release__by_a_handle_that_holds_nothing_is_refused(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "norel"), *la2 = L(a, "norel"), *lb = L(b, "norel");
    assert_rc(rowlock_release(la), ROWLOCK_EINVALID, a); /* never acquired */
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_release(lb), ROWLOCK_EINVALID, b); /* another client's handle */
    assert_msg_has(b, "norel");
    assert_rc(rowlock_renew(lb, TU_LEASE_LONG), ROWLOCK_EINVALID, b);
    assert_rc(rowlock_release(la2), ROWLOCK_EINVALID, a); /* same client, other handle, holds nothing */
    expect_busy(lb, b);                                   /* none of that released it */
    assert_int_equal(rowlock_lock_held(la), 1);
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_release(la), ROWLOCK_EINVALID, a); /* once too often */
    expect_free(lb, b);
}

/* Lease strategies lose a lock by force_release; for-update by losing the
 * connection (here: KILL of the application connection the client wraps). */
static rowlock_client *wrapped_client(void **mysql_out)
{
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    rowlock_client *c = NULL;
    void *m = tu_mysql_connect(NULL, 0);
    assert_non_null(m);
    *mysql_out = m;
    assert_int_equal(rowlock_client_new(&c), 0);
    tu_register_client(c);
    o.table = TABLE;
    assert_rc(rowlock_client_wrap(c, m, &o), 0, c);
    return c;
}

static void lose_lock(rowlock_client *admin, const char *name, unsigned long thread_id)
{
    if (lease_based()) {
        rowlock_info rel = ROWLOCK_INFO_INIT;
        assert_rc(rowlock_admin_force_release(admin, name, &rel), 0, admin);
        assert_int_equal(rel.held, 1);
    } else {
        assert_int_equal(tu_sql(NULL, 0, "KILL CONNECTION %lu", thread_id), 0);
    }
}

/* variant 0: release first, then renew; 1: renew first, then release. */
static void lost_lock_calls_are_enotowner(int variant)
{
    rowlock_client *b = C();
    rowlock_lock *lb = L(b, "lostlock");
    void *m = NULL;
    rowlock_client *a = wrapped_client(&m);
    rowlock_lock *la = L(a, "lostlock");
    uint64_t ta;
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    ta = rowlock_lock_token(la);
    lose_lock(b, "lostlock", tu_mysql_thread_id(m));
    /* The lock is free for others now (for-update: once the server has
     * rolled the killed session back). */
    assert_rc(rowlock_acquire(lb, 10000, TU_LEASE_LONG), 0, b);
    assert_true(rowlock_lock_token(lb) > ta);
    if (variant == 0) {
        assert_rc(rowlock_release(la), ROWLOCK_ENOTOWNER, a);
        assert_msg_has(a, "lostlock");
        assert_rc(rowlock_renew(la, TU_LEASE_LONG), ROWLOCK_ENOTOWNER, a);
    } else {
        assert_rc(rowlock_renew(la, TU_LEASE_LONG), ROWLOCK_ENOTOWNER, a);
        assert_msg_has(a, "lostlock");
        assert_rc(rowlock_release(la), ROWLOCK_ENOTOWNER, a);
    }
    assert_int_equal(rowlock_lock_held(la), 0);
    assert_int_equal(rowlock_lock_token(la), 0);
    /* The new holder is untouched by the loser's calls. (A killed
     * connection cannot try again: only lease strategies check.) */
    if (lease_based())
        expect_busy(la, a);
    assert_rc(rowlock_release(lb), 0, b);
    tu_lock_free(la);
    tu_client_free(a);
    tu_mysql_close(m);
}

static void test_release__after_the_lock_was_lost_is_enotowner(void **state)
{
    (void)state;
    lost_lock_calls_are_enotowner(0);
}

static void test_renew__after_the_lock_was_lost_is_enotowner(void **state)
{
    (void)state;
    lost_lock_calls_are_enotowner(1);
}

/* A wait records the holder's name when its first claim loses; once the
 * wait succeeds that message is stale and must not be reported as the
 * client's last error. */
static void test_wait__a_success_leaves_no_error_message(void **state)
{
    (void)state;
    if (!lease_based())
        skip(); /* the holder's lease must end by itself */
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "msg-after-wait"), *lb = L(b, "msg-after-wait");
    assert_rc(rowlock_acquire(la, 0, 1000), 0, a);
    assert_rc(rowlock_acquire(lb, 10000, TU_LEASE_LONG), 0, b); /* granted when a's lease ends */
    assert_string_equal(rowlock_client_errmsg(b), "");
    assert_int_equal(rowlock_client_db_errno(b), 0);
    assert_rc(rowlock_release(lb), 0, b);
}

/* ---- wake-up hint (lease strategies) ----------------------------------------------------- */

/* The holder's session holds the hint exactly once while it holds the lock
 * (re-entry does not nest it), a loser never keeps it, and the final release
 * frees it: otherwise waiters would sleep out a whole hint slice. */
/* The hint and hand-off tests look at the one-row protocol's own named
 * locks and queue; semaphore handles (ROWLOCK_TEST_LOCK_MODE) use the
 * holders table instead (tests/db/test_modes.c). */
static void one_row_protocol_only(void)
{
    if (getenv("ROWLOCK_TEST_LOCK_MODE"))
        skip();
}

static void test_hint__held_once_by_the_holder_and_freed_by_its_release(void **state)
{
    (void)state;
    one_row_protocol_only();
    if (!lease_based())
        skip();
    char hint[64];
    void *m = NULL;
    rowlock_client *a = wrapped_client(&m), *b = C();
    rowlock_lock *la = L(a, "hinted"), *lb = L(b, "hinted");
    long long ida = (long long)tu_mysql_thread_id(m);
    hint_of("hinted", hint, sizeof hint);
    for (int round = 0; round < 2; round++) { /* round 0 creates the row, 1 takes it over */
        assert_int_equal(hint_holder(hint), 0);
        assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
        assert_int_equal(hint_holder(hint), ida);
        assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a); /* re-entry */
        expect_busy(lb, b);
        assert_rc(rowlock_acquire(lb, 300, TU_LEASE_LONG), ROWLOCK_EBUSY, b);
        assert_int_equal(hint_holder(hint), ida);
        assert_rc(rowlock_release(la), 0, a);
        assert_int_equal(hint_holder(hint), ida); /* still held once */
        assert_rc(rowlock_release(la), 0, a);
        assert_int_equal(hint_holder(hint), 0);
    }
    /* The other client takes it and its hint in turn. */
    assert_rc(rowlock_acquire(lb, 0, TU_LEASE_LONG), 0, b);
    assert_true(hint_holder(hint) != 0 && hint_holder(hint) != ida);
    assert_rc(rowlock_release(lb), 0, b);
    assert_int_equal(hint_holder(hint), 0);
    tu_lock_free(la);
    tu_client_free(a);
    tu_mysql_close(m);
}

/* An administrator frees a lease lock whose holder's session is alive and
 * still holds the hint: the hint must not keep the free lock from others. A
 * try-once gets it at once; a waiter within one hint slice (1 s). */
static void test_hint__a_stale_hint_does_not_keep_a_force_released_lock(void **state)
{
    (void)state;
    if (!lease_based())
        skip();
    rowlock_client *a = C(), *b = C(), *adm = C();
    rowlock_lock *la = L(a, "stalehint"), *lb = L(b, "stalehint");
    rowlock_info rel = ROWLOCK_INFO_INIT;
    double ms;
    int rc;
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_admin_force_release(adm, "stalehint", &rel), 0, adm);
    TU_TIMED(ms, rc = rowlock_acquire(lb, 0, TU_LEASE_LONG));
    assert_rc(rc, 0, b);
    if (ms > TU_FAST_MS)
        fail_msg("the try-once took %.1f ms", ms);
    assert_rc(rowlock_release(lb), 0, b);
    assert_rc(rowlock_release(la), ROWLOCK_ENOTOWNER, a); /* a learns it; its hint goes */

    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_admin_force_release(adm, "stalehint", &rel), 0, adm);
    TU_TIMED(ms, rc = rowlock_acquire(lb, 5000, TU_LEASE_LONG));
    assert_rc(rc, 0, b);
    if (ms > 1000 + TU_SLACK_MS)
        fail_msg("the waiter took %.1f ms (one hint slice is 1000 ms)", ms);
    assert_rc(rowlock_release(lb), 0, b);
}

/* ---- hand-off through the waiter queue (lease strategies) ------------------------------------ */

typedef struct handoff_shared {
    volatile uint64_t token;  /* the waiter's grant */
    volatile int granted;
    volatile int hold_ms; /* hold this long, instead of until the parent's 'R' */
    char owner[ROWLOCK_OWNER_MAX + 1];
} handoff_shared;

static tu_pipe go_pipe;

/* Waits up to 20 s for "handoff", records its grant, holds it until the
 * parent says 'R' (or 20 s; or for sh->hold_ms if set), releases. */
static int waiter_for_handoff(void *arg, int idx)
{
    handoff_shared *sh = arg;
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    int rc;
    (void)idx;
    int setup = tu_child_lock(TABLE, "handoff", S, &c, &l);
    if (setup)
        return setup;
    snprintf(sh->owner, sizeof sh->owner, "%s", rowlock_client_owner(c));
    rc = rowlock_acquire(l, 20000, TU_LEASE_LONG);
    if (rc != 0) {
        fprintf(stderr, "waiter: acquire: %s: %s\n", rowlock_error_name(rc), rowlock_client_errmsg(c));
        return 12;
    }
    sh->token = rowlock_lock_token(l);
    sh->granted = 1;
    if (sh->hold_ms)
        tu_sleep_ms(sh->hold_ms);
    else
        (void)tu_await(&go_pipe, 20000);
    rc = rowlock_release(l);
    if (rc != 0) {
        fprintf(stderr, "waiter: release: %s: %s\n", rowlock_error_name(rc), rowlock_client_errmsg(c));
        return 13;
    }
    rowlock_lock_free(l);
    rowlock_client_free(c);
    return 0;
}

/* Whether some session heads the waiter queue of `name` with a queue row for
 * it: then the next release can hand the lock over. */
static int queue_head_registered(const char *name)
{
    char hint[64];
    int ok = 0;
    hint_of(name, hint, sizeof hint);
    long long n = tu_sql_int(NULL, &ok,
                             "SELECT COUNT(*) FROM `%s_queue` WHERE conn = IS_USED_LOCK('%s.q') AND name = '%s' "
                             "AND strategy = %d",
                             TABLE, hint, name, (int)S);
    assert_true(ok);
    return n > 0;
}

static long long queue_head(const char *name)
{
    char hint[64], q[80];
    hint_of(name, hint, sizeof hint);
    snprintf(q, sizeof q, "%s.q", hint);
    return hint_holder(q);
}

static void await_queue_head(const char *name, pid_t child)
{
    for (int i = 0; i < 2000 && !queue_head_registered(name); i++)
        tu_sleep_ms(10);
    if (!queue_head_registered(name))
        fail_msg("no waiter headed the queue of '%s' within 20 s (child exit %d)", name, tu_wait(child, 0));
}

/* The final release of a lock with a queued waiter names that waiter in its
 * own commit: the row is the waiter's the moment the release returns (with
 * only the hint to wake it, the row would be free then, until the waiter's
 * own claim committed a flush later). A re-entered lock is handed over only
 * at its final release. */
static void test_handoff__the_final_release_names_the_queued_waiter(void **state)
{
    (void)state;
    one_row_protocol_only();
    if (!lease_based())
        skip();
    handoff_shared *sh = tu_shm(sizeof *sh);
    rowlock_client *a = C(), *adm = C();
    rowlock_lock *la = L(a, "handoff"), *lx = L(adm, "handoff");
    rowlock_info info = ROWLOCK_INFO_INIT;
    pid_t pid;
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    uint64_t ta = rowlock_lock_token(la);
    tu_pipe_open(&go_pipe);
    pid = tu_fork(waiter_for_handoff, sh, 0);
    await_queue_head("handoff", pid);

    assert_rc(rowlock_release(la), 0, a); /* count 2 -> 1: still ours */
    assert_rc(rowlock_inspect(lx, &info), 0, adm);
    assert_true(info.held);
    assert_string_equal(info.owner, rowlock_client_owner(a));
    assert_int_equal(info.count, 1);

    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_inspect(lx, &info), 0, adm);
    if (!info.held || strcmp(info.owner, sh->owner) != 0)
        fail_msg("right after the final release the row is %s by '%s', not held by the queued waiter '%s'",
                 info.held ? "held" : "not held", info.owner, sh->owner);
    assert_int_equal(info.count, 1);
    assert_true(info.token > ta);
    for (int i = 0; i < 2000 && !sh->granted; i++)
        tu_sleep_ms(10);
    assert_true(sh->granted);
    assert_true(sh->token == info.token); /* the waiter's token is the row's */
    assert_int_equal(queue_head("handoff"), 0); /* it let the queue head go */
    tu_signal(&go_pipe, 'R');
    assert_int_equal(tu_wait(pid, 30000), 0);
    {
        /* rowlock_client_free() deleted the waiter's queue row. */
        int ok = 0;
        assert_int_equal(tu_sql_int(NULL, &ok, "SELECT COUNT(*) FROM `%s_queue` WHERE name = 'handoff'", TABLE), 0);
        assert_true(ok);
    }
    assert_rc(rowlock_inspect(lx, &info), 0, adm);
    assert_false(info.held); /* its one release freed it: no count left over */
    expect_free(lx, adm);
    tu_pipe_close(&go_pipe);
    tu_shm_free(sh, sizeof *sh);
}

/* After a release that handed the lock on, the old holder's next waiting
 * acquire queues at once: a claim could only fail (the lock was just handed
 * to someone else), and while it ran it would hold the row lock that the new
 * holder's release needs. Handed the lock back, it sends no claim at all
 * (counted by the server on the wrapped connection). */
static void test_handoff__the_old_holder_waits_again_without_a_claim(void **state)
{
    static const char WRITES[] = "SELECT SUM(VARIABLE_VALUE) FROM information_schema.SESSION_STATUS "
                                 "WHERE VARIABLE_NAME IN ('COM_INSERT', 'COM_UPDATE')";
    (void)state;
    one_row_protocol_only();
    if (!lease_based())
        skip();
    handoff_shared *sh = tu_shm(sizeof *sh);
    void *m = NULL;
    rowlock_client *a = wrapped_client(&m), *adm = C();
    rowlock_lock *la = L(a, "handoff"), *lx = L(adm, "handoff");
    rowlock_info info = ROWLOCK_INFO_INIT;
    int ok = 0;
    pid_t pid;

    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    sh->hold_ms = 300;
    pid = tu_fork(waiter_for_handoff, sh, 0);
    await_queue_head("handoff", pid);
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_inspect(lx, &info), 0, adm);
    assert_true(info.held);
    assert_string_equal(info.owner, sh->owner); /* handed on */

    long long before = tu_mysql_int(m, &ok, WRITES);
    assert_true(ok);
    assert_rc(rowlock_acquire(la, 20000, TU_LEASE_LONG), 0, a); /* handed back after 300 ms */
    long long after = tu_mysql_int(m, &ok, WRITES);
    assert_true(ok);
    if (after != before)
        fail_msg("the old holder sent %lld claim statement(s) while the lock it had just handed on was held",
                 after - before);
    assert_true(sh->granted);
    assert_true(rowlock_lock_token(la) > sh->token);
    assert_int_equal(tu_wait(pid, 30000), 0);
    assert_rc(rowlock_release(la), 0, a);
    expect_free(lx, adm);
    tu_lock_free(la);
    tu_client_free(a);
    tu_mysql_close(m);
    tu_shm_free(sh, sizeof *sh);
}

/* A queued waiter that is gone is never named: one that timed out left the
 * queue; one whose process died lost its session and its queue head. The
 * release then frees the row. */
static void test_handoff__a_waiter_that_left_or_died_is_not_named(void **state)
{
    (void)state;
    one_row_protocol_only();
    if (!lease_based())
        skip();
    handoff_shared *sh = tu_shm(sizeof *sh);
    rowlock_client *a = C(), *b = C(), *adm = C();
    rowlock_lock *la = L(a, "handoff"), *lb = L(b, "handoff"), *lx = L(adm, "handoff");
    rowlock_info info = ROWLOCK_INFO_INIT;
    pid_t pid;

    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_acquire(lb, 300, TU_LEASE_LONG), ROWLOCK_EBUSY, b);
    assert_int_equal(queue_head("handoff"), 0);
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_inspect(lx, &info), 0, adm);
    assert_false(info.held);

    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    tu_pipe_open(&go_pipe);
    pid = tu_fork(waiter_for_handoff, sh, 0);
    await_queue_head("handoff", pid);
    kill(pid, SIGKILL);
    (void)tu_wait(pid, 10000);
    for (int i = 0; i < 1000 && queue_head("handoff") != 0; i++)
        tu_sleep_ms(10); /* the server ends the dead client's session */
    assert_int_equal(queue_head("handoff"), 0);
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_inspect(lx, &info), 0, adm);
    if (info.held)
        fail_msg("the release named '%s' (the dead waiter is '%s')", info.owner, sh->owner);
    expect_free(lb, b);
    tu_pipe_close(&go_pipe);
    tu_shm_free(sh, sizeof *sh);
}

/* ---- renew ---------------------------------------------------------------------------------- */

static void test_renew__extends_the_lease_and_checks_its_arguments(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "renew"), *lb = L(b, "renew");
    rowlock_info info;
    assert_rc(rowlock_renew(la, 1000), ROWLOCK_EINVALID, a); /* not held */
    assert_rc(rowlock_acquire(la, 0, 2000), 0, a);
    assert_rc(rowlock_renew(la, 20000), 0, a);
    assert_int_equal(rowlock_lock_held(la), 1);
    if (lease_based()) {
        tu_inspect(lb, &info);
        assert_true(info.held);
        if (info.expires_in_ms < 15000 || info.expires_in_ms > 20000)
            fail_msg("after renew(20000) the lease ends in %lld ms", (long long)info.expires_in_ms);
    }
    assert_rc(rowlock_renew(la, -1), ROWLOCK_EINVALID, a);
    assert_rc(rowlock_renew(la, ROWLOCK_LEASE_MAX_MS + 1), ROWLOCK_EINVALID, a);
    assert_int_equal(rowlock_lock_held(la), 1); /* bad arguments changed nothing */
    expect_busy(lb, b);
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_renew(la, 1000), ROWLOCK_EINVALID, a); /* released */
}

static void test_acquire__bad_wait_or_lease_is_refused(void **state)
{
    (void)state;
    rowlock_client *a = C();
    rowlock_lock *la = L(a, "args");
    assert_rc(rowlock_acquire(la, -2, 1000), ROWLOCK_EINVALID, a);
    assert_rc(rowlock_acquire(la, INT64_MIN, 1000), ROWLOCK_EINVALID, a);
    assert_rc(rowlock_acquire(la, 0, -1), ROWLOCK_EINVALID, a);
    assert_rc(rowlock_acquire(la, 0, ROWLOCK_LEASE_MAX_MS + 1), ROWLOCK_EINVALID, a);
    /* The table's longest lease (`<table>_epoch`.max_lease_ms, 60 s unless
     * changed: what a failover makes grants wait) bounds it further. */
    assert_rc(rowlock_acquire(la, 0, ROWLOCK_LEASE_MAX_MS), ROWLOCK_EINVALID, a);
    assert_msg_has(a, "longest lease");
    assert_rc(rowlock_acquire(la, 0, 60001), ROWLOCK_EINVALID, a);
    assert_int_equal(rowlock_lock_held(la), 0);
    /* The extremes that are allowed. */
    assert_rc(rowlock_acquire(la, 0, 60000), 0, a);
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_acquire(la, ROWLOCK_WAIT_FOREVER, 0), 0, a);
    assert_rc(rowlock_release(la), 0, a);
}

/* ---- fencing tokens ------------------------------------------------------------------------------ */

static void test_fencing__tokens_strictly_increase_over_50_cycles(void **state)
{
    (void)state;
    rowlock_client *a = C();
    rowlock_lock *la = L(a, "fence1");
    uint64_t prev = 0;
    for (int i = 0; i < 50; i++) {
        assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
        if (rowlock_lock_token(la) <= prev)
            fail_msg("cycle %d: token %llu after %llu", i, (unsigned long long)rowlock_lock_token(la),
                     (unsigned long long)prev);
        prev = rowlock_lock_token(la);
        assert_rc(rowlock_release(la), 0, a);
    }
}

static void test_fencing__tokens_strictly_increase_across_two_alternating_clients(void **state)
{
    (void)state;
    rowlock_client *c[2] = { C(), C() };
    rowlock_lock *l[2] = { L(c[0], "fence2"), L(c[1], "fence2") };
    uint64_t prev = 0;
    for (int i = 0; i < 50; i++) {
        int k = i % 2;
        assert_rc(rowlock_acquire(l[k], 1000, TU_LEASE_LONG), 0, c[k]);
        if (rowlock_lock_token(l[k]) <= prev)
            fail_msg("cycle %d (client %d): token %llu after %llu", i, k,
                     (unsigned long long)rowlock_lock_token(l[k]), (unsigned long long)prev);
        prev = rowlock_lock_token(l[k]);
        assert_rc(rowlock_release(l[k]), 0, c[k]);
    }
}

/* ---- names ------------------------------------------------------------------------------------- */

/* A holds `held`; B's handle on `probe` must (not) conflict. */
static void probe_names(rowlock_client *a, rowlock_client *b, const char *held, const char *probe, int conflict)
{
    rowlock_lock *la = L(a, held), *lb = L(b, probe);
    int rc;
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    rc = rowlock_acquire(lb, 0, TU_LEASE_LONG);
    if (conflict && rc != ROWLOCK_EBUSY)
        fail_msg("\"%s\" held: acquiring \"%s\" gave %s, expected ROWLOCK_EBUSY (%s)", held, probe,
                 rowlock_error_name(rc), rowlock_client_errmsg(b));
    if (!conflict && rc != 0)
        fail_msg("\"%s\" held: acquiring the different lock \"%s\" gave %s (%s)", held, probe,
                 rowlock_error_name(rc), rowlock_client_errmsg(b));
    if (rc == 0)
        assert_rc(rowlock_release(lb), 0, b);
    assert_rc(rowlock_release(la), 0, a);
    tu_lock_free(lb);
    tu_lock_free(la);
}

static void test_names__sql_wildcards_percent_and_underscore_are_plain_characters(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    probe_names(a, b, "a%", "ab", 0);
    probe_names(a, b, "a_", "ab", 0);
    probe_names(a, b, "ab", "a%", 0);
    probe_names(a, b, "ab", "a_", 0);
    probe_names(a, b, "%", "x", 0);
    probe_names(a, b, "a%", "a%", 1);
    probe_names(a, b, "a_", "a_", 1);
}

static void test_names__quotes_and_backslashes_are_stored_exactly(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    const char *names[] = { "it's", "say \"hi\"", "back`tick`", "back\\slash", "\\", "'", "''",
                            "x'; DROP TABLE t_behaviour; --", "trailing\\", "\\'" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        rowlock_lock *la = L(a, names[i]), *lb = L(b, names[i]);
        rowlock_info info;
        assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
        tu_inspect(lb, &info);
        assert_true(info.exists);
        assert_true(info.held);
        assert_string_equal(info.name, names[i]);
        expect_busy(lb, b);
        assert_rc(rowlock_release(la), 0, a);
        expect_free(lb, b);
        tu_lock_free(la);
        tu_lock_free(lb);
    }
    /* Escaping mistakes would make these collide. */
    probe_names(a, b, "it's", "it''s", 0);
    probe_names(a, b, "it's", "it\\'s", 0);
    probe_names(a, b, "it's", "its", 0);
    probe_names(a, b, "\\", "\\\\", 0);
    probe_names(a, b, "\"q\"", "q", 0);
}

static void test_names__are_case_sensitive_and_byte_exact(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    probe_names(a, b, "A", "a", 0);
    probe_names(a, b, "Lock", "lock", 0);
    probe_names(a, b, "Lock", "LOCK", 0);
    probe_names(a, b, "pad", "pad ", 0);        /* no PAD SPACE comparison */
    probe_names(a, b, " pad", "pad", 0);
    probe_names(a, b, "\xc3\xa9", "e\xcc\x81", 0); /* é precomposed vs decomposed */
    probe_names(a, b, "\xc3\xa9", "\xc3\x89", 0);  /* é vs É */
    probe_names(a, b, "ss", "\xc3\x9f", 0);        /* ss vs ß */
    probe_names(a, b, "Lock", "Lock", 1);
}

static void test_names__of_255_bytes_work(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    char ascii[256], multi[256] = "";
    memset(ascii, 'n', 255);
    ascii[255] = '\0';
    for (int i = 0; i < 85; i++)
        strcat(multi, "\xe9\x94\x81"); /* 锁: 85 x 3 = 255 bytes */
    const char *names[] = { ascii, multi };
    for (int i = 0; i < 2; i++) {
        rowlock_lock *la = L(a, names[i]), *lb = L(b, names[i]);
        rowlock_info info;
        assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
        assert_string_equal(rowlock_lock_name(la), names[i]);
        tu_inspect(lb, &info);
        assert_true(info.held);
        assert_int_equal(strlen(info.name), 255);
        assert_string_equal(info.name, names[i]);
        expect_busy(lb, b);
        assert_rc(rowlock_release(la), 0, a);
    }
    /* Same first 254 bytes, different last byte: different locks. */
    {
        char other[256];
        memcpy(other, ascii, 256);
        other[254] = 'm';
        probe_names(a, b, ascii, other, 0);
    }
}

static void test_names__multibyte_utf8_round_trips_through_inspect(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    const char *name = "\xe9\x94\x81\xf0\x9f\x94\x92"; /* 锁🔒 */
    rowlock_lock *la = L(a, name), *lb = L(b, name);
    rowlock_info info;
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    tu_inspect(lb, &info);
    assert_true(info.exists);
    assert_true(info.held);
    assert_string_equal(info.name, name);
    assert_int_equal(info.strategy, S);
    expect_busy(lb, b);
    assert_rc(rowlock_release(la), 0, a);
    probe_names(a, b, name, "\xe9\x94\x81", 0);          /* a prefix is another lock */
    probe_names(a, b, name, "\xf0\x9f\x94\x92", 0);
}

static void test_names__bad_names_are_refused_with_the_reason(void **state)
{
    (void)state;
    rowlock_client *a = C();
    char n256[257];
    memset(n256, 'x', 256);
    n256[256] = '\0';
    const struct { const char *name; const char *says; } bad[] = {
        { "", "empty" },
        { n256, "256" },
        { "\xff", "UTF-8" },
        { "\xe4\xb8", "UTF-8" },           /* truncated */
        { "\xc0\xaf", "UTF-8" },           /* overlong */
        { "\xed\xa0\x80", "UTF-8" },       /* surrogate */
        { "ok\xf4\x90\x80\x80", "UTF-8" }, /* > U+10FFFF */
        { NULL, "NULL" },
    };
    rowlock_lock_options lo = ROWLOCK_LOCK_OPTIONS_INIT;
    lo.strategy = S;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rowlock_lock *l = NULL;
        const char *why = NULL;
        int rc = rowlock_lock_new(&l, a, bad[i].name, &lo);
        if (rc != ROWLOCK_EINVALID) {
            rowlock_lock_free(l);
            fail_msg("bad name #%zu: rowlock_lock_new gave %s", i, rowlock_error_name(rc));
        }
        assert_null(l);
        assert_msg_has(a, bad[i].says);
        assert_int_equal(rowlock_name_check(bad[i].name, &why), ROWLOCK_EINVALID);
        assert_non_null(why);
    }
}

/* ---- inspect --------------------------------------------------------------------------------------- */

static void test_inspect__reports_holder_token_and_lease(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "insp"), *lb = L(b, "insp"), *lnever = L(b, "insp-never-used");
    rowlock_info info;
    uint64_t ta;

    tu_inspect(lnever, &info);
    assert_false(info.exists);
    assert_false(info.held);
    assert_string_equal(info.name, "insp-never-used");

    assert_rc(rowlock_acquire(la, 0, 10000), 0, a);
    ta = rowlock_lock_token(la);

    tu_inspect(lb, &info); /* from another client */
    assert_true(info.exists);
    assert_true(info.held);
    assert_false(info.stale);
    assert_int_equal(info.strategy, S);
    assert_string_equal(info.name, "insp");
    if (lease_based()) {
        assert_string_equal(info.owner, rowlock_client_owner(a));
        assert_int_equal(info.token, ta);
        assert_int_equal(info.count, 1);
        if (info.expires_in_ms <= 0 || info.expires_in_ms > 10000)
            fail_msg("expires_in_ms %lld, lease 10000", (long long)info.expires_in_ms);
        assert_true(info.acquired_at_us > 0);
        {
            int64_t lease_us = info.expires_at_us - info.acquired_at_us;
            if (lease_us < 9999000 || lease_us > 10001000)
                fail_msg("expires_at - acquired_at = %lld us, lease 10000 ms", (long long)lease_us);
        }
    } else {
        assert_string_equal(info.owner, ""); /* not recorded for for-update */
    }

    tu_inspect(la, &info); /* from the holder's own handle */
    assert_true(info.held);
    assert_int_equal(info.token, ta);
    if (lease_based())
        assert_string_equal(info.owner, rowlock_client_owner(a));

    assert_rc(rowlock_release(la), 0, a);
    tu_inspect(lb, &info);
    assert_true(info.exists); /* released rows stay until the reaper purges them */
    assert_false(info.held);
    assert_false(info.stale);
    assert_string_equal(info.owner, "");
    assert_int_equal(info.count, 0);
    if (lease_based())
        assert_int_equal(info.token, ta); /* the row keeps its last token */
}

static void test_inspect__refuses_a_null_or_unversioned_info(void **state)
{
    (void)state;
    rowlock_client *a = C();
    rowlock_lock *la = L(a, "insp-args");
    rowlock_info info = ROWLOCK_INFO_INIT;
    assert_rc(rowlock_inspect(la, NULL), ROWLOCK_EINVALID, a);
    info.version = 0;
    assert_rc(rowlock_inspect(la, &info), ROWLOCK_EINVALID, a);
}

/* A caller built against a newer header (a larger version) gets the fields
 * this library knows, and its version stays as it set it. */
static void test_inspect__fills_a_newer_callers_info_up_to_this_librarys_fields(void **state)
{
    (void)state;
    rowlock_client *a = C();
    rowlock_lock *la = L(a, "insp-newer");
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    rowlock_info info = ROWLOCK_INFO_INIT;
    info.version = ROWLOCK_INFO_VERSION + 1;
    assert_rc(rowlock_inspect(la, &info), 0, a);
    assert_int_equal(info.version, ROWLOCK_INFO_VERSION + 1);
    assert_true(info.exists);
    assert_true(info.held);
    assert_string_equal(info.name, "insp-newer");
    assert_rc(rowlock_release(la), 0, a);
}

static void test_lock_free__releases_every_acquisition_of_the_handle(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "freerel"), *lb = L(b, "freerel");
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    tu_lock_free(la);
    expect_free(lb, b);
}

/* ---- mutual exclusion under contention -------------------------------------------------------------- */

#define MX_PROCS 8
#define MX_ROUNDS 200
#define MX_GRANTS (MX_PROCS * MX_ROUNDS)

typedef struct mx_shared {
    volatile int counter;   /* deliberately updated non-atomically */
    int inside;             /* atomic: 1 while someone is in the critical section */
    unsigned int ticket;    /* atomic: grant order */
    int overlaps;           /* atomic */
    uint64_t tokens[MX_GRANTS];
} mx_shared;

static tu_pipe mx_ready, mx_go;

static void sleep_us(long us)
{
    struct timespec ts = { 0, us * 1000 };
    nanosleep(&ts, NULL);
}

static int mx_child(void *arg, int idx)
{
    mx_shared *sh = arg;
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    unsigned int seed = (unsigned int)getpid() * 2654435761u + (unsigned int)idx;
    int setup = tu_child_lock(TABLE, "mutex", S, &c, &l);
    if (setup)
        return setup;
    tu_signal(&mx_ready, 'R');
    if (tu_await(&mx_go, 120000) != 'G')
        return 12;
    for (int r = 0; r < MX_ROUNDS; r++) {
        int rc = rowlock_acquire(l, ROWLOCK_WAIT_FOREVER, TU_LEASE_LONG);
        if (rc != 0) {
            fprintf(stderr, "mx child %d round %d: acquire: %s: %s\n", idx, r, rowlock_error_name(rc),
                    rowlock_client_errmsg(c));
            return 13;
        }
        if (__atomic_exchange_n(&sh->inside, 1, __ATOMIC_SEQ_CST) != 0)
            __atomic_fetch_add(&sh->overlaps, 1, __ATOMIC_SEQ_CST);
        unsigned int t = __atomic_fetch_add(&sh->ticket, 1, __ATOMIC_SEQ_CST);
        if (t < MX_GRANTS)
            sh->tokens[t] = rowlock_lock_token(l);
        int v = sh->counter;              /* read ... */
        sleep_us(50 + (long)(rand_r(&seed) % 151));
        sh->counter = v + 1;              /* ... sleep, write: lost updates unless exclusive */
        __atomic_store_n(&sh->inside, 0, __ATOMIC_SEQ_CST);
        rc = rowlock_release(l);
        if (rc != 0) {
            fprintf(stderr, "mx child %d round %d: release: %s: %s\n", idx, r, rowlock_error_name(rc),
                    rowlock_client_errmsg(c));
            return 14;
        }
    }
    rowlock_lock_free(l);
    rowlock_client_free(c);
    return 0;
}

static void test_mutual_exclusion__8_processes_x_200_grants_never_overlap(void **state)
{
    (void)state;
    mx_shared *sh = tu_shm(sizeof *sh);
    pid_t pids[MX_PROCS];
    int bad = 0;
    int64_t t0 = tu_now_us();
    tu_pipe_open(&mx_ready);
    tu_pipe_open(&mx_go);
    for (int i = 0; i < MX_PROCS; i++)
        pids[i] = tu_fork(mx_child, sh, i);
    for (int i = 0; i < MX_PROCS; i++)
        if (tu_await(&mx_ready, 60000) != 'R')
            fail_msg("only %d of %d processes connected", i, MX_PROCS);
    for (int i = 0; i < MX_PROCS; i++)
        tu_signal(&mx_go, 'G'); /* all start together */
    for (int i = 0; i < MX_PROCS; i++) {
        int st = tu_wait(pids[i], 600000);
        if (st != 0) {
            print_error("process %d exited with %d\n", i, st);
            bad++;
        }
    }
    print_message("%d grants in %.1f s\n", MX_GRANTS, tu_ms_since(t0) / 1000);
    assert_int_equal(bad, 0);
    assert_int_equal(sh->overlaps, 0);
    assert_int_equal(sh->ticket, MX_GRANTS);
    assert_int_equal(sh->counter, MX_GRANTS);
    for (int i = 1; i < MX_GRANTS; i++)
        if (sh->tokens[i] <= sh->tokens[i - 1])
            fail_msg("grant %d got token %llu after grant %d's %llu", i, (unsigned long long)sh->tokens[i],
                     i - 1, (unsigned long long)sh->tokens[i - 1]);
    assert_true(sh->tokens[0] > 0);
    tu_pipe_close(&mx_ready);
    tu_pipe_close(&mx_go);
    tu_shm_free(sh, sizeof *sh);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_acquire_release__grants_a_token_and_frees_the_lock_for_others),
        TU_TEST(test_try_acquire__on_a_lock_held_by_another_client_is_busy_at_once),
        TU_TEST(test_wait__succeeds_when_the_holder_releases_and_not_before),
        TU_TEST(test_wait__times_out_within_its_bound),
        TU_TEST(test_wait__a_success_leaves_no_error_message),
        TU_TEST(test_reentrancy__same_handle_counts_acquisitions_and_keeps_the_token),
        TU_TEST(test_reentrancy__through_a_second_handle_on_the_same_client),
        TU_TEST(test_release__by_a_handle_that_holds_nothing_is_refused),
        TU_TEST(test_release__after_the_lock_was_lost_is_enotowner),
        TU_TEST(test_renew__after_the_lock_was_lost_is_enotowner),
        TU_TEST(test_hint__held_once_by_the_holder_and_freed_by_its_release),
        TU_TEST(test_hint__a_stale_hint_does_not_keep_a_force_released_lock),
        TU_TEST(test_handoff__the_final_release_names_the_queued_waiter),
        TU_TEST(test_handoff__a_waiter_that_left_or_died_is_not_named),
        TU_TEST(test_handoff__the_old_holder_waits_again_without_a_claim),
        TU_TEST(test_renew__extends_the_lease_and_checks_its_arguments),
        TU_TEST(test_acquire__bad_wait_or_lease_is_refused),
        TU_TEST(test_fencing__tokens_strictly_increase_over_50_cycles),
        TU_TEST(test_fencing__tokens_strictly_increase_across_two_alternating_clients),
        TU_TEST(test_names__sql_wildcards_percent_and_underscore_are_plain_characters),
        TU_TEST(test_names__quotes_and_backslashes_are_stored_exactly),
        TU_TEST(test_names__are_case_sensitive_and_byte_exact),
        TU_TEST(test_names__of_255_bytes_work),
        TU_TEST(test_names__multibyte_utf8_round_trips_through_inspect),
        TU_TEST(test_names__bad_names_are_refused_with_the_reason),
        TU_TEST(test_inspect__reports_holder_token_and_lease),
        TU_TEST(test_inspect__refuses_a_null_or_unversioned_info),
        TU_TEST(test_inspect__fills_a_newer_callers_info_up_to_this_librarys_fields),
        TU_TEST(test_lock_free__releases_every_acquisition_of_the_handle),
        TU_TEST(test_mutual_exclusion__8_processes_x_200_grants_never_overlap),
    };
    char group[64];
    if (argc < 2 || rowlock_strategy_parse(&S, argv[1]) != 0) {
        fprintf(stderr, "usage: %s insert|for-update|optimistic [test-filter]\n", argv[0]);
        return 2;
    }
    SN = rowlock_strategy_name(S);
    const char *mode = getenv("ROWLOCK_TEST_SQL_MODE");
    /* ROWLOCK_TEST_LOCK_MODE=semaphore1 (issue 17): every handle is a
     * semaphore of one permit (shared mode, holders table), which must
     * behave as the exclusive lock the suite describes. */
    const char *lock_mode = getenv("ROWLOCK_TEST_LOCK_MODE");
    snprintf(TABLE, sizeof TABLE, "t_behaviour_%s%s%s", S == ROWLOCK_STRATEGY_FOR_UPDATE ? "for_update" : SN,
             mode ? "_mode" : "", lock_mode ? "_sem1" : "");
    if (mode) {
        /* The sessions must really run in that mode (init-command in the
         * option file, tests/CMakeLists.txt), or the run proves nothing. */
        int ok = 0;
        long long on = tu_sql_int(NULL, &ok, "SELECT FIND_IN_SET('%s', @@session.sql_mode) > 0", mode);
        if (!ok || on != 1) {
            fprintf(stderr, "ROWLOCK_TEST_SQL_MODE=%s: the test sessions do not run with it\n", mode);
            return 1;
        }
    }
    snprintf(group, sizeof group, "behaviour (%s)", SN);
    return tu_main(group, tests, sizeof tests / sizeof tests[0], TABLE, argc > 2 ? argv[2] : NULL);
}
