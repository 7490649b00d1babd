/*
 * The two objects: struct rowlock_client (client.c: settings, owner
 * identity, the connection and its statement cache, last error, hooks) and
 * struct rowlock_lock (lock.c: a handle, its hold count and token, the
 * keeper's and the modes' bookkeeping). Their layouts are here because
 * nearly every module reads them; who owns which fields is said beside
 * them. lock.c also offers the keeper its shadow handles.
 */
#ifndef ROWLOCK_CLIENT_H
#define ROWLOCK_CLIENT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rowlock.h"
#include "db.h"
#include "error.h"
#include "log.h"
#include "optfile.h"

#define ROWLOCK_TABLE_DEFAULT "rowlock_locks"
/* The table name also names its sequence (<table>_token), which must fit in
 * MySQL's 64-byte identifier limit. */
#define ROWLOCK_TABLE_MAX 57

struct rowlock__strategy_ops;
struct rowlock__keep_hooks;

/* The option-file groups a connection reads (Connector/C's three and ours). */
#define ROWLOCK__GROUP_ROWLOCK 3
extern const char *const rowlock__conn_groups[];
#define ROWLOCK__STRATEGY_SLOTS 8 /* strategy ids 0-7 */

struct rowlock_client {
    /* The connection: written only by the db layer (db_connect.c,
     * db_stmt.c), and by client.c when it wraps an application's MYSQL *;
     * others read `connected` and `owns_mysql`. */
    void *mysql;         /* MYSQL * */
    int owns_mysql;
    int nonblock;        /* the connection was opened with MYSQL_OPT_NONBLOCK
                            (db_connect.c; not a wrapped application's):
                            statements that wait in the server run through
                            the non-blocking API (db_stmt.c) */
    int connected;
    unsigned int flags;
    char table[ROWLOCK_TABLE_MAX + 1];
    char owner[ROWLOCK_OWNER_MAX + 1];
    size_t owner_len;

    /* Settings kept for reconnecting (owned copies). */
    char *host, *user, *password, *database, *unix_socket, *defaults_file, *tls_ca;
    unsigned int port, connect_timeout_ms, read_timeout_ms, write_timeout_ms;
    rowlock_tls_mode tls_mode;
    /* What the option files said, read once at connect (optfile.c); the
     * connection (and every reconnect) gets it through db_connect.c, never the
     * files themselves. */
    rowlock__opts opts;

    /* Last error: written through error.c (rowlock__fail, clear, save and
     * restore) and db_connect.c's capture, never directly. */
    char errmsg[ROWLOCK__ERRMSG_MAX];
    unsigned int db_errno;
    char sqlstate[6];

    rowlock__stmt_slot stmts[ROWLOCK__STMT_CACHE]; /* db_stmt.c's only (closed by db_connect.c) */
    uint64_t stmt_clock;
    uint64_t rng;

    /* The strategies' private per-client state, by strategy id (strategy.c),
     * and the lease module's (lease.c). */
    void *strategy_state[ROWLOCK__STRATEGY_SLOTS];
    void *lease;
    /* Live lock handles (lock.c): orphaned when the client is freed. */
    struct rowlock_lock *locks;

    /* The lease keeper (keeper.c's only): NULL until rowlock_keep() needs one. */
    struct rowlock__keeper *keeper;
    /* The process that opened our own connection: a fork child's copy of
     * the client must not close (COM_QUIT) the parent's session. */
    long conn_pid;
    /* Run at every connect (MYSQL_INIT_COMMAND): the keeper's connection
     * bounds its lock waits. Static string or NULL. */
    const char *init_command;
    /* The logging hook (log.c): `log` is &log_own, or the parent's sink for
     * the keeper's client. conn_role names the connection in events. */
    rowlock__logsink log_own;
    rowlock__logsink *log;
    const char *conn_role;
    int64_t conn_lost_us; /* monotonic time the connection was found lost, 0 none */
    /* Monotonic time the last statement on the connection ended (db_stmt.c): an
     * idle connection is checked for a server-side close before it is used. */
    int64_t last_io_us;
    pthread_mutex_t conn_mu; /* db_connect.c's: see rowlock__db_mutex_init */
    /* rowlock_client_interrupt() (db_connect.c): the flag an acquire's wait
     * loops look at (cleared when the acquire returns), and our connection's
     * socket, which it cuts; sock_fd is written and read under fd_mu only,
     * so the cut never reaches a descriptor number reused meanwhile. */
    int interrupted;
    int acquiring; /* acquire calls running on this client (lock.c, lock_many.c); under fd_mu */
    int cut;       /* the interrupt cut the connection during them; under fd_mu */
    int sock_fd;
    unsigned long sock_session; /* the server's id of sock_fd's session; under fd_mu */
    unsigned int sock_port;     /* sock_fd's local TCP port (0: a unix socket); under fd_mu */
    unsigned long cut_session;  /* the session the interrupt cut, and its port; under fd_mu */
    unsigned int cut_port;
    pthread_mutex_t fd_mu;
    long conn_mu_pid;        /* the process that initialised it (fork) */
    /* The connection's lease rule (lease_rule.h), NULL until its first use,
     * and the one wsrep probe it was chosen by (0 not asked yet, 1 not a
     * Galera node, 2 a Galera node): both forgotten when the session ends
     * (lease_rule.c, through the session_ended hook). */
    const struct rowlock__lease_rule *rule;
    int wsrep;
    /* The cluster reaper's record of stale rows (lease_cluster.c). */
    void *cluster;
    /* Failover epoch (epoch.c): session_gen counts the sessions (db layer,
     * +1 at every connect or wrap); epoch_gen is the session epoch.c last
     * checked, epoch_state its answer (0 not checked, 1 checked: epoch and
     * max_lease_ms hold; 2 not applicable: a Galera node or no epoch
     * table). Forgotten when the session ends (the session_ended hook). */
    uint64_t session_gen, epoch_gen;
    int epoch_state;
    uint64_t epoch;
    int64_t max_lease_ms;

