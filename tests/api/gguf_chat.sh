#!/usr/bin/env bash
# Chat with real models' own templates: random-weight GGUF files carrying Qwen2.5's, Llama
# 3.2's, Gemma 2's, Qwen3's (on a Qwen3-MoE shape), Phi-3.5's (on a LongRoPE shape, by its
# long factors), Phi-4-mini's (tests/chat/templates, on the Phi-4 test shape with a gpt-4o
# vocabulary: the tools in its system message), Granite 3.3's (on Granite's dense and MoE
# shapes), Granite 4.0's (on Granite 4's Mamba-2 hybrid), Ministral 3's reasoning template
# (on the Ministral 3 test shape: YaRN and the attention temperature; a tekken stand-in
# vocabulary with Mistral's control tokens) and
# Qwen3.5's (on a shape with
# Gated DeltaNet layers) and gpt-oss's (on the gpt-oss test shape, a gpt-4o vocabulary with
# harmony's specials), SmolLM3's (on test-smollm3, Llama 3's vocabulary: its /think and
# /no_think), Mistral Nemo's (on test-llama with the tekken stand-in vocabulary), OLMo 2's (its
# published template, tests/chat/templates, on test-olmo2) and Mistral's v1 [INST] template
# (Mistral-7B-Instruct-v0.2's, tests/chat/templates, on the Mixtral test shape with Llama 2's
# SentencePiece vocabulary) chat templates
# (llama.cpp's models/templates, by superfluid model make --chat-template; Gemma's on a Gemma 3
# shape with a Gemma-3-like vocabulary), one node each behind a head. The extended run
# (SF_TEST_FULL=1, scripts/test --full; named in the last line otherwise) adds templates
# checked here on another shape of their family: Gemma 2's on test-gemma and test-gemma2, Qwen3's on dense
# test-qwen3 with tools, Qwen3.5's on test-qwen35moe with tools. The official openai npm
# client's chat with tools (tests/chat/conversations/tools.json; Gemma: user, model, user
# turns, its template takes no system message nor tools; Qwen3-MoE and Phi-3.5: a conversation
# without tools; OLMo 2 and Mixtral: a system message and turns, their templates take no tools)
# at temperature 0 reaches the node as exactly the
# tokens of python3-jinja2's rendering (tests/chat/hf_render.py, as apply_chat_template)
# encoded by llama.cpp (llama-ref tokenize --specials): usage.prompt_tokens is their count and
# the reply is the engine's own greedy continuation of them (superfluid model run --tokens).
# A named session's second turn appends the template's close of the reply and the new turn
# after the reply's tokens. gpt-oss: tool_choice required and named enforced on the engine.
# Qwen3.5's template opens a <think> block: its reply comes back as reasoning_content (the reply compared is reasoning_content then content,
# the engine's text without the blanks next to the think markers, as the head and llama.cpp strip them);
# its conversation sent again reuses the pages up to its first prompt's state checkpoint. SF_FAMS: some
# families only (the last check asks llama-3.2's head: it fails without that family). A template's raise_exception is a 400 with its message.
# Usage: gguf_chat.sh NODED HEADD CLI SOURCE_DIR NPM_DIR   (exit 77: no llama.cpp; KEEP=DIR)
set -uo pipefail
noded=$1 headd=$2 cli=$3 src=$4 npm_dir=$5
. "$(dirname "$0")/lib.sh"
unset SUPERFLUID_HEAD SUPERFLUID_API_KEY
gguf_vocab "$src"
python3 -c 'import jinja2' 2>/dev/null || { echo "FAIL python3-jinja2 is missing (scripts/install-deps)"; exit 1; }
if [ ! -f "$npm_dir/node_modules/openai/package.json" ]; then
	mkdir -p "$npm_dir"
	npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error "openai@^4" >"$work/npm.log" 2>&1 ||
		{ echo "FAIL npm install openai"; sed 's/^/     | /' "$work/npm.log"; exit 1; }
