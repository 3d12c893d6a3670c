/* Recent stored responses, so that a request may name an output item by id
 * (`{"type": "item_reference", "id": "msg_..."}`, what @ai-sdk/openai sends for an earlier
 * reply when store is on) and GET /v1/responses/{id} answers without a log: each shard keeps
 * its last HEADD_ITEMS_KEPT stored responses (each response object of at most
 * HEADD_ITEMS_MAX_BYTES), by key, until it restarts.
 * A request's references are replaced by the items before it is parsed (and a fork's
 * conversation put before its input, resp_fork.c), so what the log keeps is the request as
 * it ran. */
#include "headd.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct headd_resp_items {
	char id[SF_WALREC_MAX_ID + 1];      /* the response's */
	uint8_t owner[SF_WALREC_OWNER_LEN];
	char *resp;                         /* the response object, compact JSON */
};

void headd_resp_items_put(struct headd *d, const char *resp_id,
			  const uint8_t owner[static SF_WALREC_OWNER_LEN], const json_t *resp)
{
	char *text = json_dumps(resp, JSON_COMPACT);
	if (!text || strlen(text) > HEADD_ITEMS_MAX_BYTES) {
		free(text);
		return;
	}
	struct headd_api *a = &d->api;
	if (!a->items && !(a->items = calloc(HEADD_ITEMS_KEPT, sizeof(*a->items)))) {
		free(text);
		return;
	}
	struct headd_resp_items *it = &a->items[a->items_next++ % HEADD_ITEMS_KEPT];
	free(it->resp);
	snprintf(it->id, sizeof(it->id), "%s", resp_id);
	memcpy(it->owner, owner, sizeof(it->owner));
	it->resp = text;
}

/* The kept response resp_id of owner, or NULL. */
static const struct headd_resp_items *kept(const struct headd *d, const char *resp_id,
					   const uint8_t owner[static SF_WALREC_OWNER_LEN])
{
	for (uint32_t i = 0; d->api.items && i < HEADD_ITEMS_KEPT; i++) {
		const struct headd_resp_items *it = &d->api.items[i];
		if (it->resp && !strcmp(it->id, resp_id) && headd_owner_is(it->owner, owner))
			return it;
	}
	return NULL;
}

const char *headd_resp_items_object(const struct headd *d, const char *resp_id,
				    const uint8_t owner[static SF_WALREC_OWNER_LEN])
{
	const struct headd_resp_items *it = kept(d, resp_id, owner);
	return it ? it->resp : NULL;
}

void headd_resp_items_free(struct headd *d)
{
	for (uint32_t i = 0; d->api.items && i < HEADD_ITEMS_KEPT; i++)
		free(d->api.items[i].resp);
	free(d->api.items);
	d->api.items = NULL;
}

/* The response an item id belongs to ("<kind>_<response's id after resp_>_<index>", as
 * api_responses.c makes them), and the index. */
static bool item_of(const char *item, char *resp, size_t cap, unsigned *index)
{
	const char *us = strchr(item, '_'), *last = strrchr(item, '_');
	if (!us || last == us || !last[1] || strspn(last + 1, "0123456789") != strlen(last + 1))
		return false;
	int n = snprintf(resp, cap, "resp_%.*s", (int)(last - us - 1), us + 1);
	*index = (unsigned)strtoul(last + 1, NULL, 10);
	return n > 0 && (size_t)n < cap;
}

unsigned headd_resp_items_shard(const struct headd *d, const char *item_id)
{
	char resp[SF_WALREC_MAX_ID + 1];
	unsigned index;
	return item_of(item_id, resp, sizeof(resp), &index) ? headd_shard_of_request_id(d, resp)
							    : d->shard;
}

