#!/usr/bin/env bash
# tests/cli/test_flock.sh — `rowlock run` speaks flock(1) (issue 17):
# util-linux's flock test scenarios with a lock NAME instead of a file (a
# shared holder runs 3 s; --nonblock --exclusive exits with the conflict
# code; --shared succeeds meanwhile; --timeout 5 succeeds after the holder
# ends, between 3 and 5 s), then every flock option with flock's exit
# statuses (1 conflict, 64 usage, COMMAND's own status), --permits, and
# `rowlock lock` with the same options.
#
# Environment (set by tests/cli/cli.cmake): ROWLOCK_BIN_DIR, ROWLOCK_DEFAULTS_FILE.
# Own lock table (cli_flock_locks) and names prefixed with this pid.
# Output: "ok N - ..." / "not ok N - ..." lines, then "P passed, F failed".
# shellcheck disable=SC2016 # single quotes: expanded by the inner shells
set -u
export LC_ALL=C
: "${ROWLOCK_BIN_DIR:?set ROWLOCK_BIN_DIR}"
: "${ROWLOCK_DEFAULTS_FILE:?set ROWLOCK_DEFAULTS_FILE}"
export ROWLOCK_DEFAULTS_FILE
RL=$ROWLOCK_BIN_DIR/rowlock
T=cli_flock_locks
P="fl$$-"
# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"
tap_workdir flock

# check_exit DESC EXPECTED_STATUS ACTUAL_STATUS [diagnostics...]
check_exit() {
    local d=$1 want=$2 got=$3
    shift 3
    if [[ $got == "$want" ]]; then pass "$d"; else fail "$d" "exit $got, expected $want" "$@"; fi
}
rl() { "$RL" --table=$T "$@"; }
now() { date +%s.%N; }
# wait_file FILE [TENTHS]
wait_file() {
    local k
    for ((k = 0; k < ${2:-100}; k++)); do
        [[ -e $1 ]] && return 0
        sleep 0.1
    done
    return 1
}

rl migrate >/dev/null || { fail "migrate $T"; printf '%d passed, %d failed\n' 0 1; exit 1; }

# ---- util-linux's flock scenarios --------------------------------------------------
n="${P}lockfile"
t0=$(now)
rl run --shared "$n" sh -c 'touch "$1/held"; sleep 3' sh "$W" 2>"$W/holder.err" &
HPID=$!
wait_file "$W/held" 100 || fail "the shared holder started" "$(cat "$W/holder.err")"

rl run --nonblock --exclusive --conflict-exit-code 5 "$n" echo "You will never see this!" >"$W/x.out" 2>"$W/x.err"
check_exit "--nonblock --exclusive while a shared holder runs: the conflict code (5)" 5 $? "$(cat "$W/x.err")"
[[ ! -s $W/x.out ]] && pass "... and COMMAND did not run" || fail "... and COMMAND did not run" "$(cat "$W/x.out")"

rl run --shared --nonblock "$n" true 2>"$W/sn.err"
check_exit "--shared --nonblock while a shared holder runs: 0 (readers coexist)" 0 $? "$(cat "$W/sn.err")"
out=$(rl run --shared "$n" echo "shared ok" 2>"$W/s.err")
check_exit "--shared while a shared holder runs: 0" 0 $? "$(cat "$W/s.err")"
[[ $out == "shared ok" ]] && pass "... and COMMAND ran" || fail "... and COMMAND ran" "got '$out'"

rl run --timeout 5 "$n" true 2>"$W/t.err"
rc=$?
t1=$(now)
check_exit "--timeout 5 (exclusive) after the shared holder: 0" 0 $rc "$(cat "$W/t.err")"
el=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
if awk -v e="$el" 'BEGIN { exit !(e >= 3 && e <= 5) }'; then
    pass "... granted after the holder ended, between 3 and 5 s ($el s)"
else
    fail "... granted after the holder ended, between 3 and 5 s" "took $el s"
fi
wait "$HPID"
check_exit "the shared holder's own status: 0" 0 $?

# ---- every flock option, short and long ---------------------------------------------
n="${P}opts"
# Holders below record what they need and hold until told (at most 30 s):
# a fixed sleep could end before the checks that need them (it did under ASan).
rl run -x "$n" sh -c 'echo "$ROWLOCK_OWNER" > "$1/x.tmp" && mv "$1/x.tmp" "$1/x"
    for i in $(seq 600); do [ -e "$1/x.done" ] && exit 0; sleep 0.05; done' sh "$W" 2>/dev/null &
HPID=$!
wait_file "$W/x" 100 || fail "an exclusive (-x) holder started"
rl run -s -n "$n" true 2>/dev/null
check_exit "-s -n against an exclusive holder: 1 (flock's conflict status)" 1 $?
rl run -e --nb "$n" true 2>/dev/null
check_exit "-e --nb: 1" 1 $?
rl run -n "$n" true 2>/dev/null
check_exit "-n (exclusive by default): 1" 1 $?
rl run --exclusive --nonblock "$n" true 2>/dev/null
check_exit "--exclusive --nonblock: 1" 1 $?
rl run -E 7 -n "$n" true 2>/dev/null
check_exit "-E 7 -n: 7" 7 $?
rl run --conflict-exit-code=9 -w 0.3 "$n" true 2>/dev/null
check_exit "--conflict-exit-code=9 -w 0.3: 9" 9 $?
rl run --wait 0.3 "$n" true 2>/dev/null
check_exit "--wait 0.3: 1" 1 $?
rl run --verbose -n "$n" true 2>"$W/v.err"
check_exit "--verbose -n: 1" 1 $?
owner=$(cat "$W/x")
if [[ -n $owner ]] && grep -qF -- "$owner" "$W/v.err"; then
    pass "--verbose on a conflict names the holder ($owner)"
