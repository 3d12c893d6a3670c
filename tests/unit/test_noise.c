/* Unit tests for the Noise NN / NNpsk0 handshake and transport ciphers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "superfluid/noise.h"
#include "noise/noise_internal.h"
#include "testutil.h"

#define VECTORS_FILE SF_VECTORS_DIR "/noise-25519-chachapoly-blake2b.json"
#define NN_NAME "Noise_NN_25519_ChaChaPoly_BLAKE2b"
#define NNPSK0_NAME "Noise_NNpsk0_25519_ChaChaPoly_BLAKE2b"

static const uint8_t psk_a[SF_NOISE_PSKLEN] = "0123456789abcdef0123456789abcdef";
static const uint8_t psk_b[SF_NOISE_PSKLEN] = "0123456789abcdef0123456789abcdeF";
static const uint8_t fixed_ei[SF_NOISE_DHLEN] = { 1, 2, 3, 4, 5 };
static const uint8_t fixed_er[SF_NOISE_DHLEN] = { 9, 8, 7, 6, 5 };

static uint8_t big_in[SF_NOISE_MAX_MSG + 64];
static uint8_t big_out[SF_NOISE_MAX_MSG + 64];

struct pair {
	struct sf_noise_cs is, ir, rs, rr; /* initiator send/recv, responder send/recv */
};

static const uint8_t *psk_for(enum sf_noise_pattern p, const uint8_t *psk)
{
	return p == SF_NOISE_NNPSK0 ? psk : NULL;
}

static void init_both(struct sf_noise_hs *i, struct sf_noise_hs *r, enum sf_noise_pattern p,
		      const uint8_t *psk_i, const uint8_t *psk_r)
{
	assert_int_equal(sf_noise_hs_init(i, p, true, (const uint8_t *)"pro", 3, psk_i), 0);
	assert_int_equal(sf_noise_hs_init(r, p, false, (const uint8_t *)"pro", 3, psk_r), 0);
}

/* A full random-key handshake with payloads, checked on both sides. */
static void handshake(enum sf_noise_pattern p, struct pair *c)
{
	struct sf_noise_hs i, r;
	uint8_t m[256], pl[256], hi[SF_NOISE_HASHLEN], hr[SF_NOISE_HASHLEN];
	int n;

	init_both(&i, &r, p, psk_for(p, psk_a), psk_for(p, psk_a));
	n = sf_noise_hs_write(&i, (const uint8_t *)"hello", 5, m, sizeof(m));
	assert_int_equal(n, 32 + 5 + (p == SF_NOISE_NNPSK0 ? 16 : 0));
	assert_int_equal(sf_noise_hs_read(&r, m, (size_t)n, pl, sizeof(pl)), 5);
	assert_memory_equal(pl, "hello", 5);
	assert_false(sf_noise_hs_done(&r));
	n = sf_noise_hs_write(&r, (const uint8_t *)"world!", 6, m, sizeof(m));
	assert_int_equal(n, 32 + 6 + 16);
	assert_int_equal(sf_noise_hs_read(&i, m, (size_t)n, pl, sizeof(pl)), 6);
	assert_memory_equal(pl, "world!", 6);
	assert_true(sf_noise_hs_done(&i));
	assert_true(sf_noise_hs_done(&r));
	assert_int_equal(sf_noise_hs_split(&i, &c->is, &c->ir, hi), 0);
	assert_int_equal(sf_noise_hs_split(&r, &c->rs, &c->rr, hr), 0);
	assert_memory_equal(hi, hr, sizeof(hi));
	assert_memory_equal(c->is.k, c->rr.k, SF_NOISE_KEYLEN);
	assert_memory_equal(c->ir.k, c->rs.k, SF_NOISE_KEYLEN);
	assert_memory_not_equal(c->is.k, c->ir.k, SF_NOISE_KEYLEN);
}

static size_t hex_field(json_t *obj, const char *key, uint8_t *out, size_t cap)
{
	json_t *s = json_object_get(obj, key);
	long n;

	assert_non_null(s);
	assert_true(json_is_string(s));
	n = sf_test_unhex(json_string_value(s), out, cap);
	assert_true(n >= 0);
	return (size_t)n;
}

