/* The transformer models of GGUF files: their configuration (read from the file's metadata),
 * their weights (tensors of the mapped file, checked for shape and type), each session's
 * key/value cache, and the forward pass over a batch of tokens from any number of sessions.
 *
 * Three separate things (llama2.c's Config / TransformerWeights / RunState): sf_model_config,
 * struct sf_model (config + weights, read-only once loaded, shared by every thread), and the
 * per-run state: an sf_kv per session and an sf_fwd scratch per computing thread.
 *
 * Batch invariance: a token's outputs (its logits, its keys and values) depend only on its
 * session's earlier tokens, never on which other tokens share the forward call or on how many
 * threads run it (the kernels never split a reduction; see src/kern/kern.h). Prefilling a
 * prompt in chunks of any size gives exactly what decoding it token by token gives. */
#ifndef SF_MODEL_MODEL_H
#define SF_MODEL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>
#include <superfluid/gguf.h>

#include "model/pool.h"

#define SF_MODEL_MAX_LAYERS 512
#define SF_MODEL_MAX_EMBD 65536
#define SF_MODEL_MAX_HEADS 1024
#define SF_MODEL_MAX_HEAD_DIM 1024
#define SF_MODEL_MAX_FF (1u << 20)
#define SF_MODEL_MAX_EXPERTS 512
#define SF_MODEL_MAX_EXPERTS_USED 64
#define SF_MODEL_MAX_SSM_STATE 512 /* a Gated DeltaNet head's key (and value) width */
#define SF_MODEL_MAX_SSM_CONV 16   /* its convolution's kernel */

enum sf_arch {
	SF_ARCH_LLAMA = 0,  /* Llama 2 / 3.x, TinyLlama, SmolLM, Mistral 7B */
	SF_ARCH_QWEN2 = 1,  /* QKV bias, NEOX rope */
	SF_ARCH_QWEN3 = 2,  /* q/k RMSNorm, key_length apart from the embedding width */
	SF_ARCH_GEMMA = 3,  /* embeddings scaled by sqrt(n_embd), GeGLU, queries pre-scaled */
	SF_ARCH_GEMMA2 = 4, /* + post-norms, sliding window every other layer, soft-capping */
	SF_ARCH_GEMMA3 = 5, /* + q/k RMSNorm, five local layers to one global, own rope base */
	SF_ARCH_QWEN3MOE = 6, /* Qwen3's attention, a mixture of experts in every layer */
	SF_ARCH_SMOLLM3 = 7, /* Llama's, without rope on every fourth layer */
	SF_ARCH_OLMO2 = 8,  /* no pre-norms: post-norms, q/k RMSNorm over all heads together */
	SF_ARCH_GRANITE = 9, /* Llama's, with embedding, residual and logit multipliers */
	SF_ARCH_PHI3 = 10,  /* fused q/k/v and gate/up matrices, queries pre-scaled */
	SF_ARCH_QWEN35 = 11, /* Gated DeltaNet layers (a recurrent state) and gated attention */
	SF_ARCH_QWEN35MOE = 12, /* Qwen3.5's layers, a mixture of experts with a shared expert */
	SF_ARCH_GPTOSS = 13, /* gpt-oss: attention sinks, q/k/v/o biases, a window every other
			      * layer, experts with biases, SwiGLU-OAI, softmax over the chosen */
	SF_ARCH_MISTRAL3 = 14, /* Ministral 3: Llama's, YaRN's betas and log multiplier read, the
				* queries times Llama 4's temperature by position */
	SF_ARCH_GRANITEMOE = 15, /* Granite's multipliers, a mixture of experts (and a shared
				  * expert, ungated) */
	SF_ARCH_GRANITEHYBRID = 16, /* Granite 4: Mamba-2 layers (a recurrent state) and
				     * attention layers, Granite's multipliers, optional experts */
};

/* The feed-forward's gate activation. */
enum sf_act {
	SF_ACT_SILU = 0, /* SwiGLU */
	SF_ACT_GELU = 1, /* GeGLU: tanh GELU as ggml computes it (its F16 table) */
	SF_ACT_SWIGLU_OAI = 2, /* gpt-oss's: g = min(gate, 7), u = clamp(up, -7, 7),
				* g * sigmoid(1.702 g) * (u + 1) (ggml_swiglu_oai) */
};

