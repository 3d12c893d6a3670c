/* The caller's side of the simulated fleet: its calls, each to the shard that owns the
 * session; what the head told it, each generation's stream (and the shard that told it),
 * and the errors and dropped links beside them; and the check of a stream against the
 * engine's. */
#include "sim/fleet_sim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct sf_fleet_stream *stream_of(struct sf_fleet_sim *f, uint32_t shard, uint64_t sid,
					 uint64_t gid)
{
	for (uint32_t i = 0; i < f->n_streams; i++)
		if (f->streams[i].session_id == sid && f->streams[i].generation_id == gid)
			return &f->streams[i];
	if (f->n_streams == SF_FLEET_SIM_MAX_STREAMS)
		return NULL;
	struct sf_fleet_stream *s = &f->streams[f->n_streams++];
	s->session_id = sid;
	s->generation_id = gid;
	s->shard = shard;
	return s;
}

static void note(struct sf_fleet_sim *f, uint32_t shard, const struct sf_head_event *ev)
{
	if (f->n_notes == SF_FLEET_SIM_MAX_NOTES)
		return;
	struct sf_fleet_note *n = &f->notes[f->n_notes++];
	n->kind = ev->kind;
	n->node = ev->node;
	n->shard = shard;
	n->session_id = ev->session_id;
	n->code = ev->code;
	snprintf(n->msg, sizeof(n->msg), "%s", ev->msg ? ev->msg : "");
}

static void add_tokens(struct sf_fleet_stream *s, const uint32_t *t, uint32_t n)
{
	if (s->n_tokens + n > s->cap_tokens) {
		uint32_t cap = s->cap_tokens ? s->cap_tokens : 256;
		while (cap < s->n_tokens + n)
			cap *= 2;
		uint32_t *nt = realloc(s->tokens, cap * sizeof(*nt));
		if (!nt)
			return;
		s->tokens = nt;
		s->cap_tokens = cap;
	}
	memcpy(s->tokens + s->n_tokens, t, n * sizeof(*t));
	s->n_tokens += n;
}

static void add_lp(struct sf_fleet_stream *s, uint32_t token)
{
	if (s->n_lp == s->cap_lp) {
		uint32_t cap = s->cap_lp ? s->cap_lp * 2 : 64;
		uint32_t *t = realloc(s->lp_tokens, cap * sizeof(*t));
		if (!t)
			return;
		s->lp_tokens = t;
		s->cap_lp = cap;
	}
	s->lp_tokens[s->n_lp++] = token;
}

static void record(struct sf_fleet_sim *f, uint32_t shard, const struct sf_head_event *ev)
{
	if (ev->kind == SF_HEAD_EV_STATUS || ev->kind == SF_HEAD_EV_PLACED ||
	    ev->kind == SF_HEAD_EV_PREFIX)
		return;
	bool gen = ev->generation_id && ev->kind != SF_HEAD_EV_DROP_LINK;
	if (!gen) {
		note(f, shard, ev);
		return;
	}
	struct sf_fleet_stream *s = stream_of(f, shard, ev->session_id, ev->generation_id);
	if (!s)
		return;
	if (s->finishes || s->errors)
		s->after_end++;
	switch (ev->kind) {
	case SF_HEAD_EV_TOKENS:
		add_tokens(s, ev->tokens, ev->n_tokens);
		break;
	case SF_HEAD_EV_LOGPROBS:
		for (uint32_t i = 0; i < ev->n_logprobs; i++)
			add_lp(s, ev->logprobs[i].token);
		break;
	case SF_HEAD_EV_FINISH:
		s->finishes++;
		s->reason = ev->reason;
		break;
	case SF_HEAD_EV_ERROR:
		s->errors++;
		s->code = ev->code;
		snprintf(s->msg, sizeof(s->msg), "%s", ev->msg ? ev->msg : "");
		break;
	default:
		break;
	}
}

void sf__fleet_record(void *arg, const struct sf_head_event *ev)
{
	struct sim_shard *sh = arg;
	if (ev->kind == SF_HEAD_EV_DROP_LINK && ev->node < sh->f->n_nodes)
		sh->drops[ev->node] = ev->link_id;
	sf__fleet_shard_event(sh, ev);
	record(sh->f, sh->k, ev);
}

int sf_fleet_sim_open(struct sf_fleet_sim *f, uint64_t sid, const struct sf_head_session_params *p,
		      struct sf_err *err)
{
	return sf_head_session_open(sf__fleet_owner(f, sid)->head, sid, p, f->now, err);
}

