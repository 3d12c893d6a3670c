/* Stacks and sets of them: hash-consed stack nodes in an arena with marks, and the expansion
 * of (entry state, parent) pairs through closures, calls and returns into a set of stacks whose
 * tops wait for a byte. */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

static uint32_t hash2(uint32_t a, uint32_t b)
{
	uint64_t h = ((uint64_t)a << 32 | b) * 0x9e3779b97f4a7c15ull;
	return (uint32_t)(h >> 32);
}

int gr_arena_init(struct gr_arena *a, uint32_t cap)
{
	memset(a, 0, sizeof(*a));
	if (cap < 64)
		cap = 64;
	a->st = malloc(cap * sizeof(uint32_t));
	a->par = malloc(cap * sizeof(uint32_t));
	a->dep = malloc(cap * sizeof(uint32_t));
	a->seen = calloc(cap, sizeof(uint32_t));
	a->tcap = 2 * cap;
	a->tab = calloc(a->tcap, sizeof(uint32_t));
	a->cap = cap;
	a->stamp = 1;
	if (!a->st || !a->par || !a->dep || !a->seen || !a->tab) {
		gr_arena_fini(a);
		return SF_E_NOMEM;
	}
	return 0;
}

void gr_arena_fini(struct gr_arena *a)
{
	free(a->st);
	free(a->par);
	free(a->dep);
	free(a->seen);
	free(a->tab);
	memset(a, 0, sizeof(*a));
}

static uint32_t slot_of(const struct gr_arena *a, uint32_t node)
{
	uint32_t m = a->tcap - 1;
	uint32_t i = hash2(a->st[node], a->par[node]) & m;
	while (a->tab[i] != node + 1)
		i = (i + 1) & m;
	return i;
}

void gr_arena_release(struct gr_arena *a, uint32_t mark)
{
	/* Newest first: an older node's probe never passes a newer node's slot. */
	while (a->n > mark) {
		a->n--;
		a->tab[slot_of(a, a->n)] = 0;
	}
}

static int grow(struct gr_arena *a)
{
	uint32_t cap = a->cap * 2;
	uint32_t *st = realloc(a->st, cap * sizeof(uint32_t));
	if (st)
		a->st = st;
	uint32_t *par = st ? realloc(a->par, cap * sizeof(uint32_t)) : NULL;
	if (par)
		a->par = par;
	uint32_t *dep = par ? realloc(a->dep, cap * sizeof(uint32_t)) : NULL;
	if (dep)
		a->dep = dep;
	uint32_t *seen = dep ? realloc(a->seen, cap * sizeof(uint32_t)) : NULL;
	if (!seen)
		return SF_E_NOMEM;
	a->seen = seen;
	memset(seen + a->cap, 0, (cap - a->cap) * sizeof(uint32_t));
	uint32_t *tab = calloc(2 * (size_t)cap, sizeof(uint32_t));
	if (!tab)
		return SF_E_NOMEM;
	free(a->tab);
	a->tab = tab;
	a->tcap = 2 * cap;
	a->cap = cap;
	uint32_t m = a->tcap - 1;
	for (uint32_t n = 0; n < a->n; n++) { /* in order: older nodes first */
		uint32_t i = hash2(a->st[n], a->par[n]) & m;
		while (a->tab[i])
			i = (i + 1) & m;
		a->tab[i] = n + 1;
	}
	return 0;
}

uint32_t gr_intern(struct gr_arena *a, uint32_t state, uint32_t parent, struct sf_err *err)
{
	uint32_t m = a->tcap - 1;
	uint32_t i = hash2(state, parent) & m;
	for (; a->tab[i]; i = (i + 1) & m) {
		uint32_t n = a->tab[i] - 1;
		if (a->st[n] == state && a->par[n] == parent)
			return n;
	}
	uint32_t d = parent >= GR_SENTINEL ? 1 : a->dep[parent] + 1;
	if (d > SF_GRAMMAR_MAX_DEPTH) {
		sf_err_set(err, SF_E_LIMIT, "grammar: the output nests deeper than %u rules",
			   SF_GRAMMAR_MAX_DEPTH);
		return GR_NONE;
	}
	if (a->n + 1 >= a->cap) {
		if (a->cap >= (1u << 26) || grow(a)) {
			sf_err_set(err, SF_E_NOMEM, "grammar: no memory for its stacks");
			return GR_NONE;
		}
		return gr_intern(a, state, parent, err);
	}
	uint32_t n = a->n++;
	a->st[n] = state;
	a->par[n] = parent;
	a->dep[n] = d;
	a->tab[i] = n + 1;
	return n;
}

