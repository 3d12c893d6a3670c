/* superfluid-headd's command line and config file: the option table fills struct headd_opts
 * (headd/headd_opts.h), what the daemon's library runs with. */
#ifndef HEADD_CMDLINE_H
#define HEADD_CMDLINE_H

#include <stdio.h>

#include "headd/headd_opts.h"

enum headd_parse_result {
	HEADD_PARSE_RUN = 0,
	HEADD_PARSE_EXIT_OK = 1,    /* --help or --version was printed */
	HEADD_PARSE_EXIT_USAGE = 2, /* a line naming the bad option or file:line was printed */
};

enum headd_parse_result headd_opts_parse(struct headd_opts *o, int argc, char **argv);
void headd_opts_free(struct headd_opts *o);

#endif
