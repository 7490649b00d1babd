/*
 * holders.h: the modes of the insert strategy (holders.c): shared locks and
 * semaphores, names with several holders in <table>_hold.
 *
 * Offers: the acquire of a strategy with modes (holders table or the
 * strategy's one-row protocol), release and renewal of a holders-table
 * grant, inspect of a multi-holder name, and the reaper's part. Called by:
 * strategy_insert.c (its acquire, release, renew, inspect), admin.c (reap,
 * force release through the public rowlock_force_release_holder).
 *
 * Included by rowlock_int.h (after the types it needs); include that.
 */
#ifndef ROWLOCK_HOLDERS_H
#define ROWLOCK_HOLDERS_H

/* The acquire of a strategy with modes (the insert strategy's): through
 * the holders table for shared and semaphore handles and for names with a
 * multi-holder row, else `one_row` (the strategy's one-row protocol), which
 * stops with l->found_multi when it finds such a row. The strategy's
 * release and renew follow l->held_multi. */
typedef int (*rowlock__acquire_fn)(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms);
/* The queue ('q') or awake ('a') lock of the holders-table entry h (SQL
 * over a row of `{{table}}_hold` h; holders.c's queue_lock() in C):
 * "rowlock.<CRC-32 of table NUL name>.<kind><CRC-32 of owner>". */
#define ROWLOCK__HOLD_LOCK_OF(kind)                                                                            \
    "CONCAT('rowlock.', LPAD(LOWER(HEX(CRC32(CONCAT('{{table}}', 0x00, h.name)))), 8, '0'), '." kind "',"      \
    " LPAD(LOWER(HEX(CRC32(h.owner))), 8, '0'))"
/* A waiter entry h (granted = 0) is live on one server: its session holds
 * its queue lock, and it is in a wait statement (its awake lock) or wrote
 * its entry less than 5 s ago (expires_at - lease_us: when). */
#define ROWLOCK__HOLD_WAITER_LIVE                                                                              \
    "(IS_USED_LOCK(" ROWLOCK__HOLD_LOCK_OF("q") ") IS NOT NULL AND (IS_USED_LOCK(" ROWLOCK__HOLD_LOCK_OF("a")     \
    ") IS NOT NULL OR h.expires_at > UTC_TIMESTAMP(6) + INTERVAL (h.lease_us - 5000000) MICROSECOND))"

int rowlock__holders_acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms, rowlock__acquire_fn one_row);
int rowlock__holders_release(rowlock_lock *l);
int rowlock__holders_renew(rowlock_lock *l, int64_t lease_ms);
/* rowlock_downgrade() of an exclusive insert grant (one-row or holders
 * table; l->held is 1): a granted shared entry with the same token, lease
 * at least lease_ms from now, in one statement or one transaction, with no
 * moment at which another exclusive acquirer could be granted. Sets
 * l->held_multi and l->multi; lock.c sets l->mode. */
int rowlock__holders_downgrade(rowlock_lock *l, int64_t lease_ms);
/* rowlock_inspect() of a multi-holder name (info read from its row, which
 * shows owner '' and a lease to 9999): held, count (holders), owner (the
 * first in the queue), stale and lease end from the holders. No-op for other
 * rows. */
int rowlock__holders_inspect(rowlock_client *c, rowlock_info *info);
/* The reaper's part (admin.c): delete holder entries whose lease ended more
 * than grace_ms ago, `batch` per statement (dry run: count them); adds the
 * number to *purged. Multi-holder names' rows stay (their tokens). */
int rowlock__holders_reap(rowlock_client *c, int64_t grace_ms, uint64_t batch, int dry_run, uint64_t *purged);
/* The handle is freed: free what holders.c kept in it (l->hold_watch). */
void rowlock__holders_lock_free(rowlock_lock *l);
/* After an interrupt cut a waiting acquire of a multi-holder handle and its
 * session was ended (lock.c, give-back): delete our entry of the name when
 * no handle of the client holds it (a waiter's, or a grant another
 * reader's attempt made for it). 0 or an error. */
int rowlock__holders_give_back(rowlock_lock *l);

#endif
