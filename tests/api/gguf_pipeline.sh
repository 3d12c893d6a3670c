#!/usr/bin/env bash
# --pipeline over a GGUF model: a random-weight qwen2 of 4 layers split over three
# superfluid-noded --model FILE stages (layers 0..1, 1..2, 2..4) beside one whole node. The
# pipeline's completions, whole, streamed and through the CLI, and its chat replies equal the
# unsplit engine's greedy output computed here alone (superfluid model run), and the whole
# node's, also for a prompt of several of the stages' chunks; seeded sampling gives the whole
# node's stream, and its logprobs the whole node's; a stage killed with a step in flight and
# started again on its port (its kept context gone: the step runs again from the start): the
# generation completes, equal still. Then Qwen3.5 (test-qwen35: three Gated DeltaNet layers and
# a gated attention) split over two stages (layers 0..2, 2..4), each keeping its own layers'
# recurrent states: greedy, a prompt of several chunks and seeded sampling give the unsplit
# engine's stream, also with its first stage killed with a step in flight and started again.
# The same for Gemma 3 (test-gemma3, 4 layers: three with a window of 40), whose stages keep
# only their window layers' window.
# Usage: gguf_pipeline.sh NODED HEADD CLI SOURCE_DIR   (exit 77: no llama.cpp vocabulary;
# KEEP=DIR keeps the work folder)
set -uo pipefail
noded=$1 headd=$2 cli=$3 src=$4
. "$(dirname "$0")/lib.sh"
unset SUPERFLUID_HEAD SUPERFLUID_API_KEY
gguf_vocab "$src"
run() { "$cli" "$@" >"$work/got" 2>"$work/err"; rc=$?; }
same() { # NAME: $work/got equals $work/want, and the CLI (if run last) exited 0
	local r=0
	[ "${rc:-0}" = 0 ] && cmp -s "$work/got" "$work/want" ||
		{ r=1; echo "     | got:  $(head -c 160 "$work/got")"; echo "     | want: $(head -c 160 "$work/want")"; sed 's/^/     | /' "$work/err" 2>/dev/null | head -3; }
	rc=0
	check "$1" $r
}

M=$work/qwen2-4.gguf
gguf_make "$M" qwen2 test-qwen2 q8_0 --layers 4
model=random-test-qwen2-q8_0 pmodel=random-test-qwen2-q8_0-pipeline
start_gguf_node whole "$M" --threads 1 && pw=$port
stage_ports=() stage_pids=()
for k in 1 2 3; do start_gguf_node "stage-$k" "$M" --threads 1 && stage_ports+=("$port") && stage_pids+=("$npid"); done
pipe=127.0.0.1:${stage_ports[0]},127.0.0.1:${stage_ports[1]},127.0.0.1:${stage_ports[2]}
start_head head "127.0.0.1:$pw" --pipeline "$pipe" --silence-ms 10000
base="http://127.0.0.1:$hport"
H=(--head "$base")
for _ in $(seq 600); do req GET /v1/models; grep -q "$pmodel" "$work/out" && break; sleep 0.05; done
r=0; [ "$(j "$work/out" 'sorted(m["id"] for m in d["data"])')" = "['$model', '$pmodel']" ] || r=1
check "GET /v1/models lists the model and its pipeline once the three stages are up" $r
r=0
grep -qF "layers 0..1 of $model's 4" "$work/head.err" && grep -qF "layers 1..2 of $model's 4" "$work/head.err" &&
	grep -qF "layers 2..4 of $model's 4" "$work/head.err" || r=1
check "the stages run layers 0..1, 1..2 and 2..4" $r

p='Once upon a time'
engine_says "$work/want" "$M" --prompt "$p" --n 40
req POST /v1/completions "{\"model\":\"$pmodel\",\"prompt\":\"$p\",\"max_tokens\":40,\"temperature\":0}"
jw "$work/got" "$work/out" 'd["choices"][0]["text"]'
same "a completion through the pipeline is the unsplit engine's greedy text"
run generate "${H[@]}" --model "$pmodel" --temperature 0 --stream --max-tokens 40 "$p"
same "  ... streamed through superfluid generate, the same"
run generate "${H[@]}" --model "$model" --temperature 0 --max-tokens 40 "$p"
same "  ... and the whole node's at temperature 0"
p2='The fleet of machines serves, one token at a time, a model: 1, 2, 3...'
engine_says "$work/want" "$M" --prompt "$p2" --n 24
run generate "${H[@]}" --model "$pmodel" --temperature 0 --max-tokens 24 "$p2"
same "another prompt through the pipeline: the engine's greedy text"
# A prompt of several of the stages' chunks (128 positions a step), then seeded sampling: the
# whole node's stream with the same seed.
p3=$(for i in $(seq 30); do printf 'The fleet of machines serves, one token at a time, a model. '; done)
engine_says "$work/want" "$M" --prompt "$p3" --n 24
run generate "${H[@]}" --model "$pmodel" --temperature 0 --max-tokens 24 "$p3"
same "a prompt of several chunks through the pipeline: the engine's greedy text"
run generate "${H[@]}" --model "$model" --temperature 0.9 --top-p 0.95 --seed 11 --max-tokens 40 "$p"
cp "$work/got" "$work/want"
run generate "${H[@]}" --model "$pmodel" --temperature 0.9 --top-p 0.95 --seed 11 --max-tokens 40 "$p"
same "seeded sampling through the pipeline: the whole node's stream with that seed"
body="\"prompt\":\"$p\",\"max_tokens\":16,\"temperature\":0.9,\"seed\":3,\"logprobs\":4"
req POST /v1/completions "{\"model\":\"$model\",$body}"
cp "$work/out" "$work/whole.json"
req POST /v1/completions "{\"model\":\"$pmodel\",$body}"
r=0; python3 - "$work/out" "$work/whole.json" <<'PY' || r=1
import json, sys
a, b = (json.load(open(f))["choices"][0] for f in sys.argv[1:])
assert a["text"] == b["text"] and a["logprobs"] == b["logprobs"], (a, b)
assert len(a["logprobs"]["tokens"]) == 16 and all(len(t) == 4 for t in a["logprobs"]["top_logprobs"])
PY
check "logprobs (4 alternatives) through the pipeline: the whole node's, bit for bit" $r
# The vocabulary's own template (Qwen2's: a default system turn first), as the head renders it.
engine_says "$work/want" "$M" --prompt $'<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nTell me about the fleet.<|im_end|>\n<|im_start|>assistant\n' --n 24
req POST /v1/chat/completions "{\"model\":\"$pmodel\",\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about the fleet.\"}],\"max_tokens\":24,\"temperature\":0}"
jw "$work/got" "$work/out" 'd["choices"][0]["message"]["content"]'
same "a chat reply through the pipeline: the engine's greedy reply to the model's own template"

