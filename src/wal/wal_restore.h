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

/* The generation of s that had not ended, or NULL. One the session gave up is not running. */
const struct sf_wal_gen *sf_wal_session_running(const struct sf_wal_session *s);

/* Whether g had not ended but its session gave it up: a content record after it took its
 * prompt back (a named session's turn that failed, the client told so: headd's rollback).
 * It comes back ended, cancelled, and is not asked of a node again. */
bool sf_wal_gen_abandoned(const struct sf_wal_session *s, const struct sf_wal_gen *g);

#endif
