#!/usr/bin/env bash
# api.responses: POST /v1/responses and GET / DELETE /v1/responses/{id} through a head and
# simulated nodes (responses_client.py holds the checks): the chat completion's prompt and
# reply for the same conversation, whole and as typed stream events in order, 400s naming
# what it does not do, previous_response_id continuing the node's context (the latest) or
# replaying an earlier response's conversation as a new one (a fork, a fork of a fork, its
# own text.format; past the 256 turns a conversation keeps, a 400 saying so), POST
# /v1/responses/input_tokens counting a follow-up before it runs, GET without a log;
# with Qwen3's template (llama.cpp's bundle, scripted replies): reasoning and function_call
# items, their stream events, function_call_output continuing; with --wal-dir and two keys:
# GET and DELETE by the key that made it, store false kept nowhere, forks by key, from a
# deleted response (404) and made before the delete (kept); and stored responses continued,
# forked and fetched again after the head is killed and started again on its log.
# Usage: responses.sh NODED HEADD SOURCE_DIR   (exit 77: no llama.cpp templates; KEEP=DIR)
set -uo pipefail
noded=$1 headd=$2 src=$3 expect=/bin/false
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
run() { # the client's lines counted as checks
	local out
	out=$(python3 "$here/responses_client.py" "$@" 2>&1)
	echo "$out"
	passes=$((passes + $(grep -c '^ok ' <<<"$out")))
	fails=$((fails + $(grep -c '^FAIL ' <<<"$out")))
	grep -q '^ok ' <<<"$out" || fail "responses_client.py $*: no check ran"
}

start_node n1 && p1=$port
start_head plain "127.0.0.1:$p1"
base="http://127.0.0.1:$hport"
wait_health || { echo "FAIL the head never became healthy"; exit 1; }
run "$hport" plain
run "$hport" bounds
kill "$hpid"; wait "$hpid" 2>/dev/null

# Keys and the log: GET, DELETE, store false.
(umask 077; printf 'sk-one\nsk-two\n' >"$work/keys")
start_head store "127.0.0.1:$p1" --api-keys "$work/keys" --wal-dir "$work/wal-store"
base="http://127.0.0.1:$hport"
wait_health
run "$hport" store sk-one sk-two
kill "$hpid"; wait "$hpid" 2>/dev/null

# A head restart: the stored response is fetched and continued from the log.
start_head r1 "127.0.0.1:$p1" --wal-dir "$work/wal-restart"
base="http://127.0.0.1:$hport" http_port=$hport
wait_health
RESP_STATE=$work/r1.json run "$hport" restart-1
kill -9 "$hpid"; wait "$hpid" 2>/dev/null
start_head r2 "127.0.0.1:$p1" --wal-dir "$work/wal-restart" --listen-http "127.0.0.1:$http_port"
base="http://127.0.0.1:$hport"
wait_health
for _ in $(seq 100); do req GET /v1/models; grep -q sim-1 "$work/out" && break; sleep 0.05; done
RESP_STATE=$work/r1.json run "$hport" restart-2
kill "$hpid"; wait "$hpid" 2>/dev/null

# A model's own markup: Qwen3's template, scripted replies.
if vars=$("$src/scripts/llama-ref-fetch" 2>"$work/fetch.err"); then
	eval "$vars"
	start_node q3 --engine sim --sim-chat-template "$LLAMA_SRC/models/templates/Qwen-Qwen3-0.6B.jinja" \
		--sim-script on --sim-tokens-per-s 400 && pq=$port
	start_head q3 "127.0.0.1:$pq"
	base="http://127.0.0.1:$hport"
	wait_health
	run "$hport" qwen3
elif [ "${CI:-}" = true ]; then
	fail "llama.cpp's templates: $(tail -1 "$work/fetch.err")"
else
	echo "SKIP the Qwen3 template checks: $(tail -1 "$work/fetch.err") (under CI=true this fails)"
fi
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
