/* The head machine alone, fed hand-made node messages: de-duplication by (session,
 * generation, seq), coalesced watermarks, leases granted only while placed, refusals,
 * numbering across links, nothing before the reconcile answer, bounded tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "head/head.h"

#define MAX_SENT 256

struct sent {
	struct sf_arena arena;
	struct sf_msg msgs[MAX_SENT];
	uint64_t links[MAX_SENT];
	int n;
};

struct fx {
	struct sf_head *h;
	struct sent sent;
	uint64_t now;
	/* What the caller was told. */
	uint32_t tokens[256];
	int n_tokens, finishes, errors, drops;
	uint32_t reason;
	int code;
	char msg[SF_MAX_REASON];
	struct sf_model_info model;
	struct sf_model_digest digest;
};

/* Keeps a decoded copy of each message the head sends. */
static int capture(void *arg, uint64_t link, uint16_t type, const void *msg)
{
	struct fx *x = arg;
	struct sf_buf b;
	struct sf_err err;
	sf_buf_init(&b, 64u << 20);
	if (sf_msg_encode(&b, type, msg, 3, SF_FRAME_PAYLOAD_MAX, &err))
		fail_msg("head sent an unencodable %s: %s", sf_msg_name(type), err.msg);
	assert_true(x->sent.n < MAX_SENT);
	assert_int_equal(sf_msg_decode(type, sf_buf_head(&b) + SF_FRAME_HDR_LEN,
				       sf_buf_used(&b) - SF_FRAME_HDR_LEN, 3, &x->sent.arena,
				       &x->sent.msgs[x->sent.n], &err), 0);
	x->sent.links[x->sent.n++] = link;
	sf_buf_free(&b);
	return 0;
}

static void told(void *arg, const struct sf_head_event *ev)
{
	struct fx *x = arg;
	switch (ev->kind) {
	case SF_HEAD_EV_TOKENS:
		for (uint32_t i = 0; i < ev->n_tokens; i++)
			x->tokens[x->n_tokens++] = ev->tokens[i];
		break;
	case SF_HEAD_EV_FINISH:
		x->finishes++;
		x->reason = ev->reason;
		break;
	case SF_HEAD_EV_ERROR:
		x->errors++;
		x->code = ev->code;
		snprintf(x->msg, sizeof(x->msg), "%s", ev->msg);
		break;
	case SF_HEAD_EV_DROP_LINK:
		x->drops++;
		snprintf(x->msg, sizeof(x->msg), "%s", ev->msg);
		break;
	default:
		break;
	}
}

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	sf_arena_init(&x->sent.arena, 64u << 20);
	x->now = 5000;
	struct sf_head_config cfg = { .max_sessions = 4, .grace_ms = 1000, .first_id = 100 };
	struct sf_head_io io = { .arg = x, .send = capture, .event = told };
	struct sf_err err;
	assert_int_equal(sf_head_new(&x->h, &cfg, &io, x->now, &err), 0);
	assert_int_equal(sf_head_node_add(x->h, "10.0.0.1:7000", &err), 0);
	assert_int_equal(sf_head_node_add(x->h, "10.0.0.2:7000", &err), 1);
	x->model = (struct sf_model_info){ .name = "sim-1", .name_len = 5, .tokenizer_digest = 9 };
	x->digest = (struct sf_model_digest){ .model = "sim-1", .model_len = 5, .digest = 9 };
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;
	sf_head_free(x->h);
	sf_arena_free(&x->sent.arena);
	free(x);
	return 0;
}

static void up(struct fx *x, uint32_t node, uint64_t link, uint32_t version, const char *id)
{
	struct sf_link_peer p = { .version = version, .identity = id,
				  .capacity = { .max_sessions = 8, .free_sessions = 8 },
				  .models = &x->model, .n_models = 1 };
	if (version >= 3) {
		p.digests = &x->digest;
		p.n_digests = 1;
	}
	sf_head_link_up(x->h, node, link, &p, x->now);
}

