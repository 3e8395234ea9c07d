# cutrace.bash - bash completion for cutrace, installed by `make install` as
# PREFIX/share/bash-completion/completions/cutrace (bash-completion loads it
# on first use); or: source completions/cutrace.bash
#
# The commands and each command's options are read from the cutrace being
# completed (`cutrace help`, `cutrace CMD --help`, once per shell and binary),
# so completion never lists an option the binary lacks or misses one it has;
# tests/docs/check_completion.py checks that against analyzer/cmd/*.c.
# Values: --framework, --format, --csv=TABLE (the tables a --help lists),
# --at MOMENT; paths where a command takes them; after `cutrace run [-o DIR]`
# the command to run and then its own arguments.

# shellcheck shell=bash

declare -gA _cutrace_cache

# The text of `cutrace ARGS...` for binary $1, cached per binary and ARGS.
_cutrace_query() {
    local bin=$1
    shift
    local key="$bin"$'\x1f'"$*"
    if [[ -z ${_cutrace_cache[$key]+set} ]]; then
        _cutrace_cache[$key]=$("$bin" "$@" 2>/dev/null)
    fi
    printf '%s\n' "${_cutrace_cache[$key]}"
}

# The subcommands, from `cutrace help`'s "commands:" list.
_cutrace_commands() {
    _cutrace_query "$1" help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }'
}

