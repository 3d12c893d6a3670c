#include "common/dirs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Copies path into buf without trailing slashes ("/" stays). */
static int copy_path(char *buf, const char *path, struct sf_err *err)
{
	size_t n = path ? strlen(path) : 0;
	if (n == 0)
		return sf_err_set(err, SF_E_RANGE, "an empty directory path");
	if (n >= SF_DIRS_PATH_MAX)
		return sf_err_set(err, SF_E_LIMIT, "a directory path longer than %d bytes",
				  SF_DIRS_PATH_MAX - 1);
	memcpy(buf, path, n + 1);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = 0;
	return 0;
}

int sf_mkdirs(const char *path, mode_t mode, struct sf_err *err)
{
	char buf[SF_DIRS_PATH_MAX];
	int rc = copy_path(buf, path, err);
	if (rc)
		return rc;
	struct stat st;
	if (stat(buf, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return 0;
		return sf_err_set(err, SF_E_IO, "%s is there but is not a directory", buf);
	}
	/* Walk down from the root: each missing part made in turn. */
	unsigned made = 0;
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p)
			continue;
		char c = *p;
		*p = 0;
		if (mkdir(buf, mode) == 0) {
			if (++made > SF_DIRS_DEPTH_MAX)
				return sf_err_set(err, SF_E_LIMIT, "%s: more than %d directories to make",
						  path, SF_DIRS_DEPTH_MAX);
		} else if (errno != EEXIST) {
			return sf_err_set(err, SF_E_IO, "cannot make %s: %s", buf, strerror(errno));
		} else if (stat(buf, &st) || !S_ISDIR(st.st_mode)) {
			return sf_err_set(err, SF_E_IO, "%s is there but is not a directory", buf);
		}
		if (!c)
			return 0;
		*p = c;
		while (p[1] == '/')
			p++;
	}
}

int sf_dir_can_make(const char *path, struct sf_err *err)
{
	char buf[SF_DIRS_PATH_MAX];
	int rc = copy_path(buf, path, err);
	if (rc)
		return rc;
	/* The nearest existing part of the path, cutting one name at a time. */
	for (unsigned depth = 0;; depth++) {
		struct stat st;
		if (stat(buf, &st) == 0) {
			if (!S_ISDIR(st.st_mode))
				return sf_err_set(err, SF_E_IO, "%s is there but is not a directory", buf);
			if (access(buf, W_OK | X_OK))
				return sf_err_set(err, SF_E_IO, "cannot make directories in %s: %s", buf,
						  strerror(errno));
			return 0;
		}
		if (errno != ENOENT && errno != ENOTDIR) /* ENOTDIR: a file up the path */
			return sf_err_set(err, SF_E_IO, "cannot reach %s: %s", buf, strerror(errno));
		char *slash = strrchr(buf, '/');
		if (depth >= SF_DIRS_DEPTH_MAX || !strcmp(buf, "."))
			return sf_err_set(err, SF_E_IO, "%s: no existing parent directory", path);
		if (!slash)
			strcpy(buf, "."); /* a relative path: the working directory */
		else if (slash == buf)
			slash[1] = 0; /* "/" */
		else
			*slash = 0;
	}
}
