#!/usr/bin/env bash
# tests/test_cli_json.sh — machine output: --json on every command that
# prints a result (migrate, release --force, status, list, lock, the reaper)
# is one valid JSON document with the documented keys; a flag that does not
# apply (--version --json, --help --json, --json --quiet, run --json) is
# refused with 64.
#
# Environment (set by tests/cli.cmake): ROWLOCK_BIN_DIR, ROWLOCK_DEFAULTS_FILE.
# Validates with python3's json module (tools/install-deps installs python3).
# Own lock table (cli_json_locks). Output: "ok N - ..." lines, "P passed, F failed".
set -u
export LC_ALL=C
: "${ROWLOCK_BIN_DIR:?set ROWLOCK_BIN_DIR}"
: "${ROWLOCK_DEFAULTS_FILE:?set ROWLOCK_DEFAULTS_FILE}"
export ROWLOCK_DEFAULTS_FILE
RL=$ROWLOCK_BIN_DIR/rowlock
RP=$ROWLOCK_BIN_DIR/rowlock-reaper
T=cli_json_locks
P="js$$-"

N=0 PASSED=0 FAILED=0
pass() { N=$((N + 1)); PASSED=$((PASSED + 1)); printf 'ok %d - %s\n' "$N" "$1"; }
fail() {
    N=$((N + 1)); FAILED=$((FAILED + 1)); printf 'not ok %d - %s\n' "$N" "$1"; shift
    local l; for l in "$@"; do [[ -n $l ]] && printf '%s\n' "$l" | sed 's/^/#   /'; done
}
# json_ok DESC TEXT PYTHON_EXPR: TEXT is exactly one JSON document on one line
# and EXPR (over `d`) is true.
json_ok() {
    local out
    if out=$(python3 -c '
import json, sys
text = sys.argv[1]
assert text.endswith("\n") and text.count("\n") == 1, "not one line: %r" % text
d = json.loads(text)
ok = eval(sys.argv[2])
sys.exit(0 if ok else 1)' "$2"$'\n' "$3" 2>&1); then
        pass "$1"
    else
        fail "$1" "output: $2" "check: $3" "$out"
    fi
}

out=$("$RL" --table=$T migrate --json)
json_ok "migrate --json: table, schema_from, schema_to, dry_run" "$out" \
    "d['table'] == '$T' and d['schema_to'] >= 1 and d['dry_run'] is False and isinstance(d['schema_from'], int)"
out=$("$RL" --table=$T migrate --json --dry-run)
json_ok "migrate --json --dry-run: nothing to do" "$out" \
    "d['dry_run'] is True and d['schema_from'] == d['schema_to']"

n="${P}a \"quoted\" name"
eval "$("$RL" --table=$T lock -l 60 "$n")" || fail "lock for the JSON checks"
out=$("$RL" --table=$T status --json "$n")
json_ok "status --json: the lock object" "$out" \
    "d['name'] == '''$n''' and d['held'] is True and d['token'] == $ROWLOCK_TOKEN and d['owner'] == '$ROWLOCK_OWNER'"
out=$("$RL" --table=$T list --json)
json_ok "list --json: an array of lock objects" "$out" \
    "isinstance(d, list) and any(x['name'] == '''$n''' and x['token'] == $ROWLOCK_TOKEN for x in d)"
out=$("$RL" --table=$T release --force --json "$n")
rc=$?
json_ok "release --force --json: released, and the lock as it was" "$out" \
    "d['released'] is True and d['lock']['name'] == '''$n''' and d['lock']['token'] == $ROWLOCK_TOKEN and d['lock']['held'] is True"
[[ $rc == 0 ]] && pass "release --force --json: exit 0" || fail "release --force --json: exit 0" "exit $rc"
out=$("$RL" --table=$T release --force --json "$n")
rc=$?
json_ok "release --force --json of a free name: released false" "$out" \
    "d['released'] is False and d['lock']['name'] == '''$n''' and d['lock']['held'] is False"
[[ $rc == 1 ]] && pass "release --force --json of a free name: exit 1" || fail "release --force --json of a free name: exit 1" "exit $rc"
"$RL" unlock >/dev/null 2>&1 # lost (75): the supervisor ends

out=$(bash -c '"$1" --table="$2" lock --json "$3"' _ "$RL" $T "${P}j")
json_ok "lock --json: handle, name, token, owner, strategy, lease_ms, pids" "$out" \
    "set(d) == {'handle','name','token','owner','strategy','lease_ms','supervisor_pid','watched_pid'} and d['name'] == '${P}j' and d['strategy'] == 'insert' and d['lease_ms'] == 30000"

out=$("$RP" --table=$T --grace 0 --json)
json_ok "rowlock-reaper --json: the summary object" "$out" \
    "d['table'] == '$T' and isinstance(d['purged'], int) and d['complete'] is True"

# Flags that do not apply are refused, not ignored.
for args in "--version --json" "--json --version" "--version extra" "--help --json" "run --json x true" \
    "unlock --json"; do
    # shellcheck disable=SC2086 # word-split on purpose
    "$RL" $args >/dev/null 2>&1
    rc=$?
    [[ $rc == 64 ]] && pass "rowlock $args: refused (64)" || fail "rowlock $args: refused (64)" "exit $rc"
done
for args in "--version --json" "--json --quiet" "--help --json"; do
    # shellcheck disable=SC2086
    "$RP" $args >/dev/null 2>&1
    rc=$?
    [[ $rc == 64 ]] && pass "rowlock-reaper $args: refused (64)" || fail "rowlock-reaper $args: refused (64)" "exit $rc"
done
"$RL" --version >/dev/null && pass "rowlock --version alone: 0" || fail "rowlock --version alone: 0"
"$RL" --help status >/dev/null && pass "rowlock --help COMMAND: 0" || fail "rowlock --help COMMAND: 0"

printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
[[ $FAILED -eq 0 ]]
