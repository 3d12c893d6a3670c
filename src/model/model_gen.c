/* Random-weight models in real models' shapes (model.h: sf_model_gen_write). Every element is
 * a pure function of (seed, tensor name, index), so the same arguments give the same bytes
 * whatever the thread count. Matrices are uniform in +-sqrt(3 / fan-in) (activations near 1
 * through the layers), norm weights near 1, the logits spread some 4 units. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"

struct shape {
	const char *name, *arch;
	uint32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
	float rope_base, eps;
	bool tied, llama3_rope;
	/* Gemma 2/3 (0: the key is not written): the sliding window, its layer period
	 * (attention.sliding_window_pattern), the window layers' rope base, the soft-caps, a
	 * linear rope scaling factor. */
	uint32_t n_swa, swa_period;
	float rope_base_swa, attn_cap, final_cap, rope_linear;
	/* A mixture of experts (0: a dense FFN): experts, chosen per token, an expert's width. */
	uint32_t n_expert, n_expert_used, n_ff_exp;
	bool yarn; /* rope_linear is a YaRN factor over an original context of n_ctx / it */
	/* LongRoPE (Phi-3.5, Phi-4-mini; 0: none): the original context of its factors
	 * (add_longrope writes them), and the rotary dimensions of a head (0: all of them) */
	uint32_t longrope_orig, n_rot;
};

/* Qwen3.5's shapes: rotary dimensions, the convolution's taps, a Gated DeltaNet head's width,
 * key heads, value heads, the full-attention interval, the rope's sections. */
static const struct ssm_shape {
	const char *shape;
	uint32_t n_rot, ssm_conv, ssm_state, ssm_group, ssm_heads, fa_every;
	int32_t sections[4];
} ssm_shapes[] = {
	{ "qwen3.5-0.8b", 64, 4, 128, 16, 16, 4, { 11, 11, 10, 0 } },
	{ "test-qwen35", 16, 4, 64, 2, 4, 4, { 3, 3, 2, 0 } },
	{ "test-qwen35moe", 16, 4, 64, 2, 4, 4, { 3, 3, 2, 0 } },
};

static const struct ssm_shape *ssm_of(const struct shape *s)
{
	for (size_t i = 0; i < sizeof(ssm_shapes) / sizeof(ssm_shapes[0]); i++)
		if (!strcmp(ssm_shapes[i].shape, s->name))
			return &ssm_shapes[i];
	return NULL;
}

/* Granite 4's hybrids (granitehybrid): the Mamba-2 layers' convolution taps, state width,
 * groups, heads and channels (ssm_inner), attention on layers il % attn_every == attn_at
 * (the others Mamba-2), and whether the attention has rope (rope.scaling.finetuned; Granite
 * 4.0-H's has none). */
static const struct m2_shape {
	const char *shape;
	uint32_t ssm_conv, ssm_state, ssm_group, ssm_heads, ssm_inner, attn_every, attn_at;
	bool roped;
} m2_shapes[] = {
	/* (nine Mamba-2 layers, then an attention layer, four times: 9, 19, 29, 39) */
	{ "granite-4.0-h-micro", 4, 128, 1, 64, 4096, 10, 9, false },
	{ "granite-4.0-h-tiny", 4, 128, 1, 48, 3072, 10, 9, false },
	{ "test-granitehybrid", 4, 64, 2, 8, 512, 4, 2, false },
	{ "test-granitehybrid-moe", 4, 64, 2, 8, 512, 4, 2, true },
};

static const struct m2_shape *m2_of(const struct shape *s)
{
	for (size_t i = 0; i < sizeof(m2_shapes) / sizeof(m2_shapes[0]); i++)
		if (!strcmp(m2_shapes[i].shape, s->name))
			return &m2_shapes[i];
	return NULL;
}

/* Whether layer il of n is an attention layer (else Mamba-2). A file of fewer layers than
 * the shape's first attention layer has its last one attention: llama.cpp runs no hybrid
 * without one (its key/value cache of no layer fails to allocate). */
static bool m2_attn(const struct m2_shape *m2, uint32_t il, uint32_t n_layer)
{
	return il % m2->attn_every == m2->attn_at || (n_layer <= m2->attn_at && il == n_layer - 1);
}

#define NO_EXTRAS 0, 0, 0, 0, 0, 0, 0, 0, 0, false /* no Gemma keys, no experts, no YaRN */
#define PLAIN NO_EXTRAS, 0, 0 /* nor LongRoPE */
#define DENSE 0, 0, 0, false, 0, 0 /* no experts, no YaRN, no LongRoPE */

