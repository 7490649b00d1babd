/*
 * Fenced writes (issue 28 item 1), per lease strategy: rowlock_fence() and
 * the SQL form CALL `<table>_fence`(name, token) make the application's own
 * transaction, on its own connection, commit only under the current grant.
 * A holder paused (SIGSTOP) past its lease, whose lock was then taken, cannot
 * commit a fenced transaction and nothing it wrote is kept; an unpaused
 * holder's fenced transactions all commit; a fenced transaction blocks a
 * taker until it commits; shared holders (insert) fence on their entry.
 *
 *     test_fence insert|optimistic [test-filter]
 *
 * History check: every fenced transaction bumps a counter row and writes
 * (token, seq) with the counter's new value, so `seq` is the commit order
 * (the counter row's lock serialises them). A row of a stale grant with a
 * seq above the taker's first row is a fenced write that committed after
 * the take-over: the failure the fence exists to prevent.
 */
#include "testutil.h"

#include <mysql.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static rowlock_strategy S;
static char TABLE[64];
static char DATA[80];

/* Release whatever is left; its result (0 or ENOTOWNER) is not the point. */
static void release_any(rowlock_lock *l)
{
    int rc = rowlock_release(l);
    (void)rc;
}

/* Shared handles of `name` on clients a and b (registered for teardown). */
static void two_readers(rowlock_client *a, rowlock_client *b, const char *name, rowlock_lock **ra, rowlock_lock **rb)
{
    rowlock_lock_options so = ROWLOCK_LOCK_OPTIONS_INIT;
    so.mode = ROWLOCK_MODE_SHARED;
    *ra = *rb = NULL;
    assert_rc(rowlock_lock_new(ra, a, name, &so), 0, a);
    assert_rc(rowlock_lock_new(rb, b, name, &so), 0, b);
    tu_register_lock(*ra);
    tu_register_lock(*rb);
}

static rowlock_client *C(void)
{
    return tu_client(TABLE);
}

static void data_fresh(void)
{
    tu_sql(NULL, 0, "DROP TABLE IF EXISTS `%s`", DATA);
    tu_sql(NULL, 0, "DROP TABLE IF EXISTS `%s_ctr`", DATA);
    tu_sql(NULL, 0,
           "CREATE TABLE `%s` (id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(64) NOT NULL, "
           "token BIGINT UNSIGNED NOT NULL, seq BIGINT NOT NULL) ENGINE=InnoDB",
           DATA);
    tu_sql(NULL, 0, "CREATE TABLE `%s_ctr` (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB", DATA);
    tu_sql(NULL, 0, "INSERT INTO `%s_ctr` VALUES (1, 0)", DATA);
}

/* The application's writes in its open transaction: the counter, then a row. */
static unsigned write_row(void *m, const char *name, uint64_t token)
{
    char sql[512];
    snprintf(sql, sizeof sql, "UPDATE `%s_ctr` SET v = LAST_INSERT_ID(v + 1) WHERE id = 1", DATA);
    unsigned e = tu_mysql_query(m, sql);
    if (e)
        return e;
    snprintf(sql, sizeof sql, "INSERT INTO `%s` (name, token, seq) VALUES ('%s', %llu, LAST_INSERT_ID())", DATA, name,
             (unsigned long long)token);
    return tu_mysql_query(m, sql);
}

/* The SQL form on `m`: 0, or the error number (sqlstate copied). */
static unsigned call_fence(void *m, const char *name, uint64_t token, char sqlstate[6])
{
    char sql[512];
    snprintf(sql, sizeof sql, "CALL `%s_fence`('%s', %llu)", TABLE, name, (unsigned long long)token);
    unsigned e = tu_mysql_query(m, sql);
    snprintf(sqlstate, 6, "%s", mysql_sqlstate((MYSQL *)m));
    return e;
}

