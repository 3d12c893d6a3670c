/* Noise HandshakeState for NN and NNpsk0 (spec rev 34, sections 5.3 and 9), the transport
 * ciphers and the fleet psk derivation. */
#include <string.h>

#include <sodium.h>

#include "noise/noise_internal.h"

#define SF__NOISE_DEAD (-1) /* msg_index of a wiped or failed handshake */

static const char *const protocol_names[] = {
	[SF_NOISE_NN] = "Noise_NN_25519_ChaChaPoly_BLAKE2b",
	[SF_NOISE_NNPSK0] = "Noise_NNpsk0_25519_ChaChaPoly_BLAKE2b",
};

const char *sf_noise_strerror(int err)
{
	switch (err) {
	case SF_NOISE_OK: return "ok";
	case SF_NOISE_E_STATE: return "noise: call out of order";
	case SF_NOISE_E_SHORT: return "noise: message too short";
	case SF_NOISE_E_TOO_BIG: return "noise: message or output too big";
	case SF_NOISE_E_DECRYPT: return "noise: decryption failed";
	case SF_NOISE_E_DH: return "noise: degenerate Diffie-Hellman result";
	case SF_NOISE_E_NONCE: return "noise: nonce exhausted";
	case SF_NOISE_E_ARG: return "noise: bad argument";
	}
	return "noise: unknown error";
}

void sf_noise_hs_wipe(struct sf_noise_hs *hs)
{
	if (!hs)
		return;
	sodium_memzero(hs, sizeof(*hs));
	hs->msg_index = SF__NOISE_DEAD;
}

int sf_noise_hs_init(struct sf_noise_hs *hs, enum sf_noise_pattern pattern, bool initiator,
		     const uint8_t *prologue, size_t prologue_len, const uint8_t *psk)
{
	if (!hs)
		return SF_NOISE_E_ARG;
	sf_noise_hs_wipe(hs);
	if (sodium_init() < 0)
		return SF_NOISE_E_STATE; /* libsodium unusable: nothing here can run */
	if (pattern != SF_NOISE_NN && pattern != SF_NOISE_NNPSK0)
		return SF_NOISE_E_ARG;
	if ((pattern == SF_NOISE_NNPSK0) != (psk != NULL))
		return SF_NOISE_E_ARG;
	if (!prologue && prologue_len)
		return SF_NOISE_E_ARG;

	hs->pattern = pattern;
	hs->initiator = initiator;
	hs->msg_index = 0;
	if (psk) {
		memcpy(hs->psk, psk, SF_NOISE_PSKLEN);
		hs->has_psk = true;
	}
	sf__noise_ss_init(hs, protocol_names[pattern]);
	sf__noise_mix_hash(hs, prologue, prologue_len);
	return SF_NOISE_OK;
}

void sf_noise_hs_set_ephemeral(struct sf_noise_hs *hs, const uint8_t priv[static SF_NOISE_DHLEN])
{
	/* Only before this side's "e" token: message 0 for the initiator, 1 for the responder. */
	if (!hs || hs->msg_index < 0 || hs->msg_index > (hs->initiator ? 0 : 1))
		return;
	memcpy(hs->e_priv, priv, SF_NOISE_DHLEN);
	hs->e_fixed = true;
}

/* True when this side is due to write (else read) message msg_index. */
static bool our_turn_to_write(const struct sf_noise_hs *hs)
{
	return (hs->msg_index == 0) == hs->initiator;
}

/* Whether the payload of the current message is encrypted: after psk (message 0 of NNpsk0)
 * or after ee (message 1). */
static bool payload_keyed(const struct sf_noise_hs *hs)
{
	return hs->msg_index == 1 || hs->has_psk;
}

/* The "psk" token when it leads message 0, then the "e" token's key mixing. */
static void mix_psk_first(struct sf_noise_hs *hs)
{
	if (hs->msg_index == 0 && hs->has_psk)
		sf__noise_mix_key_and_hash(hs, hs->psk, SF_NOISE_PSKLEN);
}

