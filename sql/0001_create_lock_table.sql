-- 0001: the lock table, its token sequence and the schema-version record.
--
-- Minimum server: MariaDB 10.3 (CREATE SEQUENCE, SELECT ... FOR UPDATE NOWAIT,
-- SET STATEMENT); tested on MariaDB 10.11. Used by every strategy.
--
-- {{table}} is replaced by the lock table name (checked to be [A-Za-z0-9_],
-- 1-57 bytes) when the library applies this file; run by hand, replace it
-- yourself. Statements end with ";" at the end of a line; no ";" elsewhere.

-- One row per lock table: the schema version the library checks at connect.
CREATE TABLE IF NOT EXISTS rowlock_schema (
  lock_table  VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  version     INT UNSIGNED NOT NULL,
  applied_at  DATETIME(6) NOT NULL,
  PRIMARY KEY (lock_table)
) ENGINE=InnoDB;

-- Fencing tokens for every strategy: a token is GREATEST(row token + 1, this
-- sequence, the server's UTC clock in microseconds). The sequence keeps tokens
-- increasing after the reaper deletes a row and after a holder's transaction
-- rolls back (for-update writes no row); the clock covers a server crash,
-- which can lose the sequence's last cached block.
-- INCREMENT BY 0 steps by @@auto_increment_increment: 1 on a single server
-- (the same as INCREMENT BY 1); on a Galera cluster each node steps by the
-- cluster size from its own offset, which is the only kind of cached
-- sequence Galera accepts (error 1235 otherwise).
CREATE SEQUENCE IF NOT EXISTS `{{table}}_token`
  START WITH 1 INCREMENT BY 0 MINVALUE 1 NO MAXVALUE CACHE 1000 ENGINE=InnoDB;

-- One row per lock name.
--   name         the lock name: bytes, compared exactly (case-sensitive).
--   strategy     1 insert, 2 for-update, 3 optimistic: fixed from the row's
--                creation until the reaper purges it, so two strategies never
--                both hold one name.
--   mode         0 exclusive; 1 a name used shared or as a semaphore (0004).
--   owner        the holder's identity (insert/optimistic); NULL when free.
--                for-update holders are row locks and are never written here.
--   count        re-entrant hold count of owner; 0 when free.
--   token        the last fencing token granted (for optimistic: the version
--                compared by the CAS UPDATE).
--   acquired_at, expires_at  server clock in UTC (UTC_TIMESTAMP(6)). A released row keeps
--                expires_at = the release time, so the reaper can purge it.
--   attrs        unused (reserved for later features).
CREATE TABLE IF NOT EXISTS `{{table}}` (
  name         VARBINARY(255) NOT NULL,
  strategy     TINYINT UNSIGNED NOT NULL,
  mode         TINYINT UNSIGNED NOT NULL DEFAULT 0,
  owner        VARBINARY(190) NULL,
  count        INT UNSIGNED NOT NULL DEFAULT 0,
  token        BIGINT UNSIGNED NOT NULL,
  acquired_at  DATETIME(6) NULL,
  expires_at   DATETIME(6) NULL,
  attrs        VARBINARY(1024) NULL,
  PRIMARY KEY (name),
  KEY by_expiry (expires_at)
) ENGINE=InnoDB;