else
    fail "--verbose on a conflict names the holder" "owner '$owner'" "$(cat "$W/v.err")"
fi
touch "$W/x.done"
wait "$HPID"

rl run "$n" -c 'exit 3'
check_exit "-c 'exit 3': COMMAND's status (3)" 3 $?
rl run "$n" --command 'exit 4'
check_exit "--command 'exit 4': 4" 4 $?
out=$(rl run -o "$n" echo closed 2>&1)
check_exit "-o (accepted): 0" 0 $? "$out"
rl run --close "$n" true
check_exit "--close (accepted): 0" 0 $?
rl run -F "$n" true 2>"$W/f.err"
check_exit "-F refused: 64" 64 $?
[[ $(wc -l <"$W/f.err") -eq 1 ]] && grep -q "lease needs a live process that renews it and stops COMMAND" "$W/f.err" &&
    pass "... with a one-line reason (the lease needs rowlock as COMMAND's parent)" ||
    fail "... with a one-line reason" "$(cat "$W/f.err")"
rl run --no-fork "$n" true 2>/dev/null
check_exit "--no-fork refused: 64" 64 $?
out=$(rl run -V)
check_exit "-V inside run: 0" 0 $?
[[ $out == rowlock\ * ]] && pass "... prints the version" || fail "... prints the version" "$out"
rl run -s -S bogus "$n" true 2>/dev/null
check_exit "-S (the strategy's short form) is checked: 64" 64 $?
rl run -S for-update -s "${P}fu0" true
check_exit "-S for-update -s: 0" 0 $?

# ---- for-update shared: two readers at once -----------------------------------------
n="${P}fu"
rl run -S for-update -s "$n" sh -c 'touch "$1/fu"
    for i in $(seq 600); do [ -e "$1/fu.done" ] && exit 0; sleep 0.05; done' sh "$W" &
HPID=$!
wait_file "$W/fu" 100 || fail "a for-update shared holder started"
rl run -S for-update -s -n "$n" true
check_exit "for-update: a second shared holder meanwhile: 0" 0 $?
rl run -S for-update -x -n "$n" true 2>/dev/null
check_exit "for-update: an exclusive one meanwhile: 1" 1 $?
touch "$W/fu.done"
wait "$HPID"

# ---- semaphores: --permits -----------------------------------------------------------
n="${P}sem"
for i in 1 2; do
    rl run --permits 2 "$n" sh -c 'touch "$1/sem$2"
        for i in $(seq 600); do [ -e "$1/sem.done" ] && exit 0; sleep 0.05; done' sh "$W" "$i" &
done
wait_file "$W/sem1" 100 && wait_file "$W/sem2" 100 && pass "--permits 2: two holders at once" ||
    fail "--permits 2: two holders at once"
rl run --permits 2 -n "$n" true 2>/dev/null
check_exit "--permits 2: a third one: 1" 1 $?
out=$(rl status "$n")
check_exit "status of a semaphore: 0 (held)" 0 $? "$out"
[[ $(grep -c "shared  *holds" <<<"$out") -eq 2 ]] && pass "status shows every holder" ||
    fail "status shows every holder" "$out"
out=$(rl list)
[[ $(grep -c "$n" <<<"$out") -ge 2 ]] && pass "list shows every holder" || fail "list shows every holder" "$out"
rl permits "$n" 3 >/dev/null
check_exit "permits NAME 3: 0" 0 $?
rl run --permits 2 -n "$n" true
check_exit "... then a third holder: 0" 0 $?
touch "$W/sem.done"
rl run --permits 0 "$n" true 2>/dev/null
check_exit "--permits 0 is refused: 64" 64 $?
wait

# ---- release --force of one holder -----------------------------------------------------
n="${P}force"
rl run -s "$n" sh -c 'echo "$ROWLOCK_OWNER" >"$1/o1"; touch "$1/f1"; sleep 30' sh "$W" 2>"$W/f1.err" &
P1=$!
rl run -s "$n" sh -c 'touch "$1/f2"; sleep 3' sh "$W" 2>/dev/null &
P2=$!
wait_file "$W/f1" 100 && wait_file "$W/f2" 100 || fail "two shared holders started"
o1=$(cat "$W/o1")
rl release --force --owner "$o1" "$n" >/dev/null
check_exit "release --force --owner OWNER: 0" 0 $?
wait "$P1"
check_exit "... that holder's run loses its lease: 75" 75 $? "$(cat "$W/f1.err")"
wait "$P2"
check_exit "... the other holder runs on: 0" 0 $?

# ---- rowlock lock takes the same options ------------------------------------------------
n="${P}lk"
out=$(timeout 30 bash -c '
    eval "$("$1" --table="$2" lock -s "$3")" || exit 90
    eval "$("$1" --table="$2" lock --shared "$3")" || exit 91
    h=$ROWLOCK_HANDLE
    "$1" --table="$2" lock -x -n "$3" >/dev/null 2>&1; echo "x=$?"
    "$1" unlock "$h"; echo "unlock=$?"
' sh "$RL" "$T" "$n" 2>&1)
[[ $out == *"x=1"* && $out == *"unlock=0"* ]] && pass "lock -s twice (two holders), lock -x -n conflicts (1)" ||
    fail "lock -s twice (two holders), lock -x -n conflicts (1)" "$out"

tap_done
