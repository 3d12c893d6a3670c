/* The simulated engine's scripted replies: a prompt's line  sim-reply: "<JSON string>"  makes
 * the generation exactly that string's text, so tests see each chat format's markup end to
 * end (random weights never write a tool call). */
#include "sim_internal.h"

#include <string.h>

#define MARK "sim-reply: "

/* Where the JSON string (its opening quote) of the last marker line in t[0..n) begins, or -1.
 * A marker starts the context, or follows a newline or a special token. */
static long last_marker(const uint32_t *t, size_t n)
{
	size_t k = sizeof(MARK) - 1;
	for (size_t i = n; i-- > 0;) {
		if (i + k >= n || t[i] != (uint8_t)MARK[0])
			continue;
		if (i > 0 && t[i - 1] != '\n' && t[i - 1] < 256)
			continue;
		size_t j = 1;
		while (j < k && t[i + j] == (uint8_t)MARK[j])
			j++;
		if (j == k && t[i + k] == '"')
			return (long)(i + k);
	}
	return -1;
}

static int hex4(const uint32_t *t, size_t n, size_t at, uint32_t *cp)
{
	*cp = 0;
	if (at + 4 > n)
		return -1;
	for (size_t i = at; i < at + 4; i++) {
		uint32_t c = t[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			d = (c | 0x20) - 'a' + 10;
		else
			return -1;
		*cp = *cp << 4 | d;
	}
	return 0;
}

/* Appends cp as UTF-8; false when it does not fit. */
static bool put_utf8(char *out, size_t cap, size_t *len, uint32_t cp)
{
	uint8_t b[4];
	size_t k;
	if (cp < 0x80) {
		b[0] = (uint8_t)cp, k = 1;
	} else if (cp < 0x800) {
		b[0] = (uint8_t)(0xc0 | cp >> 6), b[1] = (uint8_t)(0x80 | (cp & 0x3f)), k = 2;
	} else if (cp < 0x10000) {
		b[0] = (uint8_t)(0xe0 | cp >> 12), b[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		b[2] = (uint8_t)(0x80 | (cp & 0x3f)), k = 3;
	} else {
		b[0] = (uint8_t)(0xf0 | cp >> 18), b[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
		b[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)), b[3] = (uint8_t)(0x80 | (cp & 0x3f)), k = 4;
	}
	if (*len + k > cap)
		return false;
	memcpy(out + *len, b, k);
	*len += k;
	return true;
}

/* The text of the JSON string whose opening quote is t[q], into out (cap bytes); 0, or -1 when
 * it is not one (unclosed, a bad escape) or does not fit. A special token inside it stands
 * for its text. */
static int json_string(const uint32_t *t, size_t n, size_t q, char *out, size_t cap,
		       size_t *len)
{
	*len = 0;
	for (size_t i = q + 1; i < n; i++) {
		uint32_t c = t[i];
		if (c == '"')
			return 0;
		if (c >= 256) {
			uint8_t sp[32];
			size_t k;
			if (sim_token_bytes(NULL, c, sp, sizeof(sp), &k, NULL) || *len + k > cap)
				return -1;
			memcpy(out + *len, sp, k);
			*len += k;
			continue;
		}
		if (c != '\\') {
			if (*len == cap)
				return -1;
			out[(*len)++] = (char)c;
			continue;
		}
		if (++i == n)
			return -1;
		uint32_t cp;
		switch (t[i]) {
		case '"': case '\\': case '/': cp = t[i]; break;
		case 'b': cp = '\b'; break;
		case 'f': cp = '\f'; break;
		case 'n': cp = '\n'; break;
		case 'r': cp = '\r'; break;
		case 't': cp = '\t'; break;
		case 'u':
			if (hex4(t, n, i + 1, &cp))
				return -1;
			i += 4;
			if (cp >= 0xd800 && cp < 0xdc00) { /* a pair's high half: its low half next */
				uint32_t lo;
				if (i + 2 >= n || t[i + 1] != '\\' || t[i + 2] != 'u' ||
				    hex4(t, n, i + 3, &lo) || lo < 0xdc00 || lo >= 0xe000)
					return -1;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				i += 6;
			} else if (cp >= 0xdc00 && cp < 0xe000) {
				return -1;
			}
			break;
		default:
			return -1;
		}
		if (!put_utf8(out, cap, len, cp))
			return -1;
	}
	return -1;
}

bool sim_script_next(const uint32_t *ctx, size_t len, size_t n_gen, uint32_t *token)
{
	static const char bad[] = "sim-reply: not a JSON string of at most 4096 bytes";
	if (n_gen > len)
		return false;
	size_t n_prompt = len - n_gen;
	long q = last_marker(ctx, n_prompt);
	if (q < 0)
		return false;
	char text[SIM_SCRIPT_MAX];
	uint32_t toks[SIM_SCRIPT_MAX];
	size_t n_text, n_toks;
	if (json_string(ctx, n_prompt, (size_t)q, text, sizeof(text), &n_text)) {
		memcpy(text, bad, sizeof(bad) - 1);
		n_text = sizeof(bad) - 1;
	}
	/* Specials parsed: never more tokens than bytes. */
	if (sim_encode(NULL, text, n_text, true, toks, SIM_SCRIPT_MAX, &n_toks, NULL))
		return false; /* not reached */
	*token = n_gen < n_toks ? toks[n_gen] : SF_SIM_EOS;
	return true;
}
