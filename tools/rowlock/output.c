/*
 * rowlock: lock rows for people (aligned columns) and for programs (JSON).
 */
#include "commands.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put_padded(const char *s, size_t width, size_t colw, int last)
{
    fputs(s, stdout);
    if (!last) {
        while (width++ < colw + 2)
            fputc(' ', stdout);
    }
}

static void format_expires(char *buf, size_t cap, const rowlock_info *in)
{
    if (in->expires_at_us == 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.1fs", (double)in->expires_in_ms / 1000.0);
}

void rl_print_cmd_help(const char *usage, int all_codes)
{
    fputs(usage, stdout);
    if (all_codes) {
        fputc('\n', stdout);
        cli_print_exit_codes(stdout);
    }
    fputc('\n', stdout);
    fputs(cli_conn_help, stdout);
}

const char *rl_strategy_str(rowlock_strategy s)
{
    const char *n = rowlock_strategy_name(s);
    return n ? n : "unknown";
}

/* "…_at":"ISO","…_at_us":N, or both null (us 0: unknown). */
static void json_time(FILE *f, const char *key, int64_t us)
{
    char ts[48];
    fprintf(f, ",\"%s\":", key);
    if (us) {
        cli_json_string(f, cli_format_utc_us(ts, sizeof ts, us));
        fprintf(f, ",\"%s_us\":%" PRId64, key, us);
    } else {
        fprintf(f, "null,\"%s_us\":null", key);
    }
}

/* "text", or null when text is "". */
static void json_str_val(FILE *f, const char *text)
{
    if (text[0])
        cli_json_string(f, text);
    else
        fputs("null", f);
}

/* ,"key":"text" or ,"key":null. */
static void json_str_or_null(FILE *f, const char *key, const char *text)
{
    fprintf(f, ",\"%s\":", key);
    json_str_val(f, text);
}

/* ,"key":N or ,"key":null when N is 0 (no token, no ticket). */
static void json_u64_or_null(FILE *f, const char *key, uint64_t v)
{
    if (v)
        fprintf(f, ",\"%s\":%" PRIu64, key, v);
    else
        fprintf(f, ",\"%s\":null", key);
}

/* ,"expires_in_ms":N, null without an expiry. */
static void json_expires_in(FILE *f, int64_t expires_at_us, int64_t expires_in_ms)
{
    if (expires_at_us)
        fprintf(f, ",\"expires_in_ms\":%" PRId64, expires_in_ms);
    else
        fputs(",\"expires_in_ms\":null", f);
}

/* The keys of a lock object up to expires_in_ms, without the braces. */
static void json_info_keys(FILE *f, const rowlock_info *in)
{
    fputs("\"name\":", f);
    cli_json_string(f, in->name);
    fprintf(f, ",\"exists\":%s,\"held\":%s,\"stale\":%s,\"strategy\":", in->exists ? "true" : "false",
            in->held ? "true" : "false", in->stale ? "true" : "false");
    if (in->exists)
        cli_json_string(f, rl_strategy_str(in->strategy));
    else
        fputs("null", f);
    json_str_or_null(f, "owner", in->owner);
    json_u64_or_null(f, "token", in->token);
    fprintf(f, ",\"count\":%u", in->count);
    json_time(f, "acquired_at", in->acquired_at_us);
    json_time(f, "expires_at", in->expires_at_us);
    json_expires_in(f, in->expires_at_us, in->expires_in_ms);
}

void rl_json_info(FILE *f, const rowlock_info *in)
{
    fputc('{', f);
    json_info_keys(f, in);
    fputc('}', f);
}

static const char *mode_str(rowlock_mode m)
{
    return m == ROWLOCK_MODE_SHARED ? "shared" : "exclusive";
}

/* mode_known 0: a for-update holder, whose mode the row does not say. */
static void json_holder(FILE *f, const rowlock_holder_info *h, int mode_known)
{
    fputs("{\"owner\":", f);
    json_str_val(f, h->owner);
    if (mode_known)
        fprintf(f, ",\"mode\":\"%s\"", mode_str(h->mode));
    else
        fputs(",\"mode\":null", f);
    fprintf(f, ",\"granted\":%s,\"live\":%s,\"count\":%u", h->granted ? "true" : "false",
            h->live ? "true" : "false", h->count);
    json_u64_or_null(f, "token", h->token);
    json_u64_or_null(f, "ticket", h->ticket);
    json_time(f, "acquired_at", h->acquired_at_us);
    json_time(f, "expires_at", h->expires_at_us);
    json_expires_in(f, h->expires_at_us, h->expires_in_ms);
    fputc('}', f);
}

void rl_json_holder(FILE *f, const rowlock_holder_info *h)
{
    json_holder(f, h, 1);
}

void rl_json_lock(FILE *f, const rowlock_info *in, const rowlock_holder_info *h, size_t nh)
{
    const char *mode = NULL;
    size_t i;

    fputc('{', f);
    json_info_keys(f, in);
    if (nh > 0) {
        /* A multi-holder name: the mode of its live grants (exclusive wins:
         * then it is the only one). */
        for (i = 0; i < nh; i++)
            if (h[i].granted && h[i].live && (mode == NULL || h[i].mode == ROWLOCK_MODE_EXCLUSIVE))
                mode = mode_str(h[i].mode);
        fprintf(f, ",\"mode\":%s%s%s,\"permits\":%u,\"holders\":[", mode ? "\"" : "", mode ? mode : "null",
                mode ? "\"" : "", h[0].permits);
        for (i = 0; i < nh; i++) {
            if (i)
                fputc(',', f);
            rl_json_holder(f, &h[i]);
        }
        fputs("]}", f);
        return;
    }
    /* A one-row lock: its one holder (a crashed one's when stale). A
     * for-update holder is a row lock: owner, token and mode unknown. */
    int forupd = in->strategy == ROWLOCK_STRATEGY_FOR_UPDATE;
    if (in->exists && (in->held || in->stale) && (in->owner[0] || forupd)) {
        rowlock_holder_info one;
        memset(&one, 0, sizeof one);
        one.version = ROWLOCK_HOLDER_INFO_VERSION;
        snprintf(one.owner, sizeof one.owner, "%s", in->owner);
        one.mode = ROWLOCK_MODE_EXCLUSIVE;
        one.granted = 1;
        one.live = in->held;
        one.count = in->count;
        one.token = in->token;
        one.acquired_at_us = in->acquired_at_us;
        one.expires_at_us = in->expires_at_us;
        one.expires_in_ms = in->expires_in_ms;
        if (forupd) {
            fputs(",\"mode\":null,\"permits\":0,\"holders\":[", f);
            json_holder(f, &one, 0);
            fputs("]}", f);
            return;
        }
        fprintf(f, ",\"mode\":%s,\"permits\":0,\"holders\":[", in->held ? "\"exclusive\"" : "null");
        rl_json_holder(f, &one);
        fputs("]}", f);
        return;
    }
    fputs(",\"mode\":null,\"permits\":0,\"holders\":[]}", f);
}

void rl_holders_info(const rowlock_holder_info *h, size_t n, rowlock_info *out)
{
    rowlock_info r = ROWLOCK_INFO_INIT;
    int stale = 0;
    size_t i;

    if (n == 0) {
        *out = r;
        return;
    }
    snprintf(r.name, sizeof r.name, "%s", h[0].name);
    r.exists = 1;
    r.strategy = ROWLOCK_STRATEGY_INSERT;
    for (i = 0; i < n; i++) {
        if (!h[i].granted)
            continue;
        if (!h[i].live) {
            stale = 1;
            if (h[i].token > r.token && !r.held)
                r.token = h[i].token;
            continue;
        }
        if (!r.held) {
            r.held = 1;
            r.token = 0;
            snprintf(r.owner, sizeof r.owner, "%s", h[i].owner); /* the first by ticket */
        }
        r.count += h[i].count;
        if (h[i].token > r.token)
            r.token = h[i].token;
        if (h[i].acquired_at_us && (r.acquired_at_us == 0 || h[i].acquired_at_us < r.acquired_at_us))
            r.acquired_at_us = h[i].acquired_at_us;
        if (h[i].expires_at_us > r.expires_at_us) {
            r.expires_at_us = h[i].expires_at_us;
            r.expires_in_ms = h[i].expires_in_ms;
        }
    }
    r.stale = !r.held && stale;
    *out = r;
}

enum { NCOLS = 6 };

int rl_print_table(const rowlock_info *rows, size_t n)
{
    static const char *const hdr[NCOLS] = { "NAME", "STRATEGY", "OWNER", "TOKEN", "ACQUIRED AT",
                                            "EXPIRES IN" };
    size_t colw[NCOLS], r, k;
    char **cells;
    size_t *widths;
    int rc = 0;

    if (n == 0)
        return 0;
    cells = calloc(n * NCOLS, sizeof *cells);
    widths = calloc(n * NCOLS, sizeof *widths);
    if (cells == NULL || widths == NULL) {
        free(cells);
        free(widths);
        return -1;
    }
    for (k = 0; k < NCOLS; k++)
        colw[k] = strlen(hdr[k]);
    for (r = 0; r < n && rc == 0; r++) {
        const rowlock_info *in = &rows[r];
        char buf[64];
        const char *raw[NCOLS];
        char tok[32], ts[48];

        if (in->token)
            snprintf(tok, sizeof tok, "%" PRIu64, in->token);
        else
            snprintf(tok, sizeof tok, "-");
        format_expires(buf, sizeof buf, in);
        raw[0] = in->name;
        raw[1] = rl_strategy_str(in->strategy);
        raw[2] = in->owner[0] ? in->owner : "-";
        raw[3] = tok;
        raw[4] = cli_format_utc_us(ts, sizeof ts, in->acquired_at_us);
        raw[5] = buf;
        for (k = 0; k < NCOLS; k++) {
            cells[r * NCOLS + k] = cli_human_str(raw[k], &widths[r * NCOLS + k]);
            if (cells[r * NCOLS + k] == NULL) {
                rc = -1;
                break;
            }
            if (widths[r * NCOLS + k] > colw[k])
                colw[k] = widths[r * NCOLS + k];
        }
    }
    if (rc == 0) {
        for (k = 0; k < NCOLS; k++)
            put_padded(hdr[k], strlen(hdr[k]), colw[k], k == NCOLS - 1);
        fputc('\n', stdout);
        for (r = 0; r < n; r++) {
            for (k = 0; k < NCOLS; k++)
                put_padded(cells[r * NCOLS + k], widths[r * NCOLS + k], colw[k], k == NCOLS - 1);
            fputc('\n', stdout);
        }
    }
    for (r = 0; r < n * NCOLS; r++)
        free(cells[r]);
    free(cells);
    free(widths);
    return rc;
}

