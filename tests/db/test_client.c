/*
 * Clients: connecting (and failing to), option files, the schema check and
 * migrations, wrapping an application's connection, error names.
 */
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define CLIENT_FOUND_ROWS_FLAG 2UL /* CLIENT_FOUND_ROWS from mysql_com.h */

static rowlock_client *new_client(void)
{
    rowlock_client *c = NULL;
    assert_int_equal(rowlock_client_new(&c), 0);
    assert_non_null(c);
    tu_register_client(c);
    return c;
}

static int try_connect(rowlock_client *c, const char *table, unsigned int flags)
{
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    o.defaults_file = tu_defaults_file();
    o.table = table;
    o.flags = flags;
    return rowlock_client_connect(c, &o);
}

static void drop_table(const char *table)
{
    assert_int_equal(tu_sql(NULL, 0, "DROP TABLE IF EXISTS `%s`", table), 0);
    assert_int_equal(tu_sql(NULL, 0, "DROP SEQUENCE IF EXISTS `%s_token`", table), 0);
    assert_int_equal(tu_sql(NULL, 0, "DROP TABLE IF EXISTS `%s_queue`", table), 0);
    unsigned int e = tu_sql(NULL, 1146, "DELETE FROM rowlock_schema WHERE lock_table = '%s'", table);
    assert_true(e == 0 || e == 1146);
}

/* ---- fresh clients, errors ------------------------------------------------------------- */

static void test_client__a_new_client_has_an_owner_and_no_error(void **state)
{
    (void)state;
    rowlock_client *a = new_client(), *b = new_client();
    assert_string_equal(rowlock_client_errmsg(a), "");
    assert_int_equal(rowlock_client_db_errno(a), 0);
    assert_string_equal(rowlock_client_sqlstate(a), "00000");
    assert_string_equal(rowlock_client_server_info(a), "");
    assert_true(strlen(rowlock_client_owner(a)) > 0);
    assert_true(strlen(rowlock_client_owner(a)) <= ROWLOCK_OWNER_MAX);
    assert_string_not_equal(rowlock_client_owner(a), rowlock_client_owner(b));
    rowlock_client_free(NULL);
    rowlock_lock_free(NULL);
}

static void test_client__connects_and_reports_the_server(void **state)
{
    (void)state;
    rowlock_client *c = tu_client("t_client");
    char table[128];
    assert_true(tu_strcasestr(rowlock_client_server_info(c), "maria") != NULL ||
                strlen(rowlock_client_server_info(c)) > 0);
    assert_string_equal(rowlock_client_table(c), "t_client");
    assert_string_equal(rowlock_client_errmsg(c), "");
    /* No table given: [rowlock] table= of the option file, else the default. */
    c = new_client();
    assert_rc(try_connect(c, NULL, ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK), 0, c);
    if (tu_optfile_get(tu_defaults_file(), "rowlock", "table", table, sizeof table))
        assert_string_equal(rowlock_client_table(c), table);
    else
        assert_string_equal(rowlock_client_table(c), "rowlock_locks");
}

static void test_errors__every_code_has_a_name_and_a_sentence(void **state)
{
    (void)state;
    const struct { int code; const char *name; } t[] = {
        { ROWLOCK_OK, "ROWLOCK_OK" },
        { ROWLOCK_EBUSY, "ROWLOCK_EBUSY" },
        { ROWLOCK_ENOTOWNER, "ROWLOCK_ENOTOWNER" },
        { ROWLOCK_EINVALID, "ROWLOCK_EINVALID" },
        { ROWLOCK_EDB, "ROWLOCK_EDB" },
        { ROWLOCK_ESCHEMA, "ROWLOCK_ESCHEMA" },
        { ROWLOCK_EUNSUPPORTED, "ROWLOCK_EUNSUPPORTED" },
        { ROWLOCK_ENOMEM, "ROWLOCK_ENOMEM" },
        { ROWLOCK_EFENCED, "ROWLOCK_EFENCED" },
        { ROWLOCK_EUPGRADE, "ROWLOCK_EUPGRADE" },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        assert_string_equal(rowlock_error_name(t[i].code), t[i].name);
        assert_true(strlen(rowlock_strerror(t[i].code)) > 0);
        assert_string_not_equal(rowlock_strerror(t[i].code), "unknown error");
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(rowlock_strerror(t[i].code), rowlock_strerror(t[j].code));
    }
    assert_string_equal(rowlock_strerror(ROWLOCK_EBUSY), "lock is held by another owner");
    assert_string_equal(rowlock_strerror(-10), "unknown error");
    assert_string_equal(rowlock_strerror(5), "unknown error");
    assert_string_equal(rowlock_error_name(-10), "ROWLOCK_EUNKNOWN");
    assert_string_equal(rowlock_error_name(5), "ROWLOCK_EUNKNOWN");
    assert_string_equal(rowlock_version(), ROWLOCK_VERSION_STRING);
}

/* ---- connection failures ----------------------------------------------------------------------- */

static void test_connect__nothing_listening_gives_edb_naming_the_host(void **state)
{
    (void)state;
    rowlock_client *c = new_client();
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    double ms;
    int rc;
    o.host = "127.0.0.1";
    o.port = 1;
    o.user = "nobody";
    o.connect_timeout_ms = 5000;
    o.flags = ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK;
    TU_TIMED(ms, rc = rowlock_client_connect(c, &o));
    assert_rc(rc, ROWLOCK_EDB, c);
    if (tu_strcasestr(rowlock_client_errmsg(c), "127.0.0.1") == NULL &&
        tu_strcasestr(rowlock_client_errmsg(c), "server") == NULL)
        fail_msg("the message does not mention the server: \"%s\"", rowlock_client_errmsg(c));
    assert_true(rowlock_client_db_errno(c) == 2002 || rowlock_client_db_errno(c) == 2003);
    assert_string_not_equal(rowlock_client_sqlstate(c), "00000");
    assert_string_equal(rowlock_client_server_info(c), "");
    assert_true(ms < 5000 + TU_SLACK_MS);
    /* The client stays usable: connect it properly now. */
    assert_rc(try_connect(c, "t_client", 0), 0, c);
    assert_string_equal(rowlock_client_errmsg(c), "");
}

