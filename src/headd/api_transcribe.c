/* POST /v1/audio/transcriptions, OpenAI's shape: a multipart/form-data body with the audio in
 * `file` and the `model`; the file goes into the head's blob cache, to a node serving the model
 * (sent on its link once per link, state_ops.h) and through the engine's "transcribe" state
 * operation, whose streamed segments become the answer: json {"text"}, text, verbose_json
 * (with segments), srt, vtt; or, with stream=true, server-sent events
 * transcript.text.delta (one per segment) and transcript.text.done. A client that goes away
 * takes its request with it (the node's later answer is dropped). */
#include "headd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>

#include "daemon/log.h"
#include "http/multipart.h"

#define TR_OP "transcribe"
#define TR_MAX_FIELD 4096 /* the text fields (model, prompt, ...) */

enum tr_format { TR_JSON = 0, TR_TEXT, TR_VERBOSE, TR_SRT, TR_VTT };

struct tr_seg {
	uint64_t start_ms, end_ms;
	char *text;
};

struct headd_tr {
	uint64_t ticket;          /* the state operation; 0 once it ended */
	uint8_t sha[32];
	enum tr_format fmt;
	bool stream;
	bool keep_segments;       /* verbose_json, srt, vtt */
	bool gone;                /* its client went away: freed at the next tick */
	char language[33];
	double temperature;
	struct tr_seg *segs;
	uint32_t n_segs, cap_segs;
	uint64_t end_ms;          /* the last segment's end: the audio's duration */
};

static const char *const fmt_names[] = { "json", "text", "verbose_json", "srt", "vtt" };

/* ---- set up and torn down with the API ---- */

static void tr_segment(void *arg, uint64_t ticket, const struct sf_segment *seg);
static void tr_done(void *arg, uint64_t ticket, int rc, const uint8_t *result, size_t len,
		    const char *msg);

/* A blob's chunks go as the node's link drains (state_ops.h): the link tells when it has
 * drained, and the state operations send more. */
static void tr_drained(struct sf_link_conn *lc, void *arg)
{
	struct headd *d = arg;
	if (!d->api.ops)
		return;
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++)
		if (d->fleet.nodes[i].lc == lc && d->fleet.nodes[i].open) {
			sf_state_ops_pump(d->api.ops, d->fleet.nodes[i].index, sf_loop_now(d->loop));
			return;
		}
}

/* What node's link holds unsent; asked only while a blob goes out there, so the drained hook
 * is set on the link (each new link gets it with its first blob). */
static size_t tr_unsent(void *arg, uint32_t node)
{
	struct headd *d = arg;
	for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
		struct headd_node *n = &d->fleet.nodes[i];
		if (n->index != node || !n->lc || !n->open)
			continue;
		sf_link_conn_on_drained(n->lc, tr_drained, d);
		return sf_link_conn_unsent(n->lc);
	}
	return 0; /* no link: the send fails and says so */
}

int headd_transcribe_init(struct headd *d)
{
	struct headd_api *a = &d->api;
	struct sf_err err;
	/* Room for a few of the largest bodies the API takes, and at least the default. */
	uint64_t bound = 4 * (uint64_t)d->opts->http_max_body;
	a->blobs = sf_blob_cache_new(bound > SF_BLOB_CACHE_DEFAULT_BYTES ? bound
					 : SF_BLOB_CACHE_DEFAULT_BYTES);
	struct sf_state_ops_config cfg = { .max_nodes = HEADD_NODE_SLOTS };
	struct sf_state_ops_io io = { .arg = d, .send = headd_tok_send, .segment = tr_segment,
				      .done = tr_done, .unsent = tr_unsent };
	if (!a->blobs || sf_state_ops_new(&a->ops, &cfg, &io, a->blobs, &err)) {
		sfd_err("%s", a->blobs ? err.msg : "no memory for the blob cache");
		return -1;
	}
	return 0;
}

void headd_transcribe_fini(struct headd *d)
{
	sf_state_ops_free(d->api.ops);
	sf_blob_cache_free(d->api.blobs);
	d->api.ops = NULL;
	d->api.blobs = NULL;
}

