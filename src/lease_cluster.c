/*
 * The cluster lease rule (lease_rule.h; chosen for a connection to a Galera
 * node): lease rows' grants, renewals and purges that do not depend on node
 * clocks agreeing (schema 0003: columns gen and lease_us, the token floor
 * table). lease.c calls it through rowlock__lease_rule_cluster only; it calls
 * row.c and the db layer (db.h), never lease.c.
 *
 * On one server, "the lease ended" is `expires_at <= UTC_TIMESTAMP(6)`: one
 * clock writes and reads expires_at. On a cluster every node writes
 * expires_at with its own clock and would judge other nodes' leases with it,
 * so a node whose clock is behind (or ahead) grants a lock that is still
 * held. Here a taker judges a lease by elapsed time on its own monotonic
 * clock instead:
 *
 *   - every write of a holder (grant, re-entry, renewal) bumps the row's
 *     `gen` and records the lease it asked for in `lease_us` (the largest
 *     since its grant);
 *   - a taker reads the row; when (token, gen) differ from what this handle
 *     saw last, it notes the time the read came back ("since");
 *   - it may take a held row only once it has seen (token, gen) unchanged
 *     for lease_us plus ROWLOCK__CLUSTER_DRIFT_PPM of it plus
 *     ROWLOCK__CLUSTER_MARGIN_US, and only with a compare-and-set on exactly
 *     that (token, gen): a renewal committed meanwhile, on any node, makes
 *     the CAS change nothing (same node) or fail certification (another
 *     node; 1213: busy).
 *
 * Why that is safe: the holder's promise (its safe-until, keeper.c) runs
 * from *before* it sent the write that produced what the taker saw, for the
 * lease minus a drift allowance. The taker's "since" is *after* it read that
 * write, so later; it waits the lease plus a drift allowance. Both are
 * monotonic clocks on their own machines: only their rates matter (bounded
 * by the two allowances together, 0.2 % of the lease), never their offsets.
 * Node clocks matter nowhere (expires_at is still written, for people and
 * for list/reap surveys).
 *
 * The cost: a taker of a row whose holder died waits a whole lease from the
 * time it first looked (on one server it may take a long-stale row at once);
 * a try-once caller takes such a row only if the same handle looked at it a
 * lease earlier. Free rows (released: owner NULL) are taken at once as
 * before. The waiter queue's hand-off is not used on a cluster (it is node-
 * local; waiters wait on the hint and poll).
 *
 * Tokens: as on one server (row token + 1, the sequence, the node's clock),
 * and above the token floor, which the reaper raises to the largest token
 * it deletes in the same transaction. A new row's token thus stays above
 * every earlier token of its name after a purge, whatever the creating
 * node's clock says. The floor is read with a share lock: an applier
 * committing a reaper's purge meanwhile aborts the claim (busy, retry)
 * instead of letting it see the row gone and the floor not yet raised.
 *
 * SQL and round trips (per attempt): CL_READ, then one of CL_CREATE (no row;
 * + 1 to take the hint), CL_CLAIM (free row, or a held row seen unchanged
 * for its lease), CL_REENTER (our own live row). Renew: CL_RENEW, 1 round
 * trip. Release: as on one server (lease.c).
 * Errors: as the strategies: 1205/1213 (also certification failures and
 * brute-force aborts) busy; duplicate key on CL_CREATE busy; 1146 ESCHEMA.
 */
#include "rowlock_int.h"

#include <stdlib.h>
#include <string.h>

/* Rates of monotonic clocks may differ by this much between a holder and a
 * taker, beyond the holder's own allowance (keeper.c); plus a fixed margin. */
#define ROWLOCK__CLUSTER_DRIFT_PPM 1000
#define ROWLOCK__CLUSTER_MARGIN_US 1000
/* A reservation of the next grant (fairness) that nobody used while the
 * row stayed unchanged this long beyond its lease is ignored. */
#define ROWLOCK__CLUSTER_RESERVE_GRACE_US 500000
/* A waiter's longest wait on the (node-local) wake-up hint between looks at
 * the row on a cluster, in s: a release on another node wakes nobody here,
 * and a waiter the next grant is reserved for must not sleep through it. */
#define ROWLOCK__CLUSTER_SLICE_S 0.05

/* A new token on a cluster: ROWLOCK__NEW_TOKEN and above the floor. */
#define CL_NEW_TOKEN ROWLOCK__CL_NEW_TOKEN

