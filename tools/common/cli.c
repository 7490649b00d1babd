/*
 * Shared by the command-line tools: connection options, option files,
 * password prompt, exit codes, small output helpers. Public API only.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

const char cli_conn_help[] =
    "Connection options (also read from MySQL option files, groups [client] and [rowlock]):\n"
    "  --defaults-file=FILE     read only this option file (also $ROWLOCK_DEFAULTS_FILE)\n"
    "  --host=HOST              server host\n"
    "  --port=PORT              server TCP port\n"
    "  --socket=PATH            server unix socket\n"
    "  --user=USER              user name\n"
    "  --password               ask for the password on the terminal (never give it in argv;\n"
    "                           put it in an option file instead)\n"
    "  --database=DB            database holding the lock table\n"
    "  --table=NAME             lock table (default rowlock_locks, or [rowlock] table=)\n"
    "  --ssl-mode=MODE          DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY\n"
    "  --ssl-ca=FILE            CA certificate file for VERIFY_CA/VERIFY_IDENTITY\n"
    "  --connect-timeout=SECS   connect timeout in seconds (default 10)\n"
    "  --single-node            all lock traffic goes to one Galera node: allows the for-update\n"
    "                           strategy on a cluster (also [rowlock] single-node=1)\n"
    "HOST may list several servers, tried in order at every (re)connect, for failover:\n"
    "  --host=db1,db2:3307,[::1]:3308  (also host= in an option file)\n";

/* ---- small helpers ------------------------------------------------------- */

static void secure_zero(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

static int cc_own(cli_conn *cc, char *s)
{
    if ((size_t)cc->nowned >= sizeof cc->owned / sizeof cc->owned[0])
        return -1;
    cc->owned[cc->nowned++] = s;
    return 0;
}

double cli_parse_seconds(const char *s)
{
    /* digits [ "." digits ] or "." digits; nothing else (no sign, exponent, hex, inf). */
    const char *p = s;
    double v = 0.0, scale = 0.1;
    int digits = 0;

    if (s == NULL || *s == '\0')
        return -1;
    while (*p >= '0' && *p <= '9') {
        v = v * 10.0 + (double)(*p - '0');
        digits++;
        p++;
        if (v > 1e9)
            return -1;
    }
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') {
            v += scale * (double)(*p - '0');
            scale /= 10.0;
            digits++;
            p++;
        }
    }
    if (*p != '\0' || digits == 0)
        return -1;
    return v;
}

int cli_parse_uint(const char *s, unsigned long long min, unsigned long long max,
                   unsigned long long *out)
{
    unsigned long long v = 0;
    const char *p = s;

    if (s == NULL || *s == '\0')
        return -1;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        if (v > (ULLONG_MAX - 9) / 10)
            return -1;
        v = v * 10 + (unsigned long long)(*p - '0');
    }
    if (v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_pause(const char *s, int64_t *out)
{
    unsigned long long ms = 0;
    if (s != NULL && strcmp(s, "auto") == 0) {
        *out = ROWLOCK_REAP_PAUSE_AUTO;
        return 0;
    }
    if (cli_parse_uint(s, 0, 60000, &ms) != 0)
        return -1;
    *out = (int64_t)ms;
    return 0;
}

/* Length of the valid UTF-8 sequence at s (1-4), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
            return 0;
        if (c == 0xE0 && s[1] < 0xA0)
            return 0; /* overlong */
        if (c == 0xED && s[1] >= 0xA0)
            return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && s[1] < 0x90)
            return 0;
        if (c == 0xF4 && s[1] >= 0x90)
            return 0;
        return 4;
    }
    return 0;
}

/* The code point of the valid n-byte sequence at s when JSON output
 * shows it as \uXXXX (the set rowlock_escape() escapes: C1 controls, line
 * and paragraph separators, bidirectional controls), else 0. */
