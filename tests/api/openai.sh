#!/usr/bin/env bash
# The client API through the official openai npm package (installed here from the npm
# registry into NPM_DIR, kept between runs): a head with two real nodes and bearer keys.
# Usage: openai.sh NODED HEADD SIM_EXPECT NPM_DIR   (KEEP=DIR keeps the work folder)
set -uo pipefail
noded=$1 headd=$2 expect=$3 npm_dir=$4
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; [ -n "${KEEP:-}" ] && cp -r "$work" "$KEEP"; rm -rf "$work"; }
trap cleanup EXIT

if [ ! -f "$npm_dir/node_modules/openai/package.json" ]; then
	mkdir -p "$npm_dir"
	if ! npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error "openai@^4" >"$work/npm.log" 2>&1; then
		echo "FAIL npm install openai"; sed 's/^/     | /' "$work/npm.log"; exit 1
	fi
fi
fleet=
for n in 1 2; do
	"$noded" --listen 127.0.0.1:0 --blob-dir "$work/blobs-$n" --identity "n$n" 2>"$work/n$n.err" &
	pids+=($!)
	for _ in $(seq 100); do
		port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/n$n.err" | head -1)
		[ -n "$port" ] && break
		sleep 0.05
	done
	fleet+=${fleet:+,}127.0.0.1:$port
done
(umask 077; echo "sk-openai-test" >"$work/keys")
"$headd" --fleet "$fleet" --admin-socket "$work/h.sock" --listen-http 127.0.0.1:0 \
	--api-keys "$work/keys" 2>"$work/head.err" &
pids+=($!)
hport=
for _ in $(seq 100); do
	hport=$(sed -n 's/.*client API on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/head.err" | head -1)
	[ -n "$hport" ] && curl -s "http://127.0.0.1:$hport/health" | grep -q '"ok"' && break
	sleep 0.05
done
# The test script imports "openai" from NPM_DIR's node_modules.
cp "$here/openai_client.mjs" "$npm_dir/openai_client.mjs"
node "$npm_dir/openai_client.mjs" "http://127.0.0.1:$hport/v1" sk-openai-test "$expect"
rc=$?
[ "$rc" = 0 ] || sed 's/^/     | head: /' "$work/head.err" | tail -20
exit $rc
