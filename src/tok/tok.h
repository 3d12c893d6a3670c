/* The tokenizers' insides: the string table, the merge table, the heap, UTF-8, the
 * pre-tokenizers, the tokenizer itself, and the description a tokenizer is built from (which
 * sf_tok_load fills from a GGUF file and tests and the fuzzer fill from arrays). */
#ifndef SF_TOK_TOK_H
#define SF_TOK_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>
#include <superfluid/tokenizer.h>

/* ---- the string table: distinct byte strings, numbered from 0 in the order added ---- */

struct sf__strtab {
	char *blob;        /* the strings, back to back */
	size_t blob_len, blob_cap;
	uint32_t *off;     /* string i is blob[off[i] .. off[i + 1]) */
	uint32_t n, cap;   /* strings; off holds n + 1 entries */
	uint32_t *slots;   /* open addressing: string number + 1, 0 empty */
	uint32_t n_slots;  /* a power of two, at least twice n */
	uint8_t key[16];   /* SipHash key (random: a stranger cannot aim collisions) */
};

int sf__strtab_init(struct sf__strtab *s, uint32_t expect, struct sf_err *err);
void sf__strtab_free(struct sf__strtab *s);
/* The number of s[0..len), or -1. */
int32_t sf__strtab_find(const struct sf__strtab *s, const void *p, size_t len);
/* The number of s[0..len), added when absent (*added tells). SF_E_LIMIT, SF_E_NOMEM. */
int sf__strtab_add(struct sf__strtab *s, const void *p, size_t len, int32_t *id, bool *added,
		   struct sf_err *err);
static inline const char *sf__strtab_str(const struct sf__strtab *s, uint32_t i, size_t *len)
{
	*len = s->off[i + 1] - s->off[i];
	return s->blob + s->off[i];
}

/* ---- the merge table: (left string, right string) -> (rank, merged string) ---- */

struct sf__merge {
	uint64_t key;    /* left << 32 | right, UINT64_MAX empty */
	uint32_t rank;
	uint32_t result; /* string number of left + right */
};

struct sf__merges {
	struct sf__merge *slots;
	uint32_t n, n_slots;
	uint64_t mul; /* random odd multiplier of the hash */
};

int sf__merges_init(struct sf__merges *m, uint32_t expect, struct sf_err *err);
void sf__merges_free(struct sf__merges *m);
/* Adds a pair; an existing pair keeps its first rank (as llama.cpp's emplace does). */
void sf__merges_add(struct sf__merges *m, uint32_t left, uint32_t right, uint32_t rank,
		    uint32_t result);
const struct sf__merge *sf__merges_find(const struct sf__merges *m, uint32_t left, uint32_t right);

/* ---- a binary min-heap of merge candidates ---- */

struct sf__heap_item {
	uint64_t key; /* smallest first: priority << 32 | the pair's left symbol */
	int32_t c, d; /* what the pair held when pushed, to tell a stale one */
};

struct sf__heap {
	struct sf__heap_item *v;
	size_t n, cap;
};

int sf__heap_push(struct sf__heap *h, const struct sf__heap_item *it);
/* Pops the smallest into *it; false when empty. */
bool sf__heap_pop(struct sf__heap *h, struct sf__heap_item *it);
/* Keeps the items keep says are live (and orders the heap again). */
void sf__heap_filter(struct sf__heap *h, bool (*keep)(const struct sf__heap_item *, void *),
		     void *arg);
void sf__heap_free(struct sf__heap *h);

/* ---- UTF-8 ---- */

/* Bytes of the UTF-8 sequence a lead byte starts, by its high four bits (llama.cpp's rule:
 * continuation bytes count 1, 0xF8.. count 4). */
