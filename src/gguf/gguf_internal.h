/* The GGUF reader's state, shared by its files: the parse (gguf_read.c), the name index and
 * typed getters (gguf_meta.c), the type table (gguf_types.c). */
#ifndef SF_GGUF_INTERNAL_H
#define SF_GGUF_INTERNAL_H

#include <superfluid/gguf.h>

/* An open-addressing index from names to positions (keys or tensors). */
struct gguf_index {
	uint32_t *slots; /* position + 1; 0: empty */
	uint32_t mask;
};

struct sf_gguf {
	const uint8_t *base;
	uint64_t size;
	bool mapped; /* base is our map (sf_gguf_open), unmapped at close */
	uint32_t version;
	uint32_t alignment;
	uint64_t data_offset;
	struct sf_gguf_kv *kv;
	uint64_t n_kv;
	struct sf_gguf_tensor *tensors;
	uint64_t n_tensors;
	struct gguf_index kv_index, tensor_index;
	/* A split model's parts 2..N (gguf_split.c), whose tensors the table above includes. */
	struct sf_gguf **more;
	uint32_t n_more;
};

/* Maps and parses one file (sf_gguf_open without joining a split model's other parts). */
int sf__gguf_open_one(const char *path, struct sf_gguf **out, struct sf_err *err);

/* When g (opened from path) is the first part of a split model, opens the other parts beside
 * it, checks each, and joins their tensors to g's table; a single file is left as it is. */
int sf__gguf_join_parts(struct sf_gguf *g, const char *path, struct sf_err *err);

/* Bytes of one element of a fixed-size value type; 0 for STRING, ARRAY and unknown types. */
uint32_t sf__gguf_vtype_size(uint32_t type);

/* The name of a value type ("u32"), "?" when unknown. */
const char *sf__gguf_vtype_name(uint32_t type);

/* Builds an index of n names (names(arg, i) gives the i-th); SF_E_FORMAT naming the second
 * occurrence of a duplicate (what: "key" or "tensor"), SF_E_NOMEM. */
int sf__gguf_index_build(struct gguf_index *ix, uint64_t n,
			 struct sf_gguf_str (*names)(const void *arg, uint64_t i), const void *arg,
			 const char *what, struct sf_err *err);

/* The position of name in the index, or -1. */
int64_t sf__gguf_index_find(const struct gguf_index *ix, const char *name, size_t len,
			    struct sf_gguf_str (*names)(const void *arg, uint64_t i), const void *arg);

void sf__gguf_index_free(struct gguf_index *ix);

/* s for a message: bytes outside printable ASCII as '?', cut with "..." to fit cap. */
void sf__gguf_printable(char *out, size_t cap, struct sf_gguf_str s);

#endif
