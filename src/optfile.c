/*
 * Reading rowlock's own keys (for example `table=` in [rowlock]) from MySQL
 * option files.
 *
 * Why this file exists: libmysqlclient (MariaDB Connector/C) reads the
 * connection settings from option files itself, but it offers no way to ask
 * it for other keys. So rowlock reads the same files again, in the same
 * order, with the same syntax, and only for the one key it wants.
 *
 * Which files: the order of MariaDB Connector/C (/etc/my.cnf,
 * /etc/mysql/my.cnf, $MARIADB_HOME/my.cnf or else $MYSQL_HOME/my.cnf,
 * $HOME/.my.cnf), or only the explicit defaults file.
 *
 * Syntax: as mysys' load_defaults (what the documented MySQL/MariaDB option
 * file format is):
 *   - blank lines and lines starting with '#' or ';' are ignored;
 *   - "[group]" starts a group (name compared case-sensitively, as
 *     Connector/C does; whitespace inside the brackets is trimmed);
 *   - "key", "key=value", "key = value"; '-' and '_' are the same in keys;
 *   - outside quotes, '#' starts a comment that runs to the end of the line;
 *   - a value wholly enclosed in matching quotes loses them; the escapes
 *     \n \t \r \b \s \" \' \\ are decoded (an unknown escape is kept as is);
 *   - "!include FILE" and "!includedir DIR" (files of DIR ending in ".cnf",
 *     in strcmp order); missing ones are ignored; nesting stops at depth 10
 *     (and after ROWLOCK__OPT_FILES_MAX files, against self-including dirs);
 *   - lines longer than ROWLOCK__OPT_LINE_MAX bytes are skipped entirely.
 * Each included file starts outside any group, and the including file's
 * group continues after the directive. The last occurrence of the key wins.
 *
 * Hostile files: every file (the explicit one, the standard ones, every
 * !include) is opened without blocking (a FIFO with no writer does not hang
 * open()), must be a regular file or a pipe (/dev/zero, /dev/urandom, other
 * devices and sockets are refused with a message naming the file), and is
 * read once into memory, at most ROWLOCK__OPT_FILE_MAX bytes each and
 * ROWLOCK__OPT_TOTAL_MAX in all. So `--defaults-file=<(cat f)` works (the pipe
 * is read once), and an endless file is an error instead of a hang.
 *
 * Files others can write (mode o+w, or g+w and owned by neither us nor
 * root) are refused, as the mariadb client refuses them ("World-writable
 * config file ... is ignored"): such a file could name a plugin directory
 * and make us run its writer's code. Which way the file was found decides
 * how: the defaults file the caller named (--defaults-file), and every file
 * it includes, is an error (the caller asked for exactly that file and must
 * not connect with different settings than it says); a file of the default
 * search list (/etc/my.cnf, ~/.my.cnf, ...) and everything it includes is
 * skipped with a one-line warning on stderr, as mysys does, and the others
 * are still read.
 *
 * Connector/C is never given the user's files: rowlock__opts_render() writes
 * what was read (the keys of the groups Connector/C reads) as one [client]
 * group, with the keys that explicit options supersede left out, and db_connect.c
 * hands that content to Connector/C. One read decides both the connection
 * and [rowlock] table=.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rowlock_int.h"

#define ROWLOCK__OPT_LINE_MAX 4096  /* bytes of a line, without its end of line */
#define ROWLOCK__OPT_DEPTH_MAX 10   /* as mysys: directives ignored at this depth */
#define ROWLOCK__OPT_PATH_MAX 4096
/* Files opened in one lookup at most: with the depth limit alone, a directory
 * that includes itself would be read n^10 times. */
#define ROWLOCK__OPT_FILES_MAX 1000
/* Bytes read from one file, and from all files of one lookup. */
#define ROWLOCK__OPT_FILE_MAX (1024 * 1024)
#define ROWLOCK__OPT_TOTAL_MAX (8 * 1024 * 1024)

