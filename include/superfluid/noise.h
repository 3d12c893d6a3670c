/* Noise protocol handshake (patterns NN and NNpsk0) over 25519 / ChaChaPoly / BLAKE2b, on
 * libsodium. Sans-I/O: callers pass message buffers in and out; nothing here touches a socket.
 *
 * Only what the fleet link needs: the tokens e, ee and psk. Keys live in the state structs and
 * are wiped by sf_noise_hs_wipe() / sf_noise_cs_wipe(). */
#ifndef SUPERFLUID_NOISE_H
#define SUPERFLUID_NOISE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define SF_NOISE_DHLEN 32
#define SF_NOISE_HASHLEN 64
#define SF_NOISE_KEYLEN 32
#define SF_NOISE_TAGLEN 16
#define SF_NOISE_PSKLEN 32
/* The Noise specification's limit on any one message, handshake or transport. */
#define SF_NOISE_MAX_MSG 65535

enum sf_noise_pattern {
	SF_NOISE_NN = 0,     /* -> e;  <- e, ee */
	SF_NOISE_NNPSK0 = 1, /* -> psk, e;  <- e, ee */
};

/* One direction's cipher: key and 64-bit counter nonce. */
struct sf_noise_cs {
	uint8_t k[SF_NOISE_KEYLEN];
	uint64_t n;
	bool has_key;
};

struct sf_noise_hs {
	enum sf_noise_pattern pattern;
	bool initiator;
	int msg_index; /* handshake messages processed so far: 0, 1, 2 (2 = done) */
	uint8_t ck[SF_NOISE_HASHLEN];
	uint8_t h[SF_NOISE_HASHLEN];
	struct sf_noise_cs cs; /* the symmetric state's cipher during the handshake */
	uint8_t e_priv[SF_NOISE_DHLEN];
	uint8_t e_pub[SF_NOISE_DHLEN];
	uint8_t re_pub[SF_NOISE_DHLEN];
	uint8_t psk[SF_NOISE_PSKLEN];
	bool has_psk;
	bool e_fixed; /* an ephemeral key set by the caller (test vectors only) */
};

/* Errors: negative values. */
enum sf_noise_err {
	SF_NOISE_OK = 0,
	SF_NOISE_E_STATE = -1,     /* call out of order for the pattern / role */
	SF_NOISE_E_SHORT = -2,     /* message shorter than the pattern requires */
	SF_NOISE_E_TOO_BIG = -3,   /* message or output over SF_NOISE_MAX_MSG or the buffer */
	SF_NOISE_E_DECRYPT = -4,   /* AEAD tag check failed (wrong key, altered, replayed) */
	SF_NOISE_E_DH = -5,        /* peer's public key gives a degenerate (all-zero) shared secret */
	SF_NOISE_E_NONCE = -6,     /* counter exhausted (2^64 - 1 messages) */
	SF_NOISE_E_ARG = -7,       /* bad argument (psk missing for a psk pattern, ...) */
};

/* Text naming a sf_noise_err value. */
const char *sf_noise_strerror(int err);

/* Starts a handshake. psk must be SF_NOISE_PSKLEN bytes for NNPSK0 and NULL for NN.
 * Returns 0 or a sf_noise_err. Calls sodium_init() if needed. */
int sf_noise_hs_init(struct sf_noise_hs *hs, enum sf_noise_pattern pattern, bool initiator,
		     const uint8_t *prologue, size_t prologue_len, const uint8_t *psk)
	__attribute__((warn_unused_result));

/* Test vectors only: use this ephemeral private key instead of a random one. Call after init,
 * before the first write. */
void sf_noise_hs_set_ephemeral(struct sf_noise_hs *hs, const uint8_t priv[static SF_NOISE_DHLEN]);

/* Writes the next handshake message carrying payload into out (capacity out_cap).
 * Returns the message length (>= 0) or a sf_noise_err. */
int sf_noise_hs_write(struct sf_noise_hs *hs, const uint8_t *payload, size_t payload_len,
		      uint8_t *out, size_t out_cap) __attribute__((warn_unused_result));

/* Reads the peer's next handshake message; the payload is written to payload_out (capacity
 * payload_cap). Returns the payload length (>= 0) or a sf_noise_err. A failed read leaves the
 * handshake unusable. */
int sf_noise_hs_read(struct sf_noise_hs *hs, const uint8_t *msg, size_t msg_len,
		     uint8_t *payload_out, size_t payload_cap) __attribute__((warn_unused_result));

/* True once both handshake messages are done. */
bool sf_noise_hs_done(const struct sf_noise_hs *hs);

/* After the handshake: the two transport ciphers (send, recv for this side) and the handshake
 * hash (SF_NOISE_HASHLEN bytes, may be NULL). Wipes the handshake state. Returns 0 or
 * SF_NOISE_E_STATE when the handshake is not done. */
int sf_noise_hs_split(struct sf_noise_hs *hs, struct sf_noise_cs *send, struct sf_noise_cs *recv,
		      uint8_t *handshake_hash) __attribute__((warn_unused_result));

void sf_noise_hs_wipe(struct sf_noise_hs *hs);

/* Transport: encrypts plaintext (len <= SF_NOISE_MAX_MSG - SF_NOISE_TAGLEN) with the counter
 * nonce and empty associated data into out (capacity >= len + SF_NOISE_TAGLEN; out may equal
 * plaintext). Returns the ciphertext length or a sf_noise_err. */
int sf_noise_cs_encrypt(struct sf_noise_cs *cs, const uint8_t *ad, size_t ad_len,
			const uint8_t *plaintext, size_t len, uint8_t *out)
	__attribute__((warn_unused_result));

/* Decrypts and checks; out capacity >= len - SF_NOISE_TAGLEN (out may equal ciphertext).
 * The nonce advances only on success. Returns the plaintext length or a sf_noise_err. */
int sf_noise_cs_decrypt(struct sf_noise_cs *cs, const uint8_t *ad, size_t ad_len,
			const uint8_t *ciphertext, size_t len, uint8_t *out)
	__attribute__((warn_unused_result));

void sf_noise_cs_wipe(struct sf_noise_cs *cs);

/* The psk the fleet link uses for an operator's token of any length: BLAKE2b-256 keyed by a
 * fixed label over the token bytes. out must hold SF_NOISE_PSKLEN bytes. */
void sf_noise_psk_from_token(const uint8_t *token, size_t token_len,
			     uint8_t out[static SF_NOISE_PSKLEN]);

#endif
