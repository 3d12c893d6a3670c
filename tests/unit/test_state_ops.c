/* The head's state operations against real node machines on the simulated engine, each with
 * a real blob store: what the head sends goes through the wire codec (at the link's frame
 * limit) into sf_node, and the node's answers come back the same way. A blob sent once per
 * link and again after the link went down and up; chunks at the 4 MiB and frame limits;
 * segments in order once each; a refused transfer; the link lost before and after a segment
 * reached the caller; the deadline; forgotten requests. Paced blobs (io->unsent): a blob
 * larger than the window goes out as the link drains, with other requests between its
 * chunks; it goes again whole after its link drops mid-way; a cancel cuts it short. */
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

static struct sf_msg *push(struct fx *f, uint32_t node, uint16_t type, const void *msg,
			   uint32_t limit, struct sf_msg *into)
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

static int head_send(void *arg, uint32_t node, uint16_t type, const void *msg)
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

static size_t head_unsent(void *arg, uint32_t node)
{
	struct fx *f = arg;
	size_t n = 0;
	for (int i = f->to_nodes.next; i < f->to_nodes.n; i++)
		if (f->to_nodes.node[i] == node && f->to_nodes.msgs[i].type == SF_MSG_XFER_CHUNK)
			n += f->to_nodes.msgs[i].u.xfer_chunk.data_len;
	return n;
}

/* The node's answers go straight to the head, as a link delivers them in order. */
static int node_send(void *arg, uint64_t link, uint16_t type, const void *msg)
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

static void on_segment(void *arg, uint64_t ticket, const struct sf_segment *seg)
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

static void on_done(void *arg, uint64_t ticket, int rc, const uint8_t *result, size_t len,
		    const char *msg)
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

static int setup(void **state)
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
static int setup_paced(void **state)
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

static int teardown(void **state)
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
static void up(struct fx *f, uint32_t i)
{
	static char ids[N_NODES][8];
	snprintf(ids[i], sizeof(ids[i]), "n%u", i);
	f->link[i]++;
	sf_node_link_open(f->node[i], f->link[i], 3, f->now);
	struct sf_link_peer p = { .version = 3, .identity = ids[i], .models = &f->info[i],
				  .n_models = 1 };
	sf_state_ops_node_up(f->so, i, &p, f->payload[i], f->now);
}

static void down(struct fx *f, uint32_t i)
{
	sf_node_link_closed(f->node[i], f->link[i], f->now);
	sf_state_ops_node_down(f->so, i, f->now);
}

static int pending(const struct fx *f)
{
	return f->to_nodes.n - f->to_nodes.next;
}

/* Hands every queued message to its node and ticks the nodes while they have work due (a
 * state operation runs in steps, one a tick); the answers come back at once. */
static void deliver_all(struct fx *f)
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

static void drop_all(struct fx *f)
{
	f->to_nodes.n = f->to_nodes.next = 0;
}

static void reset_out(struct fx *f)
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

static uint64_t start(struct fx *f, const char *op, const uint8_t sha[32])
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

static void put(struct fx *f, const uint8_t *data, size_t n, uint8_t sha[32])
{
	struct sf_err err;
	assert_int_equal(sf_blob_cache_put(f->cache, data, n, sha, &err), 0);
}

/* What the engine's transcribe gives for data: its segments' texts joined by spaces. */
static int collect(void *arg, const struct sf_segment *seg)
{
	uint32_t *n = arg;
	(*n)++;
	return 0;
}

static size_t expected(struct fx *f, const uint8_t *data, size_t n, char *out, size_t cap,
		       uint32_t *segs)
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

