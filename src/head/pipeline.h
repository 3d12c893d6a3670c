/* A model split over stage nodes (the design brief's point 13). Layers go in even ranges,
 * stage i ending at boundary (i+1)*L/S; each stage hands its hidden state to the next, and the
 * last draws the next token with the generation's sampling. When every stage speaks protocol
 * 5 the stages keep each generation's context (its pipe): a step is the positions since the
 * last (the prompt SF_PIPE_CHUNK at a time), and a stage that holds less than the head
 * believes (restarted, its link new, its context let go of) says what it holds and the step
 * starts again from there. Older stages keep nothing: stage 0 takes the whole context each
 * step, and the last stage draws greedily (a generation with other sampling is refused). A
 * step lost with a link is asked again of that stage when its link is back, and each token
 * reaches the caller once, in order; a step unanswered past the timeout fails its
 * generation. Many generations step at once. No I/O: the caller runs the stages' links and
 * feeds their answers in. */
#ifndef SF_HEAD_PIPELINE_H
#define SF_HEAD_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include <superfluid/err.h>
#include <superfluid/link.h>
#include <superfluid/wire.h>

#define SF_PIPE_MAX_STAGES 16
#define SF_PIPE_MAX_STOP 8
#define SF_PIPE_CHUNK 128 /* prompt positions a step of kept stages runs at most */

struct sf_pipe_config {
	uint32_t n_stages;        /* 1..SF_PIPE_MAX_STAGES */
	uint32_t max_gens;        /* generations at once; 0: 1024 */
	uint32_t step_timeout_ms; /* a step's answer, waiting for a link included; 0: 10000 */
};

struct sf_pipe_io {
	void *arg;
	/* Sends to stage k on its current link (STAGE_FORWARD_REQ, STAGE_RELEASE); 0 or a
	 * negative sf_code. */
	int (*send)(void *arg, uint32_t stage, uint16_t type, const void *msg);
	/* The next token of generation gen, with its log-probabilities when the generation asked
	 * for them (else lp is NULL; valid during the call). */
	void (*token)(void *arg, uint64_t gen, uint32_t token, const struct sf_logprob *lp);
	/* Generation gen ended: rc 0 with SF_FINISH_STOP or SF_FINISH_LENGTH, or rc < 0 with a
	 * sentence naming the stage. Once per generation; never for a cancelled one. */
	void (*done)(void *arg, uint64_t gen, int rc, uint32_t reason, const char *msg);
};

struct sf_pipe;

int sf_pipe_new(struct sf_pipe **out, const struct sf_pipe_config *cfg, const struct sf_pipe_io *io,
		struct sf_err *err);
void sf_pipe_free(struct sf_pipe *p);

/* Stage k's link opened, with what its handshake said: its first model and layer count must
 * agree with the other stages' (else the stage is not used, and err says why; returns
 * negative). Steps waiting for it go out. */
int sf_pipe_stage_up(struct sf_pipe *p, uint32_t k, const struct sf_link_peer *peer,
		     uint64_t now_ms, struct sf_err *err);
/* Stage k's link closed: its steps in flight wait for the next link. */
void sf_pipe_stage_down(struct sf_pipe *p, uint32_t k, uint64_t now_ms);

/* The model the pipeline runs once every stage has been up and agreed; NULL before. */
const char *sf_pipe_model(const struct sf_pipe *p);
/* The layer count of that model, and stage k's range [*start, *end). */
uint32_t sf_pipe_layers(const struct sf_pipe *p);
void sf_pipe_range(const struct sf_pipe *p, uint32_t k, uint32_t *start, uint32_t *end);
/* Whether every stage's link is up now. */
bool sf_pipe_ready(const struct sf_pipe *p);

/* What a generation asks for besides its context. */
struct sf_pipe_gen_opts {
	uint32_t max_new;                 /* tokens to make at most, >= 1 */
	const struct sf_sampling *sampling; /* copied; NULL or all zero: greedy */
	const uint32_t *stop;             /* tokens that end it (not passed on) */
	uint32_t n_stop;                  /* at most SF_PIPE_MAX_STOP */
	bool logprobs;                    /* each token's log-probability ... */
	uint32_t top_logprobs;            /* ... and this many alternatives (<= 20) */
};

/* A generation after ctx (n tokens, copied) as o asks. 0 with *gen, or SF_E_STATE (no model
 * yet), SF_E_LIMIT (too many at once, or the context too long), SF_E_UNSUPPORTED (other than
 * greedy sampling, or logprobs, and a stage speaks a protocol before 5). */
int sf_pipe_generate(struct sf_pipe *p, const uint32_t *ctx, uint32_t n,
		     const struct sf_pipe_gen_opts *o, uint64_t now_ms, uint64_t *gen,
		     struct sf_err *err);
/* Stops gen; its answers in flight are dropped when they come. */
void sf_pipe_cancel(struct sf_pipe *p, uint64_t gen);

/* A STAGE_FORWARD_RESP from stage k: true when it was the pipeline's (also a stale one). */
bool sf_pipe_on_msg(struct sf_pipe *p, uint32_t k, const struct sf_msg *m, uint64_t now_ms);
/* Fails steps past their timeout. */
void sf_pipe_tick(struct sf_pipe *p, uint64_t now_ms);
/* When the next step times out; UINT64_MAX when none waits. */
uint64_t sf_pipe_deadline(const struct sf_pipe *p);
/* Generations running now. */
uint32_t sf_pipe_running(const struct sf_pipe *p);

#ifdef SF_PLANTED_BUGS
/* A bug planted on purpose so that the simulator can show it catches one (tests/sim, never
 * set elsewhere; only in the simulator's build, superfluid_core_planted): TWICE passes on
 * twice the token of a step that was asked again after its stage's link went down with it
 * in flight (the lost answer and the new one both applied). */
enum { SF_PIPE_BUG_NONE = 0, SF_PIPE_BUG_TWICE = 1 };
extern int sf_pipe_planted_bug;
#endif

#endif
