/* The fleet link as a state machine with no I/O in it.
 *
 * The caller feeds it bytes that arrived (sf_link_recv) and the time, takes the bytes it wants
 * sent (sf_link_tx / sf_link_tx_done), and asks it for what happened (sf_link_poll): the link
 * opened, a message arrived, or the link closed with an error that says what to check. The
 * io_uring loop drives it in the daemons; tests and the simulator drive it in memory.
 *
 * One link is one TCP connection. The head is always the initiator, also when a node dialed
 * in. With a token on both sides the link is sealed with Noise NNpsk0 keyed by the token;
 * without one it is plain; which one is fixed by configuration on each side and a mismatch ends
 * the link (docs/PROTOCOL.md, "Handshake"). */
#ifndef SUPERFLUID_LINK_H
#define SUPERFLUID_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>
#include <superfluid/wire.h>

enum sf_role {
	SF_ROLE_HEAD = 0, /* handshake initiator */
	SF_ROLE_NODE = 1, /* handshake responder */
};

#define SF_LINK_HANDSHAKE_MS 10000
#define SF_LINK_HEARTBEAT_MS 1000
#define SF_LINK_SILENCE_MS 10000
#define SF_LINK_TX_LIMIT (64u << 20)

struct sf_link_config {
	enum sf_role role;
	/* The operator's token; NULL or empty: a plain link. Copied, hashed and wiped at init. */
	const uint8_t *token;
	size_t token_len;
	uint32_t version_min, version_max; /* 0: SF_VERSION_MIN / SF_VERSION_MAX */
	uint32_t max_payload;   /* 0: SF_FRAME_PAYLOAD_MAX; frames above it end the link */
	size_t tx_limit;        /* 0: SF_LINK_TX_LIMIT; bytes queued to send at most */
	uint32_t handshake_ms;  /* 0: SF_LINK_HANDSHAKE_MS */
	uint32_t heartbeat_ms;  /* 0: SF_LINK_HEARTBEAT_MS; a heartbeat after this much quiet */
	uint32_t silence_ms;    /* 0: SF_LINK_SILENCE_MS; UINT32_MAX: never give up */
	const char *identity;   /* this side's name, told to the peer */
	/* Node side: what the hello answer and the tokenizer digests carry. Read during the
	 * handshake, so they must stay valid until SF_LINK_EV_OPEN. */
	struct sf_capacity capacity;
	const struct sf_model_info *models;
	uint32_t n_models;
	/* n_models entries or NULL: each model's full tokenizer digest (sf_tok_digest_full; 0
	 * none), stated in TOKENIZER on version 7 links. Valid as models is. */
	const uint64_t *tokenizer_full;
};

enum sf_link_state {
	SF_LINK_HANDSHAKE = 0,
	SF_LINK_OPEN = 1,
	SF_LINK_CLOSING = 2, /* said goodbye; sends what is queued, takes nothing more */
	SF_LINK_CLOSED = 3,
};

enum sf_link_ev_kind {
	SF_LINK_EV_NONE = 0,   /* nothing more until more bytes or time */
	SF_LINK_EV_OPEN = 1,   /* handshake done: see sf_link_peer() */
	SF_LINK_EV_MSG = 2,    /* ev.msg holds a message, valid until the next poll */
	SF_LINK_EV_CLOSED = 3, /* ev.err says why; the link is done (send the tx left, close) */
};

struct sf_link_event {
	enum sf_link_ev_kind kind;
	const struct sf_msg *msg;
	struct sf_err err;
};

/* What the peer said in the handshake (valid while the link lives). */
struct sf_link_peer {
	uint32_t version;  /* negotiated protocol version */
	const char *identity;
	bool encrypted;
	uint32_t heartbeat_ms, silence_ms; /* the head's, as its HELLO said */
	struct sf_capacity capacity;       /* from the node */
	const struct sf_model_info *models;
	uint32_t n_models;
	const struct sf_model_digest *digests; /* version 3 nodes' tokenizer digests (full: 7) */
	uint32_t n_digests;
};

