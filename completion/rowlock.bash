# bash completion for rowlock and rowlock-reaper                -*- shell-script -*-
#
# Installed as bash-completion/completions/rowlock and .../rowlock-reaper
# (bash-completion loads it on first use), or source it from ~/.bashrc.
#
# Completes commands, options, option values (strategies, --ssl-mode modes,
# files) and lock names: for NAME, it asks `rowlock list --json` with the
# connection options already on the line (never --password, which would
# prompt), for at most 3 seconds; if the database does not answer it offers
# no names and prints nothing. Needs nothing from the bash-completion
# package.

# Options that take a value, and their value kinds.
_rowlock_conn_valued='--defaults-file --host --port --socket --user --database --table --ssl-mode --ssl-ca --connect-timeout'
_rowlock_conn_opts="$_rowlock_conn_valued --password"

# _rowlock_words: COMP_WORDS with "--opt" "=" "value" joined back into
# "--opt=value" (bash splits words at '='). Sets _rl_words and _rl_cword.
_rowlock_words()
{
    local i w n=${#COMP_WORDS[@]}
    _rl_words=() _rl_cword=0
    for ((i = 0; i < n; i++)); do
        w=${COMP_WORDS[i]}
        if [[ $w == "=" && ${#_rl_words[@]} -gt 0 && ${_rl_words[-1]} == --* && ${_rl_words[-1]} != *=* ]]; then
            _rl_words[-1]+="="
            if ((i < COMP_CWORD && i + 1 < n)); then
                i=$((i + 1))
                _rl_words[-1]+=${COMP_WORDS[i]}
            fi
        else
            _rl_words+=("$w")
        fi
        if ((i >= COMP_CWORD && _rl_cword == 0)); then
            _rl_cword=$((${#_rl_words[@]} - 1))
        fi
    done
}

# _rowlock_add PREFIX WORD...: the WORDs starting with PREFIX, shell-quoted.
_rowlock_add()
{
    local cur=$1 w
    shift
    for w in "$@"; do
        [[ $w == "$cur"* ]] && COMPREPLY+=("$(printf '%q' "$w")")
    done
}

_rowlock_files()
{
    local IFS=$'\n'
    compopt -o filenames 2>/dev/null
    COMPREPLY+=($(compgen -f -- "$1"))
}

# _rowlock_value OPTION CUR: complete the value of a valued option.
_rowlock_value()
{
    case $1 in
    --defaults-file | --socket | --ssl-ca | --metrics-file) _rowlock_files "$2" ;;
    --ssl-mode) _rowlock_add "$2" DISABLED PREFERRED REQUIRED VERIFY_CA VERIFY_IDENTITY ;;
    -S | --strategy) _rowlock_add "$2" insert for-update optimistic ;;
    --pause) _rowlock_add "$2" auto 0 ;;
    esac
}

# _rowlock_valued OPTION: is OPTION one that takes a separate value?
_rowlock_valued()
{
    case " $_rowlock_conn_valued -S --strategy -N --name --permits -w --wait --timeout -l --lease -E --conflict-exit-code -k --kill-after --owner --pid --grace --batch --pause --max-seconds --metrics-file " in
    *" $1 "*) return 0 ;;
    esac
    return 1
}

# _rowlock_names CUR: lock names from `rowlock list --json`.
_rowlock_names()
{
    local prog=${_rl_words[0]} json name w
    local -a conn=()
    local -A seen=()
    # The connection options on the line, with their values (not --password).
    local i
    for ((i = 1; i < ${#_rl_words[@]}; i++)); do
        ((i == _rl_cword)) && continue
        w=${_rl_words[i]}
        case $w in
        --password*) ;;
        --*=*) [[ " $_rowlock_conn_valued " == *" ${w%%=*} "* ]] && conn+=("$w") ;;
        --*)
            if [[ " $_rowlock_conn_valued " == *" $w "* ]] && ((i + 1 < ${#_rl_words[@]} && i + 1 != _rl_cword)); then
                conn+=("$w=${_rl_words[i + 1]}")
                i=$((i + 1))
            fi
            ;;
        esac
    done
    [[ $prog == "~/"* ]] && prog=$HOME/${prog#"~/"}
    command -v "$prog" >/dev/null 2>&1 || return
    if command -v timeout >/dev/null 2>&1; then
        json=$(timeout 3 "$prog" "${conn[@]}" --connect-timeout=2 list --json </dev/null 2>/dev/null)
    else
        json=$("$prog" "${conn[@]}" --connect-timeout=2 list --json </dev/null 2>/dev/null)
    fi
    while [[ $json =~ \"name\":\"(([^\"\\]|\\.)*)\" ]]; do
        json=${json#*"${BASH_REMATCH[0]}"}
        name=${BASH_REMATCH[1]}
        [[ $name == *'\u'* ]] && continue       # control characters: not offered
        name=${name//'\"'/'"'}
        name=${name//'\/'/'/'}
        name=${name//'\\'/'\'}
        [[ -n ${seen[$name]+x} ]] && continue
        seen[$name]=1
        _rowlock_add "$1" "$name"
    done
}

_rowlock()
{
    local _rl_words _rl_cword cur prev i w cmd="" cmdi=0 name_done=0 after_name=0 dashdash=0
    COMPREPLY=()
    _rowlock_words
    cur=${_rl_words[_rl_cword]}
    prev=${_rl_words[_rl_cword - 1]}
    [[ $cur == "=" ]] && cur=""

    # Walk the words before the cursor: the command, then (for run, status
    # and release) whether NAME was given, then (run) COMMAND's words.
    for ((i = 1; i < _rl_cword; i++)); do
        w=${_rl_words[i]}
        if [[ -z $cmd ]]; then
            if _rowlock_valued "$w"; then
                i=$((i + 1))
            elif [[ $w != -* ]]; then
                cmd=$w cmdi=$i
            fi
        elif ((name_done)); then
            [[ $cmd == run ]] || continue
            if ((after_name == 0 && !dashdash)); then
                [[ $w == -c || $w == --command* ]] && return 0   # a shell command: not completed
                [[ $w == -- ]] && { dashdash=1; continue; }
            fi
            after_name=$((after_name + 1))
        elif _rowlock_valued "$w"; then
            i=$((i + 1))
        elif [[ $w != -* ]]; then
            name_done=1
        fi
    done

    # COMMAND of run and its arguments.
    if [[ $cmd == run ]] && ((name_done)); then
        local IFS=$'\n'
        if ((after_name > 0)); then
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$cur"))
        elif [[ $cur == -* ]] && ((!dashdash)); then
            _rowlock_add "$cur" -c --command --
        else
            COMPREPLY=($(compgen -c -- "$cur"))
        fi
        return 0
    fi

    # --opt=value
    if [[ $cur == --*=* ]]; then
        _rowlock_value "${cur%%=*}" "${cur#*=}"
        return 0
    fi
    # --opt value
    if ((_rl_cword > 1)) && _rowlock_valued "$prev"; then
        _rowlock_value "$prev" "$cur"
        return 0
    fi

    case $cmd in
    "")
        if [[ $cur == -* ]]; then
            _rowlock_add "$cur" $_rowlock_conn_opts --help --version
        else
            _rowlock_add "$cur" run status list release migrate lock unlock permits metrics help
        fi
        ;;
    run)
        if [[ $cur == -* ]]; then
            _rowlock_add "$cur" --shared --exclusive --permits --strategy --name --nonblock --nb --wait \
                --timeout --lease --conflict-exit-code --kill-after --command --close --no-fork --verbose \
                --version --help $_rowlock_conn_opts
        else
            _rowlock_names "$cur"
        fi
        ;;
    lock)
        if [[ $cur == -* ]]; then
            _rowlock_add "$cur" --shared --exclusive --permits --strategy --name --nonblock --wait \
                --lease --conflict-exit-code --pid --verbose --json --help $_rowlock_conn_opts
        elif ((!name_done)); then
            _rowlock_names "$cur"
        fi
        ;;
    unlock)
        [[ $cur == -* ]] && _rowlock_add "$cur" --check --downgrade --help
        ;;
    status | release)
        if [[ $cur == -* ]]; then
            if [[ $cmd == status ]]; then
                _rowlock_add "$cur" --json --help $_rowlock_conn_opts
            else
                _rowlock_add "$cur" --force --owner --json --help $_rowlock_conn_opts
            fi
        elif ((!name_done)); then
            _rowlock_names "$cur"
        fi
        ;;
    list)
        [[ $cur == -* ]] && _rowlock_add "$cur" --json --stale --help $_rowlock_conn_opts
        ;;
    permits)
        if [[ $cur == -* ]]; then
            _rowlock_add "$cur" --json --help $_rowlock_conn_opts
        elif ((!name_done)); then
            _rowlock_names "$cur"
        fi
        ;;
    migrate)
        [[ $cur == -* ]] && _rowlock_add "$cur" --dry-run --json --help $_rowlock_conn_opts
        ;;
    metrics)
        [[ $cur == -* ]] && _rowlock_add "$cur" --names --json --help $_rowlock_conn_opts
        ;;
    help)
        ((cmdi == _rl_cword - 1)) && _rowlock_add "$cur" run status list release migrate lock unlock permits metrics
        ;;
    esac
    return 0
}

_rowlock_reaper()
{
    local _rl_words _rl_cword cur prev
    COMPREPLY=()
    _rowlock_words
    cur=${_rl_words[_rl_cword]}
    prev=${_rl_words[_rl_cword - 1]}
    [[ $cur == "=" ]] && cur=""
    if [[ $cur == --*=* ]]; then
        _rowlock_value "${cur%%=*}" "${cur#*=}"
    elif ((_rl_cword > 1)) && _rowlock_valued "$prev"; then
        _rowlock_value "$prev" "$cur"
    else
        _rowlock_add "$cur" --grace --batch --pause --max-seconds --wait-leases --dry-run --json --quiet \
            --verbose --metrics-file --help --version $_rowlock_conn_opts
    fi
    return 0
}

complete -F _rowlock rowlock
complete -F _rowlock_reaper rowlock-reaper
