#!/usr/bin/env bash
# tests/cli/test_privileges.sh — issue 13: the suite's main cases as the
# least-privilege account of sql/grants.sql, and a read-only account's clear
# refusal. Needs the shared sandbox's admin access (ROWLOCK_SANDBOX_DIR/root.cnf);
# with an external test server it skips (exit 0, says so).
#
# Environment (tests/CMakeLists.txt): ROWLOCK_BIN_DIR, ROWLOCK_DEFAULTS_FILE,
# ROWLOCK_SANDBOX_DIR, ROWLOCK_GRANTS (sql/grants.sql).
set -u
export LC_ALL=C
: "${ROWLOCK_BIN_DIR:?}" "${ROWLOCK_DEFAULTS_FILE:?}" "${ROWLOCK_GRANTS:?}"
RL=$ROWLOCK_BIN_DIR/rowlock
RP=$ROWLOCK_BIN_DIR/rowlock-reaper
DEMO=$ROWLOCK_BIN_DIR/rowlock-demo
ROOT=${ROWLOCK_SANDBOX_DIR:-}/root.cnf
TABLE=t_privileges
# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"
tap_workdir priv
PW=$(LC_ALL=C tr -dc 'A-Za-z0-9' </dev/urandom | head -c 20)

admin() { mariadb --defaults-file="$ROOT" "$@"; }
tap_cleanup_first() {
    admin -e "DROP USER IF EXISTS 'rowlock_lp'@'127.0.0.1', 'rowlock_lp'@'localhost',
        'rowlock_ro'@'127.0.0.1', 'rowlock_ro'@'localhost'" 2>/dev/null
}

if [[ ! -r $ROOT ]] || ! admin -e 'SELECT 1' >/dev/null 2>&1; then
    echo "ok 1 - # SKIP no admin access to the test server (external server?)"
    exit 0
fi

# The lock table, installed by the owner account (schema changes are admin work).
"$RL" --table "$TABLE" migrate >"$W/out" 2>&1
check $? "migrate $TABLE as the owner account" "$(cat "$W/out")"

# Accounts: least privilege from sql/grants.sql (user, password, table
# substituted), and read-only.
conf() { # conf USER FILE: the shared server's settings with another account
    grep -E '^(\[client\]|host|port|socket|database)' "$ROWLOCK_DEFAULTS_FILE" >"$2"
    printf 'user=%s\npassword=%s\n' "$1" "$PW" >>"$2"
    chmod 600 "$2"
}
{
    for h in 127.0.0.1 localhost; do
        sed -e "s/{{table}}/$TABLE/g" -e "s/'rowlock_app'@'%'/'rowlock_lp'@'$h'/g" \
            -e "s/'change-me'/'$PW'/" -e '/^--/d' "$ROWLOCK_GRANTS"
        echo "CREATE USER IF NOT EXISTS 'rowlock_ro'@'$h' IDENTIFIED BY '$PW';"
        echo "GRANT SELECT ON rowlock.* TO 'rowlock_ro'@'$h';"
    done
} >"$W/grants.sql"
admin <"$W/grants.sql" >"$W/out" 2>&1
check $? "sql/grants.sql applies (accounts rowlock_lp, rowlock_ro)" "$(cat "$W/out")"
conf rowlock_lp "$W/lp.cnf"
conf rowlock_ro "$W/ro.cnf"
export ROWLOCK_DEFAULTS_FILE

lp() { timeout -k 10 120 "$@"; }
P="priv$$-"
# Main cases as the least-privilege account, every strategy.
for s in insert for-update optimistic; do
    out=$(lp "$RL" --defaults-file="$W/lp.cnf" --table "$TABLE" run -S "$s" "${P}$s" sh -c 'echo "$ROWLOCK_TOKEN"' 2>"$W/err")
    [[ $? == 0 && $out =~ ^[0-9]+$ ]]
    check $? "least privilege: run -S $s acquires, runs, releases (token $out)" "$(cat "$W/err")"
    lp "$DEMO" --defaults-file="$W/lp.cnf" --table "$TABLE" --procs 3 --rounds 3 --strategy "$s" --name "${P}demo-$s" >"$W/out" 2>&1
    check $? "least privilege: 3 contending processes, $s: tokens strictly increase" "$(tail -n 5 "$W/out")"
done
# Shared locks and semaphores (the holders table): grants.sql covers them.
out=$(lp "$RL" --defaults-file="$W/lp.cnf" --table "$TABLE" run -s "${P}shared" \
    "$RL" --defaults-file="$W/lp.cnf" --table "$TABLE" run --permits 2 -n "${P}shared" sh -c 'echo "$ROWLOCK_TOKEN"' 2>"$W/err")