struct sf_link;

/* A new link at time now_ms; the head side queues its first bytes at once. NULL when memory
 * is short or the config is invalid (err says which). */
struct sf_link *sf_link_new(const struct sf_link_config *cfg, uint64_t now_ms, struct sf_err *err);

/* Frees the link and wipes its keys. */
void sf_link_free(struct sf_link *l);

/* Takes up to n received bytes; returns how many it took (fewer when its buffer is full: poll
 * until SF_LINK_EV_NONE, then give it the rest). Bytes after the link closed are dropped. */
size_t sf_link_recv(struct sf_link *l, const uint8_t *p, size_t n, uint64_t now_ms);

/* How many bytes sf_link_recv would take now: read at most this much from the socket. */
size_t sf_link_rx_room(const struct sf_link *l);

/* The transport reached end of stream, or failed with errno_val (0 for a clean end). The next
 * poll reports SF_LINK_EV_CLOSED with what that means at this point of the link. */
void sf_link_eof(struct sf_link *l, int errno_val);

/* What happened next: processes received bytes and timers up to now_ms. Call until it
 * returns SF_LINK_EV_NONE. Returns ev->kind. */
enum sf_link_ev_kind sf_link_poll(struct sf_link *l, uint64_t now_ms, struct sf_link_event *ev);

/* Queues a message (encoded, and sealed on an encrypted link). Only when open. Returns 0, or
 * SF_E_UNSUPPORTED when the peer's version lacks the type, or a field of it that msg sets
 * (err names the peer, the type and the version it needs),
 * SF_E_LIMIT when the send queue is full, SF_E_STATE when not open, or an encoding error. */
int sf_link_send(struct sf_link *l, uint16_t type, const void *msg, uint64_t now_ms,
		 struct sf_err *err) __attribute__((warn_unused_result));

/* Queues a frame already encoded (sf_msg_encode for the link's version: header and payload,
 * exactly one frame), sealed on an encrypted link. The checks and returns of sf_link_send, and
 * SF_E_RANGE (or the frame's own error) when frame is not one whole frame. For a thread that
 * encodes for a link another thread runs. */
int sf_link_send_frame(struct sf_link *l, const uint8_t *frame, size_t len, uint64_t now_ms,
		       struct sf_err *err) __attribute__((warn_unused_result));

/* The bytes waiting to be sent: returns their count and points *p at them. */
size_t sf_link_tx(struct sf_link *l, const uint8_t **p);
/* n of those bytes went out. */
void sf_link_tx_done(struct sf_link *l, size_t n);

/* Ends the link politely: queues a GOODBYE with code and reason; the link takes no more
 * messages and the caller closes the socket once the tx is drained. */
void sf_link_goodbye(struct sf_link *l, uint32_t code, const char *reason, uint64_t now_ms);

/* The caller stopped reading the peer's bytes (it cannot take more yet) or started again:
 * while paused the peer's silence is not held against it (it may well be sending), and the
 * silence limit counts again from the moment reading resumes. */
void sf_link_rx_paused(struct sf_link *l, bool paused, uint64_t now_ms);

/* When the link next needs a poll without new bytes (heartbeat, silence or handshake limit);
 * UINT64_MAX when never. */
uint64_t sf_link_deadline(const struct sf_link *l);

enum sf_link_state sf_link_state(const struct sf_link *l);
/* The peer's handshake answer, NULL before SF_LINK_EV_OPEN. */
const struct sf_link_peer *sf_link_peer(const struct sf_link *l);
/* The negotiated version, 0 before open. */
uint32_t sf_link_version(const struct sf_link *l);

/* The operator sentence for a connect() that failed with errno_val ("unreachable (...)"). */
void sf_link_describe_connect_error(int errno_val, char *buf, size_t n);

#endif
