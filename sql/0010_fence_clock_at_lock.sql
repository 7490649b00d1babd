-- 0010: the SQL fence form judges an entry's lease when the entry is locked
-- (a review's finding; src/holders.c, LIVE_NOW).
--
-- Minimum server: MariaDB 10.3; tested on MariaDB 10.11. Nothing but the
-- procedure changes: no table, no row; live locks survive.
--
-- {{table}} is replaced as in 0001. A stored routine starts after a
-- "-- rowlock:routine" line and ends at the line "END;" (as in 0005). Safe
-- to run again (CREATE OR REPLACE).
--
-- The procedure is 0009's but for one clock. Its fence of a holders-table
-- entry tested the lease with `expires_at > UTC_TIMESTAMP(6)`, and
-- UTC_TIMESTAMP is fixed when the statement starts. An acquirer passes over
-- an entry whose lease ended without writing it (it reads the entries under
-- a shared lock), so that test is the only guard: an UPDATE that began
-- before the lease's end, and got the entry's lock only after an acquirer
-- that saw the lease ended had committed its grant, still found the lease
-- running, and the caller's transaction committed beside the new holder.
-- Now it reads the clock on the locked row: SYSDATE(6) (evaluated per row,
-- after the lock), in UTC for this statement (SET STATEMENT time_zone).
-- The C form (rowlock_fence) does the same since this version.
-- rowlock:routine
CREATE OR REPLACE PROCEDURE `{{table}}_fence`(IN lock_name VARBINARY(255), IN lock_token BIGINT UNSIGNED)
  MODIFIES SQL DATA
  SQL SECURITY INVOKER
  COMMENT 'rowlock: commit the open transaction only under the current grant (name, token); SQLSTATE RLF01 if it is not'
BEGIN
  DECLARE n INT DEFAULT 0;
  DECLARE open_seen INT DEFAULT 0;
  DECLARE holder VARBINARY(190) DEFAULT NULL;
  DECLARE live_holder VARBINARY(190) DEFAULT NULL;
  DECLARE maybe_shared INT DEFAULT 0;
  DECLARE no_permits INT DEFAULT 0;
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
    SELECT MAX(owner), MAX(IF(expires_at > UTC_TIMESTAMP(6), owner, NULL)) INTO holder, live_holder
      FROM `{{table}}_hold` WHERE name = lock_name AND token = lock_token AND granted = 1;
    IF holder IS NOT NULL THEN
      SELECT COUNT(*) INTO maybe_shared FROM `{{table}}`
        WHERE name = lock_name AND mode = 1 AND shared_token >= lock_token;
      IF maybe_shared > 0 THEN
        SELECT COUNT(*) INTO no_permits FROM `{{table}}`
          WHERE name = lock_name AND mode = 1 AND owner = '' AND permits = 0
          LOCK IN SHARE MODE;
        IF no_permits > 0 THEN
          SET holder = IFNULL(live_holder, holder);
        END IF;
      END IF;
    END IF;
    IF maybe_shared > 0 AND no_permits = 0 THEN
      SET n = 0;
    ELSEIF holder IS NULL THEN
      UPDATE `{{table}}` SET fences = fences + 1
        WHERE name = lock_name AND token = lock_token AND count > 0 AND owner IS NOT NULL AND owner <> '';
      SET n = ROW_COUNT();
    ELSE
      SET STATEMENT time_zone = '+00:00' FOR
      UPDATE `{{table}}_hold` SET fences = fences + 1
        WHERE name = lock_name AND owner = holder AND token = lock_token AND granted = 1
          AND expires_at > SYSDATE(6);
      SET n = ROW_COUNT();
    END IF;
  END IF;
  IF n = 0 THEN
    SIGNAL SQLSTATE 'RLF01' SET MESSAGE_TEXT = 'rowlock fence: the grant is no longer the current one (lease ended and taken, released or purged): roll back';
  END IF;
END;
