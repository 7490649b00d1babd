/*
 * Injected errors, through the test-only seam of src/fault.c
 * (ROWLOCK_FAULT_INJECTION, src/rowlock_int.h): named
 * statements made to fail with a chosen MySQL error, stall, or lose their
 * connection after they ran. For every retry and error path of acquire,
 * release, renew, reap and migrate each test checks the exact return code,
 * reads the row afterwards (nothing half-written), and makes the next call
 * on the same client, which must work.
 *
 *     test_inject         all tests, against the shared test server
 *     test_inject env     only the ROWLOCK_FAULTS check (ctest sets the
 *                         variable: claim:0:1205)
 */
#include "testutil.h"

#include <pthread.h>
#include <stdlib.h>

#include "rowlock_int.h"

#define TABLE "t_fault"

static rowlock_client *C(void)
{
    return tu_client(TABLE);
}

static void arm(rowlock_client *c, const char *tag, unsigned nth, rowlock__fault_kind kind, unsigned value)
{
    assert_int_equal(rowlock__fault_set(c, tag, nth, kind, value), 0);
}

static void arm_error(rowlock_client *c, const char *tag, unsigned nth, unsigned err)
{
    arm(c, tag, nth, ROWLOCK__FAULT_ERROR, err);
}

/* The row of `name`: count (-1: no row), and whether an owner holds it now. */
static long long row_count(const char *name)
{
    int ok = 0;
    long long n = tu_sql_int(NULL, &ok, "SELECT count FROM `" TABLE "` WHERE name = '%s'", name);
    return ok ? n : -1;
}

static int row_held(const char *name)
{
    int ok = 0;
    long long n = tu_sql_int(NULL, &ok,
                             "SELECT owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6) FROM `" TABLE
                             "` WHERE name = '%s'",
                             name);
    return ok && n == 1;
}

static long long row_expires_in_ms(const char *name)
{
    int ok = 0;
    long long n = tu_sql_int(NULL, &ok,
                             "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) DIV 1000 FROM `" TABLE
                             "` WHERE name = '%s'",
                             name);
    return ok ? n : -1;
}

static int teardown_faults(void **state)
{
    rowlock__fault_clear(NULL);
    unsetenv("ROWLOCK_LEASE_RULE");
    return tu_teardown(state);
}

#define FT(fn) cmocka_unit_test_setup_teardown(fn, tu_setup, teardown_faults)

/* ---- the seam itself ------------------------------------------------------------- */

static void test_seam__a_statement_with_the_wrong_parameter_count_is_an_internal_error(void **state)
{
    (void)state;
    rowlock_client *c = C();
    static const char SQL[] = "/* rowlock:test */ SELECT ? + ?";
    rowlock__param p = RL_I64(1);
    rowlock__col col = { .type = ROWLOCK__T_I64 };
    assert_rc(rowlock__db_run(c, RL_STMT(.what = "test", .tmpl = SQL, .params = &p, .nparams = 1, .cols = &col,
                                         .ncols = 1)), ROWLOCK_EDB, c);
    assert_msg_has(c, "internal error");
    assert_msg_has(c, "takes 2 parameters, 1 given");
    rowlock__param p2[2] = { RL_I64(1), RL_I64(2) };
    assert_rc(rowlock__db_run(c, RL_STMT(.what = "test", .tmpl = SQL, .params = p2, .nparams = 2, .cols = &col,
                                         .ncols = 1)), 0, c);
    assert_int_equal(col.i, 3);
}

/* A typo of a tag ("clam" for "claim") must not arm a rule that never
 * fires: the seam knows every tag a statement carries (generated from
 * the sources in src/) and refuses the others. */
static void test_seam__a_tag_no_statement_carries_is_refused(void **state)
{
    (void)state;
    rowlock_client *c = C();
    assert_int_equal(rowlock__fault_set(c, "clam", 1, ROWLOCK__FAULT_ERROR, 1205), ROWLOCK_EINVALID);
    assert_int_equal(rowlock__fault_set(NULL, "", 1, ROWLOCK__FAULT_ERROR, 1205), ROWLOCK_EINVALID);
    assert_int_equal(rowlock__fault_set(c, "rowlock:claim", 1, ROWLOCK__FAULT_ERROR, 1205), ROWLOCK_EINVALID);
    assert_false(rowlock__fault_tag_known("clam"));
    /* Tags of every family are known: exclusive, holders, cluster, admin. */
    const char *known[] = { "claim", "reenter", "hold-draw", "hold-wait", "cl-claim", "cl-reap-one",
                            "fu-lock-wait", "migrate", "migrate-traits", "schema-version", "reap-delete" };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!rowlock__fault_tag_known(known[i]))
            fail_msg("tag '%s' is not known to the seam", known[i]);
    assert_int_equal(rowlock__fault_set(c, "claim", 1, ROWLOCK__FAULT_ERROR, 1205), 0);
    rowlock__fault_clear(c);
}

static void test_seam__rules_count_executions_per_client_and_tag(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = tu_lock(a, "seam", ROWLOCK_STRATEGY_INSERT), *lb = tu_lock(b, "seam-b", ROWLOCK_STRATEGY_INSERT);
    arm_error(a, "claim", 2, 1235);
    assert_rc(rowlock_acquire(lb, 0, 0), 0, b); /* b's claim: not a's rule */
    assert_rc(rowlock_acquire(la, 0, 0), 0, a); /* a's 1st claim */
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_acquire(la, 0, 0), ROWLOCK_EDB, a); /* a's 2nd claim */
    assert_int_equal(rowlock_client_db_errno(a), 1235);
    assert_string_equal(rowlock_client_sqlstate(a), "42000");
    assert_int_equal(rowlock__fault_fired(a, "claim"), 1);
    assert_rc(rowlock_acquire(la, 0, 0), 0, a); /* the 3rd runs */
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_release(lb), 0, b);
}

/* ---- acquire (lease strategies) ---------------------------------------------------- */

static void test_acquire__a_busy_claim_every_time_is_ebusy_and_writes_nothing(void **state)
{
    (void)state;
    rowlock_client *c = C();
    rowlock_lock *l = tu_lock(c, "acq-busy", ROWLOCK_STRATEGY_INSERT);
    arm_error(c, "claim", 0, 1205);
    assert_rc(rowlock_acquire(l, 0, 0), ROWLOCK_EBUSY, c);
    assert_true(rowlock__fault_fired(c, "claim") >= 1);
    assert_int_equal(row_count("acq-busy"), -1);
    assert_int_equal(rowlock_lock_held(l), 0);
    rowlock__fault_clear(c);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c);
    assert_true(row_held("acq-busy"));
    assert_rc(rowlock_release(l), 0, c);
}

static void test_acquire__one_deadlock_on_a_free_row_is_retried_ungated(void **state)
{
    (void)state;
    rowlock_client *c = C();
    rowlock_lock *l = tu_lock(c, "acq-deadlock", ROWLOCK_STRATEGY_INSERT);
    arm_error(c, "claim", 1, 1213);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c);
    assert_int_equal(rowlock__fault_fired(c, "claim"), 1);
    assert_int_equal(row_count("acq-deadlock"), 1);
    assert_rc(rowlock_release(l), 0, c);
    assert_false(row_held("acq-deadlock"));
}

static void test_acquire__a_lost_connection_is_edb_and_the_next_call_reconnects(void **state)
{
    (void)state;
    const unsigned errs[] = { 2013, 2006 };
    for (size_t i = 0; i < 2; i++) {
        rowlock_client *c = C();
        char name[32];
        snprintf(name, sizeof name, "acq-conn-%u", errs[i]);
        rowlock_lock *l = tu_lock(c, name, ROWLOCK_STRATEGY_INSERT);
        arm_error(c, "claim", 1, errs[i]);
        assert_rc(rowlock_acquire(l, 0, 0), ROWLOCK_EDB, c);
        assert_int_equal(rowlock_client_db_errno(c), errs[i]);
        assert_int_equal(row_count(name), -1);
        assert_rc(rowlock_acquire(l, 0, 0), 0, c);
        assert_true(row_held(name));
        assert_rc(rowlock_release(l), 0, c);
        assert_false(row_held(name));
    }
}

static void test_acquire__a_missing_table_is_eschema_and_other_errors_edb(void **state)
{
    (void)state;
    rowlock_client *c = C();
    rowlock_lock *l = tu_lock(c, "acq-schema", ROWLOCK_STRATEGY_INSERT);
    arm_error(c, "claim", 1, 1146);
    assert_rc(rowlock_acquire(l, 0, 0), ROWLOCK_ESCHEMA, c);
    assert_msg_has(c, "rowlock migrate");
    arm_error(c, "claim", 1, 1235);
    assert_rc(rowlock_acquire(l, 0, 0), ROWLOCK_EDB, c);
    assert_int_equal(row_count("acq-schema"), -1);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c);
    assert_rc(rowlock_release(l), 0, c);
}

static void test_acquire__optimistic_create_and_read_errors(void **state)
{
    (void)state;
    rowlock_client *c = C();
    rowlock_lock *l = tu_lock(c, "acq-opt", ROWLOCK_STRATEGY_OPTIMISTIC);
    arm_error(c, "create", 0, 1205);
    assert_rc(rowlock_acquire(l, 0, 0), ROWLOCK_EBUSY, c);
    assert_int_equal(row_count("acq-opt"), -1);
    rowlock__fault_clear(c);
    arm_error(c, "row-read-shared", 1, 2013);
    assert_rc(rowlock_acquire(l, 0, 0), ROWLOCK_EDB, c);
    assert_int_equal(row_count("acq-opt"), -1);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c);
    assert_rc(rowlock_release(l), 0, c);
    /* The one-statement claim with the known version fails: the read and a
     * second claim follow. */
    arm_error(c, "claim-cas", 1, 1213);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c);
    assert_int_equal(rowlock__fault_fired(c, "claim-cas"), 1);
    assert_int_equal(row_count("acq-opt"), 1);
    assert_rc(rowlock_release(l), 0, c);
}

static void test_acquire__a_wait_survives_failing_hint_and_queue_statements(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = tu_lock(a, "acq-hint", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *lb = tu_lock(b, "acq-hint", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(lb, 0, 1200), 0, b); /* ends by its lease */
    arm_error(a, "hint-wait", 0, 1235);
    arm_error(a, "queue-join", 0, 1235);
    arm_error(a, "head-wait", 0, 1235);
    assert_rc(rowlock_acquire(la, 10000, 0), 0, a); /* polls the row, takes it over */
    assert_true(rowlock__fault_fired(a, "queue-join") >= 1);
    assert_true(rowlock__fault_fired(a, "hint-wait") >= 1);
    assert_int_equal(row_count("acq-hint"), 1);
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_release(lb), ROWLOCK_ENOTOWNER, b);
}

static void test_acquire__a_stalled_claim_still_grants(void **state)
{
    (void)state;
    rowlock_client *c = C();
    rowlock_lock *l = tu_lock(c, "acq-stall", ROWLOCK_STRATEGY_INSERT);
    arm(c, "claim", 1, ROWLOCK__FAULT_STALL, 200);
    double ms;
    int rc;
    TU_TIMED(ms, rc = rowlock_acquire(l, 0, 0));
    assert_rc(rc, 0, c);
    assert_true(ms >= 190);
    assert_int_equal(rowlock__fault_fired(c, "claim"), 1);
    assert_rc(rowlock_release(l), 0, c);
}

/*
 * The claim ran and committed, but its reply was lost with the connection:
 * the caller sees EDB although the row names its owner. Its next acquire
 * must adopt that grant (one read), not re-enter it: the same token once,
 * count 1, so its release frees the lock at once (it used to stay held
 * until the lease ended, and two grants shared a token).
 */
