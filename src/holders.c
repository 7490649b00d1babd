/*
 * Shared (read) locks and counting semaphores of the insert strategy: names
 * with several holders, kept in a holders table beside the names table
 * (schema: sql/0004_shared_holders.sql).
 *
 * Design
 *
 * Schema. A name that is used in shared or semaphore mode becomes a
 *   "multi-holder name": its names-table row gets mode = 1, owner = '' (an
 *   owner no client has: client owners are "host:pid:random"), count 0 and
 *   expires_at = 9999-12-31, so the exclusive one-row protocol
 *   (strategy_insert.c, lease.c; statements unchanged) always finds it held
 *   and never takes it. Its row keeps the name's last token and gains
 *   `permits` (0: any number of shared holders; N: at most N holders). Each
 *   holder and each queued waiter is one row of <table>_hold, keyed by
 *   (name, owner): mode (0 exclusive, 1 shared), ticket (its FIFO place),
 *   granted, count (re-entry), token, acquired_at, expires_at.
 *
 * Which path a handle takes. Exclusive handles without permits run today's
 *   one-row protocol: a name that never used shared/semaphore mode keeps its
 *   statements and round trips exactly. If such a claim finds a multi-holder
 *   row, the refusal's explaining read (row.c, the read every first loss
 *   already makes) sets l->found_multi and stops the one-row acquire, and
 *   rowlock__holders_acquire (the insert strategy's acquire) retries it here
 *   with the time left; the handle remembers it (l->multi). Shared and
 *   semaphore handles always come here. Only they turn a name into a
 *   multi-holder name, and only when its row is free (no row, no owner, or a
 *   lease that ended); while an exclusive one-row holder holds it they wait
 *   on its wake-up hint (lease.c's GET_LOCK, freed by its release), on one
 *   server in slices as long as its lease left, each slice's statement also
 *   saying whether the row is still held (row_wait: no attempt then).
 *
 * SQL per acquire attempt: one transaction, 5 round trips (a name's first
 *   shared use: 7, the conversion upsert and the first statement again):
 *     START TRANSACTION
 *     DRAW      UPDATE names SET token = LAST_INSERT_ID(GREATEST(token + 1,
 *               new token)) for a mode-1 row: locks the names row (every
 *               grant decision of the name is serialised on it) and draws
 *               the token a grant in this transaction gets; a token drawn
 *               for a waiter is simply skipped
 *     ENTRIES   SELECT the name's permits and all its holder/waiter rows
 *               (LOCK IN SHARE MODE: the latest committed ones)
 *     WRITE     INSERT ... ON DUPLICATE KEY UPDATE of our own entry: a new
 *               waiter (ticket = the drawn token), a grant (granted 1,
 *               token, lease), or a re-entry (count + 1); takes our wake
 *               lock (below) in the same statement
 *     COMMIT
 *   The grant decision is made in C from ENTRIES. Live entries (expires_at >
 *   UTC_TIMESTAMP(6)) of other owners conflict when they are ahead of us
 *   (smaller ticket) or granted:
 *     exclusive: granted iff no live conflicting entry;
 *     shared:    granted iff no conflicting exclusive entry and (permits = 0
 *                or fewer than `permits` conflicting entries).
 *   So holders are granted in ticket order across modes (FIFO): once an
 *   exclusive waiter is queued, a later shared acquirer is behind it and
 *   waits (no writer starvation); a semaphore admits at most N at once.
 * Joining readers (one server; schema 0008). Readers serialised on the
 *   names row for 3 round trips each (DRAW to COMMIT), so 32 readers of a
 *   name had about the throughput of one exclusive lock. Now a shared
 *   acquire without permits whose DRAW finds no exclusive entry of the
 *   name at all (holder or waiter, live or not) also sets the row's
 *   shared_token to the token it drew: the name is open to readers while
 *   the token stays that. A reader with no hold of the name on its client
 *   first tries to join (SQL_JOIN): one autocommitted statement that reads
 *   the names row under a shared lock and, if it is open (and has no
 *   permits), writes its granted entry with the row's token. Readers'
 *   shared locks are compatible, so joiners run side by side and each costs
 *   what an exclusive lock on its own name costs (a row write and a
 *   commit). Why it is safe:
 *   - every exclusive entry is written by an attempt that DRAWs first
 *     (this version's and every earlier one's), and a DRAW changes the
 *     token, which closes the name; a join waits for a DRAW in progress
 *     (its shared lock against the DRAW's exclusive one) and a DRAW waits
 *     for joins in progress, so an exclusive acquirer's ENTRIES, read under
 *     the same lock, sees every joined reader, and no reader joins once an
 *     exclusive acquirer drew, until a later reader's DRAW finds no
 *     exclusive entry again (the writer queued or holding keeps it closed:
 *     FIFO and no writer starvation stay);
 *   - LOCK IN SHARE MODE makes the read a locking one whatever the
 *     session's isolation (under READ COMMITTED a plain INSERT ... SELECT
 *     reads a snapshot and takes no lock);
 *   - the join touches no other entry, so it takes no gap lock a second
 *     joiner's insert would wait for;
 *   - on a cluster row locks are node-local: no join there (DRAW_CL leaves
 *     shared_token alone, and joins are not tried);
 *   - after a failover (epoch.c) a promoted replica may carry a name opened
 *     before writers whose greater tokens it never received: no join below
 *     the epoch's token floor (the first reader draws above it and opens
 *     again);
 *   - the new token is stored as LAST_INSERT_ID(), which sql_mode
 *     SIMULTANEOUS_ASSIGNMENT does not turn into the old value.
 *   Tokens: joiners get the opener's token, so readers of one open spell
 *   may share a token; every exclusive grant's token is still greater than
 *   every earlier grant's, and every grant's token at least every earlier
 *   one's (rowlock_lock_token()). The cost when the name is closed: one
 *   more statement (the failed join) before the attempt. Semaphores do not
 *   join: built and measured (a join that counts the live entries under
 *   the names row's exclusive lock in one statement), 32 clients of a
 *   4-permit semaphore made about half the grants (docs/bench.md), since
 *   on a full semaphore every acquire paid the join's locking scan before
 *   its attempt.
 * Readers granted together (one server). Readers queued behind a writer
 *   did not join when it left: each made its own attempt, one after
 *   another on the names row. Now the reader whose attempt opens the name
 *   (its DRAW found no exclusive entry, the name has no permits, and its
 *   grant is a fresh one at the drawn token) also grants, in the same
 *   transaction and before its WRITE, every live reader entry still
 *   waiting (SQL_GRANT_READERS, by owner: the rows of holders, which a
 *   fence may hold locked, are not touched), with the opener's token.
 *   Safe for the reason a join is: no exclusive entry exists, and none can
 *   be written before that transaction commits (a writer DRAWs first).
 *   Readers behind the same writer wait on the queue lock of the first of
 *   them, which waits on the writer (blocked_by()); when that one's WRITE
 *   lets its queue lock go they wake, and each learns of its grant by one
 *   autocommitted UPDATE of its own entry (SQL_GRANTED: the lease its own
 *   from then, its queue lock let go; an opener's commit still to come
 *   holds that entry's row, so the UPDATE waits for it) instead of an
 *   attempt; not granted (that reader left), it looks at the entries and
 *   waits again while the writer is there. Until then the grant's lease is
 *   the opener's, at most 5 s (GRANTED_UNSEEN_US): a reader that left
 *   meanwhile (gave up, was interrupted, died) holds writers up no longer
 *   than a waiter that stopped does (WAITER_LIVE); a give-up, and the
 *   give-back after an interrupt cut a wait (lock.c), delete such a grant
 *   (SQL_FORGET_ANY); one that notices later finds it ended and makes the
 *   attempt as before. The cost: a reader behind a paused first reader is
 *   woken only when its slice ends (up to 30 s), as an exclusive waiter
 *   behind a paused waiter is.
 * Release: 1 round trip for a re-entry (count - 1), 2 for the final one
 *   (DELETE of the entry, owner- and token-checked; then RELEASE_LOCK of the
 *   wake lock, after the commit, so a woken waiter sees the row gone).
 * Renew: 1 round trip, UPDATE expires_at, owner- and token-checked, only
 *   while the lease has not ended (the lease keeper renews through it).
 * Waiting without polling (one server). Every entry's session holds a
 *   wake lock, GET_LOCK("rowlock.<hash of table and name>.<hash of owner>"),
 *   from its WRITE until its final release (or the end of its session), and
 *   a waiter's session also holds its queue lock ("rowlock.<CRC-32 of table
 *   and name>.q<CRC-32 of owner>", a name SQL can build from the entry:
 *   ROWLOCK__HOLD_LOCK_OF) from its WRITE until it is granted (the grant's WRITE frees it)
 *   or leaves. A waiter that was not granted waits, in one statement
 *   (hold-wait-entry), for the lock of the entry that blocks it: an
 *   exclusive or semaphore waiter behind other waiters, the queue lock of
 *   one of them (when that one is granted or leaves, it reads the entries
 *   in one statement, hold-look, and waits on what blocks it now; only when
 *   they would grant it does it make an attempt; which one: blocked_by(), a
 *   binary tree over the queue that keeps every chain of lock waits short,
 *   as the server's deadlock detector requires); the
 *   first exclusive waiter, the wake lock of the conflicting holder with the
 *   largest ticket; the first shared waiter behind a writer, of the
 *   conflicting exclusive entry, and the shared waiters behind it, of its
 *   queue lock ("Readers granted together"); the semaphore's
 *   first waiter, the wake lock of the holder whose lease ends first, in
 *   slices of 250 ms growing to 5 s while nothing changes (SEM_SLICE_MAX_S:
 *   another holder may leave first, and a wake-up on "any of N" does not
 *   exist among named locks), each slice's statement also counting the
 *   live grants. Other slices last up to 30 s (within the
 *   read timeout), on a holder less than its lease left. When a slice passes, the same statement says whether the entry is
 *   unchanged (same grant, lease not over, a waiter's session still there):
 *   then the waiter waits again without trying: an idle waiter costs one
 *   statement per slice (and an attempt every 5 minutes, which rewrites its
 *   entry: a waiter entry's expires_at is 10 minutes ahead, for the reaper,
 *   which deletes only entries past it). A
 *   waiter entry is live (WAITER_LIVE) while its session holds its queue
 *   lock and, besides, is in a wait statement (it holds its awake lock,
 *   "rowlock.<CRC-32 of table and name>.a<CRC-32 of owner>", through each wait statement) or
 *   wrote its entry less than 5 s ago: a waiter whose process died blocks
 *   nobody once its session ends, which is when its wait statement ends (the
 *   server notices a gone client only then), i.e. when what it waited for
 *   happens or its slice passes; one that stopped (a paused process) is
 *   passed over by acquirers 5 s after its last statement ended, and by a
 *   waiter already waiting on its queue lock only when that waiter's slice
 *   ends (up to 30 s: a wait on a lock cannot also watch a clock; shorter
 *   slices would cost every idle waiter more statements). A blocker whose session
 *   is gone but whose lease runs on (a crashed holder) frees no lock (its
 *   lock is free at once): the waiter then sleeps until that lease ends
 *   (capped backoff). One that gives up deletes its entry. On a cluster
 *   both locks are node-local: see below.
 * Leases, owner checks, re-entrancy. Each entry has its own lease; release
 *   and renew match name, owner and the grant's token. A second grant to the
 *   same owner (another handle of the client, or the same handle again) is a
 *   re-entry of the entry (count + 1, same token); a shared holder asking
 *   exclusive is refused (no upgrade: two upgraders would deadlock); a
 *   shared acquire by a client holding the name as a one-row grant through
 *   another handle is busy at once (row.c's read sets l->busy_self: a wait
 *   would wait for itself). An entry
 *   of our owner that no handle of ours holds (a grant whose connection died
 *   after the commit) is adopted as a fresh grant of ours.
 * Fencing tokens. A grant's token is drawn under the names row's lock as
 *   GREATEST(row token + 1, sequence, clock) and written back to the row, so
 *   every drawn token is greater than every token granted before it on
 *   that name, in either mode: an exclusive grant's token is greater than
 *   every reader's before it, and readers granted after it get greater
 *   tokens still. A joining reader takes the row's token without drawing
 *   (above): the same as the reader that opened the name, greater than
 *   every exclusive grant's before it, smaller than the next one's. The reaper keeps multi-holder names' rows (their tokens),
 *   and deletes holder entries whose lease ended more than its grace ago.
 *
 * On a Galera cluster (the cluster lease rule, lease_cluster.c: no
 *   ROWLOCK__RULE_CLOCK) no node's clock may judge a lease, so the entries
 *   are judged as the cluster rule judges rows (schema 0007 gives them gen
 *   and lease_us):
 *   - every write of an entry by its owner (WRITE: grant, re-entry, a
 *     waiter's refresh; RENEW_CL) bumps gen and records the lease asked;
 *   - an acquirer watches the other owners' entries (l->hold_watch: owner,
 *     token, gen, since, on its own monotonic clock from when its read came
 *     back) and treats one as live until it has seen it unchanged for its
 *     lease plus the cluster rule's allowances (rowlock__cluster_wait_us);
 *     our own entry is live while it exists;
 *   - a dead entry is deleted in the acquirer's transaction, conditioned on
 *     the (token, gen) watched (DROP_DEAD): a renewal committed meanwhile
 *     makes it change nothing (same node: busy, try again) or fails
 *     certification against it (another node). So a holder passed over
 *     finds its entry gone: its renewal, release and fence say the lock is
 *     lost, and its keeper's promise (lease minus drift, from before its
 *     last write) ended before the acquirer's watch did (the argument of
 *     lease_cluster.c);
 *   - renewals carry no clock condition (RENEW_CL): an entry still there
 *     was passed over by nobody;
 *   - the names row serialises every grant decision across nodes as on one
 *     server: each attempt's DRAW writes it, so two decisions made on
 *     different nodes from the same entries conflict in certification (one
 *     is busy and tries again); DRAW_CL's tokens are also above the token
 *     floor, so tickets and tokens stay FIFO across nodes;
 *   - that holds only while the attempt's statements run in one
 *     transaction, and a Galera node can end it without saying so: a
 *     brute-force abort (another node's write set applied over our locks)
 *     is not always reported (seen on MariaDB 10.11 at a name's first
 *     grants, where new connections prepare their statements: a grant
 *     whose entry was written autocommitted after its transaction was
 *     gone, three holders of a 2-permit semaphore, 3 cluster test runs in
 *     14; the exact window is not pinned down). So every write of the attempt is conditioned on
 *     @@in_transaction (CL_IN_TRX: outside it, it changes nothing), the
 *     server's in-transaction flag is checked after each step
 *     (cl_still_in), and a grant is read back after its commit
 *     (GRANTED_CL: a commit that answered OK for a transaction already
 *     rolled back committed nothing); any of these is busy: try again;
 *   - a name's first shared use converts a one-row grant's row only when it
 *     is released (owner NULL) or watched unchanged for its lease
 *     (CONVERT_CL, conditioned on that (token, gen), gen + 1);
 *   - waiting: wake and queue locks are node-local, so a waiter waits on
 *     the blocker's wake lock and looks again at least every
 *     rule->slice_max_s (50 ms), backing off when the lock is free at once
 *     (its holder is on another node); a waiter's place lasts 5 s past
 *     each try (WAITER_TTL_US), and its queue lock says nothing (the
 *     watching above decides);
 *   - the reaper (lease_cluster.c) leaves holder entries: the next acquirer
 *     of the name removes a dead one after watching it a lease.
 *   The cost, as for rows: an acquirer first watching an entry whose owner
 *   died waits a whole lease from its first look; a try-once acquirer never
 *   passes over a dead entry unless its handle watched it a lease earlier.
 *   Downgrade is refused on a cluster (not done yet).
 */
#include "rowlock_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAITER_TTL_US 5000000    /* a waiter's entry outlives its last try by this
                                    (one server: unless it is in a wait) */
#define WAITER_PLACE_US 600000000 /* one server: a waiter entry's expires_at (for the
                                     reaper), rewritten every half of it */
/* The semaphore's first waiter watches one of N holders (no wake-up on "any
 * of N" exists among named locks) in slices of SEM_SLICE_S, or a quarter of
 * the time its holders have stayed as they are, up to SEM_SLICE_MAX_S: a
 * release by another holder is noticed within the larger of 250 ms and a
 * quarter of the time nothing changed, and within 5 s. Idle, its 5 s slices make 0.2 statements/s
 * instead of 4 (by the rule; 256 `rowlock run --permits 4` waiters,
 * measured: docs/bench.md); a busy semaphore,
 * whose holders change within a second, keeps 250 ms slices. */