static long long rows_of(const char *name, uint64_t token)
{
    int ok = 0;
    long long n = tu_sql_int(NULL, &ok, "SELECT COUNT(*) FROM `%s` WHERE name = '%s' AND token = %llu", DATA, name,
                             (unsigned long long)token);
    assert_true(ok);
    return n;
}

/* One fenced transaction, library or SQL form: 0 committed, else the
 * fence's code (ROWLOCK_EFENCED for both forms) after a rollback. */
static int fenced_txn(rowlock_lock *l, void *m, int sql_form)
{
    const char *name = rowlock_lock_name(l);
    uint64_t token = rowlock_lock_token(l);
    assert_int_equal(tu_mysql_query(m, "START TRANSACTION"), 0);
    assert_int_equal(write_row(m, name, token), 0);
    int rc;
    if (sql_form) {
        char st[6];
        unsigned e = call_fence(m, name, token, st);
        rc = e == 0 ? 0 : strcmp(st, "RLF01") == 0 ? ROWLOCK_EFENCED : ROWLOCK_EDB;
    } else {
        rc = rowlock_fence(l, m);
    }
    assert_int_equal(tu_mysql_query(m, rc ? "ROLLBACK" : "COMMIT"), 0);
    return rc;
}

/* ---- the grant is current: fenced transactions commit ---------------------- */

static void test_fence__a_live_holder_commits_every_fenced_transaction(void **state)
{
    (void)state;
    data_fresh();
    rowlock_client *a = C();
    rowlock_lock *l = tu_lock(a, "live", S);
    void *m = tu_mysql_connect(NULL, 0);
    assert_non_null(m);
    assert_rc(rowlock_acquire(l, 0, TU_LEASE_LONG), 0, a);
    for (int i = 0; i < 20; i++) {
        int rc = fenced_txn(l, m, i % 2);
        if (rc)
            fail_msg("fenced transaction %d (%s form): %s: %s", i, i % 2 ? "SQL" : "C", rowlock_error_name(rc),
                     rowlock_client_errmsg(a));
    }
    assert_int_equal(rows_of("live", rowlock_lock_token(l)), 20);
    /* Re-entry keeps the grant: still fenced. */
    assert_rc(rowlock_acquire(l, 0, TU_LEASE_LONG), 0, a);
    assert_int_equal(fenced_txn(l, m, 0), 0);
    assert_rc(rowlock_release(l), 0, a);
    assert_rc(rowlock_release(l), 0, a);
    tu_mysql_close(m);
}

/* ---- the grant is gone: nothing commits ------------------------------------ */

static void test_fence__a_taken_over_grant_cannot_commit(void **state)
{
    (void)state;
    data_fresh();
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = tu_lock(a, "taken", S), *lb = tu_lock(b, "taken", S);
    void *m = tu_mysql_connect(NULL, 0);
    assert_non_null(m);
    assert_rc(rowlock_acquire(la, 0, 1000), 0, a);
    uint64_t old = rowlock_lock_token(la);
    /* b waits for a's lease to end and takes the lock. */
    assert_rc(rowlock_acquire(lb, 30000, TU_LEASE_LONG), 0, b);
    assert_true(rowlock_lock_token(lb) > old);
    for (int form = 0; form < 2; form++) {
        int rc = fenced_txn(la, m, form);
        if (rc != ROWLOCK_EFENCED)
            fail_msg("%s form: a stale grant fenced: %s", form ? "SQL" : "C", rowlock_error_name(rc));
    }
    assert_rc(rowlock_fence(la, NULL), ROWLOCK_EINVALID, a);
    assert_int_equal(rows_of("taken", old), 0);
    /* The message names the lock and says what to do. */
    assert_int_equal(tu_mysql_query(m, "START TRANSACTION"), 0);
    assert_rc(rowlock_fence(la, m), ROWLOCK_EFENCED, a);
    tu_assert_msg_has(a, "roll the transaction back", __FILE__, __LINE__);
    assert_int_equal(tu_mysql_query(m, "ROLLBACK"), 0);
    /* The new holder fences. */
    assert_int_equal(fenced_txn(lb, m, 0), 0);
    assert_int_equal(fenced_txn(lb, m, 1), 0);
    assert_int_equal(rows_of("taken", rowlock_lock_token(lb)), 2);
    /* Released: no longer current either. */
    uint64_t tb = rowlock_lock_token(lb);
    assert_rc(rowlock_release(lb), 0, b);
    char st[6];
    assert_int_equal(tu_mysql_query(m, "START TRANSACTION"), 0);
    assert_int_not_equal(call_fence(m, "taken", tb, st), 0);
    assert_string_equal(st, "RLF01");
    assert_int_equal(tu_mysql_query(m, "ROLLBACK"), 0);
    assert_rc(rowlock_release(la), ROWLOCK_ENOTOWNER, a);
    tu_mysql_close(m);
}

