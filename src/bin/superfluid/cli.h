/* The superfluid CLI: talks to superfluid-headd over its admin socket, one request a
 * connection, with plain blocking sockets. */
#ifndef CLI_CLI_H
#define CLI_CLI_H

#include <stdbool.h>
#include <stdio.h>

#define CLI_DEFAULT_SOCKET "/run/superfluid/headd.sock"

enum { CLI_OK = 0, CLI_USAGE = 1, CLI_FAILED = 2, CLI_UNREACHABLE = 3 };

/* admin_conn.c: a connected stream to path, or NULL with the reason said on stderr. */
FILE *cli_connect(const char *path);
/* Sends the whole request line; 0 or -1 (said on stderr). */
int cli_send(FILE *f, const char *path, const char *line);

int cli_generate(int argc, char **argv);
int cli_status(int argc, char **argv);

#endif
