/* The log's session table: records applied in LSN order; sessions hashed by id, listed in
 * opening order for snapshots. */
#include "wal/wal_state.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct sf_wal_state {
	struct sf_wal_session **buckets;
	uint32_t n_buckets, n_sessions, max_sessions;
	struct sf_wal_session *first, *last;
	uint64_t next_session;
};

static uint32_t bucket_of(const struct sf_wal_state *st, uint64_t id)
{
	return (uint32_t)((id * 0x9e3779b97f4a7c15ULL) >> 32) & (st->n_buckets - 1);
}

int sf_wal_state_new(struct sf_wal_state **out, uint32_t max_sessions, struct sf_err *err)
{
	struct sf_wal_state *st = calloc(1, sizeof(*st));
	uint32_t n = 64;
	while (n < max_sessions && n < (1u << 24))
		n *= 2;
	if (st)
		st->buckets = calloc(n, sizeof(*st->buckets));
	if (!st || !st->buckets) {
		free(st);
		return sf_err_set(err, SF_E_NOMEM, "no memory for the log's session table");
	}
	st->n_buckets = n;
	st->max_sessions = max_sessions ? max_sessions : 4096;
	st->next_session = 1;
	*out = st;
	return 0;
}

static void gen_free(struct sf_wal_gen *g)
{
	if (!g)
		return;
	free(g->body);
	free(g->tokens);
	free(g->lp);
	free(g);
}

static void session_free(struct sf_wal_session *s)
{
	for (uint32_t i = 0; i < s->n_gens; i++)
		gen_free(s->gens[i]);
	sf_wal_turns_free(&s->turns);
	free(s->content);
	free(s->bias);
	free(s->grammar);
	free(s);
}

void sf_wal_state_free(struct sf_wal_state *st)
{
	if (!st)
		return;
	struct sf_wal_session *s = st->first;
	while (s) {
		struct sf_wal_session *next = s->next;
		session_free(s);
		s = next;
	}
	free(st->buckets);
	free(st);
}

struct sf_wal_session *sf_wal_state_find(const struct sf_wal_state *st, uint64_t id)
{
	for (struct sf_wal_session *s = st->buckets[bucket_of(st, id)]; s; s = s->hnext)
		if (s->rec.session_id == id)
			return s;
	return NULL;
}

struct sf_wal_gen *sf_wal_session_gen(const struct sf_wal_session *s, uint64_t gid)
{
	for (uint32_t i = 0; i < s->n_gens; i++)
		if (s->gens[i]->rec.generation_id == gid)
			return s->gens[i];
	return NULL;
}

struct sf_wal_gen *sf_wal_state_request(const struct sf_wal_state *st, const char *rid,
					struct sf_wal_session **out)
{
	for (struct sf_wal_session *s = st->first; s; s = s->next)
		for (uint32_t i = 0; i < s->n_gens; i++)
			if (!strcmp(s->gens[i]->rec.request_id, rid)) {
				if (out)
					*out = s;
				return s->gens[i];
			}
	return NULL;
}

struct sf_wal_session *sf_wal_state_first(const struct sf_wal_state *st) { return st->first; }
uint32_t sf_wal_state_count(const struct sf_wal_state *st) { return st->n_sessions; }
uint64_t sf_wal_state_next_session(const struct sf_wal_state *st) { return st->next_session; }

static void unlink_session(struct sf_wal_state *st, struct sf_wal_session *s)
{
	struct sf_wal_session **pp = &st->buckets[bucket_of(st, s->rec.session_id)];
	while (*pp != s)
		pp = &(*pp)->hnext;
	*pp = s->hnext;
	if (s->prev)
		s->prev->next = s->next;
	else
		st->first = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		st->last = s->prev;
	st->n_sessions--;
	session_free(s);
}

static void seen_session(struct sf_wal_state *st, uint64_t id)
{
	if (id >= st->next_session)
		st->next_session = id + 1;
}

static int grow_u32(uint32_t **v, uint32_t *cap, uint32_t need)
{
	if (need <= *cap)
		return 0;
	uint32_t c = *cap ? *cap : 64;
	while (c < need)
		c = c > UINT32_MAX / 2 ? need : c * 2;
	uint32_t *p = realloc(*v, (size_t)c * sizeof(*p));
	if (!p)
		return SF_E_NOMEM;
	*v = p;
	*cap = c;
	return 0;
}

