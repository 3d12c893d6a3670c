#!/usr/bin/env bash
# The client API with curl: two real superfluid-noded, a superfluid-headd serving HTTP on
# loopback, and the simulated engine's own reference (sim_expect) for every text it returns.
# Models, completions, chat with and without streaming, named sessions across turns,
# logprobs, errors, bearer keys, HTTPS, /health, /metrics, a client that goes away.
# Usage: api.sh NODED HEADD SIM_EXPECT SOURCE_DIR   (KEEP=DIR keeps the work folder)
set -uo pipefail
noded=$1 headd=$2 expect=$3 src=$4
. "$(dirname "$0")/lib.sh"

start_node n1 && p1=$port
start_node n2 && p2=$port

# ---- a head with no node up ----
start_head h0 "127.0.0.1:1"
base="http://127.0.0.1:$hport"
req GET /health
r=0; [ "$status" = 503 ] && [ "$(j "$work/out" 'd["status"]')" = unavailable ] || r=1
check "/health is 503 while no node serves a model" $r
kill -TERM "$hpid"; wait "$hpid" 2>/dev/null

# ---- the head ----
start_head head "127.0.0.1:$p1,127.0.0.1:$p2" --http-max-body 65536
base="http://127.0.0.1:$hport"
wait_health
check "/health turns 200 once nodes are up" $?

req GET /v1/models
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["object"]')" = list ] &&
	[ "$(j "$work/out" '[m["id"] for m in d["data"]]')" = "['sim-1']" ] || r=1
check "GET /v1/models lists sim-1" $r
req GET /v1/models/sim-1
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["id"], d["object"]')" = "('sim-1', 'model')" ] || r=1
check "GET /v1/models/sim-1" $r

# ---- completions ----
printf 'Once upon a time' | want --temperature 0 --max-tokens 24
req POST /v1/completions '{"model":"sim-1","prompt":"Once upon a time","max_tokens":24,"temperature":0}'
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["object"]')" = text_completion ] &&
	[ "$(j "$work/out" 'd["choices"][0]["text"]' )" = "$(cat "$work/want")" ] &&
	[ "$(j "$work/out" 'd["choices"][0]["finish_reason"]')" = "$(cut -d' ' -f1 "$work/want.meta")" ] &&
	[ "$(j "$work/out" 'd["usage"]["prompt_tokens"], d["usage"]["completion_tokens"]')" = "(16, $(cut -d' ' -f2 "$work/want.meta"))" ] || r=1
check "a completion's text, finish_reason and usage equal the engine's" $r

curl -sSN -H 'Content-Type: application/json' --data-binary \
	'{"model":"sim-1","prompt":"Once upon a time","max_tokens":24,"temperature":0,"stream":true}' \
	"$base/v1/completions" >"$work/out"
r=0; [ "$(sse_text "$work/out" text)" = "$(cat "$work/want")" ] && [ "$(tail -c 14 "$work/out")" = "$(printf 'data: [DONE]\n\n')" ] || r=1
check "a streamed completion carries the same text, then [DONE]" $r

# ---- chat ----
chat_prompt 'Tell me about the fleet.' | want --seed 7
req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"user","content":"Tell me about the fleet."}],"seed":7}'
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["object"]')" = chat.completion ] &&
	[ "$(j "$work/out" 'd["choices"][0]["message"]["role"]')" = assistant ] &&
	[ "$(j "$work/out" 'd["choices"][0]["message"]["content"]')" = "$(cat "$work/want")" ] &&
	[ "$(j "$work/out" 'd["choices"][0]["finish_reason"]')" = stop ] || r=1
check "a chat reply equals the engine's for the ChatML prompt" $r
cp "$work/want" "$work/want.chat"

curl -sSN -H 'Content-Type: application/json' --data-binary \
	'{"model":"sim-1","messages":[{"role":"user","content":"Tell me about the fleet."}],"seed":7,"stream":true,"stream_options":{"include_usage":true}}' \
	"$base/v1/chat/completions" >"$work/out"
r=0; [ "$(sse_text "$work/out")" = "$(cat "$work/want")" ] || r=1
python3 - "$work/out" <<'EOF' || r=1
import json, sys
chunks = [json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith("data: {")]
assert all(c["object"] == "chat.completion.chunk" for c in chunks)
assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
assert all("usage" in c for c in chunks)
EOF
check "a streamed chat: role first, the same text, finish_reason, a usage chunk" $r

