/* The row loops of the K-quant SIMD kernels (dot_k*_avx2.c, dot_k*_avx512.c), shared: a file
 * includes this after defining TILE, KG (super-blocks in a group), WBLOCK_BYTES, AI and
 *   AI void group(uint32_t type, const uint8_t *wb, const uint8_t *a, size_t x_stride,
 *                 __m256 *acc, const int n, const int nt)
 * which adds a group of n (a constant in the hot loop) super-blocks of one weight row at wb
 * into the eight-lane accumulators of nt (a constant) activation rows at a (their first
 * Q8_K block of the group, x_stride apart), as kern_order.md says. */
#ifndef SF_KERN_KLOOP_H
#define SF_KERN_KLOOP_H

/* One weight row (nsb super-blocks of bsize bytes at wr) against nt (a constant) activation
 * rows at xr. */
AI void row_tile(uint32_t type, size_t bsize, const uint8_t *wr, int64_t nsb, const uint8_t *xr,
		 size_t x_stride, float *y, size_t ldy, const int nt)
{
	__m256 acc[TILE];
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		acc[j] = _mm256_setzero_ps();
	int64_t s0 = 0;
	for (; s0 + KG <= nsb; s0 += KG)
		group(type, wr + (size_t)s0 * bsize, xr + (size_t)s0 * sizeof(struct sf__q8_k),
		      x_stride, acc, KG, nt);
	if (s0 < nsb)
		group(type, wr + (size_t)s0 * bsize, xr + (size_t)s0 * sizeof(struct sf__q8_k),
		      x_stride, acc, (int)(nsb - s0), nt);
#pragma GCC unroll 4
	for (int j = 0; j < nt; j++)
		y[(size_t)j * ldy] = sf__r8_256(acc[j]);
}

AI void mm_k(uint32_t type, size_t bsize, int64_t k, const uint8_t *W, size_t w_stride,
	     int64_t nr, const uint8_t *X, size_t x_stride, int64_t nb, float *Y, size_t ldy)
{
	const int64_t nsb = k / SF__QKK;
	/* With more than one tile of activations, weight rows go in blocks that stay in L2 while
	 * each tile (in L1) takes them. */
	int64_t rblk = nb <= TILE ? nr : (int64_t)(WBLOCK_BYTES / (nsb * (int64_t)bsize));
	rblk = rblk < 1 ? 1 : rblk;
	for (int64_t rb = 0; rb < nr; rb += rblk) {
		const int64_t re = nr - rb < rblk ? nr : rb + rblk;
		for (int64_t t0 = 0; t0 < nb; t0 += TILE) {
			const uint8_t *xr = X + (size_t)t0 * x_stride;
			const int nt = (int)(nb - t0 < TILE ? nb - t0 : TILE);
			for (int64_t r = rb; r < re; r++) {
				const uint8_t *wr = W + (size_t)r * w_stride;
				float *y = Y + (size_t)t0 * ldy + (size_t)r;
#if TILE > 4
				/* one row (decode), a whole tile, and any other size at run time: three
				 * copies of the group, not TILE (its compile time, under the sanitizers) */
				if (nt == 1)
					row_tile(type, bsize, wr, nsb, xr, x_stride, y, ldy, 1);
				else if (nt == TILE)
					row_tile(type, bsize, wr, nsb, xr, x_stride, y, ldy, TILE);
				else
					row_tile(type, bsize, wr, nsb, xr, x_stride, y, ldy, nt);
#else
				switch (nt) {
				case 1:
					row_tile(type, bsize, wr, nsb, xr, x_stride, y, ldy, 1);
					break;
				case 2:
					row_tile(type, bsize, wr, nsb, xr, x_stride, y, ldy, 2);
					break;
				case 3:
					row_tile(type, bsize, wr, nsb, xr, x_stride, y, ldy, 3);
					break;
				default:
					row_tile(type, bsize, wr, nsb, xr, x_stride, y, ldy, 4);
					break;
				}
#endif
			}
		}
	}
}

/* An exported kernel of one type: the row loops with its group() inlined. */
#define SF__KERN_K(name, type, block)                                                           \
	void name(int64_t k, const uint8_t *W, size_t ws, int64_t nr, const uint8_t *X,           \
		  size_t xs, int64_t nb, float *Y, size_t ldy)                                     \
	{                                                                                          \
		mm_k(type, sizeof(block), k, W, ws, nr, X, xs, nb, Y, ldy);                        \
	}

#endif
