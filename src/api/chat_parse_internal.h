/* Inside the chat output parser (chat_parse.h): the core's services to the families, each
 * family's table, and the JSON checks they share. */
#ifndef SF_API_CHAT_PARSE_INTERNAL_H
#define SF_API_CHAT_PARSE_INTERNAL_H

#include "api/chat_parse.h"

enum { SFCP_CONTENT = 0, SFCP_REASONING = 1, SFCP_CALL = 2 };

/* A tool-call family: its openers in content, and its call's byte by byte reading. */
struct sfcp_family {
	const char *const *openers; /* markers that open a call in content (none a prefix of
				     * another, each < 16 bytes) */
	unsigned n_openers;
	/* Opener which matched; p->call holds its text. */
	void (*open)(struct sf_chat_parser *p, unsigned which);
	/* The next byte inside the call. */
	void (*body)(struct sf_chat_parser *p, uint8_t c);
	/* The reply ended inside the call. */
	void (*finish)(struct sf_chat_parser *p);
	/* The first non-blank byte of the answer (the reply or what follows the reasoning, or
	 * a call of this family): true when it took it as a call's start; may be NULL. */
	bool (*answer_start)(struct sf_chat_parser *p, uint8_t c);
};

extern const struct sfcp_family sfcp_hermes, sfcp_llama3, sfcp_mistral, sfcp_phi4;

/* A format whose reply is read whole by its own state machine (harmony's channels), with the
 * core's services below; the core then only hands out text and calls. */
struct sfcp_reader {
	void (*step)(struct sf_chat_parser *p, uint8_t c); /* the next byte of the reply */
	void (*finish)(struct sf_chat_parser *p);          /* the reply ended */
};

extern const struct sfcp_reader sfcp_harmony;

/* ---- the core's services (chat_parse.c) ---- */

/* Text of channel ch (SFCP_CONTENT or SFCP_REASONING) out, in order, as complete UTF-8. */
void sfcp_text(struct sf_chat_parser *p, int ch, const void *s, size_t n);
/* Processes byte c in the current state (a family hands back a byte it does not take). */
void sfcp_step(struct sf_chat_parser *p, uint8_t c);
/* Appends c to the call's text; false (the call became content) past SF_CHAT_MAX_CALL_BYTES. */
bool sfcp_call_add(struct sf_chat_parser *p, uint8_t c);
/* The call's text is content after all, verbatim; the state is content. */
void sfcp_call_fail(struct sf_chat_parser *p);
/* The call's text is content and c is read again as content. */
void sfcp_call_fail_at(struct sf_chat_parser *p, uint8_t c);
/* Reports a call (the text so far flushed first). id: the model's, or NULL. */
void sfcp_call_report(struct sf_chat_parser *p, const char *name, const char *id,
		      const char *args, size_t args_len);
/* Whether the caller knows the tool (tool_known). */
bool sfcp_tool_known(const struct sf_chat_parser *p, const char *name);
/* The JSON array p->call[from..] ended: every element a call to a known tool (each reported,
 * then as sfcp_call_done), or all of the call's text is content (sfcp_call_fail). */
void sfcp_call_array(struct sf_chat_parser *p, size_t from);
/* The call was reported: back to content, blanks after it dropped. */
void sfcp_call_done(struct sf_chat_parser *p);
/* Whether the call's text ends with s. */
bool sfcp_call_ends_with(const struct sf_chat_parser *p, const char *s);
/* Whether c may be in a tool's name or an id as the families write them (letters, digits,
 * "_", "-", "."). */
static inline bool sfcp_name_byte(uint8_t c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       c == '_' || c == '-' || c == '.';
}
/* Whether c is blank (space, tab, CR, LF). */
static inline bool sfcp_blank(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The JSON nesting of p->call's value, byte by byte: 1 when the object or array that began
 * with the first { or [ just closed, -1 when it cannot be JSON (nesting past 128, a closer
 * with nothing open), 0 otherwise. Strings are followed, so brackets inside them do not
 * count. */
int sfcp_json_track(struct sf_chat_parser *p, uint8_t c);
/* Starts the tracker (before a value's first byte). */
void sfcp_json_track_reset(struct sf_chat_parser *p);

/* ---- JSON checks (chat_parse_json.c) ---- */

struct sfcp_span {
	size_t off, len;
};
struct sfcp_member {
	struct sfcp_span key; /* the raw text between the key's quotes */
	struct sfcp_span val; /* the value's text */
};
/* s[0..n), blanks around it allowed, as one JSON value of RFC 8259 (nesting up to 128,
 * strings valid UTF-8 without NUL escapes): true if it is an object (members: the first max
 * in mem, *count all of them) or, for sfcp_json_array, an array (elements' spans). */
bool sfcp_json_object(const char *s, size_t n, struct sfcp_member *mem, size_t max,
		      size_t *count);
bool sfcp_json_array(const char *s, size_t n, struct sfcp_span *el, size_t max, size_t *count);
/* A JSON string literal's value, decoded into out (cap bytes, NUL-terminated); false if it
 * is no string, holds a NUL, or does not fit. */
bool sfcp_json_string(const char *s, size_t n, char *out, size_t cap);
/* The member called key (raw text equal), or NULL. */
const struct sfcp_member *sfcp_json_member(const char *s, const struct sfcp_member *mem,
					   size_t n, const char *key);

/* A call from an object's text s[0..n): its name (decoded into name), arguments (args: an
 * object's text, or the decoded text of a string holding one, malloc'd; "{}" when absent)
 * and id (decoded, "" when absent or not 1-40 letters and digits). strict (a bare Llama
 * reply): "parameters" or "arguments" must be there and no other key but "type":
 * "function". False if it is not a call. */
struct sfcp_call {
	char name[SF_CHAT_NAME_MAX];
	char id[SF_CHAT_ID_MAX];
	char *args;
	size_t args_len;
};
bool sfcp_call_parse(const char *s, size_t n, bool strict, struct sfcp_call *out);
void sfcp_call_clear(struct sfcp_call *c);

#endif
