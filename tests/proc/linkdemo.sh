#!/usr/bin/env bash
# Real processes on loopback: superfluid-linkdemo's node and head over TCP, every handshake
# outcome with its operator sentence. Usage: linkdemo.sh PATH_TO_superfluid-linkdemo
set -uo pipefail
bin=$1
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"; }
trap cleanup EXIT
fails=0 passes=0
port=$((10000 + $$ % 20000)) # below the ephemeral range (32768+), where others bind

next_port() { port=$((port + 1)); }
wait_listen() {
	local hex; hex=$(printf '%04X' "$1")
	for _ in $(seq 400); do # 20 s: python3 starts slowly on a loaded machine
		grep -q ":$hex 00000000:0000 0A" /proc/net/tcp && return 0
		sleep 0.05
	done
	echo "nothing listens on $1"; return 1
}
check() { # name, condition result
	if [ "$2" = 0 ]; then passes=$((passes + 1)); echo "ok   $1"
	else fails=$((fails + 1)); echo "FAIL $1"; sed 's/^/     | /' "$work/out" "$work/err" 2>/dev/null; fi
}
node() { "$bin" node --listen "127.0.0.1:$port" "$@" 2>"$work/node.err" & pids+=($!); wait_listen "$port"; }
head_run() { "$bin" head --connect "127.0.0.1:$port" "$@" >"$work/out" 2>"$work/err"; echo $? >"$work/rc"; }
expect() { # name, rc, text expected on stderr (or "" for none), text expected on stdout (or "")
	local ok=0
	[ "$(cat "$work/rc")" = "$2" ] || ok=1
	[ -z "$3" ] || grep -qF -- "$3" "$work/err" || ok=1
	[ -z "${4:-}" ] || grep -qxF -- "$4" "$work/out" || ok=1
	check "$1" "$ok"
}

(umask 077; echo "token-one" >"$work/t1"; echo "token-two" >"$work/t2")

next_port; node --auth-file "$work/t1"
head_run --fleet-auth "$work/t1"
expect "sealed link generates the expected stream" 0 "sealed link, protocol 3" "imzsbheojusgjive"
head_run --fleet-auth "$work/t2"
expect "wrong token is refused" 2 \
	"node 127.0.0.1:$port: refused the fleet token: --fleet-auth and the node's --auth-file differ"
head_run
expect "head without a token, node with one" 2 \
	"wants a sealed link (it has --auth-file) but this head has no --fleet-auth"
grep -qF "offered a fleet token that differs from this node's --auth-file" "$work/node.err"
check "node names the wrong token too" $?

next_port; node
head_run --prompt "abc" --max-tokens 5
expect "plain link generates" 0 "plain link, protocol 3"
head_run --fleet-auth "$work/t1"
expect "head with a token, node without" 2 "has no fleet token but this head has --fleet-auth"

next_port; node --version-max 2
head_run
expect "a version 2 node still generates" 0 "protocol 2" "imzsbheojusgjive"

next_port
head_run
expect "unreachable" 2 "node 127.0.0.1:$port: unreachable (Connection refused)"

# Peers that are not superfluid-noded, from python3.
peer() { # mode: silent | http | close
	python3 - "$port" "$1" <<'PY' &
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(4)
c, _ = s.accept()
if sys.argv[2] == "http":
    c.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n"); time.sleep(2)
elif sys.argv[2] == "silent":
    time.sleep(15)
c.close()
PY
	pids+=($!); wait_listen "$port"
}
next_port; peer http
head_run
expect "garbage is named" 2 "answered with bytes that are not the superfluid fleet link (starts with 48 54 54 50)"
next_port; peer close
head_run --fleet-auth "$work/t1"
expect "closed at the handshake" 2 \
	"the node refused or dropped it while busy"
next_port; peer silent
head_run
expect "no answer" 2 "did not answer the handshake within 10 s; is superfluid-noded listening there?"

chmod 644 "$work/t2"
head_run --fleet-auth "$work/t2"
expect "a token file others can read is refused" 1 "run chmod 600"

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