static void test_acquire__a_grant_whose_reply_was_lost_is_adopted_by_the_next_acquire(void **state)
{
    (void)state;
    rowlock_client *c = C(), *other = C();
    rowlock_lock *l = tu_lock(c, "acq-drop", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *lo = tu_lock(other, "acq-drop", ROWLOCK_STRATEGY_INSERT);
    arm(c, "claim", 1, ROWLOCK__FAULT_DROP_AFTER, 0);
    assert_rc(rowlock_acquire(l, 0, 60000), ROWLOCK_EDB, c);
    assert_int_equal(rowlock_client_db_errno(c), 2013);
    assert_int_equal(rowlock_lock_held(l), 0);
    assert_true(row_held("acq-drop"));
    assert_rc(rowlock_acquire(lo, 0, 0), ROWLOCK_EBUSY, other); /* never two holders */
    assert_rc(rowlock_acquire(l, 0, 60000), 0, c);
    assert_int_equal(row_count("acq-drop"), 1);
    rowlock_info info = ROWLOCK_INFO_INIT;
    assert_rc(rowlock_inspect(lo, &info), 0, other);
    assert_true(rowlock_lock_token(l) == info.token);
    assert_rc(rowlock_release(l), 0, c);
    assert_false(row_held("acq-drop"));
    assert_rc(rowlock_acquire(lo, 0, 0), 0, other); /* at once, not after the lease */
    assert_true(rowlock_lock_token(lo) > info.token);
    assert_rc(rowlock_release(lo), 0, other);
}

/*
 * A claim of ours that commits after its acquire went on (a late delivery:
 * the acquire retried on a new connection and is waiting): the row then
 * names our owner though no handle holds it. The waiting acquire must adopt
 * it, count 1, and its release must free the lock; counted as a re-entry
 * (count 2) it left a hidden hold and the same token for the next grant
 * (optimistic, seen by the strict fault soak). The late claim is played by
 * an UPDATE on another connection while the handle waits behind a holder.
 */
static void test_acquire__a_late_claim_of_ours_is_adopted_not_re_entered(void **state)
{
    (void)state;
    static const struct {
        rowlock_strategy s;
        const char *name;
    } cases[] = { { ROWLOCK_STRATEGY_OPTIMISTIC, "late-o" }, { ROWLOCK_STRATEGY_INSERT, "late-i" } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rowlock_client *c = C(), *other = C();
        rowlock_lock *l = tu_lock(c, cases[i].name, cases[i].s);
        rowlock_lock *lo = tu_lock(other, cases[i].name, cases[i].s);
        assert_rc(rowlock_acquire(lo, 0, 60000), 0, other);
        uint64_t t_other = rowlock_lock_token(lo);
        /* Our late claim: the row becomes ours, count 1, a new token. */
        assert_int_equal(tu_sql(NULL, 0,
                                "UPDATE `" TABLE "` SET owner = '%s', count = 1, token = token + 1, "
                                "expires_at = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND WHERE name = '%s'",
                                rowlock_client_owner(c), cases[i].name),
                         0);
        assert_rc(rowlock_acquire(l, 5000, 60000), 0, c);
        assert_true(rowlock_lock_token(l) > t_other);
        assert_int_equal(row_count(cases[i].name), 1);
        uint64_t t_ours = rowlock_lock_token(l);
        assert_rc(rowlock_release(l), 0, c);
        if (row_held(cases[i].name))
            fail_msg("%s: the lock is still held after its only release (a hidden re-entrant hold)",
                     rowlock_strategy_name(cases[i].s));
        assert_rc(rowlock_acquire(l, 0, 60000), 0, c);
        assert_true(rowlock_lock_token(l) > t_ours);
        assert_rc(rowlock_release(l), 0, c);
        /* the other handle's grant was taken by our late claim */
        assert_rc(rowlock_release(lo), ROWLOCK_ENOTOWNER, other);
    }
}

/*
 * The adopted grant's lease runs from the adopting acquire, not from the lost
 * claim: a claim with a 1.5 s lease is lost, and 1 s later an acquire asking
 * for 60 s adopts it. Taken as it was, it would end 0.5 s later while its
 * holder counts on 60 s (a soak saw a waiter take such a grant over at once).
 */
static void test_acquire__an_adopted_grant_gets_the_lease_its_acquire_asked_for(void **state)
{
    (void)state;
    static const struct {
        rowlock_strategy s;
        const char *tag, *name;
    } cases[] = { { ROWLOCK_STRATEGY_INSERT, "claim", "adopt-lease-i" },
                  { ROWLOCK_STRATEGY_OPTIMISTIC, "claim-cas", "adopt-lease-o" } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rowlock_client *c = C();
        rowlock_lock *l = tu_lock(c, cases[i].name, cases[i].s);
        assert_rc(rowlock_acquire(l, 0, 0), 0, c); /* the row exists: optimistic claims by CAS */
        assert_rc(rowlock_release(l), 0, c);
        arm(c, cases[i].tag, 1, ROWLOCK__FAULT_DROP_AFTER, 0);
        assert_rc(rowlock_acquire(l, 0, 1500), ROWLOCK_EDB, c);
        assert_true(row_held(cases[i].name));
        tu_sleep_ms(1000);
        assert_rc(rowlock_acquire(l, 0, 60000), 0, c);
        assert_true(row_expires_in_ms(cases[i].name) > 50000);
        assert_int_equal(row_count(cases[i].name), 1);
        assert_rc(rowlock_release(l), 0, c);
        assert_false(row_held(cases[i].name));
        rowlock__fault_clear(NULL);
    }
}

static long long row_gen(const char *name)
{
    int ok = 0;
    long long n = tu_sql_int(NULL, &ok, "SELECT gen FROM `" TABLE "` WHERE name = '%s'", name);
    return ok ? n : -1;
}

/*
 * The same adoption under the Galera lease rule (forced on this server with
 * ROWLOCK_LEASE_RULE=cluster; read when a client first needs it): the
 * adopting write is a holder write, so it bumps gen (a taker watching the
 * row must start its lease over) besides re-arming the lease.
 */
static void test_acquire__under_the_cluster_rule_an_adopted_grant_bumps_gen(void **state)
{
    (void)state;
    setenv("ROWLOCK_LEASE_RULE", "cluster", 1);
    rowlock_client *c = C();
    rowlock_lock *l = tu_lock(c, "adopt-cl", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c); /* the row exists: the next claim is cl-claim */
    assert_rc(rowlock_release(l), 0, c);
    arm(c, "cl-claim", 1, ROWLOCK__FAULT_DROP_AFTER, 0);
    assert_rc(rowlock_acquire(l, 0, 1500), ROWLOCK_EDB, c);
    assert_int_equal(rowlock__fault_fired(c, "cl-claim"), 1);
    long long gen = row_gen("adopt-cl");
    assert_true(gen >= 0 && row_held("adopt-cl"));
    tu_sleep_ms(1000);
    assert_rc(rowlock_acquire(l, 0, 60000), 0, c);
    assert_true(row_gen("adopt-cl") > gen);
    assert_true(row_expires_in_ms("adopt-cl") > 50000);
    assert_int_equal(row_count("adopt-cl"), 1);
    assert_rc(rowlock_release(l), 0, c);
    assert_false(row_held("adopt-cl"));
}

/*
 * A shared holder's name under the cluster rule: its row (owner '', a lease
 * of 0 in lease_us) must never be taken over by an exclusive claim that saw
 * it unchanged for "its lease": the exclusive acquire goes through the
 * holders table and waits for the shared holder; a shared acquire there
 * joins it.
 */
static void test_acquire__under_the_cluster_rule_a_shared_name_is_never_taken_over(void **state)
{
    (void)state;
    /* b judges leases by the cluster rule (fixed at its first statement),
     * a by the server's: a can make the name a multi-holder name. */
    setenv("ROWLOCK_LEASE_RULE", "cluster", 1);
    rowlock_client *b = C();
    rowlock_lock *x = tu_lock(b, "cl-multi", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(x, 0, 1000), 0, b); /* x has seen the name's row (its waits */
    assert_rc(rowlock_release(x), 0, b);          /* skip the explaining read); lease_us 1 s */
    unsetenv("ROWLOCK_LEASE_RULE");
    rowlock_client *a = C();
    rowlock_lock_options o = ROWLOCK_LOCK_OPTIONS_INIT;
    rowlock_lock *ra = NULL;
    o.strategy = ROWLOCK_STRATEGY_INSERT;
    o.mode = ROWLOCK_MODE_SHARED;
    assert_rc(rowlock_lock_new(&ra, a, "cl-multi", &o), 0, a);
    tu_register_lock(ra);
    assert_rc(rowlock_acquire(ra, 0, 60000), 0, a);
    /* The row now shows owner '' and keeps x's lease_us (1 s): a cluster
     * taker that watched it unchanged that long would claim it while a
     * holds it. */
    assert_rc(rowlock_acquire(x, 2500, 0), ROWLOCK_EBUSY, b);
    assert_int_equal(rowlock_lock_held(x), 0);
    tu_assert_msg_has(b, "(shared, token", __FILE__, __LINE__);
    rowlock_lock *rb = NULL;
    assert_rc(rowlock_lock_new(&rb, b, "cl-multi", &o), 0, b);
    tu_register_lock(rb);
    assert_rc(rowlock_acquire(rb, 0, 0), 0, b);
    assert_rc(rowlock_release(rb), 0, b);
    assert_rc(rowlock_release(ra), 0, a);
}

/*
 * A Galera node can end an attempt's transaction with a brute-force abort
 * and never report it (seen on MariaDB 10.11; holders.c, "On a Galera
 * cluster"): every later statement then runs autocommitted. The seam's
 * ROLLBACK fault does that to one statement on one server, under the
 * cluster rule (the path a real cluster takes).
 *
 * Before the entry's write: a's transaction ends silently and a stalls 1 s,
 * during which b takes the only permit. a's write must change nothing and
 * its attempt start over (it then finds b); autocommitted it would make a
 * second holder of a 1-permit semaphore.
 */
static rowlock_lock *sem_handle(rowlock_client *c, const char *name, unsigned permits)
{
    return tu_lock_mode(c, name, ROWLOCK_STRATEGY_INSERT, ROWLOCK_MODE_SHARED, permits);
}

typedef struct silent_arg {
    rowlock_lock *l;
    int64_t wait_ms;
    int rc;
} silent_arg;

static void *silent_acquire(void *arg)
{
    silent_arg *a = arg;
    a->rc = rowlock_acquire(a->l, a->wait_ms, 60000);
    return NULL;
}

/* Entries of `name` with granted = 1 (holders) or 0 (waiters); -1 on error. */
static long long entries_of(const char *name, int granted)
{
    int ok = 0;
    long long n = tu_sql_int(NULL, &ok, "SELECT COUNT(*) FROM `" TABLE "_hold` WHERE name = '%s' AND granted = %d",
                             name, granted);
    return ok ? n : -1;
}

static long long entries_granted(const char *name)
{
    return entries_of(name, 1);
}

/* The exclusive handle of w on `name`, holding it as an entry of the
 * holders table: the name is used shared first. */
static rowlock_lock *writer_of_shared_name(rowlock_client *w, const char *name)
{
    rowlock_lock *ls = sem_handle(w, name, 0), *lw = tu_lock(w, name, ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(ls, 0, 60000), 0, w);
    assert_rc(rowlock_release(ls), 0, w);
    assert_rc(rowlock_acquire(lw, 0, 60000), 0, w);
    return lw;
}

/* Wait (10 s at most) until `name` has n entries with granted = `granted`. */
static void wait_entries(const char *name, int granted, long long n)
{
    const int64_t by = tu_now_us() + 10000000;
    while (entries_of(name, granted) < n && tu_now_us() < by)
        rowlock__sleep_us(2000);
}

static void test_acquire__under_the_cluster_rule_a_silently_ended_transaction_writes_nothing(void **state)
{
    (void)state;
    setenv("ROWLOCK_LEASE_RULE", "cluster", 1);
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = sem_handle(a, "cl-silent", 1), *lb = sem_handle(b, "cl-silent", 1);
    /* The name's row exists and both handles know it (no first use here). */
    assert_rc(rowlock_acquire(lb, 0, 60000), 0, b);
    assert_rc(rowlock_release(lb), 0, b);
    arm(a, "hold-write-cl", 1, ROWLOCK__FAULT_ROLLBACK, 1000);
    silent_arg sa = { la, 1500, -1 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, silent_acquire, &sa), 0);
    while (rowlock__fault_fired(a, "hold-write-cl") == 0)
        rowlock__sleep_us(1000); /* a decided to take the permit; its write comes after its stall */
    assert_rc(rowlock_acquire(lb, 2000, 60000), 0, b); /* the name's row is not locked any more */
    assert_int_equal(pthread_join(t, NULL), 0);
    /* a started over, found b's grant and waited it out: busy. */
    assert_int_equal(sa.rc, ROWLOCK_EBUSY);
    assert_int_equal(rowlock_lock_held(la), 0);
    assert_int_equal(entries_granted("cl-silent"), 1);
    assert_rc(rowlock_release(lb), 0, b);
    assert_rc(rowlock_acquire(la, 0, 60000), 0, a);
    assert_rc(rowlock_release(la), 0, a);
}

/* The same before the commit: the commit answers OK for a transaction that
 * is gone. The grant is read back, found missing, and tried again: the
 * acquire returns holding a grant that is really there. */
static void test_acquire__under_the_cluster_rule_a_commit_of_nothing_is_not_a_grant(void **state)
{
    (void)state;
    setenv("ROWLOCK_LEASE_RULE", "cluster", 1);
    rowlock_client *a = C();
    rowlock_lock *la = sem_handle(a, "cl-silent-commit", 2);
    arm(a, "hold-commit", 1, ROWLOCK__FAULT_ROLLBACK, 0);
    assert_rc(rowlock_acquire(la, 2000, 60000), 0, a);
    assert_int_equal(rowlock__fault_fired(a, "hold-commit"), 1);
    assert_int_equal(entries_granted("cl-silent-commit"), 1);
    /* A re-entry whose count went with its transaction: the entry is
     * there, but not as the re-entry wrote it. */
    arm(a, "hold-commit", 1, ROWLOCK__FAULT_ROLLBACK, 0);
    assert_rc(rowlock_acquire(la, 2000, 60000), 0, a);
    assert_int_equal(rowlock__fault_fired(a, "hold-commit"), 2);
    int ok = 0;
    assert_int_equal(tu_sql_int(NULL, &ok, "SELECT count FROM `" TABLE "_hold` WHERE name = 'cl-silent-commit'"), 2);
    assert_rc(rowlock_release(la), 0, a);
    assert_int_equal(entries_granted("cl-silent-commit"), 1);
    assert_rc(rowlock_release(la), 0, a);
    assert_int_equal(entries_granted("cl-silent-commit"), 0);
}

/* The same loss inside a waiting acquire: it reconnects and adopts the grant
 * within its own wait. */
static void test_acquire__a_waiting_acquire_adopts_a_grant_whose_reply_was_lost(void **state)
{
    (void)state;
    rowlock_client *c = C(), *other = C();
    rowlock_lock *l = tu_lock(c, "acq-drop-wait", ROWLOCK_STRATEGY_OPTIMISTIC);
    rowlock_lock *lo = tu_lock(other, "acq-drop-wait", ROWLOCK_STRATEGY_OPTIMISTIC);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c); /* the row exists: the next claim is a CAS */
    assert_rc(rowlock_release(l), 0, c);
    arm(c, "claim-cas", 1, ROWLOCK__FAULT_DROP_AFTER, 0);
    assert_rc(rowlock_acquire(l, 5000, 60000), 0, c);
    assert_int_equal(rowlock__fault_fired(c, "claim-cas"), 1);
    assert_int_equal(row_count("acq-drop-wait"), 1);
    assert_rc(rowlock_release(l), 0, c);
    assert_false(row_held("acq-drop-wait"));
    assert_rc(rowlock_acquire(lo, 0, 0), 0, other);
    assert_rc(rowlock_release(lo), 0, other);
}

