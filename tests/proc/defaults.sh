#!/usr/bin/env bash
# A newcomer's first run: superfluid-noded and superfluid-headd started by hand, as a user
# without privileges whose HOME is empty, with only --listen, --fleet and --listen-http. They
# serve (/v1/models, a completion, the admin socket), say where their state and runtime
# directories went, and make no blob directory; a default directory another user could reach
# into is refused, and so is an explicit path that cannot be used.
# Usage: defaults.sh PATH_TO_superfluid-noded PATH_TO_superfluid-headd PATH_TO_superfluid
# As root (CI) the programs run as nobody (setpriv); as anyone else, as that user.
# TMPDIR is the work folder's, so that /tmp/superfluid-UID, the last fallback, is not touched
# (the unit test test_paths covers it). (KEEP=DIR keeps the work folder there.)
set -uo pipefail
work=$(mktemp -d)
chmod 755 "$work"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; [ -n "${KEEP:-}" ] && cp -r "$work" "$KEEP"; rm -rf "$work"; }
trap cleanup EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); echo "ok   $1"; }
fail() { fails=$((fails + 1)); echo "FAIL $1"; for f in out err node.err head.err; do [ -s "$work/$f" ] && sed "s/^/     | $f: /" "$work/$f"; done; }
check() { if [ "$2" = 0 ]; then ok "$1"; else fail "$1"; fi; }

# The programs, copied where the user may run them (the build tree may be closed to it).
mkdir -p "$work/bin"
cp "$1" "$work/bin/superfluid-noded" && cp "$2" "$work/bin/superfluid-headd" &&
	cp "$3" "$work/bin/superfluid" || { echo "FAIL cannot copy the programs"; exit 1; }
