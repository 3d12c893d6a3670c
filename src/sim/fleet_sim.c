/* The in-memory fleet's machines, connections and clock. Each step the nodes tick, the head's
 * shards tick, and the bytes each link queued move to the other end until nothing moves; a
 * stalled step leaves them queued. Cutting a connection throws away what was queued. A
 * pipeline stage's link moves only what was queued on it when the step began. A node has a
 * connection from each shard (struct sim_conn); what stops or kills a process (pauses,
 * deaths, refused dials, restarts) is the node's, what happens to a connection (resets,
 * clogs, half-open ends, drops) each connection's own. */
#include "sim/fleet_sim_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Node n's connection that is link link_id (at either end), or NULL. */
static struct sim_conn *conn_of(struct sim_node *n, uint64_t link_id)
{
	for (uint32_t k = 0; k < sf__fleet_n_conns(n); k++)
		if (n->conns[k].link_id == link_id && n->conns[k].hl)
			return &n->conns[k];
	return NULL;
}

static int node_send(void *arg, uint64_t link_id, uint16_t type, const void *msg)
{
	struct sim_node *n = arg;
	struct sf_err err;
	struct sim_conn *c = link_id ? conn_of(n, link_id) : NULL;
	if (!c || !c->nl || !c->node_open)
		return SF_E_STATE;
	if (!n->stage) {
#ifdef SF_PLANTED_BUGS
		c = sf__fleet_shard_planted(c, type);
#endif
		sf__fleet_shard_node_sent(n->f, c, type, msg);
	}
	if (type == SF_MSG_NODE_STATUS && n->digest) {
		/* The digest this node states everywhere, as a node with another tokenizer would. */
		struct sf_node_status st = *(const struct sf_node_status *)msg;
		struct sf_model_info models[SF_HEAD_NODE_MODELS];
		if (st.n_models <= SF_HEAD_NODE_MODELS) {
			for (uint32_t i = 0; i < st.n_models; i++) {
				models[i] = st.models[i];
				models[i].tokenizer_digest = n->digest;
			}
			st.models = models;
		}
		return sf_link_send(c->nl, type, &st, n->f->now, &err);
	}
	return sf_link_send(c->nl, type, msg, n->f->now, &err);
}

/* The generations a RECONCILE lists, and where the head wants each to go on. */
static void note_asked(struct sim_conn *n, const struct sf_reconcile *m)
{
	if (n->asked_link != n->link_id) {
		n->asked_link = n->link_id;
		n->n_asked = 0;
	}
	for (uint32_t i = 0; i < m->n_sessions; i++)
		for (uint32_t j = 0; j < m->sessions[i].n_gens; j++) {
			if (n->n_asked == n->cap_asked) {
				uint32_t cap = n->cap_asked ? n->cap_asked * 2 : 64;
				struct sim_asked *a = realloc(n->asked, cap * sizeof(*a));
				if (!a)
					return;
				n->asked = a;
				n->cap_asked = cap;
			}
			n->asked[n->n_asked++] = (struct sim_asked){
				.sid = m->sessions[i].session_id, .epoch = m->sessions[i].epoch,
				.gid = m->sessions[i].gens[j].generation_id,
				.next = m->sessions[i].gens[j].next_seq };
		}
}

/* The node's answer: a replay of a listed generation that starts past the event the head
 * wants next leaves a gap nothing can fill (the node let go of events the head never had). */
static void check_replay(struct sf_fleet_sim *f, struct sim_conn *n, const struct sf_reconcile_ack *m)
{
	for (uint32_t i = 0; i < m->n_sessions && !f->why[0]; i++) {
		const struct sf_reconcile_held *h = &m->sessions[i];
		for (uint32_t r = 0; r < h->n_ranges; r++)
			for (uint32_t k = 0; k < n->n_asked && n->asked_link == n->link_id; k++) {
				const struct sim_asked *a = &n->asked[k];
				if (a->sid != h->session_id || a->epoch != h->epoch ||
				    a->gid != h->ranges[r].generation_id || h->ranges[r].from_seq <= a->next)
					continue;
				snprintf(f->why, sizeof(f->why), "node %u replays generation %" PRIu64
					 " of session %" PRIu64 " from event %" PRIu64 ", the head asked "
					 "from %" PRIu64 ": events the head never kept were acknowledged "
					 "and let go, a gap", n->n->index, a->gid, a->sid,
					 h->ranges[r].from_seq, a->next);
				return;
			}
	}
}

