/* A model's tokenizer as the head keeps it: a copy of a node's TOKENIZER_EXPORT, the
 * vocabulary in one byte arena with offsets, specials sorted by name, a bitmap of special ids
 * and the chat templates by name. */
#include "head/tokenizer.h"

#include <stdlib.h>
#include <string.h>

struct tok_special {
	const char *name; /* into t->names, NUL-terminated */
	uint32_t len, token, order;
};

struct tok_template {
	char *name, *text;
};

struct sf_head_tokenizer {
	char model[SF_MAX_NAME + 1];
	uint64_t digest;
	uint32_t vocab_size;
	uint8_t *bytes;    /* every token's bytes, back to back */
	uint32_t *offsets; /* token i: bytes[offsets[i] .. offsets[i + 1]) */
	uint8_t *special_bits;
	char *names;
	struct tok_special *specials; /* by name, then order; one entry per name */
	uint32_t n_specials;
	bool has_bos;
	uint32_t bos, eos;
	char *chat_template;
	struct tok_template *templates;
	uint32_t n_templates;
	bool plain, pieces;
};

static char *copy_str(const char *s, size_t len)
{
	char *c = malloc(len + 1);
	if (!c)
		return NULL;
	if (len)
		memcpy(c, s, len);
	c[len] = 0;
	return c;
}

