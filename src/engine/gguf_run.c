/* The GGUF engine's contexts and compute: prefill in chunks, decode steps that compute every
 * context's pending tokens in one forward pass and sample each context's next token, and the
 * stateless staged forward of --pipeline. */
#include "engine/gguf_internal.h"

#include <stdlib.h>
#include <string.h>

int ge_ctx_new(void *impl, const struct sf_sampling *s, struct sf_engine_ctx **out,
	       struct sf_err *err)
{
	struct ge *g = impl;
	_Static_assert(SF_MAX_LOGIT_BIAS <= SF_SAMPLER_MAX_BIAS, "the sampler takes the wire's bias");
	struct sf_sampler_params p;
	sf_sampler_params_from_wire(&p, s);
	int rc = sf_sampler_check(&p, sf_tok_n_vocab(g->tok), err);
	if (rc)
		return rc;
	/* The logit_bias pairs are copied behind the context, in the same block (freed with it):
	 * the caller's go away after the call. */
	size_t bias = (size_t)s->n_logit_bias * sizeof(*s->logit_bias);
	struct ge_ctx *c = calloc(1, sizeof(*c) + bias);
	if (!c)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a context");
	sf_kv_init(&c->kv, g->arena);
	c->sampling = *s;
	c->sampling.logit_bias = bias ? (struct sf_logit_bias *)(c + 1) : NULL;
	if (bias)
		memcpy(c->sampling.logit_bias, s->logit_bias, bias);
	*out = (struct sf_engine_ctx *)c;
	return 0;
}

void ge_ctx_free(void *impl, struct sf_engine_ctx *ctx)
{
	struct ge_ctx *c = ge_ctx(ctx);
	sf_kv_fini(&c->kv);
	free(c->tokens);
	free(c);
}

size_t ge_ctx_len(void *impl, const struct sf_engine_ctx *ctx)
{
	return ((const struct ge_ctx *)ctx)->n;
}

uint64_t ge_mem_used(void *impl)
{
	struct ge *g = impl;
	return sf_kv_arena_used(g->arena);
}

int ge_ctx_truncate(void *impl, struct sf_engine_ctx *ctx, size_t n, struct sf_err *err)
{
	struct ge_ctx *c = ge_ctx(ctx);
	c->n = (uint32_t)n;
	sf_kv_truncate(&c->kv, (uint32_t)n);
	if (c->n_gen > c->n)
		c->n_gen = c->n;
	return 0;
}

static int grow(struct ge_ctx *c, size_t n, struct sf_err *err)
{
	if (n <= c->cap)
		return 0;
	size_t cap = c->cap ? c->cap : 256;
	while (cap < n)
		cap *= 2;
	uint32_t *t = realloc(c->tokens, cap * sizeof(*t));
	if (!t)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a context of %zu tokens", n);
	c->tokens = t;
	c->cap = (uint32_t)cap;
	return 0;
}

/* Appends tokens; their keys and values are computed by the decode steps that follow (in
 * chunks, beside other contexts' tokens), so a long prompt never holds the caller. Their
 * cache memory is taken now: a full node refuses here, not halfway through the prompt. */
int ge_prefill(void *impl, struct sf_engine_ctx *ctx, const uint32_t *tokens, size_t n,
	       struct sf_err *err)
{
	struct ge_ctx *c = ge_ctx(ctx);
	int rc = grow(c, (size_t)c->n + n, err);
	if (!rc)
		rc = sf_kv_reserve(&c->kv, c->n + (uint32_t)n, err);
	if (rc) {
		sf_kv_truncate(&c->kv, c->n);
		return rc;
	}
	memcpy(c->tokens + c->n, tokens, n * sizeof(uint32_t));
	c->n += (uint32_t)n;
	c->n_gen = 0;
	return 0;
}

/* Samples ctx's next token from its logits row and appends it. */
static void sample(struct ge *g, struct ge_ctx *c, const float *logits, struct sf_engine_step *st)
{
	struct sf_sampler_params p;
	sf_sampler_params_from_wire(&p, &c->sampling);
	struct sf_sampler_input in = { .logits = logits,
				       .n_vocab = sf_tok_n_vocab(g->tok),
				       .context = c->tokens,
				       .n_context = c->n,
				       .n_generated = c->n_gen,
				       .position = c->n };
	struct sf_sampler_result res;
	struct sf_err err;
	bool lp = st->logprobs || st->top_logprobs;
	if (sf_sampler_sample(g->sampler, &p, &in, &res, lp ? &st->lp : NULL, st->top_logprobs,
			      &err)) {
		st->rc = SF_E_RANGE;
		return;
	}
	c->tokens[c->n++] = res.token;
	c->n_gen++;
	st->token = res.token;
	st->eog = res.token != g->eos && sf_tok_is_eog(g->tok, res.token);
}

