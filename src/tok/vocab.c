/* Building a tokenizer from its description: the model and pre-tokenizer, the tokens with
 * their scores and types, the role ids and flags, with llama.cpp's defaults; then the merges,
 * the special tokens and the token bytes (vocab_*.c). */
#include "tok/tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	PRE_IGNORE_MERGES = 1, /* a word that is a token is that token */
	PRE_ADD_BOS = 2,       /* add_bos_token defaults to true */
	PRE_NO_BOS = 4,        /* no default BOS id */
};

/* llama.cpp's names of the pre-tokenizers whose expressions this code has. */
static const struct {
	const char *name;
	enum sf__pre pre;
	unsigned flags;
} pres[] = {
	{ "default", SF__PRE_DEFAULT, 0 },
	{ "llama3", SF__PRE_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS },
	{ "llama-v3", SF__PRE_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS },
	{ "llama-bpe", SF__PRE_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS },
	{ "falcon3", SF__PRE_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS },
	{ "falcon-h1", SF__PRE_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS },
	{ "pixtral", SF__PRE_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS },
	{ "tekken", SF__PRE_TEKKEN, PRE_IGNORE_MERGES | PRE_ADD_BOS },
	{ "midm-2.0", SF__PRE_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS },
	{ "lfm2", SF__PRE_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS },
	{ "jina-v5-nano", SF__PRE_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS },
	{ "dbrx", SF__PRE_LLAMA3, 0 },
	{ "smaug-bpe", SF__PRE_LLAMA3, 0 },
	{ "glm4", SF__PRE_LLAMA3, PRE_NO_BOS },
	{ "chatglm-bpe", SF__PRE_LLAMA3, PRE_NO_BOS },
	{ "qwen2", SF__PRE_QWEN2, 0 },
	{ "deepseek-r1-qwen", SF__PRE_QWEN2, 0 },
	{ "kormo", SF__PRE_QWEN2, 0 },
	{ "f2llmv2", SF__PRE_QWEN2, 0 },
	{ "megrez", SF__PRE_QWEN2, 0 },
	{ "stablelm2", SF__PRE_QWEN2, 0 },
	{ "hunyuan", SF__PRE_QWEN2, 0 },
	{ "solar-open", SF__PRE_QWEN2, 0 },
	{ "grok-2", SF__PRE_QWEN2, 0 },
	{ "qwen35", SF__PRE_QWEN35, 0 },
	{ "gpt-4o", SF__PRE_GPT4O, 0 },
	{ "llama4", SF__PRE_GPT4O, 0 },
	{ "kanana2", SF__PRE_GPT4O, 0 },
	{ "talkie", SF__PRE_GPT4O, 0 },
	{ "minimax-m2", SF__PRE_GPT4O, 0 },
	{ "gpt-2", SF__PRE_GPT2, 0 },
	{ "phi-2", SF__PRE_GPT2, 0 },
	{ "jina-es", SF__PRE_GPT2, 0 },
	{ "jina-de", SF__PRE_GPT2, 0 },
	{ "gigachat", SF__PRE_GPT2, 0 },
	{ "jina-v2-es", SF__PRE_GPT2, 0 },
	{ "jina-v2-de", SF__PRE_GPT2, 0 },
	{ "a.x-4.0", SF__PRE_GPT2, 0 },
	{ "mellum", SF__PRE_GPT2, 0 },
	{ "modern-bert", SF__PRE_GPT2, 0 },
	{ "jina-v1-en", SF__PRE_GPT2, 0 },
	{ "jina-v2-code", SF__PRE_GPT2, 0 },
	{ "roberta-bpe", SF__PRE_GPT2, 0 },
	{ "mpt", SF__PRE_GPT2, 0 },
	{ "olmo", SF__PRE_GPT2, 0 },
	{ "jais", SF__PRE_GPT2, 0 },
	{ "trillion", SF__PRE_GPT2, 0 },
	{ "granite-docling", SF__PRE_GPT2, 0 },
	{ "exaone4", SF__PRE_GPT2, 0 },
	{ "starcoder", SF__PRE_STARCODER, 0 },
	{ "refact", SF__PRE_STARCODER, 0 },
	{ "command-r", SF__PRE_STARCODER, 0 },
	{ "smollm", SF__PRE_STARCODER, 0 },
	{ "codeshell", SF__PRE_STARCODER, 0 },
	{ "exaone", SF__PRE_STARCODER, 0 },
	{ "minerva-7b", SF__PRE_STARCODER, 0 },
	{ "mellum2", SF__PRE_STARCODER, 0 },
	{ "falcon", SF__PRE_FALCON, 0 },
	{ "deepseek-llm", SF__PRE_DEEPSEEK_LLM, 0 },
	{ "deepseek-coder", SF__PRE_DEEPSEEK_CODER, 0 },
};

