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

int headd_chat_render(struct headd_req *q, char **text, size_t *len, struct sf_api_error *e)
{
	struct headd *d = q->d;
	*text = NULL;
	*len = 0;
	const char *src = template_of(q, e);
	if (!src)
		return -1;
	bool own = !q->r.chat_template || src != q->r.chat_template;
	struct sf_err err = { 0 };
	if (!d->api.templates && !(d->api.templates = sf_chat_templates_new()))
		return sf_api_fail(e, 500, "server_error", NULL, NULL, "the head is out of memory");
	const struct sf_jinja *tmpl = sf_chat_templates_get(d->api.templates, src, strlen(src), &err);
	if (!tmpl)
		return sf_api_fail(e, 400, "invalid_request_error", "unsupported_template",
				   own ? NULL : "chat_template", "%s chat template cannot be used: %s%s",
				   own ? "the model's" : "the request's", err.msg,
				   own ? " (a request may give one in chat_template)" : "");
	char bos[256], eos[256];
	struct sf_chat_prompt_args a = {
		.chat_json = q->r.chat_json,
		.bos = token_text(q->tok, sf_tokenizer_bos(q->tok), bos, sizeof(bos)),
		.eos = token_text(q->tok, sf_tokenizer_eos(q->tok), eos, sizeof(eos)),
		.generation_prompt = !q->r.no_generation_prompt,
		.later = q->named && q->named->turns > 0,
		.now = (int64_t)time(NULL),
		.max_output = SF_MAX_TEXT,
	};
	if (sf_chat_prompt(tmpl, &a, text, len, &err))
		return render_failed(&err, own, e);
	/* The reply's format: the template's family, tool calls only when the request has tools
	 * it lets the model call. */
	q->chat_format = (int)sf_chat_format_detect(src);
	q->chat_flags = sf_chat_think_detect(src);
	if (q->r.n_tools && q->r.tool_choice != SF_TOOL_NONE)
		q->chat_flags |= SF_CHAT_TOOLS;
	if (q->chat_flags && sf_chat_prompt_opens_reasoning(*text, *len))
		q->chat_flags |= SF_CHAT_IN_REASONING;
	return 0;
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
	struct sf_err err;
	if (!d->api.templates && !(d->api.templates = sf_chat_templates_new()))
		return SF_TOKEN_NONE;
	const struct sf_jinja *tmpl = sf_chat_templates_get(d->api.templates, src, strlen(src), &err);
	char bos[256], eos[256];
	struct sf_chat_prompt_args a = {
		.chat_json = "{\"messages\":[]}",
		.bos = token_text(t, sf_tokenizer_bos(t), bos, sizeof(bos)),
		.eos = token_text(t, sf_tokenizer_eos(t), eos, sizeof(eos)),
		.later = true,
		.now = (int64_t)time(NULL),
	};
	char *close = NULL;
	size_t n = 0;
	if (!tmpl || sf_chat_prompt(tmpl, &a, &close, &n, &err))
		return SF_TOKEN_NONE;
	/* The longest special the close starts with. */
	uint32_t id = SF_TOKEN_NONE;
	char buf[65];
	for (size_t k = 1; k <= n && k < sizeof(buf); k++) {
		memcpy(buf, close, k);
		buf[k] = 0;
		uint32_t s = sf_tokenizer_special(t, buf);
		if (s != SF_TOKEN_NONE)
			id = s;
	}
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
