/* The head's state operations' blobs, against real node machines on the simulated engine
 * (state_ops_fx.h): a blob sent once per link and again after the link went down and up;
 * chunks at the 4 MiB and frame limits; a refused transfer. Paced blobs (io->unsent): a blob
 * larger than the window goes out as the link drains, with other requests between its
 * chunks; it goes again whole after its link drops mid-way; a cancel cuts it short. */
#include "state_ops_fx.h"

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
		cmocka_unit_test_setup_teardown(test_blob_once_per_link, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunking, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_xfer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_paced_blob_over_the_window, setup_paced, teardown),
		cmocka_unit_test_setup_teardown(test_paced_blob_link_drops_midway, setup_paced,
						teardown),
		cmocka_unit_test_setup_teardown(test_paced_blob_cut_by_cancel, setup_paced, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