/* A fenced transaction holds the row: a taker waits for its commit. */
static void test_fence__a_fenced_transaction_blocks_a_taker_until_it_commits(void **state)
{
    (void)state;
    data_fresh();
    rowlock_client *a = C(), *b = C();
    rowlock_lock *la = tu_lock(a, "blocks", S), *lb = tu_lock(b, "blocks", S);
    void *m = tu_mysql_connect(NULL, 0);
    assert_non_null(m);
    assert_rc(rowlock_acquire(la, 0, 1000), 0, a);
    tu_wait_lease_ended(la, 30000);
    /* Ended but not taken: the exclusive row still fences (documented). */
    assert_int_equal(tu_mysql_query(m, "START TRANSACTION"), 0);
    assert_int_equal(write_row(m, "blocks", rowlock_lock_token(la)), 0);
    assert_rc(rowlock_fence(la, m), 0, a);
    /* The taker cannot take the row while the fenced transaction is open. */
    assert_rc(rowlock_acquire(lb, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, b);
    assert_int_equal(tu_mysql_query(m, "COMMIT"), 0);
    assert_rc(rowlock_acquire(lb, 30000, TU_LEASE_LONG), 0, b);
    assert_int_equal(rows_of("blocks", rowlock_lock_token(la)), 1);
    assert_int_equal(fenced_txn(la, m, 0), ROWLOCK_EFENCED);
    assert_rc(rowlock_release(lb), 0, b);
    assert_rc(rowlock_release(la), ROWLOCK_ENOTOWNER, a);
    tu_mysql_close(m);
}

static void test_fence__refusals(void **state)
{
    (void)state;
    data_fresh();
    rowlock_client *a = C();
    rowlock_lock *l = tu_lock(a, "refusals", S);
    void *m = tu_mysql_connect(NULL, 0);
    assert_non_null(m);
    assert_rc(rowlock_fence(l, m), ROWLOCK_EINVALID, a); /* holds nothing */
    tu_assert_msg_has(a, "holds nothing", __FILE__, __LINE__);
    assert_rc(rowlock_acquire(l, 0, TU_LEASE_LONG), 0, a);
    /* autocommit, no transaction: refused, in both forms */
    assert_int_equal(tu_mysql_query(m, "SELECT 1"), 0);
    assert_rc(rowlock_fence(l, m), ROWLOCK_EINVALID, a);
    tu_assert_msg_has(a, "not inside a transaction", __FILE__, __LINE__);
    char st[6];
    assert_int_not_equal(call_fence(m, "refusals", rowlock_lock_token(l), st), 0);
    assert_string_equal(st, "RLF02");
    /* autocommit off: every statement is in a transaction */
    assert_int_equal(tu_mysql_query(m, "SET autocommit = 0"), 0);
    assert_rc(rowlock_fence(l, m), 0, a);
    assert_int_equal(tu_mysql_query(m, "ROLLBACK"), 0);
    assert_int_equal(call_fence(m, "refusals", rowlock_lock_token(l), st), 0);
    assert_int_equal(tu_mysql_query(m, "ROLLBACK"), 0);
    assert_int_equal(tu_mysql_query(m, "SET autocommit = 1"), 0);
    assert_rc(rowlock_release(l), 0, a);
    /* for-update: refused with its reason */
    rowlock_lock *f = tu_lock(a, "refusals-fu", ROWLOCK_STRATEGY_FOR_UPDATE);
    assert_rc(rowlock_acquire(f, 0, TU_LEASE_LONG), 0, a);
    assert_int_equal(tu_mysql_query(m, "START TRANSACTION"), 0);
    assert_rc(rowlock_fence(f, m), ROWLOCK_EUNSUPPORTED, a);
    assert_int_equal(tu_mysql_query(m, "ROLLBACK"), 0);
    assert_rc(rowlock_release(f), 0, a);
    assert_string_equal(rowlock_error_name(ROWLOCK_EFENCED), "ROWLOCK_EFENCED");
    tu_mysql_close(m);
}

/* ---- SIGSTOP: a paused holder whose lock was taken ------------------------ */

typedef struct paused_shared {
    uint64_t token;       /* the child's grant */
    int committed;        /* fenced transactions committed before the pause */
    int after_rc;         /* the fence's code after SIGCONT */
    int after_commits;    /* fenced transactions committed after SIGCONT */
    char msg[256];
} paused_shared;

static tu_pipe paused_ready;

/* A holder with a keeper: fenced transactions, then it stops itself between
 * two of them (SIGSTOP: the keeper stops too), then tries again. */
static int paused_holder(void *arg, int sql_form)
{
    paused_shared *sh = arg;
    rowlock_client *c = tu_child_client(NULL, TABLE);
    rowlock_lock *l = NULL;
    if (c == NULL || rowlock_lock_new(&l, c, "paused", &(rowlock_lock_options){ ROWLOCK_LOCK_OPTIONS_VERSION, S,
                                                                                 ROWLOCK_MODE_EXCLUSIVE, 0 }))
        return 10;
    void *m = tu_mysql_connect(NULL, 0);
    if (m == NULL)
        return 11;
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    if (rowlock_acquire(l, 0, 1500) != 0 || rowlock_keep(l, &ko) != 0)
        return 12;
    sh->token = rowlock_lock_token(l);
    for (int i = 0; i < 10; i++) {
        if (fenced_txn(l, m, sql_form) != 0) {
            snprintf(sh->msg, sizeof sh->msg, "unpaused fence %d: %s", i, rowlock_client_errmsg(c));
            return 13;
        }
        sh->committed++;
    }
    tu_signal(&paused_ready, 'S');
    raise(SIGSTOP);
    /* Resumed after the take-over: every fenced transaction must fail. */
    for (int i = 0; i < 3; i++) {
        int rc = fenced_txn(l, m, sql_form);
        if (i == 0)
            sh->after_rc = rc;
        if (rc == 0)
            sh->after_commits++;
    }
    tu_mysql_close(m);
    return 0;
}

static void paused_case(int sql_form)
{
    data_fresh();
    paused_shared *sh = tu_shm(sizeof *sh);
    tu_pipe_open(&paused_ready);
    pid_t p = tu_fork(paused_holder, sh, sql_form);
    if (tu_await(&paused_ready, 60000) != 'S')
        fail_msg("the holder did not get to its pause (%s)", sh->msg);
    int st = 0;
    assert_int_equal(waitpid(p, &st, WUNTRACED), p); /* stopped: holder and keeper */
    assert_true(WIFSTOPPED(st));
    assert_int_equal(sh->committed, 10);
    rowlock_client *b = C();
    rowlock_lock *lb = tu_lock(b, "paused", S);
    assert_rc(rowlock_acquire(lb, 60000, TU_LEASE_LONG), 0, b);
    void *m = tu_mysql_connect(NULL, 0);
    assert_non_null(m);
    assert_int_equal(fenced_txn(lb, m, sql_form), 0);
    int ok = 0;
    long long taker_seq =
        tu_sql_int(NULL, &ok, "SELECT MIN(seq) FROM `%s` WHERE token = %llu", DATA,
                   (unsigned long long)rowlock_lock_token(lb));
    assert_true(ok);
    assert_int_equal(kill(p, SIGCONT), 0);
    assert_int_equal(tu_wait(p, 60000), 0);
    if (sh->after_rc != ROWLOCK_EFENCED || sh->after_commits != 0)
        fail_msg("%s form: the paused holder's fence after the take-over said %s, %d commits", sql_form ? "SQL" : "C",
                 rowlock_error_name(sh->after_rc), sh->after_commits);
    /* The history: all of the old grant's rows committed before the taker's. */
    assert_int_equal(rows_of("paused", sh->token), 10);
    long long late = tu_sql_int(NULL, &ok, "SELECT COUNT(*) FROM `%s` WHERE token = %llu AND seq > %lld", DATA,
                                (unsigned long long)sh->token, taker_seq);
    assert_true(ok);
    assert_int_equal(late, 0);
    assert_rc(rowlock_release(lb), 0, b);
    tu_mysql_close(m);
    tu_pipe_close(&paused_ready);
    tu_shm_free(sh, sizeof *sh);
}

static void test_fence__a_holder_paused_past_its_lease_cannot_commit_c(void **state)
{
    (void)state;
    paused_case(0);
}

static void test_fence__a_holder_paused_past_its_lease_cannot_commit_sql(void **state)
{
    (void)state;
    paused_case(1);
}

/* ---- shared holders (insert): the entry's own lease ---------------------- */

static void test_fence__shared_holders_fence_on_their_entry(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT)
        skip();
    data_fresh();
    rowlock_client *a = C(), *b = C(), *w = C();
    rowlock_lock *ra, *rb;
    two_readers(a, b, "shared", &ra, &rb);
    rowlock_lock *wx = tu_lock(w, "shared", S);
    void *m = tu_mysql_connect(NULL, 0);
    assert_non_null(m);
    assert_rc(rowlock_acquire(ra, 0, 1000), 0, a);
    assert_rc(rowlock_acquire(rb, 0, TU_LEASE_LONG), 0, b);
    /* Two readers fence at once: neither blocks the other. */
    void *m2 = tu_mysql_connect(NULL, 0);
    assert_non_null(m2);
    assert_int_equal(tu_mysql_query(m, "START TRANSACTION"), 0);
    assert_int_equal(tu_mysql_query(m2, "START TRANSACTION"), 0);
    assert_rc(rowlock_fence(ra, m), 0, a);
    assert_rc(rowlock_fence(rb, m2), 0, b);
    assert_int_equal(tu_mysql_query(m, "COMMIT"), 0);
    assert_int_equal(tu_mysql_query(m2, "COMMIT"), 0);
    assert_int_equal(fenced_txn(ra, m, 1), 0);
    /* a's lease ends; b releases; the writer takes the name (passing over
     * a's ended entry without writing it): a's fences fail, both forms. */
    uint64_t ta = rowlock_lock_token(ra);
    assert_rc(rowlock_release(rb), 0, b);
    assert_rc(rowlock_acquire(wx, 30000, TU_LEASE_LONG), 0, w);
    int ok = 0;
    assert_int_equal(tu_sql_int(NULL, &ok, "SELECT COUNT(*) FROM `%s_hold` WHERE name = 'shared' AND token = %llu",
                                TABLE, (unsigned long long)ta),
                     1); /* the entry is still there: the expiry check decides */
    assert_int_equal(fenced_txn(ra, m, 0), ROWLOCK_EFENCED);
    assert_int_equal(fenced_txn(ra, m, 1), ROWLOCK_EFENCED);
    assert_int_equal(rows_of("shared", ta), 1);
    assert_rc(rowlock_release(wx), 0, w);
    release_any(ra);
    tu_mysql_close(m);
    tu_mysql_close(m2);
}

