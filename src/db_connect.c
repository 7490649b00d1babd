/*
 * The connection: connect (options, option files handed to Connector/C,
 * TLS, the failover host list), the per-connection mutex, the idle check
 * before a statement and the reconnect after a lost session, the keeper's
 * keep-alive ping, error capture (a lost connection is the connection's
 * business), and what the rest of the library may ask about the
 * connection. With db_stmt.c, the only files that call libmysqlclient;
 * src/db.h is the interface of both and of fault.c.
 *
 * A lost connection marks the client disconnected; the next statement on
 * a connection the client owns reconnects (statements are prepared again).
 * A wrapped connection is never reconnected by rowlock.
 */
#include "rowlock_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>

#define MYSQLP(c) ((MYSQL *)(c)->mysql)

static int capture(rowlock_client *c, int own, const char *what, unsigned int err, const char *state,
                   const char *msg)
{
    c->db_errno = err;
    rowlock__strlcpy(c->sqlstate, state && *state ? state : "HY000", sizeof c->sqlstate);
    rowlock__dbclass cls = rowlock__db_classify(err);
    if (cls == ROWLOCK__DB_CONN && own && c->owns_mysql) {
        /* The session is gone: its statements, transaction and row locks too. */
        if (c->connected) {
            c->conn_lost_us = rowlock__now_us();
            ROWLOCK__LOG_CLIENT(c, ROWLOCK_LOG_WARN, DISCONNECTED, RL_EVX(.code = ROWLOCK_EDB, .db_errno = err),
                                "%s lost (%s: MySQL error %u): the next statement reconnects", c->conn_role, what, err);
        }
        c->connected = 0;
    }
    int code = cls == ROWLOCK__DB_BUSY ? ROWLOCK_EBUSY : cls == ROWLOCK__DB_SCHEMA ? ROWLOCK_ESCHEMA : ROWLOCK_EDB;
    if (cls == ROWLOCK__DB_SCHEMA)
        return rowlock__fail(c, code, "%s: lock table `%s` is not installed or outdated (%s); run `rowlock migrate`",
                             what, c->table, msg);
    return rowlock__fail(c, code, "%s: %s (MySQL error %u, SQLSTATE %s)", what, msg, err, c->sqlstate);
}

int rowlock__db_capture(rowlock_client *c, const char *what, unsigned int err, const char *state, const char *msg)
{
    return capture(c, 1, what, err, state, msg);
}

int rowlock__db_capture_other(rowlock_client *c, const char *what, unsigned int err, const char *state,
                              const char *msg)
{
    return capture(c, 0, what, err, state, msg);
}

int rowlock__db_capture_conn(rowlock_client *c, const char *what)
{
    MYSQL *m = MYSQLP(c);
    return rowlock__db_capture(c, what, mysql_errno(m), mysql_sqlstate(m), mysql_error(m));
}

void rowlock__db_drop_statements(rowlock_client *c)
{
    for (int i = 0; i < ROWLOCK__STMT_CACHE; i++) {
        if (c->stmts[i].stmt)
            mysql_stmt_close((MYSQL_STMT *)c->stmts[i].stmt);
        memset(&c->stmts[i], 0, sizeof c->stmts[i]);
    }
}

static void set_sock_fd(rowlock_client *c, int fd, unsigned long session);
static unsigned int local_port(int fd);

void rowlock__db_close(rowlock_client *c)
{
    set_sock_fd(c, -1, 0);
    rowlock__db_drop_statements(c);
    if (c->mysql && c->owns_mysql)
        mysql_close(MYSQLP(c));
    if (c->owns_mysql) {
        c->mysql = NULL;
        c->nonblock = 0;
    }
    c->connected = 0;
    if (c->session_ended)
        c->session_ended(c); /* what the session held is gone (strategy.c's hook) */
}

static const char *tls_mode_name(rowlock_tls_mode m)
{
    switch (m) {
    case ROWLOCK_TLS_DEFAULT: return "DEFAULT";
    case ROWLOCK_TLS_DISABLED: return "DISABLED";
    case ROWLOCK_TLS_PREFERRED: return "PREFERRED";
    case ROWLOCK_TLS_REQUIRED: return "REQUIRED";
    case ROWLOCK_TLS_VERIFY_CA: return "VERIFY_CA";
    case ROWLOCK_TLS_VERIFY_IDENTITY: return "VERIFY_IDENTITY";
    }
    return "unknown";
}

