/* The GGUF engine's staged forward (--pipeline): layers [start, end) of a model over positions
 * a stage is given, stateless (the whole context each time, a cache for the call) or keeping
 * the stage's own layers' keys and values (and recurrent layers' states) in a context between
 * calls. The hidden blob between stages is u32 n_tokens, u32 width, u32 next layer, then
 * n_tokens x width floats (little-endian): the residual stream of every position given. */
#include "engine/gguf_internal.h"

#include <stdlib.h>
#include <string.h>

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

/* The positions a stage runs: the tokens' count into the first stage, the hidden blob's
 * (checked against this stage and, with a context, against its tokens) past it. */
static int positions(const struct ge *g, const struct sf_engine_stage_in *in, uint32_t *n,
		     const float **hin, struct sf_err *err)
{
	uint32_t E = g->model->cfg.n_embd;
	*hin = NULL;
	*n = (uint32_t)in->n_tokens;
	if (in->start_layer > 0) {
		if (in->hidden_len < STAGE_HDR)
			return sf_err_set(err, SF_E_RANGE, "hidden blob of %zu bytes", in->hidden_len);
		uint32_t k = rd32(in->hidden);
		if (rd32(in->hidden + 4) != E || rd32(in->hidden + 8) != in->start_layer ||
		    in->hidden_len != STAGE_HDR + (size_t)k * E * sizeof(float) || k > g->cfg.ctx_len)
			return sf_err_set(err, SF_E_RANGE, "hidden blob for %u tokens of width %u at "
					  "layer %u does not fit this stage (width %u, layer %u)", k,
					  rd32(in->hidden + 4), rd32(in->hidden + 8), E,
					  in->start_layer);
		if (in->ctx && k != in->n_tokens)
			return sf_err_set(err, SF_E_RANGE, "hidden blob of %u positions with %zu "
					  "tokens", k, in->n_tokens);
		*n = k;
		*hin = (const float *)(in->hidden + STAGE_HDR);
	}
	if (!*n)
		return sf_err_set(err, SF_E_RANGE, "a stage of no tokens");
	return 0;
}

/* Runs the stage's layers over h (n positions x width, in place) at positions kv->n.. on. */
static int run_layers(struct ge *g, const struct sf_engine_stage_in *in, struct sf_kv *kv,
		      float *h, uint32_t n, bool last, struct sf_err *err)
{
	uint32_t E = g->model->cfg.n_embd, base = kv->n;
	uint32_t chunk = sf_fwd_max_tokens(g->fwd);
	int rc = sf_kv_reserve(kv, base + n, err);
	for (uint32_t at = 0; !rc && at < n; at += chunk) {
		uint32_t k = n - at < chunk ? n - at : chunk;
		for (uint32_t i = 0; i < k; i++)
			g->toks[i] = (struct sf_fwd_tok){ kv, base + at + i,
							  in->tokens ? in->tokens[at + i] : 0,
							  last && at + i == n - 1 };
		rc = sf_model_forward(g->model, g->pool, g->fwd, g->toks, k, in->start_layer,
				      in->end_layer, h + (size_t)at * E, g->logits, err);
	}
	return rc;
}

/* The token a decode step would draw after ctx's tokens [0, n), from the stage's logits. */
static int draw(struct ge *g, const struct sf_engine_stage_in *in, struct ge_ctx *c,
		struct sf_engine_stage_out *out, struct sf_err *err)
{
	struct ge_ctx d = *c; /* its draw appended to this copy only: the caller sends it back */
	if (in->sampling)
		d.sampling = *in->sampling;
	else
		memset(&d.sampling, 0, sizeof(d.sampling));
	d.sampling.grammar = NULL; /* stages draw without one (the node refuses a grammar) */
	d.sampling.grammar_len = 0;
	d.gm = NULL;
	d.n_gen = in->ctx ? in->n_generated : 0;
	struct sf_engine_step st = { .logprobs = in->logprobs, .top_logprobs = in->top_logprobs };
	ge_sample(g, &d, g->logits, &st);
	if (st.rc)
		return sf_err_set(err, st.rc, "the stage's token could not be drawn");
	out->kind = SF_STAGE_TOKEN;
	out->token = st.token;
	if (in->logprobs || in->top_logprobs)
		out->lp = st.lp;
	return 0;
}

