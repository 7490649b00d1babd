/*
 * TLS modes and option files against a private server that offers TLS
 * (tools/rowlock-sandbox start --tls: its own CA, a server certificate naming
 * "localhost" only, and a second CA that signed nothing). Issue 13 items 1
 * and 6: explicit settings beat the option file, and the modes mean what the
 * mysql client's --ssl-mode means.
 *
 * Encryption is observed on the server: its Ssl_accepts counter grows by one
 * per TLS handshake (read over a plain admin connection of this test).
 * ROWLOCK_TLS_SANDBOX_DIR (optional) names an already running --tls sandbox
 * to use instead of starting one.
 */
#include "testutil.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char sbx_dir[300], tls_dir[400], base[256];
static int own_sandbox;
static unsigned port;
static char password[256];

static int run_script(const char *cmd, const char *extra)
{
    char line[1200];
    snprintf(line, sizeof line, "\"%s\" %s %s \"%s\" >\"%s.log\" 2>&1", getenv("ROWLOCK_SANDBOX"), cmd, extra,
             sbx_dir, sbx_dir);
    return system(line);
}

static int group_setup(void **state)
{
    (void)state;
    const char *given = getenv("ROWLOCK_TLS_SANDBOX_DIR");
    char path[512], val[64];
    if (given && *given) {
        snprintf(sbx_dir, sizeof sbx_dir, "%s", given);
    } else {
        const char *script = getenv("ROWLOCK_SANDBOX");
        if (!script || access(script, X_OK) != 0) {
            fprintf(stderr, "ROWLOCK_SANDBOX not set: cannot start a TLS server\n");
            return -1;
        }
        snprintf(base, sizeof base, "/tmp/rowlock-tls.XXXXXX");
        if (!mkdtemp(base))
            return -1;
        chmod(base, 0755);
        snprintf(sbx_dir, sizeof sbx_dir, "%s/sbx", base);
        own_sandbox = 1;
        if (run_script("start", "--tls") != 0) {
            fprintf(stderr, "rowlock-sandbox start --tls %s failed (see %s.log)\n", sbx_dir, sbx_dir);
            return -1;
        }
    }
    snprintf(tls_dir, sizeof tls_dir, "%s/tls", sbx_dir);
    snprintf(path, sizeof path, "%s/my.cnf", sbx_dir);
    if (!tu_optfile_get(path, "client", "port", val, sizeof val) ||
        !tu_optfile_get(path, "client", "password", password, sizeof password))
        return -1;
    port = (unsigned)atoi(val);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (own_sandbox) {
        run_script("stop", "");
        char log[400];
        snprintf(log, sizeof log, "%s.log", sbx_dir);
        unlink(log);
        rmdir(base);
    }
    return 0;
}

static char *tls_file(const char *name)
{
    static char bufs[4][512];
    static unsigned next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", tls_dir, name);
    return b;
}

/* An option file for the TLS server: host (127.0.0.1 unless given), then `extra`. */
static void write_cnf(char *path, size_t cap, const char *host, const char *extra)
{
    snprintf(path, cap, "/tmp/rowlock-tls-cnf.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f, "[client]\nhost=%s\nport=%u\nuser=rowlock\npassword=%s\ndatabase=rowlock\n%s\n",
            host ? host : "127.0.0.1", port, password, extra ? extra : "");
    fclose(f);
}

/* The server's count of TLS handshakes so far. */
static long long ssl_accepts(void)
{
    char cnf[64];
    int ok = 0;
    write_cnf(cnf, sizeof cnf, NULL, "");
    long long n = tu_sql_int(cnf, &ok, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                                        "WHERE VARIABLE_NAME = 'SSL_ACCEPTS'");
    unlink(cnf);
    assert_true(ok);
    return n;
}

/* Connect with `mode`, `ca` (may be NULL) and the option file lines `extra`;
 * returns the result; *encrypted tells whether a TLS handshake happened. */
static int try_tls(rowlock_client **out, rowlock_tls_mode mode, const char *ca, const char *host, const char *extra,
                   int *encrypted)
{
    char cnf[64];
    rowlock_client *c = NULL;
    assert_int_equal(rowlock_client_new(&c), 0);
    tu_register_client(c);
    write_cnf(cnf, sizeof cnf, host, extra);
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    o.defaults_file = cnf;
    o.table = "t_tls";
    o.flags = ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK;
    o.tls_mode = mode;
    o.tls_ca = ca;
    long long before = ssl_accepts();
    int rc = rowlock_client_connect(c, &o);
    *encrypted = ssl_accepts() > before;
    unlink(cnf);
    *out = c;
    return rc;
}

static void test_tls__verify_ca_checks_the_chain_not_the_host_name(void **state)
{
    (void)state;
    rowlock_client *c;
    int enc;
    /* 127.0.0.1 is not in the certificate: VERIFY_CA must not care. */
    assert_rc(try_tls(&c, ROWLOCK_TLS_VERIFY_CA, tls_file("ca.pem"), NULL, NULL, &enc), 0, c);
    assert_true(enc);
    assert_rc(try_tls(&c, ROWLOCK_TLS_VERIFY_CA, tls_file("other-ca.pem"), NULL, NULL, &enc), ROWLOCK_EDB, c);
}

