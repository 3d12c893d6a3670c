/* superfluid-noded as a real process, driven over loopback with the link library: every
 * message kind, fencing, leases, replay after a dropped connection, blob verification, bad
 * frames. The engine's expected streams come from sf_sim_expected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include <superfluid/sim_engine.h>

#include "io/link_conn.h"

#define MAX_GOT 2048

struct client {
	struct sf_loop *loop;
	struct sf_link_conn *lc;
	bool open, closed;
	struct sf_err err;
	struct sf_arena arena;
	struct sf_msg got[MAX_GOT];
	int n_got;
};

static pid_t noded_pid;
static const char *more_args[4]; /* main's arguments: given to every node (--shards 3) */
static int port;
static char dir[64], token_path[128], blob_dir[128];

static void on_open(struct sf_link_conn *lc) { ((struct client *)sf_link_conn_user(lc))->open = true; }

static void on_msg(struct sf_link_conn *lc, const struct sf_msg *m)
{
	struct client *c = sf_link_conn_user(lc);
	if (c->n_got == MAX_GOT)
		return;
	/* Keep a deep copy: encode and decode into the client's own arena. */
	struct sf_buf b;
	struct sf_err err;
	sf_buf_init(&b, 64u << 20);
	if (sf_msg_encode(&b, m->type, &m->u, 3, SF_FRAME_PAYLOAD_MAX, &err) == 0 &&
	    sf_msg_decode(m->type, sf_buf_head(&b) + SF_FRAME_HDR_LEN, sf_buf_used(&b) - SF_FRAME_HDR_LEN,
			  3, &c->arena, &c->got[c->n_got], &err) == 0)
		c->n_got++;
	sf_buf_free(&b);
}

static void on_closed(struct sf_link_conn *lc, const struct sf_err *err)
{
	struct client *c = sf_link_conn_user(lc);
	c->closed = true;
	c->err = *err;
	c->lc = NULL;
}

static const struct sf_link_conn_ops ops = { on_open, on_msg, on_closed };

static void start_noded(const char *extra)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bind(fd, (struct sockaddr *)&a, sizeof(a));
	socklen_t len = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &len);
	port = ntohs(a.sin_port);
	close(fd);
	char listen_arg[64];
	snprintf(listen_arg, sizeof(listen_arg), "127.0.0.1:%d", port);
	noded_pid = fork();
	if (noded_pid == 0) {
		const char *argv[16] = { SF_NODED_PATH, "--listen", listen_arg, "--auth-file", token_path,
					 "--blob-dir", blob_dir, "--identity", "wire-node", NULL };
		int n = 9;
		if (extra)
			argv[n++] = extra;
		for (int i = 0; i < 4 && more_args[i]; i++)
			argv[n++] = more_args[i];
		argv[n] = NULL;
		execv(SF_NODED_PATH, (char **)argv);
		_exit(127);
	}
	/* Wait until it listens. */
	for (int i = 0; i < 200; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		int rc = connect(s, (struct sockaddr *)&a, sizeof(a));
		close(s);
		if (rc == 0)
			return;
		usleep(20000);
	}
	fail_msg("superfluid-noded did not start listening on %d", port);
}

static void stop_noded(void)
{
	if (noded_pid > 0) {
		kill(noded_pid, SIGKILL);
		waitpid(noded_pid, NULL, 0);
	}
	noded_pid = 0;
}

static bool turn_until(struct client *c, bool (*done)(struct client *, void *), void *arg, int ms)
{
	for (int i = 0; i < ms / 5 && !done(c, arg); i++)
		sf_loop_turn(c->loop, 5);
	return done(c, arg);
}

static bool is_open(struct client *c, void *arg) { return c->open || c->closed; }

