/* What the head's write-ahead log says: one record per fact about a session (its opening,
 * its content, where it was placed, each generation asked, each event a node sent for it,
 * each end, its close), encoded little endian with length-prefixed strings and token
 * arrays. Decoding checks every length against the record and the limits here, and names
 * what was wrong. No I/O. */
#ifndef SF_WAL_WAL_RECORDS_H
#define SF_WAL_WAL_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/buf.h>
#include <superfluid/err.h>
#include <superfluid/wire.h>

#define SF_WALREC_MAX_NAME 256    /* model, codec, session and node names */
#define SF_WALREC_MAX_ID 64       /* a request's id */
#define SF_WALREC_MAX_BODY (8u << 20) /* a request body kept for a resumed stream */
#define SF_WALREC_MAX_MSG 256
#define SF_WALREC_MAX_ITEMS (4u << 20) /* a stored response's turn, as JSON items */
#define SF_WALREC_OWNER_LEN 16    /* the tag of the API key that opened a session */

enum sf_walrec_type {
	SF_WALREC_HEAD = 1,     /* the writer's own state: the next session id */
	SF_WALREC_SESSION_V1 = 2, /* a session opened, its sampling's first four fields only (as
				   * heads before protocol version 4 wrote it; read, not written) */
	SF_WALREC_CONTENT = 3,  /* its content: keep the first `keep` tokens, append these */
	SF_WALREC_PLACED = 4,   /* assigned to a node at an epoch */
	SF_WALREC_GEN = 5,      /* a generation asked, with what a resumed stream needs */
	SF_WALREC_TOKENS = 6,   /* a node's TOKENS event, as delivered */
	SF_WALREC_LOGPROBS = 7, /* a node's LOGPROBS event */
	SF_WALREC_END = 8,      /* the generation ended (finish reason, or an error) */
	SF_WALREC_CLOSE = 9,    /* the session is over: it leaves the log at the next checkpoint */
	SF_WALREC_GEN_SNAP = 10,/* a checkpoint's summary of a generation's events so far */
	SF_WALREC_SESSION_V2 = 11, /* a session opened, with its whole sampling but no owner (as
				    * heads before owners wrote it; read, not written) */
	SF_WALREC_SESSION_V3 = 12, /* a session opened, with its sampling but for protocol 6's
				    * ignore_eos, min_tokens and grammar (as heads before the log kept
				    * them wrote it; read, not written) */
	SF_WALREC_SESSION = 13, /* a session opened, with its whole sampling (its grammar too)
				 * and its owner */
	SF_WALREC_ITEMS = 14,   /* a stored response's turn of its conversation (JSON items) */
};

struct sf_walrec_head {
	uint64_t next_session_id;
	uint64_t wall_ms;
};

struct sf_walrec_session {
	uint64_t session_id;
	char name[SF_WALREC_MAX_NAME + 1];  /* a named session's name; "" for one request's */
	char model[SF_WALREC_MAX_NAME + 1];
	char codec[SF_WALREC_MAX_NAME + 1];
	uint8_t qos;
	/* Every field. Decoded, its logit_bias is NULL and n_logit_bias 0: the pairs are at bias,
	 * n_bias of them as little-endian (u32 token, f32 bias) (sf_walrec_bias copies them);
	 * its grammar is NULL and grammar_len 0: the text is at grammar, grammar_len bytes (no
	 * NUL byte, not NUL-terminated). */
	struct sf_sampling sampling;
	uint32_t lease_ms;
	uint64_t created_s;
	const uint8_t *bias;
	uint32_t n_bias;
	/* The API key that opened it (a tag of the key's digest, never the key); all zero for a
	 * head without --api-keys, and for records written before owners (V1, V2). */
	uint8_t owner[SF_WALREC_OWNER_LEN];
	/* The structured output as its request gave it (the API's sf_grammar_text_digest, before
	 * the head wraps it), by which a named session's later turns are checked; 0: none, and
	 * for records written before the log kept grammars (V1, V2, V3). */
	uint64_t grammar_digest;
	const char *grammar;
	uint32_t grammar_len;
};

