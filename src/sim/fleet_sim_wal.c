/* The simulated fleet's durable head: a write-ahead log in memory that does what headd's
 * wal.c does with a real one. Each head event of a session (TOKENS, LOGPROBS, FINISH and
 * ERROR of a generation, PLACED) and each call the caller makes (open: SESSION, append:
 * CONTENT, generate: GEN, close: CLOSE) becomes a record (sf_walrec_put_*) in a queue, in
 * order. A record is durable a seeded 0..wal_max_delay_ms after it was appended (the
 * "fsync"; records of one millisecond go in one write and are durable together, never
 * before an earlier one); then it is applied to the log's session table (sf_wal_state), its
 * event delivered to the recorder (the caller) and sf_head_durable told. A head crash loses
 * the queue; the next head is the table's sessions restored (sf_wal_restore_session). A
 * head of several shards has a log for each, as headd's --wal-dir/shard-K: its own queue,
 * its own "fsync" delays and its own table, restored into that shard alone. */
#include "sim/fleet_sim_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/buf.h>

#include "wal/wal_event.h"
#include "wal/wal_restore.h"
#include "wal/wal_state.h"

#ifdef SF_PLANTED_BUGS
int sf_fleet_sim_wal_planted_bug = SF_FLEET_WAL_BUG_NONE;
#endif

struct sim_walq {
	struct sim_walq *next;
	uint64_t at, durable_at; /* appended, durable */
	uint8_t type;
	bool logged;  /* in the log: applied to the table once durable */
	bool deliver; /* a head event: delivered once durable */
	bool acked;   /* the planted bug told the head already (never without SF_PLANTED_BUGS) */
	uint32_t len;
	uint8_t p[];
};

struct gen_ref {
	uint64_t sid, gid;
};

struct gen_refs {
	struct gen_ref *v;
	uint32_t n, cap;
};

struct sim_wal {
	struct sim_shard *sh;
	struct sf_wal_state *st;
	struct sf_buf rec;
	struct sim_walq *head, *tail;
	uint64_t rng;
	struct sf_wal_event_buf evbuf; /* an event being delivered, decoded */
	struct gen_refs lost, failed;
	char why[512];
};

static uint64_t wal_rand(struct sim_wal *w)
{
	uint64_t z = (w->rng += 0x9e3779b97f4a7c15ULL); /* splitmix64, the log's own stream */
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void __attribute__((format(printf, 2, 3))) wrong(struct sim_wal *w, const char *fmt, ...)
{
	if (w->why[0])
		return; /* the first is the one to tell */
	int at = w->sh->f->n_shards > 1 ? snprintf(w->why, sizeof(w->why), "shard %u: ", w->sh->k) : 0;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->why + at, sizeof(w->why) - (size_t)at, fmt, ap);
	va_end(ap);
}

static void refs_add(struct gen_refs *r, uint64_t sid, uint64_t gid)
{
	if (r->n == r->cap) {
		uint32_t cap = r->cap ? r->cap * 2 : 32;
		struct gen_ref *v = realloc(r->v, cap * sizeof(*v));
		if (!v)
			return;
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = (struct gen_ref){ sid, gid };
}

static bool refs_has(const struct gen_refs *r, uint64_t sid, uint64_t gid)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (r->v[i].sid == sid && r->v[i].gid == gid)
			return true;
	return false;
}

static int wal_new(struct sim_shard *sh, struct sf_err *err)
{
	struct sim_wal *w = calloc(1, sizeof(*w));
	if (!w)
		return sf_err_set(err, SF_E_NOMEM, "no memory for the simulated log");
	int rc = sf_wal_state_new(&w->st, 4096, err);
	if (rc) {
		free(w);
		return rc;
	}
	sf_buf_init(&w->rec, 1u << 20);
	w->sh = sh;
	/* Shard 0's delays from the seed's stream (as without shards), the others' their own. */
	w->rng = sh->f->cfg.wal_seed ^ (0xa0761d6478bd642fULL * sh->k);
	sh->wal = w;
	return 0;
}