static struct sf_wal_session *need_session(const struct sf_wal_state *st, uint64_t id,
					   const char *what, struct sf_err *err)
{
	struct sf_wal_session *s = sf_wal_state_find(st, id);
	if (!s)
		sf_err_set(err, SF_E_RANGE, "a %s record names session %" PRIu64 ", which no "
			   "record opened", what, id);
	return s;
}

static int apply_session(struct sf_wal_state *st, uint8_t type, const uint8_t *p, uint32_t len,
			 struct sf_err *err)
{
	struct sf_walrec_session r;
	int rc = sf_walrec_get_session(type, p, len, &r, err);
	if (rc)
		return rc;
	seen_session(st, r.session_id);
	struct sf_logit_bias *bias = NULL;
	char *grammar = NULL;
	if ((r.n_bias && !(bias = malloc((size_t)r.n_bias * sizeof(*bias)))) ||
	    (r.grammar_len && !(grammar = malloc((size_t)r.grammar_len + 1)))) {
		free(bias);
		return sf_err_set(err, SF_E_NOMEM, "no memory for the log's sessions");
	}
	if (r.n_bias)
		sf_walrec_bias(r.bias, r.n_bias, bias);
	if (grammar) {
		memcpy(grammar, r.grammar, r.grammar_len);
		grammar[r.grammar_len] = 0;
	}
	r.sampling.logit_bias = bias;
	r.sampling.n_logit_bias = r.n_bias;
	r.sampling.grammar = grammar;
	r.sampling.grammar_len = grammar ? r.grammar_len : 0;
	r.bias = NULL;
	r.n_bias = 0;
	r.grammar = NULL;
	r.grammar_len = 0;
	struct sf_wal_session *s = sf_wal_state_find(st, r.session_id);
	if (s) {
		s->rec = r; /* opened again (placed anew): same session, new parameters */
		free(s->bias);
		free(s->grammar);
		s->bias = bias;
		s->grammar = grammar;
		return 0;
	}
	if (st->n_sessions >= st->max_sessions || !(s = calloc(1, sizeof(*s)))) {
		free(bias);
		free(grammar);
		if (st->n_sessions >= st->max_sessions)
			return sf_err_set(err, SF_E_LIMIT, "the log holds more than %u live sessions "
					  "(the head's --max-fleet-sessions); start the head with a "
					  "higher limit", st->max_sessions);
		return sf_err_set(err, SF_E_NOMEM, "no memory for the log's sessions");
	}
	s->rec = r;
	s->bias = bias;
	s->grammar = grammar;
	uint32_t b = bucket_of(st, r.session_id);
	s->hnext = st->buckets[b];
	st->buckets[b] = s;
	s->prev = st->last;
	if (st->last)
		st->last->next = s;
	else
		st->first = s;
	st->last = s;
	st->n_sessions++;
	return 0;
}

static int apply_content(struct sf_wal_state *st, const uint8_t *p, uint32_t len,
			 struct sf_err *err)
{
	struct sf_walrec_content r;
	int rc = sf_walrec_get_content(p, len, &r, err);
	struct sf_wal_session *s = rc ? NULL : need_session(st, r.session_id, "content", err);
	if (!s)
		return rc ? rc : SF_E_RANGE;
	if (r.keep > s->n_content)
		return sf_err_set(err, SF_E_RANGE, "a content record of session %" PRIu64 " keeps "
				  "%u tokens of the %u it has", r.session_id, r.keep, s->n_content);
	if ((uint64_t)r.keep + r.n_tokens > SF_MAX_TOKENS)
		return sf_err_set(err, SF_E_LIMIT, "session %" PRIu64 "'s content would pass %u "
				  "tokens", r.session_id, SF_MAX_TOKENS);
	if (grow_u32(&s->content, &s->cap_content, r.keep + r.n_tokens))
		return sf_err_set(err, SF_E_NOMEM, "no memory for session %" PRIu64 "'s content",
				  r.session_id);
	sf_walrec_tokens(r.tokens, r.n_tokens, s->content + r.keep);
	s->n_content = r.keep + r.n_tokens;
	s->turn_base = r.keep;
	return 0;
}

static int apply_placed(struct sf_wal_state *st, const uint8_t *p, uint32_t len,
			struct sf_err *err)
{
	struct sf_walrec_placed r;
	int rc = sf_walrec_get_placed(p, len, &r, err);
	struct sf_wal_session *s = rc ? NULL : need_session(st, r.session_id, "placed", err);
	if (!s)
		return rc ? rc : SF_E_RANGE;
	memcpy(s->node, r.node, sizeof(s->node));
	s->epoch = r.epoch;
	return 0;
}

