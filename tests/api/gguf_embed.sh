#!/usr/bin/env bash
# api.gguf_embed: POST /v1/embeddings through a head and a node running the GGUF engine, against
# llama.cpp's embeddings of the same file (llama-ref embed: pooled, scaled to length 1, as its
# server gives them): a random-weight qwen3 model (llama.cpp's qwen2 vocabulary) in F32 and
# Q8_0, pooled as the file says (no pooling_type: mean; qwen3.pooling_type 3: the last token,
# as Qwen3-Embedding's files say; 2: the first); token ids and text (the node encodes it as
# llama.cpp's server does: the same tokens, usage.prompt_tokens their count); several inputs
# in one request (each its own vector; 40 run together by the node, each the vector it has
# alone), base64 the same values, dimensions the first values scaled again, and a token past
# the vocabulary a 400 naming its input.
# Usage: gguf_embed.sh NODED HEADD CLI REPO_ROOT   (exit 77: no llama.cpp, unless CI=true)
set -uo pipefail
noded=$1 headd=$2 cli=$3 root=$4 expect=/bin/false
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
. "$root/tests/ref/fetch.sh"
llama_ref_need "$root" "$work"

TEXT='The old lighthouse keeper climbed the spiral stairs every evening.'
ids=$(printf '%s' "$TEXT" | "$LLAMA_REF" tokenize "$LLAMA_SRC/models/ggml-vocab-qwen2.gguf" --specials --bos | head -1)
ids_json=$(python3 -S -c 'import sys; print(",".join(sys.argv[1].split()))' "$ids")

# same FILE POOLING TYPE: our vector for the ids and for the text against llama.cpp's.
same() {
	local f=$1 pool=$2 type=$3 tol
	case $type in f32) tol=0.0005 ;; *) tol=0.01 ;; esac
	"$LLAMA_REF" embed "$f" --tokens "$ids" --pooling "$pool" --threads 2 >"$work/ref.txt" ||
		{ fail "llama-ref embed $f"; return; }
	start_node "n-$pool-$type" --model "$f" --threads 2 --ctx-len 512 && np=$port
	start_head "h-$pool-$type" "127.0.0.1:$np"
	base="http://127.0.0.1:$hport"
	wait_health
	model=random-test-qwen3-$type
	for _ in $(seq 200); do req GET /v1/models; grep -q "$model" "$work/out" && break; sleep 0.1; done
	req POST /v1/embeddings "{\"model\":\"$model\",\"input\":[[$ids_json],$(python3 -S -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$TEXT")]}"
	cp "$work/out" "$work/emb.json"
	r=0; [ "$status" = 200 ] && python3 - "$work/emb.json" "$work/ref.txt" "$tol" "$ids" <<'EOF' || r=1
import json, sys
d = json.load(open(sys.argv[1]))
ref = [float(x) for x in open(sys.argv[2]).read().split()]
tol, n_ids = float(sys.argv[3]), len(sys.argv[4].split())
a, b = d["data"][0]["embedding"], d["data"][1]["embedding"]
cos = sum(x * y for x, y in zip(a, ref))
worst = max(abs(x - y) for x, y in zip(a, ref))
print("     | cos %.9f, max |diff| %.3g over %d values" % (cos, worst, len(a)))
assert len(a) == len(ref), (len(a), len(ref))
assert worst <= tol and cos > 0.999, "not llama.cpp's"
assert max(abs(x - y) for x, y in zip(a, b)) < 1e-6, "the text's vector is not its ids'"
assert d["usage"]["prompt_tokens"] == 2 * n_ids, d["usage"]
assert abs(sum(x * x for x in a) - 1) < 1e-4
EOF
	check "[$type, pooling $pool] llama.cpp's embedding of the file; the text encoded to the same tokens" $r
	kill "$hpid" "$np" 2>/dev/null
	wait "$hpid" "$np" 2>/dev/null
}

"$cli" model make --shape test-qwen3 --type f32 --layers 2 \
	--vocab "$LLAMA_SRC/models/ggml-vocab-qwen2.gguf" -o "$work/f32.gguf" >"$work/make.out" 2>&1 ||
	{ cat "$work/make.out"; echo "FAIL superfluid model make"; exit 1; }
"$cli" model make --shape test-qwen3 --type q8_0 --layers 2 \
	--vocab "$LLAMA_SRC/models/ggml-vocab-qwen2.gguf" -o "$work/q8_0.gguf" >"$work/make.out" 2>&1 ||
	{ cat "$work/make.out"; echo "FAIL superfluid model make q8_0"; exit 1; }
python3 "$here/gguf_edit.py" "$work/f32.gguf" "$work/f32-last.gguf" --set-u32 qwen3.pooling_type 3
python3 "$here/gguf_edit.py" "$work/f32.gguf" "$work/f32-cls.gguf" --set-u32 qwen3.pooling_type 2
same "$work/f32.gguf" mean f32
same "$work/f32-last.gguf" last f32
same "$work/f32-cls.gguf" cls f32
same "$work/q8_0.gguf" mean q8_0

