/* rowlock_client: settings, owner identity, last error. */
#include "rowlock_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ROWLOCK_EXTERN int rowlock_client_new(rowlock_client **out)
{
    if (out == NULL)
        return ROWLOCK_EINVALID;
    *out = NULL;
    rowlock_client *c = calloc(1, sizeof *c);
    if (!c)
        return ROWLOCK_ENOMEM;
    rowlock__clear_error(c);
    rowlock__strlcpy(c->table, ROWLOCK_TABLE_DEFAULT, sizeof c->table);

    /* Owner: 128 random bits make it unique and unguessable; host and pid
     * are only there for humans reading `rowlock status`. */
    unsigned char rnd[16];
    if (rowlock__random_bytes(rnd, sizeof rnd) || rowlock__random_bytes(&c->rng, sizeof c->rng)) {
        free(c);
        return ROWLOCK_EDB;
    }
    char host[65] = "unknown";
    if (gethostname(host, sizeof host - 1) != 0)
        rowlock__strlcpy(host, "unknown", sizeof host);
    host[64] = '\0';
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
    snprintf(c->owner, sizeof c->owner, "%s:%ld:%s", host, (long)getpid(), hex);
    c->owner_len = strlen(c->owner);
    *out = c;
    return 0;
}

static void free_settings(rowlock_client *c)
{
    char **all[] = { &c->host, &c->user, &c->password, &c->database, &c->unix_socket, &c->defaults_file, &c->tls_ca };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i]) {
            if (all[i] == &c->password)
                memset(*all[i], 0, strlen(*all[i])); /* don't leave it in freed memory */
            free(*all[i]);
            *all[i] = NULL;
        }
    }
}

static int dup_opt(rowlock_client *c, char **dst, const char *src)
{
    if (src == NULL)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : rowlock__fail(c, ROWLOCK_ENOMEM, "connect: out of memory");
}

/* Table name: explicit option, else [rowlock] table= in the option files. */
static int resolve_table(rowlock_client *c, const rowlock_client_options *o, const char *what)
{
    char from_file[128];
    const char *t = o ? o->table : NULL;
    if (t == NULL && o && (o->defaults_file || (o->flags & ROWLOCK_CLIENT_READ_DEFAULT_FILES))) {
        int r = rowlock__optfile_get(o->defaults_file, 1, "rowlock", "table", from_file, sizeof from_file);
        if (r < 0)
            return rowlock__fail(c, ROWLOCK_EINVALID, "%s: cannot read option file %s: %s", what,
                                 o->defaults_file ? o->defaults_file : "(standard files)", strerror(errno));
        if (r > 0)
            t = from_file;
    }
    if (t == NULL)
        t = ROWLOCK_TABLE_DEFAULT;
    if (rowlock__table_name_check(t))
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "%s: invalid lock table name '%.80s': use 1-%d letters, digits or _", what, t,
                             ROWLOCK_TABLE_MAX);
    rowlock__strlcpy(c->table, t, sizeof c->table);
    return 0;
}

static int check_version(rowlock_client *c, const rowlock_client_options *o)
{
    if (o && o->version != ROWLOCK_CLIENT_OPTIONS_VERSION)
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "connect: rowlock_client_options.version is %u, this library knows %d "
                             "(start from ROWLOCK_CLIENT_OPTIONS_INIT)",
                             o->version, ROWLOCK_CLIENT_OPTIONS_VERSION);
    return 0;
}

ROWLOCK_EXTERN int rowlock_client_connect(rowlock_client *c, const rowlock_client_options *o)
{
    if (c == NULL)
        return ROWLOCK_EINVALID;
    rowlock__clear_error(c);
    rowlock_client_options defaults = ROWLOCK_CLIENT_OPTIONS_INIT;
    if (o == NULL)
        o = &defaults;
    int rc = check_version(c, o);
    if (rc)
        return rc;
    if (c->connected || c->mysql)
        rowlock__db_close(c);
    if (o->defaults_file && access(o->defaults_file, R_OK) != 0)
        return rowlock__fail(c, ROWLOCK_EINVALID, "connect: cannot read defaults file %s: %s", o->defaults_file,
                             strerror(errno));
    if ((int)o->tls_mode < ROWLOCK_TLS_DEFAULT || o->tls_mode > ROWLOCK_TLS_VERIFY_IDENTITY)
        return rowlock__fail(c, ROWLOCK_EINVALID, "connect: unknown TLS mode %d", (int)o->tls_mode);
    if ((rc = resolve_table(c, o, "connect")))
        return rc;

    free_settings(c);
    if ((rc = dup_opt(c, &c->host, o->host)) || (rc = dup_opt(c, &c->user, o->user)) ||
        (rc = dup_opt(c, &c->password, o->password)) || (rc = dup_opt(c, &c->database, o->database)) ||
        (rc = dup_opt(c, &c->unix_socket, o->unix_socket)) || (rc = dup_opt(c, &c->defaults_file, o->defaults_file)) ||
        (rc = dup_opt(c, &c->tls_ca, o->tls_ca)))
        return rc;
    c->port = o->port;
    c->connect_timeout_ms = o->connect_timeout_ms;
    c->read_timeout_ms = o->read_timeout_ms;
    c->write_timeout_ms = o->write_timeout_ms;
    c->tls_mode = o->tls_mode;
    c->flags = o->flags;

    if ((rc = rowlock__db_connect(c)))
        return rc;
    if (!(c->flags & ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK) && (rc = rowlock__schema_check(c))) {
        rowlock__db_close(c);
        c->owns_mysql = 0;
        return rc;
    }
    return 0;
}

