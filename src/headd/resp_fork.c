/* A stored conversation's turns, so that a request may continue from any of its responses
 * (docs/API.md, "Stored responses"). Each stored response keeps its turn when it ends (its
 * request's input items and its output items, in its named session and, with --wal-dir, in
 * the log as an ITEMS record); a request whose previous_response_id names a response that is
 * not its conversation's latest (a fork) has those turns up to it put before its own input,
 * and runs as a new conversation: the node's prefix cache still has what they render to. */
#include "headd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* Whether two response ids ("resp_<16 hex digits of the chain><serial>") share a chain. */
static bool same_chain(const char *a, const char *b)
{
	return !strncmp(a, b, sizeof("resp_") - 1 + 16);
}

void headd_responses_turn(struct headd_req *q, const json_t *obj)
{
	struct headd_named *s = q->named;
	const char *prev = q->r.resp->previous_id;
	if (!s || s->kept.over)
		return;
	/* Kept only after the turn before it: a conversation's first (no previous response,
	 * or a fork of another conversation), or the follow-up of its last one kept. */
	bool follows = s->kept.n ? prev && !strcmp(prev, s->kept.v[s->kept.n - 1].id)
				  : !prev || !same_chain(prev, q->id);
	char *text = NULL;
	json_t *items = follows && q->r.resp->input_json ? json_loads(q->r.resp->input_json, 0,
								      NULL) : NULL;
	if (items && !json_array_extend(items, json_object_get(obj, "output")))
		text = json_dumps(items, JSON_COMPACT);
	json_decref(items);
	size_t len = text ? strlen(text) : 0;
	int rc = text && len <= SF_WALREC_MAX_ITEMS ? sf_wal_turns_add(&s->kept, q->id,
								      (uint8_t *)text,
								      (uint32_t)len) : 1;
	if (rc)
		s->kept.over = true; /* a gap: no later turn is kept */
	if (q->logged)
		headd_wal_items(q->d, s->session_id, rc ? "" : q->id, rc ? NULL : text,
				rc ? 0 : len);
	free(text);
}

int headd_responses_fork(struct headd_http *h, json_t *root, bool *forked,
			 struct sf_api_error *e)
{
	*forked = false;
	const char *prev = json_string_value(json_object_get(root, "previous_response_id"));
	struct headd_named *s = prev ? headd_responses_chain(h->d, prev, h->owner) : NULL;
	int at = s ? sf_wal_turns_find(&s->kept, prev) : -1;
	json_t *input = json_object_get(root, "input");
	if (at < 0 || headd_responses_latest(h->d, s, prev) ||
	    !(json_is_string(input) || json_is_array(input)))
		return 0; /* continued, or refused, as headd_responses_named says */
	json_t *all = json_array();
	int rc = all ? 0 : -1;
	for (int i = 0; !rc && i <= at; i++) {
		json_t *t = json_loads(s->kept.v[i].items, 0, NULL);
		rc = t ? json_array_extend(all, t) : -1;
		json_decref(t);
	}
	if (!rc)
		rc = json_is_array(input) ? json_array_extend(all, input)
			: json_array_append_new(all, json_pack("{s:s,s:s,s:O}", "type", "message",
							       "role", "user", "content", input));
	if (!rc && json_array_size(all) > SF_API_MAX_MESSAGES)
		rc = sf_api_bad(e, "previous_response_id", "the conversation up to %.64s holds "
				"%zu items with the request's, over the %u a request may have: "
				"continue from a shorter one", prev, json_array_size(all),
				(unsigned)SF_API_MAX_MESSAGES);
	else if (rc || json_object_set(root, "input", all))
		rc = sf_api_fail(e, 500, "server_error", NULL, NULL, "the head is out of memory");
	json_decref(all);
	*forked = !rc;
	return rc;
}