struct sf_model_config {
	enum sf_arch arch;
	char arch_name[16];
	uint32_t n_vocab;
	uint32_t n_embd;
	uint32_t n_layer;
	uint32_t n_head, n_head_kv;
	uint32_t head_dim;     /* of keys and values (the same for these architectures) */
	uint32_t n_rot;        /* rotary dimensions of a head (<= head_dim) */
	uint32_t n_ff;
	uint32_t n_ctx_train;
	float rms_eps;
	float rope_base;
	float rope_freq_scale; /* 1 / the linear (or YaRN) scaling factor */
	bool rope_yarn;        /* YaRN: each pair's angle between the scaled and the unscaled one
				* by its wavelength, cos and sin times 1 + 0.1 ln(factor) */
	uint32_t yarn_orig_ctx; /* YaRN and LongRoPE: the context the model was trained with
				 * before (rope.scaling.original_context_length) */
	float rope_attn_factor; /* cos and sin times it (LongRoPE's rope.scaling.attn_factor; 1) */
	float yarn_beta_fast, yarn_beta_slow; /* YaRN's ramp: from the pairs turning beta_fast
					       * times over the original context to those turning
					       * beta_slow times (32, 1) */
	float yarn_log_mul;    /* YaRN's rope.scaling.yarn_log_multiplier (mscale_all_dim; 0:
				* none): cos and sin times (1 + 0.1 ln f) / (1 + 0.1 x it x ln f)
				* instead of 1 + 0.1 ln f */
	float attn_temp;       /* Llama 4's temperature (Ministral 3's attention.temperature_scale;
				* 0: none): the queries times 1 + it x ln(1 + floor(pos /
				* attn_temp_len)) after the rope */
	uint32_t attn_temp_len; /* the positions of one step of it (the original context) */
	bool rope_neox;        /* rotate (i, i + n_rot/2) instead of (2i, 2i + 1) */
	float attn_scale;      /* 1 / sqrt(head_dim) unless the file (or the family's rule) says */
	bool q_prescale;       /* queries times attn_scale before they are rounded to F16 and the
				* scores unscaled (Gemma), instead of the scores scaled */
	float embd_scale;      /* the embeddings times it (Gemma: sqrt(n_embd)); 0: as they are */
	float residual_scale;  /* each layer's attention and FFN outputs times it before they are
				* added (Granite); 0: as they are */
	float logit_scale;     /* the logits divided by it (Granite); 0: as they are */
	float attn_softcap;    /* scores = cap * tanh(scores / cap) before the softmax; 0: none */
	float final_softcap;   /* the logits likewise; 0: none */
	enum sf_act act;
	bool post_norms;       /* RMS norms of the attention's and the FFN's outputs (Gemma 2/3,
				* OLMo 2) */
	bool no_pre_norms;     /* no RMS norm before the attention or the FFN (OLMo 2) */
	bool qk_norm_whole;    /* q (k) RMS-normed as one vector of all its heads (OLMo 2) */
	uint32_t no_rope_step; /* layers il with (il + 1) % it == 0 have no rope (0: all have) */
	uint32_t n_swa;        /* the window of the sliding-window layers: a query at p sees keys
				* at p - n_swa + 1 .. p (0: no such layers) */
	float rope_base_swa;   /* their rope: base and linear scale */
	float rope_freq_scale_swa;
	uint8_t swa[SF_MODEL_MAX_LAYERS]; /* which layers have the window */
	uint32_t n_expert;     /* experts of each layer's FFN (0: a dense FFN) */
	uint32_t n_expert_used; /* chosen for each token */
	uint32_t n_ff_exp;     /* an expert's feed-forward width */
	bool expert_norm;      /* the chosen experts' weights divided by their sum */
	bool expert_softmax_chosen; /* gpt-oss: the k best by their router logits (with the
				     * router's bias), their weights the softmax of those k
				     * logits (llama.cpp's SOFTMAX_WEIGHT gating) */
	bool attn_sinks;       /* gpt-oss: a learned logit per query head (attn_sinks) joins each
				* softmax's denominator */
	bool shared_expert;    /* Qwen3.5-MoE: beside the experts a SwiGLU FFN of n_ff (the layer's
				* ffn_gate/up/down, the *_shexp tensors) times sigmoid(ffn_gate_inp_shexp
				* . x) */
	/* Gated DeltaNet (Qwen3.5): layers with recur[il] set hold a recurrent state instead of
	 * keys and values: a causal convolution of ssm_conv taps over the q/k/v channels (its
	 * state the last ssm_conv - 1 inputs) and per value head a ssm_state x ssm_state matrix
	 * updated by the gated delta rule. Keys and queries have ssm_group heads, values
	 * ssm_heads (a multiple), each ssm_state wide. The other layers' attention is gated: the
	 * q projection gives each head's queries and then its gate (attn_gate). */
	uint32_t n_recur;      /* layers with a recurrent state (0: none) */
	uint32_t ssm_conv, ssm_state, ssm_group, ssm_heads;
	/* Mamba-2 (Granite 4; mamba2.h) instead of Gated DeltaNet: ssm_heads heads of
	 * ssm_inner / ssm_heads channels, each a ssm_state-wide state per channel, B and C in
	 * ssm_group groups of ssm_state; the convolution over the x, B and C channels */
	bool mamba2;
	uint32_t ssm_inner;    /* the heads' width together (Gated DeltaNet: the value heads') */
	bool attn_gate;
	uint8_t recur[SF_MODEL_MAX_LAYERS];
};

