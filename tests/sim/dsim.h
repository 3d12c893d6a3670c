/* daemon-sim: the daemons' own code (superfluid-headd's and superfluid-noded's libraries, with
 * their real option parsers) on one simulated world (io/simnet.h): a head, nodes on the
 * simulated engine, HTTP clients streaming completions through the head, and faults drawn
 * from the seed (links reset, nodes and the head crashing and coming back, clients leaving).
 * Every stream that ends must be the engine's own text for its prompt (resumed from the
 * head's log across a head crash), every request must end, and once the faults stop the
 * head and the nodes must hold no session of a request that ended. Shared by the driver
 * (dsim_main.c), the daemons (dsim_fleet.c) and the clients (dsim_client.c). */
#ifndef SF_TESTS_DSIM_H
#define SF_TESTS_DSIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/sim_engine.h>

#include "io/loop.h"
#include "io/simnet.h"
#include "api/sse_reader.h"

#define DSIM_MAX_NODES 6 /* 3 in the fleet, 2 pipeline stages */
#define DSIM_MAX_CLIENTS 12
#define DSIM_MAX_TEXT 4096
#define DSIM_MAX_CTX 2048   /* a conversation's tokens */
#define DSIM_MAX_TURNS 4
#define DSIM_MAX_BODY 16384 /* a request's body: a resend conversation's every turn */
#define DSIM_FAULT_MS 6000  /* faults and new requests for this long */
#define DSIM_END_MS 60000   /* then every request must have ended by this time */

struct dsim;

/* One daemon: its options (argv through the program's own parser), its loop, its state. */
struct dsim_head;
struct dsim_node;

enum dsim_req_state {
	DR_IDLE = 0,   /* not asked yet */
	DR_DIAL,       /* dialing the head */
	DR_SENT,       /* asked; reading the answer */
	DR_WAIT,       /* the answer broke off: asking again after a pause */
	DR_DONE,       /* the stream ended with [DONE] */
	DR_FAILED,     /* an error answer the run allows (said why) */
	DR_LEFT,       /* the client left on purpose mid-stream */
};

/* One client request: a streamed /v1/completions or /v1/chat/completions, resumed (GET
 * .../{id}) after a break; or a conversation: a named session (X-Superfluid-Session) of
 * several such turns, each sending only its new prompt or message, then DELETE
 * /v1/sessions/{name}. */
struct dsim_req {
	struct dsim *s;
	uint32_t index;
	enum dsim_req_state st;
	uint64_t start_at, retry_at;
	char prompt[128];
	uint32_t max_tokens;
	bool conv;              /* a conversation (only where the head keeps a log: a head
				 * without one forgets it in a crash) */
	bool chat;              /* /v1/chat/completions: one user message a turn, rendered by
				 * the sim model's ChatML */
	bool pipe;              /* asks the pipeline's model (sim-1-pipeline): its generation is
				 * not logged, so a head crash may lose it (asked whole again) */
	bool resend;            /* a conversation sent whole each turn, in no session (as an
				 * ordinary OpenAI client sends one): the head places it by the
				 * prefix its nodes cache (protocol 6) */
	struct json_t *hist;    /* a resend conversation's messages so far (jansson) */
	char name[48];
	uint32_t turn, n_turns;
	bool deleting;          /* the last turn is done: the session is being deleted */
	uint32_t ctx[DSIM_MAX_CTX]; /* the session's content as the node holds it */
	uint32_t n_ctx;
	uint32_t want_tok[DSIM_MAX_TEXT]; /* this turn's tokens, the final <|eos|> left out */
	size_t n_want_tok;
	uint64_t seed;
	float temperature;
	bool logprobs;          /* asks for logprobs (2 alternatives): one entry per token, its
				 * text the token's, resumed with the stream */
	char lp_text[DSIM_MAX_TEXT]; /* the logprobs' tokens' texts, joined */
	size_t n_lp_text;
	uint32_t n_lp;          /* logprob entries */
	bool leave;             /* leaves once it has leave_after bytes of text */
	uint32_t leave_after;
	/* the expected text (the engine's own, sf_sim_expected) */
	char want[DSIM_MAX_TEXT];
	size_t n_want;
	const char *want_finish;
	/* what came */
	char got[DSIM_MAX_TEXT];
	size_t n_got;
	char id[96];            /* X-Request-Id / the events' id */
	uint32_t last_event;    /* the last `id: N` seen (tokens covered) */
	uint32_t events;        /* events of the answer being read */
	char finish[32];
	uint32_t attempts, resumes, breaks;
	uint64_t last_rx;       /* when the answer last brought bytes (or was asked) */
	bool cut_by_reset;      /* its connection was reset (a fault) since it was asked */
	bool cut_by_head;       /* the head crashed while it was asked */
	uint64_t content_left;  /* a Content-Length answer's bytes still to come */
	char failed[256];
	/* the connection and its answer being read */
	struct sf_conn *conn;
	char hdr[8192];
	size_t n_hdr;
	bool in_body, chunked;
	int status;
	uint64_t chunk_left;    /* bytes left of the chunk being read */
	int chunk_state;        /* 0: size line, 1: data, 2: CRLF after data */
	char line[64];
	size_t n_line;
	struct sf_sse_reader sse;
	char *err_body;         /* a non-200 answer's body */
	size_t n_err_body;
};

