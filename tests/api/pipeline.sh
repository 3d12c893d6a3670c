#!/usr/bin/env bash
# --pipeline: a model split over three stage nodes beside one whole node, through the HTTP
# API and the CLI. The pipeline's output equals the unsplit engine's (greedy), whole and
# streamed, completions and chat, and with logprobs, a seed or n choices the whole node's; no
# session lands on a stage; a stage stopped and then
# killed with a step in flight and started again on its port: the generation goes on,
# equal still; a stage gone past the step timeout fails the request naming it.
# Usage: pipeline.sh NODED HEADD SIM_EXPECT CLI   (KEEP=DIR keeps the work folder)
set -uo pipefail
noded=$1 headd=$2 expect=$3 cli=$4
. "$(dirname "$0")/lib.sh"
unset SUPERFLUID_HEAD SUPERFLUID_API_KEY
run() { "$cli" "$@" >"$work/out" 2>"$work/err"; rc=$?; }

start_node whole && pw=$port
stage_ports=()
stage_pids=()
for k in 1 2 3; do start_node "stage-$k" && stage_ports+=("$port") && stage_pids+=("$npid"); done
pipe=127.0.0.1:${stage_ports[0]},127.0.0.1:${stage_ports[1]},127.0.0.1:${stage_ports[2]}
start_head head "127.0.0.1:$pw" --pipeline "$pipe" --silence-ms 10000
base="http://127.0.0.1:$hport"
H=(--head "$base")
for _ in $(seq 100); do req GET /v1/models; grep -q sim-1-pipeline "$work/out" && break; sleep 0.05; done
r=0; [ "$(j "$work/out" 'sorted(m["id"] for m in d["data"])')" = "['sim-1', 'sim-1-pipeline']" ] || r=1
check "GET /v1/models lists the pipeline once its three stages are up" $r
r=0; for k in 1 2 3; do grep -q "pipeline stage $k (127.0.0.1:${stage_ports[$((k - 1))]}): layers" "$work/head.err" || r=1; done
grep -qF "layers 0..2 of sim-1's 8" "$work/head.err" && grep -qF "layers 2..5 of sim-1's 8" "$work/head.err" &&
	grep -qF "layers 5..8 of sim-1's 8" "$work/head.err" || r=1
check "each stage's layer range is logged: boundaries (i+1)*8/3" $r

printf 'Once upon a time' | want --temperature 0 --max-tokens 120
run generate "${H[@]}" --model sim-1-pipeline --temperature 0 --max-tokens 120 'Once upon a time'
r=0; [ "$rc" = 0 ] && cmp -s "$work/out" "$work/want" || r=1
check "a completion through the pipeline equals the unsplit engine's greedy output" $r
cp "$work/out" "$work/pipe_out"
run generate "${H[@]}" --model sim-1 --temperature 0 --max-tokens 120 'Once upon a time'
r=0; [ "$rc" = 0 ] && cmp -s "$work/out" "$work/pipe_out" || r=1
check "... and the whole node's at temperature 0" $r
run generate "${H[@]}" --model sim-1-pipeline --temperature 0 --stream --max-tokens 120 'Once upon a time'
r=0; [ "$rc" = 0 ] && cmp -s "$work/out" "$work/want" || r=1
check "streamed, the same" $r
chat_prompt 'Tell me about the fleet.' | want --temperature 0 --max-tokens 200
req POST /v1/chat/completions '{"model":"sim-1-pipeline","messages":[{"role":"user","content":"Tell me about the fleet."}],"max_tokens":200,"temperature":0}'
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["choices"][0]["message"]["content"]')" = "$(cat "$work/want")" ] &&
	[ "$(j "$work/out" 'd["choices"][0]["finish_reason"]')" = "$(cut -d' ' -f1 "$work/want.meta" | sed 's/length/length/')" ] || r=1
check "a chat reply through the pipeline, ended by the chat template's end of turn" $r
run status "${H[@]}"
r=0; [ "$(grep -c ' stage=[123]$' "$work/out")" = 3 ] && grep -q "^127.0.0.1:$pw up .* sessions=0 cached=[-0-9%]* pages=[0-9]*$" "$work/out" || r=1
check "status marks the three stage nodes" $r
# Whichever shard answers (a new connection each, spread over the shards when there are
# several): /health counts the fleet's one node, /v1/fleet lists it and the three stages,
# /metrics has each stage's up gauge.
r=0
for _ in $(seq 8); do
	req GET /health
	[ "$(j "$work/out" 'd["nodes"], d["nodes_up"]')" = "(1, 1)" ] || { r=1; cat "$work/out"; }
	req GET /v1/fleet
	[ "$(j "$work/out" 'sorted(n.get("stage", 0) for n in d["nodes"])')" = "[0, 1, 2, 3]" ] || { r=1; cat "$work/out"; }
	req GET /metrics
	[ "$(grep -c '^superfluid_pipeline_stage_up{stage="[123]",.*} 1$' "$work/out")" = 3 ] &&
		grep -q '^superfluid_nodes_up 1$' "$work/out" || { r=1; grep 'stage_up\|nodes_up' "$work/out"; }