int sf_fleet_sim_append(struct sf_fleet_sim *f, uint64_t sid, const uint32_t *tokens, uint32_t n,
			struct sf_err *err)
{
	return sf_head_append(sf__fleet_owner(f, sid)->head, sid, tokens, n, f->now, err);
}

int sf_fleet_sim_generate(struct sf_fleet_sim *f, uint64_t sid, uint32_t max_new,
			  uint32_t max_wall_ms, const struct sf_generate_opts *opts,
			  uint64_t *generation_id, struct sf_err *err)
{
	return sf_head_generate(sf__fleet_owner(f, sid)->head, sid, max_new, max_wall_ms, opts,
				f->now, generation_id, err);
}

int sf_fleet_sim_cancel(struct sf_fleet_sim *f, uint64_t sid, uint64_t gid, struct sf_err *err)
{
	return sf_head_cancel(sf__fleet_owner(f, sid)->head, sid, gid, f->now, err);
}

int sf_fleet_sim_close(struct sf_fleet_sim *f, uint64_t sid, bool park, struct sf_err *err)
{
	return sf_head_session_close(sf__fleet_owner(f, sid)->head, sid, park, f->now, err);
}

void sf__fleet_record_pipe(struct sf_fleet_sim *f, const struct sf_head_event *ev)
{
	record(f, 0, ev);
}

void sf__fleet_record_free(struct sf_fleet_sim *f)
{
	for (uint32_t i = 0; f->streams && i < f->n_streams; i++) {
		free(f->streams[i].tokens);
		free(f->streams[i].lp_tokens);
	}
	free(f->streams);
}

const struct sf_fleet_stream *sf_fleet_sim_stream(const struct sf_fleet_sim *f, uint64_t sid,
						  uint64_t gid)
{
	for (uint32_t i = 0; i < f->n_streams; i++)
		if (f->streams[i].session_id == sid && f->streams[i].generation_id == gid)
			return &f->streams[i];
	return NULL;
}

bool sf_fleet_sim_ended(const struct sf_fleet_sim *f, uint64_t sid, uint64_t gid)
{
	const struct sf_fleet_stream *s = sf_fleet_sim_stream(f, sid, gid);
	return s && (s->finishes || s->errors);
}

uint32_t sf_fleet_sim_n_notes(const struct sf_fleet_sim *f)
{
	return f->n_notes;
}

const struct sf_fleet_note *sf_fleet_sim_note(const struct sf_fleet_sim *f, uint32_t k)
{
	return k < f->n_notes ? &f->notes[k] : NULL;
}

int sf_fleet_sim_check(const struct sf_fleet_sim *f, uint64_t sid, uint64_t gid,
		       const struct sf_sampling *smp, const uint32_t *ctx, size_t n_ctx,
		       uint32_t max_new, char *why, size_t why_len)
{
	const struct sf_fleet_stream *s = sf_fleet_sim_stream(f, sid, gid);
	size_t cap = max_new + 1, n_want = 0;
	uint32_t *want = malloc(cap * sizeof(*want)), reason = 0;
	struct sf_err err;
	int rc = -1;
	if (!want) {
		snprintf(why, why_len, "no memory");
	} else if (sf_sim_expected(&f->cfg.engine, smp, ctx, n_ctx, max_new, want, cap, &n_want,
				   &reason, &err)) {
		snprintf(why, why_len, "no expected stream: %s", err.msg);
	} else if (!s) {
		snprintf(why, why_len, "the caller got nothing of generation %llu",
			 (unsigned long long)gid);
	} else if (s->errors) {
		snprintf(why, why_len, "generation %llu ended with an error: %s",
			 (unsigned long long)gid, s->msg);
	} else if (s->finishes != 1 || s->after_end) {
		snprintf(why, why_len, "generation %llu: %d finishes, %d events after the end",
			 (unsigned long long)gid, s->finishes, s->after_end);
	} else if (s->n_tokens != n_want) {
		snprintf(why, why_len, "generation %llu: %u tokens, the engine's stream has %zu",
			 (unsigned long long)gid, s->n_tokens, n_want);
	} else if (n_want && memcmp(s->tokens, want, n_want * sizeof(*want))) {
		size_t at = 0;
		while (s->tokens[at] == want[at])
			at++;
		snprintf(why, why_len, "generation %llu: token %zu is %u, the engine's is %u",
			 (unsigned long long)gid, at, s->tokens[at], want[at]);
	} else if (s->reason != reason) {
		snprintf(why, why_len, "generation %llu finished with reason %u, the engine's is %u",
			 (unsigned long long)gid, s->reason, reason);
	} else {
		rc = 0;
	}
	free(want);
	return rc;
}
