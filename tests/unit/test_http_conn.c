/* The HTTP connection without sockets: requests fed as bytes (whole, a byte at a time,
 * pipelined), the limits, and the exact bytes of whole and streamed responses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/http_conn.h"

struct rec {
	char out[65536];
	size_t out_len;
	int n_req;
	char method[16], path[256], query[256], body[65536], ctype[128];
	size_t body_len;
	bool keep_alive;
	bool fail_writes;
	struct sf_http_conn *c;
	bool answer; /* respond at once, from inside on_request */
};

static void on_request(void *arg, const struct sf_http_request *r)
{
	struct rec *x = arg;
	x->n_req++;
	snprintf(x->method, sizeof(x->method), "%s", r->method);
	snprintf(x->path, sizeof(x->path), "%s", r->path);
	snprintf(x->query, sizeof(x->query), "%s", r->query);
	const char *ct = sf_http_header(r, "content-type");
	snprintf(x->ctype, sizeof(x->ctype), "%s", ct ? ct : "");
	memcpy(x->body, r->body, r->body_len);
	x->body_len = r->body_len;
	assert_int_equal(r->body[r->body_len], 0);
	x->keep_alive = r->keep_alive;
	if (x->answer)
		sf_http_respond(x->c, 200, "text/plain", "ok", 2, NULL);
}

static int on_write(void *arg, const void *p, size_t n)
{
	struct rec *x = arg;
	if (x->fail_writes || x->out_len + n > sizeof(x->out))
		return -1;
	memcpy(x->out + x->out_len, p, n);
	x->out_len += n;
	x->out[x->out_len] = 0;
	return 0;
}

static struct sf_http_conn *conn(struct rec *x, size_t max_body)
{
	memset(x, 0, sizeof(*x));
	struct sf_http_limits lim = { .max_head = 1024, .max_body = max_body };
	struct sf_http_conn_ops ops = { .arg = x, .on_request = on_request, .write = on_write };
	x->c = sf_http_conn_new(&lim, &ops);
	assert_non_null(x->c);
	return x->c;
}

static void feed(struct sf_http_conn *c, const char *s)
{
	assert_int_equal(sf_http_conn_feed(c, (const uint8_t *)s, strlen(s)), strlen(s));
}

static void get_then_respond(void **state)
{
	struct rec x;
	struct sf_http_conn *c = conn(&x, 4096);
	feed(c, "GET /v1/models?a=b HTTP/1.1\r\nHost: x\r\nContent-Type:  text/x  \r\n\r\n");
	assert_int_equal(x.n_req, 1);
	assert_string_equal(x.method, "GET");
	assert_string_equal(x.path, "/v1/models");
	assert_string_equal(x.query, "a=b");
	assert_string_equal(x.ctype, "text/x");
	assert_true(x.keep_alive);
	assert_true(sf_http_conn_busy(c));
	assert_int_equal(sf_http_respond(c, 200, "application/json", "{}", 2, "X-A: 1\r\n"), 0);
	assert_string_equal(x.out, "HTTP/1.1 200 OK\r\nServer: superfluid\r\nContent-Type: "
			    "application/json\r\nContent-Length: 2\r\nX-A: 1\r\n\r\n{}");
	assert_false(sf_http_conn_busy(c));
	assert_false(sf_http_conn_should_close(c));
	sf_http_conn_free(c);
}

static void post_byte_at_a_time(void **state)
{
	struct rec x;
	struct sf_http_conn *c = conn(&x, 4096);
	const char *req = "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world";
	for (const char *p = req; *p; p++)
		assert_int_equal(sf_http_conn_feed(c, (const uint8_t *)p, 1), 1);
	assert_int_equal(x.n_req, 1);
	assert_int_equal(x.body_len, 11);
	assert_memory_equal(x.body, "hello world", 11);
	sf_http_conn_free(c);
}

