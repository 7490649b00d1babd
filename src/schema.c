/*
 * Schema versions and migrations. The migrations are the files of sql/,
 * embedded at build time (cmake/embed_sql.cmake); this file applies the
 * pending ones in order and records the version in rowlock_schema.
 */
#include "rowlock_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_VERSION[] = "/* rowlock:schema-version */ SELECT version FROM rowlock_schema WHERE lock_table = ?";
/* The same read made causal on a Galera node: it waits until the node has
 * applied every write set committed in the cluster before it started. A
 * migration through another node a moment ago may not have reached this one
 * yet; without this, a client connecting here right after it would be told
 * to run `rowlock migrate` again. Only on the failing path (an older
 * version found): one more round trip there, none on the usual one. Servers
 * without SET STATEMENT or wsrep_sync_wait refuse it, and the first answer
 * stands. */
static const char SQL_VERSION_CAUSAL[] = "/* rowlock:schema-version-causal */ SET STATEMENT wsrep_sync_wait = 1 FOR "
                                         "SELECT version FROM rowlock_schema WHERE lock_table = ?";
static const char SQL_SET_VERSION[] =
    "/* rowlock:schema-set-version */ INSERT INTO rowlock_schema (lock_table, version, applied_at) VALUES (?, ?, UTC_TIMESTAMP(6)) "
    "ON DUPLICATE KEY UPDATE version = VALUES(version), applied_at = VALUES(applied_at)";
/* Serialises concurrent migrators of one table; released on commit of the
 * last step or when the connection ends. */
static const char SQL_MIGRATE_LOCK[] = "/* rowlock:migrate-lock */ SELECT GET_LOCK(?, 60)";
static const char SQL_MIGRATE_UNLOCK[] = "/* rowlock:migrate-unlock */ SELECT RELEASE_LOCK(?)";
/* 1 on a Galera node (wsrep_on) whose wsrep_mode includes STRICT_REPLICATION,
 * which refuses non-InnoDB tables; read from information_schema so that it
 * also works on servers that have no wsrep_mode variable (then 0). */
static const char SQL_WSREP_STRICT[] =
    "/* rowlock:migrate-traits */ SELECT IFNULL((SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES WHERE VARIABLE_NAME = 'WSREP_ON')"
    " = 'ON' AND FIND_IN_SET('STRICT_REPLICATION', (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES"
    " WHERE VARIABLE_NAME = 'WSREP_MODE')) > 0, 0)";

/* Server properties a migration file may branch on ("-- rowlock:if NAME"). */
typedef struct {
    int wsrep_strict; /* "wsrep-strict-replication" */
} server_traits;

static int read_traits(rowlock_client *c, server_traits *t)
{
    rowlock__col col = { .type = ROWLOCK__T_I64 };
    int rc = rowlock__db_run(c, RL_STMT(.what = "migrate: server check", .tmpl = SQL_WSREP_STRICT, .cols = &col,
                                        .ncols = 1));
    if (rc)
        return rc;
    t->wsrep_strict = !col.is_null && col.i != 0;
    return 0;
}

/* The value of a "-- rowlock:if" condition, or -1 if it is unknown. */
static int trait_value(const server_traits *t, const char *name)
{
    size_t n = strcspn(name, " \t\r");
    if (n == strlen("wsrep-strict-replication") && strncmp(name, "wsrep-strict-replication", n) == 0)
        return t->wsrep_strict;
    return -1;
}

ROWLOCK_EXTERN int rowlock_schema_version_expected(void)
{
    return rowlock__migration_latest;
}

static int read_version(rowlock_client *c, const char *sql, int *found)
{
    *found = 0;
    rowlock__col col = { .type = ROWLOCK__T_I64 };
    rowlock__res res;
    rowlock__param p = RL_STR(c->table, strlen(c->table));
    int rc = rowlock__db_run(c, RL_STMT(.what = "schema check", .tmpl = sql, .params = &p, .nparams = 1,
                                        .cols = &col, .ncols = 1, .res = &res));
    if (rc == ROWLOCK_ESCHEMA)
        return 0; /* no rowlock_schema table: nothing installed */
    if (rc)
        return rc;
    if (res.rows > 0 && !col.is_null)
        *found = (int)col.i;
    return 0;
}

