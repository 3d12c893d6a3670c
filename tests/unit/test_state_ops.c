/* The head's state operations' requests, against real node machines on the simulated engine
 * (state_ops_fx.h): a transcription streamed, segments in order once each, the link lost
 * before and after a segment reached the caller, the deadline, forgotten requests, refusals
 * at the start. */
#include "state_ops_fx.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_transcribe_streams, setup, teardown),
		cmocka_unit_test_setup_teardown(test_segment_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_lost_before_segments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_lost_waits_for_reconnect, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_lost_after_segment, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deadline_and_forget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals_at_start, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
