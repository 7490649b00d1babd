#!/usr/bin/env bash
# tests/cli/test_log.sh — `--verbose` prints the library's events (the
# logging hook), one line each: "rowlock: LEVEL KIND: MESSAGE".
#
# Environment (set by tests/cli/cli.cmake): ROWLOCK_BIN_DIR, ROWLOCK_DEFAULTS_FILE.
# Own lock table (cli_log_locks) and names prefixed with this pid.
# Output: "ok N - ..." / "not ok N - ..." lines, then "P passed, F failed".
set -u
export LC_ALL=C
: "${ROWLOCK_BIN_DIR:?set ROWLOCK_BIN_DIR}"
: "${ROWLOCK_DEFAULTS_FILE:?set ROWLOCK_DEFAULTS_FILE}"
export ROWLOCK_DEFAULTS_FILE
RL=$ROWLOCK_BIN_DIR/rowlock
REAPER=$ROWLOCK_BIN_DIR/rowlock-reaper
T=cli_log_locks
P="lg$$-"
# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"
tap_workdir log


"$RL" --table=$T migrate >/dev/null || { fail "migrate $T"; printf '%d passed, %d failed\n' 0 1; exit 1; }

# run --verbose: one acquired and one released line, in that order, naming
# the lock (escaped) and the same token as COMMAND's ROWLOCK_TOKEN.
n="${P}job"
"$RL" --table=$T run --verbose "$n" sh -c 'echo "$ROWLOCK_TOKEN"' >"$W/out" 2>"$W/err"
rc=$?
tok=$(cat "$W/out")
acq=$(grep -n "^rowlock: info acquired: '$n' (insert): granted, token $tok," "$W/err" | cut -d: -f1)
rel=$(grep -n "^rowlock: info released: '$n' (insert): token $tok, released after" "$W/err" | cut -d: -f1)
if [[ $rc == 0 && -n $tok && $(grep -c '^rowlock: info acquired:' "$W/err") == 1 &&
      $(grep -c '^rowlock: info released:' "$W/err") == 1 && -n $acq && -n $rel && $acq -lt $rel ]]; then
    pass "run --verbose: one 'rowlock: info acquired:' line, then one 'rowlock: info released:' line, with the token"
else
    fail "run --verbose: acquired and released lines" "exit $rc, token '$tok'" "$(cat "$W/err")"
fi

# Without --verbose: no event lines.
"$RL" --table=$T run "$n" true 2>"$W/err2"
if [[ $? == 0 && ! -s $W/err2 ]]; then
    pass "run without --verbose prints nothing"
else
    fail "run without --verbose prints nothing" "$(cat "$W/err2")"
fi

# A name with a newline stays on one line (escaped).
n2="${P}two
lines"
"$RL" --table=$T run --verbose "$n2" true 2>"$W/err3"
if [[ $? == 0 ]] && grep -q "^rowlock: info acquired: '${P}two\\\\x0alines' (insert)" "$W/err3" &&
    ! grep -q '^lines' "$W/err3"; then
    pass "run --verbose escapes the lock name (one line per event)"
else
    fail "run --verbose escapes the lock name" "$(cat "$W/err3")"
fi

# A name with a bidirectional control (U+202E RIGHT-TO-LEFT OVERRIDE, which
# shows what follows it reversed) is shown as \u202e, in the event lines and
# in status; the raw bytes never reach the output. In JSON it is \u202e too.
rlo=$'\xe2\x80\xae'
n3="${P}bidi-${rlo}txt.exe"
"$RL" --table=$T run --verbose "$n3" true 2>"$W/err4"
rc=$?
"$RL" --table=$T status "$n3" >"$W/st4" 2>&1
"$RL" --table=$T status --json "$n3" >"$W/js4" 2>&1
if [[ $rc == 0 ]] && grep -q "^rowlock: info acquired: '${P}bidi-\\\\u202etxt.exe' (insert)" "$W/err4" &&
    grep -qF "${P}bidi-\\u202etxt.exe" "$W/st4" && grep -qF "\"${P}bidi-\\u202etxt.exe\"" "$W/js4" &&
    ! grep -q "$rlo" "$W/err4" "$W/st4" "$W/js4"; then
    pass "a bidi control in the name (U+202E) is shown as \\u202e: run --verbose, status, status --json"
else
    fail "a bidi control in the name is shown as \\u202e" "exit $rc" "$(cat "$W/err4" "$W/st4" "$W/js4" | od -c | head -40)"
fi

# The reaper: --verbose is accepted, refused with --quiet.
"$REAPER" --table=$T --verbose --grace 3600 >/dev/null 2>"$W/rerr"
rc1=$?
"$REAPER" --table=$T --verbose --quiet 2>"$W/rerr2"
rc2=$?
if [[ $rc1 == 0 && $rc2 == 64 ]] && grep -q 'contradict' "$W/rerr2"; then
    pass "rowlock-reaper --verbose works; with --quiet it is refused (64)"
else
    fail "rowlock-reaper --verbose" "exit $rc1 / $rc2" "$(cat "$W/rerr" "$W/rerr2")"
fi

tap_done
