/* Masks: for each waiting state, cached against one vocabulary, the tokens taken without
 * leaving the state's rule and the trie nodes where the rule ends; a mask ORs the cached tokens
 * of its stacks' tops and walks, below each such node, the rest of the stack. */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

#include <superfluid/wire.h>

/* What a waiting state's rule takes, from a stack whose bottom is the rest of any stack. */
struct gr_ci {
	bool built;
	bool dense;
	uint32_t n_toks;
	uint32_t *toks;  /* sparse: the token ids */
	uint64_t *bits;  /* dense: n_vocab bits */
	uint32_t n_pops;
	uint32_t *pops;  /* trie nodes where the rule ended (their tokens are in toks/bits) */
};

struct gr_mask_cache {
	uint64_t vocab_id;
	uint32_t n_states;
	struct gr_ci *ci;
	size_t bytes;
	struct gr_arena a;
	struct gr_work w;
};

/* A depth-first walk of the trie below one node from a set of stacks. */
struct walk_frame {
	uint32_t node, child, off, n, mark;
};

struct walk {
	const struct sf_grammar *g;
	const struct sf_grammar_vocab *v;
	struct gr_arena *a;
	struct gr_work *w;
	uint32_t **pool;
	size_t *cap_pool;
	struct gr_set t;
	/* Out: tokens into mask (bits) or toks (a list), and pop nodes (cached walks). */
	uint64_t *mask;
	uint32_t *toks, n_toks, cap_toks;
	uint32_t *pops, n_pops, cap_pops;
	bool cached;
};

static int push_u32(uint32_t **list, uint32_t *n, uint32_t *cap, uint32_t x, struct sf_err *err)
{
	if (*n == *cap) {
		uint32_t c = *cap ? 2 * *cap : 256;
		uint32_t *l = realloc(*list, c * sizeof(uint32_t));
		if (!l)
			return sf_err_set(err, SF_E_NOMEM, "grammar: no memory for a mask");
		*list = l;
		*cap = c;
	}
	(*list)[(*n)++] = x;
	return 0;
}

static int pool_room(struct walk *k, size_t n, struct sf_err *err)
{
	if (n <= *k->cap_pool)
		return 0;
	size_t cap = *k->cap_pool ? *k->cap_pool : 1024;
	while (cap < n)
		cap *= 2;
	uint32_t *p = realloc(*k->pool, cap * sizeof(uint32_t));
	if (!p)
		return sf_err_set(err, SF_E_NOMEM, "grammar: no memory for a mask");
	*k->pool = p;
	*k->cap_pool = cap;
	return 0;
}

