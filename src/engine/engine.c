/* The engine wrappers: argument checks shared by every implementation, then dispatch. */
#include <superfluid/engine.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "common/token_digest.h"

struct sf_engine {
	const struct sf_engine_ops *ops;
	void *impl;
	struct sf_engine_info info;
};

static int check_info(const struct sf_engine_info *in, struct sf_err *err)
{
	if (!in->vocab_size || in->vocab_size > SF_MAX_VOCAB)
		return sf_err_set(err, SF_E_RANGE, "engine vocabulary of %u tokens", in->vocab_size);
	if (in->eos >= in->vocab_size || (in->has_bos && in->bos >= in->vocab_size))
		return sf_err_set(err, SF_E_RANGE, "engine bos/eos past its vocabulary");
	if (!in->n_layers || !in->ctx_len || !in->batch_size)
		return sf_err_set(err, SF_E_RANGE, "engine with no layers, context or batch");
	if (in->stage_bytes > SF_MAX_OPAQUE)
		return sf_err_set(err, SF_E_RANGE, "engine hidden blob over %u bytes", SF_MAX_OPAQUE);
	return 0;
}

int sf_engine_create(const struct sf_engine_ops *ops, void *impl, struct sf_engine **out,
		     struct sf_err *err)
{
	*out = NULL;
	if (!ops->destroy || !ops->info || !ops->encode || !ops->token_bytes || !ops->specials ||
	    !ops->templates || !ops->ctx_new || !ops->ctx_free || !ops->prefill || !ops->ctx_len ||
	    !ops->decode) {
		if (ops->destroy)
			ops->destroy(impl);
		return sf_err_set(err, SF_E_RANGE, "engine %s lacks a required operation",
				  ops->kind ? ops->kind : "?");
	}
	struct sf_engine *e = calloc(1, sizeof(*e));
	if (!e) {
		ops->destroy(impl);
		return sf_err_set(err, SF_E_NOMEM, "no memory for an engine");
	}
	e->ops = ops;
	e->impl = impl;
	ops->info(impl, &e->info);
	e->info.model[sizeof(e->info.model) - 1] = 0;
	e->info.encodes_pieces = e->info.encodes_pieces && ops->encode_pieces;
	int rc = check_info(&e->info, err);
	if (!rc && !e->info.tokenizer_digest)
		rc = sf_engine_compute_digest(e, &e->info.tokenizer_digest, err);
	if (rc) {
		sf_engine_free(e);
		return rc;
	}
	*out = e;
	return 0;
}

void sf_engine_free(struct sf_engine *e)
{
	if (!e)
		return;
	e->ops->destroy(e->impl);
	free(e);
}

void *sf_engine_impl(const struct sf_engine *e)
{
	return e->impl;
}

const char *sf_engine_kind(const struct sf_engine *e)
{
	return e->ops->kind ? e->ops->kind : "engine";
}

const struct sf_engine_info *sf_engine_info(const struct sf_engine *e)
{
	return &e->info;
}

void sf_engine_model_info(const struct sf_engine *e, struct sf_model_info *out)
{
	memset(out, 0, sizeof(*out));
	out->name = (char *)e->info.model;
	out->name_len = (uint32_t)strlen(e->info.model);
	out->tokenizer_digest = e->info.tokenizer_digest;
	out->n_layers = e->info.n_layers;
	out->ctx_len = e->info.ctx_len;
	out->vocab_size = e->info.vocab_size;
}

/* ---- tokenizer ---- */

static int check_text(const char *text, size_t len, struct sf_err *err)
{
	if (!text && len)
		return sf_err_set(err, SF_E_RANGE, "no text to encode");
	if (len > SF_MAX_TEXT)
		return sf_err_set(err, SF_E_LIMIT, "text of %zu bytes, over %u", len, SF_MAX_TEXT);
	return 0;
}

int sf_engine_encode(struct sf_engine *e, const char *text, size_t len, uint32_t *out,
		     size_t cap, size_t *n_out, struct sf_err *err)
{
	*n_out = 0;
	int rc = check_text(text, len, err);
	return rc ? rc : e->ops->encode(e->impl, text, len, true, out, cap, n_out, err);
}

