/*
 * rowlock-bench: measure rowlock's three strategies against the server's own
 * GET_LOCK()/RELEASE_LOCK() and raw SQL floors (DO 1, a bare INSERT+DELETE),
 * in the same run so that the ratios hold on a noisy machine.
 *
 * Scenarios (docs/bench.md says what each one measures and how):
 *   uncontended  1 client, acquire+release cycles; round trips and CPU per op
 *   hot          one name, 2/8/32 clients each holding ~50 us: grants/s,
 *                hand-off latency, fairness, mutual exclusion checked
 *   many         one name per client: aggregate grants/s
 *   table_size   acquire latency with 0 / 100k / 1M other rows in the table
 *   reaper       seconds to purge 1M stale rows and live latency meanwhile
 *
 * One client per thread (the library's rule). The raw baselines use
 * libmysqlclient directly with prepared statements, as the library does, so
 * that both sides pay the same protocol costs. Every wait is bounded: lock
 * waits by the server, phases by a watchdog thread that aborts the process
 * if a phase overruns its limit.
 */
#include "bench.h"

/* ---- command line ----------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: %s [OPTIONS] [CONNECTION OPTIONS]\n"
            "Measure rowlock's strategies against GET_LOCK() and raw SQL floors.\n"
            "\n"
            "  --quick              short run for smoke tests (0.5 s per result, small tables)\n"
            "  --json               one JSON object per result on stdout (the table goes to stderr)\n"
            "  --scenario LIST      uncontended,hot,many,table_size,reaper (default: all)\n"
            "  --strategies LIST    insert,for-update,optimistic,get_lock,raw_insert_delete,do1\n"
            "                       (default: all)\n"
            "  --seconds S          seconds per result (default 4, --quick 0.5)\n"
            "  --rounds N           split each result into N rounds, taking turns with the\n"
            "                       other strategies/sizes of its scenario (default 4, --quick 1)\n"
            "  --clients LIST       client counts of the hot scenario (default 2,8,32)\n"
            "  --many-clients N     clients of the many scenario (default 8)\n"
            "  --rows LIST          table sizes for table_size (default 0,100000,1000000;\n"
            "                       --quick 0,1000,10000)\n"
            "  --reaper-rows N      stale rows the reaper purges (default 1000000; --quick 10000)\n"
            "  --reaper-batch N     rows per reaper DELETE (default: the library's)\n"
            "  --reaper-pause MS    pause between reaper DELETEs: auto (default: as long as\n"
            "                       the last one took), 0 (none) or milliseconds\n"
            "  --hold-us N          time each hot holder keeps the lock (default 50)\n"
            "  --nodes F1,F2,...    option files of Galera nodes (e.g. rowlock-cluster's\n"
            "                       node1.cnf,...): rowlock clients connect to them in turn,\n"
            "                       and the certification failures and brute-force aborts of\n"
            "                       all nodes are reported per grant\n"
            "  --modes [--seconds S] [--hold-us N] [CONNECTION OPTIONS]  (first argument)\n"
            "                       shared readers at 1/8/32 clients and a semaphore of 4 at\n"
            "                       32, against exclusive locks on as many separate names,\n"
            "                       with hand-off p50s, and 32 readers queued behind a writer\n"
            "                       (table bench_modes)\n"
            "  --waiters N [--seconds S] [--kinds LIST] [--rowlock PATH] [CONNECTION OPTIONS]\n"
            "                       (first argument) what N idle waiters cost the server per\n"
            "                       kind: statements/s, server CPU, drain time and memory per\n"
            "                       waiter, against GET_LOCK (table bench_waiters)\n"
            "  -v, --verbose        progress on stderr\n"
            "  --help, --version\n"
            "\n"
            "The lock table defaults to bench_locks (not rowlock_locks); the bench migrates it,\n"
            "fills it and deletes every row it wrote, and refuses a table holding other rows.\n"
            "Exit status: 0 when every result's correctness check held, 1 otherwise,\n"
            "64 usage error, 69 database unavailable.\n\n%s",
            PROG, cli_conn_help);
}

/* Parse a comma list of names from `names` into a bit mask. */
static int parse_names(const char *arg, const char *const *names, int n, unsigned *mask)
{
    const char *p = arg;
    *mask = 0;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int k, found = 0;
        if (len == 3 && strncmp(p, "all", 3) == 0) {
            *mask |= (1u << n) - 1;
            found = 1;
        }
        for (k = 0; k < n && !found; k++) {
            if (strlen(names[k]) == len && strncmp(p, names[k], len) == 0) {
                *mask |= 1u << k;
                found = 1;
            }
        }
        if (!found || len == 0)
            return -1;
        p += len;
        if (*p == ',')
            p++;
    }
    return *mask ? 0 : -1;
}

