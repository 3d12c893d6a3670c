#!/usr/bin/env bash
# POST /v1/audio/transcriptions past the old limits, against a real superfluid-noded and
# superfluid-headd on loopback, both with a 1 s silence limit: an 80 MiB WAV file (over the
# 64 MiB link send queue) goes to the node as the link drains and its transcript is the
# engine's; a long transcription (a 6 MiB file, some 390,000 segments) streams while another
# client streams a chat on the same node, both whole and correct and the link never dropped;
# the node's link dropped in the middle of a large transfer: the blob goes again on the new
# link and the request is answered; a client gone in the middle of one: dropped, and the next
# request answered.
# Usage: transcribe_big.sh NODED HEADD SIM_TRANSCRIBE SIM_EXPECT   (KEEP=DIR keeps the work folder)
set -uo pipefail
noded=$1 headd=$2 transcribe=$3 expect=$4
. "$(dirname "$0")/lib.sh"

# mkwav FILE BYTES: a 16 kHz 16-bit mono PCM WAV header and BYTES of random samples.
mkwav() {
	python3 - "$1" "$2" <<'PY'
import os, struct, sys
n = int(sys.argv[2])
with open(sys.argv[1], "wb") as f:
    f.write(b"RIFF" + struct.pack("<I", 36 + n) + b"WAVE")
    f.write(b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, 16000, 32000, 2, 16))
    f.write(b"data" + struct.pack("<I", n))
    while n:
        k = min(n, 1 << 24)
        f.write(os.urandom(k))
        n -= k
