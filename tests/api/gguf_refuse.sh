#!/usr/bin/env bash
# Model files the GGUF engine cannot run are refused when superfluid-noded starts: exit status
# 2 and one line on stderr naming why (a file cut short: the byte offsets; an architecture it
# does not run; metadata asking for arithmetic it does not compute (sliding windows,
# soft-capping, experts, rope scalings, ...); LongRoPE factors that are not finite and
# positive, or not both there; a pre-tokenizer it does not split as llama.cpp does; a tensor it
# would not read; a tensor type it does not compute; a tensor missing; not a GGUF file; no
# file), and superfluid model info says the same reason with the same status (and that a good
# file runs, as one with gpt-4o's pre-tokenizer does).
# Also (issue 32): a FIFO named as the model is refused at once (it held the node in open(),
# deaf to SIGTERM), a context length past 32 bits is a refused file (exit 2, not 1), and a
# served file cut short makes the node stop with a sentence naming the file (it died of a bare
# SIGBUS).
# Usage: gguf_refuse.sh NODED CLI SOURCE_DIR HEADD   (exit 77: no llama.cpp vocabulary; KEEP=DIR)
set -uo pipefail
noded=$1 cli=$2 src=$3
headd=${4:-}
. "$(dirname "$0")/lib.sh"
gguf_vocab "$src"
edit() { python3 "$(dirname "$0")/gguf_edit.py" "$@" || { fail "gguf_edit.py $*"; exit 1; }; }

M=$work/good.gguf
gguf_make "$M" qwen2 test-qwen2 q4_0
size=$(stat -c %s "$M")
"$cli" model info "$M" >"$work/out" 2>&1
r=$?; [ "$r" = 0 ] && grep -qx "the GGUF engine runs it" "$work/out" || r=1
check "model info: a good file is one the GGUF engine runs" $r

# refused NAME FILE PATTERN: the node refuses FILE at start (exit 2, one line matching PATTERN,
# a grep -E expression), and model info gives the same reason, exit 2.
refused() {
	local r=0 why
	timeout 60 "$noded" --listen 127.0.0.1:0 --blob-dir "$work/blobs" --model "$2" 2>"$work/err" >/dev/null
	local rc=$?
	why=$(sed -n 's/^superfluid-noded: error: --engine gguf: //p' "$work/err")
	[ "$rc" = 2 ] && [ "$(wc -l <"$work/err")" = 1 ] && grep -qE -- "$3" "$work/err" || r=1
	"$cli" model info "$2" >"$work/info" 2>&1
	local irc=$?
	[ "$irc" = 2 ] && [ -n "$why" ] && grep -qF -- "${why#"$2: "}" "$work/info" || r=1
	rm -f "$work/out"
	check "$1: exit $rc, '${why#"$2: "}'; model info exit $irc, the same" $r
	[ "$r" = 0 ] || { sed 's/^/     | noded: /' "$work/err" | head -5; sed 's/^/     | info: /' "$work/info" | tail -3; }
}

head -c $((size - 4096)) "$M" >"$work/cut-data.gguf"
refused "cut short in the weights" "$work/cut-data.gguf" \
	"run past the end of the file \(data section: [0-9]+ bytes from byte [0-9]+\)"
head -c 1000 "$M" >"$work/cut-head.gguf"
refused "cut short in the header" "$work/cut-head.gguf" "byte [0-9]+: the file ends"
head -c 7 "$M" >"$work/cut-magic.gguf"
refused "cut short after 7 bytes" "$work/cut-magic.gguf" "7 bytes: too short for a GGUF file"
edit "$M" "$work/arch.gguf" --arch gpt-j
refused "an architecture it does not run" "$work/arch.gguf" \
	"architecture 'gpt-j' is not one this engine runs \(llama, qwen2, qwen3, qwen3moe, smollm3, olmo2, granite, phi3, gemma, gemma2, gemma3, qwen35, qwen35moe, gpt-oss, mistral3, granitemoe, granitehybrid\)"
