/*
 * Several names at once (rowlock_acquire_many, rowlock_release_many), run
 * once per strategy: all or none, one global order (overlapping sets from
 * many processes never deadlock and never grant a name twice), one
 * deadline, names held while waiting for another keep their leases, a
 * timeout or a crash mid-acquire leaves nothing that outlives its lease.
 *
 * for-update: a for-update handle must be the only handle of its set on its
 * client, so every set here gives each for-update name a client of its own
 * (mk_set); the lease strategies use one client for the whole set, as an
 * application would.
 */
#include "testutil.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static rowlock_strategy S;
static const char *SN;
static char TABLE[64];

static int is_fu(void)
{
    return S == ROWLOCK_STRATEGY_FOR_UPDATE;
}

/* A caller's set: handles for names[0..k) on one client (lease strategies)
 * or one client each (for-update). Registered with the test harness. */
typedef struct set {
    rowlock_client *c[8];
    rowlock_lock *l[8];
    size_t n;
} set;

static void mk_set(set *s, const char *const *names, size_t k)
{
    memset(s, 0, sizeof *s);
    s->n = k;
    for (size_t i = 0; i < k; i++) {
        s->c[i] = (i == 0 || is_fu()) ? tu_client(TABLE) : s->c[0];
        s->l[i] = tu_lock(s->c[i], names[i], S);
    }
}

/* The client that holds the message for handle i. */
static rowlock_client *cl(const set *s, size_t i)
{
    return s->c[i < s->n ? i : 0];
}

/* Another owner can take `name` at once: nothing holds it. */
static void expect_free_name(const char *name)
{
    rowlock_client *o = tu_client(TABLE);
    rowlock_lock *l = tu_lock(o, name, S);
    int rc = rowlock_acquire(l, 0, TU_LEASE_LONG);
    if (rc != 0)
        fail_msg("'%s' should be free: %s: %s", name, rowlock_error_name(rc), rowlock_client_errmsg(o));
    assert_rc(rowlock_release(l), 0, o);
    tu_lock_free(l);
    tu_client_free(o);
}

static void expect_busy_name(const char *name)
{
    rowlock_client *o = tu_client(TABLE);
    rowlock_lock *l = tu_lock(o, name, S);
    int rc = rowlock_acquire(l, 0, TU_LEASE_LONG);
    if (rc != ROWLOCK_EBUSY)
        fail_msg("'%s' should be held: %s: %s", name, rowlock_error_name(rc), rowlock_client_errmsg(o));
    tu_lock_free(l);
    tu_client_free(o);
}

/* Rows of the table that name this owner with a live lease (lease
 * strategies: for-update writes no owner). */
static long long live_rows_of(rowlock_client *c)
{
    int ok = 0;
    long long n = tu_sql_int(NULL, &ok,
                             "SELECT COUNT(*) FROM `%s` WHERE owner = '%s' AND expires_at > UTC_TIMESTAMP(6)",
                             TABLE, rowlock_client_owner(c));
    assert_true(ok);
    return n;
}

/* ---- basics ----------------------------------------------------------------- */

static void test_acquire_many__grants_every_name_and_release_many_frees_them(void **state)
{
    (void)state;
    static const char *const names[] = { "m-basic-c", "m-basic-a", "m-basic-b" };
    set s;
    mk_set(&s, names, 3);
    size_t failed = 99;
    assert_rc(rowlock_acquire_many(s.l, 3, 0, TU_LEASE_LONG, &failed), 0, s.c[0]);
    assert_int_equal(failed, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(rowlock_lock_held(s.l[i]), 1);
        assert_true(rowlock_lock_token(s.l[i]) > 0);
        expect_busy_name(names[i]);
    }
    assert_rc(rowlock_release_many(s.l, 3, &failed), 0, s.c[0]);
    assert_int_equal(failed, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(rowlock_lock_held(s.l[i]), 0);
        expect_free_name(names[i]);
    }
    /* An empty set: nothing to do. */
    assert_int_equal(rowlock_acquire_many(NULL, 0, 0, 0, NULL), 0);
    assert_int_equal(rowlock_release_many(NULL, 0, NULL), 0);
}