[[ $? == 0 && $out =~ ^[0-9]+$ ]]
check $? "least privilege: run -s, and inside it run --permits 2 -n on the same name (token $out)" "$(cat "$W/err")"
lp "$RL" --defaults-file="$W/lp.cnf" --table "$TABLE" run -l 30 "${P}held" sh -c 'sleep 5' 2>"$W/err" &
holder=$!
for ((i = 0; i < 50; i++)); do  # until the holder has it
    lp "$RL" --defaults-file="$W/lp.cnf" --table "$TABLE" status "${P}held" >/dev/null 2>&1 && break
    sleep 0.2
done
lp "$RL" --defaults-file="$W/lp.cnf" --table "$TABLE" run -n "${P}held" true 2>"$W/err2"
rc=$?
[[ $rc == 1 ]]
check $? "least privilege: a held lock is busy for another process (conflict exit 1)" "exit $rc" "$(cat "$W/err2")"
lp "$RL" --defaults-file="$W/lp.cnf" --table "$TABLE" status "${P}held" >"$W/out" 2>&1
check $? "least privilege: status" "$(cat "$W/out")"
lp "$RL" --defaults-file="$W/lp.cnf" --table "$TABLE" list >"$W/out" 2>&1
check $? "least privilege: list" "$(cat "$W/out")"
lp "$RL" --defaults-file="$W/lp.cnf" --table "$TABLE" release --force "${P}held" >"$W/out" 2>&1
check $? "least privilege: release --force" "$(cat "$W/out")"
wait "$holder"
lp "$RP" --defaults-file="$W/lp.cnf" --table "$TABLE" --grace 0 >"$W/out" 2>&1
check $? "least privilege: rowlock-reaper" "$(cat "$W/out")"

# Fenced writes, the SQL form, as the least-privilege account through the
# mariadb client under `rowlock run` (README "Fenced writes"): the current
# token commits; a token that is not the current grant's fails with
# SQLSTATE RLF01 and its insert is not kept.
for h in 127.0.0.1 localhost; do
    echo "GRANT SELECT, INSERT ON rowlock.\`${TABLE}_data\` TO 'rowlock_lp'@'$h';"
done | { echo "DROP TABLE IF EXISTS rowlock.\`${TABLE}_data\`; CREATE TABLE rowlock.\`${TABLE}_data\` (token BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB;"; cat; } |
    admin >"$W/out" 2>&1
check $? "data table for fenced writes" "$(cat "$W/out")"
fenced() { # fenced TOKEN-EXPR: one fenced transaction under rowlock run (sh arithmetic)
    lp "$RL" --defaults-file="$W/lp.cnf" --table "$TABLE" run "${P}fenced" sh -c '
        mariadb --defaults-file="$1" -e "START TRANSACTION;
            CALL \`$2_fence\`('"'"'$ROWLOCK_NAME'"'"', $(($3)));
            INSERT INTO \`$2_data\` VALUES ($ROWLOCK_TOKEN);
            COMMIT;" && echo "$ROWLOCK_TOKEN"' sh "$W/lp.cnf" "$TABLE" "$1"
}
out=$(fenced 'ROWLOCK_TOKEN' 2>"$W/err")
[[ $? == 0 && $out =~ ^[0-9]+$ ]] && [[ $(admin -N -e "SELECT COUNT(*) FROM rowlock.\`${TABLE}_data\` WHERE token = $out") == 1 ]]
check $? "least privilege: CALL ${TABLE}_fence(name, token) in a transaction under rowlock run commits (token $out)" "$(cat "$W/err")"
fenced 'ROWLOCK_TOKEN - 1' >"$W/out" 2>"$W/err"
rc=$?
((rc != 0)) && grep -q 'RLF01' "$W/err" && [[ $(admin -N -e "SELECT COUNT(*) FROM rowlock.\`${TABLE}_data\`") == 1 ]]
check $? "least privilege: a token that is not the current grant's fails (SQLSTATE RLF01) and its insert is not kept (exit $rc)" "$(cat "$W/err" "$W/out")"
admin -e "DROP TABLE IF EXISTS rowlock.\`${TABLE}_data\`" >/dev/null 2>&1

# The read-only account: a clear one-line refusal naming the missing right.
lp "$RL" --defaults-file="$W/ro.cnf" --table "$TABLE" run "${P}ro" true >"$W/out" 2>"$W/err"
rc=$?
((rc != 0)) && (($(wc -l <"$W/err") == 1)) && grep -Eqi 'denied' "$W/err" && ! grep -q . "$W/out"
check $? "read-only account: run is refused in one line naming the denial (exit $rc: $(head -c 160 "$W/err"))" "$(cat "$W/err")"
lp "$RL" --defaults-file="$W/ro.cnf" --table "$TABLE" list >"$W/out" 2>&1
check $? "read-only account: list works" "$(cat "$W/out")"

tap_done