static int cmp_special(const void *pa, const void *pb)
{
	const struct tok_special *a = pa, *b = pb;
	size_t n = a->len < b->len ? a->len : b->len;
	int c = memcmp(a->name, b->name, n);
	if (c)
		return c;
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

/* Checks the export against the wire's limits and itself, so that any struct (not only a
 * decoded one) gives a tokenizer or a sentence. */
static int check(const struct sf_tokenizer_export *m, size_t *vocab_bytes, size_t *name_bytes,
		 struct sf_err *err)
{
	const char *model = m->model ? m->model : "";
	if (m->model_len > SF_MAX_NAME || (m->model_len && !m->model))
		return sf_err_set(err, SF_E_LIMIT, "the tokenizer export's model name is over %u bytes",
				  SF_MAX_NAME);
	if (!m->digest)
		return sf_err_set(err, SF_E_RANGE, "the tokenizer export of model %.*s has digest 0 "
				  "(the node does not have it)", (int)m->model_len, model);
	if (m->n_vocab > SF_MAX_VOCAB || (m->n_vocab && !m->vocab))
		return sf_err_set(err, SF_E_LIMIT, "the tokenizer of model %.*s has %u tokens, "
				  "over the limit of %u", (int)m->model_len, model, m->n_vocab,
				  SF_MAX_VOCAB);
	*vocab_bytes = 0;
	for (uint32_t i = 0; i < m->n_vocab; i++) {
		const struct sf_vocab_entry *v = &m->vocab[i];
		if (v->bytes_len > SF_MAX_TOKEN_BYTES || (v->bytes_len && !v->bytes))
			return sf_err_set(err, SF_E_LIMIT, "token %u of model %.*s's tokenizer holds "
					  "%u bytes, over the limit of %u", i, (int)m->model_len, model,
					  v->bytes_len, SF_MAX_TOKEN_BYTES);
		*vocab_bytes += v->bytes_len;
	}
	if (m->eos >= m->n_vocab || (m->has_bos && m->bos >= m->n_vocab))
		return sf_err_set(err, SF_E_RANGE, "the tokenizer of model %.*s names %s token %u, "
				  "past its vocabulary of %u", (int)m->model_len, model,
				  m->eos >= m->n_vocab ? "EOS" : "BOS",
				  m->eos >= m->n_vocab ? m->eos : m->bos, m->n_vocab);
	if (m->n_specials > SF_MAX_SPECIALS || (m->n_specials && !m->specials))
		return sf_err_set(err, SF_E_LIMIT, "the tokenizer of model %.*s has %u specials, over "
				  "the limit of %u", (int)m->model_len, model, m->n_specials,
				  SF_MAX_SPECIALS);
	*name_bytes = 0;
	for (uint32_t i = 0; i < m->n_specials; i++) {
		const struct sf_special *s = &m->specials[i];
		if (s->name_len > SF_MAX_NAME || (s->name_len && !s->name))
			return sf_err_set(err, SF_E_LIMIT, "special %u of model %.*s's tokenizer has "
					  "a name over %u bytes", i, (int)m->model_len, model,
					  SF_MAX_NAME);
		if (s->token >= m->n_vocab)
			return sf_err_set(err, SF_E_RANGE, "special %.*s of model %.*s's tokenizer is "
					  "token %u, past its vocabulary of %u", (int)s->name_len,
					  s->name ? s->name : "", (int)m->model_len, model, s->token,
					  m->n_vocab);
		*name_bytes += (size_t)s->name_len + 1;
	}
	if (m->chat_template_len > SF_MAX_TEXT || (m->chat_template_len && !m->chat_template))
		return sf_err_set(err, SF_E_LIMIT, "the chat template of model %.*s is over %u bytes",
				  (int)m->model_len, model, SF_MAX_TEXT);
	if (m->n_templates > SF_MAX_TEMPLATES || (m->n_templates && !m->templates))
		return sf_err_set(err, SF_E_LIMIT, "the tokenizer of model %.*s has %u templates, over "
				  "the limit of %u", (int)m->model_len, model, m->n_templates,
				  SF_MAX_TEMPLATES);
	for (uint32_t i = 0; i < m->n_templates; i++) {
		const struct sf_named_template *nt = &m->templates[i];
		if (nt->name_len > SF_MAX_NAME || (nt->name_len && !nt->name) ||
		    nt->text_len > SF_MAX_TEXT || (nt->text_len && !nt->text))
			return sf_err_set(err, SF_E_LIMIT, "template %u of model %.*s is over its "
					  "limits (name %u bytes, text %u bytes)", i, (int)m->model_len,
					  model, SF_MAX_NAME, SF_MAX_TEXT);
	}
	return 0;
}

static int copy_vocab(struct sf_head_tokenizer *t, const struct sf_tokenizer_export *m, size_t total)
{
	t->bytes = malloc(total ? total : 1);
	t->offsets = malloc(((size_t)m->n_vocab + 1) * sizeof(*t->offsets));
	t->special_bits = calloc((size_t)m->n_vocab / 8 + 1, 1);
	if (!t->bytes || !t->offsets || !t->special_bits)
		return -1;
	size_t at = 0;
	for (uint32_t i = 0; i < m->n_vocab; i++) {
		t->offsets[i] = (uint32_t)at;
		if (m->vocab[i].bytes_len)
			memcpy(t->bytes + at, m->vocab[i].bytes, m->vocab[i].bytes_len);
		at += m->vocab[i].bytes_len;
	}
	t->offsets[m->n_vocab] = (uint32_t)at;
	t->vocab_size = m->n_vocab;
	return 0;
}

/* Specials sorted by name; of two with one name the first listed stays. */
static int copy_specials(struct sf_head_tokenizer *t, const struct sf_tokenizer_export *m,
			 size_t name_bytes)
{
	t->names = malloc(name_bytes ? name_bytes : 1);
	t->specials = calloc((size_t)m->n_specials + 1, sizeof(*t->specials));
	if (!t->names || !t->specials)
		return -1;
	size_t at = 0;
	for (uint32_t i = 0; i < m->n_specials; i++) {
		const struct sf_special *s = &m->specials[i];
		char *name = t->names + at;
		if (s->name_len)
			memcpy(name, s->name, s->name_len);
		name[s->name_len] = 0;
		at += (size_t)s->name_len + 1;
		t->specials[i] = (struct tok_special){ name, s->name_len, s->token, i };
		t->special_bits[s->token / 8] |= (uint8_t)(1u << (s->token % 8));
	}
	qsort(t->specials, m->n_specials, sizeof(*t->specials), cmp_special);
	uint32_t n = 0;
	for (uint32_t i = 0; i < m->n_specials; i++) {
		const struct tok_special *s = &t->specials[i], *prev = &t->specials[n ? n - 1 : 0];
		if (n && s->len == prev->len && !memcmp(s->name, prev->name, s->len))
			continue;
		t->specials[n++] = *s;
	}
	t->n_specials = n;
	return 0;
}

static int copy_templates(struct sf_head_tokenizer *t, const struct sf_tokenizer_export *m)
{
	t->chat_template = copy_str(m->chat_template, m->chat_template_len);
	t->templates = calloc((size_t)m->n_templates + 1, sizeof(*t->templates));
	if (!t->chat_template || !t->templates)
		return -1;
	for (uint32_t i = 0; i < m->n_templates; i++) {
		const struct sf_named_template *nt = &m->templates[i];
		t->templates[i].name = copy_str(nt->name, nt->name_len);
		t->templates[i].text = copy_str(nt->text, nt->text_len);
		t->n_templates = i + 1;
		if (!t->templates[i].name || !t->templates[i].text)
			return -1;
	}
	return 0;
}

int sf_tokenizer_from_export(struct sf_head_tokenizer **out, const struct sf_tokenizer_export *m,
			     struct sf_err *err)
{
	size_t vocab_bytes = 0, name_bytes = 0;
	*out = NULL;
	int rc = check(m, &vocab_bytes, &name_bytes, err);
	if (rc)
		return rc;
	struct sf_head_tokenizer *t = calloc(1, sizeof(*t));
	if (!t)
		return sf_err_set(err, SF_E_NOMEM, "no memory for the tokenizer of model %.*s",
				  (int)m->model_len, m->model ? m->model : "");
	if (m->model_len)
		memcpy(t->model, m->model, m->model_len);
	t->digest = m->digest;
	t->has_bos = m->has_bos;
	t->bos = m->has_bos ? m->bos : SF_TOKEN_NONE;
	t->eos = m->eos;
	t->plain = m->plain;
	t->pieces = m->pieces;
	if (copy_vocab(t, m, vocab_bytes) || copy_specials(t, m, name_bytes) ||
	    copy_templates(t, m)) {
		sf_tokenizer_free(t);
		return sf_err_set(err, SF_E_NOMEM, "no memory for the tokenizer of model %.*s "
				  "(%u tokens, %zu bytes)", (int)m->model_len, m->model ? m->model : "",
				  m->n_vocab, vocab_bytes);
	}
	*out = t;
	return 0;
}

void sf_tokenizer_free(struct sf_head_tokenizer *t)
{
	if (!t)
		return;
	for (uint32_t i = 0; i < t->n_templates; i++) {
		free(t->templates[i].name);
		free(t->templates[i].text);
	}
	free(t->templates);
	free(t->chat_template);
	free(t->specials);
	free(t->names);
	free(t->special_bits);
	free(t->offsets);
	free(t->bytes);
	free(t);
}

const char *sf_tokenizer_model(const struct sf_head_tokenizer *t)
{
	return t->model;
}

uint64_t sf_tokenizer_digest(const struct sf_head_tokenizer *t)
{
	return t->digest;
}

uint32_t sf_tokenizer_vocab_size(const struct sf_head_tokenizer *t)
{
	return t->vocab_size;
}

const uint8_t *sf_tokenizer_bytes(const struct sf_head_tokenizer *t, uint32_t id, size_t *len)
{
	if (id >= t->vocab_size) {
		if (len)
			*len = 0;
		return NULL;
	}
	if (len)
		*len = t->offsets[id + 1] - t->offsets[id];
	return t->bytes + t->offsets[id];
}

uint32_t sf_tokenizer_special(const struct sf_head_tokenizer *t, const char *name)
{
	if (!name)
		return SF_TOKEN_NONE;
	size_t len = strlen(name);
	if (len > SF_MAX_NAME)
		return SF_TOKEN_NONE;
	struct tok_special key = { name, (uint32_t)len, 0, 0 };
	uint32_t lo = 0, hi = t->n_specials;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = cmp_special(&key, &t->specials[mid]);
		const struct tok_special *s = &t->specials[mid];
		if (s->len == key.len && !memcmp(s->name, key.name, key.len))
			return s->token;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return SF_TOKEN_NONE;
}

bool sf_tokenizer_is_special(const struct sf_head_tokenizer *t, uint32_t id)
{
	return id < t->vocab_size && (t->special_bits[id / 8] >> (id % 8) & 1);
}

uint32_t sf_tokenizer_eos(const struct sf_head_tokenizer *t)
{
	return t->eos;
}

uint32_t sf_tokenizer_bos(const struct sf_head_tokenizer *t)
{
	return t->bos;
}

const char *sf_tokenizer_template(const struct sf_head_tokenizer *t, const char *name)
{
	if (!name)
		return t->chat_template[0] ? t->chat_template : NULL;
	for (uint32_t i = 0; i < t->n_templates; i++)
		if (!strcmp(t->templates[i].name, name))
			return t->templates[i].text;
	/* A node sends its default template once, as chat_template. */
	if (!strcmp(name, "default") && t->chat_template[0])
		return t->chat_template;
	return NULL;
}

bool sf_tokenizer_offers_plain(const struct sf_head_tokenizer *t)
{
	return t->plain;
}

bool sf_tokenizer_offers_pieces(const struct sf_head_tokenizer *t)
{
	return t->pieces;
}

long sf_tokenizer_decode(const struct sf_head_tokenizer *t, const uint32_t *tokens, uint32_t n,
			 char **out)
{
	*out = NULL;
	size_t total = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (tokens[i] >= t->vocab_size)
			return -1;
		total += t->offsets[tokens[i] + 1] - t->offsets[tokens[i]];
	}
	char *s = malloc(total + 1);
	if (!s)
		return -1;
	size_t at = 0;
	for (uint32_t i = 0; i < n; i++) {
		size_t len;
		const uint8_t *b = sf_tokenizer_bytes(t, tokens[i], &len);
		if (len)
			memcpy(s + at, b, len);
		at += len;
	}
	s[at] = 0;
	*out = s;
	return (long)at;
}
