/* superfluid-linkdemo: the fleet link between two processes on loopback, until the daemons
 * exist. `node` listens and answers generations with a fixed deterministic stream; `head`
 * dials, opens the link (sealed when given a token file), places one session, generates and
 * prints the tokens as text. Every handshake failure prints its operator sentence. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <sodium.h>
#include <superfluid/link.h>
#include <superfluid/token_file.h>

#include "drive.h"

static const char usage[] =
	"usage: superfluid-linkdemo node --listen HOST:PORT [--auth-file FILE] [--identity NAME]\n"
	"                                [--version-max 2|3] [--once]\n"
	"       superfluid-linkdemo head --connect HOST:PORT [--fleet-auth FILE] [--prompt TEXT]\n"
	"                                [--max-tokens N] [--model NAME]\n"
	"\n"
	"  node  serves the fleet link: answers GENERATE with a deterministic token stream\n"
	"  head  opens a link to a node, assigns a session, appends the prompt, generates,\n"
	"        prints the generated text; exit 0 on success, 2 when the link fails\n"
	"\n"
	"  --listen HOST:PORT     node: where to accept heads\n"
	"  --connect HOST:PORT    head: the node to dial (5 s connect limit)\n"
	"  --auth-file FILE       node: token file; without it the link is plain\n"
	"  --fleet-auth FILE      head: token file; must hold the node's token\n"
	"  --identity NAME        this side's name in the handshake\n"
	"  --version-max N        node: highest protocol version to speak (default 3)\n"
	"  --once                 node: exit after the first head disconnects\n"
	"  --prompt TEXT          head: the prompt (default \"hello fleet\")\n"
	"  --max-tokens N         head: tokens to generate (default 16)\n"
	"  --model NAME           head: the model the session asks for (default demo)\n";

/* The demo's engine: token i after a context is a letter from a pure function of the context
 * length, the last token and i. */
static uint32_t demo_next_token(uint32_t prev, uint32_t ctx_len, uint32_t i)
{
	uint32_t x = prev * 2654435761u ^ (ctx_len + i) * 40503u;
	return 'a' + (x >> 7) % 26;
}

struct opts {
	const char *addr, *token_path, *identity, *prompt, *model;
	uint32_t version_max, max_tokens;
	bool once;
};

static int load_token(const char *path, uint8_t *tok, size_t *len)
{
	*len = 0;
	if (!path)
		return 0;
	struct sf_err err;
	if (sf_token_file_read(path, tok, len, &err)) {
		fprintf(stderr, "superfluid-linkdemo: %s\n", err.msg);
		return -1;
	}
	return 0;
}

/* Node: one session's state is enough for the demo. */
struct demo_session {
	uint64_t id, epoch;
	uint32_t *tokens;
	uint32_t n_tokens;
};

static void node_generate(struct sf_link *l, struct demo_session *s, const struct sf_generate *g)
{
	struct sf_err err;
	uint32_t prev = s->n_tokens ? s->tokens[s->n_tokens - 1] : 0;
	uint32_t n = g->max_new_tokens ? g->max_new_tokens : 16;
	uint64_t seq = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t t = demo_next_token(prev, s->n_tokens, i);
		prev = t;
		struct sf_token_event ev = { .session_id = g->session_id, .generation_id = g->generation_id,
					     .epoch = g->epoch, .seq = seq++, .kind = SF_EVENT_TOKENS,
					     .tokens = &t, .n_tokens = 1 };
		struct sf_token_events te = { .events = &ev, .n_events = 1 };
		if (sf_link_send(l, SF_MSG_TOKEN_EVENTS, &te, demo_now_ms(), &err))
			fprintf(stderr, "node: %s\n", err.msg);
	}
	struct sf_token_event fin = { .session_id = g->session_id, .generation_id = g->generation_id,
				      .epoch = g->epoch, .seq = seq, .kind = SF_EVENT_FINISH,
				      .reason = SF_FINISH_LENGTH };
	struct sf_token_events te = { .events = &fin, .n_events = 1 };
	if (sf_link_send(l, SF_MSG_TOKEN_EVENTS, &te, demo_now_ms(), &err))
		fprintf(stderr, "node: %s\n", err.msg);
}

static void node_message(struct sf_link *l, struct demo_session *s, const struct sf_msg *m)
{
	switch (m->type) {
	case SF_MSG_SESSION_ASSIGN:
		s->id = m->u.session_assign.session_id;
		s->epoch = m->u.session_assign.epoch;
		s->n_tokens = 0;
		break;
	case SF_MSG_SESSION_APPEND: {
		const struct sf_session_append *a = &m->u.session_append;
		if (a->session_id != s->id || a->epoch != s->epoch)
			break;
		uint32_t *nt = realloc(s->tokens, (a->n_tokens ? a->n_tokens : 1) * sizeof(uint32_t));
		if (!nt)
			break;
		s->tokens = nt;
		memcpy(s->tokens, a->tokens, a->n_tokens * sizeof(uint32_t));
		s->n_tokens = a->n_tokens;
		break;
	}
	case SF_MSG_GENERATE:
		node_generate(l, s, &m->u.generate);
		break;
	default:
		break;
	}
}

