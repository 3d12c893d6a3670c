/* A GGUF file of metadata only, written into memory (tokenizer tests and fuzzing): the
 * pairs are added in order; any type goes, whether or not it makes sense. */
#ifndef SF_TESTS_TOK_GGUF_MEM_H
#define SF_TESTS_TOK_GGUF_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gguf_mem {
	uint8_t *p;
	size_t n, cap;
	uint64_t n_kv;
	bool oom; /* set when memory ran out: the file is then unusable */
};

/* Starts a version 3 file with no tensors. */
void gguf_mem_init(struct gguf_mem *m);
void gguf_mem_free(struct gguf_mem *m);

/* A pair's key and type (the value follows with the put functions). */
void gguf_mem_key(struct gguf_mem *m, const char *key, uint32_t type);
void gguf_mem_put(struct gguf_mem *m, const void *p, size_t n);
void gguf_mem_put_u32(struct gguf_mem *m, uint32_t v);
void gguf_mem_put_u64(struct gguf_mem *m, uint64_t v);
/* A GGUF string: u64 length then the bytes. */
void gguf_mem_put_str(struct gguf_mem *m, const void *s, size_t n);

/* Whole pairs. */
void gguf_mem_str(struct gguf_mem *m, const char *key, const char *s);
void gguf_mem_u32(struct gguf_mem *m, const char *key, uint32_t v);
void gguf_mem_bool(struct gguf_mem *m, const char *key, bool v);
/* An array's header: its element type and count (the elements follow). */
void gguf_mem_arr(struct gguf_mem *m, const char *key, uint32_t elem_type, uint64_t n);
void gguf_mem_arr_strs(struct gguf_mem *m, const char *key, const char *const *s,
		       const size_t *len, size_t n);

/* Writes the pair count into the header; the file is m->p[0..m->n). */
void gguf_mem_finish(struct gguf_mem *m);

#endif