void headd_transcribe_free(struct headd_req *q)
{
	struct headd_tr *t = q->tr;
	if (!t)
		return;
	if (t->ticket && q->d->api.ops)
		sf_state_ops_forget(q->d->api.ops, t->ticket);
	for (uint32_t i = 0; i < t->n_segs; i++)
		free(t->segs[i].text);
	free(t->segs);
	free(t);
	q->tr = NULL;
}

/* Requests whose client went away: the operation is forgotten at once, and the request is
 * freed a tick later, once the sweep has let go of the closed connection (which still names
 * it as its request). */
void headd_transcribe_tick(struct headd *d)
{
	for (struct headd_req *q = d->api.reqs; q; q = q->next) {
		if (!q->tr || q->h || q->life.phase == HL_DONE)
			continue;
		if (q->tr->gone) {
			headd_life_on(&q->life, HE_ANSWERED);
			continue;
		}
		if (q->tr->ticket) {
			sf_state_ops_forget(d->api.ops, q->tr->ticket);
			q->tr->ticket = 0;
			d->api.m.client_gone++;
			sfd_info("%s: the client went away; transcription dropped", q->id);
		}
		q->tr->gone = true;
	}
}

/* ---- the answer ---- */

static void respond_raw(struct headd_http *h, int status, const char *type, const char *body,
			size_t len)
{
	headd_metrics_request(h->d, EP_TRANSCRIBE, status);
	sf_http_respond(h->http, status, type, body, len, NULL);
	headd_http_response_done(h);
}

static void sse_json(struct headd_http *h, json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!s)
		return;
	size_t n = strlen(s);
	char *p = malloc(n + 9);
	if (p) {
		memcpy(p, "data: ", 6);
		memcpy(p + 6, s, n);
		memcpy(p + 6 + n, "\n\n", 2);
		sf_http_stream_write(h->http, p, n + 8);
		free(p);
	}
	free(s);
}

/* Whether p[0..n) is UTF-8 as JSON strings need it (what jansson accepts). */
static bool utf8_ok(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t b = p[i];
		size_t k = b < 0x80 ? 0 : b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2
			 : b >= 0xf0 && b <= 0xf4 ? 3 : 4;
		if (k == 4 || n - i <= k)
			return false; /* not a lead byte, or cut short */
		uint8_t lo = 0x80, hi = 0xbf; /* the second byte's range, narrower for some leads */
		if (b == 0xe0)
			lo = 0xa0;
		else if (b == 0xed)
			hi = 0x9f;
		else if (b == 0xf0)
			lo = 0x90;
		else if (b == 0xf4)
			hi = 0x8f;
		for (size_t j = 1; j <= k; j++) {
			uint8_t c = p[i + j];
			if (c < (j == 1 ? lo : 0x80) || c > (j == 1 ? hi : 0xbf))
				return false;
		}
		i += k + 1;
	}
	return true;
}

/* One transcript.text.delta event written straight out, the text escaped by hand: a long
 * transcription streams hundreds of thousands of them, and building each as a jansson tree
 * and dumping it was two thirds of the head's time (perf), turns long enough under load to
 * hold up the links' heartbeats. false (nothing written): text that is not UTF-8, left to
 * jansson as before. */
static bool sse_delta(struct headd_http *h, const char *text, size_t len, bool space)
{
	static const char head[] = "data: {\"type\":\"transcript.text.delta\",\"delta\":\"";
	static const char tail[] = "\"}\n\n";
	if (!utf8_ok((const uint8_t *)text, len))
		return false;
	char small[512];
	size_t cap = sizeof(head) + 1 + 6 * len + sizeof(tail);
	char *p = cap <= sizeof(small) ? small : malloc(cap);
	if (!p)
		return true; /* no memory: the delta is lost, as jansson's would have been */
	size_t at = sizeof(head) - 1;
	memcpy(p, head, at);
	if (space)
		p[at++] = ' ';
	for (size_t i = 0; i < len; i++) {
		uint8_t c = (uint8_t)text[i];
		if (c == '"' || c == '\\') {
			p[at++] = '\\';
			p[at++] = (char)c;
		} else if (c < 0x20) {
			at += (size_t)snprintf(p + at, 7, "\\u%04x", c);
		} else {
			p[at++] = (char)c;
		}
	}
	memcpy(p + at, tail, sizeof(tail) - 1);
	at += sizeof(tail) - 1;
	sf_http_stream_write(h->http, p, at);
	if (p != small)
		free(p);
	return true;
}

