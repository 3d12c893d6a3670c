/* The OpenAI-shaped response bodies and stream chunks (api_response.h), built with jansson.
 * Every string goes in as valid UTF-8 (invalid bytes as U+FFFD), so a build fails only when
 * memory does. */
#include "api/api_response.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* Logprobs are floats: written with the digits that read back as the same float. */
#define DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))

/* An object under construction: a failed member spoils it (NULL at the end). */
struct obj {
	json_t *o;
	bool bad;
};

static struct obj obj_new(void)
{
	struct obj b = { .o = json_object() };
	b.bad = !b.o;
	return b;
}

static void put(struct obj *b, const char *key, json_t *v)
{
	if (!v || !b->o || json_object_set_new(b->o, key, v))
		b->bad = true;
}

static json_t *obj_end(struct obj *b)
{
	if (b->bad) {
		json_decref(b->o);
		return NULL;
	}
	return b->o;
}

static bool push(json_t *arr, json_t *v)
{
	return v && arr && !json_array_append_new(arr, v);
}

static char *dump(json_t *v)
{
	char *s = v ? json_dumps(v, DUMP_FLAGS) : NULL;
	json_decref(v);
	return s;
}

/* A JSON string of p[0..n), made valid UTF-8 first if it is not. */
static json_t *str_n(const char *p, size_t n)
{
	if (!p || !n)
		return json_string("");
	if (sf_utf8_valid((const uint8_t *)p, n))
		return json_stringn(p, n);
	struct sf_str s = { 0 };
	json_t *v = sf_utf8_append_valid(&s, (const uint8_t *)p, n) ? NULL : json_stringn(s.p, s.len);
	sf_str_free(&s);
	return v;
}

static json_t *str_or_null(const char *s)
{
	return s ? str_n(s, strlen(s)) : json_null();
}

static json_t *uint_(uint64_t x)
{
	return json_integer((json_int_t)(x > INT64_MAX ? INT64_MAX : x));
}

static json_t *lp_real(float f)
{
	if (!isfinite(f))
		return json_real(-9999.0);
	char buf[32];
	for (int prec = 1; prec <= 9; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, (double)f);
		if ((float)strtod(buf, NULL) == f)
			break;
	}
	return json_real(strtod(buf, NULL));
}

static json_t *usage_json(const struct sf_api_usage *u)
{
	struct obj b = obj_new();
	put(&b, "prompt_tokens", json_integer(u->prompt_tokens));
	put(&b, "completion_tokens", json_integer(u->completion_tokens));
	put(&b, "total_tokens", json_integer((json_int_t)u->prompt_tokens + u->completion_tokens));
	struct obj d = obj_new();
	put(&d, "cached_tokens", json_integer(u->cached_tokens));
	put(&b, "prompt_tokens_details", obj_end(&d));
	return obj_end(&b);
}

/* The identity members every object of a response starts with. */
static struct obj head(const struct sf_api_meta *m, const char *object, bool fingerprint)
{
	struct obj b = obj_new();
	put(&b, "id", str_or_null(m->id ? m->id : ""));
	put(&b, "object", json_string(object));
	put(&b, "created", uint_(m->created));
	put(&b, "model", str_or_null(m->model ? m->model : ""));
	if (fingerprint)
		put(&b, "system_fingerprint", str_or_null(m->fingerprint));
	return b;
}

/* ---- logprobs ---- */

static const uint8_t *tok_bytes(const struct sf_api_logprobs *lp, uint32_t t, size_t *len)
{
	*len = 0;
	const uint8_t *b = lp->vocab && lp->vocab->bytes ? lp->vocab->bytes(lp->vocab->arg, t, len)
							 : NULL;
	if (!b)
		*len = 0;
	return b;
}

static json_t *tok_text(const struct sf_api_logprobs *lp, uint32_t t)
{
	size_t len;
	const uint8_t *b = tok_bytes(lp, t, &len);
	return str_n((const char *)b, len);
}