static uint32_t json_escaped_code_point(const unsigned char *s, size_t n)
{
    uint32_t cp;
    if (n == 2)
        cp = (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
    else if (n == 3)
        cp = (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    else
        return 0;
    if ((cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
        (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069))
        return cp;
    return 0;
}

void cli_json_string(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");

    fputc('"', f);
    while (*s) {
        unsigned char c = *s;
        size_t n;
        switch (c) {
        case '"':  fputs("\\\"", f); s++; continue;
        case '\\': fputs("\\\\", f); s++; continue;
        case '\b': fputs("\\b", f); s++; continue;
        case '\f': fputs("\\f", f); s++; continue;
        case '\n': fputs("\\n", f); s++; continue;
        case '\r': fputs("\\r", f); s++; continue;
        case '\t': fputs("\\t", f); s++; continue;
        default: break;
        }
        if (c < 0x20 || c == 0x7F) {
            fprintf(f, "\\u%04x", (unsigned)c);
            s++;
            continue;
        }
        n = utf8_seq(s);
        if (n == 0) {
            fputs("\\ufffd", f);
            s++;
        } else if (json_escaped_code_point(s, n)) {
            /* Valid JSON as themselves, but shown escaped (the decoded string
             * is the same): the C1 controls, U+2028/U+2029 (which end a line
             * in JavaScript) and the bidirectional controls, as
             * rowlock_escape() shows them, for whoever reads the JSON. */
            fprintf(f, "\\u%04x", (unsigned)json_escaped_code_point(s, n));
            s += n;
        } else {
            fwrite(s, 1, n, f);
            s += n;
        }
    }
    fputc('"', f);
}

char *cli_format_utc_us(char *buf, size_t cap, int64_t us)
{
    struct tm tm;
    time_t t;
    int64_t sec, frac;

    if (cap == 0)
        return buf;
    if (us == 0) {
        snprintf(buf, cap, "-");
        return buf;
    }
    sec = us / 1000000;
    frac = us % 1000000;
    if (frac < 0) {
        frac += 1000000;
        sec -= 1;
    }
    t = (time_t)sec;
    if (gmtime_r(&t, &tm) == NULL) {
        snprintf(buf, cap, "-");
        return buf;
    }
    snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)frac);
    return buf;
}

/* One row of the table, its text wrapped at 79 columns under itself. */
static void exit_row(FILE *f, int value, const char *text)
{
    const int indent = 7, width = 79 - indent;
    fprintf(f, "  %-4d ", value);
    while (*text) {
        size_t len = strlen(text), cut = len;
        if ((int)len > width) {
            cut = (size_t)width;
            while (cut > 0 && text[cut] != ' ')
                cut--;
            if (cut == 0)
                cut = (size_t)width;
        }
        fprintf(f, "%.*s\n", (int)cut, text);
        text += cut;
        while (*text == ' ')
            text++;
        if (*text)
            fprintf(f, "%*s", indent, "");
    }
}

void cli_print_exit_codes(FILE *f)
{
    fputs("Exit status:\n", f);
#define CLI_EXIT_ROW_(name, value, text) exit_row(f, value, text);
    CLI_EXIT_MAP(CLI_EXIT_ROW_)
#undef CLI_EXIT_ROW_
}

int cli_release_retrying(rowlock_lock *l, rowlock_client *c, int64_t budget_ms)
{
    int64_t end = cli_mono_us() + budget_ms * 1000, pause_us = 50000;
    for (;;) {
        int rc = rowlock_release(l);
        if (rc != ROWLOCK_EDB || !rowlock_client_transient(c) || cli_mono_us() + pause_us >= end)
            return rc;
        struct timespec ts = { (time_t)(pause_us / 1000000), (long)(pause_us % 1000000) * 1000 };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        pause_us = pause_us * 2 > 1000000 ? 1000000 : pause_us * 2;
    }
}

/* Library error code -> exit code: the one mapping every command uses. */
int cli_exit_for(int code)
{
    if (code == ROWLOCK_EUNSUPPORTED)
        return CLI_EX_CONFIG; /* e.g. for-update on a Galera node: the database is fine */
    return code == ROWLOCK_EINVALID || code == ROWLOCK_EUPGRADE ? CLI_EX_USAGE : CLI_EX_UNAVAILABLE;
}

/* Print msg with newlines/control characters flattened to spaces (one line). */
static void put_one_line(FILE *f, const char *msg)
{
    for (; *msg; msg++)
        fputc(((unsigned char)*msg < 0x20) ? ' ' : *msg, f);
}

void cli_report(const char *prog, const char *what, const rowlock_client *c, int code)
{
    const char *msg = c ? rowlock_client_errmsg(c) : "";

    fprintf(stderr, "%s: ", prog);
    if (what && *what) {
        put_one_line(stderr, what);
        fputs(": ", stderr);
    }
    put_one_line(stderr, (msg && *msg) ? msg : rowlock_strerror(code));
    fprintf(stderr, " (%s)", rowlock_error_name(code));
    if (code == ROWLOCK_ESCHEMA && (msg == NULL || strstr(msg, "rowlock migrate") == NULL))
        fputs("; run `rowlock migrate` to create or upgrade the lock table", stderr);
    if (code == ROWLOCK_EUNSUPPORTED && msg && strstr(msg, "Galera"))
        fputs("; if all lock traffic goes to one node, say so with --single-node or [rowlock] single-node=1",
              stderr);
    fputc('\n', stderr);
}

/* ---- connection options -------------------------------------------------- */

void cli_conn_init(cli_conn *cc)
{
    rowlock_client_options init = ROWLOCK_CLIENT_OPTIONS_INIT;
    const char *env;

    memset(cc, 0, sizeof *cc);
    cc->opts = init;
    env = getenv("ROWLOCK_DEFAULTS_FILE");
    if (env != NULL && *env != '\0')
        cc->opts.defaults_file = env;
}

static int parse_tls_mode(const char *v, rowlock_tls_mode *out)
{
    static const struct { const char *name; rowlock_tls_mode mode; } modes[] = {
        { "DISABLED", ROWLOCK_TLS_DISABLED },     { "PREFERRED", ROWLOCK_TLS_PREFERRED },
        { "REQUIRED", ROWLOCK_TLS_REQUIRED },     { "VERIFY_CA", ROWLOCK_TLS_VERIFY_CA },
        { "VERIFY_IDENTITY", ROWLOCK_TLS_VERIFY_IDENTITY },
    };
    size_t k;
    for (k = 0; k < sizeof modes / sizeof modes[0]; k++) {
        if (strcasecmp(v, modes[k].name) == 0) {
            *out = modes[k].mode;
            return 0;
        }
    }
    return -1;
}

enum {
    OPT_DEFAULTS_FILE, OPT_HOST, OPT_PORT, OPT_SOCKET, OPT_USER, OPT_DATABASE, OPT_TABLE,
    OPT_SSL_MODE, OPT_SSL_CA, OPT_CONNECT_TIMEOUT, OPT_PASSWORD, OPT_SINGLE_NODE
};

static const struct { const char *name; int id; } conn_opts[] = {
    { "defaults-file", OPT_DEFAULTS_FILE }, { "host", OPT_HOST },
    { "port", OPT_PORT },                   { "socket", OPT_SOCKET },
    { "user", OPT_USER },                   { "database", OPT_DATABASE },
    { "table", OPT_TABLE },                 { "ssl-mode", OPT_SSL_MODE },
    { "ssl-ca", OPT_SSL_CA },               { "connect-timeout", OPT_CONNECT_TIMEOUT },
    { "password", OPT_PASSWORD },           { "single-node", OPT_SINGLE_NODE },
};

int cli_conn_parse(cli_conn *cc, const char *prog, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    const char *name, *eq, *val = NULL;
    size_t nlen, k;
    int id = -1;

    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
        return 0;
    name = arg + 2;
    eq = strchr(name, '=');
    nlen = eq ? (size_t)(eq - name) : strlen(name);
    for (k = 0; k < sizeof conn_opts / sizeof conn_opts[0]; k++) {
        if (strlen(conn_opts[k].name) == nlen && strncmp(name, conn_opts[k].name, nlen) == 0) {
            id = conn_opts[k].id;
            break;
        }
    }
    if (id < 0)
        return 0;

    if (id == OPT_PASSWORD) {
        if (eq != NULL) {
            fprintf(stderr, "%s: a password is never taken from the command line: "
                            "use --password without a value (prompt) or an option file\n", prog);
            return -1;
        }
        cc->prompt_password = 1;
        *i += 1;
        return 1;
    }
    if (id == OPT_SINGLE_NODE) {
        if (eq != NULL) {
            fprintf(stderr, "%s: --single-node takes no value\n", prog);
            return -1;
        }
        cc->opts.flags |= ROWLOCK_CLIENT_SINGLE_NODE;
        *i += 1;
        return 1;
    }

    if (eq != NULL) {
        val = eq + 1;
        *i += 1;
    } else {
        if (*i + 1 >= argc) {
            fprintf(stderr, "%s: option --%s needs a value\n", prog, conn_opts[k].name);
            return -1;
        }
        val = argv[*i + 1];
        *i += 2;
    }

    switch (id) {
    case OPT_DEFAULTS_FILE:
        if (*val == '\0') {
            fprintf(stderr, "%s: --defaults-file needs a file name\n", prog);
            return -1;
        }
        cc->opts.defaults_file = val;
        break;
    case OPT_HOST:
        if (*val == '\0') {
            /* Connector/C takes "" for "not given", and the option files'
             * value would then win over an explicit setting. */
            fprintf(stderr, "%s: --host needs a host name (an empty one would let the option files decide)\n", prog);
            return -1;
        }
        cc->opts.host = val;
        break;
    case OPT_PORT: {
        unsigned long long p;
        if (cli_parse_uint(val, 1, 65535, &p) != 0) {
            fprintf(stderr, "%s: --port: '%s' is not a port number (1-65535)\n", prog, cli_q(val));
            return -1;
        }
        cc->opts.port = (unsigned int)p;
        break;
    }
    case OPT_SOCKET:
        if (*val == '\0') {
            /* Connector/C takes "" for "not given", and the option files'
             * value would then win over an explicit setting. */
            fprintf(stderr, "%s: --socket needs a socket path (an empty one would let the option files decide)\n", prog);
            return -1;
        }
        cc->opts.unix_socket = val;
        break;
    case OPT_USER:
        if (*val == '\0') {
            /* Connector/C takes "" for "not given", and the option files'
             * value would then win over an explicit setting. */
            fprintf(stderr, "%s: --user needs a user name (an empty one would let the option files decide)\n", prog);
            return -1;
        }
        cc->opts.user = val;
        break;
    case OPT_DATABASE:
        if (*val == '\0') {
            /* Connector/C takes "" for "not given", and the option files'
             * value would then win over an explicit setting. */
            fprintf(stderr, "%s: --database needs a database name (an empty one would let the option files decide)\n", prog);
            return -1;
        }
        cc->opts.database = val;
        break;
    case OPT_TABLE:
        if (*val == '\0') {
            fprintf(stderr, "%s: --table needs a table name\n", prog);
            return -1;
        }
        cc->opts.table = val;
        break;
    case OPT_SSL_MODE:
        if (parse_tls_mode(val, &cc->opts.tls_mode) != 0) {
            fprintf(stderr, "%s: --ssl-mode: unknown mode '%s' (DISABLED, PREFERRED, REQUIRED, "
                            "VERIFY_CA, VERIFY_IDENTITY)\n", prog, cli_q(val));
            return -1;
        }
        break;
    case OPT_SSL_CA:
        cc->opts.tls_ca = val;
        break;
    case OPT_CONNECT_TIMEOUT: {
        double s = cli_parse_seconds(val);
        if (s <= 0 || s * 1000.0 > (double)UINT_MAX) {
            fprintf(stderr, "%s: --connect-timeout: '%s' is not a positive number of seconds\n",
                    prog, cli_q(val));
            return -1;
        }
        cc->opts.connect_timeout_ms = (unsigned int)(s * 1000.0 + 0.5);
        if (cc->opts.connect_timeout_ms == 0)
            cc->opts.connect_timeout_ms = 1;
        break;
    }
    default:
        return 0;
    }
    return 1;
}

/* ---- password prompt ----------------------------------------------------- */

static volatile sig_atomic_t prompt_signo;

static void prompt_handler(int signo)
{
    prompt_signo = signo;
}

static int write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/*
 * Read a line from /dev/tty with echo off. Returns a malloc'd string, or NULL
 * (message printed). A signal while reading restores the terminal and is
 * re-raised.
 */
static char *prompt_password(const char *prog)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU };
    enum { NSIGS = sizeof sigs / sizeof sigs[0] };
    struct sigaction sa, old[NSIGS];
    struct termios saved, noecho;
    char *buf = NULL;
    size_t len = 0, cap = 128;
    int fd, k, have_termios = 0, fail = 0, sig = 0;
    const char prompt[] = "Enter password: ";

    fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        fprintf(stderr, "%s: --password: cannot open the terminal to ask for the password: %s\n",
                prog, strerror(errno));
        return NULL;
    }
    buf = malloc(cap);
    if (buf == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        if (close(fd) != 0) { /* nothing more to do */ }
        return NULL;
    }

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = prompt_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: read() returns EINTR */
    prompt_signo = 0;
    for (k = 0; k < NSIGS; k++)
        if (sigaction(sigs[k], &sa, &old[k]) != 0)
            old[k].sa_handler = SIG_DFL;

    if (tcgetattr(fd, &saved) == 0) {
        have_termios = 1;
        noecho = saved;
        noecho.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
        noecho.c_lflag |= ICANON;
        if (tcsetattr(fd, TCSAFLUSH, &noecho) != 0)
            have_termios = 0;
    }
    if (!have_termios) {
        fprintf(stderr, "%s: --password: cannot turn off terminal echo: %s\n", prog,
                strerror(errno));
        fail = 1;
    }
    if (!fail && write_all(fd, prompt, sizeof prompt - 1) != 0) {
        fprintf(stderr, "%s: --password: cannot write to the terminal: %s\n", prog,
                strerror(errno));
        fail = 1;
    }

    while (!fail) {
        char ch;
        ssize_t r = read(fd, &ch, 1);
        if (r < 0) {
            if (errno == EINTR && prompt_signo == 0)
                continue;
            if (errno == EINTR) {
                sig = prompt_signo;
                fail = 1;
                break;
            }
            fprintf(stderr, "%s: --password: cannot read from the terminal: %s\n", prog,
                    strerror(errno));
            fail = 1;
            break;
        }
        if (r == 0 || ch == '\n' || ch == '\r')
            break;
        if (len + 1 >= cap) {
            char *nb;
            if (cap >= 4096) {
                fprintf(stderr, "%s: --password: password too long\n", prog);
                fail = 1;
                break;
            }
            nb = malloc(cap * 2);
            if (nb == NULL) {
                fprintf(stderr, "%s: out of memory\n", prog);
                fail = 1;
                break;
            }
            memcpy(nb, buf, len);
            secure_zero(buf, cap);
            free(buf);
            buf = nb;
            cap *= 2;
        }
        buf[len++] = ch;
    }
    buf[len] = '\0';

    if (have_termios) {
        if (tcsetattr(fd, TCSAFLUSH, &saved) != 0) { /* best effort: nothing more to do */ }
        if (write_all(fd, "\n", 1) != 0) { /* best effort */ }
    }
    if (close(fd) != 0) { /* read-only use: nothing lost */ }
    for (k = 0; k < NSIGS; k++)
        if (sigaction(sigs[k], &old[k], NULL) != 0) { /* keep going */ }

    if (fail) {
        secure_zero(buf, cap);
        free(buf);
        if (sig != 0) {
            if (sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
                fprintf(stderr, "%s: --password: prompt interrupted\n", prog);
            else if (raise(sig) != 0) { /* fall through to the error return */ }
        }
        return NULL;
    }
    return buf;
}

