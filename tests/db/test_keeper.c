/*
 * The lease keeper (rowlock_keep), against the shared test server, once per
 * strategy: `test_keeper insert|optimistic|for-update`.
 *
 * Lease strategies: the keeper renews through a task ten leases long; a
 * killed keeper connection is a transient error it survives; a force release
 * is reported within one renewal interval, and the callback runs once; the
 * safe-until time never passes the lease end the server holds, also while an
 * administrator's row lock blocks every renewal.
 * for-update: the end of the holding session (KILL from another connection)
 * is reported at once, with the time it took.
 * One connection (ROWLOCK_KEEP_SAME_CONNECTION, lease strategies): under an
 * account allowed one connection (MAX_USER_CONNECTIONS 1, made with the
 * shared sandbox's admin access) a kept lock is renewed for several leases on
 * the client's own session, where a keeper of its own connection is refused;
 * a KILL of that session is ridden out (the renewal reconnects it).
 */
#include "testutil.h"

#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static rowlock_strategy strategy;
static const char *strategy_arg;
static char TABLE[64]; /* t_keeper_<strategy>: the three programs run side by side */

typedef struct events {
    pthread_mutex_t mu;
    int calls;
    rowlock_keep_state state;
    int code;
    int64_t at_us;
} events;

static void on_event(rowlock_lock *l, const rowlock_keep_info *st, void *arg)
{
    events *ev = arg;
    rowlock_keep_info again = ROWLOCK_KEEP_INFO_INIT;
    /* Allowed from the callback: status of the same lock. */
    int rc = rowlock_keep_status(l, &again);
    pthread_mutex_lock(&ev->mu);
    ev->calls++;
    ev->state = rc == 0 ? st->state : ROWLOCK_KEEP_NONE;
    ev->code = st->code;
    ev->at_us = tu_now_us();
    pthread_mutex_unlock(&ev->mu);
}

static int ev_calls(events *ev)
{
    pthread_mutex_lock(&ev->mu);
    int n = ev->calls;
    pthread_mutex_unlock(&ev->mu);
    return n;
}

static rowlock_keep_info status_of(rowlock_lock *l)
{
    rowlock_keep_info st = ROWLOCK_KEEP_INFO_INIT;
    assert_int_equal(rowlock_keep_status(l, &st), 0);
    return st;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int is_lease(void)
{
    return strategy != ROWLOCK_STRATEGY_FOR_UPDATE;
}

/* A task of ten leases: the keeper alone keeps the lock; another client
 * cannot take it, and the final release finds it ours. */
static void test_keep__renews_through_a_task_ten_leases_long(void **state)
{
    (void)state;
    rowlock_client *c = tu_client(TABLE), *other = tu_client(TABLE);
    rowlock_lock *l = tu_lock(c, "ten-leases", strategy), *o = tu_lock(other, "ten-leases", strategy);
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    assert_rc(rowlock_keep(l, &ko), 0, c);
    assert_rc(rowlock_acquire(l, 0, 1000), 0, c);
    int64_t t0 = tu_now_us();
    while (tu_ms_since(t0) < 10000) {
        rowlock_keep_info st = status_of(l);
        assert_int_equal(st.state, ROWLOCK_KEEP_HELD);
        assert_true(st.safe_ms > 0);
        assert_int_equal(st.token, rowlock_lock_token(l));
        tu_sleep_ms(250);
    }
    assert_rc(rowlock_acquire(o, 0, 1000), ROWLOCK_EBUSY, other);
    rowlock_keep_info st = status_of(l);
    if (is_lease())
        assert_true(st.renewals >= 20); /* every third of a second for 10 s */
    assert_rc(rowlock_release(l), 0, c);
    st = status_of(l);
    assert_int_equal(st.state, ROWLOCK_KEEP_NONE); /* released: no longer kept */
    assert_rc(rowlock_acquire(o, 0, 1000), 0, other);
    assert_rc(rowlock_release(o), 0, other);
}

/* The server ends the keeper's session: the keeper reconnects and goes on;
 * the callback never runs. The close is seen either before the next
 * renewal (db_connect.c's idle check: no failure at all) or by that renewal
 * failing; either way the keeper is on a new session afterwards. */
static void test_keep__survives_a_killed_keeper_connection(void **state)
{
    (void)state;
    if (!is_lease())
        skip(); /* for-update has no keeper connection */
    events ev = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0 };
    rowlock_client *c = tu_client(TABLE);
    rowlock_lock *l = tu_lock(c, "killed-keeper", strategy);
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    ko.on_event = on_event;
    ko.arg = &ev;
    assert_rc(rowlock_acquire(l, 0, 3000), 0, c);
    assert_rc(rowlock_keep(l, &ko), 0, c);
    tu_sleep_ms(1200);
    rowlock_keep_info st = status_of(l);
    assert_true(st.session_id > 0);
    uint64_t renewals = st.renewals, killed = st.session_id;
    assert_true(renewals >= 1);
    assert_int_equal(tu_sql(NULL, 0, "KILL CONNECTION %" PRIu64, st.session_id), 0);
    tu_sleep_ms(4000); /* more than a lease */
    st = status_of(l);
    assert_int_equal(st.state, ROWLOCK_KEEP_HELD);
    assert_true(st.renewals >= renewals + 2);
    assert_true(st.session_id > 0);
    assert_true(st.session_id != killed); /* renewing on a new session */
    assert_int_equal(ev_calls(&ev), 0);
    assert_rc(rowlock_release(l), 0, c);
}