int sf_engine_encode_plain(struct sf_engine *e, const char *text, size_t len, uint32_t *out,
			   size_t cap, size_t *n_out, struct sf_err *err)
{
	*n_out = 0;
	if (!e->info.encodes_plain)
		return sf_err_set(err, SF_E_UNSUPPORTED, "engine %s cannot encode plain text",
				  sf_engine_kind(e));
	int rc = check_text(text, len, err);
	return rc ? rc : e->ops->encode(e->impl, text, len, false, out, cap, n_out, err);
}

int sf_engine_encode_pieces(struct sf_engine *e, const struct sf_piece *pieces, size_t n,
			    uint32_t *out, size_t cap, size_t *n_out, struct sf_err *err)
{
	*n_out = 0;
	if (!e->info.encodes_pieces)
		return sf_err_set(err, SF_E_UNSUPPORTED, "engine %s cannot encode pieces",
				  sf_engine_kind(e));
	if (n > SF_MAX_BATCH)
		return sf_err_set(err, SF_E_LIMIT, "%zu pieces, over %u", n, SF_MAX_BATCH);
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		int rc = check_text(pieces[i].text, pieces[i].text_len, err);
		if (rc) {
			sf_err_prefix(err, "piece %zu", i);
			return rc;
		}
		total += pieces[i].text_len;
	}
	if (total > SF_MAX_TEXT)
		return sf_err_set(err, SF_E_LIMIT, "pieces of %zu bytes, over %u", total, SF_MAX_TEXT);
	return e->ops->encode_pieces(e->impl, pieces, n, out, cap, n_out, err);
}

int sf_engine_token_bytes(struct sf_engine *e, uint32_t token, uint8_t *out, size_t cap,
			  size_t *len, struct sf_err *err)
{
	*len = 0;
	if (token >= e->info.vocab_size)
		return sf_err_set(err, SF_E_RANGE, "token %u past the vocabulary of %u", token,
				  e->info.vocab_size);
	return e->ops->token_bytes(e->impl, token, out, cap, len, err);
}

int sf_engine_detokenize(struct sf_engine *e, const uint32_t *tokens, size_t n, uint8_t *out,
			 size_t cap, size_t *len, struct sf_err *err)
{
	uint8_t one[SF_MAX_TOKEN_BYTES];
	size_t at = 0;
	bool over = false;
	*len = 0;
	for (size_t i = 0; i < n; i++) {
		size_t k;
		int rc = sf_engine_token_bytes(e, tokens[i], one, sizeof(one), &k, err);
		if (rc)
			return rc;
		if (!over && k <= cap - at)
			memcpy(out + at, one, k);
		else
			over = true;
		at += k;
	}
	*len = at;
	if (over)
		return sf_err_set(err, SF_E_LIMIT, "detokenized text of %zu bytes, over %zu", at, cap);
	return 0;
}

void sf_engine_specials(struct sf_engine *e, const struct sf_engine_special **list, size_t *n)
{
	e->ops->specials(e->impl, list, n);
}

void sf_engine_templates(struct sf_engine *e, const struct sf_engine_template **list, size_t *n)
{
	e->ops->templates(e->impl, list, n);
}

const char *sf_engine_chat_template(struct sf_engine *e, const char *name)
{
	const struct sf_engine_template *list;
	size_t n;
	e->ops->templates(e->impl, &list, &n);
	if (!n)
		return NULL;
	if (!name)
		return list[0].text;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i].name, name))
			return list[i].text;
	return NULL;
}

int sf_engine_tokenizer_file(struct sf_engine *e, const uint8_t **data, size_t *len,
			     struct sf_err *err)
{
	*data = NULL;
	*len = 0;
	return e->ops->tokenizer_file ? e->ops->tokenizer_file(e->impl, data, len, err) : 0;
}

