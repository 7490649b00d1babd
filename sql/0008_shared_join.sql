-- 0008: shared locks join in one statement (issue 27 item 2).
--
-- Minimum server: MariaDB 10.3 (ADD COLUMN IF NOT EXISTS, instant ADD
-- COLUMN); tested on MariaDB 10.11. src/holders.c ("Joining readers") is
-- the design.
--
-- {{table}} is replaced as in 0001. Statements end with ";" at the end of a
-- line, except inside a stored routine (as in 0005: it starts after a
-- "-- rowlock:routine" line and ends at the line "END;"). Every statement
-- is safe to run again. Live locks
-- survive: an instant column addition with a default, nothing rewritten.
--
-- shared_token  on the names table, for a multi-holder name (mode = 1)
--               without permits: the token of the last shared grant that
--               found no exclusive entry of the name (holder or waiter,
--               live or not), set by that grant's own token draw. While
--               the row's token is still it (every exclusive acquirer's
--               draw changes the token, in this version and in every
--               earlier one), a shared acquirer may join with one
--               autocommitted statement that share-locks the names row
--               and writes its entry with that token. 0: never.
ALTER TABLE `{{table}}` ADD COLUMN IF NOT EXISTS shared_token BIGINT UNSIGNED NOT NULL DEFAULT 0;

-- The fence's SQL form, for readers that joined: they share their opener's
-- token, so (name, token) no longer names one entry. While the name is
-- still open at that token (shared_token = token = the token given, above
-- the failover epoch's token floor), no exclusive acquirer has drawn a
-- token since the readers of that token were granted, so no writer got in;
-- the names row is then read under a shared lock, which keeps every
-- writer's draw waiting until this transaction ends, and no entry is
-- locked (the readers' renewals and releases go on). That holds for the
-- token, not for one caller: it commits for any reader of that spell,
-- one whose lease ended or who released too. A plain read first: only a
-- multi-holder row takes that shared lock (a one-row grant's row is
-- updated below, and a shared lock taken first would have to become
-- exclusive: a deadlock with a renewal queued in between). Otherwise (a
-- name closed by a writer's draw, a semaphore, an exclusive holder, a
-- Galera node, where a shared lock does not reach the other nodes; wsrep_on
-- is read from information_schema, which also answers on a server built
-- without wsrep) the entry is fenced as 0005 did: the greatest owner's
-- entry of that token, which for readers of a closed name may be another
-- reader's (the C form fences the caller's own).
-- rowlock:routine
CREATE OR REPLACE PROCEDURE `{{table}}_fence`(IN lock_name VARBINARY(255), IN lock_token BIGINT UNSIGNED)
  MODIFIES SQL DATA
  SQL SECURITY INVOKER
  COMMENT 'rowlock: commit the open transaction only under the current grant (name, token); SQLSTATE RLF01 if it is not'
BEGIN
  DECLARE n INT DEFAULT 0;
  DECLARE open_seen INT DEFAULT 0;
  DECLARE holder VARBINARY(190) DEFAULT NULL;
  IF @@in_transaction = 0 AND @@autocommit = 1 THEN
    SIGNAL SQLSTATE 'RLF02' SET MESSAGE_TEXT = 'rowlock fence: no transaction is open (START TRANSACTION first)';
  END IF;
  SELECT COUNT(*) INTO open_seen FROM `{{table}}`
    WHERE name = lock_name AND mode = 1 AND owner = '' AND permits = 0 AND shared_token = lock_token;
  IF open_seen > 0 AND IFNULL((SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES
                               WHERE VARIABLE_NAME = 'WSREP_ON'), 'OFF') <> 'ON' THEN
    SELECT COUNT(*) INTO n FROM `{{table}}` t
      WHERE t.name = lock_name AND t.mode = 1 AND t.owner = '' AND t.permits = 0 AND t.token = lock_token
        AND t.shared_token = lock_token
        AND t.token > IFNULL((SELECT e.token_floor FROM `{{table}}_epoch` e WHERE e.id = 1), 0)
      LOCK IN SHARE MODE;
  END IF;
  IF n = 0 THEN
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
  END IF;
  IF n = 0 THEN
    SIGNAL SQLSTATE 'RLF01' SET MESSAGE_TEXT = 'rowlock fence: the grant is no longer the current one (lease ended and taken, released or purged): roll back';
  END IF;
END;
