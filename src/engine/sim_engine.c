/* The simulated engine: config, contexts, decode step, stages, timing, its ops table. */
#include "sim_internal.h"
#include "prefix/prefix.h"

#include <superfluid/sampler.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sf_sim_config_default(struct sf_sim_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->model = "sim-1";
	cfg->n_layers = 8;
	cfg->hidden = 16;
	cfg->ctx_len = 32768;
	cfg->batch_size = 8;
	cfg->ctx_bytes_per_token = 2ull * cfg->n_layers * cfg->hidden * sizeof(float);
}

int sim_config_resolve(const struct sf_sim_config *in, struct sf_sim_config *out,
		       struct sf_err *err)
{
	struct sf_sim_config d;
	sf_sim_config_default(&d);
	*out = *in;
	if (!out->model || !out->model[0])
		out->model = d.model;
	if (!out->n_layers)
		out->n_layers = d.n_layers;
	if (!out->hidden)
		out->hidden = d.hidden;
	if (!out->ctx_len)
		out->ctx_len = d.ctx_len;
	if (!out->batch_size)
		out->batch_size = d.batch_size;
	if (!out->ctx_bytes_per_token)
		out->ctx_bytes_per_token = 2ull * out->n_layers * out->hidden * sizeof(float);
	if (strlen(out->model) >= SF_MAX_NAME)
		return sf_err_set(err, SF_E_RANGE, "sim model name over %d bytes", SF_MAX_NAME - 1);
	if (out->n_layers > SF_SIM_MAX_LAYERS || out->hidden > SF_SIM_MAX_HIDDEN ||
	    out->ctx_len > SF_SIM_MAX_CTX || out->batch_size > SF_SIM_MAX_BATCH)
		return sf_err_set(err, SF_E_RANGE,
				  "sim shape past its limits (layers <= %d, hidden <= %d, "
				  "ctx_len <= %u, batch <= %d)",
				  SF_SIM_MAX_LAYERS, SF_SIM_MAX_HIDDEN, SF_SIM_MAX_CTX,
				  SF_SIM_MAX_BATCH);
	if (out->chat_template && strlen(out->chat_template) > SF_MAX_TEXT)
		return sf_err_set(err, SF_E_RANGE, "sim chat template over %u bytes", SF_MAX_TEXT);
	if (!(out->decode_steps_per_s >= 0) || !(out->prefill_us_per_token >= 0) ||
	    isinf(out->decode_steps_per_s) || isinf(out->prefill_us_per_token))
		return sf_err_set(err, SF_E_RANGE, "sim speeds must be finite and >= 0");
	return 0;
}

/* What a token is to a grammar: bytes are text, <|eos|> ends, the tool-call and think
 * markers are text (as a model's user-defined tokens are), the other specials never. */
static int sim_gtok(void *arg, uint32_t t, const uint8_t **bytes, size_t *len)
{
	struct sim *sim = arg;
	static const char *const text[] = {
		[SF_SIM_TOOL_CALL - 256] = "<|tool_call|>", [SF_SIM_TOOL_CALL_END - 256] = "<|/tool_call|>",
		[SF_SIM_THINK - 256] = "<|think|>", [SF_SIM_THINK_END - 256] = "<|/think|>",
	};
	*bytes = NULL;
	*len = 0;
	if (t < 256) {
		*bytes = &sim->bytes[t];
		*len = 1;
		return SF_GTOK_TEXT;
	}
	if (t == SF_SIM_EOS)
		return SF_GTOK_END;
	if (t - 256 < sizeof(text) / sizeof(text[0]) && text[t - 256]) {
		*bytes = (const uint8_t *)text[t - 256];
		*len = strlen(text[t - 256]);
		return SF_GTOK_TEXT;
	}
	return SF_GTOK_NEVER;
}

static void sim_destroy(void *impl)
{
	struct sim *sim = impl;
	sim_model_fini(&sim->m);
	sf_sampler_free(sim->sampler);
	sf_grammar_host_free(sim->grammar);
	sf_prefix_cache_free(sim->pc);
	free(sim->chat_template);
	free(sim);
}

