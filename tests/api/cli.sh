#!/usr/bin/env bash
# The superfluid CLI over the head's HTTP API: status, tokenize, generate whole and streamed,
# chat across turns in one session, the rate line on a terminal, bearer keys, HTTPS, and the
# exit codes scripts rely on; every text checked against the simulated engine's reference.
# Usage: cli.sh NODED HEADD SIM_EXPECT CLI SOURCE_DIR   (KEEP=DIR keeps the work folder)
set -uo pipefail
noded=$1 headd=$2 expect=$3 cli=$4 src=$5
. "$(dirname "$0")/lib.sh"
unset SUPERFLUID_HEAD SUPERFLUID_API_KEY
# run ARGS...: the CLI's stdout in $work/out, stderr in $work/err, exit code in $rc.
run() { "$cli" "$@" >"$work/out" 2>"$work/err"; rc=$?; }
# exits CODE TEXT ARGS...: the CLI exits with CODE and says TEXT on stderr.
exits() {
	local want_rc=$1 text=$2; shift 2
	run "$@"
	r=0; [ "$rc" = "$want_rc" ] && grep -qF -- "$text" "$work/err" || r=1
	check "exit $want_rc, '$text': superfluid $*" $r
	[ "$r" = 0 ] || sed 's/^/     | /' "$work/err"
}

start_node n1 && p1=$port
start_node n2 && p2=$port
start_head head "127.0.0.1:$p1,127.0.0.1:$p2"
base="http://127.0.0.1:$hport"
wait_health
H=(--head "$base")

# ---- status, tokenize ----
for _ in $(seq 100); do run status "${H[@]}"; [ "$(grep -c ' up ' "$work/out")" = 2 ] && break; sleep 0.05; done
r=0; [ "$rc" = 0 ] && grep -q "^127.0.0.1:$p1 up version=7 identity=n1 free=[0-9]*/[0-9]* batch=[0-9]*/[0-9]* sessions=0 cached=- pages=0$" "$work/out" &&
	grep -q "^127.0.0.1:$p2 up version=7 identity=n2 " "$work/out" || r=1
