/* The special tokens: llama.cpp's adjustments of a vocabulary's ids and attributes, done by
 * the tokens' texts because the files do not say (end-of-turn and FIM tokens, "unused" control
 * tokens, the end-of-generation set, gpt-oss's and Gemma 4's exceptions, strip flags), then
 * the sets the encoder cuts out of text. Where llama.cpp takes the first match in its hash
 * map's order, this takes the first name of its list that the vocabulary has. */
#include "tok/tok.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

/* Written in octal: \342\226\201 is U+2581 (SentencePiece's space), \357\275\234 U+FF5C
 * (DeepSeek's bar). */

static const char *const eot_names[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
	"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
	"<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>",
	"<end_of_utterance>", NULL,
};
static const char *const eom_names[] = { "<|eom_id|>", NULL };
static const char *const fim_pre_names[] = {
	"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\357\275\234fim\342\226\201begin\357\275\234>",
	"<PRE>", "\342\226\201<PRE>", "<|code_prefix|>", "<|prefix|>", NULL,
};
static const char *const fim_suf_names[] = {
	"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\357\275\234fim\342\226\201hole\357\275\234>",
	"<SUF>", "\342\226\201<SUF>", "<|code_suffix|>", "<|suffix|>", NULL,
};
static const char *const fim_mid_names[] = {
	"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\357\275\234fim\342\226\201end\357\275\234>",
	"<MID>", "\342\226\201<MID>", "<|code_middle|>", "<|middle|>", NULL,
};
static const char *const fim_pad_names[] = {
	"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL,
};
static const char *const fim_rep_names[] = {
	"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL,
};
static const char *const fim_sep_names[] = { "<|file_sep|>", NULL };

/* Tokens that end a generation whatever the ids say. */
static const char *const eog_names[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
	"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
	"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
	"<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>", "[e~[", NULL,
};

/* gpt-oss's tokens that are always rendered (made USER_DEFINED). */
static const char *const rendered_names[] = {
	"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL,
};

static int32_t find_name(const struct sf_tok *t, const char *name)
{
	return sf__tok_lookup(t, name, strlen(name));
}

static bool text_is(const struct sf_tok *t, uint32_t id, const char *name)
{
	size_t n;
	const char *s = sf__strtab_str(&t->str, id, &n);
	return n == strlen(name) && !memcmp(s, name, n);
}

static void detect(struct sf_tok *t, enum sf__id which, const char *const *names)
{
	if (t->id[which] != SF_TOK_NONE)
		return;
	for (; *names; names++) {
		int32_t id = find_name(t, *names);
		if (id >= 0) {
			t->id[which] = (uint32_t)id;
			t->attr[id] |= SF_TOK_ATTR_CONTROL;
			return;
		}
	}
}

static void eog_set(struct sf_tok *t, uint32_t id, bool on)
{
	if (id == SF_TOK_NONE)
		return;
	if (on)
		t->eog[id / 8] |= (uint8_t)(1u << (id % 8));
	else
		t->eog[id / 8] &= (uint8_t)~(1u << (id % 8));
}

static bool eog_has(const struct sf_tok *t, uint32_t id)
{
	return t->eog[id / 8] >> (id % 8) & 1;
}

/* Whether the token's text (up to a NUL, as strstr sees it) holds "unused". */
static bool says_unused(const struct sf_tok *t, uint32_t id)
{
	size_t n;
	const char *s = sf__strtab_str(&t->str, id, &n);
	const char *nul = memchr(s, 0, n);
	if (nul)
		n = (size_t)(nul - s);
	return memmem(s, n, "unused", 6) != NULL;
}

/* The exceptions llama.cpp makes for gpt-oss/Solar Open's <|end|> and Gemma 4's </s>. */
static void eog_exceptions(struct sf_tok *t)
{
	bool has_return = false, has_call = false, has_end = false, has_flush = false;
	bool has_tool_response = false;
	int32_t end = -1, s = -1;
	for (uint32_t id = 0; id < t->n_vocab; id++) {
		if (!eog_has(t, id))
			continue;
		if (text_is(t, id, "<|return|>"))
			has_return = true;
		else if (text_is(t, id, "<|call|>") || text_is(t, id, "<|calls|>"))
			has_call = true;
		else if (text_is(t, id, "<|flush|>"))
			has_flush = true;
		else if (text_is(t, id, "<|end|>"))
			has_end = true, end = (int32_t)id;
		if (text_is(t, id, "<|tool_response>"))
			has_tool_response = true;
		else if (text_is(t, id, "</s>"))
			s = (int32_t)id;
	}
	if (has_end && has_call && (has_return || has_flush)) {
		eog_set(t, (uint32_t)end, false);
		t->attr[end] = SF_TOK_ATTR_USER_DEFINED;
	}
	if (has_tool_response && s >= 0) {
		eog_set(t, (uint32_t)s, false);
		t->attr[s] = SF_TOK_ATTR_NORMAL;
	}
}