int sf_engine_compute_digest(struct sf_engine *e, uint64_t *digest, struct sf_err *err)
{
	struct sf_token_digest d;
	uint8_t one[SF_MAX_TOKEN_BYTES];
	if (sodium_init() < 0)
		return sf_err_set(err, SF_E_CRYPTO, "libsodium failed to initialise");
	sf_token_digest_init(&d, e->info.vocab_size);
	for (uint32_t t = 0; t < e->info.vocab_size; t++) {
		size_t k;
		int rc = e->ops->token_bytes(e->impl, t, one, sizeof(one), &k, err);
		if (rc) {
			sf_err_prefix(err, "tokenizer digest");
			return rc;
		}
		sf_token_digest_add(&d, one, k);
	}
	*digest = sf_token_digest_end(&d);
	return 0;
}

/* ---- contexts ---- */

int sf_engine_ctx_new(struct sf_engine *e, const struct sf_sampling *s,
		      struct sf_engine_ctx **out, struct sf_err *err)
{
	*out = NULL;
	if (!(s->temperature >= 0) || isinf(s->temperature))
		return sf_err_set(err, SF_E_RANGE, "temperature %g is not a finite value >= 0",
				  (double)s->temperature);
	if (!(s->top_p >= 0 && s->top_p <= 1))
		return sf_err_set(err, SF_E_RANGE, "top_p %g is outside [0, 1]", (double)s->top_p);
	return e->ops->ctx_new(e->impl, s, out, err);
}

void sf_engine_ctx_free(struct sf_engine *e, struct sf_engine_ctx *ctx)
{
	if (ctx)
		e->ops->ctx_free(e->impl, ctx);
}

int sf_engine_prefill(struct sf_engine *e, struct sf_engine_ctx *ctx, const uint32_t *tokens,
		      size_t n, struct sf_err *err)
{
	size_t have = e->ops->ctx_len(e->impl, ctx);
	if (n > e->info.ctx_len - have)
		return sf_err_set(err, SF_E_LIMIT,
				  "context full: %zu + %zu tokens is over the context length %u",
				  have, n, e->info.ctx_len);
	for (size_t i = 0; i < n; i++)
		if (tokens[i] >= e->info.vocab_size)
			return sf_err_set(err, SF_E_RANGE, "token %zu (%u) past the vocabulary of %u",
					  i, tokens[i], e->info.vocab_size);
	return n ? e->ops->prefill(e->impl, ctx, tokens, n, err) : 0;
}

size_t sf_engine_ctx_len(struct sf_engine *e, const struct sf_engine_ctx *ctx)
{
	return e->ops->ctx_len(e->impl, ctx);
}

int sf_engine_ctx_truncate(struct sf_engine *e, struct sf_engine_ctx *ctx, size_t n,
			   struct sf_err *err)
{
	size_t have = e->ops->ctx_len(e->impl, ctx);
	if (n > have)
		return sf_err_set(err, SF_E_RANGE, "cannot truncate a context of %zu tokens to %zu",
				  have, n);
	if (n == have)
		return 0;
	if (!e->ops->ctx_truncate)
		return sf_err_set(err, SF_E_UNSUPPORTED, "engine %s cannot truncate a context",
				  sf_engine_kind(e));
	return e->ops->ctx_truncate(e->impl, ctx, n, err);
}

uint64_t sf_engine_mem_used(struct sf_engine *e)
{
	return e->ops->mem_used ? e->ops->mem_used(e->impl) : 0;
}

void sf_engine_ctx_share(struct sf_engine *e, struct sf_engine_ctx *ctx, uint64_t ns)
{
	if (e->ops->ctx_share)
		e->ops->ctx_share(e->impl, ctx, ns);
}

uint32_t sf_engine_ctx_reused(struct sf_engine *e, const struct sf_engine_ctx *ctx)
{
	return e->ops->ctx_reused ? e->ops->ctx_reused(e->impl, ctx) : 0;
}

struct sf_prefix_cache *sf_engine_prefix_cache(struct sf_engine *e)
{
	return e->ops->prefix_cache ? e->ops->prefix_cache(e->impl) : NULL;
}