static int apply_gen(struct sf_wal_state *st, const uint8_t *p, uint32_t len, struct sf_err *err)
{
	struct sf_walrec_gen r;
	int rc = sf_walrec_get_gen(p, len, &r, err);
	struct sf_wal_session *s = rc ? NULL : need_session(st, r.session_id, "generation", err);
	if (!s)
		return rc ? rc : SF_E_RANGE;
	if (sf_wal_session_gen(s, r.generation_id))
		return sf_err_set(err, SF_E_RANGE, "generation %" PRIu64 " of session %" PRIu64
				  " is opened twice", r.generation_id, r.session_id);
	struct sf_wal_gen *g = calloc(1, sizeof(*g));
	if (g && r.body_len && (g->body = malloc(r.body_len)))
		memcpy(g->body, r.body, r.body_len);
	if (!g || (r.body_len && !g->body)) {
		gen_free(g);
		return sf_err_set(err, SF_E_NOMEM, "no memory for the log's generations");
	}
	g->rec = r;
	g->rec.body = g->body;
	if (s->n_gens == SF_WAL_KEEP_GENS) {
		gen_free(s->gens[0]);
		memmove(s->gens, s->gens + 1, (SF_WAL_KEEP_GENS - 1) * sizeof(*s->gens));
		s->n_gens--;
	}
	s->gens[s->n_gens++] = g;
	return 0;
}

static struct sf_wal_gen *need_gen(const struct sf_wal_state *st, uint64_t sid, uint64_t gid,
				   const char *what, struct sf_err *err)
{
	struct sf_wal_session *s = need_session(st, sid, what, err);
	struct sf_wal_gen *g = s ? sf_wal_session_gen(s, gid) : NULL;
	if (s && !g)
		sf_err_set(err, SF_E_RANGE, "a %s record names generation %" PRIu64 " of session %"
			   PRIu64 ", which no record asked", what, gid, sid);
	return g;
}

/* An event of the run under epoch: a new epoch starts a new run, numbered from 0 again. */
static int take_seq(struct sf_wal_gen *g, uint64_t epoch, uint64_t seq, struct sf_err *err)
{
	if (epoch != g->epoch) {
		g->epoch = epoch;
		g->next_seq = 0;
		g->resumed = g->n_tokens;
	}
	if (seq != g->next_seq)
		return sf_err_set(err, SF_E_RANGE, "generation %" PRIu64 " has event %" PRIu64
				  " where %" PRIu64 " was next", g->rec.generation_id, seq,
				  g->next_seq);
	g->next_seq = seq + 1;
	return 0;
}

static int append_lp(struct sf_wal_gen *g, const struct sf_walrec_event *e)
{
	if (sf_walrec_lp_blob_add(&g->lp, &g->lp_len, &g->lp_cap, e->lp, e->n_lp, e->lp_len))
		return SF_E_NOMEM;
	g->n_lp += e->n_lp;
	return 0;
}

static int apply_event(struct sf_wal_state *st, uint8_t type, const uint8_t *p, uint32_t len,
		       struct sf_err *err)
{
	struct sf_walrec_event e;
	int rc = sf_walrec_get_event(type, p, len, &e, err);
	struct sf_wal_gen *g = rc ? NULL : need_gen(st, e.session_id, e.generation_id,
						   sf_walrec_type_name(type), err);
	if (!g)
		return rc ? rc : SF_E_RANGE;
	if (g->ended)
		return sf_err_set(err, SF_E_RANGE, "a %s record of generation %" PRIu64 " follows "
				  "its end", sf_walrec_type_name(type), e.generation_id);
	if (type == SF_WALREC_END) {
		if (e.seq != UINT64_MAX && (rc = take_seq(g, e.epoch, e.seq, err)))
			return rc;
		g->ended = true;
		g->reason = e.reason;
		g->code = e.code;
		memcpy(g->msg, e.msg, sizeof(g->msg));
		return 0;
	}
	if ((rc = take_seq(g, e.epoch, e.seq, err)))
		return rc;
	if (type == SF_WALREC_LOGPROBS)
		return append_lp(g, &e) ? sf_err_set(err, SF_E_NOMEM, "no memory for logprobs") : 0;
	if (g->n_tokens + (uint64_t)e.n_tokens > SF_MAX_TOKENS)
		return sf_err_set(err, SF_E_LIMIT, "generation %" PRIu64 " would pass %u tokens",
				  e.generation_id, SF_MAX_TOKENS);
	if (grow_u32(&g->tokens, &g->cap_tokens, g->n_tokens + e.n_tokens))
		return sf_err_set(err, SF_E_NOMEM, "no memory for generation tokens");
	sf_walrec_tokens(e.tokens, e.n_tokens, g->tokens + g->n_tokens);
	g->n_tokens += e.n_tokens;
	return 0;
}

