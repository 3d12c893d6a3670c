/* Packed weights (sf_kern_pack: Q2_K, Q4_K, Q5_K, Q6_K, Q8_0, IQ4_XS, IQ4_NL, MXFP4): the packing is an exact re-arrangement
 * (every row's blocks come back byte for byte), and the products over a packed matrix give,
 * under every instruction set, the scalar reference's bits over the plain one (memcmp) for
 * every batch size, tail shape, row range and partial last slab, writing only the rows asked
 * for and reading only the slabs holding them. An instruction set the CPU lacks is a visible
 * skip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "kern/kern_internal.h"
#include "testutil.h"

static const uint32_t ptypes[] = {SF_GGUF_T_Q4_K,   SF_GGUF_T_Q6_K,   SF_GGUF_T_Q8_0,
				  SF_GGUF_T_IQ4_XS, SF_GGUF_T_IQ4_NL, SF_GGUF_T_MXFP4,
				  SF_GGUF_T_Q2_K,   SF_GGUF_T_Q5_K};
#define NPT (sizeof(ptypes) / sizeof(ptypes[0]))

static uint64_t rng = 0x5eed;

static float gauss(void)
{
	double u = (double)((sf_test_rand(&rng) >> 11) + 1) * (1.0 / 9007199254740992.0);
	double v = (double)(sf_test_rand(&rng) >> 11) * (1.0 / 9007199254740992.0);
	return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

struct prob {
	uint32_t type;
	int64_t k, rows, nb;
	size_t w_stride, x_stride;
	uint8_t *W, *P, *X; /* plain rows, the packed matrix, activations */
};

/* rows x k weights (quantized from floats, or random bytes with finite scales when raw) and nb
 * activation rows; the matrix packed. */
static void prob_make(struct prob *p, uint32_t type, int64_t k, int64_t rows, int64_t nb,
		      bool raw)
{
	const struct sf_kt *t = sf_kt(type);
	p->type = type;
	p->k = k;
	p->rows = rows;
	p->nb = nb;
	p->w_stride = sf_kt_row_bytes(type, k) + t->bytes; /* rows not contiguous */
	p->x_stride = sf_kern_act_row_bytes(type, k) + 4;
	p->W = calloc((size_t)rows, p->w_stride);
	p->X = calloc((size_t)nb, p->x_stride);
	float *f = malloc((size_t)k * sizeof(float));
	assert_non_null(p->W);
	assert_non_null(p->X);
	assert_non_null(f);
	for (int64_t r = 0; r < rows; r++) {
		uint8_t *w = p->W + (size_t)r * p->w_stride;
		if (raw) {
			for (size_t i = 0; i < sf_kt_row_bytes(type, k); i++)
				w[i] = (uint8_t)sf_test_rand(&rng);
			for (int64_t b = 0; b < k / t->block; b++) {
				uint8_t *blk = w + (size_t)b * t->bytes;
				if (type == SF_GGUF_T_Q4_K || type == SF_GGUF_T_Q5_K) {
					blk[1] &= 0xBB;
					blk[3] &= 0xBB;
				} else if (type == SF_GGUF_T_Q6_K) {
					blk[209] &= 0xBB;
				} else if (type == SF_GGUF_T_Q2_K) {
					blk[81] &= 0xBB;
					blk[83] &= 0xBB;
				} else if (type == SF_GGUF_T_MXFP4) {
					blk[0] = (uint8_t)(blk[0] % 160); /* scales 2^-128 .. 2^31 */
				} else {
					blk[1] &= 0xBB; /* quants of -128 stay: a file may hold them */
				}
			}
		} else {
			const float scale = (r % 3 == 2) ? 1e4f : 1.0f;
			for (int64_t i = 0; i < k; i++)
				f[i] = gauss() * scale;
			t->quantize(f, w, k);
		}
	}
	for (int64_t b = 0; b < nb; b++) {
		for (int64_t i = 0; i < k; i++)
			f[i] = b % 4 == 3 && i % 512 < 256 ? 0.0f : gauss();
		sf_kern_quantize_act(t->act_type, f, p->X + (size_t)b * p->x_stride, k);
	}
	free(f);
	const size_t pb = sf_kern_packed_bytes(type, k, rows);
	assert_true(pb >= (size_t)rows * sf_kt_row_bytes(type, k));
	p->P = malloc(pb);
	assert_non_null(p->P);
	assert_int_equal(sf_kern_pack(type, k, p->W, p->w_stride, rows, p->P), 0);
}