/* ---- generation ---- */

int sf_engine_decode(struct sf_engine *e, struct sf_engine_step *steps, size_t n,
		     struct sf_err *err)
{
	if (n > e->info.batch_size)
		return sf_err_set(err, SF_E_LIMIT, "decode batch of %zu, over the batch size %u", n,
				  e->info.batch_size);
	for (size_t i = 0; i < n; i++) {
		if (!steps[i].ctx)
			return sf_err_set(err, SF_E_RANGE, "decode entry %zu has no context", i);
		if (steps[i].top_logprobs > SF_MAX_TOP_LOGPROBS)
			return sf_err_set(err, SF_E_RANGE, "decode entry %zu asks %u top logprobs, over %d",
					  i, steps[i].top_logprobs, SF_MAX_TOP_LOGPROBS);
		/* One context twice would make its tokens depend on batch order. */
		for (size_t j = 0; j < i; j++)
			if (steps[j].ctx == steps[i].ctx)
				return sf_err_set(err, SF_E_RANGE,
						  "decode entries %zu and %zu share a context", j, i);
	}
	for (size_t i = 0; i < n; i++) {
		steps[i].rc = 0;
		steps[i].token = 0;
		steps[i].eog = false;
		steps[i].more = false;
		steps[i].lp.n_top = 0;
	}
	return n ? e->ops->decode(e->impl, steps, n, err) : 0;
}

int sf_engine_stage_forward(struct sf_engine *e, const struct sf_engine_stage_in *in,
			    uint8_t *hidden_out, size_t cap, struct sf_engine_stage_out *out,
			    struct sf_err *err)
{
	memset(out, 0, sizeof(*out));
	out->kind = SF_STAGE_ERROR;
	if (!e->ops->stage_forward)
		return sf_err_set(err, SF_E_UNSUPPORTED, "engine %s cannot run pipeline stages",
				  sf_engine_kind(e));
	if (in->start_layer >= in->end_layer || in->end_layer > e->info.n_layers)
		return sf_err_set(err, SF_E_RANGE, "layers [%u, %u) of a model with %u",
				  in->start_layer, in->end_layer, e->info.n_layers);
	if (in->start_layer == 0 && (in->hidden_len || (!in->tokens && in->n_tokens)))
		return sf_err_set(err, SF_E_RANGE, "the first stage takes tokens, not hidden state");
	if (in->start_layer > 0 && !in->ctx && (in->n_tokens || !in->hidden))
		return sf_err_set(err, SF_E_RANGE, "stage at layer %u takes hidden state, not tokens",
				  in->start_layer);
	if (in->ctx && (!in->n_tokens || !in->tokens || (in->start_layer > 0 && !in->hidden)))
		return sf_err_set(err, SF_E_RANGE, "a stage that keeps its context takes the new "
				  "positions' tokens%s", in->start_layer ? " and hidden state" : "");
	if (in->top_logprobs > SF_MAX_TOP_LOGPROBS)
		return sf_err_set(err, SF_E_RANGE, "%u top logprobs, over %u", in->top_logprobs,
				  SF_MAX_TOP_LOGPROBS);
	if (in->ctx && in->n_generated > in->from + in->n_tokens)
		return sf_err_set(err, SF_E_RANGE, "%u tokens generated of a context of %zu",
				  in->n_generated, in->from + in->n_tokens);
	if (in->n_tokens > e->info.ctx_len || (in->ctx && in->from > e->info.ctx_len - in->n_tokens))
		return sf_err_set(err, SF_E_LIMIT, "stage of %zu tokens from position %u, over the "
				  "context length %u", in->n_tokens, in->from, e->info.ctx_len);
	for (size_t i = 0; i < in->n_tokens; i++)
		if (in->tokens[i] >= e->info.vocab_size)
			return sf_err_set(err, SF_E_RANGE, "token %zu (%u) past the vocabulary of %u",
					  i, in->tokens[i], e->info.vocab_size);
	const struct sf_sampling *s = in->sampling;
	if (s && (!(s->temperature >= 0) || isinf(s->temperature) ||
		  !(s->top_p >= 0 && s->top_p <= 1)))
		return sf_err_set(err, SF_E_RANGE, "stage sampling out of range");
	if (in->ctx) {
		size_t held = e->ops->ctx_len(e->impl, in->ctx);
		if (held < in->from) {
			out->kind = SF_STAGE_HELD;
			out->held = (uint32_t)held;
			return 0;
		}
		int rc = held > in->from ? e->ops->ctx_truncate(e->impl, in->ctx, in->from, err) : 0;
		if (rc)
			return rc;
	}
	return e->ops->stage_forward(e->impl, in, hidden_out, cap, out, err);
}

