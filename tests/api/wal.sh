#!/usr/bin/env bash
# The durable head (--wal-dir): many streaming completions on two paced nodes; the head is
# killed (SIGKILL) in the middle of them and started again on the same log and port. Each
# client asks for the rest of its stream (GET /v1/completions/{id}, or /v1/chat/completions/
# {id} for the chat ones, Last-Event-ID) and its whole text must equal the simulated engine's:
# every token it had, none twice, none lost.
# The CLI's generate --stream and chat ask for the rest themselves. A named session made
# before the crash keeps its content and takes its next turn after it.
# Then, in --wal-sync batch, the same once more. Last, the log is cut and corrupted at
# random offsets: the head either starts (a torn tail cut with a log line) or refuses with a
# message naming the file and offset, and never crashes.
# Usage: wal.sh NODED HEADD SIM_EXPECT CLI [STREAMS]   (KEEP=DIR keeps the work folder)
set -uo pipefail
noded=$1 headd=$2 expect=$3 cli=$4 streams=${5:-16}
. "$(dirname "$0")/lib.sh"
client="$(dirname "$0")/resume_client.py"
max=200

# Every fourth stream is a chat completion, resumed with GET /v1/chat/completions/{id}: its
# text is the engine's after the sim model's ChatML of one user message.
chat_of() { [ $(($1 % 4)) = 0 ]; }
for i in $(seq "$streams"); do
	if chat_of "$i"; then chat_prompt "story $i"; else printf 'story %s' "$i"; fi |
		"$expect" --seed "$i" --max-tokens $max >"$work/want.$i" 2>/dev/null
done
# The streams (65 to 173 tokens, 3 to 9 s at 20 a second) all start at once: on a loaded
# machine starting 20 clients takes seconds, and the test needs most of them still running
# when the head dies.
for i in 1 2 3 4; do printf 'tale %s' "$i" | "$expect" --seed "$i" --max-tokens 300 >"$work/want.cli.$i" 2>/dev/null; done
# and `superfluid chat`'s one turn (148 tokens), which asks for the rest of its reply itself too
{ chat_prompt 'tale chat' | "$expect" --seed 6 --max-tokens 300; echo; } >"$work/want.chat" 2>/dev/null

start_node a --sim-tokens-per-s 20 && pa=$port
start_node b --sim-tokens-per-s 20 && pb=$port
fleet=127.0.0.1:$pa,127.0.0.1:$pb

# whead NAME SYNC [PORT]: a head on the log in $work/wal-SYNC; $hport, $hpid.
whead() {
	start_head "$1" "$fleet" --wal-dir "$work/wal-$2" --wal-sync "$2" --wal-segment-mb 1 \
		${3:+--listen-http 127.0.0.1:$3} || return 1
	base=http://127.0.0.1:$hport
	wait_health
}

