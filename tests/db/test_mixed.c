/*
 * One name, several strategies: a name's row has a fixed strategy, using
 * another strategy on it is refused with ROWLOCK_EINVALID naming the owning
 * strategy, promptly (even while a for-update transaction holds the row),
 * and two strategies never both hold one name.
 */
#include "testutil.h"

#include <stdlib.h>
#include <unistd.h>

static char TABLE[64] = "t_mixed";

static const rowlock_strategy ALL[3] = { ROWLOCK_STRATEGY_INSERT, ROWLOCK_STRATEGY_FOR_UPDATE,
                                         ROWLOCK_STRATEGY_OPTIMISTIC };

/* ---- a held name, tried by the other strategies from another process ------------------------ */

typedef struct attempt {
    rowlock_strategy s;
    int64_t wait_ms;
    int rc;
    double ms;
    unsigned int held_after;
    char msg[512];
} attempt;

typedef struct mixed_shared {
    char name[64];
    int n;
    attempt at[4];
} mixed_shared;

static int other_strategies(void *arg, int idx)
{
    mixed_shared *sh = arg;
    rowlock_client *c = tu_child_client(NULL, TABLE);
    (void)idx;
    if (c == NULL)
        return 10;
    for (int i = 0; i < sh->n; i++) {
        attempt *a = &sh->at[i];
        rowlock_lock_options lo = ROWLOCK_LOCK_OPTIONS_INIT;
        rowlock_lock *l = NULL;
        int64_t t0;
        lo.strategy = a->s;
        if (rowlock_lock_new(&l, c, sh->name, &lo) != 0)
            return 11;
        t0 = tu_now_us();
        a->rc = rowlock_acquire(l, a->wait_ms, TU_LEASE_LONG);
        a->ms = tu_ms_since(t0);
        a->held_after = rowlock_lock_held(l);
        snprintf(a->msg, sizeof a->msg, "%s", rowlock_client_errmsg(c));
        rowlock_lock_free(l);
    }
    rowlock_client_free(c);
    return 0;
}