static bool str_is(struct sf__str s, const char *c)
{
	return s.p && s.n == strlen(c) && !memcmp(s.p, c, s.n);
}

/* Writes s for a message: at most 40 bytes, control bytes as '?'. */
static const char *printable(struct sf__str s, char *buf, size_t cap)
{
	size_t n = s.n < 40 ? s.n : 40, k = 0;
	for (size_t i = 0; i < n && k + 1 < cap; i++)
		buf[k++] = (unsigned char)s.p[i] < 0x20 || s.p[i] == 0x7f ? '?' : s.p[i];
	buf[k] = 0;
	return buf;
}

void sf__tok_src_init(struct sf__tok_src *src)
{
	memset(src, 0, sizeof(*src));
	for (int i = 0; i < SF__ID_COUNT; i++)
		src->id[i] = -1;
	for (int i = 0; i < 3; i++)
		src->id_old[i] = -1;
	src->add_bos = src->add_eos = src->add_space_prefix = -1;
}

const char *sf__pre_stable_name(enum sf__pre pre)
{
	for (size_t i = 0; i < sizeof(pres) / sizeof(pres[0]); i++)
		if (pres[i].pre == pre)
			return pres[i].name;
	return "unnamed"; /* a pre-tokenizer no name selects: none today */
}

static int pick_kind(struct sf_tok *t, const struct sf__tok_src *src, unsigned *flags,
		     struct sf_err *err)
{
	char buf[48];
	*flags = 0;
	if (str_is(src->model, "llama")) {
		t->kind = SF_TOK_SPM;
		t->pre = SF__PRE_DEFAULT;
		return 0;
	}
	if (!str_is(src->model, "gpt2")) {
		if (!src->model.p)
			return sf_err_set(err, SF_E_NOT_FOUND, "tokenizer.ggml.model is missing");
		return sf_err_set(err, SF_E_MODEL,
				  "tokenizer.ggml.model \"%s\" is not one this engine has (llama, gpt2)",
				  printable(src->model, buf, sizeof(buf)));
	}
	t->kind = SF_TOK_BPE;
	if (!src->has_merges)
		return sf_err_set(err, SF_E_NOT_FOUND,
				  "tokenizer.ggml.merges is missing (a gpt2 tokenizer needs it)");
	if (!src->pre.p || !src->pre.n) {
		t->pre = SF__PRE_DEFAULT;
		return 0;
	}
	for (size_t i = 0; i < sizeof(pres) / sizeof(pres[0]); i++) {
		if (str_is(src->pre, pres[i].name)) {
			t->pre = pres[i].pre;
			*flags = pres[i].flags;
			snprintf(t->pre_name, sizeof(t->pre_name), "%s", pres[i].name);
			return 0;
		}
	}
	return sf_err_set(err, SF_E_MODEL,
			  "tokenizer.ggml.pre \"%s\" is not a pre-tokenizer this engine has",
			  printable(src->pre, buf, sizeof(buf)));
}