static void test_acquire_many__one_busy_name_grants_none_and_says_which(void **state)
{
    (void)state;
    static const char *const names[] = { "m-none-a", "m-none-b", "m-none-c" };
    set s;
    mk_set(&s, names, 3);
    rowlock_client *o = tu_client(TABLE);
    rowlock_lock *ob = tu_lock(o, "m-none-b", S);
    assert_rc(rowlock_acquire(ob, 0, TU_LEASE_LONG), 0, o);
    size_t failed = 99;
    assert_rc(rowlock_acquire_many(s.l, 3, 0, TU_LEASE_LONG, &failed), ROWLOCK_EBUSY, cl(&s, 1));
    assert_int_equal(failed, 1);
    assert_msg_has(cl(&s, 1), "acquire_many (3 names");
    assert_msg_has(cl(&s, 1), "m-none-b");
    assert_msg_has(cl(&s, 1), "released the 1 acquired before it");
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(rowlock_lock_held(s.l[i]), 0);
    expect_free_name("m-none-a"); /* granted first, then given back */
    expect_free_name("m-none-c"); /* never reached */
    if (!is_fu())
        assert_int_equal(live_rows_of(s.c[0]), 0);
    assert_rc(rowlock_release(ob), 0, o);
    /* Free now: the same set is granted. */
    assert_rc(rowlock_acquire_many(s.l, 3, 0, TU_LEASE_LONG, &failed), 0, s.c[0]);
    assert_rc(rowlock_release_many(s.l, 3, NULL), 0, s.c[0]);
}

static void test_acquire_many__a_timeout_leaves_nothing_held(void **state)
{
    (void)state;
    static const char *const names[] = { "m-to-z", "m-to-y", "m-to-x", "m-to-w" };
    set s;
    mk_set(&s, names, 4);
    rowlock_client *o = tu_client(TABLE);
    rowlock_lock *oy = tu_lock(o, "m-to-y", S); /* the third in name order */
    assert_rc(rowlock_acquire(oy, 0, TU_LEASE_LONG), 0, o);
    size_t failed = 99;
    assert_rc(rowlock_acquire_many(s.l, 4, 400, TU_LEASE_LONG, &failed), ROWLOCK_EBUSY, cl(&s, 1));
    assert_int_equal(failed, 1);
    assert_msg_has(cl(&s, 1), "'m-to-y' is name 3 in name order");
    assert_msg_has(cl(&s, 1), "released the 2 acquired before it");
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(rowlock_lock_held(s.l[i]), 0);
    /* The table: no row names us, and every other name is free. */
    if (!is_fu())
        assert_int_equal(live_rows_of(s.c[0]), 0);
    expect_free_name("m-to-w");
    expect_free_name("m-to-x");
    expect_free_name("m-to-z");
    assert_rc(rowlock_release(oy), 0, o);
}

