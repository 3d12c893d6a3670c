/* The sampler: parameters and their checks, its scratch, and the order of operations that
 * include/superfluid/sampler.h states (steps 1-3 in sampler_logits.c, the cuts in
 * sampler_select.c, the arithmetic and the draw in sampler_math.c). */
#include "sampler_internal.h"

#include <math.h>
#include <stdlib.h>

void sf_sampler_params_default(struct sf_sampler_params *p)
{
	*p = (struct sf_sampler_params){
		.temperature = 1.0f,
		.top_p = 1.0f,
		.repetition_penalty = 1.0f,
	};
}

void sf_sampler_params_from_wire(struct sf_sampler_params *p, const struct sf_sampling *s)
{
	sf_sampler_params_default(p);
	p->temperature = s->temperature;
	p->top_k = s->top_k;
	p->top_p = s->top_p == 0.0f ? 1.0f : s->top_p;
	p->seed = s->seed;
	p->min_p = s->min_p;
	p->presence_penalty = s->presence_penalty;
	p->frequency_penalty = s->frequency_penalty;
	p->repetition_penalty = s->repetition_penalty == 0.0f ? 1.0f : s->repetition_penalty;
	p->repeat_last_n = s->repeat_last_n;
	p->logit_bias = s->logit_bias;
	p->n_logit_bias = s->n_logit_bias;
}

bool sf_sampling_bans_eog(const struct sf_sampling *s, size_t n_gen)
{
	return s->ignore_eos || n_gen < s->min_tokens;
}

static int check_penalty(const char *name, float v, struct sf_err *err)
{
	if (!(fabsf(v) <= SF_SAMPLER_MAX_PENALTY))
		return sf_err_set(err, SF_E_RANGE, "sampler: %s %g is outside [-%g, %g]", name, v,
				  SF_SAMPLER_MAX_PENALTY, SF_SAMPLER_MAX_PENALTY);
	return 0;
}

static int check_unit(const char *name, float v, struct sf_err *err)
{
	if (!(v >= 0.0f && v <= 1.0f))
		return sf_err_set(err, SF_E_RANGE, "sampler: %s %g is outside [0, 1]", name, v);
	return 0;
}

static int check_bias(const struct sf_sampler_params *p, uint32_t n_vocab, struct sf_err *err)
{
	if (p->n_logit_bias > SF_SAMPLER_MAX_BIAS)
		return sf_err_set(err, SF_E_RANGE, "sampler: logit_bias has %zu pairs, over %d",
				  p->n_logit_bias, SF_SAMPLER_MAX_BIAS);
	if (p->n_logit_bias && !p->logit_bias)
		return sf_err_set(err, SF_E_RANGE, "sampler: logit_bias is NULL with %zu pairs",
				  p->n_logit_bias);
	for (size_t i = 0; i < p->n_logit_bias; i++) {
		const struct sf_logit_bias *b = &p->logit_bias[i];
		if (b->token >= n_vocab)
			return sf_err_set(err, SF_E_RANGE,
					  "sampler: logit_bias[%zu].token %u is past the vocabulary "
					  "of %u tokens",
					  i, b->token, n_vocab);
		if (!(fabsf(b->bias) <= 100.0f))
			return sf_err_set(err, SF_E_RANGE,
					  "sampler: logit_bias[%zu].bias %g is outside [-100, 100]", i,
					  b->bias);
	}
	return 0;
}

int sf_sampler_check(const struct sf_sampler_params *p, uint32_t n_vocab, struct sf_err *err)
{
	if (!(p->temperature >= 0.0f) || isinf(p->temperature))
		return sf_err_set(err, SF_E_RANGE,
				  "sampler: temperature %g is not a finite number >= 0",
				  p->temperature);
	if (p->top_k > SF_MAX_VOCAB)
		return sf_err_set(err, SF_E_RANGE, "sampler: top_k %u is over %u", p->top_k,
				  SF_MAX_VOCAB);
	int rc = check_unit("top_p", p->top_p, err);
	if (!rc)
		rc = check_unit("min_p", p->min_p, err);
	if (!rc)
		rc = check_penalty("presence_penalty", p->presence_penalty, err);
	if (!rc)
		rc = check_penalty("frequency_penalty", p->frequency_penalty, err);
	if (!rc && !(p->repetition_penalty > 0.0f &&
		     p->repetition_penalty <= SF_SAMPLER_MAX_REPETITION))
		rc = sf_err_set(err, SF_E_RANGE, "sampler: repetition_penalty %g is outside (0, %g]",
				p->repetition_penalty, SF_SAMPLER_MAX_REPETITION);
	if (!rc)
		rc = check_bias(p, n_vocab, err);
	return rc;
}

