/* The GGUF engine (gguf_engine.h): loading a file with progress, what the engine serves, its
 * tokenizer, special tokens and chat templates. Contexts and compute are in gguf_run.c. */
#include "engine/gguf_internal.h"

#include "kern/kern.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define say ge_say

void ge_say(const struct ge *g, const char *fmt, ...)
{
	if (!g->cfg.progress)
		return;
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	g->cfg.progress(g->cfg.progress_arg, line);
}

static double mib(uint64_t b)
{
	return (double)b / (1 << 20);
}

/* Reads a byte of every page of the tensors (but the packed ones': gguf_pack.c), in every
 * part of a split model, so that the first requests do not wait on the disk; says how far it
 * got about once a second. */
static void touch(struct ge *g)
{
	const uint32_t parts = sf_gguf_n_parts(g->file);
	const long page = sysconf(_SC_PAGESIZE);
	uint64_t mapped = 0, total = 0, done = 0;
	for (uint32_t p = 0; p < parts; p++) {
		const uint8_t *base;
		uint64_t start, size;
		sf_gguf_part(g->file, p, &base, &start, &size);
		mapped += size;
		total += size > start ? size - start : 0;
	}
	say(g, "%s: mapped %.1f MiB (%llu tensors%s)", g->path, mib(mapped),
	    (unsigned long long)sf_gguf_n_tensors(g->file), parts > 1 ? " in parts" : "");
	volatile uint8_t sink = 0;
	double last = now_s();
	for (uint32_t p = 0; p < parts; p++) {
		const uint8_t *base;
		uint64_t start, size;
		sf_gguf_part(g->file, p, &base, &start, &size);
		if (size <= start)
			continue;
		uintptr_t a = (uintptr_t)(base + start) & ~(uintptr_t)(page - 1);
		madvise((void *)a, (size_t)(base + size - (const uint8_t *)a), MADV_WILLNEED);
		for (uint64_t off = 0; off < size - start; off += (uint64_t)page, done += (uint64_t)page) {
			const uint64_t at = (uint64_t)(uintptr_t)(base + start + off);
			if (ge_pack_next_touch(g, at) >= at + (uint64_t)page)
				continue;
			sink ^= base[start + off];
			if ((done & ((64u << 20) - 1)) == 0 && now_s() - last >= 1.0) {
				last = now_s();
				say(g, "%s: touched %.0f%% (%.1f of %.1f MiB)", g->path,
				    100.0 * done / total, mib(done), mib(total));
			}
		}
	}
	(void)sink;
}

static int copy_name(struct ge *g, struct sf_err *err)
{
	if (g->cfg.name) {
		if (!g->cfg.name[0] || strlen(g->cfg.name) >= sizeof(g->name))
			return sf_err_set(err, SF_E_RANGE, "model name of %zu bytes (1 to %zu)",
					  strlen(g->cfg.name), sizeof(g->name) - 1);
		snprintf(g->name, sizeof(g->name), "%s", g->cfg.name);
		return 0;
	}
	struct sf_gguf_str s;
	bool ok = !sf_gguf_get_str(g->file, "general.name", &s, NULL) && s.len &&
		  s.len < sizeof(g->name);
	for (uint64_t i = 0; ok && i < s.len; i++)
		ok = (uint8_t)s.ptr[i] > 0x20 && (uint8_t)s.ptr[i] < 0x7f;
	if (ok) {
		memcpy(g->name, s.ptr, s.len);
		g->name[s.len] = 0;
		return 0;
	}
	/* The file's stem: "qwen2.5-0.5b-instruct-q4_k_m" of ".../qwen2.5-0.5b-instruct-q4_k_m.gguf". */
	const char *b = strrchr(g->path, '/');
	b = b ? b + 1 : g->path;
	size_t n = strlen(b);
	if (n > 5 && !strcmp(b + n - 5, ".gguf"))
		n -= 5;
	if (!n || n >= sizeof(g->name))
		return sf_err_set(err, SF_E_RANGE, "%s: no name for the model (use --model-name)",
				  g->path);
	memcpy(g->name, b, n);
	g->name[n] = 0;
	return 0;
}