/* ---- connect ------------------------------------------------------------- */

int cli_conn_open(cli_conn *cc, const char *prog, unsigned int extra_flags, rowlock_client **out)
{
    return cli_conn_open_wait(cc, prog, extra_flags, 0, 0, out);
}

/* A signal that asks us to stop is pending (they are blocked while waiting). */
static int stop_pending(void)
{
    sigset_t pend;
    return sigpending(&pend) == 0 &&
           (sigismember(&pend, SIGTERM) || sigismember(&pend, SIGINT) || sigismember(&pend, SIGHUP));
}

int cli_conn_open_wait(cli_conn *cc, const char *prog, unsigned int extra_flags, int64_t wait_ms, int verbose,
                       rowlock_client **out)
{
    rowlock_client *c = NULL;
    int rc;

    *out = NULL;
    if (cc->opts.defaults_file != NULL) {
        struct stat st;
        int e = 0;
        /* O_NONBLOCK: a FIFO without writer must not hang here. */
        int fd = open(cc->opts.defaults_file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        const char *src = cc->opts.defaults_file == getenv("ROWLOCK_DEFAULTS_FILE")
                              ? " (from ROWLOCK_DEFAULTS_FILE)"
                              : "";
        if (fd < 0) {
            fprintf(stderr, "%s: cannot read defaults file '%s'%s: %s\n", prog,
                    cli_q(cc->opts.defaults_file), src, strerror(errno));
            return CLI_EX_USAGE;
        }
        if (fstat(fd, &st) != 0)
            e = errno;
        else if (S_ISDIR(st.st_mode))
            e = EISDIR;
        if (e != 0) {
            fprintf(stderr, "%s: cannot read defaults file '%s'%s: %s\n", prog,
                    cli_q(cc->opts.defaults_file), src, strerror(e));
            if (close(fd) != 0) { /* opened read-only: nothing lost */ }
            return CLI_EX_USAGE;
        }
        if (close(fd) != 0) { /* opened read-only: nothing lost */ }
        cc->opts.flags &= ~(unsigned int)ROWLOCK_CLIENT_READ_DEFAULT_FILES;
    } else {
        cc->opts.flags |= ROWLOCK_CLIENT_READ_DEFAULT_FILES;
    }
    cc->opts.flags |= extra_flags;

    if (cc->prompt_password && cc->opts.password == NULL) {
        char *pw = prompt_password(prog);
        if (pw == NULL)
            return CLI_EX_USAGE;
        if (cc_own(cc, pw) != 0) {
            secure_zero(pw, strlen(pw));
            free(pw);
            fprintf(stderr, "%s: internal error: too many owned strings\n", prog);
            return CLI_EX_USAGE;
        }
        cc->opts.password = pw;
    }

    rc = rowlock_client_new(&c);
    if (rc != 0) {
        fprintf(stderr, "%s: cannot create a client: %s (%s)\n", prog, rowlock_strerror(rc),
                rowlock_error_name(rc));
        return CLI_EX_UNAVAILABLE;
    }
    /* A transient refusal (max_connections reached, server restarting,
     * Galera node not ready: the library's table says which) is waited out
     * with backoff while the caller's wait lasts, as the lock wait itself. */
    int64_t start = cli_mono_us(), pause_us = 50000;
    for (unsigned attempt = 1;; attempt++) {
        rc = rowlock_client_connect(c, &cc->opts);
        /* Only a wait with a deadline: without -w (forever) a server that
         * is down or a wrong host at start is reported at once, as before. */
        if (rc != ROWLOCK_EDB || wait_ms <= 0 || !rowlock_client_transient(c) || stop_pending())
            break;
        int64_t now = cli_mono_us();
        if (wait_ms > 0 && now + pause_us >= start + wait_ms * 1000)
            break;
        if (verbose)
            fprintf(stderr, "%s: waiting for the server (try %u, again in %.3f s): %s\n", prog, attempt,
                    (double)pause_us / 1e6, rowlock_client_errmsg(c));
        struct timespec ts = { (time_t)(pause_us / 1000000), (long)(pause_us % 1000000) * 1000 };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        pause_us = pause_us * 2 > 2000000 ? 2000000 : pause_us * 2;
    }
    if (rc != 0) {
        const char *what = rc == ROWLOCK_ESCHEMA  ? "lock table schema missing or outdated"
                           : rc == ROWLOCK_EINVALID ? "bad connection options"
                                                    : "database unavailable";
        cli_report(prog, what, c, rc);
        rowlock_client_free(c);
        return cli_exit_for(rc);
    }
    *out = c;
    return 0;
}

void cli_conn_free(cli_conn *cc)
{
    int k;
    if (cc == NULL)
        return;
    for (k = 0; k < cc->nowned; k++) {
        if (cc->owned[k] != NULL) {
            secure_zero(cc->owned[k], strlen(cc->owned[k]));
            free(cc->owned[k]);
            cc->owned[k] = NULL;
        }
    }
    cc->nowned = 0;
    cc->opts.password = NULL;
}

/* ---- one option parser for every tool ------------------------------------ */

void cli_opt_init(cli_optparser *p, const char *prog, const char *cmd, int argc, char **argv, int first)
{
    memset(p, 0, sizeof *p);
    p->argc = argc;
    p->argv = argv;
    p->i = first;
    p->prog = prog;
    p->cmd = cmd;
}

/* "PROG: " or "PROG: CMD: " before a message about an option. */
static void opt_prefix(const cli_optparser *p)
{
    if (p->cmd != NULL)
        fprintf(stderr, "%s: %s: ", p->prog, p->cmd);
    else
        fprintf(stderr, "%s: ", p->prog);
}

static int short_opt(cli_optparser *p, const cli_optspec *specs, const char **val)
{
    char c = *p->cluster++;
    const cli_optspec *s;

    for (s = specs; s->id; s++) {
        if (s->shrt == c)
            break;
    }
    if (!s->id) {
        size_t w;
        char one[2] = { c, '\0' };
        char *h = cli_human_str(one, &w);
        opt_prefix(p);
        fprintf(stderr, "unknown option '-%s'\n", h ? h : "?");
        free(h);
        return CLI_OP_ERR;
    }
    if (s->has_arg) {
        if (*p->cluster != '\0') {
            *val = p->cluster;
        } else if (p->i < p->argc) {
            *val = p->argv[p->i++];
        } else {
            opt_prefix(p);
            fprintf(stderr, "option '-%c' needs a value\n", c);
            return CLI_OP_ERR;
        }
        p->cluster = NULL;
    }
    if (p->cluster != NULL && *p->cluster == '\0')
        p->cluster = NULL;
    return s->id;
}

int cli_next_opt(cli_optparser *p, const cli_optspec *specs, cli_conn *cc, const char **val)
{
    const char *a, *name, *eq;
    size_t nlen;
    const cli_optspec *s;

    *val = NULL;
    if (p->cluster != NULL)
        return short_opt(p, specs, val);
    if (p->i >= p->argc)
        return CLI_OP_END;
    a = p->argv[p->i];
    if (strcmp(a, "--") == 0) {
        p->i++;
        p->dashdash = 1;
        return CLI_OP_END;
    }
    if (a[0] != '-' || a[1] == '\0')
        return CLI_OP_END;
    if (a[1] != '-') {
        p->cluster = a + 1;
        p->i++;
        return short_opt(p, specs, val);
    }
    if (cc != NULL) {
        int r = cli_conn_parse(cc, p->prog, p->argc, p->argv, &p->i);
        if (r < 0)
            return CLI_OP_ERR;
        if (r > 0)
            return CLI_OP_CONN;
    }
    name = a + 2;
    eq = strchr(name, '=');
    nlen = eq ? (size_t)(eq - name) : strlen(name);
    for (s = specs; s->id; s++) {
        if (s->lng && strlen(s->lng) == nlen && strncmp(s->lng, name, nlen) == 0)
            break;
    }
    if (!s->id) {
        /* The name only, never a value (it could be a secret), escaped. */
        size_t w;
        char *only = strndup(a, 2 + nlen);
        char *h = only ? cli_human_str(only, &w) : NULL;
        opt_prefix(p);
        fprintf(stderr, "unknown option '%s'\n", h ? h : "?");
        free(h);
        free(only);
        return CLI_OP_ERR;
    }
    p->i++;
    if (s->has_arg) {
        if (eq) {
            *val = eq + 1;
        } else if (p->i < p->argc) {
            *val = p->argv[p->i++];
        } else {
            opt_prefix(p);
            fprintf(stderr, "option '--%s' needs a value\n", s->lng);
            return CLI_OP_ERR;
        }
    } else if (eq) {
        opt_prefix(p);
        fprintf(stderr, "option '--%s' takes no value\n", s->lng);
        return CLI_OP_ERR;
    }
    return s->id;
}

int cli_check_name(const char *prog, const char *cmd, const char *name)
{
    const char *why = NULL;
    if (rowlock_name_check(name, &why) != 0) {
        fprintf(stderr, "%s: %s: bad lock name: %s\n", prog, cmd,
                why ? why : "must be 1-255 bytes of UTF-8");
        return -1;
    }
    return 0;
}

/* ---- output and time ------------------------------------------------------ */

int64_t cli_mono_us(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0; /* CLOCK_MONOTONIC cannot fail on Linux */
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

char *cli_human_str(const char *s, size_t *width)
{
    /* rowlock_escape: the one escaping of the library and every tool. */
    size_t n = strlen(s), cap = n * 6 + 4, w = 0;
    char *out = malloc(cap);

    if (out == NULL)
        return NULL;
    rowlock_escape(out, cap, s, n);
    for (const unsigned char *p = (const unsigned char *)out; *p; p++)
        if ((*p & 0xC0) != 0x80)
            w++;
    *width = w;
    return out;
}

const char *cli_q(const char *s)
{
    static char bufs[4][1200];
    static unsigned next;
    char *b = bufs[next++ % 4];
    if (s == NULL)
        return "(null)";
    rowlock_escape(b, sizeof bufs[0], s, strlen(s));
    return b;
}

int cli_finish_stdout(const char *prog, int code)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: cannot write output: %s\n", prog, strerror(errno));
        return code == 0 ? CLI_EX_UNAVAILABLE : code;
    }
    return code;
}

/* Called on whichever thread the library reports from (the keeper's too):
 * one fprintf per event, which stdio makes atomic per call. */
static void log_line(const rowlock_event *ev, void *arg)
{
    fprintf(stderr, "%s: %s %s: %s\n", (const char *)arg, rowlock_log_level_name(ev->level),
            rowlock_event_kind_name(ev->kind), ev->message);
}

int cli_log_to_stderr(rowlock_client *c, const char *prog, int min_level)
{
    return rowlock_client_set_log(c, min_level, log_line, (void *)prog);
}
