#!/usr/bin/env bash
# logits_cmp on made-up logits whose figures are known: it passes what is within each bound,
# fails what is past it (the mean against the noise and the floor, the ceilings, one logit, a
# NaN, the teacher-forced argmax above the margin but not below), and refuses bad input.
# Usage: logits_cmp_test.sh LOGITS_CMP
set -uo pipefail
cmp=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# 8 rows of 1000 logits, N(0, 1) but for a top-1 of 5.0 at id 10 * row and a top-2 at id
# 10 * row + 1 of 5.0 - margin (margin 0.5 in rows 0-5, 0.01 in rows 6-7); FILE = ref + off
# where off is a per-row N(0, s) (or one logit moved, or a NaN).
python3 - "$work" <<'EOF' || exit 1
import math, random, struct, sys
w = sys.argv[1]
V, N = 1000, 8
rnd = random.Random(7)
ref = []
for r in range(N):
    row = [rnd.gauss(0, 1) for _ in range(V)]
    m = 0.5 if r < 6 else 0.01
    row[10 * r], row[10 * r + 1] = 5.0, 5.0 - m
    ref.append(row)
def std(row):
    mu = sum(row) / len(row)
    return math.sqrt(sum((x - mu) ** 2 for x in row) / len(row))
def write(name, rows):
    with open("%s/%s" % (w, name), "wb") as f:
        for row in rows:
            f.write(struct.pack("%df" % V, *row))
def noisy(s, seed):
    g = random.Random(seed)
    return [[x + g.gauss(0, s * std(row)) for x in row] for row in ref]
write("ref", ref)
write("noise", noisy(0.02, 1))
write("same", ref)
write("near", noisy(0.024, 2))   # 1.2 x the noise
write("far", noisy(0.04, 3))     # 2 x the noise
one = [list(row) for row in ref]
one[3][500] += 0.5 * std(ref[3])
write("one", one)
nan = [list(row) for row in ref]
nan[2][7] = float("nan")
write("nan", nan)
# Top-1 and top-2 swapped in row 6 (margin 0.01: below any bound) or row 2 (0.5: above).
low = [list(row) for row in ref]
low[6][60], low[6][61] = low[6][61], low[6][60]
write("swap_low", low)
high = [list(row) for row in ref]
high[2][20], high[2][21] = high[2][21], high[2][20]
write("swap_high", high)
write("short", ref[:7])
# A mixture of experts' routing parting on a row: a step of 0.5 std in that row alone.
def part(rows, at):
    g = random.Random(11)
    out = [list(row) for row in rows]
    for r in at:
        out[r] = [x + g.gauss(0, 0.5 * std(ref[r])) for x in out[r]]
    return out
write("part_one", part(noisy(0.024, 2), [4]))
write("part_all", part(noisy(0.024, 2), range(N)))
write("noise_part", part(noisy(0.02, 1), [5]))
EOF
# The stream: 3 prompt ids, then each row's top-1 is the next id (row i predicts id i + 1).
stream="1 2 3"
for r in 2 3 4 5 6; do stream="$stream $((10 * r))"; done
run() { "$cmp" --vocab 1000 "$work/$1" "$work/ref" "$work/noise" --name "$1" "${@:2}" >"$work/out" 2>&1; }
expect() { # expect STATUS WHAT FILE ARGS...: the exit status and, for 1, the FAIL line's words
	local want=$1 what=$2
	shift 2
	run "$@"
	local rc=$?
	if [ $rc != "$want" ]; then
		fail "$1 ${*:2}: exit $rc, not $want: $(tail -1 "$work/out")"
	elif [ "$want" = 1 ] && ! grep -q "^FAIL .*$what" "$work/out"; then
		fail "$1 ${*:2}: no FAIL line with '$what': $(head -1 "$work/out")"
	else
		ok "$1 ${*:2}: exit $rc${what:+ ($what)}"
	fi
}
tol="--noise-factor 1.5 --floor 0.01 --rms-ceiling 0.03 --max-ceiling 0.2"
expect 0 "" same $tol
grep -q "rms_mean=0.000000 .* argmax_same=8/8 .*verdict=ok" "$work/out" && ok "same: zero distance" ||
	fail "same: $(tail -1 "$work/out")"
