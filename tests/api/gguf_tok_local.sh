#!/usr/bin/env bash
# The head's own encodings (protocol 5: a node sends its tokenizer's file after its export)
# against a node's: for three of llama.cpp's vocabularies (qwen2's and Llama 3's byte-level
# BPE, Llama 2's SentencePiece) and Llama 3's with gpt-4o's pre-tokenizer (Phi-4-mini's; its
# texts also tests/tok/cased.txt), a random-weight model of one layer served by a node of
# protocol 5 (head A: encodes itself) and by one at --version-max 4 (head B: asks the node,
# as before). Every text of llama.cpp's tokenizer tests (models/ggml-vocab-*.gguf.inp)
# through POST /v1/tokenize: the same tokens from both heads; a chat turn (qwen2's template):
# the same
# prompt tokens and reply, a completion's too; /metrics: head A made its encodings itself,
# head B none.
# Usage: gguf_tok_local.sh NODED HEADD CLI SOURCE_DIR   (exit 77: no llama.cpp vocabulary;
# KEEP=DIR keeps the work folder)
set -uo pipefail
noded=$1 headd=$2 cli=$3 src=$4
. "$(dirname "$0")/lib.sh"
unset SUPERFLUID_HEAD SUPERFLUID_API_KEY
gguf_vocab "$src"

metric() { curl -sS "http://127.0.0.1:$1/metrics" | sed -n "s/^$2 //p"; }
for set in "qwen2 test-qwen2" "llama-bpe test-llama" "llama-spm test-llama" "gpt-4o test-llama"; do
	read -r vocab shape <<<"$set"
	M=$work/$vocab.gguf inp=$LLAMA_SRC/models/ggml-vocab-$vocab.gguf.inp
	if [ "$vocab" = gpt-4o ]; then # the bundle has no o200k vocabulary
		gguf_make "$work/base.gguf" llama-bpe "$shape" q8_0 --layers 1
		python3 "$(dirname "$0")/gguf_edit.py" "$work/base.gguf" "$M" \
			--set-str tokenizer.ggml.pre gpt-4o >/dev/null || fail "gguf_edit.py: pre gpt-4o"
		inp=$work/gpt-4o.inp
		cat "$LLAMA_SRC/models/ggml-vocab-llama-bpe.gguf.inp" "$src/tests/tok/cased.txt" >"$inp"
	else
		gguf_make "$M" "$vocab" "$shape" q8_0 --layers 1
	fi
	start_gguf_node "n5-$vocab" "$M" --threads 1 && p5=$port
	start_gguf_node "n4-$vocab" "$M" --threads 1 --version-max 4 && p4=$port
	start_head "a-$vocab" "127.0.0.1:$p5" && ha=$hport
	start_head "b-$vocab" "127.0.0.1:$p4" && hb=$hport
	base="http://127.0.0.1:$ha" model=
	for _ in $(seq 400); do req GET /v1/models; model=$(j "$work/out" 'd["data"][0]["id"] if d["data"] else ""'); [ -n "$model" ] && break; sleep 0.05; done
	r=0
	head_encodes "$work/a-$vocab.err" || r=1 # every shard: one still loading asks the node
	check "$vocab: head A loads the tokenizer's file and encodes with it" $r
	r=0
	python3 - "$inp" "$ha" "$hb" "$work/tok-$vocab" <<'PY' || r=1