static const struct sf_msg *last(struct fx *x, uint16_t type)
{
	for (int i = x->sent.n - 1; i >= 0; i--)
		if (x->sent.msgs[i].type == type)
			return &x->sent.msgs[i];
	return NULL;
}

static int count(struct fx *x, uint16_t type)
{
	int c = 0;
	for (int i = 0; i < x->sent.n; i++)
		c += x->sent.msgs[i].type == type;
	return c;
}

static void feed(struct fx *x, uint32_t node, uint16_t type, const void *body)
{
	struct sf_msg m = { .type = type };
	switch (type) {
	case SF_MSG_TOKEN_EVENTS: m.u.token_events = *(const struct sf_token_events *)body; break;
	case SF_MSG_LEASE_RENEW: m.u.lease_renew = *(const struct sf_lease_renew *)body; break;
	case SF_MSG_RECONCILE_ACK: m.u.reconcile_ack = *(const struct sf_reconcile_ack *)body; break;
	case SF_MSG_REFUSED: m.u.refused = *(const struct sf_refused *)body; break;
	default: fail_msg("cannot feed %s", sf_msg_name(type));
	}
	assert_true(sf_head_on_msg(x->h, node, &m, x->now));
}

static struct sf_token_event tokens_at(uint64_t sid, uint64_t gid, uint64_t epoch, uint64_t seq,
				       uint32_t *t)
{
	return (struct sf_token_event){ .session_id = sid, .generation_id = gid, .epoch = epoch,
					.seq = seq, .kind = SF_EVENT_TOKENS, .tokens = t,
					.n_tokens = 1 };
}

/* Opens session 1 on node 0 with content, asks a generation; returns its id. */
static uint64_t started(struct fx *x, uint64_t *epoch)
{
	struct sf_err err;
	struct sf_head_session_params p = { .model = "sim-1", .lease_ms = 300 };
	assert_int_equal(sf_head_session_open(x->h, 1, &p, x->now, &err), 0);
	uint32_t content[] = { 1, 2, 3 };
	assert_int_equal(sf_head_append(x->h, 1, content, 3, x->now, &err), 0);
	uint64_t gid;
	assert_int_equal(sf_head_generate(x->h, 1, 10, 0, NULL, x->now, &gid, &err), 0);
	*epoch = last(x, SF_MSG_SESSION_ASSIGN)->u.session_assign.epoch;
	return gid;
}

