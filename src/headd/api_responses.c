/* POST /v1/responses, GET and DELETE /v1/responses/{id} (docs/API.md, "The Responses API").
 * A request is a chat request (api_responses_req.c) answered as a response object, or as
 * its typed stream events (response.created, response.output_item.added,
 * response.output_text.delta, response.function_call_arguments.delta, response.completed,
 * ...). A stored response (store, the default) runs in a named session of its own chain,
 * "resp_<chain>": its id is "resp_<chain><serial>", and a request naming the chain's latest
 * response as previous_response_id continues that session (the node's context, what the
 * head's log restores after a restart) with its new input; one naming an earlier response
 * replays the conversation up to it as a new chain (resp_fork.c). GET /v1/responses/{id}
 * answers it again from the head's log (--wal-dir), DELETE ends its chain; both only for the
 * API key that made it. */
#include "headd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/grammar.h>

#include "api/api_blocks.h"
#include "api/api_responses.h"
#include "daemon/log.h"

#define CHAIN_HEX 16
#define PREFIX "resp_"
/* A streamed response's items so far: the reply's blocks (api_blocks.h). */
struct headd_resp {
	struct sf_blocks bl;
	uint64_t seq; /* the next event's sequence_number */
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

struct headd_named *headd_responses_chain(struct headd *d, const char *id,
					  const uint8_t owner[static SF_WALREC_OWNER_LEN])
{
	char chain[CHAIN_HEX + 1], name[SF_API_MAX_SESSION_ID + 1];
	if (!chain_of(id, chain))
		return NULL;
	name_of(chain, name, sizeof(name));
	return headd_named_find(d, name, owner);
}

bool headd_responses_latest(struct headd *d, const struct headd_named *s, const char *id)
{
	if (!strcmp(s->last_id, id))
		return true;
	/* After a restart the log says it: the latest generation of its session. */
	struct sf_wal_session *ws = NULL;
	struct sf_wal_gen *g = d->wal.st ? sf_wal_state_request(d->wal.st, id, &ws) : NULL;
	return g && ws && ws->n_gens && ws->gens[ws->n_gens - 1] == g;
}

int headd_responses_named(struct headd_req *q, struct sf_api_error *e)
{
	struct headd *d = q->d;
	const struct sf_api_responses *o = q->r.resp;
	char chain[CHAIN_HEX + 1], name[SF_API_MAX_SESSION_ID + 1];
	struct headd_named *s = NULL;
	/* The structured output as the request gave it (the head may wrap it later). */
	q->grammar_digest = q->r.grammar ? sf_grammar_text_digest(q->r.grammar,
								  strlen(q->r.grammar)) : 0;
	if (o->previous_id && !q->forked) {
		if (!chain_of(o->previous_id, chain))
			return sf_api_fail(e, 404, "invalid_request_error", "previous_response_not_found",
					   "previous_response_id", "previous response %.64s not found "
					   "(not an id this head gave)", o->previous_id);
		if (!(s = headd_responses_chain(d, o->previous_id, q->owner)))
			return sf_api_fail(e, 404, "invalid_request_error",
					   "previous_response_not_found", "previous_response_id",
					   "previous response %.64s not found (it was not stored, its "
					   "conversation was deleted or idle past --session-idle-s, or "
					   "another key made it)", o->previous_id);
		if (strcmp(s->model, q->r.model))
			return sf_api_fail(e, 400, "invalid_request_error", "invalid_value", "model",
					   "previous response %.64s ran model %s, not %.128s",
					   o->previous_id, s->model, q->r.model);
		if (s->opened && q->grammar_digest != s->grammar && !q->count_only)
			return sf_api_bad(e, q->r.grammar ? q->r.grammar_param : "previous_response_id",
					  "the conversation of %.64s keeps the structured output of its "
					  "first response (%s), as its node keeps its sampling: start a "
					  "new conversation for another text.format", o->previous_id,
					  s->grammar ? "a grammar" : "none");
		if ((s->busy && !q->count_only) || s->restoring)
			return sf_api_fail(e, 409, "invalid_request_error", "conversation_busy", NULL,
					   "the conversation of %.64s is still generating a response; "
					   "wait for it", o->previous_id);
		if (!headd_responses_latest(d, s, o->previous_id))
			return sf_api_bad(e, "previous_response_id", "response %.64s is not the "
					  "latest of its conversation%s%s%s, and its turns are not "
					  "kept to replay (a conversation keeps its first %u "
					  "responses and %u MiB of items, none after one that ended "
					  "while the head was down): continue from the latest",
					  o->previous_id, s->last_id[0] ? " (" : "", s->last_id,
					  s->last_id[0] ? ")" : "", SF_WAL_MAX_TURNS,
					  SF_WALREC_MAX_ITEMS >> 20);
	} else {
		snprintf(chain, sizeof(chain), "%016" PRIx64, headd_gen_rand(d));
		name_of(chain, name, sizeof(name));
		if (o->store && !q->count_only &&
		    !(s = headd_named_new(d, name, q->r.model, q->owner, 0, e)))
			return -1;
	}
	/* The serial after the chain routes GET and follow-ups to this shard
	 * (headd_shard_of_request_id). */
	snprintf(q->id, sizeof(q->id), PREFIX "%s%" PRIx64, chain, headd_serial_new(d));
	if (s && q->count_only) { /* counted on it, for its render only: not taken */
		q->count_base = s->n_content;
		q->named = s;
	} else if (s) {
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
		.incomplete_reason = !status && !fail && length ? "max_output_tokens" : NULL,
		.error = fail, .echo_json = q->r.resp->echo_json,
		.previous_id = q->r.resp->previous_id, .store = q->r.resp->store,
	};
}

static void item_id(const struct headd_req *q, enum sf_block_kind k, uint32_t i, char *out,
		    size_t cap)
{
	snprintf(out, cap, "%s_%s_%u", k == SF_BLOCK_REASONING ? "rs" : k == SF_BLOCK_TEXT ? "msg"
		 : "fc", q->id + sizeof(PREFIX) - 1, i);
}

static const enum sf_resp_item_kind item_kind[] = {
	[SF_BLOCK_REASONING] = SF_RESP_REASONING, [SF_BLOCK_TEXT] = SF_RESP_MESSAGE,
	[SF_BLOCK_CALL] = SF_RESP_CALL,
};

/* Block i as an output item. */
static void item_of(const struct headd_req *q, const struct sf_blocks *bl, uint32_t i,
		    struct sf_resp_item *it)
{
	const struct sf_block *b = &bl->b[i];
	*it = (struct sf_resp_item){ .kind = item_kind[b->kind], .call = b->call,
				     .done = b->closed };
	it->text = sf_block_text(bl, &q->out, i, &it->len);
	item_id(q, b->kind, i, it->id, sizeof(it->id));
}

static json_t *object_of(const struct headd_req *q, const struct sf_blocks *bl,
			 const char *status, const struct sf_api_error *fail, bool with_usage)
{
	struct sf_resp_item items[SF_BLOCKS_MAX];
	for (uint32_t i = 0; i < bl->n; i++)
		item_of(q, bl, i, &items[i]);
	struct sf_resp_meta m;
	meta_of(q, status, fail, &m);
	struct sf_api_usage u;
	usage_of(q, &u);
	return sf_resp_object(&m, items, bl->n, with_usage ? &u : NULL);
}

/* A stored response's object (for GET and item references) and its turn (for forks). */
static void keep(struct headd_req *q, const json_t *obj)
{
	if (!q->named)
		return;
	headd_resp_items_put(q->d, q->id, q->owner, obj);
	headd_responses_turn(q, obj);
}

void headd_responses_whole(struct headd_req *q, const struct sf_api_error *fail)
{
	if (fail) {
		headd_api_send_error(q->h, fail);
		return;
	}
	struct sf_blocks bl;
	sf_blocks_whole(&bl, &q->out);
	json_t *obj = object_of(q, &bl, NULL, NULL, true);
	if (obj)
		keep(q, obj);
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
	return json_pack("{s:o}", "response", object_of(q, &q->resp_state->bl, status, fail,
							with_usage));
}

void headd_responses_begin(struct headd_req *q)
{
	struct headd_resp *st = calloc(1, sizeof(*st));
	if (!st)
		return; /* no events: the stream ends bare */
	sf_blocks_init(&st->bl);
	q->resp_state = st;
	emit(q, "response.created", response_now(q, "in_progress", NULL, false));
	emit(q, "response.in_progress", response_now(q, "in_progress", NULL, false));
}

static json_t *where(struct headd_req *q, uint32_t i, bool content)
{
	char id[48];
	item_id(q, q->resp_state->bl.b[i].kind, i, id, sizeof(id));
	return content ? json_pack("{s:s,s:i,s:i}", "item_id", id, "output_index", (int)i,
				   "content_index", 0)
		       : json_pack("{s:s,s:i}", "item_id", id, "output_index", (int)i);
}

static json_t *item_json(struct headd_req *q, uint32_t i)
{
	struct sf_resp_item it;
	item_of(q, &q->resp_state->bl, i, &it);
	return sf_resp_item_json(&it);
}

static void on_open(void *arg, uint32_t i)
{
	struct headd_req *q = arg;
	const struct sf_block *b = &q->resp_state->bl.b[i];
	/* As it begins: in progress, nothing in it yet (what it holds comes as its deltas, even
	 * where the block already holds more: a replay from the log, a first delta). */
	struct sf_resp_item it;
	item_of(q, &q->resp_state->bl, i, &it);
	it.done = false;
	it.text = "";
	it.len = 0;
	emit(q, "response.output_item.added", json_pack("{s:i,s:o}", "output_index", (int)i,
							"item", sf_resp_item_json(&it)));
	if (b->kind == SF_BLOCK_TEXT) {
		json_t *f = where(q, i, true);
		json_object_set_new(f, "part", json_pack("{s:s,s:s,s:[],s:[]}", "type",
							 "output_text", "text", "", "annotations",
							 "logprobs"));
		emit(q, "response.content_part.added", f);
	} else if (b->kind == SF_BLOCK_CALL) {
		const char *args = b->call->arguments ? b->call->arguments : "{}";
		json_t *f = where(q, i, false);
		json_object_set_new(f, "delta", json_string(args));
		emit(q, "response.function_call_arguments.delta", f);
		f = where(q, i, false);
		json_object_set_new(f, "name", json_string(b->call->name ? b->call->name : ""));
		json_object_set_new(f, "arguments", json_string(args));
		emit(q, "response.function_call_arguments.done", f);
	}
}

static void on_delta(void *arg, uint32_t i, const char *text, size_t len)
{
	struct headd_req *q = arg;
	json_t *f = where(q, i, true);
	json_object_set_new(f, "delta", json_stringn(text, len));
	if (q->resp_state->bl.b[i].kind == SF_BLOCK_TEXT) {
		json_object_set_new(f, "logprobs", json_array());
		emit(q, "response.output_text.delta", f);
	} else {
		emit(q, "response.reasoning_text.delta", f);
	}
}

static void on_close(void *arg, uint32_t i)
{
	struct headd_req *q = arg;
	const struct sf_blocks *bl = &q->resp_state->bl;
	size_t len;
	const char *t = sf_block_text(bl, &q->out, i, &len);
	json_t *text = json_stringn(t, len);
	if (bl->b[i].kind == SF_BLOCK_REASONING) {
		json_t *f = where(q, i, true);
		json_object_set_new(f, "text", text);
		emit(q, "response.reasoning_text.done", f);
	} else if (bl->b[i].kind == SF_BLOCK_TEXT) {
		json_t *f = where(q, i, true);
		json_object_set(f, "text", text);
		json_object_set_new(f, "logprobs", json_array());
		emit(q, "response.output_text.done", f);
		f = where(q, i, true);
		json_object_set_new(f, "part", json_pack("{s:s,s:o,s:[],s:[]}", "type", "output_text",
							 "text", text, "annotations", "logprobs"));
		emit(q, "response.content_part.done", f);
	} else {
		json_decref(text);
	}
	emit(q, "response.output_item.done", json_pack("{s:i,s:o}", "output_index", (int)i,
						       "item", item_json(q, i)));
}

static const struct sf_blocks_ops ops = { .open = on_open, .delta = on_delta,
					  .close = on_close };

void headd_responses_deltas(struct headd_req *q)
{
	if (!q->resp_state)
		return;
	struct sf_blocks_ops o = ops;
	o.arg = q;
	sf_blocks_step(&q->resp_state->bl, &q->out, &o);
}

void headd_responses_end(struct headd_req *q, const struct sf_api_error *fail)
{
	if (q->resp_state && q->h) {
		struct sf_blocks_ops o = ops;
		o.arg = q;
		sf_blocks_end(&q->resp_state->bl, &q->out, !fail, &o);
		struct sf_resp_meta m;
		meta_of(q, NULL, fail, &m);
		const char *type = fail ? "response.failed"
				   : !strcmp(m.status, "incomplete") ? "response.incomplete"
				   : "response.completed";
		json_t *last = response_now(q, NULL, fail, true);
		if (last && !fail)
			keep(q, json_object_get(last, "response"));
		emit(q, type, last);
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

/* ?stream=true (or 1) in a query. */
static bool stream_asked(const char *query)
{
	for (const char *p = query; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL)
		if (!strncmp(p, "stream=true", 11) || !strncmp(p, "stream=1", 8)) {
			char end = p[!strncmp(p, "stream=1", 8) ? 8 : 11];
			if (!end || end == '&')
				return true;
		}
	return false;
}

void headd_responses_get(struct headd_http *h, const char *id, const struct sf_http_request *r)
{
	char chain[CHAIN_HEX + 1];
	if (!chain_of(id, chain)) {
		not_found(h, id, "(not an id this head gives)");
		return;
	}
	/* Stored ones only: a response of store false ran in a session of its own, closed. */
	if (!headd_responses_chain(h->d, id, h->owner)) {
		not_found(h, id, "is stored here (it was not stored, its conversation was deleted "
			  "or idle past --session-idle-s, or another key made it)");
		return;
	}
	/* Whole, and one of the shard's last stored: as it was answered; else from the log. */
	const char *kept = headd_resp_items_object(h->d, id, h->owner);
	if (kept && !stream_asked(r->query)) {
		char *text = strdup(kept);
		headd_api_send_json(h, 200, text);
		return;
	}
	headd_resume(h, SF_API_RESPONSES, id, r);
}

void headd_responses_delete(struct headd_http *h, const char *id)
{
	struct headd *d = h->d;
	struct headd_named *s = headd_responses_chain(d, id, h->owner);
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