/* An administrator force-releases the lock: the keeper's next renewal finds
 * it gone (within one interval), the callback runs once, and the holder's
 * release says ENOTOWNER. */
static void test_keep__reports_a_force_release_within_one_interval_once(void **state)
{
    (void)state;
    if (!is_lease())
        skip(); /* for-update locks cannot be force-released */
    events ev = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0 };
    rowlock_client *c = tu_client(TABLE), *admin = tu_client(TABLE);
    rowlock_lock *l = tu_lock(c, "forced", strategy);
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    ko.on_event = on_event;
    ko.arg = &ev;
    ko.interval_ms = 1000;
    assert_rc(rowlock_keep(l, &ko), 0, c);
    assert_rc(rowlock_acquire(l, 0, 6000), 0, c);
    tu_sleep_ms(300);
    rowlock_info released = ROWLOCK_INFO_INIT;
    int64_t t_force = tu_now_us();
    assert_rc(rowlock_admin_force_release(admin, "forced", &released), 0, admin);
    assert_true(released.held);
    while (ev_calls(&ev) == 0 && tu_ms_since(t_force) < 1000 + TU_SLACK_MS + 1000)
        tu_sleep_ms(10);
    assert_int_equal(ev_calls(&ev), 1);
    double took = (double)(ev.at_us - t_force) / 1000.0;
    print_message("[%s] force release -> callback: %.0f ms (interval 1000 ms)\n", strategy_arg, took);
    assert_true(took <= 1000 + TU_SLACK_MS);
    assert_int_equal(ev.state, ROWLOCK_KEEP_LOST);
    assert_int_equal(ev.code, ROWLOCK_ENOTOWNER);
    rowlock_keep_info st = status_of(l);
    assert_int_equal(st.state, ROWLOCK_KEEP_LOST);
    assert_int_equal(st.safe_until_us, 0);
    assert_true(st.reason[0] != '\0');
    tu_sleep_ms(2500); /* two more intervals: still one call, no re-acquire */
    assert_int_equal(ev_calls(&ev), 1);
    rowlock_info info = ROWLOCK_INFO_INIT;
    tu_inspect(l, &info);
    assert_false(info.held);
    assert_rc(rowlock_release(l), ROWLOCK_ENOTOWNER, c);
}

typedef struct later_release {
    rowlock_client *c;
    rowlock_lock *l;
    int ms, rc;
} later_release;

static void *release_later(void *arg)
{
    later_release *r = arg;
    tu_sleep_ms(r->ms);
    r->rc = rowlock_release(r->l);
    return NULL;
}

