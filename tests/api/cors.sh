#!/usr/bin/env bash
# api.cors: CORS (--cors-origin) and /v1/models. Off by default: no Access-Control-* header,
# OPTIONS a 405. With origins given (twice on the command line, or lines of a config file):
# a preflight from one of them is answered 204 without a key (methods, the headers asked,
# max age), one from another origin is a 403; every answer to an allowed origin carries
# Access-Control-Allow-Origin (its errors, 401s and streams too), none to another; "*"
# allows any. A bad origin stops the head at start. /v1/models gives max_model_len, and
# /v1/models/ (a trailing slash) is the list.
# Usage: cors.sh NODED HEADD   (KEEP=DIR keeps the work)
set -uo pipefail
noded=$1 headd=$2 expect=/bin/false
. "$(dirname "$0")/lib.sh"

# hreq METHOD PATH ORIGIN [BODY] [curl options...]: like req, the answer's headers in
# $work/hdr (names lower-cased).
hreq() {
	local m=$1 p=$2 o=$3 b=${4:-}
	local args=(-sS -D "$work/hdr.raw" -o "$work/out" -w '%{http_code}' -X "$m")
	[ -n "$o" ] && args+=(-H "Origin: $o")
	[ -n "$b" ] && args+=(-H 'Content-Type: application/json' --data-binary "$b")
	status=$(curl "${args[@]}" "${@:5}" "$base$p")
	tr -d '\r' <"$work/hdr.raw" | awk -F': ' 'NF > 1 { print tolower($1) ": " substr($0, length($1) + 3) }' >"$work/hdr"
}
hdr() { sed -n "s/^$1: //p" "$work/hdr" | head -1; }
CHAT='{"model":"sim-1","messages":[{"role":"user","content":"Hi"}],"max_tokens":4}'

start_node n1 && p1=$port

# ---- off by default ----
start_head plain "127.0.0.1:$p1"
base="http://127.0.0.1:$hport"
wait_health
hreq OPTIONS /v1/chat/completions https://app.example "" -H 'Access-Control-Request-Method: POST'
r=0; [ "$status" = 405 ] && ! grep -q '^access-control-' "$work/hdr" || r=1
check "without --cors-origin: a preflight is a 405 with no Access-Control header" $r
hreq POST /v1/chat/completions https://app.example "$CHAT"
r=0; [ "$status" = 200 ] && ! grep -q '^access-control-' "$work/hdr" || r=1
check "... and a chat from a page carries none" $r
hreq GET /v1/models/ ""
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["object"], d["data"][0]["id"]')" = "('list', 'sim-1')" ] &&
	[ "$(j "$work/out" 'd["data"][0]["max_model_len"]')" -gt 0 ] || r=1
check "GET /v1/models/ (trailing slash): the list, with max_model_len ($(j "$work/out" 'd["data"][0]["max_model_len"]'))" $r
hreq GET /v1/models/sim-1 ""
r=0; [ "$status" = 200 ] && [ "$(j "$work/out" 'd["max_model_len"] > 0')" = True ] || r=1
check "GET /v1/models/sim-1: max_model_len" $r

# ---- two origins, keys ----
(umask 077; printf 'sk-one\n' >"$work/keys")
start_head cors "127.0.0.1:$p1" --api-keys "$work/keys" --cors-origin https://app.example \
	--cors-origin http://localhost:3000
base="http://127.0.0.1:$hport"
wait_health
hreq OPTIONS /v1/chat/completions https://app.example "" -H 'Access-Control-Request-Method: POST' \
	-H 'Access-Control-Request-Headers: authorization, content-type, x-stainless-os'
