-- 0006: failover-safe leases on a primary-replica pair (src/epoch.c is the
-- design: what the row means, who writes it, what it assumes).
--
-- Minimum server: MariaDB 10.6 (@@server_uid). Numbered 0006: another
-- migration (0005) may come before it; the library applies the files in
-- order and skips no number it has.
--
-- {{table}} is replaced as in 0001 (1-57 bytes, so `<table>_epoch` fits in
-- 64). Statements end with ";" at the end of a line; no ";" elsewhere.
-- Every statement is safe to run again. Live locks survive (a new table).
--
-- One row (id 1):
--   server        the identity of the server that grants on this table:
--                 CONCAT(@@server_id, '/', @@server_uid). A promoted replica
--                 carries its old primary's row: a different identity.
--   epoch         +1 at every takeover (a client that found a new identity);
--                 a grant remembers it, and a renewal under another epoch is
--                 refused (the lock is lost).
--   safe_after    server clock (UTC): no grant before it. A takeover sets it
--                 to the new server's now + max_lease_ms (+2 %, +100 ms).
--   max_lease_ms  the longest lease (and renewal) a grant may ask for here;
--                 longer ones are refused (EINVALID). It is also how long a
--                 failover makes grants wait. Change it with UPDATE; a lower
--                 value protects failovers only once the longest lease asked
--                 for before has ended.
--   token_floor   raised at every takeover above any token the old server
--                 could have issued (the token sequence is set past it).
-- The migrating server's identity is recorded with safe_after = now: grants
-- made before on this same server need no wait (the same server keeps them).
CREATE TABLE IF NOT EXISTS `{{table}}_epoch` (
  id            TINYINT UNSIGNED NOT NULL,
  server        VARBINARY(128) NOT NULL,
  epoch         BIGINT UNSIGNED NOT NULL DEFAULT 0,
  safe_after    DATETIME(6) NOT NULL,
  max_lease_ms  BIGINT UNSIGNED NOT NULL DEFAULT 60000,
  token_floor   BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (id)
) ENGINE=InnoDB;
INSERT IGNORE INTO `{{table}}_epoch` (id, server, epoch, safe_after) VALUES (1, CONCAT(@@server_id, '/', @@server_uid), 0, UTC_TIMESTAMP(6));
