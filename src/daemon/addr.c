#include "daemon/addr.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The listen backlog when net.core.somaxconn cannot be read: the kernel's default since 5.4. */
#define BACKLOG_FALLBACK 4096

int sfd_backlog_read(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return BACKLOG_FALLBACK;
	char line[32];
	char *end = NULL;
	long v = fgets(line, sizeof(line), f) ? strtol(line, &end, 10) : 0;
	fclose(f);
	if (!end || end == line || (*end && *end != '\n') || v < 1 || v > INT_MAX)
		return BACKLOG_FALLBACK;
	return (int)v;
}

/* The kernel caps a backlog at somaxconn: asking for that much gets all it allows (read once;
 * listeners are made at start). */
static int backlog(void)
{
	static _Atomic int cached;
	int v = atomic_load(&cached);
	if (!v) {
		v = sfd_backlog_read("/proc/sys/net/core/somaxconn");
		atomic_store(&cached, v);
	}
	return v;
}

/* How long a listen waits for an address still held by a process that just ended. */
#define LISTEN_RETRIES 60
#define LISTEN_RETRY_MS 50

int sfd_resolve(const char *addr, bool passive, struct sockaddr_storage *ss, socklen_t *len,
		  char *why, size_t why_len)
{
	char host[256];
	const char *colon = strrchr(addr, ':');
	const char *h = addr;
	size_t hlen = colon ? (size_t)(colon - addr) : 0;
	if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
		h++;
		hlen -= 2;
	}
	if (!colon || !hlen || hlen >= sizeof(host)) {
		snprintf(why, why_len, "%s is not HOST:PORT", addr);
		return -1;
	}
	memcpy(host, h, hlen);
	host[hlen] = 0;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = passive ? AI_PASSIVE : 0 };
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

void sfd_addr_name(const struct sockaddr *sa, socklen_t len, char *out, size_t n)
{
	char host[NI_MAXHOST], port[NI_MAXSERV];
	if (getnameinfo(sa, len, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV)) {
		snprintf(out, n, "?");
		return;
	}
	snprintf(out, n, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
}

int sfd_listen_socket(const char *addr, char *bound, size_t bound_len, char *why,
			size_t why_len)
{
	struct sockaddr_storage ss;
	socklen_t len;
	if (sfd_resolve(addr, true, &ss, &len, why, why_len))
		return -1;
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* A process restarted at once (a crash, systemd) may find its predecessor's listener
	 * not closed yet: the kernel tears io_uring rings, and the sockets they hold, down
	 * after the process is gone. Wait for it a little before calling the address taken. */
	int rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&ss, len);
	for (int i = 0; rc < 0 && errno == EADDRINUSE && i < LISTEN_RETRIES; i++) {
		struct timespec ts = { 0, LISTEN_RETRY_MS * 1000000L };
		nanosleep(&ts, NULL);
		rc = bind(fd, (struct sockaddr *)&ss, len);
	}
	if (fd < 0 || rc < 0 || listen(fd, backlog()) < 0) {
		snprintf(why, why_len, "cannot listen on %s: %s", addr, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
		sfd_addr_name((struct sockaddr *)&ss, len, bound, bound_len);
	else
		snprintf(bound, bound_len, "%s", addr);
	return fd;
}

int sfd_listen_group(const char *addr, unsigned n, int *fds, char *bound, size_t bound_len,
		     char *why, size_t why_len)
{
	/* A plain socket first: it fails where something listens already (SO_REUSEPORT alone
	 * would share the port with it) and, for port 0, picks the port the group binds. */
	int probe = sfd_listen_socket(addr, bound, bound_len, why, why_len);
	if (probe < 0)
		return -1;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int rc = getsockname(probe, (struct sockaddr *)&ss, &len);
	close(probe);
	if (rc) {
		snprintf(why, why_len, "cannot listen on %s: %s", addr, strerror(errno));
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		int one = 1;
		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
		    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
		    bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, backlog()) < 0) {
			snprintf(why, why_len, "cannot listen on %s (socket %u of %u): %s", bound,
				 i + 1, n, strerror(errno));
			if (fd >= 0)
				close(fd);
			while (i > 0)
				close(fds[--i]);
			return -1;
		}
		fds[i] = fd;
	}
	return 0;
}

int sfd_unix_listen(const char *path, const char *what, char *why, size_t why_len)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(why, why_len, "%s %s: longer than %zu bytes", what, path,
			 sizeof(sun.sun_path) - 1);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path); /* left by a head that did not stop cleanly */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(fd, 128) < 0) {
		snprintf(why, why_len, "%s %s: cannot listen: %s", what, path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	chmod(path, 0600);
	return fd;
}