/* Params: name. The row as a taker needs it; lease_us 0 (a row written
 * before schema 0003, or by a single server) falls back to the row's own
 * expires_at - acquired_at, both from the clock of the node that wrote them. */
static const char CL_READ[] =
    "/* rowlock:cl-read */ SELECT strategy, IFNULL(owner, ''), owner IS NOT NULL, token, gen,"
    " IF(lease_us > 0, lease_us, GREATEST(IFNULL(TIMESTAMPDIFF(MICROSECOND, acquired_at, expires_at), 0), 0)),"
    " owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6), IFNULL(next_owner, ''), next_age "
    "FROM `{{table}}` WHERE name = ?";

/* Params: name, strategy, owner, lease µs, lease µs. */
static const char CL_CREATE[] =
    "/* rowlock:cl-create */ SET STATEMENT innodb_lock_wait_timeout={{waits}} FOR "
    "INSERT INTO `{{table}}` (name, strategy, owner, count, token, gen, lease_us, acquired_at, expires_at) "
    "VALUES (?, ?, ?, 1, LAST_INSERT_ID(" CL_NEW_TOKEN "), 1, ?, UTC_TIMESTAMP(6), "
    "UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)";

/* Params: owner, lease µs, lease µs, name, strategy, token seen, gen seen,
 * "seen unchanged for its lease" (1/0), owner, a reservation seen unused
 * long enough to be ignored ('' if none), RL_HINT_TRY. Rows changed: 1
 * granted (and any reservation consumed); 0 the row moved on, is held,
 * is reserved for another waiter, or the hint's waiter is first. */
static const char CL_CLAIM[] =
    "/* rowlock:cl-claim */ SET STATEMENT innodb_lock_wait_timeout={{waits}} FOR "
    "UPDATE `{{table}}` SET owner = ?, count = 1, token = LAST_INSERT_ID(GREATEST(token + 1, " CL_NEW_TOKEN ")),"
    " gen = gen + 1, lease_us = ?, acquired_at = UTC_TIMESTAMP(6), expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,"
    " next_owner = NULL, next_age = 0 "
    "WHERE name = ? AND strategy = ? AND token = ? AND gen = ? AND (owner IS NULL OR ?)"
    " AND (next_owner IS NULL OR next_owner = ? OR next_owner = ?) AND " ROWLOCK__HINT_TRY;

/* Params: owner, age, name, strategy, owner, age. Reserve the next grant
 * for this waiter, unless a waiter that saw as many grants pass holds it. */
static const char CL_RESERVE[] =
    "/* rowlock:cl-reserve */ UPDATE `{{table}}` SET next_owner = ?, next_age = ? "
    "WHERE name = ? AND strategy = ? AND (next_owner IS NULL OR (next_owner <> ? AND next_age < ?))";

/* Params: name, owner. */
static const char CL_UNRESERVE[] =
    "/* rowlock:cl-unreserve */ UPDATE `{{table}}` SET next_owner = NULL, next_age = 0 "
    "WHERE name = ? AND next_owner = ?";

/* Params: increment, lease µs, lease µs, name, strategy, owner, token, gen. */
static const char CL_REENTER[] =
    "/* rowlock:cl-reenter */ SET STATEMENT innodb_lock_wait_timeout={{waits}} FOR "
    "UPDATE `{{table}}` SET count = count + ?, gen = gen + 1, lease_us = GREATEST(lease_us, ?),"
    " expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) "
    "WHERE name = ? AND strategy = ? AND owner = ? AND token = ? AND gen = ?";

/* Adopting our owner's live row (lease.c, after a claim whose reply was
 * lost): a holder write, so it
 * bumps gen (a taker watching the row must start over) and records the
 * lease; no expires_at test (node clocks): the row still naming our owner
 * means no taker's compare-and-set took it. Params: lease µs, lease µs,
 * name, owner, strategy. */
static const char CL_ADOPT[] =
    "/* rowlock:cl-adopt */ SET STATEMENT innodb_lock_wait_timeout=1 FOR UPDATE `{{table}}` SET count = 1,"
    " gen = gen + 1, lease_us = GREATEST(lease_us, ?), token = LAST_INSERT_ID(token),"
    " expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND "
    "WHERE name = ? AND owner = ? AND strategy = ?";


/* Params: lease µs, lease µs, name, owner, token, strategy. Rows changed:
 * 1 renewed, 0 lost. No clock in the condition: a row still naming our
 * owner and token was taken by nobody (a taker changes the token). */