static char *dup_str(struct sf_gguf_str s)
{
	char *p = malloc(s.len + 1);
	if (p) {
		memcpy(p, s.ptr, s.len);
		p[s.len] = 0;
	}
	return p;
}

/* tokenizer.chat_template (the default, first) and tokenizer.chat_template.<name>. */
static int load_templates(struct ge *g, struct sf_err *err)
{
	static const char prefix[] = "tokenizer.chat_template";
	for (int pass = 0; pass < 2; pass++)
		for (uint64_t i = 0; i < sf_gguf_n_kv(g->file); i++) {
			const struct sf_gguf_kv *kv = sf_gguf_kv_at(g->file, i);
			struct sf_gguf_str k = kv->key;
			size_t pl = sizeof(prefix) - 1;
			if (k.len < pl || memcmp(k.ptr, prefix, pl) || kv->type != SF_GGUF_STRING)
				continue;
			bool dflt = k.len == pl;
			if (dflt != (pass == 0) || (!dflt && (k.len == pl + 1 || k.ptr[pl] != '.')))
				continue;
			struct sf_gguf_str text = { (const char *)kv->data + 8, kv->size - 8 };
			if (text.len > SF_MAX_TEXT || memchr(text.ptr, 0, text.len))
				return sf_err_set(err, SF_E_MODEL, "chat template %.*s is over %u bytes "
						  "or holds a NUL", (int)(k.len > 80 ? 80 : k.len), k.ptr,
						  SF_MAX_TEXT);
			if (g->n_templates == GE_MAX_TEMPLATES)
				return sf_err_set(err, SF_E_MODEL, "more than %d chat templates",
						  GE_MAX_TEMPLATES);
			struct sf_gguf_str name = dflt ? (struct sf_gguf_str){ "default", 7 }
						       : (struct sf_gguf_str){ k.ptr + pl + 1, k.len - pl - 1 };
			if (name.len >= SF_MAX_NAME)
				continue;
			struct sf_engine_template *t = &g->templates[g->n_templates];
			t->name = dup_str(name);
			t->text = dup_str(text);
			if (!t->name || !t->text) {
				free((char *)t->name);
				free((char *)t->text);
				return sf_err_set(err, SF_E_NOMEM, "no memory for chat templates");
			}
			g->n_templates++;
		}
	return 0;
}

/* The specials exported to heads, which leave them out of a reply's text: CONTROL and UNKNOWN
 * tokens, as llama.cpp leaves them out. USER_DEFINED ones ("<think>", "<tool_call>", qwen2's
 * "[PAD151712]") are text: their bytes are shown. */
static int load_specials(struct ge *g, struct sf_err *err)
{
	const struct sf_tok_special *list;
	size_t n;
	sf_tok_specials(g->tok, &list, &n);
	g->specials = calloc(n ? n : 1, sizeof(*g->specials));
	if (!g->specials)
		return sf_err_set(err, SF_E_NOMEM, "no memory for %zu special tokens", n);
	for (size_t i = 0; i < n && g->n_specials < SF_MAX_SPECIALS; i++)
		if ((list[i].attr & (SF_TOK_ATTR_CONTROL | SF_TOK_ATTR_UNKNOWN)) && list[i].len &&
		    list[i].len <= SF_MAX_TOKEN_BYTES && strlen(list[i].text) == list[i].len)
			g->specials[g->n_specials++] = (struct sf_engine_special){ list[i].text,
										   list[i].id };
	return 0;
}

/* What a token is to a grammar: the end-of-generation tokens end it, control and unknown
 * tokens are allowed only where the grammar names them (<[id]>: Mistral's [TOOL_CALLS]), the
 * others are their decoded bytes (user-defined tokens such as "<tool_call>" or "</think>" are
 * text). */
static int ge_gtok(void *arg, uint32_t t, const uint8_t **bytes, size_t *len)
{
	struct ge *g = arg;
	*bytes = sf_tok_token_bytes(g->tok, t, len);
	if (t == g->eos || sf_tok_is_eog(g->tok, t))
		return SF_GTOK_END;
	uint32_t a = sf_tok_token_attr(g->tok, t);
	if (!*bytes || (a & (SF_TOK_ATTR_CONTROL | SF_TOK_ATTR_UNKNOWN | SF_TOK_ATTR_UNUSED)))
		return SF_GTOK_NEVER;
	return SF_GTOK_TEXT;
}

