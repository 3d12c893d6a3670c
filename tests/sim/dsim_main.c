/* daemon-sim: the deterministic simulation of the daemons' own code (dsim.h). One seed says
 * everything: the fleet's shape (2 or 3 nodes of 1 to 3 shards; a head of 1 to 3 shards,
 * with a write-ahead log in three seeds of four; in one seed of three a pipeline of 2 stage
 * nodes beside, a third of the requests asking its model), the clients' requests (prompts, lengths, sampling, some leaving mid-stream) and the
 * faults (connections reset, nodes crashing and starting again, the head crashing and
 * starting again from its log), on the simulated world's clock; libsodium's random bytes come
 * from the seed too. Each request's stream must be the engine's text exactly (resumed across
 * head crashes), every request must end, and once the faults stop every session of an ended
 * request must be gone from the head and the nodes.
 *   daemon-sim --seed N [-v]       one seed; -v shows the daemons' logs and the clients' breaks
 *   daemon-sim --seeds A..B        every seed in the range, with a summary
 *   --check-replay                 each seed twice: the same run, event for event
 *   --scenario NAME                instead of drawn faults, one scripted case (dsim_scenario.c:
 *                                  new-placement, answer-crash, role-cut, failed-turn,
 *                                  cut-resume)
 *   --planted-bug skip-replay      plant a bug in the head machine: an event replayed after a
 *                                  reconcile is taken as seen and never told (a token lost)
 *   --planted-bug ack-early        plant one in the head's log glue (headd_wal.c): the node
 *                                  hears an event is durable before it is written (a head
 *                                  crash then loses tokens a client saw)
 *   --planted-bug pipe-twice       plant one in the pipeline machine: a step asked again after
 *                                  its stage's link went down passes its token on twice
 * Exit status: 0 every seed held, 1 a seed broke a promise (seed and what printed), 2 usage. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "daemon/log.h"
#include "dsim.h"
#include "head/head.h"
#include "head/pipeline.h"
#include "headd/headd.h"

#ifndef SF_PLANTED_BUGS
#error "daemon-sim plants bugs: link it with superfluid_headd_planted (SF_PLANTED_BUGS)"
#endif

#define MAX_FAULTS 8
/* After the last request ends, sessions must be gone by then: a generation nobody fetched is
 * kept --wal-keep-s 8, longer than a client waits on a silent answer (5 s). */
#define DRAIN_MS 14000

/* libsodium's random bytes from the seed: the daemons' ids, seeds and keys are the run's. */
static uint64_t rb_state;

uint64_t dsim_splitmix(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rb_next(void)
{
	return dsim_splitmix(&rb_state);
}

static const char *rb_name(void) { return "daemon-sim"; }
static uint32_t rb_random(void) { return (uint32_t)rb_next(); }
static void rb_stir(void) {}
static int rb_close(void) { return 0; }

static void rb_buf(void *const buf, const size_t n)
{
	uint8_t *p = buf;
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = rb_next();
		memcpy(p + i, &v, n - i < 8 ? n - i : 8);
	}
}

static randombytes_implementation rb_impl = {
	.implementation_name = rb_name, .random = rb_random, .stir = rb_stir,
	.uniform = NULL, .buf = rb_buf, .close = rb_close,
};

enum fault_kind { F_RESET, F_NODE, F_HEAD };

struct fault {
	uint64_t at, back_at; /* when it strikes; when what crashed starts again */
	enum fault_kind kind;
	uint32_t node;
	bool struck, back;
};

struct result {
	char broke[512];
	uint64_t end_ms, turns, digest;
	uint32_t done, left, head_crashes, node_crashes, resets, resumes, breaks, conv_turns;
	uint32_t resend_turns;
	uint32_t gathers, pipe_done;
	bool hit;
};

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	return (h ^ v) * 0x100000001b3ULL;
}

static void plan_faults(struct dsim *s, struct fault *f, uint32_t *n)
{
	*n = (uint32_t)(sf_simnet_rand(s->world) % (MAX_FAULTS + 1));
	for (uint32_t i = 0; i < *n; i++) {
		uint32_t k = (uint32_t)(sf_simnet_rand(s->world) % 10);
		f[i] = (struct fault){ .at = 200 + sf_simnet_rand(s->world) % (DSIM_FAULT_MS - 200) };
		f[i].kind = k < 5 ? F_RESET : k < 8 ? F_NODE : F_HEAD;
		f[i].node = (uint32_t)(sf_simnet_rand(s->world) % s->n_nodes);
		f[i].back_at = f[i].at + 50 + sf_simnet_rand(s->world) % 2500;
	}
}