import http.client, json, sys
inp, ha, hb, out = sys.argv[1:]
texts = open(inp, encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
# A model name: whatever the head lists.
def models(port):
    c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
    c.request("GET", "/v1/models")
    return [m["id"] for m in json.loads(c.getresponse().read())["data"]]
model = models(ha)[0]
def tokenize(port, text):
    for _ in range(200):
        c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
        c.request("POST", "/v1/tokenize", json.dumps({"model": model, "text": text}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        body = json.loads(r.read())
        if r.status == 200:
            return body["tokens"]
        if r.status != 503:
            raise SystemExit("%d %s" % (r.status, body))
        import time; time.sleep(0.05)
    raise SystemExit("no answer")
n = 0
with open(out, "w") as f:
    for t in texts:
        a, b = tokenize(ha, t), tokenize(hb, t)
        if a != b:
            raise SystemExit("%r: the head %s, the node %s" % (t[:60], a[:12], b[:12]))
        n += 1
    f.write("%d texts\n" % n)
assert n > 20, n
PY
	check "$vocab: the $(cat "$work/tok-$vocab" 2>/dev/null) of ${inp##*/} encoded by head A itself are head B's node's" $r
	body='"prompt":"Tell me about <|im_start|> <s> the fleet, and 🦙.","max_tokens":8,"temperature":0'
	base="http://127.0.0.1:$ha"; req POST /v1/completions "{\"model\":\"$model\",$body}"; cp "$work/out" "$work/gen-a"
	base="http://127.0.0.1:$hb"; req POST /v1/completions "{\"model\":\"$model\",$body}"
	r=0; python3 - "$work/gen-a" "$work/out" <<'PY' || r=1
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a["usage"] == b["usage"] and a["choices"][0]["text"] == b["choices"][0]["text"], (a, b)
PY
	check "$vocab: a completion: the same prompt tokens and reply through both heads" $r
	if [ "$vocab" = qwen2 ]; then # its own chat template: a conversation's pieces
		body='"messages":[{"role":"user","content":"Tell me about <|im_start|> the fleet, and 🦙."}],"max_tokens":8,"temperature":0'
		base="http://127.0.0.1:$ha"; req POST /v1/chat/completions "{\"model\":\"$model\",$body}"; cp "$work/out" "$work/chat-a"
		base="http://127.0.0.1:$hb"; req POST /v1/chat/completions "{\"model\":\"$model\",$body}"
		r=0; python3 - "$work/chat-a" "$work/out" <<'PY' || r=1
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a["usage"] == b["usage"] and a["choices"][0]["message"] == b["choices"][0]["message"], (a, b)
PY
		check "$vocab: a chat turn (its template): the same prompt tokens and reply through both heads" $r
	fi
	r=0; [ "$(metric "$ha" superfluid_tokenizer_encoded_here_total)" -gt 20 ] &&
		[ "$(metric "$hb" superfluid_tokenizer_encoded_here_total)" = 0 ] || r=1
	check "$vocab: /metrics: head A encoded $(metric "$ha" superfluid_tokenizer_encoded_here_total) texts itself, head B none" $r
done

# Issue 32: a node that serves the same model with the same tokens' bytes but another
# tokenizer (its last 20,000 merges left out). Protocol 7: its TOKENIZER states another full
# digest than the fleet's (the node whose export the head took): it is not used to encode for
# the model, and the head says so naming both nodes (either may be the one whose export the
# head took). Nodes of protocol 6 state none: the probe text the head has every other node
# encode once it encodes itself still finds it (a rolling upgrade).
M=$work/qwen2.gguf M2=$work/qwen2-fewer-merges.gguf
python3 "$(dirname "$0")/gguf_edit.py" "$M" "$M2" --drop-merges 20000 || fail "gguf_edit.py --drop-merges"
start_gguf_node "same" "$M" --threads 1 --model-name probe-model && pa=$port
start_gguf_node "other" "$M2" --threads 1 --model-name probe-model && pb=$port
start_head "probe" "127.0.0.1:$pa,127.0.0.1:$pb" && base="http://127.0.0.1:$hport"
line=
for _ in $(seq 600); do line=$(grep "differs from the fleet's" "$work/probe.err") && break; sleep 0.05; done
check "protocol 7: a node whose tokenizer differs (the same tokens, fewer merges) is refused by its full digest, named with the node whose export the head took: ${line:-no such line}" \
	"$(echo "$line" | grep -qE "node (same|other)'s tokenizer for model probe-model differs from the fleet's, node (other|same)'s \(full tokenizer digest [0-9a-f]{16}, not [0-9a-f]{16}: .*\): node (same|other) is given no session of probe-model and not used to encode it"; echo $?)"
r=0; head_encodes "$work/probe.err" || r=1
req POST /v1/tokenize '{"model":"probe-model","text":"antidisestablishmentarianism"}'
[ "$status" = 200 ] || r=1
check "... and the head encodes the model itself still ($status)" $r
# ... and runs no session of the model there (its end tokens or BOS flag may differ): a head of
# one shard (one tokenizer client, one placement), eight completions at once (placement would
# spread them over both nodes by their room), all on the other node.
start_head "probe1" "127.0.0.1:$pa,127.0.0.1:$pb" --shards 1 && base="http://127.0.0.1:$hport"
line=
for _ in $(seq 600); do line=$(grep "differs from the fleet's" "$work/probe1.err") && break; sleep 0.05; done
refused=$(echo "$line" | sed -nE "s/.*: node (same|other) is given no session of probe-model.*/\1/p")
r=0; [ -n "$refused" ] || r=1
head_encodes "$work/probe1.err" || r=1
cpids=()
for i in $(seq 8); do
	curl -sS -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/json' --data-binary \
		"{\"model\":\"probe-model\",\"prompt\":\"Session $i of eight, about the fleet\",\"max_tokens\":24}" \
		"$base/v1/completions" >"$work/spread-$i" &
	cpids+=($!)
done
wait "${cpids[@]}"
for i in $(seq 8); do [ "$(cat "$work/spread-$i" 2>/dev/null)" = 200 ] || r=1; done
computed() { curl -sS "$base/metrics" | sed -nE "s/^superfluid_node_prompt_tokens_computed_total\{.*identity=\"$1\"\} //p"; }
used=0 idle=
for _ in $(seq 200); do # the nodes' statuses carry their counts
	for n in same other; do [ "$n" = "$refused" ] || used=$(computed "$n"); done
	[ "${used:-0}" -gt 0 ] && break; sleep 0.05
done
idle=$(computed "${refused:-none}")
[ "${used:-0}" -gt 0 ] && [ "$idle" = 0 ] || r=1
check "... and is given no session of it: 8 completions, prompt tokens computed ${used:-?} on the other node, ${idle:-?} on node ${refused:-?}" $r
start_gguf_node "same6" "$M" --threads 1 --model-name probe-model --version-max 6 && pa=$port
start_gguf_node "other6" "$M2" --threads 1 --model-name probe-model --version-max 6 && pb=$port
start_head "probe6" "127.0.0.1:$pa,127.0.0.1:$pb" && base="http://127.0.0.1:$hport"
line=
for _ in $(seq 600); do line=$(grep "encodes otherwise" "$work/probe6.err") && break; sleep 0.05; done
check "protocol 6 nodes (no full digest): the probe text still finds the one that differs: ${line:-no such line}" \
	"$(echo "$line" | grep -qE "node (same6|other6)'s tokenizer for model probe-model encodes otherwise than node (other6|same6)'s, .* is given no session of probe-model and not used to encode it"; echo $?)"

# Issue 32: a model whose chat template is 8 MiB (the most a template may have) is served: its
# export carries the template once (twice, it passed the 16 MiB frame and every request was a
# 503 tokenizer_unavailable for ever); its completions are answered, and a chat is a 400 that
# says the template is over what the head renders.
python3 - "$work/big.jinja" <<'PY'
import sys
t = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
     "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
pad = "{#" + "x" * ((8 << 20) - len(t) - 4) + "#}"
open(sys.argv[1], "w").write(pad + t)
PY
B=$work/big-template.gguf
gguf_make "$B" qwen2 test-qwen2 q8_0 --layers 1 --chat-template "$work/big.jinja"
start_gguf_node "big" "$B" --threads 1 --model-name big-template && pbig=$port
start_head "big" "127.0.0.1:$pbig" && base="http://127.0.0.1:$hport"
for _ in $(seq 600); do req POST /v1/completions '{"model":"big-template","prompt":"hello","max_tokens":2}'; [ "$status" = 200 ] && break; sleep 0.05; done
check "a model with an 8 MiB chat template: its completions are answered ($status)" "$([ "$status" = 200 ]; echo $?)"
nodes_up 1 # every shard's link open: a chat before a shard has the template waits for it
req POST /v1/chat/completions '{"model":"big-template","messages":[{"role":"user","content":"hi"}],"max_tokens":2}'
check "... and a chat is a 400 naming the template's size ($status)" \
	"$([ "$status" = 400 ] && grep -q 'over the 262144 a template may have' "$work/out"; echo $?)"
kill -TERM "${pids[@]}" 2>/dev/null; sleep 0.3
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