static void sim_info(void *impl, struct sf_engine_info *info)
{
	struct sim *sim = impl;
	memset(info, 0, sizeof(*info));
	snprintf(info->model, sizeof(info->model), "%s", sim->model);
	info->vocab_size = SF_SIM_VOCAB;
	info->n_layers = sim->cfg.n_layers;
	info->hidden = sim->cfg.hidden;
	info->stage_bytes = (uint32_t)sim_stage_bytes(&sim->m);
	info->ctx_len = sim->cfg.ctx_len;
	info->batch_size = sim->cfg.batch_size;
	info->ctx_bytes_per_token = sim->cfg.ctx_bytes_per_token;
	info->ctx_mem_total = sim->cfg.ctx_mem_total;
	/* Its tokenizer adds no BOS (<|bos|> is an ordinary special): the head puts none before
	 * a completions prompt, as the tests' references (sim_expect) have none. */
	info->has_bos = false;
	info->bos = 0;
	info->eos = SF_SIM_EOS;
	info->encodes_plain = true;
	info->encodes_pieces = true;
}

/* ---- contexts ---- */

/* Takes memory for n more tokens, evicting cached pages no context holds while that makes
 * room. */
static int mem_take(struct sim *sim, size_t n, struct sf_err *err)
{
	uint64_t need = (uint64_t)n * sim->cfg.ctx_bytes_per_token, total = sim->cfg.ctx_mem_total;
	bool fits = !total;
	while (!fits && !(fits = need + sim_share_idle(sim) <= total - sim->mem_used) &&
	       sim_share_evict(sim))
		;
	if (!fits)
		return sf_err_set(err, SF_E_NOMEM,
				  "context memory full: %llu of %llu bytes used, %zu more tokens "
				  "need %llu",
				  (unsigned long long)sim->mem_used,
				  (unsigned long long)sim->cfg.ctx_mem_total, n,
				  (unsigned long long)need);
	sim->mem_used += need;
	return 0;
}

static void mem_give(struct sim *sim, size_t n)
{
	sim->mem_used -= (uint64_t)n * sim->cfg.ctx_bytes_per_token;
}

static int grow(struct sim *sim, struct sim_ctx *c, size_t want, struct sf_err *err)
{
	if (want <= c->cap)
		return 0;
	size_t cap = c->cap ? c->cap : 256;
	while (cap < want)
		cap *= 2;
	if (cap > sim->cfg.ctx_len)
		cap = sim->cfg.ctx_len;
	uint32_t *t = realloc(c->tokens, cap * sizeof(*t));
	if (!t)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a context of %zu tokens", want);
	c->tokens = t;
	c->cap = (uint32_t)cap;
	return 0;
}

static int sim_ctx_new(void *impl, const struct sf_sampling *s, struct sf_engine_ctx **out,
		       struct sf_err *err)
{
	size_t gl = s->grammar ? s->grammar_len : 0;
	struct sim_ctx *c = calloc(1, sizeof(*c) + gl + 1);
	if (!c)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a context");
	sim_state_init(&c->st);
	c->s = *s;
	c->s.grammar = gl ? (char *)(c + 1) : NULL;
	c->s.grammar_len = (uint32_t)gl;
	if (gl)
		memcpy(c->s.grammar, s->grammar, gl);
	*out = (struct sf_engine_ctx *)c;
	return 0;
}

static void sim_ctx_free(void *impl, struct sf_engine_ctx *ctx)
{
	struct sim_ctx *c = sim_ctx(ctx);
	mem_give(impl, c->len);
	sim_share_ctx_free(impl, c);
	sf_gmatch_free(c->gm);
	free(c->tokens);
	free(c);
}

static int sim_prefill(void *impl, struct sf_engine_ctx *ctx, const uint32_t *tokens, size_t n,
		       struct sf_err *err)
{
	struct sim *sim = impl;
	struct sim_ctx *c = sim_ctx(ctx);
	int rc = grow(sim, c, c->len + n, err);
	if (!rc)
		rc = mem_take(sim, n, err);
	if (rc)
		return rc;
	uint32_t from = c->len;
	for (size_t i = 0; i < n; i++) {
		c->tokens[c->len++] = tokens[i];
		sim_state_push(&c->st, tokens[i]);
	}
	c->n_gen = 0;
	c->reused = sim_share_adopt(sim, c, from, c->len);
	sim_share_publish(sim, c);
	return 0;
}

static void sim_ctx_share(void *impl, struct sf_engine_ctx *ctx, uint64_t ns)
{
	sim_share_set(impl, sim_ctx(ctx), ns);
}

static uint32_t sim_ctx_reused(void *impl, const struct sf_engine_ctx *ctx)
{
	return sim_cctx(ctx)->reused;
}

static struct sf_prefix_cache *sim_prefix_cache(void *impl)
{
	return ((struct sim *)impl)->pc;
}