static const struct shape shapes[] = {
	{ "qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 64, 4864, 32768, 1e6f, 1e-6f, true, false, PLAIN },
	{ "qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 128, 3072, 40960, 1e6f, 1e-6f, true, false, PLAIN },
	{ "llama-3.2-1b", "llama", 2048, 16, 32, 8, 64, 8192, 131072, 5e5f, 1e-5f, true, true, PLAIN },
	{ "tinyllama-1.1b", "llama", 2048, 22, 32, 4, 64, 5632, 2048, 1e4f, 1e-5f, false, false, PLAIN },
	{ "smollm2-135m", "llama", 576, 30, 9, 3, 64, 1536, 8192, 1e5f, 1e-5f, true, false, PLAIN },
	{ "olmo2-1b", "olmo2", 2048, 16, 16, 16, 128, 8192, 4096, 5e5f, 1e-6f, false, false,
	  PLAIN },
	/* Mistral Nemo 12B: Llama's, heads of 128 in a width of 5120 (key_length), tekken */
	{ "mistral-nemo-12b", "llama", 5120, 40, 32, 8, 128, 14336, 131072, 1e6f, 1e-5f, false,
	  false, PLAIN },
	{ "phi-3-mini-4k", "phi3", 3072, 32, 32, 32, 96, 8192, 4096, 1e4f, 1e-5f, false, false,
	  2047, 0, 0, 0, 0, 0, DENSE },
	/* Phi-3.5-mini (a window past any context, LongRoPE over 4,096) and Phi-4-mini (24/8
	 * heads of 128, 96 of them rotated, tied, LongRoPE) */
	{ "phi-3.5-mini", "phi3", 3072, 32, 32, 32, 96, 8192, 131072, 1e4f, 1e-5f, false, false,
	  262144, 0, 0, 0, 0, 0, 0, 0, 0, false, 4096, 0 },
	{ "phi-4-mini", "phi3", 3072, 32, 24, 8, 128, 8192, 131072, 1e4f, 1e-5f, true, false,
	  NO_EXTRAS, 4096, 96 },
	{ "granite-3.3-2b", "granite", 2048, 40, 32, 8, 64, 8192, 131072, 1e7f, 1e-5f, true, false,
	  PLAIN },
	{ "smollm3-3b", "smollm3", 2048, 36, 16, 4, 128, 11008, 65536, 5e6f, 1e-6f, true, false,
	  PLAIN },
	/* Small shapes for tests: rows of whole K-quant blocks. */
	{ "test-llama", "llama", 256, 2, 4, 2, 64, 512, 4096, 1e4f, 1e-5f, false, false, PLAIN },
	{ "test-qwen2", "qwen2", 256, 2, 4, 2, 64, 512, 4096, 1e6f, 1e-6f, true, false, PLAIN },
	/* OLMo 2: post-norms only, q/k norms over all heads (OLMo-2-0425-1B: 16 heads, untied) */
	{ "test-olmo2", "olmo2", 256, 2, 4, 2, 64, 512, 4096, 5e5f, 1e-6f, false, false, PLAIN },
	/* Phi-3: fused q/k/v and gate/up (no window here: llama.cpp leaves Phi-3's out) */
	{ "test-phi3", "phi3", 256, 2, 4, 2, 64, 512, 4096, 1e4f, 1e-5f, false, false, PLAIN },
	/* the same weights with a window of 40 on every layer (test_model) */
	{ "test-phi3-swa", "phi3", 256, 2, 4, 2, 64, 512, 4096, 1e4f, 1e-5f, false, false,
	  40, 0, 0, 0, 0, 0, DENSE },
	/* test-phi3 with LongRoPE over an original context of 4,096 (of 131,072); and Phi-4-mini's
	 * kind: tied, 48 of a head's 64 dimensions rotated */
	{ "test-phi3-longrope", "phi3", 256, 2, 4, 2, 64, 512, 131072, 1e4f, 1e-5f, false, false,
	  NO_EXTRAS, 4096, 0 },
	{ "test-phi4", "phi3", 256, 2, 4, 2, 64, 512, 131072, 1e4f, 1e-5f, true, false, NO_EXTRAS,
	  4096, 48 },
	/* Granite: Llama's with multipliers (granite_scales) */
	{ "test-granite", "granite", 256, 2, 4, 2, 64, 512, 4096, 1e4f, 1e-5f, false, false, PLAIN },
	/* SmolLM3: layer 3 of 4 without rope */
	{ "test-smollm3", "smollm3", 256, 4, 4, 2, 64, 512, 4096, 1e4f, 1e-6f, false, false, PLAIN },
	{ "test-qwen3", "qwen3", 256, 2, 4, 2, 128, 512, 4096, 1e6f, 1e-6f, true, false, PLAIN },
	{ "gemma-2-2b", "gemma2", 2304, 26, 8, 4, 256, 9216, 8192, 1e4f, 1e-6f, true, false,
	  4096, 0, 0, 50.0f, 30.0f, 0, DENSE },
	{ "gemma3-1b", "gemma3", 1152, 26, 4, 1, 256, 6912, 32768, 1e6f, 1e-6f, true, false,
	  512, 0, 0, 0, 0, 0, DENSE },
	{ "gemma3-4b", "gemma3", 2560, 34, 8, 4, 256, 10240, 131072, 1e6f, 1e-6f, true, false,
	  1024, 0, 0, 0, 0, 8.0f, DENSE },
	/* Gemma test shapes: windows of 40 (crossed by a prompt and its stream, not a page's
	 * multiple), soft-caps that bite (random scores spread about 1, logits about 4), the
	 * global layers' rope scaled and the local ones' not. */
	{ "test-gemma", "gemma", 256, 2, 4, 1, 64, 512, 8192, 1e4f, 1e-6f, true, false, PLAIN },
	{ "test-gemma2", "gemma2", 256, 4, 4, 2, 64, 512, 8192, 1e4f, 1e-6f, true, false,
	  40, 0, 0, 2.5f, 12.0f, 0, DENSE },
	{ "test-gemma3", "gemma3", 256, 3, 4, 2, 64, 512, 32768, 1e6f, 1e-6f, true, false,
	  40, 3, 1e4f, 0, 0, 4.0f, DENSE },
	/* Mixtures of experts: Qwen3-30B-A3B (128 experts, 8 a token, 768 wide; untied),
	 * Mixtral 8x7B (llama, 8 experts, 2 a token), and small test shapes of both. */
	{ "qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 128, 6144, 40960, 1e6f, 1e-6f, false,
	  false, 0, 0, 0, 0, 0, 0, 128, 8, 768, false, 0, 0 },
	{ "mixtral-8x7b", "llama", 4096, 32, 32, 8, 128, 14336, 32768, 1e6f, 1e-5f, false, false,
	  0, 0, 0, 0, 0, 0, 8, 2, 14336, false, 0, 0 },
	/* Qwen3 with YaRN (DeepSeek-R1-0528-Qwen3-8B's scaling: 4 over 32,768), small */
	{ "test-qwen3-yarn", "qwen3", 256, 2, 4, 2, 128, 512, 131072, 1e6f, 1e-6f, true, false,
	  0, 0, 0, 0, 0, 4.0f, 0, 0, 0, true, 0, 0 },
	{ "test-qwen3moe", "qwen3moe", 256, 2, 4, 2, 64, 1024, 4096, 1e6f, 1e-6f, false, false,
	  0, 0, 0, 0, 0, 0, 16, 4, 256, false, 0, 0 },
	{ "test-mixtral", "llama", 256, 2, 4, 2, 64, 256, 4096, 1e6f, 1e-5f, false, false,
	  0, 0, 0, 0, 0, 0, 8, 2, 256, false, 0, 0 },
	/* Qwen3.5: Gated DeltaNet layers and every fourth a gated attention. Qwen3.5-0.8B (1024
	 * wide, 24 layers, 8/2 heads of 256, a quarter of them roped, 16 key and 16 value heads
	 * of 128 with convolutions of 4, FFN 3584, rope base 1e7, tied), and a small shape with
	 * twice as many value heads as key heads (4 layers: 3 recurrent, then attention). */
	{ "qwen3.5-0.8b", "qwen35", 1024, 24, 8, 2, 256, 3584, 262144, 1e7f, 1e-6f, true, false,
	  PLAIN },
	{ "test-qwen35", "qwen35", 256, 4, 4, 2, 64, 512, 4096, 1e7f, 1e-6f, true, false, PLAIN },
	/* Qwen3.5-MoE: the same layers with 16 experts of 256 (4 a token) and a shared expert of
	 * 256 gated by its own sigmoid */
	{ "test-qwen35moe", "qwen35moe", 256, 4, 4, 2, 64, 256, 4096, 1e7f, 1e-6f, false, false,
	  0, 0, 0, 0, 0, 0, 16, 4, 256, false, 0, 0 },
	/* gpt-oss: attention sinks, biases, a window of 128 on every other layer, experts with
	 * biases and SwiGLU-OAI, YaRN 32 over 4,096. gpt-oss-20b (2880 wide, 24 layers, 64/8 heads
	 * of 64, 32 experts of 2880, 4 a token, untied), gpt-oss-120b (36 layers, 128 experts),
	 * and a small shape with a window of 40 (crossed by a prompt and its stream). */
	{ "gpt-oss-20b", "gpt-oss", 2880, 24, 64, 8, 64, 2880, 131072, 150000.0f, 1e-5f, false,
	  false, 128, 0, 0, 0, 0, 32.0f, 32, 4, 2880, true, 0, 0 },
	{ "gpt-oss-120b", "gpt-oss", 2880, 36, 64, 8, 64, 2880, 131072, 150000.0f, 1e-5f, false,
	  false, 128, 0, 0, 0, 0, 32.0f, 128, 4, 2880, true, 0, 0 },
	{ "test-gpt-oss", "gpt-oss", 256, 4, 4, 2, 64, 256, 131072, 150000.0f, 1e-5f, false, false,
	  40, 0, 0, 0, 0, 32.0f, 16, 4, 256, true, 0, 0 },
	/* Ministral 3 (mistral3): Llama's with YaRN (16 over 16,384, log multiplier 1) and Llama
	 * 4's attention temperature (mistral3_keys). Ministral-3-3B (3072 wide, 26 layers, 32/8
	 * heads of 128, tied); a small shape whose temperature steps every 32 positions (its
	 * original context), YaRN's ramp moved by betas other than the defaults. */
	{ "ministral-3-3b", "mistral3", 3072, 26, 32, 8, 128, 9216, 262144, 1e6f, 1e-5f, true,
	  false, 0, 0, 0, 0, 0, 16.0f, 0, 0, 0, true, 0, 0 },
	{ "test-mistral3", "mistral3", 256, 2, 4, 2, 64, 512, 512, 1e4f, 1e-5f, false, false,
	  0, 0, 0, 0, 0, 16.0f, 0, 0, 0, true, 0, 0 },
	/* Granite 3.x MoE (granitemoe): Granite's multipliers, experts as wide as the
	 * feed-forward (Granite-3.1-3B-A800M: 1536 wide, 32 layers, 24/8 heads of 64, 40 experts
	 * of 512, 8 a token, tied), small shapes without and with a shared expert
	 * (granite_scales) */
	{ "granite-3.1-3b-a800m", "granitemoe", 1536, 32, 24, 8, 64, 512, 131072, 1e7f, 1e-6f,
	  true, false, 0, 0, 0, 0, 0, 0, 40, 8, 512, false, 0, 0 },
	{ "test-granitemoe", "granitemoe", 256, 2, 4, 2, 64, 256, 4096, 1e4f, 1e-6f, false, false,
	  0, 0, 0, 0, 0, 0, 8, 2, 256, false, 0, 0 },
	{ "test-granitemoe-shared", "granitemoe", 256, 2, 4, 2, 64, 256, 4096, 1e4f, 1e-6f, false,
	  false, 0, 0, 0, 0, 0, 0, 8, 2, 256, false, 0, 0 },
	/* Granite 4.0-H (granitehybrid, m2_shapes): Mamba-2 layers and an attention layer in
	 * ten without rope, Granite's multipliers. H-Micro's kind (2048 wide, 40 layers, 32/8
	 * heads of 64, a dense FFN of 8192, 64 Mamba heads of 64 with states of 128, one group,
	 * tied) and H-Tiny's (1536 wide, 12/4 heads of 128, 64 experts of 512, 6 a token, a
	 * shared expert of 1024, 48 Mamba heads); small shapes of 4 layers (Mamba-2, Mamba-2,
	 * attention, Mamba-2), dense and with experts, a shared expert and rope. */
	{ "granite-4.0-h-micro", "granitehybrid", 2048, 40, 32, 8, 64, 8192, 1048576, 1e4f, 1e-5f,
	  true, false, PLAIN },
	{ "granite-4.0-h-tiny", "granitehybrid", 1536, 40, 12, 4, 128, 512, 1048576, 1e4f, 1e-5f,
	  true, false, 0, 0, 0, 0, 0, 0, 64, 6, 512, false, 0, 0 },
	{ "test-granitehybrid", "granitehybrid", 256, 4, 4, 2, 64, 512, 4096, 1e4f, 1e-5f, false,
	  false, PLAIN },
	{ "test-granitehybrid-moe", "granitehybrid", 256, 4, 4, 2, 64, 256, 4096, 1e4f, 1e-5f,
	  false, false, 0, 0, 0, 0, 0, 0, 8, 2, 256, false, 0, 0 },
};

/* The --type choices: one type for every matrix, or a mix (llama.cpp's *_M: its base type,
 * Q6_K where it spends more bits). */
static const struct {
	const char *name;
	uint32_t type;  /* the type, or the mix's base type */
	uint32_t ftype; /* llama.cpp's general.file_type */
	bool mix;
} types[] = {
	{ "f32", SF_GGUF_T_F32, 0, false },    { "f16", SF_GGUF_T_F16, 1, false },
	{ "bf16", SF_GGUF_T_BF16, 32, false }, { "q8_0", SF_GGUF_T_Q8_0, 7, false },
	{ "q4_0", SF_GGUF_T_Q4_0, 2, false },  { "q5_0", SF_GGUF_T_Q5_0, 8, false },
	{ "q4_k", SF_GGUF_T_Q4_K, 14, false }, { "q6_k", SF_GGUF_T_Q6_K, 18, false },
	{ "q4_k_m", SF_GGUF_T_Q4_K, 15, true }, { "q5_k", SF_GGUF_T_Q5_K, 16, false },
	{ "q5_k_m", SF_GGUF_T_Q5_K, 17, true }, { "q3_k", SF_GGUF_T_Q3_K, 11, false },
	{ "q2_k", SF_GGUF_T_Q2_K, 10, false }, { "iq4_xs", SF_GGUF_T_IQ4_XS, 30, false },
	{ "q4_1", SF_GGUF_T_Q4_1, 3, false },   { "q5_1", SF_GGUF_T_Q5_1, 9, false },
	{ "iq4_nl", SF_GGUF_T_IQ4_NL, 25, false }, { "mxfp4", SF_GGUF_T_MXFP4, 38, false },
	/* llama.cpp's MXFP4_MOE (gpt-oss's own files): experts MXFP4, other matrices Q8_0 */
	{ "mxfp4_moe", SF_GGUF_T_Q8_0, 38, false },
};

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

/* Element i of a tensor: uniform in [-a, a] around center, from (seed, tensor, i). */
static float value(uint64_t key, uint64_t i, float center, float a)
{
	uint64_t r = mix(key ^ mix(i));
	double u = (double)(r >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
	return center + (float)((2 * u - 1) * a);
}

struct tensor_job {
	uint64_t key;
	uint32_t type;
	uint64_t cols, rows;
	float center, a;
	uint8_t *out;
};

/* Rows of the tensor, made and quantized in chunks by each thread. */
static void make_rows(void *arg, unsigned ith, unsigned nth)
{
	struct tensor_job *j = arg;
	uint64_t lo, hi;
	sf_pool_split(j->rows, ith, nth, 1, &lo, &hi);
	size_t row_bytes = sf_kt_row_bytes(j->type, (int64_t)j->cols);
	float *x = malloc(j->cols * sizeof(float));
	if (!x)
		abort();
	for (uint64_t r = lo; r < hi; r++) {
		for (uint64_t c = 0; c < j->cols; c++)
			x[c] = value(j->key, r * j->cols + c, j->center, j->a);
		sf_kt(j->type)->quantize(x, j->out + r * row_bytes, (int64_t)j->cols);
	}
	free(x);
}

struct maker {
	struct sf_gguf_writer *w;
	struct sf_pool *pool;
	uint64_t seed;
	void **bufs;
	size_t n_bufs;
	uint64_t bytes;
	const char *chat_template;
	uint32_t exps; /* the experts' type where the file type gives them another (0: none) */
	struct sf_err *err;
};

/* A tensor of n matrices of rows x cols (n 1: a matrix, rows 1 too: a vector). */
static int add_n(struct maker *mk, const char *name, uint32_t type, uint64_t cols,
		 uint64_t rows, uint64_t n, float center, float a)
{
	size_t size = sf_kt_row_bytes(type, (int64_t)cols) * rows * n;
	uint8_t *out = malloc(size ? size : 1);
	void **b = realloc(mk->bufs, (mk->n_bufs + 1) * sizeof(*b));
	if (!out || !b) {
		free(out);
		return sf_err_set(mk->err, SF_E_NOMEM, "no memory for %s (%zu bytes)", name, size);
	}
	mk->bufs = b;
	mk->bufs[mk->n_bufs++] = out;
	struct tensor_job j = { mk->seed ^ name_hash(name), type, cols, rows * n, center, a, out };
	sf_pool_run(mk->pool, make_rows, &j);
	uint64_t ne[3] = { cols, rows, n };
	if (sf_gguf_add_tensor(mk->w, name, type, n > 1 ? 3 : rows == 1 ? 1 : 2, ne, out, size))
		return sf_err_set(mk->err, SF_E_RANGE, "cannot add %s", name);
	mk->bytes += size;
	return 0;
}

static int add(struct maker *mk, const char *name, uint32_t type, uint64_t cols, uint64_t rows,
	       float center, float a)
{
	return add_n(mk, name, type, cols, rows, 1, center, a);
}

/* A matrix's type: the asked one, or the mix's choice (mix: want is its base type); K types
 * fall back where rows are not whole 256-element blocks (what llama.cpp does for such
 * models). */
static uint32_t pick(uint32_t want, bool mix, const char *role, uint32_t il, uint32_t n_layer,
		     uint64_t cols)
{
	uint32_t t = want;
	if (mix) {
		bool more = il < n_layer / 8 || il >= 7 * n_layer / 8 || (il - n_layer / 8) % 3 == 2;
		if (!strcmp(role, "output"))
			t = SF_GGUF_T_Q6_K;
		else if ((!strcmp(role, "attn_v") || !strcmp(role, "ffn_down")) && more)
			t = SF_GGUF_T_Q6_K;
	}
	if (cols % 256 && t == SF_GGUF_T_Q4_K)
		t = SF_GGUF_T_Q5_0;
	if (cols % 256 && t == SF_GGUF_T_Q5_K)
		t = SF_GGUF_T_Q5_1;
	if (cols % 256 && t == SF_GGUF_T_Q6_K)
		t = SF_GGUF_T_Q8_0;
	if (cols % 256 && (t == SF_GGUF_T_Q2_K || t == SF_GGUF_T_Q3_K))
		t = SF_GGUF_T_Q4_0;
	if (cols % 256 && t == SF_GGUF_T_IQ4_XS)
		t = SF_GGUF_T_IQ4_NL;
	return t;
}

/* The vocabulary's tokenizer.* pairs; not its chat templates when arg (one is given). */
static bool keep_tokenizer(const char *key, size_t len, void *arg)
{
	static const char tmpl[] = "tokenizer.chat_template";
	if (arg && len >= sizeof(tmpl) - 1 && !memcmp(key, tmpl, sizeof(tmpl) - 1))
		return false;
	return len > 10 && !memcmp(key, "tokenizer.", 10);
}

/* Llama 3's rope frequency factors (factor 32, low 1, high 4, original context 8192). */
static void llama3_factors(const struct shape *s, float *out)
{
	const double factor = 32, low = 1, high = 4, old_ctx = 8192;
	for (uint32_t i = 0; i < s->head_dim / 2; i++) {
		double freq = 1.0 / pow(s->rope_base, 2.0 * i / s->head_dim);
		double wavelen = 2 * M_PI / freq;
		if (wavelen < old_ctx / high) {
			out[i] = 1;
		} else if (wavelen > old_ctx / low) {
			out[i] = (float)factor;
		} else {
			double smooth = (old_ctx / wavelen - low) / (high - low);
			out[i] = (float)(1.0 / ((1 - smooth) / factor + smooth));
		}
	}
}

/* Granite's multipliers by shape: embeddings, residuals, attention scores, logits (divided);
 * Granite MoE Shared's shared expert's width (0: none). */
static const struct granite_scale {
	const char *shape;
	float embd, resid, attn, logit;
	uint32_t shexp;
} granite_scales[] = {
	{ "granite-3.3-2b", 12.0f, 0.22f, 0.015625f, 8.0f, 0 },
	{ "test-granite", 12.0f, 0.22f, 0.03f, 8.0f, 0 }, /* a score scale not 1/sqrt(64) */
	{ "granite-3.1-3b-a800m", 12.0f, 0.22f, 0.015625f, 6.0f, 0 },
	{ "test-granitemoe", 12.0f, 0.22f, 0.03f, 6.0f, 0 },
	{ "test-granitemoe-shared", 12.0f, 0.22f, 0.03f, 6.0f, 384 },
	{ "granite-4.0-h-micro", 12.0f, 0.246f, 0.0078125f, 8.0f, 0 },
	{ "granite-4.0-h-tiny", 12.0f, 0.22f, 0.0078125f, 6.0f, 1024 },
	{ "test-granitehybrid", 12.0f, 0.22f, 0.03f, 8.0f, 0 },
	{ "test-granitehybrid-moe", 12.0f, 0.22f, 0.03f, 6.0f, 384 },
};

static const struct granite_scale *granite_of(const struct shape *s)
{
	for (size_t i = 0; i < sizeof(granite_scales) / sizeof(granite_scales[0]); i++)
		if (!strcmp(granite_scales[i].shape, s->name))
			return &granite_scales[i];
	return NULL;
}

static int write_granite(struct maker *mk, const struct shape *s)
{
	const struct granite_scale *gs = granite_of(s);
	if (!gs)
		return -1;
	struct sf_gguf_writer *w = mk->w;
	char k[128];
#define KEY(suffix) (snprintf(k, sizeof(k), "%s.%s", s->arch, suffix), k)
	int rc = sf_gguf_set_f32(w, KEY("embedding_scale"), gs->embd);
	rc = rc ? rc : sf_gguf_set_f32(w, KEY("residual_scale"), gs->resid);
	rc = rc ? rc : sf_gguf_set_f32(w, KEY("attention.scale"), gs->attn);
	rc = rc ? rc : sf_gguf_set_f32(w, KEY("logit_scale"), gs->logit);
	if (gs->shexp)
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("expert_shared_feed_forward_length"),
					       gs->shexp);
#undef KEY
	return rc;
}

/* Ministral 3's keys by shape: YaRN's betas and log multiplier, the attention temperature
 * (llama_4_scaling_beta), as llama.cpp's converter writes them. */
static const struct {
	const char *shape;
	float beta_fast, beta_slow, log_mul, temp;
} mistral3_keys[] = {
	{ "ministral-3-3b", 32.0f, 1.0f, 1.0f, 0.1f },
	/* the ramp over pairs 3-11 (the defaults': 0-6), a temperature that bites */
	{ "test-mistral3", 2.0f, 0.25f, 1.0f, 0.3f },
};

static int write_mistral3(struct maker *mk, const struct shape *s)
{
	for (size_t i = 0; i < sizeof(mistral3_keys) / sizeof(mistral3_keys[0]); i++) {
		if (strcmp(mistral3_keys[i].shape, s->name))
			continue;
		struct sf_gguf_writer *w = mk->w;
		int rc = sf_gguf_set_f32(w, "mistral3.rope.scaling.yarn_beta_fast",
					 mistral3_keys[i].beta_fast);
		rc = rc ? rc : sf_gguf_set_f32(w, "mistral3.rope.scaling.yarn_beta_slow",
					       mistral3_keys[i].beta_slow);
		rc = rc ? rc : sf_gguf_set_f32(w, "mistral3.rope.scaling.yarn_log_multiplier",
					       mistral3_keys[i].log_mul);
		rc = rc ? rc : sf_gguf_set_f32(w, "mistral3.attention.temperature_scale",
					       mistral3_keys[i].temp);
		return rc;
	}
	return -1;
}

static int write_meta(struct maker *mk, const struct shape *s, uint32_t n_layer, uint32_t ctx,
		      uint32_t ftype, const char *type_name, const struct sf_gguf *vocab)
{
	struct sf_gguf_writer *w = mk->w;
	char k[128], name[128];
	snprintf(name, sizeof(name), "random-%s-%s", s->name, type_name);
#define KEY(suffix) (snprintf(k, sizeof(k), "%s.%s", s->arch, suffix), k)
	int rc = sf_gguf_set_str(w, "general.architecture", s->arch, strlen(s->arch));
	rc = rc ? rc : sf_gguf_set_str(w, "general.name", name, strlen(name));
	rc = rc ? rc : sf_gguf_set_u32(w, "general.file_type", ftype);
	rc = rc ? rc : sf_gguf_set_u32(w, "general.quantization_version", 2);
	rc = rc ? rc : sf_gguf_set_u32(w, KEY("context_length"), ctx);
	rc = rc ? rc : sf_gguf_set_u32(w, KEY("embedding_length"), s->n_embd);
	rc = rc ? rc : sf_gguf_set_u32(w, KEY("block_count"), n_layer);
	rc = rc ? rc : sf_gguf_set_u32(w, KEY("feed_forward_length"), s->n_ff);
	rc = rc ? rc : sf_gguf_set_u32(w, KEY("attention.head_count"), s->n_head);
	const struct m2_shape *m2 = m2_of(s);
	if (m2) {
		/* 0 key/value heads: a Mamba-2 layer */
		uint32_t kvh[SF_MODEL_MAX_LAYERS];
		for (uint32_t il = 0; il < n_layer; il++)
			kvh[il] = m2_attn(m2, il, n_layer) ? s->n_head_kv : 0;
		rc = rc ? rc : sf_gguf_set_arr(w, KEY("attention.head_count_kv"), SF_GGUF_U32, kvh,
					       n_layer);
		rc = rc ? rc : sf_gguf_set_bool(w, KEY("rope.scaling.finetuned"), m2->roped);
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("ssm.conv_kernel"), m2->ssm_conv);
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("ssm.state_size"), m2->ssm_state);
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("ssm.group_count"), m2->ssm_group);
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("ssm.time_step_rank"), m2->ssm_heads);
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("ssm.inner_size"), m2->ssm_inner);
	} else {
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("attention.head_count_kv"), s->n_head_kv);
	}
	rc = rc ? rc : sf_gguf_set_f32(w, KEY("rope.freq_base"), s->rope_base);
	rc = rc ? rc : sf_gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), s->eps);
	if (s->head_dim != s->n_embd / s->n_head) {
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("attention.key_length"), s->head_dim);
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("attention.value_length"), s->head_dim);
	}
	if (!strcmp(s->arch, "llama") || !strcmp(s->arch, "mistral3") || s->n_rot)
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("rope.dimension_count"),
					       s->n_rot ? s->n_rot : s->head_dim);
	if (s->longrope_orig) {
		/* what llama.cpp's converter writes: sqrt(1 + ln(scale) / ln(original)) */
		double scale = (double)ctx / s->longrope_orig;
		float af = scale > 1 ? (float)sqrt(1 + log(scale) / log(s->longrope_orig)) : 1.0f;
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("rope.scaling.original_context_length"),
					       s->longrope_orig);
		rc = rc ? rc : sf_gguf_set_f32(w, KEY("rope.scaling.attn_factor"), af);
	}
	if (!strcmp(s->arch, "granite") || !strcmp(s->arch, "granitemoe") || m2)
		rc = rc ? rc : write_granite(mk, s);
	if (!strcmp(s->arch, "mistral3"))
		rc = rc ? rc : write_mistral3(mk, s);
	const struct ssm_shape *ss = ssm_of(s);
	if (ss) {
		uint32_t inner = ss->ssm_state * ss->ssm_heads;
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("rope.dimension_count"), ss->n_rot);
		rc = rc ? rc : sf_gguf_set_arr(w, KEY("rope.dimension_sections"), SF_GGUF_I32,
					       ss->sections, 4);
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("ssm.conv_kernel"), ss->ssm_conv);
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("ssm.state_size"), ss->ssm_state);
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("ssm.group_count"), ss->ssm_group);
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("ssm.time_step_rank"), ss->ssm_heads);
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("ssm.inner_size"), inner);
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("full_attention_interval"), ss->fa_every);
		if (s->n_expert)
			rc = rc ? rc : sf_gguf_set_u32(w, KEY("expert_shared_feed_forward_length"),
						       s->n_ff);
	}
	if (s->n_swa)
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("attention.sliding_window"), s->n_swa);
	if (s->swa_period)
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("attention.sliding_window_pattern"),
					       s->swa_period);
	if (s->rope_base_swa)
		rc = rc ? rc : sf_gguf_set_f32(w, KEY("rope.freq_base_swa"), s->rope_base_swa);
	if (s->attn_cap)
		rc = rc ? rc : sf_gguf_set_f32(w, KEY("attn_logit_softcapping"), s->attn_cap);
	if (s->final_cap)
		rc = rc ? rc : sf_gguf_set_f32(w, KEY("final_logit_softcapping"), s->final_cap);
	if (s->n_expert) {
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("expert_count"), s->n_expert);
		rc = rc ? rc : sf_gguf_set_u32(w, KEY("expert_used_count"), s->n_expert_used);
		/* (Mixtral's and Granite MoE's experts are the feed-forward's width) */
		if (strcmp(s->arch, "llama") && strcmp(s->arch, "granitemoe") && !m2)
			rc = rc ? rc : sf_gguf_set_u32(w, KEY("expert_feed_forward_length"),
						       s->n_ff_exp);
	}
	if (s->rope_linear) {
		rc = rc ? rc : sf_gguf_set_str(w, KEY("rope.scaling.type"), s->yarn ? "yarn" : "linear",
					       s->yarn ? 4 : 6);
		rc = rc ? rc : sf_gguf_set_f32(w, KEY("rope.scaling.factor"), s->rope_linear);
		if (s->yarn)
			rc = rc ? rc : sf_gguf_set_u32(w, KEY("rope.scaling.original_context_length"),
						       (uint32_t)((float)s->n_ctx / s->rope_linear));
	}