/*
 * TLS modes, as the mysql client's --ssl-mode (client.c has already
 * checked that the VERIFY modes have a CA, from tls_ca or the option file):
 *   DISABLED         never TLS (db_connect gives Connector/C no ssl-/tls-
 *                    key of the option files);
 *   PREFERRED        TLS when the server offers it, nothing verified;
 *   REQUIRED         TLS or fail, nothing verified;
 *   VERIFY_CA        TLS or fail; the chain must lead to the CA (Connector/C
 *                    verifies the peer whenever a CA is set) but the host
 *                    name is not compared;
 *   VERIFY_IDENTITY  VERIFY_CA and the certificate names the host.
 * Connector/C 3.3 falls back to plain text when the server offers no TLS
 * unless the host is verified, so db_connect checks afterwards that the
 * connection is encrypted.
 */
static void set_tls(rowlock_client *c, MYSQL *m)
{
    my_bool yes = 1, no = 0;
    if (c->tls_mode == ROWLOCK_TLS_DEFAULT)
        return;
    mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, c->tls_mode == ROWLOCK_TLS_DISABLED ? &no : &yes);
    if (c->tls_ca && (c->tls_mode == ROWLOCK_TLS_VERIFY_CA || c->tls_mode == ROWLOCK_TLS_VERIFY_IDENTITY))
        mysql_optionsv(m, MYSQL_OPT_SSL_CA, c->tls_ca);
    mysql_optionsv(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, c->tls_mode == ROWLOCK_TLS_VERIFY_IDENTITY ? &yes : &no);
}

static int key_is(const char *k, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(k, *list) == 0)
            return 1;
    return 0;
}

/* Option-file keys (written with '-') that the client's explicit settings
 * supersede: Connector/C applies the file over options set before
 * mysql_real_connect, so they are never given to it. Host, port, socket,
 * user, password and database need nothing: mysql_real_connect's own
 * arguments win over the file. */
static int superseded(const char *k, void *arg)
{
    static const char *const timeout[] = { "connect-timeout", "timeout", NULL };
    static const char *const verify[] = { "ssl-enforce", "tls-enforce", "ssl-verify-server-cert", "tls-verify-peer",
                                          NULL };
    static const char *const ca[] = { "ssl-ca", "tls-ca", "ssl-capath", "tls-capath", NULL };
    static const char *const fp[] = { "ssl-fp", "tls-fp", "ssl-fp-list", "ssl-fplist", "tls-fplist", NULL };
    const rowlock_client *c = arg;
    if (strcmp(k, "table") == 0 || strcmp(k, "single-node") == 0)
        return 1; /* rowlock's own keys */
    if (strcmp(k, "host") == 0 && c->host != NULL && strchr(c->host, ','))
        return 1; /* a failover list: db_connect.c tries its hosts one by one */
    if (c->connect_timeout_ms && key_is(k, timeout))
        return 1;
    if (c->tls_mode == ROWLOCK_TLS_DEFAULT)
        return 0;
    /* "connection" is a string of any options, TLS ones included. */
    if (strcmp(k, "connection") == 0 || key_is(k, verify))
        return 1;
    if (c->tls_mode == ROWLOCK_TLS_DISABLED)
        return strncmp(k, "ssl-", 4) == 0 || strncmp(k, "tls-", 4) == 0;
    if (c->tls_mode == ROWLOCK_TLS_PREFERRED || c->tls_mode == ROWLOCK_TLS_REQUIRED)
        return key_is(k, ca) || key_is(k, fp); /* these modes verify nothing */
    return c->tls_ca && key_is(k, ca); /* the explicit CA is the one */
}

/* Give Connector/C what the option files said (client.c read them once), as
 * an anonymous file it can open by name. Returns the descriptor to close
 * after mysql_real_connect (-1: nothing given), or a rowlock error < -1
 * ... reported through *rc. */
static int give_options(rowlock_client *c, MYSQL *m, int *rc, char *tmp_path, size_t tmp_cap)
{
    char err[200];
    size_t len = 0;
    int fd;
    char path[64];
    tmp_path[0] = '\0';
    *rc = 0;
    if (!c->defaults_file && !(c->flags & ROWLOCK_CLIENT_READ_DEFAULT_FILES))
        return -1; /* no option files: Connector/C reads none either */
    char *text = rowlock__opts_render(&c->opts, superseded, c, &len, err, sizeof err);
    if (!text) {
        *rc = rowlock__fail(c, ROWLOCK_EINVALID, "connect: %s", err);
        return -1;
    }
    fd = memfd_create("rowlock-options", MFD_CLOEXEC);
    if (fd >= 0) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        if (access(path, R_OK) != 0) { /* no /proc */
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(tmp_path, tmp_cap, "%s/rowlock-options.XXXXXX", dir && *dir ? dir : "/tmp");
        fd = mkostemp(tmp_path, O_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            tmp_path[0] = '\0';
            memset(text, 0, len);
            free(text);
            *rc = rowlock__fail(c, ROWLOCK_EDB, "connect: cannot hand the option files to the MySQL library: %s",
                                strerror(e));
            return -1;
        }
        snprintf(path, sizeof path, "%.63s", tmp_path);
    }
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    memset(text, 0, len);
    free(text);
    if (off < len || (tmp_path[0] && strlen(tmp_path) >= sizeof path)) {
        int e = errno;
        close(fd);
        if (tmp_path[0])
            unlink(tmp_path);
        tmp_path[0] = '\0';
        *rc = rowlock__fail(c, ROWLOCK_EDB, "connect: cannot hand the option files to the MySQL library: %s",
                            strerror(e ? e : EIO));
        return -1;
    }
    mysql_optionsv(m, MYSQL_READ_DEFAULT_FILE, path);
    mysql_optionsv(m, MYSQL_READ_DEFAULT_GROUP, "rowlock");
    return fd;
}

