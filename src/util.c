/* Small pure helpers: clocks, randomness, backoff, name checks. */
#include "rowlock_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

int64_t rowlock__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void rowlock__sleep_us(int64_t us)
{
    if (us <= 0)
        return;
    struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int rowlock__random_bytes(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

/* splitmix64: cheap, good enough for jitter; seeded from getrandom. */
uint32_t rowlock__rand32(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/*
 * "Equal jitter": half the exponential step is fixed, half random. Full
 * jitter alone lets a waiter retry almost at once again and again; no jitter
 * makes waiters that lost together retry together.
 */
int64_t rowlock__backoff_us(unsigned attempt, int64_t base_us, int64_t cap_us, uint32_t rnd)
{
    if (base_us < 1)
        base_us = 1;
    if (cap_us < base_us)
        cap_us = base_us;
    int64_t step = base_us;
    for (unsigned i = 0; i < attempt && step < cap_us; i++)
        step *= 2;
    if (step > cap_us)
        step = cap_us;
    int64_t half = step / 2;
    return half + (int64_t)(((uint64_t)rnd * (uint64_t)(step - half + 1)) >> 32);
}

double rowlock__quarter_slice_s(int64_t elapsed_us, double lo, double hi)
{
    double q = (double)(elapsed_us > 0 ? elapsed_us : 0) / 4e6;
    if (q < lo)
        q = lo;
    if (q > hi)
        q = hi;
    return q;
}

const char *rowlock__utf8_check(const unsigned char *s, size_t n, size_t *bad_at)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            cp = c & 0x07;
        } else {
            if (bad_at)
                *bad_at = i;
            return (c == 0xc0 || c == 0xc1) ? "overlong UTF-8 encoding" : "invalid UTF-8 lead byte";
        }
        if (i + len > n) {
            if (bad_at)
                *bad_at = i;
            return "truncated UTF-8 sequence";
        }
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) {
                if (bad_at)
                    *bad_at = i;
                return "invalid UTF-8 continuation byte";
            }
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) {
            if (bad_at)
                *bad_at = i;
            return "overlong UTF-8 encoding";
        }
        if (cp >= 0xd800 && cp <= 0xdfff) {
            if (bad_at)
                *bad_at = i;
            return "UTF-16 surrogate encoded in UTF-8";
        }
        if (cp > 0x10ffff) {
            if (bad_at)
                *bad_at = i;
            return "code point above U+10FFFF";
        }
        i += len;
    }
    return NULL;
}

static int ends_with_ci(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && strncasecmp(s + n - k, suffix, k) == 0;
}

/* rowlock's own objects beside every lock table <t>: its token sequence,
 * waiter queue, token floor and holders table (sql/0001-0004). One list for
 * the check and for the message that explains a refusal. */
static const char *const table_suffixes[] = { "_token", "_queue", "_floor", "_hold", "_fence", "_epoch" };
#define NSUFFIXES (sizeof table_suffixes / sizeof table_suffixes[0])

int rowlock__table_name_check(const char *t)
{
    if (t == NULL || *t == '\0')
        return ROWLOCK_EINVALID;
    size_t n = 0;
    for (const char *p = t; *p; p++, n++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_'))
            return ROWLOCK_EINVALID;
    }
    if (n > ROWLOCK_TABLE_MAX)
        return ROWLOCK_EINVALID;
    /* rowlock's own objects: the version table, and every lock table's
     * objects (a lock table "x_queue" would be table x's queue).
     * Compared without case: table names may be case-insensitive on the
     * server (lower_case_table_names). */
    if (strcasecmp(t, "rowlock_schema") == 0)
        return ROWLOCK__TABLE_RESERVED;
    for (size_t k = 0; k < NSUFFIXES; k++)
        if (ends_with_ci(t, n, table_suffixes[k]))
            return ROWLOCK__TABLE_RESERVED;
    return 0;
}

const char *rowlock__table_reserved_text(char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "rowlock_schema and names ending in ");
    for (size_t k = 0; k < NSUFFIXES && n < cap; k++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", k == 0 ? "" : k + 1 == NSUFFIXES ? " or " : ", ",
                              table_suffixes[k]);
    return buf;
}

/* FNV-1a, 64 bits: the names of the server-side named locks (GET_LOCK) a
 * handle uses (lease.c's hints, holders.c's wake locks) and the cluster
 * rule's record of a reservation. A changed function renames those locks,
 * so old and new clients would no longer meet: it stays as it is. */
