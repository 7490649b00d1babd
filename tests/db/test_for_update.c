/*
 * The for-update strategy: a transaction holds the row until release, so a
 * dead holder frees the lock as soon as the server notices, a holder that
 * says nothing for a lease has its session ended by the server (the
 * session's wait_timeout), and one client holds at most one for-update name.
 *
 *     test_for_update main    wait bound, one name per client, renew, probe,
 *                             the lease (silent holder, renewals, keeper),
 *                             application transactions on a wrapped connection
 *     test_for_update fault   kill -9 / crash of the holder process; restart
 *                             and crash of a PRIVATE server
 */
#include "testutil.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static const rowlock_strategy S = ROWLOCK_STRATEGY_FOR_UPDATE;
static char TABLE[64] = "t_for_update";

static rowlock_lock *L(rowlock_client *c, const char *name)
{
    return tu_lock(c, name, S);
}

static rowlock_client *C(void)
{
    return tu_client(TABLE);
}

/* ---- main ----------------------------------------------------------------------------- */

static void test_wait__bound_is_honoured(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "fu-wait"), *lb = L(b, "fu-wait");
    const int64_t waits[] = { 500, 1500 };
    assert_rc(rowlock_acquire(la, 0, 0), 0, a);
    for (size_t i = 0; i < 2; i++) {
        double ms;
        int rc;
        TU_TIMED(ms, rc = rowlock_acquire(lb, waits[i], 0));
        assert_rc(rc, ROWLOCK_EBUSY, b);
        assert_msg_has(b, "fu-wait");
        if (ms < (double)waits[i] || ms > (double)(waits[i] + TU_SLACK_MS))
            fail_msg("a %lld ms wait returned EBUSY after %.1f ms", (long long)waits[i], ms);
    }
    /* The waiter's failed waits left nothing behind: it can lock it once free. */
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_acquire(lb, 0, 0), 0, b);
    assert_rc(rowlock_release(lb), 0, b);
}

static void test_second_name__on_the_same_client_is_unsupported(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *one = L(a, "fu-one"), *two = L(a, "fu-two");
    rowlock_lock *one_b = L(b, "fu-one"), *two_b = L(b, "fu-two");
    uint64_t t;
    assert_rc(rowlock_acquire(one, 0, 0), 0, a);
    t = rowlock_lock_token(one);
    assert_rc(rowlock_acquire(two, 0, 0), ROWLOCK_EUNSUPPORTED, a);
    assert_msg_has(a, "fu-two");
    assert_int_equal(rowlock_lock_held(two), 0);
    assert_rc(rowlock_acquire(two, 1000, 0), ROWLOCK_EUNSUPPORTED, a);
    /* The first lock is untouched, the second was not taken. */
    assert_int_equal(rowlock_lock_held(one), 1);
    assert_int_equal(rowlock_lock_token(one), t);
    assert_rc(rowlock_acquire(one_b, 0, 0), ROWLOCK_EBUSY, b);
    assert_rc(rowlock_acquire(two_b, 0, 0), 0, b);
    assert_rc(rowlock_release(two_b), 0, b);
    /* Once the first is released the client may take another name. */
    assert_rc(rowlock_release(one), 0, a);
    assert_rc(rowlock_acquire(two, 0, 0), 0, a);
    assert_rc(rowlock_acquire(one_b, 0, 0), 0, b);
    assert_rc(rowlock_release(two), 0, a);
    assert_rc(rowlock_release(one_b), 0, b);
}

static void test_renew__succeeds_while_the_transaction_lives(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "fu-renew"), *lb = L(b, "fu-renew");
    assert_rc(rowlock_acquire(la, 0, 0), 0, a);
    assert_rc(rowlock_renew(la, 0), 0, a);
    assert_rc(rowlock_renew(la, 1000), 0, a);
    assert_rc(rowlock_acquire(lb, 0, 0), ROWLOCK_EBUSY, b);
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_renew(la, 0), ROWLOCK_EINVALID, a);
}

/* Issue 24 item 1: a for-update lock has a bounded life. A holder that
 * sends nothing for its lease (a dead host, a silent partition, or just no
 * renewal) has its session ended by the server, and the waiter gets the lock:
 * not before the lease (no double grant), and without the holder's help. */
