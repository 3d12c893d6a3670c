#!/usr/bin/env bash
# Real processes on loopback: superfluid-noded with superfluid-linkdemo's head as the head.
# Options and the config file, token files, generations, refusals, SIGHUP, SIGTERM, --join
# and its back-off. Usage: noded.sh PATH_TO_superfluid-noded PATH_TO_superfluid-linkdemo
# (KEEP=DIR keeps the work folder there, for a look at the logs.)
set -uo pipefail
noded=$1
demo=$2
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; [ -n "${KEEP:-}" ] && cp -r "$work" "$KEEP"; rm -rf "$work"; }
trap cleanup EXIT
fails=0 passes=0

ok() { passes=$((passes + 1)); echo "ok   $1"; }
fail() { fails=$((fails + 1)); echo "FAIL $1"; sed 's/^/     | /' "$work/out" "$work/err" "$work/node.err" 2>/dev/null; }
check() { if [ "$2" = 0 ]; then ok "$1"; else fail "$1"; fi; }
now_ms() { date +%s%3N; }

# Runs noded in the foreground: rc in $work/rc, stdout and stderr in out and err.
run() { "$noded" "$@" >"$work/out" 2>"$work/err"; echo $? >"$work/rc"; }
expect() { # name, rc, text expected on stderr (or ""), text expected on stdout (or "")
	local r=0
	[ "$(cat "$work/rc")" = "$2" ] || r=1
	[ -z "$3" ] || grep -qF -- "$3" "$work/err" || r=1
	[ -z "${4:-}" ] || grep -qF -- "$4" "$work/out" || r=1
	check "$1" "$r"
}

# Starts noded on a free loopback port (port 0: the log names the port) and sets $port, $npid.
start_node() {
	: >"$work/node.err"
	"$noded" --listen 127.0.0.1:0 --blob-dir "$work/blobs" "$@" 2>"$work/node.err" &
	npid=$!; pids+=("$npid")
	wait_log "listening on 127.0.0.1:" || return 1
	port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/node.err" | head -1)
}
wait_log() { # text expected in node.err within 5 s
	for _ in $(seq 100); do
		grep -qF -- "$1" "$work/node.err" && return 0
		kill -0 "$npid" 2>/dev/null || break
		sleep 0.05
	done
	echo "     | noded did not log: $1"; return 1
}
stop_node() { kill -TERM "$npid" 2>/dev/null; wait "$npid" 2>/dev/null; }
head_run() { "$demo" head --connect "127.0.0.1:$port" "$@" >"$work/out" 2>"$work/err"; echo $? >"$work/rc"; }

(umask 077; echo "token-one" >"$work/t1"; echo "token-two" >"$work/t2"; cp "$work/t1" "$work/hup")

# ---- options ----
run --help
r=0
for o in listen join auth-file engine identity config io version-max max-sessions sim-seed \
	sim-tokens-per-s sim-batch sim-layers sim-ctx-len silence-ms heartbeat-ms blob-dir \
	log-level help version; do
	grep -qE -- "--$o( |$)" "$work/out" || { echo "     | --help lacks --$o"; r=1; }
