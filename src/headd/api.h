/* The head's client API on its event loop: HTTP connections (with TLS when asked), the
 * OpenAI-shaped requests they carry, the generations those run on the fleet, named sessions
 * and the metrics. Everything here runs on the loop's thread. */
#ifndef HEADD_API_H
#define HEADD_API_H

#include <stdbool.h>
#include <stdint.h>

#include "api/api_output.h"
#include "daemon/log.h"
#include "wal/wal_records.h"
#include "wal/wal_turns.h"
#include "api/api_request.h"
#include "api/api_response.h"
#include "api/chat_templates.h"
#include "api/schema_gbnf.h"
#include "head/state_ops.h"
#include "head/tok_client.h"
#include "head/head.h"
#include "head/blob_cache.h"
#include "wal/wal.h"
#include "http/http_conn.h"
#include "http/tls.h"

#include "req_life.h"
#include "session_index.h"

struct headd;
struct headd_req;
struct headd_tr;
struct headd_tok_load;
struct sfd_jobs;
struct headd_part;
struct headd_gather;

/* One client connection. */
struct headd_http {
	struct headd *d;
	struct sf_conn *conn;     /* NULL once closed */
	struct sf_tls *tls;       /* NULL: plain HTTP */
	struct sf_http_conn *http;
	struct headd_req *req;    /* the request being answered, or NULL */
	int ep;                   /* its enum headd_endpoint, for the metrics */
	bool failed;              /* a write was refused: closing */
	bool ended;               /* a response ended: close, or take the next request */
	struct sf_http_conn_ops http_ops; /* the callbacks, with this connection as arg */
	struct sf_tls_ops tls_ops;
	const struct sf_http_request *move_req; /* being handed to shard move_to */
	unsigned move_to;
	bool adopting;            /* the handed-over request is being dispatched */
	struct headd_gather *gather; /* the answer waiting on other shards, or NULL */
	/* The tag of the API key the current request came with (headd_keys_check); all zero
	 * without --api-keys. What a request makes belongs to it. */
	uint8_t owner[SF_WALREC_OWNER_LEN];
	/* Its read timeouts (http_limits.c): where it was last seen, since when (loop ms). */
	int phase;                /* enum headd_http_phase */
	uint64_t phase_since;
	uint32_t served;          /* responses ended on it */
	bool durable_wait;        /* its answer waits for the log (headd_wal_answer_durable) */
	char cors[400];           /* the CORS header lines of the current answer (api_cors.c) */
	/* A generation parked until its model's tokenizer arrives (api_tok_wait.c): its request
	 * (valid until its response ends), how it is started again, since and until when. */
	bool tok_wait;
	bool wait_count;
	bool wait_for_model;      /* parked for the model itself (headd_model_coming) */
	uint8_t wait_route;       /* enum headd_wait_route: what starts it again */
	bool no_wait;             /* its request waited once: it is answered now, not parked */
	uint8_t wait_kind;        /* enum sf_api_kind */
	uint16_t wait_resume;     /* a follow (headd_resume): where its id starts in the path */
	const struct sf_http_request *wait_r;
	uint64_t wait_since, wait_until;
	char wait_model[SF_MAX_NAME + 1];
	struct headd_http *next;
};

/* A session clients name (X-Superfluid-Session): kept across requests on the node that holds
 * its context, its content mirrored here so the next turn appends only what is new. */
struct headd_named {
	char name[SF_API_MAX_SESSION_ID + 1];
	char model[256];
	uint64_t session_id;
	uint32_t *content;        /* the whole content the node has (prompts and replies) */
	uint32_t n_content, cap;
	uint32_t turns;
	uint64_t created_s, used_ms;
	struct headd_req *busy;   /* the request running a generation on it, or NULL */
	uint64_t restoring;       /* a generation from before a head restart runs on it (no
				   * request follows it yet): busy too */
	bool opened;              /* placed on a node at least once */
	uint64_t grammar;         /* its first turn's structured output (sf_grammar_text_digest),
				   * which its node's sampling keeps; 0: none */
	bool tail_unsure;         /* restored before its model's tokenizer came: its last token
				   * may be the one that ended the turn, dropped at the next turn */
	/* The key that made it: only requests with that key find it (names are per key). */
	uint8_t owner[SF_WALREC_OWNER_LEN];
	char last_id[SF_WALREC_MAX_ID + 1]; /* the request id of its latest turn kept ("") */
	struct sf_wal_turns kept;  /* a stored conversation's turns, to fork from (resp_fork.c) */
	struct headd_named *next;
};

