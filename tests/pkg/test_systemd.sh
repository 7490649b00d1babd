#!/usr/bin/env bash
# tests/pkg/test_systemd.sh — the reaper's systemd units (systemd/) pass
# `systemd-analyze verify`, and the service's offline security exposure stays
# at most 2.0 ("OK" on systemd's 0-10 scale; it is 1.2 as written).
#
# Usage: test_systemd.sh SYSTEMD_SRC_DIR REAPER_BINARY
#   The service is written with ExecStart= pointing at REAPER_BINARY (verify
#   checks that the program exists). No running systemd is needed.
# Exit 77 (ctest: skipped) without systemd-analyze (Debian package systemd).
set -u
export LC_ALL=C.UTF-8 SYSTEMD_LOG_COLOR=0 SYSTEMD_COLORS=0
SRC=${1:?usage: test_systemd.sh SYSTEMD_SRC_DIR REAPER_BINARY}
REAPER=$(realpath -- "${2:?usage: test_systemd.sh SYSTEMD_SRC_DIR REAPER_BINARY}")
MAX_EXPOSURE=2.0

command -v systemd-analyze >/dev/null || {
    echo "skipped: systemd-analyze not installed (Debian package systemd)"
    exit 77
}
# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"
tap_workdir systemd


sed "s|@ROWLOCK_REAPER_PATH@|$REAPER|g" "$SRC/rowlock-reaper.service.in" >"$W/rowlock-reaper.service"
cp "$SRC/rowlock-reaper.timer" "$W/"

# --man=no: the man pages are checked by docs_man_pages; after a package install
# CI verifies with man page lookup too (.ci/package.sh).
if out=$(systemd-analyze verify --man=no "$W/rowlock-reaper.service" "$W/rowlock-reaper.timer" 2>&1) &&
    [[ -z $out ]]; then
    pass "systemd-analyze verify: service and timer"
else
    fail "systemd-analyze verify: service and timer" "$out"
fi

out=$(systemd-analyze security --offline=yes --threshold=20 "$W/rowlock-reaper.service" 2>&1)
level=$(sed -n 's/.*Overall exposure level for rowlock-reaper.service: \([0-9.]*\).*/\1/p' <<<"$out")
if [[ -n $level ]] && awk -v l="$level" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(l <= m) }'; then
    pass "service security exposure $level <= $MAX_EXPOSURE (systemd-analyze security --offline)"
else
    fail "service security exposure <= $MAX_EXPOSURE" "$(grep -E '^✗|Overall' <<<"$out")"
fi

# What the unit promises in rowlock-reaper(8): the option file as a credential,
# a transient user, the timer starting the service.
for kv in "LoadCredential=reaper.cnf:/etc/rowlock/reaper.cnf" "DynamicUser=yes" \
    "ProtectSystem=strict" "NoNewPrivileges=yes" "PrivateTmp=yes"; do
    if grep -qx "$kv" "$W/rowlock-reaper.service"; then pass "service has $kv"; else fail "service has $kv"; fi
done
if grep -qx 'WantedBy=timers.target' "$W/rowlock-reaper.timer"; then
    pass "timer is wanted by timers.target"
else
    fail "timer is wanted by timers.target"
fi

tap_done
