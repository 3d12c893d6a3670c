/* Head events to records and back. */
#include "wal/wal_event.h"

#include <stdlib.h>

int sf_wal_event_put(struct sf_buf *out, const struct sf_head_event *ev, uint8_t *type)
{
	switch (ev->kind) {
	case SF_HEAD_EV_TOKENS:
		*type = SF_WALREC_TOKENS;
		return sf_walrec_put_tokens(out, ev->session_id, ev->generation_id, ev->epoch,
					    ev->seq, ev->tokens, ev->n_tokens);
	case SF_HEAD_EV_LOGPROBS:
		*type = SF_WALREC_LOGPROBS;
		return sf_walrec_put_logprobs(out, ev->session_id, ev->generation_id, ev->epoch,
					      ev->seq, ev->logprobs, ev->n_logprobs);
	case SF_HEAD_EV_FINISH: /* the node's (epoch set), or the head's own (no seq) */
		*type = SF_WALREC_END;
		return sf_walrec_put_end(out, ev->session_id, ev->generation_id, ev->epoch,
					 ev->epoch ? ev->seq : UINT64_MAX, ev->reason, 0, NULL);
	case SF_HEAD_EV_ERROR:
		*type = SF_WALREC_END;
		return sf_walrec_put_end(out, ev->session_id, ev->generation_id, 0, UINT64_MAX,
					 SF_FINISH_ERROR, ev->code, ev->msg);
	default:
		return SF_E_RANGE;
	}
}

static int room(struct sf_wal_event_buf *b, uint32_t n_tokens, uint32_t n_lps)
{
	if (n_tokens > b->cap_tokens) {
		uint32_t *t = realloc(b->tokens, (size_t)n_tokens * sizeof(*t));
		if (!t)
			return SF_E_NOMEM;
		b->tokens = t;
		b->cap_tokens = n_tokens;
	}
	if (n_lps > b->cap_lps) {
		struct sf_logprob *l = realloc(b->lps, (size_t)n_lps * sizeof(*l));
		if (l)
			b->lps = l;
		struct sf_top_logprob *tp =
			realloc(b->tops, (size_t)n_lps * SF_MAX_TOP_LOGPROBS * sizeof(*tp));
		if (tp)
			b->tops = tp;
		if (!l || !tp)
			return SF_E_NOMEM;
		b->cap_lps = n_lps;
	}
	return 0;
}

int sf_wal_event_get(struct sf_wal_event_buf *b, uint8_t type, const uint8_t *p, uint32_t len,
		     struct sf_head_event *ev, struct sf_walrec_event *r, struct sf_err *err)
{
	int rc = sf_walrec_get_event(type, p, len, r, err);
	if (rc)
		return rc;
	*ev = (struct sf_head_event){ .node = SF_HEAD_NO_NODE, .session_id = r->session_id,
				      .generation_id = r->generation_id, .epoch = r->epoch,
				      .seq = r->seq };
	switch (type) {
	case SF_WALREC_TOKENS:
		if (room(b, r->n_tokens ? r->n_tokens : 1, 0))
			return sf_err_set(err, SF_E_NOMEM, "no memory for an event's tokens");
		sf_walrec_tokens(r->tokens, r->n_tokens, b->tokens);
		ev->kind = SF_HEAD_EV_TOKENS;
		ev->tokens = b->tokens;
		ev->n_tokens = r->n_tokens;
		return 0;
	case SF_WALREC_LOGPROBS:
		if (room(b, 0, r->n_lp ? r->n_lp : 1))
			return sf_err_set(err, SF_E_NOMEM, "no memory for an event's logprobs");
		sf_walrec_logprobs(r->lp, r->n_lp, b->lps, b->tops);
		ev->kind = SF_HEAD_EV_LOGPROBS;
		ev->logprobs = b->lps;
		ev->n_logprobs = r->n_lp;
		return 0;
	default: /* END: an error when it carries a code */
		if (r->code) {
			ev->kind = SF_HEAD_EV_ERROR;
			ev->code = r->code;
			ev->msg = r->msg;
		} else {
			ev->kind = SF_HEAD_EV_FINISH;
			ev->reason = r->reason;
		}
		return 0;
	}
}

uint64_t sf_wal_event_durable_seq(uint8_t type, const struct sf_walrec_event *r)
{
	return type == SF_WALREC_END ? UINT64_MAX : r->seq;
}

void sf_wal_event_buf_free(struct sf_wal_event_buf *b)
{
	free(b->tokens);
	free(b->lps);
	free(b->tops);
	*b = (struct sf_wal_event_buf){ 0 };
}
