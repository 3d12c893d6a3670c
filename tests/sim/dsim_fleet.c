/* daemon-sim's daemons: a superfluid-headd and superfluid-noded each as its library runs it
 * (options through the program's own parser, each shard on a loop of the simulated world,
 * what the shards send each other held in their inboxes until the next turn),
 * started, turned, crashed (the world drops the process; its state is freed with no goodbye
 * and its log keeps only what was written) and started again on the same address. */
#include "dsim.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headd/headd.h"
#include "noded/noded.h"
#include "wal/wal_state.h"
#include "superfluid-headd/cmdline.h"
#include "superfluid-noded/cmdline.h"

#define HEAD_PORT 8080
#define NODE_PORT 7001

#define MAX_SHARDS 3

struct dsim_head {
	struct headd_opts o;
	struct headd_proc *p;          /* NULL while the head is down */
	unsigned n;                    /* its shards */
	struct sf_loop *loop[MAX_SHARDS];
	struct headd *d[MAX_SHARDS];
	bool due[MAX_SHARDS];
	char fleet[256], pipeline[128], shards[8];
};

struct dsim_node {
	struct noded_opts o;
	struct noded_proc *p;          /* NULL while the node is down */
	unsigned n;                    /* its shards: links on 1 and 2 relayed to 0's engine */
	struct sf_loop *loop[MAX_SHARDS];
	struct noded *d[MAX_SHARDS];
	bool due[MAX_SHARDS];
	char listen[64], blobs[300], seed[32], shards[12];
};

static struct sockaddr_in addr_of(uint16_t port)
{
	return (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(port),
				     .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
}

void dsim_head_addr(struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in a = addr_of(HEAD_PORT);
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, &a, sizeof(a));
	*len = sizeof(a);
}

static struct sf_loop *new_loop(struct dsim *s)
{
	struct sf_loop_config lc = { .io = SF_IO_SIM, .sim = s->world, .quiet = true };
	struct sf_loop *loop;
	struct sf_err err;
	if (sf_loop_new(&loop, &lc, &err)) {
		dsim_broke(s, "no simulated loop: %s", err.msg);
		return NULL;
	}
	return loop;
}

static int listen_on(struct dsim *s, uint16_t port)
{
	struct sockaddr_in a = addr_of(port);
	int fd = sf_simnet_listen(s->world, (struct sockaddr *)&a, sizeof(a));
	if (fd < 0)
		dsim_broke(s, "port %u is taken in the world", port);
	return fd;
}

int dsim_head_start(struct dsim *s)
{
	struct dsim_head *h = s->head;
	if (!h) {
		h = s->head = calloc(1, sizeof(*h));
		if (!h)
			return -1;
		size_t at = 0;
		for (uint32_t k = 0; k < s->n_nodes; k++)
			at += (size_t)snprintf(h->fleet + at, sizeof(h->fleet) - at, "%s127.0.0.1:%u",
					       k ? "," : "", NODE_PORT + k);
		at = 0;
		for (uint32_t k = 0; k < s->n_stages; k++)
			at += (size_t)snprintf(h->pipeline + at, sizeof(h->pipeline) - at,
					       "%s127.0.0.1:%u", k ? "," : "",
					       NODE_PORT + s->n_nodes + k);
		h->n = s->head_shards;
		snprintf(h->shards, sizeof(h->shards), "%u", h->n);
		char *argv[32] = { "superfluid-headd", "--fleet", h->fleet, "--shards", h->shards,
				   "--listen-http", "127.0.0.1:8080", "--replace-after-ms", "1500",
				   "--silence-ms", "1200", "--heartbeat-ms", "300" };
		int argc = 13;
		if (s->n_stages) {
			argv[argc++] = "--pipeline";
			argv[argc++] = h->pipeline;
		}
		if (s->wal) {
			argv[argc++] = "--wal-dir";
			argv[argc++] = s->dir;
			argv[argc++] = "--wal-keep-s"; /* what nobody fetched goes within the run */
			argv[argc++] = "8";
		}
		if (headd_opts_parse(&h->o, argc, argv) != HEADD_PARSE_RUN) {
			dsim_broke(s, "the head's options were refused");
			return -1;
		}
		h->o.io = SF_IO_SIM;
	}
	int fds[MAX_SHARDS];
	struct sockaddr_in a = addr_of(HEAD_PORT);
	for (unsigned k = 0; k < h->n; k++) {
		h->loop[k] = new_loop(s);
		fds[k] = h->loop[k] ? sf_simnet_listen_shared(s->world, (struct sockaddr *)&a,
							       sizeof(a)) : -1;
		if (fds[k] < 0) {
			dsim_broke(s, "the head's shard %u has no loop or socket", k);
			return -1;
		}
	}
	h->p = headd_solo_new(&h->o, h->n, fds, s->token, s->token_len);
	if (!h->p) {
		dsim_broke(s, "the head was not made (no memory, or its log's layout)");
		return -1;
	}
	for (unsigned k = 0; k < h->n; k++) {
		h->d[k] = headd_solo_shard(h->p, k);
		int rc = headd_shard_start(h->d[k], h->loop[k]);
		if (rc) {
			dsim_broke(s, "the head's shard %u did not start (exit status %d)", k, rc);
			return -1;
		}
	}
	for (unsigned k = 0; k < h->n; k++)
		h->due[k] = headd_tick(h->d[k]);
	return 0;
}