chmod 755 "$work/bin" "$work/bin"/*
noded=$work/bin/superfluid-noded headd=$work/bin/superfluid-headd cli=$work/bin/superfluid

if [ "$(id -u)" = 0 ]; then
	user=nobody
	uid=$(id -u nobody) || { echo "FAIL no user nobody to run as"; exit 1; }
	gid=$(id -g nobody)
	command -v setpriv >/dev/null || { echo "FAIL setpriv (util-linux) is missing"; exit 1; }
	become=(setpriv --reuid="$uid" --regid="$gid" --clear-groups)
else
	user=$(id -un) uid=$(id -u) gid=$(id -g)
	become=()
fi
echo "     | running as $user (uid $uid)"
# mine DIR...: made and owned by the user, mode 0700.
mine() { mkdir -p "$@" && chmod 700 "$@" && { [ "$uid" = "$(id -u)" ] || chown "$uid:$gid" "$@"; }; }
home=$work/home tmp=$work/tmp
mine "$home" "$tmp"
# as VAR=VALUE... -- PROGRAM ARGS: runs it as the user, HOME empty, systemd's and XDG's
# directories unset, TMPDIR the work folder's (the sanitizers' options stay).
# as_bg ERRFILE VAR=VALUE... -- PROGRAM ARGS: the same in the background, stderr to ERRFILE;
# sets $bgpid, the program's own pid (setpriv and env exec it).
as_cmd() {
	local vars=()
	while [ "$1" != -- ]; do vars+=("$1"); shift; done
	shift
	cmd=("${become[@]}" env -u STATE_DIRECTORY -u RUNTIME_DIRECTORY -u XDG_STATE_HOME
		-u XDG_RUNTIME_DIR -u XDG_CONFIG_HOME -u XDG_DATA_HOME -u XDG_CACHE_HOME
		HOME="$home" TMPDIR="$tmp" USER="$user" LOGNAME="$user" "${vars[@]}" "$@")
}
as() { as_cmd "$@"; "${cmd[@]}"; }
# ERRFILE is emptied here, before the program starts: the background job's own redirection
# happens after the fork, and a wait_for that reads first saw the last part's lines (the head
# "up" before it was, then no admin socket yet: seen under load).
as_bg() { local e=$1; shift; as_cmd "$@"; : >"$e"; "${cmd[@]}" 2>>"$e" & bgpid=$!; pids+=("$bgpid"); }
# wait_for FILE TEXT [PID]: TEXT in FILE within 10 s (while PID lives).
wait_for() {
	for _ in $(seq 200); do
		grep -qF -- "$2" "$1" 2>/dev/null && return 0
		[ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null && return 1
		sleep 0.05
	done
	return 1
}

# ---- a node with --listen alone ----
as_bg "$work/node.err" -- "$noded" --listen 127.0.0.1:0
npid=$bgpid
wait_for "$work/node.err" "listening on 127.0.0.1:" "$npid"
port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/node.err" | head -1)
[ -n "$port" ]
check "superfluid-noded --listen alone starts as $user with an empty HOME" $?
grep -qF "blobs in $home/.local/state/superfluid/blobs (no --blob-dir: \$HOME/.local/state/superfluid/blobs; made at the first blob)" "$work/node.err"
check "its log says where blobs go: \$HOME/.local/state/superfluid/blobs, made at the first" $?

# ---- a head with --fleet and --listen-http alone ----
as_bg "$work/head.err" -- "$headd" --fleet "127.0.0.1:$port" --listen-http 127.0.0.1:0
hpid=$bgpid
wait_for "$work/head.err" "client API on http://127.0.0.1:" "$hpid"
hport=$(sed -n 's/.*client API on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/head.err" | head -1)
[ -n "$hport" ]
check "superfluid-headd --fleet --listen-http alone starts as $user" $?
sock=$tmp/superfluid-$uid/headd.sock
grep -qF "admin socket $sock (no --admin-socket: \$TMPDIR/superfluid-$uid/headd.sock)" "$work/head.err"
check "its log says where the admin socket went: \$TMPDIR/superfluid-UID/headd.sock" $?
r=0
[ "$(stat -c '%u %a' "$tmp/superfluid-$uid")" = "$uid 700" ] || r=1
[ "$(stat -c '%u %a' "$sock")" = "$uid 600" ] || r=1
check "the runtime directory is the user's, mode 0700; the socket 0600" $r
base=http://127.0.0.1:$hport
wait_for "$work/head.err" "node 127.0.0.1:$port: up" "$hpid"
check "the head links the node" $?

curl -sS -o "$work/out" -w '%{http_code}' "$base/v1/models" >"$work/status" 2>"$work/err"
[ "$(cat "$work/status")" = 200 ] && grep -qF '"id":"sim-1"' "$work/out"
check "GET /v1/models lists the simulated engine's sim-1" $?
curl -sS -o "$work/out" -w '%{http_code}' -H 'Content-Type: application/json' \
	--data-binary '{"model":"sim-1","prompt":"Once upon a time","max_tokens":8,"temperature":0}' \
	"$base/v1/completions" >"$work/status" 2>"$work/err"
r=0
[ "$(cat "$work/status")" = 200 ] || r=1
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d["choices"][0]
assert c["text"] and d["usage"]["completion_tokens"] == 8, d' "$work/out" 2>"$work/err" || r=1
check "a completion through the head: 8 tokens of text" $r

as -- "$cli" status --admin-socket "$sock" >"$work/out" 2>"$work/err"
r=$?
grep -q "^127\.0\.0\.1:$port up " "$work/out" || r=1
check "superfluid status --admin-socket (the default path) as $user: the node is up" $r

r=0
[ -z "$(find "$home" -mindepth 1 | head -1)" ] || { r=1; find "$home" >"$work/out"; }
check "no blob directory made (HOME stays empty: the node saw no blob)" $r

kill -TERM "$hpid" "$npid"
wait "$hpid"; hrc=$?
wait "$npid"; nrc=$?
r=0
[ "$hrc" = 0 ] && [ "$nrc" = 0 ] || { r=1; echo "     | exit: head $hrc, node $nrc"; }
[ ! -e "$sock" ] || { r=1; echo "     | $sock is still there"; }
check "SIGTERM: both exit 0; the head removes its socket" $r

# ---- XDG directories, when set, are used (made only where needed) ----
mine "$work/xdg-run" "$work/xdg"
as_bg "$work/node.err" XDG_RUNTIME_DIR="$work/xdg-run" XDG_STATE_HOME="$work/xdg/state" -- \
	"$noded" --listen 127.0.0.1:0
npid=$bgpid
wait_for "$work/node.err" "listening on 127.0.0.1:" "$npid"
port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/node.err" | head -1)
as_bg "$work/head.err" XDG_RUNTIME_DIR="$work/xdg-run" -- \
	"$headd" --fleet "127.0.0.1:$port" --listen-http 127.0.0.1:0
hpid=$bgpid
wait_for "$work/head.err" "client API on" "$hpid"
r=0
grep -qF "blobs in $work/xdg/state/superfluid/blobs (no --blob-dir: \$XDG_STATE_HOME/superfluid/blobs; made at the first blob)" "$work/node.err" || r=1
[ ! -e "$work/xdg/state" ] || r=1
grep -qF "admin socket $work/xdg-run/superfluid/headd.sock (no --admin-socket: \$XDG_RUNTIME_DIR/superfluid/headd.sock)" "$work/head.err" || r=1
as -- "$cli" status --admin-socket "$work/xdg-run/superfluid/headd.sock" >"$work/out" 2>"$work/err" || r=1
check "\$XDG_STATE_HOME and \$XDG_RUNTIME_DIR: blobs and socket under superfluid/ there" $r
kill -TERM "$hpid" "$npid"; wait "$hpid" "$npid" 2>/dev/null

# ---- refusals ----
# A default directory others may enter: refused, named, with what to do.
mkdir -p "$work/open"; chmod 755 "$work/open"
mkdir -m 777 "$work/open/superfluid-$uid"
[ "$uid" = "$(id -u)" ] || chown "$uid:$gid" "$work/open/superfluid-$uid"
chmod 777 "$work/open/superfluid-$uid"
as TMPDIR="$work/open" -- "$headd" --fleet 127.0.0.1:1 --listen-http 127.0.0.1:0 >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" = 2 ] && grep -qF "no --admin-socket, and no directory for it: $work/open/superfluid-$uid has mode 0777: other users may reach into it; chmod 700 it, or remove it" "$work/err"
check "a \$TMPDIR/superfluid-UID open to others is refused (exit 2, the path and mode named)" $?
if [ "$uid" != "$(id -u)" ]; then
	# Owned by another user (here root, the test's own user): refused.
	mkdir -p "$work/theirs"; chmod 755 "$work/theirs"
	mkdir -m 700 "$work/theirs/superfluid-$uid"
	as TMPDIR="$work/theirs" HOME= -- "$noded" --listen 127.0.0.1:0 >"$work/out" 2>"$work/err"
	rc=$?
	[ "$rc" = 2 ] && grep -qF "$work/theirs/superfluid-$uid belongs to uid $(id -u), not to this user (uid $uid)" "$work/err"
	check "a \$TMPDIR/superfluid-UID of another user is refused (exit 2, owner named)" $?
else
	echo "skip a directory of another user (needs root to make one; CI runs it as root)"
fi
# Explicit paths that cannot be used: the option and the path named.
: >"$work/afile"; chmod 644 "$work/afile"
as -- "$noded" --listen 127.0.0.1:0 --blob-dir "$work/afile/blobs" >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" = 2 ] && grep -qF "error: --blob-dir $work/afile/blobs: $work/afile is there but is not a directory" "$work/err"
check "--blob-dir through a file: exit 2, the option and path named" $?
if [ "$uid" != "$(id -u)" ]; then # (the test's own user may write there)
	as -- "$noded" --listen 127.0.0.1:0 --blob-dir "$work/bin/blobs" >"$work/out" 2>"$work/err"
	rc=$?
	[ "$rc" = 2 ] && grep -qF "error: --blob-dir $work/bin/blobs: cannot make directories in $work/bin" "$work/err"
	check "--blob-dir where $user cannot write: exit 2, refused at start" $?
fi
as -- "$headd" --fleet 127.0.0.1:1 --listen-http 127.0.0.1:0 --admin-socket "$work/none/h.sock" >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" = 2 ] && grep -qF "error: --admin-socket $work/none/h.sock: cannot listen: No such file or directory" "$work/err"
check "--admin-socket in a missing directory: exit 2, the option and path named" $?

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
