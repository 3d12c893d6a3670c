#!/usr/bin/env bash
# A head of several shards (--shards 3): each its own loop and thread, its own sessions and a
# link of its own to every node, the kernel spreading client connections over them. Many
# concurrent streams, each equal to the simulated engine's; the shards all take a share; named
# sessions and resumed generations answered by the shard that owns them whichever shard the
# client reached; /metrics and /v1/fleet summed over the shards; the log in one directory per
# shard, and a restart with another shard count refused naming the count; a clean SIGTERM.
# Usage: shards.sh NODED HEADD SIM_EXPECT   (KEEP=DIR keeps the work folder)
set -uo pipefail
noded=$1 headd=$2 expect=$3
. "$(dirname "$0")/lib.sh"
m() { sed -n "s/^$1 //p" "$work/out"; }

start_node n1 --sim-tokens-per-s 200 && p1=$port
start_node n2 --sim-tokens-per-s 200 && p2=$port
fleet=127.0.0.1:$p1,127.0.0.1:$p2

start_head head "$fleet" --shards 3 --wal-dir "$work/wal" --wal-sync batch
base="http://127.0.0.1:$hport"
wait_health
check "a head of 3 shards serves once its nodes are up" $?
grep -q "3 shards" "$work/head.err"
check "it says it runs 3 shards" $?

# Each node sees one link per shard.
for _ in $(seq 100); do
	[ "$(grep -c 'accepted from' "$work/n1.err")" -ge 3 ] && [ "$(grep -c 'accepted from' "$work/n2.err")" -ge 3 ] && break
	sleep 0.05
done
r=0; [ "$(grep -c 'accepted from' "$work/n1.err")" = 3 ] && [ "$(grep -c 'accepted from' "$work/n2.err")" = 3 ] || r=1
check "every shard has its own link to every node (3 each)" $r

# ---- many concurrent streams, each on a connection of its own ----
n=30
for i in $(seq $n); do
	chat_prompt "question $i" | "$expect" --seed "$i" --max-tokens 40 >"$work/want.$i" 2>/dev/null
	curl -sSN -H 'Content-Type: application/json' --data-binary \
		"{\"model\":\"sim-1\",\"messages\":[{\"role\":\"user\",\"content\":\"question $i\"}],\"seed\":$i,\"max_tokens\":40,\"stream\":true}" \
		"$base/v1/chat/completions" >"$work/got.$i" &
done
wait $(jobs -p | grep -v -e "^${pids[0]}$" -e "^${pids[1]}$" -e "^${pids[2]}$") 2>/dev/null
bad=0
for i in $(seq $n); do
	[ "$(sse_text "$work/got.$i")" = "$(cat "$work/want.$i")" ] || { bad=$((bad + 1)); echo "     | stream $i differs"; }
done
check "$n concurrent streams over 3 shards: every text equals the engine's" $bad

req GET /metrics
r=0; [ "$(m superfluid_shards)" = 3 ] &&
	[ "$(m 'superfluid_http_requests_total{endpoint="chat_completions",status="2xx"}')" = $n ] || r=1
check "/metrics sums the shards: $n chat completions answered" $r
busy=0
for k in 0 1 2; do
	v=$(m "superfluid_shard_requests_total{shard=\"$k\"}")
	echo "     | shard $k answered ${v:-?} requests"
	[ "${v:-0}" -gt 0 ] && busy=$((busy + 1))
done
[ "$busy" = 3 ]
check "the kernel spread the clients: each of the 3 shards answered some" $?
r=0; [ "$(m superfluid_completion_tokens_total)" -gt 0 ] && [ "$(m superfluid_nodes_up)" = 2 ] || r=1
check "tokens summed, nodes up counted once" $r

req GET /v1/fleet
r=0; [ "$(j "$work/out" 'd["shards"]')" = 3 ] && [ "$(j "$work/out" 'len(d["nodes"])')" = 2 ] &&
	[ "$(j "$work/out" '[x["state"] for x in d["nodes"]]')" = "['up', 'up']" ] || r=1
check "/v1/fleet: 3 shards, both nodes up" $r