static int parse_u64_list(const char *arg, uint64_t *out, unsigned maxn, unsigned *n,
                          unsigned long long lo, unsigned long long hi)
{
    char buf[256];
    char *tok, *save = NULL;
    setf(buf, sizeof buf, "%s", arg);
    *n = 0;
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned long long v;
        if (*n >= maxn || cli_parse_uint(tok, lo, hi, &v) != 0)
            return -1;
        out[(*n)++] = v;
    }
    return *n ? 0 : -1;
}

static const cli_optspec specs[] = {
    { "quick", 0, 0, O_QUICK },
    { "json", 0, 0, O_JSON },
    { "verbose", 'v', 0, O_VERBOSE },
    { "help", 'h', 0, O_HELP },
    { "version", 0, 0, O_VERSION },
    { "scenario", 0, 1, O_SCENARIO },
    { "strategies", 0, 1, O_STRATEGIES },
    { "seconds", 0, 1, O_SECONDS },
    { "clients", 0, 1, O_CLIENTS },
    { "many-clients", 0, 1, O_MANY },
    { "rows", 0, 1, O_ROWS },
    { "reaper-rows", 0, 1, O_REAPER_ROWS },
    { "reaper-batch", 0, 1, O_REAPER_BATCH },
    { "reaper-pause", 0, 1, O_REAPER_PAUSE },
    { "rounds", 0, 1, O_ROUNDS },
    { "hold-us", 0, 1, O_HOLD },
    { "nodes", 0, 1, O_NODES },
    { NULL, 0, 0, 0 },
};

