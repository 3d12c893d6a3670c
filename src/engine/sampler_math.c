/* The sampler's arithmetic: its generator, exp and log, the probability pass and the draw.
 *
 * Every result here is the same bits on every x86-64 CPU for the same build: exp and log are
 * our own (libm may pick an FMA variant on one CPU and not on another), sums run in double in a
 * fixed order, and the vector loops do per lane exactly what the scalar ones do. */
#include "sampler_internal.h"
#include "sampler_vec.h"

#include <math.h>

#define GOLDEN 0x9e3779b97f4a7c15ull

/* SplitMix64's finalizer: a bijection on 64 bits. */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

uint64_t sf_sampler_random(uint64_t seed, uint64_t position)
{
	/* Two keyed rounds; each step is a bijection of position, so one seed never repeats. */
	uint64_t key = mix64(seed + 0x53465341u * GOLDEN); /* "SFSA" */
	return mix64(mix64(position * GOLDEN + key) ^ key);
}

double sf_sampler_uniform(uint64_t seed, uint64_t position)
{
	return (double)(sf_sampler_random(seed, position) >> 11) * 0x1p-53;
}

double sf__log(double x)
{
	uint64_t b;
	int e = 0;
	if (x < 0x1p-1022) { /* subnormal: scale into the normal range */
		x *= 0x1p54;
		e = -54;
	}
	memcpy(&b, &x, sizeof(b));
	e += (int)((b >> 52) & 0x7ff) - 1023;
	b = (b & 0x000fffffffffffffull) | 0x3ff0000000000000ull; /* m in [1, 2) */
	double m;
	memcpy(&m, &b, sizeof(m));
	if (m > 1.4142135623730951) {
		m *= 0.5;
		e++;
	}
	/* log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.172: ten odd terms */
	double s = (m - 1) / (m + 1), s2 = s * s, q = 1.0 / 21;
	for (int k = 19; k >= 1; k -= 2)
		q = q * s2 + 1.0 / k;
	return (double)e * 0.6931471805599453 + 2 * s * q;
}

/* Adds the eight lanes' float sums of a block in double, pairwise. */
static double lanes_sum(const float a[8])
{
	return (((double)a[0] + a[1]) + ((double)a[2] + a[3])) +
	       (((double)a[4] + a[5]) + ((double)a[6] + a[7]));
}

/* The weight of token id (0 for a non-member); *in says whether it is a member. */
static inline float weight_of(const struct sf_sampler *s, uint32_t id,
			      const struct sf__weigh *h, bool *in)
{
	float x = s->w[id];
	*in = x != -INFINITY && (!h->check_cut || sf__in_prefix(sf__key(x), id, h->cut)) &&
	      (!h->check_pm || s->pm[id] >= h->min_pm);
	if (!*in)
		return 0;
	if (h->from_pm)
		return s->pm[id];
	return sf__expf(h->temperature == 1.0f ? x - h->max : (x - h->max) / h->temperature);
}

/* One block of listed candidates, positions [j, end). */
static double weigh_ids(struct sf_sampler *s, struct sf__cands c, uint32_t j, uint32_t end,
			const struct sf__weigh *h, uint32_t *members)
{
	float a[8] = { 0 };
	for (; j < end; j++) {
		bool in;
		uint32_t id = c.ids[j];
		float e = weight_of(s, id, h, &in);
		*members += in;
		s->pm[id] = e;
		a[j & 7] += e;
	}
	return lanes_sum(a);
}

