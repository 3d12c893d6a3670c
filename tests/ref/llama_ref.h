/* llama-ref's shared parts: its options, what its log handler learns, the helpers that
 * llama_ref.c (the other subcommands) and llama_ref_bench.c (bench) both use. */
#ifndef LLAMA_REF_H
#define LLAMA_REF_H

#include <stdbool.h>
#include <stdio.h>

#include "ggml-backend.h"
#include "llama.h"

#define REF_MAX_TOKENS (1 << 20)   /* ids in one list */
#define REF_MAX_TEXT (64 << 20)    /* bytes read from stdin */
#define REF_MAX_REPS 1000
#define REF_MAX_GEN (1 << 20)      /* tokens in a greedy continuation */

enum ref_cmd {
	CMD_TOKENIZE = 1 << 0, CMD_DETOK = 1 << 1, CMD_LOGITS = 1 << 2,
	CMD_GREEDY = 1 << 3, CMD_BENCH = 1 << 4, CMD_INFO = 1 << 5, CMD_PERPLEXITY = 1 << 6,
	CMD_QUANTIZE = 1 << 7, CMD_DEQUANT = 1 << 8, CMD_EMBED = 1 << 9,
	CMD_ALL = (1 << 10) - 1,
};

struct ref_opts {
	unsigned cmd;
	const char *model;
	bool specials, bos, all_modes, incremental, stop, full, verbose, pure, imatrix_flat;
	long threads, ctx, ubatch, n, pp, tg, seqs, reps, depth, ftype;
	const char *tokens, *out, *only, *cpu, *sep, *logits_out, *inc_out, *pooling;
	const char *grammar; /* bench: a GBNF file, sampled under (the "grammar" window) */
	const char *cache_k; /* logits, greedy, bench: the cached keys' type, f16 or q8_0 */
	const char *cache_v; /* and the values', f16 or f32 */
	char **ids;          /* detok's ids given as arguments */
	int n_ids;
};

/* What llama.cpp's log said that the API does not: flash attention as resolved at the
 * context's creation ("auto" becomes enabled or disabled). */
struct ref_log {
	bool verbose;
	enum ggml_log_level last;
	int flash_attn;      /* -1 not resolved yet, 0 disabled, 1 enabled */
};

/* Prints "llama-ref: <message>" on stderr; returns 1 (the failed exit status). */
int ref_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Seconds on the monotonic clock. */
double ref_now(void);

/* Writes s as a JSON string (null for NULL). */
void ref_json_str(FILE *f, const char *s);

/* A context of n_ctx tokens over n_seq sequences taking n_batch tokens a call, at
 * llama.cpp's defaults otherwise (--threads, --ubatch applied); NULL after saying why. */
struct llama_context *ref_context(struct llama_model *m, const struct ref_opts *o,
				  long n_ctx, long n_batch, long n_seq);

/* Decodes ids[0..n) of sequence seq from position pos0 in calls of at most llama_n_batch()
 * tokens (b holds as many); out_all keeps every position's logits, else the last one's. */
int ref_decode(struct llama_context *ctx, struct llama_batch *b, const llama_token *ids,
	       long n, long pos0, llama_seq_id seq, bool out_all);

/* Sets token i of batch b. */
void ref_batch_set(struct llama_batch *b, int i, llama_token t, llama_pos pos,
		   llama_seq_id seq, bool out);

/* Flash attention as the log resolved it: "enabled", "disabled" or "auto (unresolved)". */
const char *ref_flash_name(const struct ref_log *log);

/* Reads all of f (at most REF_MAX_TEXT bytes) into *out (NUL-terminated, to free), *len. */
int ref_read_all(FILE *f, char **out, size_t *len);
/* llama_ref_cpu.c: loads libggml-cpu-WANT.so (want NULL: the variant of the highest score on
 * this CPU) and writes the variant's name into name ("" for libggml-cpu.so); 0 or 1. */
int ref_load_cpu(const char *want, char *name, size_t cap);

/* perplexity MODEL --ctx N < text (llama_ref_ppl.c): one line, tokens=... ppl=P. */
int cmd_perplexity(const struct ref_opts *o, struct llama_model *m);

/* bench MODEL: prompt, batch-1 decode and S-sequence decode speeds as one line of JSON. */
int cmd_bench(const struct ref_opts *o, struct llama_model *m, const char *variant,
	      const struct ref_log *log);

/* quantize MODEL --ftype N [--pure] [--imatrix-flat] --out OUT: llama_model_quantize
 * (llama_ref_quant.c); --imatrix-flat gives it an importance matrix of ones. */
int cmd_quantize(const struct ref_opts *o);

/* dequant MODEL --out FILE: each quantized tensor's rows as ggml's to_float gives them. */
int cmd_dequant(const struct ref_opts *o);

#endif