# The shapes of the answer, on the last file.
start_node n-shapes --model "$work/f32.gguf" --threads 2 --ctx-len 512 && np=$port
start_head h-shapes "127.0.0.1:$np"
base="http://127.0.0.1:$hport"
wait_health
model=random-test-qwen3-f32
for _ in $(seq 200); do req GET /v1/models; grep -q "$model" "$work/out" && break; sleep 0.1; done
req POST /v1/embeddings "{\"model\":\"$model\",\"input\":[\"a cat\",\"a dog\",\"a cat\"],\"encoding_format\":\"float\"}"
cp "$work/out" "$work/three.json"
req POST /v1/embeddings "{\"model\":\"$model\",\"input\":[\"a cat\",\"a dog\",\"a cat\"],\"encoding_format\":\"base64\"}"
cp "$work/out" "$work/b64.json"
req POST /v1/embeddings "{\"model\":\"$model\",\"input\":\"a cat\",\"dimensions\":16}"
cp "$work/out" "$work/d16.json"
r=0; python3 - "$work/three.json" "$work/b64.json" "$work/d16.json" <<'EOF' || r=1
import base64, json, math, struct, sys
f, b, d16 = (json.load(open(p)) for p in sys.argv[1:])
v = [e["embedding"] for e in f["data"]]
assert [e["index"] for e in f["data"]] == [0, 1, 2]
assert v[0] == v[2] and v[0] != v[1], "three inputs, each its own vector"
w = [list(struct.unpack("<%df" % len(v[0]), base64.b64decode(e["embedding"]))) for e in b["data"]]
assert all(abs(x - y) < 1e-6 for p, q in zip(v, w) for x, y in zip(p, q)), "base64 is not the floats"
s = d16["data"][0]["embedding"]
n = math.sqrt(sum(x * x for x in v[0][:16]))
assert len(s) == 16 and all(abs(x - y / n) < 1e-5 for x, y in zip(s, v[0])), "dimensions"
EOF
check "three inputs, base64 the same floats, dimensions 16 the first values scaled again" $r
# Many inputs in one request, run together by the node (the inputs whose tokens fit one forward
# call in one step, a long one alone in chunks): each the vector it has alone.
python3 -S - >"$work/many.json" <<'EOF'
import json
words = "the old keeper climbed stairs every evening to light a lamp for ships at sea".split()
inputs = [" ".join(words[:1 + i % len(words)]) * (1 + i // 12) for i in range(40)]
inputs[17] = " ".join(words * 20)  # longer than a forward call takes
print(json.dumps({"model": "random-test-qwen3-f32", "input": inputs, "encoding_format": "float"}))
EOF
t0=$(date +%s.%N)
status=$(curl -sS -o "$work/many.out" -w '%{http_code}' -H 'Content-Type: application/json' \
	--data-binary @"$work/many.json" "$base/v1/embeddings")
t1=$(date +%s.%N)
r=0; [ "$status" = 200 ] || r=1
: >"$work/alone.out"
for k in $(seq 0 39); do
	python3 -S -c 'import json,sys; d=json.load(open(sys.argv[1])); d["input"]=d["input"][int(sys.argv[2])]; print(json.dumps(d))' \
		"$work/many.json" "$k" >"$work/one.json"
	curl -sS -H 'Content-Type: application/json' --data-binary @"$work/one.json" "$base/v1/embeddings" >>"$work/alone.out"
	echo >>"$work/alone.out"
done
t2=$(date +%s.%N)
[ $r = 0 ] && python3 - "$work/many.out" "$work/alone.out" <<'EOF' || r=1
import json, sys
many = json.load(open(sys.argv[1]))
alone = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
assert len(many["data"]) == 40 == len(alone)
worst = max(abs(x - y) for m, a in zip(many["data"], alone)
            for x, y in zip(m["embedding"], a["data"][0]["embedding"]))
assert many["usage"]["prompt_tokens"] == sum(a["usage"]["prompt_tokens"] for a in alone)
print("     | max |diff| %.3g against each alone" % worst)
assert worst < 1e-4, worst
EOF
python3 -S -c 'import sys; print("     | 40 inputs in one request %.2f s, one request each %.2f s" % (float(sys.argv[2]) - float(sys.argv[1]), float(sys.argv[3]) - float(sys.argv[2])))' "$t0" "$t1" "$t2"
check "40 inputs in one request (one longer than a forward call): each its vector alone" $r
req POST /v1/embeddings "{\"model\":\"$model\",\"input\":[\"a cat\",[1,2,999999],\"a dog\"]}"
r=0; [ "$status" = 400 ] && grep -q 'input 1.*past the vocabulary' "$work/out" || r=1
check "a token past the vocabulary in the second input: 400 naming input 1" $r
req POST /v1/embeddings "{\"model\":\"$model\",\"input\":[[1,2,999999]]}"
r=0; [ "$status" = 400 ] && grep -q 'past the vocabulary' "$work/out" || r=1
check "a token past the vocabulary: 400 saying so" $r
req POST /v1/embeddings "{\"model\":\"$model\",\"input\":\"a\",\"dimensions\":100000}"
r=0; [ "$status" = 400 ] && [ "$(j "$work/out" 'd["error"]["param"]')" = dimensions ] || r=1
check "dimensions past the model's: 400 naming dimensions" $r
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
