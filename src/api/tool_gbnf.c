/* Forced tool calls: the grammar of a reply that is nothing but tool calls in the model's own
 * format (schema_gbnf.h, sf_tool_call_gbnf), each call's arguments constrained by its tool's
 * parameter schema (a schema that cannot be enforced: any JSON object), after the reasoning
 * block when the template has one; markers that are control tokens in the model's vocabulary
 * (Mistral's [TOOL_CALLS], [ARGS], [CALL_ID], [THINK]) named by id, <[id]>. */
#include "api/schema_gbnf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/grammar.h>

#include "api/api_request_internal.h"
#include "api/chat_parse.h"

static int app(struct sf_buf *b, const char *s) { return sf_buf_append(b, s, strlen(s)); }

/* GBNF literal of s. */
static int lit(struct sf_buf *b, const char *s)
{
	return sf_gbnf_lit(b, s, strlen(s));
}

void sf_gbnf_marks_none(struct sf_gbnf_marks *m)
{
	*m = (struct sf_gbnf_marks){ .tool_calls = SF_GBNF_NO_TOKEN, .args = SF_GBNF_NO_TOKEN,
				     .call_id = SF_GBNF_NO_TOKEN, .think = SF_GBNF_NO_TOKEN,
				     .think_end = SF_GBNF_NO_TOKEN };
}

int sf_mistral_form(const char *template_text)
{
	return strstr(template_text, "[CALL_ID]") ? SF_MISTRAL_CALL_ID
	       : strstr(template_text, "[ARGS]") ? SF_MISTRAL_ARGS
						 : SF_MISTRAL_ARRAY;
}

/* The marker s: its control token (<[id]>) where the vocabulary has one, else its text. */
static int mark(struct sf_buf *b, const char *s, uint32_t id)
{
	if (id == SF_GBNF_NO_TOKEN)
		return lit(b, s);
	char t[32];
	snprintf(t, sizeof(t), "<[%u]>", id);
	return app(b, t);
}

/* rule name ::= any text in which closer occurs only at its end, closer included (its control
 * token, id, where the vocabulary has one). With c0 the
 * closer's first byte (which must not occur again in it) and r the rest: text without c0,
 * then pieces c0 S where S holds no c0 and does not start with r, then c0 r. S is "", or r's
 * first k bytes then a byte that is neither r[k] nor c0 then any without c0, or a proper
 * prefix of r: the rules name_k (finite nesting, no recursion). */
static int text_until(struct sf_buf *b, const char *name, const char *closer, uint32_t id)
{
	char t[160];
	size_t n = strlen(closer);
	unsigned c0 = (unsigned char)closer[0];
	snprintf(t, sizeof(t), "%s ::= [^\\x%02x]* (\"\\x%02x\" %s_0)* ", name, c0, c0, name);
	int rc = app(b, t) || mark(b, closer, id) || app(b, "\n");
	for (size_t k = 0; k + 1 < n && !rc; k++) {
		unsigned rk = (unsigned char)closer[k + 1];
		snprintf(t, sizeof(t), "%s_%zu ::= \"\" | [^\\x%02x\\x%02x] [^\\x%02x]*", name, k, c0,
			 rk, c0);
		rc = app(b, t);
		if (!rc && k + 2 < n) {
			snprintf(t, sizeof(t), " | \"\\x%02x\" %s_%zu", rk, name, k + 1);
			rc = app(b, t);
		}
		rc = rc || app(b, "\n");
	}
	return rc;
}

/* Harmony's (gpt-oss) analysis message, the reasoning, before the answer's header. */
#define H_ANALYSIS "<|channel|>analysis<|message|>"
#define H_NEXT "<|start|>assistant"

/* lead ::= the reasoning block its flags say the template has (optional, or required when the
 * reply starts inside it), then blanks; "" without one. Harmony: an analysis message, or
 * none. */