/* One layer's tensors (NULL: absent and optional). */
struct sf_layer_w {
	const struct sf_gguf_tensor *attn_norm, *wq, *wk, *wv, *wo;
	const struct sf_gguf_tensor *bq, *bk, *bv, *bo;  /* qwen2's biases; llama's optional bo */
	const struct sf_gguf_tensor *q_norm, *k_norm;    /* qwen3 */
	const struct sf_gguf_tensor *ffn_norm, *ffn_gate, *ffn_up, *ffn_down;
	const struct sf_gguf_tensor *attn_post_norm, *ffn_post_norm; /* Gemma 2/3 */
	/* A mixture of experts (ffn_gate/up/down NULL): the router (n_embd x n_expert) and the
	 * experts' matrices, expert e's rows after e x rows of the ones before */
	const struct sf_gguf_tensor *ffn_gate_inp, *ffn_gate_exps, *ffn_up_exps, *ffn_down_exps;
	const struct sf_gguf_tensor *ffn_gate_inp_shexp; /* the shared expert's gate (n_embd) */
	/* gpt-oss: the router's bias (n_expert), the experts' biases (n_ff_exp, n_ff_exp, n_embd
	 * for each expert, F32) and each query head's sink logit (n_head) */
	const struct sf_gguf_tensor *ffn_gate_inp_b, *ffn_gate_exps_b, *ffn_up_exps_b,
		*ffn_down_exps_b, *attn_sinks;
	/* Gated DeltaNet (recurrent layers; wq..wo NULL): the q/k/v channels (attn_qkv), the
	 * output gate z (attn_gate), beta and alpha per value head, the convolution
	 * (ssm_conv1d: ssm_conv taps a channel, F32), the decay's bias (ssm_dt) and -exp(A_log)
	 * (ssm_a), the output's RMS norm (ssm_norm) and projection (ssm_out) */
	const struct sf_gguf_tensor *ssm_in, *ssm_z, *ssm_beta, *ssm_alpha, *ssm_conv1d, *ssm_dt,
		*ssm_a, *ssm_norm, *ssm_out;
	/* Mamba-2 (ssm_in: z, then x, B and C, then dt; ssm_norm: each group's gated norm;
	 * ssm_z, ssm_beta, ssm_alpha NULL): the convolution's bias (optional) and D, the skip of
	 * each head's input */
	const struct sf_gguf_tensor *ssm_conv1d_b, *ssm_d;
	/* Phi-3: wq, wk, wv point at views of the rows of a fused attn_qkv (0-2), ffn_gate and
	 * ffn_up at the halves of a fused ffn_up (3-4) */
	struct sf_gguf_tensor views[5];
};

