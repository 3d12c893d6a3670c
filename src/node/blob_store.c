#include "node/blob_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <sodium.h>

#include "common/dirs.h"

struct transfer {
	bool used;
	uint64_t link, id, total, got;
	uint8_t want[32];
	int fd;
	char partial[64];
	/* OpenSSL's SHA-256 (the CPU's SHA instructions where it has them): libsodium's was
	 * 210 MB/s a core here, 85-90% of a blob transfer's time in the node (perf/run-blob),
	 * OpenSSL's 1236 MB/s. */
	EVP_MD_CTX *hash;
};

struct sf_blob_store {
	int dirfd;
	char dir[4096];
	uint64_t used, max;
	struct transfer t[SF_BLOB_MAX_TRANSFERS];
	/* Blobs this process stored or has hashed: the others are checked at their first use,
	 * since a blob is named before its bytes are known to be on the disk. */
	uint8_t (*trusted)[32];
	uint32_t n_trusted, cap_trusted;
};

static bool trusted(const struct sf_blob_store *bs, const uint8_t sha256[32])
{
	for (uint32_t i = 0; i < bs->n_trusted; i++)
		if (!memcmp(bs->trusted[i], sha256, 32))
			return true;
	return false;
}

static void trust(struct sf_blob_store *bs, const uint8_t sha256[32])
{
	if (trusted(bs, sha256))
		return;
	if (bs->n_trusted == bs->cap_trusted) {
		uint32_t cap = bs->cap_trusted ? bs->cap_trusted * 2 : 64;
		void *p = realloc(bs->trusted, (size_t)cap * 32);
		if (!p)
			return; /* hashed again at its next use */
		bs->trusted = p;
		bs->cap_trusted = cap;
	}
	memcpy(bs->trusted[bs->n_trusted++], sha256, 32);
}

void sf_blob_hex(const uint8_t sha256[32], char out[65])
{
	static const char digits[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		out[2 * i] = digits[sha256[i] >> 4];
		out[2 * i + 1] = digits[sha256[i] & 15];
	}
	out[64] = 0;
}

static bool is_blob_name(const char *name)
{
	if (strlen(name) != 64)
		return false;
	for (int i = 0; i < 64; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	return true;
}

/* Opens the directory, counts the blobs there and removes partial files a crash left; the
 * directory must be there. 0 or a negative sf_code. */
static int open_dir(struct sf_blob_store *bs, struct sf_err *err)
{
	bs->dirfd = open(bs->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (bs->dirfd < 0)
		return sf_err_set(err, SF_E_IO, "cannot open blob directory %s: %s", bs->dir,
				  strerror(errno));
	bs->used = 0;
	DIR *d = fdopendir(dup(bs->dirfd));
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			struct stat st;
			if (!strncmp(de->d_name, ".partial-", 9))
				unlinkat(bs->dirfd, de->d_name, 0); /* a crash cut it short */
			else if (is_blob_name(de->d_name) && !fstatat(bs->dirfd, de->d_name, &st, 0))
				bs->used += (uint64_t)st.st_size;
		}
		closedir(d);
	}
	return 0;
}

int sf_blob_store_open(struct sf_blob_store **out, const char *dir, uint64_t max_bytes,
		       struct sf_err *err)
{
	if (sodium_init() < 0)
		return sf_err_set(err, SF_E_CRYPTO, "libsodium failed to start");
	if (strlen(dir) >= sizeof(((struct sf_blob_store *)0)->dir))
		return sf_err_set(err, SF_E_LIMIT, "the blob directory's path is longer than %zu bytes",
				  sizeof(((struct sf_blob_store *)0)->dir) - 1);
	struct stat st;
	bool there = stat(dir, &st) == 0;
	if (!there && errno != ENOENT && errno != ENOTDIR)
		return sf_err_set(err, SF_E_IO, "cannot reach blob directory %s: %s", dir,
				  strerror(errno));
	if (there && !S_ISDIR(st.st_mode))
		return sf_err_set(err, SF_E_IO, "%s is not a directory", dir);
	int rc = there ? 0 : sf_dir_can_make(dir, err); /* made at the first blob */
	if (rc)
		return rc;
	struct sf_blob_store *bs = calloc(1, sizeof(*bs));
	if (!bs)
		return sf_err_set(err, SF_E_NOMEM, "no memory for the blob store");
	snprintf(bs->dir, sizeof(bs->dir), "%s", dir);
	bs->max = max_bytes ? max_bytes : 16ull << 30;
	bs->dirfd = -1;
	if (there && (rc = open_dir(bs, err))) {
		free(bs);
		return rc;
	}
	for (int i = 0; i < SF_BLOB_MAX_TRANSFERS; i++)
		bs->t[i].fd = -1;
	*out = bs;
	return 0;
}

bool sf_blob_store_made(const struct sf_blob_store *bs)
{
	return bs->dirfd >= 0;
}