static void audio(uint8_t *p, size_t n, uint32_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

static void test_transcribe_streams(void **state)
{
	struct fx *f = *state;
	up(f, 0);
	uint8_t data[150], sha[32];
	audio(data, sizeof(data), 1);
	put(f, data, sizeof(data), sha);
	reset_out(f);
	uint64_t t = start(f, "transcribe", sha);
	assert_int_equal(f->counts[SF_MSG_XFER_BEGIN & 0xff], 1);
	assert_int_equal(f->counts[SF_MSG_XFER_CHUNK & 0xff], 1);
	assert_int_equal(f->counts[SF_MSG_XFER_END & 0xff], 1);
	assert_int_equal(f->counts[SF_MSG_STATE_OP_REQ & 0xff], 1);
	assert_int_equal(f->n_dones, 0); /* never from inside start */
	deliver_all(f);
	char want[4096];
	uint32_t segs;
	size_t len = expected(f, data, sizeof(data), want, sizeof(want), &segs);
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->rc, 0);
	assert_int_equal(f->done_ticket, t);
	assert_int_equal(f->n_segs, segs);
	assert_int_equal(segs, 10); /* 16 bytes a segment */
	for (uint32_t i = 0; i < f->n_segs; i++)
		assert_int_equal(f->seg_seq[i], i);
	assert_string_equal(f->text, want);
	assert_int_equal(f->result_len, len);
	assert_string_equal(f->result, want);
	assert_true(sf_blob_has(f->store[0], sha));
	struct sf_state_ops_stats st;
	sf_state_ops_stats(f->so, &st);
	assert_int_equal(st.results[SF_SO_OK], 1);
	assert_int_equal(st.running, 0);
	assert_int_equal(st.blobs_sent, 1);
	assert_int_equal(st.blob_bytes_sent, sizeof(data));
}

static void test_blob_once_per_link(void **state)
{
	struct fx *f = *state;
	up(f, 0);
	uint8_t data[64], sha[32];
	audio(data, sizeof(data), 2);
	put(f, data, sizeof(data), sha);
	reset_out(f);
	start(f, "transcribe", sha);
	deliver_all(f);
	assert_int_equal(f->rc, 0);
	/* Again on the same link: the request alone. */
	reset_out(f);
	start(f, "transcribe", sha);
	assert_int_equal(f->counts[SF_MSG_XFER_BEGIN & 0xff], 0);
	assert_int_equal(f->counts[SF_MSG_XFER_CHUNK & 0xff], 0);
	assert_int_equal(f->counts[SF_MSG_STATE_OP_REQ & 0xff], 1);
	deliver_all(f);
	assert_int_equal(f->rc, 0);
	struct sf_state_ops_stats st;
	sf_state_ops_stats(f->so, &st);
	assert_int_equal(st.blobs_sent, 1);
	/* A new link: sent again, though the node kept it. */
	down(f, 0);
	up(f, 0);
	reset_out(f);
	start(f, "transcribe", sha);
	assert_int_equal(f->counts[SF_MSG_XFER_BEGIN & 0xff], 1);
	assert_int_equal(f->counts[SF_MSG_XFER_END & 0xff], 1);
	deliver_all(f);
	assert_int_equal(f->rc, 0);
	sf_state_ops_stats(f->so, &st);
	assert_int_equal(st.blobs_sent, 2);
	assert_int_equal(st.blob_bytes_sent, 2 * sizeof(data));
	/* A second node has its own set. */
	up(f, 1);
	reset_out(f);
	start(f, "transcribe", sha); /* round robin: node 1 */
	assert_int_equal(f->to_nodes.node[0], 1);
	assert_int_equal(f->counts[SF_MSG_XFER_BEGIN & 0xff], 1);
	deliver_all(f);
	assert_int_equal(f->rc, 0);
}

static void test_chunking(void **state)
{
	struct fx *f = *state;
	/* The 4 MiB chunk limit on a link with the full frame size. */
	up(f, 0);
	size_t n = SF_MAX_BLOB_CHUNK + 1;
	uint8_t *data = malloc(n), sha[32];
	audio(data, n, 3);
	put(f, data, n, sha);
	reset_out(f);
	start(f, "echo", sha);
	assert_int_equal(f->n_chunks, 2);
	assert_int_equal(f->chunk_lens[0], SF_MAX_BLOB_CHUNK);
	assert_int_equal(f->chunk_offs[1], SF_MAX_BLOB_CHUNK);
	assert_int_equal(f->chunk_lens[1], 1);
	deliver_all(f);
	assert_int_equal(f->rc, 0); /* the node verified it and read it */
	assert_true(sf_blob_has(f->store[0], sha));
	/* A link with a 64 KiB frame limit: chunks that fill a frame exactly. */
	f->payload[1] = 65536;
	up(f, 1);
	size_t m = 200000;
	uint8_t sha2[32];
	audio(data, m, 4);
	put(f, data, m, sha2);
	reset_out(f);
	start(f, "echo", sha2); /* round robin: node 1 */
	uint32_t k = 65536 - SF_XFER_CHUNK_OVERHEAD;
	assert_int_equal(f->n_chunks, (m + k - 1) / k);
	uint64_t at = 0;
	for (uint32_t i = 0; i < f->n_chunks; i++) {
		assert_int_equal(f->chunk_offs[i], at);
		assert_true(f->chunk_lens[i] <= k);
		if (i + 1 < f->n_chunks)
			assert_int_equal(f->chunk_lens[i], k);
		at += f->chunk_lens[i];
	}
	assert_int_equal(at, m);
	deliver_all(f);
	assert_int_equal(f->rc, 0);
	assert_true(sf_blob_has(f->store[1], sha2));
	/* An empty blob: BEGIN and END, no chunk. */
	uint8_t sha3[32];
	put(f, data, 0, sha3);
	reset_out(f);
	start(f, "echo", sha3);
	assert_int_equal(f->n_chunks, 0);
	assert_int_equal(f->counts[SF_MSG_XFER_END & 0xff], 1);
	deliver_all(f);
	assert_int_equal(f->rc, 0);
	free(data);
}

