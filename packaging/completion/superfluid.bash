# bash completion for superfluid, the superfluid CLI. The commands and each command's
# options are read from the installed program's own --help, so they never go stale.
# Installed as /usr/share/bash-completion/completions/superfluid.

_superfluid_commands()
{
	"$1" --help 2>/dev/null | sed -n 's/^ *\(usage: \)\{0,1\}superfluid \([a-z][a-z-]*\).*/\2/p' | sort -u
}

_superfluid_options()
{
	"$1" "$2" --help 2>/dev/null | grep -o -- '--[a-z][a-z0-9-]*' | sort -u
}

# superfluid wal SUB ... DIR: the subcommand, then its options or a directory (the log's).
_superfluid_wal()
{
	local prog=$1 at=$2 sub="" j
	for ((j = at + 1; j < cword; j++)); do
		case ${words[j]} in
		-*) ;;
		*) sub=${words[j]}; break ;;
		esac
	done
	if [[ -z $sub ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W '--help' -- "$cur"))
		else
			COMPREPLY=($(compgen -W 'check dump' -- "$cur"))
		fi
		return
	fi
	[[ $prev == --from ]] && return # an LSN the user types
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_superfluid_options "$prog" wal)" -- "$cur"))
	else
		_filedir -d
	fi
}

_superfluid()
{
	local cur prev words cword
	_init_completion || return
	local prog=${words[0]} cmd="" i
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-*) ;;
		*) cmd=${words[i]}; break ;;
		esac
	done
	if [[ -z $cmd ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W '--help --version' -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$(_superfluid_commands "$prog")" -- "$cur"))
		fi
		return
	fi
	if [[ $cmd == wal ]]; then
		_superfluid_wal "$prog" "$i"
		return
	fi
	case $prev in
	--admin-socket)
		_filedir sock
		[[ ${#COMPREPLY[@]} -eq 0 ]] && _filedir
		return ;;
	--api-key-file | --cacert)
		_filedir
		return ;;
	--head)
		COMPREPLY=($(compgen -W 'http://127.0.0.1:8080 https://' -- "$cur"))
		compopt -o nospace
		return ;;
	--model | --max-tokens | --temperature | --top-p | --seed | --stop | --session | --system)
		return ;; # a value the user types
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_superfluid_options "$prog" "$cmd")" -- "$cur"))
	fi
}
complete -F _superfluid superfluid