#define SEM_SLICE_S 0.25
#define SEM_SLICE_MAX_S 5.0
#define TICKET_KEEP_US 3000000   /* a wait that ended keeps its queue place this long */

static const char SQL_BEGIN[] = "/* rowlock:hold-begin */ START TRANSACTION";
static const char SQL_COMMIT[] = "/* rowlock:hold-commit */ COMMIT";
static const char SQL_ROLLBACK[] = "/* rowlock:hold-rollback */ ROLLBACK";

/* Params: permits, permits, opens (1: a shared acquire without permits),
 * name, strategy. Rows changed: 1 (a multi-holder row of the strategy, now
 * locked), else 0. LAST_INSERT_ID: the token. A shared acquire of a name
 * without permits that finds no exclusive entry of the name (holder or
 * waiter, live or not) also opens the name to joining readers at the new
 * token (shared_token, "Joining readers" above); its grant is then
 * certain. The
 * subquery is correlated with the names row, so it runs once that row is
 * locked: every exclusive entry was written under this lock (a DRAW), so
 * all are committed and seen; an exclusive acquirer's DRAW leaves
 * shared_token behind the token. The new token is read back as
 * LAST_INSERT_ID(), not `token`: with sql_mode SIMULTANEOUS_ASSIGNMENT a
 * column in an assignment is its old value (`permits` is unchanged when
 * the acquire opens: it has no permits). */
static const char SQL_DRAW[] =
    "/* rowlock:hold-draw */ SET STATEMENT innodb_lock_wait_timeout=1 FOR UPDATE `{{table}}` SET token = LAST_INSERT_ID(GREATEST(token + 1, " ROWLOCK__NEW_TOKEN ")),"
    " permits = IF(? > 0 AND permits = 0, ?, permits),"
    " shared_token = IF(? AND permits = 0 AND NOT EXISTS (SELECT 1 FROM `{{table}}_hold` x"
    " WHERE x.name = `{{table}}`.name AND x.mode = 0), LAST_INSERT_ID(), shared_token) "
    "WHERE name = ? AND strategy = ? AND mode = 1 AND owner = ''";

/* On a cluster every write of an attempt's transaction changes nothing
 * unless that transaction is still open: a brute-force abort whose error
 * the server never sent would otherwise leave the rest of the attempt
 * running autocommitted, statement by statement, outside the names row's
 * serialisation ("On a Galera cluster" above). */
#define CL_IN_TRX "@@in_transaction = 1"

/* The same on a cluster: the new token is also above the token floor. */
static const char SQL_DRAW_CL[] =
    "/* rowlock:hold-draw-cl */ SET STATEMENT innodb_lock_wait_timeout=1 FOR UPDATE `{{table}}` SET token = LAST_INSERT_ID(GREATEST(token + 1, " ROWLOCK__CL_NEW_TOKEN ")),"
    " permits = IF(? > 0 AND permits = 0, ?, permits) "
    "WHERE name = ? AND strategy = ? AND mode = 1 AND owner = '' AND " CL_IN_TRX;

/* Turn a free row (or no row) into a multi-holder row. Params: name,
 * strategy, permits, strategy, permits. Rows changed: 1 inserted, 2 converted, 0 unchanged (held
 * by an exclusive one-row holder, or another strategy's row). The first
 * assignment decides (LAST_INSERT_ID 1/0); the others read only it and
 * columns not yet assigned. */
static const char SQL_CONVERT[] =
    "/* rowlock:hold-convert */ SET STATEMENT innodb_lock_wait_timeout=1 FOR INSERT INTO `{{table}}` (name, strategy, mode, owner, count, token, acquired_at, expires_at, permits) "
    "VALUES (?, ?, 1, '', 0, 0, NULL, '9999-12-31 00:00:00', ?) "
    "ON DUPLICATE KEY UPDATE"
    " owner = IF(LAST_INSERT_ID(strategy = ? AND ((mode = 1 AND owner = '') OR " ROWLOCK__SQL_FREE_ROW ")), '', owner),"
    " count = IF(LAST_INSERT_ID(), 0, count),"
    " expires_at = IF(LAST_INSERT_ID(), '9999-12-31 00:00:00', expires_at),"
    " permits = IF(LAST_INSERT_ID() AND mode <> 1, ?, permits),"
    " mode = IF(LAST_INSERT_ID(), 1, mode)";

/* On a cluster the row is free when released (owner NULL) or when this
 * handle watched its one-row grant unchanged for its lease (no clock).
 * Params: name, strategy, permits, strategy, token seen, gen seen, seen
 * unchanged for its lease (1/0), permits. Rows changed as SQL_CONVERT; gen
 * + 1 (one-row takers watching the row start over; the DRAW that follows
 * changes the token too). */
static const char SQL_CONVERT_CL[] =
    "/* rowlock:hold-convert-cl */ SET STATEMENT innodb_lock_wait_timeout=1 FOR INSERT INTO `{{table}}` (name, strategy, mode, owner, count, token, gen, acquired_at, expires_at, permits) "
    "SELECT ?, ?, 1, '', 0, 0, 1, NULL, '9999-12-31 00:00:00', ? FROM DUAL WHERE " CL_IN_TRX " "
    "ON DUPLICATE KEY UPDATE"
    " owner = IF(LAST_INSERT_ID(strategy = ? AND ((mode = 1 AND owner = '') OR owner IS NULL"
    " OR (token = ? AND gen = ? AND ?))), '', owner),"
    " count = IF(LAST_INSERT_ID(), 0, count),"
    " gen = IF(LAST_INSERT_ID(), gen + 1, gen),"
    " expires_at = IF(LAST_INSERT_ID(), '9999-12-31 00:00:00', expires_at),"
    " permits = IF(LAST_INSERT_ID() AND mode <> 1, ?, permits),"
    " mode = IF(LAST_INSERT_ID(), 1, mode)";

/* Params: name. The names row as the conversion on a cluster judges it:
 * strategy, held (owner set), token, gen, the lease its holder asked for
 * (µs; rows written before schema 0003: from the row's own times). */
static const char SQL_ROW_CL[] =
    "/* rowlock:hold-row-cl */ SELECT strategy, owner IS NOT NULL, token, gen,"
    " IF(lease_us > 0, lease_us, GREATEST(IFNULL(TIMESTAMPDIFF(MICROSECOND, acquired_at, expires_at), 0), 0)) "
    "FROM `{{table}}` WHERE name = ?";

#define WAITER_LIVE ROWLOCK__HOLD_WAITER_LIVE

/* Whether an entry's lease still runs, for a statement that may wait for
 * the entry's lock (a renewal, a downgrade, a reader's confirmation of its
 * grant): the clock once the row is locked, SYSDATE(6) (UTC under the
 * statement's time_zone='+00:00'), not UTC_TIMESTAMP(6), which is fixed at
 * the statement's start. An acquirer passes over a lapsed entry without
 * writing it, so the clock is the only guard there: a statement that began
 * before the lease's end and reached the row after an acquirer that saw it
 * ended must not find it running (found by a review). */
#define LIVE_NOW "SYSDATE(6)"

/* Params: name. One row per entry (none: a row
 * with NULL entry columns). A grant is live while its lease lasts, a
 * waiter as WAITER_LIVE says: a waiter whose session ended (a crash, a cut
 * connection) blocks nobody from then on, one that stopped (a paused
 * process) blocks nobody 5 s after its last statement ended. On a cluster
 * the column is not used (the entries are watched). */
#define ENTRIES_SELECT                                                                                        \
    "SELECT t.permits, IFNULL(h.owner, ''), IFNULL(h.mode, 0), IFNULL(h.ticket, 0), IFNULL(h.granted, 0),"    \
    " IFNULL(h.count, 0), IFNULL(h.token, 0),"                                                                \
    " IFNULL(IF(h.granted = 1, h.expires_at > UTC_TIMESTAMP(6), " WAITER_LIVE "), 0),"                        \
    " IFNULL(FLOOR(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), h.expires_at) / 1000), 0), h.owner IS NOT NULL," \
    " IFNULL(h.gen, 0),"                                                                                      \
    " IFNULL(IF(h.lease_us > 0, h.lease_us, GREATEST(IFNULL(TIMESTAMPDIFF(MICROSECOND, h.acquired_at, h.expires_at), 0), 5000000)), 0)," \
    " t.shared_token "                                                                                        \
    "FROM `{{table}}` t LEFT JOIN `{{table}}_hold` h ON h.name = t.name WHERE t.name = ? ORDER BY h.ticket "
static const char SQL_ENTRIES[] = "/* rowlock:hold-entries */ " ENTRIES_SELECT "LOCK IN SHARE MODE";
/* The same, autocommitted: a waiter's look (one server). Locking (shared,
 * for the statement): it reads what a grant in progress commits, not what
 * was there before it (a grant lets its queue lock go before its commit). */
static const char SQL_LOOK[] =
    "/* rowlock:hold-look */ SET STATEMENT innodb_lock_wait_timeout=1 FOR " ENTRIES_SELECT "LOCK IN SHARE MODE";

/* Our entry. Params: name, owner, mode, ticket, granted, granted (for
 * acquired_at), count, wake, wake, granted, queue lock x4, token, lease µs
 * (the entry's expiry from now), lease µs (lease_us). The wake lock is
 * taken in the same statement, once per session (IS_USED_LOCK guards
 * GET_LOCK, which nests); so is the queue lock, by a waiter, and a grant
 * lets it go (before its commit: whoever it wakes reads the entries after
 * the commit, behind the names row's lock). Every write bumps gen (the
 * cluster's watchers start over). Assignments read columns before they are
 * assigned only, so both assignment orders agree. */
/* Take a named lock once per session (GET_LOCK nests; 0 if another
 * session holds it). Params: lock, lock. */
#define TAKE_ONCE "IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 0, IFNULL(GET_LOCK(?, 0), 0))"
#define WRITE_HEAD                                                                                            \
    "INSERT INTO `{{table}}_hold` (name, owner, mode, ticket, granted, acquired_at, count, token, expires_at, gen, lease_us) "
#define WRITE_ROW                                                                                             \
    "?, ?, ?, ?, ?, IF(?, UTC_TIMESTAMP(6), NULL),"                                                             \
    " ? + 0 * " TAKE_ONCE                                                                                       \
    " + 0 * IF(?, IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), IFNULL(RELEASE_LOCK(?), 0), 0),"                      \
    "   " TAKE_ONCE "),"                                                                                        \
    " ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, 1, ?"
#define WRITE_TAIL                                                                                            \
    " ON DUPLICATE KEY UPDATE"                                                                                  \
    " acquired_at = IF(VALUES(granted) = 1 AND (granted = 0 OR token <> VALUES(token)), UTC_TIMESTAMP(6), acquired_at)," \
    " expires_at = IF(VALUES(granted) = 1 AND granted = 1 AND token = VALUES(token), GREATEST(expires_at, VALUES(expires_at))," \
    "   VALUES(expires_at)),"                                                                                  \
    " lease_us = IF(VALUES(granted) = 1 AND granted = 1 AND token = VALUES(token), GREATEST(lease_us, VALUES(lease_us))," \
    "   VALUES(lease_us)),"                                                                                    \
    " gen = gen + 1,"                                                                                          \
    " mode = VALUES(mode), ticket = VALUES(ticket), granted = VALUES(granted), count = VALUES(count), token = VALUES(token)"
static const char SQL_WRITE[] = "/* rowlock:hold-write */ " WRITE_HEAD "VALUES (" WRITE_ROW ")" WRITE_TAIL;
/* The same on a cluster: nothing is written unless the attempt's
 * transaction is still open (0 rows). */
static const char SQL_WRITE_CL[] =
    "/* rowlock:hold-write-cl */ " WRITE_HEAD "SELECT " WRITE_ROW " FROM DUAL WHERE " CL_IN_TRX WRITE_TAIL;

/* A shared acquire without permits joins the readers in one autocommitted
 * statement (one server, "Joining readers" above): our granted entry, with
 * the row's token, written only while the names row says the name is open
 * to readers, read under a shared lock that an exclusive acquirer's DRAW
 * waits for (and that waits for a DRAW in progress: whose commit then
 * closes it). Our wake lock is taken in the same statement, only when the
 * entry is written (the select list runs only for a row that qualifies:
 * no GROUP BY here). Params:
 * owner, wake, wake, lease µs, lease µs, name, strategy. Rows changed: 1
 * joined (LAST_INSERT_ID: the token), 0 not (closed, a semaphore, not a
 * multi-holder row, or an entry of ours already there: left as it was).
 * Not below the failover epoch's token floor (epoch.c): a promoted replica
 * may carry a name opened before writers it never received were granted
 * greater tokens; its first reader then draws (above the floor) and opens
 * again. */
static const char SQL_JOIN[] =
    "/* rowlock:hold-join */ SET STATEMENT innodb_lock_wait_timeout=1 FOR " WRITE_HEAD
    "SELECT t.name, ?, 1, t.token, 1, UTC_TIMESTAMP(6),"
    " 1 + 0 * " TAKE_ONCE ","
    " LAST_INSERT_ID(t.token), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, 1, ? "
    "FROM `{{table}}` t WHERE t.name = ? AND t.strategy = ? AND t.mode = 1 AND t.owner = '' AND t.permits = 0"
    " AND t.token > 0 AND t.shared_token = t.token"
    " AND t.token > IFNULL((SELECT e.token_floor FROM `{{table}}_epoch` e WHERE e.id = 1), 0) "
    "LOCK IN SHARE MODE "
    "ON DUPLICATE KEY UPDATE `{{table}}_hold`.gen = `{{table}}_hold`.gen";

/* Params: name, owner. Our granted entry's token. */
static const char SQL_JOINED[] =
    "/* rowlock:hold-joined */ SELECT token FROM `{{table}}_hold` WHERE name = ? AND owner = ? AND granted = 1";

/* Readers queued behind a writer (one server; "Readers granted together"
 * above). In the attempt of a reader whose DRAW opened the name: the live
 * readers waiting on it, named by owner (up to GRANT_BATCH per statement:
 * only their rows are locked, not the holders' a fence may have locked),
 * are granted with the opener's token and a lease of at most
 * GRANTED_UNSEEN_US, until each makes it its own (SQL_GRANTED). Params:
 * token, lease µs, lease µs, name, GRANT_BATCH owners (repeated to fill). */
#define GRANT_BATCH 16
#define GRANTED_UNSEEN_US 5000000
#define OWNERS16 "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
static const char SQL_GRANT_READERS[] =
    "/* rowlock:hold-grant-readers */ SET STATEMENT innodb_lock_wait_timeout=1 FOR "
    "UPDATE `{{table}}_hold` h SET h.granted = 1, h.count = 1, h.token = ?,"
    " h.acquired_at = UTC_TIMESTAMP(6), h.expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,"
    " h.lease_us = ?, h.gen = h.gen + 1 "
    "WHERE h.name = ? AND h.owner IN (" OWNERS16 ") AND h.mode = 1 AND h.granted = 0 AND " WAITER_LIVE;
/* A reader woken by the reader ahead of it: was it granted so? If so the
 * lease becomes its own, from now (shorter or longer than the opener's),
 * its queue lock goes, its wake lock is ours (a session that reconnected
 * since its entry's write lost it), and the token is LAST_INSERT_ID(). An UPDATE: it
 * waits for an opener's commit still to come, whose grant holds our
 * entry's row (1 s at most, then busy: the attempt decides). Params: lease
 * µs, lease µs, queue lock, wake lock, wake lock, name, owner. Rows
 * changed: 1 granted, 0 not. */
static const char SQL_GRANTED[] =
    "/* rowlock:hold-granted */ SET STATEMENT innodb_lock_wait_timeout=1, time_zone='+00:00' FOR UPDATE `{{table}}_hold` SET"
    " expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, lease_us = ?, gen = gen + 1,"
    " token = LAST_INSERT_ID(token) + 0 * IFNULL(RELEASE_LOCK(?), 0) + 0 * " TAKE_ONCE " "
    "WHERE name = ? AND owner = ? AND mode = 1 AND granted = 1 AND count = 1 AND expires_at > " LIVE_NOW;

