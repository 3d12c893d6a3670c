/* Prefix reuse (src/prefix, the engines' shared pages): the hash chain the head and the node
 * both compute; the index's sharing, checks, eviction order (the pages after a page first,
 * least recently used first, never a held one) and its report of changes; and the engines:
 * a context that adopts another's pages draws the same stream, logprobs included, bit for bit,
 * as one that computes them (greedy and seeded; on a random-weight GGUF model and on the
 * simulated engine), other namespaces share nothing, shared pages count once, cached pages
 * are evicted before a prefill is refused, and truncating inside a shared page computes the
 * rest again. A model with recurrent layers (test-qwen35; some cases on test-granitehybrid):
 * the pages up to a state checkpoint adopted, the same streams, a conversation sent again
 * whole each turn starting from the last turn's checkpoint, checkpoints counted and evicted
 * with their pages. A model with
 * sliding-window layers (test-gemma3): window blocks kept with their pages and tails, pinned
 * while read, the same streams, adopters and cut-backs stopping where window rows are found,
 * appends beside a decoding thread. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <superfluid/gguf.h>
#include <superfluid/gguf_engine.h>
#include <superfluid/sim_engine.h>

#include "model/model.h"
#include "model/pool.h"
#include "prefix/prefix.h"
#include "testutil.h"

#define P SF_PREFIX_PAGE
#define N_VOCAB 300
#define N_GEN 20

static void fill(uint32_t *t, uint32_t n, uint64_t seed)
{
	for (uint32_t i = 0; i < n; i++)
		t[i] = (uint32_t)(sf_test_rand(&seed) % 256); /* in both vocabularies */
}

/* ---- the chain and the index ---- */

static void chain_is_the_pages_hashed_in_turn(void **state)
{
	(void)state;
	uint32_t t[3 * P + 10];
	fill(t, 3 * P + 10, 1);
	uint64_t h[8];
	assert_int_equal(sf_prefix_chain(5, t, 3 * P + 10, h, 8), 3);
	assert_int_equal(h[0], sf_prefix_next(sf_prefix_root(5), t));
	assert_int_equal(h[1], sf_prefix_next(h[0], t + P));
	assert_int_equal(h[2], sf_prefix_next(h[1], t + 2 * P));
	assert_int_equal(sf_prefix_chain(5, t, 3 * P + 10, h, 2), 2); /* capped */
	assert_int_not_equal(sf_prefix_root(5), sf_prefix_root(6));
	uint64_t other[3];
	sf_prefix_chain(6, t, 3 * P, other, 3);
	assert_int_not_equal(other[0], h[0]);
	t[P + 3] ^= 1; /* a token of the second page: the first stays, the rest change */
	sf_prefix_chain(5, t, 3 * P, other, 3);
	assert_int_equal(other[0], h[0]);
	assert_int_not_equal(other[1], h[1]);
	assert_int_not_equal(other[2], h[2]);
}

struct drops {
	int n;
	void *last;
};

static void count_drop(void *arg, void *data)
{
	struct drops *d = arg;
	d->n++;
	d->last = data;
}

static void index_shares_checks_and_evicts_leaves_first(void **state)
{
	(void)state;
	struct drops d = { 0 };
	struct sf_prefix_cache_config cfg = { .page_bytes = 100, .drop = count_drop, .arg = &d };
	struct sf_prefix_cache *pc;
	assert_int_equal(sf_prefix_cache_new(&cfg, &pc), 0);
	uint64_t root = sf_prefix_root(1);
	uint32_t t[3 * P];
	fill(t, 3 * P, 2);
	int data[3];
	struct sf_prefix_page *a = sf_prefix_put(pc, NULL, root, t, &data[0]);
	struct sf_prefix_page *b = sf_prefix_put(pc, a, root, t + P, &data[1]);
	assert_non_null(a);
	assert_non_null(b);
	uint64_t h[2];
	sf_prefix_chain(1, t, 2 * P, h, 2);
	assert_int_equal(sf_prefix_hash(a), h[0]); /* what the head computes */
	assert_int_equal(sf_prefix_hash(b), h[1]);
	/* Another context computing the same page gets the indexed one; its data stays its own. */
	assert_ptr_equal(sf_prefix_put(pc, NULL, root, t, &data[2]), a);
	sf_prefix_unref(pc, a);
	/* Looked up by tokens, the page before and the root, never the hash alone. */
	assert_ptr_equal(sf_prefix_get(pc, a, root, t + P), b);
	sf_prefix_unref(pc, b);
	assert_null(sf_prefix_get(pc, NULL, sf_prefix_root(2), t));
	assert_null(sf_prefix_get(pc, b, root, t + P));
	t[5] ^= 1;
	assert_null(sf_prefix_get(pc, NULL, root, t));
	t[5] ^= 1;
	struct sf_prefix_stats st;
	sf_prefix_stats(pc, &st);
	assert_int_equal(st.pages, 2);
	assert_int_equal(st.idle_pages, 0);
	assert_false(sf_prefix_evict(pc)); /* both held */
	sf_prefix_unref(pc, b);
	sf_prefix_unref(pc, a);
	sf_prefix_stats(pc, &st);
	assert_int_equal(st.idle_pages, 2);
	assert_int_equal(st.idle_bytes, 200);
	/* a was let go of last, but b follows it: b goes first. */
	assert_true(sf_prefix_evict(pc));
	assert_ptr_equal(d.last, &data[1]);
	assert_true(sf_prefix_evict(pc));
	assert_ptr_equal(d.last, &data[0]);
	assert_false(sf_prefix_evict(pc));
	assert_int_equal(d.n, 2);
	struct sf_prefix_change ch[8];
	bool lost;
	assert_int_equal(sf_prefix_changes(pc, ch, 8, &lost), 4);
	assert_false(lost);
	assert_true(ch[0].added && ch[0].hash == h[0]);
	assert_true(ch[1].added && ch[1].hash == h[1]);
	assert_true(!ch[2].added && ch[2].hash == h[1]);
	assert_true(!ch[3].added && ch[3].hash == h[0]);
	assert_int_equal(sf_prefix_changes(pc, ch, 8, &lost), 0);
	sf_prefix_cache_free(pc);
}

static struct drops state_drops; /* (the callbacks share cfg.arg) */

static void count_state_drop(void *arg, void *st)
{
	(void)arg;
	count_drop(&state_drops, st);
}

/* Checkpoints on pages: one a page, copied while there, all counted as reclaimable; evicted
 * alone when used less recently than any page that can go (the page stays, held or not),
 * else with their page. */
