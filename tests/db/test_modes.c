/*
 * Shared locks and counting semaphores (issue 17), per strategy that has a
 * shared mode: readers coexist, a writer excludes, a writer is not starved
 * by later readers (FIFO across modes), tokens order a writer after the
 * readers before it; semaphores (insert) never exceed N; a schema 2 table
 * migrates with live locks; optimistic refuses shared.
 *
 *     test_modes insert|for-update [test-filter]
 */
#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static rowlock_strategy S;
static char TABLE[64];

static rowlock_lock *ML(rowlock_client *c, const char *name, rowlock_mode mode, unsigned permits)
{
    return tu_lock_mode(c, name, S, mode, permits);
}

static rowlock_client *C(void)
{
    return tu_client(TABLE);
}

/* Run under the seam build's forced cluster rule (db_modes_insert_cluster_rule)? */
static int cluster_rule(void)
{
    const char *rule = getenv("ROWLOCK_LEASE_RULE");
    return rule && strcmp(rule, "cluster") == 0;
}

/* A child's handle with a mode. */
static int child_lock(const char *name, rowlock_mode mode, unsigned permits, rowlock_client **c, rowlock_lock **l)
{
    rowlock_lock_options o = ROWLOCK_LOCK_OPTIONS_INIT;
    *l = NULL;
    *c = tu_child_client(NULL, TABLE);
    if (*c == NULL)
        return 10;
    o.strategy = S;
    o.mode = mode;
    o.permits = permits;
    return rowlock_lock_new(l, *c, name, &o) ? 11 : 0;
}

/* ---- readers and writers -------------------------------------------------- */

