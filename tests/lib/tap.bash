# tests/lib/tap.bash: the one TAP prologue of the shell suites (tests/cli,
# tests/docs, tests/pkg). One "ok N - ..." / "not ok N - ..." line per check,
# diagnostics as "#   ..." lines under a failure, then "P passed, F failed";
# ctest reads only the exit status, which tap_done makes 0 iff nothing failed.
#
#   . "$(dirname "$0")/../lib/tap.bash"
#   tap_workdir TAG        # W: a fresh directory, removed at exit (optional)
#   pass DESC
#   fail DESC [DIAG...]    # each DIAG may have several lines; empty ones are left out
#   skip DESC [REASON]
#   check RC DESC [DIAG...]   # pass when RC is 0, else fail
#   tap_done               # last command of the script
#
# Cleanup at exit (tap_cleanup, trapped by tap_workdir or tap_trap): the
# script's own tap_cleanup_first, if defined; then the script's background
# jobs still running, and only those (never processes by name), get
# TAP_KILL_SIGNAL (default KILL) and are waited for; then the script's
# tap_cleanup_last, if defined (a private server is stopped there, once
# nothing uses it); then $W is removed.
# shellcheck shell=bash

N=0 PASSED=0 FAILED=0
W=

pass() { N=$((N + 1)); PASSED=$((PASSED + 1)); printf 'ok %d - %s\n' "$N" "$1"; }

fail() {
    local l line
    N=$((N + 1)); FAILED=$((FAILED + 1)); printf 'not ok %d - %s\n' "$N" "$1"; shift
    for l in "$@"; do
        [[ -n $l ]] || continue
        while IFS= read -r line; do printf '#   %s\n' "$line"; done <<<"$l"
    done
}

# A skipped check is "ok" for TAP; it is counted neither passed nor failed.
skip() {
    N=$((N + 1))
    if (($# > 1)); then
        printf 'ok %d - %s # SKIP %s\n' "$N" "$1" "$2"
    else
        printf 'ok %d - # SKIP %s\n' "$N" "$1"
    fi
}

check() { local rc=$1; shift; if ((rc == 0)); then pass "$1"; else fail "$@"; fi; }

tap_done() {
    printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
    ((FAILED == 0))
}

tap_cleanup() {
    local p
    if declare -F tap_cleanup_first >/dev/null; then tap_cleanup_first; fi
    for p in $(jobs -pr); do kill -"${TAP_KILL_SIGNAL:-KILL}" "$p" 2>/dev/null; done
    wait 2>/dev/null
    if declare -F tap_cleanup_last >/dev/null; then tap_cleanup_last; fi
    if [[ -n $W ]]; then rm -rf -- "$W"; fi
}

tap_trap() {
    trap tap_cleanup EXIT
    trap 'exit 130' INT TERM HUP
}

tap_workdir() { # tap_workdir TAG: W=${TMPDIR:-/tmp}/rowlock-TAG.XXXXXXXX
    W=$(mktemp -d "${TMPDIR:-/tmp}/rowlock-$1.XXXXXXXX") || exit 1
    tap_trap
}
