#include "daemon/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/config_file.h"
#include "daemon/log.h"
#include "io/loop.h"

static struct sfd_opt_state *state_of(const struct sfd_opts_spec *spec, void *opts)
{
	return (struct sfd_opt_state *)((char *)opts + spec->state_off);
}

static const struct sfd_opt *find(const struct sfd_opts_spec *spec, const char *name)
{
	for (size_t i = 0; i < spec->n; i++)
		if (!strcmp(spec->table[i].name, name))
			return &spec->table[i];
	return NULL;
}

static int parse_u64(const char *s, uint64_t *out)
{
	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

/* A byte count: digits, then K, M, G or T (powers of 1024; "KiB", "MB" and the like too). */
static int parse_size(const char *s, uint64_t *out)
{
	if (!*s || *s < '0' || *s > '9')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 0: break;
	case 'k': case 'K': shift = 10; break;
	case 'm': case 'M': shift = 20; break;
	case 'g': case 'G': shift = 30; break;
	case 't': case 'T': shift = 40; break;
	default: return -1;
	}
	if (*end) {
		end++;
		if (*end == 'i')
			end++;
		if (*end == 'B' || *end == 'b')
			end++;
		if (*end)
			return -1;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

/* HOST:PORT, [V6]:PORT; len bytes of s. */
static bool valid_addr(const char *s, size_t len)
{
	const char *colon = NULL;
	for (size_t i = 0; i < len; i++)
		if (s[i] == ':')
			colon = s + i;
	if (!colon || colon == s)
		return false;
	char port[8];
	size_t plen = (size_t)(s + len - colon - 1);
	uint64_t p;
	if (!plen || plen >= sizeof(port))
		return false;
	memcpy(port, colon + 1, plen);
	port[plen] = 0;
	if (parse_u64(port, &p) || p > 65535)
		return false;
	if (s[0] == '[')
		return colon[-1] == ']' && colon - s > 2;
	return memchr(s, ':', (size_t)(colon - s)) == NULL; /* a v6 address wants brackets */
}

static bool valid_addrs(const char *s)
{
	while (*s) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		if (!valid_addr(s, len))
			return false;
		if (!comma)
			return true;
		s = comma + 1;
	}
	return false; /* empty, or a trailing comma */
}

static const char *keep(struct sfd_opt_state *st, const char *s)
{
	char **n = realloc(st->owned, (st->n_owned + 1) * sizeof(*n));
	if (!n)
		return NULL;
	st->owned = n;
	if (!(n[st->n_owned] = strdup(s)))
		return NULL;
	return n[st->n_owned++];
}

int sfd_opt_set(const struct sfd_opts_spec *spec, void *opts, const char *name,
		const char *value, bool from_file, char *why, size_t why_len)
{
	const char *dd = from_file ? "" : "--";
	const struct sfd_opt *d = find(spec, name);
	if (!d) {
		snprintf(why, why_len, "unknown option %s%s", dd, name);
		return -1;
	}
	struct sfd_opt_state *st = state_of(spec, opts);
	uint64_t bit = 1ull << (size_t)(d - spec->table);
	if (from_file) {
		if (d->kind == SFD_OPT_CONFIG || d->kind == SFD_OPT_HELP || d->kind == SFD_OPT_VERSION) {
			snprintf(why, why_len, "%s belongs on the command line, not in a config file",
				 name);
			return -1;
		}
		if (st->set_by_cmdline & bit)
			return 0;
	} else {
		st->set_by_cmdline |= bit;
	}
	if (d->kind == SFD_OPT_HELP || d->kind == SFD_OPT_VERSION)
		return 0;
	if (!value || !*value) {
		snprintf(why, why_len, "%s%s needs a value", dd, name);
		return -1;
	}
	char *field = (char *)opts + d->off;
	uint64_t v;
	switch (d->kind) {
	case SFD_OPT_ADDR:
	case SFD_OPT_ADDRS:
		if (d->kind == SFD_OPT_ADDR ? !valid_addr(value, strlen(value)) : !valid_addrs(value)) {
			snprintf(why, why_len, "%s%s: '%s' is not HOST:PORT%s", dd, name, value,
				 d->kind == SFD_OPT_ADDRS ? "[,HOST:PORT...]" : "");
			return -1;
		}
		/* fall through */
	case SFD_OPT_STR:
	case SFD_OPT_CONFIG:
		if (from_file && !(value = keep(st, value))) {
			snprintf(why, why_len, "out of memory");
			return -1;
		}
		*(const char **)field = value;
		return 0;
	case SFD_OPT_LIST: {
		const char *old = *(const char **)field;
		/* Another value of the same source adds to the list (the file's go first, so a
		 * command line's first value starts a new list). */
		bool more = old && (from_file || st->list_cmdline & bit);
		size_t n = (more ? strlen(old) + 1 : 0) + strlen(value) + 1;
		char *joined = malloc(n);
		if (joined)
			snprintf(joined, n, "%s%s%s", more ? old : "", more ? "," : "", value);
		const char *kept = joined ? keep(st, joined) : NULL;
		free(joined);
		if (!kept) {
			snprintf(why, why_len, "out of memory");
			return -1;
		}
		if (!from_file)
			st->list_cmdline |= bit;
		*(const char **)field = kept;
		return 0;
	}
	case SFD_OPT_CHOICE:
		for (const char *const *c = d->choices; *c; c++)
			if (!strcmp(value, *c)) {
				*(const char **)field = *c;
				return 0;
			}
		{
			char list[256] = "";
			size_t at = 0;
			for (const char *const *c = d->choices; *c && at < sizeof(list); c++)
				at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s",
						       c == d->choices ? "" : ", ", *c);
			snprintf(why, why_len, "%s%s: unknown %s '%s' (this build has: %s)", dd, name,
				 name, value, list);
		}
		return -1;
	case SFD_OPT_U32:
	case SFD_OPT_U64:
		if (parse_u64(value, &v) || v < d->min || v > d->max) {
			snprintf(why, why_len, "%s%s: '%s' is not a number from %llu to %llu", dd, name,
				 value, (unsigned long long)d->min, (unsigned long long)d->max);
			return -1;
		}
		if (d->kind == SFD_OPT_U32)
			*(uint32_t *)field = (uint32_t)v;
		else
			*(uint64_t *)field = v;
		return 0;
	case SFD_OPT_SIZE:
		if (parse_size(value, &v) || v < d->min || v > d->max) {
			snprintf(why, why_len, "%s%s: '%s' is not a size from %llu to %llu bytes "
				 "(a K, M, G or T suffix counts in 1024s)", dd, name, value,
				 (unsigned long long)d->min, (unsigned long long)d->max);
			return -1;
		}
		*(uint64_t *)field = v;
		return 0;
	case SFD_OPT_IO:
		if (!strcmp(value, "auto"))
			*(enum sf_io_kind *)field = SF_IO_AUTO;
		else if (!strcmp(value, "uring") || !strcmp(value, "io_uring"))
			*(enum sf_io_kind *)field = SF_IO_URING;
		else if (!strcmp(value, "epoll"))
			*(enum sf_io_kind *)field = SF_IO_EPOLL;
		else {
			snprintf(why, why_len, "%sio: '%s' is not auto, uring or epoll", dd, value);
			return -1;
		}
		return 0;
	case SFD_OPT_LOG: {
		static const char *const names[] = { "error", "warn", "info", "debug" };
		for (unsigned i = 0; i < 4; i++)
			if (!strcmp(value, names[i])) {
				*(enum sfd_log_level *)field = (enum sfd_log_level)i;
				return 0;
			}
		snprintf(why, why_len, "%slog-level: '%s' is not error, warn, info or debug", dd,
			 value);
		return -1;
	}
	case SFD_OPT_HELP:
	case SFD_OPT_VERSION:
		break;
	}
	return 0;
}

