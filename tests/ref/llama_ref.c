/* llama-ref: llama.cpp (the prebuilt libraries of the node-llama-cpp npm package) driven as the
 * reference for superfluid's tests and benchmarks: tokens, logits, greedy continuations, speed.
 * Built at test time by tests/ref/build.sh against a llama.cpp clone's headers (see
 * tests/ref/README). Output is made for shells and C: ids on one line, JSON on one line,
 * logits as raw native-endian f32 rows. Exit status: 0 done, 1 failed, 2 bad usage. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "llama_ref.h"

#ifndef LLAMA_REF_LIB
#error "build with -DLLAMA_REF_LIB=\"<folder of the prebuilt llama.cpp libraries>\""
#endif

static void ref_log_cb(enum ggml_log_level level, const char *text, void *user)
{
	struct ref_log *log = user;

	if (level != GGML_LOG_LEVEL_CONT)
		log->last = level;
	if (strstr(text, "Flash Attention enabled"))
		log->flash_attn = 1;
	else if (strstr(text, "Flash Attention not supported"))
		log->flash_attn = 0;
	if (log->verbose || log->last == GGML_LOG_LEVEL_ERROR)
		fputs(text, stderr);
}

int ref_fail(const char *fmt, ...)
{
	va_list ap;

	fputs("llama-ref: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

double ref_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- output helpers */

void ref_json_str(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void ref_print_ids(const llama_token *ids, long n)
{
	for (long i = 0; i < n; i++)
		printf(i ? " %d" : "%d", ids[i]);
	putchar('\n');
}

/* ---- input helpers */

int ref_read_all(FILE *f, char **out, size_t *len)
{
	size_t cap = 1 << 16, n = 0, got;
	char *buf = malloc(cap), *nb;

	if (!buf)
		return ref_fail("out of memory");
	while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += got;
		if (n + 1 < cap)
			continue;
		if (cap >= REF_MAX_TEXT) {
			free(buf);
			return ref_fail("input over %d bytes", REF_MAX_TEXT);
		}
		if (!(nb = realloc(buf, cap * 2))) {
			free(buf);
			return ref_fail("out of memory");
		}
		buf = nb;
		cap *= 2;
	}
	if (ferror(f)) {
		free(buf);
		return ref_fail("cannot read the input: %s", strerror(errno));
	}
	buf[n] = 0;
	*out = buf;
	*len = n;
	return 0;
}

/* Parses ids separated by spaces, commas or newlines, each in [0, n_vocab). */
static int ref_parse_ids(const char *s, int n_vocab, llama_token **out, long *n_out)
{
	llama_token *ids = NULL, *ni;
	long n = 0, cap = 0;

	for (;;) {
		char *end;
		long v;

		while (*s == ' ' || *s == ',' || *s == '\n' || *s == '\t' || *s == '\r')
			s++;
		if (!*s)
			break;
		errno = 0;
		v = strtol(s, &end, 10);
		if (end == s || errno || v < 0 || v >= n_vocab) {
			free(ids);
			return ref_fail("bad token id near '%.20s' (ids are 0..%d)", s, n_vocab - 1);
		}
		if (n == REF_MAX_TOKENS) {
			free(ids);
			return ref_fail("over %d token ids", REF_MAX_TOKENS);
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			if (!(ni = realloc(ids, (size_t)cap * sizeof(*ids)))) {
				free(ids);
				return ref_fail("out of memory");
			}
			ids = ni;
		}
		ids[n++] = (llama_token)v;
		s = end;
	}
	*out = ids;
	*n_out = n;
	return 0;
}

/* --tokens "1 2 3", or --tokens - for the ids on stdin. */
static int ref_tokens_opt(const struct ref_opts *o, int n_vocab, llama_token **ids, long *n)
{
	char *text;
	size_t len;
	int rc;

	if (!o->tokens)
		return ref_fail("--tokens is required");
	if (strcmp(o->tokens, "-"))
		rc = ref_parse_ids(o->tokens, n_vocab, ids, n);
	else if (!(rc = ref_read_all(stdin, &text, &len))) {
		rc = ref_parse_ids(text, n_vocab, ids, n);
		free(text);
	}
	if (!rc && !*n) {
		free(*ids);
		rc = ref_fail("--tokens holds no ids");
	}
	return rc;
}