#undef KEY
	rc = rc ? rc : sf_gguf_copy_kv(w, vocab, keep_tokenizer, (void *)mk->chat_template);
	if (mk->chat_template)
		rc = rc ? rc : sf_gguf_set_str(w, "tokenizer.chat_template", mk->chat_template,
					       strlen(mk->chat_template));
	if (rc)
		return sf_err_set(mk->err, SF_E_NOMEM, "cannot write the metadata");
	return 0;
}

/* A Qwen3.5 layer: a Gated DeltaNet one (its decays e^(softplus(alpha + dt) * a) mostly 0.5
 * to 0.95 a token, so that the state remembers some tokens back) or, every fa_every-th, a
 * gated attention (attn_q 2 x the heads' width); the norm before the FFN post_attention_norm,
 * as llama.cpp names it. */
static int make_qwen35_layer(struct maker *mk, const struct shape *s, const struct ssm_shape *ss,
			     uint32_t il, uint32_t n_layer, uint32_t want, bool mix)
{
	uint64_t E = s->n_embd, q = (uint64_t)s->n_head * s->head_dim;
	uint64_t kv = (uint64_t)s->n_head_kv * s->head_dim, F = s->n_ff, S = ss->ssm_state;
	uint64_t H = ss->ssm_heads, vd = S * H, ch = 2 * S * ss->ssm_group + vd;
	float aE = sqrtf(3.0f / (float)E), aQ = sqrtf(3.0f / (float)q), aF = sqrtf(3.0f / (float)F);
	float aV = sqrtf(3.0f / (float)vd);
	char n[96];
	int rc = 0;
#define T(suffix, type, cols, rows, center, a)                                              \
	(snprintf(n, sizeof(n), "blk.%u.%s", il, suffix),                                   \
	 rc = rc ? rc : add(mk, n, type, cols, rows, center, a))
#define M(role, suffix, cols, rows, a) T(suffix, pick(want, mix, role, il, n_layer, cols), cols, rows, 0, a)
	T("attn_norm.weight", SF_GGUF_T_F32, E, 1, 1.0f, 0.1f);
	if ((il + 1) % ss->fa_every == 0) {
		M("attn_q", "attn_q.weight", E, 2 * q, aE);
		M("attn_k", "attn_k.weight", E, kv, aE);
		M("attn_v", "attn_v.weight", E, kv, aE);
		M("attn_output", "attn_output.weight", q, E, aQ);
		T("attn_q_norm.weight", SF_GGUF_T_F32, s->head_dim, 1, 1.0f, 0.1f);
		T("attn_k_norm.weight", SF_GGUF_T_F32, s->head_dim, 1, 1.0f, 0.1f);
	} else {
		M("attn_qkv", "attn_qkv.weight", E, ch, aE);
		M("attn_gate", "attn_gate.weight", E, vd, aE);
		T("ssm_conv1d.weight", SF_GGUF_T_F32, ss->ssm_conv, ch, 0,
		  sqrtf(3.0f / (float)ss->ssm_conv));
		T("ssm_dt.bias", SF_GGUF_T_F32, H, 1, 1.0f, 0.5f);
		T("ssm_a", SF_GGUF_T_F32, H, 1, -0.15f, 0.1f);
		M("ssm_beta", "ssm_beta.weight", E, H, aE);
		M("ssm_alpha", "ssm_alpha.weight", E, H, aE);
		T("ssm_norm.weight", SF_GGUF_T_F32, S, 1, 1.0f, 0.1f);
		M("ssm_out", "ssm_out.weight", vd, E, aV);
	}
	T("post_attention_norm.weight", SF_GGUF_T_F32, E, 1, 1.0f, 0.1f);
	if (s->n_expert) {
		/* the router and the shared expert's gate in F32, as llama.cpp's quantizer leaves
		 * them; the experts stacked; the shared expert's FFN n_ff wide */
		uint64_t X = s->n_expert, FX = s->n_ff_exp;
		float aX = sqrtf(3.0f / (float)FX);
		T("ffn_gate_inp.weight", SF_GGUF_T_F32, E, X, 0, aE);
#define X3(role, suffix, cols, rows, a)                                                      \
	(snprintf(n, sizeof(n), "blk.%u.%s", il, suffix),                                   \
	 rc = rc ? rc : add_n(mk, n, mk->exps ? mk->exps : pick(want, mix, role, il, n_layer, cols), \
			      cols, rows, X, 0, a))
		X3("ffn_gate", "ffn_gate_exps.weight", E, FX, aE);
		X3("ffn_up", "ffn_up_exps.weight", E, FX, aE);
		X3("ffn_down", "ffn_down_exps.weight", FX, E, aX);
#undef X3
		T("ffn_gate_inp_shexp.weight", SF_GGUF_T_F32, E, 1, 0, aE);
		M("ffn_gate", "ffn_gate_shexp.weight", E, F, aE);
		M("ffn_up", "ffn_up_shexp.weight", E, F, aE);
		M("ffn_down", "ffn_down_shexp.weight", F, E, aF);
	} else {
		M("ffn_gate", "ffn_gate.weight", E, F, aE);
		M("ffn_up", "ffn_up.weight", E, F, aE);
		M("ffn_down", "ffn_down.weight", F, E, aF);
	}
#undef M
#undef T
	return rc;
}

