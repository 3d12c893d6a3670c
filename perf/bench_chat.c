/* Time to first token through the head, turn by turn, with the node's own share taken out.
 *
 * The driver is two things in one process (none of superfluid linked into it):
 *   - a tap on the fleet link: it listens on a port of its own (written to TAP_PORTFILE), the
 *     head's --fleet names it, and on the head's connection it dials the node and passes every
 *     byte both ways unchanged (plain link), noting the time and type of each frame as it goes
 *     by (head -> node when read, node -> head just before the write to the head);
 *   - one HTTP client of the head's API (keep-alive, TCP_NODELAY), one streamed
 *     /v1/chat/completions at a time.
 * Conversations: TURNS turns of a named session ("session": each turn sends only its new user
 * message), then the same history (every user message and the head's replies, the last user
 * message at the end) as one fresh unnamed request: the re-prefill of the whole history.
 * Conversation 0 warms up and is marked so. The user messages are WORDS words drawn from SEED,
 * different in every turn and conversation, so the head's tokenizer cache never answers them.
 *
 * For each request, from the frames between the client's write (t0) and its first SSE event
 * (t_first, the first chunk with a token: the head sends none before):
 *   ttft      t_first - t0
 *   node      the node alone's time for the turn's tokens: SESSION_APPEND read -> the
 *             TOKEN_EVENTS frame written last before t_first (the first one, unless the head
 *             held the first token's text back: then `held` counts the frames after it)
 *   head      ttft - node: what the head adds (its HTTP, JSON, template, session, SSE work, the
 *             loopback hops to the node and back, which a client of the node alone would not
 *             make, and the encoding of the turn that it asks of the node: TOKENIZE_REQ read ->
 *             TOKENIZE_RESP written, `encode`, when its cache had none)
 * Usage: bench_chat TAP_PORTFILE NODE_PORT API_FILE CONVERSATIONS TURNS MAX_TOKENS WORDS SEED
 *   API_FILE: written by the caller once the head serves the model: "HTTP_PORT MODEL".
 * Prints one line a request:
 *   REQ conv turn kind ttft_ms node_ms head_ms encode_ms prompt_tokens
 *       completion_tokens held warm head_in_ms head_mid_ms head_out_ms hop_ms
 * head_in: t0 -> the head's first frame for the request (TOKENIZE_REQ, or SESSION_APPEND when
 * its cache knew the text); head_mid: TOKENIZE_RESP -> SESSION_APPEND; head_out: the first
 * token's TOKEN_EVENTS -> t_first. head = their sum. hop_ms: the tap's own hop, below.
 * kind: session (turn 1..TURNS) or fresh (turn TURNS's history re-sent whole). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define MAX_FRAMES (1u << 20)
#define MAX_TURNS 64
#define MAX_WORDS 256
#define RESP_CAP (4u << 20)
#define CONTENT_CAP (256u << 10)

enum { T_TOKENIZE_REQ = 0x0013, T_TOKENIZE_RESP = 0x0014, T_SESSION_APPEND = 0x0021,
       T_TOKEN_EVENTS = 0x0033 };

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "bench_chat: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, " (%s)\n", strerror(errno));
	va_end(ap);
	exit(1);
}

/* ==== the tap ==== */

struct frame {
	uint64_t t;
	uint16_t type;
	bool to_node;
};

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static struct frame *frames;
static size_t n_frames;

static void note(uint16_t type, bool to_node, uint64_t t)
{
	pthread_mutex_lock(&log_mu);
	if (n_frames < MAX_FRAMES)
		frames[n_frames++] = (struct frame){ t, type, to_node };
	pthread_mutex_unlock(&log_mu);
}

/* One direction: reads, notes each frame whose header completes, writes onward. Frame
 * headers are 8 bytes: payload length u32, type u16, flags, reserved (little-endian); the
 * first 8 bytes each way are the plain link's preamble and its reply. */
struct pipe_dir {
	int from, to;
	bool to_node;
};