ROWLOCK_EXTERN int rowlock_schema_version(rowlock_client *c, int *found)
{
    if (c == NULL)
        return ROWLOCK_EINVALID;
    if (found == NULL)
        return rowlock__fail(c, ROWLOCK_EINVALID, "schema version: found is NULL");
    return read_version(c, SQL_VERSION, found);
}

int rowlock__schema_check(rowlock_client *c)
{
    int found = 0;
    int rc = rowlock_schema_version(c, &found);
    if (rc)
        return rc;
    int expected = rowlock__migration_latest;
    if (found < expected) {
        int causal = 0;
        rowlock__errsave keep;
        rowlock__error_save(c, &keep);
        if (read_version(c, SQL_VERSION_CAUSAL, &causal) == 0 && causal > found)
            found = causal;
        rowlock__error_restore(c, &keep);
    }
    if (found == expected)
        return 0;
    if (found > expected)
        return rowlock__fail(c, ROWLOCK_ESCHEMA,
                             "lock table `%s`: schema version %d found, this library (rowlock %s) knows up to %d: "
                             "upgrade librowlock",
                             c->table, found, ROWLOCK_VERSION_STRING, expected);
    return rowlock__fail(c, ROWLOCK_ESCHEMA,
                         "lock table `%s`: schema version %d found, %d expected%s: run `rowlock migrate`", c->table,
                         found, expected, found == 0 ? " (not installed)" : "");
}

/* Run one migration file: statements end with ';' at the end of a line;
 * lines starting with "--" are comments. Three comment lines choose between
 * variants of a statement by a server property (no nesting):
 *   -- rowlock:if NAME    the lines up to ":else" or ":end" run if NAME holds
 *   -- rowlock:else       the lines up to ":end" run if it does not
 *   -- rowlock:end
 * A stored routine's body has ';' at the ends of its lines, so a routine is
 * one statement from the line after "-- rowlock:routine" to the line that
 * is exactly "END;" (unindented).
 * Every statement must be safe to run again (IF NOT EXISTS ...): DDL is not
 * transactional, so a migration that failed halfway is resumed by running
 * it again from the start. */
static int apply_file(rowlock_client *c, const rowlock__migration *m, const server_traits *traits)
{
    char *text = strdup(m->sql);
    if (!text)
        return rowlock__fail(c, ROWLOCK_ENOMEM, "migrate: out of memory");
    static const char tag[] = "/* rowlock:migrate */ ";
    const size_t n0 = sizeof tag - 1; /* every statement starts with the tag */
    size_t cap = strlen(text) + sizeof tag, n = n0;
    char *stmt = malloc(cap);
    if (!stmt) {
        free(text);
        return rowlock__fail(c, ROWLOCK_ENOMEM, "migrate: out of memory");
    }
    int rc = 0;
    int branch = 0; /* 0 outside a rowlock:if, 1 in a running branch, 2 in a skipped one */
    int routine = 0; /* 1 between "-- rowlock:routine" and its "END;" */
    char *save = NULL;
    memcpy(stmt, tag, sizeof tag - 1);
    for (char *line = strtok_r(text, "\n", &save); line && rc == 0; line = strtok_r(NULL, "\n", &save)) {
        const char *t = line;
        while (*t == ' ' || *t == '\t')
            t++;
        if (strncmp(t, "-- rowlock:if ", 14) == 0 && branch == 0 && n == n0) {
            int v = trait_value(traits, t + 14);
            if (v < 0)
                rc = rowlock__fail(c, ROWLOCK_EINVALID, "migrate %s: unknown condition in \"%.60s\"", m->file, t);
            branch = v > 0 ? 1 : 2;
            continue;
        }
        if (strncmp(t, "-- rowlock:else", 15) == 0 && branch != 0 && n == n0) {
            branch = branch == 1 ? 2 : 1;
            continue;
        }
        if (strncmp(t, "-- rowlock:end", 14) == 0 && branch != 0 && n == n0) {
            branch = 0;
            continue;
        }
        if (strncmp(t, "-- rowlock:routine", 18) == 0 && !routine && n == n0) {
            routine = 1;
            continue;
        }
        if (strncmp(t, "-- rowlock:", 11) == 0) {
            rc = rowlock__fail(c, ROWLOCK_EINVALID, "migrate %s: misplaced \"%.60s\"", m->file, t);
            continue;
        }
        if ((!routine && strncmp(t, "--", 2) == 0) || *t == '\0' || branch == 2)
            continue;
        size_t len = strlen(line);
        memcpy(stmt + n, line, len);
        n += len;
        stmt[n++] = '\n';
        while (len > 0 && (line[len - 1] == ' ' || line[len - 1] == '\r'))
            len--;
        if (len > 0 && line[len - 1] == ';' && (!routine || (len == 4 && strncmp(line, "END;", 4) == 0))) {
            routine = 0;
            stmt[n] = '\0';
            char what[96];
            snprintf(what, sizeof what, "migrate %s", m->file);
            rc = rowlock__db_simple(c, what, stmt);
            n = n0;
        }
    }
    if (rc == 0 && (branch != 0 || routine || n != n0))
        rc = rowlock__fail(c, ROWLOCK_EINVALID, "migrate %s: unterminated statement or rowlock:if", m->file);
    free(stmt);
    free(text);
    return rc;
}

