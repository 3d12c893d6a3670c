/* The link's life: buffers, frames, events, timers and sending. The handshake steps are in
 * link_handshake.c, the sealed record layer in link_record.c. */
#include "link/link_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

/* Room beyond one whole frame that the receive buffers keep, so a frame and a read's worth of
 * the next one fit. */
#define SF_RX_SLACK (128u << 10)

int sf__link_fail(struct sf_link *l, int code, const char *fmt, ...)
{
	if (l->state == SF_LINK_CLOSED)
		return code;
	va_list ap;
	va_start(ap, fmt);
	l->close_err.code = code;
	vsnprintf(l->close_err.msg, sizeof(l->close_err.msg), fmt, ap);
	va_end(ap);
	l->state = SF_LINK_CLOSED;
	sf_noise_hs_wipe(&l->hs);
	return code;
}

struct sf_link *sf_link_new(const struct sf_link_config *cfg, uint64_t now_ms, struct sf_err *err)
{
	if (cfg->role != SF_ROLE_HEAD && cfg->role != SF_ROLE_NODE) {
		sf_err_set(err, SF_E_STATE, "link role must be head or node");
		return NULL;
	}
	if (sodium_init() < 0) {
		sf_err_set(err, SF_E_CRYPTO, "libsodium failed to start");
		return NULL;
	}
	struct sf_link *l = calloc(1, sizeof(*l));
	if (!l) {
		sf_err_set(err, SF_E_NOMEM, "no memory for a link");
		return NULL;
	}
	l->cfg = *cfg;
	l->cfg.token = NULL;
	l->cfg.token_len = 0;
	struct sf_link_config *c = &l->cfg;
	if (!c->version_min)
		c->version_min = SF_VERSION_MIN;
	if (!c->version_max)
		c->version_max = SF_VERSION_MAX;
	if (!c->max_payload || c->max_payload > SF_FRAME_PAYLOAD_MAX)
		c->max_payload = SF_FRAME_PAYLOAD_MAX;
	if (!c->tx_limit)
		c->tx_limit = SF_LINK_TX_LIMIT;
	if (!c->handshake_ms)
		c->handshake_ms = SF_LINK_HANDSHAKE_MS;
	if (!c->heartbeat_ms)
		c->heartbeat_ms = SF_LINK_HEARTBEAT_MS;
	if (!c->silence_ms)
		c->silence_ms = SF_LINK_SILENCE_MS;
	if (c->version_min < SF_VERSION_MIN || c->version_max > SF_VERSION_MAX ||
	    c->version_min > c->version_max) {
		sf_err_set(err, SF_E_NO_VERSION, "link versions %u..%u: this build speaks %u..%u",
			   c->version_min, c->version_max, SF_VERSION_MIN, SF_VERSION_MAX);
		free(l);
		return NULL;
	}
	snprintf(l->identity, sizeof(l->identity), "%s", cfg->identity ? cfg->identity : "");
	c->identity = l->identity;
	if (cfg->token && cfg->token_len) {
		l->sealed = true;
		sf_noise_psk_from_token(cfg->token, cfg->token_len, l->psk);
	}
	size_t rx_limit = (size_t)c->max_payload + SF_FRAME_HDR_LEN + SF_RX_SLACK;
	sf_buf_init(&l->rx_raw, rx_limit);
	sf_buf_init(&l->rx_plain, rx_limit);
	sf_buf_init(&l->tx, c->tx_limit);
	sf_buf_init(&l->scratch, (size_t)c->max_payload + SF_FRAME_HDR_LEN);
	/* A decoded message takes at most a small multiple of its payload (see the codec). */
	sf_arena_init(&l->arena, 8 * (size_t)c->max_payload + 65536);
	sf_arena_init(&l->peer_arena, 8 * (size_t)c->max_payload + 65536);
	l->started_ms = l->last_rx_ms = l->last_tx_ms = now_ms;
	l->heartbeat_ms = c->heartbeat_ms;
	l->silence_ms = c->silence_ms;
	if (c->role == SF_ROLE_HEAD) {
		l->step = SF_HS_AWAIT_REPLY;
		if (sf__link_start_head(l, now_ms)) {
			sf_err_set(err, l->close_err.code, "%s", l->close_err.msg);
			sf_link_free(l);
			return NULL;
		}
	} else {
		l->step = SF_HS_AWAIT_PREAMBLE;
	}
	return l;
}

