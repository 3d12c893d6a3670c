/* The option table, its setters, the command line and --help. */
#include "options.h"

#include "daemon/config_file.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/wire.h>

enum opt_kind {
	K_STR,     /* any non-empty text */
	K_FLEET,   /* HOST:PORT[,HOST:PORT...] */
	K_U32,     /* decimal in [min, max] */
	K_IO,      /* auto | uring | epoll */
	K_LOG,     /* error | warn | info | debug */
	K_CONFIG,  /* command line only */
	K_HELP,    /* no value, command line only */
	K_VERSION, /* no value, command line only */
};

struct opt {
	const char *name;
	enum opt_kind kind;
	size_t off;
	uint64_t min, max;
};

#define F(field) offsetof(struct headd_opts, field)

static const struct opt opts[] = {
	{ "fleet", K_FLEET, F(fleet), 0, 0 },
	{ "fleet-auth", K_STR, F(fleet_auth), 0, 0 },
	{ "admin-socket", K_STR, F(admin_socket), 0, 0 },
	{ "identity", K_STR, F(identity), 0, 0 },
	{ "config", K_CONFIG, F(config), 0, 0 },
	{ "io", K_IO, F(io), 0, 0 },
	{ "replace-after-ms", K_U32, F(replace_after_ms), 1, UINT32_MAX },
	{ "log-level", K_LOG, F(log_level), 0, 0 },
	{ "help", K_HELP, 0, 0, 0 },
	{ "version", K_VERSION, 0, 0, 0 },
};

#define N_OPTS (sizeof(opts) / sizeof(opts[0]))

static const char usage_text[] =
	"usage: superfluid-headd --fleet HOST:PORT[,HOST:PORT...] [options]\n"
	"\n"
	"Runs a superfluid head: it dials every node of the fleet, places conversations on\n"
	"them and streams their generations to clients on the admin socket.\n"
	"\n"
	"  --fleet HOST:PORT,...   the nodes to dial (their --listen). A node that cannot be\n"
	"                          reached is dialed again, backing off from 100 ms to 10 s,\n"
	"                          one log line per failure; it never holds up the others\n"
	"  --fleet-auth FILE       the fleet token (each node's --auth-file holds the same);\n"
	"                          must not be readable by group or others; without it links\n"
	"                          are plain\n"
	"  --admin-socket PATH     the unix socket clients (the superfluid CLI) use\n"
	"                          (default " HEADD_DEFAULT_ADMIN_SOCKET ")\n"
	"  --identity NAME         this head's name in the handshake (default superfluid-headd)\n"
	"  --config FILE           read options from FILE: `key = value` lines, keys are the\n"
	"                          long options without dashes, `#` starts a comment; options\n"
	"                          on the command line win\n"
	"  --io auto|uring|epoll   the event loop backend (default auto)\n"
	"  --replace-after-ms N    a node down this long loses its sessions to other nodes\n"
	"                          (default 30000)\n"
	"  --log-level LEVEL       error, warn, info or debug (default info)\n"
	"  --help                  this text\n"
	"  --version               the program's and the protocol's versions\n"
	"\n"
	"The admin socket speaks lines; each connection asks one thing:\n"
	"  GENERATE <model> <max_tokens> <prompt>\\n\n"
	"      a fresh session on a node serving <model>, the prompt's bytes as its tokens\n"
	"      (\"\\n\" and \"\\\\\" in the prompt stand for a newline and a backslash); the answer\n"
	"      is TOKENS <hex>\\n lines (the bytes of the tokens, as they arrive), then\n"
	"      FINISH <stop|length|wall|cancelled|error|expired>\\n, or ERROR <sentence>\\n.\n"
	"      Closing the connection cancels the generation.\n"
	"  STATUS\\n\n"
	"      NODE <label> <up|down> version=N identity=NAME free=F/MAX batch=R/B\n"
	"      sessions=N\\n for each node, then END\\n.\n"
	"\n"
	"Signals: SIGTERM or SIGINT says goodbye on every link and exits.\n"
	"Exit status: 0 clean, 1 usage or config error, 2 runtime failure.\n";