static void strike(struct dsim *s, struct fault *f, uint64_t now)
{
	if (!f->struck && now >= f->at) {
		f->struck = true;
		if (f->kind == F_RESET) {
			int fds[64];
			uint32_t n = sf_simnet_conns(s->world, fds, 64);
			if (n) {
				int fd = fds[sf_simnet_rand(s->world) % (n < 64 ? n : 64)];
				bool conv = false; /* a conversation's client keeps its connection */
				for (uint32_t i = 0; i < s->n_reqs; i++)
					if (dsim_req_owns(&s->reqs[i], fd)) {
						s->reqs[i].cut_by_reset = true;
						conv = s->reqs[i].conv;
					}
				for (uint32_t i = 0; i < s->n_gathers; i++)
					if (dsim_gather_owns(&s->gathers[i], fd))
						s->gathers[i].reset = true;
				if (!conv) {
					sf_simnet_reset(s->world, fd);
					s->resets++;
				}
			}
			f->back = true;
		} else if (f->kind == F_NODE && dsim_node_up(s, f->node)) {
			dsim_node_crash(s, f->node);
			s->node_crashes++;
		} else if (f->kind == F_HEAD && dsim_head_up(s)) {
			dsim_head_crash(s);
			s->head_crashes++;
		} else {
			f->back = true; /* already down: another fault's */
		}
		if (s->verbose)
			fprintf(stderr, "  [%llu ms] fault: %s\n", (unsigned long long)now,
				f->kind == F_RESET ? "a connection reset" : f->kind == F_NODE ?
				"a node crashed" : "the head crashed");
	}
	if (f->struck && !f->back && now >= f->back_at) {
		f->back = true;
		if (f->kind == F_NODE && !dsim_node_up(s, f->node))
			dsim_node_start(s, f->node);
		else if (f->kind == F_HEAD && !dsim_head_up(s))
			dsim_head_start(s);
	}
}

static uint64_t next_due(const struct dsim *s, const struct fault *f, uint32_t n_f)
{
	uint64_t t = sf_simnet_next(s->world);
	uint64_t d = dsim_daemons_next_timer(s);
	if (d < t)
		t = d;
	d = sf_loop_next_timer(s->clients);
	if (d < t)
		t = d;
	for (uint32_t i = 0; i < s->n_reqs; i++) {
		const struct dsim_req *r = &s->reqs[i];
		d = r->st == DR_IDLE ? r->start_at : r->st == DR_WAIT ? r->retry_at
									: dsim_req_deadline(r);
		if (d < t)
			t = d;
	}
	for (uint32_t i = 0; i < s->n_gathers; i++)
		if ((d = dsim_gather_due(&s->gathers[i])) < t)
			t = d;
	for (uint32_t i = 0; i < n_f; i++) {
		d = !f[i].struck ? f[i].at : !f[i].back ? f[i].back_at : UINT64_MAX;
		if (d < t)
			t = d;
	}
	d = dsim_scenario_next(s);
	return d < t ? d : t;
}

/* Turns everything until nothing is due at once (bounded: a loop that keeps itself busy
 * moves on with the clock). */
static void settle(struct dsim *s)
{
	uint64_t now = sf_simnet_now(s->world);
	for (int i = 0; i < 64 && !s->broke[0]; i++) {
		bool busy = dsim_daemons_turn(s);
		dsim_scenario_step(s);
		sf_loop_turn(s->clients, 0);
		busy |= sf_loop_busy(s->clients);
		for (uint32_t k = 0; k < s->n_reqs; k++)
			busy |= dsim_req_poll(&s->reqs[k], now);
		for (uint32_t k = 0; k < s->n_gathers; k++)
			busy |= dsim_gather_poll(&s->gathers[k], now);
		s->turns++;
		if (!busy && sf_simnet_next(s->world) > now)
			break;
	}
}

static bool all_ended(const struct dsim *s)
{
	for (uint32_t i = 0; i < s->n_reqs; i++)
		if (!dsim_req_ended(&s->reqs[i]))
			return false;
	for (uint32_t i = 0; i < s->n_gathers; i++)
		if (s->gathers[i].st != DG_DONE)
			return false;
	return true;
}

static enum dsim_scenario_kind scenario = DS_NONE;

