/*
 * The server lease rule (lease_rule.h): one server's clock judges every
 * lease. A lease has ended when `expires_at <= UTC_TIMESTAMP(6)`, written
 * and read by the same clock, so a taker may take a long-stale row at once.
 * The strategies' own attempts (strategy_insert.c, strategy_optimistic.c)
 * claim by that condition; this file adds the renewal and the adoption of a
 * lease row, and says which parts of the lease protocol apply: all of them
 * (the waiter queue's hand-off, multi-holder names, plain reads).
 */
#include "rowlock_int.h"

/* Params: lease µs, name, owner, token, strategy. Rows changed: 1 renewed, 0 lost.
 * A renewal never shortens the lease: the holder's keeper counts its safe
 * time as the greatest (send time + lease) of the renewals the server
 * confirmed, which only holds if none of them can end the lease earlier
 * than another did (a keeper renewing with a shorter lease than the
 * acquire's, or two handles of one client sharing a grant with different
 * leases, would otherwise be told it is safe past the lease's real end).
 * gen + 1 (what every holder's write does, sql/0003) makes every renewal a
 * change: a lease kept as it was would otherwise count 0 rows changed, the
 * answer for a lost lock. */
static const char LEASE_RENEW[] =
    "/* rowlock:renew */ UPDATE `{{table}}` SET gen = gen + 1,"
    " expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) "
    "WHERE name = ? AND owner = ? AND token = ? AND strategy = ? AND expires_at > UTC_TIMESTAMP(6)";

/* Params: lease µs, name, owner, strategy. Our owner's live row: count 1,
 * the lease re-armed from now, the token kept (LAST_INSERT_ID). */
static const char LEASE_ADOPT[] =
    "/* rowlock:adopt */ SET STATEMENT innodb_lock_wait_timeout=1 FOR UPDATE `{{table}}` SET count = 1, token = LAST_INSERT_ID(token),"
    " expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND "
    "WHERE name = ? AND owner = ? AND strategy = ? AND expires_at > UTC_TIMESTAMP(6)";

const rowlock__lease_rule rowlock__lease_rule_server = {
    .name = "server",
    .flags = ROWLOCK__RULE_QUEUE | ROWLOCK__RULE_CLOCK,
    .renew_sql = LEASE_RENEW,
    .adopt_sql = LEASE_ADOPT,
    .lease_args = 1,
};
