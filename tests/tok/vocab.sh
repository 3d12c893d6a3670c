#!/usr/bin/env bash
# tok.vocab: llama.cpp's own tokenizer test cases (tests/test-tokenizer-0.cpp): for every
# vocabulary of its test set whose tokenizer we have, each text of ggml-vocab-X.gguf.inp
# must give exactly the tokens of the line of ggml-vocab-X.gguf.out (no BOS, special tokens
# not parsed). The files come from llama.cpp at test time (tests/tok/lib.sh).
# Usage: vocab.sh TOK_DUMP SOURCE_DIR
set -u
dump=$1
root=$2
. "$root/tests/tok/lib.sh"
tok_find_llama "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
for v in $TOK_VOCABS; do
	f=$LLAMA_SRC/models/ggml-vocab-$v.gguf
	if [ ! -f "$f" ] || [ ! -f "$f.inp" ] || [ ! -f "$f.out" ]; then
		echo "FAIL $v: $f, .inp or .out is missing"
		fails=$((fails + 1))
		continue
	fi
	if ! "$dump" "$f" "$f.inp" 0 >"$tmp/ours" 2>"$tmp/err"; then
		echo "FAIL $v: $(cat "$tmp/err")"
		fails=$((fails + 1))
		continue
	fi
	sed 's/^ *//; s/ *$//' "$f.out" >"$tmp/want"
	if cmp -s "$tmp/want" "$tmp/ours"; then
		echo "ok   $v: $(wc -l <"$tmp/want") texts"
	else
		echo "FAIL $v: (< llama.cpp's .out, > ours; line = text number)"
		diff "$tmp/want" "$tmp/ours" | head -20
		fails=$((fails + 1))
	fi
done
# The rest of the set, for the record: what our loader says of each.
for inp in "$LLAMA_SRC"/models/ggml-vocab-*.gguf.inp; do
	v=${inp##*/ggml-vocab-}
	v=${v%.gguf.inp}
	case " $(echo $TOK_VOCABS) " in *" $v "*) continue ;; esac
	why=$("$dump" "${inp%.inp}" --info 2>&1 >/dev/null | head -1)
	echo "--   $v: not ours (${why:-loads, but is not in the list: add it?})"
done
[ "$fails" -eq 0 ] || { echo "$fails vocabularies failed"; exit 1; }
