/*
 * Administration of lease rows: the reaper (rowlock_admin_reap), the list of
 * held and stale locks (rowlock_admin_list), the table's counts (rowlock_admin_stats)
 * and the release of one named holder (rowlock_admin_force_release_holder), for
 * each lease strategy.
 *
 *     test_admin insert|optimistic [test-filter]
 */
#include "testutil.h"

#include <stdlib.h>

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

/* ---- reaper ------------------------------------------------------------------------------------ */

static void test_reap__purges_ended_leases_and_tokens_keep_increasing(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C(), *admin = C();
    rowlock_lock *rel = L(a, "reap-released"), *exp = L(a, "reap-expired"), *live = L(a, "reap-live");
    rowlock_lock *rel_b = L(b, "reap-released"), *exp_b = L(b, "reap-expired"), *live_b = L(b, "reap-live");
    rowlock_reap_options ro = ROWLOCK_REAP_OPTIONS_INIT;
    rowlock_reap_stats st;
    rowlock_info info;
    uint64_t t_rel, t_exp;

    assert_rc(rowlock_acquire(rel, 0, TU_LEASE_LONG), 0, a);
    t_rel = rowlock_lock_token(rel);
    assert_rc(rowlock_release(rel), 0, a);
    assert_rc(rowlock_acquire(exp, 0, 200), 0, a);
    t_exp = rowlock_lock_token(exp);
    assert_rc(rowlock_acquire(live, 0, TU_LEASE_LONG), 0, a);
    tu_wait_lease_ended(exp_b, 10000);
    tu_sleep_ms(20);

    /* A long grace keeps them. */
    memset(&st, 0, sizeof st);
    st.version = ROWLOCK_REAP_STATS_VERSION;
    ro.grace_ms = 3600 * 1000;
    assert_rc(rowlock_admin_reap(admin, &ro, &st), 0, admin);
    assert_int_equal(st.purged, 0);
    tu_inspect(exp_b, &info);
    assert_true(info.exists);

    /* A dry run counts them and changes nothing. */
    memset(&st, 0, sizeof st);
    st.version = ROWLOCK_REAP_STATS_VERSION;
    ro.grace_ms = 0;
    ro.dry_run = 1;
    assert_rc(rowlock_admin_reap(admin, &ro, &st), 0, admin);
    assert_true(st.purged >= 2);
    tu_inspect(rel_b, &info);
    assert_true(info.exists);

    /* One row per batch, paced by the default (as long as each DELETE took). */
    memset(&st, 0, sizeof st);
    st.version = ROWLOCK_REAP_STATS_VERSION;
    ro.dry_run = 0;
    ro.batch = 1;
    assert_int_equal(ro.pause_ms, ROWLOCK_REAP_PAUSE_AUTO);
    assert_rc(rowlock_admin_reap(admin, &ro, &st), 0, admin);
    assert_true(st.purged >= 2);
    assert_true(st.batches >= 2);
    assert_int_equal(st.complete, 1);
    assert_true(st.oldest_expiry_us > 0);

    tu_inspect(rel_b, &info);
    assert_false(info.exists);
    tu_inspect(exp_b, &info);
    assert_false(info.exists);
    tu_inspect(live_b, &info); /* a live lease survives */
    assert_true(info.exists);
    assert_true(info.held);

    /* The purged holder's calls fail; new grants get larger tokens. */
    assert_rc(rowlock_renew(exp, TU_LEASE_LONG), ROWLOCK_ENOTOWNER, a);
    assert_rc(rowlock_acquire(rel_b, 0, TU_LEASE_LONG), 0, b);
    assert_true(rowlock_lock_token(rel_b) > t_rel);
    assert_rc(rowlock_acquire(exp_b, 0, TU_LEASE_LONG), 0, b);
    assert_true(rowlock_lock_token(exp_b) > t_exp);
    assert_true(rowlock_lock_token(exp_b) > rowlock_lock_token(rel_b));
    assert_rc(rowlock_release(rel_b), 0, b);
    assert_rc(rowlock_release(exp_b), 0, b);
    assert_rc(rowlock_release(live), 0, a);
}

static void test_reap__bad_options_are_refused(void **state)
{
    (void)state;
    rowlock_client *admin = C();
    rowlock_reap_options ro = ROWLOCK_REAP_OPTIONS_INIT;
    rowlock_reap_stats st;
    memset(&st, 0, sizeof st);
    st.version = ROWLOCK_REAP_STATS_VERSION;
    ro.version = 99;
    assert_rc(rowlock_admin_reap(admin, &ro, &st), ROWLOCK_EINVALID, admin);
    ro.version = ROWLOCK_REAP_OPTIONS_VERSION;
    ro.pause_ms = -2; /* -1 is ROWLOCK_REAP_PAUSE_AUTO */
    assert_rc(rowlock_admin_reap(admin, &ro, &st), ROWLOCK_EINVALID, admin);
    assert_msg_has(admin, "pause");
    ro.pause_ms = 60001;
    assert_rc(rowlock_admin_reap(admin, &ro, &st), ROWLOCK_EINVALID, admin);
}