typedef struct optctx {
    const char *const *groups; /* NULL-terminated */
    rowlock__opts *out;
    int oom;
    int fatal;      /* a file was refused: out->err says which */
    int named;      /* 1: the files come from a defaults file the caller named */
    unsigned files; /* files opened so far */
    size_t total;   /* bytes read so far */
    char line[ROWLOCK__OPT_LINE_MAX + 1];
    char val[ROWLOCK__OPT_LINE_MAX + 1];
} optctx;

static int opt_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static int key_equal(const char *a, size_t alen, const char *b)
{
    size_t i;
    for (i = 0; i < alen; i++) {
        char ca = a[i], cb = b[i];
        if (cb == '\0')
            return 0;
        if (ca == '_')
            ca = '-';
        if (cb == '_')
            cb = '-';
        if (ca != cb)
            return 0;
    }
    return b[alen] == '\0';
}

/* Cut the line at a '#' that is not inside quotes (mysys' remove_end_comment). */
static void cut_end_comment(char *p)
{
    char quote = 0, escape = 0;
    for (; *p; p++) {
        if ((*p == '\'' || *p == '"') && !escape) {
            if (!quote)
                quote = *p;
            else if (quote == *p)
                quote = 0;
        }
        if (!quote && *p == '#') {
            *p = '\0';
            return;
        }
        escape = (char)(quote && *p == '\\' && !escape);
    }
}

/* Decode the value [v, end) into ctx->val: surrounding quotes removed,
 * escapes decoded. Returns its length. */
static size_t decode_value(optctx *ctx, const char *v, const char *end)
{
    char *o = ctx->val;
    while (v < end && opt_space((unsigned char)*v))
        v++;
    while (end > v && opt_space((unsigned char)end[-1]))
        end--;
    if (v < end && (*v == '"' || *v == '\'') && v + 1 < end && end[-1] == *v) {
        v++;
        end--;
    }
    for (; v < end; v++) {
        if (*v == '\\' && v != end - 1) {
            switch (*++v) {
            case 'n': *o++ = '\n'; break;
            case 't': *o++ = '\t'; break;
            case 'r': *o++ = '\r'; break;
            case 'b': *o++ = '\b'; break;
            case 's': *o++ = ' '; break;
            case '"': *o++ = '"'; break;
            case '\'': *o++ = '\''; break;
            case '\\': *o++ = '\\'; break;
            default:
                *o++ = '\\';
                *o++ = *v;
                break;
            }
        } else {
            *o++ = *v;
        }
    }
    *o = '\0';
    return (size_t)(o - ctx->val);
}

static void set_err(optctx *ctx, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void set_err(optctx *ctx, const char *fmt, ...)
{
    va_list ap;
    if (ctx->fatal)
        return; /* the first reason is the one to tell */
    ctx->fatal = 1;
    va_start(ap, fmt);
    vsnprintf(ctx->out->err, sizeof ctx->out->err, fmt, ap);
    va_end(ap);
}

/* Add (group, key, value) to the result. */
static void add_entry(optctx *ctx, int group, const char *key, size_t klen, const char *val, size_t vlen, int has_val)
{
    rowlock__opts *o = ctx->out;
    rowlock__optent *e;
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 16;
        rowlock__optent *v = realloc(o->v, cap * sizeof *v);
        if (!v) {
            ctx->oom = 1;
            return;
        }
        o->v = v;
        o->cap = cap;
    }
    e = &o->v[o->n];
    e->group = group;
    e->has_val = has_val;
    e->key = malloc(klen + 1);
    e->val = malloc(vlen + 1);
    if (!e->key || !e->val) {
        free(e->key);
        free(e->val);
        ctx->oom = 1;
        return;
    }
    for (size_t i = 0; i < klen; i++)
        e->key[i] = key[i] == '_' ? '-' : key[i];
    e->key[klen] = '\0';
    memcpy(e->val, val, vlen);
    e->val[vlen] = '\0';
    o->n++;
}

/* If `p` is `word` followed by whitespace, return the trimmed argument
 * (in place), or NULL (not this directive, or no argument). */