static void test_acquire_many__is_reentrant_per_name_and_gives_back_only_its_count(void **state)
{
    (void)state;
    static const char *const names[] = { "m-re-a", "m-re-b" };
    set s;
    mk_set(&s, names, 2);
    assert_rc(rowlock_acquire(s.l[0], 0, TU_LEASE_LONG), 0, s.c[0]);
    uint64_t tok = rowlock_lock_token(s.l[0]);
    assert_rc(rowlock_acquire_many(s.l, 2, 0, TU_LEASE_LONG, NULL), 0, s.c[0]);
    assert_int_equal(rowlock_lock_held(s.l[0]), 2);
    assert_true(rowlock_lock_token(s.l[0]) == tok);
    assert_int_equal(rowlock_lock_held(s.l[1]), 1);
    assert_rc(rowlock_release_many(s.l, 2, NULL), 0, s.c[0]);
    assert_int_equal(rowlock_lock_held(s.l[0]), 1);
    assert_int_equal(rowlock_lock_held(s.l[1]), 0);
    expect_busy_name("m-re-a");
    expect_free_name("m-re-b");

    /* A failed set gives back the re-entry it added, not the earlier hold. */
    rowlock_client *o = tu_client(TABLE);
    rowlock_lock *ob = tu_lock(o, "m-re-b", S);
    assert_rc(rowlock_acquire(ob, 0, TU_LEASE_LONG), 0, o);
    assert_rc(rowlock_acquire_many(s.l, 2, 0, TU_LEASE_LONG, NULL), ROWLOCK_EBUSY, cl(&s, 1));
    assert_int_equal(rowlock_lock_held(s.l[0]), 1);
    assert_true(rowlock_lock_token(s.l[0]) == tok);
    expect_busy_name("m-re-a");
    assert_rc(rowlock_release(s.l[0]), 0, s.c[0]);
    expect_free_name("m-re-a");
    assert_rc(rowlock_release(ob), 0, o);
}

static void test_acquire_many__refuses_bad_sets_before_acquiring_anything(void **state)
{
    (void)state;
    rowlock_client *c = tu_client(TABLE);
    rowlock_lock *a = tu_lock(c, "m-bad-a", S), *b = tu_lock(c, "m-bad-b", S);
    rowlock_lock *a2 = tu_lock(is_fu() ? tu_client(TABLE) : c, "m-bad-a", S);
    size_t failed = 99;

    rowlock_lock *dup[] = { a, b, a };
    assert_rc(rowlock_acquire_many(dup, 3, 0, TU_LEASE_LONG, &failed), ROWLOCK_EINVALID, c);
    assert_msg_has(c, "in the set twice");
    assert_int_equal(failed, 2);
    rowlock_lock *same_name[] = { a2, b, a };
    assert_int_equal(rowlock_acquire_many(same_name, 3, 0, TU_LEASE_LONG, &failed), ROWLOCK_EINVALID);
    assert_int_equal(failed, 2);
    rowlock_lock *with_null[] = { a, NULL };
    assert_rc(rowlock_acquire_many(with_null, 2, 0, TU_LEASE_LONG, &failed), ROWLOCK_EINVALID, c);
    assert_int_equal(failed, 1);
    assert_msg_has(c, "handle 1 of the set is NULL");
    rowlock_lock *ab[] = { a, b };
    if (is_fu()) {
        /* Two names on one client: one transaction cannot hold both apart. */
        assert_rc(rowlock_acquire_many(ab, 2, 0, TU_LEASE_LONG, &failed), ROWLOCK_EUNSUPPORTED, c);
        assert_msg_has(c, "a client of its own");
        /* Nor a lease name beside a for-update one on its client. */
        rowlock_lock *ins = tu_lock(c, "m-bad-i", ROWLOCK_STRATEGY_INSERT);
        rowlock_lock *mixed[] = { ins, a };
        assert_rc(rowlock_acquire_many(mixed, 2, 0, TU_LEASE_LONG, &failed), ROWLOCK_EUNSUPPORTED, c);
    }
    assert_rc(rowlock_acquire_many(ab + 1, 1, -5, TU_LEASE_LONG, &failed), ROWLOCK_EINVALID, c);
    assert_msg_has(c, "negative");
    assert_int_equal(rowlock_acquire_many(NULL, 2, 0, TU_LEASE_LONG, &failed), ROWLOCK_EINVALID);
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(rowlock_lock_held(ab[i]), 0);
    expect_free_name("m-bad-a");
    expect_free_name("m-bad-b");
    /* release_many of handles that hold nothing: refused, each tried. */
    if (!is_fu()) {
        assert_rc(rowlock_release_many(ab, 2, &failed), ROWLOCK_EINVALID, c);
        assert_int_equal(failed, 1); /* the first in reverse name order */
    }
}