static const char CL_RENEW[] =
    "/* rowlock:cl-renew */ UPDATE `{{table}}` SET gen = gen + 1, lease_us = GREATEST(lease_us, ?),"
    " expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND "
    "WHERE name = ? AND owner = ? AND token = ? AND strategy = ?";

/* How long a taker must see a held row unchanged, in µs (lease_rule.h). */
int64_t rowlock__cluster_wait_us(int64_t lease_us)
{
    return lease_us + lease_us / 1000000 * ROWLOCK__CLUSTER_DRIFT_PPM + ROWLOCK__CLUSTER_MARGIN_US;
}

typedef struct cl_row {
    int exists;
    int strategy;
    char owner[ROWLOCK_OWNER_MAX + 1];
    int held;
    uint64_t token, gen;
    int64_t lease_us;
    int live_here; /* held and live by this node's clock (our own rows only) */
    char next[ROWLOCK_OWNER_MAX + 1]; /* the waiter that reserved the next grant, or "" */
    unsigned next_age;
} cl_row;

static uint64_t hash64(const char *s)
{
    return rowlock__fnv1a(ROWLOCK__FNV1A_START, s, strlen(s));
}

static int cl_read(rowlock_lock *l, cl_row *r)
{
    rowlock_client *c = l->client;
    rowlock__col cols[9];
    memset(cols, 0, sizeof cols);
    memset(r, 0, sizeof *r);
    cols[0].type = ROWLOCK__T_I64;
    cols[1] = (rowlock__col){ .type = ROWLOCK__T_STR, .buf = r->owner, .cap = sizeof r->owner };
    cols[2].type = ROWLOCK__T_I64;
    cols[3].type = ROWLOCK__T_U64;
    cols[4].type = ROWLOCK__T_U64;
    cols[5].type = ROWLOCK__T_I64;
    cols[6].type = ROWLOCK__T_I64;
    cols[7] = (rowlock__col){ .type = ROWLOCK__T_STR, .buf = r->next, .cap = sizeof r->next };
    cols[8].type = ROWLOCK__T_I64;
    rowlock__param p = RL_STR(l->name, l->name_len);
    rowlock__res res;
    int rc = rowlock__db_run(c, RL_STMT(.what = "read lock row", .tmpl = CL_READ, .params = &p, .nparams = 1,
                                        .cols = cols, .ncols = 9, .res = &res));
    if (rc)
        return rc;
    if (res.rows == 0)
        return 0;
    r->exists = 1;
    r->strategy = (int)cols[0].i;
    r->held = cols[2].i != 0;
    r->token = cols[3].u;
    r->gen = cols[4].u;
    r->lease_us = cols[5].i;
    r->live_here = cols[6].i != 0;
    r->next_age = (unsigned)cols[8].i;
    return 0;
}