/* ---- llama.cpp objects */

static struct llama_model *ref_model(const char *path, bool vocab_only)
{
	struct llama_model_params mp = llama_model_default_params();
	struct llama_model *m;

	if (access(path, R_OK)) {
		ref_fail("cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	mp.vocab_only = vocab_only;
	mp.n_gpu_layers = 0;
	if (!(m = llama_model_load_from_file(path, mp)))
		ref_fail("llama.cpp cannot load %s (its log above says why)", path);
	return m;
}

struct llama_context *ref_context(struct llama_model *m, const struct ref_opts *o,
				  long n_ctx, long n_batch, long n_seq)
{
	struct llama_context_params cp = llama_context_default_params();
	struct llama_context *ctx;

	if (n_ctx > INT32_MAX / 2 || n_batch > INT32_MAX / 2) {
		ref_fail("context of %ld tokens is too large", n_ctx);
		return NULL;
	}
	cp.n_ctx = (uint32_t)n_ctx;
	if ((uint32_t)n_batch > cp.n_batch)
		cp.n_batch = (uint32_t)n_batch;
	if (o->ubatch)
		cp.n_ubatch = (uint32_t)o->ubatch;
	if (o->cache_k && !strcmp(o->cache_k, "q8_0"))
		cp.type_k = GGML_TYPE_Q8_0;
	else if (o->cache_k && strcmp(o->cache_k, "f16")) {
		ref_fail("--cache-type-k is f16 or q8_0, not '%s'", o->cache_k);
		return NULL;
	}
	if (o->cache_v && !strcmp(o->cache_v, "f32"))
		cp.type_v = GGML_TYPE_F32;
	else if (o->cache_v && strcmp(o->cache_v, "f16")) {
		ref_fail("--cache-type-v is f16 or f32, not '%s'", o->cache_v);
		return NULL;
	}
	cp.n_seq_max = (uint32_t)n_seq;
	cp.n_threads = cp.n_threads_batch = (int32_t)o->threads;
	if (!(ctx = llama_init_from_model(m, cp)))
		ref_fail("llama.cpp cannot make a context of %ld tokens, %ld sequences", n_ctx, n_seq);
	return ctx;
}

void ref_batch_set(struct llama_batch *b, int i, llama_token t, llama_pos pos,
		   llama_seq_id seq, bool out)
{
	b->token[i] = t;
	b->pos[i] = pos;
	b->n_seq_id[i] = 1;
	b->seq_id[i][0] = seq;
	b->logits[i] = out;
}

int ref_decode(struct llama_context *ctx, struct llama_batch *b, const llama_token *ids,
	       long n, long pos0, llama_seq_id seq, bool out_all)
{
	long step = llama_n_batch(ctx), rc;

	for (long at = 0; at < n; at += step) {
		int k = (int)(n - at < step ? n - at : step);

		for (int i = 0; i < k; i++)
			ref_batch_set(b, i, ids[at + i], (llama_pos)(pos0 + at + i), seq,
				      out_all || at + i == n - 1);
		b->n_tokens = k;
		if ((rc = llama_decode(ctx, *b)))
			return ref_fail("llama_decode of %d tokens at %ld said %ld", k, pos0 + at, rc);
	}
	return 0;
}

static llama_token ref_argmax(const float *row, int n)
{
	int best = 0;

	for (int i = 1; i < n; i++)
		if (row[i] > row[best])
			best = i;
	return best;
}

const char *ref_flash_name(const struct ref_log *log)
{
	return log->flash_attn < 0 ? "auto (unresolved)" : log->flash_attn ? "enabled" : "disabled";
}

/* ---- subcommands */

/* Tokenizes text[0..len) and prints the ids on one line. */
static int ref_tokenize_one(const struct llama_vocab *v, bool bos, bool specials,
			    const char *text, size_t len)
{
	int32_t n, cap = (int32_t)len + 8;
	llama_token *ids = NULL;
	int rc = 0;

	if (len > INT32_MAX / 2)
		return ref_fail("text too long");
	for (;;) {
		free(ids);
		if (!(ids = malloc((size_t)cap * sizeof(*ids))))
			return ref_fail("out of memory");
		n = llama_tokenize(v, text, (int32_t)len, ids, cap, bos, specials);
		if (n >= 0 || n == INT32_MIN || -n <= cap)
			break;
		cap = -n;    /* the count it needs */
	}
	if (n < 0)
		rc = ref_fail("llama_tokenize failed (%d)", n);
	else
		ref_print_ids(ids, n);
	free(ids);
	return rc;
}

/* stdin as one text, or with --sep as the texts between separators (one at the very end
 * closes the last text, as in llama.cpp's vocab tests): a line of ids each. With --all-modes
 * all the texts four times, in the modes 0 to 3 (bit 0 --bos, bit 1 --specials): one vocab
 * load for what four runs would do. */
static int cmd_tokenize(const struct ref_opts *o, const struct llama_vocab *v)
{
	size_t len, sl = o->sep ? strlen(o->sep) : 0;
	char *text, *at, *hit;
	int rc = 0;

	if (o->sep && !sl)
		return ref_fail("--sep is empty");
	if (o->all_modes && (o->bos || o->specials))
		return ref_fail("--all-modes takes neither --bos nor --specials");
	if ((rc = ref_read_all(stdin, &text, &len)))
		return rc;
	for (int mode = 0; !rc && mode < (o->all_modes ? 4 : 1); mode++) {
		bool bos = o->all_modes ? mode & 1 : o->bos;
		bool specials = o->all_modes ? mode & 2 : o->specials;

		for (at = text; !rc; at = hit + sl) {
			hit = sl ? memmem(at, len - (size_t)(at - text), o->sep, sl) : NULL;
			rc = ref_tokenize_one(v, bos, specials, at,
					      hit ? (size_t)(hit - at) : len - (size_t)(at - text));
			if (!hit || hit + sl == text + len)
				break;
		}
	}
	free(text);
	return rc;
}

static int cmd_detok(const struct ref_opts *o, const struct llama_vocab *v)
{
	int n_vocab = llama_vocab_n_tokens(v), rc;
	llama_token *ids = NULL;
	char *text = NULL;
	long n = 0;
	int32_t got;

	if (o->n_ids) {
		for (int i = 0; i < o->n_ids; i++) {
			char *end;
			long id;

			errno = 0;
			id = strtol(o->ids[i], &end, 10);
			if (end == o->ids[i] || *end || errno || id < 0 || id >= n_vocab)
				return ref_fail("bad token id '%s' (ids are 0..%d)", o->ids[i], n_vocab - 1);
		}
		if (!(ids = malloc((size_t)o->n_ids * sizeof(*ids))))
			return ref_fail("out of memory");
		for (int i = 0; i < o->n_ids; i++)
			ids[i] = (llama_token)strtol(o->ids[i], NULL, 10);
		n = o->n_ids;
	} else if ((rc = ref_read_all(stdin, &text, &(size_t){0})) ||
		   (rc = ref_parse_ids(text, n_vocab, &ids, &n))) {
		free(text);
		return rc;
	}
	free(text);
	int32_t cap = 256;
	for (rc = 1;;) {
		if (!(text = malloc((size_t)cap))) {
			rc = ref_fail("out of memory");
			break;
		}
		got = llama_detokenize(v, ids, (int32_t)n, text, cap, false, o->specials);
		if (got >= 0) {
			rc = fwrite(text, 1, (size_t)got, stdout) == (size_t)got ? 0 :
				ref_fail("cannot write the text");
			break;
		}
		free(text);
		text = NULL;
		if (got == INT32_MIN || -(int64_t)got > REF_MAX_TEXT) {
			rc = ref_fail("text of the ids too long");
			break;
		}
		cap = -got;
	}
	free(text);
	free(ids);
	return rc;
}

/* The logits of every position of ids[0..n) into path (n_vocab floats a row): in one batch,
 * or incremental, a llama_decode a token; a fresh context of --ctx (or n) tokens. */
static int ref_logits(const struct ref_opts *o, struct llama_model *m, const llama_token *ids,
		      long n, const char *path, bool incremental)
{
	int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m)), rc = 1;
	struct llama_context *ctx = NULL;
	struct llama_batch b = {0};
	FILE *f = NULL;

