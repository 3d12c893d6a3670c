#!/usr/bin/env bash
# Prefix reuse (issue 31) through the official openai npm client: two nodes of a random-weight
# qwen2 model with Qwen2.5's chat template, and three heads on them with API keys: A shares
# cached prefixes per key (the default), B has --prefix-cache off, C shares them across keys.
# A conversation sent whole each turn gets the same replies (greedy and seeded) with reuse and
# without, and on A each later turn reports as cached_tokens at least the pages of the turn
# before; conversations that live on different nodes find them again; another key's request
# finds nothing cached but under --prefix-cache shared; a Responses fork from the first of two
# stored responses (previous_response_id) computes only its new tokens and replies as the same
# items sent fresh with reuse off. Head A's /metrics counts as reused
# what its replies said was cached, and superfluid status shows the share.
# PREFIX_CACHE_K=q8_0: both nodes keep their keys as Q8_0 (--cache-type-k; api.gguf_prefix.kq8),
# which their start lines say. PREFIX_SHAPE=test-gemma3: the model is Gemma 3's test shape
# (three layers, two of them a window of 40 keeping only their window; api.gguf_prefix.gemma3),
# which the nodes' start lines say.
# Usage: gguf_prefix.sh NODED HEADD CLI SOURCE_DIR NPM_DIR   (exit 77: no llama.cpp; KEEP=DIR)
set -uo pipefail
noded=$1 headd=$2 cli=$3 src=$4 npm_dir=$5
. "$(dirname "$0")/lib.sh"
unset SUPERFLUID_HEAD SUPERFLUID_API_KEY
gguf_vocab "$src"
if [ ! -f "$npm_dir/node_modules/openai/package.json" ]; then
	mkdir -p "$npm_dir"
	npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error "openai@^4" >"$work/npm.log" 2>&1 ||
		{ echo "FAIL npm install openai"; sed 's/^/     | /' "$work/npm.log"; exit 1; }
fi
cp "$src/tests/api/prefix_client.mjs" "$npm_dir/prefix_client.mjs"

M=$work/qwen2.gguf
shape=${PREFIX_SHAPE:-test-qwen2}
gguf_make "$M" qwen2 "$shape" q8_0 --ctx 4096 \
	--chat-template "$LLAMA_SRC/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
model=random-$shape-q8_0
start_gguf_node n1 "$M" --threads 1 ${PREFIX_CACHE_K:+--cache-type-k $PREFIX_CACHE_K} && p1=$port
start_gguf_node n2 "$M" --threads 1 ${PREFIX_CACHE_K:+--cache-type-k $PREFIX_CACHE_K} && p2=$port
(umask 077; printf 'sk-prefix-one\nsk-prefix-two\n' >"$work/keys")
fleet=127.0.0.1:$p1,127.0.0.1:$p2
start_head hb "$fleet" --api-keys "$work/keys" --prefix-cache off && pb=$hport
start_head hc "$fleet" --api-keys "$work/keys" --prefix-cache shared && pc=$hport
start_head head "$fleet" --api-keys "$work/keys" ${PREFIX_HEAD_ARGS:-} # the last: its log is the one failures show
pa=$hport
for p in "$pa" "$pb" "$pc"; do
	base="http://127.0.0.1:$p"
	SUPERFLUID_API_KEY=sk-prefix-one nodes_up 2 || { check "three heads with two nodes each" 1; exit 1; }
done
base="http://127.0.0.1:$pa"
keys=F16; [ "${PREFIX_CACHE_K:-}" = q8_0 ] && keys=Q8_0
r=1
for _ in $(seq 300); do
	grep -q "keys cached as $keys)" "$work/n1.err" && grep -q "keys cached as $keys)" "$work/n2.err" && r=0 && break
	sleep 0.1
done
cat "$work/n1.err" >"$work/out"
check "both nodes say their keys are cached as $keys" $r
if [ "$shape" = test-gemma3 ]; then
	r=0; grep -q "layers with a sliding window of 40 keep only it" "$work/n1.err" || r=1
	check "Gemma 3: the node says its window layers keep only their window" $r
fi
(cd "$npm_dir" && node prefix_client.mjs "http://127.0.0.1:$pa/v1" "http://127.0.0.1:$pb/v1" \
	"http://127.0.0.1:$pc/v1" sk-prefix-one sk-prefix-two "$model") >"$work/client.out" 2>&1
rc=$?
grep -E '^(ok|FAIL|     \|)' "$work/client.out"
fails=$((fails + $(grep -c '^FAIL' "$work/client.out")))
passes=$((passes + $(grep -c '^ok' "$work/client.out")))
[ "$rc" = 0 ] || [ "$(grep -c '^FAIL' "$work/client.out")" != 0 ] || { echo "FAIL the client: exit $rc"; tail -5 "$work/client.out"; fails=$((fails + 1)); }

reused=$(sed -n 's/^REUSED \([0-9]*\)$/\1/p' "$work/client.out")
sum=$(curl -s "$base/metrics" | awk '/^superfluid_node_prompt_tokens_reused_total\{/ { s += $2 } END { print s + 0 }')
r=0; [ -n "$reused" ] && [ "$reused" -gt 0 ] && [ "$sum" = "$reused" ] || r=1
check "head A's /metrics counts the $reused cached tokens its replies reported (it says $sum)" $r
SUPERFLUID_API_KEY=sk-prefix-one "$cli" status --head "$base" >"$work/status" 2>&1
r=0; [ "$(grep -cE ' cached=[0-9]+% pages=[1-9][0-9]*$' "$work/status")" = 2 ] || r=1
cp "$work/status" "$work/out"
check "superfluid status: each node's share of cached prompt tokens and its cached pages" $r

kill -TERM "${pids[@]}" 2>/dev/null; sleep 0.3
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
