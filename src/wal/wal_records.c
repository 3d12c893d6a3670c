/* The head log's records: little-endian fixed fields, strings as u16 length + bytes, token
 * arrays as u32 count + u32 each, a request body and a grammar as u32 length + bytes. */
#include "wal/wal_records.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing ---- */

struct put {
	struct sf_buf *b;
	int rc;
};

static void put_raw(struct put *w, const void *p, size_t n)
{
	if (!w->rc && n)
		w->rc = sf_buf_append(w->b, p, n);
}

static void put_u8(struct put *w, uint8_t v) { put_raw(w, &v, 1); }

static void put_u32(struct put *w, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
	put_raw(w, b, 4);
}

static void put_u64(struct put *w, uint64_t v)
{
	put_u32(w, (uint32_t)v);
	put_u32(w, (uint32_t)(v >> 32));
}

static void put_f32(struct put *w, float f)
{
	uint32_t v;
	memcpy(&v, &f, 4);
	put_u32(w, v);
}

static void put_str(struct put *w, const char *s)
{
	size_t n = s ? strnlen(s, SF_WALREC_MAX_NAME + 1) : 0;
	if (n > SF_WALREC_MAX_NAME) {
		if (!w->rc)
			w->rc = SF_E_LIMIT;
		return;
	}
	uint8_t b[2] = { (uint8_t)n, (uint8_t)(n >> 8) };
	put_raw(w, b, 2);
	put_raw(w, s, n);
}

static void put_tokens(struct put *w, const uint32_t *t, uint32_t n)
{
	put_u32(w, n);
	uint8_t *p = w->rc ? NULL : sf_buf_reserve(w->b, (size_t)n * 4);
	if (!p) {
		if (!w->rc && n)
			w->rc = SF_E_LIMIT;
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t v = t[i];
		p[4 * i] = (uint8_t)v;
		p[4 * i + 1] = (uint8_t)(v >> 8);
		p[4 * i + 2] = (uint8_t)(v >> 16);
		p[4 * i + 3] = (uint8_t)(v >> 24);
	}
	w->b->len += (size_t)n * 4;
}

static struct put begin(struct sf_buf *out)
{
	sf_buf_clear(out);
	return (struct put){ .b = out };
}

static void put_event_head(struct put *w, uint64_t sid, uint64_t gid, uint64_t epoch, uint64_t seq)
{
	put_u64(w, sid);
	put_u64(w, gid);
	put_u64(w, epoch);
	put_u64(w, seq);
}

int sf_walrec_put_head(struct sf_buf *out, const struct sf_walrec_head *r)
{
	struct put w = begin(out);
	put_u64(&w, r->next_session_id);
	put_u64(&w, r->wall_ms);
	return w.rc;
}

int sf_walrec_put_session(struct sf_buf *out, const struct sf_walrec_session *r)
{
	struct put w = begin(out);
	put_u64(&w, r->session_id);
	put_str(&w, r->name);
	put_str(&w, r->model);
	put_str(&w, r->codec);
	put_u8(&w, r->qos);
	put_f32(&w, r->sampling.temperature);
	put_f32(&w, r->sampling.top_p);
	put_u32(&w, r->sampling.top_k);
	put_u64(&w, r->sampling.seed);
	put_u32(&w, r->lease_ms);
	put_u64(&w, r->created_s);
	/* The rest of the sampling: what an SF_WALREC_SESSION_V1 lacks. */
	put_f32(&w, r->sampling.min_p);
	put_f32(&w, r->sampling.presence_penalty);
	put_f32(&w, r->sampling.frequency_penalty);
	put_f32(&w, r->sampling.repetition_penalty);
	put_u32(&w, r->sampling.repeat_last_n);
	if (r->sampling.n_logit_bias > SF_MAX_LOGIT_BIAS && !w.rc)
		w.rc = SF_E_LIMIT;
	put_u32(&w, r->sampling.n_logit_bias);
	for (uint32_t i = 0; i < r->sampling.n_logit_bias && !w.rc; i++) {
		put_u32(&w, r->sampling.logit_bias[i].token);
		put_f32(&w, r->sampling.logit_bias[i].bias);
	}
	put_raw(&w, r->owner, sizeof(r->owner));
	/* Protocol 6's fields: what an SF_WALREC_SESSION_V3 lacks. */
	const char *gr = r->sampling.grammar;
	uint32_t gl = gr ? r->sampling.grammar_len : 0;
	if (!w.rc && (gl > SF_MAX_GRAMMAR || (gl && memchr(gr, 0, gl))))
		w.rc = gl > SF_MAX_GRAMMAR ? SF_E_LIMIT : SF_E_TEXT;
	put_u8(&w, r->sampling.ignore_eos);
	put_u32(&w, r->sampling.min_tokens);
	put_u64(&w, r->grammar_digest);
	put_u32(&w, gl);
	put_raw(&w, gr, gl);
	return w.rc;
}