static int lead_rules(struct sf_buf *b, int format, unsigned flags,
		      const struct sf_gbnf_marks *mk)
{
	if (format == SF_CHAT_FORMAT_HARMONY)
		return text_until(b, "reasoning", "<|end|>", SF_GBNF_NO_TOKEN) ||
		       app(b, "lead ::= \"" H_ANALYSIS "\" reasoning \"" H_NEXT "\" | \"\"\n");
	const char *open = NULL, *close = NULL;
	uint32_t open_id = SF_GBNF_NO_TOKEN, close_id = SF_GBNF_NO_TOKEN;
	if (flags & SF_CHAT_THINK_BRACKETS) {
		open = "[THINK]", close = "[/THINK]";
		open_id = mk->think, close_id = mk->think_end; /* control tokens in Mistral's */
	} else if (flags & (SF_CHAT_THINK | SF_CHAT_IN_REASONING)) {
		open = "<think>", close = "</think>";
	}
	int rc = close ? text_until(b, "reasoning", close, close_id) : 0;
	rc = rc || app(b, "lead ::= ");
	if (!rc && close && (flags & SF_CHAT_IN_REASONING))
		rc = app(b, "reasoning [ \\n]{0,4}");
	else if (!rc && close)
		rc = mark(b, open, open_id) || app(b, " reasoning [ \\n]{0,4} | \"\"");
	else
		rc = rc || app(b, "\"\"");
	return rc || app(b, "\n");
}

int sf_gbnf_after_reasoning(const char *grammar, int format, unsigned flags,
			    const struct sf_gbnf_marks *mk, char **out)
{
	struct sf_gbnf_marks none;
	if (!mk) {
		sf_gbnf_marks_none(&none);
		mk = &none;
	}
	*out = NULL;
	bool harmony = format == SF_CHAT_FORMAT_HARMONY;
	if (!harmony && !(flags & (SF_CHAT_THINK | SF_CHAT_THINK_BRACKETS | SF_CHAT_IN_REASONING)))
		return 0;
	/* Its one line "root ::= X": renamed, and a root of the reasoning then it. */
	const char *at = strncmp(grammar, "root ::= ", 9) ? strstr(grammar, "\nroot ::= ") : grammar;
	if (!at)
		return 0;
	if (*at == '\n')
		at++;
	struct sf_buf b;
	sf_buf_init(&b, SF_GRAMMAR_MAX_TEXT + 4096);
	int rc = sf_buf_append(&b, grammar, (size_t)(at - grammar)) || app(&b, "answer ::= ") ||
		 app(&b, at + 9) || app(&b, "\n") || lead_rules(&b, format, flags, mk) ||
		 app(&b, harmony ? "root ::= lead \"<|channel|>final<|message|>\" answer\n"
				 : "root ::= lead answer\n");
	if (!rc && (*out = malloc(sf_buf_used(&b) + 1))) {
		memcpy(*out, sf_buf_head(&b), sf_buf_used(&b));
		(*out)[sf_buf_used(&b)] = 0;
	}
	sf_buf_free(&b);
	return *out ? 0 : -1;
}

