/* Fleet links over real loopback sockets on the event loop, on each backend. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/link_conn.h"

struct side {
	int opened, closed, msgs;
	struct sf_err err;
	uint64_t last_seq;
	struct sf_link_conn *lc;
};

static struct side head, node;
static struct sf_link_config node_cfg;

static void on_open(struct sf_link_conn *lc)
{
	struct side *s = sf_link_conn_user(lc);
	s->opened++;
	if (s == &head) {
		struct sf_err err;
		for (uint64_t i = 0; i < 1000; i++) {
			struct sf_cancel c = { .command_id = i, .session_id = 7, .generation_id = 9 };
			assert_int_equal(sf_link_conn_send(lc, SF_MSG_CANCEL, &c, &err), 0);
		}
	}
}

static void on_msg(struct sf_link_conn *lc, const struct sf_msg *m)
{
	struct side *s = sf_link_conn_user(lc);
	s->msgs++;
	if (s == &node) {
		assert_int_equal(m->type, SF_MSG_CANCEL);
		assert_int_equal(m->u.cancel.command_id, (uint64_t)(s->msgs - 1)); /* in order */
		/* Answer each with a token event. */
		uint32_t t = (uint32_t)m->u.cancel.command_id;
		struct sf_token_event ev = { .session_id = 7, .seq = m->u.cancel.command_id,
					     .kind = SF_EVENT_TOKENS, .tokens = &t, .n_tokens = 1 };
		struct sf_token_events te = { .events = &ev, .n_events = 1 };
		struct sf_err err;
		assert_int_equal(sf_link_conn_send(lc, SF_MSG_TOKEN_EVENTS, &te, &err), 0);
	} else {
		assert_int_equal(m->type, SF_MSG_TOKEN_EVENTS);
		s->last_seq = m->u.token_events.events[0].seq;
	}
}

static void on_closed(struct sf_link_conn *lc, const struct sf_err *err)
{
	struct side *s = sf_link_conn_user(lc);
	s->closed++;
	s->err = *err;
	s->lc = NULL;
}

static const struct sf_link_conn_ops ops = { on_open, on_msg, on_closed };

static void accepted(struct sf_loop *loop, int fd, void *arg)
{
	struct sf_err err;
	node.lc = sf_link_conn_accept(loop, fd, &node_cfg, &ops, &node, &err);
	assert_non_null(node.lc);
}

static int listen_any(struct sockaddr_in *addr)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	*addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	bind(fd, (struct sockaddr *)addr, sizeof(*addr));
	listen(fd, 64);
	socklen_t len = sizeof(*addr);
	getsockname(fd, (struct sockaddr *)addr, &len);
	return fd;
}

static void run(struct sf_loop *loop, bool (*done)(void))
{
	for (int i = 0; i < 3000 && !done(); i++)
		assert_int_equal(sf_loop_turn(loop, 10), 0);
}

static bool all_answered(void) { return head.msgs == 1000 || head.closed || node.closed; }
static bool head_closed(void) { return head.closed > 0; }
static bool both_closed(void) { return head.closed > 0 && node.closed > 0; }

static void one_run(enum sf_io_kind kind, const char *htoken, const char *ntoken)
{
	struct sf_loop *loop;
	struct sf_err err;
	struct sf_loop_config cfg = { .io = kind, .quiet = true };
	assert_int_equal(sf_loop_new(&loop, &cfg, &err), 0);
	memset(&head, 0, sizeof(head));
	memset(&node, 0, sizeof(node));
	node_cfg = (struct sf_link_config){ .role = SF_ROLE_NODE, .identity = "n1" };
	if (ntoken) {
		node_cfg.token = (const uint8_t *)ntoken;
		node_cfg.token_len = strlen(ntoken);
	}
	struct sf_link_config hcfg = { .role = SF_ROLE_HEAD, .identity = "h1" };
	if (htoken) {
		hcfg.token = (const uint8_t *)htoken;
		hcfg.token_len = strlen(htoken);
	}
	struct sockaddr_in addr;
	int lfd = listen_any(&addr);
	assert_int_equal(sf_loop_listen(loop, lfd, accepted, NULL), 0);
	head.lc = sf_link_conn_dial(loop, (struct sockaddr *)&addr, sizeof(addr), 5000, &hcfg, &ops,
				    &head, &err);
	assert_non_null(head.lc);
	bool same = (htoken == NULL) == (ntoken == NULL) && (!htoken || !strcmp(htoken, ntoken));
	if (same) {
		run(loop, all_answered);
		assert_int_equal(head.opened, 1);
		assert_int_equal(node.opened, 1);
		assert_int_equal(head.msgs, 1000);
		assert_int_equal(head.last_seq, 999);
		sf_link_conn_close(head.lc, 0, "test done");
		run(loop, both_closed);
		assert_int_equal(node.err.code, SF_E_GOODBYE);
		assert_non_null(strstr(node.err.msg, "test done"));
	} else {
		run(loop, both_closed);
		assert_int_equal(head.opened, 0);
		assert_int_equal(head.closed, 1);
		assert_true(head.err.code == SF_E_AUTH || head.err.code == SF_E_MODE);
	}
	sf_loop_free(loop);
}