PY
}
now() { date +%s.%N; }
since() { python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$(now)"; }

# SF_TEST_SLOW=K (scripts/test sets 2, and 3 under the sanitizers: after the stop below the
# node now and then stays quiet past 1 s, not yet explained): the limits and the stop K times
# longer.
slow=${SF_TEST_SLOW:-1}
silence=$((1000 * slow)) beat=$((100 * slow))
# One shard: the blob counts below are per link, and each shard has a link of its own.
start_node n1 --silence-ms $silence --heartbeat-ms $beat --sim-tokens-per-s 50 && p1=$port
# (--stream-buffer: the SSE of 390,000 segments is some 20 MB, and the client is not the test)
start_head head "127.0.0.1:$p1" --shards 1 --http-max-body $((96 << 20)) \
	--stream-buffer $((64 << 20)) --silence-ms $silence --heartbeat-ms $beat
base="http://127.0.0.1:$hport"
wait_health
check "the head is up with its node ($silence ms silence limits on both sides)" $?
reconnects() { metric 'superfluid_node_reconnects_total{node="127.0.0.1:'"$p1"'",identity="n1"}'; }

# ---- a blob well over the 64 MiB send queue ----
size=$((80 << 20))
mkwav "$work/big.wav" $size
"$transcribe" <"$work/big.wav" >"$work/want.big" 2>"$work/want.big.meta"
bsha=$(sha256sum "$work/big.wav" | cut -d' ' -f1)
t0=$(now)
form "$work/big.wav" model=sim-1 response_format=text
took=$(since "$t0")
r=0; [ "$status" = 200 ] && cmp -s "$work/out" "$work/want.big" &&
	[ "$(sha256sum "$work/blobs-n1/$bsha" 2>/dev/null | cut -d' ' -f1)" = "$bsha" ] &&
	[ "$(metric superfluid_blob_bytes_sent_total)" = $((size + 44)) ] &&
	[ "$(reconnects)" = 0 ] || r=1
check "an 80 MiB WAV file ($(cut -d' ' -f1 "$work/want.big.meta") segments): sent whole, transcribed as the engine does, the link kept (${took} s)" $r

# ---- a long transcription beside a streamed chat on the same node ----
# (a chat first, so the head has the node's tokenizer before the one that is timed)
req POST /v1/chat/completions '{"model":"sim-1","messages":[{"role":"user","content":"hi"}],"max_tokens":1}'
head -c $((15 << 19)) /dev/urandom >"$work/long.bin"
"$transcribe" <"$work/long.bin" >"$work/want.long" 2>"$work/want.long.meta"
chat_prompt 'Tell me about the fleet.' | want --seed 7 --max-tokens 16
lsha=$(sha256sum "$work/long.bin" | cut -d' ' -f1)
t0=$(now)
curl -sSN -o "$work/tr.sse" -F "file=@$work/long.bin" -F model=sim-1 -F stream=true \
	"$base/v1/audio/transcriptions" &
trpid=$!
# The chat starts once the node has the file (it is transcribing it), and takes some 0.3 s
# at 50 tokens/s; the transcription of 7.5 MiB (near its 8 MiB bound) some 1.3 s, so the
# chat ends while it streams.
for _ in $(seq 400); do [ -e "$work/blobs-n1/$lsha" ] && break; sleep 0.01; done
t1=$(now)
curl -sSN -H 'Content-Type: application/json' -o "$work/chat.sse" --data-binary \
	'{"model":"sim-1","messages":[{"role":"user","content":"Tell me about the fleet."}],"seed":7,"max_tokens":16,"stream":true}' \
	"$base/v1/chat/completions"
grep -q 'transcript.text.done' "$work/tr.sse" && during=no || during=yes
chat_s=$(since "$t1")
wait "$trpid"
tr_s=$(since "$t0")
python3 - "$work/tr.sse" "$work/want.long" "$(cut -d' ' -f1 "$work/want.long.meta")" >"$work/out" 2>&1 <<'PY'
import json, sys
events = [json.loads(l[6:]) for l in open(sys.argv[1], encoding="utf-8") if l.startswith("data: ")]
want = open(sys.argv[2], encoding="utf-8").read()
deltas = [e["delta"] for e in events if e["type"] == "transcript.text.delta"]
assert len(deltas) == int(sys.argv[3]), (len(deltas), sys.argv[3])
assert "".join(deltas) == want, "deltas differ"
assert events[-1] == {"type": "transcript.text.done", "text": want}, "no done event"
PY
r=$?
[ "$(sse_text "$work/chat.sse")" = "$(cat "$work/want")" ] || r=1
[ "$(reconnects)" = 0 ] || r=1
# The chat must end while the transcription still streams (an order, not a time): that is what
# "beside it" means; one that ended after checked nothing of the two interleaving (issue 32:
# this was printed, never checked).
[ "$during" = yes ] || r=1
check "a transcription of $(cut -d' ' -f1 "$work/want.long.meta") segments and a streamed chat beside it: both as the engine says, the link kept, the chat ended first ($during; it took $chat_s s, the transcription $tr_s s)" $r

# ---- the link drops in the middle of a large transfer ----
mkwav "$work/mid.wav" $((64 << 20))
"$transcribe" <"$work/mid.wav" >"$work/want.mid" 2>/dev/null
sent=$(metric superfluid_blobs_sent_total)
curl -sS -o "$work/mid.out" -w '%{http_code}' -F "file=@$work/mid.wav" -F model=sim-1 \
	-F response_format=text "$base/v1/audio/transcriptions" >"$work/mid.status" &
mpid=$!
for _ in $(seq 400); do ls -a "$work/blobs-n1" | grep -q '^\.partial-' && break; sleep 0.01; done
ls -a "$work/blobs-n1" | grep -q '^\.partial-'; partial=$?
kill -STOP "$npid"
sleep "$(python3 -c "print(1.6 * $slow)")"
kill -CONT "$npid"
wait "$mpid"
r=0; [ "$partial" = 0 ] && [ "$(cat "$work/mid.status")" = 200 ] && cmp -s "$work/mid.out" "$work/want.mid" &&
	[ "$(reconnects)" -ge 1 ] && [ "$(metric superfluid_blobs_sent_total)" = $((sent + 1)) ] || r=1
check "the link dropped mid-transfer: the blob went again, whole, on the new link and the request was answered" $r

# ---- a client gone in the middle of a large transfer ----
mkwav "$work/gone.wav" $((64 << 20))
gone=$(metric 'superfluid_state_ops_total{result="cancelled"}')
curl -sS -o /dev/null -F "file=@$work/gone.wav" -F model=sim-1 "$base/v1/audio/transcriptions" &
gpid=$!
for _ in $(seq 400); do ls -a "$work/blobs-n1" | grep -q '^\.partial-' && break; sleep 0.005; done
kill "$gpid" 2>/dev/null
wait "$gpid" 2>/dev/null
for _ in $(seq 100); do
	[ "$(metric 'superfluid_state_ops_total{result="cancelled"}')" = $((gone + 1)) ] && break
	sleep 0.05
done
r=0; [ "$(metric 'superfluid_state_ops_total{result="cancelled"}')" = $((gone + 1)) ] || r=1
form "$work/big.wav" model=sim-1 response_format=text
[ "$status" = 200 ] && cmp -s "$work/out" "$work/want.big" || r=1
# Cut short unless it had gone whole before the head saw the client leave (told, not checked).
[ -e "$work/blobs-n1/$(sha256sum "$work/gone.wav" | cut -d' ' -f1)" ] && kept=yes || kept=no
cuts=$(metric superfluid_blobs_cut_total)
[ "$kept" = yes ] || [ "${cuts:-0}" -ge 1 ] || r=1 # a blob the node does not have was cut short
check "a client gone mid-transfer: its request dropped, and the next one answered (the node kept its blob: $kept; transfers cut short: ${cuts:-?})" $r

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
