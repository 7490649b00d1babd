/*
 * rowlock_downgrade(): an exclusive lock becomes shared without letting go
 * (issue 28 item 3), against the shared test server, insert strategy (the
 * only one that can; the others are refused here too).
 *
 * Both kinds of exclusive grant are downgraded: a name only ever used
 * exclusively (the one-row protocol: the downgrade turns it into a
 * multi-holder name in one transaction) and a name used shared before (a
 * holders-table entry: one statement). Proven: readers join while the
 * downgraded holder holds; writers that wait through the downgrade are
 * granted only after its release (a history check over many rounds); a
 * reader queued before a writer gets in at the downgrade while the writer
 * still waits; tokens and re-entrancy; a kept lock stays kept; no upgrade.
 *
 *     test_downgrade [test-filter]
 */
#include "testutil.h"

#include <stdlib.h>
#include <unistd.h>

#define TABLE "t_downgrade"

static rowlock_lock *ML(rowlock_client *c, const char *name, rowlock_mode mode)
{
    rowlock_lock_options o = ROWLOCK_LOCK_OPTIONS_INIT;
    rowlock_lock *l = NULL;
    o.mode = mode;
    assert_rc(rowlock_lock_new(&l, c, name, &o), 0, c);
    tu_register_lock(l);
    return l;
}

static rowlock_client *C(void)
{
    return tu_client(TABLE);
}

/* Make `name` a multi-holder name (a shared grant and its release), so an
 * exclusive grant of it is a holders-table entry. */
static void make_multi(const char *name)
{
    rowlock_client *c = C();
    rowlock_lock *r = ML(c, name, ROWLOCK_MODE_SHARED);
    assert_rc(rowlock_acquire(r, 0, TU_LEASE_LONG), 0, c);
    assert_rc(rowlock_release(r), 0, c);
    tu_lock_free(r);
    tu_client_free(c);
}

/* Waiters of `name` the server knows of: one-row waiters in the queue
 * table, queued entries of a multi-holder name (mode -1: any). */
static long long waiters(const char *name, int mode)
{
    int ok = 0;
    long long n = tu_sql_int(tu_defaults_file(), &ok,
                             "SELECT (SELECT COUNT(*) FROM `" TABLE "_queue` WHERE name = '%s') + "
                             "(SELECT COUNT(*) FROM `" TABLE "_hold` WHERE name = '%s' AND granted = 0 "
                             "AND (%d < 0 OR mode = %d) AND expires_at > UTC_TIMESTAMP(6))",
                             name, name, mode, mode);
    return ok ? n : -1;
}

/* Wait (polling the server, at most 20 s) until `name` has n waiters. */
static void await_waiters(const char *name, int mode, long long n)
{
    int64_t t0 = tu_now_us();
    while (waiters(name, mode) < n) {
        if (tu_ms_since(t0) > 20000)
            fail_msg("%lld waiter(s) of '%s' did not show up within 20 s", n, name);
        tu_sleep_ms(5);
    }
}

/* ---- readers join, tokens, mode ------------------------------------------- */

