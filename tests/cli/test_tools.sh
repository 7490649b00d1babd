#!/usr/bin/env bash
# tests/cli/test_tools.sh — end-to-end tests of the command-line tools (rowlock,
# rowlock-reaper) against a running server.
#
# Environment (set by tests/cli/cli.cmake):
#   ROWLOCK_BIN_DIR        directory holding the built rowlock and rowlock-reaper
#   ROWLOCK_DEFAULTS_FILE  option file of the already running shared server
#   ROWLOCK_SANDBOX        tools/rowlock-sandbox (for a PRIVATE server used by the
#                          "server stopped" case; the shared one is never touched)
#
# Output: one "ok N - ..." / "not ok N - ..." line per check, then
# "P passed, F failed"; exit status 0 only if nothing failed.
#
# Uses its own lock table (cli_locks) and lock names prefixed with this
# process's pid, so it can run in parallel with the other db tests.
# shellcheck disable=SC2016 # single quotes: expanded by the sh that rowlock runs
set -u
export LC_ALL=C

: "${ROWLOCK_BIN_DIR:?set ROWLOCK_BIN_DIR to the directory holding rowlock and rowlock-reaper}"
: "${ROWLOCK_DEFAULTS_FILE:?set ROWLOCK_DEFAULTS_FILE to the option file of a running server}"
export ROWLOCK_DEFAULTS_FILE
SBX=${ROWLOCK_SANDBOX:-}
RL=$ROWLOCK_BIN_DIR/rowlock
RP=$ROWLOCK_BIN_DIR/rowlock-reaper
TABLE=cli_locks
P="cli$$-$RANDOM-" # lock name prefix, unique to this run
TMO=120            # upper bound for any single synchronous tool call

# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"
TAP_KILL_SIGNAL=TERM
PRIV=""
# The private server ("server stopped" case), once the jobs are gone.
tap_cleanup_last() {
    if [[ -n $PRIV && -n $SBX ]]; then
        "$SBX" stop "$PRIV" >/dev/null 2>&1
    fi
}
tap_workdir cli

show() { # show FILE: a file's first lines as diagnostics
    [[ -s $1 ]] || { printf '(empty %s)\n' "${1##*/}"; return; }
    head -n 8 -- "$1" | sed "s|^|${1##*/}: |"
}

# cap CMD...: run, stdout -> $W/out, stderr -> $W/err, status -> RC
cap() {
    "$@" >"$W/out" 2>"$W/err"
    RC=$?
}

rl() { timeout -k 10 "$TMO" "$RL" --table "$TABLE" "$@"; }
rp() { timeout -k 10 "$TMO" "$RP" --table "$TABLE" "$@"; }

# expect_rc EXPECTED DESC: judge the last cap
expect_rc() {
    if ((RC == $1)); then
        pass "$2"
    else
        local d
        mapfile -t d < <(printf 'expected exit %s, got %s\n' "$1" "$RC"; show "$W/out"; show "$W/err")
        fail "$2" "${d[@]}"
    fi
}

# expect_usage DESC CMD...: exit 64, exactly one stderr line naming the program, no stdout
expect_usage() {
    local desc=$1 lines
    shift
    cap "$@"
    lines=$(wc -l <"$W/err")
    if ((RC == 64)) && ((lines == 1)) && grep -Eq '^rowlock(-reaper)?: ' "$W/err" && [[ ! -s $W/out ]]; then
        pass "$desc (64: $(head -c 100 "$W/err"))"
    else
        local d
        mapfile -t d < <(printf 'expected exit 64 with one stderr line, got %s with %s lines\n' "$RC" "$lines"
            show "$W/out"; show "$W/err")
        fail "$desc" "${d[@]}"
    fi
}

now() { printf '%s\n' "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f\n", b - a }'; }
# fcmp A OP B: float comparison
fcmp() { awk -v a="$1" -v op="$2" -v b="$3" 'BEGIN { exit !((op == "<=" && a <= b) || (op == ">=" && a >= b) || (op == "<" && a < b) || (op == ">" && a > b)) }'; }

# wait_file FILE [SECONDS]: poll for a file (the handshake with a COMMAND)
wait_file() {
    local f=$1 t=${2:-60} i
    for ((i = 0; i < t * 20; i++)); do
        [[ -e $f ]] && return 0
        sleep 0.05
    done
    return 1
}

