-- 0003: what a Galera cluster needs to judge leases and tokens without
-- trusting node clocks (src/lease_cluster.c; insert and optimistic).
--
-- {{table}} is replaced as in 0001 (1-57 bytes, so `<table>_floor` fits in
-- 64). Statements end with ";" at the end of a line; no ";" elsewhere.
-- Every statement can run again, and none rewrites the lock table: adding
-- columns at its end is an instant ALTER (MariaDB 10.3+), so a live table
-- migrates in place with locks held (their rows get gen 0 and lease_us 0).
-- Nothing here depends on the number of this file.
--
-- Lock table columns, written only by clients connected to a cluster node
-- (wsrep_on=ON); a single server leaves them as they are:
--   gen       bumped by every write of a holder (grant, re-entry, renewal),
--             so a taker that saw (token, gen) unchanged knows the holder
--             did not renew in between, whatever the clocks say.
--   lease_us  the longest lease the holder asked for since its grant, in
--             microseconds: how long a taker must see the row unchanged,
--             on its own monotonic clock, before it may take the row over.
--             0 on rows written before this migration: takers then use
--             the row's expires_at - acquired_at (set by one node's clock).
--   next_owner  a waiter that reserved the next grant (NULL: nobody): a
--             free row is granted only to it, so waiters on other nodes,
--             which no wake-up reaches, are not starved by waiters on the
--             releasing node. A waiter that saw more grants pass while it
--             waited (next_age) takes the reservation over.
--   next_age  grants the reserving waiter saw pass while it waited.
ALTER TABLE `{{table}}`
  ADD COLUMN IF NOT EXISTS gen BIGINT UNSIGNED NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS lease_us BIGINT UNSIGNED NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS next_owner VARBINARY(190) NULL,
  ADD COLUMN IF NOT EXISTS next_age INT UNSIGNED NOT NULL DEFAULT 0;

-- The token floor: one row (id 1), at least the token of every lock row the
-- reaper deleted, written in the reaper's DELETE transaction. On a cluster a
-- new row's first token is above it, so tokens of a name keep increasing
-- after a purge even when the creating node's clock is behind the others
-- (the sequence does not help there: each node hands out its own cached
-- block). A single server relies on its clock, as before.
CREATE TABLE IF NOT EXISTS `{{table}}_floor` (
  id     TINYINT UNSIGNED NOT NULL,
  token  BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB;

INSERT IGNORE INTO `{{table}}_floor` (id, token) VALUES (1, 0);