int sf_walrec_put_content(struct sf_buf *out, uint64_t sid, uint32_t keep, const uint32_t *t,
			  uint32_t n)
{
	struct put w = begin(out);
	put_u64(&w, sid);
	put_u32(&w, keep);
	put_tokens(&w, t, n);
	return w.rc;
}

int sf_walrec_put_placed(struct sf_buf *out, const struct sf_walrec_placed *r)
{
	struct put w = begin(out);
	put_u64(&w, r->session_id);
	put_u64(&w, r->epoch);
	put_str(&w, r->node);
	return w.rc;
}

int sf_walrec_put_gen(struct sf_buf *out, const struct sf_walrec_gen *r)
{
	if (r->body_len > SF_WALREC_MAX_BODY || strlen(r->request_id) > SF_WALREC_MAX_ID)
		return SF_E_LIMIT;
	struct put w = begin(out);
	put_u64(&w, r->session_id);
	put_u64(&w, r->generation_id);
	put_u32(&w, r->max_new);
	put_u32(&w, r->max_wall_ms);
	put_u8(&w, r->logprobs);
	put_u8(&w, r->top_logprobs);
	put_u8(&w, r->kind);
	put_u32(&w, r->index);
	put_u32(&w, r->n_prompt);
	put_u64(&w, r->created_s);
	put_u64(&w, r->out_seed);
	put_str(&w, r->request_id);
	put_u32(&w, r->body_len);
	put_raw(&w, r->body, r->body_len);
	return w.rc;
}

int sf_walrec_put_items(struct sf_buf *out, const struct sf_walrec_items *r)
{
	if (r->items_len > SF_WALREC_MAX_ITEMS || strlen(r->request_id) > SF_WALREC_MAX_ID)
		return SF_E_LIMIT;
	struct put w = begin(out);
	put_u64(&w, r->session_id);
	put_str(&w, r->request_id);
	put_u32(&w, r->items_len);
	put_raw(&w, r->items, r->items_len);
	return w.rc;
}

int sf_walrec_put_tokens(struct sf_buf *out, uint64_t sid, uint64_t gid, uint64_t epoch,
			 uint64_t seq, const uint32_t *tokens, uint32_t n)
{
	struct put w = begin(out);
	put_event_head(&w, sid, gid, epoch, seq);
	put_tokens(&w, tokens, n);
	return w.rc;
}

int sf_walrec_put_logprobs(struct sf_buf *out, uint64_t sid, uint64_t gid, uint64_t epoch,
			   uint64_t seq, const struct sf_logprob *v, uint32_t n)
{
	struct put w = begin(out);
	put_event_head(&w, sid, gid, epoch, seq);
	put_u32(&w, n);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = v[i].n_top <= SF_MAX_TOP_LOGPROBS ? v[i].n_top : SF_MAX_TOP_LOGPROBS;
		put_u32(&w, v[i].token);
		put_f32(&w, v[i].logprob);
		put_u8(&w, (uint8_t)k);
		for (uint32_t j = 0; j < k; j++) {
			put_u32(&w, v[i].top[j].token);
			put_f32(&w, v[i].top[j].logprob);
		}
	}
	return w.rc;
}

int sf_walrec_put_end(struct sf_buf *out, uint64_t sid, uint64_t gid, uint64_t epoch, uint64_t seq,
		      uint32_t reason, int32_t code, const char *msg)
{
	char m[SF_WALREC_MAX_MSG + 1];
	snprintf(m, sizeof(m), "%s", msg ? msg : "");
	struct put w = begin(out);
	put_event_head(&w, sid, gid, epoch, seq);
	put_u32(&w, reason);
	put_u32(&w, (uint32_t)code);
	put_str(&w, m);
	return w.rc;
}

