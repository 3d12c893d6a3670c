/* The link state machine, two endpoints driven against each other in memory: handshakes plain
 * and sealed, each way a handshake fails with its operator message, sealed records under
 * attack, liveness, versions, delivery in any chunking. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <superfluid/link.h>

#include "testutil.h"

struct pair {
	struct sf_link *head, *node;
	uint64_t now;
	size_t chunk; /* bytes per delivery; 0 = all at once */
	uint64_t rng; /* when set, random chunk sizes */
	struct sf_link_event hev, nev; /* the last non-NONE event of each side */
	int head_open, node_open, head_closed, node_closed;
	struct sf_model_info model;
};

static const char *token_a = "correct horse battery staple";
static const char *token_b = "a different token";

static void config(struct sf_link_config *c, enum sf_role role, const char *token, const char *id)
{
	memset(c, 0, sizeof(*c));
	c->role = role;
	if (token) {
		c->token = (const uint8_t *)token;
		c->token_len = strlen(token);
	}
	c->identity = id;
}

static struct pair *pair_new(const char *htoken, const char *ntoken, uint32_t node_vmax,
			     uint32_t head_vmin)
{
	struct pair *p = calloc(1, sizeof(*p));
	p->now = 1000;
	p->model = (struct sf_model_info){ .name = "sim-1", .name_len = 5, .tokenizer_digest = 77,
					   .n_layers = 8, .ctx_len = 4096, .vocab_size = 260 };
	struct sf_link_config hc, nc;
	config(&hc, SF_ROLE_HEAD, htoken, "head-1");
	hc.version_min = head_vmin;
	config(&nc, SF_ROLE_NODE, ntoken, "node-1");
	nc.version_max = node_vmax;
	nc.capacity = (struct sf_capacity){ .max_sessions = 64, .free_sessions = 60, .batch_size = 8 };
	nc.models = &p->model;
	nc.n_models = 1;
	static const uint64_t full = 0xf011;
	nc.tokenizer_full = &full;
	struct sf_err err;
	p->head = sf_link_new(&hc, p->now, &err);
	p->node = sf_link_new(&nc, p->now, &err);
	assert_non_null(p->head);
	assert_non_null(p->node);
	return p;
}

static void pair_free(struct pair *p)
{
	sf_link_free(p->head);
	sf_link_free(p->node);
	free(p);
}

static void poll_side(struct pair *p, struct sf_link *l)
{
	struct sf_link_event ev;
	while (sf_link_poll(l, p->now, &ev) != SF_LINK_EV_NONE) {
		if (l == p->head) {
			p->hev = ev;
			p->head_open += ev.kind == SF_LINK_EV_OPEN;
			p->head_closed += ev.kind == SF_LINK_EV_CLOSED;
		} else {
			p->nev = ev;
			p->node_open += ev.kind == SF_LINK_EV_OPEN;
			p->node_closed += ev.kind == SF_LINK_EV_CLOSED;
		}
	}
}

/* Moves what from has queued into to, in the pair's chunking. Returns bytes moved. */
static size_t move(struct pair *p, struct sf_link *from, struct sf_link *to)
{
	const uint8_t *d;
	size_t n = sf_link_tx(from, &d), moved = 0;
	while (moved < n) {
		size_t c = n - moved;
		if (p->rng)
			c = 1 + sf_test_rand(&p->rng) % (c < 3000 ? c : 3000);
		else if (p->chunk && c > p->chunk)
			c = p->chunk;
		size_t took = sf_link_recv(to, d + moved, c, p->now);
		moved += took;
		poll_side(p, to);
		if (!took && sf_link_state(to) != SF_LINK_CLOSED)
			fail_msg("receiver took nothing while open");
		if (sf_link_state(to) == SF_LINK_CLOSED) {
			moved = n;
			break;
		}
	}
	sf_link_tx_done(from, moved);
	return moved;
}

/* Runs both directions until nothing moves. */
static void settle(struct pair *p)
{
	for (int i = 0; i < 100; i++) {
		poll_side(p, p->head);
		poll_side(p, p->node);
		size_t a = move(p, p->head, p->node);
		size_t b = move(p, p->node, p->head);
		if (!a && !b)
			return;
	}
	fail_msg("links kept talking for 100 rounds");
}

