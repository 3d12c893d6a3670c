# Shared by the tokenizer tests that need llama.cpp (sourced).
#
# tok_find_llama ROOT [ref] sets LLAMA_SRC, the llama.cpp clone whose models/ggml-vocab-*
# files the tests read, and with "ref" also LLAMA_REF, the reference program (tests/ref):
#   SF_LLAMA_SRC set: that clone (and LLAMA_REF from $SF_LLAMA_REF when it is set);
#   else what ROOT/scripts/llama-ref-fetch prints (tests/ref/README).
# What cannot be found skips the test (exit 77, with the reason) or, under CI=true, fails it.

tok_missing() {
	if [ "${CI:-}" = true ]; then
		echo "FAIL (CI=true, so not skipped): $*" >&2
		exit 1
	fi
	echo "SKIP: $*" >&2
	exit 77
}

tok_find_llama() {
	local root=$1 need_ref=${2:-} vars
	LLAMA_REF=${SF_LLAMA_REF:-}
	if [ -n "${SF_LLAMA_SRC:-}" ]; then
		LLAMA_SRC=$SF_LLAMA_SRC
	else
		vars=$("$root/scripts/llama-ref-fetch") ||
			tok_missing "scripts/llama-ref-fetch could not get llama.cpp (see its message above)"
		eval "$vars"
	fi
	[ -d "$LLAMA_SRC/models" ] ||
		tok_missing "no llama.cpp clone at $LLAMA_SRC: set SF_LLAMA_SRC, or run scripts/llama-ref-fetch"
	if [ -n "$need_ref" ] && [ ! -x "${LLAMA_REF:-}" ]; then
		tok_missing "no llama-ref program (scripts/llama-ref-fetch builds it; or set SF_LLAMA_REF)"
	fi
	return 0
}

# The vocabularies of llama.cpp's test set whose tokenizers we have (all with .inp/.out).
TOK_VOCABS="llama-spm phi-3 llama-bpe qwen2 qwen35 gpt-2 mpt starcoder refact command-r falcon
deepseek-llm deepseek-coder"
# More vocabularies of ours in the set, without test cases of their own.
TOK_VOCABS_MORE="gpt-neox aquila baichuan"
