#!/usr/bin/env bash
# tests/docs/test_docs.sh — what the docs say about the build, the CLI and the API
# is what the build, the CLI and the API do. No server.
#
# Usage: test_docs.sh CHECK SRCDIR ...
#   readme  SRCDIR SONAME CPACKCONFIG VERSION
#           README.md (and the Python binding) name the library's soname
#           (SONAME, from the built target) and its Debian package (from
#           CPackConfig.cmake), never another; "Before X.Y" in README, docs/
#           and man/ names no version later than the project's (VERSION)
#   unknown SRCDIR ROWLOCK
#           `rowlock nosuch` (and a missing command) lists every command of
#           `rowlock --help`, and nothing else
#   tables  SRCDIR ROWLOCK
#           a lock table named like one of rowlock's own objects (what sql/
#           creates: rowlock_schema, {{table}}_SUFFIX) is refused (64) with a
#           message that lists exactly those names
#   api     SRCDIR LIBROWLOCK.so
#           man/librowlock.3 has a .Fn for every function the library exports
#           (nm -D) and every ROWLOCK_EXTERN function of include/rowlock.h,
#           and its synopsis gives their prototypes as the header does
#   architecture SRCDIR [DOC]
#           docs/ARCHITECTURE.md (or DOC) names every src/*.c and src/*.h,
#           and every path (src/, include/, tests/, man/, cmake/), statement
#           tag (rowlock:<tag>) and identifier (rowlock_*, rowlock__*,
#           ROWLOCK_*) it names exists in the sources
set -u
export LC_ALL=C
CHECK=${1:?usage: test_docs.sh readme|unknown|tables|api|architecture SRCDIR ...}
SRC=${2:?usage: test_docs.sh CHECK SRCDIR ...}

# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"
# check_none DESCRIPTION PROBLEMS: pass when PROBLEMS is empty.
check_none() { if [[ -z $2 ]]; then pass "$1"; else fail "$1" "$2"; fi; }

