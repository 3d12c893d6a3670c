/* What a generation request's output becomes on the wire, once per loop turn: server-sent
 * events with every new delta (streams), or the whole object at the end; the end of a
 * request (its named session's content kept, an unnamed session closed); cancels; and the
 * slow-client limit: past --stream-buffer unread bytes the stream ends with an error and the
 * generation is cancelled, so a client that does not read never makes the head buffer
 * without bound. */
#include "headd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"

static enum headd_endpoint ep_of(const struct headd_req *q)
{
	if (q->tokenize_only)
		return EP_TOKENIZE;
	if (q->r.wire == SF_API_RESPONSES)
		return EP_RESPONSES;
	if (q->r.wire == SF_API_MESSAGES)
		return EP_MESSAGES;
	return q->r.kind == SF_API_CHAT ? EP_CHAT : EP_COMPLETIONS;
}

/* One event. A stream of one choice numbers its events by the tokens they cover, so a
 * client that lost the stream (a head restart) can ask for the rest from there
 * (Last-Event-ID, api_resume.c): an event with an id carries everything those tokens made
 * that had not gone out. An event that carries no token's output (a chat's role chunk) has
 * no id: a client that saw only it has seen none of the tokens (seed 13895: the role chunk
 * numbered 1 and the connection lost before the first token's chunk, the resume asked
 * after token 1 and the client never got it). */
static void sse_event(struct headd_req *q, const char *json, bool numbered)
{
	if (!json || !q->h)
		return;
	size_t n = strlen(json);
	char id[32];
	size_t k = q->lead || !numbered ? 0 : (size_t)snprintf(id, sizeof(id), "id: %u\n", q->n_gen);
	char small[4096];
	size_t total = k + n + 8;
	char *p = total <= sizeof(small) ? small : malloc(total);
	if (p) {
		memcpy(p, id, k);
		memcpy(p + k, "data: ", 6);
		memcpy(p + k + 6, json, n);
		memcpy(p + k + 6 + n, "\n\n", 2);
		sf_http_stream_write(q->h->http, p, total);
		q->sse_at = sf_loop_now(q->d->loop);
		if (p != small)
			free(p);
	}
}

static void sse_free(struct headd_req *q, char *json)
{
	sse_event(q, json, true);
	free(json);
}

void headd_stream_begin(struct headd_req *q)
{
	if (!q->r.stream || q->life.failed || !q->h)
		return;
	char extra[256];
	int at = snprintf(extra, sizeof(extra), "Cache-Control: no-cache\r\nX-Request-Id: %s\r\n",
			  q->id);
	if (q->named)
		snprintf(extra + at, sizeof(extra) - (size_t)at, "X-Superfluid-Session: %s\r\n",
			 q->named->name);
	if (sf_http_stream_begin(q->h->http, 200, "text/event-stream", extra))
		return;
	/* A choice of an n > 1 request streams when its lead does. */
	headd_life_on(&q->life, HE_STREAM_BEGUN);
	q->sse_at = sf_loop_now(q->d->loop);
	if (q->r.wire == SF_API_RESPONSES)
		headd_responses_begin(q);
	else if (q->r.wire == SF_API_MESSAGES)
		headd_messages_begin(q);
	for (uint32_t i = 1; q->lead == q && i < q->n_choice; i++)
		headd_life_on(&q->choice[i]->life, HE_STREAM_BEGUN);
}

static void meta_of(const struct headd_req *q, struct sf_api_meta *m)
{
	*m = (struct sf_api_meta){ .id = q->id, .created = q->created_s, .model = q->r.model,
				   .fingerprint = "superfluid-" HEADD_VERSION };
}

static void usage_of(const struct headd_req *q, struct sf_api_usage *u)
{
	u->prompt_tokens = q->n_content;
	u->cached_tokens = q->cached < q->n_content ? q->cached : q->n_content;
	u->completion_tokens = q->n_gen;
	for (uint32_t i = 1; q->lead == q && i < q->n_choice; i++) {
		const struct headd_req *c = q->choice[i];
		u->completion_tokens += c->n_gen;
		if (q->r.n_prompts > 1 && i % q->r.n == 0) { /* another prompt's first choice */
			u->prompt_tokens += c->n_content;
			u->cached_tokens += c->cached < c->n_content ? c->cached : c->n_content;
		}
	}
}