static void expect_open(struct pair *p)
{
	settle(p);
	if (p->head_closed)
		fail_msg("head closed: %s", p->hev.err.msg);
	if (p->node_closed)
		fail_msg("node closed: %s", p->nev.err.msg);
	assert_int_equal(p->head_open, 1);
	assert_int_equal(p->node_open, 1);
	assert_int_equal(sf_link_state(p->head), SF_LINK_OPEN);
	assert_int_equal(sf_link_state(p->node), SF_LINK_OPEN);
}

static void opens_plain_and_sealed(void **state)
{
	const char *tokens[] = { NULL, token_a };
	size_t chunks[] = { 0, 1, 7 };
	for (int t = 0; t < 2; t++)
		for (int c = 0; c < 3; c++) {
			struct pair *p = pair_new(tokens[t], tokens[t], 0, 0);
			p->chunk = chunks[c];
			expect_open(p);
			const struct sf_link_peer *hp = sf_link_peer(p->head), *np = sf_link_peer(p->node);
			assert_non_null(hp);
			assert_non_null(np);
			assert_int_equal(hp->version, SF_VERSION_MAX);
			assert_int_equal(np->version, SF_VERSION_MAX);
			assert_int_equal(hp->encrypted, t == 1);
			assert_string_equal(hp->identity, "node-1");
			assert_string_equal(np->identity, "head-1");
			assert_int_equal(hp->capacity.max_sessions, 64);
			assert_int_equal(hp->n_models, 1);
			assert_string_equal(hp->models[0].name, "sim-1");
			assert_int_equal(hp->n_digests, 1);
			assert_int_equal(hp->digests[0].digest, 77);
			assert_int_equal(hp->digests[0].full, 0xf011); /* version 7 */
			pair_free(p);
		}
}

static void messages_flow_both_ways(void **state)
{
	for (int sealed = 0; sealed < 2; sealed++) {
		struct pair *p = pair_new(sealed ? token_a : NULL, sealed ? token_a : NULL, 0, 0);
		expect_open(p);
		struct sf_err err;
		struct sf_generate g = { .command_id = 5, .session_id = 6, .epoch = 7, .generation_id = 8,
					 .max_new_tokens = 9, .max_wall_ms = 10 };
		assert_int_equal(sf_link_send(p->head, SF_MSG_GENERATE, &g, p->now, &err), 0);
		settle(p);
		assert_int_equal(p->nev.kind, SF_LINK_EV_MSG);
		assert_int_equal(p->nev.msg->type, SF_MSG_GENERATE);
		assert_true(sf_msg_equal(SF_MSG_GENERATE, &g, &p->nev.msg->u.generate));
		uint32_t toks[] = { 1, 2, 3 };
		struct sf_token_event ev = { .session_id = 6, .generation_id = 8, .epoch = 7,
					     .kind = SF_EVENT_TOKENS, .tokens = toks, .n_tokens = 3 };
		struct sf_token_events te = { .events = &ev, .n_events = 1 };
		assert_int_equal(sf_link_send(p->node, SF_MSG_TOKEN_EVENTS, &te, p->now, &err), 0);
		settle(p);
		assert_int_equal(p->hev.kind, SF_LINK_EV_MSG);
		assert_true(sf_msg_equal(SF_MSG_TOKEN_EVENTS, &te, &p->hev.msg->u.token_events));
		pair_free(p);
	}
}

/* A frame encoded elsewhere (another thread's sf_msg_encode) goes out as sf_link_send would
 * send the message: plain and sealed. What is not one whole frame, or is not ours to send,
 * is refused naming why, and the link goes on. */
