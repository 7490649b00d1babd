/* libFuzzer target: the `rowlock` command line, from main's own options to
 * every subcommand's parser (run, lock, unlock, status, list, release,
 * migrate, permits, help). The input is rowlock's arguments, split at NUL
 * bytes ("lock\0--pid\0001\0name").
 *
 * Two passes over it:
 *   1. the option parser alone (cli_next_opt with the connection options and
 *      the lock options that run and lock share, RL_LOCK_OPTSPECS), checking
 *      its invariants: it always advances and ends, and an option that takes
 *      a value gets one;
 *   2. the program itself, rl_main() (tools/rowlock/main.c and the command files,
 *      compiled with CLI_PARSE_ONLY=1: each command returns once its
 *      arguments are parsed and checked, before it connects, forks, changes
 *      its signal mask or opens a socket).
 * Invariants: no crash, UB or leak. Usage errors and help go to stdout and
 * stderr: the ctest run passes -close_fd_mask=3 (libFuzzer keeps its own
 * output). The seeds in cli/ start each subcommand. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rowlock/commands.h"

static const cli_optspec specs[] = {
    RL_LOCK_OPTSPECS,
    { NULL, 0, 0, 0 },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    char *argv[66], *argv2[66];
    int argc = 0;
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    argv[argc++] = (char *)"rowlock";
    for (size_t i = 0; i < size && argc < 65;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    memcpy(argv2, argv, sizeof argv);

    /* 1. The option parser alone. */
    cli_conn cc;
    cli_conn_init(&cc);
    cli_optparser p;
    cli_opt_init(&p, "rowlock", "run", argc, argv, 1);
    const char *val;
    int id, steps = 0;
    while ((id = cli_next_opt(&p, specs, &cc, &val)) != CLI_OP_END && id != CLI_OP_ERR) {
        if (++steps > 1000 || p.i > argc)
            abort();
        if ((id == RL_LO_WAIT || id == RL_LO_STRATEGY || id == RL_LO_LEASE || id == RL_LO_CONFLICT ||
             id == RL_LO_PERMITS) && val == NULL)
            abort();
    }
    if (p.i > argc)
        abort();
    (void)cli_parse_seconds(argc > 1 ? argv[1] : "");
    cli_conn_free(&cc);

    /* 2. rowlock itself, up to the end of each command's parsing. */
    (void)rl_main(argc, argv2);

    free(buf);
    return 0;
}
