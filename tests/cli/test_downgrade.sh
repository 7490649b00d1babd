#!/usr/bin/env bash
# tests/cli/test_downgrade.sh — `rowlock unlock --downgrade`: a lock held by
# `rowlock lock` becomes shared without letting go. A shared `rowlock run -s`
# that queued before an exclusive one gets in at the downgrade while the
# exclusive one still waits, and that one gets in only after both let go;
# a name only ever used exclusively lets a reader in at once; the token
# stays; the supervisor keeps the shared lock renewed; strategies that cannot
# exit 78 and keep the lock exclusive; a lost lock exits 75.
#
# Environment (set by tests/cli/cli.cmake): ROWLOCK_BIN_DIR, ROWLOCK_DEFAULTS_FILE.
# Own lock table (cli_downgrade_locks) and names prefixed with this pid.
# shellcheck disable=SC2016 # single quotes: expanded by the inner shells
set -u
export LC_ALL=C
: "${ROWLOCK_BIN_DIR:?set ROWLOCK_BIN_DIR}"
: "${ROWLOCK_DEFAULTS_FILE:?set ROWLOCK_DEFAULTS_FILE}"
export ROWLOCK_DEFAULTS_FILE
RL=$ROWLOCK_BIN_DIR/rowlock
T=cli_downgrade_locks
P="dg$$-"
export RL T
# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"
tap_workdir downgrade
export W

check_exit() {
    local d=$1 want=$2 got=$3
    shift 3
    if [[ $got == "$want" ]]; then pass "$d"; else fail "$d" "exit $got, expected $want" "$@"; fi
}
# await COMMAND...: poll (every 20 ms, at most 20 s) until COMMAND succeeds.
await() {
    local k
    for ((k = 0; k < 1000; k++)); do
        "$@" && return 0
        sleep 0.02
    done
    return 1
}
# waiters NAME MODE: how many queued waiters of MODE `rowlock status` shows.
waiters() { "$RL" --table=$T status "$1" 2>/dev/null | grep -c " $2 *waits "; }
has_waiters() { [[ $(waiters "$1" "$2") -ge $3 ]]; }

"$RL" --table=$T migrate >/dev/null || { fail "migrate $T"; tap_done; exit 1; }

