/* Addresses for the daemons: HOST:PORT resolved and listened on, a socket's peer named, and
 * a unix socket for local clients. */
#ifndef SF_DAEMON_ADDR_H
#define SF_DAEMON_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Resolves addr (HOST:PORT, [V6]:PORT) to its first TCP address. Returns 0, or -1 with a
 * sentence in why. Blocks on the resolver for a host name; numeric hosts do not. */
int sfd_resolve(const char *addr, bool passive, struct sockaddr_storage *ss, socklen_t *len,
		char *why, size_t why_len);

/* The listen backlog in the file at path (net.core.somaxconn's, which caps every backlog):
 * its number, or 4096 when it cannot be read or holds no positive number. */
int sfd_backlog_read(const char *path);

/* A listening socket bound to addr, its backlog somaxconn's (read once); the port it got (for port 0) goes into bound as
 * HOST:PORT. Returns the fd, or -1 with a sentence in why. */
int sfd_listen_socket(const char *addr, char *bound, size_t bound_len, char *why, size_t why_len);

/* n listening sockets on one address (SO_REUSEPORT: the kernel spreads new connections over
 * them), one for each of n loops, each with sfd_listen_socket's backlog; the first binds addr (port 0: any), the rest its port.
 * Refuses an address another socket already listens on, as sfd_listen_socket does.
 * Returns 0, or -1 with a sentence in why (nothing left open). */
int sfd_listen_group(const char *addr, unsigned n, int *fds, char *bound, size_t bound_len,
		     char *why, size_t why_len);

/* "HOST:PORT" of a socket address. */
void sfd_addr_name(const struct sockaddr *sa, socklen_t len, char *out, size_t n);

/* A listening unix socket at path, mode 0600 (a stale socket file there is replaced); what
 * names it for the operator (e.g. "--admin-socket"). The fd, or -1 with a sentence in why. */
int sfd_unix_listen(const char *path, const char *what, char *why, size_t why_len);

#endif
