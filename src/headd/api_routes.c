/* The client API's routes: which handler a request goes to, the bearer key check, the model
 * list and /health. Generations are api_generate.c's, sessions api_sessions.c's, /metrics
 * metrics.c's. */
#include "headd.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/log.h"

static enum headd_endpoint endpoint_of(const char *path)
{
	if (!strcmp(path, "/v1/chat/completions"))
		return EP_CHAT;
	if (!strcmp(path, "/v1/completions"))
		return EP_COMPLETIONS;
	if (!strncmp(path, "/v1/models", 10))
		return EP_MODELS;
	if (!strncmp(path, "/v1/sessions", 12))
		return EP_SESSIONS;
	if (!strcmp(path, "/health"))
		return EP_HEALTH;
	if (!strcmp(path, "/metrics"))
		return EP_METRICS;
	if (!strcmp(path, "/v1/tokenize"))
		return EP_TOKENIZE;
	if (!strcmp(path, "/v1/fleet"))
		return EP_FLEET;
	if (!strcmp(path, "/v1/audio/transcriptions"))
		return EP_TRANSCRIBE;
	if (!strcmp(path, "/v1/responses") || !strncmp(path, "/v1/responses/", 14))
		return EP_RESPONSES;
	if (!strcmp(path, "/v1/messages") || !strcmp(path, "/v1/messages/count_tokens"))
		return EP_MESSAGES;
	if (!strcmp(path, "/v1/embeddings"))
		return EP_EMBEDDINGS;
	return EP_OTHER;
}

/* Responses answered here end the request at once. */
static void respond(struct headd_http *h, int status, const char *type, const char *body,
		    size_t len, const char *extra)
{
	headd_metrics_request(h->d, (enum headd_endpoint)h->ep, status);
	sf_http_respond(h->http, status, type, body, len, extra);
	headd_http_response_done(h);
}

void headd_api_respond(struct headd_http *h, int status, const char *type, const char *body,
		       size_t len, const char *extra)
{
	respond(h, status, type, body, len, extra);
}

void headd_api_send_json(struct headd_http *h, int status, char *json)
{
	if (!json) {
		static const char oom[] = "{\"error\":{\"message\":\"the head is out of memory\","
					  "\"type\":\"server_error\",\"param\":null,\"code\":null}}";
		respond(h, 500, "application/json", oom, sizeof(oom) - 1, NULL);
		return;
	}
	respond(h, status, "application/json", json, strlen(json), NULL);
	free(json);
}

void headd_api_send_error(struct headd_http *h, const struct sf_api_error *e)
{
	const char *extra = NULL;
	if (e->status == 401)
		extra = "WWW-Authenticate: Bearer realm=\"superfluid\"\r\n";
	else if (e->status == 503) /* every 503 of the head passes within a second or two */
		extra = "Retry-After: 1\r\n";
	/* Anthropic's clients read errors in Anthropic's shape. */
	char *json = h->ep == EP_MESSAGES ? sf_api_error_json_anthropic(e) : sf_api_error_json(e);
	if (!json) {
		headd_api_send_json(h, e->status, NULL);
		return;
	}
	respond(h, e->status, "application/json", json, strlen(json), extra);
	free(json);
}

/* The distinct models the open links serve, into names (at most cap), and the pipeline's
 * when every stage is up (its stages' own model only through fleet nodes). */
static uint32_t served_models(struct headd *d, const char **names, uint32_t cap)
{
	uint32_t n = 0;
	const char *pn = d->fleet.pipe ? NULL : headd_proc_pipe_name(d); /* shard 0's, when not this */
	if (d->fleet.pipe && headd_pipeline_serves(d, d->fleet.pipe_model) && n < cap)
		names[n++] = d->fleet.pipe_model;
	else if (pn && n < cap)
		names[n++] = pn;
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
		const struct headd_node *nd = &d->fleet.nodes[i];
		if (!nd->open || !nd->lc || nd->is_stage)
			continue;
		const struct sf_link_peer *p = sf_link_peer(sf_link_conn_link(nd->lc));
		for (uint32_t k = 0; k < p->n_models; k++) {
			const char *m = p->models[k].name;
			bool seen = !m || !*m;
			for (uint32_t j = 0; j < n && !seen; j++)
				seen = !strcmp(names[j], m);
			if (!seen && n < cap)
				names[n++] = m;
		}
	}
	return n;
}