static char *directive_arg(char *p, const char *word)
{
    size_t n = strlen(word);
    char *end;
    if (strncmp(p, word, n) != 0 || !opt_space((unsigned char)p[n]))
        return NULL;
    p += n;
    while (opt_space((unsigned char)*p))
        p++;
    end = p + strlen(p);
    while (end > p && opt_space((unsigned char)end[-1]))
        end--;
    *end = '\0';
    return *p ? p : NULL;
}

static int read_file(optctx *ctx, const char *path, unsigned depth, int explicit_file);

/* Can someone other than us (or root) change what the file says? Others may
 * write it (o+w), or a group may and the file is neither ours nor root's (a
 * file of ours or root's that our group may write is as safe as our own
 * umask 002 files). Pipes count too: a FIFO in /tmp with mode 666 is a file
 * anyone can feed; `<(cat f)` is a pipe of ours with mode 600. */
static int writable_by_others(const struct stat *st)
{
    if (st->st_mode & S_IWOTH)
        return 1;
    return (st->st_mode & S_IWGRP) && st->st_uid != geteuid() && st->st_uid != 0;
}

static int cnf_filter(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n >= 4 && strcmp(d->d_name + n - 4, ".cnf") == 0;
}

static int name_cmp(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static void read_dir(optctx *ctx, const char *dir, unsigned depth)
{
    struct dirent **names = NULL;
    char *path;
    int n, i;

    n = scandir(dir, &names, cnf_filter, name_cmp);
    if (n < 0) {
        if (errno == ENOMEM)
            ctx->oom = 1;
        return; /* a missing directory is ignored */
    }
    path = malloc(ROWLOCK__OPT_PATH_MAX);
    if (!path)
        ctx->oom = 1;
    for (i = 0; i < n; i++) {
        if (path && !ctx->oom && !ctx->fatal) {
            int len = snprintf(path, ROWLOCK__OPT_PATH_MAX, "%s/%s", dir, names[i]->d_name);
            if (len > 0 && len < ROWLOCK__OPT_PATH_MAX)
                (void)read_file(ctx, path, depth, 0);
        }
        free(names[i]);
    }
    free(names);
    free(path);
}

/* Index of `name` [p, end) in ctx->groups, or -1. */
static int group_index(const optctx *ctx, const char *p, const char *end)
{
    for (int i = 0; ctx->groups[i]; i++)
        if ((size_t)(end - p) == strlen(ctx->groups[i]) && strncmp(p, ctx->groups[i], (size_t)(end - p)) == 0)
            return i;
    return -1;
}

/* Parse the content [buf, buf + len) of a file. `depth` is its nesting level (0: top). */
static void parse_buffer(optctx *ctx, const char *buf, size_t len, unsigned depth)
{
    int found_group = 0, group = -1;
    const char *pos = buf, *lim = buf + len;

    while (!ctx->oom && !ctx->fatal && pos < lim) {
        const char *nl = memchr(pos, '\n', (size_t)(lim - pos));
        const char *eol = nl ? nl : lim;
        size_t n = (size_t)(eol - pos);
        char *p, *eq, *kend;
        const char *next = nl ? nl + 1 : lim;
        if (n > 0 && pos[n - 1] == '\r')
            n--;
        if (n > ROWLOCK__OPT_LINE_MAX) {
            pos = next; /* too long: an error for that line only */
            continue;
        }
        memcpy(ctx->line, pos, n);
        ctx->line[n] = '\0'; /* a NUL inside the line ends it, as with fgets */
        pos = next;

        for (p = ctx->line; opt_space((unsigned char)*p); p++)
            ;
        if (*p == '#' || *p == ';' || *p == '\0')
            continue;

        if (*p == '!') {
            char *arg, *copy;
            int is_dir = 0;
            if (depth >= ROWLOCK__OPT_DEPTH_MAX)
                continue;
            for (p++; opt_space((unsigned char)*p); p++)
                ;
            if ((arg = directive_arg(p, "includedir")) != NULL)
                is_dir = 1;
            else if ((arg = directive_arg(p, "include")) == NULL)
                continue; /* unknown directive or no argument */
            copy = strdup(arg);
            if (!copy) {
                ctx->oom = 1;
                break;
            }
            if (is_dir)
                read_dir(ctx, copy, depth + 1);
            else
                (void)read_file(ctx, copy, depth + 1, 0); /* a missing include is ignored */
            free(copy);
            continue;
        }

        if (*p == '[') {
            char *end = strchr(++p, ']');
            found_group = 1;
            if (!end) {
                group = -1; /* malformed header: nothing until the next one */
                continue;
            }
            while (p < end && opt_space((unsigned char)*p))
                p++;
            while (end > p && opt_space((unsigned char)end[-1]))
                end--;
            group = group_index(ctx, p, end);
            continue;
        }
        if (!found_group || group < 0)
            continue; /* options before any group are an error in mysys */

        cut_end_comment(p);
        eq = strchr(p, '=');
        kend = eq ? eq : p + strlen(p);
        while (kend > p && opt_space((unsigned char)kend[-1]))
            kend--;
        if (kend == p)
            continue;
        if (eq) {
            size_t vlen = decode_value(ctx, eq + 1, eq + 1 + strlen(eq + 1));
            add_entry(ctx, group, p, (size_t)(kend - p), ctx->val, vlen, 1);
        } else {
            add_entry(ctx, group, p, (size_t)(kend - p), "", 0, 0); /* a flag */
        }
    }
}

/* Read all of fd (at most `cap` bytes: more is EFBIG). */
static char *slurp(int fd, size_t cap, size_t *len)
{
    size_t n = 0, alloc = 8192;
    char *buf = malloc(alloc);
    if (!buf)
        return NULL;
    for (;;) {
        ssize_t r;
        if (n == alloc) {
            char *b;
            if (alloc > cap) {
                free(buf);
                errno = EFBIG;
                return NULL;
            }
            b = realloc(buf, alloc * 2);
            if (!b) {
                free(buf);
                errno = ENOMEM;
                return NULL;
            }
            buf = b;
            alloc *= 2;
        }
        r = read(fd, buf + n, alloc - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN) {
            /* A pipe opened without blocking whose writer is still
             * writing: wait for it (a FIFO with no writer reads as empty). */
            struct pollfd pfd = { fd, POLLIN, 0 };
            (void)poll(&pfd, 1, -1);
            continue;
        }
        if (r < 0) {
            int e = errno;
            free(buf);
            errno = e;
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > cap) {
            free(buf);
            errno = EFBIG;
            return NULL;
        }
    }
    *len = n;
    return buf;
}

/* Returns 0 read, -1 not read (errno set; ctx->fatal if it must not be
 * ignored). `explicit_file`: the defaults file itself, whose absence is an
 * error the caller reports. */
static int read_file(optctx *ctx, const char *path, unsigned depth, int explicit_file)
{
    struct stat st;
    char *buf;
    char shown[300];
    size_t len = 0;
    int fd;

    if (ctx->files >= ROWLOCK__OPT_FILES_MAX) {
        errno = ELOOP;
        return -1;
    }
    ctx->files++;
    /* O_NONBLOCK: opening a FIFO with no writer must not hang. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        errno = EISDIR;
        return -1;
    }
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
        close(fd);
        rowlock_escape(shown, sizeof shown, path, strlen(path));
        set_err(ctx, "option file %s%s is not a regular file or a pipe (devices such as /dev/zero are refused)",
                shown, depth > 0 ? " (included)" : "");
        errno = EINVAL;
        return -1;
    }
    if (writable_by_others(&st)) {
        /* Anyone who can write the file can make us load a plugin of theirs
         * (plugin-dir=, default-auth=) or talk to their server. The rule is
         * mysys' (the mariadb client's): a named file is an error, a file
         * met in the default search list is skipped with a warning. */
        close(fd);
        rowlock_escape(shown, sizeof shown, path, strlen(path));
        if (ctx->named) {
            set_err(ctx, "option file %s%s is writable by other users (mode %04o, owner uid %ld): refused "
                         "(run chmod go-w on it to use it)",
                    shown, depth > 0 ? " (included)" : "", (unsigned)(st.st_mode & 07777), (long)st.st_uid);
        } else {
            fprintf(stderr, "rowlock: warning: option file %s%s is writable by other users (mode %04o): ignored\n",
                    shown, depth > 0 ? " (included)" : "", (unsigned)(st.st_mode & 07777));
        }
        errno = EPERM;
        return -1;
    }
    buf = slurp(fd, ROWLOCK__OPT_FILE_MAX, &len);
    if (!buf) {
        int e = errno;
        close(fd);
        if (e == ENOMEM)
            ctx->oom = 1;
        rowlock_escape(shown, sizeof shown, path, strlen(path));
        if (e == EFBIG)
            set_err(ctx, "option file %s is larger than %d bytes: refused", shown, ROWLOCK__OPT_FILE_MAX);
        else if (e != ENOMEM && !explicit_file)
            set_err(ctx, "cannot read option file %s: %s", shown, strerror(e));
        errno = e;
        return -1;
    }
    close(fd);
    ctx->total += len;
    if (ctx->total > ROWLOCK__OPT_TOTAL_MAX) {
        rowlock_escape(shown, sizeof shown, path, strlen(path));
        set_err(ctx, "option files: more than %d bytes in all (last read: %s): refused", ROWLOCK__OPT_TOTAL_MAX,
                shown);
        free(buf);
        errno = EFBIG;
        return -1;
    }
    parse_buffer(ctx, buf, len, depth);
    memset(buf, 0, len); /* it may hold a password */
    free(buf);
    return 0;
}

