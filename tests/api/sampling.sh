#!/usr/bin/env bash
# Every sampling field from the client to the sampler.
#   sim:  with the simulated engine (the same sampler: its stream is sim_expect's with the same
#         fields): the fields are taken and checked (400s naming the field, a logit_bias token
#         past the model's vocabulary); a session that needs them is refused, naming the node,
#         by a fleet of version 3 nodes (noded --version-max 3), which still serve the rest.
#   gguf: with the GGUF engine on a random-weight model (superfluid model make, llama.cpp's
#         SentencePiece vocabulary, whose tokenizer adds a BOS): a completions prompt gets the
#         BOS; logit_bias +100 forces a token and -100 bans one (never drawn, never listed in
#         top_logprobs); presence, frequency and repetition penalties change the greedy
#         stream; ignore_eos and min_tokens keep EOS from being drawn. Needs
#         scripts/llama-ref-fetch's vocabulary files: exit 77 (skipped) without
#         them, unless CI=true.
# Usage: sampling.sh sim|gguf NODED HEADD SIM_EXPECT CLI REPO_ROOT   (KEEP=DIR keeps the work)
set -uo pipefail
mode=$1 noded=$2 headd=$3 expect=$4 cli=$5 root=$6
. "$(dirname "$0")/lib.sh"
unset SUPERFLUID_HEAD SUPERFLUID_API_KEY

# err FIELD CODE: the error's param and code are these.
err_is() { [ "$(j "$work/out" 'd["error"]["param"], d["error"]["code"]')" = "('$1', '$2')" ]; }
text() { j "$work/out" 'd["choices"][0]["text"]'; }