static void prob_free(struct prob *p)
{
	free(p->W);
	free(p->P);
	free(p->X);
}

static bool same_bits(float a, float b)
{
	return memcmp(&a, &b, sizeof(a)) == 0 || (isnan(a) && isnan(b));
}

#define MARK -12345.0f

static float *marked(size_t n)
{
	float *y = malloc(n * sizeof(float));
	assert_non_null(y);
	for (size_t i = 0; i < n; i++)
		y[i] = MARK;
	return y;
}

/* Rows [r0, r1) of the packed matrix under isa against the scalar reference on the plain rows. */
static void check_range(const struct prob *p, enum sf_kisa isa, int64_t r0, int64_t r1)
{
	const size_t ldy = (size_t)p->rows + 5;
	const uint32_t pt = sf_kern_packed_type(p->type);
	assert_int_equal(sf_kern_force_isa(SF_KISA_SCALAR), 0);
	float *ref = marked((size_t)p->nb * ldy);
	sf_kern_matmul(p->type, p->k, p->W, p->w_stride, r0, r1, p->X, p->x_stride, p->nb, ref, ldy);
	assert_int_equal(sf_kern_force_isa(isa), 0);
	float *got = marked((size_t)p->nb * ldy);
	sf_kern_matmul(pt, p->k, p->P, 0, r0, r1, p->X, p->x_stride, p->nb, got, ldy);
	for (int64_t b = 0; b < p->nb; b++)
		for (int64_t r = 0; r < (int64_t)ldy; r++) {
			const float g = got[(size_t)b * ldy + (size_t)r], e = ref[(size_t)b * ldy + (size_t)r];
			if (r < r0 || r >= r1) {
				if (g != MARK)
					fail_msg("%s %s: cell (%lld, %lld) outside [%lld, %lld) written",
						 sf_kern_isa_name(isa), sf_kt(pt)->name, (long long)b,
						 (long long)r, (long long)r0, (long long)r1);
				continue;
			}
			if (!same_bits(g, e))
				fail_msg("%s %s k=%lld rows=%lld nb=%lld [%lld, %lld) row %lld act %lld: %a, "
					 "plain scalar %a",
					 sf_kern_isa_name(isa), sf_kt(pt)->name, (long long)p->k,
					 (long long)p->rows, (long long)p->nb, (long long)r0, (long long)r1,
					 (long long)r, (long long)b, g, e);
		}
	free(ref);
	free(got);
}

