/* The head's state operations' test fixture, shared by test_state_ops.c (the requests) and
 * test_state_ops_blob.c (their blobs): real node machines on the simulated engine, each with a
 * real blob store; what the head sends goes through the wire codec (at the link's frame
 * limit) into sf_node, and the node's answers come back the same way. */
#ifndef SF_TEST_STATE_OPS_FX_H
#define SF_TEST_STATE_OPS_FX_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <superfluid/sim_engine.h>

#include "head/state_ops.h"
#include "node/blob_store.h"
#include "node/node.h"

#define FX_UNUSED __attribute__((unused))

#define N_NODES 2
#define MAX_Q 512

struct queue {
	struct sf_msg msgs[MAX_Q];
	uint32_t node[MAX_Q];
	int n, next;
};

struct fx {
	struct sf_arena arena;
	char dir[N_NODES][64];
	struct sf_blob_store *store[N_NODES];
	struct sf_engine *engine[N_NODES];
	struct sf_node *node[N_NODES];
	struct sf_model_info info[N_NODES];
	uint64_t link[N_NODES];  /* the node's current link id */
	uint32_t payload[N_NODES]; /* the link's frame payload limit */
	struct sf_blob_cache *cache;
	struct sf_state_ops *so;
	struct queue to_nodes;
	uint32_t answering;
	uint32_t counts[0x100];  /* messages sent to nodes by type's low byte */
	uint32_t chunk_lens[64], n_chunks;
	uint64_t chunk_offs[64];
	/* what the caller got */
	uint64_t seg_seq[4096];
	uint32_t n_segs;
	char text[65536];
	size_t text_len;
	int n_dones, rc;
	uint64_t done_ticket;
	char result[65536];
	size_t result_len;
	char msg[2048];
	uint64_t now;
	bool paced; /* io->unsent: the chunk bytes queued and not yet delivered */
};

static FX_UNUSED struct sf_msg *push(struct fx *f, uint32_t node, uint16_t type,
				     const void *msg, uint32_t limit, struct sf_msg *into)
{
	struct sf_buf b;
	struct sf_err err;
	sf_buf_init(&b, 64u << 20);
	if (sf_msg_encode(&b, type, msg, 3, limit, &err))
		fail_msg("unencodable %s at a %u byte limit: %s", sf_msg_name(type), limit, err.msg);
	assert_int_equal(sf_msg_decode(type, sf_buf_head(&b) + SF_FRAME_HDR_LEN,
				       sf_buf_used(&b) - SF_FRAME_HDR_LEN, 3, &f->arena, into, &err),
			 0);
	sf_buf_free(&b);
	return into;
}

static FX_UNUSED int head_send(void *arg, uint32_t node, uint16_t type, const void *msg)
{
	struct fx *f = arg;
	assert_true(node < N_NODES);
	assert_true(f->to_nodes.n < MAX_Q);
	struct queue *q = &f->to_nodes;
	push(f, node, type, msg, f->payload[node] ? f->payload[node] : SF_FRAME_PAYLOAD_MAX,
	     &q->msgs[q->n]);
	q->node[q->n++] = node;
	f->counts[type & 0xff]++;
	if (type == SF_MSG_XFER_CHUNK && f->n_chunks < 64) {
		const struct sf_xfer_chunk *c = msg;
		f->chunk_offs[f->n_chunks] = c->offset;
		f->chunk_lens[f->n_chunks++] = c->data_len;
	}
	return 0;
}

static FX_UNUSED size_t head_unsent(void *arg, uint32_t node)
{
	struct fx *f = arg;
	size_t n = 0;
	for (int i = f->to_nodes.next; i < f->to_nodes.n; i++)
		if (f->to_nodes.node[i] == node && f->to_nodes.msgs[i].type == SF_MSG_XFER_CHUNK)
			n += f->to_nodes.msgs[i].u.xfer_chunk.data_len;
	return n;
}