const char *sf_fleet_sim_why(const struct sf_fleet_sim *f) { return f->why; }
const char *sf_fleet_sim_shard_why(const struct sf_fleet_sim *f) { return f->shard_why; }

/* Fleet nodes and pipeline stages: every machine with a link. */
static uint32_t n_all(const struct sf_fleet_sim *f) { return f->n_nodes + f->n_stages; }

/* A shard's head machine sends on its own connection to a node. */
static int head_send(void *arg, uint64_t link_id, uint16_t type, const void *msg)
{
	struct sim_shard *sh = arg;
	struct sf_fleet_sim *f = sh->f;
	struct sf_err err;
	for (uint32_t i = 0; i < f->n_nodes; i++) {
		struct sim_conn *c = &f->nodes[i].conns[sh->k];
		if (!c->hl || c->link_id != link_id || !c->head_open)
			continue;
		if (f->tap)
			f->tap(f->tap_arg, i, type, msg);
		sf__fleet_shard_head_sent(f, c, type, msg);
		if (type == SF_MSG_RECONCILE)
			note_asked(c, msg);
		return sf_link_send(c->hl, type, msg, f->now, &err);
	}
	return SF_E_STATE;
}

static int node_machine(struct sim_node *n, struct sf_err *err)
{
	struct sf_node_io io = { .arg = n, .send = node_send };
	struct sf_node_config nc = n->f->cfg.node;
	if (n->stage)
		nc.max_sessions = 8; /* it never holds one; a small table ticks fast */
	return sf_node_new(&n->node, &nc, n->engine, &io, n->f->now, err);
}

/* Every shard's head machine and its nodes (labels "node-N", index N); and, with stages,
 * the pipeline machine. */
static int head_machines(struct sf_fleet_sim *f, struct sf_err *err)
{
	/* Every shard numbers its epochs and commands from the same first id, as headd's
	 * shards do (from the one clock): only their sessions differ. */
	int rc = 0;
	for (uint32_t k = 0; !rc && k < f->n_shards; k++) {
		struct sim_shard *sh = &f->shards[k];
		struct sf_head_io hio = { .arg = sh, .send = head_send, .event = sf__fleet_record };
		rc = sf_head_new(&sh->head, &f->cfg.head, &hio, f->now, err);
		for (uint32_t i = 0; !rc && i < f->n_nodes; i++)
			if ((rc = sf_head_node_add(sh->head, f->nodes[i].label, err)) >= 0)
				rc = 0;
	}
	if (!rc && f->n_stages)
		rc = sf__fleet_pipe_machine(f, err);
	return rc;
}