# restart_mid NAME PID PORT MODEL PIPELINE_MODEL PROMPT OPTIONS...: the stage PID stopped
# before a generation: its first step waits; killed with the step in flight, then started
# again on its port as NAME: the head dials it again and asks the step again. The stream in
# $work/got.
restart_mid() {
	local name=$1 spid=$2 sport=$3 model=$4 pm=$5 prompt=$6 np up
	kill -STOP "$spid"
	"$cli" generate "${H[@]}" --model "$pm" --stream "${@:7}" "$prompt" >"$work/late" 2>"$work/late.err" &
	gpid=$!
	sleep 0.5
	kill -9 "$spid"; kill -CONT "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	noded_again "$work/$name.err" 1200 --listen "127.0.0.1:$sport" --blob-dir "$work/blobs-$name" \
		--identity "$name" --model "$model" --threads 1
	wait "$gpid"; rc=$?
	cp "$work/late" "$work/got"; cp "$work/late.err" "$work/err"
}
engine_says "$work/want" "$M" --prompt "$p" --n 40
restart_mid stage-2b "${stage_pids[1]}" "${stage_ports[1]}" "$M" "$pmodel" "$p" --temperature 0 --max-tokens 40
same "a stage killed with a step in flight and started again: the generation completes, equal"
kill -TERM "$hpid" 2>/dev/null

# ---- two stages of layers 0..2 and 2..4, each keeping its own layers' context: Qwen3.5's
# recurrent states; Gemma 3's window layers keeping only their window (a window of 40: the
# prompt of several chunks goes two pages past it, so each stage lets go of window rows) ----
two_stages() { # TAG FILE VOCAB SHAPE NAME
	local tag=$1 Q=$2 qmodel=random-$4-q8_0 qpmodel=random-$4-q8_0-pipeline qw qports=() qpids=()
	gguf_make "$Q" "$3" "$4" q8_0 --layers 4
	start_gguf_node "$tag-whole" "$Q" --threads 1 && qw=$port
	for k in 1 2; do start_gguf_node "$tag-stage-$k" "$Q" --threads 1 && qports+=("$port") && qpids+=("$npid"); done
	start_head "${tag}head" "127.0.0.1:$qw" --pipeline "127.0.0.1:${qports[0]},127.0.0.1:${qports[1]}" --silence-ms 10000
	base="http://127.0.0.1:$hport"
	H=(--head "$base")
	for _ in $(seq 600); do req GET /v1/models; grep -q "$qpmodel" "$work/out" && break; sleep 0.05; done
	r=0
	grep -qF "layers 0..2 of $qmodel's 4" "$work/${tag}head.err" && grep -qF "layers 2..4 of $qmodel's 4" "$work/${tag}head.err" || r=1
	check "$5 over two stages: layers 0..2 and 2..4" $r
	engine_says "$work/want" "$Q" --prompt "$p" --n 40
	run generate "${H[@]}" --model "$qpmodel" --temperature 0 --max-tokens 40 "$p"
	same "  ... a completion through them is the unsplit engine's greedy text"
	engine_says "$work/want" "$Q" --prompt "$p3" --n 24
	run generate "${H[@]}" --model "$qpmodel" --temperature 0 --max-tokens 24 "$p3"
	same "  ... a prompt of several chunks: the engine's greedy text"
	engine_says "$work/want" "$Q" --prompt "$p" --n 40 --temperature 0.9 --top-p 0.95 --seed 11
	run generate "${H[@]}" --model "$qpmodel" --temperature 0.9 --top-p 0.95 --seed 11 --max-tokens 40 "$p"
	same "  ... seeded sampling: the unsplit engine's stream with that seed"
	restart_mid "$tag-stage-1b" "${qpids[0]}" "${qports[0]}" "$Q" "$qpmodel" "$p" --temperature 0.9 --top-p 0.95 --seed 11 --max-tokens 40
	same "  ... its first stage killed with a step in flight and started again: the stream completes, equal"
}
two_stages q "$work/qwen35-4.gguf" qwen35 test-qwen35 Qwen3.5
two_stages g "$work/gemma3-4.gguf" gpt-2 test-gemma3 "Gemma 3" # (GPT-2's vocabulary: smaller)

kill -TERM "${pids[@]}" 2>/dev/null; sleep 0.3
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
