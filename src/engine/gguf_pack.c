/* The engine's weights repacked at load for the SIMD kernels (kern.h sf_kern_pack): every
 * layer matrix of a type with a packed form (Q2_K, Q4_K, Q5_K, Q6_K, Q8_0, IQ4_XS, IQ4_NL,
 * MXFP4) and the output matrix (even when it is the token embeddings, which are still looked
 * up row by row in the file) are copied, re-arranged, into one anonymous mapping (transparent
 * huge pages asked for), the model is pointed at the copies, and the file's pages under those
 * tensors are dropped from the process (MADV_DONTNEED: they stay in the page cache, clean, for
 * the kernel to reclaim), so resident memory stays about one copy of the weights.
 * SF_ENGINE_PACK=0 in the environment keeps the file's layout (to measure the difference). The
 * products give the same bits either way. */
#include "engine/gguf_internal.h"

#include "kern/kern.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ALIGN 4096

/* The matrices of one layer that the forward pass multiplies by. */
static const struct sf_gguf_tensor **slot(struct sf_layer_w *l, int i)
{
	const struct sf_gguf_tensor **s[] = {&l->wq, &l->wk, &l->wv, &l->wo,
					     &l->ffn_gate, &l->ffn_up, &l->ffn_down,
					     &l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps,
					     &l->ssm_in, &l->ssm_z, &l->ssm_beta, &l->ssm_alpha,
					     &l->ssm_out};
	return i < (int)(sizeof(s) / sizeof(s[0])) ? s[i] : NULL;
}

/* Whether t is packed: a 2-D matrix of a type with a packed form, rows of whole blocks, in
 * whole slabs or enough of them that the last one's padding costs under 1/16 of the bytes; or
 * experts' matrices stacked (3-D) whose rows each are whole slabs, so that expert e's rows
 * start at slab e * rows / 16 (moe.c reads them there). */
static bool packable(const struct sf_gguf_tensor *t)
{
	if (!t || sf_kern_packed_bytes(t->type, (int64_t)t->ne[0], (int64_t)t->ne[1]) == 0)
		return false;
	if (t->n_dims == 3)
		return t->ne[1] % SF_KT_X16_ROWS == 0;
	return t->n_dims == 2 && (t->ne[1] % SF_KT_X16_ROWS == 0 || t->ne[1] >= 256);
}

/* Rows of t (every expert's, stacked). */
static int64_t rows_of(const struct sf_gguf_tensor *t)
{
	return (int64_t)(t->ne[1] * t->ne[2]);
}

static size_t padded(size_t n)
{
	return (n + ALIGN - 1) / ALIGN * ALIGN;
}

/* Rows packed between drops of the file's pages (bytes): the load's resident memory never
 * exceeds the packed copy by more than about this. */
#define CHUNK_BYTES (32u << 20)

struct pack_job {
	const struct sf_gguf_tensor *from, *to;
	int64_t r0, r1; /* rows, multiples of SF_KT_X16_ROWS but for the last */
};

/* This thread's share of the job's slabs. */
static void pack_part(void *arg, unsigned ith, unsigned nth)
{
	const struct pack_job *j = arg;
	const struct sf_gguf_tensor *t = j->from;
	const int64_t k = (int64_t)t->ne[0];
	const size_t rb = sf_kt_row_bytes(t->type, k);
	uint64_t lo, hi;
	sf_pool_split((uint64_t)(j->r1 - j->r0), ith, nth, SF_KT_X16_ROWS, &lo, &hi);
	lo += (uint64_t)j->r0;
	hi += (uint64_t)j->r0;
	if (lo < hi)
		sf_kern_pack(t->type, k, (const uint8_t *)t->data + lo * rb, rb, (int64_t)(hi - lo),
			     (uint8_t *)j->to->data + lo * rb);
}

/* madvise(advice) on the whole pages inside [p, p + n). */
static void advise(const uint8_t *p, uint64_t n, int advice)
{
	const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	const uintptr_t a = ((uintptr_t)p + pg - 1) & ~(pg - 1), b = ((uintptr_t)p + n) & ~(pg - 1);
	if (b > a)
		madvise((void *)a, b - a, advice);
}

/* Packs tensor from into to, CHUNK_BYTES of rows at a time, each chunk's file pages dropped
 * once packed (and the next chunk's asked for ahead). */
