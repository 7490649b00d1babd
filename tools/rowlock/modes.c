/*
 * Multi-holder names (shared locks, semaphores) in the rowlock tool: the
 * permits command, and the holder lines that status and list print.
 */
#include "commands.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char rl_usage_permits[] =
    "Usage: rowlock [CONNECTION OPTIONS] permits [--json] NAME N\n"
    "\n"
    "Set how many holders lock NAME admits at once (a counting semaphore of N;\n"
    "0: any number of shared holders, one exclusive). Holders keep their grants\n"
    "when N shrinks; new ones wait until fewer than N hold it. Insert strategy.\n"
    "\n"
    "  --json       print {\"name\":NAME,\"permits\":N}\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 set, 1 NAME is held by an exclusive holder right now (try\n"
    "again), 64 usage error, 69 database unavailable.\n";

enum { PO_HELP = 1, PO_JSON };
static const cli_optspec permits_specs[] = {
    { "help", 'h', 0, PO_HELP },
    { "json", 0, 0, PO_JSON },
    { NULL, 0, 0, 0 },
};

int rl_cmd_permits(cli_conn *cc, int argc, char **argv)
{
    cli_optparser p;
    const char *val, *pos[2];
    int id, npos = 0, rc, ex, json = 0;
    unsigned long long n;
    rowlock_client *c = NULL;

    cli_opt_init(&p, PROG, "permits", argc, argv, 1);
    for (;;) {
        id = cli_next_opt(&p, permits_specs, cc, &val);
        if (id == CLI_OP_END) {
            if (p.i >= argc)
                break;
            if (npos >= 2) {
                fprintf(stderr, "%s: permits: unexpected argument '%s'\n", PROG, cli_q(argv[p.i]));
                return CLI_EX_USAGE;
            }
            pos[npos++] = argv[p.i++];
            continue;
        }
        if (id == CLI_OP_ERR)
            return CLI_EX_USAGE;
        if (id == PO_HELP) {
            rl_print_cmd_help(rl_usage_permits, 0);
            return 0;
        }
        if (id == PO_JSON)
            json = 1;
    }
    if (npos != 2) {
        fprintf(stderr, "%s: permits: needs a lock NAME and a number N\n", PROG);
        return CLI_EX_USAGE;
    }
    if (cli_check_name(PROG, "permits", pos[0]) != 0)
        return CLI_EX_USAGE;
    if (cli_parse_uint(pos[1], 0, ROWLOCK_PERMITS_MAX, &n) != 0) {
        fprintf(stderr, "%s: permits: '%s' is not a number of permits 0-%u\n", PROG, cli_q(pos[1]),
                ROWLOCK_PERMITS_MAX);
        return CLI_EX_USAGE;
    }
    if (CLI_PARSE_ONLY)
        return 0;
    rc = cli_conn_open(cc, PROG, 0, &c);
    if (rc != 0)
        return rc;
    rc = rowlock_admin_set_permits(c, pos[0], (unsigned int)n);
    if (rc == ROWLOCK_EBUSY) {
        cli_report(PROG, "permits", c, rc);
        ex = CLI_EX_CONFLICT;
    } else if (rc != 0) {
        cli_report(PROG, "permits", c, rc);
        ex = cli_exit_for(rc);
    } else if (json) {
        fputs("{\"name\":", stdout);
        cli_json_string(stdout, pos[0]);
        printf(",\"permits\":%llu}\n", n);
        ex = cli_finish_stdout(PROG, 0);
    } else {
        printf("'%s': %llu permits%s\n", cli_q(pos[0]), n, n == 0 ? " (no limit on shared holders)" : "");
        ex = cli_finish_stdout(PROG, 0);
    }
    rowlock_client_free(c);
    return ex;
}

/* ---- holder lines ---------------------------------------------------------- */

typedef struct hl {
    rowlock_holder_info *v;
    size_t n, cap;
    int oom;
} hl;

static int collect(const rowlock_holder_info *h, void *arg)
{
    hl *x = arg;
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 16;
        rowlock_holder_info *v = realloc(x->v, cap * sizeof *v);
        if (!v) {
            x->oom = 1;
            return 1;
        }
        x->v = v;
        x->cap = cap;
    }
    x->v[x->n++] = *h;
    return 0;
}

int rl_get_holders(rowlock_client *c, const char *name, rowlock_holder_info **v, size_t *n)
{
    hl x = { NULL, 0, 0, 0 };
    int rc = rowlock_admin_holders(c, name, collect, &x);
    *v = NULL;
    *n = 0;
    if (x.oom) {
        free(x.v);
        fprintf(stderr, "%s: out of memory\n", PROG);
        return CLI_EX_UNAVAILABLE;
    }
    if (rc != 0) {
        free(x.v);
        cli_report(PROG, "holders", c, rc);
        return cli_exit_for(rc);
    }
    *v = x.v;
    *n = x.n;
    return 0;
}

int rl_print_holders(rowlock_client *c, const char *name)
{
    hl x = { NULL, 0, 0, 0 };
    int ex = rl_get_holders(c, name, &x.v, &x.n);
    if (ex)
        return ex;
    if (x.n > 0) {
        printf("%-24s %-40s %-9s %-7s %5s %20s %10s\n", "HOLDERS OF", "OWNER", "MODE", "STATE", "COUNT", "TOKEN",
               "EXPIRES_S");
        for (size_t i = 0; i < x.n; i++) {
            const rowlock_holder_info *h = &x.v[i];
            size_t w;
            char *hn = cli_human_str(h->name, &w), *ho = cli_human_str(h->owner, &w);
            /* A waiter's entry has no lease: its expires_at only bounds how
             * long the reaper keeps it (holders.c: its place, minutes). */
            char exp[32];
            if (h->granted)
                snprintf(exp, sizeof exp, "%.1f", (double)h->expires_in_ms / 1000.0);
            else
                snprintf(exp, sizeof exp, "-");
            printf("%-24s %-40s %-9s %-7s %5u %20" PRIu64 " %10s%s\n", hn ? hn : "?", ho ? ho : "?",
                   h->mode == ROWLOCK_MODE_SHARED ? "shared" : "exclusive", h->granted ? "holds" : "waits",
                   h->count, h->token, exp, h->live ? "" : " (ended)");
            free(hn);
            free(ho);
        }
        if (x.v[0].permits)
            printf("permits: %u\n", x.v[0].permits);
    }
    free(x.v);
    return 0;
}
