/* Cuts in the candidate order (logit descending, then id ascending) without sorting a row.
 *
 * A cut over a long list is a radix selection over the logits' order keys, most significant
 * digit first (11, 11, then 10 bits): each level counts (or adds the probability of) the
 * candidates left per digit, finds the digit where the prefix reaches its target and keeps
 * only that digit's candidates; after the last level they share one logit and their ids,
 * ascending, settle the rest. O(n) whatever the logits, ties included. A short list is sorted.
 * The first few of a whole row come from one filtering pass with a heap. */
#include "sampler_internal.h"
#include "sampler_vec.h"

#include <stdlib.h>

#define SHORT_LIST 256 /* lists up to this long are sorted rather than radix-selected */

static const int level_shift[3] = { 21, 10, 0 };
static const int level_bits[3] = { 11, 11, 10 };

static int order_cmp(const void *a, const void *b, void *w)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return sf__before(w, x, y) ? -1 : sf__before(w, y, x) ? 1 : 0;
}

void sf__sort_order(const float *w, uint32_t *ids, uint32_t n)
{
	qsort_r(ids, n, sizeof(ids[0]), order_cmp, (void *)w);
}

/* The cut over a short list: its finite tokens sorted, then walked in order. */
static struct sf__cut select_sorted(struct sf_sampler *s, struct sf__cands c, bool by_mass,
				    double target)
{
	uint32_t *ids = s->tmp[0], m = 0;
	for (uint32_t j = 0; j < c.n; j++)
		if (s->w[c.ids[j]] != -INFINITY)
			ids[m++] = c.ids[j];
	if (!m)
		return SF__CUT_ALL; /* lists hold finite tokens only: not reached */
	sf__sort_order(s->w, ids, m);
	double above = 0;
	uint32_t i = 0;
	for (; i + 1 < m; i++) {
		above += by_mass ? s->pm[ids[i]] : 1.0;
		if (above >= target)
			break;
	}
	return (struct sf__cut){ sf__key(s->w[ids[i]]), ids[i] };
}

static struct sf__cut select_cut(struct sf_sampler *s, struct sf__cands c, bool by_mass,
				 double target)
{
	if (c.ids && c.n <= SHORT_LIST && c.ids != s->tmp[0])
		return select_sorted(s, c, by_mass, target);
	const float *w = s->w;
	const float *pm = s->pm;
	double above = 0; /* count or mass of the candidates above the digits kept so far */
	uint32_t prefix = 0;
	for (int lv = 0; lv < 3; lv++) {
		int shift = level_shift[lv];
		uint32_t bins = 1u << level_bits[lv], mask = bins - 1;
		int copies = c.n >= 8192 ? SF__HIST_COPIES : 1;
		for (int h = 0; h < copies; h++) {
			memset(s->hcount[h], 0, bins * sizeof(s->hcount[h][0]));
			if (by_mass)
				memset(s->hmass[h], 0, bins * sizeof(s->hmass[h][0]));
		}
		for (uint32_t j = 0; j < c.n; j++) {
			uint32_t id = sf__cand_id(c, j);
			float x = w[id];
			if (x == -INFINITY)
				continue;
			uint32_t d = (sf__key(x) >> shift) & mask, h = j & (uint32_t)(copies - 1);
			s->hcount[h][d]++;
			if (by_mass)
				s->hmass[h][d] += pm[id];
		}
		for (int h = 1; h < copies; h++)
			for (uint32_t d = 0; d < bins; d++) {
				s->hcount[0][d] += s->hcount[h][d];
				if (by_mass)
					s->hmass[0][d] += s->hmass[h][d];
			}
		/* The digit where the prefix reaches the target, from the top; when rounding leaves
		 * it short everywhere, the lowest digit (the whole list is the prefix). */
		uint32_t total = 0, pick = 0;
		bool found = false;
		double at_pick = above;
		for (uint32_t d = bins; d-- > 0;) {
			uint32_t k = s->hcount[0][d];
			if (!k)
				continue;
			double v = by_mass ? s->hmass[0][d] : (double)k;
			total += k;
			if (!found) {
				pick = d;
				at_pick = above;
				if (above + v >= target)
					found = true;
				else
					above += v;
			}
		}
		above = at_pick;
		if (s->hcount[0][pick] != total) { /* keep only the picked digit's candidates */
			uint32_t *out = c.ids == s->tmp[0] ? s->tmp[1] : s->tmp[0], m = 0;
			for (uint32_t j = 0; j < c.n; j++) {
				uint32_t id = sf__cand_id(c, j);
				float x = w[id];
				if (x != -INFINITY && ((sf__key(x) >> shift) & mask) == pick)
					out[m++] = id;
			}
			c = (struct sf__cands){ out, m };
		}
		prefix |= pick << shift;
	}
	/* One logit left: ids ascending settle the cut. */
	uint32_t last = 0;
	for (uint32_t j = 0; j < c.n; j++) {
		uint32_t id = sf__cand_id(c, j);
		if (w[id] == -INFINITY)
			continue;
		last = id;
		above += by_mass ? pm[id] : 1.0;
		if (above >= target)
			break;
	}
	return (struct sf__cut){ prefix, last };
}

