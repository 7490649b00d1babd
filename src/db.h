/*
 * The database layer: db_connect.c (connect, TLS, failover host list, the
 * connection's mutex, idle check and reconnect, the keeper's keep-alive,
 * error capture), db_stmt.c (SQL templates, the prepared-statement cache,
 * binding, result fetch) and fault.c (the fault seam, test builds only).
 * db_connect.c and db_stmt.c are the only files that call libmysqlclient
 * (mysql_*), and this is the only interface of the three: every module that
 * runs SQL (schema, row, lease, holders, the strategies, admin) calls down
 * into it, and it calls nothing above error.c, util.c, log.c and optfile.c
 * (the option files it hands to Connector/C). It tells the layers above
 * that a session ended through the client's session_ended hook (client.h),
 * never by name.
 */
#ifndef ROWLOCK_DB_H
#define ROWLOCK_DB_H

#include <stddef.h>
#include <stdint.h>

#include "rowlock.h"

/* The per-client cache of prepared statements (db_stmt.c), kept in the
 * client (client.h): the least recently used one is closed for a new one. */
#define ROWLOCK__STMT_CACHE 48
typedef struct rowlock__stmt_slot {
    const char *tmpl;
    long variant;
    void *stmt; /* MYSQL_STMT * */
    uint64_t last_use;
} rowlock__stmt_slot;

enum { ROWLOCK__T_STR = 1, ROWLOCK__T_U64, ROWLOCK__T_I64, ROWLOCK__T_DBL };

typedef struct rowlock__param {
    int type;
    const char *s;
    unsigned long len;
    uint64_t u;
    int64_t i;
    double d;
} rowlock__param;

#define RL_STR(str, n) ((rowlock__param){ ROWLOCK__T_STR, (str), (unsigned long)(n), 0, 0, 0 })
#define RL_U64(v) ((rowlock__param){ ROWLOCK__T_U64, NULL, 0, (uint64_t)(v), 0, 0 })
#define RL_I64(v) ((rowlock__param){ ROWLOCK__T_I64, NULL, 0, 0, (int64_t)(v), 0 })

/* A result column. STR columns are NUL-terminated in buf (cap bytes). */
typedef struct rowlock__col {
    int type;
    char *buf;
    unsigned long cap;
    unsigned long len;
    uint64_t u;
    int64_t i;
    char is_null;
    char truncated;
} rowlock__col;

typedef struct rowlock__res {
    uint64_t affected;
    uint64_t insert_id; /* LAST_INSERT_ID(expr) set by the statement */
    uint64_t rows;      /* rows fetched */
} rowlock__res;

/*
 * Run a prepared statement, described by name:
 *
 *     rowlock__col col = { .type = ROWLOCK__T_I64 };
 *     rc = rowlock__db_run(c, RL_STMT(.what = "acquire: wait", .tmpl = SQL_WAIT,
 *                                     .params = p, .nparams = 3, .cols = &col, .ncols = 1));
 *
 * `tmpl` is an SQL template with {{table}} for the lock table; `variant`
 * (>= 0, a number the library formats itself, never user data) replaces
 * {{wait}} (as seconds S.mmm), {{waits}} (whole seconds, rounded up) and
 * {{number}} (as it is: a value where the server takes no `?`), and
 * is part of the cache key with the template's address. The statement is
 * prepared once per client and cached. Result rows are fetched into `cols`;
 * `row_fn` (may be NULL) is called for each row, otherwise only the first
 * row is kept. Members left out are 0/NULL: no variant, no parameters, no
 * columns, no row callback, no counts wanted. Returns 0, or the code of the
 * error captured in the client (EBUSY, ESCHEMA, EDB, ...; message prefixed
 * by `what`), or a non-zero value row_fn returned.
 */
