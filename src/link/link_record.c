/* Sealed records: the frame stream cut into Noise transport messages, each sent as a u16
 * big-endian length and the ciphertext. The counter nonce makes a replayed, reordered or
 * dropped record fail its check. */
#include "link/link_internal.h"

int sf__record_seal(struct sf_link *l, const uint8_t *p, size_t n)
{
	size_t records = (n + SF_RECORD_PLAIN_MAX - 1) / SF_RECORD_PLAIN_MAX;
	size_t need = n + records * SF_RECORD_OVERHEAD;
	uint8_t *w = sf_buf_reserve(&l->tx, need);
	if (!w)
		return SF_E_LIMIT;
	size_t wrote = 0;
	while (n) {
		size_t chunk = n < SF_RECORD_PLAIN_MAX ? n : SF_RECORD_PLAIN_MAX;
		int c = sf_noise_cs_encrypt(&l->tx_cs, NULL, 0, p, chunk, w + 2);
		if (c < 0)
			return sf__link_fail(l, SF_E_CRYPTO, "sealing a record failed: %s",
					     sf_noise_strerror(c));
		w[0] = (uint8_t)(c >> 8);
		w[1] = (uint8_t)c;
		w += 2 + (size_t)c;
		wrote += 2 + (size_t)c;
		p += chunk;
		n -= chunk;
	}
	l->tx.len += wrote;
	return 0;
}

int sf__record_open(struct sf_link *l)
{
	struct sf_buf *in = &l->rx_raw, *out = &l->rx_plain;
	if (sf_buf_used(in) < 2)
		return 0;
	const uint8_t *p = sf_buf_head(in);
	size_t len = (size_t)p[0] << 8 | p[1];
	if (len <= SF_NOISE_TAGLEN)
		return sf__link_fail(l, SF_E_PROTOCOL,
				     "sent a sealed record of %zu bytes, shorter than its tag", len);
	if (sf_buf_used(in) < 2 + len)
		return 0;
	uint8_t *dst = sf_buf_reserve(out, len - SF_NOISE_TAGLEN);
	if (!dst) /* cannot happen while frames fit the limit; fail rather than stall */
		return sf__link_fail(l, SF_E_LIMIT, "sealed records overran the receive buffer");
	int n = sf_noise_cs_decrypt(&l->rx_cs, NULL, 0, p + 2, len, dst);
	if (n < 0)
		return sf__link_fail(l, SF_E_SEAL,
				     "sent a sealed record that failed its check (%s): it was altered, "
				     "replayed, reordered or cut", sf_noise_strerror(n));
	out->len += (size_t)n;
	sf_buf_consume(in, 2 + len);
	return 1;
}