/* A lock kept after a long wait is warned at once: its safe time counts
 * from the start of the acquire (here 2.5 s of a 3 s lease were spent
 * waiting). The keeper's first renewal moves the safe time away again, and
 * a later loss must still be told: a second call, LOST. Planted one call
 * per grant (the rule before): the loss is never told (fails). */
static void test_keep__a_lock_warned_after_a_long_wait_is_still_told_of_its_loss(void **state)
{
    (void)state;
    if (!is_lease())
        skip(); /* for-update locks cannot be force-released */
    events ev = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0 };
    rowlock_client *c = tu_client(TABLE), *other = tu_client(TABLE), *admin = tu_client(TABLE);
    rowlock_lock *l = tu_lock(c, "warned", strategy), *lo = tu_lock(other, "warned", strategy);
    assert_rc(rowlock_acquire(lo, 0, TU_LEASE_LONG), 0, other);
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    ko.on_event = on_event;
    ko.arg = &ev;
    ko.interval_ms = 1000;
    assert_rc(rowlock_keep(l, &ko), 0, c);
    const int64_t t0 = tu_now_us();
    later_release lr = { other, lo, 2500, -99 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_later, &lr), 0);
    const int arc = rowlock_acquire(l, 10000, 3000);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(lr.rc, 0);
    assert_rc(arc, 0, c);
    const int64_t waited_ms = (int64_t)tu_ms_since(t0);
    while (ev_calls(&ev) == 0 && tu_ms_since(t0) < 6000)
        tu_sleep_ms(10);
    const int warned = ev_calls(&ev);
    const rowlock_keep_state first = ev.state;
    /* Renewed since (every second): the safe time is far again. */
    while (status_of(l).renewals < 2 && tu_ms_since(t0) < 8000)
        tu_sleep_ms(10);
    rowlock_info released = ROWLOCK_INFO_INIT;
    const int64_t t_force = tu_now_us();
    assert_rc(rowlock_admin_force_release(admin, "warned", &released), 0, admin);
    while (ev_calls(&ev) < 2 && tu_ms_since(t_force) < 1000 + TU_SLACK_MS + 1000)
        tu_sleep_ms(10);
    print_message("[%s] waited %lld ms; calls: %d after the grant (state %d), %d after the force release\n",
                  strategy_arg, (long long)waited_ms, warned, (int)first, ev_calls(&ev));
    assert_true(waited_ms >= 2000);
    assert_int_equal(warned, 1);
    assert_true(first != ROWLOCK_KEEP_LOST);
    assert_int_equal(ev_calls(&ev), 2);
    assert_int_equal(ev.state, ROWLOCK_KEEP_LOST);
    assert_rc(rowlock_release(l), ROWLOCK_ENOTOWNER, c);
}

/* The safe-until time against the server's own lease end, sampled for 6 s
 * with a 1.5 s lease; for 2.5 s of it an administrator holds the row locked,
 * so no renewal can commit and the server's lease runs out. At every sample,
 * what the keeper calls safe must still be left on the server's lease (read
 * after the status, so the server's figure can only be smaller by the time
 * between the two reads). */