for t in "34 TQ1_0" "35 TQ2_0" "28 F64"; do
	set -- $t
	edit "$M" "$work/type-$2.gguf" --type blk.1.ffn_down.weight "$1"
	refused "a $2 tensor" "$work/type-$2.gguf" \
		"tensor blk.1.ffn_down.weight is of type $2, which this engine does not compute"
done
# The grid types (issue 36): a matrix of each runs (any bytes are a valid block: indexes,
# signs, scales), a tensor of one whose rows are not whole 256-element blocks is refused by
# name (the reader's check, before any kernel could read past it).
for t in "16 IQ2_XXS" "17 IQ2_XS" "22 IQ2_S" "18 IQ3_XXS" "21 IQ3_S" "19 IQ1_S" "29 IQ1_M"; do
	set -- $t
	edit "$M" "$work/type-$2.gguf" --type blk.1.ffn_down.weight "$1"
	"$cli" model info "$work/type-$2.gguf" >"$work/out" 2>&1
	r=$?; [ "$r" = 0 ] && grep -qx "the GGUF engine runs it" "$work/out" || r=1
	check "model info: a $2 matrix is one the GGUF engine runs" $r
done
edit "$M" "$work/type-rows.gguf" --type blk.0.attn_k.bias 21
refused "an IQ3_S tensor of 128-element rows" "$work/type-rows.gguf" \
	"tensor 'blk.0.attn_k.bias': byte [0-9]+: a tensor's rows of 128 elements are not whole blocks of IQ3_S"
# Metadata that changes the arithmetic in a way the architecture does not compute here, and
# tensors the forward pass would not read: each refused by name, never run without it.
# key NAME EDIT... PATTERN
key() {
	local name=$1 pattern=${*: -1}
	edit "$M" "$work/key.gguf" "${@:2:$#-2}"
	refused "$name" "$work/key.gguf" "$pattern"
}
key "a sliding window" --set-u32 qwen2.attention.sliding_window 4096 \
	"qwen2.attention.sliding_window = 4096: sliding-window attention, which this engine does not compute for architecture 'qwen2'"
key "a sliding-window pattern" --set-u32-arr qwen2.attention.sliding_window_pattern 2 1 \
	"qwen2.attention.sliding_window_pattern = 1 \(an element\): sliding-window attention"
key "attention logit soft-capping" --set-f32 qwen2.attn_logit_softcapping 50 \
	"qwen2.attn_logit_softcapping = 50: attention logit soft-capping, which this engine does not compute"
key "final logit soft-capping" --set-f32 qwen2.final_logit_softcapping 30 \
	"qwen2.final_logit_softcapping = 30: final logit soft-capping"
key "experts with dense tensors" --set-u32 qwen2.expert_count 8 \
	"qwen2.expert_count = 8: a mixture of experts, which this engine does not compute for architecture 'qwen2'"
key "a rope attention factor" --set-f32 qwen2.rope.scaling.attn_factor 0.5 \
	"qwen2.rope.scaling.attn_factor = 0.5: a rope attention factor"
key "non-causal attention" --set-bool qwen2.attention.causal 0 \
	"qwen2.attention.causal = 0: non-causal attention"
key "multi-token prediction layers" --set-u32 qwen2.nextn_predict_layers 1 \
	"qwen2.nextn_predict_layers = 1: multi-token prediction layers"
key "scaled logits" --set-f32 qwen2.logit_scale 0.125 "qwen2.logit_scale = 0.125: scaled logits"
key "rope scaling it does not compute" --set-str qwen2.rope.scaling.type longrope \
	"qwen2.rope.scaling.type = longrope: rope scaling this engine does not compute \(none, linear, yarn\)"
key "heads per layer" --set-u32-arr qwen2.attention.head_count 2 4 \
	"'qwen2.attention.head_count' is an array, not a single value"
for t in "blk.0.post_attention_norm.weight blk.0.attn_norm.weight" \
	"blk.1.attn_qkv.weight blk.1.attn_q.weight" "blk.0.ffn_up.bias blk.0.ffn_norm.weight" \
	"blk.1.ffn_down.bias blk.1.ffn_norm.weight" "blk.0.ffn_gate_inp.weight blk.0.attn_norm.weight" \
	"blk.0.ffn_gate_exps.weight blk.0.ffn_gate.weight" "blk.0.attn_sinks.weight blk.0.attn_norm.weight"; do
	set -- $t
	key "a tensor it would not read: $1" --copy "$2" "$1" \
		"tensor $1 is not one this engine computes for architecture 'qwen2' \(refused rather than run without it\)"