/* The option files' password (the last password= or passwd=; "" if none or
 * a bare flag), the same value Connector/C would read from them. */
static const char *file_password(const rowlock_client *c)
{
    const char *pw = "";
    for (size_t i = 0; i < c->opts.n; i++)
        if (strcmp(c->opts.v[i].key, "password") == 0 || strcmp(c->opts.v[i].key, "passwd") == 0)
            pw = c->opts.v[i].val;
    return pw;
}

/* A new MYSQL handle with the client's options, connected to host/port
 * (NULL/0: the option files' or libmysqlclient's defaults). 0, or an error
 * captured in the client (*m is NULL then). */
static int open_one(rowlock_client *c, const char *host, unsigned int port, MYSQL **out, int *nonblock)
{
    *out = NULL;
    MYSQL *m = mysql_init(NULL);
    if (m == NULL)
        return rowlock__fail(c, ROWLOCK_ENOMEM, "connect: out of memory");
    /* With a read timeout: blocking calls work as before on such a
     * connection, and the non-blocking ones let a statement that waits in
     * the server (a queue slice) wait longer than the read timeout, which
     * then counts from the wait's end (db_stmt.c). Not without one (nothing
     * to gain; the context costs ~12 KB per connection, measured). */
    *nonblock = 0;
#ifdef MARIADB_PACKAGE_VERSION_ID
    if (c->read_timeout_ms > 0)
        *nonblock = mysql_options(m, MYSQL_OPT_NONBLOCK, 0) == 0;
#endif
    unsigned int ct = c->connect_timeout_ms ? (c->connect_timeout_ms + 999) / 1000 : 10;
    mysql_optionsv(m, MYSQL_OPT_CONNECT_TIMEOUT, &ct);
    if (c->read_timeout_ms) {
        unsigned int rt = (c->read_timeout_ms + 999) / 1000;
        mysql_optionsv(m, MYSQL_OPT_READ_TIMEOUT, &rt);
    }
    if (c->write_timeout_ms) {
        unsigned int wt = (c->write_timeout_ms + 999) / 1000;
        mysql_optionsv(m, MYSQL_OPT_WRITE_TIMEOUT, &wt);
    }
    mysql_optionsv(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (c->init_command)
        mysql_optionsv(m, MYSQL_INIT_COMMAND, c->init_command);
    set_tls(c, m);
    char tmp_path[4096];
    int rc = 0;
    int fd = give_options(c, m, &rc, tmp_path, sizeof tmp_path);
    if (rc) {
        mysql_close(m);
        return rc;
    }

    /* The password: the explicit one, else the option files'; never NULL,
     * so Connector/C never falls back to the MYSQL_PWD environment variable
     * (the documented sources of a password are the option files and the
     * prompt). */
    const char *password = c->password ? c->password : file_password(c);
    /* No CLIENT_FOUND_ROWS: the strategies read "rows changed" counts. */
    MYSQL *ok = mysql_real_connect(m, host, c->user, password, c->database, port, c->unix_socket, 0);
    if (fd >= 0)
        close(fd);
    if (tmp_path[0])
        unlink(tmp_path);
    if (!ok) {
        rc = rowlock__db_capture(c, "connect", mysql_errno(m), mysql_sqlstate(m), mysql_error(m));
        mysql_close(m);
        return ROWLOCK_EDB;
    }
    {
        const char *cipher = mysql_get_ssl_cipher(m);
        int encrypted = cipher != NULL && *cipher;
        int must = c->tls_mode == ROWLOCK_TLS_REQUIRED || c->tls_mode == ROWLOCK_TLS_VERIFY_CA ||
                   c->tls_mode == ROWLOCK_TLS_VERIFY_IDENTITY;
        if ((must && !encrypted) || (c->tls_mode == ROWLOCK_TLS_DISABLED && encrypted)) {
            rc = rowlock__fail(c, ROWLOCK_EDB, "connect: TLS mode %s, but the connection is %s%s",
                               tls_mode_name(c->tls_mode), encrypted ? "encrypted" : "not encrypted",
                               encrypted ? "" : " (the server offers no TLS on this connection)");
            mysql_close(m);
            return rc;
        }
    }
    {
        /* Connector/C opens its socket without close-on-exec: a program
         * that runs another (rowlock run's COMMAND, an application's child)
         * would hand it the session, and with stdin/stdout closed the
         * socket may even be its fd 0 or 1. Set it here, after every
         * connect. (Another thread's fork + exec during mysql_real_connect
         * could still inherit it: no connector option closes that.) */
        int sfd = (int)mysql_get_socket(m);
        int fl = sfd >= 0 ? fcntl(sfd, F_GETFD) : -1;
        if (fl >= 0 && !(fl & FD_CLOEXEC))
            (void)fcntl(sfd, F_SETFD, fl | FD_CLOEXEC);
    }
    *out = m;
    return 0;
}

/* With several hosts, a Galera node that is not ready (left the primary
 * component, still joining) accepts connections but refuses every query
 * (1047): skip it. 1 ready (or not a Galera node), 0 not ready. A server
 * built with Galera support but not in a cluster (Debian's, MariaDB's own
 * packages) reports WSREP_READY=OFF too: only wsrep_on says it is a node. */
static int node_ready(MYSQL *m)
{
    static const char q[] = "SELECT IF(@@global.wsrep_on, IFNULL((SELECT VARIABLE_VALUE "
                            "FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_READY'), 'ON'), 'ON')";
    if (mysql_real_query(m, q, (unsigned long)strlen(q)))
        return 0;
    MYSQL_RES *r = mysql_store_result(m);
    if (!r)
        return 0;
    MYSQL_ROW row = mysql_fetch_row(r);
    int ok = row && row[0] && strcmp(row[0], "ON") == 0;
    mysql_free_result(r);
    return ok;
}

/* Next entry of a comma-separated host list "h1[:port],[v6addr]:port,h3":
 * copies the host into buf, sets *port (0 if none); returns the rest of the
 * list, or NULL at its end. */
const char *rowlock__db_next_host(const char *list, char *buf, size_t cap, unsigned int *port)
{
    while (*list == ' ' || *list == ',')
        list++;
    if (*list == '\0')
        return NULL;
    size_t n = strcspn(list, ",");
    const char *rest = list + n;
    while (n > 0 && list[n - 1] == ' ')
        n--;
    const char *colon = NULL;
    const char *h = list;
    size_t hl = n;
    *port = 0;
    if (h[0] == '[') { /* [v6]:port or [v6] */
        const char *close = memchr(h, ']', n);
        if (close) {
            if (close + 1 < h + n && close[1] == ':')
                colon = close + 1;
            h++;
            hl = (size_t)(close - h);
        }
    } else {
        const char *c1 = memchr(h, ':', n);
        if (c1 && !memchr(c1 + 1, ':', (size_t)(h + n - c1 - 1))) /* one colon: host:port; more: bare v6 */
            colon = c1;
        if (colon)
            hl = (size_t)(colon - h);
    }
    if (colon) {
        unsigned long v = 0;
        const char *p = colon + 1;
        int digits = 0;
        while (p < list + n && *p >= '0' && *p <= '9' && v <= 65535) {
            v = v * 10 + (unsigned long)(*p++ - '0');
            digits++;
        }
        if (digits && p == list + n && v > 0 && v <= 65535)
            *port = (unsigned int)v;
        else
            hl = n, h = list; /* not a port: keep the entry whole (the server will say) */
    }
    if (hl >= cap)
        hl = cap - 1;
    memcpy(buf, h, hl);
    buf[hl] = '\0';
    return rest;
}

static int connect_locked(rowlock_client *c);

/* Under the connection's mutex: a keeper's keep-alive never sees the MYSQL *
 * swapped under it (rowlock_client_connect() on a kept client). */
int rowlock__db_connect(rowlock_client *c)
{
    rowlock__db_enter(c);
    int rc = connect_locked(c);
    rowlock__db_leave(c);
    return rc;
}

static int connect_locked(rowlock_client *c)
{
    rowlock__db_close(c);
    c->mysql = NULL;
    c->nonblock = 0;
    c->owns_mysql = 1;
    MYSQL *m = NULL;
    int rc, nonblock = 0;
    if (c->host == NULL || strchr(c->host, ',') == NULL) {
        rc = open_one(c, c->host, c->port, &m, &nonblock);
    } else {
        /* Failover: the hosts in order, at every (re)connect; the first that
         * answers and, on Galera, is ready, wins. */
        char host[256], tried[ROWLOCK__ERRMSG_MAX / 2] = "";
        unsigned int port;
        const char *p = c->host;
        size_t tl = 0;
        rc = rowlock__fail(c, ROWLOCK_EINVALID, "connect: empty host list");
        while ((p = rowlock__db_next_host(p, host, sizeof host, &port)) != NULL) {
            rc = open_one(c, host, port ? port : c->port, &m, &nonblock);
            if (rc == 0 && node_ready(m))
                break;
            int not_ready = rc == 0;
            if (not_ready) {
                mysql_close(m);
                m = NULL;
                c->db_errno = ER_UNKNOWN_COM_ERROR;
                rowlock__strlcpy(c->sqlstate, "08S01", sizeof c->sqlstate);
                rc = rowlock__fail(c, ROWLOCK_EDB, "connect: Galera node not ready (wsrep_ready=OFF)");
            }
            if (rc == ROWLOCK_ENOMEM || rc == ROWLOCK_EINVALID)
                break;
            char why[32];
            if (not_ready)
                snprintf(why, sizeof why, "not ready");
            else
                snprintf(why, sizeof why, "error %u", c->db_errno);
            tl += (size_t)snprintf(tried + tl, tl < sizeof tried ? sizeof tried - tl : 0, "%s%s%s%.0u (%s)",
                                   tl ? ", " : "", host, port ? ":" : "", port, why);
            if (tl >= sizeof tried)
                tl = sizeof tried - 1;
        }
        if (rc == ROWLOCK_EDB) {
            char last[ROWLOCK__ERRMSG_MAX];
            rowlock__strlcpy(last, c->errmsg, sizeof last);
            rc = rowlock__fail(c, ROWLOCK_EDB, "connect: no host of the list answered (tried %s); last: %s", tried,
                               last);
        }
    }
    if (rc)
        return rc;
    c->mysql = m;
    c->nonblock = nonblock;
    c->connected = 1;
    c->session_gen++; /* a new session: epoch.c checks it again before a grant */
    c->conn_pid = (long)getpid();
    if ((rc = rowlock__db_server_check(c, "connect"))) {
        mysql_close(m);
        c->mysql = NULL;
        c->connected = 0;
        return rc;
    }
    if (c->owns_mysql)
        set_sock_fd(c, (int)mysql_get_socket(m), mysql_thread_id(m));
    return 0;
}

int rowlock__db_server_check(rowlock_client *c, const char *what)
{
    MYSQL *m = MYSQLP(c);
    const char *info = mysql_get_server_info(m);
    const char *why = rowlock__server_check(info, mysql_get_server_version(m));
    if (why)
        return rowlock__fail(c, ROWLOCK_EUNSUPPORTED, "%s: %s (server version %.60s); rowlock needs MariaDB 10.6 or later",
                             what, why, info ? info : "unknown");
    return 0;
}

/*
 * An idle connection of ours is checked before it is used: a server closes
 * a session that stays idle longer than its wait_timeout (and a restart or
 * a KILL ends it too), and the next statement would fail on it. A hang-up
 * (or unsolicited data: MySQL 8 sends an error packet before closing) that
 * is already on the socket is seen with poll(2), without a round trip; the
 * statement then goes to a new session instead of failing. Never inside a
 * transaction: a session holding one (a for-update lock) is not replaced
 * behind its holder's back; its next statement fails, as it must.
 */
#define IDLE_CHECK_US 1000000

/* The server's last word: the connection is inside a transaction. Mutex held. */
static int in_trans_locked(rowlock_client *c)
{
    unsigned int status = 0;
    return c->mysql && c->connected && mariadb_get_infov(MYSQLP(c), MARIADB_CONNECTION_SERVER_STATUS, &status) == 0 &&
           (status & SERVER_STATUS_IN_TRANS) != 0;
}

static void idle_check(rowlock_client *c)
{
    if (!c->connected || !c->owns_mysql || c->last_io_us == 0)
        return;
    int64_t idle = rowlock__now_us() - c->last_io_us;
    if (idle < IDLE_CHECK_US || in_trans_locked(c))
        return;
    MYSQL *m = MYSQLP(c);
    struct pollfd pf = { .fd = (int)mysql_get_socket(m), .events = POLLIN | POLLRDHUP };
    if (pf.fd < 0 || poll(&pf, 1, 0) != 1 || !(pf.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
        return;
    c->conn_lost_us = rowlock__now_us();
    ROWLOCK__LOG_CLIENT(c, ROWLOCK_LOG_INFO, DISCONNECTED, RL_EVX(.elapsed_us = idle),
                        "%s (session %lu) was closed by the server after %.1f s idle (its wait_timeout, a restart "
                        "or a KILL): the next statement reconnects",
                        c->conn_role, rowlock__db_thread_id(c), (double)idle / 1e6);
    rowlock__db_close(c);
}

int rowlock__db_ensure(rowlock_client *c, const char *what)
{
    idle_check(c);
    if (c->connected)
        return 0;
    if (!c->owns_mysql)
        return rowlock__fail(c, ROWLOCK_EINVALID, "%s: client is not connected", what);
    if (rowlock__interrupted(c) && c->acquiring > 0)
        return rowlock__fail(c, ROWLOCK_EBUSY, "%s: interrupted (rowlock_client_interrupt)", what);
    /* Our own connection was lost earlier: a new session (any for-update
     * transaction died with the old one; lease locks live in rows). */
    int rc = rowlock__db_connect(c);
    int64_t down_us = c->conn_lost_us ? rowlock__now_us() - c->conn_lost_us : 0;
    if (rc) {
        rc = rowlock__fail(c, rc, "%s: reconnect failed: %s", what, c->errmsg);
        ROWLOCK__LOG_CLIENT(c, ROWLOCK_LOG_WARN, RECONNECT_FAILED, RL_EVX(.code = rc, .db_errno = c->db_errno),
                            "%s: %s", c->conn_role, c->errmsg);
        return rc;
    }
    c->conn_lost_us = 0;
    ROWLOCK__LOG_CLIENT(c, ROWLOCK_LOG_INFO, RECONNECTED, RL_EVX(.elapsed_us = down_us),
                        "%s reconnected (session %lu) after %.3f s", c->conn_role, rowlock__db_thread_id(c),
                        (double)down_us / 1e6);
    return 0;
}

/* ---- the connection's mutex ---------------------------------------------- */

void rowlock__db_mutex_init(rowlock_client *c)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    /* Recursive: a statement's error path may run another (the schema
     * re-check), and connect runs the init statements. */
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&c->conn_mu, &a);
    pthread_mutexattr_destroy(&a);
    pthread_mutex_init(&c->fd_mu, NULL);
    c->sock_fd = c->mysql && c->connected && c->owns_mysql ? (int)mysql_get_socket(MYSQLP(c)) : -1;
    c->sock_session = c->sock_fd >= 0 ? mysql_thread_id(MYSQLP(c)) : 0;
    c->sock_port = local_port(c->sock_fd);
    c->conn_mu_pid = (long)getpid();
}

void rowlock__db_mutex_destroy(rowlock_client *c)
{
    pthread_mutex_destroy(&c->conn_mu);
    pthread_mutex_destroy(&c->fd_mu);
}

/* The local TCP port of socket fd (0: not TCP, or unknown). */
static unsigned int local_port(int fd)
{
    struct sockaddr_storage a;
    socklen_t n = sizeof a;
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&a, &n) != 0)
        return 0;
    if (a.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&a)->sin_port);
    if (a.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
    return 0;
}

