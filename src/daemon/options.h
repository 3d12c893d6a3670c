/* The daemons' options: one table per program drives the command line (--name value,
 * --name=value), the config file (`name = value`) and the checks of each value. The
 * command line wins over the file. */
#ifndef SF_DAEMON_OPTIONS_H
#define SF_DAEMON_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sfd_opt_kind {
	SFD_OPT_STR,     /* any non-empty text (const char *) */
	SFD_OPT_ADDR,    /* HOST:PORT (const char *) */
	SFD_OPT_ADDRS,   /* HOST:PORT[,HOST:PORT...] (const char *) */
	SFD_OPT_U32,     /* decimal in [min, max] (uint32_t) */
	SFD_OPT_U64,     /* decimal in [min, max] (uint64_t) */
	SFD_OPT_SIZE,    /* bytes in [min, max], with an optional K, M, G or T (of 1024) (uint64_t) */
	SFD_OPT_IO,      /* auto | uring | epoll (enum sf_io_kind) */
	SFD_OPT_LOG,     /* error | warn | info | debug (enum sfd_log_level) */
	SFD_OPT_CHOICE,  /* one of choices (const char *, the table's own string) */
	SFD_OPT_LIST,    /* non-empty text, given again to add more: the values joined with ','
			  * (const char *); the command line's replace the file's */
	SFD_OPT_CONFIG,  /* a config file to read: command line only (const char *) */
	SFD_OPT_HELP,    /* no value, command line only */
	SFD_OPT_VERSION, /* no value, command line only */
};

struct sfd_opt {
	const char *name;
	enum sfd_opt_kind kind;
	size_t off; /* of the field in the program's options struct */
	uint64_t min, max;
	const char *const *choices; /* SFD_OPT_CHOICE: NULL-terminated */
};

/* Kept inside each program's options struct: which options the command line set, and the
 * strings read from a file. */
struct sfd_opt_state {
	uint64_t set_by_cmdline;
	uint64_t list_cmdline; /* the SFD_OPT_LIST options the command line gave a value yet */
	char **owned;
	unsigned n_owned;
};

struct sfd_opts_spec {
	const char *program;        /* "superfluid-noded", for messages */
	const struct sfd_opt *table; /* at most 64 entries */
	size_t n;
	size_t state_off;           /* of the struct sfd_opt_state in the options struct */
};

/* Sets one option from the command line or a file: 0, or -1 with a sentence in why. */
int sfd_opt_set(const struct sfd_opts_spec *spec, void *opts, const char *name,
		const char *value, bool from_file, char *why, size_t why_len);

/* Walks argv: 0 to go on (help or version set when asked for), or -1 after printing the
 * usage error. */
int sfd_opts_parse_argv(const struct sfd_opts_spec *spec, void *opts, int argc, char **argv,
			bool *help, bool *version);

/* Reads a config file into opts (what the command line set stays): 0 or -1 (printed). */
int sfd_opts_read_config(const struct sfd_opts_spec *spec, void *opts, const char *path);

/* Prints "PROGRAM: why (see --help)". */
void sfd_usage_error(const struct sfd_opts_spec *spec, const char *why);

/* Frees the strings read from files. */
void sfd_opts_free(const struct sfd_opts_spec *spec, void *opts);

#endif
