#!/usr/bin/env bash
# tests/cli/test_connections.sh — one server connection per CLI holder
# (issue 27 item 5), on a PRIVATE server this script starts and stops (by
# pid, through tools/rowlock-sandbox). Before, a `rowlock run` holder opened
# the lock's connection and the keeper's: with max_connections full of
# waiters a grant could not open the second one and was wasted ("cannot keep
# the lock (COMMAND not started)").
#
#  1. `rowlock run` (insert, optimistic, shared, a semaphore, for-update) and
#     `rowlock lock`, lease 1 s: while COMMAND runs past three leases, the
#     lease row is renewed (lease strategies) and the holder has exactly one
#     session on the server (information_schema.PROCESSLIST, user rowlock).
#  2. Loss is still reported: a force release (insert) and a KILL of the
#     holding session (for-update) stop COMMAND and exit 75. A KILL of an
#     insert holder's session is ridden out: the keeper reconnects that one
#     connection, renews on the new session, COMMAND ends normally (0).
#  3. max_connections = 5 and 20 `run -w` waiters on one name: every
#     process runs its COMMAND, none exits "COMMAND not started" after a
#     grant, and no two COMMANDs overlap.
#
# Environment (tests/cli/cli.cmake): ROWLOCK_BIN_DIR, ROWLOCK_SANDBOX.
# Output: "ok N - ..." lines, then "P passed, F failed".
# shellcheck source=tests/lib/private_server.bash
. "$(dirname "$0")/../lib/private_server.bash"

ps_start connections
R=("$RL" --defaults-file="$SB/my.cnf" --connect-timeout 5)
root() { mariadb --defaults-file="$SB/root.cnf" -N -B -e "$1"; }
tap_cleanup_first() { touch "$W"/go.* "$W/go.all" 2>/dev/null; }
"${R[@]}" migrate >/dev/null 2>"$W/migrate.err"
check $? "migrate on the private server" "$(cat "$W/migrate.err")"

sessions() { root "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'rowlock'"; }
session_ids() { root "SELECT GROUP_CONCAT(ID ORDER BY ID) FROM information_schema.PROCESSLIST WHERE USER = 'rowlock'"; }
# 1 when NAME's grant (lock row or holders row) has been held for more than
# SECONDS by the server's clock and its lease has not ended: renewed.
renewed_past() { # renewed_past NAME SECONDS
    root "SELECT COUNT(*) FROM (SELECT acquired_at, expires_at FROM rowlock.rowlock_locks WHERE name = '$1' AND
            count > 0 AND owner IS NOT NULL UNION ALL SELECT acquired_at, expires_at FROM rowlock.rowlock_locks_hold
            WHERE name = '$1' AND granted = 1) t
          WHERE UTC_TIMESTAMP(6) > acquired_at + INTERVAL $2 SECOND AND expires_at > UTC_TIMESTAMP(6)"
}
wait_for() { # wait_for SECONDS CMD...: 0 once CMD prints 1 (polled every 50 ms)
    local i
    for ((i = 0; i < $1 * 20; i++)); do
        [[ $("${@:2}") == 1 ]] && return 0
        sleep 0.05
    done
    return 1
}
# COMMAND: says it started, runs until $W/go.KEY exists, says it ran.
cmd_for() { echo "echo x >'$W/started.$1'; while [ ! -e '$W/go.$1' ]; do sleep 0.05; done; echo ran"; }

# ---- 1. one session per holder, renewals on it ------------------------------
for k in insert optimistic shared semaphore for-update; do
    case $k in
        shared) args=(-s) ;;
        semaphore) args=(--permits 2) ;;
        *) args=(-S "$k") ;;
    esac
    name="one-$k"
    "${R[@]}" run "${args[@]}" -l 1 "$name" sh -c "$(cmd_for "$k")" >"$W/$k.out" 2>"$W/$k.err" &
    hpid=$!
    if ! wait_file "$W/started.$k" 30; then
        fail "$k: COMMAND started" "$(cat "$W/$k.err")"
        touch "$W/go.$k"; wait_pid "$hpid" 30; continue
    fi
    if [[ $k != for-update ]]; then
        wait_for 30 renewed_past "$name" 3
        check $? "$k: three leases into COMMAND the grant is still live (renewed)" "$(cat "$W/$k.err")"
    fi
    n=$(sessions)
    [[ $n == 1 ]]
    check $? "$k: the holder has one session on the server (PROCESSLIST: $n)" "sessions: $(session_ids)"
    touch "$W/go.$k"
    wait_pid "$hpid" 30
    rc=$?
    [[ $rc == 0 && $(cat "$W/$k.out") == ran && ! -s $W/$k.err ]]
    check $? "$k: COMMAND ran to its end, exit 0, nothing on stderr" "exit $rc" "$(cat "$W/$k.err")"
done

# `rowlock lock`: its supervisor holds the lock with the same module.
out=$("${R[@]}" lock -l 1 one-lock 2>"$W/lock.err")
rc=$?
check "$rc" "lock: acquired" "$(cat "$W/lock.err")"
if ((rc == 0)); then
    eval "$out"
    wait_for 30 renewed_past one-lock 3
    check $? "lock: three leases later the grant is still live (renewed)"
    n=$(sessions)
    [[ $n == 1 ]]
    check $? "lock: the supervisor has one session on the server (PROCESSLIST: $n)" "sessions: $(session_ids)"
    "${R[@]}" unlock >/dev/null 2>"$W/unlock.err"
    check $? "lock: unlock" "$(cat "$W/unlock.err")"