chat_prompt 'Count to ten.' | want --temperature 0 --max-tokens 200
stop=$(python3 -c "import sys; t=open(sys.argv[1]).read(); print(t[5:8])" "$work/want")
req POST /v1/chat/completions "{\"model\":\"sim-1\",\"messages\":[{\"role\":\"user\",\"content\":\"Count to ten.\"}],\"temperature\":0,\"max_tokens\":200,\"stop\":[$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$stop")]}"
cut_at=$(python3 -c "import sys; t=open(sys.argv[1]).read(); print(repr(t[:t.index(sys.argv[2])]))" "$work/want" "$stop")
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'repr(d["choices"][0]["message"]["content"])')" = "$cut_at" ] &&
	[ "$(j "$work/out" 'd["choices"][0]["finish_reason"]')" = stop ] || r=1
check "a stop sequence cuts the reply where it first appears" $r

req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"user","content":"hi"}],"temperature":0,"max_tokens":5,"logprobs":true,"top_logprobs":3}'
r=0; [ "$status" = 200 ] &&
	[ "$(j "$work/out" 'len(d["choices"][0]["logprobs"]["content"])')" = "$(j "$work/out" 'd["usage"]["completion_tokens"]')" ] &&
	[ "$(j "$work/out" 'all(len(x["top_logprobs"]) == 3 and x["logprob"] <= 0 and x["top_logprobs"][0]["logprob"] >= x["top_logprobs"][2]["logprob"] for x in d["choices"][0]["logprobs"]["content"])')" = True ] &&
	[ "$(j "$work/out" '"".join(x["token"] for x in d["choices"][0]["logprobs"]["content"]) == d["choices"][0]["message"]["content"]')" = True ] || r=1
check "logprobs: one entry per token, three alternatives each, tokens spell the content" $r

# ---- n > 1 ----
req POST /v1/completions '{"model":"sim-1","prompt":"Once upon a time","max_tokens":30,"seed":9,"n":3}'
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'len(d["choices"])')" = 3 ] || r=1
total=0
for i in 0 1 2; do
	printf 'Once upon a time' | want --seed $((9 + i)) --max-tokens 30
	[ "$(j "$work/out" "d['choices'][$i]['index']")" = "$i" ] &&
		[ "$(j "$work/out" "d['choices'][$i]['text']")" = "$(cat "$work/want")" ] || r=1
	total=$((total + $(cut -d' ' -f2 "$work/want.meta")))
done
[ "$(j "$work/out" 'd["usage"]["completion_tokens"]')" = "$total" ] || r=1
check "n = 3: three choices, choice i the engine's text at seed + i; usage counts all" $r
req POST /v1/completions '{"model":"sim-1","prompt":"Once upon a time","max_tokens":30,"seed":9,"n":3,"stream":true}'
r=0; [ "$status" = 200 ] || r=1
for i in 0 1 2; do
	printf 'Once upon a time' | want --seed $((9 + i)) --max-tokens 30
	got=$(python3 -c 'import json,sys
t=""
for l in open(sys.argv[1]):
    if l.startswith("data: {"):
        for c in json.loads(l[6:])["choices"]:
            if c["index"] == int(sys.argv[2]): t += c["text"]
sys.stdout.write(t)' "$work/out" "$i")
	[ "$got" = "$(cat "$work/want")" ] || r=1
done
[ "$(grep -c '^data: \[DONE\]' "$work/out")" = 1 ] || r=1
check "n = 3 streamed: each index's text the engine's at seed + i, one [DONE]" $r
req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"user","content":"hi"}],"n":2,"session":"s-n"}'
r=0; [ "$status" = 400 ] && [ "$(j "$work/out" 'd["error"]["param"]')" = n ] || r=1
check "n = 2 with a named session: 400 naming n" $r

# ---- named sessions ----
chat_prompt 'My name is Ada.' | want --seed 3 --max-tokens 30
cp "$work/want" "$work/turn1"
req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"user","content":"My name is Ada."}],"seed":3,"max_tokens":30}' -H 'X-Superfluid-Session: conv-1'
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["choices"][0]["message"]["content"]')" = "$(cat "$work/turn1")" ] || r=1
check "a named session's first turn" $r
{ chat_prompt 'My name is Ada.'; cat "$work/turn1"; printf '<|im_end|>\n'; chat_prompt 'What is my name?'; } |
	want --seed 3 --max-tokens 30
