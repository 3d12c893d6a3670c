#!/usr/bin/env bash
# api.wal_structured: a session's structured output survives a SIGKILL of the durable head
# (--wal-dir), as the rest of its sampling does (the log keeps the grammar, ignore_eos and
# min_tokens with the session). On the simulated engine, whose text is random bytes unless a
# grammar holds it, an output that validates against the schema is one a node drew under the
# session's grammar.
#   - A named session's first turn with a json_schema; the head is killed and started again on
#     its log; the next turn with the same schema is served (one without it is a 400: the
#     session still knows its first turn's format), then its node is killed too and the turn
#     after, placed anew on the other node (which never saw the session), still validates.
#   - A stored Responses conversation with a json_schema text.format, continued after the
#     crash by previous_response_id: the same format served, none a 400.
#   - A streamed generation with a json_schema: the head is killed mid-stream and started again,
#     then the node running it is killed: the generation is placed anew and resumed on the
#     other node, and the whole text the client got validates.
# Usage: wal_structured.sh NODED HEADD   (KEEP=DIR keeps the work folder)
set -uo pipefail
noded=$1 headd=$2 expect=
. "$(dirname "$0")/lib.sh"
client="$(dirname "$0")/resume_client.py"

# schema MIN MAX: an object of a string of MIN..MAX bytes and an integer of 1..5, nothing else.
schema() {
	printf '{"type":"object","properties":{"s":{"type":"string","minLength":%s,"maxLength":%s},"n":{"type":"integer","minimum":1,"maximum":5}},"required":["s","n"],"additionalProperties":false}' "$1" "$2"
}
# valid MIN MAX: whether stdin is a JSON text that validates against schema MIN MAX.
valid() {
	python3 -S -c 'import json,sys
lo, hi = int(sys.argv[1]), int(sys.argv[2])
d = json.loads(sys.stdin.read())
assert type(d) is dict and set(d) == {"s", "n"}, d
assert type(d["s"]) is str and lo <= len(d["s"]) <= hi, d
assert type(d["n"]) is int and 1 <= d["n"] <= 5, d' "$1" "$2"
}
err_is() { [ "$(j "$work/out" 'd["error"]["param"], d["error"]["code"]')" = "('$1', '$2')" ]; }
text() { j "$work/out" 'd["choices"][0]["text"]'; }
# node_pid NAME: the pid of our node of that identity (as GET /v1/sessions/ID names it).
node_pid() { case "$1" in a) echo "$apid" ;; b) echo "$bpid" ;; esac; }

start_node a --sim-tokens-per-s 20 && pa=$port apid=$npid
start_node b --sim-tokens-per-s 20 && pb=$port bpid=$npid
fleet=127.0.0.1:$pa,127.0.0.1:$pb
whead() { # NAME [PORT]: a head on the log in $work/wal; $hport, $hpid, $base
	start_head "$1" "$fleet" --wal-dir "$work/wal" --replace-after-ms 300 \
		${2:+--listen-http 127.0.0.1:$2} || return 1
	base=http://127.0.0.1:$hport
	wait_health
}
whead h1 || fail "the head starts on an empty log"
port1=$hport

# ---- a named session ----
small=$(schema 5 10)
turn() { # PROMPT [MORE FIELDS]
	req POST /v1/completions "{\"model\":\"sim-1\",\"prompt\":\"$1\",\"seed\":3,\"max_tokens\":60${2:-}}" \
		-H 'X-Superfluid-Session: form'
}
turn "fill in" ",\"json_schema\":$small"
r=0; [ "$status" = 200 ] && text | valid 5 10 || r=1
check "a named session's first turn with a json_schema validates: $(text)" $r

# A stored Responses conversation with a text.format, continued after the crash.
fmt="{\"format\":{\"type\":\"json_schema\",\"name\":\"s\",\"schema\":$small}}"
rtext() { j "$work/out" 'd["output"][-1]["content"][0]["text"]'; }
req POST /v1/responses "{\"model\":\"sim-1\",\"input\":\"hi\",\"seed\":4,\"max_output_tokens\":60,\"text\":$fmt}"
rid=$(j "$work/out" 'd["id"]')
r=0; [ "$status" = 200 ] && rtext | valid 5 10 || r=1
check "a stored response with a json_schema text.format validates: $(rtext)" $r