static void checkpoints_go_alone_or_with_their_page(void **state)
{
	(void)state;
	struct drops d = { 0 }, *ds = &state_drops;
	struct sf_prefix_cache_config cfg = { .page_bytes = 100, .drop = count_drop, .arg = &d,
					      .state_bytes = sizeof(int),
					      .drop_state = count_state_drop };
	struct sf_prefix_cache *pc;
	assert_int_equal(sf_prefix_cache_new(&cfg, &pc), 0);
	uint64_t root = sf_prefix_root(1);
	uint32_t t[3 * P];
	fill(t, 3 * P, 12);
	int data[2], st1 = 11, st2 = 22, st3 = 33, got = 0;
	struct sf_prefix_page *a = sf_prefix_put(pc, NULL, root, t, &data[0]);
	struct sf_prefix_page *b = sf_prefix_put(pc, a, root, t + P, &data[1]);
	assert_false(sf_prefix_has_state(pc, a));
	assert_false(sf_prefix_copy_state(pc, a, &got));
	assert_true(sf_prefix_set_state(pc, a, &st1));
	assert_false(sf_prefix_set_state(pc, a, &st2)); /* one a page */
	assert_true(sf_prefix_set_state(pc, b, &st2));
	assert_true(sf_prefix_copy_state(pc, a, &got)); /* a's now the most recently used */
	assert_int_equal(got, 11);
	struct sf_prefix_stats st;
	sf_prefix_stats(pc, &st);
	assert_int_equal(st.states, 2);
	assert_int_equal(st.idle_bytes, 2 * sizeof(int)); /* pages held, checkpoints not */
	/* Both pages held: b's checkpoint (used less recently) goes alone, then a's. */
	assert_true(sf_prefix_evict(pc));
	assert_int_equal(ds->n, 1);
	assert_ptr_equal(ds->last, &st2);
	assert_true(sf_prefix_has_state(pc, a));
	assert_false(sf_prefix_has_state(pc, b));
	assert_true(sf_prefix_evict(pc));
	assert_ptr_equal(ds->last, &st1);
	assert_false(sf_prefix_evict(pc)); /* held pages only */
	assert_int_equal(d.n, 0);
	/* Checkpoints set before the pages were let go of go first, oldest first. */
	sf_prefix_unref(pc, b);
	assert_true(sf_prefix_set_state(pc, a, &st3));
	sf_prefix_unref(pc, a);
	b = sf_prefix_get(pc, a, root, t + P);
	assert_true(sf_prefix_set_state(pc, b, &st2));
	sf_prefix_unref(pc, b);
	assert_true(sf_prefix_evict(pc));
	assert_ptr_equal(ds->last, &st3);
	assert_true(sf_prefix_evict(pc));
	assert_ptr_equal(ds->last, &st2);
	assert_int_equal(d.n, 0);
	assert_true(sf_prefix_evict(pc));
	assert_ptr_equal(d.last, &data[1]);
	/* a page let go of before its checkpoint was set goes with it */
	assert_true(sf_prefix_set_state(pc, a, &st1));
	assert_true(sf_prefix_evict(pc));
	assert_ptr_equal(d.last, &data[0]);
	assert_ptr_equal(ds->last, &st1);
	assert_int_equal(ds->n, 5);
	sf_prefix_stats(pc, &st);
	assert_int_equal(st.states, 0);
	assert_int_equal(st.pages, 0);
	sf_prefix_cache_free(pc);
}

/* Window rows as pages' states (sf_prefix_offer_state): pinned while holders read them (not
 * reclaimable, never evicted nor dropped alone), unpinned reclaimable and evicted as
 * checkpoints are; the first offer attaches its state, a later one pins the page's own; a
 * tail keeps one, copied from while pinned, and it goes with the tail. */
static void pinned_states_stay_until_unpinned(void **state)
{
	(void)state;
	struct drops d = { 0 }, *ds = &state_drops;
	*ds = (struct drops){ 0 };
	struct sf_prefix_cache_config cfg = { .page_bytes = 100, .drop = count_drop, .arg = &d,
					      .state_bytes = sizeof(int),
					      .drop_state = count_state_drop };
	struct sf_prefix_cache *pc;
	assert_int_equal(sf_prefix_cache_new(&cfg, &pc), 0);
	uint64_t root = sf_prefix_root(1);
	uint32_t t[3 * P], k;
	fill(t, 3 * P, 14);
	int data[3], w1 = 1, w2 = 2, w3 = 3;
	struct sf_prefix_page *a = sf_prefix_put(pc, NULL, root, t, &data[0]);
	struct sf_prefix_page *b = sf_prefix_put(pc, a, root, t + P, &data[1]);
	assert_ptr_equal(sf_prefix_offer_state(pc, a, &w1), &w1);
	assert_ptr_equal(sf_prefix_offer_state(pc, a, &w2), &w1); /* a's own, pinned twice */
	struct sf_prefix_stats st;
	sf_prefix_stats(pc, &st);
	assert_int_equal(st.states, 1);
	assert_int_equal(st.pinned, 1);
	assert_int_equal(st.idle_bytes, 0);
	assert_false(sf_prefix_evict(pc));
	sf_prefix_drop_state(pc, a);
	assert_true(sf_prefix_has_state(pc, a)); /* pinned: stays */
	sf_prefix_unpin_state(pc, a);
	assert_false(sf_prefix_evict(pc)); /* still pinned once */
	sf_prefix_unpin_state(pc, a);
	sf_prefix_stats(pc, &st);
	assert_int_equal(st.pinned, 0);
	assert_int_equal(st.idle_bytes, sizeof(int));
	assert_ptr_equal(sf_prefix_pin_state(pc, a), &w1);
	sf_prefix_unpin_state(pc, a);
	assert_null(sf_prefix_pin_state(pc, b)); /* none */
	assert_true(sf_prefix_evict(pc)); /* unpinned: alone, the page held */
	assert_ptr_equal(ds->last, &w1);
	assert_int_equal(d.n, 0);
	assert_true(sf_prefix_put_tail(pc, b, t + 2 * P, 10, &data[2], &w3));
	sf_prefix_stats(pc, &st);
	assert_int_equal(st.tails, 1);
	assert_int_equal(st.states, 1);
	assert_int_equal(st.idle_bytes, 100 + sizeof(int));
	struct sf_prefix_page *tail = sf_prefix_get_partial(pc, b, t + 2 * P, 20, &k);
	assert_int_equal(k, 10);
	assert_ptr_equal(sf_prefix_pin_state(pc, tail), &w3);
	sf_prefix_unpin_state(pc, tail);
	sf_prefix_unref(pc, tail);
	sf_prefix_unref(pc, b);
	sf_prefix_unref(pc, a);
	while (sf_prefix_evict(pc))
		;
	assert_int_equal(ds->n, 2);
	assert_ptr_equal(ds->last, &w3);
	assert_int_equal(d.n, 3);
	sf_prefix_stats(pc, &st);
	assert_int_equal(st.states, 0);
	assert_int_equal(st.pages + st.tails, 0);
	sf_prefix_cache_free(pc);
}

static void least_recently_used_goes_first(void **state)
{
	(void)state;
	struct sf_prefix_cache_config cfg = { .page_bytes = 1 };
	struct sf_prefix_cache *pc;
	assert_int_equal(sf_prefix_cache_new(&cfg, &pc), 0);
	uint64_t root = sf_prefix_root(1);
	uint32_t t[3][P];
	struct sf_prefix_page *p[3];
	for (int i = 0; i < 3; i++) {
		fill(t[i], P, 10 + (uint64_t)i);
		p[i] = sf_prefix_put(pc, NULL, root, t[i], NULL);
	}
	sf_prefix_unref(pc, p[1]);
	sf_prefix_unref(pc, p[0]);
	sf_prefix_unref(pc, p[2]);
	sf_prefix_unref(pc, sf_prefix_get(pc, NULL, root, t[1])); /* used again: newest */
	struct sf_prefix_change ch[8];
	bool lost;
	sf_prefix_changes(pc, ch, 8, &lost);
	uint64_t want[3] = { sf_prefix_hash(p[0]), sf_prefix_hash(p[2]), sf_prefix_hash(p[1]) };
	for (int i = 0; i < 3; i++) {
		assert_true(sf_prefix_evict(pc));
		assert_int_equal(sf_prefix_changes(pc, ch, 8, &lost), 1);
		assert_int_equal(ch[0].hash, want[i]);
	}
	sf_prefix_cache_free(pc);
}

/* Tails: kept under their page, the one sharing the longest run of first tokens found, one a
 * longer one extends dropped, at most SF_PREFIX_TAILS a page, evicted before their page and
 * never reported. */
