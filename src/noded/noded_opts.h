/* What superfluid-noded's library runs with: the options, as the program's command line and
 * config file (src/bin/superfluid-noded/cmdline.c) set them. */
#ifndef NODED_NODED_OPTS_H
#define NODED_NODED_OPTS_H

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
#define NODED_VERSION SF_VERSION



/* Strings point into argv or into memory the options own (noded_opts_free). */
struct noded_opts {
	const char *listen;    /* HOST:PORT, or NULL */
	const char *join;      /* HEAD:PORT, or NULL */
	const char *auth_file; /* NULL: plain links */
	const char *engine;    /* "sim" or "gguf" */
	const char *model;     /* gguf: the model file */
	const char *model_name; /* gguf: served as (NULL: the file's name for it) */
	uint32_t threads;      /* gguf: compute threads, 0: one per CPU */
	uint32_t ctx_len;      /* gguf: 0: the model's, at most 8192 */
	uint64_t kv_mem;       /* gguf: context memory in bytes, 0: batch x ctx-len */
	const char *cache_type_k; /* gguf: f16 | q8_0, the cached keys' type (NULL: f16) */
	uint32_t batch;        /* gguf: sessions in one decode step */
	const char *identity;  /* NULL: the host name */
	const char *config;
	const char *blob_dir;  /* NULL: blobs/ in the state directory (daemon/paths.h) */
	enum sf_io_kind io;
	uint32_t version_max;
	uint32_t max_sessions;
	uint32_t session_orphan_s; /* a session no head claims is dropped after this long */
	uint32_t max_links;          /* open head links (each shard its share) */
	uint32_t max_handshakes;     /* accepted links still in their handshake (shared out) */
	uint32_t max_handshakes_per_addr; /* of those, from one address (per shard) */
	uint32_t handshake_timeout_ms;
	uint32_t shards;       /* 0: one per CPU */
	uint64_t sim_seed;
	uint32_t sim_tokens_per_s;
	uint32_t sim_batch;
	uint32_t sim_layers;
	uint32_t sim_ctx_len;
	const char *sim_chat_template; /* sim: a template file to export, or NULL */
	const char *sim_script;        /* sim: "on" for scripted replies, "off" or NULL */
	uint32_t silence_ms;
	uint32_t heartbeat_ms;
	enum sfd_log_level log_level;

	struct sfd_opt_state st; /* private: what the command line set, strings from files */
};

#endif