/* What a context brings to a step: -1 when it cannot take part (rc set), else its pending
 * tokens (at least one: a context whose last token's logits are gone computes it again). */
static int64_t pending(struct ge *g, struct ge_ctx *c, struct sf_engine_step *st)
{
	struct sf_err e;
	if (!c->n)
		st->rc = SF_E_RANGE; /* nothing to go on */
	else if (c->n >= g->cfg.ctx_len)
		st->rc = SF_E_LIMIT;
	else if (grow(c, (size_t)c->n + 1, &e) || sf_kv_reserve(&c->kv, c->n, &e))
		st->rc = SF_E_NOMEM;
	if (st->rc)
		return -1;
	if (c->kv.n == c->n)
		sf_kv_truncate(&c->kv, c->n - 1);
	return c->n - c->kv.n;
}

/* One forward pass for the step: every context with one pending token decodes; the contexts
 * with a prompt to compute share what is left of the pass's tokens, and those that finish it
 * sample too; the others say more. */
int ge_decode(void *impl, struct sf_engine_step *steps, size_t n, struct sf_err *err)
{
	struct ge *g = impl;
	uint32_t budget = sf_fwd_max_tokens(g->fwd), nt = 0;
	int64_t *want = g->want;
	for (size_t i = 0; i < n; i++) {
		want[i] = pending(g, ge_ctx(steps[i].ctx), &steps[i]);
		if (want[i] == 1) {
			struct ge_ctx *c = ge_ctx(steps[i].ctx);
			g->toks[nt++] = (struct sf_fwd_tok){ &c->kv, c->n - 1, c->tokens[c->n - 1], true };
		}
	}
	/* Prompts share what is left: each first up to an equal share, then what is still left
	 * in step order. (In step order alone the first prompt, a node's oldest session, took
	 * every chunk: a short prompt beside a long one waited for all of it.) */
	uint32_t n_prompts = 0, first = 0;
	for (size_t i = 0; i < n; i++)
		n_prompts += want[i] > 1;
	uint32_t share = n_prompts ? (budget - nt) / n_prompts : 0, extra = budget - nt;
	for (size_t i = 0; i < n; i++)
		if (want[i] > 1)
			first += want[i] < share ? (uint32_t)want[i] : share;
	extra -= first;
	for (size_t i = 0; i < n; i++) {
		if (want[i] <= 1)
			continue;
		struct ge_ctx *c = ge_ctx(steps[i].ctx);
		uint32_t k = want[i] < share ? (uint32_t)want[i] : share;
		uint32_t more = want[i] - k < extra ? (uint32_t)(want[i] - k) : extra;
		k += more;
		extra -= more;
		for (uint32_t j = 0; j < k; j++) {
			uint32_t pos = c->kv.n + j;
			g->toks[nt++] = (struct sf_fwd_tok){ &c->kv, pos, c->tokens[pos],
							     pos == c->n - 1 };
		}
		if (k < want[i])
			steps[i].more = true;
	}
	if (!nt)
		return 0;
	int rc = sf_model_forward(g->model, g->pool, g->fwd, g->toks, nt, 0, g->model->cfg.n_layer,
				  NULL, g->logits, err);
	if (rc)
		return rc;
	/* Logits rows come in the order of the tokens that asked for them. */
	size_t row = 0;
	for (uint32_t t = 0; t < nt; t++) {
		if (!g->toks[t].logits)
			continue;
		for (size_t i = 0; i < n; i++)
			if (&ge_ctx(steps[i].ctx)->kv == g->toks[t].kv) {
				sample(g, ge_ctx(steps[i].ctx), g->logits + row * g->model->cfg.n_vocab,
				       &steps[i]);
				break;
			}
		row++;
	}
	return 0;
}

/* ---- staged forward: a hidden blob is u32 n_tokens, u32 width, u32 next layer, then
 * n_tokens x width floats (little-endian), the residual stream of every token ---- */

#define STAGE_HDR 12