/* llama.cpp's token types to attributes. */
static uint32_t type_attr(int32_t type)
{
	switch (type) {
	case 1: return SF_TOK_ATTR_NORMAL;
	case 2: return SF_TOK_ATTR_UNKNOWN;
	case 3: return SF_TOK_ATTR_CONTROL;
	case 4: return SF_TOK_ATTR_USER_DEFINED;
	case 5: return SF_TOK_ATTR_UNUSED;
	case 6: return SF_TOK_ATTR_BYTE;
	}
	return 0; /* undefined */
}

static int add_tokens(struct sf_tok *t, const struct sf__tok_src *src, struct sf_err *err)
{
	char buf[48];
	uint64_t n = src->n_tokens;
	if (!src->tokens || !n)
		return sf_err_set(err, SF_E_NOT_FOUND, "tokenizer.ggml.tokens is missing or empty");
	if (n > SF_TOK_MAX_VOCAB)
		return sf_err_set(err, SF_E_LIMIT, "tokenizer.ggml.tokens has %llu tokens, over %u",
				  (unsigned long long)n, SF_TOK_MAX_VOCAB);
	if (src->scores && src->n_scores < n)
		return sf_err_set(err, SF_E_FORMAT,
				  "tokenizer.ggml.scores has %llu scores for %llu tokens",
				  (unsigned long long)src->n_scores, (unsigned long long)n);
	if (src->types && src->n_types < n)
		return sf_err_set(err, SF_E_FORMAT,
				  "tokenizer.ggml.token_type has %llu types for %llu tokens",
				  (unsigned long long)src->n_types, (unsigned long long)n);
	int rc = sf__strtab_init(&t->str, (uint32_t)n, err);
	if (rc)
		return rc;
	t->n_vocab = (uint32_t)n;
	t->score = calloc(n, sizeof(*t->score));
	t->attr = calloc(n, sizeof(*t->attr));
	if (!t->score || !t->attr)
		return sf_err_set(err, SF_E_NOMEM, "no memory for %llu tokens", (unsigned long long)n);
	for (uint32_t i = 0; i < n; i++) {
		struct sf__str s = src->tokens[i];
		char empty[32];
		if (s.n > SF_TOK_MAX_TOKEN_LEN)
			return sf_err_set(err, SF_E_LIMIT, "token %u is %zu bytes long, over %u", i,
					  s.n, SF_TOK_MAX_TOKEN_LEN);
		if (!s.n) { /* llama.cpp names an empty token so */
			s.n = (size_t)snprintf(empty, sizeof(empty), "[EMPTY_%u]", i);
			s.p = empty;
		}
		int32_t id;
		bool added;
		if ((rc = sf__strtab_add(&t->str, s.p, s.n, &id, &added, err)))
			return rc;
		if (!added)
			return sf_err_set(err, SF_E_FORMAT,
					  "tokenizer.ggml.tokens has \"%s\" twice (tokens %d and %u)",
					  printable(s, buf, sizeof(buf)), id, i);
		float sc = src->scores ? src->scores[i] : 0.0f;
		t->score[i] = sc == 0.0f ? 0.0f : sc; /* -0 ranks as 0 */
		t->attr[i] = src->types ? type_attr(src->types[i]) : SF_TOK_ATTR_NORMAL;
	}
	return 0;
}

/* llama.cpp's default ids for the model, disabled when past the vocabulary, then the file's
 * (an id past the vocabulary keeps the default). */
