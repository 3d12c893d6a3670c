/* The "embed" state operation's arguments and result (superfluid/embed.h). */
#include <superfluid/embed.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/wire.h>

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int sf_embed_args_put(const struct sf_embed_input *in, uint32_t n, uint8_t **out, size_t *len,
		      struct sf_err *err)
{
	*out = NULL;
	*len = 0;
	if (n > SF_EMBED_MAX_INPUTS)
		return sf_err_set(err, SF_E_LIMIT, "%u inputs to embed, over %u", n,
				  SF_EMBED_MAX_INPUTS);
	size_t total = 4;
	for (uint32_t i = 0; i < n; i++)
		total += 5 + (in[i].kind == SF_EMBED_TEXT ? (size_t)in[i].len : 4 * (size_t)in[i].len);
	if (total > SF_MAX_OPAQUE)
		return sf_err_set(err, SF_E_LIMIT, "inputs to embed of %zu bytes, over %u", total,
				  SF_MAX_OPAQUE);
	uint8_t *p = malloc(total);
	if (!p)
		return sf_err_set(err, SF_E_NOMEM, "no memory for the inputs to embed");
	size_t at = 0;
	put32(p, n);
	at = 4;
	for (uint32_t i = 0; i < n; i++) {
		p[at++] = (uint8_t)in[i].kind;
		put32(p + at, in[i].len);
		at += 4;
		if (in[i].kind == SF_EMBED_TEXT) {
			if (in[i].len)
				memcpy(p + at, in[i].text, in[i].len);
			at += in[i].len;
		} else {
			for (uint32_t k = 0; k < in[i].len; k++, at += 4)
				put32(p + at, in[i].tokens[k]);
		}
	}
	*out = p;
	*len = total;
	return 0;
}

int sf_embed_args_count(const uint8_t *args, size_t len, uint32_t *n, struct sf_err *err)
{
	*n = 0;
	if (len < 4)
		return sf_err_set(err, SF_E_TRUNCATED, "embed: %zu bytes of arguments, no count", len);
	uint32_t count = le32(args);
	if (count > SF_EMBED_MAX_INPUTS)
		return sf_err_set(err, SF_E_RANGE, "embed: %u inputs, over %u", count,
				  SF_EMBED_MAX_INPUTS);
	size_t at = 4;
	for (uint32_t i = 0; i < count; i++) {
		if (len - at < 5)
			return sf_err_set(err, SF_E_TRUNCATED, "embed: input %u cut short", i);
		uint8_t kind = args[at];
		uint64_t bytes = le32(args + at + 1) * (kind == SF_EMBED_TOKENS ? 4ull : 1ull);
		if (kind > SF_EMBED_TOKENS)
			return sf_err_set(err, SF_E_RANGE, "embed: input %u of kind %u", i, kind);
		at += 5;
		if (bytes > len - at)
			return sf_err_set(err, SF_E_TRUNCATED, "embed: input %u cut short", i);
		at += (size_t)bytes;
	}
	if (at != len)
		return sf_err_set(err, SF_E_RANGE, "embed: %zu bytes after the last input", len - at);
	*n = count;
	return 0;
}

void sf_embed_args_next(const uint8_t *args, size_t *pos, struct sf_embed_input *in)
{
	const uint8_t *p = args + *pos;
	in->kind = (enum sf_embed_kind)p[0];
	in->len = le32(p + 1);
	in->text = in->kind == SF_EMBED_TEXT ? (const char *)(p + 5) : NULL;
	in->tokens = NULL;
	in->ids = in->kind == SF_EMBED_TOKENS ? p + 5 : NULL;
	*pos += 5 + (in->kind == SF_EMBED_TOKENS ? 4 * (size_t)in->len : in->len);
}

uint32_t sf_embed_token(const struct sf_embed_input *in, uint32_t i)
{
	return le32(in->ids + 4 * (size_t)i);
}

void sf_embed_result_head(uint8_t *out, uint32_t n, uint32_t dim)
{
	put32(out, n);
	put32(out + 4, dim);
}

void sf_embed_result_put(uint8_t *out, uint32_t dim, uint32_t i, uint32_t n_tokens, float *v)
{
	double sum = 0;
	for (uint32_t j = 0; j < dim; j++)
		sum += (double)v[j] * v[j];
	float scale = sum > 0 ? (float)(1.0 / sqrt(sum)) : 1.0f;
	uint8_t *p = out + 8 + (size_t)i * (4 + (size_t)dim * 4);
	put32(p, n_tokens);
	for (uint32_t j = 0; j < dim; j++) {
		float x = v[j] * scale;
		uint32_t bits;
		memcpy(&bits, &x, 4);
		put32(p + 4 + 4 * (size_t)j, bits);
	}
}

int sf_embed_result_check(const uint8_t *res, size_t len, uint32_t *n, uint32_t *dim,
			  struct sf_err *err)
{
	*n = *dim = 0;
	if (len < 8)
		return sf_err_set(err, SF_E_RANGE, "embed: a result of %zu bytes", len);
	uint32_t count = le32(res), d = le32(res + 4);
	if (count > SF_EMBED_MAX_INPUTS || d > (1u << 20) || sf_embed_result_len(count, d) != len)
		return sf_err_set(err, SF_E_RANGE, "embed: a result of %zu bytes for %u inputs of "
				  "%u values", len, count, d);
	*n = count;
	*dim = d;
	return 0;
}

uint32_t sf_embed_result_tokens(const uint8_t *res, uint32_t dim, uint32_t i)
{
	return le32(res + 8 + (size_t)i * (4 + (size_t)dim * 4));
}

float sf_embed_result_value(const uint8_t *res, uint32_t dim, uint32_t i, uint32_t j)
{
	uint32_t bits = le32(res + 8 + (size_t)i * (4 + (size_t)dim * 4) + 4 + 4 * (size_t)j);
	float x;
	memcpy(&x, &bits, 4);
	return x;
}
