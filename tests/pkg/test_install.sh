#!/usr/bin/env bash
# tests/pkg/test_install.sh — what a user gets from `cmake --install`: installs the
# build into a throwaway prefix, moves the prefix elsewhere (the tools must
# find their library relative to themselves, not by the path they were
# installed to), and runs the installed tools against the running server
# WITHOUT LD_LIBRARY_PATH.
#
# Environment (set by tests/pkg/pkg.cmake):
#   ROWLOCK_BUILD_DIR      the build tree to install
#   ROWLOCK_DEFAULTS_FILE  option file of the already running shared server
#   ROWLOCK_EXPECT_RPATH   1 if the build gives installed tools an $ORIGIN
#                          RUNPATH (ROWLOCK_INSTALL_RPATH), else 0: then the
#                          tools are run with LD_LIBRARY_PATH and the test
#                          says so (a build for a system prefix, e.g. /usr)
#
# Output: one "ok N - ..." / "not ok N - ..." line per check, then
# "P passed, F failed"; exit status 0 only if nothing failed.
set -u
export LC_ALL=C
unset LD_LIBRARY_PATH

: "${ROWLOCK_BUILD_DIR:?set ROWLOCK_BUILD_DIR to the build tree}"
: "${ROWLOCK_DEFAULTS_FILE:?set ROWLOCK_DEFAULTS_FILE to the option file of a running server}"
export ROWLOCK_DEFAULTS_FILE
EXPECT_RPATH=${ROWLOCK_EXPECT_RPATH:-1}

# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"
tap_workdir install


if ! out=$(cmake --install "$ROWLOCK_BUILD_DIR" --prefix "$W/first" 2>&1); then
    fail "cmake --install to a throwaway prefix" "$out"
    printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
    exit 1
fi
pass "cmake --install to a throwaway prefix"

# A prefix is relocatable: the RUNPATH is relative to the binary.
mv "$W/first" "$W/moved"
P=$W/moved
libdir=
for d in "$P"/lib "$P"/lib64 "$P"/lib/*-linux-gnu; do
    [[ -e $d/librowlock.so ]] && { libdir=$d; break; }
done

# bin/ holds the user tools only; the bench and demo are in libexec/rowlock.
bins=$(cd "$P/bin" && ls | tr '\n' ' ')
if [[ $bins == "rowlock rowlock-reaper " ]]; then
    pass "bin/ holds rowlock and rowlock-reaper only"
else
    fail "bin/ holds rowlock and rowlock-reaper only" "bin/: $bins"
fi
if [[ -x $P/libexec/rowlock/rowlock-bench && -x $P/libexec/rowlock/rowlock-demo ]]; then
    pass "rowlock-bench and rowlock-demo are in libexec/rowlock"
else
    fail "rowlock-bench and rowlock-demo are in libexec/rowlock" "$(ls -R "$P/libexec" 2>&1)"
fi

run_env=()
if [[ $EXPECT_RPATH == 1 ]]; then
    rp=$(readelf -d "$P/bin/rowlock" 2>/dev/null | grep -E 'RUNPATH|RPATH' || true)
    if [[ $rp == *'$ORIGIN/'* ]]; then
        pass "installed rowlock has an \$ORIGIN-relative RUNPATH"
    else
        fail "installed rowlock has an \$ORIGIN-relative RUNPATH" "readelf: ${rp:-none}"
    fi
else
    printf '# ROWLOCK_INSTALL_RPATH is OFF in this build: running with LD_LIBRARY_PATH\n'
    run_env=(env "LD_LIBRARY_PATH=$libdir")
fi

# Each installed program runs from the moved prefix.
for t in bin/rowlock bin/rowlock-reaper libexec/rowlock/rowlock-bench libexec/rowlock/rowlock-demo; do
    if out=$("${run_env[@]}" "$P/$t" --help 2>&1 >/dev/null) && [[ -z $out ]]; then
        pass "installed $t --help runs from a moved prefix"
    else
        fail "installed $t --help runs from a moved prefix" "$out"
    fi
done
if out=$("${run_env[@]}" "$P/bin/rowlock" --version 2>&1) && [[ $out == "rowlock "* ]]; then
    pass "installed rowlock --version: $out"
else
    fail "installed rowlock --version" "$out"
fi

# The man pages are installed where man finds them.
for pg in rowlock:1 rowlock-reaper:8 librowlock:3; do
    f=$P/share/man/man${pg#*:}/${pg%:*}.${pg#*:}.gz
    if ! command -v man >/dev/null; then
        [[ -s $f ]] && pass "man page $f installed" || fail "man page $f installed"
    elif out=$(MANPATH=$P/share/man man -w "${pg#*:}" "${pg%:*}" 2>&1) && [[ $out == "$f" ]]; then
        pass "man ${pg#*:} ${pg%:*} finds the installed page"
    else
        fail "man ${pg#*:} ${pg%:*} finds the installed page" "$out"
    fi
done

# The bash completion, one file per tool (bash-completion loads it by name).
for t in rowlock rowlock-reaper; do
    f=$P/share/bash-completion/completions/$t
    if [[ -s $f ]] && out=$(bash -c 'source "$1" && complete -p "$2"' _ "$f" "$t" 2>&1); then
        pass "bash completion for $t installed ($out)"
    else
        fail "bash completion for $t installed" "${out:-$f missing}"
    fi
done

# The zsh completion, one file for both tools (#compdef rowlock rowlock-reaper).
f=$P/share/zsh/vendor-completions/_rowlock
if [[ ! -s $f ]]; then
    fail "zsh completion installed" "$f missing"
elif [[ $(head -1 "$f") != "#compdef rowlock rowlock-reaper" ]]; then
    fail "zsh completion installed" "first line: $(head -1 "$f")"
elif command -v zsh >/dev/null && ! out=$(zsh -n "$f" 2>&1); then
    fail "zsh completion installed" "$out"
else
    pass "zsh completion installed ($f)"
fi

# The reaper's systemd units, ExecStart at the reaper under the install prefix.
u=$P/lib/systemd/system
if [[ -s $u/rowlock-reaper.timer ]] &&
    grep -qx "ExecStart=$W/first/bin/rowlock-reaper \$REAPER_ARGS" "$u/rowlock-reaper.service" 2>/dev/null; then
    pass "systemd units installed, ExecStart is the installed reaper"
else
    fail "systemd units installed, ExecStart is the installed reaper" "$(grep ExecStart "$u/rowlock-reaper.service" 2>&1)"
fi

# Against the server: schema, then a short run with the fencing token.
T=inst_locks
if out=$("${run_env[@]}" "$P/bin/rowlock" --table=$T migrate 2>&1); then
    pass "installed rowlock migrate ($out)"
else
    fail "installed rowlock migrate" "$out"
fi
# shellcheck disable=SC2016 # expanded by the shell rowlock runs
if out=$("${run_env[@]}" "$P/bin/rowlock" --table=$T run -w 10 "install-$$" -c 'echo "token=$ROWLOCK_TOKEN"' 2>&1) &&
    [[ $out =~ ^token=[0-9]+$ ]]; then
    pass "installed rowlock run holds the lock and runs the command ($out)"
else
    fail "installed rowlock run" "$out"
fi
if out=$("${run_env[@]}" "$P/bin/rowlock-reaper" --table=$T --grace 0 --quiet 2>&1); then
    pass "installed rowlock-reaper purges"
else
    fail "installed rowlock-reaper purges" "$out"
fi

tap_done
