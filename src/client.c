/* rowlock_client: settings, owner identity, last error. */
#include "rowlock_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* The db layer's session_ended hook (db.h): what the session held is gone.
 * The lease rule and the strategies each forget their part; none runs SQL. */
static void session_ended(rowlock_client *c)
{
    rowlock__lease_rule_session_ended(c);
    rowlock__strategy_session_ended(c);
    rowlock__epoch_session_ended(c);
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
    rowlock__log_init(&c->log_own);
    rowlock__db_mutex_init(c);
    c->log = &c->log_own;
    c->conn_role = "connection";
    c->session_ended = session_ended;

    /* Owner: 128 random bits make it unique and unguessable; host and pid
     * are only there for humans reading `rowlock status`. */
    unsigned char rnd[16];
    if (rowlock__random_bytes(rnd, sizeof rnd) || rowlock__random_bytes(&c->rng, sizeof c->rng)) {
        rowlock__log_destroy(&c->log_own);
        rowlock__db_mutex_destroy(c);
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

const char *const rowlock__conn_groups[] = { "client", "client-server", "client-mariadb", "rowlock", NULL };

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
    rowlock__opts_free(&c->opts);
}

static int dup_opt(rowlock_client *c, char **dst, const char *src)
{
    if (src == NULL)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : rowlock__fail(c, ROWLOCK_ENOMEM, "connect: out of memory");
}

/* Table name: explicit option, else [rowlock] table= in `files` (group
 * index `group`), else the default. */
static int resolve_table(rowlock_client *c, const rowlock_client_options *o, const rowlock__opts *files, int group,
                         const char *what)
{
    const char *t = o ? o->table : NULL;
    const char *from = "the table option";
    if (t == NULL) {
        const rowlock__optent *e = rowlock__opts_find(files, group, "table");
        if (e) {
            t = e->val;
            from = "[rowlock] table= in the option file";
        }
    }
    if (t == NULL)
        t = ROWLOCK_TABLE_DEFAULT;
    int bad = rowlock__table_name_check(t);
    if (bad) {
        char shown[120];
        size_t n = strlen(t);
        rowlock_escape(shown, sizeof shown, t, n);
        if (bad == ROWLOCK__TABLE_RESERVED) {
            char reserved[100];
            return rowlock__fail(c, ROWLOCK_EINVALID,
                                 "%s: invalid lock table name '%s' (%s): %s are rowlock's own tables", what, shown,
                                 from, rowlock__table_reserved_text(reserved, sizeof reserved));
        }
        if (n > ROWLOCK_TABLE_MAX)
            return rowlock__fail(c, ROWLOCK_EINVALID,
                                 "%s: invalid lock table name '%s' (%s): %zu bytes, the limit is %d", what, shown,
                                 from, n, ROWLOCK_TABLE_MAX);
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "%s: invalid lock table name '%s' (%s): use 1-%d letters, digits or _", what, shown,
                             from, ROWLOCK_TABLE_MAX);
    }
    rowlock__strlcpy(c->table, t, sizeof c->table);
    return 0;
}

static int has_file_ca(const rowlock__opts *files)
{
    static const char *keys[] = { "ssl-ca", "tls-ca", "ssl-capath", "tls-capath" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const rowlock__optent *e = rowlock__opts_find(files, -1, keys[i]);
        if (e && e->val[0])
            return 1;
    }
    return 0;
}

/*
 * rowlock's own connection keys in the option files (as read once at
 * connect): [rowlock] single-node=1 sets ROWLOCK_CLIENT_SINGLE_NODE; a host=
 * in [client] or [rowlock] ([rowlock] wins) that lists several hosts
 * ("db1,db2:3307") is a failover list, which libmysqlclient cannot read, so
 * it is passed on explicitly. *host_list gets a copy (or stays NULL).
 */
