/* The engine interface the node daemon drives: tokenizer, per-session contexts, a batched
 * decode step, staged forward over a layer range, state operations and a timing model.
 *
 * An engine is one table of functions (struct sf_engine_ops) over the implementation's own
 * state. The node calls the sf_engine_* wrappers below, which check arguments and bounds the
 * same way for every implementation, then dispatch. An engine is used by one thread at a time.
 *
 * Every call that fills a buffer takes its capacity; when the answer does not fit it returns
 * SF_E_LIMIT and sets the length argument to the size it needs. Calls return 0
 * or a negative sf_code with err saying what was wrong. */
#ifndef SUPERFLUID_ENGINE_H
#define SUPERFLUID_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>
#include <superfluid/wire.h>

struct sf_engine;     /* opaque: the ops table and the implementation's state */
struct sf_prefix_cache; /* opaque: an engine's index of shared pages (src/prefix) */
struct sf_engine_ctx; /* opaque, defined by each implementation: one session's context */

/* What an engine serves; fixed for its life. */
struct sf_engine_info {
	char model[SF_MAX_NAME];
	uint32_t vocab_size;
	uint32_t n_layers;
	uint32_t hidden;              /* width of the hidden state */
	uint32_t stage_bytes;         /* size of the hidden-state blob between pipeline stages */
	uint32_t ctx_len;             /* most tokens one context holds */
	uint32_t batch_size;          /* most contexts in one decode step */
	uint64_t ctx_bytes_per_token; /* context (KV) memory one token takes for good (a GGUF
				       * model's sliding-window layers' rows are held within
				       * their window only, beside it) */
	uint64_t ctx_mem_total;       /* context memory of all contexts together, 0: unbounded */
	uint64_t tokenizer_digest;    /* DESIGN.md fleet link point 3; never 0 */
	uint64_t tokenizer_full;      /* sf_tok_digest_full of its tokenizer (protocol 7); 0: none */
	bool has_bos;
	uint32_t bos;
	uint32_t eos;
	bool encodes_plain;  /* offers encoding without special-token parsing */
	bool encodes_pieces; /* offers encoding of (text, is_special) pieces */
};

/* A special token: its text (also its bytes) and id. */
struct sf_engine_special {
	const char *text;
	uint32_t token;
};

/* A named chat template (names as in Hugging Face's chat_template dictionary). */
struct sf_engine_template {
	const char *name;
	const char *text;
};

/* Log-probability of a produced token and of the most likely alternatives. */
struct sf_engine_logprob {
	uint32_t token;
	float logprob;
	uint32_t n_top;
	struct sf_top_logprob top[SF_MAX_TOP_LOGPROBS]; /* most likely first */
};

/* One context's entry in a decode step. */
struct sf_engine_step {
	struct sf_engine_ctx *ctx;  /* in */
	bool logprobs;              /* in: fill lp */
	uint32_t top_logprobs;      /* in: alternatives wanted in lp.top, 0..SF_MAX_TOP_LOGPROBS */
	uint32_t generated;         /* in: how many of ctx's last tokens this generation made (in
				     * this run and those it continues): a grammar reads them */
	int rc;                     /* out: 0, or why this context got no token (SF_E_LIMIT: full) */
	uint32_t token;             /* out: the next token, already appended to ctx */
	bool eog;                   /* out: the token ends a generation (an end-of-turn token
				     * other than info.eos, such as <|im_end|> or <|eot_id|>) */
	bool more;                  /* out: only part of the context's appended tokens could be
				     * computed this step (a long prompt, in chunks): no token */
	struct sf_engine_logprob lp; /* out when logprobs or top_logprobs */
};

/* A stage's input. Without ctx the stage keeps nothing: the first stage takes the whole
 * context's tokens, a later one the previous stage's hidden blob of every position. With ctx
 * (a context of this engine's, made for the stage and used for its layers only) the stage
 * keeps its layers' keys and values and the ids of what it ran: the input is the positions
 * from `from` on, tokens (their ids) into every stage and, past the first, their hidden blob;
 * the context first drops what it holds past `from`, and holds from + n_tokens after. */
struct sf_engine_stage_in {
	uint32_t start_layer;
	uint32_t end_layer;                /* start_layer < end_layer <= n_layers */
	const uint32_t *tokens;            /* start_layer == 0, or with ctx */
	size_t n_tokens;
	const uint8_t *hidden;             /* start_layer > 0 */
	size_t hidden_len;
	const struct sf_sampling *sampling; /* for the last stage's token; NULL: greedy */
	struct sf_engine_ctx *ctx;         /* NULL: stateless */
	uint32_t from;
	uint32_t n_generated; /* with ctx: of its tokens, the last ones the generation made */
	bool logprobs;         /* the last stage: its token's log-probability in out->lp */
	uint32_t top_logprobs; /* ... and this many alternatives (0..SF_MAX_TOP_LOGPROBS) */
};