static void chunked_body(void **state)
{
	struct rec x;
	struct sf_http_conn *c = conn(&x, 4096);
	feed(c, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
	assert_int_equal(x.n_req, 1);
	assert_int_equal(x.body_len, 11);
	assert_memory_equal(x.body, "hello world", 11);
	sf_http_conn_free(c);
}

static void pipelined_one_at_a_time(void **state)
{
	struct rec x;
	struct sf_http_conn *c = conn(&x, 4096);
	feed(c, "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
	assert_int_equal(x.n_req, 1);
	assert_string_equal(x.path, "/a");
	sf_http_conn_poll(c); /* busy: nothing */
	assert_int_equal(x.n_req, 1);
	sf_http_respond(c, 204, NULL, NULL, 0, NULL);
	assert_int_equal(x.n_req, 1); /* not from inside the response */
	sf_http_conn_poll(c);
	assert_int_equal(x.n_req, 2);
	assert_string_equal(x.path, "/b");
	sf_http_conn_free(c);
}

static void answered_at_once_then_next(void **state)
{
	struct rec x;
	struct sf_http_conn *c = conn(&x, 4096);
	x.answer = true;
	feed(c, "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
	/* the first was answered inside on_request; feed parses on to the second */
	assert_true(x.n_req >= 1);
	while (!sf_http_conn_busy(c) && x.n_req < 2)
		sf_http_conn_poll(c);
	assert_int_equal(x.n_req, 2);
	sf_http_conn_free(c);
}

static void connection_close_and_http10(void **state)
{
	struct rec x;
	struct sf_http_conn *c = conn(&x, 4096);
	feed(c, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
	assert_false(x.keep_alive);
	sf_http_respond(c, 200, "text/plain", "x", 1, NULL);
	assert_non_null(strstr(x.out, "Connection: close\r\n"));
	assert_true(sf_http_conn_should_close(c));
	sf_http_conn_free(c);

	c = conn(&x, 4096);
	feed(c, "GET / HTTP/1.0\r\n\r\n");
	assert_false(x.keep_alive);
	sf_http_conn_free(c);
	c = conn(&x, 4096);
	feed(c, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	assert_true(x.keep_alive);
	sf_http_respond(c, 200, "text/plain", "x", 1, NULL);
	assert_non_null(strstr(x.out, "Connection: keep-alive\r\n"));
	assert_false(sf_http_conn_should_close(c));
	sf_http_conn_free(c);
}

static void limits(void **state)
{
	struct rec x;
	struct sf_http_conn *c = conn(&x, 100);
	feed(c, "POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n");
	assert_int_equal(x.n_req, 0);
	assert_non_null(strstr(x.out, "HTTP/1.1 413 "));
	assert_non_null(strstr(x.out, "past the limit of 100"));
	assert_true(sf_http_conn_should_close(c));
	sf_http_conn_free(c);

	c = conn(&x, 100);
	feed(c, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n");
	char chunk[0x41];
	memset(chunk, 'a', 0x40);
	chunk[0x40] = 0;
	feed(c, chunk);
	feed(c, "\r\n40\r\n");
	feed(c, chunk);
	assert_int_equal(x.n_req, 0);
	assert_non_null(strstr(x.out, "HTTP/1.1 413 "));
	sf_http_conn_free(c);

	c = conn(&x, 100);
	char big[2048] = "GET / HTTP/1.1\r\nX-Big: ";
	memset(big + strlen(big), 'b', 1500);
	feed(c, big);
	assert_non_null(strstr(x.out, "HTTP/1.1 431 "));
	sf_http_conn_free(c);

	c = conn(&x, 100);
	char many[4096] = "GET / HTTP/1.1\r\n";
	for (int i = 0; i < SF_HTTP_MAX_HEADERS + 1; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "H%d: v\r\n", i);
	strcat(many, "\r\n");
	struct sf_http_limits lim = { .max_head = 8192 };
	struct sf_http_conn_ops ops = { .arg = &x, .on_request = on_request, .write = on_write };
	sf_http_conn_free(c);
	c = sf_http_conn_new(&lim, &ops);
	x.c = c;
	feed(c, many);
	assert_int_equal(x.n_req, 0);
	assert_non_null(strstr(x.out, "HTTP/1.1 431 "));
	assert_non_null(strstr(x.out, "more than 64 headers"));
	sf_http_conn_free(c);
}

static void bad_request_line(void **state)
{
	struct rec x;
	struct sf_http_conn *c = conn(&x, 100);
	feed(c, "GARBAGE\r\n\r\n");
	assert_int_equal(x.n_req, 0);
	assert_non_null(strstr(x.out, "HTTP/1.1 400 Bad Request\r\n"));
	assert_true(sf_http_conn_should_close(c));
	/* what follows is ignored, and nothing crashes */
	feed(c, "GET / HTTP/1.1\r\n\r\n");
	assert_int_equal(x.n_req, 0);
	sf_http_conn_free(c);

	c = conn(&x, 100);
	feed(c, "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n");
	assert_int_equal(x.n_req, 0);
	assert_non_null(strstr(x.out, "HTTP/1.1 "));
	assert_null(strstr(x.out, "HTTP/1.1 200"));
	sf_http_conn_free(c);
}

/* Only HTTP/1.x is served: another major version is a 505, a request line without a version
 * (HTTP/0.9's) a 400, each before the owner sees the request. */
static void versions(void **state)
{
	static const struct {
		const char *req, *status, *says;
	} cases[] = {
		{ "GET /health HTTP/9.9\r\nHost: x\r\n\r\n", "HTTP/1.1 505 HTTP Version Not Supported\r\n",
		  "HTTP/9.9" },
		{ "GET /health HTTP/2.0\r\nHost: x\r\n\r\n", "HTTP/1.1 505 HTTP Version Not Supported\r\n",
		  "HTTP/2.0" },
		{ "GET /health HTTP/0.5\r\n\r\n", "HTTP/1.1 505 HTTP Version Not Supported\r\n",
		  "HTTP/0.5" },
		{ "GET /health\r\nHost: x\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n", "no HTTP version" },
		{ "GET /health\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n", "no HTTP version" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rec x;
		struct sf_http_conn *c = conn(&x, 100);
		feed(c, cases[i].req);
		assert_int_equal(x.n_req, 0);
		if (strncmp(x.out, cases[i].status, strlen(cases[i].status)) ||
		    !strstr(x.out, cases[i].says))
			fail_msg("%s -> %s", cases[i].req, x.out);
		assert_true(sf_http_conn_should_close(c));
		sf_http_conn_free(c);
	}
	struct rec x; /* a later 1.x is taken as 1.1 (RFC 9112 2.3) */
	struct sf_http_conn *c = conn(&x, 100);
	feed(c, "GET / HTTP/1.2\r\n\r\n");
	assert_int_equal(x.n_req, 1);
	sf_http_conn_free(c);
}

/* A body's framing every hop must read alike (RFC 9112 6.1, 6.3): Transfer-Encoding once, with
 * chunked its one last coding, never beside Content-Length nor in HTTP/1.0; TE never lists
 * chunked (RFC 9110 10.1.4). Anything else is refused before the owner sees it, the body
 * unread; the connection closes. */
static void ambiguous_framing(void **state)
{
	static const struct {
		const char *headers, *status;
	} cases[] = {
		{ "Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n", "400" },
		{ "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n", "400" },
		{ "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "400" },
		{ "Transfer-Encoding: chunked, chunked\r\n", "400" },
		{ "Transfer-Encoding: identity, chunked\r\n", "400" },
		{ "Transfer-Encoding: chunked, identity\r\n", "400" },
		{ "Transfer-Encoding: chunked,\r\n", "400" },
		{ "Transfer-Encoding: ,chunked\r\n", "400" },
		{ "Transfer-Encoding: identity\r\n", "400" },
		{ "Transfer-Encoding: \r\n", "400" },
		{ "Transfer-Encoding: gzip\r\n", "400" },
		{ "Transfer-Encoding: chunked, gzip\r\n", "400" },
		{ "Transfer-Encoding: gzip, chunked\r\n", "501" },
		{ "Transfer-Encoding: chunked;x=1\r\n", "400" },
		{ "Transfer-Encoding: \"chunked\"\r\n", "400" },
		{ "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "400" },
		{ "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "400" },
		{ "Content-Length: 5\r\nTransfer-Encoding: identity\r\n", "400" },
		{ "Content-Length: 5\r\nContent-Length: 6\r\n", "400" },
		{ "TE: identity\r\nTE: chunked\r\n", "400" },
		{ "TE: trailers, chunked;q=0.5\r\n", "400" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rec x;
		struct sf_http_conn *c = conn(&x, 100);
		char req[512];
		snprintf(req, sizeof(req), "POST / HTTP/1.1\r\nHost: x\r\n%s\r\n5\r\nhello\r\n0\r\n\r\n",
			 cases[i].headers);
		feed(c, req);
		char want[32];
		snprintf(want, sizeof(want), "HTTP/1.1 %s ", cases[i].status);
		if (x.n_req || strncmp(x.out, want, strlen(want)))
			fail_msg("%s-> %d requests, %.80s", cases[i].headers, x.n_req, x.out);
		assert_true(sf_http_conn_should_close(c));
		sf_http_conn_free(c);
	}
	struct rec x; /* HTTP/1.0 has no transfer codings */
	struct sf_http_conn *c = conn(&x, 100);
	feed(c, "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
	assert_int_equal(x.n_req, 0);
	assert_non_null(strstr(x.out, "HTTP/1.1 400 "));
	sf_http_conn_free(c);
	/* What is plain is served: chunked in any case, TE without it. */
	c = conn(&x, 100);
	feed(c, "POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\nTE: trailers\r\n\r\n"
		"5\r\nhello\r\n0\r\n\r\n");
	assert_int_equal(x.n_req, 1);
	assert_memory_equal(x.body, "hello", 5);
	sf_http_conn_free(c);
}

static void stream_bytes(void **state)
{
	struct rec x;
	struct sf_http_conn *c = conn(&x, 100);
	feed(c, "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
	assert_int_equal(sf_http_stream_begin(c, 200, "text/event-stream", NULL), 0);
	assert_int_equal(sf_http_stream_write(c, "data: 1\n\n", 9), 0);
	assert_int_equal(sf_http_stream_write(c, "0123456789abcdefX", 17), 0);
	assert_int_equal(sf_http_stream_end(c), 0);
	assert_string_equal(x.out, "HTTP/1.1 200 OK\r\nServer: superfluid\r\nContent-Type: "
			    "text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
			    "9\r\ndata: 1\n\n\r\n11\r\n0123456789abcdefX\r\n0\r\n\r\n");
	assert_false(sf_http_conn_busy(c));
	assert_false(sf_http_conn_should_close(c));
	sf_http_conn_free(c);

	c = conn(&x, 100);
	feed(c, "GET / HTTP/1.0\r\n\r\n");
	sf_http_stream_begin(c, 200, "text/event-stream", NULL);
	sf_http_stream_write(c, "abc", 3);
	sf_http_stream_end(c);
	assert_non_null(strstr(x.out, "\r\n\r\nabc"));
	assert_null(strstr(x.out, "chunked"));
	assert_true(sf_http_conn_should_close(c));
	sf_http_conn_free(c);
}

static void head_and_expect(void **state)
{
	struct rec x;
	struct sf_http_conn *c = conn(&x, 100);
	feed(c, "HEAD /health HTTP/1.1\r\n\r\n");
	sf_http_respond(c, 200, "application/json", "{\"a\":1}", 7, NULL);
	assert_non_null(strstr(x.out, "Content-Length: 7\r\n\r\n"));
	assert_null(strstr(x.out, "{\"a\":1}"));
	sf_http_conn_free(c);

	c = conn(&x, 100);
	feed(c, "POST / HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
	assert_string_equal(x.out, "HTTP/1.1 100 Continue\r\n\r\n");
	feed(c, "ok");
	assert_int_equal(x.n_req, 1);
	sf_http_conn_free(c);
}

/* ---- the head before the body, and the shared bound on bodies ---- */

static int n_heads;

static void refuse_head(void *arg, const struct sf_http_request *r)
{
	struct rec *x = arg;
	n_heads++;
	assert_int_equal(r->body_len, 0);
	if (!sf_http_header(r, "authorization"))
		sf_http_respond(x->c, 401, "text/plain", "key", 3, NULL);
}

static struct sf_http_conn *conn_with(struct rec *x, struct sf_http_budget *b)
{
	memset(x, 0, sizeof(*x));
	struct sf_http_limits lim = { .max_head = 1024, .max_body = 1 << 20, .budget = b };
	struct sf_http_conn_ops ops = { .arg = x, .on_request = on_request, .on_head = refuse_head,
					.write = on_write };
	x->c = sf_http_conn_new(&lim, &ops);
	assert_non_null(x->c);
	return x->c;
}

/* on_head answers before the body: no 100 Continue, no body byte taken, the connection
 * closes; with a key the body is read and the request handed out whole. */
static void head_answered_before_the_body(void **state)
{
	struct rec x;
	n_heads = 0;
	struct sf_http_conn *c = conn_with(&x, NULL);
	feed(c, "POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 500000\r\n\r\nxxxx");
	assert_int_equal(n_heads, 1);
	assert_int_equal(x.n_req, 0);
	assert_null(strstr(x.out, "100 Continue"));
	assert_non_null(strstr(x.out, "HTTP/1.1 401 Unauthorized\r\n"));
	assert_non_null(strstr(x.out, "Connection: close\r\n"));
	assert_true(sf_http_conn_should_close(c));
	feed(c, "more body bytes, ignored");
	assert_int_equal(x.n_req, 0);
	sf_http_conn_free(c);

	c = conn_with(&x, NULL);
	feed(c, "POST /a HTTP/1.1\r\nAuthorization: k\r\nExpect: 100-continue\r\n"
		"Content-Length: 4\r\n\r\n");
	assert_non_null(strstr(x.out, "100 Continue"));
	feed(c, "abcd");
	assert_int_equal(x.n_req, 1);
	assert_int_equal(x.body_len, 4);
	sf_http_conn_free(c);
}

/* Bodies being received count against the shared bound from their Content-Length (chunked:
 * as they come); past it a 503 with Retry-After; a body whole, or a connection freed, gives
 * its bytes back; a body larger than the bound is a 413. */
static void bodies_share_a_bound(void **state)
{
	struct sf_http_budget b = { .max = 1000 };
	struct rec x, y, z;
	struct sf_http_conn *c = conn_with(&x, &b);
	feed(c, "POST /a HTTP/1.1\r\nAuthorization: k\r\nContent-Length: 600\r\n\r\nab");
	assert_int_equal(b.used, 600);
	struct sf_http_conn *d = conn_with(&y, &b);
	feed(d, "POST /a HTTP/1.1\r\nAuthorization: k\r\nContent-Length: 600\r\n\r\n");
	assert_non_null(strstr(y.out, "HTTP/1.1 503 Service Unavailable\r\n"));
	assert_non_null(strstr(y.out, "Retry-After: 1\r\n"));
	assert_int_equal(b.refused, 1);
	assert_int_equal(b.used, 600);
	sf_http_conn_free(d);
	struct sf_http_conn *e = conn_with(&z, &b);
	feed(e, "POST /a HTTP/1.1\r\nAuthorization: k\r\nTransfer-Encoding: chunked\r\n\r\n"
		"100\r\n");
	char chunk[300];
	memset(chunk, 'c', 256);
	chunk[256] = 0;
	feed(e, chunk);
	assert_int_equal(b.used, 856);
	feed(e, "\r\n200\r\n");
	memset(chunk, 'd', 200);
	chunk[200] = 0;
	feed(e, chunk); /* 856 + 200 > 1000 */
	assert_non_null(strstr(z.out, "503"));
	assert_int_equal(b.used, 600);
	sf_http_conn_free(e);
	char rest[700];
	memset(rest, 'r', 598);
	rest[598] = 0;
	feed(c, rest);
	assert_int_equal(x.n_req, 1);
	assert_int_equal(b.used, 0); /* whole: handed out */
	sf_http_conn_free(c);
	c = conn_with(&x, &b);
	feed(c, "POST /a HTTP/1.1\r\nAuthorization: k\r\nContent-Length: 1001\r\n\r\n");
	assert_non_null(strstr(x.out, "HTTP/1.1 413 "));
	assert_null(strstr(x.out, "Retry-After"));
	assert_int_equal(b.used, 0);
	sf_http_conn_free(c);
}

static void write_failure_closes(void **state)
{
	struct rec x;
	struct sf_http_conn *c = conn(&x, 100);
	feed(c, "GET / HTTP/1.1\r\n\r\n");
	x.fail_writes = true;
	assert_int_not_equal(sf_http_respond(c, 200, "text/plain", "x", 1, NULL), 0);
	assert_true(sf_http_conn_should_close(c));
	sf_http_conn_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(get_then_respond),
		cmocka_unit_test(post_byte_at_a_time),
		cmocka_unit_test(chunked_body),
		cmocka_unit_test(pipelined_one_at_a_time),
		cmocka_unit_test(answered_at_once_then_next),
		cmocka_unit_test(connection_close_and_http10),
		cmocka_unit_test(limits),
		cmocka_unit_test(bad_request_line),
		cmocka_unit_test(versions),
		cmocka_unit_test(ambiguous_framing),
		cmocka_unit_test(stream_bytes),
		cmocka_unit_test(head_and_expect),
		cmocka_unit_test(write_failure_closes),
		cmocka_unit_test(head_answered_before_the_body),
		cmocka_unit_test(bodies_share_a_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