/* Asked for every request: straight over the nodes' lists, without building the set. */
bool headd_model_served(struct headd *d, const char *model)
{
	if (d->fleet.pipe && headd_pipeline_serves(d, d->fleet.pipe_model) && !strcmp(d->fleet.pipe_model, model))
		return true;
	const char *pn = d->fleet.pipe ? NULL : headd_proc_pipe_name(d);
	if (pn && !strcmp(pn, model))
		return true;
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
		const struct headd_node *nd = &d->fleet.nodes[i];
		if (!nd->open || !nd->lc || nd->is_stage)
			continue;
		const struct sf_link_peer *p = sf_link_peer(sf_link_conn_link(nd->lc));
		for (uint32_t k = 0; k < p->n_models; k++)
			if (p->models[k].name && !strcmp(p->models[k].name, model))
				return true;
	}
	return false;
}

uint32_t headd_model_ctx_len(struct headd *d, const char *model)
{
	uint32_t best = 0;
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
		const struct headd_node *nd = &d->fleet.nodes[i];
		if (!nd->open || !nd->lc || nd->is_stage)
			continue;
		const struct sf_link_peer *p = sf_link_peer(sf_link_conn_link(nd->lc));
		for (uint32_t k = 0; k < p->n_models; k++)
			if (p->models[k].name && !strcmp(p->models[k].name, model) &&
			    p->models[k].ctx_len > best)
				best = p->models[k].ctx_len;
	}
	return best;
}

bool headd_model_coming(struct headd *d, const char *model)
{
	if (headd_model_served(d, model) || !headd_proc_model_known(d, headd_name_hash(model)))
		return false;
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
		const struct headd_node *nd = &d->fleet.nodes[i];
		if (!nd->open && !nd->is_stage && nd->link_id && headd_proc_node_links(d, i, 0))
			return true; /* dialing or in its handshake here, open on another shard */
	}
	return false;
}

int headd_model_check(struct headd *d, const char *model, struct sf_api_error *e)
{
	if (headd_model_served(d, model))
		return 0;
	uint64_t x = headd_name_hash(model);
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
		const struct headd_node *nd = &d->fleet.nodes[i];
		for (uint32_t k = 0; !nd->open && !nd->is_stage && k < nd->n_served; k++)
			if (nd->served[k] == x)
				return sf_api_fail(e, 503, "service_unavailable", "model_unavailable",
						   "model", "no node serving model '%.128s' is up right "
						   "now: node %s (%s) is being dialed again; try again "
						   "in a moment", model, nd->identity, nd->addr);
	}
	return sf_api_fail(e, 404, "invalid_request_error", "model_not_found", "model",
			   "The model '%.128s' does not exist: no node of this head serves it now "
			   "(GET /v1/models lists those that do)", model);
}

void headd_models(struct headd_http *h, const struct sf_http_request *r)
{
	struct headd *d = h->d;
	const char *path = r->path;
	const char *names[HEADD_MAX_MODELS + 1];
	uint32_t n = served_models(d, names, sizeof(names) / sizeof(names[0]));
	uint32_t ctx[HEADD_MAX_MODELS + 1];
	for (uint32_t i = 0; i < n; i++)
		ctx[i] = headd_model_ctx_len(d, names[i]);
	uint64_t created = (uint64_t)time(NULL);
	if (!strcmp(path, "/v1/models") || !strcmp(path, "/v1/models/")) {
		headd_api_send_json(h, 200, sf_api_models_json(names, ctx, n, created, "superfluid"));
		return;
	}
	const char *want = path + strlen("/v1/models/");
	for (uint32_t i = 0; i < n; i++)
		if (!strcmp(names[i], want)) {
			headd_api_send_json(h, 200, sf_api_model_json(want, ctx[i], created,
								      "superfluid"));
			return;
		}
	struct sf_api_error e;
	if (headd_model_wait(h, r, HEADD_WAIT_MODEL, want, &e))
		return; /* another shard serves it; this one's link is in its handshake */
	sf_api_fail(&e, 404, "invalid_request_error", "model_not_found", "model",
		    "The model '%.128s' does not exist: no node of this head serves it "
		    "(GET /v1/models lists those that do)", want);
	headd_api_send_error(h, &e);
}

void headd_health_counts(struct headd *d, uint32_t *models, uint32_t *up)
{
	const char *names[HEADD_MAX_MODELS + 1];
	*models = served_models(d, names, sizeof(names) / sizeof(names[0]));
	*up = 0; /* the fleet's nodes: the pipeline's stages are shard 0's alone */
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++)
		*up += d->fleet.nodes[i].open && !d->fleet.nodes[i].is_stage;
}

/* Ready when every shard is: each serves a model (sum holds the least of them). */
void headd_health_page(struct headd_http *h, const struct headd_part *sum)
{
	struct headd *d = h->d;
	uint32_t n = sum->models_min, up = sum->up_min;
	char body[256];
	int len = snprintf(body, sizeof(body),
			   "{\"status\":\"%s\",\"nodes_up\":%u,\"nodes\":%u,\"models\":%u}",
			   n ? "ok" : "unavailable", up, headd_fleet_count(d), n);
	respond(h, n ? 200 : 503, "application/json", body, (size_t)len, NULL);
}

