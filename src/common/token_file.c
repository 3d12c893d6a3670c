#include <superfluid/token_file.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

int sf_secret_file_check(int fd, const char *path, const char *what, struct sf_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return sf_err_set(err, SF_E_IO, "cannot stat %s %s: %s", what, path, strerror(errno));
	if (st.st_mode & (S_IRWXG | S_IRWXO))
		return sf_err_set(err, SF_E_AUTH, "%s %s may be read by others (mode %04o); run "
				  "chmod 600 %s", what, path, (unsigned)(st.st_mode & 07777), path);
	return 0;
}

int sf_token_file_read(const char *path, uint8_t *out, size_t *len, struct sf_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sf_err_set(err, SF_E_IO, "cannot open token file %s: %s", path, strerror(errno));
	int rc = sf_secret_file_check(fd, path, "token file", err);
	if (rc)
		goto out;
	size_t n = 0;
	for (;;) {
		if (n == SF_TOKEN_MAX) {
			char extra;
			if (read(fd, &extra, 1) > 0) {
				rc = sf_err_set(err, SF_E_LIMIT, "token file %s is over %d bytes", path,
						SF_TOKEN_MAX);
				goto out;
			}
			break;
		}
		ssize_t got = read(fd, out + n, SF_TOKEN_MAX - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = sf_err_set(err, SF_E_IO, "cannot read token file %s: %s", path,
					strerror(errno));
			goto out;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	if (n && out[n - 1] == '\n')
		n--;
	if (n && out[n - 1] == '\r')
		n--;
	if (!n) {
		rc = sf_err_set(err, SF_E_AUTH, "token file %s is empty", path);
		goto out;
	}
	size_t blanks = 0;
	while (blanks < n && memchr(" \t\r\n\v\f", out[blanks], 6))
		blanks++;
	if (blanks == n) {
		rc = sf_err_set(err, SF_E_AUTH, "token file %s holds only blanks; write a generated "
				"token into it (e.g. umask 077; openssl rand -hex 32 > %s)", path, path);
		goto out;
	}
	*len = n;
out:
	if (rc)
		sodium_memzero(out, SF_TOKEN_MAX);
	close(fd);
	return rc;
}