/* The item id names (a new reference), or NULL. */
static json_t *find(struct headd *d, const char *item_id,
		    const uint8_t owner[static SF_WALREC_OWNER_LEN])
{
	char resp[SF_WALREC_MAX_ID + 1];
	unsigned index;
	if (!item_of(item_id, resp, sizeof(resp), &index))
		return NULL;
	const struct headd_resp_items *it = kept(d, resp, owner);
	if (!it)
		return NULL;
	json_t *obj = json_loads(it->resp, 0, NULL);
	json_t *item = json_incref(json_array_get(json_object_get(obj, "output"), index));
	json_decref(obj);
	const char *id = json_string_value(json_object_get(item, "id"));
	if (id && !strcmp(id, item_id))
		return item;
	json_decref(item);
	return NULL;
}

/* root's item references replaced by the items; *found counts them. 0, or -1 with e. */
static int resolve_refs(struct headd_http *h, json_t *root, int *found, struct sf_api_error *e)
{
	static const char mark[] = "item_reference";
	json_t *input = json_object_get(root, "input");
	size_t i;
	json_t *item;
	json_array_foreach(input, i, item) {
		const json_t *type = json_object_get(item, "type");
		if (!json_is_string(type) || strcmp(json_string_value(type), mark))
			continue;
		const char *id = json_string_value(json_object_get(item, "id"));
		json_t *got = id ? find(h->d, id, h->owner) : NULL;
		if (!got) {
			char p[32];
			snprintf(p, sizeof(p), "input[%zu].id", i);
			return sf_api_fail(e, 404, "invalid_request_error", "item_not_found", p,
					   "%s: no item %.64s here: the head keeps the items of its "
					   "last %d stored responses (of this key) until it restarts; "
					   "send the item itself", p, id ? id : "(no id)",
					   HEADD_ITEMS_KEPT);
		}
		if (json_array_set_new(input, i, got))
			return sf_api_fail(e, 500, "server_error", NULL, NULL,
					   "the head is out of memory");
		(*found)++;
	}
	return 0;
}

int headd_responses_resolve(struct headd_http *h, const uint8_t *body, size_t len, char **out,
			    size_t *out_len, bool *forked, struct sf_api_error *e)
{
	*out = NULL;
	*out_len = 0;
	*forked = false;
	static const char ref[] = "item_reference", prev[] = "previous_response_id";
	if (!body || (!memmem(body, len, ref, sizeof(ref) - 1) &&
		      !memmem(body, len, prev, sizeof(prev) - 1)))
		return 0;
	json_t *root = json_loadb((const char *)body, len, 0, NULL);
	int found = 0;
	int rc = resolve_refs(h, root, &found, e);
	if (!rc)
		rc = headd_responses_fork(h, root, forked, e);
	if (!rc && (found || *forked) && !(*out = json_dumps(root, JSON_COMPACT)))
		rc = sf_api_fail(e, 500, "server_error", NULL, NULL, "the head is out of memory");
	if (*out)
		*out_len = strlen(*out);
	json_decref(root);
	return rc;
}

unsigned headd_responses_shard(const struct headd *d, const struct sf_http_request *r)
{
	if (d->n_shards == 1)
		return d->shard;
	if (r->path[13] == '/' && r->path[14] && strcmp(r->path + 14, "input_tokens"))
		/* GET, DELETE /v1/responses/{id} */
		return headd_shard_of_request_id(d, r->path + 14);
	static const char prev[] = "previous_response_id", ref[] = "item_reference";
	if (!r->body_len || (!memmem(r->body, r->body_len, prev, sizeof(prev) - 1) &&
			     !memmem(r->body, r->body_len, ref, sizeof(ref) - 1)))
		return d->shard;
	/* The conversation's shard: the previous response's, else the first item named's. */
	json_t *root = json_loadb((const char *)r->body, r->body_len, 0, NULL);
	const char *id = json_string_value(json_object_get(root, prev));
	unsigned shard = id ? headd_shard_of_request_id(d, id) : d->shard;
	size_t i;
	json_t *item;
	json_array_foreach(id ? NULL : json_object_get(root, "input"), i, item) {
		const char *ref_id = json_string_value(json_object_get(item, "id"));
		if (ref_id && json_is_string(json_object_get(item, "type")) &&
		    !strcmp(json_string_value(json_object_get(item, "type")), ref)) {
			shard = headd_resp_items_shard(d, ref_id);
			break;
		}
	}
	json_decref(root);
	return shard;
}
