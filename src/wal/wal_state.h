/* The sessions the head's log holds, as its records build them: each live session with its
 * parameters, content, placement and latest generations (with every token and logprob that
 * reached a client), and a stored conversation's turns (wal_turns.h). A replay builds it at
 * start; the running head applies each record once it is durable, so the table is what a
 * crash would bring back, and a checkpoint writes it out (sf_wal_state_snapshot) so older
 * segments can go. Bounded: max_sessions, and the SF_WAL_KEEP_GENS latest generations of each
 * session. No I/O. */
#ifndef SF_WAL_WAL_STATE_H
#define SF_WAL_WAL_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include <superfluid/err.h>

#include "wal/wal_records.h"
#include "wal/wal_turns.h"

#define SF_WAL_KEEP_GENS 4

struct sf_wal_gen {
	struct sf_walrec_gen rec;  /* body points at body below */
	uint8_t *body;
	uint32_t *tokens;          /* every token that reached the client, over all runs */
	uint32_t n_tokens, cap_tokens;
	uint32_t resumed;          /* tokens before the current run */
	uint64_t epoch, next_seq;  /* the current run; epoch 0: no event yet */
	uint8_t *lp;               /* logprob blob (wal_records.h) of what reached the client */
	size_t lp_len, lp_cap;
	uint32_t n_lp;             /* logprob entries held */
	bool ended;
	uint32_t reason;
	int32_t code;
	char msg[SF_WALREC_MAX_MSG + 1];
};

struct sf_wal_session {
	struct sf_walrec_session rec;      /* rec.sampling.logit_bias points at bias below,
					    * rec.sampling.grammar at grammar */
	struct sf_logit_bias *bias;
	char *grammar;                     /* NUL-terminated; NULL: none */
	uint32_t *content;
	uint32_t n_content, cap_content;
	uint32_t turn_base;                /* the content before its last CONTENT record's
					    * tokens (that record's keep): where a named
					    * session's turn whose reply is not kept began */
	char node[SF_WALREC_MAX_NAME + 1]; /* "" when never placed */
	uint64_t epoch;
	struct sf_wal_gen *gens[SF_WAL_KEEP_GENS]; /* oldest first */
	uint32_t n_gens;
	struct sf_wal_turns turns;         /* a stored conversation's turns (ITEMS records) */
	bool closed;
	struct sf_wal_session *hnext;      /* hash chain */
	struct sf_wal_session *prev, *next; /* every session, in opening order */
};

struct sf_wal_state;

int sf_wal_state_new(struct sf_wal_state **out, uint32_t max_sessions, struct sf_err *err);
void sf_wal_state_free(struct sf_wal_state *st);

/* Applies one record. Returns 0, or a negative sf_code with err saying what did not fit
 * (a record that does not decode, one for a session never opened, a table full). */
int sf_wal_state_apply(struct sf_wal_state *st, uint8_t type, const uint8_t *p, uint32_t len,
		       struct sf_err *err);

struct sf_wal_session *sf_wal_state_find(const struct sf_wal_state *st, uint64_t session_id);
struct sf_wal_gen *sf_wal_session_gen(const struct sf_wal_session *s, uint64_t generation_id);
/* The generation a request id names, and its session; NULL when none. */
struct sf_wal_gen *sf_wal_state_request(const struct sf_wal_state *st, const char *request_id,
					struct sf_wal_session **s);
/* Every live session, in opening order. */
struct sf_wal_session *sf_wal_state_first(const struct sf_wal_state *st);
uint32_t sf_wal_state_count(const struct sf_wal_state *st);
/* One past the highest session id any record named (the HEAD record's, if higher). */
uint64_t sf_wal_state_next_session(const struct sf_wal_state *st);
/* Logprob entries i.. of g decoded: calls fn once per LOGPROBS record at or after entry
 * `from`, with the record's entries (the first `skip` of them already seen). */
void sf_wal_gen_logprobs(const struct sf_wal_gen *g, uint32_t from,
			 void (*fn)(void *arg, const uint8_t *lp, uint32_t n, uint32_t skip),
			 void *arg);

/* Writes the table as records (what a replay of them rebuilds): emit is called for each,
 * in an order apply accepts. Returns 0 or the first negative code emit returned. */
typedef int (*sf_wal_emit_fn)(void *arg, uint8_t type, const void *p, uint32_t len);
int sf_wal_state_snapshot(const struct sf_wal_state *st, struct sf_buf *scratch,
			  sf_wal_emit_fn emit, void *arg);

#endif