done
# Mixtral is llama with experts: a llama file saying it has experts must have them.
gguf_make "$work/l.gguf" llama-spm test-llama q4_0
edit "$work/l.gguf" "$work/l2.gguf" --set-u32 llama.expert_count 8
edit "$work/l2.gguf" "$work/key.gguf" --set-u32 llama.expert_used_count 2
refused "llama with expert_count and dense tensors" "$work/key.gguf" \
	"tensor blk.0.ffn_gate_inp.weight is missing"
edit "$work/l.gguf" "$work/key.gguf" --set-f32 llama.expert_weights_scale 2.5
refused "scaled expert weights" "$work/key.gguf" \
	"llama.expert_weights_scale = 2.5: scaled expert weights, which this engine does not compute"
# Qwen3-MoE: shared experts (Qwen2-MoE's) are not computed; experts of another width refused.
gguf_make "$work/q3m.gguf" qwen2 test-qwen3moe q4_0
"$cli" model info "$work/q3m.gguf" >"$work/out" 2>&1
r=$?; [ "$r" = 0 ] && grep -q "experts: 4 of 16 a token" "$work/out" || r=1
check "model info: a Qwen3-MoE file runs, its experts named" $r
edit "$work/q3m.gguf" "$work/key.gguf" --copy blk.0.ffn_gate_inp.weight blk.0.ffn_gate_inp_shexp.weight
refused "Qwen3-MoE with a shared expert's tensor" "$work/key.gguf" \
	"tensor blk.0.ffn_gate_inp_shexp.weight is not one this engine computes for architecture 'qwen3moe'"
edit "$work/q3m.gguf" "$work/key.gguf" --set-u32 qwen3moe.expert_feed_forward_length 512
refused "Qwen3-MoE experts not as wide as the file says" "$work/key.gguf" \
	"tensor blk.0.ffn_gate_exps.weight is 256 x 256 x 16, not 256 x 512 x 16"
edit "$M" "$work/key.gguf" --set-str qwen2.rope.scaling.type yarn
edit "$work/key.gguf" "$work/key2.gguf" --set-f32 qwen2.rope.scaling.factor 4
edit "$work/key2.gguf" "$work/key.gguf" --set-f32 qwen2.rope.scaling.yarn_beta_fast 64
refused "a YaRN setting other than its default" "$work/key.gguf" \
	"qwen2.rope.scaling.yarn_beta_fast = 64: a YaRN setting other than its default \(32\)"
# Granite computes its multipliers (qwen2's logit_scale is refused above) but not layers
# without rope.
gguf_make "$work/gr.gguf" refact test-granite q4_0
edit "$work/gr.gguf" "$work/key.gguf" --set-bool granite.rope.scaling.finetuned 0
refused "Granite without rope" "$work/key.gguf" \
	"granite.rope.scaling.finetuned = false: layers without rope, which this engine does not compute for architecture 'granite'"
# Ministral 3 (mistral3) reads YaRN's betas and log multiplier and Llama 4's attention
# temperature; another architecture's are refused (qwen2's beta above), and so is YaRN's
# extrapolation mix, which no architecture here reads. Granite MoE: its experts and its shared
# expert (granitemoeshared's) named.
gguf_make "$work/m3.gguf" llama-spm test-mistral3 q4_0
"$cli" model info "$work/m3.gguf" >"$work/out" 2>&1
r=$?; [ "$r" = 0 ] && grep -q "ramp from 2 to 0.25 turns, log multiplier 1" "$work/out" &&
	grep -q "attention temperature: queries times 1 + 0.3 ln(1 + floor(position / 32))" \
		"$work/out" || r=1