static void test_lease__a_silent_holder_loses_the_lock_after_its_lease(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "fu-lease"), *lb = L(b, "fu-lease");
    assert_rc(rowlock_acquire(la, 0, 1000), 0, a);
    int64_t granted_a = tu_now_us();
    assert_rc(rowlock_acquire(lb, 10000, 0), 0, b);
    double after = (double)(tu_now_us() - granted_a) / 1000.0;
    if (after < 950.0)
        fail_msg("the waiter was granted %.1f ms after a grant with a 1000 ms lease", after);
    /* The holder learns it at its next call, and its client works again. */
    assert_rc(rowlock_release(la), ROWLOCK_ENOTOWNER, a);
    assert_msg_has(a, "without a statement");
    assert_rc(rowlock_release(lb), 0, b);
    assert_rc(rowlock_acquire(la, 0, 0), 0, a);
    assert_rc(rowlock_release(la), 0, a);
}

static void test_lease__renewals_and_the_keeper_keep_it_past_the_lease(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "fu-lease-kept"), *lb = L(b, "fu-lease-kept");
    /* Renewals every 300 ms: held for 2.5 leases. */
    assert_rc(rowlock_acquire(la, 0, 1000), 0, a);
    for (int i = 0; i < 8; i++) {
        tu_sleep_ms(300);
        assert_rc(rowlock_renew(la, 1000), 0, a);
    }
    assert_rc(rowlock_acquire(lb, 0, 0), ROWLOCK_EBUSY, b);
    assert_rc(rowlock_release(la), 0, a);

    /* The keeper keeps the holding session alive on the client's own
     * connection while the application does nothing, and gives a finite
     * safe-until time. */
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    assert_rc(rowlock_keep(la, &ko), 0, a);
    assert_rc(rowlock_acquire(la, 0, 1000), 0, a);
    tu_sleep_ms(2500);
    rowlock_keep_info ki = ROWLOCK_KEEP_INFO_INIT;
    assert_rc(rowlock_keep_status(la, &ki), 0, a);
    assert_int_equal(ki.state, ROWLOCK_KEEP_HELD);
    assert_true(ki.renewals >= 3);
    int64_t now = rowlock_monotonic_us();
    if (ki.safe_until_us <= now || ki.safe_until_us > now + 1000000)
        fail_msg("safe_until is %lld us from now with a 1000 ms lease", (long long)(ki.safe_until_us - now));
    assert_rc(rowlock_acquire(lb, 0, 0), ROWLOCK_EBUSY, b);
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_acquire(lb, 0, 0), 0, b);
    assert_rc(rowlock_release(lb), 0, b);
}

/* A re-entry extends the lease (lock.c's promise): it must reach the
 * session, or the server would end it a lease after the first grant. */
static void test_lease__a_re_entry_restarts_the_session_timer(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "fu-lease-reentry"), *lb = L(b, "fu-lease-reentry");
    assert_rc(rowlock_acquire(la, 0, 1000), 0, a);
    tu_sleep_ms(700);
    assert_rc(rowlock_acquire(la, 0, 1000), 0, a);
    assert_int_equal(rowlock_lock_held(la), 2);
    tu_sleep_ms(700);
    assert_rc(rowlock_acquire(lb, 0, 0), ROWLOCK_EBUSY, b);
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_acquire(lb, 0, 0), 0, b);
    assert_rc(rowlock_release(lb), 0, b);
}

/* After a release the session keeps the lease as its wait_timeout; idle
 * longer, it is closed by the server. db_connect.c sees the close before the next
 * call and opens a new session, so the call succeeds at the first try
 * (it failed with "Lost connection" before the idle check). */
static void test_lease__an_idle_session_closed_by_the_server_is_replaced_before_the_next_call(void **state)
{
    (void)state;
    rowlock_client *a = C();
    rowlock_lock *la = L(a, "fu-idle-closed");
    assert_rc(rowlock_acquire(la, 0, 1000), 0, a);
    assert_rc(rowlock_release(la), 0, a);
    tu_sleep_ms(2500); /* more than the 1 s wait_timeout: the server closes it */
    assert_rc(rowlock_acquire(la, 0, 1000), 0, a);
    assert_rc(rowlock_release(la), 0, a);
}

static void test_force_release__is_unsupported_for_a_for_update_name(void **state)
{
    (void)state;
    rowlock_client *a = C(), *admin = C();
    rowlock_lock *la = L(a, "fu-force"), *probe = L(admin, "fu-force");
    rowlock_info rel = ROWLOCK_INFO_INIT;
    assert_rc(rowlock_acquire(la, 0, 0), 0, a);
    assert_rc(rowlock_admin_force_release(admin, "fu-force", &rel), ROWLOCK_EUNSUPPORTED, admin);
    assert_rc(rowlock_acquire(probe, 0, 0), ROWLOCK_EBUSY, admin);
    assert_rc(rowlock_release(la), 0, a);
}

