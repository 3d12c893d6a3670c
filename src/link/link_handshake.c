/* The handshake: preambles, Noise NNpsk0 when sealed, then HELLO / HELLO_ACK / TOKENIZER.
 * Each way it fails ends the link with the sentence the operator needs (PROTOCOL.md). */
#include "link/link_internal.h"

#include <stdio.h>
#include <string.h>

#include <sodium.h>

static const uint8_t magic[4] = { 'S', 'F', 'L', 'K' };
static const char prologue_label[] = "superfluid fleet link";

static void put_preamble(uint8_t out[SF_PREAMBLE_LEN], uint8_t mode, uint8_t status)
{
	memcpy(out, magic, 4);
	out[4] = SF_WIRE_MAJOR;
	out[5] = mode;
	out[6] = status;
	out[7] = 0;
}

/* Checks the first bytes received are the fleet link's; returns 1 when all 8 are there and
 * good, 0 when more are needed, or a negative code after failing the link. */
static int check_preamble(struct sf_link *l, const uint8_t *p, size_t n)
{
	if (n == 0)
		return 0;
	size_t k = n < 4 ? n : 4;
	if (memcmp(p, magic, k) != 0) {
		char shown[16] = "";
		for (size_t i = 0, at = 0; i < k; i++)
			at += (size_t)snprintf(shown + at, sizeof(shown) - at, "%s%02x", i ? " " : "",
					       p[i]);
		if (l->cfg.role == SF_ROLE_HEAD)
			return sf__link_fail(l, SF_E_BAD_MAGIC,
					     "answered with bytes that are not the superfluid fleet link "
					     "(starts with %s); is superfluid-noded listening there?", shown);
		return sf__link_fail(l, SF_E_BAD_MAGIC,
				     "sent bytes that are not the superfluid fleet link (starts with "
				     "%s); only superfluid-headd should connect to this port", shown);
	}
	if (n < SF_PREAMBLE_LEN)
		return 0;
	if (p[4] != SF_WIRE_MAJOR)
		return sf__link_fail(l, SF_E_PROTOCOL,
				     "speaks fleet link wire %u, this build speaks %u; update the older one",
				     p[4], SF_WIRE_MAJOR);
	if (p[5] > SF_MODE_SEALED)
		return sf__link_fail(l, SF_E_PROTOCOL, "asked for an unknown link mode %u", p[5]);
	return 1;
}

/* Every NNpsk0 handshake message is an ephemeral key and an empty payload's tag. */
#define NOISE_MSG_LEN (SF_NOISE_DHLEN + SF_NOISE_TAGLEN)

/* A Noise message framed by a u16 big-endian length at at in rx_raw: 1 with msg and len set
 * when whole, 0 when more is needed. The pattern fixes its length, so a frame saying another
 * fails the link as soon as the length is in (negative), not after waiting for its bytes. */
static int take_noise_msg(struct sf_link *l, size_t at, const uint8_t **msg, size_t *len)
{
	struct sf_buf *in = &l->rx_raw;
	if (sf_buf_used(in) < at + 2)
		return 0;
	const uint8_t *p = sf_buf_head(in) + at;
	size_t n = (size_t)p[0] << 8 | p[1];
	if (n != NOISE_MSG_LEN)
		return sf__link_fail(l, SF_E_PROTOCOL,
				     "sent a handshake message of %zu bytes where the pattern's is %d: "
				     "not a superfluid peer, or something between alters the link", n,
				     NOISE_MSG_LEN);
	if (sf_buf_used(in) < at + 2 + n)
		return 0;
	*msg = p + 2;
	*len = n;
	return 1;
}

static int append_noise_msg(struct sf_link *l, const uint8_t *msg, size_t n)
{
	uint8_t len[2] = { (uint8_t)(n >> 8), (uint8_t)n };
	if (sf_buf_append(&l->tx, len, 2) || sf_buf_append(&l->tx, msg, n))
		return sf__link_fail(l, SF_E_NOMEM, "no room to queue the handshake");
	return 0;
}