enum dsim_gather_state { DG_IDLE = 0, DG_SENT, DG_WAIT, DG_DONE };

/* One GET of /health, /metrics or /v1/fleet (dsim_gather.c): asked at `at`, again after a
 * break a fault explains, answered whole or the run is broken. */
struct dsim_gather {
	struct dsim *s;
	uint32_t index;
	const char *path;
	enum dsim_gather_state st;
	uint64_t at, asked_at;
	uint32_t tries, crashes_at_ask;
	bool reset;             /* a fault reset its connection since it was asked */
	bool head_down;         /* the head was down when it was asked */
	struct sf_conn *conn;
	char *buf;              /* the answer so far */
	size_t n_buf;
};

#define DSIM_MAX_GATHERS 6

/* A scripted scenario (dsim_scenario.c): faults struck when the daemons reach a state the
 * random ones reach too seldom. */
enum dsim_scenario_kind {
	DS_NONE = 0,
	/* One node, one stream: the node crashes mid-stream and comes back at once; the head
	 * places the session there again (a new epoch) and asks the rest; the head crashes once
	 * that placement is durable but no event of the new run is. The restored head must take
	 * the node's run at the new epoch as the generation's: the stream ends whole. */
	DS_NEW_PLACEMENT,
	/* One unnamed stream: the head writes the whole answer, the client has not read its
	 * end when the head dies and its connection resets (the bytes on their way lost). The
	 * restarted head must still hold the generation for the client to fetch (seed 3735:
	 * the session's CLOSE, logged as the answer was written, made it a 404). */
	DS_ANSWER_CRASH,
	/* One chat stream: its connection resets and the head dies once the client has the
	 * role chunk and no token's text. The rest, asked after the last event id seen, must
	 * be the whole reply (seed 13895: the role chunk carried id 1 and the resume began
	 * after the first token). */
	DS_ROLE_CUT,
	/* A conversation: its second turn fails (its only node down past --replace-after-ms),
	 * then the head dies and comes back, and the client asks the turn again. The restored
	 * session must not hold the failed turn's prompt (seed 3154: it did, and the turn
	 * asked again was rendered after it twice). */
	DS_FAILED_TURN,
	/* One unnamed stream: its connection resets mid-stream (the head, alive, cancels the
	 * generation: its client went); the client asks for the rest after what it saw. It
	 * must get it whole or a 404 and ask again, never the cancelled run's end as the
	 * answer (seed 87: with the log's CLOSE deferred, the resume replayed the cancelled
	 * generation: 69 of its 76 bytes and a finish). */
	DS_CUT_RESUME,
};

struct dsim_scenario {
	enum dsim_scenario_kind kind;
	int state;                     /* DSIM_SCEN_BACK: the head comes back at back_at;
					* DSIM_SCEN_DONE: nothing more to strike */
	uint64_t epoch0, back_at, at;
	uint32_t breaks0;
	bool hit;                      /* the head crashed in the state the scenario wants */
};

#define DSIM_SCEN_BACK 2
#define DSIM_SCEN_DONE 3

/* What the head's shard 0 logged of its first session, and what its machine holds. */
struct dsim_wal_view {
	bool any;
	uint64_t sid, gid, epoch, run_epoch; /* durable: the placement's, the generation run's */
	uint32_t tokens;                     /* durable tokens of the generation */
	uint32_t head_tokens;                /* the tokens the head machine has of it */
};

struct dsim {
	uint64_t seed;
	struct dsim_scenario scen;
	bool verbose;
	char dir[256];                 /* this seed's files (the head's log, blobs) */
	struct sf_simnet *world;
	struct dsim_head *head;
	struct dsim_node *nodes[DSIM_MAX_NODES];
	uint32_t n_nodes;              /* the fleet's (--fleet): nodes[0..n_nodes) */
	uint32_t n_stages;             /* the pipeline's (--pipeline): nodes[n_nodes..+n_stages) */
	struct sf_loop *clients;       /* the clients' machine */
	struct dsim_req reqs[DSIM_MAX_CLIENTS];
	uint32_t n_reqs;
	struct dsim_gather gathers[DSIM_MAX_GATHERS];
	uint32_t n_gathers, gathers_done;
	struct sf_sim_config engine;   /* what every node runs (the defaults and --sim-seed) */
	bool wal;                      /* the head runs with --wal-dir */
	uint32_t head_shards;          /* 1..3 */
	uint32_t node_shards[DSIM_MAX_NODES]; /* 1..3 each: shards 1 and 2 relay to 0's engine */
	uint8_t token[32];             /* the fleet's token: sealed links (Noise), or plain */
	size_t token_len;
	char broke[512];               /* the first broken promise, "" while none */
	/* what happened, for the trace */
	uint32_t head_crashes, node_crashes, resets, leaves;
	uint32_t conv_turns;   /* turns of conversations done, each checked */
	uint32_t resend_turns; /* of those, sent whole in no session (placed by prefix) */
	uint32_t pipe_done;    /* pipeline requests whole, each checked */
	uint64_t gaps; /* events a node sent past the one the head expected, every head's */
	uint64_t turns;
};

