#!/usr/bin/env bash
# tests/cli/test_lock.sh — `rowlock lock` / `rowlock unlock`: a lock held
# across shell commands by a supervisor, released by unlock, by the exit of
# the shell that took it (also SIGKILL), never taken after its front process
# was interrupted, and reported lost (75) after a forced release.
#
# Environment (set by tests/cli/cli.cmake): ROWLOCK_BIN_DIR, ROWLOCK_DEFAULTS_FILE.
# Own lock table (cli_lock_locks) and names prefixed with this pid.
# Output: "ok N - ..." / "not ok N - ..." lines, then "P passed, F failed".
# shellcheck disable=SC2016 # single quotes: expanded by the inner shells
set -u
export LC_ALL=C
: "${ROWLOCK_BIN_DIR:?set ROWLOCK_BIN_DIR}"
: "${ROWLOCK_DEFAULTS_FILE:?set ROWLOCK_DEFAULTS_FILE}"
export ROWLOCK_DEFAULTS_FILE
RL=$ROWLOCK_BIN_DIR/rowlock
T=cli_lock_locks
P="lk$$-"
export RL T
# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"
tap_workdir lock

# check_exit DESC EXPECTED_STATUS ACTUAL_STATUS [diagnostics...]
check_exit() {
    local d=$1 want=$2 got=$3
    shift 3
    if [[ $got == "$want" ]]; then pass "$d"; else fail "$d" "exit $got, expected $want" "$@"; fi
}
# status_of NAME: 0 held, 1 free
status_of() { "$RL" --table=$T status "$1" >/dev/null 2>&1; }
# wait_free NAME [TENTHS]: 0 once free
wait_free() {
    local k
    for ((k = 0; k < ${2:-50}; k++)); do
        status_of "$1" || return 0
        sleep 0.1
    done
    return 1
}

"$RL" --table=$T migrate >/dev/null || { fail "migrate $T"; printf '%d passed, %d failed\n' 0 1; exit 1; }

