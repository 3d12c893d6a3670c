#!/usr/bin/env bash
# api.gguf_structured: structured outputs on the GGUF engine. A random-weight qwen2 (llama.cpp's
# 151k-token vocabulary) behind a head: chat with response_format json_schema, 200 seeded
# samples (25 requests of n = 8) all parse and validate against the schema (objects, required,
# additionalProperties false, enums, const, integer and number bounds, bounded strings and
# arrays, a pattern, formats, anyOf, $ref), checked by the validator here (structured_check.py,
# independent of the head's compiler); json_object, the Responses API's text.format,
# completions with llama.cpp's json_schema and grammar fields and vLLM's structured_outputs
# (choice, regex); a streamed sample equals the whole one; a named session, and a Responses
# conversation continued from its latest, keep their first turn's schema (another one is a
# 400), a fork from an earlier response takes its own; tool_choice required and a named
# function (with parallel_tool_calls false) give only valid calls in the model's own format
# (Qwen2.5's, Phi-4-mini's functools[...], and Mistral's three forms on a copy of the file
# whose vocabulary has [TOOL_CALLS], [ARGS] and [CALL_ID] as control tokens); a schema keyword
# that cannot be enforced, and a grammar that does not compile, are 400s naming the field; a
# fleet of protocol 5 nodes refuses a schema with 400 unsupported_on_fleet naming
# response_format, one of protocol 6 Mistral's forced call naming tool_choice.
# Usage: gguf_structured.sh NODED HEADD CLI SOURCE_DIR   (exit 77: no llama.cpp vocabulary)
set -uo pipefail
noded=$1 headd=$2 cli=$3 src=$4
. "$(dirname "$0")/lib.sh"
unset SUPERFLUID_HEAD SUPERFLUID_API_KEY
gguf_vocab "$src"
here=$(cd "$(dirname "$0")" && pwd)

M=$work/qwen2.gguf
gguf_make "$M" qwen2 test-qwen2 q8_0
model=random-test-qwen2-q8_0
# Mistral's markers as control tokens, as in its own vocabularies: the same file with
# <|im_start|> (a control token) renamed [TOOL_CALLS], two unused tokens made the control
# tokens [ARGS] and [CALL_ID], under another name.
MM=$work/mistral.gguf
python3 "$here/gguf_edit.py" "$M" "$work/e1.gguf" --token 151644 '[TOOL_CALLS]' &&
	python3 "$here/gguf_edit.py" "$work/e1.gguf" "$work/e2.gguf" --token 151646 '[ARGS]' &&
	python3 "$here/gguf_edit.py" "$work/e2.gguf" "$work/e1.gguf" --token-type 151646 3 &&
	python3 "$here/gguf_edit.py" "$work/e1.gguf" "$work/e2.gguf" --token 151647 '[CALL_ID]' &&
	python3 "$here/gguf_edit.py" "$work/e2.gguf" "$work/e1.gguf" --token-type 151647 3 &&
	python3 "$here/gguf_edit.py" "$work/e1.gguf" "$MM" --set-str general.name random-mistral-q8_0 ||
	{ fail "gguf_edit.py: the Mistral-marked copy"; exit 1; }
rm -f "$work/e1.gguf" "$work/e2.gguf"
mmodel=random-mistral-q8_0
start_gguf_node n1 "$M" --threads 1 && p1=$port
start_gguf_node nm "$MM" --threads 1 && pm=$port
start_head head "127.0.0.1:$p1,127.0.0.1:$pm"
base="http://127.0.0.1:$hport"
nodes_up 2
r=$?
head_encodes || r=1
check "a node on a GGUF model is up at the head, its tokenizer there" $r

err_is() { [ "$(j "$work/out" 'd["error"]["param"], d["error"]["code"]')" = "('$1', '$2')" ]; }

cat >"$work/schema.json" <<'EOF'
{"type": "object",
 "properties": {
  "name": {"type": "string", "minLength": 1, "maxLength": 10},
  "age": {"type": "integer", "minimum": 18, "maximum": 99},
  "role": {"enum": ["admin", "user", "guest"]},
  "score": {"type": "number", "minimum": -1, "maximum": 1},
  "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "minItems": 1, "maxItems": 3},
  "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{2}$"},
  "id": {"type": "string", "format": "uuid"},
  "when": {"type": "string", "format": "date"},
  "kind": {"const": "person"},
  "pet": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/pet"}]},
  "note": {"type": "string", "maxLength": 3},
  "ok": {"type": "boolean"}
 },
 "required": ["name", "age", "role", "score", "tags", "code", "id", "when", "kind", "pet"],
 "additionalProperties": false,
 "$defs": {"pet": {"type": "object", "properties": {"legs": {"type": "integer", "minimum": 0,
   "maximum": 8}, "sound": {"enum": ["woof", "meow"]}}, "required": ["legs", "sound"],
   "additionalProperties": false}}}
