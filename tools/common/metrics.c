/*
 * Prometheus text exposition of the lock table and of the reaper's runs
 * (cli_metrics.h). One writer for both tools, so the names and labels agree.
 */
#include "metrics.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cli_prom_label_value(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            fputs("\\\\", f);
        else if (*v == '"')
            fputs("\\\"", f);
        else if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

void cli_prom_head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{table="T"[,mode="M"]} */
static void series(FILE *f, const char *name, const char *table, const char *mode)
{
    fprintf(f, "%s{table=\"", name);
    cli_prom_label_value(f, table);
    if (mode)
        fprintf(f, "\",mode=\"%s", mode);
    fputs("\"} ", f);
}

static void u64_line(FILE *f, const char *name, const char *table, const char *mode, uint64_t v)
{
    series(f, name, table, mode);
    fprintf(f, "%" PRIu64 "\n", v);
}

static void sec_line(FILE *f, const char *name, const char *table, double v)
{
    series(f, name, table, NULL);
    fprintf(f, "%.3f\n", v);
}

void cli_metrics_table(FILE *f, const char *table, const rowlock_stats_info *st)
{
    cli_prom_head(f, "rowlock_rows", "gauge", "Rows of the lock table: names used and not purged.");
    u64_line(f, "rowlock_rows", table, NULL, st->rows);
    cli_prom_head(f, "rowlock_names_held", "gauge",
                  "Names held now by at least one live grant (for-update holders are row locks, not counted).");
    u64_line(f, "rowlock_names_held", table, NULL, st->names_held);
    cli_prom_head(f, "rowlock_holders", "gauge",
                  "Live grants by mode: exclusive holders, shared holders of shared locks and semaphores.");
    u64_line(f, "rowlock_holders", table, "exclusive", st->holders_exclusive);
    u64_line(f, "rowlock_holders", table, "shared", st->holders_shared);
    cli_prom_head(f, "rowlock_waiters", "gauge",
                  "Queued waiters of shared locks and semaphores by mode (waiters of one-row exclusive locks "
                  "wait on server named locks and are not counted).");
    u64_line(f, "rowlock_waiters", table, "exclusive", st->waiters_exclusive);
    u64_line(f, "rowlock_waiters", table, "shared", st->waiters_shared);
    cli_prom_head(f, "rowlock_stale_rows", "gauge",
                  "Grants whose lease ended (holders that crashed), not yet purged by rowlock-reaper.");
    u64_line(f, "rowlock_stale_rows", table, NULL, st->stale);
    cli_prom_head(f, "rowlock_oldest_lease_age_seconds", "gauge",
                  "Seconds since the oldest live grant was acquired, by the server's clock (0: none held).");
    sec_line(f, "rowlock_oldest_lease_age_seconds", table, (double)st->oldest_grant_age_ms / 1000.0);
    cli_prom_head(f, "rowlock_oldest_stale_age_seconds", "gauge",
                  "Seconds since the oldest stale lease ended, by the server's clock (0: none).");
    sec_line(f, "rowlock_oldest_stale_age_seconds", table, (double)st->oldest_stale_age_ms / 1000.0);
}

void cli_metrics_reaper(FILE *f, const char *table, const cli_reaper_metrics *m)
{
    cli_prom_head(f, "rowlock_reaper_runs_total", "counter",
                  "Reaper runs that wrote this file (carried over from the file's previous contents).");
    u64_line(f, "rowlock_reaper_runs_total", table, NULL, m->runs_total);
    cli_prom_head(f, "rowlock_reaper_failures_total", "counter",
                  "Reaper runs that failed (database unavailable, schema missing), carried over likewise.");
    u64_line(f, "rowlock_reaper_failures_total", table, NULL, m->failures_total);
    cli_prom_head(f, "rowlock_reaper_purged_rows_total", "counter",
                  "Stale rows the reaper purged, carried over likewise.");
    u64_line(f, "rowlock_reaper_purged_rows_total", table, NULL, m->purged_total);
    cli_prom_head(f, "rowlock_reaper_last_run_timestamp_seconds", "gauge",
                  "When the last run ended, this host's clock, seconds since the epoch.");
    sec_line(f, "rowlock_reaper_last_run_timestamp_seconds", table, m->last_run_at_s);
    cli_prom_head(f, "rowlock_reaper_last_run_success", "gauge", "1 if the last run purged without an error, else 0.");
    u64_line(f, "rowlock_reaper_last_run_success", table, NULL, m->last_run_ok ? 1 : 0);
    cli_prom_head(f, "rowlock_reaper_last_run_complete", "gauge",
                  "1 if the last run left no purgeable row (0: stopped by --max-seconds, or failed).");
    u64_line(f, "rowlock_reaper_last_run_complete", table, NULL, m->last_run_complete ? 1 : 0);
    cli_prom_head(f, "rowlock_reaper_last_run_purged_rows", "gauge", "Stale rows the last run purged.");
    u64_line(f, "rowlock_reaper_last_run_purged_rows", table, NULL, m->last_run_purged);
    cli_prom_head(f, "rowlock_reaper_last_run_duration_seconds", "gauge", "How long the last run's purge took.");
    sec_line(f, "rowlock_reaper_last_run_duration_seconds", table, m->last_run_duration_s);
}