/*
 * A queue of waiters is woken as a tree (holders.c, "Waiting without
 * polling"): at each grant the waiters that watched the granted one wake,
 * and an exclusive one is still blocked (by the one just granted). It looks
 * at the entries (hold-look, one statement) and waits again; only a waiter
 * the entries would now grant makes an attempt (hold-draw: the names row's
 * lock, 5 round trips). So each of 8 exclusive waiters of a name used
 * shared (its holders are entries) makes 2 attempts: its queue entry and
 * its grant (a wait that finds its lock already free tries at once, hence
 * the slack; every waiter attempting again at each wake-up made 26). The
 * seam counts the statements (a stall of 0 ms). Mutual exclusion is checked
 * as well (a counter only one holder may hold).
 */
#define TREE_WAITERS 8
typedef struct tree_arg {
    rowlock_client *c;
    rowlock_lock *l;
    int *inside, *most;
    int rc;
    int64_t hold_us; /* 0: 20 ms */
    int64_t lease_ms; /* 0: 60 s */
    int *go;          /* non-NULL: hold until *go (at most 20 s), not hold_us */
    uint64_t token;
} tree_arg;

static void *tree_waiter(void *arg)
{
    tree_arg *a = arg;
    a->rc = rowlock_acquire(a->l, 20000, a->lease_ms ? a->lease_ms : 60000);
    if (a->rc == 0) {
        a->token = rowlock_lock_token(a->l);
        int now = __atomic_add_fetch(a->inside, 1, __ATOMIC_SEQ_CST);
        int was = __atomic_load_n(a->most, __ATOMIC_SEQ_CST);
        while (now > was && !__atomic_compare_exchange_n(a->most, &was, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
        if (a->go) {
            const int64_t until = tu_now_us() + 20000000;
            while (!__atomic_load_n(a->go, __ATOMIC_SEQ_CST) && tu_now_us() < until)
                rowlock__sleep_us(2000);
        } else {
            rowlock__sleep_us(a->hold_us ? a->hold_us : 20000);
        }
        __atomic_sub_fetch(a->inside, 1, __ATOMIC_SEQ_CST);
        a->rc = rowlock_release(a->l);
    }
    return NULL;
}

static void test_acquire__a_woken_waiter_still_blocked_looks_without_an_attempt(void **state)
{
    (void)state;
    rowlock_client *h = C();
    rowlock_lock *lh = sem_handle(h, "x-tree", 0); /* shared: the name's holders become entries */
    assert_rc(rowlock_acquire(lh, 0, 60000), 0, h);
    tree_arg a[TREE_WAITERS];
    pthread_t t[TREE_WAITERS];
    int inside = 0, most = 0;
    for (int i = 0; i < TREE_WAITERS; i++) {
        a[i] = (tree_arg){ .c = C(), .inside = &inside, .most = &most, .rc = -1 };
        a[i].l = tu_lock(a[i].c, "x-tree", ROWLOCK_STRATEGY_INSERT); /* exclusive */
        arm(a[i].c, "hold-draw", 0, ROWLOCK__FAULT_STALL, 0);
        arm(a[i].c, "hold-look", 0, ROWLOCK__FAULT_STALL, 0);
        assert_int_equal(pthread_create(&t[i], NULL, tree_waiter, &a[i]), 0);
        wait_entries("x-tree", 0, i + 1); /* queued in this order */
    }
    assert_rc(rowlock_release(lh), 0, h);
    unsigned draws = 0, looks = 0;
    for (int i = 0; i < TREE_WAITERS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(a[i].rc, 0);
        draws += rowlock__fault_fired(a[i].c, "hold-draw");
        looks += rowlock__fault_fired(a[i].c, "hold-look");
    }
    print_message("  %d waiters: %u attempts, %u looks\n", TREE_WAITERS, draws, looks);
    assert_int_equal(most, 1);
    assert_true(draws <= 2 * TREE_WAITERS + 4); /* without the looks: 26 */
    assert_true(looks > 0);
}

/*
 * Readers queued behind a writer are granted together (one server): the
 * first of them to make its attempt after the writer's release opens the
 * name and grants every live reader waiting (hold-grant-readers, in its
 * attempt's transaction); the others wait on one another (a tree, as
 * exclusive waiters do) and each learns of its grant in one statement
 * (hold-granted) instead of an attempt of its own on the names row. So 6
 * readers make 7 attempts (6 to queue, 1 grant), not 12, and hold
 * together, with one token, greater than the writer's. Planted: no
 * grant of the waiting readers: 12 attempts (fails).
 */
#define BATCH_READERS 6
static void test_acquire__readers_queued_behind_a_writer_are_granted_together(void **state)
{
    (void)state;
    rowlock_client *w = C();
    rowlock_lock *lw = writer_of_shared_name(w, "x-batch");
    const uint64_t t_writer = rowlock_lock_token(lw);
    tree_arg a[BATCH_READERS];
    pthread_t t[BATCH_READERS];
    int inside = 0, most = 0, go = 0;
    for (int i = 0; i < BATCH_READERS; i++) {
        a[i] = (tree_arg){ .c = C(), .inside = &inside, .most = &most, .rc = -1 };
        a[i].l = sem_handle(a[i].c, "x-batch", 0);
        a[i].go = &go; /* they hold until the leases are measured */
        a[i].lease_ms = i ? 3000 : 0; /* the first (the opener) 60 s, the others 3 s */
        arm(a[i].c, "hold-draw", 0, ROWLOCK__FAULT_STALL, 0);
        arm(a[i].c, "hold-granted", 0, ROWLOCK__FAULT_STALL, 0);
        arm(a[i].c, "hold-grant-readers", 0, ROWLOCK__FAULT_STALL, 0);
        assert_int_equal(pthread_create(&t[i], NULL, tree_waiter, &a[i]), 0);
        wait_entries("x-batch", 0, i + 1); /* queued in this order */
    }
    assert_rc(rowlock_release(lw), 0, w);
    /* Once a reader has seen its grant, its lease is its own from then
     * (3 s), not the opener's grant's (5 s at most: the opener's 60 s
     * capped). Measured within 2 s, inside those 3 s leases (nobody renews
     * them); a reader that took the attempt instead (slow machine) is
     * allowed for. */
    const int64_t seen_by = tu_now_us() + 2000000;
    int ok = 0;
    while ((__atomic_load_n(&inside, __ATOMIC_SEQ_CST) < BATCH_READERS ||
            tu_sql_int(NULL, &ok, "SELECT COUNT(*) FROM `" TABLE "_hold` WHERE name = 'x-batch' AND granted = 1 AND lease_us = 3000000") <
                BATCH_READERS - 1) &&
           tu_now_us() < seen_by)
        rowlock__sleep_us(2000);
    const long long seen = tu_sql_int(NULL, &ok, "SELECT COUNT(*) FROM `" TABLE
                                      "_hold` WHERE name = 'x-batch' AND granted = 1 AND lease_us = 3000000");
    const long long longest = tu_sql_int(NULL, &ok, "SELECT IFNULL(MAX(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)), -1) FROM `" TABLE
                                         "_hold` WHERE name = 'x-batch' AND granted = 1 AND lease_us = 3000000");
    __atomic_store_n(&go, 1, __ATOMIC_SEQ_CST);
    unsigned draws = 0, checks = 0, batches = 0;
    uint64_t token = 0;
    int same = 1;
    for (int i = 0; i < BATCH_READERS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(a[i].rc, 0);
        draws += rowlock__fault_fired(a[i].c, "hold-draw");
        checks += rowlock__fault_fired(a[i].c, "hold-granted");
        batches += rowlock__fault_fired(a[i].c, "hold-grant-readers");
        if (i == 0)
            token = a[i].token;
        same = same && a[i].token == token;
    }
    print_message("  %d readers: %u attempts, %u grant checks, %u grants of the waiting readers, %d at once\n",
                  BATCH_READERS, draws, checks, batches, most);
    assert_true(ok);
    assert_true(seen >= 1);
    assert_true(longest > 0 && longest <= 3000000);
    assert_int_equal(batches, 1);
    assert_true(draws <= BATCH_READERS + 2); /* without the batch: 2 each */
    assert_int_equal(most, BATCH_READERS);
    assert_true(same);
    assert_true(token > t_writer);
    assert_int_equal(entries_of("x-batch", 1), 0);
    assert_int_equal(entries_of("x-batch", 0), 0);

    /* Only readers ahead of every writer: with a writer queued between
     * them, the first reader's grant opens nothing and grants nobody else;
     * the reader behind the writer waits for it (FIFO). Planted grant of
     * the waiting readers past a queued writer: the second reader is
     * granted with the first (fails). */
    assert_rc(rowlock_acquire(lw, 0, 60000), 0, w);
    tree_arg q[3];
    pthread_t tq[3];
    inside = most = 0;
    for (int i = 0; i < 3; i++) {
        q[i] = (tree_arg){ .c = C(), .inside = &inside, .most = &most, .rc = -1, .hold_us = 600000 };
        q[i].l = i == 1 ? tu_lock(q[i].c, "x-batch", ROWLOCK_STRATEGY_INSERT) : sem_handle(q[i].c, "x-batch", 0);
        assert_int_equal(pthread_create(&tq[i], NULL, tree_waiter, &q[i]), 0);
        wait_entries("x-batch", 0, i + 1); /* reader, writer, reader: queued in this order */
    }
    assert_rc(rowlock_release(lw), 0, w);
    const int64_t by = tu_now_us() + 10000000;
    while (entries_of("x-batch", 1) < 1 && tu_now_us() < by)
        rowlock__sleep_us(2000);
    rowlock__sleep_us(200000);
    const long long holding = entries_of("x-batch", 1), waiting = entries_of("x-batch", 0);
    for (int i = 0; i < 3; i++) /* (no assertion may leave a thread running) */
        assert_int_equal(pthread_join(tq[i], NULL), 0);
    assert_int_equal(holding, 1); /* the first reader only */
    assert_int_equal(waiting, 2);
    for (int i = 0; i < 3; i++)
        assert_int_equal(q[i].rc, 0);
    assert_int_equal(most, 1);
    assert_true(q[0].token < q[1].token && q[1].token < q[2].token);
}

/*
 * A reader granted by the first reader's attempt just as it gives up (its
 * wait's deadline passed; the seam stalls its hold-forget 3 s, and the
 * writer leaves meanwhile) leaves no grant behind: its give-up deletes it,
 * and a writer gets the name as soon as the first reader releases. Planted
 * give-up that deletes only waiter entries: the grant stays (fails).
 */
static void test_acquire__a_reader_granted_as_it_gives_up_leaves_no_grant(void **state)
{
    (void)state;
    rowlock_client *w = C(), *r1 = C(), *r2 = C();
    rowlock_lock *lw = writer_of_shared_name(w, "x-giveup");
    rowlock_lock *l1 = sem_handle(r1, "x-giveup", 0), *l2 = sem_handle(r2, "x-giveup", 0);
    silent_arg a1 = { l1, 20000, -99 }, a2 = { l2, 1000, -99 };
    pthread_t t1, t2;
    assert_int_equal(pthread_create(&t1, NULL, silent_acquire, &a1), 0);
    wait_entries("x-giveup", 0, 1);
    arm(r2, "hold-forget", 0, ROWLOCK__FAULT_STALL, 3000);
    arm(r1, "hold-grant-readers", 0, ROWLOCK__FAULT_STALL, 0);
    const int64_t t0 = tu_now_us();
    assert_int_equal(pthread_create(&t2, NULL, silent_acquire, &a2), 0);
    rowlock__sleep_us(2000000 - (tu_now_us() - t0)); /* r2 gave up at 1 s; its forget runs at 4 s */
    assert_rc(rowlock_release(lw), 0, w);
    assert_int_equal(pthread_join(t1, NULL), 0);
    assert_int_equal(pthread_join(t2, NULL), 0);
    assert_rc(a1.rc, 0, r1);
    assert_int_equal(a2.rc, ROWLOCK_EBUSY);
    assert_int_equal(rowlock__fault_fired(r1, "hold-grant-readers"), 1); /* r2 was granted as it gave up */
    int ok = 0;
    const long long left = tu_sql_int(NULL, &ok, "SELECT COUNT(*) FROM `" TABLE "_hold` WHERE name = 'x-giveup' AND owner = '%s'",
                                      rowlock_client_owner(r2));
    assert_true(ok);
    assert_rc(rowlock_release(l1), 0, r1);
    const int64_t before = tu_now_us();
    assert_rc(rowlock_acquire(lw, 0, 60000), 0, w);
    assert_true(tu_now_us() - before < 1000000);
    assert_rc(rowlock_release(lw), 0, w);
    assert_int_equal(left, 0);
}

/*
 * A grant made for a waiting reader that it has not seen yet ends with its
 * lease (the opener's, 300 ms here): a writer that queued after it is
 * granted then, and the reader, seeing its grant only later (the seam
 * stalls its hold-granted 2.5 s), must not take it over: it waits for the
 * writer and gets a greater token. Planted hold-granted without its
 * lease check: the reader holds with the writer, with a smaller token
 * (fails).
 */
static void test_acquire__a_grant_a_reader_saw_too_late_is_not_taken_over(void **state)
{
    (void)state;
    rowlock_client *w = C();
    rowlock_lock *lw = writer_of_shared_name(w, "x-lapse");
    int inside = 0, most = 0;
    tree_arg r1 = { .c = C(), .inside = &inside, .most = &most, .rc = -1, .hold_us = 1, .lease_ms = 300 };
    tree_arg r2 = { .c = C(), .inside = &inside, .most = &most, .rc = -1, .hold_us = 20000 };
    tree_arg w2 = { .c = C(), .inside = &inside, .most = &most, .rc = -1, .hold_us = 3000000 };
    r1.l = sem_handle(r1.c, "x-lapse", 0);
    r2.l = sem_handle(r2.c, "x-lapse", 0);
    w2.l = tu_lock(w2.c, "x-lapse", ROWLOCK_STRATEGY_INSERT);
    arm(r2.c, "hold-granted", 0, ROWLOCK__FAULT_STALL, 2500);
    pthread_t t1, t2, tw;
    assert_int_equal(pthread_create(&t1, NULL, tree_waiter, &r1), 0);
    wait_entries("x-lapse", 0, 1);
    assert_int_equal(pthread_create(&t2, NULL, tree_waiter, &r2), 0);
    wait_entries("x-lapse", 0, 2);
    assert_rc(rowlock_release(lw), 0, w);
    const int64_t by = tu_now_us() + 10000000;
    while (r1.token == 0 && tu_now_us() < by) /* (written before r1 releases) */
        rowlock__sleep_us(1000);
    assert_int_equal(pthread_create(&tw, NULL, tree_waiter, &w2), 0);
    assert_int_equal(pthread_join(t1, NULL), 0);
    assert_int_equal(pthread_join(tw, NULL), 0);
    assert_int_equal(pthread_join(t2, NULL), 0);
    assert_int_equal(r1.rc, 0);
    assert_int_equal(w2.rc, 0);
    assert_int_equal(r2.rc, 0);
    assert_int_equal(most, 1);
    assert_true(r2.token > w2.token && w2.token > r1.token);
}

/*
 * An interrupted reader waiting behind another reader leaves nothing a
 * later grant could name: its session is ended and its entry deleted
 * (the give-back after a cut), so when the writer leaves, the first
 * reader's attempt grants nobody else, and a writer gets the name as soon
 * as that reader releases. Planted give-back that skips multi-holder
 * handles: the interrupted session, still in its wait, is granted for up
 * to 5 s, and the writer's try fails.
 */
static void test_acquire__an_interrupted_reader_is_granted_nothing(void **state)
{
    (void)state;
    rowlock_client *w = C();
    rowlock_lock *lw = writer_of_shared_name(w, "x-cut");
    int inside = 0, most = 0;
    tree_arg r1 = { .c = C(), .inside = &inside, .most = &most, .rc = -1, .hold_us = 300000 };
    r1.l = sem_handle(r1.c, "x-cut", 0);
    rowlock_client *r2 = C();
    rowlock_lock *l2 = sem_handle(r2, "x-cut", 0);
    silent_arg a2 = { l2, 20000, -99 };
    pthread_t t1, t2;
    assert_int_equal(pthread_create(&t1, NULL, tree_waiter, &r1), 0);
    wait_entries("x-cut", 0, 1);
    assert_int_equal(pthread_create(&t2, NULL, silent_acquire, &a2), 0);
    wait_entries("x-cut", 0, 2);
    rowlock__sleep_us(200000); /* r2 in its wait on r1 */
    rowlock_client_interrupt(r2);
    assert_int_equal(pthread_join(t2, NULL), 0);
    assert_int_equal(a2.rc, ROWLOCK_EBUSY);
    assert_rc(rowlock_release(lw), 0, w);
    assert_int_equal(pthread_join(t1, NULL), 0);
    assert_int_equal(r1.rc, 0);
    const int try_rc = rowlock_acquire(lw, 0, 60000); /* r1 released: free at once */
    int ok = 0;
    const long long left = tu_sql_int(NULL, &ok, "SELECT COUNT(*) FROM `" TABLE "_hold` WHERE name = 'x-cut' AND owner = '%s'",
                                      rowlock_client_owner(r2));
    if (try_rc == 0)
        assert_rc(rowlock_release(lw), 0, w);
    assert_rc(try_rc, 0, w);
    assert_true(ok);
    assert_int_equal(left, 0);
}

/*
 * A join whose reply an interrupt cut (one server): the join still ran in
 * the server after the cut and granted an entry that no handle holds; the
 * give-back after the cut deletes it, as it deletes a waiter's entry.
 * Here the join waits for the names row (a transaction holds it FOR
 * UPDATE), the interrupt cuts it, and the blocker commits while the
 * give-back is stalled before it looks for the cut session: the join
 * commits in between. Planted (the rule before): a give-back only for an
 * acquire that wrote a waiter entry: the grant stays for the reader's
 * lease (60 s) and a writer's try-once is busy (fails).
 */
static void test_acquire__a_join_whose_reply_an_interrupt_cut_leaves_no_grant(void **state)
{
    (void)state;
    rowlock_client *r0 = C();
    rowlock_lock *l0 = sem_handle(r0, "x-joincut", 0);
    assert_rc(rowlock_acquire(l0, 5000, 60000), 0, r0); /* opens the name to readers */
    void *m = tu_mysql_connect(NULL, 0);
    assert_non_null(m);
    assert_int_equal(tu_mysql_query(m, "START TRANSACTION"), 0);
    assert_int_equal(tu_mysql_query(m, "SELECT token FROM `" TABLE "` WHERE name = 'x-joincut' FOR UPDATE"), 0);
    rowlock_client *r2 = C();
    rowlock_lock *l2 = sem_handle(r2, "x-joincut", 0);
    arm(r2, "cut-find", 0, ROWLOCK__FAULT_STALL, 1500);
    const unsigned long r2_session = rowlock__db_thread_id(r2); /* connected by C() */
    assert_true(r2_session != 0);
    silent_arg a2 = { l2, 20000, -99 };
    pthread_t t2;
    assert_int_equal(pthread_create(&t2, NULL, silent_acquire, &a2), 0);
    long long in_join = 0;
    for (int i = 0; i < 500 && in_join != 1; i++) {
        int ok = 0;
        in_join = tu_sql_int(NULL, &ok,
                             "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %lu"
                             " AND INFO LIKE '/* rowlock:hold-join */%%'",
                             r2_session);
        if (in_join != 1)
            rowlock__sleep_us(2000);
    }
    rowlock_client_interrupt(r2);
    rowlock__sleep_us(100000); /* the cut: r2's give-back is stalled 1.5 s */
    const unsigned commit_err = tu_mysql_query(m, "COMMIT"); /* the join runs on, and commits */
    assert_int_equal(pthread_join(t2, NULL), 0);
    tu_mysql_close(m);
    assert_int_equal(in_join, 1);
    assert_int_equal(commit_err, 0);
    assert_int_equal(a2.rc, ROWLOCK_EBUSY);
    int ok = 0;
    const long long left = tu_sql_int(NULL, &ok, "SELECT COUNT(*) FROM `" TABLE "_hold` WHERE name = 'x-joincut' AND owner = '%s'",
                                      rowlock_client_owner(r2));
    assert_rc(rowlock_release(l0), 0, r0);
    rowlock_client *w = C();
    rowlock_lock *lw = tu_lock(w, "x-joincut", ROWLOCK_STRATEGY_INSERT);
    const int try_rc = rowlock_acquire(lw, 0, 60000);
    if (try_rc == 0)
        assert_rc(rowlock_release(lw), 0, w);
    assert_true(ok);
    print_message("  entries of the interrupted joiner left: %lld\n", left);
    assert_int_equal(left, 0);
    assert_rc(try_rc, 0, w);
}

/*
 * A semaphore attempt whose commit an interrupt cut after the server ran it
 * (one server): the grant committed, and no handle holds it. The give-back
 * after the cut deletes it (hold_wrote covers every multi-holder acquire,
 * not only one that queued), so the name's 2 permits are free again at
 * once. The seam cuts, as an interrupt during the COMMIT would, once the
 * server has answered it. Planted give-back that skips multi-holder
 * handles: the entry stays for its 60 s lease and a second try-once is
 * busy (fails).
 */
static void test_acquire__an_attempt_whose_commit_an_interrupt_cut_leaves_no_grant(void **state)
{
    (void)state;
    rowlock_client *r = C();
    rowlock_lock *l = sem_handle(r, "x-commitcut", 2);
    arm(r, "hold-commit", 1, ROWLOCK__FAULT_INTERRUPT_AFTER, 0);
    const int rc = rowlock_acquire(l, 5000, 60000);
    int ok = 0;
    const long long left = tu_sql_int(NULL, &ok, "SELECT COUNT(*) FROM `" TABLE "_hold` WHERE name = 'x-commitcut' AND owner = '%s'",
                                      rowlock_client_owner(r));
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = sem_handle(a, "x-commitcut", 2), *lb = sem_handle(b, "x-commitcut", 2);
    const int rca = rowlock_acquire(la, 0, 60000), rcb = rowlock_acquire(lb, 0, 60000);
    if (rca == 0)
        assert_rc(rowlock_release(la), 0, a);
    if (rcb == 0)
        assert_rc(rowlock_release(lb), 0, b);
    assert_int_equal(rowlock__fault_fired(r, "hold-commit"), 1);
    assert_int_equal(rc, ROWLOCK_EBUSY);
    assert_true(ok);
    print_message("  entries of the cut acquirer left: %lld\n", left);
    assert_int_equal(left, 0);
    assert_rc(rca, 0, a);
    assert_rc(rcb, 0, b);
}

/*
 * The join's token comes back as the statement's insert id
 * (LAST_INSERT_ID(t.token)). A server whose insert id does not reach the
 * client (none seen: the MySQL 8 seam) leaves it 0; the join then reads its
 * entry's token (hold-joined). Injected insert id 0: the reader still holds
 * with the opener's token. Planted fallback that keeps 0: token 0 (fails).
 */
static void test_acquire__a_join_whose_insert_id_is_lost_reads_its_token(void **state)
{
    (void)state;
    rowlock_client *r0 = C();
    rowlock_lock *l0 = sem_handle(r0, "x-joinid", 0);
    assert_rc(rowlock_acquire(l0, 5000, 60000), 0, r0); /* opens the name */
    rowlock_client *r1 = C();
    rowlock_lock *l1 = sem_handle(r1, "x-joinid", 0);
    arm(r1, "hold-join", 0, ROWLOCK__FAULT_NO_INSERT_ID, 0);
    arm(r1, "hold-joined", 0, ROWLOCK__FAULT_STALL, 0); /* counts */
    arm(r1, "hold-draw", 0, ROWLOCK__FAULT_STALL, 0);
    assert_rc(rowlock_acquire(l1, 5000, 60000), 0, r1);
    assert_int_equal(rowlock__fault_fired(r1, "hold-join"), 1);
    assert_int_equal(rowlock__fault_fired(r1, "hold-joined"), 1);
    assert_int_equal(rowlock__fault_fired(r1, "hold-draw"), 0); /* joined: no attempt */
    assert_true(rowlock_lock_token(l0) > 0);
    assert_true(rowlock_lock_token(l1) == rowlock_lock_token(l0));
    assert_rc(rowlock_release(l1), 0, r1);
    assert_rc(rowlock_release(l0), 0, r0);
}

/*
 * A reader's attempt grants the readers waiting with it only when its DRAW
 * opened the name (shared_token = the token drawn): the SQL fence form
 * (sql/0009) takes a token above shared_token for one holder's. Under READ
 * COMMITTED the DRAW's look for an exclusive entry is a plain read: here it
 * sees the writer's entry (no opening), the writer releases while the
 * attempt is stalled before ENTRIES, and ENTRIES finds no writer. The reader
 * is granted; the waiting reader (its own attempt held off) is not granted
 * with it. Checked once the first reader is granted: no token above
 * shared_token has two granted entries. Planted without the shared_token
 * check: the waiting reader was granted the first one's token, above
 * shared_token (fails).
 */
static void test_acquire__readers_are_granted_together_only_at_a_token_the_name_was_opened_at(void **state)
{
    (void)state;
    rowlock_client *w = C();
    rowlock_lock *lw = writer_of_shared_name(w, "x-rc");
    rowlock_client *rc_c = C(), *ra = C();
    silent_arg wc = { sem_handle(rc_c, "x-rc", 0), 10000, -99 };
    pthread_t tc, ta;
    assert_int_equal(pthread_create(&tc, NULL, silent_acquire, &wc), 0);
    wait_entries("x-rc", 0, 1); /* the waiting reader, behind the writer */
    /* Woken by the writer's release, the waiting reader's own attempt
     * would open the name at a later token (above the batch's): held off
     * until the entries were checked. */
    arm(rc_c, "hold-draw", 1, ROWLOCK__FAULT_STALL, 2500);
    assert_rc(rowlock__db_simple(ra, "test", "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"), 0, ra);
    arm(ra, "hold-entries", 1, ROWLOCK__FAULT_STALL, 700);
    silent_arg wa = { sem_handle(ra, "x-rc", 0), 10000, -99 };
    assert_int_equal(pthread_create(&ta, NULL, silent_acquire, &wa), 0);
    rowlock__sleep_us(300000); /* its DRAW saw the writer; it is stalled before ENTRIES */
    const int wrc = rowlock_release(lw);
    assert_int_equal(pthread_join(ta, NULL), 0);
    int ok = 0;
    const long long bad = tu_sql_int(NULL, &ok,
                                     "SELECT COUNT(*) FROM (SELECT h.token FROM `" TABLE "_hold` h JOIN `" TABLE
                                     "` t ON t.name = h.name WHERE h.name = 'x-rc' AND h.granted = 1"
                                     " AND h.token > t.shared_token GROUP BY h.token HAVING COUNT(*) > 1) z");
    assert_int_equal(pthread_join(tc, NULL), 0);
    print_message("  tokens %llu and %llu; tokens above shared_token held twice: %lld\n",
                  (unsigned long long)rowlock_lock_token(wa.l), (unsigned long long)rowlock_lock_token(wc.l), bad);
    if (wa.rc == 0)
        assert_rc(rowlock_release(wa.l), 0, ra);
    if (wc.rc == 0)
        assert_rc(rowlock_release(wc.l), 0, rc_c);
    assert_int_equal(wrc, 0);
    assert_int_equal(wa.rc, 0);
    assert_int_equal(wc.rc, 0);
    assert_true(ok);
    assert_int_equal(bad, 0);
}

/* Wait (5 s at most) until MariaDB session `id` runs a statement whose text
 * starts with `prefix`; returns 1 if it did. */
static int wait_running(unsigned long id, const char *prefix)
{
    for (int i = 0; i < 2500; i++) {
        int ok = 0;
        const long long n = tu_sql_int(NULL, &ok,
                                       "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %lu"
                                       " AND INFO LIKE '%s%%'",
                                       id, prefix);
        if (ok && n == 1)
            return 1;
        rowlock__sleep_us(2000);
    }
    return 0;
}

/*
 * Under READ COMMITTED a reader's DRAW decides whether it opens the name
 * (no exclusive entry) by a plain read, its subquery. That read must see
 * every writer's entry committed before the DRAW got the names row's lock:
 * InnoDB makes a READ COMMITTED read view at a statement's first
 * consistent read, and the subquery, correlated with the names row, runs
 * only once that row is locked. Here a transaction holds the names row;
 * a writer's DRAW and then the reader's (its join skipped) wait behind it;
 * it commits, the writer is granted, and only then the reader's DRAW runs.
 * The name must not be open (shared_token below token) and a third
 * reader's try must be busy. Planted: the opening decided by a plain read
 * before the DRAW (check-then-act): the name opens under the writer and
 * the third reader joins it (fails).
 */
static void test_acquire__a_reader_whose_draw_waited_for_a_writer_does_not_open_the_name(void **state)
{
    (void)state;
    rowlock_client *r0 = C();
    rowlock_lock *l0 = sem_handle(r0, "x-rcdraw", 0);
    assert_rc(rowlock_acquire(l0, 0, 60000), 0, r0); /* a multi-holder row, opened */
    assert_rc(rowlock_release(l0), 0, r0);
    void *m = tu_mysql_connect(NULL, 0);
    assert_non_null(m);
    assert_int_equal(tu_mysql_query(m, "START TRANSACTION"), 0);
    assert_int_equal(tu_mysql_query(m, "SELECT token FROM `" TABLE "` WHERE name = 'x-rcdraw' FOR UPDATE"), 0);
    rowlock_client *w = C(), *r = C();
    silent_arg aw = { tu_lock(w, "x-rcdraw", ROWLOCK_STRATEGY_INSERT), 5000, -99 };
    silent_arg ar = { sem_handle(r, "x-rcdraw", 0), 5000, -99 };
    const unsigned long w_session = rowlock__db_thread_id(w), r_session = rowlock__db_thread_id(r);
    assert_rc(rowlock__db_simple(r, "test", "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"), 0, r);
    arm_error(r, "hold-join", 1, 1205); /* straight to the attempt, whose DRAW waits */
    pthread_t tw, tr;
    assert_int_equal(pthread_create(&tw, NULL, silent_acquire, &aw), 0);
    const int w_waits = wait_running(w_session, "/* rowlock:hold-draw */");
    assert_int_equal(pthread_create(&tr, NULL, silent_acquire, &ar), 0);
    const int r_waits = wait_running(r_session, "/* rowlock:hold-draw */");
    assert_int_equal(tu_mysql_query(m, "COMMIT"), 0);
    tu_mysql_close(m);
    assert_int_equal(pthread_join(tw, NULL), 0); /* granted */
    wait_entries("x-rcdraw", 0, 1);              /* the reader, queued behind it */
    int ok = 0;
    const long long opened = tu_sql_int(NULL, &ok, "SELECT shared_token = token FROM `" TABLE "` WHERE name = 'x-rcdraw'");
    rowlock_client *r3 = C();
    rowlock_lock *l3 = sem_handle(r3, "x-rcdraw", 0);
    const int rc3 = rowlock_acquire(l3, 0, 60000);
    if (rc3 == 0)
        assert_rc(rowlock_release(l3), 0, r3);
    if (aw.rc == 0)
        assert_rc(rowlock_release(aw.l), 0, w);
    assert_int_equal(pthread_join(tr, NULL), 0);
    if (ar.rc == 0)
        assert_rc(rowlock_release(ar.l), 0, r);
    print_message("  opened under the writer: %lld; a third reader's try: %d\n", opened, rc3);
    assert_true(w_waits && r_waits);
    assert_int_equal(aw.rc, 0);
    assert_int_equal(ar.rc, 0);
    assert_true(ok);
    assert_int_equal(opened, 0);
    assert_int_equal(rc3, ROWLOCK_EBUSY);
}

/*
 * When the first reader behind a writer gives up, the readers waiting on
 * it wake, find no grant (hold-granted), look at the entries (hold-look)
 * and wait again, on the next first reader or the writer, without an
 * attempt; at the writer's release the new first reader's attempt grants
 * them. Readers 2-4 make 4 attempts in all (3 to queue, 1 grant).
 * Planted: no look for them: 7 (fails).
 */
static void test_acquire__readers_whose_first_reader_left_wait_again_without_attempts(void **state)
{
    (void)state;
    rowlock_client *w = C();
    rowlock_lock *lw = writer_of_shared_name(w, "x-left");
    rowlock_client *r1 = C();
    silent_arg a1 = { sem_handle(r1, "x-left", 0), 3000, -99 };
    pthread_t t1, t[3];
    assert_int_equal(pthread_create(&t1, NULL, silent_acquire, &a1), 0);
    wait_entries("x-left", 0, 1);
    int inside = 0, most = 0;
    tree_arg a[3];
    for (int i = 0; i < 3; i++) {
        a[i] = (tree_arg){ .c = C(), .inside = &inside, .most = &most, .rc = -1, .hold_us = 200000 };
        a[i].l = sem_handle(a[i].c, "x-left", 0);
        arm(a[i].c, "hold-draw", 0, ROWLOCK__FAULT_STALL, 0);
        assert_int_equal(pthread_create(&t[i], NULL, tree_waiter, &a[i]), 0);
        wait_entries("x-left", 0, i + 2);
    }
    assert_int_equal(pthread_join(t1, NULL), 0); /* r1 gave up at 3 s */
    assert_int_equal(a1.rc, ROWLOCK_EBUSY);
    rowlock__sleep_us(500000);
    assert_rc(rowlock_release(lw), 0, w);
    unsigned draws = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(a[i].rc, 0);
        draws += rowlock__fault_fired(a[i].c, "hold-draw");
    }
    print_message("  3 readers behind one that left: %u attempts, %d at once\n", draws, most);
    assert_true(draws <= 5); /* without the look: 7 */
    assert_int_equal(most, 3);
}

/*
 * Joining readers (one server): once a reader found no writer (holder or
 * waiter) and opened the name, a reader without a hold of its own is
 * granted in one autocommitted statement (hold-join) with the opener's
 * token: no transaction, no token draw. A writer's draw closes the name:
 * the next reader tries the join, then makes the attempt, and queues
 * behind the writer; after the writer, a reader opens the name again with
 * a greater token; none joins at or below the failover epoch's token
 * floor. Semaphores do not join. Planted join that ignores the
 * names row's shared_token: a reader is granted while the writer holds
 * (fails here, and in db_modes' history check).
 */
static const char *const JOIN_TAGS[] = { "hold-join", "hold-begin", "hold-draw", "hold-write" };

static void join_arm(rowlock_client *c)
{
    rowlock__fault_clear(c);
    for (int i = 0; i < 4; i++)
        arm(c, JOIN_TAGS[i], 0, ROWLOCK__FAULT_STALL, 0);
}

/* How many `tag` statements c ran since its last join_arm(). */
static unsigned fired(rowlock_client *c, const char *tag)
{
    unsigned n = rowlock__fault_fired(c, tag);
    for (int i = 0; i < 4; i++)
        if (strcmp(JOIN_TAGS[i], tag) == 0)
            return n;
    fail_msg("unknown tag %s", tag);
    return 0;
}

static void test_acquire__readers_join_in_one_statement_until_a_writer_draws(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C(), *w = C();
    rowlock_lock *ra = sem_handle(a, "x-join", 0), *rb = sem_handle(b, "x-join", 0);
    rowlock_lock *wx = tu_lock(w, "x-join", ROWLOCK_STRATEGY_INSERT);
    join_arm(a);
    join_arm(b);
    /* The first reader: the name's first shared use, an attempt (it opens). */
    assert_rc(rowlock_acquire(ra, 0, 60000), 0, a);
    const uint64_t t_open = rowlock_lock_token(ra);
    assert_true(fired(a, "hold-draw") >= 1); /* a first use: a draw, the conversion, a draw */
    join_arm(a);
    /* The second joins: one statement. */
    assert_rc(rowlock_acquire(rb, 0, 60000), 0, b);
    assert_int_equal(fired(b, "hold-join"), 1);
    assert_int_equal(fired(b, "hold-begin"), 0);
    assert_int_equal(fired(b, "hold-draw"), 0);
    assert_int_equal(fired(b, "hold-write"), 0);
    join_arm(b);
    assert_true(rowlock_lock_token(rb) == t_open);
    assert_int_equal(entries_granted("x-join"), 2);
    /* A writer that tries once and loses writes nothing: still open. */
    assert_rc(rowlock_acquire(wx, 0, 60000), ROWLOCK_EBUSY, w);
    assert_rc(rowlock_release(rb), 0, b);
    assert_rc(rowlock_acquire(rb, 0, 60000), 0, b);
    assert_int_equal(fired(b, "hold-join"), 1);
    assert_int_equal(fired(b, "hold-draw"), 0);
    join_arm(b);
    assert_rc(rowlock_release(rb), 0, b);
    /* A writer that queues draws a token: closed. The reader tries the
     * join, then the attempt, and is refused behind the writer. */
    silent_arg sw = { wx, 20000, -99 };
    pthread_t tw;
    assert_int_equal(pthread_create(&tw, NULL, silent_acquire, &sw), 0);
    const int64_t queued_by = tu_now_us() + 10000000;
    while (entries_of("x-join", 0) < 1 && tu_now_us() < queued_by)
        rowlock__sleep_us(2000);
    assert_int_equal(entries_of("x-join", 0), 1); /* the writer queued */
    assert_rc(rowlock_acquire(rb, 0, 60000), ROWLOCK_EBUSY, b);
    assert_int_equal(fired(b, "hold-join"), 1);
    assert_int_equal(fired(b, "hold-draw"), 1);
    join_arm(b);
    /* The writer gets it at the first reader's release; meanwhile no reader. */
    assert_rc(rowlock_release(ra), 0, a);
    assert_int_equal(pthread_join(tw, NULL), 0);
    assert_rc(sw.rc, 0, w);
    const uint64_t t_writer = rowlock_lock_token(wx);
    assert_true(t_writer > t_open);
    assert_rc(rowlock_acquire(rb, 0, 60000), ROWLOCK_EBUSY, b);
    assert_int_equal(fired(b, "hold-join"), 1);
    join_arm(b);
    assert_rc(rowlock_release(wx), 0, w);
    /* After the writer: the next reader opens again, above the writer's
     * token; the one after it joins with that token. */
    assert_rc(rowlock_acquire(rb, 0, 60000), 0, b);
    assert_int_equal(fired(b, "hold-draw"), 1);
    join_arm(b);
    assert_true(rowlock_lock_token(rb) > t_writer);
    assert_rc(rowlock_acquire(ra, 0, 60000), 0, a);
    assert_int_equal(fired(a, "hold-join"), 1);
    assert_int_equal(fired(a, "hold-draw"), 0);
    join_arm(a);
    assert_true(rowlock_lock_token(ra) == rowlock_lock_token(rb));
    assert_rc(rowlock_release(ra), 0, a);
    assert_rc(rowlock_release(rb), 0, b);
    /* After a failover the token floor is above the open name's token (a
     * promoted replica may not have the writers' greater tokens): no join;
     * the next reader draws, above the floor, and opens again. */
    assert_rc(rowlock_acquire(ra, 0, 60000), 0, a); /* the spell rb opened goes on */
    const uint64_t t_spell = rowlock_lock_token(ra);
    assert_int_equal(fired(a, "hold-draw"), 0);
    assert_rc(rowlock_release(ra), 0, a);
    int ok = 0;
    const long long floor_was = tu_sql_int(NULL, &ok, "SELECT token_floor FROM `" TABLE "_epoch` WHERE id = 1");
    assert_true(ok);
    assert_int_equal(tu_sql(tu_defaults_file(), 0,
                            "UPDATE `" TABLE "_epoch` SET token_floor = %llu WHERE id = 1",
                            (unsigned long long)t_spell),
                     0);
    join_arm(b);
    assert_rc(rowlock_acquire(rb, 0, 60000), 0, b);
    assert_int_equal(fired(b, "hold-join"), 1);
    assert_int_equal(fired(b, "hold-draw"), 1);
    assert_true(rowlock_lock_token(rb) > t_spell);
    join_arm(a);
    assert_rc(rowlock_acquire(ra, 0, 60000), 0, a);
    assert_int_equal(fired(a, "hold-draw"), 0);
    assert_true(rowlock_lock_token(ra) == rowlock_lock_token(rb));
    assert_rc(rowlock_release(ra), 0, a);
    assert_rc(rowlock_release(rb), 0, b);
    assert_int_equal(tu_sql(tu_defaults_file(), 0, "UPDATE `" TABLE "_epoch` SET token_floor = %lld WHERE id = 1",
                            floor_was),
                     0);
    /* Semaphores do not join: each holder draws its own token. */
    rowlock_lock *sa = sem_handle(a, "x-join-sem", 3), *sb = sem_handle(b, "x-join-sem", 3);
    assert_rc(rowlock_acquire(sa, 0, 60000), 0, a);
    join_arm(b);
    assert_rc(rowlock_acquire(sb, 0, 60000), 0, b);
    assert_int_equal(fired(b, "hold-join"), 0);
    assert_int_equal(fired(b, "hold-draw"), 1);
    assert_true(rowlock_lock_token(sb) > rowlock_lock_token(sa));
    assert_rc(rowlock_release(sa), 0, a);
    assert_rc(rowlock_release(sb), 0, b);
}

/*
 * Readers waiting for a one-row (exclusive) holder wait on its hint in
 * slices as long as its lease, and make no attempt while a slice passes
 * with the row still held: before, each made an attempt (5 statements)
 * every second (1 000 of them: 5 400 statements/s). The seam counts the
 * attempts (hold-draw). Planted 1 s slices: 6 attempts in the first wait
 * (fails). Then the waits must still end when they should: at the holder's
 * release, and at the end of a lease its holder let run out while its
 * session (and its hint) stayed.
 */
static void test_acquire__a_reader_waits_for_a_one_row_holder_without_attempts(void **state)
{
    (void)state;
    rowlock_client *h = C(), *r = C();
    rowlock_lock *lh = tu_lock(h, "x-rowwait", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *lr = sem_handle(r, "x-rowwait", 0);
    assert_rc(rowlock_acquire(lh, 0, 60000), 0, h);
    arm(r, "hold-draw", 0, ROWLOCK__FAULT_STALL, 0);
    arm(r, "hold-wait-row", 0, ROWLOCK__FAULT_STALL, 0);
    assert_rc(rowlock_acquire(lr, 4500, 60000), ROWLOCK_EBUSY, r);
    unsigned draws = rowlock__fault_fired(r, "hold-draw"), waits = rowlock__fault_fired(r, "hold-wait-row");
    print_message("  a 4.5 s wait: %u attempts, %u wait statements\n", draws, waits);
    assert_true(draws <= 2); /* one at the start, one at the deadline; 1 s slices: 6 */
    assert_true(waits >= 1 && waits <= 3);

    /* The holder's release wakes the reader. */
    silent_arg sa = { lr, 20000, -1 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, silent_acquire, &sa), 0);
    tu_sleep_ms(1500);
    const int64_t released = rowlock__now_us();
    assert_rc(rowlock_release(lh), 0, h);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_rc(sa.rc, 0, r);
    assert_true(rowlock__now_us() - released < 5000000); /* not the 20 s deadline */
    assert_rc(rowlock_release(lr), 0, r);

    /* A lease run out, its holder's session (and hint) still there (another
     * name: this one has a multi-holder row now, where h's grant is an entry). */
    rowlock_lock *lh2 = tu_lock(h, "x-rowwait-end", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *lr2 = sem_handle(r, "x-rowwait-end", 0);
    assert_rc(rowlock_acquire(lh2, 0, 1500), 0, h);
    const int64_t taken = rowlock__now_us();
    sa = (silent_arg){ lr2, 20000, -1 };
    assert_int_equal(pthread_create(&t, NULL, silent_acquire, &sa), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_rc(sa.rc, 0, r);
    assert_true(rowlock__now_us() - taken < 6000000); /* the lease's end, not the deadline */
    assert_rc(rowlock_release(lr2), 0, r);
    assert_int_equal(rowlock_release(lh2), ROWLOCK_ENOTOWNER);
}

/* Takes 'x-rowwait-dead' for a minute and exits without a release: its
 * session ends (and its hint with it), its row stays held by its lease. */
static int dead_row_holder(void *arg, int idx)
{
    (void)arg;
    (void)idx;
    rowlock_client *c;
    rowlock_lock *l;
    int setup = tu_child_lock(TABLE, "x-rowwait-dead", ROWLOCK_STRATEGY_INSERT, &c, &l);
    if (setup)
        return setup;
    return rowlock_acquire(l, 0, 60000) == 0 ? 0 : 1;
}

/*
 * Readers of a one-row holder whose session is gone (a crashed holder: no
 * hint, its lease runs on) look once a second, in one statement that sleeps
 * in the server, instead of an attempt and a wait statement about 8 times a
 * second (about 50 statements/s per reader for the rest of the lease).
 * Planted "no sleep" (as before): 30 attempts and 29 wait statements in
 * 3.5 s, fails.
 */
static void test_acquire__readers_of_a_holder_without_its_hint_do_not_poll(void **state)
{
    (void)state;
    pid_t pid = tu_fork(dead_row_holder, NULL, 0);
    assert_int_equal(tu_wait(pid, 15000), 0);
    rowlock_client *r = C();
    rowlock_lock *lr = sem_handle(r, "x-rowwait-dead", 0);
    arm(r, "hold-draw", 0, ROWLOCK__FAULT_STALL, 0);
    arm(r, "hold-wait-row", 0, ROWLOCK__FAULT_STALL, 0);
    assert_rc(rowlock_acquire(lr, 3500, 60000), ROWLOCK_EBUSY, r);
    assert_msg_has(r, "held by");
    unsigned draws = rowlock__fault_fired(r, "hold-draw"), waits = rowlock__fault_fired(r, "hold-wait-row");
    print_message("  a 3.5 s wait: %u attempts, %u wait statements\n", draws, waits);
    assert_true(draws <= 4); /* the first free look is taken as a release, then one at the deadline */
    assert_true(waits >= 3 && waits <= 6);
}

/*
 * A lone waiter heads the queue and waits on the holder's hint. It waited
 * in 1 s slices with a claim after each (a hint can outlive its holder's
 * lease): 3 statements a second for as long as it waited, where the issue
 * asks for 0.1. A slice that passed now also reads the row: while another
 * owner holds it, the head waits again without a claim, in slices up to
 * the lease's end and up to a quarter of the time it has seen that grant
 * (a holder granted without the hint frees none at its release). Here a
 * 16 s wait on a 60 s lease, then the release: 11 head waits and 1
 * claim; planted 1 s slices with a claim after each: 16 and 16, fails. The
 * release still wakes it at once.
 */
static void test_acquire__a_lone_head_waits_longer_slices_without_claims(void **state)
{
    (void)state;
    rowlock_client *h = C(), *w = C();
    rowlock_lock *lh = tu_lock(h, "x-lonehead", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *lw = tu_lock(w, "x-lonehead", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(lh, 0, 60000), 0, h);
    arm(w, "head-wait", 0, ROWLOCK__FAULT_STALL, 0);
    arm(w, "claim", 0, ROWLOCK__FAULT_STALL, 0);
    silent_arg sa = { lw, 30000, -1 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, silent_acquire, &sa), 0);
    tu_sleep_ms(16000);
    const int64_t t0 = tu_now_us();
    const int rh = rowlock_release(lh);
    assert_int_equal(pthread_join(t, NULL), 0); /* before any assertion: the thread uses w */
    const int64_t woke_ms = tu_ms_since(t0);
    const unsigned waits = rowlock__fault_fired(w, "head-wait"), claims = rowlock__fault_fired(w, "claim");
    print_message("  a 16 s wait: %u head waits, %u claims; granted %lld ms after the release\n", waits, claims,
                  (long long)woke_ms);
    assert_rc(rh, 0, h);
    assert_rc(sa.rc, 0, w);
    assert_true(waits >= 5 && waits <= 13); /* 1 s for about 5 s, then a quarter of the time: 11 */
    assert_true(claims <= 2);
    assert_true(woke_ms < 1000); /* the release's hint, not a slice's end */
    assert_rc(rowlock_release(lw), 0, w);
}

/*
 * A holder that got the row without the hint frees none at its release: its
 * predecessor, paused past its lease (here: a client that does not renew),
 * still holds it. The head behind it waits on that hint, so it learns of
 * the release only when a slice ends: slices are at most a quarter of the
 * time it has seen that grant. Here the grant is released after 10 s and
 * the head takes it within 5 s; planted slices up to the lease's end: it
 * waits out its 25 s, fails.
 */
static void test_acquire__a_release_that_frees_no_hint_is_noticed_within_a_quarter(void **state)
{
    (void)state;
    rowlock_client *p = C(), *h2 = C(), *h3 = C();
    rowlock_lock *lp = tu_lock(p, "x-nohint", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *l2 = tu_lock(h2, "x-nohint", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *l3 = tu_lock(h3, "x-nohint", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(lp, 0, 2000), 0, p); /* its session keeps the hint past the lease */
    silent_arg s2 = { l2, 10000, -1 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, silent_acquire, &s2), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_rc(s2.rc, 0, h2); /* granted at p's lease end, without the hint */
    silent_arg s3 = { l3, 25000, -1 };
    assert_int_equal(pthread_create(&t, NULL, silent_acquire, &s3), 0);
    tu_sleep_ms(10000);
    const int64_t t0 = tu_now_us();
    const int r2 = rowlock_release(l2);
    assert_int_equal(pthread_join(t, NULL), 0); /* before any assertion: the thread uses h3 */
    const int64_t took_ms = tu_ms_since(t0);
    print_message("  granted %lld ms after a release that freed no hint\n", (long long)took_ms);
    assert_rc(r2, 0, h2);
    assert_rc(s3.rc, 0, h3);
    assert_true(took_ms < 5000); /* a slice of about 2.5 s at 10 s */
    assert_rc(rowlock_release(l3), 0, h3);
    const int rp = rowlock_release(lp); /* its lease ended long ago and the row moved on */
    assert_int_equal(rp, ROWLOCK_ENOTOWNER);
}

/*
 * The semaphore's first waiter watches one of its N holders (no wake-up on
 * "any of N" exists among named locks) in slices that grow from 250 ms to a
 * quarter of the time nothing changed (at most 5 s): an idle head made 4
 * statements a second for as long as it waited. A release by the holder it
 * does not watch is still noticed within a quarter of its wait. Here 9 s
 * idle, then that release: planted fixed 250 ms slices, 36 wait statements,
 * fails.
 */
static void test_acquire__an_idle_semaphore_head_looks_less_and_less_often(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C(), *w = C();
    rowlock_lock *la = sem_handle(a, "x-semhead", 2), *lb = sem_handle(b, "x-semhead", 2);
    rowlock_lock *lw = sem_handle(w, "x-semhead", 2);
    assert_rc(rowlock_acquire(la, 0, 60000), 0, a);
    assert_rc(rowlock_acquire(lb, 0, 50000), 0, b); /* its lease ends first: the head watches it */
    arm(w, "hold-wait-entry", 0, ROWLOCK__FAULT_STALL, 0);
    silent_arg sa = { lw, 20000, -1 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, silent_acquire, &sa), 0);
    tu_sleep_ms(9000);
    const int64_t t0 = tu_now_us();
    const int ra = rowlock_release(la); /* the holder it does not watch */
    assert_int_equal(pthread_join(t, NULL), 0); /* before any assertion: the thread uses w */
    const int64_t noticed_ms = tu_ms_since(t0);
    const unsigned waits = rowlock__fault_fired(w, "hold-wait-entry");
    print_message("  9 s idle: %u wait statements; the other holder's release noticed after %lld ms\n", waits,
                  (long long)noticed_ms);
    assert_rc(ra, 0, a);
    assert_rc(sa.rc, 0, w);
    assert_true(waits >= 6 && waits <= 20); /* 250 ms slices for 1 s, then t/4: about 13 */
    assert_true(noticed_ms < 4500);         /* a 2.25 s slice at 9 s, and the grant */
    assert_rc(rowlock_release(lw), 0, w);
    assert_rc(rowlock_release(lb), 0, b);
}

/* A client whose every read times out after rt_ms (as `rowlock run`'s:
 * half its lease). */
static rowlock_client *client_rt(unsigned int rt_ms)
{
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    rowlock_client *c = NULL;
    assert_int_equal(rowlock_client_new(&c), 0);
    tu_register_client(c);
    o.defaults_file = tu_defaults_file();
    o.table = TABLE;
    o.read_timeout_ms = rt_ms;
    assert_rc(rowlock_client_connect(c, &o), 0, c);
    return c;
}

/*
 * A waiter whose connection has a read timeout waits in slices longer than
 * it: the wait statements run non-blocking and the read timeout counts from
 * the end of the server-side wait. Before, slices were the read timeout
 * less 1 s (`rowlock run`, 30 s lease: 14 s slices, twice the statements of
 * the library's 30 s). Behind an exclusive queue's head, and a reader
 * behind a one-row writer, each with a 2 s read timeout and a 5.5 s wait:
 * planted "slices capped by the read timeout": 6 statements behind the
 * head, fails. The session survives the long waits (planted "long slices,
 * blocking reads": the read is cut, a reconnect, fails).
 */
static void test_acquire__waits_are_not_cut_into_read_timeout_slices(void **state)
{
    (void)state;
    rowlock_client *h = C(), *q = C(), *w = client_rt(2000);
    rowlock_lock *lh = tu_lock(h, "x-rt", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *lq = tu_lock(q, "x-rt", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *lw = tu_lock(w, "x-rt", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(lh, 0, 60000), 0, h);
    silent_arg sa = { lq, 15000, -1 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, silent_acquire, &sa), 0);
    /* q heads the queue (holds its head lock): w then waits behind it */
    for (int i = 0; i < 1000; i++) {
        int ok = 0;
        if (tu_sql_int(NULL, &ok, "SELECT IS_USED_LOCK('%s') IS NOT NULL", ROWLOCK__LEASE(lq)->qname) == 1 && ok)
            break;
        tu_sleep_ms(10);
    }
    arm(w, "queue-wait", 0, ROWLOCK__FAULT_STALL, 0);
    const unsigned long session = rowlock__db_thread_id(w);
    const int rw = rowlock_acquire(lw, 5500, 60000);
    const unsigned long session_after = rowlock__db_thread_id(w);
    unsigned waits = rowlock__fault_fired(w, "queue-wait");
    const int rh = rowlock_release(lh);
    assert_int_equal(pthread_join(t, NULL), 0); /* before any assertion: q's thread uses its client */
    print_message("  behind the head, a 5.5 s wait with a 2 s read timeout: %u wait statements\n", waits);
    assert_rc(rw, ROWLOCK_EBUSY, w);
    assert_int_equal(session_after, session); /* no read was cut (a reconnect) */
    assert_true(waits >= 1 && waits <= 2);
    assert_rc(rh, 0, h);
    assert_rc(sa.rc, 0, q);

    /* A reader behind a one-row writer (q holds x-rt now). */
    rowlock_lock *lr = sem_handle(w, "x-rt", 0);
    arm(w, "hold-wait-row", 0, ROWLOCK__FAULT_STALL, 0);
    assert_rc(rowlock_acquire(lr, 5500, 60000), ROWLOCK_EBUSY, w);
    assert_int_equal(rowlock__db_thread_id(w), session);
    waits = rowlock__fault_fired(w, "hold-wait-row");
    print_message("  a reader's 5.5 s wait with a 2 s read timeout: %u wait statements\n", waits);
    assert_true(waits >= 1 && waits <= 3); /* the first slice is 1 s (the lease is not known yet) */
    assert_rc(rowlock_release(lq), 0, q);
    assert_rc(rowlock_acquire(lw, 0, 60000), 0, w); /* the same connection, still usable */
    assert_rc(rowlock_release(lw), 0, w);
}

/*
 * A for-update wait is one statement (a row lock wait in the server): a
 * client with a read timeout shorter than the wait had it cut, reconnected
 * and waited again at the back of InnoDB's queue, though rowlock.h says
 * lock waits are never cut by the read timeout. A 4 s wait with a 2 s read
 * timeout: busy at its deadline, on the same session; then a wait the
 * holder's release ends after 3 s: granted, same session. Planted "the
 * wait not marked": another session after the first wait, fails.
 */
static void test_acquire__a_for_update_wait_is_not_cut_by_the_read_timeout(void **state)
{
    (void)state;
    rowlock_client *h = C(), *w = client_rt(2000);
    rowlock_lock *lh = tu_lock(h, "x-fu-rt", ROWLOCK_STRATEGY_FOR_UPDATE);
    rowlock_lock *lw = tu_lock(w, "x-fu-rt", ROWLOCK_STRATEGY_FOR_UPDATE);
    assert_rc(rowlock_acquire(lh, 0, 60000), 0, h);
    const unsigned long session = rowlock__db_thread_id(w);
    assert_rc(rowlock_acquire(lw, 4000, 60000), ROWLOCK_EBUSY, w);
    assert_int_equal(rowlock__db_thread_id(w), session);
    silent_arg sa = { lw, 10000, -1 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, silent_acquire, &sa), 0);
    tu_sleep_ms(3000);
    const int rh = rowlock_release(lh);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_rc(rh, 0, h);
    assert_rc(sa.rc, 0, w);
    assert_int_equal(rowlock__db_thread_id(w), session);
    assert_rc(rowlock_release(lw), 0, w);
}

/*
 * A shared acquire by the client that holds the name as a plain one-row
 * (exclusive) lock through another handle is refused at once: a wait could
 * only wait for the client itself (before: until the deadline, 24 attempts
 * in 2.5 s, "held by" its own owner). Once that handle lets go, the shared
 * acquire is granted.
 */
static void test_acquire__shared_by_the_one_row_holder_itself_is_refused_at_once(void **state)
{
    (void)state;
    rowlock_client *h = C();
    rowlock_lock *lx = tu_lock(h, "x-rowwait-self", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *ls = sem_handle(h, "x-rowwait-self", 0);
    assert_rc(rowlock_acquire(lx, 0, 60000), 0, h);
    arm(h, "hold-draw", 0, ROWLOCK__FAULT_STALL, 0);
    arm(h, "hold-wait-row", 0, ROWLOCK__FAULT_STALL, 0);
    const int64_t t0 = rowlock__now_us();
    assert_int_equal(rowlock_acquire(ls, 2500, 60000), ROWLOCK_EBUSY);
    const int64_t took_ms = (rowlock__now_us() - t0) / 1000;
    unsigned draws = rowlock__fault_fired(h, "hold-draw"), waits = rowlock__fault_fired(h, "hold-wait-row");
    print_message("  refused after %lld ms: %u attempts, %u wait statements\n", (long long)took_ms, draws, waits);
    assert_msg_has(h, "this client holds it exclusively through another handle");
    assert_true(took_ms < 1000);
    assert_int_equal(draws, 1);
    assert_int_equal(waits, 0);
    assert_int_equal(rowlock_lock_held(lx), 1); /* untouched */
    assert_rc(rowlock_release(lx), 0, h);
    assert_rc(rowlock_acquire(ls, 2500, 60000), 0, h);
    assert_rc(rowlock_release(ls), 0, h);
}

/*
 * A release hands the lock to the waiter heading the queue, but the waiter
 * never learns it from its head-wait statement (it fails every time): it
 * polls, its claim is denied (the row is its owner's, not free), and the
 * re-entry statement with increment 0 takes the handed row. Without that
 * step the waiter would give up at its deadline while the row names it.
 */
static int handed_waiter(void *arg, int idx)
{
    (void)idx;
    tu_pipe *ready = arg;
    rowlock_client *a;
    rowlock_lock *la;
    int setup = tu_child_lock(TABLE, "acq-handed", ROWLOCK_STRATEGY_INSERT, &a, &la);
    if (setup)
        return setup;
    if (rowlock__fault_set(a, "head-wait", 0, ROWLOCK__FAULT_ERROR, 1235) != 0)
        return 12;
    tu_signal(ready, 'r');
    int rc = rowlock_acquire(la, 8000, 60000);
    if (rc != 0) {
        fprintf(stderr, "handed waiter: %s\n", rowlock_client_errmsg(a));
        return 1;
    }
    if (rowlock__fault_fired(a, "head-wait") < 1)
        return 2; /* it never headed the queue: the test proved nothing */
    if (row_count("acq-handed") != 1)
        return 3;
    return rowlock_release(la) == 0 ? 0 : 4;
}

static void test_acquire__a_hand_off_the_head_did_not_see_is_taken_by_its_next_claim(void **state)
{
    (void)state;
    rowlock_client *b = C();
    rowlock_lock *lb = tu_lock(b, "acq-handed", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(lb, 0, 60000), 0, b);
    tu_pipe ready;
    tu_pipe_open(&ready);
    pid_t pid = tu_fork(handed_waiter, &ready, 0);
    assert_int_equal(tu_await(&ready, 10000), 'r');
    tu_sleep_ms(800); /* the waiter heads the queue and polls */
    assert_rc(rowlock_release(lb), 0, b);
    assert_int_equal(tu_wait(pid, 15000), 0);
    tu_pipe_close(&ready);
    assert_false(row_held("acq-handed"));
}

/* ---- release ------------------------------------------------------------------------ */

/* ---- transient server states (issue 24 item 3) ------------------------------------ */

typedef struct clear_later {
    rowlock_client *c;
    int64_t after_ms;
} clear_later;

static void *clear_after(void *arg)
{
    clear_later *cl = arg;
    rowlock__sleep_us(cl->after_ms * 1000);
    rowlock__fault_clear(cl->c);
    return NULL;
}

/* Every transient condition of the table in error.c (read-only, connection
 * limits, Galera node not ready, shutdown, connect refused, connection lost,
 * lock wait timeout, deadlock) is waited out by an acquire with a deadline:
 * each claim fails with it for 1.2 s, then the server "recovers" and the
 * acquire is granted. A permanent one (access denied, unknown table) fails
 * at once though the wait has 5 s left. */
static void test_acquire__a_wait_outlasts_every_transient_server_state(void **state)
{
    (void)state;
    const unsigned transient[] = { 1290, 1040, 1203, 1047, 1053, 2003, 2013, 1205, 1213 };
    for (size_t i = 0; i < sizeof transient / sizeof transient[0]; i++) {
        rowlock_client *c = C();
        char name[32];
        snprintf(name, sizeof name, "acq-transient-%u", transient[i]);
        rowlock_lock *l = tu_lock(c, name, ROWLOCK_STRATEGY_INSERT);
        arm_error(c, "claim", 0, transient[i]);
        clear_later cl = { c, 1200 };
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, clear_after, &cl), 0);
        int64_t t0 = rowlock__now_us();
        int rc = rowlock_acquire(l, 10000, 0);
        int64_t took_ms = (rowlock__now_us() - t0) / 1000;
        pthread_join(th, NULL);
        if (rc != 0)
            fail_msg("error %u: acquire returned %s after %lld ms: %s", transient[i], rowlock_error_name(rc),
                     (long long)took_ms, rowlock_client_errmsg(c));
        assert_true(took_ms >= 1100);
        assert_true(row_held(name));
        assert_rc(rowlock_release(l), 0, c);
    }
    const unsigned permanent[] = { 1045, 1146, 1142 };
    for (size_t i = 0; i < sizeof permanent / sizeof permanent[0]; i++) {
        rowlock_client *c = C();
        char name[32];
        snprintf(name, sizeof name, "acq-permanent-%u", permanent[i]);
        rowlock_lock *l = tu_lock(c, name, ROWLOCK_STRATEGY_INSERT);
        arm_error(c, "claim", 0, permanent[i]);
        int64_t t0 = rowlock__now_us();
        int rc = rowlock_acquire(l, 5000, 0);
        int64_t took_ms = (rowlock__now_us() - t0) / 1000;
        rowlock__fault_clear(c);
        assert_int_not_equal(rc, 0);
        assert_int_equal(rowlock_client_transient(c), 0);
        if (took_ms > 1000)
            fail_msg("permanent error %u waited %lld ms", permanent[i], (long long)took_ms);
    }
}

/* The CLI-facing classification: the same table. */
static void test_acquire__transient_errors_are_reported_as_transient(void **state)
{
    (void)state;
    rowlock_client *c = C();
    rowlock_lock *l = tu_lock(c, "acq-transient-flag", ROWLOCK_STRATEGY_INSERT);
    arm_error(c, "claim", 0, 1290);
    assert_rc(rowlock_acquire(l, 0, 0), ROWLOCK_EDB, c);
    assert_int_equal(rowlock_client_transient(c), 1);
    assert_int_equal(rowlock_client_conn_lost(c), 0);
    rowlock__fault_clear(c);
}

static void test_release__one_lock_wait_timeout_is_retried(void **state)
{
    (void)state;
    rowlock_client *c = C();
    rowlock_lock *l = tu_lock(c, "rel-retry", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c);
    arm_error(c, "release", 1, 1205);
    assert_rc(rowlock_release(l), 0, c);
    assert_int_equal(rowlock__fault_fired(c, "release"), 1);
    assert_false(row_held("rel-retry"));
    assert_int_equal(row_count("rel-retry"), 0);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c);
    assert_rc(rowlock_release(l), 0, c);
}

static void test_release__busy_every_time_is_edb_and_keeps_the_lock(void **state)
{
    (void)state;
    rowlock_client *c = C();
    rowlock_lock *l = tu_lock(c, "rel-busy", ROWLOCK_STRATEGY_OPTIMISTIC);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c);
    uint64_t token = rowlock_lock_token(l);
    arm_error(c, "release", 0, 1213);
    assert_rc(rowlock_release(l), ROWLOCK_EDB, c);
    assert_int_equal(rowlock__fault_fired(c, "release"), 8);
    assert_int_equal(rowlock_client_db_errno(c), 1213);
    assert_int_equal(rowlock_lock_held(l), 1);
    assert_int_equal(rowlock_lock_token(l), token);
    assert_true(row_held("rel-busy"));
    assert_int_equal(row_count("rel-busy"), 1);
    rowlock__fault_clear(c);
    assert_rc(rowlock_release(l), 0, c);
    assert_false(row_held("rel-busy"));
}

static void test_release__a_lost_connection_is_edb_and_the_retry_releases(void **state)
{
    (void)state;
    rowlock_client *c = C();
    rowlock_lock *l = tu_lock(c, "rel-conn", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c);
    arm_error(c, "release", 1, 2013);
    assert_rc(rowlock_release(l), ROWLOCK_EDB, c);
    assert_int_equal(rowlock_lock_held(l), 1);
    assert_true(row_held("rel-conn")); /* the lease row outlives the session */
    assert_rc(rowlock_release(l), 0, c);
    assert_false(row_held("rel-conn"));
}

static void test_release__a_release_whose_reply_was_lost_is_enotowner_next_time(void **state)
{
    (void)state;
    rowlock_client *c = C();
    rowlock_lock *l = tu_lock(c, "rel-drop", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c);
    arm(c, "release", 1, ROWLOCK__FAULT_DROP_AFTER, 0);
    assert_rc(rowlock_release(l), ROWLOCK_EDB, c);
    assert_false(row_held("rel-drop")); /* it ran */
    assert_rc(rowlock_release(l), ROWLOCK_ENOTOWNER, c);
    assert_msg_has(c, "released");
    assert_rc(rowlock_acquire(l, 0, 0), 0, c);
    assert_rc(rowlock_release(l), 0, c);
}

static void test_release__the_hand_off_form_retries_too(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = tu_lock(a, "rel-handoff", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *lb = tu_lock(b, "rel-handoff", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(lb, 0, 0), 0, b);
    assert_rc(rowlock_acquire(la, 0, 0), ROWLOCK_EBUSY, a); /* la saw contention */
    assert_rc(rowlock_release(lb), 0, b);
    assert_rc(rowlock_acquire(la, 0, 0), 0, a);
    arm_error(a, "release-handoff", 1, 1205);
    assert_rc(rowlock_release(la), 0, a);
    assert_int_equal(rowlock__fault_fired(a, "release-handoff"), 1);
    assert_false(row_held("rel-handoff"));
}

/* ---- renew --------------------------------------------------------------------------- */

static void test_renew__busy_every_time_is_edb_and_the_lease_is_unchanged(void **state)
{
    (void)state;
    rowlock_client *c = C();
    rowlock_lock *l = tu_lock(c, "renew-busy", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(l, 0, 5000), 0, c);
    arm_error(c, "renew", 0, 1205);
    assert_rc(rowlock_renew(l, 60000), ROWLOCK_EDB, c);
    assert_true(row_expires_in_ms("renew-busy") <= 5000);
    rowlock__fault_clear(c);
    arm_error(c, "renew", 1, 2006);
    assert_rc(rowlock_renew(l, 60000), ROWLOCK_EDB, c);
    assert_true(row_expires_in_ms("renew-busy") <= 5000);
    assert_rc(rowlock_renew(l, 60000), 0, c);
    assert_true(row_expires_in_ms("renew-busy") > 50000);
    assert_rc(rowlock_release(l), 0, c);
}

/* ---- for-update -------------------------------------------------------------------- */

static void test_for_update__begin_and_lock_errors_leave_no_transaction(void **state)
{
    (void)state;
    rowlock_client *c = C(), *other = C();
    rowlock_lock *l = tu_lock(c, "fu-err", ROWLOCK_STRATEGY_FOR_UPDATE);
    rowlock_lock *lo = tu_lock(other, "fu-err", ROWLOCK_STRATEGY_FOR_UPDATE);
    assert_rc(rowlock_acquire(lo, 0, 0), 0, other); /* creates the row */
    assert_rc(rowlock_release(lo), 0, other);
    arm_error(c, "fu-begin", 1, 2013);
    assert_rc(rowlock_acquire(l, 0, 0), ROWLOCK_EDB, c);
    arm_error(c, "fu-lock-try", 1, 1205);
    assert_rc(rowlock_acquire(l, 0, 0), ROWLOCK_EBUSY, c);
    assert_int_equal(rowlock_lock_held(l), 0);
    assert_rc(rowlock_acquire(lo, 0, 0), 0, other); /* nothing left holding the row */
    assert_rc(rowlock_release(lo), 0, other);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c);
    assert_rc(rowlock_release(l), 0, c);
}

static void test_for_update__a_commit_that_loses_the_connection_is_enotowner(void **state)
{
    (void)state;
    rowlock_client *c = C(), *other = C();
    rowlock_lock *l = tu_lock(c, "fu-commit", ROWLOCK_STRATEGY_FOR_UPDATE);
    rowlock_lock *lo = tu_lock(other, "fu-commit", ROWLOCK_STRATEGY_FOR_UPDATE);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c);
    arm_error(c, "fu-commit", 1, 2013);
    assert_rc(rowlock_release(l), ROWLOCK_ENOTOWNER, c);
    assert_rc(rowlock_acquire(lo, 2000, 0), 0, other); /* the session ended: row free */
    assert_rc(rowlock_release(lo), 0, other);
    assert_rc(rowlock_acquire(l, 0, 0), 0, c); /* reconnects */
    assert_rc(rowlock_release(l), 0, c);
}

