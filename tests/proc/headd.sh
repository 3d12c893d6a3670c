#!/usr/bin/env bash
# Real processes on loopback: two superfluid-noded, one superfluid-headd dialing both, and
# the superfluid CLI on the head's admin socket. Status, generations (deterministic), a
# wrong fleet token, a node killed with -9, SIGTERM.
# Usage: headd.sh PATH_TO_superfluid-noded PATH_TO_superfluid-headd PATH_TO_superfluid
# (KEEP=DIR keeps the work folder there, for a look at the logs.)
set -uo pipefail
noded=$1
headd=$2
cli=$3
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; [ -n "${KEEP:-}" ] && cp -r "$work" "$KEEP"; rm -rf "$work"; }
trap cleanup EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); echo "ok   $1"; }
fail() { fails=$((fails + 1)); echo "FAIL $1"; sed 's/^/     | /' "$work/out" "$work/err" "$work/head.err" 2>/dev/null; }
check() { if [ "$2" = 0 ]; then ok "$1"; else fail "$1"; fi; }

(umask 077; echo "fleet-token" >"$work/tok"; echo "other-token" >"$work/wrong")
sock="$work/headd.sock"

# Starts a node on a free port: sets $port and $npid.
start_node() { # name [more options]
	: >"$work/$1.err" # emptied before: a restart's wait read the last run's port
	"$noded" --listen 127.0.0.1:0 --blob-dir "$work/blobs-$1" --auth-file "$work/tok" \
		--identity "$1" "${@:2}" 2>"$work/$1.err" &
	npid=$!; pids+=("$npid")
	for _ in $(seq 100); do
		port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/$1.err" | head -1)
		[ -n "$port" ] && return 0
		sleep 0.05
	done
	echo "     | node $1 did not start"; return 1
}
start_head() { # token file [more options]
	: >"$work/head.err"
	"$headd" --fleet "127.0.0.1:$p1,127.0.0.1:$p2" --fleet-auth "$1" --admin-socket "$sock" --listen-http 127.0.0.1:0 \
		"${@:2}" 2>"$work/head.err" &
	hpid=$!; pids+=("$hpid")
	for _ in $(seq 100); do [ -S "$sock" ] && return 0; sleep 0.05; done
	echo "     | the head did not make its admin socket"; return 1
}
cli() { "$cli" "$@" >"$work/out" 2>"$work/err"; echo $? >"$work/rc"; }
rc() { cat "$work/rc"; }
wait_up() { # count of nodes up, within 5 s
	for _ in $(seq 100); do
		cli status --admin-socket "$sock"
		[ "$(grep -c ' up ' "$work/out")" = "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

# ---- usage ----
"$headd" --help >"$work/out" 2>"$work/err"; r=$?
for o in fleet fleet-auth fleet-listen admin-socket config io replace-after-ms silence-ms help version GENERATE STATUS; do
	grep -qF -- "$o" "$work/out" || { echo "     | --help lacks $o"; r=1; }
done
check "superfluid-headd --help documents its options and the admin protocol" $r
"$headd" >"$work/out" 2>"$work/err"; r=$?
[ "$r" = 1 ] && r=0 &&  grep -qF "needs --fleet" "$work/err" || r=1
check "no --fleet is a usage error" $r
cli generate --admin-socket "$work/nothing.sock" hello
r=0; [ "$(rc)" = 3 ] && grep -qF "$work/nothing.sock" "$work/err" && grep -qF "is superfluid-headd running?" "$work/err" || r=1
check "the CLI says which socket when no head answers (exit 3)" $r
cli generate --help; check "superfluid generate --help" "$(rc)"
cli status --help; check "superfluid status --help" "$(rc)"

start_node n1 && p1=$port && n1pid=$npid
start_node n2 && p2=$port && n2pid=$npid

# ---- a wrong token ----
start_head "$work/wrong"
sleep 0.5
r=0
for p in "$p1" "$p2"; do
	grep -qF "node 127.0.0.1:$p: refused the fleet token: --fleet-auth and the node's --auth-file differ" \
		"$work/head.err" || r=1
done
check "a wrong --fleet-auth logs the operator sentence for each node" $r
cli generate --admin-socket "$sock" --model sim-1 --max-tokens 20 hello
r=0; [ "$(rc)" = 2 ] && grep -qF "no node serves model sim-1" "$work/err" || r=1
check "with no node up, generate gets the head's error (exit 2)" $r
kill -TERM "$hpid"; wait "$hpid"
check "SIGTERM with no node up exits 0" $?

# ---- the right token ----
start_head "$work/tok"
wait_up 2
r=$?; grep -qF "identity=n1" "$work/out" && grep -qF "identity=n2" "$work/out" || r=1
check "superfluid status shows both nodes up" $r
cli generate --admin-socket "$sock" --model sim-1 --max-tokens 20 "hello"
r=0; [ "$(rc)" = 0 ] && [ -s "$work/out" ] && [ "$(wc -c <"$work/out")" -le 20 ] || r=1
check "generate prints at most 20 bytes and exits 0" $r
cp "$work/out" "$work/first"
cli generate --admin-socket "$sock" --model sim-1 --max-tokens 20 "hello"
r=0; [ "$(rc)" = 0 ] && cmp -s "$work/out" "$work/first" || r=1
check "the same prompt twice gives the same text" $r
cli generate --admin-socket "$sock" --model nope --max-tokens 5 "hello"
r=0; [ "$(rc)" = 2 ] && grep -qF "no node serves model nope" "$work/err" || r=1
check "an unknown model is an error (exit 2)" $r

# ---- a client that goes away cancels its generation ----
"$cli" generate --admin-socket "$sock" --model sim-1 --max-tokens 100000 "long" >/dev/null 2>&1 &
cpid=$!; sleep 0.2; kill -9 "$cpid" 2>/dev/null; wait "$cpid" 2>/dev/null
sleep 0.2
cli generate --admin-socket "$sock" --model sim-1 --max-tokens 20 "hello"
r=0; [ "$(rc)" = 0 ] && cmp -s "$work/out" "$work/first" || r=1
check "after a client went away mid-stream the head still serves" $r

# ---- kill -9 one node ----
kill -9 "$n1pid"; wait "$n1pid" 2>/dev/null
wait_up 1
check "status shows one node down after kill -9" $?
cli generate --admin-socket "$sock" --model sim-1 --max-tokens 20 "hello"
r=0; [ "$(rc)" = 0 ] && cmp -s "$work/out" "$work/first" || r=1
check "generate still works on the other node" $r
wait_log() { # text expected in the file within 3 s
	for _ in $(seq 60); do grep -qF -- "$1" "$2" && return 0; sleep 0.05; done; return 1
}
wait_log "node 127.0.0.1:$p1: unreachable (Connection refused); dialing again in" "$work/head.err"
check "the lost node is redialed, one line per failure" $?

# ---- kill -9 the node a stream runs on, mid-stream ----
# Paced nodes (50 tokens/s) and a head that gives a dead node 300 ms: the stream goes on from
# what the client had, on the other node, and the client's text is the undisturbed one.
start_node n3 --sim-tokens-per-s 50 && p3=$port && n3pid=$npid
start_node n4 --sim-tokens-per-s 50 && p4=$port && n4pid=$npid
sock2="$work/headd2.sock"
# A head on two paced nodes; prints the pid. $1: its socket, the rest: more options.
start_head2() {
	"$headd" --fleet "127.0.0.1:$p3,127.0.0.1:$p4" --fleet-auth "$work/tok" --admin-socket "$1" --listen-http 127.0.0.1:0 \
		"${@:2}" 2>"$work/$(basename "$1").err" &
	h2pid=$!; pids+=("$h2pid")
	for _ in $(seq 100); do "$cli" status --admin-socket "$1" 2>/dev/null | grep -c ' up ' | grep -qx 2 && return 0; sleep 0.05; done
	return 1
}
# Starts a 60-token stream on $1 in the background, finds the node it runs on: $victim.
stream_and_find() {
	"$cli" generate --admin-socket "$1" --model sim-1 --max-tokens 60 "keep going" >"$work/out" 2>"$work/err" &
	gpid=$!
	sleep 0.4
	victim=
	for _ in $(seq 40); do
		line=$("$cli" status --admin-socket "$1" 2>/dev/null | grep 'sessions=1' | head -1)
		case "$line" in *":$p3 "*) victim=$n3pid ;; *":$p4 "*) victim=$n4pid ;; esac
		[ -n "$victim" ] && return 0
		sleep 0.05
	done
	return 1
}
start_head2 "$sock2" --replace-after-ms 300
"$cli" generate --admin-socket "$sock2" --model sim-1 --max-tokens 60 "keep going" >"$work/whole" 2>"$work/err"
stream_and_find "$sock2" && kill -9 "$victim"
wait "$gpid"; r=$?
[ -n "$victim" ] && [ "$r" = 0 ] && [ -s "$work/whole" ] && cmp -s "$work/out" "$work/whole" || r=1
check "a node killed mid-stream: the stream completes on the other, no token lost or repeated" $r
kill -TERM "$h2pid" 2>/dev/null; wait "$h2pid" 2>/dev/null