/*
 * What each recorded version promises exists (sql/000N_*.sql): a version
 * row alone proves nothing once an operator dropped a table. Checked by
 * every migrate (also when nothing is pending) and by a dry run.
 */
typedef enum { P_OBJECT, P_COLUMN, P_FLOOR_ROW, P_ROUTINE } promise_kind;
static const struct promise {
    int version;
    promise_kind kind;
    const char *suffix; /* appended to the lock table's name */
    const char *arg;    /* P_OBJECT: TABLE_TYPE (LIKE); P_COLUMN: the column; P_ROUTINE: ROUTINE_TYPE */
    const char *shown;  /* what it is, before its name */
} promises[] = {
    { 1, P_OBJECT, "", "BASE TABLE", "lock table" },
    { 1, P_OBJECT, "_token", "SEQUENCE", "sequence" },
    { 2, P_OBJECT, "_queue", "%", "waiter queue" },
    { 3, P_COLUMN, "", "gen", "column" },
    { 3, P_COLUMN, "", "lease_us", "column" },
    { 3, P_COLUMN, "", "next_owner", "column" },
    { 3, P_COLUMN, "", "next_age", "column" },
    { 3, P_OBJECT, "_floor", "BASE TABLE", "token floor table" },
    { 3, P_FLOOR_ROW, "_floor", NULL, "token floor row (id 1) of" },
    { 4, P_COLUMN, "", "permits", "column" },
    { 4, P_OBJECT, "_hold", "BASE TABLE", "holders table" },
    { 5, P_COLUMN, "", "fences", "column" },
    { 5, P_COLUMN, "_hold", "fences", "column" },
    { 5, P_ROUTINE, "_fence", "PROCEDURE", "fence procedure" },
    { 6, P_OBJECT, "_epoch", "BASE TABLE", "failover epoch table" },
    { 7, P_COLUMN, "_hold", "gen", "column" },
    { 7, P_COLUMN, "_hold", "lease_us", "column" },
    { 8, P_COLUMN, "", "shared_token", "column" },
};
static const char SQL_HAS_OBJECT[] =
    "/* rowlock:schema-audit */ SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
    "AND TABLE_NAME = ? AND TABLE_TYPE LIKE ?";
static const char SQL_HAS_COLUMN[] =
    "/* rowlock:schema-audit */ SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
    "AND TABLE_NAME = ? AND COLUMN_NAME = ?";
static const char SQL_HAS_ROUTINE[] =
    "/* rowlock:schema-audit */ SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() "
    "AND ROUTINE_NAME = ? AND ROUTINE_TYPE = ?";