/* ---- reap ----------------------------------------------------------------------------- */

static void make_stale(rowlock_client *c, const char *name)
{
    rowlock_lock *l = tu_lock(c, name, ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(l, 0, 1), 0, c);
    tu_lock_free(l); /* releases: the row stays, free since a moment ago */
}

static int64_t reap(rowlock_client *c, int *rc, unsigned batch)
{
    rowlock_reap_options o = ROWLOCK_REAP_OPTIONS_INIT;
    o.grace_ms = 0;
    o.batch = batch;
    o.pause_ms = 0;
    rowlock_reap_stats st = { .version = ROWLOCK_REAP_STATS_VERSION };
    *rc = rowlock_admin_reap(c, &o, &st);
    return (int64_t)st.purged;
}

static void test_reap__a_busy_batch_is_tried_again_and_errors_purge_nothing(void **state)
{
    (void)state;
    rowlock_client *c = C();
    int rc;
    make_stale(c, "reap-a");
    make_stale(c, "reap-b");
    tu_sleep_ms(20);
    arm_error(c, "reap-delete", 1, 2013);
    reap(c, &rc, 1);
    assert_rc(rc, ROWLOCK_EDB, c);
    assert_int_not_equal(row_count("reap-a"), -1); /* nothing purged */
    assert_int_not_equal(row_count("reap-b"), -1);
    arm_error(c, "reap-survey", 1, 1146);
    reap(c, &rc, 1);
    assert_rc(rc, ROWLOCK_ESCHEMA, c);
    arm_error(c, "reap-delete", 1, 1205);
    int64_t purged = reap(c, &rc, 1);
    assert_rc(rc, 0, c);
    assert_true(rowlock__fault_fired(c, "reap-delete") >= 2);
    assert_true(purged >= 2);
    assert_int_equal(row_count("reap-a"), -1);
    assert_int_equal(row_count("reap-b"), -1);
}

