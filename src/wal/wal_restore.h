/* A session of the log's table back into a head machine that restarted: its parameters,
 * content and generations as sf_head_session_restore takes them (the content a running
 * generation goes on from includes what reached the client before its current run). Used
 * by the head daemon at start. No I/O. */
#ifndef SF_WAL_WAL_RESTORE_H
#define SF_WAL_WAL_RESTORE_H

#include <superfluid/err.h>

#include "head/head.h"
#include "wal/wal_state.h"

/* Restores s into h, placed on node (SF_HEAD_NO_NODE: parked; a running generation then
 * fails), its pages shared in prefix namespace cache_ns (0: none). Returns 0 or a negative
 * sf_code with err saying why. */
int sf_wal_restore_session(struct sf_head *h, const struct sf_wal_session *s, uint32_t node,
			   uint64_t cache_ns, uint64_t now_ms, struct sf_err *err);

/* The generation of s that had not ended, or NULL. */
const struct sf_wal_gen *sf_wal_session_running(const struct sf_wal_session *s);

#endif