static void encoded_frames_are_sent_whole(void **state)
{
	for (int sealed = 0; sealed < 2; sealed++) {
		struct pair *p = pair_new(sealed ? token_a : NULL, sealed ? token_a : NULL, 0, 0);
		expect_open(p);
		struct sf_err err;
		uint32_t toks[] = { 4, 5 };
		struct sf_token_event ev = { .session_id = 6, .generation_id = 8, .epoch = 7,
					     .kind = SF_EVENT_TOKENS, .tokens = toks, .n_tokens = 2 };
		struct sf_token_events te = { .events = &ev, .n_events = 1 };
		struct sf_buf b;
		sf_buf_init(&b, 1u << 20);
		assert_int_equal(sf_msg_encode(&b, SF_MSG_TOKEN_EVENTS, &te, 3, SF_FRAME_PAYLOAD_MAX,
					       &err), 0);
		assert_true(sf_link_send_frame(p->node, sf_buf_head(&b), sf_buf_used(&b) - 1, p->now,
					       &err) < 0);
		size_t one = sf_buf_used(&b);
		assert_int_equal(sf_msg_encode(&b, SF_MSG_TOKEN_EVENTS, &te, 3, SF_FRAME_PAYLOAD_MAX,
					       &err), 0);
		assert_int_equal(sf_link_send_frame(p->node, sf_buf_head(&b), sf_buf_used(&b), p->now,
						    &err), SF_E_RANGE);
		assert_non_null(strstr(err.msg, "one whole frame"));
		assert_int_equal(sf_link_send_frame(p->node, sf_buf_head(&b), one, p->now, &err), 0);
		settle(p);
		assert_int_equal(p->hev.kind, SF_LINK_EV_MSG);
		assert_int_equal(p->hev.msg->type, SF_MSG_TOKEN_EVENTS);
		assert_true(sf_msg_equal(SF_MSG_TOKEN_EVENTS, &te, &p->hev.msg->u.token_events));
		/* A head's message from the node's side: refused as sf_link_send refuses it. */
		sf_buf_clear(&b);
		struct sf_generate g = { .command_id = 5, .session_id = 6, .epoch = 7 };
		assert_int_equal(sf_msg_encode(&b, SF_MSG_GENERATE, &g, 3, SF_FRAME_PAYLOAD_MAX, &err), 0);
		assert_int_equal(sf_link_send_frame(p->node, sf_buf_head(&b), sf_buf_used(&b), p->now,
						    &err), SF_E_PROTOCOL);
		assert_string_equal(err.msg, "a node does not send GENERATE");
		assert_int_equal(sf_link_state(p->node), SF_LINK_OPEN);
		sf_buf_free(&b);
		pair_free(p);
	}
}

static void a_big_frame_crosses_many_records(void **state)
{
	struct pair *p = pair_new(token_a, token_a, 0, 0);
	p->chunk = 5000;
	expect_open(p);
	size_t n = 1u << 20;
	uint8_t *data = malloc(n);
	for (size_t i = 0; i < n; i++)
		data[i] = (uint8_t)(i * 31 + 7);
	struct sf_xfer_chunk c = { .transfer_id = 1, .offset = 0, .data = data, .data_len = (uint32_t)n };
	struct sf_err err;
	assert_int_equal(sf_link_send(p->head, SF_MSG_XFER_CHUNK, &c, p->now, &err), 0);
	const uint8_t *d;
	assert_true(sf_link_tx(p->head, &d) > n + 16 * 16); /* about 17 records of overhead */
	settle(p);
	assert_int_equal(p->nev.kind, SF_LINK_EV_MSG);
	assert_int_equal(p->nev.msg->u.xfer_chunk.data_len, n);
	assert_memory_equal(p->nev.msg->u.xfer_chunk.data, data, n);
	free(data);
	pair_free(p);
}

static void wrong_token_is_refused(void **state)
{
	struct pair *p = pair_new(token_a, token_b, 0, 0);
	settle(p);
	assert_int_equal(p->head_closed, 1);
	assert_int_equal(p->hev.err.code, SF_E_AUTH);
	assert_string_equal(p->hev.err.msg,
			    "refused the fleet token: --fleet-auth and the node's --auth-file differ");
	assert_int_equal(p->node_closed, 1);
	assert_int_equal(p->nev.err.code, SF_E_AUTH);
	assert_int_equal(p->node_open + p->head_open, 0);
	pair_free(p);
}

static void token_on_one_side_only(void **state)
{
	struct pair *p = pair_new(token_a, NULL, 0, 0);
	settle(p);
	assert_int_equal(p->hev.err.code, SF_E_MODE);
	assert_non_null(strstr(p->hev.err.msg, "has no fleet token but this head has --fleet-auth"));
	assert_int_equal(p->nev.err.code, SF_E_MODE);
	assert_non_null(strstr(p->nev.err.msg, "no --auth-file"));
	pair_free(p);

	p = pair_new(NULL, token_a, 0, 0);
	settle(p);
	assert_int_equal(p->hev.err.code, SF_E_MODE);
	assert_non_null(strstr(p->hev.err.msg, "wants a sealed link (it has --auth-file)"));
	assert_int_equal(p->nev.err.code, SF_E_MODE);
	assert_int_equal(p->node_open + p->head_open, 0);
	pair_free(p);
}