static void pack_tensor(struct ge *g, const struct sf_gguf_tensor *from,
			const struct sf_gguf_tensor *to)
{
	const int64_t rows = rows_of(from);
	const size_t rb = sf_kt_row_bytes(from->type, (int64_t)from->ne[0]);
	int64_t step = (int64_t)(CHUNK_BYTES / rb) / SF_KT_X16_ROWS * SF_KT_X16_ROWS;
	step = step < SF_KT_X16_ROWS ? SF_KT_X16_ROWS : step;
	const uint8_t *src = from->data;
	for (int64_t r0 = 0; r0 < rows; r0 += step) {
		const int64_t r1 = rows - r0 < step ? rows : r0 + step;
		const int64_t r2 = rows - r1 < step ? rows : r1 + step;
		if (r2 > r1)
			advise(src + (size_t)r1 * rb, (uint64_t)(r2 - r1) * rb, MADV_WILLNEED);
		struct pack_job job = {from, to, r0, r1};
		sf_pool_run(g->pool, pack_part, &job);
		advise(src + (size_t)r0 * rb, (uint64_t)(r1 - r0) * rb, MADV_DONTNEED);
	}
}

uint64_t ge_pack_next_touch(const struct ge *g, uint64_t off)
{
	/* the last range starting at or before off */
	size_t lo = 0, hi = g->n_packed;
	while (hi - lo > 1) {
		const size_t mid = lo + (hi - lo) / 2;
		if (g->pack_skip[mid].lo <= off)
			lo = mid;
		else
			hi = mid;
	}
	if (g->n_packed && g->pack_skip[lo].lo <= off && off < g->pack_skip[lo].hi)
		return g->pack_skip[lo].hi;
	return off;
}

static int by_lo(const void *a, const void *b)
{
	const struct ge_range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

int ge_pack_weights(struct ge *g, struct sf_err *err)
{
	const char *env = getenv("SF_ENGINE_PACK");
	if (env && !strcmp(env, "0"))
		return 0;
	struct sf_model *m = g->model;
	const uint32_t nl = m->cfg.n_layer;
	const size_t cap = (size_t)nl * 10 + 1;
	const struct sf_gguf_tensor **from = calloc(cap, sizeof(*from));
	g->packed = calloc(cap, sizeof(*g->packed));
	g->pack_skip = calloc(cap, sizeof(*g->pack_skip));
	if (!from || !g->packed || !g->pack_skip) {
		free(from);
		return sf_err_set(err, SF_E_NOMEM, "no memory to pack the weights");
	}
	size_t n = 0, bytes = 0;
	for (uint32_t il = 0; il < nl; il++)
		for (int i = 0; slot(&m->layers[il], i); i++)
			if (packable(*slot(&m->layers[il], i)))
				from[n++] = *slot(&m->layers[il], i);
	/* Tied embeddings too: the output product reads the packed copy; the lookups of single
	 * rows read the file's pages (dropped below, faulted back one page per row looked up). */
	if (packable(m->output))
		from[n++] = m->output;
	for (size_t i = 0; i < n; i++)
		bytes += padded(sf_kern_packed_bytes(from[i]->type, (int64_t)from[i]->ne[0],
						     rows_of(from[i])));
	if (!n) {
		free(from);
		return 0;
	}
	void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		free(from);
		return sf_err_set(err, SF_E_NOMEM, "no memory for %zu bytes of packed weights", bytes);
	}
	madvise(map, bytes, MADV_HUGEPAGE); /* fewer TLB misses; refused where THP is off */
	g->pack_map = map;
	g->pack_len = bytes;
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		struct sf_gguf_tensor *p = &g->packed[i];
		*p = *from[i];
		p->type = sf_kern_packed_type(from[i]->type);
		p->data = (uint8_t *)map + off;
		p->size = sf_kern_packed_bytes(from[i]->type, (int64_t)p->ne[0], rows_of(p));
		off += padded(p->size);
	}
	g->n_packed = n;
	/* The file's pages dropped as they are packed: resident memory never holds much more
	 * than one copy, even while loading. */
	for (size_t i = 0; i < n; i++) {
		pack_tensor(g, from[i], &g->packed[i]);
		const uint64_t lo = (uint64_t)(uintptr_t)from[i]->data;
		g->pack_skip[i] = (struct ge_range){lo, lo + from[i]->size};
	}
	qsort(g->pack_skip, n, sizeof(*g->pack_skip), by_lo);
	mprotect(map, bytes, PROT_READ);
	/* The model reads the copies from now on. */
	for (uint32_t il = 0; il < nl; il++)
		for (int i = 0; slot(&m->layers[il], i); i++)
			for (size_t j = 0; j < n; j++)
				if (*slot(&m->layers[il], i) == from[j])
					*slot(&m->layers[il], i) = &g->packed[j];
	for (size_t j = 0; j < n; j++)
		if (m->output == from[j])
			m->output = &g->packed[j];
	free(from);
	return 0;
}

void ge_pack_free(struct ge *g)
{
	if (g->pack_map)
		munmap(g->pack_map, g->pack_len);
	free(g->packed);
	free(g->pack_skip);
	g->pack_map = NULL;
	g->packed = NULL;
	g->pack_skip = NULL;
	g->n_packed = 0;
}