/* ---- names held while waiting for another keep their leases ------------------ */

#define WL_LEASE 1500

typedef struct wl_shared {
    int stop;      /* atomic: the parent's set is granted, stop probing */
    int stole;     /* atomic: the prober got 'a' while the set held it */
} wl_shared;

static tu_pipe wl_ready;

/* Holds 'm-wl-b' for three of the set's leases, then releases it. The
 * sleep is the test's condition (a wait longer than the lease), not a
 * synchronisation. */
static int wl_holder(void *arg, int idx)
{
    (void)arg;
    (void)idx;
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    int setup = tu_child_lock(TABLE, "m-wl-b", S, &c, &l);
    if (setup)
        return setup;
    if (rowlock_acquire(l, 0, TU_LEASE_LONG) != 0)
        return 20;
    tu_signal(&wl_ready, 'H');
    tu_sleep_ms(3 * WL_LEASE);
    return rowlock_release(l) == 0 ? 0 : 21;
}

/* Once it has seen 'm-wl-a' held (by the set: nobody else takes it), tries
 * to take it until told to stop: it must never get it. */
static int wl_prober(void *arg, int idx)
{
    (void)idx;
    wl_shared *sh = arg;
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    int seen_held = 0;
    int setup = tu_child_lock(TABLE, "m-wl-a", S, &c, &l);
    if (setup)
        return setup;
    while (!__atomic_load_n(&sh->stop, __ATOMIC_SEQ_CST)) {
        int rc = rowlock_acquire(l, seen_held ? 100 : 0, WL_LEASE);
        if (rc == 0) {
            if (rowlock_release(l) != 0)
                return 22;
            if (seen_held) {
                __atomic_store_n(&sh->stole, 1, __ATOMIC_SEQ_CST);
                return 20;
            }
            tu_sleep_ms(10); /* before the set's grant: let it in */
            continue;
        }
        if (rc != ROWLOCK_EBUSY)
            return 21;
        seen_held = 1;
    }
    return 0;
}

static void test_acquire_many__names_held_while_waiting_keep_their_leases(void **state)
{
    (void)state;
    static const char *const names[] = { "m-wl-b", "m-wl-a" };
    set s;
    mk_set(&s, names, 2);
    wl_shared *sh = tu_shm(sizeof *sh);
    /* The rows exist before the prober and the set race: a first use
     * creates the row in a statement of its own (for-update: an INSERT
     * IGNORE committed before the lock), and a try that met that insert's
     * lock said busy while nobody held the name; its next try could then
     * be granted before the set: a "stolen" name that never was (seen
     * once in a ctest -j2 run). */
    expect_free_name("m-wl-a");
    tu_pipe_open(&wl_ready);
    pid_t holder = tu_fork(wl_holder, NULL, 0);
    assert_int_equal(tu_await(&wl_ready, 60000), 'H');
    pid_t prober = tu_fork(wl_prober, sh, 1);
    /* The set gets 'a' at once and waits three leases for 'b', while the
     * prober tries 'a': without renewals 'a' would end after one lease (a
     * for-update session: after one lease without a statement). */
    int64_t t0 = tu_now_us();
    assert_rc(rowlock_acquire_many(s.l, 2, TU_LEASE_LONG, WL_LEASE, NULL), 0, s.c[0]);
    double waited = tu_ms_since(t0);
    __atomic_store_n(&sh->stop, 1, __ATOMIC_SEQ_CST);
    assert_int_equal(tu_wait(prober, 60000), 0);
    assert_int_equal(__atomic_load_n(&sh->stole, __ATOMIC_SEQ_CST), 0);
    assert_int_equal(tu_wait(holder, 60000), 0);
    print_message("waited %.1f s with a lease of %.1f s\n", waited / 1000, WL_LEASE / 1000.0);
    assert_true(waited >= 2 * WL_LEASE); /* the case the test is about did happen */
    /* Both still ours, with leases left. */
    assert_rc(rowlock_renew(s.l[0], WL_LEASE), 0, s.c[0]);
    assert_rc(rowlock_renew(s.l[1], WL_LEASE), 0, cl(&s, 1));
    assert_rc(rowlock_release_many(s.l, 2, NULL), 0, s.c[0]);
    tu_pipe_close(&wl_ready);
    tu_shm_free(sh, sizeof *sh);
}