static void tails_are_kept_under_their_page(void **state)
{
	(void)state;
	struct drops d = { 0 };
	struct sf_prefix_cache_config cfg = { .page_bytes = 10, .drop = count_drop, .arg = &d };
	struct sf_prefix_cache *pc;
	assert_int_equal(sf_prefix_cache_new(&cfg, &pc), 0);
	uint64_t root = sf_prefix_root(4);
	uint32_t t[2 * P];
	fill(t, 2 * P, 20);
	struct sf_prefix_page *page = sf_prefix_put(pc, NULL, root, t, NULL);
	int data[8];
	assert_true(sf_prefix_put_tail(pc, page, t + P, 10, &data[0], NULL));
	/* held by the first; then one extending it replaces it */
	assert_false(sf_prefix_put_tail(pc, page, t + P, 6, &data[1], NULL));
	assert_true(sf_prefix_put_tail(pc, page, t + P, 20, &data[2], NULL));
	assert_int_equal(d.n, 1);
	assert_ptr_equal(d.last, &data[0]);
	uint32_t other[P];
	memcpy(other, t + P, sizeof(other));
	other[5] ^= 1;
	assert_true(sf_prefix_put_tail(pc, page, other, 30, &data[3], NULL));
	uint32_t k;
	struct sf_prefix_page *got = sf_prefix_get_partial(pc, page, t + P, 40, &k);
	assert_ptr_equal(sf_prefix_data(got), &data[2]);
	assert_int_equal(k, 20);
	sf_prefix_unref(pc, got);
	got = sf_prefix_get_partial(pc, page, other, 3, &k); /* both share 3: either will do */
	assert_int_equal(k, 3);
	sf_prefix_unref(pc, got);
	other[0] ^= 1;
	assert_null(sf_prefix_get_partial(pc, page, other, 40, &k));
	/* A full page after it shares its first positions too. */
	struct sf_prefix_page *full = sf_prefix_put(pc, page, root, other, &data[7]);
	other[50] ^= 1;
	got = sf_prefix_get_partial(pc, page, other, 63, &k);
	assert_ptr_equal(got, full);
	assert_int_equal(k, 50);
	sf_prefix_unref(pc, got);
	sf_prefix_unref(pc, full);
	other[50] ^= 1;
	for (int i = 3; i < 7; i++) { /* past the bound the oldest goes */
		other[1] = 1000 + (uint32_t)i;
		assert_true(sf_prefix_put_tail(pc, page, other, 8, &data[i], NULL));
	}
	struct sf_prefix_stats st;
	sf_prefix_stats(pc, &st);
	assert_int_equal(st.tails, SF_PREFIX_TAILS);
	assert_int_equal(st.pages, 2);
	assert_int_equal(st.idle_bytes, (SF_PREFIX_TAILS + 1) * 10); /* the first page is held */
	/* Evicted, the tails go first, then the page; only the page is reported. */
	sf_prefix_unref(pc, page);
	while (sf_prefix_evict(pc))
		;
	sf_prefix_stats(pc, &st);
	assert_int_equal(st.tails + st.pages, 0);
	struct sf_prefix_change ch[8];
	bool lost;
	assert_int_equal(sf_prefix_changes(pc, ch, 8, &lost), 4); /* two added, two evicted */
	assert_false(ch[3].added);
	sf_prefix_cache_free(pc);
}

static void list_hash(void *arg, uint64_t hash)
{
	(void)hash;
	(*(size_t *)arg)++;
}

static void too_many_changes_ask_for_the_list(void **state)
{
	(void)state;
	struct sf_prefix_cache_config cfg = { .page_bytes = 1, .max_pages = 10 };
	struct sf_prefix_cache *pc;
	assert_int_equal(sf_prefix_cache_new(&cfg, &pc), 0);
	uint64_t root = sf_prefix_root(3);
	uint32_t t[P] = { 0 };
	/* Past max_pages the least recently used idle page makes room; changes past their bound
	 * are dropped and the next report says so. */
	for (uint32_t i = 0; i < SF_PREFIX_MAX_CHANGES; i++) {
		t[0] = i;
		struct sf_prefix_page *p = sf_prefix_put(pc, NULL, root, t, NULL);
		assert_non_null(p);
		sf_prefix_unref(pc, p);
	}
	struct sf_prefix_change ch[4];
	bool lost;
	sf_prefix_changes(pc, ch, 4, &lost);
	assert_true(lost);
	size_t n = 0;
	assert_int_equal(sf_prefix_list(pc, list_hash, &n), 10);
	assert_int_equal(n, 10);
	struct sf_prefix_stats st;
	sf_prefix_stats(pc, &st);
	assert_int_equal(st.pages, 10);
	assert_int_equal(st.evicted, SF_PREFIX_MAX_CHANGES - 10);
	/* Full of held pages, a new one is refused (its data stays the caller's). */
	struct sf_prefix_page *held[10];
	for (uint32_t i = 0; i < 10; i++) {
		t[0] = 1000000 + i;
		assert_non_null(held[i] = sf_prefix_put(pc, NULL, root, t, NULL));
	}
	t[0] = 2000000;
	assert_null(sf_prefix_put(pc, NULL, root, t, NULL));
	for (uint32_t i = 0; i < 10; i++)
		sf_prefix_unref(pc, held[i]);
	sf_prefix_cache_free(pc);
}

/* ---- the engines ---- */

struct fx {
	char path[128];
	struct sf_pool *pool;
	struct sf_engine *e;   /* unbounded context memory */
};

static struct sf_engine *gguf_engine_keys(struct fx *f, uint64_t kv_mem, const char *keys)
{
	struct sf_gguf_engine_config cfg = { .path = f->path, .threads = 1, .ctx_len = 1024,
					     .batch = 4, .chunk = 48, .kv_mem = kv_mem,
					     .cache_type_k = keys };
	struct sf_engine *e;
	struct sf_err err;
	if (sf_gguf_engine_new(&cfg, &e, &err))
		fail_msg("engine: %s", err.msg);
	return e;
}

static struct sf_engine *gguf_engine(struct fx *f, uint64_t kv_mem)
{
	return gguf_engine_keys(f, kv_mem, NULL);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	*state = f;
	f->pool = sf_pool_new(1);
	assert_int_equal(sf_test_make_model("prefix", N_VOCAB, "test-qwen2", 2, 5, f->pool, f->path,
					    sizeof(f->path)), 0);
	f->e = gguf_engine(f, 0);
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	sf_engine_free(f->e);
	sf_pool_free(f->pool);
	unlink(f->path);
	free(f);
	return 0;
}

struct run {
	uint32_t tokens[N_GEN];
	struct sf_engine_logprob lp[N_GEN];
	uint32_t reused;
};

/* A context of namespace ns (0: not shared) with prompt[0..n) drawing N_GEN tokens under s
 * (NULL: greedy),
 * with 5 alternatives' logprobs; freed after unless *keep is asked for. */
static void draw(struct sf_engine *e, uint64_t ns, const struct sf_sampling *s,
		 const uint32_t *prompt, uint32_t n, struct run *out, struct sf_engine_ctx **keep)
{
	struct sf_err err;
	struct sf_engine_ctx *c;
	static const struct sf_sampling greedy = { 0 };
	assert_int_equal(sf_engine_ctx_new(e, s ? s : &greedy, &c, &err), 0);
	sf_engine_ctx_share(e, c, ns);
	if (sf_engine_prefill(e, c, prompt, n, &err))
		fail_msg("prefill: %s", err.msg);
	out->reused = sf_engine_ctx_reused(e, c);
	for (uint32_t i = 0; i < N_GEN; i++) {
		struct sf_engine_step st = { .ctx = c, .logprobs = true, .top_logprobs = 5 };
		do {
			st.more = false;
			assert_int_equal(sf_engine_decode(e, &st, 1, &err), 0);
			assert_int_equal(st.rc, 0);
		} while (st.more);
		out->tokens[i] = st.token;
		out->lp[i] = st.lp;
	}
	if (keep)
		*keep = c;
	else
		sf_engine_ctx_free(e, c);
}

