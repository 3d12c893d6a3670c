/* SentencePiece encoding (llama.cpp's llm_tokenizer_spm): the text with a space before it (when
 * asked) and U+2581 for every space is cut into UTF-8 characters; the adjacent pair whose
 * joined text is the token of best score merges first (leftmost among equals), until no pair
 * is a token. A piece left that is not a token becomes its bytes' tokens.
 *
 * Symbols are kept at the offset of their first byte: the next one starts where a symbol
 * ends, so only the previous one needs a link. */
#include "tok/tok.h"

#include <string.h>

struct sym {
	uint32_t len; /* 0: merged into the one before */
	int32_t prev;
};

struct run {
	const struct sf_tok *t;
	const uint8_t *text;
	size_t n;
	struct sym *sym;
	struct sf__heap *heap;
	size_t alive;
};

/* Scores to keys: a bigger score is a smaller key. */
static uint64_t score_key(float f)
{
	uint32_t b;
	memcpy(&b, &f, sizeof(b));
	b = (b & 0x80000000u) ? ~b : b | 0x80000000u; /* ascending with the float */
	return (uint64_t)~b << 32;
}

static int try_pair(struct run *r, int32_t a)
{
	if (a < 0)
		return 0;
	uint32_t la = r->sym[a].len;
	size_t b = (size_t)a + la;
	if (b >= r->n)
		return 0;
	uint32_t size = la + r->sym[b].len;
	int32_t id = sf__tok_lookup(r->t, r->text + a, size);
	if (id < 0)
		return 0;
	struct sf__heap_item it = { .key = score_key(r->t->score[id]) | (uint32_t)a,
				    .c = (int32_t)size };
	return sf__heap_push(r->heap, &it);
}

static bool live(const struct sf__heap_item *it, void *arg)
{
	const struct run *r = arg;
	size_t a = (uint32_t)it->key, b = a + r->sym[a].len;
	return r->sym[a].len && b < r->n && r->sym[a].len + r->sym[b].len == (uint32_t)it->c;
}

static int emit_piece(const struct run *r, size_t a, struct sf__sink *k, struct sf_err *err)
{
	const struct sf_tok *t = r->t;
	uint32_t len = r->sym[a].len;
	int32_t id = sf__tok_lookup(t, r->text + a, len);
	if (id >= 0) {
		sf__emit(k, (uint32_t)id);
		return 0;
	}
	for (size_t j = a; j < a + len; j++) {
		id = t->byte_tok[r->text[j]];
		if (id < 0)
			id = t->id[SF__ID_UNK] == SF_TOK_NONE ? -1 : (int32_t)t->id[SF__ID_UNK];
		if (id < 0)
			return sf_err_set(err, SF_E_MODEL,
					  "the vocabulary has no token for byte 0x%02x and no unknown token",
					  r->text[j]);
		sf__emit(k, (uint32_t)id);
	}
	return 0;
}

int sf__spm_encode(const struct sf_tok *t, const char *text, size_t len, bool space_prefix,
		   struct sf__scratch *s, struct sf__sink *k, struct sf_err *err)
{
	int rc;
	if ((rc = sf__grow((void **)&s->bytes, &s->bytes_cap, 3 * len + 3, 1, err)))
		return rc;
	uint8_t *e = s->bytes;
	size_t n = 0;
	if (space_prefix) {
		memcpy(e, "\xe2\x96\x81", 3);
		n = 3;
	}
	for (size_t i = 0; i < len; i++) {
		if (text[i] == ' ') {
			memcpy(e + n, "\xe2\x96\x81", 3);
			n += 3;
		} else {
			e[n++] = (uint8_t)text[i];
		}
	}
	if (!n)
		return 0;
	if ((rc = sf__grow(&s->sym, &s->sym_cap, n, sizeof(struct sym), err)))
		return rc;
	struct run r = { .t = t, .text = e, .n = n, .sym = s->sym, .heap = &s->heap };
	int32_t prev = -1;
	for (size_t i = 0; i < n;) {
		size_t l = sf__utf8_len(e[i]);
		if (l > n - i)
			l = n - i;
		r.sym[i] = (struct sym){ .len = (uint32_t)l, .prev = prev };
		prev = (int32_t)i;
		i += l;
		r.alive++;
	}
	s->heap.n = 0;
	for (size_t i = 0; i < n; i += r.sym[i].len)
		if ((rc = try_pair(&r, (int32_t)i)))
			goto nomem;
	struct sf__heap_item it;
	while (sf__heap_pop(&s->heap, &it)) {
		if (!live(&it, &r))
			continue;
		size_t a = (uint32_t)it.key, b = a + r.sym[a].len;
		r.sym[a].len += r.sym[b].len;
		r.sym[b].len = 0;
		if (a + r.sym[a].len < n)
			r.sym[a + r.sym[a].len].prev = (int32_t)a;
		r.alive--;
		if ((rc = try_pair(&r, r.sym[a].prev)) || (rc = try_pair(&r, (int32_t)a)))
			goto nomem;
		if (s->heap.n > 2 * r.alive + 64)
			sf__heap_filter(&s->heap, live, &r);
	}
	for (size_t a = 0; a < n; a += r.sym[a].len)
		if ((rc = emit_piece(&r, a, k, err)))
			return rc;
	return 0;
nomem:
	return sf_err_set(err, SF_E_NOMEM, "no memory to encode %zu bytes", len);
}