EOF
schema=$(python3 -S -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$work/schema.json")
rf="{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"person\",\"strict\":true,\"schema\":$schema}}"
msgs='[{"role":"user","content":"Describe a person as JSON."}]'

# 200 seeded samples: 25 requests of n = 8 at seeds 1, 9, 17, ... (choice i at seed + i);
# SF_STRUCTURED_REQUESTS fewer under the sanitizers (tests/CMakeLists.txt: what they check is
# the memory of the path, which 5 requests take as 25 do, at several minutes less).
nreq=${SF_STRUCTURED_REQUESTS:-25}
: >"$work/samples"
bad=0
for k in $(seq 0 $((nreq - 1))); do
	req POST /v1/chat/completions "{\"model\":\"$model\",\"messages\":$msgs,\"n\":8,\"seed\":$((1 + 8 * k)),\"temperature\":1,\"max_tokens\":400,\"response_format\":$rf}"
	if [ "$status" != 200 ]; then bad=1; cp "$work/out" "$work/bad.json"; break; fi
	python3 -S -c 'import json,sys
d = json.load(open(sys.argv[1]))
for c in d["choices"]:
    print(json.dumps({"text": c["message"]["content"], "finish": c["finish_reason"]}))' "$work/out" >>"$work/samples"
done
r=0; [ "$bad" = 0 ] || { r=1; cat "$work/bad.json"; }
check "$nreq chat requests of n = 8 with a json_schema response_format: 200 each" $r
python3 "$here/structured_check.py" "$work/schema.json" "$work/samples" >"$work/check.out" 2>&1
r=$?
sed 's/^/     | /' "$work/check.out" | tail -4
check "$((nreq * 8)) seeded samples all parse and validate against the schema (finish stop)" $r
first=$(head -1 "$work/samples" | python3 -S -c 'import json,sys; print(json.load(sys.stdin)["text"])')

# A streamed sample is the whole one (seed 1, choice 0).
curl -sSN -H 'Content-Type: application/json' --data-binary \
	"{\"model\":\"$model\",\"messages\":$msgs,\"seed\":1,\"temperature\":1,\"max_tokens\":400,\"stream\":true,\"response_format\":$rf}" \
	"$base/v1/chat/completions" >"$work/sse"
got=$(python3 -S -c 'import json,sys
t = ""
for line in open(sys.argv[1], encoding="utf-8"):
    if line.startswith("data: {"):
        for c in json.loads(line[6:])["choices"]:
            t += c["delta"].get("content") or ""
print(t)' "$work/sse")
r=0; [ -n "$first" ] && [ "$got" = "$first" ] || r=1
check "streamed, the seed's sample is the whole one" $r

# json_object: any JSON object. A random model's strings rarely end, so its quote and closing
# brace are favoured (logit_bias; their ids from POST /v1/tokenize).
tok() { req POST /v1/tokenize "{\"model\":\"$model\",\"text\":\"$1\"}"; j "$work/out" 'd["tokens"][0]'; }
q=$(tok '\"') cb=$(tok '}')
req POST /v1/chat/completions "{\"model\":\"$model\",\"messages\":$msgs,\"seed\":3,\"max_tokens\":300,\"logit_bias\":{\"$q\":30,\"$cb\":30},\"response_format\":{\"type\":\"json_object\"}}"
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["choices"][0]["finish_reason"]')" = stop ] &&
	j "$work/out" 'd["choices"][0]["message"]["content"]' >"$work/obj" &&
	python3 -S -c 'import json,sys; d = json.load(open(sys.argv[1])); assert isinstance(d, dict)' "$work/obj" || r=1
check "response_format json_object: a JSON object ($(head -c 60 "$work/obj"))" $r

# Responses: text.format json_schema.
small='{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":5},"w":{"enum":["x","y"]}},"required":["n","w"],"additionalProperties":false}'
req POST /v1/responses "{\"model\":\"$model\",\"input\":\"hi\",\"seed\":4,\"max_output_tokens\":100,\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"s\",\"schema\":$small}}}"
r=0; [ "$status" = 200 ] && python3 -S -c 'import json,sys
d = json.load(open(sys.argv[1]))
t = json.loads(d["output"][-1]["content"][0]["text"])
assert set(t) == {"n", "w"} and 1 <= t["n"] <= 5 and type(t["n"]) is int and t["w"] in ("x", "y")' "$work/out" || r=1
check "POST /v1/responses with text.format json_schema: the output validates" $r
rid=$(j "$work/out" 'd["id"]')
fmt="{\"format\":{\"type\":\"json_schema\",\"name\":\"s\",\"schema\":$small}}"
req POST /v1/responses "{\"model\":\"$model\",\"input\":\"more\",\"previous_response_id\":\"$rid\",\"max_output_tokens\":100,\"text\":$fmt}"
r=0; [ "$status" = 200 ] || r=1
rid2=$(j "$work/out" 'd["id"]')
req POST /v1/responses "{\"model\":\"$model\",\"input\":\"more\",\"previous_response_id\":\"$rid2\",\"max_output_tokens\":100}"
[ "$status" = 400 ] && err_is previous_response_id invalid_value || r=1
check "  ... a follow-up keeps its text.format (the same one served, none a 400)" $r
req POST /v1/responses "{\"model\":\"$model\",\"input\":\"more\",\"previous_response_id\":\"$rid\",\"max_output_tokens\":20,\"text\":{\"format\":{\"type\":\"text\"}}}"
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["previous_response_id"]')" = "$rid" ] || r=1
check "  ... a fork from its first response is a new conversation: its own text.format (text)" $r

# Completions: llama.cpp's json_schema and grammar, vLLM's structured_outputs.
req POST /v1/completions "{\"model\":\"$model\",\"prompt\":\"x\",\"seed\":5,\"max_tokens\":100,\"json_schema\":$small}"
r=0; [ "$status" = 200 ] && python3 -S -c 'import json,sys
t = json.loads(json.load(open(sys.argv[1]))["choices"][0]["text"])
assert set(t) == {"n", "w"}' "$work/out" || r=1
check "completions with llama.cpp's json_schema: the text validates" $r
req POST /v1/completions "{\"model\":\"$model\",\"prompt\":\"x\",\"seed\":6,\"max_tokens\":60,\"grammar\":\"root ::= [a-c]{2,5} \\\"!\\\"\"}"
r=0; [ "$status" = 200 ] && j "$work/out" 'd["choices"][0]["text"]' | grep -qxE '[a-c]{2,5}!' || r=1
check "completions with a GBNF grammar: $(j "$work/out" 'd["choices"][0]["text"]')" $r
req POST /v1/completions "{\"model\":\"$model\",\"prompt\":\"x\",\"seed\":7,\"max_tokens\":20,\"n\":4,\"structured_outputs\":{\"choice\":[\"red\",\"green\",\"blue\"]}}"
r=0; [ "$status" = 200 ] && python3 -S -c 'import json,sys
d = json.load(open(sys.argv[1]))
assert len(d["choices"]) == 4 and all(c["text"] in ("red", "green", "blue") and c["finish_reason"] == "stop" for c in d["choices"])' "$work/out" || r=1
check "structured_outputs.choice, n = 4: each one of the choices" $r
req POST /v1/completions "{\"model\":\"$model\",\"prompt\":\"x\",\"seed\":8,\"max_tokens\":40,\"structured_outputs\":{\"regex\":\"[0-9]{3}-(ab|cd)\"}}"
r=0; [ "$status" = 200 ] && j "$work/out" 'd["choices"][0]["text"]' | grep -qxE '[0-9]{3}-(ab|cd)' || r=1
check "structured_outputs.regex: $(j "$work/out" 'd["choices"][0]["text"]')" $r

# A named session keeps its first turn's structured output, as it keeps its sampling.
turn() { req POST /v1/chat/completions "{\"model\":\"$model\",\"session\":\"s1\",\"messages\":[{\"role\":\"user\",\"content\":\"$1\"}],\"seed\":9,\"max_tokens\":60$2}"; }
turn one ",\"json_schema\":$small"
r=0; [ "$status" = 200 ] && j "$work/out" 'd["choices"][0]["message"]["content"]' | python3 -S -c 'import json,sys; assert set(json.load(sys.stdin)) == {"n", "w"}' || r=1
turn two ",\"json_schema\":$small"
[ "$status" = 200 ] && j "$work/out" 'd["choices"][0]["message"]["content"]' | python3 -S -c 'import json,sys; assert set(json.load(sys.stdin)) == {"n", "w"}' || r=1
turn three ",\"grammar\":\"root ::= [a-z]+\""
[ "$status" = 400 ] && err_is grammar invalid_value || r=1
turn four ""
[ "$status" = 400 ] && err_is session invalid_value || r=1
check "a named session: its first turn's schema again served, another grammar or none a 400" $r

# Forced tool calls in the model's format (Qwen2.5's template: hermes <tool_call> blocks;
# Phi-4-mini's, tests/chat/templates: one functools[...] array): tool_choice "required" gives
# tool calls only, each to a tool with valid arguments; a named function with
# parallel_tool_calls false gives exactly one call to it.
tools='[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"enum":["Oslo","Rome"]},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}}},{"type":"function","function":{"name":"noop","parameters":{"type":"object","properties":{},"additionalProperties":false}}}]'
calls_ok() { # WANT_NAME WANT_COUNT (0: any count of one or more)
	python3 -S -c 'import json,sys
d = json.load(open(sys.argv[1]))
for c in d["choices"]:
    m = c["message"]
    assert c["finish_reason"] == "tool_calls", c["finish_reason"]
    assert not (m.get("content") or "").strip(), m.get("content")
    calls = m["tool_calls"]
    assert len(calls) >= 1 and (sys.argv[3] == "0" or len(calls) == int(sys.argv[3])), len(calls)
    for t in calls:
        f = t["function"]
        a = json.loads(f["arguments"])
        assert sys.argv[2] in ("", f["name"]), f["name"]
        if f["name"] == "get_weather":
            assert set(a) == {"city", "days"} and a["city"] in ("Oslo", "Rome") and 1 <= a["days"] <= 7, a
        else:
            assert f["name"] == "noop" and a == {}, (f["name"], a)' "$work/out" "$1" "$2"
}
seed=11
for t in "Qwen2.5 $LLAMA_SRC/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja" \
	"Phi-4-mini $src/tests/chat/templates/microsoft-Phi-4-mini-instruct.jinja"; do
	read -r fam file <<<"$t"
	tmpl=$(python3 -S -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read()))' "$file")
	req POST /v1/chat/completions "{\"model\":\"$model\",\"chat_template\":$tmpl,\"messages\":$msgs,\"tools\":$tools,\"tool_choice\":\"required\",\"n\":4,\"seed\":$seed,\"max_tokens\":800}"
	r=0; [ "$status" = 200 ] && calls_ok "" 0 || r=1
	check "$fam: tool_choice required (n = 4): tool calls only, each valid, finish_reason tool_calls" $r
	req POST /v1/chat/completions "{\"model\":\"$model\",\"chat_template\":$tmpl,\"messages\":$msgs,\"tools\":$tools,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},\"parallel_tool_calls\":false,\"n\":4,\"seed\":$((seed + 1)),\"max_tokens\":200}"
	r=0; [ "$status" = 200 ] && calls_ok get_weather 1 || r=1
	check "$fam: a named function with parallel_tool_calls false: one call to it, valid arguments" $r
	seed=$((seed + 2))
done

# Mistral's formats, their markers control tokens that no text writes (the grammar names
# them by id, <[id]>: a node of protocol 7): Devstral's [TOOL_CALLS]name[ARGS]{...}, Small
# 3.2's [TOOL_CALLS]name[CALL_ID]id[ARGS]{...}, Nemo's [TOOL_CALLS][{...}]; the calls parsed
# into tool_calls, each valid.
for t in "Devstral unsloth-mistral-Devstral-Small-2507 required" \
	"Small-3.2 Mistral-Small-3.2-24B-Instruct-2506 named" \
	"Nemo mistralai-Mistral-Nemo-Instruct-2407 required"; do
	read -r fam file how <<<"$t"
	tmpl=$(python3 -S -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read()))' \
		"$LLAMA_SRC/models/templates/$file.jinja")
	if [ "$how" = required ]; then
		req POST /v1/chat/completions "{\"model\":\"$mmodel\",\"chat_template\":$tmpl,\"messages\":$msgs,\"tools\":$tools,\"tool_choice\":\"required\",\"n\":2,\"seed\":$seed,\"max_tokens\":400,\"logprobs\":true}"
		r=0; [ "$status" = 200 ] && calls_ok "" 0 || r=1
		# The markers were drawn as the control tokens themselves (one token each), not
		# spelled out in text tokens.
		python3 -S -c 'import json,sys
