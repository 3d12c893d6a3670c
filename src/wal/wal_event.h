/* A head event as a log record and back: how the head daemon's log (src/headd/headd_wal.c)
 * turns a session's token events into records, and the records into the same events again
 * once durable. No I/O. */
#ifndef SF_WAL_WAL_EVENT_H
#define SF_WAL_WAL_EVENT_H

#include <superfluid/buf.h>
#include <superfluid/err.h>

#include "head/head.h"
#include "wal/wal_records.h"

/* Room for a decoded event's tokens and logprobs, reused from one event to the next. */
struct sf_wal_event_buf {
	uint32_t *tokens;
	uint32_t cap_tokens;
	struct sf_logprob *lps;
	struct sf_top_logprob *tops;
	uint32_t cap_lps;
};

/* Encodes ev (TOKENS, LOGPROBS, FINISH or ERROR) into out, its record type in *type.
 * Returns 0, SF_E_RANGE for a kind that is no token event (PLACED, STATUS...), or the
 * encoder's negative code. */
int sf_wal_event_put(struct sf_buf *out, const struct sf_head_event *ev, uint8_t *type);

/* The event an event record was (node SF_HEAD_NO_NODE: the caller's to fill), its tokens and
 * logprobs in b until the next call; r gets the record. 0, or a negative sf_code with err. */
int sf_wal_event_get(struct sf_wal_event_buf *b, uint8_t type, const uint8_t *p, uint32_t len,
		     struct sf_head_event *ev, struct sf_walrec_event *r, struct sf_err *err);

/* What sf_head_durable is told once the record is durable: its seq, or all of the
 * generation (UINT64_MAX) for its end. */
uint64_t sf_wal_event_durable_seq(uint8_t type, const struct sf_walrec_event *r);

void sf_wal_event_buf_free(struct sf_wal_event_buf *b);

#endif
