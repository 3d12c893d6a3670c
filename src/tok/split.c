/* Cutting special tokens out of a text, with the result of llama.cpp's
 * tokenizer_st_partition: the specials are taken longest first; each one's occurrences are
 * taken left to right in the text not yet taken, none overlapping; an LSTRIP / RSTRIP one
 * takes the whitespace before / after it as well.
 *
 * llama.cpp searches the text once per special token. Here the specials of one length are
 * found together, with a rolling hash over the text (one pass per length the specials have),
 * and the occurrences are then taken in llama.cpp's order: by the special's rank, then by
 * place. A bitmap says which bytes are taken. */
#include "tok/tok.h"

#include <stdlib.h>
#include <string.h>

struct occ {
	uint32_t rank, pos;
};

struct taken {
	uint32_t pos, len, id;
};

struct state {
	const uint8_t *text;
	size_t len;
	uint64_t *used; /* bitmap: bytes taken by a special or stripped */
	struct occ *occ;
	size_t n_occ, occ_cap;
	struct taken *taken;
	size_t n_taken, taken_cap;
};

static bool is_used(const struct state *st, size_t i)
{
	return st->used[i / 64] >> (i % 64) & 1;
}

static void set_used(struct state *st, size_t i)
{
	st->used[i / 64] |= 1ull << (i % 64);
}

/* Whether text[a..b) is free of taken bytes. */
static bool all_free(const struct state *st, size_t a, size_t b)
{
	while (a < b && a % 64) {
		if (is_used(st, a))
			return false;
		a++;
	}
	for (; a + 64 <= b; a += 64)
		if (st->used[a / 64])
			return false;
	for (; a < b; a++)
		if (is_used(st, a))
			return false;
	return true;
}

/* isspace in the C locale, whatever the process's locale is. */
static bool space(uint8_t c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

static int by_rank(const void *a, const void *b)
{
	const struct occ *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int by_pos(const void *a, const void *b)
{
	const struct taken *x = a, *y = b;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Every place a special of class c occurs, as (rank, pos). */
static int find_class(const struct sf_tok *t, const struct sf__spset *set,
		      const struct sf__spclass *c, struct state *st, struct sf_err *err)
{
	const uint8_t *s = st->text;
	size_t L = c->len;
	st->n_occ = 0;
	if (L > st->len)
		return 0;
	uint64_t h = 0;
	for (size_t i = 0; i < L; i++)
		h = h * set->base + s[i];
	for (size_t p = 0;; p++) {
		if (c->lead[s[p] / 8] >> (s[p] % 8) & 1) {
			uint32_t k = sf__spset_slot(set, h, L);
			for (uint32_t v; (v = set->slots[k]); k = (k + 1) & (set->n_slots - 1)) {
				uint32_t r = v - 1;
				size_t n;
				if (set->hash[r] != h || r < c->first || r >= c->first + c->n)
					continue;
				const char *sp = sf__strtab_str(&t->str, set->ids[r], &n);
				if (memcmp(sp, s + p, L))
					continue;
				if (st->n_occ == st->occ_cap) {
					size_t cap = st->occ_cap ? st->occ_cap * 2 : 64;
					struct occ *o = realloc(st->occ, cap * sizeof(*o));
					if (!o)
						return sf_err_set(err, SF_E_NOMEM,
								  "no memory to find special tokens");
					st->occ = o;
					st->occ_cap = cap;
				}
				st->occ[st->n_occ++] = (struct occ){ r, (uint32_t)p };
				break; /* one special of this length can start here */
			}
		}
		if (p + L >= st->len)
			break;
		h = (h - s[p] * c->pow) * set->base + s[p + L];
	}
	return 0;
}

/* Takes class c's occurrences in llama.cpp's order. */
static int take_class(const struct sf_tok *t, const struct sf__spset *set,
		      const struct sf__spclass *c, struct state *st, struct sf_err *err)
{
	qsort(st->occ, st->n_occ, sizeof(*st->occ), by_rank);
	uint32_t rank = UINT32_MAX;
	size_t resume = 0;
	for (size_t i = 0; i < st->n_occ; i++) {
		const struct occ *o = &st->occ[i];
		if (o->rank != rank) {
			rank = o->rank;
			resume = 0;
		}
		size_t p = o->pos, e = p + c->len;
		if (p < resume || !all_free(st, p, e))
			continue;
		uint32_t id = set->ids[o->rank], attr = t->attr[id];
		for (size_t k = p; k < e; k++)
			set_used(st, k);
		if (attr & SF_TOK_ATTR_LSTRIP)
			for (size_t k = p; k > 0 && !is_used(st, k - 1) && space(st->text[k - 1]); k--)
				set_used(st, k - 1);
		if (attr & SF_TOK_ATTR_RSTRIP)
			for (; e < st->len && !is_used(st, e) && space(st->text[e]); e++)
				set_used(st, e);
		resume = e;
		if (st->n_taken == st->taken_cap) {
			size_t cap = st->taken_cap ? st->taken_cap * 2 : 16;
			struct taken *tk = realloc(st->taken, cap * sizeof(*tk));
			if (!tk)
				return sf_err_set(err, SF_E_NOMEM, "no memory to cut special tokens");
			st->taken = tk;
			st->taken_cap = cap;
		}
		st->taken[st->n_taken++] = (struct taken){ (uint32_t)p, c->len, id };
	}
	return 0;
}

/* The fragments: runs of free bytes and the taken specials, in text order. */
static int fragments(struct state *st, struct sf__frag **frags, size_t *n, struct sf_err *err)
{
	if (st->n_taken)
		qsort(st->taken, st->n_taken, sizeof(*st->taken), by_pos);
	struct sf__frag *f = malloc((2 * st->n_taken + 1) * sizeof(*f));
	if (!f)
		return sf_err_set(err, SF_E_NOMEM, "no memory for text fragments");
	size_t k = 0, next = 0;
	for (size_t i = 0; i < st->len;) {
		if (next < st->n_taken && st->taken[next].pos == i) {
			f[k++] = (struct sf__frag){ .start = (uint32_t)i, .len = 0,
						    .token = st->taken[next].id };
			i += st->taken[next++].len;
		} else if (is_used(st, i)) {
			i++; /* stripped whitespace */
		} else {
			size_t j = i + 1;
			while (j < st->len && !is_used(st, j))
				j++;
			f[k++] = (struct sf__frag){ .start = (uint32_t)i, .len = (uint32_t)(j - i),
						    .token = SF_TOK_NONE };
			i = j;
		}
	}
	*frags = f;
	*n = k;
	return 0;
}

int sf__split_specials(const struct sf_tok *t, const struct sf__spset *set, const char *text,
		       size_t len, struct sf__frag **frags, size_t *n, struct sf_err *err)
{
	struct state st = { .text = (const uint8_t *)text, .len = len };
	int rc = 0;
	*frags = NULL;
	*n = 0;
	if (!len)
		return 0;
	st.used = calloc(len / 64 + 1, sizeof(*st.used));
	if (!st.used)
		return sf_err_set(err, SF_E_NOMEM, "no memory to cut special tokens");
	for (uint32_t c = 0; c < set->n_cls && !rc; c++) {
		rc = find_class(t, set, &set->cls[c], &st, err);
		if (!rc && st.n_occ)
			rc = take_class(t, set, &set->cls[c], &st, err);
	}
	if (!rc)
		rc = fragments(&st, frags, n, err);
	free(st.used);
	free(st.occ);
	free(st.taken);
	return rc;
}
