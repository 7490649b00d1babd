/*
 * rowlock status, list, release --force, migrate: the administrative
 * commands. Each connects, makes one library call and prints its result.
 */
#include "commands.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char rl_usage_status[] =
    "Usage: rowlock [CONNECTION OPTIONS] status [--json] NAME\n"
    "\n"
    "Show who holds lock NAME: owner, strategy, fencing token, acquisition time\n"
    "(UTC) and the time left on its lease; each holder of a shared lock or\n"
    "semaphore, and its permits.\n"
    "\n"
    "  --json       print one JSON lock object (with mode, permits and holders)\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 held, 1 free, 64 usage error, 69 database unavailable.\n";

const char rl_usage_list[] =
    "Usage: rowlock [CONNECTION OPTIONS] list [--json] [--stale]\n"
    "\n"
    "List every held lock, one per line in aligned columns, then the holders of\n"
    "shared locks and semaphores (for-update locks are not listed: their holders\n"
    "are row locks, not rows).\n"
    "\n"
    "  --stale      list only locks whose holders' leases ended (holders that crashed)\n"
    "  --json       print a JSON array of lock objects, every holder in each\n"
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
    "  --owner=OWNER  release only the holder OWNER (of a shared lock or semaphore,\n"
    "               or the exclusive holder; without it, every holder is released)\n"
    "  --json       print {\"released\":BOOL,\"released_count\":N,\"lock\":{...}}:\n"
    "               the lock as it was\n"
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
            rl_print_cmd_help(usage, 0);
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
        /* The holders of a multi-holder name (insert strategy); a one-row
         * lock's holder is the row's. */
        rowlock_holder_info *hv = NULL;
        size_t hn = 0;
        if (in.exists && in.strategy == ROWLOCK_STRATEGY_INSERT) {
            int hx = rl_get_holders(c, sa.pos[0], &hv, &hn);
            if (hx) {
                ex = hx;
                goto out;
            }
        }
        rl_json_lock(stdout, &in, hv, hn);
        fputc('\n', stdout);
        free(hv);
    } else if (in.held) {
        if (rl_print_table(&in, 1) != 0) {
            fprintf(stderr, "%s: out of memory\n", PROG);
            ex = CLI_EX_UNAVAILABLE;
        } else if (in.strategy == ROWLOCK_STRATEGY_INSERT) {
            int hx = rl_print_holders(c, sa.pos[0]); /* a shared lock or semaphore: each holder */
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

static int listed_cmp(const void *a, const void *b)
{
    return strcmp(((const rl_listed *)a)->info.name, ((const rl_listed *)b)->info.name);
}

int rl_locks_collect(rowlock_client *c, const char *what, int stale, rl_locks *out)
{
    rowvec rv = { NULL, 0, 0, 0 };
    size_t i, j, hn = 0;
    int rc, ex;

    memset(out, 0, sizeof *out);
    rc = rowlock_admin_list(c, stale ? ROWLOCK_LIST_STALE : 0u, collect_row, &rv);
    if (rv.oom) {
        free(rv.v);
        fprintf(stderr, "%s: %s: out of memory\n", PROG, what);
        return CLI_EX_UNAVAILABLE;
    }
    if (rc != 0) {
        free(rv.v);
        cli_report(PROG, what, c, rc);
        return cli_exit_for(rc);
    }
    if ((ex = rl_get_holders(c, NULL, &out->holders, &hn)) != 0) {
        free(rv.v);
        return ex;
    }
    out->v = malloc((rv.n + hn + 1) * sizeof *out->v);
    if (out->v == NULL) {
        free(rv.v);
        rl_locks_free(out);
        fprintf(stderr, "%s: %s: out of memory\n", PROG, what);
        return CLI_EX_UNAVAILABLE;
    }
    for (i = 0; i < rv.n; i++) {
        out->v[out->n].info = rv.v[i];
        out->v[out->n].h = NULL;
        out->v[out->n++].nh = 0;
    }
    free(rv.v);
    for (i = 0; i < hn; i = j) {
        rl_listed *o = &out->v[out->n];
        for (j = i + 1; j < hn && strcmp(out->holders[j].name, out->holders[i].name) == 0; j++)
            ;
        rl_holders_info(&out->holders[i], j - i, &o->info);
        if (stale ? !o->info.stale : !o->info.held)
            continue;
        o->h = &out->holders[i];
        o->nh = j - i;
        out->n++;
    }
    qsort(out->v, out->n, sizeof *out->v, listed_cmp);
    return 0;
}

void rl_locks_free(rl_locks *l)
{
    free(l->v);
    free(l->holders);
    memset(l, 0, sizeof *l);
}

/* `list --json`: every lock (with --stale: the stale ones) as one JSON
 * array ordered by name. Returns 0 or an exit code. */
static int list_json(rowlock_client *c, int stale)
{
    rl_locks all;
    int ex = rl_locks_collect(c, "list", stale, &all);

    if (ex)
        return ex;
    fputc('[', stdout);
    for (size_t i = 0; i < all.n; i++) {
        fputs(i ? "," : "", stdout);
        rl_json_lock(stdout, &all.v[i].info, all.v[i].h, all.v[i].nh);
    }
    fputs("]\n", stdout);
    rl_locks_free(&all);
    return 0;
}

int rl_cmd_list(cli_conn *cc, int argc, char **argv)
{
    simple_args sa;
    rowlock_client *c = NULL;
    rowvec rv = { NULL, 0, 0, 0 };
    int rc, ex = 0;

    rc = parse_simple(cc, "list", list_specs, rl_usage_list, 0, argc, argv, &sa);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (CLI_PARSE_ONLY)
        return 0;
    rc = cli_conn_open(cc, PROG, 0, &c);
    if (rc != 0)
        return rc;
    if (sa.json) {
        if ((ex = list_json(c, sa.stale)) == 0)
            ex = cli_finish_stdout(PROG, 0);
        goto out;
    }
    rc = rowlock_admin_list(c, sa.stale ? ROWLOCK_LIST_STALE : 0u, collect_row, &rv);
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
    if (rl_print_table(rv.v, rv.n) != 0) {
        fprintf(stderr, "%s: list: out of memory\n", PROG);
        ex = CLI_EX_UNAVAILABLE;
        goto out;
    } else if (!sa.stale && (ex = rl_print_holders(c, NULL)) != 0) {
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

/* release --force --json [--owner=OWNER] NAME: {"released":BOOL,
 * "released_count":N,"lock":LOCK}, LOCK as it was before. A multi-holder
 * name's entries are read first (its lock object comes from them), and
 * then removed in one statement, which counts them; a one-row lock's object
 * is what the releasing call read (without --owner) or an inspect before
 * the owner-checked release. Returns the exit status; frees c. */
static int release_json(rowlock_client *c, const char *name, const char *owner)
{
    rowlock_holder_info *hv = NULL;
    rowlock_info in = ROWLOCK_INFO_INIT;
    rowlock_lock *l = NULL;
    size_t hn = 0;
    unsigned int n = 0;
    int rc = 0, ex = rl_get_holders(c, name, &hv, &hn);

    if (ex)
        goto out;
    if (hn > 0) {
        rl_holders_info(hv, hn, &in);
        rc = rowlock_admin_force_release_holder(c, name, owner, &n);
    } else if (owner) {
        rc = rowlock_lock_new(&l, c, name, NULL);
        if (rc == 0)
            rc = rowlock_inspect(l, &in);
        if (rc == 0)
            rc = rowlock_admin_force_release_holder(c, name, owner, &n);
    } else {
        rc = rowlock_admin_force_release(c, name, &in);
        n = in.held ? 1 : 0;
    }
    if (rc == ROWLOCK_EUNSUPPORTED && !owner) {
        cli_report(PROG, "release: cannot force-release a for-update lock (end the holder's "
                         "connection instead)", c, rc);
        ex = CLI_EX_USAGE;
        goto out;
    }
    if (rc != 0) {
        cli_report(PROG, "release", c, rc);
        ex = cli_exit_for(rc);
        goto out;
    }
    if (in.name[0] == '\0')
        snprintf(in.name, sizeof in.name, "%s", name);
    printf("{\"released\":%s,\"released_count\":%u,\"lock\":", n ? "true" : "false", n);
    rl_json_lock(stdout, &in, hv, hn);
    fputs("}\n", stdout);
    ex = cli_finish_stdout(PROG, n ? 0 : CLI_EX_CONFLICT);
out:
    free(hv);
    rowlock_lock_free(l);
    rowlock_client_free(c);
    return ex;
}

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
    if (sa.json)
        return release_json(c, sa.pos[0], sa.owner);
    if (sa.owner) {
        /* One holder of a shared lock or semaphore, or the exclusive holder. */
        unsigned int n = 0;
        rc = rowlock_admin_force_release_holder(c, sa.pos[0], sa.owner, &n);
        if (rc != 0) {
            cli_report(PROG, "release", c, rc);
            ex = cli_exit_for(rc);
        } else {
            printf(n ? "released the holder '%s' of '%s'\n" : "'%s' held nothing of '%s'\n", cli_q(sa.owner),
                   cli_q(sa.pos[0]));
            ex = cli_finish_stdout(PROG, n ? 0 : CLI_EX_CONFLICT);
        }
        rowlock_client_free(c);
        return ex;
    }
    rc = rowlock_admin_force_release(c, sa.pos[0], &in);
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
    rc = rowlock_schema_migrate(c, sa.dry_run ? (unsigned int)ROWLOCK_MIGRATE_DRY_RUN : 0u, &from, &to);
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

