-- 0005: fenced writes inside the application's own transaction.
--
-- Minimum server: MariaDB 10.3 (ADD COLUMN IF NOT EXISTS, CREATE OR
-- REPLACE PROCEDURE); tested on MariaDB 10.11. {{table}} is replaced as in
-- 0001 (1-57 bytes, so `<table>_fence` fits in 64). Statements end with ";"
-- at the end of a line, except inside a stored routine: its statement starts
-- after a "-- rowlock:routine" line and ends at the line "END;" (at the
-- start of the line). Every statement is safe to run again. Live locks
-- survive: both ALTERs add a column with a default (instant: no table copy).
--
-- fences   on the lock table and the holders table: how many fenced
--          transactions the row's grants have committed. Its only purpose
--          is to be written: the fence's UPDATE must change the row, so that
--          it takes the row's exclusive lock until the application commits
--          (one server) and puts the row's key in the transaction's write
--          set (Galera certification). A row an UPDATE leaves unchanged is
--          neither certified nor logged. src/fence.c explains the design.
ALTER TABLE `{{table}}` ADD COLUMN IF NOT EXISTS fences BIGINT UNSIGNED NOT NULL DEFAULT 0;
ALTER TABLE `{{table}}_hold` ADD COLUMN IF NOT EXISTS fences BIGINT UNSIGNED NOT NULL DEFAULT 0;

-- CALL `<table>_fence`(name, token) inside the application's transaction,
-- on any connection to the server (or any node of the cluster): the
-- transaction then commits only while the grant with that token is the
-- current one of the lock `name` (the SQL form of rowlock_fence(); the same
-- statements). When it is not, the call fails with SQLSTATE 'RLF01' (MySQL
-- error 1644) and changes nothing: roll the transaction back. Called
-- outside a transaction with autocommit on, it fails with SQLSTATE 'RLF02'
-- (a fence that commits at once protects nothing).
--
-- One routine per lock table, named after it, because the table name is a
-- client option: `rowlock_locks_fence` for the default table. SQL SECURITY
-- INVOKER: the caller needs EXECUTE on it (sql/grants.sql) and the UPDATE
-- the lock-taking user already has; it never runs with the migrating user's
-- rights.
--
-- The exclusive row (insert, optimistic; also on a cluster) is matched by
-- its token alone: every new grant draws a new token, and every way a grant
-- ends that lets another owner in (release, hand-off, take-over, force
-- release, purge, conversion to a multi-holder name) writes the row, so it
-- waits for this transaction's row lock or has already changed what the
-- WHERE clause reads. A lease that ended and that nobody took yet still
-- fences. A holders-table entry (shared, semaphore, an exclusive holder of a
-- multi-holder name) must also have a live lease: takers pass over an entry
-- whose lease ended without writing it. The entry is first looked up by
-- (name, token) with a plain read, so that the UPDATE locks that one entry
-- by its primary key (an UPDATE by name and token would lock every entry of
-- the name it scans, and block the other holders' renewals).
-- rowlock:routine
CREATE OR REPLACE PROCEDURE `{{table}}_fence`(IN lock_name VARBINARY(255), IN lock_token BIGINT UNSIGNED)
  MODIFIES SQL DATA
  SQL SECURITY INVOKER
  COMMENT 'rowlock: commit the open transaction only under the current grant (name, token); SQLSTATE RLF01 if it is not'
BEGIN
  DECLARE n INT DEFAULT 0;
  DECLARE holder VARBINARY(190) DEFAULT NULL;
  IF @@in_transaction = 0 AND @@autocommit = 1 THEN
    SIGNAL SQLSTATE 'RLF02' SET MESSAGE_TEXT = 'rowlock fence: no transaction is open (START TRANSACTION first)';
  END IF;
  SELECT MAX(owner) INTO holder FROM `{{table}}_hold` WHERE name = lock_name AND token = lock_token AND granted = 1;
  IF holder IS NULL THEN
    UPDATE `{{table}}` SET fences = fences + 1
      WHERE name = lock_name AND token = lock_token AND count > 0 AND owner IS NOT NULL AND owner <> '';
    SET n = ROW_COUNT();
  ELSE
    UPDATE `{{table}}_hold` SET fences = fences + 1
      WHERE name = lock_name AND owner = holder AND token = lock_token AND granted = 1
        AND expires_at > UTC_TIMESTAMP(6);
    SET n = ROW_COUNT();
  END IF;
  IF n = 0 THEN
    SIGNAL SQLSTATE 'RLF01' SET MESSAGE_TEXT = 'rowlock fence: the grant is no longer the current one (lease ended and taken, released or purged): roll back';
  END IF;
END;
