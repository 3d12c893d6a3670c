/* The server-sent-event reader: events split at every byte, every line end, multi-line data,
 * comments and other fields skipped, an unfinished event dropped, the size bound, and a
 * callback that stops the feed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/sse_reader.h"
#include "testutil.h"

struct got {
	char text[4096];
	size_t len;
	int events, stop_at;
};

/* Each event appended as "<data>|". */
static int on_event(void *arg, const char *data, size_t len)
{
	struct got *g = arg;
	assert_int_equal(data[len], 0);
	assert_true(g->len + len + 1 < sizeof(g->text));
	memcpy(g->text + g->len, data, len);
	g->len += len;
	g->text[g->len++] = '|';
	g->text[g->len] = 0;
	return ++g->events == g->stop_at ? 7 : 0;
}

static const char stream[] =
	": a comment\r\n"
	"event: message\r\n"
	"data: {\"a\":1}\r\n"
	"\r\n"
	"data:no space\n"
	"id: 5\n"
	"retry: 10\n"
	"\n"
	"data: one\r"
	"data:  two\r"
	"\r"
	"data\n"
	"\n"
	"\n\n"
	"data: [DONE]\n\n"
	"data: never ended\n";
static const char want[] = "{\"a\":1}|no space|one\n two||[DONE]|";

static void whole_and_split(void **state)
{
	(void)state;
	size_t n = strlen(stream);
	/* In one piece, then split at every offset into two, then byte by byte. */
	for (size_t cut = 0; cut <= n + 1; cut++) {
		struct got g = { 0 };
		struct sf_sse_reader r;
		sf_sse_init(&r, on_event, &g);
		if (cut <= n) {
			assert_int_equal(sf_sse_feed(&r, stream, cut), 0);
			assert_int_equal(sf_sse_feed(&r, stream + cut, n - cut), 0);
		} else {
			for (size_t i = 0; i < n; i++)
				assert_int_equal(sf_sse_feed(&r, stream + i, 1), 0);
		}
		assert_string_equal(g.text, want);
		assert_int_equal(g.events, 5);
		sf_sse_free(&r);
	}
}

static void random_splits(void **state)
{
	(void)state;
	uint64_t seed = 42;
	size_t n = strlen(stream);
	for (int round = 0; round < 500; round++) {
		struct got g = { 0 };
		struct sf_sse_reader r;
		sf_sse_init(&r, on_event, &g);
		for (size_t at = 0; at < n;) {
			size_t k = 1 + sf_test_rand(&seed) % 9;
			if (k > n - at)
				k = n - at;
			assert_int_equal(sf_sse_feed(&r, stream + at, k), 0);
			at += k;
		}
		assert_string_equal(g.text, want);
		sf_sse_free(&r);
	}
}

static void stop_from_callback(void **state)
{
	(void)state;
	struct got g = { .stop_at = 2 };
	struct sf_sse_reader r;
	sf_sse_init(&r, on_event, &g);
	assert_int_equal(sf_sse_feed(&r, stream, strlen(stream)), 7);
	assert_string_equal(g.text, "{\"a\":1}|no space|");
	sf_sse_free(&r);
}

static void bounded(void **state)
{
	(void)state;
	struct got g = { 0 };
	struct sf_sse_reader r;
	sf_sse_init(&r, on_event, &g);
	size_t n = SF_SSE_MAX_EVENT / 4 + 1;
	char *chunk = malloc(n);
	assert_non_null(chunk);
	memset(chunk, 'x', n);
	assert_int_equal(sf_sse_feed(&r, "data: ", 6), 0);
	int rc = 0;
	for (int i = 0; i < 5 && !rc; i++) /* one line of more than the bound, no line end */
		rc = sf_sse_feed(&r, chunk, n);
	assert_int_equal(rc, -1);
	assert_int_equal(g.events, 0);
	sf_sse_free(&r);
	/* Many short data lines adding up past the bound fail the same way. */
	sf_sse_init(&r, on_event, &g);
	memset(chunk, 'y', 1024);
	memcpy(chunk, "data: ", 6);
	chunk[1023] = '\n';
	rc = 0;
	for (size_t i = 0; i < SF_SSE_MAX_EVENT / 1000 + 10 && !rc; i++)
		rc = sf_sse_feed(&r, chunk, 1024);
	assert_int_equal(rc, -1);
	assert_int_equal(g.events, 0);
	sf_sse_free(&r);
	free(chunk);
}

struct ids {
	struct sf_sse_reader *r;
	char seen[256];
};

static int on_id(void *arg, const char *data, size_t len)
{
	struct ids *k = arg;
	size_t at = strlen(k->seen);
	snprintf(k->seen + at, sizeof(k->seen) - at, "%s=%s|", data, k->r->last_id);
	return 0;
}

/* The id field: the event's own when it has one, the last one's otherwise (kept across
 * events, as a Last-Event-ID), an id alone sets it too, one past the bound is ignored. */
static void last_event_id(void **state)
{
	struct sf_sse_reader r;
	struct ids k = { .r = &r };
	sf_sse_init(&r, on_id, &k);
	char longid[SF_SSE_MAX_ID + 8];
	memset(longid, '9', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = 0;
	char in[512];
	snprintf(in, sizeof(in), "data: a\n\nid: 3\ndata: b\n\ndata: c\n\nid: 7\n\n"
		 "data: d\n\nid: %s\ndata: e\n\nid\ndata: f\n\n", longid);
	for (size_t i = 0; in[i]; i++)
		assert_int_equal(sf_sse_feed(&r, in + i, 1), 0);
	assert_string_equal(k.seen, "a=|b=3|c=3|d=7|e=7|f=|");
	sf_sse_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(whole_and_split),
		cmocka_unit_test(random_splits),
		cmocka_unit_test(stop_from_callback),
		cmocka_unit_test(bounded),
		cmocka_unit_test(last_event_id),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
