#!/usr/bin/env bash
# api.fields: the fields beyond OpenAI's current ones (vLLM's, llama.cpp's, OpenAI's legacy)
# each work or are a 400 naming them, through a head and simulated nodes (sim_expect computes
# the engine's stream with the same fields): ignore_eos and min_tokens (the end-of-generation
# token banned, protocol 6; a fleet of protocol 5 nodes refuses them by name), stop_token_ids
# and include_stop_str_in_output (whole and streamed, chat and completions), stops not counted
# before min_tokens, echo, n_probs, best_of, suffix, cache_prompt (false: no cached pages used),
# prompts as token ids, several prompts in one request.
# Usage: fields.sh NODED HEADD SIM_EXPECT   (KEEP=DIR keeps the work)
set -uo pipefail
noded=$1 headd=$2 expect=$3
. "$(dirname "$0")/lib.sh"

err_is() { [ "$(j "$work/out" 'd["error"]["param"], d["error"]["code"]')" = "('$1', '$2')" ]; }
text() { j "$work/out" 'd["choices"][0]["text"]'; }
ctext() { j "$work/out" 'd["choices"][0]["message"]["content"]'; }
finish() { j "$work/out" 'd["choices"][0]["finish_reason"]'; }
ntok() { j "$work/out" 'd["usage"]["completion_tokens"]'; }
P='Once upon a time'
complete() { req POST /v1/completions "{\"model\":\"sim-1\",\"prompt\":\"$P\",\"temperature\":0$1}"; }

start_node n6 && p6=$port
start_head head "127.0.0.1:$p6"
base="http://127.0.0.1:$hport"
wait_health || { echo "FAIL the head never became healthy"; exit 1; }

# The greedy stream ends by itself (EOS) before 120 tokens: what ignore_eos changes.
printf '%s' "$P" | want --temperature 0 --max-tokens 120
read -r why n_eos <"$work/want.meta"
r=0; [ "$why" = stop ] && [ "$n_eos" -lt 110 ] || r=1
check "the reference stream ends by EOS after $n_eos tokens" $r
complete ',"max_tokens":120'
r=0; [ "$status" = 200 ] && [ "$(text)" = "$(cat "$work/want")" ] && [ "$(finish)" = stop ] &&
	[ "$(ntok)" = "$n_eos" ] || r=1
check "without ignore_eos: the same stream, finish stop" $r

printf '%s' "$P" | want --temperature 0 --max-tokens 120 --ignore-eos on
complete ',"max_tokens":120,"ignore_eos":true'
r=0; [ "$status" = 200 ] && [ "$(text)" = "$(cat "$work/want")" ] && [ "$(finish)" = length ] &&
	[ "$(ntok)" = 120 ] || r=1
check "ignore_eos: EOS never drawn, all 120 tokens (the engine's stream with it banned)" $r

printf '%s' "$P" | want --temperature 0 --max-tokens 120 --min-tokens $((n_eos + 10))
read -r _ n_min <"$work/want.meta"
complete ",\"max_tokens\":120,\"min_tokens\":$((n_eos + 10))"
r=0; [ "$status" = 200 ] && [ "$(text)" = "$(cat "$work/want")" ] &&
	[ "$(ntok)" = "$n_min" ] && [ "$n_min" -ge $((n_eos + 10)) ] || r=1
check "min_tokens $((n_eos + 10)): no EOS before it ($n_min tokens)" $r