/* Our own connection's socket, its session and local port, for
 * rowlock_client_interrupt() (fd: -1 none). */
static void set_sock_fd(rowlock_client *c, int fd, unsigned long session)
{
    unsigned int port = local_port(fd);
    pthread_mutex_lock(&c->fd_mu);
    c->sock_fd = fd;
    c->sock_session = session;
    c->sock_port = port;
    pthread_mutex_unlock(&c->fd_mu);
}

void rowlock__db_session(rowlock_client *c, unsigned long *session, unsigned int *port)
{
    pthread_mutex_lock(&c->fd_mu);
    *session = c->sock_fd >= 0 ? c->sock_session : 0;
    *port = c->sock_fd >= 0 ? c->sock_port : 0;
    pthread_mutex_unlock(&c->fd_mu);
}

ROWLOCK_EXTERN void rowlock_client_interrupt(rowlock_client *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->fd_mu);
    __atomic_store_n(&c->interrupted, 1, __ATOMIC_SEQ_CST);
    if (c->sock_fd >= 0 && c->acquiring > 0) {
        shutdown(c->sock_fd, SHUT_RDWR); /* a statement blocked in the server returns now */
        c->cut = 1;
        c->cut_session = c->sock_session;
        c->cut_port = c->sock_port;
    }
    pthread_mutex_unlock(&c->fd_mu);
}