static void serve_one(int cfd, const struct opts *o, const uint8_t *tok, size_t tok_len)
{
	struct sf_model_info model = { .name = "demo", .name_len = 4, .tokenizer_digest = 1,
				       .n_layers = 1, .ctx_len = 4096, .vocab_size = 256 };
	struct sf_link_config cfg = {
		.role = SF_ROLE_NODE, .token = tok, .token_len = tok_len,
		.version_max = o->version_max, .identity = o->identity,
		.capacity = { .max_sessions = 1, .free_sessions = 1, .batch_size = 1 },
		.models = &model, .n_models = 1,
	};
	struct sf_err err;
	struct sf_link *l = sf_link_new(&cfg, demo_now_ms(), &err);
	if (!l) {
		fprintf(stderr, "node: %s\n", err.msg);
		return;
	}
	struct demo_session s = { 0 };
	bool closed = false;
	for (;;) {
		struct sf_link_event ev;
		enum sf_link_ev_kind k;
		while ((k = sf_link_poll(l, demo_now_ms(), &ev)) != SF_LINK_EV_NONE) {
			if (k == SF_LINK_EV_OPEN)
				fprintf(stderr, "node: head %s opened a %s link, protocol %u\n",
					sf_link_peer(l)->identity, sf_link_peer(l)->encrypted ? "sealed" : "plain",
					sf_link_peer(l)->version);
			else if (k == SF_LINK_EV_MSG)
				node_message(l, &s, ev.msg);
			if (k == SF_LINK_EV_CLOSED) {
				closed = true;
				fprintf(stderr, "node: head: %s\n", ev.err.msg);
			}
		}
		int r = demo_pump(cfd, l, 1000);
		if (r > 0 || (r < 0 && closed))
			break;
	}
	free(s.tokens);
	sf_link_free(l);
}

static int run_node(const struct opts *o)
{
	uint8_t tok[SF_TOKEN_MAX];
	size_t tok_len;
	if (load_token(o->token_path, tok, &tok_len))
		return 1;
	struct sf_err err;
	int lfd = demo_listen(o->addr, &err);
	if (lfd < 0) {
		fprintf(stderr, "superfluid-linkdemo: %s\n", err.msg);
		return 1;
	}
	fprintf(stderr, "node: listening on %s (%s)\n", o->addr, tok_len ? "sealed" : "plain");
	for (;;) {
		int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (cfd < 0)
			continue;
		serve_one(cfd, o, tok, tok_len);
		close(cfd);
		if (o->once)
			break;
	}
	sodium_memzero(tok, sizeof(tok));
	close(lfd);
	return 0;
}

