/* Shared by the harnesses and the corpus maker: see fuzz_common.h. */
#include "fuzz_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

const uint32_t fuzz_frame_max[FUZZ_FRAME_N_MAX] = {
	0, 16, 64, 256, 1024, 4096, 65536, SF_FRAME_PAYLOAD_MAX,
};

void fuzz_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("fuzz oracle: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

/* ---- randombytes from splitmix64 ---- */

static uint64_t rng_state = FUZZ_RNG_SEED;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static const char *rng_name(void)
{
	return "superfluid-fuzz";
}

static uint32_t rng_random(void)
{
	return (uint32_t)rng_next();
}

static void rng_buf(void *const buf, const size_t size)
{
	uint8_t *p = buf;
	for (size_t i = 0; i < size; i += 8) {
		uint64_t v = rng_next();
		size_t k = size - i < 8 ? size - i : 8;
		memcpy(p + i, &v, k);
	}
}

static randombytes_implementation rng_impl = {
	.implementation_name = rng_name,
	.random = rng_random,
	.buf = rng_buf,
};

void fuzz_rng_install(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	if (randombytes_set_implementation(&rng_impl) != 0 || sodium_init() < 0)
		fuzz_fail("cannot start libsodium with the fuzzing generator");
}

void fuzz_rng_reset(uint64_t seed)
{
	rng_state = seed;
}

/* ---- the codec oracle ---- */

void fuzz_check_roundtrip(const struct sf_msg *m, const uint8_t *payload, size_t len,
			  uint32_t version, uint32_t max_payload)
{
	const char *name = sf_msg_name(m->type);
	struct sf_buf out;
	struct sf_arena a;
	struct sf_msg again;
	struct sf_err err = { 0 };

	sf_buf_init(&out, SF_FRAME_HDR_LEN + (size_t)SF_FRAME_PAYLOAD_MAX);
	sf_arena_init(&a, (size_t)256 << 20); /* lazily allocated: only what it needs */
	int rc = sf_msg_encode(&out, m->type, &m->u, version, max_payload, &err);
	if (rc)
		fuzz_fail("%s (v%u, %zu bytes) decoded but does not encode: %s", name, version, len,
			  err.msg);
	const uint8_t *p = sf_buf_head(&out);
	size_t n = sf_buf_used(&out);
	if (n != SF_FRAME_HDR_LEN + len)
		fuzz_fail("%s (v%u) decoded from %zu bytes encodes to %zu", name, version, len,
			  n - SF_FRAME_HDR_LEN);
	uint32_t hlen = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			(uint32_t)p[3] << 24;
	if (hlen != len || (p[4] | p[5] << 8) != m->type || p[6] || p[7])
		fuzz_fail("%s (v%u): bad header on the re-encoded frame", name, version);
	for (size_t i = 0; i < len; i++)
		if (p[SF_FRAME_HDR_LEN + i] != payload[i])
			fuzz_fail("%s (v%u, %zu bytes) re-encodes differently at byte %zu: "
				  "%02x, was %02x", name, version, len, i, p[SF_FRAME_HDR_LEN + i],
				  payload[i]);
	rc = sf_msg_decode(m->type, p + SF_FRAME_HDR_LEN, len, version, &a, &again, &err);
	if (rc)
		fuzz_fail("%s (v%u): its own encoding does not decode: %s", name, version, err.msg);
	if (!sf_msg_equal(m->type, &m->u, &again.u) || !sf_msg_equal(m->type, &again.u, &m->u))
		fuzz_fail("%s (v%u): decode(encode(m)) differs from m", name, version);
	sf_arena_free(&a);
	sf_buf_free(&out);
}

/* ---- links ---- */

struct sf_link *fuzz_link_new(enum sf_role role, bool sealed, uint8_t flags, uint64_t now)
{
	static const struct sf_model_info models[] = {
		{ .name = "fuzz-model", .name_len = 10, .tokenizer_digest = 0x1234, .n_layers = 2,
		  .ctx_len = 4096, .vocab_size = 1000 },
	};
	static const uint64_t full[] = { 0x5678 }; /* version 7's full tokenizer digest */
	struct sf_link_config cfg = {
		.role = role,
		.token = sealed ? (const uint8_t *)FUZZ_TOKEN : NULL,
		.token_len = sealed ? strlen(FUZZ_TOKEN) : 0,
		.max_payload = (flags & FUZZ_LINK_SMALL) ? FUZZ_LINK_SMALL_MAX : 0,
		.identity = role == SF_ROLE_HEAD ? "fuzz-head" : "fuzz-node",
		.capacity = { .max_sessions = 4, .free_sessions = 4 },
		.models = models,
		.n_models = 1,
		.tokenizer_full = full,
	};
	struct sf_err err = { 0 };
	fuzz_link_versions(flags, &cfg.version_min, &cfg.version_max);
	struct sf_link *l = sf_link_new(&cfg, now, &err);
	if (!l)
		fuzz_fail("link_new: %s", err.msg);
	return l;
}

uint16_t fuzz_pick_type(uint64_t seed, enum sf_role sender, uint32_t version)
{
	unsigned may = sender == SF_ROLE_HEAD ? SF_DIR_H2N : SF_DIR_N2H;
	for (size_t i = 0; i < sf_msg_type_count; i++) {
		uint16_t t = sf_msg_types[(seed + i) % sf_msg_type_count];
		/* Not what the link sends itself (sf_link_send refuses those). */
		if (t != SF_MSG_HELLO && t != SF_MSG_HELLO_ACK && t != SF_MSG_GOODBYE &&
		    t != SF_MSG_HEARTBEAT && (sf_msg_direction(t) & may) && sf_msg_min_version(t) <= version)
			return t;
	}
	return sender == SF_ROLE_HEAD ? SF_MSG_CANCEL : SF_MSG_NODE_STATUS;
}

uint32_t fuzz_head_prompt(uint8_t pages, uint8_t seed, uint32_t *out)
{
	uint32_t n = (pages % 5u) * 64 + seed % 7u;
	uint64_t x = seed;
	for (uint32_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		out[i] = (uint32_t)(x >> 60);
	}
	return n;
}
