# Sourced by the shell tests that run on a PRIVATE server of their own
# (tests/cli: test_keeper.sh, test_ops.sh, test_stop.sh, test_idle.sh): the
# TAP helpers of tap.bash, waiting for a pid or a file, and the server's start
# and cleanup.
#
#   . "$(dirname "$0")/../lib/private_server.bash"
#   ps_start TAG          # W (work dir), SB (sandbox dir), RL, SBX; exits 1
#                         # with a "not ok" line if the server does not start
#   ...checks...
#   tap_done              # "P passed, F failed"; exit status 0 iff none failed
#
# A script may define tap_cleanup_first (run first at exit, see tap.bash).
# Environment: ROWLOCK_BIN_DIR, ROWLOCK_SANDBOX (tests/cli/cli.cmake).
set -u
export LC_ALL=C
: "${ROWLOCK_BIN_DIR:?}"
: "${ROWLOCK_SANDBOX:?}"
# shellcheck source=tests/lib/tap.bash
. "${BASH_SOURCE[0]%/*}/tap.bash"
RL=$ROWLOCK_BIN_DIR/rowlock
SBX=$ROWLOCK_SANDBOX
SB=
STARTED=0

# The server is stopped once the jobs that used it are gone.
tap_cleanup_last() {
    if ((STARTED)); then "$SBX" stop "$SB" >/dev/null 2>&1; fi
}
tap_trap

wait_pid() { # wait_pid PID SECONDS: its exit status, or 124 after SIGKILL at the timeout
    local i
    for ((i = 0; i < $2 * 20; i++)); do
        kill -0 "$1" 2>/dev/null || { wait "$1"; return; }
        sleep 0.05
    done
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    return 124
}
wait_file() { # wait_file FILE SECONDS: 0 once FILE is non-empty
    local i
    for ((i = 0; i < $2 * 20; i++)); do [[ -s $1 ]] && return 0; sleep 0.05; done
    return 1
}

ps_start() { # ps_start TAG
    tap_workdir "$1"
    SB=$W/sb
    if ! "$SBX" start "$SB" >"$W/sb.out" 2>"$W/sb.err"; then
        fail "private sandbox started" "$(tail -n 5 "$W/sb.err")"
        tap_done
        exit 1
    fi
    STARTED=1
}
