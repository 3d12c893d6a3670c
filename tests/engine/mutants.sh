#!/usr/bin/env bash
# Shows that agree.sh catches real bugs: for each mutant (one deliberate bug in the engine, the
# kind a port gets wrong), a copy of the working tree with that one edit is built and agree.sh
# run on the cases the bug touches; every such case must FAIL. Not part of ctest (~7 minutes
# on two cores, plus a first build of the copy; then one file is recompiled per mutant);
# docs/ENGINE_AGREEMENT.md reports its last run.
# Usage: mutants.sh [NAME...]   (default: every mutant; SF_MUTANTS_DIR: where the copy is built)
#        mutants.sh --check      (each edit still applies; no build: ctest's engine.mutants_apply)
# Exit 0 every mutant caught, 1 a mutant passed (or could not be applied: its source changed).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${SF_MUTANTS_DIR:-$root/build-mutants}
src=$dir/src-copy

# NAME|FILE|TEXT|REPLACEMENT|CASES (agree.sh cases; each must fail, but those marked ~, which
# show where the tolerance of a rounded class stops seeing a small bug). TEXT occurs once.
mutants=(
	"rope-neox-flipped|src/model/model_load.c|c->rope_neox = !adjacent;|c->rope_neox = adjacent;|test-llama/f16 test-qwen2/q8_0 test-qwen3/q4_k_m"
	"qkv-bias-dropped|src/model/forward.c|if (l->bq || l->bk || l->bv) {|if (0 && (l->bq || l->bk || l->bv)) {|test-qwen2/f32 test-qwen2/q4_k_m qwen2.5-0.5b/q8_0/2"
	"qk-norm-dropped|src/model/forward.c|if (l->q_norm) {|if (0 && l->q_norm) {|test-qwen3/f16 test-qwen3/q8_0"
	"norm-scaled-2pct|src/model/ops.c|float scale = 1.0f / sqrtf(mean + eps);|float scale = 1.02f / sqrtf(mean + eps);|test-llama/f32 test-qwen2/q8_0 test-qwen3/q4_k_m"
	"norm-eps-ignored|src/model/ops.c|float scale = 1.0f / sqrtf(mean + eps);|float scale = 1.0f / sqrtf(mean);|test-llama/f32"
	"gate-up-swapped|src/model/forward.c|sf_op_swiglu(f->gate + t * F, f->up + t * F, F);|{ float *g_ = f->gate + t * F, *u_ = f->up + t * F; for (uint32_t i_ = 0; i_ < F; i_++) { float s_ = g_[i_]; g_[i_] = u_[i_]; u_[i_] = s_; } sf_op_swiglu(g_, u_, F); }|test-llama/q8_0 test-qwen2/f16 test-qwen3/q6_k"
	"gqa-group-stride|src/model/forward.c|(size_t)g * group * hd;|(size_t)g * hd;|test-llama/f16 test-qwen2/q4_0 test-qwen3/bf16"
	"attn-scale-10pct|src/model/ops.c|float scale = m->cfg.q_prescale ? 1.0f : m->cfg.attn_scale;|float scale = m->cfg.q_prescale ? 1.0f : m->cfg.attn_scale * 1.1f;|test-llama/f32 test-qwen2/q5_0 test-qwen3/q8_0"
	"causal-mask-off-by-one|src/model/forward.c|uint32_t to = j->toks[t].pos + 1, from = 0;|uint32_t to = j->toks[t].pos + (j->toks[t].pos == 0), from = 0;|test-llama/f32 test-qwen2/q8_0"
	"rope-freqs-ignored|src/model/model_load.c|		return m->rope_freqs;|		return NULL;|llama-3.2-1b/f16/2 ~llama-3.2-1b/q8_0/2"
	"v-cache-bf16|src/model/forward.c|sf_kern_quantize_act(SF_GGUF_T_F16, v, sf_kv_at(tk->kv, il, 1, tk->pos), kvd);|{ uint16_t *vh_ = sf_kv_at(tk->kv, il, 1, tk->pos); for (uint32_t i_ = 0; i_ < kvd; i_++) { float r_; uint32_t u_; memcpy(&u_, v + i_, 4); u_ &= 0xffff0000u; memcpy(&r_, &u_, 4); v[i_] = r_; } sf_kern_quantize_act(SF_GGUF_T_F16, v, vh_, kvd); }|test-llama/f32 test-qwen3/f16 ~test-qwen2/q8_0"
	# Mixtures of experts, YaRN, SmolLM3, OLMo 2, Granite, Phi-3 (each shown failing when it was written)
	"moe-weights-unnormalised|src/model/model_load.c|c->expert_norm = c->arch != SF_ARCH_GPTOSS;|c->expert_norm = false;|test-qwen3moe/f32 test-mixtral/q8_0"
	"yarn-ramp-dropped|src/model/ops.c|float mix = 1 - (y < 0 ? 0 : y > 1 ? 1 : y);|float mix = 0 * y;|test-qwen3-yarn/f32"
	"olmo2-qk-norm-per-head|src/model/forward.c|if (l->q_norm && c->qk_norm_whole) {|if (0 && l->q_norm && c->qk_norm_whole) {|test-olmo2/f32"
	"granite-residual-unscaled|src/model/forward.c|if (c->residual_scale) /* Granite */|if (0 && c->residual_scale) /* Granite */|test-granite/f32"
	"phi3-gate-up-swapped|src/model/model_bind.c|l->ffn_gate = view(l, 3, t, 0, c->n_ff);|l->ffn_gate = view(l, 3, t, c->n_ff, c->n_ff);|test-phi3/f32"
	# LongRoPE: the short factors past the original context, the long ones within it, the
	# attention factor dropped
	"longrope-short-always|src/model/model_load.c|return padded > m->cfg.yarn_orig_ctx ? m->rope_long : m->rope_short;|return padded > 0xffffffffu ? m->rope_long : m->rope_short;|test-phi3-longrope/f32@8192 test-phi4/q4_k_m@8192"
	"longrope-long-always|src/model/model_load.c|return padded > m->cfg.yarn_orig_ctx ? m->rope_long : m->rope_short;|return padded > 0 ? m->rope_long : m->rope_short;|test-phi3-longrope/f32@4096 test-phi4/f32@4096"
	"longrope-attn-factor-dropped|src/model/ops.c|float ms = m->cfg.rope_attn_factor;|float ms = 1.0f;|test-phi3-longrope/f16@8192 test-phi3-longrope/q8_0@4096"
	"smollm3-rope-everywhere|src/model/model_load.c|SF_ARCH_SMOLLM3 ? 4 : 0;|SF_ARCH_SMOLLM3 ? 0 : 0;|test-smollm3/f32"
	# Qwen3.5's Gated DeltaNet and gated attention (each shown failing when it was written)
	"gdn-key-heads-grouped|src/model/deltanet.c|hk = h % G;|hk = h / (H / G);|test-qwen35/f32"
	"gdn-decay-dropped|src/model/deltanet.c|sf_kern_gdn_step(m, q, k, v, sf_kern_expf(g), beta, scale, o, S);|sf_kern_gdn_step(m, q, k, v, 1.0f + 0.0f * g, beta, scale, o, S);|test-qwen35/f32 test-qwen35/q8_0"
	"gdn-conv-state-dropped|src/model/deltanet.c|		st[k - 2] = in;|		st[k - 2] = 0.0f;|test-qwen35/f32"
	"qwen35-attn-gate-sign-flipped|src/model/forward.c|a[i] = a[i] * (1.0f / (1.0f + sf_kern_expf(-gt[i])));|a[i] = a[i] * (1.0f / (1.0f + sf_kern_expf(gt[i])));|test-qwen35/f32"
	"qwen35moe-shared-expert-ungated|src/model/forward.c|float sg = 1.0f / (1.0f + sf_kern_expf(-dot));|float sg = 1.0f + 0.0f * dot;|test-qwen35moe/f32"
	# gpt-oss: the sinks dropped, SwiGLU-OAI's + 1 dropped, the router's bias dropped, the
	# window on every layer (each shown failing when it was written)
	"gptoss-sinks-dropped|src/model/model_load.c|c->attn_sinks = true;|c->attn_sinks = false;|test-gpt-oss/f32 test-gpt-oss/mxfp4_moe"
	"gptoss-oai-plus-one-dropped|src/model/ops.c|gate[i] = glu * (y + 1.0f);|gate[i] = glu * y;|test-gpt-oss/f32 test-gpt-oss/q8_0"
	"gptoss-router-bias-dropped|src/model/moe.c|if (l->ffn_gate_inp_b) { /* gpt-oss: the router's bias */|if (0 && l->ffn_gate_inp_b) {|test-gpt-oss/f32"
	"kq8-rotation-dropped|src/model/forward.c|if (m->k_rot) { /* Q8_0 keys|if (0 && m->k_rot) { /* Q8_0 keys|test-qwen2/f32+kq8 test-llama/f16+kq8"
	"gptoss-window-every-layer|src/model/model_load.c|2 /* from the first, every other layer */|0 /* every layer */|test-gpt-oss/f32"
	# Ministral 3: the attention temperature dropped, YaRN's log multiplier dropped, YaRN's
	# betas the defaults; Granite MoE Shared's shared expert dropped (each shown failing when it
	# was written)
	"mistral3-temperature-dropped|src/model/forward.c|if (c->attn_temp) { /* Ministral 3|if (0 && c->attn_temp) { /* Ministral 3|test-mistral3/f32 test-mistral3/q8_0"
	"mistral3-yarn-log-mul-dropped|src/model/model_load.c|if (c->yarn_log_mul != 0) {|if (0 && c->yarn_log_mul != 0) {|test-mistral3/f32"
	"mistral3-yarn-betas-default|src/model/model_load.c|const double beta[2] = { c->yarn_beta_fast, c->yarn_beta_slow };|const double beta[2] = { 32.0, 1.0 };|test-mistral3/f32"
	"granitemoe-shared-expert-dropped|src/model/forward.c|					add(d, sx, E);|					(void)sx;|test-granitemoe-shared/f32 test-granitemoe-shared/q4_k_m"
	# Granite 4's Mamba-2 layers: B and C's groups taken h mod G (not h / (H / G)), the D skip,
	# the convolution's bias, dt's bias dropped (each shown failing when it was written)
	"m2-groups-interleaved|src/model/mamba2.c|g = h / (H / G);|g = h % G;|test-granitehybrid/f32 test-granitehybrid/q8_0"
	"m2-skip-dropped|src/model/mamba2.c|y[i] = y[i] + x[i] * Dk[i / P];|y[i] = y[i] + 0.0f * x[i] * Dk[i / P];|test-granitehybrid/f32"
	"m2-conv-bias-dropped|src/model/mamba2.c|const float *cb = l->ssm_conv1d_b ? l->ssm_conv1d_b->data : NULL;|const float *cb = NULL;|test-granitehybrid/f32 test-granitehybrid/q8_0"
	"m2-dt-bias-dropped|src/model/mamba2.c|+ dtb[h]);|+ 0.0f * dtb[h]);|test-granitehybrid/f32"
	# Formats, in the AVX-512 kernels (those a CPU with AVX-512 runs; elsewhere these two
	# change nothing that runs and are reported missed).
	"q5_0-fifth-bit-dropped|src/kern/dot_q_avx512.c|const __m512i k10 = _mm512_set1_epi8(0x10);|const __m512i k10 = _mm512_set1_epi8(0x00);|test-llama/q5_0 test-qwen2/q5_0"
	"q4_k-scale-high-bits-dropped|src/kern/dot_k_avx512.c|(((w[0] >> 6) & 0x03030303) << 4)|0|test-llama/q4_k test-qwen3/q4_k_m"
)

