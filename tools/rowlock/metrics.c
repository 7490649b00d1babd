/*
 * rowlock metrics: the lock table as a Prometheus text exposition on
 * stdout (cli_metrics.c writes it; rowlock-reaper --metrics-file writes the
 * same table gauges to a file).
 */
#include "commands.h"
#include "common/metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char rl_usage_metrics[] =
    "Usage: rowlock [CONNECTION OPTIONS] metrics [--names] [--json]\n"
    "\n"
    "Print the lock table's state as a Prometheus text exposition (format 0.0.4):\n"
    "names held, holders and waiters per mode, the oldest lease's age, stale\n"
    "rows (metric names: see rowlock(1)). Ages are by the server's clock.\n"
    "\n"
    "  --names      also one series per held name (rowlock_lock_held_seconds,\n"
    "               label name=...): as many series as names held at once\n"
    "  --json       print the same counts as one JSON object instead\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 ok, 64 usage error, 69 database unavailable.\n";

enum { MO_HELP = 1, MO_NAMES, MO_JSON };
static const cli_optspec metrics_specs[] = {
    { "help", 'h', 0, MO_HELP },
    { "json", 0, 0, MO_JSON },
    { "names", 0, 0, MO_NAMES },
    { NULL, 0, 0, 0 },
};

/* The mode a held lock is shown with: a one-row lock is exclusive; a
 * multi-holder name is shared unless an exclusive grant holds it. */
static const char *held_mode(const rl_listed *l)
{
    for (size_t k = 0; k < l->nh; k++)
        if (l->h[k].granted && l->h[k].live && l->h[k].mode == ROWLOCK_MODE_EXCLUSIVE)
            return "exclusive";
    return l->nh ? "shared" : "exclusive";
}

/* How long a name has been held, by the server's clock of the stats
 * statement (made just before the list). */
static int64_t held_us(const rl_listed *l, const rowlock_stats_info *st)
{
    int64_t age = l->info.acquired_at_us ? st->server_now_us - l->info.acquired_at_us : 0;
    return age > 0 ? age : 0;
}

static void print_prom(FILE *f, const char *table, const rowlock_stats_info *st, const rl_locks *held, int names)
{
    cli_metrics_table(f, table, st);
    if (!names)
        return;
    cli_prom_head(f, "rowlock_lock_held_seconds", "gauge",
                  "Seconds since the name's oldest live grant was acquired, by the server's clock "
                  "(one series per held name: rowlock metrics --names).");
    for (size_t i = 0; i < held->n; i++) {
        fputs("rowlock_lock_held_seconds{table=\"", f);
        cli_prom_label_value(f, table);
        fputs("\",name=\"", f);
        cli_prom_label_value(f, held->v[i].info.name);
        fprintf(f, "\",mode=\"%s\"} %.3f\n", held_mode(&held->v[i]), (double)held_us(&held->v[i], st) / 1e6);
    }
}

static void print_json(FILE *f, const char *table, const rowlock_stats_info *st, const rl_locks *held, int names)
{
    char ts[48];
    fputs("{\"table\":", f);
    cli_json_string(f, table);
    fprintf(f, ",\"rows\":%" PRIu64 ",\"names_held\":%" PRIu64 ",\"holders_exclusive\":%" PRIu64
               ",\"holders_shared\":%" PRIu64 ",\"waiters_exclusive\":%" PRIu64 ",\"waiters_shared\":%" PRIu64
               ",\"stale\":%" PRIu64 ",\"oldest_lease_age_ms\":%" PRId64 ",\"oldest_stale_age_ms\":%" PRId64
               ",\"counted_at\":",
            st->rows, st->names_held, st->holders_exclusive, st->holders_shared, st->waiters_exclusive,
            st->waiters_shared, st->stale, st->oldest_grant_age_ms, st->oldest_stale_age_ms);
    cli_json_string(f, cli_format_utc_us(ts, sizeof ts, st->server_now_us));
    fprintf(f, ",\"counted_at_us\":%" PRId64, st->server_now_us);
    if (names) {
        fputs(",\"held_names\":[", f);
        for (size_t i = 0; i < held->n; i++) {
            const rl_listed *l = &held->v[i];
            fputs(i ? ",{\"name\":" : "{\"name\":", f);
            cli_json_string(f, l->info.name);
            fprintf(f, ",\"mode\":\"%s\"", held_mode(l));
            if (l->info.acquired_at_us) {
                fputs(",\"acquired_at\":", f);
                cli_json_string(f, cli_format_utc_us(ts, sizeof ts, l->info.acquired_at_us));
                fprintf(f, ",\"acquired_at_us\":%" PRId64, l->info.acquired_at_us);
            } else {
                fputs(",\"acquired_at\":null,\"acquired_at_us\":null", f);
            }
            fprintf(f, ",\"held_ms\":%" PRId64 "}", held_us(l, st) / 1000);
        }
        fputc(']', f);
    }
    fputs("}\n", f);
}

int rl_cmd_metrics(cli_conn *cc, int argc, char **argv)
{
    cli_optparser p;
    const char *val;
    int id, rc, ex, names = 0, json = 0;
    rl_locks held = { NULL, 0, NULL };
    rowlock_client *c = NULL;
    rowlock_stats_info st = ROWLOCK_STATS_INFO_INIT;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = NULL;

    cli_opt_init(&p, PROG, "metrics", argc, argv, 1);
    for (;;) {
        id = cli_next_opt(&p, metrics_specs, cc, &val);
        if (id == CLI_OP_END) {
            if (p.i >= argc)
                break;
            fprintf(stderr, "%s: metrics: unexpected argument '%s'\n", PROG, cli_q(argv[p.i]));
            return CLI_EX_USAGE;
        }
        if (id == CLI_OP_ERR)
            return CLI_EX_USAGE;
        if (id == MO_HELP) {
            rl_print_cmd_help(rl_usage_metrics, 0);
            return 0;
        }
        if (id == MO_NAMES)
            names = 1;
        if (id == MO_JSON)
            json = 1;
    }
    if (CLI_PARSE_ONLY)
        return 0;
    rc = cli_conn_open(cc, PROG, 0, &c);
    if (rc != 0)
        return rc;
    rc = rowlock_admin_stats(c, &st);
    if (rc != 0) {
        cli_report(PROG, "metrics", c, rc);
        ex = cli_exit_for(rc);
        goto out;
    }
    if (names && (ex = rl_locks_collect(c, "metrics", 0, &held)) != 0)
        goto out;
    /* Built in memory and printed whole: never half an exposition. */
    m = open_memstream(&buf, &len);
    if (m == NULL) {
        fprintf(stderr, "%s: metrics: out of memory\n", PROG);
        ex = CLI_EX_UNAVAILABLE;
        goto out;
    }
    if (json)
        print_json(m, rowlock_client_table(c), &st, &held, names);
    else
        print_prom(m, rowlock_client_table(c), &st, &held, names);
    if (fclose(m) != 0) {
        m = NULL;
        fprintf(stderr, "%s: metrics: out of memory\n", PROG);
        ex = CLI_EX_UNAVAILABLE;
        goto out;
    }
    m = NULL;
    fwrite(buf, 1, len, stdout);
    ex = cli_finish_stdout(PROG, 0);
out:
    if (m != NULL)
        fclose(m);
    free(buf);
    rl_locks_free(&held);
    rowlock_client_free(c);
    return ex;
}
