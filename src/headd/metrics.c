/* GET /metrics in the Prometheus text format (version 0.0.4): requests by endpoint and
 * status class, tokens in and out, time to first token and inter-token histograms, each
 * node's link state and capacity, reconnects, replayed events, sessions. */
#include "headd.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const double bounds[HEADD_HIST_BUCKETS] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120,
};
static const char *const ep_names[EP_COUNT] = {
	"chat_completions", "completions", "models", "sessions", "health", "metrics", "other",
	"tokenize", "fleet", "audio_transcriptions", "responses", "messages", "embeddings",
};
static const char *const class_names[6] = { "2xx", "4xx", "5xx", "401", "429", "other" };

void headd_metrics_request(struct headd *d, enum headd_endpoint ep, int status)
{
	int k = status == 401 ? 3 : status == 429 ? 4 : status >= 200 && status < 300 ? 0
		: status >= 400 && status < 500 ? 1 : status >= 500 && status < 600 ? 2 : 5;
	if (ep < EP_COUNT)
		d->api.m.requests[ep][k]++;
}

void headd_hist_add(struct headd_hist *h, double v)
{
	int i = 0;
	while (i < HEADD_HIST_BUCKETS && v > bounds[i])
		i++;
	h->bucket[i]++;
	h->count++;
	h->sum += v;
}

/* A growing text page. */
struct page {
	char *p;
	size_t len, cap;
	bool oom;
};

static void put(struct page *pg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct page *pg, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = pg->cap - pg->len;
		int n = pg->p ? vsnprintf(pg->p + pg->len, room, fmt, ap) : -1;
		va_end(ap);
		if (n >= 0 && (size_t)n < room) {
			pg->len += (size_t)n;
			return;
		}
		size_t cap = pg->cap ? pg->cap * 2 : 16384;
		while (n >= 0 && cap - pg->len <= (size_t)n)
			cap *= 2;
		char *p = realloc(pg->p, cap);
		if (!p) {
			pg->oom = true;
			return;
		}
		pg->p = p;
		pg->cap = cap;
	}
}

static void hist(struct page *pg, const char *name, const char *help, const struct headd_hist *h)
{
	put(pg, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	uint64_t cum = 0;
	for (int i = 0; i < HEADD_HIST_BUCKETS; i++) {
		cum += h->bucket[i];
		put(pg, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], (unsigned long long)cum);
	}
	put(pg, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
	    (unsigned long long)h->count, name, h->sum, name, (unsigned long long)h->count);
}

static void counter(struct page *pg, const char *name, const char *help, uint64_t v)
{
	put(pg, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
	    (unsigned long long)v);
}

static void gauge(struct page *pg, const char *name, const char *help, uint64_t v)
{
	put(pg, "# HELP %s %s\n# TYPE %s gauge\n%s %llu\n", name, help, name, name,
	    (unsigned long long)v);
}

/* A label value with \, " and newlines escaped. */
static const char *label(const char *s, char *buf, size_t n)
{
	size_t at = 0;
	for (; *s && at + 3 < n; s++) {
		if (*s == '\\' || *s == '"' || *s == '\n') {
			buf[at++] = '\\';
			buf[at++] = *s == '\n' ? 'n' : *s;
		} else {
			buf[at++] = *s;
		}
	}
	buf[at] = 0;
	return buf;
}

