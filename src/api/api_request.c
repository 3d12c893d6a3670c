/* Parsing a request body: the JSON, the fields both endpoints share (sampling, stop, logprobs,
 * streaming, session) and the completions prompt; the chat fields are api_request_chat.c's. */
#include "api/api_request_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS_LIMIT 1048576
#define MODEL_MAX 256 /* SF_MAX_NAME: a longer name cannot be a model the fleet serves */

/* *out = the number member key within [lo, hi] (integer or real), if given. */
static int opt_num(const json_t *root, const char *key, double lo, double hi, bool lo_open,
		   const char *want, bool *given, double *out, struct sf_api_error *e)
{
	const json_t *v = sf__api_opt(root, key);
	if (given)
		*given = v != NULL;
	if (!v)
		return 0;
	if (!json_is_number(v))
		return sf__api_type(e, key, want, v);
	double x = json_number_value(v);
	if (x < lo || x > hi || (lo_open && x <= lo))
		return sf__api_value(e, key, want, v);
	*out = x;
	return 0;
}

static int opt_type(const json_t *root, const char *key, json_type type, const char *want,
		    struct sf_api_error *e)
{
	const json_t *v = sf__api_opt(root, key);
	if (v && json_typeof(v) != type &&
	    !(type == JSON_TRUE && json_is_boolean(v)))
		return sf__api_type(e, key, want, v);
	return 0;
}

static int parse_model(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	const json_t *v = json_object_get(root, "model");
	if (!v)
		return sf__api_missing(e, "model");
	if (!json_is_string(v))
		return sf__api_type(e, "model", "a string", v);
	if (!json_string_length(v))
		return sf_api_bad(e, "model", "model must name a model (GET /v1/models lists them)");
	if (json_string_length(v) > MODEL_MAX)
		return sf_api_bad(e, "model", "model must be at most %d bytes (got %zu)", MODEL_MAX,
				  json_string_length(v));
	return sf__api_dup(v, &r->model, e);
}

/* Token ids as a prompt: an array of integers, each a token id. */
static int parse_prompt_ids(const json_t *v, const char *param, struct sf_api_prompt *out,
			    struct sf_api_error *e)
{
	size_t n = json_array_size(v);
	if (!n)
		return sf_api_bad(e, param, "%s must hold at least one token id", param);
	if (n > SF_API_MAX_PROMPT_TOKENS)
		return sf__api_too_many(e, param, "token ids", n, SF_API_MAX_PROMPT_TOKENS);
	if (!(out->tokens = malloc(n * sizeof(*out->tokens))))
		return sf__api_nomem(e);
	for (size_t i = 0; i < n; i++) {
		const json_t *t = json_array_get(v, i);
		char p[SF__API_PARAM_MAX];
		sf__api_path(p, "%s[%zu]", param, i);
		if (!json_is_integer(t) || json_integer_value(t) < 0 ||
		    json_integer_value(t) > INT32_MAX)
			return sf__api_value(e, p, "a token id from 0 to 2147483647", t);
		out->tokens[i] = (uint32_t)json_integer_value(t);
	}
	out->n_tokens = (uint32_t)n;
	return 0;
}

/* One prompt of an array of them: a string, or an array of token ids. */
static int parse_one_prompt(const json_t *v, const char *param, struct sf_api_prompt *out,
			    struct sf_api_error *e)
{
	if (json_is_string(v))
		return sf__api_dup(v, &out->text, e);
	if (json_is_array(v))
		return parse_prompt_ids(v, param, out, e);
	return sf__api_type(e, param, "a string or an array of token ids", v);
}

/* prompt: a string, token ids, or an array of strings or of arrays of token ids (several
 * prompts, each its own n choices). */
