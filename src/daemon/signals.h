/* SIGTERM, SIGINT and SIGHUP into the event loop: the handler sets a flag and wakes the loop
 * (sf_loop_wake is one write to an eventfd, safe in a handler); the loop's thread acts. */
#ifndef SF_DAEMON_SIGNALS_H
#define SF_DAEMON_SIGNALS_H

#include <stdbool.h>

#include "io/loop.h"

/* Installs the handlers (and ignores SIGPIPE). Returns 0 or -1 with errno set. */
int sfd_signals_install(struct sf_loop *loop);
/* Restores the default actions (before the loop is freed). */
void sfd_signals_reset(void);
/* Whether the signal came since the last call (SIGTERM and SIGINT are one: "stop"). */
bool sfd_signals_take_stop(void);
bool sfd_signals_take_hup(void);

/* For a process of many loops, each on its own thread: blocks SIGTERM, SIGINT and SIGHUP in
 * the caller (threads it starts after inherit that, so none takes them by surprise) and
 * ignores SIGPIPE; the caller then waits for them with sfd_signals_wait. 0 or -1. */
int sfd_signals_block(void);
/* Waits up to ms for one of the blocked signals; returns it, or 0 when none came. */
int sfd_signals_wait(int ms);

/* A file the process maps (a model's weights) that is cut short or replaced while mapped
 * makes the next read of its bytes a SIGBUS: said is written to stderr first (one line, cut to
 * 1 KiB), then the signal ends the process as it would have. The last call's line counts. */
void sfd_sigbus_says(const char *said);

#endif