/* SQL_WRITE's parameters (WRITE_NPARAMS), into pw. wake, qlock: our wake
 * and queue locks (they outlive the statement: pw points into them). */
enum { WRITE_NPARAMS = 17 };
static void write_params(rowlock__param *pw, const rowlock_lock *l, int mode, uint64_t ticket, int granted,
                         int count, uint64_t token, int64_t ttl_us, const char *wake, const char *qlock)
{
    const rowlock_client *c = l->client;
    const rowlock__param v[WRITE_NPARAMS] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len),
                                              RL_I64(mode), RL_U64(ticket), RL_I64(granted), RL_I64(granted),
                                              RL_I64(granted ? count : 0), RL_STR(wake, strlen(wake)),
                                              RL_STR(wake, strlen(wake)), RL_I64(granted),
                                              RL_STR(qlock, strlen(qlock)), RL_STR(qlock, strlen(qlock)),
                                              RL_STR(qlock, strlen(qlock)), RL_STR(qlock, strlen(qlock)),
                                              RL_U64(granted ? token : 0), RL_I64(ttl_us), RL_I64(ttl_us) };
    memcpy(pw, v, sizeof v);
}

/* Params: name, owner, token. Rows: 1 done, 0 lost. */
#define RELEASE_ONE \
    "/* rowlock:hold-release */ SET STATEMENT time_zone='+00:00' FOR UPDATE `{{table}}_hold` SET count = count - 1 WHERE name = ? AND owner = ? AND token = ? AND granted = 1 AND count > 1"
#define RELEASE_LAST \
    "/* rowlock:hold-release-last */ SET STATEMENT time_zone='+00:00' FOR DELETE FROM `{{table}}_hold` WHERE name = ? AND owner = ? AND token = ? AND granted = 1"
static const char SQL_RELEASE_ONE[] = RELEASE_ONE;
static const char SQL_RELEASE_LAST[] = RELEASE_LAST;
/* One server: the same, only while the lease runs. An acquirer passes over
 * an entry whose lease ended without deleting it, so the entry still there
 * says nothing about whether someone else held the name meanwhile: a
 * release after the lease's end is a loss (ENOTOWNER), as a renewal then
 * is, and the entry is then cleared by the statements above. */
#define WHILE_LIVE " AND expires_at > " LIVE_NOW /* (a review: a release let in after an acquirer that
                                                       saw the lease ended was a loss left unreported) */
static const char SQL_RELEASE_ONE_LIVE[] = RELEASE_ONE WHILE_LIVE;
static const char SQL_RELEASE_LAST_LIVE[] = RELEASE_LAST WHILE_LIVE;
/* A waiter that gives up. Params: name, owner. */
static const char SQL_FORGET[] =
    "/* rowlock:hold-forget */ DELETE FROM `{{table}}_hold` WHERE name = ? AND owner = ? AND granted = 0";
/* The same when no handle of the client holds the name: a grant of ours
 * there is one nobody will use (a reader granted by another's attempt
 * just before it gave up: "Readers granted together"). */
static const char SQL_FORGET_ANY[] =
    "/* rowlock:hold-forget */ SET STATEMENT innodb_lock_wait_timeout=1 FOR DELETE FROM `{{table}}_hold` WHERE name = ? AND owner = ?";
/* Params: lease µs, name, owner, token. Rows: 1 renewed, 0 lost. Never
 * shortens the lease (lease_server.c's LEASE_RENEW says why; gen + 1 makes
 * every renewal a change, so the rows changed say whether it matched). */
static const char SQL_RENEW[] =
    "/* rowlock:hold-renew */ SET STATEMENT time_zone='+00:00' FOR UPDATE `{{table}}_hold` SET gen = gen + 1,"
    " expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) "
    "WHERE name = ? AND owner = ? AND token = ? AND granted = 1 AND expires_at > " LIVE_NOW;
/* On a cluster. Params: lease µs, lease µs, name, owner, token. No clock in
 * the condition: a taker passes over an entry only by deleting it (after
 * watching it unchanged for its lease), so an entry still there is ours. */
static const char SQL_RENEW_CL[] =
    "/* rowlock:hold-renew-cl */ UPDATE `{{table}}_hold` SET gen = gen + 1, lease_us = GREATEST(lease_us, ?),"
    " expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND "
    "WHERE name = ? AND owner = ? AND token = ? AND granted = 1";
/* On a cluster: an entry this handle watched unchanged for its lease. Params:
 * name, owner, token, gen. Rows: 1 gone, 0 it changed (renewed: live). */
static const char SQL_DROP_DEAD[] =
    "/* rowlock:hold-drop-dead */ DELETE FROM `{{table}}_hold` WHERE name = ? AND owner = ? AND token = ? AND gen = ?"
    " AND " CL_IN_TRX;
/* On a cluster, after the commit of a grant: the grant is there as written
 * (a commit that answered OK for a transaction the cluster had already
 * rolled back committed nothing). Params: name, owner, token, count, gen. */
static const char SQL_GRANTED_CL[] =
    "/* rowlock:hold-granted-cl */ SELECT 1 FROM `{{table}}_hold` WHERE name = ? AND owner = ? AND token = ? AND granted = 1"
    " AND count = ? AND gen = ?";
/* A waiter's wait on one entry (one server), holding our awake lock
 * while it lasts (taken first, let go last). The lock waited on: the
 * entry's wake lock (a holder's: freed by its final release) or its queue
 * lock (a waiter's: freed when it is granted or leaves). Params: name,
 * name (a permit free?), our awake lock, then our awake lock x2, lock, lock, wait
 * seconds, lock, then name, owner (the entry). Columns: 3 the lock was free at once (no session holds
 * it), 1 freed during the wait, 0 the slice passed (NULL: our awake lock is
 * held by another session); after 0 only: the entry's granted, token, ms
 * left of its lease (NULL: gone), whether it is live as a waiter, and
 * whether the name's live grants are fewer than its permits now (a
 * release, or `rowlock permits` raising N). */
static const char SQL_HOLD_WAIT_ENTRY[] =
    "/* rowlock:hold-wait-entry */ SELECT w.g, h.granted, h.token,"
    " FLOOR(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), h.expires_at) / 1000),"
    " " WAITER_LIVE ","
    " (SELECT COUNT(*) FROM `{{table}}_hold` g WHERE g.name = ? AND w.g = 0 AND g.granted = 1"
    " AND g.expires_at > UTC_TIMESTAMP(6)) < (SELECT t.permits FROM `{{table}}` t WHERE t.name = ? AND w.g = 0),"
    " RELEASE_LOCK(?) "
    "FROM (SELECT IF(IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 1, GET_LOCK(?, 0)) = 1,"
    " IF(IS_FREE_LOCK(?), 3, IF(GET_LOCK(?, ?) = 1, 1 + 0 * IFNULL(RELEASE_LOCK(?), 0), 0)), NULL) AS g) AS w "
    "LEFT JOIN `{{table}}_hold` h ON w.g = 0 AND h.name = ? AND h.owner = ?";
/* Params: grace µs (count) / grace µs, batch (delete). */
static const char SQL_REAP_COUNT[] =
    "/* rowlock:hold-reap-survey */ SELECT COUNT(*) FROM `{{table}}_hold` WHERE expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND";
static const char SQL_REAP[] =
    "/* rowlock:hold-reap */ SET STATEMENT innodb_lock_wait_timeout=1 FOR "
    "DELETE FROM `{{table}}_hold` WHERE expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND ORDER BY expires_at LIMIT ?";
/* Params: wake lock, wait s, wake lock. 1: it was free or freed, 0: timed out. */
static const char SQL_WAIT[] =
    "/* rowlock:hold-wait */ SELECT IF(GET_LOCK(?, ?) = 1, 1 + 0 * IFNULL(RELEASE_LOCK(?), 0), 0)";
static const char SQL_WAKE_FREE[] = "/* rowlock:hold-wake-free */ SELECT RELEASE_LOCK(?)";
/* One server, a name held by a one-row holder: wait on its hint; when the
 * slice passes (the hint held throughout), the same statement reads the
 * holder's lease left (from the statement's start: UTC_TIMESTAMP is fixed
 * then), NULL when the row is no longer held by a one-row holder, and its
 * token; g -1: GET_LOCK failed (NULL); -2: our own session holds the hint
 * (another handle of this client holds the row: GET_LOCK would nest and
 * return at once); 3: the hint was free at once (not taken), then the
 * statement sleeps `free s` before it reads the row. Params: hint, hint,
 * free s, hint, wait s, hint, name, strategy. */
static const char SQL_HOLD_WAIT_ROW[] =
    "/* rowlock:hold-wait-row */ SELECT w.g, FLOOR(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), t.expires_at) / 1000),"
    " t.token "
    "FROM (SELECT IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), -2, IF(IS_FREE_LOCK(?), 3 + 0 * SLEEP(?),"
    " CASE IFNULL(GET_LOCK(?, ?), -1) WHEN 1 THEN 1 + 0 * IFNULL(RELEASE_LOCK(?), 0) WHEN 0 THEN 0 ELSE -1 END))"
    " AS g) AS w "
    "LEFT JOIN `{{table}}` t ON w.g IN (0, 3) AND t.name = ? AND t.strategy = ? AND t.owner <> ''"
    " AND t.expires_at > UTC_TIMESTAMP(6)";

/* ---- entries --------------------------------------------------------------- */

typedef struct entry {
    char owner[ROWLOCK_OWNER_MAX + 1];
    int mode;
    uint64_t ticket;
    int granted;
    unsigned count;
    uint64_t token;
    int live;
    int64_t expires_in_ms;
    uint64_t gen;
    int64_t lease_us;
} entry;

typedef struct entries {
    rowlock__col cols[13];
    entry cur;
    entry *v;
    size_t n, cap;
    unsigned permits;
    uint64_t shared_token; /* the names row's (one server: readers join at it) */
    int oom;
} entries;

static int entries_row(void *arg)
{
    entries *e = arg;
    e->permits = (unsigned)e->cols[0].i;
    e->shared_token = e->cols[12].u;
    if (!e->cols[9].i)
        return 0; /* the name has no entries */
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 16;
        entry *v = realloc(e->v, cap * sizeof *v);
        if (!v) {
            e->oom = 1;
            return 1;
        }
        e->v = v;
        e->cap = cap;
    }
    entry *x = &e->v[e->n++];
    *x = e->cur;
    x->mode = (int)e->cols[2].i;
    x->ticket = e->cols[3].u;
    x->granted = (int)e->cols[4].i;
    x->count = (unsigned)e->cols[5].i;
    x->token = e->cols[6].u;
    x->live = (int)e->cols[7].i;
    x->expires_in_ms = e->cols[8].i;
    x->gen = e->cols[10].u;
    x->lease_us = e->cols[11].i;
    return 0;
}

static int entries_read(rowlock_lock *l, entries *e, const char *tmpl)
{
    memset(e, 0, sizeof *e);
    for (int i = 0; i < 13; i++)
        e->cols[i].type = ROWLOCK__T_I64;
    e->cols[12].type = ROWLOCK__T_U64;
    e->cols[1] = (rowlock__col){ .type = ROWLOCK__T_STR, .buf = e->cur.owner, .cap = sizeof e->cur.owner };
    e->cols[3].type = ROWLOCK__T_U64;
    e->cols[6].type = ROWLOCK__T_U64;
    e->cols[10].type = ROWLOCK__T_U64;
    rowlock__param p = RL_STR(l->name, l->name_len);
    int rc = rowlock__db_run(l->client, RL_STMT(.what = "acquire (insert, entries)", .tmpl = tmpl, .params = &p,
                                                .nparams = 1, .cols = e->cols, .ncols = 13, .row_fn = entries_row,
                                                .arg = e));
    if (rc == 0 && e->oom)
        rc = rowlock__fail(l->client, ROWLOCK_ENOMEM, "acquire %s: out of memory", l->shown);
    return rc;
}

/* ---- watching, on a cluster --------------------------------------------------- */

/* What a handle saw of one entry (or of the names row: owner "") and since
 * when, on this host's monotonic clock: the cluster rule's "since". */
typedef struct watch {
    char owner[ROWLOCK_OWNER_MAX + 1];
    uint64_t token, gen;
    int64_t since_us;
    int mark; /* seen in the latest read */
} watch;

typedef struct watches {
    watch *v;
    size_t n, cap;
    watch row; /* the names row's one-row grant (owner: unused) */
    int row_seen;
} watches;

void rowlock__holders_lock_free(rowlock_lock *l)
{
    watches *w = l->hold_watch;
    if (w)
        free(w->v);
    free(w);
    l->hold_watch = NULL;
}

static watches *watches_get(rowlock_lock *l)
{
    if (l->hold_watch == NULL)
        l->hold_watch = calloc(1, sizeof(watches));
    return l->hold_watch;
}

/* How long (µs) `owner`'s entry has been seen as (token, gen) by this handle,
 * counting from seen_at (when the read came back) if it is new or changed.
 * -1: out of memory (the caller then treats the entry as live). */
static int64_t watch_entry(watches *w, const char *owner, uint64_t token, uint64_t gen, int64_t seen_at)
{
    watch *x = NULL;
    for (size_t i = 0; i < w->n && !x; i++)
        if (strcmp(w->v[i].owner, owner) == 0)
            x = &w->v[i];
    if (x == NULL) {
        if (w->n == w->cap) {
            size_t cap = w->cap ? 2 * w->cap : 8;
            watch *v = realloc(w->v, cap * sizeof *v);
            if (v == NULL)
                return -1;
            w->v = v;
            w->cap = cap;
        }
        x = &w->v[w->n++];
        snprintf(x->owner, sizeof x->owner, "%s", owner);
        x->since_us = seen_at;
        x->token = token;
        x->gen = gen;
    } else if (x->token != token || x->gen != gen) {
        x->since_us = seen_at;
        x->token = token;
        x->gen = gen;
    }
    x->mark = 1;
    return seen_at - x->since_us;
}

/* Forget the watches of entries the latest read did not show (gone). */
static void watch_prune(watches *w)
{
    size_t k = 0;
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i].mark) {
            w->v[k] = w->v[i];
            w->v[k++].mark = 0;
        }
    w->n = k;
}

/* ---- names of the wake locks ----------------------------------------------- */

/* FNV-1a over s and its NUL. */
static uint64_t fnv(uint64_t h, const char *s)
{
    return rowlock__fnv1a(h, s, strlen(s) + 1);
}

static void wake_name(const rowlock_lock *l, const char *owner, char *out, size_t cap)
{
    uint64_t h = fnv(fnv(ROWLOCK__FNV1A_START, l->client->table), l->name);
    snprintf(out, cap, "rowlock.%016llx.%016llx", (unsigned long long)h,
             (unsigned long long)fnv(ROWLOCK__FNV1A_START, owner));
}

/* The queue ('q') or awake ('a') lock of owner's entry, named as SQL
 * names it (ROWLOCK__HOLD_LOCK_OF), so that a statement can ask whether a
 * waiter's session is still there and in a wait. */
static void queue_lock(const rowlock_lock *l, char kind, const char *owner, char *out, size_t cap)
{
    const char *t = l->client->table;
    uint32_t h = rowlock__crc32(rowlock__crc32(rowlock__crc32(0, t, strlen(t)), "", 1), l->name, l->name_len);
    snprintf(out, cap, "rowlock.%08x.%c%08x", (unsigned)h, kind, (unsigned)rowlock__crc32(0, owner, strlen(owner)));
}

static const char *mode_name(int mode)
{
    return mode == ROWLOCK_MODE_SHARED ? "shared" : "exclusive";
}

/* Holds of this name by this client's handles through the holders table,
 * besides `l`'s own. */
static unsigned other_holds(const rowlock_lock *l)
{
    unsigned n = 0;
    for (const rowlock_lock *h = l->client->locks; h; h = h->next)
        if (h != l && h->held_multi && h->held > 0 && !h->lost && h->name_len == l->name_len &&
            memcmp(h->name, l->name, l->name_len) == 0)
            n += h->held;
    return n;
}

/* Holds of other handles of this client that share l's grant (the same
 * token: re-entries of one entry). A sibling whose own grant lapsed and was
 * replaced by l's fresh one holds another token and shares nothing: l's
 * release is then the entry's last (found by a review: counted, it made l's
 * release decrement a count of 1, report a loss, and leave the entry to
 * its lease). */