/* A gpt-oss layer: q/k/v/o with biases, each query head's sink logit (-1 to 2: about the
 * scores' own spread, so that a sink takes a real share), post_attention_norm before the
 * experts, the router's bias (+-3: the experts' order mostly the bias's, so that a near tie
 * of the k-th and next expert, whose flip on a rounding the attention carries to every later
 * row, is rare), the experts' biases, their down at half the usual spread. SwiGLU-OAI's clamp
 * at 7 seldom bites here (test_model checks it against its definition): gate and up at two or
 * three times the spread, or the router's bias +-0.5, made a model whose router flips on
 * llama.cpp's own rounding at most rows, so its agreement checked little (F32: 46 of 105 rows
 * parted between llama.cpp's own paths). */
static int make_gptoss_layer(struct maker *mk, const struct shape *s, uint32_t il,
			     uint32_t n_layer, uint32_t want, bool mix)
{
	uint64_t E = s->n_embd, q = (uint64_t)s->n_head * s->head_dim;
	uint64_t kv = (uint64_t)s->n_head_kv * s->head_dim, X = s->n_expert, FX = s->n_ff_exp;
	float aE = sqrtf(3.0f / (float)E), aQ = sqrtf(3.0f / (float)q);
	float aX = sqrtf(3.0f / (float)FX);
	char n[96];
	int rc = 0;
#define T(suffix, type, cols, rows, center, a)                                              \
	(snprintf(n, sizeof(n), "blk.%u.%s", il, suffix),                                   \
	 rc = rc ? rc : add(mk, n, type, cols, rows, center, a))
#define M(role, suffix, cols, rows, a) T(suffix, pick(want, mix, role, il, n_layer, cols), cols, rows, 0, a)
#define X3(role, suffix, cols, rows, a)                                                      \
	(snprintf(n, sizeof(n), "blk.%u.%s", il, suffix),                                   \
	 rc = rc ? rc : add_n(mk, n, mk->exps ? mk->exps : pick(want, mix, role, il, n_layer, cols), \
			      cols, rows, X, 0, a))
	T("attn_norm.weight", SF_GGUF_T_F32, E, 1, 1.0f, 0.1f);
	M("attn_q", "attn_q.weight", E, q, aE);
	M("attn_k", "attn_k.weight", E, kv, aE);
	M("attn_v", "attn_v.weight", E, kv, aE);
	T("attn_q.bias", SF_GGUF_T_F32, q, 1, 0, 0.1f);
	T("attn_k.bias", SF_GGUF_T_F32, kv, 1, 0, 0.1f);
	T("attn_v.bias", SF_GGUF_T_F32, kv, 1, 0, 0.1f);
	M("attn_output", "attn_output.weight", q, E, aQ);
	T("attn_output.bias", SF_GGUF_T_F32, E, 1, 0, 0.1f);
	T("attn_sinks.weight", SF_GGUF_T_F32, s->n_head, 1, 0.5f, 1.5f);
	T("post_attention_norm.weight", SF_GGUF_T_F32, E, 1, 1.0f, 0.1f);
	T("ffn_gate_inp.weight", SF_GGUF_T_F32, E, X, 0, aE);
	T("ffn_gate_inp.bias", SF_GGUF_T_F32, X, 1, 0, 3.0f);
	X3("ffn_gate", "ffn_gate_exps.weight", E, FX, aE);
	X3("ffn_up", "ffn_up_exps.weight", E, FX, aE);
	X3("ffn_down", "ffn_down_exps.weight", FX, E, aX / 2);
	T("ffn_gate_exps.bias", SF_GGUF_T_F32, FX, X, 0, 0.5f);
	T("ffn_up_exps.bias", SF_GGUF_T_F32, FX, X, 0, 0.5f);
	T("ffn_down_exps.bias", SF_GGUF_T_F32, E, X, 0, 0.1f);
#undef X3
#undef M
#undef T
	return rc;
}

