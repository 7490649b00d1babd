/*
 * rowlock status, list, release --force, migrate: the administrative
 * commands. Each connects, makes one library call and prints its result.
 */
#include "rowlock_cli.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char rl_usage_status[] =
    "Usage: rowlock [CONNECTION OPTIONS] status [--json] NAME\n"
    "\n"
    "Show who holds lock NAME: owner, strategy, fencing token, acquisition time\n"
    "(UTC) and the time left on its lease.\n"
    "\n"
    "  --json       print one JSON object\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 held, 1 free, 64 usage error, 69 database unavailable.\n";

const char rl_usage_list[] =
    "Usage: rowlock [CONNECTION OPTIONS] list [--json] [--stale]\n"
    "\n"
    "List every held lock, one per line in aligned columns (for-update locks are\n"
    "not listed: their holders are row locks, not rows).\n"
    "\n"
    "  --stale      list only rows whose lease ended (holders that crashed)\n"
    "  --json       print a JSON array of objects\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 ok, 64 usage error, 69 database unavailable.\n";

const char rl_usage_release[] =
    "Usage: rowlock [CONNECTION OPTIONS] release --force [--owner=OWNER] [--json] NAME\n"
    "\n"
    "Administrative release of lock NAME held by another owner (insert and\n"
    "optimistic strategies). The holder's next renewal fails; a `rowlock run`\n"
    "holding it terminates its COMMAND and exits 75. The fencing token is kept,\n"
    "so the next grant gets a larger one.\n"
    "\n"
    "  --force      required: confirms the release\n"
    "  --owner=OWNER  of a shared lock or semaphore, release only the holder OWNER\n"
    "               (without it, every holder is released)\n"
    "  --json       print {\"released\":BOOL,\"lock\":{...}}: the lock as it was\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 released, 1 was not held, 64 usage error (also without\n"
    "--force, or for a for-update lock), 69 database unavailable.\n";

const char rl_usage_migrate[] =
    "Usage: rowlock [CONNECTION OPTIONS] migrate [--dry-run] [--json]\n"
    "\n"
    "Apply the pending schema migrations (embedded from sql/) to the lock table\n"
    "and print the schema version before and after. Safe to run twice and from\n"
    "several hosts at once. Needs CREATE/ALTER privileges.\n"
    "\n"
    "  --dry-run    report what would be done, change nothing\n"
    "  --json       print one JSON object (table, schema_from, schema_to, dry_run)\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 ok, 64 usage error, 69 database unavailable or the schema is\n"
    "newer than this program knows.\n";


enum { SO_JSON = 1, SO_STALE, SO_FORCE, SO_DRY_RUN, SO_HELP, SO_OWNER };

static const cli_optspec status_specs[] = {
    { "json", 0, 0, SO_JSON }, { "help", 'h', 0, SO_HELP }, { NULL, 0, 0, 0 },
};
static const cli_optspec list_specs[] = {
    { "json", 0, 0, SO_JSON }, { "stale", 0, 0, SO_STALE }, { "help", 'h', 0, SO_HELP },
    { NULL, 0, 0, 0 },
};
static const cli_optspec release_specs[] = {
    { "force", 'f', 0, SO_FORCE }, { "json", 0, 0, SO_JSON }, { "help", 'h', 0, SO_HELP },
    { "owner", 0, 1, SO_OWNER },
    { NULL, 0, 0, 0 },
};
static const cli_optspec migrate_specs[] = {
    { "dry-run", 0, 0, SO_DRY_RUN }, { "json", 0, 0, SO_JSON }, { "help", 'h', 0, SO_HELP },
    { NULL, 0, 0, 0 },
};

typedef struct simple_args {
    int json, stale, force, dry_run;
    const char *owner;
    const char *pos[2];
    int npos;
} simple_args;

/* Options anywhere (GNU style) and up to `maxpos` positionals.
 * Returns 0, -1 after --help, or an exit code. */