fi
cp "$src/tests/api/chat_client.mjs" "$npm_dir/chat_client.mjs"
tmpl_dir=$LLAMA_SRC/models/templates
conv=$src/tests/chat/conversations/tools.json
N=12

# render VOCAB_FILE TEMPLATE REQUEST OUT [sys]: python3-jinja2's rendering of REQUEST's
# conversation (the context the head makes: tools/documents None when absent, the vocabulary's
# BOS/EOS text; with "sys", Phi-4-mini's way, as docs/API.md says: the tools' function objects
# as JSON text in the first system message's "tools") in OUT.txt and llama.cpp's tokens of it
# (specials parsed, no BOS added) in OUT.ids.
render() {
	python3 - "$1" "$3" "${5:-}" >"$work/ctx.json" <<'PY' || return 1
import json, sys
req = json.load(open(sys.argv[2]))
# The vocabulary's BOS and EOS texts, read from the GGUF file's tokenizer pairs.
import struct
def gguf_tokens(path):
    d = open(path, "rb").read()
    n_t, n_kv = struct.unpack_from("<QQ", d, 8)
    p = 24
    def s():
        nonlocal p
        (n,) = struct.unpack_from("<Q", d, p); p += 8
        v = d[p:p + n].decode("utf-8", "replace"); p += n; return v
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    def val(t):
        nonlocal p
        if t == 8: return s()
        if t == 9:
            (et, n) = struct.unpack_from("<IQ", d, p); p += 12
            return [val(et) for _ in range(n)]
        fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}[t]
        (v,) = struct.unpack_from(fmt, d, p); p += sizes[t]; return v
    kv = {}
    for _ in range(n_kv):
        k = s(); (t,) = struct.unpack_from("<I", d, p); p += 4
        kv[k] = val(t)
    return kv
kv = gguf_tokens(sys.argv[1])
toks = kv["tokenizer.ggml.tokens"]
bos = toks[kv["tokenizer.ggml.bos_token_id"]] if "tokenizer.ggml.bos_token_id" in kv else ""
eos = toks[kv["tokenizer.ggml.eos_token_id"]] if "tokenizer.ggml.eos_token_id" in kv else ""
msgs = req["messages"]
if sys.argv[3] == "sys" and req.get("tools"):
    text = json.dumps([t["function"] for t in req["tools"]], ensure_ascii=False)
    first = next((m for m in msgs if m["role"] == "system"), None)
    if first is None:
        first = {"role": "system", "content": ""}
        msgs.insert(0, first)
    first.setdefault("tools", text)
ctx = dict(req.get("chat_template_kwargs", {}))
ctx.update({"messages": req["messages"], "tools": req.get("tools"), "documents": None,
            "add_generation_prompt": True, "bos_token": bos, "eos_token": eos})
print(json.dumps(ctx))
PY
	python3 "$src/tests/chat/hf_render.py" render "$2" "$work/ctx.json" >"$4.txt" 2>"$work/render.err" ||
		return 1
	"$LLAMA_REF" tokenize "$1" --specials <"$4.txt" >"$4.ids" 2>"$work/render.err"
}
# The reply a chat gave: its reasoning_content (Qwen3.5's think block), then its content.
reply='(d["choices"][0]["message"].get("reasoning_content") or "")'
reply+=' + (d["choices"][0]["message"]["content"] or "")'
# reasoned PROMPT_TXT WANT: where PROMPT_TXT's generation prompt opens a think block (ends, but
# for blanks, in <think> or [THINK]), the engine's text in WANT as the head gives it back: the
# reasoning without the blanks next to its markers (its first and last), as llama.cpp strips it,
# then the content after the close marker without the blanks that follow it.
reasoned() {
	python3 - "$1" "$2" <<'PY'
import sys
b = " \t\r\n"
p = open(sys.argv[1], encoding="utf-8", errors="replace").read().rstrip(b)
if p.endswith("<think>") or p.endswith("[THINK]"):
    close = "</think>" if p.endswith("<think>") else "[/THINK]"
    t = open(sys.argv[2], encoding="utf-8", errors="replace").read()
    r, c = (t.split(close, 1) + [None])[:2]
    t = r.strip(b) + ("" if c is None else c.lstrip(b))
    open(sys.argv[2], "w", encoding="utf-8").write(t)
PY
}
# chat REQUEST MODEL: the openai client's answer in $work/out.
chat() { node "$npm_dir/chat_client.mjs" "$base/v1" "$2" "$1" >"$work/out" 2>"$work/client.err"; }