static const char SQL_HAS_FLOOR_ROW[] = "/* rowlock:schema-audit */ SELECT COUNT(*) FROM `{{table}}_floor` WHERE id = 1";
/* A recreated floor starts at the highest token the lock table still shows. */
static const char SQL_RAISE_FLOOR[] =
    "/* rowlock:schema-repair */ UPDATE `{{table}}_floor` SET token = GREATEST(token, "
    "(SELECT IFNULL(MAX(token), 0) FROM `{{table}}`)) WHERE id = 1";

/* List into `out` what `version` promises and is missing; 0 with *n_missing. */
static int audit(rowlock_client *c, int version, char *out, size_t cap, int *n_missing, int *floor_missing)
{
    size_t o = 0;
    int object_missing = 0;
    *n_missing = 0;
    *floor_missing = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof promises / sizeof promises[0]; i++) {
        const struct promise *p = &promises[i];
        if (p->version > version)
            continue;
        char name[128];
        snprintf(name, sizeof name, "%s%s", c->table, p->suffix);
        rowlock__col col = { .type = ROWLOCK__T_I64 };
        int rc;
        if (p->kind == P_FLOOR_ROW) {
            if (object_missing & 1)
                continue; /* its table is already missing */
            rc = rowlock__db_run(c, RL_STMT(.what = "migrate: check", .tmpl = SQL_HAS_FLOOR_ROW, .cols = &col,
                                            .ncols = 1));
        } else {
            rowlock__param pp[2] = { RL_STR(name, strlen(name)), RL_STR(p->arg, strlen(p->arg)) };
            rc = rowlock__db_run(c, RL_STMT(.what = "migrate: check",
                                            .tmpl = p->kind == P_OBJECT    ? SQL_HAS_OBJECT
                                                    : p->kind == P_ROUTINE ? SQL_HAS_ROUTINE
                                                                           : SQL_HAS_COLUMN,
                                            .params = pp, .nparams = 2, .cols = &col, .ncols = 1));
        }
        if (rc)
            return rc;
        if (!col.is_null && col.i > 0)
            continue;
        if (p->kind == P_OBJECT && strcmp(p->suffix, "_floor") == 0)
            object_missing |= 1;
        if (strcmp(p->suffix, "_floor") == 0)
            *floor_missing = 1;
        if (p->kind == P_COLUMN && *n_missing > 0 && strstr(out, "lock table `") == out)
            continue; /* the lock table itself is missing: its columns are too */
        char what[160];
        if (p->kind == P_COLUMN)
            snprintf(what, sizeof what, "%s `%s`.%s", p->shown, name, p->arg);
        else
            snprintf(what, sizeof what, "%s `%s`", p->shown, name);
        if (o < cap)
            o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? ", " : "", what);
        ++*n_missing;
    }
    return 0;
}

