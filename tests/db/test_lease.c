/*
 * Lease strategies (insert, optimistic): what they promise about leases,
 * expiry takeover, renew, a crashed holder and server restarts. One source,
 * run once per strategy (like test_behaviour); the reaper and list are in
 * test_admin.c.
 *
 *     test_lease STRATEGY main    expiry, renew, re-entry, default lease
 *     test_lease STRATEGY fault   crashed holder process; restart and crash
 *                                 of a PRIVATE server (never the shared one)
 *     test_lease STRATEGY GROUP FILTER   only the tests matching FILTER
 */
#include "testutil.h"

#include <stdlib.h>
#include <unistd.h>

static rowlock_strategy S;
static char TABLE[64];

static rowlock_lock *L(rowlock_client *c, const char *name)
{
    return tu_lock(c, name, S);
}

static rowlock_client *C(void)
{
    return tu_client(TABLE);
}

/* ---- expiry takeover ------------------------------------------------------------------ */

static void test_expiry__an_idle_holder_loses_the_lock_only_after_its_lease(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    /* If the machine stalls past the lease before B's early try, the early
     * try proves nothing: run again with a longer lease. */
    const int64_t leases[] = { 1000, 3000, 9000 };
    for (size_t k = 0; k < sizeof leases / sizeof leases[0]; k++) {
        const int64_t lease = leases[k];
        char name[32];
        rowlock_lock *la, *la2, *lb;
        rowlock_info ia, ib;
        int64_t t0;
        int rc;
        uint64_t ta, tb;

        snprintf(name, sizeof name, "expiry-%lld", (long long)lease);
        la = L(a, name);
        la2 = L(a, name);
        lb = L(b, name);
        t0 = tu_now_us();
        assert_rc(rowlock_acquire(la, 0, lease), 0, a);
        assert_rc(rowlock_acquire(la2, 0, lease), 0, a); /* re-entered: a second handle to check renew with */
        ta = rowlock_lock_token(la);
        tu_inspect(la, &ia);
        assert_true(ia.held);

        tu_sleep_ms(lease / 2 - (int64_t)tu_ms_since(t0));
        rc = rowlock_acquire(lb, 0, TU_LEASE_LONG);
        if (rc == 0) {
            double at = tu_ms_since(t0);
            if (at < (double)lease)
                fail_msg("B was granted '%s' %.0f ms after A's grant with a %lld ms lease: two holders", name,
                         at, (long long)lease);
            print_message("machine too slow (B tried after %.0f ms): again with a longer lease\n", at);
            assert_rc(rowlock_release(lb), 0, b);
            continue;
        }
        assert_rc(rc, ROWLOCK_EBUSY, b);

        /* B waits and is granted once A's lease has ended (server clock). */
        assert_rc(rowlock_acquire(lb, lease + 10000, TU_LEASE_LONG), 0, b);
        tb = rowlock_lock_token(lb);
        assert_true(tb > ta);
        tu_inspect(lb, &ib);
        assert_true(ib.held);
        if (ib.acquired_at_us < ia.expires_at_us)
            fail_msg("B's grant at %lld us (server clock) is before A's lease end %lld us",
                     (long long)ib.acquired_at_us, (long long)ia.expires_at_us);

        /* A lost it: release and renew both say so, and change nothing. */
        assert_rc(rowlock_release(la), ROWLOCK_ENOTOWNER, a);
        assert_msg_has(a, name);
        assert_int_equal(rowlock_lock_held(la), 0);
        assert_rc(rowlock_renew(la2, TU_LEASE_LONG), ROWLOCK_ENOTOWNER, a);
        assert_rc(rowlock_renew(la, TU_LEASE_LONG), ROWLOCK_ENOTOWNER, a);
        tu_inspect(lb, &ib);
        assert_true(ib.held);
        assert_string_equal(ib.owner, rowlock_client_owner(b));
        assert_int_equal(ib.token, tb);
        assert_int_equal(ib.count, 1);
        assert_true(ib.expires_in_ms > 10000);
        assert_rc(rowlock_acquire(la, 0, lease), ROWLOCK_EBUSY, a);
        assert_rc(rowlock_release(lb), 0, b);
        return;
    }
    fail_msg("the machine was too slow for every lease tried");
}

/* ---- renew -------------------------------------------------------------------------------- */

