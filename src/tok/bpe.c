/* Byte-level BPE encoding (llama.cpp's llm_tokenizer_bpe): the fragment is read as code
 * points (a bad byte as U+FFFD), cut into words by the pre-tokenizer, and each word's UTF-8
 * bytes, written as GPT-2's characters, merge pairwise lowest rank first (leftmost among
 * equals). A piece left that is not a token falls back to the tokens of its characters' single
 * bytes, where the vocabulary has them. With ignore_merges a word that is a token is that
 * token.
 *
 * One byte of the word is one GPT-2 character, so the symbols are the word's bytes, kept at
 * the offset of their first byte (the next one starts where a symbol ends). */
#include "tok/tok.h"

#include <string.h>

struct sym {
	int32_t sid;  /* the symbol's text in the string table, -1 when it has none */
	uint32_t len; /* 0: merged into the one before */
	int32_t prev;
};

struct run {
	const struct sf_tok *t;
	size_t n;
	struct sym *sym;
	struct sf__heap *heap;
	size_t alive;
};

static int try_pair(struct run *r, int32_t a)
{
	if (a < 0)
		return 0;
	size_t b = (size_t)a + r->sym[a].len;
	if (b >= r->n || r->sym[a].sid < 0 || r->sym[b].sid < 0)
		return 0;
	const struct sf__merge *m = sf__merges_find(&r->t->merges, (uint32_t)r->sym[a].sid,
						    (uint32_t)r->sym[b].sid);
	if (!m)
		return 0;
	struct sf__heap_item it = { .key = (uint64_t)m->rank << 32 | (uint32_t)a,
				    .c = r->sym[a].sid, .d = r->sym[b].sid };
	return sf__heap_push(r->heap, &it);
}

static bool live(const struct sf__heap_item *it, void *arg)
{
	const struct run *r = arg;
	size_t a = (uint32_t)it->key, b = a + r->sym[a].len;
	return r->sym[a].len && r->sym[a].sid == it->c && b < r->n && r->sym[b].sid == it->d;
}

static void emit_piece(const struct run *r, const uint8_t *w, size_t a, struct sf__sink *k)
{
	const struct sf_tok *t = r->t;
	int32_t sid = r->sym[a].sid;
	if (sid >= 0 && (uint32_t)sid < t->n_vocab) {
		sf__emit(k, (uint32_t)sid);
		return;
	}
	for (size_t j = a; j < a + r->sym[a].len; j++)
		for (unsigned c = 0; c < 2; c++)
			if (t->byte_fb[w[j]][c] >= 0)
				sf__emit(k, (uint32_t)t->byte_fb[w[j]][c]);
}

/* The word's text in GPT-2's characters is a token: that token, or -1. */
static int32_t whole_word(const struct sf_tok *t, const uint8_t *w, size_t n,
			  struct sf__scratch *s, struct sf_err *err, int *rc)
{
	if ((*rc = sf__grow((void **)&s->enc, &s->enc_cap, 2 * n, 1, err)))
		return -1;
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *e = t->bytemap.enc[w[i]];
		memcpy(s->enc + m, e + 1, e[0]);
		m += e[0];
	}
	return sf__tok_lookup(t, s->enc, m);
}

static int encode_word(const struct sf_tok *t, const uint8_t *w, size_t n, struct sf__scratch *s,
		       struct sf__sink *k, struct sf_err *err)
{
	int rc = 0;
	if (t->ignore_merges) {
		int32_t id = whole_word(t, w, n, s, err, &rc);
		if (rc)
			return rc;
		if (id >= 0) {
			sf__emit(k, (uint32_t)id);
			return 0;
		}
	}
	if ((rc = sf__grow(&s->sym, &s->sym_cap, n, sizeof(struct sym), err)))
		return rc;
	struct run r = { .t = t, .n = n, .sym = s->sym, .heap = &s->heap, .alive = n };
	for (size_t i = 0; i < n; i++)
		r.sym[i] = (struct sym){ .sid = t->byte_sid[w[i]], .len = 1, .prev = (int32_t)i - 1 };
	s->heap.n = 0;
	for (size_t i = 0; i + 1 < n; i++)
		if ((rc = try_pair(&r, (int32_t)i)))
			goto nomem;
	struct sf__heap_item it;
	while (sf__heap_pop(&s->heap, &it)) {
		if (!live(&it, &r))
			continue;
		size_t a = (uint32_t)it.key, b = a + r.sym[a].len;
		const struct sf__merge *m = sf__merges_find(&t->merges, (uint32_t)it.c, (uint32_t)it.d);
		r.sym[a].sid = (int32_t)m->result;
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
		emit_piece(&r, w, a, k);
	return 0;
nomem:
	return sf_err_set(err, SF_E_NOMEM, "no memory to encode a word of %zu bytes", n);
}

int sf__bpe_encode(const struct sf_tok *t, const char *text, size_t len, struct sf__scratch *s,
		   struct sf__sink *k, struct sf_err *err)
{
	int rc;
	if ((rc = sf__grow((void **)&s->cp, &s->cp_cap, len, sizeof(uint32_t), err)) ||
	    (rc = sf__grow((void **)&s->cut, &s->cut_cap, len + 1, 1, err)) ||
	    (rc = sf__grow((void **)&s->bytes, &s->bytes_cap, 4 * len, 1, err)))
		return rc;
	size_t n = 0;
	for (size_t i = 0; i < len;)
		s->cp[n++] = sf__utf8_next((const uint8_t *)text, len, &i);
	if ((rc = sf__pretok_split(&t->pretok, s->cp, n, s->cut, s, err)))
		return rc;
	for (size_t a = 0; a < n;) {
		size_t b = a + 1, m = 0;
		while (!s->cut[b])
			b++;
		for (size_t i = a; i < b; i++)
			m += sf__utf8_put(s->cp[i], s->bytes + m);
		if ((rc = encode_word(t, s->bytes, m, s, k, err)))
			return rc;
		a = b;
	}
	return 0;
}