	if (o->ctx && o->ctx < n)
		return ref_fail("--ctx %ld is under the %ld tokens", o->ctx, n);
	if (!(ctx = ref_context(m, o, o->ctx ? o->ctx : n, n, 1)))
		goto out;
	b = llama_batch_init((int32_t)(incremental ? 1 : n), 0, 1);
	if (!(f = fopen(path, "wb"))) {
		rc = ref_fail("cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	if (!incremental && ref_decode(ctx, &b, ids, n, 0, 0, true))
		goto out;
	for (long i = 0; i < n; i++) {
		const float *row;

		if (incremental && ref_decode(ctx, &b, ids + i, 1, i, 0, true))
			goto out;
		if (!(row = llama_get_logits_ith(ctx, incremental ? -1 : (int32_t)i))) {
			rc = ref_fail("no logits for position %ld", i);
			goto out;
		}
		if (fwrite(row, sizeof(float), (size_t)n_vocab, f) != (size_t)n_vocab) {
			rc = ref_fail("cannot write %s: %s", path, strerror(errno));
			goto out;
		}
	}
	if (fclose(f)) {
		f = NULL;
		rc = ref_fail("cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	f = NULL;
	rc = 0;
out:
	if (f)
		fclose(f);
	if (b.token)
		llama_batch_free(b);
	if (ctx)
		llama_free(ctx);
	return rc;
}

static int cmd_logits(const struct ref_opts *o, struct llama_model *m)
{
	int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m)), rc;
	llama_token *ids;
	long n;

	if (!o->out)
		return ref_fail("--out FILE is required");
	if (ref_tokens_opt(o, n_vocab, &ids, &n))
		return 1;
	if (!(rc = ref_logits(o, m, ids, n, o->out, o->incremental)))
		printf("n_tokens=%ld n_vocab=%d\n", n, n_vocab);
	free(ids);
	return rc;
}

/* The pooled embedding of --tokens as llama.cpp's server gives it (--pooling mean, cls or last;
 * default: the model's), scaled to length 1 (its embd_normalize 2): the values on one line. */
static int cmd_embed(const struct ref_opts *o, struct llama_model *m)
{
	int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m)), rc = 1;
	int n_embd = llama_model_n_embd(m);
	llama_token *ids;
	long n;
	struct llama_context *ctx = NULL;
	struct llama_batch b = {0};

