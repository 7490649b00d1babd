/* rowlock_client: settings, owner identity, last error. */
#include "rowlock_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int rowlock__fail(rowlock_client *c, int code, const char *fmt, ...)
{
    if (c == NULL)
        return code;
    /* Format aside first: callers may pass c->errmsg itself as an argument. */
    char tmp[ROWLOCK__ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    /* One line, always. */
    for (char *p = tmp; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    memcpy(c->errmsg, tmp, sizeof tmp);
    return code;
}

void rowlock__clear_error(rowlock_client *c)
{
    c->errmsg[0] = '\0';
    c->db_errno = 0;
    memcpy(c->sqlstate, "00000", 6);
}

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

/*
 * rowlock's own connection keys in the option files (read only when the
 * files are): [rowlock] single-node=1 sets ROWLOCK_CLIENT_SINGLE_NODE; a
 * host= in [client] or [rowlock] ([rowlock] wins) that lists several hosts
 * ("db1,db2:3307") is a failover list, which libmysqlclient cannot read, so
 * it is passed on explicitly. *host_list gets a copy (or stays NULL).
 */
static int resolve_file_options(rowlock_client *c, const rowlock_client_options *o, unsigned int *flags,
                                char **host_list)
{
    char v[1024];
    *host_list = NULL;
    if (!(o->defaults_file || (o->flags & ROWLOCK_CLIENT_READ_DEFAULT_FILES)))
        return 0;
    const char *file = o->defaults_file ? o->defaults_file : "(standard files)";
    int r;
    if (!(*flags & ROWLOCK_CLIENT_SINGLE_NODE)) {
        r = rowlock__optfile_get(o->defaults_file, 1, "rowlock", "single-node", v, sizeof v);
        if (r < 0)
            return rowlock__fail(c, ROWLOCK_EINVALID, "connect: cannot read option file %s: %s", file,
                                 strerror(errno));
        if (r > 0) {
            if (v[0] == '\0' || strcmp(v, "1") == 0 || strcasecmp(v, "on") == 0 || strcasecmp(v, "true") == 0 ||
                strcasecmp(v, "yes") == 0)
                *flags |= ROWLOCK_CLIENT_SINGLE_NODE;
            else if (!(strcmp(v, "0") == 0 || strcasecmp(v, "off") == 0 || strcasecmp(v, "false") == 0 ||
                       strcasecmp(v, "no") == 0))
                return rowlock__fail(c, ROWLOCK_EINVALID,
                                     "connect: option file %s: [rowlock] single-node must be 1 or 0 (or on/off)", file);
        }
    }
    if (o->host == NULL) {
        const char *groups[2] = { "client", "rowlock" };
        char found[1024] = "";
        int any = 0;
        for (int g = 0; g < 2; g++) {
            r = rowlock__optfile_get(o->defaults_file, 1, groups[g], "host", v, sizeof v);
            if (r < 0 && errno != ENAMETOOLONG)
                return rowlock__fail(c, ROWLOCK_EINVALID, "connect: cannot read option file %s: %s", file,
                                     strerror(errno));
            if (r > 0) {
                memcpy(found, v, sizeof found);
                any = 1;
            }
        }
        if (any && strchr(found, ',')) {
            *host_list = strdup(found);
            if (*host_list == NULL)
                return rowlock__fail(c, ROWLOCK_ENOMEM, "connect: out of memory");
        }
    }
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
    unsigned int flags = o->flags;
    char *host_list = NULL;
    if ((rc = resolve_file_options(c, o, &flags, &host_list)))
        return rc;

    free_settings(c);
    c->host = host_list;
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
    c->flags = flags;

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

ROWLOCK_EXTERN void rowlock_client_free(rowlock_client *c)
{
    if (c == NULL)
        return;
    rowlock__queue_forget(c);
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
