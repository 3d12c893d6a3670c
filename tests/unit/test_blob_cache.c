/* The head's blob cache: bounded in bytes, least recently used first out, pinned blobs never
 * evicted, a blob over the bound or a cache held by pins refused with the cache unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <sodium.h>

#include "head/blob_cache.h"

static void fill(uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(v + i * 7);
}

static void test_put_get_hash(void **state)
{
	struct sf_blob_cache *c = sf_blob_cache_new(0);
	assert_non_null(c);
	uint8_t data[100], sha[32], want[32];
	struct sf_err err;
	fill(data, sizeof(data), 1);
	assert_int_equal(sf_blob_cache_put(c, data, sizeof(data), sha, &err), 0);
	crypto_hash_sha256(want, data, sizeof(data));
	assert_memory_equal(sha, want, 32);
	size_t len = 0;
	const uint8_t *p = sf_blob_cache_get(c, sha, &len);
	assert_non_null(p);
	assert_int_equal(len, sizeof(data));
	assert_memory_equal(p, data, sizeof(data));
	/* The same bytes again: a hit, one entry. */
	assert_int_equal(sf_blob_cache_put(c, data, sizeof(data), sha, &err), 0);
	struct sf_blob_cache_stats st;
	sf_blob_cache_stats(c, &st);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.bytes, 100);
	assert_int_equal(st.hits, 1);
	/* An empty blob is a blob too. */
	assert_int_equal(sf_blob_cache_put(c, "", 0, sha, &err), 0);
	assert_non_null(sf_blob_cache_get(c, sha, &len));
	assert_int_equal(len, 0);
	sf_blob_cache_free(c);
}

static void test_eviction_bounds(void **state)
{
	struct sf_blob_cache *c = sf_blob_cache_new(1000);
	uint8_t a[400], b[400], cc[400], d[400], e[700], big[1001];
	uint8_t sa[32], sb[32], sc[32], sd[32], se[32], sbig[32];
	size_t len;
	struct sf_err err;
	fill(a, 400, 1), fill(b, 400, 2), fill(cc, 400, 3), fill(d, 400, 4), fill(e, 700, 5);
	fill(big, sizeof(big), 6);
	assert_int_equal(sf_blob_cache_put(c, a, 400, sa, &err), 0);
	assert_int_equal(sf_blob_cache_put(c, b, 400, sb, &err), 0);
	assert_int_equal(sf_blob_cache_put(c, cc, 400, sc, &err), 0);
	assert_null(sf_blob_cache_get(c, sa, &len)); /* the least recent went */
	assert_non_null(sf_blob_cache_get(c, sb, &len));
	assert_non_null(sf_blob_cache_get(c, sc, &len));
	/* B pinned (and so most recent): D pushes out C, not B. */
	assert_true(sf_blob_cache_pin(c, sb));
	assert_int_equal(sf_blob_cache_put(c, d, 400, sd, &err), 0);
	assert_null(sf_blob_cache_get(c, sc, &len));
	assert_non_null(sf_blob_cache_get(c, sb, &len));
	assert_non_null(sf_blob_cache_get(c, sd, &len));
	/* E needs B's room too: refused while B is pinned, and nothing was dropped. */
	assert_int_equal(sf_blob_cache_put(c, e, 700, se, &err), SF_E_LIMIT);
	assert_non_null(strstr(err.msg, "running requests"));
	assert_non_null(sf_blob_cache_get(c, sd, &len));
	struct sf_blob_cache_stats st;
	sf_blob_cache_stats(c, &st);
	assert_int_equal(st.bytes, 800);
	assert_int_equal(st.pinned, 1);
	/* Pinned twice, unpinned twice. */
	assert_true(sf_blob_cache_pin(c, sb));
	sf_blob_cache_unpin(c, sb);
	assert_int_equal(sf_blob_cache_put(c, e, 700, se, &err), SF_E_LIMIT);
	sf_blob_cache_unpin(c, sb);
	assert_int_equal(sf_blob_cache_put(c, e, 700, se, &err), 0);
	sf_blob_cache_stats(c, &st);
	assert_int_equal(st.bytes, 700);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.pinned, 0);
	assert_true(st.bytes <= 1000);
	/* Over the bound alone. */
	assert_int_equal(sf_blob_cache_put(c, big, sizeof(big), sbig, &err), SF_E_LIMIT);
	assert_non_null(sf_blob_cache_get(c, se, &len));
	assert_false(sf_blob_cache_pin(c, sa)); /* not held */
	sf_blob_cache_unpin(c, sa);             /* ignored */
	sf_blob_cache_free(c);
}

static void test_many_small(void **state)
{
	/* Bounded in entries as well as bytes. */
	struct sf_blob_cache *c = sf_blob_cache_new(1u << 30);
	struct sf_err err;
	uint8_t sha[32];
	for (uint32_t i = 0; i < SF_BLOB_CACHE_MAX_ENTRIES + 10; i++)
		assert_int_equal(sf_blob_cache_put(c, &i, sizeof(i), sha, &err), 0);
	struct sf_blob_cache_stats st;
	sf_blob_cache_stats(c, &st);
	assert_int_equal(st.entries, SF_BLOB_CACHE_MAX_ENTRIES);
	assert_int_equal(st.evictions, 10);
	sf_blob_cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_get_hash),
		cmocka_unit_test(test_eviction_bounds),
		cmocka_unit_test(test_many_small),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