# ---- SIGSTOP the node a stream runs on, past the silence limit, then SIGCONT ----
[ "$victim" = "$n3pid" ] && { start_node n5 --sim-tokens-per-s 50 && p3=$port && n3pid=$npid; }
[ "$victim" = "$n4pid" ] && { start_node n5 --sim-tokens-per-s 50 && p4=$port && n4pid=$npid; }
sock3="$work/headd3.sock"
start_head2 "$sock3" --replace-after-ms 300 --silence-ms 600 --heartbeat-ms 150
stream_and_find "$sock3" && kill -STOP "$victim"
wait "$gpid"; r=$?
[ -n "$victim" ] && [ "$r" = 0 ] && cmp -s "$work/out" "$work/whole" || r=1
grep -qF "silence limit" "$work/headd3.sock.err" || r=1
check "a node stopped past the silence limit: the stream completes on the other" $r
kill -CONT "$victim" 2>/dev/null
for _ in $(seq 100); do "$cli" status --admin-socket "$sock3" 2>/dev/null | grep -c ' up ' | grep -qx 2 && break; sleep 0.05; done
"$cli" status --admin-socket "$sock3" 2>/dev/null | grep -c ' up ' | grep -qx 2
check "the continued node is linked again" $?
kill -TERM "$h2pid" 2>/dev/null; wait "$h2pid" 2>/dev/null

