/* The link state machine on a peer's bytes.
 *
 * Input: [mode] [flags] then chunks: u16 LE length, u8 clock step, bytes (cut short at the
 * end of the input). Modes (fuzz_common.h): a lone head or node fed what its peer would send,
 * sealed or plain; or a plain head and node that first open in memory, then the input goes
 * into one of them after the handshake. The clock moves step * FUZZ_LINK_STEP_MS per chunk;
 * after each chunk the link is polled until it has nothing more, its tx is drained, and an
 * open link is given a message to send. Flags may end the stream and run the timers out.
 *
 * Oracles besides the sanitizers: poll always gets to SF_LINK_EV_NONE, a link that takes
 * bytes never stalls with a full buffer, events are consistent with the state, a message
 * handed out encodes again, and a pair configured alike always opens. */
#include "fuzz_common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <superfluid/link.h>

/* Why the last link that closed did (for the pair oracle). */
static struct sf_err last_close;

/* Events one poll loop may hand out: fewer than the bytes it was given (frames are >= 8). */
static size_t poll_max;

struct fz {
	struct sf_link *l, *peer; /* peer: in the pair modes, the other side */
	bool head;                /* l is the head */
	uint64_t now;
	struct sf_arena a;
	struct sf_buf scratch;
};

static void check_event(struct sf_link *l, const struct sf_link_event *ev, struct sf_buf *scratch)
{
	struct sf_err err = { 0 };

#ifdef FUZZ_TRACE /* -DFUZZ_TRACE: what each input gets to, on stderr */
	fprintf(stderr, "  %s: event %d %s%s\n", sf_link_peer(l) ? "open" : "-", ev->kind,
		ev->kind == SF_LINK_EV_MSG ? sf_msg_name(ev->msg->type) : "",
		ev->kind == SF_LINK_EV_CLOSED ? ev->err.msg : "");
#endif
	switch (ev->kind) {
	case SF_LINK_EV_OPEN: {
		const struct sf_link_peer *p = sf_link_peer(l);
		uint32_t v = sf_link_version(l);
		if (!p || sf_link_state(l) != SF_LINK_OPEN || v < SF_VERSION_MIN ||
		    v > SF_VERSION_MAX || p->version != v)
			fuzz_fail("open event on a link that is not open (version %u)", v);
		break;
	}
	case SF_LINK_EV_MSG:
		if (!ev->msg)
			fuzz_fail("message event without a message");
		if (sf_link_state(l) != SF_LINK_OPEN && sf_link_state(l) != SF_LINK_CLOSING)
			fuzz_fail("message event in state %d", sf_link_state(l));
		sf_buf_clear(scratch);
		if (sf_msg_encode(scratch, ev->msg->type, &ev->msg->u, sf_link_version(l),
				  SF_FRAME_PAYLOAD_MAX, &err))
			fuzz_fail("%s handed out by the link does not encode: %s",
				  sf_msg_name(ev->msg->type), err.msg);
		break;
	case SF_LINK_EV_CLOSED:
		if (sf_link_state(l) != SF_LINK_CLOSED || ev->err.code >= 0)
			fuzz_fail("closed event with code %d in state %d", ev->err.code,
				  sf_link_state(l));
		last_close = ev->err;
		break;
	case SF_LINK_EV_NONE:
		break;
	default:
		fuzz_fail("unknown event %d", ev->kind);
	}
}

static void drain_events(struct sf_link *l, uint64_t now, struct sf_buf *scratch)
{
	struct sf_link_event ev;
	for (size_t i = 0; i < poll_max; i++) {
		if (sf_link_poll(l, now, &ev) == SF_LINK_EV_NONE)
			return;
		check_event(l, &ev, scratch);
	}
	fuzz_fail("poll did not get to SF_LINK_EV_NONE in %zu events", poll_max);
}

/* Gives l all of p, polling whenever its buffer is full. */
static void feed(struct sf_link *l, const uint8_t *p, size_t n, uint64_t now,
		 struct sf_buf *scratch)
{
	size_t off = 0;
	while (off < n) {
		size_t took = sf_link_recv(l, p + off, n - off, now);
		off += took;
		drain_events(l, now, scratch);
		if (took == 0 && off < n) {
			enum sf_link_state st = sf_link_state(l);
			/* A closing link takes nothing more, by design. */
			if (st == SF_LINK_HANDSHAKE || st == SF_LINK_OPEN)
				fuzz_fail("link stalled: took nothing in state %d after a poll", st);
			return;
		}
	}
}

/* Moves what from has queued to to (when given), and polls to. */
static void shuttle(struct sf_link *from, struct sf_link *to, uint64_t now,
		    struct sf_buf *scratch)
{
	const uint8_t *p;
	size_t n = sf_link_tx(from, &p);
	if (to)
		feed(to, p, n, now, scratch);
	sf_link_tx_done(from, n);
}

