/* The head's remote tokenizer, with no I/O in it: for each model the fleet serves, the
 * tokenizer exported by a node that serves it (asked for when the first such node's link
 * opens), and encodings asked of a node serving the model once per distinct request, through
 * the cache (tok_cache.h). Identical requests in flight share one TOKENIZE_REQ. A request
 * whose node's link drops is asked again of another node serving the model; one unanswered
 * past its deadline fails with a message naming the node.
 *
 * The caller runs the links: it says when a node's link opened (with what its handshake said:
 * models and tokenizer digests) or closed, hands over TOKENIZER_EXPORT and TOKENIZE_RESP
 * messages, and calls sf_tok_client_tick at sf_tok_client_deadline. Answers come through
 * io->done from inside sf_tok_client_on_msg, _tick, _node_up and _node_down, never from inside
 * sf_tok_client_encode (a cache hit is returned at once by it instead).
 *
 * Which nodes: version 3 ones (a version 2 node is known, never asked). The first export that
 * arrives fixes the model's tokenizer; a node whose handshake stated another digest for the
 * model, or another full digest (version 7: sf_tok_digest_full, io.warn names both nodes), or
 * whose export said it lacks the model, is not used for its encodes (until its link opens
 * again). An export that is late, after its ask was given up on, is still taken. */
#ifndef SF_HEAD_TOK_CLIENT_H
#define SF_HEAD_TOK_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include <superfluid/err.h>
#include <superfluid/link.h>
#include <superfluid/wire.h>

#include "head/tok_cache.h"
#include "head/tokenizer.h"

#define SF_TOK_CLIENT_TIMEOUT_MS 10000
/* Bytes of text (a request's pieces' together) the head encodes itself with a model's own
 * tokenizer; a longer one a node encodes, so that no loop turn spends long on it. */
#define SF_TOK_CLIENT_LOCAL_MAX 16384
#define SF_TOK_CLIENT_MAX_PENDING 4096 /* tickets waited for at once, and requests in flight */

struct sf_tok_client_config {
	uint32_t max_nodes;       /* 0: 64 */
	uint64_t cache_tokens;    /* 0: SF_TOK_CACHE_DEFAULT_TOKENS */
	uint32_t timeout_ms;      /* 0: SF_TOK_CLIENT_TIMEOUT_MS */
	/* A test's knob (headd's SF_TEST_TOKENIZER_DELAY_MS): each export is asked for this long
	 * after the node is chosen, so that requests meet a model whose tokenizer has not come;
	 * at most SF_TOK_CLIENT_MAX_DELAY_MS. 0: at once. */
	uint32_t export_delay_ms;
};
#define SF_TOK_CLIENT_MAX_DELAY_MS 10000

struct sf_tok_client_io {
	void *arg;
	/* Sends a message to node on its current link; 0 or a negative sf_code. */
	int (*send)(void *arg, uint32_t node, uint16_t type, const void *msg);
	/* An encoding asked for with sf_tok_client_encode is ready (rc 0: tokens[0..n), valid
	 * during the call) or failed (rc < 0, msg says why in one sentence naming the node or
	 * model: SF_E_SILENT past the timeout, SF_E_STATE no node left, SF_E_UNSUPPORTED a mode
	 * the tokenizer does not offer, SF_E_RANGE the node refused). Once per ticket. Must not
	 * call back in. */
	void (*done)(void *arg, uint64_t ticket, int rc, const uint32_t *tokens, uint32_t n,
		     const char *msg);
	/* A model's tokenizer arrived (may be NULL). */
	void (*ready)(void *arg, const char *model);
	/* It came with its file (version 5: the GGUF pairs sf_tok_load takes; valid during the
	 * call): load it off the loop and hand the result to sf_tok_client_encoder. 0 when it
	 * will; else (or NULL) the model's texts are encoded by nodes. */
	int (*load)(void *arg, const char *model, const uint8_t *file, size_t len);
	/* An operator's sentence about the fleet (a node whose tokenizer differs: not used for
	 * that model), or NULL. */
	void (*warn)(void *arg, const char *msg);
	/* Node's tokenizer for model differs from the fleet's (another full digest, or it encodes
	 * the probe text otherwise): nothing of model should run there until its link opens
	 * again (the head places no session of model there: sf_head_node_tok_differs). Called
	 * after warn; may be NULL. */
	void (*differs)(void *arg, uint32_t node, const char *model);
};