	if (ref_tokens_opt(o, n_vocab, &ids, &n))
		return 1;
	struct llama_context_params cp = llama_context_default_params();
	cp.n_ctx = cp.n_batch = cp.n_ubatch = (uint32_t)n;
	cp.n_seq_max = 1;
	cp.n_threads = cp.n_threads_batch = (int32_t)o->threads;
	cp.embeddings = true;
	cp.pooling_type = LLAMA_POOLING_TYPE_UNSPECIFIED;
	if (o->pooling && !strcmp(o->pooling, "mean"))
		cp.pooling_type = LLAMA_POOLING_TYPE_MEAN;
	else if (o->pooling && !strcmp(o->pooling, "cls"))
		cp.pooling_type = LLAMA_POOLING_TYPE_CLS;
	else if (o->pooling && !strcmp(o->pooling, "last"))
		cp.pooling_type = LLAMA_POOLING_TYPE_LAST;
	else if (o->pooling) {
		free(ids);
		return ref_fail("--pooling is mean, cls or last, not '%s'", o->pooling);
	}
	if (!(ctx = llama_init_from_model(m, cp))) {
		ref_fail("llama.cpp cannot make an embeddings context of %ld tokens", n);
		goto out;
	}
	b = llama_batch_init((int32_t)n, 0, 1);
	if (ref_decode(ctx, &b, ids, n, 0, 0, true))
		goto out;
	const float *v = llama_get_embeddings_seq(ctx, 0);
	if (!v) {
		ref_fail("no pooled embedding (pooling none?)");
		goto out;
	}
	double sum = 0;
	for (int j = 0; j < n_embd; j++)
		sum += (double)v[j] * v[j];
	double scale = sum > 0 ? 1.0 / sqrt(sum) : 1.0;
	for (int j = 0; j < n_embd; j++)
		printf("%s%.9g", j ? " " : "", v[j] * scale);
	printf("\n");
	rc = 0;
out:
	if (b.token)
		llama_batch_free(b);
	if (ctx)
		llama_free(ctx);
	free(ids);
	return rc;
}