/* Every row's super-blocks come back from the packed slabs byte for byte; padding rows are 0. */
static void pack_is_exact(void **state)
{
	(void)state;
	const int64_t rows_of[] = {1, 15, 16, 17, 40};
	for (size_t t = 0; t < NPT; t++)
		for (size_t ri = 0; ri < 5; ri++) {
			struct prob p;
			const int64_t k = 768, nsb = k / sf_kt(ptypes[t])->block;
			prob_make(&p, ptypes[t], k, rows_of[ri], 1, ri & 1);
			const size_t bb = sf_kt(p.type)->bytes, xb = 16 * bb;
			const int64_t slabs = (p.rows + 15) / 16;
			assert_int_equal(sf_kern_packed_bytes(p.type, k, p.rows), (size_t)(slabs * nsb) * xb);
			for (int64_t r = 0; r < 16 * slabs; r++)
				for (int64_t s = 0; s < nsb; s++) {
					uint8_t blk[256], zero[256] = {0};
					const uint8_t *x = p.P + (size_t)((r / 16) * nsb + s) * xb;
					if (p.type == SF_GGUF_T_Q4_K)
						sf__q4kx_get((const struct sf__q4_kx *)x, (int)(r % 16),
							     (struct sf__q4_k *)blk);
					else if (p.type == SF_GGUF_T_Q6_K)
						sf__q6kx_get((const struct sf__q6_kx *)x, (int)(r % 16),
							     (struct sf__q6_k *)blk);
					else if (p.type == SF_GGUF_T_Q2_K)
						sf__q2kx_get((const struct sf__q2_kx *)x, (int)(r % 16),
							     (struct sf__q2_k *)blk);
					else if (p.type == SF_GGUF_T_Q5_K)
						sf__q5kx_get((const struct sf__q5_kx *)x, (int)(r % 16),
							     (struct sf__q5_k *)blk);
					else if (p.type == SF_GGUF_T_IQ4_XS)
						sf__iq4xsx_get((const struct sf__iq4_xsx *)x, (int)(r % 16),
							       (struct sf__iq4_xs *)blk);
					else if (p.type == SF_GGUF_T_IQ4_NL)
						sf__iq4nlx_get((const struct sf__iq4_nlx *)x, (int)(r % 16),
							       (struct sf__iq4_nl *)blk);
					else if (p.type == SF_GGUF_T_MXFP4)
						sf__mxfp4x_get((const struct sf__mxfp4x *)x, (int)(r % 16),
							       (struct sf__mxfp4 *)blk);
					else
						sf__q80x_get((const struct sf__q8_0x *)x, (int)(r % 16),
							     (struct sf__q8_0 *)blk);
					const uint8_t *want = r < p.rows ? p.W + (size_t)r * p.w_stride + s * bb
									 : zero;
					assert_memory_equal(blk, want, bb);
				}
			prob_free(&p);
		}
	/* A type without a packed form is refused. */
	uint8_t w[34] = {0}, out[64];
	assert_int_equal(sf_kern_packed_type(SF_GGUF_T_Q4_0), 0);
	assert_int_equal(sf_kern_packed_bytes(SF_GGUF_T_Q4_0, 32, 1), 0);
	assert_int_equal(sf_kern_pack(SF_GGUF_T_Q4_0, 32, w, 18, 1, out), -1);
	assert_int_equal(sf_kern_packed_bytes(SF_GGUF_T_Q4_K, 100, 1), 0);
	assert_int_equal(sf_kern_packed_bytes(SF_GGUF_T_Q8_0, 48, 1), 0);
}

/* A row written into a slab by sf_kern_pack_row_q8_0 (keys cached as Q8_0) is the row
 * sf_kern_pack makes of the same floats quantized as activations, the slab's other rows as
 * they were. */
static void pack_row_q8_0_is_pack(void **state)
{
	(void)state;
	enum { K = 128, ROWS = 16 };
	static float x[ROWS][K];
	static struct sf__q8_0 q[ROWS][K / 32];
	static uint8_t want[ROWS * K / 32 * sizeof(struct sf__q8_0)],
		got[ROWS * K / 32 * sizeof(struct sf__q8_0)];
	for (int r = 0; r < ROWS; r++) {
		for (int i = 0; i < K; i++)
			x[r][i] = gauss() * (r + 1);
		sf_kern_quantize_act(SF_GGUF_T_Q8_0, x[r], q[r], K);
	}
	assert_int_equal(sf_kern_pack(SF_GGUF_T_Q8_0, K, q, sizeof(q[0]), ROWS, want), 0);
	memset(got, 0xA5, sizeof(got));
	for (int r = 0; r < ROWS; r++) {
		sf_kern_pack_row_q8_0(got, K, (r * 7) % ROWS, x[(r * 7) % ROWS]);
		if (r == 0) { /* only that row's bytes were written */
			size_t changed = 0;
			for (size_t i = 0; i < sizeof(got); i++)
				changed += got[i] != 0xA5;
			assert_true(changed <= K + K / 32 * 2);
		}
	}
	assert_memory_equal(got, want, sizeof(want));
}