static void test_acquire_many__waits_for_a_busy_name_and_gets_all_when_it_frees(void **state)
{
    (void)state;
    static const char *const names[] = { "m-wait-b", "m-wait-a" };
    set s;
    mk_set(&s, names, 2);
    rowlock_client *o = tu_client(TABLE);
    rowlock_lock *ob = tu_lock(o, "m-wait-b", S);
    assert_rc(rowlock_acquire(ob, 0, 1000), 0, o);
    /* The holder's lease ends (it never renews): a waiting set gets in. */
    assert_rc(rowlock_acquire_many(s.l, 2, TU_LEASE_LONG, TU_LEASE_LONG, NULL), 0, s.c[0]);
    assert_int_equal(rowlock_lock_held(s.l[0]) + rowlock_lock_held(s.l[1]), 2);
    assert_rc(rowlock_release_many(s.l, 2, NULL), 0, s.c[0]);
}

/* ---- a crash mid-acquire ---------------------------------------------------- */

#define CR_LEASE 2000

static int cr_child(void *arg, int idx)
{
    (void)arg;
    (void)idx;
    /* The set {m-cr-a, m-cr-b}: gets 'a', waits for 'b' (held by the parent)
     * until it is killed. */
    rowlock_client *c[2] = { NULL, NULL };
    rowlock_lock *l[2] = { NULL, NULL };
    static const char *const names[] = { "m-cr-b", "m-cr-a" };
    for (int i = 0; i < 2; i++) {
        c[i] = (i == 0 || is_fu()) ? tu_child_client(tu_defaults_file_or_null(), TABLE) : c[0];
        if (c[i] == NULL || rowlock_lock_new(&l[i], c[i], names[i], &(rowlock_lock_options){
                                                 ROWLOCK_LOCK_OPTIONS_VERSION, S, ROWLOCK_MODE_EXCLUSIVE, 0 }) != 0)
            return 10;
    }
    int rc = rowlock_acquire_many(l, 2, ROWLOCK_WAIT_FOREVER, CR_LEASE, NULL);
    return rc == 0 ? 30 : 31; /* never: it is killed while waiting */
}

static void test_acquire_many__a_process_killed_mid_acquire_leaves_nothing_past_its_lease(void **state)
{
    (void)state;
    rowlock_client *o = tu_client(TABLE);
    rowlock_lock *ob = tu_lock(o, "m-cr-b", S);
    assert_rc(rowlock_acquire(ob, 0, TU_LEASE_LONG), 0, o);
    pid_t p = tu_fork(cr_child, NULL, 0);
    /* The event: the child holds 'a' (a probe from another owner is busy). */
    rowlock_client *q = tu_client(TABLE);
    rowlock_lock *qa = tu_lock(q, "m-cr-a", S);
    int64_t t0 = tu_now_us();
    for (;;) {
        int rc = rowlock_acquire(qa, 0, TU_LEASE_LONG);
        if (rc == ROWLOCK_EBUSY)
            break;
        assert_rc(rc, 0, q); /* not yet taken by the child: give it back */
        assert_rc(rowlock_release(qa), 0, q);
        if (tu_ms_since(t0) > 60000)
            fail_msg("the child never got 'm-cr-a'");
        tu_sleep_ms(20);
    }
    /* Killed while it holds 'a' and waits for 'b'. */
    assert_int_equal(kill(p, SIGKILL), 0);
    assert_int_equal(tu_wait(p, 60000), 128 + SIGKILL);
    /* 'a' ends with the child's lease at the latest (for-update: with its
     * session), and nothing of the child outlives it: a waiter gets it
     * within a lease and a slack. */
    assert_rc(rowlock_acquire(qa, CR_LEASE + 3 * TU_SLACK_MS + 1000, TU_LEASE_LONG), 0, q);
    assert_rc(rowlock_release(qa), 0, q);
    assert_rc(rowlock_release(ob), 0, o);
    expect_free_name("m-cr-a");
    expect_free_name("m-cr-b");
}