/* A stage's output: SF_STAGE_HIDDEN (hidden_len bytes in the caller's buffer), SF_STAGE_TOKEN
 * (end_layer == n_layers), or SF_STAGE_HELD when ctx holds fewer than `from` positions (held
 * says how many; nothing ran). */
struct sf_engine_stage_out {
	uint8_t kind;
	uint32_t token;
	size_t hidden_len;
	uint32_t held;
	struct sf_engine_logprob lp; /* SF_STAGE_TOKEN, when logprobs or top_logprobs */
};

/* A blob a state operation reads, already fetched by hash. */
struct sf_engine_blob {
	const uint8_t *data;
	size_t len;
};

/* A state operation: an engine operation beside generation, named. */
struct sf_engine_op_req {
	const char *op;
	const uint8_t *args;
	size_t args_len;
	const struct sf_engine_blob *blobs;
	size_t n_blobs;
	struct sf_engine_ctx *ctx; /* the session it acts on, or NULL */
};

/* Where a state operation run in steps stands (sf_engine_state_op_step): zeroed by the caller
 * before the first step and kept between steps; pos is the engine's. */
struct sf_engine_op_step {
	uint64_t pos[4];
	size_t len;  /* result bytes written so far */
	bool more;   /* set by each step: the operation is not done */
};

/* Takes one streamed segment (its text is valid during the call). A nonzero return, a
 * negative sf_code, stops the operation, which then returns that value. */
typedef int (*sf_engine_segment_fn)(void *arg, const struct sf_segment *seg);

/* The implementation's side. The wrappers have checked every pointer, count and range they
 * document before calling; optional entries may be NULL. */
struct sf_engine_ops {
	const char *kind; /* "sim", ... */
	void (*destroy)(void *impl);
	/* Fills info; tokenizer_digest 0 lets sf_engine_create compute it from token_bytes. */
	void (*info)(void *impl, struct sf_engine_info *info);

	int (*encode)(void *impl, const char *text, size_t len, bool specials, uint32_t *out,
		      size_t cap, size_t *n_out, struct sf_err *err);
	int (*encode_pieces)(void *impl, const struct sf_piece *pieces, size_t n, uint32_t *out,
			     size_t cap, size_t *n_out, struct sf_err *err); /* optional */
	int (*token_bytes)(void *impl, uint32_t token, uint8_t *out, size_t cap, size_t *len,
			   struct sf_err *err);
	void (*specials)(void *impl, const struct sf_engine_special **list, size_t *n);
	void (*templates)(void *impl, const struct sf_engine_template **list, size_t *n);
	/* The GGUF pairs a tokenizer is loaded from (sf_tok_load), as a file (optional). */
	int (*tokenizer_file)(void *impl, const uint8_t **data, size_t *len, struct sf_err *err);

	int (*ctx_new)(void *impl, const struct sf_sampling *s, struct sf_engine_ctx **out,
		       struct sf_err *err);
	void (*ctx_free)(void *impl, struct sf_engine_ctx *ctx);
	int (*prefill)(void *impl, struct sf_engine_ctx *ctx, const uint32_t *tokens, size_t n,
		       struct sf_err *err);
	/* Prefix reuse (all three optional; an engine without them shares nothing). */
	void (*ctx_share)(void *impl, struct sf_engine_ctx *ctx, uint64_t ns);
	uint32_t (*ctx_reused)(void *impl, const struct sf_engine_ctx *ctx);
	struct sf_prefix_cache *(*prefix_cache)(void *impl);
	size_t (*ctx_len)(void *impl, const struct sf_engine_ctx *ctx);
	int (*ctx_truncate)(void *impl, struct sf_engine_ctx *ctx, size_t n, struct sf_err *err);
	uint64_t (*mem_used)(void *impl);

	int (*decode)(void *impl, struct sf_engine_step *steps, size_t n, struct sf_err *err);
	int (*stage_forward)(void *impl, const struct sf_engine_stage_in *in, uint8_t *hidden_out,
			     size_t cap, struct sf_engine_stage_out *out, struct sf_err *err);