static void run_vector(json_t *v, enum sf_noise_pattern p)
{
	struct sf_noise_hs i, r;
	struct pair c;
	uint8_t pro_i[256], pro_r[256], ei[32], er[32], psk_i[32], psk_r[32];
	uint8_t want_h[SF_NOISE_HASHLEN], hi[SF_NOISE_HASHLEN], hr[SF_NOISE_HASHLEN];
	uint8_t pl[1024], ct[1024], got[1024], back[1024];
	size_t npi, npr, idx;
	json_t *msgs, *m;

	npi = hex_field(v, "init_prologue", pro_i, sizeof(pro_i));
	npr = hex_field(v, "resp_prologue", pro_r, sizeof(pro_r));
	assert_int_equal(hex_field(v, "init_ephemeral", ei, sizeof(ei)), 32);
	assert_int_equal(hex_field(v, "resp_ephemeral", er, sizeof(er)), 32);
	assert_int_equal(hex_field(v, "handshake_hash", want_h, sizeof(want_h)), 64);
	if (p == SF_NOISE_NNPSK0) {
		json_t *a = json_object_get(v, "init_psks"), *b = json_object_get(v, "resp_psks");

		assert_int_equal(json_array_size(a), 1);
		assert_int_equal(json_array_size(b), 1);
		assert_int_equal(sf_test_unhex(json_string_value(json_array_get(a, 0)), psk_i, 32), 32);
		assert_int_equal(sf_test_unhex(json_string_value(json_array_get(b, 0)), psk_r, 32), 32);
	}
	assert_int_equal(sf_noise_hs_init(&i, p, true, pro_i, npi, psk_for(p, psk_i)), 0);
	assert_int_equal(sf_noise_hs_init(&r, p, false, pro_r, npr, psk_for(p, psk_r)), 0);
	sf_noise_hs_set_ephemeral(&i, ei);
	sf_noise_hs_set_ephemeral(&r, er);

	msgs = json_object_get(v, "messages");
	assert_true(json_array_size(msgs) >= 2);
	json_array_foreach(msgs, idx, m) {
		size_t npl = hex_field(m, "payload", pl, sizeof(pl));
		size_t nct = hex_field(m, "ciphertext", ct, sizeof(ct));
		bool from_i = idx % 2 == 0;
		int n;

		if (idx < 2) {
			n = sf_noise_hs_write(from_i ? &i : &r, pl, npl, got, sizeof(got));
			assert_int_equal(n, (int)nct);
			assert_memory_equal(got, ct, nct);
			n = sf_noise_hs_read(from_i ? &r : &i, ct, nct, back, sizeof(back));
		} else {
			n = sf_noise_cs_encrypt(from_i ? &c.is : &c.rs, NULL, 0, pl, npl, got);
			assert_int_equal(n, (int)nct);
			assert_memory_equal(got, ct, nct);
			n = sf_noise_cs_decrypt(from_i ? &c.rr : &c.ir, NULL, 0, ct, nct, back);
		}
		assert_int_equal(n, (int)npl);
		assert_memory_equal(back, pl, npl);
		if (idx == 1) {
			assert_int_equal(sf_noise_hs_split(&i, &c.is, &c.ir, hi), 0);
			assert_int_equal(sf_noise_hs_split(&r, &c.rs, &c.rr, hr), 0);
			assert_memory_equal(hi, want_h, sizeof(want_h));
			assert_memory_equal(hr, want_h, sizeof(want_h));
		}
	}
}

static void test_vectors(void **state)
{
	size_t len, idx;
	char *text = sf_test_read_file(VECTORS_FILE, &len);
	json_error_t jerr;
	json_t *root, *vecs, *v;
	int n_nn = 0, n_psk = 0;

	assert_non_null(text);
	root = json_loadb(text, len, 0, &jerr);
	assert_non_null(root);
	vecs = json_object_get(root, "vectors");
	assert_true(json_is_array(vecs));
	json_array_foreach(vecs, idx, v) {
		const char *name = json_string_value(json_object_get(v, "protocol_name"));

		if (name && !strcmp(name, NN_NAME)) {
			run_vector(v, SF_NOISE_NN);
			n_nn++;
		} else if (name && !strcmp(name, NNPSK0_NAME)) {
			run_vector(v, SF_NOISE_NNPSK0);
			n_psk++;
		}
	}
	print_message("noise vectors passed: %d NN, %d NNpsk0\n", n_nn, n_psk);
	assert_true(n_nn > 0);
	assert_true(n_psk > 0);
	json_decref(root);
	free(text);
}