static void readers_join(const char *name, int multi)
{
    if (multi)
        make_multi(name);
    rowlock_client *a = C(), *b = C(), *w = C();
    rowlock_lock *x = ML(a, name, ROWLOCK_MODE_EXCLUSIVE);
    rowlock_lock *r = ML(b, name, ROWLOCK_MODE_SHARED);
    rowlock_lock *wx = ML(w, name, ROWLOCK_MODE_EXCLUSIVE);
    assert_rc(rowlock_acquire(x, 0, TU_LEASE_LONG), 0, a);
    uint64_t tx = rowlock_lock_token(x);
    assert_rc(rowlock_acquire(r, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, b);

    assert_rc(rowlock_downgrade(x), 0, a);
    assert_int_equal(rowlock_lock_mode(x), ROWLOCK_MODE_SHARED);
    assert_int_equal(rowlock_lock_held(x), 1);
    assert_true(rowlock_lock_token(x) == tx); /* the grant goes on: same token */
    /* A reader gets in at once while the downgraded holder holds; a writer does not. */
    assert_rc(rowlock_acquire(r, 0, TU_LEASE_LONG), 0, b);
    assert_true(rowlock_lock_token(r) > tx);
    assert_rc(rowlock_acquire(wx, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, w);
    assert_rc(rowlock_renew(x, TU_LEASE_LONG), 0, a); /* renewed as a shared holder */
    rowlock_info in = ROWLOCK_INFO_INIT;
    tu_inspect(x, &in);
    assert_true(in.held);
    assert_int_equal(in.count, 2);
    /* Downgrading a shared hold changes nothing. */
    assert_rc(rowlock_downgrade(x), 0, a);
    assert_rc(rowlock_release(x), 0, a);
    assert_rc(rowlock_acquire(wx, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, w); /* the reader still holds */
    assert_rc(rowlock_release(r), 0, b);
    assert_rc(rowlock_acquire(wx, 0, TU_LEASE_LONG), 0, w);
    assert_true(rowlock_lock_token(wx) > rowlock_lock_token(r) || rowlock_lock_token(r) == 0);
    assert_rc(rowlock_release(wx), 0, w);

    /* After the downgraded grant ended, the handle asks exclusive again. */
    assert_int_equal(rowlock_lock_mode(x), ROWLOCK_MODE_EXCLUSIVE);
    assert_rc(rowlock_acquire(x, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_acquire(r, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, b);
    assert_rc(rowlock_release(x), 0, a);
}

static void test_downgrade__readers_join_a_one_row_grant(void **state)
{
    (void)state;
    readers_join("join-one-row", 0);
}

static void test_downgrade__readers_join_a_holders_table_grant(void **state)
{
    (void)state;
    readers_join("join-multi", 1);
}

/* ---- a reader queued before a writer -------------------------------------- */

typedef struct queued {
    volatile int x_holds;       /* the downgrader still holds */
    volatile int reader_saw;    /* 1: the reader was granted while x held; 2: after */
    volatile int writer_saw;    /* the same for the writer */
    volatile uint64_t writer_token;
} queued;

static int queued_child(void *arg, int idx)
{
    queued *q = arg;
    rowlock_client *c = tu_child_client(NULL, TABLE);
    rowlock_lock *l = NULL;
    rowlock_lock_options o = ROWLOCK_LOCK_OPTIONS_INIT;
    if (c == NULL)
        return 10;
    o.mode = idx == 0 ? ROWLOCK_MODE_SHARED : ROWLOCK_MODE_EXCLUSIVE;
    if (rowlock_lock_new(&l, c, "queued", &o))
        return 11;
    if (rowlock_acquire(l, 30000, TU_LEASE_LONG)) {
        fprintf(stderr, "queued child %d: %s\n", idx, rowlock_client_errmsg(c));
        return 20;
    }
    int saw = __atomic_load_n(&q->x_holds, __ATOMIC_SEQ_CST) ? 1 : 2;
    if (idx == 0) {
        q->reader_saw = saw;
        /* Hold until the downgrader has seen us and let go. */
        int64_t t0 = tu_now_us();
        while (__atomic_load_n(&q->x_holds, __ATOMIC_SEQ_CST) && tu_ms_since(t0) < 30000)
            tu_sleep_ms(2);
    } else {
        q->writer_saw = saw;
        q->writer_token = rowlock_lock_token(l);
    }
    int rc = rowlock_release(l);
    rowlock_lock_free(l);
    rowlock_client_free(c);
    return rc ? 21 : 0;
}

static void test_downgrade__a_reader_queued_before_a_writer_gets_in(void **state)
{
    (void)state;
    make_multi("queued"); /* queue places (tickets) order the two waiters */
    queued *q = tu_shm(sizeof *q);
    rowlock_client *a = C();
    rowlock_lock *x = ML(a, "queued", ROWLOCK_MODE_EXCLUSIVE);
    assert_rc(rowlock_acquire(x, 0, TU_LEASE_LONG), 0, a);
    q->x_holds = 1;
    pid_t reader = tu_fork(queued_child, q, 0);
    await_waiters("queued", ROWLOCK_MODE_SHARED, 1);
    pid_t writer = tu_fork(queued_child, q, 1);
    await_waiters("queued", ROWLOCK_MODE_EXCLUSIVE, 1);
    assert_rc(rowlock_downgrade(x), 0, a);
    /* The reader (ahead of the writer) is granted while we hold it shared. */
    int64_t t0 = tu_now_us();
    while (q->reader_saw == 0 && tu_ms_since(t0) < 20000)
        tu_sleep_ms(2);
    assert_int_equal(q->reader_saw, 1);
    assert_int_equal(q->writer_saw, 0);
    assert_true(waiters("queued", ROWLOCK_MODE_EXCLUSIVE) >= 1); /* the writer still waits */
    __atomic_store_n(&q->x_holds, 0, __ATOMIC_SEQ_CST);
    assert_rc(rowlock_release(x), 0, a);
    assert_int_equal(tu_wait(reader, 30000), 0);
    assert_int_equal(tu_wait(writer, 30000), 0);
    assert_int_equal(q->writer_saw, 2);
    tu_shm_free(q, sizeof *q);
}

/* ---- no writer in between: a history check -------------------------------- */

#define HIST_WRITERS 3
#define HIST_ROUNDS 12

typedef struct hist {
    volatile int round;            /* the round writers may start (0: none yet) */
    volatile int stop;
    volatile int holding;          /* the downgrader holds the round's name */
    volatile int writers_in;       /* writers holding now */
    volatile int done;             /* writers finished with the current round */
    volatile int bad_writer;       /* a writer was granted while the downgrader held */
    volatile int bad_holder;       /* the downgrader saw a writer inside */
    volatile uint64_t min_writer_token[HIST_ROUNDS + 1];
    int multi;
} hist;

static void hist_name(char *out, size_t cap, int multi, int round)
{
    snprintf(out, cap, "hist-%s-%d", multi ? "multi" : "one-row", round);
}

static int hist_writer(void *arg, int idx)
{
    (void)idx;
    hist *h = arg;
    rowlock_client *c = tu_child_client(NULL, TABLE);
    if (c == NULL)
        return 10;
    for (int r = 1; r <= HIST_ROUNDS; r++) {
        int64_t t0 = tu_now_us();
        while (__atomic_load_n(&h->round, __ATOMIC_SEQ_CST) < r && !h->stop && tu_ms_since(t0) < 60000)
            tu_sleep_ms(1);
        if (h->stop || h->round < r)
            break;
        char name[64];
        hist_name(name, sizeof name, h->multi, r);
        rowlock_lock *l = NULL;
        if (rowlock_lock_new(&l, c, name, NULL))
            return 11;
        if (rowlock_acquire(l, 60000, TU_LEASE_LONG)) {
            fprintf(stderr, "writer: %s\n", rowlock_client_errmsg(c));
            return 20;
        }
        if (__atomic_load_n(&h->holding, __ATOMIC_SEQ_CST)) {
            __atomic_add_fetch(&h->bad_writer, 1, __ATOMIC_SEQ_CST);
            fprintf(stderr, "writer: granted '%s' (token %llu) while the downgraded holder held it\n", name,
                    (unsigned long long)rowlock_lock_token(l));
        }
        __atomic_add_fetch(&h->writers_in, 1, __ATOMIC_SEQ_CST);
        uint64_t t = rowlock_lock_token(l), m = h->min_writer_token[r];
        while ((m == 0 || t < m) && !__atomic_compare_exchange_n(&h->min_writer_token[r], &m, t, 0,
                                                                 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
        tu_sleep_ms(2);
        __atomic_sub_fetch(&h->writers_in, 1, __ATOMIC_SEQ_CST);
        int rc = rowlock_release(l);
        rowlock_lock_free(l);
        if (rc)
            return 21;
        __atomic_add_fetch(&h->done, 1, __ATOMIC_SEQ_CST);
    }
    rowlock_client_free(c);
    return 0;
}

static void no_writer_in_between(int multi)
{
    hist *h = tu_shm(sizeof *h);
    h->multi = multi;
    rowlock_client *a = C();
    pid_t pids[HIST_WRITERS];
    for (int i = 0; i < HIST_WRITERS; i++)
        pids[i] = tu_fork(hist_writer, h, i);
    for (int r = 1; r <= HIST_ROUNDS; r++) {
        char name[64];
        hist_name(name, sizeof name, multi, r);
        if (multi)
            make_multi(name);
        rowlock_lock *x = ML(a, name, ROWLOCK_MODE_EXCLUSIVE);
        assert_rc(rowlock_acquire(x, 0, TU_LEASE_LONG), 0, a);
        uint64_t tx = rowlock_lock_token(x);
        __atomic_store_n(&h->holding, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&h->done, 0, __ATOMIC_SEQ_CST);
        __atomic_store_n(&h->round, r, __ATOMIC_SEQ_CST);
        /* Every writer waits for the name before we downgrade it. */
        await_waiters(name, -1, HIST_WRITERS);
        assert_rc(rowlock_downgrade(x), 0, a);
        /* Held shared a while: a writer let in by the downgrade would be
         * inside by now. */
        for (int k = 0; k < 20; k++) {
            if (__atomic_load_n(&h->writers_in, __ATOMIC_SEQ_CST))
                h->bad_holder++;
            tu_sleep_ms(2);
        }
        __atomic_store_n(&h->holding, 0, __ATOMIC_SEQ_CST);
        assert_rc(rowlock_release(x), 0, a);
        int64_t t0 = tu_now_us();
        while (__atomic_load_n(&h->done, __ATOMIC_SEQ_CST) < HIST_WRITERS && tu_ms_since(t0) < 60000)
            tu_sleep_ms(2);
        assert_int_equal(h->done, HIST_WRITERS);
        assert_true(h->min_writer_token[r] > tx); /* every writer's grant after ours */
        tu_lock_free(x);
    }
    for (int i = 0; i < HIST_WRITERS; i++)
        assert_int_equal(tu_wait(pids[i], 60000), 0);
    fprintf(stderr, "%s: %d rounds, %d writers each: %d writer grants inside a downgraded hold, %d seen by it\n",
            multi ? "holders-table grants" : "one-row grants", HIST_ROUNDS, HIST_WRITERS, h->bad_writer,
            h->bad_holder);
    assert_int_equal(h->bad_writer, 0);
    assert_int_equal(h->bad_holder, 0);
    tu_shm_free(h, sizeof *h);
}

static void test_downgrade__no_writer_gets_in_one_row(void **state)
{
    (void)state;
    no_writer_in_between(0);
}

static void test_downgrade__no_writer_gets_in_holders_table(void **state)
{
    (void)state;
    no_writer_in_between(1);
}

/* ---- re-entrancy, upgrade, loss, strategies ------------------------------- */

static void test_downgrade__reentrant_holds_are_refused(void **state)
{
    (void)state;
    rowlock_client *a = C();
    rowlock_lock *x = ML(a, "reenter", ROWLOCK_MODE_EXCLUSIVE);
    rowlock_lock *y = ML(a, "reenter", ROWLOCK_MODE_EXCLUSIVE);
    assert_rc(rowlock_downgrade(x), ROWLOCK_EINVALID, a); /* holds nothing */
    assert_msg_has(a, "does not hold");
    assert_rc(rowlock_acquire(x, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_acquire(x, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_downgrade(x), ROWLOCK_EINVALID, a);
    assert_msg_has(a, "re-entries");
    assert_int_equal(rowlock_lock_mode(x), ROWLOCK_MODE_EXCLUSIVE);
    assert_rc(rowlock_release(x), 0, a);
    /* Another handle of the client holding it counts too. */
    assert_rc(rowlock_acquire(y, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_downgrade(x), ROWLOCK_EINVALID, a);
    assert_rc(rowlock_release(y), 0, a);
    assert_rc(rowlock_downgrade(x), 0, a);
    /* After the downgrade a re-entry through the handle is shared. */
    assert_rc(rowlock_acquire(x, 0, TU_LEASE_LONG), 0, a);
    assert_int_equal(rowlock_lock_held(x), 2);
    assert_int_equal(rowlock_lock_mode(x), ROWLOCK_MODE_SHARED);
    assert_rc(rowlock_release(x), 0, a);
    assert_rc(rowlock_release(x), 0, a);
}

static void test_downgrade__there_is_no_upgrade(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C();
    rowlock_lock *x = ML(a, "no-upgrade", ROWLOCK_MODE_EXCLUSIVE);
    rowlock_lock *x2 = ML(a, "no-upgrade", ROWLOCK_MODE_EXCLUSIVE);
    rowlock_lock *r = ML(b, "no-upgrade", ROWLOCK_MODE_SHARED);
    assert_rc(rowlock_acquire(x, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_downgrade(x), 0, a);
    assert_rc(rowlock_acquire(r, 0, TU_LEASE_LONG), 0, b);
    /* Back to exclusive while holding shared: refused at once, not a wait
     * (two readers upgrading would wait for each other for ever). */
    int64_t ms;
    TU_TIMED(ms, assert_rc(rowlock_acquire(x2, 5000, TU_LEASE_LONG), ROWLOCK_EUPGRADE, a));
    assert_true(ms < TU_FAST_MS);
    assert_msg_has(a, "no upgrade");
    /* Both still hold it shared. */
    assert_int_equal(rowlock_lock_held(x), 1);
    assert_rc(rowlock_renew(x, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_release(r), 0, b);
    assert_rc(rowlock_release(x), 0, a);
}

static void test_downgrade__a_lost_lock_is_not_downgraded(void **state)
{
    (void)state;
    rowlock_client *a = C(), *admin = C(), *w = C();
    rowlock_lock *x = ML(a, "lost", ROWLOCK_MODE_EXCLUSIVE);
    rowlock_lock *wx = ML(w, "lost", ROWLOCK_MODE_EXCLUSIVE);
    assert_rc(rowlock_acquire(x, 0, TU_LEASE_LONG), 0, a);
    rowlock_info in = ROWLOCK_INFO_INIT;
    assert_rc(rowlock_admin_force_release(admin, "lost", &in), 0, admin);
    assert_rc(rowlock_acquire(wx, 0, TU_LEASE_LONG), 0, w);
    assert_rc(rowlock_downgrade(x), ROWLOCK_ENOTOWNER, a);
    assert_int_equal(rowlock_lock_held(x), 0);
    /* The new holder is untouched. */
    assert_rc(rowlock_renew(wx, TU_LEASE_LONG), 0, w);
    assert_rc(rowlock_release(wx), 0, w);
    /* A lost holders-table grant as well. */
    make_multi("lost-multi");
    rowlock_lock *y = ML(a, "lost-multi", ROWLOCK_MODE_EXCLUSIVE);
    assert_rc(rowlock_acquire(y, 0, TU_LEASE_LONG), 0, a);
    unsigned n = 0;
    assert_rc(rowlock_admin_force_release_holder(admin, "lost-multi", NULL, &n), 0, admin);
    assert_rc(rowlock_downgrade(y), ROWLOCK_ENOTOWNER, a);
}

/*
 * A downgrade whose statement outlives the client's read timeout: it waits
 * on its entry's row lock, held by another transaction, and the client sees
 * a lost connection while the server session still runs the UPDATE. The
 * outcome is read only once that session is ended (KILL), so the answer
 * holds: "nothing changed" (ROWLOCK_EDB) leaves the entry exclusive after
 * the blocker commits, and a reader's try stays busy. Planted: the read
 * without ending the session: EDB, then the old session's UPDATE commits
 * the entry shared, and a reader is granted beside the holder told it is
 * still exclusive (fails).
 */
static void test_downgrade__a_downgrade_cut_by_the_read_timeout_keeps_its_answer(void **state)
{
    (void)state;
    rowlock_client *h = NULL;
    rowlock_client_options co = ROWLOCK_CLIENT_OPTIONS_INIT;
    co.defaults_file = tu_defaults_file();
    co.table = TABLE;
    co.read_timeout_ms = 1000;
    assert_int_equal(rowlock_client_new(&h), 0);
    tu_register_client(h);
    assert_rc(rowlock_client_connect(h, &co), 0, h);
    make_multi("dg-cut");
    rowlock_lock *x = ML(h, "dg-cut", ROWLOCK_MODE_EXCLUSIVE);
    assert_rc(rowlock_acquire(x, 0, TU_LEASE_LONG), 0, h);
    void *blocker = tu_mysql_connect(tu_defaults_file(), 0);
    assert_non_null(blocker);
    assert_int_equal(tu_mysql_query(blocker, "START TRANSACTION"), 0);
    assert_int_equal(tu_mysql_query(blocker, "SELECT * FROM `" TABLE "_hold` WHERE name = 'dg-cut' FOR UPDATE"), 0);
    const int64_t t0 = tu_now_us();
    const int rc = rowlock_downgrade(x);
    const double took_ms = tu_ms_since(t0);
    assert_int_equal(tu_mysql_query(blocker, "COMMIT"), 0);
    tu_mysql_close(blocker);
    tu_sleep_ms(300); /* an UPDATE still waiting in the server commits now */
    int ok = 0;
    const long long mode = tu_sql_int(tu_defaults_file(), &ok,
                                      "SELECT IFNULL(MAX(mode), -1) FROM `" TABLE "_hold` WHERE name = 'dg-cut' AND owner = '%s'",
                                      rowlock_client_owner(h));
    rowlock_client *r = C();
    rowlock_lock *rl = ML(r, "dg-cut", ROWLOCK_MODE_SHARED);
    const int rrc = rowlock_acquire(rl, 0, TU_LEASE_LONG);
    if (rrc == 0)
        assert_rc(rowlock_release(rl), 0, r);
    print_message("  downgrade: %s after %.0f ms; the entry's mode then: %lld; a reader's try: %s\n",
                  rowlock_error_name(rc), took_ms, mode, rowlock_error_name(rrc));
    assert_true(ok);
    if (rc == 0) { /* the UPDATE got through before the timeout: shared, readers join */
        assert_int_equal(mode, ROWLOCK_MODE_SHARED);
        assert_rc(rrc, 0, r);
    } else {
        assert_true(took_ms >= 900); /* the read timeout cut it, as meant */
        assert_int_equal(rc, ROWLOCK_EDB);
        assert_int_equal(mode, ROWLOCK_MODE_EXCLUSIVE);
        assert_int_equal(rrc, ROWLOCK_EBUSY);
        assert_rc(rowlock_release(x), 0, h);
    }
}

static void test_downgrade__strategies_that_cannot_refuse(void **state)
{
    (void)state;
    rowlock_client *a = C();
    rowlock_lock *f = tu_lock(a, "fu-down", ROWLOCK_STRATEGY_FOR_UPDATE);
    assert_rc(rowlock_acquire(f, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_downgrade(f), ROWLOCK_EUNSUPPORTED, a);
    assert_msg_has(a, "for-update");
    assert_rc(rowlock_release(f), 0, a);
    rowlock_lock *o = tu_lock(a, "opt-down", ROWLOCK_STRATEGY_OPTIMISTIC);
    assert_rc(rowlock_acquire(o, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_downgrade(o), ROWLOCK_EUNSUPPORTED, a);
    assert_msg_has(a, "no shared mode");
    assert_rc(rowlock_release(o), 0, a);
}

/* ---- the keeper ------------------------------------------------------------------ */

static void kept(const char *name, int multi)
{
    if (multi)
        make_multi(name);
    rowlock_client *a = C(), *b = C(), *w = C();
    rowlock_lock *x = ML(a, name, ROWLOCK_MODE_EXCLUSIVE);
    rowlock_lock *r = ML(b, name, ROWLOCK_MODE_SHARED);
    rowlock_lock *wx = ML(w, name, ROWLOCK_MODE_EXCLUSIVE);
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    assert_rc(rowlock_acquire(x, 0, 1500), 0, a);
    assert_rc(rowlock_keep(x, &ko), 0, a);
    assert_rc(rowlock_downgrade(x), 0, a);
    tu_sleep_ms(4000); /* more than two leases: only renewals keep it */
    rowlock_keep_info ki = ROWLOCK_KEEP_INFO_INIT;
    assert_rc(rowlock_keep_status(x, &ki), 0, a);
    assert_int_equal(ki.state, ROWLOCK_KEEP_HELD);
    assert_true(ki.renewals >= 2);
    assert_true(ki.token == rowlock_lock_token(x));
    assert_rc(rowlock_acquire(wx, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, w);
    assert_rc(rowlock_acquire(r, 0, TU_LEASE_LONG), 0, b);
    assert_rc(rowlock_release(r), 0, b);
    assert_rc(rowlock_release(x), 0, a); /* still ours after four seconds */
    assert_rc(rowlock_acquire(wx, 0, TU_LEASE_LONG), 0, w);
    assert_rc(rowlock_release(wx), 0, w);
}

static void test_downgrade__a_kept_one_row_lock_stays_kept(void **state)
{
    (void)state;
    kept("kept-one-row", 0);
}

static void test_downgrade__a_kept_holders_table_lock_stays_kept(void **state)
{
    (void)state;
    kept("kept-multi", 1);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_downgrade__readers_join_a_one_row_grant),
        TU_TEST(test_downgrade__readers_join_a_holders_table_grant),
        TU_TEST(test_downgrade__a_reader_queued_before_a_writer_gets_in),
        TU_TEST(test_downgrade__no_writer_gets_in_one_row),
        TU_TEST(test_downgrade__no_writer_gets_in_holders_table),
        TU_TEST(test_downgrade__reentrant_holds_are_refused),
        TU_TEST(test_downgrade__there_is_no_upgrade),
        TU_TEST(test_downgrade__a_lost_lock_is_not_downgraded),
        TU_TEST(test_downgrade__a_downgrade_cut_by_the_read_timeout_keeps_its_answer),
        TU_TEST(test_downgrade__strategies_that_cannot_refuse),
        TU_TEST(test_downgrade__a_kept_one_row_lock_stays_kept),
        TU_TEST(test_downgrade__a_kept_holders_table_lock_stays_kept),
    };
    return tu_main("downgrade", tests, sizeof tests / sizeof tests[0], TABLE, argc > 1 ? argv[1] : NULL);
}