static int cluster_attempt(rowlock_lock *l, int64_t lease_ms, int64_t remaining_ms, unsigned flags)
{
    rowlock_client *c = l->client;
    rowlock__lease_lock *L = ROWLOCK__LEASE(l);
    const long waits = remaining_ms == 0 ? 0 : 1000;
    const int64_t lease_us = lease_ms * 1000;
    const int sid = (int)l->ops->id;
    rowlock__res res;
    cl_row r;
    int rc = cl_read(l, &r);
    if (rc)
        return rc;
    const int64_t seen_at = rowlock__now_us(); /* after the read came back */
    if (!r.exists) {
        rowlock__param p[5] = { RL_STR(l->name, l->name_len), RL_I64(sid), RL_STR(c->owner, c->owner_len),
                                RL_I64(lease_us), RL_I64(lease_us) };
        rc = rowlock__db_run(c, RL_STMT(.what = "acquire (cluster)", .tmpl = CL_CREATE, .variant = waits, .params = p,
                                        .nparams = 5, .res = &res));
        if (rc == ROWLOCK_EDB && rowlock__db_classify(c->db_errno) == ROWLOCK__DB_DUP)
            return ROWLOCK_EBUSY; /* another creator won */
        if (rc)
            return rc;
        l->token = res.insert_id;
        L->hint_owed = 1; /* a new row: its INSERT took no hint (lease.c takes it) */
        return 0;
    }
    if (r.strategy != sid)
        return rowlock__explain_busy(l);
    if (r.held && r.owner[0] == '\0') {
        l->found_multi = 1; /* a multi-holder name (holders.c): never taken over here */
        return ROWLOCK_EBUSY;
    }
    const uint64_t next = r.next[0] ? hash64(r.next) : 0;
    if (!L->cl_seen || r.token != L->cl_token || r.gen != L->cl_gen || r.held != L->cl_held || next != L->cl_next) {
        L->cl_seen = 1;
        L->cl_token = r.token;
        L->cl_gen = r.gen;
        L->cl_held = r.held;
        L->cl_next = next;
        L->cl_since_us = seen_at;
    }
    if (L->cl_age_token != 0 && r.token != L->cl_age_token)
        L->cl_age++; /* a grant passed while we waited */
    L->cl_age_token = r.token;
    if (r.held && r.live_here && strcmp(r.owner, c->owner) == 0) {
        /* Our owner's row, live by this node's clock (a lapsed one of ours
         * is claimed anew below: nobody else judges it by that clock). */
        rowlock__param p[8] = { RL_I64((flags & ROWLOCK__TRY_HANDED) ? 0 : 1),
                                RL_I64(lease_us),
                                RL_I64(lease_us),
                                RL_STR(l->name, l->name_len),
                                RL_I64(sid),
                                RL_STR(c->owner, c->owner_len),
                                RL_U64(r.token),
                                RL_U64(r.gen) };
        rc = rowlock__db_run(c, RL_STMT(.what = "acquire (cluster)", .tmpl = CL_REENTER, .variant = waits, .params = p,
                                        .nparams = 8, .res = &res));
        if (rc)
            return rc;
        if (res.affected != 1)
            return ROWLOCK_EBUSY;
        l->token = r.token;
        return 0;
    }
    const int64_t seen_for = seen_at - L->cl_since_us;
    const int64_t lease_wait = r.held ? rowlock__cluster_wait_us(r.lease_us) : 0;
    const int ours = strcmp(r.owner, c->owner) == 0;
    int ended = !r.held || ours || seen_for >= lease_wait;
    /* A reservation of another waiter holds unless it went unused while
     * the row stayed as it is for the lease and a grace period. */
    const int mine = r.next[0] && strcmp(r.next, c->owner) == 0;
    const int other = r.next[0] && !mine;
    const int stale = other && seen_for >= lease_wait + ROWLOCK__CLUSTER_RESERVE_GRACE_US;
    if (ended && (!other || stale)) {
        unsigned fl = mine ? flags | ROWLOCK__TRY_UNGATED : flags; /* the reserved waiter skips the gate */
        const char *over = stale ? r.next : "";
        rowlock__param p[13] = { RL_STR(c->owner, c->owner_len), RL_I64(lease_us), RL_I64(lease_us),
                                 RL_STR(l->name, l->name_len), RL_I64(sid), RL_U64(r.token), RL_U64(r.gen),
                                 RL_I64(r.held), RL_STR(c->owner, c->owner_len), RL_STR(over, strlen(over)),
                                 RL_HINT_TRY(l, fl) };
        rc = rowlock__db_run(c, RL_STMT(.what = "acquire (cluster)", .tmpl = CL_CLAIM, .variant = waits, .params = p,
                                        .nparams = 13, .res = &res));
        if (rc)
            return rc;
        if (res.affected == 1) {
            l->token = res.insert_id;
            L->cl_seen = 0;
            L->cl_reserved = 0;
            return 0;
        }
    }
    /* Busy. A waiter reserves the next grant, so that a release on another
     * node cannot hand the lock round its own node's waiters forever: the
     * row is granted to the reserving waiter only (one write, only when it
     * changes the row). */
    if (remaining_ms != 0 && !mine && (!other || r.next_age < L->cl_age)) {
        rowlock__param p[6] = { RL_STR(c->owner, c->owner_len), RL_I64(L->cl_age), RL_STR(l->name, l->name_len),
                                RL_I64(sid), RL_STR(c->owner, c->owner_len), RL_I64(L->cl_age) };
        /* Not rowlock__db_run_quiet: a failed reservation leaves the
         * client's error as it was (the attempt stays EBUSY), except a lost
         * connection, whose error is the result. */
        rowlock__errsave keep;
        rowlock__error_save(c, &keep);
        rc = rowlock__db_run(c, RL_STMT(.what = "acquire (cluster): reserve", .tmpl = CL_RESERVE, .params = p,
                                        .nparams = 6, .res = &res));
        if (rc == 0 && res.affected == 1)
            L->cl_reserved = 1;
        else if (rc != 0 && rowlock__db_classify(c->db_errno) == ROWLOCK__DB_CONN)
            return rc;
        rowlock__error_restore(c, &keep);
    }
    return ROWLOCK_EBUSY;
}