/*
 * On a cluster (the forced rule: what lease_cluster.c runs on a Galera
 * node), a purge of released rows and the raise of the token floor to the
 * largest purged token are one transaction, and the DELETE changes nothing
 * outside one (@@in_transaction in its condition): a brute-force abort
 * whose error the server never sent would otherwise leave the delete
 * autocommitted without the floor, and the name's next grant could draw a
 * token below the purged one. The seam ends the transaction silently before
 * the DELETE: the batch is busy and tried again, and once the row is gone,
 * the floor is at its token.
 */
static long long floor_token(void)
{
    int ok = 0;
    long long n = tu_sql_int(NULL, &ok, "SELECT token FROM `" TABLE "_floor` WHERE id = 1");
    return ok ? n : -1;
}

static void test_reap__under_the_cluster_rule_no_row_is_purged_without_the_token_floor(void **state)
{
    (void)state;
    setenv("ROWLOCK_LEASE_RULE", "cluster", 1);
    rowlock_client *c = C();
    rowlock_lock *l = tu_lock(c, "cl-reap-silent", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(l, 0, 60000), 0, c);
    const uint64_t token = rowlock_lock_token(l);
    assert_rc(rowlock_release(l), 0, c); /* released: owner NULL, purged by expires_at */
    tu_sql(NULL, 0, "UPDATE `" TABLE "` SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE name = 'cl-reap-silent'");
    assert_true(floor_token() >= 0 && (uint64_t)floor_token() < token); /* else the check below proves nothing */
    arm(c, "cl-reap-free", 1, ROWLOCK__FAULT_ROLLBACK, 0);
    int rc;
    reap(c, &rc, 1000);
    assert_rc(rc, 0, c);
    assert_int_equal(rowlock__fault_fired(c, "cl-reap-free"), 1);
    assert_int_equal(row_count("cl-reap-silent"), -1);
    assert_true((uint64_t)floor_token() >= token);
}