static void stream_end(struct headd_http *h, int status)
{
	headd_metrics_request(h->d, EP_TRANSCRIBE, status);
	sf_http_stream_end(h->http);
	headd_http_response_done(h);
}

static struct headd_req *req_of(struct headd *d, uint64_t ticket)
{
	for (struct headd_req *q = d->api.reqs; q; q = q->next)
		if (q->tr && q->tr->ticket == ticket && q->life.phase == HL_TRANSCRIBING)
			return q;
	return NULL;
}

static void tr_segment(void *arg, uint64_t ticket, const struct sf_segment *seg)
{
	struct headd *d = arg;
	struct headd_req *q = req_of(d, ticket);
	if (!q || !q->h)
		return;
	struct headd_tr *t = q->tr;
	if (seg->end_ms > t->end_ms)
		t->end_ms = seg->end_ms;
	if (t->stream) {
		if (headd_http_unsent(q->h) > d->opts->stream_buffer) {
			d->api.m.streams_cut++;
			sfd_warn("%s: the client left %zu bytes unread (--stream-buffer %u); its stream "
				 "ends and the transcription is dropped", q->id, headd_http_unsent(q->h),
				 d->opts->stream_buffer);
			struct sf_api_error e;
			sf_api_fail(&e, 503, "server_error", "client_too_slow", NULL,
				    "the stream was ended: the client did not read it fast enough");
			char *s = sf_api_error_json(&e);
			json_t *o = s ? json_loads(s, 0, NULL) : NULL;
			free(s);
			sse_json(q->h, o);
			struct headd_http *h = q->h;
			q->h = NULL; /* the tick forgets the operation */
			headd_life_on(&q->life, HE_CLIENT_GONE);
			stream_end(h, 503);
			return;
		}
		/* Each delta carries the space that joins it to the one before. */
		if (sse_delta(q->h, seg->text, seg->text_len, seg->seq != 0))
			return;
		size_t n = seg->text_len + 1;
		char *delta = malloc(n + 1);
		if (!delta)
			return;
		size_t at = 0;
		if (seg->seq)
			delta[at++] = ' ';
		memcpy(delta + at, seg->text, seg->text_len);
		at += seg->text_len;
		sse_json(q->h, json_pack("{s:s, s:s%}", "type", "transcript.text.delta", "delta",
					 delta, at));
		free(delta);
		return;
	}
	if (!t->keep_segments)
		return;
	if (t->n_segs == t->cap_segs) {
		uint32_t cap = t->cap_segs ? t->cap_segs * 2 : 64;
		struct tr_seg *v = realloc(t->segs, cap * sizeof(*v));
		if (!v)
			return;
		t->segs = v;
		t->cap_segs = cap;
	}
	char *text = strndup(seg->text, seg->text_len);
	if (!text)
		return;
	t->segs[t->n_segs++] = (struct tr_seg){ seg->start_ms, seg->end_ms, text };
}

/* "00:01:02,345" (srt, sep ',') or "00:01:02.345" (vtt, sep '.'). */
static void stamp(char *out, size_t n, uint64_t ms, char sep)
{
	snprintf(out, n, "%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64 "%c%03" PRIu64, ms / 3600000,
		 ms / 60000 % 60, ms / 1000 % 60, sep, ms % 1000);
}

