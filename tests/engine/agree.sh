#!/usr/bin/env bash
# Our GGUF engine against llama.cpp (docs/ENGINE_AGREEMENT.md): for each case, a random-weight
# model of one shape and tensor type with a real vocabulary, a real text tokenized by
# llama.cpp, then
#   - llama.cpp's greedy stream of 64 tokens after the prompt (llama-ref greedy);
#   - the logits of every position of prompt + stream: ours (superfluid model logits),
#     llama.cpp's in one batch and llama.cpp's token by token (its own spread, the noise);
#   - logits_cmp judges ours against the batch within the tolerance of the type's class and
#     checks our argmax against llama.cpp's stream where its margin is over the noise bound
#     (teacher forcing);
#   - our free-running greedy stream (superfluid model run) against llama.cpp's: identical
#     for the float types, its agreement length reported for the others.
# Usage: agree.sh SUPERFLUID LOGITS_CMP REPO_ROOT WORKDIR SET...
#   SET: llama, qwen2, qwen3 (the small test shape of that architecture in every type);
#   gemma, gemma2, gemma3 (their test shapes in the float types, Q8_0 and others spread, and
#   a file of llama.cpp's own quantizer: TYPE llama.T); gemma3-1b, gemma-2-2b (2 layers);
#   qwen3moe, mixtral (mixtures of experts: their test shapes likewise, judged with
#   logits_cmp --parted); qwen3-30b-a3b (one layer at full width); yarn (test-qwen3-yarn);
#   smollm3 (test-smollm3 in five types, SmolLM3-3B's width with 4 layers); olmo2, granite
#   (likewise, 2 layers); phi3 (likewise, and llama.cpp's own Q8_0 file); mistral-nemo
#   (Mistral Nemo's width, 2 layers, a tekken vocabulary); longrope (test-phi3-longrope,
#   test-phi4 and Phi-3.5-mini's and Phi-4-mini's widths, the last with a gpt-4o vocabulary,
#   at contexts @4096 and @8192, which pick LongRoPE's short and long factors); qwen35
#   (test-qwen35 in six types, Qwen3.5-0.8B's width with 4 layers); qwen35moe (test-qwen35moe
#   in five types); gptoss (test-gpt-oss in five types and llama.cpp's own MXFP4_MOE file,
#   gpt-oss-20b's width with 2 layers); mistral3 (test-mistral3 in three types: YaRN's betas
#   and log multiplier, the attention temperature; extended: Ministral-3-3B's width, 2 layers);
#   granitemoe (test-granitemoe in three types, test-granitemoe-shared in two; extended:
#   Granite-3.1-3B-A800M's width, 2 layers); granitehybrid (Granite 4's Mamba-2 hybrid:
#   test-granitehybrid in five types, test-granitehybrid-moe in two; extended: Q6_K and
#   Granite-4.0-H-Micro's width, 2 layers);
#   kq8 (keys cached as Q8_0 on both sides, --cache-type-k q8_0: five cases, SHAPE/TYPE+kq8);
#   grid (the IQ1/IQ2/IQ3 grid types: llama.cpp's files of them, alone and its mixes);
#   qwen2.5-0.5b, qwen3-0.6b, llama-3.2-1b (that model at full width, 2 layers, in Q8_0 and
#   Q4_K_M, and F16 for Llama-3.2-1B); real (those three); or one case
#   SHAPE/TYPE[/LAYERS][@CTX][+kq8] (CTX: the session's context on both sides; +kq8: keys
#   cached as Q8_0 on both sides).
# The default run (ctest, scripts/test) runs each set's default cases: every architecture and
# shape in the float types and at least one type of each rounded class, and each type in at
# least one set; SF_TEST_FULL=1 (scripts/test --full) adds the rounded types that other sets
# already carry (the extended run; the last line counts the cases left to it).
# Exit 0 all agree, 1 a case did not, 77 skipped: llama.cpp could not be fetched (under CI=true
# that fails instead). The models live in WORKDIR/<pid> and are removed after (SF_AGREE_KEEP=1
# keeps them). SF_AGREE_VERBOSE=1 prints every row's figures. SF_AGREE_VARIANTS="haswell x64"
# also runs llama.cpp's greedy stream on those CPU builds of it (llama-ref --cpu) and reports
# how far each agrees with the best build's stream and with ours (llama.cpp against itself).
set -uo pipefail
sf=$1 cmp=$2 root=$3 workdir=$4
shift 4
[ $# -gt 0 ] || { echo "usage: agree.sh SUPERFLUID LOGITS_CMP REPO_ROOT WORKDIR SET..." >&2; exit 2; }
mkdir -p "$workdir" || exit 1
work=$(mktemp -d "$workdir/agree.XXXXXX") || exit 1
[ "${SF_AGREE_KEEP:-}" = 1 ] || trap 'rm -rf "$work"' EXIT
fails=0

. "$root/tests/ref/fetch.sh"
llama_ref_need "$root" "$work"
models=$LLAMA_SRC/models

# Real texts (ours), one per architecture, each of 20 to 40 tokens: with the 64 of the
# stream the batch holds over 64 queries, so llama.cpp's batch and token-by-token attention
# take different paths (tiled F32, one-chunk F16) and the noise is its real spread.
text_llama='The old lighthouse keeper climbed the spiral stairs every evening, counting each step,
because the lamp had to be lit before the fishing boats came home.'
text_qwen2='def fibonacci(n):
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a'
text_qwen3='Water boils at 100 °C at sea level. 水在海平面上的沸点是一百摄氏度。Why does it boil at a lower temperature in the mountains?'
text_gemma='<start_of_turn>user
Translate to French: "The train leaves at 7:45 from platform 3, so we should be there by 7:30."<end_of_turn>
<start_of_turn>model
'

# The tolerance of each class of types, all distances over the row's std (the figures they
# come from: docs/ENGINE_AGREEMENT.md). The class is what llama.cpp does to the activations
# that meet the weights, as we do:
#   float   F32, F16: kept (F16 for F16 weights); the paths differ in the order of sums and in
#           the attention's F16/F32 steps only.
#   bf16    rounded to BF16.
#   q8_0    Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4: quantized to Q8_0 blocks of 32; Q4_1, Q5_1 to
#           Q8_1 (Q8_0's and d * sum as a half).
#   q8_k    the K types (Q2_K..Q6_K, IQ4_XS), the Q4_K_M and Q5_K_M mixes: quantized to Q8_K
#           blocks of 256.
# A tiny difference upstream flips a rounding, so the rounded classes differ by about what
# llama.cpp's own batch and token-by-token results differ by. Each: our mean RMS at most
# 1.5 x llama.cpp's own (or the floor), and absolute ceilings on the mean RMS (twice it on a
# row) and on any one logit.
tolerance() {
	case $1 in
	f32 | f16) echo "--noise-factor 1.5 --floor 0.001 --rms-ceiling 0.004 --max-ceiling 0.02" ;;
	bf16) echo "--noise-factor 1.5 --floor 0.003 --rms-ceiling 0.012 --max-ceiling 0.06" ;;
	q8_0 | q4_0 | q5_0 | q4_1 | q5_1 | iq4_nl | mxfp4 | mxfp4_moe)
		echo "--noise-factor 1.5 --floor 0.01 --rms-ceiling 0.03 --max-ceiling 0.18" ;;
	*) echo "--noise-factor 1.5 --floor 0.01 --rms-ceiling 0.04 --max-ceiling 0.24" ;;
	esac
}

