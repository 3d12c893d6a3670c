/* The encoding cache: hits and misses, replacement, least-recently-used order with gets
 * refreshing it, pruning to half the budget, oversized encodings, and keys that tell text from
 * pieces, special flags and every other field apart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "head/tok_cache.h"

static void key_of(const char *text, uint8_t key[32])
{
	sf_tok_cache_key("m", 7, SF_TOKENIZE_ENCODE, text, strlen(text), NULL, 0, key);
}

/* n tokens, each first + i. */
static void fill(uint32_t *t, uint32_t n, uint32_t first)
{
	for (uint32_t i = 0; i < n; i++)
		t[i] = first + i;
}

static bool held(struct sf_tok_cache *c, const char *text)
{
	uint8_t k[32];
	uint32_t n;
	key_of(text, k);
	return sf_tok_cache_get(c, k, &n) != NULL;
}

static void hit_and_miss(void **state)
{
	(void)state;
	struct sf_tok_cache *c = sf_tok_cache_new(0);
	assert_non_null(c);
	uint8_t k[32], other[32];
	key_of("hello", k);
	key_of("world", other);
	uint32_t n = 99, toks[5];
	assert_null(sf_tok_cache_get(c, k, &n));
	fill(toks, 5, 100);
	assert_int_equal(sf_tok_cache_put(c, k, toks, 5), 0);
	const uint32_t *got = sf_tok_cache_get(c, k, &n);
	assert_non_null(got);
	assert_int_equal(n, 5);
	assert_memory_equal(got, toks, sizeof(toks));
	assert_null(sf_tok_cache_get(c, other, &n));
	struct sf_tok_cache_stats st;
	sf_tok_cache_stats(c, &st);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.misses, 2);
	assert_int_equal(st.inserts, 1);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.tokens, 5);
	/* An empty encoding is an answer too. */
	assert_int_equal(sf_tok_cache_put(c, other, NULL, 0), 0);
	assert_non_null(sf_tok_cache_get(c, other, &n));
	assert_int_equal(n, 0);
	sf_tok_cache_free(c);
}

static void replacement(void **state)
{
	(void)state;
	struct sf_tok_cache *c = sf_tok_cache_new(100);
	uint8_t k[32];
	key_of("x", k);
	uint32_t a[10], b[3], n;
	fill(a, 10, 1);
	fill(b, 3, 50);
	assert_int_equal(sf_tok_cache_put(c, k, a, 10), 0);
	assert_int_equal(sf_tok_cache_put(c, k, b, 3), 0);
	const uint32_t *got = sf_tok_cache_get(c, k, &n);
	assert_int_equal(n, 3);
	assert_memory_equal(got, b, sizeof(b));
	struct sf_tok_cache_stats st;
	sf_tok_cache_stats(c, &st);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.tokens, 3);
	assert_int_equal(st.inserts, 2);
	assert_int_equal(st.evicted_entries, 0);
	sf_tok_cache_free(c);
}

/* Budget 100: four entries of 30 go past it; the oldest go until at most 50 are left. */
static void prunes_to_half_in_lru_order(void **state)
{
	(void)state;
	struct sf_tok_cache *c = sf_tok_cache_new(100);
	uint32_t t[30];
	uint8_t k[32];
	fill(t, 30, 0);
	const char *names[] = { "a", "b", "c" };
	for (int i = 0; i < 3; i++) {
		key_of(names[i], k);
		assert_int_equal(sf_tok_cache_put(c, k, t, 30), 0);
	}
	/* a is used again: b is now the least recently used. */
	assert_true(held(c, "a"));
	struct sf_tok_cache_stats st;
	sf_tok_cache_stats(c, &st);
	assert_int_equal(st.tokens, 90);
	key_of("d", k);
	assert_int_equal(sf_tok_cache_put(c, k, t, 30), 0);
	sf_tok_cache_stats(c, &st);
	/* 120 > 100: b, c, then a go (90 -> 30 <= 50); d stays. */
	assert_int_equal(st.tokens, 30);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.evicted_entries, 3);
	assert_int_equal(st.evicted_tokens, 90);
	assert_true(held(c, "d"));
	assert_false(held(c, "a"));
	assert_false(held(c, "b"));
	assert_false(held(c, "c"));
	sf_tok_cache_free(c);
}

/* Only as many of the oldest go as it takes to reach half. */
static void keeps_the_recent_ones(void **state)
{
	(void)state;
	struct sf_tok_cache *c = sf_tok_cache_new(100);
	uint32_t t[20];
	uint8_t k[32];
	fill(t, 20, 0);
	const char *names[] = { "a", "b", "c", "d", "e" };
	for (int i = 0; i < 5; i++) {
		key_of(names[i], k);
		assert_int_equal(sf_tok_cache_put(c, k, t, 20), 0);
	}
	assert_true(held(c, "b")); /* order, oldest first: a c d e b */
	assert_true(held(c, "a")); /* c d e b a */
	key_of("f", k);
	assert_int_equal(sf_tok_cache_put(c, k, t, 10), 0); /* 110: c, d, e go -> 50 */
	struct sf_tok_cache_stats st;
	sf_tok_cache_stats(c, &st);
	assert_int_equal(st.tokens, 50);
	assert_int_equal(st.evicted_entries, 3);
	assert_true(held(c, "a"));
	assert_true(held(c, "b"));
	assert_true(held(c, "f"));
	assert_false(held(c, "c"));
	assert_false(held(c, "d"));
	assert_false(held(c, "e"));
	sf_tok_cache_free(c);
}

