#!/usr/bin/env bash
# Issue 18: the Debian packages, as a user gets them. On the CI machine, as root:
#   1. build librowlockN, librowlock-dev and rowlock with `cpack -G DEB` (a
#      build configured for /usr: multiarch libdir, no RUNPATH);
#   2. install them with `apt-get install ./build-deb/*.deb`;
#   3. run the installed tools from PATH against a private sandbox server
#      (--version, migrate, run, status --json, list, reaper), build an outside
#      program against the installed -dev package (pkg-config, find_package),
#      render the installed man pages, load the completion, verify the units;
#   4. remove, then purge, and check nothing of them is left.
# Before installing, lintian checks the three packages: any error or warning
# (or a hardening tag: stack protector, FORTIFY, BIND_NOW) fails the test,
# informational tags and overrides are printed; the library's exports must be
# the symbols file's (cmake/deb/symbols.in).
# Called from the end of .ci/run; runs on its own too: bash .ci/package.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8
[[ $(id -u) -eq 0 ]] || { echo "package.sh: run as root (it installs packages)" >&2; exit 1; }

# Our packages that dpkg still knows (installed, or config-files after remove).
pkgs_installed() {
    { dpkg-query -W -f='${Package} ${Status}\n' rowlock librowlock-dev 'librowlock[0-9]*' 2>/dev/null || true; } |
        awk '$NF == "installed" || $NF == "config-files" {print $1}'
}
# A machine kept from an earlier run may still have them.
old=$(pkgs_installed)
[[ -z $old ]] || apt-get purge -y -qq $old

# The packages need nothing beyond tools/install-deps (dpkg-dev comes with
# build-essential; file is used by CPack to find binaries).
command -v file >/dev/null || apt-get install -y -qq --no-install-recommends file
command -v lintian >/dev/null || apt-get install -y -qq --no-install-recommends lintian

set -x
rm -rf build-deb
cmake -S . -B build-deb -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROWLOCK_BUILD_TESTS=OFF
cmake --build build-deb -j2
(cd build-deb && cpack -G DEB)
ls -l build-deb/*.deb
soversion=$(sed -n 's/^ROWLOCK_SOVERSION:[A-Z]*=//p' build-deb/CMakeCache.txt)
[[ -n $soversion ]] || soversion=$(grep -oE 'set\(ROWLOCK_SOVERSION [0-9]+' CMakeLists.txt | grep -oE '[0-9]+$')
libpkg=librowlock$soversion
for p in rowlock librowlock-dev "$libpkg"; do
    ls build-deb/"${p}"_*.deb >/dev/null
done

# ---- lintian, symbols -------------------------------------------------------------
# (lintian warns on stderr that it runs as root: not part of the report. With
# --show-overrides its --fail-on counts overridden tags too: the verdict is
# read from the report, where overridden tags are "O:" lines.)
lintian --fail-on none --display-info --show-overrides --tag-display-limit 0 \
    build-deb/*.deb 2>/dev/null | tee build-deb/lintian.txt
if grep -E '^[EW]: ' build-deb/lintian.txt; then
    echo "package.sh: lintian reports errors or warnings (above)" >&2; exit 1
fi
if grep -E '^[EWI]: .*hardening-' build-deb/lintian.txt; then
    echo "package.sh: binaries built without the hardening flags (ROWLOCK_HARDEN)" >&2; exit 1
fi
{ set +x; } 2>/dev/null
exported=$(nm -D --defined-only build-deb/librowlock.so."$soversion" | awk '{print $3}' | sort)
listed=$(sed -n 's/^ \([^@ ]*\)@Base .*/\1/p' build-deb/deb/lib/symbols | sort)
if [[ $exported != "$listed" ]]; then
    echo "package.sh: librowlock's exports differ from cmake/deb/symbols.in (+ exported, not listed;" \
         "- listed, not exported). A new function gets a line with the version that brings it;" \
         "a removed one is an ABI break (SOVERSION):" >&2
    diff <(echo "$listed") <(echo "$exported") | grep '^[<>]' | sed 's/^>/+/; s/^</-/' >&2
    exit 1
fi
echo "package.sh: lintian: no error or warning; symbols file lists the $(echo "$exported" | wc -l) exports"
set -x

