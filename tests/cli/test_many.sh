#!/usr/bin/env bash
# tests/cli/test_many.sh — several names at once (issue 28 item 2):
# `rowlock run -N A -N B COMMAND` and `eval "$(rowlock lock -N A -N B)"`
# take every name or none; COMMAND's environment and lock's assignments
# carry every name and token; unlock releases all; losing one name loses the
# run (exit 75); sets given in opposite orders from concurrent loops never
# deadlock and never let two holders in.
#
# Environment (set by tests/cli/cli.cmake): ROWLOCK_BIN_DIR, ROWLOCK_DEFAULTS_FILE.
# Own lock table (cli_many_locks) and names prefixed with this pid.
# shellcheck disable=SC2016 # single quotes: expanded by the inner shells
set -u
export LC_ALL=C
: "${ROWLOCK_BIN_DIR:?set ROWLOCK_BIN_DIR}"
: "${ROWLOCK_DEFAULTS_FILE:?set ROWLOCK_DEFAULTS_FILE}"
export ROWLOCK_DEFAULTS_FILE
RL=$ROWLOCK_BIN_DIR/rowlock
T=cli_many_locks
P="mn$$-"
export RL T
# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"
tap_workdir many

check_exit() {
    local d=$1 want=$2 got=$3
    shift 3
    if [[ $got == "$want" ]]; then pass "$d"; else fail "$d" "exit $got, expected $want" "$@"; fi
}
rl() { "$RL" --table=$T "$@"; }
wait_file() {
    local k
    for ((k = 0; k < ${2:-100}; k++)); do
        [[ -e $1 ]] && return 0
        sleep 0.1
    done
    return 1
}

rl migrate >/dev/null || { fail "migrate $T"; printf '%d passed, %d failed\n' 0 1; exit 1; }

a="${P}a" b="${P}b it's" c="${P}c"