static void same_run(const struct run *a, const struct run *b, const char *what)
{
	for (uint32_t i = 0; i < N_GEN; i++) {
		if (a->tokens[i] != b->tokens[i])
			fail_msg("%s: token %u is %u, %u without reuse", what, i, b->tokens[i],
				 a->tokens[i]);
		/* Bit for bit: the adopted pages are the ones computing gives. */
		if (memcmp(&a->lp[i], &b->lp[i], sizeof(a->lp[i])))
			fail_msg("%s: token %u's logprobs differ from those without reuse", what, i);
	}
}

/* Reuse on or off, the same stream: greedy and seeded, for another context's prompt, for a
 * longer one that goes on from it, and not across namespaces. recurrent: a model with
 * recurrent layers, whose contexts adopt pages up to a checkpoint only (a prompt keeps one at
 * its last page end), no tails. */
static void engine_streams_are_the_same_with_reuse(struct sf_engine *e, bool recurrent)
{
	uint32_t prompt[300];
	fill(prompt, 300, 3);
	struct sf_sampling samplings[2] = { { 0 }, { .temperature = 0.9f, .top_p = 0.95f,
						     .seed = 77 } };
	for (int k = 0; k < 2; k++) {
		const struct sf_sampling *s = &samplings[k];
		uint64_t ns = 100 + (uint64_t)k;
		struct run ref, first, again, other, longer_ref, longer;
		draw(e, 0, s, prompt, 200, &ref, NULL);
		draw(e, ns, s, prompt, 200, &first, NULL);
		assert_int_equal(first.reused, 0);
		same_run(&ref, &first, "the first shared context");
		draw(e, ns, s, prompt, 200, &again, NULL);
		/* Of 200: three full pages, then 7 positions of the first context's last page
		 * (kept as a tail when it went): all but the last token. A recurrent model: the
		 * three pages, the third with the first prompt's checkpoint (192, its last page end
		 * before its last token). */
		assert_int_equal(again.reused, recurrent ? 3 * P : 3 * P + 7);
		same_run(&ref, &again, "a context that adopted three pages");
		draw(e, ns + 1000, s, prompt, 200, &other, NULL);
		assert_int_equal(other.reused, 0); /* another namespace shares nothing */
		same_run(&ref, &other, "another namespace");
		/* A prompt of exactly three pages: two adopted, then the first 63 positions of the
		 * third copied; the last token is always computed. A recurrent model: the second
		 * page has no checkpoint, so nothing, and this prompt keeps one there (128). */
		struct run short_ref;
		draw(e, 0, s, prompt, 3 * P, &short_ref, NULL);
		draw(e, ns, s, prompt, 3 * P, &other, NULL);
		assert_int_equal(other.reused, recurrent ? 0 : 3 * P - 1);
		same_run(&short_ref, &other, "a prompt of three pages");
		if (recurrent) {
			draw(e, ns, s, prompt, 3 * P, &other, NULL);
			assert_int_equal(other.reused, 2 * P);
			same_run(&short_ref, &other, "a prompt of three pages, from a checkpoint");
		}
		draw(e, 0, s, prompt, 290, &longer_ref, NULL);
		draw(e, ns, s, prompt, 290, &longer, NULL);
		/* the tail's prompt positions too; a recurrent model's from the third page's
		 * checkpoint (its fourth was not full when the first context went) */
		if (recurrent)
			assert_int_equal(longer.reused, 3 * P);
		else
			assert_true(longer.reused >= 3 * P + 8);
		same_run(&longer_ref, &longer, "a longer prompt");
	}
}

static void gguf_reuse_gives_the_same_stream(void **state)
{
	struct fx *f = *state;
	engine_streams_are_the_same_with_reuse(f->e, false);
	struct sf_prefix_stats st;
	sf_prefix_stats(sf_engine_prefix_cache(f->e), &st);
	assert_true(st.hits > 0);
	assert_int_equal(st.idle_pages, st.pages); /* every context is gone */
	assert_int_equal(sf_engine_mem_used(f->e), 0);
}

/* Keys cached as Q8_0 (--cache-type-k q8_0): the pages and a tail's first positions adopted
 * (whole 16-position slabs copied) give the bits computing gives. */
static void gguf_q8_0_keys_reuse_gives_the_same_stream(void **state)
{
	struct fx *f = *state;
	struct sf_engine *e = gguf_engine_keys(f, 0, "q8_0");
	engine_streams_are_the_same_with_reuse(e, false);
	assert_int_equal(sf_engine_mem_used(e), 0);
	sf_engine_free(e);
}

static void sim_reuse_gives_the_same_stream(void **state)
{
	(void)state;
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	struct sf_engine *e;
	struct sf_err err;
	assert_int_equal(sf_sim_engine_new(&cfg, &e, &err), 0);
	engine_streams_are_the_same_with_reuse(e, false);
	sf_engine_free(e);
}

/* Two contexts holding the same pages count them once; pages no context holds are not in use
 * and go before a prefill is refused. */
static void shared_pages_count_once_and_go_before_a_refusal(void **state)
{
	struct fx *f = *state;
	const struct sf_engine_info *info = sf_engine_info(f->e);
	uint64_t page = info->ctx_bytes_per_token * P;
	struct sf_engine *e = gguf_engine(f, 8 * page);
	uint32_t prompt[600];
	fill(prompt, 600, 4);
	struct run a, b;
	struct sf_engine_ctx *ca, *cb;
	draw(e, 9, NULL, prompt, 200, &a, &ca); /* 220 positions: 4 pages, 3 of them shared */
	assert_int_equal(sf_engine_mem_used(e), 4 * page);
	draw(e, 9, NULL, prompt, 200, &b, &cb);
	assert_int_equal(b.reused, 3 * P);
	assert_int_equal(sf_engine_mem_used(e), 5 * page); /* not 8 */
	same_run(&a, &b, "two holders");
	sf_engine_ctx_free(e, ca);
	sf_engine_ctx_free(e, cb);
	assert_int_equal(sf_engine_mem_used(e), 0);
	struct sf_prefix_stats st;
	sf_prefix_stats(sf_engine_prefix_cache(e), &st);
	assert_int_equal(st.pages, 3);
	assert_int_equal(st.tails, 1); /* the first's last page; the second's is the same */
	assert_int_equal(st.idle_bytes, 4 * page);
	/* Eight pages of a prompt of its own: the three cached ones make room. */
	struct sf_engine_ctx *c;
	struct sf_err err;
	assert_int_equal(sf_engine_ctx_new(e, &(struct sf_sampling){ 0 }, &c, &err), 0);
	if (sf_engine_prefill(e, c, prompt + 80, 8 * P, &err))
		fail_msg("the cached pages were not evicted for room: %s", err.msg);
	sf_prefix_stats(sf_engine_prefix_cache(e), &st);
	assert_int_equal(st.pages, 0);
	assert_int_equal(st.tails, 0);
	assert_int_equal(st.evicted, 3);
	/* Past the limit with nothing cached: refused, as ever. */
	assert_int_equal(sf_engine_prefill(e, c, prompt, 1, &err), SF_E_NOMEM);
	sf_engine_ctx_free(e, c);
	sf_engine_free(e);
}

/* A context cut back inside a page it adopted lets the page go and computes its positions
 * again: the stream after new tokens is the one a context of those tokens alone draws. */