static const struct opt *find(const char *name)
{
	for (size_t i = 0; i < N_OPTS; i++)
		if (!strcmp(opts[i].name, name))
			return &opts[i];
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

static bool valid_addr(const char *s, size_t n)
{
	const char *colon = NULL;
	for (size_t i = 0; i < n; i++)
		if (s[i] == ':')
			colon = s + i;
	if (!colon || colon == s || colon + 1 == s + n || (size_t)(s + n - colon) > 6)
		return false;
	uint64_t port = 0;
	for (const char *p = colon + 1; p < s + n; p++) {
		if (*p < '0' || *p > '9')
			return false;
		port = port * 10 + (uint64_t)(*p - '0');
	}
	if (port > 65535)
		return false;
	if (s[0] == '[')
		return colon[-1] == ']' && colon - s > 2;
	return memchr(s, ':', (size_t)(colon - s)) == NULL;
}

static bool valid_fleet(const char *s)
{
	for (;;) {
		const char *comma = strchr(s, ',');
		size_t n = comma ? (size_t)(comma - s) : strlen(s);
		if (!valid_addr(s, n))
			return false;
		if (!comma)
			return true;
		s = comma + 1;
	}
}

const char *headd_opts_keep(struct headd_opts *o, const char *s)
{
	char **n = realloc(o->owned, (o->n_owned + 1) * sizeof(*n));
	if (!n)
		return NULL;
	o->owned = n;
	if (!(n[o->n_owned] = strdup(s)))
		return NULL;
	return n[o->n_owned++];
}

static int set_choice(const char *value, const char *const *names, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(value, names[i]))
			return (int)i;
	return -1;
}

int headd_opt_set(struct headd_opts *o, const char *name, const char *value, bool from_file,
		  char *why, unsigned why_len)
{
	const char *dd = from_file ? "" : "--";
	const struct opt *d = find(name);
	if (!d) {
		snprintf(why, why_len, "unknown option %s%s", dd, name);
		return -1;
	}
	size_t idx = (size_t)(d - opts);
	if (from_file) {
		if (d->kind == K_CONFIG || d->kind == K_HELP || d->kind == K_VERSION) {
			snprintf(why, why_len, "%s belongs on the command line, not in a config file",
				 name);
			return -1;
		}
		if (o->set_by_cmdline & (1ull << idx))
			return 0;
	} else {
		o->set_by_cmdline |= 1ull << idx;
	}
	char *field = (char *)o + d->off;
	uint64_t v;
	if (!value || !*value) {
		snprintf(why, why_len, "%s%s needs a value", dd, name);
		return -1;
	}
	switch (d->kind) {
	case K_FLEET:
		if (!valid_fleet(value)) {
			snprintf(why, why_len, "%s%s: '%s' is not HOST:PORT[,HOST:PORT...]", dd, name,
				 value);
			return -1;
		}
		/* fall through */
	case K_STR:
	case K_CONFIG:
		if (from_file && !(value = headd_opts_keep(o, value))) {
			snprintf(why, why_len, "out of memory");
			return -1;
		}
		*(const char **)field = value;
		return 0;
	case K_U32:
		if (parse_u64(value, &v) || v < d->min || v > d->max) {
			snprintf(why, why_len, "%s%s: '%s' is not a number from %llu to %llu", dd,
				 name, value, (unsigned long long)d->min, (unsigned long long)d->max);
			return -1;
		}
		*(uint32_t *)field = (uint32_t)v;
		return 0;
	case K_IO: {
		static const char *const names[] = { "auto", "uring", "epoll" };
		int k = set_choice(value, names, 3);
		if (k < 0) {
			snprintf(why, why_len, "%sio: '%s' is not auto, uring or epoll", dd, value);
			return -1;
		}
		*(enum sf_io_kind *)field = (enum sf_io_kind)k;
		return 0;
	}
	case K_LOG: {
		static const char *const names[] = { "error", "warn", "info", "debug" };
		int k = set_choice(value, names, 4);
		if (k < 0) {
			snprintf(why, why_len, "%slog-level: '%s' is not error, warn, info or debug",
				 dd, value);
			return -1;
		}
		*(enum sfd_log_level *)field = (enum sfd_log_level)k;
		return 0;
	}
	case K_HELP:
	case K_VERSION:
		return 0;
	}
	return 0;
}