# stop_token_ids: the sim's tokens below 256 are bytes; 32 is the space.
printf '%s' "$P" | want --temperature 0 --max-tokens 60
full=$(cat "$work/want")
before=${full%% *}
complete ',"max_tokens":60,"stop_token_ids":[32]'
r=0; [ "$status" = 200 ] && [ "$(text)" = "$before" ] && [ "$(finish)" = stop ] || r=1
check "stop_token_ids [32]: cut before the first space (\"$before\"), finish stop" $r
complete ',"max_tokens":60,"stop_token_ids":[32],"include_stop_str_in_output":true'
r=0; [ "$status" = 200 ] && [ "$(text)" = "$before " ] || r=1
check "... with include_stop_str_in_output: the space kept" $r
complete ',"max_tokens":60,"stop_token_ids":[32],"stream":true'
r=0; [ "$status" = 200 ] && [ "$(sse_text "$work/out" text)" = "$before" ] || r=1
check "... streamed: the same text" $r
stop=${full:3:2}
complete ",\"max_tokens\":60,\"stop\":[\"$stop\"],\"include_stop_str_in_output\":true"
cut=$(python3 -S -c 'import sys; t, s = sys.argv[1:]; print(t[:t.index(s) + len(s)])' "$full" "$stop")
r=0; [ "$status" = 200 ] && [ "$(text)" = "$cut" ] || r=1
check "a stop sequence (\"$stop\") with include_stop_str_in_output: its text kept" $r
# Stops count from the min_tokens-th token (a token is a byte here).
complete ',"max_tokens":60,"stop":[" "],"min_tokens":12'
cut=$(python3 -S -c 'import sys; t = sys.argv[1]; print(t[:t.index(" ", 11)])' "$full")
r=0; [ "$status" = 200 ] && [ "$(text)" = "$cut" ] || r=1
check "stop \" \" with min_tokens 12: the first space from the 12th token on cuts" $r
req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"user","content":"Hi"}],"temperature":0,"max_tokens":60,"stop_token_ids":[32],"include_stop_str_in_output":true}'
got=$(j "$work/out" 'repr(d["choices"][0]["message"]["content"])')
r=0; [ "$status" = 200 ] && [ "$(finish)" = stop ] &&
	python3 -S -c 'import sys; t = eval(sys.argv[1]); sys.exit(not (t.endswith(" ") and " " not in t[:-1] and len(t) > 1))' "$got" || r=1
check "chat: stop_token_ids with include_stop_str_in_output ends at the first space, kept" $r
req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"user","content":"Hi"}],"stop_token_ids":[264]}'
r=0; [ "$status" = 400 ] && err_is stop_token_ids invalid_value &&
	grep -q 'past the vocabulary of sim-1 (264 tokens)' "$work/out" || r=1
check "a stop token past the vocabulary: 400 naming stop_token_ids" $r

# echo, n_probs, best_of, suffix.
complete ',"max_tokens":20,"echo":true'
printf '%s' "$P" | want --temperature 0 --max-tokens 20
r=0; [ "$status" = 200 ] && [ "$(text)" = "$P$(cat "$work/want")" ] || r=1
check "echo: the prompt, then the completion" $r
complete ',"max_tokens":20,"echo":true,"stream":true'
r=0; [ "$status" = 200 ] && [ "$(sse_text "$work/out" text)" = "$P$(cat "$work/want")" ] || r=1
check "echo streamed: the same text" $r
complete ',"max_tokens":20,"echo":true,"n":2,"seed":3,"temperature":1'
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'all(c["text"].startswith("'"$P"'") for c in d["choices"]) and len(d["choices"])')" = 2 ] || r=1
check "echo with n = 2: each choice starts with the prompt" $r
complete ',"max_tokens":20,"echo":true,"logprobs":1'
r=0; [ "$status" = 400 ] && err_is echo unsupported_value || r=1
check "echo with logprobs: 400 naming echo" $r
complete ',"max_tokens":5,"n_probs":2'
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'len(d["choices"][0]["logprobs"]["top_logprobs"][0])')" = 2 ] || r=1
check "n_probs 2 (llama.cpp's): two alternatives per token" $r
req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"n_probs":3}'
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'len(d["choices"][0]["logprobs"]["content"][0]["top_logprobs"])')" = 3 ] || r=1
check "chat n_probs 3: top_logprobs of 3" $r
complete ',"max_tokens":5,"best_of":2,"n":2'
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'len(d["choices"])')" = 2 ] || r=1
check "best_of = n: served" $r
complete ',"max_tokens":5,"best_of":3'
r=0; [ "$status" = 400 ] && err_is best_of unsupported_value || r=1
check "best_of above n: 400 naming best_of" $r
complete ',"max_tokens":5,"suffix":" The end."'
r=0; [ "$status" = 400 ] && err_is suffix unsupported_value || r=1
check "suffix: 400 naming it" $r
complete ',"max_tokens":5,"min_tokens":6'
r=0; [ "$status" = 400 ] && err_is min_tokens invalid_value || r=1
check "min_tokens above max_tokens: 400 naming min_tokens" $r