static void test_roundtrip(void **state)
{
	for (int p = SF_NOISE_NN; p <= SF_NOISE_NNPSK0; p++) {
		struct pair c;
		uint8_t ct[64], pt[64];
		int n;

		handshake((enum sf_noise_pattern)p, &c);
		n = sf_noise_cs_encrypt(&c.is, NULL, 0, (const uint8_t *)"ping", 4, ct);
		assert_int_equal(n, 4 + 16);
		assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, ct, (size_t)n, pt), 4);
		assert_memory_equal(pt, "ping", 4);
		n = sf_noise_cs_encrypt(&c.rs, (const uint8_t *)"ad", 2, (const uint8_t *)"pong", 4,
					ct);
		assert_int_equal(n, 4 + 16);
		assert_int_equal(sf_noise_cs_decrypt(&c.ir, NULL, 0, ct, (size_t)n, pt),
				 SF_NOISE_E_DECRYPT);
		assert_int_equal(sf_noise_cs_decrypt(&c.ir, (const uint8_t *)"ad", 2, ct, (size_t)n,
						     pt), 4);
		assert_memory_equal(pt, "pong", 4);
		/* In place, and an empty plaintext. */
		memcpy(pt, "inplace", 7);
		assert_int_equal(sf_noise_cs_encrypt(&c.is, NULL, 0, pt, 7, pt), 7 + 16);
		assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, pt, 7 + 16, pt), 7);
		assert_memory_equal(pt, "inplace", 7);
		assert_int_equal(sf_noise_cs_encrypt(&c.is, NULL, 0, NULL, 0, ct), 16);
		assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, ct, 16, NULL), 0);
	}
}

static void test_psk_mismatch(void **state)
{
	struct sf_noise_hs i, r;
	uint8_t m[128], pl[128];
	int n;

	init_both(&i, &r, SF_NOISE_NNPSK0, psk_a, psk_b);
	n = sf_noise_hs_write(&i, (const uint8_t *)"x", 1, m, sizeof(m));
	assert_true(n > 0);
	assert_int_equal(sf_noise_hs_read(&r, m, (size_t)n, pl, sizeof(pl)), SF_NOISE_E_DECRYPT);
	assert_int_equal(sf_noise_hs_write(&r, NULL, 0, m, sizeof(m)), SF_NOISE_E_STATE);
}

static void test_bad_init(void **state)
{
	struct sf_noise_hs hs;

	assert_int_equal(sf_noise_hs_init(&hs, SF_NOISE_NN, true, NULL, 0, psk_a), SF_NOISE_E_ARG);
	assert_int_equal(sf_noise_hs_init(&hs, SF_NOISE_NNPSK0, true, NULL, 0, NULL),
			 SF_NOISE_E_ARG);
	assert_int_equal(sf_noise_hs_init(&hs, (enum sf_noise_pattern)7, true, NULL, 0, NULL),
			 SF_NOISE_E_ARG);
	assert_int_equal(sf_noise_hs_init(&hs, SF_NOISE_NN, true, NULL, 3, NULL), SF_NOISE_E_ARG);
	assert_int_equal(sf_noise_hs_write(&hs, NULL, 0, big_out, 64), SF_NOISE_E_STATE);
	assert_int_equal(sf_noise_hs_init(NULL, SF_NOISE_NN, true, NULL, 0, NULL), SF_NOISE_E_ARG);
}

/* Flips bit pos % 8 of byte pos of handshake message which (0 or 1); the handshake must fail.
 * Byte 31 gets its top bit flipped, which X25519 ignores but the handshake hash does not. */
static void tamper_once(enum sf_noise_pattern p, int which, size_t pos)
{
	struct sf_noise_hs i, r;
	uint8_t m[128], pl[128];
	int n, rc;

	init_both(&i, &r, p, psk_for(p, psk_a), psk_for(p, psk_a));
	sf_noise_hs_set_ephemeral(&i, fixed_ei);
	sf_noise_hs_set_ephemeral(&r, fixed_er);
	n = sf_noise_hs_write(&i, (const uint8_t *)"12345", 5, m, sizeof(m));
	assert_true(n > 0);
	if (which == 0) {
		if (pos >= (size_t)n)
			return;
		m[pos] ^= (uint8_t)(1u << (pos % 8));
	}
	rc = sf_noise_hs_read(&r, m, (size_t)n, pl, sizeof(pl));
	if (rc < 0) {
		/* Only a keyed message 0 (NNpsk0) can be caught by the responder. */
		assert_int_equal(p, SF_NOISE_NNPSK0);
		assert_int_equal(rc, SF_NOISE_E_DECRYPT);
		return;
	}
	if (which == 0)
		assert_int_equal(p, SF_NOISE_NN);
	n = sf_noise_hs_write(&r, (const uint8_t *)"abcde", 5, m, sizeof(m));
	assert_true(n > 0);
	if (which == 1) {
		if (pos >= (size_t)n)
			return;
		m[pos] ^= (uint8_t)(1u << (pos % 8));
	}
	assert_int_equal(sf_noise_hs_read(&i, m, (size_t)n, pl, sizeof(pl)), SF_NOISE_E_DECRYPT);
	assert_false(sf_noise_hs_done(&i));
}

