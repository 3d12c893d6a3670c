/* A parsed grammar checked and flattened: every rule defined, no left recursion, every rule
 * able to finish; the closures of entry states (the waiting states, calls and rule ends reached
 * without a byte) and the byte edges of waiting states, as the matcher walks them. */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

/* Edges by their first state (CSR over the build's edges). */
struct adj {
	uint32_t *off; /* n_states + 1 */
	uint32_t *idx; /* edge ids */
};

struct cc {
	const struct gr_build *b;
	struct sf_grammar *g;
	struct adj out;
	bool *entry;
	uint32_t *rule_final;
	struct sf_err *err;
};

static int nomem(struct sf_err *err)
{
	return sf_err_set(err, SF_E_NOMEM, "grammar: no memory to compile it");
}

static int make_adj(const struct gr_build *b, struct adj *a, struct sf_err *err)
{
	a->off = calloc((size_t)b->n_states + 1, sizeof(uint32_t));
	a->idx = malloc(((size_t)b->n_edges + 1) * sizeof(uint32_t));
	if (!a->off || !a->idx)
		return nomem(err);
	for (uint32_t i = 0; i < b->n_edges; i++)
		a->off[b->edges[i].from + 1]++;
	for (uint32_t s = 0; s < b->n_states; s++)
		a->off[s + 1] += a->off[s];
	uint32_t *fill = malloc(((size_t)b->n_states + 1) * sizeof(uint32_t));
	if (!fill)
		return nomem(err);
	memcpy(fill, a->off, (size_t)b->n_states * sizeof(uint32_t));
	for (uint32_t i = 0; i < b->n_edges; i++)
		a->idx[fill[b->edges[i].from]++] = i;
	free(fill);
	return 0;
}

/* The closure of every entry state, into g->items. */
static int closures(struct cc *c)
{
	const struct gr_build *b = c->b;
	struct sf_grammar *g = c->g;
	uint32_t n = b->n_states;
	uint32_t *stamp = calloc(n, sizeof(uint32_t)), *stack = malloc((size_t)n * sizeof(uint32_t));
	size_t cap = 1024, used = 0;
	g->items = malloc(cap * sizeof(*g->items));
	int rc = 0;
	if (!stamp || !stack || !g->items) {
		rc = nomem(c->err);
		goto out;
	}
	for (uint32_t e = 0; e < n; e++) {
		if (!c->entry[e])
			continue;
		g->clo0[e] = (uint32_t)used;
		uint32_t sp = 0;
		stack[sp++] = e;
		stamp[e] = e + 1;
		while (sp) {
			uint32_t v = stack[--sp];
			bool waits = false;
			for (uint32_t k = c->out.off[v]; k < c->out.off[v + 1]; k++) {
				const struct gr_bedge *ed = &b->edges[c->out.idx[k]];
				struct gr_item it = { 0 };
				if (ed->kind == GR_E_EPS) {
					if (stamp[ed->to] != e + 1) {
						stamp[ed->to] = e + 1;
						stack[sp++] = ed->to;
					}
					continue;
				}
				if (ed->kind == GR_E_BYTES || ed->kind == GR_E_TOKEN) {
					if (waits)
						continue;
					waits = true;
					it = (struct gr_item){ .kind = GR_C_WAIT, .state = v };
				} else {
					it = (struct gr_item){ .kind = GR_C_CALL, .state = ed->to,
							       .rule = ed->rule };
				}
				if (used == cap) {
					if (cap >= GR_MAX_CLOSURE) {
						rc = sf_err_set(c->err, SF_E_LIMIT, "grammar: too large "
								"(over %u closure items: many "
								"optional parts in a row)",
								GR_MAX_CLOSURE);
						goto out;
					}
					cap *= 2;
					struct gr_item *t = realloc(g->items, cap * sizeof(*t));
					if (!t) {
						rc = nomem(c->err);
						goto out;
					}
					g->items = t;
				}
				g->items[used++] = it;
			}
			if (v == c->rule_final[b->state_rule[v]]) {
				if (used == cap) {
					cap *= 2;
					struct gr_item *t = realloc(g->items, cap * sizeof(*t));
					if (!t) {
						rc = nomem(c->err);
						goto out;
					}
					g->items = t;
				}
				g->items[used++] = (struct gr_item){ .kind = GR_C_FINAL, .state = v };
			}
		}
		g->n_clo[e] = (uint32_t)(used - g->clo0[e]);
	}
out:
	free(stamp);
	free(stack);
	return rc;
}