# A prompt as token ids (the sim's bytes): the same tokens as its text, so the same reply; no
# BOS added; echo gives their text; a token past the vocabulary is a 400.
ids=$(python3 -S -c 'import sys; print(",".join(str(b) for b in sys.argv[1].encode()))' "$P")
req POST /v1/completions "{\"model\":\"sim-1\",\"prompt\":[$ids],\"temperature\":0,\"max_tokens\":20,\"echo\":true}"
r=0; [ "$status" = 200 ] && [ "$(text)" = "$P$(cat "$work/want")" ] &&
	[ "$(j "$work/out" 'd["usage"]["prompt_tokens"]')" = ${#P} ] || r=1
check "a prompt of token ids: the text's reply, ${#P} prompt tokens, echo gives their text" $r
req POST /v1/completions "{\"model\":\"sim-1\",\"prompt\":[[$ids]],\"temperature\":0,\"max_tokens\":20}"
r=0; [ "$status" = 200 ] && [ "$(text)" = "$(cat "$work/want")" ] || r=1
check "... as an array holding one array of them" $r
req POST /v1/completions '{"model":"sim-1","prompt":[65,264],"max_tokens":2}'
r=0; [ "$status" = 400 ] && err_is prompt invalid_value && grep -q 'token 264 (at 1)' "$work/out" || r=1
check "a prompt token past the vocabulary: 400 naming prompt" $r

# Several prompts in one request (OpenAI's and vLLM's): n choices per prompt, prompt i's
# choices at i*n.., each the engine's reply to its prompt at seed + index; usage counts each
# prompt once and every choice's tokens.
Q='The fleet of nodes'
req POST /v1/completions "{\"model\":\"sim-1\",\"prompt\":[\"$P\",\"$Q\"],\"max_tokens\":25,\"seed\":5,\"n\":2}"
cp "$work/out" "$work/multi"
r=0; [ "$status" = 200 ] && [ "$(j "$work/multi" 'len(d["choices"])')" = 4 ] || r=1
total=0
for i in 0 1 2 3; do
	if [ $i -lt 2 ]; then printf '%s' "$P"; else printf '%s' "$Q"; fi | want --seed $((5 + i)) --max-tokens 25
	[ "$(j "$work/multi" "d['choices'][$i]['index']")" = $i ] &&
		[ "$(j "$work/multi" "d['choices'][$i]['text']")" = "$(cat "$work/want")" ] || r=1
	total=$((total + $(cut -d' ' -f2 "$work/want.meta")))
done
[ "$(j "$work/multi" 'd["usage"]["completion_tokens"], d["usage"]["prompt_tokens"]')" = "($total, $((${#P} + ${#Q})))" ] || r=1
check "two prompts, n = 2: choices 0-1 the first's replies, 2-3 the second's; usage counts both prompts" $r
req POST /v1/completions "{\"model\":\"sim-1\",\"prompt\":[\"$P\",\"$Q\"],\"max_tokens\":25,\"seed\":5,\"n\":2,\"stream\":true}"
r=0; [ "$status" = 200 ] || r=1
for i in 0 1 2 3; do
	got=$(python3 -S -c 'import json,sys
t=""
for l in open(sys.argv[1]):
    if l.startswith("data: {"):
        for c in json.loads(l[6:])["choices"]:
            if c["index"] == int(sys.argv[2]): t += c["text"]
sys.stdout.write(t)' "$work/out" $i)
	[ "$got" = "$(j "$work/multi" "d['choices'][$i]['text']")" ] || r=1
done
check "... streamed: each index's text the same" $r
req POST /v1/completions "{\"model\":\"sim-1\",\"prompt\":[\"$P\",\"$Q\"],\"temperature\":0,\"max_tokens\":10,\"echo\":true}"
printf '%s' "$Q" | want --temperature 0 --max-tokens 10
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["choices"][1]["text"]')" = "$Q$(cat "$work/want")" ] &&
	[ "$(j "$work/out" 'd["choices"][0]["text"].startswith(d["choices"][0]["text"][:0] + "'"$P"'")')" = True ] || r=1
check "echo with two prompts: each choice starts with its own prompt" $r
qids=$(python3 -S -c 'import sys; print(",".join(str(b) for b in sys.argv[1].encode()))' "$Q")
req POST /v1/completions "{\"model\":\"sim-1\",\"prompt\":[[$ids],[$qids]],\"temperature\":0,\"max_tokens\":10}"
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["choices"][1]["text"]')" = "$(cat "$work/want")" ] &&
	[ "$(j "$work/out" 'd["usage"]["prompt_tokens"]')" = $((${#P} + ${#Q})) ] || r=1
check "two prompts of token ids: the texts' replies" $r
req POST /v1/completions '{"model":"sim-1","prompt":["a","b","c","d","e","f","g","h","i"],"max_tokens":2,"n":8}'
r=0; [ "$status" = 413 ] && [ "$(j "$work/out" 'd["error"]["param"]')" = n ] || r=1
check "nine prompts with n = 8: 413 naming n (64 choices at most)" $r
req POST /v1/completions '{"model":"sim-1","prompt":["a","b","c","d","e","f","g","h"],"max_tokens":2,"n":8}'
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'sorted(c["index"] for c in d["choices"]) == list(range(64))')" = True ] || r=1
check "eight prompts with n = 8: 64 choices" $r
req POST /v1/completions "{\"model\":\"sim-1\",\"prompt\":[\"$P\",\"$Q\"],\"max_tokens\":2,\"session\":\"s1\"}"
r=0; [ "$status" = 400 ] && [ "$(j "$work/out" 'd["error"]["param"]')" = prompt ] || r=1
check "two prompts in a named session: 400 naming prompt" $r
req POST /v1/completions "{\"model\":\"sim-1\",\"prompt\":[\"$P\",[65,264]],\"max_tokens\":2}"
r=0; [ "$status" = 400 ] && err_is prompt invalid_value || r=1
check "a second prompt's token past the vocabulary: 400 naming prompt" $r

# cache_prompt: a long prompt again finds its pages, unless cache_prompt is false.
long=$(python3 -S -c 'print(" ".join("word%d" % i for i in range(60)))')
cached() { req POST /v1/completions "{\"model\":\"sim-1\",\"prompt\":\"$long\",\"max_tokens\":2$1}"; j "$work/out" 'd["usage"]["prompt_tokens_details"]["cached_tokens"]'; }
cached '' >/dev/null
c1=$(cached '')
c2=$(cached ',"cache_prompt":false')
c3=$(cached ',"cache_prompt":true')
r=0; [ "${c1:-0}" -gt 0 ] && [ "$c2" = 0 ] && [ "${c3:-0}" -gt 0 ] || r=1
check "cache_prompt: the prompt's pages found again ($c1, $c3 cached), not with false ($c2)" $r

# A fleet of protocol 5 nodes cannot ban EOS: refused by name, the rest served.
start_node n5 --version-max 5 && p5=$port
start_head old "127.0.0.1:$p5"
base="http://127.0.0.1:$hport"
wait_health
for _ in $(seq 100); do req GET /v1/models; grep -q sim-1 "$work/out" && break; sleep 0.05; done
complete ',"max_tokens":10,"ignore_eos":true'
r=0; [ "$status" = 400 ] && err_is ignore_eos unsupported_on_fleet &&
	grep -q 'node n5 runs an older superfluid (protocol 5)' "$work/out" || r=1
check "ignore_eos on protocol 5 nodes: 400 unsupported_on_fleet naming the node" $r
complete ',"max_tokens":10,"min_tokens":3'
r=0; [ "$status" = 400 ] && err_is min_tokens unsupported_on_fleet || r=1
check "min_tokens there: 400 naming min_tokens" $r
complete ',"max_tokens":10,"min_tokens":0,"ignore_eos":false,"stop_token_ids":[32]'
r=0; [ "$status" = 200 ] && [ "$(text)" = "$before" ] || r=1
check "neutral values and stop_token_ids (the head's) still served there" $r
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
