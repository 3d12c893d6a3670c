/* The option table, its setters, the command line and --help. */

#include "cmdline.h"

#include "daemon/options.h"

#include <superfluid/link.h>

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/wire.h>

#define F(field) offsetof(struct headd_opts, field)

static const char *const wal_syncs[] = { "always", "batch", "off", NULL };
static const char *const prefix_modes[] = { "key", "shared", "off", NULL };

static const struct sfd_opt opts[] = {
	{ "fleet", SFD_OPT_ADDRS, F(fleet), 0, 0, NULL },
	{ "fleet-auth", SFD_OPT_STR, F(fleet_auth), 0, 0, NULL },
	{ "fleet-listen", SFD_OPT_ADDR, F(fleet_listen), 0, 0, NULL },
	{ "pipeline", SFD_OPT_ADDRS, F(pipeline), 0, 0, NULL },
	{ "pipeline-model", SFD_OPT_STR, F(pipeline_model), 0, 0, NULL },
	{ "admin-socket", SFD_OPT_STR, F(admin_socket), 0, 0, NULL },
	{ "identity", SFD_OPT_STR, F(identity), 0, 0, NULL },
	{ "config", SFD_OPT_CONFIG, F(config), 0, 0, NULL },
	{ "io", SFD_OPT_IO, F(io), 0, 0, NULL },
	{ "shards", SFD_OPT_U32, F(shards), 0, 256, NULL },
	{ "replace-after-ms", SFD_OPT_U32, F(replace_after_ms), 1, UINT32_MAX, NULL },
	{ "silence-ms", SFD_OPT_U32, F(silence_ms), 1, UINT32_MAX, NULL },
	{ "heartbeat-ms", SFD_OPT_U32, F(heartbeat_ms), 1, 3600000, NULL },
	{ "log-level", SFD_OPT_LOG, F(log_level), 0, 0, NULL },
	{ "listen-http", SFD_OPT_ADDR, F(listen_http), 0, 0, NULL },
	{ "tls-cert", SFD_OPT_STR, F(tls_cert), 0, 0, NULL },
	{ "tls-key", SFD_OPT_STR, F(tls_key), 0, 0, NULL },
	{ "api-keys", SFD_OPT_STR, F(api_keys), 0, 0, NULL },
	{ "cors-origin", SFD_OPT_LIST, F(cors_origin), 0, 0, NULL },
	{ "http-max-body", SFD_OPT_U32, F(http_max_body), 1024, 1u << 30, NULL },
	{ "http-max-conns", SFD_OPT_U32, F(http_max_conns), 1, 1000000, NULL },
	{ "http-body-budget-mb", SFD_OPT_U32, F(http_body_budget_mb), 1, 1u << 20, NULL },
	{ "http-header-timeout-s", SFD_OPT_U32, F(http_header_timeout_s), 1, 86400, NULL },
	{ "http-body-timeout-s", SFD_OPT_U32, F(http_body_timeout_s), 1, 86400, NULL },
	{ "http-idle-timeout-s", SFD_OPT_U32, F(http_idle_timeout_s), 1, 86400, NULL },
	{ "tls-handshake-timeout-s", SFD_OPT_U32, F(tls_handshake_timeout_s), 1, 86400, NULL },
	{ "stream-buffer", SFD_OPT_U32, F(stream_buffer), 4096, 1u << 30, NULL },
	{ "http-sndbuf", SFD_OPT_U32, F(http_sndbuf), 0, 1u << 30, NULL },
	{ "max-tokens-default", SFD_OPT_U32, F(max_tokens_default), 1, 1u << 20, NULL },
	{ "max-sessions", SFD_OPT_U32, F(max_sessions), 1, 4096, NULL },
	{ "max-renders-per-key", SFD_OPT_U32, F(max_renders_per_key), 1, 256, NULL },
	{ "max-sessions-per-key", SFD_OPT_U32, F(max_sessions_per_key), 1, 4096, NULL },
	{ "max-generations-per-key", SFD_OPT_U32, F(max_generations_per_key), 1, 1u << 24, NULL },
	{ "max-fleet-sessions", SFD_OPT_U32, F(max_fleet_sessions), 16, 1u << 24, NULL },
	{ "session-idle-s", SFD_OPT_U32, F(session_idle_s), 1, 30u * 86400, NULL },
	{ "prefix-cache", SFD_OPT_CHOICE, F(prefix_cache), 0, 0, prefix_modes },
	{ "wal-dir", SFD_OPT_STR, F(wal_dir), 0, 0, NULL },
	{ "wal-sync", SFD_OPT_CHOICE, F(wal_sync), 0, 0, wal_syncs },
	{ "wal-segment-mb", SFD_OPT_U32, F(wal_segment_mb), 1, 65536, NULL },
	{ "wal-batch-ms", SFD_OPT_U32, F(wal_batch_ms), 1, 60000, NULL },
	{ "wal-keep-s", SFD_OPT_U32, F(wal_keep_s), 1, 30u * 86400, NULL },
	{ "help", SFD_OPT_HELP, 0, 0, 0, NULL },
	{ "version", SFD_OPT_VERSION, 0, 0, 0, NULL },
};