static int cmd_greedy(const struct ref_opts *o, struct llama_model *m)
{
	const struct llama_vocab *v = llama_model_get_vocab(m);
	int n_vocab = llama_vocab_n_tokens(v), rc = 1;
	struct llama_context *ctx = NULL;
	llama_token *ids, *seq = NULL, *gen;
	struct llama_batch b = {0};
	long n, k = 0;

	if (ref_tokens_opt(o, n_vocab, &ids, &n))
		return 1;
	if (o->ctx && o->ctx < n + o->n) {
		rc = ref_fail("--ctx %ld is under the %ld tokens + %ld", o->ctx, n, o->n);
		goto out;
	}
	if (!(seq = malloc((size_t)(n + o->n + 1) * sizeof(*seq))) ||
	    !(ctx = ref_context(m, o, o->ctx ? o->ctx : n + o->n, n, 1)))
		goto out;
	memcpy(seq, ids, (size_t)n * sizeof(*seq));
	gen = seq + n;
	b = llama_batch_init((int32_t)n, 0, 1);
	if (ref_decode(ctx, &b, ids, n, 0, 0, false))
		goto out;
	while (k < o->n) {
		const float *row = llama_get_logits_ith(ctx, -1);

		if (!row) {
			rc = ref_fail("no logits after %ld tokens", n + k);
			goto out;
		}
		gen[k] = ref_argmax(row, n_vocab);
		if (++k == o->n || (o->stop && llama_vocab_is_eog(v, gen[k - 1])))
			break;
		if (ref_decode(ctx, &b, gen + k - 1, 1, n + k - 1, 0, true))
			goto out;
	}
	ref_print_ids(gen, k);
	llama_batch_free(b);
	b = (struct llama_batch){0};
	llama_free(ctx);
	ctx = NULL;
	/* What logits --out and logits --incremental give for prompt + stream, without two more
	 * loads of the model (tests/engine/agree.sh). */
	rc = (o->logits_out && ref_logits(o, m, seq, n + k, o->logits_out, false)) ||
	     (o->inc_out && ref_logits(o, m, seq, n + k, o->inc_out, true));
out:
	if (b.token)
		llama_batch_free(b);
	if (ctx)
		llama_free(ctx);
	free(seq);
	free(ids);
	return rc;
}

static bool ref_meta_long(const struct llama_model *m, const char *arch, const char *key, long *v)
{
	char k[256], buf[64], *end;

	snprintf(k, sizeof(k), "%s.%s", arch, key);
	if (llama_model_meta_val_str(m, k, buf, sizeof(buf)) < 0)
		return false;
	errno = 0;
	*v = strtol(buf, &end, 10);
	return !errno && end != buf && !*end;
}

