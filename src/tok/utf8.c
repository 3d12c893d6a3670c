/* UTF-8 the way llama.cpp reads it, and GPT-2's map of bytes to printable characters. */
#include "tok/tok.h"

#include <string.h>

static bool cont(uint8_t b)
{
	return (b & 0xc0) == 0x80;
}

/* llama.cpp's unicode_cpt_from_utf8: a lead byte's length by its bits, the continuation
 * bytes checked, nothing else (overlong forms and surrogates pass). A value past U+10FFFF
 * (which llama.cpp cannot encode again and aborts on) is taken as a bad byte too. */
uint32_t sf__utf8_next(const uint8_t *p, size_t n, size_t *i)
{
	size_t k = *i;
	uint8_t b = p[k];
	uint32_t c;
	if (!(b & 0x80)) {
		*i = k + 1;
		return b;
	}
	if (!(b & 0x40))
		goto bad;
	if (!(b & 0x20)) {
		if (k + 1 >= n || !cont(p[k + 1]))
			goto bad;
		*i = k + 2;
		return (uint32_t)(b & 0x1f) << 6 | (p[k + 1] & 0x3f);
	}
	if (!(b & 0x10)) {
		if (k + 2 >= n || !cont(p[k + 1]) || !cont(p[k + 2]))
			goto bad;
		*i = k + 3;
		return (uint32_t)(b & 0x0f) << 12 | (uint32_t)(p[k + 1] & 0x3f) << 6 | (p[k + 2] & 0x3f);
	}
	if (!(b & 0x08)) {
		if (k + 3 >= n || !cont(p[k + 1]) || !cont(p[k + 2]) || !cont(p[k + 3]))
			goto bad;
		c = (uint32_t)(b & 0x07) << 18 | (uint32_t)(p[k + 1] & 0x3f) << 12 |
		    (uint32_t)(p[k + 2] & 0x3f) << 6 | (p[k + 3] & 0x3f);
		if (c > 0x10ffff)
			goto bad;
		*i = k + 4;
		return c;
	}
bad:
	*i = k + 1;
	return 0xfffd;
}

size_t sf__utf8_put(uint32_t c, uint8_t *out)
{
	if (c < 0x80) {
		out[0] = (uint8_t)c;
		return 1;
	}
	if (c < 0x800) {
		out[0] = (uint8_t)(0xc0 | c >> 6);
		out[1] = (uint8_t)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		out[0] = (uint8_t)(0xe0 | c >> 12);
		out[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
		out[2] = (uint8_t)(0x80 | (c & 0x3f));
		return 3;
	}
	out[0] = (uint8_t)(0xf0 | c >> 18);
	out[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3f));
	out[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
	out[3] = (uint8_t)(0x80 | (c & 0x3f));
	return 4;
}

/* GPT-2 keeps the printable bytes !..~, ¡..¬ and ®..ÿ as themselves and moves the other 68
 * to U+0100 onwards, in byte order. */
static bool printable(unsigned b)
{
	return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

static uint32_t byte_char(unsigned b)
{
	if (printable(b))
		return b;
	uint32_t k = 0;
	for (unsigned x = 0; x < b; x++)
		k += !printable(x);
	return 0x100 + k;
}

void sf__bytemap_init(struct sf__bytemap *m)
{
	for (unsigned b = 0; b < 256; b++)
		m->enc[b][0] = (uint8_t)sf__utf8_put(byte_char(b), &m->enc[b][1]);
}

int sf__bytemap_decode(uint32_t c)
{
	if (c < 0x100)
		return printable(c) ? (int)c : -1;
	if (c >= 0x100 + 68)
		return -1;
	uint32_t k = c - 0x100;
	for (unsigned x = 0; x < 256; x++)
		if (!printable(x) && k-- == 0)
			return (int)x;
	return -1;
}