if [ "$mode" = sim ]; then
	start_node n4 && p4=$port
	start_head head "127.0.0.1:$p4"
	base="http://127.0.0.1:$hport"
	wait_health

	printf 'Once upon a time' | want --temperature 0 --max-tokens 24 --top-k 40 --min-p 0.05 \
		--presence-penalty 0.5 --frequency-penalty 0.5 --repetition-penalty 1.2 \
		--repeat-last-n 16 --logit-bias 65:-100 --logit-bias 66:2
	req POST /v1/completions '{"model":"sim-1","prompt":"Once upon a time","max_tokens":24,"temperature":0,"top_k":40,"min_p":0.05,"presence_penalty":0.5,"frequency_penalty":0.5,"repetition_penalty":1.2,"repeat_last_n":16,"logit_bias":{"65":-100,"66":2}}'
	r=0; [ "$status" = 200 ] && [ "$(text)" = "$(cat "$work/want")" ] &&
		[ "$(j "$work/out" 'd["usage"]["prompt_tokens"]')" = 16 ] || r=1
	check "every sampling field is taken, the simulated engine samples with them all (the one sampler), and its tokenizer adds no BOS" $r

	req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"user","content":"hi"}],"logit_bias":{"264":5}}'
	r=0; [ "$status" = 400 ] && err_is logit_bias invalid_value &&
		grep -q 'logit_bias names token 264, past the vocabulary of sim-1 (264 tokens)' "$work/out" || r=1
	check "a logit_bias token past the model's vocabulary: 400 naming it" $r
	big=$(python3 -c 'import json; print(json.dumps({"model": "sim-1", "prompt": "p", "logit_bias": {str(i): -1 for i in range(301)}}))')
	req POST /v1/completions "$big"
	r=0; [ "$status" = 400 ] && err_is logit_bias invalid_value && grep -q 'at most 300 tokens (got 301)' "$work/out" || r=1
	check "logit_bias of 301 tokens: 400" $r
	req POST /v1/completions '{"model":"sim-1","prompt":"p","logit_bias":{"a":1}}'
	r=0; [ "$status" = 400 ] && err_is logit_bias.a invalid_value || r=1
	check "a logit_bias key that is not a token id: 400 naming it" $r
	for bad in '"presence_penalty":3' '"frequency_penalty":"x"' '"repetition_penalty":0' '"min_p":2' '"top_k":1.5' '"repeat_last_n":-5'; do
		req POST /v1/completions "{\"model\":\"sim-1\",\"prompt\":\"p\",$bad}"
		field=${bad%%\":*}; field=${field#\"}
		r=0; [ "$status" = 400 ] && [ "$(j "$work/out" 'd["error"]["param"]')" = "$field" ] || r=1
		check "$bad: 400 naming $field" $r
	done

	# A fleet of version 3 nodes: the head refuses what they cannot take, by name.
	start_node n3 --version-max 3 && p3=$port
	start_head old "127.0.0.1:$p3"
	base="http://127.0.0.1:$hport"
	wait_health
	for _ in $(seq 100); do req GET /v1/models; grep -q sim-1 "$work/out" && break; sleep 0.05; done
	req POST /v1/completions '{"model":"sim-1","prompt":"Once upon a time","max_tokens":24,"temperature":0,"logit_bias":{"65":-100}}'
	r=0; [ "$status" = 400 ] && err_is logit_bias unsupported_on_fleet &&
		grep -q 'node n3 runs an older superfluid (protocol 3) that cannot take this session' "$work/out" || r=1
	check "logit_bias on a fleet of version 3 nodes: 400 unsupported_on_fleet naming the node" $r
	req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"user","content":"hi"}],"repeat_penalty":1.3}'
	r=0; [ "$status" = 400 ] && err_is repetition_penalty unsupported_on_fleet || r=1
	check "repeat_penalty there: 400 naming repetition_penalty" $r
	printf 'Once upon a time' | want --temperature 0 --max-tokens 24 --top-k 40
	req POST /v1/completions '{"model":"sim-1","prompt":"Once upon a time","max_tokens":24,"temperature":0,"top_k":40,"repetition_penalty":1,"presence_penalty":0}'
	r=0; [ "$status" = 200 ] && [ "$(text)" = "$(cat "$work/want")" ] || r=1
	check "neutral values and top_k still go to a version 3 node" $r

	# A pipeline's last stage draws with the request's sampling (protocol 5 stages): the
	# unsplit engine's stream, seeded and with every field. Stages of protocol 4 draw greedily
	# only: other sampling is refused by name, greedy requests still served.
	start_node st1 && pst=$port
	start_node st2 && pst2=$port
	start_head pipe "127.0.0.1:$p4" --pipeline "127.0.0.1:$pst,127.0.0.1:$pst2"
	base="http://127.0.0.1:$hport"
	for _ in $(seq 100); do req GET /v1/models; grep -q sim-1-pipeline "$work/out" && break; sleep 0.05; done
	printf 'Once upon a time' | want --temperature 0.8 --top-p 0.9 --seed 7 --max-tokens 40 --top-k 40 \
		--min-p 0.05 --presence-penalty 0.5 --frequency-penalty 0.5 --repetition-penalty 1.2 \
		--repeat-last-n 16 --logit-bias 65:-100 --logit-bias 66:2
	req POST /v1/completions '{"model":"sim-1-pipeline","prompt":"Once upon a time","max_tokens":40,"temperature":0.8,"top_p":0.9,"seed":7,"top_k":40,"min_p":0.05,"presence_penalty":0.5,"frequency_penalty":0.5,"repetition_penalty":1.2,"repeat_last_n":16,"logit_bias":{"65":-100,"66":2}}'
	r=0; [ "$status" = 200 ] && [ "$(text)" = "$(cat "$work/want")" ] || r=1
	check "a pipeline model samples with every field: the unsplit engine's seeded stream" $r
	start_node st3 --version-max 4 && pst3=$port
	start_head pipe4 "127.0.0.1:$p4" --pipeline "127.0.0.1:$pst3,127.0.0.1:$pst2"
	base="http://127.0.0.1:$hport"
	for _ in $(seq 100); do req GET /v1/models; grep -q sim-1-pipeline "$work/out" && break; sleep 0.05; done
	req POST /v1/completions '{"model":"sim-1-pipeline","prompt":"Once upon a time","max_tokens":8,"presence_penalty":1}'
	r=0; [ "$status" = 400 ] && err_is temperature unsupported_on_fleet &&
		grep -q 'stage 1 (st3) runs an older superfluid (protocol 4) that draws greedily only' "$work/out" || r=1
	check "a pipeline with a protocol 4 stage refuses other sampling than greedy, naming the stage" $r
	printf 'Once upon a time' | want --temperature 0 --max-tokens 8
	req POST /v1/completions '{"model":"sim-1-pipeline","prompt":"Once upon a time","max_tokens":8,"temperature":0,"top_k":5}'
	r=0; [ "$status" = 200 ] && [ "$(text)" = "$(cat "$work/want")" ] || r=1
	check "... and serves greedy requests (top_k changes nothing there)" $r
	echo "$passes passed, $fails failed"
	[ "$fails" = 0 ]
	exit