check "model info: a Ministral 3 file runs, its YaRN and temperature named" $r
edit "$M" "$work/key.gguf" --set-f32 qwen2.attention.temperature_scale 0.1
refused "an attention temperature in a qwen2 file" "$work/key.gguf" \
	"qwen2.attention.temperature_scale = 0.1: an attention temperature, which this engine does not compute for architecture 'qwen2'"
edit "$work/m3.gguf" "$work/key.gguf" --set-f32 mistral3.rope.scaling.yarn_ext_factor 0.5
refused "Ministral 3 with a YaRN extrapolation mix" "$work/key.gguf" \
	"mistral3.rope.scaling.yarn_ext_factor = 0.5: a YaRN setting other than its default \(1\)"
gguf_make "$work/gm.gguf" refact test-granitemoe-shared q4_0
"$cli" model info "$work/gm.gguf" >"$work/out" 2>&1
r=$?; [ "$r" = 0 ] && grep -q "experts: 2 of 8 a token, each 256 wide" "$work/out" &&
	grep -q "shared expert: 384 wide, ungated" "$work/out" &&
	grep -q "multipliers: embeddings x12" "$work/out" || r=1
check "model info: a Granite MoE file with a shared expert runs, its experts named" $r
# What one family computes is not another's: Gemma 3 has no score soft-capping (Gemma 2 has).
gguf_make "$work/g3.gguf" llama-spm test-gemma3 q4_0
edit "$work/g3.gguf" "$work/key.gguf" --set-f32 gemma3.attn_logit_softcapping 50
refused "Gemma 3 with score soft-capping" "$work/key.gguf" \
	"gemma3.attn_logit_softcapping = 50: attention logit soft-capping, which this engine does not compute for architecture 'gemma3'"
edit "$work/g3.gguf" "$work/key.gguf" --copy token_embd.weight output.weight
"$cli" model info "$work/key.gguf" >"$work/out" 2>&1
r=$?; [ "$r" = 0 ] || r=1
check "Gemma 3 with an output matrix of its own runs" $r
gguf_make "$work/g2.gguf" llama-spm test-gemma2 q4_0
edit "$work/g2.gguf" "$work/key.gguf" --copy token_embd.weight output.weight
refused "Gemma 2 with an output matrix (its output is its embeddings, as llama.cpp computes it)" \
	"$work/key.gguf" "tensor output.weight is not one this engine computes for architecture 'gemma2'"
# LongRoPE (Phi-3.5, Phi-4-mini): its factors and attention factor are computed for phi3, and
# checked: both tensors, n_rot / 2 of them, each finite and positive, a positive factor.
gguf_make "$work/lr.gguf" phi-3 test-phi3-longrope q4_0
"$cli" model info "$work/lr.gguf" >"$work/out" 2>&1
r=$?; [ "$r" = 0 ] && grep -q "rope: LongRoPE over 4096 positions .*attention factor 1.19024" "$work/out" || r=1
check "model info: a LongRoPE file runs, its original context and attention factor named" $r
edit "$work/lr.gguf" "$work/key.gguf" --set-str phi3.rope.scaling.type longrope
"$cli" model info "$work/key.gguf" >"$work/out" 2>&1
r=$?; [ "$r" = 0 ] || r=1
check "phi3 with rope.scaling.type longrope runs" $r
edit "$work/lr.gguf" "$work/key.gguf" --set-str phi3.rope.scaling.type su
refused "phi3 with a rope scaling it does not compute" "$work/key.gguf" \
	"phi3.rope.scaling.type = su: rope scaling this engine does not compute \(none, linear, yarn, longrope\)"
edit "$work/lr.gguf" "$work/key.gguf" --fill rope_factors_long.weight 0xff
refused "LongRoPE factors of NaN" "$work/key.gguf" \
	"rope_factors_long.weight\[0\] = -?nan: a rope frequency factor must be positive and finite"
edit "$work/lr.gguf" "$work/key.gguf" --fill rope_factors_short.weight 0x00
refused "LongRoPE factors of 0" "$work/key.gguf" \
	"rope_factors_short.weight\[0\] = 0: a rope frequency factor must be positive and finite"