/* The logprobs received and not sent yet (at most those of the tokens kept). */
static bool new_logprobs(struct headd_req *q, struct sf_api_logprobs *lp)
{
	uint32_t upto = q->n_lps < q->n_gen ? q->n_lps : q->n_gen;
	if (!q->r.logprobs || upto <= q->lps_sent)
		return false;
	*lp = (struct sf_api_logprobs){ .vocab = &q->vocab, .v = q->lps + q->lps_sent,
					.n = upto - q->lps_sent };
	q->lps_sent = upto;
	return true;
}

/* A stream's new deltas. */
static void stream_deltas(struct headd_req *q)
{
	if (q->r.wire == SF_API_RESPONSES || q->r.wire == SF_API_MESSAGES) {
		(q->r.wire == SF_API_RESPONSES ? headd_responses_deltas : headd_messages_deltas)(q);
		return;
	}
	struct sf_api_meta m;
	meta_of(q, &m);
	size_t clen = 0, rlen = 0;
	const char *c = sf_out_take_content(&q->out, &clen);
	const char *r = sf_out_take_reasoning(&q->out, &rlen);
	struct sf_api_logprobs lp;
	bool has_lp = new_logprobs(q, &lp);
	bool inc = q->r.include_usage;
	if (q->r.kind == SF_API_COMPLETION) {
		if (clen || has_lp)
			sse_free(q, sf_api_completion_chunk_json(&m, q->index, c ? c : "", clen, NULL,
								  has_lp ? &lp : NULL, inc, NULL));
		return;
	}
	if (!q->role_sent && (clen || rlen || has_lp || q->out.n_calls > q->out.calls_taken ||
				headd_life_ended(&q->life))) {
		struct sf_api_delta d0 = { .index = q->index, .role = true };
		char *json = sf_api_chat_chunk_json(&m, &d0, inc, NULL);
		sse_event(q, json, false);
		free(json);
		q->role_sent = true;
	}
	/* Everything these tokens made in one event, calls too: one id covers it whole. */
	uint32_t first_call = q->out.calls_taken;
	const struct sf_out_tool_call *calls = sf_out_take_call(&q->out);
	while (sf_out_take_call(&q->out))
		;
	if (clen || rlen || has_lp || calls) {
		struct sf_api_delta d = { .index = q->index,
					  .content = clen ? c : NULL, .content_len = clen,
					  .reasoning = rlen ? r : NULL, .reasoning_len = rlen,
					  .logprobs = has_lp ? &lp : NULL, .calls = calls,
					  .n_calls = q->out.calls_taken - first_call,
					  .call_index = first_call };
		sse_free(q, sf_api_chat_chunk_json(&m, &d, inc, NULL));
	}
}

/* A choice's last chunk: its finish reason. */
static void last_chunk(struct headd_req *q)
{
	if (q->r.wire != q->r.kind)
		return; /* the endpoint's own end (stream_end) */
	struct sf_api_meta m;
	meta_of(q, &m);
	bool inc = q->r.include_usage;
	if (q->r.kind == SF_API_COMPLETION) {
		sse_free(q, sf_api_completion_chunk_json(&m, q->index, "", 0, q->finish_reason, NULL,
							  inc, NULL));
	} else {
		struct sf_api_delta d = { .index = q->index, .finish_reason = q->finish_reason };
		sse_free(q, sf_api_chat_chunk_json(&m, &d, inc, NULL));
	}
}

/* The stream's end: the error that ended it, or the usage when asked; then [DONE]. fail is
 * the error of the request (of any of its choices), or NULL. */
static void stream_end(struct headd_req *q, const struct sf_api_error *fail)
{
	if (q->r.wire == SF_API_RESPONSES || q->r.wire == SF_API_MESSAGES) {
		(q->r.wire == SF_API_RESPONSES ? headd_responses_end : headd_messages_end)(q, fail);
		return;
	}
	struct sf_api_meta m;
	meta_of(q, &m);
	struct sf_api_usage u;
	usage_of(q, &u);
	if (fail) {
		sse_free(q, sf_api_error_json(fail));
	} else if (q->r.include_usage) {
		sse_free(q, q->r.kind == SF_API_COMPLETION
				    ? sf_api_completion_chunk_json(&m, 0, NULL, 0, NULL, NULL, true, &u)
				    : sf_api_chat_chunk_json(&m, NULL, true, &u));
	}
	if (q->h) {
		static const char done[] = "data: [DONE]\n\n";
		sf_http_stream_write(q->h->http, done, sizeof(done) - 1);
		sf_http_stream_end(q->h->http);
	}
}