/* Segments straight from a fake node: out of order, repeated. */
static void seg_msg(struct fx *f, uint32_t node, uint64_t rid, uint64_t seq, const char *text)
{
	struct sf_msg m = { .type = SF_MSG_STATE_OP_SEGMENT };
	m.u.state_op_segment = (struct sf_state_op_segment){
		.request_id = rid,
		.segment = { .seq = seq, .start_ms = seq * 1000, .end_ms = seq * 1000 + 1000,
			     .text = (char *)text, .text_len = (uint32_t)strlen(text) },
	};
	assert_true(sf_state_ops_on_msg(f->so, node, &m, f->now));
}

static void resp_msg(struct fx *f, uint32_t node, uint64_t rid, bool ok, const char *s)
{
	struct sf_msg m = { .type = SF_MSG_STATE_OP_RESP };
	m.u.state_op_resp = (struct sf_state_op_resp){ .request_id = rid, .ok = ok };
	if (ok) {
		m.u.state_op_resp.result = (uint8_t *)s;
		m.u.state_op_resp.result_len = (uint32_t)strlen(s);
	} else {
		m.u.state_op_resp.error = (char *)s;
		m.u.state_op_resp.error_len = (uint32_t)strlen(s);
	}
	assert_true(sf_state_ops_on_msg(f->so, node, &m, f->now));
}

/* The request id of the last STATE_OP_REQ queued. */
static uint64_t last_rid(struct fx *f)
{
	for (int i = f->to_nodes.n - 1; i >= 0; i--)
		if (f->to_nodes.msgs[i].type == SF_MSG_STATE_OP_REQ)
			return f->to_nodes.msgs[i].u.state_op_req.request_id;
	fail_msg("no STATE_OP_REQ was sent");
	return 0;
}

static void test_segment_order(void **state)
{
	struct fx *f = *state;
	up(f, 0);
	reset_out(f);
	start(f, "transcribe", NULL);
	uint64_t rid = last_rid(f);
	drop_all(f);
	seg_msg(f, 0, rid, 1, "b");
	assert_int_equal(f->n_segs, 0); /* held until 0 comes */
	seg_msg(f, 0, rid, 3, "d");
	seg_msg(f, 0, rid, 1, "b");     /* held already */
	seg_msg(f, 0, rid, 0, "a");
	assert_int_equal(f->n_segs, 2);
	seg_msg(f, 0, rid, 0, "a");     /* delivered already */
	seg_msg(f, 0, rid + 999, 2, "x"); /* another request's */
	seg_msg(f, 1, rid, 2, "x");     /* another node's */
	seg_msg(f, 0, rid, 2, "c");
	assert_int_equal(f->n_segs, 4);
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(f->seg_seq[i], i);
	assert_string_equal(f->text, "a b c d");
	assert_int_equal(f->n_dones, 0);
	resp_msg(f, 0, rid, true, "a b c d");
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->rc, 0);
	assert_string_equal(f->result, "a b c d");
	/* Late ones for a finished request are ignored. */
	seg_msg(f, 0, rid, 4, "e");
	resp_msg(f, 0, rid, true, "x");
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->n_segs, 4);
	/* The node's own refusal. */
	reset_out(f);
	start(f, "transcribe", NULL);
	rid = last_rid(f);
	drop_all(f);
	resp_msg(f, 0, rid, false, "engine sim has no state operation \"x\"");
	assert_int_equal(f->rc, SF_E_RANGE);
	assert_non_null(strstr(f->msg, "node n0: engine sim has no state operation"));
}

