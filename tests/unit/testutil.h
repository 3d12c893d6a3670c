/* Helpers shared by the unit tests. */
#ifndef SF_TESTUTIL_H
#define SF_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* Decodes hex text into out (capacity cap). Returns the byte count, or -1 on bad hex. */
long sf_test_unhex(const char *hex, uint8_t *out, size_t cap);

/* Reads a whole file into a malloc'd, NUL-terminated buffer; *len gets its size. NULL on error. */
char *sf_test_read_file(const char *path, size_t *len);

/* A deterministic pseudo-random generator for tests (splitmix64). */
uint64_t sf_test_rand(uint64_t *state);

struct sf_engine;
struct sf_sampling;
/* Draws n_out tokens after prompt[0..n) through a pipeline over e whose stages keep their
 * contexts, cut after the layers in cuts[0..n_cuts) (ascending, inside the model): the prompt
 * goes `chunk` positions at a time, then each drawn token alone; the last stage draws with s
 * (NULL: greedy), told how many tokens the generation has made. 0, or -1 with the stage's
 * error printed. */
int sf_test_kept_stream(struct sf_engine *e, const uint32_t *cuts, uint32_t n_cuts,
			const struct sf_sampling *s, const uint32_t *prompt, uint32_t n,
			uint32_t chunk, uint32_t *out, uint32_t n_out);

/* Writes a GGUF file of a gpt2-model vocabulary of n tokens "t0".."t<n-1>" (one merge) to
 * path: the tokenizer the random-weight models of the engine tests take. 0, or -1. */
int sf_test_write_vocab(const char *path, unsigned n);

struct sf_pool;
/* A random-weight F32 model of shape (layers, seed) over sf_test_write_vocab's vocabulary of
 * n_vocab tokens, written to /tmp/sf_test_<tag>_<pid>.gguf, its path in path (cap bytes);
 * pool quantizes. 0, or -1 with the reason printed. */
int sf_test_make_model(const char *tag, unsigned n_vocab, const char *shape, uint32_t layers,
		       uint64_t seed, struct sf_pool *pool, char *path, size_t cap);

#endif