crash_run() { # SYNC: streams, a SIGKILL in their middle, a restart, every stream checked
	local sync=$1
	whead "h-$sync" "$sync" || { fail "[$sync] the head starts on an empty log"; return; }
	local p=$hport
	cpids=() gpids=() # four through the CLI, which asks for the rest itself; the others by hand
	for i in 1 2 3 4; do
		"$cli" generate --head "http://127.0.0.1:$p" --model sim-1 --stream --seed "$i" \
			--max-tokens 300 "tale $i" >"$work/cli.$sync.$i" 2>"$work/clierr.$sync.$i" &
		cpids+=($!)
	done
	echo 'tale chat' | "$cli" chat --head "http://127.0.0.1:$p" --model sim-1 --seed 6 \
		--max-tokens 300 --session "walchat-$sync" >"$work/chat.$sync" 2>"$work/chaterr.$sync" &
	local chatpid=$!
	for i in $(seq "$streams"); do
		python3 "$client" "$p" "story $i" "$i" $max --out "$work/got.$sync.$i" --wait 30 \
			$(chat_of "$i" && echo --chat) \
			>"$work/res.$sync.$i" 2>"$work/cerr.$sync.$i" &
		gpids+=($!)
	done
	for _ in $(seq 200); do # until every stream has had a few events, each CLI printed some
		n=$(ls "$work"/got.$sync.*.started 2>/dev/null | wc -l)
		for i in 1 2 3 4; do [ -s "$work/cli.$sync.$i" ] && n=$((n + 1)); done
		[ -s "$work/chat.$sync" ] && n=$((n + 1))
		[ "$n" -ge $((streams + 5)) ] && break
		sleep 0.05
	done
	kill -9 "$hpid"; wait "$hpid" 2>/dev/null
	sleep 0.3
	whead "h2-$sync" "$sync" "$p" || { fail "[$sync] the head starts again on its log"; return; }
	grep -q "wal: .*replayed [1-9][0-9]* records" "$work/h2-$sync.err"
	check "[$sync] the restarted head replays its log" $?
	local bad=0 resumed=0
	for k in "${!gpids[@]}"; do
		i=$((k + 1))
		wait "${gpids[$k]}"; rc=$?
		if [ "$rc" != 0 ] || ! cmp -s "$work/got.$sync.$i" "$work/want.$i"; then
			[ "$bad" -lt 3 ] && { echo "     | stream $i: exit $rc $(cat "$work/cerr.$sync.$i" | tail -1)"
				echo "     |   got:  $(head -c 100 "$work/got.$sync.$i")"; echo "     |   want: $(head -c 100 "$work/want.$i")"; }
			bad=$((bad + 1))
		fi
		grep -q "resumed=[1-9]" "$work/res.$sync.$i" && ! grep -q "after=0$" "$work/res.$sync.$i" &&
			resumed=$((resumed + 1))
	done
	local cbad=0 cres=0
	for k in "${!cpids[@]}"; do
		i=$((k + 1))
		wait "${cpids[$k]}"; rc=$?
		if [ "$rc" != 0 ] || ! cmp -s "$work/cli.$sync.$i" "$work/want.cli.$i"; then
			echo "     | CLI stream $i: exit $rc:"; tail -4 "$work/clierr.$sync.$i" | sed "s/^/     |   /"; cbad=$((cbad + 1))
		fi
		grep -q "asking the head for the rest" "$work/clierr.$sync.$i" && cres=$((cres + 1))
	done
	[ "$cbad" = 0 ] && [ "$cres" -ge 1 ]
	check "[$sync] superfluid generate --stream asks for the rest itself ($cres of 4 did) and prints the engine's text" $?
	wait "$chatpid"; rc=$?
	r=0
	[ "$rc" = 0 ] && cmp -s "$work/chat.$sync" "$work/want.chat" &&
		grep -q "asking the head for the rest" "$work/chaterr.$sync" || r=1
	[ $r = 0 ] || { echo "     | chat: exit $rc:"; tail -3 "$work/chaterr.$sync" | sed 's/^/     |   /'; }
	check "[$sync] superfluid chat asks for the rest of its reply itself and prints the engine's text" $r
	echo "     | $resumed of $streams streams came back after the restart from a token they had"
	[ "$bad" = 0 ] && [ "$resumed" -ge $((streams / 2)) ]
	check "[$sync] SIGKILL of the head mid-stream: every client gets the rest after the restart, each text equal to the engine's" $?
	kill "$hpid"; wait "$hpid" 2>/dev/null
}

crash_run always

# A named session across a crash: one turn before, its content back after, a second turn.
whead h3 always || fail "head h3"
p3=$hport
req POST /v1/completions '{"model":"sim-1","prompt":"tell me","max_tokens":12,"seed":5}' -H 'X-Superfluid-Session: chat-a'
t1=$(j "$work/out" 'd["choices"][0]["text"]')
req GET /v1/sessions/chat-a; tok1=$(j "$work/out" 'd["tokens"]')
kill -9 "$hpid"; wait "$hpid" 2>/dev/null
whead h4 always "$p3" || fail "head h4"
req GET /v1/sessions/chat-a
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["tokens"]')" = "$tok1" ] && [ "$(j "$work/out" 'd["turns"]')" = 1 ] || r=1
check "a named session comes back after a SIGKILL with its content ($tok1 tokens) and turns" $r
req POST /v1/completions '{"model":"sim-1","prompt":" and then?","max_tokens":12,"seed":5}' -H 'X-Superfluid-Session: chat-a'
r=0; [ "$status" = 200 ] || r=1
req GET /v1/sessions/chat-a
[ "$(j "$work/out" 'd["turns"]')" = 2 ] && [ "$(j "$work/out" 'd["tokens"]')" -gt "$tok1" ] || r=1
check "its next turn after the restart appends to it" $r
kill "$hpid"; wait "$hpid" 2>/dev/null

crash_run batch