static void test_shared__readers_coexist(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C(), *d = C();
    rowlock_lock *ra = ML(a, "coexist", ROWLOCK_MODE_SHARED, 0);
    rowlock_lock *rb = ML(b, "coexist", ROWLOCK_MODE_SHARED, 0);
    rowlock_lock *rd = ML(d, "coexist", ROWLOCK_MODE_SHARED, 0);
    assert_rc(rowlock_acquire(ra, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_acquire(rb, 0, TU_LEASE_LONG), 0, b);
    assert_rc(rowlock_acquire(rd, 0, TU_LEASE_LONG), 0, d);
    if (S == ROWLOCK_STRATEGY_INSERT && !cluster_rule()) {
        /* The first reader found no writer and opened the name to readers:
         * the others joined it, with its token (one statement each). */
        assert_true(rowlock_lock_token(ra) != 0);
        assert_true(rowlock_lock_token(rb) == rowlock_lock_token(ra));
        assert_true(rowlock_lock_token(rd) == rowlock_lock_token(ra));
    } else {
        assert_true(rowlock_lock_token(ra) != 0 && rowlock_lock_token(rb) > rowlock_lock_token(ra));
        assert_true(rowlock_lock_token(rd) > rowlock_lock_token(rb));
    }
    assert_int_equal(rowlock_lock_mode(ra), ROWLOCK_MODE_SHARED);
    /* Re-entry and renew per holder. */
    assert_rc(rowlock_acquire(rb, 0, TU_LEASE_LONG), 0, b);
    assert_int_equal(rowlock_lock_held(rb), 2);
    assert_rc(rowlock_renew(rb, TU_LEASE_LONG), 0, b);
    assert_rc(rowlock_release(rb), 0, b);
    assert_rc(rowlock_release(rb), 0, b);
    assert_rc(rowlock_release(ra), 0, a);
    assert_rc(rowlock_release(rd), 0, d);
    /* Released: release again is refused by the handle, renew too. */
    assert_rc(rowlock_release(ra), ROWLOCK_EINVALID, a);
}

static void test_shared__a_writer_excludes_and_is_excluded(void **state)
{
    (void)state;
    rowlock_client *a = C(), *b = C(), *w = C();
    rowlock_lock *ra = ML(a, "excl", ROWLOCK_MODE_SHARED, 0);
    rowlock_lock *rb = ML(b, "excl", ROWLOCK_MODE_SHARED, 0);
    rowlock_lock *wx = ML(w, "excl", ROWLOCK_MODE_EXCLUSIVE, 0);
    assert_rc(rowlock_acquire(ra, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_acquire(wx, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, w);
    assert_rc(rowlock_release(ra), 0, a);
    assert_rc(rowlock_acquire(wx, 0, TU_LEASE_LONG), 0, w);
    assert_rc(rowlock_acquire(rb, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, b);
    if (S == ROWLOCK_STRATEGY_INSERT)
        assert_msg_has(b, rowlock_client_owner(w)); /* the refusal names the holder */
    assert_rc(rowlock_release(wx), 0, w);
    assert_rc(rowlock_acquire(rb, 0, TU_LEASE_LONG), 0, b);
    assert_rc(rowlock_release(rb), 0, b);
}

/* A writer queued behind a reader; later readers must wait behind it. */
static int writer_child(void *arg, int idx)
{
    (void)idx;
    uint64_t *out = arg;
    rowlock_client *c;
    rowlock_lock *l;
    int rc = child_lock("nostarve", ROWLOCK_MODE_EXCLUSIVE, 0, &c, &l);
    if (rc)
        return rc;
    rc = rowlock_acquire(l, 10000, TU_LEASE_LONG);
    if (rc) {
        fprintf(stderr, "writer: %s\n", rowlock_client_errmsg(c));
        return 20;
    }
    out[0] = rowlock_lock_token(l);
    out[1] = (uint64_t)tu_now_us();
    tu_sleep_ms(300);
    out[2] = (uint64_t)tu_now_us();
    rc = rowlock_release(l);
    rowlock_client_free(c);
    return rc ? 21 : 0;
}

static void test_shared__a_writer_is_not_starved_by_later_readers(void **state)
{
    (void)state;
    uint64_t *w = tu_shm(4 * sizeof(uint64_t));
    rowlock_client *a = C(), *b = C();
    rowlock_lock *ra = ML(a, "nostarve", ROWLOCK_MODE_SHARED, 0);
    rowlock_lock *rb = ML(b, "nostarve", ROWLOCK_MODE_SHARED, 0);
    assert_rc(rowlock_acquire(ra, 0, TU_LEASE_LONG), 0, a);
    uint64_t t_reader = rowlock_lock_token(ra);
    pid_t pid = tu_fork(writer_child, w, 0);
    tu_sleep_ms(600); /* the writer is queued by now */
    /* A stream of readers: each later reader must wait behind the writer. */
    for (int i = 0; i < 3; i++) {
        assert_rc(rowlock_acquire(rb, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, b);
        tu_sleep_ms(50);
    }
    assert_int_equal(w[0], 0); /* still waiting for the first reader */
    assert_rc(rowlock_release(ra), 0, a);
    /* The reader that waits now is granted after the writer. */
    assert_rc(rowlock_acquire(rb, 10000, TU_LEASE_LONG), 0, b);
    uint64_t granted_at = (uint64_t)tu_now_us();
    assert_int_equal(tu_wait(pid, 10000), 0);
    assert_true(w[0] > t_reader);                   /* tokens: writer after the reader */
    assert_true(rowlock_lock_token(rb) > w[0]);     /* the next reader after the writer */
    assert_true(granted_at >= w[2]);                /* and only once the writer released */
    assert_rc(rowlock_release(rb), 0, b);
    tu_shm_free(w, 4 * sizeof(uint64_t));
}

/* ---- readers and writers at once: a history check -------------------------- */

#define RW_WRITERS 2
#define RW_READERS 4
#define RW_WRITER_ROUNDS 8
#define RW_READER_ROUNDS 16

typedef struct rw_shared {
    volatile int readers_in; /* atomic */
    volatile int writer_in;  /* atomic */
    volatile int overlaps;   /* a reader with a writer, or two writers (atomic) */
    volatile int max_readers;
    volatile long value;     /* written by writers only, read-sleep-write (not atomic) */
    volatile int torn;       /* a reader saw value change under it */
} rw_shared;

static void rw_max(volatile int *m, int v)
{
    int cur = *m;
    while (v > cur && !__atomic_compare_exchange_n(m, &cur, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
}

/* Writers: a read-sleep-write of `value` (a lost update if two overlap), and
 * nobody else inside meanwhile. Readers: `value` the same before and after
 * a sleep, and no writer inside. */
static int rw_child(void *arg, int idx)
{
    rw_shared *s = arg;
    const int writer = idx < RW_WRITERS;
    rowlock_client *c;
    rowlock_lock *l;
    int rc = child_lock("rw-history", writer ? ROWLOCK_MODE_EXCLUSIVE : ROWLOCK_MODE_SHARED, 0, &c, &l);
    if (rc)
        return rc;
    srand((unsigned)(getpid() * 7919 + idx));
    const int rounds = writer ? RW_WRITER_ROUNDS : RW_READER_ROUNDS;
    for (int r = 0; r < rounds; r++) {
        if ((rc = rowlock_acquire(l, 60000, TU_LEASE_LONG))) {
            fprintf(stderr, "rw child %d: %s\n", idx, rowlock_client_errmsg(c));
            return 20;
        }
        if (writer) {
            if (__atomic_add_fetch(&s->writer_in, 1, __ATOMIC_SEQ_CST) != 1 ||
                __atomic_load_n(&s->readers_in, __ATOMIC_SEQ_CST) != 0)
                __atomic_add_fetch(&s->overlaps, 1, __ATOMIC_SEQ_CST);
            long v = s->value;
            tu_sleep_ms(10);
            s->value = v + 1;
            if (__atomic_load_n(&s->readers_in, __ATOMIC_SEQ_CST) != 0)
                __atomic_add_fetch(&s->overlaps, 1, __ATOMIC_SEQ_CST);
            __atomic_sub_fetch(&s->writer_in, 1, __ATOMIC_SEQ_CST);
        } else {
            rw_max(&s->max_readers, __atomic_add_fetch(&s->readers_in, 1, __ATOMIC_SEQ_CST));
            if (__atomic_load_n(&s->writer_in, __ATOMIC_SEQ_CST) != 0)
                __atomic_add_fetch(&s->overlaps, 1, __ATOMIC_SEQ_CST);
            long v = s->value;
            tu_sleep_ms(5 + rand() % 10);
            if (s->value != v)
                s->torn = 1;
            if (__atomic_load_n(&s->writer_in, __ATOMIC_SEQ_CST) != 0)
                __atomic_add_fetch(&s->overlaps, 1, __ATOMIC_SEQ_CST);
            __atomic_sub_fetch(&s->readers_in, 1, __ATOMIC_SEQ_CST);
        }
        if ((rc = rowlock_release(l))) {
            fprintf(stderr, "rw child %d: release: %s\n", idx, rowlock_client_errmsg(c));
            return 21;
        }
        tu_sleep_ms(rand() % (writer ? 20 : 8));
    }
    rowlock_client_free(c);
    return 0;
}

/* Writers and readers on one name at once (insert: readers join the ones
 * holding in one statement while no writer holds or waits): never a reader
 * with a writer, never two writers, and readers do hold together. */
static void test_shared__readers_and_writers_never_overlap(void **state)
{
    (void)state;
    rw_shared *s = tu_shm(sizeof *s);
    int status[RW_WRITERS + RW_READERS];
    int bad = tu_run_children(RW_WRITERS + RW_READERS, rw_child, s, status, 120000);
    fprintf(stderr, "readers and writers: overlaps %d, torn %d, writes %ld of %d, at most %d readers at once\n",
            s->overlaps, s->torn, s->value, RW_WRITERS * RW_WRITER_ROUNDS, s->max_readers);
    assert_int_equal(bad, 0);
    assert_int_equal(s->overlaps, 0);
    assert_int_equal(s->torn, 0);
    assert_int_equal(s->value, RW_WRITERS * RW_WRITER_ROUNDS);
    assert_true(s->max_readers >= 2);
    tu_shm_free(s, sizeof *s);
}

static void test_shared__the_lease_keeper_renews_shared_holders(void **state)
{
    (void)state;
    /* for-update: its lease is the session's wait_timeout, which the
     * keeper's keep-alives hold off (issue 24 item 1). */
    rowlock_client *a = C(), *w = C();
    rowlock_lock *ra = ML(a, "kept", ROWLOCK_MODE_SHARED, 0);
    rowlock_lock *wx = ML(w, "kept", ROWLOCK_MODE_EXCLUSIVE, 0);
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    assert_rc(rowlock_acquire(ra, 0, 1500), 0, a);
    assert_rc(rowlock_keep(ra, &ko), 0, a);
    tu_sleep_ms(3500); /* more than two leases */
    assert_rc(rowlock_acquire(wx, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, w);
    rowlock_keep_info ki = ROWLOCK_KEEP_INFO_INIT;
    assert_rc(rowlock_keep_status(ra, &ki), 0, a);
    assert_int_equal(ki.state, ROWLOCK_KEEP_HELD);
    assert_true(ki.renewals >= 2);
    assert_rc(rowlock_release(ra), 0, a);
    assert_rc(rowlock_acquire(wx, 0, TU_LEASE_LONG), 0, w);
    assert_rc(rowlock_release(wx), 0, w);
}

/* A waiting writer and a shared holder with a short lease: while the
 * holder's keeper renews, the writer never gets in (under the cluster rule:
 * every renewal changes the entry's gen, so the watch starts over); once the
 * holder stops renewing, the writer gets in, not before the holder's lease
 * could have ended, and the holder's renewal and release then say it lost
 * the lock (under the cluster rule the writer deleted the entry). */
static void test_shared__a_renewing_holder_keeps_a_writer_out_a_lapsed_one_does_not(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT)
        skip();
    rowlock_client *a = C(), *w = C();
    rowlock_lock *ra = ML(a, "lapse", ROWLOCK_MODE_SHARED, 0);
    rowlock_lock *wx = ML(w, "lapse", ROWLOCK_MODE_EXCLUSIVE, 0);
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    assert_rc(rowlock_acquire(ra, 0, 600), 0, a);
    assert_rc(rowlock_keep(ra, &ko), 0, a);
    assert_rc(rowlock_acquire(wx, 3000, TU_LEASE_LONG), ROWLOCK_EBUSY, w); /* 5 leases, renewed throughout */
    assert_rc(rowlock_release(ra), 0, a);

    rowlock_client *b = C(); /* a handle nobody keeps (ra's keeping goes on for its next grants) */
    rowlock_lock *rb = ML(b, "lapse", ROWLOCK_MODE_SHARED, 0);
    const int64_t asked = tu_now_us();
    assert_rc(rowlock_acquire(rb, 0, 600), 0, b); /* not renewed: lapses */
    assert_rc(rowlock_acquire(wx, 10000, TU_LEASE_LONG), 0, w);
    const int64_t took_ms = (tu_now_us() - asked) / 1000;
    fprintf(stderr, "writer granted %lld ms after the lapsed holder asked for its 600 ms lease\n", (long long)took_ms);
    assert_true(took_ms >= 600);
    assert_rc(rowlock_renew(rb, 600), ROWLOCK_ENOTOWNER, b);
    assert_rc(rowlock_release(wx), 0, w);
}

/*
 * A release after the lease ended reports the loss. On one server an
 * acquirer passes over an entry whose lease ended without deleting it, so
 * the entry alone cannot tell whether someone else held the name meanwhile:
 * the release was 0 even after a writer had held it in between (planted
 * old statements: 0, fails). Under the cluster rule a taker deletes the
 * entry it passes over, so an entry still there is the holder's own.
 */
static void test_shared__a_release_after_the_lease_ended_reports_the_loss(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT)
        skip();
    rowlock_client *a = C(), *w = C();
    rowlock_lock *ra = ML(a, "lapse-release", ROWLOCK_MODE_SHARED, 0);
    rowlock_lock *wx = ML(w, "lapse-release", ROWLOCK_MODE_EXCLUSIVE, 0);
    assert_rc(rowlock_acquire(ra, 0, 600), 0, a); /* not renewed: lapses */
    assert_rc(rowlock_acquire(wx, 10000, TU_LEASE_LONG), 0, w);
    assert_rc(rowlock_release(wx), 0, w);
    assert_rc(rowlock_release(ra), ROWLOCK_ENOTOWNER, a); /* a writer held it in between */
    assert_msg_has(a, "not the owner any more");

    /* Lapsed, nobody took it: on one server a loss all the same (it cannot
     * be told apart), with a cluster's rule the entry is still ours. */
    rowlock_client *b = C();
    rowlock_lock *rb = ML(b, "lapse-release-2", ROWLOCK_MODE_SHARED, 0);
    rowlock_lock *rb2 = ML(b, "lapse-release-3", ROWLOCK_MODE_SHARED, 0);
    assert_rc(rowlock_acquire(rb, 0, 600), 0, b);
    assert_rc(rowlock_acquire(rb2, 0, 600), 0, b);
    assert_rc(rowlock_acquire(rb2, 0, 600), 0, b); /* a re-entry: count 2 */
    tu_sleep_ms(900);
    assert_rc(rowlock_release(rb), cluster_rule() ? 0 : ROWLOCK_ENOTOWNER, b);
    if (!cluster_rule())
        assert_msg_has(b, "its lease had ended");
    assert_rc(rowlock_release(rb2), cluster_rule() ? 0 : ROWLOCK_ENOTOWNER, b);
    int ok = 0;
    long long left = tu_sql_int(NULL, &ok,
                                "SELECT COUNT(*) FROM `%s_hold` WHERE name IN ('lapse-release-2', 'lapse-release-3')",
                                TABLE);
    assert_true(ok);
    assert_int_equal(left, cluster_rule() ? 1 : 0); /* cleared, the re-entered one too */
    if (cluster_rule())
        assert_rc(rowlock_release(rb2), 0, b);
}

/* ---- semaphores (insert) ------------------------------------------------- */

#define SEM_PROCS 8
#define SEM_ROUNDS 6

typedef struct sem_shared {
    volatile int current;  /* holders now (atomic) */
    volatile int max_seen;
    volatile int grants;   /* grants so far (atomic) */
    volatile int file_bad; /* the non-atomic counter went past N */
    unsigned permits;
    char path[128];
} sem_shared;

/* The non-atomic counter of current holders: a read-sleep-write of a
 * file. With at most N holders at once and N = 1 it counts exactly; above,
 * a lost update shows as a value that does not come back to 0. */
static int file_add(const char *path, int d)
{
    int v = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = 0;
        fclose(f);
    }
    tu_sleep_ms(5);
    v += d;
    f = fopen(path, "w");
    if (f) {
        fprintf(f, "%d\n", v);
        fclose(f);
    }
    return v;
}

static int sem_child(void *arg, int idx)
{
    (void)idx;
    sem_shared *s = arg;
    rowlock_client *c;
    rowlock_lock *l;
    int rc = child_lock("sem", ROWLOCK_MODE_SHARED, s->permits, &c, &l);
    if (rc)
        return rc;
    for (int r = 0; r < SEM_ROUNDS; r++) {
        if ((rc = rowlock_acquire(l, 60000, TU_LEASE_LONG))) {
            fprintf(stderr, "sem child: %s\n", rowlock_client_errmsg(c));
            return 20;
        }
        int now = __atomic_add_fetch(&s->current, 1, __ATOMIC_SEQ_CST);
        int m = s->max_seen;
        while (now > m && !__atomic_compare_exchange_n(&s->max_seen, &m, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
        /* The first N grants hold until all N permits are in use (at most
         * 20 s): all SEM_PROCS > N children want the name then, so a correct
         * semaphore fills up, and one that admits fewer than N at once is
         * seen (max_seen < N) instead of passing by luck of the timing. */
        if (__atomic_fetch_add(&s->grants, 1, __ATOMIC_SEQ_CST) < (int)s->permits) {
            int64_t t0 = tu_now_us();
            while (__atomic_load_n(&s->current, __ATOMIC_SEQ_CST) < (int)s->permits && tu_ms_since(t0) < 20000)
                tu_sleep_ms(1);
            m = s->max_seen;
            now = __atomic_load_n(&s->current, __ATOMIC_SEQ_CST);
            while (now > m &&
                   !__atomic_compare_exchange_n(&s->max_seen, &m, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
                ;
        }
        if (s->permits == 1 && file_add(s->path, 1) > 1)
            s->file_bad = 1;
        tu_sleep_ms(20);
        if (s->permits == 1)
            file_add(s->path, -1);
        __atomic_sub_fetch(&s->current, 1, __ATOMIC_SEQ_CST);
        if ((rc = rowlock_release(l)))
            return 21;
    }
    rowlock_client_free(c);
    return 0;
}

static void run_semaphore(unsigned permits, const char *name)
{
    sem_shared *s = tu_shm(sizeof *s);
    s->permits = permits;
    snprintf(s->path, sizeof s->path, "/tmp/rowlock-sem-%d-%s", (int)getpid(), name);
    unlink(s->path);
    /* The name is fresh per run: its permits are set by its first use. */
    char sql_table[80];
    snprintf(sql_table, sizeof sql_table, "%s", TABLE);
    int status[SEM_PROCS];
    int bad = tu_run_children(SEM_PROCS, sem_child, s, status, 120000);
    unlink(s->path);
    assert_int_equal(bad, 0);
    /* Never more than N holders, and N at once when N are wanted. */
    assert_int_equal(s->max_seen, (int)permits);
    assert_int_equal(s->file_bad, 0);
    fprintf(stderr, "semaphore N=%u: at most %d holders at once seen\n", permits, s->max_seen);
    tu_shm_free(s, sizeof *s);
}

/* ---- waiters in the semaphore's queue (one server) ------------------------- */

typedef struct seen_holders {
    int n, live, granted;
    char owners[8][ROWLOCK_OWNER_MAX + 1];
} seen_holders;

static int holders_cb(const rowlock_holder_info *h, void *arg)
{
    seen_holders *s = arg;
    if (s->n < 8)
        snprintf(s->owners[s->n], sizeof s->owners[0], "%s", h->owner);
    s->n++;
    s->live += h->live;
    s->granted += h->granted;
    return 0;
}


/* What one queued child did: [0] granted at (µs, 0: not granted), [1]
 * released at, [2] its acquire's result + 100; started: when it called
 * acquire (µs). Name, hold and how long the child keeps its session after
 * the release in `name`, hold_ms, linger_ms. */
typedef struct queued {
    char name[32];
    int hold_ms, linger_ms;
    int64_t v[4][3];
    int64_t started[4];
} queued;

static int queued_child(void *arg, int idx)
{
    queued *q = arg;
    rowlock_client *c;
    rowlock_lock *l;
    int rc = child_lock(q->name, ROWLOCK_MODE_SHARED, 1, &c, &l);
    if (rc)
        return rc;
    q->started[idx] = tu_now_us();
    rc = rowlock_acquire(l, 20000, TU_LEASE_LONG);
    q->v[idx][2] = 100 + rc;
    if (rc) {
        fprintf(stderr, "queued child %d: %s\n", idx, rowlock_client_errmsg(c));
        return 20;
    }
    q->v[idx][0] = tu_now_us();
    tu_sleep_ms(q->hold_ms);
    q->v[idx][1] = tu_now_us();
    rc = rowlock_release(l);
    tu_sleep_ms(q->linger_ms);
    rowlock_client_free(c);
    return rc ? 21 : 0;
}

/* A 1-permit semaphore `name` held by a fresh client (a, la), a second
 * client's handle on it (b, lb), and the record queued children share
 * (its name set, the rest zero). */
typedef struct qsetup {
    queued *q;
    rowlock_client *a, *b;
    rowlock_lock *la, *lb;
} qsetup;

static qsetup queue_setup(const char *name)
{
    qsetup s;
    s.q = tu_shm(sizeof *s.q);
    snprintf(s.q->name, sizeof s.q->name, "%s", name);
    s.a = C();
    s.b = C();
    s.la = ML(s.a, name, ROWLOCK_MODE_SHARED, 1);
    s.lb = ML(s.b, name, ROWLOCK_MODE_SHARED, 1);
    assert_rc(rowlock_acquire(s.la, 0, TU_LEASE_LONG), 0, s.a);
    return s;
}

/* One server: a waiter behind another waiter waits for that one's grant
 * (its queue lock), not for the end of a slice of its own (30 s) nor for
 * the end of that one's session (it lingers 6 s after its release): the
 * second waiter is granted right after the first releases. */
static void test_semaphore__a_waiter_behind_a_waiter_is_woken_by_its_grant(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT || cluster_rule())
        skip();
    queued *q = tu_shm(sizeof *q);
    snprintf(q->name, sizeof q->name, "qchain");
    q->hold_ms = 500;
    q->linger_ms = 6000;
    rowlock_client *a = C();
    rowlock_lock *la = ML(a, "qchain", ROWLOCK_MODE_SHARED, 1);
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    pid_t p1 = tu_fork(queued_child, q, 0);
    tu_sleep_ms(700); /* the first waiter is queued (and heads the queue) */
    pid_t p2 = tu_fork(queued_child, q, 1);
    tu_sleep_ms(700); /* the second is queued behind it */
    assert_int_equal(q->v[0][0], 0);
    assert_int_equal(q->v[1][0], 0);
    assert_rc(rowlock_release(la), 0, a);
    assert_int_equal(tu_wait(p1, 25000), 0);
    assert_int_equal(tu_wait(p2, 25000), 0);
    assert_true(q->v[0][0] > 0 && q->v[1][0] > 0);
    assert_true(q->v[1][0] >= q->v[0][1]); /* FIFO, one at a time */
    int64_t gap_ms = (q->v[1][0] - q->v[0][1]) / 1000;
    fprintf(stderr, "second waiter granted %lld ms after the first released\n", (long long)gap_ms);
    assert_true(gap_ms < 3000);
    tu_shm_free(q, sizeof *q);
}

/* One server: a waiter whose session ended (its process killed while it
 * waited) blocks nobody once its wait statement ends, although its entry's
 * place lasts minutes: the entries are judged by the waiter's queue lock. */
static void test_semaphore__a_killed_waiter_blocks_nobody(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT || cluster_rule())
        skip();
    qsetup qs = queue_setup("qdead");
    queued *q = qs.q;
    rowlock_client *a = qs.a, *b = qs.b;
    rowlock_lock *la = qs.la, *lb = qs.lb;
    pid_t p1 = tu_fork(queued_child, q, 0);
    tu_sleep_ms(700); /* queued: its entry lasts minutes */
    assert_rc(rowlock_acquire(lb, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, b);
    /* The listing and the stats see the waiter (its lock names as SQL
     * builds them: the same as the library's) ... */
    seen_holders seen;
    memset(&seen, 0, sizeof seen);
    assert_rc(rowlock_admin_holders(a, "qdead", holders_cb, &seen), 0, a);
    assert_int_equal(seen.n, 2);
    assert_int_equal(seen.live, 2);
    rowlock_stats_info st = ROWLOCK_STATS_INFO_INIT;
    assert_rc(rowlock_admin_stats(a, &st), 0, a);
    assert_int_equal(st.waiters_shared, 1);
    kill(p1, SIGKILL);
    assert_int_equal(tu_wait(p1, 5000) != 0, 1);
    /* ... and, once its session ended (its wait statement's 250 ms slice;
     * 5 s after its last write at most, were it only paused), no more. */
    tu_sleep_ms(800);
    memset(&seen, 0, sizeof seen);
    assert_rc(rowlock_admin_holders(a, "qdead", holders_cb, &seen), 0, a);
    assert_int_equal(seen.n, 2);
    assert_int_equal(seen.live, 1);
    assert_rc(rowlock_admin_stats(a, &st), 0, a);
    assert_int_equal(st.waiters_shared, 0);
    assert_rc(rowlock_release(la), 0, a);
    /* The killed waiter's session ends when its wait statement does (at the
     * release, or its 250 ms slice): the permit is b's within the wait. */
    int64_t t0 = tu_now_us();
    assert_rc(rowlock_acquire(lb, 3000, TU_LEASE_LONG), 0, b);
    fprintf(stderr, "granted past a killed waiter in %lld ms\n", (long long)tu_ms_since(t0));
    assert_rc(rowlock_release(lb), 0, b);
    tu_shm_free(q, sizeof *q);
}

/* One server: a waiter keeps its place however long it waits (it is in a
 * wait statement), not only for the 5 s after its last write: after 6 s of
 * waiting it is listed live, and when a second permit is added while the
 * first is still held, a newcomer is still behind it and the permit is
 * the waiter's (raising the permits admits a waiting acquirer). */
static void test_semaphore__a_long_waiter_keeps_its_place(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT || cluster_rule())
        skip();
    qsetup qs = queue_setup("qlong");
    queued *q = qs.q;
    rowlock_client *a = qs.a, *b = qs.b;
    rowlock_lock *la = qs.la, *lb = qs.lb;
    pid_t p1 = tu_fork(queued_child, q, 0);
    tu_sleep_ms(6500);
    assert_int_equal(q->v[0][0], 0);
    seen_holders seen;
    memset(&seen, 0, sizeof seen);
    assert_rc(rowlock_admin_holders(a, "qlong", holders_cb, &seen), 0, a);
    assert_int_equal(seen.n, 2);
    assert_int_equal(seen.live, 2);
    assert_rc(rowlock_admin_set_permits(a, "qlong", 2), 0, a);
    assert_rc(rowlock_acquire(lb, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, b); /* the waiter first */
    int64_t t0 = tu_now_us();
    while (q->v[0][0] == 0 && tu_ms_since(t0) < 3000)
        tu_sleep_ms(10);
    assert_true(q->v[0][0] > 0); /* granted while a still holds: the new permit */
    assert_rc(rowlock_release(la), 0, a);
    assert_int_equal(tu_wait(p1, 25000), 0);
    tu_shm_free(q, sizeof *q);
}

/* One server: a waiter that stops (a paused process) is passed over by
 * acquirers 5 s after its last write, not before (it may only be slow), and
 * not never (WAITER_LIVE: its queue lock is held while it is paused, but it
 * is in no wait statement). The child queues behind a's permit and is
 * stopped; a releases; b tries without waiting every 50 ms. */
static void test_semaphore__a_paused_waiter_is_passed_over_after_5_s(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT || cluster_rule())
        skip();
    qsetup qs = queue_setup("qpaused");
    queued *q = qs.q;
    rowlock_client *a = qs.a, *b = qs.b;
    rowlock_lock *la = qs.la, *lb = qs.lb;
    pid_t p1 = tu_fork(queued_child, q, 0);
    int ok = 0;
    while (tu_sql_int(tu_defaults_file(), &ok, "SELECT COUNT(*) FROM `%s_hold` WHERE name = 'qpaused' AND granted = 0",
                      TABLE) < 1)
        tu_sleep_ms(10);
    /* Its entry was written after it called acquire: counting from then,
     * the 5 s cannot have passed before 5 s have. */
    const int64_t queued_at = q->started[0];
    kill(p1, SIGSTOP);
    assert_rc(rowlock_release(la), 0, a);
    int64_t granted_ms = -1;
    while (tu_ms_since(queued_at) < 10000) {
        int rc = rowlock_acquire(lb, 0, TU_LEASE_LONG);
        if (rc == 0) {
            granted_ms = tu_ms_since(queued_at);
            break;
        }
        assert_rc(rc, ROWLOCK_EBUSY, b);
        tu_sleep_ms(50);
    }
    fprintf(stderr, "a paused waiter was passed over %lld ms after it queued\n", (long long)granted_ms);
    kill(p1, SIGKILL);
    assert_true(tu_wait(p1, 5000) != 0);
    assert_true(granted_ms >= 0);    /* passed over at all */
    assert_true(granted_ms >= 4990); /* not before its 5 s */
    assert_true(granted_ms <= 7000); /* and not much after (its first write came soon after it started) */
    assert_rc(rowlock_release(lb), 0, b);
    tu_shm_free(q, sizeof *q);
}

static void test_semaphore__never_more_than_n_holders(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT)
        skip();
    tu_sql(tu_defaults_file(), 0, "DELETE FROM `%s` WHERE name = 'sem'", TABLE);
    tu_sql(tu_defaults_file(), 0, "DELETE FROM `%s_hold` WHERE name = 'sem'", TABLE);
    run_semaphore(3, "n3");
}

static void test_semaphore__one_permit_is_mutual_exclusion(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT)
        skip();
    tu_sql(tu_defaults_file(), 0, "DELETE FROM `%s` WHERE name = 'sem'", TABLE);
    tu_sql(tu_defaults_file(), 0, "DELETE FROM `%s_hold` WHERE name = 'sem'", TABLE);
    run_semaphore(1, "n1");
}

static void test_semaphore__permits_change_keeps_holders(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT)
        skip();
    rowlock_client *a = C(), *b = C(), *d = C(), *admin = C();
    rowlock_lock *la = ML(a, "sem-change", ROWLOCK_MODE_SHARED, 2);
    rowlock_lock *lb = ML(b, "sem-change", ROWLOCK_MODE_SHARED, 2);
    rowlock_lock *ld = ML(d, "sem-change", ROWLOCK_MODE_SHARED, 2);
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_acquire(lb, 0, TU_LEASE_LONG), 0, b);
    assert_rc(rowlock_acquire(ld, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, d);
    assert_msg_has(d, "permits");
    assert_rc(rowlock_admin_set_permits(admin, "sem-change", 3), 0, admin);
    assert_rc(rowlock_acquire(ld, 0, TU_LEASE_LONG), 0, d);
    assert_rc(rowlock_admin_set_permits(admin, "sem-change", 1), 0, admin);
    /* Fewer permits: the holders keep their grants, and renew. */
    assert_rc(rowlock_renew(la, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_release(la), 0, a);
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, a);
    assert_rc(rowlock_release(lb), 0, b);
    assert_rc(rowlock_release(ld), 0, d);
    assert_rc(rowlock_acquire(la, 0, TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_release(la), 0, a);
}

/*
 * Under the cluster rule no node's clock says a one-row grant ended: setting
 * permits on a name an exclusive holder holds is busy even when the row's
 * expires_at has passed (a node whose clock runs ahead), and no reader gets
 * in beside the holder; once it released, the name converts. Planted with
 * the one-server conversion (its expires_at test): permits set, a reader
 * granted beside the holder (fails).
 */
static void test_semaphore__cluster_rule_permits_never_take_a_held_row(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT || !cluster_rule())
        skip();
    rowlock_client *x = C(), *r = C(), *admin = C();
    rowlock_lock *lx = ML(x, "perm-held", ROWLOCK_MODE_EXCLUSIVE, 0);
    rowlock_lock *lr = ML(r, "perm-held", ROWLOCK_MODE_SHARED, 0);
    assert_rc(rowlock_acquire(lx, 0, TU_LEASE_LONG), 0, x);
    assert_int_equal(tu_sql(NULL, 0, "UPDATE `%s` SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE name = 'perm-held'",
                            TABLE), 0);
    const int prc = rowlock_admin_set_permits(admin, "perm-held", 4);
    const int rrc = rowlock_acquire(lr, 0, TU_LEASE_LONG);
    if (rrc == 0)
        assert_rc(rowlock_release(lr), 0, r);
    print_message("  set permits on a held row: %s; a reader's try: %s\n", rowlock_error_name(prc), rowlock_error_name(rrc));
    assert_int_equal(prc, ROWLOCK_EBUSY);
    assert_int_equal(rrc, ROWLOCK_EBUSY);
    assert_rc(rowlock_release(lx), 0, x);
    assert_rc(rowlock_admin_set_permits(admin, "perm-held", 4), 0, admin);
    assert_rc(rowlock_acquire(lr, 0, TU_LEASE_LONG), 0, r);
    assert_rc(rowlock_release(lr), 0, r);
}

/*
 * Two handles of one client on a shared name: the first one's lease lapses
 * unnoticed, the second acquires (a fresh grant, another token, rewriting
 * the client's entry) and releases: that release is the entry's last, so
 * it succeeds and a writer gets the name at once. Planted: the lapsed
 * sibling counted as sharing the entry: the release reports a loss and
 * the entry stays for its lease, so the writer's try is busy (fails).
 */
static void test_shared__a_lapsed_sibling_handle_does_not_keep_a_fresh_grant(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT || cluster_rule())
        skip(); /* the cluster rule watches leases: nothing lapses by a clock */
    rowlock_client *a = C(), *w = C();
    rowlock_lock *l1 = ML(a, "sibling", ROWLOCK_MODE_SHARED, 0), *l2 = ML(a, "sibling", ROWLOCK_MODE_SHARED, 0);
    rowlock_lock *lw = ML(w, "sibling", ROWLOCK_MODE_EXCLUSIVE, 0);
    assert_rc(rowlock_acquire(l1, 0, 300), 0, a);
    tu_sleep_ms(500); /* l1's lease lapsed */
    assert_rc(rowlock_acquire(l2, 0, TU_LEASE_LONG), 0, a);
    const uint64_t t1 = rowlock_lock_token(l1), t2 = rowlock_lock_token(l2);
    const int rel = rowlock_release(l2);
    const int wrc = rowlock_acquire(lw, 0, TU_LEASE_LONG);
    if (wrc == 0)
        assert_rc(rowlock_release(lw), 0, w);
    print_message("  tokens %llu (lapsed) and %llu; the second's release: %s; a writer's try: %s\n",
                  (unsigned long long)t1, (unsigned long long)t2, rowlock_error_name(rel), rowlock_error_name(wrc));
    assert_true(t2 != t1);
    assert_int_equal(rel, 0);
    assert_int_equal(wrc, 0);
    assert_rc(rowlock_release(l1), ROWLOCK_ENOTOWNER, a); /* the lapsed one learns it */
}

typedef struct commit_later {
    void *m;
    int ms;
    unsigned rc;
} commit_later;

static void *commit_after(void *arg)
{
    commit_later *x = arg;
    tu_sleep_ms(x->ms);
    x->rc = tu_mysql_query(x->m, "COMMIT");
    return NULL;
}

/* Hold `name`'s holders-table rows locked from now for `ms`, then commit (a
 * thread): what an acquirer's locking read of the entries does briefly. */
static void *lock_entries_for(const char *name, int ms, pthread_t *t, commit_later *x)
{
    void *m = tu_mysql_connect(NULL, 0);
    assert_non_null(m);
    assert_int_equal(tu_mysql_query(m, "START TRANSACTION"), 0);
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT * FROM `%s_hold` WHERE name = '%s' FOR UPDATE", TABLE, name);
    assert_int_equal(tu_mysql_query(m, sql), 0);
    x->m = m;
    x->ms = ms;
    x->rc = 99;
    assert_int_equal(pthread_create(t, NULL, commit_after, x), 0);
    return m;
}

/*
 * A statement that waits for a shared holder's entry (a renewal, a fence)
 * judges its lease by the clock once the entry is locked: begun before the
 * lease's end and let in after it, it is refused, as an acquirer that read
 * the entry meanwhile saw the lease ended (and passed over it without
 * writing it). A transaction holds the entry's row across the end of a
 * 700 ms lease. Planted UTC_TIMESTAMP(6) (the statement's start): the
 * renewal, the fence, the release and the downgrade succeed (fails); the
 * SQL form with 0009's procedure: the CALL succeeds (fails).
 */
static void test_shared__a_renewal_or_fence_that_waited_past_the_lease_is_refused(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT || cluster_rule())
        skip(); /* the cluster rule has no clock in these statements */
    rowlock_client *a = C();
    rowlock_lock *ra = ML(a, "late-renew", ROWLOCK_MODE_SHARED, 0);
    rowlock_lock *rf = ML(a, "late-fence", ROWLOCK_MODE_SHARED, 0);
    pthread_t t;
    commit_later x;

    assert_rc(rowlock_acquire(ra, 0, 700), 0, a);
    void *m = lock_entries_for("late-renew", 1200, &t, &x);
    int64_t t0 = tu_now_us();
    const int renew_rc = rowlock_renew(ra, 60000);
    const double renew_ms = tu_ms_since(t0);
    assert_int_equal(pthread_join(t, NULL), 0);
    tu_mysql_close(m);

    assert_rc(rowlock_acquire(rf, 0, 700), 0, a);
    m = lock_entries_for("late-fence", 1200, &t, &x);
    void *app = tu_mysql_connect(NULL, 0);
    assert_non_null(app);
    assert_int_equal(tu_mysql_query(app, "START TRANSACTION"), 0);
    t0 = tu_now_us();
    const int fence_rc = rowlock_fence(rf, app);
    const double fence_ms = tu_ms_since(t0);
    assert_int_equal(tu_mysql_query(app, "ROLLBACK"), 0);
    tu_mysql_close(app);
    assert_int_equal(pthread_join(t, NULL), 0);
    tu_mysql_close(m);

    /* The SQL form (the procedure, sql/0010). */
    rowlock_lock *rs = ML(a, "late-sql", ROWLOCK_MODE_SHARED, 0);
    assert_rc(rowlock_acquire(rs, 0, 700), 0, a);
    /* Closed to joining readers, as a writer's token draw leaves it: the
     * procedure then fences the entry (an open name it fences by its row). */
    assert_int_equal(tu_sql(NULL, 0, "UPDATE `%s` SET token = token + 1 WHERE name = 'late-sql'", TABLE), 0);
    m = lock_entries_for("late-sql", 1200, &t, &x);
    app = tu_mysql_connect(NULL, 0);
    assert_non_null(app);
    assert_int_equal(tu_mysql_query(app, "START TRANSACTION"), 0);
    char call[200];
    snprintf(call, sizeof call, "CALL `%s_fence`('late-sql', %llu)", TABLE, (unsigned long long)rowlock_lock_token(rs));
    t0 = tu_now_us();
    const unsigned call_err = tu_mysql_query(app, call);
    const double call_ms = tu_ms_since(t0);
    assert_int_equal(tu_mysql_query(app, "ROLLBACK"), 0);
    tu_mysql_close(app);
    assert_int_equal(pthread_join(t, NULL), 0);
    tu_mysql_close(m);

    /* A release: told of the loss, not "released". */
    rowlock_lock *rr = ML(a, "late-release", ROWLOCK_MODE_SHARED, 0);
    assert_rc(rowlock_acquire(rr, 0, 700), 0, a);
    m = lock_entries_for("late-release", 1200, &t, &x);
    t0 = tu_now_us();
    const int release_rc = rowlock_release(rr);
    const double release_ms = tu_ms_since(t0);
    assert_int_equal(pthread_join(t, NULL), 0);
    tu_mysql_close(m);

    /* A downgrade of an exclusive holder of a name used shared. */
    rowlock_client *d = C();
    rowlock_lock *open_it = ML(d, "late-down", ROWLOCK_MODE_SHARED, 0);
    assert_rc(rowlock_acquire(open_it, 0, TU_LEASE_LONG), 0, d);
    assert_rc(rowlock_release(open_it), 0, d);
    rowlock_lock *rd = ML(d, "late-down", ROWLOCK_MODE_EXCLUSIVE, 0);
    assert_rc(rowlock_acquire(rd, 0, 700), 0, d);
    m = lock_entries_for("late-down", 1200, &t, &x);
    t0 = tu_now_us();
    const int down_rc = rowlock_downgrade(rd);
    const double down_ms = tu_ms_since(t0);
    assert_int_equal(pthread_join(t, NULL), 0);
    tu_mysql_close(m);

    print_message("  renewal after %.0f ms: %s; fence after %.0f ms: %s; SQL fence after %.0f ms: error %u; "
                  "release after %.0f ms: %s; downgrade after %.0f ms: %s\n",
                  renew_ms, rowlock_error_name(renew_rc), fence_ms, rowlock_error_name(fence_rc), call_ms, call_err,
                  release_ms, rowlock_error_name(release_rc), down_ms, rowlock_error_name(down_rc));
    /* all waited past the lease */
    assert_true(renew_ms >= 1000 && fence_ms >= 1000 && call_ms >= 1000 && release_ms >= 1000 && down_ms >= 1000);
    assert_int_equal(renew_rc, ROWLOCK_ENOTOWNER);
    assert_int_equal(fence_rc, ROWLOCK_EFENCED);
    assert_int_equal(call_err, 1644); /* SIGNAL SQLSTATE 'RLF01' */
    assert_int_equal(release_rc, ROWLOCK_ENOTOWNER);
    assert_int_equal(down_rc, ROWLOCK_ENOTOWNER);
}

/* ---- reaper, force release, listing (insert) ------------------------------ */

static void test_reap__purges_stale_holders_and_tokens_keep_increasing(void **state)
{
    (void)state;
    /* Under the cluster rule the reaper leaves holder entries: the next
     * acquirer of the name removes a dead one after watching it a lease
     * (src/holders.c, "On a Galera cluster"). */
    const char *rule = getenv("ROWLOCK_LEASE_RULE");
    if (S != ROWLOCK_STRATEGY_INSERT || (rule && strcmp(rule, "cluster") == 0))
        skip();
    rowlock_client *a = C(), *b = C(), *w = C(), *admin = C();
    rowlock_lock *ra = ML(a, "reap-holders", ROWLOCK_MODE_SHARED, 0);
    rowlock_lock *rb = ML(b, "reap-holders", ROWLOCK_MODE_SHARED, 0);
    rowlock_lock *wx = ML(w, "reap-holders", ROWLOCK_MODE_EXCLUSIVE, 0);
    assert_rc(rowlock_acquire(ra, 0, 200), 0, a); /* will crash, in effect */
    assert_rc(rowlock_acquire(rb, 0, TU_LEASE_LONG), 0, b);
    uint64_t t_max = rowlock_lock_token(rb);
    tu_sleep_ms(400);

    seen_holders s;
    memset(&s, 0, sizeof s);
    assert_rc(rowlock_admin_holders(admin, "reap-holders", holders_cb, &s), 0, admin);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.live, 1);

    rowlock_reap_options ro = ROWLOCK_REAP_OPTIONS_INIT;
    rowlock_reap_stats st;
    memset(&st, 0, sizeof st);
    st.version = ROWLOCK_REAP_STATS_VERSION;
    ro.grace_ms = 0;
    assert_rc(rowlock_admin_reap(admin, &ro, &st), 0, admin);
    assert_true(st.purged >= 1);
    memset(&s, 0, sizeof s);
    assert_rc(rowlock_admin_holders(admin, "reap-holders", holders_cb, &s), 0, admin);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.owners[0], rowlock_client_owner(b));
    /* The purged holder lost it. */
    assert_rc(rowlock_renew(ra, TU_LEASE_LONG), ROWLOCK_ENOTOWNER, a);

    /* Force release of one holder: it loses, the writer gets in after the rest. */
    unsigned n = 0;
    assert_rc(rowlock_admin_force_release_holder(admin, "reap-holders", rowlock_client_owner(b), &n), 0, admin);
    assert_int_equal(n, 1);
    assert_rc(rowlock_renew(rb, TU_LEASE_LONG), ROWLOCK_ENOTOWNER, b);
    assert_rc(rowlock_acquire(wx, 0, TU_LEASE_LONG), 0, w);
    assert_true(rowlock_lock_token(wx) > t_max);
    /* rowlock_admin_force_release on a multi-holder name releases every holder. */
    rowlock_info in = ROWLOCK_INFO_INIT;
    assert_rc(rowlock_admin_force_release(admin, "reap-holders", &in), 0, admin);
    assert_true(in.held);
    assert_rc(rowlock_release(wx), ROWLOCK_ENOTOWNER, w);
}

