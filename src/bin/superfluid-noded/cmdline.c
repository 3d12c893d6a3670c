/* The option table, its setters, the command line and --help. */

#include "cmdline.h"

#include "daemon/options.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/link.h>
#include <superfluid/sim_engine.h>
#include <superfluid/wire.h>

static const char *const engines[] = { "sim", "gguf", NULL };
static const char *const on_off[] = { "off", "on", NULL };
static const char *const cache_types[] = { "f16", "q8_0", NULL };

#define F(field) offsetof(struct noded_opts, field)

static const struct sfd_opt opts[] = {
	{ "listen", SFD_OPT_ADDR, F(listen), 0, 0, NULL },
	{ "join", SFD_OPT_ADDR, F(join), 0, 0, NULL },
	{ "auth-file", SFD_OPT_STR, F(auth_file), 0, 0, NULL },
	{ "engine", SFD_OPT_CHOICE, F(engine), 0, 0, engines },
	{ "identity", SFD_OPT_STR, F(identity), 0, 0, NULL },
	{ "config", SFD_OPT_CONFIG, F(config), 0, 0, NULL },
	{ "io", SFD_OPT_IO, F(io), 0, 0, NULL },
	{ "version-max", SFD_OPT_U32, F(version_max), SF_VERSION_MIN, SF_VERSION_MAX, NULL },
	{ "max-sessions", SFD_OPT_U32, F(max_sessions), 1, 1u << 20, NULL },
	{ "session-orphan-s", SFD_OPT_U32, F(session_orphan_s), 1, 7u * 86400, NULL },
	{ "max-links", SFD_OPT_U32, F(max_links), 1, 1u << 20, NULL },
	{ "max-handshakes", SFD_OPT_U32, F(max_handshakes), 1, 1u << 20, NULL },
	{ "max-handshakes-per-addr", SFD_OPT_U32, F(max_handshakes_per_addr), 1, 1u << 20, NULL },
	{ "handshake-timeout-ms", SFD_OPT_U32, F(handshake_timeout_ms), 100, 600000, NULL },
	{ "shards", SFD_OPT_U32, F(shards), 0, 256, NULL },
	{ "model", SFD_OPT_STR, F(model), 0, 0, NULL },
	{ "model-name", SFD_OPT_STR, F(model_name), 0, 0, NULL },
	{ "threads", SFD_OPT_U32, F(threads), 0, 256, NULL },
	{ "ctx-len", SFD_OPT_U32, F(ctx_len), 1, 1u << 20, NULL },
	{ "kv-mem", SFD_OPT_SIZE, F(kv_mem), 1u << 20, UINT64_MAX, NULL },
	{ "cache-type-k", SFD_OPT_CHOICE, F(cache_type_k), 0, 0, cache_types },
	{ "batch", SFD_OPT_U32, F(batch), 1, 1024, NULL },
	{ "sim-seed", SFD_OPT_U64, F(sim_seed), 0, UINT64_MAX, NULL },
	{ "sim-tokens-per-s", SFD_OPT_U32, F(sim_tokens_per_s), 0, 10000000, NULL },
	{ "sim-batch", SFD_OPT_U32, F(sim_batch), 1, SF_SIM_MAX_BATCH, NULL },
	{ "sim-layers", SFD_OPT_U32, F(sim_layers), 1, SF_SIM_MAX_LAYERS, NULL },
	{ "sim-ctx-len", SFD_OPT_U32, F(sim_ctx_len), 1, SF_SIM_MAX_CTX, NULL },
	{ "sim-chat-template", SFD_OPT_STR, F(sim_chat_template), 0, 0, NULL },
	{ "sim-script", SFD_OPT_CHOICE, F(sim_script), 0, 0, on_off },
	{ "silence-ms", SFD_OPT_U32, F(silence_ms), 1, UINT32_MAX, NULL },
	{ "heartbeat-ms", SFD_OPT_U32, F(heartbeat_ms), 1, 3600000, NULL },
	{ "blob-dir", SFD_OPT_STR, F(blob_dir), 0, 0, NULL },
	{ "log-level", SFD_OPT_LOG, F(log_level), 0, 0, NULL },
	{ "help", SFD_OPT_HELP, 0, 0, 0, NULL },
	{ "version", SFD_OPT_VERSION, 0, 0, 0, NULL },
};