static void connect_client(struct client *c, const char *token)
{
	memset(c, 0, sizeof(*c));
	struct sf_err err;
	struct sf_loop_config lc = { .quiet = true };
	assert_int_equal(sf_loop_new(&c->loop, &lc, &err), 0);
	sf_arena_init(&c->arena, 512u << 20);
	struct sf_link_config cfg = { .role = SF_ROLE_HEAD, .identity = "wire-test" };
	if (token) {
		cfg.token = (const uint8_t *)token;
		cfg.token_len = strlen(token);
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	c->lc = sf_link_conn_dial(c->loop, (struct sockaddr *)&a, sizeof(a), 5000, &cfg, &ops, c, &err);
	assert_non_null(c->lc);
	assert_true(turn_until(c, is_open, NULL, 5000));
}

static void free_client(struct client *c)
{
	if (c->lc)
		sf_link_conn_close(c->lc, 0, "test done");
	for (int i = 0; i < 20 && c->lc; i++)
		sf_loop_turn(c->loop, 5);
	sf_loop_free(c->loop);
	sf_arena_free(&c->arena);
}

static void send_msg(struct client *c, uint16_t type, const void *m)
{
	struct sf_err err;
	if (sf_link_conn_send(c->lc, type, m, &err))
		fail_msg("send %s: %s", sf_msg_name(type), err.msg);
}

static const struct sf_msg *find(struct client *c, uint16_t type, int from)
{
	for (int i = from; i < c->n_got; i++)
		if (c->got[i].type == type)
			return &c->got[i];
	return NULL;
}

struct want_finish {
	uint64_t sid, gid;
};

static bool finished(struct client *c, void *arg)
{
	struct want_finish *w = arg;
	for (int i = 0; i < c->n_got; i++) {
		if (c->got[i].type != SF_MSG_TOKEN_EVENTS)
			continue;
		const struct sf_token_events *te = &c->got[i].u.token_events;
		for (uint32_t j = 0; j < te->n_events; j++)
			if (te->events[j].session_id == w->sid && te->events[j].generation_id == w->gid &&
			    te->events[j].kind == SF_EVENT_FINISH)
				return true;
	}
	return c->closed;
}

/* The tokens of (sid, gid), events de-duplicated by seq, checking there is no gap. */
static size_t tokens_of(struct client *c, uint64_t sid, uint64_t gid, uint32_t *out, uint32_t *fin,
			uint64_t *max_seq)
{
	static uint8_t seen[65536];
	memset(seen, 0, sizeof(seen));
	uint32_t by_seq[65536];
	uint8_t kind[65536];
	uint64_t top = 0;
	*fin = UINT32_MAX - 1;
	for (int i = 0; i < c->n_got; i++) {
		if (c->got[i].type != SF_MSG_TOKEN_EVENTS)
			continue;
		const struct sf_token_events *te = &c->got[i].u.token_events;
		for (uint32_t j = 0; j < te->n_events; j++) {
			const struct sf_token_event *e = &te->events[j];
			if (e->session_id != sid || e->generation_id != gid || e->seq >= 65536)
				continue;
			seen[e->seq] = 1;
			kind[e->seq] = e->kind;
			by_seq[e->seq] = e->kind == SF_EVENT_TOKENS ? e->tokens[0] : e->reason;
			if (e->seq + 1 > top)
				top = e->seq + 1;
		}
	}
	size_t n = 0;
	for (uint64_t s = 0; s < top; s++) {
		assert_true(seen[s]); /* no gap */
		if (kind[s] == SF_EVENT_TOKENS)
			out[n++] = by_seq[s];
		else if (kind[s] == SF_EVENT_FINISH)
			*fin = by_seq[s];
	}
	if (max_seq)
		*max_seq = top ? top - 1 : 0;
	return n;
}

static uint64_t cmd = 1;

static void place(struct client *c, uint64_t sid, uint64_t epoch, const char *prompt, uint32_t lease)
{
	struct sf_session_assign as = { .command_id = cmd++, .session_id = sid, .epoch = epoch,
					.lease_ms = lease, .model = "sim-1", .model_len = 5 };
	send_msg(c, SF_MSG_SESSION_ASSIGN, &as);
	uint32_t toks[512];
	size_t n = strlen(prompt);
	for (size_t i = 0; i < n; i++)
		toks[i] = (uint8_t)prompt[i];
	struct sf_session_append ap = { .command_id = cmd++, .session_id = sid, .epoch = epoch,
					.tokens = toks, .n_tokens = (uint32_t)n };
	send_msg(c, SF_MSG_SESSION_APPEND, &ap);
}

static void gen(struct client *c, uint64_t sid, uint64_t epoch, uint64_t gid, uint32_t max_new)
{
	struct sf_generate g = { .command_id = cmd++, .session_id = sid, .epoch = epoch,
				 .generation_id = gid, .max_new_tokens = max_new };
	send_msg(c, SF_MSG_GENERATE, &g);
}

static void check_stream(struct client *c, const char *prompt, uint64_t sid, uint64_t gid,
			 uint32_t max_new)
{
	struct sf_sim_config sim;
	sf_sim_config_default(&sim);
	uint32_t ctx[512], want[4096], got[4096], wf, gf;
	size_t n_ctx = strlen(prompt), n_want;
	for (size_t i = 0; i < n_ctx; i++)
		ctx[i] = (uint8_t)prompt[i];
	struct sf_sampling smp = { 0 };
	struct sf_err err;
	assert_int_equal(sf_sim_expected(&sim, &smp, ctx, n_ctx, max_new, want, 4096, &n_want, &wf, &err), 0);
	size_t n_got = tokens_of(c, sid, gid, got, &gf, NULL);
	assert_int_equal(n_got, n_want);
	assert_memory_equal(got, want, n_want * 4);
	assert_int_equal(gf, wf);
}

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/sf-noded-wire-%d-XXXXXX", (int)getpid());
	assert_non_null(mkdtemp(dir));
	snprintf(token_path, sizeof(token_path), "%s/token", dir);
	snprintf(blob_dir, sizeof(blob_dir), "%s/blobs", dir);
	FILE *f = fopen(token_path, "w");
	fputs("wire-token\n", f);
	fclose(f);
	chmod(token_path, 0600);
	start_noded(NULL);
	return 0;
}