static unsigned sharing(const rowlock_lock *l)
{
    unsigned n = 0;
    for (const rowlock_lock *h = l->client->locks; h; h = h->next)
        if (h != l && h->held_multi && h->held > 0 && !h->lost && h->token == l->token && h->name_len == l->name_len &&
            memcmp(h->name, l->name, l->name_len) == 0)
            n += h->held;
    return n;
}

/* After a failed step: a lost connection has no transaction left to end. */
static void rollback(rowlock_client *c)
{
    if (c->connected)
        rowlock__db_rollback(c, "rollback", SQL_ROLLBACK);
}

/* ---- one attempt ------------------------------------------------------------- */

/* What an attempt that was not granted learned. */
typedef struct blocked {
    int path;             /* ATT_*: why */
    char wake[64];        /* the lock to wait on: the blocker's wake lock, or
                             (a semaphore's waiter behind another waiter) the
                             queue lock of the waiter ahead ("" none) */
    int64_t blocker_ms;   /* ms until the blocker's lease ends */
    double slice_cap_s;   /* how long to wait on it at most */
    char owner[ROWLOCK_OWNER_MAX + 1]; /* whose entry `wake` belongs to */
    uint64_t token;       /* that entry's token and granted, as read */
    int granted;
    int sem_head;         /* first semaphore waiter: also counts the grants */
    int behind_reader;    /* a reader waiting on the first reader behind the
                             same writer (its queue lock) */
    unsigned place;       /* live waiters ahead of us */
    unsigned permits;     /* the name's permits (0: any number of readers) */
    char why[ROWLOCK__ERRMSG_MAX];
} blocked;

enum { ATT_QUEUED = 1, ATT_ONE_ROW, ATT_EXCLUSIVE_ROW };

/* A grant or a queued entry (rc 0 with *granted), or an error. b->path
 * ATT_ONE_ROW: the name's row is held by an exclusive one-row holder (or
 * belongs to another strategy: then rc is EINVALID); ATT_EXCLUSIVE_ROW: an
 * exclusive handle found no multi-holder row (it takes the one-row path). */
static int convert_cl(rowlock_lock *l, rowlock__res *res);
static int judge_entries_cl(rowlock_lock *l, entries *e, int64_t seen_at);

/* On a cluster, after a statement of an attempt's transaction: still in it?
 * The server's last answer says (SERVER_STATUS_IN_TRANS); a brute-force
 * abort it did not report ended it, and every later statement ran
 * autocommitted (the guarded writes changed nothing). EBUSY: try again. */
static int cl_still_in(rowlock_lock *l, const char *step)
{
    if (rowlock__db_in_transaction(l->client))
        return 0;
    return rowlock__fail(l->client, ROWLOCK_EBUSY,
                         "acquire %s (insert, %s): the cluster aborted the transaction (%s)", l->shown,
                         mode_name(l->mode), step);
}

/* The entries' verdict on our acquire when it is no re-entry or adoption:
 * live entries of others that are ahead of us (smaller ticket) or granted
 * conflict (the rules at the top). 0: nothing blocks us (a grant); 1:
 * blocked, and b says on what to wait (path, lock, slice) and why.
 * mine: our entry (NULL: none), tk: our ticket. */
static int blocked_by(rowlock_lock *l, const entries *e, const entry *mine, uint64_t tk, int cluster, blocked *b)
{
    unsigned ahead = 0, excl = 0;
    const entry *last = NULL, *last_x = NULL, *first_end = NULL;
    unsigned waiters_ahead = 0;
    for (size_t i = 0; i < e->n; i++) {
        const entry *x = &e->v[i];
        if (x == mine || !x->live || !(x->ticket < tk || x->granted))
            continue;
        ahead++;
        last = x;
        if (!x->granted && x->ticket < tk)
            waiters_ahead++;
        if (x->mode == ROWLOCK_MODE_EXCLUSIVE) {
            excl++;
            last_x = x;
        }
        if (x->granted && (!first_end || x->expires_in_ms < first_end->expires_in_ms))
            first_end = x;
    }
    const entry *blocker = NULL;
    int sem = 0;
    b->sem_head = 0;
    b->place = waiters_ahead;
    b->permits = e->permits;
    if (l->mode == ROWLOCK_MODE_EXCLUSIVE) {
        blocker = last;
        b->slice_cap_s = 1;
    } else if (excl) {
        blocker = last_x;
        b->slice_cap_s = 1;
    } else if (e->permits && ahead >= e->permits) {
        blocker = first_end ? first_end : last;
        b->slice_cap_s = SEM_SLICE_S;
        sem = 1;
    }
    if (blocker == NULL)
        return 0;
    char owner[4 * ROWLOCK_OWNER_MAX + 8];
    rowlock_escape(owner, sizeof owner, blocker->owner, strlen(blocker->owner));
    b->path = ATT_QUEUED;
    wake_name(l, blocker->owner, b->wake, sizeof b->wake);
    b->blocker_ms = blocker->expires_in_ms;
    const entry *target = blocker;
    const entry *first_reader = NULL;
    if (!cluster && l->mode == ROWLOCK_MODE_SHARED && excl && e->permits == 0) {
        /* Readers (no permits) behind the same writer (the last exclusive
         * entry ahead) wait on the first of them, which waits on the
         * writer: when the writer goes, that reader's attempt opens the
         * name and grants them (SQL_GRANT_READERS), and its grant wakes
         * them: each learns of its grant in one statement (SQL_GRANTED)
         * instead of an attempt on the names row after the others. One
         * level: only that reader's pause can hold them up. */
        for (size_t i = 0; i < e->n && !first_reader; i++) {
            const entry *x = &e->v[i];
            if (x != mine && x->live && !x->granted && x->ticket < tk && x->ticket > last_x->ticket &&
                x->mode == ROWLOCK_MODE_SHARED)
                first_reader = x;
        }
    }
    b->behind_reader = first_reader != NULL;
    if (first_reader) {
        target = first_reader;
        queue_lock(l, 'q', first_reader->owner, b->wake, sizeof b->wake);
        b->blocker_ms = first_reader->expires_in_ms;
    } else if (!cluster && (sem || l->mode == ROWLOCK_MODE_EXCLUSIVE)) {
        /* Behind other waiters, an exclusive or semaphore waiter
         * waits for one of them to be granted or to leave (its queue
         * lock), then looks again; only the first waiter watches
         * the holders. Which one: our place p among the waiters,
         * with its lowest set bit cleared (a binary tree over the
         * queue), not the one just ahead: the server's deadlock
         * detector takes a chain of lock waits deeper than 32 for a
         * deadlock (error 1213), and this keeps every chain within
         * log2(waiters) + 2; a waiter moves up at most twice. */
        const unsigned want = waiters_ahead & (waiters_ahead - 1);
        unsigned k = 0;
        const entry *w = NULL;
        for (size_t i = 0; i < e->n && !w; i++) {
            const entry *x = &e->v[i];
            if (x == mine || !x->live || x->granted || !(x->ticket < tk))
                continue;
            if (k++ == want)
                w = x;
        }
        if (w) {
            target = w;
            queue_lock(l, 'q', w->owner, b->wake, sizeof b->wake);
            b->blocker_ms = w->expires_in_ms;
        } else {
            b->sem_head = sem;
        }
    }
    snprintf(b->owner, sizeof b->owner, "%s", target->owner);
    b->token = target->token;
    b->granted = target->granted;
    char rest[48] = ""; /* a waiter's place has no end to tell */
    if (blocker->granted)
        snprintf(rest, sizeof rest, " for another %lld ms", (long long)blocker->expires_in_ms);
    if (e->permits && !excl && l->mode == ROWLOCK_MODE_SHARED)
        snprintf(b->why, sizeof b->why,
                 "acquire %.150s (insert, shared): all %u permits taken (%u holders and waiters ahead; e.g. "
                 "%.150s, %s, %s, token %llu%s)",
                 l->shown, e->permits, ahead, owner, mode_name(blocker->mode),
                 blocker->granted ? "holding" : "waiting", (unsigned long long)blocker->token, rest);
    else
        snprintf(b->why, sizeof b->why, "acquire %.150s (insert, %s): %s by %.150s (%s, token %llu)%s",
                 l->shown, mode_name(l->mode), blocker->granted ? "held" : "queued for", owner,
                 mode_name(blocker->mode), (unsigned long long)blocker->token, rest);
    return 1;
}

/* One SQL_GRANT_READERS for the owners in p[4..4+n) (n >= 1): the rest of
 * the list repeats the first. */
static int grant_batch(rowlock_lock *l, rowlock__param *p, unsigned n)
{
    for (unsigned k = n; k < GRANT_BATCH; k++)
        p[4 + k] = p[4];
    rowlock__res res;
    return rowlock__db_run(l->client, RL_STMT(.what = "acquire (insert, shared): grant the waiting readers",
                                              .tmpl = SQL_GRANT_READERS, .params = p, .nparams = 4 + GRANT_BATCH,
                                              .res = &res));
}

/* Inside the attempt of a reader whose DRAW opened the name: grant the live
 * readers waiting on it (none if an exclusive entry exists: the name is not
 * open then), GRANT_BATCH owners per statement. 0 or an error. A lock wait
 * timeout on a waiter's row (its own hold-granted or give-up under way)
 * fails the attempt, which is tried again, rather than skipping that
 * batch: with innodb_rollback_on_timeout (a server setting) the timeout
 * ends the whole transaction, and our WRITE would then run autocommitted,
 * without the names row's lock that the grant decision rests on. */
static int grant_readers(rowlock_lock *l, const entries *e, const entry *mine, uint64_t token, int64_t lease_ms)
{
    for (size_t i = 0; i < e->n; i++)
        if (e->v[i].mode == ROWLOCK_MODE_EXCLUSIVE)
            return 0;
    const int64_t lease_us = lease_ms * 1000 < GRANTED_UNSEEN_US ? lease_ms * 1000 : GRANTED_UNSEEN_US;
    rowlock__param p[4 + GRANT_BATCH] = { RL_U64(token), RL_I64(lease_us), RL_I64(lease_us),
                                          RL_STR(l->name, l->name_len) };
    unsigned n = 0;
    int rc = 0;
    for (size_t i = 0; i < e->n && rc == 0; i++) {
        const entry *x = &e->v[i];
        if (x == mine || x->granted || !x->live)
            continue;
        p[4 + n++] = RL_STR(x->owner, strlen(x->owner));
        if (n == GRANT_BATCH) {
            rc = grant_batch(l, p, n);
            n = 0;
        }
    }
    return rc == 0 && n ? grant_batch(l, p, n) : rc;
}

static int attempt(rowlock_lock *l, int cluster, int64_t lease_ms, int64_t waiter_ttl_us, int try_once,
                   uint64_t *ticket, int *granted, blocked *b)
{
    rowlock_client *c = l->client;
    int rc;
    *granted = 0;
    b->path = 0;
    b->wake[0] = '\0';
    b->behind_reader = 0;
    if ((rc = rowlock__db_simple(c, "acquire (insert): begin", SQL_BEGIN)))
        return rc;
    /* SQL_DRAW's parameters; SQL_DRAW_CL's are the same without `opens` */
    rowlock__param pd[5] = { RL_I64(l->permits), RL_I64(l->permits),
                             RL_I64(l->mode == ROWLOCK_MODE_SHARED && l->permits == 0),
                             RL_STR(l->name, l->name_len), RL_I64(l->ops->id) };
    const rowlock__param pd_cl[4] = { pd[0], pd[1], pd[3], pd[4] };
    rowlock__res res;
    for (int converted = 0;; converted = 1) {
        if ((rc = rowlock__db_run(c, RL_STMT(.what = "acquire (insert): lock name", .tmpl = cluster ? SQL_DRAW_CL : SQL_DRAW,
                                             .params = cluster ? pd_cl : pd, .nparams = cluster ? 4 : 5,
                                             .res = &res))))
            goto fail;
        if (cluster && (rc = cl_still_in(l, "name's row")))
            goto fail;
        if (res.affected == 1)
            break;
        if (converted) {
            rc = rowlock__fail(c, ROWLOCK_EDB, "acquire %s (insert): the name's row vanished", l->shown);
            goto fail;
        }
        if (l->mode == ROWLOCK_MODE_EXCLUSIVE && l->permits == 0) {
            rollback(c);
            b->path = ATT_EXCLUSIVE_ROW;
            return 0;
        }
        if (cluster) {
            if ((rc = convert_cl(l, &res)) || (rc = cl_still_in(l, "conversion")))
                goto fail;
        } else {
            rowlock__param pc[5] = { RL_STR(l->name, l->name_len), RL_I64(l->ops->id), RL_I64(l->permits),
                                     RL_I64(l->ops->id), RL_I64(l->permits) };
            if ((rc = rowlock__db_run(c, RL_STMT(.what = "acquire (insert): convert", .tmpl = SQL_CONVERT, .params = pc,
                                                 .nparams = 5, .res = &res))))
                goto fail;
        }
        if (!(res.affected == 1 || res.insert_id == 1)) {
            rollback(c);
            b->path = ATT_ONE_ROW;
            rc = rowlock__explain_busy_row(l, NULL);
            if (l->found_multi) { /* became a multi-holder row meanwhile */
                l->found_multi = 0;
                rc = ROWLOCK_EBUSY;
            }
            return rc == ROWLOCK_EBUSY ? 0 : rc;
        }
    }
    const uint64_t drawn = res.insert_id;
    entries e;
    if ((rc = entries_read(l, &e, SQL_ENTRIES))) {
        free(e.v);
        goto fail;
    }
    if (cluster && ((rc = judge_entries_cl(l, &e, rowlock__now_us())) || (rc = cl_still_in(l, "entries")))) {
        free(e.v);
        goto fail;
    }

    /* Ours, and our place. */
    const entry *mine = NULL;
    for (size_t i = 0; i < e.n; i++)
        if (strcmp(e.v[i].owner, c->owner) == 0)
            mine = &e.v[i];
    unsigned others = other_holds(l) + (l->held_multi ? l->held : 0);
    int mode = l->mode, count = 1;
    uint64_t token = drawn, tk = drawn;
    /* A waiting acquire that follows a wait of this handle which ended
     * moments ago (a caller waiting in slices, as `rowlock run` does) takes
     * its queue place again: its entry was deleted so that a caller that
     * gave up blocks nobody, but its ticket still orders it. */
    if (!try_once && *ticket == 0 && l->ticket && rowlock__now_us() - l->ticket_left_us < TICKET_KEEP_US)
        tk = l->ticket;
    else if (*ticket)
        tk = *ticket;
    if (mine && mine->live && mine->granted && others > 0) {
        /* A re-entry: another handle of ours holds it (or this one does). */
        if (mine->mode == ROWLOCK_MODE_SHARED && l->mode == ROWLOCK_MODE_EXCLUSIVE) {
            rollback(c);
            free(e.v);
            return rowlock__fail(c, ROWLOCK_EUPGRADE,
                                 "acquire %s (insert, exclusive): this client holds it shared; release it first "
                                 "(no upgrade from shared to exclusive)",
                                 l->shown);
        }
        mode = mine->mode;
        count = (int)mine->count + 1;
        token = mine->token;
        tk = mine->ticket;
        *granted = 1;
    } else if (mine && mine->live && mine->mode == l->mode) {
        /* Our queued entry (keeps its place), or our grant no handle knows of
         * (its acquire's connection died after the commit): adopted. */
        tk = mine->ticket;
        if (mine->granted) {
            token = mine->token;
            *granted = 1;
        }
    }
    if (!*granted && !blocked_by(l, &e, mine, tk, cluster, b))
        *granted = 1;
    const uint64_t gen_after = mine ? mine->gen + 1 : 1; /* what our write leaves (WRITE: gen + 1, or 1) */
    /* A fresh reader's grant whose DRAW opened the name (no exclusive entry
     * at all, no permits: the entries read under the same lock say so)
     * grants the live readers waiting on it too (SQL_GRANT_READERS), before
     * our WRITE: it lets our queue lock go, which wakes the readers waiting
     * on it, and each one's SQL_GRANTED must find its row locked by this
     * grant (then it waits for our commit). Only if the DRAW did open the
     * name (shared_token = drawn, our own write): under READ COMMITTED its
     * subquery is a plain read, and an exclusive entry it saw may be gone
     * (released) by our ENTRIES; readers granted at a token the name was
     * not opened at would then share a token the SQL fence form takes for
     * one holder's (sql/0009). */
    if (!cluster && *granted && l->mode == ROWLOCK_MODE_SHARED && l->permits == 0 && e.permits == 0 &&
        token == drawn && e.shared_token == drawn && (rc = grant_readers(l, &e, mine, drawn, lease_ms))) {
        free(e.v);
        goto fail;
    }
    free(e.v);
    if (!*granted && try_once) {
        /* A try-once that lost writes nothing: no queue entry to clean up. */
        rollback(c);
        return 0;
    }

    char wake[64];
    wake_name(l, c->owner, wake, sizeof wake);
    char qlock[64];
    queue_lock(l, 'q', c->owner, qlock, sizeof qlock);
    int64_t ttl_us = *granted ? lease_ms * 1000 : waiter_ttl_us;
    rowlock__param pw[WRITE_NPARAMS];
    write_params(pw, l, mode, tk, *granted, count, token, ttl_us, wake, qlock);
    if ((rc = rowlock__db_run(c, RL_STMT(.what = "acquire (insert): write entry", .tmpl = cluster ? SQL_WRITE_CL : SQL_WRITE,
                                         .params = pw, .nparams = WRITE_NPARAMS, .res = &res))))
        goto fail;
    if (cluster && (rc = cl_still_in(l, "entry")))
        goto fail;
    if ((rc = rowlock__db_simple(c, "acquire (insert): commit", SQL_COMMIT)))
        goto fail;
    if (cluster && *granted) {
        /* The commit answered OK; a transaction the cluster aborted after
         * its last statement answered would have committed nothing. One
         * local read says which (no lock, no write): our entry as our write
         * left it (a re-entry's count, an adopted grant's gen + 1). */
        rowlock__param pg[5] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len), RL_U64(token),
                                 RL_I64(count), RL_U64(gen_after) };
        rowlock__res rg;
        rowlock__col one = { .type = ROWLOCK__T_I64 };
        if ((rc = rowlock__db_run(c, RL_STMT(.what = "acquire (insert): grant check", .tmpl = SQL_GRANTED_CL,
                                             .params = pg, .nparams = 5, .cols = &one, .ncols = 1, .res = &rg))))
            goto fail;
        if (rg.rows != 1) {
            rc = rowlock__fail(c, ROWLOCK_EBUSY,
                               "acquire %s (insert, %s): the cluster aborted the grant's transaction",
                               l->shown, mode_name(l->mode));
            goto fail;
        }
    }
    *ticket = tk;
    if (*granted)
        l->token = token;
    return 0;
