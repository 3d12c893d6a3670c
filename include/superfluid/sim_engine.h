/* The simulated engine: deterministic, cheap, with configurable speed, so that any test can
 * compute the exact stream a client must receive and one machine can stand in for a fleet.
 *
 * Tokenizer. Byte level: token b (0..255) is byte b; then the specials
 *   <|bos|> 256  <|eos|> 257  <|im_start|> 258  <|im_end|> 259
 *   <|tool_call|> 260  <|/tool_call|> 261  <|think|> 262  <|/think|> 263
 * (vocab 264). A special's bytes are its text. Encoding never adds <|bos|>.
 *
 * Chat templates: "default" (ChatML, below) and "tool_use" (the same, tools in the system turn):
 *   <|im_start|>system\n{content}<|im_end|>\n
 *   <|im_start|>user\n{content}<|im_end|>\n
 *   <|im_start|>assistant\n            (the generation prompt)
 * An assistant turn ends with <|im_end|>; reasoning is <|think|>...<|/think|> and a tool call
 * <|tool_call|>{"name": ..., "arguments": {...}}<|/tool_call|> inside it. With chat_template
 * set, that text (any model's Jinja template, at most SF_MAX_TEXT bytes) is exported as both
 * instead, so a head reads replies in that template's format.
 *
 * Scripted replies (scripted set): when the prompt (the context before the generation's first
 * token) holds a line  sim-reply: "<JSON string>"  (at the start of the context or after a
 * newline or special token; the last one counts), the generation is exactly that string's
 * text, encoded with specials parsed, then <|eos|>: its token i is the i-th generated since
 * the last prefill. A string that is malformed or over 4096 bytes gives the reply
 * "sim-reply: not a JSON string of at most 4096 bytes". Decode steps and sf_sim_expected
 * follow it; pipeline stages (stateless) do not. Logprobs of a scripted token are 0 (top:
 * itself only).
 *
 * Model. A context is summed up by a running 64-bit hash of its tokens, its "run" (tokens
 * since the last special token, or since the start) and its last token, all kept as tokens
 * are appended, so a step is O(1). The hash (mixed with the config seed) gives a float
 * embedding of width `hidden`; layer i computes h = tanh(W_i h + b_i) in float in a fixed
 * order, W_i and b_i from the seed, tanh being x(27 + x^2)/(27 + 9x^2) clamped to +-1 at
 * |x| >= 3, and no fused multiply-adds: every build and machine gives the same bits. The
 * last layer's h gives pseudo-logits over 97 candidates
 * ('\n', the printable bytes 0x20..0x7e, <|eos|>): 0.75 * ln(English letter frequency)
 * + 2 * (P h)_t, P a projection from the seed, and -5 for a space or newline right after a
 * space or newline. The <|eos|> logit is -17 + 2.2 * log2(1 + run) + 2 * (P h)_eos, so a reply
 * (its run starts after the specials of "<|im_start|>assistant\n") ends more and more often
 * as it grows: with the defaults after about 100 tokens on average, most between 40 and 250,
 * at any temperature. No other token is ever produced.
 *
 * Sampling: the sampler every engine uses (superfluid/sampler.h) over a row of the whole
 * vocabulary holding the candidates' logits (every other token at -inf), every field of the
 * request's sampling taken (penalties, logit_bias, top_k, top_p, min_p, temperature; below
 * 1e-5 the argmax, ties to the lowest id); its random number comes from (seed, position), the
 * position being the context's length before the token: deterministic given the context and
 * seed. Logprobs are the log-softmax of the candidates' logits after penalties and bias.
 *
 * Pipeline stages exchange a hidden blob: u32 width, u32 layer (the next layer to run), u32
 * run, u32 last token (0xffffffff: none), u32 model check (from the seed and shapes), u32
 * position (the context's length: the last stage's draw), then width f32, all little-endian;
 * positions travel beside activations as in a real engine.
 *
 * State operations: "echo" (result = args), "transcribe" (input: the first blob, or args when
 * there is none; one segment per 16 input bytes, 1000 ms each (a last short one in
 * proportion), or for a WAV file (RIFF/WAVE with a fmt chunk before its data chunk) one per
 * second of its data chunk by the fmt chunk's byte rate; text of two to four lowercase words
 * made from the segment's bytes and the seed; result = the segments' texts joined by single
 * spaces; it runs in steps of about budget input bytes), "context_hash" (needs a session;
 * result = u32 length, u64 running hash, LE).
 *
 * Timing: a prefill of n tokens takes n * prefill_us_per_token us; a decode step, any batch
 * up to batch_size, takes 1000 / decode_steps_per_s ms (0: as fast as possible). */
#ifndef SUPERFLUID_SIM_ENGINE_H
#define SUPERFLUID_SIM_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/engine.h>

enum {
	SF_SIM_BOS = 256,
	SF_SIM_EOS = 257,
	SF_SIM_IM_START = 258,
	SF_SIM_IM_END = 259,
	SF_SIM_TOOL_CALL = 260,
	SF_SIM_TOOL_CALL_END = 261,
	SF_SIM_THINK = 262,
	SF_SIM_THINK_END = 263,
	SF_SIM_VOCAB = 264,
};

#define SF_SIM_MAX_LAYERS 128
#define SF_SIM_MAX_HIDDEN 256
#define SF_SIM_MAX_CTX SF_MAX_TOKENS
#define SF_SIM_MAX_BATCH 4096
#define SF_SIM_STAGE_HDR 24
#define SF_SIM_EMBED_DIM 64 /* the "embed" state operation's vectors */

/* A zero field takes its default (shown); sf_sim_config_default fills them in. */
struct sf_sim_config {
	uint64_t seed;
	const char *model;            /* "sim-1" */
	uint32_t n_layers;            /* 8 */
	uint32_t hidden;              /* 16 */
	uint32_t ctx_len;             /* 32768 */
	uint32_t batch_size;          /* 8 */
	double decode_steps_per_s;    /* 0: as fast as possible */
	double prefill_us_per_token;  /* 0: free */
	uint64_t ctx_bytes_per_token; /* 2 * n_layers * hidden * 4 (a K and a V row per layer) */
	uint64_t ctx_mem_total;       /* 0: unbounded */
	const char *chat_template;    /* NULL: ChatML; else exported as "default" and "tool_use" */
	bool scripted;                /* false: sim-reply lines are text like any other */
};

/* Sets every field to its default, seed 0. */
void sf_sim_config_default(struct sf_sim_config *cfg);

/* A simulated engine with cfg (SF_E_RANGE for shapes past the SF_SIM_MAX_* limits). */
int sf_sim_engine_new(const struct sf_sim_config *cfg, struct sf_engine **out,
		      struct sf_err *err);

/* The stream a client must receive for a generation after the context ctx (the whole
 * context: prompt and earlier turns, as the node holds it) with sampling s: into out
 * (capacity cap) the new tokens without the final <|eos|>, and finish_reason SF_FINISH_STOP
 * when <|eos|> came, SF_FINISH_LENGTH at max_new_tokens or when the context reached ctx_len.
 * Pure and reentrant. SF_E_LIMIT when the context is over ctx_len or the stream over cap. */
int sf_sim_expected(const struct sf_sim_config *cfg, const struct sf_sampling *s,
		    const uint32_t *ctx, size_t n_ctx, uint32_t max_new_tokens, uint32_t *out,
		    size_t cap, size_t *n_out, uint32_t *finish_reason, struct sf_err *err);

#endif