static void *pipe_run(void *arg)
{
	struct pipe_dir *d = arg;
	static __thread uint8_t b[1 << 18];
	uint8_t hdr[8];
	size_t skip = 8, have = 0; /* bytes of payload (or preamble) to pass; header bytes held */
	for (;;) {
		ssize_t n = read(d->from, b, sizeof(b));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "bench_chat: the fleet link closed (%s side)\n",
				d->to_node ? "head" : "node");
			exit(1);
		}
		uint64_t t = now_ns();
		for (size_t i = 0; i < (size_t)n;) {
			if (skip) {
				size_t k = (size_t)n - i < skip ? (size_t)n - i : skip;
				skip -= k;
				i += k;
				continue;
			}
			hdr[have++] = b[i++];
			if (have == 8) {
				have = 0;
				skip = (size_t)hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16 |
				       (size_t)hdr[3] << 24;
				note((uint16_t)(hdr[4] | hdr[5] << 8), d->to_node, d->to_node ? t : now_ns());
			}
		}
		if (!write_all(d->to, b, (size_t)n))
			die("write to the %s", d->to_node ? "node" : "head");
	}
	return NULL;
}

static int tcp_listen(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 4))
		die("listen");
	return fd;
}

static int tcp_dial(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		die("connect to 127.0.0.1:%d", port);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

struct tap_args {
	int lst, node_port;
};

static void *tap_run(void *arg)
{
	struct tap_args *ta = arg;
	int h = accept(ta->lst, NULL, NULL), one = 1;
	if (h < 0)
		die("accept the head");
	setsockopt(h, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	int n = tcp_dial(ta->node_port);
	static struct pipe_dir up, down;
	up = (struct pipe_dir){ h, n, true };
	down = (struct pipe_dir){ n, h, false };
	pthread_t th;
	if (pthread_create(&th, NULL, pipe_run, &down))
		die("thread");
	pipe_run(&up);
	return NULL;
}

/* ==== the HTTP client ==== */

static int api_port;
static char model[256];
static int api_fd = -1;

struct reply {
	uint64_t t0, t_first;
	long prompt_tokens, completion_tokens;
	char *content; /* the reply's text, JSON-escaped as the head sent it (NUL-terminated) */
	size_t content_len;
	bool ok;
};

/* The JSON string at p (just past its opening quote): its length up to the closing quote. */
static size_t json_str_len(const char *p, const char *end)
{
	const char *q = p;
	while (q < end && *q != '"')
		q += *q == '\\' && q + 1 < end ? 2 : 1;
	return (size_t)(q - p);
}

/* Every "content":"..." of the decoded body's SSE events, appended to r->content. */
static void take_content(struct reply *r, const char *body, size_t len)
{
	static const char key[] = "\"content\":\"";
	const char *end = body + len;
	for (const char *p = body; (p = memmem(p, (size_t)(end - p), key, sizeof(key) - 1));) {
		p += sizeof(key) - 1;
		size_t k = json_str_len(p, end);
		if (r->content_len + k < CONTENT_CAP) {
			memcpy(r->content + r->content_len, p, k);
			r->content_len += k;
			r->content[r->content_len] = 0;
		}
		p += k;
	}
	const char *u = memmem(body, len, "\"prompt_tokens\":", 16);
	if (u)
		r->prompt_tokens = strtol(u + 16, NULL, 10);
	u = memmem(body, len, "\"completion_tokens\":", 20);
	if (u)
		r->completion_tokens = strtol(u + 20, NULL, 10);
}

static void api_dial(void)
{
	if (api_fd >= 0)
		close(api_fd);
	api_fd = tcp_dial(api_port);
}

/* POSTs body to /v1/chat/completions and reads the streamed answer to its end. */
static bool chat(const char *body, size_t body_len, struct reply *r)
{
	static char *buf, *dec;
	if (!buf && (!(buf = malloc(RESP_CAP + 1)) || !(dec = malloc(RESP_CAP + 1))))
		die("malloc");
	char hdr[256];
	int hn = snprintf(hdr, sizeof(hdr), "POST /v1/chat/completions HTTP/1.1\r\nHost: b\r\n"
			  "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", body_len);
	r->t_first = 0;
	r->prompt_tokens = r->completion_tokens = -1;
	r->content_len = 0;
	r->content[0] = 0;
	r->ok = false;
	/* One write: the head sees the request whole. */
	char *req = malloc((size_t)hn + body_len);
	if (!req)
		die("malloc");
	memcpy(req, hdr, (size_t)hn);
	memcpy(req + hn, body, body_len);
	r->t0 = now_ns();
	bool sent = write_all(api_fd, req, (size_t)hn + body_len);
	free(req);
	if (!sent)
		return false;
	size_t len = 0, body_at = 0, at = 0, dlen = 0;
	bool chunked = false;
	for (;;) {
		if (len == RESP_CAP)
			return false;
		ssize_t n = read(api_fd, buf + len, RESP_CAP - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		uint64_t t = now_ns();
		len += (size_t)n;
		buf[len] = 0;
		if (!body_at) {
			char *e = strstr(buf, "\r\n\r\n");
			if (!e)
				continue;
			body_at = at = (size_t)(e + 4 - buf);
			r->ok = !strncmp(buf, "HTTP/1.1 200", 12);
			chunked = strstr(buf, "Transfer-Encoding: chunked") != NULL;
			if (!r->ok || !chunked) {
				fprintf(stderr, "bench_chat: the head answered: %.300s\n", buf);
				return false;
			}
		}
		/* Decode the chunks there are. */
		for (;;) {
			char *crlf = memmem(buf + at, len - at, "\r\n", 2);
			if (!crlf)
				break;
			size_t sz = strtoul(buf + at, NULL, 16), from = (size_t)(crlf + 2 - buf);
			if (len - from < sz + 2)
				break;
			if (!sz) {
				if (!r->t_first && memmem(dec, dlen, "data: ", 6))
					r->t_first = t; /* the whole answer came in one read */
				take_content(r, dec, dlen);
				return r->ok && r->t_first;
			}
			memcpy(dec + dlen, buf + from, sz);
			dlen += sz;
			at = from + sz + 2;
		}
		if (!r->t_first && memmem(dec, dlen, "data: ", 6))
			r->t_first = t;
	}
}

/* ==== the tap's own hops ==== */

/* The tap puts one more hop each way on the head's link (head -> tap -> node where there is
 * head -> node): 2 a round trip, counted in the head's stretches. A hop is measured as the tap
 * forwards: half a round trip of one byte between two threads on loopback TCP, blocking reads
 * and writes, taken after every request. */
static int hop_fd = -1;

static void *echo_run(void *arg)
{
	int lst = *(int *)arg, one = 1;
	int fd = accept(lst, NULL, NULL);
	if (fd < 0)
		die("accept the hop probe");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	char c;
	while (read(fd, &c, 1) == 1)
		if (!write_all(fd, &c, 1))
			break;
	return NULL;
}

static void hop_start(void)
{
	static int lst;
	lst = tcp_listen();
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	getsockname(lst, (struct sockaddr *)&a, &alen);
	pthread_t th;
	if (pthread_create(&th, NULL, echo_run, &lst))
		die("thread");
	hop_fd = tcp_dial(ntohs(a.sin_port));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The median of 15 half round trips, in ms. */
static double hop_ms(void)
{
	uint64_t v[15];
	char c = 'h';
	for (int i = 0; i < 15; i++) {
		uint64_t t = now_ns();
		if (!write_all(hop_fd, &c, 1) || read(hop_fd, &c, 1) != 1)
			die("the hop probe");
		v[i] = now_ns() - t;
	}
	qsort(v, 15, sizeof(v[0]), cmp_u64);
	return (double)v[7] / 2e6;
}

/* ==== the conversations ==== */

static const char *const words[] = {
	"river", "stone", "light", "window", "garden", "silver", "morning", "harbor", "quiet",
	"paper", "engine", "forest", "winter", "yellow", "bridge", "candle", "market", "orange",
	"pocket", "rabbit", "summer", "thunder", "valley", "wander", "basket", "castle", "dragon",
	"feather", "island", "jacket", "ladder", "meadow", "needle", "ocean", "pepper", "puzzle",
	"rocket", "saddle", "tunnel", "velvet", "whistle", "anchor", "button", "cotton", "dinner",
	"folder", "ginger", "hollow", "kettle", "lemon", "mirror", "number", "parrot", "rhythm",
	"shadow", "timber", "violet", "walnut", "zipper", "copper", "marble", "planet", "signal",
	"travel",
};

static uint64_t rng;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Appends to a growing string. */
struct str {
	char *p;
	size_t len, cap;
};

static void sadd(struct str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sadd(struct str *s, const char *fmt, ...)
{
	va_list ap;
	if (!s->p && !(s->p = malloc(s->cap = 256)))
		die("malloc");
	for (;;) {
		va_start(ap, fmt);
		int n = vsnprintf(s->p + s->len, s->cap - s->len, fmt, ap);
		va_end(ap);
		if (n < 0)
			die("format");
		if ((size_t)n < s->cap - s->len) {
			s->len += (size_t)n;
			return;
		}
		s->cap = (s->cap + (size_t)n + 1) * 2;
		if (!(s->p = realloc(s->p, s->cap)))
			die("realloc");
	}
}

/* The frames of one request: the node's time and the head's, as the header comment says. */
static void report(int conv, int turn, const char *kind, const struct reply *r, bool warm)
{
	uint64_t t_tokreq = 0, t_tokresp = 0, t_app = 0, t_tok = 0;
	int held = -1;
	pthread_mutex_lock(&log_mu);
	for (size_t i = 0; i < n_frames; i++) {
		const struct frame *f = &frames[i];
		if (f->t < r->t0 || f->t > r->t_first)
			continue;
		if (f->to_node && f->type == T_TOKENIZE_REQ && !t_tokreq)
			t_tokreq = f->t;
		else if (!f->to_node && f->type == T_TOKENIZE_RESP && t_tokreq && !t_tokresp)
			t_tokresp = f->t;
		else if (f->to_node && f->type == T_SESSION_APPEND && !t_app)
			t_app = f->t;
		else if (!f->to_node && f->type == T_TOKEN_EVENTS && t_app) {
			t_tok = f->t;
			held++;
		}
	}
	pthread_mutex_unlock(&log_mu);
	double ttft = (double)(r->t_first - r->t0) / 1e6;
	double tok = t_tokresp ? (double)(t_tokresp - t_tokreq) / 1e6 : 0;
	double node = t_tok ? (double)(t_tok - t_app) / 1e6 : -1;
	/* The head's three stretches: to its first frame for the request, from the encoding's
	 * answer to SESSION_APPEND, from the first token's frame to the client. */
	uint64_t first = t_tokreq ? t_tokreq : t_app;
	double h_in = first ? (double)(first - r->t0) / 1e6 : -1;
	double h_mid = t_tokresp && t_app ? (double)(t_app - t_tokresp) / 1e6 : 0;
	double h_out = t_tok ? (double)(r->t_first - t_tok) / 1e6 : -1;
	double hop = hop_ms();
	printf("REQ %d %d %s %.3f %.3f %.3f %.3f %ld %ld %d %d %.3f %.3f %.3f %.4f\n", conv, turn,
	       kind, ttft, node, node < 0 ? -1 : ttft - node, tok, r->prompt_tokens,
	       r->completion_tokens, held, warm, h_in, h_mid, h_out, hop);
	fflush(stdout);
}

static void user_text(struct str *s, int n_words, int conv, int turn)
{
	sadd(s, "Turn %d of talk %d: ", turn, conv);
	for (int i = 0; i < n_words; i++)
		sadd(s, "%s%s", i ? " " : "", words[next_rand() % (sizeof(words) / sizeof(words[0]))]);
	sadd(s, "?");
}

static void conversation(int conv, int turns, int max_tokens, int n_words, uint64_t seed)
{
	static struct str users[MAX_TURNS], replies[MAX_TURNS];
	static char content[CONTENT_CAP];
	struct reply r = { .content = content };
	struct str body = { 0 };
	for (int k = 0; k < turns; k++) {
		users[k].len = replies[k].len = 0;
		user_text(&users[k], n_words, conv, k + 1);
		body.len = 0;
		sadd(&body, "{\"model\":\"%s\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
			    "\"max_tokens\":%d,\"temperature\":0,\"session\":\"ttft-%llu-%d\","
			    "\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}",
		     model, max_tokens, (unsigned long long)seed, conv, users[k].p);
		if (!chat(body.p, body.len, &r))
			die("conversation %d turn %d failed", conv, k + 1);
		sadd(&replies[k], "%s", content);
		report(conv, k + 1, "session", &r, conv == 0);
	}
	/* The whole history again, as one fresh request. */
	body.len = 0;
	sadd(&body, "{\"model\":\"%s\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
		    "\"max_tokens\":%d,\"temperature\":0,\"messages\":[", model, max_tokens);
	for (int k = 0; k < turns; k++) {
		sadd(&body, "%s{\"role\":\"user\",\"content\":\"%s\"}", k ? "," : "", users[k].p);
		if (k + 1 < turns)
			sadd(&body, ",{\"role\":\"assistant\",\"content\":\"%s\"}", replies[k].p);
	}
	sadd(&body, "]}");
	if (!chat(body.p, body.len, &r))
		die("conversation %d's history as one request failed", conv);
	report(conv, turns, "fresh", &r, conv == 0);
	free(body.p);
}

int main(int argc, char **argv)
{
	if (argc != 9) {
		fprintf(stderr, "usage: bench_chat TAP_PORTFILE NODE_PORT API_FILE CONVERSATIONS TURNS "
				"MAX_TOKENS WORDS SEED\n");
		return 2;
	}
	int node_port = atoi(argv[2]), convs = atoi(argv[4]), turns = atoi(argv[5]);
	int max_tokens = atoi(argv[6]), n_words = atoi(argv[7]);
	uint64_t seed = strtoull(argv[8], NULL, 10);
	if (node_port <= 0 || node_port > 65535 || convs < 1 || convs > 1000 || turns < 1 ||
	    turns > MAX_TURNS || max_tokens < 1 || max_tokens > 4096 || n_words < 1 ||
	    n_words > MAX_WORDS) {
		fprintf(stderr, "bench_chat: an argument is out of range (conversations 1..1000, turns "
				"1..%d, max tokens 1..4096, words 1..%d)\n", MAX_TURNS, MAX_WORDS);
		return 2;
	}
	rng = seed * 2654435761u + 88172645463325252ull;
	if (!(frames = malloc(MAX_FRAMES * sizeof(*frames))))
		die("malloc");
	static struct tap_args ta;
	ta.lst = tcp_listen();
	ta.node_port = node_port;
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	getsockname(ta.lst, (struct sockaddr *)&a, &alen);
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", argv[1]);
	FILE *pf = fopen(tmp, "w");
	if (!pf || fprintf(pf, "127.0.0.1:%d\n", ntohs(a.sin_port)) < 0 || fclose(pf) ||
	    rename(tmp, argv[1]))
		die("write %s", argv[1]);
	pthread_t th;
	if (pthread_create(&th, NULL, tap_run, &ta))
		die("thread");
	/* The caller names the API once the model is served (at most 10 minutes: a big model). */
	for (int i = 0; i < 6000; i++) {
		FILE *f = fopen(argv[3], "r");
		if (f) {
			int ok = fscanf(f, "%d %255s", &api_port, model);
			fclose(f);
			if (ok == 2)
				break;
		}
		usleep(100000);
	}
	if (!api_port) {
		fprintf(stderr, "bench_chat: %s never named the API\n", argv[3]);
		return 1;
	}
	api_dial();
	hop_start();
	for (int c = 0; c < convs; c++)
		conversation(c, turns, max_tokens, n_words, seed);
	return 0;
}