static int run_head(const struct opts *o)
{
	uint8_t tok[SF_TOKEN_MAX];
	size_t tok_len;
	if (load_token(o->token_path, tok, &tok_len))
		return 1;
	struct sf_err err;
	int fd = demo_dial(o->addr, 5000, &err);
	if (fd < 0) {
		fprintf(stderr, "node %s: %s\n", o->addr, err.msg);
		return 2;
	}
	struct sf_link_config cfg = { .role = SF_ROLE_HEAD, .token = tok, .token_len = tok_len,
				      .identity = o->identity };
	struct sf_link *l = sf_link_new(&cfg, demo_now_ms(), &err);
	sodium_memzero(tok, sizeof(tok));
	if (!l) {
		fprintf(stderr, "superfluid-linkdemo: %s\n", err.msg);
		close(fd);
		return 1;
	}
	int rc = 2;
	uint64_t got = 0;
	bool done = false;
	while (!done) {
		struct sf_link_event ev;
		enum sf_link_ev_kind k;
		while (!done && (k = sf_link_poll(l, demo_now_ms(), &ev)) != SF_LINK_EV_NONE) {
			if (k == SF_LINK_EV_CLOSED) {
				fprintf(stderr, "node %s: %s\n", o->addr, ev.err.msg);
				done = true;
			} else if (k == SF_LINK_EV_OPEN) {
				const struct sf_link_peer *p = sf_link_peer(l);
				fprintf(stderr, "head: node %s (%s link, protocol %u, %u model%s)\n",
					p->identity, p->encrypted ? "sealed" : "plain", p->version,
					p->n_models, p->n_models == 1 ? "" : "s");
				size_t plen = strlen(o->prompt);
				uint32_t *ptoks = calloc(plen ? plen : 1, sizeof(uint32_t));
				for (size_t i = 0; i < plen; i++)
					ptoks[i] = (uint8_t)o->prompt[i];
				struct sf_session_assign as = { .command_id = 1, .session_id = 1, .epoch = 1,
								.lease_ms = 30000,
								.model = (char *)o->model,
								.model_len = (uint32_t)strlen(o->model) };
				struct sf_session_append ap = { .command_id = 2, .session_id = 1, .epoch = 1,
								.tokens = ptoks, .n_tokens = (uint32_t)plen };
				struct sf_generate g = { .command_id = 3, .session_id = 1, .epoch = 1,
							 .generation_id = 1, .max_new_tokens = o->max_tokens };
				uint64_t now = demo_now_ms();
				if (sf_link_send(l, SF_MSG_SESSION_ASSIGN, &as, now, &err) ||
				    sf_link_send(l, SF_MSG_SESSION_APPEND, &ap, now, &err) ||
				    sf_link_send(l, SF_MSG_GENERATE, &g, now, &err)) {
					fprintf(stderr, "head: %s\n", err.msg);
					done = true;
				}
				free(ptoks);
			} else if (k == SF_LINK_EV_MSG && ev.msg->type == SF_MSG_REFUSED) {
				fprintf(stderr, "node %s refused command %llu: %s\n", o->addr,
					(unsigned long long)ev.msg->u.refused.command_id,
					ev.msg->u.refused.reason);
				done = true;
			} else if (k == SF_LINK_EV_MSG && ev.msg->type == SF_MSG_TOKEN_EVENTS) {
				const struct sf_token_events *te = &ev.msg->u.token_events;
				uint64_t last = 0;
				for (uint32_t i = 0; i < te->n_events; i++) {
					const struct sf_token_event *e = &te->events[i];
					last = e->seq;
					for (uint32_t j = 0; j < e->n_tokens; j++, got++)
						putchar((int)e->tokens[j]);
					if (e->kind == SF_EVENT_FINISH) {
						putchar('\n');
						rc = 0;
						done = true;
					}
				}
				struct sf_watermark wm = { .session_id = 1, .generation_id = 1, .epoch = 1,
							   .seq = last };
				struct sf_watermark_ack ack = { .marks = &wm, .n_marks = 1 };
				if (sf_link_send(l, SF_MSG_WATERMARK_ACK, &ack, demo_now_ms(), &err))
					fprintf(stderr, "head: %s\n", err.msg);
			}
		}
		if (done && rc == 0)
			sf_link_goodbye(l, 0, "demo done", demo_now_ms());
		int r = demo_pump(fd, l, 1000);
		if (r > 0 || (r < 0 && done))
			break;
	}
	fflush(stdout);
	if (rc == 0)
		fprintf(stderr, "head: %llu tokens generated\n", (unsigned long long)got);
	sf_link_free(l);
	close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 1 : 0;
	}
	signal(SIGPIPE, SIG_IGN);
	struct opts o = { .prompt = "hello fleet", .max_tokens = 16, .version_max = 3,
			  .model = "demo" };
	bool node = !strcmp(argv[1], "node");
	if (!node && strcmp(argv[1], "head")) {
		fprintf(stderr, "superfluid-linkdemo: unknown role %s\n%s", argv[1], usage);
		return 1;
	}
	o.identity = node ? "demo-node" : "demo-head";
	static const struct option longopts[] = {
		{ "listen", required_argument, 0, 'l' }, { "connect", required_argument, 0, 'c' },
		{ "auth-file", required_argument, 0, 'a' }, { "fleet-auth", required_argument, 0, 'a' },
		{ "identity", required_argument, 0, 'i' }, { "version-max", required_argument, 0, 'v' },
		{ "once", no_argument, 0, 'o' }, { "prompt", required_argument, 0, 'p' },
		{ "max-tokens", required_argument, 0, 'n' }, { "help", no_argument, 0, 'h' },
		{ "model", required_argument, 0, 'm' },
		{ 0, 0, 0, 0 },
	};
	int c;
	optind = 2;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'l': case 'c': o.addr = optarg; break;
		case 'a': o.token_path = optarg; break;
		case 'i': o.identity = optarg; break;
		case 'v': o.version_max = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'o': o.once = true; break;
		case 'p': o.prompt = optarg; break;
		case 'n': o.max_tokens = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'm': o.model = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 1;
		}
	}
	if (!o.addr) {
		fprintf(stderr, "superfluid-linkdemo: %s needs %s\n", argv[1], node ? "--listen" : "--connect");
		return 1;
	}
	if (o.version_max < SF_VERSION_MIN || o.version_max > SF_VERSION_MAX) {
		fprintf(stderr, "superfluid-linkdemo: --version-max must be %d or %d\n", SF_VERSION_MIN,
			SF_VERSION_MAX);
		return 1;
	}
	return node ? run_node(&o) : run_head(&o);
}