# Checkpoints under load: 1 MiB segments, a few MiB of records; old segments go, the disk use
# stays bounded, a named session made before them survives them and a SIGKILL.
start_node c && pc=$port
start_head h5 127.0.0.1:$pc --wal-dir "$work/wal-ck" --wal-segment-mb 1 && base=http://127.0.0.1:$hport
p5=$hport
wait_health
req POST /v1/completions '{"model":"sim-1","prompt":"keep me","max_tokens":12,"seed":9}' -H 'X-Superfluid-Session: kept'
req GET /v1/sessions/kept; tok5=$(j "$work/out" 'd["tokens"]')
seq 240 | xargs -P 4 -I{} curl -sS -o /dev/null -H 'Content-Type: application/json' \
	-d '{"model":"sim-1","prompt":"long {}","max_tokens":3000,"seed":{}}' "$base/v1/completions"
req GET /metrics
m() { sed -n "s/^$1 //p" "$work/out"; }
ck=$(m superfluid_wal_checkpoints_total) segs=$(m superfluid_wal_segments) disk=$(m superfluid_wal_disk_bytes)
written=$(m superfluid_wal_bytes_written_total)
echo "     | wrote $written bytes: $ck checkpoints, $segs segments, $disk bytes on disk"
r=0; [ "${ck:-0}" -ge 2 ] && [ "${segs:-9}" -le 3 ] && [ "${disk:-0}" -lt $((3 << 20)) ] && [ "${written:-0}" -gt $((1 << 20)) ] || r=1
check "checkpoints let old segments go: the log's disk use stays bounded under load" $r
kill -9 "$hpid"; wait "$hpid" 2>/dev/null
start_head h6 127.0.0.1:$pc --wal-dir "$work/wal-ck" --wal-segment-mb 1 --listen-http 127.0.0.1:$p5 && base=http://127.0.0.1:$hport
wait_health
req GET /v1/sessions/kept
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["tokens"]')" = "$tok5" ] || r=1
check "a named session survives checkpoints and a SIGKILL" $r
kill "$hpid"; wait "$hpid" 2>/dev/null

# ---- damaged logs: the head never crashes on one ----
# (A head of several shards keeps a log per shard, in shard-N directories: any may be hit.)
python3 - "$work/wal-always" "$work/damaged" <<'EOF'
import os, random, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
rng = random.Random(7)
for k in range(24):
    d = "%s/%02d" % (dst, k)
    shutil.copytree(src, d)
    segs = sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs if f.endswith(".log"))
    f = rng.choice(segs)
    size = os.path.getsize(f)
    with open(f, "r+b") as fh:
        if k % 2 == 0:   # cut at a random offset
            fh.truncate(rng.randrange(0, size))
        else:            # flip a random byte
            at = rng.randrange(0, size)
            fh.seek(at); b = fh.read(1); fh.seek(at); fh.write(bytes([b[0] ^ 0x5a]))
EOF
crashed=0 started=0 refused=0 unclear=0
for d in "$work"/damaged/*; do
	k=$(basename "$d")
	"$headd" --fleet "$fleet" --admin-socket "$work/d$k.sock" --listen-http 127.0.0.1:0 \
		${HEADD_SHARDS:+--shards "$HEADD_SHARDS"} --wal-dir "$d" 2>"$work/d$k.err" &
	dp=$!
	for _ in $(seq 60); do
		kill -0 "$dp" 2>/dev/null || break
		grep -q "client API on" "$work/d$k.err" && break
		sleep 0.05
	done
	if kill -0 "$dp" 2>/dev/null; then
		started=$((started + 1)); kill "$dp"; wait "$dp"; rc=$?
		[ "$rc" = 0 ] || crashed=$((crashed + 1))
	else
		wait "$dp"; rc=$?
		if [ "$rc" = 2 ] && grep -q "does not read: .*wal-[0-9a-f]*\.log.*\(offset\|magic\|header\|format version\)" "$work/d$k.err"; then
			refused=$((refused + 1))
		elif [ "$rc" -ge 128 ]; then
			crashed=$((crashed + 1)); echo "     | damaged log $k: the head died of signal $((rc - 128))"
		else
			unclear=$((unclear + 1)); echo "     | damaged log $k: exit $rc: $(tail -1 "$work/d$k.err")"
		fi
	fi
	grep -qs "AddressSanitizer\|runtime error" "$work/d$k.err" && crashed=$((crashed + 1))
done
echo "     | 24 damaged logs: $started started, $refused refused naming the file, $unclear other"
[ "$crashed" = 0 ] && [ "$unclear" = 0 ] && [ "$started" -gt 0 ] && [ "$refused" -gt 0 ]
check "damaged logs (cut or flipped at random offsets): the head starts or refuses naming the file (and offset), never crashes" $?

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