static void nodes(struct page *pg, struct headd *d, const struct headd_part *sum)
{
	static const char *const names[][2] = {
		{ "superfluid_node_up", "Whether the head's links to the node are open (1: every "
					"shard's) or not (0)." },
		{ "superfluid_node_free_sessions", "Sessions the node can still take, as it last said." },
		{ "superfluid_node_max_sessions", "Sessions the node can hold, as it last said." },
		{ "superfluid_node_batch_running", "Sequences in the node's decode batch." },
		{ "superfluid_node_batch_size", "The node's decode batch size." },
		{ "superfluid_node_reconnects_total", "Links to the node that opened after its first." },
		{ "superfluid_node_prompt_tokens_reused_total", "Prompt tokens the node had when they "
		  "came: kept in a session's context or adopted from its prefix cache." },
		{ "superfluid_node_prompt_tokens_computed_total", "Prompt tokens the node computed." },
		{ "superfluid_node_prefix_pages", "Pages of 64 positions the node's prefix cache holds, "
		  "as it last reported." },
	};
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		put(pg, "# HELP %s %s\n# TYPE %s %s\n", names[k][0], names[k][1], names[k][0],
		    k == 5 || k == 6 || k == 7 ? "counter" : "gauge");
		for (uint32_t i = 0; i < d->fleet.n_nodes; i++) {
			const struct headd_node *n = &d->fleet.nodes[i];
			char a[300], id[600];
			if (n->is_stage)
				continue; /* shard 0's alone: pipeline_stages() */
			/* Each shard has its own link: reconnects are the opens past each one's
			 * first. */
			uint64_t opens = sum->m.link_opens && i < sum->n_nodes ? sum->m.link_opens[i] : 0;
			uint64_t firsts = d->n_shards < opens ? d->n_shards : opens;
			uint32_t links = sum->node_links && i < sum->n_nodes ? sum->node_links[i]
									      : n->open;
			struct sf_head_prefix_stats px = { 0 };
			if (sum->node_prefix && i < sum->n_nodes)
				px = sum->node_prefix[i];
			uint64_t v[] = { links >= d->n_shards, n->cap.free_sessions, n->cap.max_sessions,
					 n->cap.batch_running, n->cap.batch_size, opens - firsts,
					 px.prompt_reused, px.prompt_computed, px.pages };
			put(pg, "%s{node=\"%s\",identity=\"%s\"} %llu\n", names[k][0],
			    label(n->addr, a, sizeof(a)), label(n->identity[0] ? n->identity : "-",
								 id, sizeof(id)),
			    (unsigned long long)v[k]);
		}
	}
}

/* The pipeline's stages (linked to shard 0 alone: from its part, whichever shard answers). */
static void pipeline_stages(struct page *pg, const struct headd_part *sum)
{
	size_t n = json_array_size(sum->stages);
	if (!n)
		return;
	put(pg, "# HELP superfluid_pipeline_stage_up Whether the head's link to the pipeline stage "
		"is open.\n# TYPE superfluid_pipeline_stage_up gauge\n");
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(sum->stages, i);
		const char *addr = json_string_value(json_object_get(s, "node"));
		const char *ident = json_string_value(json_object_get(s, "identity"));
		const char *state = json_string_value(json_object_get(s, "state"));
		char a[300], id[600];
		put(pg, "superfluid_pipeline_stage_up{stage=\"%lld\",node=\"%s\",identity=\"%s\"} "
			"%d\n", (long long)json_integer_value(json_object_get(s, "stage")),
		    label(addr ? addr : "", a, sizeof(a)), label(ident ? ident : "-", id, sizeof(id)),
		    state && !strcmp(state, "up"));
	}
}

/* Blobs sent to nodes, the head's blob cache, and state operations by how they ended. */
static void state_ops(struct page *pg, const struct headd_part *sum)
{
	if (!sum->has_ops)
		return;
	const struct sf_state_ops_stats s = sum->so;
	const struct sf_blob_cache_stats c = sum->bc;
	counter(pg, "superfluid_blobs_sent_total", "Blobs sent to nodes (once per link each).",
		s.blobs_sent);
	counter(pg, "superfluid_blob_bytes_sent_total", "Bytes of the blobs sent to nodes.",
		s.blob_bytes_sent);
	counter(pg, "superfluid_blobs_refused_total", "Blobs a node refused (XFER_RESULT ok = 0).",
		s.blobs_refused);
	counter(pg, "superfluid_blobs_cut_total",
		"Blob transfers cut short: no request needed them any more.", s.blobs_cut);
	gauge(pg, "superfluid_blobs_cached", "Blobs the head holds in memory.", c.entries);
	gauge(pg, "superfluid_blobs_cache_bytes", "Bytes of the blobs the head holds.", c.bytes);
	put(pg, "# HELP superfluid_state_ops_total State operations (transcriptions) on nodes, by "
		"how they ended.\n# TYPE superfluid_state_ops_total counter\n");
	for (int k = 0; k < SF_SO_RESULTS; k++)
		put(pg, "superfluid_state_ops_total{result=\"%s\"} %llu\n",
		    sf_state_op_result_name((enum sf_state_op_result)k),
		    (unsigned long long)s.results[k]);
	counter(pg, "superfluid_state_ops_retried_total",
		"State operations asked again of another link after theirs dropped.", s.retried);
}

