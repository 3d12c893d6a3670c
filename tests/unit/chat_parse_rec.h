/* What the chat parser reported, as one transcript (tests of chat_parse.h, and its fuzz
 * harness): adjacent text events of one channel merged, so that any split of the input must
 * give the same transcript. Lines: "C:text" content, "R:text" reasoning, "B<i>:<id>:<name>"
 * a call begins, "A<i>:<json>" its arguments, "E<i>" it ends. Each event is checked as it
 * comes: text non-empty and valid UTF-8, arguments a JSON object, calls numbered in order
 * and begun, argued, ended in that order. */
#ifndef SF_TESTS_CHAT_PARSE_REC_H
#define SF_TESTS_CHAT_PARSE_REC_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/chat_parse.h"
#include "api/chat_parse_internal.h"

struct cp_rec {
	struct sf_str t;
	char last;        /* the last line's kind */
	uint32_t next;    /* the next call's index */
	int call_step;    /* 0 none open, 1 begun, 2 argued */
	const char *bad;  /* the first broken rule, or NULL */
	unsigned known_mask; /* tool_known: names "t0".."t31" allowed by bit; others always */
	bool use_hooks;
};

static void cp_line(struct cp_rec *r, char kind, const char *s, size_t n)
{
	if (r->t.len)
		sf_str_add(&r->t, "\n", 1);
	sf_str_add(&r->t, &kind, 1);
	sf_str_add(&r->t, s, n);
	r->last = kind;
}

static void cp_text(struct cp_rec *r, char kind, const char *s, size_t n)
{
	if (!n)
		r->bad = r->bad ? r->bad : "an empty text event";
	if (!sf_utf8_valid((const uint8_t *)s, n))
		r->bad = r->bad ? r->bad : "text that is not valid UTF-8";
	if (r->call_step)
		r->bad = r->bad ? r->bad : "text inside a call's events";
	if (r->last == kind) {
		sf_str_add(&r->t, s, n);
		return;
	}
	cp_line(r, kind, ":", 1);
	sf_str_add(&r->t, s, n);
}

static void cp_content(void *arg, const char *s, size_t n)
{
	cp_text(arg, 'C', s, n);
}

static void cp_reasoning(void *arg, const char *s, size_t n)
{
	cp_text(arg, 'R', s, n);
}

static void cp_begin(void *arg, uint32_t index, const char *id, const char *name)
{
	struct cp_rec *r = arg;
	if (index != r->next || r->call_step)
		r->bad = r->bad ? r->bad : "a call begun out of order";
	r->call_step = 1;
	char line[SF_CHAT_ID_MAX + SF_CHAT_NAME_MAX + 16];
	int n = snprintf(line, sizeof(line), "%u:%s:%s", index, id, name);
	cp_line(r, 'B', line, (size_t)n);
}

static void cp_args(void *arg, uint32_t index, const char *json, size_t len)
{
	struct cp_rec *r = arg;
	if (index != r->next || r->call_step != 1)
		r->bad = r->bad ? r->bad : "arguments out of order";
	if (!sfcp_json_object(json, len, NULL, 0, NULL))
		r->bad = r->bad ? r->bad : "arguments that are not a JSON object";
	r->call_step = 2;
	char head[16];
	int n = snprintf(head, sizeof(head), "%u:", index);
	cp_line(r, 'A', head, (size_t)n);
	sf_str_add(&r->t, json, len);
}

static void cp_end(void *arg, uint32_t index)
{
	struct cp_rec *r = arg;
	if (index != r->next || r->call_step != 2)
		r->bad = r->bad ? r->bad : "a call ended out of order";
	r->call_step = 0;
	r->next++;
	char line[16];
	int n = snprintf(line, sizeof(line), "%u", index);
	cp_line(r, 'E', line, (size_t)n);
}

static void cp_make_id(void *arg, uint32_t index, char id[SF_CHAT_ID_MAX])
{
	snprintf(id, SF_CHAT_ID_MAX, "id_%u", index);
}

static bool cp_known(void *arg, const char *name)
{
	const struct cp_rec *r = arg;
	if (name[0] != 't' || !name[1])
		return true;
	char *end;
	unsigned long k = strtoul(name + 1, &end, 10);
	return *end || k >= 32 || (r->known_mask >> k & 1);
}

/* Parses text[0..len) fed in the pieces that cuts[0..n_cuts) (ascending offsets) make;
 * returns the transcript (malloc'd), or a line saying which rule broke. */
static char *cp_run(enum sf_chat_format format, unsigned flags, bool hooks, unsigned known_mask,
		    const char *text, size_t len, const size_t *cuts, size_t n_cuts)
{
	struct cp_rec r = { .known_mask = known_mask };
	struct sf_chat_events ev = { .arg = &r, .content = cp_content, .reasoning = cp_reasoning,
				     .call_begin = cp_begin, .call_args = cp_args,
				     .call_end = cp_end };
	if (hooks) {
		ev.make_id = cp_make_id;
		ev.tool_known = cp_known;
	}
	struct sf_chat_parser p;
	sf_chat_parse_init(&p, format, flags);
	size_t at = 0;
	int rc = 0;
	for (size_t i = 0; i <= n_cuts; i++) {
		size_t to = i < n_cuts ? cuts[i] : len;
		rc |= sf_chat_parse_feed(&p, text + at, to - at, &ev);
		at = to;
	}
	rc |= sf_chat_parse_finish(&p, &ev);
	if (p.n_calls != r.next)
		r.bad = r.bad ? r.bad : "sf_chat_parse_calls differs from the calls reported";
	if (r.call_step)
		r.bad = r.bad ? r.bad : "a call left open";
	sf_chat_parse_free(&p);
	if (rc)
		r.bad = r.bad ? r.bad : "feed or finish failed";
	if (r.bad) {
		sf_str_free(&r.t);
		char *s = malloc(strlen(r.bad) + 8);
		sprintf(s, "BROKEN %s", r.bad);
		return s;
	}
	if (!r.t.p)
		return calloc(1, 1);
	return r.t.p;
}

#endif