static void check_isa(enum sf_kisa isa)
{
	if (!sf_kern_isa_supported(isa)) {
		printf("[  SKIP    ] this CPU lacks %s: its packed kernels are not checked here\n",
		       sf_kern_isa_name(isa));
		skip();
	}
	enum sf_kisa saved = sf_kern_isa();
	const int64_t nbs[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17};
	const int64_t ks[] = {256, 512, 768, 1280, 2304, 2560};
	const int64_t ks32[] = {32, 64, 96, 512, 544, 896};
	const int64_t rows_of[] = {1, 7, 16, 19, 40};
	for (size_t t = 0; t < NPT; t++)
		for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++)
			for (size_t ri = 0; ri < sizeof(rows_of) / sizeof(rows_of[0]); ri++)
				for (size_t ni = 0; ni < sizeof(nbs) / sizeof(nbs[0]); ni++) {
					if ((ki + ri + ni) % 3 && nbs[ni] > 4)
						continue; /* a third of the large batches keeps it quick */
					const int64_t rows = rows_of[ri];
					struct prob p;
					const int64_t k = sf_kt(ptypes[t])->block == 32 ? ks32[ki] : ks[ki];
					prob_make(&p, ptypes[t], k, rows, nbs[ni], (ki + ni) % 2);
					check_range(&p, isa, 0, rows);
					if (rows > 2)
						check_range(&p, isa, 1, rows - 1);
					if (rows > 17) {
						check_range(&p, isa, 16, rows);
						check_range(&p, isa, 3, 18);
						check_range(&p, isa, 9, 10);
					}
					prob_free(&p);
				}
	sf_kern_force_isa(saved);
}

static void scalar_packed_matches_plain(void **state)
{
	(void)state;
	check_isa(SF_KISA_SCALAR);
}

static void avx2_packed_matches_scalar(void **state)
{
	(void)state;
	check_isa(SF_KISA_AVX2);
}

static void avx512_packed_matches_scalar(void **state)
{
	(void)state;
	check_isa(SF_KISA_AVX512);
}

/* Long rows (slabs larger than the kernels' L2 block: one slab a block) and many activation
 * rows (several tiles), and the single dot (row 0 of the first slab). */
static void long_rows_and_dot(void **state)
{
	(void)state;
	enum sf_kisa saved = sf_kern_isa();
	for (size_t t = 0; t < NPT; t++) {
		struct prob p;
		/* 32-element blocks past 512: their prepared sums on the heap */
		prob_make(&p, ptypes[t], sf_kt(ptypes[t])->block == 32 ? 32 * 1100 : 256 * 230, 35, 11,
			  false);
		for (int isa = SF_KISA_SCALAR; isa <= SF_KISA_AVX512; isa++)
			if (sf_kern_isa_supported((enum sf_kisa)isa)) {
				check_range(&p, (enum sf_kisa)isa, 0, 35);
				check_range(&p, (enum sf_kisa)isa, 5, 33);
			}
		assert_int_equal(sf_kern_force_isa(SF_KISA_SCALAR), 0);
		const float ref = sf_kern_dot(p.type, p.k, p.W, p.X);
		for (int isa = SF_KISA_SCALAR; isa <= SF_KISA_AVX512; isa++) {
			if (sf_kern_force_isa((enum sf_kisa)isa))
				continue;
			const float d = sf_kern_dot(sf_kern_packed_type(p.type), p.k, p.P, p.X);
			if (!same_bits(d, ref))
				fail_msg("%s dot: %a, plain %a", sf_kern_isa_name((enum sf_kisa)isa), d, ref);
		}
		prob_free(&p);
	}
	sf_kern_force_isa(saved);
}

