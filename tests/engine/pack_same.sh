#!/usr/bin/env bash
# Packed weights change nothing but speed: for random-weight models whose matrices the engine
# packs at load (Q4_K, Q6_K, the Q4_K_M mix, Q8_0; IQ4_XS, IQ4_NL, MXFP4, Q2_K, Q5_K on the llama and
# mixture-of-experts shapes; a mixture of experts' stacked matrices too;
# src/engine/gguf_pack.c), a prompt's prefill
# and 24 decode steps (superfluid model run) give the same token ids as the file's layout
# (SF_ENGINE_PACK=0), greedy and with seeded draws (which follow every bit of the
# probabilities: near-flat on random weights), at 1 and 2 threads; the load says it packed.
# Usage: pack_same.sh SUPERFLUID REPO_ROOT WORKDIR
# Exit 0 same, 1 not, 77 skipped: llama.cpp (for its vocabularies) could not be fetched (under
# CI=true that fails instead).
set -uo pipefail
sf=$1 root=$2 workdir=$3
mkdir -p "$workdir" || exit 1
work=$(mktemp -d "$workdir/pack.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
. "$root/tests/ref/fetch.sh"
llama_ref_need "$root" "$work"
fails=0
toks="1 450 2030 3578 29884 13 29871 306 626 263 1243 310 278 4799 1788 29889 29871"
for shape in test-llama test-qwen3 test-qwen3moe test-phi3 test-gpt-oss; do
	types="q4_k q6_k q4_k_m q8_0"
	case $shape in
	test-llama | test-qwen3moe) types="$types iq4_xs iq4_nl mxfp4 q2_k q5_k" ;;
	# gpt-oss: its experts with their biases packed (Q8_0), and beside MXFP4 experts
	test-gpt-oss) types="q8_0 mxfp4_moe" ;;
	esac
	for type in $types; do
		# Llama 2's 32,000 rows of vocabulary (a few seconds a file), but for test-qwen3/q8_0:
		# its tied output of 151,936 rows in Q8_0 (41 MB) is packed in two of gguf_pack.c's
		# 32 MiB chunks, the one matrix here over one (the vocabulary's 5 times the rows cost
		# some 10 s a file to make and more to run: qwen2's on every qwen-shaped file doubled
		# this test's time for nothing more it checks)
		vocab=llama-spm
		[ "$shape/$type" = test-qwen3/q8_0 ] && vocab=qwen2
		m=$work/m.gguf
		if ! "$sf" model make --shape "$shape" --type "$type" \
			--vocab "$LLAMA_SRC/models/ggml-vocab-$vocab.gguf" -o "$m" >"$work/make.out" 2>&1; then
			echo "FAIL $shape/$type: model make: $(tail -1 "$work/make.out")"
			fails=$((fails + 1))
			continue
		fi
		for th in 1 2; do
			# greedy, then seeded draws (which follow the probabilities' every bit)
			for samp in "" "--temperature 1 --seed 7"; do
				# shellcheck disable=SC2086
				"$sf" model run "$m" --tokens "$toks" --n 24 --ids --threads $th $samp \
					>"$work/packed.out" 2>"$work/err.p" &&
					SF_ENGINE_PACK=0 "$sf" model run "$m" --tokens "$toks" --n 24 --ids \
						--threads $th $samp >"$work/plain.out" 2>"$work/err.u" || {
					echo "FAIL $shape/$type: model run: $(tail -1 "$work/err.p" "$work/err.u")"
					fails=$((fails + 1))
					continue
				}
				what="$shape/$type threads=$th ${samp:-greedy}"
				if ! grep -q "matrices packed" "$work/err.p"; then
					echo "FAIL $what: the engine packed nothing: $(cat "$work/err.p")"
					fails=$((fails + 1))
				elif grep -q "matrices packed" "$work/err.u"; then
					echo "FAIL $what: SF_ENGINE_PACK=0 packed"
					fails=$((fails + 1))
				elif ! cmp -s "$work/packed.out" "$work/plain.out"; then
					echo "FAIL $what: packed tokens differ from the file layout's"
					diff "$work/packed.out" "$work/plain.out" | sed 's/^/     | /'
					fails=$((fails + 1))
				else
					n=$(grep -o '[0-9]* matrices packed' "$work/err.p")
					echo "ok   $what: $n, the same $(wc -w <"$work/packed.out") ids"
				fi
			done
		done
	done
done
[ $fails -eq 0 ]
