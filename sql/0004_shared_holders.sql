-- 0004: shared (read) locks and counting semaphores for the insert
-- strategy.
--
-- Minimum server: MariaDB 10.3 (ADD COLUMN IF NOT EXISTS, instant ADD
-- COLUMN); tested on MariaDB 10.11. Used by the insert strategy's shared and
-- semaphore handles (src/holders.c explains the protocol); a name that never
-- used them is untouched and keeps its one-row protocol.
--
-- {{table}} is replaced as in 0001 (1-57 bytes, so `<table>_hold` fits in
-- 64). Statements end with ";" at the end of a line; no ";" elsewhere.
-- Every statement is safe to run again. Live locks survive: the ALTER adds a
-- column with a default (an instant change: no table copy, held rows stay
-- as they are), and the holders table starts empty.
--
-- permits  on the names table: how many holders a multi-holder name admits
--          at once (0: any number of shared holders, one exclusive; N: a
--          counting semaphore). Only read for rows with mode = 1.
ALTER TABLE `{{table}}` ADD COLUMN IF NOT EXISTS permits INT UNSIGNED NOT NULL DEFAULT 0;

-- One row per (name, owner) of a multi-holder name (names row mode = 1):
-- a holder (granted = 1) or a queued waiter (granted = 0).
--   mode        0 exclusive, 1 shared
--   ticket      the place in the name's FIFO queue: the token drawn when
--               the entry was first written (tokens of a name only grow)
--   granted     1 once the entry holds the lock
--   count       re-entrant hold count of a granted entry
--   token       the fencing token of the grant (0 while waiting)
--   acquired_at, expires_at  server clock in UTC. A waiter's entry is
--               refreshed at each of its wait slices and expires a few
--               seconds after its waiter stops (crash, give up).
-- InnoDB (replicated; valid under Galera's STRICT_REPLICATION): the entries
-- are the truth, not a hint.
CREATE TABLE IF NOT EXISTS `{{table}}_hold` (
  name         VARBINARY(255) NOT NULL,
  owner        VARBINARY(190) NOT NULL,
  mode         TINYINT UNSIGNED NOT NULL,
  ticket       BIGINT UNSIGNED NOT NULL,
  granted      TINYINT UNSIGNED NOT NULL DEFAULT 0,
  count        INT UNSIGNED NOT NULL DEFAULT 0,
  token        BIGINT UNSIGNED NOT NULL DEFAULT 0,
  acquired_at  DATETIME(6) NULL,
  expires_at   DATETIME(6) NOT NULL,
  PRIMARY KEY (name, owner),
  KEY by_ticket (name, ticket),
  KEY by_expiry (expires_at)
) ENGINE=InnoDB;
