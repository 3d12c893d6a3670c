#!/usr/bin/env bash
# tok.corpus: tests/tok/corpus.txt (and the texts of tok_rand) through llama.cpp's own
# tokenizer (llama-ref, tests/ref) and ours, for every vocabulary of ours in llama.cpp's test
# set, with and without special tokens parsed, with and without BOS: the same tokens.
# Usage: corpus.sh TOK_DUMP TOK_RAND SOURCE_DIR
set -u
dump=$1
rand=$2
root=$3
. "$root/tests/tok/lib.sh"
tok_find_llama "$root" ref
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sep=$'\n__ggml_vocab_test__\n'
"$rand" 1 2000 >"$tmp/rand.txt" || { echo "FAIL: tok_rand"; exit 1; }
fails=0
for v in $TOK_VOCABS $TOK_VOCABS_MORE; do
	f=$LLAMA_SRC/models/ggml-vocab-$v.gguf
	[ -f "$f" ] || { echo "FAIL $v: no $f"; fails=$((fails + 1)); continue; }
	for texts in "$root/tests/tok/corpus.txt" "$tmp/rand.txt"; do
		for mode in 0 1 2 3; do
			flags=()
			[ $((mode & 1)) -ne 0 ] && flags+=(--bos)
			[ $((mode & 2)) -ne 0 ] && flags+=(--specials)
			what="$v ${texts##*/} ${flags[*]:-plain}"
			if ! "$LLAMA_REF" tokenize "$f" "${flags[@]}" --sep "$sep" <"$texts" >"$tmp/ref" 2>"$tmp/err"; then
				echo "FAIL $what: llama-ref: $(tail -1 "$tmp/err")"
				fails=$((fails + 1))
				continue
			fi
			"$dump" "$f" "$texts" "$mode" >"$tmp/ours" 2>"$tmp/err" || {
				echo "FAIL $what: $(cat "$tmp/err")"
				fails=$((fails + 1))
				continue
			}
			if cmp -s "$tmp/ref" "$tmp/ours"; then
				echo "ok   $what: $(wc -l <"$tmp/ref") texts"
			else
				echo "FAIL $what: (< llama.cpp, > ours; line = text number)"
				diff "$tmp/ref" "$tmp/ours" | head -10
				fails=$((fails + 1))
			fi
		done
	done
done
[ "$fails" -eq 0 ] || { echo "$fails comparisons failed"; exit 1; }
