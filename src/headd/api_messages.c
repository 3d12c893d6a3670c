/* POST /v1/messages (Anthropic's Messages API; docs/API.md): a chat request
 * (api_messages_req.c) answered as a message (thinking, text and tool_use content blocks,
 * stop_reason, stop_sequence, usage) or as Anthropic's stream events (message_start, ping,
 * content_block_start / _delta / _stop, message_delta, message_stop; error). Its errors are in
 * Anthropic's shape (headd_api_send_error on this endpoint). */
#include "headd.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_blocks.h"

struct headd_amsg {
	struct sf_blocks bl;
	bool started; /* message_start sent */
};

/* A tool call's arguments as the object they hold ({} when they hold none). */
static json_t *input_of(const struct sf_out_tool_call *c)
{
	json_t *v = c->arguments ? json_loads(c->arguments, 0, NULL) : NULL;
	if (json_is_object(v))
		return v;
	json_decref(v);
	return json_object();
}

static json_t *block_json(const struct headd_req *q, const struct sf_blocks *bl, uint32_t i,
			  bool empty)
{
	const struct sf_block *b = &bl->b[i];
	size_t len = 0;
	const char *t = empty ? "" : sf_block_text(bl, &q->out, i, &len);
	switch (b->kind) {
	case SF_BLOCK_REASONING:
		return json_pack("{s:s,s:s%,s:s}", "type", "thinking", "thinking", t, len,
				 "signature", "");
	case SF_BLOCK_TEXT:
		return json_pack("{s:s,s:s%}", "type", "text", "text", t, len);
	case SF_BLOCK_CALL:
		return json_pack("{s:s,s:s,s:s,s:o}", "type", "tool_use", "id", b->call->id, "name",
				 b->call->name ? b->call->name : "", "input",
				 empty ? json_object() : input_of(b->call));
	}
	return NULL;
}

/* stop_reason and stop_sequence. */
static const char *stop_of(const struct headd_req *q, json_t **seq)
{
	*seq = json_null();
	if (q->out.n_calls)
		return "tool_use";
	const char *f = q->finish_reason ? q->finish_reason : "stop";
	if (!strcmp(f, "length"))
		return "max_tokens";
	if (q->out.stopped_by_text && q->out.stop_index >= 0 &&
	    (uint32_t)q->out.stop_index < q->r.n_stop) {
		json_decref(*seq);
		*seq = json_string(q->r.stop[q->out.stop_index]);
		return "stop_sequence";
	}
	return "end_turn";
}

static json_t *usage_json(const struct headd_req *q, bool output)
{
	uint32_t cached = q->cached < q->n_content ? q->cached : q->n_content;
	return json_pack("{s:i,s:i,s:i,s:i}", "input_tokens", (int)(q->n_content - cached),
			 "cache_read_input_tokens", (int)cached, "cache_creation_input_tokens", 0,
			 "output_tokens", output ? (int)q->n_gen : 0);
}

static json_t *message_json(const struct headd_req *q, const struct sf_blocks *bl, bool start)
{
	json_t *content = json_array(), *seq = NULL;
	const char *stop = start ? NULL : stop_of(q, &seq);
	for (uint32_t i = 0; !start && content && i < bl->n; i++)
		if (json_array_append_new(content, block_json(q, bl, i, false))) {
			json_decref(content);
			content = NULL;
		}
	return json_pack("{s:s,s:s,s:s,s:s,s:o,s:s?,s:o,s:o}", "id", q->id, "type", "message",
			 "role", "assistant", "model", q->r.model, "content", content,
			 "stop_reason", stop, "stop_sequence", start ? json_null() : seq, "usage",
			 usage_json(q, !start));
}

void headd_messages_whole(struct headd_req *q, const struct sf_api_error *fail)
{
	if (fail) {
		headd_api_send_error(q->h, fail);
		return;
	}
	struct sf_blocks bl;
	sf_blocks_whole(&bl, &q->out);
	json_t *m = message_json(q, &bl, false);
	char *text = m ? json_dumps(m, JSON_COMPACT) : NULL;
	json_decref(m);
	headd_api_send_json(q->h, 200, text);
}

/* ---- the stream ---- */