static int tokens_at(struct walk *k, uint32_t node, struct sf_err *err)
{
	const struct sf_grammar_vocab *v = k->v;
	for (uint32_t i = 0; i < v->ntok[node]; i++) {
		uint32_t t = v->tok[v->tok0[node] + i];
		if (k->mask) {
			k->mask[t >> 6] |= 1ull << (t & 63);
		} else {
			int rc = push_u32(&k->toks, &k->n_toks, &k->cap_toks, t, err);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Walks the subtrees of root's children from the stacks s (which stay unchanged). */
static int walk(struct walk *k, uint32_t root, const struct gr_set *s, struct sf_err *err)
{
	const struct sf_grammar_vocab *v = k->v;
	struct walk_frame st[SF_MAX_TOKEN_BYTES + 2];
	uint32_t sp = 0;
	int rc = pool_room(k, s->n, err);
	if (rc)
		return rc;
	memcpy(*k->pool, s->ids, s->n * sizeof(uint32_t));
	st[sp++] = (struct walk_frame){ root, root + 1, 0, s->n, gr_arena_mark(k->a) };
	while (sp) {
		struct walk_frame *f = &st[sp - 1];
		if (f->child >= v->end[f->node]) {
			gr_arena_release(k->a, f->mark);
			sp--;
			continue;
		}
		uint32_t c = f->child;
		f->child = v->end[c];
		struct gr_set in = { .ids = *k->pool + f->off, .n = f->n };
		uint8_t b = v->byte[c];
		if (!gr_set_takes(k->g, k->a, &in, b))
			continue;
		uint32_t mark = gr_arena_mark(k->a);
		if ((rc = gr_advance(k->g, k->a, k->w, &in, b, &k->t, err)))
			return rc;
		bool pop = k->cached && k->t.popped;
		bool end = !k->cached && k->t.accept;
		if (pop && (rc = push_u32(&k->pops, &k->n_pops, &k->cap_pops, c, err)))
			return rc;
		if ((k->t.n || pop || end) && (rc = tokens_at(k, c, err)))
			return rc;
		if (!k->t.n || v->end[c] == c + 1) {
			gr_arena_release(k->a, mark);
			continue;
		}
		uint32_t off = f->off + f->n;
		if ((rc = pool_room(k, (size_t)off + k->t.n, err)))
			return rc;
		memcpy(*k->pool + off, k->t.ids, k->t.n * sizeof(uint32_t));
		st[sp++] = (struct walk_frame){ c, c + 1, off, k->t.n, mark };
	}
	return 0;
}

void gr_mask_cache_free(struct gr_mask_cache *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->n_states; i++) {
		free(c->ci[i].toks);
		free(c->ci[i].bits);
		free(c->ci[i].pops);
	}
	free(c->ci);
	gr_arena_fini(&c->a);
	gr_work_free(&c->w);
	free(c);
}

static void cache_clear(struct gr_mask_cache *c)
{
	for (uint32_t i = 0; i < c->n_states; i++) {
		free(c->ci[i].toks);
		free(c->ci[i].bits);
		free(c->ci[i].pops);
		memset(&c->ci[i], 0, sizeof(c->ci[i]));
	}
	c->bytes = 0;
}

/* g's cache, bound to v (a cache for another vocabulary is cleared). */
static struct gr_mask_cache *cache_for(struct sf_grammar *g, const struct sf_grammar_vocab *v,
				       struct sf_err *err)
{
	struct gr_mask_cache *c = g->cache;
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (c)
			c->ci = calloc(g->n_states, sizeof(*c->ci));
		if (!c || !c->ci || gr_arena_init(&c->a, 4096)) {
			if (c)
				free(c->ci);
			free(c);
			sf_err_set(err, SF_E_NOMEM, "grammar: no memory for its mask cache");
			return NULL;
		}
		c->n_states = g->n_states;
		c->vocab_id = v->id;
		g->cache = c;
	}
	if (c->vocab_id != v->id) {
		cache_clear(c);
		c->vocab_id = v->id;
	}
	return c;
}

static int build_ci(struct sf_grammar *g, const struct sf_grammar_vocab *v,
		    struct gr_mask_cache *c, uint32_t q, uint32_t **pool, size_t *cap_pool,
		    struct sf_err *err)
{
	if (c->bytes > SF_GRAMMAR_CACHE_BYTES)
		cache_clear(c);
	gr_arena_release(&c->a, 0);
	struct walk k = { .g = g, .v = v, .a = &c->a, .w = &c->w, .pool = pool,
			  .cap_pool = cap_pool, .cached = true };
	struct gr_set s = { 0 };
	int rc = 0;
	uint32_t top = gr_intern(&c->a, q, GR_SENTINEL, err);
	if (top == GR_NONE)
		return err->code;
	rc = pool_room(&k, 1, err);
	if (!rc) {
		s.ids = &top;
		s.n = 1;
		rc = walk(&k, 0, &s, err);
	}
	gr_set_free(&k.t);
	struct gr_ci *ci = &c->ci[q];
	if (rc) {
		free(k.toks);
		free(k.pops);
		return rc;
	}
	size_t words = (v->n_vocab + 63) / 64;
	ci->n_toks = k.n_toks;
	ci->dense = (size_t)k.n_toks * 4 > words * 8;
	if (ci->dense) {
		ci->bits = calloc(words, sizeof(uint64_t));
		if (!ci->bits) {
			free(k.toks);
			free(k.pops);
			return sf_err_set(err, SF_E_NOMEM, "grammar: no memory for its mask cache");
		}
		for (uint32_t i = 0; i < k.n_toks; i++)
			ci->bits[k.toks[i] >> 6] |= 1ull << (k.toks[i] & 63);
		free(k.toks);
		c->bytes += words * 8;
	} else {
		ci->toks = k.toks;
		c->bytes += (size_t)k.n_toks * 4;
	}
	ci->pops = k.pops;
	ci->n_pops = k.n_pops;
	c->bytes += (size_t)k.n_pops * 4 + sizeof(*ci);
	ci->built = true;
	return 0;
}

/* The tokens the stacks' token edges name (<[id]>) that lead somewhere, into mask (an end
 * token never: it is allowed where the root may end). */
static int named_tokens(struct sf_gmatch *m, const struct sf_grammar_vocab *v, uint64_t *mask,
			struct sf_err *err)
{
	const struct sf_grammar *g = m->g;
	for (uint32_t i = 0; i < m->cur.n; i++) {
		uint32_t q = m->a.st[m->cur.ids[i]];
		for (uint32_t k = 0; k < g->n_tedge[q]; k++) {
			uint32_t t = g->tedges[g->tedge0[q] + k].tok;
			if (t >= v->n_vocab || v->kind[t] == SF_GTOK_END ||
			    (mask[t >> 6] >> (t & 63) & 1))
				continue;
			uint32_t mark = gr_arena_mark(&m->a);
			int rc = gr_advance_token(g, &m->a, &m->w, &m->cur, t, &m->tmp, err);
			bool ok = !rc && (m->tmp.n || m->tmp.accept);
			gr_arena_release(&m->a, mark);
			if (rc)
				return rc;
			if (ok)
				mask[t >> 6] |= 1ull << (t & 63);
		}
	}
	return 0;
}

int sf_gmatch_mask(struct sf_gmatch *m, const struct sf_grammar_vocab *v, uint64_t *mask,
		   struct sf_err *err)
{
	size_t words = (v->n_vocab + 63) / 64;
	memset(mask, 0, words * sizeof(uint64_t));
	if (m->ended)
		return 0;
	struct sf_grammar *g = m->g;
	struct gr_mask_cache *c = cache_for(g, v, err);
	if (!c)
		return err->code;
	int rc = 0;
	for (uint32_t i = 0; !rc && i < m->cur.n; i++) {
		uint32_t x = m->cur.ids[i], q = m->a.st[x];
		struct gr_ci *ci = &c->ci[q];
		if (!ci->built && (rc = build_ci(g, v, c, q, &m->pool, &m->cap_pool, err)))
			break;
		if (ci->dense) {
			for (size_t w = 0; w < words; w++)
				mask[w] |= ci->bits[w];
		} else {
			for (uint32_t j = 0; j < ci->n_toks; j++)
				mask[ci->toks[j] >> 6] |= 1ull << (ci->toks[j] & 63);
		}
		uint32_t p = m->a.par[x];
		if (!ci->n_pops || p == GR_EMPTY)
			continue;
		/* The rule ended inside these tokens: the rest of each is read by the stack below. */
		uint32_t mark = gr_arena_mark(&m->a);
		struct walk k = { .g = g, .v = v, .a = &m->a, .w = &m->w, .pool = &m->pool,
				  .cap_pool = &m->cap_pool, .mask = mask };
		rc = gr_expand(g, &m->a, &m->w, m->a.st[p], m->a.par[p], &m->cont, err);
		for (uint32_t j = 0; !rc && m->cont.n && j < ci->n_pops; j++)
			rc = walk(&k, ci->pops[j], &m->cont, err);
		gr_set_free(&k.t);
		gr_arena_release(&m->a, mark);
	}
	if (!rc && g->n_tedges)
		rc = named_tokens(m, v, mask, err);
	if (rc) {
		memset(mask, 0, words * sizeof(uint64_t));
		return rc;
	}
	if (m->cur.accept)
		for (uint32_t i = 0; i < v->n_ends; i++)
			mask[v->ends[i] >> 6] |= 1ull << (v->ends[i] & 63);
	return 0;
}

size_t sf_grammar_cache_bytes(const struct sf_grammar *g)
{
	return g->cache ? g->cache->bytes : 0;
}
