# Shared by the API test scripts: a work folder, real nodes and heads on loopback, curl
# requests, checks counted and told, and the simulated engine's reference replies.
# Source it after setting noded, headd and expect (the programs).
work=$(mktemp -d)
pids=()
headlog=$work/head.err # the last head started (start_head), for fail()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; [ -n "${KEEP:-}" ] && cp -r "$work" "$KEEP"; rm -rf "$work"; }
trap cleanup EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); echo "ok   $1"; }
fail() { fails=$((fails + 1)); echo "FAIL $1"; sed 's/^/     | /' "$work/out" "$work/want" 2>/dev/null | head -40; [ -f "$headlog" ] && tail -5 "$headlog" | sed 's/^/     | head: /'; }
check() { if [ "$2" = 0 ]; then ok "$1"; else fail "$1"; fi; }
# python3, every call of it in the tests, is the interpreter itself, through a link first in
# PATH: a version manager's shim there (pyenv's runs bash and pyenv each time: 0.5 s of CPU, a
# second or two on a loaded machine, more than most checks take) is asked once, the same
# interpreter runs, and a python3 started in the background is still $! (a link, not a shell
# function). -S on the stdlib-only one-liners below: no site-packages (nor .pth files) to load.
if sf_python=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$sf_python" ] &&
	mkdir "$work/.bin" && ln -s "$sf_python" "$work/.bin/python3"; then
	PATH=$work/.bin:$PATH
fi
# j FILE EXPR: a value from a JSON file (python's json; EXPR sees the document as d).
j() { python3 -S -c "import json,sys; d=json.load(open(sys.argv[1])); print(($2))" "$1" 2>/dev/null; }

