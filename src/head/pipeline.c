#include "head/pipeline.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ids carry their slot in the low 16 bits, so an answer finds its generation at once. */
#define SLOT_BITS 16
#define SLOT_MASK ((1u << SLOT_BITS) - 1)

struct pipe_gen {
	uint64_t id;          /* 0: the slot is free */
	uint32_t *ctx;        /* prompt, then each new token */
	uint32_t n_ctx, cap_ctx;
	uint32_t left;        /* tokens still to make */
	uint32_t stop[SF_PIPE_MAX_STOP], n_stop;
	uint32_t stage;       /* the stage the current step is at */
	uint8_t *hidden;      /* that stage's input, from the one before */
	uint32_t hidden_len;
	uint64_t req;         /* the request in flight; 0: waiting for the stage's link */
	uint64_t since;       /* when this stage's step was first asked */
	struct sf_sampling sampling; /* its logit_bias pairs its own */
	uint32_t made;        /* tokens drawn so far */
	bool kept;            /* this step runs on stages that keep the pipe (protocol 5) */
	bool logprobs;        /* each token's log-probabilities, top_logprobs alternatives */
	uint32_t top_logprobs;
	bool pipes;           /* some stage was asked to keep it: released at the end */
	uint32_t from, to;    /* a kept step: positions [from, to); every stage holds from */
#ifdef SF_PLANTED_BUGS
	bool asked_again;     /* a request of this step went down with a link (the planted bug) */
#endif
};

struct pipe_stage {
	bool up, agreed;
	uint32_t version; /* its link's, the last time it was up */
	char identity[SF_MAX_NAME + 1];
	uint32_t start, end;
};

#ifdef SF_PLANTED_BUGS
int sf_pipe_planted_bug = SF_PIPE_BUG_NONE;
#endif

struct sf_pipe {
	struct sf_pipe_config cfg;
	struct sf_pipe_io io;
	struct pipe_stage stages[SF_PIPE_MAX_STAGES];
	char model[SF_MAX_NAME + 1]; /* "" until the first stage agreed */
	uint32_t n_layers;
	struct pipe_gen *gens;
	uint32_t n_running;
	uint64_t seq;
};

int sf_pipe_new(struct sf_pipe **out, const struct sf_pipe_config *cfg, const struct sf_pipe_io *io,
		struct sf_err *err)
{
	*out = NULL;
	if (!cfg->n_stages || cfg->n_stages > SF_PIPE_MAX_STAGES)
		return sf_err_set(err, SF_E_RANGE, "a pipeline takes 1 to %u stages, not %u",
				  SF_PIPE_MAX_STAGES, cfg->n_stages);
	struct sf_pipe *p = calloc(1, sizeof(*p));
	if (!p)
		return sf_err_set(err, SF_E_NOMEM, "no memory for the pipeline");
	p->cfg = *cfg;
	p->cfg.max_gens = cfg->max_gens ? cfg->max_gens : 1024;
	if (p->cfg.max_gens > SLOT_MASK)
		p->cfg.max_gens = SLOT_MASK;
	p->cfg.step_timeout_ms = cfg->step_timeout_ms ? cfg->step_timeout_ms : 10000;
	p->io = *io;
	p->gens = calloc(p->cfg.max_gens, sizeof(*p->gens));
	if (!p->gens) {
		free(p);
		return sf_err_set(err, SF_E_NOMEM, "no memory for the pipeline's generations");
	}
	*out = p;
	return 0;
}

/* Ends g: the stages that kept its pipe let go of it (those whose link is down did when it
 * went). */
static void gen_free(struct sf_pipe *p, struct pipe_gen *g)
{
	for (uint32_t k = 0; g->pipes && k < p->cfg.n_stages; k++) {
		struct sf_stage_release m = { .pipe_id = g->id };
		if (p->stages[k].up && p->stages[k].version >= 5)
			(void)p->io.send(p->io.arg, k, SF_MSG_STAGE_RELEASE, &m);
	}
	free(g->ctx);
	free(g->hidden);
	free(g->sampling.logit_bias);
	*g = (struct pipe_gen){ 0 };
	p->n_running--;
}

void sf_pipe_free(struct sf_pipe *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; i < p->cfg.max_gens; i++)
		if (p->gens[i].id) {
			p->gens[i].pipes = false; /* the links go too: nothing is sent now */
			gen_free(p, &p->gens[i]);
		}
	free(p->gens);
	free(p);
}