/* Nullable rules, and left recursion refused: a depth-first walk over the calls each rule can
 * make before taking a byte (after nullable callees, what follows them too). */
static int left_calls(struct cc *c, bool *nullable)
{
	const struct gr_build *b = c->b;
	struct sf_grammar *g = c->g;
	uint32_t nr = b->n_rules, ns = b->n_states;
	uint8_t *color = calloc(nr, 1);
	/* A frame: its rule, its queue of entry states (linked through next), its place in the
	 * current entry's closure, and the call it waits on. */
	struct frame {
		uint32_t rule, head, tail, cur, item, wait_ret, wait_rule;
	} *fr = malloc((size_t)nr * sizeof(*fr));
	uint32_t *next = malloc((size_t)ns * sizeof(uint32_t));
	bool *queued = calloc(ns, sizeof(bool));
	int rc = 0;
	if (!color || !fr || !next || !queued) {
		rc = nomem(c->err);
		goto out;
	}
	for (uint32_t r0 = 0; r0 < nr; r0++) {
		if (color[r0])
			continue;
		uint32_t sp = 0;
		uint32_t s0 = g->rule_start[r0];
		fr[sp++] = (struct frame){ r0, s0, s0, s0, 0, GR_NONE, GR_NONE };
		next[s0] = GR_NONE;
		queued[s0] = true;
		color[r0] = 1;
		while (sp) {
			struct frame *f = &fr[sp - 1];
			if (f->wait_rule != GR_NONE) { /* back from a callee */
				if (nullable[f->wait_rule] && !queued[f->wait_ret]) {
					queued[f->wait_ret] = true;
					next[f->wait_ret] = GR_NONE;
					next[f->tail] = f->wait_ret;
					f->tail = f->wait_ret;
				}
				f->wait_rule = GR_NONE;
			}
			if (f->cur == GR_NONE) {
				color[f->rule] = 2;
				sp--;
				continue;
			}
			if (f->item == g->n_clo[f->cur]) {
				f->cur = next[f->cur];
				f->item = 0;
				continue;
			}
			const struct gr_item *it = &g->items[g->clo0[f->cur] + f->item++];
			if (it->kind == GR_C_FINAL) {
				nullable[f->rule] = true;
			} else if (it->kind == GR_C_CALL) {
				uint32_t r = it->rule;
				if (color[r] == 1) {
					rc = sf_err_set(c->err, SF_E_RANGE,
							"grammar: rule %s is left-recursive (it can "
							"call itself before taking a character, "
							"through %s): write it with repetition",
							b->rules[r].name, b->rules[f->rule].name);
					goto out;
				}
				f->wait_rule = r;
				f->wait_ret = it->state;
				if (color[r] == 0) {
					uint32_t s = g->rule_start[r];
					color[r] = 1;
					next[s] = GR_NONE;
					queued[s] = true;
					fr[sp++] = (struct frame){ r, s, s, s, 0, GR_NONE, GR_NONE };
				}
			}
		}
	}
out:
	free(color);
	free(fr);
	free(next);
	free(queued);
	return rc;
}

/* Rules that can finish: a walk over all rules' states at once, where a call edge passes once
 * its callee is known to finish (states waiting on a callee are parked in its list). */
