/* sf_tok_load: the tokenizer.ggml.* metadata of a GGUF file read into a description, then
 * built (everything copied: the file may be closed after). */
#include "tok/tok.h"

#include <stdlib.h>
#include <string.h>

#include <superfluid/gguf.h>

const char *const sf__tok_id_keys[SF__ID_COUNT] = {
	[SF__ID_BOS] = "tokenizer.ggml.bos_token_id",
	[SF__ID_EOS] = "tokenizer.ggml.eos_token_id",
	[SF__ID_EOT] = "tokenizer.ggml.eot_token_id",
	[SF__ID_EOM] = "tokenizer.ggml.eom_token_id",
	[SF__ID_UNK] = "tokenizer.ggml.unknown_token_id",
	[SF__ID_SEP] = "tokenizer.ggml.seperator_token_id", /* sic, as llama.cpp writes it */
	[SF__ID_PAD] = "tokenizer.ggml.padding_token_id",
	[SF__ID_MASK] = "tokenizer.ggml.mask_token_id",
	[SF__ID_FIM_PRE] = "tokenizer.ggml.fim_pre_token_id",
	[SF__ID_FIM_SUF] = "tokenizer.ggml.fim_suf_token_id",
	[SF__ID_FIM_MID] = "tokenizer.ggml.fim_mid_token_id",
	[SF__ID_FIM_PAD] = "tokenizer.ggml.fim_pad_token_id",
	[SF__ID_FIM_REP] = "tokenizer.ggml.fim_rep_token_id",
	[SF__ID_FIM_SEP] = "tokenizer.ggml.fim_sep_token_id",
};

static const char *const old_id_keys[3] = {
	"tokenizer.ggml.prefix_token_id",
	"tokenizer.ggml.suffix_token_id",
	"tokenizer.ggml.middle_token_id",
};

/* An optional string: 0 when present or absent (s->p NULL), SF_E_TYPE otherwise. */
static int opt_str(const struct sf_gguf *g, const char *key, struct sf__str *s, struct sf_err *err)
{
	struct sf_gguf_str v;
	int rc = sf_gguf_get_str(g, key, &v, err);
	s->p = NULL;
	s->n = 0;
	if (rc == SF_E_NOT_FOUND)
		return 0;
	if (rc)
		return rc;
	s->p = v.ptr;
	s->n = (size_t)v.len;
	return 0;
}

/* An optional id: -1 when absent or negative, SF_E_TYPE for a non-integer. */
static int opt_id(const struct sf_gguf *g, const char *key, int64_t *id, struct sf_err *err)
{
	uint32_t v;
	int rc = sf_gguf_get_u32(g, key, &v, err);
	*id = rc ? -1 : (int64_t)v;
	return rc == SF_E_NOT_FOUND || rc == SF_E_RANGE ? 0 : rc;
}

static int opt_bool(const struct sf_gguf *g, const char *key, int8_t *b, struct sf_err *err)
{
	bool v;
	int rc = sf_gguf_get_bool(g, key, &v, err);
	*b = rc ? -1 : v;
	return rc == SF_E_NOT_FOUND ? 0 : rc;
}

/* The string array key (required or not) into a malloc'd list. */
static int str_array(const struct sf_gguf *g, const char *key, bool required, uint64_t max,
		     struct sf__str **list, uint64_t *n, bool *present, struct sf_err *err)
{
	const struct sf_gguf_kv *arr;
	int rc = sf_gguf_get_arr(g, key, SF_GGUF_STRING, &arr, err);
	*list = NULL;
	*n = 0;
	*present = false;
	if (rc == SF_E_NOT_FOUND && !required)
		return 0;
	if (rc)
		return rc;
	if (arr->n > max)
		return sf_err_set(err, SF_E_LIMIT, "'%s' has %llu entries, over %llu", key,
				  (unsigned long long)arr->n, (unsigned long long)max);
	*list = malloc((arr->n ? arr->n : 1) * sizeof(**list));
	if (!*list)
		return sf_err_set(err, SF_E_NOMEM, "no memory to read '%s'", key);
	uint64_t pos = 0;
	struct sf_gguf_str s;
	while (*n < arr->n && sf_gguf_arr_str_next(arr, &pos, &s))
		(*list)[(*n)++] = (struct sf__str){ s.ptr, (size_t)s.len };
	if (*n != arr->n)
		return sf_err_set(err, SF_E_FORMAT, "'%s' holds fewer strings than it says", key);
	*present = true;
	return 0;
}

