#!/usr/bin/env bash
# tests/cli/test_trust.sh — what a local attacker or an unusual shell must not
# get from the tools (issue 25 items 1-4):
#   - option files others can write are refused (named) or skipped with a
#     warning (default search list), in rowlock and rowlock-reaper, also when
#     reached through !include;
#   - `unlock` believes only its own supervisor: another user's (or another
#     process's) listener on the handle's abstract socket is not believed, and
#     unlock never dies of SIGPIPE;
#   - `eval "$(rowlock lock ...)"` holds the lock whatever the shell does with
#     the streams (2>/dev/null, 2>&1, | cat);
#   - `run -n` on a never-used name is never refused while other clients take
#     new shared names at the same moment (a false "busy").
#
# Environment (set by tests/cli/cli.cmake): ROWLOCK_BIN_DIR, ROWLOCK_DEFAULTS_FILE.
# Own lock table (cli_trust_locks) and names prefixed with this pid.
# Output: "ok N - ..." / "not ok N - ..." lines, then "P passed, F failed".
# shellcheck disable=SC2016 # single quotes: expanded by the inner shells
set -u
export LC_ALL=C
: "${ROWLOCK_BIN_DIR:?set ROWLOCK_BIN_DIR}"
: "${ROWLOCK_DEFAULTS_FILE:?set ROWLOCK_DEFAULTS_FILE}"
export ROWLOCK_DEFAULTS_FILE
RL=$ROWLOCK_BIN_DIR/rowlock
REAPER=$ROWLOCK_BIN_DIR/rowlock-reaper
T=cli_trust_locks
P="tr$$-"
export RL T
# python3 of the system: a pyenv shim under /root is not usable by nobody.
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)
# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"
tap_workdir trust
chmod 755 "$W"

# check_exit DESC EXPECTED_STATUS ACTUAL_STATUS [diagnostics...]
check_exit() {
    local d=$1 want=$2 got=$3
    shift 3
    if [[ $got == "$want" ]]; then pass "$d"; else fail "$d" "exit $got, expected $want" "$@"; fi
}
lines() { grep -c '' "$1"; }

"$RL" --table=$T migrate >/dev/null || { fail "migrate $T"; printf '%d passed, %d failed\n' 0 1; exit 1; }

# ---- 1. option files others can write ---------------------------------------------------
install -m 600 "$ROWLOCK_DEFAULTS_FILE" "$W/good.cnf"
install -m 666 "$ROWLOCK_DEFAULTS_FILE" "$W/ww.cnf"
# What an attacker would add: a plugin of theirs.
printf '[client]\nplugin-dir=%s\ndefault-auth=evil\n' "$W/evil" >>"$W/ww.cnf"

"$RL" --defaults-file="$W/ww.cnf" --table=$T status "${P}x" >"$W/out" 2>"$W/err"
rc=$?
check_exit "--defaults-file of mode 666: refused (64)" 64 "$rc" "$(cat "$W/err")"
if [[ $(lines "$W/err") == 1 ]] && grep -q "ww.cnf.*writable by other users (mode 0666" "$W/err"; then
    pass "--defaults-file of mode 666: one line naming the file and its mode"
else
    fail "--defaults-file of mode 666: one line naming the file and its mode" "$(cat "$W/err")"
fi
ROWLOCK_DEFAULTS_FILE=$W/ww.cnf "$RL" --table=$T status "${P}x" >/dev/null 2>"$W/err"
check_exit "ROWLOCK_DEFAULTS_FILE of mode 666: refused (64)" 64 $? "$(cat "$W/err")"
"$REAPER" --defaults-file="$W/ww.cnf" --table=$T --dry-run >/dev/null 2>"$W/err"
rc=$?
if [[ $rc != 0 ]] && grep -q "writable by other users" "$W/err"; then
    pass "rowlock-reaper --dry-run refuses it too (exit $rc)"
else
    fail "rowlock-reaper --dry-run refuses it too" "exit $rc" "$(cat "$W/err")"