/* The write-ahead log (--wal-dir): its disk use, its writes and how far behind it is. */
static void wal(struct page *pg, const struct headd_part *sum)
{
	if (!sum->has_wal)
		return;
	const struct sf_wal_stats s = sum->ws;
	gauge(pg, "superfluid_wal_disk_bytes", "Bytes of the log's segments on disk.",
	      s.disk_bytes);
	gauge(pg, "superfluid_wal_segments", "Segment files of the log.", s.segments);
	counter(pg, "superfluid_wal_records_total", "Records appended since the head started.",
		s.records);
	counter(pg, "superfluid_wal_bytes_written_total", "Bytes written to the log.",
		s.bytes_written);
	counter(pg, "superfluid_wal_writes_total", "Writes (group commits) to the log.", s.writes);
	counter(pg, "superfluid_wal_fsyncs_total", "fdatasync calls on the log.", s.fsyncs);
	counter(pg, "superfluid_wal_checkpoints_total", "Checkpoints taken.", s.checkpoints);
	gauge(pg, "superfluid_wal_pending_bytes", "Bytes appended and not yet written.",
	      s.pending_bytes);
	gauge(pg, "superfluid_wal_waiting_records",
	      "Records appended and not yet durable (their events wait to be delivered).",
	      sum->wal_queued);
	gauge(pg, "superfluid_wal_sessions", "Live sessions the log holds.", sum->wal_sessions);
	counter(pg, "superfluid_wal_restored_sessions_total",
		"Sessions brought back from the log at start.", sum->wal_restored);
	counter(pg, "superfluid_wal_resumed_streams_total",
		"Generations a client followed again (GET .../{id}).", sum->wal_resumed);
}