export SF_JINJA_NOW=$(date +%s) # strftime_now: the day the head renders in too
# Gemma's vocabulary: a Gemma-3-like SentencePiece one from the bundle's Gemma 4 pieces
# (tests/engine/gemma_vocab.py: <start_of_turn> and <end_of_turn> at Gemma 3's ids).
python3 "$src/tests/engine/gemma_vocab.py" "$LLAMA_SRC/models/ggml-vocab-gemma-4.gguf" \
	"$work/ggml-vocab-gemma.gguf" || { fail "gemma_vocab.py"; exit 1; }
# Phi-4-mini's vocabulary: Llama 3's pieces with its gpt-4o pre-tokenizer and no BOS added (the
# bundle has no o200k vocabulary).
python3 "$src/tests/api/gguf_edit.py" "$LLAMA_SRC/models/ggml-vocab-llama-bpe.gguf" \
	"$work/vocab-pre.gguf" --set-str tokenizer.ggml.pre gpt-4o >/dev/null &&
	python3 "$src/tests/api/gguf_edit.py" "$work/vocab-pre.gguf" "$work/ggml-vocab-gpt-4o.gguf" \
		--set-bool tokenizer.ggml.add_bos_token 0 >/dev/null || { fail "gguf_edit.py"; exit 1; }
# gpt-oss's: that vocabulary with seven of Llama 3's reserved specials named as harmony's
# (<|channel|>, <|message|>, <|start|> and <|constrain|> rendered as text, <|end|> not an end of
# generation beside <|return|> and <|call|>, as llama.cpp takes them) and <|return|> its EOS.
cp "$work/ggml-vocab-gpt-4o.gguf" "$work/vocab-h.gguf"
id=128010
for tok in '<|start|>' '<|channel|>' '<|message|>' '<|end|>' '<|return|>' '<|call|>' '<|constrain|>'; do
	python3 "$src/tests/api/gguf_edit.py" "$work/vocab-h.gguf" "$work/vocab-h2.gguf" --token "$id" "$tok" \
		>/dev/null && mv "$work/vocab-h2.gguf" "$work/vocab-h.gguf" || { fail "gguf_edit.py --token"; exit 1; }
	id=$((id + 1))
done
python3 "$src/tests/api/gguf_edit.py" "$work/vocab-h.gguf" "$work/ggml-vocab-gpt-oss.gguf" \
	--set-u32 tokenizer.ggml.eos_token_id 128014 >/dev/null || { fail "gguf_edit.py"; exit 1; }
# Ministral 3's: Llama 3's pieces with the tekken pre-tokenizer (the bundle has no tekken
# vocabulary) and twelve of its reserved specials named as Mistral's control tokens.
cp "$LLAMA_SRC/models/ggml-vocab-llama-bpe.gguf" "$work/vocab-m.gguf"
python3 "$src/tests/api/gguf_edit.py" "$work/vocab-m.gguf" "$work/vocab-m2.gguf" \
	--set-str tokenizer.ggml.pre tekken >/dev/null && mv "$work/vocab-m2.gguf" "$work/vocab-m.gguf" ||
	{ fail "gguf_edit.py --set-str"; exit 1; }
