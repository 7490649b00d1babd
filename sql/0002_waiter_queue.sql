-- 0002: the waiter queue, through which a release hands a lease lock
-- (insert, optimistic) straight to the next waiter in the same statement.
--
-- {{table}} is replaced as in 0001 (1-57 bytes, so `<table>_queue` fits in
-- 64). Statements end with ";" at the end of a line; no ";" elsewhere.
--
-- One row per database session that waited for a lease lock (the library
-- replaces its row each time the session starts waiting). A row is only
-- used while its session holds the queue-head named lock of that name
-- (GET_LOCK), so rows of ended sessions are inert; the client deletes its
-- row when it is freed. MEMORY: registering a waiter writes no redo log and
-- costs no disk flush; the rows vanish with a server restart, as do the
-- sessions they describe. The table's size limit is max_heap_table_size at
-- creation (16 MB by default: about 30 000 rows); when it is full, waiters
-- fall back to waiting without hand-off.
--   conn      CONNECTION_ID() of the waiting session
--   name      the lock name it waits for
--   owner     its owner identity (what the lock row's owner becomes)
--   lease_us  the lease it asked for, in microseconds
--   strategy  the strategy it uses (1 insert, 3 optimistic): a lock is only
--             handed to a waiter of the strategy of its row
--   mode      0 exclusive. Reserved for shared (read) and fair modes.
--
-- Galera: MEMORY rows are not replicated, so the queue is node-local, like
-- the named locks it is used with (hand-off in the release statement only
-- reaches waiters on the releasing node; others wait on the hint). A cluster
-- with wsrep_mode=STRICT_REPLICATION refuses to create MEMORY tables (error
-- 4165); there the queue is an empty view that refuses writes, and every
-- waiter waits on the hint alone. (A replicated InnoDB queue would be wrong:
-- CONNECTION_ID() is unique per node only.) The library picks the branch
-- ("-- rowlock:if" lines below); run by hand, keep the one you need.
-- rowlock:if wsrep-strict-replication
CREATE VIEW IF NOT EXISTS `{{table}}_queue` AS
  SELECT CAST(0 AS UNSIGNED) AS conn, CAST('' AS BINARY(255)) AS name, CAST('' AS BINARY(190)) AS owner,
         CAST(0 AS UNSIGNED) AS lease_us, CAST(0 AS UNSIGNED) AS strategy, CAST(0 AS UNSIGNED) AS mode
  FROM DUAL WHERE 0;
-- rowlock:else
CREATE TABLE IF NOT EXISTS `{{table}}_queue` (
  conn      BIGINT UNSIGNED NOT NULL,
  name      VARBINARY(255) NOT NULL,
  owner     VARBINARY(190) NOT NULL,
  lease_us  BIGINT UNSIGNED NOT NULL,
  strategy  TINYINT UNSIGNED NOT NULL,
  mode      TINYINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (conn)
) ENGINE=MEMORY;
-- rowlock:end
