#!/usr/bin/env bash
# tests/cli/test_ops.sh — issue 24 items 3, 4, 5 end to end, on a PRIVATE
# server this script starts and stops (tools/rowlock-sandbox), because it
# changes GLOBAL settings (read_only, max_connections) and drops tables:
#
#  1. transient server states: a waiter with -w waits them out (read-only,
#     max_connections full) and says what it waits for under --verbose; a
#     permanent one (access denied) still fails at once; -w 1 ends on time.
#  2. rowlock migrate repairs what the recorded version promises: each
#     object dropped in turn (lock table, sequence, queue, floor table,
#     floor row, holders table, a column) is recreated; --dry-run names it.
#  3. exit codes: `lock` and `run` give the same code for the same refusal
#     (78 for an unsupported combination), and `run --help` lists 78.
#
# Environment (tests/cli/cli.cmake): ROWLOCK_BIN_DIR, ROWLOCK_SANDBOX,
# ROWLOCK_TESTLIB_DIR (the test build of librowlock).
# Output: "ok N - ..." lines, then "P passed, F failed".
# shellcheck source=tests/lib/private_server.bash
. "$(dirname "$0")/../lib/private_server.bash"
now_ms() { date +%s%3N; }

ps_start ops
CNF=$W/my.cnf
cp "$SB/my.cnf" "$CNF"
T=ops_locks
R=(timeout -k 5 120 "$RL" --defaults-file="$CNF" --connect-timeout 2 --table "$T")
root() { mariadb --defaults-file="$SB/root.cnf" -N -B -e "$1"; }
db() { mariadb --defaults-file="$CNF" -N -B -e "$1"; }
"${R[@]}" migrate >/dev/null 2>"$W/migrate.err"
check $? "migrate on the private server" "$(cat "$W/migrate.err")"

# ---------------------------------------------------------------------------
# 1. transient server states
# ---------------------------------------------------------------------------
root "SET GLOBAL read_only = ON"
t0=$(now_ms)
"${R[@]}" run -w 30 --verbose ro-name true >"$W/ro.out" 2>"$W/ro.err" &
hp=$!
sleep 3
root "SET GLOBAL read_only = OFF"
wait "$hp"; rc=$?
took=$(($(now_ms) - t0))
((rc == 0 && took >= 2500)) && grep -q "read-only" "$W/ro.err"
check $? "read_only=ON for 3 s: a -w 30 waiter waits it out (exit $rc after ${took} ms) and says it waits for read-only" \
    "exit $rc" "$(head -n 5 "$W/ro.err")"

root "SET GLOBAL read_only = ON"
t0=$(now_ms)
"${R[@]}" run -w 1 ro-short true >"$W/ro1.out" 2>"$W/ro1.err"
rc=$?
took=$(($(now_ms) - t0))
root "SET GLOBAL read_only = OFF"
((rc == 69 && took >= 900 && took < 5000))
check $? "read_only=ON throughout: a -w 1 waiter gives up at its deadline (exit $rc after ${took} ms)" \
    "$(head -n 3 "$W/ro1.err")"

# max_connections full: its minimum, 10 slots, all taken by sleeping
# sessions for 3 s.
MAXC=$(root "SELECT @@GLOBAL.max_connections")
root "SET GLOBAL max_connections = 10"
sps=()
for ((k = 0; k < 10; k++)); do
    db "SELECT SLEEP(3)" >/dev/null 2>&1 &
    sps+=($!)
done
sleep 0.7
t0=$(now_ms)
"${R[@]}" run -w 30 --verbose mc-name true >"$W/mc.out" 2>"$W/mc.err"
rc=$?
took=$(($(now_ms) - t0))
wait "${sps[@]}"
root "SET GLOBAL max_connections = $MAXC"
((rc == 0 && took >= 1500)) && grep -q "1040" "$W/mc.err"
check $? "max_connections full for 3 s: a -w 30 waiter waits for a slot (exit $rc after ${took} ms, names 1040)" \
    "exit $rc" "$(head -n 5 "$W/mc.err")"

# A holder's renewals ride out read-only (6 s lease, renewed every 2 s,
# read-only for 1.5 s over the renewal at 2 s): COMMAND runs to its end,
# exit 0. (Also so before issue 24: a regression guard for the keeper.)
"${R[@]}" run -l 6 --verbose ro-holder sleep 5 >/dev/null 2>"$W/roh.err" &
hp=$!
sleep 1.5
root "SET GLOBAL read_only = ON"
sleep 1.5
root "SET GLOBAL read_only = OFF"
wait "$hp"; rc=$?
((rc == 0)) && grep -q "renew-retry" "$W/roh.err"
check $? "read_only=ON for 1.5 s under a holder with a 6 s lease: renewals retry, exit $rc" \
    "$(grep -v ' renewed' "$W/roh.err" | head -n 6)"