uint64_t rowlock__fnv1a(uint64_t h, const void *data, size_t n)
{
    for (const unsigned char *p = data, *end = p + n; p < end; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    return h;
}

/* CRC-32 (ISO-HDLC, zlib's and the server's CRC32()), zlib's way: start
 * with 0, feed the previous result to continue. The names of the holders'
 * queue and awake locks, which SQL computes too (holders.h). */
uint32_t rowlock__crc32(uint32_t crc, const void *data, size_t n)
{
    uint32_t c = ~crc;
    for (const unsigned char *p = data, *end = p + n; p < end; p++) {
        c ^= *p;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

size_t rowlock__strlcpy(char *dst, const char *src, size_t cap)
{
    size_t n = strlen(src);
    if (cap > 0) {
        size_t k = n < cap - 1 ? n : cap - 1;
        memcpy(dst, src, k);
        dst[k] = '\0';
    }
    return n;
}

ROWLOCK_EXTERN int rowlock_name_check(const char *name, const char **why)
{
    const char *reason = NULL;
    if (name == NULL)
        reason = "lock name is NULL";
    else if (name[0] == '\0')
        reason = "lock name is empty";
    else if (strlen(name) > ROWLOCK_NAME_MAX)
        reason = "lock name is longer than 255 bytes";
    else
        reason = rowlock__utf8_check((const unsigned char *)name, strlen(name), NULL);
    if (why)
        *why = reason;
    return reason ? ROWLOCK_EINVALID : 0;
}

const char *rowlock__server_check(const char *info, unsigned long version)
{
    if (info == NULL || strstr(info, "MariaDB") == NULL)
        return "the server is not MariaDB (MySQL lacks SET STATEMENT, sequences and max_statement_time, which "
               "rowlock uses)";
    if (version < 100600)
        return "the server is older than MariaDB 10.6";
    return NULL;
}

ROWLOCK_EXTERN const char *rowlock_version(void)
{
    return ROWLOCK_VERSION_STRING;
}

/* Valid UTF-8 that must still not reach a terminal or a log line as
 * itself: the C1 controls (the 8-bit CSI and OSC start escape sequences,
 * NEL ends a line), the line and paragraph separators (U+2028, U+2029, which
 * some viewers break lines at), and the bidirectional formatting controls
 * (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), which reorder what
 * a reader sees: a name holding U+202E shows its tail reversed, the
 * "Trojan Source" trick (CVE-2021-42574). */
static int escaped_as_code_point(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
           (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

ROWLOCK_EXTERN size_t rowlock_escape(char *out, size_t cap, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0, i = 0;
    if (out == NULL || cap == 0)
        return 0;
    if (s == NULL)
        n = 0;
    while (i < n) {
        char piece[16];
        size_t plen = 0, used = 1;
        unsigned char c = p[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            piece[plen++] = (char)c;
        } else if (c == '\\') {
            piece[plen++] = '\\';
            piece[plen++] = '\\';
        } else if (c >= 0x80) {
            size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
            if (i + len <= n && rowlock__utf8_check(p + i, len, NULL) == NULL) {
                uint32_t cp = (uint32_t)c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
                for (size_t k = 1; k < len; k++)
                    cp = (cp << 6) | (p[i + k] & 0x3f);
                if (escaped_as_code_point(cp)) {
                    /* One escape for the code point: \u0085, \u202e */
                    piece[plen++] = '\\';
                    piece[plen++] = 'u';
                    for (int sh = 12; sh >= 0; sh -= 4)
                        piece[plen++] = hex[(cp >> sh) & 0xf];
                } else {
                    memcpy(piece, p + i, len);
                    plen = len;
                }
                used = len;
            }
        }
        if (plen == 0) {
            piece[plen++] = '\\';
            piece[plen++] = 'x';
            piece[plen++] = hex[c >> 4];
            piece[plen++] = hex[c & 0xf];
        }
        /* Keep room for "..." and the NUL unless this is the last piece. */
        if (o + plen + (i + used < n ? 3 : 0) + 1 > cap) {
            size_t k = 0;
            while (k < 3 && o + 1 < cap)
                out[o++] = '.', k++;
            break;
        }
        memcpy(out + o, piece, plen);
        o += plen;
        i += used;
    }
    out[o] = '\0';
    return o;
}
