/* POST /v1/responses, GET and DELETE /v1/responses/{id} (docs/API.md, "The Responses API").
 * A request is a chat request (api_responses_req.c) answered as a response object, or as
 * its typed stream events (response.created, response.output_item.added,
 * response.output_text.delta, response.function_call_arguments.delta, response.completed,
 * ...). A stored response (store, the default) runs in a named session of its own chain,
 * "resp_<chain>": its id is "resp_<chain><serial>", and a request naming it as
 * previous_response_id continues that session (the node's context, what the head's log
 * restores after a restart) with its new input; only the chain's latest response can be
 * continued. GET /v1/responses/{id} answers it again from the head's log (--wal-dir), DELETE
 * ends its chain; both only for the API key that made it. */
#include "headd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_responses.h"
#include "daemon/log.h"

#define CHAIN_HEX 16
#define PREFIX "resp_"
#define MAX_ITEMS (SF_API_MAX_TOOL_CALLS + 8)

/* A streamed response's items so far. */
struct headd_resp {
	struct sf_resp_item items[MAX_ITEMS];
	size_t from[MAX_ITEMS], to[MAX_ITEMS]; /* reasoning, message: their text in the decoder */
	uint32_t n;
	int open;      /* the item being written (its events not closed), or -1 */
	uint64_t seq;  /* the next event's sequence_number */
};

/* The chain a response id names (16 hex digits after "resp_"), into chain; false when it
 * names none. */
