/* Noise internals shared by noise_symmetric.c and noise_handshake.c. Not a public API. */
#ifndef SF_NOISE_INTERNAL_H
#define SF_NOISE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "superfluid/noise.h"

#define SF__NOISE_BLOCKLEN 128 /* BLAKE2b block size, for HMAC */

/* HMAC-BLAKE2b (RFC 2104) over d1 || d2 (either may be NULL when its length is 0). */
void sf__noise_hmac(const uint8_t *key, size_t key_len, const uint8_t *d1, size_t d1_len,
		    const uint8_t *d2, size_t d2_len, uint8_t out[SF_NOISE_HASHLEN]);

/* Noise HKDF: two outputs, or three when out3 is not NULL. Outputs may alias ck. */
void sf__noise_hkdf(const uint8_t ck[SF_NOISE_HASHLEN], const uint8_t *ikm, size_t ikm_len,
		    uint8_t out1[SF_NOISE_HASHLEN], uint8_t out2[SF_NOISE_HASHLEN], uint8_t *out3);

/* CipherState InitializeKey: k is SF_NOISE_KEYLEN bytes, or NULL for "empty". */
void sf__noise_cs_init(struct sf_noise_cs *cs, const uint8_t *k);

/* EncryptWithAd / DecryptWithAd. Without a key they copy the text. Return the output length
 * or a sf_noise_err; the nonce advances only on success. out may equal the input. */
int sf__noise_cs_encrypt_ad(struct sf_noise_cs *cs, const uint8_t *ad, size_t ad_len,
			    const uint8_t *pt, size_t len, uint8_t *out);
int sf__noise_cs_decrypt_ad(struct sf_noise_cs *cs, const uint8_t *ad, size_t ad_len,
			    const uint8_t *ct, size_t len, uint8_t *out);

/* SymmetricState, kept in the handshake struct (ck, h, cs). */
void sf__noise_ss_init(struct sf_noise_hs *hs, const char *protocol_name);
void sf__noise_mix_key(struct sf_noise_hs *hs, const uint8_t *ikm, size_t ikm_len);
void sf__noise_mix_hash(struct sf_noise_hs *hs, const uint8_t *data, size_t len);
void sf__noise_mix_key_and_hash(struct sf_noise_hs *hs, const uint8_t *ikm, size_t ikm_len);
int sf__noise_encrypt_and_hash(struct sf_noise_hs *hs, const uint8_t *pt, size_t len,
			       uint8_t *out);
int sf__noise_decrypt_and_hash(struct sf_noise_hs *hs, const uint8_t *ct, size_t len,
			       uint8_t *out);
void sf__noise_ss_split(struct sf_noise_hs *hs, struct sf_noise_cs *c1, struct sf_noise_cs *c2);

#endif