edit "$work/lr.gguf" "$work/key.gguf" --rename rope_factors_short.weight rope_factors_shorter.weight
refused "LongRoPE's long factors without its short ones" "$work/key.gguf" \
	"tensor rope_factors_short.weight is missing \(LongRoPE has both rope_factors_long.weight and rope_factors_short.weight\)"
edit "$work/lr.gguf" "$work/key.gguf" --set-u32 phi3.rope.dimension_count 48
refused "LongRoPE factors for another rotary width" "$work/key.gguf" \
	"tensor rope_factors_long.weight has 32 x 1 elements, not 24"
edit "$work/lr.gguf" "$work/key.gguf" --copy rope_factors_long.weight rope_freqs.weight
refused "Llama 3's rope factors beside LongRoPE's" "$work/key.gguf" \
	"tensor rope_freqs.weight beside LongRoPE's rope_factors_long.weight"
edit "$work/lr.gguf" "$work/key.gguf" --set-f32 phi3.rope.scaling.attn_factor -1
refused "a negative LongRoPE attention factor" "$work/key.gguf" \
	"phi3.rope.scaling.attn_factor = -1: the rope's attention factor must be positive and finite"
# Qwen3.5: Gated DeltaNet layers run (its MoE too); a shared expert or an inner size other
# than the file says, a rope section the engine does not turn and multi-token prediction
# layers are refused by name.
gguf_make "$work/q35.gguf" qwen35 test-qwen35 q4_0
"$cli" model info "$work/q35.gguf" >"$work/out" 2>&1
r=$?; [ "$r" = 0 ] && grep -q "recurrent layers (Gated DeltaNet): 3 of 4" "$work/out" || r=1
check "model info: a Qwen3.5 file runs, its recurrent layers named" $r
gguf_make "$work/q35m.gguf" qwen35 test-qwen35moe q4_0
"$cli" model info "$work/q35m.gguf" >"$work/out" 2>&1
r=$?; [ "$r" = 0 ] && grep -q "experts: 4 of 16 a token" "$work/out" || r=1
check "model info: a Qwen3.5-MoE file runs, its experts named" $r
edit "$work/q35m.gguf" "$work/key.gguf" --set-u32 qwen35moe.expert_shared_feed_forward_length 512
refused "Qwen3.5-MoE's shared expert not as wide as the file says" "$work/key.gguf" \
	"tensor blk.0.ffn_gate_shexp.weight is 256 x 256 x 1, not 256 x 512 x 1"
edit "$work/q35.gguf" "$work/key.gguf" --set-u32 qwen35.ssm.inner_size 200
refused "Qwen3.5 with an inner size that is not its value heads'" "$work/key.gguf" \
	"qwen35.ssm.inner_size = 200 is not 4 value heads of 64"
edit "$work/q35.gguf" "$work/key.gguf" --set-u32-arr qwen35.rope.dimension_sections 4 1
refused "Qwen3.5 with a rope pair in the vision section" "$work/key.gguf" \
	"qwen35.rope.dimension_sections = \[1, 1, 1, 1\] puts rope pair 3 in the vision section"
edit "$work/q35.gguf" "$work/key.gguf" --set-u32 qwen35.nextn_predict_layers 1
refused "Qwen3.5 with multi-token prediction layers" "$work/key.gguf" \
	"qwen35.nextn_predict_layers = 1: multi-token prediction layers, which this engine does not compute"
edit "$work/q35.gguf" "$work/key.gguf" --rename blk.0.ssm_a blk.0.ssm_aa
refused "Qwen3.5 without a layer's ssm_a" "$work/key.gguf" "tensor blk.0.ssm_a is missing"
# Granite 4's hybrid: Mamba-2 layers (those of 0 key/value heads) and attention without rope
# run; head counts that differ between attention layers, an array not one a layer, channels
# that do not split evenly into heads, a layer without its D and a tensor llama.cpp would read
# (an FFN bias) that the engine does not are refused by name.
gguf_make "$work/gh.gguf" refact test-granitehybrid q4_0
"$cli" model info "$work/gh.gguf" >"$work/out" 2>&1
r=$?; [ "$r" = 0 ] && grep -q "recurrent layers (Mamba-2): 3 of 4, 8 heads of 64 channels" \
	"$work/out" && grep -qx "no rope on any layer" "$work/out" || r=1
