/*
 * The fault seam (db.h explains it): compiled only with
 * ROWLOCK_FAULT_INJECTION, into the fault tests' copy of the library
 * (CMake's rowlock_fault_objects), never into the installed one. db_stmt.c
 * asks it before and after every statement.
 */
#ifdef ROWLOCK_FAULT_INJECTION
#include "rowlock_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errmsg.h>
#include <mysql.h>

#define FAULT_MAX 32
typedef struct fault_rule {
    int used;
    const rowlock_client *client; /* NULL: every client */
    char tag[32];
    unsigned nth;                 /* 0: every execution */
    unsigned seen, fired;
    rowlock__fault_kind kind;
    unsigned value;
} fault_rule;
static fault_rule faults[FAULT_MAX];
static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fault_env_once = PTHREAD_ONCE_INIT;

static void tag_of(const char *sql, char *out, size_t cap)
{
    static const char head[] = "/* rowlock:";
    size_t o = 0;
    if (strncmp(sql, head, sizeof head - 1) == 0)
        for (const char *p = sql + sizeof head - 1; *p && *p != ' ' && *p != '*' && o + 1 < cap; p++)
            out[o++] = *p;
    out[o] = '\0';
}

/* Generated from the sources in src/ by cmake/fault_tags.cmake: every tag a statement
 * carries, sorted. */
extern const char *const rowlock__fault_tags[];
extern const size_t rowlock__fault_tag_count;

static int tag_cmp(const void *key, const void *elem)
{
    return strcmp((const char *)key, *(const char *const *)elem);
}

int rowlock__fault_tag_known(const char *tag)
{
    return tag != NULL &&
           bsearch(tag, rowlock__fault_tags, rowlock__fault_tag_count, sizeof rowlock__fault_tags[0], tag_cmp) != NULL;
}

static int fault_add(const rowlock_client *c, const char *tag, unsigned nth, rowlock__fault_kind kind,
                     unsigned value)
{
    if (tag == NULL || strlen(tag) >= sizeof faults[0].tag || !rowlock__fault_tag_known(tag) ||
        kind < ROWLOCK__FAULT_ERROR || kind > ROWLOCK__FAULT_INTERRUPT_AFTER)
        return ROWLOCK_EINVALID;
    for (int i = 0; i < FAULT_MAX; i++) {
        if (!faults[i].used) {
            faults[i] = (fault_rule){ .used = 1, .client = c, .nth = nth, .kind = kind, .value = value };
            rowlock__strlcpy(faults[i].tag, tag, sizeof faults[i].tag);
            return 0;
        }
    }
    return ROWLOCK_ENOMEM;
}

/* ROWLOCK_FAULTS="tag:nth:spec,...": spec is a MySQL error number, stall=MS,
 * drop, rollback=MS, noid or cut. A bad entry is reported on stderr and
 * aborts the process. */
static void fault_env(void)
{
    const char *env = getenv("ROWLOCK_FAULTS");
    if (env == NULL || *env == '\0')
        return;
    char *copy = strdup(env), *save = NULL;
    if (copy == NULL)
        return;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char tag[32], spec[32];
        unsigned nth = 0, value = 0;
        rowlock__fault_kind kind = ROWLOCK__FAULT_ERROR;
        int ok = sscanf(item, "%31[^:]:%u:%31s", tag, &nth, spec) == 3;
        if (ok && strncmp(spec, "stall=", 6) == 0) {
            kind = ROWLOCK__FAULT_STALL;
            ok = sscanf(spec + 6, "%u", &value) == 1;
        } else if (ok && strncmp(spec, "rollback=", 9) == 0) {
            kind = ROWLOCK__FAULT_ROLLBACK;
            ok = sscanf(spec + 9, "%u", &value) == 1;
        } else if (ok && strcmp(spec, "drop") == 0) {
            kind = ROWLOCK__FAULT_DROP_AFTER;
        } else if (ok && strcmp(spec, "noid") == 0) {
            kind = ROWLOCK__FAULT_NO_INSERT_ID;
        } else if (ok && strcmp(spec, "cut") == 0) {
            kind = ROWLOCK__FAULT_INTERRUPT_AFTER;
        } else if (ok) {
            ok = sscanf(spec, "%u", &value) == 1 && value > 0;
        }
        if (!ok || fault_add(NULL, tag, nth, kind, value) != 0) {
            /* A test whose injection silently does not arm proves nothing:
             * stop the process instead of running on without it. */
            fprintf(stderr,
                    "rowlock: ROWLOCK_FAULTS: bad entry (want tag:nth:errno|stall=ms|drop|rollback=ms|noid|cut, tag one that a statement "
                    "carries: see generated/fault_tags.c)\n");
            abort();
        }
    }
    free(copy);
}

