/* sd_notify's protocol, written out (see sd_notify.h). */
#include "daemon/sd_notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int sfd_notify(const char *state)
{
	const char *name = getenv("NOTIFY_SOCKET");
	if (!name || !*name)
		return 0;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(name);
	/* Only absolute paths and '@' (abstract) are addresses; "@" alone names nothing. */
	if ((name[0] != '/' && name[0] != '@') || len < 2 || len > sizeof(sa.sun_path)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(sa.sun_path, name, len);
	if (name[0] == '@')
		sa.sun_path[0] = 0; /* abstract: no terminating NUL counts in its length */
	else if (len == sizeof(sa.sun_path)) {
		errno = EINVAL;
		return -1;
	}
	socklen_t sa_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	size_t n = strlen(state);
	ssize_t sent;
	do
		sent = sendto(fd, state, n, MSG_NOSIGNAL, (const struct sockaddr *)&sa, sa_len);
	while (sent < 0 && errno == EINTR);
	int saved = errno;
	close(fd);
	if (sent < 0) {
		errno = saved;
		return -1;
	}
	return 1;
}

int sfd_notifyf(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return sfd_notify(buf);
}

static bool parse_u64(const char *s, uint64_t *out)
{
	if (!s || !*s)
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || s[0] == '-')
		return false;
	*out = v;
	return true;
}

uint64_t sfd_watchdog_interval_ms(void)
{
	uint64_t usec, pid;
	if (!parse_u64(getenv("WATCHDOG_USEC"), &usec) || !usec)
		return 0;
	const char *p = getenv("WATCHDOG_PID");
	if (p && *p && (!parse_u64(p, &pid) || pid != (uint64_t)getpid()))
		return 0; /* meant for another process (a parent that exec'd us without it) */
	return (usec + 999) / 1000;
}

void sfd_watchdog_init(struct sfd_watchdog *w)
{
	uint64_t ms = sfd_watchdog_interval_ms();
	*w = (struct sfd_watchdog){ .every_ms = ms ? (ms + 1) / 2 : 0 };
}

int sfd_watchdog_tick(struct sfd_watchdog *w, uint64_t now_ms)
{
	if (!w->every_ms)
		return 0;
	if (w->pinged && now_ms - w->last_ms < w->every_ms)
		return 0;
	w->pinged = true;
	w->last_ms = now_ms;
	return sfd_notify("WATCHDOG=1") < 0 ? -1 : 1;
}

void sfd_notify_watchdog(uint64_t now_ms)
{
	static struct sfd_watchdog w;
	static bool ready;
	if (!ready) {
		sfd_watchdog_init(&w);
		ready = true;
	}
	sfd_watchdog_tick(&w, now_ms);
}
