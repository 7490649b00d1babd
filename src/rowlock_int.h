/*
 * Internal declarations shared by the library's files. Not installed.
 * Every .c file includes this umbrella; each module's own header says what
 * the module offers and who calls it. docs/ARCHITECTURE.md draws the layers
 * and walks one grant per strategy and mode from the public call to the SQL.
 *
 * Layout of src/ (header in brackets):
 *   util.c       clocks, randomness, UTF-8 name check, backoff, FNV-1a, which
 *                servers are supported [util.h]
 *   error.c      the code table (strerror / names), the one function that
 *                maps MySQL error numbers to rowlock codes, the client's
 *                last error (fail, clear, save/restore) [error.h]
 *   log.c        the logging hook: registration, level and kind names, and
 *                the one function that builds and delivers an event [log.h]
 *   optfile.c    reading [rowlock] keys from MySQL option files [optfile.h]
 *   db_connect.c connect, TLS, failover host list, the connection's mutex,
 *                idle check and reconnect, the keeper's keep-alive ping
 *   db_stmt.c    SQL templates, prepared-statement cache, parameter binding,
 *                result fetch, error capture
 *   fault.c      the fault seam (ROWLOCK_FAULT_INJECTION test builds only)
 *                [db.h: the only files that call mysql_*, one interface]
 *   client.c     rowlock_client_*; the client and lock structs [client.h]
 *   schema.c     migrations and the schema-version check [schema.h]
 *   lock.c       rowlock_lock_* and the thin wrappers that call strategies;
 *                the keeper's shadow handles [client.h]
 *   lock_many.c  rowlock_acquire_many / rowlock_release_many: a set of handles
 *                granted all or none, in one global order, through lock.c's
 *                public calls only
 *   keeper.c     the lease keeper: renewer and watcher threads per client,
 *                rowlock_keep() [keeper.h]
 *   strategy.c   the one list of strategies (ROWLOCK__STRATEGY_LIST), names,
 *                lookups by id, mode and row kind, per-client strategy state
 *   strategy_*.c one file per strategy [strategy.h: the ops table]
 *   holders.c    the insert strategy's modes: shared locks and semaphores,
 *                names with several holders in <table>_hold (its opening
 *                comment is the design: schema, SQL, round trips, FIFO,
 *                tokens) [holders.h]
 *   lease.c      the lease protocol of the lease strategies: wake-up hint,
 *                waiter queue, wait loop, lease release, renew and adopt,
 *                the retrying release/renew runner [lease.h]
 *   lease_rule.c the lease rule of a connection, chosen once per connection
 *                by one wsrep probe [lease_rule.h: the ops table]
 *   lease_server.c  the rule of one server (leases by the server's clock)
 *   lease_cluster.c the rule of a Galera cluster (leases by elapsed time
 *                seen by the taker; the cluster reaper)
 *   row.c        reading a lock row; messages that explain a refusal [row.h]
 *   admin.c      list, stats, force release, reap (public calls only)
 *   fence.c      rowlock_fence(): a lease lock's grant checked by a write in
 *                the application's own transaction, on its connection (its
 *                opening comment is the design)
 *   epoch.c      failover-safe leases on a primary-replica pair: the server
 *                identity, epoch, longest lease and token floor of a table
 *                (<table>_epoch), checked before grants and renewals [epoch.h]
 *
 * Calls flow one way, down this list of layers:
 *   keeper.c -> client.c -> lock.c (wrappers) -> strategy_*.c -> holders.c
 *   -> lease.c -> the lease rule (through its table) -> row.c
 *   -> schema.c / db_*.c -> libmysqlclient,
 * with util.c, error.c, log.c and optfile.c below everything, and
 * strategy.c (the table of strategies, their names and per-client state)
 * beside them: any layer may look a strategy up; it calls nothing by name.
 * A lease rule never calls lease.c (what it needs done, it leaves in the
 * handle's lease state). Where a lower layer must tell a higher one
 * something it calls a hook the higher one set on the client, never a
 * function by name: the db layer tells the client that a session ended
 * (c->session_ended, set by client.c: the lease rule forgets the
 * connection's rule, each strategy its session state, no SQL); lock.c and
 * client.c tell the keeper about grants, renewals, losses, releases and the
 * client's end (c->keeper_hooks, set by rowlock_keep()).
 *
 * Nothing outside a strategy's own file tests its id: other modules ask its
 * table (flags, modes); the strategy ids in SQL are bound parameters.
 * Adding a strategy, or a mode: one new file and one line in
 * ROWLOCK__STRATEGY_LIST (or one bit in a table's `modes`); the steps are
 * written above struct rowlock__strategy_ops (strategy.h).
 * Fault injection for tests: see rowlock__fault_set in db.h.
 */
#ifndef ROWLOCK_INT_H
#define ROWLOCK_INT_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "rowlock.h"

#include "util.h"
#include "error.h"
#include "optfile.h"
#include "log.h"
#include "db.h"
#include "client.h"
#include "schema.h"
#include "keeper.h"
#include "strategy.h"
#include "row.h"
#include "lease.h"
#include "lease_rule.h"
#include "holders.h"
#include "epoch.h"

#endif