/* n bytes copied to the very start (front) or end of a mapping fenced by inaccessible pages. */
static uint8_t *fenced(const uint8_t *bytes, size_t n, bool front, void **map, size_t *maplen)
{
	const size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (n + pg - 1) / pg * pg;
	*maplen = body + 2 * pg;
	uint8_t *m = mmap(NULL, *maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(m != MAP_FAILED);
	assert_int_equal(mprotect(m, pg, PROT_NONE), 0);
	assert_int_equal(mprotect(m + pg + body, pg, PROT_NONE), 0);
	*map = m;
	uint8_t *p = front ? m + pg : m + pg + body - n;
	memcpy(p, bytes, n);
	return p;
}

/* No kernel reads outside the slabs holding the rows it was given, nor outside the
 * activations. */
/* The largest codes against the largest activations: every quant byte (and Q5_K's fifth bits)
 * all ones, every activation 127 or -127 in runs, so that any int16 sum a kernel keeps would
 * overflow if it ran a step too long (Q5_K's codes 31: four steps of pairs fit int16, eight do
 * not). */
static void extreme_codes(void **state)
{
	(void)state;
	enum sf_kisa saved = sf_kern_isa();
	for (size_t t = 0; t < NPT; t++) {
		const struct sf_kt *kt = sf_kt(ptypes[t]);
		struct prob p;
		prob_make(&p, ptypes[t], 512, 20, 3, true);
		for (int64_t r = 0; r < p.rows; r++)
			for (int64_t b = 0; b < p.k / kt->block; b++) {
				uint8_t *blk = p.W + (size_t)r * p.w_stride + (size_t)b * kt->bytes;
				if (ptypes[t] == SF_GGUF_T_Q5_K) /* qh and qs after d, dmin, scales */
					memset(blk + 16, 0xFF, 32 + 128);
				else if (ptypes[t] == SF_GGUF_T_Q4_K)
					memset(blk + 16, 0xFF, 128);
			}
		float *f = malloc((size_t)p.k * sizeof(float));
		for (int64_t b = 0; b < p.nb; b++) {
			for (int64_t i = 0; i < p.k; i++)
				f[i] = b == 1 && (i / 64) % 2 ? -1.0f : 1.0f;
			sf_kern_quantize_act(kt->act_type, f, p.X + (size_t)b * p.x_stride, p.k);
		}
		free(f);
		assert_int_equal(sf_kern_pack(p.type, p.k, p.W, p.w_stride, p.rows, p.P), 0);
		for (int isa = SF_KISA_SCALAR; isa <= SF_KISA_AVX512; isa++)
			if (sf_kern_isa_supported((enum sf_kisa)isa))
				check_range(&p, (enum sf_kisa)isa, 0, p.rows);
		prob_free(&p);
	}
	sf_kern_force_isa(saved);
}

static void reads_stay_in_slabs(void **state)
{
	(void)state;
	enum sf_kisa saved = sf_kern_isa();
	for (size_t t = 0; t < NPT; t++) {
		struct prob p;
		prob_make(&p, ptypes[t], 512, 21, 2, false);
		const uint32_t pt = sf_kern_packed_type(p.type);
		const size_t slab = 16 * sf_kt_row_bytes(pt, p.k);
		const size_t xb = sf_kern_act_row_bytes(p.type, p.k);
		uint8_t *xs = malloc(2 * xb);
		memcpy(xs, p.X, xb);
		memcpy(xs + xb, p.X + p.x_stride, xb);
		for (int front = 0; front < 2; front++)
			for (int second = 0; second < 2; second++) {
				void *mw, *mx;
				size_t lw, lx;
				const uint8_t *w = fenced(p.P + (second ? slab : 0), slab, front, &mw, &lw);
				const uint8_t *x = fenced(xs, 2 * xb, !front, &mx, &lx);
				for (int isa = SF_KISA_SCALAR; isa <= SF_KISA_AVX512; isa++) {
					if (sf_kern_force_isa((enum sf_kisa)isa))
						continue;
					float y[2 * 32];
					/* rows of the slab alone, addressed from where slab 0 would be */
					const uint8_t *base = second ? w - slab : w;
					const int64_t r0 = second ? 16 : 2, r1 = second ? 21 : 14;
					sf_kern_matmul(pt, p.k, base, 0, r0, r1, x, xb, 2, y, 32);
				}
				munmap(mw, lw);
				munmap(mx, lx);
			}
		free(xs);
		prob_free(&p);
	}
	sf_kern_force_isa(saved);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pack_is_exact),
		cmocka_unit_test(pack_row_q8_0_is_pack),
		cmocka_unit_test(scalar_packed_matches_plain),
		cmocka_unit_test(avx2_packed_matches_scalar),
		cmocka_unit_test(avx512_packed_matches_scalar),
		cmocka_unit_test(long_rows_and_dot),
		cmocka_unit_test(reads_stay_in_slabs),
		cmocka_unit_test(extreme_codes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
