/* What the log's tests share: a synchronous driver (pwrite and fdatasync when the test says
 * a turn passed, then sf_wal_done), temporary directories, records with checkable bytes, and
 * a visitor that collects what a replay visits. Header only: each test file is one program. */
#ifndef SF_TEST_WAL_FAKE_H
#define SF_TEST_WAL_FAKE_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wal/wal.h"

struct fake_io {
	struct sf_wal *w;
	bool pending;
	int fd;
	const void *p;
	size_t n;
	uint64_t off;
	bool sync;
	int start_rc; /* what write() returns */
	int done_rc;  /* what the next completion says (then back to 0) */
	unsigned writes, syncs, sync_only;
};

static inline int fake_write(void *arg, int fd, const void *p, size_t n, uint64_t off, bool sync)
{
	struct fake_io *f = arg;
	if (f->pending) {
		fprintf(stderr, "two writes in flight\n");
		abort();
	}
	if (f->start_rc)
		return f->start_rc;
	*f = (struct fake_io){ .w = f->w, .pending = true, .fd = fd, .p = p, .n = n, .off = off,
			       .sync = sync, .done_rc = f->done_rc, .writes = f->writes + 1,
			       .syncs = f->syncs + sync, .sync_only = f->sync_only + (sync && !n) };
	return 0;
}

static inline struct sf_wal_io fake_io_of(struct fake_io *f)
{
	return (struct sf_wal_io){ .arg = f, .write = fake_write };
}

/* Lands the write in flight (when there is one) and tells the log. */
static inline void fake_complete(struct fake_io *f, uint64_t now)
{
	if (!f->pending)
		return;
	f->pending = false;
	int rc = f->done_rc;
	f->done_rc = 0;
	if (!rc && f->n && pwrite(f->fd, f->p, f->n, (off_t)f->off) != (ssize_t)f->n)
		rc = -errno;
	if (!rc && f->sync && fdatasync(f->fd))
		rc = -errno;
	sf_wal_done(f->w, rc, now);
}

/* One loop turn: the completion, then the kick. */
static inline void fake_turn(struct fake_io *f, uint64_t now)
{
	fake_complete(f, now);
	sf_wal_kick(f->w, now);
}

/* Turns until nothing is in flight or due. */
static inline void fake_drain(struct fake_io *f, uint64_t now)
{
	for (int i = 0; i < 1000 && (f->pending || sf_wal_deadline(f->w) <= now); i++)
		fake_turn(f, now);
}

/* ---- directories ---- */

static char *tmp_dir(void)
{
	char *d = strdup("/tmp/sf-wal-test-XXXXXX");
	if (!mkdtemp(d)) {
		perror("mkdtemp");
		abort();
	}
	return d;
}

static inline void rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	char p[4096];
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	closedir(d);
	rmdir(dir);
}

static inline int copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	char buf[65536];
	ssize_t k;
	int rc = in < 0 || out < 0 ? -1 : 0;
	while (!rc && (k = read(in, buf, sizeof(buf))) > 0)
		rc = write(out, buf, (size_t)k) == k ? 0 : -1;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return rc;
}

/* dst emptied, then a copy of src's files. */
static inline void copy_dir(const char *src, const char *dst)
{
	rm_dir(dst);
	mkdir(dst, 0700);
	DIR *d = opendir(src);
	struct dirent *e;
	char a[4096], b[4096];
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(a, sizeof(a), "%s/%s", src, e->d_name);
			snprintf(b, sizeof(b), "%s/%s", dst, e->d_name);
			if (copy_file(a, b))
				abort();
		}
	if (d)
		closedir(d);
}

static inline unsigned count_segments(const char *dir)
{
	unsigned n = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += !strncmp(e->d_name, "wal-", 4);
	if (d)
		closedir(d);
	return n;
}

static inline long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) ? -1 : (long)st.st_size;
}

/* ---- records ---- */

/* The payload record lsn of a test log carries: its length and bytes follow from lsn. */
static inline uint32_t payload_of(uint64_t lsn, uint8_t *out, uint32_t mod)
{
	uint32_t len = (uint32_t)((lsn * 37) % mod);
	for (uint32_t i = 0; i < len; i++)
		out[i] = (uint8_t)(lsn * 31 + i * 7);
	return len;
}

struct got {
	uint64_t lsn;
	uint8_t type;
	uint32_t len;
	uint32_t sum; /* of the payload */
};

struct collect {
	struct got *v;
	size_t n, cap;
};

static inline uint32_t sum_of(const uint8_t *p, uint32_t len)
{
	uint32_t s = 2166136261u;
	for (uint32_t i = 0; i < len; i++)
		s = (s ^ p[i]) * 16777619u;
	return s;
}

static inline int collect_visit(void *arg, const struct sf_wal_rec *r, struct sf_err *err)
{
	struct collect *c = arg;
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 256;
		c->v = realloc(c->v, c->cap * sizeof(*c->v));
	}
	c->v[c->n++] = (struct got){ r->lsn, r->type, r->len, sum_of(r->p, r->len) };
	return 0;
}

static inline void collect_reset(struct collect *c)
{
	c->n = 0;
}

#endif