static void links_over_real_sockets(void **state)
{
	enum sf_io_kind kinds[] = { SF_IO_URING, SF_IO_EPOLL };
	for (int k = 0; k < 2; k++) {
		one_run(kinds[k], NULL, NULL);
		one_run(kinds[k], "tok", "tok");
		one_run(kinds[k], "tok", "other");
		assert_string_equal(head.err.msg,
				    "refused the fleet token: --fleet-auth and the node's --auth-file differ");
		one_run(kinds[k], NULL, "tok");
		one_run(kinds[k], "tok", NULL);
	}
}

static void unreachable_names_the_os_error(void **state)
{
	enum sf_io_kind kinds[] = { SF_IO_URING, SF_IO_EPOLL };
	for (int k = 0; k < 2; k++) {
		struct sf_loop *loop;
		struct sf_err err;
		struct sf_loop_config cfg = { .io = kinds[k], .quiet = true };
		assert_int_equal(sf_loop_new(&loop, &cfg, &err), 0);
		struct sockaddr_in addr;
		close(listen_any(&addr));
		memset(&head, 0, sizeof(head));
		struct sf_link_config hcfg = { .role = SF_ROLE_HEAD };
		head.lc = sf_link_conn_dial(loop, (struct sockaddr *)&addr, sizeof(addr), 5000, &hcfg,
					    &ops, &head, &err);
		run(loop, head_closed);
		assert_int_equal(head.closed, 1);
		assert_string_equal(head.err.msg, "unreachable (Connection refused)");
		sf_loop_free(loop);
	}
}

/* A link that holds more than its connection may take at once sends the rest as the
 * connection drains, not at its next timer: heartbeats are a minute apart here. */
static int big_got;

static void big_msg(struct sf_link_conn *lc, const struct sf_msg *m)
{
	if (m->type == SF_MSG_XFER_CHUNK)
		big_got++;
}

static void big_open(struct sf_link_conn *lc) { ((struct side *)sf_link_conn_user(lc))->opened++; }

static const struct sf_link_conn_ops big_ops = { big_open, big_msg, on_closed };

static void big_accepted(struct sf_loop *loop, int fd, void *arg)
{
	struct sf_err err;
	node.lc = sf_link_conn_accept(loop, fd, &node_cfg, &big_ops, &node, &err);
}

static bool all_chunks(void) { return big_got == 32 || head.closed || node.closed; }
static bool head_open(void) { return head.opened > 0 || head.closed; }

static void the_rest_goes_as_the_connection_drains(void **state)
{
	enum sf_io_kind kinds[] = { SF_IO_URING, SF_IO_EPOLL };
	for (int k = 0; k < 2; k++) {
		struct sf_loop *loop;
		struct sf_err err;
		struct sf_loop_config cfg = { .io = kinds[k], .quiet = true, .conn_tx_limit = 64u << 10 };
		assert_int_equal(sf_loop_new(&loop, &cfg, &err), 0);
		memset(&head, 0, sizeof(head));
		memset(&node, 0, sizeof(node));
		big_got = 0;
		node_cfg = (struct sf_link_config){ .role = SF_ROLE_NODE, .heartbeat_ms = 60000,
						    .silence_ms = UINT32_MAX };
		struct sf_link_config hcfg = { .role = SF_ROLE_HEAD, .heartbeat_ms = 60000,
					       .silence_ms = UINT32_MAX };
		struct sockaddr_in addr;
		int lfd = listen_any(&addr);
		assert_int_equal(sf_loop_listen(loop, lfd, big_accepted, NULL), 0);
		head.lc = sf_link_conn_dial(loop, (struct sockaddr *)&addr, sizeof(addr), 5000, &hcfg,
					    &big_ops, &head, &err);
		run(loop, head_open);
		assert_int_equal(head.opened, 1);
		static uint8_t data[256 << 10];
		for (int i = 0; i < 32; i++) {
			struct sf_xfer_chunk c = { .transfer_id = 1, .offset = (uint64_t)i * sizeof(data),
						   .data = data, .data_len = sizeof(data) };
			assert_int_equal(sf_link_conn_send(head.lc, SF_MSG_XFER_CHUNK, &c, &err), 0);
		}
		run(loop, all_chunks);
		if (big_got != 32) {
			const uint8_t *p;
			fprintf(stderr, "%s: got %d, head closed %d node closed %d (%s), link tx %zu\n",
				sf_io_kind_name(kinds[k]), big_got, head.closed, node.closed, node.err.msg,
				head.lc ? sf_link_tx(sf_link_conn_link(head.lc), &p) : 0);
		}
		assert_int_equal(big_got, 32);
		sf_loop_free(loop);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(links_over_real_sockets),
		cmocka_unit_test(unreachable_names_the_os_error),
		cmocka_unit_test(the_rest_goes_as_the_connection_drains),
	};
	return cmocka_run_group_tests_name("link_conn", tests, NULL, NULL);
}
