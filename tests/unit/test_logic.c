/*
 * Pure-logic unit tests: no server. Linked with the library's objects, so the
 * internal helpers from src/rowlock_int.h are callable.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rowlock_int.h"

/* ---- a waiter's slice while nothing changes ------------------------------------ */

static void test_quarter_slice__a_quarter_of_the_time_seen_within_its_bounds(void **state)
{
    (void)state;
    assert_true(rowlock__quarter_slice_s(0, 1.0, 30.0) == 1.0);          /* at least lo */
    assert_true(rowlock__quarter_slice_s(-5000000, 0.25, 5.0) == 0.25);  /* a clock read early */
    assert_true(rowlock__quarter_slice_s(8000000, 1.0, 30.0) == 2.0);    /* 8 s seen: 2 s */
    assert_true(rowlock__quarter_slice_s(12000000, 0.25, 5.0) == 3.0);
    assert_true(rowlock__quarter_slice_s(600000000, 0.25, 5.0) == 5.0);  /* at most hi */
    assert_true(rowlock__quarter_slice_s(600000000, 1.0, 0.4) == 0.4);   /* a lease ending sooner wins */
    assert_true(rowlock__quarter_slice_s(0, 1.0, 0.4) == 0.4);
}

/* ---- backoff ------------------------------------------------------------------ */

static const uint32_t some_rnd[] = { 0u, 1u, 2u, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu,
                                     12345u, 0xdeadbeefu, 0x9e3779b9u, 0x55555555u, 0xaaaaaaaau };
#define N_RND (sizeof some_rnd / sizeof some_rnd[0])

/* min(cap, base * 2^attempt) without overflow. */
static int64_t envelope(unsigned attempt, int64_t base, int64_t cap)
{
    int64_t v = base;
    for (unsigned i = 0; i < attempt && v < cap; i++)
        v = v > INT64_MAX / 2 ? INT64_MAX : v * 2;
    return v < cap ? v : cap;
}

static void check_bounds(int64_t base, int64_t cap)
{
    for (unsigned a = 0; a < 80; a++) {
        for (size_t k = 0; k < N_RND; k++) {
            int64_t v = rowlock__backoff_us(a, base, cap, some_rnd[k]);
            int64_t hi = envelope(a, base, cap);
            if (v < base / 2 || v > hi)
                fail_msg("backoff(attempt %u, base %lld, cap %lld, rnd %#x) = %lld, not in [%lld, %lld]",
                         a, (long long)base, (long long)cap, some_rnd[k], (long long)v,
                         (long long)(base / 2), (long long)hi);
        }
    }
}

static void test_backoff__stays_between_half_base_and_capped_envelope(void **state)
{
    (void)state;
    check_bounds(1000, 100000);
    check_bounds(2000, 250000);
    check_bounds(1, 1000000);
    check_bounds(5000, 5000);
}

static void test_backoff__never_exceeds_cap_even_for_huge_attempts(void **state)
{
    (void)state;
    const unsigned attempts[] = { 63, 64, 65, 100, 1000, 100000, UINT_MAX };
    for (size_t i = 0; i < sizeof attempts / sizeof attempts[0]; i++)
        for (size_t k = 0; k < N_RND; k++) {
            int64_t v = rowlock__backoff_us(attempts[i], 1000, 200000, some_rnd[k]);
            assert_true(v <= 200000);
            assert_true(v >= 500);
        }
}

static void test_backoff__grows_with_attempts_until_the_cap(void **state)
{
    (void)state;
    const int64_t base = 1000, cap = 1000 * 64;
    double prev_mean = -1;
    int64_t prev_max = -1;
    /* Mean over many rnd values strictly grows while the envelope grows. */
    for (unsigned a = 0; a <= 6; a++) {
        double sum = 0;
        int64_t mx = 0;
        uint64_t st = 42;
        for (int k = 0; k < 4000; k++) {
            int64_t v = rowlock__backoff_us(a, base, cap, rowlock__rand32(&st));
            sum += (double)v;
            if (v > mx)
                mx = v;
        }
        if (a > 0 && !(sum / 4000 > prev_mean))
            fail_msg("mean backoff did not grow from attempt %u (%.0f) to %u (%.0f)", a - 1,
                     prev_mean, a, sum / 4000);
        assert_true(mx >= prev_max);
        prev_mean = sum / 4000;
        prev_max = mx;
    }
    /* The largest value reaches (close to) the cap once the envelope is there. */
    {
        int64_t mx = 0;
        uint64_t st = 99;
        for (int k = 0; k < 4000; k++) {
            int64_t v = rowlock__backoff_us(20, base, cap, rowlock__rand32(&st));
            if (v > mx)
                mx = v;
        }
        assert_true(mx >= cap * 9 / 10);
    }
}

