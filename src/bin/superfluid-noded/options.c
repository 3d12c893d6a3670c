/* The option table, its setters, the command line and --help. */
#include "options.h"

#include "daemon/config_file.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/link.h>
#include <superfluid/sim_engine.h>
#include <superfluid/wire.h>

enum opt_kind {
	K_STR,     /* any non-empty text */
	K_ADDR,    /* HOST:PORT */
	K_U32,     /* decimal in [min, max] */
	K_U64,     /* decimal */
	K_IO,      /* auto | uring | epoll */
	K_LOG,     /* error | warn | info | debug */
	K_ENGINE,  /* sim */
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

#define F(field) offsetof(struct noded_opts, field)

static const struct opt opts[] = {
	{ "listen", K_ADDR, F(listen), 0, 0 },
	{ "join", K_ADDR, F(join), 0, 0 },
	{ "auth-file", K_STR, F(auth_file), 0, 0 },
	{ "engine", K_ENGINE, F(engine), 0, 0 },
	{ "identity", K_STR, F(identity), 0, 0 },
	{ "config", K_CONFIG, F(config), 0, 0 },
	{ "io", K_IO, F(io), 0, 0 },
	{ "version-max", K_U32, F(version_max), SF_VERSION_MIN, SF_VERSION_MAX },
	{ "max-sessions", K_U32, F(max_sessions), 1, 1u << 20 },
	{ "sim-seed", K_U64, F(sim_seed), 0, UINT64_MAX },
	{ "sim-tokens-per-s", K_U32, F(sim_tokens_per_s), 0, 10000000 },
	{ "sim-batch", K_U32, F(sim_batch), 1, SF_SIM_MAX_BATCH },
	{ "sim-layers", K_U32, F(sim_layers), 1, SF_SIM_MAX_LAYERS },
	{ "sim-ctx-len", K_U32, F(sim_ctx_len), 1, SF_SIM_MAX_CTX },
	{ "silence-ms", K_U32, F(silence_ms), 1, UINT32_MAX },
	{ "heartbeat-ms", K_U32, F(heartbeat_ms), 1, 3600000 },
	{ "blob-dir", K_STR, F(blob_dir), 0, 0 },
	{ "log-level", K_LOG, F(log_level), 0, 0 },
	{ "help", K_HELP, 0, 0, 0 },
	{ "version", K_VERSION, 0, 0, 0 },
};

#define N_OPTS (sizeof(opts) / sizeof(opts[0]))

static const char usage_text[] =
	"usage: superfluid-noded --listen HOST:PORT [options]\n"
	"       superfluid-noded --join HEAD:PORT [options]\n"
	"\n"
	"Runs a superfluid inference node: an engine, the conversations' contexts, and the fleet\n"
	"link to one or more heads. Both --listen and --join may be given.\n"
	"\n"
	"  --listen HOST:PORT      accept heads here (port 0: any free port, logged)\n"
	"  --join HEAD:PORT        dial in to a head; the head still leads the handshake. A\n"
	"                          dropped link is dialed again, backing off from 100 ms to 10 s\n"
	"  --auth-file FILE        the fleet token (the head's --fleet-auth holds the same);\n"
	"                          must not be readable by group or others; without it links\n"
	"                          are plain. SIGHUP reads it again for new links\n"
	"  --engine NAME           the engine: sim (default sim)\n"
	"  --identity NAME         this node's name in the handshake (default: the host name)\n"
	"  --config FILE           read options from FILE: `key = value` lines, keys are the\n"
	"                          long options without dashes, `#` starts a comment; options\n"
	"                          on the command line win\n"
	"  --io auto|uring|epoll   the event loop backend (default auto: io_uring when the\n"
	"                          kernel allows it, else epoll, said in one line)\n"
	"  --version-max 2|3       the highest protocol version to speak, to act as an older\n"
	"                          node (default 3)\n"
	"  --max-sessions N        sessions held at most; an ASSIGN past it is refused\n"
	"                          (default 4096)\n"
	"  --sim-seed N            sim engine: the model's seed (default 0)\n"
	"  --sim-tokens-per-s N    sim engine: decode steps per second, each step one token for\n"
	"                          every session in the batch; 0 = unpaced (default 0)\n"
	"  --sim-batch N           sim engine: sessions in one decode step (default 8)\n"
	"  --sim-layers N          sim engine: layers, for pipeline stages (default 8)\n"
	"  --sim-ctx-len N         sim engine: most tokens one context holds (default 32768)\n"
	"  --silence-ms N          end a link after this much silence from the head\n"
	"                          (default 10000; 4294967295: never)\n"
	"  --heartbeat-ms N        send a heartbeat after this much quiet (default 1000; at\n"
	"                          most a third of the head's silence limit is used)\n"
	"  --blob-dir DIR          where blobs are kept (default " NODED_DEFAULT_BLOB_DIR ");\n"
	"                          made when missing\n"
	"  --log-level LEVEL       error, warn, info or debug (default info)\n"
	"  --help                  this text\n"
	"  --version               the program's and the protocol's versions\n"
	"\n"
	"Signals: SIGHUP re-reads --auth-file; SIGTERM or SIGINT says goodbye on every link\n"
	"and exits. Exit status: 0 clean, 1 usage or config error, 2 runtime failure.\n";

void noded_usage(FILE *f)
{
	fputs(usage_text, f);
}

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

static bool valid_addr(const char *s)
{
	const char *colon = strrchr(s, ':');
	uint64_t port;
	if (!colon || colon == s || parse_u64(colon + 1, &port) || port > 65535)
		return false;
	/* [v6]:port, or a host without more colons */
	if (s[0] == '[')
		return colon[-1] == ']' && colon - s > 2;
	return memchr(s, ':', (size_t)(colon - s)) == NULL;
}

const char *noded_opts_keep(struct noded_opts *o, const char *s)
{
	char **n = realloc(o->owned, (o->n_owned + 1) * sizeof(*n));
	if (!n)
		return NULL;
	o->owned = n;
	if (!(n[o->n_owned] = strdup(s)))
		return NULL;
	return n[o->n_owned++];
}

int noded_opt_set(struct noded_opts *o, const char *name, const char *value, bool from_file,
		  char *why, unsigned why_len)
{
	const struct opt *d = find(name);
	if (!d) {
		snprintf(why, why_len, "unknown option %s%s", from_file ? "" : "--", name);
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
	if (!value || (!*value && d->kind != K_HELP && d->kind != K_VERSION)) {
		snprintf(why, why_len, "%s%s needs a value", from_file ? "" : "--", name);
		return -1;
	}
	switch (d->kind) {
	case K_ADDR:
		if (!valid_addr(value)) {
			snprintf(why, why_len, "%s%s: '%s' is not HOST:PORT", from_file ? "" : "--",
				 name, value);
			return -1;
		}
		/* fall through */
	case K_STR:
	case K_CONFIG:
		if (from_file && !(value = noded_opts_keep(o, value))) {
			snprintf(why, why_len, "out of memory");
			return -1;
		}
		*(const char **)field = value;
		return 0;
	case K_ENGINE:
		if (strcmp(value, "sim")) {
			snprintf(why, why_len, "%sengine: unknown engine '%s' (this build has: sim)",
				 from_file ? "" : "--", value);
			return -1;
		}
		*(const char **)field = "sim";
		return 0;
	case K_U32:
	case K_U64:
		if (parse_u64(value, &v) || v < d->min || v > d->max) {
			snprintf(why, why_len, "%s%s: '%s' is not a number from %llu to %llu",
				 from_file ? "" : "--", name, value, (unsigned long long)d->min,
				 (unsigned long long)d->max);
			return -1;
		}
		if (d->kind == K_U32)
			*(uint32_t *)field = (uint32_t)v;
		else
			*(uint64_t *)field = v;
		return 0;
	case K_IO: {
		enum sf_io_kind k;
		if (!strcmp(value, "auto")) {
			k = SF_IO_AUTO;
		} else if (!strcmp(value, "uring") || !strcmp(value, "io_uring")) {
			k = SF_IO_URING;
		} else if (!strcmp(value, "epoll")) {
			k = SF_IO_EPOLL;
		} else {
			snprintf(why, why_len, "%sio: '%s' is not auto, uring or epoll",
				 from_file ? "" : "--", value);
			return -1;
		}
		*(enum sf_io_kind *)field = k;
		return 0;
	}
	case K_LOG: {
		static const char *const names[] = { "error", "warn", "info", "debug" };
		for (unsigned i = 0; i < 4; i++) {
			if (!strcmp(value, names[i])) {
				*(enum sfd_log_level *)field = (enum sfd_log_level)i;
				return 0;
			}
		}
		snprintf(why, why_len, "%slog-level: '%s' is not error, warn, info or debug",
			 from_file ? "" : "--", value);
		return -1;
	}
	case K_HELP:
	case K_VERSION:
		return 0;
	}
	return 0;
}

static void set_defaults(struct noded_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->engine = "sim";
	o->blob_dir = NODED_DEFAULT_BLOB_DIR;
	o->io = SF_IO_AUTO;
	o->version_max = SF_VERSION_MAX;
	o->max_sessions = 4096;
	o->sim_batch = 8;
	o->sim_layers = 8;
	o->sim_ctx_len = 32768;
	o->silence_ms = SF_LINK_SILENCE_MS;
	o->heartbeat_ms = SF_LINK_HEARTBEAT_MS;
	o->log_level = SFD_LOG_INFO;
}

static int usage_error(const char *why)
{
	fprintf(stderr, "superfluid-noded: %s (see --help)\n", why);
	return NODED_PARSE_EXIT_USAGE;
}

/* --name value, --name=value; --help and --version take none. */
static enum noded_parse_result parse_argv(struct noded_opts *o, int argc, char **argv,
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
		if (noded_opt_set(o, name, value, false, why, sizeof(why)))
			return usage_error(why);
	}
	return NODED_PARSE_RUN;
}

/* What only makes sense once every source is in. */
static enum noded_parse_result check(const struct noded_opts *o)
{
	if (!o->listen && !o->join)
		return usage_error("needs --listen HOST:PORT or --join HEAD:PORT");
	if (o->identity && strlen(o->identity) >= SF_MAX_NAME)
		return usage_error("--identity: longer than 255 bytes");
	if (o->silence_ms != UINT32_MAX && o->heartbeat_ms >= o->silence_ms)
		return usage_error("--heartbeat-ms must be below --silence-ms");
	return NODED_PARSE_RUN;
}

enum noded_parse_result noded_opts_parse(struct noded_opts *o, int argc, char **argv)
{
	bool help = false, version = false;
	set_defaults(o);
	enum noded_parse_result r = parse_argv(o, argc, argv, &help, &version);
	if (r)
		return r;
	if (help) {
		noded_usage(stdout);
		return NODED_PARSE_EXIT_OK;
	}
	if (version) {
		printf("superfluid-noded %s (fleet protocol %d..%d)\n", NODED_VERSION,
		       SF_VERSION_MIN, SF_VERSION_MAX);
		return NODED_PARSE_EXIT_OK;
	}
	if (o->config && noded_config_file_apply(o, o->config))
		return NODED_PARSE_EXIT_USAGE;
	return check(o);
}

void noded_opts_free(struct noded_opts *o)
{
	for (unsigned i = 0; i < o->n_owned; i++)
		free(o->owned[i]);
	free(o->owned);
	o->owned = NULL;
	o->n_owned = 0;
}

static int set_from_file(void *arg, const char *key, const char *value, char *why, size_t n)
{
	return noded_opt_set(arg, key, value, true, why, n);
}

int noded_config_file_apply(struct noded_opts *o, const char *path)
{
	return sfd_config_file_read("superfluid-noded", path, set_from_file, o);
}