int sf__fleet_wal_new(struct sf_fleet_sim *f, struct sf_err *err)
{
	int rc = 0;
	for (uint32_t k = 0; !rc && k < f->n_shards; k++)
		rc = wal_new(&f->shards[k], err);
	return rc;
}

static void queue_free(struct sim_wal *w)
{
	while (w->head) {
		struct sim_walq *e = w->head;
		w->head = e->next;
		free(e);
	}
	w->tail = NULL;
}

void sf__fleet_wal_free(struct sf_fleet_sim *f)
{
	for (uint32_t k = 0; k < f->n_shards; k++) {
		struct sim_wal *w = f->shards[k].wal;
		if (!w)
			continue;
		queue_free(w);
		sf_wal_state_free(w->st);
		sf_buf_free(&w->rec);
		sf_wal_event_buf_free(&w->evbuf);
		free(w->lost.v);
		free(w->failed.v);
		free(w);
		f->shards[k].wal = NULL;
	}
}

/* The record in w->rec joins the queue. */
static void enqueue(struct sim_shard *sh, uint8_t type, bool logged, bool deliver)
{
	struct sf_fleet_sim *f = sh->f;
	struct sim_wal *w = sh->wal;
	uint32_t len = (uint32_t)sf_buf_used(&w->rec);
	struct sim_walq *e = malloc(sizeof(*e) + len);
	if (!e) {
		wrong(w, "no memory to hold a record until it is durable");
		return;
	}
	uint64_t at = f->now;
	if (w->tail && w->tail->at == at)
		at = w->tail->durable_at; /* the same write */
	else if (f->cfg.wal_max_delay_ms)
		at += wal_rand(w) % (f->cfg.wal_max_delay_ms + 1);
	if (w->tail && at < w->tail->durable_at)
		at = w->tail->durable_at; /* durable in order */
	*e = (struct sim_walq){ .at = f->now, .durable_at = at, .type = type, .logged = logged,
				.deliver = deliver, .len = len };
	if (len)
		memcpy(e->p, sf_buf_head(&w->rec), len);
	if (w->tail)
		w->tail->next = e;
	else
		w->head = e;
	w->tail = e;
}

static void append_rec(struct sim_shard *sh, uint8_t type, int rc)
{
	if (rc) {
		wrong(sh->wal, "a %s record does not encode (%s)", sf_walrec_type_name(type),
		      sf_code_name(rc));
		return;
	}
	enqueue(sh, type, true, false);
}

/* ---- the head's events ---- */

void sf__fleet_wal_event(void *arg, const struct sf_head_event *ev)
{
	struct sim_shard *sh = arg;
	struct sf_fleet_sim *f = sh->f;
	struct sim_wal *w = sh->wal;
	if (!ev->session_id || ev->kind == SF_HEAD_EV_DROP_LINK || ev->kind == SF_HEAD_EV_STATUS) {
		sf__fleet_record(sh, ev); /* about nodes and links: not the log's */
		return;
	}
	sf__fleet_shard_event(sh, ev); /* told now, delivered once durable: checked now */
	if (ev->kind == SF_HEAD_EV_PLACED) {
		struct sf_walrec_placed r = { .session_id = ev->session_id, .epoch = ev->epoch };
		snprintf(r.node, sizeof(r.node), "%s",
			 ev->node < f->n_nodes ? f->nodes[ev->node].label : "");
		append_rec(sh, SF_WALREC_PLACED, sf_walrec_put_placed(&w->rec, &r));
		return;
	}
	uint8_t type;
	int rc = sf_wal_event_put(&w->rec, ev, &type);
	if (rc == SF_E_RANGE)
		return; /* no token event */
	if (rc) {
		wrong(w, "a %s record does not encode (%s)", sf_walrec_type_name(type),
		      sf_code_name(rc));
		return;
	}
	/* A session-wide error keeps its place in the queue but is not logged. */
	enqueue(sh, type, ev->generation_id != 0, true);
}

