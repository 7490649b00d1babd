#!/usr/bin/env bash
# tests/cli/test_idle.sh — a server whose wait_timeout is shorter than the
# hold (issue 24 item 2), on a PRIVATE server this script starts and stops
# (by pid, through tools/rowlock-sandbox), with
# wait_timeout = interactive_timeout = 2 s:
#
#  1. per strategy, `rowlock run -l 6 NAME sleep 4`: the lock is held for
#     the whole 4 s and released without a word on stderr, exit 0. Before,
#     every for-update grant was lost 1-2 s into the hold (the holding
#     session idled out; exit 75), and the lease strategies printed
#     "warning: cannot release the lock ... Server has gone away (2006)"
#     (the lock's own connection idled out while the keeper renewed on its).
#  2. for-update: while the hold runs, another client cannot take the lock
#     (the session was not ended under the holder).
#
# Environment (from tests/CMakeLists.txt): ROWLOCK_BIN_DIR, ROWLOCK_SANDBOX.
# Output: "ok N - ..." lines, then "P passed, F failed".
# shellcheck source=tests/lib/private_server.bash
. "$(dirname "$0")/../lib/private_server.bash"

ps_start idle
R=("$RL" --defaults-file="$SB/my.cnf" --connect-timeout 2)
root() { mariadb --defaults-file="$SB/root.cnf" -N -B -e "$1"; }
"${R[@]}" migrate >/dev/null 2>"$W/migrate.err"
check $? "migrate on the private server" "$(cat "$W/migrate.err")"
root "SET GLOBAL wait_timeout = 2, GLOBAL interactive_timeout = 2"
check $? "wait_timeout = interactive_timeout = 2 on the server"

for s in insert for-update optimistic; do
    name="idle-$s"
    "${R[@]}" run -S "$s" -l 6 "$name" sh -c 'sleep 4; echo held' >"$W/$s.out" 2>"$W/$s.err" &
    hpid=$!
    # Half way through the hold, the lock is still held: a try fails.
    sleep 2.5
    "${R[@]}" run -S "$s" -n "$name" true 2>"$W/$s.try.err"
    trc=$?
    wait_pid "$hpid" 30
    hrc=$?
    check $((hrc == 0 ? 0 : 1)) "$s: a 4 s hold with a 6 s lease outlives a 2 s wait_timeout (exit 0)" \
        "exit $hrc" "$(cat "$W/$s.err")"
    check $((trc == 1 ? 0 : 1)) "$s: 2.5 s into the hold another client finds it busy" "exit $trc" \
        "$(cat "$W/$s.try.err")"
    if [[ $(cat "$W/$s.out") == held && ! -s $W/$s.err ]]; then
        pass "$s: COMMAND ran to its end and nothing was printed on stderr"
    else
        fail "$s: COMMAND's output or rowlock's stderr" "stdout: $(cat "$W/$s.out")" \
            "stderr: $(cat "$W/$s.err")"
    fi
done

tap_done
