/* Client requests of the OpenAI-compatible API, parsed (jansson) and checked into plain
 * structs: POST /v1/chat/completions and POST /v1/completions. Unknown fields are ignored, as
 * OpenAI's own server does; a known field with a bad type or value is refused with a 400
 * naming it (sf_api_error.param). Everything here is bounded by the SF_API_MAX_* limits. */
#ifndef SF_API_API_REQUEST_H
#define SF_API_API_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/api_error.h"

#define SF_API_MAX_MESSAGES 4096
#define SF_API_MAX_TOOLS 128
#define SF_API_MAX_TOOL_CALLS 64   /* in one assistant message */
#define SF_API_MAX_STOP 4          /* as OpenAI */
#define SF_API_MAX_STOP_BYTES 256
#define SF_API_MAX_STOP_IDS 64     /* stop_token_ids */
#define SF_API_MAX_PROMPT_TOKENS (1u << 20) /* token ids of a completion's prompt */
#define SF_API_MAX_N 8             /* choices of one prompt (n) */
#define SF_API_MAX_CHOICES 64      /* choices of one request: its prompts x n */
#define SF_API_MAX_TOP_LOGPROBS 20 /* chat; completions allow 0..5 */
#define SF_API_MAX_SESSION_ID 128  /* bytes of a session name */
#define SF_API_MAX_LOGIT_BIAS 300  /* logit_bias entries, as OpenAI */
#define SF_API_MAX_TOP_K 2097152   /* a larger top_k is taken as this (every token) */
#define SF_API_MAX_TEMPLATE (256u << 10) /* bytes of a chat_template given by a request */
#define SF_API_REPEAT_LAST_N 64    /* repeat_last_n when not given (llama.cpp's) */
#define SF_API_WHOLE_CONTEXT UINT32_MAX /* repeat_last_n -1: the whole context */

/* What a request is. POST /v1/responses (SF_API_RESPONSES) and /v1/messages
 * (SF_API_MESSAGES) are parsed into chat requests (kind SF_API_CHAT, wire the endpoint's) and
 * answered in their own shapes. */
enum sf_api_kind { SF_API_CHAT = 1, SF_API_COMPLETION = 2, SF_API_RESPONSES = 3,
		   SF_API_MESSAGES = 4 };

enum sf_api_role {
	SF_ROLE_SYSTEM = 0,
	SF_ROLE_DEVELOPER = 1, /* rendered as system */
	SF_ROLE_USER = 2,
	SF_ROLE_ASSISTANT = 3,
	SF_ROLE_TOOL = 4,
};

struct sf_api_tool_call {
	char *id;        /* "call_..." as the client echoes it */
	char *name;
	char *arguments; /* JSON text of the arguments object, as given */
};

struct sf_api_message {
	enum sf_api_role role;
	char *content;   /* text; an array of text parts is joined with "\n" (as vLLM does);
			  * null or absent (allowed for the assistant only): "" */
	char *name;      /* or NULL */
	char *tool_call_id;                /* role tool; or NULL */
	struct sf_api_tool_call *tool_calls; /* role assistant */
	uint32_t n_tool_calls;
};

struct sf_api_tool {
	char *name;
	char *description; /* or NULL */
	char *parameters;  /* the JSON schema as compact JSON text; "{}" when absent */
	char *json;        /* the whole {"type":"function","function":{...}} entry, compact, keys
			    * in the order given: what a chat codec renders */
};

enum sf_api_tool_choice { SF_TOOL_AUTO = 0, SF_TOOL_NONE, SF_TOOL_REQUIRED, SF_TOOL_NAMED };

/* One logit_bias entry: bias in [-100, 100] added to the token's logit (-100 bans it). */
struct sf_api_logit_bias {
	uint32_t token;
	float bias;
};

/* One prompt of a completions request: text, or token ids. */
struct sf_api_prompt {
	char *text;
	uint32_t *tokens;
	uint32_t n_tokens;
};

/* What a POST /v1/responses request asks beyond its chat request. */
struct sf_api_responses {
	char *previous_id; /* previous_response_id, or NULL */
	bool store;        /* store (default true) */
	char *echo_json;   /* the fields its answer repeats (compact JSON object) */
	char *input_json;  /* its input as items (compact JSON array; a string input as a user
			    * message): what a stored response keeps of its request */
};

struct sf_api_request {
	enum sf_api_kind kind;
	enum sf_api_kind wire;          /* the endpoint's: kind, SF_API_RESPONSES or SF_API_MESSAGES */
	struct sf_api_responses *resp;  /* wire SF_API_RESPONSES; else NULL */
	char *model;

	/* chat */
	struct sf_api_message *messages;
	uint32_t n_messages;
	struct sf_api_tool *tools;
	uint32_t n_tools;
	enum sf_api_tool_choice tool_choice; /* default: AUTO with tools, NONE without */
	char *tool_choice_name; /* SF_TOOL_NAMED */
	bool no_parallel_tool_calls; /* parallel_tool_calls: false (one call at most) */
	/* What a chat template renders, as the client gave it: compact JSON text of an object
	 * holding "messages", and "tools" and "chat_template_kwargs" when given (chat_context.h
	 * makes the template's context of it). */
	char *chat_json;
	char *chat_template; /* the "chat_template" field: a template's name the model exports,
			      * or a template's text; NULL: the model's own */
	bool no_generation_prompt; /* "add_generation_prompt": false */