/* One generation request (chat or completion) from start to its last byte. */
struct headd_req {
	struct headd *d;
	struct headd_http *h;     /* NULL once the client went away */
	struct headd_life life;   /* where it is (req_life.h): fed events, says what to do */
	struct sf_api_request r;
	uint64_t grammar_digest;  /* r.grammar as given (sf_grammar_text_digest), 0: none */
	char id[SF_WALREC_MAX_ID + 1]; /* SF_WALREC_MAX_ID: the log keeps it */
	uint8_t owner[SF_WALREC_OWNER_LEN]; /* its client's key (headd_http.owner) */
	uint64_t created_s;
	uint64_t t_start, t_first, t_last; /* loop ms: arrival, first token, last token */

	struct headd_named *named; /* or NULL: an unnamed session, closed at the end */
	bool forked;              /* a Responses request replaying an earlier response's
				   * conversation as a new one (resp_fork.c) */
	struct headd_resp *resp_state; /* a streamed Responses answer's items (api_responses.c) */
	struct headd_amsg *msg_state;  /* a streamed Messages answer's blocks (api_messages.c) */
	struct sf_api_embed_req *emb;  /* POST /v1/embeddings' request (api_embeddings.c) */
	uint64_t session_id, generation_id;
	uint64_t ticket;          /* tokenizer ticket while it is tokenizing */
	uint64_t render_ticket;   /* its render's while its template renders (chat_jobs.c) */
	uint64_t sse_at;          /* loop ms its stream last had bytes (keep-alives) */
	uint32_t *content;        /* the content sent for this generation */
	uint32_t n_content;
	uint32_t cached;          /* of it, the tokens its node had (kept, or in its prefix
				   * index): usage.prompt_tokens_details.cached_tokens */
	uint32_t *gen;            /* the tokens generated, as fed to out */
	uint32_t n_gen, gen_cap;
	uint32_t max_tokens;
	uint8_t *body;            /* the request's body, for the log (--wal-dir), or NULL */
	uint32_t body_len;
	uint64_t out_seed;        /* the output decoder's seed */
	size_t encode_bytes;      /* the text sent to be encoded (for the error if it cannot be) */
	bool logged;              /* its session and generation are in the log */
	bool resumed;             /* GET .../{id}: a client following a generation again */
	bool following;           /* such a follow's template renders (api_resume.c) */
	bool follow_named;        /* its client said how far it got in Last-Event-ID */
	int8_t follow_stream;     /* ?stream=: 1 true, -1 false, 0 as the request asked */
	uint8_t follow_kind;      /* the endpoint's (enum sf_api_kind) */
	uint32_t follow_after;    /* the tokens its client has */
	bool keep_session;        /* its session is a named one's: not closed at the end */
	bool rolled_back;         /* its named session's content is back to before the turn in
				   * the log (the turn failed) */
	bool unindexed;           /* d->api.reqs_by_session could not take it */

	const struct sf_head_tokenizer *tok;
	struct sf_out_vocab vocab;
	struct sf_out out;
	int chat_format;          /* the reply's text format (chat_parse.h), from the template */
	unsigned chat_flags;      /* its parser's flags; 0 with format 0: marker tokens only */
	struct sf_logprob *lps;   /* logprobs received (deep copies), when asked */
	uint32_t n_lps, lps_cap, lps_sent;

	/* n > 1: each choice runs as a request of its own, in its own session; the first (the
	 * lead) answers the client for all of them. */
	struct headd_req *lead;   /* the first choice (itself for it); NULL when n is 1 */
	struct headd_req *choice[SF_API_MAX_CHOICES]; /* the lead's: every choice, [0] itself */
	const struct sf_api_prompt *prompt; /* a completion's prompt (of r.prompts), or NULL */
	uint32_t n_choice, index;
	bool borrowed;            /* r belongs to the lead: not freed with this choice */
	bool tokenize_only;       /* POST /v1/tokenize: answer the encoding, generate nothing */
	bool count_only;          /* count_tokens, input_tokens: answer the prompt's size only */
	uint32_t count_base;      /* count_only: the tokens its conversation holds already */
	bool pipeline;            /* runs on --pipeline, not in a session of the head machine */
	const char *tok_model;    /* the model whose tokenizer encodes it (the stages' for a
				   * pipeline, else r.model) */
	bool role_sent;           /* the stream's first chunk (the role) went out */
	const char *finish_reason;
	struct sf_api_error fail;  /* set when it ended in an error (life.failed) */
	struct headd_tr *tr;      /* a transcription's state (api_transcribe.c), or NULL */
	struct headd_req *next;
};

/* Where a client connection is, for its timeouts (each phase its own limit). */
enum headd_http_phase {
	HP_TLS = 0,  /* the TLS handshake (--tls-handshake-timeout-s) */
	HP_FIRST,    /* accepted, no byte of a request yet (--http-header-timeout-s) */
	HP_HEAD,     /* reading the request line and headers (--http-header-timeout-s) */
	HP_BODY,     /* reading the body (--http-body-timeout-s) */
	HP_IDLE,     /* kept alive between requests (--http-idle-timeout-s) */
	HP_BUSY,     /* answering: no timeout here (--stream-buffer bounds a slow reader) */
	HP_COUNT
};