# A permanent condition still fails at once.
sed 's/^password=.*/password=wrong-password/' "$CNF" >"$W/bad.cnf"
t0=$(now_ms)
timeout -k 5 60 "$RL" --defaults-file="$W/bad.cnf" --table "$T" run -w 30 denied true >/dev/null 2>"$W/den.err"
rc=$?
took=$(($(now_ms) - t0))
((rc == 69 && took < 3000))
check $? "access denied with -w 30: fails at once (exit $rc after ${took} ms)" "$(head -n 3 "$W/den.err")"

# ---------------------------------------------------------------------------
# 2. migrate repairs what the recorded version promises
# ---------------------------------------------------------------------------
repair() { # repair DESC SQL
    root "USE rowlock; $2" 2>"$W/drop.err" || { fail "$1: drop it" "$(cat "$W/drop.err")"; return; }
    "${R[@]}" migrate --dry-run >"$W/dry.out" 2>"$W/dry.err"
    local drc=$?
    "${R[@]}" migrate >"$W/mig.out" 2>"$W/mig.err"
    local mrc=$?
    "${R[@]}" run -w 5 "repair-$RANDOM" true >/dev/null 2>"$W/use.err"
    local urc=$?
    ((drc == 69 && mrc == 0 && urc == 0)) && grep -q "missing" "$W/dry.err" && grep -q "^repaired:" "$W/mig.out"
    check $? "$1: --dry-run names it (69), migrate recreates it, run works again" \
        "dry-run $drc: $(cat "$W/dry.err")" "migrate $mrc: $(cat "$W/mig.out" "$W/mig.err")" \
        "run $urc: $(head -n 2 "$W/use.err")"
}
repair "dropped lock table" "DROP TABLE $T"
repair "dropped token sequence" "DROP SEQUENCE ${T}_token"
repair "dropped waiter queue" "DROP TABLE IF EXISTS ${T}_queue; DROP VIEW IF EXISTS ${T}_queue"
repair "dropped floor table" "DROP TABLE ${T}_floor"
repair "deleted floor row" "DELETE FROM ${T}_floor"
repair "dropped holders table" "DROP TABLE ${T}_hold"
repair "dropped permits column" "ALTER TABLE $T DROP COLUMN permits"
"${R[@]}" migrate >"$W/mig.out" 2>&1
[[ $? -eq 0 ]] && ! grep -q repaired "$W/mig.out"
check $? "an intact schema: migrate repairs nothing" "$(cat "$W/mig.out")"

# ---------------------------------------------------------------------------
# 3. one table of exit codes
# ---------------------------------------------------------------------------
"${R[@]}" run -S optimistic -s ex-name true >/dev/null 2>"$W/run.err"
rrc=$?
"${R[@]}" lock -S optimistic -s ex-name >/dev/null 2>"$W/lock.err"
lrc=$?
((rrc == 78 && lrc == 78))
check $? "an unsupported combination: run and lock both exit 78 (run $rrc, lock $lrc)" \
    "$(cat "$W/run.err" "$W/lock.err")"
# Shared locks and semaphores under the Galera cluster's lease rule (forced
# for the test through the test build of the library, which alone reads
# ROWLOCK_LEASE_RULE): granted, as on one server (issue 29 item 3).
LD_LIBRARY_PATH="$ROWLOCK_TESTLIB_DIR" ROWLOCK_LEASE_RULE=cluster "${R[@]}" run -s cl-name true >/dev/null 2>"$W/run.err"
rrc=$?
LD_LIBRARY_PATH="$ROWLOCK_TESTLIB_DIR" ROWLOCK_LEASE_RULE=cluster "${R[@]}" run --permits 2 cl-sem true >/dev/null 2>"$W/lock.err"
lrc=$?
((rrc == 0 && lrc == 0))
check $? "shared and semaphore under the cluster rule: run -s and run --permits exit 0 (run -s $rrc, --permits $lrc)" \
    "$(cat "$W/run.err" "$W/lock.err")"