# wait_pid_timeout PID SECONDS: wait for a background child; sets WRC.
# Returns 1 (and kills it) if it did not end in time.
wait_pid_timeout() {
    local pid=$1 t=$2 i
    for ((i = 0; i < t * 20; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid"
            WRC=$?
            return 0
        fi
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid"
    WRC=$?
    return 1
}

# JSON validation: python3 or jq; returns 2 if neither exists.
json_valid() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$1" 2>/dev/null
    elif command -v jq >/dev/null 2>&1; then
        jq -e . "$1" >/dev/null 2>&1
    else
        return 2
    fi
}

# A holder: `rowlock run` in the background whose COMMAND writes its token,
# touches DIR/started, and runs until DIR/stop exists. On SIGTERM/SIGINT/
# SIGUSR1 it records the signal in DIR/sig and exits 3/4/5.
# start_holder DIR NAME [run options...]; sets HPID.
start_holder() {
    local dir=$1 name=$2
    shift 2
    mkdir -p "$dir"
    "$RL" --table "$TABLE" run "$@" "$name" sh -c '
        trap "echo TERM \$(date +%s.%N) > \"$1/sig\"; exit 3" TERM
        trap "echo INT > \"$1/sig\"; exit 4" INT
        trap "echo USR1 > \"$1/sig\"; exit 5" USR1
        echo "$ROWLOCK_TOKEN" > "$1/token"
        touch "$1/started"
        while [ ! -e "$1/stop" ]; do sleep 0.05; done' sh "$dir" >"$dir/out" 2>"$dir/err" &
    HPID=$!
    wait_file "$dir/started" 60
}

# stop_holder DIR PID: ask the COMMAND to end, wait; sets HRC
stop_holder() {
    touch "$1/stop"
    if wait_pid_timeout "$2" 60; then HRC=$WRC; else HRC=timeout; fi
}

SCHEMA_V=$("$RL" --version 2>/dev/null | sed -n 's/.*schema version \([0-9][0-9]*\).*/\1/p')
[[ -n $SCHEMA_V ]] || SCHEMA_V=1

echo "# rowlock CLI tests: bin $ROWLOCK_BIN_DIR, table $TABLE, names $P*, work dir $W"

# ===========================================================================
# 1. help and version (no server)
# ===========================================================================
cap "$RL" --version
[[ $RC -eq 0 ]] && grep -Eq '^rowlock [0-9]+\.[0-9]+\.[0-9]+' "$W/out"
check $? "rowlock --version exits 0 and prints the version" "$(show "$W/out")"

cap "$RL" --help
[[ $RC -eq 0 ]] && grep -q 'run' "$W/out" && grep -q -- '--defaults-file' "$W/out"
check $? "rowlock --help exits 0 and lists commands and connection options"

for c in run status list release migrate; do
    cap "$RL" "$c" --help
    [[ $RC -eq 0 ]] && grep -q "Usage: rowlock .*$c" "$W/out"
    check $? "rowlock $c --help exits 0"
done
cap "$RL" help run
expect_rc 0 "rowlock help run exits 0"
cap "$RP" --help
[[ $RC -eq 0 ]] && grep -q -- '--grace' "$W/out"
check $? "rowlock-reaper --help exits 0"
cap "$RP" --version
expect_rc 0 "rowlock-reaper --version exits 0"

# ===========================================================================
# 2. usage errors: exit 64 with one clear line (before any connection)
# ===========================================================================
expect_usage "no command" "$RL"
expect_usage "unknown command" "$RL" frobnicate
expect_usage "unknown global option" "$RL" --frobnicate status x
# An explicit empty connection setting would let the option files decide
# (Connector/C takes "" for "not given"): refused (found by a review).
for o in host socket user database; do
    expect_usage "--$o= (empty) is refused" "$RL" "--$o=" status x
done
expect_usage "run: unknown strategy" "$RL" run -S bogus "${P}u" true
expect_usage "run: empty strategy" "$RL" run --strategy= "${P}u" true
expect_usage "run: negative wait" "$RL" run -w -1 "${P}u" true
expect_usage "run: non-numeric wait" "$RL" run --wait abc "${P}u" true
expect_usage "run: -E 300 out of range" "$RL" run -E 300 -n "${P}u" true
expect_usage "run: -E -1 out of range" "$RL" run -E -1 -n "${P}u" true
expect_usage "run: -E not a number" "$RL" run --conflict-exit-code=x "${P}u" true
expect_usage "run: empty lock name" "$RL" run ''  true
expect_usage "run: lock name longer than 255 bytes" "$RL" run "$(printf 'n%.0s' {1..256})" true
expect_usage "run: lock name not UTF-8" "$RL" run $'bad\xff' true
expect_usage "run: missing COMMAND" "$RL" run "${P}u"
expect_usage "run: missing COMMAND after --" "$RL" run "${P}u" --
expect_usage "run: missing NAME" "$RL" run
expect_usage "run: -c with two arguments" "$RL" run "${P}u" -c 'true' extra
expect_usage "run: -c without argument" "$RL" run "${P}u" -c
expect_usage "run: lease 0" "$RL" run -l 0 "${P}u" true
expect_usage "run: unknown option" "$RL" run --frobnicate "${P}u" true
expect_usage "run: unknown short option" "$RL" run -Z "${P}u" true
expect_usage "run: -w without value" "$RL" run -w
expect_usage "password on the command line is refused" "$RL" --password=s3cr3t-pw status x
if grep -q 's3cr3t-pw' "$W/err"; then fail "the refused password is not echoed" "$(show "$W/err")"; else pass "the refused password is not echoed"; fi
for tool in "$RL" "$RP"; do
    if [[ $tool == "$RL" ]]; then extra=(status x); else extra=(); fi
    expect_usage "--password takes no value (${tool##*/})" "$tool" --password s3cr3t-pw "${extra[@]}"
    if grep -q 's3cr3t-pw' "$W/err"; then
        fail "${tool##*/}: a value after --password is not echoed" "$(show "$W/err")"
    else
        pass "${tool##*/}: a value after --password is not echoed"
    fi
done
expect_usage "--port not a number" "$RL" --port abc status x
expect_usage "--port 0" "$RL" --port 0 status x
expect_usage "--ssl-mode unknown" "$RL" --ssl-mode=bogus status x
expect_usage "--connect-timeout negative" "$RL" --connect-timeout -1 status x
expect_usage "connection option without value" "$RL" status x --host
expect_usage "unreadable defaults file (missing)" "$RL" --defaults-file="$W/no-such.cnf" status x
expect_usage "ROWLOCK_DEFAULTS_FILE unreadable (missing)" env ROWLOCK_DEFAULTS_FILE="$W/no-such.cnf" "$RL" status x
expect_usage "defaults file is a directory" "$RL" --defaults-file="$W" status x
if (($(id -u) != 0)); then
    printf '[client]\n' >"$W/noread.cnf"
    chmod 000 "$W/noread.cnf"
    expect_usage "defaults file without read permission" "$RL" --defaults-file="$W/noread.cnf" status x
else
    skip "defaults file without read permission" "running as root"
fi
if command -v setsid >/dev/null 2>&1; then
    cap timeout -k 5 30 setsid -w "$RL" --password status "${P}u" </dev/null
    [[ $RC -eq 64 ]] && [[ $(wc -l <"$W/err") -eq 1 ]]
    check $? "--password without a terminal: 64, no hang" "$(show "$W/err")" "exit $RC"
else
    skip "--password without a terminal" "no setsid"
fi
expect_usage "status: missing NAME" "$RL" status
expect_usage "status: two names" "$RL" status a b
expect_usage "status: empty name" "$RL" status ''
expect_usage "status: unknown option" "$RL" status --frob x
expect_usage "list: unexpected argument" "$RL" list extra
expect_usage "release without --force" "$RL" release "${P}u"
grep -q -- '--force' "$W/err"
check $? "release without --force says --force is required" "$(show "$W/err")"
expect_usage "release --force without NAME" "$RL" release --force
expect_usage "migrate: unknown option" "$RL" migrate --frob
expect_usage "reaper: negative grace" "$RP" --grace -1
expect_usage "reaper: non-numeric grace" "$RP" --grace=abc
expect_usage "reaper: batch 0" "$RP" --batch 0
expect_usage "reaper: batch not a number" "$RP" --batch x
expect_usage "reaper: pause over 60000" "$RP" --pause 60001
expect_usage "reaper: pause not a number" "$RP" --pause -1
expect_usage "reaper: pause neither auto nor a number" "$RP" --pause fast
expect_usage "reaper: max-seconds 0" "$RP" --max-seconds 0
expect_usage "reaper: unknown option" "$RP" --frobnicate
expect_usage "reaper: positional argument" "$RP" extra
expect_usage "reaper: password on the command line" "$RP" --password=pw
expect_usage "reaper: unreadable defaults file" "$RP" --defaults-file="$W/no-such.cnf"

# ===========================================================================
# 3. database unavailable / schema missing: exit 69
# ===========================================================================
DEADPORT=1
for p in 1 9 47 $((40000 + RANDOM % 20000)); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then DEADPORT=$p; break; fi
done
printf '[client]\nhost=127.0.0.1\nport=%s\nuser=nobody\npassword=x\ndatabase=rowlock\n' "$DEADPORT" >"$W/dead.cnf"
DEAD=(--defaults-file="$W/dead.cnf" --connect-timeout 5)
for args in "status ${P}x" "list" "list --stale" "release --force ${P}x" "migrate" "run -n ${P}x true" "run ${P}x true"; do
    # shellcheck disable=SC2086
    cap timeout -k 5 60 "$RL" "${DEAD[@]}" $args
    [[ $RC -eq 69 ]] && [[ $(wc -l <"$W/err") -eq 1 ]] && grep -q 'unavailable' "$W/err"
    check $? "server down: rowlock $args exits 69 with one line" "exit $RC" "$(show "$W/err")"
done
cap timeout -k 5 60 "$RP" "${DEAD[@]}"
expect_rc 69 "server down: rowlock-reaper exits 69"

NOMIG=cli_never_migrated
for args in "status ${P}x" "list" "run -n ${P}x true" "release --force ${P}x"; do
    # shellcheck disable=SC2086
    cap timeout -k 5 60 "$RL" --table "$NOMIG" $args
    [[ $RC -eq 69 ]] && [[ $(wc -l <"$W/err") -eq 1 ]] && grep -q 'rowlock migrate' "$W/err"
    check $? "schema missing: rowlock $args exits 69 and says to run rowlock migrate" "exit $RC" "$(show "$W/err")"
done
cap timeout -k 5 60 "$RP" --table "$NOMIG"
expect_rc 69 "schema missing: rowlock-reaper exits 69"

# ===========================================================================
# 4. migrate
# ===========================================================================
cap timeout -k 5 120 "$RL" --table cli_dryrun migrate --dry-run
[[ $RC -eq 0 ]] && grep -Eq "^schema version: 0 -> $SCHEMA_V \(dry run\)$" "$W/out"
check $? "migrate --dry-run on a new table reports 0 -> $SCHEMA_V (dry run)" "exit $RC" "$(show "$W/out")" "$(show "$W/err")"
cap timeout -k 5 60 "$RL" --table cli_dryrun status x
expect_rc 69 "migrate --dry-run changed nothing (the table is still missing)"

# two at once
rl migrate >"$W/m1.out" 2>"$W/m1.err" &
M1=$!
rl migrate >"$W/m2.out" 2>"$W/m2.err" &
M2=$!
wait "$M1"; R1=$?
wait "$M2"; R2=$?
((R1 == 0 && R2 == 0)) && grep -Eq "^schema version: [0-9]+ -> $SCHEMA_V$" "$W/m1.out" &&
    grep -Eq "^schema version: [0-9]+ -> $SCHEMA_V$" "$W/m2.out"
check $? "two concurrent migrates both exit 0 and reach version $SCHEMA_V" "exits $R1 $R2" \
    "$(show "$W/m1.out")" "$(show "$W/m2.out")" "$(show "$W/m1.err")" "$(show "$W/m2.err")"
cap rl migrate
[[ $RC -eq 0 ]] && grep -Eq "^schema version: $SCHEMA_V -> $SCHEMA_V$" "$W/out"
check $? "migrate again is a no-op ($SCHEMA_V -> $SCHEMA_V)" "$(show "$W/out")"

# Clean stale rows of earlier runs so later counts are about this run.
rp --grace 0 --quiet >/dev/null 2>&1

# ===========================================================================
# 5. run: exit statuses, environment, tokens
# ===========================================================================
NAME="${P}basic"
cap rl run "$NAME" true
expect_rc 0 "run true exits 0"
cap rl run "$NAME" false
expect_rc 1 "run false exits 1"
cap rl run "$NAME" sh -c 'exit 42'
expect_rc 42 "run passes COMMAND's exit status (42)"
cap rl run "$NAME" -c 'exit 7'
expect_rc 7 "run -c 'SHELL COMMAND' passes the status (7)"
cap rl run -n "$NAME" -- sh -c 'exit 3'
expect_rc 3 "run NAME -- COMMAND"
cap rl run "$NAME" echo hello world
[[ $RC -eq 0 && $(cat "$W/out") == "hello world" ]]
check $? "COMMAND's stdout passes through" "$(show "$W/out")"
printf 'stdin-data\n' >"$W/in"
cap rl run "$NAME" cat <"$W/in"
[[ $RC -eq 0 && $(cat "$W/out") == "stdin-data" ]]
check $? "COMMAND's stdin passes through" "$(show "$W/out")"
cap rl run "$NAME" sh -c 'echo err >&2; exit 0'
[[ $RC -eq 0 && $(cat "$W/err") == "err" ]]
check $? "COMMAND's stderr passes through untouched" "$(show "$W/err")"
cap rl run "$NAME" sh -c 'printf "%s\n%s\n%s\n" "$ROWLOCK_NAME" "$ROWLOCK_TOKEN" "$ROWLOCK_OWNER"'
mapfile -t ENVV <"$W/out"
[[ $RC -eq 0 && ${ENVV[0]:-} == "$NAME" && ${ENVV[1]:-} =~ ^[1-9][0-9]*$ && -n ${ENVV[2]:-} ]]
check $? "COMMAND gets ROWLOCK_NAME, ROWLOCK_TOKEN and ROWLOCK_OWNER" "$(show "$W/out")"
cap rl run "$NAME" sh -c 'kill -TERM $$'
expect_rc 143 "COMMAND killed by SIGTERM: exit 128+15"
cap rl run "$NAME" sh -c 'kill -KILL $$'
expect_rc 137 "COMMAND killed by SIGKILL: exit 128+9"
cap rl run "$NAME" "/nonexistent-dir-$$/cmd"
[[ $RC -eq 127 ]] && [[ $(wc -l <"$W/err") -eq 1 ]]
check $? "COMMAND not found (path): 127 with one line" "exit $RC" "$(show "$W/err")"
cap rl run "$NAME" "rowlock-no-such-command-$$"
expect_rc 127 "COMMAND not found (PATH search): 127"
printf '#!/bin/sh\nexit 0\n' >"$W/noexec.sh"
chmod 644 "$W/noexec.sh"
cap rl run "$NAME" "$W/noexec.sh"
[[ $RC -eq 126 ]] && [[ $(wc -l <"$W/err") -eq 1 ]]
check $? "COMMAND not executable: 126 with one line" "exit $RC" "$(show "$W/err")"
cap rl run "$NAME" "$W"
expect_rc 126 "COMMAND is a directory: 126"
cap rl status "$NAME"
expect_rc 1 "the lock is free after the runs (also after exec failures)"
cap rl run -S optimistic -n "$NAME" true
[[ $RC -eq 64 ]] && grep -q 'insert' "$W/err"
check $? "run with another strategy than the one managing the name: 64" "exit $RC" "$(show "$W/err")"

for s in insert optimistic for-update; do
    prev=0 okc=1 toks=""
    for i in 1 2 3 4 5; do
        t=$(rl run -S "$s" "${P}tok-$s" sh -c 'echo "$ROWLOCK_TOKEN"' 2>"$W/err")
        toks+="$t "
        if ! [[ $t =~ ^[0-9]+$ ]] || ((t <= prev)); then okc=0; fi
        prev=${t:-0}
    done
    check $((1 - okc)) "ROWLOCK_TOKEN strictly increasing over 5 runs ($s: $toks)" "$(show "$W/err")"
done

# ===========================================================================
# 6. conflicts: -n, -E, -w (every strategy)
# ===========================================================================
for s in insert optimistic for-update; do
    NAME="${P}conf-$s"
    D="$W/conf-$s"
    if ! start_holder "$D" "$NAME" -S "$s"; then
        fail "[$s] holder started" "$(show "$D/err")"
        continue
    fi
    cap rl status "$NAME"
    expect_rc 0 "[$s] status of a held lock exits 0"
    rm -f "$W/ran"
    cap rl run -S "$s" -n "$NAME" touch "$W/ran"
    [[ $RC -eq 1 && ! -e $W/ran ]]
    check $? "[$s] second run -n exits 1 and does not run COMMAND" "exit $RC" "$(show "$W/err")"
    cap rl run -S "$s" --nonblock "$NAME" true
    expect_rc 1 "[$s] --nonblock exits 1"
    cap rl run -S "$s" -n -E 7 "$NAME" true
    expect_rc 7 "[$s] -n -E 7 exits 7"
    cap rl run -S "$s" -E 0 -n "$NAME" touch "$W/ran"
    [[ $RC -eq 0 && ! -e $W/ran ]]
    check $? "[$s] -E 0 -n exits 0 without running COMMAND" "exit $RC"
    cap rl run -S "$s" -E 255 -w 0 "$NAME" true
    expect_rc 255 "[$s] -w 0 behaves as -n (-E 255)"
    t0=$(now)
    cap rl run -S "$s" -w 0.5 "$NAME" true
    el=$(since "$t0")
    [[ $RC -eq 1 ]] && fcmp "$el" '>=' 0.45 && fcmp "$el" '<=' 3
    check $? "[$s] -w 0.5 waits about 0.5 s ($el s) then exits 1" "exit $RC" "$(show "$W/err")"
    cap rl run -S "$s" --conflict-exit-code=9 --wait=0.2 "$NAME" true
    expect_rc 9 "[$s] --wait=0.2 --conflict-exit-code=9 exits 9"
    cap rl run -S "$s" -nE 8 "$NAME" true
    expect_rc 8 "[$s] clustered short options -nE 8"

    # A waiter without -n/-w gets the lock once the holder ends, with a larger token.
    rl run -S "$s" "$NAME" sh -c 'echo "$ROWLOCK_TOKEN"' >"$D/waiter.out" 2>"$D/waiter.err" &
    WP=$!
    sleep 0.3 # not synchronisation: only lets the waiter start waiting while the lock is held
    stop_holder "$D" "$HPID"
    [[ $HRC == 0 ]]
    check $? "[$s] holder exits 0 when its COMMAND ends" "exit $HRC" "$(show "$D/err")"
    if wait_pid_timeout "$WP" 60; then :; fi
    htok=$(cat "$D/token" 2>/dev/null)
    wtok=$(cat "$D/waiter.out" 2>/dev/null)
    [[ $WRC -eq 0 && $htok =~ ^[0-9]+$ && $wtok =~ ^[0-9]+$ ]] && ((wtok > htok))
    check $? "[$s] a waiting run acquires after the holder ends; token $wtok > $htok" "exit $WRC" "$(show "$D/waiter.err")"
done

# status / list output while held (insert): columns and JSON
NAME="${P}show"
D="$W/show"
if start_holder "$D" "$NAME" -l 30; then
    cap rl status "$NAME"
    [[ $RC -eq 0 ]] && grep -q "^NAME *STRATEGY *OWNER *TOKEN *ACQUIRED AT *EXPIRES IN" "$W/out" &&
        grep -Eq "^$NAME +insert +[^ ]+ +$(cat "$D/token") +[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z +[0-9]+\.[0-9]s$" "$W/out"
    check $? "status prints aligned columns: name, strategy, owner, token, acquired at, expires in" "$(show "$W/out")"
    cap rl status --json "$NAME"
    [[ $RC -eq 0 ]] && json_valid "$W/out" && grep -q '"held":true' "$W/out" && grep -q "\"token\":$(cat "$D/token")" "$W/out"
    check $? "status --json prints a valid JSON object" "$(show "$W/out")"
    cap rl list
    [[ $RC -eq 0 ]] && grep -q "^$NAME  *insert " "$W/out"
    check $? "list shows the held lock" "$(show "$W/out")"
    cap rl list --json
    [[ $RC -eq 0 ]] && json_valid "$W/out" && grep -q "\"name\":\"$NAME\"" "$W/out"
    check $? "list --json prints a valid JSON array with the lock" "$(show "$W/out")"
    stop_holder "$D" "$HPID"
else
    fail "holder for status/list started" "$(show "$D/err")"
fi
cap rl status "$NAME"
[[ $RC -eq 1 ]] && grep -q "free" "$W/out"
check $? "status of a free lock exits 1 and says free" "$(show "$W/out")"
cap rl status --json "$NAME"
[[ $RC -eq 1 ]] && json_valid "$W/out" && grep -q '"held":false' "$W/out"
check $? "status --json of a free lock: held false, exit 1" "$(show "$W/out")"

# names with quotes, backslashes, control characters and UTF-8
WEIRD=$'cli'"$$"$'-"q\\b\tc\001\xc3\xa9'
D="$W/weird"
if start_holder "$D" "$WEIRD"; then
    cap rl status --json "$WEIRD"
    if command -v python3 >/dev/null 2>&1; then
        [[ $RC -eq 0 ]] && python3 -c '
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
sys.exit(0 if d["name"] == sys.argv[2] else 1)' "$W/out" "$WEIRD"
        check $? "status --json escapes quotes, backslashes, control characters (name round-trips)" "$(show "$W/out")"
        cap rl list --json
        [[ $RC -eq 0 ]] && python3 -c '
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
sys.exit(0 if any(x["name"] == sys.argv[2] for x in d) else 1)' "$W/out" "$WEIRD"
        check $? "list --json with an unusual name is valid JSON" "$(show "$W/out")"
    else
        [[ $RC -eq 0 ]] && grep -q '\\u0001' "$W/out" && grep -q '\\t' "$W/out" && grep -q '\\"q' "$W/out"
        check $? "status --json escapes quotes, tabs and control characters" "$(show "$W/out")"
    fi
    cap rl status "$WEIRD"
    [[ $RC -eq 0 ]] && grep -q '\\x01' "$W/out" && [[ $(wc -l <"$W/out") -eq 2 ]]
    check $? "human status shows control characters escaped, one line per lock" "$(show "$W/out")"
    stop_holder "$D" "$HPID"
else
    fail "holder with an unusual name started" "$(show "$D/err")"
fi

# ===========================================================================
# 7. renewal: a COMMAND outliving several lease lengths keeps the lock
# ===========================================================================
# Leases of 4 s (renewed every 1.33 s; a renewal may take up to 1.6 s on a
# loaded machine before rowlock gives up) and 13 s of holding.
declare -A RPID
for s in insert optimistic for-update; do
    if start_holder "$W/renew-$s" "${P}renew-$s" -S "$s" -l 4 --verbose; then
        RPID[$s]=$HPID
    else
        fail "[$s] renewal holder started" "$(show "$W/renew-$s/err")"
    fi
done
sleep 13 # more than 3 lease lengths: the point of this check is time passing
for s in "${!RPID[@]}"; do
    NAME="${P}renew-$s"
    D="$W/renew-$s"
    cap rl status "$NAME"
    expect_rc 0 "[$s] still held after 3 lease lengths (status 0)"
    cap rl run -S "$s" -n "$NAME" true
    expect_rc 1 "[$s] still exclusive after 3 lease lengths (run -n exits 1)"
    stop_holder "$D" "${RPID[$s]}"
    if [[ $s == for-update ]]; then
        # No lease: the keeper watches the holding session instead of renewing.
        [[ $HRC == 0 ]] && grep -q 'watching the holding session' "$D/err" && grep -q 'acquired' "$D/err" && [[ ! -e $D/sig ]]
    else
        [[ $HRC == 0 ]] && [[ $(grep -c 'renewed' "$D/err") -ge 3 ]] && grep -q 'acquired' "$D/err" && [[ ! -e $D/sig ]]
    fi
    check $? "[$s] holder exits 0; --verbose reported acquisition and renewals (for-update: the watch)" "exit $HRC" "$(show "$D/err")"
done

# ===========================================================================
# 8. lease lost: release --force from another shell -> SIGTERM, exit 75
# ===========================================================================
for s in insert optimistic; do
    NAME="${P}lost-$s"
    D="$W/lost-$s"
    if ! start_holder "$D" "$NAME" -S "$s" -l 6; then
        fail "[$s] holder for release --force started" "$(show "$D/err")"
        continue
    fi
    cap rl release --force "$NAME"
    [[ $RC -eq 0 ]] && grep -q "released" "$W/out" && grep -q "$(cat "$D/token")" "$W/out"
    check $? "[$s] release --force of a held lock exits 0 and prints what was released" "exit $RC" "$(show "$W/out")" "$(show "$W/err")"
    t0=$(now)
    wait_pid_timeout "$HPID" 20
    el=$(since "$t0")
    [[ $WRC -eq 75 ]] && grep -q '^TERM' "$D/sig" 2>/dev/null && grep -q 'lost' "$D/err"
    check $? "[$s] holder's COMMAND gets SIGTERM and rowlock exits 75 (after $el s)" "exit $WRC" "$(show "$D/err")"
    cap rl release --force "$NAME"
    [[ $RC -eq 1 ]] && grep -q "not held" "$W/out"
    check $? "[$s] release --force of a free lock exits 1" "exit $RC" "$(show "$W/out")"
done
# A COMMAND that ignores SIGTERM gets SIGKILL --kill-after (5 s) later: the
# lock is already lost, so it gets its whole grace.
NAME="${P}lost-kill"
D="$W/lost-kill"
mkdir -p "$D"
"$RL" --table "$TABLE" run -l 12 --kill-after 5 "$NAME" sh -c '
    trap "" TERM
    touch "$1/started"
    while :; do sleep 0.05; done' sh "$D" >"$D/out" 2>"$D/err" &
HPID=$!
if wait_file "$D/started" 60; then
    cap rl release --force "$NAME"
    t0=$(now)
    wait_pid_timeout "$HPID" 30
    el=$(since "$t0")
    # SIGKILL from rowlock or, if rowlock was slower (a loaded machine), from
    # its watchdog half a reap allowance later: either way COMMAND died of it.
    [[ $WRC -eq 75 ]] && grep -q 'SIGKILL' "$D/err" && grep -q 'signal 9' "$D/err" && fcmp "$el" '>=' 4.5 &&
        fcmp "$el" '<=' 15
    check $? "lock lost, COMMAND ignores SIGTERM: SIGKILL after --kill-after 5 s ($el s), exit 75" "exit $WRC" "$(show "$D/err")"
else
    fail "holder ignoring SIGTERM started" "$(show "$D/err")"
fi

NAME="${P}lost-fu"
D="$W/lost-fu"
if start_holder "$D" "$NAME" -S for-update; then
    cap rl release --force "$NAME"
    expect_rc 64 "release --force of a for-update lock is refused (64)"
    stop_holder "$D" "$HPID"
else
    fail "for-update holder started" "$(show "$D/err")"
fi

# ===========================================================================
# 9. signals sent to rowlock are forwarded; the lock is released afterwards
# ===========================================================================
NAME="${P}sig"
D="$W/sig-term"
if start_holder "$D" "$NAME"; then
    kill -TERM "$HPID"
    wait_pid_timeout "$HPID" 20
    [[ $WRC -eq 3 ]] && grep -q '^TERM' "$D/sig"
    check $? "SIGTERM is forwarded to COMMAND; rowlock exits with COMMAND's status (3)" "exit $WRC" "$(show "$D/err")"
    cap rl status "$NAME"
    expect_rc 1 "the lock is released after a forwarded SIGTERM"
else
    fail "holder for SIGTERM started" "$(show "$D/err")"
fi
D="$W/sig-usr1"
if start_holder "$D" "$NAME"; then
    kill -USR1 "$HPID"
    wait_pid_timeout "$HPID" 20
    [[ $WRC -eq 5 ]] && grep -q '^USR1' "$D/sig"
    check $? "SIGUSR1 is forwarded to COMMAND (exit 5)" "exit $WRC" "$(show "$D/err")"
else
    fail "holder for SIGUSR1 started" "$(show "$D/err")"
fi
# SIGINT: background jobs of a script ignore SIGINT; env --default-signal undoes that.
if env --default-signal=INT true 2>/dev/null; then
    D="$W/sig-int"
    mkdir -p "$D"
    env --default-signal=INT "$RL" --table "$TABLE" run "$NAME" sh -c '
        trap "echo INT > \"$1/sig\"; exit 4" INT
        touch "$1/started"
        while :; do sleep 0.05; done' sh "$D" >"$D/out" 2>"$D/err" &
    HPID=$!
    if wait_file "$D/started" 60; then
        kill -INT "$HPID"
        wait_pid_timeout "$HPID" 20
        [[ $WRC -eq 4 ]] && grep -q '^INT' "$D/sig"
        check $? "SIGINT is forwarded to COMMAND (exit 4)" "exit $WRC" "$(show "$D/err")"
    else
        fail "holder for SIGINT started" "$(show "$D/err")"
    fi
else
    skip "SIGINT is forwarded to COMMAND" "env --default-signal not available"
fi
D="$W/sig-hup"
mkdir -p "$D"
"$RL" --table "$TABLE" run "$NAME" sh -c 'touch "$1/started"; exec sleep 60' sh "$D" >"$D/out" 2>"$D/err" &
HPID=$!
if wait_file "$D/started" 60; then
    sleep 0.2 # let sh exec sleep (the signal then kills sleep itself)
    kill -HUP "$HPID"
    wait_pid_timeout "$HPID" 20
    [[ $WRC -eq 129 ]]
    check $? "SIGHUP forwarded kills COMMAND: exit 128+1" "exit $WRC" "$(show "$D/err")"
else
    fail "holder for SIGHUP started" "$(show "$D/err")"
fi
cap rl status "$NAME"
expect_rc 1 "the lock is released after COMMAND was killed by a forwarded signal"

# A signal while waiting for the lock ends the waiter (by that signal) at once.
NAME="${P}sigwait"
D="$W/sigwait"
if start_holder "$D" "$NAME"; then
    "$RL" --table "$TABLE" run "$NAME" touch "$D/waiter-ran" >"$D/w.out" 2>"$D/w.err" &
    WP=$!
    sleep 0.5 # let it reach the wait (a signal before that ends it the same way)
    t0=$(now)
    kill -TERM "$WP"
    wait_pid_timeout "$WP" 10
    el=$(since "$t0")
    [[ $WRC -eq 143 && ! -e $D/waiter-ran ]] && fcmp "$el" '<=' 5
    check $? "SIGTERM to a waiting rowlock ends it (143, after $el s) without running COMMAND" "exit $WRC" "$(show "$D/w.err")"
    cap rl status "$NAME"
    expect_rc 0 "the holder still holds the lock after the waiter was killed"
    stop_holder "$D" "$HPID"
else
    fail "holder for the signal-while-waiting case" "$(show "$D/err")"
fi

has_mariadbd() {
    local PATH=$PATH:/usr/sbin:/sbin
    command -v mariadbd >/dev/null 2>&1 || command -v mysqld >/dev/null 2>&1
}

# ===========================================================================
# 10. lease lost because the server stopped (a PRIVATE server) -> exit 75
# ===========================================================================
if [[ -z $SBX || ! -x $SBX ]]; then
    skip "server stopped while running: COMMAND terminated, exit 75" "ROWLOCK_SANDBOX not set"
elif ! has_mariadbd; then
    skip "server stopped while running: COMMAND terminated, exit 75" "mariadbd not installed"
else
    PRIV="$W/priv"
    if "$SBX" start "$PRIV" >"$W/priv.env" 2>"$W/priv.log"; then
        cp "$PRIV/my.cnf" "$W/priv.cnf" # outlives the sandbox directory
        PRL=(timeout -k 10 "$TMO" "$RL" --defaults-file="$W/priv.cnf" --connect-timeout 2)
        cap "${PRL[@]}" migrate
        expect_rc 0 "private server: migrate"
        NAME="${P}down"
        D="$W/down"
        mkdir -p "$D"
        "$RL" --defaults-file="$W/priv.cnf" --connect-timeout 2 run -l 6 --verbose "$NAME" sh -c '
            trap "echo TERM \$(date +%s.%N) > \"$1/sig\"; exit 0" TERM
            touch "$1/started"
            while :; do sleep 0.05; done' sh "$D" >"$D/out" 2>"$D/err" &
        HPID=$!
        if wait_file "$D/started" 60; then
            tstop=$(date +%s.%N)
            "$SBX" stop "$PRIV" >>"$W/priv.log" 2>&1
            stoprc=$?
            wait_pid_timeout "$HPID" 40
            termat=$(awk '{ print $2 }' "$D/sig" 2>/dev/null)
            [[ $stoprc -eq 0 && $WRC -eq 75 && -n $termat ]] && grep -q 'renewed' "$D/err" &&
                grep -q 'could not be renewed' "$D/err"
            check $? "server stopped: COMMAND gets SIGTERM, rowlock says so and exits 75" \
                "exit $WRC, sandbox stop $stoprc" "$(show "$D/err")"
            [[ -n $termat ]] && fcmp "$(awk -v a="$tstop" -v b="$termat" 'BEGIN { print b - a }')" '<' 6
            check $? "server stopped: COMMAND was terminated before the 6 s lease could end" \
                "stop at $tstop, TERM at ${termat:-never}"
        else
            fail "private server: holder started" "$(show "$D/err")"
            "$SBX" stop "$PRIV" >>"$W/priv.log" 2>&1
        fi
        PRIV=""
        cap "${PRL[@]}" run -n "$NAME" true
        expect_rc 69 "private server gone: run exits 69"
    else
        fail "private sandbox started" "$(show "$W/priv.log")"
        PRIV=""
    fi
fi

# ===========================================================================
# 11. rowlock-reaper
# ===========================================================================
# Crashed holders: COMMAND kills rowlock with SIGKILL, leaving a 2 s lease behind.
NSTALE=6
okc=1
for i in $(seq 1 $NSTALE); do
    cap rl run -l 2 "${P}stale-$i" sh -c 'kill -KILL $PPID'
    ((RC == 137)) || okc=0
done
check $((1 - okc)) "crash simulation: rowlock killed by SIGKILL (137) while holding $NSTALE locks"

stale_names() { # our stale rows, sorted
    rl list --stale --json 2>/dev/null | grep -o "\"name\":\"${P}stale-[0-9]*\"" | sort
}
for ((i = 0; i < 200; i++)); do
    [[ $(stale_names | wc -l) -eq $NSTALE ]] && break
    sleep 0.1
done
cap rl list --stale
[[ $RC -eq 0 ]] && [[ $(grep -c "^${P}stale-" "$W/out") -eq $NSTALE ]]
check $? "list --stale shows the $NSTALE crashed holders' rows" "$(show "$W/out")"
cap rl list
[[ $RC -eq 0 ]] && ! grep -q "^${P}stale-" "$W/out"
check $? "list (held) does not show stale rows"
cap rl status "${P}stale-1"
[[ $RC -eq 1 ]] && grep -q 'stale' "$W/out"
check $? "status of a stale lock: free (1), says stale" "$(show "$W/out")"
TOK_BEFORE=$(rl status --json "${P}stale-1" 2>/dev/null | sed -n 's/.*"token":\([0-9]*\).*/\1/p')

BEFORE=$(stale_names)
cap rp --grace 0 --dry-run
[[ $RC -eq 0 ]] && grep -Eq '^would purge [0-9]+ stale lock' "$W/out" && grep -q '(dry run)' "$W/out"
check $? "reaper --dry-run exits 0 and reports what it would purge" "$(show "$W/out")" "$(show "$W/err")"
cap rp --grace 0 --dry-run --json
n=$(sed -n 's/.*"purged":\([0-9]*\).*/\1/p' "$W/out")
[[ $RC -eq 0 ]] && json_valid "$W/out" && grep -q '"dry_run":true' "$W/out" && ((${n:-0} >= NSTALE))
check $? "reaper --dry-run --json: valid JSON, would purge >= $NSTALE" "$(show "$W/out")"
[[ $(stale_names) == "$BEFORE" ]] && [[ -n $BEFORE ]]
check $? "reaper --dry-run changed nothing"
cap rp --grace 3600
[[ $RC -eq 0 ]] && [[ $(stale_names) == "$BEFORE" ]]
check $? "reaper --grace 3600 keeps rows whose lease ended less than an hour ago" "$(show "$W/out")"
cap rp --grace 0 --batch 2 --pause 1 --json
n=$(sed -n 's/.*"purged":\([0-9]*\).*/\1/p' "$W/out")
b=$(sed -n 's/.*"batches":\([0-9]*\).*/\1/p' "$W/out")
[[ $RC -eq 0 ]] && json_valid "$W/out" && ((${n:-0} >= NSTALE && ${b:-0} >= 3)) && grep -q '"dry_run":false' "$W/out"
check $? "reaper --grace 0 --batch 2 --pause 1 --json purges them in batches of 2 ($n rows, $b batches)" "$(show "$W/out")" "$(show "$W/err")"
[[ -z $(stale_names) ]]
check $? "the stale rows are gone"
cap rl status "${P}stale-1"
expect_rc 1 "status of a purged lock exits 1"
cap rp --grace 0 --quiet
[[ $RC -eq 0 && ! -s $W/out ]]
check $? "reaper --quiet prints nothing and exits 0" "$(show "$W/out")"
cap rp --grace 0 --max-seconds 30 --pause auto
[[ $RC -eq 0 ]] && grep -Eq '^purged [0-9]+ stale lock' "$W/out"
check $? "reaper prints one summary line" "$(show "$W/out")"
[[ $(wc -l <"$W/out") -eq 1 ]]
check $? "the summary is exactly one line"
t=$(rl run "${P}stale-1" sh -c 'echo "$ROWLOCK_TOKEN"' 2>"$W/err")
[[ $TOK_BEFORE =~ ^[0-9]+$ && $t =~ ^[0-9]+$ ]] && ((t > TOK_BEFORE))
check $? "fencing token still increases after a purge ($TOK_BEFORE -> $t)" "$(show "$W/err")"

# ===========================================================================
# 12. stress: reapers racing live acquirers never delete a live lock
# ===========================================================================
# Workers take 8 names: normal holders (exit 0), holders whose lease is
# renewed while the reaper runs (exit 0), and crashing holders (SIGKILL, 137)
# whose expired rows are taken over or purged. A deleted live lock shows up
# as a holder exiting 75, or as two holders inside the critical section
# (mkdir of a per-name directory fails: exit 99).
STRESS_SECS=${ROWLOCK_CLI_STRESS_SECONDS:-20}
SD="$W/stress"
mkdir -p "$SD"
worker() {
    local id=$1 end=$2 k=0 name mode rc
    while (($(date +%s) < end)); do
        name="${P}stress-$((RANDOM % 8))"
        mode=$((RANDOM % 8))
        case $mode in
        0 | 1 | 2 | 3 | 4)
            {
                timeout -k 10 "$TMO" "$RL" --table "$TABLE" run -w 30 -l 5 "$name" sh -c \
                    'mkdir "$1/mx-$2" || exit 99; echo "$ROWLOCK_TOKEN" >>"$1/tok-$2"; sleep 0.1; rmdir "$1/mx-$2"' sh "$SD" "$name"
                rc=$?
            } 2>>"$SD/w$id.err"
            [[ $rc -eq 0 ]] || echo "worker $id: normal run on $name exited $rc" >>"$SD/fail"
            ;;
        5)
            {
                timeout -k 10 "$TMO" "$RL" --table "$TABLE" run -w 30 -l 4 "$name" sh -c \
                    'mkdir "$1/mx-$2" || exit 99; echo "$ROWLOCK_TOKEN" >>"$1/tok-$2"; sleep 5; rmdir "$1/mx-$2"' sh "$SD" "$name"
                rc=$?
            } 2>>"$SD/w$id.err"
            [[ $rc -eq 0 ]] || echo "worker $id: renewing run on $name exited $rc" >>"$SD/fail"
            ;;
        *)
            {
                timeout -k 10 "$TMO" "$RL" --table "$TABLE" run -w 30 -l 3 "$name" sh -c \
                    'mkdir "$1/mx-$2" || exit 99; echo "$ROWLOCK_TOKEN" >>"$1/tok-$2"; rmdir "$1/mx-$2"; kill -KILL $PPID' sh "$SD" "$name"
                rc=$?
            } 2>>"$SD/w$id.err"
            [[ $rc -eq 137 ]] || echo "worker $id: crashing run on $name exited $rc" >>"$SD/fail"
            ;;
        esac
        k=$((k + 1))
    done
    echo "$k" >"$SD/count-$id"
}
reaper_loop() {
    local end=$1 k=0 rc
    while (($(date +%s) < end)); do
        timeout -k 10 "$TMO" "$RP" --table "$TABLE" --grace 0 --batch 1 --quiet 2>>"$SD/reaper.err"
        rc=$?
        [[ $rc -eq 0 ]] || echo "reaper exited $rc" >>"$SD/fail"
        k=$((k + 1))
    done
    echo "$k" >"$SD/count-reaper"
}
END=$(($(date +%s) + STRESS_SECS))
SPIDS=()
for id in 1 2 3; do
    worker "$id" "$END" &
    SPIDS+=($!)