struct sf__cut sf__select_count(struct sf_sampler *s, struct sf__cands c, uint32_t k)
{
	return select_cut(s, c, false, (double)k);
}

struct sf__cut sf__select_mass(struct sf_sampler *s, struct sf__cands c, double target)
{
	return select_cut(s, c, true, target);
}

uint32_t sf__collect(const struct sf_sampler *s, struct sf__cands c, struct sf__cut cut,
		     uint32_t *out)
{
	const float *w = s->w;
	uint32_t m = 0;
	for (uint32_t j = 0; j < c.n; j++) {
		uint32_t id = sf__cand_id(c, j);
		float x = w[id];
		if (x != -INFINITY && sf__in_prefix(sf__key(x), id, cut))
			out[m++] = id;
	}
	return m;
}

/* Whether any token of the 64 from i has a logit above floor. */
SF__VEC_INLINE bool any_above_body(const float *w, uint32_t i, float floor)
{
	sf__v8f f = sf__splat8(floor);
	sf__v8i any = (sf__v8i)sf__splat8u(0);
	for (uint32_t k = 0; k < 64; k += 8)
		any |= sf__load8(w + i + k) > f;
	return sf__any8(any);
}

static bool any_above_base(const float *w, uint32_t i, float floor)
{
	return any_above_body(w, i, floor);
}

__attribute__((target("avx2"))) static bool any_above_avx2(const float *w, uint32_t i,
							   float floor)
{
	return any_above_body(w, i, floor);
}

/* A heap of the first k tokens seen so far, the last of them (in the candidate order) at the
 * root. Tokens arrive in id order: a new one enters when its logit is above the root's (an
 * equal logit with a larger id comes after). */
struct heap {
	const float *w;
	uint32_t *h;
	uint32_t n, k;
};

/* Whether a comes after b in the candidate order. */
static bool after(const float *w, uint32_t a, uint32_t b)
{
	return sf__before(w, b, a);
}

static void heap_down(struct heap *hp, uint32_t i)
{
	uint32_t *h = hp->h;
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < hp->n && after(hp->w, h[l], h[m]))
			m = l;
		if (r < hp->n && after(hp->w, h[r], h[m]))
			m = r;
		if (m == i)
			return;
		uint32_t t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static void heap_offer(struct heap *hp, uint32_t t)
{
	uint32_t *h = hp->h;
	if (hp->n < hp->k) {
		uint32_t i = hp->n++;
		h[i] = t;
		while (i && after(hp->w, h[i], h[(i - 1) / 2])) {
			uint32_t p = (i - 1) / 2, x = h[i];
			h[i] = h[p];
			h[p] = x;
			i = p;
		}
	} else if (hp->w[t] > hp->w[h[0]]) {
		h[0] = t;
		heap_down(hp, 0);
	}
}

static int id_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

void sf__top_few(struct sf_sampler *s, uint32_t n, uint32_t k)
{
	const float *w = s->w;
	struct heap hp = { w, s->set, 0, k };
	uint32_t i = 0;
	for (; i < n; i++) {
		if (i % 64 == 0 && i + 64 <= n && hp.n == k) { /* skip windows with nothing above */
			float floor = w[hp.h[0]];
			if (!(s->avx2 ? any_above_avx2(w, i, floor) : any_above_base(w, i, floor))) {
				i += 63;
				continue;
			}
		}
		if (w[i] != -INFINITY)
			heap_offer(&hp, i);
	}
	qsort(hp.h, hp.n, sizeof(hp.h[0]), id_cmp);
}