/* ---- overlapping sets from many processes ------------------------------------ */

#define OV_PROCS 6
#define OV_ROUNDS 40
#define OV_NAMES 5

typedef struct ov_shared {
    volatile int counter[OV_NAMES]; /* deliberately updated non-atomically */
    int inside[OV_NAMES];           /* atomic: holders inside, per name */
    int granted[OV_NAMES];          /* atomic: grants per name */
    int overlaps;                   /* atomic */
} ov_shared;

static tu_pipe ov_ready, ov_go;

static void sleep_us(long us)
{
    struct timespec ts = { 0, us * 1000 };
    nanosleep(&ts, NULL);
}

static int ov_child(void *arg, int idx)
{
    ov_shared *sh = arg;
    unsigned int seed = (unsigned int)getpid() * 2654435761u + (unsigned int)idx;
    rowlock_client *c[OV_NAMES] = { NULL };
    rowlock_lock *l[OV_NAMES] = { NULL };
    char name[32];
    for (int i = 0; i < OV_NAMES; i++) {
        c[i] = (i == 0 || is_fu()) ? tu_child_client(tu_defaults_file_or_null(), TABLE) : c[0];
        snprintf(name, sizeof name, "m-ov-%d", i);
        rowlock_lock_options lo = ROWLOCK_LOCK_OPTIONS_INIT;
        lo.strategy = S;
        if (c[i] == NULL || rowlock_lock_new(&l[i], c[i], name, &lo) != 0)
            return 10;
    }
    tu_signal(&ov_ready, 'R');
    if (tu_await(&ov_go, 120000) != 'G')
        return 12;
    for (int r = 0; r < OV_ROUNDS; r++) {
        /* A set of 2 or 3 names in a random order (the caller's order must
         * not matter). */
        int k = 2 + (int)(rand_r(&seed) % 2), pick[OV_NAMES];
        for (int i = 0; i < OV_NAMES; i++)
            pick[i] = i;
        for (int i = OV_NAMES - 1; i > 0; i--) {
            int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), t = pick[i];
            pick[i] = pick[j];
            pick[j] = t;
        }
        rowlock_lock *mine[OV_NAMES];
        for (int i = 0; i < k; i++)
            mine[i] = l[pick[i]];
        size_t failed = 0;
        /* Bounded, so a deadlock ends the child with a message rather than
         * hanging the suite until its timeout. */
        int rc = rowlock_acquire_many(mine, (size_t)k, 60000, TU_LEASE_LONG, &failed);
        if (rc != 0) {
            fprintf(stderr, "ov child %d round %d: acquire_many: %s: %s\n", idx, r, rowlock_error_name(rc),
                    rowlock_client_errmsg(c[pick[failed < (size_t)k ? failed : 0]]));
            return 13;
        }
        for (int i = 0; i < k; i++) {
            int n = pick[i];
            if (__atomic_fetch_add(&sh->inside[n], 1, __ATOMIC_SEQ_CST) != 0)
                __atomic_fetch_add(&sh->overlaps, 1, __ATOMIC_SEQ_CST);
            __atomic_fetch_add(&sh->granted[n], 1, __ATOMIC_SEQ_CST);
        }
        for (int i = 0; i < k; i++) {
            int n = pick[i];
            int v = sh->counter[n];           /* read ... */
            sleep_us(100 + (long)(rand_r(&seed) % 400));
            sh->counter[n] = v + 1;           /* ... sleep, write: lost updates unless exclusive */
        }
        for (int i = 0; i < k; i++)
            __atomic_fetch_sub(&sh->inside[pick[i]], 1, __ATOMIC_SEQ_CST);
        rc = rowlock_release_many(mine, (size_t)k, &failed);
        if (rc != 0) {
            fprintf(stderr, "ov child %d round %d: release_many: %s\n", idx, r, rowlock_error_name(rc));
            return 14;
        }
    }
    for (int i = 0; i < OV_NAMES; i++)
        rowlock_lock_free(l[i]);
    for (int i = 0; i < OV_NAMES; i++)
        if (i == 0 || is_fu())
            rowlock_client_free(c[i]);
    return 0;
}