int sf_walrec_put_close(struct sf_buf *out, uint64_t sid)
{
	struct put w = begin(out);
	put_u64(&w, sid);
	return w.rc;
}

int sf_walrec_put_gen_snap(struct sf_buf *out, const struct sf_walrec_gen_snap *r,
			   const uint32_t *tokens)
{
	struct put w = begin(out);
	put_event_head(&w, r->session_id, r->generation_id, r->epoch, r->next_seq);
	put_u32(&w, r->resumed);
	put_tokens(&w, tokens, r->n_tokens);
	put_u32(&w, r->lp_len);
	put_raw(&w, r->lp, r->lp_len);
	return w.rc;
}

int sf_walrec_lp_blob_add(uint8_t **blob, size_t *len, size_t *cap, const uint8_t *lp,
			  uint32_t n, uint32_t lp_len)
{
	size_t need = *len + 8 + lp_len;
	if (need > *cap) {
		size_t c = *cap ? *cap : 1024;
		while (c < need)
			c *= 2;
		uint8_t *p = realloc(*blob, c);
		if (!p)
			return SF_E_NOMEM;
		*blob = p;
		*cap = c;
	}
	uint8_t *h = *blob + *len;
	for (int i = 0; i < 4; i++) {
		h[i] = (uint8_t)(n >> (8 * i));
		h[4 + i] = (uint8_t)(lp_len >> (8 * i));
	}
	memcpy(h + 8, lp, lp_len);
	*len = need;
	return 0;
}

/* ---- reading ---- */

struct get {
	const uint8_t *p;
	size_t len, at;
	const char *what; /* the record kind, for messages */
	struct sf_err *err;
	int rc;
};

static bool need(struct get *g, size_t n, const char *field)
{
	if (g->rc)
		return false;
	if (g->len - g->at < n) {
		g->rc = sf_err_set(g->err, SF_E_TRUNCATED, "%s record ends inside its %s", g->what,
				   field);
		return false;
	}
	return true;
}

static uint8_t get_u8(struct get *g, const char *field)
{
	return need(g, 1, field) ? g->p[g->at++] : 0;
}