static void mix_e(struct sf_noise_hs *hs, const uint8_t pub[SF_NOISE_DHLEN])
{
	sf__noise_mix_hash(hs, pub, SF_NOISE_DHLEN);
	if (hs->has_psk)
		sf__noise_mix_key(hs, pub, SF_NOISE_DHLEN);
}

/* The "ee" token. */
static int mix_ee(struct sf_noise_hs *hs)
{
	uint8_t dh[SF_NOISE_DHLEN];

	if (crypto_scalarmult(dh, hs->e_priv, hs->re_pub) != 0) {
		sodium_memzero(dh, sizeof(dh));
		return SF_NOISE_E_DH;
	}
	sf__noise_mix_key(hs, dh, sizeof(dh));
	sodium_memzero(dh, sizeof(dh));
	return SF_NOISE_OK;
}

int sf_noise_hs_write(struct sf_noise_hs *hs, const uint8_t *payload, size_t payload_len,
		      uint8_t *out, size_t out_cap)
{
	size_t need;
	int rc;

	if (!hs || hs->msg_index < 0 || hs->msg_index > 1 || !our_turn_to_write(hs))
		return SF_NOISE_E_STATE;
	if (!out || (payload_len && !payload))
		return SF_NOISE_E_ARG;
	/* Checked before any state changes, so these errors leave the handshake usable. */
	if (payload_len > SF_NOISE_MAX_MSG)
		return SF_NOISE_E_TOO_BIG;
	need = SF_NOISE_DHLEN + payload_len + (payload_keyed(hs) ? SF_NOISE_TAGLEN : 0);
	if (need > SF_NOISE_MAX_MSG || need > out_cap)
		return SF_NOISE_E_TOO_BIG;

	mix_psk_first(hs);
	if (!hs->e_fixed)
		randombytes_buf(hs->e_priv, sizeof(hs->e_priv));
	crypto_scalarmult_base(hs->e_pub, hs->e_priv);
	memcpy(out, hs->e_pub, SF_NOISE_DHLEN);
	mix_e(hs, hs->e_pub);
	if (hs->msg_index == 1) {
		rc = mix_ee(hs);
		if (rc < 0)
			goto fail;
	}
	rc = sf__noise_encrypt_and_hash(hs, payload, payload_len, out + SF_NOISE_DHLEN);
	if (rc < 0)
		goto fail;
	hs->msg_index++;
	return SF_NOISE_DHLEN + rc;
fail:
	sodium_memzero(out, out_cap);
	sf_noise_hs_wipe(hs);
	return rc;
}

static int hs_read(struct sf_noise_hs *hs, const uint8_t *msg, size_t msg_len,
		   uint8_t *payload_out, size_t payload_cap)
{
	size_t min, plen;
	int rc;

	if (hs->msg_index < 0 || hs->msg_index > 1 || our_turn_to_write(hs))
		return SF_NOISE_E_STATE;
	if (!msg && msg_len)
		return SF_NOISE_E_ARG;
	if (msg_len > SF_NOISE_MAX_MSG)
		return SF_NOISE_E_TOO_BIG;
	min = SF_NOISE_DHLEN + (payload_keyed(hs) ? SF_NOISE_TAGLEN : 0);
	if (msg_len < min)
		return SF_NOISE_E_SHORT;
	plen = msg_len - min;
	if (plen > payload_cap)
		return SF_NOISE_E_TOO_BIG;
	if (plen && !payload_out)
		return SF_NOISE_E_ARG;

	mix_psk_first(hs);
	memcpy(hs->re_pub, msg, SF_NOISE_DHLEN);
	mix_e(hs, hs->re_pub);
	if (hs->msg_index == 1) {
		rc = mix_ee(hs);
		if (rc < 0)
			return rc;
	}
	rc = sf__noise_decrypt_and_hash(hs, msg + SF_NOISE_DHLEN, msg_len - SF_NOISE_DHLEN,
					payload_out);
	if (rc < 0)
		return rc;
	hs->msg_index++;
	return rc;
}