static void ge_destroy(void *impl)
{
	struct ge *g = impl;
	if (!g)
		return;
	for (size_t i = 0; i < g->n_templates; i++) {
		free((char *)g->templates[i].name);
		free((char *)g->templates[i].text);
	}
	free(g->specials);
	free(g->tok_file);
	free(g->toks);
	free(g->want);
	free(g->bias);
	free(g->logits);
	sf_grammar_host_free(g->grammar);
	sf_sampler_free(g->sampler);
	sf_fwd_free(g->fwd);
	sf_pool_free(g->pool);
	sf_kv_arena_free(g->arena);
	sf_tok_free(g->tok);
	sf_model_free(g->model);
	ge_pack_free(g);
	sf_gguf_close(g->file);
	free(g->path);
	free(g);
}

static void ge_info(void *impl, struct sf_engine_info *info)
{
	struct ge *g = impl;
	const struct sf_model_config *c = &g->model->cfg;
	memset(info, 0, sizeof(*info));
	snprintf(info->model, sizeof(info->model), "%s", g->name);
	info->vocab_size = sf_tok_n_vocab(g->tok);
	info->n_layers = c->n_layer;
	info->hidden = c->n_embd;
	info->stage_bytes = (uint32_t)ge_stage_bytes(g, g->cfg.ctx_len);
	info->ctx_len = g->cfg.ctx_len;
	info->batch_size = g->cfg.batch;
	info->ctx_bytes_per_token = sf_model_kv_bytes_per_token(g->model);
	info->ctx_mem_total = sf_kv_arena_limit(g->arena);
	uint32_t bos = sf_tok_bos(g->tok);
	info->has_bos = sf_tok_add_bos(g->tok) && bos != SF_TOK_NONE;
	info->bos = info->has_bos ? bos : 0;
	info->eos = g->eos;
	info->tokenizer_full = g->tok_full;
	info->encodes_plain = true;
	info->encodes_pieces = true;
}

static int ge_encode(void *impl, const char *text, size_t len, bool specials, uint32_t *out,
		     size_t cap, size_t *n_out, struct sf_err *err)
{
	struct ge *g = impl;
	return sf_tok_encode(g->tok, text, len, specials, false, out, cap, n_out, err);
}

static int ge_encode_pieces(void *impl, const struct sf_piece *pieces, size_t n, uint32_t *out,
			    size_t cap, size_t *n_out, struct sf_err *err)
{
	struct ge *g = impl;
	return sf_tok_encode_pieces(g->tok, pieces, n, out, cap, n_out, err);
}

static int ge_token_bytes(void *impl, uint32_t token, uint8_t *out, size_t cap, size_t *len,
			  struct sf_err *err)
{
	struct ge *g = impl;
	size_t n;
	const uint8_t *b = sf_tok_token_bytes(g->tok, token, &n);
	*len = b ? n : 0;
	if (!b)
		return sf_err_set(err, SF_E_RANGE, "token %u past the vocabulary", token);
	if (n > cap)
		return sf_err_set(err, SF_E_LIMIT, "token %u is %zu bytes, over %zu", token, n, cap);
	memcpy(out, b, n);
	return 0;
}

/* What a tokenizer is loaded from: tokenizer.* (the chat templates apart: the export carries
 * them) and the general names it reads. */
static bool tokenizer_key(const char *key, size_t len, void *arg)
{
	(void)arg;
	static const char tk[] = "tokenizer.", ct[] = "tokenizer.chat_template";
	if (len >= sizeof(ct) - 1 && !memcmp(key, ct, sizeof(ct) - 1))
		return false;
	return (len >= sizeof(tk) - 1 && !memcmp(key, tk, sizeof(tk) - 1)) ||
	       (len == 20 && !memcmp(key, "general.architecture", 20)) ||
	       (len == 12 && !memcmp(key, "general.name", 12));
}

