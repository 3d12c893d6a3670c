#!/usr/bin/env bash
# chat.templates: every chat template of llama.cpp's models/templates/ (and of
# tests/chat/templates/, those it lacks) rendered on each conversation of
# tests/chat/conversations/ by our renderer (jinja_render) and by Python's jinja2 set up as
# transformers' apply_chat_template (hf_render.py), compared byte for byte.
# Where Python raises (raise_exception, or a template error), ours must fail too. Prints per
# template "ok", "DIFF" (with the first difference), "unsupported: <feature>" or "refused" (both
# refused every conversation: nothing rendered to compare, not a match), then the count that
# match. Fails if a template of the families the engine runs does not match, if fewer than
# 64 match, or if jinja_render crashes.
# Usage: templates.sh JINJA_RENDER SOURCE_DIR
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
# The families the engine runs: each of these must match.
must=(Qwen-Qwen2.5-7B-Instruct Qwen-Qwen3-0.6B meta-llama-Llama-3.1-8B-Instruct
	meta-llama-Llama-3.2-3B-Instruct meta-llama-Llama-3.3-70B-Instruct HuggingFaceTB-SmolLM3-3B
	mistralai-Mistral-Nemo-Instruct-2407 Mistral-Small-3.2-24B-Instruct-2506
	deepseek-ai-DeepSeek-R1-Distill-Llama-8B deepseek-ai-DeepSeek-R1-Distill-Qwen-32B
	microsoft-Phi-3.5-mini-instruct microsoft-Phi-4-mini-instruct google-gemma-2-2b-it
	openai-gpt-oss-120b allenai-OLMo-2-1124-13B-Instruct mistralai-Mistral-7B-Instruct-v0.2)
min_match=64
export SF_JINJA_NOW=1767225600 # 2026-01-01 00:00:00 UTC, for strftime_now on both sides

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
templates=("$tdir"/*.jinja "$here"/templates/*.jinja) # and ours that llama.cpp's lacks
convs=("$here"/conversations/*.json)
[ "${#templates[@]}" -gt 0 ] && [ -f "${templates[0]}" ] || { echo "FAIL: no templates in $tdir"; exit 1; }
python3 "$here/hf_render.py" batch "$tmp/py" "${convs[@]}" -- "${templates[@]}" ||
	{ echo "FAIL: hf_render.py batch failed"; exit 1; }

matched=0 total=0 fails=0 crashed=0
declare -A result
for t in "${templates[@]}"; do
	name=$(basename "$t" .jinja)
	total=$((total + 1))
	verdict=ok note="" rendered=0 raised=0
	for conv in "${convs[@]}"; do
		c=$(basename "$conv" .json)
		py=$tmp/py/$name.jinja/$c
		pyrc=$(cat "$py.rc")
		"$render" "$t" "$py.ctx" >"$tmp/ours" 2>"$tmp/err"
		rc=$?
		if [ "$rc" -ge 128 ] || [ "$rc" -eq 1 ]; then
			verdict=CRASH note="$c: jinja_render exit $rc: $(head -c 300 "$tmp/err")"
			crashed=$((crashed + 1))
			break
		fi
		if [ "$pyrc" -ne 0 ]; then
			if [ "$rc" -eq 0 ]; then
				verdict=DIFF note="$c: python failed ($(head -c 200 "$py.err" | tr '\n' ' ')) but ours rendered"
				break
			fi
			raised=$((raised + 1))
			[ -n "${VERBOSE:-}" ] && echo "   $name $c: both failed: python: $(head -c 200 "$py.err" | tr '\n' ' ') | ours: $(head -c 200 "$tmp/err")"
			continue
		fi
		if [ "$rc" -ne 0 ]; then
			if [ "$rc" -eq 4 ]; then
				verdict=unsupported note="$(sed 's/^template_unsupported: //' "$tmp/err" | head -c 300) ($c)"
			else
				verdict=DIFF note="$c: ours failed: $(head -c 300 "$tmp/err")"
			fi
			break
		fi
		if ! cmp -s "$py.out" "$tmp/ours"; then
			verdict=DIFF
			note="$c: first difference at byte $(cmp "$py.out" "$tmp/ours" 2>&1 | grep -o 'byte [0-9]*' | head -1 | cut -d' ' -f2)"
			if [ -n "${VERBOSE:-}" ]; then
				diff <(cat "$py.out") <(cat "$tmp/ours") | head -${VERBOSE_LINES:-10}
			fi
			break
		fi
		rendered=$((rendered + 1))
	done
	# A template both refuse on every conversation agrees on nothing rendered: not a match
	# (issue 32: such a template was counted as agreeing).
	[ "$verdict" = ok ] && [ "$rendered" = 0 ] && verdict=refused note="both refused all ${#convs[@]} conversations"
	result[$name]=$verdict
	case $verdict in
	ok)
		matched=$((matched + 1))
		echo "ok   $name ($rendered rendered alike, $raised refused by both)" ;;
	unsupported) echo "unsupported: $note  [$name]" ;;
	refused) echo "refused $name: $note (not counted as a match)" ;;
	*) echo "$verdict $name: $note" ;;
	esac
done
echo "$matched of $total templates match python3-jinja2 on ${#convs[@]} conversations"
for m in "${must[@]}"; do
	if [ "${result[$m]:-missing}" != ok ]; then
		echo "FAIL: $m (a family the engine runs) does not match: ${result[$m]:-missing}"
		fails=$((fails + 1))
	fi
done
[ "$crashed" -eq 0 ] || { echo "FAIL: jinja_render crashed on $crashed templates"; fails=$((fails + 1)); }
[ "$matched" -ge "$min_match" ] || { echo "FAIL: $matched match, fewer than $min_match"; fails=$((fails + 1)); }
[ "$fails" -eq 0 ]
