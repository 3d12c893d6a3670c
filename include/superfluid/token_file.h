/* Reading the fleet token an operator keeps in a file (--fleet-auth / --auth-file), and the
 * check that a file of secrets is the owner's alone (also --api-keys). */
#ifndef SUPERFLUID_TOKEN_FILE_H
#define SUPERFLUID_TOKEN_FILE_H

#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>

#define SF_TOKEN_MAX 4096

/* Refuses the open file fd (path, named what for the operator: "token file") when group or
 * others may read it, with a sentence saying to chmod 600 it. Returns 0 or a negative sf_code. */
int sf_secret_file_check(int fd, const char *path, const char *what, struct sf_err *err)
	__attribute__((warn_unused_result));

/* Reads the token in path into out (SF_TOKEN_MAX bytes), without one trailing newline, and
 * sets *len. Refuses a file that group or others may read, an empty one, one of blanks only,
 * and one over SF_TOKEN_MAX bytes, with a sentence saying what to fix. Returns 0 or a negative sf_code. */
int sf_token_file_read(const char *path, uint8_t *out, size_t *len, struct sf_err *err)
	__attribute__((warn_unused_result));

#endif