static void cluster_wait_end(rowlock_lock *l, int rc)
{
    rowlock__lease_lock *L = ROWLOCK__LEASE(l);
    rowlock_client *c = l->client;
    if (rc != 0 && L->cl_reserved && c->connected) {
        rowlock__param p[2] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len) };
        (void)rowlock__db_run_quiet(c, RL_STMT(.what = "acquire (cluster): unreserve", .tmpl = CL_UNRESERVE,
                                               .params = p, .nparams = 2));
    }
    L->cl_reserved = 0;
    L->cl_age = 0;
    L->cl_age_token = 0;
}

/*
 * The reaper on a cluster. Released rows (owner NULL) are purged as on one
 * server, by expires_at (the release time by the releasing node's clock:
 * a skewed clock only makes the grace longer or shorter, never unsafe).
 * A held row whose lease ended by this node's clock is only a candidate:
 * it is purged once this client has seen its (token, gen) unchanged for its
 * lease (cluster_wait_us), the taker's rule above, and then by a delete
 * conditional on that (token, gen), so a renewal committed meanwhile on any
 * node saves the row (it changed: 0 rows; or the delete fails
 * certification: busy). The watch counts either across calls on the same
 * client (a reaper that keeps its client: the first call that sees a row
 * records it) or, with wait_leases, within one call: it surveys the
 * candidates, sleeps until each one's lease has passed (within max_us) and
 * judges it. Every delete raises the token floor to the largest deleted
 * token in the same transaction. A dry run watches the same way and asks
 * the delete's predicate with a causal read instead of deleting.
 *
 * Candidates are surveyed a page (batch rows) at a time in (expires_at,
 * name) order, each page after the last row of the previous one, so rows
 * renewed by a node whose clock is behind (still looking stale) cannot
 * hold the survey on one page; each page is watched for its own lease.
 * Held rows are deleted one per transaction (a renewal of one must not
 * roll back the others' purge).
 */
/* Params: grace µs, batch. */
static const char CL_REAP_FREE[] =
    "/* rowlock:cl-reap-free */ SET STATEMENT innodb_lock_wait_timeout=1 FOR "
    "DELETE FROM `{{table}}` WHERE owner IS NULL AND expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND "
    "AND @@in_transaction = 1 ORDER BY expires_at LIMIT ? RETURNING token";
/* Params: grace µs. What CL_REAP_FREE would delete (a dry run). */
static const char CL_REAP_FREE_COUNT[] =
    "/* rowlock:cl-reap-free-count */ SELECT COUNT(*) FROM `{{table}}` "
    "WHERE owner IS NULL AND expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND";
/* Params: grace µs. 1 if a row stale by this node's clock is left (the
 * budget stopped the purge: "more remain" must be true). */
static const char CL_REAP_LEFT[] =
    "/* rowlock:cl-reap-left */ SELECT EXISTS(SELECT 1 FROM `{{table}}` "
    "WHERE expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)";
/* Params: grace µs, after µs, after µs, after name, batch. Candidates: held
 * rows stale by this node's clock, one page after (expires_at, name). */
static const char CL_REAP_SURVEY[] =
    "/* rowlock:cl-reap-survey */ SELECT name, token, gen,"
    " IF(lease_us > 0, lease_us, GREATEST(IFNULL(TIMESTAMPDIFF(MICROSECOND, acquired_at, expires_at), 0), 0)),"
    " TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires_at) "
    "FROM `{{table}}` WHERE owner IS NOT NULL AND expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND"
    " AND (expires_at > '1970-01-01' + INTERVAL ? MICROSECOND"
    " OR (expires_at = '1970-01-01' + INTERVAL ? MICROSECOND AND name > ?)) "
    "ORDER BY expires_at, name LIMIT ?";
/* Params: name, token, gen. */
static const char CL_REAP_ONE[] =
    "/* rowlock:cl-reap-one */ SET STATEMENT innodb_lock_wait_timeout=1 FOR "
    "DELETE FROM `{{table}}` WHERE name = ? AND token = ? AND gen = ? AND owner IS NOT NULL AND @@in_transaction = 1 "
    "RETURNING token";
