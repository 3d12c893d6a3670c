/* systemd's readiness and watchdog protocol (Type=notify, WatchdogSec=) without libsystemd:
 * one datagram per message to the AF_UNIX socket named by $NOTIFY_SOCKET (a leading '@'
 * names the abstract namespace). Outside systemd ($NOTIFY_SOCKET unset) nothing is sent. */
#ifndef SF_DAEMON_SD_NOTIFY_H
#define SF_DAEMON_SD_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

/* Sends state: "READY=1", "STOPPING=1", "WATCHDOG=1", "STATUS=text", several joined by
 * '\n'. 1 sent, 0 no $NOTIFY_SOCKET, -1 with errno set (a bad address is EINVAL). */
int sfd_notify(const char *state);
int sfd_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The interval systemd expects pings at ($WATCHDOG_USEC, in ms, rounded up), when
 * $WATCHDOG_PID is unset or names this process; else 0 (no watchdog). */
uint64_t sfd_watchdog_interval_ms(void);

struct sfd_watchdog {
	uint64_t every_ms; /* half the interval; 0: no watchdog */
	uint64_t last_ms;
	bool pinged;
};

/* Reads the environment into w. */
void sfd_watchdog_init(struct sfd_watchdog *w);
/* Sends WATCHDOG=1 when every_ms has passed since the last ping (the first call always
 * pings). 1 sent, 0 not due or no watchdog, -1 the send failed. */
int sfd_watchdog_tick(struct sfd_watchdog *w, uint64_t now_ms);

/* For the daemons' periodic tick: the process's watchdog, read from the environment on
 * the first call. A loop that wakes at least every second keeps WatchdogSec=4s or more fed. */
void sfd_notify_watchdog(uint64_t now_ms);

#endif
