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
# Both files' texts in one (corpus.txt has no separator at its end), each side run once per
# vocabulary in all four modes (llama-ref --all-modes, tok_dump's "all"): the vocabulary's load,
# most of a run's time, once instead of eight times. The output is cut back into its eight
# parts (texts file x mode), each compared and told as before.
files=("$root/tests/tok/corpus.txt" "$tmp/rand.txt")
{ cat "${files[0]}"; printf '%s' "$sep"; cat "${files[1]}"; } >"$tmp/all.txt"
# The texts in each (a separator at the very end closes the last text).
counts=($(python3 -c 'import sys
for p in sys.argv[2:]:
    d = open(p, "rb").read()
    print(d.count(sys.argv[1].encode()) + (not d.endswith(sys.argv[1].encode())))' "$sep" "${files[@]}"))
n_all=$((counts[0] + counts[1]))
# part FILE MODE I: lines of the I-th texts file's texts in MODE from FILE (all.txt's output).
part() {
	local from=$((($2 * n_all) + ($3 == 1 ? counts[0] : 0) + 1))
	sed -n "${from},$((from + counts[$3] - 1))p" "$1"
}
fails=0
# tekken (Mistral Nemo/Small): llama.cpp's bundle has no such vocabulary, so Llama 3's pieces
# and merges with tokenizer.ggml.pre = tekken (its splitting and flags are what is compared)
python3 "$root/tests/api/gguf_edit.py" "$LLAMA_SRC/models/ggml-vocab-llama-bpe.gguf" \
	"$tmp/ggml-vocab-tekken.gguf" --set-str tokenizer.ggml.pre tekken >/dev/null ||
	{ echo "FAIL tekken: gguf_edit.py"; fails=$((fails + 1)); }
for v in $TOK_VOCABS $TOK_VOCABS_MORE tekken; do
	f=$LLAMA_SRC/models/ggml-vocab-$v.gguf
	[ $v = tekken ] && f=$tmp/ggml-vocab-tekken.gguf
	[ -f "$f" ] || { echo "FAIL $v: no $f"; fails=$((fails + 1)); continue; }
	if ! "$LLAMA_REF" tokenize "$f" --all-modes --sep "$sep" <"$tmp/all.txt" >"$tmp/ref" 2>"$tmp/err"; then
		echo "FAIL $v: llama-ref: $(tail -1 "$tmp/err")"
		fails=$((fails + 1))
		continue
	fi
	"$dump" "$f" "$tmp/all.txt" all >"$tmp/ours" 2>"$tmp/err" || {
		echo "FAIL $v: $(cat "$tmp/err")"
		fails=$((fails + 1))
		continue
	}
	for want in ref ours; do
		[ "$(wc -l <"$tmp/$want")" = $((4 * n_all)) ] || {
			echo "FAIL $v: $want gave $(wc -l <"$tmp/$want") lines for 4 x $n_all texts"
			fails=$((fails + 1))
			continue 2
		}
	done
	for i in 0 1; do
		for mode in 0 1 2 3; do
			flags=()
			[ $((mode & 1)) -ne 0 ] && flags+=(--bos)
			[ $((mode & 2)) -ne 0 ] && flags+=(--specials)
			what="$v ${files[i]##*/} ${flags[*]:-plain}"
			part "$tmp/ref" $mode $i >"$tmp/ref.part"
			part "$tmp/ours" $mode $i >"$tmp/ours.part"
			if cmp -s "$tmp/ref.part" "$tmp/ours.part"; then
				echo "ok   $what: $(wc -l <"$tmp/ref.part") texts"
			else
				echo "FAIL $what: (< llama.cpp, > ours; line = text number)"
				diff "$tmp/ref.part" "$tmp/ours.part" | head -10
				fails=$((fails + 1))
			fi
		done
	done
done
[ "$fails" -eq 0 ] || { echo "$fails comparisons failed"; exit 1; }