/* Params: name, token, gen. CL_REAP_ONE's predicate as a read that sees
 * every write committed anywhere before it (a dry run). */
static const char CL_REAP_PEEK[] =
    "/* rowlock:cl-reap-peek */ SET STATEMENT wsrep_sync_wait = 1 FOR "
    "SELECT COUNT(*) FROM `{{table}}` WHERE name = ? AND token = ? AND gen = ? AND owner IS NOT NULL";
/* Params: token. */
static const char CL_FLOOR_RAISE[] =
    "/* rowlock:cl-floor */ INSERT INTO `{{table}}_floor` (id, token) VALUES (1, ?) "
    "ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))";

typedef struct reap_seen {
    char name[ROWLOCK_NAME_MAX + 1];
    uint64_t token, gen;
    int64_t since_us, lease_us;
    int mark; /* in the current page */
} reap_seen;

typedef struct reap_state {
    reap_seen *v;
    size_t n, cap;
} reap_state;

static void cluster_client_free(rowlock_client *c)
{
    reap_state *s = c->cluster;
    if (s)
        free(s->v);
    free(s);
    c->cluster = NULL;
}

struct max_ctx {
    rowlock__col col;
    uint64_t max, rows;
};

static int max_row(void *arg)
{
    struct max_ctx *m = arg;
    if (!m->col.is_null && m->col.u > m->max)
        m->max = m->col.u;
    m->rows++;
    return 0;
}

/* One delete statement and the floor raise, in one transaction. Returns
 * 0 (*deleted set), EBUSY (rolled back: try later) or an error. */
static int delete_raising_floor(rowlock_client *c, const char *sql, const rowlock__param *p, unsigned np,
                                uint64_t *deleted)
{
    struct max_ctx m;
    memset(&m, 0, sizeof m);
    m.col.type = ROWLOCK__T_U64;
    *deleted = 0;
    int rc = rowlock__db_simple(c, "reap: isolation",
                                "/* rowlock:reap-isolation */ SET TRANSACTION ISOLATION LEVEL READ COMMITTED");
    if (rc == 0)
        rc = rowlock__db_simple(c, "reap: begin", "/* rowlock:cl-reap-begin */ START TRANSACTION");
    if (rc)
        return rc;
    rc = rowlock__db_run(c, RL_STMT(.what = "reap: delete", .tmpl = sql, .params = p, .nparams = np, .cols = &m.col,
                                    .ncols = 1, .row_fn = max_row, .arg = &m));
    /* The deletes change nothing outside this transaction (@@in_transaction
     * in their condition): a brute-force abort whose error the server never
     * sent must not leave a delete autocommitted apart from its floor. */
    if (rc == 0 && !rowlock__db_in_transaction(c))
        rc = rowlock__fail(c, ROWLOCK_EBUSY, "reap: the cluster aborted the transaction");
    if (rc == 0 && m.rows > 0) {
        rowlock__param pf = RL_U64(m.max);
        rc = rowlock__db_run(c, RL_STMT(.what = "reap: token floor", .tmpl = CL_FLOOR_RAISE, .params = &pf,
                                        .nparams = 1));
    }
    if (rc == 0)
        rc = rowlock__db_simple(c, "reap: commit", "/* rowlock:cl-reap-commit */ COMMIT");
    if (rc) {
        rowlock__db_rollback(c, "reap: rollback", "/* rowlock:cl-reap-rollback */ ROLLBACK");
        return rc;
    }
    *deleted = m.rows;
    return 0;
}

struct survey_ctx {
    rowlock__col cols[5];
    char name[ROWLOCK_NAME_MAX + 1];
    reap_state *s;
    int64_t now;
    uint64_t rows;
    char last_name[ROWLOCK_NAME_MAX + 1]; /* the page's last row: the next page starts after it */
    int64_t last_exp;
    int oom;
};

