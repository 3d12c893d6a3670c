/* superfluid-headd: the head. Its options and fleet token, then the shards
 * (src/headd/headd_proc.c): each an event loop running one sf_head with a link to each
 * --fleet node; SIGTERM says goodbye on every link and exits 0. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "cmdline.h"
#include "headd/headd.h"
#include "daemon/log.h"
#include "daemon/sd_notify.h"
#include "daemon/signals.h"

enum { EXIT_CLEAN = 0, EXIT_USAGE = 1, EXIT_RUNTIME = 2 };

static int read_token(const struct headd_opts *o, uint8_t *token, size_t *len)
{
	*len = 0;
	if (!o->fleet_auth)
		return 0;
	struct sf_err err;
	if (sf_token_file_read(o->fleet_auth, token, len, &err)) {
		fprintf(stderr, "superfluid-headd: --fleet-auth: %s\n", err.msg);
		return -1;
	}
	return 0;
}

/* An --api-keys file others may read is refused as a token file is (exit 1: systemd does not
 * restart for it); the shards read it (api_keys.c). */
static int check_api_keys(const struct headd_opts *o)
{
	if (!o->api_keys)
		return 0;
	int fd = open(o->api_keys, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* said by the shards, which cannot open it either */
	struct sf_err err;
	int rc = sf_secret_file_check(fd, o->api_keys, "keys file", &err);
	close(fd);
	if (rc)
		fprintf(stderr, "superfluid-headd: --api-keys: %s\n", err.msg);
	return rc ? -1 : 0;
}

int main(int argc, char **argv)
{
	sfd_log_init("superfluid-headd");
	struct headd_opts o;
	switch (headd_opts_parse(&o, argc, argv)) {
	case HEADD_PARSE_RUN:
		break;
	case HEADD_PARSE_EXIT_OK:
		headd_opts_free(&o);
		return EXIT_CLEAN;
	default:
		headd_opts_free(&o);
		return EXIT_USAGE;
	}
	if (sfd_daemon_start(o.log_level))
		return EXIT_RUNTIME;
	uint8_t token[SF_TOKEN_MAX];
	size_t token_len;
	int rc = check_api_keys(&o) || read_token(&o, token, &token_len) ? EXIT_USAGE
						    : headd_proc_main(&o, token, token_len);
	sodium_memzero(token, sizeof(token));
	headd_opts_free(&o);
	return rc;
}