static void test_tamper_handshake(void **state)
{
	for (int p = SF_NOISE_NN; p <= SF_NOISE_NNPSK0; p++)
		for (int which = 0; which < 2; which++)
			for (size_t pos = 0; pos < 32 + 5 + 16; pos++)
				tamper_once((enum sf_noise_pattern)p, which, pos);
}

static void test_transport_failures(void **state)
{
	struct pair c;
	uint8_t c1[64], c2[64], bad[64], pt[64];
	int n1, n2;

	handshake(SF_NOISE_NN, &c);
	n1 = sf_noise_cs_encrypt(&c.is, NULL, 0, (const uint8_t *)"first", 5, c1);
	n2 = sf_noise_cs_encrypt(&c.is, NULL, 0, (const uint8_t *)"second", 6, c2);
	assert_int_equal(n1, 21);
	assert_int_equal(n2, 22);

	/* Reordered: message 2 before message 1. */
	assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, c2, (size_t)n2, pt),
			 SF_NOISE_E_DECRYPT);
	/* Truncated, and too short for a tag. */
	assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, c1, (size_t)n1 - 1, pt),
			 SF_NOISE_E_DECRYPT);
	assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, c1, 15, pt), SF_NOISE_E_SHORT);
	assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, c1, 0, pt), SF_NOISE_E_SHORT);
	/* Altered tag, altered body. */
	memcpy(bad, c1, (size_t)n1);
	bad[n1 - 1] ^= 0x80;
	assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, bad, (size_t)n1, pt),
			 SF_NOISE_E_DECRYPT);
	memcpy(bad, c1, (size_t)n1);
	bad[0] ^= 1;
	assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, bad, (size_t)n1, pt),
			 SF_NOISE_E_DECRYPT);
	assert_int_equal(c.rr.n, 0);

	/* None of the failures advanced the nonce. */
	assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, c1, (size_t)n1, pt), 5);
	assert_memory_equal(pt, "first", 5);
	/* Replay. */
	assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, c1, (size_t)n1, pt),
			 SF_NOISE_E_DECRYPT);
	assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, c2, (size_t)n2, pt), 6);
	assert_memory_equal(pt, "second", 6);
	assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, c2, (size_t)n2, pt),
			 SF_NOISE_E_DECRYPT);
	/* Wrong direction's key. */
	n1 = sf_noise_cs_encrypt(&c.is, NULL, 0, (const uint8_t *)"third", 5, c1);
	c.ir.n = c.rr.n;
	assert_int_equal(sf_noise_cs_decrypt(&c.ir, NULL, 0, c1, (size_t)n1, pt),
			 SF_NOISE_E_DECRYPT);
}

static void test_nonce_limit(void **state)
{
	struct pair c;
	uint8_t ct[64], pt[64];

	handshake(SF_NOISE_NN, &c);
	c.is.n = UINT64_MAX - 1;
	c.rr.n = UINT64_MAX - 1;
	assert_int_equal(sf_noise_cs_encrypt(&c.is, NULL, 0, (const uint8_t *)"last", 4, ct), 20);
	assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, ct, 20, pt), 4);
	assert_int_equal(sf_noise_cs_encrypt(&c.is, NULL, 0, (const uint8_t *)"more", 4, ct),
			 SF_NOISE_E_NONCE);
	assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, ct, 20, pt), SF_NOISE_E_NONCE);
}

