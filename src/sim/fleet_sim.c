/* The in-memory fleet's machines, connections and clock. Each step the nodes tick, the head
 * ticks, and the bytes each link queued move to the other end until nothing moves; a
 * stalled step leaves them queued. Cutting a connection throws away what was queued. A
 * pipeline stage's link moves only what was queued on it when the step began. */
#include "sim/fleet_sim_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int node_send(void *arg, uint64_t link_id, uint16_t type, const void *msg)
{
	struct sim_node *n = arg;
	struct sf_err err;
	if (!n->nl || link_id != n->link_id || !n->node_open)
		return SF_E_STATE;
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
		return sf_link_send(n->nl, type, &st, n->f->now, &err);
	}
	return sf_link_send(n->nl, type, msg, n->f->now, &err);
}

/* The generations a RECONCILE lists, and where the head wants each to go on. */
static void note_asked(struct sim_node *n, const struct sf_reconcile *m)
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
static void check_replay(struct sf_fleet_sim *f, struct sim_node *n, const struct sf_reconcile_ack *m)
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
					 "and let go, a gap", n->index, a->gid, a->sid,
					 h->ranges[r].from_seq, a->next);
				return;
			}
	}
}

const char *sf_fleet_sim_why(const struct sf_fleet_sim *f) { return f->why; }

/* Fleet nodes and pipeline stages: every machine with a link. */
static uint32_t n_all(const struct sf_fleet_sim *f) { return f->n_nodes + f->n_stages; }