static void not_allowed(struct headd_http *h, const struct sf_http_request *r, const char *allow)
{
	struct sf_api_error e;
	sf_api_fail(&e, 405, "invalid_request_error", "method_not_allowed", NULL,
		    "%s is not allowed on %.200s (allowed: %s)", r->method, r->path, allow);
	char extra[64];
	snprintf(extra, sizeof(extra), "Allow: %s\r\n", allow);
	char *json = sf_api_error_json(&e);
	if (!json) {
		headd_api_send_json(h, 405, NULL);
		return;
	}
	respond(h, 405, "application/json", json, strlen(json), extra);
	free(json);
}

static bool is(const struct sf_http_request *r, const char *method)
{
	return !strcmp(r->method, method) || (!strcmp(method, "GET") && !strcmp(r->method, "HEAD"));
}

/* The body's top-level string key into out (cap bytes with its NUL, cut past that), parsed
 * only when the body holds hint at all: most bodies are never parsed here. */
static bool body_string(const struct sf_http_request *r, const char *key, const char *hint,
			char *out, size_t cap)
{
	if (!r->body_len || !memmem(r->body, r->body_len, hint, strlen(hint)))
		return false;
	json_t *o = json_loadb((const char *)r->body, r->body_len, 0, NULL);
	const char *s = json_string_value(json_object_get(o, key));
	if (s)
		snprintf(out, cap, "%s", s);
	json_decref(o);
	return s != NULL;
}

/* The shard that answers r: the one that owns the session or generation it names (by its
 * name or id), else this one. */
static unsigned owner_of(const struct headd *d, enum headd_endpoint ep,
			 const struct sf_http_request *r, const char *resume_id)
{
	if (d->n_shards == 1)
		return d->shard;
	if (headd_proc_has_pipeline(d)) {
		/* The stages are shard 0's: its nodes page and its pipeline's requests (whatever
		 * else they name: shard 0 answers what a pipeline cannot do). */
		if (ep == EP_FLEET || ep == EP_METRICS)
			return 0;
		const char *pn = headd_proc_pipe_name(d);
		char model[SF_MAX_NAME + 32];
		if (pn && (ep == EP_CHAT || ep == EP_COMPLETIONS || ep == EP_TOKENIZE) &&
		    body_string(r, "model", pn, model, sizeof(model)) && !strcmp(model, pn))
			return 0;
	}
	if (resume_id)
		return headd_shard_of_request_id(d, resume_id);
	if (ep == EP_RESPONSES) /* by the response named: its conversation's shard */
		return headd_responses_shard(d, r);
	if (ep == EP_SESSIONS && r->path[12] == '/' && r->path[13])
		return headd_shard_of_name(d, r->path + 13);
	if (ep != EP_CHAT && ep != EP_COMPLETIONS && ep != EP_MESSAGES)
		return d->shard;
	const char *named = sf_http_header(r, "x-superfluid-session");
	if (named && *named)
		return headd_shard_of_name(d, named);
	if (ep == EP_MESSAGES) /* a session by the header only: Anthropic's body has no field */
		return d->shard;
	char session[SF_API_MAX_SESSION_ID + 2]; /* one more: a name too long stays too long */
	if (body_string(r, "session", "\"session\"", session, sizeof(session)) && *session)
		return headd_shard_of_name(d, session);
	return d->shard;
}

void headd_api_head(struct headd_http *h, const struct sf_http_request *r)
{
	enum headd_endpoint ep = endpoint_of(r->path);
	if (ep == EP_HEALTH || ep == EP_METRICS || !h->d->api.n_keys)
		return; /* open to all: read on */
	if (h->d->opts->cors_origin && !strcmp(r->method, "OPTIONS"))
		return; /* a preflight carries no key: answered with the request */
	if (ep == EP_OTHER && !strncmp(r->path, "/v1/chat/completions/", 21))
		ep = EP_CHAT;
	else if (ep == EP_OTHER && !strncmp(r->path, "/v1/completions/", 16))
		ep = EP_COMPLETIONS;
	h->ep = (int)ep;
	(void)headd_keys_check(h, r); /* a 401 now: no body byte is read, none kept */
}