/* Over many rnd values, one attempt's delays spread over its interval. */
static void test_backoff__jitter_spreads_over_the_interval(void **state)
{
    (void)state;
    const int64_t lo = 1000 / 2, hi = 1000 * 32; /* attempt 5, base 1000, cap 1000000 */
    int64_t mn = INT64_MAX, mx = 0;
    uint64_t st = 1234;
    for (int k = 0; k < 4000; k++) {
        int64_t v = rowlock__backoff_us(5, 1000, 1000000, rowlock__rand32(&st));
        if (v < mn)
            mn = v;
        if (v > mx)
            mx = v;
    }
    assert_true(mn >= lo && mx <= hi);
    /* Real jitter: the delays cover a good part of the interval (at least
     * 40% of the envelope) and reach its top. */
    if (mx - mn < hi * 4 / 10 || mx < hi - hi / 20)
        fail_msg("backoff jitter covers only [%lld, %lld] of [%lld, %lld]", (long long)mn,
                 (long long)mx, (long long)lo, (long long)hi);
}

static void test_backoff__is_deterministic_for_a_given_rnd(void **state)
{
    (void)state;
    for (unsigned a = 0; a < 20; a++)
        for (size_t k = 0; k < N_RND; k++)
            assert_int_equal(rowlock__backoff_us(a, 1500, 300000, some_rnd[k]),
                             rowlock__backoff_us(a, 1500, 300000, some_rnd[k]));
}

static void test_rand32__is_deterministic_per_seed_and_varies(void **state)
{
    (void)state;
    uint64_t a = 7, b = 7, c = 8;
    uint32_t first = 0;
    int differs = 0, differs_seed = 0;
    for (int i = 0; i < 100; i++) {
        uint32_t x = rowlock__rand32(&a), y = rowlock__rand32(&b), z = rowlock__rand32(&c);
        assert_int_equal(x, y);
        if (i == 0)
            first = x;
        else if (x != first)
            differs = 1;
        if (x != z)
            differs_seed = 1;
    }
    assert_true(differs);
    assert_true(differs_seed);
}

/* ---- UTF-8 ------------------------------------------------------------------------- */

static void utf8_ok(const char *s, size_t n)
{
    size_t bad = 9999;
    const char *why = rowlock__utf8_check((const unsigned char *)s, n, &bad);
    if (why != NULL) {
        char hex[256] = "";
        for (size_t i = 0; i < n && i < 60; i++)
            snprintf(hex + strlen(hex), sizeof hex - strlen(hex), "%02x ", (unsigned char)s[i]);
        fail_msg("utf8_check(%s) refused a valid string: %s (at %zu)", hex, why, bad);
    }
}

/* Invalid; expect_at == (size_t)-1: do not check the position. */
static void utf8_bad(const char *s, size_t n, size_t expect_at)
{
    size_t bad = 9999;
    const char *why = rowlock__utf8_check((const unsigned char *)s, n, &bad);
    char hex[256] = "";
    for (size_t i = 0; i < n && i < 60; i++)
        snprintf(hex + strlen(hex), sizeof hex - strlen(hex), "%02x ", (unsigned char)s[i]);
    if (why == NULL)
        fail_msg("utf8_check(%s) accepted an invalid string", hex);
    assert_true(why[0] != '\0');
    if (bad >= n)
        fail_msg("utf8_check(%s): bad_at %zu is outside the %zu-byte string", hex, bad, n);
    if (expect_at != (size_t)-1 && bad != expect_at)
        fail_msg("utf8_check(%s): bad_at %zu, expected %zu", hex, bad, expect_at);
}

#define OK(lit) utf8_ok(lit, sizeof(lit) - 1)
#define BAD(lit, at) utf8_bad(lit, sizeof(lit) - 1, at)

static void test_utf8__accepts_valid_sequences(void **state)
{
    (void)state;
    OK("plain ascii");
    OK("\x01\x7f");
    OK("\xc2\x80");           /* U+0080, smallest 2-byte */
    OK("\xdf\xbf");           /* U+07FF */
    OK("\xe0\xa0\x80");       /* U+0800, smallest 3-byte */
    OK("\xe9\x94\x81");       /* 锁 */
    OK("\xed\x9f\xbf");       /* U+D7FF, just below the surrogates */
    OK("\xee\x80\x80");       /* U+E000, just above */
    OK("\xef\xbf\xbf");       /* U+FFFF */
    OK("\xf0\x90\x80\x80");   /* U+10000, smallest 4-byte */
    OK("\xf0\x9f\x94\x92");   /* 🔒 */
    OK("\xf4\x8f\xbf\xbf");   /* U+10FFFF, the last code point */
    OK("a\xc3\xa9z\xe9\x94\x81\xf0\x9f\x94\x92!");
}