	void (*state_op_names)(void *impl, const char *const **names, size_t *n);
	int (*state_op)(void *impl, const struct sf_engine_op_req *req, sf_engine_segment_fn cb,
			void *cb_arg, uint8_t *result, size_t cap, size_t *result_len,
			struct sf_err *err);
	/* One bounded step of a state operation (may be NULL: state_op runs it whole). */
	int (*state_op_step)(void *impl, const struct sf_engine_op_req *req,
			     struct sf_engine_op_step *st, size_t budget, sf_engine_segment_fn cb,
			     void *cb_arg, uint8_t *result, size_t cap, struct sf_err *err);

	double (*prefill_ms)(void *impl, size_t n_tokens);
	double (*decode_ms)(void *impl, size_t batch);
};

/* ---- the engine ---- */

/* Wraps impl behind ops (the engine owns impl from here, also on failure). */
int sf_engine_create(const struct sf_engine_ops *ops, void *impl, struct sf_engine **out,
		     struct sf_err *err);

/* Destroys the engine and its implementation; contexts must be freed first. NULL is a no-op. */
void sf_engine_free(struct sf_engine *e);

/* The implementation's state, for its own helpers and tests. */
void *sf_engine_impl(const struct sf_engine *e);

/* The ops table's kind ("sim"). */
const char *sf_engine_kind(const struct sf_engine *e);

/* What the engine serves (valid for the engine's life). */
const struct sf_engine_info *sf_engine_info(const struct sf_engine *e);

/* Fills a wire model_info from the engine's info; name points into the engine. */
void sf_engine_model_info(const struct sf_engine *e, struct sf_model_info *out);

/* ---- tokenizer ---- */

/* Encodes text, turning special-token texts (e.g. "<|im_start|>") into their tokens. */
int sf_engine_encode(struct sf_engine *e, const char *text, size_t len, uint32_t *out,
		     size_t cap, size_t *n_out, struct sf_err *err);

/* Encodes text as plain text: special-token texts stay ordinary text. */
int sf_engine_encode_plain(struct sf_engine *e, const char *text, size_t len, uint32_t *out,
			   size_t cap, size_t *n_out, struct sf_err *err);

/* Encodes pieces: a special piece must be exactly one special token's text, others are plain. */
int sf_engine_encode_pieces(struct sf_engine *e, const struct sf_piece *pieces, size_t n,
			    uint32_t *out, size_t cap, size_t *n_out, struct sf_err *err);

/* The bytes of one token (a special's bytes are its text); SF_E_RANGE past the vocabulary. */
int sf_engine_token_bytes(struct sf_engine *e, uint32_t token, uint8_t *out, size_t cap,
			  size_t *len, struct sf_err *err);

/* The bytes of a token sequence, concatenated (not NUL-terminated). */
int sf_engine_detokenize(struct sf_engine *e, const uint32_t *tokens, size_t n, uint8_t *out,
			 size_t cap, size_t *len, struct sf_err *err);

/* The special tokens (engine-owned, valid for the engine's life). */
void sf_engine_specials(struct sf_engine *e, const struct sf_engine_special **list, size_t *n);

/* The named chat templates, the default one first (engine-owned). */
void sf_engine_templates(struct sf_engine *e, const struct sf_engine_template **list, size_t *n);

/* The template named name, or the default one for NULL; NULL when there is none. */
const char *sf_engine_chat_template(struct sf_engine *e, const char *name);

/* The tokenizer's GGUF pairs as a file (engine-owned, valid for the engine's life), from which
 * sf_tok_load makes a tokenizer that encodes as this engine does: what a head encodes with
 * (PROTOCOL.md 9.7). 0 with *len 0 when the engine has none to give. */
int sf_engine_tokenizer_file(struct sf_engine *e, const uint8_t **data, size_t *len,
			     struct sf_err *err);

/* The tokenizer digest of any engine, from its token bytes: SHA-256 over (vocab size u32 LE,
 * then each token's byte length u32 LE and bytes), first 8 bytes little-endian, 0 -> 1. */
int sf_engine_compute_digest(struct sf_engine *e, uint64_t *digest, struct sf_err *err);

/* ---- contexts ---- */

/* A new empty context sampling with s (SF_E_RANGE: temperature < 0, top_p outside [0,1]). */
int sf_engine_ctx_new(struct sf_engine *e, const struct sf_sampling *s,
		      struct sf_engine_ctx **out, struct sf_err *err);

/* Frees a context and its memory. NULL is a no-op. */
void sf_engine_ctx_free(struct sf_engine *e, struct sf_engine_ctx *ctx);

/* Appends tokens. SF_E_LIMIT past ctx_len, SF_E_NOMEM past the context memory, SF_E_RANGE for
 * a token past the vocabulary; on error the context is as it was. */