static int parse_simple(cli_conn *cc, const char *cmd, const cli_optspec *specs, const char *usage,
                        int maxpos, int argc, char **argv, simple_args *sa)
{
    cli_optparser p;
    const char *val;
    int id;

    cli_opt_init(&p, PROG, cmd, argc, argv, 1);
    memset(sa, 0, sizeof *sa);
    for (;;) {
        id = cli_next_opt(&p, specs, cc, &val);
        if (id == CLI_OP_END) {
            if (p.i >= argc)
                break;
            if (p.dashdash) {
                while (p.i < argc) {
                    if (sa->npos >= maxpos)
                        goto toomany;
                    sa->pos[sa->npos++] = argv[p.i++];
                }
                break;
            }
            if (sa->npos >= maxpos)
                goto toomany;
            sa->pos[sa->npos++] = argv[p.i++];
            continue;
        }
        switch (id) {
        case CLI_OP_ERR:
            return CLI_EX_USAGE;
        case CLI_OP_CONN:
            break;
        case SO_HELP:
            rl_print_cmd_help(usage);
            return -1;
        case SO_JSON:
            sa->json = 1;
            break;
        case SO_STALE:
            sa->stale = 1;
            break;
        case SO_FORCE:
            sa->force = 1;
            break;
        case SO_DRY_RUN:
            sa->dry_run = 1;
            break;
        case SO_OWNER:
            sa->owner = val;
            break;
        default:
            break;
        }
    }
    return 0;
toomany:
    fprintf(stderr, "%s: %s: unexpected argument '%s'\n", PROG, cmd, cli_q(argv[p.i]));
    return CLI_EX_USAGE;
}

int rl_cmd_status(cli_conn *cc, int argc, char **argv)
{
    simple_args sa;
    rowlock_client *c = NULL;
    rowlock_lock *l = NULL;
    rowlock_info in = ROWLOCK_INFO_INIT;
    int rc, ex;

    rc = parse_simple(cc, "status", status_specs, rl_usage_status, 1, argc, argv, &sa);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (sa.npos != 1) {
        fprintf(stderr, "%s: status: missing lock NAME\n", PROG);
        return CLI_EX_USAGE;
    }
    if (cli_check_name(PROG, "status", sa.pos[0]) != 0)
        return CLI_EX_USAGE;
    if (CLI_PARSE_ONLY)
        return 0;
    rc = cli_conn_open(cc, PROG, 0, &c);
    if (rc != 0)
        return rc;
    /* rowlock_inspect() looks at a name the way the strategy of its row
     * says (a for-update holder is probed), whatever the handle's strategy. */
    rc = rowlock_lock_new(&l, c, sa.pos[0], NULL);
    if (rc == 0)
        rc = rowlock_inspect(l, &in);
    if (rc != 0) {
        cli_report(PROG, "status", c, rc);
        ex = cli_exit_for(rc);
        goto out;
    }
    ex = in.held ? 0 : CLI_EX_CONFLICT;
    if (sa.json) {
        rl_json_info(stdout, &in);
        fputc('\n', stdout);
    } else if (in.held) {
        if (rl_print_table(&in, 1) != 0) {
            fprintf(stderr, "%s: out of memory\n", PROG);
            ex = CLI_EX_UNAVAILABLE;
        } else if (!in.owner[0] || in.count > 1) {
            int hx = rl_print_holders(c, sa.pos[0], 0); /* a shared lock or semaphore: each holder */
            if (hx)
                ex = hx;
        }
    } else {
        size_t w;
        char *hn = cli_human_str(in.name[0] ? in.name : sa.pos[0], &w);
        if (hn == NULL) {
            fprintf(stderr, "%s: out of memory\n", PROG);
            ex = CLI_EX_UNAVAILABLE;
            goto out;
        }
        if (!in.exists) {
            printf("%s: free (never taken, or purged)\n", hn);
        } else if (in.stale) {
            size_t ow;
            char *ho = cli_human_str(in.owner, &ow);
            printf("%s: free (stale: lease of %s ended %.1f s ago; last token %" PRIu64 ")\n", hn,
                   ho ? ho : "?", (double)-in.expires_in_ms / 1000.0, in.token);
            free(ho);
        } else if (in.token) {
            printf("%s: free (last token %" PRIu64 ")\n", hn, in.token);
        } else {
            printf("%s: free\n", hn);
        }
        free(hn);
    }
    ex = cli_finish_stdout(PROG, ex);
out:
    rowlock_lock_free(l);
    rowlock_client_free(c);
    return ex;
}