static size_t sim_ctx_len(void *impl, const struct sf_engine_ctx *ctx)
{
	return sim_cctx(ctx)->len;
}

static int sim_ctx_truncate(void *impl, struct sf_engine_ctx *ctx, size_t n, struct sf_err *err)
{
	struct sim_ctx *c = sim_ctx(ctx);
	mem_give(impl, c->len - n);
	c->len = (uint32_t)n;
	sim_share_truncate(impl, c, c->len);
	if (c->n_gen > c->len)
		c->n_gen = c->len;
	sim_state_init(&c->st);
	for (size_t i = 0; i < n; i++)
		sim_state_push(&c->st, c->tokens[i]);
	return 0;
}

static uint64_t sim_mem_used(void *impl)
{
	return ((struct sim *)impl)->mem_used;
}

/* ---- generation ---- */

static int sim_decode(void *impl, struct sf_engine_step *steps, size_t n, struct sf_err *err)
{
	struct sim *sim = impl;
	for (size_t i = 0; i < n; i++) {
		struct sf_engine_step *st = &steps[i];
		struct sim_ctx *c = sim_ctx(st->ctx);
		bool lp = st->logprobs || st->top_logprobs;
		if (c->len >= sim->cfg.ctx_len) {
			st->rc = sf_err_set(err, SF_E_LIMIT, "context full at %u tokens", c->len);
			continue;
		}
		st->rc = grow(sim, c, c->len + 1, err);
		if (!st->rc)
			st->rc = mem_take(sim, 1, err);
		if (st->rc)
			continue;
		if (sim->cfg.scripted && sim_script_next(c->tokens, c->len, c->n_gen, &st->token)) {
			if (lp)
				st->lp = (struct sf_engine_logprob){
					.token = st->token, .n_top = st->top_logprobs ? 1 : 0,
					.top = { { .token = st->token } } };
		} else {
			const uint64_t *allow = NULL;
			if (c->s.grammar_len) {
				uint32_t gen = st->generated < c->len ? st->generated : c->len;
				if ((st->rc = sf_grammar_host_mask(sim->grammar, &c->gm, c->s.grammar,
								   c->s.grammar_len,
								   c->tokens + c->len - gen, gen,
								   &allow, err))) {
					mem_give(sim, 1);
					continue;
				}
			}
			st->token = sim_next(&sim->m, sim->sampler, &c->st, &c->s, c->tokens, c->len,
					     c->n_gen, lp ? &st->lp : NULL, st->top_logprobs, allow);
		}
		c->tokens[c->len++] = st->token;
		c->n_gen++;
		sim_state_push(&c->st, st->token);
		sim_share_publish(sim, c);
	}
	return 0;
}

static int sim_stage_forward(void *impl, const struct sf_engine_stage_in *in,
			     uint8_t *hidden_out, size_t cap, struct sf_engine_stage_out *out,
			     struct sf_err *err)
{
	struct sim *sim = impl;
	float h[SF_SIM_MAX_HIDDEN];
	uint32_t run, last, pos;
	struct sim_ctx *c = in->ctx ? sim_ctx(in->ctx) : NULL;
	if (c) {
		/* The stage keeps the context's ids (and, the first, its state): the new
		 * positions are appended, the hidden state is the last one's. */
		uint32_t base = c->len;
		int rc = sim_prefill(impl, in->ctx, in->tokens, in->n_tokens, err);
		if (!rc && in->start_layer == 0) {
			sim_embed(&sim->m, &c->st, h);
			run = c->st.run;
			last = c->st.last;
			pos = c->len;
		} else if (!rc) {
			rc = sim_hidden_unpack(&sim->m, in->hidden, in->hidden_len, in->start_layer, h,
					       &run, &last, &pos, err);
			if (!rc && pos != c->len)
				rc = sf_err_set(err, SF_E_RANGE, "hidden state of position %u for a "
						"stage at %u", pos, c->len);
		}
		if (rc) {
			if (c->len > base)
				(void)sim_ctx_truncate(impl, in->ctx, base, err);
			return rc;
		}
	} else if (in->start_layer == 0) {
		struct sim_state st;
		sim_state_init(&st);
		for (size_t i = 0; i < in->n_tokens; i++)
			sim_state_push(&st, in->tokens[i]);
		sim_embed(&sim->m, &st, h);
		run = st.run;
		last = st.last;
		pos = (uint32_t)in->n_tokens;
	} else {
		int rc = sim_hidden_unpack(&sim->m, in->hidden, in->hidden_len, in->start_layer, h,
					   &run, &last, &pos, err);
		if (rc)
			return rc;
	}
	sim_layers(&sim->m, h, in->start_layer, in->end_layer);
	if (in->end_layer == sim->cfg.n_layers) {
		/* The decode step's draw for this context: the same position (penalties see the
		 * context's tokens only in a stage that has them). */
		out->kind = SF_STAGE_TOKEN;
		const uint32_t *ids = c ? c->tokens : in->start_layer == 0 ? in->tokens : NULL;
		bool lp = in->logprobs || in->top_logprobs;
		out->token = sim_pick(&sim->m, sim->sampler, h, run, last, in->sampling, ids, pos,
				      c ? in->n_generated : 0, lp ? &out->lp : NULL,
				      in->top_logprobs, NULL);
		return 0;
	}
	size_t need = sim_stage_bytes(&sim->m);
	out->hidden_len = need;
	if (need > cap)
		return sf_err_set(err, SF_E_LIMIT, "hidden state of %zu bytes, over %zu", need, cap);
	sim_hidden_pack(&sim->m, h, in->end_layer, run, last, pos, hidden_out);
	out->kind = SF_STAGE_HIDDEN;
	return 0;
}

