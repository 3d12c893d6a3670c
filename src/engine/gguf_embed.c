/* The GGUF engine's "embed" state operation (superfluid/embed.h): one input a step, run through
 * every layer in chunks in a cache of its own (freed after), its hidden states after the final
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

/* Input t[0..n)'s pooled vector into v (n_embd floats). */
static int embed_one(struct ge *g, const uint32_t *t, uint32_t n, float *v, struct sf_err *err)
{
	const struct sf_model_config *c = &g->model->cfg;
	uint32_t E = c->n_embd, chunk = sf_fwd_max_tokens(g->fwd);
	if (!n)
		return sf_err_set(err, SF_E_RANGE, "embed: an input of no tokens");
	if (n > g->cfg.ctx_len)
		return sf_err_set(err, SF_E_LIMIT, "embed: an input of %u tokens, past the context "
				  "of %u", n, g->cfg.ctx_len);
	for (uint32_t i = 0; i < n; i++)
		if (t[i] >= c->n_vocab)
			return sf_err_set(err, SF_E_RANGE, "embed: token %u past the vocabulary of %u",
					  t[i], c->n_vocab);
	float *rows = malloc((size_t)chunk * E * sizeof(float));
	if (!rows)
		return sf_err_set(err, SF_E_NOMEM, "embed: no memory for the hidden states");
	struct sf_kv kv;
	sf_kv_init(&kv, g->arena);
	int rc = sf_kv_reserve(&kv, n, err);
	memset(v, 0, (size_t)E * sizeof(float));
	for (uint32_t at = 0; !rc && at < n; at += chunk) {
		uint32_t k = n - at < chunk ? n - at : chunk, want = 0;
		for (uint32_t i = 0; i < k; i++) {
			uint32_t pos = at + i;
			bool use = g->pooling == GE_POOL_MEAN || (g->pooling == GE_POOL_CLS && !pos) ||
				   (g->pooling == GE_POOL_LAST && pos == n - 1);
			g->toks[i] = (struct sf_fwd_tok){ &kv, pos, t[pos], use };
			want += use;
		}
		rc = sf_model_forward(g->model, g->pool, g->fwd, g->toks, k, 0, c->n_layer, rows,
				      NULL, err);
		for (uint32_t r = 0; !rc && r < want; r++)
			for (uint32_t j = 0; j < E; j++)
				v[j] += rows[(size_t)r * E + j];
	}
	sf_kv_fini(&kv);
	free(rows);
	if (!rc && g->pooling == GE_POOL_MEAN)
		for (uint32_t j = 0; j < E; j++)
			v[j] /= (float)n;
	return rc;
}

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
	uint32_t count, E = g->model->cfg.n_embd;
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
	uint32_t i = (uint32_t)st->pos[0];
	if (i < count) {
		struct sf_embed_input in;
		size_t at = st->pos[1];
		sf_embed_args_next(req->args, &at, &in);
		uint32_t *t = NULL;
		size_t n = 0;
		float *v = malloc((size_t)E * sizeof(float));
		rc = v ? tokens_of(g, &in, &t, &n, err)
		       : sf_err_set(err, SF_E_NOMEM, "embed: no memory for a vector");
		if (!rc)
			rc = embed_one(g, t, (uint32_t)n, v, err);
		if (!rc) {
			sf_embed_result_put(result, E, i, (uint32_t)n, v);
			st->len = sf_embed_result_len(i + 1, E);
			st->pos[0] = i + 1;
			st->pos[1] = at;
		} else {
			char why[sizeof(err->msg)];
			snprintf(why, sizeof(why), "%s", err->msg);
			sf_err_set(err, rc, "input %u: %s", i, why);
		}
		free(t);
		free(v);
	}
	st->more = !rc && st->pos[0] < count;
	return rc;
}