void sf_link_free(struct sf_link *l)
{
	if (!l)
		return;
	sodium_memzero(l->psk, sizeof(l->psk));
	sf_noise_hs_wipe(&l->hs);
	sf_noise_cs_wipe(&l->tx_cs);
	sf_noise_cs_wipe(&l->rx_cs);
	/* Opened plaintext may hold session content: wipe it too. */
	if (l->rx_plain.data)
		sodium_memzero(l->rx_plain.data, l->rx_plain.cap);
	if (l->scratch.data)
		sodium_memzero(l->scratch.data, l->scratch.cap);
	sf_buf_free(&l->rx_raw);
	sf_buf_free(&l->rx_plain);
	sf_buf_free(&l->tx);
	sf_buf_free(&l->scratch);
	sf_arena_free(&l->arena);
	sf_arena_free(&l->peer_arena);
	free(l);
}

size_t sf_link_recv(struct sf_link *l, const uint8_t *p, size_t n, uint64_t now_ms)
{
	if (l->state == SF_LINK_CLOSED || l->eof)
		return n; /* dropped */
	size_t room = l->rx_raw.limit - sf_buf_used(&l->rx_raw);
	size_t take = n < room ? n : room;
	if (take && sf_buf_append(&l->rx_raw, p, take))
		take = 0;
	if (take) {
		l->last_rx_ms = now_ms;
		l->rx_total += take;
	}
	return take;
}

size_t sf_link_rx_room(const struct sf_link *l)
{
	if (l->state == SF_LINK_CLOSED || l->eof)
		return 0;
	return l->rx_raw.limit - sf_buf_used(&l->rx_raw);
}

void sf_link_eof(struct sf_link *l, int errno_val)
{
	l->eof = true;
	l->eof_errno = errno_val;
}

/* The next whole frame of the (opened) stream: 1 and hdr/payload set, 0 when not all there
 * yet, or a negative code after the link failed. The frame stays until frame_done. */
static int next_frame(struct sf_link *l, struct sf_frame_hdr *hdr, const uint8_t **payload)
{
	struct sf_buf *in = l->sealed ? &l->rx_plain : &l->rx_raw;
	struct sf_err err;
	for (;;) {
		long n = sf_frame_peek(sf_buf_head(in), sf_buf_used(in), l->cfg.max_payload, hdr, &err);
		if (n < 0)
			return sf__link_fail(l, (int)n, "%s", err.msg);
		if (n > 0) {
			*payload = sf_buf_head(in) + SF_FRAME_HDR_LEN;
			return 1;
		}
		/* Open records one at a time, only while no whole frame waits: what came before
		 * a bad record is still delivered. */
		int rc = l->sealed ? sf__record_open(l) : 0;
		if (rc <= 0)
			return rc;
	}
}

static void frame_done(struct sf_link *l, const struct sf_frame_hdr *hdr)
{
	struct sf_buf *in = l->sealed ? &l->rx_plain : &l->rx_raw;
	sf_buf_consume(in, SF_FRAME_HDR_LEN + (size_t)hdr->len);
}

/* What a queueing said: a full queue named as such; a frame queued counts as sent now. */
static int queued(struct sf_link *l, int rc, uint64_t now_ms, struct sf_err *err)
{
	if (rc == SF_E_NOMEM || rc == SF_E_LIMIT)
		return sf_err_set(err, SF_E_LIMIT,
				  "send queue full (%zu bytes queued, limit %zu): the peer reads too slowly",
				  sf_buf_used(&l->tx), l->tx.limit);
	if (!rc)
		l->last_tx_ms = now_ms;
	return rc;
}

int sf__link_queue(struct sf_link *l, uint16_t type, const void *msg, uint32_t version,
		   uint64_t now_ms, struct sf_err *err)
{
	int rc;
	if (!l->sealed) {
		rc = sf_msg_encode(&l->tx, type, msg, version, l->cfg.max_payload, err);
	} else {
		sf_buf_clear(&l->scratch);
		rc = sf_msg_encode(&l->scratch, type, msg, version, l->cfg.max_payload, err);
		if (!rc)
			rc = sf__record_seal(l, sf_buf_head(&l->scratch), sf_buf_used(&l->scratch));
		sodium_memzero(l->scratch.data, sf_buf_used(&l->scratch));
		sf_buf_clear(&l->scratch);
	}
	return queued(l, rc, now_ms, err);
}

