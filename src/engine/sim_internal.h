/* Shared inside the simulated engine: the model, a context's running summary, the engine. */
#ifndef SF_ENGINE_SIM_INTERNAL_H
#define SF_ENGINE_SIM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/grammar.h>
#include <superfluid/sim_engine.h>

struct sf_sampler;

#define SIM_NCAND 97          /* '\n', 0x20..0x7e, <|eos|> */
#define SIM_NO_TOKEN 0xffffffffu
#define SIM_SCRIPT_MAX 4096   /* bytes of a scripted reply */

/* Weights and priors, all made from the config's seed. */
struct sim_model {
	uint64_t seed;
	uint32_t n_layers;
	uint32_t hidden;
	uint32_t check; /* in every hidden blob: the two ends of a pipeline share a model */
	float *w;       /* n_layers x hidden x hidden, row-major */
	float *b;       /* n_layers x hidden */
	float *proj;    /* SIM_NCAND x hidden */
	float prior[SIM_NCAND];
};

/* What the next token depends on, kept as tokens are appended. */
struct sim_state {
	uint64_t hash;
	uint32_t run;  /* tokens since the last special token */
	uint32_t last; /* SIM_NO_TOKEN for an empty context */
};

struct sim_ctx {
	struct sim_state st;
	struct sf_sampling s;     /* its grammar copied into grammar (logit_bias: the caller's) */
	char *grammar;
	struct sf_gmatch *gm;     /* under a grammar: where its generation is in it */
	uint32_t n_gen; /* tokens decode steps appended since the last prefill */
	uint32_t *tokens;
	uint32_t len;
	uint32_t cap;
	/* Prefix reuse (sim_share.c): its chain's root (0: shares nothing), the pages it holds
	 * from the index (its first n_shared), what its last prefill adopted. */
	uint64_t root;
	struct sf_prefix_page **shared;
	uint32_t n_shared, cap_shared;
	uint32_t reused;
};

struct sim {
	struct sf_sim_config cfg; /* defaults filled in; cfg.model points to model */
	char model[SF_MAX_NAME];
	struct sim_model m;
	char *chat_template; /* cfg.chat_template's copy, or NULL */
	struct sf_engine_template templates[2];
	uint64_t mem_used;          /* contexts' tokens; cached pages no context holds apart */
	struct sf_sampler *sampler; /* the one every engine uses */
	struct sf_grammar_host *grammar; /* its vocabulary's trie and compiled grammars */
	uint8_t bytes[256];         /* byte b's token: b (what sim_gtok points at) */
	struct sf_prefix_cache *pc; /* pages by content (sim_share.c) */
};

static inline struct sim_ctx *sim_ctx(struct sf_engine_ctx *c)
{
	return (struct sim_ctx *)c;
}

static inline const struct sim_ctx *sim_cctx(const struct sf_engine_ctx *c)
{
	return (const struct sim_ctx *)c;
}

/* sim_engine.c */
int sim_config_resolve(const struct sf_sim_config *in, struct sf_sim_config *out,
		       struct sf_err *err);

/* sim_model.c */
uint64_t sim_mix64(uint64_t x);
int sim_model_init(struct sim_model *m, const struct sf_sim_config *cfg, struct sf_err *err);
void sim_model_fini(struct sim_model *m);
void sim_state_init(struct sim_state *st);
void sim_state_push(struct sim_state *st, uint32_t token);
void sim_embed(const struct sim_model *m, const struct sim_state *st, float *h);
void sim_layers(const struct sim_model *m, float *h, uint32_t start, uint32_t end);
/* The next token from the last layer's h: the shared sampler's draw at position n_ctx (ctx,
 * when not NULL, the n_ctx tokens before it, the last n_gen of them generated), among the
 * tokens of allow when not NULL (a grammar's mask: the tokens it allows that are no
 * candidates of the model get a floor logit, so that one is always left). */
uint32_t sim_pick(const struct sim_model *m, struct sf_sampler *smp, const float *h,
		  uint32_t run, uint32_t last, const struct sf_sampling *s, const uint32_t *ctx,
		  size_t n_ctx, size_t n_gen, struct sf_engine_logprob *lp, uint32_t n_top,
		  const uint64_t *allow);
uint32_t sim_next(const struct sim_model *m, struct sf_sampler *smp, const struct sim_state *st,
		  const struct sf_sampling *s, const uint32_t *ctx, size_t n_ctx, size_t n_gen,
		  struct sf_engine_logprob *lp, uint32_t n_top, const uint64_t *allow);
size_t sim_stage_bytes(const struct sim_model *m);
void sim_hidden_pack(const struct sim_model *m, const float *h, uint32_t layer,
		     uint32_t run, uint32_t last, uint32_t pos, uint8_t *out);
int sim_hidden_unpack(const struct sim_model *m, const uint8_t *in, size_t len,
		      uint32_t layer, float *h, uint32_t *run, uint32_t *last, uint32_t *pos,
		      struct sf_err *err);

/* sim_tokenizer.c */
int sim_encode(void *impl, const char *text, size_t len, bool specials, uint32_t *out,
	       size_t cap, size_t *n_out, struct sf_err *err);
int sim_encode_pieces(void *impl, const struct sf_piece *pieces, size_t n, uint32_t *out,
		      size_t cap, size_t *n_out, struct sf_err *err);
int sim_token_bytes(void *impl, uint32_t token, uint8_t *out, size_t cap, size_t *len,
		    struct sf_err *err);
void sim_specials(void *impl, const struct sf_engine_special **list, size_t *n);
/* Fills sim->templates: "default" and "tool_use", ChatML's or both the config's. */
void sim_templates_init(struct sim *sim);
void sim_templates(void *impl, const struct sf_engine_template **list, size_t *n);

/* sim_script.c */
/* With a scripted reply in the prompt ctx[0..len - n_gen) (its last "sim-reply: \"...\"" line),
 * true and in token the reply's token n_gen (the n_gen-th since the prompt), or <|eos|> past its
 * end; false when the prompt has no marker. */
bool sim_script_next(const uint32_t *ctx, size_t len, size_t n_gen, uint32_t *token);

/* sim_share.c: prefix reuse over the shared index, pages without data. */
int sim_share_init(struct sim *sim);
/* Bytes of cached pages no context holds; evicting one of them (false: none). */
uint64_t sim_share_idle(struct sim *sim);
bool sim_share_evict(struct sim *sim);
/* Sets c's namespace (0: none), before its first tokens. */
void sim_share_set(struct sim *sim, struct sim_ctx *c, uint64_t ns);
/* Adopts the pages after c's first `from` tokens (appended now, c->len == n), leaving the
 * last to compute; returns the positions adopted. */
uint32_t sim_share_adopt(struct sim *sim, struct sim_ctx *c, uint32_t from, uint32_t n);
/* Indexes c's full computed pages not indexed yet. */
void sim_share_publish(struct sim *sim, struct sim_ctx *c);
/* Lets go of the pages past c's first n tokens. */
void sim_share_truncate(struct sim *sim, struct sim_ctx *c, uint32_t n);
void sim_share_ctx_free(struct sim *sim, struct sim_ctx *c);

/* sim_ops.c */
void sim_state_op_names(void *impl, const char *const **names, size_t *n);
int sim_state_op_step(void *impl, const struct sf_engine_op_req *req,
		      struct sf_engine_op_step *st, size_t budget, sf_engine_segment_fn cb,
		      void *cb_arg, uint8_t *result, size_t cap, struct sf_err *err);

#endif