static int cmd_info(const struct ref_opts *o, struct llama_model *m, const char *variant,
		    const struct ref_log *log)
{
	static const char *vtypes[] = {"none", "spm", "bpe", "wpm", "ugm", "rwkv", "plamo2", "test"};
	const struct llama_vocab *v = llama_model_get_vocab(m);
	struct llama_context_params cp = llama_context_default_params();
	const char *keys[] = {"block_count", "embedding_length", "attention.head_count",
			      "attention.head_count_kv", "context_length"};
	const char *names[] = {"n_layer", "n_embd", "n_head", "n_head_kv", "n_ctx_train"};
	enum llama_vocab_type vt = llama_vocab_type(v);
	ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
	ggml_backend_reg_t reg = ggml_backend_reg_by_name("CPU");
	ggml_backend_get_features_t features = reg ?
		(ggml_backend_get_features_t)ggml_backend_reg_get_proc_address(reg,
			"ggml_backend_get_features") : NULL;
	char arch[128] = "", name[256] = "";
	struct llama_context *ctx = NULL;

	if (o->full && !(ctx = ref_context(m, o, 512, 512, 1)))
		return 1;
	llama_model_meta_val_str(m, "general.architecture", arch, sizeof(arch));
	llama_model_meta_val_str(m, "general.name", name, sizeof(name));
	printf("{\"model\":");
	ref_json_str(stdout, o->model);
	printf(",\"arch\":");
	ref_json_str(stdout, arch);
	printf(",\"name\":");
	ref_json_str(stdout, name);
	printf(",\"vocab_type\":\"%s\",\"n_vocab\":%d", (unsigned)vt < 8 ? vtypes[vt] : "unknown",
	       llama_vocab_n_tokens(v));
	for (int i = 0; i < 5; i++) {
		long val;

		if (ref_meta_long(m, arch, keys[i], &val))
			printf(",\"%s\":%ld", names[i], val);
		else
			printf(",\"%s\":null", names[i]);
	}
	printf(",\"bos\":%d,\"eos\":%d,\"eot\":%d,\"add_bos\":%s,\"add_eos\":%s,\"chat_template\":",
	       llama_vocab_bos(v), llama_vocab_eos(v), llama_vocab_eot(v),
	       llama_vocab_get_add_bos(v) ? "true" : "false",
	       llama_vocab_get_add_eos(v) ? "true" : "false");
	ref_json_str(stdout, llama_model_chat_template(m, NULL));
	printf(",\"flash_attn\":");
	ref_json_str(stdout, ctx ? ref_flash_name(log) : llama_flash_attn_type_name(cp.flash_attn_type));
	printf(",\"type_k\":\"%s\",\"type_v\":\"%s\",\"n_batch\":%u,\"n_ubatch\":%u,\"kv_unified\":%s",
	       ggml_type_name(cp.type_k), ggml_type_name(cp.type_v),
	       ctx ? llama_n_batch(ctx) : cp.n_batch,
	       ctx ? llama_n_ubatch(ctx) : o->ubatch ? (unsigned)o->ubatch : cp.n_ubatch,
	       cp.kv_unified ? "true" : "false");
	if (ctx) {
		char desc[256] = "";

		llama_model_desc(m, desc, sizeof(desc));
		printf(",\"desc\":");
		ref_json_str(stdout, desc);
		printf(",\"n_params\":%llu,\"size\":%llu",
		       (unsigned long long)llama_model_n_params(m),
		       (unsigned long long)llama_model_size(m));
	}
	printf(",\"cpu_variant\":");
	ref_json_str(stdout, variant);
	printf(",\"cpu\":");
	ref_json_str(stdout, cpu ? ggml_backend_dev_description(cpu) : NULL);
	printf(",\"cpu_features\":{");
	struct ggml_backend_feature *f0 = features ? features(reg) : NULL;
	for (struct ggml_backend_feature *f = f0; f && f->name; f++) {
		if (f != f0)
			putchar(',');
		ref_json_str(stdout, f->name);
		putchar(':');
		ref_json_str(stdout, f->value);
	}
	printf("},\"llama_version\":");
	ref_json_str(stdout, llama_version());
	printf("}\n");
	if (ctx)
		llama_free(ctx);
	return 0;
}

/* ---- command line */

struct ref_optdef {
	const char *name;
	unsigned cmds;       /* the subcommands that take it */
	char kind;           /* 'b' flag, 's' string, 'n' number */
	size_t off;
	long min, max;
};

