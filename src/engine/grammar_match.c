/* A matcher: one generation's place in a grammar (a set of stacks), moved by bytes or brought
 * to the place after a list of tokens. */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

#define COMPACT_AT 65536 /* arena nodes past which the live stacks move to a fresh arena */

int sf_gmatch_new(struct sf_grammar *g, struct sf_gmatch **out, struct sf_err *err)
{
	*out = NULL;
	struct sf_gmatch *m = calloc(1, sizeof(*m));
	if (!m || gr_arena_init(&m->a, 1024)) {
		free(m);
		return sf_err_set(err, SF_E_NOMEM, "grammar: no memory for a matcher");
	}
	m->g = sf_grammar_ref(g);
	int rc = gr_start(g, &m->a, &m->w, &m->cur, err);
	if (rc) {
		sf_gmatch_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void sf_gmatch_free(struct sf_gmatch *m)
{
	if (!m)
		return;
	sf_grammar_unref(m->g);
	gr_arena_fini(&m->a);
	gr_work_free(&m->w);
	gr_set_free(&m->cur);
	gr_set_free(&m->tmp);
	gr_set_free(&m->cont);
	gr_set_free(&m->alt);
	free(m->taken);
	free(m->pool);
	free(m);
}

void sf_gmatch_reset(struct sf_gmatch *m)
{
	struct sf_err e;
	gr_arena_release(&m->a, 0);
	m->ended = false;
	m->n_taken = 0;
	/* The start state was made once already: it fits again. */
	if (gr_start(m->g, &m->a, &m->w, &m->cur, &e))
		gr_set_clear(&m->cur);
}

/* Moves the live stacks to a fresh arena when the old one is mostly garbage. */
static int compact(struct sf_gmatch *m, struct sf_err *err)
{
	struct gr_arena na;
	if (gr_arena_init(&na, 1024))
		return sf_err_set(err, SF_E_NOMEM, "grammar: no memory for its stacks");
	uint32_t chain[SF_GRAMMAR_MAX_DEPTH + 1];
	for (uint32_t i = 0; i < m->cur.n; i++) {
		uint32_t d = 0;
		for (uint32_t x = m->cur.ids[i]; x < GR_SENTINEL; x = m->a.par[x])
			chain[d++] = x;
		uint32_t p = GR_EMPTY;
		while (d--) {
			p = gr_intern(&na, m->a.st[chain[d]], p, err);
			if (p == GR_NONE) {
				gr_arena_fini(&na);
				return err->code;
			}
		}
		m->cur.ids[i] = p;
	}
	gr_arena_fini(&m->a);
	m->a = na;
	return 0;
}

/* Takes len bytes into cur, without compacting: 0, or an error with cur and the arena as
 * they were (the stacks before in cont when it took them). */
static int advance_bytes(struct sf_gmatch *m, const uint8_t *bytes, size_t len,
			 struct sf_err *err)
{
	uint32_t mark = gr_arena_mark(&m->a);
	int rc = gr_set_copy(&m->cont, &m->cur, err); /* kept to go back to */
	for (size_t i = 0; !rc && i < len; i++) {
		rc = gr_advance(m->g, &m->a, &m->w, &m->cur, bytes[i], &m->tmp, err);
		if (!rc && !m->tmp.n && !(m->tmp.accept && i + 1 == len))
			rc = sf_err_set(err, SF_E_RANGE, "grammar: byte 0x%02x (at %zu) is not "
					"allowed there", bytes[i], i);
		if (!rc) {
			struct gr_set t = m->cur;
			m->cur = m->tmp;
			m->tmp = t;
		}
	}
	if (rc) {
		struct gr_set t = m->cur;
		m->cur = m->cont;
		m->cont = t;
		gr_arena_release(&m->a, mark);
	}
	return rc;
}

/* Compacts the arena when it grew mostly garbage. */
static int settle(struct sf_gmatch *m, struct sf_err *err)
{
	if (m->a.n <= COMPACT_AT || m->a.n <= m->compact_at)
		return 0;
	int rc = compact(m, err);
	m->compact_at = 2 * m->a.n; /* live stacks this large wait for as many again */
	return rc;
}

int sf_gmatch_bytes(struct sf_gmatch *m, const uint8_t *bytes, size_t len, struct sf_err *err)
{
	if (m->ended)
		return sf_err_set(err, SF_E_RANGE, "grammar: output after its end");
	int rc = advance_bytes(m, bytes, len, err);
	return rc ? rc : settle(m, err);
}

/* Token t, neither an end token nor past the vocabulary: by its bytes (a text token) and by
 * the token edges that name it (<[t]>), the stacks of both ways kept. */
static int take_token(struct sf_gmatch *m, const struct sf_grammar_vocab *v, uint32_t t,
		      size_t at, struct sf_err *err)
{
	bool text = v->kind[t] == SF_GTOK_TEXT;
	bool named = gr_set_names(m->g, &m->a, &m->cur, t);
	if (!text && !named)
		return sf_err_set(err, SF_E_RANGE, "grammar: token %u (at %zu) is a control token "
				  "the grammar does not name there", t, at);
	uint32_t mark = gr_arena_mark(&m->a);
	int rc = 0;
	bool by_name = false, by_text = false;
	if (named) {
		rc = gr_advance_token(m->g, &m->a, &m->w, &m->cur, t, &m->tmp, err);
		by_name = !rc && (m->tmp.n || m->tmp.accept);
		if (by_name)
			rc = gr_set_copy(&m->alt, &m->tmp, err);
		if (rc) {
			gr_arena_release(&m->a, mark);
			return rc;
		}
	}
	if (text) {
		rc = advance_bytes(m, v->bytes + v->off[t], v->off[t + 1] - v->off[t], err);
		by_text = !rc;
		if (rc && rc != SF_E_RANGE) {
			gr_arena_release(&m->a, mark);
			return rc;
		}
	}
	rc = 0;
	if (by_text && by_name)
		rc = gr_set_union(&m->a, &m->cur, &m->alt, err);
	else if (by_name)
		rc = gr_set_copy(&m->cur, &m->alt, err);
	else if (!by_text)
		rc = sf_err_set(err, SF_E_RANGE, "grammar: token %u (at %zu) is not allowed there",
				t, at);
	if (rc) {
		if (by_text) { /* cur moved on: back to the stacks before */
			struct gr_set s = m->cur;
			m->cur = m->cont;
			m->cont = s;
		}
		gr_arena_release(&m->a, mark);
		return rc;
	}
	return settle(m, err);
}

static int take(struct sf_gmatch *m, const struct sf_grammar_vocab *v, uint32_t t, size_t at,
		struct sf_err *err)
{
	if (t >= v->n_vocab)
		return sf_err_set(err, SF_E_RANGE, "grammar: token %u (at %zu) is past the "
				  "vocabulary", t, at);
	if (m->ended)
		return sf_err_set(err, SF_E_RANGE, "grammar: token %u (at %zu) follows the end", t,
				  at);
	if (v->kind[t] == SF_GTOK_END) {
		if (!sf_gmatch_can_end(m))
			return sf_err_set(err, SF_E_RANGE, "grammar: the end (token %u at %zu) comes "
					  "before the grammar may end", t, at);
		m->ended = true;
		return 0;
	}
	return take_token(m, v, t, at, err);
}

int sf_gmatch_sync(struct sf_gmatch *m, const struct sf_grammar_vocab *v, const uint32_t *toks,
		   size_t n, struct sf_err *err)
{
	size_t k = 0;
	while (k < m->n_taken && k < n && m->taken[k] == toks[k])
		k++;
	if (k < m->n_taken)
		sf_gmatch_reset(m);
	if (n > m->cap_taken) {
		size_t cap = m->cap_taken ? m->cap_taken : 64;
		while (cap < n)
			cap *= 2;
		uint32_t *t = realloc(m->taken, cap * sizeof(uint32_t));
		if (!t)
			return sf_err_set(err, SF_E_NOMEM, "grammar: no memory for %zu tokens", n);
		m->taken = t;
		m->cap_taken = cap;
	}
	for (size_t i = m->n_taken; i < n; i++) {
		int rc = take(m, v, toks[i], i, err);
		if (rc) {
			sf_gmatch_reset(m);
			return rc;
		}
		m->taken[m->n_taken++] = toks[i];
	}
	return 0;
}

bool sf_gmatch_can_end(const struct sf_gmatch *m)
{
	return !m->ended && m->cur.accept;
}

bool sf_gmatch_done(const struct sf_gmatch *m)
{
	return m->ended || (!m->cur.n && m->cur.accept);
}

bool sf_gmatch_allows(struct sf_gmatch *m, const struct sf_grammar_vocab *v, uint32_t tok)
{
	if (tok >= v->n_vocab || m->ended)
		return false;
	if (v->kind[tok] == SF_GTOK_END)
		return m->cur.accept;
	struct sf_err e;
	uint32_t mark = gr_arena_mark(&m->a);
	bool ok = false;
	if (gr_set_names(m->g, &m->a, &m->cur, tok))
		ok = !gr_advance_token(m->g, &m->a, &m->w, &m->cur, tok, &m->tmp, &e) &&
		     (m->tmp.n || m->tmp.accept);
	if (!ok && v->kind[tok] == SF_GTOK_TEXT) {
		const uint8_t *b = v->bytes + v->off[tok];
		size_t len = v->off[tok + 1] - v->off[tok];
		ok = gr_set_copy(&m->cont, &m->cur, &e) == 0;
		for (size_t i = 0; ok && i < len; i++) {
			ok = !gr_advance(m->g, &m->a, &m->w, &m->cont, b[i], &m->tmp, &e) &&
			     (m->tmp.n || (m->tmp.accept && i + 1 == len));
			struct gr_set t = m->cont;
			m->cont = m->tmp;
			m->tmp = t;
		}
	}
	gr_arena_release(&m->a, mark);
	return ok;
}
