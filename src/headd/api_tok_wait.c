/* Generations that came before their model's tokenizer (issue 32): a shard lists a model once
 * a link to a node serving it opened, and asks that node for the tokenizer then; a request in
 * between, the first of a fresh fleet's clients, was answered 503 tokenizer_unavailable. Now
 * it waits, parked on its connection with nothing of it kept but its HTTP request (valid until
 * its response ends), and runs again from the start once the tokenizer arrived (so does a
 * client following a generation again, GET .../{id}, after a head restart): checked after
 * every loop turn, so at the turn that took the export. Bounded: HEADD_TOK_WAIT_MS each,
 * HEADD_TOK_WAITS_MAX on a shard; past the deadline, or when no node is asked for the
 * tokenizer any more, the 503 as before, saying why. Nothing blocks the loop.
 * A request for a model this shard does not serve yet while another shard does, its own link
 * to that node still in its handshake (headd_model_coming), waits the same way for the model:
 * else it was a 404 for a model GET /v1/models, answered by another shard, lists. So do
 * /v1/tokenize, /v1/embeddings and transcriptions (headd_model_wait), which need only the
 * model served here, and start again from their beginning. */
#include "headd.h"

#include <stdio.h>
#include <string.h>

#include "daemon/log.h"

/* Parks h's request r (answered nothing yet) for model, to be started again by route (a
 * generation: kind, count, its follow's id at offset at of the path). */
static bool park(struct headd_http *h, const struct sf_http_request *r,
		 enum headd_wait_route route, enum sf_api_kind kind, bool count, size_t at,
		 const char *model, struct sf_api_error *e)
{
	struct headd *d = h->d;
	struct headd_api *a = &d->api;
	if (a->m.tok_waiting >= HEADD_TOK_WAITS_MAX) {
		sf_api_fail(e, 503, "service_unavailable", "tokenizer_unavailable", "model",
			    "the tokenizer of model %.128s has not arrived from its nodes yet, and "
			    "%u requests already wait for a tokenizer here; try again in a moment",
			    model, a->m.tok_waiting);
		return false;
	}
	uint64_t now = sf_loop_now(d->loop);
	h->tok_wait = true;
	h->wait_route = (uint8_t)route;
	h->wait_kind = (uint8_t)kind;
	h->wait_count = count;
	h->wait_for_model = !headd_model_served(d, model);
	h->wait_resume = (uint16_t)at;
	h->wait_since = now;
	h->wait_until = now + HEADD_TOK_WAIT_MS;
	snprintf(h->wait_model, sizeof(h->wait_model), "%s", model);
	h->wait_r = r;
	a->m.tok_waiting++;
	return true;
}

/* Whether h may park at all (one request a connection, not while stopping). */
static bool may_park(const struct headd_http *h, const char *model)
{
	return h->conn && !h->tok_wait && !h->req && !h->no_wait && !h->d->stopping &&
	       strlen(model) <= SF_MAX_NAME;
}

bool headd_tok_wait_park(struct headd_http *h, const struct sf_http_request *r,
			 enum sf_api_kind kind, bool count, const char *resume_id, const char *model,
			 struct sf_api_error *e)
{
	struct headd *d = h->d;
	const char *why;
	size_t at = resume_id ? (size_t)(resume_id - r->path) : 0;
	if (!may_park(h, model) ||
	    (resume_id && (resume_id < r->path || at > strlen(r->path) || at > UINT16_MAX)) ||
	    (!sf_tok_client_tokenizer_coming(d->api.tok, model, &why) &&
	     !headd_model_coming(d, model)))
		return false;
	return park(h, r, HEADD_WAIT_GEN, kind, count, at, model, e);
}

bool headd_model_wait(struct headd_http *h, const struct sf_http_request *r,
		      enum headd_wait_route route, const char *model, struct sf_api_error *e)
{
	if (!may_park(h, model) || !headd_model_coming(h->d, model))
		return false;
	return park(h, r, route, SF_API_CHAT, false, 0, model, e);
}

void headd_tok_wait_drop(struct headd_http *h)
{
	if (!h->tok_wait)
		return;
	h->tok_wait = false;
	h->wait_r = NULL;
	h->d->api.m.tok_waiting--;
}