static void test_connect__wrong_password_gives_edb(void **state)
{
    (void)state;
    rowlock_client *c = new_client();
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    o.defaults_file = tu_defaults_file();
    o.password = "certainly-not-the-password";
    o.table = "t_client";
    assert_rc(rowlock_client_connect(c, &o), ROWLOCK_EDB, c);
    assert_int_equal(rowlock_client_db_errno(c), 1045);
}

static void test_connect__bad_options_are_einvalid(void **state)
{
    (void)state;
    rowlock_client *c = new_client();
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    o.defaults_file = tu_defaults_file();
    o.version = 0;
    assert_rc(rowlock_client_connect(c, &o), ROWLOCK_EINVALID, c);
    o.version = 99;
    assert_rc(rowlock_client_connect(c, &o), ROWLOCK_EINVALID, c);
    o.version = ROWLOCK_CLIENT_OPTIONS_VERSION;
    o.tls_mode = (rowlock_tls_mode)42;
    assert_rc(rowlock_client_connect(c, &o), ROWLOCK_EINVALID, c);
    o.tls_mode = ROWLOCK_TLS_VERIFY_CA; /* without tls_ca */
    assert_rc(rowlock_client_connect(c, &o), ROWLOCK_EINVALID, c);
    o.tls_mode = ROWLOCK_TLS_VERIFY_IDENTITY;
    assert_rc(rowlock_client_connect(c, &o), ROWLOCK_EINVALID, c);
}

static void test_connect__bad_table_names_are_einvalid(void **state)
{
    (void)state;
    char n58[64];
    const char *bad[] = { "bad-name", "x;y", "a b", "`t`", "t.u", "rowlock_locks'", n58 };
    memset(n58, 't', 58);
    n58[58] = '\0';
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rowlock_client *c = new_client();
        int rc = try_connect(c, bad[i], ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK);
        if (rc != ROWLOCK_EINVALID)
            fail_msg("table name \"%s\": connect gave %s", bad[i], rowlock_error_name(rc));
        assert_true(strlen(rowlock_client_errmsg(c)) > 0);
        tu_client_free(c);
    }
    {
        rowlock_client *c = new_client();
        assert_rc(try_connect(c, "", ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK), ROWLOCK_EINVALID, c);
    }
}

/* The longest allowed name also fits its sequence (<table>_token) in 64 bytes. */
static void test_migrate__works_for_a_57_byte_table_name(void **state)
{
    (void)state;
    char n57[64];
    rowlock_client *c;
    rowlock_lock *l;
    memset(n57, 'q', 57);
    n57[57] = '\0';
    tu_table_fresh(NULL, n57);
    c = tu_client(n57);
    l = tu_lock(c, "x", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(l, 0, 1000), 0, c);
    assert_rc(rowlock_release(l), 0, c);
    tu_lock_free(l);
    tu_client_free(c);
    drop_table(n57);
}

/* ---- schema ------------------------------------------------------------------------------------------ */

static void test_schema__a_missing_table_is_eschema_naming_the_versions(void **state)
{
    (void)state;
    rowlock_client *c = new_client();
    char expected[16];
    int found = -1;
    drop_table("t_client_missing");
    assert_rc(try_connect(c, "t_client_missing", 0), ROWLOCK_ESCHEMA, c);
    snprintf(expected, sizeof expected, "%d", rowlock_schema_version_expected());
    assert_msg_has(c, "t_client_missing");
    assert_msg_has(c, expected);
    assert_msg_has(c, "found");
    assert_msg_has(c, "0");
    /* With the check skipped, the version can be read: nothing installed. */
    assert_rc(try_connect(c, "t_client_missing", ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK), 0, c);
    assert_rc(rowlock_schema_version(c, &found), 0, c);
    assert_int_equal(found, 0);
    /* And a lock call says ESCHEMA rather than a bare database error. */
    {
        rowlock_lock *l = tu_lock(c, "x", ROWLOCK_STRATEGY_INSERT);
        assert_rc(rowlock_acquire(l, 0, 1000), ROWLOCK_ESCHEMA, c);
    }
}

static void test_migrate__is_idempotent(void **state)
{
    (void)state;
    rowlock_client *c = new_client();
    const int n = rowlock_schema_version_expected();
    int from = -1, to = -1, found = -1;
    drop_table("t_client_idem");
    assert_rc(try_connect(c, "t_client_idem", ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK), 0, c);
    assert_rc(rowlock_schema_migrate(c, ROWLOCK_MIGRATE_DRY_RUN, &from, &to), 0, c);
    assert_int_equal(from, 0);
    assert_int_equal(to, n);
    assert_rc(rowlock_schema_version(c, &found), 0, c);
    assert_int_equal(found, 0); /* the dry run changed nothing */
    assert_rc(rowlock_schema_migrate(c, 0, &from, &to), 0, c);
    assert_int_equal(from, 0);
    assert_int_equal(to, n);
    assert_rc(rowlock_schema_migrate(c, 0, &from, &to), 0, c);
    assert_int_equal(from, n);
    assert_int_equal(to, n);
    assert_rc(rowlock_schema_migrate(c, 0, NULL, NULL), 0, c);
    assert_rc(rowlock_schema_version(c, &found), 0, c);
    assert_int_equal(found, n);
    /* A lock made before the repeat migration survives it. */
    {
        rowlock_client *a = tu_client("t_client_idem");
        rowlock_lock *l = tu_lock(a, "kept", ROWLOCK_STRATEGY_INSERT);
        rowlock_lock *p = tu_lock(c, "kept", ROWLOCK_STRATEGY_INSERT);
        assert_rc(rowlock_acquire(l, 0, TU_LEASE_LONG), 0, a);
        assert_rc(rowlock_schema_migrate(c, 0, &from, &to), 0, c);
        assert_rc(rowlock_acquire(p, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, c);
        assert_rc(rowlock_release(l), 0, a);
    }
}

typedef struct named_lock_arg {
    const char *name;
    int seconds;
    long long got;
} named_lock_arg;

/* Holds the named lock a->name for a->seconds on a connection of its own. */
static void *hold_named_lock(void *arg)
{
    named_lock_arg *a = arg;
    int ok = 0;
    a->got = tu_sql_int(NULL, &ok, "SELECT GET_LOCK('%s', 0) + 0 * SLEEP(%d)", a->name, a->seconds);
    if (!ok)
        a->got = -1;
    return NULL;
}

/*
 * A migration waits for another migration's lock (GET_LOCK, up to 60 s) in
 * one statement. A client with a shorter read timeout had that read cut
 * (a lost connection: "migrate: lock" failed); it now waits as the lock
 * waits do (the read timeout counts from the end of the server-side wait).
 * Another session holds the migration lock for 4 s; the client's read
 * timeout is 2 s. Planted "the wait not marked": ROWLOCK_EDB, fails.
 */
static void test_migrate__waits_for_another_migration_longer_than_the_read_timeout(void **state)
{
    (void)state;
    drop_table("t_client_mig_rt");
    named_lock_arg a = { "rowlock.migrate.t_client_mig_rt", 4, 0 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_named_lock, &a), 0);
    usleep(500000);
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    rowlock_client *c = NULL;
    assert_int_equal(rowlock_client_new(&c), 0);
    tu_register_client(c);
    o.defaults_file = tu_defaults_file_or_null();
    o.table = "t_client_mig_rt";
    o.flags = ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK;
    o.read_timeout_ms = 2000;
    assert_rc(rowlock_client_connect(c, &o), 0, c);
    int from = -1, to = -1;
    const int64_t t0 = tu_now_us();
    const int rc = rowlock_schema_migrate(c, 0, &from, &to);
    const int64_t took = (tu_now_us() - t0) / 1000;
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(a.got, 1);
    assert_rc(rc, 0, c);
    assert_int_equal(from, 0);
    assert_int_equal(to, rowlock_schema_version_expected());
    assert_true(took >= 2500); /* it did wait for the other's lock */
}