/* A Granite 4 Mamba-2 layer's mixer: its decays e^(softplus(dt + bias) * A) mostly 0.7 to
 * 0.95 a token (A -0.1 to -0.9, softplus(dt + bias) about 0.3), so that the state remembers
 * some tokens back; D about 1. */
static int make_mamba2(struct maker *mk, const struct shape *s, const struct m2_shape *m2,
		       uint32_t il, uint32_t n_layer, uint32_t want, bool mix)
{
	uint64_t E = s->n_embd, D = m2->ssm_inner, H = m2->ssm_heads, G = m2->ssm_group;
	uint64_t ch = D + 2 * G * m2->ssm_state;
	char n[96];
	int rc = 0;
#define T(suffix, type, cols, rows, center, a)                                              \
	(snprintf(n, sizeof(n), "blk.%u.%s", il, suffix),                                   \
	 rc = rc ? rc : add(mk, n, type, cols, rows, center, a))
	T("ssm_in.weight", pick(want, mix, "ssm_in", il, n_layer, E), E, D + ch + H, 0,
	  sqrtf(3.0f / (float)E));
	T("ssm_conv1d.weight", SF_GGUF_T_F32, m2->ssm_conv, ch, 0,
	  sqrtf(3.0f / (float)m2->ssm_conv));
	T("ssm_conv1d.bias", SF_GGUF_T_F32, ch, 1, 0, 0.1f);
	T("ssm_dt.bias", SF_GGUF_T_F32, H, 1, -1.0f, 0.5f);
	T("ssm_a", SF_GGUF_T_F32, 1, H, -0.5f, 0.4f);
	T("ssm_d", SF_GGUF_T_F32, 1, H, 1.0f, 0.5f);
	T("ssm_norm.weight", SF_GGUF_T_F32, D / G, G, 1.0f, 0.1f);
	T("ssm_out.weight", pick(want, mix, "ssm_out", il, n_layer, D), D, E, 0,
	  sqrtf(3.0f / (float)D));
#undef T
	return rc;
}

