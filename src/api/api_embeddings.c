/* POST /v1/embeddings' request and answer (api_embeddings.h). */
#include "api/api_embeddings.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <superfluid/wire.h>

#include "api/api_request_internal.h"

#define MAX_ID 0x7fffffff

/* One input's kind and size, checked (param its name). */
static int check_input(const json_t *v, const char *param, size_t *bytes, struct sf_api_error *e)
{
	if (json_is_string(v)) {
		if (!json_string_length(v))
			return sf_api_bad(e, param, "%s must not be empty", param);
		*bytes = json_string_length(v);
		return 0;
	}
	if (!json_is_array(v) || !json_array_size(v))
		return sf__api_type(e, param, "a non-empty string or array of token ids", v);
	size_t i;
	const json_t *t;
	json_array_foreach(v, i, t) {
		if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > MAX_ID) {
			char p[SF__API_PARAM_MAX];
			sf__api_path(p, "%s[%zu]", param, i);
			return sf__api_value(e, p, "a token id from 0 to 2147483647", t);
		}
	}
	*bytes = json_array_size(v) * sizeof(uint32_t);
	return 0;
}

/* input: a string, token ids, or an array of strings or of arrays of token ids. */
static int inputs_of(const json_t *in, struct sf_api_embed_req *r, struct sf_api_error *e)
{
	size_t n = 1;
	bool ids = json_is_array(in) && json_is_integer(json_array_get(in, 0));
	if (json_is_array(in) && !ids) {
		n = json_array_size(in);
		if (!n)
			return sf_api_bad(e, "input", "input must hold at least one input");
		if (n > SF_EMBED_MAX_INPUTS)
			return sf__api_too_many(e, "input", "inputs", n, SF_EMBED_MAX_INPUTS);
	} else if (!json_is_string(in) && !ids) {
		return sf__api_type(e, "input", "a string, an array of strings, token ids, or an "
				    "array of arrays of token ids", in);
	}
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		const json_t *v = n == 1 && !json_is_array(in) ? in
				  : ids ? in : json_array_get(in, i);
		char p[SF__API_PARAM_MAX];
		if (n == 1 && (json_is_string(in) || ids))
			sf__api_path(p, "input");
		else
			sf__api_path(p, "input[%zu]", i);
		size_t bytes = 0;
		if (check_input(v, p, &bytes, e))
			return -1;
		total += bytes + 4;
	}
	if (total > SF_MAX_OPAQUE / 2)
		return sf_api_fail(e, 413, "invalid_request_error", "request_too_large", "input",
				   "the inputs hold %zu bytes, past the %u one request may embed",
				   total, SF_MAX_OPAQUE / 2);
	r->inputs = calloc(n, sizeof(*r->inputs));
	r->store = malloc(total + 1);
	if (!r->inputs || !r->store)
		return sf__api_nomem(e);
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		const json_t *v = n == 1 && !json_is_array(in) ? in
				  : ids ? in : json_array_get(in, i);
		struct sf_embed_input *x = &r->inputs[i];
		if (json_is_string(v)) {
			x->kind = SF_EMBED_TEXT;
			x->len = (uint32_t)json_string_length(v);
			memcpy(r->store + at, json_string_value(v), x->len);
			x->text = r->store + at;
			at += x->len;
		} else {
			x->kind = SF_EMBED_TOKENS;
			x->len = (uint32_t)json_array_size(v);
			at = (at + 3) & ~(size_t)3;
			uint32_t *t = (uint32_t *)(void *)(r->store + at);
			for (uint32_t k = 0; k < x->len; k++)
				t[k] = (uint32_t)json_integer_value(json_array_get(v, k));
			x->tokens = t;
			at += (size_t)x->len * 4;
		}
	}
	r->n = (uint32_t)n;
	return 0;
}

static int parse_root(const json_t *root, struct sf_api_embed_req *r, struct sf_api_error *e)
{
	const json_t *m = json_object_get(root, "model");
	if (!m)
		return sf__api_missing(e, "model");
	if (!json_is_string(m) || !json_string_length(m) || json_string_length(m) > 256)
		return sf__api_type(e, "model", "a model's name (GET /v1/models lists them)", m);
	if (sf__api_dup(m, &r->model, e))
		return -1;
	const json_t *in = json_object_get(root, "input");
	if (!in)
		return sf__api_missing(e, "input");
	if (inputs_of(in, r, e))
		return -1;
	const json_t *f = sf__api_opt(root, "encoding_format");
	if (f && (!json_is_string(f) || (strcmp(json_string_value(f), "float") &&
					 strcmp(json_string_value(f), "base64"))))
		return sf__api_value(e, "encoding_format", "\"float\" or \"base64\"", f);
	r->base64 = f && !strcmp(json_string_value(f), "base64");
	bool given = false;
	json_int_t d = 0;
	if (sf__api_opt_int(root, "dimensions", 1, 1 << 20, "an integer of at least 1", &given, &d,
			    e))
		return -1;
	r->dimensions = (uint32_t)d;
	return sf__api_opt_str(root, "user", "user", &r->user, e);
}

