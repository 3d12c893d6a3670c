/* One event loop per core, each on its own thread with its own connections, timers and slice
 * of every sharded table. Shards share nothing on the hot path; a hand-off from one shard to
 * another goes through the target's inbox, a bounded queue that wakes its loop. */
#ifndef SF_IO_SHARDS_H
#define SF_IO_SHARDS_H

#include <pthread.h>
#include <stdint.h>

#include "io/loop.h"

#define SF_SHARDS_MAX 256
#define SF_INBOX_MAX 65536
#define SF_INBOX_TURN 256 /* messages a shard runs per loop turn, the rest on the next */

struct sf_shards;

/* Runs on the shard's own thread before its loop starts: set up listeners, dials, state.
 * Returns 0, or non-zero to stop every shard. */
typedef int (*sf_shard_start_fn)(struct sf_loop *loop, unsigned shard, void *arg);
/* A message handed to a shard, run on that shard's thread (arg: the shards' arg). */
typedef void (*sf_inbox_fn)(struct sf_loop *loop, unsigned shard, void *msg, void *arg);

/* Runs the shard's loop until the shards stop (instead of sf_loop_run): the owner's own turns,
 * with work of its own between them. Must return soon after sf_shards_stopping. */
typedef void (*sf_shard_run_fn)(struct sf_loop *loop, unsigned shard, void *arg);
/* Runs on the shard's thread once its loop has been freed (every connection's on_closed has
 * run): the owner frees what those callbacks touched. */
typedef void (*sf_shard_fini_fn)(unsigned shard, void *arg);

struct sf_shards_config {
	unsigned n;                 /* 1..SF_SHARDS_MAX */
	struct sf_loop_config loop;
	bool pin;                   /* each thread on a CPU of its own */
	sf_shard_start_fn start;    /* may be NULL */
	sf_shard_run_fn run;        /* NULL: sf_loop_run */
	sf_inbox_fn inbox;          /* may be NULL */
	sf_shard_fini_fn fini;      /* may be NULL */
	void *arg;
};

/* The CPUs this process may run on (sched_getaffinity), at least 1. */
unsigned sf_shards_default_count(void);

/* Starts n shards (1..SF_SHARDS_MAX), each a thread with its own loop made from cfg, pinned to
 * a CPU when pin is true. Returns 0 or a negative sf_code (err says why). */
int sf_shards_start(struct sf_shards **out, unsigned n, const struct sf_loop_config *cfg,
		    bool pin, sf_shard_start_fn start, sf_inbox_fn inbox, void *arg,
		    struct sf_err *err);
int sf_shards_start_cfg(struct sf_shards **out, const struct sf_shards_config *cfg,
			struct sf_err *err);
/* Whether sf_shards_stop has been called (any thread). */
bool sf_shards_stopping(const struct sf_shards *s);
/* Hands msg to shard i (any thread). Returns 0 or SF_E_LIMIT when its inbox is full. */
int sf_shards_send(struct sf_shards *s, unsigned i, void *msg);
/* Stops every loop, joins the threads, frees the loops. Messages still in an inbox then are
 * given to inbox once more, on the shard's thread, before its loop is freed (with
 * sf_shards_stopping true: the owner lets go of what they carry). */
void sf_shards_stop(struct sf_shards *s);

unsigned sf_shards_count(const struct sf_shards *s);
/* Shard i's loop: use only from shard i's own thread. */
struct sf_loop *sf_shards_loop(struct sf_shards *s, unsigned i);

/* Which shard owns a session: a mix of its id, so ids made in sequence spread evenly. */
static inline unsigned sf_shard_of(uint64_t session_id, unsigned n_shards)
{
	uint64_t x = session_id * 0x9e3779b97f4a7c15ULL;
	return (unsigned)((x >> 32) * n_shards >> 32);
}

#endif