# ---- named sessions: whichever shard a turn reaches, the owner answers ----
r=0
for s in ada bob cyd dee eve fay; do
	chat_prompt "I am $s." >"$work/p1"
	req POST /v1/chat/completions "{\"model\":\"sim-1\",\"messages\":[{\"role\":\"user\",\"content\":\"I am $s.\"}],\"seed\":3,\"max_tokens\":12}" -H "X-Superfluid-Session: $s"
	[ "$status" = 200 ] || { r=1; echo "     | $s turn 1: $status"; }
	t1=$(j "$work/out" 'd["choices"][0]["message"]["content"]')
	req POST /v1/chat/completions "{\"model\":\"sim-1\",\"session\":\"$s\",\"messages\":[{\"role\":\"user\",\"content\":\"I am $s.\"},{\"role\":\"assistant\",\"content\":$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$t1")},{\"role\":\"user\",\"content\":\"Again.\"}],\"seed\":3,\"max_tokens\":12}"
	[ "$status" = 200 ] || { r=1; echo "     | $s turn 2: $status $(head -c 300 "$work/out")"; }
	req GET "/v1/sessions/$s"
	[ "$status" = 200 ] && [ "$(j "$work/out" 'd["turns"]')" = 2 ] || { r=1; echo "     | $s: $(head -c 300 "$work/out")"; }
done
check "6 named sessions (header and body), two turns each, every turn on its owner shard" $r
# Messages (Anthropic's) with X-Superfluid-Session: routed to the owner shard as chat is.
r=0
for s in gus hal ivy jon kim lou; do
	req POST /v1/messages "{\"model\":\"sim-1\",\"max_tokens\":12,\"messages\":[{\"role\":\"user\",\"content\":\"I am $s.\"}]}" -H "X-Superfluid-Session: m-$s"
	[ "$status" = 200 ] || { r=1; echo "     | $s turn 1: $status"; }
	t1=$(j "$work/out" '"".join(b["text"] for b in d["content"] if b["type"] == "text")')
	req POST /v1/messages "{\"model\":\"sim-1\",\"max_tokens\":12,\"messages\":[{\"role\":\"user\",\"content\":\"I am $s.\"},{\"role\":\"assistant\",\"content\":$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$t1")},{\"role\":\"user\",\"content\":\"Again.\"}]}" -H "X-Superfluid-Session: m-$s"
	[ "$status" = 200 ] || { r=1; echo "     | $s turn 2: $status $(head -c 300 "$work/out")"; }
	req GET "/v1/sessions/m-$s"
	[ "$status" = 200 ] && [ "$(j "$work/out" 'd["turns"]')" = 2 ] || { r=1; echo "     | $s: $(head -c 300 "$work/out")"; }
done
check "6 named sessions over /v1/messages (the header), two turns each, on their owner shards" $r
req DELETE /v1/sessions/eve
r=0; [ "$status" = 200 ] || r=1
req GET /v1/sessions/eve
[ "$status" = 404 ] || r=1
check "DELETE reaches the shard that holds the session" $r

# ---- a running generation followed again by id, from any shard ----
# On a head of its own over a slow node: seed 69 runs 201 tokens before its end, 10 s at 20
# tokens/s, so the fetches come well inside however loaded the machine is.
main_base=$base main_hpid=$hpid
start_node slow --sim-tokens-per-s 20 && pslow=$port
start_head fetchhead "127.0.0.1:$pslow" --shards 3 --wal-dir "$work/wal-fetch" --wal-sync batch
base="http://127.0.0.1:$hport"
wait_health
curl -sSN -H 'Content-Type: application/json' --data-binary \
	'{"model":"sim-1","prompt":"fetch me","max_tokens":400,"seed":69,"stream":true}' \
	"$base/v1/completions" >"$work/live" &
lpid=$!

id=
for _ in $(seq 200); do
	id=$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("data: {"):
        print(json.loads(line[6:])["id"]); break' "$work/live" 2>/dev/null)
	[ -n "$id" ] && break
	sleep 0.02
done
# While its client follows it, the generation's own shard answers 409 session_busy; any
# other shard would not know the id (404): so each answer shows where it was answered. Six
# connections at once from one curl (--parallel): the kernel puts each on any shard.
urls=()
for i in 1 2 3 4 5 6; do urls+=(-o "$work/fetch.$i" "$base/v1/completions/$id?stream=false"); done
curl -sS --parallel --parallel-immediate --parallel-max 6 -w '%{http_code}\n' "${urls[@]}" >"$work/fetch.status"
live_events=$(grep -c '^data: {' "$work/live")
kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null
r=0; [ -n "$id" ] || r=1
[ "$(grep -c '^409$' "$work/fetch.status")" = 6 ] || { r=1; echo "     | statuses: $(tr '\n' ' ' <"$work/fetch.status") (the stream had $live_events events then)"; }
for i in 1 2 3 4 5 6; do
	[ "$(j "$work/fetch.$i" 'd["error"]["code"]')" = session_busy ] ||
		{ r=1; echo "     | fetch $i: $(head -c 200 "$work/fetch.$i")"; }
done
check "GET /v1/completions/{id} of a running stream, on 6 connections: each answered by its shard (busy)" $r
kill -9 "$hpid"
base=$main_base hpid=$main_hpid

# ---- the log: one directory per shard; another shard count is refused ----
r=0; for k in 0 1 2; do ls "$work/wal/shard-$k"/wal-*.log >/dev/null 2>&1 || r=1; done
check "each shard logs in a directory of its own" $r

kill -TERM "$hpid"; wait "$hpid"; rc=$?
r=0; [ "$rc" = 0 ] && [ "$(grep -c 'goodbye to 2 nodes' "$work/head.err")" = 3 ] || r=1
check "SIGTERM: every shard says goodbye to both nodes, exit 0" $r

"$headd" --fleet "$fleet" --admin-socket "$work/h2.sock" --listen-http 127.0.0.1:0 --shards 2 \
	--wal-dir "$work/wal" 2>"$work/h2.err"; rc=$?
r=0; [ "$rc" = 1 ] && grep -q "start it with --shards 3" "$work/h2.err" || { r=1; cat "$work/h2.err"; }
check "a log of 3 shards refuses a head of 2, naming --shards 3" $r

start_head h3 "$fleet" --shards 3 --wal-dir "$work/wal" --wal-sync batch
base="http://127.0.0.1:$hport"
wait_health
req GET /v1/sessions/ada
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["turns"]')" = 2 ] || r=1
check "restarted with 3 shards, named sessions come back on their shards" $r
kill -TERM "$hpid"; wait "$hpid" 2>/dev/null

"$headd" --fleet-listen 127.0.0.1:0 --shards 2 --admin-socket "$work/h4.sock" 2>"$work/h4.err"; rc=$?
r=0; [ "$rc" = 1 ] && grep -q "fleet-listen needs --shards 1" "$work/h4.err" || r=1
check "--fleet-listen with --shards 2 is refused with the reason" $r

! grep -l "ThreadSanitizer\|AddressSanitizer\|runtime error" "$work"/*.err
check "no sanitizer reported anything in the daemons' logs" $?

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
