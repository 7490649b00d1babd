/*
 * rowlock-reaper — purge stale lock rows (holders that crashed) in small
 * batches. Safe to run from several hosts' crontabs at once: the library
 * re-checks expiry inside each deleting statement, so a live lock is never
 * deleted, and fencing tokens come from a sequence, so they keep increasing.
 *
 *   rowlock-reaper [CONNECTION OPTIONS] [--grace SECONDS] [--batch N]
 *                  [--max-seconds S] [--wait-leases] [--dry-run] [--json]
 *                  [--quiet] [--verbose] [--metrics-file PATH]
 *
 * See docs/cli.md. Uses only the public API (rowlock.h).
 */
#include "common/cli.h"
#include "common/metrics.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <time.h>

static const char PROG[] = "rowlock-reaper";

static const char usage[] =
    "Usage: rowlock-reaper [CONNECTION OPTIONS] [--grace SECONDS] [--batch N]\n"
    "                      [--pause MS|auto] [--max-seconds S] [--wait-leases] [--dry-run]\n"
    "                      [--json] [--quiet] [--verbose] [--metrics-file PATH]\n"
    "\n"
    "Purge stale lock rows: locks whose lease ended more than --grace seconds ago\n"
    "(their holders crashed). Rows are deleted in batches so no statement holds\n"
    "row locks long; a lock that is live when its batch runs is never deleted.\n"
    "Safe to run from several hosts at once.\n"
    "\n"
    "Options:\n"
    "  --grace=SECONDS       purge leases that ended more than SECONDS ago (default 60)\n"
    "  --batch=N             rows per deleting statement (default 1000, 1-100000)\n"
    "  --pause=MS|auto       sleep between batches: auto (the default) as long as the\n"
    "                        last batch took, so a long purge keeps the disk busy about\n"
    "                        half the time; 0 for full speed; else MS milliseconds (at\n"
    "                        most 60000). Slower purges disturb live locks less\n"
    "  --max-seconds=S       start no new batch after S seconds (default: no limit)\n"
    "  --wait-leases         on a Galera cluster: watch held rows whose lease ended by the\n"
    "                        node's clock for one lease on this host's clock (within\n"
    "                        --max-seconds) and purge those nobody renewed meanwhile.\n"
    "                        Without it a cluster run purges released rows only and\n"
    "                        counts the held ones (no node clock may judge a lease).\n"
    "                        Ignored on one server\n"
    "  --dry-run             report what would be purged, change nothing\n"
    "  --json                print the summary as one JSON object\n"
    "  --quiet               print nothing unless there is an error (not with --json)\n"
    "  -v, --verbose         report the library's events (retries, reconnects) on stderr,\n"
    "                        one line each: rowlock-reaper: LEVEL KIND: MESSAGE\n"
    "  --metrics-file=PATH   after the run, replace PATH atomically with a Prometheus\n"
    "                        exposition (node_exporter's textfile collector): the lock\n"
    "                        table's gauges and the reaper's runs, failures and purges\n"
    "                        (counters carried over from PATH's previous contents).\n"
    "                        Written also when the run fails. Not with --dry-run\n"
    "  -h, --help            show this help\n"
    "  -V, --version         show the version\n"
    "\n";

static const char usage_tail[] =
    "\nExit status: 0 ok (also when stopped by --max-seconds), 64 usage error,\n"
    "69 database unavailable or schema missing/outdated.\n";

enum { O_GRACE = 1, O_BATCH, O_PAUSE, O_MAX, O_DRY_RUN, O_JSON, O_QUIET, O_VERBOSE, O_HELP, O_VERSION, O_METRICS,
       O_WAIT_LEASES };

static const cli_optspec specs[] = {
    { "grace", 0, 1, O_GRACE },
    { "batch", 0, 1, O_BATCH },
    { "pause", 0, 1, O_PAUSE },
    { "max-seconds", 0, 1, O_MAX },
    { "dry-run", 0, 0, O_DRY_RUN },
    { "json", 0, 0, O_JSON },
    { "quiet", 'q', 0, O_QUIET },
    { "verbose", 'v', 0, O_VERBOSE },
    { "help", 'h', 0, O_HELP },
    { "version", 'V', 0, O_VERSION },
    { "metrics-file", 0, 1, O_METRICS },
    { "wait-leases", 0, 0, O_WAIT_LEASES },
    { NULL, 0, 0, 0 },
};