static void events_once_and_acks_coalesced(void **state)
{
	struct fx *x = *state;
	up(x, 0, 11, 3, "n0");
	uint64_t epoch, gid = started(x, &epoch);
	const struct sf_session_assign *a = &last(x, SF_MSG_SESSION_ASSIGN)->u.session_assign;
	assert_true(a->epoch >= 100 && a->command_id >= 100);
	assert_int_equal(a->lease_ms, 300);
	assert_int_equal(last(x, SF_MSG_SESSION_APPEND)->u.session_append.n_tokens, 3);
	const struct sf_generate *g = &last(x, SF_MSG_GENERATE)->u.generate;
	assert_int_equal(g->generation_id, gid);
	assert_int_equal(g->epoch, epoch);
	assert_true(g->command_id > last(x, SF_MSG_SESSION_APPEND)->u.session_append.command_id);

	uint32_t t[6] = { 10, 11, 12, 13, 14, 15 };
	struct sf_token_event ev[5] = {
		tokens_at(1, gid, epoch, 0, &t[0]), tokens_at(1, gid, epoch, 1, &t[1]),
		tokens_at(1, gid, epoch, 1, &t[1]),     /* a repeat */
		tokens_at(1, gid, epoch - 1, 2, &t[5]), /* an older epoch's */
		tokens_at(1, gid, epoch, 2, &t[2]),
	};
	struct sf_token_events te = { .events = ev, .n_events = 5 };
	feed(x, 0, SF_MSG_TOKEN_EVENTS, &te);
	feed(x, 0, SF_MSG_TOKEN_EVENTS, &te); /* the whole frame again */
	assert_int_equal(x->n_tokens, 3);
	assert_int_equal(x->tokens[2], 12);
	assert_int_equal(count(x, SF_MSG_WATERMARK_ACK), 0); /* coalesced until the tick */
	sf_head_tick(x->h, ++x->now);
	const struct sf_watermark_ack *w = &last(x, SF_MSG_WATERMARK_ACK)->u.watermark_ack;
	assert_int_equal(w->n_marks, 1);
	assert_int_equal(w->marks[0].seq, 2);
	assert_int_equal(w->marks[0].epoch, epoch);
	sf_head_tick(x->h, ++x->now);
	assert_int_equal(count(x, SF_MSG_WATERMARK_ACK), 1); /* nothing new, nothing sent */

	struct sf_token_event fin = { .session_id = 1, .generation_id = gid, .epoch = epoch,
				      .seq = 4, .kind = SF_EVENT_FINISH, .reason = SF_FINISH_LENGTH };
	struct sf_token_event rest[2] = { tokens_at(1, gid, epoch, 3, &t[3]), fin };
	te = (struct sf_token_events){ .events = rest, .n_events = 2 };
	feed(x, 0, SF_MSG_TOKEN_EVENTS, &te);
	feed(x, 0, SF_MSG_TOKEN_EVENTS, &te);
	assert_int_equal(x->n_tokens, 4);
	assert_int_equal(x->finishes, 1);
	assert_int_equal(x->reason, SF_FINISH_LENGTH);
	sf_head_tick(x->h, ++x->now);
	assert_int_equal(last(x, SF_MSG_WATERMARK_ACK)->u.watermark_ack.marks[0].seq, 4);
	struct sf_head_stats st;
	sf_head_stats(x->h, &st);
	assert_int_equal(st.duplicates, 1 + 4 + 2);
	assert_int_equal(st.stale_events, 2);
	assert_int_equal(x->errors, 0);
	assert_int_equal(x->drops, 0);
}

/* An event past the next seq was lost on the way: the link goes, for a reconcile to replay. */
static void a_gap_drops_the_link(void **state)
{
	struct fx *x = *state;
	up(x, 0, 11, 3, "n0");
	uint64_t epoch, gid = started(x, &epoch);
	uint32_t t[2] = { 10, 11 };
	struct sf_token_event ev[2] = { tokens_at(1, gid, epoch, 0, &t[0]),
					tokens_at(1, gid, epoch, 2, &t[1]) };
	struct sf_token_events te = { .events = ev, .n_events = 2 };
	feed(x, 0, SF_MSG_TOKEN_EVENTS, &te);
	assert_int_equal(x->n_tokens, 1);
	sf_head_tick(x->h, ++x->now);
	assert_int_equal(x->drops, 1);
	assert_non_null(strstr(x->msg, "sent event 2 of generation"));
	assert_int_equal(count(x, SF_MSG_WATERMARK_ACK), 0);
	/* The next link lists the generation from seq 1. */
	up(x, 0, 12, 3, "n0");
	const struct sf_reconcile *rc = &last(x, SF_MSG_RECONCILE)->u.reconcile;
	assert_int_equal(rc->sessions[0].gens[0].next_seq, 1);
}