static int parse_args(bench *b, int argc, char **argv)
{
    bench_cfg *c = &b->cfg;
    int id, seconds_set = 0, sizes_set = 0, reaper_set = 0;
    unsigned long long v;
    cli_optparser p;
    const char *val;

    c->sc_mask = (1u << SC_COUNT) - 1;
    c->st_mask = (1u << ST_COUNT) - 1;
    c->hot[0] = 2;
    c->hot[1] = 8;
    c->hot[2] = 32;
    c->nhot = 3;
    c->many = 8;
    c->hold_us = 50;
    c->reaper_pause = ROWLOCK_REAP_PAUSE_AUTO; /* the library's default */
    cli_opt_init(&p, PROG, NULL, argc, argv, 1);
    while ((id = cli_next_opt(&p, specs, &b->cc, &val)) != CLI_OP_END) {
        switch (id) {
        case CLI_OP_ERR:
            return CLI_EX_USAGE;
        case CLI_OP_CONN:
            break;
        case O_HELP:
            usage(stdout);
            return -1;
        case O_VERSION:
            printf("%s %s\n", PROG, rowlock_version());
            return -1;
        case O_QUICK:
            c->quick = 1;
            break;
        case O_JSON:
            c->json = 1;
            break;
        case O_VERBOSE:
            c->verbose = 1;
            break;
        case O_SCENARIO: {
            unsigned m;
            if (parse_names(val, sc_names, SC_COUNT, &m) != 0) {
                fprintf(stderr, "%s: --scenario: '%s' is not a list of uncontended, hot, many, "
                                "table_size, reaper\n", PROG, val);
                return CLI_EX_USAGE;
            }
            c->sc_mask = m;
            break;
        }
        case O_STRATEGIES: {
            unsigned m;
            if (parse_names(val, st_names, ST_COUNT, &m) != 0) {
                fprintf(stderr, "%s: --strategies: '%s' is not a list of insert, for-update, "
                                "optimistic, get_lock, raw_insert_delete, do1\n", PROG, val);
                return CLI_EX_USAGE;
            }
            c->st_mask = m;
            break;
        }
        case O_SECONDS:
            c->seconds = cli_parse_seconds(val);
            if (c->seconds < 0.05 || c->seconds > 3600) {
                fprintf(stderr, "%s: --seconds: '%s' is not a number of seconds in 0.05-3600\n", PROG, val);
                return CLI_EX_USAGE;
            }
            seconds_set = 1;
            break;
        case O_CLIENTS: {
            uint64_t l[MAX_HOT];
            unsigned n, k;
            if (parse_u64_list(val, l, MAX_HOT, &n, 1, 256) != 0) {
                fprintf(stderr, "%s: --clients: '%s' is not a list of 1-256 (at most %d)\n", PROG, val, MAX_HOT);
                return CLI_EX_USAGE;
            }
            for (k = 0; k < n; k++)
                c->hot[k] = (unsigned)l[k];
            c->nhot = n;
            break;
        }
        case O_MANY:
            if (cli_parse_uint(val, 1, 256, &v) != 0) {
                fprintf(stderr, "%s: --many-clients: '%s' is not a number in 1-256\n", PROG, val);
                return CLI_EX_USAGE;
            }
            c->many = (unsigned)v;
            break;
        case O_ROWS:
            if (parse_u64_list(val, c->sizes, MAX_SIZES, &c->nsizes, 0, 100000000) != 0) {
                fprintf(stderr, "%s: --rows: '%s' is not a list of row counts (at most %d, each <= 1e8)\n",
                        PROG, val, MAX_SIZES);
                return CLI_EX_USAGE;
            }
            sizes_set = 1;
            break;
        case O_REAPER_ROWS:
            if (cli_parse_uint(val, 1, 100000000, &v) != 0) {
                fprintf(stderr, "%s: --reaper-rows: '%s' is not a number in 1-1e8\n", PROG, val);
                return CLI_EX_USAGE;
            }
            c->reaper_rows = v;
            reaper_set = 1;
            break;
        case O_REAPER_BATCH:
            if (cli_parse_uint(val, 1, 1000000, &v) != 0) {
                fprintf(stderr, "%s: --reaper-batch: '%s' is not a number in 1-1000000\n", PROG, val);
                return CLI_EX_USAGE;
            }
            c->reaper_batch = (unsigned)v;
            break;
        case O_REAPER_PAUSE:
            if (cli_parse_pause(val, &c->reaper_pause) != 0) {
                fprintf(stderr, "%s: --reaper-pause: '%s' is not 'auto' or a number of ms in 0-60000\n", PROG, val);
                return CLI_EX_USAGE;
            }
            break;
        case O_ROUNDS:
            if (cli_parse_uint(val, 1, MAX_ROUNDS, &v) != 0) {
                fprintf(stderr, "%s: --rounds: '%s' is not a number in 1-%d\n", PROG, val, MAX_ROUNDS);
                return CLI_EX_USAGE;
            }
            c->rounds = (unsigned)v;
            break;
        case O_NODES: {
            char *list = strdup(val), *save = NULL, *tok;
            if (list == NULL)
                return CLI_EX_USAGE;
            c->nnodes = 0;
            for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (c->nnodes >= MAX_NODES || access(tok, R_OK) != 0) {
                    size_t w;
                    char *h = cli_human_str(tok, &w);
                    fprintf(stderr, "%s: --nodes: '%s' is not a readable option file (at most %d)\n", PROG,
                            h ? h : "?", MAX_NODES);
                    free(h);
                    free(list);
                    return CLI_EX_USAGE;
                }
                c->nodes[c->nnodes++] = strdup(tok);
            }
            free(list);
            if (c->nnodes == 0) {
                fprintf(stderr, "%s: --nodes: empty list\n", PROG);
                return CLI_EX_USAGE;
            }
            break;
        }
        case O_HOLD:
            if (cli_parse_uint(val, 0, 1000000, &v) != 0) {
                fprintf(stderr, "%s: --hold-us: '%s' is not a number in 0-1000000\n", PROG, val);
                return CLI_EX_USAGE;
            }
            c->hold_us = (unsigned)v;
            break;
        default:
            break;
        }
    }
    if (p.i < argc) {
        size_t w;
        char *h = cli_human_str(argv[p.i], &w);
        fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", PROG, h ? h : "?");
        free(h);
        return CLI_EX_USAGE;
    }
    if (!seconds_set)
        c->seconds = c->quick ? 0.5 : 4.0;
    if (c->rounds == 0)
        c->rounds = c->quick ? 1 : 4;
    if (!sizes_set) {
        c->sizes[0] = 0;
        c->sizes[1] = c->quick ? 1000 : 100000;
        c->sizes[2] = c->quick ? 10000 : 1000000;
        c->nsizes = 3;
    } else {
        /* ascending: the table is filled incrementally */
        unsigned x, y;
        for (x = 1; x < c->nsizes; x++)
            for (y = x; y > 0 && c->sizes[y - 1] > c->sizes[y]; y--) {
                uint64_t t = c->sizes[y];
                c->sizes[y] = c->sizes[y - 1];
                c->sizes[y - 1] = t;
            }
    }
    if (!reaper_set)
        c->reaper_rows = c->quick ? 10000 : 1000000;
    return 0;
}