static bool chain_of(const char *id, char chain[CHAIN_HEX + 1])
{
	size_t p = sizeof(PREFIX) - 1;
	if (strncmp(id, PREFIX, p) || strlen(id) <= p + CHAIN_HEX || strlen(id) > SF_WALREC_MAX_ID)
		return false;
	for (size_t i = 0; i < CHAIN_HEX; i++) {
		char c = id[p + i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
		chain[i] = c;
	}
	chain[CHAIN_HEX] = 0;
	return true;
}

static void name_of(const char chain[CHAIN_HEX + 1], char *name, size_t cap)
{
	snprintf(name, cap, PREFIX "%s", chain);
}

/* Whether the log says prev is the latest generation of its session (after a restart the
 * head knows no other way). */
static bool latest_in_log(struct headd *d, const char *prev)
{
	struct sf_wal_session *ws = NULL;
	struct sf_wal_gen *g = d->wal.st ? sf_wal_state_request(d->wal.st, prev, &ws) : NULL;
	return g && ws && ws->n_gens && ws->gens[ws->n_gens - 1] == g;
}

int headd_responses_named(struct headd_req *q, struct sf_api_error *e)
{
	struct headd *d = q->d;
	const struct sf_api_responses *o = q->r.resp;
	char chain[CHAIN_HEX + 1], name[SF_API_MAX_SESSION_ID + 1];
	struct headd_named *s = NULL;
	if (o->previous_id) {
		if (!chain_of(o->previous_id, chain))
			return sf_api_fail(e, 404, "invalid_request_error", "previous_response_not_found",
					   "previous_response_id", "previous response %.64s not found "
					   "(not an id this head gave)", o->previous_id);
		name_of(chain, name, sizeof(name));
		s = headd_named_find(d, name, q->owner);
		if (!s)
			return sf_api_fail(e, 404, "invalid_request_error",
					   "previous_response_not_found", "previous_response_id",
					   "previous response %.64s not found (it was not stored, its "
					   "conversation was deleted or idle past --session-idle-s, or "
					   "another key made it)", o->previous_id);
		if (strcmp(s->model, q->r.model))
			return sf_api_fail(e, 400, "invalid_request_error", "invalid_value", "model",
					   "previous response %.64s ran model %s, not %.128s",
					   o->previous_id, s->model, q->r.model);
		if (s->busy || s->restoring)
			return sf_api_fail(e, 409, "invalid_request_error", "conversation_busy", NULL,
					   "the conversation of %.64s is still generating a response; "
					   "wait for it", o->previous_id);
		if (strcmp(s->last_id, o->previous_id) && !latest_in_log(d, o->previous_id))
			return sf_api_fail(e, 400, "invalid_request_error", "invalid_value",
					   "previous_response_id", "response %.64s is not the latest "
					   "of its conversation%s%s: only the latest can be continued "
					   "(its node holds the conversation as it is now)",
					   o->previous_id, s->last_id[0] ? " (" : "",
					   s->last_id[0] ? s->last_id : "");
	} else {
		snprintf(chain, sizeof(chain), "%016" PRIx64, headd_gen_rand(d));
		name_of(chain, name, sizeof(name));
		if (o->store && !(s = headd_named_new(d, name, q->r.model, q->owner, 0, e)))
			return -1;
	}
	/* The serial after the chain routes GET and follow-ups to this shard
	 * (headd_shard_of_request_id). */
	snprintf(q->id, sizeof(q->id), PREFIX "%s%" PRIx64, chain, headd_serial_new(d));
	if (s) {
		s->busy = q;
		s->used_ms = sf_loop_now(d->loop);
		q->named = s;
	}
	return 0;
}

/* ---- the answer ---- */

static void usage_of(const struct headd_req *q, struct sf_api_usage *u)
{
	*u = (struct sf_api_usage){
		.prompt_tokens = q->n_content,
		.cached_tokens = q->cached < q->n_content ? q->cached : q->n_content,
		.completion_tokens = q->n_gen,
		.reasoning_tokens = q->out.n_reasoning_tokens,
	};
}

static void meta_of(const struct headd_req *q, const char *status,
		    const struct sf_api_error *fail, struct sf_resp_meta *m)
{
	bool length = q->finish_reason && !strcmp(q->finish_reason, "length");
	*m = (struct sf_resp_meta){
		.id = q->id, .created_at = q->created_s, .model = q->r.model,
		.status = status ? status : fail ? "failed" : length ? "incomplete" : "completed",
		.incomplete_reason = !fail && length ? "max_output_tokens" : NULL,
		.error = fail, .echo_json = q->r.resp->echo_json,
		.previous_id = q->r.resp->previous_id, .store = q->r.resp->store,
	};
}

static void item_id(struct headd_req *q, const char *kind, uint32_t i, char *out, size_t cap)
{
	snprintf(out, cap, "%s_%s_%u", kind, q->id + sizeof(PREFIX) - 1, i);
}

void headd_responses_whole(struct headd_req *q, const struct sf_api_error *fail)
{
	if (fail) {
		headd_api_send_error(q->h, fail);
		return;
	}
	struct sf_resp_item items[MAX_ITEMS];
	uint32_t n = 0;
	const struct sf_out *o = &q->out;
	if (o->reasoning.len) {
		items[n] = (struct sf_resp_item){ .kind = SF_RESP_REASONING, .text = o->reasoning.p,
						  .len = o->reasoning.len, .done = true };
		item_id(q, "rs", n, items[n].id, sizeof(items[n].id));
		n++;
	}
	if (o->content.len || !o->n_calls) {
		items[n] = (struct sf_resp_item){ .kind = SF_RESP_MESSAGE, .text = o->content.p,
						  .len = o->content.len, .done = true };
		item_id(q, "msg", n, items[n].id, sizeof(items[n].id));
		n++;
	}
	for (uint32_t i = 0; i < o->n_calls && n < MAX_ITEMS; i++, n++) {
		items[n] = (struct sf_resp_item){ .kind = SF_RESP_CALL, .call = &o->calls[i],
						  .done = true };
		item_id(q, "fc", n, items[n].id, sizeof(items[n].id));
	}
	struct sf_resp_meta m;
	meta_of(q, NULL, NULL, &m);
	struct sf_api_usage u;
	usage_of(q, &u);
	json_t *obj = sf_resp_object(&m, items, n, &u);
	char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	headd_api_send_json(q->h, 200, text);
}

/* ---- the stream ---- */

static void emit(struct headd_req *q, const char *type, json_t *fields)
{
	struct headd_resp *st = q->resp_state;
	char *ev = sf_resp_event(type, st->seq++, fields);
	if (ev && q->h)
		sf_http_stream_write(q->h->http, ev, strlen(ev));
	free(ev);
}

static json_t *response_now(struct headd_req *q, const char *status,
			    const struct sf_api_error *fail, bool with_usage)
{
	struct headd_resp *st = q->resp_state;
	struct sf_resp_meta m;
	meta_of(q, status, fail, &m);
	struct sf_api_usage u;
	usage_of(q, &u);
	return json_pack("{s:o}", "response", sf_resp_object(&m, st->items, st->n,
							     with_usage ? &u : NULL));
}

void headd_responses_begin(struct headd_req *q)
{
	struct headd_resp *st = calloc(1, sizeof(*st));
	if (!st)
		return; /* no events: the stream ends bare */
	st->open = -1;
	q->resp_state = st;
	emit(q, "response.created", response_now(q, "in_progress", NULL, false));
	emit(q, "response.in_progress", response_now(q, "in_progress", NULL, false));
}

/* The open item's text as far as the decoder has it. */
static void item_text(struct headd_req *q, uint32_t i)
{
	struct headd_resp *st = q->resp_state;
	struct sf_resp_item *it = &st->items[i];
	const struct sf_str *s = it->kind == SF_RESP_REASONING ? &q->out.reasoning : &q->out.content;
	if (!it->done)
		st->to[i] = s->len;
	it->text = s->p ? s->p + st->from[i] : "";
	it->len = st->to[i] - st->from[i];
}

static json_t *where(struct headd_req *q, uint32_t i)
{
	return json_pack("{s:s,s:i,s:i}", "item_id", q->resp_state->items[i].id, "output_index",
			 (int)i, "content_index", 0);
}

static void close_open(struct headd_req *q)
{
	struct headd_resp *st = q->resp_state;
	if (st->open < 0)
		return;
	uint32_t i = (uint32_t)st->open;
	struct sf_resp_item *it = &st->items[i];
	item_text(q, i);
	it->done = true;
	st->open = -1;
	json_t *text = json_stringn(it->text ? it->text : "", it->len);
	if (it->kind == SF_RESP_REASONING) {
		json_t *f = where(q, i);
		json_object_set_new(f, "text", text);
		emit(q, "response.reasoning_text.done", f);
	} else {
		json_t *f = where(q, i);
		json_object_set(f, "text", text);
		json_object_set_new(f, "logprobs", json_array());
		emit(q, "response.output_text.done", f);
		f = where(q, i);
		json_object_set_new(f, "part", json_pack("{s:s,s:o,s:[],s:[]}", "type", "output_text",
							 "text", text, "annotations", "logprobs"));
		emit(q, "response.content_part.done", f);
	}
	emit(q, "response.output_item.done", json_pack("{s:i,s:o}", "output_index", (int)i, "item",
						       sf_resp_item_json(it)));
}

/* A new item of kind; its text starts at from in its channel. */
static uint32_t open_item(struct headd_req *q, enum sf_resp_item_kind kind, size_t from)
{
	struct headd_resp *st = q->resp_state;
	close_open(q);
	uint32_t i = st->n++;
	struct sf_resp_item *it = &st->items[i];
	*it = (struct sf_resp_item){ .kind = kind };
	item_id(q, kind == SF_RESP_REASONING ? "rs" : kind == SF_RESP_MESSAGE ? "msg" : "fc", i,
		it->id, sizeof(it->id));
	st->from[i] = st->to[i] = from;
	item_text(q, i);
	emit(q, "response.output_item.added", json_pack("{s:i,s:o}", "output_index", (int)i,
							"item", sf_resp_item_json(it)));
	if (kind == SF_RESP_MESSAGE) {
		json_t *f = where(q, i);
		json_object_set_new(f, "part", json_pack("{s:s,s:s,s:[],s:[]}", "type",
							 "output_text", "text", "", "annotations",
							 "logprobs"));
		emit(q, "response.content_part.added", f);
	}
	if (kind != SF_RESP_CALL)
		st->open = (int)i;
	return i;
}

void headd_responses_deltas(struct headd_req *q)
{
	struct headd_resp *st = q->resp_state;
	if (!st)
		return;
	size_t rl = 0, cl = 0;
	const char *r = sf_out_take_reasoning(&q->out, &rl);
	const char *c = sf_out_take_content(&q->out, &cl);
	if (rl) {
		if (st->open < 0 || st->items[st->open].kind != SF_RESP_REASONING)
			open_item(q, SF_RESP_REASONING, (size_t)(r - q->out.reasoning.p));
		json_t *f = where(q, (uint32_t)st->open);
		json_object_set_new(f, "delta", json_stringn(r, rl));
		emit(q, "response.reasoning_text.delta", f);
	}
	if (cl) {
		if (st->open < 0 || st->items[st->open].kind != SF_RESP_MESSAGE)
			open_item(q, SF_RESP_MESSAGE, (size_t)(c - q->out.content.p));
		json_t *f = where(q, (uint32_t)st->open);
		json_object_set_new(f, "delta", json_stringn(c, cl));
		json_object_set_new(f, "logprobs", json_array());
		emit(q, "response.output_text.delta", f);
	}
	const struct sf_out_tool_call *call;
	while (st->n < MAX_ITEMS && (call = sf_out_take_call(&q->out))) {
		uint32_t i = open_item(q, SF_RESP_CALL, 0);
		struct sf_resp_item *it = &st->items[i];
		it->call = call;
		json_t *f = json_pack("{s:s,s:i}", "item_id", it->id, "output_index", (int)i);
		json_object_set_new(f, "delta", json_string(call->arguments ? call->arguments : "{}"));
		emit(q, "response.function_call_arguments.delta", f);
		f = json_pack("{s:s,s:i,s:s,s:s}", "item_id", it->id, "output_index", (int)i,
			      "name", call->name ? call->name : "", "arguments",
			      call->arguments ? call->arguments : "{}");
		emit(q, "response.function_call_arguments.done", f);
		it->done = true;
		emit(q, "response.output_item.done", json_pack("{s:i,s:o}", "output_index", (int)i,
							       "item", sf_resp_item_json(it)));
	}
}

void headd_responses_end(struct headd_req *q, const struct sf_api_error *fail)
{
	struct headd_resp *st = q->resp_state;
	if (st && q->h) {
		headd_responses_deltas(q);
		if (!fail && !st->n) /* an empty answer is an empty message */
			open_item(q, SF_RESP_MESSAGE, q->out.content.len);
		close_open(q);
		struct sf_resp_meta m;
		meta_of(q, NULL, fail, &m);
		const char *type = fail ? "response.failed"
				   : !strcmp(m.status, "incomplete") ? "response.incomplete"
				   : "response.completed";
		emit(q, type, response_now(q, NULL, fail, true));
	}
	if (q->h)
		sf_http_stream_end(q->h->http);
}

void headd_responses_free(struct headd_req *q)
{
	free(q->resp_state);
	q->resp_state = NULL;
}

/* ---- GET and DELETE /v1/responses/{id} ---- */

static void not_found(struct headd_http *h, const char *id, const char *why)
{
	struct sf_api_error e;
	sf_api_fail(&e, 404, "invalid_request_error", "response_not_found", NULL,
		    "no response %.64s %s", id, why);
	headd_api_send_error(h, &e);
}

void headd_responses_get(struct headd_http *h, const char *id, const struct sf_http_request *r)
{
	char chain[CHAIN_HEX + 1], name[SF_API_MAX_SESSION_ID + 1];
	if (!chain_of(id, chain)) {
		not_found(h, id, "(not an id this head gives)");
		return;
	}
	name_of(chain, name, sizeof(name));
	/* Stored ones only: a response of store false ran in a session of its own, closed. */
	if (!headd_named_find(h->d, name, h->owner)) {
		not_found(h, id, "is stored here (it was not stored, its conversation was deleted "
			  "or idle past --session-idle-s, or another key made it)");
		return;
	}
	headd_resume(h, SF_API_RESPONSES, id, r);
}

void headd_responses_delete(struct headd_http *h, const char *id)
{
	struct headd *d = h->d;
	char chain[CHAIN_HEX + 1], name[SF_API_MAX_SESSION_ID + 1];
	struct headd_named *s = NULL;
	if (chain_of(id, chain)) {
		name_of(chain, name, sizeof(name));
		s = headd_named_find(d, name, h->owner);
	}
	if (!s) {
		not_found(h, id, "is stored here");
		return;
	}
	headd_named_end(d, s);
	json_t *o = json_pack("{s:s,s:s,s:b}", "id", id, "object", "response", "deleted", 1);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	headd_wal_answer_durable(d, h, text); /* deleted means deleted, crash or not */
}