    /* Hooks through which a lower layer tells a higher one something, set
     * by the higher one (calls flow one way: rowlock_int.h's layout).
     * session_ended: strategy.c's, set by client.c when the client is made
     * (and copied by rowlock__client_clone); the db layer calls it whenever
     * the session closes. keeper_hooks: keeper.c's, set by rowlock_keep();
     * lock.c and client.c tell the keeper about grants, renewals, losses,
     * releases and the client's end (NULL: the client never kept a lock). */
    void (*session_ended)(rowlock_client *c);
    const struct rowlock__keep_hooks *keeper_hooks;
};

/* A new, unconnected client with c's settings, table and owner identity
 * (the keeper's connection renews as the same owner). */
int rowlock__client_clone(rowlock_client **out, const rowlock_client *c);

/* ---- lock.c --------------------------------------------------------------- */
struct rowlock_lock {
    rowlock_client *client;
    const struct rowlock__strategy_ops *ops;
    char name[ROWLOCK_NAME_MAX + 1];
    size_t name_len;
    unsigned int held;   /* acquisitions made through this handle */
    uint64_t token;      /* token of the current grant (0 when not held) */
    int lost;            /* release/renew found it gone: sticky ENOTOWNER until
                            the next acquire */
    char shown[4 * ROWLOCK_NAME_MAX + 3]; /* the name quoted for messages */
    struct rowlock_lock *next, *prev; /* the client's live handles */
    void *state;         /* the strategy's private state: ops->lock_state_size
                            bytes, zeroed, allocated with the handle */
    /* The lease keeper: lease_ms and grant_sent_us are set by lock.c at
     * each new grant and read by keeper.c; keep_on, keep_error and keep are
     * written by keeper.c only (rowlock_keep()). */
    int64_t lease_ms;        /* the lease of the current grant's acquire */
    int64_t grant_sent_us;   /* monotonic time the acquire call that made the current grant began */
    int keep_on;             /* rowlock_keep() asked to keep this handle's grants */
    int keep_error;          /* keeping the current grant could not start */
    unsigned attempts;       /* claims made by the running acquire (events) */
    int waited;              /* the running acquire found the lock held (events) */
    int claim_uncertain;     /* an acquire lost its connection after its claim
                                may have committed (lock.c: adopt_leftover) */
    /* Modes (holders.c). */
    int mode;                /* ROWLOCK_MODE_* asked for (after rowlock_downgrade:
                                the current grant's, until its final release) */
    int mode_made;           /* the mode the handle was made with: l->mode
                                again once a downgraded grant ends */
    unsigned int permits;    /* semaphore permits asked for (0: none) */
    int multi;               /* acquire through holders.c: a shared or semaphore
                                handle, or the name has a multi-holder row */
    int held_multi;          /* the current grant is a holders-table entry */
    int hold_wrote;          /* holders.c, one server: the acquire under way
                                (or the last one, which failed) may have
                                written an entry: a waiter's, or a grant whose
                                reply a cut lost (lock.c's give-back after a
                                cut) */
    int found_multi;         /* out: the one-row acquire stopped (ROWLOCK_EBUSY)
                                because the name has a multi-holder row (row.c's
                                explaining read, the cluster rule's read) */
    int busy_self;           /* out: that read found the row held by this
                                client through another of its handles */
    uint64_t ticket;         /* the queue place of a wait that ended without a
                                grant: the next waiting acquire takes it again */
    int64_t ticket_left_us;  /* when that wait ended (monotonic) */
    void *hold_watch;        /* holders.c on a cluster: the entries (and the
                                names row) this handle watches, or NULL */
    uint64_t epoch;          /* epoch.c: the failover epoch of the current grant
                                (set by lock.c at a new grant; the keeper copies
                                it to its shadow) */
    rowlock_keep_options keep;
};

/* rowlock_acquire() without clearing an interrupt request at its end
 * (lock_many.c clears at the end of the whole set). */
int rowlock__acquire(rowlock_lock *l, int64_t wait_ms, int64_t lease_ms);
/* After an interrupt cut session `session` of c during an acquire of these
 * handles (rowlock__acquiring said so): end it and give back what a release
 * handed it (lock.c). */
void rowlock__give_back_after_cut(rowlock_client *c, unsigned long session, unsigned int port,
                                  rowlock_lock *const *locks, size_t n);
/* Orphan every live handle of a client being freed (client.c). */
void rowlock__locks_orphan(struct rowlock_client *c);
/* lock.c: a handle on the keeper's client k for a kept grant (name,
 * strategy, token, holders-table entry or not), holding it without having
 * acquired it, so the keeper renews through rowlock_renew(); made without
 * SQL, a failure reported on k as rowlock_lock_new's. The free releases
 * nothing (the grant is the application's). */
int rowlock__lock_shadow(rowlock_lock **out, rowlock_client *k, const char *name, rowlock_strategy strategy,
                         uint64_t token, int held_multi);
void rowlock__lock_shadow_free(rowlock_lock *shadow);

#endif /* ROWLOCK_CLIENT_H */