sbx=$(mktemp -d /tmp/rowlock-pkg-ci.XXXXXXXX)
cleanup() {
    set +e
    tools/rowlock-sandbox stop "$sbx/db" >/dev/null 2>&1
    rm -rf "$sbx"
    local left
    left=$(pkgs_installed)
    [[ -z $left ]] || apt-get purge -y -qq $left >/dev/null 2>&1
}
trap cleanup EXIT

apt-get install -y ./build-deb/*.deb
dpkg -L rowlock "$libpkg" librowlock-dev | sort
# The ldconfig trigger ran (no ldconfig in the maintainer scripts).
ldconfig -p | grep -F "librowlock.so.$soversion "

# ---- the installed tools --------------------------------------------------------
hash -r
[[ $(command -v rowlock) == /usr/bin/rowlock && $(command -v rowlock-reaper) == /usr/bin/rowlock-reaper ]]
# (`! cmd` would not stop a set -e script: explicit checks.)
if command -v rowlock-bench || command -v rowlock-demo; then exit 1; fi   # libexec, not on PATH
if readelf -d /usr/bin/rowlock | grep -E 'RUNPATH|RPATH'; then exit 1; fi  # the loader finds it
rowlock --version
rowlock-reaper --version
/usr/libexec/rowlock/rowlock-bench --help >/dev/null

tools/rowlock-sandbox start "$sbx/db" >/dev/null
export ROWLOCK_DEFAULTS_FILE=$sbx/db/my.cnf
rowlock migrate
rowlock migrate --dry-run
# shellcheck disable=SC2016 # expanded by the shell rowlock runs
out=$(rowlock run -w 10 ci-package -c 'echo "token=$ROWLOCK_TOKEN"; rowlock status --json "$ROWLOCK_NAME"')
echo "$out"
[[ $out =~ ^token=([0-9]+) && $out == *'"held":true'*'"token":'"${BASH_REMATCH[1]},"* ]]
bash -c 'eval "$(rowlock lock -w 10 ci-package-lock)" && rowlock status ci-package-lock && rowlock unlock'
rowlock list
rowlock status ci-package || [[ $? -eq 1 ]]                 # free again: exit 1
rowlock-reaper --grace 0 --json
tests/pkg/consumer/check /usr                                    # -dev: pkg-config and find_package

# ---- man pages, completion, units ----------------------------------------------
for page in "1 rowlock" "8 rowlock-reaper" "3 librowlock"; do
    # shellcheck disable=SC2086 # "SECTION NAME"
    man -w $page
    # shellcheck disable=SC2086
    err=$(MANWIDTH=80 man --warnings $page 2>&1 >/dev/null)
    [[ -z $err ]] || { echo "man $page: $err" >&2; exit 1; }
done
bash -c 'source /usr/share/bash-completion/completions/rowlock && complete -p rowlock rowlock-reaper'
if command -v zsh >/dev/null; then zsh -n /usr/share/zsh/vendor-completions/_rowlock; fi
systemd-analyze verify /usr/lib/systemd/system/rowlock-reaper.service /usr/lib/systemd/system/rowlock-reaper.timer
systemd-analyze security --offline=yes --threshold=20 /usr/lib/systemd/system/rowlock-reaper.service | tail -1
grep -x 'ExecStart=/usr/bin/rowlock-reaper $REAPER_ARGS' /usr/lib/systemd/system/rowlock-reaper.service

# ---- remove, purge, nothing left --------------------------------------------------
tools/rowlock-sandbox stop "$sbx/db" >/dev/null
files=$(dpkg -L rowlock "$libpkg" librowlock-dev | while read -r f; do [[ -f $f || -L $f ]] && echo "$f"; done)
apt-get remove -y rowlock librowlock-dev "$libpkg"
# What remove keeps (packages with maintainer scripts stay "config-files") goes now.
left=$(pkgs_installed)
[[ -z $left ]] || apt-get purge -y $left
[[ -z $(pkgs_installed) ]]
if ldconfig -p | grep -F librowlock.so; then exit 1; fi       # the trigger ran on removal too
left=$(for f in $files; do [[ -e $f || -L $f ]] && echo "$f"; done; true)
[[ -z $left ]] || { echo "package.sh: left after purge: $left" >&2; exit 1; }
hash -r
if command -v rowlock; then exit 1; fi
echo "package.sh: built, installed, ran, rendered, verified and purged $(echo "$files" | wc -l) files of rowlock, $libpkg, librowlock-dev"
