/* A stored conversation's turns (/v1/responses): each stored response's input and output
 * items, in order, so that a request naming any of them as previous_response_id replays the
 * conversation up to it. Bounded: SF_WAL_MAX_TURNS turns and SF_WALREC_MAX_ITEMS bytes of
 * items a conversation; past either, and after a turn that was not kept (a gap), no later
 * turn is kept (`over`). The head's named sessions and the log's table hold one each. No I/O. */
#ifndef SF_WAL_WAL_TURNS_H
#define SF_WAL_WAL_TURNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wal/wal_records.h"

#define SF_WAL_MAX_TURNS 256

struct sf_wal_turn {
	char id[SF_WALREC_MAX_ID + 1]; /* the response's */
	char *items;                   /* a JSON array, NUL-terminated */
	uint32_t len;
};

struct sf_wal_turns {
	struct sf_wal_turn *v;
	uint32_t n, cap;
	size_t bytes;                  /* of every turn's items */
	bool over;                     /* no later turn is kept */
};

/* Appends a turn (items, len bytes of a JSON array; len 0: mark the list over). 0: kept;
 * 1: not kept, the list is over (now or before); SF_E_NOMEM. */
int sf_wal_turns_add(struct sf_wal_turns *t, const char *id, const uint8_t *items,
		     uint32_t len);
/* The index of the turn of response id, or -1. */
int sf_wal_turns_find(const struct sf_wal_turns *t, const char *id);
/* A copy of src into dst (dst's turns freed first); 0 or SF_E_NOMEM (dst then empty). */
int sf_wal_turns_copy(struct sf_wal_turns *dst, const struct sf_wal_turns *src);
void sf_wal_turns_free(struct sf_wal_turns *t);

#endif
