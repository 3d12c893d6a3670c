/* Noise CipherState and SymmetricState (spec rev 34, sections 4 and 5.1-5.2) for
 * ChaChaPoly / BLAKE2b. */
#include <string.h>

#include <sodium.h>

#include "noise/noise_internal.h"

static void hash_update(crypto_generichash_blake2b_state *st, const uint8_t *d, size_t len)
{
	if (len)
		crypto_generichash_blake2b_update(st, d, len);
}

void sf__noise_hmac(const uint8_t *key, size_t key_len, const uint8_t *d1, size_t d1_len,
		    const uint8_t *d2, size_t d2_len, uint8_t out[SF_NOISE_HASHLEN])
{
	uint8_t k[SF__NOISE_BLOCKLEN] = { 0 }, pad[SF__NOISE_BLOCKLEN], inner[SF_NOISE_HASHLEN];
	crypto_generichash_blake2b_state st;
	size_t i;

	if (key_len > SF__NOISE_BLOCKLEN)
		crypto_generichash_blake2b(k, SF_NOISE_HASHLEN, key, key_len, NULL, 0);
	else if (key_len)
		memcpy(k, key, key_len);

	for (i = 0; i < sizeof(pad); i++)
		pad[i] = k[i] ^ 0x36;
	crypto_generichash_blake2b_init(&st, NULL, 0, SF_NOISE_HASHLEN);
	hash_update(&st, pad, sizeof(pad));
	hash_update(&st, d1, d1_len);
	hash_update(&st, d2, d2_len);
	crypto_generichash_blake2b_final(&st, inner, sizeof(inner));

	for (i = 0; i < sizeof(pad); i++)
		pad[i] = k[i] ^ 0x5c;
	crypto_generichash_blake2b_init(&st, NULL, 0, SF_NOISE_HASHLEN);
	hash_update(&st, pad, sizeof(pad));
	hash_update(&st, inner, sizeof(inner));
	crypto_generichash_blake2b_final(&st, out, SF_NOISE_HASHLEN);

	sodium_memzero(k, sizeof(k));
	sodium_memzero(pad, sizeof(pad));
	sodium_memzero(inner, sizeof(inner));
	sodium_memzero(&st, sizeof(st));
}

void sf__noise_hkdf(const uint8_t ck[SF_NOISE_HASHLEN], const uint8_t *ikm, size_t ikm_len,
		    uint8_t out1[SF_NOISE_HASHLEN], uint8_t out2[SF_NOISE_HASHLEN], uint8_t *out3)
{
	uint8_t tk[SF_NOISE_HASHLEN], o1[SF_NOISE_HASHLEN], o2[SF_NOISE_HASHLEN];
	const uint8_t one = 1, two = 2, three = 3;

	sf__noise_hmac(ck, SF_NOISE_HASHLEN, ikm, ikm_len, NULL, 0, tk);
	sf__noise_hmac(tk, sizeof(tk), &one, 1, NULL, 0, o1);
	sf__noise_hmac(tk, sizeof(tk), o1, sizeof(o1), &two, 1, o2);
	if (out3)
		sf__noise_hmac(tk, sizeof(tk), o2, sizeof(o2), &three, 1, out3);
	memcpy(out1, o1, sizeof(o1));
	memcpy(out2, o2, sizeof(o2));

	sodium_memzero(tk, sizeof(tk));
	sodium_memzero(o1, sizeof(o1));
	sodium_memzero(o2, sizeof(o2));
}

void sf__noise_cs_init(struct sf_noise_cs *cs, const uint8_t *k)
{
	sodium_memzero(cs, sizeof(*cs));
	if (k) {
		memcpy(cs->k, k, SF_NOISE_KEYLEN);
		cs->has_key = true;
	}
}

/* ChaChaPoly nonce: 32 zero bits, then the counter little-endian. */
static void make_nonce(uint8_t nonce[crypto_aead_chacha20poly1305_IETF_NPUBBYTES], uint64_t n)
{
	memset(nonce, 0, 4);
	for (int i = 0; i < 8; i++)
		nonce[4 + i] = (uint8_t)(n >> (8 * i));
}

int sf__noise_cs_encrypt_ad(struct sf_noise_cs *cs, const uint8_t *ad, size_t ad_len,
			    const uint8_t *pt, size_t len, uint8_t *out)
{
	uint8_t nonce[crypto_aead_chacha20poly1305_IETF_NPUBBYTES];
	unsigned long long clen;

	if (!cs->has_key) {
		if (len)
			memmove(out, pt, len);
		return (int)len;
	}
	if (cs->n == UINT64_MAX) /* reserved by the spec */
		return SF_NOISE_E_NONCE;
	make_nonce(nonce, cs->n);
	crypto_aead_chacha20poly1305_ietf_encrypt(out, &clen, pt, len, ad, ad_len, NULL, nonce,
						  cs->k);
	cs->n++;
	return (int)clen;
}