static int make_layer(struct maker *mk, const struct shape *s, uint32_t il, uint32_t n_layer,
		      uint32_t want, bool mix)
{
	uint64_t E = s->n_embd, q = (uint64_t)s->n_head * s->head_dim;
	uint64_t kv = (uint64_t)s->n_head_kv * s->head_dim, F = s->n_ff;
	float aE = sqrtf(3.0f / (float)E), aQ = sqrtf(3.0f / (float)q), aF = sqrtf(3.0f / (float)F);
	char n[96];
	int rc = 0;
#define T(role, suffix, type, cols, rows, center, a)                                        \
	(snprintf(n, sizeof(n), "blk.%u.%s", il, suffix),                                   \
	 rc = rc ? rc : add(mk, n, type, cols, rows, center, a))
#define M(role, suffix, cols, rows, a) T(role, suffix, pick(want, mix, role, il, n_layer, cols), cols, rows, 0, a)
	if (ssm_of(s))
		return make_qwen35_layer(mk, s, ssm_of(s), il, n_layer, want, mix);
	if (!strcmp(s->arch, "gpt-oss"))
		return make_gptoss_layer(mk, s, il, n_layer, want, mix);
	bool olmo2 = !strcmp(s->arch, "olmo2"); /* no pre-norms; q/k norms over all heads */
	if (!olmo2)
		T("", "attn_norm.weight", SF_GGUF_T_F32, E, 1, 1.0f, 0.1f);
	bool phi3 = !strcmp(s->arch, "phi3"); /* q/k/v fused, gate and up fused */
	const struct m2_shape *m2 = m2_of(s);
	if (m2 && !m2_attn(m2, il, n_layer)) {
		rc = make_mamba2(mk, s, m2, il, n_layer, want, mix);
	} else if (phi3) {
		M("attn_qkv", "attn_qkv.weight", E, q + 2 * kv, aE);
	} else {
		M("attn_q", "attn_q.weight", E, q, aE);
		M("attn_k", "attn_k.weight", E, kv, aE);
		M("attn_v", "attn_v.weight", E, kv, aE);
	}
	if (!m2 || m2_attn(m2, il, n_layer))
		M("attn_output", "attn_output.weight", q, E, aQ);
	if (!strcmp(s->arch, "qwen2")) {
		T("", "attn_q.bias", SF_GGUF_T_F32, q, 1, 0, 0.1f);
		T("", "attn_k.bias", SF_GGUF_T_F32, kv, 1, 0, 0.1f);
		T("", "attn_v.bias", SF_GGUF_T_F32, kv, 1, 0, 0.1f);
	}
	if (!strcmp(s->arch, "qwen3") || !strcmp(s->arch, "gemma3") || !strcmp(s->arch, "qwen3moe") ||
	    olmo2) {
		T("", "attn_q_norm.weight", SF_GGUF_T_F32, olmo2 ? q : s->head_dim, 1, 1.0f, 0.1f);
		T("", "attn_k_norm.weight", SF_GGUF_T_F32, olmo2 ? kv : s->head_dim, 1, 1.0f, 0.1f);
	}
	bool post = !strcmp(s->arch, "gemma2") || !strcmp(s->arch, "gemma3") || olmo2;
	if (post)
		T("", "post_attention_norm.weight", SF_GGUF_T_F32, E, 1, 1.0f, 0.1f);
	if (!olmo2)
		T("", "ffn_norm.weight", SF_GGUF_T_F32, E, 1, 1.0f, 0.1f);
	if (s->n_expert) {
		/* the router in F32, as llama.cpp's quantizer leaves it; the experts stacked */
		uint64_t X = s->n_expert, FX = s->n_ff_exp;
		float aX = sqrtf(3.0f / (float)FX);
		T("", "ffn_gate_inp.weight", SF_GGUF_T_F32, E, X, 0, aE);
#define X3(role, suffix, cols, rows, a)                                                      \
	(snprintf(n, sizeof(n), "blk.%u.%s", il, suffix),                                   \
	 rc = rc ? rc : add_n(mk, n, mk->exps ? mk->exps : pick(want, mix, role, il, n_layer, cols), \
			      cols, rows, X, 0, a))
		X3("ffn_gate", "ffn_gate_exps.weight", E, FX, aE);
		X3("ffn_up", "ffn_up_exps.weight", E, FX, aE);
		X3("ffn_down", "ffn_down_exps.weight", FX, E, aX);
#undef X3
		const struct granite_scale *gs = granite_of(s);
		if (gs && gs->shexp) { /* Granite MoE Shared: a shared expert, ungated */
			uint64_t FS = gs->shexp;
			float aS = sqrtf(3.0f / (float)FS);
			M("ffn_gate", "ffn_gate_shexp.weight", E, FS, aE);
			M("ffn_up", "ffn_up_shexp.weight", E, FS, aE);
			M("ffn_down", "ffn_down_shexp.weight", FS, E, aS);
		}
	} else if (phi3) {
		M("ffn_up", "ffn_up.weight", E, 2 * F, aE);
		M("ffn_down", "ffn_down.weight", F, E, aF);
	} else {
		M("ffn_gate", "ffn_gate.weight", E, F, aE);
		M("ffn_up", "ffn_up.weight", E, F, aE);
		M("ffn_down", "ffn_down.weight", F, E, aF);
	}
	if (post)
		T("", "post_ffw_norm.weight", SF_GGUF_T_F32, E, 1, 1.0f, 0.1f);
#undef M
#undef T
	return rc;
}


