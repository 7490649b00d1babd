/*
 * util.c: clocks, randomness, backoff with jitter, the UTF-8 name check,
 * the lock-table name check and which servers are supported. Pure helpers
 * with no client and no SQL: anything may call them.
 */
#ifndef ROWLOCK_UTIL_H
#define ROWLOCK_UTIL_H

#include <stddef.h>
#include <stdint.h>

int64_t rowlock__now_us(void); /* monotonic clock */
int rowlock__random_bytes(void *buf, size_t n);
/* Exponential backoff with equal jitter: the delay before retry `attempt`
 * (0-based), in µs, uniform in [step/2, step] where step = min(cap,
 * base * 2^attempt). `rnd` is a uniformly random 32-bit value (passed in so
 * tests are deterministic). */
int64_t rowlock__backoff_us(unsigned attempt, int64_t base_us, int64_t cap_us, uint32_t rnd);
/* A waiter's slice while nothing it watches changes: a quarter of the time
 * it has seen things as they are (elapsed_us), at least lo and at most hi
 * seconds (hi wins if hi < lo: a lease that ends sooner). A change is then noticed within a quarter of
 * the time it took to come, and an idle waiter's statements thin out as
 * ln(t): the queue's head (lease.c) and the semaphore's first waiter
 * (holders.c). */
double rowlock__quarter_slice_s(int64_t elapsed_us, double lo, double hi);
uint32_t rowlock__rand32(uint64_t *state);
void rowlock__sleep_us(int64_t us);
/* Returns NULL if valid, else a static reason. */
const char *rowlock__utf8_check(const unsigned char *s, size_t n, size_t *bad_at);
/* 0 valid; ROWLOCK_EINVALID (bad characters or length); ROWLOCK__TABLE_RESERVED
 * (rowlock's own objects: rowlock__table_reserved_text() lists them). */
#define ROWLOCK__TABLE_RESERVED 1
int rowlock__table_name_check(const char *t);
/* "rowlock_schema and names ending in _token, ...": the names that
 * rowlock__table_name_check() refuses as reserved, from the same list, in
 * buf (64 bytes are enough). Returns buf. */
const char *rowlock__table_reserved_text(char *buf, size_t cap);
/* NULL if the server (mysql_get_server_info, mysql_get_server_version) is
 * one rowlock supports (MariaDB 10.6+), else a static reason. */
const char *rowlock__server_check(const char *info, unsigned long version);
size_t rowlock__strlcpy(char *dst, const char *src, size_t cap);
/* FNV-1a over n bytes, from h (start with ROWLOCK__FNV1A_START). */
#define ROWLOCK__FNV1A_START 0xcbf29ce484222325ULL
uint64_t rowlock__fnv1a(uint64_t h, const void *data, size_t n);
/* CRC-32 as the server's CRC32() computes it; crc: 0, or the result for
 * the bytes before data. */
uint32_t rowlock__crc32(uint32_t crc, const void *data, size_t n);

#endif /* ROWLOCK_UTIL_H */