static int ge_tokenizer_file(void *impl, const uint8_t **data, size_t *len, struct sf_err *err)
{
	struct ge *g = impl;
	if (!g->tok_file) {
		struct sf_gguf_writer *w = sf_gguf_writer_new();
		int rc = !w ? sf_err_set(err, SF_E_NOMEM, "no memory for the tokenizer's file")
			    : sf_gguf_copy_kv(w, g->file, tokenizer_key, NULL)
			    ? sf_err_set(err, SF_E_NOMEM, "no memory for the tokenizer's pairs")
			    : sf_gguf_writer_bytes(w, &g->tok_file, &g->tok_file_len, err);
		sf_gguf_writer_free(w);
		if (rc)
			return rc;
	}
	*data = g->tok_file;
	*len = g->tok_file_len;
	return 0;
}

static void ge_specials(void *impl, const struct sf_engine_special **list, size_t *n)
{
	struct ge *g = impl;
	*list = g->specials;
	*n = g->n_specials;
}

static void ge_templates(void *impl, const struct sf_engine_template **list, size_t *n)
{
	struct ge *g = impl;
	*list = g->templates;
	*n = g->n_templates;
}

static const struct sf_engine_ops ge_ops = {
	.kind = "gguf",
	.destroy = ge_destroy,
	.info = ge_info,
	.encode = ge_encode,
	.encode_pieces = ge_encode_pieces,
	.token_bytes = ge_token_bytes,
	.specials = ge_specials,
	.templates = ge_templates,
	.ctx_new = ge_ctx_new,
	.ctx_free = ge_ctx_free,
	.prefill = ge_prefill,
	.ctx_len = ge_ctx_len,
	.ctx_truncate = ge_ctx_truncate,
	.mem_used = ge_mem_used,
	.ctx_share = ge_ctx_share,
	.ctx_reused = ge_ctx_reused,
	.prefix_cache = ge_prefix_cache,
	.decode = ge_decode,
	.stage_forward = ge_stage_forward,
	.state_op_names = ge_state_op_names,
	.state_op_step = ge_state_op_step,
	.tokenizer_file = ge_tokenizer_file,
};

/* The defaults, and the limits the node's wire and memory put on them. */
static int settle_config(struct ge *g, struct sf_err *err)
{
	struct sf_gguf_engine_config *c = &g->cfg;
	const struct sf_model_config *mc = &g->model->cfg;
	if (!c->threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		c->threads = n > 0 ? (unsigned)n : 1;
	}
	if (c->threads > 256)
		return sf_err_set(err, SF_E_RANGE, "--threads %u is over 256", c->threads);
	int rc = sf_model_cache_keys(g->model, c->cache_type_k, err);
	if (rc) {
		sf_err_prefix(err, "--cache-type-k");
		return rc;
	}
	if (!c->ctx_len)
		c->ctx_len = mc->n_ctx_train < 8192 ? mc->n_ctx_train : 8192;
	if (c->ctx_len > (1u << 20))
		return sf_err_set(err, SF_E_RANGE, "--ctx-len %u is over %u", c->ctx_len, 1u << 20);
	if (!c->batch)
		c->batch = 16;
	if (c->batch > 1024)
		return sf_err_set(err, SF_E_RANGE, "--batch %u is over 1024", c->batch);
	if (!c->chunk)
		c->chunk = 256;
	if (c->chunk > 8192)
		return sf_err_set(err, SF_E_RANGE, "prefill chunk %u is over 8192", c->chunk);
	if (!c->kv_mem) /* a full batch of full contexts (and their recurrent states) */
		c->kv_mem = (uint64_t)c->batch * (sf_model_kv_bytes(g->model, c->ctx_len) +
						 sf_model_state_bytes(g->model));
	return 0;
}

/* The file's checks (the model, the tokenizer, their agreement, the name, templates and
 * specials), with g->cfg set: 0, or the code with err naming the file. */