typedef struct rowlock__stmt {
    const char *what;         /* names the statement in error messages */
    const char *tmpl;         /* SQL template; its address is the cache key */
    long variant;
    const rowlock__param *params;
    unsigned nparams;
    rowlock__col *cols;       /* the first row (or each row, with row_fn) */
    unsigned ncols;
    int (*row_fn)(void *arg); /* may be NULL; non-zero stops the rows and is returned */
    void *arg;
    rowlock__res *res;        /* may be NULL */
    double wait_s;            /* how long the statement may wait in the server
                                 (GET_LOCK, SLEEP): on a connection opened
                                 non-blocking (c->nonblock) the client's read
                                 timeout then counts from the end of that wait
                                 (db_stmt.c), so the wait may be longer */
} rowlock__stmt;
#define RL_STMT(...) (&(const rowlock__stmt){ __VA_ARGS__ })
int rowlock__db_run(rowlock_client *c, const rowlock__stmt *s);

/* Helper statements whose failure must not replace the error of the
 * operation they are part of (error.c's save/restore around them): the
 * statement's result code is returned, the client's error is left as it
 * was. rowlock__db_rollback ends a transaction after a failed step (sql: the
 * caller's tagged ROLLBACK, so the fault seam can name it). */
int rowlock__db_run_quiet(rowlock_client *c, const rowlock__stmt *s);

/*
 * Run a statement with parameters and no result on `mysql`, a connection
 * that is not the client's (an application's MYSQL *, inside its own
 * transaction: rowlock_fence()). {{table}} is the client's table; the
 * statement is prepared and executed in one round trip
 * (mariadb_stmt_execute_direct) and closed, never cached; res->affected is
 * filled. Errors are kept in `c` (rowlock__db_capture_other); the fault seam
 * applies by tag as for rowlock__db_run.
 */
int rowlock__db_run_on(rowlock_client *c, void *mysql, const rowlock__stmt *s);
int rowlock__db_simple_quiet(rowlock_client *c, const char *what, const char *sql);
void rowlock__db_rollback(rowlock_client *c, const char *what, const char *sql);

/* A statement without parameters (fixed SQL, {{table}} expanded), over the
 * text protocol; any result is discarded. */
int rowlock__db_simple(rowlock_client *c, const char *what, const char *sql);
/* Connect (c->host may be a comma-separated failover list, tried in order;
 * see rowlock__db_next_host). */
int rowlock__db_connect(rowlock_client *c);
/* EUNSUPPORTED unless the connected server is MariaDB 10.6+. */
int rowlock__db_server_check(rowlock_client *c, const char *what);

/*
 * Fault injection: compiled only with ROWLOCK_FAULT_INJECTION, which the
 * installed library never has (CMake builds rowlock_fault_objects for the
 * fault tests). Every statement starts with a tag comment, the text
 * "rowlock:<tag>" between comment delimiters (claim, renew, hold-draw,
 * cl-claim, ...): tests, tools/handoff-profile and the processlist name
 * statements by it. The build collects the tags from the library sources into
 * generated/fault_tags.c (cmake/fault_tags.cmake): that list, read from the
 * code, is the only one, and the seam refuses any tag not on it.
 *
 * rowlock__fault_set(client, tag, nth, kind, value) arms a rule: the nth
 * execution (1-based, counted from now; 0: every execution) of a statement
 * with that tag on that client (NULL: any client)
 *   ROWLOCK__FAULT_ERROR       fails without running, as if the server had
 *                              returned MySQL error `value` (1205, 1213,
 *                              2006, 2013, 1146, 1235, ...); a connection
 *                              error also cuts the connection (the server
 *                              ends the session, as on a network failure);
 *   ROWLOCK__FAULT_STALL       runs after sleeping `value` ms;
 *   ROWLOCK__FAULT_DROP_AFTER  runs, then the connection is cut before its
 *                              result is read (the caller sees 2013);
 *   ROWLOCK__FAULT_ROLLBACK    rolls the session's transaction back without
 *                              telling the caller, sleeps `value` ms, then
 *                              runs the statement (outside any transaction,
 *                              so autocommitted): what a Galera brute-force
 *                              abort whose error the server never sent
 *                              leaves behind (holders.c, "On a Galera
 *                              cluster");
 *   ROWLOCK__FAULT_NO_INSERT_ID  runs (a prepared statement), and its
 *                              caller is told insert id 0: what a server
 *                              whose LAST_INSERT_ID(expr) does not reach
 *                              the client would say (the fallback reads);
 *   ROWLOCK__FAULT_INTERRUPT_AFTER  runs, then rowlock_client_interrupt()
 *                              cuts the connection before its result is
 *                              read (the caller sees 2013): an interrupt
 *                              that came while the server ran the
 *                              statement, whose effect (a commit) stands
 *                              though its caller never learns of it.
 * Returns 0, ROWLOCK_EINVALID (a tag no statement carries, or a bad kind) or
 * ROWLOCK_ENOMEM (32 rules). rowlock__fault_tag_known(tag) is 1 for a tag a
 * statement carries.
 * rowlock__fault_clear(client) removes a client's rules (NULL: all rules);
 * rowlock__fault_fired(client, tag) counts how often its rules fired;
 * rowlock__fault_fired_total() how often any rule fired.
 * The environment variable ROWLOCK_FAULTS="tag:nth:spec,..." (spec: an
 * error number, stall=MS or drop) arms rules for any client at the first
 * statement (spec: an error number, stall=MS, drop, rollback=MS, noid or cut), so a
 * worker process can be driven from a script; a bad entry
 * (unknown tag included) aborts the process.
 */
