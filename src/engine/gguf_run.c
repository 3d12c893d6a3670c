/* The GGUF engine's contexts and compute: prefill in chunks, and decode steps that compute
 * every context's pending tokens in one forward pass and sample each context's next token. */
#include "engine/gguf_internal.h"
#include "prefix/prefix.h"

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
	/* The logit_bias pairs and the grammar are copied behind the context, in the same block
	 * (freed with it): the caller's go away after the call. The grammar is compiled by the
	 * first draw (on the engine's thread, from its cache). */
	size_t bias = (size_t)s->n_logit_bias * sizeof(*s->logit_bias);
	size_t gl = s->grammar ? s->grammar_len : 0;
	struct ge_ctx *c = calloc(1, sizeof(*c) + bias + gl + 1);
	if (!c)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a context");
	sf_kv_init(&c->kv, g->arena);
	c->sampling = *s;
	c->sampling.logit_bias = bias ? (struct sf_logit_bias *)(c + 1) : NULL;
	if (bias)
		memcpy(c->sampling.logit_bias, s->logit_bias, bias);
	c->sampling.grammar = gl ? (char *)(c + 1) + bias : NULL;
	c->sampling.grammar_len = (uint32_t)gl;
	if (gl)
		memcpy(c->sampling.grammar, s->grammar, gl);
	*out = (struct sf_engine_ctx *)c;
	return 0;
}

void ge_ctx_free(void *impl, struct sf_engine_ctx *ctx)
{
	struct ge_ctx *c = ge_ctx(ctx);
	sf_kv_retire(&c->kv, c->tokens); /* its last partial page kept for a later turn */
	sf_kv_fini(&c->kv);
	sf_gmatch_free(c->gm);
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
	return sf_kv_arena_used(g->arena) - sf_kv_arena_reclaimable(g->arena);
}

void ge_ctx_share(void *impl, struct sf_engine_ctx *ctx, uint64_t ns)
{
	struct ge_ctx *c = ge_ctx(ctx);
	sf_kv_share(&c->kv, ns ? sf_prefix_root(ns) : 0);
}

uint32_t ge_ctx_reused(void *impl, const struct sf_engine_ctx *ctx)
{
	return ((const struct ge_ctx *)ctx)->reused;
}