case $CHECK in
readme)
    SONAME=${3:?soname} CPACKCONFIG=${4:?CPackConfig.cmake} VERSION=${5:?project version}
    pkg=$(sed -n 's/^set(CPACK_DEBIAN_LIB_PACKAGE_NAME "\(.*\)")$/\1/p' "$CPACKCONFIG")
    if [[ -z $pkg ]]; then
        fail "CPACK_DEBIAN_LIB_PACKAGE_NAME is set in $CPACKCONFIG"
    else
        pass "the library package is $pkg, the soname $SONAME"
    fi
    readme=$SRC/README.md
    check_none "README.md names the soname $SONAME" "$(grep -qF "$SONAME" "$readme" || echo "not found")"
    check_none "README.md names no other librowlock.so.N" \
        "$(grep -noE 'librowlock\.so\.[0-9]+' "$readme" | grep -vF ":$SONAME" || :)"
    check_none "README.md names the library package $pkg" \
        "$(grep -qE "(^|[^A-Za-z0-9_.-])$pkg([^A-Za-z0-9_.-]|$)" "$readme" || echo "not found")"
    check_none "README.md names no other librowlockN package" \
        "$(grep -noE 'librowlock[0-9]+' "$readme" | grep -vE ":$pkg$" || :)"
    check_none "python/rowlock loads $SONAME" \
        "$(grep -nE '^_SONAME = ' "$SRC/python/rowlock/__init__.py" | grep -vF "\"$SONAME\"" || :)"
    # "Before 0.3, -s meant ..." in 0.2.0 promised a release that had not
    # happened: a "Before X.Y" must name this version or an older one.
    later=""
    while IFS= read -r hit; do
        v=$(grep -oE 'Before [0-9]+\.[0-9]+' <<<"${hit#*:*:}" | head -1) && v=${v#Before }
        [[ -n $v ]] || continue
        if [[ $(printf '%s\n%s\n' "$v" "${VERSION%.*}" | sort -V | tail -1) != "${VERSION%.*}" ]]; then
            later+="$hit (the project is $VERSION)"$'\n'
        fi
    done < <(cd "$SRC" && { grep -nHE 'Before [0-9]+\.[0-9]+' README.md docs/*.md man/* || :; })
    check_none "no \"Before X.Y\" in README.md, docs/ or man/ names a version after $VERSION" "$later"
    ;;
unknown)
    ROWLOCK=${3:?the built rowlock}
    # The commands of `rowlock --help`: the lines of its "Commands:" block.
    cmds=$("$ROWLOCK" --help | sed -n '/^Commands:/,/^$/p' | sed -n 's/^  \([a-z][a-z-]*\)\( .*\)\{0,1\}$/\1/p' | sort -u)
    if [[ -z $cmds ]]; then
        fail "rowlock --help has a Commands: block"
    else
        pass "rowlock --help lists the commands ${cmds//$'\n'/ }"
    fi
    for args in nosuch ""; do
        # shellcheck disable=SC2086 # "" runs rowlock without arguments
        msg=$("$ROWLOCK" $args 2>&1 >/dev/null); rc=$?
        what="rowlock${args:+ $args}"
        check_none "$what exits 64" "$( ((rc == 64)) || echo "exit $rc: $msg")"
        # The list between "(" and "; see rowlock --help)".
        listed=$(sed -n 's/.*(\([a-z, -]*\); see rowlock --help).*/\1/p' <<<"$msg" | tr -d ' ' | tr ',' '\n' | sort -u)
        if [[ -z $listed ]]; then
            fail "$what lists exactly the commands of rowlock --help" "no command list in: $msg"
        else
            check_none "$what lists exactly the commands of rowlock --help" \
                "$(diff <(echo "$cmds") <(echo "$listed") | sed -n 's/^</missing:/p; s/^>/not in --help:/p')"
        fi
    done
    ;;
tables)
    ROWLOCK=${3:?the built rowlock}
    suffixes=$(grep -ohE '\{\{table\}\}_[a-z]+' "$SRC"/sql/[0-9]*.sql | sed 's/^{{table}}//' | sort -u)
    pass "sql/ creates rowlock_schema and <table>{${suffixes//$'\n'/,}}"
    for t in rowlock_schema $(sed 's/^/locks/' <<<"$suffixes"); do
        # Refused before any connection is made: no server needed.
        msg=$("$ROWLOCK" --table="$t" --host=127.0.0.1 --port=1 status x 2>&1 >/dev/null); rc=$?
        listed=$(sed -n "s/.*: rowlock_schema and names ending in \(.*\) are rowlock's own tables.*/\1/p" <<<"$msg" |
            sed 's/, / /g; s/ or / /g' | tr ' ' '\n' | sort -u)
        if ((rc != 64)) || [[ -z $listed ]]; then
            fail "--table=$t is refused (64) as one of rowlock's own tables" "exit $rc: $msg"
        else
            check_none "--table=$t is refused (64), naming exactly the reserved names" \
                "$(diff <(echo "$suffixes") <(echo "$listed") | sed -n 's/^</not named:/p; s/^>/not created by sql\/:/p')"
        fi
    done
    ;;
api)
    LIB=${3:?the built librowlock.so}
    page=$SRC/man/librowlock.3
    exported=$(nm -D --defined-only "$LIB" | awk '$2 == "T" && $3 ~ /^rowlock_/ { print $3 }' | sort -u)
    declared=$(sed -n 's/^ROWLOCK_EXTERN .*[ *]\(rowlock_[a-z0-9_]*\)(.*/\1/p' "$SRC/include/rowlock.h" | sort -u)
    if [[ -z $exported || -z $declared ]]; then
        fail "nm -D $LIB and include/rowlock.h give the exported functions" "exported: $exported" "declared: $declared"
    else
        pass "$(wc -w <<<"$exported") functions exported, $(wc -w <<<"$declared") declared ROWLOCK_EXTERN"
    fi
    missing=""
    for f in $(printf '%s\n%s\n' "$exported" "$declared" | sort -u); do
        grep -qE "^\.Fn $f( |$)" "$page" || missing+=" $f"
    done
    check_none "librowlock.3 has a .Fn for every exported and every ROWLOCK_EXTERN function" \
        "${missing:+missing:$missing}"
    # And nothing that is not a function of the library.
    unknown=""
    for f in $(sed -n 's/^\.Fn \(rowlock_[a-z0-9_]*\).*/\1/p' "$page" | sort -u); do
        grep -qx "$f" <<<"$declared" || unknown+=" $f"
    done
    check_none "every rowlock_ function librowlock.3 names is declared in rowlock.h" "${unknown:+unknown:$unknown}"
    # The synopsis gives each prototype as the header declares it.
    hdr=$(tr '\n' ' ' <"$SRC/include/rowlock.h" | sed 's/;/;\n/g' |
        sed -n 's/.*ROWLOCK_EXTERN \(ROWLOCK_WARN_UNUSED \)\{0,1\}\(.*rowlock_[a-z0-9_]*(.*\);$/\2/p' |
        tr -s ' ' | sed 's/( /(/g; s/ )/)/g; s/ *$//' | grep -vE '[#/{]' | sort)
    syn=$(sed -n '/^\.Sh SYNOPSIS/,/^\.Sh /p' "$page" | awk '
        /^\.Ft / { ret = substr($0, 5); next }
        /^\.Fn / {
            line = substr($0, 5); name = line; sub(/ .*/, "", name)
            args = ""; n = split(line, q, "\"")
            for (i = 2; i <= n; i += 2) args = args (args == "" ? "" : ", ") q[i]
            print ret ((ret ~ /\*$/) ? "" : " ") name "(" args ")"
        }' | sort)
    check_none "librowlock.3's synopsis has the prototypes of rowlock.h ($(wc -l <<<"$hdr"))" \
        "$(diff <(echo "$hdr") <(echo "$syn") | sed -n 's/^</rowlock.h:  /p; s/^>/synopsis:   /p')"
    ;;
architecture)
    DOC=$(realpath "${3:-$SRC/docs/ARCHITECTURE.md}")
    [[ -r $DOC ]] || { fail "$DOC exists"; tap_done; exit; }
    missing=$(cd "$SRC/src" && for f in *.c *.h; do grep -qwF "$f" "$DOC" || echo "src/$f"; done)
    check_none "every src/*.c and src/*.h is named in ${DOC##*/}" "$missing"
    # A path with a placeholder (src/strategy_<name>.c) names no file.
    paths=$(grep -oE '(^|[^A-Za-z0-9_./-])(src|include|tests|man|cmake)/[A-Za-z0-9_./<>-]*[A-Za-z0-9_>]' "$DOC" |
        sed 's/^[^a-z]//' | grep -v '<' | sort -u)
    check_none "every path it names exists ($(wc -w <<<"$paths"))" \
        "$(for p in $paths; do [[ -e $SRC/$p ]] || echo "$p"; done)"
    have_tags=$(grep -ohE '/\* rowlock:[a-z0-9-]+ \*/' "$SRC"/src/*.c | sed 's#/\* rowlock:##; s# \*/##' | sort -u)
    tags=$(grep -oE 'rowlock:[a-z0-9-]*[a-z0-9]' "$DOC" | sed 's/^rowlock://' | sort -u)
    check_none "every statement tag it names is a statement's ($(wc -w <<<"$tags"))" \
        "$(comm -23 <(echo "$tags") <(echo "$have_tags"))"
    # Identifiers (file names such as rowlock_int.h are not), looked up in the
    # code with its comments stripped (a name a stale comment still uses does
    # not count); NAME_* names a family: some identifier must start with NAME_.
    ids=$(sed -E 's#[A-Za-z0-9_./-]+\.(c|h|md|in|cmake|[0-9])\b##g' "$DOC" |
        grep -oE '(^|[^A-Za-z0-9_])(rowlock_[A-Za-z0-9_]*[A-Za-z0-9]|ROWLOCK_[A-Z0-9_]*[A-Z0-9])(_\*)?' |
        sed -E 's/^[^A-Za-z]//' | sort -u)
    words=$({ for f in "$SRC"/src/*.[ch] "$SRC"/include/*.h; do cc -w -fpreprocessed -dD -E -P "$f" 2>/dev/null; done
              cat "$SRC"/CMakeLists.txt "$SRC"/cmake/*.cmake; } | grep -oE '[A-Za-z_][A-Za-z0-9_]*' | sort -u)
    check_none "every identifier it names is in the sources ($(wc -w <<<"$ids"))" \
        "$(for i in $ids; do
            if [[ $i == *'*' ]]; then grep -q "^${i%\*}" <<<"$words" || echo "$i"
            else grep -qx "$i" <<<"$words" || echo "$i"; fi
        done)"
    ;;
*)
    echo "test_docs.sh: unknown check '$CHECK' (readme, unknown, tables, api, architecture)" >&2
    exit 64
    ;;
esac

tap_done
