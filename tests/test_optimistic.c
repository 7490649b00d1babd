/*
 * The optimistic strategy's lease behaviour: the same cases as the insert
 * strategy (expiry takeover, renew, reaper, restarts, crashed holder), run
 * against a CAS-claimed row. See test_insert.c.
 */
#define LEASE_STRATEGY ROWLOCK_STRATEGY_OPTIMISTIC
#define LEASE_TABLE "t_optimistic"
#include "test_insert.c"