typedef struct migrate_shared {
    int rc[2], from[2], to[2];
    char msg[2][512];
} migrate_shared;

static tu_pipe mig_ready, mig_go;

static int migrator(void *arg, int idx)
{
    migrate_shared *sh = arg;
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    rowlock_client *c = NULL;
    if (rowlock_client_new(&c) != 0)
        return 10;
    o.defaults_file = tu_defaults_file_or_null();
    o.table = "t_client_race";
    o.flags = ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK;
    if (rowlock_client_connect(c, &o) != 0) {
        fprintf(stderr, "migrator: %s\n", rowlock_client_errmsg(c));
        return 11;
    }
    tu_signal(&mig_ready, 'R');
    if (tu_await(&mig_go, 60000) != 'G')
        return 12;
    sh->rc[idx] = rowlock_schema_migrate(c, 0, &sh->from[idx], &sh->to[idx]);
    snprintf(sh->msg[idx], sizeof sh->msg[idx], "%s", rowlock_client_errmsg(c));
    rowlock_client_free(c);
    return 0;
}

static void test_migrate__two_processes_at_once_on_a_fresh_table(void **state)
{
    (void)state;
    migrate_shared *sh = tu_shm(sizeof *sh);
    const int n = rowlock_schema_version_expected();
    tu_pipe_open(&mig_ready);
    tu_pipe_open(&mig_go);
    for (int round = 0; round < 3; round++) {
        pid_t p[2];
        int found = -1;
        drop_table("t_client_race");
        memset(sh, 0, sizeof *sh);
        for (int k = 0; k < 2; k++)
            p[k] = tu_fork(migrator, sh, k);
        for (int k = 0; k < 2; k++)
            if (tu_await(&mig_ready, 60000) != 'R')
                fail_msg("migrators did not connect");
        tu_signal(&mig_go, 'G');
        tu_signal(&mig_go, 'G');
        for (int k = 0; k < 2; k++)
            assert_int_equal(tu_wait(p[k], 120000), 0);
        for (int k = 0; k < 2; k++) {
            if (sh->rc[k] != 0)
                fail_msg("round %d: migrator %d: %s: %s", round, k, rowlock_error_name(sh->rc[k]), sh->msg[k]);
            assert_int_equal(sh->to[k], n);
        }
        /* Exactly one of them did the work. */
        assert_true((sh->from[0] == 0) != (sh->from[1] == 0));
        {
            rowlock_client *c = tu_client("t_client_race");
            rowlock_lock *l = tu_lock(c, "x", ROWLOCK_STRATEGY_INSERT);
            assert_rc(rowlock_schema_version(c, &found), 0, c);
            assert_int_equal(found, n);
            assert_rc(rowlock_acquire(l, 0, 1000), 0, c);
            assert_rc(rowlock_release(l), 0, c);
            tu_lock_free(l);
            tu_client_free(c);
        }
    }
    tu_pipe_close(&mig_ready);
    tu_pipe_close(&mig_go);
    tu_shm_free(sh, sizeof *sh);
}

static void test_schema__newer_than_the_library_is_eschema(void **state)
{
    (void)state;
    rowlock_client *c = new_client(), *m = new_client();
    int found = -1, from = -1, to = -1;
    tu_table_fresh(NULL, "t_client_newer");
    assert_int_equal(tu_sql(NULL, 0, "UPDATE rowlock_schema SET version = 999 WHERE lock_table = 't_client_newer'"),
                     0);
    assert_rc(try_connect(c, "t_client_newer", 0), ROWLOCK_ESCHEMA, c);
    assert_msg_has(c, "999");
    assert_msg_has(c, "t_client_newer");
    assert_rc(try_connect(m, "t_client_newer", ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK), 0, m);
    assert_rc(rowlock_schema_version(m, &found), 0, m);
    assert_int_equal(found, 999);
    assert_rc(rowlock_schema_migrate(m, 0, &from, &to), ROWLOCK_ESCHEMA, m);
    assert_msg_has(m, "999");
    assert_int_equal(tu_sql_int(NULL, NULL, "SELECT version FROM rowlock_schema WHERE lock_table = 't_client_newer'"),
                     999);
    tu_client_free(m);
    drop_table("t_client_newer");
}

/* ---- option files ---------------------------------------------------------------------------------------- */

/* Write an option file with the shared server's [client] settings, the
 * given [rowlock] table (NULL: none); returns its path in `path`. */
