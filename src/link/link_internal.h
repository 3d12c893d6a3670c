/* The link's state, shared by its files (lifecycle and events, handshake, sealed records). */
#ifndef SF_LINK_INTERNAL_H
#define SF_LINK_INTERNAL_H

#include <superfluid/link.h>
#include <superfluid/noise.h>

/* Preamble: "SFLK", wire major, mode, then two bytes (reserved, or status + reserved). */
#define SF_PREAMBLE_LEN 8
#define SF_WIRE_MAJOR 1
enum { SF_MODE_PLAIN = 0, SF_MODE_SEALED = 1 };
enum { SF_STATUS_OK = 0, SF_STATUS_MODE = 1, SF_STATUS_AUTH = 2 };

/* Sealed records: u16 big-endian length, then ciphertext of at most this much plaintext. */
#define SF_RECORD_PLAIN_MAX (SF_NOISE_MAX_MSG - SF_NOISE_TAGLEN)
#define SF_RECORD_OVERHEAD (2 + SF_NOISE_TAGLEN)

enum sf_hs_step {
	SF_HS_AWAIT_REPLY,     /* head: the node's reply preamble (and Noise message 2) */
	SF_HS_AWAIT_ACK,       /* head: HELLO_ACK */
	SF_HS_AWAIT_TOKENIZER, /* head, version 3: TOKENIZER */
	SF_HS_AWAIT_PREAMBLE,  /* node: the head's preamble (and Noise message 1) */
	SF_HS_AWAIT_HELLO,     /* node: HELLO */
	SF_HS_DONE,
};

struct sf_link {
	struct sf_link_config cfg; /* token pointer cleared; identity copied */
	char identity[SF_MAX_NAME + 1];
	enum sf_link_state state;
	enum sf_hs_step step;
	bool sealed;
	uint8_t psk[SF_NOISE_PSKLEN];
	uint8_t preamble[SF_PREAMBLE_LEN]; /* the head's, part of the Noise prologue */
	struct sf_noise_hs hs;
	struct sf_noise_cs tx_cs, rx_cs;

	struct sf_buf rx_raw;   /* bytes as they arrived */
	struct sf_buf rx_plain; /* sealed links: the opened frame stream */
	struct sf_buf tx;       /* bytes to send */
	struct sf_buf scratch;  /* sealed links: a frame before it is sealed */
	struct sf_arena arena;      /* the message a poll hands out */
	struct sf_arena peer_arena; /* what the handshake said, kept for the link's life */
	struct sf_msg msg;
	struct sf_link_peer peer;
	bool have_peer;

	uint32_t version;
	uint32_t heartbeat_ms, silence_ms; /* in force once open */
	uint64_t started_ms, last_rx_ms, last_tx_ms;
	bool rx_paused; /* sf_link_rx_paused: this side stopped reading; silence does not count */
	uint64_t rx_total;
	bool eof;
	int eof_errno;
	bool close_reported;
	struct sf_err close_err;
};

/* Ends the link: state CLOSED, the error kept for the next poll. Returns code. */
int sf__link_fail(struct sf_link *l, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Head: queues the preamble (and Noise message 1, or HELLO on a plain link). */
int sf__link_start_head(struct sf_link *l, uint64_t now_ms);

/* Advances the handshake with what rx holds; returns 1 when it produced an event in ev
 * (OPEN or CLOSED), 0 when it needs more bytes. */
int sf__link_handshake_step(struct sf_link *l, uint64_t now_ms, struct sf_link_event *ev);

/* The next whole message, checked for its direction and decoded into arena at version: 1,
 * 0 when not all there yet, or a negative code after failing the link ("sent a bad
 * frame<where>: ..."). */
int sf__link_read_msg(struct sf_link *l, struct sf_arena *arena, uint32_t version,
		      struct sf_msg *m, const char *where);

/* Encodes and queues one message, sealing it on a sealed link. No state check. */
int sf__link_queue(struct sf_link *l, uint16_t type, const void *msg, uint32_t version,
		   uint64_t now_ms, struct sf_err *err);

/* Seals plaintext into records appended to tx. Returns 0, SF_E_LIMIT, or SF_E_CRYPTO. */
int sf__record_seal(struct sf_link *l, const uint8_t *p, size_t n);
/* Opens the next whole record of rx_raw into rx_plain: 1 when it did, 0 when none is whole
 * yet, or a negative code after failing the link. */
int sf__record_open(struct sf_link *l);

#endif