/* A caller built against version 1 of the options (no pause_ms): its struct
 * ends before the field, which must not be read (here: garbage after it). */
static void test_reap__version_1_options_are_still_accepted(void **state)
{
    (void)state;
    rowlock_client *admin = C();
    struct { rowlock_reap_options o; } v1;
    rowlock_reap_stats st;
    memset(&v1, 0, sizeof v1);
    memset(&st, 0, sizeof st);
    v1.o.version = 1;
    v1.o.grace_ms = 3600000;
    v1.o.pause_ms = -12345; /* stands for bytes beyond a version 1 struct */
    st.version = 1;
    assert_rc(rowlock_admin_reap(admin, &v1.o, &st), 0, admin);
    assert_int_equal(st.version, 1);
    assert_int_equal(st.complete, 1);
}

/* ---- list ---------------------------------------------------------------------------------------- */

typedef struct list_seen {
    int held_a, stale_b;
    char owner_a[ROWLOCK_OWNER_MAX + 1];
} list_seen;

static int list_cb(const rowlock_info *info, void *arg)
{
    list_seen *s = arg;
    if (strcmp(info->name, "list-held") == 0) {
        s->held_a++;
        snprintf(s->owner_a, sizeof s->owner_a, "%s", info->owner);
    }
    if (strcmp(info->name, "list-stale") == 0)
        s->stale_b++;
    return 0;
}

static int list_stop(const rowlock_info *info, void *arg)
{
    (void)info;
    (void)arg;
    return 7;
}

static void test_list__shows_held_locks_and_with_the_flag_stale_ones(void **state)
{
    (void)state;
    rowlock_client *a = C(), *admin = C();
    rowlock_lock *held = L(a, "list-held"), *stale = L(a, "list-stale"), *probe = L(admin, "list-stale");
    list_seen seen;
    assert_rc(rowlock_acquire(held, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_acquire(stale, 0, 200), 0, a);
    tu_wait_lease_ended(probe, 10000);

    memset(&seen, 0, sizeof seen);
    assert_rc(rowlock_admin_list(admin, 0, list_cb, &seen), 0, admin);
    assert_int_equal(seen.held_a, 1);
    assert_int_equal(seen.stale_b, 0);
    assert_string_equal(seen.owner_a, rowlock_client_owner(a));

    memset(&seen, 0, sizeof seen);
    assert_rc(rowlock_admin_list(admin, ROWLOCK_LIST_STALE, list_cb, &seen), 0, admin);
    assert_int_equal(seen.held_a, 0);
    assert_int_equal(seen.stale_b, 1);

    assert_int_equal(rowlock_admin_list(admin, 0, list_stop, NULL), 7);
    assert_rc(rowlock_release(held), 0, a);
}

/* Versioned structs, case 2 (rowlock.h): a result struct the library fills
 * is accepted at any version but 0; a newer caller's keeps its version and
 * gets the fields this library knows. rowlock_reap_stats has its own
 * version now, and a 0.1.0 caller's (it set the options' version) is still
 * accepted. */
static void test_reap__stats_of_any_version_but_0_are_filled(void **state)
{
    (void)state;
    rowlock_client *admin = C();
    rowlock_reap_options ro = ROWLOCK_REAP_OPTIONS_INIT;
    ro.grace_ms = 3600000;
    rowlock_reap_stats st = ROWLOCK_REAP_STATS_INIT;
    st.version = 0;
    assert_rc(rowlock_admin_reap(admin, &ro, &st), ROWLOCK_EINVALID, admin);
    assert_msg_has(admin, "ROWLOCK_REAP_STATS_INIT");
    const unsigned int versions[] = { ROWLOCK_REAP_STATS_VERSION, 1, 2, ROWLOCK_REAP_STATS_VERSION + 7 };
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        st = (rowlock_reap_stats)ROWLOCK_REAP_STATS_INIT;
        st.version = versions[i];
        /* Stand for bytes beyond a version 1 struct (a 0.1.0 caller set
         * 1 or 2, the options' version then): never written for those. */
        st.unjudged = 12345;
        st.changed = 678;
        st.waited_us = -9;
        assert_rc(rowlock_admin_reap(admin, &ro, &st), 0, admin);
        assert_int_equal(st.version, versions[i]);
        assert_int_equal(st.complete, 1);
        const int old = versions[i] < 3;
        assert_true(st.unjudged == (old ? 12345u : 0u) && st.changed == (old ? 678u : 0u) &&
                    st.waited_us == (old ? -9 : 0));
    }
}