static void test_keep__safe_until_never_passes_the_server_lease_end(void **state)
{
    (void)state;
    if (!is_lease())
        skip();
    events ev = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0 };
    rowlock_client *c = tu_client(TABLE), *watcher = tu_client(TABLE);
    rowlock_lock *l = tu_lock(c, "safe-until", strategy), *w = tu_lock(watcher, "safe-until", strategy);
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    ko.on_event = on_event;
    ko.arg = &ev;
    assert_rc(rowlock_keep(l, &ko), 0, c);
    assert_rc(rowlock_acquire(l, 0, 1500), 0, c);
    void *blocker = tu_mysql_connect(tu_defaults_file(), 0);
    assert_non_null(blocker);
    int64_t t0 = tu_now_us();
    int blocking = 0, samples = 0, unknown_seen = 0;
    while (tu_ms_since(t0) < 6000) {
        if (!blocking && tu_ms_since(t0) > 1000 && tu_ms_since(t0) < 1500) {
            assert_int_equal(tu_mysql_query(blocker, "SET SESSION innodb_lock_wait_timeout = 1"), 0);
            assert_int_equal(tu_mysql_query(blocker, "START TRANSACTION"), 0);
            char sql[160];
            snprintf(sql, sizeof sql, "SELECT * FROM %s WHERE name = 'safe-until' FOR UPDATE", TABLE);
            assert_int_equal(tu_mysql_query(blocker, sql), 0);
            blocking = 1;
        }
        if (blocking == 1 && tu_ms_since(t0) > 3500) {
            assert_int_equal(tu_mysql_query(blocker, "COMMIT"), 0);
            blocking = 2;
        }
        int64_t s0 = tu_now_us();
        rowlock_keep_info st = status_of(l);
        rowlock_info info = ROWLOCK_INFO_INIT;
        assert_rc(rowlock_inspect(w, &info), 0, watcher);
        double between_ms = tu_ms_since(s0);
        if (st.state == ROWLOCK_KEEP_UNKNOWN)
            unknown_seen = 1;
        if (st.safe_ms > 0) {
            /* Safe now => the server's lease had at least that much left,
             * less the time between the two reads and 1 ms of rounding. */
            if (!(info.held && (double)info.expires_in_ms + between_ms + 1.0 >= (double)st.safe_ms))
                fail_msg("keeper says safe for %" PRId64 " ms but the server's lease has %" PRId64
                         " ms left (held %d, %.1f ms between the reads, state %d)",
                         st.safe_ms, info.expires_in_ms, info.held, between_ms, (int)st.state);
        }
        samples++;
        tu_sleep_ms(20);
    }
    tu_mysql_close(blocker);
    print_message("[%s] %d samples, renewals blocked for 2.5 s: unknown seen %d, callbacks %d\n", strategy_arg,
                  samples, unknown_seen, ev_calls(&ev));
    assert_true(samples > 50);
    assert_true(unknown_seen);
    /* The lease ran out on the server while blocked: the keeper said so
     * before (the callback), and it never re-acquired. */
    assert_int_equal(ev_calls(&ev), 1);
    rowlock_keep_info st = status_of(l);
    assert_true(st.state == ROWLOCK_KEEP_LOST || st.state == ROWLOCK_KEEP_UNKNOWN);
    assert_int_equal(st.safe_ms, 0);
    /* The server agrees: another client takes it over, and the holder's
     * release is refused. */
    assert_rc(rowlock_acquire(w, 0, 5000), 0, watcher);
    assert_rc(rowlock_release(l), ROWLOCK_ENOTOWNER, c);
    assert_rc(rowlock_release(w), 0, watcher);
}

/* for-update: the server ends the holding session; the keeper sees the
 * socket hang up and reports LOST at once (no renewal involved). */
