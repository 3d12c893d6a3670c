/* Response bodies and server-sent-event chunks of the OpenAI-compatible API (jansson), in the
 * shapes the official client libraries parse: chat.completion, chat.completion.chunk,
 * text_completion, model lists, usage, logprobs. Every function returns malloc'd JSON text
 * (compact, no trailing newline), or NULL when out of memory. */
#ifndef SF_API_API_RESPONSE_H
#define SF_API_API_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/wire.h>

#include "api/api_output.h"

struct sf_api_usage {
	uint32_t prompt_tokens, completion_tokens; /* total_tokens is their sum */
	uint32_t cached_tokens; /* of the prompt's, those the node had (prompt_tokens_details) */
	uint32_t reasoning_tokens; /* of the completion's, those of its reasoning (Responses) */
};

/* Generated tokens' log-probabilities, with their text from the vocabulary: "token" is the
 * token's bytes made valid UTF-8 (U+FFFD for what is not), "bytes" its exact bytes. A logprob
 * that is not finite is sent as -9999.0. */
struct sf_api_logprobs {
	const struct sf_out_vocab *vocab;
	const struct sf_logprob *v; /* token, logprob, top[] */
	uint32_t n;
	uint32_t text_offset; /* completions: text_offset of v[0], in characters (code points)
			       * of the text before it: the echoed prompt, earlier chunks */
};
/* The characters (code points) the tokens' "token" texts come to: what the next chunk's
 * text_offset moves on by. */
uint32_t sf_api_logprobs_text_len(const struct sf_api_logprobs *lp);

/* The identity every object of one response shares. */
struct sf_api_meta {
	const char *id;      /* "chatcmpl-..." or "cmpl-..." */
	uint64_t created;    /* unix seconds */
	const char *model;
	const char *fingerprint; /* system_fingerprint, or NULL */
};

/* One whole choice. */
struct sf_api_choice {
	uint32_t index;
	const char *content; size_t content_len;     /* may be NULL: null content (tool calls) */
	const char *reasoning; size_t reasoning_len; /* "reasoning_content"; NULL: absent */
	const struct sf_out_tool_call *calls; uint32_t n_calls;
	const char *finish_reason; /* "stop", "length", "tool_calls", or NULL */
	const struct sf_api_logprobs *logprobs; /* NULL: "logprobs": null */
};

/* GET /v1/models: {"object":"list","data":[{"id","object":"model","created","owned_by",
 * "max_model_len"}]}: max_model_len (vLLM's name) the model's context length from ctx_lens
 * (NULL, or 0 for a model: left out). */
char *sf_api_models_json(const char *const *models, const uint32_t *ctx_lens, uint32_t n,
			 uint64_t created, const char *owned_by);
/* GET /v1/models/{id} (ctx_len 0: no max_model_len) */
char *sf_api_model_json(const char *model, uint32_t ctx_len, uint64_t created,
			const char *owned_by);

/* POST /v1/chat/completions, not streamed. */
char *sf_api_chat_json(const struct sf_api_meta *m, const struct sf_api_choice *c, uint32_t n,
		       const struct sf_api_usage *u);
/* POST /v1/completions, not streamed (content is the text; calls and reasoning unused;
 * logprobs in the completions shape: tokens, token_logprobs, top_logprobs, text_offset). */
char *sf_api_completion_json(const struct sf_api_meta *m, const struct sf_api_choice *c,
			     uint32_t n, const struct sf_api_usage *u);

/* One streamed chat delta. */
struct sf_api_delta {
	uint32_t index;
	bool role;                     /* the first chunk: "role": "assistant", "content": "" */
	const char *content; size_t content_len;     /* NULL: absent */
	const char *reasoning; size_t reasoning_len; /* NULL: absent */
	/* whole calls (n_calls of them, the first numbered call_index), or none */
	const struct sf_out_tool_call *calls; uint32_t n_calls, call_index;
	const char *finish_reason;     /* the last chunk of the choice: delta {} and this */
	const struct sf_api_logprobs *logprobs; /* of the tokens this chunk carries, or NULL */
};
/* A chat.completion.chunk (without the "data: " framing). usage: only for the last chunk
 * when stream_options.include_usage asked (then choices is []), else NULL; with
 * include_usage every other chunk carries "usage": null. */
char *sf_api_chat_chunk_json(const struct sf_api_meta *m, const struct sf_api_delta *d,
			     bool include_usage, const struct sf_api_usage *usage);
/* A text_completion chunk: text, finish_reason (or NULL), logprobs (or NULL). */
char *sf_api_completion_chunk_json(const struct sf_api_meta *m, uint32_t index, const char *text,
				   size_t len, const char *finish_reason,
				   const struct sf_api_logprobs *lp, bool include_usage,
				   const struct sf_api_usage *usage);

#endif