static int ge_open_checked(struct ge *g, struct sf_err *err)
{
	const struct sf_gguf_engine_config *cfg = &g->cfg;
	g->path = strdup(cfg->path ? cfg->path : "");
	int rc = g->path ? 0 : sf_err_set(err, SF_E_NOMEM, "no memory");
	if (!rc)
		rc = sf_gguf_open(g->path, &g->file, err);
	if (!rc && (rc = sf_model_load(g->file, &g->model, err)))
		sf_err_prefix(err, "%s", g->path);
	if (!rc && (rc = sf_tok_load(g->file, &g->tok, err)))
		sf_err_prefix(err, "%s: tokenizer", g->path);
	if (!rc && sf_tok_n_vocab(g->tok) > g->model->cfg.n_vocab)
		rc = sf_err_set(err, SF_E_MODEL, "%s: the tokenizer has %u tokens, the embeddings "
				"%u rows", g->path, sf_tok_n_vocab(g->tok), g->model->cfg.n_vocab);
	if (!rc)
		rc = copy_name(g, err);
	if (!rc)
		rc = settle_config(g, err);
	if (!rc)
		rc = load_templates(g, err);
	if (!rc)
		rc = load_specials(g, err);
	return rc;
}

int sf_gguf_engine_check(const char *path, const char *name, struct sf_err *err)
{
	struct ge *g = calloc(1, sizeof(*g));
	if (!g)
		return sf_err_set(err, SF_E_NOMEM, "no memory for an engine");
	g->cfg = (struct sf_gguf_engine_config){ .path = path, .name = name };
	int rc = ge_open_checked(g, err);
	ge_destroy(g);
	return rc;
}