static void no_answer_and_timeout(void **state)
{
	/* Nothing comes back at all. */
	struct pair *p = pair_new(NULL, NULL, 0, 0);
	assert_int_equal(sf_link_deadline(p->head), p->now + SF_LINK_HANDSHAKE_MS);
	p->now += SF_LINK_HANDSHAKE_MS - 1;
	poll_side(p, p->head);
	assert_int_equal(p->head_closed, 0);
	p->now += 1;
	poll_side(p, p->head);
	assert_int_equal(p->head_closed, 1);
	assert_int_equal(p->hev.err.code, SF_E_NO_ANSWER);
	assert_string_equal(p->hev.err.msg, "did not answer the handshake within 10 s; is "
					    "superfluid-noded listening there?");
	pair_free(p);

	/* The node answers its preamble but never finishes. */
	p = pair_new(token_a, token_a, 0, 0);
	const uint8_t *d;
	size_t n = sf_link_tx(p->head, &d);
	assert_int_equal(sf_link_recv(p->node, d, n, p->now), n);
	poll_side(p, p->node);
	n = sf_link_tx(p->node, &d);
	assert_int_equal(sf_link_recv(p->head, d, 8, p->now), 8); /* the reply preamble only */
	poll_side(p, p->head);
	assert_int_equal(p->head_closed, 0);
	p->now += SF_LINK_HANDSHAKE_MS;
	poll_side(p, p->head);
	assert_int_equal(p->hev.err.code, SF_E_HANDSHAKE_TIMEOUT);
	assert_string_equal(p->hev.err.msg, "did not finish the handshake within 10 s");
	/* And the node, which never got a HELLO, times out too. */
	poll_side(p, p->node);
	assert_int_equal(p->nev.err.code, SF_E_HANDSHAKE_TIMEOUT);
	pair_free(p);
}

static void garbage_is_named(void **state)
{
	struct pair *p = pair_new(NULL, NULL, 0, 0);
	const char *http = "HTTP/1.1 400 Bad Request\r\n\r\n";
	sf_link_recv(p->head, (const uint8_t *)http, strlen(http), p->now);
	poll_side(p, p->head);
	assert_int_equal(p->hev.err.code, SF_E_BAD_MAGIC);
	assert_non_null(strstr(p->hev.err.msg, "not the superfluid fleet link (starts with 48 54 54 50)"));
	/* One wrong byte is enough to tell. */
	sf_link_recv(p->node, (const uint8_t *)"G", 1, p->now);
	poll_side(p, p->node);
	assert_int_equal(p->nev.err.code, SF_E_BAD_MAGIC);
	pair_free(p);
}

/* NNpsk0 fixes each handshake message's length (48 bytes): a frame saying another, up to
 * 65,535, ends the link as soon as its two length bytes are in, not after waiting for it. */
static void handshake_lengths_are_fixed(void **state)
{
	static const uint16_t lens[] = { 65535, 49, 47, 0 };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct pair *p = pair_new(token_a, token_a, 0, 0);
		const uint8_t *d;
		assert_true(sf_link_tx(p->head, &d) >= 10);
		uint8_t b[10];
		memcpy(b, d, 8); /* the head's preamble, then the length */
		b[8] = (uint8_t)(lens[i] >> 8);
		b[9] = (uint8_t)lens[i];
		assert_int_equal(sf_link_recv(p->node, b, sizeof(b), p->now), sizeof(b));
		poll_side(p, p->node);
		assert_int_equal(p->node_closed, 1);
		assert_int_equal(p->nev.err.code, SF_E_PROTOCOL);
		char want[96];
		snprintf(want, sizeof(want), "a handshake message of %u bytes where the pattern's is 48",
			 lens[i]);
		if (!strstr(p->nev.err.msg, want))
			fail_msg("%s", p->nev.err.msg);
		pair_free(p);
		/* The head, answered with the node's preamble and a wrong length, the same. */
		p = pair_new(token_a, token_a, 0, 0);
		move(p, p->head, p->node);
		assert_true(sf_link_tx(p->node, &d) >= 10);
		memcpy(b, d, 8);
		assert_int_equal(sf_link_recv(p->head, b, sizeof(b), p->now), sizeof(b));
		poll_side(p, p->head);
		assert_int_equal(p->head_closed, 1);
		assert_int_equal(p->hev.err.code, SF_E_PROTOCOL);
		if (!strstr(p->hev.err.msg, want))
			fail_msg("%s", p->hev.err.msg);
		pair_free(p);
	}
}