static int resolve_file_options(rowlock_client *c, const rowlock_client_options *o, const rowlock__opts *files,
                                unsigned int *flags, char **host_list)
{
    *host_list = NULL;
    const char *file = o->defaults_file ? o->defaults_file : "(standard files)";
    const rowlock__optent *e;
    if (!(*flags & ROWLOCK_CLIENT_SINGLE_NODE) && (e = rowlock__opts_find(files, ROWLOCK__GROUP_ROWLOCK, "single-node"))) {
        const char *v = e->val;
        if (v[0] == '\0' || strcmp(v, "1") == 0 || strcasecmp(v, "on") == 0 || strcasecmp(v, "true") == 0 ||
            strcasecmp(v, "yes") == 0)
            *flags |= ROWLOCK_CLIENT_SINGLE_NODE;
        else if (!(strcmp(v, "0") == 0 || strcasecmp(v, "off") == 0 || strcasecmp(v, "false") == 0 ||
                   strcasecmp(v, "no") == 0))
            return rowlock__fail(c, ROWLOCK_EINVALID,
                                 "connect: option file %s: [rowlock] single-node must be 1 or 0 (or on/off)", file);
    }
    if (o->host == NULL) {
        e = rowlock__opts_find(files, ROWLOCK__GROUP_ROWLOCK, "host");
        if (e == NULL)
            e = rowlock__opts_find(files, -1, "host");
        if (e && strchr(e->val, ',')) {
            *host_list = strdup(e->val);
            if (*host_list == NULL)
                return rowlock__fail(c, ROWLOCK_ENOMEM, "connect: out of memory");
        }
    }
    return 0;
}

/* The TLS mode decides (as the mysql client's --ssl-mode): see
 * rowlock_tls_mode. A CA given with a mode that does not verify would be
 * silently unused: refused. */