static void test_tls__verify_identity_checks_the_host_name(void **state)
{
    (void)state;
    rowlock_client *c;
    int enc;
    assert_rc(try_tls(&c, ROWLOCK_TLS_VERIFY_IDENTITY, tls_file("ca.pem"), NULL, NULL, &enc), ROWLOCK_EDB, c);
    /* "localhost" over TCP (protocol=1) is the name the certificate has. */
    assert_rc(try_tls(&c, ROWLOCK_TLS_VERIFY_IDENTITY, tls_file("ca.pem"), "localhost", "protocol=1", &enc), 0, c);
    assert_true(enc);
}

static void test_tls__an_explicit_ca_beats_the_files_ca(void **state)
{
    (void)state;
    rowlock_client *c;
    int enc;
    char line[600];
    /* The file pins the right CA, the caller another one: the caller's wins. */
    snprintf(line, sizeof line, "ssl-ca=%s", tls_file("ca.pem"));
    assert_rc(try_tls(&c, ROWLOCK_TLS_VERIFY_CA, tls_file("other-ca.pem"), NULL, line, &enc), ROWLOCK_EDB, c);
    snprintf(line, sizeof line, "ssl-ca=%s", tls_file("other-ca.pem"));
    assert_rc(try_tls(&c, ROWLOCK_TLS_VERIFY_CA, tls_file("ca.pem"), NULL, line, &enc), 0, c);
    assert_true(enc);
}

static void test_tls__the_file_cannot_switch_off_host_verification(void **state)
{
    (void)state;
    rowlock_client *c;
    int enc;
    assert_rc(try_tls(&c, ROWLOCK_TLS_VERIFY_IDENTITY, tls_file("ca.pem"), NULL, "ssl-verify-server-cert=0", &enc),
              ROWLOCK_EDB, c);
}

static void test_tls__disabled_never_encrypts_even_with_ssl_ca_in_the_file(void **state)
{
    (void)state;
    rowlock_client *c;
    int enc;
    char line[600];
    snprintf(line, sizeof line, "ssl-ca=%s\nssl-verify-server-cert=1", tls_file("ca.pem"));
    assert_rc(try_tls(&c, ROWLOCK_TLS_DISABLED, NULL, NULL, line, &enc), 0, c);
    assert_false(enc);
}

static void test_tls__preferred_and_required_verify_nothing(void **state)
{
    (void)state;
    rowlock_client *c;
    int enc;
    char line[600];
    snprintf(line, sizeof line, "ssl-ca=%s", tls_file("other-ca.pem"));
    assert_rc(try_tls(&c, ROWLOCK_TLS_PREFERRED, NULL, NULL, line, &enc), 0, c);
    assert_true(enc);
    assert_rc(try_tls(&c, ROWLOCK_TLS_REQUIRED, NULL, NULL, line, &enc), 0, c);
    assert_true(enc);
    /* A CA given with a mode that would not use it is refused, not ignored. */
    assert_rc(try_tls(&c, ROWLOCK_TLS_REQUIRED, tls_file("ca.pem"), NULL, NULL, &enc), ROWLOCK_EINVALID, c);
    assert_msg_has(c, "only used by TLS modes VERIFY_CA and VERIFY_IDENTITY");
}

static void test_tls__required_fails_against_a_server_without_tls(void **state)
{
    (void)state;
    rowlock_client *c = NULL;
    assert_int_equal(rowlock_client_new(&c), 0);
    tu_register_client(c);
    rowlock_client_options o = ROWLOCK_CLIENT_OPTIONS_INIT;
    o.defaults_file = tu_defaults_file(); /* the shared server offers no TLS */
    o.table = "t_tls";
    o.flags = ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK;
    o.tls_mode = ROWLOCK_TLS_REQUIRED;
    assert_rc(rowlock_client_connect(c, &o), ROWLOCK_EDB, c);
    assert_msg_has(c, "not encrypted");
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        TU_TEST(test_tls__verify_ca_checks_the_chain_not_the_host_name),
        TU_TEST(test_tls__verify_identity_checks_the_host_name),
        TU_TEST(test_tls__an_explicit_ca_beats_the_files_ca),
        TU_TEST(test_tls__the_file_cannot_switch_off_host_verification),
        TU_TEST(test_tls__disabled_never_encrypts_even_with_ssl_ca_in_the_file),
        TU_TEST(test_tls__preferred_and_required_verify_nothing),
        TU_TEST(test_tls__required_fails_against_a_server_without_tls),
    };
    if (rowlock_library_init() != 0)
        return 1;
    if (argc > 1 && argv[1][0])
        cmocka_set_test_filter(argv[1]);
    int rc = cmocka_run_group_tests_name("tls", tests, group_setup, group_teardown);
    rowlock_library_end();
    return rc;
}
