/* The remote tokenizer's state, shared by its files: nodes as their handshakes described them,
 * models with their tokenizer (or the export asked for), and encode requests in a fixed pool
 * with their waiters. */
#ifndef SF_HEAD_TOK_CLIENT_INTERNAL_H
#define SF_HEAD_TOK_CLIENT_INTERNAL_H

#include "head/tok_client.h"

#define TC_NONE UINT32_MAX
#define TC_BUCKETS (2 * SF_TOK_CLIENT_MAX_PENDING) /* a power of two */
#define TC_SLOT_BITS 16                            /* ids: sequence << 16 | slot */
#define TC_EXPORT_SLOT 0xffffu                     /* the slot part of an export's id */
#define TC_PROBE_SLOT 0xfffeu                      /* the slot part of a probe's id */

struct tc_node_model {
	uint32_t model;     /* index into tc->models */
	uint64_t digest;    /* as the handshake stated it; 0 on version 2 */
	uint64_t full;      /* its full digest, as TOKENIZER stated it (version 7); 0: none */
	bool export_tried;   /* asked for the export in this round (it timed out, or the send
			      * failed, or the link dropped) */
	bool export_refused; /* its export was wrong or empty: not asked again on this link */
	bool lacks;          /* its export said it does not have the model, or its tokenizer
			      * differs from the fleet's (full digest) or encodes otherwise
			      * than the head's (probe): not used for it */
	uint64_t probe_id;   /* the probe asked of it (tok_client_local.c), 0 when none waits */
	bool probed;         /* asked on this link */
};

struct tc_node {
	bool up;
	uint32_t version;
	char name[65]; /* for sentences: the node's identity (cut to 64 bytes), or its number */
	struct tc_node_model *models;
	uint32_t n_models;
};

struct tc_model {
	char name[SF_MAX_NAME + 1];
	struct sf_head_tokenizer *tok; /* once it arrived, kept */
	struct sf_tok *enc;            /* loaded from its file: the head encodes (tok_client_local.c) */
	bool enc_loading;
	uint32_t tok_node;             /* the node whose export the head took; TC_NONE: none yet */
	uint64_t full;                 /* the fleet's full digest (sf_tok_digest_full): what
					* tok_node stated (version 7), else its file's once loaded;
					* 0: not known */
	uint32_t enc_node;             /* the node whose file enc was loaded from */
	char enc_why[256];             /* why there is no enc */
	uint32_t fetch_node;           /* asked for its export; TC_NONE: not asking */
	uint64_t fetch_id, fetch_deadline;
	uint64_t fetch_send_at;        /* the ask goes out then (cfg.export_delay_ms); 0: sent */
	uint32_t rr;                   /* the node the last encode went to */
	char why[512];                 /* why the last export failed */
};

struct tc_waiter {
	uint64_t ticket;   /* 0: free */
	uint32_t req;
	uint32_t prev, next; /* on the request's list; next also links the free list */
};

struct tc_req {
	bool used, dead;  /* dead: finished, its waiters are told at the next delivery */
	uint8_t key[32];  /* with the model's digest once it is known, 0 before */
	uint32_t model;
	uint8_t mode;
	char *text;       /* ENCODE, PLAIN: a copy; PIECES: the pieces' texts */
	uint32_t text_len;
	struct sf_piece *pieces;
	uint32_t n_pieces;
	uint32_t node;    /* where it was sent; TC_NONE: waiting for the model's tokenizer, or
			   * (lost set) for a node serving the model to come up again */
	uint32_t lost;    /* the node whose link closed before it answered, no other up: TC_NONE */
	uint64_t request_id, deadline;
	uint32_t hnext;   /* key chain, free list or dead list */
	uint32_t waiters, n_waiters;
	int rc;           /* once dead: the answer */
	const uint32_t *tokens; /* borrowed from the message being handled */
	uint32_t n_tokens;
	char msg[512];
};

