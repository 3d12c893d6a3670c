/* The sampler every engine uses to turn a row of logits into the next token.
 *
 * Contract: a sample is a pure function of (logits, params, history, seed, position). The
 * sampler object is only scratch memory sized for a vocabulary: nothing carries over from one
 * call to the next, so the same inputs give the same token (and the same logprobs) whatever
 * was sampled before, in this process or another one running the same build. The random number
 * is drawn from (seed, position) by a counter-based generator (sf_sampler_random), not a
 * stream: a generation that the head continues on another node after a failure draws exactly
 * what the lost run would have drawn. Nothing depends on thread counts or on an unstable sort:
 * candidates are ordered by logit descending, then token id ascending (a total order), and the
 * floating-point work (our own exp and log, unfused multiplies and adds, sums in a fixed order:
 * float lanes over blocks of 128 candidates, then double) gives the same bits on every x86-64
 * CPU, whichever vector variant (baseline or AVX2) runs. Each call is O(n_vocab +
 * repeat_last_n + n_generated + n_logit_bias); no row is ever sorted whole.
 *
 * Order of operations, each on what the previous one left:
 *   1. logits: NaN -> -inf (never sampled), +inf -> FLT_MAX (the largest finite logit),
 *      -0 -> +0;
 *   2. penalties, per token t (each applied once per token, not per occurrence):
 *        repetition (llama.cpp / Hugging Face): when t is among the last repeat_last_n context
 *          tokens, a positive logit is divided by repetition_penalty, any other multiplied;
 *        then presence and frequency (OpenAI): with c = the times t occurs among the tokens
 *          this generation produced, logit -= c * frequency_penalty + (c > 0) * presence_penalty;
 *   3. logit_bias: each (token, bias) pair adds bias; a bias of exactly -100 bans the token
 *      (logit -inf); then, under a grammar (allow), every token outside its mask is banned
 *      too (superfluid/grammar.h computes the mask from the tokens generated so far);
 *   --- logprobs are read here: log-softmax over the whole vocabulary of these logits ---
 *   4. top_k: keep the k first candidates in the order above;
 *   5. top_p: of those, keep the shortest prefix whose probability (softmax of the step-3 logits
 *      over the top_k set, at temperature 1) reaches top_p; never less than one token;
 *   6. min_p: of those, keep the tokens whose probability is at least min_p times the top one's
 *      (exp(logit - max) >= min_p);
 *   7. temperature: 0 picks the first candidate (the argmax, ties to the lowest id); otherwise
 *      the draw is from softmax(logit / temperature) over what is left, walked in id order
 *      against u * total with u = sf_sampler_random(seed, position).
 * Tokens with logit -inf after step 3 are never candidates; when no token is left with a finite
 * logit the call fails (SF_E_RANGE, "logits").
 *
 * llama.cpp's default chain (common_sampler) is logit_bias -> penalties -> DRY -> top_n_sigma
 * -> top_k -> typical_p -> top_p -> min_p -> XTC -> temperature -> dist. With DRY, top_n_sigma,
 * typical_p and XTC off and min_keep 0, steps 4-7 keep the same candidate sets as its top_k,
 * top_p, min_p and temperature (up to its float rounding and its unspecified order among
 * equal logits). Where we differ on purpose: our logit_bias comes after the penalties (a bias
 * is the caller's last word: +100 is not divided by a repetition penalty), and presence and
 * frequency count this generation's tokens (OpenAI) while llama.cpp counts the same
 * last-n window as its repetition penalty.
 *
 * A sampler is used by one thread at a time; params and inputs are only read. */
#ifndef SUPERFLUID_SAMPLER_H
#define SUPERFLUID_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/engine.h>
#include <superfluid/err.h>
#include <superfluid/wire.h>

#define SF_SAMPLER_MAX_BIAS (SF_MAX_LOGIT_BIAS + 64) /* logit_bias pairs: a session's (OpenAI
							* takes up to 300) and an engine's bans of
							* its end-of-generation tokens */
#define SF_SAMPLER_MAX_PENALTY 100.0f  /* |presence_penalty|, |frequency_penalty| */
#define SF_SAMPLER_MAX_REPETITION 100.0f
#define SF_SAMPLER_BAN (-100.0f)       /* the logit_bias that bans a token */

/* One logit_bias pair (struct sf_logit_bias, the wire's part: superfluid/wire_msgs.h): bias in
 * [-100, 100] added to token's logit; -100 bans it. */

/* How to sample. sf_sampler_params_default gives the neutral values (1 = off for top_p and
 * repetition_penalty, 0 = off for the rest). */
