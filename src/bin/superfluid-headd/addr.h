/* HOST:PORT addresses and the admin socket's unix address. */
#ifndef HEADD_ADDR_H
#define HEADD_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* Resolves HOST:PORT ([V6]:PORT) to its first TCP address: 0, or -1 with a sentence in why. */
int headd_resolve(const char *addr, struct sockaddr_storage *ss, socklen_t *len, char *why,
		  size_t why_len);

/* A listening unix socket at path (a stale socket file there is replaced): the fd, or -1
 * with a sentence in why. */
int headd_unix_listen(const char *path, char *why, size_t why_len);

#endif