/* dsim_main.c: splitmix64, the one generator of the run's side streams (libsodium's bytes,
 * node shards, chats, gathers), each from a state of its own derived from the seed. */
uint64_t dsim_splitmix(uint64_t *state);

/* dsim_fleet.c: the daemons. 0, or -1 with s->broke said. */
int dsim_head_start(struct dsim *s);
int dsim_node_start(struct dsim *s, uint32_t k);
/* One turn of each live daemon; true when any has work due at once. */
bool dsim_daemons_turn(struct dsim *s);
/* The earliest timer of any live daemon's loop. */
uint64_t dsim_daemons_next_timer(const struct dsim *s);
/* A crash: the world drops its process, its state is freed without a goodbye. */
void dsim_head_crash(struct dsim *s);
void dsim_node_crash(struct dsim *s, uint32_t k);
bool dsim_head_up(const struct dsim *s);
bool dsim_node_up(const struct dsim *s, uint32_t k);
/* Sessions the head holds, and those node k holds; pipeline contexts node k keeps. */
uint32_t dsim_head_sessions(const struct dsim *s);
uint32_t dsim_node_pipes(const struct dsim *s, uint32_t k);
/* Gaps the head has seen in a node's events (s->gaps and the running head's). */
uint64_t dsim_head_gaps(const struct dsim *s);
uint32_t dsim_node_sessions(const struct dsim *s, uint32_t k);
void dsim_daemons_free(struct dsim *s);
bool dsim_head_wal_view(const struct dsim *s, struct dsim_wal_view *v);
/* Whether any head shard still has a client request it has not answered whole. */
bool dsim_head_answering(const struct dsim *s);
/* The head's HTTP address and node k's fleet address. */
void dsim_head_addr(struct sockaddr_storage *ss, socklen_t *len);

/* dsim_scenario.c */
int dsim_scenario_parse(const char *name, enum dsim_scenario_kind *out);
/* Sets the fleet's shape and the workload's for the scenario (after the random draws). */
void dsim_scenario_shape(struct dsim *s);
/* Shapes the scenario's one request (after the random draws). */
void dsim_scenario_request(struct dsim *s);
/* After each turn of the daemons: strikes what the scenario's state calls for. */
void dsim_scenario_step(struct dsim *s);
/* When the scenario next needs a look (UINT64_MAX: not before something else happens). */
uint64_t dsim_scenario_next(const struct dsim *s);

/* dsim_client.c: the clients' requests. */
void dsim_req_init(struct dsim *s, struct dsim_req *r, uint32_t index);
/* r again as a plain stream: greedy, max_tokens, asked at start_at, none of the extras; a
 * chat when chat, a conversation of n_turns turns when n_turns > 0. */
void dsim_req_plain(struct dsim_req *r, uint32_t max_tokens, uint64_t start_at, bool chat,
		    uint32_t n_turns);
/* Starts, retries and checks r at now; true when it did something. */
bool dsim_req_poll(struct dsim_req *r, uint64_t now);
/* The client leaves r's stream now (closes its connection). */
void dsim_req_leave(struct dsim_req *r);
bool dsim_req_ended(const struct dsim_req *r);
/* When r gives up waiting on a silent answer (UINT64_MAX: not waiting). */
uint64_t dsim_req_deadline(const struct dsim_req *r);
/* Whether r's connection is fd (the faults tell it whose connection they reset). */
bool dsim_req_owns(const struct dsim_req *r, int fd);
void dsim_req_free(struct dsim_req *r);

/* dsim_gather.c: the gathers' schedule (from the seed), their turns and checks. */
void dsim_gathers_init(struct dsim *s);
/* Asks, asks again or gives up on g at now; true when it did something. */
bool dsim_gather_poll(struct dsim_gather *g, uint64_t now);
/* When g next needs a look (UINT64_MAX: it is done). */
uint64_t dsim_gather_due(const struct dsim_gather *g);
bool dsim_gather_owns(const struct dsim_gather *g, int fd);
void dsim_gather_free(struct dsim_gather *g);
/* Notes a broken promise (the first one is kept). */
void dsim_broke(struct dsim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