static int usage_error(const char *why)
{
	fprintf(stderr, "superfluid-headd: %s (see --help)\n", why);
	return HEADD_PARSE_EXIT_USAGE;
}

static enum headd_parse_result parse_argv(struct headd_opts *o, int argc, char **argv,
					  bool *help, bool *version)
{
	char why[512];
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strncmp(a, "--", 2) || !a[2]) {
			snprintf(why, sizeof(why), "unexpected argument '%s'", a);
			return usage_error(why);
		}
		char name[64];
		const char *eq = strchr(a + 2, '=');
		size_t nlen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		if (nlen >= sizeof(name)) {
			snprintf(why, sizeof(why), "unknown option %.80s", a);
			return usage_error(why);
		}
		memcpy(name, a + 2, nlen);
		name[nlen] = 0;
		const struct opt *d = find(name);
		const char *value = eq ? eq + 1 : NULL;
		if (d && (d->kind == K_HELP || d->kind == K_VERSION)) {
			if (value) {
				snprintf(why, sizeof(why), "--%s takes no value", name);
				return usage_error(why);
			}
			*(d->kind == K_HELP ? help : version) = true;
			continue;
		}
		if (d && !value) {
			if (i + 1 >= argc) {
				snprintf(why, sizeof(why), "--%s needs a value", name);
				return usage_error(why);
			}
			value = argv[++i];
		}
		if (headd_opt_set(o, name, value, false, why, sizeof(why)))
			return usage_error(why);
	}
	return HEADD_PARSE_RUN;
}

enum headd_parse_result headd_opts_parse(struct headd_opts *o, int argc, char **argv)
{
	bool help = false, version = false;
	memset(o, 0, sizeof(*o));
	o->admin_socket = HEADD_DEFAULT_ADMIN_SOCKET;
	o->io = SF_IO_AUTO;
	o->replace_after_ms = 30000;
	o->log_level = SFD_LOG_INFO;
	enum headd_parse_result r = parse_argv(o, argc, argv, &help, &version);
	if (r)
		return r;
	if (help) {
		fputs(usage_text, stdout);
		return HEADD_PARSE_EXIT_OK;
	}
	if (version) {
		printf("superfluid-headd %s (fleet protocol %d..%d)\n", HEADD_VERSION,
		       SF_VERSION_MIN, SF_VERSION_MAX);
		return HEADD_PARSE_EXIT_OK;
	}
	if (o->config && headd_config_file_apply(o, o->config))
		return HEADD_PARSE_EXIT_USAGE;
	if (!o->fleet)
		return usage_error("needs --fleet HOST:PORT[,HOST:PORT...]");
	if (o->identity && strlen(o->identity) >= SF_MAX_NAME)
		return usage_error("--identity: longer than 255 bytes");
	return HEADD_PARSE_RUN;
}

void headd_opts_free(struct headd_opts *o)
{
	for (unsigned i = 0; i < o->n_owned; i++)
		free(o->owned[i]);
	free(o->owned);
	o->owned = NULL;
	o->n_owned = 0;
}

static int set_from_file(void *arg, const char *key, const char *value, char *why, size_t n)
{
	return headd_opt_set(arg, key, value, true, why, n);
}

int headd_config_file_apply(struct headd_opts *o, const char *path)
{
	return sfd_config_file_read("superfluid-headd", path, set_from_file, o);
}
