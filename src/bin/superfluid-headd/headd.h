/* The daemon's state: one event loop (one shard) running one sf_head, a link to each --fleet
 * node and the admin socket's clients. Everything here is touched by the loop's thread only. */
#ifndef HEADD_HEADD_H
#define HEADD_HEADD_H

#include <stdbool.h>
#include <stdint.h>

#include <superfluid/token_file.h>
#include <superfluid/wire.h>

#include "head/head.h"
#include "io/link_conn.h"
#include "io/loop.h"

#include "api.h"
#include "options.h"

#define HEADD_MAX_NODES 64
#define HEADD_CONNECT_MS 5000
#define HEADD_BACKOFF_MIN_MS 100
#define HEADD_BACKOFF_MAX_MS 10000
#define HEADD_SHUTDOWN_MS 1500
#define HEADD_LINE_MAX 65536 /* an admin request line at most */

/* One --fleet node and its one link. */
struct headd_node {
	struct headd *d;
	uint32_t index;        /* the head's node index */
	char addr[128];        /* HOST:PORT as given */
	struct sf_link_conn *lc;
	uint64_t link_id;      /* the current attempt or link; 0 while waiting to dial */
	bool open;
	bool joined;           /* it dialed in (--fleet-listen): never dialed, waited for */
	bool closing;          /* said goodbye at shutdown; lc lives until it is sent */
	uint64_t drop_link;    /* the head gave up on this link: closed at the next tick */
	uint32_t backoff_ms;
	uint64_t timer;
	unsigned failures;     /* attempts in a row that did not open */
	/* What the last open link said, kept for STATUS after it closes. */
	char identity[SF_MAX_NAME];
	uint32_t version;
	struct sf_capacity cap;
};

/* One admin socket connection. */
struct headd_client {
	struct headd *d;
	struct sf_conn *conn;  /* NULL once closed */
	uint64_t session_id;   /* 0: none */
	uint64_t generation_id;
	bool ended;            /* FINISH or ERROR went out */
	bool answered;         /* took its one request */
	size_t line_len;
	struct headd_client *next;
};

struct headd {
	const struct headd_opts *opts;
	struct sf_loop *loop;
	struct sf_head *head;
	char identity[SF_MAX_NAME];
	uint8_t token[SF_TOKEN_MAX];
	size_t token_len;
	struct headd_node nodes[HEADD_MAX_NODES];
	uint32_t n_nodes;
	uint64_t next_link_id, next_session_id;
	struct headd_client *clients;
	uint64_t head_timer, head_timer_at;
	uint64_t rng;
	bool stopping;
	struct headd_api api;
};

/* fleet_links.c */
int headd_nodes_add(struct headd *d);   /* every --fleet node; 0 or -1 (logged) */
void headd_nodes_start(struct headd *d); /* the first dial of each */
void headd_nodes_drop_pending(struct headd *d); /* closes links the head gave up on */
void headd_nodes_goodbye_all(struct headd *d, const char *reason);
uint32_t headd_nodes_busy(const struct headd *d);
void headd_nodes_stop(struct headd *d); /* cancels the redial timers */
/* The link config every fleet link uses, dialed or joined. */
void headd_link_config(const struct headd *d, struct sf_link_config *cfg);
/* A node's link opened / brought a message / closed (the link_conn callbacks' bodies). */
void headd_node_opened(struct headd_node *n, struct sf_link_conn *lc);
void headd_node_msg(struct sf_link_conn *lc, const struct sf_msg *m);
void headd_node_closed(struct headd_node *n, struct sf_link_conn *lc, const struct sf_err *err);

/* fleet_join.c: nodes that dial in (--fleet-listen). 0 or -1 (logged). */
int headd_join_listen(struct headd *d);
extern const struct sf_head_io headd_head_io_base;

/* admin.c: the admin socket and its connections */
int headd_admin_listen(struct headd *d);         /* 0 or -1 (logged) */
void headd_client_write(struct headd_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void headd_client_end(struct headd_client *c);   /* closes after what was written */
void headd_clients_sweep(struct headd *d);       /* frees closed clients, ending their sessions */
void headd_clients_close_all(struct headd *d);

/* admin_cmds.c: the requests and the head's events for them */
void headd_client_request(struct headd_client *c, char *line);
void headd_head_event(void *arg, const struct sf_head_event *ev);

/* head_tick.c: ticks the head and re-arms its timer; true when more work is due at once. */
bool headd_tick(struct headd *d);

#endif
