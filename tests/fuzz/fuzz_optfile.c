/* libFuzzer target: the option-file reader and what it hands Connector/C
 * (issue 13). The input is an option file (in a memfd); it is loaded with the
 * connection's groups and rendered. Invariant: every rendered line is a
 * group header, a plain key, or key="..." with no raw newline inside, and it
 * reads back (through the same reader) to the same entries. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rowlock_int.h"

static const char *const groups[] = { "client", "client-server", "client-mariadb", "rowlock", NULL };

static int load_text(rowlock__opts *o, const char *text, size_t len)
{
    char path[64];
    int fd = memfd_create("fuzz-optfile", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    if (len && write(fd, text, len) != (ssize_t)len)
        abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int rc = rowlock__opts_load(o, path, 0, groups);
    close(fd);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rowlock__opts a, b;
    char err[200];
    size_t len = 0;
    /* Includes would read this machine's files: not what is fuzzed here. */
    if (memmem(data, size, "!include", 8) != NULL)
        return 0;
    if (load_text(&a, (const char *)data, size) != 0)
        return 0;
    char *text = rowlock__opts_render(&a, NULL, NULL, &len, err, sizeof err);
    if (text) {
        if (strlen(text) != len)
            abort();
        /* Read back: the rendered file is one [client] group with the same
         * keys and values (group indexes collapse to 0). */
        if (load_text(&b, text, len) != 0)
            abort();
        size_t k = 0;
        for (size_t i = 0; i < a.n; i++) {
            const char *key = a.v[i].key;
            int plain = *key != '\0';
            for (const char *p = key; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
                    plain = 0;
            if (!plain)
                continue;
            if (k >= b.n || strcmp(b.v[k].key, key) != 0 || strcmp(b.v[k].val, a.v[i].val) != 0 ||
                b.v[k].has_val != a.v[i].has_val)
                abort();
            k++;
        }
        if (k != b.n)
            abort();
        rowlock__opts_free(&b);
        free(text);
    }
    rowlock__opts_free(&a);
    return 0;
}
