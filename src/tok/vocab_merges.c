/* Byte-level BPE's tables: the merges (each side and the merged text numbered in the string
 * table, whether or not they are tokens, since llama.cpp merges by text), and per byte the
 * string of its GPT-2 character and the tokens its UTF-8 bytes fall back to. */
#include "tok/tok.h"

#include <stdlib.h>
#include <string.h>

int sf__tok_merges(struct sf_tok *t, const struct sf__tok_src *src, struct sf_err *err)
{
	if (src->n_merges > SF_TOK_MAX_MERGES)
		return sf_err_set(err, SF_E_LIMIT, "tokenizer.ggml.merges has %llu merges, over %u",
				  (unsigned long long)src->n_merges, SF_TOK_MAX_MERGES);
	int rc = sf__merges_init(&t->merges, (uint32_t)src->n_merges, err);
	if (rc)
		return rc;
	char *both = malloc(2 * (size_t)SF_TOK_MAX_TOKEN_LEN + 1);
	if (!both)
		return sf_err_set(err, SF_E_NOMEM, "no memory to read the merges");
	for (uint32_t i = 0; i < src->n_merges; i++) {
		struct sf__str m = src->merges[i];
		if (m.n > 2 * (size_t)SF_TOK_MAX_TOKEN_LEN + 1) {
			rc = sf_err_set(err, SF_E_LIMIT, "merge %u is %zu bytes long, over %u", i, m.n,
					2 * SF_TOK_MAX_TOKEN_LEN + 1);
			break;
		}
		/* "left right", the space looked for from the second byte on (as llama.cpp does);
		 * a merge without one, or with an empty side, can never apply but keeps its rank. */
		const char *sp = m.n > 1 ? memchr(m.p + 1, ' ', m.n - 1) : NULL;
		if (!sp || sp + 1 == m.p + m.n)
			continue;
		size_t ln = (size_t)(sp - m.p), rn = m.n - ln - 1;
		int32_t left, right, result;
		memcpy(both, m.p, ln);
		memcpy(both + ln, sp + 1, rn);
		if ((rc = sf__strtab_add(&t->str, m.p, ln, &left, NULL, err)) ||
		    (rc = sf__strtab_add(&t->str, sp + 1, rn, &right, NULL, err)) ||
		    (rc = sf__strtab_add(&t->str, both, ln + rn, &result, NULL, err)))
			break;
		sf__merges_add(&t->merges, (uint32_t)left, (uint32_t)right, i, (uint32_t)result);
	}
	free(both);
	if (rc)
		return rc;
	sf__bytemap_init(&t->bytemap);
	for (unsigned b = 0; b < 256; b++) {
		const uint8_t *e = t->bytemap.enc[b];
		t->byte_sid[b] = sf__strtab_find(&t->str, e + 1, e[0]);
		for (unsigned k = 0; k < 2; k++)
			t->byte_fb[b][k] = k < e[0] ? sf__tok_lookup(t, e + 1 + k, 1) : -1;
	}
	return 0;
}
