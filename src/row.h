/*
 * row.h: reading a lock row; messages that explain a refusal (row.c).
 *
 * Offers: the whole-row reads (plain, causal on a cluster, share-locked),
 * the column list every whole-row read uses, the versioned rowlock_info
 * helpers, and the explaining reads that turn a lost claim into EBUSY or
 * EINVALID and a lost release or renewal into ENOTOWNER with a message.
 * Called by: the strategies, lease.c, lease_cluster.c, holders.c, admin.c,
 * lock.c (inspect).
 *
 * Included by rowlock_int.h (after the types it needs); include that.
 */
#ifndef ROWLOCK_ROW_H
#define ROWLOCK_ROW_H

/* Versioned rowlock_info for callers: 0 if the caller's version is known
 * (any version >= 1), else ROWLOCK_EINVALID; copy_out fills the fields of
 * dst->version from a full struct and keeps dst->version. */
int rowlock__info_check(unsigned int version);
void rowlock__info_copy_out(rowlock_info *dst, const rowlock_info *src);
int rowlock__row_read(rowlock_client *c, const char *name, size_t name_len, rowlock_info *info);
/* The same, causal when `causal` (the connection's lease rule has
 * ROWLOCK__RULE_CAUSAL: a Galera node, where the read then sees every grant
 * committed anywhere in the cluster before it): for inspect, one round trip.
 * The caller asks the rule (row.c stays below the lease rules, which read
 * rows through it). */
int rowlock__row_read_current(rowlock_client *c, int causal, const char *name, size_t name_len, rowlock_info *info);
/* The same as a locking read (LOCK IN SHARE MODE, waiting up to lock_wait_ms
 * for a writer of the row to commit). */
int rowlock__row_read_shared(rowlock_client *c, const char *name, size_t name_len, long lock_wait_ms,
                             rowlock_info *info);
/* After a failed grant: explain why, as EBUSY or EINVALID (the row is
 * another strategy's than l's). A multi-holder row (l's strategy has
 * ROWLOCK__S_MULTI_ROWS) is EBUSY with l->found_multi set and no message. */
int rowlock__explain_busy(rowlock_lock *l);
/* The same; *free_row (may be NULL) is set when the row was free or its
 * lease had ended (the claim lost only to the hint gate or to a race). */
int rowlock__explain_busy_row(rowlock_lock *l, int *free_row);
/* After a release/renew matched no row: ENOTOWNER naming what happened. */
int rowlock__explain_lost(rowlock_lock *l, const char *what);

/* Column list and conversion used by every read of a whole row. */
#define ROWLOCK__ROW_COLUMNS                                                              \
    "name, strategy, IFNULL(owner,''), count, token, "                                   \
    "IFNULL(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', acquired_at),0), "                              \
    "IFNULL(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires_at),0), "                               \
    "IFNULL(FLOOR(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)/1000),0), "             \
    "owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6), owner IS NOT NULL AND expires_at <= UTC_TIMESTAMP(6)"
#define ROWLOCK__ROW_NCOLS 10
void rowlock__row_cols_init(rowlock__col *cols, rowlock_info *info);
void rowlock__row_cols_store(const rowlock__col *cols, rowlock_info *info);

#endif