/* Readers that joined share their opener's token, so (name, token) names
 * no single entry. While the name is still open at that token (no writer
 * drew since), the SQL form share-locks the names row and no entry: it
 * commits for any reader of that token (a lapsed one too: nobody took the
 * name), and the other readers' renewals go on meanwhile (0005's procedure
 * locked the greatest owner's entry and refused when that one had lapsed:
 * planted back, fails). Once a writer took the name, it refuses. The C
 * form fences each caller's own entry. */
static void test_fence__readers_sharing_a_token_fence_while_one_holds(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT)
        skip();
    data_fresh();
    rowlock_client *a = C(), *b = C(), *w = C();
    rowlock_lock *ra, *rb;
    two_readers(a, b, "joined", &ra, &rb);
    rowlock_lock *wx = tu_lock(w, "joined", S);
    /* The greater owner gets the short lease. */
    const int a_greater = strcmp(rowlock_client_owner(a), rowlock_client_owner(b)) > 0;
    rowlock_lock *lapsing = a_greater ? ra : rb, *live = a_greater ? rb : ra;
    rowlock_client *live_c = a_greater ? b : a;
    assert_rc(rowlock_acquire(ra, 0, a_greater ? 1000 : TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_acquire(rb, 0, a_greater ? TU_LEASE_LONG : 1000), 0, b);
    assert_true(rowlock_lock_token(ra) == rowlock_lock_token(rb)); /* b joined a */
    void *m = tu_mysql_connect(NULL, 0);
    assert_non_null(m);
    tu_sleep_ms(1300);
    assert_int_equal(fenced_txn(live, m, 1), 0);
    assert_int_equal(fenced_txn(lapsing, m, 1), 0); /* the same (name, token); nobody took the name */
    assert_int_equal(fenced_txn(live, m, 0), 0);
    assert_int_equal(fenced_txn(lapsing, m, 0), ROWLOCK_EFENCED);
    /* A fenced transaction left open locks no reader's entry: the live
     * reader renews at once meanwhile. */
    void *m2 = tu_mysql_connect(NULL, 0);
    assert_non_null(m2);
    assert_int_equal(tu_mysql_query(m2, "START TRANSACTION"), 0);
    char st[6];
    assert_int_equal(call_fence(m2, "joined", rowlock_lock_token(live), st), 0);
    int64_t t0 = tu_now_us();
    assert_rc(rowlock_renew(live, TU_LEASE_LONG), 0, live_c);
    assert_true(tu_ms_since(t0) < 500);
    assert_int_equal(tu_mysql_query(m2, "COMMIT"), 0);
    tu_mysql_close(m2);
    /* The live reader leaves; the writer takes the name (the lapsed entry
     * passed over): the SQL form refuses now. */
    assert_rc(rowlock_release(live), 0, live_c);
    assert_rc(rowlock_acquire(wx, 10000, TU_LEASE_LONG), 0, w);
    assert_int_equal(fenced_txn(lapsing, m, 1), ROWLOCK_EFENCED);
    assert_rc(rowlock_release(wx), 0, w);
    release_any(lapsing);
    tu_mysql_close(m);
}