id=128010
for tok in '[INST]' '[/INST]' '[SYSTEM_PROMPT]' '[/SYSTEM_PROMPT]' '[AVAILABLE_TOOLS]' \
	'[/AVAILABLE_TOOLS]' '[TOOL_RESULTS]' '[/TOOL_RESULTS]' '[TOOL_CALLS]' '[ARGS]' '[THINK]' '[/THINK]'; do
	python3 "$src/tests/api/gguf_edit.py" "$work/vocab-m.gguf" "$work/vocab-m2.gguf" --token "$id" "$tok" \
		>/dev/null && mv "$work/vocab-m2.gguf" "$work/vocab-m.gguf" || { fail "gguf_edit.py --token"; exit 1; }
	id=$((id + 1))
done
mv "$work/vocab-m.gguf" "$work/ggml-vocab-tekken.gguf"
# The default run: each template on a shape of its own family. The extended run (SF_TEST_FULL=1,
# scripts/test --full) adds templates checked above on another shape of their family, each named
# in the last line otherwise.
fams="gemma-3 qwen2.5 qwen3-moe phi-3.5 phi-4-mini granite-3.3 granite-moe granite-4 ministral-3 qwen3.5 gpt-oss"
fams+=" smollm3 mistral-nemo olmo-2 mixtral"
ext_fams="gemma gemma-2 qwen3 qwen3.5-moe" left=
if [ -z "${SF_FAMS:-}" ]; then
	if [ "${SF_TEST_FULL:-}" = 1 ]; then fams+=" $ext_fams"; else left=$ext_fams; fi
