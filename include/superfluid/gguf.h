/* GGUF model files (ggml's docs/gguf.md, versions 2 and 3): a reader over a read-only map
 * that checks every length, count, offset and alignment against the file before anything
 * points into it, typed metadata getters, and a writer for the files our tools make.
 *
 * A stranger's file is hostile input: sf_gguf_open refuses what it cannot vouch for with
 * SF_E_FORMAT and a sentence naming the byte offset and what was wrong there, and never reads
 * past the map. After a successful open every pointer the reader hands out (keys, strings,
 * array elements, tensor data) lies inside the file and stays valid until sf_gguf_close.
 * Values in the file are little-endian and may be unaligned: read them with the accessors. */
#ifndef SUPERFLUID_GGUF_H
#define SUPERFLUID_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>

/* Limits on what a file may declare (each checked before anything is allocated for it). */
#define SF_GGUF_MAX_KV (1u << 16)          /* metadata pairs */
#define SF_GGUF_MAX_TENSORS (1u << 16)
#define SF_GGUF_MAX_KEY 65535              /* bytes of a key or a tensor name */
#define SF_GGUF_MAX_DIMS 4
#define SF_GGUF_MAX_ARRAY (1ull << 28)     /* elements of one array (nested arrays: refused) */
#define SF_GGUF_DEFAULT_ALIGNMENT 32

/* Metadata value types (the numbers are the file's). */
enum sf_gguf_vtype {
	SF_GGUF_U8 = 0,
	SF_GGUF_I8 = 1,
	SF_GGUF_U16 = 2,
	SF_GGUF_I16 = 3,
	SF_GGUF_U32 = 4,
	SF_GGUF_I32 = 5,
	SF_GGUF_F32 = 6,
	SF_GGUF_BOOL = 7,
	SF_GGUF_STRING = 8,
	SF_GGUF_ARRAY = 9,
	SF_GGUF_U64 = 10,
	SF_GGUF_I64 = 11,
	SF_GGUF_F64 = 12,
};

/* Tensor types (ggml's type numbers, as the file stores them). The reader knows the block
 * size and bytes of each, so that it can check every tensor's extent; which of them an engine
 * computes is the engine's business (SF_E_MODEL naming the type when it cannot). */
enum sf_gguf_ttype {
	SF_GGUF_T_F32 = 0,
	SF_GGUF_T_F16 = 1,
	SF_GGUF_T_Q4_0 = 2,
	SF_GGUF_T_Q4_1 = 3,
	SF_GGUF_T_Q5_0 = 6,
	SF_GGUF_T_Q5_1 = 7,
	SF_GGUF_T_Q8_0 = 8,
	SF_GGUF_T_Q8_1 = 9,
	SF_GGUF_T_Q2_K = 10,
	SF_GGUF_T_Q3_K = 11,
	SF_GGUF_T_Q4_K = 12,
	SF_GGUF_T_Q5_K = 13,
	SF_GGUF_T_Q6_K = 14,
	SF_GGUF_T_Q8_K = 15,
	SF_GGUF_T_IQ2_XXS = 16,
	SF_GGUF_T_IQ2_XS = 17,
	SF_GGUF_T_IQ3_XXS = 18,
	SF_GGUF_T_IQ1_S = 19,
	SF_GGUF_T_IQ4_NL = 20,
	SF_GGUF_T_IQ3_S = 21,
	SF_GGUF_T_IQ2_S = 22,
	SF_GGUF_T_IQ4_XS = 23,
	SF_GGUF_T_I8 = 24,
	SF_GGUF_T_I16 = 25,
	SF_GGUF_T_I32 = 26,
	SF_GGUF_T_I64 = 27,
	SF_GGUF_T_F64 = 28,
	SF_GGUF_T_IQ1_M = 29,
	SF_GGUF_T_BF16 = 30,
	SF_GGUF_T_TQ1_0 = 34,
	SF_GGUF_T_TQ2_0 = 35,
	SF_GGUF_T_MXFP4 = 39,
	SF_GGUF_T_NVFP4 = 40,
	SF_GGUF_T_Q1_0 = 41,
	SF_GGUF_T_Q2_0 = 42,
	SF_GGUF_T_COUNT = 43, /* one past the highest number the reader knows */
};

/* A string in the file: len bytes at ptr, not NUL-terminated (may hold NULs). */
struct sf_gguf_str {
	const char *ptr;
	uint64_t len;
};

