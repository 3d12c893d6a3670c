#include "cli.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

FILE *cli_connect(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sun.sun_path)) {
		fprintf(stderr, "superfluid: --admin-socket %s: the path is too long\n", path);
		return NULL;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		fprintf(stderr, "superfluid: cannot reach the head at %s (%s): is superfluid-headd "
			"running?\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	FILE *f = fdopen(fd, "r+");
	if (!f)
		close(fd);
	return f;
}

int cli_send(FILE *f, const char *path, const char *line)
{
	if (fputs(line, f) < 0 || fflush(f)) {
		fprintf(stderr, "superfluid: the head at %s closed the connection (%s)\n", path,
			strerror(errno));
		return -1;
	}
	return 0;
}