static int teardown(void **state)
{
	stop_noded();
	char rm[128];
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	return system(rm) == 0 ? 0 : -1;
}

static void handshake_and_a_generation(void **state)
{
	struct client c;
	connect_client(&c, "wire-token");
	assert_true(c.open);
	const struct sf_link_peer *p = sf_link_peer(sf_link_conn_link(c.lc));
	assert_string_equal(p->identity, "wire-node");
	assert_int_equal(p->version, SF_VERSION_MAX);
	assert_true(p->n_digests >= 1);
	place(&c, 1, 1, "hello real node", 0);
	gen(&c, 1, 1, 1, 32);
	struct want_finish w = { 1, 1 };
	assert_true(turn_until(&c, finished, &w, 10000));
	check_stream(&c, "hello real node", 1, 1, 32);
	free_client(&c);
	/* A wrong token is refused with the operator's sentence, and the node lives on. */
	connect_client(&c, "not-the-token");
	assert_true(c.closed);
	assert_int_equal(c.err.code, SF_E_AUTH);
	free_client(&c);
	connect_client(&c, "wire-token");
	assert_true(c.open);
	free_client(&c);
}

/* Twelve links at once, each its own session and generation: at --shards 3 the kernel spreads
 * them over the shards, so most reach the engine through another shard's relay. */
static void many_links_at_once(void **state)
{
	enum { N = 12 };
	static struct client c[N];
	char prompt[N][32];
	for (int i = 0; i < N; i++) {
		connect_client(&c[i], "wire-token");
		assert_true(c[i].open);
		snprintf(prompt[i], sizeof(prompt[i]), "link %d of many", i);
		place(&c[i], 200 + i, 1, prompt[i], 0);
		gen(&c[i], 200 + i, 1, 1, 40);
	}
	for (int i = 0; i < N; i++) {
		struct want_finish w = { 200 + i, 1 };
		assert_true(turn_until(&c[i], finished, &w, 10000));
		check_stream(&c[i], prompt[i], 200 + i, 1, 40);
	}
	for (int i = 0; i < N; i++)
		free_client(&c[i]);
}