static void test_inspect__probes_without_blocking_or_taking_the_lock(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "fu-probe"), *lb = L(b, "fu-probe");
    rowlock_info info;
    double ms;
    assert_rc(rowlock_acquire(la, 0, 0), 0, a);
    TU_TIMED(ms, tu_inspect(lb, &info));
    assert_true(info.exists);
    assert_true(info.held);
    assert_int_equal(info.strategy, ROWLOCK_STRATEGY_FOR_UPDATE);
    if (ms > TU_FAST_MS)
        fail_msg("inspect of a held for-update lock took %.1f ms", ms);
    assert_int_equal(rowlock_lock_held(lb), 0);
    assert_rc(rowlock_release(la), 0, a);
    /* The probe kept no lock: A can take it again at once. */
    tu_inspect(lb, &info);
    assert_false(info.held);
    assert_rc(rowlock_acquire(la, 0, 0), 0, a);
    assert_rc(rowlock_release(la), 0, a);
}

/* A wrapped application connection: the lock is the application's
 * transaction, so its COMMIT releases it (and release then says ENOTOWNER). */
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

static void test_wrapped__application_commit_releases_the_lock(void **state)
{
    (void)state;
    void *m = NULL;
    rowlock_client *a = wrapped_client(&m), *b = C();
    rowlock_lock *la = L(a, "fu-appcommit"), *lb = L(b, "fu-appcommit");
    assert_rc(rowlock_acquire(la, 0, 0), 0, a);
    assert_rc(rowlock_acquire(lb, 0, 0), ROWLOCK_EBUSY, b);
    assert_int_equal(tu_mysql_query(m, "COMMIT"), 0);
    assert_rc(rowlock_acquire(lb, 5000, 0), 0, b);
    assert_rc(rowlock_release(la), ROWLOCK_ENOTOWNER, a);
    assert_int_equal(rowlock_lock_held(la), 0);
    assert_rc(rowlock_release(lb), 0, b);
    /* The client is usable again afterwards. */
    assert_rc(rowlock_acquire(la, 0, 0), 0, a);
    assert_rc(rowlock_release(la), 0, a);
    tu_lock_free(la);
    tu_client_free(a);
    tu_mysql_close(m);
}

/* The lease is the session's wait_timeout while held; a wrapped session (the
 * application's) gets its own value back at the release. */
static void test_wrapped__wait_timeout_is_the_lease_while_held_and_given_back(void **state)
{
    (void)state;
    void *m = NULL;
    rowlock_client *a = wrapped_client(&m);
    rowlock_lock *la = L(a, "fu-appwait");
    int ok = 0;
    assert_int_equal(tu_mysql_query(m, "SET SESSION wait_timeout = 777"), 0);
    assert_rc(rowlock_acquire(la, 0, 4500), 0, a);
    assert_int_equal(tu_mysql_int(m, &ok, "SELECT @@session.wait_timeout"), 5);
    assert_true(ok);
    assert_rc(rowlock_renew(la, 2000), 0, a);
    assert_int_equal(tu_mysql_int(m, &ok, "SELECT @@session.wait_timeout"), 2);
    assert_rc(rowlock_release(la), 0, a);
    assert_int_equal(tu_mysql_int(m, &ok, "SELECT @@session.wait_timeout"), 777);
    tu_lock_free(la);
    tu_client_free(a);
    tu_mysql_close(m);
}

static void test_wrapped__acquire_inside_an_application_transaction_is_refused(void **state)
{
    (void)state;
    void *m = NULL;
    rowlock_client *a = wrapped_client(&m), *b = C();
    rowlock_lock *la = L(a, "fu-apptrx"), *lb = L(b, "fu-apptrx");
    assert_int_equal(tu_mysql_query(m, "START TRANSACTION"), 0);
    assert_rc(rowlock_acquire(la, 0, 0), ROWLOCK_EINVALID, a);
    assert_msg_has(a, "transaction");
    assert_int_equal(tu_mysql_query(m, "ROLLBACK"), 0);
    assert_rc(rowlock_acquire(lb, 0, 0), 0, b);
    assert_rc(rowlock_release(lb), 0, b);
    tu_lock_free(la);
    tu_client_free(a);
    tu_mysql_close(m);
}

/* ---- fault: the holder process dies ---------------------------------------------------------------- */

typedef struct kill_shared {
    volatile uint64_t holder_token;
    volatile int64_t t_acquired;
    volatile uint64_t waiter_token;
    volatile int waiter_rc;
} kill_shared;

static tu_pipe holder_pipe, waiter_pipe;