# ---- a reader queued before a writer gets in at the downgrade ------------------
n="${P}catalog"
"$RL" --table=$T run -s -n "$n" true || fail "run -s: the name becomes a multi-holder name"
out=$(timeout 90 bash -c '
    n=$1
    eval "$("$RL" --table=$T lock -n "$n")" || exit 90
    echo "token=$ROWLOCK_TOKEN"
    "$RL" --table=$T run -s -w 60 "$n" -c "touch $W/reader_in; while [ ! -e $W/reader_go ]; do sleep 0.02; done" &
    rpid=$!
    for k in $(seq 1000); do [ "$("$RL" --table=$T status "$n" | grep -c " shared *waits ")" -ge 1 ] && break; sleep 0.02; done
    "$RL" --table=$T run -x -w 60 "$n" -c "touch $W/writer_in" &
    wpid=$!
    for k in $(seq 1000); do [ "$("$RL" --table=$T status "$n" | grep -c " exclusive *waits ")" -ge 1 ] && break; sleep 0.02; done
    echo "queued_writers=$("$RL" --table=$T status "$n" | grep -c " exclusive *waits ")"
    "$RL" --table=$T status "$n" | grep " exclusive *waits " | awk "{print \$7}" | sed "s/^/waiter_expires=/"
    [ -e "$W/writer_in" ] && echo "writer_early=1"
    "$RL" unlock --downgrade; echo "downgrade=$?"
    for k in $(seq 1000); do [ -e "$W/reader_in" ] && break; sleep 0.02; done
    [ -e "$W/reader_in" ] && echo "reader_in=1"
    [ -e "$W/writer_in" ] && echo "writer_in_while_held=1"
    echo "writers_waiting=$("$RL" --table=$T status "$n" | grep -c " exclusive *waits ")"
    "$RL" --table=$T status "$n" | grep " shared *holds " | awk "{print \$6}" | sort -n | head -1 | sed "s/^/min_shared_token=/"
    "$RL" unlock --check; echo "check=$?"
    "$RL" unlock --downgrade; echo "again=$?"
    "$RL" unlock; echo "unlock=$?"
    [ -e "$W/writer_in" ] && echo "writer_in_while_reader=1"
    touch "$W/reader_go"
    wait "$rpid"; echo "reader=$?"
    wait "$wpid"; echo "writer=$?"
    [ -e "$W/writer_in" ] && echo "writer_in=1"
' _ "$n" 2>"$W/err")
rc=$?
get() { sed -n "s/^$1=//p" <<<"$out" | head -1; }
check_exit "lock + downgrade scenario ran" 0 "$rc" "$out" "$(cat "$W/err")"
check_exit "an exclusive run -x queued behind the lock" 1 "$(get queued_writers)" "$out"
check_exit "status shows no lease for a waiter (EXPIRES_S -)" - "$(get waiter_expires)" "$out"
check_exit "unlock --downgrade: exit 0" 0 "$(get downgrade)" "$out" "$(cat "$W/err")"
[[ $(get reader_in) == 1 ]] && pass "the shared run -s queued before it got in while the lock was held" ||
    fail "the shared run -s got in" "$out"
[[ -z $(get writer_early)$(get writer_in_while_held)$(get writer_in_while_reader) ]] &&
    pass "the exclusive run -x did not get in while the downgraded lock or the reader held it" ||
    fail "the exclusive run -x stayed out" "$out"
check_exit "the exclusive run -x still waited after the downgrade" 1 "$(get writers_waiting)" "$out"
check_exit "the token stays: the lowest shared holder's token is ROWLOCK_TOKEN" "$(get token)" \
    "$(get min_shared_token)" "$out"
check_exit "unlock --check after the downgrade: held" 0 "$(get check)"
check_exit "unlock --downgrade again: already shared (0)" 0 "$(get again)"
check_exit "unlock: released" 0 "$(get unlock)"
check_exit "the reader ended well" 0 "$(get reader)"
check_exit "the writer ran once both let go" 0 "$(get writer)"
[[ $(get writer_in) == 1 ]] && pass "the writer's command ran" || fail "the writer's command ran" "$out"

# ---- a name only ever held exclusively ------------------------------------------
n="${P}one-row"
out=$(timeout 60 bash -c '
    n=$1
    eval "$("$RL" --table=$T lock -n "$n")" || exit 90
    "$RL" --table=$T run -s -n "$n" true; echo "reader_before=$?"
    "$RL" unlock --downgrade; echo "downgrade=$?"
    "$RL" --table=$T run -s -n "$n" true; echo "reader_after=$?"
    "$RL" --table=$T run -x -n "$n" true; echo "writer_after=$?"
    "$RL" unlock; echo "unlock=$?"
    "$RL" --table=$T run -x -n "$n" true; echo "writer_free=$?"
' _ "$n" 2>"$W/err")
rc=$?
check_exit "one-row name: scenario ran" 0 "$rc" "$out" "$(cat "$W/err")"
check_exit "one-row name: a reader is refused before the downgrade" 1 "$(get reader_before)"
check_exit "one-row name: unlock --downgrade" 0 "$(get downgrade)" "$(cat "$W/err")"
check_exit "one-row name: a reader gets in at once after it" 0 "$(get reader_after)"
check_exit "one-row name: a writer is still refused" 1 "$(get writer_after)"
check_exit "one-row name: unlock" 0 "$(get unlock)"
check_exit "one-row name: a writer gets in after the unlock" 0 "$(get writer_free)"

# ---- the supervisor keeps the shared lock -----------------------------------------
n="${P}kept"
out=$(timeout 60 bash -c '
    n=$1
    eval "$("$RL" --table=$T lock -n -l 1 "$n")" || exit 90
    "$RL" unlock --downgrade; echo "downgrade=$?"
    sleep 3.5   # three and a half leases: only renewals keep it
    "$RL" unlock --check; echo "check=$?"
    "$RL" --table=$T run -x -n "$n" true; echo "writer=$?"
    "$RL" unlock; echo "unlock=$?"
' _ "$n" 2>"$W/err")
check_exit "kept: unlock --downgrade" 0 "$(get downgrade)" "$(cat "$W/err")"
check_exit "kept: held after three and a half leases" 0 "$(get check)" "$(cat "$W/err")"
check_exit "kept: a writer is still refused" 1 "$(get writer)"
check_exit "kept: unlock" 0 "$(get unlock)" "$(cat "$W/err")"

# ---- refusals ------------------------------------------------------------------------
for s in for-update optimistic; do
    n="${P}refuse-$s"
    out=$(timeout 60 bash -c '
        eval "$("$RL" --table=$T lock -n -S "$2" "$1")" || exit 90
        "$RL" unlock --downgrade; echo "downgrade=$?"
        "$RL" --table=$T lock -n -S "$2" "$1" >/dev/null; echo "still=$?"
        "$RL" unlock; echo "unlock=$?"
    ' _ "$n" "$s" 2>"$W/err")
    check_exit "$s: unlock --downgrade is not supported (78)" 78 "$(get downgrade)" "$out" "$(cat "$W/err")"
    grep -q "cannot downgrade" "$W/err" && pass "$s: the supervisor says why" || fail "$s: the supervisor says why" "$(cat "$W/err")"
    check_exit "$s: the lock is still held exclusively" 1 "$(get still)"
    check_exit "$s: unlock" 0 "$(get unlock)"
done

n="${P}lost"
out=$(timeout 60 bash -c '
    eval "$("$RL" --table=$T lock -n "$1")" || exit 90
    "$RL" --table=$T release --force "$1" >/dev/null; echo "force=$?"
    "$RL" unlock --downgrade; echo "downgrade=$?"
    "$RL" unlock; echo "unlock=$?"
' _ "$n" 2>"$W/err")
check_exit "force-released: unlock --downgrade says lost (75)" 75 "$(get downgrade)" "$out" "$(cat "$W/err")"
check_exit "force-released: unlock says lost (75)" 75 "$(get unlock)"

"$RL" unlock --check --downgrade 1.00000000000000000000000000000000 >/dev/null 2>&1
check_exit "--check with --downgrade: usage error (64)" 64 "$?"
"$RL" unlock --downgrade 1.00000000000000000000000000000000 >/dev/null 2>&1
check_exit "--downgrade of a handle without a supervisor: 1" 1 "$?"

tap_done