typedef struct writer_arg {
    rowlock_lock *l;
    int rc;
} writer_arg;

static void *writer_acquire(void *arg)
{
    writer_arg *a = arg;
    a->rc = rowlock_acquire(a->l, 15000, TU_LEASE_LONG);
    return NULL;
}

/* After a writer queued (its token draw closed the name to joining readers),
 * the SQL form of a reader whose token other readers share fences a live
 * entry of that token: the live reader commits, though a reader of the same
 * token with a greater owner lapsed (crashed). 0008's procedure fenced the
 * greatest owner's entry, the lapsed one, and refused the live reader until
 * the reaper purged it (planted back: fails). A live entry of the token
 * keeps every writer out until the fenced transaction ends, as the caller's
 * own would. */
static void test_fence__a_live_reader_fences_past_a_lapsed_one_after_a_writer_queued(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT)
        skip();
    data_fresh();
    rowlock_client *a = C(), *b = C(), *w = C();
    rowlock_lock *ra, *rb;
    two_readers(a, b, "closed", &ra, &rb);
    writer_arg wa = { tu_lock(w, "closed", S), -99 };
    const int a_greater = strcmp(rowlock_client_owner(a), rowlock_client_owner(b)) > 0;
    rowlock_lock *lapsing = a_greater ? ra : rb, *live = a_greater ? rb : ra;
    assert_rc(rowlock_acquire(ra, 0, a_greater ? 1000 : TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_acquire(rb, 0, a_greater ? TU_LEASE_LONG : 1000), 0, b);
    assert_true(rowlock_lock_token(ra) == rowlock_lock_token(rb)); /* b joined a */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, writer_acquire, &wa), 0);
    long long queued = 0;
    for (int i = 0; i < 500 && queued != 1; i++) {
        int ok = 0;
        queued = tu_sql_int(NULL, &ok, "SELECT COUNT(*) FROM `%s_hold` WHERE name = 'closed' AND mode = 0", TABLE);
        if (queued != 1)
            tu_sleep_ms(10);
    }
    tu_sleep_ms(1300); /* the greater owner's lease ends */
    void *m = tu_mysql_connect(NULL, 0);
    const int sql_rc = m ? fenced_txn(live, m, 1) : -1;
    const int c_rc = m ? fenced_txn(live, m, 0) : -1;
    const int lapsed_rc = m ? fenced_txn(lapsing, m, 0) : -1;
    const int live_release = rowlock_release(live); /* lets the writer in */
    assert_int_equal(pthread_join(t, NULL), 0);
    if (wa.rc == 0)
        assert_rc(rowlock_release(wa.l), 0, w);
    release_any(lapsing);
    if (m)
        tu_mysql_close(m);
    assert_int_equal(live_release, 0);
    assert_int_equal(queued, 1);
    assert_int_equal(wa.rc, 0);
    assert_int_equal(sql_rc, 0);
    assert_int_equal(c_rc, 0);
    assert_int_equal(lapsed_rc, ROWLOCK_EFENCED);
}