int dsim_node_start(struct dsim *s, uint32_t k)
{
	struct dsim_node *n = s->nodes[k];
	if (!n) {
		n = s->nodes[k] = calloc(1, sizeof(*n));
		if (!n)
			return -1;
		snprintf(n->listen, sizeof(n->listen), "127.0.0.1:%u", NODE_PORT + k);
		snprintf(n->blobs, sizeof(n->blobs), "%s/blobs-%u", s->dir, k);
		snprintf(n->seed, sizeof(n->seed), "%llu", (unsigned long long)s->engine.seed);
		n->n = s->node_shards[k] ? s->node_shards[k] : 1;
		snprintf(n->shards, sizeof(n->shards), "%u", n->n);
		char *argv[] = { "superfluid-noded", "--listen", n->listen, "--engine", "sim",
				 "--shards", n->shards, "--sim-seed", n->seed, "--sim-tokens-per-s", "400",
				 "--silence-ms", "1200", "--heartbeat-ms", "300", "--blob-dir",
				 n->blobs, "--session-orphan-s", "3", "--max-sessions", "64" };
		if (noded_opts_parse(&n->o, (int)(sizeof(argv) / sizeof(argv[0])), argv) !=
		    NODED_PARSE_RUN) {
			dsim_broke(s, "node %u's options were refused", k);
			return -1;
		}
		n->o.io = SF_IO_SIM;
	}
	/* One shard listens alone; several share the address (SO_REUSEPORT), each dial drawn. */
	int fds[MAX_SHARDS];
	struct sockaddr_in a = addr_of((uint16_t)(NODE_PORT + k));
	for (unsigned j = 0; j < n->n; j++) {
		n->loop[j] = new_loop(s);
		if (!n->loop[j])
			return -1;
		fds[j] = n->n == 1 ? listen_on(s, (uint16_t)(NODE_PORT + k))
				   : sf_simnet_listen_shared(s->world, (struct sockaddr *)&a, sizeof(a));
		if (fds[j] < 0) {
			dsim_broke(s, "node %u's shard %u has no socket", k, j);
			return -1;
		}
	}
	char identity[32];
	snprintf(identity, sizeof(identity), "node-%u", k);
	n->p = noded_solo_new(&n->o, n->n, identity, fds, s->token, s->token_len);
	if (!n->p) {
		dsim_broke(s, "no memory for node %u", k);
		return -1;
	}
	for (unsigned j = 0; j < n->n; j++) { /* shard 0 first: it makes the engine */
		n->d[j] = noded_solo_shard(n->p, j);
		int rc = noded_shard_start(n->d[j], n->loop[j]);
		if (rc) {
			dsim_broke(s, "node %u's shard %u did not start (exit status %d)", k, j, rc);
			return -1;
		}
	}
	for (unsigned j = 0; j < n->n; j++) {
		noded_shard_begin(n->d[j]);
		n->due[j] = noded_tick(n->d[j]);
	}
	return 0;
}

bool dsim_head_up(const struct dsim *s)
{
	return s->head && s->head->p;
}

bool dsim_node_up(const struct dsim *s, uint32_t k)
{
	return s->nodes[k] && s->nodes[k]->p;
}

bool dsim_daemons_turn(struct dsim *s)
{
	bool due = false;
	struct dsim_head *h = s->head;
	for (unsigned k = 0; dsim_head_up(s) && k < h->n; k++) {
		if (headd_shard_turn(h->d[k], &h->due[k]))
			dsim_broke(s, "the head's shard %u stopped on its own (a fatal error: see "
				   "its log)", k);
		due |= headd_solo_inbox(h->p, k);
		due |= h->due[k] || sf_loop_busy(h->loop[k]);
	}
	for (uint32_t k = 0; k < s->n_nodes + s->n_stages; k++) {
		struct dsim_node *n = s->nodes[k];
		for (unsigned j = 0; dsim_node_up(s, k) && j < n->n; j++) {
			if (noded_shard_turn(n->d[j], &n->due[j]))
				dsim_broke(s, "node %u's shard %u: its loop failed", k, j);
			due |= noded_solo_inbox(n->p, j);
			due |= n->due[j] || sf_loop_busy(n->loop[j]);
		}
	}
	return due;
}

uint64_t dsim_daemons_next_timer(const struct dsim *s)
{
	uint64_t t = UINT64_MAX;
	for (unsigned k = 0; dsim_head_up(s) && k < s->head->n; k++)
		if (sf_loop_next_timer(s->head->loop[k]) < t)
			t = sf_loop_next_timer(s->head->loop[k]);
	for (uint32_t k = 0; k < s->n_nodes + s->n_stages; k++)
		for (unsigned j = 0; dsim_node_up(s, k) && j < s->nodes[k]->n; j++)
			if (sf_loop_next_timer(s->nodes[k]->loop[j]) < t)
				t = sf_loop_next_timer(s->nodes[k]->loop[j]);
	return t;
}