static int start_noise(struct sf_link *l, bool initiator)
{
	uint8_t prologue[sizeof(prologue_label) - 1 + SF_PREAMBLE_LEN];
	memcpy(prologue, prologue_label, sizeof(prologue_label) - 1);
	memcpy(prologue + sizeof(prologue_label) - 1, l->preamble, SF_PREAMBLE_LEN);
	int rc = sf_noise_hs_init(&l->hs, SF_NOISE_NNPSK0, initiator, prologue, sizeof(prologue),
				  l->psk);
	sodium_memzero(l->psk, sizeof(l->psk)); /* the handshake holds it now */
	if (rc)
		return sf__link_fail(l, SF_E_CRYPTO, "handshake setup failed: %s",
				     sf_noise_strerror(rc));
	return 0;
}

static int finish_noise(struct sf_link *l)
{
	if (sf_noise_hs_split(&l->hs, &l->tx_cs, &l->rx_cs, NULL))
		return sf__link_fail(l, SF_E_STATE, "handshake split before it finished");
	return 0;
}

static int send_hello(struct sf_link *l, uint64_t now)
{
	struct sf_hello h = {
		.version_min = l->cfg.version_min,
		.version_max = l->cfg.version_max,
		.flags = l->sealed ? SF_HELLO_ENCRYPTED : 0,
		.identity = l->identity,
		.identity_len = (uint32_t)strlen(l->identity),
		.heartbeat_ms = l->cfg.heartbeat_ms,
		.silence_ms = l->cfg.silence_ms,
	};
	struct sf_err err;
	if (sf__link_queue(l, SF_MSG_HELLO, &h, l->cfg.version_max, now, &err))
		return sf__link_fail(l, err.code, "%s", err.msg);
	return 0;
}

int sf__link_start_head(struct sf_link *l, uint64_t now)
{
	put_preamble(l->preamble, l->sealed ? SF_MODE_SEALED : SF_MODE_PLAIN, 0);
	if (sf_buf_append(&l->tx, l->preamble, SF_PREAMBLE_LEN))
		return sf__link_fail(l, SF_E_NOMEM, "no room to queue the handshake");
	if (!l->sealed)
		return send_hello(l, now); /* nothing to wait for: say hello at once */
	if (start_noise(l, true))
		return l->close_err.code;
	uint8_t msg[NOISE_MSG_LEN];
	int n = sf_noise_hs_write(&l->hs, NULL, 0, msg, sizeof(msg));
	if (n < 0)
		return sf__link_fail(l, SF_E_CRYPTO, "handshake failed: %s", sf_noise_strerror(n));
	return append_noise_msg(l, msg, (size_t)n);
}

/* Head: the node's reply preamble, then Noise message 2 on a sealed link. */
static int head_reply(struct sf_link *l, uint64_t now)
{
	struct sf_buf *in = &l->rx_raw;
	int rc = check_preamble(l, sf_buf_head(in), sf_buf_used(in));
	if (rc <= 0)
		return rc;
	const uint8_t *p = sf_buf_head(in);
	uint8_t mode = p[5], status = p[6];
	if (status == SF_STATUS_AUTH)
		return sf__link_fail(l, SF_E_AUTH,
				     "refused the fleet token: --fleet-auth and the node's --auth-file differ");
	if (status == SF_STATUS_MODE || mode != (l->sealed ? SF_MODE_SEALED : SF_MODE_PLAIN)) {
		if (l->sealed)
			return sf__link_fail(l, SF_E_MODE,
					     "has no fleet token but this head has --fleet-auth; give the "
					     "node the same token with --auth-file, or drop --fleet-auth");
		return sf__link_fail(l, SF_E_MODE,
				     "wants a sealed link (it has --auth-file) but this head has no "
				     "--fleet-auth; set --fleet-auth to the token in the node's --auth-file");
	}
	if (status != SF_STATUS_OK)
		return sf__link_fail(l, SF_E_PROTOCOL, "answered the handshake with unknown status %u",
				     status);
	if (!l->sealed) {
		sf_buf_consume(in, SF_PREAMBLE_LEN);
		l->step = SF_HS_AWAIT_ACK;
		return 1;
	}
	const uint8_t *msg;
	size_t len;
	rc = take_noise_msg(l, SF_PREAMBLE_LEN, &msg, &len);
	if (rc <= 0)
		return rc;
	int n = sf_noise_hs_read(&l->hs, msg, len, NULL, 0);
	sf_buf_consume(in, SF_PREAMBLE_LEN + 2 + len);
	if (n < 0)
		return sf__link_fail(l, SF_E_AUTH,
				     "sent a handshake answer that failed its check (%s): the tokens "
				     "differ or something between alters the link", sf_noise_strerror(n));
	if (finish_noise(l) || send_hello(l, now))
		return l->close_err.code;
	l->step = SF_HS_AWAIT_ACK;
	return 1;
}

