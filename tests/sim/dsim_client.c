/* daemon-sim's clients: each request a streamed POST /v1/completions (or, half of them,
 * /v1/chat/completions of one user message) through the head on the clients' own loop, read
 * as a client reads it (status, headers, chunked body, server-sent events), asked again after
 * a break: resumed with GET /v1/{chat/,}completions/{id}?after=N when the head keeps a log and
 * the request id is known, else asked whole again. What it must get is the simulated engine's
 * own text for its prompt (sf_sim_expected; a chat's prompt is the sim's ChatML of its
 * message, a conversation's later turn that after the reply closed), exactly. Half of the
 * chat conversations are sent whole each turn in no session, as ordinary clients send them:
 * the same prompt, placed by the prefix the nodes cache. */
#include "dsim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#define RETRY_MS 200      /* a client asks again this long after a break */
#define MAX_ATTEMPTS 200  /* then it gives up (a broken promise: the request never ended) */
#define IDLE_MS 5000      /* an answer silent this long is given up on (a client's timeout) */
#define CONV_IDLE_MS 30000 /* a conversation's turn waits longer: its client leaving would
			    * end the turn with what the node made so far kept in the session */

void dsim_broke(struct dsim *s, const char *fmt, ...)
{
	if (s->broke[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->broke, sizeof(s->broke), fmt, ap);
	va_end(ap);
}

/* The turn's prompt after what the session holds (r->ctx, kept), and what the engine then
 * says: the expected text and tokens. */
static void expect(struct dsim *s, struct dsim_req *r)
{
	struct sf_engine *e;
	struct sf_err err;
	size_t n_new = 0;
	uint32_t finish = 0;
	struct sf_sampling smp = { .temperature = r->temperature, .top_p = 1, .seed = r->seed };
	if (sf_sim_engine_new(&s->engine, &e, &err)) {
		dsim_broke(s, "request %u: no engine: %s", r->index, err.msg);
		return;
	}
	/* A chat turn is its message in the sim's ChatML; a later turn of a conversation first
	 * closes the reply before it (the node keeps the reply without its final <|eos|>). */
	char chat[sizeof(r->prompt) + 96];
	const char *text = r->prompt;
	if (r->chat) {
		snprintf(chat, sizeof(chat), "%s<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n",
			 r->turn ? "<|im_end|>\n" : "", r->prompt);
		text = chat;
	}
	if (sf_engine_encode(e, text, strlen(text), r->ctx + r->n_ctx,
			     DSIM_MAX_CTX - r->n_ctx, &n_new, &err) ||
	    sf_sim_expected(&s->engine, &smp, r->ctx, r->n_ctx + n_new, r->max_tokens,
			    r->want_tok, DSIM_MAX_TEXT, &r->n_want_tok, &finish, &err)) {
		dsim_broke(s, "request %u: no expected stream: %s", r->index, err.msg);
		sf_engine_free(e);
		return;
	}
	sf_engine_free(e);
	r->n_ctx += (uint32_t)n_new;
	r->n_want = 0;
	for (size_t i = 0; i < r->n_want_tok; i++)
		if (r->want_tok[i] < 256)
			r->want[r->n_want++] = (char)r->want_tok[i];
	r->want_finish = finish == SF_FINISH_STOP ? "stop" : "length";
}

/* A prompt of 2..11 words drawn from the world's random source (a later turn's starts with
 * a space: it follows the reply). */
static void draw_prompt(struct dsim *s, struct dsim_req *r)
{
	static const char *const words[] = { "the", "fleet", "sails", "at", "dawn", "and",
					     "every", "node", "keeps", "its", "word" };
	size_t at = 0;
	uint32_t n = 2 + (uint32_t)(sf_simnet_rand(s->world) % 10);
	for (uint32_t i = 0; i < n; i++)
		at += (size_t)snprintf(r->prompt + at, sizeof(r->prompt) - at, "%s%s",
				       i || r->turn ? " " : "", words[sf_simnet_rand(s->world) % 11]);
}

void dsim_req_init(struct dsim *s, struct dsim_req *r, uint32_t index)
{
	memset(r, 0, sizeof(*r));
	r->s = s;
	r->index = index;
	draw_prompt(s, r);
	r->max_tokens = 8 + (uint32_t)(sf_simnet_rand(s->world) % 120);
	r->seed = 1 + sf_simnet_rand(s->world) % 1000000;
	r->temperature = sf_simnet_rand(s->world) % 3 ? 0.8f : 0.0f;
	r->start_at = sf_simnet_rand(s->world) % DSIM_FAULT_MS;
	if (s->wal && sf_simnet_rand(s->world) % 3 == 0) {
		r->conv = true;
		r->n_turns = 2 + (uint32_t)(sf_simnet_rand(s->world) % (DSIM_MAX_TURNS - 1));
		snprintf(r->name, sizeof(r->name), "conv-%llu-%u", (unsigned long long)s->seed, index);
		r->max_tokens = 8 + r->max_tokens % 40;
	} else if (sf_simnet_rand(s->world) % 6 == 0) {
		r->leave = true;
		r->leave_after = (uint32_t)(sf_simnet_rand(s->world) % 40);
	}
	r->logprobs = !r->conv && sf_simnet_rand(s->world) % 4 == 0;
	/* Half the requests are chats, drawn from a stream of their own (so that every other
	 * draw of the seed stays where it was); of their conversations half are sent whole. */
	uint64_t chat_rng = (s->seed ^ 0x63686174ULL) + 0x9e3779b97f4a7c15ULL * index;
	r->chat = dsim_splitmix(&chat_rng) & 1;
	r->resend = r->chat && r->conv && (dsim_splitmix(&chat_rng) & 1);
	if (r->resend && !(r->hist = json_array()))
		dsim_broke(s, "request %u: no memory for its messages", index);
	/* Where the head runs a pipeline, a third of the requests ask its model (a stream of
	 * their own too): one turn, no logprobs (a pipeline passes on tokens only). */
	uint64_t pipe_rng = (s->seed ^ 0x70697065ULL) + 0x9e3779b97f4a7c15ULL * index;
	if (s->n_stages && dsim_splitmix(&pipe_rng) % 3 == 0) {
		r->pipe = true;
		r->conv = r->logprobs = r->resend = false;
		r->n_turns = 0;
		r->name[0] = 0;
	}
	expect(s, r);
}

bool dsim_req_ended(const struct dsim_req *r)
{
	return r->st == DR_DONE || r->st == DR_FAILED || r->st == DR_LEFT;
}

static void conn_drop(struct dsim_req *r)
{
	if (r->conn) {
		sf_conn_set_user(r->conn, NULL);
		sf_conn_close(r->conn, false);
		r->conn = NULL;
	}
	free(r->err_body);
	r->err_body = NULL;
	r->n_err_body = 0;
}

/* The answer broke off (or said to come back): ask again in a moment. */
static void broke_off(struct dsim_req *r, const char *why)
{
	struct dsim *s = r->s;
	conn_drop(r);
	r->breaks++;
	if (s->verbose)
		fprintf(stderr, "  [%llu ms] request %u: %s (%zu bytes so far, event %u)\n",
			(unsigned long long)sf_simnet_now(s->world), r->index, why, r->n_got,
			r->last_event);
	if (r->attempts >= MAX_ATTEMPTS) {
		dsim_broke(s, "request %u never ended: %u attempts (last: %s)", r->index,
			   r->attempts, why);
		r->st = DR_FAILED;
		return;
	}
	r->st = DR_WAIT;
	r->retry_at = sf_simnet_now(s->world) + RETRY_MS;
}

static void check_prefix(struct dsim_req *r, const char *when)
{
	if (r->n_got > r->n_want || memcmp(r->got, r->want, r->n_got)) {
		if (r->s->verbose)
			fprintf(stderr, "  request %u: got  \"%.*s\"\n  request %u: want \"%.*s\"\n",
				r->index, (int)r->n_got, r->got, r->index, (int)r->n_want, r->want);
		dsim_broke(r->s, "request %u (%s%s): %s: %zu bytes that are not the engine's %zu "
			   "(a token lost, repeated or out of order)", r->index, r->prompt,
			   r->pipe ? ", pipeline" : "", when, r->n_got, r->n_want);
	}
}

/* A conversation's turn is done: the next one after a pause (its prompt after the reply the
 * node keeps: the tokens without the final <|eos|>), or the session deleted after the last. */
static void next_turn(struct dsim_req *r)
{
	struct dsim *s = r->s;
	s->conv_turns++;
	s->resend_turns += r->resend;
	if (r->n_ctx + r->n_want_tok > DSIM_MAX_CTX - 64) {
		r->turn = r->n_turns; /* no room for more: end it here */
	} else {
		memcpy(r->ctx + r->n_ctx, r->want_tok, r->n_want_tok * sizeof(uint32_t));
		r->n_ctx += (uint32_t)r->n_want_tok;
		r->turn++;
		if (r->resend) { /* the turn and its reply, for the next turn's messages */
			json_array_append_new(r->hist, json_pack("{s:s, s:s}", "role", "user",
								 "content", r->prompt));
			json_array_append_new(r->hist, json_pack("{s:s, s:s%}", "role", "assistant",
								 "content", r->got, r->n_got));
		}
	}
	r->st = DR_WAIT;
	r->retry_at = sf_simnet_now(s->world) + 20 + sf_simnet_rand(s->world) % 300;
	r->n_got = 0;
	r->n_lp_text = 0;
	r->n_lp = 0;
	r->last_event = 0;
	r->id[0] = 0;
	r->finish[0] = 0;
	r->attempts = 0;
	if (r->turn >= r->n_turns) {
		if (r->resend) /* no session to end */
			r->st = DR_DONE;
		else
			r->deleting = true;
		return;
	}
	draw_prompt(s, r);
	r->max_tokens = 8 + (uint32_t)(sf_simnet_rand(s->world) % 40);
	expect(s, r);
}

static void finished(struct dsim_req *r)
{
	conn_drop(r);
	r->st = DR_DONE;
	if (r->n_got != r->n_want || memcmp(r->got, r->want, r->n_got))
		dsim_broke(r->s, "request %u (%s%s%s, turn %u, seed %llu, temperature %.1f, "
			   "max_tokens %u): got %zu bytes, the engine says %zu (a token lost, "
			   "repeated or out of order; %u resumes)", r->index, r->prompt,
			   r->conv ? ", session " : r->pipe ? ", pipeline" : "", r->name, r->turn + 1,
			   (unsigned long long)r->seed, r->temperature, r->max_tokens, r->n_got,
			   r->n_want, r->resumes);
	else if (strcmp(r->finish, r->want_finish))
		dsim_broke(r->s, "request %u: finish_reason %s, the engine says %s", r->index,
			   r->finish, r->want_finish);
	else if (r->logprobs && (r->n_lp != r->n_want_tok ||
				 r->n_lp_text != r->n_got || memcmp(r->lp_text, r->got, r->n_got)))
		dsim_broke(r->s, "request %u: %u logprobs (their tokens %zu bytes) for %zu tokens "
			   "(%zu bytes of text): not one for each token", r->index, r->n_lp,
			   r->n_lp_text, r->n_want_tok, r->n_got);
	else if (r->conv)
		next_turn(r);
	else if (r->pipe)
		r->s->pipe_done++;
}

static void answer_over(struct dsim_req *r, int err);

/* One event's data: a chunk of text (with its finish), an error, or [DONE]. */
static int on_event(void *arg, const char *data, size_t len)
{
	struct dsim_req *r = arg;
	r->events++;
	if (len == 6 && !memcmp(data, "[DONE]", 6)) {
		finished(r);
		return 1;
	}
	json_error_t je;
	json_t *j = json_loadb(data, len, 0, &je);
	if (!j) {
		dsim_broke(r->s, "request %u: an event that is not JSON: %.*s", r->index,
			   (int)(len < 200 ? len : 200), data);
		return 1;
	}
	json_t *err = json_object_get(j, "error");
	if (err) {
		const char *m = json_string_value(json_object_get(err, "message"));
		char why[300];
		snprintf(why, sizeof(why), "the stream ended with an error: %s", m ? m : "?");
		/* A pipeline's stages are down 2.55 s at most here, under its step timeout: only a
		 * stage's silence past it would explain an error. */
		if (r->pipe && m && !strstr(m, "was down for") && !strstr(m, "did not answer within"))
			dsim_broke(r->s, "request %u (pipeline): %s", r->index, why);
		json_decref(j);
		r->n_got = 0; /* a fresh request: the whole text again */
		r->n_lp_text = 0;
		r->n_lp = 0;
		r->last_event = 0;
		r->id[0] = 0;
		broke_off(r, why);
		return 1;
	}
	json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
	json_t *tx = r->chat ? json_object_get(json_object_get(c0, "delta"), "content")
			     : json_object_get(c0, "text");
	const char *text = json_string_value(tx);
	size_t n = json_string_length(tx);
	const char *fin = json_string_value(json_object_get(c0, "finish_reason"));
	/* A completion's logprobs list their tokens' texts; a chat's, one object a token. */
	json_t *lt = json_object_get(json_object_get(c0, "logprobs"), r->chat ? "content" : "tokens");
	for (size_t i = 0; i < json_array_size(lt); i++) {
		json_t *t = json_array_get(lt, i);
		if (r->chat)
			t = json_object_get(t, "token");
		size_t k = json_string_length(t);
		if (r->n_lp_text + k > sizeof(r->lp_text)) {
			dsim_broke(r->s, "request %u: more logprobs than the engine's tokens", r->index);
			json_decref(j);
			return 1;
		}
		memcpy(r->lp_text + r->n_lp_text, json_string_value(t), k);
		r->n_lp_text += k;
		r->n_lp++;
	}
	if (text && n) {
		if (r->n_got + n > sizeof(r->got)) {
			dsim_broke(r->s, "request %u: more text than the engine's", r->index);
			json_decref(j);
			return 1;
		}
		memcpy(r->got + r->n_got, text, n);
		r->n_got += n;
	}
	if (fin)
		snprintf(r->finish, sizeof(r->finish), "%s", fin);
	json_decref(j);
	r->last_event = (uint32_t)strtoul(r->sse.last_id, NULL, 10);
	check_prefix(r, "mid-stream");
	if (r->leave && r->n_got >= r->leave_after && !fin) {
		dsim_req_leave(r);
		return 1;
	}
	return 0;
}

static void on_headers(struct dsim_req *r)
{
	r->in_body = true;
	char *p = r->hdr;
	r->status = (int)strtol(p + 9, NULL, 10);
	for (char *line = strstr(p, "\r\n"); line && line[2]; line = strstr(line + 2, "\r\n")) {
		char *h = line + 2;
		if (!strncasecmp(h, "Transfer-Encoding: chunked", 26))
			r->chunked = true;
		else if (!strncasecmp(h, "Content-Length: ", 16))
			r->content_left = strtoull(h + 16, NULL, 10);
		else if (!strncasecmp(h, "X-Request-Id: ", 14)) {
			char *end = strstr(h, "\r\n");
			snprintf(r->id, sizeof(r->id), "%.*s", (int)(end - h - 14), h + 14);
		}
	}
	if (r->s->verbose)
		fprintf(stderr, "  [%llu ms] request %u: answered %d\n",
			(unsigned long long)sf_simnet_now(r->s->world), r->index, r->status);
	sf_sse_init(&r->sse, on_event, r);
	r->events = 0;
	if (r->status == 200 && r->sse.last_id[0] == 0 && r->last_event)
		snprintf(r->sse.last_id, sizeof(r->sse.last_id), "%u", r->last_event);
}

/* Body bytes, de-chunked: events when the answer is a stream, else kept to quote. */
static void on_body(struct dsim_req *r, const uint8_t *p, size_t n)
{
	if (r->status == 200 && !r->deleting) {
		sf_sse_feed(&r->sse, p, n);
		return;
	}
	char *b = realloc(r->err_body, r->n_err_body + n + 1);
	if (!b)
		return;
	memcpy(b + r->n_err_body, p, n);
	r->err_body = b;
	r->n_err_body += n;
	b[r->n_err_body] = 0;
	if (!r->chunked && r->content_left) {
		r->content_left -= n < r->content_left ? n : r->content_left;
		if (!r->content_left)
			answer_over(r, 0); /* a whole error answer on a kept-alive connection */
	}
}

/* Reads the chunked framing; returns bytes taken. */
static size_t dechunk(struct dsim_req *r, const uint8_t *p, size_t n)
{
	size_t i = 0;
	while (i < n && r->conn && r->in_body) {
		if (r->chunk_state == 1) {
			size_t k = n - i < r->chunk_left ? n - i : (size_t)r->chunk_left;
			on_body(r, p + i, k);
			i += k;
			r->chunk_left -= k;
			if (!r->chunk_left)
				r->chunk_state = 2;
			continue;
		}
		char ch = (char)p[i++];
		if (ch != '\n') {
			if (r->n_line < sizeof(r->line) - 1)
				r->line[r->n_line++] = ch;
			continue;
		}
		r->line[r->n_line] = 0;
		r->n_line = 0;
		if (r->chunk_state == 2) {
			r->chunk_state = 0;
			continue;
		}
		r->chunk_left = strtoull(r->line, NULL, 16);
		if (!r->chunk_left) {
			r->in_body = false; /* the last chunk: the answer is over */
			return n;
		}
		r->chunk_state = 1;
	}
	return n;
}

static size_t on_recv(struct sf_conn *c, const uint8_t *p, size_t n)
{
	struct dsim_req *r = sf_conn_user(c);
	if (!r)
		return n;
	r->last_rx = sf_simnet_now(r->s->world);
	size_t i = 0;
	while (!r->in_body && i < n) {
		if (r->n_hdr >= sizeof(r->hdr) - 1) {
			dsim_broke(r->s, "request %u: headers past %zu bytes", r->index, sizeof(r->hdr));
			conn_drop(r);
			return n;
		}
		r->hdr[r->n_hdr++] = (char)p[i++];
		r->hdr[r->n_hdr] = 0;
		if (r->n_hdr >= 4 && !memcmp(r->hdr + r->n_hdr - 4, "\r\n\r\n", 4))
			on_headers(r);
	}
	if (r->in_body && (r->status != 200 || r->deleting) && !r->chunked && !r->content_left &&
	    i == n) {
		answer_over(r, 0); /* an error answer with no body */
		return n;
	}
	if (i < n && r->in_body) {
		if (r->chunked)
			dechunk(r, p + i, n - i);
		else
			on_body(r, p + i, n - i);
	}
	return n;
}

static void on_connected(struct sf_conn *c, int err)
{
	(void)c;
	(void)err; /* a failure is told by on_closed */
}

/* The answer is over without a stream's end: an error status (asked again or not, as the
 * status says) or a break (err: why the connection ended). */
static void answer_over(struct dsim_req *r, int err)
{
	char why[512];
	if (r->deleting && r->in_body &&
	    (r->status == 200 || r->status == 204 || r->status == 404)) {
		conn_drop(r); /* the conversation is over (404: its delete went through before) */
		r->st = DR_DONE;
		return;
	}
	if (r->in_body && (r->status != 200 || r->deleting)) {
		snprintf(why, sizeof(why), "answered %d: %.300s", r->status,
			 r->err_body ? r->err_body : "");
		if (r->status == 404 && r->n_got && r->cut_by_head && !r->cut_by_reset &&
		    r->s->wal && !r->pipe) {
			dsim_broke(r->s, "request %u: %zu bytes streamed, the head crashed, and then "
				   "it does not know %s (%s)", r->index, r->n_got, r->id, why);
			r->st = DR_FAILED;
			conn_drop(r);
			return;
		}
		if (r->status == 404) {
			/* Its connection went (the head took that as the client leaving and ended
			 * the generation), or it was lost before anything was durable: asked
			 * whole again. */
			r->id[0] = 0;
			r->last_event = 0;
			r->n_got = 0;
			r->n_lp_text = 0;
			r->n_lp = 0;
		} else if (r->status != 503 && r->status != 429 && r->status != 502 &&
			   !(r->conv && r->status == 409)) {
			dsim_broke(r->s, "request %u: %s", r->index, why);
			r->st = DR_FAILED;
			conn_drop(r);
			return;
		}
	} else {
		snprintf(why, sizeof(why), "the connection ended (%s) %s", strerror(err),
			 r->in_body ? "mid-stream" : "before the answer");
	}
	/* Without the head's log there is nothing to resume: the whole request again. */
	if (!r->s->wal) {
		r->n_got = 0;
		r->n_lp_text = 0;
		r->n_lp = 0;
		r->last_event = 0;
		r->id[0] = 0;
	}
	broke_off(r, why);
}

static void on_closed(struct sf_conn *c, int err)
{
	struct dsim_req *r = sf_conn_user(c);
	if (!r)
		return;
	r->conn = NULL;
	if (!dsim_req_ended(r))
		answer_over(r, err);
}

static const struct sf_conn_ops ops = { .on_recv = on_recv, .on_connected = on_connected,
					.on_closed = on_closed };

/* A resend conversation's "messages": its turns and replies so far, then this turn's. */
static void messages_of(struct dsim_req *r, char *out, size_t cap)
{
	json_t *all = json_copy(r->hist);
	json_array_append_new(all, json_pack("{s:s, s:s}", "role", "user", "content", r->prompt));
	char *text = json_dumps(all, JSON_COMPACT);
	if (!text || strlen(text) + 16 > cap)
		dsim_broke(r->s, "request %u: its conversation does not fit a request", r->index);
	snprintf(out, cap, "\"messages\":%s", text ? text : "[]");
	free(text);
	json_decref(all);
}

static void ask(struct dsim_req *r)
{
	struct dsim *s = r->s;
	struct sockaddr_storage ss;
	socklen_t len;
	dsim_head_addr(&ss, &len);
	struct sf_err err;
	r->attempts++;
	r->n_hdr = 0;
	r->content_left = 0;
	r->last_rx = sf_simnet_now(s->world);
	sf_sse_free(&r->sse);
	r->in_body = r->chunked = false;
	r->status = 0;
	r->chunk_state = 0;
	r->n_line = 0;
	r->conn = sf_conn_dial(s->clients, (struct sockaddr *)&ss, len, 2000, &ops, r, &err);
	if (!r->conn) {
		broke_off(r, err.msg);
		return;
	}
	char req[DSIM_MAX_BODY + 512];
	int n;
	if (r->deleting) {
		n = snprintf(req, sizeof(req), "DELETE /v1/sessions/%s HTTP/1.1\r\nHost: sim\r\n"
			     "\r\n", r->name);
	} else if (r->id[0]) {
		/* Resumed: what came after the last event seen (all of it when none was). */
		r->resumes++;
		char after[32] = "";
		if (r->last_event) {
			snprintf(after, sizeof(after), "&after=%u", r->last_event);
		} else {
			r->n_got = 0;
			r->n_lp_text = 0;
			r->n_lp = 0;
		}
		n = snprintf(req, sizeof(req), "GET /v1/%scompletions/%s?stream=true%s HTTP/1.1\r\n"
			     "Host: sim\r\n\r\n", r->chat ? "chat/" : "", r->id, after);
	} else {
		/* A fresh request: what broke the last one no longer matters. */
		r->cut_by_reset = r->cut_by_head = false;
		r->n_got = 0;
		r->n_lp_text = 0;
		r->n_lp = 0;
		r->last_event = 0;
		char body[DSIM_MAX_BODY];
		char what[DSIM_MAX_BODY - 256];
		if (r->resend) /* the whole conversation, this turn last */
			messages_of(r, what, sizeof(what));
		else if (r->chat)
			snprintf(what, sizeof(what), "\"messages\":[{\"role\":\"user\","
				 "\"content\":\"%s\"}]", r->prompt);
		else
			snprintf(what, sizeof(what), "\"prompt\":\"%s\"", r->prompt);
		int b = snprintf(body, sizeof(body), "{\"model\":\"%s\",%s,"
				 "\"max_tokens\":%u,\"stream\":true,\"temperature\":%.1f,"
				 "\"top_p\":1,\"seed\":%llu%s}", r->pipe ? "sim-1-pipeline" : "sim-1",
				 what, r->max_tokens,
				 r->temperature, (unsigned long long)r->seed,
				 !r->logprobs ? "" : r->chat ? ",\"logprobs\":true,\"top_logprobs\":2"
							 : ",\"logprobs\":2");
		char named[96] = "";
		if (r->conv && !r->resend)
			snprintf(named, sizeof(named), "X-Superfluid-Session: %s\r\n", r->name);
		n = snprintf(req, sizeof(req), "POST /v1/%scompletions HTTP/1.1\r\nHost: sim\r\n"
			     "%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			     r->chat ? "chat/" : "", named, b, body);
	}
	sf_conn_write(r->conn, req, (size_t)n);
	r->st = DR_SENT;
	if (s->verbose)
		fprintf(stderr, "  [%llu ms] request %u: %.*s%s%s (turn %u, %u tokens of content)\n",
			(unsigned long long)sf_simnet_now(s->world), r->index,
			(int)strcspn(req, "\r"), req, r->conv ? " session " : "", r->name,
			r->turn + 1, r->n_ctx);
}

bool dsim_req_poll(struct dsim_req *r, uint64_t now)
{
	if (r->st == DR_IDLE && now >= r->start_at) {
		ask(r);
		return true;
	}
	if (r->st == DR_WAIT && now >= r->retry_at) {
		ask(r);
		return true;
	}
	if (r->st == DR_SENT && now >= dsim_req_deadline(r)) {
		r->cut_by_reset = true; /* its own leaving: the head may end the generation */
		broke_off(r, "no answer for 5 s: gave up on it");
		return true;
	}
	return false;
}

uint64_t dsim_req_deadline(const struct dsim_req *r)
{
	return r->st == DR_SENT ? r->last_rx + (r->conv ? CONV_IDLE_MS : IDLE_MS) : UINT64_MAX;
}

bool dsim_req_owns(const struct dsim_req *r, int fd)
{
	return r->conn && sf_conn_fd(r->conn) == fd;
}

void dsim_req_leave(struct dsim_req *r)
{
	if (dsim_req_ended(r))
		return;
	check_prefix(r, "left");
	conn_drop(r);
	r->st = DR_LEFT;
	r->s->leaves++;
}

void dsim_req_free(struct dsim_req *r)
{
	conn_drop(r);
	sf_sse_free(&r->sse);
	json_decref(r->hist);
	r->hist = NULL;
}

void dsim_req_plain(struct dsim_req *r, uint32_t max_tokens, uint64_t start_at, bool chat,
		    uint32_t n_turns)
{
	r->conv = r->leave = r->logprobs = r->pipe = r->resend = false;
	json_decref(r->hist); /* a scenario's conversation goes in its session */
	r->hist = NULL;
	r->chat = chat;
	r->name[0] = 0;
	r->n_turns = r->turn = 0;
	if (n_turns) {
		r->conv = true;
		r->n_turns = n_turns;
		snprintf(r->name, sizeof(r->name), "conv-%llu-%u", (unsigned long long)r->s->seed,
			 r->index);
	}
	r->n_ctx = 0;
	r->max_tokens = max_tokens;
	r->temperature = 0;
	r->start_at = start_at;
	expect(r->s, r);
}