/* ======================================================================== */
/* list                                                                      */
/* ======================================================================== */

typedef struct rowvec {
    rowlock_info *v;
    size_t n, cap;
    int oom;
} rowvec;

static int collect_row(const rowlock_info *info, void *arg)
{
    rowvec *rv = arg;
    if (rv->n == rv->cap) {
        size_t ncap = rv->cap ? rv->cap * 2 : 64;
        rowlock_info *nv = realloc(rv->v, ncap * sizeof *nv);
        if (nv == NULL) {
            rv->oom = 1;
            return 1;
        }
        rv->v = nv;
        rv->cap = ncap;
    }
    rv->v[rv->n++] = *info;
    return 0;
}

int rl_cmd_list(cli_conn *cc, int argc, char **argv)
{
    simple_args sa;
    rowlock_client *c = NULL;
    rowvec rv = { NULL, 0, 0, 0 };
    int rc, ex = 0;
    size_t k;

    rc = parse_simple(cc, "list", list_specs, rl_usage_list, 0, argc, argv, &sa);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (CLI_PARSE_ONLY)
        return 0;
    rc = cli_conn_open(cc, PROG, 0, &c);
    if (rc != 0)
        return rc;
    rc = rowlock_list(c, sa.stale ? ROWLOCK_LIST_STALE : 0u, collect_row, &rv);
    if (rv.oom) {
        fprintf(stderr, "%s: list: out of memory\n", PROG);
        ex = CLI_EX_UNAVAILABLE;
        goto out;
    }
    if (rc != 0) {
        cli_report(PROG, "list", c, rc);
        ex = cli_exit_for(rc);
        goto out;
    }
    if (sa.json) {
        fputc('[', stdout);
        for (k = 0; k < rv.n; k++) {
            fputs(k ? ",\n " : "", stdout);
            rl_json_info(stdout, &rv.v[k]);
        }
        fputs("]\n", stdout);
    } else if (rl_print_table(rv.v, rv.n) != 0) {
        fprintf(stderr, "%s: list: out of memory\n", PROG);
        ex = CLI_EX_UNAVAILABLE;
        goto out;
    } else if (!sa.stale && (ex = rl_print_holders(c, NULL, 0)) != 0) {
        goto out; /* shared locks and semaphores: one line per holder */
    }
    ex = cli_finish_stdout(PROG, 0);
out:
    free(rv.v);
    rowlock_client_free(c);
    return ex;
}

/* ======================================================================== */
/* release --force                                                           */
/* ======================================================================== */