static void test_acquire_many__overlapping_sets_from_6_processes_never_deadlock_or_overlap(void **state)
{
    (void)state;
    ov_shared *sh = tu_shm(sizeof *sh);
    pid_t pids[OV_PROCS];
    int bad = 0;
    int64_t t0 = tu_now_us();
    tu_pipe_open(&ov_ready);
    tu_pipe_open(&ov_go);
    for (int i = 0; i < OV_PROCS; i++)
        pids[i] = tu_fork(ov_child, sh, i);
    for (int i = 0; i < OV_PROCS; i++)
        if (tu_await(&ov_ready, 60000) != 'R')
            fail_msg("only %d of %d processes connected", i, OV_PROCS);
    for (int i = 0; i < OV_PROCS; i++)
        tu_signal(&ov_go, 'G');
    for (int i = 0; i < OV_PROCS; i++) {
        int st = tu_wait(pids[i], 600000);
        if (st != 0) {
            print_error("process %d exited with %d\n", i, st);
            bad++;
        }
    }
    int total = 0;
    for (int n = 0; n < OV_NAMES; n++)
        total += sh->granted[n];
    print_message("%d sets (%d name grants) in %.1f s\n", OV_PROCS * OV_ROUNDS, total, tu_ms_since(t0) / 1000);
    assert_int_equal(bad, 0);
    assert_int_equal(sh->overlaps, 0);
    for (int n = 0; n < OV_NAMES; n++) {
        if (sh->counter[n] != sh->granted[n])
            fail_msg("name %d: counter %d after %d grants (a lost update: two holders at once)", n,
                     sh->counter[n], sh->granted[n]);
    }
    assert_true(total >= 2 * OV_PROCS * OV_ROUNDS);
    tu_pipe_close(&ov_ready);
    tu_pipe_close(&ov_go);
    tu_shm_free(sh, sizeof *sh);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_acquire_many__grants_every_name_and_release_many_frees_them),
        TU_TEST(test_acquire_many__one_busy_name_grants_none_and_says_which),
        TU_TEST(test_acquire_many__a_timeout_leaves_nothing_held),
        TU_TEST(test_acquire_many__is_reentrant_per_name_and_gives_back_only_its_count),
        TU_TEST(test_acquire_many__refuses_bad_sets_before_acquiring_anything),
        TU_TEST(test_acquire_many__names_held_while_waiting_keep_their_leases),
        TU_TEST(test_acquire_many__waits_for_a_busy_name_and_gets_all_when_it_frees),
        TU_TEST(test_acquire_many__a_process_killed_mid_acquire_leaves_nothing_past_its_lease),
        TU_TEST(test_acquire_many__overlapping_sets_from_6_processes_never_deadlock_or_overlap),
    };
    char group[64];
    if (argc < 2 || rowlock_strategy_parse(&S, argv[1]) != 0) {
        fprintf(stderr, "usage: %s insert|for-update|optimistic [test-filter]\n", argv[0]);
        return 2;
    }
    SN = rowlock_strategy_name(S);
    snprintf(TABLE, sizeof TABLE, "t_many_%s", is_fu() ? "for_update" : SN);
    snprintf(group, sizeof group, "acquire_many (%s)", SN);
    return tu_main(group, tests, sizeof tests / sizeof tests[0], TABLE, argc > 2 ? argv[2] : NULL);
}
