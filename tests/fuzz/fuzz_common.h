/* What the harnesses, the corpus maker and the replayer share: the libFuzzer entry point, a
 * deterministic randombytes for libsodium, the codec's round-trip oracle, and the input
 * formats the corpus maker has to write. */
#ifndef SF_FUZZ_COMMON_H
#define SF_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/buf.h>
#include <superfluid/link.h>
#include <superfluid/wire.h>

/* Each harness defines it; replay_main.c and libFuzzer call it. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- deterministic randomness ---- */

/* Every input starts from this seed, so ephemeral keys (and with them recorded sealed
 * transcripts) repeat from run to run. */
#define FUZZ_RNG_SEED 0x5f2a11c0ffee0001ULL

/* Makes libsodium draw from a seeded generator instead of the OS, then starts libsodium.
 * Call before anything else touches libsodium; safe to call again. */
void fuzz_rng_install(void);
/* Restarts the generator at seed. */
void fuzz_rng_reset(uint64_t seed);

/* ---- the codec oracle ---- */

/* Prints why and aborts: the harness found a bug. */
void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* m was decoded from payload (type, version). Checks that it encodes back to exactly payload,
 * and that decoding that encoding gives a message equal to m. Aborts otherwise. */
void fuzz_check_roundtrip(const struct sf_msg *m, const uint8_t *payload, size_t len,
			  uint32_t version, uint32_t max_payload);

/* The arena bound the link uses for one message of up to max_payload bytes. */
static inline size_t fuzz_arena_bound(size_t max_payload)
{
	return 8 * max_payload + 65536;
}

/* ---- fuzz_frame: [max payload choice] [version - 2] frame stream ---- */

#define FUZZ_FRAME_N_MAX 8
extern const uint32_t fuzz_frame_max[FUZZ_FRAME_N_MAX];

/* ---- fuzz_noise: [mode] (u16 LE length, bytes)... ---- */

enum {
	FUZZ_NOISE_PSK = 1,       /* NNpsk0, else NN */
	FUZZ_NOISE_INITIATOR = 2, /* the input is message 2, else message 1 */
};
#define FUZZ_NOISE_PROLOGUE "superfluid fuzz"
#define FUZZ_TOKEN "fuzz-token"

/* ---- fuzz_link: [mode] [flags] (u16 LE length, u8 clock step, bytes)... ---- */

enum {
	FUZZ_LINK_HEAD = 0,      /* one head; the input is what the node sends */
	FUZZ_LINK_NODE = 1,      /* one node; the input is what the head sends */
	FUZZ_LINK_PAIR_NODE = 2, /* plain pair opened in memory; the input goes to the node */
	FUZZ_LINK_PAIR_HEAD = 3, /* ... to the head */
	FUZZ_LINK_N_MODES = 4,
};
enum {
	FUZZ_LINK_SEALED = 1,    /* lone modes: a token */
	FUZZ_LINK_VER_SHIFT = 1, /* 2 bits: versions, see fuzz_link_versions() */
	FUZZ_LINK_SMALL = 8,     /* max_payload 4096 */
	FUZZ_LINK_EOF = 16,      /* end of stream after the input */
	FUZZ_LINK_TIMERS = 32,   /* then run the clock through the deadlines */
	FUZZ_LINK_RESET = 64,    /* the end of stream is an error (ECONNRESET) */
};
#define FUZZ_LINK_STEP_MS 8 /* the clock advances step * this per chunk */
#define FUZZ_LINK_SMALL_MAX 4096

static inline void fuzz_link_versions(uint8_t flags, uint32_t *lo, uint32_t *hi)
{
	static const uint32_t v[4][2] = { { 2, 3 }, { 2, 2 }, { 3, 3 }, { 2, 3 } };
	unsigned i = (flags >> FUZZ_LINK_VER_SHIFT) & 3;
	*lo = v[i][0];
	*hi = v[i][1];
}

/* A type that sender may send once open in version, from seed: never HELLO, HELLO_ACK or
 * GOODBYE, which end an open link. */
uint16_t fuzz_pick_type(uint64_t seed, enum sf_role sender, uint32_t version);

/* The link the harness runs for a role and flags (the corpus maker records with it too).
 * Aborts when it cannot be made. */
struct sf_link *fuzz_link_new(enum sf_role role, bool sealed, uint8_t flags, uint64_t now);

/* ---- fuzz_head: a session's prompt from its record's [pages] [seed] bytes ---- */

#define FUZZ_HEAD_MAX_PROMPT (4 * 64 + 6)
/* pages % 5 full pages of 64 and seed % 7 tokens more, drawn from seed (few distinct
 * tokens: prefixes repeat), into out; returns how many. */
uint32_t fuzz_head_prompt(uint8_t pages, uint8_t seed, uint32_t *out);

/* ---- make_corpus ---- */

/* Writes a seed: the byte first, then text (make_corpus.c). */
void put_text(const char *name, uint8_t first, const char *text);
/* A seed's bytes: appended to b (make_corpus.c). */
void app(struct sf_buf *b, const void *p, size_t n);
void app_u8(struct sf_buf *b, uint8_t v);
void app_u16(struct sf_buf *b, size_t v); /* little-endian */
/* Writes a seed file of the current harness's corpus. */
void put_file(const char *name, const struct sf_buf *b);
/* fuzz_tok's seeds (corpus_tok.c). */
void make_tok(void);
/* Writes a seed of n bytes (make_corpus.c). */
void put_bytes(const char *name, const void *p, size_t n);
/* fuzz_chat_parse's seeds (corpus_chat_parse.c). */
void make_chat_parse(void);
/* fuzz_jinja's seeds (corpus_jinja.c). */
void make_jinja(void);
/* fuzz_node's seeds (corpus_node.c). */
void make_node(void);
/* fuzz_head's seeds (corpus_head.c). */
void make_head(void);
/* fuzz_grammar's seeds (corpus_grammar.c). */
void make_grammar(void);

#endif