static void truncating_inside_a_shared_page(void **state)
{
	struct fx *f = *state;
	uint32_t prompt[300];
	fill(prompt, 300, 6);
	struct run warm, ref;
	draw(f->e, 11, NULL, prompt, 200, &warm, NULL);
	uint32_t turn[260];
	memcpy(turn, prompt, 150 * sizeof(uint32_t));
	fill(turn + 150, 110, 7);
	draw(f->e, 0, NULL, turn, 260, &ref, NULL);
	struct sf_err err;
	struct sf_engine_ctx *c;
	assert_int_equal(sf_engine_ctx_new(f->e, &(struct sf_sampling){ 0 }, &c, &err), 0);
	sf_engine_ctx_share(f->e, c, 11);
	assert_int_equal(sf_engine_prefill(f->e, c, prompt, 200, &err), 0);
	assert_int_equal(sf_engine_ctx_reused(f->e, c), 3 * P + 7); /* pages and the tail */
	assert_int_equal(sf_engine_ctx_truncate(f->e, c, 150, &err), 0); /* inside page 2 */
	assert_int_equal(sf_engine_prefill(f->e, c, turn + 150, 110, &err), 0);
	for (uint32_t i = 0; i < N_GEN; i++) {
		struct sf_engine_step st = { .ctx = c };
		do {
			st.more = false;
			assert_int_equal(sf_engine_decode(f->e, &st, 1, &err), 0);
		} while (st.more);
		assert_int_equal(st.token, ref.tokens[i]);
	}
	sf_engine_ctx_free(f->e, c);
}

/* The simulated engine's memory: cached pages no context holds count until a prefill needs
 * their room. */
static void sim_evicts_cached_pages_for_room(void **state)
{
	(void)state;
	struct sf_sim_config cfg;
	sf_sim_config_default(&cfg);
	cfg.ctx_mem_total = 400 * cfg.ctx_bytes_per_token;
	struct sf_engine *e;
	struct sf_err err;
	assert_int_equal(sf_sim_engine_new(&cfg, &e, &err), 0);
	uint32_t prompt[400];
	fill(prompt, 400, 8);
	struct run r;
	draw(e, 3, NULL, prompt, 300, &r, NULL);
	struct sf_prefix_stats st;
	sf_prefix_stats(sf_engine_prefix_cache(e), &st);
	assert_int_equal(st.pages, 4); /* 319 positions computed */
	assert_int_equal(sf_engine_mem_used(e), 0);
	struct sf_engine_ctx *c;
	assert_int_equal(sf_engine_ctx_new(e, &(struct sf_sampling){ 0 }, &c, &err), 0);
	assert_int_equal(sf_engine_prefill(e, c, prompt + 1, 300, &err), 0);
	sf_prefix_stats(sf_engine_prefix_cache(e), &st);
	assert_int_equal(st.evicted, 3); /* to make room, the pages after first */
	assert_int_equal(st.pages, 1); /* the new context shares nothing */
	sf_engine_ctx_free(e, c);
	sf_engine_free(e);
}

/* N_GEN tokens of each of contexts c[0..3), decoded in the same steps, into got. */
static void decode_together(struct sf_engine *e, struct sf_engine_ctx **c, uint32_t got[3][N_GEN])
{
	struct sf_err err;
	uint32_t n_got[3] = { 0 }, steps = 0;
	while (n_got[0] < N_GEN || n_got[1] < N_GEN || n_got[2] < N_GEN) {
		struct sf_engine_step st[3];
		size_t n = 0;
		int who[3];
		for (int k = 0; k < 3; k++)
			if (n_got[k] < N_GEN) {
				st[n] = (struct sf_engine_step){ .ctx = c[k] };
				who[n++] = k;
			}
		assert_int_equal(sf_engine_decode(e, st, n, &err), 0);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(st[i].rc, 0);
			if (!st[i].more)
				got[who[i]][n_got[who[i]]++] = st[i].token;
		}
		assert_true(++steps < 200);
	}
}

/* Three contexts given one prompt at once, decoded in the same steps: the first computes
 * each page, the others wait for it and adopt it (a burst costs the prefix once), and all
 * three draw the stream a context alone draws. */
static void a_burst_of_one_prompt_computes_it_once(void **state)
{
	struct fx *f = *state;
	struct sf_gguf_engine_config cfg = { .path = f->path, .threads = 1, .ctx_len = 1024,
					     .batch = 4, .chunk = 128 };
	struct sf_engine *e;
	struct sf_err err;
	assert_int_equal(sf_gguf_engine_new(&cfg, &e, &err), 0);
	uint32_t prompt[300];
	fill(prompt, 300, 13);
	struct run ref;
	draw(e, 0, NULL, prompt, 300, &ref, NULL);
	struct sf_engine_ctx *c[3];
	uint32_t got[3][N_GEN];
	for (int k = 0; k < 3; k++) {
		assert_int_equal(sf_engine_ctx_new(e, &(struct sf_sampling){ 0 }, &c[k], &err), 0);
		sf_engine_ctx_share(e, c[k], 31);
		assert_int_equal(sf_engine_prefill(e, c[k], prompt, 300, &err), 0);
		assert_int_equal(sf_engine_ctx_reused(e, c[k]), 0); /* nothing indexed yet */
	}
	decode_together(e, c, got);
	for (int k = 0; k < 3; k++) {
		for (uint32_t i = 0; i < N_GEN; i++)
			if (got[k][i] != ref.tokens[i])
				fail_msg("context %d, token %u: %u, alone %u", k, i, got[k][i], ref.tokens[i]);
		/* The first computed every page; the others adopted the four full ones. */
		assert_int_equal(sf_engine_ctx_reused(e, c[k]), k ? 4 * P : 0);
		sf_engine_ctx_free(e, c[k]);
	}
	sf_engine_free(e);
}

/* The node computes on its job thread while its loop thread appends to other contexts: a
 * context decoding (indexing its pages) beside others adopting, freeing and evicting pages
 * under a tight memory bound, each on its own thread (ThreadSanitizer runs this). */
struct decoder {
	struct sf_engine *e;
	struct sf_engine_ctx *c;
};

static void *decode_thread(void *arg)
{
	struct decoder *d = arg;
	struct sf_err err;
	for (int i = 0; i < 8; i++) {
		struct sf_engine_step st = { .ctx = d->c };
		do {
			st.more = false;
			if (sf_engine_decode(d->e, &st, 1, &err) || st.rc)
				return "decode failed";
		} while (st.more);
	}
	return NULL;
}

static void appends_beside_a_decoding_thread(void **state)
{
	struct fx *f = *state;
	uint64_t page = sf_engine_info(f->e)->ctx_bytes_per_token * P;
	struct sf_engine *e = gguf_engine(f, 16 * page);
	uint32_t prompt[400];
	fill(prompt, 400, 12);
	struct sf_err err;
	for (uint32_t round = 0; round < 6; round++) {
		struct sf_engine_ctx *x;
		assert_int_equal(sf_engine_ctx_new(e, &(struct sf_sampling){ 0 }, &x, &err), 0);
		sf_engine_ctx_share(e, x, 21);
		prompt[150] = round; /* the first two pages shared by every round */
		assert_int_equal(sf_engine_prefill(e, x, prompt, 200 + round * 10, &err), 0);
		struct decoder d = { e, x };
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, decode_thread, &d), 0);
		for (uint32_t k = 0; k < 12; k++) {
			struct sf_engine_ctx *y;
			assert_int_equal(sf_engine_ctx_new(e, &(struct sf_sampling){ 0 }, &y, &err), 0);
			sf_engine_ctx_share(e, y, 21);
			int rc = sf_engine_prefill(e, y, prompt, 140 + k * 20, &err);
			assert_true(rc == 0 || rc == SF_E_NOMEM);
			sf_engine_ctx_free(e, y);
		}
		void *why;
		assert_int_equal(pthread_join(t, &why), 0);
		if (why)
			fail_msg("%s", (const char *)why);
		sf_engine_ctx_free(e, x);
	}
	struct sf_prefix_stats st;
	sf_prefix_stats(sf_engine_prefix_cache(e), &st);
	assert_int_equal(sf_engine_mem_used(e), 0); /* every byte back, the cached ones apart */
	assert_int_equal(st.idle_pages, st.pages);
	assert_true(st.hits > 0);
	sf_engine_free(e);
}