static int productive(struct cc *c, bool *prod)
{
	const struct gr_build *b = c->b;
	uint32_t ns = b->n_states, nr = b->n_rules;
	bool *seen = calloc(ns, sizeof(bool));
	uint32_t *queue = malloc((size_t)ns * sizeof(uint32_t));
	uint32_t *park = malloc(((size_t)b->n_edges + 1) * sizeof(uint32_t)); /* edge -> next */
	uint32_t *parked = malloc((size_t)nr * sizeof(uint32_t));             /* rule -> edge */
	int rc = 0;
	if (!seen || !queue || !park || !parked) {
		rc = nomem(c->err);
		goto out;
	}
	for (uint32_t r = 0; r < nr; r++)
		parked[r] = GR_NONE;
	uint32_t qh = 0, qt = 0;
	for (uint32_t r = 0; r < nr; r++) {
		uint32_t s = b->rules[r].start;
		seen[s] = true;
		queue[qt++] = s;
	}
	while (qh < qt) {
		uint32_t v = queue[qh++];
		uint32_t r = b->state_rule[v];
		if (v == b->rules[r].final && !prod[r]) {
			prod[r] = true;
			for (uint32_t e = parked[r]; e != GR_NONE; e = park[e]) {
				uint32_t to = b->edges[e].to;
				if (!seen[to]) {
					seen[to] = true;
					queue[qt++] = to;
				}
			}
			parked[r] = GR_NONE;
		}
		for (uint32_t k = c->out.off[v]; k < c->out.off[v + 1]; k++) {
			uint32_t e = c->out.idx[k];
			const struct gr_bedge *ed = &b->edges[e];
			if (ed->kind == GR_E_CALL && !prod[ed->rule]) {
				park[e] = parked[ed->rule];
				parked[ed->rule] = e;
				continue;
			}
			if (!seen[ed->to]) {
				seen[ed->to] = true;
				queue[qt++] = ed->to;
			}
		}
	}
out:
	free(seen);
	free(queue);
	free(park);
	free(parked);
	return rc;
}

/* Rules the root can reach, into reach (by calls). */
static int reachable(const struct gr_build *b, uint32_t root, bool *reach, struct sf_err *err)
{
	uint32_t nr = b->n_rules;
	uint32_t *off = calloc((size_t)nr + 1, sizeof(uint32_t));
	uint32_t *fill = malloc(((size_t)nr + 1) * sizeof(uint32_t));
	uint32_t *callee = malloc(((size_t)b->n_edges + 1) * sizeof(uint32_t));
	uint32_t *stack = malloc(((size_t)nr + 1) * sizeof(uint32_t));
	int rc = 0;
	if (!off || !fill || !callee || !stack) {
		rc = nomem(err);
		goto out;
	}
	for (uint32_t i = 0; i < b->n_edges; i++)
		if (b->edges[i].kind == GR_E_CALL)
			off[b->state_rule[b->edges[i].from] + 1]++;
	for (uint32_t r = 0; r < nr; r++)
		off[r + 1] += off[r];
	memcpy(fill, off, ((size_t)nr + 1) * sizeof(uint32_t));
	for (uint32_t i = 0; i < b->n_edges; i++)
		if (b->edges[i].kind == GR_E_CALL)
			callee[fill[b->state_rule[b->edges[i].from]]++] = b->edges[i].rule;
	uint32_t sp = 0;
	reach[root] = true;
	stack[sp++] = root;
	while (sp) {
		uint32_t r = stack[--sp];
		for (uint32_t k = off[r]; k < off[r + 1]; k++)
			if (!reach[callee[k]]) {
				reach[callee[k]] = true;
				stack[sp++] = callee[k];
			}
	}
out:
	free(off);
	free(fill);
	free(callee);
	free(stack);
	return rc;
}

