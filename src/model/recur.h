/* The tokens of a forward call grouped by their context, for the recurrent layers (deltanet.h,
 * mamba2.h), whose state goes through a context's tokens one after another in call order
 * (position order within a context). */
#ifndef SF_MODEL_RECUR_H
#define SF_MODEL_RECUR_H

#include <stdint.h>

#include "model/model.h"

struct sf_recur_groups {
	uint32_t *first, *tail; /* each context's first and last token */
	uint32_t *next;         /* each token's next of its context (UINT32_MAX: none) */
	uint32_t n_ctx;
};

/* Room for calls of up to max_tokens tokens: SF_E_NOMEM (g left empty) or 0. */
int sf_recur_groups_init(struct sf_recur_groups *g, uint32_t max_tokens);
void sf_recur_groups_fini(struct sf_recur_groups *g);

/* Groups the call's n tokens by their cache, in call order. */
void sf_recur_groups_make(struct sf_recur_groups *g, const struct sf_fwd_tok *toks, uint32_t n);

#endif