/* A whole answer's choice from q (lp: storage for its logprobs view). */
static void choice_of(struct headd_req *q, struct sf_api_choice *c, struct sf_api_logprobs *lp)
{
	*lp = (struct sf_api_logprobs){ .vocab = &q->vocab, .v = q->lps,
					.n = q->n_lps < q->n_gen ? q->n_lps : q->n_gen };
	*c = (struct sf_api_choice){
		.index = q->index,
		.content = q->out.content.p ? q->out.content.p : "",
		.content_len = q->out.content.len,
		.reasoning = q->out.reasoning.len ? q->out.reasoning.p : NULL,
		.reasoning_len = q->out.reasoning.len,
		.calls = q->out.calls, .n_calls = q->out.n_calls,
		.finish_reason = q->finish_reason,
		.logprobs = q->r.logprobs ? lp : NULL,
	};
	if (q->out.n_calls && !c->content_len)
		c->content = NULL;
}

static void whole_response(struct headd_req *q, const struct sf_api_error *fail)
{
	if (q->r.wire == SF_API_RESPONSES || q->r.wire == SF_API_MESSAGES) {
		(q->r.wire == SF_API_RESPONSES ? headd_responses_whole : headd_messages_whole)(q, fail);
		return;
	}
	if (fail) {
		headd_api_send_error(q->h, fail);
		return;
	}
	struct sf_api_meta m;
	meta_of(q, &m);
	struct sf_api_usage u;
	usage_of(q, &u);
	struct sf_api_choice c[SF_API_MAX_CHOICES];
	struct sf_api_logprobs lp[SF_API_MAX_CHOICES];
	uint32_t n = q->lead ? q->n_choice : 1;
	for (uint32_t i = 0; i < n; i++)
		choice_of(q->lead ? q->choice[i] : q, &c[i], &lp[i]);
	char *json = q->r.kind == SF_API_CHAT ? sf_api_chat_json(&m, c, n, &u)
					      : sf_api_completion_json(&m, c, n, &u);
	headd_api_send_json(q->h, 200, json);
}

void headd_named_rollback(struct headd_req *q)
{
	struct headd_named *s = q->named;
	if (!s || s->busy != q || !q->logged || q->rolled_back)
		return;
	q->rolled_back = true;
	headd_wal_content(q->d, s->session_id, s->turns ? s->n_content : 0, NULL, 0);
}

/* The reply the session's node now holds, kept for the next turn (without the token that
 * ended it: the next turn's rendering closes the turn). */
static void keep_named(struct headd_req *q)
{
	struct headd_named *s = q->named;
	if (!s || s->busy != q)
		return;
	s->busy = NULL;
	s->used_ms = sf_loop_now(q->d->loop);
	if (q->life.failed) {
		/* The client was told the turn failed; a generation the head still holds open
		 * (a session-wide error: its node gone, none to take it) ends with it, so the
		 * session's next turn can go on rather than find one that "has not ended". */
		struct sf_err err;
		if (q->generation_id)
			(void)sf_head_cancel(q->d->head, q->session_id, q->generation_id,
					     sf_loop_now(q->d->loop), &err);
		headd_named_rollback(q);
		return;
	}
	uint32_t n = q->n_gen;
	if (n && (q->gen[n - 1] == q->vocab.eos || q->gen[n - 1] == q->vocab.end_turn))
		n--;
	uint32_t *all = malloc(((size_t)q->n_content + n + 1) * sizeof(uint32_t));
	if (!all) {
		sfd_warn("session %s: no memory to keep its reply", s->name);
		return;
	}
	memcpy(all, q->content, (size_t)q->n_content * sizeof(uint32_t));
	if (n)
		memcpy(all + q->n_content, q->gen, (size_t)n * sizeof(uint32_t));
	headd_named_set_content(s, all, q->n_content + n);
	free(all);
	s->turns++;
	snprintf(s->last_id, sizeof(s->last_id), "%s", q->id);
	if (q->logged)
		headd_wal_content(q->d, s->session_id, q->n_content, q->gen, n);
}

/* The request is over for the head: its named session keeps the reply, an unnamed one
 * is closed. Written is not received: the answer's last bytes may still be on their way
 * (in the head's kernel, on the wire) when the head dies, and a reset then loses them. So
 * the log's CLOSE waits HEADD_WRITTEN_KEEP_MS, and a head restarted meanwhile still has
 * the generation for the client to fetch (seed 3735: the close logged 1 ms before a crash,
 * the restarted head answered 404 to a client that had the answer but its end). */
static void req_over(struct headd_req *q)
{
	struct headd *d = q->d;
	headd_life_on(&q->life, HE_ANSWERED);
	keep_named(q);
	if (!q->named && q->session_id && !q->pipeline && !q->keep_session) {
		struct sf_err err;
		(void)sf_head_session_close(d->head, q->session_id, false, sf_loop_now(d->loop), &err);
		if (q->logged)
			headd_wal_keep_add(d, q->session_id, HEADD_WRITTEN_KEEP_MS);
	}
}