static void test_keep__for_update_reports_the_end_of_the_holding_session_at_once(void **state)
{
    (void)state;
    if (is_lease())
        skip();
    int rounds = getenv("ROWLOCK_KEEP_DROPS") ? atoi(getenv("ROWLOCK_KEEP_DROPS")) : 10;
    double worst = 0, sum = 0;
    double *all = calloc((size_t)rounds, sizeof *all);
    assert_non_null(all);
    for (int r = 0; r < rounds; r++) {
        events ev = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0 };
        rowlock_client *c = tu_client(TABLE);
        rowlock_lock *l = tu_lock(c, "fu-session", strategy);
        rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
        ko.on_event = on_event;
        ko.arg = &ev;
        assert_rc(rowlock_acquire(l, 5000, 0), 0, c);
        assert_rc(rowlock_keep(l, &ko), 0, c);
        rowlock_keep_info st = status_of(l);
        assert_int_equal(st.state, ROWLOCK_KEEP_HELD);
        /* A finite safe time: the lease (default 30 s) from the grant. */
        int64_t now = rowlock_monotonic_us();
        assert_true(st.safe_until_us > now && st.safe_until_us <= now + 30000000);
        assert_true(st.session_id > 0);
        int64_t t_kill = tu_now_us();
        assert_int_equal(tu_sql(NULL, 0, "KILL CONNECTION %" PRIu64, st.session_id), 0);
        while (ev_calls(&ev) == 0 && tu_ms_since(t_kill) < 5000)
            tu_sleep_ms(1);
        assert_int_equal(ev_calls(&ev), 1);
        all[r] = (double)(ev.at_us - t_kill) / 1000.0;
        sum += all[r];
        if (all[r] > worst)
            worst = all[r];
        st = status_of(l);
        assert_int_equal(st.state, ROWLOCK_KEEP_LOST);
        assert_rc(rowlock_release(l), ROWLOCK_ENOTOWNER, c);
        tu_lock_free(l);
        tu_client_free(c);
    }
    qsort(all, (size_t)rounds, sizeof *all, cmp_double);
    print_message("[for-update] %d session kills, KILL to callback: p50 %.2f ms, p99 %.2f ms, mean %.2f ms, "
                  "worst %.2f ms\n", rounds, all[rounds / 2], all[(rounds * 99) / 100 < rounds ? (rounds * 99) / 100 : rounds - 1],
                  sum / rounds, worst);
    free(all);
    /* The bound: the kernel reports the FIN as soon as it arrives; a
     * loaded 2-core box under ASan may delay the keeper thread by a few
     * hundred ms. */
    assert_true(worst < 1000);
}

/* Poll the keeper's status (no round trip) until `done` says so; fails
 * the test after timeout_ms. */
static rowlock_keep_info await_status(rowlock_lock *l, int (*done)(const rowlock_keep_info *st, uint64_t arg),
                                      uint64_t arg, int64_t timeout_ms, const char *what)
{
    int64_t t0 = tu_now_us();
    for (;;) {
        rowlock_keep_info st = status_of(l);
        if (done(&st, arg))
            return st;
        if (tu_ms_since(t0) > (double)timeout_ms)
            fail_msg("%s: not within %lld ms (state %d, %" PRIu64 " renewals, %" PRIu64 " failures, session %" PRIu64
                     ", %s)", what, (long long)timeout_ms, (int)st.state, st.renewals, st.failures, st.session_id,
                     st.reason);
        tu_sleep_ms(20);
    }
}

static int renewed_at_least(const rowlock_keep_info *st, uint64_t n)
{
    return st->renewals >= n;
}

static int renewed_on_another_session(const rowlock_keep_info *st, uint64_t killed)
{
    return st->session_id != 0 && st->session_id != killed && st->state == ROWLOCK_KEEP_HELD;
}

/* An account of the shared test server allowed ONE connection, and an
 * option file for it in `cnf`; 0 (skip) without the sandbox's admin access
 * (an external server). */
static char ONE_USER[64];
static int one_connection_account(char *root, size_t rcap, char *cnf, size_t ccap)
{
    const char *dir = getenv("ROWLOCK_SANDBOX_DIR"), *df = tu_defaults_file();
    if (dir == NULL || df == NULL || strncmp(df, dir, strlen(dir)) != 0)
        return 0; /* the tests do not run on the sandbox */
    snprintf(root, rcap, "%s/root.cnf", dir);
    if (access(root, R_OK) != 0)
        return 0;
    char host[256] = "", port[16] = "", db[128] = "";
    tu_optfile_get(df, "client", "host", host, sizeof host);
    tu_optfile_get(df, "client", "port", port, sizeof port);
    tu_optfile_get(df, "client", "database", db, sizeof db);
    if (!host[0] || !port[0] || !db[0])
        return 0;
    snprintf(ONE_USER, sizeof ONE_USER, "rl_onecon_%s", strategy_arg[0] == 'o' ? "opt" : "ins");
    const char *pw = "onecon-pw-4f1e";
    for (int h = 0; h < 2; h++) {
        const char *at = h ? "localhost" : "127.0.0.1";
        assert_int_equal(tu_sql(root, 0, "DROP USER IF EXISTS '%s'@'%s'", ONE_USER, at), 0);
        assert_int_equal(tu_sql(root, 0, "CREATE USER '%s'@'%s' IDENTIFIED BY '%s' WITH MAX_USER_CONNECTIONS 1",
                                ONE_USER, at, pw), 0);
        assert_int_equal(tu_sql(root, 0, "GRANT ALL PRIVILEGES ON `%s`.* TO '%s'@'%s'", db, ONE_USER, at), 0);
    }
    snprintf(cnf, ccap, "%s.cnf", ONE_USER);
    FILE *f = fopen(cnf, "w");
    assert_non_null(f);
    fprintf(f, "[client]\nhost=%s\nport=%s\nuser=%s\npassword=%s\ndatabase=%s\n", host, port, ONE_USER, pw, db);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(cnf, 0600), 0);
    return 1;
}