/* ---- state operations ---- */

void sf_engine_state_op_names(struct sf_engine *e, const char *const **names, size_t *n)
{
	*names = NULL;
	*n = 0;
	if (e->ops->state_op_names)
		e->ops->state_op_names(e->impl, names, n);
}

int sf_engine_state_op(struct sf_engine *e, const struct sf_engine_op_req *req,
		       sf_engine_segment_fn cb, void *cb_arg, uint8_t *result, size_t cap,
		       size_t *result_len, struct sf_err *err)
{
	*result_len = 0;
	if (!req->op || strnlen(req->op, SF_MAX_NAME) == SF_MAX_NAME)
		return sf_err_set(err, SF_E_RANGE, "state operation without a name");
	if (req->args_len > SF_MAX_OPAQUE || req->n_blobs > SF_MAX_BLOB_REFS)
		return sf_err_set(err, SF_E_LIMIT, "state operation %s over its argument limits",
				  req->op);
	if (!e->ops->state_op && !e->ops->state_op_step)
		return sf_err_set(err, SF_E_RANGE, "engine %s has no state operation \"%s\"",
				  sf_engine_kind(e), req->op);
	if (e->ops->state_op_step) {
		/* One path for whole and stepped runs, so they cannot disagree. */
		struct sf_engine_op_step st = { 0 };
		int rc;
		do
			rc = e->ops->state_op_step(e->impl, req, &st, 0, cb, cb_arg, result, cap, err);
		while (!rc && st.more);
		*result_len = st.len; /* on SF_E_LIMIT: the size it needed */
		return rc;
	}
	return e->ops->state_op(e->impl, req, cb, cb_arg, result, cap, result_len, err);
}

int sf_engine_state_op_step(struct sf_engine *e, const struct sf_engine_op_req *req,
			    struct sf_engine_op_step *st, size_t budget, sf_engine_segment_fn cb,
			    void *cb_arg, uint8_t *result, size_t cap, struct sf_err *err)
{
	st->more = false;
	if (!req->op || strnlen(req->op, SF_MAX_NAME) == SF_MAX_NAME)
		return sf_err_set(err, SF_E_RANGE, "state operation without a name");
	if (req->args_len > SF_MAX_OPAQUE || req->n_blobs > SF_MAX_BLOB_REFS)
		return sf_err_set(err, SF_E_LIMIT, "state operation %s over its argument limits",
				  req->op);
	if (e->ops->state_op_step)
		return e->ops->state_op_step(e->impl, req, st, budget, cb, cb_arg, result, cap, err);
	if (!e->ops->state_op)
		return sf_err_set(err, SF_E_RANGE, "engine %s has no state operation \"%s\"",
				  sf_engine_kind(e), req->op);
	return e->ops->state_op(e->impl, req, cb, cb_arg, result, cap, &st->len, err);
}

/* ---- timing ---- */

double sf_engine_prefill_ms(struct sf_engine *e, size_t n_tokens)
{
	return e->ops->prefill_ms ? e->ops->prefill_ms(e->impl, n_tokens) : 0;
}

double sf_engine_decode_ms(struct sf_engine *e, size_t batch)
{
	return e->ops->decode_ms ? e->ops->decode_ms(e->impl, batch) : 0;
}