int sf_fleet_sim_new(struct sf_fleet_sim **out, const struct sf_fleet_sim_config *cfg,
		     struct sf_err *err)
{
	if (!cfg->n_nodes || cfg->n_nodes > SF_FLEET_SIM_MAX_NODES)
		return sf_err_set(err, SF_E_RANGE, "a simulated fleet has 1..%d nodes",
				  SF_FLEET_SIM_MAX_NODES);
	if (cfg->pipe_stages > SF_FLEET_SIM_MAX_STAGES)
		return sf_err_set(err, SF_E_RANGE, "a simulated pipeline has 0..%d stages",
				  SF_FLEET_SIM_MAX_STAGES);
	if (cfg->head_shards > SF_FLEET_SIM_MAX_SHARDS)
		return sf_err_set(err, SF_E_RANGE, "a simulated head has 0..%d shards",
				  SF_FLEET_SIM_MAX_SHARDS);
	struct sf_fleet_sim *f = calloc(1, sizeof(*f));
	if (!f)
		return sf_err_set(err, SF_E_NOMEM, "no memory for the simulated fleet");
	f->cfg = *cfg;
	f->now = cfg->start_ms ? cfg->start_ms : 1000;
	f->stage_rng = cfg->pipe_seed;
	f->n_shards = cfg->head_shards ? cfg->head_shards : 1;
	for (uint32_t k = 0; k < f->n_shards; k++)
		f->shards[k] = (struct sim_shard){ .f = f, .k = k };
	f->streams = calloc(SF_FLEET_SIM_MAX_STREAMS, sizeof(*f->streams));
	int rc = f->streams ? 0 : sf_err_set(err, SF_E_NOMEM, "no memory for the streams");
	for (uint32_t i = 0; !rc && i < cfg->n_nodes + cfg->pipe_stages; i++) {
		struct sim_node *n = &f->nodes[i];
		n->f = f;
		n->index = i;
		n->stage = i >= cfg->n_nodes;
		n->stage_k = n->stage ? i - cfg->n_nodes : 0;
		for (uint32_t k = 0; k < SF_FLEET_SIM_MAX_SHARDS; k++)
			n->conns[k] = (struct sim_conn){ .n = n, .shard = k };
		if (n->stage)
			snprintf(n->label, sizeof(n->label), "stage-%u", n->stage_k + 1);
		else
			snprintf(n->label, sizeof(n->label), "node-%u", i);
		*(n->stage ? &f->n_stages : &f->n_nodes) += 1;
		rc = sf_sim_engine_new(&cfg->engine, &n->engine, err);
		if (!rc)
			rc = node_machine(n, err);
	}
	if (!rc)
		rc = head_machines(f, err);
	if (rc) {
		sf_fleet_sim_free(f);
		return rc;
	}
	*out = f;
	return 0;
}

static void cut(struct sim_conn *n)
{
	n->half_open = false;
	sf_link_free(n->hl);
	sf_link_free(n->nl);
	n->hl = n->nl = NULL;
	n->head_open = n->node_open = n->closing = false;
	n->link_id = 0;
}

void sf_fleet_sim_free(struct sf_fleet_sim *f)
{
	if (!f)
		return;
	for (uint32_t i = 0; i < n_all(f); i++) {
		for (uint32_t k = 0; k < SF_FLEET_SIM_MAX_SHARDS; k++) {
			cut(&f->nodes[i].conns[k]);
			free(f->nodes[i].conns[k].asked);
		}
		sf__fleet_shard_free(&f->nodes[i]);
		sf_node_free(f->nodes[i].node);
		if (f->nodes[i].engine)
			sf_engine_free(f->nodes[i].engine);
	}
	for (uint32_t k = 0; k < f->n_shards; k++)
		sf_head_free(f->shards[k].head);
	sf__fleet_pipe_free(f);
	sf__fleet_record_free(f);
	free(f);
}

struct sf_head *sf_fleet_sim_head(struct sf_fleet_sim *f) { return f->shards[0].head; }
struct sf_head *sf_fleet_sim_head_shard(struct sf_fleet_sim *f, uint32_t k)
{
	return k < f->n_shards ? f->shards[k].head : NULL;
}
uint32_t sf_fleet_sim_shards(const struct sf_fleet_sim *f) { return f->n_shards; }
uint32_t sf_fleet_sim_shard_of(const struct sf_fleet_sim *f, uint64_t sid)
{
	return (uint32_t)(sid % f->n_shards);
}
struct sf_node *sf_fleet_sim_node(struct sf_fleet_sim *f, uint32_t i) { return f->nodes[i].node; }
uint64_t sf_fleet_sim_now(const struct sf_fleet_sim *f) { return f->now; }
const struct sf_sim_config *sf_fleet_sim_engine(const struct sf_fleet_sim *f)
{
	return &f->cfg.engine;
}

void sf_fleet_sim_set_version(struct sf_fleet_sim *f, uint32_t i, uint32_t version_max)
{
	f->nodes[i].version_max = version_max;
}

void sf_fleet_sim_set_digest(struct sf_fleet_sim *f, uint32_t i, uint64_t digest)
{
	f->nodes[i].digest = digest;
}

void sf_fleet_sim_tap(struct sf_fleet_sim *f, sf_fleet_tap_fn fn, void *arg)
{
	f->tap = fn;
	f->tap_arg = arg;
}

