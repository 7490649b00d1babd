#!/usr/bin/env bash
# tests/replica/test_replica.sh MODE — tools/rowlock-replica on a primary-replica pair
# (MODE async or semisync; the pair was started by the ctest fixture): the
# pair replicates (a lock granted on the primary is visible on the replica),
# replica-pause-sql makes the replica miss a later grant, primary-kill +
# promote makes the replica writable, and `rowlock run` with the host list
# primary,replica reaches the promoted server and runs its COMMAND.  With
# semisync, the primary runs semi-synchronous and the replica acknowledges.
#
# Failover safety (src/epoch.c): `rowlock run` holders of A (replicated)
# and C (granted after the replica's SQL thread was paused: lost in the
# promotion) on the host list, waiters for A, C and D queued during the
# failover; the history of critical sections shows no double grant and
# growing tokens, both old holders exit 75 before a new holder starts, and
# the promoted server took over the table's epoch row.  Times from the kill
# to the end of promote and to the first grant on the promoted server are
# printed as "# " lines.
#
# Environment (set by tests/replica/replica.cmake): ROWLOCK_BIN_DIR, ROWLOCK_REPLICA
# (the script), ROWLOCK_REPLICA_DIR.  Own lock table (replica_locks).
# Output: "ok N - ..." / "not ok N - ..." lines, then "P passed, F failed".
# shellcheck disable=SC2015,SC2016,SC2317 # A && pass || fail; inner shells; trap
set -u
export LC_ALL=C
MODE=${1:?usage: test_replica.sh async|semisync}
: "${ROWLOCK_BIN_DIR:?set ROWLOCK_BIN_DIR}"
: "${ROWLOCK_REPLICA:?set ROWLOCK_REPLICA}"
: "${ROWLOCK_REPLICA_DIR:?set ROWLOCK_REPLICA_DIR}"
RL=$ROWLOCK_BIN_DIR/rowlock
RP=$ROWLOCK_REPLICA
D=$ROWLOCK_REPLICA_DIR
T=replica_locks
. "$(dirname "$0")/../lib/tap.bash"
# Holders still running get SIGTERM first: `rowlock run` then stops its
# COMMAND (a SIGKILLed run would leave it to its watchdog, up to a lease);
# tap_cleanup then KILLs whatever is left.
tap_cleanup_first() {
    local p k
    for p in $(jobs -pr); do kill -TERM "$p" 2>/dev/null; done
    for ((k = 0; k < 50 && $(jobs -pr | wc -l) > 0; k++)); do sleep 0.1; done
}
tap_workdir replica

# check_exit DESC EXPECTED_STATUS ACTUAL_STATUS [diagnostics...]
check_exit() {
    local d=$1 want=$2 got=$3
    shift 3
    if [[ $got == "$want" ]]; then pass "$d"; else fail "$d" "exit $got, expected $want" "$@"; fi
}
finish() {
    tap_done
    exit
}
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

