/* A chat request's prompt: its conversation rendered by its model's own chat template (the one
 * the node exported, or one the request names or gives), as text that a node encodes with
 * special tokens parsed, since templates write them as text; a named session's later turn
 * only what it adds after the reply the session holds (chat_prompt.h). */
#include "headd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/chat_parse.h"
#include "api/chat_prompt.h"
#include "api/chat_templates.h"
#include "api/schema_gbnf.h"

/* The template q renders with, or NULL with e set. */
static const char *template_of(struct headd_req *q, struct sf_api_error *e)
{
	const struct sf_head_tokenizer *t = q->tok;
	const char *given = q->r.chat_template;
	if (given) {
		const char *named = sf_tokenizer_template(t, given);
		if (named)
			return named;
		if (strstr(given, "{{") || strstr(given, "{%"))
			return given;
		sf_api_fail(e, 400, "invalid_request_error", "invalid_value", "chat_template",
			    "model %s has no chat template named %.64s (give a name it exports, "
			    "or a template's text)", q->r.model, given);
		return NULL;
	}
	const char *tmpl = q->r.n_tools ? sf_tokenizer_template(t, "tool_use") : NULL;
	if (!tmpl)
		tmpl = sf_tokenizer_template(t, NULL);
	if (!tmpl)
		sf_api_fail(e, 400, "invalid_request_error", "no_chat_template", "messages",
			    "model %s has no chat template: send its prompt to /v1/completions, or "
			    "give one in chat_template", q->r.model);
	return tmpl;
}

/* The text of token id (its special's text for BOS/EOS) in buf, "" when there is none. */
static const char *token_text(const struct sf_head_tokenizer *t, uint32_t id, char *buf,
			      size_t cap)
{
	size_t n = 0;
	const uint8_t *b = id == SF_TOKEN_NONE ? NULL : sf_tokenizer_bytes(t, id, &n);
	if (!b || n >= cap)
		n = 0;
	if (n)
		memcpy(buf, b, n);
	buf[n] = 0;
	return buf;
}

static int render_failed(const struct sf_err *err, bool own, struct sf_api_error *e)
{
	if (err->code == SF_E_NOMEM)
		return sf_api_fail(e, 500, "server_error", NULL, NULL,
				   "the head ran out of memory rendering the conversation");
	if (err->code == SF_E_LIMIT)
		return sf_api_fail(e, 413, "invalid_request_error", "context_length_exceeded",
				   "messages", "the chat template went past a limit rendering this "
				   "conversation: %s", err->msg);
	if (err->code == SF_E_FORMAT)
		return sf_api_fail(e, 400, "invalid_request_error", "template_error", "session",
				   "%s; send the whole conversation without a session", err->msg);
	return sf_api_fail(e, 400, "invalid_request_error", "template_error",
			   own ? "messages" : "chat_template", "%s chat template refused the "
			   "conversation: %s", own ? "the model's" : "the request's", err->msg);
}

/* The close's budget: what a template writes after an assistant's reply, rendered with no
 * conversation (a stand-in past only). A real template does it in a few thousand steps. */
#define CLOSE_STEPS 200000
#define CLOSE_BYTES (4u << 20)
#define CLOSE_OUTPUT (64u << 10)

/* The text the template src writes after an assistant's reply (a later turn with no new
 * message), rendered within the close's small budget; NULL when it cannot be. */
static char *close_text(struct sf_chat_templates *cache, const char *src, const char *bos,
			const char *eos, int64_t now, size_t *n)
{
	struct sf_err err;
	const struct sf_jinja *tmpl = sf_chat_templates_get(cache, src, strlen(src), &err);
	struct sf_chat_prompt_args a = {
		.chat_json = "{\"messages\":[]}", .bos = bos, .eos = eos, .later = true, .now = now,
		.max_output = CLOSE_OUTPUT, .max_bytes = CLOSE_BYTES, .max_steps = CLOSE_STEPS,
	};
	char *close = NULL;
	*n = 0;
	if (!tmpl || sf_chat_prompt(tmpl, &a, &close, n, &err))
		return NULL;
	return close;
}

/* The longest special token the close starts with, or SF_TOKEN_NONE. */
static uint32_t end_turn_of(const struct sf_head_tokenizer *t, const char *close, size_t n)
{
	uint32_t id = SF_TOKEN_NONE;
	char buf[65];
	for (size_t k = 1; close && k <= n && k < sizeof(buf); k++) {
		memcpy(buf, close, k);
		buf[k] = 0;
		uint32_t s = sf_tokenizer_special(t, buf);
		if (s != SF_TOKEN_NONE)
			id = s;
	}
	return id;
}

/* The markers of the model's vocabulary that are special tokens (Mistral's). */
static void marks_of(const struct sf_head_tokenizer *t, struct sf_gbnf_marks *m)
{
	sf_gbnf_marks_none(m);
	m->tool_calls = sf_tokenizer_special(t, "[TOOL_CALLS]");
	m->args = sf_tokenizer_special(t, "[ARGS]");
	m->call_id = sf_tokenizer_special(t, "[CALL_ID]");
	m->think = sf_tokenizer_special(t, "[THINK]");
	m->think_end = sf_tokenizer_special(t, "[/THINK]");
}