/* Readers sharing a token, then a semaphore acquirer gives the name 2
 * permits and waits; one reader's lease ends, and its permit goes to the
 * semaphore acquirer. The SQL form of the lapsed reader must refuse now,
 * though the other reader of its token is live: 0008 fenced the greatest
 * owner's entry, which here is the live reader's, and the lapsed reader
 * committed beside the two holders (planted back: fails). The SQL form
 * refuses every reader of such a token (it cannot tell the caller's
 * entry); the C form fences each caller's own. */
static void test_fence__a_lapsed_reader_cannot_commit_once_its_permit_went_to_a_semaphore(void **state)
{
    (void)state;
    if (S != ROWLOCK_STRATEGY_INSERT)
        skip();
    data_fresh();
    rowlock_client *a = C(), *b = C(), *sc = C();
    rowlock_lock *ra, *rb;
    two_readers(a, b, "mixed", &ra, &rb);
    writer_arg sa = { tu_lock_mode(sc, "mixed", S, ROWLOCK_MODE_SHARED, 2), -99 };
    /* The lesser owner lapses: 0008 fenced the greater, live one. */
    const int a_lesser = strcmp(rowlock_client_owner(a), rowlock_client_owner(b)) < 0;
    rowlock_lock *lapsing = a_lesser ? ra : rb, *live = a_lesser ? rb : ra;
    rowlock_client *live_c = a_lesser ? b : a;
    assert_rc(rowlock_acquire(ra, 0, a_lesser ? 1000 : TU_LEASE_LONG), 0, a);
    assert_rc(rowlock_acquire(rb, 0, a_lesser ? TU_LEASE_LONG : 1000), 0, b);
    assert_true(rowlock_lock_token(ra) == rowlock_lock_token(rb)); /* b joined a */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, writer_acquire, &sa), 0);
    assert_int_equal(pthread_join(t, NULL), 0); /* granted once the lapsing lease ended */
    void *m = tu_mysql_connect(NULL, 0);
    const int lapsed_sql = m ? fenced_txn(lapsing, m, 1) : -1;
    const int lapsed_c = m ? fenced_txn(lapsing, m, 0) : -1;
    const int live_sql = m ? fenced_txn(live, m, 1) : -1;
    const int live_c_rc = m ? fenced_txn(live, m, 0) : -1;
    /* The lapsed reader's late release deletes its entry (ENOTOWNER): the
     * live reader's entry is then the only one of the token, and the SQL
     * form must still refuse that token (a review found 0009's first fix
     * fencing it: planted back, fails). */
    const uint64_t token = rowlock_lock_token(lapsing);
    const int late_release = rowlock_release(lapsing);
    int gone_sql = -1;
    if (m && tu_mysql_query(m, "START TRANSACTION") == 0 && write_row(m, "mixed", token) == 0) {
        char st[6];
        const unsigned e = call_fence(m, "mixed", token, st);
        gone_sql = e == 0 ? 0 : strcmp(st, "RLF01") == 0 ? ROWLOCK_EFENCED : ROWLOCK_EDB;
        (void)tu_mysql_query(m, gone_sql ? "ROLLBACK" : "COMMIT");
    }
    if (m)
        tu_mysql_close(m);
    if (sa.rc == 0)
        assert_rc(rowlock_release(sa.l), 0, sc);
    assert_rc(rowlock_release(live), 0, live_c);
    assert_int_equal(late_release, ROWLOCK_ENOTOWNER);
    assert_int_equal(gone_sql, ROWLOCK_EFENCED);
    assert_int_equal(sa.rc, 0);
    assert_int_equal(lapsed_sql, ROWLOCK_EFENCED);
    assert_int_equal(lapsed_c, ROWLOCK_EFENCED);
    assert_int_equal(live_sql, ROWLOCK_EFENCED); /* the SQL form cannot tell it from the lapsed one */
    assert_int_equal(live_c_rc, 0);
}