struct sf_model {
	struct sf_model_config cfg;
	const struct sf_gguf *file; /* not owned */
	const struct sf_gguf_tensor *tok_embd, *output_norm, *output; /* output may be tok_embd */
	const float *rope_freqs;    /* n_rot / 2 frequency divisors (Llama 3.x), or NULL */
	const float *rope_long;     /* LongRoPE's (Phi-3.5, Phi-4-mini): the divisors of contexts
				     * past yarn_orig_ctx and of those within it, or NULL both */
	const float *rope_short;
	struct sf_layer_w *layers;
	float rope_theta_scale;     /* base^(-2 / n_rot): each pair's angle over the previous's */
	float rope_theta_scale_swa; /* the same of the sliding-window layers' base */
	float yarn_corr[2][2];      /* YaRN: the pairs [lo, hi] ramped between, of the global
				     * rope [0] and the sliding-window layers' [1] */
	float yarn_mscale[2];       /* YaRN: their cos and sin times it */
	uint64_t weight_bytes;      /* bytes of every weight read for one token (the decode limit) */
	bool k_q8;                  /* keys cached as Q8_0 (sf_model_cache_keys), else F16 */
	uint32_t k_rot;             /* Q8_0 keys: queries and keys turned by the Walsh-Hadamard
				     * rotation of this many elements (sf_op_hadamard), or 0 */
	uint8_t *bound;             /* while loading: which of the file's tensors are bound */
};

/* Reads the configuration and binds the weights of a GGUF file: SF_E_MODEL naming the
 * architecture, a missing tensor, a shape or an unsupported tensor type; SF_E_FORMAT for
 * metadata that contradicts itself. The file must outlive the model. */
int sf_model_load(const struct sf_gguf *file, struct sf_model **out, struct sf_err *err);
void sf_model_free(struct sf_model *m);

/* The frequency divisors of the global layers' rope (n_rot / 2, or NULL) for sessions of up
 * to ctx positions: LongRoPE's long factors when ctx, rounded up to a multiple of 256 as
 * llama.cpp rounds its context, is over the original context, else its short ones (the
 * choice llama.cpp makes from its context per sequence, n_ctx_seq); Llama 3's otherwise. */
const float *sf_model_rope_factors(const struct sf_model *m, uint32_t ctx);

/* Bytes of keys and values one token takes in a session's cache for as long as the session
 * keeps it (keys of the cache's type and F16 values of the layers with attention, but the
 * sliding-window layers': sf_model_kv_bytes). */
uint64_t sf_model_kv_bytes_per_token(const struct sf_model *m);
/* Of a token, the bytes of its sliding-window layers' keys and values (0: none kept apart). */
uint64_t sf_model_kv_window_bytes_per_token(const struct sf_model *m);
/* Bytes of keys and values a session of ctx positions holds at most: the pages of every
 * position of its global layers, of its window layers the pages its window spans and the
 * slack (SF_KV_WINDOW_SLACK). */
uint64_t sf_model_kv_bytes(const struct sf_model *m, uint32_t ctx);

/* The type of the keys in the model's caches: "f16" (the default) or "q8_0" (as llama.cpp's
 * --cache-type-k q8_0: 34 bytes a 32 elements, scores by integer dot products); set before any
 * arena is made. SF_E_RANGE naming what is wrong (another type, a head dimension that is not a
 * multiple of 32). */
int sf_model_cache_keys(struct sf_model *m, const char *type, struct sf_err *err);

/* Bytes of one position's keys of one layer in a cache (every key/value head's). */
uint64_t sf_model_k_row_bytes(const struct sf_model *m);

/* Bytes of the recurrent state a session of the model carries whatever its length (F32: each
 * recurrent layer's convolution inputs and delta-rule matrices); 0 for models without. */
uint64_t sf_model_state_bytes(const struct sf_model *m);
/* The channels of a recurrent layer's convolution (Gated DeltaNet: q, k and v; Mamba-2: x, B
 * and C) and the floats of one such layer's state: the convolution's last ssm_conv - 1 inputs
 * of each channel, then the heads' matrices. */
uint64_t sf_model_ssm_channels(const struct sf_model_config *c);
uint64_t sf_model_state_layer_floats(const struct sf_model_config *c);

