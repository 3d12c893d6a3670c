#!/usr/bin/env bash
# A fleet serving a real GGUF model: two superfluid-noded --model FILE (a random-weight qwen2
# made here with llama.cpp's qwen2 vocabulary) and a superfluid-headd on loopback. Completions,
# greedy and seeded, whole and streamed, through HTTP and the CLI, equal what the engine
# computes here alone (superfluid model run), text and token counts; several prompts in one
# request a choice each; n = 2 choices are the engine's at seed + i; requests land on both
# nodes; a chat is the engine's reply to the model's own template (the vocabulary file's). A
# llama (SentencePiece vocabulary, no template: a chat is a 400 no_chat_template, or answered
# with chat_template given) and a qwen3 model as well, greedy and seeded.
# Usage: gguf.sh NODED HEADD CLI SOURCE_DIR   (exit 77: no llama.cpp vocabulary; KEEP=DIR)
set -uo pipefail
noded=$1 headd=$2 cli=$3 src=$4
. "$(dirname "$0")/lib.sh"
unset SUPERFLUID_HEAD SUPERFLUID_API_KEY
gguf_vocab "$src"
t_start=$(date +%s.%N)

M=$work/qwen2.gguf
gguf_make "$M" qwen2 test-qwen2 q8_0
model=random-test-qwen2-q8_0
start_gguf_node n1 "$M" --threads 1 && p1=$port
start_gguf_node n2 "$M" --threads 1 && p2=$port
start_head head "127.0.0.1:$p1,127.0.0.1:$p2"
base="http://127.0.0.1:$hport"
H=(--head "$base")
nodes_up 2
check "two nodes on one GGUF model are up at the head" $?
req GET /v1/models
r=0; [ "$(j "$work/out" '[m["id"] for m in d["data"]]')" = "['$model']" ] || r=1
check "GET /v1/models lists the model by its general.name" $r

# completion BODY-FIELDS: POST /v1/completions for $model with the fields (JSON, no braces).
completion() { req POST /v1/completions "{\"model\":\"$model\",$1}"; }
# same NAME FILE: the text in FILE equals $work/want (the engine's).
same() {
	local r=0
	cmp -s "$2" "$work/want" || { r=1; echo "     | got:  $(head -c 160 "$2")"; echo "     | want: $(head -c 160 "$work/want")"; }
	check "$1" $r
}
n_prompt() { # the prompt's token count as the engine encodes it
	SF_MODEL_QUIET=1 "$cli" model run "$M" --prompt "$1" --n 0 --ids | wc -w
}

# ---- greedy ----
prompts=('Once upon a time' 'The fleet of machines serves, one token at a time, a model: 1, 2, 3...'
	$'Line one.\n\tLine two, «quoted» — and 🦙 too.')
for k in "${!prompts[@]}"; do
	p=${prompts[$k]} pj=$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "${prompts[$k]}")
	engine_says "$work/want" "$M" --prompt "$p" --n 24
	completion "\"prompt\":$pj,\"max_tokens\":24,\"temperature\":0"
	jw "$work/got" "$work/out" 'd["choices"][0]["text"]'
	cp "$work/out" "$work/whole.json"
	same "prompt $k, temperature 0: the completion is the engine's own greedy text" "$work/got"
	if [ "$k" = 1 ]; then
		r=0; [ "$status" = 200 ] && [ "$(j "$work/whole.json" 'd["usage"]["prompt_tokens"], d["usage"]["completion_tokens"], d["choices"][0]["finish_reason"]')" = "($(n_prompt "$p"), 24, 'length')" ] || r=1
		check "  ... usage: the engine's prompt token count, 24 tokens, finish_reason length" $r
	fi
	curl -sSN -H 'Content-Type: application/json' --data-binary \
		"{\"model\":\"$model\",\"prompt\":$pj,\"max_tokens\":24,\"temperature\":0,\"stream\":true}" \
		"$base/v1/completions" >"$work/sse"
	sse_text "$work/sse" text >"$work/got"
	same "  ... streamed, the same text" "$work/got"
	"$cli" generate "${H[@]}" --temperature 0 --max-tokens 24 "$p" >"$work/got" 2>"$work/err"
	same "  ... superfluid generate, the same text" "$work/got"
	cp "$work/want" "$work/want$k"
done
# The three prompts in one request: a choice each, each prompt's greedy text.
pj=$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${prompts[@]}")
completion "\"prompt\":$pj,\"max_tokens\":24,\"temperature\":0"
r=0; [ "$status" = 200 ] || r=1
for k in "${!prompts[@]}"; do
	jw "$work/got" "$work/out" "d['choices'][$k]['text']"
	cmp -s "$work/got" "$work/want$k" || r=1
done
check "the three prompts in one request: choice k the engine's greedy text for prompt k" $r

