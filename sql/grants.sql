-- Least-privilege grants for applications that take locks (an example: change
-- the user, host, password and database; replace {{table}} as in 0001).
--
-- Lock takers need rows only: SELECT/INSERT/UPDATE/DELETE on the lock table,
-- SELECT/INSERT on its token sequence (NEXTVAL needs both), SELECT/INSERT/
-- DELETE on its waiter queue (REPLACE needs INSERT and DELETE), the rows of
-- its holders table (shared locks, semaphores), SELECT on the
-- schema-version table; SELECT/INSERT/UPDATE on the token floor (the reaper
-- raises it; cluster clients read it). Schema changes (rowlock migrate) are for an admin
-- account; the reaper needs the same rights as a lock taker.
CREATE USER IF NOT EXISTS 'rowlock_app'@'%' IDENTIFIED BY 'change-me';
GRANT SELECT, INSERT, UPDATE, DELETE ON rowlock.`{{table}}` TO 'rowlock_app'@'%';
GRANT SELECT, INSERT ON rowlock.`{{table}}_token` TO 'rowlock_app'@'%';
GRANT SELECT, INSERT, DELETE ON rowlock.`{{table}}_queue` TO 'rowlock_app'@'%';
GRANT SELECT, INSERT, UPDATE ON rowlock.`{{table}}_floor` TO 'rowlock_app'@'%';
-- Shared locks and semaphores (schema 0004): the holders table.
GRANT SELECT, INSERT, UPDATE, DELETE ON rowlock.`{{table}}_hold` TO 'rowlock_app'@'%';
-- Fenced writes (schema 0005): the SQL form, CALL `<table>_fence`(name, token)
-- (SQL SECURITY INVOKER: it runs with the caller's rights on the tables).
GRANT EXECUTE ON PROCEDURE rowlock.`{{table}}_fence` TO 'rowlock_app'@'%';
-- Failover-safe leases (schema 0006): the epoch row (read at every
-- connection's first grant; a client that finds a promoted replica takes it
-- over and raises the token sequence, SETVAL: INSERT on the sequence above).
GRANT SELECT, INSERT, UPDATE ON rowlock.`{{table}}_epoch` TO 'rowlock_app'@'%';
GRANT SELECT ON rowlock.rowlock_schema TO 'rowlock_app'@'%';