/* Node: the head's preamble, then Noise message 1 on a sealed link; answers with a reply. */
static int node_preamble(struct sf_link *l)
{
	struct sf_buf *in = &l->rx_raw;
	int rc = check_preamble(l, sf_buf_head(in), sf_buf_used(in));
	if (rc <= 0)
		return rc;
	const uint8_t *p = sf_buf_head(in);
	uint8_t want = l->sealed ? SF_MODE_SEALED : SF_MODE_PLAIN;
	uint8_t reply[SF_PREAMBLE_LEN];
	if (p[5] != want) {
		put_preamble(reply, want, SF_STATUS_MODE);
		(void)sf_buf_append(&l->tx, reply, sizeof(reply));
		if (l->sealed)
			return sf__link_fail(l, SF_E_MODE,
					     "offered a plain link but this node has --auth-file; set the "
					     "head's --fleet-auth to this node's token");
		return sf__link_fail(l, SF_E_MODE,
				     "wants a sealed link (it has --fleet-auth) but this node has no "
				     "--auth-file; give this node the head's token with --auth-file");
	}
	memcpy(l->preamble, p, SF_PREAMBLE_LEN);
	if (!l->sealed) {
		sf_buf_consume(in, SF_PREAMBLE_LEN);
		put_preamble(reply, want, SF_STATUS_OK);
		if (sf_buf_append(&l->tx, reply, sizeof(reply)))
			return sf__link_fail(l, SF_E_NOMEM, "no room to queue the handshake");
		l->step = SF_HS_AWAIT_HELLO;
		return 1;
	}
	const uint8_t *msg;
	size_t len;
	rc = take_noise_msg(l, SF_PREAMBLE_LEN, &msg, &len);
	if (rc <= 0)
		return rc;
	if (start_noise(l, false))
		return l->close_err.code;
	int n = sf_noise_hs_read(&l->hs, msg, len, NULL, 0);
	sf_buf_consume(in, SF_PREAMBLE_LEN + 2 + len);
	if (n < 0) {
		put_preamble(reply, want, SF_STATUS_AUTH);
		(void)sf_buf_append(&l->tx, reply, sizeof(reply));
		return sf__link_fail(l, SF_E_AUTH,
				     "offered a fleet token that differs from this node's --auth-file");
	}
	uint8_t out[NOISE_MSG_LEN];
	n = sf_noise_hs_write(&l->hs, NULL, 0, out, sizeof(out));
	if (n < 0)
		return sf__link_fail(l, SF_E_CRYPTO, "handshake failed: %s", sf_noise_strerror(n));
	put_preamble(reply, want, SF_STATUS_OK);
	if (sf_buf_append(&l->tx, reply, sizeof(reply)) || append_noise_msg(l, out, (size_t)n))
		return sf__link_fail(l, SF_E_NOMEM, "no room to queue the handshake");
	if (finish_noise(l))
		return l->close_err.code;
	l->step = SF_HS_AWAIT_HELLO;
	return 1;
}

/* The next handshake frame, decoded into the arena kept for the link's life: at the version
 * chosen once HELLO_ACK said it (TOKENIZER's entries gained a field in version 7), before
 * that at this side's highest (HELLO and HELLO_ACK are the same in every version). */