static void test_out_of_order(void **state)
{
	struct sf_noise_hs i, r;
	struct sf_noise_cs s, rv;
	uint8_t m0[128], m1[128], pl[128], ct[64];
	int n0, n1;

	init_both(&i, &r, SF_NOISE_NN, NULL, NULL);
	/* Responder cannot write first; the misuse does not harm its state. */
	assert_int_equal(sf_noise_hs_write(&r, NULL, 0, m0, sizeof(m0)), SF_NOISE_E_STATE);
	assert_int_equal(sf_noise_hs_split(&i, &s, &rv, NULL), SF_NOISE_E_STATE);
	n0 = sf_noise_hs_write(&i, NULL, 0, m0, sizeof(m0));
	assert_int_equal(n0, 32);
	assert_int_equal(sf_noise_hs_write(&i, NULL, 0, m1, sizeof(m1)), SF_NOISE_E_STATE);
	assert_int_equal(sf_noise_hs_read(&r, m0, (size_t)n0, pl, sizeof(pl)), 0);
	assert_int_equal(sf_noise_hs_read(&r, m0, (size_t)n0, pl, sizeof(pl)), SF_NOISE_E_STATE);

	/* That failed read killed the responder for good. */
	assert_int_equal(sf_noise_hs_write(&r, NULL, 0, m1, sizeof(m1)), SF_NOISE_E_STATE);
	assert_false(sf_noise_hs_done(&r));

	/* An initiator reading first is refused and unusable after. */
	init_both(&i, &r, SF_NOISE_NN, NULL, NULL);
	assert_int_equal(sf_noise_hs_read(&i, m0, (size_t)n0, pl, sizeof(pl)), SF_NOISE_E_STATE);
	assert_int_equal(sf_noise_hs_write(&i, NULL, 0, m0, sizeof(m0)), SF_NOISE_E_STATE);

	/* A full run, then calls after the end and after split. */
	init_both(&i, &r, SF_NOISE_NN, NULL, NULL);
	n0 = sf_noise_hs_write(&i, NULL, 0, m0, sizeof(m0));
	assert_int_equal(sf_noise_hs_read(&r, m0, (size_t)n0, pl, sizeof(pl)), 0);
	n1 = sf_noise_hs_write(&r, NULL, 0, m1, sizeof(m1));
	assert_int_equal(n1, 48);
	assert_int_equal(sf_noise_hs_read(&i, m1, (size_t)n1, pl, sizeof(pl)), 0);
	assert_int_equal(sf_noise_hs_write(&i, NULL, 0, m0, sizeof(m0)), SF_NOISE_E_STATE);
	assert_int_equal(sf_noise_hs_write(&r, NULL, 0, m0, sizeof(m0)), SF_NOISE_E_STATE);
	assert_int_equal(sf_noise_hs_split(&i, &s, &rv, NULL), 0);
	assert_int_equal(sf_noise_hs_split(&i, &s, &rv, NULL), SF_NOISE_E_STATE);
	assert_int_equal(sf_noise_hs_write(&i, NULL, 0, m0, sizeof(m0)), SF_NOISE_E_STATE);
	assert_int_equal(sf_noise_hs_read(&i, m1, (size_t)n1, pl, sizeof(pl)), SF_NOISE_E_STATE);
	sf_noise_hs_wipe(&r);
	assert_int_equal(sf_noise_hs_split(&r, &s, &rv, NULL), SF_NOISE_E_STATE);

	/* A cipher with no key (never split, or wiped). */
	sf_noise_cs_wipe(&s);
	assert_int_equal(sf_noise_cs_encrypt(&s, NULL, 0, pl, 1, ct), SF_NOISE_E_STATE);
	assert_int_equal(sf_noise_cs_decrypt(&s, NULL, 0, ct, 17, pl), SF_NOISE_E_STATE);
}

static void test_short(void **state)
{
	struct sf_noise_hs i, r;
	uint8_t m[128], pl[128];
	int n;

	init_both(&i, &r, SF_NOISE_NN, NULL, NULL);
	assert_int_equal(sf_noise_hs_read(&r, m, 31, pl, sizeof(pl)), SF_NOISE_E_SHORT);
	init_both(&i, &r, SF_NOISE_NN, NULL, NULL);
	assert_int_equal(sf_noise_hs_read(&r, NULL, 0, pl, sizeof(pl)), SF_NOISE_E_SHORT);

	init_both(&i, &r, SF_NOISE_NNPSK0, psk_a, psk_a);
	n = sf_noise_hs_write(&i, NULL, 0, m, sizeof(m));
	assert_int_equal(n, 48);
	assert_int_equal(sf_noise_hs_read(&r, m, 47, pl, sizeof(pl)), SF_NOISE_E_SHORT);

	/* Message 1 is always keyed: 32 + 16. */
	init_both(&i, &r, SF_NOISE_NN, NULL, NULL);
	n = sf_noise_hs_write(&i, NULL, 0, m, sizeof(m));
	assert_int_equal(sf_noise_hs_read(&r, m, (size_t)n, pl, sizeof(pl)), 0);
	n = sf_noise_hs_write(&r, NULL, 0, m, sizeof(m));
	assert_int_equal(n, 48);
	assert_int_equal(sf_noise_hs_read(&i, m, 47, pl, sizeof(pl)), SF_NOISE_E_SHORT);
	assert_int_equal(sf_noise_hs_read(&i, m, 48, pl, sizeof(pl)), SF_NOISE_E_STATE);
}

