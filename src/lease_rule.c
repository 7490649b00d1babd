/*
 * The choice of a lease rule (lease_rule.h): one probe of wsrep_on per
 * connection, whose answer picks the server rule (lease_server.c) or the
 * cluster rule (lease_cluster.c) for everything the connection does until
 * its session ends. The same probe answers for-update's question (it is
 * refused on a Galera node), so a connection asks the server once.
 *
 * ROWLOCK_LEASE_RULE=server|cluster forces a rule, for tests only: it can
 * switch a Galera client back to the rule the README shows to be unsafe
 * there, so only the test builds of the library (ROWLOCK_FAULT_INJECTION,
 * never installed) read it.
 */
#include "rowlock_int.h"

#include <stdlib.h>
#include <string.h>

static const char SQL_WSREP_ON[] = "/* rowlock:wsrep-on */ SELECT @@global.wsrep_on";

int rowlock__galera_node(rowlock_client *c, int *on)
{
    if (c->wsrep == 0) {
        rowlock__col col = { .type = ROWLOCK__T_I64 };
        /* Not rowlock__db_run_quiet: only "unknown variable" (no wsrep) is
         * an answer; any other failure is the result, with its error. */
        rowlock__errsave keep;
        rowlock__error_save(c, &keep);
        int rc = rowlock__db_run(c, RL_STMT(.what = "cluster check", .tmpl = SQL_WSREP_ON, .cols = &col, .ncols = 1));
        if (rc == ROWLOCK_EDB && c->db_errno == 1193 /* unknown variable: a server without wsrep */) {
            rowlock__error_restore(c, &keep);
            col.i = 0;
            col.is_null = 0;
        } else if (rc) {
            return rc;
        }
        c->wsrep = !col.is_null && col.i ? 2 : 1;
    }
    *on = c->wsrep == 2;
    return 0;
}

int rowlock__lease_rule_get(rowlock_client *c, const rowlock__lease_rule **out)
{
    if (c->rule == NULL) {
#ifdef ROWLOCK_FAULT_INJECTION
        const char *force = getenv("ROWLOCK_LEASE_RULE");
        if (force && strcmp(force, "cluster") == 0)
            c->rule = &rowlock__lease_rule_cluster;
        else if (force && strcmp(force, "server") == 0)
            c->rule = &rowlock__lease_rule_server;
#endif
        if (c->rule == NULL) {
            int galera = 0;
            int rc = rowlock__galera_node(c, &galera);
            if (rc)
                return rc;
            c->rule = galera ? &rowlock__lease_rule_cluster : &rowlock__lease_rule_server;
        }
    }
    *out = c->rule;
    return 0;
}

void rowlock__lease_rule_session_ended(rowlock_client *c)
{
    c->wsrep = 0;
    c->rule = NULL;
}

void rowlock__lease_rules_client_free(rowlock_client *c)
{
    static const rowlock__lease_rule *const all[] = { &rowlock__lease_rule_server, &rowlock__lease_rule_cluster };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->client_free)
            all[i]->client_free(c);
}