static void test_utf8__refuses_invalid_sequences(void **state)
{
    (void)state;
    const size_t any = (size_t)-1;
    BAD("\xff", 0);
    BAD("ab\xff", 2);
    BAD("\xfe", 0);
    BAD("\x80", 0);               /* lone continuation byte */
    BAD("ab\xbf", 2);
    BAD("\xe4\xb8", any);         /* truncated 3-byte sequence */
    BAD("a\xe4\xb8", any);
    BAD("\xf0\x9f\x94", any);     /* truncated 4-byte sequence */
    BAD("\xc3", any);             /* truncated 2-byte */
    BAD("\xe4\xb8z", any);        /* continuation replaced by ASCII */
    BAD("\xc0\xaf", 0);           /* overlong '/' */
    BAD("ab\xc0\xaf", 2);
    BAD("\xc1\xbf", 0);           /* overlong U+007F */
    BAD("\xe0\x80\xaf", any);     /* overlong 3-byte */
    BAD("\xe0\x9f\xbf", any);     /* overlong U+07FF */
    BAD("\xf0\x80\x80\xaf", any); /* overlong 4-byte */
    BAD("\xf0\x8f\xbf\xbf", any); /* overlong U+FFFF */
    BAD("\xed\xa0\x80", any);     /* U+D800, high surrogate */
    BAD("\xed\xbf\xbf", any);     /* U+DFFF, low surrogate */
    BAD("\xed\xa0\xbd\xed\xb4\x92", any); /* CESU-8 surrogate pair */
    BAD("\xf4\x90\x80\x80", any); /* U+110000 > U+10FFFF */
    BAD("\xf5\x80\x80\x80", any);
    BAD("\xf8\x88\x80\x80\x80", any); /* 5-byte form */
    BAD("\xfc\x84\x80\x80\x80\x80", any);
}

/* ---- db_classify ---------------------------------------------------------------------- */

/* rowlock_client_conn_lost() answers from the one classification. */
static void test_conn_lost__follows_db_classify(void **state)
{
    (void)state;
    rowlock_client *c = NULL;
    assert_int_equal(rowlock_client_new(&c), 0);
    assert_int_equal(rowlock_client_conn_lost(NULL), 0);
    assert_int_equal(rowlock_client_conn_lost(c), 0); /* no error */
    static const unsigned lost[] = { 2002, 2003, 2005, 2006, 2013, 2014, 2055, 1927, 1053, 1184, 1047 };
    for (size_t i = 0; i < sizeof lost / sizeof lost[0]; i++) {
        c->db_errno = lost[i];
        assert_int_equal(rowlock_client_conn_lost(c), 1);
    }
    static const unsigned other[] = { 1205, 1213, 1146, 1062, 1045, 1064 };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        c->db_errno = other[i];
        assert_int_equal(rowlock_client_conn_lost(c), 0);
    }
    rowlock_client_free(c);
}

/* rowlock_client_transient(): the one table in error.c (issue 24 item 3). */
static void test_transient__follows_the_error_table(void **state)
{
    (void)state;
    rowlock_client *c = NULL;
    assert_int_equal(rowlock_client_new(&c), 0);
    assert_int_equal(rowlock_client_transient(NULL), 0);
    assert_int_equal(rowlock_client_transient(c), 0); /* no error */
    static const unsigned transient[] = { 1290, 1040, 1203, 1047, 1053, 2002, 2003, 2006, 2013, 1205, 1213 };
    for (size_t i = 0; i < sizeof transient / sizeof transient[0]; i++) {
        c->db_errno = transient[i];
        if (rowlock_client_transient(c) != 1 || rowlock__db_transient(transient[i]) == NULL)
            fail_msg("error %u should be transient", transient[i]);
    }
    static const unsigned permanent[] = { 1045, 1044, 1142, 1146, 1054, 4091, 1062, 1064 };
    for (size_t i = 0; i < sizeof permanent / sizeof permanent[0]; i++) {
        c->db_errno = permanent[i];
        if (rowlock_client_transient(c) != 0)
            fail_msg("error %u should be permanent", permanent[i]);
    }
    assert_int_equal(rowlock__db_classify(1290), ROWLOCK__DB_REFUSED);
    assert_int_equal(rowlock__db_classify(1040), ROWLOCK__DB_CONN);
    rowlock_client_free(c);
}

static void test_db_classify__maps_server_errors(void **state)
{
    (void)state;
    /* lock wait timeout, deadlock, max_statement_time exceeded: somebody holds it */
    assert_int_equal(rowlock__db_classify(1205), ROWLOCK__DB_BUSY);
    assert_int_equal(rowlock__db_classify(1213), ROWLOCK__DB_BUSY);
    assert_int_equal(rowlock__db_classify(1969), ROWLOCK__DB_BUSY);
    assert_int_equal(rowlock__db_classify(1317), ROWLOCK__DB_BUSY);
    /* Galera: conflict at commit (certification) is busy; a node that is not
     * ready (non-primary, not synced) is a connection to give up on */
    assert_int_equal(rowlock__db_classify(1180), ROWLOCK__DB_BUSY);
    assert_int_equal(rowlock__db_classify(1047), ROWLOCK__DB_CONN);
    /* table does not exist */
    assert_int_equal(rowlock__db_classify(1146), ROWLOCK__DB_SCHEMA);
    /* can't connect (socket / TCP), server gone away, lost connection */
    assert_int_equal(rowlock__db_classify(2002), ROWLOCK__DB_CONN);
    assert_int_equal(rowlock__db_classify(2003), ROWLOCK__DB_CONN);
    assert_int_equal(rowlock__db_classify(2006), ROWLOCK__DB_CONN);
    assert_int_equal(rowlock__db_classify(2013), ROWLOCK__DB_CONN);
    /* duplicate key */
    assert_int_equal(rowlock__db_classify(1062), ROWLOCK__DB_DUP);
    /* anything else */
    assert_int_equal(rowlock__db_classify(0), ROWLOCK__DB_OTHER);
    assert_int_equal(rowlock__db_classify(1064), ROWLOCK__DB_OTHER); /* syntax */
    assert_int_equal(rowlock__db_classify(1045), ROWLOCK__DB_OTHER); /* access denied */
    assert_int_equal(rowlock__db_classify(1048), ROWLOCK__DB_OTHER); /* column cannot be null */
    assert_int_equal(rowlock__db_classify(1292), ROWLOCK__DB_OTHER); /* truncated value */
    assert_int_equal(rowlock__db_classify(99999), ROWLOCK__DB_OTHER);
}

