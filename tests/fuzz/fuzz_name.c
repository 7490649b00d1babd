/* libFuzzer target: lock-name and table-name checks and rowlock_escape
 * (issue 13). Invariants: no crash or UB; an accepted name is valid UTF-8 of
 * 1-255 bytes; escaped text never holds a raw control byte. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rowlock_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    char out[2048];
    const char *why = NULL;
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    if (rowlock_name_check(s, &why) == 0) {
        size_t n = strlen(s);
        if (n == 0 || n > ROWLOCK_NAME_MAX || rowlock__utf8_check((const unsigned char *)s, n, NULL) != NULL)
            abort();
    }
    (void)rowlock__table_name_check(s);
    size_t w = rowlock_escape(out, (size % sizeof out) + 1, (const char *)data, size);
    if (w != strlen(out))
        abort();
    for (const unsigned char *p = (const unsigned char *)out; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            abort();
        if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
            abort();
    }
    if (rowlock__utf8_check((const unsigned char *)out, w, NULL) != NULL)
        abort();
    free(s);
    return 0;
}
