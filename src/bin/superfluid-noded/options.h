/* superfluid-noded's options: the command line and the `key = value` config file, one table
 * of options for both, so a key in the file is exactly a long option without its dashes. */
#ifndef NODED_OPTIONS_H
#define NODED_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon/log.h"

#include "io/loop.h"

/* Keep in step with project() in the top CMakeLists.txt. */
#define NODED_VERSION "0.1.0"

#define NODED_DEFAULT_BLOB_DIR "/var/lib/superfluid/blobs"


/* Strings point into argv or into memory the options own (noded_opts_free). */
struct noded_opts {
	const char *listen;    /* HOST:PORT, or NULL */
	const char *join;      /* HEAD:PORT, or NULL */
	const char *auth_file; /* NULL: plain links */
	const char *engine;    /* "sim" */
	const char *identity;  /* NULL: the host name */
	const char *config;
	const char *blob_dir;
	enum sf_io_kind io;
	uint32_t version_max;
	uint32_t max_sessions;
	uint64_t sim_seed;
	uint32_t sim_tokens_per_s;
	uint32_t sim_batch;
	uint32_t sim_layers;
	uint32_t sim_ctx_len;
	uint32_t silence_ms;
	uint32_t heartbeat_ms;
	enum sfd_log_level log_level;

	/* Private: which options the command line set (they beat the file), and the strings
	 * the config file left behind. */
	uint64_t set_by_cmdline;
	char **owned;
	unsigned n_owned;
};

enum noded_parse_result {
	NODED_PARSE_RUN = 0,
	NODED_PARSE_EXIT_OK = 1,    /* --help or --version was printed */
	NODED_PARSE_EXIT_USAGE = 2, /* a line naming the bad option or file:line was printed */
};

/* Parses argv, then the --config file if one was named (the command line wins), then checks
 * the result as a whole. Prints its own one-line errors on stderr. */
enum noded_parse_result noded_opts_parse(struct noded_opts *o, int argc, char **argv);
void noded_opts_free(struct noded_opts *o);

/* Sets option `name` (long name without dashes) from text. from_file: skip it when the
 * command line already set it. Returns 0, or -1 with a sentence in why (naming no location;
 * the caller adds it): unknown option, missing or bad value. */
int noded_opt_set(struct noded_opts *o, const char *name, const char *value, bool from_file,
		  char *why, unsigned why_len);

/* Reads the config file path into o (options.c's table). Prints "FILE:LINE: ..." on the first
 * bad line and returns -1; 0 on success. */
int noded_config_file_apply(struct noded_opts *o, const char *path);

/* Keeps a copy of s for the life of o; NULL when memory is short. */
const char *noded_opts_keep(struct noded_opts *o, const char *s);

void noded_usage(FILE *f);

#endif