/* Whether this side may send type now: open, the link's own kinds excluded, the direction of
 * its role, and a type the peer's version knows. */
static int may_send(struct sf_link *l, uint16_t type, struct sf_err *err)
{
	if (l->state != SF_LINK_OPEN)
		return sf_err_set(err, SF_E_STATE, "link is not open (%s)",
				  l->state == SF_LINK_HANDSHAKE ? "still in the handshake" : "closed");
	switch (type) {
	case SF_MSG_HELLO:
	case SF_MSG_HELLO_ACK:
	case SF_MSG_HEARTBEAT:
	case SF_MSG_GOODBYE:
		return sf_err_set(err, SF_E_STATE, "the link sends %s itself%s", sf_msg_name(type),
				  type == SF_MSG_GOODBYE ? " (use sf_link_goodbye)" : "");
	}
	unsigned may = l->cfg.role == SF_ROLE_HEAD ? SF_DIR_H2N : SF_DIR_N2H;
	if (!(sf_msg_direction(type) & may))
		return sf_err_set(err, SF_E_PROTOCOL, "a %s does not send %s",
				  l->cfg.role == SF_ROLE_HEAD ? "head" : "node",
				  sf_msg_name(type) ? sf_msg_name(type) : "an unknown message");
	uint32_t need = sf_msg_min_version(type);
	if (need && l->version < need)
		return sf_err_set(err, SF_E_UNSUPPORTED,
				  "%s %s runs an older superfluid (protocol %u) that cannot take %s; update it",
				  l->cfg.role == SF_ROLE_HEAD ? "node" : "head",
				  l->peer.identity && *l->peer.identity ? l->peer.identity : "(unnamed)",
				  l->version, sf_msg_name(type));
	return 0;
}

int sf_link_send(struct sf_link *l, uint16_t type, const void *msg, uint64_t now_ms,
		 struct sf_err *err)
{
	int rc = may_send(l, type, err);
	/* Only an older link can lack a field (a walk of the message: not on the newest). */
	uint32_t need = rc || l->version >= SF_VERSION_MAX ? 0 : sf_msg_version_needed(type, msg);
	if (!rc && need > l->version)
		rc = sf_err_set(err, SF_E_UNSUPPORTED, "%s %s runs an older superfluid (protocol %u) "
				"that cannot take this %s (it needs protocol %u); update it",
				l->cfg.role == SF_ROLE_HEAD ? "node" : "head",
				l->peer.identity && *l->peer.identity ? l->peer.identity
								       : "(unnamed)",
				l->version, sf_msg_name(type), need);
	return rc ? rc : sf__link_queue(l, type, msg, l->version, now_ms, err);
}

int sf_link_send_frame(struct sf_link *l, const uint8_t *frame, size_t len, uint64_t now_ms,
		       struct sf_err *err)
{
	struct sf_frame_hdr hdr;
	long n = sf_frame_peek(frame, len, l->cfg.max_payload, &hdr, err);
	if (n < 0)
		return (int)n;
	if ((size_t)n != len)
		return sf_err_set(err, SF_E_RANGE, "a frame of %zu bytes holds %ld: one whole frame "
				  "is sent at a time", len, n);
	int rc = may_send(l, hdr.type, err);
	if (rc)
		return rc;
	rc = l->sealed ? sf__record_seal(l, frame, len) : sf_buf_append(&l->tx, frame, len);
	return queued(l, rc, now_ms, err);
}

size_t sf_link_tx(struct sf_link *l, const uint8_t **p)
{
	*p = sf_buf_head(&l->tx);
	return sf_buf_used(&l->tx);
}

void sf_link_tx_done(struct sf_link *l, size_t n)
{
	sf_buf_consume(&l->tx, n);
}

void sf_link_goodbye(struct sf_link *l, uint32_t code, const char *reason, uint64_t now_ms)
{
	if (l->state != SF_LINK_OPEN)
		return;
	struct sf_goodbye g = { .code = code, .reason = (char *)reason,
				.reason_len = reason ? (uint32_t)strnlen(reason, SF_MAX_REASON) : 0 };
	struct sf_err err;
	if (sf__link_queue(l, SF_MSG_GOODBYE, &g, l->version, now_ms, &err) == 0)
		l->state = SF_LINK_CLOSING;
	else
		sf__link_fail(l, err.code, "%s", err.msg);
}