static uint32_t get_u32(struct get *g, const char *field)
{
	if (!need(g, 4, field))
		return 0;
	const uint8_t *b = g->p + g->at;
	g->at += 4;
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t get_u64(struct get *g, const char *field)
{
	uint64_t lo = get_u32(g, field);
	return lo | (uint64_t)get_u32(g, field) << 32;
}

static float get_f32(struct get *g, const char *field)
{
	uint32_t v = get_u32(g, field);
	float f;
	memcpy(&f, &v, 4);
	return f;
}

static void get_str(struct get *g, char *out, size_t cap, const char *field)
{
	out[0] = 0;
	if (!need(g, 2, field))
		return;
	size_t n = (size_t)g->p[g->at] | (size_t)g->p[g->at + 1] << 8;
	g->at += 2;
	if (n >= cap) {
		g->rc = sf_err_set(g->err, SF_E_LIMIT, "%s record: its %s holds %zu bytes, past %zu",
				   g->what, field, n, cap - 1);
		return;
	}
	if (!need(g, n, field))
		return;
	if (memchr(g->p + g->at, 0, n)) {
		g->rc = sf_err_set(g->err, SF_E_TEXT, "%s record: its %s holds a NUL byte", g->what,
				   field);
		return;
	}
	memcpy(out, g->p + g->at, n);
	out[n] = 0;
	g->at += n;
}

static const uint8_t *get_tokens(struct get *g, uint32_t *n, const char *field)
{
	*n = get_u32(g, field);
	if (g->rc)
		return NULL;
	if (*n > SF_MAX_TOKENS) {
		g->rc = sf_err_set(g->err, SF_E_LIMIT, "%s record: %u %s, past %u", g->what, *n,
				   field, SF_MAX_TOKENS);
		return NULL;
	}
	if (!need(g, (size_t)*n * 4, field))
		return NULL;
	const uint8_t *p = g->p + g->at;
	g->at += (size_t)*n * 4;
	return p;
}

static struct get start(const uint8_t *p, size_t len, const char *what, struct sf_err *err)
{
	return (struct get){ .p = p, .len = len, .what = what, .err = err };
}

static int end(struct get *g)
{
	if (!g->rc && g->at != g->len)
		g->rc = sf_err_set(g->err, SF_E_TRAILING, "%s record: %zu bytes after its last field",
				   g->what, g->len - g->at);
	return g->rc;
}

int sf_walrec_get_head(const uint8_t *p, size_t len, struct sf_walrec_head *r, struct sf_err *err)
{
	struct get g = start(p, len, "head", err);
	r->next_session_id = get_u64(&g, "next session id");
	r->wall_ms = get_u64(&g, "clock");
	return end(&g);
}

/* A session record's protocol 6 sampling fields, and the digest of its structured output. */
static void get_session_v6(struct get *g, struct sf_walrec_session *r)
{
	uint8_t ignore_eos = get_u8(g, "ignore_eos");
	r->sampling.ignore_eos = ignore_eos != 0;
	r->sampling.min_tokens = get_u32(g, "min_tokens");
	r->grammar_digest = get_u64(g, "grammar digest");
	uint32_t n = get_u32(g, "grammar length");
	if (!g->rc && ignore_eos > 1)
		g->rc = sf_err_set(g->err, SF_E_RANGE, "session record: ignore_eos is %u, not 0 or 1",
				   ignore_eos);
	if (!g->rc && n > SF_MAX_GRAMMAR)
		g->rc = sf_err_set(g->err, SF_E_LIMIT, "session record: a grammar of %u bytes, past "
				   "%u", n, SF_MAX_GRAMMAR);
	if (!need(g, n, "grammar"))
		return;
	if (memchr(g->p + g->at, 0, n)) {
		g->rc = sf_err_set(g->err, SF_E_TEXT, "session record: its grammar holds a NUL byte");
		return;
	}
	r->grammar = n ? (const char *)(g->p + g->at) : NULL;
	r->grammar_len = n;
	g->at += n;
}

int sf_walrec_get_session(uint8_t type, const uint8_t *p, size_t len,
			  struct sf_walrec_session *r, struct sf_err *err)
{
	struct get g = start(p, len, "session", err);
	memset(r, 0, sizeof(*r));
	r->session_id = get_u64(&g, "session id");
	get_str(&g, r->name, sizeof(r->name), "name");
	get_str(&g, r->model, sizeof(r->model), "model");
	get_str(&g, r->codec, sizeof(r->codec), "codec");
	r->qos = get_u8(&g, "qos");
	r->sampling.temperature = get_f32(&g, "temperature");
	r->sampling.top_p = get_f32(&g, "top_p");
	r->sampling.top_k = get_u32(&g, "top_k");
	r->sampling.seed = get_u64(&g, "seed");
	r->lease_ms = get_u32(&g, "lease");
	r->created_s = get_u64(&g, "creation time");
	if (type != SF_WALREC_SESSION_V1) {
		r->sampling.min_p = get_f32(&g, "min_p");
		r->sampling.presence_penalty = get_f32(&g, "presence_penalty");
		r->sampling.frequency_penalty = get_f32(&g, "frequency_penalty");
		r->sampling.repetition_penalty = get_f32(&g, "repetition_penalty");
		r->sampling.repeat_last_n = get_u32(&g, "repeat_last_n");
		r->n_bias = get_u32(&g, "logit_bias count");
		if (!g.rc && r->n_bias > SF_MAX_LOGIT_BIAS)
			g.rc = sf_err_set(err, SF_E_LIMIT, "session record: %u logit_bias pairs, past "
					  "%u", r->n_bias, SF_MAX_LOGIT_BIAS);
		if (need(&g, (size_t)r->n_bias * 8, "logit_bias")) {
			r->bias = g.p + g.at;
			g.at += (size_t)r->n_bias * 8;
		}
		if (g.rc)
			r->n_bias = 0;
	}
	if ((type == SF_WALREC_SESSION || type == SF_WALREC_SESSION_V3) &&
	    need(&g, sizeof(r->owner), "owner")) {
		memcpy(r->owner, g.p + g.at, sizeof(r->owner));
		g.at += sizeof(r->owner);
	}
	/* Older records had none of these: ignore_eos off, min_tokens 0, no grammar (memset). */
	if (type == SF_WALREC_SESSION)
		get_session_v6(&g, r);
	if (!g.rc && r->qos > SF_MAX_QOS)
		g.rc = sf_err_set(err, SF_E_RANGE, "session record: qos %u is past %u", r->qos,
				  SF_MAX_QOS);
	return end(&g);
}

bool sf_walrec_owner_none(const uint8_t owner[static SF_WALREC_OWNER_LEN])
{
	uint8_t any = 0;
	for (size_t i = 0; i < SF_WALREC_OWNER_LEN; i++)
		any |= owner[i];
	return !any;
}

void sf_walrec_bias(const uint8_t *p, uint32_t n, struct sf_logit_bias *out)
{
	for (uint32_t i = 0; i < n; i++, p += 8) {
		uint32_t b = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
			     (uint32_t)p[7] << 24;
		out[i].token = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			       (uint32_t)p[3] << 24;
		memcpy(&out[i].bias, &b, 4);
	}
}

int sf_walrec_get_content(const uint8_t *p, size_t len, struct sf_walrec_content *r,
			  struct sf_err *err)
{
	struct get g = start(p, len, "content", err);
	r->session_id = get_u64(&g, "session id");
	r->keep = get_u32(&g, "kept count");
	r->tokens = get_tokens(&g, &r->n_tokens, "tokens");
	return end(&g);
}

int sf_walrec_get_placed(const uint8_t *p, size_t len, struct sf_walrec_placed *r,
			 struct sf_err *err)
{
	struct get g = start(p, len, "placed", err);
	r->session_id = get_u64(&g, "session id");
	r->epoch = get_u64(&g, "epoch");
	get_str(&g, r->node, sizeof(r->node), "node");
	return end(&g);
}

int sf_walrec_get_gen(const uint8_t *p, size_t len, struct sf_walrec_gen *r, struct sf_err *err)
{
	struct get g = start(p, len, "generation", err);
	memset(r, 0, sizeof(*r));
	r->session_id = get_u64(&g, "session id");
	r->generation_id = get_u64(&g, "generation id");
	r->max_new = get_u32(&g, "token budget");
	r->max_wall_ms = get_u32(&g, "wall budget");
	r->logprobs = get_u8(&g, "logprobs flag") != 0;
	r->top_logprobs = get_u8(&g, "top_logprobs");
	r->kind = get_u8(&g, "kind");
	r->index = get_u32(&g, "choice index");
	r->n_prompt = get_u32(&g, "prompt count");
	r->created_s = get_u64(&g, "creation time");
	r->out_seed = get_u64(&g, "output seed");
	get_str(&g, r->request_id, sizeof(r->request_id), "request id");
	r->body_len = get_u32(&g, "body length");
	if (!g.rc && r->body_len > SF_WALREC_MAX_BODY)
		g.rc = sf_err_set(err, SF_E_LIMIT, "generation record: a body of %u bytes, past %u",
				  r->body_len, SF_WALREC_MAX_BODY);
	if (need(&g, r->body_len, "body")) {
		r->body = g.p + g.at;
		g.at += r->body_len;
	}
	if (!g.rc && r->top_logprobs > SF_MAX_TOP_LOGPROBS)
		g.rc = sf_err_set(err, SF_E_RANGE, "generation record: top_logprobs %u is past %u",
				  r->top_logprobs, SF_MAX_TOP_LOGPROBS);
	return end(&g);
}

/* Walks a LOGPROBS record's entries to check their lengths; out NULL: check only. */
static void walk_logprobs(struct get *g, uint32_t n, struct sf_logprob *out,
			  struct sf_top_logprob *tops)
{
	for (uint32_t i = 0; i < n && !g->rc; i++) {
		uint32_t token = get_u32(g, "logprob token");
		float lp = get_f32(g, "logprob");
		uint8_t k = get_u8(g, "alternative count");
		if (!g->rc && k > SF_MAX_TOP_LOGPROBS) {
			g->rc = sf_err_set(g->err, SF_E_LIMIT, "logprobs record: %u alternatives, "
					   "past %u", k, SF_MAX_TOP_LOGPROBS);
			return;
		}
		if (out)
			out[i] = (struct sf_logprob){ .token = token, .logprob = lp, .top = tops,
						      .n_top = k };
		for (uint32_t j = 0; j < k; j++) {
			uint32_t t = get_u32(g, "alternative token");
			float l = get_f32(g, "alternative logprob");
			if (tops)
				*tops++ = (struct sf_top_logprob){ .token = t, .logprob = l };
		}
	}
}

int sf_walrec_get_event(uint8_t type, const uint8_t *p, size_t len, struct sf_walrec_event *r,
			struct sf_err *err)
{
	struct get g = start(p, len, sf_walrec_type_name(type), err);
	memset(r, 0, sizeof(*r));
	r->session_id = get_u64(&g, "session id");
	r->generation_id = get_u64(&g, "generation id");
	r->epoch = get_u64(&g, "epoch");
	r->seq = get_u64(&g, "seq");
	switch (type) {
	case SF_WALREC_TOKENS:
		r->tokens = get_tokens(&g, &r->n_tokens, "tokens");
		break;
	case SF_WALREC_LOGPROBS:
		r->n_lp = get_u32(&g, "logprob count");
		if (!g.rc && r->n_lp > SF_MAX_EVENT_TOKENS)
			g.rc = sf_err_set(err, SF_E_LIMIT, "logprobs record: %u entries, past %u",
					  r->n_lp, SF_MAX_EVENT_TOKENS);
		r->lp = g.p + g.at;
		walk_logprobs(&g, r->n_lp, NULL, NULL);
		r->lp_len = (uint32_t)(g.p + g.at - r->lp);
		break;
	case SF_WALREC_END:
		r->reason = get_u32(&g, "reason");
		r->code = (int32_t)get_u32(&g, "error code");
		get_str(&g, r->msg, sizeof(r->msg), "message");
		break;
	default:
		return sf_err_set(err, SF_E_UNKNOWN_TYPE, "record type %u is not an event", type);
	}
	return end(&g);
}

int sf_walrec_get_close(const uint8_t *p, size_t len, uint64_t *sid, struct sf_err *err)
{
	struct get g = start(p, len, "close", err);
	*sid = get_u64(&g, "session id");
	return end(&g);
}

int sf_walrec_get_items(const uint8_t *p, size_t len, struct sf_walrec_items *r,
			struct sf_err *err)
{
	struct get g = start(p, len, "items", err);
	memset(r, 0, sizeof(*r));
	r->session_id = get_u64(&g, "session id");
	get_str(&g, r->request_id, sizeof(r->request_id), "request id");
	r->items_len = get_u32(&g, "items length");
	if (!g.rc && r->items_len > SF_WALREC_MAX_ITEMS)
		g.rc = sf_err_set(err, SF_E_LIMIT, "items record: %u bytes of items, past %u",
				  r->items_len, SF_WALREC_MAX_ITEMS);
	if (need(&g, r->items_len, "items")) {
		r->items = g.p + g.at;
		g.at += r->items_len;
	}
	return end(&g);
}

int sf_walrec_get_gen_snap(const uint8_t *p, size_t len, struct sf_walrec_gen_snap *r,
			   struct sf_err *err)
{
	struct get g = start(p, len, "generation summary", err);
	r->session_id = get_u64(&g, "session id");
	r->generation_id = get_u64(&g, "generation id");
	r->epoch = get_u64(&g, "epoch");
	r->next_seq = get_u64(&g, "next seq");
	r->resumed = get_u32(&g, "resumed count");
	r->tokens = get_tokens(&g, &r->n_tokens, "tokens");
	r->lp_len = get_u32(&g, "logprobs length");
	if (need(&g, r->lp_len, "logprobs")) {
		r->lp = g.p + g.at;
		g.at += r->lp_len;
		uint32_t n_lp;
		g.rc = sf_walrec_lp_blob_check(r->lp, r->lp_len, &n_lp, err);
	}
	if (!g.rc && r->resumed > r->n_tokens)
		g.rc = sf_err_set(err, SF_E_RANGE, "generation summary record: %u resumed of %u "
				  "tokens", r->resumed, r->n_tokens);
	return end(&g);
}

int sf_walrec_lp_blob_check(const uint8_t *blob, uint32_t len, uint32_t *n_lp,
			    struct sf_err *err)
{
	struct get g = start(blob, len, "logprob blob", err);
	*n_lp = 0;
	while (!g.rc && g.at < g.len) {
		uint32_t n = get_u32(&g, "group count");
		uint32_t bytes = get_u32(&g, "group length");
		if (!need(&g, bytes, "group"))
			break;
		struct get e = start(g.p + g.at, bytes, "logprob blob", err);
		walk_logprobs(&e, n, NULL, NULL);
		if ((g.rc = end(&e)))
			break;
		g.at += bytes;
		*n_lp += n;
	}
	return g.rc;
}

void sf_walrec_tokens(const uint8_t *raw, uint32_t n, uint32_t *out)
{
	for (uint32_t i = 0; i < n; i++, raw += 4)
		out[i] = (uint32_t)raw[0] | (uint32_t)raw[1] << 8 | (uint32_t)raw[2] << 16 |
			 (uint32_t)raw[3] << 24;
}

void sf_walrec_logprobs(const uint8_t *lp, uint32_t n_lp, struct sf_logprob *out,
			struct sf_top_logprob *tops)
{
	struct get g = start(lp, SIZE_MAX, "logprobs", NULL);
	walk_logprobs(&g, n_lp, out, tops);
}

const char *sf_walrec_type_name(uint8_t type)
{
	switch (type) {
	case SF_WALREC_HEAD: return "head";
	case SF_WALREC_SESSION: return "session";
	case SF_WALREC_SESSION_V1: return "session-v1";
	case SF_WALREC_SESSION_V2: return "session-v2";
	case SF_WALREC_SESSION_V3: return "session-v3";
	case SF_WALREC_CONTENT: return "content";
	case SF_WALREC_PLACED: return "placed";
	case SF_WALREC_GEN: return "generation";
	case SF_WALREC_TOKENS: return "tokens";
	case SF_WALREC_LOGPROBS: return "logprobs";
	case SF_WALREC_END: return "end";
	case SF_WALREC_CLOSE: return "close";
	case SF_WALREC_GEN_SNAP: return "generation-summary";
	case SF_WALREC_ITEMS: return "items";
	case 0xf0: return "checkpoint-begin";
	case 0xf1: return "checkpoint-end";
	default: return "unknown";
	}
}

void sf_walrec_describe(uint8_t type, const uint8_t *p, size_t len, char *out, size_t cap)
{
	struct sf_err err;
	int rc = 0;
	union {
		struct sf_walrec_head h;
		struct sf_walrec_session s;
		struct sf_walrec_content c;
		struct sf_walrec_placed pl;
		struct sf_walrec_gen g;
		struct sf_walrec_event e;
		struct sf_walrec_gen_snap gs;
		struct sf_walrec_items it;
		uint64_t sid;
	} u;
	switch (type) {
	case SF_WALREC_HEAD:
		if (!(rc = sf_walrec_get_head(p, len, &u.h, &err)))
			snprintf(out, cap, "next_session=%" PRIu64 " clock_ms=%" PRIu64,
				 u.h.next_session_id, u.h.wall_ms);
		break;
	case SF_WALREC_SESSION:
	case SF_WALREC_SESSION_V1:
	case SF_WALREC_SESSION_V2:
	case SF_WALREC_SESSION_V3:
		if (!(rc = sf_walrec_get_session(type, p, len, &u.s, &err)))
			snprintf(out, cap, "session=%" PRIu64 " name=\"%s\" model=\"%s\" qos=%u "
				 "seed=%" PRIu64 " lease_ms=%u temperature=%g top_p=%g top_k=%u "
				 "min_p=%g presence=%g frequency=%g repetition=%g last_n=%u "
				 "logit_bias=%u", u.s.session_id, u.s.name, u.s.model, u.s.qos,
				 u.s.sampling.seed, u.s.lease_ms, (double)u.s.sampling.temperature,
				 (double)u.s.sampling.top_p, u.s.sampling.top_k,
				 (double)u.s.sampling.min_p, (double)u.s.sampling.presence_penalty,
				 (double)u.s.sampling.frequency_penalty,
				 (double)u.s.sampling.repetition_penalty, u.s.sampling.repeat_last_n,
				 u.s.n_bias);
		if (!rc && type == SF_WALREC_SESSION) {
			size_t at = strlen(out);
			snprintf(out + at, cap - at, " ignore_eos=%u min_tokens=%u grammar=%u",
				 u.s.sampling.ignore_eos, u.s.sampling.min_tokens, u.s.grammar_len);
			if (u.s.grammar_digest) {
				at = strlen(out);
				snprintf(out + at, cap - at, " format=%016" PRIx64, u.s.grammar_digest);
			}
		}
		if (!rc && !sf_walrec_owner_none(u.s.owner)) {
			size_t at = strlen(out);
			snprintf(out + at, cap - at, " owner=%02x%02x%02x%02x", u.s.owner[0],
				 u.s.owner[1], u.s.owner[2], u.s.owner[3]);
		}
		break;
	case SF_WALREC_CONTENT:
		if (!(rc = sf_walrec_get_content(p, len, &u.c, &err)))
			snprintf(out, cap, "session=%" PRIu64 " keep=%u append=%u", u.c.session_id,
				 u.c.keep, u.c.n_tokens);
		break;
	case SF_WALREC_PLACED:
		if (!(rc = sf_walrec_get_placed(p, len, &u.pl, &err)))
			snprintf(out, cap, "session=%" PRIu64 " node=%s epoch=%" PRIu64,
				 u.pl.session_id, u.pl.node, u.pl.epoch);
		break;
	case SF_WALREC_GEN:
		if (!(rc = sf_walrec_get_gen(p, len, &u.g, &err)))
			snprintf(out, cap, "session=%" PRIu64 " generation=%" PRIu64 " request=%s "
				 "max_new=%u prompt=%u body=%u bytes", u.g.session_id,
				 u.g.generation_id, u.g.request_id, u.g.max_new, u.g.n_prompt,
				 u.g.body_len);
		break;
	case SF_WALREC_TOKENS:
	case SF_WALREC_LOGPROBS:
	case SF_WALREC_END:
		if ((rc = sf_walrec_get_event(type, p, len, &u.e, &err)))
			break;
		if (type == SF_WALREC_END)
			snprintf(out, cap, "session=%" PRIu64 " generation=%" PRIu64 " reason=%u "
				 "code=%d%s%s", u.e.session_id, u.e.generation_id, u.e.reason,
				 u.e.code, *u.e.msg ? " msg=" : "", u.e.msg);
		else
			snprintf(out, cap, "session=%" PRIu64 " generation=%" PRIu64 " epoch=%" PRIu64
				 " seq=%" PRIu64 " %s=%u", u.e.session_id, u.e.generation_id,
				 u.e.epoch, u.e.seq, type == SF_WALREC_TOKENS ? "tokens" : "logprobs",
				 type == SF_WALREC_TOKENS ? u.e.n_tokens : u.e.n_lp);
		break;
	case SF_WALREC_CLOSE:
		if (!(rc = sf_walrec_get_close(p, len, &u.sid, &err)))
			snprintf(out, cap, "session=%" PRIu64, u.sid);
		break;
	case SF_WALREC_GEN_SNAP:
		if (!(rc = sf_walrec_get_gen_snap(p, len, &u.gs, &err)))
			snprintf(out, cap, "session=%" PRIu64 " generation=%" PRIu64 " epoch=%" PRIu64
				 " next_seq=%" PRIu64 " tokens=%u resumed=%u", u.gs.session_id,
				 u.gs.generation_id, u.gs.epoch, u.gs.next_seq, u.gs.n_tokens,
				 u.gs.resumed);
		break;
	case SF_WALREC_ITEMS:
		if (!(rc = sf_walrec_get_items(p, len, &u.it, &err)))
			snprintf(out, cap, "session=%" PRIu64 " response=%s items=%u bytes",
				 u.it.session_id, u.it.request_id, u.it.items_len);
		break;
	default:
		snprintf(out, cap, "%zu bytes", len);
		return;
	}
	if (rc)
		snprintf(out, cap, "undecodable: %s", err.msg);
}