static void run_seed(uint64_t seed, bool verbose, struct result *res)
{
	memset(res, 0, sizeof(*res));
	rb_state = seed * 0xd1342543de82ef95ULL + 1;
	struct dsim *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(res->broke, sizeof(res->broke), "no memory");
		return;
	}
	s->seed = seed;
	s->verbose = verbose;
	const char *tmp = getenv("TMPDIR");
	snprintf(s->dir, sizeof(s->dir), "%s/dsim-%llu-XXXXXX", tmp ? tmp : "/tmp",
		 (unsigned long long)seed);
	struct sf_simnet_config wc = { .seed = seed, .latency_max_ms = 2, .disk_max_ms = 3 };
	struct fault faults[MAX_FAULTS + 2];
	uint32_t n_faults = 0;
	if (!mkdtemp(s->dir) || sf_simnet_new(&s->world, &wc)) {
		snprintf(res->broke, sizeof(res->broke), "no world: %s", strerror(errno));
		free(s);
		return;
	}
	s->n_nodes = 2 + (uint32_t)(sf_simnet_rand(s->world) % 2);
	s->wal = sf_simnet_rand(s->world) % 4 != 0;
	s->head_shards = 1 + (uint32_t)(sf_simnet_rand(s->world) % 3);
	/* Each node's shards from a stream of their own, so that a seed whose nodes all have one
	 * draws everything else as before they had a choice. */
	uint64_t shard_rng = seed ^ 0x6e6f64652d736861ULL;
	for (uint32_t k = 0; k < DSIM_MAX_NODES; k++)
		s->node_shards[k] = 1 + (uint32_t)(dsim_splitmix(&shard_rng) % 3);
	if (sf_simnet_rand(s->world) % 3) { /* two seeds in three: sealed links */
		for (size_t i = 0; i < sizeof(s->token); i++)
			s->token[i] = (uint8_t)('a' + sf_simnet_rand(s->world) % 26);
		s->token_len = sizeof(s->token);
	}
	sf_sim_config_default(&s->engine);
	s->engine.seed = 1 + sf_simnet_rand(s->world) % 1000;
	s->n_reqs = 3 + (uint32_t)(sf_simnet_rand(s->world) % (DSIM_MAX_CLIENTS - 2));
	plan_faults(s, faults, &n_faults);
	/* One seed in three also runs a pipeline (--pipeline) of two stage nodes, each crashing
	 * once in two: drawn from a stream of their own, so that every other draw of the seed
	 * stays where it was. */
	uint64_t pipe_rng = seed ^ 0x706970656c696e65ULL;
	if (scenario == DS_NONE && dsim_splitmix(&pipe_rng) % 3 == 0) {
		s->n_stages = 2;
		for (uint32_t k = 0; k < s->n_stages; k++) {
			if (dsim_splitmix(&pipe_rng) % 2)
				continue;
			struct fault *f = &faults[n_faults++];
			*f = (struct fault){ .at = 200 + dsim_splitmix(&pipe_rng) % (DSIM_FAULT_MS - 200),
					     .kind = F_NODE, .node = s->n_nodes + k };
			f->back_at = f->at + 50 + dsim_splitmix(&pipe_rng) % 2500;
		}
	}
	s->scen.kind = scenario;
	if (scenario != DS_NONE) {
		dsim_scenario_shape(s);
		n_faults = 0; /* the scenario's own, none drawn */
	}
	struct sf_loop_config lc = { .io = SF_IO_SIM, .sim = s->world, .quiet = true };
	struct sf_err err;
	bool ok = !sf_loop_new(&s->clients, &lc, &err);
	for (uint32_t k = 0; ok && k < s->n_nodes + s->n_stages; k++)
		ok = !dsim_node_start(s, k);
	ok = ok && !dsim_head_start(s);
	for (uint32_t i = 0; ok && i < s->n_reqs; i++)
		dsim_req_init(s, &s->reqs[i], i);
	if (ok && scenario == DS_NONE)
		dsim_gathers_init(s);
	if (ok && scenario != DS_NONE)
		dsim_scenario_request(s);
	uint64_t ended_at = 0;
	while (ok && !s->broke[0]) {
		uint64_t now = sf_simnet_now(s->world);
		for (uint32_t i = 0; i < n_faults; i++)
			strike(s, &faults[i], now);
		settle(s);
		if (dsim_head_gaps(s))
			dsim_broke(s, "a node sent an event past the one the head expected (an event "
				   "acknowledged and let go, then lost: a gap)");
		bool faults_over = now >= DSIM_FAULT_MS;
		for (uint32_t i = 0; i < n_faults; i++)
			faults_over &= faults[i].back;
		faults_over &= s->scen.kind == DS_NONE || s->scen.state == DSIM_SCEN_DONE;
		if (faults_over && all_ended(s)) {
			if (!ended_at)
				ended_at = now;
			/* A session no head claims goes within --session-orphan-s (3); a pipeline
			 * context with its generation's end, or its link. */
			uint32_t held = dsim_head_sessions(s), pipes = 0;
			for (uint32_t k = 0; k < s->n_nodes; k++)
				held += dsim_node_sessions(s, k);
			for (uint32_t k = s->n_nodes; k < s->n_nodes + s->n_stages; k++)
				pipes += dsim_node_pipes(s, k);
			if (!held && !pipes)
				break;
			if (now > ended_at + DRAIN_MS) {
				dsim_broke(s, "%u sessions and %u pipeline contexts still held %u ms "
					   "after every request ended (head %u)", held, pipes, DRAIN_MS,
					   dsim_head_sessions(s));
				break;
			}
		}
		if (now > DSIM_END_MS) {
			for (uint32_t i = 0; i < s->n_reqs; i++)
				if (!dsim_req_ended(&s->reqs[i]))
					dsim_broke(s, "request %u never ended (%u attempts, %zu bytes, "
						   "state %d)", i, s->reqs[i].attempts,
						   s->reqs[i].n_got, s->reqs[i].st);
			for (uint32_t i = 0; i < s->n_gathers; i++)
				if (s->gathers[i].st != DG_DONE)
					dsim_broke(s, "gather %u (GET %s) never ended (%u tries)", i,
						   s->gathers[i].path, s->gathers[i].tries);
			if (!s->broke[0])
				dsim_broke(s, "the sessions never drained");
			break;
		}
		uint64_t next = next_due(s, faults, n_faults);
		sf_simnet_advance(s->world, next > now ? next : now + 1);
	}
	res->end_ms = sf_simnet_now(s->world);
	res->turns = s->turns;
	res->head_crashes = s->head_crashes;
	res->node_crashes = s->node_crashes;
	res->resets = s->resets;
	res->conv_turns = s->conv_turns;
	res->resend_turns = s->resend_turns;
	res->pipe_done = s->pipe_done;
	res->hit = s->scen.hit;
	struct sf_simnet_stats ws;
	sf_simnet_stats(s->world, &ws);
	res->digest = mix(mix(mix(mix(0xcbf29ce484222325ULL, res->end_ms), s->turns), ws.bytes),
			  ws.pieces);
	for (uint32_t i = 0; i < s->n_reqs; i++) {
		struct dsim_req *r = &s->reqs[i];
		res->done += r->st == DR_DONE;
		res->left += r->st == DR_LEFT;
		res->resumes += r->resumes;
		res->breaks += r->breaks;
		res->digest = mix(mix(mix(res->digest, r->st), r->n_got), r->attempts);
		for (size_t k = 0; k < r->n_got; k++)
			res->digest = mix(res->digest, (uint8_t)r->got[k]);
		dsim_req_free(r);
	}
	for (uint32_t i = 0; i < s->n_gathers; i++)
		dsim_gather_free(&s->gathers[i]);
	res->gathers = s->gathers_done;
	snprintf(res->broke, sizeof(res->broke), "%s", s->broke);
	dsim_daemons_free(s);
	sf_loop_free(s->clients);
	sf_simnet_free(s->world);
	if (nftw(s->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS))
		fprintf(stderr, "daemon-sim: could not remove %s\n", s->dir);
	free(s);
}

