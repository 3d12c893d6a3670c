/* The engine's weights repacked at load for the SIMD kernels (kern.h sf_kern_pack): every
 * layer matrix of a type with a packed form (Q4_K, Q6_K), and the output matrix unless it is
 * the token embeddings (whose rows are looked up one by one), is copied, re-arranged, into one
 * anonymous mapping (transparent huge pages asked for), the model's layers are pointed at the
 * copies, and the file's pages under those tensors are dropped from the process
 * (MADV_DONTNEED: they stay in the page cache, clean, for the kernel to reclaim), so resident
 * memory stays about one copy of the weights. SF_ENGINE_PACK=0 in the environment keeps the
 * file's layout (to measure the difference). The products give the same bits either way. */
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
					     &l->ffn_gate, &l->ffn_up, &l->ffn_down};
	return i < (int)(sizeof(s) / sizeof(s[0])) ? s[i] : NULL;
}

/* Whether t is packed: a 2-D matrix of a type with a packed form, rows of whole blocks. */
static bool packable(const struct sf_gguf_tensor *t)
{
	return t && t->n_dims == 2 && sf_kern_packed_bytes(t->type, (int64_t)t->ne[0],
							   (int64_t)t->ne[1]) > 0;
}

static size_t padded(size_t n)
{
	return (n + ALIGN - 1) / ALIGN * ALIGN;
}

struct pack_job {
	struct ge *g;
	const struct sf_gguf_tensor *const *from; /* n_packed source tensors */
};

/* This thread's share of the slabs of every tensor. */
static void pack_part(void *arg, unsigned ith, unsigned nth)
{
	struct pack_job *j = arg;
	struct ge *g = j->g;
	for (size_t i = 0; i < g->n_packed; i++) {
		const struct sf_gguf_tensor *t = j->from[i];
		const int64_t k = (int64_t)t->ne[0], rows = (int64_t)t->ne[1];
		const size_t rb = sf_kt_row_bytes(t->type, k);
		uint64_t lo, hi;
		sf_pool_split((uint64_t)rows, ith, nth, SF_KT_X16_ROWS, &lo, &hi);
		if (lo >= hi)
			continue;
		uint8_t *dst = (uint8_t *)g->packed[i].data + lo * rb;
		sf_kern_pack(t->type, k, (const uint8_t *)t->data + lo * rb, rb, (int64_t)(hi - lo),
			     dst);
	}
}

/* Drops the file's whole pages inside t from the process. */
static void drop_pages(const struct sf_gguf_tensor *t)
{
	const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	const uintptr_t a = ((uintptr_t)t->data + pg - 1) & ~(pg - 1);
	const uintptr_t b = ((uintptr_t)t->data + t->size) & ~(pg - 1);
	if (b > a)
		madvise((void *)a, b - a, MADV_DONTNEED);
}

int ge_pack_weights(struct ge *g, struct sf_err *err)
{
	const char *env = getenv("SF_ENGINE_PACK");
	if (env && !strcmp(env, "0"))
		return 0;
	struct sf_model *m = g->model;
	const uint32_t nl = m->cfg.n_layer;
	const size_t cap = (size_t)nl * 7 + 1;
	const struct sf_gguf_tensor **from = calloc(cap, sizeof(*from));
	g->packed = calloc(cap, sizeof(*g->packed));
	if (!from || !g->packed) {
		free(from);
		return sf_err_set(err, SF_E_NOMEM, "no memory to pack the weights");
	}
	size_t n = 0, bytes = 0;
	for (uint32_t il = 0; il < nl; il++)
		for (int i = 0; slot(&m->layers[il], i); i++)
			if (packable(*slot(&m->layers[il], i)))
				from[n++] = *slot(&m->layers[il], i);
	if (m->output != m->tok_embd && packable(m->output))
		from[n++] = m->output;
	for (size_t i = 0; i < n; i++)
		bytes += padded(sf_kern_packed_bytes(from[i]->type, (int64_t)from[i]->ne[0],
						     (int64_t)from[i]->ne[1]));
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
		p->size = sf_kern_packed_bytes(from[i]->type, (int64_t)p->ne[0], (int64_t)p->ne[1]);
		off += padded(p->size);
	}
	g->n_packed = n;
	struct pack_job job = {g, from};
	sf_pool_run(g->pool, pack_part, &job);
	mprotect(map, bytes, PROT_READ);
	/* The model now reads the copies; the file's pages under them go. */
	for (uint32_t il = 0; il < nl; il++)
		for (int i = 0; slot(&m->layers[il], i); i++)
			for (size_t j = 0; j < n; j++)
				if (*slot(&m->layers[il], i) == from[j])
					*slot(&m->layers[il], i) = &g->packed[j];
	for (size_t j = 0; j < n; j++)
		if (m->output == from[j])
			m->output = &g->packed[j];
	for (size_t j = 0; j < n; j++)
		drop_pages(from[j]);
	free(from);
	return 0;
}

void ge_pack_free(struct ge *g)
{
	if (g->pack_map)
		munmap(g->pack_map, g->pack_len);
	free(g->packed);
	g->pack_map = NULL;
	g->packed = NULL;
	g->n_packed = 0;
}
