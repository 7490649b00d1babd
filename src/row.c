/*
 * Reading a lock's row, and the messages that explain a refusal from it:
 * "held by X for another N ms", "managed by the other strategy", "not the
 * owner any more: ...". Used by the strategies, the lease module and admin.
 */
#include "rowlock_int.h"

#include <stdio.h>
#include <string.h>

static const char SQL_ROW[] = "/* rowlock:row-read */ SELECT " ROWLOCK__ROW_COLUMNS " FROM `{{table}}` WHERE name = ?";
/* The same under a shared row lock for the statement: waits (variant: lock
 * wait) for a writer of the row to commit, then reads what it committed. */
static const char SQL_ROW_SHARED[] = "/* rowlock:row-read-shared */ SET STATEMENT innodb_lock_wait_timeout={{waits}} FOR "
                                     "SELECT " ROWLOCK__ROW_COLUMNS " FROM `{{table}}` WHERE name = ? LOCK IN SHARE MODE";

/* The plain read made causal on a Galera node (wsrep_sync_wait): it answers
 * only after the node applied every write set committed in the cluster
 * before it, so `rowlock status` on node 1 right after a grant through node 2
 * shows the grant. Used for what is shown to people (inspect), never on the
 * acquire path, which decides by writes that certification orders. */
static const char SQL_ROW_CAUSAL[] = "/* rowlock:row-read-causal */ SET STATEMENT wsrep_sync_wait = 1 FOR "
                                     "SELECT " ROWLOCK__ROW_COLUMNS " FROM `{{table}}` WHERE name = ?";

void rowlock__row_cols_init(rowlock__col *cols, rowlock_info *info)
{
    memset(cols, 0, sizeof(rowlock__col) * ROWLOCK__ROW_NCOLS);
    cols[0] = (rowlock__col){ .type = ROWLOCK__T_STR, .buf = info->name, .cap = sizeof info->name };
    cols[1].type = ROWLOCK__T_I64;
    cols[2] = (rowlock__col){ .type = ROWLOCK__T_STR, .buf = info->owner, .cap = sizeof info->owner };
    cols[3].type = ROWLOCK__T_I64;
    cols[4].type = ROWLOCK__T_U64;
    for (int i = 5; i < ROWLOCK__ROW_NCOLS; i++)
        cols[i].type = ROWLOCK__T_I64;
}

void rowlock__row_cols_store(const rowlock__col *cols, rowlock_info *info)
{
    info->exists = 1;
    info->strategy = (rowlock_strategy)cols[1].i;
    info->count = (unsigned int)cols[3].i;
    info->token = cols[4].u;
    info->acquired_at_us = cols[5].i;
    info->expires_at_us = cols[6].i;
    info->expires_in_ms = cols[7].i;
    info->held = (int)cols[8].i;
    info->stale = (int)cols[9].i;
}

/* Bytes of rowlock_info that a caller of `version` has (0: unknown version).
 * A new field gets a new version and a row here. */
static size_t info_size(unsigned int version)
{
    if (version == 0)
        return 0;
    return sizeof(rowlock_info); /* version 1 and anything newer than this library */
}

int rowlock__info_check(unsigned int version)
{
    return info_size(version) ? 0 : ROWLOCK_EINVALID;
}

void rowlock__info_copy_out(rowlock_info *dst, const rowlock_info *src)
{
    unsigned int v = dst->version;
    memcpy(dst, src, info_size(v));
    dst->version = v;
}

static void info_reset(rowlock_info *info)
{
    unsigned int v = info->version;
    memset(info, 0, sizeof *info);
    info->version = v;
}

static int row_read(rowlock_client *c, const char *sql, long variant, const char *name, size_t name_len,
                    rowlock_info *info)
{
    rowlock__col cols[ROWLOCK__ROW_NCOLS];
    info_reset(info);
    rowlock__row_cols_init(cols, info);
    rowlock__param p = RL_STR(name, name_len);
    rowlock__res res;
    int rc = rowlock__db_run(c, RL_STMT(.what = "read lock row", .tmpl = sql, .variant = variant, .params = &p,
                                        .nparams = 1, .cols = cols, .ncols = ROWLOCK__ROW_NCOLS, .res = &res));
    if (rc)
        return rc;
    if (res.rows == 0) {
        info_reset(info);
        rowlock__strlcpy(info->name, name, sizeof info->name);
        return 0;
    }
    rowlock__row_cols_store(cols, info);
    return 0;
}

int rowlock__row_read(rowlock_client *c, const char *name, size_t name_len, rowlock_info *info)
{
    return row_read(c, SQL_ROW, 0, name, name_len, info);
}

int rowlock__row_read_current(rowlock_client *c, int causal, const char *name, size_t name_len, rowlock_info *info)
{
    return row_read(c, causal ? SQL_ROW_CAUSAL : SQL_ROW, 0, name, name_len, info);
}