struct sf_walrec_content {
	uint64_t session_id;
	uint32_t keep;          /* tokens of the content before that stay */
	const uint8_t *tokens;  /* n_tokens little-endian u32 (sf_walrec_tokens) */
	uint32_t n_tokens;
};

struct sf_walrec_placed {
	uint64_t session_id;
	uint64_t epoch;
	char node[SF_WALREC_MAX_NAME + 1]; /* the node's address as configured, or identity */
};

struct sf_walrec_gen {
	uint64_t session_id, generation_id;
	uint32_t max_new, max_wall_ms;
	bool logprobs;
	uint8_t top_logprobs;
	uint8_t kind;           /* the request's enum sf_api_kind */
	uint32_t index;         /* its choice (n > 1) */
	uint32_t n_prompt;      /* prompt tokens, for usage */
	uint64_t created_s;
	uint64_t out_seed;      /* the output decoder's seed (tool call ids) */
	char request_id[SF_WALREC_MAX_ID + 1];
	const uint8_t *body;    /* the request's body, as the client sent it */
	uint32_t body_len;
};

/* A stored response's turn of its named session's conversation: its request's input items
 * and its output items, one compact JSON array (/v1/responses: what a later request naming
 * it as previous_response_id replays); items_len 0: the conversation's turns from here on
 * are not kept (it passed the head's bounds). */
struct sf_walrec_items {
	uint64_t session_id;
	char request_id[SF_WALREC_MAX_ID + 1]; /* the response's id */
	const uint8_t *items;
	uint32_t items_len;
};

/* TOKENS, LOGPROBS and END name the event's run (epoch) and number (seq); an END the head
 * gave itself has seq UINT64_MAX. */
struct sf_walrec_event {
	uint64_t session_id, generation_id, epoch, seq;
	const uint8_t *tokens;  /* TOKENS */
	uint32_t n_tokens;
	const uint8_t *lp;      /* LOGPROBS: n_lp entries, sf_walrec_logprobs decodes them */
	uint32_t lp_len, n_lp;
	uint32_t reason;        /* END: SF_FINISH_* (or SF_FINISH_ERROR with code) */
	int32_t code;           /* END: 0, or the negative sf_code of the error */
	char msg[SF_WALREC_MAX_MSG + 1];
};

struct sf_walrec_gen_snap {
	uint64_t session_id, generation_id, epoch, next_seq;
	uint32_t resumed;
	const uint8_t *tokens;
	uint32_t n_tokens;
	const uint8_t *lp;      /* the logprobs so far: a logprob blob (below) */
	uint32_t lp_len;
};

/* A logprob blob: LOGPROBS records' entries one after another, each group as u32 count,
 * u32 byte length, then the entries as in the record. */
int sf_walrec_lp_blob_check(const uint8_t *blob, uint32_t len, uint32_t *n_lp,
			    struct sf_err *err);

/* Encoders: append one record's payload to out (cleared first). 0 or a negative sf_code. */
int sf_walrec_put_head(struct sf_buf *out, const struct sf_walrec_head *r);
int sf_walrec_put_session(struct sf_buf *out, const struct sf_walrec_session *r);
int sf_walrec_put_content(struct sf_buf *out, uint64_t session_id, uint32_t keep,
			  const uint32_t *tokens, uint32_t n);
int sf_walrec_put_placed(struct sf_buf *out, const struct sf_walrec_placed *r);
int sf_walrec_put_gen(struct sf_buf *out, const struct sf_walrec_gen *r);
int sf_walrec_put_tokens(struct sf_buf *out, uint64_t sid, uint64_t gid, uint64_t epoch,
			 uint64_t seq, const uint32_t *tokens, uint32_t n);
