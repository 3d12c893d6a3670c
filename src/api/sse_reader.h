/* Server-sent events, read incrementally (the client side of a stream): bytes in, one call
 * per event with its data lines joined by '\n'. The id field sets the last event id (kept
 * across events, as the spec says: last_id, for a Last-Event-ID when the stream is asked
 * for again); comments (':' lines), event names and retry fields are skipped; CRLF, CR and
 * LF line ends are all taken, as the spec allows. No I/O: a caller feeds what its
 * transport received. */
#ifndef SF_API_SSE_READER_H
#define SF_API_SSE_READER_H

#include <stddef.h>

#define SF_SSE_MAX_EVENT (4u << 20) /* bytes of one event's data */
#define SF_SSE_MAX_ID 64             /* bytes of an id kept; a longer one is ignored */

/* Returns 0 to go on, non-zero to stop (sf_sse_feed returns it). */
typedef int (*sf_sse_event_fn)(void *arg, const char *data, size_t len);

struct sf_sse_reader {
	sf_sse_event_fn fn;
	void *arg;
	char *line;         /* the line being read */
	size_t line_len, line_cap;
	char *data;         /* the event's data so far */
	size_t data_len, data_cap;
	int has_data;
	int after_cr;       /* the last byte was CR: a following LF ends nothing more */
	char id[SF_SSE_MAX_ID + 1];      /* the id field's value being read for this event */
	char last_id[SF_SSE_MAX_ID + 1]; /* the last dispatched event's id ("" when none) */
	int has_id;
};

void sf_sse_init(struct sf_sse_reader *r, sf_sse_event_fn fn, void *arg);
/* Reads n bytes. Returns 0, the callback's non-zero answer, or -1 when an event's data or a
 * line passes SF_SSE_MAX_EVENT or memory runs out. */
int sf_sse_feed(struct sf_sse_reader *r, const void *p, size_t n);
/* The stream ended: an event not yet ended by a blank line is dropped, as the spec says. */
void sf_sse_free(struct sf_sse_reader *r);

#endif