int sf_tool_call_gbnf(const struct sf_api_request *r, int format, unsigned flags,
		      const struct sf_gbnf_marks *mk, char **out, struct sf_api_error *e)
{
	struct sf_gbnf_marks none;
	if (!mk) {
		sf_gbnf_marks_none(&none);
		mk = &none;
	}
	*out = NULL;
	if (r->tool_choice != SF_TOOL_REQUIRED && r->tool_choice != SF_TOOL_NAMED)
		return 0;
	if (format != SF_CHAT_FORMAT_HERMES && format != SF_CHAT_FORMAT_LLAMA3 &&
	    format != SF_CHAT_FORMAT_PHI4 && format != SF_CHAT_FORMAT_HARMONY &&
	    format != SF_CHAT_FORMAT_MISTRAL)
		return sf_api_fail(e, 400, "invalid_request_error", "unsupported_value",
				   "tool_choice", "a forced tool call (tool_choice %s) cannot be "
				   "enforced in this model's tool-call format, %s (its template writes "
				   "no tool calls a grammar could hold the reply to): send tool_choice "
				   "\"auto\", or use a model whose template writes hermes, llama3, "
				   "mistral, phi4 or harmony calls",
				   r->tool_choice == SF_TOOL_NAMED ? "naming a function" : "\"required\"",
				   sf_chat_format_name((enum sf_chat_format)format));
	if (r->grammar)
		return sf_api_fail(e, 400, "invalid_request_error", "invalid_value", "tool_choice",
				   "a forced tool call (tool_choice %s) and %s hold the same reply to "
				   "different outputs, which no reply can satisfy both: send one of them",
				   r->tool_choice == SF_TOOL_NAMED ? "naming a function" : "\"required\"",
				   r->grammar_param ? r->grammar_param : "a structured output");
	uint32_t n = r->n_tools;
	const json_t **schemas = calloc(n + 1, sizeof(*schemas));
	const char **params = calloc(n + 1, sizeof(*params));
	char (*pbuf)[SF__API_PARAM_MAX] = calloc(n + 1, sizeof(*pbuf));
	uint32_t *roots = calloc(n + 1, sizeof(*roots)), *which = calloc(n + 1, sizeof(*which));
	json_t **parsed = calloc(n + 1, sizeof(*parsed));
	struct sf_buf b;
	sf_buf_init(&b, SF_GRAMMAR_MAX_TEXT);
	int rc = !schemas || !params || !pbuf || !roots || !which || !parsed;
	/* The tools it may call, and which of their schemas can be enforced (checked alone). */
	uint32_t k = 0;
	for (uint32_t i = 0; i < n && !rc; i++) {
		if (r->tool_choice == SF_TOOL_NAMED && strcmp(r->tools[i].name, r->tool_choice_name))
			continue;
		which[k] = i;
		parsed[k] = json_loads(r->tools[i].parameters ? r->tools[i].parameters : "{}", 0,
				       NULL);
		sf__api_path(pbuf[k], "tools[%u].function.parameters", i);
		params[k] = pbuf[k];
		char *alone = NULL;
		struct sf_api_error ignored;
		struct sf_grammar *cg = NULL;
		struct sf_err cerr;
		/* Taken when it compiles alone (a $ref cycle that takes nothing does not). */
		if (parsed[k] && json_is_object(parsed[k]) && json_object_size(parsed[k]) &&
		    !sf_schema_gbnf(parsed[k], params[k], &alone, &ignored) &&
		    !sf_grammar_compile(alone, strlen(alone), &cg, &cerr))
			schemas[k] = parsed[k];
		sf_grammar_unref(cg);
		free(alone);
		k++;
	}
	/* Their rules, those that cannot be enforced left out (any object). */
	const json_t **sub = calloc(k + 1, sizeof(*sub));
	const char **subp = calloc(k + 1, sizeof(*subp));
	uint32_t *subr = calloc(k + 1, sizeof(*subr)), ns = 0;
	rc = rc || !sub || !subp || !subr;
	for (uint32_t i = 0; i < k && !rc; i++)
		if (schemas[i]) {
			sub[ns] = schemas[i];
			subp[ns++] = params[i];
		}
	if (!rc && ns)
		rc = sf_schemas_gbnf(sub, subp, ns, &b, subr, e) ? -1 : 0;
	else if (!rc)
		rc = sf_schemas_gbnf(NULL, NULL, 0, &b, NULL, e) ? -1 : 0;
	if (rc == -1)
		goto out;
	/* call ::= one alternative per tool: its name, its arguments. Mistral's: [TOOL_CALLS] (its
	 * control token where the vocabulary has one), the name, [CALL_ID] and an id where the
	 * template writes one, [ARGS], the arguments; or (Nemo's) objects in an array after one
	 * [TOOL_CALLS], each with the id the template writes, or none. */
	bool llama3 = format == SF_CHAT_FORMAT_LLAMA3;
	bool mistral = format == SF_CHAT_FORMAT_MISTRAL;
	bool marked = mistral && mk->mistral_form != SF_MISTRAL_ARRAY;
	if (mistral && !marked)
		rc = rc || app(&b, "idtail ::= \"}\" | \", \\\"id\\\": \\\"\" [a-zA-Z0-9]{9} "
				   "\"\\\"}\"\n");
	rc = rc || app(&b, "call ::= ");
	for (uint32_t i = 0, j = 0; i < k && !rc; i++) {
		char head[SF_CHAT_NAME_MAX + 64], args[32];
		json_t *name = json_string(r->tools[which[i]].name);
		char *nj = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
		json_decref(name);
		if (!nj) {
			rc = 1;
			break;
		}
		if (format == SF_CHAT_FORMAT_HARMONY)
			snprintf(head, sizeof(head), "<|channel|>commentary to=functions.%s "
				 "<|constrain|>json<|message|>", r->tools[which[i]].name);
		else if (marked)
			snprintf(head, sizeof(head), "%s", r->tools[which[i]].name);
		else
			snprintf(head, sizeof(head), "{\"name\": %s, \"%s\": ", nj,
				 llama3 ? "parameters" : "arguments");
		free(nj);
		if (schemas[i])
			snprintf(args, sizeof(args), "s%u", subr[j++]);
		else
			snprintf(args, sizeof(args), "jobj");
		rc = (i && app(&b, " | ")) || app(&b, "(");
		if (marked)
			rc = rc || mark(&b, "[TOOL_CALLS]", mk->tool_calls) || app(&b, " ") ||
			     lit(&b, head) || app(&b, " ") ||
			     (mk->mistral_form == SF_MISTRAL_CALL_ID &&
			      (mark(&b, "[CALL_ID]", mk->call_id) || app(&b, " [a-zA-Z0-9]{9} "))) ||
			     mark(&b, "[ARGS]", mk->args) || app(&b, " ") || app(&b, args) ||
			     app(&b, ")");
		else
			rc = rc || lit(&b, head) || app(&b, " ") || app(&b, args) ||
			     app(&b, format == SF_CHAT_FORMAT_HARMONY ? ")"
				     : mistral ? " idtail)" : " \"}\")");
	}
	rc = rc || app(&b, "\n");
	/* The reasoning first, where the template has it. */
	rc = rc || lead_rules(&b, format, flags, mk);
	/* Hermes: <tool_call> blocks; Llama 3: bare objects; Phi-4-mini: one functools[...]
	 * array. One call, or up to 16 when parallel. Harmony: one call, whose <|call|> ends the
	 * reply (an end-of-generation token, drawn where the grammar ends). */
	if (format == SF_CHAT_FORMAT_HARMONY)
		rc = rc || app(&b, "root ::= lead call\n");
	else if (marked)
		rc = rc || app(&b, r->no_parallel_tool_calls ? "root ::= lead call\n"
							     : "root ::= lead call{1,16}\n");
	else if (mistral)
		rc = rc || app(&b, "root ::= lead ") || mark(&b, "[TOOL_CALLS]", mk->tool_calls) ||
		     app(&b, r->no_parallel_tool_calls ? " \"[\" call \"]\"\n"
						       : " \"[\" call (\", \" call){0,15} \"]\"\n");
	else if (format == SF_CHAT_FORMAT_PHI4)
		rc = rc || app(&b, r->no_parallel_tool_calls
				   ? "root ::= lead \"functools[\" call \"]\"\n"
				   : "root ::= lead \"functools[\" call (\", \" call){0,15} \"]\"\n");
	else
		rc = rc || app(&b, llama3 ? "block ::= call\n"
				   : "block ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n") ||
		     app(&b, r->no_parallel_tool_calls
				     ? "root ::= lead block\n"
				     : "root ::= lead block (\"\\n\"{1,2} block){0,15}\n");
	if (!rc && !(*out = malloc(sf_buf_used(&b) + 1)))
		rc = 1;
	if (!rc) {
		memcpy(*out, sf_buf_head(&b), sf_buf_used(&b));
		(*out)[sf_buf_used(&b)] = 0;
	}
out:
	if (rc == 1)
		rc = sf_api_fail(e, 413, "invalid_request_error", "too_large", "tools", "the tools' "
				 "grammar for tool_choice grows past %u bytes",
				 (unsigned)SF_GRAMMAR_MAX_TEXT);
	for (uint32_t i = 0; parsed && i < k; i++)
		json_decref(parsed[i]);
	free(parsed), free(schemas), free(params), free(pbuf), free(roots), free(which);
	free(sub), free(subp), free(subr);
	sf_buf_free(&b);
	return rc ? -1 : 0;
}
