/*
 * epoch.h: failover-safe leases on a primary-replica pair (epoch.c: the
 * design, what it assumes and costs).
 *
 * Offers: the check a grant needs first (one read per session of the
 * table's `<table>_epoch` row; the takeover after a failover; the wait until
 * the old server's leases have ended), the check of a grant that reached an
 * unchecked session, the check a renewal needs (the lock is lost after a
 * failover), the epoch a new grant records, and the session_ended hook's
 * part. Called by: lock.c (acquire, renew), client.c (the hook).
 *
 * Included by rowlock_int.h (after the types it needs); include that.
 */
#ifndef ROWLOCK_EPOCH_H
#define ROWLOCK_EPOCH_H

/* Before a grant attempt of l: 0 (grant allowed on this session),
 * ROWLOCK_EBUSY (the failover wait is longer than what is left of wait_ms,
 * counted from start_us: the wait is spent first), ROWLOCK_EINVALID (lease_ms
 * over the table's max_lease_ms), or a database error. */
int rowlock__epoch_grant_check(rowlock_lock *l, int64_t wait_ms, int64_t start_us, int64_t lease_ms);
/* After a grant: 1 if it was made on a checked session or the session it
 * reached passes the check without waiting; 0: release it unreported. */
int rowlock__epoch_grant_valid(rowlock_lock *l);
/* Before a renewal (what "renew", lease_ms) or a release ("release", 0) of
 * l: 0, ROWLOCK_ENOTOWNER (the server failed over since l's grant: lost),
 * ROWLOCK_EINVALID (lease over the maximum), or an error. */
int rowlock__epoch_renew_check(rowlock_lock *l, const char *what, int64_t lease_ms);
/* The epoch a grant made now on c records in l->epoch (0: not applicable). */
uint64_t rowlock__epoch_of_grant(const rowlock_client *c);
/* client.c's session_ended hook: the next session is checked again. No SQL. */
void rowlock__epoch_session_ended(rowlock_client *c);

#endif