const char *sf_pipe_model(const struct sf_pipe *p) { return p->n_layers ? p->model : NULL; }
uint32_t sf_pipe_layers(const struct sf_pipe *p) { return p->n_layers; }
uint32_t sf_pipe_running(const struct sf_pipe *p) { return p->n_running; }

void sf_pipe_range(const struct sf_pipe *p, uint32_t k, uint32_t *start, uint32_t *end)
{
	uint32_t s = p->cfg.n_stages;
	*start = k ? (uint32_t)((uint64_t)k * p->n_layers / s) : 0;
	*end = (uint32_t)((uint64_t)(k + 1) * p->n_layers / s);
}

bool sf_pipe_ready(const struct sf_pipe *p)
{
	for (uint32_t k = 0; k < p->cfg.n_stages; k++)
		if (!p->stages[k].up || !p->stages[k].agreed)
			return false;
	return p->n_layers > 0;
}

static void fail(struct sf_pipe *p, struct pipe_gen *g, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void fail(struct sf_pipe *p, struct pipe_gen *g, int rc, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	uint64_t id = g->id;
	gen_free(p, g);
	p->io.done(p->io.arg, id, rc, SF_FINISH_ERROR, msg);
}

static bool all_kept(const struct sf_pipe *p)
{
	for (uint32_t k = 0; k < p->cfg.n_stages; k++)
		if (p->stages[k].version < 5)
			return false;
	return true;
}

/* Whether s draws what a stage without sampling draws: the most likely token. */
static bool greedy(const struct sf_sampling *s)
{
	return s->temperature == 0 && s->presence_penalty == 0 && s->frequency_penalty == 0 &&
	       (s->repetition_penalty == 0 || s->repetition_penalty == 1) && !s->n_logit_bias;
}

/* Whether g asks only what a stage before protocol 5 gives: a greedy token, no logprobs. */
static bool plain(const struct pipe_gen *g)
{
	return greedy(&g->sampling) && !g->logprobs && !g->top_logprobs;
}

/* Asks the current stage for its step, when its link is up. A step begins at stage 0: on
 * stages that all keep pipes, over the positions past what they hold (the prompt a chunk at
 * a time); else over the whole context, greedily. */
static void send_step(struct sf_pipe *p, struct pipe_gen *g, uint64_t now)
{
	struct pipe_stage *st = &p->stages[g->stage];
	g->req = 0;
	if (g->stage == 0) {
		g->kept = all_kept(p);
		if (!g->kept)
			g->from = 0;
		g->to = g->from + (g->n_ctx - g->from < SF_PIPE_CHUNK ? g->n_ctx - g->from
								   : SF_PIPE_CHUNK);
	}
	if (!st->up || !st->agreed)
		return; /* sent when it comes back, or failed at the timeout */
	if (g->kept && st->version < 5) { /* it came back older: the step again, as older ones run */
		g->stage = 0;
		send_step(p, g, now);
		return;
	}
	if (!g->kept && !plain(g)) {
		uint32_t k = 0;
		while (k + 1 < p->cfg.n_stages && p->stages[k].version >= 5)
			k++;
		fail(p, g, SF_E_UNSUPPORTED, "pipeline stage %u (%s) runs an older superfluid "
		     "(protocol %u) that draws greedily only, without logprobs; update it", k + 1,
		     p->stages[k].identity, p->stages[k].version);
		return;
	}
	uint64_t req = (++p->seq << SLOT_BITS) | (uint64_t)(g - p->gens);
	struct sf_stage_forward_req m = {
		.request_id = req, .start_layer = st->start, .end_layer = st->end,
	};
	if (g->kept) {
		m.pipe_id = g->id;
		m.from = g->from;
		m.tokens = g->ctx + g->from;
		m.n_tokens = g->to - g->from;
		if (g->stage + 1 == p->cfg.n_stages) {
			m.sampling = g->sampling;
			m.generated = g->made;
			m.logprobs = g->logprobs;
			m.top_logprobs = (uint8_t)g->top_logprobs;
		}
		g->pipes = true;
	} else if (g->stage == 0) {
		m.tokens = g->ctx;
		m.n_tokens = g->n_ctx;
	}
	if (g->stage > 0) {
		m.has_hidden = true;
		m.hidden = g->hidden;
		m.hidden_len = g->hidden_len;
	}
	if (!p->io.send(p->io.arg, g->stage, SF_MSG_STAGE_FORWARD_REQ, &m))
		g->req = req;
	(void)now; /* a failed send waits for the link's next opening, like a lost one */
}

int sf_pipe_stage_up(struct sf_pipe *p, uint32_t k, const struct sf_link_peer *peer,
		     uint64_t now_ms, struct sf_err *err)
{
	if (k >= p->cfg.n_stages)
		return sf_err_set(err, SF_E_RANGE, "no stage %u", k);
	struct pipe_stage *st = &p->stages[k];
	snprintf(st->identity, sizeof(st->identity), "%s",
		 peer->identity && *peer->identity ? peer->identity : "(unnamed)");
	st->up = true;
	st->version = peer->version;
	st->agreed = false;
	if (!peer->n_models || !peer->models[0].name)
		return sf_err_set(err, SF_E_RANGE, "stage %u (%s) serves no model", k + 1,
				  st->identity);
	const struct sf_model_info *mi = &peer->models[0];
	char name[SF_MAX_NAME + 1];
	snprintf(name, sizeof(name), "%.*s", (int)mi->name_len, mi->name);
	if (p->n_layers && (strcmp(name, p->model) || mi->n_layers != p->n_layers))
		return sf_err_set(err, SF_E_RANGE, "stage %u (%s) serves %s with %u layers, the "
				  "pipeline's other stages %s with %u: every stage must run the same "
				  "model", k + 1, st->identity, name, mi->n_layers, p->model,
				  p->n_layers);
	if (!p->n_layers) {
		if (mi->n_layers < p->cfg.n_stages)
			return sf_err_set(err, SF_E_RANGE, "%s has %u layers, fewer than the "
					  "pipeline's %u stages", name, mi->n_layers,
					  p->cfg.n_stages);
		snprintf(p->model, sizeof(p->model), "%s", name);
		p->n_layers = mi->n_layers;
		for (uint32_t i = 0; i < p->cfg.n_stages; i++)
			sf_pipe_range(p, i, &p->stages[i].start, &p->stages[i].end);
	}
	st->agreed = true;
	for (uint32_t i = 0; i < p->cfg.max_gens; i++) {
		struct pipe_gen *g = &p->gens[i];
		if (g->id && g->stage == k && !g->req)
			send_step(p, g, now_ms);
	}
	return 0;
}

void sf_pipe_stage_down(struct sf_pipe *p, uint32_t k, uint64_t now_ms)
{
	if (k >= p->cfg.n_stages)
		return;
	p->stages[k].up = false;
	for (uint32_t i = 0; i < p->cfg.max_gens; i++)
		if (p->gens[i].id && p->gens[i].stage == k) {
#ifdef SF_PLANTED_BUGS
			p->gens[i].asked_again |= p->gens[i].req != 0;
#endif
			p->gens[i].req = 0; /* its answer went with the link: asked again */
		}
	(void)now_ms;
}

int sf_pipe_generate(struct sf_pipe *p, const uint32_t *ctx, uint32_t n,
		     const struct sf_pipe_gen_opts *o, uint64_t now_ms, uint64_t *gen,
		     struct sf_err *err)
{
	static const struct sf_sampling none = { 0 };
	const struct sf_sampling *s = o->sampling ? o->sampling : &none;
	uint32_t max_new = o->max_new, n_stop = o->n_stop;
	const uint32_t *stop = o->stop;
	bool asks = !greedy(s) || o->logprobs || o->top_logprobs;
	if (!p->n_layers)
		return sf_err_set(err, SF_E_STATE, "the pipeline's stages have not all been up yet");
	if (s->n_logit_bias > SF_MAX_LOGIT_BIAS)
		return sf_err_set(err, SF_E_RANGE, "%u logit_bias pairs, over %u", s->n_logit_bias,
				  SF_MAX_LOGIT_BIAS);
	if (o->top_logprobs > SF_MAX_TOP_LOGPROBS)
		return sf_err_set(err, SF_E_RANGE, "%u top logprobs, over %u", o->top_logprobs,
				  SF_MAX_TOP_LOGPROBS);
	for (uint32_t k = 0; asks && k < p->cfg.n_stages; k++)
		if (p->stages[k].version < 5)
			return sf_err_set(err, SF_E_UNSUPPORTED, "pipeline stage %u (%s) runs an "
					  "older superfluid (protocol %u) that draws greedily only, "
					  "without logprobs; update it", k + 1, p->stages[k].identity[0]
					  ? p->stages[k].identity : "never up", p->stages[k].version);
	for (uint32_t k = 0; (s->ignore_eos || s->min_tokens) && k < p->cfg.n_stages; k++)
		if (p->stages[k].version < 6)
			return sf_err_set(err, SF_E_UNSUPPORTED, "pipeline stage %u (%s) runs an "
					  "older superfluid (protocol %u) that cannot take "
					  "ignore_eos or min_tokens (protocol 6); update it", k + 1,
					  p->stages[k].identity[0] ? p->stages[k].identity
					  : "never up", p->stages[k].version);
	if (s->grammar_len)
		return sf_err_set(err, SF_E_UNSUPPORTED, "a pipeline draws without a grammar "
				  "(response_format, a forced tool call): serve the model on one node "
				  "for structured output");
	if (!n || !max_new)
		return sf_err_set(err, SF_E_RANGE, "a pipeline generation needs a context and a "
				  "budget");
	if ((uint64_t)n + max_new > SF_MAX_TOKENS)
		return sf_err_set(err, SF_E_LIMIT, "%u context tokens and %u new ones pass the %u "
				  "a stage request carries", n, max_new, SF_MAX_TOKENS);
	if (p->n_running == p->cfg.max_gens)
		return sf_err_set(err, SF_E_LIMIT, "the pipeline runs %u generations already, its "
				  "limit", p->cfg.max_gens);
	uint32_t slot = 0;
	while (p->gens[slot].id)
		slot++;
	struct pipe_gen *g = &p->gens[slot];
	g->cap_ctx = n + (max_new < 256 ? max_new : 256);
	size_t bias = (size_t)s->n_logit_bias * sizeof(*s->logit_bias);
	g->sampling = *s;
	g->sampling.logit_bias = bias ? malloc(bias) : NULL;
	g->ctx = malloc((size_t)g->cap_ctx * sizeof(uint32_t));
	if (!g->ctx || (bias && !g->sampling.logit_bias)) {
		free(g->ctx);
		free(g->sampling.logit_bias);
		*g = (struct pipe_gen){ 0 };
		return sf_err_set(err, SF_E_NOMEM, "no memory for the pipeline's context");
	}
	if (bias)
		memcpy(g->sampling.logit_bias, s->logit_bias, bias);
	memcpy(g->ctx, ctx, (size_t)n * sizeof(uint32_t));
	g->n_ctx = n;
	g->left = max_new;
	g->n_stop = n_stop < SF_PIPE_MAX_STOP ? n_stop : SF_PIPE_MAX_STOP;
	if (g->n_stop)
		memcpy(g->stop, stop, g->n_stop * sizeof(uint32_t));
	g->logprobs = o->logprobs;
	g->top_logprobs = o->top_logprobs;
	g->id = (++p->seq << SLOT_BITS) | slot;
	g->since = now_ms;
	p->n_running++;
	*gen = g->id;
	send_step(p, g, now_ms);
	return 0;
}

static struct pipe_gen *gen_of(struct sf_pipe *p, uint64_t id)
{
	uint32_t slot = (uint32_t)(id & SLOT_MASK);
	return slot < p->cfg.max_gens && p->gens[slot].id == id ? &p->gens[slot] : NULL;
}

void sf_pipe_cancel(struct sf_pipe *p, uint64_t gen)
{
	struct pipe_gen *g = gen_of(p, gen);
	if (g)
		gen_free(p, g);
}

static bool is_stop(const struct pipe_gen *g, uint32_t t)
{
	for (uint32_t i = 0; i < g->n_stop; i++)
		if (g->stop[i] == t)
			return true;
	return false;
}

/* The last stage's token: passed on, and the next step begins (or the generation ends). */
static void took_token(struct sf_pipe *p, struct pipe_gen *g, uint32_t t,
		       const struct sf_logprob *lp, uint64_t now)
{
	uint64_t id = g->id;
	if (is_stop(g, t)) {
		gen_free(p, g);
		p->io.done(p->io.arg, id, 0, SF_FINISH_STOP, NULL);
		return;
	}
	if (g->n_ctx == g->cap_ctx) {
		uint32_t cap = g->cap_ctx + g->cap_ctx / 2 + 16;
		uint32_t *c = realloc(g->ctx, (size_t)cap * sizeof(uint32_t));
		if (!c) {
			fail(p, g, SF_E_NOMEM, "no memory for the pipeline's context");
			return;
		}
		g->ctx = c;
		g->cap_ctx = cap;
	}
	g->ctx[g->n_ctx++] = t;
	g->left--;
	g->made++;
	p->io.token(p->io.arg, id, t, lp);
	g = gen_of(p, id); /* the callback may have cancelled it */
#ifdef SF_PLANTED_BUGS
	if (g && g->asked_again && sf_pipe_planted_bug == SF_PIPE_BUG_TWICE) {
		p->io.token(p->io.arg, id, t, lp); /* the planted bug: the step applied twice */
		g = gen_of(p, id);
	}
	if (g)
		g->asked_again = false;
#endif
	if (!g)
		return;
	if (!g->left) {
		gen_free(p, g);
		p->io.done(p->io.arg, id, 0, SF_FINISH_LENGTH, NULL);
		return;
	}
	g->stage = 0;
	g->since = now;
	send_step(p, g, now);
}

bool sf_pipe_on_msg(struct sf_pipe *p, uint32_t k, const struct sf_msg *m, uint64_t now_ms)
{
	if (m->type != SF_MSG_STAGE_FORWARD_RESP)
		return false;
	const struct sf_stage_forward_resp *r = &m->u.stage_forward_resp;
	uint32_t slot = (uint32_t)(r->request_id & SLOT_MASK);
	struct pipe_gen *g = slot < p->cfg.max_gens ? &p->gens[slot] : NULL;
	if (!g || !g->id || !g->req || g->req != r->request_id || g->stage != k)
		return true; /* stale: cancelled, asked again, or from a link since closed */
	char who[SF_MAX_NAME + 16];
	snprintf(who, sizeof(who), "%u (%s)", k + 1, p->stages[k].identity);
	bool last = k + 1 == p->cfg.n_stages;
	g->req = 0;
	if (r->kind == SF_STAGE_ERROR) {
		char why[SF_MAX_REASON + 1];
		snprintf(why, sizeof(why), "%.*s", (int)r->error_len, r->error ? r->error : "");
		fail(p, g, SF_E_RANGE, "pipeline stage %s could not run its layers: %s", who, why);
	} else if (r->kind == SF_STAGE_HELD && g->kept && r->held < g->from) {
		/* It lost what it kept (restarted, a new link, let go of): from what it holds,
		 * every stage again. */
		g->from = r->held;
		g->stage = 0;
		g->since = now_ms;
		send_step(p, g, now_ms);
	} else if (r->kind == SF_STAGE_HELD) {
		fail(p, g, SF_E_PROTOCOL, "pipeline stage %s says it holds %u positions of a step "
		     "%s", who, r->held, g->kept ? "it holds more of" : "that keeps none");
	} else if (r->kind == SF_STAGE_TOKEN && last && g->kept && g->to < g->n_ctx) {
		g->from = g->to; /* a piece of the prompt: its token is not the next one */
		g->stage = 0;
		g->since = now_ms;
		send_step(p, g, now_ms);
	} else if (r->kind == SF_STAGE_TOKEN && last) {
		g->from = g->kept ? g->to : 0;
		took_token(p, g, r->token, g->logprobs || g->top_logprobs ? &r->logprob : NULL,
			   now_ms);
	} else if (r->kind == SF_STAGE_HIDDEN && !last) {
		uint8_t *h = malloc(r->hidden_len ? r->hidden_len : 1);
		if (!h) {
			fail(p, g, SF_E_NOMEM, "no memory for the hidden state from %s", who);
			return true;
		}
		if (r->hidden_len)
			memcpy(h, r->hidden, r->hidden_len);
		free(g->hidden);
		g->hidden = h;
		g->hidden_len = r->hidden_len;
		g->stage = k + 1;
		g->since = now_ms;
		send_step(p, g, now_ms);
	} else {
		fail(p, g, SF_E_PROTOCOL, "pipeline stage %s answered %s", who,
		     last ? "a hidden state where the last stage owes a token"
			  : "a token where a hidden state was due (do its layers end early?)");
	}
	return true;
}

void sf_pipe_tick(struct sf_pipe *p, uint64_t now_ms)
{
	for (uint32_t i = 0; i < p->cfg.max_gens; i++) {
		struct pipe_gen *g = &p->gens[i];
		if (!g->id || now_ms < g->since + p->cfg.step_timeout_ms)
			continue;
		struct pipe_stage *st = &p->stages[g->stage];
		fail(p, g, SF_E_SILENT, "pipeline stage %u (%s) %s %u ms", g->stage + 1,
		     st->identity[0] ? st->identity : "never up",
		     st->up ? "did not answer within" : "was down for", p->cfg.step_timeout_ms);
	}
}

uint64_t sf_pipe_deadline(const struct sf_pipe *p)
{
	uint64_t at = UINT64_MAX;
	for (uint32_t i = 0; i < p->cfg.max_gens; i++)
		if (p->gens[i].id && p->gens[i].since + p->cfg.step_timeout_ms < at)
			at = p->gens[i].since + p->cfg.step_timeout_ms;
	return at;
}