static void test_too_big(void **state)
{
	struct sf_noise_hs i, r;
	struct pair c;
	uint8_t m[128], pl[128];
	int n;

	init_both(&i, &r, SF_NOISE_NN, NULL, NULL);
	assert_int_equal(sf_noise_hs_write(&i, NULL, 0, m, 31), SF_NOISE_E_TOO_BIG);
	assert_int_equal(sf_noise_hs_write(&i, pl, 10, m, 41), SF_NOISE_E_TOO_BIG);
	assert_int_equal(sf_noise_hs_write(&i, big_in, SF_NOISE_MAX_MSG - 31, big_out,
					   sizeof(big_out)), SF_NOISE_E_TOO_BIG);
	/* Those left the state usable: the largest message 0 goes through. */
	n = sf_noise_hs_write(&i, big_in, SF_NOISE_MAX_MSG - 32, big_out, sizeof(big_out));
	assert_int_equal(n, SF_NOISE_MAX_MSG);
	assert_int_equal(sf_noise_hs_read(&r, big_out, SF_NOISE_MAX_MSG + 1, big_in, sizeof(big_in)),
			 SF_NOISE_E_TOO_BIG);

	init_both(&i, &r, SF_NOISE_NN, NULL, NULL);
	n = sf_noise_hs_write(&i, pl, 10, m, sizeof(m));
	assert_int_equal(n, 42);
	assert_int_equal(sf_noise_hs_read(&r, m, (size_t)n, pl, 9), SF_NOISE_E_TOO_BIG);

	init_both(&i, &r, SF_NOISE_NN, NULL, NULL);
	n = sf_noise_hs_write(&i, pl, 10, m, sizeof(m));
	assert_int_equal(sf_noise_hs_read(&r, m, (size_t)n, pl, 10), 10);
	assert_int_equal(sf_noise_hs_write(&r, big_in, SF_NOISE_MAX_MSG - 47, big_out,
					   sizeof(big_out)), SF_NOISE_E_TOO_BIG);
	assert_int_equal(sf_noise_hs_write(&r, pl, 10, m, 57), SF_NOISE_E_TOO_BIG);
	n = sf_noise_hs_write(&r, big_in, SF_NOISE_MAX_MSG - 48, big_out, sizeof(big_out));
	assert_int_equal(n, SF_NOISE_MAX_MSG);
	assert_int_equal(sf_noise_hs_read(&i, big_out, (size_t)n, big_in, sizeof(big_in)),
			 SF_NOISE_MAX_MSG - 48);

	handshake(SF_NOISE_NNPSK0, &c);
	assert_int_equal(sf_noise_cs_encrypt(&c.is, NULL, 0, big_in, SF_NOISE_MAX_MSG - 15,
					     big_out), SF_NOISE_E_TOO_BIG);
	n = sf_noise_cs_encrypt(&c.is, NULL, 0, big_in, SF_NOISE_MAX_MSG - 16, big_out);
	assert_int_equal(n, SF_NOISE_MAX_MSG);
	assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, big_out, SF_NOISE_MAX_MSG + 1,
					     big_in), SF_NOISE_E_TOO_BIG);
	assert_int_equal(sf_noise_cs_decrypt(&c.rr, NULL, 0, big_out, (size_t)n, big_in),
			 SF_NOISE_MAX_MSG - 16);
}