static int apply_snap(struct sf_wal_state *st, const uint8_t *p, uint32_t len, struct sf_err *err)
{
	struct sf_walrec_gen_snap r;
	int rc = sf_walrec_get_gen_snap(p, len, &r, err);
	struct sf_wal_gen *g = rc ? NULL : need_gen(st, r.session_id, r.generation_id,
						   "generation summary", err);
	if (!g)
		return rc ? rc : SF_E_RANGE;
	if (grow_u32(&g->tokens, &g->cap_tokens, r.n_tokens ? r.n_tokens : 1))
		return sf_err_set(err, SF_E_NOMEM, "no memory for generation tokens");
	sf_walrec_tokens(r.tokens, r.n_tokens, g->tokens);
	g->n_tokens = r.n_tokens;
	g->lp_len = g->n_lp = 0;
	if (r.lp_len) {
		uint32_t n_lp = 0;
		(void)sf_walrec_lp_blob_check(r.lp, r.lp_len, &n_lp, NULL); /* checked in get */
		uint8_t *p2 = malloc(r.lp_len);
		if (!p2)
			return sf_err_set(err, SF_E_NOMEM, "no memory for logprobs");
		memcpy(p2, r.lp, r.lp_len);
		free(g->lp);
		g->lp = p2;
		g->lp_len = g->lp_cap = r.lp_len;
		g->n_lp = n_lp;
	}
	g->resumed = r.resumed;
	g->epoch = r.epoch;
	g->next_seq = r.next_seq;
	return 0;
}

static int apply_items(struct sf_wal_state *st, const uint8_t *p, uint32_t len,
		       struct sf_err *err)
{
	struct sf_walrec_items r;
	int rc = sf_walrec_get_items(p, len, &r, err);
	struct sf_wal_session *s = rc ? NULL : need_session(st, r.session_id, "items", err);
	if (!s)
		return rc ? rc : SF_E_RANGE;
	if (sf_wal_turns_add(&s->turns, r.request_id, r.items, r.items_len) < 0)
		return sf_err_set(err, SF_E_NOMEM, "no memory for session %" PRIu64 "'s items",
				  r.session_id);
	return 0; /* past the bounds: the turns are over, as the head's were */
}

int sf_wal_state_apply(struct sf_wal_state *st, uint8_t type, const uint8_t *p, uint32_t len,
		       struct sf_err *err)
{
	switch (type) {
	case SF_WALREC_HEAD: {
		struct sf_walrec_head h;
		int rc = sf_walrec_get_head(p, len, &h, err);
		if (!rc && h.next_session_id > st->next_session)
			st->next_session = h.next_session_id;
		return rc;
	}
	case SF_WALREC_SESSION:
	case SF_WALREC_SESSION_V1:
	case SF_WALREC_SESSION_V2:
	case SF_WALREC_SESSION_V3:
		return apply_session(st, type, p, len, err);
	case SF_WALREC_CONTENT:
		return apply_content(st, p, len, err);
	case SF_WALREC_PLACED:
		return apply_placed(st, p, len, err);
	case SF_WALREC_GEN:
		return apply_gen(st, p, len, err);
	case SF_WALREC_TOKENS:
	case SF_WALREC_LOGPROBS:
	case SF_WALREC_END:
		return apply_event(st, type, p, len, err);
	case SF_WALREC_GEN_SNAP:
		return apply_snap(st, p, len, err);
	case SF_WALREC_ITEMS:
		return apply_items(st, p, len, err);
	case SF_WALREC_CLOSE: {
		uint64_t sid;
		int rc = sf_walrec_get_close(p, len, &sid, err);
		struct sf_wal_session *s = rc ? NULL : sf_wal_state_find(st, sid);
		if (s)
			unlink_session(st, s);
		return rc; /* closing one already gone changes nothing */
	}
	default:
		return sf_err_set(err, SF_E_UNKNOWN_TYPE, "record type %u is not one the head writes",
				  type);
	}
}