static void fencing_across_connections(void **state)
{
	struct client a, b;
	connect_client(&a, "wire-token");
	uint64_t assign_cmd = cmd;
	place(&a, 2, 5, "fenced", 0);
	for (int i = 0; i < 40; i++) /* let a's commands reach the node first */
		sf_loop_turn(a.loop, 5);
	int mark = a.n_got;
	/* A second connection of the same head: an older epoch and a seen command are refused. */
	connect_client(&b, "wire-token");
	struct sf_session_assign old = { .command_id = cmd++, .session_id = 2, .epoch = 4,
					 .model = "sim-1", .model_len = 5 };
	send_msg(&b, SF_MSG_SESSION_ASSIGN, &old);
	struct sf_generate dup = { .command_id = assign_cmd, .session_id = 2, .epoch = 5, .generation_id = 1,
				   .max_new_tokens = 4 };
	send_msg(&b, SF_MSG_GENERATE, &dup);
	int refused = 0;
	for (int t = 0; t < 400 && refused < 2; t++) {
		sf_loop_turn(b.loop, 5);
		refused = 0;
		for (int i = 0; i < b.n_got; i++)
			refused += b.got[i].type == SF_MSG_REFUSED;
	}
	assert_int_equal(refused, 2);
	/* The session is untouched: it still generates on its epoch, over either connection. */
	gen(&b, 2, 5, 1, 8);
	struct want_finish w = { 2, 1 };
	assert_true(turn_until(&b, finished, &w, 10000));
	check_stream(&b, "fenced", 2, 1, 8);
	(void)mark;
	free_client(&a);
	free_client(&b);
}

static bool reconciled(struct client *c, void *arg)
{
	return find(c, SF_MSG_RECONCILE_ACK, 0) != NULL;
}

static void replay_after_a_dropped_connection(void **state)
{
	struct client a;
	connect_client(&a, "wire-token");
	place(&a, 3, 1, "survive the drop", 0);
	gen(&a, 3, 1, 1, 200);
	for (int i = 0; i < 3; i++)
		sf_loop_turn(a.loop, 5);
	/* Drop the connection without a word (as a network failure would). */
	uint32_t first[4096], fin;
	uint64_t top = 0;
	size_t had = tokens_of(&a, 3, 1, first, &fin, &top);
	sf_loop_free(a.loop); /* closes the socket with no goodbye */
	a.loop = NULL;
	a.lc = NULL;
	usleep(300000); /* the node goes on generating with nobody to send to */

	struct client b;
	connect_client(&b, "wire-token");
	/* Carry over what the first connection saw. */
	for (int i = 0; i < a.n_got && b.n_got < MAX_GOT; i++) {
		struct sf_buf buf;
		struct sf_err err;
		sf_buf_init(&buf, 64u << 20);
		if (sf_msg_encode(&buf, a.got[i].type, &a.got[i].u, 3, SF_FRAME_PAYLOAD_MAX, &err) == 0 &&
		    sf_msg_decode(a.got[i].type, sf_buf_head(&buf) + SF_FRAME_HDR_LEN,
				  sf_buf_used(&buf) - SF_FRAME_HDR_LEN, 3, &b.arena, &b.got[b.n_got], &err) == 0)
			b.n_got++;
		sf_buf_free(&buf);
	}
	sf_arena_free(&a.arena);
	struct sf_reconcile_gen rg = { .generation_id = 1, .next_seq = had ? top + 1 : 0 };
	struct sf_reconcile_session rs = { .session_id = 3, .epoch = 1, .gens = &rg, .n_gens = 1 };
	struct sf_reconcile rec = { .sessions = &rs, .n_sessions = 1 };
	send_msg(&b, SF_MSG_RECONCILE, &rec);
	struct want_finish w = { 3, 1 };
	/* The first connection may have seen the FINISH already: wait for the answer too. */
	assert_true(turn_until(&b, reconciled, NULL, 10000));
	assert_true(turn_until(&b, finished, &w, 10000));
	const struct sf_msg *ack = find(&b, SF_MSG_RECONCILE_ACK, 0);
	assert_non_null(ack);
	assert_true(ack->u.reconcile_ack.sessions[0].held);
	/* With the replay, every token came exactly once and the stream is the expected one. */
	check_stream(&b, "survive the drop", 3, 1, 200);
	free_client(&b);
}