static bool contains(struct sf__str s, const char *what, bool lower)
{
	size_t k = strlen(what);
	if (!s.p || s.n < k)
		return false;
	for (size_t i = 0; i + k <= s.n; i++) {
		size_t j = 0;
		while (j < k && (lower ? tolower((unsigned char)s.p[i + j]) : s.p[i + j]) == what[j])
			j++;
		if (j == k)
			return true;
	}
	return false;
}

static void set_strip(struct sf_tok *t, const char *name, uint32_t bit, bool on)
{
	int32_t id = find_name(t, name);
	if (id < 0)
		return;
	if (on)
		t->attr[id] |= bit;
	else
		t->attr[id] &= ~bit;
}

/* llama.cpp sets strip flags by the model's or tokenizer's name. */
static void strip_flags(struct sf_tok *t, const struct sf__tok_src *src)
{
	if (contains(src->pre, "jina-v2-de", false) || contains(src->pre, "jina-v2-es", false) ||
	    contains(src->pre, "jina-v2-code", false) || contains(src->arch, "nomic-bert-moe", false) ||
	    contains(src->arch, "jina-bert-v3", false)) {
		set_strip(t, "<mask>", SF_TOK_ATTR_LSTRIP, true);
	} else if (contains(src->name, "phi-3", true) || contains(src->name, "phi3", true)) {
		for (uint32_t i = 0; i < t->n_specials; i++)
			t->attr[t->specials[i].id] |= SF_TOK_ATTR_RSTRIP;
		set_strip(t, "</s>", SF_TOK_ATTR_RSTRIP, true);
		set_strip(t, "<unk>", SF_TOK_ATTR_RSTRIP, false);
		set_strip(t, "<s>", SF_TOK_ATTR_RSTRIP, false);
		set_strip(t, "<|endoftext|>", SF_TOK_ATTR_RSTRIP, false);
	} else if (contains(src->name, "modern-bert", true)) {
		set_strip(t, "[MASK]", SF_TOK_ATTR_LSTRIP, true);
	}
}

#define SPECIAL_ATTRS (SF_TOK_ATTR_CONTROL | SF_TOK_ATTR_USER_DEFINED | SF_TOK_ATTR_UNKNOWN)

/* The special tokens in id order, their texts copied with a NUL after each. */
static int list_specials(struct sf_tok *t, struct sf_err *err)
{
	size_t bytes = 0;
	uint32_t n = 0;
	for (uint32_t id = 0; id < t->n_vocab; id++) {
		if (t->attr[id] & SPECIAL_ATTRS) {
			size_t len;
			sf__strtab_str(&t->str, id, &len);
			bytes += len + 1;
			n++;
		}
	}
	t->specials = malloc(n * sizeof(*t->specials) + bytes + 1);
	if (!t->specials)
		return sf_err_set(err, SF_E_NOMEM, "no memory for %u special tokens", n);
	char *text = (char *)(t->specials + n);
	t->n_specials = 0;
	for (uint32_t id = 0; id < t->n_vocab; id++) {
		if (!(t->attr[id] & SPECIAL_ATTRS))
			continue;
		size_t len;
		const char *s = sf__strtab_str(&t->str, id, &len);
		memcpy(text, s, len);
		text[len] = 0;
		t->specials[t->n_specials++] = (struct sf_tok_special){
			.text = text, .len = len, .id = id, .attr = 0,
		};
		text += len + 1;
	}
	return 0;
}

