/* The Noise handshake (NN, NNpsk0) and transport ciphers on a peer's bytes.
 *
 * Input: [mode] then u16 LE length + bytes, repeated. Mode bit 0: NNpsk0 (psk from
 * FUZZ_TOKEN), else NN; bit 1: this side is the initiator, else the responder; bits 2..7: k,
 * the payload buffer is k - 1 bytes (0: big enough). The first piece is the peer's handshake
 * message (1 for a responder, 2 for an initiator); the rest are transport ciphertexts. With
 * the generator reset per input, this side's ephemeral key is fixed, so recorded transcripts
 * (make_corpus) get through the handshake. */
#include "fuzz_common.h"

#include <string.h>

#include <superfluid/noise.h>

struct rd {
	const uint8_t *p;
	size_t left;
};

/* The next length-prefixed piece, cut short at the end of the input; false when none. */
static bool take(struct rd *r, const uint8_t **p, size_t *n)
{
	if (r->left < 2)
		return false;
	size_t len = (size_t)(r->p[0] | r->p[1] << 8);
	r->p += 2;
	r->left -= 2;
	if (len > r->left)
		len = r->left;
	*p = r->p;
	*n = len;
	r->p += len;
	r->left -= len;
	return true;
}

static uint8_t pt[SF_NOISE_MAX_MSG + 64], ct[SF_NOISE_MAX_MSG + 64];

static void check_dead(struct sf_noise_hs *hs)
{
	uint8_t out[128];
	if (sf_noise_hs_write(hs, NULL, 0, out, sizeof(out)) != SF_NOISE_E_STATE ||
	    sf_noise_hs_read(hs, out, 64, pt, sizeof(pt)) != SF_NOISE_E_STATE)
		fuzz_fail("a failed handshake can still be used");
}

/* After the handshake: the rest of the input is ciphertexts for recv; whatever opens is
 * sealed back with send. */
static void transport(struct rd *r, struct sf_noise_cs *send, struct sf_noise_cs *recv)
{
	const uint8_t *p;
	size_t n;

	while (take(r, &p, &n)) {
		uint64_t nonce = recv->n;
		int rc = sf_noise_cs_decrypt(recv, NULL, 0, p, n, pt);
		if (rc < 0) {
			if (recv->n != nonce)
				fuzz_fail("a failed decrypt moved the nonce");
			if (n < SF_NOISE_TAGLEN ? rc != SF_NOISE_E_SHORT : rc != SF_NOISE_E_DECRYPT)
				fuzz_fail("decrypt of %zu bytes: %s", n, sf_noise_strerror(rc));
			continue;
		}
		if ((size_t)rc != n - SF_NOISE_TAGLEN || recv->n != nonce + 1)
			fuzz_fail("decrypt of %zu bytes gave %d", n, rc);
		int w = sf_noise_cs_encrypt(send, NULL, 0, pt, (size_t)rc, ct);
		if (w != rc + SF_NOISE_TAGLEN)
			fuzz_fail("encrypt of %d bytes gave %d", rc, w);
	}
}

/* The read of the peer's message failed or worked as the lengths say it must. */
static void check_read(int rc, size_t n, size_t overhead, size_t cap)
{
	if (rc >= 0) {
		if ((size_t)rc != n - overhead || (size_t)rc > cap)
			fuzz_fail("read of %zu bytes gave a payload of %d", n, rc);
		return;
	}
	if (n < overhead && rc != SF_NOISE_E_SHORT)
		fuzz_fail("read of a short message (%zu bytes): %s", n, sf_noise_strerror(rc));
	if (n >= overhead && n - overhead > cap && rc != SF_NOISE_E_TOO_BIG)
		fuzz_fail("read of %zu bytes into %zu: %s", n, cap, sf_noise_strerror(rc));
	if (rc != SF_NOISE_E_SHORT && rc != SF_NOISE_E_TOO_BIG && rc != SF_NOISE_E_DECRYPT &&
	    rc != SF_NOISE_E_DH)
		fuzz_fail("read of %zu bytes: unexpected %s", n, sf_noise_strerror(rc));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	fuzz_rng_install();
	fuzz_rng_reset(FUZZ_RNG_SEED);

	uint8_t mode = data[0];
	bool psk_mode = mode & FUZZ_NOISE_PSK, initiator = mode & FUZZ_NOISE_INITIATOR;
	size_t cap = (mode >> 2) ? (size_t)(mode >> 2) - 1 : sizeof(pt);
	struct rd r = { data + 1, size - 1 };
	uint8_t psk[SF_NOISE_PSKLEN], out[256];
	struct sf_noise_hs hs;
	struct sf_noise_cs send, recv;
	const uint8_t *msg;
	size_t n;
	int rc;

	sf_noise_psk_from_token((const uint8_t *)FUZZ_TOKEN, strlen(FUZZ_TOKEN), psk);
	rc = sf_noise_hs_init(&hs, psk_mode ? SF_NOISE_NNPSK0 : SF_NOISE_NN, initiator,
			      (const uint8_t *)FUZZ_NOISE_PROLOGUE, strlen(FUZZ_NOISE_PROLOGUE),
			      psk_mode ? psk : NULL);
	if (rc)
		fuzz_fail("handshake init: %s", sf_noise_strerror(rc));

	if (initiator) {
		rc = sf_noise_hs_write(&hs, NULL, 0, out, sizeof(out));
		if (rc != SF_NOISE_DHLEN + (psk_mode ? SF_NOISE_TAGLEN : 0))
			fuzz_fail("message 1: %d", rc);
		if (!take(&r, &msg, &n))
			goto out;
		rc = sf_noise_hs_read(&hs, msg, n, pt, cap);
		check_read(rc, n, SF_NOISE_DHLEN + SF_NOISE_TAGLEN, cap);
		if (rc < 0) {
			check_dead(&hs);
			goto out;
		}
	} else {
		if (!take(&r, &msg, &n))
			goto out;
		rc = sf_noise_hs_read(&hs, msg, n, pt, cap);
		check_read(rc, n, SF_NOISE_DHLEN + (psk_mode ? SF_NOISE_TAGLEN : 0), cap);
		if (rc < 0) {
			check_dead(&hs);
			goto out;
		}
		if (sf_noise_hs_done(&hs))
			fuzz_fail("done after message 1");
		rc = sf_noise_hs_write(&hs, (const uint8_t *)"ok", 2, out, sizeof(out));
		if (rc == SF_NOISE_E_DH) /* the peer sent a low-order point */
			goto out;
		if (rc != SF_NOISE_DHLEN + 2 + SF_NOISE_TAGLEN)
			fuzz_fail("message 2: %s", rc < 0 ? sf_noise_strerror(rc) : "wrong length");
	}
	if (!sf_noise_hs_done(&hs))
		fuzz_fail("not done after message 2");
	uint8_t h[SF_NOISE_HASHLEN];
	if (sf_noise_hs_split(&hs, &send, &recv, h))
		fuzz_fail("split failed");
	transport(&r, &send, &recv);
	sf_noise_cs_wipe(&send);
	sf_noise_cs_wipe(&recv);
out:
	sf_noise_hs_wipe(&hs);
	return 0;
}