done
reaper_loop "$END" &
SPIDS+=($!)
for p in "${SPIDS[@]}"; do
    wait "$p"
done
for f in "$SD"/tok-*; do
    [[ -e $f ]] || continue
    # grant order = order inside the critical section; tokens must increase
    awk 'NR > 1 && $1 <= prev { bad = 1 } { prev = $1 } END { exit bad }' "$f" || {
        echo "tokens not increasing in ${f##*/}: $(tr '\n' ' ' <"$f")" >>"$SD/fail"
    }
done
total=0
for id in 1 2 3; do total=$((total + $(cat "$SD/count-$id" 2>/dev/null || echo 0))); done
reaps=$(cat "$SD/count-reaper" 2>/dev/null || echo 0)
[[ ! -e $SD/fail ]] && ((total > 10 && reaps > 3))
check $? "stress: $reaps reaper runs racing $total acquisitions never deleted a live lock; tokens increased per name" \
    "$(cat "$SD/fail" 2>/dev/null | head -n 10)" "$(tail -n 5 "$SD"/w*.err 2>/dev/null)" "$(tail -n 5 "$SD/reaper.err" 2>/dev/null)"

# ===========================================================================
# Hostile input (issue 13): descriptors, secrets, escaping, grammar, option files
# ===========================================================================
# raw_controls FILE: true if FILE holds a C0 control other than newline, DEL,
# or a C1 control (UTF-8 C2 80-9F)
raw_controls() { LC_ALL=C grep -qP '[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]' "$1"; }