/* Tells both machines their ends closed (those that were open). The head dials a stage
 * again after any close (headd's back-off); a fleet node as the head asks or the run does. */
static void closed(struct sf_fleet_sim *f, struct sim_conn *c, const struct sf_err *why)
{
	struct sim_node *n = c->n;
	if (c->head_open && n->stage)
		sf__fleet_pipe_down(f, n);
	else if (c->head_open)
		sf_head_link_down(f->shards[c->shard].head, n->index, c->link_id, why, f->now);
	if (n->stage && f->cfg.redial_after_ms)
		c->redial_at = f->now + f->cfg.redial_after_ms;
	if (c->node_open)
		sf_node_link_closed(n->node, c->link_id, f->now);
	c->head_open = c->node_open = false;
	c->closing = true;
}

/* Takes what one end has to say and hands it to its machine. */
static void drain(struct sf_fleet_sim *f, struct sim_conn *c, bool head_end)
{
	struct sim_node *n = c->n;
	struct sf_head *head = f->shards[c->shard].head;
	struct sf_link *l = head_end ? c->hl : c->nl;
	struct sf_link_event ev;
	while (!c->closing && sf_link_poll(l, f->now, &ev) != SF_LINK_EV_NONE) {
		if (ev.kind == SF_LINK_EV_CLOSED) {
			closed(f, c, &ev.err);
		} else if (ev.kind == SF_LINK_EV_OPEN && head_end) {
			c->head_open = true;
			if (n->stage)
				sf__fleet_pipe_up(f, n);
			else
				sf_head_link_up(head, n->index, c->link_id, sf_link_peer(l), f->now);
		} else if (ev.kind == SF_LINK_EV_OPEN) {
			c->node_open = true;
			sf_node_link_open(n->node, c->link_id, sf_link_version(l), f->now);
		} else if (ev.kind == SF_LINK_EV_MSG && head_end && n->stage) {
			sf__fleet_pipe_msg(f, n, ev.msg);
		} else if (ev.kind == SF_LINK_EV_MSG && head_end) {
			if (ev.msg->type == SF_MSG_RECONCILE_ACK)
				check_replay(f, c, &ev.msg->u.reconcile_ack);
			(void)sf_head_on_msg(head, n->index, ev.msg, f->now);
		} else if (ev.kind == SF_LINK_EV_MSG) {
			sf_node_handle(n->node, c->link_id, ev.msg, f->now);
		}
	}
}