done
grep -qF "(default 4096)" "$work/out" && grep -qF "STATE_DIRECTORY" "$work/out" || r=1
[ "$(cat "$work/rc")" = 0 ] || r=1
check "--help documents every option, with defaults" $r
run --version
expect "--version" 0 "" "superfluid-noded "
run
expect "no --listen or --join is a usage error" 1 "needs --listen HOST:PORT or --join HEAD:PORT"
run --listen 127.0.0.1:0 --bogus
expect "an unknown option names itself" 1 "unknown option --bogus"
run --listen 127.0.0.1:0 --max-sessions many
expect "a bad value names the option" 1 "--max-sessions: 'many' is not a number"
run --listen nowhere
expect "a bad address names the option" 1 "--listen: 'nowhere' is not HOST:PORT"
run --listen 127.0.0.1:0 --io carrier-pigeon
expect "a bad --io" 1 "--io: 'carrier-pigeon' is not auto, uring or epoll"
printf '# a comment\nlisten = 127.0.0.1:0\nsim-sed = 3\n' >"$work/bad1.conf"
run --config "$work/bad1.conf"
expect "an unknown config key names file:line" 1 "$work/bad1.conf:3: unknown option sim-sed"
printf 'listen = 127.0.0.1:0\n\nlog-level debug\n' >"$work/bad2.conf"
run --config "$work/bad2.conf"
expect "a config line without '=' names file:line" 1 "$work/bad2.conf:3: expected 'key = value'"
printf 'listen = 127.0.0.1:0\nsim-batch = 0   # too few\n' >"$work/bad3.conf"
run --config "$work/bad3.conf"
expect "a bad config value names file:line" 1 "$work/bad3.conf:2: sim-batch: '0' is not a number"
run --config "$work/missing.conf"
expect "a missing config file" 1 "--config $work/missing.conf: No such file or directory"
cp "$work/t1" "$work/public"; chmod 644 "$work/public"
run --listen 127.0.0.1:0 --auth-file "$work/public"
expect "a token file others can read is refused" 1 "run chmod 600"
: >"$work/afile" # (missing parents are made, at the first blob)
run --listen 127.0.0.1:0 --blob-dir "$work/afile/dir"
expect "a blob directory that cannot be made is a runtime failure" 2 "--blob-dir $work/afile/dir: $work/afile is there but is not a directory"
start_node
run --listen "127.0.0.1:$port" --blob-dir "$work/blobs"
expect "a port in use is a runtime failure" 2 "cannot listen on 127.0.0.1:$port: Address already in use"
stop_node

# ---- generations ----
start_node --auth-file "$work/t1" --identity gen-node
head_run --fleet-auth "$work/t1" --model sim-1 --prompt "hello fleet" --max-tokens 12
r=0
[ "$(cat "$work/rc")" = 0 ] && [ -s "$work/out" ] || r=1
grep -qF "head: node gen-node (sealed link, protocol 7" "$work/err" || r=1
grep -qE "head: [0-9]+ tokens generated" "$work/err" || r=1
check "a sealed generation through noded" $r
[ -s "$work/out" ] && cp "$work/out" "$work/gen1"
head_run --fleet-auth "$work/t1" --model sim-1 --max-tokens 4
expect "the same session and epoch again is fenced" 2 "not newer than its epoch 1"
stop_node

start_node --auth-file "$work/t1" --io epoll
head_run --fleet-auth "$work/t1" --model sim-1 --prompt "hello fleet" --max-tokens 12
r=0; cmp -s "$work/out" "$work/gen1" || r=1
[ "$(cat "$work/rc")" = 0 ] && [ -s "$work/out" ] || r=1
check "the stream is deterministic (epoll loop, same seed, same output)" $r
stop_node

start_node --version-max 2 --sim-seed 7
head_run --model sim-1 --prompt "hello fleet" --max-tokens 12
r=0; [ "$(cat "$work/rc")" = 0 ] && grep -qF "protocol 2" "$work/err" || r=1
check "--version-max 2 acts as an older node and still generates" $r
head_run --model demo --max-tokens 4
expect "an ASSIGN for a model the node lacks is refused" 2 "does not serve model demo (it serves sim-1)"
stop_node

# ---- tokens and SIGHUP ----
start_node --auth-file "$work/hup"
head_run --fleet-auth "$work/t2" --max-tokens 1
expect "a wrong token is refused" 2 "refused the fleet token"
cp "$work/t2" "$work/hup"; kill -HUP "$npid"
wait_log "SIGHUP: read $work/hup again: new links use the new token"
check "SIGHUP re-reads the auth file" $?
head_run --fleet-auth "$work/t2" --model sim-1 --max-tokens 2
r=0; grep -qF "sealed link, protocol 7" "$work/err" || r=1
check "new links use the new token" $r
chmod 644 "$work/hup"; kill -HUP "$npid"
wait_log "SIGHUP: token file $work/hup may be read by others"
check "SIGHUP with a bad file keeps the old token" $?
stop_node

