/* Blobs a head sends, kept by SHA-256 in a directory: each transfer is written to a private
 * partial file, hashed as it comes, checked against its announced hash at the end, made
 * durable (fdatasync, rename, fsync of the directory) and only then named by its hash. The
 * store is bounded in bytes; blobs outlive connections and restarts. */
#ifndef SF_NODE_BLOB_STORE_H
#define SF_NODE_BLOB_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>

#define SF_BLOB_MAX_TRANSFERS 64  /* in progress at once, over all links */
#define SF_BLOB_MAP_MAX (16ull << 30) /* most bytes sf_blob_map maps */

struct sf_blob_store;

/* Opens dir, counts the blobs there and removes partial files a crash left. A dir that is
 * not there is made (parents included, mode 0700) at the first blob, not now: a node that
 * never sees one makes nothing; it is refused now if it could not be made (no writable
 * parent). max_bytes bounds the blobs kept (0: 16 GiB). Returns 0 or a negative sf_code. */
int sf_blob_store_open(struct sf_blob_store **out, const char *dir, uint64_t max_bytes,
		       struct sf_err *err);
/* Whether the directory is there yet (made, or found at open). */
bool sf_blob_store_made(const struct sf_blob_store *bs);
void sf_blob_store_close(struct sf_blob_store *bs);

/* A transfer starts: total_len bytes announced to hash to sha256. Refuses a second transfer
 * with the same (link, id), a store that would pass its bound, too many transfers. A blob the
 * store already has still transfers (the head sends once per connection) and is checked. */
int sf_blob_begin(struct sf_blob_store *bs, uint64_t link, uint64_t id, uint64_t total_len,
		  const uint8_t sha256[32], struct sf_err *err);
/* The next chunk: offset must be where the transfer stands (chunks come in order) and the
 * chunk must not pass total_len. On error the transfer is gone (its partial file deleted). */
int sf_blob_chunk(struct sf_blob_store *bs, uint64_t link, uint64_t id, uint64_t offset,
		  const uint8_t *data, size_t n, struct sf_err *err);
/* The end: all bytes came and they hash to the announced hash, or the blob is refused and
 * deleted. sha256 (out) gets the announced hash either way. */
int sf_blob_end(struct sf_blob_store *bs, uint64_t link, uint64_t id, uint8_t sha256[32],
		struct sf_err *err);
/* Drops one unfinished transfer (its partial file deleted); none such: nothing. */
void sf_blob_abort(struct sf_blob_store *bs, uint64_t link, uint64_t id);
/* Drops the link's unfinished transfers (the link closed). */
void sf_blob_abort_link(struct sf_blob_store *bs, uint64_t link);

bool sf_blob_has(struct sf_blob_store *bs, const uint8_t sha256[32]);
/* Maps a whole blob read-only (at most SF_BLOB_MAP_MAX bytes): the page cache holds it, not
 * the heap, so an operation may read a blob of any size the head sends. Release it with
 * sf_blob_unmap(*data, *len). */
int sf_blob_map(struct sf_blob_store *bs, const uint8_t sha256[32], const uint8_t **data,
		size_t *len, struct sf_err *err);
void sf_blob_unmap(const uint8_t *data, size_t len);
uint64_t sf_blob_store_used(const struct sf_blob_store *bs);
/* Lower-case hex of a hash into out (65 bytes). */
void sf_blob_hex(const uint8_t sha256[32], char out[65]);

#endif