static uint64_t splitmix(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t sf_fleet_sim_rand(struct sf_fleet_sim *f) { return splitmix(&f->rng); }

/* A link's faults: the stages' from a stream of their own, so that the fleet's links see
 * the same faults with a pipeline as without one; shard 0's from the fleet's, every other
 * shard's from its own, so that shard 0's see the same with shards as without. */
static uint64_t link_rand(struct sim_conn *c)
{
	if (c->n->stage)
		return splitmix(&c->n->f->stage_rng);
	return c->shard ? splitmix(&c->n->f->shards[c->shard].rng) : sf_fleet_sim_rand(c->n->f);
}

void sf_fleet_sim_faults(struct sf_fleet_sim *f, const struct sf_fleet_faults *faults)
{
	f->faults = faults ? *faults : (struct sf_fleet_faults){ 0 };
	f->rng = f->faults.seed;
	for (uint32_t k = 1; k < f->n_shards; k++)
		f->shards[k].rng = f->faults.seed ^ (0xd6e8feb86659fd93ULL * k);
}

void sf_fleet_sim_pause(struct sf_fleet_sim *f, uint32_t i, uint32_t ms)
{
	if (i < n_all(f))
		f->nodes[i].paused_until = f->now + ms;
}

void sf_fleet_sim_clock_step(struct sf_fleet_sim *f, uint32_t ms) { f->now += ms; }

bool sf_fleet_sim_linked_shard(const struct sf_fleet_sim *f, uint32_t i, uint32_t k)
{
	return i < n_all(f) && k < sf__fleet_n_conns(&f->nodes[i]) && f->nodes[i].conns[k].hl;
}

bool sf_fleet_sim_linked(const struct sf_fleet_sim *f, uint32_t i)
{
	if (i >= n_all(f))
		return false;
	for (uint32_t k = 0; k < sf__fleet_n_conns(&f->nodes[i]); k++)
		if (!f->nodes[i].conns[k].hl)
			return false;
	return true;
}

uint64_t sf_fleet_sim_resets(const struct sf_fleet_sim *f, uint32_t *last_node)
{
	if (last_node)
		*last_node = f->last_reset;
	return f->resets;
}

uint32_t sf_fleet_sim_last_reset_shard(const struct sf_fleet_sim *f) { return f->last_reset_shard; }

static bool paused(const struct sim_node *n) { return n->f->now < n->paused_until; }

bool sf_fleet_sim_up(const struct sf_fleet_sim *f, uint32_t i)
{
	if (i >= n_all(f))
		return false;
	const struct sim_node *n = &f->nodes[i];
	for (uint32_t k = 0; k < sf__fleet_n_conns(n); k++) {
		const struct sim_conn *c = &n->conns[k];
		if (!c->hl || !c->head_open || !c->node_open || c->half_open)
			return false;
	}
	return !paused(n) && f->now >= n->dead_until;
}

void sf_fleet_sim_half_open_shard(struct sf_fleet_sim *f, uint32_t i, uint32_t k)
{
	struct sim_node *n = &f->nodes[i];
	struct sim_conn *c = &n->conns[k];
	if (k >= sf__fleet_n_conns(n) || !c->hl || c->half_open)
		return;
	c->half_open = true;
	if (c->node_open)
		sf_node_link_closed(n->node, c->link_id, f->now);
	c->node_open = false;
}

void sf_fleet_sim_half_open(struct sf_fleet_sim *f, uint32_t i)
{
	for (uint32_t k = 0; k < sf__fleet_n_conns(&f->nodes[i]); k++)
		sf_fleet_sim_half_open_shard(f, i, k);
}

/* Moves what one end queued into the other; returns the bytes moved. With faults, a move
 * carries a random 1..max_chunk bytes, and a clogged direction carries none this step. A
 * stage link carries at most its budget: what was queued when the step began. */
static size_t move(struct sf_fleet_sim *f, struct sim_conn *n, bool to_head)
{
	struct sf_link *from = to_head ? n->nl : n->hl, *to = to_head ? n->hl : n->nl;
	const uint8_t *d;
	size_t len = sf_link_tx(from, &d), moved = 0;
	if (n->half_open) { /* into the void, and nothing out of it */
		if (!to_head && len)
			sf_link_tx_done(from, len);
		return 0;
	}
	if (paused(n->n) || n->clogged[to_head])
		return 0;
	if (n->n->stage && len > n->budget[to_head])
		len = n->budget[to_head];
	if (f->faults.max_chunk && len)
		len = 1 + link_rand(n) % (len < f->faults.max_chunk ? len : f->faults.max_chunk);
	while (moved < len && !n->closing) {
		size_t took = sf_link_recv(to, d + moved, len - moved, f->now);
		moved += took;
		drain(f, n, to_head);
		if (!took)
			break;
	}
	if (!n->closing)
		sf_link_tx_done(from, moved);
	if (n->n->stage)
		n->budget[to_head] -= moved < n->budget[to_head] ? moved : n->budget[to_head];
	return moved;
}

static void settle(struct sf_fleet_sim *f)
{
	for (int round = 0; round < 100000; round++) {
		size_t moved = 0;
		for (uint32_t i = 0; i < n_all(f); i++)
			for (uint32_t k = 0; k < sf__fleet_n_conns(&f->nodes[i]); k++) {
				struct sim_conn *n = &f->nodes[i].conns[k];
				if (!n->hl)
					continue;
				drain(f, n, true);
				if (!n->closing && !paused(n->n) && !n->half_open) /* a stopped process reads nothing */
					drain(f, n, false);
				if (!n->closing)
					moved += move(f, n, false);
				if (!n->closing)
					moved += move(f, n, true);
				if (n->closing)
					cut(n);
			}
		if (!moved)
			return;
	}
}

int sf_fleet_sim_connect_shard(struct sf_fleet_sim *f, uint32_t i, uint32_t k)
{
	struct sim_node *n = &f->nodes[i];
	struct sim_conn *c = &n->conns[k];
	if (k >= sf__fleet_n_conns(n))
		return SF_E_RANGE;
	if (c->hl)
		sf_fleet_sim_drop_shard(f, i, k);
	if (f->now < n->refuse_until) {
		c->redial_at = f->cfg.redial_after_ms ? f->now + f->cfg.redial_after_ms : 0;
		return SF_E_CLOSED; /* connection refused: no link, nothing for the machines */
	}
	struct sf_link_config hc = { .role = SF_ROLE_HEAD, .identity = "head",
				     .silence_ms = f->cfg.silence_ms,
				     .heartbeat_ms = f->cfg.heartbeat_ms };
	struct sf_link_config nc = { .role = SF_ROLE_NODE, .identity = n->label,
				     .version_max = n->version_max };
	sf_engine_model_info(n->engine, &n->model);
	if (n->digest)
		n->model.tokenizer_digest = n->digest;
	sf_node_capacity(n->node, &nc.capacity);
	nc.models = &n->model;
	nc.n_models = 1;
	struct sf_err err;
	c->link_id = ++f->next_link;
	c->redial_at = 0;
	c->budget[0] = c->budget[1] = 0; /* a stage link's first bytes cross at the next step */
	c->hl = sf_link_new(&hc, f->now, &err);
	c->nl = c->hl ? sf_link_new(&nc, f->now, &err) : NULL;
	if (!c->nl) {
		cut(c);
		return err.code;
	}
	settle(f);
	return c->head_open ? 0 : SF_E_CLOSED;
}

int sf_fleet_sim_connect(struct sf_fleet_sim *f, uint32_t i)
{
	int first = 0;
	for (uint32_t k = 0; k < sf__fleet_n_conns(&f->nodes[i]); k++) {
		int rc = sf_fleet_sim_connect_shard(f, i, k);
		if (rc && !first)
			first = rc;
	}
	return first;
}

void sf_fleet_sim_drop_shard(struct sf_fleet_sim *f, uint32_t i, uint32_t k)
{
	struct sim_conn *c = &f->nodes[i].conns[k];
	if (k >= sf__fleet_n_conns(&f->nodes[i]) || !c->hl)
		return;
	const uint8_t *d;
	sf_link_tx_done(c->hl, sf_link_tx(c->hl, &d));
	sf_link_tx_done(c->nl, sf_link_tx(c->nl, &d));
	struct sf_err why;
	sf_err_set(&why, SF_E_CLOSED, "cut by the simulator");
	closed(f, c, &why);
	cut(c);
}

void sf_fleet_sim_drop(struct sf_fleet_sim *f, uint32_t i)
{
	for (uint32_t k = 0; k < sf__fleet_n_conns(&f->nodes[i]); k++)
		sf_fleet_sim_drop_shard(f, i, k);
}

int sf_fleet_sim_restart(struct sf_fleet_sim *f, uint32_t i)
{
	struct sim_node *n = &f->nodes[i];
	struct sf_err err;
	sf_fleet_sim_drop(f, i);
	sf_node_free(n->node);
	n->node = NULL;
	/* A new process: its engine's cache of pages is gone too. */
	sf_engine_free(n->engine);
	n->engine = NULL;
	int rc = sf_sim_engine_new(&f->cfg.engine, &n->engine, &err);
	return rc ? rc : node_machine(n, &err);
}

/* A reset at a random byte offset: part of what each end queued gets through, then the cut. */
static void reset(struct sf_fleet_sim *f, struct sim_conn *c)
{
	uint32_t keep = f->faults.max_chunk;
	f->resets++;
	f->last_reset = c->n->index;
	f->last_reset_shard = c->shard;
	f->faults.max_chunk = 1 + (uint32_t)(link_rand(c) % 4096);
	c->clogged[0] = c->clogged[1] = false;
	if (!paused(c->n)) {
		(void)move(f, c, false);
		if (!c->closing && c->hl)
			(void)move(f, c, true);
	}
	f->faults.max_chunk = keep;
	if (c->closing)
		cut(c);
	else
		sf_fleet_sim_drop_shard(f, c->n->index, c->shard);
	if (f->cfg.redial_after_ms)
		c->redial_at = f->now + f->cfg.redial_after_ms;
}

static void network_faults(struct sf_fleet_sim *f)
{
	for (uint32_t i = 0; i < n_all(f); i++)
		for (uint32_t k = 0; k < sf__fleet_n_conns(&f->nodes[i]); k++) {
			struct sim_conn *c = &f->nodes[i].conns[k];
			for (int d = 0; d < 2; d++)
				c->clogged[d] = f->faults.clog_pct &&
						link_rand(c) % 100 < f->faults.clog_pct;
			if (c->hl && f->faults.reset_permille &&
			    link_rand(c) % 1000 < f->faults.reset_permille)
				reset(f, c);
		}
}

/* What a stage link may carry this step: what is queued on it now. */
static void stage_budgets(struct sf_fleet_sim *f)
{
	for (uint32_t i = f->n_nodes; i < n_all(f); i++) {
		struct sim_conn *n = &f->nodes[i].conns[0];
		const uint8_t *d;
		n->budget[0] = n->hl ? sf_link_tx(n->hl, &d) : 0;
		n->budget[1] = n->nl ? sf_link_tx(n->nl, &d) : 0;
	}
}

void sf_fleet_sim_refuse(struct sf_fleet_sim *f, uint32_t i, uint32_t ms)
{
	if (i < n_all(f))
		f->nodes[i].refuse_until = f->now + ms;
}

void sf_fleet_sim_kill(struct sf_fleet_sim *f, uint32_t i, uint32_t ms)
{
	if (i >= n_all(f))
		return;
	(void)sf_fleet_sim_restart(f, i);
	f->nodes[i].refuse_until = f->nodes[i].dead_until = f->now + ms;
}

static void step(struct sf_fleet_sim *f, bool deliver)
{
	f->now++;
	for (uint32_t i = 0; i < n_all(f); i++)
		if (!paused(&f->nodes[i]) && f->now >= f->nodes[i].dead_until)
			sf_node_tick(f->nodes[i].node, f->now);
	for (uint32_t k = 0; k < f->n_shards; k++)
		sf_head_tick(f->shards[k].head, f->now);
	if (f->pipe)
		sf_pipe_tick(f->pipe, f->now);
	stage_budgets(f);
	network_faults(f);
	for (uint32_t i = 0; i < n_all(f); i++)
		for (uint32_t k = 0; k < sf__fleet_n_conns(&f->nodes[i]); k++) {
			struct sim_conn *c = &f->nodes[i].conns[k];
			uint64_t *drop = i < f->n_nodes ? &f->shards[k].drops[i] : NULL;
			if (drop && *drop && *drop == c->link_id) {
				sf_fleet_sim_drop_shard(f, i, k); /* the head already counts it closed */
				if (f->cfg.redial_after_ms)
					c->redial_at = f->now + f->cfg.redial_after_ms;
			}
			if (drop)
				*drop = 0;
			if (c->redial_at && f->now >= c->redial_at && !c->hl)
				(void)sf_fleet_sim_connect_shard(f, i, k);
		}
	if (deliver)
		settle(f);
}

void sf_fleet_sim_run(struct sf_fleet_sim *f, uint32_t ms)
{
	for (uint32_t i = 0; i < ms; i++)
		step(f, true);
}

void sf_fleet_sim_run_stalled(struct sf_fleet_sim *f, uint32_t ms)
{
	for (uint32_t i = 0; i < ms; i++)
		step(f, false);
}

bool sf_fleet_sim_run_until(struct sf_fleet_sim *f, bool (*done)(struct sf_fleet_sim *, void *),
			    void *arg, uint32_t max_ms)
{
	for (uint32_t i = 0; i < max_ms; i++) {
		if (done(f, arg))
			return true;
		step(f, true);
	}
	return done(f, arg);
}
