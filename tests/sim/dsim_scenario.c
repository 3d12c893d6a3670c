/* daemon-sim's scripted scenarios (--scenario NAME): a fleet's shape and faults struck when
 * the daemons reach a state the random faults reach too seldom, each the daemons' version of
 * a case the machines' simulator once found (docs/RELIABILITY.md). */
#include "dsim.h"

#include <string.h>

#define BACK_MS 50 /* the head is down this long */

int dsim_scenario_parse(const char *name, enum dsim_scenario_kind *out)
{
	if (!strcmp(name, "new-placement")) {
		*out = DS_NEW_PLACEMENT;
		return 0;
	}
	return -1;
}

void dsim_scenario_shape(struct dsim *s)
{
	if (s->scen.kind == DS_NONE)
		return;
	/* One node (the session can only go back to it), a head of one shard with its log,
	 * one stream of 100 tokens (250 ms at the nodes' pace). */
	s->n_nodes = 1;
	s->head_shards = 1;
	s->node_shards[0] = 1;
	s->wal = true;
	s->n_reqs = 1;
}

void dsim_scenario_step(struct dsim *s)
{
	struct dsim_scenario *c = &s->scen;
	struct dsim_wal_view v;
	if (c->kind != DS_NEW_PLACEMENT)
		return;
	struct dsim_req *r = &s->reqs[0];
	switch (c->state) {
	case 0: /* mid-stream: the node dies and comes back at once */
		if (r->n_got < 10 || !dsim_head_wal_view(s, &v))
			return;
		c->epoch0 = v.epoch;
		dsim_node_crash(s, 0);
		s->node_crashes++;
		dsim_node_start(s, 0);
		c->state = 1;
		return;
	case 1: /* placed again and durable, the new run's events not yet: the head dies */
		if (dsim_req_ended(r)) {
			c->state = 3; /* it ended first: not this seed */
			return;
		}
		if (!dsim_head_wal_view(s, &v) || v.epoch == c->epoch0 || v.run_epoch == v.epoch ||
		    v.head_tokens <= v.tokens)
			return;
		dsim_head_crash(s);
		s->head_crashes++;
		c->hit = true;
		c->back_at = sf_simnet_now(s->world) + BACK_MS;
		c->state = 2;
		return;
	case 2:
		if (sf_simnet_now(s->world) < c->back_at)
			return;
		dsim_head_start(s);
		c->state = 3;
		return;
	default:
		return;
	}
}

uint64_t dsim_scenario_next(const struct dsim *s)
{
	return s->scen.kind != DS_NONE && s->scen.state == 2 ? s->scen.back_at : UINT64_MAX;
}
