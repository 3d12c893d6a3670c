/* The compute pool (pool.h): a generation counter the workers watch, a count of workers still
 * running the current job, both waited on by spinning a little and then on a futex. */
#include "model/pool.h"

#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SPIN_ROUNDS 4000 /* some 50-150 us of spinning before sleeping */

struct sf_pool {
	unsigned n;
	pthread_t *threads;
	sf_pool_fn fn;
	void *arg;
	_Atomic uint32_t gen;     /* bumped for each job (and at stop) */
	_Atomic uint32_t running; /* workers that have not finished the current job */
	_Atomic bool stop;
	_Atomic uint32_t bar_count; /* threads arrived at the current barrier */
	_Atomic uint32_t bar_phase; /* bumped when the last one arrives */
};

struct worker {
	struct sf_pool *p;
	unsigned ith;
};

static void futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Waits until *addr != val. */
static void wait_change(_Atomic uint32_t *addr, uint32_t val)
{
	for (int i = 0; i < SPIN_ROUNDS; i++) {
		if (atomic_load_explicit(addr, memory_order_acquire) != val)
			return;
		relax();
	}
	while (atomic_load_explicit(addr, memory_order_acquire) == val)
		futex_wait(addr, val);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct sf_pool *p = w->p;
	uint32_t seen = 0;
	for (;;) {
		wait_change(&p->gen, seen);
		seen = atomic_load_explicit(&p->gen, memory_order_acquire);
		if (atomic_load_explicit(&p->stop, memory_order_acquire))
			break;
		p->fn(p->arg, w->ith, p->n);
		if (atomic_fetch_sub_explicit(&p->running, 1, memory_order_acq_rel) == 1)
			futex_wake(&p->running);
	}
	free(w);
	return NULL;
}

struct sf_pool *sf_pool_new(unsigned n_threads)
{
	struct sf_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->n = n_threads ? n_threads : 1;
	p->threads = calloc(p->n, sizeof(*p->threads));
	if (!p->threads) {
		free(p);
		return NULL;
	}
	for (unsigned i = 1; i < p->n; i++) {
		struct worker *w = malloc(sizeof(*w));
		if (w)
			*w = (struct worker){ p, i };
		if (!w || pthread_create(&p->threads[i], NULL, worker_main, w)) {
			free(w);
			p->n = i; /* the threads started so far are stopped by free */
			sf_pool_free(p);
			return NULL;
		}
	}
	return p;
}

void sf_pool_free(struct sf_pool *p)
{
	if (!p)
		return;
	atomic_store_explicit(&p->stop, true, memory_order_release);
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_acq_rel);
	futex_wake(&p->gen);
	for (unsigned i = 1; i < p->n; i++)
		pthread_join(p->threads[i], NULL);
	free(p->threads);
	free(p);
}

unsigned sf_pool_threads(const struct sf_pool *p)
{
	return p->n;
}

void sf_pool_run(struct sf_pool *p, sf_pool_fn fn, void *arg)
{
	if (p->n == 1) {
		fn(arg, 0, 1);
		return;
	}
	p->fn = fn;
	p->arg = arg;
	atomic_store_explicit(&p->running, p->n - 1, memory_order_release);
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_acq_rel);
	futex_wake(&p->gen);
	fn(arg, 0, p->n);
	uint32_t left;
	while ((left = atomic_load_explicit(&p->running, memory_order_acquire)))
		wait_change(&p->running, left);
}

void sf_pool_barrier(struct sf_pool *p)
{
	if (p->n == 1)
		return;
	uint32_t phase = atomic_load_explicit(&p->bar_phase, memory_order_acquire);
	if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == p->n - 1) {
		atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
		atomic_fetch_add_explicit(&p->bar_phase, 1, memory_order_acq_rel);
		return;
	}
	for (unsigned i = 0; atomic_load_explicit(&p->bar_phase, memory_order_acquire) == phase; i++) {
		if (i < SPIN_ROUNDS)
			relax();
		else
			sched_yield();
	}
}

void sf_pool_split(uint64_t n, unsigned ith, unsigned nth, uint64_t align, uint64_t *lo,
		   uint64_t *hi)
{
	uint64_t units = (n + align - 1) / align;
	uint64_t a = units * ith / nth, b = units * (ith + 1) / nth;
	*lo = a * align < n ? a * align : n;
	*hi = b * align < n ? b * align : n;
}