/* Galera's certification failures and brute-force aborts, summed over the
 * --nodes (0 when a node does not answer). */
static void cluster_counters(bench *b, uint64_t *cert, uint64_t *bf)
{
    *cert = *bf = 0;
    for (unsigned i = 0; i < b->cfg.nnodes; i++) {
        rowlock_client_options o = b->wopts;
        char err[400];
        uint64_t v;
        o.defaults_file = b->cfg.nodes[i];
        MYSQL *m = raw_connect(&o, err, sizeof err);
        if (m == NULL)
            continue;
        if (q_u64(m, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = "
                     "'WSREP_LOCAL_CERT_FAILURES'", 0, &v, err, sizeof err) == 0)
            *cert += v;
        if (q_u64(m, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = "
                     "'WSREP_LOCAL_BF_ABORTS'", 0, &v, err, sizeof err) == 0)
            *bf += v;
        mysql_close(m);
    }
}

/* ---- setup and teardown ------------------------------------------------------------ */

static int setup(bench *b)
{
    char err[400], sql[512];
    uint64_t n = 0, r;
    int from = 0, to = 0, rc;
    unsigned char rnd[4];
    FILE *ur;

    rc = cli_conn_open(&b->cc, PROG, ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK, &b->admin);
    if (rc != 0)
        return rc;
    rc = rowlock_schema_migrate(b->admin, 0, &from, &to);
    if (rc != 0) {
        cli_report(PROG, "migrate", b->admin, rc);
        return cli_exit_for(rc);
    }
    setf(b->table, sizeof b->table, "%s", rowlock_client_table(b->admin));
    setf(b->scratch, sizeof b->scratch, "%s_raw", b->table);
    b->wopts = b->cc.opts;
    b->wopts.flags &= ~(unsigned int)ROWLOCK_CLIENT_SKIP_SCHEMA_CHECK;

    b->mon = raw_connect(&b->wopts, err, sizeof err);
    if (b->mon == NULL) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return CLI_EX_UNAVAILABLE;
    }
    if (q_str(b->mon, "SELECT VERSION()", 0, b->version, sizeof b->version, err, sizeof err) ||
        q_str(b->mon, "SELECT @@innodb_flush_log_at_trx_commit", 0, b->flush, sizeof b->flush, err, sizeof err) ||
        q_str(b->mon, "SELECT @@sync_binlog", 0, b->sync_binlog, sizeof b->sync_binlog, err, sizeof err) ||
        q_str(b->mon, "SELECT @@log_bin", 0, b->log_bin, sizeof b->log_bin, err, sizeof err) ||
        q_str(b->mon, "SELECT IFNULL(DATABASE(), '')", 0, b->db, sizeof b->db, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return CLI_EX_UNAVAILABLE;
    }
    /* The bench deletes what it wrote; refuse a table that holds anything else. */
    setf(sql, sizeof sql,
         "SELECT COUNT(*) FROM (SELECT 1 FROM `%s` WHERE name NOT LIKE 'bench-%%' AND "
         "name NOT LIKE 'fill-%%' LIMIT 1) AS x", b->table);
    if (q_u64(b->mon, sql, 0, &n, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return CLI_EX_UNAVAILABLE;
    }
    if (n != 0) {
        fprintf(stderr, "%s: table %s holds locks that rowlock-bench did not write; "
                        "use a table of its own (--table=bench_locks)\n", PROG, b->table);
        return CLI_EX_USAGE;
    }
    if (b->cfg.sc_mask & ((1u << SC_TABLE_SIZE) | (1u << SC_REAPER))) {
        if (q_u64(b->mon, "SELECT COUNT(*) FROM seq_1_to_1", 0, &n, err, sizeof err) != 0) {
            fprintf(stderr, "%s: table_size and reaper fill the table from MariaDB's Sequence "
                            "engine: %s\n", PROG, err);
            return CLI_EX_UNAVAILABLE;
        }
    }
    setf(sql, sizeof sql, "CREATE TABLE IF NOT EXISTS `%s` LIKE `%s`", b->scratch, b->table);
    if (q_exec(b->mon, sql, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return CLI_EX_UNAVAILABLE;
    }
    setf(sql, sizeof sql, "DELETE FROM `%s`", b->scratch);
    if (q_exec(b->mon, sql, NULL, err, sizeof err) != 0 || clean_table(b, b->table, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return CLI_EX_UNAVAILABLE;
    }

    r = (uint64_t)now_ns() ^ (uint64_t)getpid() << 20;
    ur = fopen("/dev/urandom", "rb");
    if (ur != NULL) {
        if (fread(rnd, 1, sizeof rnd, ur) == sizeof rnd)
            r ^= (uint64_t)rnd[0] | (uint64_t)rnd[1] << 8 | (uint64_t)rnd[2] << 16 | (uint64_t)rnd[3] << 24;
        fclose(ur);
    }
    setf(b->tag, sizeof b->tag, "%08x", (unsigned)(r & 0xffffffffu));
    return 0;
}

static void teardown(bench *b)
{
    char err[400], sql[256];
    if (b->mon != NULL) {
        if (clean_table(b, b->table, err, sizeof err) != 0) {
            fprintf(stderr, "%s: cleanup: %s\n", PROG, err);
            b->cleanup_ok = 0;
        }
        setf(sql, sizeof sql, "DROP TABLE IF EXISTS `%s`", b->scratch);
        if (b->scratch[0] && q_exec(b->mon, sql, NULL, err, sizeof err) != 0) {
            fprintf(stderr, "%s: cleanup: %s\n", PROG, err);
            b->cleanup_ok = 0;
        }
        mysql_close(b->mon);
        b->mon = NULL;
    }
    rowlock_client_free(b->admin);
    b->admin = NULL;
}

int main(int argc, char **argv)
{
    bench b;
    pthread_t wd;
    struct sigaction sa;
    int rc, all_ok = 1, wd_started;
    size_t k;
    int64_t t0 = now_ns();

    if (argc > 1 && strcmp(argv[1], "--modes") == 0)
        return bench_modes_main(argc - 1, argv + 1); /* shared locks and semaphores: modes.c */
    if (argc > 1 && strcmp(argv[1], "--waiters") == 0)
        return bench_waiters_main(argc - 1, argv + 1); /* idle waiters' cost: waiters.c */
    memset(&b, 0, sizeof b);
    b.cleanup_ok = 1;
    cli_conn_init(&b.cc);
    rc = parse_args(&b, argc, argv);
    if (rc != 0) {
        cli_conn_free(&b.cc);
        return rc < 0 ? 0 : rc;
    }
    if (b.cc.opts.table == NULL)
        b.cc.opts.table = "bench_locks";

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* the clients' reads carry on; loops poll the flag */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    if (rowlock_library_init() != 0) {
        fprintf(stderr, "%s: cannot initialise libmysqlclient\n", PROG);
        cli_conn_free(&b.cc);
        return CLI_EX_UNAVAILABLE;
    }
    wd_started = pthread_create(&wd, NULL, wd_main, NULL) == 0;
    wd_arm("connecting", 120.0);
    rc = setup(&b);
    wd_disarm();
    uint64_t cert0 = 0, bf0 = 0;
    if (rc == 0)
        cluster_counters(&b, &cert0, &bf0);
    if (rc == 0) {
        if (b.cfg.sc_mask & (1u << SC_UNCONTENDED))
            scenario_simple(&b, SC_UNCONTENDED);
        if (b.cfg.sc_mask & (1u << SC_HOT))
            scenario_simple(&b, SC_HOT);
        if (b.cfg.sc_mask & (1u << SC_MANY))
            scenario_simple(&b, SC_MANY);
        if (b.cfg.sc_mask & (1u << SC_TABLE_SIZE))
            scenario_table_size(&b);
        if (b.cfg.sc_mask & (1u << SC_REAPER))
            scenario_reaper(&b);
        if (b.cfg.nnodes > 0) {
            uint64_t cert1 = 0, bf1 = 0, ops = 0;
            cluster_counters(&b, &cert1, &bf1);
            for (k = 0; k < b.nres; k++)
                ops += b.res[k].ops;
            fprintf(stderr, "%s: %u nodes: %" PRIu64 " grants in all results; certification failures %" PRIu64
                            " (%.3f per grant), brute-force aborts %" PRIu64 " (%.3f per grant)\n",
                    PROG, b.cfg.nnodes, ops, cert1 - cert0, ops ? (double)(cert1 - cert0) / (double)ops : 0.0,
                    bf1 - bf0, ops ? (double)(bf1 - bf0) / (double)ops : 0.0);
        }
        wd_arm("cleaning up", 600.0);
    }
    teardown(&b);
    wd_disarm();
    if (wd_started) {
        A_STORE(&wd_quit, 1);
        pthread_join(wd, NULL);
    }

    if (rc == 0) {
        FILE *tf = b.cfg.json ? stderr : stdout;
        for (k = 0; k < b.nres; k++) {
            if (!b.res[k].ok)
                all_ok = 0;
            if (b.cfg.json)
                print_json(&b, &b.res[k]);
        }
        print_table(&b, tf);
        print_targets(&b, tf);
        fprintf(tf, "\n%zu results, %s; wall time %.1f s\n", b.nres,
                all_ok ? "all correctness checks held" : "SOME CORRECTNESS CHECKS FAILED",
                (double)(now_ns() - t0) / 1e9);
        if (!b.cleanup_ok) {
            fprintf(stderr, "%s: could not remove every row the bench wrote\n", PROG);
            all_ok = 0;
        }
        if (g_interrupted || b.nres == 0)
            all_ok = 0;
        rc = all_ok ? 0 : 1;
    }
    free(b.res);
    for (k = 0; k < b.cfg.nnodes; k++)
        free(b.cfg.nodes[k]);
    cli_conn_free(&b.cc);
    rowlock_library_end();
    fflush(stdout);
    return rc;
}