# item 2: started with fds 3..4200 open, COMMAND must not get the database
# socket (it lands above 4096, where the old bitmap stopped looking).
if (($(ulimit -Hn) < 4300)) 2>/dev/null && [[ $(ulimit -Hn) != unlimited ]]; then
    skip "run: fds 3..4200 open (COMMAND inherits no socket)" "hard limit on open files is $(ulimit -Hn)"
else
cap bash -c 'ulimit -n 4400 || exit 99
    for ((i = 3; i <= 4200; i++)); do eval "exec $i</dev/null"; done
    exec "$@"' fds timeout -k 10 "$TMO" "$RL" --table "$TABLE" run "${P}fds" -- \
    sh -c 'n=0; for f in /proc/$$/fd/*; do case $(readlink "$f") in socket:*) n=$((n+1));; esac; done; echo "sockets=$n"'
[[ $RC == 0 ]] && grep -qx 'sockets=0' "$W/out"
check $? "run: with fds 3..4200 open, COMMAND inherits no socket (the connection sits above fd 4096)" \
    "exit $RC" "$(show "$W/out")" "$(show "$W/err")"
fi

# With stdin and stdout closed the connection's socket may be opened as fd 0
# or 1 (the lowest free): close-on-exec must cover it there too (found by a
# review; the fds-above-3 sweep skipped 0-2).
rm -f "$W/fd01"
"$RL" --table "$TABLE" run "${P}fd01" -- \
    sh -c 'n=0; for f in /proc/$$/fd/*; do case $(readlink "$f") in socket:*) n=$((n+1));; esac; done; echo "sockets=$n" >"$1"' \
    sh "$W/fd01" <&- >&- 2>"$W/fd01.err"
RC=$?
[[ $RC == 0 ]] && grep -qx 'sockets=0' "$W/fd01"
check $? "run: with stdin and stdout closed, COMMAND inherits no socket on fd 0 or 1" \
    "exit $RC" "$(cat "$W/fd01" 2>/dev/null)" "$(show "$W/fd01.err")"

# COMMAND's ignored signals are those rowlock was started with: Connector/C
# ignores SIGPIPE in rowlock's process, and a pipeline in COMMAND must still
# die of it (`yes | head -1` printed "Broken pipe"; found by a review).
want=$(sh -c 'grep "^SigIgn" /proc/$$/status')
cap "$RL" --table "$TABLE" run "${P}sigpipe" -- sh -c 'grep "^SigIgn" /proc/$$/status; yes | head -n 1 >/dev/null'
[[ $RC == 0 ]] && [[ $(cat "$W/out") == "$want" ]] && ! [[ -s $W/err ]]
check $? "run: COMMAND starts with the ignored signals rowlock was started with (SIGPIPE not ignored)" \
    "exit $RC" "want $want" "$(show "$W/out")" "$(show "$W/err")"

# item 5: MYSQL_PWD never reaches COMMAND
cap env MYSQL_PWD=not-for-the-child "$RL" --table "$TABLE" run "${P}pwd" -- sh -c 'test -z "${MYSQL_PWD+set}"'
expect_rc 0 "run: MYSQL_PWD is removed from COMMAND's environment"

# item 13: the grammar is options, NAME, COMMAND; a word after --password is
# never the lock name, and the refusal does not echo it
cap rl run --password s3cr3t-word -- true
[[ $RC == 64 ]] && ! grep -q 's3cr3t-word' "$W/err" && (($(wc -l <"$W/err") == 1)) &&
    grep -q -- '--password takes no value' "$W/err"
check $? "run --password WORD -- CMD is refused without prompting and without echoing WORD" \
    "exit $RC" "$(show "$W/err")"
expect_usage "run: an option after NAME is refused, not run as COMMAND" rl run "${P}x" -w 5 true
cap rl run --password -- "${P}pw" true </dev/null
[[ $RC != 0 ]] && ! grep -q 'would be taken as the lock NAME' "$W/err"
check $? "run --password -- NAME CMD is the accepted form (it prompts; no terminal here)" "exit $RC" "$(show "$W/err")"

# item 9: user input in messages is escaped: one line, no raw control bytes
# esc_case DESC ARGS...: exit 64, one stderr line, no raw control byte in it
esc_case() {
    local desc=$1 lines
    shift
    cap "$RL" --table "$TABLE" "$@"
    lines=$(wc -l <"$W/err")
    ((RC == 64 && lines == 1)) && ! raw_controls "$W/err"
    check $? "escaping: $desc gives one escaped stderr line (exit 64)" "exit $RC, $lines lines" \
        "$(od -c "$W/err" | head -n 6)"
}
esc_case "--ssl-mode with a newline" --ssl-mode $'X\nrowlock: forged line' list
esc_case "--port with an OSC sequence" --port $'1\e]0;owned\a' list
esc_case "--connect-timeout with a C1 CSI" --connect-timeout $'\xc2\x9b''31m' list
esc_case "--defaults-file with a newline" --defaults-file $'/nonexistent/\nrowlock: forged' list
esc_case "run -S with ESC" run -S $'\e[2J''strategy' n true
esc_case "run --wait with a raw 0x9b byte" run --wait $'\x9b''5' n true
esc_case "run NAME with invalid UTF-8" run $'\xff\xfe''bad' true
esc_case "run: unknown option with ESC" run $'--\e[31mred' n true
cap "$RP" --table "$TABLE" --grace $'1\n''rowlock-reaper: forged'
((RC == 64 && $(wc -l <"$W/err") == 1)) && ! raw_controls "$W/err"
check $? "escaping: rowlock-reaper --grace with a newline stays one line" "$(od -c "$W/err" | head -n 4)"

# items 3 and 4: option files that are pipes, devices, FIFOs
# (no --table: the library reads [rowlock] table= and the connection from the one pipe)
cap timeout -k 10 "$TMO" "$RL" --defaults-file=<(cat "$ROWLOCK_DEFAULTS_FILE"; printf '\n[rowlock]\ntable=%s\n' "$TABLE") list
expect_rc 0 "--defaults-file=<(cat FILE) is read once and used for table= and the connection (not the default server)"
cap timeout -k 5 30 "$RL" --table "$TABLE" --defaults-file=/dev/zero list
((RC == 64)) && grep -q '/dev/zero' "$W/err"
check $? "--defaults-file=/dev/zero is refused at once (64), not read for ever" "exit $RC" "$(show "$W/err")"
mkfifo "$W/fifo.cnf"
cap timeout -k 5 30 "$RL" --table "$TABLE" --defaults-file="$W/fifo.cnf" list
((RC != 124 && RC != 137))
check $? "--defaults-file=FIFO without a writer does not hang" "exit $RC" "$(show "$W/err")"
printf '[client]\n!include /dev/zero\n' >"$W/inc-zero.cnf"
cap timeout -k 5 30 "$RL" --table "$TABLE" --defaults-file="$W/inc-zero.cnf" list
((RC == 64)) && grep -q '/dev/zero' "$W/err"
check $? "an option file with !include /dev/zero is refused (64)" "exit $RC" "$(show "$W/err")"

# ===========================================================================
tap_done