	/* completions: a prompt, a string or token ids (used as given, no BOS); prompt is the
	 * first of prompts (an array of strings, or of arrays of ids, gives several: each its own
	 * n choices, prompts x n at most SF_API_MAX_CHOICES) */
	char *prompt;              /* NULL: prompt_tokens */
	uint32_t *prompt_tokens;   /* checked against the vocabulary later */
	uint32_t n_prompt_tokens;  /* 1..SF_API_MAX_PROMPT_TOKENS */
	struct sf_api_prompt *prompts; /* every prompt, [0] the one above; n_prompts >= 1 */
	uint32_t n_prompts;
	bool echo;   /* the prompt's text first in the output (not with logprobs) */

	bool stream;
	bool include_usage;    /* stream_options.include_usage */
	uint32_t max_tokens;   /* max_completion_tokens, else max_tokens; 1..1048576; 0: not
				* given */
	float temperature;     /* 0..2; default 1 */
	float top_p;           /* (0, 1]; default 1; 0 (which OpenAI takes) becomes 1e-9: only
				* the most likely token, as engines read 0 as "no cut" */
	bool has_seed;
	uint64_t seed;         /* 0..INT64_MAX: a negative seed is refused */
	/* Extensions that vLLM and llama.cpp's server take; neutral when not given. */
	uint32_t top_k;        /* 0: off (-1 and 0 given); at most SF_API_MAX_TOP_K */
	float min_p;           /* [0, 1]; 0: off */
	float presence_penalty;  /* [-2, 2]; 0: off */
	float frequency_penalty; /* [-2, 2]; 0: off */
	float repetition_penalty; /* (0, 100]; 1: off (also as llama.cpp's repeat_penalty) */
	uint32_t repeat_last_n;  /* the repetition penalty's window: SF_API_REPEAT_LAST_N when
				  * not given, 0 off, SF_API_WHOLE_CONTEXT for -1 */
	struct sf_api_logit_bias *logit_bias; /* in the order given; token ids as the keys said
					       * (the model's vocabulary is checked later) */
	uint32_t n_logit_bias;   /* at most SF_API_MAX_LOGIT_BIAS */
	char *stop[SF_API_MAX_STOP];
	uint32_t n_stop;
	/* How the output ends beyond stop (vLLM's fields; llama.cpp's ignore_eos too): neutral
	 * when not given. */
	uint32_t *stop_token_ids; /* a token of these ends the output as a stop sequence does
				   * (checked against the vocabulary later) */
	uint32_t n_stop_token_ids; /* at most SF_API_MAX_STOP_IDS */
	bool include_stop_str_in_output; /* the stop's text (or token's) stays in the output */
	bool ignore_eos;          /* the end-of-generation tokens are never drawn */
	uint32_t min_tokens;      /* nor before this many tokens, when no stop counts either */
	bool no_prefix_cache;     /* "cache_prompt": false (llama.cpp's): the prompt neither
				   * adopts a node's cached pages nor leaves its own */
	bool logprobs;         /* chat: logprobs true; completions: logprobs >= 0 given */
	uint32_t top_logprobs; /* chat: top_logprobs; completions: the logprobs number */
	uint32_t n;            /* 1..SF_API_MAX_N; default 1 */
	char *user;            /* or NULL */
	char *session;         /* the "session" body field, or NULL */
	/* Structured outputs (api_request_structured.c): GBNF text the output must match, from
	 * response_format, grammar, json_schema, structured_outputs or guided_*; NULL: none.
	 * grammar_param names the field it came from (a static string). */
	char *grammar;
	const char *grammar_param;
	bool grammar_raw;  /* GBNF the client wrote (else one made here, its root one line) */
};

/* Compiles a request's grammar (r->grammar) as a node would: 0, or -1 with e a 400
 * invalid_grammar (413 past a limit) naming param and saying what is wrong. Costs up to a
 * fraction of a second for a grammar near the 1 MiB limit: run it off an event loop. */
int sf_api_grammar_check(const char *grammar, const char *param, struct sf_api_error *e);

/* Parses body as a request of kind. Returns 0, or -1 with e set (400, or 413 past a limit; 500
 * out of memory) and out zeroed. JSON null for an optional field means "not given". Error
 * messages are ASCII (bytes of the body are shown as \xNN), so they always serialize. */
int sf_api_parse_request(enum sf_api_kind kind, const uint8_t *body, size_t len,
			 struct sf_api_request *out, struct sf_api_error *e);
void sf_api_request_free(struct sf_api_request *r);

/* Checks a session name (X-Superfluid-Session or "session"): 1..128 bytes of
 * [A-Za-z0-9._:-]. 0 or -1 with e set (param names where it came from). */
int sf_api_check_session_name(const char *s, const char *param, struct sf_api_error *e);

#endif