/* Takes the lock, says so, then waits to be killed (mode 0) or exits at once
 * without releasing (mode 1). */
static int holder(void *arg, int mode)
{
    kill_shared *sh = arg;
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    int rc;
    int setup = tu_child_lock(TABLE, mode == 0 ? "fu-kill" : "fu-crash", S, &c, &l);
    if (setup)
        return setup;
    rc = rowlock_acquire(l, 0, 0);
    if (rc != 0) {
        fprintf(stderr, "holder: %s: %s\n", rowlock_error_name(rc), rowlock_client_errmsg(c));
        return 12;
    }
    sh->holder_token = rowlock_lock_token(l);
    tu_signal(&holder_pipe, 'H');
    if (mode == 1)
        _exit(0);
    for (;;)
        pause();
}

static int waiter(void *arg, int idx)
{
    kill_shared *sh = arg;
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    int rc;
    (void)idx;
    int setup = tu_child_lock(TABLE, "fu-kill", S, &c, &l);
    if (setup)
        return setup;
    tu_signal(&waiter_pipe, 'W');
    rc = rowlock_acquire(l, ROWLOCK_WAIT_FOREVER, 0);
    sh->t_acquired = tu_now_us();
    sh->waiter_rc = rc;
    if (rc != 0) {
        fprintf(stderr, "waiter: %s: %s\n", rowlock_error_name(rc), rowlock_client_errmsg(c));
        return 12;
    }
    sh->waiter_token = rowlock_lock_token(l);
    if (rowlock_release(l) != 0)
        return 13;
    rowlock_lock_free(l);
    rowlock_client_free(c);
    return 0;
}

static void test_kill9__of_the_holder_hands_the_lock_to_the_waiter_at_once(void **state)
{
    (void)state;
    kill_shared *sh = tu_shm(sizeof *sh);
    pid_t h, w;
    int64_t t_kill;
    double after_ms;

    tu_pipe_open(&holder_pipe);
    tu_pipe_open(&waiter_pipe);
    h = tu_fork(holder, sh, 0);
    if (tu_await(&holder_pipe, 30000) != 'H')
        fail_msg("the holder did not get the lock (exit %d)", tu_wait(h, 1000));
    w = tu_fork(waiter, sh, 0);
    if (tu_await(&waiter_pipe, 30000) != 'W')
        fail_msg("the waiter did not start (exit %d)", tu_wait(w, 1000));
    tu_sleep_ms(500); /* let it queue in the server (correct either way) */
    if (sh->t_acquired != 0)
        fail_msg("the waiter returned (%s) while the holder was alive", rowlock_error_name(sh->waiter_rc));

    t_kill = tu_now_us();
    assert_int_equal(kill(h, SIGKILL), 0);
    assert_int_equal(tu_wait(h, 10000), 128 + SIGKILL);
    assert_int_equal(tu_wait(w, 30000), 0);
    assert_int_equal(sh->waiter_rc, 0);
    assert_true(sh->t_acquired >= t_kill);
    after_ms = (double)(sh->t_acquired - t_kill) / 1000.0;
    print_message("the waiter got the lock %.1f ms after the kill\n", after_ms);
    if (after_ms >= 3000)
        fail_msg("the waiter got the lock %.1f ms after the holder was killed (bound 3000 ms)", after_ms);
    assert_true(sh->waiter_token > sh->holder_token);
    tu_pipe_close(&holder_pipe);
    tu_pipe_close(&waiter_pipe);
    tu_shm_free(sh, sizeof *sh);
}

static void test_crash__tokens_increase_after_the_holder_exits_without_release(void **state)
{
    (void)state;
    kill_shared *sh = tu_shm(sizeof *sh);
    rowlock_client *b = C();
    rowlock_lock *lb = L(b, "fu-crash");
    pid_t h;
    double ms;
    int rc;
    tu_pipe_open(&holder_pipe);
    h = tu_fork(holder, sh, 1);
    if (tu_await(&holder_pipe, 30000) != 'H')
        fail_msg("the holder did not get the lock (exit %d)", tu_wait(h, 1000));
    assert_int_equal(tu_wait(h, 10000), 0);
    TU_TIMED(ms, rc = rowlock_acquire(lb, 10000, 0));
    assert_rc(rc, 0, b);
    if (ms >= 3000)
        fail_msg("the lock of an exited holder was free only after %.1f ms", ms);
    assert_true(rowlock_lock_token(lb) > sh->holder_token);
    assert_rc(rowlock_release(lb), 0, b);
    tu_pipe_close(&holder_pipe);
    tu_shm_free(sh, sizeof *sh);
}