/* Read a standard file if present; like Connector/C, skip it silently if it
 * is missing or not readable. */
static void read_standard(optctx *ctx, const char *dir, const char *name)
{
    char path[ROWLOCK__OPT_PATH_MAX];
    int len = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (len > 0 && len < (int)sizeof(path))
        (void)read_file(ctx, path, 0, 0);
}

void rowlock__opts_free(rowlock__opts *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < o->n; i++) {
        memset(o->v[i].val, 0, strlen(o->v[i].val)); /* may be a password */
        free(o->v[i].key);
        free(o->v[i].val);
    }
    free(o->v);
    o->v = NULL;
    o->n = o->cap = 0;
}

int rowlock__opts_load(rowlock__opts *o, const char *defaults_file, int read_default_files,
                       const char *const *groups)
{
    optctx *ctx;
    int rc = 0;

    memset(o, 0, sizeof *o);
    if (!groups) {
        errno = EINVAL;
        return -1;
    }
    if (!defaults_file && !read_default_files)
        return 0;
    ctx = malloc(sizeof(*ctx));
    if (!ctx) {
        snprintf(o->err, sizeof o->err, "option files: out of memory");
        errno = ENOMEM;
        return -1;
    }
    ctx->groups = groups;
    ctx->out = o;
    ctx->oom = 0;
    ctx->fatal = 0;
    ctx->named = defaults_file != NULL;
    ctx->files = 0;
    ctx->total = 0;

    if (defaults_file) {
        if (read_file(ctx, defaults_file, 0, 1) != 0) {
            int e = errno;
            if (!ctx->fatal && !ctx->oom) {
                char shown[300];
                rowlock_escape(shown, sizeof shown, defaults_file, strlen(defaults_file));
                snprintf(o->err, sizeof o->err, "cannot read option file %s: %s", shown, strerror(e));
            }
            errno = e;
            rc = -1;
        }
    } else {
        /* Connector/C: /etc, /etc/mysql, then MARIADB_HOME or else MYSQL_HOME
         * (a directory already in the list is not read twice), then HOME. */
        const char *home = getenv("MARIADB_HOME");
        if (!home)
            home = getenv("MYSQL_HOME");
        read_standard(ctx, "/etc", "my.cnf");
        read_standard(ctx, "/etc/mysql", "my.cnf");
        if (home && *home && strcmp(home, "/etc") != 0 && strcmp(home, "/etc/mysql") != 0)
            read_standard(ctx, home, "my.cnf");
        home = getenv("HOME");
        if (home && *home)
            read_standard(ctx, home, ".my.cnf");
    }
    if (ctx->oom) {
        snprintf(o->err, sizeof o->err, "option files: out of memory");
        errno = ENOMEM;
        rc = -1;
    } else if (ctx->fatal) {
        if (rc == 0)
            errno = EINVAL;
        rc = -1;
    }
    if (rc)
        rowlock__opts_free(o);
    free(ctx);
    return rc;
}