# ext T...: the extended run's cases (SF_TEST_FULL=1), each named in the last line otherwise.
cases=() left=()
ext() {
	if [ "${SF_TEST_FULL:-}" = 1 ]; then cases+=("$@"); else left+=("$@"); fi
}
for set in "$@"; do
	case $set in
	gemma | gemma2 | gemma3)
		# the float types and one of each activation class, then the others spread
		more=
		case $set in
		gemma) more="q4_0 q6_k iq4_nl" ;;
		gemma2) more="bf16 q5_0 q4_k_m q3_k llama.q8_0" ;;
		gemma3) more="q4_k q5_k_m q2_k mxfp4 llama.q4_k_m" ;;
		esac
		for t in f32 f16 q8_0 $more; do
			cases+=("test-$set/$t")
		done ;;
	# their width in Q8_0; Q4_K_M in the extended run (test-gemma2/3 carry it; its Q5_0/Q8_0
	# stand-ins for gemma3-1b's rows of 1,152, not whole 256-blocks, qwen2.5-0.5b/q4_k_m's 896)
	gemma-2-2b | gemma3-1b) cases+=("$set/q8_0/2"); ext "$set/q4_k_m/2" ;;
	qwen3moe | mixtral)
		more=
		case $set in
		# (the extended run: BF16 and Q4_K_M, which test-qwen35moe's experts carry, and
		# llama.cpp's own Q4_K_M file; its own MoE files: mixtral's, gptoss's)
		qwen3moe) more="q4_0 q5_k mxfp4"
			ext test-$set/bf16 test-$set/q4_k_m test-$set/llama.q4_k_m ;;
		mixtral) more="q6_k iq4_xs llama.q8_0" ;;
		esac
		for t in f32 f16 q8_0 $more; do
			cases+=("test-$set/$t")
		done ;;
	# Qwen3-30B-A3B at full width (128 experts of 768, 8 a token), one layer
	qwen3-30b-a3b) cases+=("$set/q4_k_m/1" "$set/q8_0/1") ;;
	# SmolLM3: no rope on layer 3 (of 4); at SmolLM3-3B's width, 4 layers
	smollm3)
		for t in f32 f16 q8_0 q4_k_m; do
			cases+=("test-smollm3/$t")
		done
		cases+=("smollm3-3b/q8_0/4")
		ext test-smollm3/q6_k test-smollm3/llama.q8_0 ;;
	# OLMo 2: post-norms only, q/k norms over all heads; at OLMo-2-1B's width, 2 layers
	olmo2)
		for t in f32 f16 q8_0 q4_k_m llama.q8_0; do
			cases+=("test-olmo2/$t")
		done
		cases+=("olmo2-1b/q8_0/2")
		ext test-olmo2/q5_0 ;;
	# Granite: multipliers of the embeddings, residuals, scores and logits; at
	# Granite-3.3-2B's width, 2 layers
	granite)
		for t in f32 f16 q8_0 q4_k_m llama.q8_0; do
			cases+=("test-granite/$t")
		done
		cases+=("granite-3.3-2b/q8_0/2")
		ext test-granite/q4_0 ;;
	# Phi-3: fused q/k/v and gate/up, queries pre-scaled; at Phi-3-mini's width, 2 layers.
	# No F16 here: its stream's token 40 is a tie (0.0014 std) where llama.cpp's own F32
	# paths part, and our F16 takes the other side (every other check within the tolerance).
	phi3)
		for t in f32 bf16 q8_0 q4_k_m llama.q8_0; do
			cases+=("test-phi3/$t")
		done
		cases+=("phi-3-mini-4k/q8_0/2")
		ext test-phi3/q6_k ;;
	# LongRoPE (factors over an original context of 4,096): each shape at a context within it
	# (@4096: the short factors) and past it (@8192: the long ones), test-phi4 with 48 of 64
	# dimensions rotated; Phi-3.5-mini's and Phi-4-mini's widths, 2 layers
	longrope)
		for t in f32 f16 q8_0; do
			cases+=("test-phi3-longrope/$t@4096" "test-phi3-longrope/$t@8192")
		done
		cases+=("test-phi4/f32@4096" "test-phi4/f32@8192" "test-phi4/bf16@4096"
			"test-phi4/q4_k_m@8192" "test-phi4/llama.q8_0@8192"
			"phi-3.5-mini/q8_0/2@8192" "phi-4-mini/q8_0/2@4096") ;;
	# Mistral Nemo (Llama's with heads of 128 in 5120) with a tekken vocabulary, 2 layers
	# (Q4_K_M's quantizer takes two minutes of this width: by hand, mistral-nemo-12b/q4_k_m/2)
	mistral-nemo) cases+=("mistral-nemo-12b/q8_0/2") ;;
	# Qwen3.5: Gated DeltaNet layers (3 of 4) and a gated attention; at Qwen3.5-0.8B's width
	# with 4 layers (the fourth the attention)
	qwen35)
		for t in f32 f16 bf16 q8_0 q4_k_m; do
			cases+=("test-qwen35/$t")
		done
		cases+=("qwen3.5-0.8b/q8_0/4")
		ext test-qwen35/q6_k test-qwen35/llama.q8_0 ;; # (test-qwen35moe/q6_k, llama.q8_0: the same layers)
	# Qwen3.5-MoE: those layers with 16 experts (4 a token) and a gated shared expert. No F16
	# here: its stream's token 7 is a tie (0.0016 std) where our F16 takes the other side
	# (its logits within the tolerance: 0.00063 against llama.cpp's own 0.00068).
	qwen35moe)
		for t in f32 bf16 q8_0 q4_k_m q6_k llama.q8_0; do
			cases+=("test-qwen35moe/$t")
		done ;;
	# gpt-oss: attention sinks, biases, a window (40 here) on every other layer, experts with
	# biases chosen by their logits and weighted by the softmax of those, SwiGLU-OAI, YaRN 32
	# over 4,096; MXFP4 experts as gpt-oss's own files have them (mxfp4_moe: experts MXFP4,
	# the rest Q8_0; llama.mxfp4_moe: llama.cpp's quantizer's MXFP4_MOE file of our F32 one)
	gptoss)
		for t in f32 f16 bf16 q8_0 mxfp4_moe llama.mxfp4_moe; do
			cases+=("test-gpt-oss/$t")
		done
		cases+=("gpt-oss-20b/mxfp4_moe/2") ;; # its width, 2 layers (some 90 s)
	# Ministral 3 (mistral3): YaRN with its own betas (a ramp over pairs 3-11) and log
	# multiplier, Llama 4's attention temperature stepping every 32 positions (the original
	# context here), so over the prompt and stream it takes three values; at Ministral-3-3B's
	# width (heads of 128 in 3072, tied, YaRN 16 over 16,384) with 2 layers in the extended run
	mistral3)
		for t in f32 f16 q8_0 llama.q8_0; do
			cases+=("test-mistral3/$t")
		done
		ext test-mistral3/q4_k_m "ministral-3-3b/q8_0/2" ;;
	# Granite MoE: Granite's multipliers with experts (8 of 256, 2 a token), and a shared
	# expert beside them (granitemoeshared's, ungated); at Granite-3.1-3B-A800M's width
	# (40 experts of 512, 8 a token) with 2 layers in the extended run
	granitemoe)
		for t in f32 f16 q8_0 llama.q8_0; do
			cases+=("test-granitemoe/$t")
		done
		cases+=("test-granitemoe-shared/f32" "test-granitemoe-shared/q4_k_m")
		ext test-granitemoe/q4_k_m "granite-3.1-3b-a800m/q8_0/2" ;;
	# Granite 4's hybrid: Mamba-2 layers (3 of 4) and an attention layer without rope,
	# Granite's multipliers; with experts, a shared expert and rope; at Granite-4.0-H-Micro's
	# width (64 Mamba heads of 64, states of 128) with 2 (Mamba-2) layers in the extended run
	granitehybrid)
		for t in f32 f16 bf16 q8_0 q4_k_m; do
			cases+=("test-granitehybrid/$t")
		done
		cases+=("test-granitehybrid-moe/f32" "test-granitehybrid-moe/q8_0")
		ext test-granitehybrid/q6_k "granite-4.0-h-micro/q8_0/2" ;;
	# YaRN (factor 4 over 32,768, as DeepSeek-R1-0528-Qwen3-8B's) on the Qwen3 test shape
	yarn)
		for t in f32 f16 q8_0 llama.q8_0; do
			cases+=("test-qwen3-yarn/$t")
		done
		ext test-qwen3-yarn/q4_k_m ;;
	llama)
		# every type (32,000 rows of vocabulary: a second or two a case)
		for t in f32 f16 bf16 q8_0 q4_0 q5_0 q4_k q6_k q4_k_m q5_k q3_k q2_k iq4_xs q4_1 \
			mxfp4; do
			cases+=("test-$set/$t")
		done ;;
	qwen2 | qwen3)
		# the float types, Q8_0, one K type and one Q8_1 type each (Q5_1: only here); every
		# other type in the extended run (a tied vocabulary of 151,936 rows: some 10 s a case,
		# where test-llama's take 2; those types' kernels are test-llama's every type)
		more= more_ext=
		case $set in
		qwen2) more="q4_k_m q5_1" more_ext="q4_0 q5_0 q4_k q6_k q5_k_m q3_k iq4_nl" ;;
		qwen3) more="q6_k q4_1" more_ext="q4_0 q5_0 q4_k q4_k_m q5_k q2_k q5_1" ;;
		esac
		for t in f32 f16 bf16 q8_0 $more; do
			cases+=("test-$set/$t")
		done
		for t in $more_ext; do
			ext "test-$set/$t"
		done ;;
	# The grid types (IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M: no quantizer of
	# ours): llama.cpp's files of our F32 one, with a flat importance matrix: its IQ3_XXS mix
	# (what people pull; it holds IQ3_XXS and IQ3_S) and each IQ2, IQ1 type alone (.pure: every
	# matrix, the embeddings too); its IQ3_M mix and a pure IQ3_S in the extended run
	# (iq3_xxs.pure, iq2_m, test-qwen3/llama.iq3_s.pure agreed as well, by hand:
	# docs/ENGINE_AGREEMENT.md)
	grid)
		for t in iq3_xxs iq2_xxs.pure iq2_xs.pure iq2_s.pure iq1_s.pure iq1_m.pure; do
			cases+=("test-llama/llama.$t")
		done
		ext test-llama/llama.iq3_m test-llama/llama.iq3_s.pure ;;
	qwen2.5-0.5b | qwen3-0.6b) cases+=("$set/q8_0/2" "$set/q4_k_m/2") ;;
	# Keys cached as Q8_0 (--cache-type-k q8_0; llama.cpp turns queries and keys by a
	# Walsh-Hadamard rotation first, and so do we): float weights only. With keys unlike its
	# values llama.cpp's flash attention takes one path for a batch and a token alike, so its
	# own spread is zero and a rounded weight type's tolerance (its spread x 1.5) has nothing
	# to go by; with float weights the floor (0.01 of a row's std) judges. Gemma 3's window,
	# Qwen2.5-0.5B's width.
	kq8) cases+=("test-qwen2/f32+kq8" "test-llama/f16+kq8" "test-qwen3/f32+kq8"
		"test-gemma3/f16+kq8" "qwen2.5-0.5b/f16/2+kq8") ;;
	# F16 too: the only shape with Llama 3's rope factors, seen best by the float tolerance.
	# (Q4_K_M at a real width with whole 256-blocks: qwen3-0.6b's; this one's extended.)
	llama-3.2-1b) cases+=("$set/q8_0/2" "$set/f16/2"); ext "$set/q4_k_m/2" ;;
	real)
		for s in qwen2.5-0.5b qwen3-0.6b; do
			cases+=("$s/q8_0/2" "$s/q4_k_m/2")
		done
		cases+=("llama-3.2-1b/q8_0/2" "llama-3.2-1b/q4_k_m/2" "llama-3.2-1b/f16/2") ;;
	*/*) cases+=("$set") ;;
	*) echo "agree.sh: unknown set '$set'" >&2; exit 2 ;;
	esac
done

# same_prefix "A..." "B...": how many tokens the two streams share before they part.
same_prefix() {
	local a=($1) b=($2) i
	for ((i = 0; i < ${#a[@]} && i < ${#b[@]}; i++)); do
		[ "${a[i]}" = "${b[i]}" ] || break
	done
	echo "$i"
}

# One case: SHAPE/TYPE[/LAYERS].
declare -A prompts # "VOCAB ARCH": the text's ids
run_case() {
	local shape=${1%%/*} rest=${1#*/} type layers arch vocab text ctx= kq8=
	# +kq8: keys cached as Q8_0 on both sides (--cache-type-k q8_0).
	case $rest in *+kq8) kq8=q8_0 rest=${rest%+kq8} ;; esac
	# @CTX: the context of the session on both sides (llama-ref --ctx, superfluid --ctx-len),
	# which picks LongRoPE's factors
	case $rest in *@*) ctx=${rest##*@} rest=${rest%@*} ;; esac
	type=${rest%%/*}
	layers=
	[ "$rest" != "$type" ] && layers=${rest#*/}
	case $shape in
	test-gemma*) arch=gemma vocab=llama-spm ;;
	test-mixtral | mixtral*) arch=llama vocab=llama-spm ;;
	test-qwen3moe | qwen3-30b*) arch=qwen3 vocab=qwen2 ;;
	# gpt-oss's o200k vocabulary is not in llama.cpp's bundle: its pre-tokenizer (gpt-4o) on
	# Llama 3's pieces, with the mixed text (CJK, a degree sign, digits)
	test-gpt-oss | gpt-oss-*) arch=qwen3 vocab=gpt-4o ;;
	test-qwen35 | test-qwen35moe | qwen3.5-*) arch=qwen3 vocab=qwen35 ;;
	gemma*) arch=gemma vocab=gemma ;;
	test-llama) arch=llama vocab=llama-spm ;;
	test-smollm3 | smollm3* | test-olmo2 | olmo2*) arch=llama vocab=llama-bpe ;;
	test-granite | test-granitemoe* | test-granitehybrid* | granite*) arch=llama vocab=refact ;;
	test-mistral3) arch=llama vocab=llama-spm ;;
	ministral-*) arch=llama vocab=tekken ;;
	phi-4-mini) arch=llama vocab=gpt-4o ;;
	test-phi3 | test-phi3-* | test-phi4 | phi-*) arch=llama vocab=phi-3 ;;
	mistral-*) arch=llama vocab=tekken ;;
	llama-*) arch=llama vocab=llama-bpe ;;
	test-qwen2 | qwen2*) arch=qwen2 vocab=qwen2 ;;
	test-qwen3 | test-qwen3-yarn | qwen3*) arch=qwen3 vocab=qwen2 ;;
	*) echo "FAIL $1: unknown shape"; return 1 ;;
	esac
	local name="$shape/$type${layers:+/${layers}L}${ctx:+@$ctx}${kq8:++kq8}" m=$work/m.gguf t0=$SECONDS
	vocab=$models/ggml-vocab-$vocab.gguf
	if [ "${vocab##*-}" = gemma.gguf ]; then
		# a Gemma-3-like SentencePiece vocabulary from the bundle's Gemma 4 pieces
		vocab=$work/vocab-gemma.gguf
		[ -f "$vocab" ] || python3 "$root/tests/engine/gemma_vocab.py" \
			"$models/ggml-vocab-gemma-4.gguf" "$vocab" >"$work/err" 2>&1 ||
			{ echo "FAIL $1: gemma_vocab.py: $(tail -1 "$work/err")"; return 1; }
	fi
	case ${vocab##*ggml-vocab-} in
	tekken.gguf | gpt-4o.gguf)
		# no tekken or gpt-4o vocabulary in llama.cpp's bundle: Llama 3's with the pre rewritten
		local pre=${vocab##*ggml-vocab-}
		pre=${pre%.gguf}
		vocab=$work/vocab-$pre.gguf
		[ -f "$vocab" ] || python3 "$root/tests/api/gguf_edit.py" \
			"$models/ggml-vocab-llama-bpe.gguf" "$vocab" --set-str tokenizer.ggml.pre $pre \
			>"$work/err" 2>&1 || { echo "FAIL $1: gguf_edit.py: $(tail -1 "$work/err")"; return 1; }
		;;
	esac
	eval "text=\$text_$arch"
	rm -f "$work"/*.f32 "$m"
	# TYPE llama.T: the file written by llama.cpp's own quantizer (llama_model_quantize, what
	# llama-quantize runs) from our F32 one, so that our reader meets a file we did not write
	local make_type=$type lt= lt_opts=
	if [ "${type#llama.}" != "$type" ]; then
		lt=${type#llama.} make_type=f32
		declare -A ftypes=([q8_0]=7 [q4_0]=2 [q4_k_m]=15 [q5_k_m]=17 [q6_k]=18 [mxfp4_moe]=38
			[iq3_xxs]=23 [iq3_s]=26 [iq3_m]=27 [iq2_xxs]=19 [iq2_xs]=20 [iq2_s]=29 [iq2_m]=29
			[iq1_s]=24 [iq1_m]=31)
		# T.pure: every matrix in the type (IQ2_S: IQ2_M's pure file; IQ2_S's own is IQ2_XS);
		# the IQ2/IQ3 types with a flat importance matrix (llama.cpp requires one for most)
		lt_opts=
		case $lt in *.pure) lt=${lt%.pure} lt_opts=--pure ;; esac
		case $lt in iq1* | iq2* | iq3*) lt_opts="$lt_opts --imatrix-flat" ;; esac
		[ -n "${ftypes[$lt]:-}" ] || { echo "FAIL $name: no llama.cpp file type for $lt"; return 1; }
	fi
	if ! "$sf" model make --shape "$shape" --type "$make_type" --vocab "$vocab" \
		${layers:+--layers "$layers"} -o "$m" >"$work/make.out" 2>&1; then
		echo "FAIL $name: model make: $(tail -1 "$work/make.out")"
		return 1
	fi
	if [ -n "$lt" ]; then
		"$LLAMA_REF" quantize "$m" --ftype "${ftypes[$lt]}" $lt_opts --out "$m.q" --threads 2 \
			>/dev/null 2>"$work/err" && mv "$m.q" "$m" ||
			{ echo "FAIL $name: llama-ref quantize: $(tail -1 "$work/err")"; return 1; }
	fi
	local t_make=$((SECONDS - t0)) prompt stream ours seq n_prompt
	# The prompt, tokenized once per vocabulary and text; the stream and both logits files
	# from one llama-ref run (greedy --logits-out --inc-out: what logits --out and logits
	# --incremental give, bit for bit, without loading the model twice more).
	if [ -z "${prompts[$vocab $arch]:-}" ]; then
		prompts[$vocab $arch]=$(printf '%s' "$text" | "$LLAMA_REF" tokenize "$vocab" --bos 2>"$work/err") ||
			{ echo "FAIL $name: llama-ref: $(tail -1 "$work/err")"; prompts[$vocab $arch]=; return 1; }
	fi
	prompt=${prompts[$vocab $arch]}
	stream=$("$LLAMA_REF" greedy "$m" --tokens "$prompt" --n 64 --threads 1 ${ctx:+--ctx "$ctx"} \
		${kq8:+--cache-type-k $kq8} \
		--logits-out "$work/ref.f32" --inc-out "$work/inc.f32" 2>"$work/err") &&
		seq="$prompt $stream" ||
		{ echo "FAIL $name: llama-ref: $(tail -1 "$work/err")"; return 1; }
	# Without @CTX both sides' context is the sequence's (llama-ref's default; ours for logits,
	# and given to run, whose own default is the model's trained context)
	SF_MODEL_QUIET=1 "$sf" model logits "$m" --tokens "$seq" --threads 1 -o "$work/ours.f32" \
		${ctx:+--ctx-len "$ctx"} ${kq8:+--cache-type-k $kq8} 2>"$work/err" &&
		ours=$(SF_MODEL_QUIET=1 "$sf" model run "$m" --tokens "$prompt" --n 64 --ids \
			${kq8:+--cache-type-k $kq8} \
			--threads 1 --ctx-len "${ctx:-$(wc -w <<<"$seq")}" 2>"$work/err") ||
		{ echo "FAIL $name: superfluid: $(tail -1 "$work/err")"; return 1; }
	n_prompt=$(wc -w <<<"$prompt")
	local n_seq n_vocab
	n_seq=$(wc -w <<<"$seq")
	if [ "$n_prompt" -lt 2 ] || [ $((n_seq - n_prompt)) != 64 ]; then
		echo "FAIL $name: a prompt of $n_prompt tokens and a stream of $((n_seq - n_prompt))"
		return 1
	fi
	n_vocab=$(($(stat -c %s "$work/ref.f32") / 4 / n_seq))

	# The logits, and the teacher-forced argmax over llama.cpp's stream.
	# A mixture of experts: a near tie of the router flips a token's experts where llama.cpp's
	# own two paths flip them too (a step in that row, not a drift): logits_cmp --parted.
	local rc=0 verbose= parted=
	[ "${SF_AGREE_VERBOSE:-}" = 1 ] && verbose=-v
	case $shape in *moe* | *mixtral* | *-a3b | *gpt-oss* | *-a800m) parted=--parted ;; esac
	local tol
	# Q8_0 keys: the scores are of quantized queries and keys, a rounded class whatever the
	# weights' type
	tol=$(tolerance "${kq8:-${type#llama.}}")
	# Qwen3.5: llama.cpp's batch and token-by-token paths run its recurrent layers (3 of 4)
	# through the same code (ggml_gated_delta_net, ggml_ssm_conv), so its own spread comes
	# from the attention layer alone: a rounded class's noise is a third of other
	# architectures' while our distance to it is theirs (test-qwen35/q8_0 0.011, test-qwen3's
	# 0.016). Three times that noise, under the same absolute ceilings.
	case $shape/$type in
	*qwen35*/f32 | *qwen35*/f16 | qwen3.5-*/f32 | qwen3.5-*/f16) ;;
	*qwen35*/* | qwen3.5-*) tol=${tol/--noise-factor 1.5/--noise-factor 3} ;;
	esac
	"$cmp" --vocab "$n_vocab" "$work/ours.f32" "$work/ref.f32" "$work/inc.f32" --name "$name" \
		--stream "$n_prompt" "$seq" --margin auto $tol $verbose \
		$parted >"$work/cmp.out"
	rc=$?
	[ $rc -le 1 ] || { echo "FAIL $name: logits_cmp exited $rc"; cat "$work/cmp.out"; return 1; }

	# Free running: how many of the 64 tokens agree before the first difference. Our run ends
	# at an end-of-generation token; llama-ref's greedy goes on (the rest is teacher-forced).
	local want=($stream) got=(${ours}) same summary miss
	got=("${got[@]:n_prompt}")
	same=$(same_prefix "$stream" "${got[*]}")
	local free="free_run=$same/64" eog= v vs
	for v in ${SF_AGREE_VARIANTS:-}; do
		vs=$("$LLAMA_REF" greedy "$m" --tokens "$prompt" --n 64 --threads 1 --cpu "$v" ${ctx:+--ctx "$ctx"} \
			2>"$work/err") || { echo "FAIL $name: llama-ref --cpu $v: $(tail -1 "$work/err")"; return 1; }
		free+=" llama.cpp_$v=$(same_prefix "$stream" "$vs")/64 ours_vs_$v=$(same_prefix "${got[*]}" "$vs")/64"
	done
	[ $same -lt 64 ] && [ $same = ${#got[@]} ] && eog=1 free="free_run=$same/64(our_eog)"
	# Where our stream leaves llama.cpp's, our own logits of that same prefix must have left
	# it too (the engine gives the same bits token by token as in one pass).
	summary=$(tail -1 "$work/cmp.out")
	miss=$(sed -n 's/.* first_miss=\([a-z0-9]*\).*/\1/p' <<<"$summary")
	if [ -z "$eog" ] && [ "$miss" != "$same" ] && ! { [ "$miss" = none ] && [ $same = 64 ]; }; then
		echo "FAIL $name: our free-running stream leaves llama.cpp's at token $same, our" \
			"logits' argmax at token $miss: token by token is not the same as in one pass"
		rc=1
	fi
	case $type$kq8 in
	f32 | f16)
		# where llama.cpp's batch argmax is our token, llama.cpp's own paths part there
		local at_miss
		at_miss=$(sed -n 's/.* ref_at_miss=\([0-9]*\).*/\1/p' <<<"$summary")
		if [ $same -lt 64 ] && [ -z "$eog" ] && [ "$at_miss" = "${got[same]:-}" ]; then
			free+="(llama.cpp's_batch_argmax_is_ours)"
		elif [ $same -lt 64 ] && [ -z "$eog" ]; then
			local mm at=
			mm=$(sed -n 's/.* margin_at_miss=\([0-9.]*\).*/\1/p' <<<"$summary")
			[ -n "$mm" ] && at="; llama.cpp's margin there $mm std"
			echo "FAIL $name: free-running streams differ at token $same of 64 (a float type" \
				"must give llama.cpp's stream$at):" \
				"ours ${got[*]:same:4}..., llama.cpp's ${want[*]:same:4}..."
			rc=1
		fi ;;
	esac
	grep '^FAIL' "$work/cmp.out"
	[ -n "$verbose" ] && grep -v '^FAIL' "$work/cmp.out" | sed '$d'
	echo "$summary $free prompt=$n_prompt make_s=$t_make total_s=$((SECONDS - t0))"
	return $rc
}

for c in "${cases[@]}"; do
	run_case "$c" || fails=$((fails + 1))
done
rm -f "$work"/*.f32 "$work/m.gguf"
echo "llama.cpp $LLAMA_COMMIT (node-llama-cpp $LLAMA_NLC_VERSION): ${#cases[@]} cases, $fails failed${left:+;\
 ${#left[@]} more in the extended run (SF_TEST_FULL=1, scripts/test --full): ${left[*]}}"
[ $fails -eq 0 ]
