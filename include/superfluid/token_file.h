/* Reading the fleet token an operator keeps in a file (--fleet-auth / --auth-file). */
#ifndef SUPERFLUID_TOKEN_FILE_H
#define SUPERFLUID_TOKEN_FILE_H

#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>

#define SF_TOKEN_MAX 4096

/* Reads the token in path into out (SF_TOKEN_MAX bytes), without one trailing newline, and
 * sets *len. Refuses a file that group or others may read, an empty one, and one over
 * SF_TOKEN_MAX bytes, with a sentence saying what to fix. Returns 0 or a negative sf_code. */
int sf_token_file_read(const char *path, uint8_t *out, size_t *len, struct sf_err *err)
	__attribute__((warn_unused_result));

#endif