# ---- lock, use, check, unlock ---------------------------------------------------
n="${P}it's a job"
out=$(timeout 20 bash -c '
    eval "$("$RL" --table=$T lock -w 5 "$1")" || exit 90
    echo "handle=$ROWLOCK_HANDLE"
    echo "token=$ROWLOCK_TOKEN"
    echo "name=$ROWLOCK_NAME"
    echo "owner=$ROWLOCK_OWNER"
    "$RL" --table=$T status --json "$1"; echo "status=$?"
    "$RL" --table=$T lock -n "$1"; echo "second=$?"
    "$RL" --table=$T lock -n -E 3 "$1"; echo "second_E=$?"
    "$RL" unlock --check; echo "check=$?"
    "$RL" unlock; echo "unlock=$?"
    "$RL" --table=$T status "$1" >/dev/null; echo "after=$?"
    "$RL" unlock; echo "again=$?"
    "$RL" unlock --check "$ROWLOCK_HANDLE"; echo "check_after=$?"
' _ "$n" 2>"$W/err")
rc=$?
get() { sed -n "s/^$1=//p" <<<"$out" | head -1; }
tok=$(get token) owner=$(get owner)
check_exit "lock: eval of its output succeeds in bash" 0 "$rc" "$out" "$(cat "$W/err")"
[[ $(get handle) =~ ^[0-9]+\.[0-9a-f]{32}$ ]] && pass "lock: ROWLOCK_HANDLE is PID.SECRET" || fail "lock: ROWLOCK_HANDLE is PID.SECRET" "$out"
[[ $(get name) == "$n" ]] && pass "lock: ROWLOCK_NAME survives shell quoting (a quote in the name)" || fail "lock: ROWLOCK_NAME" "$out"
if [[ $tok =~ ^[0-9]+$ && $out == *'"held":true'*"\"owner\":\"$owner\""*"\"token\":$tok,"* ]]; then
    pass "lock: status shows it held by ROWLOCK_OWNER with ROWLOCK_TOKEN"
else
    fail "lock: status shows it held by ROWLOCK_OWNER with ROWLOCK_TOKEN" "$out"
fi
check_exit "lock: status exit while held" 0 "$(get status)"
check_exit "lock: a second lock -n on the name is refused (exit 1)" 1 "$(get second)"
check_exit "lock: -E sets the conflict exit status" 3 "$(get second_E)"
check_exit "unlock --check: held" 0 "$(get check)"
check_exit "unlock: released" 0 "$(get unlock)"
check_exit "unlock: the name is free afterwards" 1 "$(get after)"
check_exit "unlock twice: no such supervisor (1)" 1 "$(get again)"
check_exit "unlock --check after unlock: no such supervisor (1)" 1 "$(get check_after)"

# ---- the lease is renewed: held well past one lease ---------------------------------
n="${P}renewed"
out=$(timeout 30 bash -c '
    eval "$("$RL" --table=$T lock -l 1 "$1")" || exit 90
    t=$ROWLOCK_TOKEN
    sleep 3.5
    "$RL" --table=$T status --json "$1"
    "$RL" unlock; echo "unlock=$?"
' _ "$n" 2>&1)
if [[ $out == *'"held":true'* && $out == *unlock=0* ]]; then
    pass "lock -l 1: still held after 3.5 s (renewed), then unlocked"
else
    fail "lock -l 1: still held after 3.5 s (renewed), then unlocked" "$out"
fi

# ---- the shell exits without unlock ------------------------------------------------
n="${P}exit"
start=$SECONDS
timeout 20 bash -c 'eval "$("$RL" --table=$T lock "$1")" && status_ok=1; exit 0' _ "$n" 2>"$W/err"
rc=$?
check_exit "lock in \$(...): the shell's command substitution returns (supervisor keeps no pipe)" 0 "$rc" "$(cat "$W/err")"
if wait_free "$n" 50; then
    pass "shell exited without unlock: lock released within 5 s ($((SECONDS - start)) s)"
else
    fail "shell exited without unlock: lock released within 5 s" "$("$RL" --table=$T status "$n" 2>&1)"
fi

n="${P}sigkill"
bash -c 'eval "$("$RL" --table=$T lock "$1")" || exit 90; echo locked; exec sleep 60' _ "$n" >"$W/kout" 2>"$W/err" &
shpid=$!
for _ in $(seq 100); do grep -q locked "$W/kout" && break; sleep 0.1; done
if status_of "$n"; then
    kill -KILL "$shpid"
    wait "$shpid" 2>/dev/null
    if wait_free "$n" 50; then
        pass "shell killed with SIGKILL (no trap can run): lock released"
    else
        fail "shell killed with SIGKILL: lock released" "$("$RL" --table=$T status "$n" 2>&1)"
    fi
else
    fail "shell killed with SIGKILL: lock was taken first" "$(cat "$W/kout" "$W/err")"
fi

# sh (dash) too: the parent of rowlock is the script's shell there as well.
n="${P}dash"
out=$(timeout 20 sh -c 'eval "$("$RL" --table=$T lock "$1")" || exit 90; "$RL" --table=$T status "$1" >/dev/null; echo "held=$?"' _ "$n" 2>&1)
if [[ $out == *held=0* ]] && wait_free "$n" 50; then
    pass "sh: held while the script runs, released when it exits"
else
    fail "sh: held while the script runs, released when it exits" "$out"
fi

# --pid: watch another process than the parent.
n="${P}pid"
sleep 60 &
keeper=$!
out=$(timeout 20 bash -c 'eval "$("$RL" --table=$T lock --verbose --pid "$2" "$1" 2>>"$3")" || exit 90; echo ok' _ "$n" "$keeper" "$W/pid.err" 2>&1)
if [[ $out == ok ]] && sleep 1 && status_of "$n"; then
    kill "$keeper"
    wait "$keeper" 2>/dev/null
    if wait_free "$n" 50; then
        pass "--pid PID: held after the shell exits, released when PID exits"
    else
        fail "--pid PID: released when PID exits"
    fi
else
    fail "--pid PID: held after the shell exits" "$out" "$(cat "$W/pid.err")"
    kill "$keeper" 2>/dev/null
fi

# ---- interrupted while waiting: the lock is never taken later -------------------
# The unlock comes 100 ms after the SIGTERM: the waiting supervisor has cut
# its wait, but its server session may still be queued, so the unlock may
# hand it the lock, in the waiter's name. Before it gives up, the supervisor
# (the library) ends that session and gives such a grant back: the name is
# free within 5 s (else it stays held, unused, for the waiter's whole lease).
n="${P}wait"
out=$(timeout 20 bash -c '
    eval "$("$RL" --table=$T lock "$1")" || exit 90
    "$RL" --table=$T lock -w 30 "$1" >/dev/null 2>&1 &
    front=$!
    sleep 1
    kill -TERM $front
    sleep 0.1 # its supervisor sees the signal within 50 ms and cuts its wait
    "$RL" unlock; echo "unlock=$?"
    wait $front; echo "front=$?"
    # (front dies at once; its supervisor gives up on its own time)
    for k in $(seq 50); do "$RL" --table=$T status "$1" >/dev/null || break; sleep 0.1; done
    "$RL" --table=$T status "$1" >/dev/null; echo "later=$?"
' _ "$n" 2>&1)
if [[ $out == *front=143* && $out == *unlock=0* && $out == *later=1* ]]; then
    pass "lock -w interrupted by SIGTERM: front dies by it, the waiting supervisor gives up"
else
    fail "lock -w interrupted by SIGTERM: the waiting supervisor gives up" "$out"
fi

# ---- lost: forced release by an administrator ---------------------------------------
n="${P}lost"
out=$(timeout 30 bash -c '
    eval "$("$RL" --table=$T lock -l 1.5 "$1")" || exit 90
    "$RL" --table=$T release --force "$1" >/dev/null; echo "force=$?"
    sleep 2
    "$RL" unlock --check; echo "check=$?"
    "$RL" unlock; echo "unlock=$?"
' _ "$n" 2>&1)
if [[ $out == *force=0* && $out == *check=75* && $out == *unlock=75* && $out == *"was lost"* ]]; then
    pass "force-released: the supervisor says so, unlock --check and unlock exit 75"
else
    fail "force-released: unlock --check and unlock exit 75" "$out"
fi

# ---- lost after a long wait: the first check after the loss says so ------------------
# A lock granted after a wait of most of its lease is warned about by the
# keeper at once (its safe time counts from the start of the wait). That
# warning was the keeper's one callback per grant, so a later loss woke
# nobody, and unlock --check answered from the supervisor's last wake-up:
# "held", seconds after the keeper knew (found by a review). Now a renewal
# re-arms the callback, and a check asks the keeper. One check, 4 s after a
# force release (renewals every 3 s), must say lost. Planted with both
# fixes reverted: it says held (fails).
n="${P}lostlate"
out=$(timeout 60 bash -c '
    "$RL" --table=$T run "$1" sleep 8.5 & holder=$!
    sleep 0.5
    eval "$("$RL" --table=$T lock -l 9 "$1")" || exit 90
    wait $holder
    sleep 1 # the renewals that follow the grant are done
    "$RL" --table=$T release --force "$1" >/dev/null; echo "force=$?"
    sleep 4
    "$RL" unlock --check >/dev/null 2>&1; echo "check=$?"
    "$RL" unlock >/dev/null 2>&1; echo "unlock=$?"
' _ "$n" 2>&1)
if [[ $out == *force=0* && $out == *check=75* && $out == *unlock=75* ]]; then
    pass "lost after a long wait: the first unlock --check after the loss says so (75)"
else
    fail "lost after a long wait: the first unlock --check after the loss says so (75)" "$out"
fi

# ---- usage errors ----------------------------------------------------------------------
"$RL" --table=$T lock >/dev/null 2>&1
check_exit "lock without NAME: 64" 64 $?
"$RL" --table=$T lock "${P}x" extra >/dev/null 2>&1
check_exit "lock NAME COMMAND: 64 (that is run)" 64 $?
"$RL" --table=$T lock --pid 999999999 "${P}x" >/dev/null 2>&1
check_exit "lock --pid of no process: 64" 64 $?
# --pid 1: init never exits; the message says so (it said "use --pid").
err=$("$RL" --table=$T lock --pid 1 "${P}x" 2>&1 >/dev/null)
rc=$?
if [[ $rc == 64 && $err == *"process 1 is init"* && $err != *"use --pid"* ]]; then
    pass "lock --pid 1: 64, init never exits"
else
    fail "lock --pid 1: 64, init never exits" "exit $rc" "$err"
fi
# --pid of rowlock itself (exec keeps the pid): it exits once it prints the handle.
err=$(bash -c 'exec "$1" --table="$2" lock --pid $$ "$3"' _ "$RL" $T "${P}x" 2>&1 >/dev/null)
rc=$?
if [[ $rc == 64 && $err == *"this rowlock process"* ]]; then
    pass "lock --pid of rowlock itself: 64"
else
    fail "lock --pid of rowlock itself: 64" "exit $rc" "$err"
fi
"$RL" unlock 'not-a-handle' >/dev/null 2>&1
check_exit "unlock of a malformed handle: 64" 64 $?
env -u ROWLOCK_HANDLE "$RL" unlock >/dev/null 2>&1
check_exit "unlock without HANDLE or ROWLOCK_HANDLE: 64" 64 $?
"$RL" unlock 1.0123456789abcdef0123456789abcdef >/dev/null 2>&1
check_exit "unlock of a handle nobody serves: 1" 1 $?

tap_done
