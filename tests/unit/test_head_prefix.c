/* Prefix-aware placement (head_place.c, head_prefix.c) against real node machines in memory,
 * whose simulated engines keep the index of pages and report it (protocol 6): a request goes
 * to the node holding the longest prefix of its pages even when another node is less loaded,
 * until that node's load outweighs computing the prefix elsewhere, or it is busy and another
 * idle; the pages of a placed prompt count at once (a
 * burst finds them before the report); another namespace shares nothing; a node's link that
 * opens again brings its whole index back, and a node restarted empty loses it; a node of
 * protocol 5 is placed on without prefixes (and gets no cache_ns). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "head/head.h"
#include "prefix/prefix.h"
#include "sim/fleet_sim.h"
#include "testutil.h"

#define SYS 1000 /* a shared system prompt's tokens: 15 full pages (960 positions) */

static uint32_t sys_prompt[SYS];

static struct sf_fleet_sim *fleet(uint32_t n_nodes, double steps_per_s)
{
	struct sf_fleet_sim_config cfg = { .n_nodes = n_nodes };
	sf_sim_config_default(&cfg.engine);
	cfg.engine.decode_steps_per_s = steps_per_s;
	struct sf_fleet_sim *f;
	struct sf_err err;
	if (sf_fleet_sim_new(&f, &cfg, &err))
		fail_msg("fleet: %s", err.msg);
	for (uint32_t i = 0; i < n_nodes; i++)
		assert_int_equal(sf_fleet_sim_connect(f, i), 0);
	sf_fleet_sim_run(f, 50);
	uint64_t seed = 9;
	for (uint32_t i = 0; i < SYS; i++)
		sys_prompt[i] = 32 + (uint32_t)(sf_test_rand(&seed) % 95);
	return f;
}

/* Opens session sid of namespace ns with the system prompt and `tail` tokens of its own,
 * asks for max_new tokens; returns the node it went to. */
static uint32_t start(struct sf_fleet_sim *f, uint64_t sid, uint64_t ns, uint32_t tail,
		      uint32_t max_new)
{
	uint32_t ctx[SYS + 64];
	memcpy(ctx, sys_prompt, sizeof(sys_prompt));
	for (uint32_t i = 0; i < tail; i++)
		ctx[SYS + i] = 32 + (uint32_t)((sid * 7 + i) % 95);
	uint64_t prefix[(SYS + 64) / SF_PREFIX_PAGE];
	struct sf_head_session_params p = { .model = "sim-1", .cache_ns = ns, .prefix = prefix };
	p.n_prefix = ns ? sf_prefix_chain(ns, ctx, SYS + tail, prefix,
					  (SYS + 64) / SF_PREFIX_PAGE) : 0;
	struct sf_err err;
	uint64_t gid;
	if (sf_fleet_sim_open(f, sid, &p, &err) || sf_fleet_sim_append(f, sid, ctx, SYS + tail, &err) ||
	    sf_fleet_sim_generate(f, sid, max_new, 0, NULL, &gid, &err))
		fail_msg("session %llu: %s", (unsigned long long)sid, err.msg);
	return sf_head_session_node(sf_fleet_sim_head(f), sid);
}

static void pages_on(struct sf_fleet_sim *f, uint32_t node, uint64_t want)
{
	struct sf_head_prefix_stats st;
	sf_head_node_prefix(sf_fleet_sim_head(f), node, &st);
	if (st.pages != want)
		fail_msg("node %u: the head's view holds %llu pages, not %llu", node,
			 (unsigned long long)st.pages, (unsigned long long)want);
}

/* Where no node is idle, the node holding the prefix wins until its load outweighs computing
 * the prefix elsewhere: 15 pages cost 960 positions, a running generation 256
 * (SF_HEAD_LOAD_TOKENS); the pages a placed prompt brings count at once (pending), so the next
 * one follows it. */
static void longest_prefix_weighed_against_load(void **state)
{
	(void)state;
	struct sf_fleet_sim *f = fleet(2, 20); /* 20 steps a second: generations stay running */
	uint32_t home = start(f, 1, 7, 10, 4);
	sf_fleet_sim_run(f, 1000); /* done; its pages reported */
	pages_on(f, home, 15);
	pages_on(f, 1 - home, 0);
	/* Two long generations of two other namespaces: one on each node (none idle), as the
	 * second finds nothing of the first's pages in its own namespace. */
	uint32_t a = start(f, 20, 9, 1, 1000), b = start(f, 21, 10, 2, 1000);
	assert_int_not_equal(a, b);
	/* Each node runs one: the prefix's wins, and again at two, three and four running
	 * (its cost 256 a generation against the other's 960 + 256). */
	for (uint64_t sid = 2; sid <= 5; sid++)
		assert_int_equal(start(f, sid, 7, 10 + (uint32_t)sid, 1000), home);
	/* Five there, one on the other: 1280 against 1216, the other; its prompt's pages count
	 * there at once, so the one after follows it. */
	assert_int_equal(start(f, 6, 7, 16, 1000), 1 - home);
	assert_int_equal(start(f, 7, 7, 17, 1000), 1 - home);
	struct sf_head_stats hs;
	sf_head_stats(sf_fleet_sim_head(f), &hs);
	assert_int_equal(hs.prefix_balanced, 1);
	assert_int_equal(hs.prefix_placed, 5);
	sf_fleet_sim_free(f);
}