/* The endpoints, as the metrics count them. */
enum headd_endpoint {
	EP_CHAT = 0, EP_COMPLETIONS, EP_MODELS, EP_SESSIONS, EP_HEALTH, EP_METRICS, EP_OTHER,
	EP_TOKENIZE, EP_FLEET, EP_TRANSCRIBE, EP_RESPONSES, EP_MESSAGES, EP_EMBEDDINGS,
	EP_COUNT
};

/* The metrics registry (metrics.c). */
#define HEADD_HIST_BUCKETS 16
struct headd_hist {
	uint64_t count, bucket[HEADD_HIST_BUCKETS + 1];
	double sum;
};
struct headd_metrics {
	uint64_t requests[EP_COUNT][6];  /* [endpoint][status class: 2xx, 4xx, 5xx, 401, 429, other] */
	uint64_t prompt_tokens, completion_tokens;
	uint64_t streams_cut;     /* slow clients whose stream was ended */
	uint64_t keepalives;      /* SSE comments sent to streams silent HEADD_SSE_KEEPALIVE_MS */
	uint64_t client_gone;     /* generations cancelled because the client left */
	uint64_t *link_opens;     /* per node slot (HEADD_NODE_SLOTS), or NULL without memory */
	uint32_t http_conns;
	uint64_t http_timeouts[HP_COUNT]; /* connections closed for taking too long, by phase */
	uint64_t http_refused_full;   /* turned away: --http-max-conns, none idle to close */
	uint64_t http_refused_budget; /* requests refused: --http-body-budget-mb */
	uint64_t http_evicted;        /* idle connections closed to let a new one in */
	uint32_t tok_waiting;         /* connections parked for a tokenizer (api_tok_wait.c) */
	uint64_t tok_waits_served;    /* generations that waited for their model's tokenizer */
	uint64_t tok_waits_failed;    /* ... and were answered 503 (its deadline, no node asked) */
	struct headd_hist ttft, itl; /* seconds */
};

struct headd_api {
	struct sf_tls_ctx *tls;
	struct sf_tok_client *tok;
	struct sf_state_ops *ops; /* state operations on nodes (transcriptions) */
	struct sf_blob_cache *blobs; /* the files they read */
	uint8_t (*keys)[32];      /* SHA-256 of each bearer key */
	uint32_t n_keys;
	int http_fd;              /* the listening socket the process made for this shard */
	struct headd_http *conns;
	struct headd_req *reqs;
	struct headd_index reqs_by_session; /* each session's request, for its head events */
	uint32_t unindexed;       /* requests the index could not take (memory): found by a walk */
	struct headd_gather *gathers; /* answers waiting on the other shards' parts */
	struct headd_named *named;
	uint32_t n_named;
	struct headd_resp_items *items; /* resp_items.c: recent stored responses' output */
	uint32_t items_next;
	uint64_t tok_timer, tok_timer_at;
	uint64_t next_id;
	struct sf_http_budget body_budget; /* bytes of bodies being received (this shard's share) */
	struct sfd_log_rate refuse_log; /* refusals: one line a second */
	struct sf_chat_templates *templates; /* the templates this shard parsed, or NULL */
	struct sfd_jobs *tok_jobs;  /* tok_load.c: loads models' tokenizers off the loop */
	struct headd_tok_load *loads, *loads_tail, *load_out; /* waiting; on the thread */
	struct sfd_jobs *render_jobs; /* chat_jobs.c: renders chat templates off the loop */
	struct headd_render *renders, *renders_tail, *render_out; /* waiting; on the thread */
	uint32_t n_renders;         /* waiting and on the thread */
	uint64_t render_ticket;     /* the last handed out */
	uint8_t render_last[SF_WALREC_OWNER_LEN]; /* the key of the last render run */
	struct sf_chat_templates *render_templates; /* parsed by the render thread (only) */
	struct headd_metrics m;
};

/* A chat request's rendering as a job that runs on any thread (chat_jobs.c runs it off the
 * loop): what it needs copied or lent from the request, and what it made. */
