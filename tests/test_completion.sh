#!/usr/bin/env bash
# tests/test_completion.sh — the bash completion (completion/rowlock.bash):
# commands, options, option values, and lock names from the database.
#
# Usage: test_completion.sh COMPLETION_FILE BINDIR [db]
#   without "db": no server; lock-name completion must offer nothing, print
#   nothing and return quickly when the database does not answer.
#   with "db": ROWLOCK_DEFAULTS_FILE names a running server; held locks'
#   names (also with spaces and quotes) are offered.
#
# Each check simulates a TAB: COMP_WORDS split as bash does (also at '='),
# then calls the completion function and compares COMPREPLY.
set -u
export LC_ALL=C
FILE=${1:?usage: test_completion.sh COMPLETION_FILE BINDIR [db]}
BIN=${2:?usage: test_completion.sh COMPLETION_FILE BINDIR [db]}
MODE=${3:-unit}
RL=$BIN/rowlock
# shellcheck source=../completion/rowlock.bash
source "$FILE"

W=$(mktemp -d "${TMPDIR:-/tmp}/rowlock-comp.XXXXXXXX") || exit 1
cleanup() {
    local p
    for p in $(jobs -pr); do kill -TERM "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf -- "$W"
}
trap cleanup EXIT

N=0 PASSED=0 FAILED=0
pass() { N=$((N + 1)); PASSED=$((PASSED + 1)); printf 'ok %d - %s\n' "$N" "$1"; }
fail() {
    N=$((N + 1)); FAILED=$((FAILED + 1)); printf 'not ok %d - %s\n' "$N" "$1"; shift
    local l; for l in "$@"; do [[ -n $l ]] && printf '%s\n' "$l" | sed 's/^/#   /'; done
}