d = json.load(open(sys.argv[1]))
for c in d["choices"]:
    toks = [t["token"] for t in c["logprobs"]["content"]]
    assert toks[0] == "[TOOL_CALLS]", toks[:3]
    assert sys.argv[2] != "Devstral" or "[ARGS]" in toks, toks' "$work/out" "$fam" || r=1
	else
		req POST /v1/chat/completions "{\"model\":\"$mmodel\",\"chat_template\":$tmpl,\"messages\":$msgs,\"tools\":$tools,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},\"parallel_tool_calls\":false,\"n\":2,\"seed\":$seed,\"max_tokens\":200}"
		r=0; [ "$status" = 200 ] && calls_ok get_weather 1 || r=1
	fi
	check "$fam (Mistral, [TOOL_CALLS] a control token): tool_choice $how (n = 2): only valid calls, parsed" $r
	[ "$r" = 0 ] || sed 's/^/     | /' "$work/out" | head -5
	seed=$((seed + 1))
done

# Refusals by name.
req POST /v1/chat/completions "{\"model\":\"$model\",\"messages\":$msgs,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"uniqueItems\":true}}}}}}"
r=0; [ "$status" = 400 ] && err_is response_format.json_schema.schema.properties.a.uniqueItems unsupported_schema || r=1
check "a keyword that cannot be enforced: 400 naming it" $r
req POST /v1/completions "{\"model\":\"$model\",\"prompt\":\"x\",\"grammar\":\"root ::= undefined\"}"
r=0; [ "$status" = 400 ] && err_is grammar invalid_grammar && grep -q undefined "$work/out" || r=1
check "a grammar that does not compile: 400 naming grammar" $r
req POST /v1/chat/completions "{\"model\":\"$model\",\"messages\":$msgs,\"structured_outputs\":{\"grammar\":\"root ::= a\\na ::= a \\\"x\\\"\"}}"
r=0; [ "$status" = 400 ] && err_is structured_outputs invalid_grammar && grep -q left-recursive "$work/out" || r=1
check "  ... in chat (checked off the loop, with the template's rendering): 400 naming it" $r
# A completion's grammar past 16 KiB (a long comment first) is compiled off the loop, on the
# render thread, as a chat's: refused with a 400 naming it, or served.
pad=$(head -c 17000 /dev/zero | tr '\0' x)
req POST /v1/completions "{\"model\":\"$model\",\"prompt\":\"x\",\"grammar\":\"# $pad\\nroot ::= undefined\"}"
r=0; [ "$status" = 400 ] && err_is grammar invalid_grammar && grep -q undefined "$work/out" || r=1
check "  ... a completion's past 16 KiB too (checked off the loop): 400 naming grammar" $r
req POST /v1/completions "{\"model\":\"$model\",\"prompt\":\"x\",\"seed\":6,\"max_tokens\":60,\"grammar\":\"# $pad\\nroot ::= [a-c]{2,5} \\\"!\\\"\"}"
r=0; [ "$status" = 200 ] && j "$work/out" 'd["choices"][0]["text"]' | grep -qxE '[a-c]{2,5}!' || r=1
check "  ... and one past 16 KiB that compiles is served: $(j "$work/out" 'd["choices"][0]["text"]')" $r