struct headd_render {
	struct headd_render *next;
	uint64_t ticket;               /* its request's (headd_req.render_ticket) */
	uint8_t owner[SF_WALREC_OWNER_LEN]; /* its client's key: renders per key are bounded */
	struct sf_chat_templates *cache; /* the parsed templates of the thread that runs it */
	bool own;                      /* the model's template, not the request's */
	char *src;                     /* the template's text (a copy) */
	char *chat_json;               /* the request's conversation, lent: given back */
	char bos[256], eos[256];
	bool generation_prompt, later;
	bool has_tools;                /* tools the model may call: their calls parsed */
	int64_t now;
	size_t max_bytes;              /* the rendering's budget of bytes (steps: the default) */
	char *grammar;                 /* the request's structured output (a copy), or NULL: checked
					* to compile here, off the loop */
	const char *grammar_param;
	struct sf_api_error grammar_err;
	bool grammar_bad;
	/* A forced tool call's grammar (tool_choice required or named), made here too: the
	 * request's tool_choice and tools (names and parameters copied, its grammar lent) and the
	 * vocabulary's marker tokens (Mistral's); what it made, or its refusal. */
	struct sf_api_request tools;
	struct sf_gbnf_marks marks;
	char *tool_grammar;
	struct sf_api_error tool_err;
	bool tool_bad;
	/* what it made */
	int rc;
	bool parse_failed;
	int chat_format;               /* the reply's format and flags (chat_parse.h) */
	unsigned chat_flags;
	struct sf_err err;
	char *text, *close;            /* the prompt; what follows a reply (or NULL) */
	size_t len, close_len;
};

/* chat_render.c: q's conversation in its model's chat template (or the one it names or
 * gives), as text to encode with specials parsed; a named session's later turn: what it adds
 * after the session's reply. A job in three steps: the job from q (0, or -1 with e set: no
 * template, a name the model lacks, one too big), run (any thread: j->cache's), and its
 * outcome into q (its end-of-turn token, its reply's format; the text, or -1 with e set: 400
 * what the template refused, 413 a budget it went past). chat_jobs.c runs them off the loop.
 * The request's grammar is compiled in the run too (its refusal in j->grammar_bad and
 * j->grammar_err), and a forced tool call's grammar made from the render (its refusal taken as
 * the outcome's); a completion's job (src NULL) does only the first. */
int headd_chat_render_job(struct headd_req *q, struct headd_render *j, struct sf_api_error *e);
void headd_chat_render_run(struct headd_render *j);
int headd_chat_render_take(struct headd_req *q, struct headd_render *j, char **text, size_t *len,
			   struct sf_api_error *e);
void headd_render_free(struct headd_render *j); /* what it holds too; NULL is a no-op */

/* chat_jobs.c: chat requests rendered off the loop (and completions' large grammars checked),
 * on the shard's render thread (inline at the next turn on a simulated loop), in order but
 * for one rule: the next is the oldest of another key than the last one's, when there is one;
 * at most --max-renders-per-key of one key's and HEADD_RENDERS_MAX in all waiting or running.
 * Queues q's render: 0, or -1 with e set (429 the key's bound, 503 the shard's, or what the job
 * refused). */
#define HEADD_RENDERS_MAX 256
int headd_render_submit(struct headd_req *q, struct sf_api_error *e);
/* After each turn: each render that ended to its request (api_generate.c's
 * headd_gen_rendered), or dropped when its request went. */
void headd_renders_poll(struct headd *d);
/* Stops the thread (waiting for a render that runs) and drops what waits. */
void headd_renders_free(struct headd *d);
/* The end-of-turn token of the template src (the model's default when NULL is not wanted:
 * pass its text): the special its rendering writes first after an assistant's reply (ChatML's
 * <|im_end|>, Llama 3's <|eot_id|>, Mistral's </s>), or SF_TOKEN_NONE. */
uint32_t headd_chat_end_turn(struct headd *d, const struct sf_head_tokenizer *t, const char *src);
/* That of the template q renders with (a completion: the model's default). */
uint32_t headd_req_end_turn(struct headd_req *q);
/* Sets q's decoder to read the reply in the format headd_chat_render found (nothing for a
 * template with no tool-call or reasoning markup of a known family). 0, or -1 with e set. */
int headd_chat_out(struct headd_req *q, struct sf_api_error *e);

/* tok_load.c: a model's tokenizer file (the tokenizer client's io.load, arg the shard): copied
 * and loaded on the shard's job thread (inline on a simulated loop); 0, or -1 when it cannot
 * be. */
int headd_tok_load(void *arg, const char *model, const uint8_t *file, size_t len);
/* After each turn: what the thread loaded, to the tokenizer client (and the log). */
void headd_tok_loads_poll(struct headd *d);
/* Stops the thread (waiting for a load that runs) and drops what waits. */
void headd_tok_loads_free(struct headd *d);

/* api_tok_wait.c: a generation whose model's tokenizer is asked of a node but has not arrived
 * waits for it (at most HEADD_TOK_WAIT_MS, HEADD_TOK_WAITS_MAX of them on a shard), instead of
 * a 503 tokenizer_unavailable. Parks h's request r (answered nothing yet) to be started again
 * as headd_gen_start (count: headd_gen_count; resume_id, in r's path: headd_resume) of kind:
 * true; false when it cannot wait (no node is asked for the tokenizer, the head stops; past
 * the bound, e says so). */