const rowlock__optent *rowlock__opts_find(const rowlock__opts *o, int group, const char *key)
{
    const rowlock__optent *found = NULL;
    for (size_t i = 0; o && i < o->n; i++)
        if ((group < 0 || o->v[i].group == group) && key_equal(o->v[i].key, strlen(o->v[i].key), key))
            found = &o->v[i];
    return found;
}

/* A key Connector/C could read back as a key: letters, digits, '-'. */
static int plain_key(const char *k)
{
    if (!*k)
        return 0;
    for (; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') || *k == '-'))
            return 0;
    return 1;
}

char *rowlock__opts_render(const rowlock__opts *o, int (*drop)(const char *key, void *arg), void *arg,
                           size_t *len, char *err, size_t errcap)
{
    size_t cap = 16, n;
    char *out;
    for (size_t i = 0; i < o->n; i++)
        cap += strlen(o->v[i].key) + 2 * strlen(o->v[i].val) + 8;
    out = malloc(cap);
    if (!out) {
        snprintf(err, errcap, "option files: out of memory");
        return NULL;
    }
    n = (size_t)sprintf(out, "[client]\n");
    for (size_t i = 0; i < o->n; i++) {
        const rowlock__optent *e = &o->v[i];
        size_t start = n;
        if (!plain_key(e->key) || (drop && drop(e->key, arg)))
            continue;
        n += (size_t)sprintf(out + n, "%s", e->key);
        if (e->has_val) {
            /* Quoted and escaped, so Connector/C decodes exactly this value. */
            out[n++] = '=';
            out[n++] = '"';
            for (const char *v = e->val; *v; v++) {
                char esc = *v == '\n' ? 'n' : *v == '\r' ? 'r' : *v == '\t' ? 't' : *v == '\b' ? 'b'
                         : *v == '\\' ? '\\' : *v == '"' ? '"' : 0;
                if (esc) {
                    out[n++] = '\\';
                    out[n++] = esc;
                } else {
                    out[n++] = *v;
                }
            }
            out[n++] = '"';
        }
        out[n++] = '\n';
        if (n - start > ROWLOCK__OPT_LINE_MAX - 100) {
            /* Connector/C reads lines of up to 4095 bytes: a longer one
             * would be split into two, the rest read as another option. */
            snprintf(err, errcap, "option files: the value of %.64s is too long (%zu bytes)", e->key, n - start);
            memset(out, 0, n);
            free(out);
            return NULL;
        }
    }
    out[n] = '\0';
    *len = n;
    return out;
}

int rowlock__optfile_get(const char *defaults_file, int read_default_files, const char *group,
                         const char *key, char *out, size_t outcap)
{
    rowlock__opts o;
    const char *groups[2];
    const rowlock__optent *e;
    int rc = 0;

    if (!group || !key || (!out && outcap)) {
        errno = EINVAL;
        return -1;
    }
    groups[0] = group;
    groups[1] = NULL;
    if (rowlock__opts_load(&o, defaults_file, read_default_files, groups) != 0)
        return -1;
    e = rowlock__opts_find(&o, 0, key);
    if (e) {
        size_t vlen = strlen(e->val);
        if (vlen >= outcap) {
            errno = ENAMETOOLONG;
            rc = -1;
        } else {
            memcpy(out, e->val, vlen + 1);
            rc = 1;
        }
    }
    rowlock__opts_free(&o);
    return rc;
}