#define OPT(n, c, k, f, lo, hi) { n, c, k, offsetof(struct ref_opts, f), lo, hi }
static const struct ref_optdef ref_optdefs[] = {
	OPT("--specials", CMD_TOKENIZE | CMD_DETOK, 'b', specials, 0, 0),
	OPT("--bos", CMD_TOKENIZE, 'b', bos, 0, 0),
	OPT("--sep", CMD_TOKENIZE, 's', sep, 0, 0),
	OPT("--all-modes", CMD_TOKENIZE, 'b', all_modes, 0, 0),
	OPT("--threads", CMD_LOGITS | CMD_GREEDY | CMD_BENCH | CMD_INFO | CMD_PERPLEXITY |
	    CMD_QUANTIZE | CMD_EMBED, 'n',
	    threads, 1, 1024),
	OPT("--ctx", CMD_LOGITS | CMD_GREEDY | CMD_PERPLEXITY, 'n', ctx, 1, 1 << 24),
	OPT("--ubatch", CMD_LOGITS | CMD_GREEDY | CMD_BENCH | CMD_INFO | CMD_PERPLEXITY, 'n',
	    ubatch, 1, 1 << 20),
	OPT("--tokens", CMD_LOGITS | CMD_GREEDY | CMD_EMBED, 's', tokens, 0, 0),
	OPT("--cache-type-k", CMD_LOGITS | CMD_GREEDY | CMD_BENCH, 's', cache_k, 0, 0),
	OPT("--cache-type-v", CMD_LOGITS | CMD_GREEDY | CMD_BENCH, 's', cache_v, 0, 0),
	OPT("--pooling", CMD_EMBED, 's', pooling, 0, 0),
	OPT("--out", CMD_LOGITS | CMD_QUANTIZE | CMD_DEQUANT, 's', out, 0, 0),
	OPT("--ftype", CMD_QUANTIZE, 'n', ftype, 0, 1023),
	OPT("--pure", CMD_QUANTIZE, 'b', pure, 0, 0),
	OPT("--imatrix-flat", CMD_QUANTIZE, 'b', imatrix_flat, 0, 0),
	OPT("--incremental", CMD_LOGITS, 'b', incremental, 0, 0),
	OPT("--n", CMD_GREEDY, 'n', n, 1, REF_MAX_GEN),
	OPT("--stop", CMD_GREEDY, 'b', stop, 0, 0),
	OPT("--logits-out", CMD_GREEDY, 's', logits_out, 0, 0),
	OPT("--inc-out", CMD_GREEDY, 's', inc_out, 0, 0),
	OPT("--pp", CMD_BENCH, 'n', pp, 0, 1 << 20),
	OPT("--tg", CMD_BENCH, 'n', tg, 0, 1 << 20),
	OPT("--seqs", CMD_BENCH, 'n', seqs, 0, 256),
	OPT("--reps", CMD_BENCH, 'n', reps, 1, REF_MAX_REPS),
	OPT("--depth", CMD_BENCH, 'n', depth, 0, 1 << 20),
	OPT("--only", CMD_BENCH, 's', only, 0, 0),
	OPT("--grammar", CMD_BENCH, 's', grammar, 0, 0),
	OPT("--full", CMD_INFO, 'b', full, 0, 0),
	OPT("--cpu", CMD_ALL, 's', cpu, 0, 0),
	OPT("--verbose", CMD_ALL, 'b', verbose, 0, 0),
};

static int ref_usage(void)
{
	fputs("usage: llama-ref SUBCOMMAND MODEL [options]   (see tests/ref/README)\n"
	      "  tokenize MODEL [--specials] [--bos] [--sep S] < text   ids on one line (a line a text)\n"
	      "    (--all-modes: the texts plain, --bos, --specials, then both)\n"
	      "  detok MODEL [--specials] [ids...|< ids]           the text's bytes\n"
	      "  logits MODEL --tokens \"1 2 3\"|- --out FILE [--incremental] [--ctx N]\n"
	      "  greedy MODEL --tokens \"1 2 3\"|- --n N [--stop] [--ctx N]\n"
	      "    [--logits-out FILE] [--inc-out FILE]   then logits (--incremental) of it all\n"
	      "  bench MODEL [--pp 512] [--tg 128] [--seqs S] [--reps R] [--depth D] [--only pp|tg|par]\n"
	      "  info MODEL [--full]                               JSON\n"
	      "  perplexity MODEL --ctx N < text                   tokens=... ppl=P\n"
	      "  quantize MODEL --ftype N [--pure] [--imatrix-flat] --out OUT\n"
	      "                                                   llama_model_quantize\n"
	      "  dequant MODEL --out FILE                          ggml's to_float of each tensor\n"
	      "  embed MODEL --tokens \"1 2 3\"|- [--pooling mean|cls|last]   the pooled vector\n"
	      "common: --threads N (default: online CPUs), --ubatch N, --cpu VARIANT, --verbose;\n"
	      "logits, greedy, bench: --cache-type-k f16|q8_0, --cache-type-v f16|f32 (the cached\n"
	      "  keys' and values' types);\n"
	      "env: LLAMA_REF_CPU=VARIANT, LLAMA_REF_VERBOSE=1\n", stderr);
	return 2;
}