fi
for fam in ${SF_FAMS:-$fams llama-3.2}; do # llama-3.2 last: its head is asked after
	conv=$src/tests/chat/conversations/tools.json tools_in=
	case $fam in
	qwen2.5) vocab=qwen2 shape=test-qwen2 tmpl=$tmpl_dir/Qwen-Qwen2.5-7B-Instruct.jinja ;;
	llama-3.2) vocab=llama-bpe shape=test-llama tmpl=$tmpl_dir/meta-llama-Llama-3.2-3B-Instruct.jinja ;;
	# Gemma 2's template (the bundle's), which takes no system message and no tools: a
	# conversation of user, model, user turns
	gemma-3) vocab=gemma shape=test-gemma3 tmpl=$tmpl_dir/google-gemma-2-2b-it.jinja
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["messages"]=d["messages"][:3]; print(json.dumps(d))' \
			"$src/tests/chat/conversations/multiturn_no_prompt.json" >"$work/gemma-conv.json"
		conv=$work/gemma-conv.json ;;
	# A mixture of experts with Qwen3's template (no tools: a plain conversation)
	qwen3-moe) vocab=qwen2 shape=test-qwen3moe tmpl=$tmpl_dir/Qwen-Qwen3-0.6B.jinja
		conv=$src/tests/chat/conversations/multiturn_no_prompt.json ;;
	# Phi-3.5 with LongRoPE (the node's context of 8192, past the original 4096: the long factors)
	phi-3.5) vocab=phi-3 shape=test-phi3-longrope tmpl=$tmpl_dir/microsoft-Phi-3.5-mini-instruct.jinja
		conv=$src/tests/chat/conversations/multiturn_no_prompt.json ;;
	# Phi-4-mini's template (tests/chat/templates), which reads the tools from the system
	# message, on the Phi-4 test shape with a gpt-4o vocabulary, with tools
	phi-4-mini) vocab=gpt-4o shape=test-phi4 tools_in=sys
		tmpl=$src/tests/chat/templates/microsoft-Phi-4-mini-instruct.jinja ;;
	granite-3.3) vocab=refact shape=test-granite tmpl=$tmpl_dir/ibm-granite-granite-3.3-2B-Instruct.jinja ;;
	# Granite MoE (experts, Granite's multipliers) with the Granite 3.x template its files carry
	granite-moe) vocab=refact shape=test-granitemoe tmpl=$tmpl_dir/ibm-granite-granite-3.3-2B-Instruct.jinja ;;
	# Granite 4's hybrid (Mamba-2 layers: a recurrent state) with Granite 4.0's template, with
	# tools
	granite-4) vocab=refact shape=test-granitehybrid tmpl=$tmpl_dir/ibm-granite-granite-4.0.jinja ;;
	# Ministral 3 (YaRN, attention temperature) with its reasoning template (its default system
	# prompt, [AVAILABLE_TOOLS], [INST]), with tools, on the tekken stand-in vocabulary
	ministral-3) vocab=tekken shape=test-mistral3 tmpl=$tmpl_dir/mistralai-Ministral-3-14B-Reasoning-2512.jinja ;;
	# Gated DeltaNet layers (a recurrent state) with Qwen3.5's template, with tools
	qwen3.5) vocab=qwen35 shape=test-qwen35 tmpl=$tmpl_dir/Qwen3.5-4B.jinja ;;
	# gpt-oss (attention sinks, MXFP4-free Q8_0 experts) with its harmony template, with tools:
	# the reply read as harmony (a random model's text is content, verbatim)
	gpt-oss) vocab=gpt-oss shape=test-gpt-oss tmpl=$tmpl_dir/openai-gpt-oss-120b.jinja ;;
	# SmolLM3 (no rope every fourth layer) with its template (its reasoning mode from the
	# system message's /think or /no_think; no tools in it), with tools
	smollm3) vocab=llama-bpe shape=test-smollm3 tmpl=$tmpl_dir/HuggingFaceTB-SmolLM3-3B.jinja ;;
	# Mistral Nemo's template ([AVAILABLE_TOOLS] before the last user turn) on a llama shape with
	# the tekken stand-in vocabulary, with tools
	mistral-nemo) vocab=tekken shape=test-llama tmpl=$tmpl_dir/mistralai-Mistral-Nemo-Instruct-2407.jinja ;;
	# OLMo 2 (post-norms, Q/K norms over all heads) with its published template
	# (tests/chat/templates: <|user|> and <|assistant|> as text), a system message and turns
	olmo-2) vocab=llama-bpe shape=test-olmo2 tmpl=$src/tests/chat/templates/allenai-OLMo-2-1124-13B-Instruct.jinja
		conv=$src/tests/chat/conversations/system_multiturn.json ;;
	# Mixtral (llama with experts) with Mistral's v1 [INST] template (tests/chat/templates: the
	# system message in the first user turn, roles alternating) on Llama 2's SentencePiece
	# vocabulary, a system message and turns
	mixtral) vocab=llama-spm shape=test-mixtral tmpl=$src/tests/chat/templates/mistralai-Mistral-7B-Instruct-v0.2.jinja
		conv=$src/tests/chat/conversations/system_multiturn.json ;;
	# The extended run: Gemma 2's template on the gemma shape (Gemma 1's format; the bundle has
	# no Gemma 1 template) and the gemma2 shape (soft-capping, a window on every other layer),
	# Qwen3's on dense Qwen3 with tools, Qwen3.5's on Qwen3.5-MoE with tools
	gemma | gemma-2) vocab=gemma shape=test-$(tr -d - <<<"$fam") tmpl=$tmpl_dir/google-gemma-2-2b-it.jinja
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["messages"]=d["messages"][:3]; print(json.dumps(d))' \
			"$src/tests/chat/conversations/multiturn_no_prompt.json" >"$work/gemma-conv.json"
		conv=$work/gemma-conv.json ;;
	qwen3) vocab=qwen2 shape=test-qwen3 tmpl=$tmpl_dir/Qwen-Qwen3-0.6B.jinja ;;
	qwen3.5-moe) vocab=qwen35 shape=test-qwen35moe tmpl=$tmpl_dir/Qwen3.5-4B.jinja ;;
	*) fail "$fam: no such family here"; continue ;;
	esac
	V=$LLAMA_SRC/models/ggml-vocab-$vocab.gguf M=$work/$fam.gguf
	[ $vocab = gemma ] || [ $vocab = gpt-4o ] || [ $vocab = gpt-oss ] || [ $vocab = tekken ] &&
		V=$work/ggml-vocab-$vocab.gguf
	"$cli" model make --shape "$shape" --type q8_0 --vocab "$V" --chat-template "$tmpl" -o "$M" \
		>"$work/make.out" 2>&1 || { fail "$fam: model make"; sed 's/^/     | /' "$work/make.out"; exit 1; }
	model=random-$shape-q8_0
	start_gguf_node "n-$fam" "$M" --threads 1 && p=$port
	start_head "head-$fam" "127.0.0.1:$p"
	base="http://127.0.0.1:$hport"
	nodes_up 1
	[ $fam != phi-3.5 ] ||
		check "$fam: the node rotates by LongRoPE's long factors (its context of 8192, past 4096)" \
			"$(grep -q "LongRoPE's long factors: the context of 8192 is past the original 4096" \
				"$work/n-$fam.err"; echo $?)"

	# Turn 1: the conversation with tools, greedy.
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("add_generation_prompt",None); d.update(temperature=0, max_tokens=int(sys.argv[2])); print(json.dumps(d))' \
		"$conv" "$N" >"$work/req1.json"
	render "$V" "$tmpl" "$work/req1.json" "$work/p1" $tools_in ||
		{ fail "$fam: python3-jinja2 or llama-ref could not render: $(tail -1 "$work/render.err")"; continue; }
	ids=$(cat "$work/p1.ids")
	engine_says "$work/want" "$M" --tokens "$ids" --n "$N"
	reasoned "$work/p1.txt" "$work/want"
	chat "$work/req1.json" "$model"
	r=0
	[ "$(j "$work/out" 'd["usage"]["prompt_tokens"]')" = "$(wc -w <"$work/p1.ids")" ] || r=1
	check "$fam: the openai client's chat$([ "$conv" = "$src/tests/chat/conversations/tools.json" ] && echo ' with tools') reaches the node as the $(wc -w <"$work/p1.ids") tokens of jinja2's rendering" $r
	jw "$work/got" "$work/out" "$reply"
	r=0; cmp -s "$work/got" "$work/want" || r=1
	check "  ... its reply is the engine's greedy continuation of those tokens" $r
	if [ $fam = qwen3.5 ] || [ $fam = qwen3.5-moe ]; then
		# The same conversation sent again (as ordinary clients do): the pages up to the
		# state checkpoint its first prompt kept at its last page end before its last token
		# are reused (a recurrent model's prefix reuse), and the reply is the same.
		n1=$(wc -w <"$work/p1.ids") c1=$(( ($(wc -w <"$work/p1.ids") - 1) / 64 * 64 ))
		chat "$work/req1.json" "$model"
		jw "$work/got" "$work/out" "$reply"
		r=0; cmp -s "$work/got" "$work/want" || r=1
		[ "$(j "$work/out" 'd["usage"]["prompt_tokens_details"]["cached_tokens"]')" = $c1 ] || r=1
		check "$fam: the conversation sent again reuses $c1 of its $n1 tokens (the pages up to the state checkpoint), the same reply" $r
	fi

	if [ $fam = smollm3 ]; then
		# /no_think in the system message: the template says so in its metadata, leaves the
		# word out of the instructions and closes an empty think block in the generation
		# prompt; the reply after it is content (no reasoning_content), the engine's own text.
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["messages"][0]["content"]+=" /no_think"; print(json.dumps(d))' \
			"$work/req1.json" >"$work/req3.json"
		render "$V" "$tmpl" "$work/req3.json" "$work/p3" ||
			{ fail "$fam: /no_think could not be rendered: $(tail -1 "$work/render.err")"; continue; }
		engine_says "$work/want3" "$M" --tokens "$(cat "$work/p3.ids")" --n "$N"
		chat "$work/req3.json" "$model"
		r=0
		grep -q "Reasoning Mode: /no_think" "$work/p3.txt" || r=1
		python3 -c 'import sys; t=open(sys.argv[1]).read(); sys.exit(not t.endswith("<|im_start|>assistant\n<think>\n\n</think>\n"))' "$work/p3.txt" || r=1
		[ "$(j "$work/out" 'd["usage"]["prompt_tokens"]')" = "$(wc -w <"$work/p3.ids")" ] || r=1
		[ "$(j "$work/out" 'd["choices"][0]["message"].get("reasoning_content") or ""')" = "" ] || r=1
		jw "$work/got" "$work/out" 'd["choices"][0]["message"]["content"] or ""'
		cmp -s "$work/got" "$work/want3" || r=1
		check "$fam: /no_think in the system message: the $(wc -w <"$work/p3.ids") tokens of jinja2's rendering (an empty think block closed), the reply content, the engine's own" $r
	fi

	# Turn 2 of a named session: the reply's tokens, then the template's close and the new turn.
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); x={"messages": d["messages"], "tools": d.get("tools"), "temperature": 0, "max_tokens": int(sys.argv[2]), "session": "s-'"$fam"'"}; print(json.dumps({k: v for k, v in x.items() if v is not None}))' \
		"$work/req1.json" "$N" >"$work/s1.json"
	chat "$work/s1.json" "$model"
	reply_ids=$(SF_MODEL_QUIET=1 "$cli" model run "$M" --threads 1 --tokens "$ids" --n "$N" --ids |
		tr -s ' \n' '\n\n' | tail -n "$N" | tr '\n' ' ') # the prompt's ids come first
	echo '{"messages": [{"role": "user", "content": "And in Rome?"}], "temperature": 0, "max_tokens": '"$N"', "session": "s-'"$fam"'"}' >"$work/s2.json"
	# What the template writes after a past reply: its close, then the new turn.
	python3 - "$work/req1.json" >"$work/req2full.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["messages"] = [{"role": "user", "content": "sf-u"}, {"role": "assistant", "content": "sf-r"},
                 {"role": "user", "content": "And in Rome?"}]