static void head_free(struct dsim *s, bool crash)
{
	struct dsim_head *h = s->head;
	if (!dsim_head_up(s))
		return;
	/* The process: every shard at once. */
	for (unsigned k = 0; k < h->n; k++) {
		if (h->d[k]->head) {
			struct sf_head_stats st;
			sf_head_stats(h->d[k]->head, &st);
			s->gaps += st.gaps;
		}
		if (crash && h->loop[k])
			sf_simnet_crash(s->world, h->loop[k]);
		h->d[k]->wal.abandon = crash;
	}
	for (unsigned k = 0; k < h->n; k++) {
		sf_loop_free(h->loop[k]);
		h->loop[k] = NULL;
	}
	for (unsigned k = 0; k < h->n; k++) {
		headd_shard_fini(h->d[k]);
		h->d[k] = NULL;
	}
	headd_solo_free(h->p);
	h->p = NULL;
}

static void node_free(struct dsim *s, uint32_t k, bool crash)
{
	struct dsim_node *n = s->nodes[k];
	if (!dsim_node_up(s, k))
		return;
	/* The process: every shard at once. */
	for (unsigned j = 0; crash && j < n->n; j++)
		if (n->loop[j])
			sf_simnet_crash(s->world, n->loop[j]);
	for (unsigned j = 0; j < n->n; j++) {
		sf_loop_free(n->loop[j]);
		n->loop[j] = NULL;
	}
	for (unsigned j = 0; j < n->n; j++) {
		if (n->d[j])
			noded_shard_fini(n->d[j]);
		n->d[j] = NULL;
	}
	noded_solo_free(n->p);
	n->p = NULL;
}

void dsim_head_crash(struct dsim *s)
{
	for (uint32_t i = 0; i < s->n_reqs; i++) /* their answers break with the head */
		if (s->reqs[i].st == DR_SENT)
			s->reqs[i].cut_by_head = true;
	head_free(s, true);
}

void dsim_node_crash(struct dsim *s, uint32_t k)
{
	node_free(s, k, true);
}

uint32_t dsim_head_sessions(const struct dsim *s)
{
	uint32_t n = 0;
	for (unsigned k = 0; dsim_head_up(s) && k < s->head->n; k++) {
		struct sf_head_stats st;
		sf_head_stats(s->head->d[k]->head, &st);
		n += st.sessions;
	}
	return n;
}

uint64_t dsim_head_gaps(const struct dsim *s)
{
	uint64_t n = s->gaps;
	for (unsigned k = 0; dsim_head_up(s) && k < s->head->n; k++) {
		struct sf_head_stats st;
		sf_head_stats(s->head->d[k]->head, &st);
		n += st.gaps;
	}
	return n;
}

bool dsim_head_wal_view(const struct dsim *s, struct dsim_wal_view *v)
{
	memset(v, 0, sizeof(*v));
	if (!dsim_head_up(s) || !s->head->d[0]->wal.st)
		return false;
	const struct sf_wal_session *ws = sf_wal_state_first(s->head->d[0]->wal.st);
	if (!ws || !ws->n_gens)
		return false;
	const struct sf_wal_gen *g = ws->gens[ws->n_gens - 1];
	*v = (struct dsim_wal_view){ .any = true, .sid = ws->rec.session_id,
				     .gid = g->rec.generation_id, .epoch = ws->epoch,
				     .run_epoch = g->epoch, .tokens = g->n_tokens };
	const uint32_t *t;
	bool ended;
	uint32_t reason;
	if (sf_head_generation(s->head->d[0]->head, v->sid, v->gid, &t, &v->head_tokens, &ended,
			       &reason))
		v->head_tokens = 0;
	return true;
}

bool dsim_head_answering(const struct dsim *s)
{
	for (unsigned k = 0; dsim_head_up(s) && k < s->head->n; k++)
		if (s->head->d[k]->api.reqs)
			return true;
	return false;
}

/* Node k's machine's numbers (all 0 while it is down). */
static struct sf_node_stats node_stats(const struct dsim *s, uint32_t k)
{
	struct sf_node_stats st = { 0 };
	if (dsim_node_up(s, k))
		sf_node_stats(s->nodes[k]->d[0]->node, &st);
	return st;
}

uint32_t dsim_node_sessions(const struct dsim *s, uint32_t k)
{
	return node_stats(s, k).sessions;
}

uint32_t dsim_node_pipes(const struct dsim *s, uint32_t k)
{
	return node_stats(s, k).pipes;
}

void dsim_daemons_free(struct dsim *s)
{
	if (s->head) {
		head_free(s, false);
		headd_opts_free(&s->head->o);
		free(s->head);
		s->head = NULL;
	}
	for (uint32_t k = 0; k < s->n_nodes + s->n_stages; k++) {
		if (!s->nodes[k])
			continue;
		node_free(s, k, false);
		noded_opts_free(&s->nodes[k]->o);
		free(s->nodes[k]);
		s->nodes[k] = NULL;
	}
}