static int parse_prompt(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	const json_t *v = json_object_get(root, "prompt");
	if (!v)
		return sf__api_missing(e, "prompt");
	size_t n = json_is_array(v) && !json_is_integer(json_array_get(v, 0)) ? json_array_size(v)
										: 1;
	if (!json_is_string(v) && !json_is_array(v))
		return sf__api_type(e, "prompt", "a string, an array of token ids, or an array of "
				    "strings or of arrays of token ids", v);
	if (!n)
		return sf_api_bad(e, "prompt", "prompt must hold at least one prompt");
	if (n > SF_API_MAX_CHOICES)
		return sf__api_too_many(e, "prompt", "prompts", n, SF_API_MAX_CHOICES);
	if (!(r->prompts = calloc(n, sizeof(*r->prompts))))
		return sf__api_nomem(e);
	r->n_prompts = (uint32_t)n;
	int rc = 0;
	if (json_is_string(v))
		rc = sf__api_dup(v, &r->prompts[0].text, e);
	else if (n == 1 && json_is_integer(json_array_get(v, 0)))
		rc = parse_prompt_ids(v, "prompt", &r->prompts[0], e);
	for (size_t i = 0; !rc && json_is_array(v) && !json_is_integer(json_array_get(v, 0)) &&
			   i < n; i++) {
		char p[SF__API_PARAM_MAX];
		sf__api_path(p, "prompt[%zu]", i);
		rc = parse_one_prompt(json_array_get(v, i), p, &r->prompts[i], e);
	}
	if (rc)
		return rc;
	/* The first prompt is the request's prompt (the prompts' own copies). */
	r->prompt = r->prompts[0].text;
	r->prompt_tokens = r->prompts[0].tokens;
	r->n_prompt_tokens = r->prompts[0].n_tokens;
	return 0;
}

static int parse_stream(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	if (sf__api_opt_bool(root, "stream", &r->stream, e))
		return -1;
	const json_t *so = sf__api_opt(root, "stream_options");
	if (!so)
		return 0;
	if (!r->stream)
		return sf_api_bad(e, "stream_options", "The 'stream_options' parameter is only "
				  "allowed when 'stream' is enabled.");
	if (!json_is_object(so))
		return sf__api_type(e, "stream_options", "an object", so);
	const json_t *iu = sf__api_opt(so, "include_usage");
	if (iu && !json_is_boolean(iu))
		return sf__api_type(e, "stream_options.include_usage", "a boolean", iu);
	r->include_usage = iu && json_is_true(iu);
	return 0;
}

static int parse_max_tokens(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	static const char want[] = "an integer from 1 to 1048576";
	bool g1 = false, g2 = false;
	json_int_t a = 0, b = 0;
	if (sf__api_opt_int(root, "max_tokens", 1, MAX_TOKENS_LIMIT, want, &g1, &a, e) ||
	    sf__api_opt_int(root, "max_completion_tokens", 1, MAX_TOKENS_LIMIT, want, &g2, &b, e))
		return -1;
	/* max_completion_tokens is the newer name and wins. */
	r->max_tokens = (uint32_t)(g2 ? b : g1 ? a : 0);
	return 0;
}

/* The penalties (OpenAI's presence and frequency; vLLM's repetition_penalty, which llama.cpp's
 * server calls repeat_penalty, with its repeat_last_n window). */
static int parse_penalties(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	static const char want_rep[] = "a number above 0 and at most 100 (1: no penalty)";
	double pres = 0, freq = 0, rep = 1, rep2 = 1;
	bool g1 = false, g2 = false, gl = false;
	json_int_t last = SF_API_REPEAT_LAST_N;
	if (opt_num(root, "frequency_penalty", -2, 2, false, "a number from -2 to 2", NULL, &freq,
		    e) ||
	    opt_num(root, "presence_penalty", -2, 2, false, "a number from -2 to 2", NULL, &pres,
		    e) ||
	    opt_num(root, "repetition_penalty", 0, 100, true, want_rep, &g1, &rep, e) ||
	    opt_num(root, "repeat_penalty", 0, 100, true, want_rep, &g2, &rep2, e) ||
	    sf__api_opt_int(root, "repeat_last_n", -1, INT32_MAX, "an integer from -1 (the whole "
		    "context) to 2147483647 (0: off)", &gl, &last, e))
		return -1;
	if (g1 && g2 && rep != rep2)
		return sf_api_bad(e, "repeat_penalty", "repeat_penalty is another name for "
				  "repetition_penalty: give one of them (got %g and %g)", rep2, rep);
	r->presence_penalty = (float)pres;
	r->frequency_penalty = (float)freq;
	r->repetition_penalty = (float)(g1 ? rep : rep2);
	r->repeat_last_n = last < 0 ? SF_API_WHOLE_CONTEXT : (uint32_t)last;
	return 0;
}

