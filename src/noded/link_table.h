/* The daemon's head links by id (the id the node machine names a link by): a small chained
 * hash table, so the node's sends find their link in O(1) however many links there are. */
#ifndef NODED_LINK_TABLE_H
#define NODED_LINK_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct noded;
struct noded_relay;
struct sf_link_conn;

enum noded_link_kind {
	LINK_ACCEPTED = 0, /* a head dialed our --listen */
	LINK_JOINED = 1,   /* our --join dial: dialed again when it drops */
	LINK_CONTROL = 2,  /* an extra dial a head asked for (CONTROL_ASK); never redialed */
};

struct noded_link {
	uint64_t id;
	struct noded *d;
	struct sf_link_conn *lc;
	enum noded_link_kind kind;
	bool open;
	char where[128];        /* the peer's address, or the address dialed */
	char peer[64];          /* the head's identity once open */
	unsigned send_failures; /* the first is a warning, the rest debug lines */
	/* A link of another shard as shard 0 knows it (lc NULL): its frames come and go
	 * through the shards' inboxes. On that shard the link has relay too. */
	bool remote;
	unsigned shard;
	uint32_t version;
	struct noded_relay *relay;
	/* An accepted link still in its handshake: in the shard's list of them, oldest first,
	 * with its peer's address (no port) for the per-address bound. */
	bool handshaking;
	char addr[80];
	struct noded_link *hs_prev, *hs_next;
	struct noded_link *next; /* in its bucket */
};

struct link_table {
	struct noded_link **buckets;
	uint32_t mask;
	uint32_t count;
};

int link_table_init(struct link_table *t, uint32_t n_buckets); /* a power of two; 0 or -1 */
void link_table_fini(struct link_table *t);                    /* the links are not freed */
void link_table_add(struct link_table *t, struct noded_link *l);
void link_table_remove(struct link_table *t, struct noded_link *l);
struct noded_link *link_table_find(const struct link_table *t, uint64_t id);
/* Up to cap ids, for walks that may remove links as they go. */
size_t link_table_ids(const struct link_table *t, uint64_t *out, size_t cap);

#endif