ROWLOCK_EXTERN int rowlock_client_wrap(rowlock_client *c, void *mysql, const rowlock_client_options *o)
{
    if (c == NULL)
        return ROWLOCK_EINVALID;
    rowlock__clear_error(c);
    if (mysql == NULL)
        return rowlock__fail(c, ROWLOCK_EINVALID, "wrap: the MYSQL * connection is NULL");
    int rc = check_version(c, o);
    if (rc)
        return rc;
    if (c->connected || c->mysql)
        rowlock__db_close(c);
    if ((rc = resolve_table(c, o, "wrap")))
        return rc;
    c->flags = o ? o->flags : 0;
    c->mysql = mysql;
    c->owns_mysql = 0;
    c->connected = 1;
    if ((rc = rowlock__db_server_check(c, "wrap"))) {
        c->mysql = NULL;
        c->connected = 0;
        return rc;
    }
    if (rowlock__db_found_rows_flag(c)) {
        c->mysql = NULL;
        c->connected = 0;
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "wrap: the connection was opened with CLIENT_FOUND_ROWS; rowlock needs changed-row "
                             "counts: open it without that flag");
    }
    if (!(c->flags & ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK) && (rc = rowlock__schema_check(c))) {
        rowlock__db_drop_statements(c);
        c->mysql = NULL;
        c->connected = 0;
        return rc;
    }
    return 0;
}

int rowlock__client_clone(rowlock_client **out, const rowlock_client *c)
{
    rowlock_client *k = calloc(1, sizeof *k);
    *out = k;
    if (k == NULL)
        return ROWLOCK_ENOMEM;
    rowlock__clear_error(k);
    memcpy(k->table, c->table, sizeof k->table);
    memcpy(k->owner, c->owner, sizeof k->owner);
    k->owner_len = c->owner_len;
    k->rng = c->rng ^ 0x5851f42d4c957f2dull;
    k->port = c->port;
    k->connect_timeout_ms = c->connect_timeout_ms;
    k->read_timeout_ms = c->read_timeout_ms;
    k->write_timeout_ms = c->write_timeout_ms;
    k->tls_mode = c->tls_mode;
    k->flags = c->flags | ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK;
    int rc;
    if ((rc = dup_opt(k, &k->host, c->host)) || (rc = dup_opt(k, &k->user, c->user)) ||
        (rc = dup_opt(k, &k->password, c->password)) || (rc = dup_opt(k, &k->database, c->database)) ||
        (rc = dup_opt(k, &k->unix_socket, c->unix_socket)) || (rc = dup_opt(k, &k->defaults_file, c->defaults_file)) ||
        (rc = dup_opt(k, &k->tls_ca, c->tls_ca)))
        return rc;
    return 0;
}

ROWLOCK_EXTERN void rowlock_client_free(rowlock_client *c)
{
    if (c == NULL)
        return;
    rowlock__keeper_free(c);
    if (c->mysql && c->owns_mysql && c->conn_pid != (long)getpid()) {
        /* A fork child's copy: never end the parent's session. */
        rowlock__db_abandon(c);
    }
    rowlock__locks_orphan(c);
    rowlock__strategy_client_free(c);
    rowlock__db_close(c);
    free_settings(c);
    free(c);
}

ROWLOCK_EXTERN const char *rowlock_client_errmsg(const rowlock_client *c)
{
    return c ? c->errmsg : "no client";
}

ROWLOCK_EXTERN unsigned int rowlock_client_db_errno(const rowlock_client *c)
{
    return c ? c->db_errno : 0;
}

ROWLOCK_EXTERN const char *rowlock_client_sqlstate(const rowlock_client *c)
{
    return c ? c->sqlstate : "00000";
}

ROWLOCK_EXTERN const char *rowlock_client_owner(const rowlock_client *c)
{
    return c ? c->owner : "";
}

ROWLOCK_EXTERN const char *rowlock_client_table(const rowlock_client *c)
{
    return c ? c->table : "";
}

ROWLOCK_EXTERN const char *rowlock_client_server_info(const rowlock_client *c)
{
    return c ? rowlock__db_server_info((rowlock_client *)c) : "";
}
