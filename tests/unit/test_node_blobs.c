/* The node machine's blob file work as jobs for its driver (src/node/node_blobs.c): nothing
 * is answered before its job ran, jobs go out one at a time in the order the messages came
 * (a state operation's maps after the transfer that stored its blob), the queue's bound
 * refuses a transfer once and drops its later messages, and a link that closes while its
 * jobs wait loses nothing else. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "node_fx.h"

/* The driver: jobs held until the test runs them. */
struct held_blobs {
	struct sf_node_blob_job *out; /* one at a time */
	int taken;
};
static struct held_blobs held;

static int hold_blob(void *arg, struct sf_node_blob_job *job)
{
	(void)arg;
	assert_null(held.out);
	held.out = job;
	held.taken++;
	return 0;
}

/* Runs the job out (on this thread, as the driver's thread would) and hands it back. */
static bool run_one(struct fx *f)
{
	struct sf_node_blob_job *j = held.out;
	if (!j)
		return false;
	held.out = NULL;
	sf_node_blob_run(j);
	sf_node_blob_done(f->node, j, f->now);
	sf_node_tick(f->node, f->now);
	return true;
}

static int run_all(struct fx *f)
{
	int n = 0;
	while (run_one(f))
		n++;
	return n;
}

struct store {
	char dir[64];
	struct sf_blob_store *bs;
};

/* f's node again, on a fresh store, its blob jobs held; queue bound (0: the default). */
static void node_on_store(struct fx *f, struct store *st, uint64_t bound)
{
	snprintf(st->dir, sizeof(st->dir), "/tmp/sf-node-bjobs-%d-XXXXXX", (int)getpid());
	assert_non_null(mkdtemp(st->dir));
	struct sf_err err;
	assert_int_equal(sf_blob_store_open(&st->bs, st->dir, 0, &err), 0);
	sf_node_free(f->node);
	memset(&held, 0, sizeof(held));
	struct sf_node_io io = { .arg = &f->sent, .send = capture, .blob_submit = hold_blob };
	struct sf_node_config cfg = { .max_sessions = 64, .blobs = st->bs,
				      .blob_queue_bytes = bound };
	assert_int_equal(sf_node_new(&f->node, &cfg, f->engine, &io, f->now, &err), 0);
	sf_node_link_open(f->node, 1, 3, f->now);
}

static void store_done(struct fx *f, struct store *st)
{
	sf_node_free(f->node); /* frees jobs still queued or out */
	f->node = NULL;
	held.out = NULL;
	sf_blob_store_close(st->bs);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", st->dir);
	assert_int_equal(system(cmd), 0);
}

static int count_of(struct fx *f, uint16_t type)
{
	int n = 0;
	for (int i = 0; i < f->sent.n; i++)
		n += f->sent.msgs[i].type == type;
	return n;
}

static uint8_t audio[100];

static void send_blob(struct fx *f, uint64_t link, uint64_t id, uint8_t sha[32])
{
	for (int i = 0; i < 100; i++)
		audio[i] = (uint8_t)('a' + i % 26);
	crypto_hash_sha256(sha, audio, sizeof(audio));
	struct sf_xfer_begin xb = { .transfer_id = id, .total_len = 100 };
	memcpy(xb.sha256, sha, 32);
	deliver(f, link, SF_MSG_XFER_BEGIN, &xb);
	struct sf_xfer_chunk c1 = { .transfer_id = id, .offset = 0, .data = audio, .data_len = 60 };
	struct sf_xfer_chunk c2 = { .transfer_id = id, .offset = 60, .data = audio + 60,
				    .data_len = 40 };
	deliver(f, link, SF_MSG_XFER_CHUNK, &c1);
	deliver(f, link, SF_MSG_XFER_CHUNK, &c2);
	struct sf_xfer_end xe = { .transfer_id = id };
	deliver(f, link, SF_MSG_XFER_END, &xe);
}

/* Begin, two chunks, end and a transcription of the blob: five jobs, one out at a time; the
 * XFER_RESULT only once the end's job ran, the operation only once its maps came. */