int main(int argc, char **argv)
{
    if (argc < 2 || rowlock_strategy_parse(&S, argv[1]) != 0 || S == ROWLOCK_STRATEGY_FOR_UPDATE) {
        fprintf(stderr, "usage: test_fence insert|optimistic [filter]\n");
        return 2;
    }
    snprintf(TABLE, sizeof TABLE, "t_fence_%s", argv[1]);
    snprintf(DATA, sizeof DATA, "t_fence_data_%s", argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fence__a_live_holder_commits_every_fenced_transaction, tu_setup,
                                        tu_teardown),
        cmocka_unit_test_setup_teardown(test_fence__a_taken_over_grant_cannot_commit, tu_setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_fence__a_fenced_transaction_blocks_a_taker_until_it_commits, tu_setup,
                                        tu_teardown),
        cmocka_unit_test_setup_teardown(test_fence__refusals, tu_setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_fence__a_holder_paused_past_its_lease_cannot_commit_c, tu_setup,
                                        tu_teardown),
        cmocka_unit_test_setup_teardown(test_fence__a_holder_paused_past_its_lease_cannot_commit_sql, tu_setup,
                                        tu_teardown),
        cmocka_unit_test_setup_teardown(test_fence__shared_holders_fence_on_their_entry, tu_setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_fence__readers_sharing_a_token_fence_while_one_holds, tu_setup,
                                        tu_teardown),
        cmocka_unit_test_setup_teardown(test_fence__a_live_reader_fences_past_a_lapsed_one_after_a_writer_queued,
                                        tu_setup, tu_teardown),
        cmocka_unit_test_setup_teardown(test_fence__a_lapsed_reader_cannot_commit_once_its_permit_went_to_a_semaphore,
                                        tu_setup, tu_teardown),
    };
    char name[64];
    snprintf(name, sizeof name, "fence_%s", argv[1]);
    return tu_main(name, tests, sizeof tests / sizeof tests[0], TABLE, argc > 2 ? argv[2] : NULL);
}