void sf_link_rx_paused(struct sf_link *l, bool paused, uint64_t now_ms)
{
	if (l->rx_paused && !paused)
		l->last_rx_ms = now_ms; /* the peer was heard as far as anyone knows */
	l->rx_paused = paused;
}

uint64_t sf_link_deadline(const struct sf_link *l)
{
	switch (l->state) {
	case SF_LINK_HANDSHAKE:
		return l->started_ms + l->cfg.handshake_ms;
	case SF_LINK_OPEN: {
		uint64_t d = l->last_tx_ms + l->heartbeat_ms;
		if (l->version >= 3 && l->silence_ms != UINT32_MAX && !l->rx_paused &&
		    l->last_rx_ms + l->silence_ms < d)
			d = l->last_rx_ms + l->silence_ms;
		return d;
	}
	default:
		return UINT64_MAX;
	}
}

/* What the end of the stream means where the link stands. */
static void fail_at_eof(struct sf_link *l)
{
	char os[96] = "";
	if (l->eof_errno)
		snprintf(os, sizeof(os), " (%s)", strerror(l->eof_errno));
	/* At the handshake a reset means the same as a close: the peer would not talk to us. */
	if (l->state == SF_LINK_HANDSHAKE && l->cfg.role == SF_ROLE_HEAD)
		/* A node that refuses the token says so (SF_STATUS_AUTH): a bare close is a node
		 * that refused or dropped the connection, busy with other unfinished ones. */
		sf__link_fail(l, SF_E_CLOSED,
			      "closed the connection at the handshake%s without answering it: the "
			      "node refused or dropped it while busy (its --max-handshakes, "
			      "--max-handshakes-per-addr or --max-links were full); a wrong token is "
			      "answered as one", os);
	else if (l->state == SF_LINK_HANDSHAKE)
		sf__link_fail(l, SF_E_CLOSED, "the head closed the connection at the handshake%s", os);
	else if (l->eof_errno)
		sf__link_fail(l, SF_E_IO, "the connection failed%s", os);
	else if (sf_buf_used(&l->rx_raw) || sf_buf_used(&l->rx_plain))
		sf__link_fail(l, SF_E_TRUNCATED,
			      "closed the connection in the middle of a %s (%zu bytes of it came)",
			      l->sealed ? "sealed record or frame" : "frame",
			      sf_buf_used(&l->rx_raw) + sf_buf_used(&l->rx_plain));
	else
		sf__link_fail(l, SF_E_CLOSED, "closed the connection");
}

static void check_timers(struct sf_link *l, uint64_t now)
{
	if (l->state == SF_LINK_HANDSHAKE && now >= l->started_ms + l->cfg.handshake_ms) {
		unsigned s = (l->cfg.handshake_ms + 999) / 1000;
		if (l->rx_total == 0 && l->cfg.role == SF_ROLE_HEAD)
			sf__link_fail(l, SF_E_NO_ANSWER,
				      "did not answer the handshake within %u s; is superfluid-noded "
				      "listening there?", s);
		else
			sf__link_fail(l, SF_E_HANDSHAKE_TIMEOUT,
				      "did not finish the handshake within %u s", s);
		return;
	}
	if (l->state != SF_LINK_OPEN)
		return;
	/* Version 2 peers do not heartbeat: never given up for silence (see PROTOCOL.md). */
	if (l->version >= 3 && l->silence_ms != UINT32_MAX && !l->rx_paused &&
	    now >= l->last_rx_ms + l->silence_ms) {
		sf__link_fail(l, SF_E_SILENT,
			      "sent nothing for %llu ms (the silence limit is %u ms); it is stopped, "
			      "overloaded, or the network between is down",
			      (unsigned long long)(now - l->last_rx_ms), l->silence_ms);
		return;
	}
	if (now >= l->last_tx_ms + l->heartbeat_ms) {
		struct sf_heartbeat hb = { .sent_ms = now };
		struct sf_err err;
		/* A full send queue already tells the peer we are alive once it drains. */
		if (sf__link_queue(l, SF_MSG_HEARTBEAT, &hb, l->version, now, &err) == SF_E_LIMIT)
			l->last_tx_ms = now;
	}
}