static void test_renew__keeps_the_lock_past_its_original_lease(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "renew-keep"), *lb = L(b, "renew-keep");
    rowlock_info info;
    int64_t t0 = tu_now_us();
    assert_rc(rowlock_acquire(la, 0, 1500), 0, a);
    assert_rc(rowlock_renew(la, 8000), 0, a);
    if (tu_ms_since(t0) > 1500)
        skip(); /* too slow to say anything: the renew came after the lease */
    tu_sleep_ms(2500 - (int64_t)tu_ms_since(t0)); /* well past the original lease */
    assert_rc(rowlock_acquire(lb, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, b);
    tu_inspect(lb, &info);
    assert_true(info.held);
    assert_false(info.stale);
    assert_true(info.expires_in_ms > 0);
    assert_string_equal(info.owner, rowlock_client_owner(a));
    assert_rc(rowlock_renew(la, 8000), 0, a); /* renewing again works too */
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_acquire(lb, 0, TU_LEASE_LONG), 0, b);
    assert_rc(rowlock_release(lb), 0, b);
}

static void test_renew__after_the_lease_ended_is_enotowner(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "renew-late"), *lb = L(b, "renew-late");
    rowlock_info info;
    assert_rc(rowlock_acquire(la, 0, 300), 0, a);
    tu_wait_lease_ended(lb, 10000);
    tu_inspect(lb, &info);
    assert_true(info.stale);
    assert_false(info.held);
    assert_string_equal(info.owner, rowlock_client_owner(a));
    assert_rc(rowlock_renew(la, TU_LEASE_LONG), ROWLOCK_ENOTOWNER, a);
    assert_msg_has(a, "renew-late");
    /* Renew never re-acquires. */
    tu_inspect(lb, &info);
    assert_false(info.held);
    assert_true(info.expires_in_ms < 0);
    assert_rc(rowlock_acquire(lb, 0, TU_LEASE_LONG), 0, b);
    assert_rc(rowlock_release(lb), 0, b);
}

/* Documented choice: once the lease ended, release still succeeds while
 * nobody else took the lock (no other grant happened in between), frees it
 * and keeps the token; after someone else took it, release is ENOTOWNER. */
static void test_release__after_the_lease_ended_but_untaken_succeeds(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "release-late"), *lb = L(b, "release-late");
    rowlock_info info;
    uint64_t ta;
    assert_rc(rowlock_acquire(la, 0, 300), 0, a);
    ta = rowlock_lock_token(la);
    tu_wait_lease_ended(lb, 10000);
    assert_rc(rowlock_release(la), 0, a);
    assert_int_equal(rowlock_lock_held(la), 0);
    tu_inspect(lb, &info);
    assert_false(info.held);
    assert_false(info.stale);
    assert_string_equal(info.owner, "");
    assert_true(info.token == ta);
    assert_rc(rowlock_acquire(lb, 0, TU_LEASE_LONG), 0, b);
    assert_true(rowlock_lock_token(lb) > ta);
    assert_rc(rowlock_release(lb), 0, b);
}

static void test_reentry__extends_the_lease_to_at_least_the_new_one(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "reent-lease"), *lb = L(b, "reent-lease");
    rowlock_info info;
    assert_rc(rowlock_acquire(la, 0, 2000), 0, a);
    assert_rc(rowlock_acquire(la, 0, 30000), 0, a);
    tu_inspect(lb, &info);
    if (info.expires_in_ms < 25000)
        fail_msg("re-entry with a 30000 ms lease left %lld ms", (long long)info.expires_in_ms);
    assert_int_equal(info.count, 2);
    assert_rc(rowlock_acquire(la, 0, 1000), 0, a); /* a shorter lease does not shorten it */
    tu_inspect(lb, &info);
    if (info.expires_in_ms < 20000)
        fail_msg("re-entry with a 1000 ms lease shortened the lease to %lld ms", (long long)info.expires_in_ms);
    assert_int_equal(info.count, 3);
    for (int i = 0; i < 3; i++)
        assert_rc(rowlock_release(la), 0, a);
    tu_inspect(lb, &info);
    assert_false(info.held);
    assert_int_equal(info.count, 0);
}

static void test_lease__zero_means_the_default(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "lease0"), *lb = L(b, "lease0");
    rowlock_info info;
    assert_rc(rowlock_acquire(la, 0, 0), 0, a);
    tu_inspect(lb, &info);
    if (info.expires_in_ms <= ROWLOCK_LEASE_DEFAULT_MS - 5000 || info.expires_in_ms > ROWLOCK_LEASE_DEFAULT_MS)
        fail_msg("lease 0 gave a lease ending in %lld ms (default %d)", (long long)info.expires_in_ms,
                 ROWLOCK_LEASE_DEFAULT_MS);
    assert_rc(rowlock_renew(la, 0), 0, a);
    tu_inspect(lb, &info);
    assert_true(info.expires_in_ms > ROWLOCK_LEASE_DEFAULT_MS - 5000);
    assert_rc(rowlock_release(la), 0, a);
}

/* ---- fault: crashed holder ------------------------------------------------------------------------ */