# ---- seeded, temperature > 0 ----
p='Once upon a time'
engine_says "$work/want" "$M" --prompt "$p" --n 32 --temperature 0.8 --seed 5
completion '"prompt":"Once upon a time","max_tokens":32,"temperature":0.8,"seed":5'
jw "$work/got" "$work/out" 'd["choices"][0]["text"]'
same "temperature 0.8, seed 5: the completion is the engine's own draws" "$work/got"
"$cli" generate "${H[@]}" --stream --temperature 0.8 --seed 5 --max-tokens 32 "$p" >"$work/got" 2>"$work/err"
same "  ... superfluid generate --stream, the same text" "$work/got"
engine_says "$work/want" "$M" --prompt "$p" --n 32 --temperature 1.3 --top-p 0.9 --seed 77
"$cli" generate "${H[@]}" --temperature 1.3 --top-p 0.9 --seed 77 --max-tokens 32 "$p" >"$work/got" 2>"$work/err"
same "temperature 1.3, top_p 0.9, seed 77: superfluid generate gives the engine's draws" "$work/got"
completion '"prompt":"Once upon a time","max_tokens":16,"temperature":0.9,"seed":40,"n":2'
r=0
for i in 0 1; do
	engine_says "$work/want" "$M" --prompt "$p" --n 16 --temperature 0.9 --seed $((40 + i))
	jw "$work/got" "$work/out" "[c['text'] for c in d['choices'] if c['index'] == $i][0]"
	cmp -s "$work/got" "$work/want" || r=1
done
check "n = 2 at seed 40: choice i is the engine's draws at seed 40 + i" $r

# ---- both nodes serve: four named sessions at once ----
engine_says "$work/want" "$M" --prompt "$p" --n 48
spids=()
for s in 1 2 3 4; do
	curl -sS -o "$work/named.$s" -H 'Content-Type: application/json' --data-binary \
		"{\"model\":\"$model\",\"prompt\":\"$p\",\"max_tokens\":48,\"temperature\":0,\"session\":\"e2e-$s\"}" \
		"$base/v1/completions" &
	spids+=($!)
done
wait "${spids[@]}"
r=0 nodes=
for s in 1 2 3 4; do
	jw "$work/got" "$work/named.$s" 'd["choices"][0]["text"]'
	cmp -s "$work/got" "$work/want" || r=1
	req GET "/v1/sessions/e2e-$s"
	nodes="$nodes $(j "$work/out" 'd["node"]')"
done
nodes=$(echo $nodes | tr ' ' '\n' | sort -u | tr '\n' ' ')
[ "$(echo $nodes | wc -w)" = 2 ] || r=1
check "four sessions at once land on both nodes ($nodes), each the engine's greedy text" $r

# ---- chat ----
req POST /v1/chat/completions "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about the fleet.\"}],\"max_tokens\":24,\"temperature\":0}"
jw "$work/got" "$work/out" 'd["choices"][0]["message"]["content"]'
chatml=$'<|im_start|>user\nTell me about the fleet.<|im_end|>\n<|im_start|>assistant\n'
own=$'<|im_start|>system\nYou are a helpful assistant<|im_end|>\n'$chatml # the vocabulary's template
engine_says "$work/want" "$M" --prompt "$own" --n 24
r=0; [ "$status" = 200 ] && cmp -s "$work/got" "$work/want" || r=1
check "a chat reply is the engine's greedy reply to the model's own template (its default system turn first)" $r

# ---- a llama with SentencePiece's vocabulary, and a qwen3 ----
for arch in "llama-spm test-llama q4_k_m" "qwen2 test-qwen3 q5_0"; do
	set -- $arch
	A=$work/$2.gguf
	gguf_make "$A" "$1" "$2" "$3" --layers 3
	start_gguf_node "$2" "$A" --threads 1 --model-name "$2" && pa=$port
	start_head "head-$2" "127.0.0.1:$pa"
	base="http://127.0.0.1:$hport"
	nodes_up 1
	engine_says "$work/want" "$A" --prompt 'Once upon a time' --n 24
	req POST /v1/completions "{\"model\":\"$2\",\"prompt\":\"Once upon a time\",\"max_tokens\":24,\"temperature\":0}"
	jw "$work/got" "$work/out" 'd["choices"][0]["text"]'
	same "$2 ($3, $1 vocabulary): the completion is the engine's greedy text" "$work/got"
	engine_says "$work/want" "$A" --prompt 'Once upon a time' --n 24 --temperature 1 --seed 3
	"$cli" generate --head "$base" --model "$2" --stream --temperature 1 --seed 3 --max-tokens 24 'Once upon a time' >"$work/got" 2>"$work/err"
	same "  ... seeded, through superfluid generate: the engine's draws" "$work/got"
	if [ "$1" = llama-spm ]; then
		# Its vocabulary file carries no chat template: a chat is a 400 no_chat_template,
		# and one giving its template in chat_template is answered.
		req POST /v1/chat/completions "{\"model\":\"$2\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":8}"
		r=0; [ "$status" = 400 ] && [ "$(j "$work/out" 'd["error"]["code"]')" = no_chat_template ] || r=1
		req POST /v1/chat/completions "{\"model\":\"$2\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":8,\"chat_template\":\"{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\\\\n{% endfor %}[assistant] \"}"
		[ "$status" = 200 ] && [ "$(j "$work/out" 'd["usage"]["prompt_tokens"] > 3')" = True ] || r=1
		check "  ... a chat without a template is a 400 no_chat_template; with chat_template given, answered" $r
	fi
done

kill -TERM "${pids[@]}" 2>/dev/null; sleep 0.3
echo "$passes passed, $fails failed ($(python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$t_start" "$(date +%s.%N)") s)"
[ "$fails" = 0 ]