struct sf_sampler_params {
	float temperature;       /* finite, >= 0; 0: greedy */
	uint32_t top_k;          /* 0: off; at most SF_MAX_VOCAB, clamped to the vocabulary */
	float top_p;             /* [0, 1]; 1: off; 0 keeps only the first candidate */
	float min_p;             /* [0, 1]; 0: off */
	uint64_t seed;
	float presence_penalty;  /* [-100, 100]; over this generation's tokens */
	float frequency_penalty; /* [-100, 100]; over this generation's tokens */
	float repetition_penalty; /* (0, 100]; 1: off; over the last repeat_last_n context tokens */
	uint32_t repeat_last_n;  /* 0: off */
	const struct sf_logit_bias *logit_bias; /* n_logit_bias pairs; a token may appear twice */
	size_t n_logit_bias;     /* at most SF_SAMPLER_MAX_BIAS */
	const uint64_t *allow;   /* NULL, or n_vocab bits (64-bit words, bit t of word t / 64):
				  * only these tokens may be drawn (a grammar's mask) */
};

/* What to sample from. */
struct sf_sampler_input {
	const float *logits; /* n_vocab of them */
	uint32_t n_vocab;    /* 1 .. the sampler's capacity */
	/* The context before the token being drawn (prompt, then this generation's tokens), or
	 * its tail holding at least the last max(repeat_last_n, n_generated) tokens. */
	const uint32_t *context;
	size_t n_context;
	size_t n_generated;  /* how many of context's last tokens this generation produced */
	uint64_t position;   /* the token's index in the session's context (its tokens before it) */
};

/* What a sample gave. */
struct sf_sampler_result {
	uint32_t token;
	uint32_t n_candidates; /* tokens the draw chose from (after steps 4-6; 1 when greedy) */
};

struct sf_sampler; /* scratch for vocabularies up to a capacity; holds no state between calls */

/* Sets p to the neutral parameters: temperature 1, nothing cut, no penalty, no bias, seed 0. */
void sf_sampler_params_default(struct sf_sampler_params *p);

/* Sets p from a wire sf_sampling, every field; p->logit_bias points into s. The wire reads 0 as
 * "off": top_p 0 becomes 1 here (the head sends 1e-9 for OpenAI's 0), and so does
 * repetition_penalty 0. */
void sf_sampler_params_from_wire(struct sf_sampler_params *p, const struct sf_sampling *s);

/* Whether the draw after n_gen tokens of a generation may not end it (s's ignore_eos, or fewer
 * than its min_tokens drawn): the engine then bans its end-of-generation tokens. */
bool sf_sampling_bans_eog(const struct sf_sampling *s, size_t n_gen);

/* Checks p for a vocabulary of n_vocab tokens: SF_E_RANGE naming the first bad field. */
int sf_sampler_check(const struct sf_sampler_params *p, uint32_t n_vocab, struct sf_err *err);

/* A sampler for vocabularies of up to capacity (<= SF_MAX_VOCAB) tokens: about 20 bytes per
 * token of scratch. */
int sf_sampler_new(uint32_t capacity, struct sf_sampler **out, struct sf_err *err);

/* Frees a sampler. NULL is a no-op. */
void sf_sampler_free(struct sf_sampler *s);

/* Draws the next token from in under p (order of operations above). When lp is not NULL it is
 * filled with the token's logprob and the n_top (<= SF_MAX_TOP_LOGPROBS) most likely tokens,
 * most likely first: log-softmax of the logits after penalties and logit_bias, before
 * truncation and temperature (OpenAI's definition); banned tokens are never listed. Returns 0,
 * or SF_E_RANGE naming a bad parameter or input (nothing drawn). */
int sf_sampler_sample(struct sf_sampler *s, const struct sf_sampler_params *p,
		      const struct sf_sampler_input *in, struct sf_sampler_result *res,
		      struct sf_engine_logprob *lp, uint32_t n_top, struct sf_err *err);

/* The tokens sf_sampler_sample would draw from (steps 1-6; the argmax alone when greedy), in
 * candidate order, into out (capacity cap); *n gets their count, and SF_E_LIMIT says cap was
 * too small. For tests and diagnostics: it sorts, so it is not fast. */
int sf_sampler_candidates(struct sf_sampler *s, const struct sf_sampler_params *p,
			  const struct sf_sampler_input *in, uint32_t *out, size_t cap, size_t *n,
			  struct sf_err *err);

/* The generator: 64 random bits from (seed, position), a keyed SplitMix64-style mix. For one
 * seed, distinct positions never give the same bits. */
uint64_t sf_sampler_random(uint64_t seed, uint64_t position);

/* The draw's uniform number in [0, 1): the top 53 bits of sf_sampler_random. */
double sf_sampler_uniform(uint64_t seed, uint64_t position);

#endif
