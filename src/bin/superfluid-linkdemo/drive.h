/* A blocking poll(2) driver for one link: enough for the demo and tests of real sockets until
 * the io_uring runtime drives links in the daemons. */
#ifndef SF_LINKDEMO_DRIVE_H
#define SF_LINKDEMO_DRIVE_H

#include <superfluid/link.h>

uint64_t demo_now_ms(void);

/* Connects to host:port within timeout_ms; returns the fd or -1 with the operator sentence in
 * err. */
int demo_dial(const char *addr, int timeout_ms, struct sf_err *err);
/* Listens on host:port; returns the fd or -1. */
int demo_listen(const char *addr, struct sf_err *err);

/* Sends what the link has queued and waits for bytes or its deadline, then feeds them in.
 * Returns 0; 1 when the link is closed or closing and all it had is sent; -1 when the socket
 * ended or failed (the link has been told: its next poll reports the close). */
int demo_pump(int fd, struct sf_link *l, int max_wait_ms);

#endif