int rowlock__interrupted(rowlock_client *c)
{
    return __atomic_load_n(&c->interrupted, __ATOMIC_SEQ_CST);
}

void rowlock__interrupt_clear(rowlock_client *c)
{
    __atomic_store_n(&c->interrupted, 0, __ATOMIC_SEQ_CST);
}

unsigned long rowlock__acquiring(rowlock_client *c, int d, unsigned int *port)
{
    pthread_mutex_lock(&c->fd_mu);
    c->acquiring += d;
    int cut = d < 0 && c->acquiring == 0 && c->cut;
    unsigned long session = cut ? c->cut_session : 0;
    if (port)
        *port = cut ? c->cut_port : 0;
    if (cut) {
        c->cut = 0;
        c->cut_session = 0;
        c->cut_port = 0;
    }
    pthread_mutex_unlock(&c->fd_mu);
    if (cut && c->connected && c->owns_mysql) {
        /* Cut during the acquire that ends here (it may have been granted
         * just before): close the dead connection now, so that the next
         * statement (a release, a renewal) reconnects instead of failing. */
        rowlock__db_enter(c);
        rowlock__db_close(c);
        rowlock__db_leave(c);
    }
    return session;
}

/*
 * Params: session id, client port (0: any), the port as text (PROCESSLIST's
 * HOST is "address:port" over TCP). Columns: listed (0/1), running a statement of ours
 * (0/1: its text starts with our tag comment). An account sees its own
 * sessions here without the PROCESS privilege, and may KILL them.
 */