static void write_optfile(char *path, size_t cap, const char *table)
{
    static const char *keys[] = { "host", "port", "socket", "user", "password", "database" };
    char val[512];
    FILE *f;
    int fd;
    snprintf(path, cap, "/tmp/rowlock-test-optfile.XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f, "# written by test_client\n[client]\n");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (tu_optfile_get(tu_defaults_file(), "client", keys[i], val, sizeof val))
            fprintf(f, "%s=%s\n", keys[i], val);
    fprintf(f, "\n[mysql]\n# another program's group: ignored\ntable=not_this_one\n");
    if (table != NULL)
        fprintf(f, "\n[rowlock]\ntable=%s\n", table);
    fclose(f);
}

static void test_optfile__client_settings_and_rowlock_table_are_used(void **state)
{
    (void)state;
    char path[64];
    rowlock_client *c = new_client();
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    write_optfile(path, sizeof path, "t_client");
    o.defaults_file = path;
    /* No table option: [rowlock] table= decides, and its schema is checked. */
    assert_rc(rowlock_client_connect(c, &o), 0, c);
    assert_string_equal(rowlock_client_table(c), "t_client");
    {
        rowlock_lock *l = tu_lock(c, "optfile", ROWLOCK_STRATEGY_INSERT);
        assert_rc(rowlock_acquire(l, 0, 1000), 0, c);
        assert_rc(rowlock_release(l), 0, c);
        tu_lock_free(l);
    }
    /* An explicit table wins over the file. */
    o.table = "t_client_other";
    o.flags = ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK;
    assert_rc(rowlock_client_connect(c, &o), 0, c);
    assert_string_equal(rowlock_client_table(c), "t_client_other");
    /* Explicit fields win over the file: a port with nothing listening. */
    {
        rowlock_client *d = new_client();
        o.table = NULL;
        o.host = "127.0.0.1";
        o.port = 1;
        o.unix_socket = NULL;
        assert_rc(rowlock_client_connect(d, &o), ROWLOCK_EDB, d);
    }
    unlink(path);
}

static void test_optfile__a_bad_table_in_the_file_is_einvalid(void **state)
{
    (void)state;
    char path[64];
    rowlock_client *c = new_client();
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    write_optfile(path, sizeof path, "no-dashes-allowed");
    o.defaults_file = path;
    assert_rc(rowlock_client_connect(c, &o), ROWLOCK_EINVALID, c);
    unlink(path);
}

static void test_optfile__an_unreadable_defaults_file_is_einvalid(void **state)
{
    (void)state;
    rowlock_client *c = new_client();
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    o.defaults_file = "/nonexistent-dir/rowlock/my.cnf";
    o.table = "t_client";
    assert_rc(rowlock_client_connect(c, &o), ROWLOCK_EINVALID, c);
    assert_msg_has(c, "/nonexistent-dir/rowlock/my.cnf");
    o.defaults_file = "/"; /* a directory */
    if (rowlock_client_connect(c, &o) == 0)
        fail_msg("a directory was accepted as defaults file");
}

/* ---- hostile input (issue 13) ------------------------------------------------------------------------------- */

/* An option file with the shared server's [client] settings minus `skip`
 * (NULL: none), then `extra` lines (may be NULL) in [client]. */
static void write_optfile_extra(char *path, size_t cap, const char *skip, const char *extra)
{
    static const char *keys[] = { "host", "port", "socket", "user", "password", "database" };
    char val[512];
    FILE *f;
    int fd;
    snprintf(path, cap, "/tmp/rowlock-test-optfile.XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f, "[client]\n");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if ((!skip || strcmp(skip, keys[i]) != 0) && tu_optfile_get(tu_defaults_file(), "client", keys[i], val, sizeof val))
            fprintf(f, "%s=%s\n", keys[i], val);
    if (extra)
        fprintf(f, "%s\n", extra);
    fclose(f);
}

/* Item 1: the option file is read by Connector/C after the explicit options
 * were set; an explicit DISABLED must not be turned into "TLS with a
 * verified server" by the file (this server offers no TLS). */
static void test_hostile__file_tls_settings_do_not_override_explicit_disabled(void **state)
{
    (void)state;
    char path[64];
    rowlock_client *c = new_client();
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    write_optfile_extra(path, sizeof path, NULL, "ssl-verify-server-cert=1\nssl-ca=/nonexistent/ca.pem");
    o.defaults_file = path;
    o.table = "t_client";
    o.tls_mode = ROWLOCK_TLS_DISABLED;
    assert_rc(rowlock_client_connect(c, &o), 0, c);
    unlink(path);
}

/* Item 1: connect-timeout=25 in the file must not beat an explicit 1 s. A
 * listening socket that never accepts: the TCP handshake completes, the
 * server greeting never comes. */
static void test_hostile__explicit_connect_timeout_beats_the_file(void **state)
{
    (void)state;
    char path[64], extra[128];
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s >= 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(s, 8), 0);
    assert_int_equal(getsockname(s, (struct sockaddr *)&a, &alen), 0);
    snprintf(extra, sizeof extra, "connect-timeout=25\nhost=127.0.0.1\nport=%u", (unsigned)ntohs(a.sin_port));
    write_optfile_extra(path, sizeof path, "socket", extra);
    rowlock_client *c = new_client();
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    o.defaults_file = path;
    o.table = "t_client";
    o.connect_timeout_ms = 1000;
    double ms;
    TU_TIMED(ms, assert_rc(rowlock_client_connect(c, &o), ROWLOCK_EDB, c));
    close(s);
    unlink(path);
    if (ms > 12000)
        fail_msg("connect took %.0f ms: the file's connect-timeout=25 beat the explicit 1 s", ms);
}

/* Item 3: a pipe as defaults file (--defaults-file=<(cat f)) is read once;
 * the connection uses its settings (it used to fall back to the default
 * server socket after the library had drained the pipe). */
static void test_hostile__a_pipe_as_defaults_file_is_read_once_and_used(void **state)
{
    (void)state;
    char path[64], buf[4096], fdpath[64];
    int p[2];
    write_optfile_extra(path, sizeof path, NULL, "[rowlock]\ntable=t_client");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    unlink(path);
    assert_int_equal(pipe(p), 0);
    assert_int_equal(write(p[1], buf, n), (ssize_t)n);
    close(p[1]);
    snprintf(fdpath, sizeof fdpath, "/dev/fd/%d", p[0]);
    rowlock_client *c = new_client();
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    o.defaults_file = fdpath;
    assert_rc(rowlock_client_connect(c, &o), 0, c);
    close(p[0]);
    assert_string_equal(rowlock_client_table(c), "t_client");
    rowlock_lock *l = tu_lock(c, "from-a-pipe", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(l, 0, 1000), 0, c);
    assert_rc(rowlock_release(l), 0, c);
    tu_lock_free(l);
}

/* Item 4: endless and blocking files are refused before Connector/C sees them. */
static void test_hostile__devices_and_endless_includes_are_refused(void **state)
{
    (void)state;
    char path[64];
    rowlock_client *c = new_client();
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    o.table = "t_client";
    alarm(60); /* it used to spin for ever */
    o.defaults_file = "/dev/zero";
    assert_rc(rowlock_client_connect(c, &o), ROWLOCK_EINVALID, c);
    assert_msg_has(c, "/dev/zero");
    write_optfile_extra(path, sizeof path, NULL, "!include /dev/urandom");
    o.defaults_file = path;
    assert_rc(rowlock_client_connect(c, &o), ROWLOCK_EINVALID, c);
    assert_msg_has(c, "/dev/urandom");
    unlink(path);
    alarm(0);
}

/* Item 5: MYSQL_PWD is not a source of passwords. */
static void test_hostile__mysql_pwd_is_not_honoured(void **state)
{
    (void)state;
    char path[64], pw[256];
    assert_true(tu_optfile_get(tu_defaults_file(), "client", "password", pw, sizeof pw));
    write_optfile_extra(path, sizeof path, "password", NULL);
    setenv("MYSQL_PWD", pw, 1);
    rowlock_client *c = new_client();
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    o.defaults_file = path;
    o.table = "t_client";
    int rc = rowlock_client_connect(c, &o);
    unlink(path);
    assert_rc(rc, ROWLOCK_EDB, c);
    assert_msg_has(c, "denied");
    /* A bare "password" flag in the file is no password either. */
    write_optfile_extra(path, sizeof path, "password", "password");
    rc = rowlock_client_connect(c, &o);
    unsetenv("MYSQL_PWD");
    unlink(path);
    assert_rc(rc, ROWLOCK_EDB, c);
    assert_msg_has(c, "denied");
}

/* Item 7: a wrong released->version is refused before anything is released.
 * Any version >= 1 is accepted (a newer caller gets the fields this library
 * has), so the wrong one is 0. */
static void test_hostile__force_release_checks_the_version_first(void **state)
{
    (void)state;
    rowlock_client *c = tu_client("t_client");
    rowlock_client *admin = tu_client("t_client");
    rowlock_lock *l = tu_lock(c, "force-version", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(l, 0, 60000), 0, c);
    rowlock_info info = ROWLOCK_INFO_INIT;
    info.version = 0;
    assert_rc(rowlock_admin_force_release(admin, "force-version", &info), ROWLOCK_EINVALID, admin);
    rowlock_info now = ROWLOCK_INFO_INIT;
    tu_inspect(l, &now);
    if (!now.held)
        fail_msg("the lock was released although the call reported EINVALID");
    assert_rc(rowlock_release(l), 0, c);
}

/* Item 8: huge waits and budgets are clamped, not overflowed (UBSan). */
static void test_hostile__int64_max_waits_do_not_overflow(void **state)
{
    (void)state;
    rowlock_client *c = tu_client("t_client");
    rowlock_lock *l = tu_lock(c, "huge-wait", ROWLOCK_STRATEGY_FOR_UPDATE);
    assert_rc(rowlock_acquire(l, INT64_MAX, 0), 0, c);
    assert_rc(rowlock_release(l), 0, c);
    rowlock_reap_options ro = ROWLOCK_REAP_OPTIONS_INIT;
    rowlock_reap_stats st;
    memset(&st, 0, sizeof st);
    st.version = ROWLOCK_REAP_STATS_VERSION;
    ro.max_ms = INT64_MAX;
    ro.grace_ms = 3600 * 1000;
    assert_rc(rowlock_admin_reap(c, &ro, &st), 0, c);
    assert_int_equal(st.complete, 1);
}

/* Item 10: every EINVALID has a message. */
static void test_hostile__schema_version_null_sets_a_message(void **state)
{
    (void)state;
    rowlock_client *c = tu_client("t_client");
    assert_rc(rowlock_schema_version(c, NULL), ROWLOCK_EINVALID, c);
    assert_msg_has(c, "NULL");
}

/* Item 11: an overlong [rowlock] table= names the limit, not ENAMETOOLONG. */
static void test_hostile__overlong_table_in_the_file_names_the_limit(void **state)
{
    (void)state;
    char path[64], extra[400];
    memset(extra, 0, sizeof extra);
    strcpy(extra, "[rowlock]\ntable=");
    memset(extra + strlen(extra), 'x', 200);
    write_optfile_extra(path, sizeof path, NULL, extra);
    rowlock_client *c = new_client();
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    o.defaults_file = path;
    assert_rc(rowlock_client_connect(c, &o), ROWLOCK_EINVALID, c);
    unlink(path);
    assert_msg_has(c, "200 bytes, the limit is 57");
    if (tu_strcasestr(rowlock_client_errmsg(c), "File name too long"))
        fail_msg("%s", rowlock_client_errmsg(c));
}

/* Item 12: rowlock's own objects are not lock tables. */
static void test_hostile__reserved_table_names_are_refused(void **state)
{
    (void)state;
    static const char *bad[] = { "rowlock_schema", "ROWLOCK_SCHEMA", "t_client_queue", "t_client_token",
                                 "x_Queue", "t_client_floor", "t_client_hold" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rowlock_client *c = new_client();
        if (try_connect(c, bad[i], ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK) != ROWLOCK_EINVALID)
            fail_msg("table name %s was accepted", bad[i]);
        assert_msg_has(c, "rowlock's own tables");
        rowlock_client *m = new_client();
        if (try_connect(m, bad[i], ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK) == 0 && rowlock_schema_migrate(m, 0, NULL, NULL) == 0)
            fail_msg("migrate created lock table %s", bad[i]);
    }
}

/* ---- wrapping an application's connection ------------------------------------------------------------------ */

/* ---- rowlock_client_interrupt ------------------------------------------------ */

typedef struct interrupt_later {
    rowlock_client *c;
    int ms;
} interrupt_later;

static void *interrupt_after(void *p)
{
    interrupt_later *a = p;
    tu_sleep_ms(a->ms);
    rowlock_client_interrupt(a->c);
    return NULL;
}

/* A waiting acquire (no deadline, a holder with a 60 s lease) on another
 * thread's interrupt returns ROWLOCK_EBUSY "interrupted" (without it the
 * test waits until ctest's timeout fails it); the request is then
 * cleared: the same handle is granted once the holder lets go (its cut
 * connection reconnects). An interrupt before the call ends the next wait
 * at once. Exclusive (the lease wait loop) and shared (the holders table). */
static void test_interrupt__ends_a_waiting_acquire_and_is_cleared(void **state)
{
    (void)state;
    for (int shared = 0; shared <= 1; shared++) {
        const char *name = shared ? "intr-shared" : "intr-excl";
        rowlock_client *h = tu_client("t_client"), *w = tu_client("t_client");
        rowlock_lock_options o = ROWLOCK_LOCK_OPTIONS_INIT;
        o.strategy = ROWLOCK_STRATEGY_INSERT;
        rowlock_lock *lh = NULL, *lw = NULL;
        assert_rc(rowlock_lock_new(&lh, h, name, &o), 0, h);
        tu_register_lock(lh);
        o.mode = shared ? ROWLOCK_MODE_SHARED : ROWLOCK_MODE_EXCLUSIVE;
        assert_rc(rowlock_lock_new(&lw, w, name, &o), 0, w);
        tu_register_lock(lw);
        if (shared) { /* an exclusive holder of a name used shared: the holders table */
            rowlock_lock_options so = o;
            rowlock_lock *ls = NULL;
            assert_rc(rowlock_lock_new(&ls, h, name, &so), 0, h);
            tu_register_lock(ls);
            assert_rc(rowlock_acquire(ls, 0, TU_LEASE_LONG), 0, h);
            assert_rc(rowlock_release(ls), 0, h);
        }
        assert_rc(rowlock_acquire(lh, 0, TU_LEASE_LONG), 0, h);

        interrupt_later a = { w, 300 };
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, interrupt_after, &a), 0);
        int64_t t0 = tu_now_us();
        assert_rc(rowlock_acquire(lw, ROWLOCK_WAIT_FOREVER, TU_LEASE_LONG), ROWLOCK_EBUSY, w);
        int64_t took_ms = (tu_now_us() - t0) / 1000;
        pthread_join(t, NULL);
        tu_assert_msg_has(w, "interrupted", __FILE__, __LINE__);
        fprintf(stderr, "%s: interrupted after %lld ms of a wait without deadline\n", name, (long long)took_ms);

        rowlock_client_interrupt(w); /* before the call: the next wait ends at once */
        assert_rc(rowlock_acquire(lw, ROWLOCK_WAIT_FOREVER, TU_LEASE_LONG), ROWLOCK_EBUSY, w);
        tu_assert_msg_has(w, "interrupted", __FILE__, __LINE__);

        assert_rc(rowlock_release(lh), 0, h);
        assert_rc(rowlock_acquire(lw, 10000, TU_LEASE_LONG), 0, w); /* cleared; reconnected */
        /* An interrupt that comes after the grant (a signal as the lock was
         * granted) cuts the connection but must not keep the release from
         * reconnecting: the lock is given back, not left to its lease. */
        rowlock_client_interrupt(w);
        assert_rc(rowlock_release(lw), 0, w);
        assert_rc(rowlock_acquire(lh, 0, TU_LEASE_LONG), 0, h); /* free at once */
        assert_rc(rowlock_release(lh), 0, h);
        assert_rc(rowlock_acquire(lw, ROWLOCK_WAIT_FOREVER, TU_LEASE_LONG), ROWLOCK_EBUSY, w); /* still asked */
        tu_assert_msg_has(w, "interrupted", __FILE__, __LINE__);
        assert_rc(rowlock_acquire(lw, 0, TU_LEASE_LONG), 0, w);
        assert_rc(rowlock_release(lw), 0, w);
    }
}

