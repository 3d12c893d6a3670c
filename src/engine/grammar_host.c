/* An engine's side of grammars: the vocabulary's trie made on first use, grammars by text, and
 * the mask of a context's next token from the tokens its generation made. */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

struct sf_grammar_host {
	uint32_t n_vocab;
	sf_gtok_fn fn;
	void *arg;
	struct sf_grammar_vocab *v;
	struct sf_grammar_cache *cache;
	uint64_t *mask;
};

int sf_grammar_host_new(uint32_t n_vocab, sf_gtok_fn fn, void *arg, uint32_t cap,
			struct sf_grammar_host **out, struct sf_err *err)
{
	*out = NULL;
	struct sf_grammar_host *h = calloc(1, sizeof(*h));
	if (!h)
		return sf_err_set(err, SF_E_NOMEM, "grammar: no memory for an engine's grammars");
	h->n_vocab = n_vocab;
	h->fn = fn;
	h->arg = arg;
	h->mask = calloc((n_vocab + 63) / 64, sizeof(uint64_t));
	int rc = h->mask ? sf_grammar_cache_new(cap, &h->cache, err)
			 : sf_err_set(err, SF_E_NOMEM, "grammar: no memory for a mask");
	if (rc) {
		sf_grammar_host_free(h);
		return rc;
	}
	*out = h;
	return 0;
}

void sf_grammar_host_free(struct sf_grammar_host *h)
{
	if (!h)
		return;
	sf_grammar_cache_free(h->cache);
	sf_grammar_vocab_free(h->v);
	free(h->mask);
	free(h);
}

int sf_grammar_host_mask(struct sf_grammar_host *h, struct sf_gmatch **m, const char *text,
			 size_t len, const uint32_t *gen, size_t n_gen, const uint64_t **mask,
			 struct sf_err *err)
{
	int rc;
	if (!h->v && (rc = sf_grammar_vocab_new(h->n_vocab, h->fn, h->arg, &h->v, err)))
		return rc;
	if (!*m || (*m)->g->digest != gr_digest(text, len)) {
		struct sf_grammar *g;
		if ((rc = sf_grammar_cache_get(h->cache, text, len, &g, err)))
			return rc;
		sf_gmatch_free(*m);
		*m = NULL;
		rc = sf_gmatch_new(g, m, err);
		sf_grammar_unref(g);
		if (rc)
			return rc;
	}
	if ((rc = sf_gmatch_sync(*m, h->v, gen, n_gen, err)) ||
	    (rc = sf_gmatch_mask(*m, h->v, h->mask, err)))
		return rc;
	*mask = h->mask;
	return 0;
}