static void held_by_one_refused_to_others(rowlock_strategy first)
{
    const char *fname = rowlock_strategy_name(first);
    mixed_shared *sh = tu_shm(sizeof *sh);
    rowlock_client *a = tu_client(TABLE), *admin = tu_client(TABLE);
    rowlock_lock *la;
    rowlock_info info;
    uint64_t ta;

    snprintf(sh->name, sizeof sh->name, "x-%s", fname);
    la = tu_lock(a, sh->name, first);
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    ta = rowlock_lock_token(la);

    for (int k = 0; k < 3; k++) {
        if (ALL[k] == first)
            continue;
        sh->at[sh->n].s = ALL[k];
        sh->at[sh->n++].wait_ms = 0;
        sh->at[sh->n].s = ALL[k];
        sh->at[sh->n++].wait_ms = 2000;
    }
    assert_int_equal(tu_run_children(1, other_strategies, sh, NULL, 120000), 0);
    for (int i = 0; i < sh->n; i++) {
        attempt *at = &sh->at[i];
        const char *sname = rowlock_strategy_name(at->s);
        if (at->rc != ROWLOCK_EINVALID)
            fail_msg("'%s' held with %s: %s (wait %lld) gave %s, expected ROWLOCK_EINVALID (%s)", sh->name, fname,
                     sname, (long long)at->wait_ms, rowlock_error_name(at->rc), at->msg);
        if (tu_strcasestr(at->msg, fname) == NULL)
            fail_msg("'%s': the refusal of %s does not name the %s strategy: \"%s\"", sh->name, sname, fname,
                     at->msg);
        assert_int_equal(at->held_after, 0);
        if (at->wait_ms == 0 && at->ms > TU_FAST_MS)
            fail_msg("'%s' held with %s: a try with %s took %.1f ms (bound %d)", sh->name, fname, sname, at->ms,
                     TU_FAST_MS);
        if (at->ms > (double)(at->wait_ms + TU_SLACK_MS) && at->wait_ms > 0)
            fail_msg("'%s' held with %s: a %lld ms wait with %s took %.1f ms", sh->name, fname,
                     (long long)at->wait_ms, sname, at->ms);
    }

    /* Still held by the first strategy's owner, untouched. */
    tu_inspect(tu_lock(admin, sh->name, first), &info);
    assert_true(info.exists);
    assert_true(info.held);
    assert_int_equal(info.strategy, first);
    if (first != ROWLOCK_STRATEGY_FOR_UPDATE) {
        assert_string_equal(info.owner, rowlock_client_owner(a));
        assert_int_equal(info.token, ta);
    }
    assert_int_equal(rowlock_lock_held(la), 1);
    assert_rc(rowlock_renew(la, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_release(la), 0, a);

    /* Free, the row still belongs to the first strategy. */
    for (int k = 0; k < 3; k++) {
        rowlock_lock *l;
        if (ALL[k] == first)
            continue;
        l = tu_lock(admin, sh->name, ALL[k]);
        assert_rc(rowlock_acquire(l, 0, TU_LEASE_LONG), ROWLOCK_EINVALID, admin);
        assert_msg_has(admin, fname);
    }
    tu_shm_free(sh, sizeof *sh);
}

static void test_held_with_insert__other_strategies_are_refused_naming_insert(void **state)
{
    (void)state;
    held_by_one_refused_to_others(ROWLOCK_STRATEGY_INSERT);
}

static void test_held_with_for_update__other_strategies_are_refused_promptly(void **state)
{
    (void)state;
    held_by_one_refused_to_others(ROWLOCK_STRATEGY_FOR_UPDATE);
}

static void test_held_with_optimistic__other_strategies_are_refused_naming_optimistic(void **state)
{
    (void)state;
    held_by_one_refused_to_others(ROWLOCK_STRATEGY_OPTIMISTIC);
}

/* After the reaper purges a lease strategy's row, the name is free to change strategy. */
static void test_purged_name__may_change_strategy(void **state)
{
    (void)state;
    rowlock_client *a = tu_client(TABLE), *admin = tu_client(TABLE);
    rowlock_lock *li = tu_lock(a, "purged", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *lf = tu_lock(a, "purged", ROWLOCK_STRATEGY_FOR_UPDATE);
    rowlock_reap_options ro = ROWLOCK_REAP_OPTIONS_INIT;
    rowlock_reap_stats st;
    rowlock_info info;
    uint64_t ti;
    assert_rc(rowlock_acquire(li, 0, TU_LEASE_LONG), 0, a);
    ti = rowlock_lock_token(li);
    assert_rc(rowlock_release(li), 0, a);
    assert_rc(rowlock_acquire(lf, 0, 0), ROWLOCK_EINVALID, a);
    tu_sleep_ms(20);
    memset(&st, 0, sizeof st);
    st.version = ROWLOCK_REAP_STATS_VERSION;
    ro.grace_ms = 0;
    assert_rc(rowlock_admin_reap(admin, &ro, &st), 0, admin);
    tu_inspect(lf, &info);
    assert_false(info.exists);
    assert_rc(rowlock_acquire(lf, 0, 0), 0, a);
    assert_true(rowlock_lock_token(lf) > ti);
    /* Now it is a for-update name: insert is refused (from another client,
     * whose connection is not inside a's transaction). */
    {
        rowlock_lock *li2 = tu_lock(admin, "purged", ROWLOCK_STRATEGY_INSERT);
        assert_rc(rowlock_acquire(li2, 0, TU_LEASE_LONG), ROWLOCK_EINVALID, admin);
        assert_msg_has(admin, "for-update");
    }
    assert_rc(rowlock_release(lf), 0, a);
    assert_rc(rowlock_acquire(li, 0, TU_LEASE_LONG), ROWLOCK_EINVALID, a);
    assert_msg_has(a, "for-update");
}

/* ---- two strategies race for a brand-new name ------------------------------------------------- */

#define RACE_ROUNDS 15

typedef struct race_shared {
    char name[64];
    rowlock_strategy s[2];
    int rc[2];
    char msg[2][512];
} race_shared;

static tu_pipe race_ready, race_go, race_done, race_end;

static int racer(void *arg, int idx)
{
    race_shared *sh = arg;
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    int setup = tu_child_lock(TABLE, sh->name, sh->s[idx], &c, &l);
    if (setup)
        return setup;
    tu_signal(&race_ready, 'R');
    if (tu_await(&race_go, 60000) != 'G')
        return 12;
    sh->rc[idx] = rowlock_acquire(l, 0, TU_LEASE_LONG);
    snprintf(sh->msg[idx], sizeof sh->msg[idx], "%s", rowlock_client_errmsg(c));
    tu_signal(&race_done, 'D');
    /* Keep it until both have reported: a double grant would overlap. */
    if (tu_await(&race_end, 60000) != 'E')
        return 13;
    if (sh->rc[idx] == 0 && rowlock_release(l) != 0)
        return 14;
    rowlock_lock_free(l);
    rowlock_client_free(c);
    return 0;
}

static void test_race__two_strategies_on_a_new_name_never_both_hold_it(void **state)
{
    (void)state;
    race_shared *sh = tu_shm(sizeof *sh);
    const int pairs[3][2] = { { 0, 1 }, { 0, 2 }, { 1, 2 } };
    int wins[3] = { 0, 0, 0 };
    tu_pipe_open(&race_ready);
    tu_pipe_open(&race_go);
    tu_pipe_open(&race_done);
    tu_pipe_open(&race_end);
    for (int p = 0; p < 3; p++) {
        for (int r = 0; r < RACE_ROUNDS; r++) {
            pid_t pid[2];
            memset(sh, 0, sizeof *sh);
            snprintf(sh->name, sizeof sh->name, "race-%d-%d", p, r);
            /* Alternate who is forked first. */
            sh->s[0] = ALL[pairs[p][r % 2]];
            sh->s[1] = ALL[pairs[p][1 - r % 2]];
            sh->rc[0] = sh->rc[1] = 99;
            for (int k = 0; k < 2; k++)
                pid[k] = tu_fork(racer, sh, k);
            for (int k = 0; k < 2; k++)
                if (tu_await(&race_ready, 60000) != 'R')
                    fail_msg("racers did not start");
            tu_signal(&race_go, 'G');
            tu_signal(&race_go, 'G');
            for (int k = 0; k < 2; k++)
                if (tu_await(&race_done, 60000) != 'D')
                    fail_msg("racers did not report");
            if (sh->rc[0] == 0 && sh->rc[1] == 0)
                fail_msg("'%s': %s and %s both hold it", sh->name, rowlock_strategy_name(sh->s[0]),
                         rowlock_strategy_name(sh->s[1]));
            for (int k = 0; k < 2; k++) {
                int rc = sh->rc[k];
                if (rc == 0)
                    wins[p]++;
                else if (rc != ROWLOCK_EINVALID && rc != ROWLOCK_EBUSY)
                    fail_msg("'%s': %s gave %s (%s)", sh->name, rowlock_strategy_name(sh->s[k]),
                             rowlock_error_name(rc), sh->msg[k]);
            }
            tu_signal(&race_end, 'E');
            tu_signal(&race_end, 'E');
            for (int k = 0; k < 2; k++)
                assert_int_equal(tu_wait(pid[k], 60000), 0);
        }
    }
    /* Someone wins most rounds (a name is not left unusable). */
    for (int p = 0; p < 3; p++)
        if (wins[p] < RACE_ROUNDS / 2)
            fail_msg("pair %d: only %d of %d rounds had a winner", p, wins[p], RACE_ROUNDS);
    tu_pipe_close(&race_ready);
    tu_pipe_close(&race_go);
    tu_pipe_close(&race_done);
    tu_pipe_close(&race_end);
    tu_shm_free(sh, sizeof *sh);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_held_with_insert__other_strategies_are_refused_naming_insert),
        TU_TEST(test_held_with_for_update__other_strategies_are_refused_promptly),
        TU_TEST(test_held_with_optimistic__other_strategies_are_refused_naming_optimistic),
        TU_TEST(test_purged_name__may_change_strategy),
        TU_TEST(test_race__two_strategies_on_a_new_name_never_both_hold_it),
    };
    return tu_main("mixed", tests, sizeof tests / sizeof tests[0], TABLE, argc > 1 ? argv[1] : NULL);
}