typedef struct acquire_in_thread {
    rowlock_lock *l;
    int rc;
} acquire_in_thread;

static void *acquire_forever(void *p)
{
    acquire_in_thread *a = p;
    a->rc = rowlock_acquire(a->l, ROWLOCK_WAIT_FOREVER, TU_LEASE_LONG);
    return NULL;
}

/* Until a session heads the waiter queue of `name` (runs its head wait). */
static void wait_heads_queue(const char *name)
{
    int ok = 0;
    int64_t t0 = tu_now_us();
    while (tu_sql_int(NULL, &ok, "SELECT COUNT(*) FROM t_client_queue q JOIN information_schema.PROCESSLIST p "
                                 "ON p.ID = q.conn WHERE q.name = '%s' AND p.INFO LIKE '%%rowlock:head-wait%%'",
                      name) != 1) {
        if (tu_ms_since(t0) > 10000)
            fail_msg("%s: the waiter did not head the queue within 10 s", name);
        tu_sleep_ms(20);
    }
}

static void count_given_back(const rowlock_event *ev, void *arg)
{
    if (ev->kind == ROWLOCK_EVENT_RELEASED && strstr(ev->message, "given back"))
        __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

/* The interrupt cuts a waiter that heads the queue; the holder releases a
 * moment later, before the server has noticed the cut (a session waiting
 * in GET_LOCK notices its client gone only some time later), so the release hands the
 * lock to the cut session in the waiter's name. The interrupted acquire
 * must end that session and give the grant back before it returns: the
 * holder then takes the name again at once, where it used to find it held
 * by the waiter's owner for the waiter's whole lease. The log proves the
 * hand-off happened (else the test proves nothing). Both lease strategies. */
static void test_interrupt__a_lock_handed_to_the_cut_wait_is_given_back(void **state)
{
    (void)state;
    static const rowlock_strategy strategies[] = { ROWLOCK_STRATEGY_INSERT, ROWLOCK_STRATEGY_OPTIMISTIC };
    for (size_t s = 0; s < 2; s++) {
        const char *name = s == 0 ? "intr-handed-i" : "intr-handed-o";
        rowlock_client *h = tu_client("t_client"), *w = tu_client("t_client");
        int given_back = 0;
        assert_rc(rowlock_client_set_log(w, ROWLOCK_LOG_INFO, count_given_back, &given_back), 0, w);
        rowlock_lock *lh = tu_lock(h, name, strategies[s]), *lw = tu_lock(w, name, strategies[s]);
        assert_rc(rowlock_acquire(lh, 0, TU_LEASE_LONG), 0, h);
        acquire_in_thread a = { lw, 0 };
        pthread_t t;
        int64_t t0;
        /* The server sometimes sees the cut first (the session then ends and
         * the release hands nothing over): rounds until one release handed
         * the lock to the cut session; the name must be free after each. */
        int round = 0;
        while (__atomic_load_n(&given_back, __ATOMIC_SEQ_CST) == 0) {
            if (++round > 10)
                fail_msg("%s: in 10 rounds no release handed the lock to the cut session: the race was not hit",
                         name);
            assert_int_equal(pthread_create(&t, NULL, acquire_forever, &a), 0);
            wait_heads_queue(name);
            t0 = tu_now_us();
            rowlock_client_interrupt(w);
            assert_rc(rowlock_release(lh), 0, h);
            pthread_join(t, NULL);
            fprintf(stderr, "%s: round %d: the interrupted acquire returned %.1f ms after the interrupt, %d given back\n",
                    name, round, tu_ms_since(t0), __atomic_load_n(&given_back, __ATOMIC_SEQ_CST));
            assert_int_equal(a.rc, ROWLOCK_EBUSY);
            tu_assert_msg_has(w, "interrupted", __FILE__, __LINE__);
            assert_rc(rowlock_acquire(lh, 0, TU_LEASE_LONG), 0, h); /* free at once */
        }
        /* Now the release comes after the interrupted acquire returned: the
         * cut session must be gone by then, or it is handed the lock. */
        assert_int_equal(pthread_create(&t, NULL, acquire_forever, &a), 0);
        wait_heads_queue(name);
        t0 = tu_now_us();
        rowlock_client_interrupt(w);
        pthread_join(t, NULL);
        fprintf(stderr, "%s: the interrupted acquire returned %.1f ms after the interrupt (session ended)\n", name,
                tu_ms_since(t0));
        assert_int_equal(a.rc, ROWLOCK_EBUSY);
        assert_rc(rowlock_release(lh), 0, h);
        assert_rc(rowlock_acquire(lh, 0, TU_LEASE_LONG), 0, h); /* free at once */
        assert_rc(rowlock_release(lh), 0, h);
        assert_rc(rowlock_acquire(lw, 0, TU_LEASE_LONG), 0, w); /* and the waiter's client works on */
        assert_rc(rowlock_release(lw), 0, w);
        tu_lock_free(lh);
        tu_lock_free(lw);
    }
}

typedef struct many_in_thread {
    rowlock_lock *ls[2];
    int rc;
} many_in_thread;

static void *acquire_many_forever(void *p)
{
    many_in_thread *a = p;
    size_t failed = 0;
    a->rc = rowlock_acquire_many(a->ls, 2, ROWLOCK_WAIT_FOREVER, TU_LEASE_LONG, &failed);
    return NULL;
}

/* rowlock_acquire_many takes a free name, then waits for a held one; an
 * interrupt ends the wait. The name it took must be free again when the
 * call returns (its release after the cut cannot reach the server before
 * the call ends: the give-back adopts and releases it), not held in the
 * waiter's name for the whole lease. */
static void test_interrupt__acquire_many_gives_back_what_it_took(void **state)
{
    (void)state;
    rowlock_client *h = tu_client("t_client"), *w = tu_client("t_client"), *o = tu_client("t_client");
    rowlock_lock *held = tu_lock(h, "intr-many-b", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *other = tu_lock(o, "intr-many-a", ROWLOCK_STRATEGY_INSERT);
    many_in_thread a = { { tu_lock(w, "intr-many-a", ROWLOCK_STRATEGY_INSERT),
                           tu_lock(w, "intr-many-b", ROWLOCK_STRATEGY_INSERT) }, 0 };
    assert_rc(rowlock_acquire(held, 0, TU_LEASE_LONG), 0, h);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, acquire_many_forever, &a), 0);
    wait_heads_queue("intr-many-b"); /* holds a, waits for b */
    rowlock_client_interrupt(w);
    pthread_join(t, NULL);
    assert_int_equal(a.rc, ROWLOCK_EBUSY);
    tu_assert_msg_has(w, "interrupted", __FILE__, __LINE__);
    assert_rc(rowlock_acquire(other, 0, TU_LEASE_LONG), 0, o); /* a is free at once */
    assert_rc(rowlock_release(other), 0, o);
    assert_rc(rowlock_release(held), 0, h);
    rowlock_lock *other_b = tu_lock(o, "intr-many-b", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(other_b, 0, TU_LEASE_LONG), 0, o); /* and b: nothing left in w's name */
    assert_rc(rowlock_release(other_b), 0, o);
}

