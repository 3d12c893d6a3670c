#include "io/timer_heap.h"

#include <stdlib.h>
#include <string.h>

#define FREE_END UINT32_MAX

void sf_timers_init(struct sf_timers *t, uint32_t limit)
{
	memset(t, 0, sizeof(*t));
	t->free_head = FREE_END;
	t->limit = limit;
}

void sf_timers_free(struct sf_timers *t)
{
	free(t->slots);
	free(t->heap);
	free(t->free_next);
	memset(t, 0, sizeof(*t));
}


static inline int less(const struct sf_timers *t, uint32_t a, uint32_t b)
{
	return t->slots[t->heap[a]].deadline < t->slots[t->heap[b]].deadline;
}

static void swap(struct sf_timers *t, uint32_t a, uint32_t b)
{
	uint32_t x = t->heap[a];
	t->heap[a] = t->heap[b];
	t->heap[b] = x;
	t->slots[t->heap[a]].heap_at = a;
	t->slots[t->heap[b]].heap_at = b;
}

static void up(struct sf_timers *t, uint32_t i)
{
	while (i > 0 && less(t, i, (i - 1) / 2)) {
		swap(t, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void down(struct sf_timers *t, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < t->n && less(t, l, m))
			m = l;
		if (r < t->n && less(t, r, m))
			m = r;
		if (m == i)
			return;
		swap(t, i, m);
		i = m;
	}
}

static int grow(struct sf_timers *t)
{
	uint32_t cap = t->cap ? t->cap * 2 : 64;
	if (t->limit && cap > t->limit)
		cap = t->limit;
	if (cap <= t->cap)
		return -1;
	struct sf_timer_slot *s = realloc(t->slots, cap * sizeof(*s));
	if (!s)
		return -1;
	t->slots = s;
	uint32_t *h = realloc(t->heap, cap * sizeof(*h));
	if (!h)
		return -1;
	t->heap = h;
	uint32_t *f = realloc(t->free_next, cap * sizeof(*f));
	if (!f)
		return -1;
	t->free_next = f;
	for (uint32_t i = cap; i-- > t->cap;) {
		t->slots[i] = (struct sf_timer_slot){ .heap_at = UINT32_MAX };
		t->free_next[i] = t->free_head;
		t->free_head = i;
	}
	t->cap = cap;
	return 0;
}

uint64_t sf_timers_add(struct sf_timers *t, uint64_t deadline, sf_timer_fn fn, void *arg)
{
	if (t->free_head == FREE_END && grow(t))
		return 0;
	uint32_t s = t->free_head;
	t->free_head = t->free_next[s];
	struct sf_timer_slot *slot = &t->slots[s];
	slot->deadline = deadline;
	slot->fn = fn;
	slot->arg = arg;
	slot->gen++;
	slot->heap_at = t->n;
	t->heap[t->n++] = s;
	up(t, slot->heap_at);
	return (uint64_t)slot->gen << 32 | (uint64_t)(s + 1);
}

static void remove_at(struct sf_timers *t, uint32_t i)
{
	uint32_t s = t->heap[i];
	t->n--;
	if (i != t->n) {
		swap(t, i, t->n);
		down(t, i);
		up(t, i);
	}
	t->slots[s].heap_at = UINT32_MAX;
	t->free_next[s] = t->free_head;
	t->free_head = s;
}

void sf_timers_cancel(struct sf_timers *t, uint64_t id)
{
	uint32_t s = (uint32_t)id - 1;
	if (!id || s >= t->cap)
		return;
	struct sf_timer_slot *slot = &t->slots[s];
	if (slot->gen != (uint32_t)(id >> 32) || slot->heap_at == UINT32_MAX)
		return;
	remove_at(t, slot->heap_at);
}

uint64_t sf_timers_next(const struct sf_timers *t)
{
	return t->n ? t->slots[t->heap[0]].deadline : UINT64_MAX;
}

unsigned sf_timers_run(struct sf_timers *t, uint64_t now)
{
	unsigned fired = 0;
	while (t->n && t->slots[t->heap[0]].deadline <= now) {
		struct sf_timer_slot *slot = &t->slots[t->heap[0]];
		sf_timer_fn fn = slot->fn;
		void *arg = slot->arg;
		remove_at(t, 0);
		fn(arg, now);
		fired++;
	}
	return fired;
}