env_out=$("$RP" env "$D" 2>&1) || { fail "rowlock-replica env" "$env_out"; finish; }
eval "$env_out"
PRI=$ROWLOCK_REPLICA_PRIMARY_CNF REP=$ROWLOCK_REPLICA_REPLICA_CNF BOTH=$ROWLOCK_REPLICA_BOTH_CNF
# root_sql primary|replica ARGS...: admin access over the server's socket
root_sql() { local n=$1; shift; mariadb --defaults-file="$D/root-$n.cnf" -N -B "$@"; }
# status_on CNF NAME: 0 held, 1 free
status_on() { "$RL" --defaults-file="$1" --table=$T status "$2" >/dev/null 2>&1; }
# wait_for SECONDS COMMAND...: 0 once COMMAND succeeds
wait_for() {
    local k n=$(($1 * 10))
    shift
    for ((k = 0; k < n; k++)); do
        "$@" && return 0
        sleep 0.1
    done
    return 1
}
# A name held on the primary by a background `rowlock run` for LEASE seconds
# (once the primary is gone, it loses the lock and exits 75 within the
# lease). Sets HOLD_PID.
declare -A HOLDER=()
hold() { # NAME LEASE OUTFILE
    "$RL" --defaults-file="$PRI" --table=$T run -n -l "$2" "$1" sleep 120 >"$3" 2>&1 &
    HOLD_PID=$!
}
# ended PID: our child PID has exited (gone, or a zombie not yet waited for)
ended() {
    local st
    st=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    st=${st##*) }
    [[ ${st%% *} == Z ]]
}

# ---- the pair as started ------------------------------------------------------
out=$("$RP" status "$D" 2>&1)
rc=$?
[[ $rc == 0 && $out == *"primary running "*" role primary read_only OFF "* &&
   $out == *"replica running "*" role replica read_only ON "*" io Yes sql Yes "* ]] &&
    pass "status: primary writable, replica read-only and running both threads" ||
    fail "status: primary writable, replica read-only and running both threads" "exit $rc" "$out"
[[ $ROWLOCK_REPLICA_SEMISYNC == "$([[ $MODE == semisync ]] && echo 1 || echo 0)" ]] &&
    pass "env: ROWLOCK_REPLICA_SEMISYNC matches $MODE" || fail "env: ROWLOCK_REPLICA_SEMISYNC matches $MODE" "$env_out"

out=$("$RL" --defaults-file="$PRI" --table=$T migrate 2>&1)
check_exit "migrate on the primary" 0 $? "$out"
out=$("$RP" sync "$D" 2>&1)
check_exit "sync: the replica applies the migration" 0 $? "$out"
"$RL" --defaults-file="$REP" --table=$T status nothing-here >/dev/null 2>&1
check_exit "the lock table replicated (status on the replica: free)" 1 $?
out=$("$RL" --defaults-file="$REP" --table=$T run -n -w 0 on-replica true 2>&1)
rc=$?
[[ $rc != 0 && $out == *1290* ]] && pass "the replica refuses rowlock's writes (read_only, 1290)" ||
    fail "the replica refuses rowlock's writes (read_only, 1290)" "exit $rc" "$out"

if [[ $MODE == semisync ]]; then
    st=$(root_sql primary -e "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
        WHERE VARIABLE_NAME IN ('RPL_SEMI_SYNC_MASTER_STATUS', 'RPL_SEMI_SYNC_MASTER_CLIENTS',
                                'RPL_SEMI_SYNC_MASTER_YES_TX', 'RPL_SEMI_SYNC_MASTER_NO_TX')" 2>&1)
    get() { awk -v k="$1" '$1 == k { print $2 }' <<<"$st"; }
    [[ $(get RPL_SEMI_SYNC_MASTER_STATUS) == ON && $(get RPL_SEMI_SYNC_MASTER_CLIENTS) == 1 ]] &&
        pass "semisync: Rpl_semi_sync_master_status ON, one semi-sync replica" ||
        fail "semisync: Rpl_semi_sync_master_status ON, one semi-sync replica" "$st"
    [[ $(get RPL_SEMI_SYNC_MASTER_YES_TX) -gt 0 && $(get RPL_SEMI_SYNC_MASTER_NO_TX) == 0 ]] &&
        pass "semisync: the replica acknowledged every commit (migrate: yes_tx $(get RPL_SEMI_SYNC_MASTER_YES_TX), no_tx 0)" ||
        fail "semisync: the replica acknowledged every commit" "$st"
fi

out=$("$RL" --defaults-file="$BOTH" --table=$T run -n via-list echo ran 2>&1)
[[ $? == 0 && $out == ran ]] && pass "run with the host list primary,replica runs COMMAND (on the primary)" ||
    fail "run with the host list primary,replica runs COMMAND (on the primary)" "$out"

# ---- the failover epoch: a short max lease for this table ---------------------------
# Grants after a promotion wait one max lease (src/epoch.c); 3 s keeps the
# test short. Set on the primary, it replicates like the rest of the row.
MAXL=3000
out=$(mariadb --defaults-file="$PRI" -N -B -e "UPDATE ${T}_epoch SET max_lease_ms = $MAXL WHERE id = 1" 2>&1)
check_exit "max_lease_ms = $MAXL on the primary" 0 $? "$out"
"$RP" sync "$D" >/dev/null 2>&1
out=$("$RL" --defaults-file="$PRI" --table=$T run -n -l 4 too-long true 2>&1)
rc=$?
[[ $rc != 0 && $out == *"over the longest lease"* ]] && pass "a lease over the table's max lease is refused" ||
    fail "a lease over the table's max lease is refused" "exit $rc" "$out"

# History of critical sections ($W/hist), one line per event:
#   NAME start EPOCH_SECONDS TOKEN   written by COMMAND when it starts (the grant is in hand)
#   NAME exit EPOCH_SECONDS RC       written when its `rowlock run` has exited (COMMAND is gone)
# A holder: `rowlock run` on the host list primary,replica (so its keeper
# reconnects to the replica, and to the promoted server), COMMAND sleeping
# SLEEP seconds. Sets HOLD_PID (the subshell's).
hist=$W/hist
: >"$hist"
holder() { # NAME WAIT SLEEP OUTFILE
    (
        "$RL" --defaults-file="$BOTH" --table=$T run -w "$2" -l 3 "$1" \
            sh -c 'echo "$ROWLOCK_NAME start $(date +%s.%N) $ROWLOCK_TOKEN" >>"$0"; sleep "$1"' "$hist" "$3" >"$4" 2>&1
        rc=$?
        echo "$1 exit $(date +%s.%N) $rc" >>"$hist"
        exit $rc
    ) &
    HOLD_PID=$!
}
started() { grep -q "^$1 start " "$hist"; }

# ---- a grant on the primary replicates ------------------------------------------
holder A 0 120 "$W/A.out"
HOLDER[A]=$HOLD_PID
wait_for 10 started A
check_exit "lock A granted on the primary" 0 $? "$(cat "$W/A.out")"
"$RP" sync "$D" >/dev/null 2>&1
tp=$("$RL" --defaults-file="$PRI" --table=$T status --json A 2>/dev/null | sed -n 's/.*"token":\([0-9]*\).*/\1/p')
tr=$("$RL" --defaults-file="$REP" --table=$T status --json A 2>/dev/null | sed -n 's/.*"token":\([0-9]*\).*/\1/p')
[[ -n $tp && $tp == "$tr" ]] && pass "lock A is held on the replica too, same token" ||
    fail "lock A is held on the replica too, same token" "primary token '$tp', replica token '$tr'"

# ---- the replica misses a later grant ---------------------------------------------
out=$("$RP" replica-pause-sql "$D" 2>&1)
check_exit "replica-pause-sql" 0 $? "$out"
holder C 0 120 "$W/C.out"
HOLDER[C]=$HOLD_PID
wait_for 10 started C
check_exit "lock C granted on the primary" 0 $? "$(cat "$W/C.out")"
out=$("$RP" sync --received --timeout 10 "$D" 2>&1)
check_exit "sync --received: the replica received C's grant" 0 $? "$out"
out=$("$RP" sync --timeout 1 "$D" 2>&1)
check_exit "sync: ... but does not apply it (times out)" 1 $? "$out"
status_on "$REP" C
check_exit "lock C is not held on the paused replica" 1 $?

# ---- primary-kill, waiters on the host list, promote ------------------------------
t_kill=$(now)
out=$("$RP" primary-kill "$D" 2>&1)
check_exit "primary-kill" 0 $? "$out"
out=$("$RP" status "$D" 2>&1)
[[ $? == 1 && $out == *"primary not running"* ]] && pass "status: the primary is down (exit 1)" ||
    fail "status: the primary is down (exit 1)" "$out"
# Waiters for A, C and a new name D: they wait on the read-only replica
# (1290 is transient) until the promotion, then for the failover epoch.
holder A 60 1 "$W/A2.out"
w_a=$HOLD_PID
holder C 60 1 "$W/C2.out"
w_c=$HOLD_PID
holder D 60 1 "$W/D.out"
w_d=$HOLD_PID
out=$("$RP" promote "$D" 2>&1)
rc=$?
t_prom=$(now)
check_exit "promote" 0 $rc "$out"
[[ $out == *"are discarded"* ]] && pass "promote says the received, unapplied transactions are discarded" ||
    fail "promote says the received, unapplied transactions are discarded" "$out"
printf '# from primary-kill to the end of promote: %s s\n' "$(secs "$t_kill" "$t_prom")"
out=$("$RP" status "$D" 2>&1)
[[ $out == *"replica running "*" role primary-promoted read_only OFF "* && $out != *" io "* ]] &&
    pass "status: the replica is the primary (writable, replicating from nobody)" ||
    fail "status: the replica is the primary (writable, replicating from nobody)" "$out"

for n in A C D; do
    v=w_${n,,}
    wait "${!v}"
    check_exit "the waiter for $n on the host list is granted on the promoted server" 0 $? "$(cat "$W/${n}2.out" "$W/$n.out" 2>/dev/null)"
done
for n in A C; do
    if wait_for 15 ended "${HOLDER[$n]}"; then
        wait "${HOLDER[$n]}"
        check_exit "the old holder of $n (rowlock run on the killed primary) lost it: exit 75" 75 $? "$(cat "$W/$n.out")"
    else
        fail "the old holder of $n (rowlock run on the killed primary) lost it: exit 75" "still running"
    fi
done
first=$(awk '$2 == "start" && $3 > t { print $3 }' t="$t_kill" "$hist" | sort -n | head -1)
[[ -n $first ]] && printf '# from the end of promote to the first grant on the promoted server (max lease %s ms): %s s\n' \
    "$MAXL" "$(secs "$t_prom" "$first")"
[[ -n $first ]] && printf '# from primary-kill to the first grant on the promoted server: %s s\n' "$(secs "$t_kill" "$first")"

# The history: per name, no critical section starts before the one before it
# has ended (its `rowlock run` exited), and tokens only grow.
problems=$(awk '
    $2 == "start" { s[$1, ++n[$1]] = $3; tok[$1, n[$1]] = $4 }
    $2 == "exit"  { e[$1, ++m[$1]] = $3 }
    END {
        for (k in n) for (i = 2; i <= n[k]; i++) {
            if (!((k, i - 1) in e)) { print k ": section " i " started while section " i - 1 " never ended"; continue }
            if (s[k, i] <= e[k, i - 1]) printf "%s: double grant: section %d started at %s, section %d ended at %s\n", k, i, s[k, i], i - 1, e[k, i - 1]
            if (tok[k, i] + 0 <= tok[k, i - 1] + 0) printf "%s: token %s after %s\n", k, tok[k, i], tok[k, i - 1]
        }
    }' "$hist")
[[ -z $problems ]] && pass "history: no double grant across the failover, tokens grow (A, C: old and new holders)" ||
    fail "history: no double grant across the failover, tokens grow" "$problems" "$(cat "$hist")"
[[ $(grep -c " start " "$hist") == 5 ]] && pass "history: five critical sections (A, C on each server, D)" ||
    fail "history: five critical sections" "$(cat "$hist")"
out=$("$RL" --defaults-file="$BOTH" --table=$T run -n -l 3 after echo ran 2>&1)
[[ $? == 0 && $out == ran ]] && pass "run -n with the host list reaches the promoted server and runs COMMAND" ||
    fail "run -n with the host list reaches the promoted server and runs COMMAND" "$out"
out=$(mariadb --defaults-file="$REP" -N -B -e "SELECT epoch, server = CONCAT(@@server_id, '/', @@server_uid) FROM ${T}_epoch" 2>&1)
[[ $out == $'1\t1' ]] && pass "the promoted server took over the epoch row (epoch 1, its identity)" ||
    fail "the promoted server took over the epoch row (epoch 1, its identity)" "$out"

# ---- the old primary comes back read-only -------------------------------------------
out=$("$RP" primary-start "$D" 2>&1)
check_exit "primary-start after the promotion" 0 $? "$out"
out=$("$RP" status "$D" 2>&1)
[[ $? == 0 && $out == *"primary running "*" role old-primary read_only ON "* ]] &&
    pass "status: the old primary is back, read-only" || fail "status: the old primary is back, read-only" "$out"

finish