req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"user","content":"What is my name?"}],"max_tokens":30,"session":"conv-1"}'
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["choices"][0]["message"]["content"]')" = "$(cat "$work/want")" ] || r=1
check "its next turn sends only the new message and continues the conversation" $r
req GET /v1/sessions/conv-1
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["id"], d["turns"], d["model"], d["busy"]')" = "('conv-1', 2, 'sim-1', False)" ] &&
	[ "$(j "$work/out" 'd["node"] is not None')" = True ] || r=1
check "GET /v1/sessions/conv-1 shows two turns and its node" $r
req DELETE /v1/sessions/conv-1
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["deleted"]')" = True ] || r=1
req GET /v1/sessions/conv-1
[ "$status" = 404 ] && [ "$(j "$work/out" 'd["error"]["code"]')" = session_not_found ] || r=1
check "DELETE ends it; then it is not found" $r

# ---- errors ----
err_is() { # name status code param
	local r=0
	[ "$status" = "$2" ] && [ "$(j "$work/out" 'd["error"]["code"]')" = "$3" ] &&
		[ "$(j "$work/out" 'd["error"]["param"]')" = "$4" ] &&
		[ -n "$(j "$work/out" 'd["error"]["message"]')" ] || r=1
	check "$1" $r
}
req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"user","content":"hi"}'
err_is "malformed JSON is a 400 that says where" 400 None None
grep -q "line 1" "$work/out"; check "  ... naming the line and column" $?
req POST /v1/chat/completions '{"model":"nope","messages":[{"role":"user","content":"hi"}]}'
err_is "an unknown model is a 404 model_not_found" 404 model_not_found model
req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"user","content":"hi"}],"temperature":"hot"}'
err_is "a bad temperature is a 400 naming it" 400 invalid_type temperature
req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"wizard","content":"hi"}]}'
err_is "a bad role is a 400 naming messages[0].role" 400 invalid_value "messages[0].role"
req POST /v1/chat/completions '{"model":"sim-1"}'
err_is "missing messages is a 400" 400 missing_required_parameter messages
python3 -c "print('{\"model\":\"sim-1\",\"prompt\":\"' + 'x' * 70000 + '\"}')" >"$work/big.json"
status=$(curl -sS -o "$work/out" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$work/big.json" "$base/v1/completions")
r=0; [ "$status" = 413 ] || r=1
check "a body past --http-max-body is a 413" $r
req GET /v1/chat/completions
r=0; [ "$status" = 405 ] || r=1
check "GET on a POST endpoint is a 405" $r
req GET /v1/nothing
err_is "an unknown URL is a 404" 404 unknown_url None
printf 'GARBAGE\r\n\r\n' | timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$hport; cat >&3; cat <&3" >"$work/out" 2>/dev/null
r=0; head -1 "$work/out" | grep -q "^HTTP/1.1 400" || r=1
check "a request line that is not HTTP gets a 400" $r
req GET /health
check "the head still serves after all that" "$([ "$status" = 200 ]; echo $?)"

# ---- a client that goes away ----
start_node slow --sim-tokens-per-s 40 && ps=$port
start_head slowhead "127.0.0.1:$ps"
sbase="http://127.0.0.1:$hport"
for _ in $(seq 100); do curl -s "$sbase/health" | grep -q '"ok"' && break; sleep 0.05; done
# stream_then_leave BODY PATTERN: streams BODY and hangs up once the stream shows PATTERN (the
# generation is running by then, however slow the machine), or after 10 s.
stream_then_leave() {
	curl -sSN -H 'Content-Type: application/json' --data-binary "$1" "$sbase/v1/completions" \
		>"$work/leave.out" 2>/dev/null &
	local cp=$!
	for _ in $(seq 200); do grep -q "$2" "$work/leave.out" 2>/dev/null && break; sleep 0.05; done
	kill "$cp" 2>/dev/null; wait "$cp" 2>/dev/null
}
stream_then_leave '{"model":"sim-1","prompt":"a long story","max_tokens":100000,"stream":true}' '"text"'
r=1
for _ in $(seq 60); do grep -q "the client went away; generation cancelled" "$work/slowhead.err" && { r=0; break; }; sleep 0.05; done
check "a client that disconnects mid-stream cancels its generation" $r
stream_then_leave '{"model":"sim-1","prompt":"a long story","max_tokens":100000,"stream":true,"n":2}' '"index":1'
r=1
for _ in $(seq 60); do [ "$(grep -c "the client went away; generation cancelled" "$work/slowhead.err")" -ge 3 ] && { r=0; break; }; sleep 0.05; done
check "... and with n = 2, both choices' generations" $r

# ---- a client that reads too slowly ----
start_head cuthead "127.0.0.1:$ps" --stream-buffer 4096 --http-sndbuf 4096
cbase="http://127.0.0.1:$hport"
for _ in $(seq 100); do curl -s "$cbase/health" | grep -q '"ok"' && break; sleep 0.05; done
python3 "$(dirname "$0")/slow_client.py" "$hport" 1 1.5 >"$work/out" 2>&1
r=0; [ "$(cut -d' ' -f2- "$work/out")" = "True False" ] || { echo "     | the client read: $(cat "$work/out")"; r=1; }
logged=1
for _ in $(seq 40); do
	grep -q "left [0-9]* bytes unread (--stream-buffer 4096); its stream ends and the generation is cancelled" "$work/cuthead.err" && { logged=0; break; }
	sleep 0.05
done
[ "$logged" = 0 ] || { echo "     | the head did not log the cut"; r=1; }
counted=1
for _ in $(seq 20); do curl -s "$cbase/metrics" | grep -q '^superfluid_streams_cut_total [1-9]' && { counted=0; break; }; sleep 0.1; done
[ "$counted" = 0 ] || { echo "     | /metrics counts no cut stream"; r=1; }
check "a client past --stream-buffer: its stream ends with client_too_slow, the generation is cancelled" $r
r=1
for _ in $(seq 20); do # within a second: a generation left running takes seconds more at 40 tokens/s
	curl -s "$cbase/v1/fleet" >"$work/fleet"
	[ "$(j "$work/fleet" 'd["nodes"][0]["free_sessions"] == d["nodes"][0]["max_sessions"] and d["nodes"][0]["batch_running"] == 0')" = True ] && { r=0; break; }
	sleep 0.05
done
check "... and the node has let its session go (free = max, nothing running)" $r

# ---- metrics ----
req GET /metrics
r=0; [ "$status" = 200 ] || r=1
for m in 'superfluid_http_requests_total{endpoint="chat_completions",status="2xx"}' \
	'superfluid_time_to_first_token_seconds_count' 'superfluid_inter_token_seconds_bucket' \
	"superfluid_node_up{node=\"127.0.0.1:$p1\",identity=\"n1\"} 1" 'superfluid_completion_tokens_total' \
	'superfluid_replayed_events_total' 'superfluid_sessions '; do
	grep -qF "$m" "$work/out" || { echo "     | /metrics lacks $m"; r=1; }
done
check "/metrics: requests, time to first token, inter-token, node state, tokens" $r

# ---- bearer keys ----
(umask 077; printf '# keys\nsk-first\n\nsk-second\n' >"$work/keys")
start_head keyhead "127.0.0.1:$p1" --api-keys "$work/keys"
base="http://127.0.0.1:$hport"
wait_health
req GET /v1/models
err_is "no key: 401 missing_api_key" 401 missing_api_key None
req GET /v1/models "" -H 'Authorization: Bearer sk-wrong'
err_is "a wrong key: 401 invalid_api_key" 401 invalid_api_key None
req GET /v1/models "" -H 'Authorization: Bearer sk-second'
check "a listed key is let in" "$([ "$status" = 200 ]; echo $?)"

# ---- HTTPS ----
if bash "$src/scripts/make-test-cert" "$work/tls" >/dev/null 2>&1; then
	start_head tlshead "127.0.0.1:$p1" --tls-cert "$work/tls/cert.pem" --tls-key "$work/tls/key.pem"
	base="https://127.0.0.1:$hport"
	for _ in $(seq 100); do curl -s --cacert "$work/tls/cert.pem" "$base/health" | grep -q '"ok"' && break; sleep 0.05; done
	chat_prompt 'Tell me about the fleet.' | want --seed 7
	req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"user","content":"Tell me about the fleet."}],"seed":7}' --cacert "$work/tls/cert.pem"
	r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["choices"][0]["message"]["content"]')" = "$(cat "$work/want")" ] || r=1
	check "HTTPS with --tls-cert/--tls-key: the same reply" $r
	curl -sS --http1.0 -o /dev/null "http://127.0.0.1:$hport/health" 2>/dev/null
	req GET /health "" --cacert "$work/tls/cert.pem"
	check "plain HTTP on the HTTPS port is turned away; the head goes on" "$([ "$status" = 200 ]; echo $?)"
else
	fail "scripts/make-test-cert failed"
fi

kill -TERM "${pids[@]}" 2>/dev/null; sleep 0.3
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