static int handshake_frame(struct sf_link *l, struct sf_msg *m)
{
	int rc = sf__link_read_msg(l, &l->peer_arena, l->version ? l->version : l->cfg.version_max,
				   m, " in the handshake");
	if (rc <= 0)
		return rc;
	if (m->type == SF_MSG_GOODBYE)
		return sf__link_fail(l,
				     m->u.goodbye.code == (uint32_t)-SF_E_NO_VERSION ? SF_E_NO_VERSION
										     : SF_E_GOODBYE,
				     "ended the handshake: %s", m->u.goodbye.reason);
	return 1;
}

static int check_sealed_flag(struct sf_link *l, uint32_t flags)
{
	bool says = flags & SF_HELLO_ENCRYPTED;
	if (says == l->sealed)
		return 0;
	return sf__link_fail(l, SF_E_MODE,
			     "says the link is %s but it is %s: something between the two alters it",
			     says ? "sealed" : "plain", l->sealed ? "sealed" : "plain");
}

static void open_link(struct sf_link *l, struct sf_link_event *ev)
{
	l->state = SF_LINK_OPEN;
	l->step = SF_HS_DONE;
	l->have_peer = true;
	l->peer.version = l->version;
	l->peer.encrypted = l->sealed;
	ev->kind = SF_LINK_EV_OPEN;
}

/* Node: the head's HELLO; picks the version and answers. */
static int node_hello(struct sf_link *l, uint64_t now, struct sf_link_event *ev)
{
	struct sf_msg m;
	int rc = handshake_frame(l, &m);
	if (rc <= 0)
		return rc;
	if (m.type != SF_MSG_HELLO)
		return sf__link_fail(l, SF_E_PROTOCOL, "sent %s where HELLO belongs", sf_msg_name(m.type));
	const struct sf_hello *h = &m.u.hello;
	if (check_sealed_flag(l, h->flags))
		return l->close_err.code;
	uint32_t lo = h->version_min > l->cfg.version_min ? h->version_min : l->cfg.version_min;
	uint32_t hi = h->version_max < l->cfg.version_max ? h->version_max : l->cfg.version_max;
	struct sf_err err;
	if (lo > hi) {
		char why[SF_MAX_REASON];
		snprintf(why, sizeof(why),
			 "this node speaks protocol versions %u..%u and the head %u..%u; update the "
			 "older one", l->cfg.version_min, l->cfg.version_max, h->version_min,
			 h->version_max);
		struct sf_goodbye g = { .code = (uint32_t)-SF_E_NO_VERSION, .reason = why,
					.reason_len = (uint32_t)strlen(why) };
		(void)sf__link_queue(l, SF_MSG_GOODBYE, &g, SF_VERSION_MIN, now, &err);
		return sf__link_fail(l, SF_E_NO_VERSION, "%s", why);
	}
	l->version = hi;
	l->peer.identity = h->identity;
	l->peer.heartbeat_ms = h->heartbeat_ms;
	l->peer.silence_ms = h->silence_ms;
	/* Heartbeat often enough that the head's silence limit never fires on a live node. */
	if (h->silence_ms && h->silence_ms / 3 < l->heartbeat_ms)
		l->heartbeat_ms = h->silence_ms / 3 ? h->silence_ms / 3 : 1;
	struct sf_hello_ack ack = {
		.version = l->version,
		.flags = l->sealed ? SF_HELLO_ENCRYPTED : 0,
		.identity = l->identity,
		.identity_len = (uint32_t)strlen(l->identity),
		.capacity = l->cfg.capacity,
		.models = (struct sf_model_info *)l->cfg.models,
		.n_models = l->cfg.n_models,
	};
	if (sf__link_queue(l, SF_MSG_HELLO_ACK, &ack, l->version, now, &err))
		return sf__link_fail(l, err.code, "cannot send the hello answer: %s", err.msg);
	if (l->version >= 3) {
		uint32_t n = l->cfg.n_models;
		struct sf_model_digest *d = n ? sf_arena_alloc(&l->peer_arena, n * sizeof(*d)) : NULL;
		if (n && !d)
			return sf__link_fail(l, SF_E_NOMEM, "no memory for the tokenizer digests");
		for (uint32_t i = 0; i < n; i++) {
			d[i].model = l->cfg.models[i].name;
			d[i].model_len = l->cfg.models[i].name_len;
			d[i].digest = l->cfg.models[i].tokenizer_digest;
			d[i].full = l->version >= 7 && l->cfg.tokenizer_full
					    ? l->cfg.tokenizer_full[i] : 0;
		}
		struct sf_tokenizer t = { .models = d, .n_models = n };
		if (sf__link_queue(l, SF_MSG_TOKENIZER, &t, l->version, now, &err))
			return sf__link_fail(l, err.code, "cannot send the tokenizer digests: %s",
					     err.msg);
	}
	open_link(l, ev);
	return 1;
}