/* One block of all tokens [j, end), eight lanes at a time. */
SF__VEC_INLINE double weigh_all_body(struct sf_sampler *s, uint32_t j, uint32_t end,
				     const struct sf__weigh *h, uint32_t *members)
{
	const float *w = s->w;
	float *pm = s->pm;
	const sf__v8f ninf = sf__splat8(-INFINITY), max = sf__splat8(h->max);
	const sf__v8u ck = sf__splat8u(h->cut.key), cid = sf__splat8u(h->cut.id);
	sf__v8u at = sf__splat8u(j) + (sf__v8u){ 0, 1, 2, 3, 4, 5, 6, 7 };
	sf__v8f acc = sf__splat8(0);
	sf__v8i count = (sf__v8i)sf__splat8u(0);
	for (; j + 8 <= end; j += 8, at += 8) {
		sf__v8f x = sf__load8(w + j), e;
		sf__v8i in = x != ninf;
		if (h->check_cut) {
			sf__v8u key = sf__key8(x);
			in &= (key > ck) | ((key == ck) & (at <= cid));
		}
		if (h->check_pm)
			in &= sf__load8(pm + j) >= h->min_pm;
		if (h->from_pm)
			e = sf__load8(pm + j);
		else if (h->temperature == 1.0f)
			e = sf__expf8(x - max);
		else
			e = sf__expf8((x - max) / h->temperature);
		e = (sf__v8f)((sf__v8i)e & in);
		sf__store8(pm + j, e);
		acc += e;
		count -= in;
	}
	float a[8];
	for (int l = 0; l < 8; l++) {
		a[l] = acc[l];
		*members += (uint32_t)count[l];
	}
	for (; j < end; j++) {
		bool in;
		float e = weight_of(s, j, h, &in);
		*members += in;
		pm[j] = e;
		a[j & 7] += e;
	}
	return lanes_sum(a);
}

static double weigh_all_base(struct sf_sampler *s, uint32_t j, uint32_t end,
			     const struct sf__weigh *h, uint32_t *members)
{
	return weigh_all_body(s, j, end, h, members);
}

__attribute__((target("avx2"))) static double
weigh_all_avx2(struct sf_sampler *s, uint32_t j, uint32_t end, const struct sf__weigh *h,
	       uint32_t *members)
{
	return weigh_all_body(s, j, end, h, members);
}

double sf__weigh(struct sf_sampler *s, struct sf__cands c, const struct sf__weigh *h,
		 uint32_t *members)
{
	uint32_t nb = (c.n + SF__BLOCK - 1) / SF__BLOCK;
	double z = 0;
	*members = 0;
	for (uint32_t b = 0; b < nb; b++) {
		uint32_t j = b * SF__BLOCK, end = c.n - j > SF__BLOCK ? j + SF__BLOCK : c.n;
		if (c.ids)
			s->bsum[b] = weigh_ids(s, c, j, end, h, members);
		else if (s->avx2)
			s->bsum[b] = weigh_all_avx2(s, j, end, h, members);
		else
			s->bsum[b] = weigh_all_base(s, j, end, h, members);
		z += s->bsum[b];
	}
	return z;
}

double sf__exp_pass(struct sf_sampler *s, struct sf__cands c, float max)
{
	const struct sf__weigh h = { .max = max, .temperature = 1.0f };
	uint32_t members;
	return sf__weigh(s, c, &h, &members);
}

uint32_t sf__walk(const struct sf_sampler *s, struct sf__cands c, double z, double u)
{
	uint32_t nb = (c.n + SF__BLOCK - 1) / SF__BLOCK, pick = UINT32_MAX, last_b = 0;
	double target = u * z, cum = 0;
	for (uint32_t b = 0; b < nb && pick == UINT32_MAX; b++) {
		if (!(s->bsum[b] > 0))
			continue;
		last_b = b;
		if (cum + s->bsum[b] > target)
			pick = b;
		else
			cum += s->bsum[b];
	}
	if (pick == UINT32_MAX) { /* short by rounding: the last weight */
		pick = last_b;
		target = INFINITY;
	}
	uint32_t j = pick * SF__BLOCK, end = c.n - j > SF__BLOCK ? j + SF__BLOCK : c.n;
	uint32_t last = sf__cand_id(c, j);
	for (; j < end; j++) {
		uint32_t id = sf__cand_id(c, j);
		if (s->pm[id] > 0) {
			last = id;
			cum += s->pm[id];
			if (cum > target)
				break;
		}
	}
	return last;
}