/* logit_bias: an object of token ids (as strings, the way JSON keys are) to numbers. */
static int parse_logit_bias(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	const json_t *lb = sf__api_opt(root, "logit_bias");
	if (!lb)
		return 0;
	if (!json_is_object(lb))
		return sf__api_type(e, "logit_bias", "an object of token ids to numbers from -100 "
				    "to 100", lb);
	size_t n = json_object_size(lb);
	if (n > SF_API_MAX_LOGIT_BIAS)
		return sf_api_bad(e, "logit_bias", "logit_bias may hold at most %d tokens (got %zu)",
				  SF_API_MAX_LOGIT_BIAS, n);
	if (n && !(r->logit_bias = calloc(n, sizeof(*r->logit_bias))))
		return sf__api_nomem(e);
	const char *key;
	const json_t *val;
	json_object_foreach((json_t *)lb, key, val) {
		char p[96], k[64];
		sf__api_ascii(key, strlen(key), false, 32, k, sizeof(k));
		snprintf(p, sizeof(p), "logit_bias.%s", k);
		/* A token id: decimal digits, no sign or leading zero, below 2^31. */
		size_t len = strlen(key);
		bool digits = len >= 1 && len <= 10 && (key[0] != '0' || len == 1);
		for (size_t i = 0; digits && i < len; i++)
			digits = key[i] >= '0' && key[i] <= '9';
		unsigned long long id = digits ? strtoull(key, NULL, 10) : 0;
		if (!digits || id > INT32_MAX)
			return sf_api_fail(e, 400, "invalid_request_error", "invalid_value", p,
					   "logit_bias keys must be token ids: integers from 0 to "
					   "2147483647 written as strings (got \"%s\")", k);
		if (!json_is_number(val) || json_number_value(val) < -100 ||
		    json_number_value(val) > 100)
			return sf__api_value(e, p, "a number from -100 to 100", val);
		r->logit_bias[r->n_logit_bias++] = (struct sf_api_logit_bias){
			.token = (uint32_t)id, .bias = (float)json_number_value(val) };
	}
	return 0;
}

static int parse_sampling(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	double t = 1, p = 1, min_p = 0;
	bool seeded = false, given = false;
	json_int_t seed = 0, n = 1, top_k = 0;
	if (opt_num(root, "temperature", 0, 2, false, "a number from 0 to 2", NULL, &t, e) ||
	    opt_num(root, "top_p", 0, 1, false, "a number from 0 to 1", NULL, &p, e) ||
	    sf__api_opt_int(root, "top_k", -1, INT32_MAX, "an integer from -1 to 2147483647 (-1 and 0: "
		    "off)", &given, &top_k, e) ||
	    opt_num(root, "min_p", 0, 1, false, "a number from 0 to 1", NULL, &min_p, e) ||
	    parse_penalties(root, r, e) || parse_logit_bias(root, r, e) ||
	    sf__api_opt_int(root, "seed", 0, INT64_MAX, "an integer from 0 to 9223372036854775807",
		    &seeded, &seed, e) ||
	    sf__api_opt_int(root, "n", 1, SF_API_MAX_N, "an integer from 1 to 8", &(bool){ 0 }, &n, e))
		return -1;
	r->temperature = (float)t;
	/* top_p 0 (which OpenAI takes) keeps only the most likely token; the engines read 0 as
	 * "no cut", so it becomes the smallest positive value. */
	r->top_p = p > 0 ? (float)p : 1e-9f;
	r->top_k = top_k <= 0 ? 0 : top_k > SF_API_MAX_TOP_K ? SF_API_MAX_TOP_K : (uint32_t)top_k;
	r->min_p = (float)min_p;
	r->has_seed = seeded;
	r->seed = (uint64_t)seed;
	r->n = (uint32_t)n;
	return 0;
}

