/* A binary min-heap of timers keyed by deadline, with O(log n) cancel. Timers live in a slab;
 * an id names one until it fires or is cancelled. */
#ifndef SF_IO_TIMER_HEAP_H
#define SF_IO_TIMER_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef void (*sf_timer_fn)(void *arg, uint64_t now_ms);

struct sf_timer_slot {
	uint64_t deadline;
	sf_timer_fn fn;
	void *arg;
	uint32_t heap_at; /* index in the heap, UINT32_MAX when free */
	uint32_t gen;     /* bumps on each reuse, so a stale id cancels nothing */
};

struct sf_timers {
	struct sf_timer_slot *slots;
	uint32_t *heap; /* slot indexes */
	uint32_t n, cap, free_head, limit;
	uint32_t *free_next;
};

void sf_timers_init(struct sf_timers *t, uint32_t limit);
void sf_timers_free(struct sf_timers *t);
/* Adds a timer; returns its id (never 0) or 0 when the table is at its limit or memory is
 * short. */
uint64_t sf_timers_add(struct sf_timers *t, uint64_t deadline, sf_timer_fn fn, void *arg);
/* Cancels a pending timer; a fired or unknown id is ignored. */
void sf_timers_cancel(struct sf_timers *t, uint64_t id);
/* Earliest deadline, UINT64_MAX when none. */
uint64_t sf_timers_next(const struct sf_timers *t);
/* Fires every timer due at now (in deadline order); returns how many fired. A timer may add
 * or cancel timers from its callback. */
unsigned sf_timers_run(struct sf_timers *t, uint64_t now);
static inline uint32_t sf_timers_count(const struct sf_timers *t) { return t->n; }

#endif