static void leases_only_while_placed(void **state)
{
	struct fx *x = *state;
	up(x, 0, 11, 3, "n0");
	up(x, 1, 12, 3, "n1");
	uint64_t epoch;
	(void)started(x, &epoch);
	assert_int_equal(sf_head_session_node(x->h, 1), 0);
	struct sf_lease_ask asks[3] = { { 1, epoch }, { 1, epoch - 1 }, { 77, epoch } };
	struct sf_lease_renew r = { .leases = asks, .n_leases = 3 };
	feed(x, 0, SF_MSG_LEASE_RENEW, &r);
	const struct sf_lease_grant *g = &last(x, SF_MSG_LEASE_GRANT)->u.lease_grant;
	assert_int_equal(x->sent.links[x->sent.n - 1], 11);
	assert_int_equal(g->n_leases, 3);
	assert_true(g->leases[0].granted);
	assert_int_equal(g->leases[0].lease_ms, 300);
	assert_false(g->leases[1].granted);
	assert_false(g->leases[2].granted);
	/* Node 1 asking for a session placed on node 0: refused. */
	r.n_leases = 1;
	feed(x, 1, SF_MSG_LEASE_RENEW, &r);
	g = &last(x, SF_MSG_LEASE_GRANT)->u.lease_grant;
	assert_int_equal(x->sent.links[x->sent.n - 1], 12);
	assert_false(g->leases[0].granted);
	assert_int_equal(g->leases[0].lease_ms, 0);
	/* Closed: refused everywhere. */
	struct sf_err err;
	assert_int_equal(sf_head_session_close(x->h, 1, false, x->now, &err), 0);
	assert_true(last(x, SF_MSG_SESSION_REVOKE)->u.session_revoke.epoch == epoch);
	feed(x, 0, SF_MSG_LEASE_RENEW, &r);
	assert_false(last(x, SF_MSG_LEASE_GRANT)->u.lease_grant.leases[0].granted);
}

static void reconcile_comes_first(void **state)
{
	struct fx *x = *state;
	up(x, 0, 11, 3, "n0");
	uint64_t epoch, gid = started(x, &epoch);
	uint64_t cmd_before = last(x, SF_MSG_GENERATE)->u.generate.command_id;
	sf_head_link_down(x->h, 0, 11, NULL, x->now);
	assert_int_equal(x->errors, 1); /* node down, told once */
	assert_non_null(strstr(x->msg, "node n0: link 11 closed"));
	/* The caller cancels while it is away: told at once. */
	struct sf_err err;
	assert_int_equal(sf_head_cancel(x->h, 1, gid, x->now, &err), 0);
	assert_int_equal(x->finishes, 1);
	assert_int_equal(x->reason, SF_FINISH_CANCELLED);
	int before = x->sent.n;
	up(x, 0, 21, 3, "n0");
	assert_int_equal(x->sent.n, before + 1); /* only the RECONCILE */
	const struct sf_reconcile *rc = &last(x, SF_MSG_RECONCILE)->u.reconcile;
	assert_int_equal(x->sent.links[x->sent.n - 1], 21);
	assert_int_equal(rc->n_sessions, 1);
	assert_int_equal(rc->sessions[0].epoch, epoch);
	assert_int_equal(rc->sessions[0].n_gens, 1);
	assert_int_equal(rc->sessions[0].gens[0].generation_id, gid);
	assert_int_equal(rc->sessions[0].gens[0].next_seq, 0);
	assert_false(rc->sessions[0].gens[0].finished);
	/* Held, nothing to replay: the content again, the generation asked again (the node
	 * refuses it if it has it), then the cancel; all with newer command ids. */
	struct sf_reconcile_held held = { .session_id = 1, .epoch = epoch, .held = true };
	struct sf_reconcile_ack ack = { .sessions = &held, .n_sessions = 1 };
	feed(x, 0, SF_MSG_RECONCILE_ACK, &ack);
	assert_int_equal(x->sent.n, before + 4);
	assert_int_equal(x->sent.msgs[before + 1].type, SF_MSG_SESSION_APPEND);
	assert_int_equal(x->sent.msgs[before + 2].type, SF_MSG_GENERATE);
	assert_int_equal(x->sent.msgs[before + 3].type, SF_MSG_CANCEL);
	assert_true(x->sent.msgs[before + 1].u.session_append.command_id > cmd_before);
	assert_true(x->sent.msgs[before + 2].u.generate.command_id >
		    x->sent.msgs[before + 1].u.session_append.command_id);
	assert_int_equal(x->sent.msgs[before + 2].u.generate.generation_id, gid);
	assert_int_equal(x->finishes, 1);

	/* Next link, and the node does not hold it: assigned again with a fresh epoch. */
	sf_head_link_down(x->h, 0, 21, NULL, x->now);
	up(x, 0, 31, 3, "n0");
	held.held = false;
	held.epoch = 0;
	feed(x, 0, SF_MSG_RECONCILE_ACK, &ack);
	const struct sf_session_assign *a = &last(x, SF_MSG_SESSION_ASSIGN)->u.session_assign;
	assert_true(a->epoch > epoch);
	assert_int_equal(last(x, SF_MSG_SESSION_APPEND)->u.session_append.epoch, a->epoch);
	assert_int_equal(x->finishes, 1);

	/* A reconcile left unanswered past the grace drops the link. */
	sf_head_link_down(x->h, 0, 31, NULL, x->now);
	up(x, 0, 41, 3, "n0");
	sf_head_tick(x->h, x->now + 999);
	assert_int_equal(x->drops, 0);
	sf_head_tick(x->h, x->now + 1000);
	assert_int_equal(x->drops, 1);
	assert_non_null(strstr(x->msg, "did not answer the reconcile"));
}

