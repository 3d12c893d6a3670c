/* What a chat model's reply text means: content, reasoning and tool calls, parsed as the text
 * streams in, in the format of the model's chat template.
 *
 * Formats (the tool-call family, sf_chat_format_detect):
 *   HERMES   Hermes 2 Pro / 3, Qwen2.5, Qwen3, QwQ, Granite 4, MiMo, Bielik:
 *            <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>, one block per call,
 *            anywhere in the reply.
 *   LLAMA3   Llama 3.1 / 3.2 / 3.3: the reply (after any reasoning) starting with a JSON object
 *            {"name": N, "parameters": {...}} ("arguments" too; "type": "function" allowed),
 *            several separated by whitespace; or <|python_tag|> followed by such an object or
 *            by a builtin call  brave_search.call(query="...")  (keyword arguments: string,
 *            number, True, False, None literals).
 *   MISTRAL  Mistral Nemo / Small / Devstral / Magistral / Ministral:
 *            [TOOL_CALLS][{"name": N, "arguments": {...}, "id": "abc123def"}, ...]  or
 *            [TOOL_CALLS]N[CALL_ID]abc123def[ARGS]{...}  or  [TOOL_CALLS]N[ARGS]{...},
 *            the marker repeated before each call in the last two forms.
 *   PHI4     Phi-4-mini: functools[{"name": N, "arguments": {...}}, ...], one array of calls
 *            anywhere in the reply ("parameters" too), as vLLM's phi4_mini_json reads it.
 *   HARMONY  gpt-oss (OpenAI's harmony): the reply is messages, each a header then a body,
 *            the first header following the prompt's "<|start|>assistant":
 *              [<|start|>assistant][ to=R]<|channel|>C[ to=R][ [<|constrain|>]TYPE]<|message|>
 *              BODY  then <|end|> (more follow), <|return|> or <|call|> (the last; a node
 *              leaves an end-of-generation token out, so the reply may just end).
 *            C analysis: reasoning; final or commentary: content; to=functions.NAME (any
 *            channel): a call, BODY its arguments, one JSON object (no id: made). A message to
 *            another recipient (a builtin tool), or a call not taken (below), is content
 *            verbatim, header and end marker included. A reply that does not start as a
 *            header, or a header that does not parse (SF_CHAT_HARMONY_HEAD_MAX bytes at most),
 *            is content verbatim from there on. Blanks between messages are dropped; bodies
 *            are verbatim.
 *   CONTENT  anything else: no tool calls.
 * Reasoning (flags): <think>...</think> (SF_CHAT_THINK) or [THINK]...[/THINK]
 * (SF_CHAT_THINK_BRACKETS), opened only as the first thing of the reply; or the reply starts
 * inside it (SF_CHAT_IN_REASONING: the generation prompt ended with the opener, as
 * DeepSeek-R1 distills' and QwQ's do) and only the closer is looked for.
 *
 * Streaming: text fed in any chunks (split anywhere, inside a marker or a UTF-8 sequence)
 * gives the same events, concatenated, as the whole text fed at once. A marker is never shown
 * as content while it may still be completing: the longest end of the text that could begin
 * one is held back until it completes or cannot. Text events are valid UTF-8 (an incomplete
 * sequence is held until it completes; invalid bytes become U+FFFD).
 *
 * Whitespace next to a marker is dropped: before a tool call's opener, around the reasoning
 * (after the opener, before and after the closer) and after a tool call. Elsewhere text is
 * verbatim.
 *
 * Tool calls are reported whole when their text ends (not argument by argument): begin
 * (index, id, name), the arguments as one JSON text of an object (as the model wrote it, for
 * OpenAI's "arguments" string), end. Ids are the model's (Mistral's, when 1-40 letters and
 * digits), else the caller's make_id. A call that is not one (bad JSON, no name, unknown to
 * tool_known, unclosed when the reply ends, over SF_CHAT_MAX_CALL_BYTES, past
 * SF_CHAT_MAX_CALLS) is content, verbatim, marker included: nothing is dropped. */
#ifndef SF_API_CHAT_PARSE_H
#define SF_API_CHAT_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/api_output.h"

enum sf_chat_format {
	SF_CHAT_FORMAT_CONTENT = 0,
	SF_CHAT_FORMAT_HERMES,
	SF_CHAT_FORMAT_LLAMA3,
	SF_CHAT_FORMAT_MISTRAL,
	SF_CHAT_FORMAT_PHI4,
	SF_CHAT_FORMAT_HARMONY,
};

/* Flags of sf_chat_parse_init. */
#define SF_CHAT_TOOLS 1u           /* the request had tools: parse tool calls */
#define SF_CHAT_THINK 2u           /* <think>...</think> is reasoning */
#define SF_CHAT_THINK_BRACKETS 4u  /* [THINK]...[/THINK] is reasoning (wins over THINK) */
#define SF_CHAT_IN_REASONING 8u    /* the reply starts inside the reasoning (THINK if neither) */

