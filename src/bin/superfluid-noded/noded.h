/* The daemon's state: one event loop (one shard) running the node machine, the engine and
 * every head link. Everything here is touched by the loop's thread only. */
#ifndef NODED_NODED_H
#define NODED_NODED_H

#include <stdbool.h>
#include <stdint.h>

#include <superfluid/engine.h>
#include <superfluid/token_file.h>
#include <superfluid/wire.h>

#include "io/link_conn.h"
#include "io/loop.h"
#include "node/blob_store.h"
#include "node/node.h"

#include "link_table.h"
#include "options.h"

#define NODED_MAX_LINKS 1024       /* head links at once; more are turned away */
#define NODED_CONNECT_MS 5000      /* the join dial's connect limit */
#define NODED_BACKOFF_MIN_MS 100
#define NODED_BACKOFF_MAX_MS 10000
#define NODED_SHUTDOWN_MS 1500     /* goodbyes flush within this, well inside 2 s */

/* --join: the one link this node keeps dialing. */
struct noded_join {
	uint64_t link_id;   /* the current attempt or link; 0 while waiting to dial again */
	uint32_t backoff_ms;
	uint64_t timer;
	unsigned failures;  /* attempts in a row that did not open */
};

struct noded {
	const struct noded_opts *opts;
	struct sf_loop *loop;
	struct sf_engine *engine;
	struct sf_node *node;
	struct sf_blob_store *blobs; /* --blob-dir; the node machine writes and reads it */
	struct sf_model_info model; /* what HELLO_ACK says; name points into the engine */
	char identity[SF_MAX_NAME];
	uint8_t token[SF_TOKEN_MAX];
	size_t token_len;
	struct link_table links;
	uint64_t next_link_id;
	struct noded_join join;
	uint64_t node_timer, node_timer_at;
	bool stopping;
};

/* node_links.c */
int noded_links_init(struct noded *d);  /* the table; 0 or -1 */
int noded_listen(struct noded *d);      /* --listen; 0 or -1 (logged) */
void noded_links_fini(struct noded *d);
/* A new link over an accepted socket (kind LINK_ACCEPTED) or a dial to addr. */
struct noded_link *noded_link_accept(struct noded *d, int fd, const char *where);
struct noded_link *noded_link_dial(struct noded *d, enum noded_link_kind kind, const char *addr,
				   struct sf_err *err);
/* Says GOODBYE on every open link (links still shaking hands have none to say). */
void noded_links_goodbye_all(struct noded *d, const char *reason);
/* Connections still busy beyond the links shaking hands: goodbyes still going out. */
uint32_t noded_links_busy(const struct noded *d);
extern const struct sf_node_io noded_node_io;

/* node_join.c */
void noded_join_start(struct noded *d);
void noded_join_opened(struct noded *d);
/* The join link ended (was_open: it had opened, so the drop is news, not a failure). */
void noded_join_lost(struct noded *d, bool was_open, const char *why);
void noded_join_stop(struct noded *d);
void noded_control_dial(struct noded *d, const struct noded_link *asked_on, uint64_t request_id);

/* node_tick.c: ticks the node and re-arms its timer; true when more work is due at once. */
bool noded_tick(struct noded *d);

#endif