/* ---- a model with recurrent layers (test-qwen35: 3 Gated DeltaNet layers, 1 attention;
 * some cases again on test-granitehybrid: 3 Mamba-2 layers, 1 attention) ---- */

/* The model's state: test-qwen35's 3 layers of 512 channels x 3 taps and 4 heads of 64 x 64,
 * or test-granitehybrid's 3 of 768 channels x 3 taps and 512 channels x 64, F32; either's page
 * (1 attention layer of 2 x 64 keys and values a position, F16) */
static uint64_t STATE_BYTES;
#define PAGE_BYTES (64 * 2 * 128 * 2)

static int setup_recurrent_of(void **state, const char *shape, uint64_t state_bytes)
{
	struct fx *f = calloc(1, sizeof(*f));
	*state = f;
	f->pool = sf_pool_new(1);
	assert_int_equal(sf_test_make_model("prefix_recurrent", N_VOCAB, shape, 4, 5, f->pool,
					    f->path, sizeof(f->path)), 0);
	f->e = gguf_engine(f, 0);
	STATE_BYTES = state_bytes;
	return 0;
}

static int setup_recurrent(void **state)
{
	return setup_recurrent_of(state, "test-qwen35", 3 * (512 * 3 + 4 * 64 * 64) * 4);
}

static int setup_granitehybrid(void **state)
{
	return setup_recurrent_of(state, "test-granitehybrid", 3 * (768 * 3 + 512 * 64) * 4);
}

static void recurrent_reuse_gives_the_same_stream(void **state)
{
	struct fx *f = *state;
	engine_streams_are_the_same_with_reuse(f->e, true);
	struct sf_prefix_stats st;
	sf_prefix_stats(sf_engine_prefix_cache(f->e), &st);
	assert_true(st.hits > 0);
	assert_int_equal(st.tails, 0); /* (a tail holds no state) */
	assert_true(st.states >= 2);
	assert_int_equal(st.idle_pages, st.pages); /* every context is gone */
	assert_int_equal(st.idle_bytes, st.pages * PAGE_BYTES + st.states * STATE_BYTES);
	assert_int_equal(sf_engine_mem_used(f->e), 0);
}

/* An ordinary client's conversation: each turn sends the whole text again (the last reply
 * and a new question after it). Each turn starts from the checkpoint the turn before kept at
 * its prompt's last page end, and draws what a context computing everything draws. */
static void a_conversation_sent_again_starts_from_the_last_turn(void **state)
{
	struct fx *f = *state;
	struct sf_sampling samplings[2] = { { 0 }, { .temperature = 0.9f, .top_p = 0.95f,
						     .seed = 5 } };
	for (int k = 0; k < 2; k++) {
		uint32_t text[400], n = 150;
		fill(text, n, 20 + (uint64_t)k);
		uint32_t want_reused = 0;
		for (int turn = 0; turn < 4; turn++) {
			struct run ref, got;
			draw(f->e, 0, &samplings[k], text, n, &ref, NULL);
			draw(f->e, 40 + (uint64_t)k, &samplings[k], text, n, &got, NULL);
			if (got.reused != want_reused)
				fail_msg("turn %d of %u tokens reused %u, not %u", turn + 1, n,
					 got.reused, want_reused);
			same_run(&ref, &got, "a turn of a conversation");
			/* this turn's checkpoint: its prompt's last page end, or its reply's (the
			 * decode steps computed positions up to n + N_GEN - 2) */
			want_reused = (n - 1) / P * P;
			if ((n + N_GEN - 1) / P * P > n)
				want_reused = (n + N_GEN - 1) / P * P;
			memcpy(text + n, got.tokens, sizeof(got.tokens));
			fill(text + n + N_GEN, 30, 30 + (uint64_t)turn);
			n += N_GEN + 30;
		}
	}
}

/* A reply longer than a page: its decode steps keep a checkpoint at each page end, each in
 * place of the one before, so the reply leaves one, at its last page end (beside its prompt's);
 * the next turn, sent whole, starts from there and draws what computing everything draws. */
static void a_long_reply_leaves_a_checkpoint_at_its_last_page_end(void **state)
{
	struct fx *f = *state;
	struct sf_err err;
	struct sf_prefix_stats st;
	uint32_t text[70 + 150 + 30];
	fill(text, 70, 77);
	sf_prefix_stats(sf_engine_prefix_cache(f->e), &st);
	uint64_t states = st.states;
	struct sf_engine_ctx *c;
	static const struct sf_sampling greedy = { 0 };
	assert_int_equal(sf_engine_ctx_new(f->e, &greedy, &c, &err), 0);
	sf_engine_ctx_share(f->e, c, 90);
	assert_int_equal(sf_engine_prefill(f->e, c, text, 70, &err), 0);
	for (uint32_t i = 0; i < 150; i++) {
		struct sf_engine_step s = { .ctx = c };
		do {
			s.more = false;
			assert_int_equal(sf_engine_decode(f->e, &s, 1, &err), 0);
			assert_int_equal(s.rc, 0);
		} while (s.more);
		text[70 + i] = s.token;
		if (i == 100) { /* past 128: the prompt's at 64 and the reply's at 128 */
			sf_prefix_stats(sf_engine_prefix_cache(f->e), &st);
			assert_int_equal(st.states, states + 2);
		}
	}
	/* positions up to 218 computed: the reply's at 192 only (128's gone), the prompt's */
	sf_prefix_stats(sf_engine_prefix_cache(f->e), &st);
	assert_int_equal(st.states, states + 2);
	sf_engine_ctx_free(f->e, c);
	fill(text + 220, 30, 78);
	struct run ref, got;
	draw(f->e, 0, NULL, text, 250, &ref, NULL);
	draw(f->e, 90, NULL, text, 250, &got, NULL);
	assert_int_equal(got.reused, 192);
	same_run(&ref, &got, "the turn after a long reply");
}

/* A recurrent model's burst: three users' prompts at once, one 200-token system prompt and
 * each its own 40-token question: the first computes the system prompt's pages and keeps a
 * checkpoint where the prompts part (192, the last page end they share), the others wait for
 * it and start from there; each stream what a context alone draws. */
static void a_burst_after_one_system_prompt_computes_it_once(void **state)
{
	struct fx *f = *state;
	struct sf_gguf_engine_config cfg = { .path = f->path, .threads = 1, .ctx_len = 1024,
					     .batch = 4, .chunk = 128 };
	struct sf_engine *e;
	struct sf_err err;
	assert_int_equal(sf_gguf_engine_new(&cfg, &e, &err), 0);
	uint32_t prompt[3][240], got[3][N_GEN];
	struct run ref[3];
	struct sf_engine_ctx *c[3];
	for (int k = 0; k < 3; k++) {
		fill(prompt[k], 200, 17);
		fill(prompt[k] + 200, 40, 18 + (uint64_t)k);
		draw(e, 0, NULL, prompt[k], 240, &ref[k], NULL);
	}
	for (int k = 0; k < 3; k++) {
		assert_int_equal(sf_engine_ctx_new(e, &(struct sf_sampling){ 0 }, &c[k], &err), 0);
		sf_engine_ctx_share(e, c[k], 32);
		assert_int_equal(sf_engine_prefill(e, c[k], prompt[k], 240, &err), 0);
		assert_int_equal(sf_engine_ctx_reused(e, c[k]), 0); /* nothing indexed yet */
	}
	decode_together(e, c, got);
	for (int k = 0; k < 3; k++) {
		for (uint32_t i = 0; i < N_GEN; i++)
			if (got[k][i] != ref[k].tokens[i])
				fail_msg("user %d, token %u: %u, alone %u", k, i, got[k][i],
					 ref[k].tokens[i]);
		assert_int_equal(sf_engine_ctx_reused(e, c[k]), k ? 3 * P : 0);
		sf_engine_ctx_free(e, c[k]);
	}
	sf_engine_free(e);
}