struct sf_prefix_cache *ge_prefix_cache(void *impl)
{
	struct ge *g = impl;
	return sf_kv_arena_prefix(g->arena);
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

int ge_grow(struct ge_ctx *c, size_t n, struct sf_err *err)
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
 * chunks, beside other contexts' tokens), so a long prompt never holds the caller, but for
 * the pages a shared context adopts from the index. Their cache memory is taken now: a full
 * node refuses here, not halfway through the prompt. */
int ge_prefill(void *impl, struct sf_engine_ctx *ctx, const uint32_t *tokens, size_t n,
	       struct sf_err *err)
{
	struct ge_ctx *c = ge_ctx(ctx);
	uint32_t total = c->n + (uint32_t)n;
	int rc = ge_grow(c, total, err);
	if (rc)
		return rc;
	memcpy(c->tokens + c->n, tokens, n * sizeof(uint32_t));
	c->reused = sf_kv_adopt(&c->kv, c->tokens, total);
	rc = sf_kv_reserve(&c->kv, total, err);
	if (rc) {
		sf_kv_truncate(&c->kv, c->n);
		c->reused = 0;
		return rc;
	}
	c->n = total;
	c->n_gen = 0;
	return 0;
}

void ge_sample(struct ge *g, struct ge_ctx *c, const float *logits, struct sf_engine_step *st)
{
	struct sf_sampler_params p;
	sf_sampler_params_from_wire(&p, &c->sampling);
	if (c->sampling.grammar_len) {
		/* The grammar's state follows from the generation's tokens (earlier runs' too). */
		uint32_t gen = st->generated < c->n ? st->generated : c->n;
		struct sf_err e;
		if (sf_grammar_host_mask(g->grammar, &c->gm, c->sampling.grammar,
					 c->sampling.grammar_len, c->tokens + c->n - gen, gen, &p.allow,
					 &e)) {
			ge_say(g, "%s: a generation under a grammar ends in an error after %u tokens: %s",
			       g->path, gen, e.msg);
			st->rc = e.code;
			return;
		}
	}
	/* A grammar that can only end now ends, whatever ignore_eos or min_tokens say. */
	bool done = p.allow && sf_gmatch_done(c->gm);
	if (!done && sf_sampling_bans_eog(&c->sampling, c->n_gen) && g->n_eog &&
	    p.n_logit_bias <= SF_MAX_LOGIT_BIAS) {
		if (p.n_logit_bias) /* none: logit_bias is NULL, which memcpy may not take */
			memcpy(g->bias, p.logit_bias, p.n_logit_bias * sizeof(*g->bias));
		for (uint32_t i = 0; i < g->n_eog; i++)
			g->bias[p.n_logit_bias + i] = (struct sf_logit_bias){ g->eog[i], SF_SAMPLER_BAN };
		p.logit_bias = g->bias;
		p.n_logit_bias += g->n_eog;
	}
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
		/* Said in the node's log (issue 32: a model of NaN weights ended every generation
		 * with an error and nothing said why). */
		ge_say(g, "%s: a generation ends in an error after %u tokens: %s", g->path, c->n_gen,
		       err.msg);
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
	if (c->n && c->kv.n == c->n)
		sf_kv_truncate(&c->kv, c->n - 1);
	if (!c->n)
		st->rc = SF_E_RANGE; /* nothing to go on */
	else if (c->n >= g->cfg.ctx_len)
		st->rc = SF_E_LIMIT;
	else if (ge_grow(c, (size_t)c->n + 1, &e) || sf_kv_reserve(&c->kv, c->n, &e))
		st->rc = SF_E_NOMEM;
	if (st->rc)
		return -1;
	/* Pages another context indexed since its prefill (a burst of one prompt). */
	if (c->n - c->kv.n > 1)
		c->reused += sf_kv_adopt(&c->kv, c->tokens, c->n);
	return c->n - c->kv.n;
}

/* A recurrent model's b waits for a: in the same namespace, both before the last page end
 * their tokens share (before b's last page, a's last page end before its last token); a keeps
 * a checkpoint there (kv.parting, when none is set ahead of it or this one comes first) and b
 * adopts the pages up to it at the step after a reaches it. */
static bool follows_state(struct ge_ctx *a, const struct ge_ctx *b)
{
	struct sf_kv *x = &a->kv;
	const struct sf_kv *y = &b->kv;
	if (!x->root || x->root != y->root)
		return false;
	uint32_t m = a->n < b->n ? a->n : b->n, common = 0;
	while (common < m && a->tokens[common] == b->tokens[common])
		common++;
	uint32_t p = common / SF_KV_PAGE * SF_KV_PAGE, la = (a->n - 1) / SF_KV_PAGE * SF_KV_PAGE;
	if (p > la)
		p = la;
	if (p > (b->n - 1) / SF_KV_PAGE * SF_KV_PAGE)
		p = (b->n - 1) / SF_KV_PAGE * SF_KV_PAGE;
	if (x->n >= p || y->n >= p || y->n > x->n)
		return false;
	if (x->parting <= x->n || p < x->parting)
		x->parting = p;
	return true;
}

/* Whether b's next page is the one a computes now: the same namespace and pages before it,
 * both at that page's start, and its tokens; a completes it this step if its chunk reaches,
 * and b adopts it at the next (b must compute past it). A recurrent model's: follows_state. */
static bool follows(struct ge_ctx *a, const struct ge_ctx *b)
{
	const struct sf_kv *x = &a->kv, *y = &b->kv;
	uint32_t at = x->n;
	if (x->state)
		return follows_state(a, b);
	return x->root && x->root == y->root && at == y->n && at % SF_KV_PAGE == 0 &&
	       x->n_shared * SF_KV_PAGE == at && y->n_shared == x->n_shared &&
	       (!at || x->shared[x->n_shared - 1] == y->shared[y->n_shared - 1]) &&
	       a->n >= at + SF_KV_PAGE && b->n > at + SF_KV_PAGE &&
	       !memcmp(a->tokens + at, b->tokens + at, SF_KV_PAGE * sizeof(uint32_t));
}

/* Where a recurrent model's prompt (at least 2 tokens to go) keeps its next checkpoint: where
 * it parts from another prompt, if still ahead, else its last page end before its last token. */
static uint32_t checkpoint_at(const struct ge_ctx *c)
{
	uint32_t last = (c->n - 1) / SF_KV_PAGE * SF_KV_PAGE;
	return c->kv.parting > c->kv.n && c->kv.parting < last ? c->kv.parting : last;
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
	/* A prompt whose next page another prompt of the step computes waits for it (no token,
	 * more) rather than computing it too: a burst of one prefix costs it once. */
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; want[i] > 1 && j < i; j++)
			if (want[j] > 1 && follows(ge_ctx(steps[j].ctx), ge_ctx(steps[i].ctx))) {
				want[i] = 0;
				steps[i].more = true;
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
		/* A shared context's chunk ends where a page does, so others can adopt the page at
		 * the next step (the rest of the budget goes on to the next prompts). */
		uint32_t end = (c->kv.n + k) / SF_KV_PAGE * SF_KV_PAGE;
		if (c->kv.root && k < want[i] && end > c->kv.n) {
			extra += c->kv.n + k - end;
			k = end - c->kv.n;
		}
		/* A recurrent model's shared prompt stops at the last page end before its last
		 * token, where its state is kept with the page (sf_kv_checkpoint): a later prompt
		 * that begins the same way (the conversation sent again) starts from it. And first
		 * where it parts from another prompt whose pages it found (after a shared system
		 * prompt): the prompts after both start from there. */
		uint32_t at = checkpoint_at(c);
		if (c->kv.root && c->kv.state && c->kv.n < at && c->kv.n + k > at) {
			extra += c->kv.n + k - at;
			k = at - c->kv.n;
		}
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
	for (size_t i = 0; i < n; i++) {
		struct ge_ctx *c = ge_ctx(steps[i].ctx);
		if (want[i] <= 0)
			continue;
		sf_kv_publish(&c->kv, c->tokens); /* its full pages computed now, for others */
		if (want[i] > 1 && (c->kv.n == c->kv.parting ||
				    c->kv.n == (c->n - 1) / SF_KV_PAGE * SF_KV_PAGE))
			sf_kv_checkpoint(&c->kv); /* a prompt stopped for it (above) */
		else if (want[i] == 1 && c->kv.n % SF_KV_PAGE == 0)
			sf_kv_checkpoint_step(&c->kv); /* a reply's page end: the next turn's start */
	}
	/* Logits rows come in the order of the tokens that asked for them. */
	size_t row = 0;
	for (uint32_t t = 0; t < nt; t++) {
		if (!g->toks[t].logits)
			continue;
		for (size_t i = 0; i < n; i++)
			if (&ge_ctx(steps[i].ctx)->kv == g->toks[t].kv) {
				ge_sample(g, ge_ctx(steps[i].ctx), g->logits + row * g->model->cfg.n_vocab,
				       &steps[i]);
				break;
			}
		row++;
	}
	return 0;
}
