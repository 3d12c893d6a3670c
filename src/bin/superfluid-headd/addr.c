#include "addr.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int headd_resolve(const char *addr, struct sockaddr_storage *ss, socklen_t *len, char *why,
		  size_t why_len)
{
	char host[256];
	const char *colon = strrchr(addr, ':');
	const char *h = addr;
	size_t hlen = colon ? (size_t)(colon - addr) : 0;
	if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
		h++;
		hlen -= 2;
	}
	if (!colon || !hlen || hlen >= sizeof(host) || !colon[1]) {
		snprintf(why, why_len, "%s is not HOST:PORT", addr);
		return -1;
	}
	memcpy(host, h, hlen);
	host[hlen] = 0;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	int rc = getaddrinfo(host, colon + 1, &hints, &res);
	if (rc) {
		snprintf(why, why_len, "cannot resolve %s: %s", addr, gai_strerror(rc));
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

int headd_unix_listen(const char *path, char *why, size_t why_len)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(why, why_len, "--admin-socket %s: longer than %zu bytes", path,
			 sizeof(sun.sun_path) - 1);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path); /* left by a head that did not stop cleanly */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(fd, 128) < 0) {
		snprintf(why, why_len, "--admin-socket %s: cannot listen: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	chmod(path, 0600);
	return fd;
}