check "model info: a Granite 4 hybrid file runs, its Mamba-2 layers named" $r
edit "$work/gh.gguf" "$work/key.gguf" --set-u32-list granitehybrid.attention.head_count_kv 0,2,1,2
refused "Granite 4 hybrid with per-layer head counts" "$work/key.gguf" \
	"granitehybrid.attention.head_count_kv\[2\] = 1: per-layer head counts \(other than 0 for a recurrent layer\)"
edit "$work/gh.gguf" "$work/key.gguf" --set-u32-arr granitehybrid.attention.head_count_kv 3 2
refused "Granite 4 hybrid with head counts not one a layer" "$work/key.gguf" \
	"granitehybrid.attention.head_count_kv is not an array of a number for each of the 4 layers"
edit "$work/gh.gguf" "$work/key.gguf" --set-u32 granitehybrid.ssm.inner_size 500
refused "Granite 4 hybrid with channels not split evenly" "$work/key.gguf" \
	"granitehybrid.ssm.inner_size = 500 channels in 8 heads"
edit "$work/gh.gguf" "$work/key.gguf" --rename blk.0.ssm_d blk.0.ssm_dd
refused "Granite 4 hybrid without a layer's D" "$work/key.gguf" "tensor blk.0.ssm_d is missing"
edit "$work/gh.gguf" "$work/key.gguf" --copy output_norm.weight blk.1.ffn_down.bias
refused "Granite 4 hybrid with an FFN bias" "$work/key.gguf" \
	"tensor blk.1.ffn_down.bias is not one this engine computes for architecture 'granitehybrid'"
# Pre-tokenizers: gpt-4o's (Phi-4-mini, gpt-oss) splits as llama.cpp does (tok.corpus) and
# runs; one the engine does not split as llama.cpp does is refused by name.
edit "$M" "$work/key.gguf" --set-str tokenizer.ggml.pre gpt-4o
"$cli" model info "$work/key.gguf" >"$work/out" 2>&1
r=$?; [ "$r" = 0 ] && grep -qx "the GGUF engine runs it" "$work/out" || r=1
check "model info: a file with the gpt-4o pre-tokenizer (Phi-4-mini's) runs" $r
edit "$M" "$work/key.gguf" --set-str tokenizer.ggml.pre kimi-k2
refused "a pre-tokenizer it does not split" "$work/key.gguf" \
	'tokenizer.ggml.pre "kimi-k2" is not a pre-tokenizer this engine has'
# gpt-oss: a file runs (its sinks and activation named); its sinks, an expert bias or its
# window missing are refused by name.
gguf_make "$work/oss.gguf" qwen2 test-gpt-oss mxfp4_moe
"$cli" model info "$work/oss.gguf" >"$work/out" 2>&1
r=$?; [ "$r" = 0 ] && grep -q "attention sinks: a logit per query head" "$work/out" &&
	grep -q "activation: SwiGLU-OAI" "$work/out" && grep -q "sliding window: 40 positions in 2 of 4 layers" "$work/out" || r=1
check "model info: a gpt-oss file runs, its sinks, activation and window named" $r
edit "$work/oss.gguf" "$work/key.gguf" --rename blk.0.attn_sinks.weight blk.0.attn_sinkz.weight
refused "gpt-oss without a layer's attention sinks" "$work/key.gguf" "tensor blk.0.attn_sinks.weight is missing"
edit "$work/oss.gguf" "$work/key.gguf" --rename blk.1.ffn_down_exps.bias blk.1.ffn_down_expz.bias
refused "gpt-oss without an expert bias" "$work/key.gguf" "tensor blk.1.ffn_down_exps.bias is missing"
edit "$work/oss.gguf" "$work/key.gguf" --set-u32 gpt-oss.attention.sliding_window 0
refused "gpt-oss without its window" "$work/key.gguf" \
	"gpt-oss.attention.sliding_window = 0 is outside \[1, 16777216\]"