fail:
    rollback(c);
    *granted = 0;
    if (rc == ROWLOCK_EBUSY)
        b->path = 0; /* a deadlock or certification failure (a queued waiter's write or commit too): try again */
    return rc;
}

/* On a cluster, inside the attempt's transaction, after a DRAW that found
 * no multi-holder row: the conversion, judging a one-row grant by watching
 * it (res: SQL_CONVERT_CL's). */
static int convert_cl(rowlock_lock *l, rowlock__res *res)
{
    rowlock_client *c = l->client;
    watches *w = watches_get(l);
    if (w == NULL)
        return rowlock__fail(c, ROWLOCK_ENOMEM, "acquire %s: out of memory", l->shown);
    rowlock__col cols[5];
    memset(cols, 0, sizeof cols);
    for (int i = 0; i < 5; i++)
        cols[i].type = ROWLOCK__T_I64;
    cols[2].type = ROWLOCK__T_U64;
    cols[3].type = ROWLOCK__T_U64;
    rowlock__param p = RL_STR(l->name, l->name_len);
    rowlock__res rr;
    int rc = rowlock__db_run(c, RL_STMT(.what = "acquire (insert): read row", .tmpl = SQL_ROW_CL, .params = &p,
                                        .nparams = 1, .cols = cols, .ncols = 5, .res = &rr));
    if (rc)
        return rc;
    const int64_t seen_at = rowlock__now_us();
    int dead = 0;
    uint64_t token = 0, gen = 0;
    if (rr.rows == 1 && cols[1].i) {
        token = cols[2].u;
        gen = cols[3].u;
        if (!w->row_seen || w->row.token != token || w->row.gen != gen) {
            w->row_seen = 1;
            w->row.token = token;
            w->row.gen = gen;
            w->row.since_us = seen_at;
        }
        dead = seen_at - w->row.since_us >= rowlock__cluster_wait_us(cols[4].i);
    }
    rowlock__param pc[8] = { RL_STR(l->name, l->name_len), RL_I64(l->ops->id), RL_I64(l->permits), RL_I64(l->ops->id),
                             RL_U64(token), RL_U64(gen), RL_I64(dead), RL_I64(l->permits) };
    rc = rowlock__db_run(c, RL_STMT(.what = "acquire (insert): convert", .tmpl = SQL_CONVERT_CL, .params = pc,
                                    .nparams = 8, .res = res));
    if (rc == 0 && (res->affected == 1 || res->insert_id == 1))
        w->row_seen = 0;
    return rc;
}

/* On a cluster, inside the attempt's transaction: which entries of others
 * are live is judged by watching, never by expires_at (a node's clock).
 * An entry this handle has seen unchanged for its lease (plus the drift
 * and margin allowances) is dead: it is deleted here, conditioned on the
 * (token, gen) watched, so that its owner's renewal meanwhile (any node)
 * either makes the delete change nothing (then this attempt is busy) or
 * fails certification against it, and its owner's later renewal or fence
 * finds nothing (the lock is lost). Our own entry is live while it exists
 * (nobody else deletes it but such a taker). seen_at: when the read of the
 * entries came back. */
static int judge_entries_cl(rowlock_lock *l, entries *e, int64_t seen_at)
{
    rowlock_client *c = l->client;
    watches *w = watches_get(l);
    if (w == NULL)
        return rowlock__fail(c, ROWLOCK_ENOMEM, "acquire %s: out of memory", l->shown);
    int rc = 0;
    for (size_t i = 0; i < e->n; i++) {
        entry *x = &e->v[i];
        if (strcmp(x->owner, c->owner) == 0) {
            x->live = 1;
            continue;
        }
        int64_t seen_for = watch_entry(w, x->owner, x->token, x->gen, seen_at);
        x->live = seen_for < 0 || seen_for < rowlock__cluster_wait_us(x->lease_us);
        if (x->live || rc)
            continue;
        rowlock__param p[4] = { RL_STR(l->name, l->name_len), RL_STR(x->owner, strlen(x->owner)), RL_U64(x->token),
                                RL_U64(x->gen) };
        rowlock__res res;
        rc = rowlock__db_run(c, RL_STMT(.what = "acquire (insert): drop a dead entry", .tmpl = SQL_DROP_DEAD,
                                        .params = p, .nparams = 4, .res = &res));
        if (rc == 0 && res.affected != 1) {
            char owner[4 * ROWLOCK_OWNER_MAX + 8];
            rowlock_escape(owner, sizeof owner, x->owner, strlen(x->owner));
            rc = rowlock__fail(c, ROWLOCK_EBUSY, "acquire %.150s (insert, %s): the entry of %.150s changed as it lapsed",
                               l->shown, mode_name(l->mode), owner);
        }
    }
    watch_prune(w);
    return rc;
}

/* Wait for a wake lock (a slice of at most cap seconds). 1 it was free or
 * freed, 0 timed out, -1 error. */
static int wait_wake(rowlock_client *c, const char *wake, double wait_s)
{
    rowlock__param p[3] = { RL_STR(wake, strlen(wake)), { ROWLOCK__T_DBL, NULL, 0, 0, 0, wait_s },
                            RL_STR(wake, strlen(wake)) };
    rowlock__col col = { .type = ROWLOCK__T_I64 };
    int rc = rowlock__db_run_quiet(c, RL_STMT(.what = "acquire: wait", .tmpl = SQL_WAIT, .params = p, .nparams = 3,
                                              .cols = &col, .ncols = 1));
    if (rc || col.is_null)
        return -1;
    return (int)col.i;
}

/* One server, the name held by a one-row (exclusive) holder: wait on its
 * hint in slices of up to 30 s (within the read timeout and the deadline),
 * each no longer than the holder's lease left (1 s for the first, before
 * the lease is known), and while a slice passes with the row still held
 * wait again without an attempt. An attempt here is 5 statements (it
 * finds the row held and explains why); 1 000 readers waiting for a
 * writer in 1 s slices made 5 400 statements/s, in these slices one per
 * waiter per slice. A holder that renews keeps its readers waiting; one
 * whose lease ends while its session stays (a stopped process) is passed
 * at its lease's end, as the attempt's row rule says (the lease left is
 * read at the statement's start: the slice's time is taken off). Not woken:
 * a release by a holder that does not hold the hint (a claim passed over a
 * paused earlier holder whose session keeps it; an administrator's force
 * release): the slice then ends by the lease.
 * Returns 1: the hint was freed, or found free at once (once per grant,
 * *free_token); 0: the row changed, the deadline came, or an interrupt;
 * -1: an error, or our own session holds the hint (no wait is possible).
 * The caller backs off briefly in every case (an attempt that still finds
 * a one-row holder cannot spin). */
static int row_wait(rowlock_lock *l, int64_t deadline, uint64_t *free_token)
{
    rowlock_client *c = l->client;
    const rowlock__lease_lock *L = ROWLOCK__LEASE(l);
    double cap = 1.0;
    int hintless = 0;
    for (;;) {
        if (rowlock__interrupted(c))
            return 0;
        double slice = rowlock__queue_slice_s(c, deadline);
        if (slice > cap)
            slice = cap;
        if (slice <= 0)
            return 0;
        /* A hint found free at once while the row stayed held: its holder
         * keeps none (its session is gone: a crashed holder, whose lease
         * runs on; or it reconnected). Nothing will wake us: look again
         * each second, one statement sleeping in the server (an interrupt
         * cuts it), instead of an attempt and a look ~8 times a second. The
         * first look never sleeps: a hint free at once then is mostly a
         * release that came between our attempt and this wait. */
        const double free_s = hintless ? (slice < 1.0 ? slice : 1.0) : 0.0;
        rowlock__param p[8] = { RL_STR(L->hint, L->hint_len), RL_STR(L->hint, L->hint_len),
                                { ROWLOCK__T_DBL, NULL, 0, 0, 0, free_s }, RL_STR(L->hint, L->hint_len),
                                { ROWLOCK__T_DBL, NULL, 0, 0, 0, slice }, RL_STR(L->hint, L->hint_len),
                                RL_STR(l->name, l->name_len), RL_I64(l->ops->id) };
        rowlock__col cols[3];
        memset(cols, 0, sizeof cols);
        cols[0].type = cols[1].type = ROWLOCK__T_I64;
        cols[2].type = ROWLOCK__T_U64;
        const int64_t sent = rowlock__now_us();
        if (rowlock__db_run_quiet(c, RL_STMT(.what = "acquire: wait", .tmpl = SQL_HOLD_WAIT_ROW, .params = p,
                                             .nparams = 8, .cols = cols, .ncols = 3, .wait_s = slice)) ||
            cols[0].is_null || cols[0].i < 0)
            return -1;
        if (cols[0].i == 1)
            return 1;
        if (cols[0].i == 3 && !cols[1].is_null && cols[2].u != *free_token) {
            /* Free at once, the row still held: first taken as a release
             * whose commit has not come yet (a release frees the hint in
             * its statement, before its commit): try, as a freed hint
             * says; the attempt waits on the row until that commit. The
             * same grant found so again has no hint: look each second. */
            *free_token = cols[2].u;
            return 1;
        }
        hintless = cols[0].i == 3;
        /* The lease left was read at the statement's start: take off the
         * slice since. */
        const int64_t left_ms = cols[1].is_null ? 0 : cols[1].i - (rowlock__now_us() - sent) / 1000;
        if (left_ms <= 0 || rowlock__now_us() >= deadline)
            return 0;
        cap = (double)left_ms / 1e3 + 0.001; /* then its lease may have ended */
    }
}

enum { HW_ERROR = -1, HW_FREED = 1, HW_FREE_AT_ONCE, HW_LOOK };

/* One server: wait on the entry b names (its wake or queue lock) in slices
 * of one statement each, as long as the slices pass and the entry stays as
 * it was (live; for the first semaphore waiter: every permit taken), in
 * each statement holding our awake lock (WAITER_LIVE: a waiter in a wait
 * is live however long ago it wrote its entry). written_us: when our entry
 * was last written (our monotonic clock); after half its place's life we
 * try again, which writes it anew. HW_FREED: the lock was freed (try now);
 * HW_FREE_AT_ONCE: nobody held it; HW_LOOK: something changed, or the
 * deadline came, or an interrupt (try; the caller's loop decides);
 * HW_ERROR. An idle waiter costs one statement per slice: up to 30 s
 * (within the read timeout), on a holder no longer than its lease left,
 * for the first semaphore waiter 250 ms growing to 5 s (SEM_SLICE_MAX_S). */
static int hold_wait(rowlock_lock *l, const blocked *b, int64_t deadline, int64_t written_us)
{
    rowlock_client *c = l->client;
    char awake[64];
    queue_lock(l, 'a', c->owner, awake, sizeof awake);
    int64_t left_ms = b->blocker_ms;
    const int64_t began = rowlock__now_us(); /* the entries stay as the caller saw them since */
    for (;;) {
        if (rowlock__interrupted(c) || rowlock__now_us() - written_us > WAITER_PLACE_US / 2)
            return HW_LOOK;
        double slice = rowlock__queue_slice_s(c, deadline);
        if (b->sem_head) {
            const double cap = rowlock__quarter_slice_s(rowlock__now_us() - began, SEM_SLICE_S, SEM_SLICE_MAX_S);
            if (slice > cap)
                slice = cap;
        }
        if (b->granted && slice > (double)left_ms / 1e3 + 0.001)
            slice = (double)left_ms / 1e3 + 0.001; /* then its lease may have ended */
        if (slice <= 0)
            return HW_LOOK;
        rowlock__param p[11] = { RL_STR(l->name, l->name_len),
                                 RL_STR(l->name, l->name_len),
                                 RL_STR(awake, strlen(awake)),
                                 RL_STR(awake, strlen(awake)),
                                 RL_STR(awake, strlen(awake)),
                                 RL_STR(b->wake, strlen(b->wake)),
                                 RL_STR(b->wake, strlen(b->wake)),
                                 { ROWLOCK__T_DBL, NULL, 0, 0, 0, slice },
                                 RL_STR(b->wake, strlen(b->wake)),
                                 RL_STR(l->name, l->name_len),
                                 RL_STR(b->owner, strlen(b->owner)) };
        rowlock__col cols[7];
        memset(cols, 0, sizeof cols);
        for (int i = 0; i < 7; i++)
            cols[i].type = ROWLOCK__T_I64;
        cols[2].type = ROWLOCK__T_U64;
        const int64_t sent = rowlock__now_us();
        if (rowlock__db_run_quiet(c, RL_STMT(.what = "acquire: wait", .tmpl = SQL_HOLD_WAIT_ENTRY, .params = p,
                                             .nparams = 11, .cols = cols, .ncols = 7, .wait_s = slice)) ||
            cols[0].is_null) {
            /* The statement failed before letting our awake lock go (a
             * deadlock the server saw, a lost connection): let it go. */
            rowlock__param pa = RL_STR(awake, strlen(awake));
            rowlock__col col = { .type = ROWLOCK__T_I64 };
            if (c->connected)
                (void)rowlock__db_run_quiet(c, RL_STMT(.what = "hold", .tmpl = SQL_WAKE_FREE, .params = &pa,
                                                       .nparams = 1, .cols = &col, .ncols = 1));
            return HW_ERROR;
        }
        if (cols[0].i == 3)
            return HW_FREE_AT_ONCE;
        if (cols[0].i != 0)
            return HW_FREED;
        if (rowlock__now_us() >= deadline || cols[1].is_null || (int)cols[1].i != b->granted ||
            cols[2].u != b->token || (b->granted ? cols[3].is_null || cols[3].i <= 0 : !cols[4].i) ||
            (b->sem_head && cols[5].i))
            return HW_LOOK;
        left_ms = cols[3].i - (rowlock__now_us() - sent) / 1000; /* read at the statement's start */
        if (b->granted && left_ms <= 0)
            return HW_LOOK;
    }
}