static void leases_are_asked_for(void **state)
{
	struct client c;
	connect_client(&c, "wire-token");
	place(&c, 4, 1, "lease", 600);
	struct sf_msg const *renew = NULL;
	for (int i = 0; i < 400 && !(renew = find(&c, SF_MSG_LEASE_RENEW, 0)); i++)
		sf_loop_turn(c.loop, 5);
	assert_non_null(renew);
	assert_int_equal(renew->u.lease_renew.leases[0].session_id, 4);
	/* Refused: the node lets the session go, and a generation on it is refused. */
	struct sf_lease_answer ans = { .session_id = 4, .epoch = 1, .granted = false };
	struct sf_lease_grant lg = { .leases = &ans, .n_leases = 1 };
	send_msg(&c, SF_MSG_LEASE_GRANT, &lg);
	for (int i = 0; i < 40; i++)
		sf_loop_turn(c.loop, 5);
	int mark = c.n_got;
	gen(&c, 4, 1, 1, 5);
	const struct sf_msg *r = NULL;
	for (int i = 0; i < 200 && !(r = find(&c, SF_MSG_REFUSED, mark)); i++)
		sf_loop_turn(c.loop, 5);
	assert_non_null(r);
	assert_non_null(strstr(r->u.refused.reason, "does not hold"));
	free_client(&c);
}

static void requests_and_blobs(void **state)
{
	struct client c;
	connect_client(&c, "wire-token");
	struct sf_tokenize_req tr = { .request_id = 1, .model = "sim-1", .model_len = 5,
				      .mode = SF_TOKENIZE_ENCODE, .text = "<|im_start|>x", .text_len = 13 };
	send_msg(&c, SF_MSG_TOKENIZE_REQ, &tr);
	struct sf_tokenizer_export_req xr = { .request_id = 2, .model = "sim-1", .model_len = 5 };
	send_msg(&c, SF_MSG_TOKENIZER_EXPORT_REQ, &xr);
	uint8_t blob[4000];
	for (int i = 0; i < 4000; i++)
		blob[i] = (uint8_t)i;
	uint8_t sha[32];
	crypto_hash_sha256(sha, blob, sizeof(blob));
	struct sf_xfer_begin xb = { .transfer_id = 9, .total_len = sizeof(blob) };
	memcpy(xb.sha256, sha, 32);
	send_msg(&c, SF_MSG_XFER_BEGIN, &xb);
	for (int at = 0; at < 4000; at += 1000) {
		struct sf_xfer_chunk ch = { .transfer_id = 9, .offset = (uint64_t)at, .data = blob + at,
					    .data_len = 1000 };
		send_msg(&c, SF_MSG_XFER_CHUNK, &ch);
	}
	struct sf_xfer_end xe = { .transfer_id = 9 };
	send_msg(&c, SF_MSG_XFER_END, &xe);
	struct sf_blob_ref ref;
	memcpy(ref.sha256, sha, 32);
	struct sf_state_op_req op = { .request_id = 3, .op = "transcribe", .op_len = 10,
				      .blobs = &ref, .n_blobs = 1 };
	send_msg(&c, SF_MSG_STATE_OP_REQ, &op);
	const struct sf_msg *m = NULL;
	for (int i = 0; i < 1000 && !(m = find(&c, SF_MSG_STATE_OP_RESP, 0)); i++)
		sf_loop_turn(c.loop, 5);
	assert_non_null(m);
	assert_true(m->u.state_op_resp.ok);
	assert_non_null(find(&c, SF_MSG_STATE_OP_SEGMENT, 0));
	m = find(&c, SF_MSG_TOKENIZE_RESP, 0);
	assert_non_null(m);
	assert_int_equal(m->u.tokenize_resp.n_tokens, 2);
	m = find(&c, SF_MSG_TOKENIZER_EXPORT, 0);
	assert_non_null(m);
	assert_int_equal(m->u.tokenizer_export.n_vocab, SF_SIM_VOCAB);
	m = find(&c, SF_MSG_XFER_RESULT, 0);
	assert_non_null(m);
	assert_true(m->u.xfer_result.ok);
	/* The blob is on disk under its hash. */
	char hex[65], path[256];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", sha[i]);
	snprintf(path, sizeof(path), "%s/%s", blob_dir, hex);
	assert_int_equal(access(path, F_OK), 0);
	free_client(&c);
}

