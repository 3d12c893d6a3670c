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

#endif