/* Longest first, then by id. */
static int by_length(const void *a, const void *b, void *arg)
{
	const struct sf_tok *t = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	size_t lx = t->str.off[x + 1] - t->str.off[x], ly = t->str.off[y + 1] - t->str.off[y];
	if (lx != ly)
		return lx > ly ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* The specials (only the USER_DEFINED ones that are not also CONTROL or UNKNOWN when
 * user_only) longest first, their length classes and their hash table. */
static int build_set(struct sf_tok *t, struct sf__spset *set, bool user_only, struct sf_err *err)
{
	memset(set, 0, sizeof(*set));
	set->base = t->sp_base;
	uint32_t n = 0;
	for (uint32_t i = 0; i < t->n_specials; i++) {
		uint32_t a = t->attr[t->specials[i].id];
		if (!user_only || !(a & (SF_TOK_ATTR_CONTROL | SF_TOK_ATTR_UNKNOWN)))
			n++;
	}
	if (!n)
		return 0;
	set->n_slots = 16;
	while (set->n_slots < 2 * n)
		set->n_slots <<= 1;
	set->ids = malloc(n * sizeof(*set->ids));
	set->hash = malloc(n * sizeof(*set->hash));
	set->cls = calloc(n, sizeof(*set->cls));
	set->slots = calloc(set->n_slots, sizeof(*set->slots));
	if (!set->ids || !set->hash || !set->cls || !set->slots)
		return sf_err_set(err, SF_E_NOMEM, "no memory for %u special tokens", n);
	for (uint32_t i = 0; i < t->n_specials; i++) {
		uint32_t a = t->attr[t->specials[i].id];
		if (!user_only || !(a & (SF_TOK_ATTR_CONTROL | SF_TOK_ATTR_UNKNOWN)))
			set->ids[set->n++] = t->specials[i].id;
	}
	qsort_r(set->ids, n, sizeof(*set->ids), by_length, t);
	for (uint32_t r = 0; r < n; r++) {
		size_t len;
		const uint8_t *s = (const uint8_t *)sf__strtab_str(&t->str, set->ids[r], &len);
		uint64_t h = 0;
		for (size_t i = 0; i < len; i++)
			h = h * set->base + s[i];
		set->hash[r] = h;
		struct sf__spclass *c = set->n_cls ? &set->cls[set->n_cls - 1] : NULL;
		if (!c || c->len != len) {
			c = &set->cls[set->n_cls++];
			c->len = (uint32_t)len;
			c->first = r;
			c->pow = 1;
			for (size_t i = 1; i < len; i++)
				c->pow *= set->base;
		}
		c->n++;
		c->lead[s[0] / 8] |= (uint8_t)(1u << (s[0] % 8));
		uint32_t k = sf__spset_slot(set, h, len);
		while (set->slots[k])
			k = (k + 1) & (set->n_slots - 1);
		set->slots[k] = r + 1;
	}
	return 0;
}

int sf__tok_specials(struct sf_tok *t, const struct sf__tok_src *src, struct sf_err *err)
{
	detect(t, SF__ID_EOT, eot_names);
	detect(t, SF__ID_EOM, eom_names);
	detect(t, SF__ID_FIM_PRE, fim_pre_names);
	detect(t, SF__ID_FIM_SUF, fim_suf_names);
	detect(t, SF__ID_FIM_MID, fim_mid_names);
	detect(t, SF__ID_FIM_PAD, fim_pad_names);
	detect(t, SF__ID_FIM_REP, fim_rep_names);
	detect(t, SF__ID_FIM_SEP, fim_sep_names);
	for (uint32_t id = 0; id < t->n_vocab; id++)
		if ((t->attr[id] & SF_TOK_ATTR_CONTROL) && says_unused(t, id))
			t->attr[id] |= SF_TOK_ATTR_UNUSED;

	t->eog = calloc(t->n_vocab / 8 + 1, 1);
	if (!t->eog)
		return sf_err_set(err, SF_E_NOMEM, "no memory for the end-of-generation set");
	eog_set(t, t->id[SF__ID_FIM_PAD], true);
	eog_set(t, t->id[SF__ID_FIM_REP], true);
	eog_set(t, t->id[SF__ID_FIM_SEP], true);
	for (const char *const *name = eog_names; *name; name++) {
		int32_t id = find_name(t, *name);
		if (id >= 0) {
			eog_set(t, (uint32_t)id, true);
			t->attr[id] |= SF_TOK_ATTR_CONTROL;
		}
	}
	for (const char *const *name = rendered_names; *name; name++) {
		int32_t id = find_name(t, *name);
		if (id >= 0)
			t->attr[id] = SF_TOK_ATTR_USER_DEFINED;
	}
	eog_set(t, t->id[SF__ID_EOS], true);
	eog_set(t, t->id[SF__ID_EOT], true);
	eog_set(t, t->id[SF__ID_EOM], true);
	eog_exceptions(t);

	int rc = list_specials(t, err);
	if (rc)
		return rc;
	strip_flags(t, src);
	for (uint32_t i = 0; i < t->n_specials; i++)
		t->specials[i].attr = t->attr[t->specials[i].id];
	randombytes_buf(&t->sp_base, sizeof(t->sp_base));
	t->sp_base |= 1;
	if ((rc = build_set(t, &t->sp_all, false, err)) || (rc = build_set(t, &t->sp_user, true, err)))
		return rc;
	if (t->sp_all.n_cls > SF_TOK_MAX_SPECIAL_LENGTHS)
		return sf_err_set(err, SF_E_LIMIT,
				  "the special tokens come in %u different lengths, over %u",
				  t->sp_all.n_cls, SF_TOK_MAX_SPECIAL_LENGTHS);
	return 0;
}