/* A wrapped connection (the application's) cannot be cut, so an interrupt
 * takes effect when the current wait statement ends. The head of a name's
 * queue waits in slices of a quarter of the time it has seen the grant (at
 * least 1 s): after 6 s at the head, an interrupt returns within about 2 s,
 * not at the holder's lease end (60 s). Planted lease-long slices: about
 * 50 s, fails. */
static void test_interrupt__a_wrapped_head_returns_at_the_end_of_its_slice(void **state)
{
    (void)state;
    void *m = tu_mysql_connect(NULL, 0);
    assert_non_null(m);
    rowlock_client *c = new_client(), *h = tu_client("t_client");
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    o.table = "t_client";
    assert_rc(rowlock_client_wrap(c, m, &o), 0, c);
    rowlock_lock *lh = tu_lock(h, "wrap-intr", ROWLOCK_STRATEGY_INSERT);
    rowlock_lock *lw = tu_lock(c, "wrap-intr", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(lh, 0, TU_LEASE_LONG), 0, h);
    acquire_in_thread a = { lw, -99 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, acquire_forever, &a), 0);
    wait_heads_queue("wrap-intr");
    tu_sleep_ms(6000);
    const int64_t t0 = tu_now_us();
    rowlock_client_interrupt(c);
    assert_int_equal(pthread_join(t, NULL), 0);
    const long long took_ms = (long long)((tu_now_us() - t0) / 1000);
    fprintf(stderr, "wrapped head: returned %lld ms after the interrupt\n", took_ms);
    assert_rc(a.rc, ROWLOCK_EBUSY, c);
    tu_assert_msg_has(c, "interrupted", __FILE__, __LINE__);
    assert_true(took_ms < 4000);
    assert_rc(rowlock_release(lh), 0, h);
    tu_lock_free(lw);
    tu_client_free(c);
    assert_int_equal(tu_mysql_query(m, "SELECT 1"), 0); /* the application's connection is intact */
    tu_mysql_close(m);
}