void sf_wal_gen_logprobs(const struct sf_wal_gen *g, uint32_t from,
			 void (*fn)(void *arg, const uint8_t *lp, uint32_t n, uint32_t skip),
			 void *arg)
{
	uint32_t at = 0;
	for (size_t off = 0; off + 8 <= g->lp_len;) {
		const uint8_t *q = g->lp + off;
		uint32_t hdr[2] = { (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
				    (uint32_t)q[3] << 24,
				    (uint32_t)q[4] | (uint32_t)q[5] << 8 | (uint32_t)q[6] << 16 |
				    (uint32_t)q[7] << 24 };
		if (at + hdr[0] > from)
			fn(arg, g->lp + off + 8, hdr[0], from > at ? from - at : 0);
		at += hdr[0];
		off += 8 + hdr[1];
	}
}

/* ---- snapshot ---- */

static int emit_buf(sf_wal_emit_fn emit, void *arg, uint8_t type, int rc, struct sf_buf *b)
{
	return rc ? rc : emit(arg, type, sf_buf_head(b), (uint32_t)sf_buf_used(b));
}

static int snap_gen(const struct sf_wal_session *s, const struct sf_wal_gen *g,
		    struct sf_buf *b, sf_wal_emit_fn emit, void *arg)
{
	int rc = emit_buf(emit, arg, SF_WALREC_GEN, sf_walrec_put_gen(b, &g->rec), b);
	struct sf_walrec_gen_snap sn = { .session_id = s->rec.session_id,
					 .generation_id = g->rec.generation_id, .epoch = g->epoch,
					 .next_seq = g->next_seq, .resumed = g->resumed,
					 .n_tokens = g->n_tokens, .lp = g->lp,
					 .lp_len = (uint32_t)g->lp_len };
	if (!rc)
		rc = emit_buf(emit, arg, SF_WALREC_GEN_SNAP,
			      sf_walrec_put_gen_snap(b, &sn, g->tokens), b);
	if (!rc && g->ended)
		rc = emit_buf(emit, arg, SF_WALREC_END,
			      sf_walrec_put_end(b, s->rec.session_id, g->rec.generation_id, g->epoch,
						UINT64_MAX, g->reason, g->code, g->msg), b);
	return rc;
}

/* Each turn kept as its ITEMS record, then an empty one when the turns are over. */
static int snap_turns(const struct sf_wal_session *s, struct sf_buf *b, sf_wal_emit_fn emit,
		      void *arg)
{
	int rc = 0;
	for (uint32_t i = 0; !rc && i < s->turns.n + s->turns.over; i++) {
		struct sf_walrec_items it = { .session_id = s->rec.session_id };
		if (i < s->turns.n) {
			memcpy(it.request_id, s->turns.v[i].id, sizeof(it.request_id));
			it.items = (const uint8_t *)s->turns.v[i].items;
			it.items_len = s->turns.v[i].len;
		}
		rc = emit_buf(emit, arg, SF_WALREC_ITEMS, sf_walrec_put_items(b, &it), b);
	}
	return rc;
}

int sf_wal_state_snapshot(const struct sf_wal_state *st, struct sf_buf *b, sf_wal_emit_fn emit,
			  void *arg)
{
	struct sf_walrec_head h = { .next_session_id = st->next_session };
	int rc = emit_buf(emit, arg, SF_WALREC_HEAD, sf_walrec_put_head(b, &h), b);
	for (const struct sf_wal_session *s = st->first; s && !rc; s = s->next) {
		rc = emit_buf(emit, arg, SF_WALREC_SESSION, sf_walrec_put_session(b, &s->rec), b);
		/* The content as two records where its last one kept some: a snapshot keeps
		 * where the turn in flight began (turn_base) as the log did. */
		if (!rc && s->turn_base)
			rc = emit_buf(emit, arg, SF_WALREC_CONTENT,
				      sf_walrec_put_content(b, s->rec.session_id, 0, s->content,
							    s->turn_base), b);
		if (!rc && (s->n_content > s->turn_base || s->turn_base))
			rc = emit_buf(emit, arg, SF_WALREC_CONTENT,
				      sf_walrec_put_content(b, s->rec.session_id, s->turn_base,
							    s->content + s->turn_base,
							    s->n_content - s->turn_base), b);
		if (!rc && s->epoch) {
			struct sf_walrec_placed pl = { .session_id = s->rec.session_id,
						       .epoch = s->epoch };
			memcpy(pl.node, s->node, sizeof(pl.node));
			rc = emit_buf(emit, arg, SF_WALREC_PLACED, sf_walrec_put_placed(b, &pl), b);
		}
		for (uint32_t i = 0; !rc && i < s->n_gens; i++)
			rc = snap_gen(s, s->gens[i], b, emit, arg);
		if (!rc)
			rc = snap_turns(s, b, emit, arg);
	}
	return rc;
}
