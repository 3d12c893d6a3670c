/* sf_tok_encode: the special tokens cut out, each fragment of text encoded, BOS and EOS
 * added as llama.cpp's llama_tokenize does; and the tokenizer's getters. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tok/tok.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

int sf__grow(void **buf, size_t *cap, size_t n, size_t size, struct sf_err *err)
{
	if (n <= *cap)
		return 0;
	size_t c = *cap ? *cap : 256;
	while (c < n)
		c *= 2;
	void *p = realloc(*buf, c * size);
	if (!p)
		return sf_err_set(err, SF_E_NOMEM, "no memory for %zu bytes while encoding", c * size);
	*buf = p;
	*cap = c;
	return 0;
}

void sf__scratch_free(struct sf__scratch *s)
{
	free(s->cp);
	free(s->bytes);
	free(s->enc);
	free(s->view);
	free(s->view_off);
	free(s->cut);
	free(s->sym);
	sf__heap_free(&s->heap);
	pcre2_match_data_free(s->md);
	memset(s, 0, sizeof(*s));
}

static int encode_frags(const struct sf_tok *t, const char *text, const struct sf__frag *f,
			size_t n, bool add_special, struct sf__sink *k, struct sf_err *err)
{
	struct sf__scratch s = { 0 };
	bool prev_special = true; /* SPM: a space before the text's start and after specials */
	int rc = 0;
	if (add_special && t->add_bos)
		sf__emit(k, t->id[SF__ID_BOS]);
	for (size_t i = 0; i < n && !rc; i++) {
		if (f[i].token != SF_TOK_NONE) {
			sf__emit(k, f[i].token);
			prev_special = true;
		} else if (t->kind == SF_TOK_SPM) {
			rc = sf__spm_encode(t, text + f[i].start, f[i].len,
					    t->add_space_prefix && prev_special, &s, k, err);
			prev_special = false;
		} else {
			rc = sf__bpe_encode(t, text + f[i].start, f[i].len, &s, k, err);
		}
	}
	if (!rc && add_special && t->add_eos)
		sf__emit(k, t->id[SF__ID_EOS]);
	sf__scratch_free(&s);
	return rc;
}

int sf_tok_encode(const struct sf_tok *t, const char *text, size_t len, bool parse_special,
		  bool add_special, uint32_t *out, size_t cap, size_t *n_out, struct sf_err *err)
{
	*n_out = 0;
	if (len > SF_TOK_MAX_TEXT)
		return sf_err_set(err, SF_E_LIMIT, "a text of %zu bytes is over the %zu the tokenizer takes",
				  len, SF_TOK_MAX_TEXT);
	struct sf__frag *frags;
	size_t n_frags;
	int rc = sf__split_specials(t, parse_special ? &t->sp_all : &t->sp_user, text, len, &frags,
				    &n_frags, err);
	if (rc)
		return rc;
	struct sf__sink k = { .out = out, .cap = out ? cap : 0 };
	rc = encode_frags(t, text, frags, n_frags, add_special, &k, err);
	free(frags);
	if (rc)
		return rc;
	*n_out = k.n;
	if (k.n > k.cap)
		return sf_err_set(err, SF_E_LIMIT, "the text is %zu tokens, over the %zu room given",
				  k.n, k.cap);
	return 0;
}

const uint8_t *sf_tok_token_bytes(const struct sf_tok *t, uint32_t id, size_t *len)
{
	if (id >= t->n_vocab) {
		*len = 0;
		return NULL;
	}
	*len = t->piece_off[id + 1] - t->piece_off[id];
	return t->piece + t->piece_off[id];
}

const char *sf_tok_token_text(const struct sf_tok *t, uint32_t id, size_t *len)
{
	if (id >= t->n_vocab) {
		*len = 0;
		return NULL;
	}
	return sf__strtab_str(&t->str, id, len);
}

uint32_t sf_tok_token_attr(const struct sf_tok *t, uint32_t id)
{
	return id < t->n_vocab ? t->attr[id] : 0;
}

int sf_tok_find(const struct sf_tok *t, const char *text, size_t len, uint32_t *id)
{
	int32_t i = sf__tok_lookup(t, text, len);
	if (i < 0)
		return SF_E_NOT_FOUND;
	*id = (uint32_t)i;
	return 0;
}

uint32_t sf_tok_n_vocab(const struct sf_tok *t) { return t->n_vocab; }
enum sf_tok_kind sf_tok_kind(const struct sf_tok *t) { return t->kind; }
const char *sf_tok_pre(const struct sf_tok *t) { return t->pre_name; }
uint32_t sf_tok_bos(const struct sf_tok *t) { return t->id[SF__ID_BOS]; }
uint32_t sf_tok_eos(const struct sf_tok *t) { return t->id[SF__ID_EOS]; }
uint32_t sf_tok_eot(const struct sf_tok *t) { return t->id[SF__ID_EOT]; }
uint32_t sf_tok_eom(const struct sf_tok *t) { return t->id[SF__ID_EOM]; }
uint32_t sf_tok_unk(const struct sf_tok *t) { return t->id[SF__ID_UNK]; }
uint32_t sf_tok_pad(const struct sf_tok *t) { return t->id[SF__ID_PAD]; }
uint32_t sf_tok_sep(const struct sf_tok *t) { return t->id[SF__ID_SEP]; }
bool sf_tok_add_bos(const struct sf_tok *t) { return t->add_bos; }
bool sf_tok_add_eos(const struct sf_tok *t) { return t->add_eos; }

bool sf_tok_is_eog(const struct sf_tok *t, uint32_t id)
{
	return id < t->n_vocab && (t->eog[id / 8] >> (id % 8) & 1);
}

void sf_tok_specials(const struct sf_tok *t, const struct sf_tok_special **list, size_t *n)
{
	*list = t->specials;
	*n = t->n_specials;
}

int sf_tok_encode_pieces(const struct sf_tok *t, const struct sf_piece *pieces, size_t n,
			 uint32_t *out, size_t cap, size_t *n_out, struct sf_err *err)
{
	size_t at = 0;
	bool over = false;
	for (size_t i = 0; i < n; i++) {
		const struct sf_piece *p = &pieces[i];
		if (p->special) {
			uint32_t id;
			if (sf_tok_find(t, p->text, p->text_len, &id) ||
			    !(sf_tok_token_attr(t, id) & (SF_TOK_ATTR_CONTROL | SF_TOK_ATTR_USER_DEFINED)))
				return sf_err_set(err, SF_E_RANGE, "piece %zu is not a special token", i);
			if (at < cap)
				out[at] = id;
			else
				over = true;
			at++;
			continue;
		}
		size_t k;
		int rc = sf_tok_encode(t, p->text, p->text_len, false, false,
				       out + (at < cap ? at : cap), at < cap ? cap - at : 0, &k, err);
		if (rc && rc != SF_E_LIMIT)
			return rc;
		over |= rc == SF_E_LIMIT;
		at += k;
	}
	*n_out = at;
	if (over)
		return sf_err_set(err, SF_E_LIMIT, "pieces encode to %zu tokens, over %zu", at, cap);
	return 0;
}
