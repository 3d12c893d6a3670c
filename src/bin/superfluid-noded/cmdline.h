/* superfluid-noded's command line and config file: the option table fills struct noded_opts
 * (noded/noded_opts.h), what the daemon's library runs with. */
#ifndef NODED_CMDLINE_H
#define NODED_CMDLINE_H

#include <stdio.h>

#include "noded/noded_opts.h"

enum noded_parse_result {
	NODED_PARSE_RUN = 0,
	NODED_PARSE_EXIT_OK = 1,    /* --help or --version was printed */
	NODED_PARSE_EXIT_USAGE = 2, /* a line naming the bad option or file:line was printed */
};

/* Parses argv, then the --config file if one was named (the command line wins), then checks
 * the result as a whole. Prints its own one-line errors on stderr. */
enum noded_parse_result noded_opts_parse(struct noded_opts *o, int argc, char **argv);
void noded_opts_free(struct noded_opts *o);

void noded_usage(FILE *f);

#endif
