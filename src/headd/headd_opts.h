/* What superfluid-headd's library runs with: the options, as the program's command line and
 * config file (src/bin/superfluid-headd/cmdline.c) set them. */
#ifndef HEADD_HEADD_OPTS_H
#define HEADD_HEADD_OPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon/log.h"
#include "daemon/options.h"

#include "io/loop.h"

/* SF_VERSION is project(VERSION) in the top CMakeLists.txt, given to every compile. */
#ifndef SF_VERSION
#error "SF_VERSION is not defined: build with CMake"
#endif
#define HEADD_VERSION SF_VERSION
#define HEADD_DEFAULT_LISTEN_HTTP "127.0.0.1:8080"
#define HEADD_SHARDS_UNSET UINT32_MAX /* --shards not given */


/* Strings point into argv or into memory the options own (headd_opts_free). */
struct headd_opts {
	const char *fleet;      /* HOST:PORT[,HOST:PORT...] */
	const char *fleet_auth;   /* NULL: plain links */
	const char *fleet_listen; /* HOST:PORT where nodes may join, or NULL */
	const char *pipeline;     /* stage nodes HOST:PORT[,HOST:PORT...], in order, or NULL */
	const char *pipeline_model; /* NULL: the stages' model + "-pipeline" */
	const char *admin_socket; /* NULL: headd.sock in the runtime directory (headd/headd_proc.c) */
	const char *identity;   /* NULL: "superfluid-headd" */
	const char *config;
	enum sf_io_kind io;
	uint32_t shards;        /* event loops, each on a thread of its own; 0: one per CPU */
	uint32_t replace_after_ms;
	uint32_t silence_ms, heartbeat_ms; /* the links' liveness */
	enum sfd_log_level log_level;
	/* The client API (HTTP). */
	const char *listen_http;  /* HOST:PORT; default 127.0.0.1:8080 */
	const char *tls_cert, *tls_key; /* both, or neither: HTTPS */
	const char *api_keys;     /* a file of bearer keys, or NULL: no keys asked */
	const char *cors_origin;  /* browser origins answered with CORS headers, joined with ','
				   * ("*": any); NULL: none (no CORS header, no preflight) */
	uint32_t http_max_body;   /* bytes of a request body */
	uint32_t http_max_conns;  /* client connections at once */
	uint32_t http_body_budget_mb; /* request bodies being received, all connections */
	uint32_t http_header_timeout_s; /* a request line and headers, from the first byte */
	uint32_t http_body_timeout_s;   /* a body, from its headers */
	uint32_t http_idle_timeout_s;   /* a kept-alive connection between requests */
	uint32_t tls_handshake_timeout_s;
	uint32_t stream_buffer;   /* bytes a slow client may leave unread before its stream ends */
	uint32_t http_sndbuf;     /* SO_SNDBUF of client connections; 0: the kernel's */
	uint32_t max_tokens_default; /* a request's max_tokens when it gives none */
	uint32_t max_sessions;    /* named sessions (X-Superfluid-Session) kept */
	uint32_t max_renders_per_key; /* a key's chat renders waiting or running on a shard */
	uint32_t max_sessions_per_key; /* a key's named sessions (with --api-keys) */
	uint32_t max_generations_per_key; /* a key's generations running (with --api-keys) */
	uint32_t max_fleet_sessions; /* sessions the head holds at once, named or not */
	uint32_t session_idle_s;  /* a named session unused this long is ended */
	const char *prefix_cache; /* key | shared | off: whose requests share cached prefixes */
	/* The write-ahead log (docs/RELIABILITY.md, docs/WAL.md). */
	const char *wal_dir;      /* NULL: no log; a head restart forgets every session */
	const char *wal_sync;     /* always | batch | off */
	uint32_t wal_segment_mb;
	uint32_t wal_batch_ms;
	uint32_t wal_keep_s;      /* a generation that ended while no client followed it waits
				   * this long to be fetched before its session goes */

	struct sfd_opt_state st; /* private: what the command line set, strings from files */
};

/* Checks a --cors-origin list: each value "*" or an origin, SCHEME://HOST[:PORT] (no path)
 * of at most 200 bytes. 0, or -1 with a sentence naming the bad value in why. */
int headd_cors_check(const char *list, char *why, size_t why_len);

#endif