void gr_set_clear(struct gr_set *s)
{
	s->n = 0;
	s->accept = s->popped = false;
}

void gr_set_free(struct gr_set *s)
{
	free(s->ids);
	memset(s, 0, sizeof(*s));
}

static int set_room(struct gr_set *s, uint32_t n, struct sf_err *err)
{
	if (n <= s->cap)
		return 0;
	if (n > SF_GRAMMAR_MAX_STACKS)
		return sf_err_set(err, SF_E_LIMIT, "grammar: more than %u ways to read the output "
				  "so far (an ambiguous grammar)", SF_GRAMMAR_MAX_STACKS);
	uint32_t cap = s->cap ? s->cap : 8;
	while (cap < n)
		cap *= 2;
	uint32_t *ids = realloc(s->ids, cap * sizeof(uint32_t));
	if (!ids)
		return sf_err_set(err, SF_E_NOMEM, "grammar: no memory for its stacks");
	s->ids = ids;
	s->cap = cap;
	return 0;
}

int gr_set_copy(struct gr_set *dst, const struct gr_set *src, struct sf_err *err)
{
	int rc = set_room(dst, src->n, err);
	if (rc)
		return rc;
	if (src->n)
		memcpy(dst->ids, src->ids, src->n * sizeof(uint32_t));
	dst->n = src->n;
	dst->accept = src->accept;
	dst->popped = src->popped;
	return 0;
}

void gr_work_free(struct gr_work *w)
{
	free(w->todo);
	free(w->done);
	free(w->done_stamp);
	memset(w, 0, sizeof(*w));
}

/* Starts a set (out) and a walk: dedup stamps for both. */
static void begin(struct gr_arena *a, struct gr_work *w, struct gr_set *out)
{
	if (++a->stamp == 0) {
		memset(a->seen, 0, a->cap * sizeof(uint32_t));
		a->stamp = 1;
	}
	if (++w->stamp == 0) {
		if (w->done_stamp)
			memset(w->done_stamp, 0, w->dcap * sizeof(uint32_t));
		w->stamp = 1;
	}
	w->n = 0;
	w->steps = 0;
	gr_set_clear(out);
}

static int push(struct gr_work *w, uint32_t e, uint32_t parent, struct sf_err *err)
{
	if (w->n + 2 > w->cap) {
		uint32_t cap = w->cap ? 2 * w->cap : 256;
		uint32_t *t = realloc(w->todo, cap * sizeof(uint32_t));
		if (!t)
			return sf_err_set(err, SF_E_NOMEM, "grammar: no memory for its stacks");
		w->todo = t;
		w->cap = cap;
	}
	w->todo[w->n++] = e;
	w->todo[w->n++] = parent;
	return 0;
}

/* Whether (e, parent) was expanded in this walk; marks it. -1 when memory is out. */
static int done(struct gr_work *w, uint32_t e, uint32_t parent)
{
	if (!w->dcap || 2 * w->steps >= w->dcap) {
		uint32_t cap = w->dcap ? 2 * w->dcap : 1024;
		uint64_t *d = malloc(cap * sizeof(uint64_t));
		uint32_t *s = calloc(cap, sizeof(uint32_t));
		if (!d || !s) {
			free(d);
			free(s);
			return -1;
		}
		for (uint32_t i = 0; i < w->dcap; i++) {
			if (w->done_stamp[i] != w->stamp)
				continue;
			uint64_t k = w->done[i];
			uint32_t j = hash2((uint32_t)(k >> 32), (uint32_t)k) & (cap - 1);
			while (s[j] == w->stamp)
				j = (j + 1) & (cap - 1);
			d[j] = k;
			s[j] = w->stamp;
		}
		free(w->done);
		free(w->done_stamp);
		w->done = d;
		w->done_stamp = s;
		w->dcap = cap;
	}
	uint64_t key = (uint64_t)e << 32 | parent;
	uint32_t m = w->dcap - 1, j = hash2(e, parent) & m;
	for (; w->done_stamp[j] == w->stamp; j = (j + 1) & m)
		if (w->done[j] == key)
			return 1;
	w->done[j] = key;
	w->done_stamp[j] = w->stamp;
	return 0;
}

static int add(struct gr_arena *a, struct gr_set *out, uint32_t node, struct sf_err *err)
{
	if (a->seen[node] == a->stamp)
		return 0;
	int rc = set_room(out, out->n + 1, err);
	if (rc)
		return rc;
	a->seen[node] = a->stamp;
	out->ids[out->n++] = node;
	return 0;
}