# The options of subcommand $2: every -x/--name in the first column of its
# --help's option lines; --csv[=TABLE] gives --csv and --csv=.
_cutrace_options() {
    _cutrace_query "$1" "$2" --help | awk '
        /^  -/ {
            line = $0
            sub(/^  /, "", line)
            # the first column ends at two blanks (the words of the option start there)
            n = index(line, "  ")
            if (n) line = substr(line, 1, n - 1)
            m = split(line, w, /[ ,]+/)
            for (i = 1; i <= m; i++) {
                if (w[i] ~ /^--?[a-zA-Z][a-zA-Z0-9-]*\[=[A-Z]+\]$/) {
                    sub(/\[.*/, "", w[i]); print w[i]; print w[i] "="
                } else if (w[i] ~ /^--?[a-zA-Z][a-zA-Z0-9-]*$/) {
                    print w[i]
                }
            }
        }' | sort -u
}

# True when option $3 of subcommand $2 takes a value: its --help writes a
# word after it ("--rank LIST", "-o, --output FILE").
_cutrace_takes_value() {
    _cutrace_query "$1" "$2" --help | awk -v opt="$3" '
        /^  -/ {
            line = $0
            sub(/^  /, "", line)
            n = index(line, "  ")
            if (n) line = substr(line, 1, n - 1)
            # "-o, --output FILE": a word ending in a comma is an alias of the next
            m = split(line, w, / +/)
            for (i = 1; i <= m; i++) {
                name = w[i]
                sub(/,$/, "", name)
                if (name != opt) continue
                j = i
                while (j < m && w[j] ~ /,$/) j++
                if (j < m && w[j + 1] !~ /^-/) found = 1
            }
        }
        END { exit !found }'
}

# The tables of --csv=TABLE: the names before each "(...)" of the
# "Tables for --csv:" paragraph of the subcommand's --help.
_cutrace_csv_tables() {
    _cutrace_query "$1" "$2" --help | awk '
        /^Tables for --csv:/ { on = 1; sub(/^Tables for --csv:/, "") }
        on && /^$/ { exit }
        on { text = text " " $0 }
        END {
            while (gsub(/\([^()]*\)/, "", text)) {}
            gsub(/[.,]/, " ", text)
            m = split(text, w, /[ ]+/)
            for (i = 1; i <= m; i++) if (w[i] ~ /^[a-z_]+$/) print w[i]
        }'
}

# The moments of `sites --at`: the words its --help lists under --at.
_cutrace_moments() {
    printf '%s\n' peak end pre post seq:
    _cutrace_query "$1" sites --help | awk '
        /^  --at / { on = 1 }
        on && /^  --top/ { exit }
        on { m = split($0, w, /[^a-z_]+/); for (i = 1; i <= m; i++) if (w[i] ~ /^[a-z]+(_[a-z]+)+$/) print w[i] }'
}

# Completes a path operand: directories, and the files a report reads
# (traces *.db, packed runs), or any file for an output ($2 = any).
_cutrace_paths() {
    local cur=$1 kind=$2
    compopt -o filenames 2>/dev/null
    if [[ $kind == any ]]; then
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    elif [[ $kind == dir ]]; then
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
    else
        local f
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
        while IFS= read -r f; do
            [[ $f == *.db || $f == *.cutrace ]] && [[ ! -d $f ]] && COMPREPLY+=("$f")
        done < <(compgen -f -- "$cur")
    fi
}

_cutrace() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    local bin=${COMP_WORDS[0]}
    bin=${bin/#\~/$HOME}
    COMPREPLY=()
    if ! command -v "$bin" >/dev/null 2>&1; then
        return 0
    fi

    if ((COMP_CWORD == 1)); then
        if [[ $cur == -* ]]; then
            mapfile -t COMPREPLY < <(compgen -W '--help --version' -- "$cur")
        else
            mapfile -t COMPREPLY < <(compgen -W "$(_cutrace_commands "$bin") help" -- "$cur")
        fi
        return 0
    fi

    local sub=${COMP_WORDS[1]}
    if [[ $sub == help ]]; then
        ((COMP_CWORD == 2)) && mapfile -t COMPREPLY < <(compgen -W "$(_cutrace_commands "$bin")" -- "$cur")
        return 0
    fi

    # `run`: options stop at CMD; from there on the words are CMD's.
    if [[ $sub == run ]]; then
        local i=2
        while ((i < COMP_CWORD)); do
            case ${COMP_WORDS[i]} in
            --) ((i++)); break ;;
            -o | --output) ((i += 2)) ;;
            -*) ((i++)) ;;
            *) break ;;
            esac
        done
        if ((i < COMP_CWORD)) || { ((i == COMP_CWORD)) && [[ ${COMP_WORDS[i - 1]} == -- ]]; }; then
            if ((i == COMP_CWORD)); then
                mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u)
            elif declare -F _command_offset >/dev/null; then
                _command_offset "$i"
            else
                _cutrace_paths "$cur" any
            fi
            return 0
        fi
    fi

    # --csv=TABLE, whether readline split the word at '=' or not.
    local prev=${COMP_WORDS[COMP_CWORD - 1]}
    if [[ $cur == --csv=* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(_cutrace_csv_tables "$bin" "$sub")" -P --csv= -- "${cur#--csv=}")
        return 0
    fi
    if [[ $cur == = && $prev == --csv ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(_cutrace_csv_tables "$bin" "$sub")" -- "")
        return 0
    fi
    if [[ $prev == = ]] && ((COMP_CWORD >= 3)) && [[ ${COMP_WORDS[COMP_CWORD - 2]} == --csv ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(_cutrace_csv_tables "$bin" "$sub")" -- "$cur")
        return 0
    fi

    # The value of the option before the cursor.
    if [[ $prev == -* ]] && _cutrace_takes_value "$bin" "$sub" "$prev"; then
        case $prev in
        --framework) mapfile -t COMPREPLY < <(compgen -W 'sglang vllm' -- "$cur") ;;
        --format) mapfile -t COMPREPLY < <(compgen -W 'proto json' -- "$cur") ;;
        --at)
            mapfile -t COMPREPLY < <(compgen -W "$(_cutrace_moments "$bin" | sort -u)" -- "$cur")
            [[ ${COMPREPLY[*]} == seq: ]] && compopt -o nospace 2>/dev/null
            ;;
        -o | --output)
            if [[ $sub == run ]]; then _cutrace_paths "$cur" dir; else _cutrace_paths "$cur" any; fi
            ;;
        --html) _cutrace_paths "$cur" any ;;
        esac
        return 0
    fi

    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(_cutrace_options "$bin" "$sub")" -- "$cur")
        if ((${#COMPREPLY[@]} == 1)) && [[ ${COMPREPLY[0]} == *= ]]; then
            compopt -o nospace 2>/dev/null
        fi
        return 0
    fi
    [[ $sub == run ]] && { mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u); return 0; }
    _cutrace_paths "$cur" traces
}

complete -F _cutrace cutrace