int rowlock__fault_set(const rowlock_client *c, const char *tag, unsigned nth, rowlock__fault_kind kind,
                       unsigned value)
{
    pthread_once(&fault_env_once, fault_env);
    pthread_mutex_lock(&fault_mu);
    int rc = fault_add(c, tag, nth, kind, value);
    pthread_mutex_unlock(&fault_mu);
    return rc;
}

void rowlock__fault_clear(const rowlock_client *c)
{
    pthread_once(&fault_env_once, fault_env);
    pthread_mutex_lock(&fault_mu);
    for (int i = 0; i < FAULT_MAX; i++)
        if (c == NULL || faults[i].client == c)
            faults[i].used = 0;
    pthread_mutex_unlock(&fault_mu);
}

unsigned rowlock__fault_fired_total(void)
{
    unsigned n = 0;
    pthread_mutex_lock(&fault_mu);
    for (int i = 0; i < FAULT_MAX; i++)
        if (faults[i].used)
            n += faults[i].fired;
    pthread_mutex_unlock(&fault_mu);
    return n;
}

unsigned rowlock__fault_fired(const rowlock_client *c, const char *tag)
{
    unsigned n = 0;
    pthread_mutex_lock(&fault_mu);
    for (int i = 0; i < FAULT_MAX; i++)
        if (faults[i].used && faults[i].client == c && strcmp(faults[i].tag, tag) == 0)
            n += faults[i].fired;
    pthread_mutex_unlock(&fault_mu);
    return n;
}

/* The rule that fires for this execution, if any (counts the execution). */
static int fault_match(rowlock_client *c, const char *sql, rowlock__fault_kind *kind, unsigned *value)
{
    char tag[32];
    tag_of(sql, tag, sizeof tag);
    if (tag[0] == '\0')
        return 0;
    pthread_once(&fault_env_once, fault_env);
    int hit = 0;
    pthread_mutex_lock(&fault_mu);
    for (int i = 0; i < FAULT_MAX && !hit; i++) {
        fault_rule *f = &faults[i];
        if (!f->used || (f->client && f->client != c) || strcmp(f->tag, tag) != 0)
            continue;
        f->seen++;
        if (f->nth == 0 || f->seen == f->nth) {
            f->fired++;
            *kind = f->kind;
            *value = f->value;
            hit = 1;
        }
    }
    pthread_mutex_unlock(&fault_mu);
    return hit;
}

static const char *fault_sqlstate(unsigned e)
{
    switch (e) {
    case 1213: return "40001";
    case 1146: return "42S02";
    case 1235: return "42000";
    default: return "HY000";
    }
}

/* Before a statement runs: 0 to run it (after any stall; *drop_after 1
 * when the connection is to be cut once it ran, 2 when its insert id is to
 * read 0, 3 when an interrupt is to cut it once it ran), else the injected
 * error. */
int rowlock__fault_before(rowlock_client *c, const char *what, const char *sql, int *drop_after)
{
    rowlock__fault_kind kind;
    unsigned value;
    *drop_after = 0;
    if (!fault_match(c, sql, &kind, &value))
        return 0;
    if (kind == ROWLOCK__FAULT_STALL) {
        rowlock__sleep_us((int64_t)value * 1000);
        return 0;
    }
    if (kind == ROWLOCK__FAULT_DROP_AFTER) {
        *drop_after = 1;
        return 0;
    }
    if (kind == ROWLOCK__FAULT_NO_INSERT_ID) {
        *drop_after = 2;
        return 0;
    }
    if (kind == ROWLOCK__FAULT_INTERRUPT_AFTER) {
        *drop_after = 3;
        return 0;
    }
    if (kind == ROWLOCK__FAULT_ROLLBACK) {
        /* The transaction ends and nobody is told: the statement then runs
         * on its own, autocommitted. */
        MYSQL *m = (MYSQL *)c->mysql;
        if (m && mysql_query(m, "/* rowlock-fault */ ROLLBACK") == 0) {
            MYSQL_RES *r = mysql_store_result(m);
            if (r)
                mysql_free_result(r);
        }
        rowlock__sleep_us((int64_t)value * 1000);
        return 0;
    }
    if (rowlock__db_classify(value) == ROWLOCK__DB_CONN)
        rowlock__db_cut(c);
    char msg[64];
    snprintf(msg, sizeof msg, "injected fault %u", value);
    return rowlock__db_capture(c, what, value, fault_sqlstate(value), msg);
}

/* After the statement ran: its result is "lost" with the connection
 * (drop_after 3: cut by rowlock_client_interrupt(), as if it had come
 * during the statement). */
int rowlock__fault_after(rowlock_client *c, const char *what, int drop_after)
{
    if (drop_after == 3)
        rowlock_client_interrupt(c);
    rowlock__db_cut(c);
    return rowlock__db_capture(c, what, CR_SERVER_LOST, "HY000", "Lost connection to server during query (injected)");
}
#endif /* ROWLOCK_FAULT_INJECTION */