fi

# ---- 2. loss is reported; a killed lease holder's session is replaced ----------
"${R[@]}" run -l 1 lose-insert sh -c "$(cmd_for lose)" >"$W/lose.out" 2>"$W/lose.err" &
hpid=$!
if wait_file "$W/started.lose" 30; then
    "${R[@]}" release --force lose-insert >/dev/null 2>"$W/force.err"
    check $? "insert: force release" "$(cat "$W/force.err")"
    wait_pid "$hpid" 30
    rc=$?
    [[ $rc == 75 ]] && grep -q "the lock was lost" "$W/lose.err"
    check $? "insert: force-released while COMMAND runs: COMMAND stopped, exit 75" "exit $rc" "$(cat "$W/lose.err")"
else
    fail "insert (force release): COMMAND started" "$(cat "$W/lose.err")"
fi
touch "$W/go.lose"

"${R[@]}" run -S for-update -l 5 kill-fu sh -c "$(cmd_for kill-fu)" >"$W/kill-fu.out" 2>"$W/kill-fu.err" &
hpid=$!
if wait_file "$W/started.kill-fu" 30; then
    id=$(session_ids)
    root "KILL CONNECTION $id"
    wait_pid "$hpid" 30
    rc=$?
    [[ $rc == 75 ]]
    check $? "for-update: KILL of the holding session (its only one, $id): COMMAND stopped, exit 75" "exit $rc" \
        "$(cat "$W/kill-fu.err")"
else
    fail "for-update (KILL): COMMAND started" "$(cat "$W/kill-fu.err")"
fi
touch "$W/go.kill-fu"

"${R[@]}" run -l 1 kill-insert sh -c "$(cmd_for kill-ins)" >"$W/kill-ins.out" 2>"$W/kill-ins.err" &
hpid=$!
if wait_file "$W/started.kill-ins" 30; then
    id=$(session_ids)
    root "KILL CONNECTION $id"
    # The keeper's next renewal reconnects the holder's one connection: a
    # new session of user rowlock appears, and the lease lives on past the
    # kill by more than two leases.
    other_session() { local s; s=$(session_ids); [[ -n $s && $s != NULL && $s != "$id" ]] && echo 1; }
    wait_for 30 other_session
    check $? "insert: after a KILL of its session ($id) the holder is on a new one ($(session_ids))"
    kill_at=$(root "SELECT UTC_TIMESTAMP(6)")
    live_after_kill() { root "SELECT COUNT(*) FROM rowlock.rowlock_locks WHERE name = 'kill-insert' AND count > 0 AND
                              UTC_TIMESTAMP(6) > '$kill_at' + INTERVAL 2 SECOND AND expires_at > UTC_TIMESTAMP(6)"; }
    wait_for 30 live_after_kill
    check $? "insert: two leases after the KILL the grant is still live (renewed on the new session)"
    n=$(sessions)
    [[ $n == 1 ]]
    check $? "insert: still one session ($n)" "sessions: $(session_ids)"
    touch "$W/go.kill-ins"
    wait_pid "$hpid" 30
    rc=$?
    [[ $rc == 0 && $(cat "$W/kill-ins.out") == ran ]]
    check $? "insert: COMMAND ran to its end after the KILL, exit 0" "exit $rc" "$(cat "$W/kill-ins.err")"
else
    fail "insert (KILL): COMMAND started" "$(cat "$W/kill-ins.err")"
fi
touch "$W/go.kill-ins"

# ---- 3. more waiters than connections ------------------------------------------
root "SET GLOBAL max_connections = 5"
check $? "max_connections = 5"
crowd=20
pids=()
for ((i = 0; i < crowd; i++)); do
    "${R[@]}" run -w 120 -l 5 crowd sh -c "mkdir '$W/crowd.held' 2>/dev/null || echo \$\$ >>'$W/crowd.overlap'
        echo \$\$ >>'$W/crowd.ran'; sleep 0.1; rmdir '$W/crowd.held'" >"$W/crowd.$i.out" 2>"$W/crowd.$i.err" &
    pids+=($!)
done
bad=0 notstarted=0 diag=
for ((i = 0; i < crowd; i++)); do
    wait_pid "${pids[i]}" 180
    rc=$?
    if ((rc != 0)); then
        bad=$((bad + 1))
        diag+="process $i: exit $rc: $(head -c 300 "$W/crowd.$i.err")"$'\n'
    fi
    grep -q "not started" "$W/crowd.$i.err" && notstarted=$((notstarted + 1))
done
root "SET GLOBAL max_connections = 151"
ran=$(wc -l <"$W/crowd.ran" 2>/dev/null || echo 0)
((notstarted == 0))
check $? "$crowd waiters, 5 connections: no grant wasted (\"COMMAND not started\": $notstarted)" "$diag"
((bad == 0 && ran == crowd))
check $? "$crowd waiters, 5 connections: every one ran its COMMAND ($ran) and exited 0 ($bad did not)" "$diag"
[[ ! -s $W/crowd.overlap ]]
check $? "$crowd waiters: no two COMMANDs overlapped" "$(cat "$W/crowd.overlap" 2>/dev/null)"

tap_done