# --check: only that every edit still applies (its TEXT occurs once in its FILE), with no build:
# ctest runs it (engine.mutants_apply), so an edit the source outgrew fails at once.
if [ "${1:-}" = --check ]; then
	bad=0 i=0
	# the counts of all the edits' texts from one python3 (one a mutant took 0.3 s on 2 busy cores)
	mapfile -t counts < <(printf '%s\0' "${mutants[@]}" | python3 -c '
import sys
for spec in sys.stdin.buffer.read().decode().split("\0")[:-1]:
    f, text = spec.split("|")[1:3]
    try:
        print(open(sys.argv[1] + "/" + f).read().count(text))
    except OSError:
        print("no")' "$root")
	for spec in "${mutants[@]}"; do
		IFS='|' read -r name file text _ _ <<<"$spec"
		n=${counts[i]:-}
		i=$((i + 1))
		if [ "$n" = 1 ]; then
			echo "ok   $name: its edit applies to $file"
		else
			echo "FAIL $name: its text occurs ${n:-no} times in $file (once wanted): update the mutant"
			bad=$((bad + 1))
		fi
	done
	echo "${#mutants[@]} mutants, $bad whose edit no longer applies"
	[ "$bad" = 0 ]
	exit
fi

want=("$@")
picked() {
	[ ${#want[@]} -eq 0 ] && return 0
	local w
	for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done
	return 1
}

# A copy of the working tree's tracked files (only those that changed since the last run are
# copied again, so that a second run rebuilds little), built with superfluid and logits_cmp.
mkdir -p "$src" || exit 1
(cd "$root" && git ls-files -z) | while IFS= read -r -d '' f; do
	[ -f "$root/$f" ] || continue
	cmp -s "$root/$f" "$src/$f" || { mkdir -p "$(dirname "$src/$f")" && cp "$root/$f" "$src/$f"; } ||
		exit 1
done || { echo "FAIL cannot copy the tree into $src"; exit 1; }
echo "== building the copy in $dir/build"
cmake -S "$src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$dir/cmake.log" 2>&1 &&
	ninja -C "$dir/build" superfluid logits_cmp >"$dir/build.log" 2>&1 ||
	{ echo "FAIL the copy does not build (log: $dir/build.log)"; exit 1; }

fails=0
for spec in "${mutants[@]}"; do
	IFS='|' read -r name file text repl cases <<<"$spec"
	picked "$name" || continue
	cp "$src/$file" "$dir/orig"
	if ! python3 - "$src/$file" "$text" "$repl" <<'EOF'; then
import sys
path, old, new = sys.argv[1:4]
s = open(path).read()
if s.count(old) != 1:
    print("FAIL mutant: '%s' occurs %d times in %s" % (old, s.count(old), path))
    sys.exit(1)
open(path, "w").write(s.replace(old, new))
EOF
		fails=$((fails + 1))
		continue
	fi
	echo "== $name: $file"
	if ! ninja -C "$dir/build" superfluid >"$dir/build.log" 2>&1; then
		echo "FAIL $name does not build (log: $dir/build.log)"
		fails=$((fails + 1))
	else
		caught=0 n=0
		for c in $cases; do
			info=
			[ "${c#\~}" != "$c" ] && info=1 c=${c#\~}
			[ -n "$info" ] || n=$((n + 1))
			out=$(bash "$root/tests/engine/agree.sh" "$dir/build/superfluid" \
				"$dir/build/tests/logits_cmp" "$root" "$dir/work" "$c" 2>&1)
			rc=$?
			line=$(grep 'verdict=' <<<"$out" | tail -1)
			# Which checks failed: the mean against llama.cpp's own spread, the ceilings,
			# one logit, the teacher-forced argmax, the free-running stream of a float type.
			checks=$(grep '^FAIL' <<<"$out" | sed -n \
				-e "s/.*x llama.cpp's own.*/noise/p" -e 's/.*std away, over.*/max-ceiling/p' \
				-e 's/.*over twice the ceiling.*/row-ceiling/p' -e 's/.*over the ceiling.*/rms-ceiling/p' \
				-e 's/.*our argmax .* is not llama.cpp.s stream token.*/teacher-forced/p' \
				-e 's/.*free-running streams differ.*/free-run/p' \
				-e 's/.*the bound is too small.*/bound/p' \
				-e 's/.*token by token is not the same.*/self/p' | sort | uniq -c |
				awk '{ printf "%s%s(%d)", (NR > 1 ? " " : ""), $2, $1 }')
			if [ $rc = 1 ] && [ -n "$line" ] && [ -n "$checks" ]; then
				[ -n "$info" ] || caught=$((caught + 1))
				echo "  caught $c by: $checks${info:+ (informative)}"
			elif [ -n "$info" ] && [ $rc = 0 ]; then
				echo "  passed $c (informative: under the tolerance of its class)"
			else
				echo "  MISSED $c (exit $rc): $(grep '^FAIL' <<<"$out" | head -1)"
			fi
			echo "         ${line:-no figures}" | cut -c1-240
		done
		[ $caught = $n ] && echo "ok   $name caught in $n of $n cases" ||
			{ echo "FAIL $name caught in $caught of $n cases"; fails=$((fails + 1)); }
	fi
	cp "$dir/orig" "$src/$file"
done
# Leave the copy as it was built from the tree (the last mutant undone).
ninja -C "$dir/build" superfluid >/dev/null 2>&1
[ $fails -eq 0 ]