/* One server: a waiter woken because the waiter it watched was granted or
 * left (its queue lock was freed during a wait) reads the entries in one
 * statement and, while they still block it, waits again on what blocks it
 * now, without an attempt. An attempt takes the names row's lock, which
 * every acquire and grant of the name queues for, for 5 round trips; in a
 * queue woken as a tree, up to log2(waiters) waiters wake at each grant,
 * and behind an exclusive grant every one of them is still blocked (8
 * exclusive waiters made 26 attempts without looks, 16 with them:
 * db_inject). The look changes nothing: the
 * grant decision stays with the attempt. 1: still blocked (b says on what
 * to wait); 0: try (the entries would grant us, our entry changed, or the
 * read failed). */
static int look(rowlock_lock *l, uint64_t ticket, blocked *b)
{
    /* Worth a statement only when the entries must still block us: an
     * exclusive waiter (whoever went, someone is still ahead of it) or a
     * semaphore waiter more than its permits behind the first waiter. A
     * waiter nearer the front tries at once: in a busy semaphore a permit
     * is usually free by then. */
    if (l->mode != ROWLOCK_MODE_EXCLUSIVE && !(b->permits > 0 && b->place > b->permits) && !b->behind_reader)
        return 0;
    rowlock_client *c = l->client;
    entries e;
    if (entries_read(l, &e, SQL_LOOK)) {
        free(e.v);
        if (c->connected)
            rowlock__clear_error(c); /* a lock wait or deadlock: the attempt decides */
        return 0;
    }
    const entry *mine = NULL;
    for (size_t i = 0; i < e.n; i++)
        if (strcmp(e.v[i].owner, c->owner) == 0)
            mine = &e.v[i];
    blocked nb;
    memset(&nb, 0, sizeof nb);
    /* Ours as our last attempt wrote it (live or not: others judge that;
     * we are here). */
    int still = mine && !mine->granted && mine->mode == l->mode && mine->ticket == ticket &&
                blocked_by(l, &e, mine, ticket, 0, &nb);
    free(e.v);
    if (still)
        *b = nb;
    return still;
}

/* Join the readers of a name open to them (SQL_JOIN): 0 and *joined 1 a
 * grant (l->token set), 0 and *joined 0 not open (the attempt decides), or
 * an error (ROWLOCK_EBUSY: a lock wait on the names row, a DRAW in
 * progress: the attempt decides too). */
static int join(rowlock_lock *l, int64_t lease_ms, int *joined)
{
    rowlock_client *c = l->client;
    char wake[64];
    wake_name(l, c->owner, wake, sizeof wake);
    const int64_t lease_us = lease_ms * 1000;
    const rowlock__param pr[7] = { RL_STR(c->owner, c->owner_len), RL_STR(wake, strlen(wake)),
                                   RL_STR(wake, strlen(wake)), RL_I64(lease_us), RL_I64(lease_us),
                                   RL_STR(l->name, l->name_len), RL_I64(l->ops->id) };
    rowlock__res res;
    *joined = 0;
    int rc = rowlock__db_run(c, RL_STMT(.what = "acquire (insert, shared): join", .tmpl = SQL_JOIN, .params = pr,
                                        .nparams = 7, .res = &res));
    if (rc)
        return rc;
    if (res.affected != 1)
        return 0;
    l->token = res.insert_id;
    if (l->token == 0) {
        /* LAST_INSERT_ID(t.token) (t.token > 0) did not reach us: read the
         * token of the entry we wrote (never seen on MariaDB). */
        const rowlock__param pk[2] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len) };
        rowlock__col col = { .type = ROWLOCK__T_U64 };
        if ((rc = rowlock__db_run(c, RL_STMT(.what = "acquire (insert, shared): join", .tmpl = SQL_JOINED,
                                             .params = pk, .nparams = 2, .cols = &col, .ncols = 1, .res = &res))))
            return rc;
        if (res.rows != 1 || col.is_null || col.u == 0)
            return rowlock__fail(c, ROWLOCK_EDB, "acquire %s (insert, shared): the entry it joined with is gone",
                                 l->shown);
        l->token = col.u;
    }
    *joined = 1;
    return 0;
}

/* A reader woken by the waiter ahead of it (one server): whether the
 * reader that opened the name granted it too (SQL_GRANTED). 0 and *got 1:
 * granted (l->token set, the lease ours from now, our queue lock let go);
 * 0 and *got 0: not (the attempt decides); or an error. */
static int granted_with(rowlock_lock *l, int64_t lease_ms, int *got)
{
    rowlock_client *c = l->client;
    char qlock[64], wake[64];
    queue_lock(l, 'q', c->owner, qlock, sizeof qlock);
    wake_name(l, c->owner, wake, sizeof wake);
    const rowlock__param p[7] = { RL_I64(lease_ms * 1000), RL_I64(lease_ms * 1000), RL_STR(qlock, strlen(qlock)),
                                  RL_STR(wake, strlen(wake)),  RL_STR(wake, strlen(wake)),
                                  RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len) };
    rowlock__res res;
    *got = 0;
    int rc = rowlock__db_run(c, RL_STMT(.what = "acquire (insert, shared): granted?", .tmpl = SQL_GRANTED,
                                        .params = p, .nparams = 7, .res = &res));
    if (rc)
        return rc;
    if (res.affected != 1 || res.insert_id == 0)
        return 0;
    l->token = res.insert_id;
    *got = 1;
    return 0;
}

int rowlock__holders_give_back(rowlock_lock *l)
{
    if (other_holds(l) != 0 || l->held != 0)
        return 0;
    rowlock__param p[2] = { RL_STR(l->name, l->name_len), RL_STR(l->client->owner, l->client->owner_len) };
    rowlock__res res;
    int rc = rowlock__lease_exec_retrying(l, "give back", SQL_FORGET_ANY, p, 2, &res);
    return rc ? rc : res.affected ? 1 : 0;
}

/* A waiter that gives up (deadline, interrupt, error): its entry goes, and
 * its queue lock (and, unless a handle of ours holds the name, its wake
 * lock). With no hold of ours, the entry goes even if granted: a grant
 * made for us by another's attempt just before we gave up ("Readers
 * granted together"), which would hold writers up for its lease; the
 * give-back's statement, whose lock waits and deadlocks (against an
 * opener granting us) are tried again. The caller's error is kept. */
static void forget(rowlock_lock *l)
{
    rowlock_client *c = l->client;
    if (!c->connected)
        return;
    if (other_holds(l) == 0 && l->held == 0) {
        rowlock__errsave keep;
        rowlock__error_save(c, &keep);
        (void)rowlock__holders_give_back(l);
        rowlock__error_restore(c, &keep);
    } else {
        rowlock__param p[2] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len) };
        (void)rowlock__db_run_quiet(c, RL_STMT(.what = "hold", .tmpl = SQL_FORGET, .params = p, .nparams = 2));
    }
    char qlock[64];
    queue_lock(l, 'q', c->owner, qlock, sizeof qlock);
    rowlock__param pq = RL_STR(qlock, strlen(qlock));
    rowlock__col qcol = { .type = ROWLOCK__T_I64 };
    (void)rowlock__db_run_quiet(c, RL_STMT(.what = "hold", .tmpl = SQL_WAKE_FREE, .params = &pq, .nparams = 1,
                                           .cols = &qcol, .ncols = 1));
    if (other_holds(l) == 0 && l->held == 0) {
        char wake[64];
        wake_name(l, c->owner, wake, sizeof wake);
        rowlock__param pw = RL_STR(wake, strlen(wake));
        rowlock__col col = { .type = ROWLOCK__T_I64 };
        (void)rowlock__db_run_quiet(c, RL_STMT(.what = "hold", .tmpl = SQL_WAKE_FREE, .params = &pw, .nparams = 1,
                                               .cols = &col, .ncols = 1));
    }
}

/* Granted an entry (an attempt, a join, or a grant another's attempt made
 * for us): the handle holds the name as a multi-holder grant, and its queue
 * place is spent. */
static int granted_multi(rowlock_lock *l)
{
    l->held_multi = 1;
    l->ticket = 0;
    return 0;
}

static int holders_acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms, rowlock__acquire_fn one_row)
{
    rowlock_client *c = l->client;
    if (l->permits > ROWLOCK_PERMITS_MAX)
        return rowlock__fail(c, ROWLOCK_EINVALID, "acquire %s: %u permits is over the limit (%u)", l->shown,
                             l->permits, ROWLOCK_PERMITS_MAX);
    /* One server: leases judged by expires_at. A cluster: by watching. */
    const rowlock__lease_rule *rule;
    int rc0 = rowlock__lease_rule_get(c, &rule);
    if (rc0)
        return rc0;
    const int cluster = !(rule->flags & ROWLOCK__RULE_CLOCK);
    const int64_t start = rowlock__now_us();
    const int64_t deadline =
        wait_ms == ROWLOCK_WAIT_FOREVER || wait_ms > ROWLOCK_LEASE_MAX_MS ? INT64_MAX : start + wait_ms * 1000;
    uint64_t ticket = 0;
    unsigned polls = 0;
    int queued = 0;
    int64_t written_us = 0; /* one server: when our waiter entry was last written */
    /* One server: the holder whose wake lock we last found free at once
     * while its lease ran (owner, token). */
    char gone_owner[ROWLOCK_OWNER_MAX + 1] = "";
    uint64_t gone_token = 0;
    const int64_t ttl_us = cluster ? WAITER_TTL_US : WAITER_PLACE_US;
    uint64_t free_token = 0; /* row_wait: the one-row grant last found without its hint */
    /* One server: what this acquire may write (a waiter entry; a join's or
     * an attempt's grant whose reply an interrupt's cut lost: it commits
     * all the same) the give-back after the cut deletes, unless a handle of
     * ours holds it (lock.c). A cluster has no give-back. */
    l->hold_wrote = !cluster;
    if (!cluster && l->mode == ROWLOCK_MODE_SHARED && l->permits == 0 && l->held == 0 && other_holds(l) == 0) {
        /* A reader with no hold of the name on this client: join the
         * readers if the name is open to them (one statement), else the
         * attempt below decides (and may open it). */
        int joined = 0;
        int rc = join(l, lease_ms, &joined);
        if (rc == 0 && joined)
            return granted_multi(l);
        if (rc == ROWLOCK_EBUSY)
            rowlock__clear_error(c);
        else if (rc)
            return rc;
    }
    for (;;) {
        if (wait_ms != 0 && rowlock__interrupted(c)) { /* rowlock_client_interrupt() */
            if (queued)
                forget(l);
            return rowlock__fail(c, ROWLOCK_EBUSY, "acquire %s (insert, %s): interrupted", l->shown,
                                 mode_name(l->mode));
        }
        int granted = 0;
        blocked b;
        const int64_t tried_at = rowlock__now_us();
        int rc = attempt(l, cluster, lease_ms, ttl_us, wait_ms == 0, &ticket, &granted, &b);
        if (rc == ROWLOCK_EBUSY && b.path == 0) {
            /* A lock wait or deadlock on the name's row (another acquirer's
             * transaction, a for-update holder): try again shortly. */
            rc = 0;
            b.path = ATT_QUEUED;
            b.wake[0] = '\0';
            b.blocker_ms = 0;
            b.slice_cap_s = 0;
            memcpy(b.why, c->errmsg, sizeof b.why);
        }
        if (rc) {
            if (queued)
                forget(l);
            return rc;
        }
        if (granted)
            return granted_multi(l);
        if (b.path == ATT_EXCLUSIVE_ROW) {
            l->multi = 0; /* the name has no multi-holder row (any more) */
            int64_t left = deadline == INT64_MAX ? ROWLOCK_WAIT_FOREVER : (deadline - rowlock__now_us()) / 1000;
            rc = one_row(l, left < 0 ? 0 : left, lease_ms);
            if (rc == 0)
                l->held_multi = 0;
            if (!l->found_multi)
                return rc;
            l->found_multi = 0;
            rowlock__clear_error(c); /* turned into a multi-holder name meanwhile */
            l->multi = 1;
            continue;
        }
        if (b.path == ATT_ONE_ROW && l->busy_self) {
            /* Held by this client through another handle (a plain
             * exclusive grant): refused at once, as an upgrade is (the
             * message says so); a wait could only end at the deadline,
             * polling the client's own row (24 attempts in 2.5 s). */
            l->busy_self = 0;
            if (queued) {
                memcpy(b.why, c->errmsg, sizeof b.why);
                forget(l);
                memcpy(c->errmsg, b.why, sizeof c->errmsg);
            }
            return ROWLOCK_EBUSY;
        }
        if (b.path == ATT_QUEUED) {
            queued = 1;
            written_us = tried_at; /* our entry's write came after tried_at */
        } else
            memcpy(b.why, c->errmsg, sizeof b.why); /* ATT_ONE_ROW: the explaining read's message */
        int64_t now = rowlock__now_us();
        if (now >= deadline) {
            if (queued) {
                forget(l);
                l->ticket = ticket;
                l->ticket_left_us = rowlock__now_us();
            }
            memcpy(c->errmsg, b.why, sizeof c->errmsg);
            return ROWLOCK_EBUSY;
        }
        int64_t left_us = deadline - now;
        double slice = b.path == ATT_QUEUED ? b.slice_cap_s : 1.0;
        if (cluster && slice > rule->slice_max_s)
            slice = rule->slice_max_s; /* wake locks are node-local: look again often */
        if ((double)left_us / 1e6 < slice)
            slice = (double)left_us / 1e6;
        if (!cluster && b.path == ATT_QUEUED && b.wake[0]) {
            int h = hold_wait(l, &b, deadline, written_us);
            for (;;) {
                if ((h == HW_FREED || h == HW_FREE_AT_ONCE) && b.behind_reader) {
                    /* The first reader behind our writer was granted or
                     * left: granted with it? If not, and the writer is
                     * still there (that reader left), wait again, on what
                     * the entries say now, without an attempt. */
                    int got = 0;
                    int rg = granted_with(l, lease_ms, &got);
                    if (rg == 0 && got)
                        return granted_multi(l);
                    if (rg && rg != ROWLOCK_EBUSY) {
                        forget(l);
                        return rg;
                    }
                    rowlock__clear_error(c);
                } else if (!(h == HW_FREED && !b.granted && b.wake[0])) {
                    break;
                }
                if (!look(l, ticket, &b))
                    break;
                h = hold_wait(l, &b, deadline, written_us);
            }
            if (h == HW_FREED || (h == HW_FREE_AT_ONCE && !b.granted) || h == HW_LOOK) {
                /* Freed, a waiter ahead that left (its session too), or a
                 * change: look again at once. */
                polls = 0;
            } else if (h == HW_FREE_AT_ONCE &&
                       (strcmp(gone_owner, b.owner) != 0 || gone_token != b.token)) {
                /* The holder's wake lock is free but its lease runs: it let
                 * go since we read its entry (in a busy semaphore, the
                 * usual case: a permit is free), or its session is gone.
                 * Try at once; the same holder found so again is gone. */
                snprintf(gone_owner, sizeof gone_owner, "%s", b.owner);
                gone_token = b.token;
                polls = 0;
            } else if (h == HW_FREE_AT_ONCE) {
                /* The holder's wake lock is free but its lease runs, twice
                 * in a row: its session is gone (or between statements).
                 * Wait for its lease, polling with capped backoff. */
                int64_t d = rowlock__backoff_us(polls < 16 ? polls : 16, 2000, 200000, rowlock__rand32(&c->rng));
                polls++;
                if (d > b.blocker_ms * 1000 + 1000)
                    d = b.blocker_ms * 1000 + 1000;
                if (d > deadline - rowlock__now_us())
                    d = deadline - rowlock__now_us();
                if (d > 0)
                    rowlock__sleep_us(d);
            } else {
                rowlock__sleep_us(rowlock__backoff_us(polls < 16 ? polls++ : 16, 2000, 200000, rowlock__rand32(&c->rng)));
            }
            continue;
        }
        int w;
        if (!cluster && b.path == ATT_ONE_ROW) {
            /* Back off briefly before the attempt, within the deadline:
             * after a hint freed (a release: row_wait returns 1 only on a
             * change, once per grant when free at once) from the start
             * again, else growing. */
            int w1 = row_wait(l, deadline, &free_token);
            int64_t d = rowlock__backoff_us(w1 == 1 ? 0 : (polls < 16 ? polls++ : 16), 2000, 200000,
                                            rowlock__rand32(&c->rng));
            if (w1 == 1)
                polls = 0;
            if (d > deadline - rowlock__now_us())
                d = deadline - rowlock__now_us();
            if (d > 0)
                rowlock__sleep_us(d);
            continue;
        }
        if (b.path == ATT_ONE_ROW)
            w = wait_wake(c, ROWLOCK__LEASE(l)->hint, slice); /* the one-row holder's hint (a cluster) */
        else if (b.wake[0])
            w = wait_wake(c, b.wake, slice);
        else
            w = 1;
        if (cluster && w != 0) {
            /* Free at once (a blocker on another node, or one gone), an
             * error, or a busy statement (certification): back off, capped
             * at the slice; the next attempt judges the entries again. */
            int64_t d = rowlock__backoff_us(polls < 16 ? polls++ : 16, 2000, (int64_t)(rule->slice_max_s * 1e6),
                                            rowlock__rand32(&c->rng));
            if (d > deadline - rowlock__now_us())
                d = deadline - rowlock__now_us();
            if (d > 0)
                rowlock__sleep_us(d);
        } else if (cluster) {
            polls = 0;
        } else if (w < 0 || !b.wake[0]) {
            /* An error, or a busy statement: back off. */
            rowlock__sleep_us(rowlock__backoff_us(polls < 16 ? polls++ : 16, 2000, 200000, rowlock__rand32(&c->rng)));
        } else {
            polls = 0;
        }
    }
}