/* ---- failover host lists ---------------------------------------------------------------- */

static void test_host_list__entries_ports_and_ipv6(void **state)
{
    (void)state;
    char h[64];
    unsigned int port = 99;
    const char *p = "db1, db2:3307,[::1]:3308,::1,[fe80::1],db3:x,db4:70000,,";
    p = rowlock__db_next_host(p, h, sizeof h, &port);
    assert_non_null(p);
    assert_string_equal(h, "db1");
    assert_int_equal(port, 0);
    p = rowlock__db_next_host(p, h, sizeof h, &port);
    assert_string_equal(h, "db2");
    assert_int_equal(port, 3307);
    p = rowlock__db_next_host(p, h, sizeof h, &port);
    assert_string_equal(h, "::1");
    assert_int_equal(port, 3308);
    p = rowlock__db_next_host(p, h, sizeof h, &port);
    assert_string_equal(h, "::1"); /* several colons, no brackets: a bare IPv6 address */
    assert_int_equal(port, 0);
    p = rowlock__db_next_host(p, h, sizeof h, &port);
    assert_string_equal(h, "fe80::1");
    assert_int_equal(port, 0);
    p = rowlock__db_next_host(p, h, sizeof h, &port);
    assert_string_equal(h, "db3:x"); /* not a port: kept whole, the connect reports it */
    assert_int_equal(port, 0);
    p = rowlock__db_next_host(p, h, sizeof h, &port);
    assert_string_equal(h, "db4:70000");
    assert_int_equal(port, 0);
    assert_null(rowlock__db_next_host(p, h, sizeof h, &port));
    assert_null(rowlock__db_next_host("", h, sizeof h, &port));
    assert_null(rowlock__db_next_host(" , ", h, sizeof h, &port));
    /* truncated to the buffer, never overflowing it */
    char small[4];
    p = rowlock__db_next_host("abcdefgh:1", small, sizeof small, &port);
    assert_non_null(p);
    assert_string_equal(small, "abc");
    assert_int_equal(port, 1);
}

/* ---- table names -------------------------------------------------------------------------- */

static void test_table_name_check__accepts_identifier_characters_up_to_57_bytes(void **state)
{
    (void)state;
    char n57[ROWLOCK_TABLE_MAX + 1];
    memset(n57, 'a', ROWLOCK_TABLE_MAX);
    n57[ROWLOCK_TABLE_MAX] = '\0';
    assert_int_equal(rowlock__table_name_check("rowlock_locks"), 0);
    assert_int_equal(rowlock__table_name_check("T"), 0);
    assert_int_equal(rowlock__table_name_check("Locks_2024_x"), 0);
    assert_int_equal(rowlock__table_name_check("9lives"), 0);
    assert_int_equal(rowlock__table_name_check(n57), 0);
}