size_t ge_stage_bytes(const struct ge *g, size_t n_tokens)
{
	size_t b = STAGE_HDR + n_tokens * g->model->cfg.n_embd * sizeof(float);
	return b < SF_MAX_OPAQUE ? b : SF_MAX_OPAQUE;
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int ge_stage_forward(void *impl, const struct sf_engine_stage_in *in, uint8_t *hidden_out,
		     size_t cap, struct sf_engine_stage_out *out, struct sf_err *err)
{
	struct ge *g = impl;
	const struct sf_model_config *mc = &g->model->cfg;
	uint32_t E = mc->n_embd, n;
	const float *hin = NULL;
	if (in->start_layer == 0) {
		n = (uint32_t)in->n_tokens;
	} else {
		if (in->hidden_len < STAGE_HDR)
			return sf_err_set(err, SF_E_RANGE, "hidden blob of %zu bytes", in->hidden_len);
		n = rd32(in->hidden);
		if (rd32(in->hidden + 4) != E || rd32(in->hidden + 8) != in->start_layer ||
		    in->hidden_len != STAGE_HDR + (size_t)n * E * sizeof(float) || n > g->cfg.ctx_len)
			return sf_err_set(err, SF_E_RANGE, "hidden blob for %u tokens of width %u at "
					  "layer %u does not fit this stage (width %u, layer %u)", n,
					  rd32(in->hidden + 4), rd32(in->hidden + 8), E,
					  in->start_layer);
		hin = (const float *)(in->hidden + STAGE_HDR);
	}
	if (!n)
		return sf_err_set(err, SF_E_RANGE, "a stage of no tokens");
	bool last = in->end_layer == mc->n_layer;
	size_t need = STAGE_HDR + (size_t)n * E * sizeof(float);
	if (!last && need > cap)
		return sf_err_set(err, SF_E_LIMIT, "the hidden state of %u tokens takes %zu bytes, "
				  "over %zu", n, need, cap);
	/* Stages keep nothing: a cache of their own for this call. */
	struct sf_kv kv;
	sf_kv_init(&kv, g->arena);
	float *h = malloc((size_t)n * E * sizeof(float));
	int rc = h ? sf_kv_reserve(&kv, n, err) : sf_err_set(err, SF_E_NOMEM, "no memory");
	if (h && hin)
		memcpy(h, hin, (size_t)n * E * sizeof(float));
	uint32_t chunk = sf_fwd_max_tokens(g->fwd);
	for (uint32_t at = 0; !rc && at < n; at += chunk) {
		uint32_t k = n - at < chunk ? n - at : chunk;
		for (uint32_t i = 0; i < k; i++)
			g->toks[i] = (struct sf_fwd_tok){ &kv, at + i,
							  in->start_layer ? 0 : in->tokens[at + i],
							  last && at + i == n - 1 };
		rc = sf_model_forward(g->model, g->pool, g->fwd, g->toks, k, in->start_layer,
				      in->end_layer, h + (size_t)at * E, g->logits, err);
	}
	if (!rc && last) {
		/* The token a decode step would draw for this context. */
		struct sf_sampling greedy = { 0 };
		struct ge_ctx c = { .n = n, .sampling = in->sampling ? *in->sampling : greedy };
		uint32_t *toks = malloc(((size_t)n + 1) * sizeof(uint32_t));
		if (!toks) {
			rc = sf_err_set(err, SF_E_NOMEM, "no memory");
		} else {
			/* Penalties read the context; a stage past the first has no tokens. */
			memset(toks, 0, ((size_t)n + 1) * sizeof(uint32_t));
			if (in->tokens)
				memcpy(toks, in->tokens, (size_t)n * sizeof(uint32_t));
			c.tokens = toks;
			struct sf_engine_step st = { 0 };
			sample(g, &c, g->logits, &st);
			free(toks);
			if (st.rc)
				rc = sf_err_set(err, st.rc, "the stage's token could not be drawn");
			out->kind = SF_STAGE_TOKEN;
			out->token = st.token;
		}
	} else if (!rc) {
		wr32(hidden_out, n);
		wr32(hidden_out + 4, E);
		wr32(hidden_out + 8, in->end_layer);
		memcpy(hidden_out + STAGE_HDR, h, (size_t)n * E * sizeof(float));
		out->kind = SF_STAGE_HIDDEN;
		out->hidden_len = need;
	}
	sf_kv_fini(&kv);
	free(h);
	return rc;
}