static int checks(struct cc *c)
{
	const struct gr_build *b = c->b;
	uint32_t nr = b->n_rules;
	bool *nullable = calloc(nr, sizeof(bool)), *prod = calloc(nr, sizeof(bool));
	bool *reach = calloc(nr, sizeof(bool));
	int rc = 0;
	if (!nullable || !prod || !reach) {
		rc = nomem(c->err);
		goto out;
	}
	if ((rc = left_calls(c, nullable)) || (rc = productive(c, prod)))
		goto out;
	if ((rc = reachable(b, c->g->root, reach, c->err)))
		goto out;
	for (uint32_t r = 0; r < nr; r++)
		if (reach[r] && !prod[r]) {
			rc = sf_err_set(c->err, SF_E_RANGE, "grammar: rule %s can never finish "
					"(every way through it needs itself again)", b->rules[r].name);
			goto out;
		}
out:
	free(nullable);
	free(prod);
	free(reach);
	return rc;
}

/* A call is a tail call when what follows it only ends the caller. */
static void tails(struct sf_grammar *g)
{
	for (uint32_t s = 0; s < g->n_states; s++)
		for (uint32_t i = 0; i < g->n_clo[s]; i++) {
			struct gr_item *it = &g->items[g->clo0[s] + i];
			if (it->kind != GR_C_CALL)
				continue;
			uint32_t ret = it->state;
			it->tail = g->n_clo[ret] == 1 && g->items[g->clo0[ret]].kind == GR_C_FINAL;
		}
}

static int byte_edges(struct cc *c)
{
	const struct gr_build *b = c->b;
	struct sf_grammar *g = c->g;
	uint32_t n = 0, nt = 0;
	for (uint32_t i = 0; i < b->n_edges; i++) {
		n += b->edges[i].kind == GR_E_BYTES;
		nt += b->edges[i].kind == GR_E_TOKEN;
	}
	g->edges = malloc(((size_t)n + 1) * sizeof(*g->edges));
	g->tedges = malloc(((size_t)nt + 1) * sizeof(*g->tedges));
	if (!g->edges || !g->tedges)
		return nomem(c->err);
	uint32_t k = 0, kt = 0;
	for (uint32_t s = 0; s < b->n_states; s++) {
		g->edge0[s] = k;
		g->tedge0[s] = kt;
		for (uint32_t j = c->out.off[s]; j < c->out.off[s + 1]; j++) {
			const struct gr_bedge *e = &b->edges[c->out.idx[j]];
			if (e->kind == GR_E_TOKEN)
				g->tedges[kt++] = (struct gr_tok_edge){ e->rule, e->to };
			if (e->kind != GR_E_BYTES)
				continue;
			g->edges[k++] = (struct gr_byte_edge){ e->lo, e->hi, e->to };
			for (uint32_t x = e->lo; x <= e->hi; x++)
				g->first[s][x >> 6] |= 1ull << (x & 63);
		}
		g->n_edge[s] = k - g->edge0[s];
		g->n_tedge[s] = kt - g->tedge0[s];
	}
	g->n_tedges = nt;
	return 0;
}