static void jobs_run_in_order_off_the_node(void **state)
{
	struct fx *f = *state;
	struct store st;
	node_on_store(f, &st, 0);
	uint8_t sha[32];
	send_blob(f, 1, 1, sha);
	struct sf_blob_ref ref;
	memcpy(ref.sha256, sha, 32);
	struct sf_state_op_req op = { .request_id = 3, .op = "transcribe", .op_len = 10,
				      .blobs = &ref, .n_blobs = 1 };
	deliver(f, 1, SF_MSG_STATE_OP_REQ, &op);
	assert_int_equal(held.taken, 1);       /* the begin; the rest wait behind it */
	assert_false(sf_blob_has(st.bs, sha)); /* nothing written on the node's thread */
	sf_node_tick(f->node, f->now);
	assert_int_equal(count_of(f, SF_MSG_XFER_RESULT), 0);
	assert_int_equal(count_of(f, SF_MSG_STATE_OP_RESP), 0);
	for (int i = 0; i < 3; i++) /* begin, chunk, chunk */
		assert_true(run_one(f));
	assert_int_equal(count_of(f, SF_MSG_XFER_RESULT), 0);
	assert_true(run_one(f)); /* the end: stored, said */
	assert_true(sf_blob_has(st.bs, sha));
	const struct sf_msg *m = last_of(f, SF_MSG_XFER_RESULT);
	assert_non_null(m);
	assert_true(m->u.xfer_result.ok);
	sf_node_tick(f->node, f->now);
	assert_int_equal(count_of(f, SF_MSG_STATE_OP_RESP), 0); /* its maps are out */
	assert_true(run_one(f));
	for (int i = 0; i < 64 && !last_of(f, SF_MSG_STATE_OP_RESP); i++)
		sf_node_tick(f->node, f->now);
	m = last_of(f, SF_MSG_STATE_OP_RESP);
	assert_non_null(m);
	if (!m->u.state_op_resp.ok)
		fail_msg("transcribe: %s", m->u.state_op_resp.error);
	assert_int_equal(count_of(f, SF_MSG_STATE_OP_SEGMENT), (100 + 15) / 16);
	struct sf_node_stats ns;
	sf_node_stats(f->node, &ns);
	assert_int_equal(ns.blob_jobs_out, 5);
	assert_int_equal(held.taken, 5);
	/* A blob that is not there: the map's job fails the operation with why. */
	ref.sha256[0] ^= 1;
	op.request_id = 4;
	deliver(f, 1, SF_MSG_STATE_OP_REQ, &op);
	assert_int_equal(run_all(f), 1);
	m = last_of(f, SF_MSG_STATE_OP_RESP);
	assert_int_equal(m->u.state_op_resp.request_id, 4);
	assert_false(m->u.state_op_resp.ok);
	assert_non_null(strstr(m->u.state_op_resp.error, "not on this node"));
	store_done(f, &st);
}

/* Past the queue's bound the transfer is refused once, naming why; its later chunks and end
 * are dropped without a word, the store forgets it, and the id may start again. */
static void the_queue_bound_refuses_a_transfer(void **state)
{
	struct fx *f = *state;
	struct store st;
	node_on_store(f, &st, 100);
	struct sf_xfer_begin xb = { .transfer_id = 7, .total_len = 300 };
	deliver(f, 1, SF_MSG_XFER_BEGIN, &xb);
	uint8_t data[100] = { 1 };
	struct sf_xfer_chunk c = { .transfer_id = 7, .data = data, .data_len = 100 };
	deliver(f, 1, SF_MSG_XFER_CHUNK, &c); /* 100 waiting: at the bound */
	assert_int_equal(count_of(f, SF_MSG_XFER_RESULT), 0);
	c.offset = 100;
	deliver(f, 1, SF_MSG_XFER_CHUNK, &c); /* past it */
	const struct sf_msg *m = last_of(f, SF_MSG_XFER_RESULT);
	assert_non_null(m);
	assert_false(m->u.xfer_result.ok);
	assert_int_equal(m->u.xfer_result.transfer_id, 7);
	assert_non_null(strstr(m->u.xfer_result.reason, "disk is behind"));
	c.offset = 200;
	deliver(f, 1, SF_MSG_XFER_CHUNK, &c);
	struct sf_xfer_end xe = { .transfer_id = 7 };
	deliver(f, 1, SF_MSG_XFER_END, &xe);
	assert_int_equal(run_all(f), 3); /* begin, the first chunk, the abort */
	assert_int_equal(count_of(f, SF_MSG_XFER_RESULT), 1);
	/* The same id again, whole, within the bound: stored. */
	uint8_t sha[32];
	send_blob(f, 1, 7, sha);
	assert_int_equal(run_all(f), 4);
	m = last_of(f, SF_MSG_XFER_RESULT);
	assert_true(m->u.xfer_result.ok);
	assert_true(sf_blob_has(st.bs, sha));
	store_done(f, &st);
}