/* Users' own questions after one system prompt (not ending where a page does): the first
 * prompt keeps a checkpoint at its own end only; the second, finding the system prompt's
 * pages but no checkpoint, keeps one where it parts from the first (the system prompt's last
 * full page); the third and later start from there. The same streams as without reuse. */
static void prompts_parting_after_a_shared_prefix_keep_a_checkpoint_there(void **state)
{
	struct fx *f = *state;
	uint32_t text[3 * P + 30 + 60];
	fill(text, 3 * P + 30, 50);
	for (uint64_t u = 0; u < 4; u++) {
		fill(text + 3 * P + 30, 60, 60 + u);
		struct run ref, got;
		draw(f->e, 0, NULL, text, 3 * P + 90, &ref, NULL);
		draw(f->e, 70, NULL, text, 3 * P + 90, &got, NULL);
		assert_int_equal(got.reused, u < 2 ? 0 : 3 * P);
		same_run(&ref, &got, "a user's question after the system prompt");
	}
}

/* Checkpoints are never in use (a context holding their page is past them): they count as
 * reclaimable, and go first, least recently used, to make room before a prefill is refused,
 * their page staying. */
static void checkpoints_count_and_go_before_a_refusal(void **state)
{
	struct fx *f = *state;
	const uint64_t S = STATE_BYTES, p = PAGE_BYTES;
	assert_int_equal(sf_engine_info(f->e)->ctx_bytes_per_token * P, p);
	struct sf_engine *e = gguf_engine(f, 2 * S + 6 * p);
	uint32_t prompt[500];
	fill(prompt, 500, 9);
	struct run a;
	struct sf_engine_ctx *ca;
	draw(e, 9, NULL, prompt, 200, &a, &ca); /* 219 positions: 4 pages, 3 shared */
	/* its state and its pages; the checkpoint at 192 on a page it holds can go */
	assert_int_equal(sf_engine_mem_used(e), S + 4 * p);
	sf_engine_ctx_free(e, ca);
	assert_int_equal(sf_engine_mem_used(e), 0);
	struct sf_prefix_stats st;
	sf_prefix_stats(sf_engine_prefix_cache(e), &st);
	assert_int_equal(st.pages, 3);
	assert_int_equal(st.states, 1);
	assert_int_equal(st.idle_bytes, 3 * p + S);
	/* Six pages of a prompt of its own and a state: the checkpoint makes room (used before
	 * the pages were let go of), the pages stay. */
	struct sf_engine_ctx *c;
	struct sf_err err;
	assert_int_equal(sf_engine_ctx_new(e, &(struct sf_sampling){ 0 }, &c, &err), 0);
	if (sf_engine_prefill(e, c, prompt + 80, 6 * P, &err))
		fail_msg("the checkpoint was not evicted for room: %s", err.msg);
	sf_prefix_stats(sf_engine_prefix_cache(e), &st);
	assert_int_equal(st.evicted, 0);
	assert_int_equal(st.states, 0);
	assert_int_equal(st.pages, 3);
	/* Past the limit with nothing cached but pages: they go too, then it is refused. */
	struct sf_engine_ctx *d;
	assert_int_equal(sf_engine_ctx_new(e, &(struct sf_sampling){ 0 }, &d, &err), 0);
	assert_int_equal(sf_engine_prefill(e, d, prompt, 2 * P, &err), SF_E_NOMEM);
	sf_prefix_stats(sf_engine_prefix_cache(e), &st);
	assert_int_equal(st.pages, 0);
	sf_engine_ctx_free(e, d);
	sf_engine_ctx_free(e, c);
	sf_engine_free(e);
}

/* ---- a model with sliding-window layers (test-gemma3: 2 window layers of 40, 1 global) ---- */

static int setup_window(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	*state = f;
	f->pool = sf_pool_new(1);
	assert_int_equal(sf_test_make_model("prefix_window", N_VOCAB, "test-gemma3", 3, 5, f->pool,
					    f->path, sizeof(f->path)), 0);
	f->e = gguf_engine(f, 0);
	return 0;
}

/* The same streams with reuse: a context adopts pages up to where the index has the window
 * rows its next position reads (kept with the pages, unpinned, when their contexts went past
 * them or went), and tails with their window rows. */
static void window_reuse_gives_the_same_stream(void **state)
{
	struct fx *f = *state;
	engine_streams_are_the_same_with_reuse(f->e, false);
	struct sf_prefix_stats st;
	sf_prefix_stats(sf_engine_prefix_cache(f->e), &st);
	assert_true(st.hits > 0);
	assert_true(st.tails > 0);
	/* every page's and tail's window rows (nothing evicted) */
	assert_int_equal(st.states, st.pages + st.tails);
	assert_int_equal(st.pinned, 0);
	assert_int_equal(sf_engine_mem_used(f->e), 0);
}

/* Logits of positions [from, to) of kv (tokens t) in one call into out (rows by position),
 * then its full pages indexed. */
static void compute(struct sf_model *m, struct sf_kv *kv, const uint32_t *t, uint32_t from,
		    uint32_t to, float *out)
{
	struct sf_pool *pool = sf_pool_new(1);
	struct sf_fwd *fw;
	struct sf_err err;
	assert_int_equal(sf_fwd_new(m, 512, 512, 1, &fw, &err), 0);
	assert_int_equal(sf_kv_reserve(kv, to, &err), 0);
	struct sf_fwd_tok *toks = calloc(to - from, sizeof(*toks));
	for (uint32_t p = from; p < to; p++)
		toks[p - from] = (struct sf_fwd_tok){ kv, p, t[p], true };
	if (sf_model_forward(m, pool, fw, toks, to - from, 0, m->cfg.n_layer, NULL,
			     out + (size_t)from * m->cfg.n_vocab, &err))
		fail_msg("forward: %s", err.msg);
	sf_kv_publish(kv, t);
	free(toks);
	sf_fwd_free(fw);
	sf_pool_free(pool);
}

/* Window blocks in the index: a cache past a page's window rows unpins them (reclaimable, not
 * in use); with some of them evicted, a context adopts up to the last page end whose window
 * rows are still there (past a gap, or behind it), and one cut back behind what it holds goes
 * to the last page end whose rows it finds again; every logit is the one computing gives. */