static int ref_parse(int argc, char **argv, struct ref_opts *o)
{
	static const char *cmds[] = {"tokenize", "detok", "logits", "greedy", "bench", "info",
				     "perplexity", "quantize", "dequant", "embed"};

	if (argc < 3)
		return ref_usage();
	for (unsigned i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i]))
			o->cmd = 1u << i;
	if (!o->cmd)
		return ref_usage();
	o->model = argv[2];
	for (int i = 3; i < argc; i++) {
		const struct ref_optdef *d = NULL;
		char *end;

		for (size_t j = 0; j < sizeof(ref_optdefs) / sizeof(*ref_optdefs); j++)
			if (!strcmp(argv[i], ref_optdefs[j].name))
				d = &ref_optdefs[j];
		if (!d && o->cmd == CMD_DETOK && argv[i][0] != '-') {
			if (!o->ids)
				o->ids = argv + i;
			if (o->ids + o->n_ids != argv + i)
				return ref_fail("detok: the ids go together") + 1;
			o->n_ids++;
			continue;
		}
		if (!d || !(d->cmds & o->cmd))
			return ref_fail("%s: unknown option '%s'", argv[1], argv[i]) + 1;
		if (d->kind == 'b') {
			*(bool *)((char *)o + d->off) = true;
			continue;
		}
		if (++i == argc)
			return ref_fail("%s needs a value", d->name) + 1;
		if (d->kind == 's') {
			*(const char **)((char *)o + d->off) = argv[i];
			continue;
		}
		errno = 0;
		long v = strtol(argv[i], &end, 10);
		if (errno || end == argv[i] || *end || v < d->min || v > d->max)
			return ref_fail("%s takes %ld..%ld, not '%s'", d->name, d->min, d->max, argv[i]) + 1;
		*(long *)((char *)o + d->off) = v;
	}
	if (o->cmd == CMD_GREEDY && !o->n)
		return ref_fail("greedy: --n is required") + 1;
	return 0;
}

int main(int argc, char **argv)
{
	struct ref_opts o = {.pp = 512, .tg = 128, .reps = 1};
	struct ref_log log = {.flash_attn = -1, .last = GGML_LOG_LEVEL_INFO};
	const char *env_cpu = getenv("LLAMA_REF_CPU"), *env_verbose = getenv("LLAMA_REF_VERBOSE");
	struct llama_model *m;
	char variant[256];
	int rc;

	if ((rc = ref_parse(argc, argv, &o)))
		return rc;
	if (!o.cpu && env_cpu && *env_cpu)
		o.cpu = env_cpu;
	log.verbose = o.verbose || (env_verbose && *env_verbose && strcmp(env_verbose, "0"));
	if (!o.threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		o.threads = n > 0 ? n : 1;
	}
	llama_log_set(ref_log_cb, &log);
	if (ref_load_cpu(o.cpu, variant, sizeof(variant)))
		return 1;
	llama_backend_init();
	if (o.cmd & (CMD_QUANTIZE | CMD_DEQUANT)) {
		rc = o.cmd == CMD_QUANTIZE ? cmd_quantize(&o) : cmd_dequant(&o);
		llama_backend_free();
		return rc;
	}
	if (!(m = ref_model(o.model, o.cmd & (CMD_TOKENIZE | CMD_DETOK) ||
			    (o.cmd == CMD_INFO && !o.full))))
		rc = 1;
	else if (o.cmd == CMD_TOKENIZE)
		rc = cmd_tokenize(&o, llama_model_get_vocab(m));
	else if (o.cmd == CMD_DETOK)
		rc = cmd_detok(&o, llama_model_get_vocab(m));
	else if (o.cmd == CMD_LOGITS)
		rc = cmd_logits(&o, m);
	else if (o.cmd == CMD_GREEDY)
		rc = cmd_greedy(&o, m);
	else if (o.cmd == CMD_BENCH)
		rc = cmd_bench(&o, m, variant, &log);
	else if (o.cmd == CMD_PERPLEXITY)
		rc = cmd_perplexity(&o, m);
	else if (o.cmd == CMD_EMBED)
		rc = cmd_embed(&o, m);
	else
		rc = cmd_info(&o, m, variant, &log);
	if (m)
		llama_model_free(m);
	llama_backend_free();
	if (fflush(stdout) && !rc)
		rc = ref_fail("cannot write the output: %s", strerror(errno));
	return rc;
}