static void one_connection_account_drop(const char *root)
{
    (void)tu_sql(root, 0, "DROP USER IF EXISTS '%s'@'127.0.0.1', '%s'@'localhost'", ONE_USER, ONE_USER);
}

/* ROWLOCK_KEEP_SAME_CONNECTION: a holder allowed one connection keeps its
 * lock for several leases, the renewals running on its own session (the
 * account's only one); without the flag the keeper's connection is refused
 * (the control: the limit is real). A KILL of that session is ridden out: the
 * renewal reconnects it, the callback never runs, the lock stays ours. */
static void test_keep__same_connection_renews_on_the_holders_only_session(void **state)
{
    (void)state;
    if (!is_lease())
        skip(); /* for-update: always kept on its own session */
    char root[PATH_MAX], cnf[PATH_MAX];
    if (!one_connection_account(root, sizeof root, cnf, sizeof cnf))
        skip();
    events ev = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0 };
    rowlock_client *c = tu_client_at(cnf, TABLE), *other = tu_client(TABLE);
    rowlock_lock *l = tu_lock(c, "one-connection", strategy), *o = tu_lock(other, "one-connection", strategy);
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    assert_rc(rowlock_keep(l, &ko), ROWLOCK_EDB, c); /* a second connection: over the account's limit */
    assert_msg_has(c, "keeper's connection");
    ko.flags = ROWLOCK_KEEP_SAME_CONNECTION;
    ko.on_event = on_event;
    ko.arg = &ev;
    assert_rc(rowlock_keep(l, &ko), 0, c);
    assert_rc(rowlock_acquire(l, 0, 1000), 0, c);
    /* Four renewals every third of a second: more than a lease, held. */
    rowlock_keep_info st = await_status(l, renewed_at_least, 4, 10000, "4 renewals");
    assert_int_equal(st.state, ROWLOCK_KEEP_HELD);
    int ok = 0;
    long long n = tu_sql_int(root, &ok, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '%s'",
                             ONE_USER);
    assert_true(ok);
    assert_int_equal(n, 1);
    long long id = tu_sql_int(root, &ok, "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = '%s'", ONE_USER);
    assert_true(ok);
    assert_int_equal((uint64_t)id, st.session_id); /* the renewing session is the client's only one */
    assert_rc(rowlock_acquire(o, 0, 1000), ROWLOCK_EBUSY, other);

    /* The server ends that session: the next renewal reconnects it. */
    uint64_t killed = st.session_id;
    assert_int_equal(tu_sql(root, 0, "KILL CONNECTION %" PRIu64, killed), 0);
    st = await_status(l, renewed_on_another_session, killed, 15000, "renewing on a new session after the KILL");
    st = await_status(l, renewed_at_least, st.renewals + 2, 10000, "2 more renewals after the KILL");
    assert_int_equal(st.state, ROWLOCK_KEEP_HELD);
    assert_int_equal(ev_calls(&ev), 0);
    assert_rc(rowlock_acquire(o, 0, 1000), ROWLOCK_EBUSY, other);
    assert_rc(rowlock_release(l), 0, c);
    assert_int_equal(status_of(l).state, ROWLOCK_KEEP_NONE);
    assert_rc(rowlock_acquire(o, 0, 1000), 0, other);
    assert_rc(rowlock_release(o), 0, other);
    one_connection_account_drop(root);
}