void headd_api_request(struct headd_http *h, const struct sf_http_request *r)
{
	if (headd_cors_preflight(h, r))
		return;
	enum headd_endpoint ep = endpoint_of(r->path);
	h->ep = (int)ep;
	h->no_wait = false; /* (a parked request started again sets it: it waits once) */
	if (ep == EP_HEALTH) {
		if (is(r, "GET"))
			headd_gather_start(h, EP_HEALTH);
		else
			not_allowed(h, r, "GET");
		return;
	}
	if (ep == EP_METRICS) {
		if (is(r, "GET"))
			headd_gather_start(h, EP_METRICS);
		else
			not_allowed(h, r, "GET");
		return;
	}
	const char *resume_id = NULL;
	enum sf_api_kind resume_kind = SF_API_CHAT;
	if (ep == EP_OTHER && !strncmp(r->path, "/v1/chat/completions/", 21) && r->path[21]) {
		resume_id = r->path + 21;
		ep = EP_CHAT;
	} else if (ep == EP_OTHER && !strncmp(r->path, "/v1/completions/", 16) && r->path[16]) {
		resume_id = r->path + 16;
		resume_kind = SF_API_COMPLETION;
		ep = EP_COMPLETIONS;
	}
	h->ep = (int)ep;
	/* A request handed here is answered here: never handed on again. */
	unsigned owner = h->adopting ? h->d->shard : owner_of(h->d, ep, r, resume_id);
	if (owner != h->d->shard) {
		headd_http_handoff(h, r, owner);
		return;
	}
	if (ep == EP_OTHER) {
		struct sf_api_error e;
		sf_api_fail(&e, 404, "invalid_request_error", "unknown_url", NULL,
			    "Unknown request URL: %s %.200s. This head serves /v1/models, "
			    "/v1/completions, /v1/chat/completions, /v1/responses, /v1/messages, /v1/embeddings, "
			    "/v1/audio/transcriptions, "
			    "/v1/sessions/{id}, /v1/tokenize, /v1/fleet, /health and /metrics", r->method, r->path);
		headd_api_send_error(h, &e);
		return;
	}
	if (!headd_keys_check(h, r))
		return;
	switch (ep) {
	case EP_CHAT:
	case EP_COMPLETIONS:
		if (resume_id) {
			if (is(r, "GET"))
				headd_resume(h, resume_kind, resume_id, r);
			else
				not_allowed(h, r, "GET");
			return;
		}
		if (!is(r, "POST")) {
			not_allowed(h, r, "POST");
			return;
		}
		headd_gen_start(h, ep == EP_CHAT ? SF_API_CHAT : SF_API_COMPLETION, r);
		return;
	case EP_RESPONSES: {
		const char *id = r->path[13] == '/' ? r->path + 14 : NULL;
		if (!id || !strcmp(id, "input_tokens")) {
			if (!is(r, "POST"))
				not_allowed(h, r, "POST");
			else if (id)
				headd_gen_count(h, SF_API_RESPONSES, r);
			else
				headd_gen_start(h, SF_API_RESPONSES, r);
		} else if (is(r, "GET")) {
			headd_responses_get(h, id, r);
		} else if (!strcmp(r->method, "DELETE")) {
			headd_responses_delete(h, id);
		} else {
			not_allowed(h, r, "GET, DELETE");
		}
		return;
	}
	case EP_EMBEDDINGS:
		if (!is(r, "POST")) {
			not_allowed(h, r, "POST");
			return;
		}
		headd_embeddings_start(h, r);
		return;
	case EP_MESSAGES:
		if (!is(r, "POST")) {
			not_allowed(h, r, "POST");
			return;
		}
		if (!strcmp(r->path, "/v1/messages/count_tokens"))
			headd_gen_count(h, SF_API_MESSAGES, r);
		else
			headd_gen_start(h, SF_API_MESSAGES, r);
		return;
	case EP_TOKENIZE:
		if (!is(r, "POST")) {
			not_allowed(h, r, "POST");
			return;
		}
		headd_tokenize_start(h, r);
		return;
	case EP_TRANSCRIBE:
		if (!is(r, "POST")) {
			not_allowed(h, r, "POST");
			return;
		}
		headd_transcribe_start(h, r);
		return;
	case EP_FLEET:
		if (!is(r, "GET")) {
			not_allowed(h, r, "GET");
			return;
		}
		headd_gather_start(h, EP_FLEET);
		return;
	case EP_MODELS:
		if (!is(r, "GET")) {
			not_allowed(h, r, "GET");
			return;
		}
		headd_models(h, r);
		return;
	case EP_SESSIONS: {
		const char *name = r->path[12] == '/' ? r->path + 13 : "";
		if (!*name) {
			struct sf_api_error e;
			sf_api_fail(&e, 404, "invalid_request_error", "unknown_url", NULL,
				    "name the session: /v1/sessions/{id}");
			headd_api_send_error(h, &e);
		} else if (is(r, "GET")) {
			headd_sessions_get(h, name);
		} else if (!strcmp(r->method, "DELETE")) {
			headd_sessions_delete(h, name);
		} else {
			not_allowed(h, r, "GET, DELETE");
		}
		return;
	}
	default:
		return;
	}
}

