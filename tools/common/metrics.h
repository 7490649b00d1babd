/*
 * Prometheus text exposition (format 0.0.4) of the lock table, shared by
 * `rowlock metrics` (stdout) and `rowlock-reaper --metrics-file` (a file for
 * node_exporter's textfile collector, replaced atomically).
 *
 * Every metric is named rowlock_*, has # HELP and # TYPE lines and a
 * table="..." label. Label values are escaped as the format says
 * (backslash, double quote, line feed). docs/cli.md lists the metrics.
 */
#ifndef ROWLOCK_TOOLS_COMMON_METRICS_H
#define ROWLOCK_TOOLS_COMMON_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include <rowlock.h>

/* A label value, escaped: \ as \\, " as \", a line feed as \n. */
void cli_prom_label_value(FILE *f, const char *v);

/* # HELP and # TYPE lines of metric `name` (type "gauge" or "counter"). */
void cli_prom_head(FILE *f, const char *name, const char *type, const char *help);

/* The lock table's gauges (rowlock_rows ... rowlock_oldest_stale_age_seconds). */
void cli_metrics_table(FILE *f, const char *table, const rowlock_stats_info *st);

/* The reaper's own metrics. */
typedef struct cli_reaper_metrics {
    uint64_t runs_total;         /* counters: carried over from the previous file */
    uint64_t purged_total;
    uint64_t failures_total;
    double last_run_at_s;        /* this host's clock, s since the epoch */
    double last_run_duration_s;
    uint64_t last_run_purged;
    int last_run_ok;
    int last_run_complete;
} cli_reaper_metrics;

void cli_metrics_reaper(FILE *f, const char *table, const cli_reaper_metrics *m);

/* The value of series `metric{table="TABLE"}` in the exposition file
 * `path` (a previous run's), or 0 when the file, the line or a valid value
 * is missing. */
uint64_t cli_metrics_prev(const char *path, const char *metric, const char *table);

/* The table label of the previous file's rowlock_reaper_runs_total (a run
 * that could not connect does not know its table otherwise). Returns 1 and
 * fills `table`, or 0. */
int cli_metrics_prev_table(const char *path, char *table, size_t cap);

/* Replace `path` by `len` bytes of `data` atomically: a temporary file in
 * the same directory (PATH.tmp.XXXXXX, which the textfile collector does not
 * read), written, fsync'd, renamed over PATH, then the directory fsync'd.
 * Readable by all (mode 0666 less the umask), as a collector running as
 * another user must read it. Returns 0, or -1 after a one-line message. */
int cli_write_file_atomic(const char *prog, const char *path, const char *data, size_t len);

#endif