static enum sf_link_ev_kind report_close(struct sf_link *l, struct sf_link_event *ev)
{
	if (l->close_reported) {
		ev->kind = SF_LINK_EV_NONE;
		return ev->kind;
	}
	l->close_reported = true;
	ev->kind = SF_LINK_EV_CLOSED;
	ev->err = l->close_err;
	return ev->kind;
}

int sf__link_read_msg(struct sf_link *l, struct sf_arena *arena, uint32_t version,
		      struct sf_msg *m, const char *where)
{
	struct sf_frame_hdr hdr;
	const uint8_t *payload = NULL;
	int rc = next_frame(l, &hdr, &payload);
	if (rc <= 0)
		return rc;
	/* What the peer's role may send: a node never sends GENERATE, a head never TOKEN_EVENTS. */
	unsigned from = l->cfg.role == SF_ROLE_HEAD ? SF_DIR_N2H : SF_DIR_H2N;
	unsigned dir = sf_msg_direction(hdr.type);
	if (dir && !(dir & from))
		return sf__link_fail(l, SF_E_PROTOCOL, "sent %s, which only a %s sends",
				     sf_msg_name(hdr.type), from == SF_DIR_N2H ? "head" : "node");
	struct sf_err err;
	rc = sf_msg_decode(hdr.type, payload, hdr.len, version, arena, m, &err);
	frame_done(l, &hdr);
	if (rc)
		return sf__link_fail(l, rc, "sent a bad frame%s: %s", where, err.msg);
	return 1;
}

/* One message of an open link: handled here (heartbeat, goodbye) or handed out. */
static int open_frame(struct sf_link *l, struct sf_link_event *ev)
{
	int rc = sf__link_read_msg(l, &l->arena, l->version, &l->msg, "");
	if (rc <= 0)
		return rc;
	uint16_t type = l->msg.type;
	switch (type) {
	case SF_MSG_HEARTBEAT:
		return 0;
	case SF_MSG_GOODBYE:
		return sf__link_fail(l, SF_E_GOODBYE, "ended the link: %s (code %u)",
				     l->msg.u.goodbye.reason, l->msg.u.goodbye.code);
	case SF_MSG_HELLO:
	case SF_MSG_HELLO_ACK:
		return sf__link_fail(l, SF_E_PROTOCOL, "sent %s after the handshake",
				     sf_msg_name(type));
	}
	ev->kind = SF_LINK_EV_MSG;
	ev->msg = &l->msg;
	return 1;
}

enum sf_link_ev_kind sf_link_poll(struct sf_link *l, uint64_t now_ms, struct sf_link_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	sf_arena_reset(&l->arena);
	for (;;) {
		if (l->state == SF_LINK_CLOSED)
			return report_close(l, ev);
		int rc;
		if (l->state == SF_LINK_HANDSHAKE) {
			rc = sf__link_handshake_step(l, now_ms, ev);
			if (rc > 0)
				return ev->kind;
		} else if (l->state == SF_LINK_OPEN) {
			rc = open_frame(l, ev);
			if (rc > 0)
				return ev->kind;
		} else {
			rc = 0; /* closing: take nothing more */
		}
		if (rc < 0)
			continue; /* the link failed: report it */
		/* Nothing whole in the buffers: the end of the stream or a timer decides. */
		if (l->eof && l->state != SF_LINK_CLOSING) {
			fail_at_eof(l);
			continue;
		}
		check_timers(l, now_ms);
		if (l->state == SF_LINK_CLOSED)
			continue;
		ev->kind = SF_LINK_EV_NONE;
		return ev->kind;
	}
}

enum sf_link_state sf_link_state(const struct sf_link *l)
{
	return l->state;
}

const struct sf_link_peer *sf_link_peer(const struct sf_link *l)
{
	return l->have_peer && l->state != SF_LINK_HANDSHAKE ? &l->peer : NULL;
}

uint32_t sf_link_version(const struct sf_link *l)
{
	return l->state == SF_LINK_HANDSHAKE ? 0 : l->version;
}

void sf_link_describe_connect_error(int errno_val, char *buf, size_t n)
{
	snprintf(buf, n, "unreachable (%s)", strerror(errno_val));
}