#define HEADD_TOK_WAIT_MS 5000
#define HEADD_TOK_WAITS_MAX 256
bool headd_tok_wait_park(struct headd_http *h, const struct sf_http_request *r,
			 enum sf_api_kind kind, bool count, const char *resume_id, const char *model,
			 struct sf_api_error *e);
/* What a parked request is started again as: a generation (headd_tok_wait_park's), or one of
 * the endpoints that need only the model served (headd_model_wait). */
enum headd_wait_route {
	HEADD_WAIT_GEN = 0,
	HEADD_WAIT_TOKENIZE,   /* headd_tokenize_start */
	HEADD_WAIT_EMBED,      /* headd_embeddings_start */
	HEADD_WAIT_TRANSCRIBE, /* headd_transcribe_start */
	HEADD_WAIT_MODEL,      /* headd_models: GET /v1/models/{id} */
};
/* A request of route for model, which this shard does not serve yet while another shard does
 * (its own link to that node still in its handshake: headd_model_coming), waits for it as a
 * generation waits for its tokenizer (same bounds) and is started again from the beginning
 * once the model is served here or no longer coming: true when parked (nothing answered);
 * false when it cannot wait (e: a 503 past the bound, else as it was). */
bool headd_model_wait(struct headd_http *h, const struct sf_http_request *r,
		      enum headd_wait_route route, const char *model, struct sf_api_error *e);
/* After each turn: each parked request whose tokenizer came is started again, one past its
 * deadline or whose tokenizer is asked of no node any more answered 503 naming why. Returns
 * the next deadline (UINT64_MAX: none). */
uint64_t headd_tok_wait_tick(struct headd *d);
/* h's parked request let go of (its client went away); nothing when none. */
void headd_tok_wait_drop(struct headd_http *h);

/* http_server.c */
int headd_api_start(struct headd *d);   /* 0 or -1 (logged) */
void headd_api_stop(struct headd *d);   /* closes every client connection */
void headd_api_free(struct headd *d);
void headd_http_sweep(struct headd *d); /* frees closed connections and ended requests */
/* Writes plaintext to the client (through TLS when on). 0 or -1. */
int headd_http_write(struct headd_http *h, const void *p, size_t n);
/* Bytes written to the client and not yet sent. */
size_t headd_http_unsent(const struct headd_http *h);
/* The response to the connection's request has ended: close, or take the next one. */
void headd_http_response_done(struct headd_http *h);
void headd_http_service(struct headd_http *h); /* acts on ended (after each turn) */
/* Hands h, and its request r, to shard k (which answers it): its socket goes once what was
 * written is sent. */
void headd_http_handoff(struct headd_http *h, const struct sf_http_request *r, unsigned k);
/* Shard k's side: h goes on here with socket fd (and bytes that came with it). */
void headd_http_adopt(struct headd *d, struct headd_http *h, int fd, const uint8_t *rx,
		      size_t n);
void headd_http_drop(struct headd_http *h); /* frees one never adopted */

/* http_limits.c: the client connections' timeouts and the connection limit. */
/* Closes connections past their phase's time limit (each turn; at least once a second). */
void headd_http_timeouts(struct headd *d, uint64_t now);
/* A new connection while --http-max-conns are open: closes the longest idle one and returns
 * true (the new one may come in), or counts and logs (once a second) the refusal: false. */
bool headd_http_make_room(struct headd *d);
/* The phase h starts in (accepted, or handed over busy). */
void headd_http_phase_start(struct headd_http *h, int phase);

/* api_routes.c */
void headd_health_counts(struct headd *d, uint32_t *models, uint32_t *up);
void headd_health_page(struct headd_http *h, const struct headd_part *sum);
bool headd_model_served(struct headd *d, const char *model);
/* GET /v1/models (the models this shard's nodes serve) and /v1/models/{id} (which waits for a
 * model another shard serves while this shard's link is in its handshake: headd_model_wait). */
void headd_models(struct headd_http *h, const struct sf_http_request *r);
/* The longest context of a node up serving model (tokens); 0 when none says. */
uint32_t headd_model_ctx_len(struct headd *d, const char *model);
/* 0 when a node up serves model; else -1 with e: 503 (Retry-After) while a node that served
 * it is dialed again, 404 model_not_found when none did. */
int headd_model_check(struct headd *d, const char *model, struct sf_api_error *e);
/* Whether model, not served here, may be in a moment: a link of another shard served it and
 * this shard's link to a node open on another shard is being dialed or in its handshake (the
 * kernel spreads connections over shards: a request that lands here then waits, as for a
 * tokenizer, api_tok_wait.c, instead of a 404 for a model GET /v1/models may already list). */
