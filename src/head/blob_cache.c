/* The head's blob cache: entries on one list, most recently used first, looked up by hash
 * (a few thousand at most, so a scan). */
#include "head/blob_cache.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

struct bc_entry {
	uint8_t sha[32];
	uint8_t *data;
	size_t len;
	uint32_t pins;
	struct bc_entry *prev, *next; /* recency: prev is more recent */
};

struct sf_blob_cache {
	uint64_t max_bytes, bytes;
	uint64_t entries, pinned, puts, hits, evictions;
	struct bc_entry *first, *last;
};

struct sf_blob_cache *sf_blob_cache_new(uint64_t max_bytes)
{
	struct sf_blob_cache *c = calloc(1, sizeof(*c));
	if (c)
		c->max_bytes = max_bytes ? max_bytes : SF_BLOB_CACHE_DEFAULT_BYTES;
	return c;
}

static void unlink_entry(struct sf_blob_cache *c, struct bc_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->first = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->last = e->prev;
	e->prev = e->next = NULL;
}

static void push_front(struct sf_blob_cache *c, struct bc_entry *e)
{
	e->prev = NULL;
	e->next = c->first;
	if (c->first)
		c->first->prev = e;
	else
		c->last = e;
	c->first = e;
}

void sf_blob_cache_free(struct sf_blob_cache *c)
{
	if (!c)
		return;
	for (struct bc_entry *e = c->first, *n; e; e = n) {
		n = e->next;
		free(e->data);
		free(e);
	}
	free(c);
}

static struct bc_entry *find(const struct sf_blob_cache *c, const uint8_t sha[32])
{
	for (struct bc_entry *e = c->first; e; e = e->next)
		if (!memcmp(e->sha, sha, 32))
			return e;
	return NULL;
}

static void drop(struct sf_blob_cache *c, struct bc_entry *e)
{
	unlink_entry(c, e);
	c->bytes -= e->len;
	c->entries--;
	c->evictions++;
	free(e->data);
	free(e);
}

int sf_blob_cache_put(struct sf_blob_cache *c, const void *data, size_t len,
		      uint8_t sha256[32], struct sf_err *err)
{
	/* OpenSSL's SHA-256 (the CPU's SHA instructions where it has them) runs on the head's
	 * loop: about 1 ms a MiB, libsodium's was six times that. */
	unsigned int dlen = 0;
	if (!EVP_Digest(data, len, sha256, &dlen, EVP_sha256(), NULL) || dlen != 32)
		return sf_err_set(err, SF_E_NOMEM, "hashing a blob of %zu bytes failed", len);
	c->puts++;
	struct bc_entry *e = find(c, sha256);
	if (e) {
		c->hits++;
		unlink_entry(c, e);
		push_front(c, e);
		return 0;
	}
	if (len > c->max_bytes)
		return sf_err_set(err, SF_E_LIMIT, "a blob of %zu bytes is over the head's blob "
				  "cache of %llu bytes", len, (unsigned long long)c->max_bytes);
	/* Would unpinned blobs, least recent first, make room? Check before dropping any. */
	uint64_t freeable = 0, freeable_n = 0;
	for (struct bc_entry *k = c->first; k; k = k->next)
		if (!k->pins) {
			freeable += k->len;
			freeable_n++;
		}
	if (c->bytes - freeable + len > c->max_bytes ||
	    c->entries - freeable_n + 1 > SF_BLOB_CACHE_MAX_ENTRIES)
		return sf_err_set(err, SF_E_LIMIT, "the head's blob cache (%llu bytes) is held by "
				  "running requests' blobs: try again when they end",
				  (unsigned long long)c->max_bytes);
	e = calloc(1, sizeof(*e));
	uint8_t *copy = malloc(len ? len : 1);
	if (!e || !copy) {
		free(e);
		free(copy);
		return sf_err_set(err, SF_E_NOMEM, "no memory for a blob of %zu bytes", len);
	}
	for (struct bc_entry *k = c->last, *p; k &&
	     (c->bytes + len > c->max_bytes || c->entries + 1 > SF_BLOB_CACHE_MAX_ENTRIES); k = p) {
		p = k->prev;
		if (!k->pins)
			drop(c, k);
	}
	if (len)
		memcpy(copy, data, len);
	memcpy(e->sha, sha256, 32);
	e->data = copy;
	e->len = len;
	push_front(c, e);
	c->bytes += len;
	c->entries++;
	return 0;
}

const uint8_t *sf_blob_cache_get(const struct sf_blob_cache *c, const uint8_t sha256[32],
				 size_t *len)
{
	const struct bc_entry *e = find(c, sha256);
	if (!e)
		return NULL;
	*len = e->len;
	return e->data;
}

bool sf_blob_cache_pin(struct sf_blob_cache *c, const uint8_t sha256[32])
{
	struct bc_entry *e = find(c, sha256);
	if (!e)
		return false;
	if (!e->pins++)
		c->pinned++;
	unlink_entry(c, e);
	push_front(c, e);
	return true;
}

void sf_blob_cache_unpin(struct sf_blob_cache *c, const uint8_t sha256[32])
{
	struct bc_entry *e = find(c, sha256);
	if (e && e->pins && !--e->pins)
		c->pinned--;
}

void sf_blob_cache_stats(const struct sf_blob_cache *c, struct sf_blob_cache_stats *out)
{
	*out = (struct sf_blob_cache_stats){ .entries = c->entries, .bytes = c->bytes,
					     .pinned = c->pinned, .puts = c->puts,
					     .hits = c->hits, .evictions = c->evictions };
}