int sf_engine_prefill(struct sf_engine *e, struct sf_engine_ctx *ctx, const uint32_t *tokens,
		      size_t n, struct sf_err *err);

/* Tokens the context holds. */
size_t sf_engine_ctx_len(struct sf_engine *e, const struct sf_engine_ctx *ctx);

/* Drops the context's tokens past the first n (n <= its length), as if never appended. */
int sf_engine_ctx_truncate(struct sf_engine *e, struct sf_engine_ctx *ctx, size_t n,
			   struct sf_err *err);

/* Context memory all contexts hold now, in bytes (cached pages no context holds are not
 * counted: they are evicted when the room is needed). */
uint64_t sf_engine_mem_used(struct sf_engine *e);

/* ---- prefix reuse (docs/ENGINE.md) ---- */

/* Shares ctx's full pages by content with every context of namespace ns (0: none, the
 * default): its prefills adopt the pages of the longest indexed prefix of its tokens instead
 * of computing them (the last token is always computed), and its computed pages are indexed
 * for others; what it generates is the same bit for bit either way. Set on a new context
 * before its first prefill; a no-op on an engine without prefix reuse. */
void sf_engine_ctx_share(struct sf_engine *e, struct sf_engine_ctx *ctx, uint64_t ns);

/* Positions ctx's last prefill adopted from the index instead of computing them. */
uint32_t sf_engine_ctx_reused(struct sf_engine *e, const struct sf_engine_ctx *ctx);

/* The engine's index of shared pages (what it adds and evicts, its statistics), or NULL. */
struct sf_prefix_cache *sf_engine_prefix_cache(struct sf_engine *e);

/* ---- generation ---- */

/* One decode step over n <= batch_size distinct contexts: each gets its next token appended,
 * and its logprobs when asked; or, for a context whose appended tokens an engine computes in
 * chunks, steps[i].more and no token until they are done. A context's token does not depend
 * on the others in the batch.
 * Returns a negative sf_code when it refused the whole batch (nothing changed); otherwise 0,
 * with steps[i].rc saying whether each context got its token. */
int sf_engine_decode(struct sf_engine *e, struct sf_engine_step *steps, size_t n,
		     struct sf_err *err);

/* Runs layers [start_layer, end_layer): the hidden blob into hidden_out (capacity cap,
 * info.stage_bytes suffices) or, when end_layer == n_layers, the next token. Running [0,k) then
 * [k,n) gives what [0,n) gives, and that token is the decode step's for the same context; a
 * stage with a context run over a context's positions in pieces gives what one run over all
 * of them gives. A context keeps the layers of its first stage forward: others are
 * SF_E_RANGE. */
int sf_engine_stage_forward(struct sf_engine *e, const struct sf_engine_stage_in *in,
			    uint8_t *hidden_out, size_t cap, struct sf_engine_stage_out *out,
			    struct sf_err *err);

/* ---- state operations ---- */

/* The names of the state operations the engine offers (engine-owned). */
void sf_engine_state_op_names(struct sf_engine *e, const char *const **names, size_t *n);

/* Runs a state operation: segments stream to cb (may be NULL) in seq order, then the result
 * goes into result (capacity cap). SF_E_RANGE for an operation the engine lacks. */
int sf_engine_state_op(struct sf_engine *e, const struct sf_engine_op_req *req,
		       sf_engine_segment_fn cb, void *cb_arg, uint8_t *result, size_t cap,
		       size_t *result_len, struct sf_err *err);
/* The same operation in bounded steps, so a caller on an event loop can run other work
 * between them: each call does about budget units of work (for the simulated transcribe,
 * bytes of input; 0: all of it), streams its segments to cb and sets st->more while steps
 * remain; req, result and cap must stay the same from step to step, and after the last the
 * result is result[0..st->len). The segments and result are those of sf_engine_state_op.
 * An engine without steps runs the whole operation in the first call. */
int sf_engine_state_op_step(struct sf_engine *e, const struct sf_engine_op_req *req,
			    struct sf_engine_op_step *st, size_t budget, sf_engine_segment_fn cb,
			    void *cb_arg, uint8_t *result, size_t cap, struct sf_err *err);

/* ---- timing model (the engine does not sleep; the node's scheduler paces itself) ---- */

/* Milliseconds a prefill of n_tokens takes. */
double sf_engine_prefill_ms(struct sf_engine *e, size_t n_tokens);

/* Milliseconds decode steps for batch contexts take (more than batch_size: several steps). */
double sf_engine_decode_ms(struct sf_engine *e, size_t batch);

#endif