/* A node running SF_HEAD_BUSY generations loses to an idle one when its prefix is hot (a
 * prefix SF_HEAD_HOT requests found there: computed on a second node too), not when it is one
 * conversation's (each turn finds a longer one). */
static void a_busy_node_loses_to_an_idle_one_for_a_hot_prefix(void **state)
{
	(void)state;
	struct sf_fleet_sim *f = fleet(2, 20);
	uint32_t home = start(f, 1, 7, 10, 4);
	sf_fleet_sim_run(f, 1000);
	/* Not hot yet: two running there, the other idle, still the prefix's node. */
	assert_int_equal(start(f, 2, 7, 12, 1000), home);
	assert_int_equal(start(f, 3, 7, 13, 1000), home);
	assert_int_equal(start(f, 4, 7, 14, 1000), home);
	assert_int_equal(start(f, 5, 7, 15, 1000), home);
	/* Hot (four found it): the next one goes to the idle node, the one after follows it (its
	 * pending pages, less load). */
	assert_int_equal(start(f, 6, 7, 16, 1000), 1 - home);
	assert_int_equal(start(f, 7, 7, 17, 1000), 1 - home);
	struct sf_head_stats hs;
	sf_head_stats(sf_fleet_sim_head(f), &hs);
	assert_int_equal(hs.prefix_balanced, 1);
	sf_fleet_sim_free(f);
}

/* A link that opens again brings the node's whole index back (reset, then the list); a node
 * restarted with an empty engine has none. */
static void the_view_follows_the_node(void **state)
{
	(void)state;
	struct sf_fleet_sim *f = fleet(2, 0);
	uint32_t home = start(f, 1, 7, 10, 4);
	sf_fleet_sim_run(f, 500);
	pages_on(f, home, 15); /* 1010 prompt tokens and 3 generated: 15 full pages */
	sf_fleet_sim_drop(f, home);
	sf_fleet_sim_run(f, 50);
	assert_int_equal(sf_fleet_sim_connect(f, home), 0);
	sf_fleet_sim_run(f, 200);
	pages_on(f, home, 15);
	assert_int_equal(start(f, 2, 7, 11, 4), home);
	sf_fleet_sim_run(f, 500);
	/* Closed (a session still open would be assigned its content again, and computed). */
	struct sf_err err;
	assert_int_equal(sf_fleet_sim_close(f, 1, false, &err), 0);
	assert_int_equal(sf_fleet_sim_close(f, 2, false, &err), 0);
	sf_fleet_sim_run(f, 100);
	assert_int_equal(sf_fleet_sim_restart(f, home), 0);
	assert_int_equal(sf_fleet_sim_connect(f, home), 0);
	sf_fleet_sim_run(f, 500);
	pages_on(f, home, 0);
	sf_fleet_sim_free(f);
}

/* A node of protocol 5 reports nothing: nothing is placed by prefix there, and its ASSIGNs
 * carry no namespace (the encoder would refuse one). */
static void older_nodes_without_prefixes(void **state)
{
	(void)state;
	struct sf_fleet_sim_config cfg = { .n_nodes = 2 };
	sf_sim_config_default(&cfg.engine);
	struct sf_fleet_sim *f;
	struct sf_err err;
	if (sf_fleet_sim_new(&f, &cfg, &err))
		fail_msg("fleet: %s", err.msg);
	sf_fleet_sim_set_version(f, 0, 5);
	sf_fleet_sim_set_version(f, 1, 5);
	for (uint32_t i = 0; i < 2; i++)
		assert_int_equal(sf_fleet_sim_connect(f, i), 0);
	sf_fleet_sim_run(f, 50);
	uint64_t seed = 9;
	for (uint32_t i = 0; i < SYS; i++)
		sys_prompt[i] = 32 + (uint32_t)(sf_test_rand(&seed) % 95);
	uint32_t home = start(f, 1, 7, 10, 4);
	sf_fleet_sim_run(f, 500);
	pages_on(f, home, 0);
	assert_int_equal(sf_fleet_sim_n_notes(f), 0); /* it ran as ever: no refusal, no error */
	struct sf_head_stats hs;
	sf_head_stats(sf_fleet_sim_head(f), &hs);
	assert_int_equal(hs.prefix_placed + hs.prefix_balanced, 0);
	sf_fleet_sim_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(longest_prefix_weighed_against_load),
		cmocka_unit_test(a_busy_node_loses_to_an_idle_one_for_a_hot_prefix),
		cmocka_unit_test(the_view_follows_the_node),
		cmocka_unit_test(older_nodes_without_prefixes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