static void bad_frames_end_one_link_only(void **state)
{
	/* A raw socket that completes nothing sensible: garbage after a plain preamble. */
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	assert_int_equal(write(fd, junk, sizeof(junk) - 1), (ssize_t)(sizeof(junk) - 1));
	char buf[64];
	ssize_t r = read(fd, buf, sizeof(buf)); /* the node closes on us */
	assert_true(r <= 8);
	close(fd);
	/* And serves the next head as before. */
	struct client c;
	connect_client(&c, "wire-token");
	assert_true(c.open);
	free_client(&c);
	assert_int_equal(waitpid(noded_pid, NULL, WNOHANG), 0); /* still running */
}

/* The rest of the session and generation messages over the wire: options with logprobs,
 * cancel, revoke, staged forward, a blob with the wrong hash, status. */
static void every_other_message(void **state)
{
	stop_noded();
	start_noded("--sim-tokens-per-s=100"); /* paced, so the cancel lands mid-generation */
	struct client c;
	connect_client(&c, "wire-token");
	place(&c, 6, 1, "options", 0);
	struct sf_generate_opts o = { .session_id = 6, .generation_id = 1, .logprobs = true,
				      .top_logprobs = 3 };
	send_msg(&c, SF_MSG_GENERATE_OPTS, &o);
	gen(&c, 6, 1, 1, 6);
	struct want_finish w = { 6, 1 };
	assert_true(turn_until(&c, finished, &w, 10000));
	check_stream(&c, "options", 6, 1, 6);
	int lps = 0;
	for (int i = 0; i < c.n_got; i++)
		if (c.got[i].type == SF_MSG_TOKEN_EVENTS)
			for (uint32_t j = 0; j < c.got[i].u.token_events.n_events; j++) {
				const struct sf_token_event *e = &c.got[i].u.token_events.events[j];
				if (e->kind == SF_EVENT_LOGPROBS) {
					assert_int_equal(e->logprobs[0].n_top, 3);
					assert_true(e->logprobs[0].logprob <= 0);
					lps++;
				}
			}
	assert_int_equal(lps, 6);
	/* Cancel a long generation: it finishes CANCELLED. */
	gen(&c, 6, 1, 2, 0);
	for (int i = 0; i < 10; i++)
		sf_loop_turn(c.loop, 5);
	struct sf_cancel cn = { .command_id = cmd++, .session_id = 6, .generation_id = 2 };
	send_msg(&c, SF_MSG_CANCEL, &cn);
	w.gid = 2;
	assert_true(turn_until(&c, finished, &w, 10000));
	uint32_t toks[4096], fin;
	tokens_of(&c, 6, 2, toks, &fin, NULL);
	assert_int_equal(fin, SF_FINISH_CANCELLED);
	/* Revoke: the session is gone; a generation on it is refused. */
	struct sf_session_revoke rv = { .command_id = cmd++, .session_id = 6, .epoch = 1 };
	send_msg(&c, SF_MSG_SESSION_REVOKE, &rv);
	int mark = c.n_got;
	gen(&c, 6, 1, 3, 4);
	const struct sf_msg *r = NULL;
	for (int i = 0; i < 400 && !(r = find(&c, SF_MSG_REFUSED, mark)); i++)
		sf_loop_turn(c.loop, 5);
	assert_non_null(r);
	/* A staged forward over the whole stack gives a token. */
	uint32_t ctx[2] = { 'h', 'i' };
	struct sf_stage_forward_req sf = { .request_id = 11, .tokens = ctx, .n_tokens = 2,
					   .start_layer = 0, .end_layer = 8 };
	send_msg(&c, SF_MSG_STAGE_FORWARD_REQ, &sf);
	const struct sf_msg *m = NULL;
	for (int i = 0; i < 400 && !(m = find(&c, SF_MSG_STAGE_FORWARD_RESP, 0)); i++)
		sf_loop_turn(c.loop, 5);
	assert_non_null(m);
	assert_int_equal(m->u.stage_forward_resp.kind, SF_STAGE_TOKEN);
	/* A blob whose bytes do not match its hash is refused, and not kept. */
	uint8_t bytes[100] = { 9 };
	struct sf_xfer_begin xb = { .transfer_id = 77, .total_len = 100, .sha256 = { 0xee } };
	send_msg(&c, SF_MSG_XFER_BEGIN, &xb);
	struct sf_xfer_chunk ch = { .transfer_id = 77, .data = bytes, .data_len = 100 };
	send_msg(&c, SF_MSG_XFER_CHUNK, &ch);
	struct sf_xfer_end xe = { .transfer_id = 77 };
	send_msg(&c, SF_MSG_XFER_END, &xe);
	for (int i = 0; i < 400 && !(m = find(&c, SF_MSG_XFER_RESULT, 0)); i++)
		sf_loop_turn(c.loop, 5);
	assert_non_null(m);
	assert_false(m->u.xfer_result.ok);
	assert_non_null(strstr(m->u.xfer_result.reason, "refused and deleted"));
	/* Status reports came with the node's capacity and model. */
	m = find(&c, SF_MSG_NODE_STATUS, 0);
	assert_non_null(m);
	assert_int_equal(m->u.node_status.n_models, 1);
	assert_string_equal(m->u.node_status.models[0].name, "sim-1");
	free_client(&c);
}