/* What a forced tool call's grammar reads of q's request, into j->tools (its tools' names and
 * parameters copied: the loop copies, the job compiles). -1: no memory. */
static int tools_for(struct headd_req *q, struct headd_render *j)
{
	const struct sf_api_request *r = &q->r;
	struct sf_api_request *t = &j->tools;
	if (!r->n_tools || (r->tool_choice != SF_TOOL_REQUIRED && r->tool_choice != SF_TOOL_NAMED))
		return 0;
	t->tool_choice = r->tool_choice;
	t->no_parallel_tool_calls = r->no_parallel_tool_calls;
	t->grammar = j->grammar; /* lent: whether the request constrains its output otherwise */
	t->grammar_param = r->grammar_param;
	if (r->tool_choice_name && !(t->tool_choice_name = strdup(r->tool_choice_name)))
		return -1;
	if (!(t->tools = calloc(r->n_tools, sizeof(*t->tools))))
		return -1;
	for (uint32_t i = 0; i < r->n_tools; i++, t->n_tools++) {
		t->tools[i].name = strdup(r->tools[i].name);
		t->tools[i].parameters = r->tools[i].parameters ? strdup(r->tools[i].parameters)
								: NULL;
		if (!t->tools[i].name || (r->tools[i].parameters && !t->tools[i].parameters)) {
			t->n_tools++;
			return -1;
		}
	}
	marks_of(q->tok, &j->marks);
	return 0;
}

int headd_chat_render_job(struct headd_req *q, struct headd_render *j, struct sf_api_error *e)
{
	if (q->r.grammar && !(j->grammar = strdup(q->r.grammar)))
		return sf_api_fail(e, 500, "server_error", NULL, NULL, "the head is out of memory");
	j->grammar_param = q->r.grammar_param;
	if (q->r.kind != SF_API_CHAT)
		return 0; /* a completion's: its grammar checked, nothing rendered */
	if (tools_for(q, j))
		return sf_api_fail(e, 500, "server_error", NULL, NULL, "the head is out of memory");
	const char *src = template_of(q, e);
	if (!src)
		return -1;
	size_t n = strlen(src);
	struct sf_jinja_limits lim;
	sf_jinja_limits_default(&lim);
	if (n > lim.max_source) /* refused here, never copied or parsed */
		return sf_api_fail(e, 400, "invalid_request_error", "unsupported_template",
				   q->r.chat_template && src == q->r.chat_template ? "chat_template"
										   : NULL,
				   "the chat template has %zu bytes, over the %zu a template may have",
				   n, lim.max_source);
	j->own = !q->r.chat_template || src != q->r.chat_template;
	j->src = malloc(n + 1);
	if (!j->src)
		return sf_api_fail(e, 500, "server_error", NULL, NULL, "the head is out of memory");
	memcpy(j->src, src, n + 1);
	j->chat_json = q->r.chat_json; /* lent for the render: given back with the result */
	q->r.chat_json = NULL;
	token_text(q->tok, sf_tokenizer_bos(q->tok), j->bos, sizeof(j->bos));
	token_text(q->tok, sf_tokenizer_eos(q->tok), j->eos, sizeof(j->eos));
	j->generation_prompt = !q->r.no_generation_prompt;
	j->has_tools = q->r.n_tools && q->r.tool_choice != SF_TOOL_NONE;
	j->later = q->named && q->named->turns > 0;
	j->now = (int64_t)time(NULL);
	/* The conversation's own values take about three times its JSON's bytes. */
	size_t body = j->chat_json ? strlen(j->chat_json) : 0;
	j->max_bytes = lim.max_bytes + 4 * body;
	return 0;
}

void headd_chat_render_run(struct headd_render *j)
{
	/* The structured output's grammar compiled as a node would (a large one takes a while). */
	if (j->grammar)
		j->grammar_bad = sf_api_grammar_check(j->grammar, j->grammar_param, &j->grammar_err);
	if (!j->src)
		return; /* a completion's grammar only */
	const struct sf_jinja *tmpl = sf_chat_templates_get(j->cache, j->src, strlen(j->src), &j->err);
	if (!tmpl) {
		j->rc = -1;
		j->parse_failed = true;
		return;
	}
	enum sf_chat_format f = sf_chat_format_detect(j->src);
	struct sf_chat_prompt_args a = {
		.chat_json = j->chat_json ? j->chat_json : "{}", .bos = j->bos, .eos = j->eos,
		.generation_prompt = j->generation_prompt, .later = j->later, .now = j->now,
		.max_bytes = j->max_bytes, .tools_in_system = sf_chat_format_tools_in_system(f),
		.thinking = sf_chat_format_thinking_field(f),
	};
	j->rc = sf_chat_prompt(tmpl, &a, &j->text, &j->len, &j->err);
	if (j->rc)
		return;
	j->close = close_text(j->cache, j->src, j->bos, j->eos, j->now, &j->close_len);
	/* The reply's format: the template's family, tool calls only when the request has tools
	 * it lets the model call. */
	j->chat_format = (int)f;
	j->chat_flags = sf_chat_think_detect(j->src);
	if (j->has_tools)
		j->chat_flags |= SF_CHAT_TOOLS;
	if (j->chat_flags && sf_chat_prompt_opens_reasoning(j->text, j->len))
		j->chat_flags |= SF_CHAT_IN_REASONING;
	/* A forced tool call (tool_choice required or named): a grammar of the model's own call
	 * format (a 400 where it cannot be enforced: no format, another structured output). */
	if (j->tools.n_tools) {
		j->marks.mistral_form = sf_mistral_form(j->src);
		j->tool_bad = sf_tool_call_gbnf(&j->tools, j->chat_format, j->chat_flags, &j->marks,
						&j->tool_grammar, &j->tool_err) != 0;
	}
}

