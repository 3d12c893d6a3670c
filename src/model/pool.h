/* The compute pool: a fixed set of threads that run one function together, each on its share
 * of the work (ith of nth), and return when all are done. Threads spin briefly between jobs
 * (a decode step's layers come microseconds apart) and then sleep on a futex; none is created
 * per job. One caller at a time; the caller is thread 0. */
#ifndef SF_MODEL_POOL_H
#define SF_MODEL_POOL_H

#include <stdint.h>

struct sf_pool;

typedef void (*sf_pool_fn)(void *arg, unsigned ith, unsigned nth);

/* A pool of n_threads (the caller counts as one; 1: no extra threads). NULL on failure. */
struct sf_pool *sf_pool_new(unsigned n_threads);

/* Stops and joins the threads. NULL is a no-op. */
void sf_pool_free(struct sf_pool *p);

unsigned sf_pool_threads(const struct sf_pool *p);

/* Runs fn(arg, ith, nth) on every thread (ith 0 on the caller's) and returns when all return. */
void sf_pool_run(struct sf_pool *p, sf_pool_fn fn, void *arg);

/* Inside a job: waits until every thread of the job has called it (spinning, then yielding). */
void sf_pool_barrier(struct sf_pool *p);

/* The share [*lo, *hi) of n items for thread ith of nth, in whole multiples of align. */
void sf_pool_split(uint64_t n, unsigned ith, unsigned nth, uint64_t align, uint64_t *lo,
		   uint64_t *hi);

#endif
