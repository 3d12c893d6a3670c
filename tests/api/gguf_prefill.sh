#!/usr/bin/env bash
# A long prompt on a GGUF node with 1 s silence limits on both sides of every link: as many
# tokens as take about 10 s to compute on this machine (measured first with `superfluid model
# run`: 2,000 to 14,000) on a model as wide as Qwen2.5-0.5B (2 of its layers, one compute
# thread), in chunks of 256 on the node's engine thread. Meanwhile a short stream on
# the same node starts, gets a token each step and ends (the engine's greedy text) before the
# long prompt is done; no link goes silent or drops (the head's and the node's logs, the
# head's reconnect count), and the long completion is answered.
# Usage: gguf_prefill.sh NODED HEADD CLI SOURCE_DIR [WORDS]   (exit 77: no llama.cpp
# vocabulary; KEEP=DIR keeps the work folder)
set -uo pipefail
noded=$1 headd=$2 cli=$3 src=$4 words=${5:-}
. "$(dirname "$0")/lib.sh"
unset SUPERFLUID_HEAD SUPERFLUID_API_KEY
gguf_vocab "$src"
now() { date +%s.%N; }
since() { python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$(now)"; }

M=$work/qwen05.gguf
gguf_make "$M" qwen2 qwen2.5-0.5b q8_0 --layers 2
# How many words take some 10 s here: 2,000 timed with the engine alone (a word is a token or
# two), scaled, within what the context holds.
if [ -z "$words" ]; then
	tc=$(now)
	SF_MODEL_QUIET=1 "$cli" model run "$M" --threads 1 --n 1 --ctx-len 16384 \
		--prompt "$(python3 -c 'print(" ".join(["river stone"] * 1000))')" >/dev/null 2>&1
	t=$(since "$tc")
	words=$(python3 -c "import sys; t = max(float(sys.argv[1]), 0.05); print(max(2000, min(14000, int(2000 * 10 / t))))" "$t")
fi
model=random-qwen2.5-0.5b-q8_0
engine_says "$work/want" "$M" --prompt 'Once upon a time' --n 3
# SF_TEST_SLOW=K (scripts/test sets 2) makes the silence limits K s: on a box loaded past its
# cores (a CI check beside builds, load 9 on 2 cores) a node's loop thread once waited 1,011 ms
# for the CPU with nothing blocking it. (A 256-token chunk takes some 0.8 s here, so the limit
# alone would not see a loop computing one; the short stream's tokens arriving while the
# prompt computes are what show the loop free.)
silence=$((1000 * ${SF_TEST_SLOW:-1}))
start_gguf_node n1 "$M" --threads 1 --ctx-len 16384 --silence-ms "$silence" --heartbeat-ms 100 && p1=$port
start_head head "127.0.0.1:$p1" --silence-ms "$silence" --heartbeat-ms 100
base="http://127.0.0.1:$hport"
nodes_up 1
check "a node of a 0.5B-wide model up, $((silence / 1000)) s silence limits on both sides" $?
req POST /v1/completions "{\"model\":\"$model\",\"prompt\":\"hello\",\"max_tokens\":1}" # the tokenizer, once

python3 - "$model" "$words" >"$work/long.json" <<'EOF'
import json, random, sys
random.seed(1)
w = "alpha beta gamma delta river stone cloud market engine fleet".split()
print(json.dumps({"model": sys.argv[1], "max_tokens": 4, "temperature": 0,
                  "prompt": " ".join(random.choice(w) for _ in range(int(sys.argv[2])))}))
EOF
t0=$(now)
curl -sS -o "$work/long.out" -H 'Content-Type: application/json' --data-binary @"$work/long.json" \
	"$base/v1/completions" &
lpid=$!
for _ in $(seq 400); do "$cli" status --head "$base" 2>/dev/null | grep -q 'sessions=1 ' && break; sleep 0.05; done
sleep 0.5 # into its computing
t1=$(now)
# The short stream: 3 tokens, one a step (a step computes 256 of the long prompt's tokens too),
# each byte's time since t1 noted.
"$cli" generate --head "$base" --stream --temperature 0 --max-tokens 3 'Once upon a time' 2>"$work/short.err" |
	python3 -c 'import sys, time
t1, out = float(sys.argv[1]), open(sys.argv[2], "wb")
times = open(sys.argv[3], "w")
for b in iter(lambda: sys.stdin.buffer.read(1), b""):
    out.write(b); out.flush(); print("%.1f" % (time.time() - t1), file=times, flush=True)' "$t1" "$work/short" "$work/short.times"
rc=${PIPESTATUS[0]}
short_s=$(since "$t1")
kill -0 "$lpid" 2>/dev/null && during=yes || during=no
r=0; [ "$rc" = 0 ] && cmp -s "$work/short" "$work/want" && [ "$during" = yes ] || r=1
check "a short stream on the same node, started into the long prompt: the engine's text, its tokens after $(uniq "$work/short.times" | paste -sd, -) s, done in $short_s s while the prompt still computes ($during)" $r
[ "$r" = 0 ] || { echo "     | got: $(cat "$work/short")"; echo "     | want: $(cat "$work/want")"; sed 's/^/     | /' "$work/short.err"; }
wait "$lpid"
long_s=$(since "$t0")
r=0; [ "$(j "$work/long.out" 'd["usage"]["completion_tokens"], d["choices"][0]["finish_reason"]')" = "(4, 'length')" ] &&
	[ "$(j "$work/long.out" 'd["usage"]["prompt_tokens"] >= 2000')" = True ] || r=1
check "the long completion is answered: $(j "$work/long.out" 'd["usage"]["prompt_tokens"]') prompt tokens in $long_s s" $r

r=0
grep -iE "silen|closed|dialing again|unreachable" "$work/head.err" "$work/n1.err" | sed 's/^/     | /' | head -5
grep -qiE "silen|closed|dialing again|unreachable" "$work/head.err" "$work/n1.err" && r=1
[ "$(metric "superfluid_node_reconnects_total{node=\"127.0.0.1:$p1\",identity=\"n1\"}")" = 0 ] &&
	[ "$(metric "superfluid_node_up{node=\"127.0.0.1:$p1\",identity=\"n1\"}")" = 1 ] || r=1
check "no link went silent or dropped (logs; reconnects 0, node up)" $r

kill -TERM "${pids[@]}" 2>/dev/null; sleep 0.3
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