void headd_metrics_page(struct headd_http *h, const struct headd_part *sum)
{
	struct headd *d = h->d;
	const struct headd_metrics *m = &sum->m;
	struct page pg = { 0 };
	put(&pg, "# HELP superfluid_http_requests_total Client API requests answered, by "
		 "endpoint and status class.\n# TYPE superfluid_http_requests_total counter\n");
	for (int e = 0; e < EP_COUNT; e++)
		for (int k = 0; k < 6; k++)
			if (m->requests[e][k])
				put(&pg, "superfluid_http_requests_total{endpoint=\"%s\",status=\"%s\"} "
					 "%llu\n", ep_names[e], class_names[k],
				    (unsigned long long)m->requests[e][k]);
	counter(&pg, "superfluid_prompt_tokens_total", "Prompt tokens sent to nodes.",
		m->prompt_tokens);
	counter(&pg, "superfluid_completion_tokens_total", "Tokens generated for clients.",
		m->completion_tokens);
	hist(&pg, "superfluid_time_to_first_token_seconds",
	     "From a request's arrival to its first generated token.", &m->ttft);
	hist(&pg, "superfluid_inter_token_seconds", "Between a stream's generated tokens.",
	     &m->itl);
	counter(&pg, "superfluid_streams_cut_total",
		"Streams ended because the client read too slowly (--stream-buffer).",
		m->streams_cut);
	counter(&pg, "superfluid_sse_keepalives_total",
		"SSE comments sent to streams that had no bytes for 5 s (a node gone, a stream "
		"waiting for another).", m->keepalives);
	counter(&pg, "superfluid_client_gone_total",
		"Generations cancelled because their client went away.", m->client_gone);
	gauge(&pg, "superfluid_http_connections", "Client connections open.", m->http_conns);
	static const char *const phases[HP_COUNT] = { "tls_handshake", "first_request", "head",
						      "body", "idle", "answer" };
	put(&pg, "# HELP superfluid_http_timeouts_total Client connections closed for taking too "
		 "long, by phase.\n# TYPE superfluid_http_timeouts_total counter\n");
	for (int k = 0; k < HP_BUSY; k++)
		put(&pg, "superfluid_http_timeouts_total{phase=\"%s\"} %llu\n", phases[k],
		    (unsigned long long)m->http_timeouts[k]);
	put(&pg, "# HELP superfluid_http_refused_total Client connections or requests turned "
		 "away, by limit.\n# TYPE superfluid_http_refused_total counter\n"
		 "superfluid_http_refused_total{limit=\"max_conns\"} %llu\n"
		 "superfluid_http_refused_total{limit=\"body_budget\"} %llu\n",
	    (unsigned long long)m->http_refused_full, (unsigned long long)m->http_refused_budget);
	counter(&pg, "superfluid_http_evicted_total",
		"Idle client connections closed to let a new one in (--http-max-conns).",
		m->http_evicted);
	put(&pg, "# HELP superfluid_tokenizer_waits_total Generations that came before their "
		 "model's tokenizer had arrived at their shard and waited for it, by how they "
		 "ended.\n# TYPE superfluid_tokenizer_waits_total counter\n"
		 "superfluid_tokenizer_waits_total{result=\"served\"} %llu\n"
		 "superfluid_tokenizer_waits_total{result=\"unavailable\"} %llu\n",
	    (unsigned long long)m->tok_waits_served, (unsigned long long)m->tok_waits_failed);
	gauge(&pg, "superfluid_tokenizer_waiting", "Generations waiting now for their model's "
	      "tokenizer to arrive at their shard.", m->tok_waiting);
	nodes(&pg, d, sum);
	pipeline_stages(&pg, sum);
	struct sf_head_stats own;
	sf_head_stats(d->head, &own);
	uint32_t up = own.nodes_up; /* with shards: the nodes every shard has a link to */
	if (d->n_shards > 1) {
		up = 0;
		for (uint32_t i = 0; i < d->fleet.n_nodes && i < sum->n_nodes; i++)
			up += sum->node_links && !d->fleet.nodes[i].is_stage &&
			      sum->node_links[i] >= d->n_shards;
	}
	const struct sf_head_stats st = sum->st;
	gauge(&pg, "superfluid_nodes_up", "Nodes whose links (every shard's) are open.", up);
	gauge(&pg, "superfluid_shards", "Event loops (--shards), each with its own sessions.",
	      d->n_shards);
	put(&pg, "# HELP superfluid_shard_requests_total Client API requests each shard answered "
		 "(before this one).\n# TYPE superfluid_shard_requests_total counter\n");
	for (unsigned k = 0; k < d->n_shards && sum->by_shard; k++)
		put(&pg, "superfluid_shard_requests_total{shard=\"%u\"} %llu\n", k,
		    (unsigned long long)sum->by_shard[k]);
	gauge(&pg, "superfluid_sessions", "Sessions the head holds.", st.sessions);
	gauge(&pg, "superfluid_named_sessions", "Named sessions kept (X-Superfluid-Session).",
	      sum->n_named);
	counter(&pg, "superfluid_replayed_events_total",
		"Token events nodes sent again after a reconnect.", st.replayed);
	counter(&pg, "superfluid_duplicate_events_total",
		"Token events dropped as already delivered.", st.duplicates);
	counter(&pg, "superfluid_reconciles_total", "Reconciles after a link opened.",
		st.reconciles);
	counter(&pg, "superfluid_sessions_reassigned_total",
		"Sessions moved to another node after theirs stayed down.", st.reassigned);
	counter(&pg, "superfluid_generations_resumed_total",
		"Generations that went on from what the client had after a link dropped.",
		st.resumed);
	counter(&pg, "superfluid_links_dropped_total", "Links the head gave up on.",
		st.links_dropped);
	counter(&pg, "superfluid_prefix_placed_total", "Requests placed on the node holding the "
		"longest prefix of their prompt (--prefix-cache).", st.prefix_placed);
	counter(&pg, "superfluid_prefix_balanced_total", "Requests placed on a less loaded node "
		"than the one holding their prefix, whose load outweighed computing it again.",
		st.prefix_balanced);
	const struct sf_tok_cache_stats tc = sum->tc;
	counter(&pg, "superfluid_tokenizer_cache_hits_total", "Prompt encodings from the cache.",
		tc.hits);
	counter(&pg, "superfluid_tokenizer_cache_misses_total", "Prompt encodings not in the cache.",
		tc.misses);
	counter(&pg, "superfluid_tokenizer_encoded_here_total", "Of those, encodings the head made "
		"itself with the model's tokenizer file (the others were asked of a node).", tc.local);
	gauge(&pg, "superfluid_tokenizer_cache_tokens", "Tokens the encoding cache holds.",
	      tc.tokens);
	state_ops(&pg, sum);
	wal(&pg, sum);
	if (pg.oom) {
		free(pg.p);
		headd_api_send_json(h, 500, NULL);
		return;
	}
	headd_metrics_request(d, EP_METRICS, 200);
	sf_http_respond(h->http, 200, "text/plain; version=0.0.4; charset=utf-8", pg.p, pg.len,
			NULL);
	free(pg.p);
	headd_http_response_done(h);
}