static void drop(struct sf_blob_store *bs, struct transfer *t)
{
	if (t->fd >= 0) {
		close(t->fd);
		unlinkat(bs->dirfd, t->partial, 0);
	}
	EVP_MD_CTX_free(t->hash);
	memset(t, 0, sizeof(*t));
	t->fd = -1;
}

void sf_blob_store_close(struct sf_blob_store *bs)
{
	if (!bs)
		return;
	for (int i = 0; i < SF_BLOB_MAX_TRANSFERS; i++)
		if (bs->t[i].used)
			drop(bs, &bs->t[i]);
	if (bs->dirfd >= 0)
		close(bs->dirfd);
	free(bs->trusted);
	free(bs);
}

static struct transfer *find(struct sf_blob_store *bs, uint64_t link, uint64_t id)
{
	for (int i = 0; i < SF_BLOB_MAX_TRANSFERS; i++)
		if (bs->t[i].used && bs->t[i].link == link && bs->t[i].id == id)
			return &bs->t[i];
	return NULL;
}

static uint64_t in_flight(const struct sf_blob_store *bs)
{
	uint64_t n = 0;
	for (int i = 0; i < SF_BLOB_MAX_TRANSFERS; i++)
		if (bs->t[i].used)
			n += bs->t[i].total;
	return n;
}

