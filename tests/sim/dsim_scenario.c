/* daemon-sim's scripted scenarios (--scenario NAME): a fleet's shape and faults struck when
 * the daemons reach a state the random faults reach too seldom, each the daemons' version of
 * a case a simulator once found (docs/RELIABILITY.md). */
#include "dsim.h"

#include <string.h>

#define BACK_MS 50 /* the head is down this long */
#define CLOSE_DURABLE_MS 20 /* past the log's write of a record appended now (disk_max_ms 3) */
#define TURN_FAIL_WAIT_MS 10000 /* a turn on a node down this long has long failed */

static const char *const names[] = {
	[DS_NEW_PLACEMENT] = "new-placement",
	[DS_ANSWER_CRASH] = "answer-crash",
	[DS_ROLE_CUT] = "role-cut",
	[DS_FAILED_TURN] = "failed-turn",
	[DS_CUT_RESUME] = "cut-resume",
};

int dsim_scenario_parse(const char *name, enum dsim_scenario_kind *out)
{
	for (unsigned k = DS_NEW_PLACEMENT; k < sizeof(names) / sizeof(names[0]); k++)
		if (!strcmp(name, names[k])) {
			*out = (enum dsim_scenario_kind)k;
			return 0;
		}
	return -1;
}

void dsim_scenario_shape(struct dsim *s)
{
	if (s->scen.kind == DS_NONE)
		return;
	/* One node (the session can only go back to it), a head of one shard with its log,
	 * one request. */
	s->n_nodes = 1;
	s->head_shards = 1;
	s->node_shards[0] = 1;
	s->wal = true;
	s->n_reqs = 1;
}

void dsim_scenario_request(struct dsim *s)
{
	struct dsim_req *r = &s->reqs[0];
	switch (s->scen.kind) {
	case DS_ANSWER_CRASH: /* short enough to be written whole while the client waits */
		dsim_req_plain(r, 30, 100, false, 0);
		break;
	case DS_ROLE_CUT:
		dsim_req_plain(r, 30, 100, true, 0);
		break;
	case DS_FAILED_TURN:
		dsim_req_plain(r, 30, 100, s->seed % 2, 3);
		break;
	case DS_CUT_RESUME:
		dsim_req_plain(r, 100, 100, s->seed % 2, 0);
		break;
	default: /* a stream of 100 tokens (250 ms at the nodes' pace) */
		dsim_req_plain(r, 100, 100, false, 0);
		break;
	}
}

/* The head dies and comes back BACK_MS later. reset: its death resets the client's
 * connection, what was on its way to the client lost (as a dead process's socket with input
 * it never read answers with a reset); the head's doing, not the client's. */
static void head_dies(struct dsim *s, bool reset)
{
	struct dsim_req *r = &s->reqs[0];
	if (reset && r->conn)
		sf_simnet_reset(s->world, sf_conn_fd(r->conn));
	dsim_head_crash(s);
	s->head_crashes++;
	s->scen.hit = true;
	s->scen.back_at = sf_simnet_now(s->world) + BACK_MS;
	s->scen.state = DSIM_SCEN_BACK;
}

static void new_placement(struct dsim *s)
{
	struct dsim_scenario *c = &s->scen;
	struct dsim_req *r = &s->reqs[0];
	struct dsim_wal_view v;
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
			c->state = DSIM_SCEN_DONE; /* it ended first: not this seed */
			return;
		}
		if (!dsim_head_wal_view(s, &v) || v.epoch == c->epoch0 || v.run_epoch == v.epoch ||
		    v.head_tokens <= v.tokens)
			return;
		head_dies(s, false);
		return;
	}
}