static void refusals_and_bounds(void **state)
{
	struct fx *x = *state;
	up(x, 0, 11, 2, "old-node");
	uint64_t epoch, gid = started(x, &epoch);
	/* The node refuses the generation: the caller hears why. */
	struct sf_refused no = { .command_id = last(x, SF_MSG_GENERATE)->u.generate.command_id,
				 .session_id = 1, .code = 31, .reason = "engine busy",
				 .reason_len = 11 };
	feed(x, 0, SF_MSG_REFUSED, &no);
	assert_int_equal(x->errors, 1);
	assert_int_equal(x->code, SF_E_STATE);
	assert_non_null(strstr(x->msg, "refused generation"));
	assert_non_null(strstr(x->msg, "engine busy"));
	struct sf_err err;
	/* Options on a version 2 node. */
	struct sf_generate_opts o = { .logprobs = true };
	assert_int_equal(sf_head_generate(x->h, 1, 5, 0, &o, x->now, &gid, &err), SF_E_UNSUPPORTED);
	assert_string_equal(err.msg, "node old-node runs an older superfluid that cannot take these "
				     "generation options; update it");
	/* Generations queue one after another, up to the bound. */
	int gens_before = count(x, SF_MSG_GENERATE);
	for (int i = 0; i < SF_HEAD_MAX_GENS; i++)
		assert_int_equal(sf_head_generate(x->h, 1, 5, 0, NULL, x->now, &gid, &err), 0);
	assert_int_equal(count(x, SF_MSG_GENERATE), gens_before + 1);
	assert_int_equal(sf_head_generate(x->h, 1, 5, 0, NULL, x->now, &gid, &err), SF_E_LIMIT);
	assert_int_equal(sf_head_append(x->h, 1, NULL, 0, x->now, &err), SF_E_STATE);
	/* Sessions up to the head's limit. */
	struct sf_head_session_params p = { .model = "sim-1" };
	for (uint64_t sid = 2; sid <= 4; sid++)
		assert_int_equal(sf_head_session_open(x->h, sid, &p, x->now, &err), 0);
	assert_int_equal(sf_head_session_open(x->h, 5, &p, x->now, &err), SF_E_LIMIT);
	assert_non_null(strstr(err.msg, "its limit is 4"));
	p.qos = 9;
	assert_int_equal(sf_head_session_open(x->h, 6, &p, x->now, &err), SF_E_RANGE);
}

