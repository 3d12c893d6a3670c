#!/usr/bin/env bash
# superfluid wal check and dump on logs the real writer wrote (wal_fixture): a clean log, one
# rolled over several segments with a checkpoint, one torn at its end, one with a byte
# flipped in the middle, one with a record the session table refuses; and the usage errors.
# Usage: wal_cli.sh WAL_FIXTURE SUPERFLUID
set -uo pipefail
fixture=$1 cli=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/wal-cli.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# run NAME WANT_RC CMD...: runs CMD, output in $work/NAME.out and .err, checks the exit code.
run() {
	local name=$1 want=$2; shift 2
	"$@" >"$work/$name.out" 2>"$work/$name.err"
	local rc=$?
	if [ "$rc" = "$want" ]; then
		ok "$name: exit $rc"
	else
		fail "$name: exit $rc, wanted $want"
		sed 's/^/     | /' "$work/$name.out" "$work/$name.err"
	fi
}
# has NAME FILE TEXT: FILE holds the line TEXT (a fixed string).
has() {
	if grep -qF -- "$3" "$2"; then ok "$1: says '$3'"; else
		fail "$1: no '$3' in"; sed 's/^/     | /' "$2"; fi
}

# --- a clean log: 5 sessions of 4 token events each, 2 closed: 5 * 9 + 2 = 47 records
"$fixture" "$work/clean" >"$work/fixture.out" || fail "wal_fixture clean"
has fixture "$work/fixture.out" "records=47 last_lsn=47 live=3"
seg1="wal-0000000000000001.log"
sum_before=$(md5sum "$work/clean/$seg1")
run check-clean 0 "$cli" wal check "$work/clean"
has check-clean "$work/check-clean.out" "segments: 1, "
has check-clean "$work/check-clean.out" "records: 47 replayed, LSN 1..47, "
has check-clean "$work/check-clean.out" "checkpoint: none complete"
has check-clean "$work/check-clean.out" \
	"types: content 5, placed 5, generation 5, tokens 20, end 5, close 2, session 5"
has check-clean "$work/check-clean.out" "sessions: 3 live, next session id 6"
has check-clean "$work/check-clean.out" "torn tail: none"
has check-clean "$work/check-clean.out" "result: good"

run dump-clean 0 "$cli" wal dump "$work/clean"
d=$work/dump-clean.out
[ "$(wc -l <"$d")" = 47 ] && ok "dump: 47 lines" || fail "dump: $(wc -l <"$d") lines, not 47"
bad=$(grep -cvE '^[0-9]+ wal-[0-9a-f]{16}\.log:[0-9]+ [a-z-]+ [0-9]+ ' "$d")
[ "$bad" = 0 ] && ok "dump: every line is LSN FILE:OFFSET TYPE LEN ..." ||
	fail "dump: $bad lines not LSN FILE:OFFSET TYPE LEN"
[ "$(cut -d' ' -f1 "$d" | tr '\n' ' ')" = "$(seq 1 47 | tr '\n' ' ')" ] &&
	ok "dump: LSNs 1..47 in order" || fail "dump: LSNs not 1..47 in order"
has dump-clean "$d" "1 $seg1:32 session 121 session=1 name=\"fixture-1\" model=\"sim-1\""
has dump-clean "$d" "2 $seg1:170 content 48 session=1 keep=0 append=8"
has dump-clean "$d" "5 $seg1:397 tokens 48 session=1 generation=1 epoch=1 seq=0 tokens=3"
has dump-clean "$d" "logit_bias=0 ignore_eos=1 min_tokens=2 grammar=15 format=0000000000000abc"
has dump-clean "$d" "47 $seg1:3492 close 8 session=2"
[ "$(grep -c ' tokens 48 ' "$d")" = 20 ] && ok "dump: 20 tokens records" ||
	fail "dump: $(grep -c ' tokens 48 ' "$d") tokens records, not 20"
run dump-from 0 "$cli" wal dump --from 40 "$work/clean"
[ "$(cut -d' ' -f1 "$work/dump-from.out" | tr '\n' ' ')" = "$(seq 40 47 | tr '\n' ' ')" ] &&
	ok "dump --from 40: LSNs 40..47" || fail "dump --from 40: not LSNs 40..47"
[ "$(md5sum "$work/clean/$seg1")" = "$sum_before" ] && ok "check and dump changed nothing" ||
	fail "check or dump changed the segment"

# --- rolled every 1 KiB, then a checkpoint and one more session after it
"$fixture" "$work/ckpt" --segment-bytes 1024 --checkpoint >"$work/fixture.out" ||
	fail "wal_fixture ckpt"
