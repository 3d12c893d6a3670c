#!/usr/bin/env bash
# A node of a GGUF fleet killed mid-stream: 12 concurrent streams (the superfluid CLI, one
# process a stream; half greedy, half seeded at temperature 0.9) on two superfluid-noded
# --model FILE. Undisturbed, two of them are checked against the engine computing alone
# (superfluid model run); then the same 12 again with the node carrying most of them
# SIGKILLed once every stream has tokens: every stream completes on the other node, byte for
# byte the undisturbed run's (the engine's draws are a function of seed and position, its
# logits the same in any batch), none lost or repeated. Then a Qwen3.5 node (test-qwen35:
# Gated DeltaNet layers, a recurrent state a session) alone, SIGKILLed with a greedy and a
# seeded stream mid-way and started again on its port: the head gives it each session's text
# so far again, its state is computed anew from it, and each stream goes on to the engine's
# own text, byte for byte.
# Usage: gguf_faults.sh NODED HEADD CLI SOURCE_DIR [STREAMS]   (exit 77: no llama.cpp
# vocabulary; KEEP=DIR keeps the work folder)
set -uo pipefail
noded=$1 headd=$2 cli=$3 src=$4 streams=${5:-12}
. "$(dirname "$0")/lib.sh"
unset SUPERFLUID_HEAD SUPERFLUID_API_KEY
gguf_vocab "$src"
max=80

M=$work/qwen2.gguf
gguf_make "$M" qwen2 test-qwen2 q8_0
sampling() { # stream i's sampling options
	if [ $(($1 % 2)) = 0 ]; then echo "--temperature 0.9 --seed $1"; else echo "--temperature 0"; fi
}
launch() { # every stream in the background, prompt "story i": their pids in $gpids
	gpids=()
	for i in $(seq "$streams"); do
		"$cli" generate --head "$base" --stream $(sampling "$i") --max-tokens $max \
			"story $i" >"$work/$1.$i" 2>"$work/$1.err.$i" &
		gpids+=($!)
	done
}
# settle NAME RUN: waits for every stream of RUN; each must exit 0 and, but for the
# undisturbed run itself, equal the undisturbed one.
settle() {
	local bad=0 rc
	for k in "${!gpids[@]}"; do
		i=$((k + 1))
		wait "${gpids[$k]}"; rc=$?
		if [ "$rc" != 0 ] || { [ "$2" != calm ] && ! cmp -s "$work/$2.$i" "$work/calm.$i"; }; then
			[ "$bad" -lt 3 ] && { echo "     | stream $i: exit $rc"; sed 's/^/     |   /' "$work/$2.err.$i" | head -3
				echo "     |   got:  $(head -c 100 "$work/$2.$i")"; echo "     |   want: $(head -c 100 "$work/calm.$i")"; }
			bad=$((bad + 1))
		fi
	done
	[ "$bad" = 0 ] || echo "     | $bad of $streams streams failed or differ"
	check "$1" $bad
}

start_gguf_node a "$M" --threads 1 && pa=$port && na=$npid
start_gguf_node b "$M" --threads 1 && pb=$port && nb=$npid
start_head head "127.0.0.1:$pa,127.0.0.1:$pb" --replace-after-ms 300
base="http://127.0.0.1:$hport"
nodes_up 2
check "two nodes on one GGUF model are up" $?

# ---- undisturbed ----
launch calm
settle "$streams concurrent streams, undisturbed" calm
r=0
for i in 1 2; do
	engine_says "$work/want" "$M" --prompt "story $i" --n $max $(sampling "$i")
	cmp -s "$work/calm.$i" "$work/want" || { r=1; echo "     | stream $i: $(head -c 80 "$work/calm.$i")"; echo "     | engine:   $(head -c 80 "$work/want")"; }
done
check "  ... a greedy and a seeded one are the engine's own text" $r

# ---- the busiest node killed once every stream has tokens ----
launch kill
for _ in $(seq 600); do
	n=0; for i in $(seq "$streams"); do [ -s "$work/kill.$i" ] && n=$((n + 1)); done
	[ "$n" = "$streams" ] && break
	sleep 0.02
done
"$cli" status --head "$base" >"$work/status"
sa=$(grep ":$pa " "$work/status" | sed 's/.*sessions=//'); sb=$(grep ":$pb " "$work/status" | sed 's/.*sessions=//')
if [ "${sa:-0}" -ge "${sb:-0}" ]; then victim=$na vname=a vs=$sa; else victim=$nb vname=b vs=$sb; fi
kill -9 "$victim"
mid=0 # streams not yet done when the node died (told; the check below is what must hold)
for i in $(seq "$streams"); do
	[ "$(stat -c %s "$work/kill.$i")" -lt "$(stat -c %s "$work/calm.$i")" ] && mid=$((mid + 1))
done
settle "node $vname (sessions=${vs:-?}) killed with $mid of $streams streams mid-way: every stream completes, each the undisturbed run's bytes" kill
r=0; [ "$mid" -ge $((streams / 4)) ] || r=1
check "  ... the kill did come mid-stream ($mid streams unfinished at the kill)" $r
grep -q "127.0.0.1:$( [ "$vname" = a ] && echo "$pa" || echo "$pb").*\(closed\|down\)" "$work/head.err"
check "  ... the head saw node $vname go" $?

kill -TERM "$hpid" 2>/dev/null

# ---- Qwen3.5 alone, killed mid-stream and started again on its port ----
Q=$work/qwen35.gguf
gguf_make "$Q" qwen35 test-qwen35 q8_0
qmax=240
start_gguf_node q "$Q" --threads 1 && pq=$port && nq=$npid
start_head qhead "127.0.0.1:$pq" --replace-after-ms 60000
base="http://127.0.0.1:$hport"
nodes_up 1
check "a Qwen3.5 node is up" $?
qpids=()
for i in 1 2; do
	"$cli" generate --head "$base" --stream $(sampling "$i") --max-tokens $qmax "story $i" \
		>"$work/q.$i" 2>"$work/q.err.$i" &
	qpids+=($!)
done
for _ in $(seq 600); do [ -s "$work/q.1" ] && [ -s "$work/q.2" ] && break; sleep 0.02; done
kill -9 "$nq"; wait "$nq" 2>/dev/null
at1=$(stat -c %s "$work/q.1") at2=$(stat -c %s "$work/q.2")
noded_again "$work/q2.err" 1200 --listen "127.0.0.1:$pq" --blob-dir "$work/blobs-q2" --identity q2 \
	--model "$Q" --threads 1
r=0 mid=0
for i in 1 2; do
	wait "${qpids[$((i - 1))]}" || { r=1; sed 's/^/     |   /' "$work/q.err.$i" | head -3; }
	engine_says "$work/want" "$Q" --prompt "story $i" --n $qmax $(sampling "$i")
	cmp -s "$work/q.$i" "$work/want" || { r=1; echo "     | stream $i: $(head -c 80 "$work/q.$i")"; echo "     | engine:   $(head -c 80 "$work/want")"; }
	at=$([ "$i" = 1 ] && echo "$at1" || echo "$at2")
	[ "$at" -lt "$(stat -c %s "$work/want")" ] && mid=$((mid + 1))
done
check "Qwen3.5's node SIGKILLed mid-stream and started again: a greedy and a seeded stream go on to the engine's own text" $r
r=0; [ "$mid" = 2 ] || r=1
check "  ... the kill did come mid-stream ($at1 and $at2 bytes of each at the kill)" $r

kill -TERM "${pids[@]}" 2>/dev/null; sleep 0.3
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