static void closed_at_the_handshake(void **state)
{
	struct pair *p = pair_new(token_a, token_a, 0, 0);
	sf_link_eof(p->head, 0);
	poll_side(p, p->head);
	assert_int_equal(p->hev.err.code, SF_E_CLOSED);
	assert_string_equal(p->hev.err.msg, "closed the connection at the handshake without "
					    "answering it: the node refused or dropped it while busy "
					    "(its --max-handshakes, --max-handshakes-per-addr or "
					    "--max-links were full); a wrong token is answered as one");
	pair_free(p);
	/* A reset at the handshake means the same, with the OS's words. */
	p = pair_new(NULL, NULL, 0, 0);
	sf_link_eof(p->head, 104 /* ECONNRESET */);
	poll_side(p, p->head);
	assert_int_equal(p->hev.err.code, SF_E_CLOSED);
	assert_non_null(strstr(p->hev.err.msg, "at the handshake (Connection reset by peer)"));
	pair_free(p);
	/* Once open, a reset is an I/O error. */
	p = pair_new(NULL, NULL, 0, 0);
	expect_open(p);
	sf_link_eof(p->head, 104);
	poll_side(p, p->head);
	assert_int_equal(p->hev.err.code, SF_E_IO);
	assert_string_equal(p->hev.err.msg, "the connection failed (Connection reset by peer)");
	pair_free(p);
}

static void versions_are_negotiated(void **state)
{
	struct pair *p = pair_new(NULL, NULL, 2, 0);
	expect_open(p);
	assert_int_equal(sf_link_version(p->head), 2);
	assert_int_equal(sf_link_peer(p->head)->n_digests, 0);
	struct sf_generate_opts o = { .session_id = 1 };
	struct sf_err err;
	assert_int_equal(sf_link_send(p->head, SF_MSG_GENERATE_OPTS, &o, p->now, &err), SF_E_UNSUPPORTED);
	assert_string_equal(err.msg, "node node-1 runs an older superfluid (protocol 2) that cannot "
				     "take GENERATE_OPTS; update it");
	/* Version 2 links are never ended for silence. */
	p->now += 10 * SF_LINK_SILENCE_MS;
	poll_side(p, p->head);
	assert_int_equal(sf_link_state(p->head), SF_LINK_OPEN);
	pair_free(p);

	p = pair_new(NULL, NULL, 2, 3);
	settle(p);
	assert_int_equal(p->nev.err.code, SF_E_NO_VERSION);
	assert_int_equal(p->hev.err.code, SF_E_NO_VERSION);
	char want[64];
	snprintf(want, sizeof(want), "versions 2..2 and the head 3..%d", SF_VERSION_MAX);
	assert_non_null(strstr(p->hev.err.msg, want));
	pair_free(p);

	/* A version 4 node takes no kept pipeline stage (version 5). */
	p = pair_new(NULL, NULL, 4, 0);
	expect_open(p);
	assert_int_equal(sf_link_version(p->head), 4);
	struct sf_stage_release rel = { .pipe_id = 9 };
	assert_int_equal(sf_link_send(p->head, SF_MSG_STAGE_RELEASE, &rel, p->now, &err),
			 SF_E_UNSUPPORTED);
	struct sf_stage_forward_req fw = { .request_id = 1, .pipe_id = 9, .end_layer = 1 };
	assert_int_not_equal(sf_link_send(p->head, SF_MSG_STAGE_FORWARD_REQ, &fw, p->now, &err), 0);
	assert_non_null(strstr(err.msg, "protocol 4"));
	pair_free(p);

	/* A version 6 node states no full tokenizer digest (version 7), and a head of 7 reads
	 * its TOKENIZER at 6 (it read it at its own highest and refused the link). */
	p = pair_new(NULL, NULL, 6, 0);
	expect_open(p);
	assert_int_equal(sf_link_version(p->head), 6);
	assert_int_equal(sf_link_peer(p->head)->n_digests, 1);
	assert_int_equal(sf_link_peer(p->head)->digests[0].digest, 77);
	assert_int_equal(sf_link_peer(p->head)->digests[0].full, 0);
	pair_free(p);
}

/* Runs a sealed pair open, queues two messages from the head, and hands back its tx bytes. */
static struct pair *sealed_with_two_records(uint8_t **bytes, size_t *n, size_t *first)
{
	struct pair *p = pair_new(token_a, token_a, 0, 0);
	expect_open(p);
	struct sf_cancel c1 = { 1, 2, 3 }, c2 = { 4, 5, 6 };
	struct sf_err err;
	const uint8_t *d;
	assert_int_equal(sf_link_send(p->head, SF_MSG_CANCEL, &c1, p->now, &err), 0);
	*first = sf_link_tx(p->head, &d);
	assert_int_equal(sf_link_send(p->head, SF_MSG_CANCEL, &c2, p->now, &err), 0);
	*n = sf_link_tx(p->head, &d);
	*bytes = malloc(*n);
	memcpy(*bytes, d, *n);
	sf_link_tx_done(p->head, *n);
	return p;
}

