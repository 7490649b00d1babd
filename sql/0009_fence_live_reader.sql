-- 0009: the SQL fence form, for a token readers share after a writer closed
-- the name: a live entry without permits, a refusal with them (issue 27
-- follow-up; src/holders.c, "Joining readers" and "Readers
-- granted together").
--
-- Minimum server: MariaDB 10.3; tested on MariaDB 10.11. Nothing but the
-- procedure changes: no table, no row; live locks survive.
--
-- {{table}} is replaced as in 0001. A stored routine starts after a
-- "-- rowlock:routine" line and ends at the line "END;" (as in 0005). Safe
-- to run again (CREATE OR REPLACE).
--
-- On one server readers share a token: those that joined an open name, and
-- those a reader's attempt granted together, all get the opener's. Once a
-- writer's draw closed the name, 0008's procedure fenced the greatest
-- owner's entry of the token; when that one's lease had ended (a reader
-- that crashed, or a grant its reader never saw), it refused every other
-- reader of the token, live ones too, until the reaper purged the entry.
-- Now, for a token that readers may share, it reads the name's row under
-- a shared lock (the latest permits; an acquirer's token draw waits for
-- the commit, up to its 1 s lock wait, then retries) and:
-- - without permits, fences a live entry of the token (the greatest
--   owner's among the live ones), if there is one (else, as before, the
--   greatest owner's, which refuses). Safe for the reason the open-name
--   path is: no writer is granted while a live entry of the token exists
--   (a writer's grant needs every reader's entry to have lapsed, and a
--   lapsed entry stays lapsed: renewals need a live one), and the fence's
--   UPDATE locks that entry until the transaction ends, so a writer
--   reading the entries waits for it (and that reader's renewal too, as in
--   0008). As on the open-name path this holds for the token, not for one
--   caller: a reader of the token whose own lease ended, or whose entry is
--   gone, commits while another reader of it is live;
-- - with permits (a semaphore acquirer gave the name permits after readers
--   shared the token), refuses: another reader's live entry no longer
--   keeps everyone out (a lapsed reader's permit may have gone to the
--   semaphore acquirer), and the procedure cannot tell the caller's own
--   entry, nor whether it still exists (a late release or the reaper
--   deletes a lapsed one). 0008 fenced the greatest owner's entry there,
--   which let a lapsed reader commit beside the holders its permit went to
--   when that entry was another's and live. Use the C form
--   (rowlock_fence), which fences the caller's own entry.
-- A token readers may share is one not above the row's shared_token: the
-- only shared tokens are those the name was opened at (joins take it; a
-- batch grant takes its opener's, and since this version is made only
-- when the opener's draw did open the name: src/holders.c checks
-- shared_token = the token drawn, which under READ COMMITTED the draw's
-- plain look for a writer may not have set while the entries, read later
-- under lock, show none), and shared_token only grows. Other tokens (every
-- semaphore grant drawn after the permits, every writer's, every token on
-- a Galera cluster, where the name is never opened) have one entry and
-- are fenced as before; an older one may fall below shared_token (a
-- downgraded writer's, once readers open the name again) and is then
-- refused on a name with permits: a refusal, not a risk. The shared_token
-- test is a plain read: an older snapshot can only show a smaller
-- shared_token, which sends a shared token down that path only if the
-- name was opened at it after the snapshot, i.e. after the caller's
-- transaction began reading, before its grant. A reader granted together
-- by a library before this version at a token the name was not opened at
-- is fenced as one holder's token until that grant ends.
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
