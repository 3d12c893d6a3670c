/* Compiled grammars by their text, so that sessions with the same grammar (a schema asked many
 * times) share one grammar and its mask cache. Least recently used goes first. */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

struct entry {
	char *text;
	size_t len;
	uint64_t digest;
	uint64_t used;
	struct sf_grammar *g;
};

struct sf_grammar_cache {
	struct entry *e;
	uint32_t n, cap;
	uint64_t clock;
};

int sf_grammar_cache_new(uint32_t cap, struct sf_grammar_cache **out, struct sf_err *err)
{
	*out = NULL;
	struct sf_grammar_cache *c = calloc(1, sizeof(*c));
	if (c && cap)
		c->e = calloc(cap, sizeof(*c->e));
	if (!c || (cap && !c->e)) {
		free(c);
		return sf_err_set(err, SF_E_NOMEM, "grammar: no memory for a grammar cache");
	}
	c->cap = cap;
	*out = c;
	return 0;
}

static void drop(struct entry *e)
{
	free(e->text);
	sf_grammar_unref(e->g);
	memset(e, 0, sizeof(*e));
}

void sf_grammar_cache_free(struct sf_grammar_cache *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->n; i++)
		drop(&c->e[i]);
	free(c->e);
	free(c);
}

int sf_grammar_cache_get(struct sf_grammar_cache *c, const char *text, size_t len,
			 struct sf_grammar **out, struct sf_err *err)
{
	uint64_t d = gr_digest(text, len);
	for (uint32_t i = 0; i < c->n; i++) {
		struct entry *e = &c->e[i];
		if (e->digest == d && e->len == len && !memcmp(e->text, text, len)) {
			e->used = ++c->clock;
			*out = sf_grammar_ref(e->g);
			return 0;
		}
	}
	struct sf_grammar *g;
	int rc = sf_grammar_compile(text, len, &g, err);
	if (rc)
		return rc;
	if (!c->cap) {
		*out = g;
		return 0;
	}
	char *copy = malloc(len + 1);
	if (!copy) {
		*out = g; /* served, not kept */
		return 0;
	}
	memcpy(copy, text, len);
	copy[len] = 0;
	uint32_t at = c->n;
	if (c->n == c->cap) {
		at = 0;
		for (uint32_t i = 1; i < c->n; i++)
			if (c->e[i].used < c->e[at].used)
				at = i;
		drop(&c->e[at]);
	} else {
		c->n++;
	}
	c->e[at] = (struct entry){ copy, len, d, ++c->clock, sf_grammar_ref(g) };
	*out = g;
	return 0;
}