static void test_wrap__uses_the_connection_and_free_does_not_close_it(void **state)
{
    (void)state;
    void *m = tu_mysql_connect(NULL, 0);
    rowlock_client *c = new_client(), *b = tu_client("t_client");
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    rowlock_lock *l, *lb;
    assert_non_null(m);
    o.table = "t_client";
    assert_rc(rowlock_client_wrap(c, m, &o), 0, c);
    assert_string_equal(rowlock_client_table(c), "t_client");
    l = tu_lock(c, "wrapped", ROWLOCK_STRATEGY_INSERT);
    lb = tu_lock(b, "wrapped", ROWLOCK_STRATEGY_INSERT);
    assert_rc(rowlock_acquire(l, 0, TU_LEASE_LONG), 0, c);
    assert_rc(rowlock_acquire(lb, 0, TU_LEASE_LONG), ROWLOCK_EBUSY, b);
    assert_rc(rowlock_release(l), 0, c);
    /* for-update too, on the application's session */
    {
        rowlock_lock *f = tu_lock(c, "wrapped-fu", ROWLOCK_STRATEGY_FOR_UPDATE);
        rowlock_lock *fb = tu_lock(b, "wrapped-fu", ROWLOCK_STRATEGY_FOR_UPDATE);
        assert_rc(rowlock_acquire(f, 0, 0), 0, c);
        assert_rc(rowlock_acquire(fb, 0, 0), ROWLOCK_EBUSY, b);
        assert_rc(rowlock_release(f), 0, c);
        tu_lock_free(f);
    }
    tu_lock_free(l);
    tu_client_free(c);
    /* The application's connection still answers. */
    assert_int_equal(tu_mysql_query(m, "SELECT 1"), 0);
    assert_int_equal(tu_mysql_query(m, "SELECT COUNT(*) FROM t_client"), 0);
    tu_mysql_close(m);
}

