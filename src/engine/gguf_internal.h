/* Shared inside the GGUF engine: the engine's state (gguf_engine.c: loading, info, tokenizer,
 * templates), its contexts (gguf_run.c: prefill, decode steps) and staged forwards (gguf_stage.c). */
#ifndef SF_ENGINE_GGUF_INTERNAL_H
#define SF_ENGINE_GGUF_INTERNAL_H

#include <superfluid/engine.h>
#include <superfluid/gguf.h>
#include <superfluid/gguf_engine.h>
#include <superfluid/grammar.h>
#include <superfluid/sampler.h>
#include <superfluid/tokenizer.h>

#include "model/model.h"

#define GE_MAX_TEMPLATES 16

/* How embeddings pool the final-normed hidden states (<arch>.pooling_type). */
enum ge_pool { GE_POOL_MEAN = 1, GE_POOL_CLS = 2, GE_POOL_LAST = 3 };

#define GE_MAX_EOG 64 /* end-of-generation tokens banned for ignore_eos / min_tokens */
#define GE_GRAMMARS 16 /* compiled grammars kept (with their mask caches) for later sessions */

struct ge {
	struct sf_gguf_engine_config cfg; /* defaults filled in; path and name copied */
	char *path;
	char name[SF_MAX_NAME];
	struct sf_gguf *file;
	struct sf_model *model;
	struct sf_tok *tok;
	uint64_t tok_full;            /* sf_tok_digest_full(tok) */
	struct sf_pool *pool;
	struct sf_fwd *fwd;          /* chunk tokens a call */
	struct sf_kv_arena *arena;
	struct sf_sampler *sampler;
	struct sf_grammar_host *grammar; /* the vocabulary's trie and compiled grammars */
	float *logits;               /* batch rows of n_vocab */
	struct sf_fwd_tok *toks;     /* chunk entries */
	int64_t *want;               /* batch entries: a step's pending tokens per context */
	struct sf_engine_special *specials;
	size_t n_specials;
	struct sf_engine_template templates[GE_MAX_TEMPLATES];
	size_t n_templates;
	uint32_t eos;                /* what info.eos says: EOS, else EOT */
	uint32_t eog[GE_MAX_EOG];    /* the tokens that end a generation (eos among them), which
				      * ignore_eos and min_tokens ban */
	uint32_t n_eog;
	struct sf_logit_bias *bias;  /* a context's logit_bias and those bans, for one draw */
	uint8_t pooling;             /* enum ge_pool: how "embed" pools (gguf_embed.c) */
	struct sf_gguf_tensor *packed; /* n_packed repacked matrices (gguf_pack.c) */
	size_t n_packed;
	void *pack_map;              /* their bytes: an anonymous mapping of pack_len */
	size_t pack_len;
	struct ge_range { uint64_t lo, hi; } *pack_skip; /* their bytes in the file (addresses in
						      * the map of its part), sorted */
	uint8_t *tok_file;           /* the tokenizer's pairs as a file of their own, once asked */
	size_t tok_file_len;
};

/* One context: its tokens, how many have keys and values in kv, its sampling. */
struct ge_ctx {
	struct sf_kv kv;
	uint32_t *tokens;
	uint32_t n, cap;
	uint32_t n_gen;              /* tokens decode steps appended since the last prefill */
	uint32_t reused;             /* positions the last prefill adopted (prefix reuse) */
	struct sf_sampling sampling; /* its logit_bias and grammar copied behind the context */
	struct sf_gmatch *gm;        /* under a grammar: where its generation is in it */
};

static inline struct ge_ctx *ge_ctx(struct sf_engine_ctx *c)
{
	return (struct ge_ctx *)c;
}

/* gguf_pack.c: repacks the weights the kernels have a packed form for and points the model
 * at them (the file's pages under them dropped); 0 also when nothing is packed. */
/* A line for the node's log (cfg.progress; nothing without one). */
void ge_say(const struct ge *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ge_pack_weights(struct ge *g, struct sf_err *err);
void ge_pack_free(struct ge *g);
/* The first address at or past off (in the map of a file, or of a split model's part) outside
 * the packed tensors' file bytes (whose pages were dropped: reading them would bring them
 * back). */
uint64_t ge_pack_next_touch(const struct ge *g, uint64_t off);

/* gguf_run.c */
int ge_ctx_new(void *impl, const struct sf_sampling *s, struct sf_engine_ctx **out,
	       struct sf_err *err);
void ge_ctx_free(void *impl, struct sf_engine_ctx *ctx);
int ge_prefill(void *impl, struct sf_engine_ctx *ctx, const uint32_t *tokens, size_t n,
	       struct sf_err *err);
size_t ge_ctx_len(void *impl, const struct sf_engine_ctx *ctx);
int ge_ctx_truncate(void *impl, struct sf_engine_ctx *ctx, size_t n, struct sf_err *err);
uint64_t ge_mem_used(void *impl);
void ge_ctx_share(void *impl, struct sf_engine_ctx *ctx, uint64_t ns);
uint32_t ge_ctx_reused(void *impl, const struct sf_engine_ctx *ctx);
struct sf_prefix_cache *ge_prefix_cache(void *impl);
int ge_decode(void *impl, struct sf_engine_step *steps, size_t n, struct sf_err *err);
/* Room in c's token array for n tokens. */
int ge_grow(struct ge_ctx *c, size_t n, struct sf_err *err);
/* Samples c's next token from its logits row and appends it (room for it taken already). */
void ge_sample(struct ge *g, struct ge_ctx *c, const float *logits, struct sf_engine_step *st);
/* gguf_stage.c */
int ge_stage_forward(void *impl, const struct sf_engine_stage_in *in, uint8_t *hidden_out,
		     size_t cap, struct sf_engine_stage_out *out, struct sf_err *err);
/* Bytes of a stage blob holding n tokens' hidden states. */
size_t ge_stage_bytes(const struct ge *g, size_t n_tokens);

/* gguf_embed.c: the "embed" state operation (superfluid/embed.h). */
void ge_state_op_names(void *impl, const char *const **list, size_t *n);
int ge_state_op_step(void *impl, const struct sf_engine_op_req *req, struct sf_engine_op_step *st,
		     size_t budget, sf_engine_segment_fn cb, void *cb_arg, uint8_t *result,
		     size_t cap, struct sf_err *err);

#endif
