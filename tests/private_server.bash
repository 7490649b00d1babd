# Sourced by the shell tests that run on a PRIVATE server of their own
# (test_keeper_cli.sh, test_cli_ops.sh, test_cli_stop.sh): the TAP-style
# helpers, waiting for a pid or a file, and the server's start and cleanup.
#
#   . "$(dirname "$0")/private_server.bash"
#   ps_start TAG          # W (work dir), SB (sandbox dir), RL, SBX; exits 1
#                         # with a "not ok" line if the server does not start
#   ...checks...
#   ps_done               # "P passed, F failed"; exit status 0 iff none failed
#
# Before sourcing, a script may define ps_cleanup_extra (run first at exit).
# Environment: ROWLOCK_BIN_DIR, ROWLOCK_SANDBOX (tests/CMakeLists.txt).
set -u
export LC_ALL=C
: "${ROWLOCK_BIN_DIR:?}"
: "${ROWLOCK_SANDBOX:?}"
RL=$ROWLOCK_BIN_DIR/rowlock
SBX=$ROWLOCK_SANDBOX
W=
SB=
STARTED=0

ps_cleanup() {
    local p
    if declare -F ps_cleanup_extra >/dev/null; then ps_cleanup_extra; fi
    for p in $(jobs -pr); do kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
    if ((STARTED)); then "$SBX" stop "$SB" >/dev/null 2>&1; fi
    [[ -n $W ]] && rm -rf -- "$W"
}
trap ps_cleanup EXIT
trap 'exit 130' INT TERM HUP

N=0 PASSED=0 FAILED=0
pass() { N=$((N + 1)); PASSED=$((PASSED + 1)); printf 'ok %d - %s\n' "$N" "$1"; }
fail() {
    local l
    N=$((N + 1)); FAILED=$((FAILED + 1)); printf 'not ok %d - %s\n' "$N" "$1"; shift
    for l in "$@"; do [[ -n $l ]] && sed 's/^/#   /' <<<"$l"; done
}
# check RC DESC [diagnostics...]: pass when RC is 0
check() { local rc=$1; shift; if ((rc == 0)); then pass "$1"; else fail "$@"; fi; }
ps_done() {
    printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
    ((FAILED == 0))
}

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
    W=$(mktemp -d "${TMPDIR:-/tmp}/rowlock-$1.XXXXXXXX") || exit 1
    SB=$W/sb
    if ! "$SBX" start "$SB" >"$W/sb.out" 2>"$W/sb.err"; then
        fail "private sandbox started" "$(tail -n 5 "$W/sb.err")"
        ps_done
        exit 1
    fi
    STARTED=1
}