/* One metadata pair. For an array, data is its first element (elements of fixed size are
 * packed; strings are length-prefixed one after another) and n its element count. */
struct sf_gguf_kv {
	struct sf_gguf_str key;
	uint32_t type;      /* enum sf_gguf_vtype */
	uint32_t elem_type; /* arrays: the elements' type (never ARRAY) */
	uint64_t n;         /* arrays: elements; scalars: 1 */
	const uint8_t *data;
	uint64_t size;      /* bytes of the value (of all the elements for an array) */
	uint64_t offset;    /* where the value starts in the file (for error messages) */
};

struct sf_gguf_tensor {
	struct sf_gguf_str name;
	uint32_t n_dims;
	uint64_t ne[SF_GGUF_MAX_DIMS]; /* ne[0]: elements of a row (innermost); unused dims 1 */
	uint32_t type;                 /* enum sf_gguf_ttype */
	uint64_t offset;               /* from the start of its file or part (checked aligned) */
	uint64_t size;                 /* bytes */
	const void *data;
};

struct sf_gguf;

/* ---- reading ---- */

/* Maps path read-only and parses it (everything checked; nothing past the map is read).
 * SF_E_IO when it cannot be opened or mapped, SF_E_FORMAT naming the offset otherwise. The
 * first part of a split model (PREFIX-00001-of-0000N.gguf, metadata split.count N) brings its
 * other parts, opened beside it and checked the same way: their tensors are in the table (each
 * tensor's offset is within its own part), a missing or mismatched part is named. */
int sf_gguf_open(const char *path, struct sf_gguf **out, struct sf_err *err)
	__attribute__((warn_unused_result));

/* Parses len bytes at data, which must outlive the result (tests, fuzzing). */
int sf_gguf_open_mem(const void *data, size_t len, struct sf_gguf **out, struct sf_err *err)
	__attribute__((warn_unused_result));

/* Unmaps and frees. NULL is a no-op. */
void sf_gguf_close(struct sf_gguf *g);

#define SF_GGUF_MAX_SPLITS 256 /* parts of a split model */

/* The files a model was read from: 1, or a split model's N parts. */
uint32_t sf_gguf_n_parts(const struct sf_gguf *g);

/* Part i's map (i < sf_gguf_n_parts; part 0 is the file opened): its bytes, the start of its
 * data section and its size. */
void sf_gguf_part(const struct sf_gguf *g, uint32_t i, const uint8_t **base,
		  uint64_t *data_offset, uint64_t *size);

/* The file's version (2 or 3), its size, the data section's alignment and start. */
uint32_t sf_gguf_version(const struct sf_gguf *g);
uint64_t sf_gguf_file_size(const struct sf_gguf *g);
uint32_t sf_gguf_alignment(const struct sf_gguf *g);
uint64_t sf_gguf_data_offset(const struct sf_gguf *g);
/* The map's first byte (file offsets are from here). */
const uint8_t *sf_gguf_base(const struct sf_gguf *g);

/* Metadata pairs in file order; the pair named key (NULL when absent). */
uint64_t sf_gguf_n_kv(const struct sf_gguf *g);
const struct sf_gguf_kv *sf_gguf_kv_at(const struct sf_gguf *g, uint64_t i);
const struct sf_gguf_kv *sf_gguf_find(const struct sf_gguf *g, const char *key);

/* Tensors in file order; the tensor named name (NULL when absent). */
uint64_t sf_gguf_n_tensors(const struct sf_gguf *g);
const struct sf_gguf_tensor *sf_gguf_tensor_at(const struct sf_gguf *g, uint64_t i);
const struct sf_gguf_tensor *sf_gguf_tensor(const struct sf_gguf *g, const char *name);

/* Typed getters: 0, SF_E_NOT_FOUND when key is absent, SF_E_TYPE when its value has another
 * type (integers convert between widths when the value fits, SF_E_RANGE when it does not;
 * floats take F32 or F64), with err naming the key. str points into the file. */