# ---- run: every name held while COMMAND runs, its environment -----------------
out=$(ROWLOCK_NAME=inherited rl run -N "$b" -N "$a" sh -c '
    echo "count=$ROWLOCK_COUNT"
    echo "name=${ROWLOCK_NAME-unset}"
    echo "token=${ROWLOCK_TOKEN-unset}"
    echo "n1=$ROWLOCK_NAME_1"
    echo "n2=$ROWLOCK_NAME_2"
    echo "t1=$ROWLOCK_TOKEN_1"
    echo "t2=$ROWLOCK_TOKEN_2"
    echo "tokens=$ROWLOCK_TOKENS"
    "$RL" --table=$T run -n "$1" true; echo "a_busy=$?"
    "$RL" --table=$T run -n "$2" true; echo "b_busy=$?"
' sh "$a" "$b" 2>"$W/run.err")
rc=$?
get() { sed -n "s/^$1=//p" <<<"$out" | head -1; }
check_exit "run -N B -N A: COMMAND runs (0)" 0 "$rc" "$out" "$(cat "$W/run.err")"
[[ $(get count) == 2 && $(get name) == unset && $(get token) == unset ]]
check $? "run, two names: ROWLOCK_COUNT=2, no ROWLOCK_NAME/ROWLOCK_TOKEN (an inherited one removed)" "$out"
[[ $(get n1) == "$b" && $(get n2) == "$a" ]]
check $? "run, two names: ROWLOCK_NAME_1/_2 in the order given (a quote survives)" "$out"
[[ $(get t1) =~ ^[0-9]+$ && $(get t2) =~ ^[0-9]+$ && $(get tokens) == "$(get t1) $(get t2)" ]]
check $? "run, two names: ROWLOCK_TOKEN_1/_2 and ROWLOCK_TOKENS" "$out"
[[ $(get a_busy) == 1 && $(get b_busy) == 1 ]]
check $? "run, two names: both held while COMMAND runs (another run -n conflicts: 1)" "$out"
rl run -n -N "$a" -N "$b" true 2>"$W/after.err"
check_exit "run, two names: both free after COMMAND ended" 0 $? "$(cat "$W/after.err")"

out=$(rl run -N "$c" -c 'echo "$ROWLOCK_COUNT $ROWLOCK_NAME $ROWLOCK_NAME_1 $ROWLOCK_TOKENS $ROWLOCK_TOKEN"' 2>"$W/one.err")
read -r cnt nm nm1 toks tok <<<"$out"
[[ $cnt == 1 && $nm == "$c" && $nm1 == "$c" && $toks == "$tok" && $tok =~ ^[0-9]+$ ]]
check $? "run -N NAME -c CMD: one name keeps ROWLOCK_NAME/ROWLOCK_TOKEN, plus the numbered ones" "$out" \
    "$(cat "$W/one.err")"

# An inner run with fewer names than an outer one: the outer's numbered
# variables past the inner's count are gone (found by a review).
out=$(ROWLOCK_NAME_2=outer ROWLOCK_TOKEN_2=7 ROWLOCK_NAME_3=outer rl run -N "$c" \
    -c 'echo "${ROWLOCK_NAME_2-unset} ${ROWLOCK_TOKEN_2-unset} ${ROWLOCK_NAME_3-unset} $ROWLOCK_COUNT"' 2>"$W/inner.err")
[[ $out == "unset unset unset 1" ]]
check $? "run -N NAME: numbered variables inherited past its one name are removed" "$out" "$(cat "$W/inner.err")"

# ---- all or none ------------------------------------------------------------------
rl run -N "$c" sh -c 'touch "$1/held"; while [ ! -e "$1/done" ]; do sleep 0.1; done' sh "$W" 2>"$W/h.err" &
hp=$!
wait_file "$W/held" 100 || fail "the holder of C started" "$(cat "$W/h.err")"
rl run -w 0.5 -N "$a" -N "$c" -N "$b" echo "never" >"$W/x.out" 2>"$W/x.err"
check_exit "run -w 0.5 -N A -N C -N B while C is held: the conflict code (1)" 1 $? "$(cat "$W/x.err")"
[[ ! -s $W/x.out ]]
check $? "... and COMMAND did not run" "$(cat "$W/x.out")"
rl run -n -N "$a" -N "$b" true 2>"$W/ab.err"
check_exit "... and A and B, taken before C, were given back (run -n -N A -N B: 0)" 0 $? "$(cat "$W/ab.err")"
touch "$W/done"
wait "$hp"

# ---- usage ------------------------------------------------------------------------
rl run -S for-update -N "$a" -N "$b" true 2>"$W/fu.err"
check_exit "run -S for-update with two names: usage (64)" 64 $? "$(cat "$W/fu.err")"
grep -q "for-update strategy takes one name" "$W/fu.err"
check $? "... and says why" "$(cat "$W/fu.err")"
rl lock -N "$a" "$b" 2>"$W/extra.err"
check_exit "lock -N A B (an operand besides -N): usage (64)" 64 $? "$(cat "$W/extra.err")"
rl run -N "$a" -N "$a" true 2>"$W/dup.err"
check_exit "run -N A -N A: refused (64: a name twice)" 64 $? "$(cat "$W/dup.err")"
grep -q "in the set twice" "$W/dup.err"
check $? "... and says so" "$(cat "$W/dup.err")"
"$RL" run --help >"$W/help.out" 2>&1 && grep -q -- "-N, --name=NAME" "$W/help.out" && "$RL" lock --help 2>&1 |
    grep -q -- "-N, --name=NAME"
check $? "run --help and lock --help show -N/--name"

# ---- lock: eval, every name held, unlock releases all ------------------------------
out=$(timeout 60 bash -c '
    eval "$("$RL" --table=$T lock -w 5 -N "$1" -N "$2")" || exit 90
    echo "count=$ROWLOCK_COUNT"
    echo "name=${ROWLOCK_NAME-unset}"
    echo "n1=$ROWLOCK_NAME_1"
    echo "n2=$ROWLOCK_NAME_2"
    echo "tokens=$ROWLOCK_TOKENS"
    "$RL" --table=$T run -n "$1" true; echo "a_busy=$?"
    "$RL" --table=$T run -n "$2" true; echo "b_busy=$?"
    "$RL" unlock --check; echo "check=$?"
    "$RL" unlock; echo "unlock=$?"
    "$RL" --table=$T run -n "$1" true; echo "a_free=$?"
    "$RL" --table=$T run -n "$2" true; echo "b_free=$?"
' _ "$a" "$b" 2>"$W/lock.err")
rc=$?
check_exit "lock -N A -N B: eval succeeds" 0 "$rc" "$out" "$(cat "$W/lock.err")"
[[ $(get count) == 2 && $(get name) == unset && $(get n1) == "$a" && $(get n2) == "$b" &&
    $(get tokens) =~ ^[0-9]+\ [0-9]+$ ]]
check $? "lock, two names: ROWLOCK_COUNT, ROWLOCK_NAME_1/_2, ROWLOCK_TOKENS; no ROWLOCK_NAME" "$out"
[[ $(get a_busy) == 1 && $(get b_busy) == 1 && $(get check) == 0 ]]
check $? "lock, two names: both held until unlock" "$out"
[[ $(get unlock) == 0 && $(get a_free) == 0 && $(get b_free) == 0 ]]
check $? "unlock releases both names" "$out" "$(cat "$W/lock.err")"

out=$(rl lock --json -w 5 -N "$a" -N "$c" 2>"$W/json.err")
rc=$?
h=$(sed -n 's/.*"handle":"\([0-9.a-f]*\)".*/\1/p' <<<"$out")
[[ $rc == 0 && $out == *"\"names\":[\"$a\",\"$c\"],\"tokens\":["* && $out != *'"name":'* ]]
check $? "lock --json, two names: names and tokens arrays, no single name" "$out" "$(cat "$W/json.err")"
[[ -n $h ]] && "$RL" unlock "$h" 2>"$W/ju.err"
check_exit "... and unlock of its handle: 0" 0 $? "$(cat "$W/ju.err")"

# ---- losing one name loses the run ------------------------------------------------
rl run -l 1 -N "$a" -N "$b" sh -c 'touch "$1/run2"; sleep 30' sh "$W" >/dev/null 2>"$W/lost.err" &
rp=$!
wait_file "$W/run2" 100 || fail "the run of A and B started" "$(cat "$W/lost.err")"
rl release --force "$b" >/dev/null 2>"$W/force.err"
check $? "release --force B" "$(cat "$W/force.err")"
wait "$rp"
rc=$?
check_exit "run -N A -N B, B force-released: COMMAND stopped, exit 75" 75 "$rc" "$(cat "$W/lost.err")"
rl run -n -N "$a" true 2>"$W/alost.err"
check_exit "... and A was given back too" 0 $? "$(cat "$W/alost.err")"

# ---- overlapping sets in opposite orders: no deadlock, one holder per name ----------
# Four loops, two with -N A -N B, two with -N B -N A, each adding 1 to a
# counter file per name by read, pause, write (lost updates unless the
# names are exclusive). A deadlock would end the loops with the conflict
# code after their -w.
for f in A B; do echo 0 >"$W/count$f"; done
loop() {
    local k
    for ((k = 0; k < 8; k++)); do
        rl run -w 60 "$@" sh -c '
            for f in A B; do v=$(cat "$0/count$f"); sleep 0.02; echo $((v + 1)) >"$0/count$f"; done' "$W" ||
            return 1
    done
}
loop -N "$a" -N "$b" 2>"$W/l1.err" &
l1=$!
loop -N "$b" -N "$a" 2>"$W/l2.err" &
l2=$!
loop -N "$a" -N "$b" 2>"$W/l3.err" &
l3=$!
loop -N "$b" -N "$a" 2>"$W/l4.err" &
l4=$!
bad=0
for p in $l1 $l2 $l3 $l4; do wait "$p" || bad=$((bad + 1)); done
check_exit "4 loops of 8 runs, sets in opposite orders: all ran (no deadlock)" 0 "$bad" \
    "$(cat "$W"/l?.err | head -n 8)"
[[ $(cat "$W/countA") == 32 && $(cat "$W/countB") == 32 ]]
check $? "... and no lost update: both counters 32" "A=$(cat "$W/countA") B=$(cat "$W/countB")"

tap_done