static void answer_crash(struct dsim *s)
{
	struct dsim_scenario *c = &s->scen;
	struct dsim_req *r = &s->reqs[0];
	switch (c->state) {
	case 0: /* the stream began: the client stops reading */
		if (dsim_req_ended(r)) {
			c->state = DSIM_SCEN_DONE;
			return;
		}
		if (!r->n_got || !r->conn)
			return;
		sf_conn_pause_recv(r->conn, true);
		c->state = 1;
		return;
	case 1: /* the head has written the whole answer: the log's records of it settle */
		if (!r->conn) {
			c->state = DSIM_SCEN_DONE; /* the connection broke: not this seed */
			return;
		}
		if (dsim_head_answering(s))
			return;
		c->at = sf_simnet_now(s->world) + CLOSE_DURABLE_MS;
		c->state = 4;
		return;
	case 4: /* then the head dies and the answer's last bytes with the connection */
		if (sf_simnet_now(s->world) < c->at)
			return;
		head_dies(s, true);
		return;
	}
}

static void role_cut(struct dsim *s)
{
	struct dsim_scenario *c = &s->scen;
	struct dsim_req *r = &s->reqs[0];
	if (c->state != 0)
		return;
	if (dsim_req_ended(r) || r->n_got) {
		c->state = DSIM_SCEN_DONE; /* a token's text came with the role: not this seed */
		return;
	}
	if (r->conn && r->in_body && r->events == 1)
		head_dies(s, true);
}

static void failed_turn(struct dsim *s)
{
	struct dsim_scenario *c = &s->scen;
	struct dsim_req *r = &s->reqs[0];
	uint64_t now = sf_simnet_now(s->world);
	switch (c->state) {
	case 0: /* the second turn streams: its only node dies and stays down */
		if (dsim_req_ended(r) || r->turn >= 2) {
			c->state = DSIM_SCEN_DONE;
			return;
		}
		if (r->turn != 1 || !r->n_got)
			return;
		dsim_node_crash(s, 0);
		s->node_crashes++;
		c->breaks0 = r->breaks;
		c->at = now + TURN_FAIL_WAIT_MS;
		c->state = 1;
		return;
	case 1: /* the turn failed (the client was told): the head dies, the node comes back */
		if (r->breaks == c->breaks0 && now < c->at)
			return;
		dsim_node_start(s, 0);
		if (r->breaks == c->breaks0) {
			c->state = DSIM_SCEN_DONE; /* it never failed: not this seed */
			return;
		}
		head_dies(s, false);
		return;
	}
}

static void cut_resume(struct dsim *s)
{
	struct dsim_scenario *c = &s->scen;
	struct dsim_req *r = &s->reqs[0];
	if (dsim_req_ended(r)) {
		c->state = DSIM_SCEN_DONE;
		return;
	}
	if (r->n_got < 10 || !r->conn)
		return;
	r->cut_by_reset = true;
	sf_simnet_reset(s->world, sf_conn_fd(r->conn));
	s->resets++;
	c->hit = true;
	c->state = DSIM_SCEN_DONE;
}

void dsim_scenario_step(struct dsim *s)
{
	struct dsim_scenario *c = &s->scen;
	if (c->kind == DS_NONE || c->state == DSIM_SCEN_DONE)
		return;
	if (c->state == DSIM_SCEN_BACK) {
		if (sf_simnet_now(s->world) < c->back_at)
			return;
		dsim_head_start(s);
		c->state = DSIM_SCEN_DONE;
		return;
	}
	switch (c->kind) {
	case DS_NEW_PLACEMENT:
		new_placement(s);
		return;
	case DS_ANSWER_CRASH:
		answer_crash(s);
		return;
	case DS_ROLE_CUT:
		role_cut(s);
		return;
	case DS_FAILED_TURN:
		failed_turn(s);
		return;
	case DS_CUT_RESUME:
		cut_resume(s);
		return;
	default:
		return;
	}
}

uint64_t dsim_scenario_next(const struct dsim *s)
{
	const struct dsim_scenario *c = &s->scen;
	if (c->kind == DS_NONE)
		return UINT64_MAX;
	if (c->state == DSIM_SCEN_BACK)
		return c->back_at;
	if ((c->kind == DS_ANSWER_CRASH && c->state == 4) ||
	    (c->kind == DS_FAILED_TURN && c->state == 1))
		return c->at;
	return UINT64_MAX;
}