has fixture "$work/fixture.out" "live=4"
run check-ckpt 0 "$cli" wal check "$work/ckpt"
has check-ckpt "$work/check-ckpt.out" "checkpoint: replay starts at the checkpoint at LSN 48"
has check-ckpt "$work/check-ckpt.out" "sessions: 4 live"
has check-ckpt "$work/check-ckpt.out" "generation-summary 3"
has check-ckpt "$work/check-ckpt.out" "result: good"
n_seg=$(ls "$work/ckpt" | grep -c '^wal-.*\.log$')
has check-ckpt "$work/check-ckpt.out" "segments: $n_seg, "
run dump-ckpt 0 "$cli" wal dump "$work/ckpt"
has dump-ckpt "$work/dump-ckpt.out" "48 wal-0000000000000030.log:32 checkpoint-begin 0"
grep -qE '^[0-9]+ wal-[0-9a-f]{16}\.log:[0-9]+ checkpoint-end 8 of the checkpoint begun at LSN 48$' \
	"$work/dump-ckpt.out" && ok "dump-ckpt: the checkpoint's end names its begin" ||
	fail "dump-ckpt: no checkpoint-end line naming LSN 48"

# --- torn: the last of several segments loses its last 5 bytes (a write cut short)
"$fixture" "$work/torn" --segment-bytes 1024 >/dev/null || fail "wal_fixture torn"
last=$(ls "$work/torn"/wal-*.log | tail -1)
truncate -s -5 "$last"
size=$(stat -c %s "$last")
run check-torn 0 "$cli" wal check "$work/torn"
has check-torn "$work/check-torn.out" "records: 46 replayed, LSN 1..46"
has check-torn "$work/check-torn.out" \
	"torn tail: $(basename "$last") at offset $((size - 20)), 20 bytes"
has check-torn "$work/check-torn.out" "the next head start cuts it"
has check-torn "$work/check-torn.out" "result: good, but for a torn tail"
[ "$(stat -c %s "$last")" = "$size" ] && ok "check-torn: nothing cut" || fail "check-torn cut the tail"
run dump-torn 0 "$cli" wal dump "$work/torn"
[ "$(wc -l <"$work/dump-torn.out")" = 46 ] && ok "dump-torn: 46 lines" ||
	fail "dump-torn: $(wc -l <"$work/dump-torn.out") lines, not 46"
has dump-torn "$work/dump-torn.err" "a torn tail: $(basename "$last") at offset $((size - 20))"

# --- corrupt: a byte flipped in the middle of the log; the record holding it is named
"$fixture" "$work/bad" >/dev/null || fail "wal_fixture bad"
at=1500
rec=$(awk -v at=$at '{ split($2, a, ":"); if (a[2] + 0 <= at) off = a[2] } END { print off }' "$d")
printf '\xa5' | dd of="$work/bad/$seg1" bs=1 seek=$at conv=notrunc status=none
run check-bad 2 "$cli" wal check "$work/bad"
has check-bad "$work/check-bad.err" "$seg1: record at offset $rec fails its checksum"
has check-bad "$work/check-bad.err" "corrupt in the middle"
has check-bad "$work/check-bad.out" "result: corrupt"
run dump-bad 2 "$cli" wal dump "$work/bad"
has dump-bad "$work/dump-bad.err" "$seg1: record at offset $rec"

# --- every record checks out, but one names a session no record opened
"$fixture" "$work/orphan" --orphan >/dev/null || fail "wal_fixture orphan"
run check-orphan 2 "$cli" wal check "$work/orphan"
has check-orphan "$work/check-orphan.err" "$seg1: record at offset 3517 (LSN 48, tokens) does not apply"
has check-orphan "$work/check-orphan.err" "names session 999999, which no record opened"
run dump-orphan 0 "$cli" wal dump "$work/orphan"

# --- an empty directory, and what is not a log directory or not a command
mkdir "$work/empty"
run check-empty 0 "$cli" wal check "$work/empty"
has check-empty "$work/check-empty.out" "an empty log"
run check-missing 2 "$cli" wal check "$work/missing"
has check-missing "$work/check-missing.err" "No such file or directory"
run check-file 2 "$cli" wal check "$last"
run usage-none 1 "$cli" wal
run usage-nodir 1 "$cli" wal check
run usage-two 1 "$cli" wal check "$work/clean" "$work/clean"
run usage-sub 1 "$cli" wal frob "$work/clean"
run usage-from 1 "$cli" wal dump --from x "$work/clean"
run usage-from0 1 "$cli" wal dump --from 0 "$work/clean"
run help 0 "$cli" wal --help
has help "$work/help.out" "superfluid wal dump [--from LSN] DIR"
run help-main 0 "$cli" --help
has help-main "$work/help-main.out" "superfluid wal check DIR"

[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]
