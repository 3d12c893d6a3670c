#!/usr/bin/env bash
# Builds llama-ref (llama_ref.c, llama_ref_bench.c, llama_ref_ppl.c, llama_ref_cpu.c,
# llama_ref_quant.c) with the system cc against a llama.cpp clone's headers (include/,
# ggml/include/: read in place, never copied) and links it to the prebuilt libraries of node-llama-cpp's npm package, with an rpath
# to them. The CPU backend variants (libggml-cpu-*.so) are loaded at run time from that folder.
# Usage: build.sh LLAMA_SRC LLAMA_LIB OUT   (scripts/llama-ref-fetch runs it)
set -euo pipefail
src=$1 lib=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)

for f in "$src/include/llama.h" "$src/ggml/include/ggml-backend.h"; do
	[ -f "$f" ] || { echo "build.sh: no $f (not a llama.cpp clone?)" >&2; exit 1; }
done
# The libraries' names carry the llama.cpp release (libllama.v0.5.0.so); libllama-common is
# not ours to link.
libs=()
for name in libllama libggml libggml-base; do
	found=
	for f in "$lib/$name.so" "$lib/$name".v*.so; do
		[ -f "$f" ] && { found=$f; break; }
	done
	[ -n "$found" ] || { echo "build.sh: no $name in $lib" >&2; exit 1; }
	libs+=("$found")
done

mkdir -p "$(dirname "$out")"
tmp=$out.tmp.$$
trap 'rm -f "$tmp"' EXIT
cc -std=gnu11 -O2 -g -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla \
	-Werror -isystem "$src/include" -isystem "$src/ggml/include" \
	-DLLAMA_REF_LIB="\"$lib\"" -o "$tmp" "$here/llama_ref.c" "$here/llama_ref_bench.c" \
	"$here/llama_ref_ppl.c" "$here/llama_ref_cpu.c" "$here/llama_ref_quant.c" \
	"${libs[@]}" -Wl,-rpath,"$lib" -ldl -lm
mv -f "$tmp" "$out"