/* ---- timing ---- */

static double sim_prefill_ms(void *impl, size_t n_tokens)
{
	return (double)n_tokens * ((struct sim *)impl)->cfg.prefill_us_per_token / 1000.0;
}

static double sim_decode_ms(void *impl, size_t batch)
{
	const struct sim *sim = impl;
	if (!batch || sim->cfg.decode_steps_per_s <= 0)
		return 0;
	size_t steps = (batch + sim->cfg.batch_size - 1) / sim->cfg.batch_size;
	return (double)steps * 1000.0 / sim->cfg.decode_steps_per_s;
}

static const struct sf_engine_ops sim_ops = {
	.kind = "sim",
	.destroy = sim_destroy,
	.info = sim_info,
	.encode = sim_encode,
	.encode_pieces = sim_encode_pieces,
	.token_bytes = sim_token_bytes,
	.specials = sim_specials,
	.templates = sim_templates,
	.ctx_new = sim_ctx_new,
	.ctx_free = sim_ctx_free,
	.prefill = sim_prefill,
	.ctx_len = sim_ctx_len,
	.ctx_truncate = sim_ctx_truncate,
	.mem_used = sim_mem_used,
	.ctx_share = sim_ctx_share,
	.ctx_reused = sim_ctx_reused,
	.prefix_cache = sim_prefix_cache,
	.decode = sim_decode,
	.stage_forward = sim_stage_forward,
	.state_op_names = sim_state_op_names,
	.state_op_step = sim_state_op_step,
	.prefill_ms = sim_prefill_ms,
	.decode_ms = sim_decode_ms,
};

int sf_sim_engine_new(const struct sf_sim_config *cfg, struct sf_engine **out,
		      struct sf_err *err)
{
	*out = NULL;
	struct sim *sim = calloc(1, sizeof(*sim));
	if (!sim)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a sim engine");
	int rc = sim_config_resolve(cfg, &sim->cfg, err);
	if (!rc)
		rc = sim_model_init(&sim->m, &sim->cfg, err);
	if (!rc)
		rc = sf_sampler_new(SF_SIM_VOCAB, &sim->sampler, err);
	for (int i = 0; i < 256; i++)
		sim->bytes[i] = (uint8_t)i;
	if (!rc)
		rc = sf_grammar_host_new(SF_SIM_VOCAB, sim_gtok, sim, 16, &sim->grammar, err);
	if (!rc && sim_share_init(sim))
		rc = sf_err_set(err, SF_E_NOMEM, "no memory for a sim engine's prefix index");
	if (rc) {
		sim_destroy(sim);
		return rc;
	}
	snprintf(sim->model, sizeof(sim->model), "%s", sim->cfg.model);
	sim->cfg.model = sim->model;
	if (sim->cfg.chat_template && !(sim->chat_template = strdup(sim->cfg.chat_template))) {
		sim_destroy(sim);
		return sf_err_set(err, SF_E_NOMEM, "no memory for the sim's chat template");
	}
	sim->cfg.chat_template = sim->chat_template;
	sim_templates_init(sim);
	return sf_engine_create(&sim_ops, sim, out, err);
}
