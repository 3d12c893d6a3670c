/* Directories made on demand: a path and its missing parents, and whether one could be made
 * before it is (so that a bad path is told at start, the directory made at its first use). */
#ifndef SF_COMMON_DIRS_H
#define SF_COMMON_DIRS_H

#include <sys/types.h>

#include <superfluid/err.h>

#define SF_DIRS_PATH_MAX 4096
#define SF_DIRS_DEPTH_MAX 64 /* directories made by one call at most */

/* Makes path and its missing parents, each with mode (less the umask); a path that is a
 * directory already is fine. 0, or a negative sf_code (SF_E_IO, SF_E_LIMIT) with the part
 * that failed named in err. */
int sf_mkdirs(const char *path, mode_t mode, struct sf_err *err);

/* Whether sf_mkdirs(path) could work: path is a directory this process may write in, or its
 * nearest existing parent is. Makes nothing. 0, or a negative sf_code with why in err. */
int sf_dir_can_make(const char *path, struct sf_err *err);

#endif
