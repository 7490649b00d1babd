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
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

typedef struct optctx {
    const char *group;
    const char *key;
    int found;
    int oom;
    unsigned files; /* files opened so far */
    size_t vlen;
    /* One line buffer shared by all nesting levels: a file's line is no
     * longer needed once a directive's argument has been copied out. Room
     * for the longest line, "\r\n", the NUL, and one byte to detect more. */
    char line[ROWLOCK__OPT_LINE_MAX + 4];
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

/* Store the value [v, end) decoded: surrounding quotes removed, escapes decoded. */
static void store_value(optctx *ctx, const char *v, const char *end)
{
    char *o = ctx->val;
    while (v < end && opt_space((unsigned char)*v))
        v++;
    while (end > v && opt_space((unsigned char)end[-1]))
        end--;
    if ((*v == '"' || *v == '\'') && v + 1 < end && end[-1] == *v) {
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
    ctx->vlen = (size_t)(o - ctx->val);
    ctx->found = 1;
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

static int read_file(optctx *ctx, const char *path, unsigned depth);

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
        if (path && !ctx->oom) {
            int len = snprintf(path, ROWLOCK__OPT_PATH_MAX, "%s/%s", dir, names[i]->d_name);
            if (len > 0 && len < ROWLOCK__OPT_PATH_MAX)
                (void)read_file(ctx, path, depth);
        }
        free(names[i]);
    }
    free(names);
    free(path);
}

/* Read one line into ctx->line without its end of line. Returns 1 a line,
 * 0 end of file, -1 a line too long (skipped, including its rest). */
static int read_line(optctx *ctx, FILE *f)
{
    size_t n;
    if (!fgets(ctx->line, (int)sizeof(ctx->line), f))
        return 0;
    n = strlen(ctx->line);
    if (n > 0 && ctx->line[n - 1] == '\n') {
        ctx->line[--n] = '\0';
    } else if (!feof(f)) {
        /* The line goes on: drop the rest of it. */
        int c;
        while ((c = getc(f)) != EOF && c != '\n')
            ;
        return -1;
    }
    if (n > 0 && ctx->line[n - 1] == '\r')
        ctx->line[--n] = '\0';
    return n > ROWLOCK__OPT_LINE_MAX ? -1 : 1;
}

/* Parse an open file. `depth` is this file's nesting level (0: top). */
static void parse_file(optctx *ctx, FILE *f, unsigned depth)
{
    int found_group = 0, in_group = 0, r;

    while (!ctx->oom && (r = read_line(ctx, f)) != 0) {
        char *p, *eq, *kend;
        if (r < 0)
            continue; /* too long: an error for that line only */
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
                (void)read_file(ctx, copy, depth + 1); /* a missing include is ignored */
            free(copy);
            continue;
        }

        if (*p == '[') {
            char *end = strchr(++p, ']');
            found_group = 1;
            if (!end) {
                in_group = 0; /* malformed header: nothing until the next one */
                continue;
            }
            while (p < end && opt_space((unsigned char)*p))
                p++;
            while (end > p && opt_space((unsigned char)end[-1]))
                end--;
            in_group = (size_t)(end - p) == strlen(ctx->group) &&
                       strncmp(p, ctx->group, (size_t)(end - p)) == 0;
            continue;
        }
        if (!found_group || !in_group)
            continue; /* options before any group are an error in mysys */

        cut_end_comment(p);
        eq = strchr(p, '=');
        kend = eq ? eq : p + strlen(p);
        while (kend > p && opt_space((unsigned char)kend[-1]))
            kend--;
        if (!key_equal(p, (size_t)(kend - p), ctx->key))
            continue;
        if (eq)
            store_value(ctx, eq + 1, eq + 1 + strlen(eq + 1));
        else
            store_value(ctx, kend, kend); /* a flag: "" */
    }
}

/* Returns 0 read, -1 not readable (errno set). */
static int read_file(optctx *ctx, const char *path, unsigned depth)
{
    struct stat st;
    FILE *f;
    int fd;

    if (ctx->files >= ROWLOCK__OPT_FILES_MAX) {
        errno = ELOOP;
        return -1;
    }
    ctx->files++;
    fd = open(path, O_RDONLY | O_CLOEXEC);
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
    f = fdopen(fd, "r");
    if (!f) {
        int e = errno;
        close(fd);
        if (e == ENOMEM)
            ctx->oom = 1;
        errno = e;
        return -1;
    }
    parse_file(ctx, f, depth);
    if (ferror(f)) {
        int e = errno;
        fclose(f);
        errno = e ? e : EIO;
        return -1;
    }
    fclose(f);
    return 0;
}

/* Read a standard file if present; like Connector/C, skip it silently if it
 * is missing or not readable. */
static void read_standard(optctx *ctx, const char *dir, const char *name)
{
    char path[ROWLOCK__OPT_PATH_MAX];
    int len = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (len > 0 && len < (int)sizeof(path))
        (void)read_file(ctx, path, 0);
}

int rowlock__optfile_get(const char *defaults_file, int read_default_files, const char *group,
                         const char *key, char *out, size_t outcap)
{
    optctx *ctx;
    int rc = 0;

    if (!group || !key || (!out && outcap)) {
        errno = EINVAL;
        return -1;
    }
    if (!defaults_file && !read_default_files)
        return 0;

    ctx = malloc(sizeof(*ctx));
    if (!ctx) {
        errno = ENOMEM;
        return -1;
    }
    ctx->group = group;
    ctx->key = key;
    ctx->found = 0;
    ctx->oom = 0;
    ctx->files = 0;
    ctx->vlen = 0;
    ctx->val[0] = '\0';

    if (defaults_file) {
        if (read_file(ctx, defaults_file, 0) != 0)
            rc = -1; /* errno set by read_file */
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

    if (rc == 0 && ctx->oom) {
        errno = ENOMEM;
        rc = -1;
    } else if (rc == 0 && ctx->found) {
        if (ctx->vlen >= outcap) {
            errno = ENAMETOOLONG;
            rc = -1;
        } else {
            memcpy(out, ctx->val, ctx->vlen + 1);
            rc = 1;
        }
    }
    free(ctx);
    return rc;
}