static int count_msgs(struct pair *p, const uint8_t *b, size_t n)
{
	int msgs = 0;
	sf_link_recv(p->node, b, n, p->now);
	struct sf_link_event ev;
	enum sf_link_ev_kind k;
	while ((k = sf_link_poll(p->node, p->now, &ev)) != SF_LINK_EV_NONE) {
		msgs += k == SF_LINK_EV_MSG;
		if (k == SF_LINK_EV_CLOSED)
			p->nev = ev;
	}
	return msgs;
}

static void sealed_records_resist_tampering(void **state)
{
	uint8_t *b, *t;
	size_t n, first;
	/* Replayed: the first record twice. */
	struct pair *p = sealed_with_two_records(&b, &n, &first);
	t = malloc(n + first);
	memcpy(t, b, first);
	memcpy(t + first, b, n);
	assert_int_equal(count_msgs(p, t, n + first), 1);
	assert_int_equal(p->nev.err.code, SF_E_SEAL);
	assert_non_null(strstr(p->nev.err.msg, "altered, replayed, reordered or cut"));
	free(t);
	pair_free(p);
	free(b);
	/* Reordered: the second record first. */
	p = sealed_with_two_records(&b, &n, &first);
	t = malloc(n);
	memcpy(t, b + first, n - first);
	memcpy(t + n - first, b, first);
	assert_int_equal(count_msgs(p, t, n), 0);
	assert_int_equal(p->nev.err.code, SF_E_SEAL);
	free(t);
	pair_free(p);
	free(b);
	/* Altered: every byte position of the second record in turn. */
	for (size_t i = first; i < n; i++) {
		p = sealed_with_two_records(&b, &n, &first);
		b[i] ^= 0x20;
		int got = count_msgs(p, b, n);
		assert_int_equal(got, 1);
		assert_int_equal(sf_link_state(p->node), i < first + 2 ? sf_link_state(p->node)
								       : SF_LINK_CLOSED);
		pair_free(p);
		free(b);
	}
	/* Cut: the stream ends inside the second record. */
	p = sealed_with_two_records(&b, &n, &first);
	assert_int_equal(count_msgs(p, b, n - 3), 1);
	sf_link_eof(p->node, 0);
	assert_int_equal(count_msgs(p, b, 0), 0);
	assert_int_equal(p->nev.err.code, SF_E_TRUNCATED);
	pair_free(p);
	free(b);
}

static void plain_frames_cut_or_bad(void **state)
{
	struct pair *p = pair_new(NULL, NULL, 0, 0);
	expect_open(p);
	/* A frame cut by the end of the stream. */
	uint8_t half[5] = { 24, 0, 0, 0, 0x32 };
	sf_link_recv(p->node, half, sizeof(half), p->now);
	sf_link_eof(p->node, 0);
	poll_side(p, p->node);
	assert_int_equal(p->nev.err.code, SF_E_TRUNCATED);
	pair_free(p);
	/* An unknown type, a frame too big, reserved bits. */
	const uint8_t frames[3][8] = { { 0, 0, 0, 0, 0x99, 0x99, 0, 0 },
				       { 0xff, 0xff, 0xff, 0x7f, 0x31, 0, 0, 0 },
				       { 0, 0, 0, 0, 0x04, 0, 1, 0 } };
	const int codes[3] = { SF_E_UNKNOWN_TYPE, SF_E_FRAME_TOO_BIG, SF_E_HEADER };
	for (int i = 0; i < 3; i++) {
		p = pair_new(NULL, NULL, 0, 0);
		expect_open(p);
		sf_link_recv(p->node, frames[i], 8, p->now);
		poll_side(p, p->node);
		assert_int_equal(p->nev.err.code, codes[i]);
		assert_non_null(strstr(p->nev.err.msg, "sent a bad frame") ? "" : strstr(p->nev.err.msg, "frame"));
		pair_free(p);
	}
}