static char *subtitles(const struct headd_tr *t, size_t *len)
{
	size_t cap = 16;
	for (uint32_t i = 0; i < t->n_segs; i++)
		cap += strlen(t->segs[i].text) + 64;
	char *p = malloc(cap);
	if (!p)
		return NULL;
	size_t at = 0;
	if (t->fmt == TR_VTT)
		at += (size_t)snprintf(p, cap, "WEBVTT\n\n");
	char sep = t->fmt == TR_VTT ? '.' : ',';
	for (uint32_t i = 0; i < t->n_segs; i++) {
		char a[32], b[32];
		stamp(a, sizeof(a), t->segs[i].start_ms, sep);
		stamp(b, sizeof(b), t->segs[i].end_ms, sep);
		if (t->fmt == TR_SRT)
			at += (size_t)snprintf(p + at, cap - at, "%u\n", i + 1);
		at += (size_t)snprintf(p + at, cap - at, "%s --> %s\n%s\n\n", a, b, t->segs[i].text);
	}
	*len = at;
	return p;
}

static json_t *verbose(const struct headd_tr *t, const uint8_t *text, size_t len)
{
	json_t *segs = json_array();
	for (uint32_t i = 0; segs && i < t->n_segs; i++)
		json_array_append_new(segs, json_pack(
			"{s:i, s:i, s:f, s:f, s:s, s:[], s:f, s:f, s:f, s:f}", "id", (int)i, "seek", 0,
			"start", t->segs[i].start_ms / 1000.0, "end", t->segs[i].end_ms / 1000.0,
			"text", t->segs[i].text, "tokens", "temperature", t->temperature,
			"avg_logprob", 0.0, "compression_ratio", 0.0, "no_speech_prob", 0.0));
	return json_pack("{s:s, s:s, s:f, s:s%, s:o}", "task", "transcribe", "language",
			 t->language[0] ? t->language : "unknown", "duration", t->end_ms / 1000.0,
			 "text", (const char *)text, len, "segments", segs ? segs : json_array());
}

static void tr_done(void *arg, uint64_t ticket, int rc, const uint8_t *result, size_t len,
		    const char *msg)
{
	struct headd *d = arg;
	struct headd_req *q = req_of(d, ticket);
	if (!q)
		return;
	struct headd_tr *t = q->tr;
	t->ticket = 0;
	headd_life_on(&q->life, HE_ANSWERED);
	struct headd_http *h = q->h;
	if (!h)
		return;
	if (q->emb) { /* not a transcription: an embedding (api_embeddings.c) */
		headd_embeddings_answer(q, rc, result, len, msg);
		return;
	}
	if (rc) {
		sfd_info("%s: the transcription failed: %s", q->id, msg ? msg : "?");
		struct sf_api_error e;
		sf_api_fail(&e, 503, "service_unavailable", "transcription_failed", NULL,
			    "the transcription failed: %s", msg ? msg : "no node answered");
		if (t->stream) {
			char *s = sf_api_error_json(&e);
			sse_json(h, s ? json_loads(s, 0, NULL) : NULL);
			free(s);
			stream_end(h, 503);
		} else {
			headd_api_send_error(h, &e);
		}
		return;
	}
	if (!result)
		result = (const uint8_t *)"", len = 0;
	if (t->stream) {
		sse_json(h, json_pack("{s:s, s:s%}", "type", "transcript.text.done", "text",
				      (const char *)result, len));
		stream_end(h, 200);
		return;
	}
	char *body = NULL;
	size_t n = 0;
	switch (t->fmt) {
	case TR_TEXT:
		respond_raw(h, 200, "text/plain; charset=utf-8", (const char *)result, len);
		return;
	case TR_SRT:
	case TR_VTT:
		body = subtitles(t, &n);
		if (!body)
			break;
		respond_raw(h, 200, t->fmt == TR_VTT ? "text/vtt; charset=utf-8"
						     : "application/x-subrip; charset=utf-8", body, n);
		free(body);
		return;
	case TR_VERBOSE: {
		json_t *o = verbose(t, result, len);
		body = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		headd_api_send_json(h, 200, body);
		return;
	}
	default: {
		json_t *o = json_pack("{s:s%}", "text", (const char *)result, len);
		body = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		headd_api_send_json(h, 200, body);
		return;
	}
	}
	headd_api_send_json(h, 500, NULL); /* what json_dumps or subtitles could not allocate */
}

/* ---- the request ---- */