/* The node's answers go straight to the head, as a link delivers them in order. */
static FX_UNUSED int node_send(void *arg, uint64_t link, uint16_t type, const void *msg)
{
	struct fx *f = arg;
	struct sf_msg m;
	if (link != f->link[f->answering])
		return 0;
	push(f, f->answering, type, msg, SF_FRAME_PAYLOAD_MAX, &m);
	bool ours = sf_state_ops_on_msg(f->so, f->answering, &m, f->now);
	assert_int_equal(ours, type == SF_MSG_XFER_RESULT || type == SF_MSG_STATE_OP_SEGMENT ||
			       type == SF_MSG_STATE_OP_RESP);
	return 0;
}

static FX_UNUSED void on_segment(void *arg, uint64_t ticket, const struct sf_segment *seg)
{
	struct fx *f = arg;
	assert_true(f->n_segs < 4096);
	f->seg_seq[f->n_segs++] = seg->seq;
	if (f->text_len)
		f->text[f->text_len++] = ' ';
	assert_true(f->text_len + seg->text_len < sizeof(f->text));
	memcpy(f->text + f->text_len, seg->text, seg->text_len);
	f->text_len += seg->text_len;
	f->text[f->text_len] = 0;
}

static FX_UNUSED void on_done(void *arg, uint64_t ticket, int rc, const uint8_t *result,
			      size_t len, const char *msg)
{
	struct fx *f = arg;
	f->n_dones++;
	f->rc = rc;
	f->done_ticket = ticket;
	if (len > sizeof(f->result) - 1)
		len = sizeof(f->result) - 1;
	if (len)
		memcpy(f->result, result, len);
	f->result[len] = 0;
	f->result_len = len;
	snprintf(f->msg, sizeof(f->msg), "%s", msg ? msg : "");
	if (rc)
		assert_non_null(msg);
}

static FX_UNUSED int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct sf_err err;
	sf_arena_init(&f->arena, 512u << 20);
	f->now = 5000;
	for (int i = 0; i < N_NODES; i++) {
		snprintf(f->dir[i], sizeof(f->dir[i]), "/tmp/sf-stops-XXXXXX");
		assert_non_null(mkdtemp(f->dir[i]));
		assert_int_equal(sf_blob_store_open(&f->store[i], f->dir[i], 0, &err), 0);
		struct sf_sim_config sim;
		sf_sim_config_default(&sim);
		assert_int_equal(sf_sim_engine_new(&sim, &f->engine[i], &err), 0);
		struct sf_node_io nio = { .arg = f, .send = node_send };
		struct sf_node_config ncfg = { .max_sessions = 4, .blobs = f->store[i] };
		assert_int_equal(sf_node_new(&f->node[i], &ncfg, f->engine[i], &nio, f->now, &err), 0);
		sf_engine_model_info(f->engine[i], &f->info[i]);
	}
	f->cache = sf_blob_cache_new(64u << 20);
	struct sf_state_ops_config cfg = { .max_nodes = 8, .timeout_ms = 30000 };
	struct sf_state_ops_io io = { .arg = f, .send = head_send, .segment = on_segment,
				      .done = on_done };
	assert_int_equal(sf_state_ops_new(&f->so, &cfg, &io, f->cache, &err), 0);
	*state = f;
	return 0;
}

/* The same with paced blobs, and a cache for blobs over the window. */
static FX_UNUSED int setup_paced(void **state)
{
	setup(state);
	struct fx *f = *state;
	struct sf_err err;
	sf_state_ops_free(f->so);
	sf_blob_cache_free(f->cache);
	f->cache = sf_blob_cache_new(128u << 20);
	f->paced = true;
	struct sf_state_ops_config cfg = { .max_nodes = 8, .timeout_ms = 30000 };
	struct sf_state_ops_io io = { .arg = f, .send = head_send, .segment = on_segment,
				      .done = on_done, .unsent = head_unsent };
	assert_int_equal(sf_state_ops_new(&f->so, &cfg, &io, f->cache, &err), 0);
	return 0;
}

static FX_UNUSED int teardown(void **state)
{
	struct fx *f = *state;
	sf_state_ops_free(f->so);
	struct sf_blob_cache_stats st;
	sf_blob_cache_stats(f->cache, &st);
	assert_int_equal(st.pinned, 0); /* every request let go of its blobs */
	sf_blob_cache_free(f->cache);
	for (int i = 0; i < N_NODES; i++) {
		sf_node_free(f->node[i]);
		sf_engine_free(f->engine[i]);
		sf_blob_store_close(f->store[i]);
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir[i]);
		assert_int_equal(system(cmd), 0);
	}
	sf_arena_free(&f->arena);
	free(f);
	return 0;
}

