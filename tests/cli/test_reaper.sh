#!/usr/bin/env bash
# tests/cli/test_reaper.sh — rowlock-reaper's report on one server (issue 29
# item 4; the cluster side is in tests/cluster/test_cluster.c, group reaper):
#   - a dry run counts exactly what the real run then purges (crashed
#     holders' rows, released rows);
#   - without --max-seconds nothing says "more remain" (text) and complete
#     is true (JSON);
#   - a run the budget stopped says "stopped by --max-seconds, more remain"
#     only when rows are left: one that purged the last row before its
#     budget ran out is complete;
#   - --max-seconds is a budget: a pause between batches ends with it
#     (--pause 60000 does not keep a 1 s budget waiting a minute);
#   - --wait-leases is accepted and changes nothing on one server.
#
# Environment (tests/cli/cli.cmake): ROWLOCK_BIN_DIR, ROWLOCK_DEFAULTS_FILE.
# Own lock table (cli_reaper_locks). Output: "ok N - ..." lines, "P passed, F failed".
set -u
export LC_ALL=C
: "${ROWLOCK_BIN_DIR:?set ROWLOCK_BIN_DIR}"
: "${ROWLOCK_DEFAULTS_FILE:?set ROWLOCK_DEFAULTS_FILE}"
export ROWLOCK_DEFAULTS_FILE
RL=$ROWLOCK_BIN_DIR/rowlock
RP=$ROWLOCK_BIN_DIR/rowlock-reaper
T=cli_reaper_locks

# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"
tap_workdir reaper

db() { mariadb --defaults-file="$ROWLOCK_DEFAULTS_FILE" -N -B -e "$1"; }
# json_get TEXT KEY: the value of KEY in the one JSON object TEXT.
json_get() { python3 -c 'import json, sys; v = json.loads(sys.argv[1])[sys.argv[2]]; print(str(v).lower() if isinstance(v, bool) else v)' "$1" "$2"; }
# ghosts N PREFIX: N rows held by an owner that is gone (a crashed holder),
# their lease ended a minute ago.
ghosts() {
    local i vals=""
    for ((i = 1; i <= $1; i++)); do
        vals+="${vals:+,}('$2$i', 1, 'ghost', 1, $i, 1, 2000000, UTC_TIMESTAMP(6) - INTERVAL 62 SECOND,"
        vals+=" UTC_TIMESTAMP(6) - INTERVAL 60 SECOND)"
    done
    db "INSERT INTO \`$T\` (name, strategy, owner, count, token, gen, lease_us, acquired_at, expires_at) VALUES $vals"
}

"$RL" --table=$T migrate >/dev/null 2>"$W/err"
check $? "migrate $T" "$(cat "$W/err")"
db "DELETE FROM \`$T\`"

# ---- a dry run counts what the real run purges -------------------------------
ghosts 4 crashed-
for i in 1 2 3; do "$RL" --table=$T run -l 5 "released-$i" true || fail "run released-$i"; done
out=$("$RP" --table=$T --grace 0 --dry-run --json)
would=$(json_get "$out" purged)
out=$("$RP" --table=$T --grace 0 --json)
purged=$(json_get "$out" purged)
left=$(db "SELECT COUNT(*) FROM \`$T\`")
[[ $would == 7 && $purged == 7 && $left == 0 ]] && pass "dry run: would purge $would, the real run purged $purged (4 crashed, 3 released), none left" \
    || fail "dry run counts what the real run purges" "would $would, purged $purged, left $left" "$out"
[[ $(json_get "$out" complete) == true && $(json_get "$out" unjudged) == 0 ]] \
    && pass "without --max-seconds: complete, nothing unjudged on one server" \
    || fail "without --max-seconds: complete, nothing unjudged on one server" "$out"

# ---- without --max-seconds, no "more remain" ---------------------------------
ghosts 2 text-
out=$("$RP" --table=$T --grace 0 2>&1)
[[ $out == "purged 2 stale locks from $T in 1 batch, "* && $out != *"more remain"* && $out != *"--wait-leases"* ]] \
    && pass "text: purged 2, no 'more remain' without --max-seconds" || fail "text: no 'more remain' without --max-seconds" "$out"

# ---- stopped by the budget: "more remain" only if some do --------------------
# One row, batches of 1: the first batch is full, so the loop goes on; the
# pause outlasts the budget, which then stops it with nothing left.
ghosts 1 last-
out=$("$RP" --table=$T --grace 0 --batch 1 --pause 1000 --max-seconds 0.3 --json)
[[ $(json_get "$out" purged) == 1 && $(json_get "$out" complete) == true ]] \
    && pass "the budget ran out after the last row: complete (nothing remains)" \
    || fail "the budget ran out after the last row: complete (nothing remains)" "$out"
ghosts 1 last-text-
out=$("$RP" --table=$T --grace 0 --batch 1 --pause 1000 --max-seconds 0.3)
[[ $out == "purged 1 stale lock from"* && $out != *"more remain"* ]] \
    && pass "text: the budget ran out after the last row: no 'more remain'" \
    || fail "text: the budget ran out after the last row: no 'more remain'" "$out"

# ---- --max-seconds is a budget: the pause ends with it -----------------------
ghosts 3 budget-
out=$("$RP" --table=$T --grace 0 --batch 1 --pause 60000 --max-seconds 1 --json)
dur=$(json_get "$out" duration_s)
# 1 s of budget; a minute's pause would be the bug (generous bound: a busy box).
[[ $(json_get "$out" purged) == 1 && $(json_get "$out" complete) == false ]] && awk -v d="$dur" 'BEGIN { exit !(d < 20) }' \
    && pass "--max-seconds 1 with --pause 60000: stopped after ${dur} s, 1 purged, complete false" \
    || fail "--max-seconds 1 with --pause 60000: stopped within the budget" "$out"
out=$("$RP" --table=$T --grace 0 --batch 1 --pause 60000 --max-seconds 0.5)
[[ $out == "purged 1 stale lock from $T in 1 batch, "*"; stopped by --max-seconds, more remain" ]] \
    && pass "text: stopped by the budget with a row left: 'stopped by --max-seconds, more remain'" \
    || fail "text: stopped by the budget with a row left" "$out"

# ---- --wait-leases on one server: the server's clock judges, nothing waits -----
ghosts 2 wait-
out=$("$RP" --table=$T --grace 0 --wait-leases --json)
[[ $(json_get "$out" purged) == 3 && $(json_get "$out" wait_leases) == true && $(json_get "$out" waited_s) == 0.0 \
    && $(json_get "$out" complete) == true ]] \
    && pass "--wait-leases on one server: purged at once (1 left before + 2), no wait" \
    || fail "--wait-leases on one server: purged at once, no wait" "$out"

tap_done