int rl_cmd_release(cli_conn *cc, int argc, char **argv)
{
    simple_args sa;
    rowlock_client *c = NULL;
    rowlock_info in = ROWLOCK_INFO_INIT;
    int rc, ex;

    rc = parse_simple(cc, "release", release_specs, rl_usage_release, 1, argc, argv, &sa);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (sa.npos != 1) {
        fprintf(stderr, "%s: release: missing lock NAME\n", PROG);
        return CLI_EX_USAGE;
    }
    if (!sa.force) {
        fprintf(stderr, "%s: release: refusing to release another owner's lock without --force "
                        "(rowlock release --force NAME)\n", PROG);
        return CLI_EX_USAGE;
    }
    if (cli_check_name(PROG, "release", sa.pos[0]) != 0)
        return CLI_EX_USAGE;
    if (CLI_PARSE_ONLY)
        return 0;
    rc = cli_conn_open(cc, PROG, 0, &c);
    if (rc != 0)
        return rc;
    if (sa.owner) {
        /* One holder of a shared lock or semaphore. */
        unsigned int n = 0;
        rc = rowlock_force_release_holder(c, sa.pos[0], sa.owner, &n);
        if (rc != 0) {
            cli_report(PROG, "release", c, rc);
            ex = cli_exit_for(rc);
        } else {
            if (sa.json)
                printf("{\"released\":%s,\"holders\":%u}\n", n ? "true" : "false", n);
            else
                printf(n ? "released the holder '%s' of '%s'\n" : "'%s' held nothing of '%s'\n", cli_q(sa.owner),
                       cli_q(sa.pos[0]));
            ex = cli_finish_stdout(PROG, n ? 0 : CLI_EX_CONFLICT);
        }
        rowlock_client_free(c);
        return ex;
    }
    rc = rowlock_force_release(c, sa.pos[0], &in);
    if (rc == ROWLOCK_EUNSUPPORTED) {
        cli_report(PROG, "release: cannot force-release a for-update lock (end the holder's "
                         "connection instead)", c, rc);
        ex = CLI_EX_USAGE;
    } else if (rc != 0) {
        cli_report(PROG, "release", c, rc);
        ex = cli_exit_for(rc);
    } else {
        size_t w;
        char *hn = cli_human_str(sa.pos[0], &w);
        if (hn == NULL) {
            fprintf(stderr, "%s: out of memory\n", PROG);
            ex = CLI_EX_UNAVAILABLE;
        } else if (sa.json) {
            if (in.name[0] == '\0')
                snprintf(in.name, sizeof in.name, "%s", sa.pos[0]);
            fputs(in.held ? "{\"released\":true,\"lock\":" : "{\"released\":false,\"lock\":",
                  stdout);
            rl_json_info(stdout, &in);
            fputs("}\n", stdout);
            ex = in.held ? 0 : CLI_EX_CONFLICT;
        } else if (in.held) {
            size_t ow;
            char *ho = cli_human_str(in.owner[0] ? in.owner : "-", &ow);
            printf("released '%s' (owner %s, strategy %s, token %" PRIu64 ")\n", hn,
                   ho ? ho : "?", rl_strategy_str(in.strategy), in.token);
            free(ho);
            ex = 0;
        } else {
            printf("'%s' was not held\n", hn);
            ex = CLI_EX_CONFLICT;
        }
        free(hn);
        ex = cli_finish_stdout(PROG, ex);
    }
    rowlock_client_free(c);
    return ex;
}

/* ======================================================================== */
/* migrate                                                                   */
/* ======================================================================== */

int rl_cmd_migrate(cli_conn *cc, int argc, char **argv)
{
    simple_args sa;
    rowlock_client *c = NULL;
    int rc, ex = 0, from = 0, to = 0;

    rc = parse_simple(cc, "migrate", migrate_specs, rl_usage_migrate, 0, argc, argv, &sa);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (CLI_PARSE_ONLY)
        return 0;
    rc = cli_conn_open(cc, PROG, ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK, &c);
    if (rc != 0)
        return rc;
    rc = rowlock_migrate(c, sa.dry_run ? (unsigned int)ROWLOCK_MIGRATE_DRY_RUN : 0u, &from, &to);
    if (rc != 0) {
        if (rc == ROWLOCK_ESCHEMA) {
            /* Here ESCHEMA means the server's schema is newer than this program. */
            fprintf(stderr, "%s: migrate: ", PROG);
            fprintf(stderr, "%s (%s); upgrade rowlock\n",
                    rowlock_client_errmsg(c)[0] ? rowlock_client_errmsg(c) : rowlock_strerror(rc),
                    rowlock_error_name(rc));
        } else {
            cli_report(PROG, "migrate", c, rc);
        }
        ex = cli_exit_for(rc);
    } else {
        if (sa.json) {
            fputs("{\"table\":", stdout);
            cli_json_string(stdout, rowlock_client_table(c));
            printf(",\"schema_from\":%d,\"schema_to\":%d,\"dry_run\":%s}\n", from, to,
                   sa.dry_run ? "true" : "false");
        } else {
            printf("schema version: %d -> %d%s\n", from, to, sa.dry_run ? " (dry run)" : "");
            if (!sa.dry_run && strncmp(rowlock_client_errmsg(c), "repaired:", 9) == 0)
                printf("%s\n", rowlock_client_errmsg(c));
        }
        ex = cli_finish_stdout(PROG, 0);
    }
    rowlock_client_free(c);
    return ex;
}