d.pop("tools", None)  # as the second turn's request: no tools
print(json.dumps(d))
PY
	render "$V" "$tmpl" "$work/req2full.json" "$work/p2" $tools_in ||
		{ fail "$fam: turn 2 could not be rendered: $(tail -1 "$work/render.err")"; continue; }
	python3 -c 'import sys; t=open(sys.argv[1]).read(); sys.stdout.write(t[t.index("sf-r")+4:])' "$work/p2.txt" >"$work/delta.txt"
	delta_ids=$("$LLAMA_REF" tokenize "$V" --specials <"$work/delta.txt")
	all="$ids $reply_ids $delta_ids"
	engine_says "$work/want" "$M" --tokens "$all" --n "$N"
	reasoned "$work/p2.txt" "$work/want"
	chat "$work/s2.json" "$model"
	r=0
	[ "$(j "$work/out" 'd["usage"]["prompt_tokens"]')" = "$(wc -w <<<"$all")" ] || r=1
	jw "$work/got" "$work/out" "$reply"
	cmp -s "$work/got" "$work/want" || r=1
	check "$fam: a named session's second turn is the reply's tokens, the template's close and the new turn ($(wc -w <<<"$all") tokens), continued greedily" $r

	# gpt-oss: tool_choice required, then named, enforced by harmony's grammar on the engine
	# (its <|channel|>, <|message|> and <|constrain|> drawn as text): one call in the client's
	# tool_calls, arguments by the tool's schema, the reply ended by the call; and a json_schema
	# response_format: the final message's content by the schema. A random model never ends an
	# analysis message, so the tokens spelling "analysis" (each a prefix of it) are banned by
	# logit_bias: the grammar's other way is left.
	if [ $fam = gpt-oss ]; then
		for tc in '"required"' '{"type":"function","function":{"name":"set_unit"}}' schema; do
			python3 - "$V" "$tc" >"$work/forced.json" <<'PY'
