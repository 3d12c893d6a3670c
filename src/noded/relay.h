/* The node's links on shards other than 0: the link's shard runs the handshake, sealing and
 * framing, and shard 0 the node machine. What crosses between them (through io/shards'
 * inboxes) is the link opening, each message the head sent as one frame encoded again after
 * it was decoded and checked, the link closing, and each frame the node machine sends. A link
 * lives on one shard, so its frames stay in order each way. */
#ifndef NODED_RELAY_H
#define NODED_RELAY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/link.h>

#include "link_table.h"

enum noded_msg_kind {
	NODED_MSG_WAKE = 0,        /* nothing: wakes a shard to see the process stop */
	NODED_MSG_LINK_OPEN = 1,   /* to shard 0: a link opened (version, peer, where, relay) */
	NODED_MSG_LINK_FRAME = 2,  /* to shard 0: a frame the head sent on the link */
	NODED_MSG_LINK_CLOSED = 3, /* to shard 0: the link ended */
	NODED_MSG_SEND = 4,        /* to the link's shard: a frame the node machine sends */
	NODED_MSG_TOKEN = 5,       /* to every shard: the token for links made from now on */
	NODED_MSG_RESUME = 6,      /* to the link's shard: shard 0 caught up, read the link again */
};

/* A link's frames waiting for shard 0, in bytes: past HIGH its shard stops reading the link
 * (TCP then holds the head back, as one loop doing both would), below LOW it reads again.
 * Without this a head's blob would pile up in shard 0's inbox as fast as the network goes. */
#define NODED_RELAY_HIGH (16u << 20)
#define NODED_RELAY_LOW (4u << 20)

/* Shared by a link's two sides: what shard 0 has sent and the link's shard has not yet sent
 * on, so the node machine can pace itself by it (sf_node_io.unsent), and what the link's
 * shard has passed to shard 0 and shard 0 has not yet taken. Freed by the last of the two to
 * let go. */
struct noded_relay {
	atomic_uint refs;
	_Atomic size_t backlog; /* frames in the inbox, not yet handed to the link */
	_Atomic size_t wire;    /* what the link and its connection still held when last seen */
	_Atomic size_t inbound; /* the head's frames in shard 0's inbox */
	atomic_bool paused;     /* the link's shard stopped reading it (inbound past HIGH) */
	atomic_bool resume_asked; /* shard 0 sent RESUME and it has not been taken yet */
};

struct noded_msg {
	enum noded_msg_kind kind;
	struct noded_msg *next;    /* in a solo process's inbox (noded_solo_new) */
	uint64_t link_id;
	/* LINK_OPEN */
	uint32_t version;
	enum noded_link_kind link_kind;
	struct noded_relay *relay; /* a reference, shard 0's once it takes the message */
	char peer[64], where[128];
	/* LINK_FRAME and SEND: one frame; TOKEN: the token */
	size_t len;
	uint8_t data[];
};

struct noded;

/* On the link's shard (not 0): its link opened, a message came, the link ended. */
void noded_relay_opened(struct noded *d, struct noded_link *l);
void noded_relay_msg(struct noded *d, struct noded_link *l, const struct sf_msg *m);
void noded_relay_closed(struct noded *d, struct noded_link *l);

/* On shard 0: sends a message on another shard's link. 0 or an sf_code, err set. */
int noded_relay_send(struct noded *d, struct noded_link *l, uint16_t type, const void *msg,
		     struct sf_err *err);
/* On shard 0: bytes sent on another shard's link not yet handed to the kernel. */
size_t noded_relay_unsent(const struct noded_link *l);

/* A message from another shard, on this shard's thread; frees m. Stopping: lets go of what
 * it carries and does nothing more. */
void noded_relay_take(struct noded *d, struct noded_msg *m, bool stopping);

void noded_relay_unref(struct noded_relay *r);

/* On a link's shard, each tick while any of its links is paused: reads again those shard 0
 * caught up with (the RESUME message is the quick way; this catches one that could not be
 * sent). */
void noded_relay_check_paused(struct noded *d);

#endif
