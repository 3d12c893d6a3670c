/* One HTTP/1.1 server connection with no I/O in it: bytes in (sf_http_conn_feed), requests out
 * (ops->on_request), response bytes out (ops->write). Parsing is the http_parser library's
 * (Debian's libhttp-parser); this file adds the limits, the request assembly and the response
 * writers.
 *
 * One request at a time: after on_request the connection parses nothing more until that
 * request's response has ended (sf_http_respond, or sf_http_stream_end). Bytes of pipelined
 * requests that arrive meanwhile are kept (bounded) and parsed by sf_http_conn_poll, which the
 * owner calls when it is ready for the next request (never from inside a callback). Nothing
 * here calls back from inside a response call.
 *
 * Errors of the client's making (bad syntax, a header or body over its limit, an unsupported
 * transfer coding) are answered here with ops->error_body's text and status 400/413/431/501,
 * then the connection asks to be closed (sf_http_conn_should_close). */
#ifndef SF_HTTP_HTTP_CONN_H
#define SF_HTTP_HTTP_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SF_HTTP_MAX_HEADERS 64

/* A bound shared by connections (one thread's): the bytes of request bodies still being
 * received, all together. A body that would pass it is refused with 503 and Retry-After. */
struct sf_http_budget {
	size_t used, max;
	uint64_t refused;    /* requests refused for it */
};

struct sf_http_limits {
	size_t max_head;     /* request line and headers; 0: 16 KiB (over: 431) */
	size_t max_body;     /* body bytes, after de-chunking; 0: 8 MiB (over: 413) */
	size_t max_pipeline; /* bytes kept while a response is pending; 0: max_head + max_body */
	struct sf_http_budget *budget; /* or NULL: no shared bound */
};

struct sf_http_header {
	const char *name; /* lower-cased */
	const char *value; /* leading and trailing blanks trimmed */
};

struct sf_http_request {
	const char *method;  /* "GET", "POST", ... */
	const char *target;  /* as sent: path and query */
	const char *path;    /* target up to '?', percent-decoding NOT applied */
	const char *query;   /* after '?', or "" */
	int version_minor;   /* HTTP/1.x */
	const struct sf_http_header *headers;
	uint32_t n_headers;
	const uint8_t *body; /* NUL-terminated for convenience (not counted in body_len) */
	size_t body_len;
	bool keep_alive;     /* what the request asked for (HTTP/1.1 default, Connection) */
};

/* The value of a header (name lower-case), or NULL; the first of repeated ones. */
const char *sf_http_header(const struct sf_http_request *r, const char *name);

struct sf_http_conn_ops {
	void *arg;
	/* The request line and headers are in, the body not read (r->body_len 0), no 100
	 * Continue sent: the owner may answer now (sf_http_respond; the body is then never read
	 * and the connection closes after the answer), or return to have the body read and the
	 * whole request handed to on_request. May be NULL. */
	void (*on_head)(void *arg, const struct sf_http_request *r);
	/* A whole request (valid until its response ends). */
	void (*on_request)(void *arg, const struct sf_http_request *r);
	/* Response bytes to send; 0, or non-zero when they cannot be taken (the connection
	 * then counts as failed: sf_http_conn_should_close). */
	int (*write)(void *arg, const void *p, size_t n);
	/* Body for an error this file answers itself (status, one sentence naming what was
	 * wrong); returns a malloc'd body and sets *content_type, or NULL for text/plain. */
	char *(*error_body)(void *arg, int status, const char *message, const char **content_type);
	/* Header lines ("Name: value\r\n") every response to r carries, its errors too (r's
	 * headers: none when they were not read), or NULL. Valid until the response is written.
	 * May be NULL. */
	const char *(*headers)(void *arg, const struct sf_http_request *r);
};

struct sf_http_conn;

/* NULL when out of memory. limits may be NULL (defaults). */
struct sf_http_conn *sf_http_conn_new(const struct sf_http_limits *limits,
				      const struct sf_http_conn_ops *ops);
void sf_http_conn_free(struct sf_http_conn *c);
/* The shared bound for the bodies of the requests to come (the connection moved to another
 * thread); only between requests (0), else -1. */
int sf_http_conn_set_budget(struct sf_http_conn *c, struct sf_http_budget *b);

/* Takes bytes from the peer; returns how many were taken (< n only when the pipeline limit is
 * reached; the caller offers the rest again later). May call on_request (at most once per
 * call) and write. */
size_t sf_http_conn_feed(struct sf_http_conn *c, const uint8_t *p, size_t n);
/* Parses kept bytes when no request is pending; may call on_request. */
void sf_http_conn_poll(struct sf_http_conn *c);
/* The peer ended its side (EOF, or a half-close): whole requests are answered, one cut short
 * is not. */
void sf_http_conn_eof(struct sf_http_conn *c);

/* Where the connection is, for its owner's read timeouts. */
enum sf_http_phase {
	SF_HTTP_IDLE = 0, /* no byte of a request yet (after accept, or between requests) */
	SF_HTTP_HEAD,     /* reading a request line and headers */
	SF_HTTP_BODY,     /* the headers are in, reading the body */
	SF_HTTP_BUSY,     /* a request handed out, its response not ended */
};
enum sf_http_phase sf_http_conn_phase(const struct sf_http_conn *c);
/* The client took too long to send its request: 408 with msg (one sentence), then close.
 * Nothing happens while a request is busy. */
void sf_http_conn_timeout(struct sf_http_conn *c, const char *msg);

/* True while a request is out that asked to keep the connection (HTTP/1.1 without
 * Connection: close): its client's end of stream means it went away, not that it is done. */
bool sf_http_conn_busy_keep_alive(const struct sf_http_conn *c);

/* True while a request has been handed out and its response has not ended. */
bool sf_http_conn_busy(const struct sf_http_conn *c);
/* True when the connection should be closed once what was written is sent: an error, a
 * write that failed, a response ended on a request that did not keep the connection, or the
 * peer's end with no request left to answer. */
bool sf_http_conn_should_close(const struct sf_http_conn *c);

/* A whole response. extra_headers: "Name: value\r\n" lines or NULL. Content-Length, Date is
 * not sent; Connection: close is added when the connection will close. 0 or -1 (no pending
 * request, or write failed). */
int sf_http_respond(struct sf_http_conn *c, int status, const char *content_type,
		    const void *body, size_t len, const char *extra_headers);
/* A streamed response: chunked transfer coding on HTTP/1.1, close-delimited on 1.0. */
int sf_http_stream_begin(struct sf_http_conn *c, int status, const char *content_type,
			 const char *extra_headers);
int sf_http_stream_write(struct sf_http_conn *c, const void *p, size_t n); /* one chunk; n > 0 */
int sf_http_stream_end(struct sf_http_conn *c);

/* The reason phrase of a status ("Not Found"). */
const char *sf_http_status_text(int status);

#endif