static json_t *tok_byte_array(const struct sf_api_logprobs *lp, uint32_t t)
{
	size_t len;
	const uint8_t *b = tok_bytes(lp, t, &len);
	json_t *a = json_array();
	for (size_t i = 0; a && i < len; i++)
		if (!push(a, json_integer(b[i]))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static struct obj chat_lp_entry(const struct sf_api_logprobs *lp, uint32_t t, float logprob)
{
	struct obj b = obj_new();
	put(&b, "token", tok_text(lp, t));
	put(&b, "logprob", lp_real(logprob));
	put(&b, "bytes", tok_byte_array(lp, t));
	return b;
}

/* {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}],
 *  "refusal": null} */
static json_t *chat_logprobs(const struct sf_api_logprobs *lp)
{
	if (!lp)
		return json_null();
	json_t *content = json_array();
	bool ok = content != NULL;
	for (uint32_t i = 0; ok && i < lp->n; i++) {
		const struct sf_logprob *x = &lp->v[i];
		struct obj e = chat_lp_entry(lp, x->token, x->logprob);
		json_t *top = json_array();
		for (uint32_t k = 0; top && k < x->n_top; k++) {
			struct obj t = chat_lp_entry(lp, x->top[k].token, x->top[k].logprob);
			if (!push(top, obj_end(&t))) {
				json_decref(top);
				top = NULL;
			}
		}
		put(&e, "top_logprobs", top);
		ok = push(content, obj_end(&e));
	}
	struct obj b = obj_new();
	put(&b, "content", ok ? content : NULL);
	if (!ok)
		json_decref(content);
	put(&b, "refusal", json_null());
	return obj_end(&b);
}

/* Code points of s[0..n) (valid UTF-8): bytes that do not continue a sequence. */
static uint32_t code_points(const char *s, size_t n)
{
	uint32_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += ((uint8_t)s[i] & 0xc0) != 0x80;
	return c;
}

static uint32_t text_chars(const struct sf_api_logprobs *lp, uint32_t t)
{
	json_t *s = tok_text(lp, t);
	uint32_t c = s ? code_points(json_string_value(s), json_string_length(s)) : 0;
	json_decref(s);
	return c;
}

uint32_t sf_api_logprobs_text_len(const struct sf_api_logprobs *lp)
{
	uint32_t c = 0;
	for (uint32_t i = 0; lp && i < lp->n; i++)
		c += text_chars(lp, lp->v[i].token);
	return c;
}

/* {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{text: logprob}],
 *  "text_offset": [...]} */
static json_t *completion_logprobs(const struct sf_api_logprobs *lp)
{
	if (!lp)
		return json_null();
	json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(),
	       *offs = json_array();
	bool ok = tokens && lps && tops && offs;
	uint32_t off = lp->text_offset;
	for (uint32_t i = 0; ok && i < lp->n; i++) {
		const struct sf_logprob *x = &lp->v[i];
		json_t *top = json_object();
		for (uint32_t k = 0; top && k < x->n_top; k++) {
			json_t *key = tok_text(lp, x->top[k].token);
			if (!key || json_object_set_new(top, json_string_value(key),
							 lp_real(x->top[k].logprob))) {
				json_decref(top);
				top = NULL;
			}
			json_decref(key);
		}
		ok = push(tokens, tok_text(lp, x->token)) && push(lps, lp_real(x->logprob)) &&
		     push(tops, top) && push(offs, json_integer(off));
		off += text_chars(lp, x->token);
	}
	struct obj b = obj_new();
	if (!ok) {
		json_decref(tokens);
		json_decref(lps);
		json_decref(tops);
		json_decref(offs);
		b.bad = true;
		return obj_end(&b);
	}
	put(&b, "tokens", tokens);
	put(&b, "token_logprobs", lps);
	put(&b, "top_logprobs", tops);
	put(&b, "text_offset", offs);
	return obj_end(&b);
}

/* ---- models ---- */

static json_t *model_obj(const char *model, uint32_t ctx_len, uint64_t created,
			 const char *owned_by)
{
	struct obj b = obj_new();
	put(&b, "id", str_or_null(model ? model : ""));
	put(&b, "object", json_string("model"));
	put(&b, "created", uint_(created));
	put(&b, "owned_by", str_or_null(owned_by ? owned_by : ""));
	if (ctx_len)
		put(&b, "max_model_len", uint_(ctx_len));
	return obj_end(&b);
}

char *sf_api_models_json(const char *const *models, const uint32_t *ctx_lens, uint32_t n,
			 uint64_t created, const char *owned_by)
{
	json_t *data = json_array();
	bool ok = data != NULL;
	for (uint32_t i = 0; ok && i < n; i++)
		ok = push(data, model_obj(models[i], ctx_lens ? ctx_lens[i] : 0, created, owned_by));
	struct obj b = obj_new();
	put(&b, "object", json_string("list"));
	put(&b, "data", ok ? data : NULL);
	if (!ok)
		json_decref(data);
	return dump(obj_end(&b));
}

char *sf_api_model_json(const char *model, uint32_t ctx_len, uint64_t created,
			const char *owned_by)
{
	return dump(model_obj(model, ctx_len, created, owned_by));
}

/* ---- chat ---- */

static json_t *call_json(const struct sf_out_tool_call *c, bool with_index, uint32_t index)
{
	struct obj fn = obj_new();
	put(&fn, "name", str_or_null(c->name ? c->name : ""));
	put(&fn, "arguments", str_or_null(c->arguments ? c->arguments : "{}"));
	struct obj b = obj_new();
	if (with_index)
		put(&b, "index", json_integer(index));
	put(&b, "id", str_or_null(c->id));
	put(&b, "type", json_string("function"));
	put(&b, "function", obj_end(&fn));
	return obj_end(&b);
}

static json_t *calls_json(const struct sf_out_tool_call *calls, uint32_t n)
{
	json_t *a = json_array();
	for (uint32_t i = 0; a && i < n; i++)
		if (!push(a, call_json(&calls[i], false, 0))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *chat_choice(const struct sf_api_choice *c)
{
	struct obj msg = obj_new();
	put(&msg, "role", json_string("assistant"));
	put(&msg, "content", c->content ? str_n(c->content, c->content_len) : json_null());
	if (c->reasoning)
		put(&msg, "reasoning_content", str_n(c->reasoning, c->reasoning_len));
	put(&msg, "refusal", json_null());
	if (c->n_calls)
		put(&msg, "tool_calls", calls_json(c->calls, c->n_calls));
	struct obj b = obj_new();
	put(&b, "index", json_integer(c->index));
	put(&b, "message", obj_end(&msg));
	put(&b, "logprobs", chat_logprobs(c->logprobs));
	put(&b, "finish_reason", str_or_null(c->finish_reason));
	return obj_end(&b);
}

static json_t *choices(const struct sf_api_choice *c, uint32_t n,
		       json_t *(*one)(const struct sf_api_choice *))
{
	json_t *a = json_array();
	for (uint32_t i = 0; a && i < n; i++)
		if (!push(a, one(&c[i]))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

char *sf_api_chat_json(const struct sf_api_meta *m, const struct sf_api_choice *c, uint32_t n,
		       const struct sf_api_usage *u)
{
	struct obj b = head(m, "chat.completion", true);
	put(&b, "choices", choices(c, n, chat_choice));
	if (u)
		put(&b, "usage", usage_json(u));
	return dump(obj_end(&b));
}

static json_t *delta_json(const struct sf_api_delta *d)
{
	struct obj b = obj_new();
	if (d->role) {
		put(&b, "role", json_string("assistant"));
		if (!d->content)
			put(&b, "content", json_string(""));
		put(&b, "refusal", json_null());
	}
	if (d->content)
		put(&b, "content", str_n(d->content, d->content_len));
	if (d->reasoning)
		put(&b, "reasoning_content", str_n(d->reasoning, d->reasoning_len));
	if (d->n_calls) {
		json_t *a = json_array();
		for (uint32_t i = 0; a && i < d->n_calls; i++)
			if (!push(a, call_json(&d->calls[i], true, d->call_index + i))) {
				json_decref(a);
				a = NULL;
			}
		put(&b, "tool_calls", a);
	}
	return obj_end(&b);
}

/* Closes a chunk: "usage" as the header says. */
static char *chunk_end(struct obj *b, bool include_usage, const struct sf_api_usage *usage)
{
	if (usage)
		put(b, "usage", usage_json(usage));
	else if (include_usage)
		put(b, "usage", json_null());
	return dump(obj_end(b));
}

char *sf_api_chat_chunk_json(const struct sf_api_meta *m, const struct sf_api_delta *d,
			     bool include_usage, const struct sf_api_usage *usage)
{
	struct obj b = head(m, "chat.completion.chunk", true);
	json_t *a = json_array();
	if (d) {
		struct obj ch = obj_new();
		put(&ch, "index", json_integer(d->index));
		put(&ch, "delta", delta_json(d));
		put(&ch, "logprobs", chat_logprobs(d->logprobs));
		put(&ch, "finish_reason", str_or_null(d->finish_reason));
		if (!push(a, obj_end(&ch))) {
			json_decref(a);
			a = NULL;
		}
	}
	put(&b, "choices", a);
	return chunk_end(&b, include_usage, usage);
}

/* ---- completions ---- */

static json_t *completion_choice_of(uint32_t index, const char *text, size_t len,
				    const char *finish_reason, const struct sf_api_logprobs *lp)
{
	struct obj b = obj_new();
	put(&b, "text", str_n(text, len));
	put(&b, "index", json_integer(index));
	put(&b, "logprobs", completion_logprobs(lp));
	put(&b, "finish_reason", str_or_null(finish_reason));
	return obj_end(&b);
}

static json_t *completion_choice(const struct sf_api_choice *c)
{
	return completion_choice_of(c->index, c->content, c->content_len, c->finish_reason,
				    c->logprobs);
}

char *sf_api_completion_json(const struct sf_api_meta *m, const struct sf_api_choice *c,
			     uint32_t n, const struct sf_api_usage *u)
{
	struct obj b = head(m, "text_completion", m->fingerprint != NULL);
	put(&b, "choices", choices(c, n, completion_choice));
	if (u)
		put(&b, "usage", usage_json(u));
	return dump(obj_end(&b));
}

char *sf_api_completion_chunk_json(const struct sf_api_meta *m, uint32_t index, const char *text,
				   size_t len, const char *finish_reason,
				   const struct sf_api_logprobs *lp, bool include_usage,
				   const struct sf_api_usage *usage)
{
	struct obj b = head(m, "text_completion", m->fingerprint != NULL);
	json_t *a = json_array();
	/* The usage chunk alone has no choice. */
	if ((text || !usage) &&
	    !push(a, completion_choice_of(index, text, len, finish_reason, lp))) {
		json_decref(a);
		a = NULL;
	}
	put(&b, "choices", a);
	return chunk_end(&b, include_usage, usage);
}
