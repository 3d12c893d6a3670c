/* GET /v1/chat/completions/{id} and GET /v1/completions/{id}: a generation the head's log
 * holds (--wal-dir), for a client whose stream ended with the head (a crash, a restart).
 *
 * The request is rebuilt from the body the log kept and its output decoder from the same
 * seed, so the output is the same text, chunk for chunk in what it covers. A stream names
 * each event by the tokens it covers (`id: N`); a client sends the last one it saw as
 * Last-Event-ID (or ?after=N) and gets what came after, then the rest live as the node
 * replays and goes on; without it, the whole generation from the start. ?stream=true or
 * ?stream=false overrides how the original request asked to be answered. */
#include "headd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "wal/wal_restore.h"

static bool query_value(const char *query, const char *key, char *out, size_t cap)
{
	size_t k = strlen(key);
	for (const char *p = query; p && *p;) {
		const char *amp = strchr(p, '&');
		size_t n = amp ? (size_t)(amp - p) : strlen(p);
		if (n > k && !strncmp(p, key, k) && p[k] == '=') {
			snprintf(out, cap, "%.*s", (int)(n - k - 1), p + k + 1);
			return true;
		}
		p = amp ? amp + 1 : NULL;
	}
	return false;
}

static int parse_after(const char *s, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* Feeds the first `after` tokens to q's decoder and drops what it made: the client has it. */
static void skip_seen(struct headd_req *q, uint32_t after)
{
	for (uint32_t i = 0; i < after && !q->out.done; i++)
		sf_out_feed(&q->out, &q->gen[i], 1);
	size_t n;
	(void)sf_out_take_content(&q->out, &n);
	(void)sf_out_take_reasoning(&q->out, &n);
	while (sf_out_take_call(&q->out))
		;
	q->role_sent = after > 0;
	q->lps_sent = after < q->n_lps ? after : q->n_lps;
}

static void add_logprobs(void *arg, const uint8_t *lp, uint32_t n, uint32_t skip)
{
	struct headd_req *q = arg;
	struct sf_logprob *v = calloc(n ? n : 1, sizeof(*v));
	struct sf_top_logprob *tops = calloc((size_t)(n ? n : 1) * SF_MAX_TOP_LOGPROBS,
					     sizeof(*tops));
	if (v && tops) {
		sf_walrec_logprobs(lp, n, v, tops);
		(void)headd_gen_keep_logprobs(q, v, n);
	}
	free(v);
	free(tops);
}

static struct headd_req *live_follower(struct headd *d, uint64_t sid, uint64_t gid)
{
	for (struct headd_req *q = d->api.reqs; q; q = q->next)
		if (q->session_id == sid && q->generation_id == gid && q->life.phase != HL_DONE)
			return q;
	return NULL;
}

static void not_found(struct sf_api_error *e, const char *id, const char *why)
{
	sf_api_fail(e, 404, "invalid_request_error", "generation_not_found", NULL,
		    "no generation %.64s %s", id, why);
}

/* The generation id names that this key may follow from token `after` on: it, with *sp its
 * session, or NULL with e set. Asked when the request comes and again once its template has
 * rendered (the log moves meanwhile). */
static struct sf_wal_gen *followable(struct headd *d, enum sf_api_kind kind, const char *id,
				     const uint8_t *owner, bool named_after, uint32_t after,
				     struct sf_wal_session **sp, struct sf_api_error *e)
{
	if (!d->wal.w) {
		not_found(e, id, "can be fetched again: this head keeps no log (--wal-dir)");
		return NULL;
	}
	struct sf_wal_session *s = NULL;
	struct sf_wal_gen *g = sf_wal_state_request(d->wal.st, id, &s);
	/* Another key's generation is not there for this one: the same answer as none. */
	if (!g || g->rec.kind != (uint8_t)kind || !headd_owner_is(s->rec.owner, owner)) {
		not_found(e, id, "is in the head's log (it ended and its session closed, it never "
			  "ran here, or it is a request of the other kind)");
		return NULL;
	}
	if (g->rec.index) {
		sf_api_fail(e, 400, "invalid_request_error", "invalid_value", "n",
			    "request %.64s asked for several choices; only a request of one can be "
			    "followed again", id);
		return NULL;
	}
	struct headd_req *live = live_follower(d, s->rec.session_id, g->rec.generation_id);
	if ((live && !live->h) || (g->ended && !g->code && g->reason == SF_FINISH_CANCELLED) ||
	    sf_wal_gen_abandoned(s, g)) {
		/* It ended when its client went away (or asked it to end), or the head is
		 * cancelling it now (its client went; the node has not said it stopped): what
		 * the log holds is not the answer, and nothing more of it will come. */
		not_found(e, id, "can be followed: it was cancelled when its client went away");
		return NULL;
	}
	if (live) {
		sf_api_fail(e, 409, "invalid_request_error", "session_busy", NULL,
			    "generation %.64s is being sent to another connection now; close that "
			    "one first", id);
		return NULL;
	}
	if (after > g->n_tokens) {
		sf_api_fail(e, 409, "invalid_request_error", "invalid_value",
			    named_after ? "Last-Event-ID" : "after", "the client has seen %u tokens "
			    "of %.64s but the head's log holds %u (with --wal-sync %s a crash may "
			    "lose what was sent last)", after, id, g->n_tokens, d->opts->wal_sync);
		return NULL;
	}
	*sp = s;
	return g;
}

/* The request the log kept, parsed again with its tokenizer and decoder; NULL with e set when
 * it cannot be answered (late: its model, when that is because its tokenizer has not come). */
static struct headd_req *rebuild(struct headd_http *h, const struct sf_wal_session *s,
				 const struct sf_wal_gen *g, char late[SF_MAX_NAME + 1],
				 struct sf_api_error *e)
{
	struct headd *d = h->d;
	struct headd_req *q = calloc(1, sizeof(*q));
	if (!q) {
		sf_api_fail(e, 500, "server_error", NULL, NULL, "the head is out of memory");
		return NULL;
	}
	q->d = d;
	if (sf_api_parse_request((enum sf_api_kind)g->rec.kind, g->rec.body, g->rec.body_len,
				 &q->r, e)) {
		free(q);
		sf_api_fail(e, 500, "server_error", NULL, NULL, "the log's copy of request %s does "
			    "not parse again", g->rec.request_id);
		return NULL;
	}
	q->tok = sf_tok_client_tokenizer(d->api.tok, q->r.model);
	if (!q->tok) {
		snprintf(late, SF_MAX_NAME + 1, "%s", q->r.model);
		headd_gen_free(q);
		sf_api_fail(e, 503, "service_unavailable", "tokenizer_unavailable", NULL,
			    "the tokenizer of model %.128s has not arrived from its nodes since the "
			    "head started; try again in a moment", s->rec.model);
		return NULL;
	}
	memcpy(q->id, g->rec.request_id, sizeof(q->id));
	memcpy(q->owner, s->rec.owner, sizeof(q->owner));
	q->created_s = g->rec.created_s;
	q->t_start = sf_loop_now(d->loop);
	q->out_seed = g->rec.out_seed;
	q->tok_model = q->r.model;
	q->logged = q->resumed = true;
	headd_gen_vocab(&q->vocab, q->tok);
	q->vocab.end_turn = headd_req_end_turn(q);
	(void)headd_out_init(q); /* no memory: the output ends at once */
	return q;
}

/* What q (rebuilt, its reply's format known) sends: the log's tokens of g after the client's,
 * then what the node makes as it replays and goes on. 0, or -1 with e set. */
static int follow(struct headd_req *q, struct sf_wal_session *s, struct sf_wal_gen *g,
		  struct sf_api_error *e)
{
	struct headd *d = q->d;
	uint32_t after = q->follow_after;
	q->max_tokens = g->rec.max_new;
	/* The content the generation ran after, for usage and a named session's next turn. */
	q->n_content = g->rec.n_prompt;
	q->content = malloc(((size_t)s->n_content + 1) * sizeof(uint32_t));
	q->gen = malloc(((size_t)g->n_tokens + 1) * sizeof(uint32_t));
	if (!q->content || !q->gen)
		return sf_api_fail(e, 500, "server_error", NULL, NULL, "the head is out of memory");
	/* Its ids only now: a follow that fails before is no part of the session (its end
	 * closes nothing). */
	q->session_id = s->rec.session_id;
	q->generation_id = g->rec.generation_id;
	if (s->n_content) /* memcpy wants a pointer even for no bytes */
		memcpy(q->content, s->content, (size_t)s->n_content * sizeof(uint32_t));
	if (q->n_content > s->n_content)
		q->n_content = s->n_content;
	if (g->n_tokens)
		memcpy(q->gen, g->tokens, (size_t)g->n_tokens * sizeof(uint32_t));
	q->n_gen = q->gen_cap = g->n_tokens;
	if (q->r.logprobs)
		sf_wal_gen_logprobs(g, 0, add_logprobs, q);
	skip_seen(q, after);
	for (uint32_t i = after; i < q->n_gen && !q->out.done; i++)
		sf_out_feed(&q->out, &q->gen[i], 1);
	if (q->follow_kind == SF_API_RESPONSES)
		q->r.stream = false; /* GET /v1/responses/{id}: the object, unless ?stream=true */
	if (q->follow_stream)
		q->r.stream = q->follow_stream > 0;
	struct headd_named *n = s->rec.name[0] ? headd_named_find(d, s->rec.name, s->rec.owner)
						: NULL;
	q->keep_session = s->rec.name[0] != 0;
	if (!g->ended && n && n->restoring == g->rec.generation_id) {
		n->restoring = 0; /* this request keeps the reply when it ends */
		n->busy = q;
		q->named = n;
	}
	headd_req_index(q);
	headd_life_init(&q->life, HL_RUNNING);
	headd_life_on(&q->life, HE_OUTPUT); /* what the log holds goes out at the next turn */
	d->wal.resumed_streams++;
	if (g->ended) {
		struct sf_head_event ev = { .session_id = q->session_id,
					    .generation_id = q->generation_id };
		if (g->code) {
			ev.kind = SF_HEAD_EV_ERROR;
			ev.code = g->code;
			ev.msg = g->msg;
		} else {
			ev.kind = SF_HEAD_EV_FINISH;
			ev.reason = g->reason;
		}
		(void)headd_gen_event(d, &ev); /* an unnamed session closes once it is sent */
	}
	sfd_info("%s: followed again from token %u of %u%s", q->id, after, g->n_tokens,
		 g->ended ? " (it had ended)" : "");
	headd_stream_begin(q);
	return 0;
}

void headd_resume_rendered(struct headd_req *q, struct headd_render *j)
{
	struct headd *d = q->d;
	struct sf_api_error e;
	char *text = NULL;
	size_t len = 0;
	if (!q->h || !q->life.client)
		return; /* its client went while it rendered: the next turn lets it go */
	/* The reply's format, as the first run read it: the prompt rendered again. */
	if (headd_chat_render_take(q, j, &text, &len, &e))
		sfd_warn("%s: its prompt does not render again (%s): its reply is read without "
			 "its template's format", q->id, e.message);
	free(text);
	q->following = false;
	struct sf_wal_session *s = NULL;
	struct sf_wal_gen *g = NULL;
	if (!headd_chat_out(q, &e))
		g = followable(d, (enum sf_api_kind)q->follow_kind, q->id, q->owner, q->follow_named,
			       q->follow_after, &s, &e);
	if (!g || follow(q, s, g, &e)) {
		q->fail = e; /* answered at the turn, with its status: no stream began */
		headd_life_on(&q->life, HE_FAILED);
	}
}

void headd_resume(struct headd_http *h, enum sf_api_kind kind, const char *id,
		  const struct sf_http_request *hr)
{
	struct headd *d = h->d;
	struct sf_api_error e;
	char v[32];
	const char *last = sf_http_header(hr, "last-event-id");
	uint32_t after = 0;
	if ((last || query_value(hr->query, "after", v, sizeof(v))) &&
	    parse_after(last ? last : v, &after)) {
		sf_api_fail(&e, 400, "invalid_request_error", "invalid_value",
			    last ? "Last-Event-ID" : "after", "give the number of tokens the client "
			    "has seen: the id of the last event it got");
		headd_api_send_error(h, &e);
		return;
	}
	struct sf_wal_session *s = NULL;
	struct sf_wal_gen *g = followable(d, kind, id, h->owner, last != NULL, after, &s, &e);
	char late[SF_MAX_NAME + 1] = "";
	struct headd_req *q = g ? rebuild(h, s, g, late, &e) : NULL;
	if (!q) {
		/* Its model's tokenizer not here yet (a restarted head): it may wait for it. */
		if (!late[0] || !headd_tok_wait_park(h, hr, kind, false, id, late, &e))
			headd_api_send_error(h, &e);
		return;
	}
	q->follow_after = after;
	q->follow_kind = (uint8_t)kind; /* a Responses request's is a chat from its parse on */
	q->follow_named = last != NULL;
	if (query_value(hr->query, "stream", v, sizeof(v)))
		q->follow_stream = !strcmp(v, "true") || !strcmp(v, "1") ? 1 : -1;
	/* A chat's reply format comes from its prompt rendered again: a template may take its
	 * whole budget, so it renders on the shard's render thread (chat_jobs.c), as a new
	 * request's does, and the log is asked again when it is done. */
	if (q->r.kind == SF_API_CHAT && headd_render_submit(q, &e)) {
		headd_gen_free(q);
		headd_api_send_error(h, &e);
		return;
	}
	q->h = h;
	h->req = q;
	q->next = d->api.reqs;
	d->api.reqs = q;
	if (q->r.kind == SF_API_CHAT) {
		q->following = true;
		headd_life_init(&q->life, HL_TOKENIZING);
	} else if (follow(q, s, g, &e)) {
		headd_life_init(&q->life, HL_TOKENIZING);
		q->fail = e; /* answered at the turn, with its status */
		headd_life_on(&q->life, HE_FAILED);
	}
}