/* The previous file, if it is a regular file of at most 1 MiB. */
static FILE *open_prev(const char *path)
{
    struct stat sb;
    FILE *f;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0)
        return NULL;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > (1 << 20) || (f = fdopen(fd, "r")) == NULL) {
        close(fd);
        return NULL;
    }
    return f;
}

int cli_metrics_prev_table(const char *path, char *table, size_t cap)
{
    static const char want[] = "rowlock_reaper_runs_total{table=\"";
    char line[512];
    FILE *f = open_prev(path);
    int found = 0;

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, want, sizeof want - 1) == 0) {
            char *t = line + sizeof want - 1, *e = strchr(t, '"');
            size_t n = e ? (size_t)(e - t) : 0;
            /* A table name needs no escaping: letters, digits and _ only. */
            if (n > 0 && n < cap && strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == n) {
                memcpy(table, t, n);
                table[n] = '\0';
                found = 1;
            }
            break;
        }
    }
    fclose(f);
    return found;
}

uint64_t cli_metrics_prev(const char *path, const char *metric, const char *table)
{
    char want[256], line[512];
    FILE *f;
    uint64_t v = 0;

    if (snprintf(want, sizeof want, "%s{table=\"%s\"} ", metric, table) >= (int)sizeof want)
        return 0;
    if ((f = open_prev(path)) == NULL)
        return 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, want, strlen(want)) == 0) {
            char *end;
            double d;
            errno = 0;
            d = strtod(line + strlen(want), &end);
            if (errno == 0 && end != line + strlen(want) && (*end == '\n' || *end == '\0') && isfinite(d) && d >= 0 &&
                d < 1.8e19)
                v = (uint64_t)d;
            break;
        }
    }
    fclose(f);
    return v;
}

int cli_write_file_atomic(const char *prog, const char *path, const char *data, size_t len)
{
    size_t pl = strlen(path), off = 0;
    char *tmp = malloc(pl + 16), *dir = NULL, *slash;
    const char *what = "create a temporary file beside";
    mode_t um;
    int fd = -1, dfd, err = 0;

    if (tmp == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return -1;
    }
    snprintf(tmp, pl + 16, "%s.tmp.XXXXXX", path);
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        goto fail;
    um = umask(0);
    umask(um);
    what = "write";
    if (fchmod(fd, 0666 & ~um) != 0)
        goto fail_unlink;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            goto fail_unlink;
        off += (size_t)w;
    }
    if (fsync(fd) != 0)
        goto fail_unlink;
    if (close(fd) != 0) {
        fd = -1;
        goto fail_unlink;
    }
    fd = -1;
    what = "rename a temporary file over";
    if (rename(tmp, path) != 0)
        goto fail_unlink;
    /* The rename is durable once the directory is. */
    dir = strdup(path);
    if (dir != NULL) {
        slash = strrchr(dir, '/');
        if (slash == NULL)
            strcpy(dir, ".");
        else if (slash == dir)
            dir[1] = '\0';
        else
            *slash = '\0';
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
    }
    free(dir);
    free(tmp);
    return 0;
fail_unlink:
    err = errno;
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    errno = err;
fail:
    err = errno;
    fprintf(stderr, "%s: --metrics-file: cannot %s '%s': %s\n", prog, what, cli_q(path), strerror(err));
    free(tmp);
    return -1;
}