static void oversized(void **state)
{
	(void)state;
	struct sf_tok_cache *c = sf_tok_cache_new(100);
	uint32_t *t = calloc(101, sizeof(*t));
	uint8_t k[32];
	struct sf_tok_cache_stats st;
	/* Over the whole budget: not kept, and the cache is untouched. */
	key_of("small", k);
	assert_int_equal(sf_tok_cache_put(c, k, t, 10), 0);
	key_of("huge", k);
	assert_int_equal(sf_tok_cache_put(c, k, t, 101), 0);
	assert_false(held(c, "huge"));
	assert_true(held(c, "small"));
	sf_tok_cache_stats(c, &st);
	assert_int_equal(st.tokens, 10);
	assert_int_equal(st.inserts, 1);
	/* Within the budget but over half: it takes the total past the budget, and alone it is
	 * more than half, so everything goes, it too. */
	key_of("big", k);
	assert_int_equal(sf_tok_cache_put(c, k, t, 95), 0);
	assert_false(held(c, "big"));
	assert_false(held(c, "small"));
	sf_tok_cache_stats(c, &st);
	assert_int_equal(st.tokens, 0);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.evicted_entries, 2);
	assert_int_equal(st.evicted_tokens, 105);
	/* Over half but not past the budget: kept. */
	assert_int_equal(sf_tok_cache_put(c, k, t, 95), 0);
	assert_true(held(c, "big"));
	free(t);
	sf_tok_cache_free(c);
}

static void keys_differ(void **state)
{
	(void)state;
	uint8_t k[8][32];
	struct sf_piece ab = { .text = "ab", .text_len = 2 };
	struct sf_piece a_b[2] = { { .text = "a", .text_len = 1 }, { .text = "b", .text_len = 1 } };
	struct sf_piece ab_special = { .text = "ab", .text_len = 2, .special = true };
	sf_tok_cache_key("m", 7, SF_TOKENIZE_ENCODE, "ab", 2, NULL, 0, k[0]);
	sf_tok_cache_key("m", 7, SF_TOKENIZE_PLAIN, "ab", 2, NULL, 0, k[1]);
	sf_tok_cache_key("m", 7, SF_TOKENIZE_PIECES, NULL, 0, &ab, 1, k[2]);
	sf_tok_cache_key("m", 7, SF_TOKENIZE_PIECES, NULL, 0, a_b, 2, k[3]);
	sf_tok_cache_key("m", 7, SF_TOKENIZE_PIECES, NULL, 0, &ab_special, 1, k[4]);
	sf_tok_cache_key("m", 8, SF_TOKENIZE_ENCODE, "ab", 2, NULL, 0, k[5]);
	sf_tok_cache_key("mx", 7, SF_TOKENIZE_ENCODE, "ab", 2, NULL, 0, k[6]);
	/* A model name that runs into the text must not look like a shorter one. */
	sf_tok_cache_key("ma", 7, SF_TOKENIZE_ENCODE, "b", 1, NULL, 0, k[7]);
	for (int i = 0; i < 8; i++)
		for (int j = i + 1; j < 8; j++)
			assert_memory_not_equal(k[i], k[j], 32);
	/* The same request gives the same key; text in a pieces request is not looked at. */
	uint8_t again[32];
	sf_tok_cache_key("m", 7, SF_TOKENIZE_PIECES, "zz", 2, &ab, 1, again);
	assert_memory_equal(again, k[2], 32);
	sf_tok_cache_key("m", 7, SF_TOKENIZE_ENCODE, "ab", 2, NULL, 0, again);
	assert_memory_equal(again, k[0], 32);
}

/* Many entries: the table grows and every one is still found. */
static void many_entries(void **state)
{
	(void)state;
	struct sf_tok_cache *c = sf_tok_cache_new(100000);
	char name[32];
	uint32_t t[3] = { 1, 2, 3 };
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "text %d", i);
		uint8_t k[32];
		key_of(name, k);
		t[0] = (uint32_t)i;
		assert_int_equal(sf_tok_cache_put(c, k, t, 3), 0);
	}
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "text %d", i);
		uint8_t k[32];
		uint32_t n;
		key_of(name, k);
		const uint32_t *got = sf_tok_cache_get(c, k, &n);
		assert_non_null(got);
		assert_int_equal(got[0], (uint32_t)i);
	}
	struct sf_tok_cache_stats st;
	sf_tok_cache_stats(c, &st);
	assert_int_equal(st.entries, 5000);
	assert_int_equal(st.tokens, 15000);
	sf_tok_cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hit_and_miss),
		cmocka_unit_test(replacement),
		cmocka_unit_test(prunes_to_half_in_lru_order),
		cmocka_unit_test(keeps_the_recent_ones),
		cmocka_unit_test(oversized),
		cmocka_unit_test(keys_differ),
		cmocka_unit_test(many_entries),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
