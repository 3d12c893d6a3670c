#!/usr/bin/env bash
# POST /v1/audio/transcriptions with curl against a real superfluid-noded (simulated engine,
# a blob store) and a superfluid-headd on loopback: every response format and the stream give
# the engine's own transcript of the file's bytes (sim_transcribe); the same file twice goes
# to the node once (the head's superfluid_blobs_sent_total, the node's blob folder); after the
# node's link drops (SIGSTOP past --silence-ms) it goes again; a file over one 4 MiB chunk
# arrives whole; a client that goes away is dropped; malformed forms, unknown models and
# bodies over --http-max-body are refused in the OpenAI error shape.
# Usage: transcribe.sh NODED HEADD SIM_TRANSCRIBE   (KEEP=DIR keeps the work folder)
set -uo pipefail
noded=$1 headd=$2 transcribe=$3 expect=/bin/false
. "$(dirname "$0")/lib.sh"

# The engine's transcript of FILE into $work/want ("segments duration_ms" in want.meta).
want_of() { "$transcribe" <"$1" >"$work/want" 2>"$work/want.meta"; }
segs() { cut -d' ' -f1 "$work/want.meta"; }

start_node n1 && p1=$port
# One shard: the blob counts below are per link, and each shard has a link of its own.
start_head head "127.0.0.1:$p1" --shards 1 --http-max-body $((16 << 20)) --silence-ms 2000 \
	--heartbeat-ms 200
base="http://127.0.0.1:$hport"
wait_health
check "the head is up with its node" $?

head -c 300 /dev/urandom >"$work/a.wav"
want_of "$work/a.wav"
sha=$(sha256sum "$work/a.wav" | cut -d' ' -f1)

# ---- each response format ----
form "$work/a.wav" model=sim-1
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["text"]')" = "$(cat "$work/want")" ] || r=1
check "json (the default): {\"text\"} is the engine's transcript" $r
form "$work/a.wav" model=sim-1 response_format=json language=en prompt=hello temperature=0.2
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["text"]')" = "$(cat "$work/want")" ] || r=1
check "json with language, prompt and temperature accepted" $r
form "$work/a.wav" model=sim-1 response_format=text
r=0; [ "$status" = 200 ] && cmp -s "$work/out" "$work/want" || r=1
check "text: the transcript as it is" $r
form "$work/a.wav" model=sim-1 response_format=verbose_json language=en
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["text"]')" = "$(cat "$work/want")" ] &&
	[ "$(j "$work/out" '" ".join(s["text"] for s in d["segments"])')" = "$(cat "$work/want")" ] &&
	[ "$(j "$work/out" 'len(d["segments"])')" = "$(segs)" ] &&
	[ "$(j "$work/out" 'd["task"], d["language"], d["segments"][1]["start"], d["segments"][0]["id"]')" = "('transcribe', 'en', 1.0, 0)" ] &&
	[ "$(j "$work/out" 'd["duration"]')" = "$(python3 -c "print($(cut -d' ' -f2 "$work/want.meta") / 1000)")" ] || r=1
check "verbose_json: segments joined give the transcript, duration" $r
form "$work/a.wav" model=sim-1 response_format=srt
r=0; [ "$status" = 200 ] && [ "$(grep -c -- ' --> ' "$work/out")" = "$(segs)" ] &&
	grep -q '^00:00:01,000 --> 00:00:02,000$' "$work/out" && [ "$(head -1 "$work/out")" = 1 ] || r=1
check "srt: one cue per segment" $r
form "$work/a.wav" model=sim-1 response_format=vtt
r=0; [ "$status" = 200 ] && [ "$(head -1 "$work/out")" = WEBVTT ] &&
	[ "$(grep -c -- ' --> ' "$work/out")" = "$(segs)" ] && grep -q '^00:00:00.000 --> 00:00:01.000$' "$work/out" || r=1
check "vtt: WEBVTT and one cue per segment" $r

# ---- streamed ----
form "$work/a.wav" model=sim-1 stream=true
python3 - "$work/out" "$work/want" "$(segs)" >"$work/sse.check" 2>&1 <<'PY'
import json, sys
events = [json.loads(l[6:]) for l in open(sys.argv[1], encoding="utf-8") if l.startswith("data: ")]
want = open(sys.argv[2], encoding="utf-8").read()
deltas = [e["delta"] for e in events if e["type"] == "transcript.text.delta"]
assert len(deltas) == int(sys.argv[3]), (len(deltas), sys.argv[3])
assert "".join(deltas) == want, "deltas differ"
assert events[-1] == {"type": "transcript.text.done", "text": want}, events[-1]
assert [e["type"] for e in events[:-1]] == ["transcript.text.delta"] * len(deltas)
PY
r=$?; [ "$status" = 200 ] || r=1
check "stream=true: a transcript.text.delta per segment, then transcript.text.done" $r

# ---- once per link ----
sent=$(metric superfluid_blobs_sent_total)
r=0; [ "$sent" = 1 ] && [ "$(ls "$work/blobs-n1" | grep -c "$sha")" = 1 ] &&
	[ "$(metric superfluid_blob_bytes_sent_total)" = 300 ] || r=1
check "seven requests for one file: the node got its blob once ($sent sent)" $r
r=0; [ "$(metric superfluid_blobs_cached)" = 1 ] && [ "$(metric superfluid_blobs_cache_bytes)" = 300 ] &&
	[ "$(metric 'superfluid_state_ops_total{result="ok"}')" = 7 ] || r=1
check "metrics: one blob cached, seven state operations ok" $r

