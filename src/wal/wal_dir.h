/* The log's directory: its segments in LSN order, paths, fsync. */
#ifndef SF_WAL_DIR_H
#define SF_WAL_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>

struct sf_wal_seg_ent {
	uint64_t first_lsn;
	uint64_t bytes;
};

/* dir's segment files sorted by first LSN into *out (malloc'd; NULL when none). A missing
 * dir lists none. Returns 0, or a negative sf_code with err naming dir and the reason. */
int sf_wal_dir_list(const char *dir, struct sf_wal_seg_ent **out, size_t *n, struct sf_err *err);

/* DIR/wal-<16 hex>.log into out; false when it does not fit. */
bool sf_wal_seg_path(char *out, size_t cap, const char *dir, uint64_t first_lsn);

/* fsync of the directory itself, so a create or unlink in it survives a power loss. Returns 0
 * or -errno. */
int sf_wal_dir_sync(int dirfd);

#endif
