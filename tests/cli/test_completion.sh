#!/usr/bin/env bash
# tests/cli/test_completion.sh — the bash completion (completion/rowlock.bash):
# commands, options, option values, and lock names from the database.
#
# Usage: test_completion.sh COMPLETION_FILE BINDIR [db]
#   without "db": no server; lock-name completion must offer nothing, print
#   nothing and return quickly when the database does not answer.
#   with "db": ROWLOCK_DEFAULTS_FILE names a running server; held locks'
#   names (also with spaces and quotes) are offered.
#
# Each check simulates a TAB: COMP_WORDS split as bash does (also at '='),
# then calls the completion function and compares COMPREPLY.
set -u
export LC_ALL=C
FILE=${1:?usage: test_completion.sh COMPLETION_FILE BINDIR [db]}
BIN=${2:?usage: test_completion.sh COMPLETION_FILE BINDIR [db]}
MODE=${3:-unit}
RL=$BIN/rowlock
# The zsh completion: beside the bash one.
ZFILE=${ROWLOCK_ZSH_COMPLETION:-$(dirname -- "$FILE")/_rowlock}
# shellcheck source=../completion/rowlock.bash
source "$FILE"

# shellcheck source=tests/lib/tap.bash
. "$(dirname "$0")/../lib/tap.bash"
TAP_KILL_SIGNAL=TERM
tap_workdir comp

# zcomp LINE: sets REPLY to the sorted, space-joined candidates zsh offers
# for a TAB at the end of LINE: an interactive zsh -f on a pty (zsh/zpty)
# with compinit over the directory of $ZFILE, compadd wrapped to print what
# it adds. The tools are found on PATH. The dump file is in $W, never
# /dev/null: zsh's compdump moves its file onto that path even with -D, and
# as root that replaced /dev/null with a regular file (then every user but
# root got "Permission denied" writing to it: a Galera joiner's SST died).
zcomp() {
    cat >"$W/zcap.zsh" <<'ZEOF'
zmodload zsh/zpty || exit 1
zpty z zsh -f -i
zpty -w z "PROMPT='>'; fpath=(${(q)1} \$fpath); autoload -Uz compinit; compinit -u -D -d ${(q)3}"
zpty -w z 'compadd() { if [[ "$*" == *-[OAD]* ]]; then builtin compadd "$@"; return; fi; local -a __h; builtin compadd -A __h "$@"; (( $#__h )) || return 1; local h; for h in $__h; do print -r -- "<CAND>$h</CAND>"; done; builtin compadd "$@"; }'
# TAB completes, then says it is done (no typeahead: zsh may cut a
# completion short when more input is pending).
zpty -w z 'comp-then-done() { zle complete-word; print -r -- "<DO""NE>"; }; zle -N comp-then-done'
zpty -w z "bindkey '^I' comp-then-done; print -r -- '<REA''DY>'"
zpty -r z out '*<READY>*'
zpty -n -w z "$2"$'\t'
out=
zpty -r z out '*<DONE>*'
print -r -- "$out" | grep -o '<CAND>[^<]*</CAND>' | sed 's/<CAND>//; s/<\/CAND>//' | sort -u
zpty -d z
ZEOF
    REPLY=$(PATH=$BIN:$PATH timeout 30 zsh -f "$W/zcap.zsh" "$(dirname -- "$ZFILE")" "$1" "$W/zcompdump" | tr '\n' ' ')
    REPLY=${REPLY% }
}
# zexpect DESC LINE EXPECTED: zsh offers exactly EXPECTED. About one TAB in
# 15 on the pty comes back without the candidates (the same line then
# answers right: the harness, not the completion), so a wrong answer is
# asked for again, up to 3 times; a wrong completion is wrong every time.
zexpect() {
    local try
    for try in 1 2 3; do
        zcomp "$2"
        [[ $REPLY == "$3" ]] && break
    done
    if [[ $REPLY == "$3" ]]; then pass "zsh: $1"; else fail "zsh: $1" "line:     '$2'" "expected: '$3'" "got:      '$REPLY'"; fi
}
HAVE_ZSH=0
command -v zsh >/dev/null && [[ -f $ZFILE ]] && HAVE_ZSH=1

