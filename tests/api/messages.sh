#!/usr/bin/env bash
# api.messages: POST /v1/messages (Anthropic's Messages API) through a head with keys and
# simulated nodes (messages_client.py holds the checks): the chat completion's prompt and
# reply for the same conversation, whole and as Anthropic's stream events in order,
# stop_sequence, max_tokens, errors in Anthropic's shape (x-api-key), count_tokens; with
# Qwen3's template (llama.cpp's bundle, scripted replies): thinking and tool_use blocks, their
# deltas, a tool_result continuing, count_tokens with tools.
# Usage: messages.sh NODED HEADD SOURCE_DIR   (KEEP=DIR keeps the work)
set -uo pipefail
noded=$1 headd=$2 src=$3 expect=/bin/false
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
run() {
	local out
	out=$(python3 "$here/messages_client.py" "$@" 2>&1)
	echo "$out"
	passes=$((passes + $(grep -c '^ok ' <<<"$out")))
	fails=$((fails + $(grep -c '^FAIL ' <<<"$out")))
	grep -q '^ok ' <<<"$out" || fail "messages_client.py $*: no check ran"
}
(umask 077; printf 'sk-one\n' >"$work/keys")

start_node n1 && p1=$port
start_head plain "127.0.0.1:$p1" --api-keys "$work/keys"
base="http://127.0.0.1:$hport"
wait_health || { echo "FAIL the head never became healthy"; exit 1; }
run "$hport" plain sk-one
kill "$hpid"; wait "$hpid" 2>/dev/null

if vars=$("$src/scripts/llama-ref-fetch" 2>"$work/fetch.err"); then
	eval "$vars"
	start_node q3 --engine sim --sim-chat-template "$LLAMA_SRC/models/templates/Qwen-Qwen3-0.6B.jinja" \
		--sim-script on --sim-tokens-per-s 400 && pq=$port
	start_head q3 "127.0.0.1:$pq" --api-keys "$work/keys"
	base="http://127.0.0.1:$hport"
	wait_health
	run "$hport" qwen3 sk-one
elif [ "${CI:-}" = true ]; then
	fail "llama.cpp's templates: $(tail -1 "$work/fetch.err")"
else
	echo "SKIP the Qwen3 template checks: $(tail -1 "$work/fetch.err") (under CI=true this fails)"
fi
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