bool headd_model_coming(struct headd *d, const char *model);
void headd_api_request(struct headd_http *h, const struct sf_http_request *r);
/* A request's head, before its body is read: answers a missing or wrong key (401) at once. */
void headd_api_head(struct headd_http *h, const struct sf_http_request *r);
/* Answers r's connection with an error object. */
void headd_api_send_error(struct headd_http *h, const struct sf_api_error *e);
void headd_api_send_json(struct headd_http *h, int status, char *json); /* frees json */
/* A whole answer (extra: header lines or NULL), the request ended. */
void headd_api_respond(struct headd_http *h, int status, const char *type, const char *body,
		       size_t len, const char *extra);

/* api_responses.c: POST /v1/responses (a chat request, wire SF_API_RESPONSES), GET and
 * DELETE /v1/responses/{id}. headd_responses_named: the request's id and its chain's named
 * session (store, previous_response_id); 0 or -1 with e. The answer: begin (the stream's
 * first events), deltas (each turn), end (a stream's last events and its end), whole. */
int headd_responses_named(struct headd_req *q, struct sf_api_error *e);
void headd_responses_begin(struct headd_req *q);
void headd_responses_deltas(struct headd_req *q);
void headd_responses_end(struct headd_req *q, const struct sf_api_error *fail);
void headd_responses_whole(struct headd_req *q, const struct sf_api_error *fail);
void headd_responses_free(struct headd_req *q);
void headd_responses_get(struct headd_http *h, const char *id, const struct sf_http_request *r);
void headd_responses_delete(struct headd_http *h, const char *id);
/* The named session of the conversation response id belongs to, for owner; NULL: none. */
struct headd_named *headd_responses_chain(struct headd *d, const char *id,
					  const uint8_t owner[static SF_WALREC_OWNER_LEN]);
/* Whether response id is the latest of its conversation s (the one its node holds). */
bool headd_responses_latest(struct headd *d, const struct headd_named *s, const char *id);

/* resp_fork.c: a stored conversation's turns. turn: a stored response that ended keeps its
 * turn (input and output items) in its conversation, and in the log; fork: a /v1/responses
 * body (root) whose previous_response_id names a kept response not its conversation's
 * latest gets that conversation's items up to it before its input (*forked true); 0, or -1
 * with e (too many items). */
void headd_responses_turn(struct headd_req *q, const json_t *obj);
int headd_responses_fork(struct headd_http *h, json_t *root, bool *forked,
			 struct sf_api_error *e);

/* resp_items.c: the last HEADD_ITEMS_KEPT stored responses of a shard (each object of at most
 * HEADD_ITEMS_MAX_BYTES), by key, for requests that name an output item (item_reference) and
 * for GET. put: a stored response's object; object: the kept one's JSON (NULL: not kept);
 * resolve: a /v1/responses body with its references replaced by the items and a fork's
 * conversation replayed (headd_responses_fork; *out NULL: nothing to change; 0, or -1 with
 * e: 404 an item not kept); shard: the shard a /v1/responses request goes to (its id's, its
 * previous response's, its first item's). */
#define HEADD_ITEMS_KEPT 256
#define HEADD_ITEMS_MAX_BYTES (1u << 20)
void headd_resp_items_put(struct headd *d, const char *resp_id,
			  const uint8_t owner[static SF_WALREC_OWNER_LEN], const json_t *resp);
const char *headd_resp_items_object(const struct headd *d, const char *resp_id,
				    const uint8_t owner[static SF_WALREC_OWNER_LEN]);
void headd_resp_items_free(struct headd *d);
unsigned headd_resp_items_shard(const struct headd *d, const char *item_id);
int headd_responses_resolve(struct headd_http *h, const uint8_t *body, size_t len, char **out,
			    size_t *out_len, bool *forked, struct sf_api_error *e);
unsigned headd_responses_shard(const struct headd *d, const struct sf_http_request *r);

/* api_embeddings.c: POST /v1/embeddings, run as the "embed" state operation (answer: its end,
 * from the state operation's done). */
void headd_embeddings_start(struct headd_http *h, const struct sf_http_request *r);
void headd_embeddings_answer(struct headd_req *q, int rc, const uint8_t *result, size_t len,
			     const char *msg);
void headd_embeddings_free(struct headd_req *q);
/* api_transcribe.c: q runs call (not a transcription: q->emb answers it) as a transcription
 * does, its ticket dropped when its client goes. 0, or a negative sf_code with err. */
int headd_state_op_run(struct headd_req *q, const struct sf_state_op_call *call,
		       struct sf_err *err);

