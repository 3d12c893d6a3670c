/* An option's value, checked, with the error said on stderr as "superfluid CMD: --OPT: ...". */
#ifndef CLI_CLI_ARGS_H
#define CLI_CLI_ARGS_H

#include <jansson.h>

struct cli_arg {
	const char *cmd, *opt, *value; /* value NULL: the option was last on the line */
};

/* The value itself; NULL (said) when missing or empty. */
const char *cli_arg_string(const struct cli_arg *a);
/* A positive whole number. 0 or -1 (said). */
int cli_arg_count(const struct cli_arg *a, unsigned long *out);
/* A whole number, 0 included. 0 or -1 (said). */
int cli_arg_whole(const struct cli_arg *a, unsigned long *out);
/* A finite number. 0 or -1 (said); the head checks the range and names the field. */
int cli_arg_number(const struct cli_arg *a, double *out);

/* --temperature T, --top-p P or --seed S into a request body (JSON), named as the API names
 * them. 1 taken (a value was used), 0 not one of them, -1 a bad value (said). */
int cli_sampling_arg(const struct cli_arg *a, json_t *into);

#endif