static void wake_free(rowlock_lock *l)
{
    char wake[64];
    wake_name(l, l->client->owner, wake, sizeof wake);
    rowlock__param pw = RL_STR(wake, strlen(wake));
    rowlock__col col = { .type = ROWLOCK__T_I64 };
    (void)rowlock__db_run_quiet(l->client, RL_STMT(.what = "hold", .tmpl = SQL_WAKE_FREE, .params = &pw, .nparams = 1,
                                                   .cols = &col, .ncols = 1));
}

static int lost(rowlock_lock *l, const char *what)
{
    if (other_holds(l) == 0 && l->client->connected)
        wake_free(l); /* nobody may wait on an entry that is gone */
    return rowlock__fail(l->client, ROWLOCK_ENOTOWNER,
                         "%s %s (insert, %s): not the owner any more: its lease ended and its entry was taken over "
                         "or purged, or an administrator released it",
                         what, l->shown, mode_name(l->mode));
}

int rowlock__holders_release(rowlock_lock *l)
{
    rowlock_client *c = l->client;
    const rowlock__lease_rule *rule;
    int rc = rowlock__lease_rule_get(c, &rule);
    if (rc)
        return rc;
    /* A cluster: an entry still there is ours (a taker passes over an entry
     * only by deleting it). One server: only while its lease runs. */
    const int cluster = !(rule->flags & ROWLOCK__RULE_CLOCK);
    rowlock__param p[3] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len), RL_U64(l->token) };
    rowlock__res res;
    int last = l->held == 1 && sharing(l) == 0;
    const char *sql = last ? (cluster ? SQL_RELEASE_LAST : SQL_RELEASE_LAST_LIVE)
                           : (cluster ? SQL_RELEASE_ONE : SQL_RELEASE_ONE_LIVE);
    rc = rowlock__lease_exec_retrying(l, "release", sql, p, 3, &res);
    if (rc)
        return rc;
    if (res.affected != 1 && !cluster) {
        /* Not live any more (or gone): clear what is left of it (the entry,
         * whatever its count, unless another handle of ours shares it: then
         * our count), and report the loss either way. */
        const int alone = sharing(l) == 0;
        rowlock__res gone;
        if (rowlock__lease_exec_retrying(l, "release", alone ? SQL_RELEASE_LAST : SQL_RELEASE_ONE, p, 3, &gone) == 0 &&
            gone.affected == 1) {
            if (alone && c->connected)
                wake_free(l);
            return rowlock__fail(c, ROWLOCK_ENOTOWNER,
                                 "release %s (insert, %s): not the owner any more: its lease had ended (another owner "
                                 "may have held the name since)",
                                 l->shown, mode_name(l->mode));
        }
        return lost(l, "release");
    }
    if (res.affected != 1)
        return lost(l, "release");
    if (last)
        wake_free(l); /* after the commit: wakes a waiter */
    return 0;
}

int rowlock__holders_renew(rowlock_lock *l, int64_t lease_ms)
{
    rowlock_client *c = l->client;
    const rowlock__lease_rule *rule;
    int rc = rowlock__lease_rule_get(c, &rule);
    if (rc)
        return rc;
    const int cluster = !(rule->flags & ROWLOCK__RULE_CLOCK);
    rowlock__param p[5] = { RL_I64(lease_ms * 1000), RL_I64(lease_ms * 1000), RL_STR(l->name, l->name_len),
                            RL_STR(c->owner, c->owner_len), RL_U64(l->token) };
    rowlock__res res;
    rc = cluster ? rowlock__lease_exec_retrying(l, "renew", SQL_RENEW_CL, p, 5, &res)
                 : rowlock__lease_exec_retrying(l, "renew", SQL_RENEW, p + 1, 4, &res);
    if (rc)
        return rc;
    return res.affected == 1 ? 0 : lost(l, "renew");
}

int rowlock__holders_acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms, rowlock__acquire_fn one_row)
{
    l->found_multi = 0;
    if (l->multi && (l->held == 0 || l->held_multi))
        return holders_acquire(l, wait_ms, lease_ms, one_row);
    const int64_t start = rowlock__now_us();
    int rc = one_row(l, wait_ms, lease_ms);
    if (rc == 0)
        l->held_multi = 0;
    if (!l->found_multi)
        return rc;
    /* The name has a multi-holder row: its exclusive holders are entries too. */
    l->found_multi = 0;
    rowlock__clear_error(l->client);
    l->multi = 1;
    int64_t left = wait_ms;
    if (wait_ms > 0) {
        left = wait_ms - (rowlock__now_us() - start) / 1000;
        if (left < 0)
            left = 0;
    }
    return holders_acquire(l, left, lease_ms, one_row);
}

/* ---- downgrade: exclusive to shared without letting go ---------------------- */

/*
 * rowlock_downgrade() of an insert grant. The name is never free in
 * between, so no writer can get in:
 *   - a holders-table grant (l->held_multi): one statement turns our granted
 *     exclusive entry into a shared one (mode 1). It is one row; an acquirer
 *     deciding meanwhile read it under a shared lock (ENTRIES), so our
 *     UPDATE waits for its commit, and it decided on the exclusive entry.
 *   - a one-row grant: one transaction locks the names row (our live grant,
 *     FOR UPDATE), writes our entry as a granted shared holder (WRITE, with
 *     our wake lock), then turns the row into a multi-holder row (owner '',
 *     lease to 9999) and commits. Until the commit the row is ours and
 *     locked; after it, our entry conflicts with every exclusive acquirer.
 * The token stays (the grant goes on; the row's token is already it, so
 * later grants still draw greater ones), the lease becomes at least
 * lease_ms from now (never shorter), the ticket is the token (first in the
 * queue: every waiter's ticket is a later draw).
 * Waking: readers queued behind us wait on our wake lock (holders-table
 * grant) or on the one-row holder's hint; after the commit we let go of it
 * (the hint), or let it go and take it again in one statement (our wake
 * lock: the server grants it to the queued waiters first, each of which
 * frees it at once), so they try again now instead of after their slice.
 * Exclusive waiters behind us wake too and find the name still held.
 */

/* Params: lease µs, name, owner, token. Rows: 1 done, 0 lost. */
static const char SQL_DOWNGRADE[] =
    "/* rowlock:hold-downgrade */ SET STATEMENT time_zone='+00:00' FOR UPDATE `{{table}}_hold` SET mode = 1,"
    " expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) "
    "WHERE name = ? AND owner = ? AND token = ? AND granted = 1 AND mode = 0 AND expires_at > " LIVE_NOW;
/* Params: name, strategy, owner, token. One row (count, lease left in µs)
 * when the one-row grant is ours and live: now locked; none: lost. */
static const char SQL_DOWNGRADE_LOCK[] =
    "/* rowlock:hold-downgrade-lock */ SET STATEMENT innodb_lock_wait_timeout=1 FOR "
    "SELECT count, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM `{{table}}` "
    "WHERE name = ? AND strategy = ? AND owner = ? AND token = ? AND mode = 0 AND expires_at > UTC_TIMESTAMP(6) "
    "FOR UPDATE";
/* Params: permits, name, owner, token. Rows: 1 (the row locked above). */
static const char SQL_DOWNGRADE_CONVERT[] =
    "/* rowlock:hold-downgrade-convert */ UPDATE `{{table}}` SET permits = ?, mode = 1, owner = '', count = 0,"
    " expires_at = '9999-12-31 00:00:00' WHERE name = ? AND owner = ? AND token = ? AND mode = 0";
/* After a lost connection: did the downgrade commit? Params: name, owner,
 * token. One row (mode) for our live grant's entry. */
static const char SQL_DOWNGRADE_CHECK[] =
    "/* rowlock:hold-downgrade-check */ SELECT mode FROM `{{table}}_hold` "
    "WHERE name = ? AND owner = ? AND token = ? AND granted = 1 AND expires_at > UTC_TIMESTAMP(6)";
/* Let our wake lock go and take it again (waiters queued on it get it
 * first). Params: wake, wake. */
static const char SQL_WAKE_CYCLE[] =
    "/* rowlock:hold-wake-cycle */ SELECT IFNULL(RELEASE_LOCK(?), 0), IFNULL(GET_LOCK(?, 5), 0)";

/* One try of the one-row transaction: 0 done, EBUSY a lock wait (nothing
 * changed), ENOTOWNER lost, or an error. */
static int downgrade_one_row(rowlock_lock *l, int64_t lease_ms)
{
    rowlock_client *c = l->client;
    int rc;
    if ((rc = rowlock__db_simple(c, "downgrade (insert): begin", SQL_BEGIN)))
        return rc;
    rowlock__param pl[4] = { RL_STR(l->name, l->name_len), RL_I64(l->ops->id), RL_STR(c->owner, c->owner_len),
                             RL_U64(l->token) };
    rowlock__col cols[2] = { { .type = ROWLOCK__T_I64 }, { .type = ROWLOCK__T_I64 } };
    rowlock__res res;
    if ((rc = rowlock__db_run(c, RL_STMT(.what = "downgrade (insert): lock name", .tmpl = SQL_DOWNGRADE_LOCK,
                                         .params = pl, .nparams = 4, .cols = cols, .ncols = 2, .res = &res))))
        goto fail;
    if (res.rows != 1) {
        rollback(c);
        return rowlock__explain_lost(l, "downgrade");
    }
    if (cols[0].i != 1) {
        rollback(c);
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "downgrade %s (insert): this client holds it %lld times; release the re-entries first",
                             l->shown, (long long)cols[0].i);
    }
    int64_t lease_us = cols[1].i > lease_ms * 1000 ? cols[1].i : lease_ms * 1000;
    char wake[64], qlock[64];
    wake_name(l, c->owner, wake, sizeof wake);
    queue_lock(l, 'q', c->owner, qlock, sizeof qlock);
    rowlock__param pw[WRITE_NPARAMS];
    write_params(pw, l, ROWLOCK_MODE_SHARED, l->token, 1, 1, l->token, lease_us, wake, qlock);
    if ((rc = rowlock__db_run(c, RL_STMT(.what = "downgrade (insert): write entry", .tmpl = SQL_WRITE, .params = pw,
                                         .nparams = WRITE_NPARAMS, .res = &res))))
        goto fail;
    rowlock__param pc[4] = { RL_I64(l->permits), RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len),
                             RL_U64(l->token) };
    if ((rc = rowlock__db_run(c, RL_STMT(.what = "downgrade (insert): convert", .tmpl = SQL_DOWNGRADE_CONVERT,
                                         .params = pc, .nparams = 4, .res = &res))))
        goto fail;
    if (res.affected != 1) {
        rollback(c);
        return rowlock__fail(c, ROWLOCK_EDB, "downgrade %s (insert): the locked row did not change", l->shown);
    }
    if ((rc = rowlock__db_simple(c, "downgrade (insert): commit", SQL_COMMIT)))
        goto fail;
    return 0;
fail:
    rollback(c);
    return rc;
}

/* After a downgrade whose connection died (session, port: that
 * connection's). Its server session may still be running the statement (a
 * lock wait that outlasted the read timeout), and a read now could find
 * the grant exclusive while that session's UPDATE commits a moment later:
 * readers would then be granted beside a holder told it is still
 * exclusive. So the session is ended first (KILL, then gone from the
 * process list, as the give-back after an interrupt does), then the grant
 * is read. 1: the downgrade committed (shared now); 0: it did not
 * (c's error is the statement's again); -1: unknown (the session could not
 * be ended, or the read failed): the caller gives the grant up. */
static int downgrade_outcome(rowlock_lock *l, unsigned long session, unsigned int port)
{
    rowlock_client *c = l->client;
    rowlock__errsave keep;
    rowlock__error_save(c, &keep);
    if (session == 0 || rowlock__db_end_cut_session(c, session, port) != 0)
        return -1;
    rowlock__param p[3] = { RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len), RL_U64(l->token) };
    rowlock__col col = { .type = ROWLOCK__T_I64 };
    rowlock__res res;
    int rc = rowlock__db_run_quiet(c, RL_STMT(.what = "downgrade (insert): check", .tmpl = SQL_DOWNGRADE_CHECK,
                                              .params = p, .nparams = 3, .cols = &col, .ncols = 1, .res = &res));
    if (rc)
        return -1;
    if (res.rows == 1 && col.i == ROWLOCK_MODE_SHARED)
        return 1;
    rowlock__error_restore(c, &keep);
    return 0;
}

/* The downgrade failed with rc: the connection died and its outcome is
 * unknown. The grant is given up (ROWLOCK_ENOTOWNER: lock.c marks the
 * handle lost): whatever it is now, exclusive or shared, it ends with its
 * lease. */
static int downgrade_unknown(rowlock_lock *l)
{
    return rowlock__fail(l->client, ROWLOCK_ENOTOWNER,
                         "downgrade %s (insert): the connection was lost and whether the downgrade committed "
                         "cannot be known; the lock is given up (it ends with its lease)",
                         l->shown);
}

/* A downgrade's statement or transaction failed with rc: 0 if it committed
 * all the same (its connection died after the change), else what the
 * downgrade returns (rc: nothing changed; ROWLOCK_ENOTOWNER: unknown). */
static int downgrade_failed(rowlock_lock *l, int rc, unsigned long session, unsigned int port)
{
    if (rowlock__db_classify(l->client->db_errno) != ROWLOCK__DB_CONN)
        return rc;
    const int done = downgrade_outcome(l, session, port);
    return done > 0 ? 0 : done < 0 ? downgrade_unknown(l) : rc;
}