/* --metrics-file: the lock table's gauges (read after the purge; left out
 * when they cannot be read) and the run's, with the counters of the file's
 * previous contents carried over: a reaper run from cron or a timer is a
 * new process each time, and counters that restarted at every run would be
 * of no use to rate(). Returns 0 or an exit code (message printed). */
static int write_metrics(const char *path, const cli_conn *cc, rowlock_client *c, int reaped,
                         const rowlock_reap_stats *st)
{
    rowlock_stats_info ts = ROWLOCK_STATS_INFO_INIT;
    cli_reaper_metrics m;
    struct timespec now;
    char table[64] = "rowlock_locks", *buf = NULL;
    size_t len = 0;
    int have_table = 0, ex = 0, rc;
    FILE *f;

    if (c != NULL)
        snprintf(table, sizeof table, "%s", rowlock_client_table(c));
    else if (cc->opts.table != NULL)
        snprintf(table, sizeof table, "%s", cc->opts.table);
    else
        (void)cli_metrics_prev_table(path, table, sizeof table);
    if (reaped) {
        rc = rowlock_admin_stats(c, &ts);
        if (rc == 0) {
            have_table = 1;
        } else {
            cli_report(PROG, "metrics", c, rc);
            ex = cli_exit_for(rc);
        }
    }
    memset(&m, 0, sizeof m);
    m.runs_total = cli_metrics_prev(path, "rowlock_reaper_runs_total", table) + 1;
    m.failures_total = cli_metrics_prev(path, "rowlock_reaper_failures_total", table) + (reaped ? 0 : 1);
    m.purged_total = cli_metrics_prev(path, "rowlock_reaper_purged_rows_total", table) + (reaped ? st->purged : 0);
    clock_gettime(CLOCK_REALTIME, &now);
    m.last_run_at_s = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
    m.last_run_ok = reaped;
    m.last_run_complete = reaped && st->complete;
    m.last_run_purged = reaped ? st->purged : 0;
    m.last_run_duration_s = reaped ? (double)st->elapsed_us / 1e6 : 0.0;
    f = open_memstream(&buf, &len);
    if (f == NULL) {
        fprintf(stderr, "%s: out of memory\n", PROG);
        return CLI_EX_UNAVAILABLE;
    }
    if (have_table)
        cli_metrics_table(f, table, &ts);
    cli_metrics_reaper(f, table, &m);
    if (fclose(f) != 0) {
        free(buf);
        fprintf(stderr, "%s: out of memory\n", PROG);
        return CLI_EX_UNAVAILABLE;
    }
    if (cli_write_file_atomic(PROG, path, buf, len) != 0 && ex == 0)
        ex = CLI_EX_UNAVAILABLE;
    free(buf);
    return ex;
}