int sf_walrec_put_logprobs(struct sf_buf *out, uint64_t sid, uint64_t gid, uint64_t epoch,
			   uint64_t seq, const struct sf_logprob *v, uint32_t n);
int sf_walrec_put_end(struct sf_buf *out, uint64_t sid, uint64_t gid, uint64_t epoch,
		      uint64_t seq, uint32_t reason, int32_t code, const char *msg);
int sf_walrec_put_close(struct sf_buf *out, uint64_t session_id);
int sf_walrec_put_items(struct sf_buf *out, const struct sf_walrec_items *r);
int sf_walrec_put_gen_snap(struct sf_buf *out, const struct sf_walrec_gen_snap *r,
			   const uint32_t *tokens);
/* Appends one LOGPROBS record's entries (n of them, len bytes) to a blob. */
int sf_walrec_lp_blob_add(uint8_t **blob, size_t *len, size_t *cap, const uint8_t *lp,
			  uint32_t n, uint32_t lp_len);

/* Decoders: p, len is one record's payload; pointers in the result point into p. Return 0,
 * or SF_E_TRUNCATED / SF_E_LIMIT / SF_E_TRAILING / SF_E_RANGE with err naming the field. */
int sf_walrec_get_head(const uint8_t *p, size_t len, struct sf_walrec_head *r, struct sf_err *err);
/* type: SF_WALREC_SESSION, SF_WALREC_SESSION_V3 (no ignore_eos, min_tokens nor grammar: off,
 * 0, none), SF_WALREC_SESSION_V2 (no owner either: all zero) or SF_WALREC_SESSION_V1 (the rest
 * of the sampling neutral too). */
int sf_walrec_get_session(uint8_t type, const uint8_t *p, size_t len,
			  struct sf_walrec_session *r, struct sf_err *err);
/* Whether a session record names no owner (all zero: no --api-keys, or an older record). */
bool sf_walrec_owner_none(const uint8_t owner[static SF_WALREC_OWNER_LEN]);
/* Copies n logit_bias pairs of a decoded session record (its bias) into out. */
void sf_walrec_bias(const uint8_t *p, uint32_t n, struct sf_logit_bias *out);
int sf_walrec_get_content(const uint8_t *p, size_t len, struct sf_walrec_content *r,
			  struct sf_err *err);
int sf_walrec_get_placed(const uint8_t *p, size_t len, struct sf_walrec_placed *r,
			 struct sf_err *err);
int sf_walrec_get_gen(const uint8_t *p, size_t len, struct sf_walrec_gen *r, struct sf_err *err);
/* TOKENS, LOGPROBS, END by type. */
int sf_walrec_get_event(uint8_t type, const uint8_t *p, size_t len, struct sf_walrec_event *r,
			struct sf_err *err);
int sf_walrec_get_close(const uint8_t *p, size_t len, uint64_t *session_id, struct sf_err *err);
int sf_walrec_get_items(const uint8_t *p, size_t len, struct sf_walrec_items *r,
			struct sf_err *err);
int sf_walrec_get_gen_snap(const uint8_t *p, size_t len, struct sf_walrec_gen_snap *r,
			   struct sf_err *err);

/* n little-endian u32 from raw into out. */
void sf_walrec_tokens(const uint8_t *raw, uint32_t n, uint32_t *out);
/* Decodes a LOGPROBS record's entries into out[n_lp] (tops: top storage of at least
 * n_lp * SF_MAX_TOP_LOGPROBS entries). */
void sf_walrec_logprobs(const uint8_t *lp, uint32_t n_lp, struct sf_logprob *out,
			struct sf_top_logprob *tops);

/* The record type's name ("tokens"), and one line describing a record for wal dump. */
const char *sf_walrec_type_name(uint8_t type);
void sf_walrec_describe(uint8_t type, const uint8_t *p, size_t len, char *out, size_t cap);

#endif