fi
# o+w alone, and a group-writable file of another user
install -m 602 "$ROWLOCK_DEFAULTS_FILE" "$W/ow.cnf"
"$RL" --defaults-file="$W/ow.cnf" --table=$T status "${P}x" >/dev/null 2>"$W/err"
check_exit "--defaults-file of mode 602 (o+w): refused (64)" 64 $? "$(cat "$W/err")"
if [[ $(id -u) == 0 ]]; then
    install -m 664 -o 65534 "$ROWLOCK_DEFAULTS_FILE" "$W/gw.cnf"
    "$RL" --defaults-file="$W/gw.cnf" --table=$T status "${P}x" >/dev/null 2>"$W/err"
    check_exit "--defaults-file of another user, group-writable: refused (64)" 64 $? "$(cat "$W/err")"
    chmod 644 "$W/gw.cnf"
    "$RL" --defaults-file="$W/gw.cnf" --table=$T status "${P}x" >/dev/null 2>"$W/err"
    check_exit "--defaults-file of another user, mode 644: read (1: not held)" 1 $? "$(cat "$W/err")"
else
    skip "group-writable file of another user (needs root to chown)"
    skip "another user's file of mode 644"
fi
# through !include and !includedir of a safe file
install -m 666 /dev/null "$W/inc.cnf"
printf '[client]\nplugin-dir=%s\n' "$W/evil" >"$W/inc.cnf"
{ cat "$W/good.cnf"; printf '\n!include %s\n' "$W/inc.cnf"; } >"$W/outer.cnf"
"$RL" --defaults-file="$W/outer.cnf" --table=$T status "${P}x" >/dev/null 2>"$W/err"
rc=$?
if [[ $rc == 64 ]] && grep -q "inc.cnf (included) is writable by other users" "$W/err"; then
    pass "!include of a mode-666 file from the named file: refused (64)"
else
    fail "!include of a mode-666 file from the named file: refused (64)" "exit $rc" "$(cat "$W/err")"
fi
mkdir "$W/conf.d"
install -m 646 "$W/inc.cnf" "$W/conf.d/z.cnf"
{ cat "$W/good.cnf"; printf '\n!includedir %s\n' "$W/conf.d"; } >"$W/outerdir.cnf"
"$RL" --defaults-file="$W/outerdir.cnf" --table=$T status "${P}x" >/dev/null 2>"$W/err"
check_exit "!includedir with a mode-646 file: refused (64)" 64 $? "$(cat "$W/err")"
# The default search list: a world-writable ~/.my.cnf is skipped with a
# warning, and the settings of the files before it still apply.
mkdir -p "$W/home" "$W/mysqlhome"
install -m 600 "$ROWLOCK_DEFAULTS_FILE" "$W/mysqlhome/my.cnf"
printf '[client]\nsocket=%s\nport=1\nhost=127.0.0.1\nprotocol=tcp\n[rowlock]\ntable=evil_table\n' \
    "$W/nonexistent.sock" >"$W/home/.my.cnf"
chmod 666 "$W/home/.my.cnf"
env -u ROWLOCK_DEFAULTS_FILE HOME="$W/home" MYSQL_HOME="$W/mysqlhome" MARIADB_HOME="$W/mysqlhome" \
    "$RL" --table=$T status "${P}x" >"$W/out" 2>"$W/err"
rc=$?
check_exit "world-writable ~/.my.cnf: ignored, the other files connect (status: 1 not held)" 1 "$rc" "$(cat "$W/err")"
if grep -q "warning: option file .*home/.my.cnf is writable by other users (mode 0666): ignored" "$W/err"; then
    pass "world-writable ~/.my.cnf: a warning names it"
else
    fail "world-writable ~/.my.cnf: a warning names it" "$(cat "$W/err")"
fi
chmod 600 "$W/home/.my.cnf"
env -u ROWLOCK_DEFAULTS_FILE HOME="$W/home" MYSQL_HOME="$W/mysqlhome" MARIADB_HOME="$W/mysqlhome" \
    "$RL" --table=$T status "${P}x" >"$W/out" 2>"$W/err"
check_exit "the same ~/.my.cnf of mode 600 is read (its port 1 fails: 69)" 69 $? "$(cat "$W/err")"

