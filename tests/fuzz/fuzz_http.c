/* The HTTP connection on any byte stream, split anywhere.
 *
 * Input: [split seed] then the stream. The stream is fed in pieces whose sizes come from the
 * seed; every request is answered (whole, or streamed in two chunks, by its path's first
 * letter) and the next one polled for. Checked: never two requests out at once, a request's
 * fields are NUL-terminated and within the limits, nothing parsed after an error. */
#include "fuzz_common.h"

#include <stdio.h>
#include <string.h>

#include "http/http_conn.h"

#define LIM_HEAD 2048
#define LIM_BODY 4096

struct state {
	struct sf_http_conn *c;
	unsigned outstanding, requests;
	size_t written;
};

static void on_request(void *arg, const struct sf_http_request *r)
{
	struct state *s = arg;
	if (s->outstanding)
		fuzz_fail("a second request handed out before the first was answered");
	s->outstanding = 1;
	s->requests++;
	if (r->body_len > LIM_BODY || r->body[r->body_len] || r->n_headers > SF_HTTP_MAX_HEADERS)
		fuzz_fail("a request past its limits");
	if (strlen(r->target) > LIM_HEAD || !r->method || !r->path || !r->query)
		fuzz_fail("a request's fields are not whole");
	for (uint32_t i = 0; i < r->n_headers; i++)
		(void)strlen(r->headers[i].name), (void)strlen(r->headers[i].value);
}

static int on_write(void *arg, const void *p, size_t n)
{
	struct state *s = arg;
	s->written += n;
	return 0;
}

static void answer(struct state *s, bool stream)
{
	if (!s->outstanding)
		return;
	s->outstanding = 0;
	if (stream) {
		sf_http_stream_begin(s->c, 200, "text/event-stream", "X-A: b\r\n");
		sf_http_stream_write(s->c, "data: x\n\n", 9);
		sf_http_stream_write(s->c, "data: [DONE]\n\n", 14);
		sf_http_stream_end(s->c);
	} else {
		sf_http_respond(s->c, 404, "application/json", "{}", 2, NULL);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint64_t seed = data[0] * 0x9e3779b97f4a7c15ULL + 1;
	struct state s = { 0 };
	struct sf_http_limits lim = { .max_head = LIM_HEAD, .max_body = LIM_BODY };
	struct sf_http_conn_ops ops = { .arg = &s, .on_request = on_request, .write = on_write };
	s.c = sf_http_conn_new(&lim, &ops);
	if (!s.c)
		return 0;
	const uint8_t *p = data + 1;
	size_t left = size - 1;
	while (left) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		size_t n = 1 + (size_t)((seed >> 33) % 64);
		if (n > left)
			n = left;
		size_t took = sf_http_conn_feed(s.c, p, n);
		if (took > n)
			fuzz_fail("feed took more than it was given");
		answer(&s, (seed >> 20) & 1);
		sf_http_conn_poll(s.c);
		answer(&s, (seed >> 21) & 1);
		if (!took && sf_http_conn_busy(s.c))
			fuzz_fail("stuck: busy with nothing outstanding");
		if (!took)
			break; /* the pipeline is full: a real owner would wait */
		p += took;
		left -= took;
		if (sf_http_conn_should_close(s.c) && !sf_http_conn_busy(s.c))
			break;
	}
	sf_http_conn_eof(s.c);
	sf_http_conn_free(s.c);
	return 0;
}
