/* libFuzzer target: the tools' option parser (tools/cli_common.c,
 * cli_next_opt with the connection options). The input is argv, split at
 * NUL bytes. Invariants: no crash, UB or leak; the parser always advances
 * and ends. Its usage errors go to stderr: the ctest run passes
 * -close_fd_mask=2 (libFuzzer keeps its own output). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

enum { F_WAIT = 1, F_NONBLOCK, F_STRATEGY, F_HELP };
static const cli_optspec specs[] = {
    { "wait", 'w', 1, F_WAIT },   { "nonblock", 'n', 0, F_NONBLOCK },
    { "strategy", 's', 1, F_STRATEGY }, { "help", 'h', 0, F_HELP },
    { NULL, 0, 0, 0 },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    char *argv[66];
    int argc = 0;
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    argv[argc++] = (char *)"rowlock";
    for (size_t i = 0; i <= size && argc < 65;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    cli_conn cc;
    cli_conn_init(&cc);
    cli_optparser p;
    cli_opt_init(&p, "rowlock", "run", argc, argv, 1);
    const char *val;
    int id, steps = 0;
    while ((id = cli_next_opt(&p, specs, &cc, &val)) != CLI_OP_END && id != CLI_OP_ERR) {
        if (++steps > 1000 || p.i > argc)
            abort();
        if (id > 0 && (id == F_WAIT || id == F_STRATEGY) && val == NULL)
            abort();
    }
    if (p.i > argc)
        abort();
    (void)cli_parse_seconds(argc > 1 ? argv[1] : "");
    cli_conn_free(&cc);
    free(buf);
    return 0;
}