/* ---- fault: private server restart / crash ---------------------------------------------------------- */

static void test_restart__release_after_a_server_restart_is_never_a_silent_success(void **state)
{
    (void)state;
    tu_sandbox sb;
    const char *how[] = { "restart", "kill" };
    rowlock_client *a, *b;
    uint64_t prev = 0;

    if (tu_sandbox_start(&sb) != 0)
        skip();
    tu_table_fresh(sb.cnf, "t_fu_restart");
    a = tu_client_at(sb.cnf, "t_fu_restart");
    for (int k = 0; k < 2; k++) {
        rowlock_lock *la = L(a, "r"), *la2, *lb;
        uint64_t t1, t2;
        int rc;
        assert_rc(rowlock_acquire(la, 0, 0), 0, a);
        t1 = rowlock_lock_token(la);
        assert_true(t1 > prev);

        tu_sandbox_cmd(&sb, how[k]);
        if (strcmp(how[k], "kill") == 0)
            tu_sandbox_cmd(&sb, "start");

        rc = rowlock_release(la);
        if (rc != ROWLOCK_ENOTOWNER && rc != ROWLOCK_EDB)
            fail_msg("after a server %s, release of the lost lock gave %s (%s)", how[k], rowlock_error_name(rc),
                     rowlock_client_errmsg(a));
        tu_lock_free(la);

        /* The same client takes it again (it reconnects), and holds it for real. */
        la2 = L(a, "r");
        rc = rowlock_acquire(la2, 5000, 0);
        if (rc == ROWLOCK_EDB) /* the first call after the restart may report the dead session */
            rc = rowlock_acquire(la2, 5000, 0);
        assert_rc(rc, 0, a);
        t2 = rowlock_lock_token(la2);
        if (t2 <= t1)
            fail_msg("after a server %s: token %llu, before it %llu", how[k], (unsigned long long)t2,
                     (unsigned long long)t1);
        b = tu_client_at(sb.cnf, "t_fu_restart");
        lb = L(b, "r");
        assert_rc(rowlock_acquire(lb, 0, 0), ROWLOCK_EBUSY, b);
        assert_rc(rowlock_release(la2), 0, a);
        assert_rc(rowlock_acquire(lb, 0, 0), 0, b);
        assert_rc(rowlock_release(lb), 0, b);
        tu_lock_free(lb);
        tu_client_free(b);
        tu_lock_free(la2);
        prev = t2;
    }
    tu_client_free(a);
    tu_sandbox_stop(&sb);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest main_tests[] = {
        TU_TEST(test_wait__bound_is_honoured),
        TU_TEST(test_second_name__on_the_same_client_is_unsupported),
        TU_TEST(test_renew__succeeds_while_the_transaction_lives),
        TU_TEST(test_lease__a_silent_holder_loses_the_lock_after_its_lease),
        TU_TEST(test_lease__renewals_and_the_keeper_keep_it_past_the_lease),
        TU_TEST(test_lease__a_re_entry_restarts_the_session_timer),
        TU_TEST(test_lease__an_idle_session_closed_by_the_server_is_replaced_before_the_next_call),
        TU_TEST(test_force_release__is_unsupported_for_a_for_update_name),
        TU_TEST(test_inspect__probes_without_blocking_or_taking_the_lock),
        TU_TEST(test_wrapped__application_commit_releases_the_lock),
        TU_TEST(test_wrapped__acquire_inside_an_application_transaction_is_refused),
        TU_TEST(test_wrapped__wait_timeout_is_the_lease_while_held_and_given_back),
    };
    const struct CMUnitTest fault_tests[] = {
        TU_TEST(test_kill9__of_the_holder_hands_the_lock_to_the_waiter_at_once),
        TU_TEST(test_crash__tokens_increase_after_the_holder_exits_without_release),
        TU_TEST(test_restart__release_after_a_server_restart_is_never_a_silent_success),
    };
    const char *group = argc > 1 ? argv[1] : "main";
    const char *filter = argc > 2 ? argv[2] : NULL;
    if (strcmp(group, "main") == 0)
        return tu_main("for-update main", main_tests, sizeof main_tests / sizeof main_tests[0], TABLE,
                       filter);
    if (strcmp(group, "fault") == 0) {
        strcat(TABLE, "_f");
        return tu_main("for-update fault", fault_tests, sizeof fault_tests / sizeof fault_tests[0], TABLE,
                       filter);
    }
    fprintf(stderr, "usage: %s [main|fault] [test-filter]\n", argv[0]);
    return 2;
}