edit "$M" "$work/missing.gguf" --rename blk.1.attn_q.weight blk.1.attn_qq.weight
refused "a tensor missing" "$work/missing.gguf" "tensor blk.1.attn_q.weight is missing"
printf 'This text is not a model.\n' >"$work/text.gguf"
refused "not a GGUF file" "$work/text.gguf" "not a GGUF file"
refused "no file" "$work/none.gguf" "cannot open: No such file or directory"
mkfifo "$work/fifo.gguf"
refused "a FIFO" "$work/fifo.gguf" "not a regular file"
edit "$M" "$work/ctx64.gguf" --set-u64 qwen2.context_length 18446744073709551615
refused "a context length past 32 bits" "$work/ctx64.gguf" "'qwen2.context_length' is out of range"

# A file model info used to say runs, which the node refuses (its verdict is now the engine's
# own checks): a chat template holding a NUL byte.
edit "$M" "$work/nul.gguf" --set-str-esc tokenizer.chat_template '{{ messages }}\x00'
refused "a chat template holding a NUL byte" "$work/nul.gguf" "chat template tokenizer.chat_template is over [0-9]+ bytes or holds a NUL"

# A served file cut short: the next request's read of it stops the node, which says why.
if [ -n "$headd" ]; then
	cp "$M" "$work/served.gguf"
	start_gguf_node served "$work/served.gguf" --threads 1 && sp=$port snpid=$npid
	start_head cut "127.0.0.1:$sp" && base="http://127.0.0.1:$hport"
	model=
	for _ in $(seq 400); do req GET /v1/models; model=$(j "$work/out" 'd["data"][0]["id"] if d["data"] else ""'); [ -n "$model" ] && break; sleep 0.05; done
	nodes_up 1 # listed by one shard: every shard's link open (its tokenizer is waited for)
	req POST /v1/completions "{\"model\":\"$model\",\"prompt\":\"hello\",\"max_tokens\":2}"
	check "a served file: answered before it is cut ($status)" "$([ "$status" = 200 ]; echo $?)"
	truncate -s 100000 "$work/served.gguf"
	curl -sS -m 5 -o /dev/null -H 'Content-Type: application/json' \
		--data-binary "{\"model\":\"$model\",\"prompt\":\"hello again\",\"max_tokens\":2}" "$base/v1/completions" 2>/dev/null
	wait "$snpid" 2>/dev/null; nrc=$?
	line=$(grep 'was cut short or changed while the node served it' "$work/served.err")
	check "a served file cut short: the node stops ($nrc, SIGBUS) saying so: ${line:-no such line}" \
		"$([ "$nrc" = 135 ] && echo "$line" | grep -qF "the model file $work/served.gguf"; echo $?)"
	stop_head() { kill -TERM "$hpid" 2>/dev/null; wait "$hpid" 2>/dev/null; }
	stop_head
	# Weights of NaN: each generation ends in an error the node's log says (it said nothing).
	gguf_make "$work/f32.gguf" qwen2 test-qwen2 f32 --layers 1
	edit "$work/f32.gguf" "$work/nan.gguf" --fill token_embd.weight 0xff # tied: the output too
	start_gguf_node nan "$work/nan.gguf" --threads 1 && np=$port
	start_head nanh "127.0.0.1:$np" && base="http://127.0.0.1:$hport"
	model=
	for _ in $(seq 400); do req GET /v1/models; model=$(j "$work/out" 'd["data"][0]["id"] if d["data"] else ""'); [ -n "$model" ] && break; sleep 0.05; done
	nodes_up 1 # listed by one shard: every shard's link open (its tokenizer is waited for)
	req POST /v1/completions "{\"model\":\"$model\",\"prompt\":\"hello\",\"max_tokens\":2}"
	line=$(grep 'a generation ends in an error' "$work/nan.err")
	check "weights of NaN: the request fails ($status) and the node's log says why: ${line:-nothing}" \
		"$([ "$status" = 500 ] && echo "$line" | grep -q 'every logit is NaN' && grep -q "its log says why" "$work/out"; echo $?)"
	stop_head
fi

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