/* A text field's value as a NUL-terminated copy in buf; false when absent. */
static bool field(const struct sf_mp_part *parts, uint32_t n, const char *name, char *buf,
		  size_t cap, struct sf_api_error *e, bool *bad)
{
	const struct sf_mp_part *p = sf_mp_find(parts, n, name);
	if (!p)
		return false;
	if (p->len >= cap || memchr(p->data, 0, p->len)) {
		sf_api_bad(e, name, "%s must be text of at most %zu bytes", name, cap - 1);
		*bad = true;
		return false;
	}
	memcpy(buf, p->data, p->len);
	buf[p->len] = 0;
	return true;
}

static int parse_form(struct headd *d, const struct sf_http_request *r, struct headd_tr *t,
		      char *model, size_t model_cap, const struct sf_mp_part **file,
		      struct sf_mp_part *parts, uint32_t *np, struct sf_api_error *e)
{
	const char *boundary;
	size_t blen;
	struct sf_err err;
	if (sf_mp_boundary(sf_http_header(r, "content-type"), &boundary, &blen, &err) ||
	    sf_mp_parse(r->body, r->body_len, boundary, blen, parts, SF_MP_MAX_PARTS, np, &err))
		return sf_api_bad(e, NULL, "the body is not a multipart/form-data form: %s",
				  err.msg);
	bool bad = false;
	char buf[TR_MAX_FIELD];
	*file = sf_mp_find(parts, *np, "file");
	if (!*file)
		return sf_api_fail(e, 400, "invalid_request_error", "missing_required_parameter",
				   "file", "the form has no file part: send the audio as file "
				   "(curl -F file=@audio.wav)");
	if (!(*file)->len)
		return sf_api_fail(e, 400, "invalid_request_error", "invalid_value", "file",
				   "the file part is empty: send the audio as file "
				   "(curl -F file=@audio.wav)");
	if (!field(parts, *np, "model", model, model_cap, e, &bad))
		return bad ? -1 : sf_api_fail(e, 400, "invalid_request_error",
					      "missing_required_parameter", "model",
					      "the form has no model field: name a model of the fleet "
					      "(GET /v1/models)");
	if (field(parts, *np, "response_format", buf, sizeof(buf), e, &bad)) {
		size_t k = 0;
		while (k < sizeof(fmt_names) / sizeof(fmt_names[0]) && strcmp(buf, fmt_names[k]))
			k++;
		if (k == sizeof(fmt_names) / sizeof(fmt_names[0]))
			return sf_api_bad(e, "response_format", "response_format '%.64s' is not one of "
					  "json, text, verbose_json, srt, vtt", buf);
		t->fmt = (enum tr_format)k;
	}
	if (field(parts, *np, "stream", buf, sizeof(buf), e, &bad)) {
		if (!strcasecmp(buf, "true") || !strcmp(buf, "1"))
			t->stream = true;
		else if (strcasecmp(buf, "false") && strcmp(buf, "0"))
			return sf_api_bad(e, "stream", "stream must be true or false, not '%.64s'",
					  buf);
	}
	if (t->stream && t->fmt != TR_JSON && t->fmt != TR_TEXT)
		return sf_api_bad(e, "stream", "stream=true streams the text: response_format %s "
				  "cannot be streamed (use json or text)", fmt_names[t->fmt]);
	if (field(parts, *np, "temperature", buf, sizeof(buf), e, &bad)) {
		char *end;
		t->temperature = strtod(buf, &end);
		if (end == buf || *end || !(t->temperature >= 0 && t->temperature <= 1))
			return sf_api_bad(e, "temperature", "temperature must be a number from 0 to 1, "
					  "not '%.64s'", buf);
	}
	if (field(parts, *np, "language", buf, sizeof(buf), e, &bad)) {
		if (strlen(buf) >= sizeof(t->language))
			return sf_api_bad(e, "language", "language must be a language code (ISO-639-1, "
					  "such as en)");
		memcpy(t->language, buf, strlen(buf) + 1); /* fits: checked above */
	}
	(void)field(parts, *np, "prompt", buf, sizeof(buf), e, &bad); /* accepted, not used */
	if (bad)
		return -1;
	(void)d;
	return 0;
}