# ---- the link drops: the blob goes again on the new one ----
reconnects() { metric 'superfluid_node_reconnects_total{node="127.0.0.1:'"$p1"'",identity="n1"}'; }
kill -STOP "$npid"
sleep 2.6
kill -CONT "$npid"
for _ in $(seq 100); do
	[ "$(reconnects)" -ge 1 ] && [ "$(metric superfluid_nodes_up)" = 1 ] && break
	sleep 0.05
done
# A loaded machine may drop the fresh link once more: ask until a node answers.
for _ in $(seq 50); do
	form "$work/a.wav" model=sim-1
	[ "$status" = 200 ] && break
	sleep 0.1
done
sent=$(metric superfluid_blobs_sent_total)
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["text"]')" = "$(cat "$work/want")" ] &&
	[ "$sent" -ge 2 ] && [ "$sent" -le $((1 + $(reconnects))) ] || r=1
check "after the node's link dropped and came back, the blob was sent again ($sent sent)" $r
links=$(reconnects)
form "$work/a.wav" model=sim-1
r=0; [ "$status" = 200 ] || r=1
[ "$(reconnects)" = "$links" ] && { [ "$(metric superfluid_blobs_sent_total)" = "$sent" ] || r=1; }
check "and only once on the new link" $r

r=0; [ "$(metric 'superfluid_http_requests_total{endpoint="audio_transcriptions",status="2xx"}')" = 9 ] || r=1
check "metrics count the endpoint's requests" $r

# ---- a second head on the same node, with the default silence limit: a node busy storing and
# transcribing a large file sends nothing meanwhile, longer than the first head's 2 s ----
start_head head2 "127.0.0.1:$p1" --shards 1 --http-max-body $((16 << 20))
base="http://127.0.0.1:$hport"
wait_health

# ---- a file over one chunk ----
head -c $((5 << 20 | 12345)) /dev/urandom >"$work/big.wav"
want_of "$work/big.wav"
bsha=$(sha256sum "$work/big.wav" | cut -d' ' -f1)
form "$work/big.wav" model=sim-1
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["text"]')" = "$(cat "$work/want")" ] &&
	[ "$(sha256sum "$work/blobs-n1/$bsha" 2>/dev/null | cut -d' ' -f1)" = "$bsha" ] &&
	[ "$(metric superfluid_blob_bytes_sent_total)" = $((5 << 20 | 12345)) ] || r=1
check "a file of 5 MiB (two chunks) arrives whole and is transcribed" $r

# ---- a client that goes away: its request is dropped, the node's late answer ignored ----
want_of "$work/a.wav"
gone=$(metric superfluid_client_gone_total)
kill -STOP "$npid"
curl -s -m 0.4 -o /dev/null -F "file=@$work/a.wav" -F model=sim-1 "$base/v1/audio/transcriptions"
sleep 0.2
kill -CONT "$npid"
for _ in $(seq 40); do
	[ "$(metric 'superfluid_state_ops_total{result="cancelled"}')" = 1 ] && break
	sleep 0.05
done
r=0; [ "$(metric 'superfluid_state_ops_total{result="cancelled"}')" = 1 ] &&
	[ "$(metric superfluid_client_gone_total)" = $((gone + 1)) ] || r=1
form "$work/a.wav" model=sim-1 response_format=text
[ "$status" = 200 ] && cmp -s "$work/out" "$work/want" || r=1
check "a client gone mid-request: dropped, and the next one is answered" $r

# ---- refusals ----
form "$work/a.wav" model=nope
r=0; [ "$status" = 404 ] && [ "$(j "$work/out" 'd["error"]["code"], d["error"]["param"]')" = "('model_not_found', 'model')" ] || r=1
check "an unknown model: 404 model_not_found" $r
form "$work/a.wav"
r=0; [ "$status" = 400 ] && [ "$(j "$work/out" 'd["error"]["code"], d["error"]["param"]')" = "('missing_required_parameter', 'model')" ] || r=1
check "no model: 400 missing_required_parameter" $r
status=$(curl -sS -o "$work/out" -w '%{http_code}' -F model=sim-1 "$base/v1/audio/transcriptions")
r=0; [ "$status" = 400 ] && [ "$(j "$work/out" 'd["error"]["param"]')" = file ] || r=1
check "no file: 400 naming file" $r
form "$work/a.wav" model=sim-1 response_format=mp3
r=0; [ "$status" = 400 ] && [ "$(j "$work/out" 'd["error"]["param"]')" = response_format ] || r=1
check "an unknown response_format: 400" $r
form "$work/a.wav" model=sim-1 response_format=srt stream=true
r=0; [ "$status" = 400 ] && [ "$(j "$work/out" 'd["error"]["param"]')" = stream ] || r=1
check "srt cannot stream: 400" $r
req POST /v1/audio/transcriptions '{"model":"sim-1"}'
r=0; [ "$status" = 400 ] && j "$work/out" 'd["error"]["message"]' | grep -q 'multipart/form-data' || r=1
check "a JSON body: 400 saying multipart/form-data" $r
status=$(curl -sS -o "$work/out" -w '%{http_code}' -H 'Content-Type: multipart/form-data; boundary=zz' \
	--data-binary $'--zz\r\nContent-Disposition: form-data; name="model"\r\n\r\nsim-1' "$base/v1/audio/transcriptions")
r=0; [ "$status" = 400 ] && j "$work/out" 'd["error"]["message"]' | grep -q 'not ended by the boundary' || r=1
check "a form cut short: 400 saying where" $r
req GET /v1/audio/transcriptions
r=0; [ "$status" = 405 ] || r=1
check "GET: 405" $r
head -c $((17 << 20)) /dev/zero >"$work/huge.wav"
form "$work/huge.wav" model=sim-1
r=0; [ "$status" = 413 ] || r=1
check "a body over --http-max-body: 413" $r

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
