/* GGUF files of metadata only, in memory. */
#include "gguf_mem.h"

#include <stdlib.h>
#include <string.h>

#include <superfluid/gguf.h>

void gguf_mem_init(struct gguf_mem *m)
{
	memset(m, 0, sizeof(*m));
	gguf_mem_put(m, "GGUF", 4);
	gguf_mem_put_u32(m, 3);
	gguf_mem_put_u64(m, 0); /* tensors */
	gguf_mem_put_u64(m, 0); /* pairs, written by gguf_mem_finish */
}

void gguf_mem_free(struct gguf_mem *m)
{
	free(m->p);
	memset(m, 0, sizeof(*m));
}

void gguf_mem_put(struct gguf_mem *m, const void *p, size_t n)
{
	if (m->oom)
		return;
	if (m->n + n > m->cap) {
		size_t cap = m->cap ? m->cap : 4096;
		while (cap < m->n + n)
			cap *= 2;
		uint8_t *q = realloc(m->p, cap);
		if (!q) {
			m->oom = true;
			return;
		}
		m->p = q;
		m->cap = cap;
	}
	if (n)
		memcpy(m->p + m->n, p, n);
	m->n += n;
}

void gguf_mem_put_u32(struct gguf_mem *m, uint32_t v)
{
	uint8_t le[4];
	for (int i = 0; i < 4; i++)
		le[i] = (uint8_t)(v >> (8 * i));
	gguf_mem_put(m, le, 4);
}

void gguf_mem_put_u64(struct gguf_mem *m, uint64_t v)
{
	uint8_t le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(v >> (8 * i));
	gguf_mem_put(m, le, 8);
}

void gguf_mem_put_str(struct gguf_mem *m, const void *s, size_t n)
{
	gguf_mem_put_u64(m, n);
	gguf_mem_put(m, s, n);
}

void gguf_mem_key(struct gguf_mem *m, const char *key, uint32_t type)
{
	gguf_mem_put_str(m, key, strlen(key));
	gguf_mem_put_u32(m, type);
	m->n_kv++;
}

void gguf_mem_str(struct gguf_mem *m, const char *key, const char *s)
{
	gguf_mem_key(m, key, SF_GGUF_STRING);
	gguf_mem_put_str(m, s, strlen(s));
}

void gguf_mem_u32(struct gguf_mem *m, const char *key, uint32_t v)
{
	gguf_mem_key(m, key, SF_GGUF_U32);
	gguf_mem_put_u32(m, v);
}

void gguf_mem_bool(struct gguf_mem *m, const char *key, bool v)
{
	uint8_t b = v;
	gguf_mem_key(m, key, SF_GGUF_BOOL);
	gguf_mem_put(m, &b, 1);
}

void gguf_mem_arr(struct gguf_mem *m, const char *key, uint32_t elem_type, uint64_t n)
{
	gguf_mem_key(m, key, SF_GGUF_ARRAY);
	gguf_mem_put_u32(m, elem_type);
	gguf_mem_put_u64(m, n);
}

void gguf_mem_arr_strs(struct gguf_mem *m, const char *key, const char *const *s,
		       const size_t *len, size_t n)
{
	gguf_mem_arr(m, key, SF_GGUF_STRING, n);
	for (size_t i = 0; i < n; i++)
		gguf_mem_put_str(m, s[i], len ? len[i] : strlen(s[i]));
}

void gguf_mem_finish(struct gguf_mem *m)
{
	if (m->oom || m->n < 24)
		return;
	for (int i = 0; i < 8; i++)
		m->p[16 + i] = (uint8_t)(m->n_kv >> (8 * i));
}
