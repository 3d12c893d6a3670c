#!/usr/bin/env bash
# chat.content: a chat request's content (strings, arrays of text parts, an assistant's null
# content beside its tool calls) given to each chat template of llama.cpp's models/templates/ as
# vLLM gives it (content.py: the format decided from the template's syntax tree; parts joined
# with "\n" for a template that wants a string, a list of text parts for one that walks it),
# rendered by python3-jinja2 as transformers does, against the head's own path
# (chat_prompt_render: src/api/chat_prompt.c and chat_context.c, src/jinja/inspect.c).
# Checks: the same format decided for every template; the same bytes (or both refuse) for every
# template and conversation of tests/chat/content/, each template our renderer supports; the
# families the engine runs all match, those that take strings with a message's text parts
# joined as one text (no part's repr); at least 40 templates match.
# Usage: content.sh CHAT_PROMPT_RENDER SOURCE_DIR
set -u
render=$1
root=$2
here=$root/tests/chat
. "$root/tests/tok/lib.sh"
if ! python3 -c 'import jinja2' 2>/dev/null; then
	tok_missing "python3-jinja2 is not installed (scripts/install-deps installs it)"
fi
tok_find_llama "$root"
tdir=$LLAMA_SRC/models/templates
[ -d "$tdir" ] || tok_missing "no $tdir in the llama.cpp clone"
must=(Qwen-Qwen2.5-7B-Instruct Qwen-Qwen3-0.6B meta-llama-Llama-3.1-8B-Instruct
	meta-llama-Llama-3.2-3B-Instruct mistralai-Mistral-Nemo-Instruct-2407
	Mistral-Small-3.2-24B-Instruct-2506 google-gemma-2-2b-it microsoft-Phi-3.5-mini-instruct)
min_match=40
export SF_JINJA_NOW=1767225600

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
templates=("$tdir"/*.jinja)
convs=("$here"/content/*.json)
[ -f "${templates[0]}" ] || { echo "FAIL: no templates in $tdir"; exit 1; }
python3 "$here/content.py" batch "$tmp/py" "${convs[@]}" -- "${templates[@]}" ||
	{ echo "FAIL: content.py batch failed"; exit 1; }

matched=0 total=0 fails=0 openai=0
declare -A result
for t in "${templates[@]}"; do
	name=$(basename "$t" .jinja)
	total=$((total + 1))
	want=$(cat "$tmp/py/$name.jinja/format")
	got=$("$render" format "$t" 2>"$tmp/err")
	rc=$?
	if [ "$rc" -eq 4 ]; then
		result[$name]=unsupported
		echo "unsupported: $(head -c 200 "$tmp/err") [$name]"
		continue
	fi
	if [ "$got" != "$want" ]; then
		echo "FAIL $name: format $got, vLLM's reference says $want"
		result[$name]=format
		fails=$((fails + 1))
		continue
	fi
	[ "$want" = openai ] && openai=$((openai + 1))
	verdict=ok note="" rendered=0 raised=0
	for conv in "${convs[@]}"; do
		c=$(basename "$conv" .json)
		py=$tmp/py/$name.jinja/$c
		pyrc=$(cat "$py.rc")
		"$render" "$t" "$py.req" >"$tmp/ours" 2>"$tmp/err"
		rc=$?
		if [ "$rc" -ge 128 ] || [ "$rc" -eq 1 ]; then
			verdict=CRASH note="$c: exit $rc: $(head -c 300 "$tmp/err")"
			break
		fi
		if [ "$rc" -eq 4 ]; then
			verdict=unsupported note="$(head -c 200 "$tmp/err") ($c)"
			break
		fi
		if [ "$pyrc" -ne 0 ] || [ "$rc" -ne 0 ]; then
			if [ "$pyrc" -ne 0 ] && [ "$rc" -ne 0 ]; then
				raised=$((raised + 1))
				continue
			fi
			verdict=DIFF note="$c: python rc $pyrc ($(head -c 150 "$py.err")), ours rc $rc ($(head -c 150 "$tmp/err"))"
			break
		fi
		if ! cmp -s "$py.out" "$tmp/ours"; then
			verdict=DIFF note="$c: first difference at byte $(cmp "$py.out" "$tmp/ours" 2>&1 | grep -o 'byte [0-9]*' | head -1 | cut -d' ' -f2)"
			[ -n "${VERBOSE:-}" ] && diff <(cat "$py.out") <(cat "$tmp/ours") | head -10
			break
		fi
		rendered=$((rendered + 1))
	done
	result[$name]=$verdict
	case $verdict in
	ok) matched=$((matched + 1))
		echo "ok   $name ($want: $rendered rendered alike, $raised refused by both)" ;;
	unsupported) echo "unsupported: $note [$name]" ;;
	*) echo "$verdict $name: $note"; fails=$((fails + 1)) ;;
	esac
done
echo "$matched of $total templates give the reference's prompt ($openai walk content lists)"
for m in "${must[@]}"; do
	if [ "${result[$m]:-missing}" != ok ]; then
		echo "FAIL: $m (a family the engine runs): ${result[$m]:-missing}"
		fails=$((fails + 1))
		continue
	fi
	# A template that takes strings gets one message's parts as one text, never a list's repr.
	[ "$(cat "$tmp/py/$m.jinja/format")" = string ] || continue
	"$render" "$tdir/$m.jinja" "$tmp/py/$m.jinja/parts_multiturn.req" >"$tmp/ours" 2>/dev/null
	if grep -q "'type'" "$tmp/ours" ||
		! python3 -c 'import sys; d=open(sys.argv[1],encoding="utf-8").read(); sys.exit("One more,\nplease." not in d or "Blue.\nOr green." not in d)' "$tmp/ours"; then
		echo "FAIL: $m: the parts conversation's prompt lacks its joined text: $(head -c 300 "$tmp/ours")"
		fails=$((fails + 1))
	fi
done
[ "$openai" -gt 0 ] || { echo "FAIL: no template walks content lists: the format is never tried"; fails=$((fails + 1)); }
[ "$matched" -ge "$min_match" ] || { echo "FAIL: $matched match, fewer than $min_match"; fails=$((fails + 1)); }
[ "$fails" -eq 0 ]