static inline size_t sf__utf8_len(uint8_t lead)
{
	static const uint8_t len[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
	return len[lead >> 4];
}

/* Decodes one code point at p[*i] (i < n) the lenient way llama.cpp does (overlong forms and
 * surrogates pass, a bad sequence is U+FFFD for its first byte) and advances *i. */
uint32_t sf__utf8_next(const uint8_t *p, size_t n, size_t *i);
/* Writes c (< 0x110000) as UTF-8 at out (4 bytes room); returns the bytes written. */
size_t sf__utf8_put(uint32_t c, uint8_t *out);

/* GPT-2's byte-to-character map: byte b is written as the UTF-8 enc[b][1..enc[b][0]]. */
struct sf__bytemap {
	uint8_t enc[256][3];
};
void sf__bytemap_init(struct sf__bytemap *m);
/* The byte the character c stands for, or -1. */
int sf__bytemap_decode(uint32_t c);

/* ---- pre-tokenizers ---- */

enum sf__pre {
	SF__PRE_DEFAULT,
	SF__PRE_LLAMA3,
	SF__PRE_QWEN2,
	SF__PRE_QWEN35,
	SF__PRE_GPT2,
	SF__PRE_STARCODER,
	SF__PRE_FALCON,
	SF__PRE_DEEPSEEK_LLM,
	SF__PRE_DEEPSEEK_CODER,
	SF__PRE_TEKKEN,
	SF__PRE_GPT4O,
	SF__PRE_COUNT,
};

#define SF__PRE_MAX_EXPRS 6

struct sf__pretok {
	void *code[SF__PRE_MAX_EXPRS]; /* pcre2_code_8 */
	unsigned n;
	void *mctx; /* pcre2_match_context_8: match and heap limits */
};

int sf__pretok_init(struct sf__pretok *p, enum sf__pre pre, struct sf_err *err);
/* The pre-tokenizer's stable name (llama.cpp's first name for it): what the full digest
 * states, so that renumbering enum sf__pre splits no fleet (tests pin the digest). */
const char *sf__pre_stable_name(enum sf__pre pre);
void sf__pretok_free(struct sf__pretok *p);

struct sf__scratch;

/* Cuts the code points cp[0..n) into words, llama.cpp's unicode_regex_split: cut[i] (i in
 * 0..n, n + 1 bytes) is set where a word starts or ends. Uses s's buffers. */
int sf__pretok_split(const struct sf__pretok *p, const uint32_t *cp, size_t n, uint8_t *cut,
		     struct sf__scratch *s, struct sf_err *err);

/* ---- the tokenizer ---- */

/* Role ids as the file gives them (llama.cpp's order of keys). */
enum sf__id {
	SF__ID_BOS,
	SF__ID_EOS,
	SF__ID_EOT,
	SF__ID_EOM,
	SF__ID_UNK,
	SF__ID_SEP,
	SF__ID_PAD,
	SF__ID_MASK,
	SF__ID_FIM_PRE,
	SF__ID_FIM_SUF,
	SF__ID_FIM_MID,
	SF__ID_FIM_PAD,
	SF__ID_FIM_REP,
	SF__ID_FIM_SEP,
	SF__ID_COUNT,
};

/* Each role's GGUF key (tokenizer.ggml.bos_token_id, ...): the file's names, stable. */
extern const char *const sf__tok_id_keys[SF__ID_COUNT];

/* A length class of the special tokens: those of one length, checked together. */
struct sf__spclass {
	uint32_t len;
	uint32_t first, n;    /* their ranks in the sorted list */
	uint64_t pow;         /* base^(len - 1), for the rolling hash */
	uint8_t lead[32];     /* bitmap of their first bytes */
};

/* The special tokens one encode mode cuts out: sorted longest first (id order within a
 * length), with a hash table over (length, hash) to find them in text. */
struct sf__spset {
	uint32_t *ids;        /* by rank */
	uint64_t *hash;       /* by rank */
	uint32_t n;
	struct sf__spclass *cls;
	uint32_t n_cls;
	uint32_t *slots;      /* open addressing over (length, hash): rank + 1, 0 empty */
	uint32_t n_slots;
	uint64_t base;        /* of the polynomial hash (random, odd) */
};

static inline uint32_t sf__spset_slot(const struct sf__spset *s, uint64_t hash, size_t len)
{
	uint64_t h = (hash ^ (uint64_t)len * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
	return (uint32_t)(h >> 32) & (s->n_slots - 1);
}

struct sf_tok {
	enum sf_tok_kind kind;
	enum sf__pre pre;
	char pre_name[64];
	uint32_t n_vocab;
	struct sf__strtab str; /* token texts are strings 0..n_vocab-1; merge-only strings after */
	float *score;
	uint32_t *attr;
	uint32_t id[SF__ID_COUNT]; /* SF_TOK_NONE when absent */
	bool add_bos, add_eos, add_space_prefix, ignore_merges;
	uint8_t *eog;              /* bitmap over ids */
	/* decoding */
	uint8_t *piece;
	uint32_t *piece_off;       /* n_vocab + 1 */
	/* specials */
	struct sf_tok_special *specials; /* id order */
	uint32_t n_specials;
	struct sf__spset sp_all;   /* parse_special */
	struct sf__spset sp_user;  /* plain text: USER_DEFINED only */
	uint64_t sp_base;
	/* SPM */
	int32_t byte_tok[256];     /* <0xNN> or the byte itself as a token, -1 */
	/* BPE */
	struct sf__merges merges;
	struct sf__bytemap bytemap;
	int32_t byte_sid[256];     /* the string of byte b's character, -1 */
	int32_t byte_fb[256][2];   /* tokens of the single bytes of that character, -1 */
	struct sf__pretok pretok;
};

/* What a tokenizer is built from: llama.cpp's view of the tokenizer.ggml.* keys. Strings are
 * not NUL-terminated and may be absent (ptr NULL). */
struct sf__str {
	const char *p;
	size_t n;
};

struct sf__tok_src {
	struct sf__str model;   /* tokenizer.ggml.model */
	struct sf__str pre;     /* tokenizer.ggml.pre */
	struct sf__str name;    /* general.name */
	struct sf__str arch;    /* general.architecture */
	uint64_t n_tokens;
	const struct sf__str *tokens;
	const float *scores;    /* NULL: none */
	uint64_t n_scores;
	const int32_t *types;   /* NULL: none */
	uint64_t n_types;
	const struct sf__str *merges;
	uint64_t n_merges;
	bool has_merges;
	int64_t id[SF__ID_COUNT]; /* -1 absent */
	int64_t id_old[3];        /* prefix, suffix, middle_token_id (older names of FIM_*) */
	int8_t add_bos, add_eos, add_space_prefix; /* -1 absent */
};

/* An empty description (every id and flag absent). */
void sf__tok_src_init(struct sf__tok_src *src);

/* Builds a tokenizer from src (which may go after). Errors as sf_tok_load's. */
int sf__tok_build(const struct sf__tok_src *src, struct sf_tok **out, struct sf_err *err);

/* vocab_specials.c: llama.cpp's adjustments of ids and attributes (end tokens found by their
 * text, "unused" tokens, the EOG set, strip flags), then the special sets. */
int sf__tok_specials(struct sf_tok *t, const struct sf__tok_src *src, struct sf_err *err);
/* vocab_pieces.c: the bytes of every token. */
int sf__tok_pieces(struct sf_tok *t, struct sf_err *err);
/* vocab_merges.c: the merge table and the byte tables of byte-level BPE. */
int sf__tok_merges(struct sf_tok *t, const struct sf__tok_src *src, struct sf_err *err);

/* The id of the token whose text is p[0..n), or -1. */
static inline int32_t sf__tok_lookup(const struct sf_tok *t, const void *p, size_t n)
{
	int32_t id = sf__strtab_find(&t->str, p, n);
	return id >= 0 && (uint32_t)id < t->n_vocab ? id : -1;
}

/* ---- encoding ---- */

/* Where tokens go: out[0..cap) and a count that goes on past cap. */
struct sf__sink {
	uint32_t *out;
	size_t cap, n;
};

static inline void sf__emit(struct sf__sink *k, uint32_t id)
{
	if (k->n < k->cap)
		k->out[k->n] = id;
	k->n++;
}

/* An encode call's buffers, grown as needed and freed at its end. */
struct sf__scratch {
	uint32_t *cp;       /* code points of a fragment */
	size_t cp_cap;
	uint8_t *bytes;     /* a word re-encoded, an escaped SPM text */
	size_t bytes_cap;
	uint8_t *enc;       /* a word in GPT-2's characters */
	size_t enc_cap;
	uint8_t *view;      /* the text the expressions run over */
	size_t view_cap;
	uint32_t *view_off; /* code point i starts at view[view_off[i]] */
	size_t view_off_cap;
	uint8_t *cut;
	size_t cut_cap;
	void *sym;          /* merge symbols */
	size_t sym_cap;
	struct sf__heap heap;
	void *md;           /* pcre2_match_data_8 */
};

/* Grows *buf to hold n elements of size (SF_E_NOMEM). */
int sf__grow(void **buf, size_t *cap, size_t n, size_t size, struct sf_err *err);
void sf__scratch_free(struct sf__scratch *s);

/* One fragment of text (no special tokens in it) into tokens. */
int sf__spm_encode(const struct sf_tok *t, const char *text, size_t len, bool space_prefix,
		   struct sf__scratch *s, struct sf__sink *k, struct sf_err *err);
int sf__bpe_encode(const struct sf_tok *t, const char *text, size_t len, struct sf__scratch *s,
		   struct sf__sink *k, struct sf_err *err);

/* A piece of the text after the special tokens are cut out: raw text, or one token. */
struct sf__frag {
	uint32_t start, len; /* raw text: text[start .. start + len) */
	uint32_t token;      /* SF_TOK_NONE for raw text */
};

/* Cuts set's special tokens out of text the way llama.cpp's tokenizer_st_partition does.
 * *frags (malloc'd, caller frees) gets *n fragments in order. */
int sf__split_specials(const struct sf_tok *t, const struct sf__spset *set, const char *text,
		       size_t len, struct sf__frag **frags, size_t *n, struct sf_err *err);

#endif
