/* The fields vLLM's and llama.cpp's servers take beyond OpenAI's, and OpenAI's legacy ones:
 * how the output ends (stop_token_ids, include_stop_str_in_output, ignore_eos, min_tokens),
 * echo, best_of, suffix, n_probs and cache_prompt. Each works, or is refused by name. */
#include "api/api_request_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_TOKENS_LIMIT 1048576

static int parse_stop_ids(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	const json_t *v = sf__api_opt(root, "stop_token_ids");
	if (!v)
		return 0;
	if (!json_is_array(v))
		return sf__api_type(e, "stop_token_ids", "an array of token ids", v);
	size_t n = json_array_size(v);
	if (n > SF_API_MAX_STOP_IDS)
		return sf__api_too_many(e, "stop_token_ids", "token ids", n, SF_API_MAX_STOP_IDS);
	if (n && !(r->stop_token_ids = calloc(n, sizeof(*r->stop_token_ids))))
		return sf__api_nomem(e);
	for (size_t i = 0; i < n; i++) {
		const json_t *t = json_array_get(v, i);
		char p[SF__API_PARAM_MAX];
		sf__api_path(p, "stop_token_ids[%zu]", i);
		if (!json_is_integer(t) || json_integer_value(t) < 0 ||
		    json_integer_value(t) > INT32_MAX)
			return sf__api_value(e, p, "a token id from 0 to 2147483647", t);
		r->stop_token_ids[r->n_stop_token_ids++] = (uint32_t)json_integer_value(t);
	}
	return 0;
}

static int parse_ends(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	bool given = false;
	json_int_t min = 0;
	if (parse_stop_ids(root, r, e) ||
	    sf__api_opt_bool(root, "include_stop_str_in_output", &r->include_stop_str_in_output,
			     e) ||
	    sf__api_opt_bool(root, "ignore_eos", &r->ignore_eos, e) ||
	    sf__api_opt_int(root, "min_tokens", 0, MAX_TOKENS_LIMIT, "an integer from 0 to "
			    "1048576", &given, &min, e))
		return -1;
	if (r->max_tokens && (uint32_t)min > r->max_tokens)
		return sf_api_bad(e, "min_tokens", "min_tokens (%u) must be at most max_tokens (%u)",
				  (unsigned)min, r->max_tokens);
	r->min_tokens = (uint32_t)min;
	return 0;
}

/* n_probs, llama.cpp's name for the alternatives a token's logprobs list: the completions'
 * logprobs, or chat's logprobs with top_logprobs. 0: none. */
static int parse_n_probs(const json_t *root, struct sf_api_request *r, bool top_given,
			 struct sf_api_error *e)
{
	bool chat = r->kind == SF_API_CHAT, given = false;
	json_int_t k = 0;
	if (sf__api_opt_int(root, "n_probs", 0, chat ? SF_API_MAX_TOP_LOGPROBS : 5,
			    chat ? "an integer from 0 to 20" : "an integer from 0 to 5", &given, &k,
			    e))
		return -1;
	if (!k)
		return 0;
	bool other = chat ? top_given : r->logprobs;
	if (other && r->top_logprobs != (uint32_t)k)
		return sf_api_bad(e, "n_probs", "n_probs is another name for %s: give one of them "
				  "(got %u and %u)", chat ? "top_logprobs" : "logprobs",
				  (unsigned)k, r->top_logprobs);
	r->logprobs = true;
	r->top_logprobs = (uint32_t)k;
	return 0;
}

/* best_of: the best n of best_of generations. Only best_of = n (each choice returned) is
 * served. */
static int parse_best_of(const json_t *root, struct sf_api_request *r, struct sf_api_error *e)
{
	bool given = false;
	json_int_t b = 0;
	if (sf__api_opt_int(root, "best_of", 1, INT32_MAX, "an integer of at least 1", &given, &b,
			    e))
		return -1;
	if (!given || (uint32_t)b == r->n)
		return 0;
	if ((uint32_t)b < r->n)
		return sf_api_bad(e, "best_of", "best_of (%u) must be at least n (%u)", (unsigned)b,
				  r->n);
	return sf_api_fail(e, 400, "invalid_request_error", "unsupported_value", "best_of",
			   "best_of above n (drawing %u and returning the best %u) is not "
			   "supported by this server: ask for n = %u choices and pick among them",
			   (unsigned)b, r->n, (unsigned)b);
}

/* Completions: echo, suffix. */
static int parse_completion(const json_t *root, struct sf_api_request *r,
			    struct sf_api_error *e)
{
	if (sf__api_opt_bool(root, "echo", &r->echo, e))
		return -1;
	if (r->echo && r->logprobs)
		return sf_api_fail(e, 400, "invalid_request_error", "unsupported_value", "echo",
				   "echo with logprobs (the prompt's tokens' logprobs) is not "
				   "supported by this server: ask for echo or logprobs");
	const json_t *suffix = sf__api_opt(root, "suffix");
	if (suffix && !json_is_string(suffix))
		return sf__api_type(e, "suffix", "a string", suffix);
	if (suffix && json_string_length(suffix))
		return sf_api_fail(e, 400, "invalid_request_error", "unsupported_value", "suffix",
				   "suffix (text after the completion: fill in the middle) is not "
				   "supported by this server");
	return 0;
}

int sf__api_parse_more(const json_t *root, struct sf_api_request *r, bool top_given,
		       struct sf_api_error *e)
{
	bool cache = true;
	if (parse_ends(root, r, e) || parse_n_probs(root, r, top_given, e) ||
	    parse_best_of(root, r, e) ||
	    (r->kind == SF_API_COMPLETION && parse_completion(root, r, e)) ||
	    sf__api_opt_bool(root, "cache_prompt", &cache, e))
		return -1;
	r->no_prefix_cache = !cache;
	return 0;
}