/* ---- key/value caches ---- */

#define SF_KV_PAGE 64 /* tokens per page */
#define SF_KV_WINDOW_SLACK 1 /* pages of window rows a cache keeps past its window (cut-backs) */

/* The memory every cache of a model draws from: bounded, counted. Thread-safe. */
struct sf_kv_arena;
int sf_kv_arena_new(const struct sf_model *m, uint64_t limit_bytes, struct sf_kv_arena **out);
void sf_kv_arena_free(struct sf_kv_arena *a);
uint64_t sf_kv_arena_limit(const struct sf_kv_arena *a);
uint64_t sf_kv_arena_page_bytes(const struct sf_kv_arena *a);
/* Of those, the bytes of a page's window block (its sliding-window layers' rows, kept apart
 * and let go of behind the window); 0 for a model without window layers. */
uint64_t sf_kv_arena_window_bytes(const struct sf_kv_arena *a);
/* Pages of window blocks a cache keeps past its window (1 unless set; UINT32_MAX: every page
 * keeps its window rows), for cut-backs: set before any cache is made. */
void sf_kv_arena_window_slack(struct sf_kv_arena *a, uint32_t pages);

/* Bytes of every page the arena's caches hold, counted once however many caches share them
 * (the reclaimable ones too: cached pages no cache holds, evicted before a reserve fails). */
uint64_t sf_kv_arena_used(const struct sf_kv_arena *a);
/* Of those, the bytes of cached pages no cache holds (evicted when room is needed). */
uint64_t sf_kv_arena_reclaimable(const struct sf_kv_arena *a);
/* The arena's index of shared pages (src/prefix): what a node reports and counts. */
struct sf_prefix_cache *sf_kv_arena_prefix(const struct sf_kv_arena *a);

/* One session's cache: keys and values of positions [0, n), in pages of SF_KV_PAGE tokens,
 * of layers [layer0, layer0 + n_layer) (every layer but in a pipeline stage's cache).
 * With a prefix root (sf_kv_share), its first n_shared pages are full pages shared by content
 * with other caches (immutable; src/prefix), the rest its own. */
struct sf_kv {
	struct sf_kv_arena *arena;
	uint16_t **pages; /* each [layer][keys, values] (the layers with attention only, but the
			   * sliding-window layers): keys [SF_KV_PAGE][n_head_kv * head_dim] half
			   * floats or Q8_0 slabs (sf_kv_keys_q8), values [SF_KV_PAGE][n_head_kv *
			   * head_dim] halves */
	uint16_t **wpages; /* the sliding-window layers' likewise, a block of wbytes a page:
			    * pages [wfrom, n_pages) have theirs, those before let go of */
	uint64_t wbytes;
	uint32_t wfrom;
	struct sf_prefix_page **shared; /* pages[i]'s index entry, for i < n_shared */
	uint32_t n_pages, cap_pages, n_shared;
	uint32_t n;       /* positions whose keys and values are computed */
	uint32_t layer0, n_layer;
	uint64_t page_bytes;
	uint64_t root;    /* sf_prefix_root of its namespace; 0: it shares nothing */
	/* A model with recurrent layers: the state of its recurrent layers (a stage's own only)
	 * after positions [0, n) (sf_kv_state), state_bytes taken from the arena by the first
	 * reserve; NULL until then (and always for a stage of attention layers only). */
	float *state;
	uint64_t state_bytes, state_base; /* (state_base: its first layer's offset, in floats) */
	/* Its pages the index held past the last checkpoint it adopted (sf_kv_adopt): where its
	 * prompt parts from another's, a position worth a checkpoint; 0: none. */
	uint32_t parting;
	/* The shared page its decode steps last kept a checkpoint on (sf_kv_checkpoint_step),
	 * one it holds; NULL: none. */
	struct sf_prefix_page *step_ckpt;
};

void sf_kv_init(struct sf_kv *kv, struct sf_kv_arena *a);
/* A cache of layers [l0, l1) only (l0 < l1 <= the model's layers), with nothing reserved yet:
 * a pipeline stage's, whose pages hold its own layers and count only their bytes. */