typedef enum rowlock__fault_kind {
    ROWLOCK__FAULT_ERROR = 1,
    ROWLOCK__FAULT_STALL,
    ROWLOCK__FAULT_DROP_AFTER,
    ROWLOCK__FAULT_ROLLBACK,
    ROWLOCK__FAULT_NO_INSERT_ID,
    ROWLOCK__FAULT_INTERRUPT_AFTER
} rowlock__fault_kind;
#ifdef ROWLOCK_FAULT_INJECTION
/* fault.c */
int rowlock__fault_set(const struct rowlock_client *c, const char *tag, unsigned nth, rowlock__fault_kind kind,
                       unsigned value);
void rowlock__fault_clear(const struct rowlock_client *c);
int rowlock__fault_tag_known(const char *tag);
unsigned rowlock__fault_fired(const struct rowlock_client *c, const char *tag);
/* How often any rule fired, all clients and tags (a worker process driven by
 * ROWLOCK_FAULTS reports it: tests/fault). */
unsigned rowlock__fault_fired_total(void);
#endif
/* Next entry of a host list "h1[:port],[v6]:port,h3": the host into buf, its
 * port into *port (0 if none); returns the rest of the list, NULL at its end. */
const char *rowlock__db_next_host(const char *list, char *buf, size_t cap, unsigned int *port);
void rowlock__db_close(rowlock_client *c);
void rowlock__db_drop_statements(rowlock_client *c);
int rowlock__db_in_transaction(rowlock_client *c);
int rowlock__db_found_rows_flag(rowlock_client *c);
const char *rowlock__db_server_info(rowlock_client *c);
unsigned long rowlock__db_thread_id(rowlock_client *c);

int rowlock__db_socket(rowlock_client *c);          /* the connection's socket, or -1 */
/* The connection's mutex (recursive): held by rowlock__db_run/simple for a
 * whole statement and by rowlock__db_ping_session, so the keeper's thread
 * may keep a for-update session alive on the application's own connection
 * without ever sharing a round trip with the application's thread. */
void rowlock__db_mutex_init(rowlock_client *c);
void rowlock__db_mutex_destroy(rowlock_client *c);
/*
 * Keeper thread: prove that the session with server id `session_id` is
 * alive (one `DO 1`, which also resets the server's idle timer for it,
 * wait_timeout), waiting for the answer until `deadline_us` (monotonic) at
 * most. *sent_us is when it was sent. Never reconnects. Returns 0 (alive),
 * ROWLOCK_EBUSY (the application's thread is using the connection: try again
 * shortly, nothing was sent), ROWLOCK_ENOTOWNER (the session is not up, or
 * it ended, or no answer came by the deadline: then the connection is cut
 * here, so every later use fails at once and reconnects), or ROWLOCK_EDB.
 * msg (cap bytes) says why on failure.
 */
int rowlock__db_ping_session(rowlock_client *c, unsigned long session_id, int64_t deadline_us, int64_t *sent_us,
                             char *msg, size_t cap);
/*
 * The connection's mutex around a whole operation of several statements, so
 * that the keeper's renewal on the application's own connection
 * (ROWLOCK_KEEP_SAME_CONNECTION) never runs between them: held by
 * rowlock_renew() and rowlock_release() (lock.c) for their whole call, and
 * by the keeper's thread for a whole renewal. try_hold takes it only when no
 * other thread holds it and the session is not inside a transaction (a
 * renewal would commit with it): 0 taken, ROWLOCK_EBUSY not. unhold undoes
 * either.
 */