static void test_refused_xfer(void **state)
{
	struct fx *f = *state;
	/* Node 0 keeps no blobs: XFER_BEGIN is refused. */
	struct sf_err err;
	struct sf_node_io nio = { .arg = f, .send = node_send };
	struct sf_node_config ncfg = { .max_sessions = 4 };
	sf_node_free(f->node[0]);
	assert_int_equal(sf_node_new(&f->node[0], &ncfg, f->engine[0], &nio, f->now, &err), 0);
	up(f, 0);
	uint8_t data[40], sha[32];
	audio(data, sizeof(data), 5);
	put(f, data, sizeof(data), sha);
	reset_out(f);
	start(f, "transcribe", sha);
	deliver_all(f);
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->rc, SF_E_RANGE);
	assert_non_null(strstr(f->msg, "node n0 refused blob"));
	assert_non_null(strstr(f->msg, "no --blob-dir"));
	assert_int_equal(f->n_segs, 0);
	struct sf_state_ops_stats st;
	sf_state_ops_stats(f->so, &st);
	assert_int_equal(st.blobs_refused, 1);
	assert_int_equal(st.results[SF_SO_ERROR], 1);
	/* Refused: not counted as on the link, so the next request sends it again. */
	reset_out(f);
	start(f, "transcribe", sha);
	assert_int_equal(f->counts[SF_MSG_XFER_BEGIN & 0xff], 1);
	deliver_all(f);
	assert_int_equal(f->rc, SF_E_RANGE);
}

static void test_link_lost_before_segments(void **state)
{
	struct fx *f = *state;
	up(f, 0);
	up(f, 1);
	uint8_t data[70], sha[32];
	audio(data, sizeof(data), 6);
	put(f, data, sizeof(data), sha);
	reset_out(f);
	uint64_t t = start(f, "transcribe", sha);
	uint32_t first = f->to_nodes.node[0];
	drop_all(f); /* lost with the link */
	down(f, first);
	/* Asked again of the other node, blob first. */
	assert_int_equal(f->n_dones, 0);
	assert_true(pending(f) > 0);
	assert_int_equal(f->to_nodes.node[0], 1 - first);
	assert_int_equal(f->counts[SF_MSG_XFER_BEGIN & 0xff], 2);
	assert_int_equal(f->counts[SF_MSG_STATE_OP_REQ & 0xff], 2);
	deliver_all(f);
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->rc, 0);
	assert_int_equal(f->done_ticket, t);
	char want[4096];
	uint32_t segs;
	expected(f, data, sizeof(data), want, sizeof(want), &segs);
	assert_string_equal(f->text, want);
	assert_int_equal(f->n_segs, segs);
	struct sf_state_ops_stats st;
	sf_state_ops_stats(f->so, &st);
	assert_int_equal(st.retried, 1);
}

static void test_link_lost_waits_for_reconnect(void **state)
{
	struct fx *f = *state;
	up(f, 0);
	uint8_t data[33], sha[32];
	audio(data, sizeof(data), 7);
	put(f, data, sizeof(data), sha);
	reset_out(f);
	start(f, "transcribe", sha);
	drop_all(f);
	down(f, 0);
	assert_int_equal(f->n_dones, 0);
	assert_int_equal(pending(f), 0); /* no node: it waits */
	f->now += 1000;
	up(f, 0);
	/* The new link gets the blob again, then the request. */
	assert_int_equal(f->counts[SF_MSG_XFER_BEGIN & 0xff], 2);
	deliver_all(f);
	assert_int_equal(f->rc, 0);
	assert_int_equal(f->n_segs, 3);
	/* Lost twice: the second time it fails. */
	reset_out(f);
	start(f, "transcribe", sha);
	drop_all(f);
	down(f, 0);
	up(f, 0);
	drop_all(f);
	down(f, 0);
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->rc, SF_E_STATE);
	assert_non_null(strstr(f->msg, "asked again once already"));
	/* Waiting past the deadline with no node. */
	up(f, 0);
	reset_out(f);
	start(f, "transcribe", sha);
	drop_all(f);
	down(f, 0);
	assert_int_equal(sf_state_ops_deadline(f->so), f->now + 30000);
	sf_state_ops_tick(f->so, f->now + 29999);
	assert_int_equal(f->n_dones, 0);
	sf_state_ops_tick(f->so, f->now + 30000);
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->rc, SF_E_SILENT);
	assert_non_null(strstr(f->msg, "no node serving model"));
	assert_int_equal(sf_state_ops_deadline(f->so), UINT64_MAX);
}