check "status: one line per node, both up, with identity and capacity" $r
SUPERFLUID_HEAD="$base/v1/" run status --json
r=0; [ "$rc" = 0 ] && [ "$(j "$work/out" 'sorted(n["identity"] for n in d["nodes"])')" = "['n1', 'n2']" ] || r=1
check "status --json, the head named by \$SUPERFLUID_HEAD (with /v1/)" $r
run tokenize "${H[@]}" hello
r=0; [ "$rc" = 0 ] && [ "$(cat "$work/out")" = "104 101 108 108 111" ] || r=1
check "tokenize: the byte-level ids" $r
run tokenize "${H[@]}" --pieces 'a"b'
r=0; [ "$(cat "$work/out")" = "$(printf '97\t"a"\n34\t"\\""\n98\t"b"')" ] || r=1
check "tokenize --pieces: id and JSON-quoted text per line" $r
run tokenize "${H[@]}" --count --model sim-1 "hello fleet"
r=0; [ "$rc" = 0 ] && [ "$(cat "$work/out")" = 11 ] || r=1
check "tokenize --count" $r

# ---- generate ----
printf 'Once upon a time' | want --temperature 0 --max-tokens 24
run generate "${H[@]}" --temperature 0 --max-tokens 24 'Once upon a time'
r=0; [ "$rc" = 0 ] && cmp -s "$work/out" "$work/want" || r=1
check "generate: the engine's text, exactly, the model found on its own" $r
printf 'Once upon a time' | want --seed 11 --max-tokens 200
run generate "${H[@]}" --stream --seed 11 --max-tokens 200 --model sim-1 'Once upon a time'
r=0; [ "$rc" = 0 ] && cmp -s "$work/out" "$work/want" || r=1
check "generate --stream: the same text as the engine's, seeded" $r
stop=$(python3 -c 'import sys; t=open(sys.argv[1]).read(); print(t[20:23])' "$work/want")
python3 -c 'import sys; t=open(sys.argv[1]).read(); sys.stdout.write(t[:t.index(sys.argv[2])])' "$work/want" "$stop" >"$work/cut"
run generate "${H[@]}" --stream --seed 11 --max-tokens 200 --stop "$stop" 'Once upon a time'
r=0; [ "$rc" = 0 ] && cmp -s "$work/out" "$work/cut" || r=1
check "generate --stop: cut where the stop text begins" $r
if command -v script >/dev/null; then
	script -qec "$cli generate --head $base --stream --seed 11 --max-tokens 200 'Once upon a time'" /dev/null >"$work/tty" 2>&1
	r=0; grep -qE '^\[[0-9]+ tokens in [0-9.]+ s, [0-9]+ tokens/s, first token after [0-9]+ ms\]' <(tr -d '\r' <"$work/tty") || r=1
	check "on a terminal, a last line tells tokens, rate and first-token time" $r
fi

# ---- chat ----
chat_prompt 'My name is Ada.' | want --seed 3 --max-tokens 30
cp "$work/want" "$work/turn1"
{ chat_prompt 'My name is Ada.'; cat "$work/turn1"; printf '<|im_end|>\n'; chat_prompt 'What is my name?'; } |
	want --seed 3 --max-tokens 30
{ cat "$work/turn1"; echo; cat "$work/want"; echo; } >"$work/both"
printf 'My name is Ada.\n\nWhat is my name?\n' | "$cli" chat "${H[@]}" --session ada --seed 3 --max-tokens 30 >"$work/out" 2>"$work/err"
rc=$?
r=0; [ "$rc" = 0 ] && cmp -s "$work/out" "$work/both" || r=1
check "chat: two turns in one session, each reply the engine's for the whole conversation" $r
req GET /v1/sessions/ada
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["turns"]')" = 2 ] || r=1
check "chat --session NAME keeps the session at the end" $r
printf 'And now?\n' | "$cli" chat "${H[@]}" --session ada --max-tokens 30 >"$work/out" 2>"$work/err"
req GET /v1/sessions/ada
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["turns"]')" = 3 ] || r=1
check "chat --session NAME again goes on with it" $r
req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}],"seed":5,"max_tokens":30}'
j "$work/out" 'd["choices"][0]["message"]["content"]' >"$work/want"
printf 'hi\n/exit\nnot sent\n' | "$cli" chat "${H[@]}" --system 'Be brief.' --seed 5 --max-tokens 30 >"$work/out" 2>"$work/err"
rc=$?
r=0; [ "$rc" = 0 ] && cmp -s "$work/out" "$work/want" || r=1
check "chat --system: the reply to the system message and the turn; /exit ends it" $r
curl -s "$base/metrics" >"$work/metrics"
r=0; grep -qx 'superfluid_named_sessions 1' "$work/metrics" || r=1
check "a session chat named itself is ended when it ends (only 'ada' left)" $r

# ---- errors and exit codes ----
exits 1 "needs a PROMPT" generate "${H[@]}"
exits 1 "'0' is not a positive number" generate "${H[@]}" --max-tokens 0 hi
exits 1 "unknown command 'frobnicate'" frobnicate
exits 1 "is neither http:// nor https://" status --head ftp://x
exits 2 "model_not_found" generate "${H[@]}" --model nope hi
exits 2 "temperature" generate "${H[@]}" --temperature 9 hi
exits 3 "cannot reach the head at http://127.0.0.1:1" status --head 127.0.0.1:1
exits 3 "cannot reach the head" generate --head http://127.0.0.1:1 hi