# ---- 3. eval "$(rowlock lock ...)" whatever the shell does with the streams ---------------
for form in '2>/dev/null' '2>&1' '| cat'; do
    n="${P}eval-${form//[^a-z]/}"
    out=$(timeout 30 bash -c '
        eval "$(eval "\"\$RL\" --table=\$T lock -n \"\$1\" $2")" || { echo "lock=$?"; exit 90; }
        echo "lock=0"
        sleep 1
        "$RL" unlock --check; echo "check=$?"
        "$RL" --table=$T status "$1" >/dev/null 2>&1; echo "status=$?"
        "$RL" unlock; echo "unlock=$?"
    ' _ "$n" "$form" 2>&1)
    if [[ $out == *lock=0* && $out == *check=0* && $out == *status=0* && $out == *unlock=0* ]]; then
        pass "eval \"\$(rowlock lock N $form)\": held until unlock"
    else
        fail "eval \"\$(rowlock lock N $form)\": held until unlock" "$out"
    fi
done
# ... and still released when the script's shell exits.
n="${P}eval-exit"
timeout 20 bash -c 'eval "$("$RL" --table=$T lock -n "$1" | cat)"; echo "$ROWLOCK_HANDLE"' _ "$n" >"$W/h" 2>&1
released=1
for _ in $(seq 50); do
    "$RL" --table=$T status "$n" >/dev/null 2>&1 || { released=0; break; }
    sleep 0.1
done
check_exit "eval \"\$(rowlock lock N | cat)\": released when the script's shell exits" 0 "$released" "$(cat "$W/h")"

# ---- 2. unlock believes only its own supervisor -----------------------------------------
# listen.py NAME: bind the abstract socket NAME and answer every request "0 held".
cat >"$W/listen.py" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1])
s.listen(8)
if sys.argv[2] == "-":
    print("ready", flush=True)
else:
    open(sys.argv[2], "w").write("ready\n")
while True:
    c, _ = s.accept()
    try:
        c.recv(64)
        c.sendall(b"0 held 'forged' (token 1)\n")
    except OSError:
        pass
    c.close()
EOF
chmod 644 "$W/listen.py"
n="${P}forged"
h=$(timeout 20 bash -c 'eval "$("$RL" --table=$T lock -n "$1")" || exit 90; echo "$ROWLOCK_HANDLE"; "$RL" unlock >/dev/null' _ "$n" 2>"$W/err")
if [[ $h =~ ^[0-9]+\.[0-9a-f]{32}$ ]]; then
    # another user answers on the name of the dead supervisor
    if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null; then
        rm -f "$W/ready"
        setpriv --reuid=65534 --regid=65534 --clear-groups "$PY" "$W/listen.py" "rowlock-lock/$h" - \
            >"$W/ready" 2>"$W/py.err" &
        lpid=$!
        for _ in $(seq 50); do grep -q ready "$W/ready" 2>/dev/null && break; sleep 0.1; done
        "$RL" unlock --check "$h" >"$W/out" 2>"$W/err"
        rc=$?
        check_exit "another user bound the handle's socket: unlock --check says no supervisor (1)" 1 "$rc" \
            "$(cat "$W/err" "$W/py.err")"
        if grep -q "uid 65534" "$W/err" && [[ $(lines "$W/err") == 1 ]]; then
            pass "... in one line naming the impostor's uid"
        else
            fail "... in one line naming the impostor's uid" "$(cat "$W/err")"
        fi
        "$RL" unlock "$h" >/dev/null 2>"$W/err"
        check_exit "another user bound the handle's socket: unlock says no supervisor (1)" 1 $? "$(cat "$W/err")"
        kill "$lpid" 2>/dev/null
        wait "$lpid" 2>/dev/null
    else
        skip "another user's listener (needs root and setpriv)"
        skip "another user's listener: message"
        skip "another user's listener: unlock"
    fi
    # our own uid, but not the supervisor's pid
    rm -f "$W/ready"
    "$PY" "$W/listen.py" "rowlock-lock/$h" "$W/ready" 2>"$W/py.err" &
    lpid=$!
    for _ in $(seq 50); do grep -q ready "$W/ready" 2>/dev/null && break; sleep 0.1; done
    "$RL" unlock --check "$h" >/dev/null 2>"$W/err"
    check_exit "a process of ours that is not the handle's pid: unlock --check says no supervisor (1)" 1 $? \
        "$(cat "$W/err" "$W/py.err")"
    kill "$lpid" 2>/dev/null
    wait "$lpid" 2>/dev/null
