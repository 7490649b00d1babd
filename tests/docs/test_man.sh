#!/usr/bin/env bash
# tests/docs/test_man.sh — the man pages in man/ render without warnings and
# document every option the tools' --help shows.
#
# Usage: test_man.sh MANDIR [BINDIR]
#   MANDIR  the man/ directory (rowlock.1, rowlock-reaper.8, librowlock.3)
#   BINDIR  where the built rowlock and rowlock-reaper are (optional: without
#           it the option cross-check is skipped)
#
# Renders with every renderer that is installed: mandoc -Tlint (warnings and
# errors), groff -ww -z, and man -l --warnings (what a user's `man` does).
# Exit 77 (ctest: skipped) if none is installed.
set -u
export LC_ALL=C.UTF-8 MANWIDTH=80
MANDIR=${1:?usage: test_man.sh MANDIR [BINDIR]}
BINDIR=${2:-}
pages=("$MANDIR/rowlock.1" "$MANDIR/rowlock-reaper.8" "$MANDIR/librowlock.3")

# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"

renderers=0
for p in "${pages[@]}"; do
    name=${p##*/}
    if command -v mandoc >/dev/null; then
        renderers=1
        if out=$(mandoc -Tlint -W warning "$p" 2>&1) && [[ -z $out ]]; then
            pass "$name: mandoc -Tlint -W warning is clean"
        else
            fail "$name: mandoc -Tlint -W warning is clean" "$out"
        fi
    fi
    if command -v groff >/dev/null; then
        renderers=1
        if out=$(groff -ww -z -mandoc "$p" 2>&1) && [[ -z $out ]]; then
            pass "$name: groff -ww -z is clean"
        else
            fail "$name: groff -ww -z is clean" "$out"
        fi
    fi
    if command -v man >/dev/null && command -v groff >/dev/null; then
        if text=$(man --warnings -l "$p" 2>"${TMPDIR:-/tmp}/rowlock-man.$$") &&
            err=$(cat "${TMPDIR:-/tmp}/rowlock-man.$$") && [[ -z $err && $text == *NAME* ]]; then
            pass "$name: man -l renders without warnings ($(wc -l <<<"$text") lines)"
        else
            fail "$name: man -l renders without warnings" "$(cat "${TMPDIR:-/tmp}/rowlock-man.$$")"
        fi
        rm -f "${TMPDIR:-/tmp}/rowlock-man.$$"
    fi
done
if [[ $renderers == 0 ]]; then
    echo "skipped: neither mandoc nor groff is installed (tools/install-deps installs them)"
    exit 77
fi

# Every option a tool's --help lists is in its man page, and every command of
# `rowlock --help` has its entry. The lists come from --help, so a new command
# or option is checked as soon as --help shows it.
# missing_opts PAGE HELPTEXT: the options of HELPTEXT missing from PAGE.
missing_opts() {
    local page=$1 help=$2 o miss=""
    # Long options anywhere in the text; short ones from the option lines
    # ("  -s, --shared", "  -x, -e, --exclusive").
    for o in $(grep -oE -- '--[a-z][a-z-]*' <<<"$help" | sort -u) \
        $(sed -nE 's/^ +((-[A-Za-z], )+).*/\1/p' <<<"$help" | grep -oE -- '-[A-Za-z]' | sort -u); do
        # mdoc writes --opt as "Fl -opt", -s as "Fl s".
        grep -qE -- "Fl ${o#-}( |$)" "$page" || miss+=" $o"
    done
    printf '%s' "$miss"
}
if [[ -n $BINDIR ]]; then
    # The commands: the "Commands:" block of rowlock --help.
    cmds=$("$BINDIR/rowlock" --help | sed -n '/^Commands:/,/^$/p' |
        sed -n 's/^  \([a-z][a-z-]*\)\( .*\)\{0,1\}$/\1/p' | sort -u)
    if [[ -n $cmds ]]; then
        pass "rowlock --help lists commands: ${cmds//$'\n'/ }"
    else
        fail "rowlock --help lists commands (a Commands: block)"
    fi
    help=$("$BINDIR/rowlock" --help)
    for c in $cmds; do
        if h=$("$BINDIR/rowlock" "$c" --help 2>&1); then
            help+=$'\n'$h
        else
            fail "rowlock $c --help exits 0" "$h"
        fi
    done
    miss=$(missing_opts "$MANDIR/rowlock.1" "$help")
    if [[ -z $miss ]]; then
        pass "rowlock.1 documents every option of rowlock --help and COMMAND --help"
    else
        fail "rowlock.1 documents every option of rowlock --help and COMMAND --help" "missing:$miss"
    fi
    for c in $cmds; do
        if grep -qE "^\.(It )?Cm $c( |$)" "$MANDIR/rowlock.1"; then
            pass "rowlock.1 documents the command '$c'"
        else
            fail "rowlock.1 documents the command '$c'"
        fi
    done
    # And the other way: a command the page describes is one rowlock has.
    for c in $(sed -n 's/^\.It Cm \([a-z][a-z-]*\).*/\1/p' "$MANDIR/rowlock.1" | sort -u); do
        grep -qx "$c" <<<"$cmds" || fail "rowlock.1's command '$c' is in rowlock --help"
    done
    miss=$(missing_opts "$MANDIR/rowlock-reaper.8" "$("$BINDIR/rowlock-reaper" --help)")
    if [[ -z $miss ]]; then
        pass "rowlock-reaper.8 documents every option of rowlock-reaper --help"
    else
        fail "rowlock-reaper.8 documents every option of rowlock-reaper --help" "missing:$miss"
    fi
fi

tap_done
