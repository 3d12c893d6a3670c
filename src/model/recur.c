/* A forward call's tokens grouped by their context (recur.h). */
#include "model/recur.h"

#include <stdlib.h>

int sf_recur_groups_init(struct sf_recur_groups *g, uint32_t max_tokens)
{
	size_t T = max_tokens ? max_tokens : 1;
	g->n_ctx = 0;
	g->first = malloc(T * sizeof(uint32_t));
	g->tail = malloc(T * sizeof(uint32_t));
	g->next = malloc(T * sizeof(uint32_t));
	if (g->first && g->tail && g->next)
		return 0;
	sf_recur_groups_fini(g);
	return SF_E_NOMEM;
}

void sf_recur_groups_fini(struct sf_recur_groups *g)
{
	free(g->first);
	free(g->tail);
	free(g->next);
	g->first = g->tail = g->next = NULL;
}

void sf_recur_groups_make(struct sf_recur_groups *g, const struct sf_fwd_tok *toks, uint32_t n)
{
	/* (a linear search over the contexts seen: a call holds a batch of them) */
	g->n_ctx = 0;
	for (uint32_t t = 0; t < n; t++) {
		g->next[t] = UINT32_MAX;
		uint32_t c = 0;
		while (c < g->n_ctx && toks[g->first[c]].kv != toks[t].kv)
			c++;
		if (c == g->n_ctx)
			g->first[g->n_ctx++] = t;
		else
			g->next[g->tail[c]] = t;
		g->tail[c] = t;
	}
}