int sf_sampler_new(uint32_t capacity, struct sf_sampler **out, struct sf_err *err)
{
	*out = NULL;
	if (!capacity || capacity > SF_MAX_VOCAB)
		return sf_err_set(err, SF_E_RANGE, "sampler: capacity %u is outside 1..%u", capacity,
				  SF_MAX_VOCAB);
	struct sf_sampler *s = calloc(1, sizeof(*s));
	/* One block: w, pm, cnt, set, tmp[0], tmp[1]; cnt must start zeroed. */
	void *mem = calloc(6, (size_t)capacity * 4);
	if (!s || !mem) {
		free(s);
		free(mem);
		return sf_err_set(err, SF_E_NOMEM, "sampler: no memory for %u tokens", capacity);
	}
	s->cap = capacity;
	s->avx2 = __builtin_cpu_supports("avx2");
	s->w = mem;
	s->pm = s->w + capacity;
	s->cnt = (uint32_t *)(s->pm + capacity);
	s->set = s->cnt + capacity;
	s->tmp[0] = s->set + capacity;
	s->tmp[1] = s->tmp[0] + capacity;
	*out = s;
	return 0;
}

void sf_sampler_free(struct sf_sampler *s)
{
	if (!s)
		return;
	free(s->w);
	free(s);
}

/* What steps 1-6 leave: the candidates (all tokens, the top_k set or the top_p prefix), the
 * top_p cut in them and the min_p floor on s->pm (exp(w - max) over them). */
struct plan {
	float max;
	uint32_t argmax;
	uint32_t n_finite;
	bool greedy;
	struct sf__cands c;
	struct sf__cut cut;
	bool check_cut; /* top_p: inside cut (unless c is already the prefix) */
	bool check_pm;  /* min_p: s->pm at least min_pm */
	float min_pm;
	double z;   /* the sum of exp(w - max) over c before the top_p cut */
	bool z_all; /* c was every token: z is the softmax's denominator */
};

/* Step 5. Most cuts fall among the first few candidates: over the whole row the first 256 are
 * tried in order before the radix selection. */
static void cut_top_p(struct sf_sampler *s, struct plan *pl, float top_p)
{
	double target = (double)top_p * pl->z;
	uint32_t few = 256;
	if (!pl->c.ids && few < pl->n_finite) {
		sf__top_few(s, pl->c.n, few);
		uint32_t *order = s->tmp[0];
		memcpy(order, s->set, few * sizeof(order[0]));
		sf__sort_order(s->w, order, few);
		double cum = 0;
		for (uint32_t i = 0; i < few; i++) {
			cum += s->pm[order[i]];
			if (cum >= target) {
				struct sf__cut cut = { sf__key(s->w[order[i]]), order[i] };
				struct sf__cands c = { s->set, few };
				pl->c = (struct sf__cands){ s->set, sf__collect(s, c, cut, s->set) };
				return;
			}
		}
	}
	pl->cut = sf__select_mass(s, pl->c, target);
	pl->check_cut = true;
}

static int plan(struct sf_sampler *s, const struct sf_sampler_params *p,
		const struct sf_sampler_input *in, struct plan *pl, struct sf_err *err)
{
	int rc = sf_sampler_check(p, in->n_vocab, err);
	if (!rc)
		rc = sf__sampler_check_input(s, p, in, err);
	if (rc)
		return rc;
	pl->max = sf__sampler_logits(s, p, in, &pl->argmax, &pl->n_finite);
	if (!pl->n_finite)
		return sf_err_set(err, SF_E_RANGE,
				  "sampler: logits: no token is left to draw (every logit is NaN "
				  "or -inf after penalties and logit_bias)");
	pl->greedy = p->temperature == 0.0f;
	pl->c = (struct sf__cands){ NULL, in->n_vocab };
	pl->cut = SF__CUT_ALL;
	pl->check_cut = false;
	pl->check_pm = false;
	pl->min_pm = 0;
	pl->z = 0;
	pl->z_all = false;
	if (pl->greedy)
		return 0;
	uint32_t k = p->top_k;
	if (k && k < pl->n_finite && k <= SF__TOP_FEW_MAX) {
		sf__top_few(s, in->n_vocab, k);
		pl->c = (struct sf__cands){ s->set, k };
	} else if (k && k < pl->n_finite) {
		struct sf__cut cut = sf__select_count(s, pl->c, k);
		pl->c = (struct sf__cands){ s->set, sf__collect(s, pl->c, cut, s->set) };
	}
	/* exp(w - max) is needed by top_p and min_p only. */
	pl->check_pm = p->min_p > 0;
	pl->min_pm = p->min_p;
	if (p->top_p < 1.0f || pl->check_pm) {
		pl->z = sf__exp_pass(s, pl->c, pl->max);
		pl->z_all = !pl->c.ids;
	}
	if (p->top_p < 1.0f)
		cut_top_p(s, pl, p->top_p);
	return 0;
}