kill -9 "$hpid"; wait "$hpid" 2>/dev/null
whead h2 "$port1" || fail "the head starts again on its log"
req POST /v1/responses "{\"model\":\"sim-1\",\"input\":\"more\",\"previous_response_id\":\"$rid\",\"max_output_tokens\":60,\"text\":$fmt}"
rid2=$(j "$work/out" 'd["id"]')
r=0; [ "$status" = 200 ] && rtext | valid 5 10 || r=1
req POST /v1/responses "{\"model\":\"sim-1\",\"input\":\"more\",\"previous_response_id\":\"$rid2\",\"max_output_tokens\":60}"
[ "$status" = 400 ] && err_is previous_response_id invalid_value || r=1
check "  ... continued after the SIGKILL with the same format: served and valid; without it a 400" $r
turn " again" ",\"json_schema\":$small"
r=0; [ "$status" = 200 ] && text | valid 5 10 || r=1
check "after a SIGKILL of the head its next turn with the same schema is served, and validates: $(text)" $r
turn " none"
r=0; [ "$status" = 400 ] && err_is session invalid_value || r=1
check "  ... and one without it is a 400 naming the session (its first turn's format kept)" $r

req GET /v1/sessions/form
was=$(j "$work/out" 'd["node"]')
vpid=$(node_pid "$was")
r=0; [ -n "$vpid" ] || r=1
check "the session is on node $was" $r
kill -9 "$vpid"; wait "$vpid" 2>/dev/null
turn " and more" ",\"json_schema\":$small"
r=0; [ "$status" = 200 ] && text | valid 5 10 || r=1
req GET /v1/sessions/form
now=$(j "$work/out" 'd["node"]')
[ "$now" != "$was" ] || r=1
check "its node killed, the next turn placed anew on $now (sent the grammar from the log) validates" $r
if [ "$vpid" = "$apid" ]; then start_node a --sim-tokens-per-s 20 && pa=$port apid=$npid
else start_node b --sim-tokens-per-s 20 && pb=$port bpid=$npid; fi
kill "$hpid"; wait "$hpid" 2>/dev/null

# ---- a streamed generation ----
fleet=127.0.0.1:$pa,127.0.0.1:$pb
rm -rf "$work/wal"
whead h3 || fail "a head on a new log"
port3=$hport
long=$(schema 120 160) # 6 s at least at 20 tokens a second: time for the restart
python3 "$client" "$port3" "a form" 11 300 --out "$work/got" --wait 30 --session streamy \
	--body "{\"json_schema\":$long}" >"$work/res" 2>"$work/cerr" &
cpid=$!
for _ in $(seq 200); do [ -e "$work/got.started" ] && break; sleep 0.05; done
kill -9 "$hpid"; wait "$hpid" 2>/dev/null
whead h4 "$port3" || fail "the head starts again on its log"
req GET /v1/sessions/streamy
was=$(j "$work/out" 'd["node"]')
vpid=$(node_pid "$was")
[ -n "$vpid" ] && kill -9 "$vpid"
wait "$cpid"; rc=$?
moved=$(metric superfluid_generations_resumed_total)
r=0; [ "$rc" = 0 ] && [ -n "$vpid" ] && grep -q "resumed=[1-9]" "$work/res" && [ "${moved:-0}" -ge 1 ] &&
	valid 120 160 <"$work/got" || r=1
[ $r = 0 ] || { echo "     | client: exit $rc $(cat "$work/res" "$work/cerr" | tail -2); generations resumed: $moved"; echo "     | got: $(head -c 200 "$work/got")"; }
check "a streamed generation with a json_schema: head killed, then its node $was: resumed elsewhere, the whole text validates" $r
kill "$hpid"; wait "$hpid" 2>/dev/null

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