/* A table at schema 2 with a live exclusive lock migrates, and the lock is
 * still held, renewed and released afterwards. */
static void test_migrate__from_schema_2_with_live_locks(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT)
        skip();
    const char *df = tu_defaults_file();
    const char *t = "t_modes_migrate";
    tu_table_fresh(df, t);
    assert_int_equal(tu_sql(df, 0, "DROP TABLE `%s_hold`", t), 0);
    assert_int_equal(tu_sql(df, 0, "ALTER TABLE `%s` DROP COLUMN permits", t), 0);
    assert_int_equal(tu_sql(df, 0, "UPDATE rowlock_schema SET version = 2 WHERE lock_table = '%s'", t), 0);

    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    rowlock_client *old = NULL, *m = NULL;
    assert_int_equal(rowlock_client_new(&old), 0);
    tu_register_client(old);
    o.defaults_file = df;
    o.table = t;
    o.flags = ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK;
    assert_rc(rowlock_client_connect(old, &o), 0, old);
    rowlock_lock *x = tu_lock(old, "live", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(x, 0, TU_LEASE_LONG), 0, old);
    uint64_t tx = rowlock_lock_token(x);

    assert_int_equal(rowlock_client_new(&m), 0);
    tu_register_client(m);
    assert_rc(rowlock_client_connect(m, &o), 0, m);
    int from = 0, to = 0;
    assert_rc(rowlock_schema_migrate(m, 0, &from, &to), 0, m);
    assert_int_equal(from, 2);
    assert_int_equal(to, rowlock_schema_version_expected());

    rowlock_client *b = tu_client(t);
    rowlock_lock *r = NULL;
    rowlock_lock_options lo = ROWLOCK_LOCK_OPTIONS_INIT;
    lo.mode = ROWLOCK_MODE_SHARED;
    assert_rc(rowlock_lock_new(&r, b, "live", &lo), 0, b);
    assert_rc(rowlock_acquire(r, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, b); /* the live lock survived */
    assert_rc(rowlock_renew(x, TU_LEASE_LONG), 0, old);
    assert_rc(rowlock_release(x), 0, old);
    assert_rc(rowlock_acquire(r, 0, TU_LEASE_LONG), 0, b);
    assert_true(rowlock_lock_token(r) > tx);
    assert_rc(rowlock_release(r), 0, b);
    rowlock_lock_free(r);
}

