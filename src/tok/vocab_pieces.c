/* The bytes each token stands for in decoded text (llama.cpp's token_to_piece with special
 * set), computed once for the whole vocabulary. */
#include "tok/tok.h"

#include <stdlib.h>
#include <string.h>

struct out {
	uint8_t *p;
	size_t n, cap;
};

static int put(struct out *o, const void *p, size_t n, struct sf_err *err)
{
	if (!n)
		return 0;
	if (o->n + n > o->cap) {
		size_t cap = o->cap ? o->cap : 4096;
		while (cap < o->n + n)
			cap *= 2;
		uint8_t *q = realloc(o->p, cap);
		if (!q)
			return sf_err_set(err, SF_E_NOMEM, "no memory for %zu bytes of token text", cap);
		o->p = q;
		o->cap = cap;
	}
	memcpy(o->p + o->n, p, n);
	o->n += n;
	return 0;
}

/* SPM: U+2581 back to a space. */
static int unescape(struct out *o, const char *s, size_t n, struct sf_err *err)
{
	for (size_t i = 0; i < n;) {
		int rc;
		if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) {
			rc = put(o, " ", 1, err);
			i += 3;
		} else {
			rc = put(o, s + i, 1, err);
			i++;
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* BPE: each character through GPT-2's byte map; one outside it as its own UTF-8. */
static int decode(struct out *o, const char *s, size_t n, struct sf_err *err)
{
	for (size_t i = 0; i < n;) {
		uint32_t c = sf__utf8_next((const uint8_t *)s, n, &i);
		int b = sf__bytemap_decode(c);
		uint8_t u[4];
		int rc;
		if (b >= 0) {
			u[0] = (uint8_t)b;
			rc = put(o, u, 1, err);
		} else {
			rc = put(o, u, sf__utf8_put(c, u), err);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* A byte token's byte: the two characters after "<0x" read as hex (llama.cpp's strtol). */
static int byte_of(struct out *o, const char *s, size_t n, struct sf_err *err)
{
	if (n < 3)
		return 0;
	char hex[3] = { 0 };
	memcpy(hex, s + 3, n - 3 < 2 ? n - 3 : 2);
	uint8_t b = (uint8_t)strtol(hex, NULL, 16);
	return put(o, &b, 1, err);
}

int sf__tok_pieces(struct sf_tok *t, struct sf_err *err)
{
	struct out o = { 0 };
	t->piece_off = malloc(((size_t)t->n_vocab + 1) * sizeof(*t->piece_off));
	if (!t->piece_off)
		return sf_err_set(err, SF_E_NOMEM, "no memory for %u token pieces", t->n_vocab);
	for (uint32_t id = 0; id < t->n_vocab; id++) {
		size_t n;
		const char *s = sf__strtab_str(&t->str, id, &n);
		uint32_t a = t->attr[id];
		int rc = 0;
		t->piece_off[id] = (uint32_t)o.n;
		if (a & (SF_TOK_ATTR_UNKNOWN | SF_TOK_ATTR_CONTROL | SF_TOK_ATTR_USER_DEFINED))
			rc = put(&o, s, n, err);
		else if ((a & SF_TOK_ATTR_NORMAL) && t->kind == SF_TOK_SPM)
			rc = unescape(&o, s, n, err);
		else if (a & SF_TOK_ATTR_NORMAL)
			rc = decode(&o, s, n, err);
		else if (a & SF_TOK_ATTR_BYTE)
			rc = byte_of(&o, s, n, err);
		if (rc) {
			free(o.p);
			return rc;
		}
		if (o.n > UINT32_MAX / 2) {
			free(o.p);
			return sf_err_set(err, SF_E_LIMIT, "the tokens' texts are over 2 GiB");
		}
	}
	t->piece_off[t->n_vocab] = (uint32_t)o.n;
	t->piece = o.p ? o.p : malloc(1);
	if (!t->piece)
		return sf_err_set(err, SF_E_NOMEM, "no memory for token pieces");
	return 0;
}