void sfd_usage_error(const struct sfd_opts_spec *spec, const char *why)
{
	fprintf(stderr, "%s: %s (see --help)\n", spec->program, why);
}

int sfd_opts_parse_argv(const struct sfd_opts_spec *spec, void *opts, int argc, char **argv,
			bool *help, bool *version)
{
	char why[512];
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strncmp(a, "--", 2) || !a[2]) {
			snprintf(why, sizeof(why), "unexpected argument '%s'", a);
			sfd_usage_error(spec, why);
			return -1;
		}
		char name[64];
		const char *eq = strchr(a + 2, '=');
		size_t nlen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		if (nlen >= sizeof(name)) {
			snprintf(why, sizeof(why), "unknown option %.80s", a);
			sfd_usage_error(spec, why);
			return -1;
		}
		memcpy(name, a + 2, nlen);
		name[nlen] = 0;
		const struct sfd_opt *d = find(spec, name);
		const char *value = eq ? eq + 1 : NULL;
		if (d && (d->kind == SFD_OPT_HELP || d->kind == SFD_OPT_VERSION)) {
			if (value) {
				snprintf(why, sizeof(why), "--%s takes no value", name);
				sfd_usage_error(spec, why);
				return -1;
			}
			*(d->kind == SFD_OPT_HELP ? help : version) = true;
			continue;
		}
		if (d && !value) {
			if (i + 1 >= argc) {
				snprintf(why, sizeof(why), "--%s needs a value", name);
				sfd_usage_error(spec, why);
				return -1;
			}
			value = argv[++i];
		}
		if (sfd_opt_set(spec, opts, name, value, false, why, sizeof(why))) {
			sfd_usage_error(spec, why);
			return -1;
		}
	}
	return 0;
}

struct file_ctx {
	const struct sfd_opts_spec *spec;
	void *opts;
};

static int set_from_file(void *arg, const char *key, const char *value, char *why, size_t n)
{
	struct file_ctx *c = arg;
	return sfd_opt_set(c->spec, c->opts, key, value, true, why, n);
}

int sfd_opts_read_config(const struct sfd_opts_spec *spec, void *opts, const char *path)
{
	struct file_ctx c = { spec, opts };
	return sfd_config_file_read(spec->program, path, set_from_file, &c);
}

void sfd_opts_free(const struct sfd_opts_spec *spec, void *opts)
{
	struct sfd_opt_state *st = state_of(spec, opts);
	for (unsigned i = 0; i < st->n_owned; i++)
		free(st->owned[i]);
	free(st->owned);
	st->owned = NULL;
	st->n_owned = 0;
}