const char *const sf_model_gen_shapes[] = { "qwen2.5-0.5b", "qwen3-0.6b", "llama-3.2-1b",
					    "tinyllama-1.1b", "smollm2-135m", "gemma-2-2b",
					    "gemma3-1b", "gemma3-4b", "test-llama", "test-qwen2",
					    "test-qwen3", "test-gemma", "test-gemma2", "test-gemma3",
					    "qwen3-30b-a3b", "mixtral-8x7b", "test-qwen3moe",
					    "test-mixtral", "test-qwen3-yarn", "smollm3-3b",
					    "test-smollm3", "olmo2-1b", "test-olmo2", "granite-3.3-2b",
					    "test-granite", "phi-3-mini-4k", "test-phi3",
					    "mistral-nemo-12b", "test-phi3-swa", "phi-3.5-mini",
					    "phi-4-mini", "test-phi3-longrope", "test-phi4", "qwen3.5-0.8b",
					    "test-qwen35", "test-qwen35moe", "gpt-oss-20b",
					    "gpt-oss-120b", "test-gpt-oss", "ministral-3-3b",
					    "test-mistral3", "granite-3.1-3b-a800m", "test-granitemoe",
					    "test-granitemoe-shared", "granite-4.0-h-micro",
					    "granite-4.0-h-tiny", "test-granitehybrid",
					    "test-granitehybrid-moe", NULL };
