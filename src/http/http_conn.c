/* One HTTP/1.1 server connection over http_parser: bytes kept in one bounded input buffer,
 * parsed up to the end of one request, which is handed out whole (head and body) and answered
 * before the next is parsed. The responses' bytes are built here too (http_response.c). */
#include "http/http_internal.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int grow(struct http_buf *b, size_t more, size_t limit)
{
	if (b->len + more > limit)
		return -1;
	if (b->len + more + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + more + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

static int add(struct http_buf *b, const void *p, size_t n, size_t limit)
{
	if (grow(b, n, limit))
		return -1;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = 0;
	return 0;
}

/* A callback refuses: the status and the sentence this file answers with. */
static int refuse(struct sf_http_conn *c, int status, const char *msg)
{
	c->err_status = status;
	snprintf(c->err_msg, sizeof(c->err_msg), "%s", msg);
	return -1; /* not 1: on_headers_complete's 1 means "no body" to http_parser */
}

/* Takes n more bytes of the shared bound for this request's body; -1 (refused) past it. */
static int reserve(struct sf_http_conn *c, size_t n)
{
	struct sf_http_budget *b = c->lim.budget;
	if (!b || !n)
		return 0;
	if (n > b->max) { /* never fits, however long the client waits */
		b->refused++;
		char m[200];
		snprintf(m, sizeof(m), "the body is %zu bytes, more than the %zu the server receives "
			 "at once", c->reserved + n, b->max);
		return refuse(c, 413, m);
	}
	if (b->used + n > b->max) {
		b->refused++;
		char m[200];
		snprintf(m, sizeof(m), "the server is receiving %zu bytes of request bodies already, "
			 "its bound; try again in a moment", b->used);
		return refuse(c, 503, m);
	}
	b->used += n;
	c->reserved += n;
	return 0;
}

/* The body is whole (or the request over): its bytes no longer count against the bound. */
static void release(struct sf_http_conn *c)
{
	if (c->lim.budget)
		c->lim.budget->used -= c->reserved;
	c->reserved = 0;
}

static struct sf_http_conn *conn_of(http_parser *p)
{
	return p->data;
}

static int head_bytes(struct sf_http_conn *c, size_t n)
{
	c->head_len += n;
	if (c->head_len > c->lim.max_head) {
		char m[128];
		snprintf(m, sizeof(m), "the request line and headers are longer than %zu bytes",
			 c->lim.max_head);
		return refuse(c, 431, m);
	}
	return 0;
}

static int on_message_begin(http_parser *p)
{
	struct sf_http_conn *c = conn_of(p);
	c->url.len = c->hdrs.len = c->body.len = 0;
	c->n_headers = 0;
	c->req.n_headers = 0; /* the last request's are gone */
	c->head_len = 0;
	c->in_value = false;
	c->in_request = true;
	c->in_body = false;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
	struct sf_http_conn *c = conn_of(p);
	if (head_bytes(c, n))
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned char b = (unsigned char)at[i];
		if (b <= 0x20 || b >= 0x7f) { /* RFC 3986: visible ASCII only, the rest encoded */
			char m[128];
			snprintf(m, sizeof(m), "the request target holds byte 0x%02x, which a URL "
				 "may not hold unencoded (percent-encode it)", b);
			return refuse(c, 400, m);
		}
	}
	return add(&c->url, at, n, c->lim.max_head) ? refuse(c, 431, "the request target is too long")
						    : 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
	struct sf_http_conn *c = conn_of(p);
	if (head_bytes(c, n))
		return -1;
	if (c->in_value || !c->n_headers) {
		if (c->n_headers == SF_HTTP_MAX_HEADERS) {
			char m[96];
			snprintf(m, sizeof(m), "more than %d headers", SF_HTTP_MAX_HEADERS);
			return refuse(c, 431, m);
		}
		if (c->n_headers && add(&c->hdrs, "", 1, SIZE_MAX))
			return refuse(c, 500, "out of memory");
		c->spans[c->n_headers].name = c->hdrs.len;
		c->spans[c->n_headers].value = SIZE_MAX;
		c->n_headers++;
		c->in_value = false;
	}
	return add(&c->hdrs, at, n, SIZE_MAX) ? refuse(c, 500, "out of memory") : 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
	struct sf_http_conn *c = conn_of(p);
	if (head_bytes(c, n))
		return -1;
	if (!c->in_value) {
		if (add(&c->hdrs, "", 1, SIZE_MAX))
			return refuse(c, 500, "out of memory");
		c->spans[c->n_headers - 1].value = c->hdrs.len;
		c->in_value = true;
	}
	return add(&c->hdrs, at, n, SIZE_MAX) ? refuse(c, 500, "out of memory") : 0;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = 0;
	return s;
}

/* The header table, pointing into hdrs (which grows no more for this request). */
static void finish_headers(struct sf_http_conn *c)
{
	for (uint32_t i = 0; i < c->n_headers; i++) {
		char *name = c->hdrs.p + c->spans[i].name;
		for (char *q = name; *q; q++)
			*q = (char)tolower((unsigned char)*q);
		c->headers[i].name = name;
		c->headers[i].value = c->spans[i].value == SIZE_MAX ? "" : trim(c->hdrs.p + c->spans[i].value);
	}
}

static void fill_request(struct sf_http_conn *c, bool with_body);

/* HTTP/1.x only (a later 1.x is taken as 1.1, RFC 9112 2.3). http_parser reads a request line
 * without a version as HTTP/0.9's. */
static int check_version(struct sf_http_conn *c, const http_parser *p)
{
	if (p->http_major == 1)
		return 0;
	if (p->http_major == 0 && p->http_minor == 9)
		return refuse(c, 400, "the request line has no HTTP version (HTTP/0.9 is not "
			      "served); end it with HTTP/1.1");
	char m[128];
	snprintf(m, sizeof(m), "HTTP/%u.%u is not served: this server speaks HTTP/1.1 (and 1.0)",
		 p->http_major, p->http_minor);
	return refuse(c, 505, m);
}

/* The next element of the comma-separated list at *s (its name: up to ';' or ',', blanks
 * trimmed) in *name, *len (0: an empty element); false past the list's end. */
static bool next_element(const char **s, const char **name, size_t *len)
{
	const char *q = *s;
	if (!q)
		return false;
	const char *end = strchr(q, ',');
	const char *stop = end ? end : q + strlen(q);
	const char *semi = memchr(q, ';', (size_t)(stop - q));
	const char *e = semi ? semi : stop;
	while (q < e && (*q == ' ' || *q == '\t'))
		q++;
	while (e > q && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*name = q;
	*len = (size_t)(e - q);
	*s = end ? end + 1 : NULL;
	return true;
}

static bool is_coding(const char *name, size_t len, const char *coding)
{
	return len == strlen(coding) && !strncasecmp(name, coding, len);
}

/* A body's framing must read the same at every hop, or a request can be smuggled past one in
 * another's body: what is ambiguous is refused (400), not guessed (RFC 9112 6.1, 6.3).
 * Transfer-Encoding comes once, in HTTP/1.1, without Content-Length, with chunked its one
 * last coding (another coding before it is valid but not supported: 501). TE never lists
 * chunked (RFC 9110 10.1.4: a client MUST NOT), so one that does is a Transfer-Encoding
 * misnamed. http_parser refuses some of these itself (a second Content-Length, one beside a
 * chunked Transfer-Encoding). */
static int check_framing(struct sf_http_conn *c, const http_parser *p)
{
	const char *te = NULL, *name;
	size_t len;
	unsigned n_te = 0;
	bool has_length = false;
	for (uint32_t i = 0; i < c->n_headers; i++) {
		const struct sf_http_header *h = &c->headers[i];
		if (!strcmp(h->name, "transfer-encoding")) {
			te = h->value;
			n_te++;
		} else if (!strcmp(h->name, "content-length")) {
			has_length = true;
		} else if (!strcmp(h->name, "te")) {
			for (const char *s = h->value; next_element(&s, &name, &len);)
				if (is_coding(name, len, "chunked"))
					return refuse(c, 400, "TE lists chunked, which it never holds "
						      "(RFC 9110 10.1.4); a body's coding is "
						      "Transfer-Encoding's");
		}
	}
	if (!n_te)
		return 0;
	char m[200];
	if (n_te > 1) {
		snprintf(m, sizeof(m), "Transfer-Encoding is given %u times, which hops may read "
			 "differently; send it once: Transfer-Encoding: chunked", n_te);
		return refuse(c, 400, m);
	}
	if (p->http_minor == 0)
		return refuse(c, 400, "an HTTP/1.0 request has no Transfer-Encoding (RFC 9112 6.1); "
			      "send Content-Length, or HTTP/1.1");
	if (has_length)
		return refuse(c, 400, "Transfer-Encoding and Content-Length together: send one");
	unsigned n = 0, chunked = 0, odd = 0;
	bool last_chunked = false;
	for (const char *s = te; next_element(&s, &name, &len); n++) {
		last_chunked = is_coding(name, len, "chunked");
		chunked += last_chunked;
		odd += !len || is_coding(name, len, "identity");
	}
	/* chunked takes no parameters; and what http_parser frames must be what is checked */
	if (!last_chunked || chunked != 1 || odd || strchr(te, ';') || !(p->flags & F_CHUNKED)) {
		snprintf(m, sizeof(m), "Transfer-Encoding: %.60s is ambiguous: chunked must be its "
			 "last coding, once (RFC 9112 6.1)", te);
		return refuse(c, 400, m);
	}
	if (n > 1)
		return refuse(c, 501, "only the chunked transfer coding is supported");
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct sf_http_conn *c = conn_of(p);
	if (check_version(c, p))
		return -1;
	if (!c->hdrs.p && add(&c->hdrs, "", 0, SIZE_MAX))
		return refuse(c, 500, "out of memory");
	if (!c->url.p && add(&c->url, "", 0, SIZE_MAX))
		return refuse(c, 500, "out of memory");
	finish_headers(c);
	c->req.headers = c->headers;
	c->req.n_headers = c->n_headers;
	if (check_framing(c, p))
		return -1;
	if (!(p->flags & F_CHUNKED) && p->content_length != ULLONG_MAX &&
	    p->content_length > c->lim.max_body) {
		char m[128];
		snprintf(m, sizeof(m), "the body is %llu bytes, past the limit of %zu",
			 (unsigned long long)p->content_length, c->lim.max_body);
		return refuse(c, 413, m);
	}
	c->is_head = p->method == HTTP_HEAD;
	if (c->ops.on_head) {
		/* The owner sees the head first (a key to check) and may answer before any body
		 * byte is read or 100 Continue is sent. */
		fill_request(c, false);
		if (c->err_status)
			return -1;
		c->busy = c->early = true;
		c->ops.on_head(c->ops.arg, &c->req);
		c->early = false;
		if (!c->busy) {
			c->answered_early = true;
			return -1; /* the parser stops here: the body is never read */
		}
		c->busy = false;
	}
	if (!(p->flags & F_CHUNKED) && p->content_length != ULLONG_MAX &&
	    reserve(c, (size_t)p->content_length))
		return -1;
	c->in_body = true;
	const char *expect = sf_http_header(&c->req, "expect");
	if (expect && !strcasecmp(expect, "100-continue") && p->http_minor >= 1) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
		if (c->ops.write(c->ops.arg, cont, sizeof(cont) - 1))
			c->failed = true;
	}
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
	struct sf_http_conn *c = conn_of(p);
	if ((p->flags & F_CHUNKED) && reserve(c, n))
		return -1;
	if (add(&c->body, at, n, c->lim.max_body)) {
		char m[96];
		snprintf(m, sizeof(m), "the body is longer than %zu bytes", c->lim.max_body);
		return refuse(c, c->body.len + n > c->lim.max_body ? 413 : 500, m);
	}
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct sf_http_conn *c = conn_of(p);
	c->complete = true;
	c->in_request = c->in_body = false;
	http_parser_pause(p, 1); /* one request at a time */
	return 0;
}

static const http_parser_settings settings = {
	.on_message_begin = on_message_begin,
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

struct sf_http_conn *sf_http_conn_new(const struct sf_http_limits *limits,
				      const struct sf_http_conn_ops *ops)
{
	struct sf_http_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (limits)
		c->lim = *limits;
	if (!c->lim.max_head)
		c->lim.max_head = 16 << 10;
	if (!c->lim.max_body)
		c->lim.max_body = 8 << 20;
	if (!c->lim.max_pipeline)
		c->lim.max_pipeline = c->lim.max_head + c->lim.max_body + 4096;
	c->ops = *ops;
	http_parser_init(&c->parser, HTTP_REQUEST);
	c->parser.data = c;
	return c;
}

int sf_http_conn_set_budget(struct sf_http_conn *c, struct sf_http_budget *b)
{
	if (c->reserved)
		return -1;
	c->lim.budget = b;
	return 0;
}

void sf_http_conn_free(struct sf_http_conn *c)
{
	if (!c)
		return;
	release(c);
	free(c->in.p);
	free(c->url.p);
	free(c->path.p);
	free(c->hdrs.p);
	free(c->body.p);
	free(c);
}

/* Answers an error of the client's making and stops reading. */
static void client_error(struct sf_http_conn *c, int status, const char *msg)
{
	release(c);
	c->dead = true;
	c->keep_alive = false;
	c->in.len = 0;
	const char *type = "text/plain; charset=utf-8";
	char *body = c->ops.error_body ? c->ops.error_body(c->ops.arg, status, msg, &type) : NULL;
	char text[300];
	if (!body)
		snprintf(text, sizeof(text), "%s\n", msg);
	c->busy = true; /* so that respond takes it */
	c->req.version_minor = 1;
	/* A 503 here is the shared bound: it passes as other bodies end. */
	sf_http__respond(c, status, body ? type : "text/plain; charset=utf-8", body ? body : text,
			 strlen(body ? body : text), status == 503 ? "Retry-After: 1\r\n" : NULL,
			 false);
	free(body);
}

/* The request's fields from what was parsed; with_body false: before the body (no body, and
 * the connection closes after an answer). Sets err_status when memory is short. */
static void fill_request(struct sf_http_conn *c, bool with_body)
{
	http_parser *p = &c->parser;
	c->path.len = 0;
	const char *q = memchr(c->url.p, '?', c->url.len);
	size_t plen = q ? (size_t)(q - c->url.p) : c->url.len;
	if (add(&c->path, c->url.p, plen, SIZE_MAX) || (!c->body.p && add(&c->body, "", 0, SIZE_MAX))) {
		refuse(c, 500, "the server is out of memory");
		return;
	}
	c->req.method = http_method_str((enum http_method)p->method);
	c->req.target = c->url.p;
	c->req.path = c->path.p;
	c->req.query = q ? q + 1 : "";
	c->req.version_minor = p->http_minor;
	c->req.body = (const uint8_t *)c->body.p;
	c->req.body_len = with_body ? c->body.len : 0;
	c->req.keep_alive = with_body && http_should_keep_alive(p) && p->http_major == 1;
	c->keep_alive = c->req.keep_alive;
}

static void hand_out(struct sf_http_conn *c)
{
	c->complete = false;
	release(c);
	fill_request(c, true);
	if (c->err_status) {
		client_error(c, c->err_status, c->err_msg);
		return;
	}
	c->busy = true;
	c->ops.on_request(c->ops.arg, &c->req);
}

/* Parses kept bytes until one request is whole, an error, or the bytes run out. */
static void parse(struct sf_http_conn *c)
{
	while (!c->busy && !c->dead && !c->failed && c->in.len) {
		size_t n = http_parser_execute(&c->parser, &settings, c->in.p, c->in.len);
		enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
		if (e == HPE_PAUSED) {
			http_parser_pause(&c->parser, 0);
			e = HPE_OK;
		}
		if (e != HPE_OK) {
			char m[200];
			if (c->answered_early) {
				c->dead = true; /* answered: the rest (its body) is not read */
				c->in.len = 0;
			} else if (c->err_status)
				client_error(c, c->err_status, c->err_msg);
			else {
				snprintf(m, sizeof(m), "the request is not valid HTTP/1.1: %s",
					 http_errno_description(e));
				client_error(c, 400, m);
			}
			return;
		}
		memmove(c->in.p, c->in.p + n, c->in.len - n);
		c->in.len -= n;
		if (c->complete)
			hand_out(c);
		else if (!n)
			break;
	}
}

size_t sf_http_conn_feed(struct sf_http_conn *c, const uint8_t *p, size_t n)
{
	if (c->dead || c->failed)
		return n; /* answered already: the rest is ignored */
	size_t room = c->lim.max_pipeline > c->in.len ? c->lim.max_pipeline - c->in.len : 0;
	size_t take = n < room ? n : room;
	if (take && add(&c->in, p, take, SIZE_MAX)) {
		client_error(c, 500, "the server is out of memory");
		return n;
	}
	parse(c);
	return take;
}

void sf_http_conn_poll(struct sf_http_conn *c)
{
	parse(c);
}

void sf_http_conn_eof(struct sf_http_conn *c)
{
	c->keep_alive = false;
	c->eof = true;
}

enum sf_http_phase sf_http_conn_phase(const struct sf_http_conn *c)
{
	if (c->busy)
		return SF_HTTP_BUSY;
	if (c->in_request && !c->dead)
		return c->in_body ? SF_HTTP_BODY : SF_HTTP_HEAD;
	return SF_HTTP_IDLE;
}

void sf_http_conn_timeout(struct sf_http_conn *c, const char *msg)
{
	if (c->busy || c->dead || c->failed)
		return;
	c->in_request = c->in_body = false;
	client_error(c, 408, msg);
}

bool sf_http_conn_busy_keep_alive(const struct sf_http_conn *c)
{
	return c->busy && c->req.keep_alive;
}

bool sf_http_conn_busy(const struct sf_http_conn *c)
{
	return c->busy;
}

bool sf_http_conn_should_close(const struct sf_http_conn *c)
{
	/* After the peer's end, pipelined requests kept while one was busy are answered first. */
	return c->failed || c->dead || (!c->busy && (c->closing || (c->eof && !c->in.len)));
}

const char *sf_http_header(const struct sf_http_request *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_headers; i++)
		if (!strcmp(r->headers[i].name, name))
			return r->headers[i].value;
	return NULL;
}