# comp LINE [FUNCTION]: sets REPLY to the sorted, space-joined COMPREPLY for
# a TAB at the end of LINE.
comp() {
    local line=$1 fn=${2:-_rowlock} p
    local -a parts
    COMP_LINE=$line COMP_POINT=${#line} COMP_WORDS=()
    read -ra parts <<<"$line"
    for p in "${parts[@]}"; do
        while [[ $p == *=* ]]; do
            [[ -n ${p%%=*} ]] && COMP_WORDS+=("${p%%=*}")
            COMP_WORDS+=("=")
            p=${p#*=}
        done
        [[ -n $p ]] && COMP_WORDS+=("$p")
    done
    [[ $line == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    "$fn" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    REPLY=$(printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ')
    REPLY=${REPLY% }
}

# expect DESC LINE EXPECTED [FUNCTION]
expect() {
    comp "$2" "${4:-_rowlock}"
    if [[ $REPLY == "$3" ]]; then pass "$1"; else fail "$1" "line:     '$2'" "expected: '$3'" "got:      '$REPLY'"; fi
}
# expect_has DESC LINE WORD...: every WORD is offered
expect_has() {
    local d=$1 l=$2 w miss=""
    shift 2
    comp "$l"
    for w in "$@"; do [[ " $REPLY " == *" $w "* ]] || miss+=" $w"; done
    if [[ -z $miss ]]; then pass "$d"; else fail "$d" "line: '$l'" "missing:$miss" "got: '${REPLY:0:300}'"; fi
}

if [[ $MODE != db ]]; then
    # A server that does not answer: a closed port on loopback.
    printf '[client]\nhost=127.0.0.1\nport=1\nuser=nobody\n' >"$W/down.cnf"
    export ROWLOCK_DEFAULTS_FILE=$W/down.cnf

    expect "commands" "$RL " "help list lock metrics migrate permits release run status unlock"
    expect "a command by prefix" "$RL st" "status"
    expect_has "connection options before the command" "$RL --" \
        --defaults-file --host --port --socket --user --password --database --table \
        --ssl-mode --ssl-ca --connect-timeout --help --version
    expect "a connection option's value is skipped when finding the command" "$RL --table t " \
        "help list lock metrics migrate permits release run status unlock"
    expect "--ssl-mode=VALUE" "$RL --ssl-mode=VER" "VERIFY_CA VERIFY_IDENTITY"
    expect "--ssl-mode VALUE" "$RL --ssl-mode RE" "REQUIRED"
    expect_has "run's options" "$RL run --" --strategy --nonblock --wait --lease \
        --conflict-exit-code --verbose --help --table
    expect "--strategy=" "$RL run --strategy=" "for-update insert optimistic"
    expect "-S VALUE" "$RL run -S f" "for-update"
    expect_has "run's flock(1) options" "$RL run --" --shared --exclusive --permits --nb --timeout \
        --command --close --no-fork --version
    expect "-s takes no value (shared)" "$RL run -s f" ""
    expect "status's options" "$RL status --j" "--json"
    expect "list's options" "$RL list --s" "--socket --ssl-ca --ssl-mode --stale"
    expect "release's options" "$RL release --f" "--force"
    expect "release's --json" "$RL release --j" "--json"
    expect "migrate's options" "$RL migrate --d" "--database --defaults-file --dry-run"
    expect "metrics's options" "$RL metrics --n" "--names"
    expect "permits's --json" "$RL permits --j" "--json"
    expect "migrate's --json" "$RL migrate --j" "--json"
    expect "help COMMAND" "$RL help r" "release run"
    expect_has "lock's options" "$RL lock --" --strategy --nonblock --wait --lease --pid --verbose
    expect "unlock's options" "$RL unlock --" "--check --help"
    expect_has "run NAME COMMAND: commands from PATH" "$RL run -w 5 job ech" echo
    expect "run NAME -c: the shell command is not completed" "$RL run job -c " ""
    expect "run NAME -: -c, --command or --" "$RL run -n job -" "-- --command -c"
    touch "$W/some-file"
    expect "run NAME COMMAND ARG: files" "$RL run job ls $W/some-f" "$W/some-file"
    expect "--defaults-file=FILE: files" "$RL --defaults-file=$W/some-f" "$W/some-file"
    expect "rowlock-reaper --metrics-file=FILE: files" "rowlock-reaper --metrics-file=$W/some-f" "$W/some-file" _rowlock_reaper
    expect "rowlock-reaper options" "rowlock-reaper --p" "--password --pause --port" _rowlock_reaper
    expect "rowlock-reaper --pause=" "rowlock-reaper --pause=" "0 auto" _rowlock_reaper
    comp "rowlock-reaper --" _rowlock_reaper
    miss=""
    for o in --grace --batch --pause --max-seconds --dry-run --json --quiet --metrics-file --help --version \
        --defaults-file --table; do
        [[ " $REPLY " == *" $o "* ]] || miss+=" $o"
    done
    if [[ -z $miss ]]; then pass "rowlock-reaper's options"; else fail "rowlock-reaper's options" "missing:$miss"; fi

    # Database down: no names, nothing on stderr, quickly.
    start=$SECONDS
    comp "$RL status " 2>"$W/err"
    took=$((SECONDS - start))
    if [[ -z $REPLY && ! -s $W/err && $took -le 5 ]]; then
        pass "database down: no names, nothing printed, ${took}s"
    else
        fail "database down: no names, nothing printed, at most 5 s" "got: '$REPLY' in ${took}s" "$(cat "$W/err")"
    fi
else
    : "${ROWLOCK_DEFAULTS_FILE:?set ROWLOCK_DEFAULTS_FILE to the option file of a running server}"
    export ROWLOCK_DEFAULTS_FILE
    T=comp_locks
    P="cmp$$-"
    "$RL" --table=$T migrate >/dev/null || { fail "migrate $T"; exit 1; }
    names=("${P}plain" "${P}with space" "${P}quote\"d")
    for n in "${names[@]}"; do
        "$RL" --table=$T run -n "$n" -- sleep 60 &
    done
    for n in "${names[@]}"; do
        for _ in $(seq 100); do
            "$RL" --table=$T status "$n" >/dev/null 2>&1 && break
            sleep 0.1
        done
    done
    want=$(printf '%q\n' "${names[@]}" | sort | tr '\n' ' ')
    want=${want% }
    expect "run NAME: held locks' names, shell-quoted" "$RL --table=$T run $P" "$want"
    expect "status NAME, --table VALUE form" "$RL --table $T status $P" "$want"
    expect "release --force NAME" "$RL --table=$T release --force ${P}w" "$(printf '%q' "${P}with space")"
    expect "--password on the line is not passed on (it would prompt)" \
        "$RL --password --table=$T status ${P}p" "${P}plain"
    expect "another table: none of these names" "$RL --table=${T}_none status $P" ""
    expect "no names after NAME" "$RL --table=$T status ${P}plain " ""
fi

printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
[[ $FAILED -eq 0 ]]