int rowlock__row_read_shared(rowlock_client *c, const char *name, size_t name_len, long lock_wait_ms,
                             rowlock_info *info)
{
    return row_read(c, SQL_ROW_SHARED, lock_wait_ms, name, name_len, info);
}

/* Explain a lost claim; *free_row is set when the row was free or its lease
 * had ended (the claim lost only to the hint gate or to a race). */
int rowlock__explain_busy_row(rowlock_lock *l, int *free_row)
{
    rowlock_info info = ROWLOCK_INFO_INIT;
    /* Not rowlock__db_run_quiet: the claim's message is kept only to be
     * quoted in the busy error below, and a failed read's error is the
     * result, so nothing is restored. */
    rowlock__errsave keep;
    l->busy_self = 0; /* whatever this read ends in (a multi-holder row, an error) */
    rowlock__error_save(l->client, &keep);
    int rc = rowlock__row_read(l->client, l->name, l->name_len, &info);
    if (rc)
        return rc;
    if (free_row)
        *free_row = !info.exists || !info.held;
    if (info.exists && info.strategy != l->ops->id) {
        const char *other = rowlock__strategy_find(info.strategy) ? rowlock_strategy_name(info.strategy) : NULL;
        return rowlock__fail(l->client, ROWLOCK_EINVALID,
                             "acquire %s (%s): the name is managed by the %s strategy; use %s for it (a name "
                             "changes strategy only after the reaper purges its row)",
                             l->shown, l->ops->name, other ? other : "unknown", other ? other : "the same strategy");
    }
    if (rowlock__strategy_multi_row(&info)) {
        l->found_multi = 1; /* a multi-holder name (holders.c): the one-row path stops here */
        return ROWLOCK_EBUSY;
    }
    if (info.exists && info.held && strcmp(info.owner, l->client->owner) == 0 && rowlock__lease_client_holds(l)) {
        /* Another handle of this client holds it (a shared acquire after an
         * exclusive one-row grant): a wait would only wait for ourselves. */
        l->busy_self = 1;
        return rowlock__fail(l->client, ROWLOCK_EBUSY,
                             "acquire %s (%s, %s): this client holds it exclusively through another handle "
                             "(for another %lld ms); release that first",
                             l->shown, l->ops->name, l->mode == ROWLOCK_MODE_SHARED ? "shared" : "exclusive",
                             (long long)info.expires_in_ms);
    }
    if (info.exists && info.held && info.owner[0]) {
        char owner[4 * ROWLOCK_OWNER_MAX + 8]; /* written by another client: escaped */
        rowlock_escape(owner, sizeof owner, info.owner, strlen(info.owner));
        return rowlock__fail(l->client, ROWLOCK_EBUSY, "acquire %s (%s): held by %s for another %lld ms", l->shown,
                             l->ops->name, owner, (long long)info.expires_in_ms);
    }
    if (keep.msg[0])
        return rowlock__fail(l->client, ROWLOCK_EBUSY, "acquire %s (%s): busy: %s", l->shown, l->ops->name, keep.msg);
    return rowlock__fail(l->client, ROWLOCK_EBUSY,
                         "acquire %s (%s): held by another owner (or being handed to a waiter)", l->shown,
                         l->ops->name);
}

int rowlock__explain_busy(rowlock_lock *l)
{
    return rowlock__explain_busy_row(l, NULL);
}

int rowlock__explain_lost(rowlock_lock *l, const char *what)
{
    rowlock_info info = ROWLOCK_INFO_INIT;
    int rc = rowlock__row_read(l->client, l->name, l->name_len, &info);
    if (rc)
        return rc;
    /* Say only what the row shows: whether the lease had ended is not
     * known here (an administrator may have deleted or taken the row of a
     * live lease). */
    char why[4 * ROWLOCK_OWNER_MAX + 96];
    if (!info.exists) {
        snprintf(why, sizeof why, "its row is gone (deleted, or purged by the reaper)");
    } else if (info.token != l->token && info.owner[0]) {
        char owner[4 * ROWLOCK_OWNER_MAX + 8]; /* written by another client: escaped */
        rowlock_escape(owner, sizeof owner, info.owner, strlen(info.owner));
        snprintf(why, sizeof why, "the row has another owner now (%s, token %llu)", owner,
                 (unsigned long long)info.token);
    } else if (info.token != l->token || !info.owner[0] || strcmp(info.owner, l->client->owner) != 0) {
        snprintf(why, sizeof why, "the row has no owner now (it was released)");
    } else {
        snprintf(why, sizeof why, "its lease had already ended");
    }
    return rowlock__fail(l->client, ROWLOCK_ENOTOWNER, "%s %s (%s): not the owner any more: %s", what, l->shown,
                         l->ops->name, why);
}