static const struct sfd_opts_spec spec = {
	.program = "superfluid-noded",
	.table = opts,
	.n = sizeof(opts) / sizeof(opts[0]),
	.state_off = offsetof(struct noded_opts, st),
};

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
	"  --engine NAME           the engine: gguf (a GGUF model file, --model) or sim (the\n"
	"                          simulated model tests use); default gguf with --model,\n"
	"                          else sim\n"
	"  --model FILE            gguf engine: the model (llama, qwen2, qwen3 architectures;\n"
	"                          F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K tensors). A file\n"
	"                          it cannot run is refused at start with the reason\n"
	"  --model-name NAME       gguf engine: the name clients ask for (default the file's\n"
	"                          general.name, else its name without .gguf)\n"
	"  --threads N             gguf engine: compute threads (default 0: one per CPU)\n"
	"  --ctx-len N             gguf engine: most tokens one context holds (default the\n"
	"                          model's trained context, at most 8192)\n"
	"  --kv-mem SIZE           gguf engine: memory for all contexts' keys and values, e.g.\n"
	"                          4G (default room for --batch contexts of --ctx-len tokens);\n"
	"                          what the node reports as its context capacity\n"
	"  --cache-type-k TYPE     gguf engine: the cached keys' type, f16 (default) or q8_0\n"
	"                          (as llama.cpp's: 47% less key memory, scores by integer\n"
	"                          products, faster over long contexts; a model's head\n"
	"                          dimension must be a multiple of 32)\n"
	"  --batch N               gguf engine: sessions in one decode step (default 16)\n"
	"  --identity NAME         this node's name in the handshake (default: the host name)\n"
	"  --config FILE           read options from FILE: `key = value` lines, keys are the\n"
	"                          long options without dashes, `#` starts a comment; options\n"
	"                          on the command line win\n"
	"  --io auto|uring|epoll   the event loop backend (default auto: io_uring when the\n"
	"                          kernel allows it, else epoll, said in one line)\n"
	"  --version-max 2..7      the highest protocol version to speak, to act as an older\n"
	"                          node (default 7)\n"
	"  --max-sessions N        sessions held at most; an ASSIGN past it is refused\n"
	"                          (default 4096)\n"
	"  --session-orphan-s N    a session whose head link went and that no head has\n"
	"                          claimed since is dropped after N s (default 600), so that\n"
	"                          a head restarted without its log, or a revoke lost with a\n"
	"                          link, leaves no context held for ever\n"
	"  --max-links N           head links open at once (default 1024); more are turned\n"
	"                          away, logged at most once a second\n"
	"  --max-handshakes N      connections still in their handshake, apart from open links\n"
	"                          (default 64): past it the oldest unfinished one is closed\n"
	"                          for the new one, so connections that never finish keep no\n"
	"                          head with the token out\n"
	"  --max-handshakes-per-addr N  of those, from one address (default 16, per shard);\n"
	"                          past it that address's oldest unfinished one is closed\n"
	"  --handshake-timeout-ms N  a connection must finish its handshake within N ms\n"
	"                          (default 3000)\n"
	"  --shards N              event loops, each on a thread (and CPU) of its own, sharing\n"
	"                          out the head links (0: one per CPU the process may use, the\n"
	"                          default). Each shard runs its links' handshakes, sealing and\n"
	"                          framing; the engine, its batch and the session table stay\n"
	"                          on shard 0, which also keeps --join's link\n"
	"  --sim-seed N            sim engine: the model's seed (default 0)\n"
	"  --sim-tokens-per-s N    sim engine: decode steps per second, each step one token for\n"
	"                          every session in the batch; 0 = unpaced (default 0)\n"
	"  --sim-batch N           sim engine: sessions in one decode step (default 8)\n"
	"  --sim-layers N          sim engine: layers, for pipeline stages (default 8)\n"
	"  --sim-ctx-len N         sim engine: most tokens one context holds (default 32768)\n"
	"  --sim-chat-template FILE  sim engine: export this Jinja chat template (any model's,\n"
	"                          such as llama.cpp's models/templates/*.jinja; at most 1 MiB)\n"
	"                          as its default and tool_use templates instead of its ChatML,\n"
	"                          so heads render prompts and read replies in that format\n"
	"  --sim-script on|off     sim engine: scripted replies (default off). When on, a prompt\n"
	"                          holding a line  sim-reply: \"<JSON string>\"  (the last one\n"
	"                          counts) is answered with exactly that string's text, then\n"
	"                          end of sequence: tests see tool-call and reasoning markup\n"
	"                          end to end\n"
	"  --silence-ms N          end a link after this much silence from the head\n"
	"                          (default 10000; 4294967295: never)\n"
	"  --heartbeat-ms N        send a heartbeat after this much quiet (default 1000; at\n"
	"                          most a third of the head's silence limit is used)\n"
	"  --blob-dir DIR          where blobs are kept; made (0700) at the first blob. Default:\n"
	"                          blobs/ in $STATE_DIRECTORY (systemd's StateDirectory=), else\n"
	"                          in $XDG_STATE_HOME/superfluid, else in\n"
	"                          $HOME/.local/state/superfluid, else in /tmp/superfluid-UID\n"
	"                          ($TMPDIR for /tmp; made 0700 at start, refused if another\n"
	"                          user owns it or others may enter it)\n"
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