int rowlock__holders_downgrade(rowlock_lock *l, int64_t lease_ms)
{
    rowlock_client *c = l->client;
    const rowlock__lease_rule *rule;
    int rc = rowlock__lease_rule_get(c, &rule);
    if (rc)
        return rc;
    if (!(rule->flags & ROWLOCK__RULE_CLOCK))
        return rowlock__fail(c, ROWLOCK_EUNSUPPORTED,
                             "downgrade %s (insert): not supported on a Galera cluster yet (release, then acquire "
                             "shared)",
                             l->shown);
    if (other_holds(l) > 0 || l->held != 1)
        return rowlock__fail(c, ROWLOCK_EINVALID,
                             "downgrade %s (insert): held %u times by this client; release the re-entries first "
                             "(a downgrade would change every hold)",
                             l->shown, l->held + other_holds(l));
    unsigned long session;
    unsigned int port;
    if ((rc = rowlock__db_ensure(c, "downgrade")))
        return rc;
    rowlock__db_session(c, &session, &port); /* the statements below run on it (we hold the connection) */
    if (l->held_multi) {
        rowlock__param p[4] = { RL_I64(lease_ms * 1000), RL_STR(l->name, l->name_len), RL_STR(c->owner, c->owner_len),
                                RL_U64(l->token) };
        rowlock__res res;
        rc = rowlock__lease_exec_retrying(l, "downgrade", SQL_DOWNGRADE, p, 4, &res);
        if (rc == 0 && res.affected != 1)
            return lost(l, "downgrade");
        if (rc != 0 && (rc = downgrade_failed(l, rc, session, port)))
            return rc;
        if (c->connected) {
            char wake[64];
            wake_name(l, c->owner, wake, sizeof wake);
            rowlock__param pw[2] = { RL_STR(wake, strlen(wake)), RL_STR(wake, strlen(wake)) };
            rowlock__col cols[2] = { { .type = ROWLOCK__T_I64 }, { .type = ROWLOCK__T_I64 } };
            (void)rowlock__db_run_quiet(c, RL_STMT(.what = "downgrade: wake", .tmpl = SQL_WAKE_CYCLE, .params = pw,
                                                   .nparams = 2, .cols = cols, .ncols = 2));
        }
        rowlock__clear_error(c);
        return 0;
    }
    /* A one-row grant: a lock wait (another session's claim statement on the
     * row, microseconds) rolled the transaction back; try again. */
    for (unsigned attempt = 0;; attempt++) {
        if (attempt) {
            /* The attempt before was rolled back (a lock wait): a failed
             * reconnect changes nothing, and says so (a review). */
            if ((rc = rowlock__db_ensure(c, "downgrade")))
                return rc;
            rowlock__db_session(c, &session, &port);
        }
        rc = downgrade_one_row(l, lease_ms);
        if (rc != ROWLOCK_EBUSY || attempt >= 8)
            break;
        rowlock__sleep_us(rowlock__backoff_us(attempt, 1000, 100000, rowlock__rand32(&c->rng)));
    }
    if (rc == ROWLOCK_EBUSY)
        rc = rowlock__fail(c, ROWLOCK_EDB, "%s", c->errmsg);
    if (rc != 0 && (rc = downgrade_failed(l, rc, session, port)))
        return rc;
    rowlock__clear_error(c);
    l->held_multi = 1;
    l->multi = 1;
    /* The one-row holder's hint: shared waiters and the head of the one-row
     * queue wait on it; they find a multi-holder name now. */
    rowlock__hint_release(l);
    return 0;
}

/* ---- administration ------------------------------------------------------ */

/* Params: name, name (NULL: all). A waiter is live on one server as
 * WAITER_LIVE says, on a cluster while its entry's expires_at has not
 * passed (queue locks are node-local; its entry lives 5 s past each try). */
#define SQL_HOLDERS_OF(waiter_live)                                                                            \
    "/* rowlock:hold-list */ SELECT h.name, h.owner, h.mode, h.granted,"                                        \
    " IF(h.granted = 1, h.expires_at > UTC_TIMESTAMP(6), " waiter_live "), h.count, h.token,"                   \
    " h.ticket, FLOOR(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), h.expires_at) / 1000), IFNULL(t.permits, 0),"   \
    " IF(h.granted = 1, IFNULL(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', h.acquired_at), 0), 0),"               \
    " TIMESTAMPDIFF(MICROSECOND, '1970-01-01', h.expires_at) "                                                 \
    "FROM `{{table}}_hold` h LEFT JOIN `{{table}}` t ON t.name = h.name "                                      \
    "WHERE (? IS NULL OR h.name = ?) ORDER BY h.name, h.ticket"
static const char SQL_HOLDERS[] = SQL_HOLDERS_OF(WAITER_LIVE);
static const char SQL_HOLDERS_CL[] = SQL_HOLDERS_OF("h.expires_at > UTC_TIMESTAMP(6)");
/* Params: permits, name, strategy. */
static const char SQL_SET_PERMITS[] =
    "/* rowlock:hold-permits */ UPDATE `{{table}}` SET permits = ? WHERE name = ? AND strategy = ? AND mode = 1";
/* Params: name, owner, owner (NULL: all). */
static const char SQL_FORCE[] =
    "/* rowlock:hold-force */ DELETE FROM `{{table}}_hold` WHERE name = ? AND (? IS NULL OR owner = ?)";
/* The one-row holder `owner` of an exclusive lease lock. The owner match
 * alone picks it: for-update rows store no holder (NULL) and multi-holder
 * rows have owner '', so no strategy id is needed here. As admin.c's force
 * release: clears the owner, keeps the token. Params: name, owner. Rows: 1
 * released, 0 not that owner's live grant. */
static const char SQL_FORCE_ROW[] =
    "/* rowlock:hold-force-row */ UPDATE `{{table}}` SET owner = NULL, count = 0, expires_at = UTC_TIMESTAMP(6) "
    "WHERE name = ? AND owner = ? AND owner <> '' AND expires_at > UTC_TIMESTAMP(6)";

typedef struct holders_ctx {
    rowlock__col cols[12];
    rowlock_holder_info h;
    int (*fn)(const rowlock_holder_info *, void *);
    void *arg;
} holders_ctx;

static int holders_row(void *arg)
{
    holders_ctx *x = arg;
    x->h.mode = (rowlock_mode)x->cols[2].i;
    x->h.granted = (int)x->cols[3].i;
    x->h.live = (int)x->cols[4].i;
    x->h.count = (unsigned)x->cols[5].i;
    x->h.token = x->cols[6].u;
    x->h.ticket = x->cols[7].u;
    x->h.expires_in_ms = x->cols[8].i;
    x->h.permits = (unsigned)x->cols[9].i;
    x->h.acquired_at_us = x->cols[10].i;
    x->h.expires_at_us = x->cols[11].i;
    return x->fn(&x->h, x->arg);
}

static int name_arg(rowlock_client *c, const char *what, const char *name)
{
    const char *why = NULL;
    if (rowlock_name_check(name, &why))
        return rowlock__fail(c, ROWLOCK_EINVALID, "%s: %s", what, why);
    return 0;
}

ROWLOCK_EXTERN int rowlock_admin_holders(rowlock_client *c, const char *name,
                                   int (*fn)(const rowlock_holder_info *h, void *arg), void *arg)
{
    if (c == NULL)
        return ROWLOCK_EINVALID;
    rowlock__clear_error(c);
    int rc;
    if (fn == NULL)
        return rowlock__fail(c, ROWLOCK_EINVALID, "holders: callback is NULL");
    if (name && (rc = name_arg(c, "holders", name)))
        return rc;
    holders_ctx x;
    memset(&x, 0, sizeof x);
    x.h.version = ROWLOCK_HOLDER_INFO_VERSION;
    x.fn = fn;
    x.arg = arg;
    for (int i = 0; i < 12; i++)
        x.cols[i].type = ROWLOCK__T_I64;
    x.cols[0] = (rowlock__col){ .type = ROWLOCK__T_STR, .buf = x.h.name, .cap = sizeof x.h.name };
    x.cols[1] = (rowlock__col){ .type = ROWLOCK__T_STR, .buf = x.h.owner, .cap = sizeof x.h.owner };
    x.cols[6].type = ROWLOCK__T_U64;
    x.cols[7].type = ROWLOCK__T_U64;
    rowlock__param p[2];
    if (name)
        p[0] = p[1] = RL_STR(name, strlen(name));
    else
        p[0] = p[1] = (rowlock__param){ ROWLOCK__T_STR, NULL, 0, 0, 0, 0 };
    const rowlock__lease_rule *rule;
    if ((rc = rowlock__lease_rule_get(c, &rule)))
        return rc;
    return rowlock__db_run(c, RL_STMT(.what = "holders",
                                      .tmpl = (rule->flags & ROWLOCK__RULE_CLOCK) ? SQL_HOLDERS : SQL_HOLDERS_CL,
                                      .params = p, .nparams = 2, .cols = x.cols, .ncols = 12, .row_fn = holders_row,
                                      .arg = &x));
}

ROWLOCK_EXTERN int rowlock_admin_set_permits(rowlock_client *c, const char *name, unsigned int permits)
{
    if (c == NULL)
        return ROWLOCK_EINVALID;
    rowlock__clear_error(c);
    int rc;
    if ((rc = name_arg(c, "set permits", name)))
        return rc;
    if (permits > ROWLOCK_PERMITS_MAX)
        return rowlock__fail(c, ROWLOCK_EINVALID, "set permits: %u is over the limit (%u)", permits,
                             ROWLOCK_PERMITS_MAX);
    size_t n = strlen(name);
    /* The strategy whose names have permits (the insert strategy). */
    const rowlock__strategy_ops *ops = rowlock__strategy_offering(ROWLOCK__M_PERMITS);
    rowlock__param p[3] = { RL_I64(permits), RL_STR(name, n), RL_I64(ops->id) };
    rowlock__res res;
    if ((rc = rowlock__db_run(c, RL_STMT(.what = "set permits", .tmpl = SQL_SET_PERMITS, .params = p, .nparams = 3,
                                         .res = &res))))
        return rc;
    if (res.affected == 1)
        return 0;
    /* Not a multi-holder name yet (or the value was already that: then the
     * conversion below changes nothing and says so). */
    const rowlock__lease_rule *rule;
    if ((rc = rowlock__lease_rule_get(c, &rule)))
        return rc;
    if (!(rule->flags & ROWLOCK__RULE_CLOCK)) {
        /* A cluster: no node's clock says a one-row grant ended (found by a
         * review: SQL_CONVERT's expires_at test took a live holder's row on
         * a node whose clock ran ahead). Only a released row, or one that
         * is multi-holder already, converts; a held one is busy. */
        rowlock__param pcl[8] = { RL_STR(name, n), RL_I64(ops->id), RL_I64(permits), RL_I64(ops->id),
                                  RL_U64(0), RL_U64(0), RL_I64(0), RL_I64(permits) };
        if ((rc = rowlock__db_simple(c, "set permits", SQL_BEGIN)))
            return rc;
        if ((rc = rowlock__db_run(c, RL_STMT(.what = "set permits", .tmpl = SQL_CONVERT_CL, .params = pcl,
                                             .nparams = 8, .res = &res))) ||
            (rc = rowlock__db_simple(c, "set permits", SQL_COMMIT))) {
            rollback(c);
            return rc;
        }
    } else {
        rowlock__param pc[5] = { RL_STR(name, n), RL_I64(ops->id), RL_I64(permits), RL_I64(ops->id),
                                 RL_I64(permits) };
        if ((rc = rowlock__db_run(c, RL_STMT(.what = "set permits", .tmpl = SQL_CONVERT, .params = pc,
                                             .nparams = 5, .res = &res))))
            return rc;
    }
    if (res.affected == 1 || res.insert_id == 1) {
        if ((rc = rowlock__db_run(c, RL_STMT(.what = "set permits", .tmpl = SQL_SET_PERMITS, .params = p, .nparams = 3,
                                             .res = &res))))
            return rc;
        return 0;
    }
    char shown[4 * ROWLOCK_NAME_MAX + 8];
    rowlock_escape(shown, sizeof shown, name, n);
    return rowlock__fail(c, ROWLOCK_EBUSY,
                         "set permits '%s': the name is held by an exclusive holder of the one-row protocol, or "
                         "belongs to another strategy; try again once it is free",
                         shown);
}

ROWLOCK_EXTERN int rowlock_admin_force_release_holder(rowlock_client *c, const char *name, const char *owner,
                                                unsigned int *released)
{
    if (c == NULL)
        return ROWLOCK_EINVALID;
    rowlock__clear_error(c);
    int rc;
    if (released)
        *released = 0;
    if ((rc = name_arg(c, "force release", name)))
        return rc;
    if (owner && (strlen(owner) == 0 || strlen(owner) > ROWLOCK_OWNER_MAX))
        return rowlock__fail(c, ROWLOCK_EINVALID, "force release: the owner must be 1-%d bytes", ROWLOCK_OWNER_MAX);
    rowlock__param p[3] = { RL_STR(name, strlen(name)),
                            owner ? RL_STR(owner, strlen(owner)) : (rowlock__param){ ROWLOCK__T_STR, NULL, 0, 0, 0, 0 },
                            owner ? RL_STR(owner, strlen(owner)) : (rowlock__param){ ROWLOCK__T_STR, NULL, 0, 0, 0, 0 } };
    rowlock__res res;
    if ((rc = rowlock__db_run(c, RL_STMT(.what = "force release", .tmpl = SQL_FORCE, .params = p, .nparams = 3,
                                         .res = &res))))
        return rc;
    if (res.affected == 0 && owner) {
        /* No entry: maybe `owner` holds the name with the one-row protocol. */
        if ((rc = rowlock__db_run(c, RL_STMT(.what = "force release", .tmpl = SQL_FORCE_ROW, .params = p, .nparams = 2,
                                             .res = &res))))
            return rc;
    }
    if (released)
        *released = (unsigned)res.affected;
    return 0;
}

int rowlock__holders_reap(rowlock_client *c, int64_t grace_ms, uint64_t batch, int dry_run, uint64_t *purged)
{
    rowlock__param p[2] = { RL_I64(grace_ms * 1000), RL_U64(batch) };
    int rc;
    if (dry_run) {
        rowlock__col col = { .type = ROWLOCK__T_I64 };
        if ((rc = rowlock__db_run(c, RL_STMT(.what = "reap: survey holders", .tmpl = SQL_REAP_COUNT, .params = p,
                                             .nparams = 1, .cols = &col, .ncols = 1))))
            return rc;
        *purged += (uint64_t)col.i;
        return 0;
    }
    for (unsigned busy = 0;;) {
        rowlock__res res;
        /* Each batch READ COMMITTED, as the lock rows' batches (admin.c): no
         * gap or next-key locks on by_expiry that would hold up a live
         * entry's renewal or a new entry's write while the batch runs
         * (SET TRANSACTION covers the next transaction only; found by a
         * review: these batches ran REPEATABLE READ). */
        if ((rc = rowlock__db_simple(c, "reap: isolation",
                                     "/* rowlock:reap-isolation */ SET TRANSACTION ISOLATION LEVEL READ COMMITTED")))
            return rc;
        rc = rowlock__db_run(c, RL_STMT(.what = "reap: delete holders", .tmpl = SQL_REAP, .params = p, .nparams = 2,
                                        .res = &res));
        if (rc == ROWLOCK_EBUSY && ++busy < 10) {
            rowlock__sleep_us(1000); /* an entry written by a live transaction: again */
            continue;
        }
        if (rc)
            return rc;
        *purged += res.affected;
        if (res.affected < batch)
            return 0;
    }
}

/* Params: name. One row: live holders, their holds, any stale holder, the
 * first live holder's owner, the latest lease end (µs epoch, ms from now). */
static const char SQL_INSPECT[] =
    "/* rowlock:hold-inspect */ SELECT COUNT(*), IFNULL(SUM(count), 0),"
    " (SELECT COUNT(*) FROM `{{table}}_hold` s WHERE s.name = ? AND s.granted = 1 AND s.expires_at <= UTC_TIMESTAMP(6)),"
    " IFNULL(SUBSTRING_INDEX(GROUP_CONCAT(owner ORDER BY ticket SEPARATOR '\\n'), '\\n', 1), ''),"
    " IFNULL(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', MAX(expires_at)), 0),"
    " IFNULL(FLOOR(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), MAX(expires_at)) / 1000), 0),"
    " IFNULL(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', MIN(acquired_at)), 0), IFNULL(MAX(token), 0) "
    "FROM `{{table}}_hold` WHERE name = ? AND granted = 1 AND expires_at > UTC_TIMESTAMP(6)";

int rowlock__holders_inspect(rowlock_client *c, rowlock_info *info)
{
    if (!info->exists || !rowlock__strategy_multi_row(info))
        return 0;
    rowlock__col cols[8];
    memset(cols, 0, sizeof cols);
    for (int i = 0; i < 8; i++)
        cols[i].type = ROWLOCK__T_I64;
    cols[3] = (rowlock__col){ .type = ROWLOCK__T_STR, .buf = info->owner, .cap = sizeof info->owner };
    cols[7].type = ROWLOCK__T_U64;
    rowlock__param p[2] = { RL_STR(info->name, strlen(info->name)), RL_STR(info->name, strlen(info->name)) };
    int rc = rowlock__db_run(c, RL_STMT(.what = "inspect (holders)", .tmpl = SQL_INSPECT, .params = p, .nparams = 2,
                                        .cols = cols, .ncols = 8));
    if (rc)
        return rc;
    info->held = cols[0].i > 0;
    info->count = (unsigned)cols[1].i;
    info->stale = !info->held && cols[2].i > 0;
    info->expires_at_us = cols[4].i;
    info->expires_in_ms = cols[5].i;
    info->acquired_at_us = cols[6].i;
    if (info->held)
        info->token = cols[7].u; /* the latest grant's (the row's may be a waiter's draw) */
    if (!info->held)
        info->owner[0] = '\0';
    return 0;
}
