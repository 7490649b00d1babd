/*
 * rowlock: lock rows for people (aligned columns) and for programs (JSON).
 */
#include "rowlock_cli.h"

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

const char *rl_strategy_str(rowlock_strategy s)
{
    const char *n = rowlock_strategy_name(s);
    return n ? n : "unknown";
}

void rl_json_info(FILE *f, const rowlock_info *in)
{
    char ts[48];

    fputs("{\"name\":", f);
    cli_json_string(f, in->name);
    fprintf(f, ",\"exists\":%s,\"held\":%s,\"stale\":%s,\"strategy\":", in->exists ? "true" : "false",
            in->held ? "true" : "false", in->stale ? "true" : "false");
    if (in->exists)
        cli_json_string(f, rl_strategy_str(in->strategy));
    else
        fputs("null", f);
    fputs(",\"owner\":", f);
    if (in->owner[0])
        cli_json_string(f, in->owner);
    else
        fputs("null", f);
    if (in->token)
        fprintf(f, ",\"token\":%" PRIu64, in->token);
    else
        fputs(",\"token\":null", f);
    fprintf(f, ",\"count\":%u", in->count);
    fputs(",\"acquired_at\":", f);
    if (in->acquired_at_us) {
        cli_json_string(f, cli_format_utc_us(ts, sizeof ts, in->acquired_at_us));
        fprintf(f, ",\"acquired_at_us\":%" PRId64, in->acquired_at_us);
    } else {
        fputs("null,\"acquired_at_us\":null", f);
    }
    fputs(",\"expires_at\":", f);
    if (in->expires_at_us) {
        cli_json_string(f, cli_format_utc_us(ts, sizeof ts, in->expires_at_us));
        fprintf(f, ",\"expires_at_us\":%" PRId64 ",\"expires_in_ms\":%" PRId64, in->expires_at_us,
                in->expires_in_ms);
    } else {
        fputs("null,\"expires_at_us\":null,\"expires_in_ms\":null", f);
    }
    fputc('}', f);
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