static void test_link_lost_after_segment(void **state)
{
	struct fx *f = *state;
	up(f, 0);
	up(f, 1);
	reset_out(f);
	start(f, "transcribe", NULL);
	uint64_t rid = last_rid(f);
	uint32_t node = f->to_nodes.node[0];
	drop_all(f);
	seg_msg(f, node, rid, 0, "ba");
	assert_int_equal(f->n_segs, 1);
	down(f, node);
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->rc, SF_E_STATE);
	assert_non_null(strstr(f->msg, "after 1 segments"));
	assert_non_null(strstr(f->msg, "cannot resume"));
	assert_int_equal(pending(f), 0); /* not asked again */
}

static void test_deadline_and_forget(void **state)
{
	struct fx *f = *state;
	up(f, 0);
	uint8_t data[20], sha[32];
	audio(data, sizeof(data), 8);
	put(f, data, sizeof(data), sha);
	reset_out(f);
	start(f, "transcribe", sha);
	uint64_t rid = last_rid(f);
	drop_all(f);
	f->now += 20000;
	seg_msg(f, 0, rid, 0, "a"); /* progress moves the deadline */
	assert_int_equal(sf_state_ops_deadline(f->so), f->now + 30000);
	sf_state_ops_tick(f->so, f->now + 30000);
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->rc, SF_E_SILENT);
	assert_non_null(strstr(f->msg, "node n0 made no progress on transcribe within 30 s"));
	/* Forgotten: no done, blobs let go, the node's answer ignored. */
	reset_out(f);
	uint64_t t = start(f, "transcribe", sha);
	struct sf_blob_cache_stats cs;
	sf_blob_cache_stats(f->cache, &cs);
	assert_int_equal(cs.pinned, 1);
	sf_state_ops_forget(f->so, t);
	sf_blob_cache_stats(f->cache, &cs);
	assert_int_equal(cs.pinned, 0);
	deliver_all(f);
	assert_int_equal(f->n_dones, 0);
	assert_int_equal(f->n_segs, 0);
	struct sf_state_ops_stats st;
	sf_state_ops_stats(f->so, &st);
	assert_int_equal(st.results[SF_SO_CANCELLED], 1);
	assert_int_equal(st.running, 0);
}

static void test_refusals_at_start(void **state)
{
	struct fx *f = *state;
	struct sf_err err;
	uint64_t t;
	struct sf_state_op_call call = { .model = f->info[0].name, .op = "transcribe" };
	assert_int_equal(sf_state_ops_start(f->so, &call, f->now, &t, &err), SF_E_STATE);
	assert_non_null(strstr(err.msg, "no node serving model"));
	assert_false(sf_state_ops_serves(f->so, f->info[0].name));
	up(f, 0);
	assert_true(sf_state_ops_serves(f->so, f->info[0].name));
	call.model = "no-such-model";
	assert_int_equal(sf_state_ops_start(f->so, &call, f->now, &t, &err), SF_E_STATE);
	uint8_t sha[32] = { 1 };
	call.model = f->info[0].name;
	call.blobs = (const uint8_t (*)[32])sha;
	call.n_blobs = 1;
	assert_int_equal(sf_state_ops_start(f->so, &call, f->now, &t, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "not in the head's blob cache"));
	assert_int_equal(t, 0);
	assert_int_equal(pending(f), 0);
}

/* Delivers the first k queued messages (the link's kernel took that much), leaving the rest
 * queued, and runs the nodes' ticks. */