r=0; [ "$status" = 204 ] && [ "$(hdr access-control-allow-origin)" = https://app.example ] &&
	[ "$(hdr access-control-allow-headers)" = "authorization, content-type, x-stainless-os" ] &&
	[[ "$(hdr access-control-allow-methods)" == *POST* ]] && [ -n "$(hdr access-control-max-age)" ] &&
	[ -z "$(hdr content-length)" ] || r=1
check "a preflight from an allowed origin: 204 without a key, its origin, the headers asked, POST" $r
hreq OPTIONS /v1/chat/completions http://localhost:3000 "" -H 'Access-Control-Request-Method: POST' \
	-H 'Access-Control-Request-Headers: x-bad\header'
r=0; [ "$status" = 204 ] && [ "$(hdr access-control-allow-origin)" = http://localhost:3000 ] &&
	[[ "$(hdr access-control-allow-headers)" == Authorization* ]] || r=1
check "the second origin too; headers asked that are not names: the API's own list" $r
hreq OPTIONS /v1/chat/completions https://evil.example "" -H 'Access-Control-Request-Method: POST'
r=0; [ "$status" = 403 ] && [ -z "$(hdr access-control-allow-origin)" ] &&
	[ "$(j "$work/out" 'd["error"]["code"]')" = origin_not_allowed ] || r=1
check "a preflight from another origin: 403 origin_not_allowed, no Allow-Origin" $r
hreq POST /v1/chat/completions https://app.example "$CHAT" -H 'Authorization: Bearer sk-one'
r=0; [ "$status" = 200 ] && [ "$(hdr access-control-allow-origin)" = https://app.example ] &&
	[ "$(hdr vary)" = Origin ] && [ -n "$(hdr access-control-expose-headers)" ] || r=1
check "a chat from the allowed origin carries Allow-Origin, Vary and Expose-Headers" $r
hreq POST /v1/chat/completions https://app.example "${CHAT%\}},\"stream\":true}" -H 'Authorization: Bearer sk-one'
r=0; [ "$status" = 200 ] && [ "$(hdr access-control-allow-origin)" = https://app.example ] &&
	grep -q 'data: \[DONE\]' "$work/out" || r=1
check "... a stream too" $r
hreq POST /v1/chat/completions https://app.example "$CHAT"
r=0; [ "$status" = 401 ] && [ "$(hdr access-control-allow-origin)" = https://app.example ] || r=1
check "... and a 401 (no key), so the page can read why" $r
hreq GET /v1/nothing https://app.example "" -H 'Authorization: Bearer sk-one'
r=0; [ "$status" = 404 ] && [ "$(hdr access-control-allow-origin)" = https://app.example ] || r=1
check "... and a 404" $r
hreq GET /health https://app.example ""
r=0; [ "$status" = 200 ] && [ "$(hdr access-control-allow-origin)" = https://app.example ] || r=1
check "... and /health" $r
hreq POST /v1/chat/completions https://evil.example "$CHAT" -H 'Authorization: Bearer sk-one'
r=0; [ "$status" = 200 ] && [ -z "$(hdr access-control-allow-origin)" ] && [ "$(hdr vary)" = Origin ] || r=1
check "an answer to another origin: no Allow-Origin (Vary: Origin)" $r

# ---- any origin, from a config file ----
printf 'cors-origin = https://a.example\ncors-origin = *\n' >"$work/headd.conf"
start_head any "127.0.0.1:$p1" --config "$work/headd.conf"
base="http://127.0.0.1:$hport"
wait_health
hreq OPTIONS /v1/completions https://whoever.example "" -H 'Access-Control-Request-Method: POST'
r=0; [ "$status" = 204 ] && [ "$(hdr access-control-allow-origin)" = '*' ] || r=1
check "* (a config file's second line): any origin's preflight, Allow-Origin *" $r
hreq GET /v1/models https://whoever.example ""
r=0; [ "$status" = 200 ] && [ "$(hdr access-control-allow-origin)" = '*' ] || r=1
check "... and its answers" $r

# ---- a bad origin stops the head ----
for bad in 'https://app.example/' 'app.example' 'https://a b' '**'; do
	"$headd" --fleet "127.0.0.1:$p1" --listen-http 127.0.0.1:0 --admin-socket "$work/bad.sock" \
		--cors-origin "$bad" >"$work/out" 2>&1 & bp=$!
	for _ in $(seq 100); do kill -0 $bp 2>/dev/null || break; sleep 0.05; done
	kill -9 $bp 2>/dev/null
	wait $bp 2>/dev/null; rc=$?
	r=0; [ "$rc" = 1 ] && grep -qF -- "--cors-origin: '$bad' is not" "$work/out" || r=1
	check "--cors-origin '$bad': refused at start (exit $rc)" $r
done
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
