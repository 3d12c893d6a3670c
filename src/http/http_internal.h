/* The HTTP connection's state, shared by its parsing (http_conn.c) and its response writers
 * (http_response.c). */
#ifndef SF_HTTP_HTTP_INTERNAL_H
#define SF_HTTP_HTTP_INTERNAL_H

#include <http_parser.h>

#include "http/http_conn.h"

struct http_buf {
	char *p;     /* NUL-terminated past len when allocated */
	size_t len, cap;
};

struct sf_http_conn {
	http_parser parser;
	struct sf_http_limits lim;
	struct sf_http_conn_ops ops;
	struct http_buf in;   /* bytes received and not parsed yet */
	struct http_buf url, path, hdrs, body;
	struct { size_t name, value; } spans[SF_HTTP_MAX_HEADERS]; /* offsets into hdrs */
	struct sf_http_header headers[SF_HTTP_MAX_HEADERS];
	uint32_t n_headers;
	size_t head_len;
	bool in_value;        /* the parser is inside a header's value */
	int err_status;       /* set by a callback that refused */
	char err_msg[200];
	struct sf_http_request req;
	bool complete;        /* a whole request was parsed */
	bool busy;            /* handed out, its response not ended */
	bool keep_alive;      /* the connection stays open after this response */
	bool is_head;
	bool streaming, chunked;
	bool dead;            /* an error of the client's making was answered */
	bool failed;          /* a write was refused */
	bool eof, closing;
	bool early;           /* on_head is running: a response now ends the request */
	bool answered_early;  /* on_head answered: the body is not read */
	size_t reserved;      /* bytes of lim.budget this request's body holds */
	bool in_request;      /* a request's first byte was parsed, and it is not whole yet */
	bool in_body;         /* ... and its headers are */
};

/* Writes a whole response for the pending request; 0 or -1. */
int sf_http__respond(struct sf_http_conn *c, int status, const char *type, const void *body,
		     size_t len, const char *extra, bool has_length_only);

#endif