static int parse_stop(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	static const char want[] = "a string or an array of up to 4 non-empty strings of at most "
				   "256 bytes";
	const json_t *v = sf__api_opt(root, "stop");
	if (!v)
		return 0;
	size_t n = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
	if (!json_is_string(v) && !json_is_array(v))
		return sf__api_type(e, "stop", want, v);
	if (n > SF_API_MAX_STOP)
		return sf_api_bad(e, "stop", "stop must be %s (got %zu strings)", want, n);
	for (size_t i = 0; i < n; i++) {
		const json_t *s = json_is_string(v) ? v : json_array_get(v, i);
		char p[32];
		if (json_is_string(v))
			snprintf(p, sizeof(p), "stop");
		else
			snprintf(p, sizeof(p), "stop[%zu]", i);
		if (!json_is_string(s))
			return sf__api_type(e, p, "a string", s);
		size_t len = json_string_length(s);
		if (!len || len > SF_API_MAX_STOP_BYTES)
			return sf_api_bad(e, p, "%s must be a non-empty string of at most %d bytes "
					  "(got %zu bytes)", p, SF_API_MAX_STOP_BYTES, len);
		if (sf__api_dup(s, &r->stop[r->n_stop], e))
			return -1;
		r->n_stop++;
	}
	return 0;
}

static int parse_logprobs(const json_t *root, struct sf_api_request *r, bool *top_given,
			  struct sf_api_error *e)
{
	bool given = false;
	json_int_t k = 0;
	if (r->kind == SF_API_COMPLETION) {
		if (sf__api_opt_int(root, "logprobs", 0, 5, "an integer from 0 to 5", &given, &k, e))
			return -1;
		r->logprobs = given;
		r->top_logprobs = (uint32_t)k;
		return 0;
	}
	if (sf__api_opt_bool(root, "logprobs", &r->logprobs, e) ||
	    sf__api_opt_int(root, "top_logprobs", 0, SF_API_MAX_TOP_LOGPROBS, "an integer from 0 to 20",
		    &given, &k, e))
		return -1;
	if (given && !r->logprobs)
		return sf_api_bad(e, "top_logprobs", "top_logprobs needs logprobs set to true");
	*top_given = given;
	r->top_logprobs = (uint32_t)k;
	return 0;
}

/* Fields taken and ignored (but parallel_tool_calls, which a forced tool call reads), still
 * checked so that a mistake is not silently passed over. */
static int parse_ignored(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	const json_t *ptc = sf__api_opt(root, "parallel_tool_calls");
	if (ptc && !json_is_boolean(ptc))
		return sf__api_type(e, "parallel_tool_calls", "a boolean", ptc);
	r->no_parallel_tool_calls = ptc && json_is_false(ptc);
	if (opt_type(root, "store", JSON_TRUE, "a boolean", e) ||
	    opt_type(root, "metadata", JSON_OBJECT, "an object", e) ||
	    opt_type(root, "service_tier", JSON_STRING, "a string", e))
		return -1;
	return 0;
}

static int parse_root(enum sf_api_kind kind, const json_t *root, struct sf_api_request *r,
		      struct sf_api_error *e)
{
	r->kind = kind;
	if (parse_model(root, r, e))
		return -1;
	if (kind == SF_API_CHAT ? sf__api_parse_chat(root, r, e) : parse_prompt(root, r, e))
		return -1;
	bool top_given = false;
	if (parse_stream(root, r, e) || parse_max_tokens(root, r, e) ||
	    parse_sampling(root, r, e) || parse_stop(root, r, e) ||
	    parse_logprobs(root, r, &top_given, e) || sf__api_parse_more(root, r, top_given, e) ||
	    parse_ignored(root, r, e) || sf__api_parse_structured(root, r, e))
		return -1;
	if (r->n_prompts > 1 && (uint64_t)r->n_prompts * r->n > SF_API_MAX_CHOICES)
		return sf_api_fail(e, 413, "invalid_request_error", "too_many_choices", "n",
				   "%u prompts of n = %u choices make %u, past the %d one request "
				   "may ask for", r->n_prompts, r->n, r->n_prompts * r->n,
				   SF_API_MAX_CHOICES);
	if (sf__api_opt_str(root, "user", "user", &r->user, e) ||
	    sf__api_opt_str(root, "session", "session", &r->session, e))
		return -1;
	if (r->session && sf_api_check_session_name(r->session, "session", e))
		return -1;
	return 0;
}