# ---- config file ----
printf '# a node from a file\nlisten = 127.0.0.1:0\nidentity = file-node\nsim-batch = 4\nblob-dir = %s\n' \
	"$work/blobs" >"$work/good.conf"
: >"$work/node.err"
"$noded" --config "$work/good.conf" --identity cli-node 2>"$work/node.err" & npid=$!; pids+=("$npid")
wait_log "listening on 127.0.0.1:"
port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/node.err" | head -1)
head_run --model sim-1 --max-tokens 1
r=0
grep -qF "head: node cli-node" "$work/err" || r=1  # the command line wins
grep -qF "batch 4" "$work/node.err" || r=1        # the file's own options apply
check "--config works and the command line wins" $r
stop_node

# ---- SIGTERM ----
start_node --sim-tokens-per-s 10
"$demo" head --connect "127.0.0.1:$port" --model sim-1 --max-tokens 500 >"$work/out" 2>"$work/err" &
hpid=$!; pids+=("$hpid")
wait_log "plain link, protocol 7"
sleep 0.3
t0=$(now_ms); kill -TERM "$npid"; wait "$npid"; nrc=$?; t1=$(now_ms)
wait "$hpid"
# Promptly means without waiting for the generation it runs (500 tokens at 10 a second, 50 s):
# it exits 0 with that generation unfinished (an order, not a wall-clock bound).
got=$(wc -c <"$work/out")
r=0; [ "$nrc" = 0 ] && [ "$got" -lt 500 ] || r=1
check "SIGTERM exits 0 without waiting for the generation it runs ($got of 500 tokens came; $((t1 - t0)) ms)" $r
grep -qF "ended the link: node shutting down" "$work/err"
check "the head sees the goodbye" $?

# ---- --join ----
# A relay stands in for a head that takes joins: it accepts noded on one port and the demo
# head on another, and passes bytes both ways; then it takes the next pair.
python3 - "$work/ports" <<'PY' &
import socket, sys, threading
def listener():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0)); s.listen(4); return s
a, b = listener(), listener()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d %d\n" % (a.getsockname()[1], b.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
def pipe(x, y):
    try:
        while True:
            d = x.recv(65536)
            if not d: break
            y.sendall(d)
    except OSError: pass
    for z in (x, y):
        try: z.shutdown(socket.SHUT_RDWR)
        except OSError: pass
while True:
    n, _ = a.accept(); h, _ = b.accept()
    threading.Thread(target=pipe, args=(n, h), daemon=True).start()
    threading.Thread(target=pipe, args=(h, n), daemon=True).start()
PY
pids+=($!)
for _ in $(seq 100); do [ -s "$work/ports" ] && break; sleep 0.05; done
read -r jport port <"$work/ports"
: >"$work/node.err"
"$noded" --join "127.0.0.1:$jport" --identity joiner --blob-dir "$work/blobs" 2>"$work/node.err" & npid=$!; pids+=("$npid")
sleep 0.2
head_run --model sim-1 --max-tokens 8
expect "a generation over a joined link" 0 "head: node joiner (plain link, protocol 7"
wait_log "join 127.0.0.1:$jport: head demo-head: ended the link: demo done (code 0); dialing again in"
check "a dropped join link is dialed again, in one line" $?
sleep 0.3
head_run --model sim-1 --max-tokens 8
expect "the head reaches the node again on the new link" 2 "not newer than its epoch 1"
stop_node

: >"$work/node.err"
"$noded" --join "127.0.0.1:1" --blob-dir "$work/blobs" 2>"$work/node.err" & npid=$!; pids+=("$npid")
sleep 0.8
stop_node; nrc=$?
r=0; [ "$nrc" = 0 ] || r=1
[ "$(grep -c "join 127.0.0.1:1: unreachable (Connection refused); dialing again in" "$work/node.err")" -ge 3 ] || r=1
grep -qF "superfluid-noded: stopped" "$work/node.err" || r=1
check "a join that fails backs off, one line per failure" $r

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