static int check_tls(rowlock_client *c, const rowlock_client_options *o, const rowlock__opts *files,
                     rowlock_tls_mode *mode)
{
    *mode = o->tls_mode;
    if ((int)o->tls_mode < ROWLOCK_TLS_DEFAULT || o->tls_mode > ROWLOCK_TLS_VERIFY_IDENTITY)
        return rowlock__fail(c, ROWLOCK_EINVALID, "connect: unknown TLS mode %d", (int)o->tls_mode);
    if (o->tls_ca && *mode == ROWLOCK_TLS_DEFAULT)
        *mode = ROWLOCK_TLS_VERIFY_CA; /* as mysql: --ssl-ca alone means VERIFY_CA */
    if (o->tls_ca && *mode != ROWLOCK_TLS_VERIFY_CA && *mode != ROWLOCK_TLS_VERIFY_IDENTITY)
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "connect: a CA file (tls_ca / --ssl-ca) is only used by TLS modes VERIFY_CA and "
                             "VERIFY_IDENTITY, not %s",
                             *mode == ROWLOCK_TLS_DISABLED ? "DISABLED"
                             : *mode == ROWLOCK_TLS_PREFERRED ? "PREFERRED" : "REQUIRED");
    if ((*mode == ROWLOCK_TLS_VERIFY_CA || *mode == ROWLOCK_TLS_VERIFY_IDENTITY) && !o->tls_ca &&
        !has_file_ca(files))
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "connect: TLS mode %s needs a CA file (tls_ca / --ssl-ca, or ssl-ca= in the option file)",
                             *mode == ROWLOCK_TLS_VERIFY_CA ? "VERIFY_CA" : "VERIFY_IDENTITY");
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
    /* The option files are read once, here: [rowlock] table= and the
     * connection settings come from the same read (a pipe cannot be read
     * twice), and Connector/C only sees what db_connect.c gives it. */
    rowlock__opts files;
    memset(&files, 0, sizeof files);
    if ((o->defaults_file || (o->flags & ROWLOCK_CLIENT_READ_DEFAULT_FILES)) &&
        rowlock__opts_load(&files, o->defaults_file, 1, rowlock__conn_groups) != 0)
        return rowlock__fail(c, errno == ENOMEM ? ROWLOCK_ENOMEM : ROWLOCK_EINVALID, "connect: %s", files.err);
    rowlock_tls_mode mode;
    if ((rc = check_tls(c, o, &files, &mode)) || (rc = resolve_table(c, o, &files, ROWLOCK__GROUP_ROWLOCK, "connect"))) {
        rowlock__opts_free(&files);
        return rc;
    }
    unsigned int flags = o->flags;
    char *host_list = NULL;
    if ((rc = resolve_file_options(c, o, &files, &flags, &host_list))) {
        rowlock__opts_free(&files);
        return rc;
    }

    free_settings(c);
    c->opts = files;
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
    c->tls_mode = mode;
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
    {
        static const char *const groups[] = { "rowlock", NULL };
        rowlock__opts files;
        memset(&files, 0, sizeof files);
        if (o && (o->defaults_file || (o->flags & ROWLOCK_CLIENT_READ_DEFAULT_FILES)) &&
            rowlock__opts_load(&files, o->defaults_file, 1, groups) != 0)
            return rowlock__fail(c, errno == ENOMEM ? ROWLOCK_ENOMEM : ROWLOCK_EINVALID, "wrap: %s", files.err);
        rc = resolve_table(c, o, &files, 0, "wrap");
        rowlock__opts_free(&files);
        if (rc)
            return rc;
    }
    c->flags = o ? o->flags : 0;
    c->mysql = mysql;
    c->owns_mysql = 0;
    c->nonblock = 0; /* the application's connection: its options stay as they are */
    c->connected = 1;
    c->session_gen++;
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
    rowlock__log_init(&k->log_own);
    rowlock__db_mutex_init(k);
    k->log = c->log; /* the copy reports to its parent's hook */
    k->conn_role = c->conn_role;
    k->session_ended = c->session_ended;
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
    /* What the option files said, read once by c's connect: the copy
     * connects with it too, never with the files (they may have changed). */
    if (c->opts.n > 0) {
        k->opts.v = calloc(c->opts.n, sizeof *k->opts.v);
        if (k->opts.v == NULL)
            return rowlock__fail(k, ROWLOCK_ENOMEM, "connect: out of memory");
        k->opts.cap = c->opts.n;
        for (size_t i = 0; i < c->opts.n; i++) {
            rowlock__optent *d = &k->opts.v[i];
            const rowlock__optent *e = &c->opts.v[i];
            d->has_val = e->has_val;
            d->group = e->group;
            d->key = strdup(e->key);
            d->val = strdup(e->val ? e->val : "");
            if (d->key == NULL || d->val == NULL) {
                free(d->key);
                free(d->val);
                return rowlock__fail(k, ROWLOCK_ENOMEM, "connect: out of memory");
            }
            k->opts.n = i + 1;
        }
    }
    return 0;
}

ROWLOCK_EXTERN void rowlock_client_free(rowlock_client *c)
{
    if (c == NULL)
        return;
    if (c->keeper_hooks)
        c->keeper_hooks->client_free(c); /* the keeper's threads and connection */
    if (c->mysql && c->owns_mysql && c->conn_pid != (long)getpid()) {
        /* A fork child's copy: never end the parent's session. */
        rowlock__db_abandon(c);
    }
    rowlock__locks_orphan(c);
    rowlock__strategy_client_free(c);
    rowlock__lease_rules_client_free(c);
    rowlock__db_close(c);
    free_settings(c);
    rowlock__log_destroy(&c->log_own);
    rowlock__db_mutex_destroy(c);
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

ROWLOCK_EXTERN int rowlock_client_conn_lost(const rowlock_client *c)
{
    return c != NULL && c->db_errno != 0 && rowlock__db_classify(c->db_errno) == ROWLOCK__DB_CONN;
}

ROWLOCK_EXTERN int rowlock_client_transient(const rowlock_client *c)
{
    return c != NULL && rowlock__db_transient(c->db_errno) != NULL;
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
