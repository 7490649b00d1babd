#!/usr/bin/env bash
# tests/cli/test_stop.sh — `rowlock run` stops COMMAND before its lease could
# end, however slowly COMMAND stops (issue 24 item 0), on a PRIVATE server
# this script starts and stops (by pid, through tools/rowlock-sandbox):
#
#  1. per lease strategy (insert, optimistic): renewals are cut off (the
#     server read-only for the rowlock account) while COMMAND runs; COMMAND
#     ignores SIGTERM (or takes 3 s to honour it) and writes a timestamp
#     every 10 ms. Its last timestamp must come before the lease's end on
#     the server (expires_at of its row) and before the next holder's grant;
#     rowlock exits 75. The old schedule (SIGKILL 5 s after a SIGTERM sent
#     1 s before the end) ran such a COMMAND up to 4 s into the next grant.
#  2. --kill-after longer than half the lease allows is refused at start
#     (64, one line), before anything is acquired.
#  3. only the supervisor is stopped (SIGSTOP of the rowlock process, not
#     its group) while COMMAND runs on: COMMAND is killed before the lease
#     could end, by the watchdog process, and the next holder's grant
#     comes after its last timestamp. for-update too (issue 24 item 1): the
#     stopped supervisor's keeper no longer keeps the session alive, the
#     server ends it after the lease, and the next holder is granted while
#     the supervisor is still stopped. "tree": the ticker is COMMAND's own
#     child (insert): the watchdog kills what COMMAND started too.
#  4. for-update: the supervisor is killed; the watchdog kills COMMAND at
#     once (the lock closed with the supervisor's session).
#
# Environment (from tests/CMakeLists.txt): ROWLOCK_BIN_DIR, ROWLOCK_SANDBOX.
# Output: "ok N - ..." lines, then "P passed, F failed".
# shellcheck disable=SC2016 # single quotes: expanded by the inner shells
tap_cleanup_first() {
    local p
    for p in $(jobs -pr); do kill -CONT "$p" 2>/dev/null; done
    pkill -KILL -f "rowlock-stop-tick $W" 2>/dev/null
}
# shellcheck source=tests/lib/private_server.bash
. "$(dirname "$0")/../lib/private_server.bash"
# lt A B: A < B, both decimal seconds
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }

ps_start stop
R=("$RL" --defaults-file="$SB/my.cnf" --connect-timeout 2)
root() { mariadb --defaults-file="$SB/root.cnf" -N -B -e "$1"; }
"${R[@]}" migrate >/dev/null 2>"$W/migrate.err"
check $? "migrate on the private server" "$(cat "$W/migrate.err")"

# COMMAND: a shell that writes the time every 10 ms to $1/ticks until it is
# killed; on SIGTERM it notes the time in $1/term and, per $2, ignores it
# ("ignore") or takes 3 s to stop ("slow"). The marker argument lets cleanup
# find strays.
TICK='
    d=$1 how=$2
    case $how in
    ignore) trap "date +%s.%N > \"$d/term\"" TERM ;;
    slow)   trap "date +%s.%N > \"$d/term\"; end=\$((SECONDS + 3)); while [ \$SECONDS -lt \$end ]; do date +%s.%N >> \"$d/ticks\"; sleep 0.01; done; exit 0" TERM ;;
    esac
    while :; do date +%s.%N >> "$d/ticks"; sleep 0.01; done'

# ---------------------------------------------------------------------------
# 1. renewals cut off; COMMAND slow to stop or deaf to SIGTERM
# ---------------------------------------------------------------------------
for s in insert optimistic; do
    for how in ignore slow; do
        D=$W/$s-$how
        mkdir -p "$D"
        name="stop-$s-$how"
        "${R[@]}" run -S "$s" -l 3 "$name" sh -c "$TICK" rowlock-stop-tick "$D" "$how" 2>"$D/err" &
        hpid=$!
        if ! wait_file "$D/ticks" 30; then
            fail "$s/$how: holder started" "$(head -c 400 "$D/err")"
            kill -KILL "$hpid" 2>/dev/null
            continue
        fi
        sleep 0.5
        root "SET GLOBAL read_only = ON"
        # The lease's end on the server as the holder left it, read while
        # nothing can renew it (renewals now fail with 1290).
        sleep 0.2
        exp=$(root "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires_at) / 1000000 FROM rowlock.rowlock_locks WHERE name = '$name'")
        # Read-only until well past that end, then a waiter takes the lock.
        sleep 3.5
        root "SET GLOBAL read_only = OFF"
        "${R[@]}" run -S "$s" -w 20 -l 3 "$name" sh -c 'date +%s.%N > "$1/next"' sh "$D" 2>"$D/next.err"
        nrc=$?
        wait_pid "$hpid" 20
        hrc=$?
        last=$(tail -n 1 "$D/ticks")
        next=$(cat "$D/next" 2>/dev/null || echo 0)
        check $((hrc == 75 ? 0 : 1)) "$s/$how: rowlock run exits 75 after losing its renewals" \
            "exit $hrc" "$(tail -n 5 "$D/err")"
        check $((nrc == 0 ? 0 : 1)) "$s/$how: the next holder gets the lock" "exit $nrc" "$(cat "$D/next.err")"
        [[ -s $D/term ]]
        check $? "$s/$how: COMMAND got SIGTERM first" "$(tail -n 5 "$D/err")"
        if [[ -n $exp ]] && lt "$last" "$exp"; then
            pass "$s/$how: COMMAND's last act came $(ms "$last" "$exp") ms before its lease could end"
        else
            fail "$s/$how: COMMAND ran until $last, the lease ended at ${exp:-?} (+$(ms "${exp:-0}" "$last") ms)" \
                "$(tail -n 5 "$D/err")"
        fi
        if lt "$last" "$next"; then
            pass "$s/$how: COMMAND was gone before the next grant"
        else
            fail "$s/$how: COMMAND ran $(ms "$next" "$last") ms into the next holder's grant" "$(tail -n 5 "$D/err")"
        fi
    done