/* ---- stats and force release of one owner ------------------------------------------------------ */

static rowlock_stats_info stats_of(rowlock_client *c)
{
    rowlock_stats_info st = ROWLOCK_STATS_INFO_INIT;
    assert_rc(rowlock_admin_stats(c, &st), 0, c);
    return st;
}

static void test_stats__counts_a_held_and_a_stale_grant_by_the_server_clock(void **state)
{
    (void)state;
    rowlock_client *a = C(), *admin = C();
    rowlock_lock *held = L(a, "stats-held"), *stale = L(a, "stats-stale"), *probe = L(admin, "stats-stale");
    rowlock_stats_info before, after, bad = ROWLOCK_STATS_INFO_INIT;

    before = stats_of(admin);
    assert_true(before.server_now_us > 1700000000LL * 1000000);
    assert_rc(rowlock_acquire(held, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_acquire(stale, 0, 200), 0, a);
    tu_wait_lease_ended(probe, 10000);
    tu_sleep_ms(50);
    after = stats_of(admin);
    assert_int_equal(after.names_held, before.names_held + 1);
    assert_int_equal(after.holders_exclusive, before.holders_exclusive + 1);
    assert_int_equal(after.holders_shared, before.holders_shared);
    assert_int_equal(after.stale, before.stale + 1);
    assert_true(after.rows >= 2 && after.rows >= before.rows);
    assert_true(after.oldest_grant_age_ms >= 200);  /* held since before the stale lease ended */
    assert_true(after.oldest_stale_age_ms >= 40);   /* ended at least the sleep ago */
    assert_true(after.server_now_us > before.server_now_us);

    bad.version = 0;
    assert_int_equal(rowlock_admin_stats(admin, &bad), ROWLOCK_EINVALID);
    assert_int_equal(rowlock_admin_stats(admin, NULL), ROWLOCK_EINVALID);
    /* A newer caller's struct (versioned structs, case 2): accepted, its
     * version kept, the fields this library knows filled. */
    rowlock_stats_info newer = ROWLOCK_STATS_INFO_INIT;
    newer.version = ROWLOCK_STATS_INFO_VERSION + 1;
    assert_rc(rowlock_admin_stats(admin, &newer), 0, admin);
    assert_int_equal(newer.version, ROWLOCK_STATS_INFO_VERSION + 1);
    assert_true(newer.server_now_us >= after.server_now_us);
    assert_true(newer.rows >= after.rows);
    assert_rc(rowlock_release(held), 0, a);
}

static void test_force_release_holder__releases_the_exclusive_holder_it_names_only(void **state)
{
    (void)state;
    rowlock_client *a = C(), *admin = C();
    rowlock_lock *l = L(a, "frh-exclusive");
    unsigned int n = 9;

    assert_rc(rowlock_acquire(l, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_admin_force_release_holder(admin, "frh-exclusive", "nobody:1:x", &n), 0, admin);
    assert_int_equal(n, 0);
    assert_rc(rowlock_renew(l, TU_LEASE_LONG), 0, a); /* still ours */
    assert_rc(rowlock_admin_force_release_holder(admin, "frh-exclusive", rowlock_client_owner(a), &n), 0, admin);
    assert_int_equal(n, 1);
    assert_int_equal(rowlock_release(l), ROWLOCK_ENOTOWNER);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_reap__purges_ended_leases_and_tokens_keep_increasing),
        TU_TEST(test_reap__bad_options_are_refused),
        TU_TEST(test_reap__version_1_options_are_still_accepted),
        TU_TEST(test_reap__stats_of_any_version_but_0_are_filled),
        TU_TEST(test_list__shows_held_locks_and_with_the_flag_stale_ones),
        TU_TEST(test_stats__counts_a_held_and_a_stale_grant_by_the_server_clock),
        TU_TEST(test_force_release_holder__releases_the_exclusive_holder_it_names_only),
    };
    if (argc < 2 || rowlock_strategy_parse(&S, argv[1]) != 0 || S == ROWLOCK_STRATEGY_FOR_UPDATE) {
        fprintf(stderr, "usage: %s insert|optimistic [test-filter]\n", argv[0]);
        return 2;
    }
    char name[64];
    snprintf(TABLE, sizeof TABLE, "t_admin_%s", argv[1]);
    snprintf(name, sizeof name, "admin (%s)", argv[1]);
    return tu_main(name, tests, sizeof tests / sizeof tests[0], TABLE, argc > 2 ? argv[2] : NULL);
}