done
check "/health, /v1/fleet and /metrics say the same of the stages whichever shard answers" $r
req POST /v1/chat/completions '{"model":"sim-1-pipeline","messages":[{"role":"user","content":"hi"}],"session":"s1"}'
r=0; [ "$status" = 400 ] && [ "$(j "$work/out" 'd["error"]["param"]')" = session ] || r=1
check "a named session on the pipeline: 400 naming session" $r
# Logprobs and seeded sampling: the pipeline's choice is the whole node's, entry for entry.
body='"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":3,"temperature":0.9,"seed":5,"max_tokens":30'
req POST /v1/chat/completions "{\"model\":\"sim-1-pipeline\",$body}"
cp "$work/out" "$work/piped"
req POST /v1/chat/completions "{\"model\":\"sim-1\",$body}"
r=0; python3 - "$work/piped" "$work/out" <<'PY' || r=1
import json, sys
a, b = (json.load(open(f))["choices"][0] for f in sys.argv[1:])
assert a["message"]["content"] == b["message"]["content"], (a, b)
la, lb = a["logprobs"]["content"], b["logprobs"]["content"]
assert len(la) == len(lb) > 0 and all(len(x["top_logprobs"]) == 3 for x in la)
assert la == lb, (la[:2], lb[:2])
PY
check "logprobs (3 alternatives) through the pipeline, seeded: the whole node's, entry for entry" $r
# n = 3 choices (choice i sampled with seed + i), streamed: the whole node's choices.
body='"prompt":"Once upon a time","n":3,"temperature":0.8,"seed":11,"max_tokens":25,"stream":true'
req POST /v1/completions "{\"model\":\"sim-1-pipeline\",$body}"
cp "$work/out" "$work/piped"
req POST /v1/completions "{\"model\":\"sim-1\",$body}"
r=0; python3 - "$work/piped" "$work/out" <<'PY' || r=1
import json, sys
def texts(path):
    t = {}
    for line in open(path):
        if line.startswith("data: {"):
            for c in json.loads(line[6:])["choices"]:
                t[c["index"]] = t.get(c["index"], "") + c.get("text", "")
    return t
a, b = texts(sys.argv[1]), texts(sys.argv[2])
assert sorted(a) == [0, 1, 2] and a == b, (a, b)
assert len(set(a.values())) == 3, a
PY
check "n = 3 streamed choices through the pipeline: the whole node's three" $r

# Stage 2 stopped before the request: its first step waits; killed with the step in flight,
# then started again on its port: the head dials it again and asks the step again.
printf 'Once upon a time' | want --temperature 0 --max-tokens 120
kill -STOP "${stage_pids[1]}"
"$cli" generate "${H[@]}" --model sim-1-pipeline --temperature 0 --stream --max-tokens 120 'Once upon a time' >"$work/late" 2>"$work/late.err" &
gpid=$!
sleep 0.5
kill -9 "${stage_pids[1]}"; kill -CONT "${stage_pids[1]}" 2>/dev/null
wait "${stage_pids[1]}" 2>/dev/null # gone, and its port with it, before the new one binds it
wait_log() { for _ in $(seq 100); do grep -qF "$1" "$2" && return 0; sleep 0.05; done; return 1; }
noded_again "$work/stage-2b.err" 100 --listen "127.0.0.1:${stage_ports[1]}" --blob-dir "$work/blobs-stage-2b" \
	--identity stage-2b
wait "$gpid"; r=$?
[ "$r" = 0 ] && cmp -s "$work/late" "$work/want" || r=1
check "a stage killed with a step in flight and started again: the generation completes, equal" $r

# Stage 3 gone for good: the request fails after the step timeout, naming the stage.
kill -9 "${stage_pids[2]}"
sleep 0.2
t0=$(date +%s)
run generate "${H[@]}" --model sim-1-pipeline --temperature 0 --max-tokens 5 'hello'
r=0; [ "$rc" = 2 ] && grep -q "pipeline stage 3 (stage-3) was down for 10000 ms" "$work/err" || r=1
check "a stage gone past the step timeout: exit 2, the message names the stage" $r
[ "$r" = 0 ] || sed 's/^/     | /' "$work/err"

kill -TERM "${pids[@]}" 2>/dev/null; sleep 0.3
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