static void hello_that_lies_about_sealing(void **state)
{
	struct sf_link_config nc;
	config(&nc, SF_ROLE_NODE, NULL, "node");
	struct sf_err err;
	struct sf_link *node = sf_link_new(&nc, 0, &err);
	uint8_t pre[8] = { 'S', 'F', 'L', 'K', 1, 0, 0, 0 };
	sf_link_recv(node, pre, 8, 0);
	struct sf_buf b;
	sf_buf_init(&b, 1 << 20);
	struct sf_hello h = { .version_min = 2, .version_max = 3, .flags = SF_HELLO_ENCRYPTED };
	assert_int_equal(sf_encode_hello(&b, &h, 3, SF_FRAME_PAYLOAD_MAX, &err), 0);
	sf_link_recv(node, sf_buf_head(&b), sf_buf_used(&b), 0);
	struct sf_link_event ev;
	assert_int_equal(sf_link_poll(node, 0, &ev), SF_LINK_EV_CLOSED);
	assert_int_equal(ev.err.code, SF_E_MODE);
	sf_buf_free(&b);
	sf_link_free(node);
}

static void heartbeats_and_silence(void **state)
{
	struct pair *p = pair_new(token_a, token_a, 0, 0);
	expect_open(p);
	/* Idle links keep each other alive: 60 s in 100 ms steps. */
	for (int i = 0; i < 600; i++) {
		p->now += 100;
		settle(p);
	}
	assert_int_equal(sf_link_state(p->head), SF_LINK_OPEN);
	assert_int_equal(sf_link_state(p->node), SF_LINK_OPEN);
	assert_int_equal(p->hev.kind, SF_LINK_EV_OPEN); /* heartbeats never surface */
	/* The node goes silent: the head gives up at the limit, not before. */
	p->now += SF_LINK_SILENCE_MS - 200;
	poll_side(p, p->head);
	assert_int_equal(sf_link_state(p->head), SF_LINK_OPEN);
	assert_true(sf_link_deadline(p->head) <= p->now + 200);
	p->now += 200;
	poll_side(p, p->head);
	assert_int_equal(p->hev.err.code, SF_E_SILENT);
	assert_non_null(strstr(p->hev.err.msg, "silence limit"));
	pair_free(p);
}

static void goodbye_says_why(void **state)
{
	struct pair *p = pair_new(NULL, NULL, 0, 0);
	expect_open(p);
	sf_link_goodbye(p->node, 1, "node shutting down", p->now);
	assert_int_equal(sf_link_state(p->node), SF_LINK_CLOSING);
	struct sf_err err;
	struct sf_cancel c = { 1, 2, 3 };
	assert_int_equal(sf_link_send(p->node, SF_MSG_CANCEL, &c, p->now, &err), SF_E_STATE);
	settle(p);
	assert_int_equal(p->hev.err.code, SF_E_GOODBYE);
	assert_non_null(strstr(p->hev.err.msg, "node shutting down"));
	pair_free(p);
}

static void send_queue_is_bounded(void **state)
{
	struct sf_link_config hc, nc;
	config(&hc, SF_ROLE_HEAD, NULL, "h");
	hc.tx_limit = 4096;
	config(&nc, SF_ROLE_NODE, NULL, "n");
	struct sf_err err;
	struct pair *p = calloc(1, sizeof(*p));
	p->head = sf_link_new(&hc, 0, &err);
	p->node = sf_link_new(&nc, 0, &err);
	expect_open(p);
	struct sf_cancel c = { 1, 2, 3 };
	int rc = 0, sent = 0;
	while ((rc = sf_link_send(p->head, SF_MSG_CANCEL, &c, 0, &err)) == 0)
		sent++;
	assert_int_equal(rc, SF_E_LIMIT);
	assert_non_null(strstr(err.msg, "send queue full"));
	assert_int_equal(sent, 4096 / 32);
	pair_free(p);
}