/* Node i's link opens (a new link id each time) with its real handshake. */
static FX_UNUSED void up(struct fx *f, uint32_t i)
{
	static char ids[N_NODES][8];
	snprintf(ids[i], sizeof(ids[i]), "n%u", i);
	f->link[i]++;
	sf_node_link_open(f->node[i], f->link[i], 3, f->now);
	struct sf_link_peer p = { .version = 3, .identity = ids[i], .models = &f->info[i],
				  .n_models = 1 };
	sf_state_ops_node_up(f->so, i, &p, f->payload[i], f->now);
}

static FX_UNUSED void down(struct fx *f, uint32_t i)
{
	sf_node_link_closed(f->node[i], f->link[i], f->now);
	sf_state_ops_node_down(f->so, i, f->now);
}

static FX_UNUSED int pending(const struct fx *f)
{
	return f->to_nodes.n - f->to_nodes.next;
}

/* Hands every queued message to its node and ticks the nodes while they have work due (a
 * state operation runs in steps, one a tick); the answers come back at once. */
static FX_UNUSED void deliver_all(struct fx *f)
{
	for (bool busy = true; busy;) {
		busy = false;
		while (pending(f)) {
			int k = f->to_nodes.next++;
			uint32_t node = f->to_nodes.node[k];
			f->answering = node;
			sf_node_handle(f->node[node], f->link[node], &f->to_nodes.msgs[k], f->now);
		}
		f->to_nodes.n = f->to_nodes.next = 0;
		for (uint32_t i = 0; i < N_NODES; i++) {
			if (sf_node_deadline(f->node[i]) > f->now)
				continue;
			f->answering = i;
			sf_node_tick(f->node[i], f->now);
			busy = true;
		}
	}
}

static FX_UNUSED void drop_all(struct fx *f)
{
	f->to_nodes.n = f->to_nodes.next = 0;
}

static FX_UNUSED void reset_out(struct fx *f)
{
	f->n_segs = 0;
	f->text_len = 0;
	f->text[0] = 0;
	f->n_dones = 0;
	f->rc = 1;
	f->msg[0] = 0;
	memset(f->counts, 0, sizeof(f->counts));
	f->n_chunks = 0;
}

static FX_UNUSED uint64_t start(struct fx *f, const char *op, const uint8_t sha[32])
{
	struct sf_state_op_call call = { .model = f->info[0].name, .op = op,
					 .blobs = (const uint8_t (*)[32])sha, .n_blobs = sha ? 1 : 0 };
	uint64_t ticket = 0;
	struct sf_err err;
	int rc = sf_state_ops_start(f->so, &call, f->now, &ticket, &err);
	if (rc)
		fail_msg("start: %s", err.msg);
	assert_true(ticket != 0);
	return ticket;
}

static FX_UNUSED void put(struct fx *f, const uint8_t *data, size_t n, uint8_t sha[32])
{
	struct sf_err err;
	assert_int_equal(sf_blob_cache_put(f->cache, data, n, sha, &err), 0);
}

/* What the engine's transcribe gives for data: its segments' texts joined by spaces. */
static FX_UNUSED int collect(void *arg, const struct sf_segment *seg)
{
	uint32_t *n = arg;
	(*n)++;
	return 0;
}

static FX_UNUSED size_t expected(struct fx *f, const uint8_t *data, size_t n, char *out,
				 size_t cap, uint32_t *segs)
{
	struct sf_engine_blob b = { data, n };
	struct sf_engine_op_req req = { .op = "transcribe", .blobs = &b, .n_blobs = 1 };
	size_t len = 0;
	struct sf_err err;
	*segs = 0;
	assert_int_equal(sf_engine_state_op(f->engine[1], &req, collect, segs, (uint8_t *)out,
					    cap - 1, &len, &err), 0);
	out[len] = 0;
	return len;
}

static FX_UNUSED void audio(uint8_t *p, size_t n, uint32_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

#endif
