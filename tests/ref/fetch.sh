# Sourced by tests that need llama.cpp (scripts/llama-ref-fetch): llama_ref_need ROOT WORKDIR
# sets LLAMA_SRC, LLAMA_LIB and LLAMA_REF, or ends the test: skipped (exit 77, said so), but
# failed under CI=true, where the reference must be there.
llama_ref_need() {
	local vars
	if ! vars=$("$1/scripts/llama-ref-fetch" 2>"$2/fetch.err"); then
		if [ "${CI:-}" = true ]; then
			echo "FAIL $(tail -1 "$2/fetch.err")"
			sed 's/^/     | /' "$2/fetch.err"
			exit 1
		fi
		echo "SKIP $(tail -1 "$2/fetch.err") (under CI=true this fails)"
		exit 77
	fi
	eval "$vars"
	[ -x "${LLAMA_REF:-}" ] || { echo "FAIL llama-ref-fetch gave no LLAMA_REF"; exit 1; }
}
