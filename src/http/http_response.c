/* The responses' bytes: a status line and headers built in one buffer with the body (one write
 * for a whole response), chunked streams (one write per chunk), reason phrases. */
#include "http/http_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sf_http_status_text(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 415: return "Unsupported Media Type";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Unknown";
	}
}

static int out(struct sf_http_conn *c, const void *p, size_t n)
{
	if (c->failed)
		return -1;
	if (c->ops.write(c->ops.arg, p, n)) {
		c->failed = true;
		return -1;
	}
	return 0;
}

/* The owner's header lines for every response (ops.headers), or "". */
static const char *common(struct sf_http_conn *c)
{
	const char *h = c->ops.headers ? c->ops.headers(c->ops.arg, &c->req) : NULL;
	return h ? h : "";
}

/* The status line and headers (framing: one header line without its CRLF, or ""); returns
 * the length or -1. */
static int head(struct sf_http_conn *c, char *buf, size_t cap, int status, const char *type,
		const char *framing, const char *extra, const char *more)
{
	const char *conn = !c->keep_alive ? "Connection: close\r\n"
			   : c->req.version_minor == 0 ? "Connection: keep-alive\r\n" : "";
	int n = snprintf(buf, cap, "HTTP/1.1 %d %s\r\nServer: superfluid\r\n%s%s%s%s%s%s%s%s\r\n",
			 status, sf_http_status_text(status), type ? "Content-Type: " : "",
			 type ? type : "", type ? "\r\n" : "", framing, *framing ? "\r\n" : "",
			 conn, extra ? extra : "", more);
	return n < 0 || (size_t)n >= cap ? -1 : n;
}

static void ended(struct sf_http_conn *c)
{
	c->busy = false;
	c->streaming = false;
	if (!c->keep_alive)
		c->closing = true;
}

int sf_http__respond(struct sf_http_conn *c, int status, const char *type, const void *body,
		     size_t len, const char *extra, bool unused)
{
	(void)unused;
	if (!c->busy || c->streaming)
		return -1;
	char framing[64] = "";
	if (status != 204 && status != 304) /* those have no body, nor its length */
		snprintf(framing, sizeof(framing), "Content-Length: %zu", len);
	char small[1024];
	const char *more = common(c);
	size_t extra_len = (extra ? strlen(extra) : 0) + strlen(more);
	size_t cap = 256 + (type ? strlen(type) : 0) + extra_len;
	char *h = cap <= sizeof(small) ? small : malloc(cap);
	int n = h ? head(c, h, cap, status, type, framing, extra, more) : -1;
	int rc = -1;
	if (n >= 0) {
		size_t blen = c->is_head ? 0 : len;
		char *all = (size_t)n + blen <= 16384 ? malloc((size_t)n + blen) : NULL;
		if (all) {
			memcpy(all, h, (size_t)n);
			if (blen)
				memcpy(all + n, body, blen);
			rc = out(c, all, (size_t)n + blen);
			free(all);
		} else {
			rc = out(c, h, (size_t)n);
			if (!rc && blen)
				rc = out(c, body, blen);
		}
	}
	if (h != small)
		free(h);
	ended(c);
	return rc;
}

int sf_http_respond(struct sf_http_conn *c, int status, const char *content_type,
		    const void *body, size_t len, const char *extra_headers)
{
	return sf_http__respond(c, status, content_type, body, len, extra_headers, false);
}

int sf_http_stream_begin(struct sf_http_conn *c, int status, const char *content_type,
			 const char *extra_headers)
{
	if (!c->busy || c->streaming)
		return -1;
	c->chunked = c->req.version_minor >= 1;
	if (!c->chunked)
		c->keep_alive = false; /* HTTP/1.0: the end of the connection ends the body */
	const char *framing = c->chunked ? "Transfer-Encoding: chunked" : "";
	const char *more = common(c);
	size_t cap = 256 + (content_type ? strlen(content_type) : 0) +
		     (extra_headers ? strlen(extra_headers) : 0) + strlen(more);
	char *h = malloc(cap);
	int n = h ? head(c, h, cap, status, content_type, framing, extra_headers, more) : -1;
	int rc = n >= 0 ? out(c, h, (size_t)n) : -1;
	free(h);
	c->streaming = true;
	if (c->is_head) {
		c->streaming = false;
		ended(c);
	}
	return rc;
}

int sf_http_stream_write(struct sf_http_conn *c, const void *p, size_t n)
{
	if (!c->streaming || !n)
		return c->streaming ? 0 : -1;
	if (!c->chunked)
		return out(c, p, n);
	char small[4096];
	char *b = n + 32 <= sizeof(small) ? small : malloc(n + 32);
	if (!b)
		return -1;
	int k = snprintf(b, 32, "%zx\r\n", n);
	memcpy(b + k, p, n);
	memcpy(b + k + n, "\r\n", 2);
	int rc = out(c, b, (size_t)k + n + 2);
	if (b != small)
		free(b);
	return rc;
}

int sf_http_stream_end(struct sf_http_conn *c)
{
	if (!c->streaming)
		return -1;
	int rc = c->chunked ? out(c, "0\r\n\r\n", 5) : 0;
	ended(c);
	return rc;
}