fi

# ---- gguf ----
if ! vars=$("$root/scripts/llama-ref-fetch" 2>"$work/fetch.err"); then
	why=$(tail -1 "$work/fetch.err")
	if [ "${CI:-}" = true ]; then
		echo "FAIL $why"
		exit 1
	fi
	echo "SKIP $why (under CI=true this fails)"
	exit 77
fi
eval "$vars"
model=random-test-llama-f32
if ! "$cli" model make --shape test-llama --type f32 --layers 2 \
	--vocab "$LLAMA_SRC/models/ggml-vocab-llama-spm.gguf" -o "$work/m.gguf" >"$work/make.out" 2>&1; then
	cat "$work/make.out"; echo "FAIL superfluid model make"; exit 1
fi
start_node g1 --model "$work/m.gguf" --threads 1 --ctx-len 512 && pg=$port
start_head head "127.0.0.1:$pg"
base="http://127.0.0.1:$hport"
wait_health
for _ in $(seq 200); do req GET /v1/models; grep -q "$model" "$work/out" && break; sleep 0.05; done
# complete BODY-FIELDS: a greedy completion of 24 tokens after "Once upon a time".
complete() { req POST /v1/completions "{\"model\":\"$model\",\"prompt\":\"Once upon a time\",\"max_tokens\":24,\"temperature\":0${1:+,$1}}"; }
tokenize() { req POST /v1/tokenize "{\"model\":\"$model\",\"text\":\"$1\"}"; }

tokenize 'Once upon a time'
n_prompt=$(j "$work/out" 'd["count"]')
complete '"logprobs":2'
cp "$work/out" "$work/plain.json"
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["usage"]["prompt_tokens"]')" = $((n_prompt + 1)) ] || r=1
check "a completions prompt gets the model's BOS first ($n_prompt tokens + 1)" $r

# +100 forces a token, greedy or sampled.
tokenize 'hello world'
hello=$(j "$work/out" 'd["tokens"][0]') world=$(j "$work/out" 'd["tokens"][1]')
complete "\"logit_bias\":{\"$hello\":100}"
r=0; [ "$status" = 200 ] && [ "$(text)" = "$(python3 -c 'print(" hello" * 24)')" ] || r=1
check "logit_bias +100 forces the token: 24 times ' hello'" $r
complete "\"logit_bias\":{\"$hello\":100},\"temperature\":1,\"seed\":3"
r=0; [ "$status" = 200 ] && [ "$(text)" = "$(python3 -c 'print(" hello" * 24)')" ] || r=1
check "... also when sampling at temperature 1" $r
complete "\"logit_bias\":{\"$hello\":100,\"$world\":50},\"logprobs\":2"
r=0; [ "$(j "$work/out" 'all(sorted(t) == [" hello", " world"] for t in d["choices"][0]["logprobs"]["top_logprobs"])')" = True ] || r=1
check "+50 puts ' world' second everywhere (top_logprobs)" $r
complete "\"logit_bias\":{\"$hello\":100,\"$world\":-100},\"logprobs\":2"
r=0; [ "$(j "$work/out" 'any(" world" in t for t in d["choices"][0]["logprobs"]["top_logprobs"])')" = False ] || r=1
check "-100 bans ' world': never among the alternatives" $r