void sf_kv_init_layers(struct sf_kv *kv, struct sf_kv_arena *a, uint32_t l0, uint32_t l1);
/* Makes room for positions [0, n): SF_E_NOMEM when the arena's limit is reached even with
 * every reclaimable cached page evicted. */
int sf_kv_reserve(struct sf_kv *kv, uint32_t n, struct sf_err *err);
/* Forgets positions from n on, returning whole pages past them to the arena (a shared page
 * n falls inside is let go of too, so the positions of it before n are computed again). A
 * cache whose window rows n reads were let go of (sf_kv_slide) goes back to the last page end
 * whose window rows it or the index still has, or to nothing. A
 * cache with a recurrent state cut before what it computed goes back to the last checkpoint
 * of its shared pages at or before n (sf_kv_checkpoint), letting go of the pages after it,
 * or to nothing (every position computed again); cut to 0, its state's memory goes back to
 * the arena (the next reserve takes it again). */
void sf_kv_truncate(struct sf_kv *kv, uint32_t n);
/* Shares the cache's full pages under the prefix chain of root (a cache of every layer only;
 * 0: none). Set before anything is computed. A model with recurrent layers shares them too,
 * but a page holds no state: another cache adopts its pages only up to a checkpoint. */
void sf_kv_share(struct sf_kv *kv, uint64_t root);
/* Takes from the index the pages that come next in tokens[0..n) (the cache's tokens: the
 * first kv->n computed), then the first positions of a kept tail it shares (copied into a page
 * of its own), leaving at least the last token to compute: kv->n grows by the positions
 * adopted (returned). Nothing when kv->n is not where a page starts, or a page before it is
 * the cache's own. A model with recurrent layers adopts pages only up to the last one with a
 * checkpoint, and its state becomes that one's (no tails: they hold no state). A model with
 * window layers adopts pages only up to the last page end whose window rows (those its next
 * position reads) the index still has, pinning them, and a tail only with its window rows. */
uint32_t sf_kv_adopt(struct sf_kv *kv, const uint32_t *tokens, uint32_t n);
/* Indexes the cache's full pages computed since the last call (tokens: its tokens), each
 * replaced by an equal page already indexed when there is one. */
void sf_kv_publish(struct sf_kv *kv, const uint32_t *tokens);
/* A model with recurrent layers: a copy of the cache's state, which must be that after its
 * last shared page (kv->n at that page's end), kept with the page as its checkpoint (its bytes
 * taken from the arena, evicted with the page). False when not taken: no recurrent layers, not
 * shared, kv->n not the end of its last shared page, a checkpoint there already, no room. */
bool sf_kv_checkpoint(struct sf_kv *kv);
/* sf_kv_checkpoint after a decode step that ended a page (a reply longer than a page: the next
 * turn, sent whole, starts from its last page end), the checkpoint the cache's steps kept
 * before freed: one a reply, its last. */
bool sf_kv_checkpoint_step(struct sf_kv *kv);
/* The cache goes (tokens: its tokens): its partial last page, after pages all shared, is kept
 * in the index as a tail for a later context to copy from. */
void sf_kv_retire(struct sf_kv *kv, const uint32_t *tokens);
void sf_kv_fini(struct sf_kv *kv);
/* Whether the window rows position pos of the cache reads are all held (always without window
 * layers). */
bool sf_kv_window_held(const struct sf_kv *kv, uint32_t pos);
/* Lets go of the window blocks of the cache's pages a window and the arena's slack behind
 * kv->n (sf_model_forward calls it; a sharing cache's once indexed, left to the index). */
void sf_kv_slide(struct sf_kv *kv);
/* The F16 keys (which = 0) or the values (1) of layer (one the cache keeps) at pos (reserved):
 * a row of n_head_kv * head_dim half floats. Q8_0 keys: sf_kv_keys_q8. */
uint16_t *sf_kv_at(const struct sf_kv *kv, uint32_t layer, int which, uint32_t pos);
/* Q8_0 keys (sf_model_cache_keys): key/value head kvh's keys of layer in pos's page, the
 * page's SF_KV_PAGE positions as packed slabs of SF_KT_X16_ROWS (sf_kern_pack_row_q8_0),
 * position p row p % SF_KV_PAGE of the slabs from here. */