/* A link closes with its transfer half queued and an operation waiting on its maps: the
 * transfer is dropped after what was queued, the maps are let go of, nothing is answered on
 * the closed link, and another link's transfer goes on. */
static void a_closed_link_drops_its_jobs(void **state)
{
	struct fx *f = *state;
	struct store st;
	node_on_store(f, &st, 0);
	sf_node_link_open(f->node, 2, 3, f->now);
	uint8_t sha[32];
	send_blob(f, 2, 1, sha); /* stored through link 2 */
	assert_int_equal(run_all(f), 4);
	struct sf_xfer_begin xb = { .transfer_id = 9, .total_len = 100 };
	deliver(f, 1, SF_MSG_XFER_BEGIN, &xb);
	struct sf_xfer_chunk c = { .transfer_id = 9, .data = audio, .data_len = 50 };
	deliver(f, 1, SF_MSG_XFER_CHUNK, &c);
	struct sf_blob_ref ref;
	memcpy(ref.sha256, sha, 32);
	struct sf_state_op_req op = { .request_id = 5, .op = "transcribe", .op_len = 10,
				      .blobs = &ref, .n_blobs = 1 };
	deliver(f, 1, SF_MSG_STATE_OP_REQ, &op);
	int before = f->sent.n;
	sf_node_link_closed(f->node, 1, f->now);
	assert_int_equal(run_all(f), 4); /* begin, chunk, map, the link's abort */
	for (int i = 0; i < 8; i++)
		sf_node_tick(f->node, f->now);
	for (int i = before; i < f->sent.n; i++)
		assert_int_not_equal(f->sent.links[i], 1);
	/* The store holds no partial transfer of link 1: the same id on a new link starts. */
	sf_node_link_open(f->node, 3, 3, f->now);
	send_blob(f, 3, 9, sha);
	assert_int_equal(run_all(f), 4);
	assert_true(last_of(f, SF_MSG_XFER_RESULT)->u.xfer_result.ok);
	/* Freed with jobs queued and one out: nothing leaks (ASan). */
	deliver(f, 3, SF_MSG_XFER_BEGIN, &xb);
	deliver(f, 3, SF_MSG_XFER_CHUNK, &c);
	store_done(f, &st);
}

/* Without a driver's thread the same work runs inline, answered at once. */
static void inline_without_a_driver(void **state)
{
	struct fx *f = *state;
	struct store st;
	node_on_store(f, &st, 0);
	sf_node_free(f->node);
	struct sf_node_io io = { .arg = &f->sent, .send = capture };
	struct sf_node_config cfg = { .max_sessions = 64, .blobs = st.bs };
	struct sf_err err;
	assert_int_equal(sf_node_new(&f->node, &cfg, f->engine, &io, f->now, &err), 0);
	sf_node_link_open(f->node, 1, 3, f->now);
	uint8_t sha[32];
	send_blob(f, 1, 1, sha);
	assert_true(last_of(f, SF_MSG_XFER_RESULT)->u.xfer_result.ok);
	assert_true(sf_blob_has(st.bs, sha));
	struct sf_node_stats ns;
	sf_node_stats(f->node, &ns);
	assert_int_equal(ns.blob_jobs_out, 0);
	store_done(f, &st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(jobs_run_in_order_off_the_node, setup, teardown),
		cmocka_unit_test_setup_teardown(the_queue_bound_refuses_a_transfer, setup, teardown),
		cmocka_unit_test_setup_teardown(a_closed_link_drops_its_jobs, setup, teardown),
		cmocka_unit_test_setup_teardown(inline_without_a_driver, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