ROWLOCK_EXTERN int rowlock_schema_migrate(rowlock_client *c, unsigned int flags, int *from, int *to)
{
    if (c == NULL)
        return ROWLOCK_EINVALID;
    rowlock__clear_error(c);
    int found = 0, rc;
    if (flags & ROWLOCK_MIGRATE_DRY_RUN) {
        if ((rc = rowlock_schema_version(c, &found)))
            return rc;
        if (from)
            *from = found;
        if (to)
            *to = found > rowlock__migration_latest ? found : rowlock__migration_latest;
        if (found > rowlock__migration_latest)
            return rowlock__schema_check(c);
        char missing[ROWLOCK__ERRMSG_MAX / 2];
        int n = 0, floor_missing = 0;
        if ((rc = audit(c, found, missing, sizeof missing, &n, &floor_missing)))
            return rc;
        if (n > 0)
            return rowlock__fail(c, ROWLOCK_EDB,
                                 "migrate: schema version %d is recorded but %s %s missing: run `rowlock migrate` to "
                                 "recreate it",
                                 found, missing, n > 1 ? "are" : "is");
        return 0;
    }

    char lockname[96];
    snprintf(lockname, sizeof lockname, "rowlock.migrate.%s", c->table);
    rowlock__param pl = RL_STR(lockname, strlen(lockname));
    rowlock__col got = { .type = ROWLOCK__T_I64 };
    /* Up to 60 s in the server: with a shorter read timeout, the read
     * timeout counts from the end of that wait (db_stmt.c), as for the lock
     * waits; before, such a client lost its connection here. */
    if ((rc = rowlock__db_run(c, RL_STMT(.what = "migrate: lock", .tmpl = SQL_MIGRATE_LOCK, .params = &pl,
                                         .nparams = 1, .cols = &got, .ncols = 1, .wait_s = 60))))
        return rc;
    if (got.is_null || got.i != 1)
        return rowlock__fail(c, ROWLOCK_EDB, "migrate: another migration of `%s` held its lock for 60 s", c->table);

    if ((rc = rowlock_schema_version(c, &found)))
        goto out;
    if (from)
        *from = found;
    if (found > rowlock__migration_latest) {
        rc = rowlock__schema_check(c);
        goto out;
    }
    server_traits traits = { 0 };
    if (found < rowlock__migration_latest && (rc = read_traits(c, &traits)))
        goto out;
    /* In order, every file numbered above the recorded version (numbers
     * grow but may have gaps: cmake/embed_sql.cmake). */
    for (int i = 0; i < rowlock__migration_count; i++) {
        const rowlock__migration *m = &rowlock__migrations[i];
        if (m->number <= found)
            continue;
        if ((rc = apply_file(c, m, &traits)))
            goto out;
        rowlock__param pv[2] = { RL_STR(c->table, strlen(c->table)), RL_I64(m->number) };
        if ((rc = rowlock__db_run(c, RL_STMT(.what = "migrate: record version", .tmpl = SQL_SET_VERSION,
                                             .params = pv, .nparams = 2))))
            goto out;
        found = m->number;
    }
    {
        /* What the recorded version promises must exist: an operator may
         * have dropped a table after the version was recorded. The files
         * are idempotent (IF NOT EXISTS, INSERT IGNORE), so running them
         * again recreates what is missing and leaves the rest alone. */
        char missing[ROWLOCK__ERRMSG_MAX / 2];
        int n = 0, floor_missing = 0;
        if ((rc = audit(c, found, missing, sizeof missing, &n, &floor_missing)))
            goto out;
        if (n > 0) {
            if ((rc = read_traits(c, &traits)))
                goto out;
            for (int i = 0; i < rowlock__migration_count && rowlock__migrations[i].number <= found; i++)
                if ((rc = apply_file(c, &rowlock__migrations[i], &traits)))
                    goto out;
            if (floor_missing &&
                (rc = rowlock__db_run(c, RL_STMT(.what = "migrate: raise floor", .tmpl = SQL_RAISE_FLOOR))))
                goto out;
            char still[ROWLOCK__ERRMSG_MAX / 2];
            int n2 = 0;
            if ((rc = audit(c, found, still, sizeof still, &n2, &floor_missing)))
                goto out;
            if (n2 > 0) {
                rc = rowlock__fail(c, ROWLOCK_EDB,
                                   "migrate: schema version %d is recorded but %s could not be recreated: drop what "
                                   "is left of the lock table's objects, run `DELETE FROM rowlock_schema WHERE "
                                   "lock_table = '%s'` and `rowlock migrate` again",
                                   found, still, c->table);
                goto out;
            }
            /* Success, with a note for the caller (rowlock_client_errmsg). */
            rowlock__fail(c, 0, "repaired: recreated %s", missing);
        }
    }
out:
    if (to)
        *to = found;
    {
        /* Keep the migration's error, not the unlock's. */
        rowlock__errsave keep;
        rowlock__error_save(c, &keep);
        rowlock__col ign = { .type = ROWLOCK__T_I64 };
        (void)rowlock__db_run(c, RL_STMT(.what = "migrate: unlock", .tmpl = SQL_MIGRATE_UNLOCK, .params = &pl,
                                         .nparams = 1, .cols = &ign, .ncols = 1));
        if (rc)
            rowlock__error_restore(c, &keep);
    }
    return rc;
}