static void set_ids(struct sf_tok *t, const struct sf__tok_src *src, unsigned flags)
{
	for (int i = 0; i < SF__ID_COUNT; i++)
		t->id[i] = SF_TOK_NONE;
	if (t->kind == SF_TOK_SPM) {
		t->id[SF__ID_BOS] = 1;
		t->id[SF__ID_EOS] = 2;
		t->id[SF__ID_UNK] = 0;
	} else {
		t->id[SF__ID_BOS] = 11;
		t->id[SF__ID_EOS] = 11;
	}
	if (flags & PRE_NO_BOS)
		t->id[SF__ID_BOS] = SF_TOK_NONE;
	for (int i = 0; i < SF__ID_COUNT; i++) {
		if (t->id[i] != SF_TOK_NONE && t->id[i] >= t->n_vocab)
			t->id[i] = SF_TOK_NONE;
		if (src->id[i] >= 0 && src->id[i] < t->n_vocab)
			t->id[i] = (uint32_t)src->id[i];
	}
	for (int i = 0; i < 3; i++)
		if (src->id_old[i] >= 0 && src->id_old[i] < t->n_vocab)
			t->id[SF__ID_FIM_PRE + i] = (uint32_t)src->id_old[i];
}

/* SPM's byte fallback: <0xNN>, else the byte itself as a token. */
static void set_byte_tokens(struct sf_tok *t)
{
	static const char hex[] = "0123456789ABCDEF";
	for (unsigned b = 0; b < 256; b++) {
		char name[6] = { '<', '0', 'x', hex[b >> 4], hex[b & 15], '>' };
		char raw = (char)b;
		t->byte_tok[b] = sf__tok_lookup(t, name, sizeof(name));
		if (t->byte_tok[b] < 0)
			t->byte_tok[b] = sf__tok_lookup(t, &raw, 1);
	}
}

int sf__tok_build(const struct sf__tok_src *src, struct sf_tok **out, struct sf_err *err)
{
	*out = NULL;
	struct sf_tok *t = calloc(1, sizeof(*t));
	if (!t)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a tokenizer");
	unsigned flags;
	int rc = pick_kind(t, src, &flags, err);
	if (!rc)
		rc = add_tokens(t, src, err);
	if (rc)
		goto fail;
	set_ids(t, src, flags);
	t->ignore_merges = flags & PRE_IGNORE_MERGES;
	t->add_space_prefix = t->kind == SF_TOK_SPM;
	t->add_bos = t->kind == SF_TOK_SPM || (flags & PRE_ADD_BOS);
	t->add_eos = false;
	if (src->add_space_prefix >= 0)
		t->add_space_prefix = src->add_space_prefix;
	if (src->add_bos >= 0)
		t->add_bos = src->add_bos;
	if (src->add_eos >= 0)
		t->add_eos = src->add_eos;
	if (t->add_bos && t->id[SF__ID_BOS] == SF_TOK_NONE) {
		rc = sf_err_set(err, SF_E_MODEL,
				"the tokenizer adds a BOS token (add_bos_token) but has none");
		goto fail;
	}
	if (t->add_eos && t->id[SF__ID_EOS] == SF_TOK_NONE) {
		rc = sf_err_set(err, SF_E_MODEL,
				"the tokenizer adds an EOS token (add_eos_token) but has none");
		goto fail;
	}
	if (t->kind == SF_TOK_SPM)
		set_byte_tokens(t);
	else if ((rc = sf__tok_merges(t, src, err)) || (rc = sf__pretok_init(&t->pretok, t->pre, err)))
		goto fail;
	if ((rc = sf__tok_specials(t, src, err)) || (rc = sf__tok_pieces(t, err)))
		goto fail;
	*out = t;
	return 0;
fail:
	sf_tok_free(t);
	return rc;
}

static void spset_free(struct sf__spset *s)
{
	free(s->ids);
	free(s->hash);
	free(s->cls);
	free(s->slots);
}

void sf_tok_free(struct sf_tok *t)
{
	if (!t)
		return;
	sf__strtab_free(&t->str);
	free(t->score);
	free(t->attr);
	free(t->eog);
	free(t->piece);
	free(t->piece_off);
	free(t->specials);
	spset_free(&t->sp_all);
	spset_free(&t->sp_user);
	sf__merges_free(&t->merges);
	sf__pretok_free(&t->pretok);
	free(t);
}