/* ---- exclusive one-row names and multi-holder names -------------------- */

static void test_modes__exclusive_handles_meet_shared_holders(void **state)
{
    (void)state;
    rowlock_client *a = C(), *w = C();
    rowlock_lock *x = tu_lock(w, "mixed", S); /* version-1 style: exclusive */
    rowlock_lock *r = ML(a, "mixed", ROWLOCK_MODE_SHARED, 0);
    /* A one-row exclusive holder keeps shared acquirers out. */
    assert_rc(rowlock_acquire(x, 0, TU_LEASE_LONG), 0, w);
    uint64_t tx = rowlock_lock_token(x);
    assert_rc(rowlock_acquire(r, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, a);
    assert_rc(rowlock_release(x), 0, w);
    assert_rc(rowlock_acquire(r, 0, TU_LEASE_LONG), 0, a);
    assert_true(rowlock_lock_token(r) > tx);
    /* Now the name has several holders: the exclusive handle waits for the reader. */
    int64_t ms;
    TU_TIMED(ms, assert_rc(rowlock_acquire(x, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, w));
    assert_true(ms < TU_FAST_MS);
    assert_rc(rowlock_release(r), 0, a);
    assert_rc(rowlock_acquire(x, 0, TU_LEASE_LONG), 0, w);
    assert_true(rowlock_lock_token(x) > rowlock_lock_token(r) || rowlock_lock_token(r) == 0);
    assert_rc(rowlock_renew(x, TU_LEASE_LONG), 0, w);
    assert_rc(rowlock_release(x), 0, w);
}

static void test_modes__optimistic_refuses_shared(void **state)
{
    (void)state;
    rowlock_client *a = C();
    rowlock_lock_options o = ROWLOCK_LOCK_OPTIONS_INIT;
    rowlock_lock *l = NULL;
    o.strategy = ROWLOCK_STRATEGY_OPTIMISTIC;
    o.mode = ROWLOCK_MODE_SHARED;
    assert_rc(rowlock_lock_new(&l, a, "opt", &o), ROWLOCK_EUNSUPPORTED, a);
    o.strategy = ROWLOCK_STRATEGY_FOR_UPDATE;
    o.mode = ROWLOCK_MODE_EXCLUSIVE;
    o.permits = 3;
    assert_rc(rowlock_lock_new(&l, a, "opt", &o), ROWLOCK_EUNSUPPORTED, a);
    /* Version 1 options still make exclusive handles. */
    struct { unsigned int version; rowlock_strategy strategy; } v1 = { 1, ROWLOCK_STRATEGY_INSERT };
    assert_rc(rowlock_lock_new(&l, a, "opt", (const rowlock_lock_options *)(const void *)&v1), 0, a);
    assert_int_equal(rowlock_lock_mode(l), ROWLOCK_MODE_EXCLUSIVE);
    rowlock_lock_free(l);
}

/* ms left of `owner`'s entry of `name` (server clock); -1: none. */
static long long entry_left_ms(const char *name, const char *owner)
{
    int ok = 0;
    long long v = tu_sql_int(NULL, &ok,
                             "SELECT IFNULL(MAX(FLOOR(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1000)), -1)"
                             " FROM `%s_hold` WHERE name = '%s' AND owner = '%s'",
                             TABLE, name, owner);
    assert_true(ok);
    return v;
}

/*
 * A shared holder's renewal never shortens its lease (as a one-row
 * holder's: test_lease), so the keeper's safe time is never past the
 * entry's end. Acquired for 20 s, renewed by hand for 1 s, kept with 1 s
 * renewals. Planted renewal that sets now + lease: the entry ends within
 * 1 s while the keeper says ~18 s (fails).
 */
static void test_shared__a_renewal_never_shortens_the_lease(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT || cluster_rule())
        skip(); /* for-update: the session is the lease; the cluster rule: no clock */
    rowlock_client *a = C();
    rowlock_lock *ra = ML(a, "renew-short", ROWLOCK_MODE_SHARED, 0);
    const char *owner = rowlock_client_owner(a);
    assert_rc(rowlock_acquire(ra, 0, 20000), 0, a);
    assert_rc(rowlock_renew(ra, 1000), 0, a);
    const long long after_renew = entry_left_ms("renew-short", owner);
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    ko.lease_ms = 1000;
    assert_rc(rowlock_keep(ra, &ko), 0, a);
    tu_sleep_ms(1500); /* renewals every 333 ms */
    rowlock_keep_info ki = ROWLOCK_KEEP_INFO_INIT;
    assert_int_equal(rowlock_keep_status(ra, &ki), 0);
    const int64_t t1 = tu_now_us();
    const long long left = entry_left_ms("renew-short", owner);
    const int64_t since_ms = (tu_now_us() - t1) / 1000 + 1;
    assert_rc(rowlock_release(ra), 0, a);
    print_message("  entry left after a 1 s renewal: %lld ms; keeper safe for %lld ms, the entry %lld ms\n",
                  after_renew, (long long)ki.safe_ms, left);
    assert_true(after_renew > 15000);
    assert_true(ki.renewals >= 1);
    assert_true(ki.safe_ms - since_ms <= left + 50);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_shared__readers_coexist),
        TU_TEST(test_shared__a_writer_excludes_and_is_excluded),
        TU_TEST(test_shared__a_writer_is_not_starved_by_later_readers),
        TU_TEST(test_shared__readers_and_writers_never_overlap),
        TU_TEST(test_shared__the_lease_keeper_renews_shared_holders),
        TU_TEST(test_shared__a_renewal_never_shortens_the_lease),
        TU_TEST(test_shared__a_lapsed_sibling_handle_does_not_keep_a_fresh_grant),
        TU_TEST(test_shared__a_renewal_or_fence_that_waited_past_the_lease_is_refused),
        TU_TEST(test_shared__a_renewing_holder_keeps_a_writer_out_a_lapsed_one_does_not),
        TU_TEST(test_shared__a_release_after_the_lease_ended_reports_the_loss),
        TU_TEST(test_semaphore__never_more_than_n_holders),
        TU_TEST(test_semaphore__one_permit_is_mutual_exclusion),
        TU_TEST(test_semaphore__permits_change_keeps_holders),
        TU_TEST(test_semaphore__cluster_rule_permits_never_take_a_held_row),
        TU_TEST(test_semaphore__a_waiter_behind_a_waiter_is_woken_by_its_grant),
        TU_TEST(test_semaphore__a_killed_waiter_blocks_nobody),
        TU_TEST(test_semaphore__a_long_waiter_keeps_its_place),
        TU_TEST(test_semaphore__a_paused_waiter_is_passed_over_after_5_s),
        TU_TEST(test_reap__purges_stale_holders_and_tokens_keep_increasing),
        TU_TEST(test_migrate__from_schema_2_with_live_locks),
        TU_TEST(test_modes__exclusive_handles_meet_shared_holders),
        TU_TEST(test_modes__optimistic_refuses_shared),
    };
    if (argc < 2 || rowlock_strategy_parse(&S, argv[1]) != 0 || S == ROWLOCK_STRATEGY_OPTIMISTIC) {
        fprintf(stderr, "usage: %s insert|for-update [test-filter]\n", argv[0]);
        return 2;
    }
    char name[64];
    const char *rule = getenv("ROWLOCK_LEASE_RULE"); /* the seam build's forced rule: a table of its own */
    const char *sql_mode = getenv("ROWLOCK_TEST_SQL_MODE"); /* db_modes_insert_simultaneous_assignment */
    snprintf(TABLE, sizeof TABLE, "t_modes_%s", rule && strcmp(rule, "cluster") == 0 ? "cl"
                                                : sql_mode && *sql_mode                  ? "sa"
                                                : S == ROWLOCK_STRATEGY_INSERT           ? "insert"
                                                                                         : "fu");
    if (sql_mode && *sql_mode) {
        /* The sessions must really run in that mode (init-command in the
         * option file, tests/db/db.cmake), or the run proves nothing. */
        int ok = 0;
        long long on = tu_sql_int(NULL, &ok, "SELECT FIND_IN_SET('%s', @@session.sql_mode) > 0", sql_mode);
        if (!ok || on != 1) {
            fprintf(stderr, "ROWLOCK_TEST_SQL_MODE=%s: the test sessions do not run with it\n", sql_mode);
            return 1;
        }
    }
    snprintf(name, sizeof name, "modes (%s)", argv[1]);
    return tu_main(name, tests, sizeof tests / sizeof tests[0], TABLE, argc > 2 ? argv[2] : NULL);
}
