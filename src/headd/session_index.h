/* Who in the daemon answers for a session: a hash from session id to the request (or admin
 * client) its head events go to, so each event finds its owner at once rather than by a
 * walk over every request (which showed in the head's profile: perf/results). An entry
 * points at a live owner only: it goes when the owner is freed. */
#ifndef HEADD_SESSION_INDEX_H
#define HEADD_SESSION_INDEX_H

#include <stdbool.h>
#include <stdint.h>

struct headd_index_entry;
struct headd_index {
	struct headd_index_entry **buckets;
	uint32_t mask, n;
};

/* 0, or -1 without memory (then every lookup misses). */
int headd_index_init(struct headd_index *x, uint32_t expected);
void headd_index_free(struct headd_index *x);
/* key's owner is now owner (replacing any). 0, or -1 without memory. */
int headd_index_put(struct headd_index *x, uint64_t key, void *owner);
void *headd_index_get(const struct headd_index *x, uint64_t key);
/* Forgets key when owner is the one it names. */
void headd_index_drop(struct headd_index *x, uint64_t key, const void *owner);

#endif
