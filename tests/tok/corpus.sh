#!/usr/bin/env bash
# tok.corpus: tests/tok/corpus.txt, the texts of tok_rand, every text of llama.cpp's own
# tokenizer tests (its models/ggml-vocab-*.gguf.inp, once each) and tests/tok/cased.txt (cased
# words, contractions in every case, digit groups, CJK, combining marks, whitespace runs)
# through llama.cpp's own tokenizer (llama-ref, tests/ref) and ours, for every vocabulary of
# ours in llama.cpp's test set, with and without special tokens parsed, with and without BOS:
# the same tokens.
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
# The files' texts in one, each side run once per vocabulary in all four modes (llama-ref
# --all-modes, tok_dump's "all"): the vocabulary's load, most of a run's time, once instead of
# once per file and mode. The output is cut back into its parts (texts file x mode), each
# compared and told as before. inp.txt: llama.cpp's test texts, each once.
python3 - "$sep" "$LLAMA_SRC"/models/ggml-vocab-*.gguf.inp >"$tmp/inp.txt" <<'PY' ||
import sys
sep, seen, texts = sys.argv[1].encode(), set(), []
for p in sys.argv[2:]:
    d = open(p, "rb").read()
    for t in (d[: -len(sep)] if d.endswith(sep) else d).split(sep):
        if t not in seen:
            seen.add(t)
            texts.append(t)
sys.stdout.buffer.write(sep.join(texts))
PY
	{ echo "FAIL: llama.cpp's .inp texts"; exit 1; }
files=("$root/tests/tok/corpus.txt" "$tmp/rand.txt" "$tmp/inp.txt" "$root/tests/tok/cased.txt")
# all.txt: their texts, one separator between each two; the number of texts of each (a
# separator at the very end of a file closes its last text)
counts=($(python3 - "$sep" "$tmp/all.txt" "${files[@]}" <<'PY'
import sys
sep, texts = sys.argv[1].encode(), []
for p in sys.argv[3:]:
    d = open(p, "rb").read()
    t = (d[: -len(sep)] if d.endswith(sep) else d).split(sep)
    texts += t
    print(len(t))
open(sys.argv[2], "wb").write(sep.join(texts))
PY
))
[ ${#counts[@]} = ${#files[@]} ] || { echo "FAIL: the texts could not be joined"; exit 1; }
n_all=0
for c in "${counts[@]}"; do n_all=$((n_all + c)); done
# part FILE MODE I: lines of the I-th texts file's texts in MODE from FILE (all.txt's output).
part() {
	local from=$(($2 * n_all + 1)) k
	for ((k = 0; k < $3; k++)); do from=$((from + counts[k])); done
	sed -n "${from},$((from + counts[$3] - 1))p" "$1"
}
fails=0
# tekken (Mistral Nemo/Small) and gpt-4o (o200k's: Phi-4-mini, gpt-oss): llama.cpp's bundle
# has no such vocabulary, so Llama 3's pieces and merges with tokenizer.ggml.pre rewritten (the
# splitting and flags are what is compared)
EDITED="tekken gpt-4o"
for v in $EDITED; do
	python3 "$root/tests/api/gguf_edit.py" "$LLAMA_SRC/models/ggml-vocab-llama-bpe.gguf" \
		"$tmp/ggml-vocab-$v.gguf" --set-str tokenizer.ggml.pre $v >/dev/null ||
		{ echo "FAIL $v: gguf_edit.py"; fails=$((fails + 1)); }
done
for v in $TOK_VOCABS $TOK_VOCABS_MORE $EDITED; do
	f=$LLAMA_SRC/models/ggml-vocab-$v.gguf
	case " $EDITED " in *" $v "*) f=$tmp/ggml-vocab-$v.gguf ;; esac
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
	for i in "${!files[@]}"; do
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