int headd_state_op_run(struct headd_req *q, const struct sf_state_op_call *call,
		       struct sf_err *err)
{
	struct headd *d = q->d;
	if (!sf_state_ops_serves(d->api.ops, call->model))
		return sf_err_set(err, SF_E_RANGE, "no node serving %.128s can run it now",
				  call->model);
	struct headd_tr *t = calloc(1, sizeof(*t));
	if (!t)
		return sf_err_set(err, SF_E_NOMEM, "the head is out of memory");
	int rc = sf_state_ops_start(d->api.ops, call, sf_loop_now(d->loop), &t->ticket, err);
	if (rc) {
		free(t);
		return rc;
	}
	q->tr = t;
	headd_life_init(&q->life, HL_TRANSCRIBING);
	return 0;
}

void headd_transcribe_start(struct headd_http *h, const struct sf_http_request *r)
{
	struct headd *d = h->d;
	struct sf_api_error e;
	struct sf_mp_part *parts = calloc(SF_MP_MAX_PARTS, sizeof(*parts));
	struct headd_tr *t = calloc(1, sizeof(*t));
	struct headd_req *q = calloc(1, sizeof(*q));
	char model[SF_MAX_NAME + 1];
	const struct sf_mp_part *file = NULL;
	uint32_t np = 0;
	if (!parts || !t || !q) {
		sf_api_fail(&e, 500, "server_error", NULL, NULL, "the head is out of memory");
		goto fail;
	}
	if (parse_form(d, r, t, model, sizeof(model), &file, parts, &np, &e))
		goto fail;
	if (headd_model_check(d, model, &e)) {
		if (!headd_model_wait(h, r, HEADD_WAIT_TRANSCRIBE, model, &e))
			goto fail;
		free(parts); /* parked: started again from r once the model is served here */
		free(t);
		free(q);
		return;
	}
	if (!sf_state_ops_serves(d->api.ops, model)) {
		sf_api_fail(&e, 404, "invalid_request_error", "model_not_found", "model",
			    "The model '%.128s' does not exist: no node of this head serves it now",
			    model);
		goto fail;
	}
	t->keep_segments = !t->stream && (t->fmt == TR_VERBOSE || t->fmt == TR_SRT ||
					  t->fmt == TR_VTT);
	struct sf_err err;
	int rc = sf_blob_cache_put(d->api.blobs, file->data, file->len, t->sha, &err);
	if (rc) {
		sf_api_fail(&e, 503, "service_unavailable", "transcription_unavailable", NULL,
				    "%s", err.msg);
		goto fail;
	}
	const uint8_t(*blobs)[32] = (const uint8_t(*)[32])t->sha;
	struct sf_state_op_call call = { .model = model, .op = TR_OP, .blobs = blobs, .n_blobs = 1 };
	uint64_t now = sf_loop_now(d->loop);
	if (sf_state_ops_start(d->api.ops, &call, now, &t->ticket, &err)) {
		sf_api_fail(&e, 503, "service_unavailable", "transcription_unavailable", NULL,
			    "the transcription could not be started: %s", err.msg);
		goto fail;
	}
	q->r.model = strdup(model);
	q->d = d;
	q->h = h;
	q->tr = t;
	q->t_start = now;
	q->created_s = (uint64_t)time(NULL);
	snprintf(q->id, sizeof(q->id), "tr-%" PRIu64, ++d->api.next_id);
	headd_life_init(&q->life, HL_TRANSCRIBING);
	h->req = q;
	q->next = d->api.reqs;
	d->api.reqs = q;
	free(parts);
	if (t->stream) {
		char extra[128];
		snprintf(extra, sizeof(extra), "Cache-Control: no-cache\r\nX-Request-Id: %s\r\n",
			 q->id);
		(void)sf_http_stream_begin(h->http, 200, "text/event-stream", extra);
	}
	return;
fail:
	free(parts);
	free(t);
	free(q);
	headd_api_send_error(h, &e);
}