int sf_api_parse_request(enum sf_api_kind kind, const uint8_t *body, size_t len,
			 struct sf_api_request *out, struct sf_api_error *e)
{
	memset(out, 0, sizeof(*out));
	if (kind != SF_API_CHAT && kind != SF_API_COMPLETION && kind != SF_API_RESPONSES &&
	    kind != SF_API_MESSAGES)
		return sf_api_fail(e, 500, "server_error", NULL, NULL, "unknown request kind %d",
				   (int)kind);
	json_error_t jerr;
	json_t *root = json_loadb(body ? (const char *)body : "", body ? len : 0, 0, &jerr);
	if (!root) {
		/* jansson quotes the input near the fault: made ASCII, as it may not be UTF-8. */
		char text[256];
		sf__api_ascii(jerr.text, strlen(jerr.text), false, sizeof(text), text, sizeof(text));
		return sf_api_fail(e, 400, "invalid_request_error", NULL, NULL,
				   "We could not parse the JSON body of your request: %s (line %d, "
				   "column %d)", text, jerr.line, jerr.column);
	}
	int rc;
	if (!json_is_object(root))
		rc = sf_api_fail(e, 400, "invalid_request_error", "invalid_type", NULL,
				 "the request body must be a JSON object (got an array)");
	else if (kind == SF_API_RESPONSES || kind == SF_API_MESSAGES) {
		/* Its chat request, parsed as the chat endpoint's body. */
		json_t *chat = NULL;
		out->wire = kind; /* its fields are named as that endpoint's */
		rc = kind == SF_API_RESPONSES ? sf__api_responses_chat(root, out, &chat, e)
					      : sf__api_messages_chat(root, out, &chat, e);
		if (!rc)
			rc = parse_root(SF_API_CHAT, chat, out, e);
		json_decref(chat);
	} else {
		out->wire = kind;
		rc = parse_root(kind, root, out, e);
	}
	out->wire = kind;
	json_decref(root);
	if (rc)
		sf_api_request_free(out);
	return rc;
}

static void free_message(struct sf_api_message *m)
{
	free(m->content);
	free(m->name);
	free(m->tool_call_id);
	for (uint32_t k = 0; k < m->n_tool_calls; k++) {
		free(m->tool_calls[k].id);
		free(m->tool_calls[k].name);
		free(m->tool_calls[k].arguments);
	}
	free(m->tool_calls);
}

void sf_api_request_free(struct sf_api_request *r)
{
	for (uint32_t i = 0; i < r->n_messages; i++)
		free_message(&r->messages[i]);
	free(r->messages);
	for (uint32_t i = 0; i < r->n_tools; i++) {
		free(r->tools[i].name);
		free(r->tools[i].description);
		free(r->tools[i].parameters);
		free(r->tools[i].json);
	}
	free(r->tools);
	free(r->tool_choice_name);
	free(r->chat_json);
	free(r->chat_template);
	free(r->model);
	for (uint32_t i = 0; i < r->n_prompts; i++) {
		free(r->prompts[i].text);
		free(r->prompts[i].tokens);
	}
	free(r->prompts);
	for (uint32_t i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	free(r->stop_token_ids);
	if (r->resp) {
		free(r->resp->previous_id);
		free(r->resp->echo_json);
		free(r->resp->input_json);
		free(r->resp);
	}
	free(r->user);
	free(r->session);
	free(r->grammar);
	free(r->logit_bias);
	memset(r, 0, sizeof(*r));
}

int sf_api_check_session_name(const char *s, const char *param, struct sf_api_error *e)
{
	size_t n = s ? strnlen(s, SF_API_MAX_SESSION_ID + 1) : 0;
	size_t bad = n;
	for (size_t i = 0; i < n && bad == n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == ':' || c == '-'))
			bad = i;
	}
	if (n >= 1 && n <= SF_API_MAX_SESSION_ID && bad == n)
		return 0;
	if (bad < n)
		return sf_api_bad(e, param, "%s must be 1 to %d characters of A-Z, a-z, 0-9, '.', "
				  "'_', ':' and '-' (byte 0x%02x at %zu is not one)", param,
				  SF_API_MAX_SESSION_ID, (unsigned char)s[bad], bad);
	return sf_api_bad(e, param, "%s must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_', "
			  "':' and '-' (got %s)", param, SF_API_MAX_SESSION_ID,
			  n ? "a longer one" : "an empty one");
}
