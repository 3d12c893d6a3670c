#!/usr/bin/env bash
# Split models (llama.cpp's gguf-split layout, PREFIX-00001-of-0000N.gguf): a random-weight
# model written in 3 parts by `superfluid model split` gives, through its first part, the ids
# of the whole file (superfluid model run, greedy and seeded, packed and not); llama.cpp loads
# the same parts and gives its own stream of the whole file (our parts are llama.cpp's
# layout); a part missing or renamed is refused, naming it.
# Usage: split_same.sh SUPERFLUID REPO_ROOT WORKDIR
# Exit 0 all the same, 1 not, 77 skipped: llama.cpp could not be fetched (under CI=true that
# fails instead).
set -uo pipefail
sf=$1 root=$2 workdir=$3
mkdir -p "$workdir" || exit 1
work=$(mktemp -d "$workdir/split.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
. "$root/tests/ref/fetch.sh"
llama_ref_need "$root" "$work"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
toks="1 450 2030 3578 29884 13 29871 306 626 263 1243 310 278"
m=$work/whole.gguf
"$sf" model make --shape test-llama --type q4_k_m --vocab "$LLAMA_SRC/models/ggml-vocab-llama-spm.gguf" \
	-o "$m" >"$work/out" 2>&1 || { echo "FAIL model make: $(tail -1 "$work/out")"; exit 1; }
"$sf" model split "$m" --parts 3 -o "$work/m" >"$work/out" 2>&1 ||
	{ echo "FAIL model split: $(tail -1 "$work/out")"; exit 1; }
first=$work/m-00001-of-00003.gguf
for pack in 1 0; do
	for samp in "" "--temperature 1 --seed 7"; do
		# shellcheck disable=SC2086
		a=$(SF_ENGINE_PACK=$pack SF_MODEL_QUIET=1 "$sf" model run "$m" --tokens "$toks" --n 16 --ids \
			--threads 2 $samp 2>"$work/err") || fail "run whole: $(tail -1 "$work/err")"
		# shellcheck disable=SC2086
		b=$(SF_ENGINE_PACK=$pack SF_MODEL_QUIET=1 "$sf" model run "$first" --tokens "$toks" --n 16 \
			--ids --threads 2 $samp 2>"$work/err") || fail "run parts: $(tail -1 "$work/err")"
		[ -n "$a" ] && [ "$a" = "$b" ] || fail "pack=$pack ${samp:-greedy}: whole '$a', parts '$b'"
	done
done
echo "ours: the 3 parts give the whole file's ids (greedy and seeded, packed and not)"
lw=$("$LLAMA_REF" greedy "$m" --tokens "$toks" --n 16 --threads 2 2>"$work/err") ||
	fail "llama-ref on the whole file: $(tail -1 "$work/err")"
lp=$("$LLAMA_REF" greedy "$first" --tokens "$toks" --n 16 --threads 2 2>"$work/err") ||
	fail "llama-ref on our parts: $(tail -1 "$work/err")"
[ -n "$lw" ] && [ "$lw" = "$lp" ] || fail "llama.cpp: whole '$lw', our parts '$lp'"
echo "llama.cpp: our 3 parts load and give its stream of the whole file"
mv "$work/m-00002-of-00003.gguf" "$work/gone.gguf"
if "$sf" model info "$first" >"$work/out" 2>&1; then
	fail "a missing part was not refused"
else
	grep -q "part 2 of 3.*m-00002-of-00003.gguf" "$work/out" ||
		fail "a missing part: '$(tail -1 "$work/out")' does not name it"
fi
echo "a missing part: $(tail -1 "$work/out")"
echo "$((fails == 0 ? 3 : 0)) passed, $fails failed"
[ $fails -eq 0 ]