static void deliver_some(struct fx *f, int k)
{
	struct queue *q = &f->to_nodes;
	int upto = q->next + k < q->n ? q->next + k : q->n;
	while (q->next < upto) {
		int i = q->next++;
		f->answering = q->node[i];
		sf_node_handle(f->node[q->node[i]], f->link[q->node[i]], &q->msgs[i], f->now);
	}
	for (uint32_t i = 0; i < N_NODES; i++)
		if (sf_node_deadline(f->node[i]) <= f->now) {
			f->answering = i;
			sf_node_tick(f->node[i], f->now);
		}
}

static uint32_t count_in_queue(const struct fx *f, uint16_t type)
{
	uint32_t n = 0;
	for (int i = f->to_nodes.next; i < f->to_nodes.n; i++)
		n += f->to_nodes.msgs[i].type == type;
	return n;
}

static void test_paced_blob_over_the_window(void **state)
{
	struct fx *f = *state;
	up(f, 0);
	size_t n = 3 * SF_STATE_OPS_XFER_WINDOW + 12345; /* seven chunks */
	uint8_t *data = malloc(n), sha[32];
	audio(data, n, 11);
	put(f, data, n, sha);
	reset_out(f);
	uint64_t t = start(f, "echo", sha);
	/* The window's worth went, and the request waits for the rest. */
	uint32_t per_window = SF_STATE_OPS_XFER_WINDOW / SF_MAX_BLOB_CHUNK;
	assert_int_equal(f->counts[SF_MSG_XFER_BEGIN & 0xff], 1);
	assert_int_equal(f->n_chunks, per_window);
	assert_int_equal(f->counts[SF_MSG_XFER_END & 0xff], 0);
	assert_int_equal(f->counts[SF_MSG_STATE_OP_REQ & 0xff], 0);
	assert_int_equal(sf_state_ops_xfer_left(f->so, 0), n - SF_STATE_OPS_XFER_WINDOW);
	sf_state_ops_pump(f->so, 0, f->now); /* nothing drained: nothing more */
	assert_int_equal(f->n_chunks, per_window);
	/* Another request meanwhile goes between the chunks, and is answered. */
	struct sf_state_op_call call = { .model = f->info[0].name, .op = "echo",
					 .args = (const uint8_t *)"hi", .args_len = 2 };
	uint64_t t2 = 0;
	struct sf_err err;
	assert_int_equal(sf_state_ops_start(f->so, &call, f->now, &t2, &err), 0);
	assert_int_equal(count_in_queue(f, SF_MSG_STATE_OP_REQ), 1);
	deliver_all(f);
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->done_ticket, t2);
	assert_string_equal(f->result, "hi");
	/* The link drains a chunk at a time: each drain lets one more go. */
	int drains = 0;
	while (sf_state_ops_xfer_left(f->so, 0) || pending(f)) {
		deliver_some(f, 1);
		if (drains++ % 2)
			sf_state_ops_pump(f->so, 0, f->now); /* the drained hook */
		else
			sf_state_ops_tick(f->so, f->now);    /* or the turn's tick */
		assert_true(head_unsent(f, 0) <= SF_STATE_OPS_XFER_WINDOW);
		assert_true(drains < 100);
	}
	assert_int_equal(f->n_dones, 2);
	assert_int_equal(f->done_ticket, t);
	assert_int_equal(f->rc, 0);
	assert_int_equal(f->counts[SF_MSG_XFER_BEGIN & 0xff], 1);
	assert_int_equal(f->counts[SF_MSG_XFER_END & 0xff], 1);
	assert_int_equal(f->n_chunks, (n + SF_MAX_BLOB_CHUNK - 1) / SF_MAX_BLOB_CHUNK);
	for (uint32_t i = 0; i < f->n_chunks; i++)
		assert_int_equal(f->chunk_offs[i], (uint64_t)i * SF_MAX_BLOB_CHUNK);
	assert_true(sf_blob_has(f->store[0], sha)); /* whole and verified at the node */
	struct sf_state_ops_stats st;
	sf_state_ops_stats(f->so, &st);
	assert_int_equal(st.blobs_sent, 1);
	assert_int_equal(st.blob_bytes_sent, n);
	free(data);
}

