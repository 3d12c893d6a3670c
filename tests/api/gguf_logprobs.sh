#!/usr/bin/env bash
# Logprobs of a GGUF node do not depend on what shares its batch: 16 requests (completions
# with logprobs 5, chats with top_logprobs 7; greedy and seeded; prompts of 4 to some 500
# tokens, up to two 256-token chunks) sent one at a time, then all at once to a head of one
# node (a random-weight qwen2 in llama.cpp's Q4_K_M mix, one compute thread): every choice's
# text, tokens, logprobs and top logprobs the same numbers, and they did share the batch.
# Usage: gguf_logprobs.sh NODED HEADD CLI SOURCE_DIR   (exit 77: no llama.cpp vocabulary;
# KEEP=DIR keeps the work folder)
set -uo pipefail
noded=$1 headd=$2 cli=$3 src=$4
. "$(dirname "$0")/lib.sh"
unset SUPERFLUID_HEAD SUPERFLUID_API_KEY
gguf_vocab "$src"

M=$work/qwen2.gguf
gguf_make "$M" qwen2 test-qwen2 q4_k_m
model=random-test-qwen2-q4_k_m
start_gguf_node n1 "$M" --threads 1 && p1=$port
start_head head "127.0.0.1:$p1" --shards 1
base="http://127.0.0.1:$hport"
nodes_up 1
check "a node of a GGUF model up" $?
body() { # k: request k's body; prompts of 4 to some 500 tokens, greedy and seeded, chat and completions
	python3 - "$1" "$model" <<'EOF'
import json, sys
k, model = int(sys.argv[1]), sys.argv[2]
words = "alpha beta gamma delta river stone cloud market engine fleet".split()
text = "Request %d: " % k + " ".join(words[(k * 7 + i * 3) % 10] for i in range(k * k * 2))
b = {"model": model, "max_tokens": 8 + k // 2, "temperature": 0 if k % 2 else 0.7 + k / 40}
if k % 2 == 0:
    b["seed"] = 1000 + k
if k % 3:
    b.update(prompt=text, logprobs=5)
else:
    b.update(messages=[{"role": "user", "content": text}], logprobs=True, top_logprobs=7)
print(json.dumps(b))
EOF
}
post() { # k out
	local path=/v1/completions
	grep -q '"messages"' "$work/body.$1" && path=/v1/chat/completions
	curl -sS -o "$2" -H 'Content-Type: application/json' --data-binary @"$work/body.$1" "$base$path"
}
for k in $(seq 0 15); do body "$k" >"$work/body.$k"; post "$k" "$work/alone.$k"; done
( # the most sessions the node's batch ran at once, while the 16 run
	most=0
	while :; do
		n=$("$cli" status --head "$base" 2>/dev/null | sed -n 's/.* batch=\([0-9]*\)\/.*/\1/p' | head -1)
		[ "${n:-0}" -gt "$most" ] && { most=$n; echo "$most" >"$work/most"; }
		sleep 0.02
	done
) &
watcher=$!
pids+=("$watcher")
cpids=()
for k in $(seq 0 15); do post "$k" "$work/together.$k" & cpids+=($!); done
wait "${cpids[@]}"
kill "$watcher" 2>/dev/null
python3 - "$work" >"$work/cmp" 2>&1 <<'EOF'
import json, sys
w, bad, reused = sys.argv[1], 0, 0
for k in range(16):
    a, b = (json.load(open("%s/%s.%d" % (w, x, k), encoding="utf-8")) for x in ("alone", "together"))
    ca, cb = a["choices"][0], b["choices"][0]
    lp = ca.get("logprobs") or {}
    n = len(lp.get("content") or lp.get("token_logprobs") or [])
    # The second time the prompts' pages are in the node's prefix cache: the same numbers.
    ua, ub = dict(a["usage"]), dict(b["usage"])
    reused += ub.pop("prompt_tokens_details")["cached_tokens"] - ua.pop("prompt_tokens_details")["cached_tokens"]
    if ca != cb or ua != ub or n != a["usage"]["completion_tokens"] or n == 0:
        bad += 1
        print("request %d: alone %s\n  together %s" % (k, json.dumps(ca)[:300], json.dumps(cb)[:300]))
open(w + "/reused", "w").write(str(reused))
sys.exit(bad if reused > 0 else 99)
EOF
r=$?
sed 's/^/     | /' "$work/cmp" | head -12
check "16 requests with logprobs and top logprobs: alone and all at once (batch up to $(cat "$work/most" 2>/dev/null), $(cat "$work/reused" 2>/dev/null) prompt tokens from the prefix cache the second time), every number the same" $r
r=0; [ "$(cat "$work/most" 2>/dev/null || echo 0)" -ge 8 ] || r=1
check "  ... and they did share the node's batch (at most $(cat "$work/most" 2>/dev/null) at once)" $r

kill -TERM "${pids[@]}" 2>/dev/null; sleep 0.3
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