int sf_blob_begin(struct sf_blob_store *bs, uint64_t link, uint64_t id, uint64_t total_len,
		  const uint8_t sha256[32], struct sf_err *err)
{
	if (find(bs, link, id))
		return sf_err_set(err, SF_E_STATE, "transfer %llu began twice", (unsigned long long)id);
	if (total_len > bs->max || bs->used + in_flight(bs) > bs->max - total_len)
		return sf_err_set(err, SF_E_LIMIT,
				  "blob store full: %llu of %llu bytes used, a %llu-byte blob does not fit",
				  (unsigned long long)bs->used, (unsigned long long)bs->max,
				  (unsigned long long)total_len);
	struct transfer *t = NULL;
	for (int i = 0; i < SF_BLOB_MAX_TRANSFERS && !t; i++)
		if (!bs->t[i].used)
			t = &bs->t[i];
	if (!t)
		return sf_err_set(err, SF_E_LIMIT, "%d blob transfers already in progress",
				  SF_BLOB_MAX_TRANSFERS);
	if (bs->dirfd < 0) { /* the first blob: the directory now */
		int rc = sf_mkdirs(bs->dir, 0700, err);
		if (rc) {
			sf_err_prefix(err, "the blob directory");
			return rc;
		}
		if ((rc = open_dir(bs, err)))
			return rc;
	}
	snprintf(t->partial, sizeof(t->partial), ".partial-%llx-%llx", (unsigned long long)link,
		 (unsigned long long)id);
	t->fd = openat(bs->dirfd, t->partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (t->fd < 0)
		return sf_err_set(err, SF_E_IO, "cannot create %s/%s: %s", bs->dir, t->partial,
				  strerror(errno));
	t->used = true;
	t->link = link;
	t->id = id;
	t->total = total_len;
	t->got = 0;
	memcpy(t->want, sha256, 32);
	t->hash = EVP_MD_CTX_new();
	if (!t->hash || !EVP_DigestInit_ex(t->hash, EVP_sha256(), NULL)) {
		drop(bs, t);
		return sf_err_set(err, SF_E_NOMEM, "no memory to hash a blob");
	}
	return 0;
}

int sf_blob_chunk(struct sf_blob_store *bs, uint64_t link, uint64_t id, uint64_t offset,
		  const uint8_t *data, size_t n, struct sf_err *err)
{
	struct transfer *t = find(bs, link, id);
	if (!t)
		return sf_err_set(err, SF_E_STATE, "chunk for transfer %llu, which is not in progress",
				  (unsigned long long)id);
	int rc = 0;
	if (offset != t->got)
		rc = sf_err_set(err, SF_E_RANGE, "chunk at offset %llu, but transfer %llu stands at %llu",
				(unsigned long long)offset, (unsigned long long)id,
				(unsigned long long)t->got);
	else if (n > t->total - t->got)
		rc = sf_err_set(err, SF_E_RANGE, "chunk passes the announced %llu bytes of transfer %llu",
				(unsigned long long)t->total, (unsigned long long)id);
	for (size_t done = 0; !rc && done < n;) {
		ssize_t w = write(t->fd, data + done, n - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			rc = sf_err_set(err, SF_E_IO, "writing blob transfer %llu: %s",
					(unsigned long long)id, w < 0 ? strerror(errno) : "no space");
		else
			done += (size_t)w;
	}
	if (rc) {
		drop(bs, t);
		return rc;
	}
	EVP_DigestUpdate(t->hash, data, n);
	t->got += n;
	return 0;
}

int sf_blob_end(struct sf_blob_store *bs, uint64_t link, uint64_t id, uint8_t sha256[32],
		struct sf_err *err)
{
	struct transfer *t = find(bs, link, id);
	if (!t)
		return sf_err_set(err, SF_E_STATE, "end of transfer %llu, which is not in progress",
				  (unsigned long long)id);
	memcpy(sha256, t->want, 32);
	char want[65], got[65];
	sf_blob_hex(t->want, want);
	if (t->got != t->total) {
		int rc = sf_err_set(err, SF_E_TRUNCATED, "blob %s ended after %llu of %llu bytes; deleted",
				    want, (unsigned long long)t->got, (unsigned long long)t->total);
		drop(bs, t);
		return rc;
	}
	uint8_t digest[32];
	unsigned int dlen = 0;
	if (!EVP_DigestFinal_ex(t->hash, digest, &dlen) || dlen != 32)
		memset(digest, 0, sizeof(digest)); /* never matches a real blob's name */
	if (sodium_memcmp(digest, t->want, 32) != 0) {
		sf_blob_hex(digest, got);
		int rc = sf_err_set(err, SF_E_RANGE,
				    "blob announced as %s hashes to %s; refused and deleted", want, got);
		drop(bs, t);
		return rc;
	}
	bool had = sf_blob_has(bs, t->want);
	/* Named without waiting for the disk: a sync here held the node's loop for seconds on a
	 * busy disk (64 MiB blobs), past heartbeat limits. A crash may leave a named blob whose
	 * bytes did not all reach the disk; a later process hashes every blob it did not store
	 * itself at its first use (sf_blob_map) and deletes one that does not match, and the head
	 * sends it again. */
	if (renameat(bs->dirfd, t->partial, bs->dirfd, want) < 0) {
		int rc = sf_err_set(err, SF_E_IO, "storing blob %s: %s", want, strerror(errno));
		drop(bs, t);
		return rc;
	}
	trust(bs, t->want);
	close(t->fd);
	t->fd = -1;
	if (!had)
		bs->used += t->total;
	EVP_MD_CTX_free(t->hash);
	memset(t, 0, sizeof(*t));
	t->fd = -1;
	return 0;
}

void sf_blob_abort(struct sf_blob_store *bs, uint64_t link, uint64_t id)
{
	for (int i = 0; i < SF_BLOB_MAX_TRANSFERS; i++)
		if (bs->t[i].used && bs->t[i].link == link && bs->t[i].id == id)
			drop(bs, &bs->t[i]);
}

void sf_blob_abort_link(struct sf_blob_store *bs, uint64_t link)
{
	for (int i = 0; i < SF_BLOB_MAX_TRANSFERS; i++)
		if (bs->t[i].used && bs->t[i].link == link)
			drop(bs, &bs->t[i]);
}

bool sf_blob_has(struct sf_blob_store *bs, const uint8_t sha256[32])
{
	char name[65];
	sf_blob_hex(sha256, name);
	if (bs->dirfd < 0)
		return false;
	return faccessat(bs->dirfd, name, F_OK, 0) == 0;
}

static const uint8_t empty_blob[1];

int sf_blob_map(struct sf_blob_store *bs, const uint8_t sha256[32], const uint8_t **data,
		size_t *len, struct sf_err *err)
{
	char name[65];
	sf_blob_hex(sha256, name);
	if (bs->dirfd < 0)
		return sf_err_set(err, SF_E_RANGE, "blob %s is not on this node", name);
	int fd = openat(bs->dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sf_err_set(err, SF_E_RANGE, "blob %s is not on this node", name);
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size > SF_BLOB_MAP_MAX) {
		rc = sf_err_set(err, SF_E_LIMIT, "blob %s is over the %llu bytes an operation may "
				"read", name, (unsigned long long)SF_BLOB_MAP_MAX);
		goto out;
	}
	*len = (size_t)st.st_size;
	if (!*len) {
		*data = empty_blob; /* mmap takes no empty range */
		goto out;
	}
	void *p = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		rc = sf_err_set(err, SF_E_IO, "mapping blob %s (%zu bytes) failed: %s", name, *len,
				strerror(errno));
		goto out;
	}
	(void)madvise(p, *len, MADV_SEQUENTIAL); /* operations read it front to back */
	if (!trusted(bs, sha256)) {
		uint8_t digest[32];
		unsigned int dlen = 0;
		if (!EVP_Digest(p, *len, digest, &dlen, EVP_sha256(), NULL) || dlen != 32 ||
		    sodium_memcmp(digest, sha256, 32) != 0) {
			munmap(p, *len);
			unlinkat(bs->dirfd, name, 0);
			bs->used = bs->used > (uint64_t)st.st_size ? bs->used - (uint64_t)st.st_size : 0;
			rc = sf_err_set(err, SF_E_RANGE, "blob %s on this node does not hash to its name "
					"(stored before a crash, its bytes not all on the disk?); deleted: "
					"the head sends it again", name);
			goto out;
		}
		trust(bs, sha256);
	}
	*data = p;
out:
	close(fd);
	return rc;
}

void sf_blob_unmap(const uint8_t *data, size_t len)
{
	if (data && data != empty_blob && len)
		munmap((void *)(uintptr_t)data, len);
}

uint64_t sf_blob_store_used(const struct sf_blob_store *bs)
{
	return bs->used;
}