/* ---- delivery ---- */

/* sf_head_durable for an event record: its seq, or all of the generation for an END. */
static void tell_durable(struct sim_shard *sh, const struct sim_walq *e,
			 const struct sf_walrec_event *r)
{
	if (r->generation_id && sh->head)
		sf_head_durable(sh->head, r->session_id, r->generation_id, r->epoch,
				sf_wal_event_durable_seq(e->type, r));
}

static void deliver(struct sim_shard *sh, const struct sim_walq *e)
{
	struct sim_wal *w = sh->wal;
	struct sf_walrec_event r;
	struct sf_head_event ev;
	struct sf_err err;
	if (sf_wal_event_get(&w->evbuf, e->type, e->p, e->len, &ev, &r, &err)) {
		wrong(w, "the log's queue holds an event that does not decode: %s", err.msg);
		return;
	}
	ev.node = sf_head_session_node(sh->head, r.session_id);
	sf__fleet_record(sh, &ev);
	if (!e->acked)
		tell_durable(sh, e, &r);
}

static void release(struct sim_shard *sh)
{
	struct sf_fleet_sim *f = sh->f;
	struct sim_wal *w = sh->wal;
#ifdef SF_PLANTED_BUGS
	if (sf_fleet_sim_wal_planted_bug == SF_FLEET_WAL_BUG_ACK_EARLY) {
		/* The planted bug: the head hears "durable" as soon as the record is appended. */
		for (struct sim_walq *e = w->head; e; e = e->next) {
			struct sf_walrec_event r;
			struct sf_err err;
			if (e->acked || !e->deliver || !e->logged ||
			    sf_walrec_get_event(e->type, e->p, e->len, &r, &err))
				continue;
			e->acked = true;
			tell_durable(sh, e, &r);
		}
	}
#endif
	while (w->head && w->head->durable_at <= f->now) {
		struct sim_walq *e = w->head;
		w->head = e->next;
		if (!w->head)
			w->tail = NULL;
		struct sf_err err;
		if (e->logged && sf_wal_state_apply(w->st, e->type, e->p, e->len, &err))
			wrong(w, "a %s record does not apply to the log's table: %s",
			      sf_walrec_type_name(e->type), err.msg);
		if (e->deliver)
			deliver(sh, e);
		free(e);
	}
}

void sf__fleet_wal_release(struct sf_fleet_sim *f)
{
	for (uint32_t k = 0; k < f->n_shards; k++)
		release(&f->shards[k]);
}

/* ---- the caller's calls ---- */

static int head_down(const struct sf_fleet_sim *f, struct sf_err *err)
{
	return f->head_down ? sf_err_set(err, SF_E_CLOSED, "the head is down (restarting)") : 0;
}

int sf_fleet_sim_open(struct sf_fleet_sim *f, uint64_t sid, const struct sf_head_session_params *p,
		      struct sf_err *err)
{
	int rc = head_down(f, err);
	if (rc)
		return rc;
	struct sim_shard *sh = sf__fleet_owner(f, sid);
	struct sim_wal *w = sh->wal;
	if (w) {
		/* Logged first: the placement the open makes is logged as it happens. */
		struct sf_walrec_session r = { .session_id = sid, .qos = p->qos,
					       .sampling = p->sampling, .lease_ms = p->lease_ms };
		snprintf(r.model, sizeof(r.model), "%s", p->model);
		snprintf(r.codec, sizeof(r.codec), "%s", p->codec ? p->codec : "");
		append_rec(sh, SF_WALREC_SESSION, sf_walrec_put_session(&w->rec, &r));
	}
	rc = sf_head_session_open(sh->head, sid, p, f->now, err);
	if (rc && w && rc != SF_E_STATE) /* not opened: the log forgets it (not one already open) */
		append_rec(sh, SF_WALREC_CLOSE, sf_walrec_put_close(&w->rec, sid));
	return rc;
}

