/* Listing a log directory's segments. */
#include "wal/wal_dir.h"
#include "wal/wal_format.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int by_lsn(const void *a, const void *b)
{
	const struct sf_wal_seg_ent *x = a, *y = b;
	return x->first_lsn < y->first_lsn ? -1 : x->first_lsn > y->first_lsn;
}

int sf_wal_dir_list(const char *dir, struct sf_wal_seg_ent **out, size_t *n, struct sf_err *err)
{
	*out = NULL;
	*n = 0;
	DIR *d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		return sf_err_set(err, SF_E_IO, "cannot read the log directory %s: %s", dir,
				  strerror(errno));
	}
	struct sf_wal_seg_ent *v = NULL;
	size_t cap = 0, len = 0;
	int rc = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		uint64_t lsn;
		struct stat st;
		if (!sf_wal_seg_parse_name(e->d_name, &lsn))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			rc = sf_err_set(err, SF_E_IO, "cannot stat %s/%s: %s", dir, e->d_name,
					strerror(errno));
			break;
		}
		if (!S_ISREG(st.st_mode)) {
			rc = sf_err_set(err, SF_E_IO, "%s/%s is named like a log segment but is not a "
					"regular file; move it away", dir, e->d_name);
			break;
		}
		if (len == cap) {
			cap = cap ? cap * 2 : 16;
			struct sf_wal_seg_ent *nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				rc = sf_err_set(err, SF_E_NOMEM, "no memory to list %s", dir);
				break;
			}
			v = nv;
		}
		v[len++] = (struct sf_wal_seg_ent){ lsn, (uint64_t)st.st_size };
	}
	closedir(d);
	if (rc) {
		free(v);
		return rc;
	}
	if (len)
		qsort(v, len, sizeof(*v), by_lsn);
	*out = v;
	*n = len;
	return 0;
}

bool sf_wal_seg_path(char *out, size_t cap, const char *dir, uint64_t first_lsn)
{
	char name[SF_WAL_NAME_LEN + 1];
	sf_wal_seg_name(name, first_lsn);
	int k = snprintf(out, cap, "%s/%s", dir, name);
	return k > 0 && (size_t)k < cap;
}

int sf_wal_dir_sync(int dirfd)
{
	return fsync(dirfd) ? -errno : 0;
}