static int survey_row(void *arg)
{
    struct survey_ctx *x = arg;
    reap_state *s = x->s;
    x->rows++;
    rowlock__strlcpy(x->last_name, x->name, sizeof x->last_name);
    x->last_exp = x->cols[4].i;
    for (size_t i = 0; i < s->n; i++) {
        reap_seen *e = &s->v[i];
        if (strcmp(e->name, x->name) == 0) {
            if (e->token != x->cols[1].u || e->gen != x->cols[2].u) {
                e->token = x->cols[1].u;
                e->gen = x->cols[2].u;
                e->since_us = x->now;
            }
            e->lease_us = x->cols[3].i;
            e->mark = 1;
            return 0;
        }
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        reap_seen *v = realloc(s->v, cap * sizeof *v);
        if (!v) {
            x->oom = 1;
            return 0;
        }
        s->v = v;
        s->cap = cap;
    }
    reap_seen *e = &s->v[s->n++];
    rowlock__strlcpy(e->name, x->name, sizeof e->name);
    e->token = x->cols[1].u;
    e->gen = x->cols[2].u;
    e->since_us = x->now;
    e->lease_us = x->cols[3].i;
    e->mark = 1;
    return 0;
}

/* Judge one watched row: purge it if its (token, gen) is as seen (dry run:
 * count it), else count it changed. Either way it is settled. */
static int reap_judge(rowlock_client *c, const reap_seen *e, int dry_run, rowlock_reap_stats *st)
{
    rowlock__param p[3] = { RL_STR(e->name, strlen(e->name)), RL_U64(e->token), RL_U64(e->gen) };
    uint64_t n = 0;
    int rc;
    if (dry_run) {
        rowlock__col col = { .type = ROWLOCK__T_I64 };
        rc = rowlock__db_run(c, RL_STMT(.what = "reap: peek", .tmpl = CL_REAP_PEEK, .params = p, .nparams = 3,
                                        .cols = &col, .ncols = 1));
        n = rc == 0 && col.i > 0;
    } else {
        rc = delete_raising_floor(c, CL_REAP_ONE, p, 3, &n);
    }
    if (rc == ROWLOCK_EBUSY) {
        /* A lock wait timeout or a certification failure: another
         * transaction wrote the row (its holder renewing, most likely). */
        st->changed++;
        return 0;
    }
    if (rc)
        return rc;
    if (n > 0) {
        st->purged += n;
        st->batches += !dry_run;
    } else {
        st->changed++; /* renewed, released or taken over since it was seen */
    }
    return 0;
}

static int64_t seen_due(const reap_seen *e)
{
    return e->since_us + rowlock__cluster_wait_us(e->lease_us);
}

