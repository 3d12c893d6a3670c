/* GET /v1/fleet: every node's link state and capacity, then the pipeline's stages (linked to
 * shard 0 alone: its part brings them to whichever shard answers); what `superfluid status`
 * shows. */
#include "headd.h"

#include <jansson.h>

void headd_fleet_sessions(struct headd *d, uint32_t *out)
{
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
		const struct headd_node *n = &d->fleet.nodes[i];
		uint32_t sessions = 0;
		for (const struct headd_req *q = d->api.reqs; q; q = q->next)
			sessions += q->session_id && headd_life_generating(&q->life) &&
				    sf_head_session_node(d->head, q->session_id) == n->index;
		for (const struct headd_named *s = d->api.named; s; s = s->next)
			sessions += s->opened && !s->busy &&
				    sf_head_session_node(d->head, s->session_id) == n->index;
		out[i] = sessions;
	}
}

uint32_t headd_fleet_count(const struct headd *d)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++)
		n += !d->fleet.nodes[i].is_stage;
	return n;
}

/* One node's entry: links is how many of the head's shards have it open (a stage: shard 0);
 * px its prefix reuse (NULL: none). */
static json_t *entry(const struct headd *d, const struct headd_node *n, uint32_t sessions,
		     uint32_t links, const struct sf_head_prefix_stats *px)
{
	uint32_t all = n->is_stage ? 1 : d->n_shards;
	const char *state = links >= all ? "up" : links ? "partial" : "down";
	json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:b}",
			      "node", n->addr, "identity", n->identity[0] ? n->identity : "-",
			      "state", state, "version", (int)n->version,
			      "free_sessions", (int)n->cap.free_sessions,
			      "max_sessions", (int)n->cap.max_sessions,
			      "batch_running", (int)n->cap.batch_running,
			      "batch_size", (int)n->cap.batch_size, "sessions", (int)sessions,
			      "joined", n->joined);
	if (o && d->n_shards > 1)
		json_object_set_new(o, "links_up", json_integer(links));
	if (o && n->is_stage)
		json_object_set_new(o, "stage", json_integer(n->stage + 1));
	if (o && px) {
		json_object_set_new(o, "prompt_tokens_reused", json_integer((json_int_t)px->prompt_reused));
		json_object_set_new(o, "prompt_tokens_computed",
				    json_integer((json_int_t)px->prompt_computed));
		json_object_set_new(o, "prefix_pages", json_integer((json_int_t)px->pages));
	}
	return o;
}

json_t *headd_fleet_stages(const struct headd *d)
{
	json_t *a = NULL;
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
		const struct headd_node *n = &d->fleet.nodes[i];
		if (!n->is_stage)
			continue;
		if (!a && !(a = json_array()))
			return NULL;
		json_array_append_new(a, entry(d, n, 0, n->open, NULL));
	}
	return a;
}

void headd_fleet_page(struct headd_http *h, const struct headd_part *sum)
{
	struct headd *d = h->d;
	json_t *nodes = json_array();
	for (uint32_t i = 0; i < d->fleet.n_nodes && nodes; i++) {
		const struct headd_node *n = &d->fleet.nodes[i];
		if (n->is_stage)
			continue; /* from shard 0's part, below */
		uint32_t sessions = i < sum->n_nodes && sum->node_sessions ? sum->node_sessions[i] : 0;
		/* Up once every shard's link is (a request may reach any shard). */
		uint32_t links = i < sum->n_nodes && sum->node_links ? sum->node_links[i] : n->open;
		const struct sf_head_prefix_stats *px =
			i < sum->n_nodes && sum->node_prefix ? &sum->node_prefix[i] : NULL;
		json_array_append_new(nodes, entry(d, n, sessions, links, px));
	}
	if (nodes && sum->stages)
		json_array_extend(nodes, sum->stages);
	json_t *o = json_pack("{s:s, s:s, s:i, s:o}", "object", "fleet", "head", d->identity,
			      "shards", (int)d->n_shards, "nodes", nodes);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	headd_api_send_json(h, 200, text);
}