static void test_degenerate_dh(void **state)
{
	struct sf_noise_hs i, r;
	uint8_t m[128], pl[128];
	int n;

	/* An all-zero "e" from the initiator: the responder fails at its ee. */
	init_both(&i, &r, SF_NOISE_NN, NULL, NULL);
	memset(m, 0, 32);
	assert_int_equal(sf_noise_hs_read(&r, m, 32, pl, sizeof(pl)), 0);
	assert_int_equal(sf_noise_hs_write(&r, NULL, 0, m, sizeof(m)), SF_NOISE_E_DH);
	assert_int_equal(sf_noise_hs_write(&r, NULL, 0, m, sizeof(m)), SF_NOISE_E_STATE);

	/* And from the responder: the initiator's read fails. */
	n = sf_noise_hs_write(&i, NULL, 0, m, sizeof(m));
	assert_int_equal(n, 32);
	memset(m, 0, 48);
	assert_int_equal(sf_noise_hs_read(&i, m, 48, pl, sizeof(pl)), SF_NOISE_E_DH);
	assert_false(sf_noise_hs_done(&i));
}

static void test_psk_from_token(void **state)
{
	/* BLAKE2b-256 keyed with "superfluid fleet token v1" over "abc" (Python hashlib). */
	static const char *want_abc =
		"84516dde646e053f905c2385f7cad2a93bc0dc591d2a843c046fb673126abee0";
	/* The example in docs/PROTOCOL.md s.6.2. */
	static const char *want_secret =
		"33ddf029fb25715ef105a464af9cbfc51b1e56db5cc25b6728f4c4594061c86a";
	uint8_t a[32], a2[32], b[32], e[32], want[32];

	sf_noise_psk_from_token((const uint8_t *)"abc", 3, a);
	sf_noise_psk_from_token((const uint8_t *)"abc", 3, a2);
	sf_noise_psk_from_token((const uint8_t *)"abd", 3, b);
	sf_noise_psk_from_token(NULL, 0, e);
	assert_memory_equal(a, a2, 32);
	assert_memory_not_equal(a, b, 32);
	assert_memory_not_equal(a, e, 32);
	assert_int_equal(sf_test_unhex(want_abc, want, sizeof(want)), 32);
	assert_memory_equal(a, want, 32);
	sf_noise_psk_from_token((const uint8_t *)"secret", 6, a);
	assert_int_equal(sf_test_unhex(want_secret, want, sizeof(want)), 32);
	assert_memory_equal(a, want, 32);
}

static void test_hmac(void **state)
{
	/* From Python: hmac.new(key, msg, hashlib.blake2b); one key over the block size. */
	static const char *want_long =
		"22d118ab3f0697559435c6f6f4f63e77b5e54007d21796675a3b2551c5eb8d00"
		"9a2af34dc49800ee3b873ccf3b6264ac23cb1f82ed4937f4561c71743fa3e22b";
	static const char *want_64 =
		"847e8b47fb50f417b1ce8314641dc4f87f06032d7c6d092cb83755107de17553"
		"a18f0edce2f1fd776be70dd16389e53b6fcc02188d98566c64c025ce7e646014";
	const char *msg = "superfluid hmac test";
	uint8_t key[200], out[64], want[64];

	for (int k = 0; k < 200; k++)
		key[k] = (uint8_t)k;
	sf__noise_hmac(key, 200, (const uint8_t *)msg, 10, (const uint8_t *)msg + 10,
		       strlen(msg) - 10, out);
	assert_int_equal(sf_test_unhex(want_long, want, sizeof(want)), 64);
	assert_memory_equal(out, want, 64);
	sf__noise_hmac(key, 64, (const uint8_t *)msg, strlen(msg), NULL, 0, out);
	assert_int_equal(sf_test_unhex(want_64, want, sizeof(want)), 64);
	assert_memory_equal(out, want, 64);
}

static void test_strerror(void **state)
{
	for (int e = 0; e >= -8; e--)
		assert_non_null(sf_noise_strerror(e));
	assert_string_not_equal(sf_noise_strerror(SF_NOISE_E_DECRYPT),
				sf_noise_strerror(SF_NOISE_E_STATE));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_psk_mismatch),
		cmocka_unit_test(test_bad_init),
		cmocka_unit_test(test_tamper_handshake),
		cmocka_unit_test(test_transport_failures),
		cmocka_unit_test(test_nonce_limit),
		cmocka_unit_test(test_out_of_order),
		cmocka_unit_test(test_short),
		cmocka_unit_test(test_too_big),
		cmocka_unit_test(test_degenerate_dh),
		cmocka_unit_test(test_psk_from_token),
		cmocka_unit_test(test_hmac),
		cmocka_unit_test(test_strerror),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
