/* Growable byte strings and the UTF-8 rules the API's JSON needs (jansson refuses invalid
 * UTF-8): complete prefixes, and invalid sequences replaced by U+FFFD. */
#include "api/api_output.h"

#include <stdlib.h>
#include <string.h>

int sf_str_add(struct sf_str *s, const void *p, size_t n)
{
	if (n > SF_STR_MAX || s->len > SF_STR_MAX - n)
		return -1;
	if (s->len + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 64;
		while (cap < s->len + n + 1)
			cap *= 2;
		char *q = realloc(s->p, cap);
		if (!q)
			return -1;
		s->p = q;
		s->cap = cap;
	}
	if (n)
		memcpy(s->p + s->len, p, n);
	s->len += n;
	s->p[s->len] = 0;
	return 0;
}

void sf_str_free(struct sf_str *s)
{
	free(s->p);
	*s = (struct sf_str){ 0 };
}

/* The sequence at p[0..n): 1 valid (*used its length), 0 valid so far but cut short by n,
 * -1 invalid (*used the bytes of its maximal valid-looking start, at least 1). */
static int seq_at(const uint8_t *p, size_t n, size_t *used)
{
	uint8_t c = p[0];
	size_t len;
	uint8_t lo = 0x80, hi = 0xbf; /* the second byte's range */
	*used = 1;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f; /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f; /* at most U+10FFFF */
	} else {
		return -1;
	}
	for (size_t i = 1; i < len; i++) {
		if (i >= n) {
			*used = i;
			return 0;
		}
		uint8_t b = p[i];
		if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf)) {
			*used = i;
			return -1;
		}
	}
	*used = len;
	return 1;
}

size_t sf_utf8_complete_prefix(const uint8_t *p, size_t n)
{
	/* Only the last sequence can be cut short; it starts at most 3 bytes from the end. */
	size_t start = n > 3 ? n - 3 : 0;
	for (size_t i = start; i < n; i++) {
		size_t used;
		if (p[i] >= 0xc0 && seq_at(p + i, n - i, &used) == 0)
			return i;
	}
	return n;
}

static const char replacement[] = "\xef\xbf\xbd";

int sf_utf8_append_valid(struct sf_str *out, const uint8_t *p, size_t n)
{
	if (!n)
		return 0;
	size_t i = 0, run = 0; /* p[i - run .. i) is valid and not yet copied */
	while (i < n) {
		size_t used;
		int rc = seq_at(p + i, n - i, &used);
		if (rc == 1) {
			i += used;
			run += used;
			continue;
		}
		if (sf_str_add(out, p + i - run, run) || sf_str_add(out, replacement, 3))
			return -1;
		run = 0;
		i += used;
	}
	return sf_str_add(out, p + n - run, run);
}

bool sf_utf8_valid(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t used;
		if (seq_at(p + i, n - i, &used) != 1)
			return false;
		i += used;
	}
	return true;
}