int headd_chat_render_take(struct headd_req *q, struct headd_render *j, char **text, size_t *len,
			   struct sf_api_error *e)
{
	q->r.chat_json = j->chat_json; /* given back */
	j->chat_json = NULL;
	*text = NULL;
	*len = 0;
	if (j->grammar_bad) {
		*e = j->grammar_err;
		return -1;
	}
	if (j->parse_failed)
		return sf_api_fail(e, 400, "invalid_request_error", "unsupported_template",
				   j->own ? NULL : "chat_template", "%s chat template cannot be used: %s%s",
				   j->own ? "the model's" : "the request's", j->err.msg,
				   j->own ? " (a request may give one in chat_template)" : "");
	if (j->rc)
		return render_failed(&j->err, j->own, e);
	*text = j->text;
	*len = j->len;
	j->text = NULL;
	q->vocab.end_turn = end_turn_of(q->tok, j->close, j->close_len);
	q->chat_format = j->chat_format;
	q->chat_flags = j->chat_flags;
	/* A structured output follows the reasoning block, where the template has one. */
	char *g = NULL;
	if (q->r.grammar && !q->r.grammar_raw) {
		struct sf_gbnf_marks mk;
		marks_of(q->tok, &mk);
		if (sf_gbnf_after_reasoning(q->r.grammar, q->chat_format, q->chat_flags, &mk, &g)) {
			free(*text);
			*text = NULL;
			return sf_api_fail(e, 500, "server_error", NULL, NULL, "the head is out of "
					   "memory");
		}
		if (g) {
			free(q->r.grammar);
			q->r.grammar = g;
			g = NULL;
		}
	}
	/* A forced tool call's grammar, made off the loop by the job (or its refusal). */
	if (j->tool_bad) {
		*e = j->tool_err;
		free(*text);
		*text = NULL;
		return -1;
	}
	if (j->tool_grammar) {
		q->r.grammar = j->tool_grammar;
		q->r.grammar_param = "tool_choice";
		j->tool_grammar = NULL;
	}
	return 0;
}

void headd_render_free(struct headd_render *j)
{
	if (!j)
		return;
	free(j->src);
	free(j->grammar);
	free(j->chat_json);
	free(j->text);
	free(j->close);
	free(j->tool_grammar);
	j->tools.grammar = NULL; /* lent: j->grammar */
	sf_api_request_free(&j->tools);
	free(j);
}

int headd_chat_out(struct headd_req *q, struct sf_api_error *e)
{
	if (q->r.kind != SF_API_CHAT ||
	    (q->chat_format == SF_CHAT_FORMAT_CONTENT && !(q->chat_flags & ~SF_CHAT_TOOLS)))
		return 0;
	if (sf_out_set_format(&q->out, q->chat_format, q->chat_flags))
		return sf_api_fail(e, 500, "server_error", NULL, NULL, "the head is out of memory");
	return 0;
}

uint32_t headd_chat_end_turn(struct headd *d, const struct sf_head_tokenizer *t, const char *src)
{
	if (!t || !src)
		return SF_TOKEN_NONE;
	if (!d->api.templates && !(d->api.templates = sf_chat_templates_new()))
		return SF_TOKEN_NONE;
	char bos[256], eos[256];
	size_t n = 0;
	char *close = close_text(d->api.templates, src,
				 token_text(t, sf_tokenizer_bos(t), bos, sizeof(bos)),
				 token_text(t, sf_tokenizer_eos(t), eos, sizeof(eos)),
				 (int64_t)time(NULL), &n);
	uint32_t id = end_turn_of(t, close, n);
	free(close);
	return id;
}

uint32_t headd_req_end_turn(struct headd_req *q)
{
	struct sf_api_error e;
	const char *src = q->r.kind == SF_API_CHAT ? template_of(q, &e)
						   : sf_tokenizer_template(q->tok, NULL);
	return headd_chat_end_turn(q->d, q->tok, src);
}