static void emit(struct headd_req *q, const char *type, json_t *fields)
{
	json_t *o = json_pack("{s:s}", "type", type);
	char *text = NULL;
	if (o && (!fields || !json_object_update(o, fields)))
		text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	json_decref(fields);
	size_t n = text ? strlen(type) + strlen(text) + 32 : 0;
	char *ev = text ? malloc(n) : NULL;
	if (ev && q->h) {
		snprintf(ev, n, "event: %s\ndata: %s\n\n", type, text);
		sf_http_stream_write(q->h->http, ev, strlen(ev));
	}
	free(ev);
	free(text);
}

/* message_start, once the prompt's tokens are known (the first output, or the end). */
static void start(struct headd_req *q)
{
	struct headd_amsg *st = q->msg_state;
	if (st->started)
		return;
	st->started = true;
	emit(q, "message_start", json_pack("{s:o}", "message", message_json(q, &st->bl, true)));
	emit(q, "ping", NULL);
}

static void on_open(void *arg, uint32_t i)
{
	struct headd_req *q = arg;
	struct headd_amsg *st = q->msg_state;
	emit(q, "content_block_start", json_pack("{s:i,s:o}", "index", (int)i, "content_block",
						 block_json(q, &st->bl, i, true)));
	const struct sf_block *b = &st->bl.b[i];
	if (b->kind == SF_BLOCK_CALL)
		emit(q, "content_block_delta", json_pack("{s:i,s:{s:s,s:s}}", "index", (int)i,
							 "delta", "type", "input_json_delta",
							 "partial_json", b->call->arguments
							 ? b->call->arguments : "{}"));
}

static void on_delta(void *arg, uint32_t i, const char *text, size_t len)
{
	struct headd_req *q = arg;
	bool thinking = q->msg_state->bl.b[i].kind == SF_BLOCK_REASONING;
	emit(q, "content_block_delta", json_pack("{s:i,s:{s:s,s:s%}}", "index", (int)i, "delta",
						 "type", thinking ? "thinking_delta" : "text_delta",
						 thinking ? "thinking" : "text", text, len));
}

static void on_close(void *arg, uint32_t i)
{
	struct headd_req *q = arg;
	if (q->msg_state->bl.b[i].kind == SF_BLOCK_REASONING)
		emit(q, "content_block_delta", json_pack("{s:i,s:{s:s,s:s}}", "index", (int)i,
							 "delta", "type", "signature_delta",
							 "signature", ""));
	emit(q, "content_block_stop", json_pack("{s:i}", "index", (int)i));
}

static const struct sf_blocks_ops ops = { .open = on_open, .delta = on_delta,
					  .close = on_close };

void headd_messages_begin(struct headd_req *q)
{
	struct headd_amsg *st = calloc(1, sizeof(*st));
	if (st)
		sf_blocks_init(&st->bl);
	q->msg_state = st; /* no memory: the stream ends bare */
}

void headd_messages_deltas(struct headd_req *q)
{
	if (!q->msg_state)
		return;
	struct sf_blocks_ops o = ops;
	o.arg = q;
	size_t n = q->out.content.len - q->out.content_taken +
		   q->out.reasoning.len - q->out.reasoning_taken +
		   (q->out.n_calls - q->out.calls_taken);
	if (n)
		start(q);
	sf_blocks_step(&q->msg_state->bl, &q->out, &o);
}

void headd_messages_end(struct headd_req *q, const struct sf_api_error *fail)
{
	struct headd_amsg *st = q->msg_state;
	if (st && q->h) {
		if (fail) {
			char *json = sf_api_error_json_anthropic(fail);
			json_t *v = json ? json_loads(json, 0, NULL) : NULL;
			free(json);
			if (v) {
				json_object_del(v, "type");
				emit(q, "error", v);
			}
		} else {
			start(q);
			struct sf_blocks_ops o = ops;
			o.arg = q;
			sf_blocks_end(&st->bl, &q->out, true, &o);
			json_t *seq;
			const char *stop = stop_of(q, &seq);
			emit(q, "message_delta", json_pack("{s:{s:s,s:o},s:o}", "delta",
							   "stop_reason", stop, "stop_sequence", seq,
							   "usage", usage_json(q, true)));
			emit(q, "message_stop", NULL);
		}
	}
	if (q->h)
		sf_http_stream_end(q->h->http);
}

void headd_messages_free(struct headd_req *q)
{
	free(q->msg_state);
	q->msg_state = NULL;
}