static int flatten(struct cc *c)
{
	const struct gr_build *b = c->b;
	struct sf_grammar *g = c->g;
	uint32_t ns = b->n_states, nr = b->n_rules;
	g->n_states = ns;
	g->n_rules = nr;
	g->rule_start = malloc((size_t)nr * sizeof(uint32_t));
	g->rule_name = calloc(nr, sizeof(char *));
	c->rule_final = malloc((size_t)nr * sizeof(uint32_t));
	g->edge0 = malloc((size_t)ns * sizeof(uint32_t));
	g->n_edge = malloc((size_t)ns * sizeof(uint32_t));
	g->tedge0 = malloc((size_t)ns * sizeof(uint32_t));
	g->n_tedge = malloc((size_t)ns * sizeof(uint32_t));
	g->clo0 = calloc(ns, sizeof(uint32_t));
	g->n_clo = calloc(ns, sizeof(uint32_t));
	g->first = calloc(ns, sizeof(*g->first));
	c->entry = calloc(ns, sizeof(bool));
	if (!g->rule_start || !g->rule_name || !c->rule_final || !g->edge0 || !g->n_edge ||
	    !g->tedge0 || !g->n_tedge ||
	    !g->clo0 || !g->n_clo || !g->first || !c->entry)
		return nomem(c->err);
	g->root = GR_NONE;
	for (uint32_t r = 0; r < nr; r++) {
		const struct gr_rule *ru = &b->rules[r];
		if (!ru->defined)
			return sf_err_set(c->err, SF_E_RANGE, "grammar: line %u: rule %s is used but "
					  "never defined", ru->ref_line, ru->name);
		g->rule_start[r] = ru->start;
		c->rule_final[r] = ru->final;
		c->entry[ru->start] = true;
		if (!(g->rule_name[r] = strdup(ru->name)))
			return nomem(c->err);
		if (!strcmp(ru->name, "root"))
			g->root = r;
	}
	if (g->root == GR_NONE)
		return sf_err_set(c->err, SF_E_RANGE, "grammar: no rule named root");
	for (uint32_t i = 0; i < b->n_edges; i++)
		if (b->edges[i].kind != GR_E_EPS)
			c->entry[b->edges[i].to] = true;
	int rc = make_adj(b, &c->out, c->err);
	if (!rc)
		rc = byte_edges(c);
	if (!rc)
		rc = closures(c);
	if (!rc)
		rc = checks(c);
	if (!rc)
		tails(g);
	return rc;
}

uint64_t gr_digest(const void *p, size_t n)
{
	const uint8_t *s = p;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

static void grammar_free(struct sf_grammar *g)
{
	if (!g)
		return;
	gr_mask_cache_free(g->cache);
	for (uint32_t r = 0; g->rule_name && r < g->n_rules; r++)
		free(g->rule_name[r]);
	free(g->rule_name);
	free(g->rule_start);
	free(g->edge0);
	free(g->n_edge);
	free(g->edges);
	free(g->tedge0);
	free(g->n_tedge);
	free(g->tedges);
	free(g->clo0);
	free(g->n_clo);
	free(g->items);
	free(g->first);
	free(g);
}

int sf_grammar_compile(const char *text, size_t len, struct sf_grammar **out, struct sf_err *err)
{
	*out = NULL;
	struct gr_build b = { 0 };
	struct sf_grammar *g = calloc(1, sizeof(*g));
	struct cc c = { .b = &b, .g = g, .err = err };
	int rc = g ? gr_parse(&b, text, len, err) : nomem(err);
	if (!rc)
		rc = flatten(&c);
	free(c.out.off);
	free(c.out.idx);
	free(c.entry);
	free(c.rule_final);
	gr_build_free(&b);
	if (rc) {
		grammar_free(g);
		return rc;
	}
	atomic_init(&g->refs, 1);
	g->digest = gr_digest(text, len);
	*out = g;
	return 0;
}

struct sf_grammar *sf_grammar_ref(struct sf_grammar *g)
{
	atomic_fetch_add(&g->refs, 1);
	return g;
}

void sf_grammar_unref(struct sf_grammar *g)
{
	if (g && atomic_fetch_sub(&g->refs, 1) == 1)
		grammar_free(g);
}

uint64_t sf_grammar_digest(const struct sf_grammar *g)
{
	return g->digest;
}

void sf_grammar_size(const struct sf_grammar *g, uint32_t *n_states, uint32_t *n_rules)
{
	*n_states = g->n_states;
	*n_rules = g->n_rules;
}

bool sf_grammar_names_tokens(const struct sf_grammar *g)
{
	return g->n_tedges > 0;
}

uint64_t sf_grammar_text_digest(const char *text, size_t len)
{
	uint64_t d = gr_digest(text, len);
	return d ? d : 1;
}
