#!/usr/bin/env bash
# api.clients: the client libraries people use, from npm, against a head (clients.mjs holds
# the checks): the official openai package (7), the Vercel AI SDK (ai 7 with @ai-sdk/openai 4:
# its default model speaks the Responses API, .chat() the chat endpoint) and LangChain's
# @langchain/openai (1.6, with useResponsesApi too; OpenAIEmbeddings), each doing a chat, a
# stream, a tool round trip, a message of text parts, a Responses exchange (a follow-up of
# the AI SDK naming the earlier reply by item_reference; openai's fork from an earlier
# response by previous_response_id), embeddings, and structured outputs
# (openai's chat.completions.parse, the AI SDK's generateObject, LangChain's
# withStructuredOutput) and forced tool calls (tool_choice required or named). The node is the
# simulated engine with Qwen2.5's template from llama.cpp's bundle, answering each prompt's last
# sim-reply line verbatim, so every reply is known. A failed npm install fails the test.
# Usage: clients.sh NODED HEADD SOURCE_DIR NPM_DIR   (exit 77: no llama.cpp templates; KEEP=DIR)
set -uo pipefail
noded=$1 headd=$2 src=$3 npm_dir=$4 expect=/bin/false
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
gguf_vocab "$src" # LLAMA_SRC, for its templates (skip 77, or fail under CI=true)
pkgs=(openai@^7 ai@^7 @ai-sdk/openai@^4 @langchain/openai@^1.6 @langchain/core@^1)
need=0
for p in openai ai @ai-sdk/openai @langchain/openai @langchain/core; do
	[ -f "$npm_dir/node_modules/$p/package.json" ] || need=1
done
if [ "$need" = 1 ]; then
	mkdir -p "$npm_dir"
	npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error "${pkgs[@]}" \
		>"$work/npm.log" 2>&1 ||
		{ echo "FAIL npm install ${pkgs[*]}"; sed 's/^/     | /' "$work/npm.log"; exit 1; }
fi
for p in openai ai @ai-sdk/openai @langchain/openai; do
	echo "     | $p $(python3 -S -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$npm_dir/node_modules/$p/package.json")"
done
cp "$here/clients.mjs" "$npm_dir/clients.mjs"
tmpl=$LLAMA_SRC/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja
[ -f "$tmpl" ] || { echo "FAIL no $tmpl"; exit 1; }
start_node n1 --engine sim --sim-chat-template "$tmpl" --sim-script on --sim-tokens-per-s 400 &&
	p1=$port
start_head head "127.0.0.1:$p1"
base="http://127.0.0.1:$hport"
wait_health || { echo "FAIL the head never became healthy"; exit 1; }
out=$(cd "$npm_dir" && timeout 600 node clients.mjs "$base/v1" sim-1 sim-1 2>&1)
echo "$out"
passes=$(grep -c '^ok ' <<<"$out")
fails=$(grep -c '^FAIL ' <<<"$out")
grep -q '^all passed$' <<<"$out" || fails=$((fails + 1))
echo "$passes passed, $fails failed"
[ "$fails" = 0 ] && [ "$passes" -ge 27 ]