int main(int argc, char **argv)
{
    cli_conn cc;
    rowlock_client *c = NULL;
    rowlock_reap_options ro = ROWLOCK_REAP_OPTIONS_INIT;
    rowlock_reap_stats st;
    cli_optparser p;
    const char *v;
    int id, rc, ex = 0, json = 0, quiet = 0, verbose = 0;
    double grace_s = 60.0, max_s = 0.0;
    unsigned long long batch = 1000;
    int64_t pause = ROWLOCK_REAP_PAUSE_AUTO;
    char ts[48];
    const char *metrics_file = NULL;
    int ran = 0, reaped = 0;

    cli_conn_init(&cc);
    memset(&st, 0, sizeof st);
    cli_opt_init(&p, PROG, NULL, argc, argv, 1);
    while ((id = cli_next_opt(&p, specs, &cc, &v)) != CLI_OP_END) {
        switch (id) {
        case CLI_OP_ERR:
            ex = CLI_EX_USAGE;
            goto out;
        case CLI_OP_CONN:
            break;
        case O_HELP:
        case O_VERSION:
            /* They print no result: any other argument would be ignored. */
            if (argc != 2) {
                fprintf(stderr, "%s: %s takes no other arguments\n", PROG,
                        id == O_HELP ? "--help" : "--version");
                ex = CLI_EX_USAGE;
                goto out;
            }
            if (id == O_VERSION) {
                printf("rowlock-reaper %s (library %s)\n", ROWLOCK_VERSION_STRING,
                       rowlock_version());
                ex = cli_finish_stdout(PROG, 0);
                goto out;
            }
            fputs(usage, stdout);
            fputs(cli_conn_help, stdout);
            fputs(usage_tail, stdout);
            ex = cli_finish_stdout(PROG, 0);
            goto out;
        case O_DRY_RUN:
            ro.dry_run = 1;
            break;
        case O_WAIT_LEASES:
            ro.wait_leases = 1;
            break;
        case O_JSON:
            json = 1;
            break;
        case O_QUIET:
            quiet = 1;
            break;
        case O_VERBOSE:
            verbose = 1;
            break;
        case O_METRICS:
            if (v[0] == '\0') {
                fprintf(stderr, "%s: --metrics-file: empty PATH\n", PROG);
                ex = CLI_EX_USAGE;
                goto out;
            }
            metrics_file = v;
            break;
        case O_GRACE:
            grace_s = cli_parse_seconds(v);
            if (grace_s < 0) {
                fprintf(stderr, "%s: --grace: '%s' is not a non-negative number of seconds\n",
                        PROG, cli_q(v));
                ex = CLI_EX_USAGE;
                goto out;
            }
            break;
        case O_BATCH:
            if (cli_parse_uint(v, 1, 100000, &batch) != 0) {
                fprintf(stderr, "%s: --batch: '%s' is not a number of rows 1-100000\n", PROG, cli_q(v));
                ex = CLI_EX_USAGE;
                goto out;
            }
            break;
        case O_PAUSE:
            if (cli_parse_pause(v, &pause) != 0) {
                fprintf(stderr, "%s: --pause: '%s' is not 'auto' or a number of milliseconds 0-60000\n", PROG, cli_q(v));
                ex = CLI_EX_USAGE;
                goto out;
            }
            break;
        case O_MAX:
            max_s = cli_parse_seconds(v);
            if (max_s <= 0) {
                fprintf(stderr, "%s: --max-seconds: '%s' is not a positive number of seconds\n",
                        PROG, cli_q(v));
                ex = CLI_EX_USAGE;
                goto out;
            }
            break;
        default:
            break;
        }
    }
    if (p.i < argc) {
        const char *a = argv[p.i];
        if (p.i > 1 && strcmp(argv[p.i - 1], "--password") == 0) {
            /* Probably "--password SECRET": never echo it. */
            fprintf(stderr, "%s: unexpected argument after --password (it takes no value: the "
                            "password is asked on the terminal, or read from an option file)\n",
                    PROG);
        } else {
            size_t w;
            char *h = cli_human_str(a, &w);
            fprintf(stderr, "%s: unexpected argument '%s' (see rowlock-reaper --help)\n", PROG,
                    h ? h : "?");
            free(h);
        }
        ex = CLI_EX_USAGE;
        goto out;
    }
    if (verbose && quiet) {
        fprintf(stderr, "%s: --verbose and --quiet contradict each other\n", PROG);
        ex = CLI_EX_USAGE;
        goto out;
    }
    if (json && quiet) {
        fprintf(stderr, "%s: --json and --quiet contradict each other (--quiet prints nothing)\n",
                PROG);
        ex = CLI_EX_USAGE;
        goto out;
    }

    if (metrics_file && ro.dry_run) {
        fprintf(stderr, "%s: --metrics-file and --dry-run contradict each other (a dry run purges "
                        "nothing to count)\n", PROG);
        ex = CLI_EX_USAGE;
        goto out;
    }

    ro.grace_ms = (int64_t)llround(grace_s * 1000.0);
    ro.batch = (unsigned int)batch;
    ro.pause_ms = pause;
    ro.max_ms = (int64_t)llround(max_s * 1000.0);
    if (max_s > 0 && ro.max_ms == 0)
        ro.max_ms = 1;

    ran = 1; /* from here on, a metrics file records the run, failed or not */
    rc = cli_conn_open(&cc, PROG, 0, &c);
    if (rc != 0) {
        ex = rc;
        goto out;
    }
    if (verbose)
        (void)cli_log_to_stderr(c, PROG, ROWLOCK_LOG_INFO);
    st.version = ROWLOCK_REAP_STATS_VERSION;
    rc = rowlock_admin_reap(c, &ro, &st);
    if (rc != 0) {
        cli_report(PROG, "reap", c, rc);
        ex = cli_exit_for(rc);
        goto out;
    }
    reaped = 1;
    if (quiet) {
        /* nothing */
    } else if (json) {
        printf("{\"table\":");
        cli_json_string(stdout, rowlock_client_table(c));
        printf(",\"dry_run\":%s,\"purged\":%" PRIu64 ",\"batches\":%" PRIu64 ",\"oldest_expiry\":",
               ro.dry_run ? "true" : "false", st.purged, st.batches);
        if (st.oldest_expiry_us) {
            cli_json_string(stdout, cli_format_utc_us(ts, sizeof ts, st.oldest_expiry_us));
            printf(",\"oldest_expiry_us\":%" PRId64, st.oldest_expiry_us);
        } else {
            printf("null,\"oldest_expiry_us\":null");
        }
        printf(",\"duration_s\":%.6f,\"complete\":%s,\"grace_s\":%.3f,\"batch\":%u,\"wait_leases\":%s,"
               "\"unjudged\":%" PRIu64 ",\"changed\":%" PRIu64 ",\"waited_s\":%.6f}\n",
               (double)st.elapsed_us / 1e6, st.complete ? "true" : "false", grace_s, ro.batch,
               ro.wait_leases ? "true" : "false", st.unjudged, st.changed, (double)st.waited_us / 1e6);
    } else {
        char batches[48] = "", waited[48] = "", changed[96] = "", unjudged[128] = "";
        if (!ro.dry_run)
            snprintf(batches, sizeof batches, " in %" PRIu64 " batch%s", st.batches,
                     st.batches == 1 ? "" : "es");
        if (st.waited_us > 0)
            snprintf(waited, sizeof waited, " (%.3f s watching leases)", (double)st.waited_us / 1e6);
        if (st.changed > 0)
            snprintf(changed, sizeof changed, "; %" PRIu64 " held row%s renewed or taken while watched, kept",
                     st.changed, st.changed == 1 ? "" : "s");
        /* Held rows a cluster run did not judge: without --wait-leases
         * that is the rule, not the budget. */
        if (st.unjudged > 0 && !ro.wait_leases)
            snprintf(unjudged, sizeof unjudged, "; %" PRIu64 " held row%s on a cluster need%s --wait-leases to be judged",
                     st.unjudged, st.unjudged == 1 ? "" : "s", st.unjudged == 1 ? "s" : "");
        else if (st.unjudged > 0)
            snprintf(unjudged, sizeof unjudged, "; %" PRIu64 " held row%s not watched for a whole lease",
                     st.unjudged, st.unjudged == 1 ? "" : "s");
        printf("%s %" PRIu64 " stale lock%s from %s%s, oldest expiry %s, %.3f s%s%s%s%s%s\n",
               ro.dry_run ? "would purge" : "purged", st.purged, st.purged == 1 ? "" : "s",
               rowlock_client_table(c), batches,
               cli_format_utc_us(ts, sizeof ts, st.oldest_expiry_us), (double)st.elapsed_us / 1e6, waited,
               changed, unjudged,
               st.complete ? "" : (max_s > 0 ? "; stopped by --max-seconds, more remain" : "; more remain"),
               ro.dry_run ? " (dry run)" : "");
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: cannot write output: %s\n", PROG, strerror(errno));
        ex = CLI_EX_UNAVAILABLE;
    }

out:
    if (metrics_file && ran) {
        int mx = write_metrics(metrics_file, &cc, c, reaped, &st);
        if (ex == 0)
            ex = mx;
    }
    rowlock_client_free(c);
    cli_conn_free(&cc);
    rowlock_library_end();
    return ex;
}
