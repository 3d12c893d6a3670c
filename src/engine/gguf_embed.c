/* The GGUF engine's "embed" state operation (superfluid/embed.h): a step takes the next inputs
 * whose tokens fit one forward call together (or one longer input, in chunks), each in a cache
 * of its own (freed after), run through every layer; each input's hidden states after the final
 * norm pooled as the file says (<arch>.pooling_type: 1 mean, 2 the first token, 3 the last
 * token; none given or 0: mean) and scaled to length 1, as llama.cpp's server gives them. */
#include "engine/gguf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/embed.h>

static const char *const names[] = { SF_EMBED_OP };

void ge_state_op_names(void *impl, const char *const **list, size_t *n)
{
	*list = names;
	*n = 1;
}

/* The input's tokens into *out (malloc'd): a text encoded as llama.cpp's server encodes an
 * embedding input (specials parsed, BOS and EOS as the model adds them). */
static int tokens_of(struct ge *g, const struct sf_embed_input *in, uint32_t **out, size_t *n,
		     struct sf_err *err)
{
	size_t cap = in->kind == SF_EMBED_TEXT ? (size_t)in->len + 8 : in->len;
	*out = malloc((cap ? cap : 1) * sizeof(uint32_t));
	if (!*out)
		return sf_err_set(err, SF_E_NOMEM, "embed: no memory for an input's tokens");
	if (in->kind == SF_EMBED_TOKENS) {
		for (uint32_t i = 0; i < in->len; i++)
			(*out)[i] = sf_embed_token(in, i);
		*n = in->len;
		return 0;
	}
	return sf_tok_encode(g->tok, in->text, in->len, true, true, *out, cap, n, err);
}

/* Input t[0..n) checked: tokens, within the context and the vocabulary. */
static int check_input(const struct ge *g, const uint32_t *t, uint32_t n, struct sf_err *err)
{
	const struct sf_model_config *c = &g->model->cfg;
	if (!n)
		return sf_err_set(err, SF_E_RANGE, "embed: an input of no tokens");
	if (n > g->cfg.ctx_len)
		return sf_err_set(err, SF_E_LIMIT, "embed: an input of %u tokens, past the context "
				  "of %u", n, g->cfg.ctx_len);
	for (uint32_t i = 0; i < n; i++)
		if (t[i] >= c->n_vocab)
			return sf_err_set(err, SF_E_RANGE, "embed: token %u past the vocabulary of %u",
					  t[i], c->n_vocab);
	return 0;
}

/* Whether position pos of an input of n tokens goes into its vector. */
static bool pooled(const struct ge *g, uint32_t pos, uint32_t n)
{
	return g->pooling == GE_POOL_MEAN || (g->pooling == GE_POOL_CLS && !pos) ||
	       (g->pooling == GE_POOL_LAST && pos == n - 1);
}

/* One input of a step: its tokens and its vector (n_embd floats). */
struct embed_in {
	uint32_t *t;
	uint32_t n;
	float *v;
};

/* The pooled vectors of inputs in[0..k): checked; together at most a forward call's tokens
 * when k > 1 (each its own cache, one call for them all, as decode steps batch contexts), a
 * single one longer than that in chunks. */
static int embed_batch(struct ge *g, struct embed_in *in, uint32_t k, struct sf_err *err)
{
	const struct sf_model_config *c = &g->model->cfg;
	uint32_t E = c->n_embd, chunk = sf_fwd_max_tokens(g->fwd);
	float *rows = malloc((size_t)chunk * E * sizeof(float));
	struct sf_kv *kv = calloc(k, sizeof(*kv));
	int rc = rows && kv ? 0 : sf_err_set(err, SF_E_NOMEM, "embed: no memory for the hidden "
					     "states");
	uint32_t inited = 0;
	for (; !rc && inited < k; inited++) {
		sf_kv_init(&kv[inited], g->arena);
		memset(in[inited].v, 0, (size_t)E * sizeof(float));
		rc = sf_kv_reserve(&kv[inited], in[inited].n, err);
	}
	/* The tokens in order, input after input; each call takes up to chunk of them. */
	uint32_t j = 0, pos = 0;
	while (!rc && j < k) {
		uint32_t m = 0;
		struct { uint32_t input, rows; } owner[64 + 1];
		uint32_t n_owner = 0;
		while (j < k && m < chunk) {
			uint32_t take = in[j].n - pos < chunk - m ? in[j].n - pos : chunk - m;
			uint32_t want = 0;
			for (uint32_t i = 0; i < take; i++, pos++) {
				bool use = pooled(g, pos, in[j].n);
				g->toks[m++] = (struct sf_fwd_tok){ &kv[j], pos, in[j].t[pos], use };
				want += use;
			}
			owner[n_owner].input = j;
			owner[n_owner++].rows = want;
			if (pos == in[j].n) {
				j++;
				pos = 0;
			}
		}
		rc = sf_model_forward(g->model, g->pool, g->fwd, g->toks, m, 0, c->n_layer, rows,
				      NULL, err);
		const float *row = rows;
		for (uint32_t o = 0; !rc && o < n_owner; o++) {
			float *v = in[owner[o].input].v;
			for (uint32_t r = 0; r < owner[o].rows; r++, row += E)
				for (uint32_t x = 0; x < E; x++)
					v[x] += row[x];
		}
	}
	for (uint32_t i = 0; i < inited; i++)
		sf_kv_fini(&kv[i]);
	free(kv);
	free(rows);
	for (uint32_t i = 0; !rc && i < k && g->pooling == GE_POOL_MEAN; i++)
		for (uint32_t x = 0; x < E; x++)
			in[i].v[x] /= (float)in[i].n;
	return rc;
}