int sf_fleet_sim_append(struct sf_fleet_sim *f, uint64_t sid, const uint32_t *tokens, uint32_t n,
			struct sf_err *err)
{
	struct sim_shard *sh = sf__fleet_owner(f, sid);
	int rc = head_down(f, err);
	if (!rc)
		rc = sf_head_append(sh->head, sid, tokens, n, f->now, err);
	if (!rc && sh->wal)
		append_rec(sh, SF_WALREC_CONTENT, sf_walrec_put_content(&sh->wal->rec, sid, 0, tokens, n));
	return rc;
}

int sf_fleet_sim_generate(struct sf_fleet_sim *f, uint64_t sid, uint32_t max_new,
			  uint32_t max_wall_ms, const struct sf_generate_opts *opts,
			  uint64_t *generation_id, struct sf_err *err)
{
	struct sim_shard *sh = sf__fleet_owner(f, sid);
	int rc = head_down(f, err);
	if (!rc)
		rc = sf_head_generate(sh->head, sid, max_new, max_wall_ms, opts, f->now,
				      generation_id, err);
	if (!rc && sh->wal) {
		struct sf_walrec_gen g = { .session_id = sid, .generation_id = *generation_id,
					   .max_new = max_new, .max_wall_ms = max_wall_ms,
					   .logprobs = opts && opts->logprobs,
					   .top_logprobs = opts ? opts->top_logprobs : 0 };
		snprintf(g.request_id, sizeof(g.request_id), "sim-%" PRIu64, *generation_id);
		append_rec(sh, SF_WALREC_GEN, sf_walrec_put_gen(&sh->wal->rec, &g));
	}
	return rc;
}

int sf_fleet_sim_cancel(struct sf_fleet_sim *f, uint64_t sid, uint64_t gid, struct sf_err *err)
{
	int rc = head_down(f, err);
	return rc ? rc : sf_head_cancel(sf__fleet_owner(f, sid)->head, sid, gid, f->now, err);
}

int sf_fleet_sim_close(struct sf_fleet_sim *f, uint64_t sid, bool park, struct sf_err *err)
{
	struct sim_shard *sh = sf__fleet_owner(f, sid);
	int rc = head_down(f, err);
	if (!rc)
		rc = sf_head_session_close(sh->head, sid, park, f->now, err);
	/* A parked session stays in the log as it was (headd never parks); one closed for
	 * good leaves it. */
	if (!rc && sh->wal && !park)
		append_rec(sh, SF_WALREC_CLOSE, sf_walrec_put_close(&sh->wal->rec, sid));
	return rc;
}

/* ---- a crash and the start after it ---- */