#define SF_CHAT_MAX_CALL_BYTES (1u << 20) /* of one call's text; past it, it is content */
#define SF_CHAT_MAX_CALLS 64u             /* calls in one reply; later ones are content */
#define SF_CHAT_ID_MAX 48                 /* bytes of an id, its NUL included */
#define SF_CHAT_NAME_MAX 256              /* bytes of a tool's name */
#define SF_CHAT_HARMONY_HEAD_MAX 512         /* bytes of a harmony message's header */

/* Where the parser's findings go. Every callback may be NULL (that event is not wanted);
 * text is not NUL-terminated and valid only during the call. */
struct sf_chat_events {
	void *arg;
	void (*content)(void *arg, const char *text, size_t len);
	void (*reasoning)(void *arg, const char *text, size_t len);
	void (*call_begin)(void *arg, uint32_t index, const char *id, const char *name);
	void (*call_args)(void *arg, uint32_t index, const char *json, size_t len);
	void (*call_end)(void *arg, uint32_t index);
	/* Writes the id of call index (NUL-terminated, < SF_CHAT_ID_MAX bytes) when the model
	 * gave none; NULL: "call_<index>". Must depend on index only (the head: a CSPRNG's draw
	 * per reply, then index) for the split invariance to hold. */
	void (*make_id)(void *arg, uint32_t index, char id[SF_CHAT_ID_MAX]);
	/* Whether name is one of the request's tools; NULL: any name. A call to an unknown
	 * tool is content. */
	bool (*tool_known)(void *arg, const char *name);
};

/* The parser's state (fields private; the caller only allocates it). */
struct sf_chat_parser {
	enum sf_chat_format format;
	unsigned flags;
	int state, sub;
	bool think_ok, json_ok, skip_ws, ending, finished, failed;
	uint8_t pend[16]; /* the end of the text that may begin a marker */
	uint8_t n_pend;
	uint16_t n_ws;
	char ws[256];     /* blanks held back: dropped if a marker follows */
	struct sf_str call, out;
	int out_ch;
	size_t m[6]; /* a family's marks inside call (m[0]: where its part begins) */
	struct {
		uint32_t depth;
		bool in_str, esc, started;
		char quote;
	} js;
	uint32_t n_calls;
	const struct sf_chat_events *ev;
};

/* The tool-call family of a chat template's text, by distinctive strings:
 *   MISTRAL  "[TOOL_CALLS]"
 *   HERMES   "<tool_call>", and none of "<function=" (Qwen3-Coder's XML), "<arg_key>" (GLM),
 *            "<invoke" (MiniMax), whose calls are written otherwise
 *   LLAMA3   "<|start_header_id|>" with "\"parameters\"" or "<|python_tag|>", and no
 *            "<function=" (Functionary)
 *   PHI4     "<|tool|>" (Phi-4-mini's template writes a system message's tools there)
 *   HARMONY  "<|channel|>" and "<|message|>" (gpt-oss)
 *   CONTENT  otherwise, and for NULL. */
enum sf_chat_format sf_chat_format_detect(const char *template_text);
/* The reasoning flags of a chat template's text: SF_CHAT_THINK_BRACKETS when it has
 * "[THINK]", else SF_CHAT_THINK when it has "<think>" or "</think>", else 0. */
unsigned sf_chat_think_detect(const char *template_text);
/* Whether a rendered prompt leaves the reply inside the reasoning: it ends, but for
 * whitespace, with "<think>" or "[THINK]" (then pass SF_CHAT_IN_REASONING). */
bool sf_chat_prompt_opens_reasoning(const char *prompt, size_t len);
/* Whether the format's templates read the tools from a system message's "tools" string rather
 * than from a tools variable (PHI4: Phi-4-mini's; the head puts them there, chat_context.h). */
bool sf_chat_format_tools_in_system(enum sf_chat_format f);
/* Whether the format's templates read an assistant's reasoning from a "thinking" member
 * (HARMONY: gpt-oss's; the head copies reasoning_content there, chat_context.h). */
bool sf_chat_format_thinking_field(enum sf_chat_format f);
/* The format's name ("hermes", "llama3", "mistral", "phi4", "harmony", "content"). */
const char *sf_chat_format_name(enum sf_chat_format f);

/* Starts a reply's parse; flags as above (tool calls only with SF_CHAT_TOOLS). */
void sf_chat_parse_init(struct sf_chat_parser *p, enum sf_chat_format format, unsigned flags);
/* Feeds the next len bytes of the reply; events go to out. 0, or -1 when memory ran out
 * (the parse is then over: later calls return -1 and report nothing). */
int sf_chat_parse_feed(struct sf_chat_parser *p, const char *text, size_t len,
		       const struct sf_chat_events *out);
/* The reply ended: everything held back is reported (an unfinished call as content). 0 or -1
 * as feed; once only (later calls return 0 and report nothing). */
int sf_chat_parse_finish(struct sf_chat_parser *p, const struct sf_chat_events *out);
/* How many tool calls were reported (finish_reason "tool_calls" when > 0). */
uint32_t sf_chat_parse_calls(const struct sf_chat_parser *p);
/* Frees what p holds; p may be reused after sf_chat_parse_init. */
void sf_chat_parse_free(struct sf_chat_parser *p);

#endif
