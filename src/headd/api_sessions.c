/* Named sessions (X-Superfluid-Session or the "session" body field): kept across requests on
 * the node that holds their context, at most --max-sessions of them, each ended after
 * --session-idle-s unused; GET and DELETE /v1/sessions/{id}. */
#include "headd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "daemon/log.h"

struct headd_named *headd_named_find(struct headd *d, const char *name,
				     const uint8_t owner[static SF_WALREC_OWNER_LEN])
{
	for (struct headd_named *s = d->api.named; s; s = s->next)
		if (!strcmp(s->name, name) && headd_owner_is(s->owner, owner))
			return s;
	return NULL;
}

struct headd_named *headd_named_new(struct headd *d, const char *name, const char *model,
				    const uint8_t owner[static SF_WALREC_OWNER_LEN],
				    uint64_t session_id, struct sf_api_error *e)
{
	/* With keys, each is a tenant: one may keep at most its share, and what it is told names
	 * its own count and the limits, never how many the others keep (issue 32: the 429 said
	 * how many sessions the head held, and one key could take them all). */
	char lim[128];
	uint32_t mine = 0;
	for (const struct headd_named *s = d->api.named; d->api.n_keys && s; s = s->next)
		mine += headd_owner_is(s->owner, owner);
	if (d->api.n_keys && mine >= d->opts->max_sessions_per_key) {
		sf_api_fail(e, 429, "rate_limit_error", "too_many_sessions", NULL,
			    "this key keeps %u named sessions, as many as one key may (%s); end one "
			    "with DELETE /v1/sessions/{id}", mine,
			    headd_limit_text(d, lim, sizeof(lim), "--max-sessions-per-key",
					     headd_proc_given(d)->max_sessions_per_key,
					     d->opts->max_sessions_per_key));
		return NULL;
	}
	if (d->api.n_named >= d->opts->max_sessions) {
		sf_api_fail(e, 429, "rate_limit_error", "too_many_sessions", NULL,
			    "the head keeps as many named sessions as it may (%s)%s; end one with "
			    "DELETE /v1/sessions/{id}, or try again later",
			    headd_limit_text(d, lim, sizeof(lim), "--max-sessions",
					     headd_proc_given(d)->max_sessions,
					     d->opts->max_sessions),
			    d->api.n_keys ? ", all keys together" : "");
		return NULL;
	}
	struct headd_named *s = calloc(1, sizeof(*s));
	if (!s) {
		sf_api_fail(e, 500, "server_error", NULL, NULL, "the head is out of memory");
		return NULL;
	}
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->model, sizeof(s->model), "%s", model);
	memcpy(s->owner, owner, sizeof(s->owner));
	s->session_id = session_id ? session_id : headd_session_id_new(d);
	s->created_s = (uint64_t)time(NULL);
	s->used_ms = sf_loop_now(d->loop);
	s->next = d->api.named;
	d->api.named = s;
	d->api.n_named++;
	return s;
}

int headd_named_set_content(struct headd_named *s, const uint32_t *t, uint32_t n)
{
	if (n > s->cap) {
		uint32_t *p = realloc(s->content, (size_t)n * sizeof(*p));
		if (!p)
			return -1;
		s->content = p;
		s->cap = n;
	}
	if (n)
		memcpy(s->content, t, (size_t)n * sizeof(*t));
	s->n_content = n;
	return 0;
}

void headd_named_end(struct headd *d, struct headd_named *s)
{
	for (struct headd_named **pp = &d->api.named; *pp; pp = &(*pp)->next) {
		if (*pp != s)
			continue;
		*pp = s->next;
		d->api.n_named--;
		break;
	}
	if (s->busy) {
		s->busy->named = NULL; /* its request closes the session when it ends */
		headd_life_on(&s->busy->life, HE_CANCEL);
	} else if (s->opened) {
		struct sf_err err;
		(void)sf_head_session_close(d->head, s->session_id, false, sf_loop_now(d->loop), &err);
		headd_wal_close(d, s->session_id);
	}
	headd_named_free(s);
}

void headd_named_free(struct headd_named *s)
{
	sf_wal_turns_free(&s->kept);
	free(s->content);
	free(s);
}

void headd_named_expire(struct headd *d)
{
	uint64_t now = sf_loop_now(d->loop), idle = (uint64_t)d->opts->session_idle_s * 1000;
	for (struct headd_named *s = d->api.named, *next; s; s = next) {
		next = s->next;
		if (!s->busy && !s->restoring && now - s->used_ms >= idle) {
			sfd_info("session %s: unused for %u s; ended", s->name, d->opts->session_idle_s);
			headd_named_end(d, s);
		}
	}
}

static void not_found(struct headd_http *h, const char *name)
{
	struct sf_api_error e;
	sf_api_fail(&e, 404, "invalid_request_error", "session_not_found", "session",
		    "no session named %.128s (it ended, expired, or never started)", name);
	headd_api_send_error(h, &e);
}

void headd_sessions_get(struct headd_http *h, const char *name)
{
	struct headd *d = h->d;
	struct headd_named *s = headd_named_find(d, name, h->owner);
	if (!s) {
		not_found(h, name);
		return;
	}
	uint32_t node = s->opened ? sf_head_session_node(d->head, s->session_id) : SF_HEAD_NO_NODE;
	json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:i, s:i, s:b, s:I}", "id", s->name,
			      "object", "session", "model", s->model, "created",
			      (json_int_t)s->created_s, "turns", (int)s->turns, "tokens",
			      (int)s->n_content, "busy", s->busy != NULL, "idle_ms",
			      (json_int_t)(sf_loop_now(d->loop) - s->used_ms));
	if (o)
		json_object_set_new(o, "node", node == SF_HEAD_NO_NODE
				    ? json_null() : json_string(sf_head_node_name(d->head, node)));
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	headd_api_send_json(h, 200, text);
}

void headd_sessions_delete(struct headd_http *h, const char *name)
{
	struct headd *d = h->d;
	struct headd_named *s = headd_named_find(d, name, h->owner);
	if (!s) {
		not_found(h, name);
		return;
	}
	json_t *o = json_pack("{s:s, s:s, s:b}", "id", s->name, "object", "session.deleted",
			      "deleted", 1);
	headd_named_end(d, s);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	headd_wal_answer_durable(d, h, text); /* deleted means deleted, crash or not */
}