struct sf_tok_client;

/* cfg may be NULL (all defaults); io->send and io->done are required. */
int sf_tok_client_new(struct sf_tok_client **out, const struct sf_tok_client_config *cfg,
		      const struct sf_tok_client_io *io, struct sf_err *err);
/* Frees everything; tickets still waiting are dropped without done. */
void sf_tok_client_free(struct sf_tok_client *tc);

/* Node node's link opened (peer: its handshake; node < max_nodes, others are ignored) /
 * closed. An up for a node already up counts as a down first. */
void sf_tok_client_node_up(struct sf_tok_client *tc, uint32_t node,
			   const struct sf_link_peer *peer, uint64_t now_ms);
void sf_tok_client_node_down(struct sf_tok_client *tc, uint32_t node, uint64_t now_ms);

/* TOKENIZER_EXPORT and TOKENIZE_RESP from node (true, also when they answer nothing waited
 * for); false for any other message. */
bool sf_tok_client_on_msg(struct sf_tok_client *tc, uint32_t node, const struct sf_msg *m,
			  uint64_t now_ms);

/* The model's tokenizer, or NULL while none has arrived. */
const struct sf_head_tokenizer *sf_tok_client_tokenizer(const struct sf_tok_client *tc,
							const char *model);

/* Whether model's tokenizer is on its way: true while a node is asked for its export (it may
 * arrive); false once it has arrived (*why "") or while none is asked for (*why: a sentence on
 * the last failure, or "no node serving it has been up"). */
bool sf_tok_client_tokenizer_coming(const struct sf_tok_client *tc, const char *model,
				    const char **why);

/* Asks for the encoding of pieces[0..n) (mode SF_TOKENIZE_PIECES) or text (ENCODE, PLAIN) with
 * model's tokenizer. Returns 1 with *tokens and *n_tokens set on a cache hit (valid until the
 * next call into tc; the cache answers with no node up too); 0 with *ticket set (never 0)
 * when the answer will come through io->done; or a negative sf_code with err set and *ticket
 * 0 (no node serves the model, the tokenizer does not offer that mode, text over the wire's
 * limits or holding a NUL, too many pending). Before the model's tokenizer has arrived the
 * request waits for it (its export is asked for if need be), then is sent or failed. */
int sf_tok_client_encode(struct sf_tok_client *tc, const char *model, unsigned mode,
			 const char *text, size_t text_len, const struct sf_piece *pieces,
			 uint32_t n, uint64_t now_ms, uint64_t *ticket, const uint32_t **tokens,
			 uint32_t *n_tokens, struct sf_err *err);
/* Forgets a ticket (its caller went away); done is not called for it. The request stays in
 * flight and its answer is still cached. Unknown or spent tickets are ignored. */
void sf_tok_client_forget(struct sf_tok_client *tc, uint64_t ticket);

void sf_tok_client_tick(struct sf_tok_client *tc, uint64_t now_ms);
uint64_t sf_tok_client_deadline(const struct sf_tok_client *tc); /* UINT64_MAX: none */

void sf_tok_client_cache_stats(const struct sf_tok_client *tc, struct sf_tok_cache_stats *out);

struct sf_tok;
/* What io.load made of model's file: enc (tc owns it from here) with its digest (sf_tok_digest)
 * and full digest (sf_tok_digest_full), or NULL and why. Kept when the digest is the model's
 * tokenizer's and the full digest the one the node that sent the file stated (version 7; a
 * node of an older version states none): from then on the head encodes model's texts of up to
 * SF_TOK_CLIENT_LOCAL_MAX bytes itself, as its nodes would, with no round trip; else freed,
 * why said. */
void sf_tok_client_encoder(struct sf_tok_client *tc, const char *model, struct sf_tok *enc,
			   uint64_t digest, uint64_t full, const char *why);
/* Whether the head encodes model's texts itself; when not, *why says why ("" while loading). */
bool sf_tok_client_encodes(const struct sf_tok_client *tc, const char *model, const char **why);

#endif