static void window_blocks_are_held_adopted_and_cut_back_to(void **state)
{
	struct fx *f = *state;
	struct sf_gguf *file;
	struct sf_model *m;
	struct sf_kv_arena *a;
	struct sf_err err;
	assert_int_equal(sf_gguf_open(f->path, &file, &err), 0);
	assert_int_equal(sf_model_load(file, &m, &err), 0);
	assert_int_equal(sf_kv_arena_new(m, 0, &a), 0);
	sf_kv_arena_window_slack(a, 0);
	struct sf_prefix_cache *pc = sf_kv_arena_prefix(a);
	uint64_t pb = sf_kv_arena_page_bytes(a), wb = sf_kv_arena_window_bytes(a), gb = pb - wb;
	size_t V = m->cfg.n_vocab;
	uint32_t t[300], u[300];
	fill(t, 300, 12);
	memcpy(u, t, 150 * sizeof(uint32_t));
	fill(u + 150, 150, 13);
	float *ref = calloc(300 * V, sizeof(float)), *x = calloc(300 * V, sizeof(float));
	float *uref = calloc(300 * V, sizeof(float));
	struct sf_kv r, s; /* references: not shared */
	sf_kv_init(&r, a);
	compute(m, &r, t, 0, 300, ref);
	sf_kv_fini(&r);
	sf_kv_init(&s, a);
	compute(m, &s, u, 0, 300, uref);
	sf_kv_fini(&s);
	assert_int_equal(sf_kv_arena_used(a), 0);
	/* A computes 300 positions shared: 4 full pages indexed with their window rows; 300
	 * reads from 261 (page 4), so pages 0-3's window blocks are unpinned (reclaimable). */
	uint64_t root = sf_prefix_root(77);
	struct sf_kv ka, kb, kc;
	sf_kv_init(&ka, a);
	sf_kv_share(&ka, root);
	compute(m, &ka, t, 0, 300, x);
	assert_memory_equal(x, ref, 300 * V * sizeof(float));
	assert_int_equal(ka.n_shared, 4);
	assert_int_equal(ka.wfrom, 4);
	struct sf_prefix_stats st;
	sf_prefix_stats(pc, &st);
	assert_int_equal(st.states, 4);
	assert_int_equal(st.pinned, 0);
	assert_int_equal(sf_kv_arena_used(a), 5 * pb);
	assert_int_equal(sf_kv_arena_reclaimable(a), 4 * wb); /* in use: 5 pages' global rows, 1 window block */
	/* Page 1's window rows evicted. */
	sf_prefix_drop_state(pc, ka.shared[1]);
	assert_int_equal(sf_kv_arena_used(a), 5 * pb - wb);
	/* B, the same tokens: pages 0-3 (256 reads from 217: page 3's rows, there), past the gap */
	sf_kv_init(&kb, a);
	sf_kv_share(&kb, root);
	assert_int_equal(sf_kv_adopt(&kb, t, 300), 4 * P);
	assert_int_equal(kb.wfrom, 3);
	memset(x, 0, 300 * V * sizeof(float));
	compute(m, &kb, t, 4 * P, 300, x);
	assert_memory_equal(x + 4 * P * V, ref + 4 * P * V, (300 - 4 * P) * V * sizeof(float));
	/* C parts from them at 150: page 2 differs; 128 would read page 1's rows (gone), 64 reads
	 * page 0's: one page adopted, behind the gap */
	sf_kv_init(&kc, a);
	sf_kv_share(&kc, root);
	assert_int_equal(sf_kv_adopt(&kc, u, 300), P);
	memset(x, 0, 300 * V * sizeof(float));
	compute(m, &kc, u, P, 300, x);
	assert_memory_equal(x + P * V, uref + P * V, (300 - P) * V * sizeof(float));
	/* (C computed page 1 again: its window rows are the index's again) */
	assert_true(sf_prefix_has_state(pc, ka.shared[1]));
	sf_kv_fini(&kc);
	sf_prefix_drop_state(pc, ka.shared[1]);
	/* B cut back to 150 (reads from 111: page 1's rows, gone): to 64, whose rows (page 0's)
	 * the index has; computing again gives the same logits */
	sf_kv_truncate(&kb, 150);
	assert_int_equal(kb.n, P);
	assert_int_equal(kb.wfrom, 0);
	memset(x, 0, 300 * V * sizeof(float));
	compute(m, &kb, t, P, 300, x);
	assert_memory_equal(x + P * V, ref + P * V, (300 - P) * V * sizeof(float));
	/* A cut back to 290 (reads from 251: page 3's rows, unpinned but there): pinned again */
	sf_kv_truncate(&ka, 290);
	assert_int_equal(ka.n, 290);
	assert_int_equal(ka.wfrom, 3);
	compute(m, &ka, t, 290, 300, x);
	assert_memory_equal(x + 290 * V, ref + 290 * V, 10 * V * sizeof(float));
	sf_kv_fini(&ka);
	sf_kv_fini(&kb);
	/* every page idle: their global rows and every window block left are reclaimable */
	sf_prefix_stats(pc, &st);
	assert_int_equal(st.pinned, 0);
	assert_int_equal(sf_kv_arena_used(a), sf_kv_arena_reclaimable(a));
	assert_int_equal(sf_kv_arena_used(a), st.pages * gb + st.states * wb);
	while (sf_prefix_evict(pc))
		;
	assert_int_equal(sf_kv_arena_used(a), 0);
	free(ref);
	free(uref);
	free(x);
	sf_kv_arena_free(a);
	sf_model_free(m);
	sf_gguf_close(file);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chain_is_the_pages_hashed_in_turn),
		cmocka_unit_test(index_shares_checks_and_evicts_leaves_first),
		cmocka_unit_test(least_recently_used_goes_first),
		cmocka_unit_test(checkpoints_go_alone_or_with_their_page),
		cmocka_unit_test(pinned_states_stay_until_unpinned),
		cmocka_unit_test(too_many_changes_ask_for_the_list),
		cmocka_unit_test(tails_are_kept_under_their_page),
		cmocka_unit_test(sim_reuse_gives_the_same_stream),
		cmocka_unit_test(sim_evicts_cached_pages_for_room),
		cmocka_unit_test_setup_teardown(gguf_reuse_gives_the_same_stream, setup, teardown),
		cmocka_unit_test_setup_teardown(gguf_q8_0_keys_reuse_gives_the_same_stream, setup,
						teardown),
		cmocka_unit_test_setup_teardown(shared_pages_count_once_and_go_before_a_refusal,
						setup, teardown),
		cmocka_unit_test_setup_teardown(truncating_inside_a_shared_page, setup, teardown),
		cmocka_unit_test_setup_teardown(appends_beside_a_decoding_thread, setup, teardown),
		cmocka_unit_test_setup_teardown(a_burst_of_one_prompt_computes_it_once, setup, teardown),
		cmocka_unit_test_setup_teardown(recurrent_reuse_gives_the_same_stream,
						setup_recurrent, teardown),
		cmocka_unit_test_setup_teardown(a_conversation_sent_again_starts_from_the_last_turn,
						setup_recurrent, teardown),
		cmocka_unit_test_setup_teardown(recurrent_reuse_gives_the_same_stream,
						setup_granitehybrid, teardown),
		cmocka_unit_test_setup_teardown(a_conversation_sent_again_starts_from_the_last_turn,
						setup_granitehybrid, teardown),
		cmocka_unit_test_setup_teardown(checkpoints_count_and_go_before_a_refusal,
						setup_recurrent, teardown),
		cmocka_unit_test_setup_teardown(a_long_reply_leaves_a_checkpoint_at_its_last_page_end,
						setup_recurrent, teardown),
		cmocka_unit_test_setup_teardown(a_burst_after_one_system_prompt_computes_it_once,
						setup_recurrent, teardown),
		cmocka_unit_test_setup_teardown(
			prompts_parting_after_a_shared_prefix_keep_a_checkpoint_there,
			setup_recurrent, teardown),
		cmocka_unit_test_setup_teardown(window_reuse_gives_the_same_stream, setup_window,
						teardown),
		/* (window blocks pinned, unpinned and evicted beside a decoding thread: TSan) */
		cmocka_unit_test_setup_teardown(appends_beside_a_decoding_thread, setup_window,
						teardown),
		cmocka_unit_test_setup_teardown(window_blocks_are_held_adopted_and_cut_back_to,
						setup_window, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