# ---- nodes that dial in (--fleet-listen, noded --join) ----
sock4="$work/headd4.sock"
jport=$((10000 + ($$ + 7) % 20000))
"$headd" --fleet-listen "127.0.0.1:$jport" --fleet-auth "$work/tok" --admin-socket "$sock4" --listen-http 127.0.0.1:0 \
	2>"$work/head4.err" &
h4pid=$!; pids+=("$h4pid")
for _ in $(seq 100); do [ -S "$sock4" ] && break; sleep 0.05; done
join_node() {
	"$noded" --join "127.0.0.1:$jport" --auth-file "$work/tok" --identity joiner \
		--blob-dir "$work/blobs-j" 2>>"$work/joiner.err" &
	jpid=$!; pids+=("$jpid")
}
joined_up() { # count of lines "joiner (joined) up", within 5 s
	for _ in $(seq 100); do
		[ "$("$cli" status --admin-socket "$sock4" 2>/dev/null | grep -c '^joiner (joined) up')" = "$1" ] && return 0
		sleep 0.05
	done
	return 1
}
join_node
joined_up 1
check "a node that dials in is placed in the head by its identity" $?
cli generate --admin-socket "$sock4" --model sim-1 --max-tokens 20 "hello"
r=0; [ "$(rc)" = 0 ] && cmp -s "$work/out" "$work/first" || r=1
check "generate works through a node that dialed in" $r
kill -9 "$jpid"; wait "$jpid" 2>/dev/null
wait_log "waiting for it to join again" "$work/head4.err"
check "a joined node's dropped link is waited for, not dialed" $?
join_node
joined_up 1 && [ "$("$cli" status --admin-socket "$sock4" | grep -c .)" = 1 ]
check "the same node joining again takes its old place (one node, up)" $?
kill -TERM "$h4pid" 2>/dev/null; wait "$h4pid" 2>/dev/null

# ---- SIGTERM ----
kill -TERM "$hpid"; wait "$hpid"; r=$?
grep -qF "superfluid-headd: stopped" "$work/head.err" || r=1
[ -e "$sock" ] && r=1
check "SIGTERM says goodbye, removes the socket, exits 0" $r
wait_log "head shutting down" "$work/n2.err"
check "the node sees the head's goodbye" $?

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