static const char SQL_CUT_FIND[] =
    "/* rowlock:cut-find */ SELECT COUNT(*), IFNULL(MAX(INFO LIKE '/* rowlock:%'), 0) "
    "FROM information_schema.PROCESSLIST WHERE ID = ? AND (? = 0 OR SUBSTRING_INDEX(HOST, ':', -1) = ?)";
static const char SQL_CUT_KILL[] = "/* rowlock:cut-kill */ KILL CONNECTION ?";

int rowlock__db_end_cut_session(rowlock_client *c, unsigned long session, unsigned int port)
{
    static const char what[] = "end the interrupted session";
    const int64_t give_up = rowlock__now_us() + 2000000;
    int killed = 0;
    for (unsigned round = 0;; round++) {
        char ps[16];
        snprintf(ps, sizeof ps, "%u", port);
        rowlock__param pf[3] = { RL_U64(session), RL_U64(port), RL_STR(ps, strlen(ps)) };
        rowlock__param p = RL_U64(session);
        rowlock__col cols[2] = { { .type = ROWLOCK__T_I64 }, { .type = ROWLOCK__T_I64 } };
        int rc = rowlock__db_run(c, RL_STMT(.what = what, .tmpl = SQL_CUT_FIND, .params = pf, .nparams = 3,
                                            .cols = cols, .ncols = 2));
        if (rc)
            return rc;
        if (cols[0].i == 0)
            return 0;
        if (cols[1].i != 0 && !killed) {
            /* Still inside one of our statements (a wait: the server sees
             * the closed socket only when it ends). Our own session, by its
             * id and its statement; if it ended meanwhile, 1094. */
            rc = rowlock__db_run(c, RL_STMT(.what = what, .tmpl = SQL_CUT_KILL, .params = &p, .nparams = 1));
            if (rc && c->db_errno != 1094 /* ER_NO_SUCH_THREAD */)
                return rc;
            killed = 1;
        }
        if (rowlock__now_us() >= give_up)
            return rowlock__fail(c, ROWLOCK_EBUSY, "%s: session %lu is still listed by the server after 2 s", what,
                                 session);
        rowlock__sleep_us(round < 10 ? 1000 : 10000);
    }
}