int sf_gguf_get_u32(const struct sf_gguf *g, const char *key, uint32_t *out, struct sf_err *err);
int sf_gguf_get_u64(const struct sf_gguf *g, const char *key, uint64_t *out, struct sf_err *err);
int sf_gguf_get_i64(const struct sf_gguf *g, const char *key, int64_t *out, struct sf_err *err);
int sf_gguf_get_f32(const struct sf_gguf *g, const char *key, float *out, struct sf_err *err);
int sf_gguf_get_bool(const struct sf_gguf *g, const char *key, bool *out, struct sf_err *err);
int sf_gguf_get_str(const struct sf_gguf *g, const char *key, struct sf_gguf_str *out,
		    struct sf_err *err);
/* The array named key, its elements of elem_type (SF_E_TYPE otherwise). */
int sf_gguf_get_arr(const struct sf_gguf *g, const char *key, uint32_t elem_type,
		    const struct sf_gguf_kv **out, struct sf_err *err);

/* Element i of a fixed-size numeric array (i < n, type as declared; converted, unaligned-safe). */
float sf_gguf_arr_f32(const struct sf_gguf_kv *arr, uint64_t i);
int64_t sf_gguf_arr_i64(const struct sf_gguf_kv *arr, uint64_t i);

/* Walks a string array: start with *pos = 0; each call gives the next string and returns
 * false after the last. (Strings were checked at open: the walk cannot leave the value.) */
bool sf_gguf_arr_str_next(const struct sf_gguf_kv *arr, uint64_t *pos, struct sf_gguf_str *out);

/* Whether s equals the NUL-terminated c. */
bool sf_gguf_str_eq(struct sf_gguf_str s, const char *c);

/* ---- tensor types ---- */

/* The type's name ("Q4_K"), NULL for a number the reader does not know. */
const char *sf_gguf_type_name(uint32_t type);
/* Elements per block and bytes per block (0, 0 for an unknown or removed type). */
void sf_gguf_type_size(uint32_t type, uint32_t *block, uint32_t *bytes);

/* ---- writing ---- */

struct sf_gguf_writer;

/* A writer with no pairs and no tensors (alignment: SF_GGUF_DEFAULT_ALIGNMENT, or the value
 * of a general.alignment pair set before sf_gguf_writer_save). */
struct sf_gguf_writer *sf_gguf_writer_new(void);
void sf_gguf_writer_free(struct sf_gguf_writer *w);

/* Adds a pair (the key and value are copied). */
int sf_gguf_set_u16(struct sf_gguf_writer *w, const char *key, uint16_t v);
int sf_gguf_set_u32(struct sf_gguf_writer *w, const char *key, uint32_t v);
int sf_gguf_set_i32(struct sf_gguf_writer *w, const char *key, int32_t v);
int sf_gguf_set_u64(struct sf_gguf_writer *w, const char *key, uint64_t v);
int sf_gguf_set_f32(struct sf_gguf_writer *w, const char *key, float v);
int sf_gguf_set_bool(struct sf_gguf_writer *w, const char *key, bool v);
int sf_gguf_set_str(struct sf_gguf_writer *w, const char *key, const char *v, size_t len);
/* An array of n fixed-size elements of elem_type, packed little-endian at v. */
int sf_gguf_set_arr(struct sf_gguf_writer *w, const char *key, uint32_t elem_type,
		    const void *v, uint64_t n);
/* An array of n strings. */
int sf_gguf_set_arr_str(struct sf_gguf_writer *w, const char *key, const struct sf_gguf_str *v,
			uint64_t n);
/* Copies every pair of g whose key passes keep (NULL: all) into w. */
int sf_gguf_copy_kv(struct sf_gguf_writer *w, const struct sf_gguf *g,
		    bool (*keep)(const char *key, size_t len, void *arg), void *arg);

/* Adds a tensor of type with dims ne[0..n_dims) whose bytes (exactly the type's size for
 * those dims) are at data; data must stay valid until the save. */
int sf_gguf_add_tensor(struct sf_gguf_writer *w, const char *name, uint32_t type,
		       uint32_t n_dims, const uint64_t *ne, const void *data, size_t size);

/* Writes version 3 to path (through a temporary file renamed into place). */
int sf_gguf_writer_save(struct sf_gguf_writer *w, const char *path, struct sf_err *err);

/* The bytes of a file of pairs only (no tensor: SF_E_RANGE) in *out (malloc'd; the caller
 * frees it), *len of them: metadata to send, such as a tokenizer's. */
int sf_gguf_writer_bytes(struct sf_gguf_writer *w, uint8_t **out, size_t *len,
			 struct sf_err *err);

#endif
