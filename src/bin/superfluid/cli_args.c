#include "cli_args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *cli_arg_string(const struct cli_arg *a)
{
	if (!a->value || !*a->value) {
		fprintf(stderr, "superfluid %s: %s needs a value\n", a->cmd, a->opt);
		return NULL;
	}
	return a->value;
}

static int whole(const struct cli_arg *a, unsigned long *out, unsigned long min)
{
	if (!cli_arg_string(a))
		return -1;
	char *end;
	errno = 0;
	unsigned long v = strtoul(a->value, &end, 10);
	if (errno || *end || v < min || a->value[0] == '-') {
		fprintf(stderr, "superfluid %s: %s: '%s' is not a %s number\n", a->cmd, a->opt,
			a->value, min ? "positive" : "whole");
		return -1;
	}
	*out = v;
	return 0;
}

int cli_arg_count(const struct cli_arg *a, unsigned long *out) { return whole(a, out, 1); }
int cli_arg_whole(const struct cli_arg *a, unsigned long *out) { return whole(a, out, 0); }

int cli_arg_number(const struct cli_arg *a, double *out)
{
	if (!cli_arg_string(a))
		return -1;
	char *end;
	errno = 0;
	double v = strtod(a->value, &end);
	if (errno || *end || !isfinite(v)) {
		fprintf(stderr, "superfluid %s: %s: '%s' is not a number\n", a->cmd, a->opt, a->value);
		return -1;
	}
	*out = v;
	return 0;
}

int cli_sampling_arg(const struct cli_arg *a, json_t *into)
{
	double d;
	unsigned long u;
	if (!strcmp(a->opt, "--temperature") || !strcmp(a->opt, "--top-p")) {
		if (cli_arg_number(a, &d))
			return -1;
		json_object_set_new(into, a->opt[3] == 'e' ? "temperature" : "top_p", json_real(d));
		return 1;
	}
	if (!strcmp(a->opt, "--seed")) {
		if (cli_arg_whole(a, &u))
			return -1;
		json_object_set_new(into, "seed", json_integer((json_int_t)u));
		return 1;
	}
	return 0;
}
