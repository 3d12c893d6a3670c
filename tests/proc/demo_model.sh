#!/usr/bin/env bash
# The demo model (models/demo/kjv-demo.gguf) with our programs only, no llama.cpp (that
# comparison is ref.demo_model): the GGUF engine runs it; its perplexity over
# models/demo/heldout.txt is the training's (kjv-demo.json) within 1%; superfluid model
# quantize makes Q8_0 and Q4_K files that run, close to it; model perplexity and quantize
# refuse bad input by name; and scripts/demo serves it (models, a streamed completion, a chat
# turn) and still runs the simulated engine with --engine sim.
# Usage: demo_model.sh BUILD_DIR REPO_ROOT
set -uo pipefail
build=$1 root=$2
sf=$build/superfluid
dir=$root/models/demo
model=$dir/kjv-demo.gguf heldout=$dir/heldout.txt figures=$dir/kjv-demo.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
export SF_MODEL_QUIET=1
figure() { sed -n "s/^ *\"$1\": *\([0-9.e+-]*\),\{0,1\}$/\1/p" "$figures"; }
within() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = a / b - 1; exit !(b > 0 && d <= p / 100 && -d <= p / 100) }'; }
ppl_of() { sed -n 's/.* ppl=\([0-9.]*\)$/\1/p' <<<"$1"; }

info=$("$sf" model info "$model" 2>&1)
if grep -q "the GGUF engine runs it" <<<"$info" && grep -q "chat template: yes" <<<"$info" &&
	grep -q "SentencePiece, 4096 tokens, bos 1, eos 2, eot 4" <<<"$info"; then
	ok "model info: $(grep '^model:' <<<"$info")"
else
	fail "model info: $info"
fi

ctx=$(figure heldout_excerpt_ctx) want=$(figure excerpt_ppl)
f16=$("$sf" model perplexity "$model" --text "$heldout" --ctx "$ctx" 2>&1)
if [ -n "$want" ] && within "$(ppl_of "$f16")" "$want" 1; then
	ok "perplexity of heldout.txt $(ppl_of "$f16"), the training's $want"
else
	fail "perplexity '$f16', the training measured '$want'"
fi
for t in q8_0:1 q4_k:10; do
	type=${t%:*} pct=${t#*:}
	if ! out=$("$sf" model quantize "$model" --type "$type" -o "$work/$type.gguf" 2>&1); then
		fail "quantize $type: $out"
		continue
	fi
	got=$("$sf" model perplexity "$work/$type.gguf" --text "$heldout" --ctx "$ctx" 2>&1)
	if "$sf" model info "$work/$type.gguf" | grep -q "tensor types: F32 x[0-9]* ([0-9.]* MiB) ${type^^} x" &&
		within "$(ppl_of "$got")" "$(ppl_of "$f16")" "$pct"; then
		ok "$out; perplexity $(ppl_of "$got") (within $pct% of F16)"
	else
		fail "quantize $type: '$out', perplexity '$got'"
	fi
done
text=$("$sf" model run "$model" --prompt "In the beginning" --n 40 2>&1)
if [ "$(grep -o '[A-Za-z]\+' <<<"$text" | wc -l)" -ge 20 ]; then
	ok "model run: In the beginning$text"
else
	fail "model run gave '$text'"
fi

# Bad input: named, never a crash.
printf '' >"$work/empty.txt"
expect() { # expect STATUS PATTERN COMMAND...: exits STATUS and says PATTERN on stderr
	local st=$1 pat=$2
	shift 2
	"$@" >/dev/null 2>"$work/err"
	local got=$?
	if [ $got -eq "$st" ] && grep -q -- "$pat" "$work/err"; then
		ok "refused ($got): $(head -1 "$work/err")"
	else
		fail "$* exited $got, said '$(head -1 "$work/err")' (want $st, '$pat')"
	fi
}
expect 1 "give FILE and --text" "$sf" model perplexity "$model"
expect 1 "ctx takes" "$sf" model perplexity "$model" --text "$heldout" --ctx 1
expect 2 "too few to score" "$sf" model perplexity "$model" --text "$work/empty.txt"
expect 2 "cannot open" "$sf" model perplexity "$model" --text "$work/none.txt"
expect 2 "" "$sf" model perplexity "$work/none.gguf" --text "$heldout"
expect 1 "needs FILE, --type" "$sf" model quantize "$model" --type q3_x -o "$work/x.gguf"
expect 2 "" "$sf" model quantize "$heldout" --type q8_0 -o "$work/x.gguf"

# scripts/demo as a newcomer runs it (on this build).
if BUILD_DIR=$build timeout 120 bash "$root/scripts/demo" >"$work/demo.out" 2>&1 &&
	grep -q '"id":"kjv-demo"' "$work/demo.out" &&
	grep -q '"object":"chat.completion"' "$work/demo.out" &&
	[ "$(sed -n '/generate --stream/{n;p}' "$work/demo.out" | grep -o '[A-Za-z]\+' | wc -l)" -ge 20 ]; then
	ok "scripts/demo: $(sed -n '/generate --stream/{n;p}' "$work/demo.out" | cut -c1-120)"
else
	fail "scripts/demo:"
	sed 's/^/     | /' "$work/demo.out"
fi
if BUILD_DIR=$build timeout 120 bash "$root/scripts/demo" --engine sim >"$work/sim.out" 2>&1 &&
	grep -q '"object":"text_completion"' "$work/sim.out"; then
	ok "scripts/demo --engine sim"
else
	fail "scripts/demo --engine sim:"
	sed 's/^/     | /' "$work/sim.out"
fi
[ $fails -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