static int head_send(void *arg, uint64_t link_id, uint16_t type, const void *msg)
{
	struct sf_fleet_sim *f = arg;
	struct sf_err err;
	for (uint32_t i = 0; i < f->n_nodes; i++) {
		struct sim_node *n = &f->nodes[i];
		if (!n->hl || n->link_id != link_id || !n->head_open)
			continue;
		if (f->tap)
			f->tap(f->tap_arg, i, type, msg);
		if (type == SF_MSG_RECONCILE)
			note_asked(n, msg);
		return sf_link_send(n->hl, type, msg, f->now, &err);
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

int sf__fleet_head_machine(struct sf_fleet_sim *f, uint64_t first_id, struct sf_err *err)
{
	struct sf_head_config hc = f->cfg.head;
	if (first_id)
		hc.first_id = first_id;
	struct sf_head_io hio = { .arg = f, .send = head_send,
				  .event = f->wal ? sf__fleet_wal_event : sf__fleet_record };
	int rc = sf_head_new(&f->head, &hc, &hio, f->now, err);
	for (uint32_t i = 0; !rc && i < f->n_nodes; i++)
		if ((rc = sf_head_node_add(f->head, f->nodes[i].label, err)) >= 0)
			rc = 0;
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
	struct sf_fleet_sim *f = calloc(1, sizeof(*f));
	if (!f)
		return sf_err_set(err, SF_E_NOMEM, "no memory for the simulated fleet");
	f->cfg = *cfg;
	if (cfg->wal)
		f->cfg.head.ack_durable = true; /* watermarks follow what the log has kept */
	f->now = cfg->start_ms ? cfg->start_ms : 1000;
	f->stage_rng = cfg->pipe_seed;
	f->streams = calloc(SF_FLEET_SIM_MAX_STREAMS, sizeof(*f->streams));
	int rc = f->streams ? 0 : sf_err_set(err, SF_E_NOMEM, "no memory for the streams");
	if (!rc && cfg->wal)
		rc = sf__fleet_wal_new(f, err);
	for (uint32_t i = 0; !rc && i < cfg->n_nodes + cfg->pipe_stages; i++) {
		struct sim_node *n = &f->nodes[i];
		n->f = f;
		n->index = i;
		n->stage = i >= cfg->n_nodes;
		n->stage_k = n->stage ? i - cfg->n_nodes : 0;
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
		rc = sf__fleet_head_machine(f, 0, err);
	if (rc) {
		sf_fleet_sim_free(f);
		return rc;
	}
	*out = f;
	return 0;
}

static void cut(struct sim_node *n)
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
		cut(&f->nodes[i]);
		free(f->nodes[i].asked);
		sf_node_free(f->nodes[i].node);
		if (f->nodes[i].engine)
			sf_engine_free(f->nodes[i].engine);
	}
	sf_head_free(f->head);
	sf__fleet_pipe_free(f);
	sf__fleet_wal_free(f);
	sf__fleet_record_free(f);
	free(f);
}

struct sf_head *sf_fleet_sim_head(struct sf_fleet_sim *f) { return f->head; }
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
static void closed(struct sf_fleet_sim *f, struct sim_node *n, const struct sf_err *why)
{
	if (n->head_open && n->stage)
		sf__fleet_pipe_down(f, n);
	else if (n->head_open)
		sf_head_link_down(f->head, n->index, n->link_id, why, f->now);
	if (n->stage && f->cfg.redial_after_ms)
		n->redial_at = f->now + f->cfg.redial_after_ms;
	if (n->node_open)
		sf_node_link_closed(n->node, n->link_id, f->now);
	n->head_open = n->node_open = false;
	n->closing = true;
}

/* Takes what one end has to say and hands it to its machine. */
static void drain(struct sf_fleet_sim *f, struct sim_node *n, bool head_end)
{
	struct sf_link *l = head_end ? n->hl : n->nl;
	struct sf_link_event ev;
	while (!n->closing && sf_link_poll(l, f->now, &ev) != SF_LINK_EV_NONE) {
		if (ev.kind == SF_LINK_EV_CLOSED) {
			closed(f, n, &ev.err);
		} else if (ev.kind == SF_LINK_EV_OPEN && head_end) {
			n->head_open = true;
			if (n->stage)
				sf__fleet_pipe_up(f, n);
			else
				sf_head_link_up(f->head, n->index, n->link_id, sf_link_peer(l), f->now);
		} else if (ev.kind == SF_LINK_EV_OPEN) {
			n->node_open = true;
			sf_node_link_open(n->node, n->link_id, sf_link_version(l), f->now);
		} else if (ev.kind == SF_LINK_EV_MSG && head_end && n->stage) {
			sf__fleet_pipe_msg(f, n, ev.msg);
		} else if (ev.kind == SF_LINK_EV_MSG && head_end) {
			if (ev.msg->type == SF_MSG_RECONCILE_ACK)
				check_replay(f, n, &ev.msg->u.reconcile_ack);
			(void)sf_head_on_msg(f->head, n->index, ev.msg, f->now);
		} else if (ev.kind == SF_LINK_EV_MSG) {
			sf_node_handle(n->node, n->link_id, ev.msg, f->now);
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
 * the same faults with a pipeline as without one. */
static uint64_t link_rand(struct sim_node *n)
{
	return n->stage ? splitmix(&n->f->stage_rng) : sf_fleet_sim_rand(n->f);
}

void sf_fleet_sim_faults(struct sf_fleet_sim *f, const struct sf_fleet_faults *faults)
{
	f->faults = faults ? *faults : (struct sf_fleet_faults){ 0 };
	f->rng = f->faults.seed;
}

void sf_fleet_sim_pause(struct sf_fleet_sim *f, uint32_t i, uint32_t ms)
{
	if (i < n_all(f))
		f->nodes[i].paused_until = f->now + ms;
}

void sf_fleet_sim_clock_step(struct sf_fleet_sim *f, uint32_t ms) { f->now += ms; }

bool sf_fleet_sim_linked(const struct sf_fleet_sim *f, uint32_t i)
{
	return i < n_all(f) && f->nodes[i].hl;
}

uint64_t sf_fleet_sim_resets(const struct sf_fleet_sim *f, uint32_t *last_node)
{
	if (last_node)
		*last_node = f->last_reset;
	return f->resets;
}

static bool paused(const struct sim_node *n) { return n->f->now < n->paused_until; }

bool sf_fleet_sim_up(const struct sf_fleet_sim *f, uint32_t i)
{
	const struct sim_node *n = &f->nodes[i];
	return i < n_all(f) && n->hl && n->head_open && n->node_open && !n->half_open &&
	       !paused(n) && f->now >= n->dead_until;
}

void sf_fleet_sim_half_open(struct sf_fleet_sim *f, uint32_t i)
{
	struct sim_node *n = &f->nodes[i];
	if (!n->hl || n->half_open)
		return;
	n->half_open = true;
	if (n->node_open)
		sf_node_link_closed(n->node, n->link_id, f->now);
	n->node_open = false;
}

/* Moves what one end queued into the other; returns the bytes moved. With faults, a move
 * carries a random 1..max_chunk bytes, and a clogged direction carries none this step. A
 * stage link carries at most its budget: what was queued when the step began. */
static size_t move(struct sf_fleet_sim *f, struct sim_node *n, bool to_head)
{
	struct sf_link *from = to_head ? n->nl : n->hl, *to = to_head ? n->hl : n->nl;
	const uint8_t *d;
	size_t len = sf_link_tx(from, &d), moved = 0;
	if (n->half_open) { /* into the void, and nothing out of it */
		if (!to_head && len)
			sf_link_tx_done(from, len);
		return 0;
	}
	if (paused(n) || n->clogged[to_head])
		return 0;
	if (n->stage && len > n->budget[to_head])
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
	if (n->stage)
		n->budget[to_head] -= moved < n->budget[to_head] ? moved : n->budget[to_head];
	return moved;
}

static void settle(struct sf_fleet_sim *f)
{
	for (int round = 0; round < 100000; round++) {
		size_t moved = 0;
		for (uint32_t i = 0; i < n_all(f); i++) {
			struct sim_node *n = &f->nodes[i];
			if (!n->hl)
				continue;
			drain(f, n, true);
			if (!n->closing && !paused(n) && !n->half_open) /* a stopped process reads nothing */
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

int sf_fleet_sim_connect(struct sf_fleet_sim *f, uint32_t i)
{
	struct sim_node *n = &f->nodes[i];
	if (n->hl)
		sf_fleet_sim_drop(f, i);
	if (f->now < n->refuse_until || f->head_down) { /* no head process: nobody dials */
		n->redial_at = f->cfg.redial_after_ms ? f->now + f->cfg.redial_after_ms : 0;
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
	n->link_id = ++f->next_link;
	n->redial_at = 0;
	n->budget[0] = n->budget[1] = 0; /* a stage link's first bytes cross at the next step */
	n->hl = sf_link_new(&hc, f->now, &err);
	n->nl = n->hl ? sf_link_new(&nc, f->now, &err) : NULL;
	if (!n->nl) {
		cut(n);
		return err.code;
	}
	settle(f);
	return n->head_open ? 0 : SF_E_CLOSED;
}

void sf_fleet_sim_drop(struct sf_fleet_sim *f, uint32_t i)
{
	struct sim_node *n = &f->nodes[i];
	if (!n->hl)
		return;
	const uint8_t *d;
	sf_link_tx_done(n->hl, sf_link_tx(n->hl, &d));
	sf_link_tx_done(n->nl, sf_link_tx(n->nl, &d));
	struct sf_err why;
	sf_err_set(&why, SF_E_CLOSED, "cut by the simulator");
	closed(f, n, &why);
	cut(n);
}

int sf_fleet_sim_restart(struct sf_fleet_sim *f, uint32_t i)
{
	struct sim_node *n = &f->nodes[i];
	struct sf_err err;
	sf_fleet_sim_drop(f, i);
	sf_node_free(n->node);
	n->node = NULL;
	return node_machine(n, &err);
}

/* A reset at a random byte offset: part of what each end queued gets through, then the cut. */
static void reset(struct sf_fleet_sim *f, uint32_t i)
{
	struct sim_node *n = &f->nodes[i];
	uint32_t keep = f->faults.max_chunk;
	f->resets++;
	f->last_reset = i;
	f->faults.max_chunk = 1 + (uint32_t)(link_rand(n) % 4096);
	n->clogged[0] = n->clogged[1] = false;
	if (!paused(n)) {
		(void)move(f, n, false);
		if (!n->closing && n->hl)
			(void)move(f, n, true);
	}
	f->faults.max_chunk = keep;
	if (n->closing)
		cut(n);
	else
		sf_fleet_sim_drop(f, i);
	if (f->cfg.redial_after_ms)
		n->redial_at = f->now + f->cfg.redial_after_ms;
}

static void network_faults(struct sf_fleet_sim *f)
{
	for (uint32_t i = 0; i < n_all(f); i++) {
		struct sim_node *n = &f->nodes[i];
		for (int k = 0; k < 2; k++)
			n->clogged[k] = f->faults.clog_pct &&
					link_rand(n) % 100 < f->faults.clog_pct;
		if (n->hl && f->faults.reset_permille &&
		    link_rand(n) % 1000 < f->faults.reset_permille)
			reset(f, i);
	}
}

/* What a stage link may carry this step: what is queued on it now. */
static void stage_budgets(struct sf_fleet_sim *f)
{
	for (uint32_t i = f->n_nodes; i < n_all(f); i++) {
		struct sim_node *n = &f->nodes[i];
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

static void head_start_again(struct sf_fleet_sim *f)
{
	struct sf_err err;
	f->head_down = false;
	/* Ids past every one the old head used (it numbered from 1, far below 2^40). */
	if (sf__fleet_head_machine(f, (uint64_t)f->crashes << 40, &err)) {
		fprintf(stderr, "fleet_sim: the head does not start again: %s\n", err.msg);
		abort();
	}
	sf__fleet_wal_restore(f);
}

int sf_fleet_sim_head_crash(struct sf_fleet_sim *f, uint32_t down_ms)
{
	if (!f->wal || f->head_down)
		return SF_E_STATE;
	sf__fleet_wal_crash(f); /* what is not durable is gone; the caller checked */
	sf__fleet_pipe_crash(f);
	for (uint32_t i = 0; i < n_all(f); i++) {
		struct sim_node *n = &f->nodes[i];
		if (n->hl) {
			/* The process is gone: the node sees its link close; what was in flight
			 * is lost both ways. */
			const uint8_t *d;
			sf_link_tx_done(n->hl, sf_link_tx(n->hl, &d));
			sf_link_tx_done(n->nl, sf_link_tx(n->nl, &d));
			if (n->node_open)
				sf_node_link_closed(n->node, n->link_id, f->now);
			cut(n);
		}
		if (i < f->n_nodes)
			f->drops[i] = 0;
		n->redial_at = f->cfg.redial_after_ms ? f->now + f->cfg.redial_after_ms : 0;
	}
	sf_head_free(f->head);
	f->head = NULL;
	f->crashes++;
	f->head_down = true;
	f->head_up_at = f->now + down_ms;
	if (!down_ms)
		head_start_again(f);
	return 0;
}

bool sf_fleet_sim_head_up(const struct sf_fleet_sim *f) { return !f->head_down; }
uint32_t sf_fleet_sim_head_crashes(const struct sf_fleet_sim *f) { return f->crashes; }

static void step(struct sf_fleet_sim *f, bool deliver)
{
	f->now++;
	for (uint32_t i = 0; i < n_all(f); i++)
		if (!paused(&f->nodes[i]) && f->now >= f->nodes[i].dead_until)
			sf_node_tick(f->nodes[i].node, f->now);
	if (f->head_down && f->now >= f->head_up_at)
		head_start_again(f);
	if (f->head_down)
		return; /* no head: nodes run on alone, nothing dials */
	if (f->wal)
		sf__fleet_wal_release(f); /* what became durable reaches the caller */
	sf_head_tick(f->head, f->now);
	if (f->pipe)
		sf_pipe_tick(f->pipe, f->now);
	stage_budgets(f);
	network_faults(f);
	for (uint32_t i = 0; i < n_all(f); i++) {
		struct sim_node *n = &f->nodes[i];
		if (i < f->n_nodes && f->drops[i] && f->drops[i] == n->link_id) {
			sf_fleet_sim_drop(f, i); /* the head already counts it closed */
			if (f->cfg.redial_after_ms)
				n->redial_at = f->now + f->cfg.redial_after_ms;
		}
		if (i < f->n_nodes)
			f->drops[i] = 0;
		if (n->redial_at && f->now >= n->redial_at && !n->hl)
			(void)sf_fleet_sim_connect(f, i);
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