static int usage(void)
{
	fprintf(stderr, "usage: daemon-sim --seed N [-v] | --seeds A..B [--check-replay] "
		"[--keep-going] [--planted-bug skip-replay|ack-early|pipe-twice]\n");
	return 2;
}

int main(int argc, char **argv)
{
	uint64_t first = 0, last = 0;
	bool verbose = false, replay = false, have = false, keep_going = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			first = last = strtoull(argv[++i], NULL, 10);
			have = true;
		} else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) {
			char *dots;
			first = strtoull(argv[++i], &dots, 10);
			if (strncmp(dots, "..", 2))
				return usage();
			last = strtoull(dots + 2, NULL, 10);
			have = true;
		} else if (!strcmp(argv[i], "-v")) {
			verbose = true;
		} else if (!strcmp(argv[i], "--check-replay")) {
			replay = true;
		} else if (!strcmp(argv[i], "--keep-going")) {
			keep_going = true; /* every failing seed told, not only the first */
		} else if (!strcmp(argv[i], "--scenario") && i + 1 < argc) {
			if (dsim_scenario_parse(argv[++i], &scenario))
				return usage();
		} else if (!strcmp(argv[i], "--planted-bug") && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "skip-replay"))
				sf_head_planted_bug = SF_HEAD_BUG_SKIP_REPLAY;
			else if (!strcmp(argv[i], "ack-early"))
				headd_planted_bug = HEADD_BUG_ACK_EARLY;
			else if (!strcmp(argv[i], "pipe-twice"))
				sf_pipe_planted_bug = SF_PIPE_BUG_TWICE;
			else
				return usage();
		} else {
			return usage();
		}
	}
	if (!have || last < first)
		return usage();
	if (randombytes_set_implementation(&rb_impl) || sodium_init() < 0) {
		fprintf(stderr, "daemon-sim: libsodium did not start\n");
		return 2;
	}
	sfd_log_init("daemon-sim");
	/* Quiet daemons unless -v; stderr stays for what the sanitizers say. */
	sfd_log_set_level(verbose ? (getenv("DSIM_DEBUG") ? SFD_LOG_DEBUG : SFD_LOG_INFO)
				  : SFD_LOG_NONE);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint64_t streams = 0, crashes = 0, resumes = 0, turns = 0, hits = 0, gathers = 0, piped = 0;
	uint64_t resend = 0;
	uint64_t failed = 0;
	for (uint64_t seed = first; seed <= last; seed++) {
		struct result a, b;
		run_seed(seed, verbose, &a);
		if (!a.broke[0] && replay) {
			run_seed(seed, false, &b);
			if (a.digest != b.digest || a.end_ms != b.end_ms)
				snprintf(a.broke, sizeof(a.broke), "the same seed ran differently: ended "
					 "at %llu ms and %llu ms, %llu and %llu turns",
					 (unsigned long long)a.end_ms, (unsigned long long)b.end_ms,
					 (unsigned long long)a.turns, (unsigned long long)b.turns);
		}
		if (a.broke[0] || verbose)
			printf("seed %llu: %s%s (%u requests done, %u conversation turns, %u left "
			       "on purpose, %u breaks, %u resumes; %u head crashes, %u node crashes, "
			       "%u resets; %llu ms, %llu loop turns)\n", (unsigned long long)seed,
			       a.broke[0] ? "broke the promise: " : "held", a.broke, a.done, a.conv_turns,
			       a.left, a.breaks, a.resumes, a.head_crashes, a.node_crashes,
			       a.resets, (unsigned long long)a.end_ms, (unsigned long long)a.turns);
		fflush(stdout);
		if (a.broke[0] && !keep_going)
			return 1;
		failed += a.broke[0] != 0;
		streams += a.done;
		crashes += a.head_crashes + a.node_crashes;
		resumes += a.resumes;
		turns += a.conv_turns;
		resend += a.resend_turns;
		gathers += a.gathers;
		piped += a.pipe_done;
		hits += a.hit;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (failed) {
		printf("daemon-sim: %llu of seeds %llu..%llu broke the promise\n",
		       (unsigned long long)failed, (unsigned long long)first,
		       (unsigned long long)last);
		return 1;
	}
	printf("daemon-sim: seeds %llu..%llu held (%llu requests whole, %llu of them through a "
	       "pipeline, %llu conversation turns (%llu sent whole, in no session), %llu gathers, "
	       "%llu crashes, %llu resumes) in %.1f s\n", (unsigned long long)first,
	       (unsigned long long)last, (unsigned long long)streams, (unsigned long long)piped,
	       (unsigned long long)turns, (unsigned long long)resend,
	       (unsigned long long)gathers, (unsigned long long)crashes,
	       (unsigned long long)resumes, secs);
	if (scenario != DS_NONE) {
		printf("daemon-sim: the scenario's state was reached in %llu of %llu seeds\n",
		       (unsigned long long)hits, (unsigned long long)(last - first + 1));
		if (!hits)
			return 1; /* a scenario that never happens checks nothing */
	}
	return 0;
}