static void test_table_name_check__refuses_everything_else(void **state)
{
    (void)state;
    char n58[ROWLOCK_TABLE_MAX + 2];
    const char *bad[] = { "", "a-b", "a b", "a`b", "a;b", "a.b", "db.t", "a'b", "a\"b", "a\\b",
                          "a%", "t\n", "\xc3\xa9t\xc3\xa9", "locks)" };
    memset(n58, 'a', ROWLOCK_TABLE_MAX + 1);
    n58[ROWLOCK_TABLE_MAX + 1] = '\0';
    assert_int_not_equal(rowlock__table_name_check(n58), 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (rowlock__table_name_check(bad[i]) == 0)
            fail_msg("table name \"%s\" was accepted", bad[i]);
}

static void test_table_name_check__refuses_rowlocks_own_objects(void **state)
{
    (void)state;
    const char *bad[] = { "rowlock_schema", "Rowlock_Schema", "locks_queue", "locks_token", "x_QUEUE", "_token", "locks_floor", "X_Floor",
                          "locks_hold", "x_HOLD", "locks_fence", "x_Fence", "locks_epoch" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (rowlock__table_name_check(bad[i]) != ROWLOCK__TABLE_RESERVED)
            fail_msg("table name \"%s\" was not refused as reserved", bad[i]);
    assert_int_equal(rowlock__table_name_check("queue_locks"), 0);
    assert_int_equal(rowlock__table_name_check("rowlock_schemas"), 0);
    assert_int_equal(rowlock__table_name_check("tokens"), 0);
}

/* The refusal's message and the check come from one list: every name the
 * message gives is refused, and so is every object the migrations create. */
static void test_table_name_check__the_message_lists_exactly_what_is_refused(void **state)
{
    (void)state;
    char text[100], t[80];
    const char *created[] = { "_token", "_queue", "_floor", "_hold", "_fence", "_epoch" }; /* {{table}}_... in sql/ */
    const char *p = rowlock__table_reserved_text(text, sizeof text);
    size_t named = 0;
    assert_string_equal(text, "rowlock_schema and names ending in _token, _queue, _floor, _hold, _fence or _epoch");
    assert_ptr_equal(p, text);
    for (p = strstr(text, " in ") + 4; *p; named++) {
        size_t n = strcspn(p, ", ");
        snprintf(t, sizeof t, "locks%.*s", (int)n, p);
        if (rowlock__table_name_check(t) != ROWLOCK__TABLE_RESERVED)
            fail_msg("the message names %.*s, but \"%s\" is not refused", (int)n, p, t);
        p += n;
        p += strspn(p, ", ");
        if (strncmp(p, "or ", 3) == 0)
            p += 3;
    }
    assert_int_equal(named, sizeof created / sizeof created[0]);
    for (size_t i = 0; i < sizeof created / sizeof created[0]; i++)
        if (strstr(text, created[i]) == NULL)
            fail_msg("the message does not name %s", created[i]);
}

static void test_escape__controls_c1_and_bad_utf8_never_reach_the_output(void **state)
{
    (void)state;
    char out[128];
    rowlock_escape(out, sizeof out, "a\nrowlock: forged", 17);
    assert_string_equal(out, "a\\x0arowlock: forged");
    rowlock_escape(out, sizeof out, "\x1b]0;title\x07", 10);
    assert_string_equal(out, "\\x1b]0;title\\x07");
    rowlock_escape(out, sizeof out, "\xc2\x9b" "31m\xc2\x9d", 7);     /* C1 CSI, OSC */
    assert_string_equal(out, "\\u009b31m\\u009d");
    rowlock_escape(out, sizeof out, "\xff\xc3(\x7f\\", 5);
    assert_string_equal(out, "\\xff\\xc3(\\x7f\\\\");
    rowlock_escape(out, sizeof out, "caf\xc3\xa9 \xe2\x82\xac", 9);   /* valid UTF-8 stays */
    assert_string_equal(out, "caf\xc3\xa9 \xe2\x82\xac");
    rowlock_escape(out, 8, "abcdefghijkl", 12);                      /* cut, marked */
    assert_string_equal(out, "abcd...");
    rowlock_escape(out, 8, "ab\xe2\x82\xac\xe2\x82\xac", 8);          /* never half a character */
    assert_string_equal(out, "ab...");
    for (int c = 0; c < 256; c++) {
        char in[1] = { (char)c };
        rowlock_escape(out, sizeof out, in, 1);
        for (const unsigned char *p = (const unsigned char *)out; *p; p++)
            if (*p < 0x20 || *p == 0x7f || *p >= 0x80)
                fail_msg("byte 0x%02x escaped to a raw byte 0x%02x", c, *p);
    }
}

/* The bidirectional controls reorder what a reader sees ("Trojan Source"); they, the C1 controls
 * and the line and paragraph separators are shown as one \uXXXX each. Every other code point of
 * valid UTF-8 is shown as itself. */
static void test_escape__bidi_controls_and_separators_are_shown_as_code_points(void **state)
{
    (void)state;
    static const unsigned escaped[] = { 0x061c, 0x200e, 0x200f, 0x2028, 0x2029, 0x202a, 0x202b,
                                        0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069 };
    char out[64], want[64];
    rowlock_escape(out, sizeof out, "job-\xe2\x80\xaegpj.exe", 14); /* U+202E RIGHT-TO-LEFT OVERRIDE */
    assert_string_equal(out, "job-\\u202egpj.exe");
    rowlock_escape(out, sizeof out, "\xd8\x9c" "a\xe2\x81\xa6" "b\xe2\x80\x8f", 10);
    assert_string_equal(out, "\\u061ca\\u2066b\\u200f");
    rowlock_escape(out, 10, "ab\xe2\x80\xae\xe2\x80\xae", 8); /* never half an escape */
    assert_string_equal(out, "ab...");
    for (unsigned cp = 0x80; cp <= 0x10ffff; cp++) {
        unsigned char in[4];
        size_t n, k;
        int listed = cp <= 0x9f;
        if (cp >= 0xd800 && cp <= 0xdfff)
            continue;
        for (k = 0; k < sizeof escaped / sizeof escaped[0]; k++)
            listed |= cp == escaped[k];
        if (cp < 0x800) {
            in[0] = (unsigned char)(0xc0 | cp >> 6), in[1] = (unsigned char)(0x80 | (cp & 0x3f)), n = 2;
        } else if (cp < 0x10000) {
            in[0] = (unsigned char)(0xe0 | cp >> 12), in[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
            in[2] = (unsigned char)(0x80 | (cp & 0x3f)), n = 3;
        } else {
            in[0] = (unsigned char)(0xf0 | cp >> 18), in[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
            in[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f)), in[3] = (unsigned char)(0x80 | (cp & 0x3f));
            n = 4;
        }
        if (listed)
            snprintf(want, sizeof want, "\\u%04x", cp);
        else
            memcpy(want, in, n), want[n] = '\0';
        rowlock_escape(out, sizeof out, (const char *)in, n);
        if (strcmp(out, want) != 0)
            fail_msg("U+%04X shown as '%s', want '%s'", cp, out, want);
    }
}

/* ---- lock names ------------------------------------------------------------------------------- */

static void test_name_check__accepts_1_to_255_bytes_of_utf8(void **state)
{
    (void)state;
    char n255[256];
    const char *why = "untouched";
    memset(n255, 'x', 255);
    n255[255] = '\0';
    assert_int_equal(rowlock_name_check("a", NULL), 0);
    assert_int_equal(rowlock_name_check(n255, &why), 0);
    assert_int_equal(rowlock_name_check("it's \"quoted\" `x` \\ % _", NULL), 0);
    assert_int_equal(rowlock_name_check("\xe9\x94\x81\xf0\x9f\x94\x92", NULL), 0);
    /* 85 x 3-byte character = 255 bytes */
    {
        char m[256] = "";
        for (int i = 0; i < 85; i++)
            strcat(m, "\xe9\x94\x81");
        assert_int_equal(strlen(m), 255);
        assert_int_equal(rowlock_name_check(m, NULL), 0);
    }
}

static void test_name_check__refuses_bad_names_with_a_reason(void **state)
{
    (void)state;
    char n256[257];
    const char *bad[] = { "", n256, "\xff", "\xe4\xb8", "\xc0\xaf", "\xed\xa0\x80", "ok\xf4\x90\x80\x80",
                          "a\x80" };
    memset(n256, 'x', 256);
    n256[256] = '\0';
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *why = NULL;
        if (rowlock_name_check(bad[i], &why) != ROWLOCK_EINVALID)
            fail_msg("bad name #%zu accepted", i);
        assert_non_null(why);
        assert_true(why[0] != '\0');
        assert_int_equal(rowlock_name_check(bad[i], NULL), ROWLOCK_EINVALID);
    }
    {
        const char *why = NULL;
        assert_int_equal(rowlock_name_check(NULL, &why), ROWLOCK_EINVALID);
        assert_non_null(why);
    }
}

/* 85 x 3 bytes + one more byte of a 3-byte character: 258 bytes. */
static void test_name_check__counts_bytes_not_characters(void **state)
{
    (void)state;
    char m[300] = "";
    for (int i = 0; i < 86; i++)
        strcat(m, "\xe9\x94\x81");
    assert_int_equal(rowlock_name_check(m, NULL), ROWLOCK_EINVALID);
}

/* lock_new checks the name without a server, and says why. */
static void test_lock_new__refuses_bad_names_without_a_server(void **state)
{
    (void)state;
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    char n256[257];
    memset(n256, 'x', 256);
    n256[256] = '\0';
    assert_int_equal(rowlock_client_new(&c), 0);

    assert_int_equal(rowlock_lock_new(&l, c, "", NULL), ROWLOCK_EINVALID);
    assert_null(l);
    assert_non_null(strstr(rowlock_client_errmsg(c), "empty"));
    assert_int_equal(rowlock_lock_new(&l, c, n256, NULL), ROWLOCK_EINVALID);
    assert_null(l);
    assert_non_null(strstr(rowlock_client_errmsg(c), "256"));
    assert_int_equal(rowlock_lock_new(&l, c, "ab\xff", NULL), ROWLOCK_EINVALID);
    assert_null(l);
    assert_non_null(strstr(rowlock_client_errmsg(c), "UTF-8"));

    assert_int_equal(rowlock_lock_new(&l, c, "fine", NULL), 0);
    assert_non_null(l);
    assert_string_equal(rowlock_lock_name(l), "fine");
    assert_int_equal(rowlock_lock_strategy(l), ROWLOCK_STRATEGY_INSERT);
    assert_int_equal(rowlock_lock_held(l), 0);
    assert_int_equal(rowlock_lock_token(l), 0);
    /* Not connected: acquiring cannot succeed. */
    assert_int_not_equal(rowlock_acquire(l, 0, 1000), 0);
    assert_int_equal(rowlock_lock_held(l), 0);
    rowlock_lock_free(l);
    rowlock_client_free(c);
}

/* ---- strategies -------------------------------------------------------------------------------- */

static void test_strategy__parse_and_name_round_trip(void **state)
{
    (void)state;
    const struct { const char *name; rowlock_strategy s; } t[] = {
        { "insert", ROWLOCK_STRATEGY_INSERT },
        { "for-update", ROWLOCK_STRATEGY_FOR_UPDATE },
        { "optimistic", ROWLOCK_STRATEGY_OPTIMISTIC },
    };
    for (size_t i = 0; i < 3; i++) {
        rowlock_strategy s = (rowlock_strategy)0;
        assert_int_equal(rowlock_strategy_parse(&s, t[i].name), 0);
        assert_int_equal(s, t[i].s);
        assert_string_equal(rowlock_strategy_name(t[i].s), t[i].name);
    }
}

static void test_strategy__unknown_values_are_refused(void **state)
{
    (void)state;
    const char *bad[] = { "", "bogus", "insert ", " insert", "forupdate", "optimist", "inserts" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rowlock_strategy s = (rowlock_strategy)0;
        if (rowlock_strategy_parse(&s, bad[i]) != ROWLOCK_EINVALID)
            fail_msg("strategy \"%s\" was accepted", bad[i]);
    }
    assert_string_equal(rowlock_strategy_name((rowlock_strategy)0), "unknown");
    assert_string_equal(rowlock_strategy_name((rowlock_strategy)4), "unknown");
    assert_string_equal(rowlock_strategy_name((rowlock_strategy)-1), "unknown");
}

/* The strategy table is the one list: every entry is complete, ids and
 * names are unique, and ids fit the per-client state slots. */
static void test_strategy__table_entries_are_complete_and_unique(void **state)
{
    (void)state;
    size_t n = 0;
    for (const rowlock__strategy_ops *o; (o = rowlock__strategy_at(n)) != NULL; n++) {
        assert_int_equal(o->version, ROWLOCK__STRATEGY_OPS_VERSION);
        assert_true((unsigned)o->id > 0 && (unsigned)o->id < ROWLOCK__STRATEGY_SLOTS);
        assert_non_null(o->name);
        assert_non_null(o->acquire);
        assert_non_null(o->release);
        assert_non_null(o->renew);
        assert_ptr_equal(rowlock__strategy_find(o->id), o);
        assert_string_equal(rowlock_strategy_name(o->id), o->name);
        rowlock_strategy parsed = (rowlock_strategy)0;
        assert_int_equal(rowlock_strategy_parse(&parsed, o->name), 0);
        assert_int_equal(parsed, o->id);
        /* A lease strategy's per-lock state starts with the lease module's. */
        if (o->flags & ROWLOCK__S_LEASE_ROW)
            assert_true(o->lock_state_size >= sizeof(rowlock__lease_lock));
        for (size_t j = 0; j < n; j++) {
            assert_int_not_equal(rowlock__strategy_at(j)->id, o->id);
            assert_string_not_equal(rowlock__strategy_at(j)->name, o->name);
        }
    }
    assert_int_equal(n, 3);
}

static void test_server_check__accepts_mariadb_10_6_and_later_only(void **state)
{
    (void)state;
    assert_null(rowlock__server_check("10.11.19-MariaDB-0+deb12u1", 101119));
    assert_null(rowlock__server_check("10.6.0-MariaDB", 100600));
    assert_null(rowlock__server_check("11.4.2-MariaDB-log", 110402));
    assert_non_null(rowlock__server_check("10.5.24-MariaDB", 100524));
    assert_non_null(rowlock__server_check("8.0.36", 80036));
    assert_non_null(rowlock__server_check("8.4.0-0ubuntu0.24.04.1", 80400));
    assert_non_null(rowlock__server_check(NULL, 0));
    assert_non_null(strstr(rowlock__server_check("8.0.36", 80036), "not MariaDB"));
}

/* A handle that outlives its client is an orphan: calls on it say
 * EINVALID instead of touching freed memory (ASan checks the "instead"). */
static void test_lock__a_handle_that_outlives_its_client_is_refused(void **state)
{
    (void)state;
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL, *l2 = NULL;
    rowlock_info info = ROWLOCK_INFO_INIT;
    assert_int_equal(rowlock_client_new(&c), 0);
    assert_int_equal(rowlock_lock_new(&l, c, "orphan", NULL), 0);
    assert_int_equal(rowlock_lock_new(&l2, c, "freed-first", NULL), 0);
    rowlock_lock_free(l2);
    rowlock_client_free(c);
    assert_int_equal(rowlock_acquire(l, 0, 0), ROWLOCK_EINVALID);
    assert_int_equal(rowlock_release(l), ROWLOCK_EINVALID);
    assert_int_equal(rowlock_renew(l, 0), ROWLOCK_EINVALID);
    assert_int_equal(rowlock_inspect(l, &info), ROWLOCK_EINVALID);
    assert_int_equal(rowlock_lock_held(l), 0);
    assert_string_equal(rowlock_lock_name(l), "orphan");
    rowlock_lock_free(l);
}

/* ---- error table (no server needed) -------------------------------------------------------------- */

static void test_errors__every_code_has_a_name_and_a_sentence(void **state)
{
    (void)state;
    const struct { int code; const char *name; } t[] = {
        { ROWLOCK_OK, "ROWLOCK_OK" },           { ROWLOCK_EBUSY, "ROWLOCK_EBUSY" },
        { ROWLOCK_ENOTOWNER, "ROWLOCK_ENOTOWNER" }, { ROWLOCK_EINVALID, "ROWLOCK_EINVALID" },
        { ROWLOCK_EDB, "ROWLOCK_EDB" },         { ROWLOCK_ESCHEMA, "ROWLOCK_ESCHEMA" },
        { ROWLOCK_EUNSUPPORTED, "ROWLOCK_EUNSUPPORTED" }, { ROWLOCK_ENOMEM, "ROWLOCK_ENOMEM" },
        { ROWLOCK_EFENCED, "ROWLOCK_EFENCED" },
        { ROWLOCK_EUPGRADE, "ROWLOCK_EUPGRADE" },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        assert_string_equal(rowlock_error_name(t[i].code), t[i].name);
        assert_non_null(rowlock_strerror(t[i].code));
        assert_true(strlen(rowlock_strerror(t[i].code)) > 0);
        assert_string_not_equal(rowlock_strerror(t[i].code), "unknown error");
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(rowlock_strerror(t[i].code), rowlock_strerror(t[j].code));
    }
    assert_string_equal(rowlock_strerror(-10), "unknown error");
    assert_string_equal(rowlock_strerror(1), "unknown error");
    assert_string_equal(rowlock_strerror(INT_MIN), "unknown error");
    assert_string_equal(rowlock_error_name(-10), "ROWLOCK_EUNKNOWN");
    assert_string_equal(rowlock_error_name(42), "ROWLOCK_EUNKNOWN");
    assert_string_equal(rowlock_error_name(INT_MIN), "ROWLOCK_EUNKNOWN");
    assert_string_equal(rowlock_version(), ROWLOCK_VERSION_STRING);
    assert_true(rowlock_schema_version_expected() >= 1);
}

/* The holders' queue locks are named by CRC-32 of the owner in C and by
 * the server's CRC32() in SQL: the two must agree (check values of the
 * ISO-HDLC CRC-32, as zlib and the server compute it). */
static void test_crc32__matches_the_servers_crc32(void **state)
{
    (void)state;
    assert_int_equal(rowlock__crc32(0, "", 0), 0);
    assert_int_equal(rowlock__crc32(0, "123456789", 9), 0xcbf43926u);
    assert_int_equal(rowlock__crc32(0, "a", 1), 0xe8b7be43u);
    assert_int_equal(rowlock__crc32(0, "MySQL", 5), 3259397556u); /* the MariaDB manual's CRC32('MySQL') */
    /* fed in pieces: the same as CRC32(CONCAT(...)) */
    assert_int_equal(rowlock__crc32(rowlock__crc32(rowlock__crc32(0, "My", 2), "S", 1), "QL", 2), 3259397556u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32__matches_the_servers_crc32),
        cmocka_unit_test(test_quarter_slice__a_quarter_of_the_time_seen_within_its_bounds),
        cmocka_unit_test(test_backoff__stays_between_half_base_and_capped_envelope),
        cmocka_unit_test(test_backoff__never_exceeds_cap_even_for_huge_attempts),
        cmocka_unit_test(test_backoff__grows_with_attempts_until_the_cap),
        cmocka_unit_test(test_backoff__jitter_spreads_over_the_interval),
        cmocka_unit_test(test_backoff__is_deterministic_for_a_given_rnd),
        cmocka_unit_test(test_rand32__is_deterministic_per_seed_and_varies),
        cmocka_unit_test(test_utf8__accepts_valid_sequences),
        cmocka_unit_test(test_utf8__refuses_invalid_sequences),
        cmocka_unit_test(test_db_classify__maps_server_errors),
        cmocka_unit_test(test_conn_lost__follows_db_classify),
        cmocka_unit_test(test_transient__follows_the_error_table),
        cmocka_unit_test(test_host_list__entries_ports_and_ipv6),
        cmocka_unit_test(test_table_name_check__accepts_identifier_characters_up_to_57_bytes),
        cmocka_unit_test(test_table_name_check__refuses_everything_else),
        cmocka_unit_test(test_table_name_check__refuses_rowlocks_own_objects),
        cmocka_unit_test(test_table_name_check__the_message_lists_exactly_what_is_refused),
        cmocka_unit_test(test_escape__controls_c1_and_bad_utf8_never_reach_the_output),
        cmocka_unit_test(test_escape__bidi_controls_and_separators_are_shown_as_code_points),
        cmocka_unit_test(test_name_check__accepts_1_to_255_bytes_of_utf8),
        cmocka_unit_test(test_name_check__refuses_bad_names_with_a_reason),
        cmocka_unit_test(test_name_check__counts_bytes_not_characters),
        cmocka_unit_test(test_lock_new__refuses_bad_names_without_a_server),
        cmocka_unit_test(test_strategy__parse_and_name_round_trip),
        cmocka_unit_test(test_strategy__unknown_values_are_refused),
        cmocka_unit_test(test_strategy__table_entries_are_complete_and_unique),
        cmocka_unit_test(test_server_check__accepts_mariadb_10_6_and_later_only),
        cmocka_unit_test(test_lock__a_handle_that_outlives_its_client_is_refused),
        cmocka_unit_test(test_errors__every_code_has_a_name_and_a_sentence),
    };
    return cmocka_run_group_tests_name("unit", tests, NULL, NULL);
}
