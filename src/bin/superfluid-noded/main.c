/* superfluid-noded: an inference node. --shards loops (src/noded/noded_proc.c,
 * noded_shard.c) share out the head links; shard 0 runs the engine and the node's session
 * machine. SIGTERM says goodbye on every link and exits 0, SIGHUP reads the token file
 * again. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "daemon/log.h"
#include "noded/noded.h"
#include "cmdline.h"

enum { EXIT_CLEAN = 0, EXIT_USAGE = 1, EXIT_RUNTIME = 2 };

static void identity_of(const struct noded_opts *o, char *out, size_t n)
{
	if (o->identity) {
		snprintf(out, n, "%s", o->identity);
		return;
	}
	if (gethostname(out, n - 1) || !out[0])
		snprintf(out, n, "superfluid-noded");
	out[n - 1] = 0;
}

int main(int argc, char **argv)
{
	sfd_log_init("superfluid-noded");
	struct noded_opts o;
	switch (noded_opts_parse(&o, argc, argv)) {
	case NODED_PARSE_RUN:
		break;
	case NODED_PARSE_EXIT_OK:
		noded_opts_free(&o);
		return EXIT_CLEAN;
	default:
		noded_opts_free(&o);
		return EXIT_USAGE;
	}
	if (sfd_daemon_start(o.log_level))
		return EXIT_RUNTIME;
	char identity[SF_MAX_NAME];
	identity_of(&o, identity, sizeof(identity));
	static uint8_t token[SF_TOKEN_MAX];
	size_t token_len = 0;
	struct sf_err err;
	int rc = EXIT_CLEAN;
	if (o.auth_file && sf_token_file_read(o.auth_file, token, &token_len, &err)) {
		fprintf(stderr, "superfluid-noded: --auth-file: %s\n", err.msg);
		rc = EXIT_USAGE;
	}
	if (rc == EXIT_CLEAN)
		rc = noded_proc_main(&o, identity, token, token_len);
	sodium_memzero(token, sizeof(token));
	noded_opts_free(&o);
	return rc;
}
