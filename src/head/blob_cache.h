/* The head's blobs (files requests name, section 9.6 of PROTOCOL.md), kept in memory by their
 * SHA-256 so that a blob is read from the client once and sent to each node link from here.
 * Bounded in bytes and in entries; past a bound the least recently used blob goes first, but
 * never one a running request has pinned. No I/O. */
#ifndef SF_HEAD_BLOB_CACHE_H
#define SF_HEAD_BLOB_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>

#define SF_BLOB_CACHE_DEFAULT_BYTES (256ull << 20)
#define SF_BLOB_CACHE_MAX_ENTRIES 4096

struct sf_blob_cache;

struct sf_blob_cache_stats {
	uint64_t entries, bytes;  /* held now */
	uint64_t pinned;          /* entries a request holds now */
	uint64_t puts, hits, evictions;
};

/* max_bytes 0: SF_BLOB_CACHE_DEFAULT_BYTES. NULL when out of memory. */
struct sf_blob_cache *sf_blob_cache_new(uint64_t max_bytes);
/* Frees every blob, pinned ones too. */
void sf_blob_cache_free(struct sf_blob_cache *c);

/* Keeps a copy of data[0..len) under its SHA-256 (into sha256), most recently used; a blob
 * already held is only touched (a hit). To make room the least recently used unpinned blobs
 * go. Returns 0, SF_E_LIMIT (larger than the bound, or the room is held by pinned blobs: err
 * says which) or SF_E_NOMEM; the cache is then as it was. The new blob is not pinned: pin it
 * before the next put if a request is to read it. */
int sf_blob_cache_put(struct sf_blob_cache *c, const void *data, size_t len,
		      uint8_t sha256[32], struct sf_err *err);
/* The blob named sha256 (valid while it is held), or NULL; *len gets its length. Does not
 * change its recency. */
const uint8_t *sf_blob_cache_get(const struct sf_blob_cache *c, const uint8_t sha256[32],
				 size_t *len);
/* Pins the blob (counted: each pin is undone by one unpin) so that it is never evicted;
 * also marks it most recently used. false when it is not held. */
bool sf_blob_cache_pin(struct sf_blob_cache *c, const uint8_t sha256[32]);
/* Undoes one pin; a blob no longer pinned may go at a later put. Unknown hashes are ignored. */
void sf_blob_cache_unpin(struct sf_blob_cache *c, const uint8_t sha256[32]);

void sf_blob_cache_stats(const struct sf_blob_cache *c, struct sf_blob_cache_stats *out);

#endif