/* Scores (F32, or I32 as llama.cpp also takes) for the first n_tokens tokens. */
static int read_scores(const struct sf_gguf *g, uint64_t n_tokens, float **scores, uint64_t *n,
		       struct sf_err *err)
{
	const char *key = "tokenizer.ggml.scores";
	const struct sf_gguf_kv *arr;
	int rc = sf_gguf_get_arr(g, key, SF_GGUF_F32, &arr, err);
	if (rc == SF_E_TYPE)
		rc = sf_gguf_get_arr(g, key, SF_GGUF_I32, &arr, err);
	*scores = NULL;
	*n = 0;
	if (rc == SF_E_NOT_FOUND)
		return 0;
	if (rc)
		return sf_err_set(err, rc, "'%s' is not an array of F32 or I32", key);
	uint64_t k = arr->n < n_tokens ? arr->n : n_tokens;
	*scores = malloc((k ? k : 1) * sizeof(**scores));
	if (!*scores)
		return sf_err_set(err, SF_E_NOMEM, "no memory to read '%s'", key);
	for (uint64_t i = 0; i < k; i++)
		(*scores)[i] = sf_gguf_arr_f32(arr, i);
	*n = arr->n;
	return 0;
}

static int read_types(const struct sf_gguf *g, uint64_t n_tokens, int32_t **types, uint64_t *n,
		      struct sf_err *err)
{
	const struct sf_gguf_kv *arr;
	int rc = sf_gguf_get_arr(g, "tokenizer.ggml.token_type", SF_GGUF_I32, &arr, err);
	*types = NULL;
	*n = 0;
	if (rc == SF_E_NOT_FOUND)
		return 0;
	if (rc)
		return rc;
	uint64_t k = arr->n < n_tokens ? arr->n : n_tokens;
	*types = malloc((k ? k : 1) * sizeof(**types));
	if (!*types)
		return sf_err_set(err, SF_E_NOMEM, "no memory to read tokenizer.ggml.token_type");
	for (uint64_t i = 0; i < k; i++)
		(*types)[i] = (int32_t)sf_gguf_arr_i64(arr, i);
	*n = arr->n;
	return 0;
}

int sf_tok_load(const struct sf_gguf *g, struct sf_tok **out, struct sf_err *err)
{
	struct sf__tok_src src;
	struct sf__str *tokens = NULL, *merges = NULL;
	float *scores = NULL;
	int32_t *types = NULL;
	bool present;
	int rc;
	*out = NULL;
	sf__tok_src_init(&src);
	if ((rc = opt_str(g, "tokenizer.ggml.model", &src.model, err)) ||
	    (rc = opt_str(g, "tokenizer.ggml.pre", &src.pre, err)))
		goto done;
	(void)opt_str(g, "general.name", &src.name, NULL); /* only names: a bad one is no name */
	(void)opt_str(g, "general.architecture", &src.arch, NULL);
	if (!src.model.p) {
		rc = sf_err_set(err, SF_E_NOT_FOUND, "the file has no tokenizer.ggml.model");
		goto done;
	}
	if ((rc = str_array(g, "tokenizer.ggml.tokens", true, SF_TOK_MAX_VOCAB, &tokens,
			    &src.n_tokens, &present, err)))
		goto done;
	src.tokens = tokens;
	if ((rc = read_scores(g, src.n_tokens, &scores, &src.n_scores, err)) ||
	    (rc = read_types(g, src.n_tokens, &types, &src.n_types, err)))
		goto done;
	src.scores = scores;
	src.types = types;
	if ((rc = str_array(g, "tokenizer.ggml.merges", false, SF_TOK_MAX_MERGES, &merges,
			    &src.n_merges, &src.has_merges, err)))
		goto done;
	src.merges = merges;
	for (int i = 0; i < SF__ID_COUNT; i++)
		if ((rc = opt_id(g, sf__tok_id_keys[i], &src.id[i], err)))
			goto done;
	for (int i = 0; i < 3; i++)
		if ((rc = opt_id(g, old_id_keys[i], &src.id_old[i], err)))
			goto done;
	if ((rc = opt_bool(g, "tokenizer.ggml.add_bos_token", &src.add_bos, err)) ||
	    (rc = opt_bool(g, "tokenizer.ggml.add_eos_token", &src.add_eos, err)) ||
	    (rc = opt_bool(g, "tokenizer.ggml.add_space_prefix", &src.add_space_prefix, err)))
		goto done;
	rc = sf__tok_build(&src, out, err);
done:
	free(tokens);
	free(merges);
	free(scores);
	free(types);
	return rc;
}