typedef struct crash_shared {
    volatile int64_t t_before_acquire;
    volatile uint64_t token;
    char owner[ROWLOCK_OWNER_MAX + 1];
} crash_shared;

static tu_pipe crash_pipe;

static int crashing_holder(void *arg, int idx)
{
    crash_shared *sh = arg;
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    int rc;
    (void)idx;
    int setup = tu_child_lock(TABLE, "crash", S, &c, &l);
    if (setup)
        return setup;
    sh->t_before_acquire = tu_now_us();
    rc = rowlock_acquire(l, 0, 3000);
    if (rc != 0) {
        fprintf(stderr, "holder: %s: %s\n", rowlock_error_name(rc), rowlock_client_errmsg(c));
        return 12;
    }
    sh->token = rowlock_lock_token(l);
    snprintf(sh->owner, sizeof sh->owner, "%s", rowlock_client_owner(c));
    tu_signal(&crash_pipe, 'A');
    _exit(0); /* crash: no release, no free */
}

static void test_crash__a_holder_that_exits_without_release_frees_the_lock_after_its_lease(void **state)
{
    (void)state;
    crash_shared *sh = tu_shm(sizeof *sh);
    rowlock_client *b = C();
    rowlock_lock *lb = L(b, "crash");
    rowlock_info info;
    pid_t pid;
    int rc;

    tu_pipe_open(&crash_pipe);
    pid = tu_fork(crashing_holder, sh, 0);
    if (tu_await(&crash_pipe, 30000) != 'A')
        fail_msg("the holder did not get the lock (exit %d)", tu_wait(pid, 1000));
    assert_int_equal(tu_wait(pid, 30000), 0); /* gone, its connection closed */

    rc = rowlock_acquire(lb, 0, TU_LEASE_LONG);
    if (rc == 0 && tu_ms_since(sh->t_before_acquire) < 3000)
        fail_msg("granted while the crashed holder's 3000 ms lease was live");
    if (rc == 0) {
        assert_rc(rowlock_release(lb), 0, b);
        skip(); /* machine too slow to tell */
    }
    assert_rc(rc, ROWLOCK_EBUSY, b);
    tu_inspect(lb, &info);
    assert_true(info.held);
    assert_string_equal(info.owner, sh->owner);

    tu_wait_lease_ended(lb, 15000);
    tu_inspect(lb, &info);
    assert_true(info.stale);
    assert_false(info.held);
    assert_rc(rowlock_acquire(lb, 0, TU_LEASE_LONG), 0, b);
    assert_true(rowlock_lock_token(lb) > sh->token);
    assert_rc(rowlock_release(lb), 0, b);
    tu_pipe_close(&crash_pipe);
    tu_shm_free(sh, sizeof *sh);
}

/* ---- fault: private server restart and crash ----------------------------------------------------------- */

static uint64_t cycle(const char *cnf, const char *name)
{
    rowlock_client *c = tu_client_at(cnf, "t_restart");
    rowlock_lock *l = L(c, name);
    uint64_t t;
    assert_rc(rowlock_acquire(l, 5000, TU_LEASE_LONG), 0, c);
    t = rowlock_lock_token(l);
    assert_rc(rowlock_release(l), 0, c);
    tu_lock_free(l);
    tu_client_free(c);
    return t;
}