# Downgrade is refused under the cluster rule (78); the shipped library
# ignores the variable: it cannot switch a client to another lease rule than
# its server's (here one server: the downgrade is done, 0).
dg() { # LIB: "" (shipped) or the test build's directory; prints unlock --downgrade's exit
    (
        export ROWLOCK_LEASE_RULE=cluster
        [[ -n $1 ]] && export LD_LIBRARY_PATH="$1"
        # Not under timeout(1): lock and unlock find the holder by their
        # parent, this shell.
        local L=("$RL" --defaults-file="$CNF" --connect-timeout 2 --table "$T")
        eval "$("${L[@]}" lock -n cl-dg-$$ 2>>"$W/dg.err")" || exit 90
        "${L[@]}" unlock --downgrade 2>>"$W/dg.err"
        rc=$?
        "${L[@]}" unlock 2>>"$W/dg.err"
        echo "$rc"
    )
}
drc_test=$(dg "$ROWLOCK_TESTLIB_DIR")
drc_shipped=$(dg "")
[[ $drc_test == 78 && $drc_shipped == 0 ]]
check $? "downgrade under the forced cluster rule exits 78; the installed library ignores ROWLOCK_LEASE_RULE (0) (test build $drc_test, installed $drc_shipped)" \
    "$(cat "$W/dg.err")"
for cmd in run lock; do
    "$RL" "$cmd" --help >"$W/help.out" 2>&1
    grep -Eq '^ *78 ' "$W/help.out" && grep -Eq '^ *69 ' "$W/help.out" && grep -Eq '^ *75 ' "$W/help.out"
    check $? "$cmd --help lists exit codes 69, 75 and 78" "$(grep -E '^ *[0-9]{2,3} ' "$W/help.out")"
done

# ---------------------------------------------------------------------------
# 4. messages after someone else changed the row, and after a failover
# ---------------------------------------------------------------------------
# A table of their own: independent of section 2's repairs.
T=ops_msgs
R=(timeout -k 5 120 "$RL" --defaults-file="$CNF" --connect-timeout 2 --table "$T")
"${R[@]}" migrate >/dev/null 2>"$W/migrate.err"
check $? "migrate $T" "$(cat "$W/migrate.err")"

# An operator DELETEs a live holder's row: the holder is told the row is
# gone, and nothing about a lease that did not end.
"${R[@]}" run -l 6 --verbose del-name sleep 20 >/dev/null 2>"$W/del.err" &
hp=$!
sleep 1.5
db "DELETE FROM $T WHERE name = 'del-name'"
wait "$hp"; rc=$?
((rc == 75)) && grep -q "row is gone" "$W/del.err" && ! grep -q "lease ended" "$W/del.err"
check $? "a held row DELETEd: exit 75, 'row is gone', no word of an ended lease (exit $rc)" \
    "$(grep -v ' renewed' "$W/del.err" | head -n 6)"

# An operator DELETEs it and another client takes it at once.
"${R[@]}" run -l 6 --verbose take-name sleep 20 >/dev/null 2>"$W/take.err" &
hp=$!
sleep 1.5
db "DELETE FROM $T WHERE name = 'take-name'"
"${R[@]}" run -n take-name sleep 4 >/dev/null 2>"$W/taker.err" &
tp=$!
wait "$hp"; rc=$?
wait "$tp"
((rc == 75)) && grep -q "another owner now" "$W/take.err" && ! grep -q "lease ended" "$W/take.err"
check $? "a held row taken by another owner: exit 75, 'has another owner now', no word of an ended lease (exit $rc)" \
    "$(grep -v ' renewed' "$W/take.err" | head -n 6)" "$(head -n 3 "$W/taker.err")"

# A failover between grant and release (every session of the account
# killed while COMMAND runs): the release reconnects and succeeds, with no
# warning; the lock is free afterwards.
KILLALL="SELECT CONCAT('KILL ', ID, ';') FROM information_schema.PROCESSLIST WHERE USER = 'rowlock' AND ID <> CONNECTION_ID()"
"${R[@]}" run -l 10 fo-name sh -c "mariadb --defaults-file='$CNF' -N -B -e \"$KILLALL\" | mariadb --defaults-file='$SB/root.cnf' rowlock" \
    >/dev/null 2>"$W/fo.err"
rc=$?
"${R[@]}" status fo-name >/dev/null 2>&1
src=$?
((rc == 0 && src == 1)) && ! grep -q "cannot release" "$W/fo.err"
check $? "release after a failover: reconnects and releases without a warning (run $rc, status $src)" \
    "$(head -n 5 "$W/fo.err")"

tap_done
