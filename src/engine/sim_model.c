/* The simulated model: context summary, embedding, layers, pseudo-logits, sampling. */
#include "sim_internal.h"

#include <superfluid/sampler.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The hidden state must come out bit for bit the same on every node, whatever the compiler
 * flags: no fused multiply-adds (aarch64 and -mfma builds would otherwise fuse). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define GOLDEN 0x9e3779b97f4a7c15ull
#define HASH0 0x243f6a8885a308d3ull
#define WGAIN 3.0f   /* layer gain: above 1, so contexts stay apart through the stack */
#define NOISE 2.0f   /* weight of the hidden state's projection against the prior */
#define GRAMMAR_FLOOR (-30.0f) /* under a grammar, the logit of a token the model never offers */
#define PRIOR_W 0.75 /* weight of the letter prior (log frequency) */
#define EOS_BASE -17.0
#define EOS_SLOPE 2.2
#define REPEAT_SPACE -5.0f

uint64_t sim_mix64(uint64_t x)
{
	x += GOLDEN;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* A float in [-1, 1) with 24 significant bits, exact in float. */
static float unit(uint64_t x)
{
	return (float)((int32_t)(x >> 40) - (1 << 23)) / (float)(1 << 23);
}

static uint32_t cand_token(int c)
{
	if (c == 0)
		return '\n';
	if (c == SIM_NCAND - 1)
		return SF_SIM_EOS;
	return (uint32_t)(0x20 + c - 1);
}

/* English-like frequencies per 10,000 characters. */
static double byte_freq(uint32_t b)
{
	static const double lower[26] = {
		660, 120, 230, 350, 1000, 180, 160, 490, 570, 10, 60, 330, 200,
		560, 610, 150, 8, 490, 510, 740, 230, 80, 190, 12, 160, 6,
	};
	if (b >= 'a' && b <= 'z')
		return lower[b - 'a'];
	if (b >= 'A' && b <= 'Z')
		return lower[b - 'A'] / 12;
	if (b >= '0' && b <= '9')
		return 8;
	switch (b) {
	case ' ': return 1800;
	case ',': case '.': return 90;
	case '\n': return 40;
	case '\'': return 20;
	case '-': return 15;
	case '"': return 10;
	case '?': return 8;
	case '!': case ':': return 6;
	case ';': case '(': case ')': return 4;
	}
	return 1;
}

int sim_model_init(struct sim_model *m, const struct sf_sim_config *cfg, struct sf_err *err)
{
	uint32_t n = cfg->hidden, l = cfg->n_layers;
	memset(m, 0, sizeof(*m));
	m->seed = cfg->seed;
	m->n_layers = l;
	m->hidden = n;
	m->check = (uint32_t)sim_mix64(cfg->seed ^ ((uint64_t)l << 32 | n) ^ 0x5346483100000000ull);
	m->w = malloc(sizeof(float) * l * n * n);
	m->b = malloc(sizeof(float) * l * n);
	m->proj = malloc(sizeof(float) * SIM_NCAND * n);
	if (!m->w || !m->b || !m->proj) {
		sim_model_fini(m);
		return sf_err_set(err, SF_E_NOMEM, "no memory for the sim model's weights");
	}
	/* Scales that keep tanh out of saturation and the projection near unit variance. */
	float ws = WGAIN / sqrtf((float)n), ps = sqrtf(3.0f / (float)n);
	uint64_t x = sim_mix64(cfg->seed ^ 0x57);
	for (size_t i = 0; i < (size_t)l * n * n; i++)
		m->w[i] = unit(x = sim_mix64(x)) * ws;
	for (size_t i = 0; i < (size_t)l * n; i++)
		m->b[i] = unit(x = sim_mix64(x)) * 0.5f;
	for (size_t i = 0; i < (size_t)SIM_NCAND * n; i++)
		m->proj[i] = unit(x = sim_mix64(x)) * ps;
	for (int c = 0; c < SIM_NCAND - 1; c++)
		m->prior[c] = (float)(PRIOR_W * log(byte_freq(cand_token(c)) / 10000.0));
	m->prior[SIM_NCAND - 1] = 0; /* eos: by run, in sim_pick */
	return 0;
}

void sim_model_fini(struct sim_model *m)
{
	free(m->w);
	free(m->b);
	free(m->proj);
	m->w = m->b = m->proj = NULL;
}

void sim_state_init(struct sim_state *st)
{
	st->hash = HASH0;
	st->run = 0;
	st->last = SIM_NO_TOKEN;
}

void sim_state_push(struct sim_state *st, uint32_t token)
{
	st->hash = sim_mix64(st->hash ^ ((uint64_t)token + 1) * GOLDEN);
	st->run = token >= 256 ? 0 : st->run + 1;
	st->last = token;
}

void sim_embed(const struct sim_model *m, const struct sim_state *st, float *h)
{
	uint64_t base = st->hash ^ sim_mix64(m->seed);
	for (uint32_t j = 0; j < m->hidden; j++)
		h[j] = unit(sim_mix64(base + j * GOLDEN));
}

/* tanh as a Pade approximant, exact 1 at |x| = 3: plain IEEE operations, no libm. */
static float squash(float x)
{
	if (x >= 3.0f)
		return 1.0f;
	if (x <= -3.0f)
		return -1.0f;
	float x2 = x * x;
	return x * (27.0f + x2) / (27.0f + 9.0f * x2);
}

/* One copy of the float arithmetic, so a pipeline and the decode step run the same code. */
__attribute__((noinline)) void sim_layers(const struct sim_model *m, float *h, uint32_t start,
					  uint32_t end)
{
	float t[SF_SIM_MAX_HIDDEN];
	uint32_t n = m->hidden;
	for (uint32_t l = start; l < end; l++) {
		const float *w = m->w + (size_t)l * n * n, *b = m->b + (size_t)l * n;
		for (uint32_t i = 0; i < n; i++) {
			float acc = b[i];
			for (uint32_t j = 0; j < n; j++)
				acc += w[(size_t)i * n + j] * h[j];
			t[i] = squash(acc);
		}
		memcpy(h, t, sizeof(float) * n);
	}
}

__attribute__((noinline)) static void logits_of(const struct sim_model *m, const float *h,
						uint32_t run, uint32_t last, float *lg)
{
	uint32_t n = m->hidden;
	for (int c = 0; c < SIM_NCAND; c++) {
		const float *p = m->proj + (size_t)c * n;
		float z = 0;
		for (uint32_t j = 0; j < n; j++)
			z += p[j] * h[j];
		lg[c] = m->prior[c] + NOISE * z;
	}
	lg[SIM_NCAND - 1] += (float)(EOS_BASE + EOS_SLOPE * log2(1.0 + run));
	if (last == ' ' || last == '\n') {
		lg[0] += REPEAT_SPACE;
		lg[1] += REPEAT_SPACE;
	}
}

/* The candidates' logits as a row of the whole vocabulary (every other token at -inf), drawn
 * from by the sampler every engine uses (superfluid/sampler.h): its random number comes from
 * (seed, position), its logprobs are the log-softmax of the candidates' logits. */
uint32_t sim_pick(const struct sim_model *m, struct sf_sampler *smp, const float *h,
		  uint32_t run, uint32_t last, const struct sf_sampling *s, const uint32_t *ctx,
		  size_t n_ctx, size_t n_gen, struct sf_engine_logprob *lp, uint32_t n_top,
		  const uint64_t *allow)
{
	float lg[SIM_NCAND], row[SF_SIM_VOCAB];
	logits_of(m, h, run, last, lg);
	for (int t = 0; t < SF_SIM_VOCAB; t++)
		row[t] = allow ? GRAMMAR_FLOOR : -INFINITY;
	for (int c = 0; c < SIM_NCAND; c++)
		row[cand_token(c)] = lg[c];
	bool only_end = allow && allow[SF_SIM_EOS / 64] >> (SF_SIM_EOS % 64) & 1;
	for (int t = 0; only_end && t < SF_SIM_VOCAB; t++)
		if (t != SF_SIM_EOS && (allow[t / 64] >> (t % 64) & 1))
			only_end = false;
	if (s && sf_sampling_bans_eog(s, n_gen) && !only_end)
		row[SF_SIM_EOS] = -INFINITY; /* ignore_eos, min_tokens (not past a grammar's end) */
	struct sf_sampler_params p;
	if (s)
		sf_sampler_params_from_wire(&p, s);
	else
		sf_sampler_params_default(&p);
	if (!s || s->temperature < 1e-5f)
		p.temperature = 0; /* greedy, as the simulated engine has always taken it */
	p.allow = allow;
	struct sf_sampler_input in = { .logits = row, .n_vocab = SF_SIM_VOCAB,
				       .context = ctx, .n_context = ctx ? n_ctx : 0,
				       .n_generated = ctx ? n_gen : 0, .position = n_ctx };
	struct sf_sampler_result res;
	struct sf_err err;
	if (sf_sampler_sample(smp, &p, &in, &res, lp, lp ? n_top : 0, &err))
		return cand_token(0); /* the row always has finite logits: not reached */
	return res.token;
}

uint32_t sim_next(const struct sim_model *m, struct sf_sampler *smp, const struct sim_state *st,
		  const struct sf_sampling *s, const uint32_t *ctx, size_t n_ctx, size_t n_gen,
		  struct sf_engine_logprob *lp, uint32_t n_top, const uint64_t *allow)
{
	float h[SF_SIM_MAX_HIDDEN];
	sim_embed(m, st, h);
	sim_layers(m, h, 0, m->n_layers);
	return sim_pick(m, smp, h, st->run, st->last, s, ctx, n_ctx, n_gen, lp, n_top, allow);
}

/* ---- the hidden blob between stages ---- */

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t sim_stage_bytes(const struct sim_model *m)
{
	return SF_SIM_STAGE_HDR + 4 * (size_t)m->hidden;
}

void sim_hidden_pack(const struct sim_model *m, const float *h, uint32_t layer,
		     uint32_t run, uint32_t last, uint32_t pos, uint8_t *out)
{
	put32(out, m->hidden);
	put32(out + 4, layer);
	put32(out + 8, run);
	put32(out + 12, last);
	put32(out + 16, m->check);
	put32(out + 20, pos);
	for (uint32_t j = 0; j < m->hidden; j++) {
		uint32_t bits;
		memcpy(&bits, &h[j], 4);
		put32(out + SF_SIM_STAGE_HDR + 4 * j, bits);
	}
}

int sim_hidden_unpack(const struct sim_model *m, const uint8_t *in, size_t len,
		      uint32_t layer, float *h, uint32_t *run, uint32_t *last, uint32_t *pos,
		      struct sf_err *err)
{
	if (len != sim_stage_bytes(m) || get32(in) != m->hidden)
		return sf_err_set(err, SF_E_RANGE, "hidden state of %zu bytes, not %zu (width %u)",
				  len, sim_stage_bytes(m), m->hidden);
	if (get32(in + 16) != m->check)
		return sf_err_set(err, SF_E_RANGE,
				  "hidden state from another model (check %08x, this one %08x)",
				  get32(in + 16), m->check);
	if (get32(in + 4) != layer)
		return sf_err_set(err, SF_E_RANGE, "hidden state for layer %u given to layer %u",
				  get32(in + 4), layer);
	*run = get32(in + 8);
	*last = get32(in + 12);
	*pos = get32(in + 20);
	for (uint32_t j = 0; j < m->hidden; j++) {
		uint32_t bits = get32(in + SF_SIM_STAGE_HDR + 4 * j);
		memcpy(&h[j], &bits, 4);
		if (!isfinite(h[j]))
			return sf_err_set(err, SF_E_RANGE, "hidden state value %u is not finite", j);
	}
	return 0;
}

/* ---- the expected stream ---- */

int sf_sim_expected(const struct sf_sim_config *cfg, const struct sf_sampling *s,
		    const uint32_t *ctx, size_t n_ctx, uint32_t max_new_tokens, uint32_t *out,
		    size_t cap, size_t *n_out, uint32_t *finish_reason, struct sf_err *err)
{
	struct sf_sim_config c;
	struct sim_model m;
	struct sim_state st;
	*n_out = 0;
	*finish_reason = SF_FINISH_LENGTH;
	int rc = sim_config_resolve(cfg, &c, err);
	if (rc)
		return rc;
	if (s && (!(s->temperature >= 0) || isinf(s->temperature) ||
		  !(s->top_p >= 0 && s->top_p <= 1)))
		return sf_err_set(err, SF_E_RANGE, "sampling out of range");
	if (n_ctx > c.ctx_len)
		return sf_err_set(err, SF_E_LIMIT, "context of %zu tokens, over the context length %u",
				  n_ctx, c.ctx_len);
	sim_state_init(&st);
	for (size_t i = 0; i < n_ctx; i++) {
		if (ctx[i] >= SF_SIM_VOCAB)
			return sf_err_set(err, SF_E_RANGE, "token %zu (%u) past the vocabulary", i,
					  ctx[i]);
		sim_state_push(&st, ctx[i]);
	}
	rc = sim_model_init(&m, &c, err);
	if (rc)
		return rc;
	struct sf_sampler *smp = NULL;
	uint32_t *all = malloc((n_ctx + max_new_tokens + 1) * sizeof(uint32_t));
	if (!all || (rc = sf_sampler_new(SF_SIM_VOCAB, &smp, err))) {
		free(all);
		sim_model_fini(&m);
		return all ? rc : sf_err_set(err, SF_E_NOMEM, "no memory for the expected stream");
	}
	if (n_ctx)
		memcpy(all, ctx, n_ctx * sizeof(uint32_t));
	size_t len = n_ctx, n = 0;
	for (uint32_t i = 0; i < max_new_tokens && len < c.ctx_len; i++) {
		uint32_t t;
		if (!c.scripted || !sim_script_next(all, len, n, &t))
			t = sim_next(&m, smp, &st, s, all, len, n, NULL, 0, NULL);
		if (t == SF_SIM_EOS) {
			*finish_reason = SF_FINISH_STOP;
			break;
		}
		if (n == cap) {
			rc = sf_err_set(err, SF_E_LIMIT, "expected stream over %zu tokens", cap);
			break;
		}
		out[n++] = t;
		all[len++] = t;
		sim_state_push(&st, t);
	}
	sf_sampler_free(smp);
	free(all);
	sim_model_fini(&m);
	*n_out = n;
	return rc;
}