expect 0 "" near $tol
expect 1 "x llama.cpp's own" far --noise-factor 1.5 --floor 0.01
expect 0 "" far --noise-factor 1.5 --floor 0.05                  # the floor over the noise
expect 1 "over the ceiling" near --noise-factor 0 --rms-ceiling 0.02
expect 1 "over twice the ceiling" far --noise-factor 0 --rms-ceiling 0.0185
expect 1 "std away" one $tol
expect 1 "our rms nan" nan $tol
"$cmp" --vocab 1000 "$work/same" "$work/ref" "$work/nan" --name noise-nan >"$work/out" 2>&1
[ $? = 1 ] && grep -q "^FAIL noise-nan: row 2: llama.cpp's token-by-token logits are not finite" \
	"$work/out" && ok "a NaN in llama.cpp's token-by-token logits fails" ||
	fail "NaN noise: $(head -1 "$work/out")"
expect 0 "" swap_low $tol --stream 3 "$stream" --margin 0.1
grep -q "first_miss=4 margin_at_miss=0.009[0-9] " "$work/out" &&
	ok "swap_low: the first miss is the stream's token 4, at the margin 0.01 (over a std of 1.02)" ||
	fail "swap_low: $(tail -1 "$work/out")"
expect 1 "our argmax 21 is not" swap_high $tol --stream 3 "$stream" --margin 0.1
grep -q "tf_checked=4 tf_agree=3 tf_below_bound=1" "$work/out" &&
	ok "swap_high: 4 rows checked, 1 below the bound" || fail "swap_high: $(tail -1 "$work/out")"
expect 0 "" swap_high --noise-factor 1.5 --floor 0.01 --stream 3 "$stream" --margin 0.6
expect 0 "" same $tol --stream 3 "$stream" --margin auto
grep -q "first_miss=none " "$work/out" && ok "same: no miss" || fail "same: $(tail -1 "$work/out")"
grep -q "margin_bound=0.1[0-9]* " "$work/out" && ok "--margin auto: twice the noise's largest" ||
	fail "--margin auto: $(tail -1 "$work/out")"
# --parted: rows past a row ceiling counted, at most max(rows / 16, 2 x the noise's).
parted() { "$cmp" --vocab 1000 "$work/$1" "$work/ref" "$work/noise_part" --name "$1" $tol "${@:2}" >"$work/out" 2>&1; }
parted part_one --parted
[ $? = 0 ] && grep -q "parted=1 noise_parted=1 .*verdict=ok" "$work/out" &&
	ok "--parted: one row parted where llama.cpp's own paths part on one" ||
	fail "--parted part_one: $(tail -1 "$work/out")"
parted part_one --parted --stream 3 "$stream" --margin auto
[ $? = 0 ] && grep -q "margin_bound=0.1[0-9]* tf_parted=2 " "$work/out" &&
	ok "--parted: the margin from the rows neither parted on, those rows not teacher-forced" ||
	fail "--parted part_one --stream: $(tail -1 "$work/out")"
parted part_one
[ $? = 1 ] && grep -q "^FAIL part_one: a row's rms" "$work/out" && ok "without --parted it fails" ||
	fail "part_one without --parted: $(tail -1 "$work/out")"
parted part_all --parted
[ $? = 1 ] && grep -q "^FAIL part_all: 8 rows parted from llama.cpp's (past a row ceiling), over 2" \
	"$work/out" && ok "--parted: every row parted fails" || fail "--parted part_all: $(head -1 "$work/out")"
# llama.cpp's own argmax must be its stream's where the margin is over the bound.
bad=${stream% *}
expect 1 "the bound is too small" same $tol --stream 3 "$bad 61" --margin 0.001
expect 2 "" short $tol
expect 2 "" same $tol --stream 3 "1 2 3"
expect 2 "" same $tol --stream 3 "${stream/20/1000}"
"$cmp" --vocab 999 "$work/same" "$work/ref" >/dev/null 2>&1
[ $? = 2 ] && ok "rows that are not whole refused" || fail "--vocab 999 not refused"
"$cmp" --vocab 1000 "$work/same" "$work/ref" --margin auto --stream 3 "$stream" >/dev/null 2>&1
[ $? = 2 ] && ok "--margin auto without the noise refused" || fail "--margin auto without noise"
"$cmp" --vocab 1000 "$work/same" "$work/none" >/dev/null 2>&1
[ $? = 2 ] && ok "a missing file refused" || fail "a missing file not refused"
"$cmp" --vocab 1000 "$work/same" "$work/ref" --floor -1 >/dev/null 2>&1
[ $? = 2 ] && ok "a negative floor refused" || fail "--floor -1 not refused"
[ $fails -eq 0 ]