# ---- keys ----
(umask 077; printf '# keys\nsk-cli-test\n' >"$work/keys"; printf 'sk-cli-test\n' >"$work/key")
start_head keyhead "127.0.0.1:$p1" --api-keys "$work/keys"
kbase="http://127.0.0.1:$hport"
for _ in $(seq 100); do curl -s "$kbase/health" | grep -q '"ok"' && break; sleep 0.05; done
exits 4 "asks for an API key" status --head "$kbase"
run tokenize --head "$kbase" --api-key-file "$work/key" hi
r=0; [ "$rc" = 0 ] && [ "$(cat "$work/out")" = "104 105" ] || r=1
check "--api-key-file: the key is sent" $r
SUPERFLUID_API_KEY=sk-cli-test run status --head "$kbase"
r=0; [ "$rc" = 0 ] && grep -q ' up ' "$work/out" || r=1
check "\$SUPERFLUID_API_KEY: the key is sent" $r
SUPERFLUID_API_KEY=wrong run status --head "$kbase"
r=0; [ "$rc" = 4 ] && grep -q invalid_api_key "$work/err" || r=1
check "a wrong key: exit 4, invalid_api_key" $r

# ---- HTTPS ----
if bash "$src/scripts/make-test-cert" "$work/tls" >/dev/null 2>&1; then
	start_head tlshead "127.0.0.1:$p1" --tls-cert "$work/tls/cert.pem" --tls-key "$work/tls/key.pem"
	tbase="https://127.0.0.1:$hport"
	for _ in $(seq 100); do curl -s --cacert "$work/tls/cert.pem" "$tbase/health" | grep -q '"ok"' && break; sleep 0.05; done
	printf 'Once upon a time' | want --temperature 0 --max-tokens 24
	run generate --head "$tbase" --cacert "$work/tls/cert.pem" --stream --temperature 0 --max-tokens 24 'Once upon a time'
	r=0; [ "$rc" = 0 ] && cmp -s "$work/out" "$work/want" || r=1
	check "https with --cacert: the same text" $r
	exits 3 "certificate" status --head "$tbase"
else
	fail "scripts/make-test-cert failed"
fi

# ---- the only node gone a moment: 503 model_unavailable, and the CLI waits for it ----
start_node solo && ps=$port && spid=$npid
start_head solohead "127.0.0.1:$ps" --shards 1
sbase="http://127.0.0.1:$hport"
for _ in $(seq 100); do curl -s "$sbase/health" | grep -q '"ok"' && break; sleep 0.05; done
kill -9 "$spid"
for _ in $(seq 100); do grep -q "link .* closed" "$work/solohead.err" && break; sleep 0.05; done
curl -sS -D "$work/hdr" -o "$work/body" -H 'Content-Type: application/json' \
	--data-binary '{"model":"sim-1","prompt":"x","max_tokens":4}' "$sbase/v1/completions"
r=0; head -1 "$work/hdr" | grep -q ' 503' && grep -qi '^Retry-After: 1' "$work/hdr" &&
	[ "$(j "$work/body" 'd["error"]["code"]')" = model_unavailable ] && grep -q 'solo' "$work/body" || r=1
check "every node serving the model being dialed again: 503 model_unavailable, Retry-After, naming the node" $r
[ "$r" = 0 ] || sed 's/^/     | /' "$work/hdr" "$work/body"
(sleep 1.5; exec "$noded" --listen "127.0.0.1:$ps" --blob-dir "$work/blobs-solo" --identity solo 2>"$work/solo2.err") &
pids+=($!)
printf 'back again' | want --temperature 0 --max-tokens 16
run generate --head "$sbase" --model sim-1 --stream --temperature 0 --max-tokens 16 'back again'
r=0; [ "$rc" = 0 ] && cmp -s "$work/out" "$work/want" || r=1
check "the CLI asks again as Retry-After says: the text once the node is back" $r
[ "$r" = 0 ] || sed 's/^/     | /' "$work/err"
exits 2 "model_not_found" generate --head "$sbase" --model nope hi

kill -TERM "${pids[@]}" 2>/dev/null; sleep 0.3
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