int sf_api_parse_embeddings(const uint8_t *body, size_t len, struct sf_api_embed_req *r,
			    struct sf_api_error *e)
{
	memset(r, 0, sizeof(*r));
	json_error_t jerr;
	json_t *root = json_loadb(body ? (const char *)body : "", body ? len : 0, 0, &jerr);
	if (!root) {
		char text[256];
		sf__api_ascii(jerr.text, strlen(jerr.text), false, sizeof(text), text, sizeof(text));
		return sf_api_fail(e, 400, "invalid_request_error", NULL, NULL,
				   "We could not parse the JSON body of your request: %s (line %d, "
				   "column %d)", text, jerr.line, jerr.column);
	}
	int rc = json_is_object(root) ? parse_root(root, r, e)
		 : sf_api_fail(e, 400, "invalid_request_error", "invalid_type", NULL,
			       "the request body must be a JSON object");
	json_decref(root);
	if (rc)
		sf_api_embed_req_free(r);
	return rc;
}

void sf_api_embed_req_free(struct sf_api_embed_req *r)
{
	free(r->model);
	free(r->inputs);
	free(r->user);
	free(r->store);
	memset(r, 0, sizeof(*r));
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* v[0..n) as little-endian float32 bytes in base64 (malloc'd). */
static char *base64_of(const float *v, uint32_t n)
{
	size_t bytes = (size_t)n * 4, olen = (bytes + 2) / 3 * 4;
	uint8_t *raw = malloc(bytes + 3);
	char *out = malloc(olen + 1);
	if (!raw || !out) {
		free(raw);
		free(out);
		return NULL;
	}
	for (uint32_t j = 0; j < n; j++) {
		uint32_t bits;
		memcpy(&bits, &v[j], 4);
		for (int k = 0; k < 4; k++)
			raw[4 * j + k] = (uint8_t)(bits >> (8 * k));
	}
	raw[bytes] = raw[bytes + 1] = raw[bytes + 2] = 0;
	size_t o = 0;
	for (size_t i = 0; i < bytes; i += 3) {
		uint32_t w = (uint32_t)raw[i] << 16 | (uint32_t)raw[i + 1] << 8 | raw[i + 2];
		out[o++] = b64[w >> 18 & 63];
		out[o++] = b64[w >> 12 & 63];
		out[o++] = i + 1 < bytes ? b64[w >> 6 & 63] : '=';
		out[o++] = i + 2 < bytes ? b64[w & 63] : '=';
	}
	out[o] = 0;
	free(raw);
	return out;
}

char *sf_api_embeddings_json(const struct sf_api_embed_req *r, const uint8_t *res, size_t len,
			     struct sf_api_error *e)
{
	uint32_t n, dim;
	struct sf_err err;
	if (sf_embed_result_check(res, len, &n, &dim, &err) || n != r->n) {
		sf_api_fail(e, 502, "server_error", NULL, NULL, "the node's embeddings do not hold "
			    "together: %s", n != r->n ? "another count of inputs" : err.msg);
		return NULL;
	}
	uint32_t d = r->dimensions ? r->dimensions : dim;
	if (d > dim) {
		sf_api_fail(e, 400, "invalid_request_error", "invalid_value", "dimensions",
			    "dimensions must be at most the %u values model %s gives (got %u)", dim,
			    r->model, d);
		return NULL;
	}
	float *v = malloc((size_t)(dim ? dim : 1) * sizeof(float));
	json_t *data = json_array();
	uint64_t tokens = 0;
	bool ok = v && data;
	for (uint32_t i = 0; ok && i < n; i++) {
		double sum = 0;
		for (uint32_t j = 0; j < d; j++) {
			v[j] = sf_embed_result_value(res, dim, i, j);
			sum += (double)v[j] * v[j];
		}
		if (d < dim && sum > 0) /* the first d values, scaled to length 1 again */
			for (uint32_t j = 0; j < d; j++)
				v[j] = (float)(v[j] / sqrt(sum));
		tokens += sf_embed_result_tokens(res, dim, i);
		json_t *emb;
		if (r->base64) {
			char *s = base64_of(v, d);
			emb = s ? json_string(s) : NULL;
			free(s);
		} else {
			emb = json_array();
			for (uint32_t j = 0; emb && j < d; j++)
				if (json_array_append_new(emb, json_real(v[j]))) {
					json_decref(emb);
					emb = NULL;
				}
		}
		ok = emb && !json_array_append_new(data, json_pack("{s:s,s:I,s:o}", "object",
								   "embedding", "index", (json_int_t)i,
								   "embedding", emb));
	}
	free(v);
	json_t *o = ok ? json_pack("{s:s,s:o,s:s,s:{s:I,s:I}}", "object", "list", "data", data,
				   "model", r->model, "usage", "prompt_tokens", (json_int_t)tokens,
				   "total_tokens", (json_int_t)tokens)
		       : NULL;
	if (!ok)
		json_decref(data);
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
	json_decref(o);
	if (!text)
		sf_api_fail(e, 500, "server_error", NULL, NULL, "the head is out of memory");
	return text;
}
