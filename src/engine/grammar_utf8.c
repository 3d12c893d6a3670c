/* Code point ranges as UTF-8 byte sequences: each range is split until every piece is a
 * sequence of byte ranges (the same length of encoding, and whole blocks of continuation bytes
 * below the first byte that differs), then chained as edges. */
#include "engine/grammar_internal.h"
#include "tok/tok.h" /* sf__utf8_put: a code point's UTF-8 bytes */

/* One piece a..b whose encodings have the same length n and differ only in a way each byte
 * position can take as a range: a chain of n byte-range edges. */
static int chain(struct gr_build *b, uint32_t a, uint32_t z, uint32_t from, uint32_t to,
		 struct sf_err *err)
{
	uint8_t ua[4], uz[4];
	int n = (int)sf__utf8_put(a, ua);
	sf__utf8_put(z, uz);
	uint32_t cur = from;
	for (int i = 0; i < n; i++) {
		uint32_t next = to;
		if (i + 1 < n && (next = gr_state(b, err)) == GR_NONE)
			return err->code;
		int rc = gr_edge(b, GR_E_BYTES, cur, next, 0, ua[i], uz[i], err);
		if (rc)
			return rc;
		cur = next;
	}
	return 0;
}

static int split(struct gr_build *b, uint32_t a, uint32_t z, uint32_t from, uint32_t to,
		 int depth, struct sf_err *err)
{
	if (a > z)
		return 0;
	if (depth > 64)
		return sf_err_set(err, SF_E_LIMIT, "grammar: a class splits too deeply");
	/* Surrogates are no characters. */
	if (a <= 0xdfff && z >= 0xd800) {
		int rc = a < 0xd800 ? split(b, a, 0xd7ff, from, to, depth + 1, err) : 0;
		if (!rc && z > 0xdfff)
			rc = split(b, 0xe000, z, from, to, depth + 1, err);
		return rc;
	}
	/* One length of encoding. */
	static const uint32_t last[3] = { 0x7f, 0x7ff, 0xffff };
	for (int i = 0; i < 3; i++)
		if (a <= last[i] && z > last[i]) {
			int rc = split(b, a, last[i], from, to, depth + 1, err);
			return rc ? rc : split(b, last[i] + 1, z, from, to, depth + 1, err);
		}
	if (z < 0x80)
		return chain(b, a, z, from, to, err);
	/* Below the first differing byte, whole blocks of continuation bytes. */
	int n = z < 0x800 ? 2 : z < 0x10000 ? 3 : 4;
	for (int i = 1; i < n; i++) {
		uint32_t m = (1u << (6 * i)) - 1;
		if ((a & ~m) != (z & ~m)) {
			if (a & m) {
				int rc = split(b, a, a | m, from, to, depth + 1, err);
				return rc ? rc : split(b, (a | m) + 1, z, from, to, depth + 1, err);
			}
			if ((z & m) != m) {
				int rc = split(b, a, (z & ~m) - 1, from, to, depth + 1, err);
				return rc ? rc : split(b, z & ~m, z, from, to, depth + 1, err);
			}
		}
	}
	return chain(b, a, z, from, to, err);
}

int gr_utf8_ranges(struct gr_build *b, const uint32_t *lo, const uint32_t *hi, size_t n,
		   uint32_t from, uint32_t to, struct sf_err *err)
{
	for (size_t i = 0; i < n; i++) {
		int rc = split(b, lo[i], hi[i], from, to, 0, err);
		if (rc)
			return rc;
	}
	return 0;
}