static void set_defaults(struct noded_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->engine = NULL; /* gguf when --model is given, else sim */
	o->blob_dir = NULL; /* blobs/ in the state directory (src/noded/noded_shard.c) */
	o->io = SF_IO_AUTO;
	o->version_max = SF_VERSION_MAX;
	o->max_sessions = 4096;
	o->session_orphan_s = 600;
	o->max_links = 1024; /* NODED_MAX_LINKS */
	o->max_handshakes = 64;
	o->max_handshakes_per_addr = 16;
	o->handshake_timeout_ms = 3000;
	o->sim_batch = 8;
	o->sim_layers = 8;
	o->sim_ctx_len = 32768;
	o->silence_ms = SF_LINK_SILENCE_MS;
	o->heartbeat_ms = SF_LINK_HEARTBEAT_MS;
	o->log_level = SFD_LOG_INFO;
}

/* A usage error for what only the whole set of options shows. */
static enum noded_parse_result usage_error(const char *why)
{
	sfd_usage_error(&spec, why);
	return NODED_PARSE_EXIT_USAGE;
}

/* What only makes sense once every source is in. */
static enum noded_parse_result check(struct noded_opts *o)
{
	if (!o->listen && !o->join)
		return usage_error("needs --listen HOST:PORT or --join HEAD:PORT");
	if (o->identity && strlen(o->identity) >= SF_MAX_NAME)
		return usage_error("--identity: longer than 255 bytes");
	if (!o->engine)
		o->engine = o->model ? "gguf" : "sim";
	if (!strcmp(o->engine, "gguf") && !o->model)
		return usage_error("--engine gguf needs --model FILE");
	if (strcmp(o->engine, "gguf") && o->model)
		return usage_error("--model is for --engine gguf");
	if (o->model_name && strlen(o->model_name) >= SF_MAX_NAME)
		return usage_error("--model-name: longer than 255 bytes");
	if (o->silence_ms != UINT32_MAX && o->heartbeat_ms >= o->silence_ms)
		return usage_error("--heartbeat-ms must be below --silence-ms");
	return NODED_PARSE_RUN;
}

enum noded_parse_result noded_opts_parse(struct noded_opts *o, int argc, char **argv)
{
	bool help = false, version = false;
	set_defaults(o);
	if (sfd_opts_parse_argv(&spec, o, argc, argv, &help, &version))
		return NODED_PARSE_EXIT_USAGE;
	if (help) {
		noded_usage(stdout);
		return NODED_PARSE_EXIT_OK;
	}
	if (version) {
		printf("superfluid-noded %s (fleet protocol %d..%d)\n", NODED_VERSION,
		       SF_VERSION_MIN, SF_VERSION_MAX);
		return NODED_PARSE_EXIT_OK;
	}
	if (o->config && sfd_opts_read_config(&spec, o, o->config))
		return NODED_PARSE_EXIT_USAGE;
	return check(o);
}

void noded_opts_free(struct noded_opts *o)
{
	sfd_opts_free(&spec, o);
}