/* A lease that is never renewed runs out: the generation ends with the expired reason, and
 * what came before is the expected stream's beginning. The node is paced (50 tokens/s) so
 * the lease (400 ms) ends long before the engine would. */
static void a_lease_runs_out(void **state)
{
	stop_noded();
	start_noded("--sim-tokens-per-s=50");
	struct sf_sim_config sim;
	sf_sim_config_default(&sim);
	uint32_t ctx[16], want[64], got[8192], wf, fin;
	size_t n_want;
	const char *prompt = "expire";
	for (size_t i = 0; i < strlen(prompt); i++)
		ctx[i] = (uint8_t)prompt[i];
	struct sf_sampling smp = { 0 };
	struct sf_err err;
	assert_int_equal(sf_sim_expected(&sim, &smp, ctx, strlen(prompt), 60, want, 64, &n_want, &wf, &err), 0);
	assert_int_equal(wf, SF_FINISH_LENGTH); /* the engine alone would go past 60 tokens */

	struct client c;
	connect_client(&c, "wire-token");
	place(&c, 8, 1, prompt, 400);
	gen(&c, 8, 1, 1, 0); /* until stopped */
	struct want_finish w = { 8, 1 };
	assert_true(turn_until(&c, finished, &w, 10000));
	size_t n = tokens_of(&c, 8, 1, got, &fin, NULL);
	assert_int_equal(fin, SF_FINISH_EXPIRED);
	assert_true(n > 0 && n < 60);
	assert_memory_equal(got, want, n * sizeof(uint32_t));
	free_client(&c);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc && i <= 4; i++)
		more_args[i - 1] = argv[i];
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(handshake_and_a_generation, setup, teardown),
		cmocka_unit_test_setup_teardown(many_links_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(fencing_across_connections, setup, teardown),
		cmocka_unit_test_setup_teardown(replay_after_a_dropped_connection, setup, teardown),
		cmocka_unit_test_setup_teardown(leases_are_asked_for, setup, teardown),
		cmocka_unit_test_setup_teardown(requests_and_blobs, setup, teardown),
		cmocka_unit_test_setup_teardown(bad_frames_end_one_link_only, setup, teardown),
		cmocka_unit_test_setup_teardown(every_other_message, setup, teardown),
		cmocka_unit_test_setup_teardown(a_lease_runs_out, setup, teardown),
	};
	return cmocka_run_group_tests_name("noded_wire", tests, NULL, NULL);
}