/* ---- migrate ------------------------------------------------------------------------ */

static rowlock_client *unchecked_client(const char *table)
{
    rowlock_client *c = NULL;
    assert_int_equal(rowlock_client_new(&c), 0);
    tu_register_client(c);
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    o.defaults_file = tu_defaults_file();
    o.table = table;
    o.flags = ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK;
    assert_rc(rowlock_client_connect(c, &o), 0, c);
    return c;
}

static void test_migrate__a_failed_step_records_only_whole_files_and_a_rerun_finishes(void **state)
{
    (void)state;
    const char *t = "t_fault_mig";
    tu_sql(NULL, 0, "DROP TABLE IF EXISTS `%s`", t);
    tu_sql(NULL, 0, "DROP SEQUENCE IF EXISTS `%s_token`", t);
    tu_sql(NULL, 0, "DROP TABLE IF EXISTS `%s_queue`", t);
    tu_sql(NULL, 0, "DELETE FROM rowlock_schema WHERE lock_table = '%s'", t);
    rowlock_client *c = unchecked_client(t);
    int from = -1, to = -1, found = -1;
    arm_error(c, "migrate-lock", 1, 2013);
    assert_rc(rowlock_schema_migrate(c, 0, &from, &to), ROWLOCK_EDB, c);
    /* The 4th statement is 0002's (0001 has 3): 0001 is recorded, 0002 not. */
    arm_error(c, "migrate", 4, 1235);
    assert_rc(rowlock_schema_migrate(c, 0, &from, &to), ROWLOCK_EDB, c);
    assert_int_equal(rowlock_client_db_errno(c), 1235);
    assert_int_equal(from, 0);
    assert_int_equal(to, 1);
    assert_rc(rowlock_schema_version(c, &found), 0, c);
    assert_int_equal(found, 1);
    assert_rc(rowlock_schema_migrate(c, 0, &from, &to), 0, c);
    assert_int_equal(from, 1);
    assert_int_equal(to, rowlock_schema_version_expected());
    arm_error(c, "schema-version", 1, 1146);
    assert_rc(rowlock_schema_version(c, &found), 0, c); /* a missing schema table means "nothing installed" */
    assert_int_equal(found, 0);
    assert_rc(rowlock_schema_version(c, &found), 0, c);
    assert_int_equal(found, rowlock_schema_version_expected());
}