int sf_gguf_engine_new(const struct sf_gguf_engine_config *cfg, struct sf_engine **out,
		       struct sf_err *err)
{
	*out = NULL;
	double t0 = now_s();
	struct ge *g = calloc(1, sizeof(*g));
	if (!g)
		return sf_err_set(err, SF_E_NOMEM, "no memory for an engine");
	g->cfg = *cfg;
	int rc = ge_open_checked(g, err);
	if (rc) {
		ge_destroy(g);
		return rc;
	}
	/* The tokenizer's own file, made now (tens of ms for a large vocabulary) rather than
	 * when the first head asks, which would hold the node's loop; no memory: made then. */
	const uint8_t *tf;
	size_t tf_len;
	struct sf_err tf_err;
	(void)ge_tokenizer_file(g, &tf, &tf_len, &tf_err);
	/* The full digest its links state (protocol 7): what a head's load of that file gives. */
	if (sodium_init() < 0)
		rc = sf_err_set(err, SF_E_CRYPTO, "libsodium failed to initialise");
	else
		rc = sf_tok_digest_full(g->tok, &g->tok_full, err);
	if (rc) {
		ge_destroy(g);
		return rc;
	}
	g->eos = sf_tok_eos(g->tok) != SF_TOK_NONE ? sf_tok_eos(g->tok) : sf_tok_eot(g->tok);
	if (g->eos == SF_TOK_NONE || g->eos >= sf_tok_n_vocab(g->tok))
		g->eos = 0; /* no end token: generations end by length or stop */
	else
		g->eog[g->n_eog++] = g->eos;
	/* How embeddings pool (llama.cpp's <arch>.pooling_type; none or 0: mean). */
	char key[64];
	uint32_t pool = 0;
	struct sf_err perr;
	snprintf(key, sizeof(key), "%s.pooling_type", g->model->cfg.arch_name);
	if (sf_gguf_get_u32(g->file, key, &pool, &perr) || pool < GE_POOL_MEAN || pool > GE_POOL_LAST)
		pool = GE_POOL_MEAN;
	g->pooling = (uint8_t)pool;
	for (uint32_t t = 0; t < sf_tok_n_vocab(g->tok) && g->n_eog < GE_MAX_EOG; t++)
		if (t != g->eos && sf_tok_is_eog(g->tok, t))
			g->eog[g->n_eog++] = t;
	const struct sf_gguf_engine_config *c = &g->cfg;
	uint32_t max_tokens = c->chunk > c->batch ? c->chunk : c->batch;
	if (sf_kv_arena_new(g->model, c->kv_mem, &g->arena) ||
	    !(g->pool = sf_pool_new(c->threads)) ||
	    sf_fwd_new(g->model, max_tokens, c->ctx_len, c->threads, &g->fwd, err) ||
	    sf_sampler_new(sf_tok_n_vocab(g->tok), &g->sampler, err) ||
	    sf_grammar_host_new(sf_tok_n_vocab(g->tok), ge_gtok, g, GE_GRAMMARS, &g->grammar, err) ||
	    !(g->logits = malloc((size_t)c->batch * g->model->cfg.n_vocab * sizeof(float))) ||
	    !(g->toks = calloc(max_tokens, sizeof(*g->toks))) ||
	    !(g->want = calloc(c->batch, sizeof(*g->want))) ||
	    !(g->bias = malloc((SF_MAX_LOGIT_BIAS + GE_MAX_EOG) * sizeof(*g->bias)))) {
		ge_destroy(g);
		return sf_err_set(err, SF_E_NOMEM, "%s: no memory for the engine's buffers", cfg->path);
	}
	/* SF_KV_WINDOW_SLACK in the environment: pages of window rows a context keeps past its
	 * window, or "all" (every row kept: to measure the difference) */
	const char *slack = getenv("SF_KV_WINDOW_SLACK");
	if (slack && *slack)
		sf_kv_arena_window_slack(g->arena, !strcmp(slack, "all") ? UINT32_MAX
							     : (uint32_t)strtoul(slack, NULL, 10));
	double tp = now_s();
	if ((rc = ge_pack_weights(g, err))) {
		ge_destroy(g);
		return rc;
	}
	if (g->n_packed)
		say(g, "%s: %zu matrices packed for the kernels (%.1f MiB) in %.2f s", cfg->path,
		    g->n_packed, mib(g->pack_len), now_s() - tp);
	if (g->model->rope_long) { /* which LongRoPE factors every session's keys are rotated by */
		bool lng = sf_model_rope_factors(g->model, c->ctx_len) == g->model->rope_long;
		say(g, "%s: LongRoPE's %s factors: the context of %u is %s the original %u", cfg->path,
		    lng ? "long" : "short", c->ctx_len, lng ? "past" : "within",
		    g->model->cfg.yarn_orig_ctx);
	}
	touch(g);
	rc = sf_engine_create(&ge_ops, g, out, err);
	if (!rc && g->model->cfg.n_recur)
		say(g, "%s: %u of %u layers are recurrent (%s): each context carries a state of "
		    "%.1f MiB beside %llu bytes a token of keys and values (--kv-mem counts both); "
		    "prefix reuse starts from state checkpoints (at a prompt's last page end, "
		    "where it parts from another's and a reply's last page end, %.1f MiB each, "
		    "counted too), cutting a context back goes to the last checkpoint before it, a "
		    "pipeline stage keeps its own layers' states",
		    cfg->path, g->model->cfg.n_recur, g->model->cfg.n_layer,
		    g->model->cfg.arch_name, mib(sf_model_state_bytes(g->model)),
		    (unsigned long long)sf_model_kv_bytes_per_token(g->model),
		    mib(sf_model_state_bytes(g->model)));
	if (!rc && sf_model_kv_window_bytes_per_token(g->model))
		say(g, "%s: layers with a sliding window of %u keep only it: a context of %u "
		    "positions holds %.1f MiB of keys and values (%llu bytes a token of the other "
		    "layers, %llu of these within the window; %.1f MiB if every row were kept; "
		    "--kv-mem's default counts a batch of the first), cutting a context back behind its window goes to the last "
		    "page end whose window rows it or the prefix cache still has, a pipeline stage "
		    "keeps its own layers' rows",
		    cfg->path, g->model->cfg.n_swa, c->ctx_len,
		    mib(sf_model_kv_bytes(g->model, c->ctx_len)),
		    (unsigned long long)sf_model_kv_bytes_per_token(g->model),
		    (unsigned long long)sf_model_kv_window_bytes_per_token(g->model),
		    mib((uint64_t)c->ctx_len * (sf_model_kv_bytes_per_token(g->model) +
						sf_model_kv_window_bytes_per_token(g->model))));
	if (!rc)
		say(g, "%s: %s ready in %.1f s (%s, %u layers, %u threads, %s kernels, keys cached as "
		    "%s)", cfg->path, g->name, now_s() - t0, g->model->cfg.arch_name,
		    g->model->cfg.n_layer, c->threads, sf_kern_isa_name(sf_kern_isa()),
		    g->model->k_q8 ? "Q8_0" : "F16");
	return rc;
}

uint64_t sf_gguf_engine_weight_bytes(struct sf_engine *e)
{
	struct ge *g = sf_engine_impl(e);
	return g->model->weight_bytes;
}