static const struct sfd_opts_spec spec = {
	.program = "superfluid-headd",
	.table = opts,
	.n = sizeof(opts) / sizeof(opts[0]),
	.state_off = offsetof(struct headd_opts, st),
};

static const char usage_text[] =
	"usage: superfluid-headd --fleet HOST:PORT[,HOST:PORT...] [options]\n"
	"       superfluid-headd --fleet-listen HOST:PORT [options]\n"
	"\n"
	"Runs a superfluid head: it dials every node of the fleet, places conversations on\n"
	"them and streams their generations to clients of its HTTP API and its admin socket.\n"
	"\n"
	"  --fleet HOST:PORT,...   the nodes to dial (their --listen). A node that cannot be\n"
	"                          reached is dialed again, backing off from 100 ms to 10 s,\n"
	"                          one log line per failure; it never holds up the others\n"
	"  --fleet-listen HOST:PORT  accept nodes that dial in (superfluid-noded --join); such a\n"
	"                          node is known by its --identity, waited for when its link\n"
	"                          drops, and keeps its sessions when it joins again\n"
	"  --fleet-auth FILE       the fleet token (each node's --auth-file holds the same);\n"
	"                          must not be readable by group or others; without it links\n"
	"                          are plain\n"
	"  --pipeline HOST:PORT,...  stage nodes running one model split over them, in order:\n"
	"                          stage i runs layers [i*L/S, (i+1)*L/S), the hidden state\n"
	"                          passed on, the last stage's token (drawn with the request's\n"
	"                          sampling) the output; stages keep each generation's context;\n"
	"                          no session is placed on a stage node\n"
	"  --pipeline-model NAME   the name clients ask for the pipeline by (default the\n"
	"                          stages' model with \"-pipeline\" added)\n"
	"  --admin-socket PATH     the unix socket clients (the superfluid CLI) use (mode\n"
	"                          0600). Default: headd.sock in $RUNTIME_DIRECTORY (systemd's\n"
	"                          RuntimeDirectory=), else in $XDG_RUNTIME_DIR/superfluid,\n"
	"                          else in /tmp/superfluid-UID ($TMPDIR for /tmp; made 0700,\n"
	"                          refused if another user owns it or others may enter it)\n"
	"  --identity NAME         this head's name in the handshake (default superfluid-headd)\n"
	"  --config FILE           read options from FILE: `key = value` lines, keys are the\n"
	"                          long options without dashes, `#` starts a comment; options\n"
	"                          on the command line win\n"
	"  --io auto|uring|epoll   the event loop backend (default auto)\n"
	"  --shards N              event loops, each on a thread (and CPU) of its own with its\n"
	"                          own sessions, a link to every --fleet node and its share of\n"
	"                          the client connections (0: one per CPU the process may use;\n"
	"                          the default, but 1 with --fleet-listen, which needs 1); the\n"
	"                          session and connection limits are shared out between them;\n"
	"                          --pipeline stages are linked to shard 0, which answers their\n"
	"                          model's requests\n"
	"  --replace-after-ms N    a node down this long loses its sessions to other nodes\n"
	"                          (default 30000)\n"
	"  --silence-ms N          end a node's link after this much silence (default 10000;\n"
	"                          4294967295: never); its sessions wait --replace-after-ms\n"
	"  --heartbeat-ms N        send a heartbeat after this much quiet (default 1000)\n"
	"  --log-level LEVEL       error, warn, info or debug (default info)\n"
	"\n"
	"The client API (OpenAI-compatible HTTP: /v1/models, /v1/completions,\n"
	"/v1/chat/completions, /v1/sessions/ID, /health, /metrics; see docs/API.md):\n"
	"  --listen-http HOST:PORT where clients connect (default " HEADD_DEFAULT_LISTEN_HTTP ")\n"
	"  --tls-cert FILE, --tls-key FILE  serve HTTPS with this PEM certificate chain and key\n"
	"  --api-keys FILE         bearer keys clients must send, one per line (`#` comments),\n"
	"                          in a file only its owner may read; without it no key is\n"
	"                          asked for\n"
	"  --cors-origin ORIGIN    let browser pages of ORIGIN (https://host[:port]) call the\n"
	"                          API: CORS headers on every answer to them, preflights\n"
	"                          (OPTIONS) answered without a key; give it again for more\n"
	"                          origins, or * for any. Without it no CORS header is sent\n"
	"  --http-max-body N       bytes of a request body at most (default 8388608)\n"
	"  --http-max-conns N      client connections at once (default 4096); when all are\n"
	"                          open, the one idle longest is closed for a new one, and\n"
	"                          with none idle the new one is turned away (counted in\n"
	"                          /metrics, logged at most once a second)\n"
	"  --http-header-timeout-s N  a request line and headers must arrive within N s of\n"
	"                          the connection or the request's first byte (default 10;\n"
	"                          past it 408 and close)\n"
	"  --http-body-timeout-s N a body must arrive within N s of its headers (default 60)\n"
	"  --http-idle-timeout-s N a kept-alive connection with no request is closed after\n"
	"                          N s (default 60)\n"
	"  --tls-handshake-timeout-s N  the TLS handshake must end within N s (default 10)\n"
	"  --http-body-budget-mb N request bodies still being received, all connections\n"
	"                          together (default 256); past it a request is refused\n"
	"                          with 503 and Retry-After. A key is checked before any\n"
	"                          body byte is read\n"
	"  --stream-buffer N       bytes a slow client may leave unread; past it its stream\n"
	"                          ends with an error and its generation is cancelled\n"
	"                          (default 4194304)\n"
	"  --http-sndbuf N         the kernel's send buffer per client connection, fixed (0:\n"
	"                          the kernel's own, growing as it sees fit; default 0): with\n"
	"                          --stream-buffer it bounds what a slow client costs\n"
	"  --max-tokens-default N  tokens a request generates when it names no max_tokens\n"
	"                          (default 4096)\n"
	"  --max-sessions N        named sessions (X-Superfluid-Session) kept (default 1024)\n"
	"  --max-renders-per-key N chat requests of one key waiting for their templates to render\n"
	"                          on a head shard; more are a 429 (default 16)\n"
	"  --max-sessions-per-key N  named sessions one API key may keep, with --api-keys\n"
	"                          (default 256; --max-sessions bounds them all)\n"
	"  --max-generations-per-key N  generations one API key may run at once, with --api-keys\n"
	"                          (default 1024; --max-fleet-sessions bounds them all)\n"
	"  --max-fleet-sessions N  sessions the head holds at once, each request's included: past\n"
	"                          it a request is refused with 503 (default 65536; about 2 KiB\n"
	"                          each)\n"
	"  --session-idle-s N      a named session unused this long is ended (default 3600)\n"
	"  --prefix-cache MODE     prompts' key/value pages nodes keep and share by content, so a\n"
	"                          conversation sent whole each turn costs only its new tokens,\n"
	"                          requests going to the node holding the longest prefix: key\n"
	"                          (default): shared among requests of the same API key only;\n"
	"                          shared: among all keys (a common system prompt is computed\n"
	"                          once, but one tenant can time another's prompts by what is\n"
	"                          cached); off: nothing shared\n"
	"\n"
	"The write-ahead log (docs/RELIABILITY.md): sessions, their content and every token\n"
	"event, so that a restarted head brings them back and resumes streams:\n"
	"  --wal-dir DIR           keep the log here (created 0700); without it a head restart\n"
	"                          forgets every session\n"
	"  --wal-sync MODE         always: a token reaches a client only once its record is\n"
	"                          written and fdatasync'd (default); batch: once written (a\n"
	"                          process crash loses nothing, a power loss up to\n"
	"                          --wal-batch-ms); off: never synced but at checkpoints\n"
	"  --wal-segment-mb N      roll segments past N MiB; a checkpoint then lets the old\n"
	"                          ones go (default 64)\n"
	"  --wal-batch-ms N        batch: fdatasync this long after a write at most (default 10)\n"
	"  --wal-keep-s N          a generation that ended while its client was away (a head\n"
	"                          restart) can be fetched this long (default 300)\n"
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