static void crash(struct sim_shard *sh)
{
	struct sf_fleet_sim *f = sh->f;
	struct sim_wal *w = sh->wal;
	/* The caller had exactly the durable prefix: every token it holds is in the table
	 * (delivery waits for durability), and the table holds nothing it was not given. */
	for (uint32_t i = 0; i < f->n_streams; i++) {
		const struct sf_fleet_stream *s = &f->streams[i];
		if (sf__fleet_owner(f, s->session_id) != sh)
			continue; /* another shard's, in another log */
		struct sf_wal_session *ws = sf_wal_state_find(w->st, s->session_id);
		struct sf_wal_gen *g = ws ? sf_wal_session_gen(ws, s->generation_id) : NULL;
		if (!g)
			continue; /* closed, or older than the log keeps */
		if (s->n_tokens > g->n_tokens ||
		    (s->n_tokens && memcmp(s->tokens, g->tokens, s->n_tokens * sizeof(uint32_t))))
			wrong(w, "generation %" PRIu64 " of session %" PRIu64 ": the caller holds %u "
			      "tokens the log did not make durable first (the log has %u): a token "
			      "reached the caller before it was durable", s->generation_id,
			      s->session_id, s->n_tokens, g->n_tokens);
		else if (s->n_tokens != g->n_tokens)
			wrong(w, "generation %" PRIu64 " of session %" PRIu64 ": the log holds %u "
			      "durable tokens, the caller got %u", s->generation_id, s->session_id,
			      g->n_tokens, s->n_tokens);
		else if ((s->finishes || s->errors) != g->ended)
			wrong(w, "generation %" PRIu64 " of session %" PRIu64 ": the caller %s its end, "
			      "the log %s", s->generation_id, s->session_id,
			      s->finishes || s->errors ? "had" : "did not have",
			      g->ended ? "has it" : "does not");
	}
	/* Generations asked whose GEN record is lost: the caller's request was never
	 * acknowledged (nothing of it could reach the caller before it was durable). */
	for (struct sim_walq *e = w->head; e; e = e->next) {
		struct sf_walrec_gen g;
		struct sf_err err;
		if (e->type == SF_WALREC_GEN && !sf_walrec_get_gen(e->p, e->len, &g, &err))
			refs_add(&w->lost, g.session_id, g.generation_id);
	}
	queue_free(w);
}

void sf__fleet_wal_crash(struct sf_fleet_sim *f)
{
	for (uint32_t k = 0; k < f->n_shards; k++)
		crash(&f->shards[k]);
}

static uint32_t node_of(const struct sf_fleet_sim *f, const char *name)
{
	for (uint32_t i = 0; i < f->n_nodes; i++)
		if (!strcmp(f->nodes[i].label, name))
			return i;
	return SF_HEAD_NO_NODE;
}

static void restore(struct sim_shard *sh)
{
	struct sf_fleet_sim *f = sh->f;
	struct sim_wal *w = sh->wal;
	for (const struct sf_wal_session *s = sf_wal_state_first(w->st); s; s = s->next) {
		uint32_t node = s->epoch ? node_of(f, s->node) : SF_HEAD_NO_NODE;
		const struct sf_wal_gen *running = sf_wal_session_running(s);
		if (s->epoch && node == SF_HEAD_NO_NODE)
			wrong(w, "session %" PRIu64 " was placed on \"%s\", which is no node of the "
			      "fleet", s->rec.session_id, s->node);
		if (running && node == SF_HEAD_NO_NODE)
			refs_add(&w->failed, s->rec.session_id, running->rec.generation_id);
		struct sf_err err;
		if (sf_wal_restore_session(sh->head, s, node, f->now, &err))
			wrong(w, "session %" PRIu64 " did not restore: %s", s->rec.session_id,
			      err.msg);
	}
}

void sf__fleet_wal_restore(struct sf_fleet_sim *f)
{
	for (uint32_t k = 0; k < f->n_shards; k++)
		restore(&f->shards[k]);
}

const char *sf_fleet_sim_wal_why(const struct sf_fleet_sim *f)
{
	for (uint32_t k = 0; k < f->n_shards; k++)
		if (f->shards[k].wal && f->shards[k].wal->why[0])
			return f->shards[k].wal->why;
	return "";
}

/* The log of the shard that owns sid (NULL: no log). */
static const struct sim_wal *wal_of(const struct sf_fleet_sim *f, uint64_t sid)
{
	return f->shards[sid % f->n_shards].wal;
}

bool sf_fleet_sim_wal_lost(const struct sf_fleet_sim *f, uint64_t sid, uint64_t gid)
{
	const struct sim_wal *w = wal_of(f, sid);
	return w && refs_has(&w->lost, sid, gid);
}

bool sf_fleet_sim_wal_failed(const struct sf_fleet_sim *f, uint64_t sid, uint64_t gid)
{
	const struct sim_wal *w = wal_of(f, sid);
	return w && refs_has(&w->failed, sid, gid);
}