done

# ---------------------------------------------------------------------------
# 2. --kill-after that does not fit in the lease is refused at start
# ---------------------------------------------------------------------------
out=$("${R[@]}" run -l 3 --kill-after 5 stop-refused true 2>&1)
rc=$?
check $((rc == 64 ? 0 : 1)) "--kill-after 5 with a 3 s lease: exit 64" "exit $rc" "$out"
[[ $(wc -l <<<"$out") -eq 1 && $out == *"too short for --kill-after"* ]]
check $? "... with one line saying why" "$out"
held=$(root "SELECT COUNT(*) FROM rowlock.rowlock_locks WHERE name = 'stop-refused' AND owner IS NOT NULL")
check $((held == 0 ? 0 : 1)) "... and nothing acquired" "rows: $held"
"${R[@]}" run -l 3 -k 1 stop-fits true 2>"$W/fits.err"
check $? "--kill-after 1 with a 3 s lease runs" "$(cat "$W/fits.err")"

# ---------------------------------------------------------------------------
# 3. the supervisor alone is stopped; COMMAND runs on
# ---------------------------------------------------------------------------
for s in insert optimistic for-update tree; do
    D=$W/$s-stopped
    mkdir -p "$D"
    name="stop-$s-sup"
    st=$s
    cmd=(sh -c "$TICK" rowlock-stop-tick "$D" run)
    if [[ $s == tree ]]; then # the ticker is a grandchild: COMMAND's own child
        st=insert
        cmd=(sh -c 'sh -c "$1" rowlock-stop-tick "$2" run & wait' sh "$TICK" "$D")
    fi
    "${R[@]}" run -S "$st" -l 2 "$name" "${cmd[@]}" 2>"$D/err" &
    hpid=$!
    if ! wait_file "$D/ticks" 30; then
        fail "$s/supervisor stopped: holder started" "$(head -c 400 "$D/err")"
        kill -KILL "$hpid" 2>/dev/null
        continue
    fi
    sleep 0.3
    kill -STOP "$hpid"
    "${R[@]}" run -S "$st" -w 20 -l 2 "$name" sh -c 'date +%s.%N > "$1/next"' sh "$D" 2>"$D/next.err"
    nrc=$?
    # A COMMAND still running ticks every 10 ms: give it time to show.
    sleep 0.3
    last=$(tail -n 1 "$D/ticks")
    next=$(cat "$D/next" 2>/dev/null || echo 0)
    kill -CONT "$hpid"
    wait_pid "$hpid" 20
    hrc=$?
    check $((nrc == 0 ? 0 : 1)) "$s/supervisor stopped: the next holder gets the lock" "exit $nrc" \
        "$(cat "$D/next.err")"
    if lt "$last" "$next"; then
        pass "$s/supervisor stopped: COMMAND was killed $(ms "$last" "$next") ms before the next grant"
    else
        fail "$s/supervisor stopped: COMMAND ran $(ms "$next" "$last") ms into the next holder's grant" \
            "$(tail -n 5 "$D/err")"
    fi
    check $((hrc == 75 ? 0 : 1)) "$s/supervisor stopped: rowlock run exits 75 once resumed" "exit $hrc" \
        "$(tail -n 5 "$D/err")"
done

# ---------------------------------------------------------------------------
# 4. for-update: the supervisor is killed; its session (the lock) closes with
#    it and the server grants the next waiter at once, so the watchdog kills
#    COMMAND at once too (before, it waited for the last deadline: most of
#    the lease). The order against the next grant is a race of a local
#    SIGKILL with a server round trip: only the token covers those
#    microseconds, so this checks the kill, not the order.
# ---------------------------------------------------------------------------
D=$W/fu-killed
mkdir -p "$D"
"${R[@]}" run -S for-update -l 10 stop-fu-killed sh -c "$TICK" rowlock-stop-tick "$D" run 2>"$D/err" &
hpid=$!
if wait_file "$D/ticks" 30; then
    sleep 0.3
    kill -KILL "$hpid"
    t_kill=$(date +%s.%N)
    wait "$hpid" 2>/dev/null
    sleep 1.5
    last=$(tail -n 1 "$D/ticks")
    if lt "$last" "$(awk -v a="$t_kill" 'BEGIN { printf "%.6f", a + 1.0 }')"; then
        pass "for-update/supervisor killed: COMMAND died with it ($(ms "$t_kill" "$last") ms after the kill)"
    else
        fail "for-update/supervisor killed: COMMAND ran $(ms "$t_kill" "$last") ms after its supervisor's death"
    fi
else
    fail "for-update/supervisor killed: holder started" "$(head -c 400 "$D/err")"
    kill -KILL "$hpid" 2>/dev/null
fi

tap_done