# A fleet of protocol 5 nodes cannot take a grammar, nor one of protocol 6 a grammar naming
# tokens.
start_gguf_node n5 "$M" --threads 1 --version-max 5 && p5=$port
start_gguf_node n6 "$MM" --threads 1 --version-max 6 && p6=$port
start_head old "127.0.0.1:$p5,127.0.0.1:$p6"
base="http://127.0.0.1:$hport"
nodes_up 2
tmpl=$(python3 -S -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read()))' \
	"$LLAMA_SRC/models/templates/unsloth-mistral-Devstral-Small-2507.jinja")
req POST /v1/chat/completions "{\"model\":\"$mmodel\",\"chat_template\":$tmpl,\"messages\":$msgs,\"tools\":$tools,\"tool_choice\":\"required\",\"max_tokens\":5}"
r=0; [ "$status" = 400 ] && err_is tool_choice unsupported_on_fleet &&
	grep -q 'node n6 runs an older superfluid (protocol 6)' "$work/out" || r=1
check "Mistral's forced call on protocol 6 nodes: 400 unsupported_on_fleet naming tool_choice" $r
req POST /v1/chat/completions "{\"model\":\"$model\",\"messages\":$msgs,\"max_tokens\":5,\"response_format\":$rf}"
r=0; [ "$status" = 400 ] && err_is response_format unsupported_on_fleet &&
	grep -q 'node n5 runs an older superfluid (protocol 5)' "$work/out" || r=1
check "response_format on protocol 5 nodes: 400 unsupported_on_fleet naming the node" $r
req POST /v1/chat/completions "{\"model\":\"$model\",\"messages\":$msgs,\"max_tokens\":5}"
r=0; [ "$status" = 200 ] || r=1
check "  ... plain chat still served there" $r
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