static int cluster_reap(rowlock_client *c, int64_t grace_ms, uint64_t batch, int64_t max_us, int wait_leases,
                        int dry_run, int64_t start, rowlock_reap_stats *st)
{
    reap_state *s = c->cluster;
    if (s == NULL && (s = c->cluster = calloc(1, sizeof *s)) == NULL)
        return rowlock__fail(c, ROWLOCK_ENOMEM, "reap: out of memory");
    const int64_t deadline = max_us > 0 ? start + max_us : INT64_MAX;
    int rc = 0, stopped = 0;
    /* Released rows, in batches (a dry run: counted by the same predicate). */
    if (dry_run) {
        rowlock__param pg = RL_I64(grace_ms * 1000);
        rowlock__col col = { .type = ROWLOCK__T_I64 };
        rc = rowlock__db_run(c, RL_STMT(.what = "reap: survey", .tmpl = CL_REAP_FREE_COUNT, .params = &pg,
                                        .nparams = 1, .cols = &col, .ncols = 1));
        if (rc)
            return rc;
        st->purged += (uint64_t)col.i;
    }
    while (!dry_run) {
        if (rowlock__now_us() >= deadline) {
            stopped = 1;
            break;
        }
        rowlock__param p[2] = { RL_I64(grace_ms * 1000), RL_U64(batch) };
        uint64_t n = 0;
        rc = delete_raising_floor(c, CL_REAP_FREE, p, 2, &n);
        if (rc == ROWLOCK_EBUSY) {
            rowlock__sleep_us(1000);
            continue;
        }
        if (rc)
            return rc;
        st->batches++;
        st->purged += n;
        if (n < batch)
            break;
    }
    /* Held rows whose lease ended by this node's clock, a page at a time. */
    struct survey_ctx x;
    memset(&x, 0, sizeof x);
    x.s = s;
    x.cols[0] = (rowlock__col){ .type = ROWLOCK__T_STR, .buf = x.name, .cap = sizeof x.name };
    x.cols[1].type = ROWLOCK__T_U64;
    x.cols[2].type = ROWLOCK__T_U64;
    x.cols[3].type = ROWLOCK__T_I64;
    x.cols[4].type = ROWLOCK__T_I64;
    for (size_t i = 0; i < s->n; i++)
        s->v[i].mark = 0;
    int64_t after_exp = 0;
    char after_name[ROWLOCK_NAME_MAX + 1] = "";
    while (!stopped) {
        if (rowlock__now_us() >= deadline) {
            stopped = 1;
            break;
        }
        rowlock__param ps[5] = { RL_I64(grace_ms * 1000), RL_I64(after_exp), RL_I64(after_exp),
                                 RL_STR(after_name, strlen(after_name)), RL_U64(batch) };
        x.rows = 0;
        x.now = rowlock__now_us(); /* before the survey: a row first seen now counts from its end */
        rc = rowlock__db_run(c, RL_STMT(.what = "reap: survey", .tmpl = CL_REAP_SURVEY, .params = ps, .nparams = 5,
                                        .cols = x.cols, .ncols = 5, .row_fn = survey_row, .arg = &x));
        if (rc)
            return rc;
        if (x.oom)
            return rowlock__fail(c, ROWLOCK_ENOMEM, "reap: out of memory");
        /* A row first seen in this survey counts from after it came back. */
        const int64_t after = rowlock__now_us();
        for (size_t i = 0; i < s->n; i++)
            if (s->v[i].mark && s->v[i].since_us == x.now)
                s->v[i].since_us = after;
        /* Judge this page's rows as their watch ends: at once for those an
         * earlier call saw, after a sleep with wait_leases. */
        for (;;) {
            int64_t next = INT64_MAX;
            size_t pending = 0;
            for (size_t i = 0; i < s->n; i++)
                if (s->v[i].mark == 1) {
                    pending++;
                    next = seen_due(&s->v[i]) < next ? seen_due(&s->v[i]) : next;
                }
            if (pending == 0)
                break;
            int64_t now = rowlock__now_us();
            if (next > now) {
                if (!wait_leases || next > deadline) {
                    /* Not watched for a lease: left (with wait_leases, the
                     * budget is too short: more remain). */
                    st->unjudged += pending;
                    for (size_t i = 0; i < s->n; i++)
                        if (s->v[i].mark == 1)
                            s->v[i].mark = 2;
                    if (wait_leases)
                        stopped = 1;
                    break;
                }
                rowlock__sleep_us(next - now);
                st->waited_us += rowlock__now_us() - now;
                now = rowlock__now_us();
            }
            for (size_t i = 0; i < s->n && !stopped; i++) {
                reap_seen *e = &s->v[i];
                if (e->mark != 1 || seen_due(e) > now)
                    continue;
                if (rowlock__now_us() >= deadline) {
                    stopped = 1; /* start no new purge after the budget */
                    break;
                }
                if ((rc = reap_judge(c, e, dry_run, st)))
                    return rc;
                e->mark = 3;
            }
            if (stopped) {
                for (size_t i = 0; i < s->n; i++)
                    if (s->v[i].mark == 1) {
                        st->unjudged++;
                        s->v[i].mark = 2;
                    }
            }
        }
        if (x.rows < batch)
            break;
        after_exp = x.last_exp;
        rowlock__strlcpy(after_name, x.last_name, sizeof after_name);
    }
    /* Keep for a later call the rows left unjudged (mark 2); forget the rest
     * (settled, or not seen stale again: renewed, taken or gone). */
    size_t keep = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].mark == 2)
            s->v[keep++] = s->v[i];
    s->n = keep;
    if (stopped) {
        /* The budget stopped it: "more remain" only if some do. */
        rowlock__param pg = RL_I64(grace_ms * 1000);
        rowlock__col left = { .type = ROWLOCK__T_I64 };
        rc = rowlock__db_run(c, RL_STMT(.what = "reap: rows left", .tmpl = CL_REAP_LEFT, .params = &pg, .nparams = 1,
                                        .cols = &left, .ncols = 1));
        if (rc)
            return rc;
        st->complete = left.i == 0;
    } else {
        st->complete = 1;
    }
    return 0;
}

const rowlock__lease_rule rowlock__lease_rule_cluster = {
    .name = "cluster",
    .flags = ROWLOCK__RULE_CAUSAL,
    .slice_max_s = ROWLOCK__CLUSTER_SLICE_S,
    .attempt = cluster_attempt,
    .wait_end = cluster_wait_end,
    .renew_sql = CL_RENEW,
    .adopt_sql = CL_ADOPT,
    .lease_args = 2,
    .reap = cluster_reap,
    .client_free = cluster_client_free,
};