/* Inputs a step takes together at most (their tokens together at most a forward call's). */
#define EMBED_BATCH 64

int ge_state_op_step(void *impl, const struct sf_engine_op_req *req, struct sf_engine_op_step *st,
		     size_t budget, sf_engine_segment_fn cb, void *cb_arg, uint8_t *result,
		     size_t cap, struct sf_err *err)
{
	struct ge *g = impl;
	(void)budget;
	(void)cb;
	(void)cb_arg;
	if (strcmp(req->op, SF_EMBED_OP))
		return sf_err_set(err, SF_E_RANGE, "engine gguf has no state operation \"%s\"",
				  req->op);
	uint32_t count, E = g->model->cfg.n_embd, chunk = sf_fwd_max_tokens(g->fwd);
	int rc = sf_embed_args_count(req->args, req->args_len, &count, err);
	if (rc)
		return rc;
	if (!st->pos[1]) { /* the first step: it all fits, or nothing is done */
		size_t need = sf_embed_result_len(count, E);
		if (need > cap) {
			st->len = need;
			return sf_err_set(err, SF_E_LIMIT, "embed: %u inputs of %u values make %zu "
					  "bytes, over %zu", count, E, need, cap);
		}
		sf_embed_result_head(result, count, E);
		st->pos[1] = 4; /* the next input's bytes */
		st->len = 8;
	}
	/* The inputs from pos[0] on whose tokens fit one forward call together (the first
	 * whatever its length); an input that does not check ends the batch before it, and
	 * fails the step when it is the first. */
	uint32_t i = (uint32_t)st->pos[0], k = 0, total = 0;
	struct embed_in in[EMBED_BATCH];
	size_t at = st->pos[1];
	while (!rc && i + k < count && k < EMBED_BATCH) {
		struct sf_embed_input x;
		size_t next = at;
		sf_embed_args_next(req->args, &next, &x);
		uint32_t *t = NULL;
		size_t n = 0;
		struct sf_err e2;
		struct sf_err *ep = k ? &e2 : err;
		int r = tokens_of(g, &x, &t, &n, ep);
		if (!r)
			r = check_input(g, t, (uint32_t)n, ep);
		if (r || (k && total + n > chunk)) {
			free(t);
			if (!k) {
				char why[sizeof(err->msg)];
				snprintf(why, sizeof(why), "%s", err->msg);
				rc = sf_err_set(err, r, "input %u: %s", i, why);
			}
			break;
		}
		in[k] = (struct embed_in){ t, (uint32_t)n, malloc((size_t)E * sizeof(float)) };
		if (!in[k++].v) {
			rc = sf_err_set(err, SF_E_NOMEM, "embed: no memory for a vector");
			break;
		}
		total += (uint32_t)n;
		at = next;
		if (total >= chunk)
			break;
	}
	if (!rc && k)
		rc = embed_batch(g, in, k, err);
	if (!rc && k) {
		for (uint32_t j = 0; j < k; j++)
			sf_embed_result_put(result, E, i + j, in[j].n, in[j].v);
		st->len = sf_embed_result_len(i + k, E);
		st->pos[0] = i + k;
		st->pos[1] = at;
	} else if (rc && k) {
		char why[sizeof(err->msg)];
		snprintf(why, sizeof(why), "%s", err->msg);
		sf_err_set(err, rc, "inputs %u to %u: %s", i, i + k - 1, why);
	}
	for (uint32_t j = 0; j < k; j++) {
		free(in[j].t);
		free(in[j].v);
	}
	st->more = !rc && st->pos[0] < count;
	return rc;
}