int sf_noise_hs_read(struct sf_noise_hs *hs, const uint8_t *msg, size_t msg_len,
		     uint8_t *payload_out, size_t payload_cap)
{
	int rc;

	if (!hs)
		return SF_NOISE_E_ARG;
	rc = hs_read(hs, msg, msg_len, payload_out, payload_cap);
	if (rc < 0) {
		if (payload_out && payload_cap)
			sodium_memzero(payload_out, payload_cap);
		sf_noise_hs_wipe(hs);
	}
	return rc;
}

bool sf_noise_hs_done(const struct sf_noise_hs *hs)
{
	return hs && hs->msg_index == 2;
}

int sf_noise_hs_split(struct sf_noise_hs *hs, struct sf_noise_cs *send, struct sf_noise_cs *recv,
		      uint8_t *handshake_hash)
{
	if (!sf_noise_hs_done(hs))
		return SF_NOISE_E_STATE;
	if (!send || !recv || send == recv)
		return SF_NOISE_E_ARG;
	/* c1 is initiator -> responder, c2 the other way. */
	if (hs->initiator)
		sf__noise_ss_split(hs, send, recv);
	else
		sf__noise_ss_split(hs, recv, send);
	if (handshake_hash)
		memcpy(handshake_hash, hs->h, SF_NOISE_HASHLEN);
	sf_noise_hs_wipe(hs);
	return SF_NOISE_OK;
}

int sf_noise_cs_encrypt(struct sf_noise_cs *cs, const uint8_t *ad, size_t ad_len,
			const uint8_t *plaintext, size_t len, uint8_t *out)
{
	if (!cs || !cs->has_key)
		return SF_NOISE_E_STATE;
	if (!out || (len && !plaintext) || (ad_len && !ad))
		return SF_NOISE_E_ARG;
	if (len > SF_NOISE_MAX_MSG - SF_NOISE_TAGLEN)
		return SF_NOISE_E_TOO_BIG;
	return sf__noise_cs_encrypt_ad(cs, ad, ad_len, plaintext, len, out);
}

int sf_noise_cs_decrypt(struct sf_noise_cs *cs, const uint8_t *ad, size_t ad_len,
			const uint8_t *ciphertext, size_t len, uint8_t *out)
{
	if (!cs || !cs->has_key)
		return SF_NOISE_E_STATE;
	if ((len && !ciphertext) || (ad_len && !ad))
		return SF_NOISE_E_ARG;
	if (len > SF_NOISE_MAX_MSG)
		return SF_NOISE_E_TOO_BIG;
	if (len < SF_NOISE_TAGLEN)
		return SF_NOISE_E_SHORT;
	if (!out && len > SF_NOISE_TAGLEN)
		return SF_NOISE_E_ARG;
	return sf__noise_cs_decrypt_ad(cs, ad, ad_len, ciphertext, len, out);
}

void sf_noise_cs_wipe(struct sf_noise_cs *cs)
{
	if (cs)
		sodium_memzero(cs, sizeof(*cs));
}

void sf_noise_psk_from_token(const uint8_t *token, size_t token_len,
			     uint8_t out[static SF_NOISE_PSKLEN])
{
	static const char label[] = "superfluid fleet token v1";
	crypto_generichash_state st;

	/* The label (25 bytes, within BLAKE2b's 16..64 key range) is the BLAKE2b key. */
	crypto_generichash_init(&st, (const uint8_t *)label, sizeof(label) - 1, SF_NOISE_PSKLEN);
	if (token_len)
		crypto_generichash_update(&st, token, token_len);
	crypto_generichash_final(&st, out, SF_NOISE_PSKLEN);
	sodium_memzero(&st, sizeof(st));
}
