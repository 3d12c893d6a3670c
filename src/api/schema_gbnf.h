/* Structured outputs at the head: JSON Schemas and regular expressions compiled to GBNF text
 * (the grammar language of superfluid/grammar.h), which the node's sampler then enforces.
 *
 * A schema's grammar produces compact JSON (at most one space around , and :) that validates
 * against the schema; where the schema allows more than the grammar writes (keys beyond
 * "properties", strings that merely contain a pattern, exclusive bounds of non-integers), the
 * grammar writes a valid subset. What it cannot keep to is refused by keyword: oneOf, not,
 * if/then/else, uniqueItems, multipleOf (but 1 on integers), minProperties, patternProperties,
 * dependentRequired / dependentSchemas, contains, $ref outside the document, unknown formats,
 * and any keyword it does not know. Taken: type (one or a list), enum, const, anyOf, allOf of
 * one, $ref to "#", "#/$defs/..." or "#/definitions/..." (recursion allowed), properties,
 * required, additionalProperties (false, true or a schema), items, prefixItems, minItems,
 * maxItems, minLength, maxLength, pattern, format (date, time, date-time, uuid, email, ipv4,
 * hostname), minimum, maximum, exclusiveMinimum, exclusiveMaximum; annotations are ignored.
 *
 * Regular expressions (a schema's pattern, vLLM's structured_outputs.regex): literals, escapes
 * (\d \w \s and their negations, \n \t \r \f \v \. and other punctuation, \uHHHH, \xHH),
 * classes with ranges and ^, ".", groups ((...), (?:...), (?<name>...)), |, and * + ? {m}
 * {m,} {m,n} (lazy forms taken as greedy); ^ and $ only at the ends. The whole output matches
 * (a pattern is taken as anchored, a subset of what an unanchored one allows). Refused: back
 * references, lookaround, anchors or \b inside. */
#ifndef SF_API_SCHEMA_GBNF_H
#define SF_API_SCHEMA_GBNF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <superfluid/buf.h>

#include "api/api_error.h"

#define SF_SCHEMA_MAX_DEPTH 64    /* schemas inside schemas */
#define SF_SCHEMA_MAX_RULES 4096  /* rules a schema compiles to */
#define SF_SCHEMA_MAX_INT 999999999999999LL /* integers written have at most 15 digits */

/* Appends to out the GBNF expression for the regular expression re[0..n); json: the text is
 * inside a JSON string (so " \ and control characters are left out of classes and written
 * escaped as literals). 0, or -1 with why (a sentence, cap bytes). */
int sf_regex_gbnf(const char *re, size_t n, bool json, struct sf_buf *out, char *why,
		  size_t cap);

/* Appends s[0..n) to b as a GBNF literal ("...", with '"', '\\' and control bytes escaped);
 * 0, or -1 when b is full. */
int sf_gbnf_lit(struct sf_buf *b, const char *s, size_t n);

/* GBNF text (malloc'd, NUL-terminated, into *out) whose root is a JSON value valid against
 * schema. 0, or -1 with e set: a 400 whose param is param + the keyword's path in the schema
 * ("response_format.json_schema.schema.properties.age.multipleOf"), 413 past a limit. */
int sf_schema_gbnf(const json_t *schema, const char *param, char **out, struct sf_api_error *e);

/* Several schemas into one grammar: appends to out the fixed rules and each schema's rules,
 * roots[i] the number N of schema i's rule "sN" (no root rule: the caller writes one). params
 * name each schema for errors. 0, or -1 with e set as sf_schema_gbnf. */
int sf_schemas_gbnf(const json_t *const *schemas, const char *const *params, size_t n,
		    struct sf_buf *out, uint32_t *roots, struct sf_api_error *e);

struct sf_api_request;

/* Markers that are control tokens in a model's vocabulary (Mistral's), which a grammar names by
 * id (<[id]>, superfluid/grammar.h): each the token's id, or SF_GBNF_NO_TOKEN where the
 * vocabulary has no such special token (the marker is then written as text); and the form of
 * Mistral's calls the template writes. */
#define SF_GBNF_NO_TOKEN UINT32_MAX
enum sf_mistral_form {
	SF_MISTRAL_ARRAY = 0, /* [TOOL_CALLS][{"name": N, "arguments": A, "id": I}, ...] (Nemo) */
	SF_MISTRAL_ARGS,      /* [TOOL_CALLS]N[ARGS]A... (Devstral, Magistral, Ministral 3) */
	SF_MISTRAL_CALL_ID,   /* [TOOL_CALLS]N[CALL_ID]I[ARGS]A... (Small 3.2) */
};
struct sf_gbnf_marks {
	uint32_t tool_calls, args, call_id; /* [TOOL_CALLS] [ARGS] [CALL_ID] */
	uint32_t think, think_end;          /* [THINK] [/THINK] */
	int mistral_form;                   /* enum sf_mistral_form */
};

/* All markers text (SF_GBNF_NO_TOKEN), the array form. */
void sf_gbnf_marks_none(struct sf_gbnf_marks *m);

/* The form of Mistral's calls a chat template writes: SF_MISTRAL_CALL_ID where it has
 * "[CALL_ID]", else SF_MISTRAL_ARGS where it has "[ARGS]", else SF_MISTRAL_ARRAY. */
int sf_mistral_form(const char *template_text);

/* The grammar of a reply that is only tool calls, for tool_choice "required" or a named
 * function (else *out is NULL): in the model's format (format: enum sf_chat_format of
 * api/chat_parse.h; HERMES "<tool_call>\n{"name": N, "arguments": A}\n</tool_call>", LLAMA3
 * {"name": N, "parameters": A}, PHI4 functools[{"name": N, "arguments": A}, ...], HARMONY
 * <|channel|>commentary to=functions.N <|constrain|>json<|message|>A, one call as gpt-oss makes
 * one a reply; MISTRAL in mk's form, its markers mk's control tokens or text), after the
 * reasoning block its flags say the template has (SF_CHAT_THINK...: "<think>...</think>" or
 * [THINK]...[/THINK] (mk's tokens), or the reply starting inside it; HARMONY: an analysis
 * message then <|start|>assistant, or none), one call when r->no_parallel_tool_calls, else up
 * to 16; each call's arguments valid against its tool's parameters (a schema that cannot be
 * enforced: any JSON object). mk NULL: sf_gbnf_marks_none's. 0, or -1 with e set (413: too
 * large; 400 naming tool_choice: CONTENT's no calls, where a forced call cannot be enforced,
 * or a request that constrains its output otherwise too, r->grammar). Reads only r's
 * tool_choice, tool_choice_name, tools (names and parameters), n_tools,
 * no_parallel_tool_calls, grammar (whether set) and grammar_param. */
int sf_tool_call_gbnf(const struct sf_api_request *r, int format, unsigned flags,
		      const struct sf_gbnf_marks *mk, char **out, struct sf_api_error *e);

/* A grammar made here (its root one line "root ::= ...") to follow the reasoning block that
 * flags (SF_CHAT_THINK...) say the template has (its markers mk's control tokens or text; mk
 * NULL: text), or for format HARMONY an analysis message
 * (or none) then the final message's header: *out the new text (malloc'd), or NULL when
 * neither names reasoning or the text has no such line. -1: no memory. */
int sf_gbnf_after_reasoning(const char *grammar, int format, unsigned flags,
			    const struct sf_gbnf_marks *mk, char **out);

/* GBNF text (malloc'd into *out) of any JSON object (response_format json_object). -1: no
 * memory. */
int sf_json_object_gbnf(char **out);

#endif