# NODED_SHARDS=N runs every node with --shards N.
# Each start empties its log first: the job's own redirection happens after the fork, and a
# restart under the same name whose wait read first found the last run's port (or the head's
# "client API on" of the process before).
start_node() { # name [more options]: sets $port and $npid
	: >"$work/$1.err"
	"$noded" --listen 127.0.0.1:0 --blob-dir "$work/blobs-$1" --identity "$1" \
		${NODED_SHARDS:+--shards "$NODED_SHARDS"} "${@:2}" 2>"$work/$1.err" &
	npid=$!; pids+=("$npid")
	for _ in $(seq 100); do
		port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/$1.err" | head -1)
		[ -n "$port" ] && return 0
		sleep 0.05
	done
	echo "     | node $1 did not start"; return 1
}
# HEADD_SHARDS=N runs every head with --shards N (the *.shards tests).
# noded_again ERRFILE TRIES ARGS...: superfluid-noded with ARGS on a port just freed (a killed
# node's: the bind may be refused for a moment, so up to 20 tries), each waiting up to TRIES x
# 50 ms for its "listening on" line; sets $np, its pid (also in pids).
noded_again() {
	local err=$1 tries=$2 up
	shift 2
	for _ in $(seq 20); do
		"$noded" "$@" 2>"$err" &
		np=$! up=1
		for _ in $(seq "$tries"); do
			grep -q "listening on" "$err" && { up=0; break; }
			kill -0 "$np" 2>/dev/null || break # it could not bind: again
			sleep 0.05
		done
		[ "$up" = 0 ] && break
		wait "$np" 2>/dev/null
		sleep 0.1
	done
	pids+=("$np")
}
start_head() { # log name, fleet, [more options]: sets $hport (the HTTP port) and $hpid
	: >"$work/$1.err"
	"$headd" --fleet "$2" --admin-socket "$work/$1.sock" --listen-http 127.0.0.1:0 \
		${HEADD_SHARDS:+--shards "$HEADD_SHARDS"} "${@:3}" \
		2>"$work/$1.err" &
	hpid=$!; pids+=("$hpid"); headlog="$work/$1.err"
	for _ in $(seq 100); do
		hport=$(sed -n 's/.*client API on https\{0,1\}:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/$1.err" | head -1)
		[ -n "$hport" ] && return 0
		sleep 0.05
	done
	echo "     | head $1 did not start its API"; cat "$work/$1.err"; return 1
}
# head_encodes [LOG]: waits (30 s at most) until every shard of the head whose log is LOG (the
# last started) has loaded its model's tokenizer file and says it encodes prompts itself;
# until then a shard asks a node to encode. (A generation that comes before a shard has its
# model's tokenizer at all waits for it: api_tok_wait.c, tests/api/tok_wait.sh.)
head_encodes() {
	local log=${1:-$headlog} shards
	shards=$(sed -n 's/.* \([0-9][0-9]*\) shards,.*/\1/p' "$log" | head -1)
	for _ in $(seq 600); do
		[ "$(grep -c "encodes its prompts itself" "$log")" -ge "${shards:-1}" ] && return 0
		sleep 0.05
	done
	return 1
}
# req METHOD PATH [BODY] [curl options...]: the body in $work/out, the status in $status.
base=
req() {
	local m=$1 p=$2 b=${3:-}
	if [ -n "$b" ]; then
		status=$(curl -sS -o "$work/out" -w '%{http_code}' -X "$m" -H 'Content-Type: application/json' \
			--data-binary "$b" "${@:4}" "$base$p")
	else
		status=$(curl -sS -o "$work/out" -w '%{http_code}' -X "$m" "${@:4}" "$base$p")
	fi
}
# metric NAME: one sample's value from GET /metrics.
metric() { curl -s "$base/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
# form FILE [curl -F fields...]: POST the file with fields; body in $work/out, status in $status.
form() {
	local f=$1; shift
	local args=()
	for a in "$@"; do args+=(-F "$a"); done
	status=$(curl -sS -o "$work/out" -w '%{http_code}' -F "file=@$f" "${args[@]}" \
		"$base/v1/audio/transcriptions")
}
wait_health() { for _ in $(seq 100); do req GET /health; [ "$status" = 200 ] && return 0; sleep 0.05; done; return 1; }
# PROMPT | want [sim_expect options]: the reference reply in $work/want, "reason count" in
# $work/want.meta. (A pipe, not an argument: $(...) would drop the prompt's last newline.)
want() { "$expect" "$@" >"$work/want" 2>"$work/want.meta"; }
# The text of an SSE stream of chat chunks (or completions with TEXT=1).
sse_text() {
	python3 -S - "$1" "${2:-chat}" <<'EOF'
import json, sys
out = []
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.rstrip("\n")
    if not line.startswith("data: ") or line == "data: [DONE]":
        continue
    d = json.loads(line[6:])
    for c in d.get("choices", []):
        if sys.argv[2] == "chat":
            out.append(c.get("delta", {}).get("content") or "")
        else:
            out.append(c.get("text") or "")
sys.stdout.write("".join(out))
EOF
}
chat_prompt() { printf '<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n' "$1"; }

# ---- GGUF models (the gguf*.sh tests; they set noded, headd and cli, the superfluid CLI) ----
# gguf_vocab SOURCE_DIR: LLAMA_SRC, whose models/ggml-vocab-*.gguf lend made models their
# vocabularies (scripts/llama-ref-fetch). Without it the test is skipped (exit 77, said), but
# under CI=true it fails.
gguf_vocab() {
	. "$1/tests/ref/fetch.sh"
	llama_ref_need "$1" "$work"
}
# gguf_make OUT VOCAB SHAPE TYPE [model make options]: a random-weight model in OUT, with
# llama.cpp's models/ggml-vocab-VOCAB.gguf; the test ends (failed) when it cannot be made.
gguf_make() {
	"$cli" model make --shape "$3" --type "$4" --vocab "$LLAMA_SRC/models/ggml-vocab-$2.gguf" \
		"${@:5}" -o "$1" >"$work/make.out" 2>&1 && return 0
	fail "superfluid model make --shape $3 --type $4 ($2's vocabulary)"; sed 's/^/     | /' "$work/make.out"
	exit 1
}
# start_gguf_node NAME MODEL [options]: start_node with --model MODEL, waiting up to 60 s for
# the model to load (a loaded machine); sets $port and $npid.
start_gguf_node() {
	: >"$work/$1.err"
	"$noded" --listen 127.0.0.1:0 --blob-dir "$work/blobs-$1" --identity "$1" --model "$2" \
		${NODED_SHARDS:+--shards "$NODED_SHARDS"} "${@:3}" 2>"$work/$1.err" &
	npid=$!; pids+=("$npid")
	for _ in $(seq 1200); do
		port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/$1.err" | head -1)
		[ -n "$port" ] && return 0
		kill -0 "$npid" 2>/dev/null || break
		sleep 0.05
	done
	echo "     | node $1 did not start:"; tail -5 "$work/$1.err" | sed 's/^/     |   /'; return 1
}
# nodes_up N: waits up to 30 s until N nodes are up at the head $base.
nodes_up() {
	for _ in $(seq 600); do
		[ "$("$cli" status --head "$base" 2>/dev/null | grep -c ' up ')" -ge "$1" ] && return 0
		sleep 0.05
	done
	return 1
}
# engine_says OUT MODEL [model run options]: what the GGUF engine computes here (superfluid
# model run, one thread) as the API's text: its last newline dropped, each maximal piece of
# bytes that is not UTF-8 one U+FFFD (as the head writes a token's broken UTF-8).
engine_says() {
	SF_MODEL_QUIET=1 "$cli" model run "$2" --threads 1 "${@:3}" >"$work/says.raw" 2>"$work/says.err" ||
		{ echo "     | model run failed: $(tail -1 "$work/says.err")"; return 1; }
	python3 -S -c 'import sys
b = open(sys.argv[1], "rb").read()
sys.stdout.buffer.write((b[:-1] if b.endswith(b"\n") else b).decode("utf-8", "replace").encode())' \
		"$work/says.raw" >"$1"
}
# jw OUT FILE EXPR: a string from a JSON file (EXPR sees the document as d) written to OUT
# as UTF-8, nothing added.
jw() {
	python3 -S -c 'import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
sys.stdout.buffer.write(str(eval(sys.argv[2])).encode())' "$2" "$3" >"$1" 2>/dev/null
}