const uint8_t *sf_kv_keys_q8(const struct sf_kv *kv, uint32_t layer, uint32_t kvh, uint32_t pos);
/* Writes the keys of layer at pos (reserved) from k (n_head_kv * head_dim floats), rounded to
 * the cache's type. */
void sf_kv_put_keys(struct sf_kv *kv, uint32_t layer, uint32_t pos, const float *k);
/* Whether the arena's model has recurrent layers (their caches carry a state). */
bool sf_kv_arena_recurrent(const struct sf_kv_arena *a);
/* The recurrent state of layer (one with recur[layer]) of a reserved cache: its convolution's
 * last inputs (ssm_conv - 1 for each channel, oldest first), then its delta-rule matrices
 * (ssm_heads of ssm_state x ssm_state, each stored by columns: m[j * S + i] = S[i][j]). */
float *sf_kv_state(const struct sf_kv *kv, uint32_t layer);

/* ---- the forward pass ---- */

/* One token of a forward call: its session's cache, its position there (every earlier
 * position of that cache is computed, or comes earlier in the same call), its id, and
 * whether its logits are wanted. */
struct sf_fwd_tok {
	struct sf_kv *kv;
	uint32_t pos;
	uint32_t token;
	bool logits;
};

/* Scratch buffers for forward calls of up to max_tokens tokens at positions below max_ctx,
 * run by pools of up to max_threads threads. One call at a time. max_ctx is also the context
 * of each session the rope's factors are picked for (sf_model_rope_factors): the same for
 * every call, so that a session's cached keys keep one rope. */
struct sf_fwd;
int sf_fwd_new(const struct sf_model *m, uint32_t max_tokens, uint32_t max_ctx,
	       unsigned max_threads, struct sf_fwd **out, struct sf_err *err);
void sf_fwd_free(struct sf_fwd *f);
uint32_t sf_fwd_max_tokens(const struct sf_fwd *f);

/* Layers [l0, l1) over n tokens (n <= max_tokens): with l0 == 0 the tokens' embeddings go in,
 * otherwise hidden (n x n_embd floats) does; with l1 == n_layer the logits of the tokens that
 * want them go to logits (one row of n_vocab per such token, in order), or with logits NULL
 * their hidden states after the final norm to hidden (one row of n_embd each, in order: what
 * embeddings pool), otherwise the hidden state goes out to hidden. Writes each token's keys and values into its cache (which must be
 * reserved past pos, and of layers [l0, l1): SF_E_RANGE otherwise) and sets kv->n past the
 * highest position computed. Through recurrent layers each context's tokens come at kv->n,
 * kv->n + 1, ... in call order (its state goes on from kv->n only). */
int sf_model_forward(const struct sf_model *m, struct sf_pool *pool, struct sf_fwd *f,
		     const struct sf_fwd_tok *toks, uint32_t n, uint32_t l0, uint32_t l1,
		     float *hidden, float *logits, struct sf_err *err);

/* ---- random-weight models for tests and benchmarks (model_gen.c) ---- */

/* The shapes ("qwen2.5-0.5b", ..., "test-qwen3") and types ("f32", ..., "q4_k_m") it makes,
 * NULL-terminated. */
extern const char *const sf_model_gen_shapes[];
extern const char *const sf_model_gen_types[];

struct sf_model_gen {
	const char *shape;
	const char *type;           /* one type for every matrix, or "q4_k_m" (llama.cpp's mix) */
	uint32_t layers;            /* 0: the shape's */
	uint64_t seed;
	uint32_t ctx;               /* the context length the file states; 0: the shape's */
	const struct sf_gguf *vocab; /* its tokenizer.* pairs are copied */
	const char *chat_template;  /* written as tokenizer.chat_template (instead of vocab's), or
				     * NULL */
};

/* Writes a GGUF file of random weights in gen's shape with vocab's vocabulary (the same
 * arguments give the same bytes; pool quantizes rows in parallel); *bytes gets the weights'
 * size. SF_E_RANGE for an unknown shape or type. */
int sf_model_gen_write(const struct sf_model_gen *gen, const char *path, struct sf_pool *pool,
		       uint64_t *bytes, struct sf_err *err);

#endif