const char *const sf_model_gen_types[] = { "f32", "f16", "bf16", "q8_0", "q4_0", "q5_0",
					   "q4_k", "q6_k", "q4_k_m", "q5_k", "q5_k_m", "q3_k",
					   "q2_k", "iq4_xs", "q4_1", "q5_1", "iq4_nl", "mxfp4",
					   "mxfp4_moe", NULL };

static int add_rope_freqs(struct maker *mk, const struct shape *s)
{
	void **b = realloc(mk->bufs, (mk->n_bufs + 1) * sizeof(*b));
	float *f = malloc(s->head_dim / 2 * sizeof(float));
	if (!b || !f) {
		free(f);
		return sf_err_set(mk->err, SF_E_NOMEM, "no memory");
	}
	mk->bufs = b;
	mk->bufs[mk->n_bufs++] = f;
	llama3_factors(s, f);
	uint64_t ne[1] = { s->head_dim / 2 };
	if (sf_gguf_add_tensor(mk->w, "rope_freqs.weight", SF_GGUF_T_F32, 1, ne, f,
			       s->head_dim / 2 * sizeof(float)))
		return sf_err_set(mk->err, SF_E_RANGE, "cannot add rope_freqs.weight");
	return 0;
}

/* LongRoPE's factors, smooth as Phi-3.5-mini's are: the short ones from 1 to 2.6, the long
 * ones from 1.08 to 64 (the high pairs, whose wavelengths pass the original context, divided
 * the most). */
static int add_longrope(struct maker *mk, const struct shape *s)
{
	uint32_t half = (s->n_rot ? s->n_rot : s->head_dim) / 2;
	for (int k = 0; k < 2; k++) {
		void **b = realloc(mk->bufs, (mk->n_bufs + 1) * sizeof(*b));
		float *f = malloc(half * sizeof(float));
		if (!b || !f) {
			free(f);
			return sf_err_set(mk->err, SF_E_NOMEM, "no memory");
		}
		mk->bufs = b;
		mk->bufs[mk->n_bufs++] = f;
		for (uint32_t i = 0; i < half; i++) {
			double x = half > 1 ? (double)i / (half - 1) : 0;
			f[i] = k ? (float)(1.08 * exp(pow(x, 1.5) * log(64 / 1.08)))
				 : (float)(1 + 1.6 * x * x);
		}
		const char *name = k ? "rope_factors_long.weight" : "rope_factors_short.weight";
		uint64_t ne[1] = { half };
		if (sf_gguf_add_tensor(mk->w, name, SF_GGUF_T_F32, 1, ne, f, half * sizeof(float)))
			return sf_err_set(mk->err, SF_E_RANGE, "cannot add %s", name);
	}
	return 0;
}

int sf_model_gen_write(const struct sf_model_gen *gen, const char *path, struct sf_pool *pool,
		       uint64_t *bytes, struct sf_err *err)
{
	const struct shape *s = NULL;
	for (size_t i = 0; gen->shape && i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (!strcmp(shapes[i].name, gen->shape))
			s = &shapes[i];
	size_t ti = 0;
	while (gen->type && ti < sizeof(types) / sizeof(types[0]) && strcmp(types[ti].name, gen->type))
		ti++;
	if (!s || ti == sizeof(types) / sizeof(types[0]))
		return sf_err_set(err, SF_E_RANGE, "unknown shape '%s' or type '%s'",
				  gen->shape ? gen->shape : "", gen->type ? gen->type : "");
	if (gen->layers > SF_MODEL_MAX_LAYERS)
		return sf_err_set(err, SF_E_RANGE, "%u layers, over %u", gen->layers,
				  SF_MODEL_MAX_LAYERS);
	const struct sf_gguf_kv *toks;
	int rc = sf_gguf_get_arr(gen->vocab, "tokenizer.ggml.tokens", SF_GGUF_STRING, &toks, err);
	if (rc)
		return rc;
	uint64_t n_vocab = toks->n;
	uint32_t n_layer = gen->layers ? gen->layers : s->n_layer;
	struct maker mk = { .w = sf_gguf_writer_new(), .pool = pool, .seed = mix(gen->seed),
			    .chat_template = gen->chat_template, .exps = !strcmp(types[ti].name, "mxfp4_moe") ? SF_GGUF_T_MXFP4 : 0,
			    .err = err };
	rc = mk.w ? 0 : sf_err_set(err, SF_E_NOMEM, "no memory");
	rc = rc ? rc : write_meta(&mk, s, n_layer, gen->ctx ? gen->ctx : s->n_ctx, types[ti].ftype,
				  types[ti].name, gen->vocab);
	uint32_t want = types[ti].type;
	bool mix = types[ti].mix;
	/* Small embeddings (RMS 0.5 / sqrt(n_embd)) so that the layers, not the last token, drive
	 * what comes next (tied models otherwise repeat one token), and an output norm of gain 8
	 * so that the logits still spread some 4 units. */
	float aO = 0.5f * sqrtf(3.0f / (float)s->n_embd), gain = 8.0f;
	/* The mix keeps tied embeddings (they are the output too) at the output's type. */
	uint32_t emb_t = pick(want, mix, s->tied ? "output" : "token_embd", 0, n_layer, s->n_embd);
	rc = rc ? rc : add(&mk, "token_embd.weight", emb_t, s->n_embd, n_vocab, 0, aO);
	if (s->llama3_rope)
		rc = rc ? rc : add_rope_freqs(&mk, s);
	if (s->longrope_orig)
		rc = rc ? rc : add_longrope(&mk, s);
	for (uint32_t il = 0; !rc && il < n_layer; il++)
		rc = make_layer(&mk, s, il, n_layer, want, mix);
	rc = rc ? rc : add(&mk, "output_norm.weight", SF_GGUF_T_F32, s->n_embd, 1, gain,
				   0.1f * gain);
	if (!s->tied)
		rc = rc ? rc : add(&mk, "output.weight", pick(want, mix, "output", 0, n_layer, s->n_embd),
				   s->n_embd, n_vocab, 0, aO);
	rc = rc ? rc : sf_gguf_writer_save(mk.w, path, err);
	if (bytes)
		*bytes = mk.bytes;
	for (size_t i = 0; i < mk.n_bufs; i++)
		free(mk.bufs[i]);
	free(mk.bufs);
	sf_gguf_writer_free(mk.w);
	return rc;
}