else
    fail "lock for the forged-answer case" "$h" "$(cat "$W/err")"
fi
# Another user's unlock of our live supervisor: a message and 1, not SIGPIPE (141).
if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null; then
    n="${P}other-user"
    out=$(timeout 30 bash -c '
        eval "$("$RL" --table=$T lock -n "$1")" || exit 90
        for i in 1 2 3 4 5; do
            setpriv --reuid=65534 --regid=65534 --clear-groups "$RL" unlock "$ROWLOCK_HANDLE" 2>>"$2"
            echo "other=$?"
        done
        "$RL" unlock --check; echo "check=$?"
        "$RL" unlock; echo "unlock=$?"
    ' _ "$n" "$W/other.err" 2>&1)
    if [[ $out != *other=141* && $out == *other=1* && $out != *other=0* && $out == *check=0* &&
          $out == *unlock=0* ]] && grep -q "unlock: no lock supervisor of yours" "$W/other.err"; then
        pass "another user's unlock: refused with a message and 1 (no SIGPIPE), lock still held"
    else
        fail "another user's unlock: refused with a message and 1 (no SIGPIPE), lock still held" "$out" \
            "$(cat "$W/other.err")"
    fi
else
    skip "another user's unlock (needs root and setpriv)"
fi

# ---- 4. no false "busy" for run -n on a never-used name ------------------------------------
# Deterministic: another transaction holds the gap a new name goes into (as a
# shared acquire of another new name does between its first statement and
# its commit) for 0.6 s; run -n of a name nobody holds starts inside it.
if command -v mariadb >/dev/null; then
    mariadb --defaults-file="$ROWLOCK_DEFAULTS_FILE" -e "START TRANSACTION;
        UPDATE $T SET token = token WHERE name = '${P}gap-zz'; SELECT SLEEP(0.6); COMMIT" >/dev/null 2>"$W/gap.err" &
    gpid=$!
    sleep 0.2
    "$RL" --table=$T run -n "${P}gap-aa" true >/dev/null 2>"$W/err"
    rc=$?
    wait "$gpid"
    check_exit "run -n on a name nobody holds, its index gap locked for a moment: granted (0)" 0 "$rc" \
        "$(cat "$W/err" "$W/gap.err")"
else
    skip "gap lock case (no mariadb client)"
fi
# A name held is still refused at once, even while its row is locked.
n="${P}held-nb"
out=$(timeout 30 bash -c '
    eval "$("$RL" --table=$T lock "$1")" || exit 90
    "$RL" --table=$T run -n "$1" true; echo "nb=$?"
    "$RL" unlock
' _ "$n" 2>&1)
if [[ $out == *nb=1* ]]; then
    pass "run -n on a held name: busy (1)"
else
    fail "run -n on a held name: busy (1)" "$out"
fi
# Shared takes of new names, from two loops, while run -n takes new names:
# each -n must be granted (exit 0). Before the fix a shared take's
# transaction held a gap lock that the -n INSERT met (1205 with
# innodb_lock_wait_timeout=0), reported as busy (exit 1).
stop=$W/stop-shared
for k in 1 2 3 4; do
    (
        i=0
        while [[ ! -e $stop ]]; do
            i=$((i + 1))
            "$RL" --table=$T run -s "${P}fb-$k-$i-s" true >/dev/null 2>>"$W/shared.err"
        done
    ) &
done
busy=0 other=0 runs=100
for ((i = 0; i < runs; i++)); do
    "$RL" --table=$T run -n "${P}fb-n-$i" true >/dev/null 2>>"$W/nb.err"
    rc=$?
    case $rc in 0) ;; 1) busy=$((busy + 1)) ;; *) other=$((other + 1)) ;; esac
done
touch "$stop"
wait
if [[ $busy == 0 && $other == 0 ]]; then
    pass "run -n on $runs never-used names beside concurrent shared takes: never busy"
else
    fail "run -n on $runs never-used names beside concurrent shared takes: never busy" \
        "busy $busy, other errors $other" "$(sort "$W/nb.err" | uniq -c | head -5)"
fi

tap_done
