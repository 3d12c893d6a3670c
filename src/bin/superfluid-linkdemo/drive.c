#include "drive.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint64_t demo_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int resolve(const char *addr, struct addrinfo **res, bool passive, struct sf_err *err)
{
	char host[256];
	const char *colon = strrchr(addr, ':');
	if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof(host)) {
		sf_err_set(err, SF_E_RANGE, "%s is not HOST:PORT", addr);
		return -1;
	}
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = 0;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = passive ? AI_PASSIVE : 0 };
	int rc = getaddrinfo(host, colon + 1, &hints, res);
	if (rc) {
		sf_err_set(err, SF_E_IO, "cannot resolve %s: %s", addr, gai_strerror(rc));
		return -1;
	}
	return 0;
}

int demo_dial(const char *addr, int timeout_ms, struct sf_err *err)
{
	struct addrinfo *res;
	if (resolve(addr, &res, false, err))
		return -1;
	int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int rc = fd < 0 ? -1 : connect(fd, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	if (fd >= 0 && rc < 0 && errno == EINPROGRESS) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		rc = poll(&p, 1, timeout_ms);
		if (rc == 0) {
			errno = ETIMEDOUT;
			rc = -1;
		} else if (rc > 0) {
			int soerr = 0;
			socklen_t sl = sizeof(soerr);
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
			errno = soerr;
			rc = soerr ? -1 : 0;
		}
	}
	if (rc < 0) {
		char why[160];
		sf_link_describe_connect_error(errno, why, sizeof(why));
		sf_err_set(err, SF_E_IO, "%s", why);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int demo_listen(const char *addr, struct sf_err *err)
{
	struct addrinfo *res;
	if (resolve(addr, &res, true, err))
		return -1;
	int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 64) < 0) {
		sf_err_set(err, SF_E_IO, "cannot listen on %s: %s", addr, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

int demo_pump(int fd, struct sf_link *l, int max_wait_ms)
{
	const uint8_t *out;
	size_t n;
	while ((n = sf_link_tx(l, &out)) > 0) {
		ssize_t w = send(fd, out, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EAGAIN)
			break;
		if (w < 0) {
			sf_link_eof(l, errno);
			return -1;
		}
		sf_link_tx_done(l, (size_t)w);
	}
	if (sf_link_state(l) == SF_LINK_CLOSED || sf_link_state(l) == SF_LINK_CLOSING)
		return sf_link_tx(l, &out) ? 0 : 1;
	uint64_t now = demo_now_ms(), deadline = sf_link_deadline(l);
	int wait = max_wait_ms;
	if (deadline != UINT64_MAX)
		wait = deadline <= now ? 0 : (int)((deadline - now) < (uint64_t)wait ? deadline - now : (uint64_t)wait);
	struct pollfd p = { .fd = fd, .events = POLLIN | (sf_link_tx(l, &out) ? POLLOUT : 0) };
	if (poll(&p, 1, wait) <= 0)
		return 0;
	uint8_t buf[65536];
	size_t room = sf_link_rx_room(l);
	if (!room)
		return 0; /* the caller polls the link empty before the next pump */
	ssize_t r = recv(fd, buf, room < sizeof(buf) ? room : sizeof(buf), MSG_DONTWAIT);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (r <= 0) {
		sf_link_eof(l, r < 0 ? errno : 0);
		return -1;
	}
	sf_link_recv(l, buf, (size_t)r, demo_now_ms()); /* takes it all: r <= room */
	return 0;
}