# comp LINE [FUNCTION]: sets REPLY to the sorted, space-joined COMPREPLY for
# a TAB at the end of LINE.
comp() {
    local line=$1 fn=${2:-_rowlock} p
    local -a parts
    COMP_LINE=$line COMP_POINT=${#line} COMP_WORDS=()
    read -ra parts <<<"$line"
    for p in "${parts[@]}"; do
        while [[ $p == *=* ]]; do
            [[ -n ${p%%=*} ]] && COMP_WORDS+=("${p%%=*}")
            COMP_WORDS+=("=")
            p=${p#*=}
        done
        [[ -n $p ]] && COMP_WORDS+=("$p")
    done
    [[ $line == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    "$fn" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    REPLY=$(printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ')
    REPLY=${REPLY% }
}

# expect DESC LINE EXPECTED [FUNCTION]
expect() {
    comp "$2" "${4:-_rowlock}"
    if [[ $REPLY == "$3" ]]; then pass "$1"; else fail "$1" "line:     '$2'" "expected: '$3'" "got:      '$REPLY'"; fi
}
# expect_has DESC LINE WORD...: every WORD is offered
expect_has() {
    local d=$1 l=$2 w miss=""
    shift 2
    comp "$l"
    for w in "$@"; do [[ " $REPLY " == *" $w "* ]] || miss+=" $w"; done
    if [[ -z $miss ]]; then pass "$d"; else fail "$d" "line: '$l'" "missing:$miss" "got: '${REPLY:0:300}'"; fi
}

if [[ $MODE != db ]]; then
    # A server that does not answer: a closed port on loopback.
    printf '[client]\nhost=127.0.0.1\nport=1\nuser=nobody\n' >"$W/down.cnf"
    export ROWLOCK_DEFAULTS_FILE=$W/down.cnf

    expect "commands" "$RL " "help list lock metrics migrate permits release run status unlock"
    expect "a command by prefix" "$RL st" "status"
    expect_has "connection options before the command" "$RL --" \
        --defaults-file --host --port --socket --user --password --database --table \
        --ssl-mode --ssl-ca --connect-timeout --help --version
    expect "a connection option's value is skipped when finding the command" "$RL --table t " \
        "help list lock metrics migrate permits release run status unlock"
    expect "--ssl-mode=VALUE" "$RL --ssl-mode=VER" "VERIFY_CA VERIFY_IDENTITY"
    expect "--ssl-mode VALUE" "$RL --ssl-mode RE" "REQUIRED"
    expect_has "run's options" "$RL run --" --strategy --nonblock --wait --lease \
        --conflict-exit-code --verbose --help --table
    expect "--strategy=" "$RL run --strategy=" "for-update insert optimistic"
    expect "-S VALUE" "$RL run -S f" "for-update"
    expect_has "run's flock(1) options" "$RL run --" --shared --exclusive --permits --nb --timeout \
        --command --close --no-fork --version
    expect "-s takes no value (shared)" "$RL run -s f" ""
    expect "status's options" "$RL status --j" "--json"
    expect "list's options" "$RL list --s" "--socket --ssl-ca --ssl-mode --stale"
    expect "release's options" "$RL release --f" "--force"
    expect "release's --json" "$RL release --j" "--json"
    expect "migrate's options" "$RL migrate --d" "--database --defaults-file --dry-run"
    expect "metrics's options" "$RL metrics --n" "--names"
    expect "permits's --json" "$RL permits --j" "--json"
    expect "migrate's --json" "$RL migrate --j" "--json"
    expect "help COMMAND" "$RL help r" "release run"
    expect_has "lock's options" "$RL lock --" --strategy --nonblock --wait --lease --pid --verbose
    expect "unlock's options" "$RL unlock --" "--check --downgrade --help"
    expect_has "run NAME COMMAND: commands from PATH" "$RL run -w 5 job ech" echo
    expect "run NAME -c: the shell command is not completed" "$RL run job -c " ""
    expect "run NAME -: -c, --command or --" "$RL run -n job -" "-- --command -c"
    touch "$W/some-file"
    expect "run NAME COMMAND ARG: files" "$RL run job ls $W/some-f" "$W/some-file"
    expect "--defaults-file=FILE: files" "$RL --defaults-file=$W/some-f" "$W/some-file"
    expect "rowlock-reaper --metrics-file=FILE: files" "rowlock-reaper --metrics-file=$W/some-f" "$W/some-file" _rowlock_reaper
    expect "rowlock-reaper options" "rowlock-reaper --p" "--password --pause --port" _rowlock_reaper
    expect "rowlock-reaper --pause=" "rowlock-reaper --pause=" "0 auto" _rowlock_reaper
    comp "rowlock-reaper --" _rowlock_reaper
    miss=""
    for o in --grace --batch --pause --max-seconds --dry-run --json --quiet --metrics-file --help --version \
        --defaults-file --table; do
        [[ " $REPLY " == *" $o "* ]] || miss+=" $o"
    done
    if [[ -z $miss ]]; then pass "rowlock-reaper's options"; else fail "rowlock-reaper's options" "missing:$miss"; fi

    # The zsh completion (completion/_rowlock): valid zsh, and every option
    # that a command's --help lists is in that command's part of it.
    if ! command -v zsh >/dev/null; then
        N=$((N + 1)); PASSED=$((PASSED + 1)); printf 'ok %d - # SKIP zsh is not installed (zsh completion)\n' "$N"
    elif [[ ! -f $ZFILE ]]; then
        fail "the zsh completion exists" "no file $ZFILE"
    else
        if out=$(zsh -n "$ZFILE" 2>&1) && [[ -z $out ]]; then
            pass "zsh -n: the zsh completion is valid zsh"
        else
            fail "zsh -n: the zsh completion is valid zsh" "$out"
        fi
        # zsh_part CMD: the text that completes CMD's options (its case
        # branch, plus the option lists and helpers it names).
        zsh_part() {
            local part
            if [[ $1 == rowlock-reaper ]]; then
                part=$(sed -n '/service == rowlock-reaper/,/return ret/p' "$ZFILE")
            else
                part=$(sed -n "/^ *($1)\$/,/;;/p" "$ZFILE")
            fi
            [[ $part == *'$conn'* ]] && part+=$(sed -n '/^ *local -a conn=(/,/^ *)$/p' "$ZFILE")
            [[ $part == *'$lockopts'* ]] && part+=$(sed -n '/^ *local -a lockopts=(/,/^ *)$/p' "$ZFILE")
            [[ $part == *_rowlock_command* ]] && part+=$(sed -n '/^_rowlock_command()/,/^}/p' "$ZFILE")
            printf '%s\n' "$part"
        }
        zexpect "commands" "rowlock " "help list lock metrics migrate permits release run status unlock"
        zexpect "a connection option's value is skipped" "rowlock --table t " \
            "help list lock metrics migrate permits release run status unlock"
        zexpect "--strategy=" "rowlock run --strategy=" "for-update insert optimistic"
        zexpect "--ssl-mode=VALUE" "rowlock --ssl-mode=VER" "VERIFY_CA VERIFY_IDENTITY"
        zexpect "lock's options" "rowlock lock --p" "--password --permits --pid --port"
        zexpect "release's options" "rowlock release --f" "--force"
        zexpect "help COMMAND" "rowlock help r" "release run"
        zexpect "run NAME -: -c, --command or --" "rowlock run -n job -" "-- --command -c"
        zexpect "run NAME -c: the shell command is not completed" "rowlock run --host h job -c " ""
        touch "$W/some-file"
        zexpect "run NAME COMMAND ARG: files" "rowlock run job ls $W/some-f" "some-file"
        zexpect "rowlock-reaper's options" "rowlock-reaper --pa" "--password --pause"
        start=$SECONDS
        zexpect "database down: no lock names" "rowlock status " ""
        took=$((SECONDS - start))
        if ((took <= 8)); then pass "zsh: database down: quickly (${took}s)"; else fail "zsh: database down: quickly" "${took}s"; fi
        for c in run lock unlock status list release migrate permits rowlock-reaper; do
            if [[ $c == rowlock-reaper ]]; then help=$("$BIN/rowlock-reaper" --help); else help=$("$RL" "$c" --help); fi
            part=$(zsh_part "$c")
            miss=""
            # The options column of the help's option lines.
            for o in $(grep -E '^ +-' <<<"$help" | sed -E 's/^ +//; s/  .*//' | grep -o -- '--[a-z][a-z-]*' | sort -u); do
                [[ $part =~ (^|[^a-z-])$o([^a-z-]|$) ]] || miss+=" $o"
            done
            if [[ -n $part && -z $miss ]]; then
                pass "zsh completion of $c: every option of its --help"
            else
                fail "zsh completion of $c: every option of its --help" "missing:$miss"
            fi
        done
    fi

    # Database down: no names, nothing on stderr, quickly.
    start=$SECONDS
    comp "$RL status " 2>"$W/err"
    took=$((SECONDS - start))
    if [[ -z $REPLY && ! -s $W/err && $took -le 5 ]]; then
        pass "database down: no names, nothing printed, ${took}s"
    else
        fail "database down: no names, nothing printed, at most 5 s" "got: '$REPLY' in ${took}s" "$(cat "$W/err")"
    fi
else
    : "${ROWLOCK_DEFAULTS_FILE:?set ROWLOCK_DEFAULTS_FILE to the option file of a running server}"
    export ROWLOCK_DEFAULTS_FILE
    T=comp_locks
    P="cmp$$-"
    "$RL" --table=$T migrate >/dev/null || { fail "migrate $T"; exit 1; }
    names=("${P}plain" "${P}with space" "${P}quote\"d")
    for n in "${names[@]}"; do
        "$RL" --table=$T run -n "$n" -- sleep 60 &
    done
    for n in "${names[@]}"; do
        for _ in $(seq 100); do
            "$RL" --table=$T status "$n" >/dev/null 2>&1 && break
            sleep 0.1
        done
    done
    want=$(printf '%q\n' "${names[@]}" | sort | tr '\n' ' ')
    want=${want% }
    expect "run NAME: held locks' names, shell-quoted" "$RL --table=$T run $P" "$want"
    expect "status NAME, --table VALUE form" "$RL --table $T status $P" "$want"
    expect "release --force NAME" "$RL --table=$T release --force ${P}w" "$(printf '%q' "${P}with space")"
    expect "--password on the line is not passed on (it would prompt)" \
        "$RL --password --table=$T status ${P}p" "${P}plain"
    expect "another table: none of these names" "$RL --table=${T}_none status $P" ""
    expect "no names after NAME" "$RL --table=$T status ${P}plain " ""
    if ((HAVE_ZSH)); then
        # As compadd adds them: quoted for the line.
        want=$(printf '%q\n' "${names[@]}" | sort | tr '\n' ' ')
        zexpect "run NAME: held locks' names, quoted" "rowlock --table=$T run $P" "${want% }"
        zexpect "status NAME, --table VALUE form" "rowlock --table $T status $P" "${want% }"
    else
        N=$((N + 1)); PASSED=$((PASSED + 1)); printf 'ok %d - # SKIP zsh is not installed (zsh completion)\n' "$N"
    fi
fi

tap_done