/* The answer to the client, once every choice ended: q is the request (an n > 1 lead). */
static void answer(struct headd_req *q)
{
	struct headd *d = q->d;
	const struct sf_api_error *fail = q->life.failed ? &q->fail : NULL;
	for (uint32_t i = 1; !fail && q->lead == q && i < q->n_choice; i++)
		if (q->choice[i]->life.failed)
			fail = &q->choice[i]->fail;
	if (!q->h)
		return;
	headd_metrics_request(d, ep_of(q), fail && !q->life.streaming ? fail->status : 200);
	if (q->life.streaming) {
		if (!q->lead && !fail)
			last_chunk(q);
		stream_end(q, fail);
	} else {
		whole_response(q, fail); /* ends the response itself */
	}
	if (q->h && q->h->req == q) {
		struct headd_http *h = q->h;
		if (q->life.streaming)
			headd_http_response_done(h);
		else
			h->req = NULL;
	}
}

void headd_stream_finish(struct headd_req *q)
{
	if (!q->lead) {
		answer(q);
		req_over(q);
		return;
	}
	/* A choice of an n > 1 request: its last chunk now, the answer once all have ended. */
	if (q->h && q->life.streaming && !q->life.failed && !q->life.cut)
		last_chunk(q);
	headd_life_on(&q->life, HE_CHOICE_WRITTEN);
	struct headd_req *lead = q->lead;
	for (uint32_t i = 0; i < lead->n_choice; i++)
		if (lead->choice[i]->life.phase != HL_WAITING)
			return;
	answer(lead);
	for (uint32_t i = 0; i < lead->n_choice; i++)
		req_over(lead->choice[i]);
}

/* The client reads too slowly: end its stream now; the generation (every choice's) is
 * cancelled. */
static void cut(struct headd_req *q)
{
	if (q->lead)
		q = q->lead;
	for (uint32_t i = 1; i < q->n_choice; i++) {
		struct headd_req *c = q->choice[i];
		headd_life_on(&c->life, HE_CUT);
		c->h = NULL;
	}
	struct headd *d = q->d;
	headd_life_on(&q->life, HE_CUT);
	d->api.m.streams_cut++;
	sfd_warn("%s: the client left %zu bytes unread (--stream-buffer %u); its stream ends "
		 "and the generation is cancelled", q->id, headd_http_unsent(q->h),
		 d->opts->stream_buffer);
	struct sf_api_error e;
	sf_api_fail(&e, 503, "server_error", "client_too_slow", NULL,
		    "the stream was ended: the client did not read it fast enough");
	sse_free(q, sf_api_error_json(&e));
	sf_http_stream_end(q->h->http);
	struct headd_http *h = q->h;
	q->h = NULL;
	headd_http_response_done(h);
}

/* A stream silent for HEADD_SSE_KEEPALIVE_MS gets a comment (its client's parser skips it;
 * no id: it covers no token). */
static void keep_alive(struct headd_req *q, uint64_t now)
{
	if (!q->h || !q->life.streaming || q->life.cut || q->life.phase >= HL_WAITING ||
	    (q->lead && q->lead != q) || now - q->sse_at < HEADD_SSE_KEEPALIVE_MS)
		return;
	static const char comment[] = ": keep-alive\n\n";
	sf_http_stream_write(q->h->http, comment, sizeof(comment) - 1);
	q->sse_at = now;
	q->d->api.m.keepalives++;
}

void headd_stream_flush(struct headd *d)
{
	uint64_t now = sf_loop_now(d->loop);
	for (struct headd_req *q = d->api.reqs; q; q = q->next) {
		keep_alive(q, now);
		unsigned act = headd_life_on(&q->life, HE_TURN);
		if (act & HA_RELEASE) /* the client left before its prompt was encoded */
			keep_named(q);
		if ((act & HA_CANCEL) && q->generation_id) {
			struct sf_err err;
			if (q->pipeline)
				headd_pipeline_cancel(q);
			else
				(void)sf_head_cancel(d->head, q->session_id, q->generation_id, now, &err);
		}
		if ((act & HA_DELTAS) && q->h) {
			if (headd_http_unsent(q->h) > d->opts->stream_buffer)
				cut(q);
			else
				stream_deltas(q);
		}
		if (act & HA_FINISH)
			headd_stream_finish(q);
	}
}