/* A node that refuses the assignment: the session goes to another node, or has none. */
static void refused_assign_moves_the_session(void **state)
{
	struct fx *x = *state;
	up(x, 0, 11, 3, "n0");
	up(x, 1, 12, 3, "n1");
	struct sf_err err;
	struct sf_head_session_params p = { .model = "sim-1" };
	assert_int_equal(sf_head_session_open(x->h, 1, &p, x->now, &err), 0);
	assert_int_equal(sf_head_session_node(x->h, 1), 0);
	struct sf_refused no = { .command_id =
					 last(x, SF_MSG_SESSION_ASSIGN)->u.session_assign.command_id,
				 .session_id = 1, .code = 5, .reason = "this node is full",
				 .reason_len = 17 };
	feed(x, 0, SF_MSG_REFUSED, &no);
	assert_int_equal(sf_head_session_node(x->h, 1), 1);
	assert_int_equal(x->sent.links[x->sent.n - 1], 12);
	assert_int_equal(x->sent.msgs[x->sent.n - 1].type, SF_MSG_SESSION_ASSIGN);
	assert_non_null(strstr(x->msg, "node n0 refused session 1 (this node is full); placed on "
				       "node n1"));
	no.command_id = last(x, SF_MSG_SESSION_ASSIGN)->u.session_assign.command_id;
	feed(x, 1, SF_MSG_REFUSED, &no);
	assert_int_equal(sf_head_session_node(x->h, 1), SF_HEAD_NO_NODE);
	assert_int_equal(x->code, SF_E_LIMIT);
	assert_non_null(strstr(x->msg, "every node serving sim-1 is full"));
	uint64_t gid;
	assert_int_equal(sf_head_generate(x->h, 1, 5, 0, NULL, x->now, &gid, &err), SF_E_LIMIT);
}

/* A node with no room for a session's content (its context memory full): an unleased session
 * moves to a node with room and is prefilled there, its generation with it; the first node's
 * refusal of the generation (its content was refused) changes nothing. */
static void content_without_room_moves(void **state)
{
	struct fx *x = *state;
	up(x, 0, 11, 3, "n0");
	up(x, 1, 12, 3, "n1");
	struct sf_err err;
	struct sf_head_session_params p = { .model = "sim-1" };
	assert_int_equal(sf_head_session_open(x->h, 1, &p, x->now, &err), 0);
	assert_int_equal(sf_head_session_node(x->h, 1), 0);
	uint32_t content[] = { 1, 2, 3 };
	assert_int_equal(sf_head_append(x->h, 1, content, 3, x->now, &err), 0);
	uint64_t gid;
	assert_int_equal(sf_head_generate(x->h, 1, 10, 0, NULL, x->now, &gid, &err), 0);
	const struct sf_msg *a = last(x, SF_MSG_SESSION_APPEND);
	assert_non_null(a);
	uint64_t gen_cmd = last(x, SF_MSG_GENERATE)->u.generate.command_id;
	struct sf_refused no = { .command_id = a->u.session_append.command_id, .session_id = 1,
				 .code = (uint32_t)-SF_E_NOMEM,
				 .reason = "context memory full", .reason_len = 19 };
	int appends = count(x, SF_MSG_SESSION_APPEND), gens = count(x, SF_MSG_GENERATE);
	feed(x, 0, SF_MSG_REFUSED, &no);
	assert_int_equal(sf_head_session_node(x->h, 1), 1);
	assert_non_null(strstr(x->msg, "node n0 has no room for the content of session 1 "
				       "(context memory full); placed on node n1"));
	/* Its content and generation went to n1. */
	assert_int_equal(count(x, SF_MSG_SESSION_APPEND), appends + 1);
	assert_int_equal(count(x, SF_MSG_GENERATE), gens + 1);
	assert_int_equal(x->sent.links[x->sent.n - 1], 12);
	/* n0's refusal of the generation comes after: nothing changes. */
	struct sf_refused no_gen = { .command_id = gen_cmd, .session_id = 1,
				     .code = (uint32_t)-SF_E_STATE, .reason = "stale", .reason_len = 5 };
	feed(x, 0, SF_MSG_REFUSED, &no_gen);
	assert_int_equal(sf_head_session_node(x->h, 1), 1);
	struct sf_head_stats st;
	sf_head_stats(x->h, &st);
	assert_int_equal(st.moved_for_room, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(events_once_and_acks_coalesced, setup, teardown),
		cmocka_unit_test_setup_teardown(a_gap_drops_the_link, setup, teardown),
		cmocka_unit_test_setup_teardown(leases_only_while_placed, setup, teardown),
		cmocka_unit_test_setup_teardown(reconcile_comes_first, setup, teardown),
		cmocka_unit_test_setup_teardown(refusals_and_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(refused_assign_moves_the_session, setup, teardown),
		cmocka_unit_test_setup_teardown(content_without_room_moves, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