static void fill_logprobs(struct sf_sampler *s, const struct plan *pl, uint32_t n_vocab,
			  uint32_t token, struct sf_engine_logprob *lp, uint32_t n_top)
{
	const struct sf__cands all = { NULL, n_vocab };
	/* The draw has overwritten s->pm: the sum is computed again unless plan had it. */
	double z = pl->z_all ? pl->z : sf__exp_pass(s, all, pl->max);
	double base = (double)pl->max + sf__log(z);
	lp->token = token;
	lp->logprob = (float)((double)s->w[token] - base);
	uint32_t n = n_top < pl->n_finite ? n_top : pl->n_finite;
	lp->n_top = n;
	if (!n)
		return;
	/* The candidates are a prefix of the order: when they hold n, their first n are. */
	uint32_t *ids = s->tmp[0];
	if (pl->c.ids && pl->c.n >= n) {
		sf__collect(s, pl->c, sf__select_count(s, pl->c, n), ids);
	} else if (n < pl->n_finite) {
		sf__top_few(s, n_vocab, n);
		ids = s->set;
	} else {
		sf__collect(s, all, SF__CUT_ALL, ids);
	}
	sf__sort_order(s->w, ids, n);
	for (uint32_t i = 0; i < n; i++) {
		lp->top[i].token = ids[i];
		lp->top[i].logprob = (float)((double)s->w[ids[i]] - base);
	}
}

int sf_sampler_sample(struct sf_sampler *s, const struct sf_sampler_params *p,
		      const struct sf_sampler_input *in, struct sf_sampler_result *res,
		      struct sf_engine_logprob *lp, uint32_t n_top, struct sf_err *err)
{
	if (lp && n_top > SF_MAX_TOP_LOGPROBS)
		return sf_err_set(err, SF_E_RANGE, "sampler: n_top %u is over %d", n_top,
				  SF_MAX_TOP_LOGPROBS);
	struct plan pl;
	int rc = plan(s, p, in, &pl, err);
	if (rc)
		return rc;
	if (pl.greedy) {
		res->token = pl.argmax;
		res->n_candidates = 1;
	} else {
		/* Step 7. At temperature 1 with s->pm computed, the weights are s->pm. */
		const struct sf__weigh h = {
			.cut = pl.cut,
			.check_cut = pl.check_cut,
			.min_pm = pl.min_pm,
			.check_pm = pl.check_pm,
			.from_pm = p->temperature == 1.0f && (pl.check_pm || p->top_p < 1.0f),
			.max = pl.max,
			.temperature = p->temperature,
		};
		double z = sf__weigh(s, pl.c, &h, &res->n_candidates);
		if (!pl.check_pm && !h.check_cut && !pl.c.ids && p->temperature == 1.0f) {
			pl.z = z; /* the weights were exp(w - max) over every token */
			pl.z_all = true;
		}
		res->token = sf__walk(s, pl.c, z, sf_sampler_uniform(p->seed, in->position));
	}
	if (lp)
		fill_logprobs(s, &pl, in->n_vocab, res->token, lp, n_top);
	return 0;
}

int sf_sampler_candidates(struct sf_sampler *s, const struct sf_sampler_params *p,
			  const struct sf_sampler_input *in, uint32_t *out, size_t cap, size_t *n,
			  struct sf_err *err)
{
	struct plan pl;
	*n = 0;
	int rc = plan(s, p, in, &pl, err);
	if (rc)
		return rc;
	uint32_t *ids = s->tmp[0], m = 0;
	if (pl.greedy) {
		ids[m++] = pl.argmax;
	} else {
		for (uint32_t j = 0; j < pl.c.n; j++) {
			uint32_t id = sf__cand_id(pl.c, j);
			float x = s->w[id];
			if (x != -INFINITY && sf__in_prefix(sf__key(x), id, pl.cut) &&
			    (!pl.check_pm || s->pm[id] >= pl.min_pm))
				ids[m++] = id;
		}
	}
	*n = m;
	if (m > cap)
		return sf_err_set(err, SF_E_LIMIT, "sampler: %u candidates, room for %zu", m, cap);
	sf__sort_order(s->w, ids, m);
	memcpy(out, ids, m * sizeof(ids[0]));
	return 0;
}