/* Runs h's request again (its tokenizer came), or answers it: 404 (or 503 model_unavailable)
 * for a model this shard did not come to serve (headd_model_coming), else 503 saying why. */
static void wake(struct headd_http *h, const char *why, uint64_t now)
{
	struct headd *d = h->d;
	const struct sf_http_request *r = h->wait_r;
	enum sf_api_kind kind = (enum sf_api_kind)h->wait_kind;
	bool count = h->wait_count;
	enum headd_wait_route route = (enum headd_wait_route)h->wait_route;
	uint16_t resume = h->wait_resume;
	headd_tok_wait_drop(h);
	struct sf_api_error e;
	if (why && h->wait_for_model && headd_model_check(d, h->wait_model, &e)) {
		d->api.m.tok_waits_failed++;
		headd_api_send_error(h, &e);
		return;
	}
	h->no_wait = true; /* started again, it is answered: it does not park a second time */
	if (route != HEADD_WAIT_GEN) { /* each checks the model again and answers for itself */
		if (why)
			d->api.m.tok_waits_failed++;
		else
			d->api.m.tok_waits_served++;
		if (route == HEADD_WAIT_TOKENIZE)
			headd_tokenize_start(h, r);
		else if (route == HEADD_WAIT_EMBED)
			headd_embeddings_start(h, r);
		else if (route == HEADD_WAIT_TRANSCRIBE)
			headd_transcribe_start(h, r);
		else
			headd_models(h, r);
		return;
	}
	if (!why) {
		d->api.m.tok_waits_served++;
		if (resume)
			headd_resume(h, kind, r->path + resume, r);
		else if (count)
			headd_gen_count(h, kind, r);
		else
			headd_gen_start(h, kind, r);
		return;
	}
	d->api.m.tok_waits_failed++;
	char waited[32];
	snprintf(waited, sizeof(waited), "%llu ms", (unsigned long long)(now - h->wait_since));
	sf_api_fail(&e, 503, "service_unavailable", "tokenizer_unavailable", "model",
		    "the tokenizer of model %.128s has not arrived from its nodes (waited %s): %s; "
		    "try again in a moment", h->wait_model, waited, why);
	headd_api_send_error(h, &e);
}

uint64_t headd_tok_wait_tick(struct headd *d)
{
	struct headd_api *a = &d->api;
	uint64_t now = sf_loop_now(d->loop), at = UINT64_MAX;
	if (!a->m.tok_waiting)
		return at;
	char served[SF_MAX_NAME + 1] = "";
	uint32_t n_served = 0;
	uint64_t longest = 0;
	for (struct headd_http *h = a->conns; h && a->m.tok_waiting; h = h->next) {
		if (!h->tok_wait)
			continue;
		const char *why;
		bool coming = sf_tok_client_tokenizer_coming(a->tok, h->wait_model, &why);
		bool model_coming = headd_model_coming(d, h->wait_model); /* not served here yet */
		bool ready = h->wait_route == HEADD_WAIT_GEN
				     ? !coming && sf_tok_client_tokenizer(a->tok, h->wait_model)
				     : true; /* needs the model only: served, or a 404 now */
		if (!model_coming && ready) {
			n_served++;
			if (now - h->wait_since >= longest)
				longest = now - h->wait_since;
			snprintf(served, sizeof(served), "%s", h->wait_model);
			wake(h, NULL, now);
		} else if (d->stopping) {
			wake(h, "the head is stopping", now);
		} else if (!coming && !model_coming) {
			wake(h, why, now);
		} else if (now >= h->wait_until) {
			char lim[32];
			snprintf(lim, sizeof(lim), "%u ms", (unsigned)HEADD_TOK_WAIT_MS);
			char msg[600];
			snprintf(msg, sizeof(msg), "a request waits for it %s at most, and its node "
				 "has not answered yet%s%s", lim, why[0] ? ": " : "", why);
			wake(h, msg, now);
		} else if (h->wait_until < at) {
			at = h->wait_until;
		}
	}
	if (n_served) /* the test of it (tests/api/tok_wait.sh) reads this line */
		sfd_info("model %s: %u request%s that came before its tokenizer waited for it, "
			 "%llu ms at most", served, n_served, n_served == 1 ? "" : "s",
			 (unsigned long long)longest);
	return at;
}