static void test_restart__tokens_keep_increasing_across_server_restart_and_crash(void **state)
{
    (void)state;
    tu_sandbox sb;
    uint64_t t1, t2, t3, t_other;
    rowlock_client *holder, *probe_c;
    rowlock_lock *held;

    if (tu_sandbox_start(&sb) != 0)
        skip();
    tu_table_fresh(sb.cnf, "t_restart");
    t1 = cycle(sb.cnf, "r");
    t_other = cycle(sb.cnf, "r-other");
    assert_true(t_other > t1);

    tu_sandbox_cmd(&sb, "restart");
    t2 = cycle(sb.cnf, "r");
    if (t2 <= t_other)
        fail_msg("after a restart: token %llu, before it %llu", (unsigned long long)t2,
                 (unsigned long long)t_other);

    /* A grant made just before a crash survives it (durable commit). */
    holder = tu_client_at(sb.cnf, "t_restart");
    held = L(holder, "held-at-crash");
    assert_rc(rowlock_acquire(held, 0, TU_LEASE_LONG), 0, holder);

    tu_sandbox_cmd(&sb, "kill");
    tu_sandbox_cmd(&sb, "start");
    t3 = cycle(sb.cnf, "r");
    if (t3 <= t2 || t3 <= rowlock_lock_token(held))
        fail_msg("after a crash: token %llu, before it %llu and %llu", (unsigned long long)t3,
                 (unsigned long long)t2, (unsigned long long)rowlock_lock_token(held));

    probe_c = tu_client_at(sb.cnf, "t_restart");
    {
        rowlock_lock *p = L(probe_c, "held-at-crash");
        rowlock_info info;
        assert_rc(rowlock_acquire(p, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, probe_c);
        tu_inspect(p, &info);
        assert_true(info.held);
        assert_string_equal(info.owner, rowlock_client_owner(holder));
        assert_int_equal(info.token, rowlock_lock_token(held));
    }
    /* The holder's client (its connection died with the server) can still
     * release it: the first call may report the lost connection (EDB), the
     * next one reconnects. The lease lives in the row, not the session. */
    {
        int rc = rowlock_release(held);
        if (rc == ROWLOCK_EDB)
            rc = rowlock_release(held);
        assert_rc(rc, 0, holder);
    }
    tu_sandbox_stop(&sb);
}

/*
 * A renewal never shortens the lease, so the keeper's safe time (the
 * greatest send time + lease the server confirmed) is never past the
 * lease's end on the server. Acquired for 20 s, renewed by hand for 1 s,
 * then kept with 1 s renewals: the lease still ends ~20 s out, and the
 * keeper's safe time is not beyond it. Planted renewal that sets now +
 * lease: the server's lease ends within 1 s while the keeper says ~18 s
 * (fails).
 */
static void test_renew__never_shortens_the_lease(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = L(a, "renew-short"), *lb = L(b, "renew-short");
    rowlock_info info;
    assert_rc(rowlock_acquire(la, 0, 20000), 0, a);
    assert_rc(rowlock_renew(la, 1000), 0, a);
    tu_inspect(lb, &info);
    const int64_t after_renew = info.expires_in_ms;
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    ko.lease_ms = 1000;
    assert_rc(rowlock_keep(la, &ko), 0, a);
    tu_sleep_ms(1500); /* renewals every 333 ms */
    rowlock_keep_info ki = ROWLOCK_KEEP_INFO_INIT;
    assert_int_equal(rowlock_keep_status(la, &ki), 0);
    const int64_t t1 = tu_now_us();
    tu_inspect(lb, &info);
    const int64_t since_ms = (tu_now_us() - t1) / 1000 + 1; /* the status is older than the inspect */
    assert_rc(rowlock_release(la), 0, a);
    print_message("  lease left after a 1 s renewal: %lld ms; keeper safe for %lld ms, server's lease %lld ms\n",
                  (long long)after_renew, (long long)ki.safe_ms, (long long)info.expires_in_ms);
    assert_true(after_renew > 15000);
    assert_true(ki.renewals >= 1);
    assert_true(ki.safe_ms - since_ms <= info.expires_in_ms + 50);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest main_tests[] = {
        TU_TEST(test_expiry__an_idle_holder_loses_the_lock_only_after_its_lease),
        TU_TEST(test_renew__keeps_the_lock_past_its_original_lease),
        TU_TEST(test_renew__never_shortens_the_lease),
        TU_TEST(test_renew__after_the_lease_ended_is_enotowner),
        TU_TEST(test_release__after_the_lease_ended_but_untaken_succeeds),
        TU_TEST(test_reentry__extends_the_lease_to_at_least_the_new_one),
        TU_TEST(test_lease__zero_means_the_default),
    };
    const struct CMUnitTest fault_tests[] = {
        TU_TEST(test_crash__a_holder_that_exits_without_release_frees_the_lock_after_its_lease),
        TU_TEST(test_restart__tokens_keep_increasing_across_server_restart_and_crash),
    };
    if (argc < 2 || rowlock_strategy_parse(&S, argv[1]) != 0 || S == ROWLOCK_STRATEGY_FOR_UPDATE) {
        fprintf(stderr, "usage: %s insert|optimistic [main|fault] [test-filter]\n", argv[0]);
        return 2;
    }
    snprintf(TABLE, sizeof TABLE, "t_%s", argv[1]);
    const char *group = argc > 2 ? argv[2] : "main";
    const char *filter = argc > 3 ? argv[3] : NULL;
    char name[64];
    snprintf(name, sizeof name, "%s %s", rowlock_strategy_name(S), group);
    if (strcmp(group, "main") == 0)
        return tu_main(name, main_tests, sizeof main_tests / sizeof main_tests[0], TABLE, filter);
    if (strcmp(group, "fault") == 0) {
        strcat(TABLE, "_f");
        return tu_main(name, fault_tests, sizeof fault_tests / sizeof fault_tests[0], TABLE, filter);
    }
    fprintf(stderr, "usage: %s insert|optimistic [main|fault] [test-filter]\n", argv[0]);
    return 2;
}