void rowlock__db_enter(rowlock_client *c)
{
    if (c->conn_mu_pid != (long)getpid()) {
        /* A fork child's copy: the keeper thread that may have held it was
         * not copied; start from an unlocked mutex (the child is the only
         * user of this copy). */
        rowlock__db_mutex_init(c);
    }
    pthread_mutex_lock(&c->conn_mu);
}

void rowlock__db_leave(rowlock_client *c)
{
    c->last_io_us = rowlock__now_us();
    pthread_mutex_unlock(&c->conn_mu);
}

void rowlock__db_cut(rowlock_client *c)
{
    if (c->mysql) {
        my_socket fd = mysql_get_socket(MYSQLP(c));
        if (fd >= 0)
            shutdown(fd, SHUT_RDWR);
    }
}

int rowlock__db_in_transaction(rowlock_client *c)
{
    rowlock__db_enter(c);
    int in = in_trans_locked(c);
    pthread_mutex_unlock(&c->conn_mu); /* (no statement: last_io_us stays) */
    return in;
}

void rowlock__db_hold(rowlock_client *c)
{
    rowlock__db_enter(c);
}

int rowlock__db_try_hold(rowlock_client *c)
{
    if (c->conn_mu_pid != (long)getpid() || pthread_mutex_trylock(&c->conn_mu) != 0)
        return ROWLOCK_EBUSY;
    if (in_trans_locked(c)) {
        pthread_mutex_unlock(&c->conn_mu);
        return ROWLOCK_EBUSY;
    }
    return 0;
}