/* api_messages.c: POST /v1/messages (a chat request, wire SF_API_MESSAGES) answered in
 * Anthropic's shapes, as api_responses.c's functions do. */
void headd_messages_begin(struct headd_req *q);
void headd_messages_deltas(struct headd_req *q);
void headd_messages_end(struct headd_req *q, const struct sf_api_error *fail);
void headd_messages_whole(struct headd_req *q, const struct sf_api_error *fail);
void headd_messages_free(struct headd_req *q);

/* api_cors.c: --cors-origin. The header lines every answer to r carries (NULL: none; in h).
 * A preflight (OPTIONS, CORS on) answered: true. */
const char *headd_cors_headers(struct headd_http *h, const struct sf_http_request *r);
bool headd_cors_preflight(struct headd_http *h, const struct sf_http_request *r);

/* api_generate.c */
void headd_gen_start(struct headd_http *h, enum sf_api_kind kind, const struct sf_http_request *r);
/* POST /v1/messages/count_tokens (kind SF_API_MESSAGES), /v1/responses/input_tokens
 * (SF_API_RESPONSES): the request's prompt rendered and encoded as for a generation, its size
 * answered; nothing generated, no conversation made or taken. */
void headd_gen_count(struct headd_http *h, enum sf_api_kind kind, const struct sf_http_request *r);
/* The head's events for sessions the API opened (returns false for other sessions). */
bool headd_gen_event(struct headd *d, const struct sf_head_event *ev);
/* q's render j ended (chat_jobs.c): its prompt encoded and generated, or its failure told (a
 * completion's job: its grammar refused, or its prompt encoded and generated). */
void headd_gen_rendered(struct headd_req *q, struct headd_render *j);
/* Before ev, which fails a generation (an error, a FINISH for an error or an expired lease),
 * goes to the log (headd_wal.c): a named session's turn it fails has its content put back
 * in the log first, so that the client hears of the failure only once the log has it. */
void headd_gen_failing(struct headd *d, const struct sf_head_event *ev);
void headd_gen_tokenized(void *arg, uint64_t ticket, int rc, const uint32_t *tokens,
			 uint32_t n, const char *msg);
void headd_gen_client_gone(struct headd_req *q); /* its connection closed */
void headd_gen_free(struct headd_req *q);
/* Whether session_id is a logged request's (its events go to the log). */
bool headd_gen_logged(struct headd *d, uint64_t session_id);
void headd_gen_vocab(struct sf_out_vocab *v, const struct sf_head_tokenizer *t);
/* q's output decoder (q->vocab, q->r's stops, ends, tools, echo; q->out_seed); -1 when memory
 * for the echoed prompt is short (the output then ends at once). */
int headd_out_init(struct headd_req *q);
/* 64 bits from libsodium's CSPRNG: request ids, the seeds of requests without one. */
uint64_t headd_gen_rand(struct headd *d);
/* Deep copies of logprobs into q; 0 or -1 (memory). */
int headd_gen_keep_logprobs(struct headd_req *q, const struct sf_logprob *v, uint32_t n);

/* api_resume.c: GET /v1/chat/completions/{id}, GET /v1/completions/{id}: a generation from
 * the log (after a head restart), whole or streamed from Last-Event-ID on. */
void headd_resume(struct headd_http *h, enum sf_api_kind kind, const char *id,
		  const struct sf_http_request *r);
/* q's render j ended (chat_jobs.c) while q follows a generation again: its reply's format
 * taken, the log asked again, the rest sent (or the error answered at the turn). */
void headd_resume_rendered(struct headd_req *q, struct headd_render *j);

/* api_tokenize.c: POST /v1/tokenize */
/* The error for a text of bytes the fleet did not encode (rc: the tokenizer client's code):
 * 413 for one too long ever to be, 400 for one that cannot be, else 503 (try again). */
void headd_encode_fail(struct sf_api_error *e, int rc, size_t bytes, const char *msg);
void headd_tokenize_start(struct headd_http *h, const struct sf_http_request *r);
void headd_tokenize_answer(struct headd_req *q, const uint32_t *tokens, uint32_t n);

/* api_fleet.c: GET /v1/fleet */
/* The page from the shards' parts (sum): h's shard's fleet nodes, then the pipeline's stages
 * (from shard 0's part). */
void headd_fleet_page(struct headd_http *h, const struct headd_part *sum);
/* Sessions running on each of d's nodes (out: d->fleet.n_nodes entries). */
void headd_fleet_sessions(struct headd *d, uint32_t *out);
/* d's pipeline stages as /v1/fleet lists them (a JSON array), or NULL when it has none. */
struct json_t *headd_fleet_stages(const struct headd *d);
/* d's fleet nodes, the pipeline's stages left out (every shard has the same). */
uint32_t headd_fleet_count(const struct headd *d);