static void put_hidden(struct ge *g, const struct sf_engine_stage_in *in, const float *h,
		       uint32_t n, uint8_t *hidden_out, struct sf_engine_stage_out *out)
{
	size_t bytes = (size_t)n * g->model->cfg.n_embd * sizeof(float);
	wr32(hidden_out, n);
	wr32(hidden_out + 4, g->model->cfg.n_embd);
	wr32(hidden_out + 8, in->end_layer);
	memcpy(hidden_out + STAGE_HDR, h, bytes);
	out->kind = SF_STAGE_HIDDEN;
	out->hidden_len = STAGE_HDR + bytes;
}

int ge_stage_forward(void *impl, const struct sf_engine_stage_in *in, uint8_t *hidden_out,
		     size_t cap, struct sf_engine_stage_out *out, struct sf_err *err)
{
	struct ge *g = impl;
	uint32_t E = g->model->cfg.n_embd, n;
	const float *hin;
	int rc = positions(g, in, &n, &hin, err);
	if (rc)
		return rc;
	bool last = in->end_layer == g->model->cfg.n_layer;
	size_t need = STAGE_HDR + (size_t)n * E * sizeof(float);
	if (!last && need > cap)
		return sf_err_set(err, SF_E_LIMIT, "the hidden state of %u tokens takes %zu bytes, "
				  "over %zu", n, need, cap);
	struct ge_ctx *c = in->ctx ? ge_ctx(in->ctx) : NULL;
	struct ge_ctx once = { 0 }; /* stateless: a context for this call alone */
	if (!c) {
		c = &once;
		sf_kv_init_layers(&c->kv, g->arena, in->start_layer, in->end_layer);
	} else if (!c->n && !c->kv.n_pages) {
		sf_kv_fini(&c->kv); /* (a state it still had from a cut: its memory back) */
		sf_kv_init_layers(&c->kv, g->arena, in->start_layer, in->end_layer);
	} else if (c->kv.layer0 != in->start_layer ||
		   c->kv.layer0 + c->kv.n_layer != in->end_layer) {
		return sf_err_set(err, SF_E_RANGE, "this context runs layers %u..%u, not %u..%u",
				  c->kv.layer0, c->kv.layer0 + c->kv.n_layer, in->start_layer,
				  in->end_layer);
	} else if (c->kv.n < c->n) {
		/* Cut back (sf_engine_stage_forward) inside what its recurrent state had gone
		 * past: the state went back to the start (a stage keeps no checkpoints), and
		 * so does what it holds; the head starts every stage again from there. */
		c->n = c->kv.n;
		if (c->n_gen > c->n)
			c->n_gen = c->n;
		out->kind = SF_STAGE_HELD;
		out->held = c->n;
		return 0;
	}
	float *h = malloc((size_t)n * E * sizeof(float));
	rc = h ? ge_grow(c, (size_t)c->n + n + 1, err) : sf_err_set(err, SF_E_NOMEM, "no memory");
	if (!rc && hin)
		memcpy(h, hin, (size_t)n * E * sizeof(float));
	uint32_t base = c->n;
	if (!rc)
		rc = run_layers(g, in, &c->kv, h, n, last, err);
	if (!rc) {
		/* The context's ids: penalties read them (a stateless stage past the first has
		 * none). */
		if (in->tokens)
			memcpy(c->tokens + base, in->tokens, (size_t)n * sizeof(uint32_t));
		else
			memset(c->tokens + base, 0, (size_t)n * sizeof(uint32_t));
		c->n = base + n;
		if (last)
			rc = draw(g, in, c, out, err);
		else
			put_hidden(g, in, h, n, hidden_out, out);
	}
	if (rc && c != &once)
		sf_kv_truncate(&c->kv, base); /* as it was */
	if (c == &once) {
		sf_kv_fini(&c->kv);
		free(c->tokens);
	}
	free(h);
	return rc;
}