static void test_paced_blob_link_drops_midway(void **state)
{
	struct fx *f = *state;
	up(f, 0);
	size_t n = 2 * SF_STATE_OPS_XFER_WINDOW;
	uint8_t *data = malloc(n), sha[32];
	audio(data, n, 12);
	put(f, data, n, sha);
	reset_out(f);
	uint64_t t = start(f, "echo", sha);
	deliver_some(f, 2); /* BEGIN and a chunk reached the node */
	sf_state_ops_pump(f->so, 0, f->now);
	drop_all(f);        /* the rest was lost with the link */
	down(f, 0);
	assert_int_equal(sf_state_ops_xfer_left(f->so, 0), 0);
	assert_int_equal(f->n_dones, 0);
	/* The node comes back: the blob goes again from offset 0, under a new transfer id. */
	uint64_t first_id = f->to_nodes.msgs[0].u.xfer_begin.transfer_id;
	f->n_chunks = 0;
	up(f, 0);
	assert_int_equal(f->to_nodes.msgs[0].type, SF_MSG_XFER_BEGIN);
	assert_true(f->to_nodes.msgs[0].u.xfer_begin.transfer_id != first_id);
	assert_int_equal(f->chunk_offs[0], 0);
	assert_int_equal(f->n_chunks, SF_STATE_OPS_XFER_WINDOW / SF_MAX_BLOB_CHUNK);
	while (sf_state_ops_xfer_left(f->so, 0) || pending(f)) {
		deliver_some(f, 1);
		sf_state_ops_pump(f->so, 0, f->now);
	}
	deliver_all(f);
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->done_ticket, t);
	assert_int_equal(f->rc, 0);
	assert_true(sf_blob_has(f->store[0], sha));
	struct sf_state_ops_stats st;
	sf_state_ops_stats(f->so, &st);
	assert_int_equal(st.retried, 1);
	assert_int_equal(st.blobs_sent, 1);
	free(data);
}

static void test_paced_blob_cut_by_cancel(void **state)
{
	struct fx *f = *state;
	up(f, 0);
	size_t n = 2 * SF_STATE_OPS_XFER_WINDOW;
	uint8_t *data = malloc(n), sha[32];
	audio(data, n, 13);
	put(f, data, n, sha);
	reset_out(f);
	uint64_t t = start(f, "echo", sha);
	deliver_some(f, 1);
	sf_state_ops_forget(f->so, t); /* the client went away */
	/* Cut short: the XFER_END goes at once, no more chunks, no STATE_OP_REQ. */
	assert_int_equal(f->counts[SF_MSG_XFER_END & 0xff], 1);
	assert_int_equal(f->counts[SF_MSG_STATE_OP_REQ & 0xff], 0);
	assert_int_equal(sf_state_ops_xfer_left(f->so, 0), 0);
	uint32_t chunks = f->n_chunks;
	deliver_all(f);
	sf_state_ops_tick(f->so, f->now);
	assert_int_equal(f->n_chunks, chunks);
	assert_int_equal(f->n_dones, 0);
	assert_false(sf_blob_has(f->store[0], sha)); /* the node refused the short blob */
	struct sf_state_ops_stats st;
	sf_state_ops_stats(f->so, &st);
	assert_int_equal(st.blobs_cut, 1);
	assert_int_equal(st.blobs_sent, 0);
	assert_int_equal(st.blobs_refused, 0); /* the node's refusal of a cut blob is expected */
	assert_int_equal(st.results[SF_SO_CANCELLED], 1);
	/* Asked again: the blob goes whole, and the request is answered. */
	reset_out(f);
	start(f, "echo", sha);
	while (sf_state_ops_xfer_left(f->so, 0) || pending(f)) {
		deliver_some(f, 1);
		sf_state_ops_pump(f->so, 0, f->now);
	}
	deliver_all(f);
	assert_int_equal(f->n_dones, 1);
	assert_int_equal(f->rc, 0);
	assert_true(sf_blob_has(f->store[0], sha));
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_transcribe_streams, setup, teardown),
		cmocka_unit_test_setup_teardown(test_blob_once_per_link, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunking, setup, teardown),
		cmocka_unit_test_setup_teardown(test_segment_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_xfer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_lost_before_segments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_lost_waits_for_reconnect, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_lost_after_segment, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deadline_and_forget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals_at_start, setup, teardown),
		cmocka_unit_test_setup_teardown(test_paced_blob_over_the_window, setup_paced, teardown),
		cmocka_unit_test_setup_teardown(test_paced_blob_link_drops_midway, setup_paced,
						teardown),
		cmocka_unit_test_setup_teardown(test_paced_blob_cut_by_cancel, setup_paced, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