/* api_transcribe.c: POST /v1/audio/transcriptions */
int headd_transcribe_init(struct headd *d);   /* 0 or -1 (logged) */
void headd_transcribe_fini(struct headd *d);
void headd_transcribe_start(struct headd_http *h, const struct sf_http_request *r);
void headd_transcribe_free(struct headd_req *q); /* its part of headd_gen_free */
void headd_transcribe_tick(struct headd *d);  /* drops requests whose client went away */

/* api_stream.c: what a request's output becomes on the wire */
void headd_stream_begin(struct headd_req *q); /* a streamed request's headers */
void headd_stream_flush(struct headd *d); /* once per loop turn: every request's new output */
/* q's turn of a named session failed: the log took its prompt as the session's content when
 * it began; back to what the session holds, so that a head restarted from the log does not
 * take the failed turn as said (seed 3154: the failed turn's prompt kept with an empty reply,
 * and the turn asked again put it there twice). Once per request; a no-op when unlogged. */
void headd_named_rollback(struct headd_req *q);
void headd_stream_finish(struct headd_req *q); /* the whole response or the stream's end */

/* api_sessions.c */
/* The session a key's requests call name (another key's of that name is not found). */
struct headd_named *headd_named_find(struct headd *d, const char *name,
				     const uint8_t owner[static SF_WALREC_OWNER_LEN]);
/* session_id 0: a new one is drawn (a restored session keeps its logged one). */
struct headd_named *headd_named_new(struct headd *d, const char *name, const char *model,
				    const uint8_t owner[static SF_WALREC_OWNER_LEN],
				    uint64_t session_id, struct sf_api_error *e);
void headd_named_end(struct headd *d, struct headd_named *s); /* closes it on its node */
void headd_named_free(struct headd_named *s); /* its memory only */
void headd_named_expire(struct headd *d);                     /* the idle ones */
int headd_named_set_content(struct headd_named *s, const uint32_t *t, uint32_t n);
void headd_sessions_get(struct headd_http *h, const char *name);
void headd_sessions_delete(struct headd_http *h, const char *name);

/* api_keys.c */
int headd_keys_load(struct headd *d, const char *path); /* 0 or -1 (logged) */
/* Whether the request may go on, setting h->owner to its key's tag; answers the 401 itself
 * when not. */
bool headd_keys_check(struct headd_http *h, const struct sf_http_request *r);
/* Whether two owner tags are the same, in constant time. */
bool headd_owner_is(const uint8_t a[static SF_WALREC_OWNER_LEN],
		    const uint8_t b[static SF_WALREC_OWNER_LEN]);

/* One shard's numbers, for /metrics and /v1/fleet (gather.c sums every shard's). */
struct headd_part {
	struct headd_metrics m;     /* m.link_opens: n_nodes entries, the part's own memory */
	uint32_t n_nodes;
	uint32_t *node_sessions;    /* sessions running on each node, n_nodes */
	uint32_t *node_links;       /* shards whose link to each node is open, n_nodes */
	struct sf_head_prefix_stats *node_prefix; /* each node's prefix reuse, n_nodes (in a
						   * sum: tokens summed, pages the most) */
	struct sf_head_stats st;
	struct sf_tok_cache_stats tc;
	bool has_ops, has_wal;
	struct sf_state_ops_stats so;
	struct sf_blob_cache_stats bc;
	struct sf_wal_stats ws;
	uint64_t wal_queued, wal_sessions, wal_restored, wal_resumed;
	uint64_t n_named;
	uint64_t requests;          /* answered by this shard, all endpoints */
	uint32_t models_min, up_min; /* models served, nodes up: in a sum, the least shard's */
	const uint64_t *by_shard;   /* in a sum: each shard's requests (n_shards), or NULL */
	struct json_t *stages;      /* /v1/fleet: the pipeline's stages (shard 0's), or NULL */
};

/* metrics.c */
void headd_metrics_request(struct headd *d, enum headd_endpoint ep, int status);
void headd_hist_add(struct headd_hist *hst, double v);
/* The page from the shards' numbers summed (sum), each node's state from h's shard. */
void headd_metrics_page(struct headd_http *h, const struct headd_part *sum);

/* fleet hooks for the tokenizer client (fleet_links.c calls these) */
void headd_api_node_up(struct headd *d, uint32_t node, const struct sf_link_peer *p);
void headd_api_node_down(struct headd *d, uint32_t node);
bool headd_api_node_msg(struct headd *d, uint32_t node, const struct sf_msg *m);
void headd_api_tick(struct headd *d); /* after each turn: tokenizer deadlines, flushes */
int headd_tok_send(void *arg, uint32_t node, uint16_t type, const void *msg);

#endif