static void send_one(struct fz *f, uint8_t step)
{
	struct sf_msg m;
	struct sf_err err = { 0 };

	if (sf_link_state(f->l) != SF_LINK_OPEN)
		return;
	if (step == 0xff) { /* the polite end: CLOSING from here */
		sf_link_goodbye(f->l, 7, "fuzz says goodbye", f->now);
		return;
	}
	uint16_t type = sf_msg_types[step % sf_msg_type_count];
	sf_arena_reset(&f->a);
	if (sf_msg_sample(type, step, 3, &f->a, &m))
		fuzz_fail("sample %s failed", sf_msg_name(type));
	int rc = sf_link_send(f->l, type, &m.u, f->now, &err);
	/* What the link says itself it never sends for the caller. */
	if (type == SF_MSG_HELLO || type == SF_MSG_HELLO_ACK || type == SF_MSG_HEARTBEAT ||
	    type == SF_MSG_GOODBYE) {
		if (rc != SF_E_STATE && sf_link_state(f->l) == SF_LINK_OPEN)
			fuzz_fail("send %s through an open link: %d", sf_msg_name(type), rc);
		return;
	}
	bool mine = sf_msg_direction(type) & (f->head ? SF_DIR_H2N : SF_DIR_N2H);
	if (rc == SF_E_PROTOCOL ? mine : !mine)
		fuzz_fail("send %s from a %s: %d %s", sf_msg_name(type), f->head ? "head" : "node",
			  rc, err.msg);
	if (rc && rc != SF_E_PROTOCOL && rc != SF_E_UNSUPPORTED && rc != SF_E_LIMIT &&
	    rc != SF_E_FRAME_TOO_BIG)
		fuzz_fail("send %s on an open link: %d %s", sf_msg_name(type), rc, err.msg);
}

/* A plain head and node, opened against each other. */
static void open_pair(struct fz *f, uint8_t mode, uint8_t flags)
{
	struct sf_link *head = fuzz_link_new(SF_ROLE_HEAD, false, flags, f->now);
	struct sf_link *node = fuzz_link_new(SF_ROLE_NODE, false, flags, f->now);
	for (int i = 0; i < 8; i++) {
		shuttle(head, node, f->now, &f->scratch);
		shuttle(node, head, f->now, &f->scratch);
		if (sf_link_state(head) == SF_LINK_OPEN && sf_link_state(node) == SF_LINK_OPEN)
			break;
	}
	if (sf_link_state(head) != SF_LINK_OPEN || sf_link_state(node) != SF_LINK_OPEN)
		fuzz_fail("a head and node configured alike did not open (%d, %d)",
			  sf_link_state(head), sf_link_state(node));
	if (mode == FUZZ_LINK_PAIR_NODE) {
		f->l = node;
		f->peer = head;
		f->head = false;
	} else {
		f->l = head;
		f->peer = node;
		f->head = true;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	fuzz_rng_install();
	fuzz_rng_reset(FUZZ_RNG_SEED);

	uint8_t mode = data[0] % FUZZ_LINK_N_MODES, flags = data[1];
	poll_max = size + 1000;
	struct fz f = { .now = 1000000 };
	sf_arena_init(&f.a, 1u << 20);
	sf_buf_init(&f.scratch, SF_FRAME_HDR_LEN + (size_t)SF_FRAME_PAYLOAD_MAX);

	if (mode == FUZZ_LINK_HEAD || mode == FUZZ_LINK_NODE) {
		f.head = mode == FUZZ_LINK_HEAD;
		f.l = fuzz_link_new(mode == FUZZ_LINK_HEAD ? SF_ROLE_HEAD : SF_ROLE_NODE,
			       flags & FUZZ_LINK_SEALED, flags, f.now);
	} else {
		open_pair(&f, mode, flags);
	}

	const uint8_t *p = data + 2;
	size_t left = size - 2;
	while (left >= 3) {
		size_t n = (size_t)(p[0] | p[1] << 8);
		uint8_t step = p[2];
		p += 3;
		left -= 3;
		if (n > left)
			n = left;
		f.now += (uint64_t)step * FUZZ_LINK_STEP_MS;
		feed(f.l, p, n, f.now, &f.scratch);
		p += n;
		left -= n;
		/* What it answers goes to the peer, when there is one. */
		shuttle(f.l, f.peer, f.now, &f.scratch);
		send_one(&f, step);
		drain_events(f.l, f.now, &f.scratch);
		shuttle(f.l, f.peer, f.now, &f.scratch);
		if (f.peer) {
			shuttle(f.peer, NULL, f.now, &f.scratch);
			/* Whatever the input did to l, l itself only sends what a peer takes. */
			if (sf_link_state(f.peer) == SF_LINK_CLOSED && sf_link_state(f.l) == SF_LINK_OPEN &&
			    last_close.code != SF_E_GOODBYE) /* send_one may send one */
				fuzz_fail("the %s refused what an open %s sent: %s",
					  f.head ? "node" : "head", f.head ? "head" : "node",
					  last_close.msg);
		}
	}
	if (flags & FUZZ_LINK_EOF) {
		sf_link_eof(f.l, (flags & FUZZ_LINK_RESET) ? ECONNRESET : 0);
		drain_events(f.l, f.now, &f.scratch);
		if (sf_link_state(f.l) != SF_LINK_CLOSED && sf_link_state(f.l) != SF_LINK_CLOSING)
			fuzz_fail("end of stream left the link in state %d", sf_link_state(f.l));
	}
	if (flags & FUZZ_LINK_TIMERS) {
		for (int i = 0; i < 4; i++) {
			uint64_t d = sf_link_deadline(f.l);
			if (d == UINT64_MAX)
				break;
			if (d > f.now)
				f.now = d;
			drain_events(f.l, f.now, &f.scratch);
			shuttle(f.l, NULL, f.now, &f.scratch);
		}
	}
	sf_link_free(f.l);
	sf_link_free(f.peer);
	sf_buf_free(&f.scratch);
	sf_arena_free(&f.a);
	return 0;
}