/* Expands every pending pair into out. */
static int run(const struct sf_grammar *g, struct gr_arena *a, struct gr_work *w,
	       struct gr_set *out, struct sf_err *err)
{
	while (w->n) {
		uint32_t parent = w->todo[--w->n];
		uint32_t e = w->todo[--w->n];
		int d = done(w, e, parent);
		if (d < 0)
			return sf_err_set(err, SF_E_NOMEM, "grammar: no memory for its stacks");
		if (d)
			continue;
		if (++w->steps > GR_MAX_WORK)
			return sf_err_set(err, SF_E_LIMIT, "grammar: more than %u expansions for one "
					  "byte (an ambiguous grammar)", GR_MAX_WORK);
		const struct gr_item *it = g->items + g->clo0[e];
		for (uint32_t i = 0; i < g->n_clo[e]; i++, it++) {
			int rc = 0;
			if (it->kind == GR_C_WAIT) {
				uint32_t n = gr_intern(a, it->state, parent, err);
				rc = n == GR_NONE ? err->code : add(a, out, n, err);
			} else if (it->kind == GR_C_CALL) {
				uint32_t p = parent;
				if (!it->tail && (p = gr_intern(a, it->state, parent, err)) == GR_NONE)
					return err->code;
				rc = push(w, g->rule_start[it->rule], p, err);
			} else if (parent == GR_EMPTY) {
				out->accept = true;
			} else if (parent == GR_SENTINEL) {
				out->popped = true;
			} else {
				rc = push(w, a->st[parent], a->par[parent], err);
			}
			if (rc)
				return rc;
		}
	}
	return 0;
}

int gr_expand(const struct sf_grammar *g, struct gr_arena *a, struct gr_work *w, uint32_t e,
	      uint32_t parent, struct gr_set *out, struct sf_err *err)
{
	begin(a, w, out);
	int rc = push(w, e, parent, err);
	return rc ? rc : run(g, a, w, out, err);
}

int gr_advance(const struct sf_grammar *g, struct gr_arena *a, struct gr_work *w,
	       const struct gr_set *in, uint8_t b, struct gr_set *out, struct sf_err *err)
{
	begin(a, w, out);
	for (uint32_t i = 0; i < in->n; i++) {
		uint32_t x = in->ids[i], q = a->st[x];
		if (!(g->first[q][b >> 6] >> (b & 63) & 1))
			continue;
		const struct gr_byte_edge *ed = g->edges + g->edge0[q];
		for (uint32_t k = 0; k < g->n_edge[q]; k++)
			if (ed[k].lo <= b && b <= ed[k].hi) {
				int rc = push(w, ed[k].to, a->par[x], err);
				if (rc)
					return rc;
			}
	}
	return run(g, a, w, out, err);
}

int gr_start(const struct sf_grammar *g, struct gr_arena *a, struct gr_work *w, struct gr_set *s,
	     struct sf_err *err)
{
	return gr_expand(g, a, w, g->rule_start[g->root], GR_EMPTY, s, err);
}

int gr_advance_token(const struct sf_grammar *g, struct gr_arena *a, struct gr_work *w,
		     const struct gr_set *in, uint32_t tok, struct gr_set *out, struct sf_err *err)
{
	begin(a, w, out);
	for (uint32_t i = 0; i < in->n; i++) {
		uint32_t x = in->ids[i], q = a->st[x];
		const struct gr_tok_edge *ed = g->tedges + g->tedge0[q];
		for (uint32_t k = 0; k < g->n_tedge[q]; k++)
			if (ed[k].tok == tok) {
				int rc = push(w, ed[k].to, a->par[x], err);
				if (rc)
					return rc;
			}
	}
	return run(g, a, w, out, err);
}

bool gr_set_names(const struct sf_grammar *g, const struct gr_arena *a, const struct gr_set *s,
		  uint32_t tok)
{
	if (!g->n_tedges)
		return false;
	for (uint32_t i = 0; i < s->n; i++) {
		uint32_t q = a->st[s->ids[i]];
		for (uint32_t k = 0; k < g->n_tedge[q]; k++)
			if (g->tedges[g->tedge0[q] + k].tok == tok)
				return true;
	}
	return false;
}

int gr_set_union(struct gr_arena *a, struct gr_set *dst, const struct gr_set *src,
		 struct sf_err *err)
{
	if (++a->stamp == 0) {
		memset(a->seen, 0, a->cap * sizeof(uint32_t));
		a->stamp = 1;
	}
	for (uint32_t i = 0; i < dst->n; i++)
		a->seen[dst->ids[i]] = a->stamp;
	for (uint32_t i = 0; i < src->n; i++) {
		int rc = add(a, dst, src->ids[i], err);
		if (rc)
			return rc;
	}
	dst->accept |= src->accept;
	return 0;
}