/* A usage error for what only the whole set of options shows. */
static enum headd_parse_result usage_error(const char *why)
{
	sfd_usage_error(&spec, why);
	return HEADD_PARSE_EXIT_USAGE;
}

enum headd_parse_result headd_opts_parse(struct headd_opts *o, int argc, char **argv)
{
	bool help = false, version = false;
	memset(o, 0, sizeof(*o));
	o->admin_socket = NULL; /* the runtime directory's headd.sock (src/headd/headd_proc.c) */
	o->io = SF_IO_AUTO;
	o->shards = HEADD_SHARDS_UNSET;
	o->replace_after_ms = 30000;
	o->silence_ms = SF_LINK_SILENCE_MS;
	o->heartbeat_ms = SF_LINK_HEARTBEAT_MS;
	o->log_level = SFD_LOG_INFO;
	o->listen_http = HEADD_DEFAULT_LISTEN_HTTP;
	o->http_max_body = 8u << 20;
	o->http_max_conns = 4096;
	o->http_body_budget_mb = 256;
	o->http_header_timeout_s = 10;
	o->http_body_timeout_s = 60;
	o->http_idle_timeout_s = 60;
	o->tls_handshake_timeout_s = 10;
	o->stream_buffer = 4u << 20;
	o->max_tokens_default = 4096;
	o->max_sessions = 1024;
	o->max_renders_per_key = 16;
	o->max_sessions_per_key = 256;
	o->max_generations_per_key = 1024;
	o->max_fleet_sessions = 65536;
	o->session_idle_s = 3600;
	o->wal_sync = "always";
	o->prefix_cache = "key";
	o->wal_segment_mb = 64;
	o->wal_batch_ms = 10;
	o->wal_keep_s = 300;
	if (sfd_opts_parse_argv(&spec, o, argc, argv, &help, &version))
		return HEADD_PARSE_EXIT_USAGE;
	if (help) {
		fputs(usage_text, stdout);
		return HEADD_PARSE_EXIT_OK;
	}
	if (version) {
		printf("superfluid-headd %s (fleet protocol %d..%d)\n", HEADD_VERSION,
		       SF_VERSION_MIN, SF_VERSION_MAX);
		return HEADD_PARSE_EXIT_OK;
	}
	if (o->config && sfd_opts_read_config(&spec, o, o->config))
		return HEADD_PARSE_EXIT_USAGE;
	if (!o->fleet && !o->fleet_listen && !o->pipeline)
		return usage_error("needs --fleet HOST:PORT[,HOST:PORT...], --fleet-listen HOST:PORT "
				   "or --pipeline HOST:PORT[,HOST:PORT...]");
	if (o->identity && strlen(o->identity) >= SF_MAX_NAME)
		return usage_error("--identity: longer than 255 bytes");
	if (!o->tls_cert != !o->tls_key)
		return usage_error("--tls-cert and --tls-key go together");
	char why[300];
	if (o->cors_origin && headd_cors_check(o->cors_origin, why, sizeof(why)))
		return usage_error(why);
	if (o->shards == HEADD_SHARDS_UNSET) /* one per CPU, but one where only one works */
		o->shards = o->fleet_listen ? 1 : 0;
	if (o->shards != 1 && o->fleet_listen)
		return usage_error("--fleet-listen needs --shards 1: a node that dials in opens one "
				   "link, and every shard needs its own");
	if (o->silence_ms != UINT32_MAX && o->heartbeat_ms >= o->silence_ms)
		return usage_error("--heartbeat-ms must be below --silence-ms");
	return HEADD_PARSE_RUN;
}

void headd_opts_free(struct headd_opts *o)
{
	sfd_opts_free(&spec, o);
}