void rowlock__db_unhold(rowlock_client *c)
{
    pthread_mutex_unlock(&c->conn_mu); /* (no statement of its own: last_io_us stays) */
}

/* A keep-alive's failure from libmysqlclient: its message in msg, and
 * ENOTOWNER when the session is gone, else EDB. */
static int ping_failed(MYSQL *m, char *msg, size_t cap)
{
    snprintf(msg, cap, "keep-alive of the session holding the for-update lock: %s (MySQL error %u)", mysql_error(m),
             mysql_errno(m));
    return rowlock__db_classify(mysql_errno(m)) == ROWLOCK__DB_CONN ? ROWLOCK_ENOTOWNER : ROWLOCK_EDB;
}

/* Keeper thread: see db.h. */
int rowlock__db_ping_session(rowlock_client *c, unsigned long session_id, int64_t deadline_us, int64_t *sent_us,
                             char *msg, size_t cap)
{
    static const char PING[] = "/* rowlock:fu-keep */ DO 1";
    if (pthread_mutex_trylock(&c->conn_mu) != 0)
        return ROWLOCK_EBUSY;
    MYSQL *m = MYSQLP(c);
    int rc = 0;
    *sent_us = rowlock__now_us();
    if (!c->connected || m == NULL || mysql_thread_id(m) != session_id) {
        snprintf(msg, cap, "the session holding the for-update lock (%lu) is no longer the client's connection",
                 session_id);
        pthread_mutex_unlock(&c->conn_mu);
        return ROWLOCK_ENOTOWNER;
    }
    if (mysql_send_query(m, PING, (unsigned long)strlen(PING)) != 0) {
        rc = ping_failed(m, msg, cap);
    } else {
        /* Wait for the answer until the deadline, never longer: after it the
         * server may already have ended the silent session (and the lock). */
        struct pollfd pf = { .fd = (int)mysql_get_socket(m), .events = POLLIN };
        int pr;
        for (;;) {
            int64_t left = deadline_us - rowlock__now_us();
            pr = poll(&pf, 1, left <= 0 ? 0 : (int)((left + 999) / 1000));
            if (pr >= 0 || errno != EINTR)
                break;
        }
        if (pr != 1) {
            snprintf(msg, cap, "no answer from the server to the keep-alive of the session holding the "
                     "for-update lock before its safe time ran out");
            rc = ROWLOCK_ENOTOWNER;
        } else if (mysql_read_query_result(m) != 0) {
            rc = ping_failed(m, msg, cap);
        }
    }
    if (rc == ROWLOCK_ENOTOWNER && c->connected) {
        /* The session cannot be vouched for: cut it, so that no later
         * statement of the holder runs on it (the MYSQL * may be waiting for
         * an answer that never comes) and the server, seeing the close when
         * the network lets it, ends the session and its lock. */
        int fd = (int)mysql_get_socket(m);
        if (fd >= 0)
            (void)shutdown(fd, SHUT_RDWR);
        c->connected = 0;
        c->conn_lost_us = rowlock__now_us();
    }
    rowlock__db_leave(c);
    return rc;
}

int rowlock__db_found_rows_flag(rowlock_client *c)
{
    unsigned long flags = 0;
    if (!c->mysql || mariadb_get_infov(MYSQLP(c), MARIADB_CONNECTION_CLIENT_CAPABILITIES, &flags))
        return 0;
    return (flags & CLIENT_FOUND_ROWS) != 0;
}

const char *rowlock__db_server_info(rowlock_client *c)
{
    if (!c->mysql || !c->connected)
        return "";
    const char *s = mysql_get_server_info(MYSQLP(c));
    return s ? s : "";
}

unsigned long rowlock__db_thread_id(rowlock_client *c)
{
    return c->mysql ? mysql_thread_id(MYSQLP(c)) : 0;
}

ROWLOCK_EXTERN int rowlock_library_init(void)
{
    return mysql_library_init(0, NULL, NULL) == 0 ? 0 : ROWLOCK_EDB;
}

ROWLOCK_EXTERN void rowlock_library_end(void)
{
    mysql_library_end();
}

int rowlock__db_socket(rowlock_client *c)
{
    if (!c->mysql || !c->connected)
        return -1;
    return (int)mysql_get_socket(MYSQLP(c));
}

void rowlock__db_abandon(rowlock_client *c)
{
    /* Close only our descriptor: the session stays the other process's.
     * mysql_close() then finds the socket gone and sends nothing. */
    int fd = rowlock__db_socket(c);
    if (fd >= 0 && c->owns_mysql)
        close(fd);
    rowlock__db_close(c);
}

void rowlock__db_thread_init(void)
{
    mysql_thread_init();
}

void rowlock__db_thread_end(void)
{
    mysql_thread_end();
}
