#!/usr/bin/env bash
# Our tensor types against llama.cpp's own (docs/ENGINE.md, "Tensor types"): for each type, a
# random-weight F32 model (test-llama shape, a real vocabulary) quantized by llama.cpp's
# llama_model_quantize (what its llama-quantize tool runs; --pure: every matrix in the type)
# and by ours (superfluid model quantize); then
#   - types_cmp: llama.cpp's dequantized rows of its file (ggml's to_float) are ours, bit for
#     bit, and our quantizer wrote the same bytes as llama.cpp's;
#   - our engine loads llama.cpp's file and runs it (8 greedy tokens);
# and llama.cpp's own mixes of the type (Q5_K_M, Q3_K_M...: its choices per tensor) load and
# run in our engine. The grid types (IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M) have
# no quantizer of ours: llama.cpp's file alone (quantized with a flat importance matrix, which
# it requires for most of them), its dequantized rows ours bit for bit, and our engine runs it
# (agreement: agree.sh's grid set).
# Usage: types_same.sh SUPERFLUID TYPES_CMP REPO_ROOT WORKDIR [TYPE|MIX...]
# Exit 0 all the same, 1 a type was not, 77 skipped: llama.cpp could not be fetched (under
# CI=true that fails instead).
set -uo pipefail
sf=$1 cmp=$2 root=$3 workdir=$4
shift 4
mkdir -p "$workdir" || exit 1
work=$(mktemp -d "$workdir/types.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
. "$root/tests/ref/fetch.sh"
llama_ref_need "$root" "$work"

# Our --type name and llama.cpp's ftype (its LLAMA_FTYPE_MOSTLY_* number) for --pure.
declare -A pure=([q5_k]=16 [q3_k]=11 [iq4_xs]=30 [q2_k]=10 [q4_1]=3 [q5_1]=9 [iq4_nl]=25
	[mxfp4]=38)
# llama.cpp's mixes: ftype numbers.
# (Q2_K_S and the IQ1/IQ2 types need an importance matrix: llama.cpp refuses them without.)
declare -A mixes=([q5_k_m]=17 [q5_k_s]=16 [q3_k_s]=11 [q3_k_m]=12 [q3_k_l]=13 [q2_k_mix]=10
	[iq4_xs_mix]=30 [q4_k_s]=14 [iq3_xxs_mix]=23 [iq3_m]=27 [iq2_m]=29)
# The grid types: llama.cpp's ftype whose --pure file is all that type (IQ2_S: IQ2_M's; IQ2_S's
# own is IQ2_XS).
declare -A grid=([iq3_xxs]=23 [iq3_s]=26 [iq2_xxs]=19 [iq2_xs]=20 [iq2_s]=29 [iq1_s]=24
	[iq1_m]=31)
list=("$@")
[ ${#list[@]} -gt 0 ] || list=("${!pure[@]}" "${!grid[@]}" "${!mixes[@]}")

toks="1 450 2030 3578 29884 13 29871 306 626 263 1243 310 278"
f32=$work/f32.gguf
"$sf" model make --shape test-llama --type f32 --vocab "$LLAMA_SRC/models/ggml-vocab-llama-spm.gguf" \
	-o "$f32" >"$work/make.out" 2>&1 || { echo "FAIL model make: $(tail -1 "$work/make.out")"; exit 1; }
fails=0
for t in "${list[@]}"; do
	lf=$work/llama-$t.gguf
	if [ -n "${pure[$t]:-}" ]; then
		"$LLAMA_REF" quantize "$f32" --ftype "${pure[$t]}" --pure --out "$lf" --threads 2 \
			>/dev/null 2>"$work/err" ||
			{ echo "FAIL $t: llama-ref quantize: $(tail -1 "$work/err")"; fails=$((fails + 1)); continue; }
		"$sf" model quantize "$f32" --type "$t" -o "$work/ours.gguf" >/dev/null 2>"$work/err" ||
			{ echo "FAIL $t: superfluid model quantize: $(tail -1 "$work/err")"; fails=$((fails + 1)); continue; }
		"$LLAMA_REF" dequant "$lf" --out "$work/dump" >/dev/null 2>"$work/err" ||
			{ echo "FAIL $t: llama-ref dequant: $(tail -1 "$work/err")"; fails=$((fails + 1)); continue; }
		"$cmp" "$work/dump" "$lf" "$work/ours.gguf" >"$work/cmp.out" 2>&1
		rc=$?
		sed "s/^/$t: /" "$work/cmp.out"
		[ $rc = 0 ] || { echo "FAIL $t: types_cmp exited $rc"; fails=$((fails + 1)); }
	elif [ -n "${grid[$t]:-}" ]; then
		"$LLAMA_REF" quantize "$f32" --ftype "${grid[$t]}" --pure --imatrix-flat --out "$lf" \
			--threads 2 >/dev/null 2>"$work/err" ||
			{ echo "FAIL $t: llama-ref quantize: $(tail -1 "$work/err")"; fails=$((fails + 1)); continue; }
		"$LLAMA_REF" dequant "$lf" --out "$work/dump" >/dev/null 2>"$work/err" ||
			{ echo "FAIL $t: llama-ref dequant: $(tail -1 "$work/err")"; fails=$((fails + 1)); continue; }
		"$cmp" "$work/dump" "$lf" >"$work/cmp.out" 2>&1
		rc=$?
		sed "s/^/$t: /" "$work/cmp.out"
		[ $rc = 0 ] || { echo "FAIL $t: types_cmp exited $rc"; fails=$((fails + 1)); }
		grep -qi "^${t} tensors=" "$work/cmp.out" ||
			{ echo "FAIL $t: llama.cpp's file holds no $t tensor"; fails=$((fails + 1)); }
	elif [ -n "${mixes[$t]:-}" ]; then
		im=
		case $t in iq2* | iq3*) im=--imatrix-flat ;; esac # llama.cpp requires one there
		"$LLAMA_REF" quantize "$f32" --ftype "${mixes[$t]}" --out "$lf" --threads 2 $im \
			>/dev/null 2>"$work/err" ||
			{ echo "FAIL $t: llama-ref quantize: $(tail -1 "$work/err")"; fails=$((fails + 1)); continue; }
	else
		echo "FAIL $t: not a type or mix this test knows"
		fails=$((fails + 1))
		continue
	fi
	# our engine runs llama.cpp's file
	if out=$(SF_MODEL_QUIET=1 "$sf" model run "$lf" --tokens "$toks" --n 8 --ids --threads 1 \
		2>"$work/err"); then
		echo "$t: llama.cpp's file runs: $(wc -w <<<"$out") ids"
	else
		echo "FAIL $t: superfluid model run on llama.cpp's file: $(tail -1 "$work/err")"
		fails=$((fails + 1))
	fi
	rm -f "$lf" "$work/ours.gguf" "$work/dump"
done
echo "llama.cpp $LLAMA_COMMIT: ${#list[@]} types, $fails failed"
[ $fails -eq 0 ]