/* Head: HELLO_ACK, then (version 3) TOKENIZER. */
static int head_ack(struct sf_link *l, struct sf_link_event *ev)
{
	struct sf_msg m;
	int rc = handshake_frame(l, &m);
	if (rc <= 0)
		return rc;
	if (l->step == SF_HS_AWAIT_ACK) {
		if (m.type != SF_MSG_HELLO_ACK)
			return sf__link_fail(l, SF_E_PROTOCOL, "sent %s where HELLO_ACK belongs",
					     sf_msg_name(m.type));
		const struct sf_hello_ack *a = &m.u.hello_ack;
		if (a->version < l->cfg.version_min || a->version > l->cfg.version_max)
			return sf__link_fail(l, SF_E_NO_VERSION,
					     "chose protocol version %u, outside this head's %u..%u",
					     a->version, l->cfg.version_min, l->cfg.version_max);
		if (check_sealed_flag(l, a->flags))
			return l->close_err.code;
		l->version = a->version;
		l->peer.identity = a->identity;
		l->peer.capacity = a->capacity;
		l->peer.models = a->models;
		l->peer.n_models = a->n_models;
		if (l->version >= 3) {
			l->step = SF_HS_AWAIT_TOKENIZER;
			return 2; /* go on: the digests follow */
		}
		open_link(l, ev);
		return 1;
	}
	if (m.type != SF_MSG_TOKENIZER)
		return sf__link_fail(l, SF_E_PROTOCOL, "sent %s where its TOKENIZER digests belong",
				     sf_msg_name(m.type));
	for (uint32_t i = 0; i < m.u.tokenizer.n_models; i++)
		if (m.u.tokenizer.models[i].digest == 0)
			return sf__link_fail(l, SF_E_RANGE,
					     "sent tokenizer digest 0 for model %s (0 is never a digest)",
					     m.u.tokenizer.models[i].model);
	l->peer.digests = m.u.tokenizer.models;
	l->peer.n_digests = m.u.tokenizer.n_models;
	open_link(l, ev);
	return 1;
}

int sf__link_handshake_step(struct sf_link *l, uint64_t now, struct sf_link_event *ev)
{
	for (;;) {
		int rc;
		switch (l->step) {
		case SF_HS_AWAIT_REPLY:
			rc = head_reply(l, now);
			if (rc > 0)
				continue;
			return rc < 0 ? -1 : 0;
		case SF_HS_AWAIT_PREAMBLE:
			rc = node_preamble(l);
			if (rc > 0)
				continue;
			return rc < 0 ? -1 : 0;
		case SF_HS_AWAIT_ACK:
		case SF_HS_AWAIT_TOKENIZER:
			rc = head_ack(l, ev);
			if (rc == 2)
				continue;
			return rc < 0 ? -1 : rc;
		case SF_HS_AWAIT_HELLO:
			rc = node_hello(l, now, ev);
			return rc < 0 ? -1 : rc;
		case SF_HS_DONE:
			return 0;
		}
	}
}