import json, struct, sys
d = open(sys.argv[1], "rb").read()
n_t, n_kv = struct.unpack_from("<QQ", d, 8)
p = 24
def s():
    global p
    (n,) = struct.unpack_from("<Q", d, p); p += 8
    v = d[p:p + n]; p += n; return v
def skip(t):
    global p
    if t == 8: s(); return None
    if t == 9:
        (et, n) = struct.unpack_from("<IQ", d, p); p += 12
        return [skip(et) if et != 8 else s() for _ in range(n)]
    p += {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}[t]
toks = None
for _ in range(n_kv):
    k = s(); (t,) = struct.unpack_from("<I", d, p); p += 4
    v = skip(t)
    if k == b"tokenizer.ggml.tokens":
        toks = v
ban = {str(i): -100 for i, x in enumerate(toks) if x and b"analysis".startswith(x)}
unit = {"type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["unit"], "additionalProperties": False}
tools = [{"type": "function", "function": {"name": "set_unit", "description": "Set the unit.",
                                           "parameters": unit}},
         {"type": "function", "function": {"name": "reset", "description": "Reset.",
                                           "parameters": {"type": "object", "properties": {},
                                                          "additionalProperties": False}}}]
req = {"messages": [{"role": "user", "content": "Use Celsius."}], "temperature": 0,
       "max_tokens": 100, "logit_bias": ban}
if sys.argv[2] == "schema":
    req["response_format"] = {"type": "json_schema", "json_schema": {"name": "u", "schema": unit}}
else:
    req.update(tools=tools, tool_choice=json.loads(sys.argv[2]))
print(json.dumps(req))
PY
			chat "$work/forced.json" "$model"
			r=0
			python3 - "$work/out" "$tc" <<'PY' || r=1
import json, sys
d = json.load(open(sys.argv[1]))
c = d["choices"][0]
assert d["usage"]["completion_tokens"] < 100, d["usage"]
if sys.argv[2] == "schema":
    assert c["finish_reason"] == "stop" and not c["message"].get("tool_calls"), d
    assert not c["message"].get("reasoning_content"), d
    assert json.loads(c["message"]["content"]) in ({"unit": "celsius"}, {"unit": "fahrenheit"}), d
    sys.exit(0)
calls = c["message"]["tool_calls"]
assert c["finish_reason"] == "tool_calls" and len(calls) == 1, d
f = calls[0]["function"]
a = json.loads(f["arguments"])
named = sys.argv[2].startswith("{")
assert f["name"] in (("set_unit",) if named else ("set_unit", "reset")), f
assert (a == {} if f["name"] == "reset" else a in ({"unit": "celsius"}, {"unit": "fahrenheit"})), f
assert d["usage"]["completion_tokens"] < 100, d["usage"]
PY
			if [ "$tc" = schema ]; then
				check "$fam: a json_schema response_format is the final message's content by the schema (harmony's grammar on the engine)" $r
			else
				check "$fam: tool_choice $tc is one call through harmony's grammar on the engine, ended by the call" $r
			fi
		done
	fi
done

# The Llama 3.2 template refuses two tool calls in one message: 400 with its message.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c={"id":"c1","type":"function","function":{"name":"add","arguments":"{\"a\": 1, \"b\": 2}"}}; d["messages"].append({"role":"assistant","content":"","tool_calls":[c, dict(c, id="c2")]}); d.pop("add_generation_prompt",None); d["max_tokens"]=4; print(json.dumps(d))' "$conv" >"$work/two.json"
chat "$work/two.json" random-test-llama-q8_0
r=0
[ "$(j "$work/out" 'd["status"], d["error"]["code"]')" = "(400, 'template_error')" ] || r=1
grep -q "single tool-calls" "$work/out" || r=1
check "llama-3.2: a conversation its template refuses is a 400 template_error with the template's message" $r
echo "$passes passed, $fails failed${left:+; in the extended run (SF_TEST_FULL=1, scripts/test --full): $left}"
[ "$fails" = 0 ]