/* Any chunking of the two byte streams gives the same messages, in order. */
static void random_chunking_delivers_everything(void **state)
{
	for (uint64_t seed = 1; seed <= 30; seed++) {
		bool sealed = seed & 1;
		struct pair *p = pair_new(sealed ? token_a : NULL, sealed ? token_a : NULL, 0, 0);
		p->rng = seed;
		expect_open(p);
		struct sf_arena a;
		sf_arena_init(&a, 64u << 20);
		struct sf_msg sent[20];
		struct sf_err err;
		int got = 0;
		for (int i = 0; i < 20; i++) {
			uint16_t t;
			do
				t = sf_msg_types[sf_test_rand(&p->rng) % sf_msg_type_count];
			/* What a head sends, but for what the link itself handles. */
			while (t <= SF_MSG_HEARTBEAT || !(sf_msg_direction(t) & SF_DIR_H2N));
			assert_int_equal(sf_msg_sample(t, seed * 100 + i, 6, &a, &sent[i]), 0);
			assert_int_equal(sf_link_send(p->head, t, &sent[i].u, p->now, &err), 0);
		}
		const uint8_t *d;
		size_t n = sf_link_tx(p->head, &d), at = 0;
		while (at < n) {
			size_t c = 1 + sf_test_rand(&p->rng) % 2000;
			if (c > n - at)
				c = n - at;
			at += sf_link_recv(p->node, d + at, c, p->now);
			struct sf_link_event ev;
			while (sf_link_poll(p->node, p->now, &ev) != SF_LINK_EV_NONE) {
				assert_int_equal(ev.kind, SF_LINK_EV_MSG);
				assert_int_equal(ev.msg->type, sent[got].type);
				assert_true(sf_msg_equal(ev.msg->type, &sent[got].u, &ev.msg->u));
				got++;
			}
		}
		sf_link_tx_done(p->head, n);
		assert_int_equal(got, 20);
		sf_arena_free(&a);
		pair_free(p);
	}
}

static void each_side_sends_only_its_own_messages(void **state)
{
	struct pair *p = pair_new(NULL, NULL, 0, 0);
	expect_open(p);
	struct sf_err err;
	struct sf_token_events te = { 0 };
	assert_int_equal(sf_link_send(p->head, SF_MSG_TOKEN_EVENTS, &te, p->now, &err), SF_E_PROTOCOL);
	assert_string_equal(err.msg, "a head does not send TOKEN_EVENTS");
	struct sf_cancel c = { 1, 2, 3 };
	assert_int_equal(sf_link_send(p->node, SF_MSG_CANCEL, &c, p->now, &err), SF_E_PROTOCOL);
	/* What the link says itself cannot be sent through it. */
	struct sf_hello h = { 0 };
	assert_int_equal(sf_link_send(p->head, SF_MSG_HELLO, &h, p->now, &err), SF_E_STATE);
	struct sf_goodbye g = { 0 };
	assert_int_equal(sf_link_send(p->node, SF_MSG_GOODBYE, &g, p->now, &err), SF_E_STATE);
	assert_non_null(strstr(err.msg, "sf_link_goodbye"));
	/* A head that receives a head's message ends the link. */
	struct sf_buf b;
	sf_buf_init(&b, 1 << 16);
	assert_int_equal(sf_encode_cancel(&b, &c, 3, SF_FRAME_PAYLOAD_MAX, &err), 0);
	sf_link_recv(p->head, sf_buf_head(&b), sf_buf_used(&b), p->now);
	poll_side(p, p->head);
	assert_int_equal(p->hev.err.code, SF_E_PROTOCOL);
	assert_string_equal(p->hev.err.msg, "sent CANCEL, which only a head sends");
	sf_buf_free(&b);
	pair_free(p);
}

static void connect_errors_name_the_os_error(void **state)
{
	char buf[128];
	sf_link_describe_connect_error(111, buf, sizeof(buf));
	assert_string_equal(buf, "unreachable (Connection refused)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(opens_plain_and_sealed),
		cmocka_unit_test(messages_flow_both_ways),
		cmocka_unit_test(encoded_frames_are_sent_whole),
		cmocka_unit_test(a_big_frame_crosses_many_records),
		cmocka_unit_test(wrong_token_is_refused),
		cmocka_unit_test(token_on_one_side_only),
		cmocka_unit_test(no_answer_and_timeout),
		cmocka_unit_test(garbage_is_named),
		cmocka_unit_test(closed_at_the_handshake),
		cmocka_unit_test(handshake_lengths_are_fixed),
		cmocka_unit_test(versions_are_negotiated),
		cmocka_unit_test(sealed_records_resist_tampering),
		cmocka_unit_test(plain_frames_cut_or_bad),
		cmocka_unit_test(hello_that_lies_about_sealing),
		cmocka_unit_test(heartbeats_and_silence),
		cmocka_unit_test(goodbye_says_why),
		cmocka_unit_test(send_queue_is_bounded),
		cmocka_unit_test(random_chunking_delivers_everything),
		cmocka_unit_test(each_side_sends_only_its_own_messages),
		cmocka_unit_test(connect_errors_name_the_os_error),
	};
	return cmocka_run_group_tests_name("link", tests, NULL, NULL);
}
