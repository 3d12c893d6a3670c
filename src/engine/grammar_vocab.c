/* A vocabulary's text tokens as a trie of their bytes, nodes in preorder (a subtree is a range),
 * built from the tokens sorted by their bytes. */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

#include <superfluid/wire.h>

struct sorter {
	const uint32_t *off;
	const uint8_t *bytes;
};

static int cmp_tok(const void *pa, const void *pb, void *arg)
{
	const struct sorter sort_by = *(const struct sorter *)arg;
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
	uint32_t la = sort_by.off[a + 1] - sort_by.off[a], lb = sort_by.off[b + 1] - sort_by.off[b];
	int c = memcmp(sort_by.bytes + sort_by.off[a], sort_by.bytes + sort_by.off[b],
		       la < lb ? la : lb);
	if (c)
		return c;
	if (la != lb)
		return la < lb ? -1 : 1;
	return a < b ? -1 : a > b;
}

void sf_grammar_vocab_free(struct sf_grammar_vocab *v)
{
	if (!v)
		return;
	free(v->byte);
	free(v->end);
	free(v->tok0);
	free(v->ntok);
	free(v->tok);
	free(v->kind);
	free(v->ends);
	free(v->off);
	free(v->bytes);
	free(v);
}

static _Atomic uint64_t next_vocab_id = 1;

int sf_grammar_vocab_new(uint32_t n_vocab, sf_gtok_fn fn, void *arg,
			 struct sf_grammar_vocab **out, struct sf_err *err)
{
	*out = NULL;
	if (!n_vocab || n_vocab > SF_MAX_VOCAB)
		return sf_err_set(err, SF_E_RANGE, "grammar: a vocabulary of %u tokens", n_vocab);
	struct sf_grammar_vocab *v = calloc(1, sizeof(*v));
	uint32_t *order = NULL, *path = NULL;
	size_t total = 0, cap = 1u << 16;
	int rc = 0;
	if (!v)
		return sf_err_set(err, SF_E_NOMEM, "grammar: no memory for a vocabulary");
	v->n_vocab = n_vocab;
	v->id = atomic_fetch_add(&next_vocab_id, 1);
	v->kind = malloc(n_vocab);
	v->off = malloc(((size_t)n_vocab + 1) * sizeof(uint32_t));
	v->bytes = malloc(cap);
	v->ends = malloc((size_t)n_vocab * sizeof(uint32_t));
	order = malloc((size_t)n_vocab * sizeof(uint32_t));
	if (!v->kind || !v->off || !v->bytes || !v->ends || !order)
		goto nomem;
	uint32_t n_text = 0;
	for (uint32_t t = 0; t < n_vocab; t++) {
		const uint8_t *b = NULL;
		size_t len = 0;
		int k = fn(arg, t, &b, &len);
		if (k == SF_GTOK_TEXT && !len)
			k = SF_GTOK_NEVER;
		if (len > SF_MAX_TOKEN_BYTES) {
			rc = sf_err_set(err, SF_E_RANGE, "grammar: token %u has %zu bytes, over %u", t,
					len, SF_MAX_TOKEN_BYTES);
			goto fail;
		}
		v->kind[t] = (uint8_t)k;
		v->off[t] = (uint32_t)total;
		if (k != SF_GTOK_TEXT)
			continue;
		if (total + len > cap) {
			while (total + len > cap)
				cap *= 2;
			uint8_t *nb = realloc(v->bytes, cap);
			if (!nb)
				goto nomem;
			v->bytes = nb;
		}
		memcpy(v->bytes + total, b, len);
		total += len;
		order[n_text++] = t;
	}
	v->off[n_vocab] = (uint32_t)total;
	for (uint32_t t = 0; t < n_vocab; t++)
		if (v->kind[t] == SF_GTOK_END)
			v->ends[v->n_ends++] = t;
	struct sorter by = { v->off, v->bytes };
	qsort_r(order, n_text, sizeof(uint32_t), cmp_tok, &by);
	/* At most one node per byte of all tokens, and the root. */
	size_t max_nodes = total + 1;
	v->byte = malloc(max_nodes);
	v->end = malloc(max_nodes * sizeof(uint32_t));
	v->tok0 = malloc(max_nodes * sizeof(uint32_t));
	v->ntok = calloc(max_nodes, sizeof(uint32_t));
	v->tok = malloc(((size_t)n_text + 1) * sizeof(uint32_t));
	path = malloc((SF_MAX_TOKEN_BYTES + 2) * sizeof(uint32_t));
	if (!v->byte || !v->end || !v->tok0 || !v->ntok || !v->tok || !path)
		goto nomem;
	uint32_t nn = 1, depth = 0, nt = 0;
	v->byte[0] = 0;
	v->tok0[0] = 0;
	path[0] = 0;
	const uint8_t *prev = NULL;
	uint32_t prev_len = 0;
	for (uint32_t i = 0; i < n_text; i++) {
		uint32_t t = order[i];
		const uint8_t *b = v->bytes + v->off[t];
		uint32_t len = v->off[t + 1] - v->off[t];
		uint32_t common = 0;
		while (common < len && common < prev_len && b[common] == prev[common])
			common++;
		while (depth > common) /* the nodes below the common prefix are done */
			v->end[path[depth--]] = nn;
		for (; depth < len; depth++) {
			v->byte[nn] = b[depth];
			v->tok0[nn] = nt;
			path[depth + 1] = nn++;
		}
		uint32_t at = path[depth];
		if (!v->ntok[at])
			v->tok0[at] = nt;
		v->tok[nt++] = t;
		v->ntok[at]++;
		prev = b;
		prev_len = len;
	}
	while (depth > 0)
		v->end[path[depth--]] = nn;
	v->end[0] = nn;
	v->n_nodes = nn;
	free(order);
	free(path);
	*out = v;
	return 0;
nomem:
	rc = sf_err_set(err, SF_E_NOMEM, "grammar: no memory for a vocabulary of %u tokens",
			n_vocab);
fail:
	free(order);
	free(path);
	sf_grammar_vocab_free(v);
	return rc;
}

uint32_t sf_grammar_vocab_size(const struct sf_grammar_vocab *v, uint32_t *n_nodes)
{
	if (n_nodes)
		*n_nodes = v->n_nodes;
	return v->n_vocab;
}