void rowlock__db_hold(rowlock_client *c);
int rowlock__db_try_hold(rowlock_client *c);
void rowlock__db_unhold(rowlock_client *c);
void rowlock__db_abandon(rowlock_client *c);        /* close our descriptor without a COM_QUIT (fork child) */
void rowlock__db_thread_init(void);
void rowlock__db_thread_end(void);


/* ---- between the db files only ---------------------------------------------
 * db_stmt.c -> fault.c -> db_connect.c, never back: the connection's file
 * owns the mutex, the reconnect, closing (its statements too) and error
 * capture (a lost connection is the connection's business). */
/* The connection's mutex around one statement (db_stmt.c); leave also notes
 * the time of the last statement for the idle check. */
void rowlock__db_enter(rowlock_client *c);
void rowlock__db_leave(rowlock_client *c);
/* Mutex held: check an idle connection, reconnect a lost one we own. */
int rowlock__db_ensure(rowlock_client *c, const char *what);
/* Record a server or client error in c (errno, SQLSTATE, message prefixed by
 * `what`; a lost connection marks c disconnected) and return its code. */
int rowlock__db_capture(rowlock_client *c, const char *what, unsigned int err, const char *state, const char *msg);
/* The same with the connection's last error (mysql_errno and friends). */
int rowlock__db_capture_conn(rowlock_client *c, const char *what);
/* As rowlock__db_capture, for an error on a connection that is not the
 * client's own (rowlock__db_run_on): the client's connection state is left
 * alone. */
int rowlock__db_capture_other(rowlock_client *c, const char *what, unsigned int err, const char *state,
                              const char *msg);
/* Cut the connection as a network failure would (the server ends the session). */
void rowlock__db_cut(rowlock_client *c);
/* rowlock_client_interrupt()'s flag: set (an acquire now waiting, or the
 * next one, returns ROWLOCK_EBUSY soon; no reconnect meanwhile), cleared
 * by lock.c when the acquire returns. */
int rowlock__interrupted(rowlock_client *c);
void rowlock__interrupt_clear(rowlock_client *c);
/* An acquire call begins (+1) or ends (-1) on c: only inside one does an
 * interrupt request stop a reconnect (a release after it must reconnect).
 * Returns, when the last acquire running on c ends and an interrupt cut
 * the connection during it, the server's id of the session cut (closed
 * here: the next statement reconnects) and in *port (if not NULL) the
 * local TCP port it was connected from (0: a unix socket); else 0. */
unsigned long rowlock__acquiring(rowlock_client *c, int d, unsigned int *port);
/* End a session of ours that an interrupt cut: on the client's connection
 * (reconnecting), KILL it while it still runs one of our statements, then
 * wait until the server no longer lists it (at most 2 s). The session is
 * known by its id and, over TCP, by the client port the server shows for
 * it (port 0: by id alone): a reconnect that reached another server finds
 * no such session there and kills nothing. 0 once it is not listed, else
 * an error code (the client's message says why). */
int rowlock__db_end_cut_session(rowlock_client *c, unsigned long session, unsigned int port);
/* The server session of the client's own connection and its local TCP port
 * (0, 0: not connected, or a wrapped connection), for
 * rowlock__db_end_cut_session() after that connection died. */
void rowlock__db_session(rowlock_client *c, unsigned long *session, unsigned int *port);
/* The fault seam's two points in a statement's run (fault.c): before it, 0
 * to run it (*drop_after set when the connection is to be cut once it ran)
 * or the injected error; after it, the error of the cut. */
#ifdef ROWLOCK_FAULT_INJECTION
int rowlock__fault_before(rowlock_client *c, const char *what, const char *sql, int *drop_after);
int rowlock__fault_after(rowlock_client *c, const char *what, int drop_after);
#else
#define rowlock__fault_before(c, what, sql, drop) (*(drop) = 0, 0)
#define rowlock__fault_after(c, what, drop) 0
#endif

#endif /* ROWLOCK_DB_H */
