/* A shard of the daemon: one event loop on a thread of its own with its share of the head
 * links (it accepts from its socket of the --listen group). Shard 0 also runs the engine, the
 * node machine and its session table, the blob store and --join: the other shards' links
 * reach it as messages (relay.c). A struct noded is touched by its own shard's thread only;
 * what the shards share is in struct noded_proc (noded_proc.c). */
#ifndef NODED_NODED_H
#define NODED_NODED_H

#include <stdbool.h>
#include <stdint.h>

#include <superfluid/engine.h>
#include <superfluid/token_file.h>
#include <superfluid/wire.h>

#include "io/link_conn.h"
#include "io/loop.h"
#include "io/shards.h"
#include "node/blob_store.h"
#include "node/node.h"

#include "link_table.h"
#include "noded_opts.h"

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

struct noded_proc;
struct noded_msg;
struct sfd_jobs;

struct noded {
	const struct noded_opts *opts;
	struct noded_proc *proc;
	unsigned shard, n_shards;
	struct sf_loop *loop;
	/* Shard 0's; NULL on the others. */
	struct sf_engine *engine;
	struct sf_node *node;
	struct sf_blob_store *blobs; /* --blob-dir; the blob thread writes and maps it */
	struct sfd_jobs *worker;     /* the engine's thread (gguf), or NULL: steps run inline */
	struct sfd_jobs *blob_worker; /* the blob store's file work (job_thread.h) */
	struct sf_arena relay_arena; /* the other shards' frames decoded into it, one at a time */
	struct sf_buf relay_buf;     /* a frame encoded for another shard (relay.c) */
	char identity[SF_MAX_NAME];
	uint8_t token[SF_TOKEN_MAX]; /* for links made from now on (SIGHUP sends a new one) */
	size_t token_len;
	/* This shard's links, and on shard 0 the other shards' open links too (remote). */
	struct link_table links;
	uint32_t n_local, max_local; /* every link of this shard; open links at most */
	/* Accepted links still in their handshake (link_limits.c), oldest first. */
	struct noded_link *hs_head, *hs_tail;
	uint32_t n_handshaking, max_handshakes, max_handshakes_per_addr;
	uint64_t hs_evicted, hs_refused; /* closed to make room; turned away */
	struct sfd_log_rate faillog; /* handshake failures: one line a second */
	uint32_t n_paused;           /* links this shard stopped reading (relay.c) */
	uint64_t next_link_id;       /* ids are next * n_shards + shard: the shard is id % n */
	int listen_fd;               /* this shard's socket of the --listen group, or -1 */
	struct noded_join join;
	uint64_t node_timer, node_timer_at;
	bool stopping;
};

/* noded_proc.c: the process of --shards loops. */
int noded_proc_main(const struct noded_opts *o, const char *identity, const uint8_t *token,
		    size_t token_len);
/* Hands m to shard k; 0, or -1 (m not taken) when the process stops or k's inbox is full. */
int noded_proc_send(struct noded *d, unsigned k, struct noded_msg *m);
bool noded_proc_stopping(const struct noded *d);
/* A node of n shards on loops the caller makes and turns (the simulator): no threads, no
 * signals; shard k listens on listen_fds[k] (or -1), and what the other shards send it waits
 * in its inbox until noded_solo_inbox hands it over. The caller runs noded_shard_start on
 * each shard (0 first: it makes the engine), noded_shard_begin, then noded_shard_turn and
 * noded_solo_inbox, and at the end frees the loops, runs noded_shard_fini on each and
 * noded_solo_free. NULL without memory or for n out of 1..SF_SHARDS_MAX. */
struct noded_proc *noded_solo_new(const struct noded_opts *o, unsigned n, const char *identity,
				  const int *listen_fds, const uint8_t *token, size_t token_len);
struct noded *noded_solo_shard(struct noded_proc *p, unsigned k);
/* Hands shard k what waits in its inbox; true when there was any. */
bool noded_solo_inbox(struct noded_proc *p, unsigned k);
/* Frees the process and what its inboxes still hold (after every shard's noded_shard_fini). */
void noded_solo_free(struct noded_proc *p);
/* What HELLO_ACK says on any shard: the engine's model, and the node's capacity as shard 0
 * last published it (noded_proc_publish, after each of its ticks). */
const struct sf_model_info *noded_proc_model(const struct noded *d);
/* Its full tokenizer digest (one entry, sf_link_config.tokenizer_full; 0: none). */
const uint64_t *noded_proc_tokenizer_full(const struct noded *d);
void noded_proc_capacity(struct noded *d, struct sf_capacity *out);
void noded_proc_publish(struct noded *d);
void noded_proc_alive(struct noded *d, uint64_t now);

/* noded_shard.c: one shard's life on its own thread. */
int noded_shard_start(struct noded *d, struct sf_loop *loop); /* 0 or an exit status */
void noded_shard_run(struct noded *d);      /* until the process stops */
void noded_shard_begin(struct noded *d);    /* what the run starts with: the --join dial */
/* One turn of the loop and the node's work after it (what noded_shard_run repeats); *due in:
 * work was due at once, out: more is. 0, or -1 when the loop failed (logged). */
int noded_shard_turn(struct noded *d, bool *due);
void noded_shard_goodbye(struct noded *d);  /* GOODBYE on its links, a moment to send them */
void noded_shard_fini(struct noded *d);     /* after its loop is freed */
void noded_shard_msg(struct noded *d, struct noded_msg *m, bool stopping); /* inbox; frees m */

/* node_links.c */
int noded_links_init(struct noded *d);  /* the table; 0 or -1 */
int noded_listen(struct noded *d);      /* --listen; 0 or -1 (logged) */
void noded_links_fini(struct noded *d);
/* The link with id on this shard's table (shard 0: the other shards' open ones too). */
struct noded_link *noded_link_find(struct noded *d, uint64_t id);
/* A new link over an accepted socket (kind LINK_ACCEPTED) or a dial to addr. */
struct noded_link *noded_link_accept(struct noded *d, int fd, const char *where);
struct noded_link *noded_link_dial(struct noded *d, enum noded_link_kind kind, const char *addr,
				   struct sf_err *err);
/* link_limits.c: links still in their handshake have a bound of their own, overall and per
 * peer address, so that a port full of connections that never finish keeps no head out. */
/* Room for a new connection from addr (no port): closes the oldest unfinished handshake
 * (of addr when its bound is reached); false (logged at most once a second) when none can
 * go and every open link is taken. */
bool noded_link_admit(struct noded *d, const char *addr);
void noded_hs_add(struct noded *d, struct noded_link *l);    /* accepted: handshaking */
void noded_hs_remove(struct noded *d, struct noded_link *l); /* opened, or gone */
/* Logs a link that ended before it opened: the first at once, then one line a second
 * saying how many more. */
void noded_hs_failed_log(struct noded *d, const char *line);
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
