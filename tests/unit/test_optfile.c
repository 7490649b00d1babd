/*
 * Unit test of rowlock__optfile_get (src/optfile.c), no server needed: option
 * files are written into a mkdtemp directory, removed at the end.
 */
#if !defined(_GNU_SOURCE) && !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 700
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rowlock_int.h"

/* A group no real option file on this machine has. */
#define G "rowlock_test_group"

static char tmpdir[256];

/* Path of `rel` inside the temp dir; a few rotating buffers. */
static const char *P(const char *rel)
{
    static char bufs[8][512];
    static unsigned next;
    char *b = bufs[next++ % 8];
    int n = snprintf(b, sizeof(bufs[0]), "%s/%s", tmpdir, rel);
    assert_true(n > 0 && (size_t)n < sizeof(bufs[0]));
    return b;
}

static void put(const char *rel, const char *content)
{
    FILE *f = fopen(P(rel), "w");
    assert_non_null(f);
    assert_int_equal(fputs(content, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static void mkdir_rel(const char *rel)
{
    assert_int_equal(mkdir(P(rel), 0700), 0);
}

/* Look `key` up in group G of the file `rel`; returns the result code. */
static int get(const char *rel, const char *key, char *out, size_t cap)
{
    return rowlock__optfile_get(P(rel), 0, G, key, out, cap);
}

static void assert_value(const char *rel, const char *key, const char *want)
{
    char out[512];
    int rc = get(rel, key, out, sizeof(out));
    if (rc != 1)
        fail_msg("%s: key %s: rc %d (errno %d), want \"%s\"", rel, key, rc, errno, want);
    assert_string_equal(out, want);
}

static void assert_absent(const char *rel, const char *key)
{
    char out[16] = "untouched";
    int rc = get(rel, key, out, sizeof(out));
    if (rc != 0 || strcmp(out, "untouched") != 0)
        fail_msg("%s: key %s: rc %d, out \"%s\", want absent", rel, key, rc, out);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    chmod(path, 0700);
    return remove(path);
}

static int setup_dir(void **state)
{
    const char *base = getenv("TMPDIR");
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "%s/rowlock_optfile_XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    return nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- syntax -------------------------------------------------------------- */












/*
 * Parsing, table-driven: each case is one option file (written as
 * <name>.cnf) and the lookups in group G it must answer: a value, or NULL
 * for "absent" (then `out` stays untouched).
 */
typedef struct opt_lookup {
    const char *key;
    const char *want; /* NULL: absent */
} opt_lookup;

typedef struct opt_case {
    const char *file;
    const char *content;
    opt_lookup lookups[9];
} opt_case;

static const opt_case parse_cases[] = {
    /* reads key only in requested group */
    { "groups.cnf",
      "[client]\n"
      "table=from_client\n"
      "[" G "]\n"
      "table=mine\n"
      "other=x\n"
      "[" G "_more]\n"
      "only_elsewhere=y\n",
      { { "table", "mine" },
        { "other", "x" },
        { "only_elsewhere", NULL },
        { "missing", NULL } } },
    /* group names are case sensitive and may have spaces */
    { "case.cnf",
      "[ROWLOCK_TEST_GROUP]\n"
      "upper=1\n"
      "  [  " G "  ]   # a comment after the header\n"
      "spaced=2\n",
      { { "upper", NULL },
        { "spaced", "2" } } },
    /* options before any group are ignored */
    { "nogroup.cnf",
      "table=orphan\n"
      "[" G "]\n"
      "other=1\n",
      { { "table", NULL },
        { "other", "1" } } },
    /* last occurrence wins within and across groups */
    { "last.cnf",
      "[" G "]\n"
      "table=first\n"
      "table=second\n"
      "[client]\n"
      "table=not_mine\n"
      "[" G "]\n"
      "table=third\n"
      "[mysqld]\n"
      "table=not_mine_either\n",
      { { "table", "third" } } },
    /* dash and underscore are equivalent in keys */
    { "dash.cnf",
      "[" G "]\n"
      "lock-table=a\n"
      "other_key=b\n"
      "mixed-key_name=c\n"
      "override_me=1\n"
      "override-me=2\n",
      { { "lock_table", "a" },
        { "lock-table", "a" },
        { "other-key", "b" },
        { "mixed_key-name", "c" },
        { "override_me", "2" },
        { "LOCK_TABLE", NULL },
        { "lock", NULL },
        { "lock_table_x", NULL } } },
    /* spaces around equals and value are trimmed */
    { "spaces.cnf",
      "[" G "]\n"
      "  a = 1  \n"
      "\tb\t=\tvalue with inner spaces\t\n"
      "c=\n"
      "d =   \n",
      { { "a", "1" },
        { "b", "value with inner spaces" },
        { "c", "" },
        { "d", "" } } },
    /* quotes are stripped only when matching */
    { "quotes.cnf",
      "[" G "]\n"
      "dq=\"double quoted\"\n"
      "sq='single quoted'\n"
      "keep_inner=\"  spaces kept  \"\n"
      "empty_dq=\"\"\n"
      "mismatch=\"abc'\n"
      "lone=\"\n"
      "partial=\"abc\" def\n"
      "inner=ab\"cd\"\n",
      { { "dq", "double quoted" },
        { "sq", "single quoted" },
        { "keep_inner", "  spaces kept  " },
        { "empty_dq", "" },
        { "mismatch", "\"abc'" },
        { "lone", "\"" },
        { "partial", "\"abc\" def" },
        { "inner", "ab\"cd\"" } } },
    /* escapes are decoded in and out of quotes */
    { "esc.cnf",
      "[" G "]\n"
      "dq=\"a\\nb\\tc\\\\d\\\"e\\'f\\sg\"\n"
      "sq='x\\ty'\n"
      "bare=a\\nb\\tc\\\\d\\se\n"
      "bare_quotes=\\\"q\\'\n"
      "cr_bs=\\r\\b\n"
      "unknown=a\\qb\n"
      "trailing=ab\\\n"
      "space_at_end=abc\\s\n",
      { { "dq", "a\nb\tc\\d\"e'f g" },
        { "sq", "x\ty" },
        { "bare", "a\nb\tc\\d e" },
        { "bare_quotes", "\"q'" },
        { "cr_bs", "\r\b" },
        { "unknown", "a\\qb" },
        { "trailing", "ab\\" },
        { "space_at_end", "abc " } } },
    /* comments are ignored */
    { "comments.cnf",
      "# a comment line\n"
      "; another comment line\n"
      "[" G "]\n"
      "# table=commented_out\n"
      "   ; table=commented_out_too\n"
      "table=value # end comment\n"
      "hashed=\"a # b\" # but this is a comment\n"
      "single='c # d'\n"
      "escaped_quote=\"e\\\" # f\"\n"
      "glued=g#h\n"
      "semicolon=i ; not a comment\n"
      "flag # a comment, not a value\n"
      "# last=1\n",
      { { "table", "value" },
        { "hashed", "a # b" },
        { "single", "c # d" },
        { "escaped_quote", "e\" # f" },
        { "glued", "g" },
        { "semicolon", "i ; not a comment" },
        { "flag", "" },
        { "last", NULL } } },
    /* flag without equals has empty value */
    { "flags.cnf",
      "[" G "]\n"
      "table=set_before\n"
      "table\n"
      "skip-something\n"
      "  spaced_flag   \n",
      { { "table", "" },
        { "skip_something", "" },
        { "spaced-flag", "" } } },
    /* crlf line ends are tolerated */
    { "crlf.cnf",
      "[" G "]\r\n"
      "table=crlf\r\n"
      "quoted=\"q v\"\r\n"
      "flag\r\n"
      "last=no_newline_at_end",
      { { "table", "crlf" },
        { "quoted", "q v" },
        { "flag", "" },
        { "last", "no_newline_at_end" } } },
};

static void test_optfile__parsing_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
        const opt_case *t = &parse_cases[i];
        put(t->file, t->content);
        for (const opt_lookup *k = t->lookups; k->key; k++) {
            if (k->want)
                assert_value(t->file, k->key, k->want);
            else
                assert_absent(t->file, k->key);
        }
    }
}

static void test_optfile__line_longer_than_4096_bytes_is_skipped(void **state)
{
    /* "k=" plus the value: a line of exactly 4096 bytes is read, 4097 is not;
     * the lines after a skipped one are read normally. */
    size_t cap = 20000;
    char *buf = malloc(cap), *out = malloc(8192);
    char *p = buf;
    assert_non_null(buf);
    assert_non_null(out);
    (void)state;
    p += sprintf(p, "[" G "]\n");
    p += sprintf(p, "fits=");
    memset(p, 'a', 4096 - 5);
    p += 4096 - 5;
    p += sprintf(p, "\r\n"); /* the CR does not count */
    p += sprintf(p, "long=first\nlong=");
    memset(p, 'b', 4097 - 5);
    p += 4097 - 5;
    p += sprintf(p, "\nvery_long=");
    memset(p, 'c', 6000);
    p += 6000;
    p += sprintf(p, "\nafter=ok\n");
    *p = '\0';
    assert_true((size_t)(p - buf) < cap);
    put("long.cnf", buf);

    assert_int_equal(get("long.cnf", "fits", out, 8192), 1);
    assert_int_equal(strlen(out), 4096 - 5);
    assert_value("long.cnf", "long", "first");
    assert_absent("long.cnf", "very_long");
    assert_value("long.cnf", "after", "ok");
    free(buf);
    free(out);
}

/* ---- includes -------------------------------------------------------------- */

static void test_optfile__include_is_read_in_place_and_group_resumes(void **state)
{
    char line[600];
    (void)state;
    put("inc_child.cnf", "[" G "]\n"
                         "table=from_child\n"
                         "child_only=c\n"
                         "[client]\n"
                         "ignored=1\n");
    snprintf(line, sizeof(line),
             "[" G "]\n"
             "table=before_include\n"
             "after=before\n"
             "!include %s\n"
             "after=after_include\n", P("inc_child.cnf"));
    put("inc_parent.cnf", line);
    /* the child's later occurrence overrides the parent's earlier one */
    assert_value("inc_parent.cnf", "table", "from_child");
    assert_value("inc_parent.cnf", "child_only", "c");
    /* after the include the parent is still in its own group */
    assert_value("inc_parent.cnf", "after", "after_include");
    assert_absent("inc_parent.cnf", "ignored");
}

static void test_optfile__included_file_starts_outside_any_group(void **state)
{
    char line[600];
    (void)state;
    put("inc_nogroup.cnf", "table=no_group_in_child\n");
    snprintf(line, sizeof(line), "[" G "]\n!include %s\n", P("inc_nogroup.cnf"));
    put("inc_nogroup_parent.cnf", line);
    assert_absent("inc_nogroup_parent.cnf", "table");
}

static void test_optfile__last_occurrence_wins_across_files(void **state)
{
    char line[600];
    (void)state;
    put("across_b.cnf", "[" G "]\ntable=from_b\n");
    snprintf(line, sizeof(line),
             "[" G "]\n"
             "!include %s\n"
             "table=from_a_after_include\n", P("across_b.cnf"));
    put("across_a.cnf", line);
    assert_value("across_a.cnf", "table", "from_a_after_include");
}

static void test_optfile__missing_include_and_includedir_are_ignored(void **state)
{
    char line[800];
    (void)state;
    snprintf(line, sizeof(line),
             "[" G "]\n"
             "table=before\n"
             "!include %s\n"
             "!includedir %s\n"
             "!include\n"
             "!unknown directive\n"
             "other=after\n", P("no_such_file.cnf"), P("no_such_dir"));
    put("missing_inc.cnf", line);
    assert_value("missing_inc.cnf", "table", "before");
    assert_value("missing_inc.cnf", "other", "after");
}

static void test_optfile__includedir_reads_only_cnf_files_in_sorted_order(void **state)
{
    char line[600];
    (void)state;
    mkdir_rel("incdir");
    mkdir_rel("incdir/sub.cnf"); /* a directory named *.cnf is skipped */
    put("incdir/b.cnf", "[" G "]\ntable=b\nonly_b=1\n");
    put("incdir/a.cnf", "[" G "]\ntable=a\nonly_a=1\n");
    put("incdir/c.cnf", "[" G "]\ntable=c\n");
    put("incdir/d.cnf.bak", "[" G "]\ntable=bak\n");
    put("incdir/e.txt", "[" G "]\ntable=txt\n");
    put("incdir/zcnf", "[" G "]\ntable=zcnf\n");
    snprintf(line, sizeof(line), "[" G "]\ntable=parent\n!includedir %s\n", P("incdir"));
    put("incdir_parent.cnf", line);
    assert_value("incdir_parent.cnf", "table", "c"); /* a, b, c: c is last */
    assert_value("incdir_parent.cnf", "only_a", "1");
    assert_value("incdir_parent.cnf", "only_b", "1");

    /* Sorted by name, not by creation order: rewrite so the first name wins
     * nothing and the last one does. */
    put("incdir/c.cnf", "[" G "]\n");
    assert_value("incdir_parent.cnf", "table", "b");
}

static void test_optfile__include_loop_stops(void **state)
{
    char line[600];
    (void)state;
    /* A file including itself, and two files including each other. */
    snprintf(line, sizeof(line), "[" G "]\ntable=self\n!include %s\nafter=1\n", P("loop_self.cnf"));
    put("loop_self.cnf", line);
    assert_value("loop_self.cnf", "table", "self");
    assert_value("loop_self.cnf", "after", "1");

    snprintf(line, sizeof(line), "[" G "]\ntable=x\n!include %s\n", P("loop_y.cnf"));
    put("loop_x.cnf", line);
    snprintf(line, sizeof(line), "[" G "]\ntable=y\n!include %s\n", P("loop_x.cnf"));
    put("loop_y.cnf", line);
    /* 11 levels are read (depth 0 to 10, as mysys): x y x y ... x. */
    assert_value("loop_x.cnf", "table", "x");
    assert_value("loop_y.cnf", "table", "y");
}

static void test_optfile__include_depth_is_limited_to_10(void **state)
{
    char name[32], line[600];
    int i;
    (void)state;
    /* chain0 includes chain1 ... includes chain12; each sets depth=i. */
    for (i = 0; i <= 12; i++) {
        snprintf(name, sizeof(name), "chain%d.cnf", i + 1);
        snprintf(line, sizeof(line), "[" G "]\ndepth=%d\n!include %s\n", i, P(name));
        snprintf(name, sizeof(name), "chain%d.cnf", i);
        put(name, line);
    }
    assert_value("chain0.cnf", "depth", "10");
}

static void test_optfile__includedir_including_itself_terminates(void **state)
{
    char line[600];
    int i;
    (void)state;
    mkdir_rel("selfdir");
    /* Each of 5 files includes the whole directory: without a guard beyond
     * the depth limit, 5^10 files would be read. */
    for (i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof(name), "selfdir/%d.cnf", i);
        snprintf(line, sizeof(line), "[" G "]\ntable=t%d\n!includedir %s\n", i, P("selfdir"));
        put(name, line);
    }
    {
        char out[64];
        assert_int_equal(rowlock__optfile_get(P("selfdir/0.cnf"), 0, G, "table", out, sizeof(out)), 1);
    }
}

/* ---- errors ---------------------------------------------------------------- */

static void test_optfile__missing_explicit_file_is_enoent(void **state)
{
    char out[16];
    (void)state;
    errno = 0;
    assert_int_equal(rowlock__optfile_get(P("does_not_exist.cnf"), 1, G, "table", out, sizeof(out)), -1);
    assert_int_equal(errno, ENOENT);
}

static void test_optfile__unreadable_explicit_file_is_eacces(void **state)
{
    char out[16];
    (void)state;
    if (geteuid() == 0)
        skip(); /* root reads anything */
    put("unreadable.cnf", "[" G "]\ntable=secret\n");
    assert_int_equal(chmod(P("unreadable.cnf"), 0), 0);
    errno = 0;
    assert_int_equal(rowlock__optfile_get(P("unreadable.cnf"), 0, G, "table", out, sizeof(out)), -1);
    assert_int_equal(errno, EACCES);
}

static void test_optfile__directory_as_explicit_file_is_eisdir(void **state)
{
    char out[16];
    (void)state;
    mkdir_rel("a_dir");
    errno = 0;
    assert_int_equal(rowlock__optfile_get(P("a_dir"), 0, G, "table", out, sizeof(out)), -1);
    assert_int_equal(errno, EISDIR);
}

static void test_optfile__value_too_long_for_out_is_enametoolong(void **state)
{
    char out[8];
    (void)state;
    put("toolong.cnf", "[" G "]\n"
                       "seven=1234567\n"
                       "eight=12345678\n"
                       "shrinks=12345678901234567890\n"
                       "shrinks=short\n");
    memset(out, 'x', sizeof(out));
    assert_int_equal(get("toolong.cnf", "seven", out, sizeof(out)), 1); /* exact fit */
    assert_string_equal(out, "1234567");
    errno = 0;
    assert_int_equal(get("toolong.cnf", "eight", out, sizeof(out)), -1);
    assert_int_equal(errno, ENAMETOOLONG);
    /* only the final value has to fit */
    assert_int_equal(get("toolong.cnf", "shrinks", out, sizeof(out)), 1);
    assert_string_equal(out, "short");
    errno = 0;
    assert_int_equal(get("toolong.cnf", "seven", out, 0), -1);
    assert_int_equal(errno, ENAMETOOLONG);
}

static void test_optfile__not_found_returns_0_and_leaves_out_untouched(void **state)
{
    (void)state;
    put("empty.cnf", "");
    assert_absent("empty.cnf", "table");
}

/* ---- standard files --------------------------------------------------------- */

typedef struct saved_env {
    char *home, *mysql_home, *mariadb_home;
} saved_env;

static char *dup_env(const char *name)
{
    const char *v = getenv(name);
    char *c;
    if (!v)
        return NULL;
    c = malloc(strlen(v) + 1);
    assert_non_null(c);
    strcpy(c, v);
    return c;
}

static void restore_env(const char *name, char *v)
{
    if (v) {
        setenv(name, v, 1);
        free(v);
    } else {
        unsetenv(name);
    }
}

static int save_env(void **state)
{
    saved_env *s = calloc(1, sizeof(*s));
    if (!s)
        return -1;
    s->home = dup_env("HOME");
    s->mysql_home = dup_env("MYSQL_HOME");
    s->mariadb_home = dup_env("MARIADB_HOME");
    *state = s;
    return 0;
}

static int restore_saved_env(void **state)
{
    saved_env *s = *state;
    restore_env("HOME", s->home);
    restore_env("MYSQL_HOME", s->mysql_home);
    restore_env("MARIADB_HOME", s->mariadb_home);
    free(s);
    return 0;
}

static void test_optfile__standard_files_read_home_my_cnf(void **state)
{
    char out[64];
    (void)state;
    mkdir_rel("home");
    put("home/.my.cnf", "[" G "]\ntable=from_home\n");
    assert_int_equal(setenv("HOME", P("home"), 1), 0);
    unsetenv("MYSQL_HOME");
    unsetenv("MARIADB_HOME");
    assert_int_equal(rowlock__optfile_get(NULL, 1, G, "table", out, sizeof(out)), 1);
    assert_string_equal(out, "from_home");
    assert_int_equal(rowlock__optfile_get(NULL, 1, G, "absent_key", out, sizeof(out)), 0);
}

static void test_optfile__no_files_read_when_read_default_files_is_0(void **state)
{
    char out[64] = "untouched";
    (void)state;
    mkdir_rel("home0");
    put("home0/.my.cnf", "[" G "]\ntable=from_home\n");
    assert_int_equal(setenv("HOME", P("home0"), 1), 0);
    unsetenv("MYSQL_HOME");
    unsetenv("MARIADB_HOME");
    assert_int_equal(rowlock__optfile_get(NULL, 0, G, "table", out, sizeof(out)), 0);
    assert_string_equal(out, "untouched");
}

static void test_optfile__explicit_file_replaces_standard_files(void **state)
{
    char out[64];
    (void)state;
    mkdir_rel("home1");
    put("home1/.my.cnf", "[" G "]\ntable=from_home\nhome_only=1\n");
    put("explicit.cnf", "[" G "]\ntable=from_explicit\n");
    assert_int_equal(setenv("HOME", P("home1"), 1), 0);
    assert_int_equal(rowlock__optfile_get(P("explicit.cnf"), 1, G, "table", out, sizeof(out)), 1);
    assert_string_equal(out, "from_explicit");
    assert_int_equal(rowlock__optfile_get(P("explicit.cnf"), 1, G, "home_only", out, sizeof(out)), 0);
}

static void test_optfile__home_my_cnf_is_read_after_mysql_home(void **state)
{
    char out[64];
    (void)state;
    mkdir_rel("home2");
    mkdir_rel("mysql_home");
    put("home2/.my.cnf", "[" G "]\ntable=from_home\n");
    put("mysql_home/my.cnf", "[" G "]\ntable=from_mysql_home\nmh_only=yes\n");
    assert_int_equal(setenv("HOME", P("home2"), 1), 0);
    assert_int_equal(setenv("MYSQL_HOME", P("mysql_home"), 1), 0);
    unsetenv("MARIADB_HOME");
    assert_int_equal(rowlock__optfile_get(NULL, 1, G, "table", out, sizeof(out)), 1);
    assert_string_equal(out, "from_home"); /* last occurrence wins across files */
    assert_int_equal(rowlock__optfile_get(NULL, 1, G, "mh_only", out, sizeof(out)), 1);
    assert_string_equal(out, "yes");
}

static void test_optfile__mariadb_home_replaces_mysql_home(void **state)
{
    char out[64];
    (void)state;
    mkdir_rel("home3");
    mkdir_rel("mysql_home3");
    mkdir_rel("mariadb_home3");
    put("mysql_home3/my.cnf", "[" G "]\nmh=mysql\n");
    put("mariadb_home3/my.cnf", "[" G "]\nmdh=mariadb\n");
    assert_int_equal(setenv("HOME", P("home3"), 1), 0); /* no .my.cnf there */
    assert_int_equal(setenv("MYSQL_HOME", P("mysql_home3"), 1), 0);
    assert_int_equal(setenv("MARIADB_HOME", P("mariadb_home3"), 1), 0);
    assert_int_equal(rowlock__optfile_get(NULL, 1, G, "mdh", out, sizeof(out)), 1);
    assert_string_equal(out, "mariadb");
    assert_int_equal(rowlock__optfile_get(NULL, 1, G, "mh", out, sizeof(out)), 0);
}

/* ---- hostile files (issue 13) ----------------------------------------------- */

/* Each call must return within the alarm: these used to spin or block for ever. */
static void test_optfile__devices_are_refused_not_read(void **state)
{
    char out[16];
    (void)state;
    alarm(20);
    errno = 0;
    assert_int_equal(rowlock__optfile_get("/dev/zero", 0, G, "table", out, sizeof(out)), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(rowlock__optfile_get("/dev/urandom", 0, G, "table", out, sizeof(out)), -1);
    put("inc_zero.cnf", "[" G "]\ntable=before\n!include /dev/zero\ntable=after\n");
    assert_int_equal(get("inc_zero.cnf", "table", out, sizeof(out)), -1);
    alarm(0);
}

static void test_optfile__a_fifo_without_writer_does_not_block(void **state)
{
    char out[16];
    (void)state;
    assert_int_equal(mkfifo(P("fifo.cnf"), 0600), 0);
    alarm(20);
    assert_int_equal(get("fifo.cnf", "table", out, sizeof(out)), 0); /* empty: nothing found */
    put("inc_fifo.cnf", "[" G "]\n!include " );
    {
        FILE *f = fopen(P("inc_fifo.cnf"), "a");
        assert_non_null(f);
        fprintf(f, "%s\ntable=x\n", P("fifo.cnf"));
        fclose(f);
    }
    assert_value("inc_fifo.cnf", "table", "x");
    alarm(0);
}

static void test_optfile__a_pipe_is_read_once(void **state)
{
    char out[32], path[64];
    int p[2];
    const char text[] = "[" G "]\ntable=from_pipe\n";
    (void)state;
    assert_int_equal(pipe(p), 0);
    assert_int_equal(write(p[1], text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(p[1]);
    snprintf(path, sizeof path, "/dev/fd/%d", p[0]);
    assert_int_equal(rowlock__optfile_get(path, 0, G, "table", out, sizeof(out)), 1);
    assert_string_equal(out, "from_pipe");
    close(p[0]);
}

static void test_optfile__files_over_1_mib_are_refused(void **state)
{
    char out[16];
    FILE *f;
    (void)state;
    f = fopen(P("big.cnf"), "w");
    assert_non_null(f);
    fprintf(f, "[" G "]\ntable=t\n");
    for (int i = 0; i < 40000; i++)
        fprintf(f, "# a comment line that makes this file large, line %06d\n", i);
    fclose(f);
    errno = 0;
    assert_int_equal(get("big.cnf", "table", out, sizeof(out)), -1);
    assert_int_equal(errno, EFBIG);
}

/* ---- files others can write (issue 25 item 1) -------------------------------- */

static void put_mode(const char *rel, const char *content, mode_t mode)
{
    put(rel, content);
    assert_int_equal(chmod(P(rel), mode), 0);
}

static void test_optfile__world_writable_explicit_file_is_refused(void **state)
{
    char out[32] = "untouched";
    (void)state;
    put_mode("ww.cnf", "[" G "]\ntable=evil\n", 0666);
    errno = 0;
    assert_int_equal(get("ww.cnf", "table", out, sizeof(out)), -1);
    assert_int_equal(errno, EPERM);
    assert_string_equal(out, "untouched");
    /* and the message names the file and the mode */
    {
        rowlock__opts o;
        const char *groups[] = { G, NULL };
        assert_int_equal(rowlock__opts_load(&o, P("ww.cnf"), 0, groups), -1);
        assert_non_null(strstr(o.err, "ww.cnf"));
        assert_non_null(strstr(o.err, "writable by other users (mode 0666"));
    }
    /* o+w alone (0602) is enough */
    put_mode("ww2.cnf", "[" G "]\ntable=evil\n", 0602);
    assert_int_equal(get("ww2.cnf", "table", out, sizeof(out)), -1);
}

static void test_optfile__world_writable_include_of_an_explicit_file_is_refused(void **state)
{
    char out[32], text[600];
    (void)state;
    put_mode("inc_ww.cnf", "[" G "]\nplugin_dir=/tmp/evil\n", 0666);
    snprintf(text, sizeof text, "[" G "]\ntable=ok\n!include %s\n", P("inc_ww.cnf"));
    put("inc_outer.cnf", text);
    assert_int_equal(get("inc_outer.cnf", "table", out, sizeof(out)), -1);
    /* through !includedir too */
    mkdir_rel("incdir_ww");
    put_mode("incdir_ww/a.cnf", "[" G "]\ntable=evil\n", 0646);
    snprintf(text, sizeof text, "[" G "]\ntable=ok\n!includedir %s\n", P("incdir_ww"));
    put("incdir_outer.cnf", text);
    assert_int_equal(get("incdir_outer.cnf", "table", out, sizeof(out)), -1);
}

static void test_optfile__group_writable_file_of_another_user_is_refused(void **state)
{
    char out[32];
    (void)state;
    /* ours (or root's) and group-writable: accepted (a umask 002 file) */
    put_mode("gw_ours.cnf", "[" G "]\ntable=mine\n", 0664);
    assert_value("gw_ours.cnf", "table", "mine");
    if (geteuid() != 0)
        skip(); /* only root can give a file away */
    put_mode("gw_theirs.cnf", "[" G "]\ntable=theirs\n", 0664);
    assert_int_equal(chown(P("gw_theirs.cnf"), 65534, 65534), 0);
    assert_int_equal(get("gw_theirs.cnf", "table", out, sizeof(out)), -1);
    /* without g+w another user's file is read, as mysys does */
    assert_int_equal(chmod(P("gw_theirs.cnf"), 0644), 0);
    assert_value("gw_theirs.cnf", "table", "theirs");
}

static void test_optfile__world_writable_home_my_cnf_is_skipped_not_fatal(void **state)
{
    char out[64];
    (void)state;
    mkdir_rel("home_ww");
    mkdir_rel("mysql_home_ww");
    put("mysql_home_ww/my.cnf", "[" G "]\ntable=from_mysql_home\n");
    put_mode("home_ww/.my.cnf", "[" G "]\ntable=evil\nevil_only=1\n", 0666);
    assert_int_equal(setenv("HOME", P("home_ww"), 1), 0);
    assert_int_equal(setenv("MYSQL_HOME", P("mysql_home_ww"), 1), 0);
    unsetenv("MARIADB_HOME");
    assert_int_equal(rowlock__optfile_get(NULL, 1, G, "table", out, sizeof(out)), 1);
    assert_string_equal(out, "from_mysql_home");
    assert_int_equal(rowlock__optfile_get(NULL, 1, G, "evil_only", out, sizeof(out)), 0);
}

static void test_optfile__render_quotes_values_and_drops_superseded_keys(void **state)
{
    static const char *const groups[] = { "client", G, NULL };
    rowlock__opts o;
    char err[200];
    size_t len = 0;
    char *text;
    (void)state;
    put("render.cnf", "[client]\nhost = h # c\npassword=\"p\\\"w\\\\\"\nssl_ca=/ca.pem\nflag\n"
                      "[" G "]\ntable=t\nweird key=1\n");
    assert_int_equal(rowlock__opts_load(&o, P("render.cnf"), 0, groups), 0);
    text = rowlock__opts_render(&o, NULL, NULL, &len, err, sizeof err);
    assert_non_null(text);
    assert_string_equal(text, "[client]\nhost=\"h\"\npassword=\"p\\\"w\\\\\"\nssl-ca=\"/ca.pem\"\nflag\ntable=\"t\"\n");
    free(text);
    assert_string_equal(rowlock__opts_find(&o, 1, "table")->val, "t");
    assert_null(rowlock__opts_find(&o, 0, "table"));
    rowlock__opts_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optfile__parsing_cases),
        cmocka_unit_test(test_optfile__line_longer_than_4096_bytes_is_skipped),
        cmocka_unit_test(test_optfile__include_is_read_in_place_and_group_resumes),
        cmocka_unit_test(test_optfile__included_file_starts_outside_any_group),
        cmocka_unit_test(test_optfile__last_occurrence_wins_across_files),
        cmocka_unit_test(test_optfile__missing_include_and_includedir_are_ignored),
        cmocka_unit_test(test_optfile__includedir_reads_only_cnf_files_in_sorted_order),
        cmocka_unit_test(test_optfile__include_loop_stops),
        cmocka_unit_test(test_optfile__include_depth_is_limited_to_10),
        cmocka_unit_test(test_optfile__includedir_including_itself_terminates),
        cmocka_unit_test(test_optfile__missing_explicit_file_is_enoent),
        cmocka_unit_test(test_optfile__unreadable_explicit_file_is_eacces),
        cmocka_unit_test(test_optfile__directory_as_explicit_file_is_eisdir),
        cmocka_unit_test(test_optfile__value_too_long_for_out_is_enametoolong),
        cmocka_unit_test(test_optfile__not_found_returns_0_and_leaves_out_untouched),
        cmocka_unit_test_setup_teardown(test_optfile__standard_files_read_home_my_cnf, save_env,
                                        restore_saved_env),
        cmocka_unit_test_setup_teardown(test_optfile__no_files_read_when_read_default_files_is_0,
                                        save_env, restore_saved_env),
        cmocka_unit_test_setup_teardown(test_optfile__explicit_file_replaces_standard_files, save_env,
                                        restore_saved_env),
        cmocka_unit_test_setup_teardown(test_optfile__home_my_cnf_is_read_after_mysql_home, save_env,
                                        restore_saved_env),
        cmocka_unit_test_setup_teardown(test_optfile__mariadb_home_replaces_mysql_home, save_env,
                                        restore_saved_env),
        cmocka_unit_test(test_optfile__devices_are_refused_not_read),
        cmocka_unit_test(test_optfile__a_fifo_without_writer_does_not_block),
        cmocka_unit_test(test_optfile__a_pipe_is_read_once),
        cmocka_unit_test(test_optfile__files_over_1_mib_are_refused),
        cmocka_unit_test(test_optfile__render_quotes_values_and_drops_superseded_keys),
        cmocka_unit_test(test_optfile__world_writable_explicit_file_is_refused),
        cmocka_unit_test(test_optfile__world_writable_include_of_an_explicit_file_is_refused),
        cmocka_unit_test(test_optfile__group_writable_file_of_another_user_is_refused),
        cmocka_unit_test_setup_teardown(test_optfile__world_writable_home_my_cnf_is_skipped_not_fatal, save_env,
                                        restore_saved_env),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