# -100 bans a token the greedy stream draws: one that tokenizes back to itself.
ban= banned=
j "$work/plain.json" '"\n".join(json.dumps(t) for t in d["choices"][0]["logprobs"]["tokens"])' >"$work/pieces"
while IFS= read -r piece; do
	t=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]))' "$piece")
	case "$t" in " "*) ;; *) continue ;; esac
	tokenize "${t# }"
	if [ "$(j "$work/out" 'd["count"]')" = 1 ] && [ "$(j "$work/out" 'd["pieces"][0]')" = "$t" ]; then
		ban=$(j "$work/out" 'd["tokens"][0]') banned=$t
		break
	fi
done <"$work/pieces"
r=0; [ -n "$ban" ] || r=1
check "the greedy stream holds a token that tokenizes back to itself ('${banned:-}', $ban)" $r
complete "\"logit_bias\":{\"$ban\":-100},\"logprobs\":2"
r=0; [ "$status" = 200 ] && python3 - "$work/out" "$banned" <<'EOF' || r=1
import json, sys
d = json.load(open(sys.argv[1]))
lp = d["choices"][0]["logprobs"]
banned = sys.argv[2]
assert banned not in lp["tokens"], lp["tokens"]
assert not any(banned in t for t in lp["top_logprobs"])
EOF
check "logit_bias -100 bans '$banned': the stream never draws it, the alternatives never list it" $r

# The penalties change the greedy stream (test_gguf_sampling checks each token).
plain=$(j "$work/plain.json" 'd["choices"][0]["text"]')
r=0; [ "$(j "$work/plain.json" 'len(d["choices"][0]["logprobs"]["tokens"]) - len(set(d["choices"][0]["logprobs"]["tokens"]))')" -gt 0 ] || r=1
check "the plain greedy stream repeats tokens" $r
for p in '"presence_penalty":2' '"frequency_penalty":2' '"repetition_penalty":1.5' '"repeat_penalty":1.5,"repeat_last_n":-1'; do
	complete "$p"
	r=0; [ "$status" = 200 ] && [ "$(text)" != "$plain" ] || r=1
	check "$p changes the greedy stream" $r
done
complete '"presence_penalty":0,"frequency_penalty":0,"repetition_penalty":1,"min_p":0,"top_k":0'
r=0; [ "$(text)" = "$plain" ] || r=1
check "neutral values give the plain stream" $r
complete '"top_k":1,"temperature":1,"seed":9'
r=0; [ "$(text)" = "$plain" ] || r=1
check "top_k 1 at temperature 1 is greedy" $r

# ignore_eos and min_tokens (protocol 6) ban the end-of-generation tokens: EOS forced by +100
# (the SentencePiece vocabulary's </s>, 2) ends at once, but not under ignore_eos (the ban
# wins over the bias), and only after min_tokens tokens under min_tokens.
complete '"logit_bias":{"2":100}'
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["usage"]["completion_tokens"]')" = 0 ] &&
	[ "$(j "$work/out" 'd["choices"][0]["finish_reason"]')" = stop ] || r=1
check "EOS at +100: the generation ends at once" $r
complete '"logit_bias":{"2":100},"ignore_eos":true'
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["usage"]["completion_tokens"]')" = 24 ] &&
	[ "$(j "$work/out" 'd["choices"][0]["finish_reason"]')" = length ] || r=1
check "... with ignore_eos: never drawn, 24 tokens" $r
complete '"logit_bias":{"2":100},"min_tokens":5'
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["usage"]["completion_tokens"]')" = 5 ] &&
	[ "$(j "$work/out" 'd["choices"][0]["finish_reason"]')" = stop ] || r=1
check "... with min_tokens 5: drawn at the sixth draw, after 5 tokens" $r
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