/* ---- ROWLOCK_FAULTS ------------------------------------------------------------------- */

static void test_env__rowlock_faults_arms_rules_for_every_client(void **state)
{
    (void)state;
    const char *env = getenv("ROWLOCK_FAULTS");
    if (env == NULL || strcmp(env, "claim:0:1205") != 0)
        fail_msg("run with ROWLOCK_FAULTS=claim:0:1205 (ctest db_inject_env does)");
    rowlock_client *c = C();
    rowlock_lock *l = tu_lock(c, "env", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(l, 0, 0), ROWLOCK_EBUSY, c);
    assert_int_equal(row_count("env"), -1);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        FT(test_seam__a_statement_with_the_wrong_parameter_count_is_an_internal_error),
        FT(test_seam__rules_count_executions_per_client_and_tag),
        FT(test_seam__a_tag_no_statement_carries_is_refused),
        FT(test_acquire__a_busy_claim_every_time_is_ebusy_and_writes_nothing),
        FT(test_acquire__one_deadlock_on_a_free_row_is_retried_ungated),
        FT(test_acquire__a_lost_connection_is_edb_and_the_next_call_reconnects),
        FT(test_acquire__a_missing_table_is_eschema_and_other_errors_edb),
        FT(test_acquire__optimistic_create_and_read_errors),
        FT(test_acquire__a_wait_survives_failing_hint_and_queue_statements),
        FT(test_acquire__a_stalled_claim_still_grants),
        FT(test_acquire__a_grant_whose_reply_was_lost_is_adopted_by_the_next_acquire),
        FT(test_acquire__a_waiting_acquire_adopts_a_grant_whose_reply_was_lost),
        FT(test_acquire__a_woken_waiter_still_blocked_looks_without_an_attempt),
        FT(test_acquire__a_reader_waits_for_a_one_row_holder_without_attempts),
        FT(test_acquire__readers_of_a_holder_without_its_hint_do_not_poll),
        FT(test_acquire__an_idle_semaphore_head_looks_less_and_less_often),
        FT(test_acquire__a_lone_head_waits_longer_slices_without_claims),
        FT(test_acquire__readers_join_in_one_statement_until_a_writer_draws),
        FT(test_acquire__readers_queued_behind_a_writer_are_granted_together),
        FT(test_acquire__a_reader_granted_as_it_gives_up_leaves_no_grant),
        FT(test_acquire__a_grant_a_reader_saw_too_late_is_not_taken_over),
        FT(test_acquire__an_interrupted_reader_is_granted_nothing),
        FT(test_acquire__a_join_whose_reply_an_interrupt_cut_leaves_no_grant),
        FT(test_acquire__an_attempt_whose_commit_an_interrupt_cut_leaves_no_grant),
        FT(test_acquire__a_join_whose_insert_id_is_lost_reads_its_token),
        FT(test_acquire__readers_are_granted_together_only_at_a_token_the_name_was_opened_at),
        FT(test_acquire__a_reader_whose_draw_waited_for_a_writer_does_not_open_the_name),
        FT(test_acquire__readers_whose_first_reader_left_wait_again_without_attempts),
        FT(test_acquire__a_release_that_frees_no_hint_is_noticed_within_a_quarter),
        FT(test_acquire__shared_by_the_one_row_holder_itself_is_refused_at_once),
        FT(test_acquire__waits_are_not_cut_into_read_timeout_slices),
        FT(test_acquire__a_for_update_wait_is_not_cut_by_the_read_timeout),
        FT(test_acquire__a_late_claim_of_ours_is_adopted_not_re_entered),
    FT(test_acquire__a_hand_off_the_head_did_not_see_is_taken_by_its_next_claim),
    FT(test_acquire__an_adopted_grant_gets_the_lease_its_acquire_asked_for),
    FT(test_acquire__under_the_cluster_rule_an_adopted_grant_bumps_gen),
    FT(test_acquire__under_the_cluster_rule_a_shared_name_is_never_taken_over),
    FT(test_acquire__under_the_cluster_rule_a_silently_ended_transaction_writes_nothing),
    FT(test_acquire__under_the_cluster_rule_a_commit_of_nothing_is_not_a_grant),
        FT(test_acquire__a_wait_outlasts_every_transient_server_state),
        FT(test_acquire__transient_errors_are_reported_as_transient),
        FT(test_release__one_lock_wait_timeout_is_retried),
        FT(test_release__busy_every_time_is_edb_and_keeps_the_lock),
        FT(test_release__a_lost_connection_is_edb_and_the_retry_releases),
        FT(test_release__a_release_whose_reply_was_lost_is_enotowner_next_time),
        FT(test_release__the_hand_off_form_retries_too),
        FT(test_renew__busy_every_time_is_edb_and_the_lease_is_unchanged),
        FT(test_for_update__begin_and_lock_errors_leave_no_transaction),
        FT(test_for_update__a_commit_that_loses_the_connection_is_enotowner),
        FT(test_reap__a_busy_batch_is_tried_again_and_errors_purge_nothing),
        FT(test_reap__under_the_cluster_rule_no_row_is_purged_without_the_token_floor),
        FT(test_migrate__a_failed_step_records_only_whole_files_and_a_rerun_finishes),
    };
    const struct CMUnitTest env_tests[] = {
        FT(test_env__rowlock_faults_arms_rules_for_every_client),
    };
    if (argc > 1 && strcmp(argv[1], "env") == 0)
        return tu_main("fault_env", env_tests, 1, TABLE, NULL);
    return tu_main("fault", tests, sizeof tests / sizeof tests[0], TABLE, argc > 1 ? argv[1] : NULL);
}