struct sf_tok_client {
	struct sf_tok_client_config cfg;
	struct sf_tok_client_io io;
	struct sf_tok_cache *cache;
	uint64_t now, seq;
	struct tc_node *nodes; /* cfg.max_nodes */
	uint8_t *tried;        /* scratch: nodes tried for one send */
	struct tc_model *models;
	uint32_t n_models, cap_models;
	struct tc_req *reqs;   /* SF_TOK_CLIENT_MAX_PENDING */
	uint32_t free_req, n_reqs;
	uint32_t buckets[TC_BUCKETS];
	struct tc_waiter *waiters;
	uint32_t free_waiter, n_waiters;
	uint32_t dead_head, dead_tail;
	uint32_t *local;       /* tok_client_local.c: the last encoding made here */
	size_t cap_local;
	uint64_t n_local;
};

/* tok_client_local.c: a TOKENIZER_FILE from a node: loaded by io.load when it is the file of a
 * model's tokenizer that arrived (its digest), sent by the node whose export the head took and
 * that serves the model, unless one is loaded or loading. */
void tc__on_file(struct sf_tok_client *tc, uint32_t node, const struct sf_tokenizer_file *m);
/* Once the model's full digest is known (md->full), a node up that serves it (node: that one,
 * or TC_NONE for all) whose handshake stated another (version 7: the same tokens' bytes, other
 * scores, merges, pre-tokenizer, types, special ids or flags) is not used for the model, and
 * io.warn names it and the node whose tokenizer the head took. */
void tc__full_check(struct sf_tok_client *tc, uint32_t model, uint32_t node);
/* Once the head encodes a model itself, every other node up that serves it (version 3 and
 * later) and whose full digest does not decide it (none stated, or none known) is asked to
 * encode a probe text (node: that one, or TC_NONE for all): one whose tokens differ from the
 * head's is not used for the model, and io.warn names it and the node whose tokenizer the
 * head has. */
void tc__probe(struct sf_tok_client *tc, uint32_t model, uint32_t node);
/* A TOKENIZE_RESP to a probe (its id's slot TC_PROBE_SLOT). */
void tc__on_probe(struct sf_tok_client *tc, uint32_t node, const struct sf_tokenize_resp *m);
/* The encoding of a request md's encoder takes (1: *tokens, valid until the next call into
 * tc, also cached under key; a negative sf_code with err set), or 0 when it is a node's to
 * make (no encoder, or over SF_TOK_CLIENT_LOCAL_MAX bytes). */
int tc__encode_local(struct sf_tok_client *tc, struct tc_model *md, unsigned mode,
		     const char *text, size_t text_len, const struct sf_piece *pieces, uint32_t n,
		     const uint8_t key[32], const uint32_t **tokens, uint32_t *n_tokens,
		     struct sf_err *err);

/* tok_client.c */
const char *tc__node_name(const struct sf_tok_client *tc, uint32_t node);
struct tc_node_model *tc__node_model(struct sf_tok_client *tc, uint32_t node, uint32_t model);
uint32_t tc__find_model(const struct sf_tok_client *tc, const char *name, size_t len);
void tc__duration(uint32_t ms, char *buf, size_t n);
/* Asks a node up that serves the model, not asked yet in this round (new_round: forget who
 * was) and whose export was not refused, for its export; when there is none, fails the
 * requests waiting for it and returns a negative sf_code with err set. */
int tc__fetch(struct sf_tok_client *tc, uint32_t model, bool new_round, struct sf_err *err);

/* tok_client_req.c */
void tc__reqs_init(struct sf_tok_client *tc);
void tc__reqs_free(struct sf_tok_client *tc);
void tc__deliver(struct sf_tok_client *tc);
void tc__on_resp(struct sf_tok_client *tc, uint32_t node, const struct sf_tokenize_resp *m);
void tc__tokenizer_arrived(struct sf_tok_client *tc, uint32_t model);
void tc__fail_waiting(struct sf_tok_client *tc, uint32_t model, int code, const char *msg);
void tc__node_lost(struct sf_tok_client *tc, uint32_t node);
/* Sends the requests waiting for a node serving their model to come up (tc__node_lost). */
void tc__node_came(struct sf_tok_client *tc, uint32_t node);
void tc__expire(struct sf_tok_client *tc);
uint64_t tc__reqs_deadline(const struct sf_tok_client *tc);

#endif