static void test_wrap__null_connection_and_found_rows_are_refused(void **state)
{
    (void)state;
    rowlock_client *c = new_client();
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    void *m;
    o.table = "t_client";
    assert_rc(rowlock_client_wrap(c, NULL, &o), ROWLOCK_EINVALID, c);
    m = tu_mysql_connect(NULL, CLIENT_FOUND_ROWS_FLAG);
    assert_non_null(m);
    assert_rc(rowlock_client_wrap(c, m, &o), ROWLOCK_EINVALID, c);
    assert_msg_has(c, "FOUND_ROWS");
    tu_client_free(c);
    assert_int_equal(tu_mysql_query(m, "SELECT 1"), 0);
    tu_mysql_close(m);
}

static void test_wrap__lease_locks_refuse_an_open_application_transaction(void **state)
{
    (void)state;
    void *m = tu_mysql_connect(NULL, 0);
    rowlock_client *c = new_client();
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    rowlock_lock *li, *lo_;
    assert_non_null(m);
    o.table = "t_client";
    assert_rc(rowlock_client_wrap(c, m, &o), 0, c);
    li = tu_lock(c, "apptrx", ROWLOCK_STRATEGY_INSERT);
    lo_ = tu_lock(c, "apptrx-o", ROWLOCK_STRATEGY_OPTIMISTIC);
    assert_int_equal(tu_mysql_query(m, "START TRANSACTION"), 0);
    assert_rc(rowlock_acquire(li, 0, 1000), ROWLOCK_EINVALID, c);
    assert_msg_has(c, "transaction");
    assert_rc(rowlock_acquire(lo_, 0, 1000), ROWLOCK_EINVALID, c);
    assert_int_equal(tu_mysql_query(m, "ROLLBACK"), 0);
    assert_rc(rowlock_acquire(li, 0, 1000), 0, c);
    assert_rc(rowlock_release(li), 0, c);
    tu_lock_free(li);
    tu_lock_free(lo_);
    tu_client_free(c);
    tu_mysql_close(m);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_client__a_new_client_has_an_owner_and_no_error),
        TU_TEST(test_client__connects_and_reports_the_server),
        TU_TEST(test_interrupt__ends_a_waiting_acquire_and_is_cleared),
        TU_TEST(test_interrupt__a_lock_handed_to_the_cut_wait_is_given_back),
        TU_TEST(test_interrupt__a_wrapped_head_returns_at_the_end_of_its_slice),
        TU_TEST(test_interrupt__acquire_many_gives_back_what_it_took),
        TU_TEST(test_errors__every_code_has_a_name_and_a_sentence),
        TU_TEST(test_connect__nothing_listening_gives_edb_naming_the_host),
        TU_TEST(test_connect__wrong_password_gives_edb),
        TU_TEST(test_connect__bad_options_are_einvalid),
        TU_TEST(test_connect__bad_table_names_are_einvalid),
        TU_TEST(test_migrate__works_for_a_57_byte_table_name),
        TU_TEST(test_schema__a_missing_table_is_eschema_naming_the_versions),
        TU_TEST(test_migrate__is_idempotent),
        TU_TEST(test_migrate__two_processes_at_once_on_a_fresh_table),
        TU_TEST(test_migrate__waits_for_another_migration_longer_than_the_read_timeout),
        TU_TEST(test_schema__newer_than_the_library_is_eschema),
        TU_TEST(test_optfile__client_settings_and_rowlock_table_are_used),
        TU_TEST(test_optfile__a_bad_table_in_the_file_is_einvalid),
        TU_TEST(test_optfile__an_unreadable_defaults_file_is_einvalid),
        TU_TEST(test_hostile__file_tls_settings_do_not_override_explicit_disabled),
        TU_TEST(test_hostile__explicit_connect_timeout_beats_the_file),
        TU_TEST(test_hostile__a_pipe_as_defaults_file_is_read_once_and_used),
        TU_TEST(test_hostile__devices_and_endless_includes_are_refused),
        TU_TEST(test_hostile__mysql_pwd_is_not_honoured),
        TU_TEST(test_hostile__force_release_checks_the_version_first),
        TU_TEST(test_hostile__int64_max_waits_do_not_overflow),
        TU_TEST(test_hostile__schema_version_null_sets_a_message),
        TU_TEST(test_hostile__overlong_table_in_the_file_names_the_limit),
        TU_TEST(test_hostile__reserved_table_names_are_refused),
        TU_TEST(test_wrap__uses_the_connection_and_free_does_not_close_it),
        TU_TEST(test_wrap__null_connection_and_found_rows_are_refused),
        TU_TEST(test_wrap__lease_locks_refuse_an_open_application_transaction),
    };
    return tu_main("client", tests, sizeof tests / sizeof tests[0], "t_client", argc > 1 ? argv[1] : NULL);
}