int sf__noise_cs_decrypt_ad(struct sf_noise_cs *cs, const uint8_t *ad, size_t ad_len,
			    const uint8_t *ct, size_t len, uint8_t *out)
{
	uint8_t nonce[crypto_aead_chacha20poly1305_IETF_NPUBBYTES];
	unsigned long long mlen;

	if (!cs->has_key) {
		if (len)
			memmove(out, ct, len);
		return (int)len;
	}
	if (len < SF_NOISE_TAGLEN)
		return SF_NOISE_E_SHORT;
	if (cs->n == UINT64_MAX)
		return SF_NOISE_E_NONCE;
	make_nonce(nonce, cs->n);
	if (crypto_aead_chacha20poly1305_ietf_decrypt(out, &mlen, NULL, ct, len, ad, ad_len, nonce,
						      cs->k) != 0)
		return SF_NOISE_E_DECRYPT;
	cs->n++;
	return (int)mlen;
}

void sf__noise_ss_init(struct sf_noise_hs *hs, const char *protocol_name)
{
	size_t len = strlen(protocol_name);

	memset(hs->h, 0, sizeof(hs->h));
	if (len <= SF_NOISE_HASHLEN)
		memcpy(hs->h, protocol_name, len);
	else
		crypto_generichash_blake2b(hs->h, SF_NOISE_HASHLEN, (const uint8_t *)protocol_name,
					   len, NULL, 0);
	memcpy(hs->ck, hs->h, SF_NOISE_HASHLEN);
	sf__noise_cs_init(&hs->cs, NULL);
}

/* HASHLEN is 64, so temp_k is truncated to its first 32 bytes. */
void sf__noise_mix_key(struct sf_noise_hs *hs, const uint8_t *ikm, size_t ikm_len)
{
	uint8_t tk[SF_NOISE_HASHLEN];

	sf__noise_hkdf(hs->ck, ikm, ikm_len, hs->ck, tk, NULL);
	sf__noise_cs_init(&hs->cs, tk);
	sodium_memzero(tk, sizeof(tk));
}

void sf__noise_mix_hash(struct sf_noise_hs *hs, const uint8_t *data, size_t len)
{
	crypto_generichash_blake2b_state st;

	crypto_generichash_blake2b_init(&st, NULL, 0, SF_NOISE_HASHLEN);
	hash_update(&st, hs->h, sizeof(hs->h));
	hash_update(&st, data, len);
	crypto_generichash_blake2b_final(&st, hs->h, sizeof(hs->h));
}

void sf__noise_mix_key_and_hash(struct sf_noise_hs *hs, const uint8_t *ikm, size_t ikm_len)
{
	uint8_t th[SF_NOISE_HASHLEN], tk[SF_NOISE_HASHLEN];

	sf__noise_hkdf(hs->ck, ikm, ikm_len, hs->ck, th, tk);
	sf__noise_mix_hash(hs, th, sizeof(th));
	sf__noise_cs_init(&hs->cs, tk);
	sodium_memzero(th, sizeof(th));
	sodium_memzero(tk, sizeof(tk));
}

int sf__noise_encrypt_and_hash(struct sf_noise_hs *hs, const uint8_t *pt, size_t len,
			       uint8_t *out)
{
	int rc = sf__noise_cs_encrypt_ad(&hs->cs, hs->h, sizeof(hs->h), pt, len, out);

	if (rc >= 0)
		sf__noise_mix_hash(hs, out, (size_t)rc);
	return rc;
}

/* The new h is computed before decrypting, since out may overwrite ct. */
int sf__noise_decrypt_and_hash(struct sf_noise_hs *hs, const uint8_t *ct, size_t len,
			       uint8_t *out)
{
	uint8_t old_h[SF_NOISE_HASHLEN];
	int rc;

	memcpy(old_h, hs->h, sizeof(old_h));
	sf__noise_mix_hash(hs, ct, len);
	rc = sf__noise_cs_decrypt_ad(&hs->cs, old_h, sizeof(old_h), ct, len, out);
	if (rc < 0)
		memcpy(hs->h, old_h, sizeof(old_h));
	sodium_memzero(old_h, sizeof(old_h));
	return rc;
}

void sf__noise_ss_split(struct sf_noise_hs *hs, struct sf_noise_cs *c1, struct sf_noise_cs *c2)
{
	uint8_t k1[SF_NOISE_HASHLEN], k2[SF_NOISE_HASHLEN];

	sf__noise_hkdf(hs->ck, NULL, 0, k1, k2, NULL);
	sf__noise_cs_init(c1, k1);
	sf__noise_cs_init(c2, k2);
	sodium_memzero(k1, sizeof(k1));
	sodium_memzero(k2, sizeof(k2));
}