/* Option checks need no server round trip. */
static void test_keep__refuses_bad_options(void **state)
{
    (void)state;
    rowlock_client *c = tu_client(TABLE);
    rowlock_lock *l = tu_lock(c, "bad-options", strategy);
    rowlock_keep_options ko = ROWLOCK_KEEP_OPTIONS_INIT;
    ko.version = 99;
    assert_rc(rowlock_keep(l, &ko), ROWLOCK_EINVALID, c);
    ko = (rowlock_keep_options)ROWLOCK_KEEP_OPTIONS_INIT;
    ko.lease_ms = 3000;
    ko.interval_ms = 3000;
    assert_rc(rowlock_keep(l, &ko), ROWLOCK_EINVALID, c);
    assert_msg_has(c, "renewing every 3000 ms");
    ko.interval_ms = -1;
    assert_rc(rowlock_keep(l, &ko), ROWLOCK_EINVALID, c);
    ko = (rowlock_keep_options)ROWLOCK_KEEP_OPTIONS_INIT;
    ko.flags = 0x80;
    assert_rc(rowlock_keep(l, &ko), ROWLOCK_EINVALID, c);
    assert_msg_has(c, "unknown flags 0x80");
    /* A version-1 caller's struct, which ends before `flags` (versioned
     * structs, case 1): accepted, nothing read past its end (ASan). */
    struct v1 {
        unsigned int version;
        int64_t lease_ms, interval_ms, warn_ms;
        rowlock_keep_fn on_event;
        void *arg;
    } *v1 = malloc(sizeof *v1);
    assert_non_null(v1);
    *v1 = (struct v1){ 1, 0, 0, 0, NULL, NULL };
    assert_rc(rowlock_keep(l, (const rowlock_keep_options *)(void *)v1), 0, c);
    free(v1);
    assert_rc(rowlock_keep(l, NULL), 0, c);
    rowlock_keep_info st = ROWLOCK_KEEP_INFO_INIT;
    st.version = 0;
    assert_int_equal(rowlock_keep_status(l, &st), ROWLOCK_EINVALID);
    /* A newer caller's struct (versioned structs, case 2, rowlock.h):
     * accepted, its version kept. */
    st = (rowlock_keep_info)ROWLOCK_KEEP_INFO_INIT;
    st.version = ROWLOCK_KEEP_INFO_VERSION + 1;
    assert_int_equal(rowlock_keep_status(l, &st), 0);
    assert_int_equal(st.version, ROWLOCK_KEEP_INFO_VERSION + 1);
    assert_int_equal(st.state, ROWLOCK_KEEP_NONE);
    st = status_of(l);
    assert_int_equal(st.state, ROWLOCK_KEEP_NONE);
}

int main(int argc, char **argv)
{
    if (argc < 2 || rowlock_strategy_parse(&strategy, argv[1]) != 0) {
        fprintf(stderr, "usage: test_keeper insert|for-update|optimistic [filter]\n");
        return 64;
    }
    strategy_arg = argv[1];
    snprintf(TABLE, sizeof TABLE, "t_keeper_%s", argv[1][0] == 'f' ? "for_update" : argv[1]);
    const struct CMUnitTest tests[] = {
        TU_TEST(test_keep__refuses_bad_options),
        TU_TEST(test_keep__renews_through_a_task_ten_leases_long),
        TU_TEST(test_keep__survives_a_killed_keeper_connection),
        TU_TEST(test_keep__reports_a_force_release_within_one_interval_once),
        TU_TEST(test_keep__a_lock_warned_after_a_long_wait_is_still_told_of_its_loss),
        TU_TEST(test_keep__safe_until_never_passes_the_server_lease_end),
        TU_TEST(test_keep__for_update_reports_the_end_of_the_holding_session_at_once),
        TU_TEST(test_keep__same_connection_renews_on_the_holders_only_session),
    };
    char group[64];
    snprintf(group, sizeof group, "keeper_%s", argv[1]);
    return tu_main(group, tests, sizeof tests / sizeof tests[0], TABLE, argc > 2 ? argv[2] : NULL);
}
