/* Grammars that constrain sampling: GBNF text compiled to a pushdown automaton over bytes, and
 * matched against a vocabulary's token bytes so that each draw can only take a token that
 * continues a valid output.
 *
 * The text is llama.cpp's GBNF: rules `name ::= alternatives`, one per line (a line may go on
 * after `|`, or inside parentheses), `#` comments; elements are "literals" (escapes \n \r \t
 * \\ \" \' \[ \] \xHH \uHHHH \UHHHHHHHH), [character classes] with ranges and ^, `.` (any
 * character), rule names, (groups), and the postfix operators * + ? {m} {m,} {m,n}. The root
 * rule is `root`. Characters are Unicode code points, matched as their UTF-8 bytes (so output is
 * valid UTF-8), and <[id]>: the token id itself (llama.cpp's token reference; a control token,
 * such as Mistral's [TOOL_CALLS], that no text element can write, or any other token, which is
 * then taken by its id as well as by its text; an end-of-generation token never: the end is
 * where the root may end). Refused, by name: undefined rules, left recursion, rules that can
 * never finish, token references by name (<name>) or negated (!<[id]>), and anything past the
 * limits below.
 *
 * The automaton: each rule is a nondeterministic automaton over bytes whose edges may call
 * another rule (push the place to return to). A matcher's state is a set of stacks (each the
 * place in the innermost rule, then the places to return to), with a flag saying whether the
 * whole root may end here. The state after a generation's tokens is a function of those tokens
 * alone (sf_gmatch_sync): a generation continued elsewhere (a node restarted, a head that
 * crashed) masks the same tokens.
 *
 * Masks: a token is allowed when all its bytes can be taken from the state, or a token edge of
 * the state names it; an end-of-generation token only where the root may end; other control
 * tokens only where named. Each stack's top place is looked up
 * in the grammar's cache (built per place on first use, against one vocabulary's token trie):
 * the tokens taken without leaving that place's rule, and the trie nodes where that rule ends
 * (from which the rest of such a token is matched against the stack below). A mask then costs
 * a few bitset ORs and short walks, not a pass over the vocabulary.
 *
 * Threads: a grammar (with its cache), a vocabulary's trie and a matcher are each used by one
 * thread at a time; a grammar's references (sf_grammar_ref / sf_grammar_unref) may be dropped on
 * any thread. */
#ifndef SUPERFLUID_GRAMMAR_H
#define SUPERFLUID_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>
#include <superfluid/wire.h>

#define SF_GRAMMAR_MAX_TEXT SF_MAX_GRAMMAR /* bytes of grammar text (the wire's limit) */
#define SF_GRAMMAR_MAX_RULES 8192         /* rules, counted after groups became their own */
#define SF_GRAMMAR_MAX_STATES (1u << 20)  /* automaton states of all rules together */
#define SF_GRAMMAR_MAX_REPEAT 10000       /* m and n of {m,n} */
#define SF_GRAMMAR_MAX_NEST 256           /* parentheses inside parentheses */
#define SF_GRAMMAR_MAX_DEPTH 2048         /* places on one stack (nesting in the output) */
#define SF_GRAMMAR_MAX_STACKS 4096        /* stacks in one state (ambiguity) */
#define SF_GRAMMAR_CACHE_BYTES (256u << 20) /* a grammar's mask cache, past which it is cleared */

struct sf_grammar;       /* compiled; refcounted; holds its mask cache */
struct sf_grammar_vocab; /* a vocabulary's token bytes as a trie */
struct sf_gmatch;        /* one generation's place in a grammar */

/* What a token is to a grammar. */
enum sf_gtok {
	SF_GTOK_TEXT = 0, /* its bytes are output text */
	SF_GTOK_END = 1,  /* it ends the generation: allowed only where the root may end */
	SF_GTOK_NEVER = 2 /* control tokens, unused, empty: allowed only where named (<[id]>) */
};

/* Compiles GBNF text (len bytes, at most SF_GRAMMAR_MAX_TEXT) into *out, with one reference.
 * SF_E_RANGE with the line and what is wrong (syntax, an undefined rule, left recursion, a rule
 * that never finishes), SF_E_LIMIT past a limit above, SF_E_NOMEM. */
int sf_grammar_compile(const char *text, size_t len, struct sf_grammar **out, struct sf_err *err)
	__attribute__((warn_unused_result));

/* Takes one more reference to g and returns it. */
struct sf_grammar *sf_grammar_ref(struct sf_grammar *g);

/* Drops a reference; the last one frees g. NULL is a no-op. */
void sf_grammar_unref(struct sf_grammar *g);

/* A 64-bit digest of the text g was compiled from. */
uint64_t sf_grammar_digest(const struct sf_grammar *g);

/* A 64-bit digest of text[0..len), as sf_grammar_digest gives the grammar compiled from it
 * (but never 0: 0 is 1), without compiling it. */
uint64_t sf_grammar_text_digest(const char *text, size_t len);

/* Whether g names tokens by id (<[id]>): only an engine that takes them may be given it (a
 * node of protocol 7). */
bool sf_grammar_names_tokens(const struct sf_grammar *g);

/* Whether GBNF text[0..len) names a token by id (<[id]>, or the refused !<[id]>) outside its
 * literals, classes and comments, without compiling it: as sf_grammar_names_tokens of the
 * grammar it compiles to. A pass over the text only where it holds "<[" at all. */
bool sf_grammar_text_names_tokens(const char *text, size_t len);

/* Automaton states and rules of g (sizes, for tests and logs). */
void sf_grammar_size(const struct sf_grammar *g, uint32_t *n_states, uint32_t *n_rules);

/* Bytes g's mask cache holds now. */
size_t sf_grammar_cache_bytes(const struct sf_grammar *g);

/* Fills *bytes and *len with token tok's bytes and returns its enum sf_gtok (the bytes are read
 * only during sf_grammar_vocab_new). */
typedef int (*sf_gtok_fn)(void *arg, uint32_t tok, const uint8_t **bytes, size_t *len);

/* Builds the trie of a vocabulary of n_vocab tokens (at most SF_MAX_VOCAB) from what fn says of
 * each. SF_E_NOMEM, SF_E_RANGE for a token over SF_MAX_TOKEN_BYTES. */
int sf_grammar_vocab_new(uint32_t n_vocab, sf_gtok_fn fn, void *arg,
			 struct sf_grammar_vocab **out, struct sf_err *err)
	__attribute__((warn_unused_result));

/* Frees a vocabulary (no matcher or grammar cache may still use it). NULL is a no-op. */
void sf_grammar_vocab_free(struct sf_grammar_vocab *v);

/* The number of tokens of v, and its trie's nodes. */
uint32_t sf_grammar_vocab_size(const struct sf_grammar_vocab *v, uint32_t *n_nodes);

/* A matcher for g at its start (it takes a reference to g). SF_E_NOMEM. */
int sf_gmatch_new(struct sf_grammar *g, struct sf_gmatch **out, struct sf_err *err)
	__attribute__((warn_unused_result));

/* Frees a matcher (and drops its reference). NULL is a no-op. */
void sf_gmatch_free(struct sf_gmatch *m);

/* Back to the start: nothing taken. */
void sf_gmatch_reset(struct sf_gmatch *m);

/* Takes len bytes: 0, or SF_E_RANGE (the grammar does not allow them; m is unchanged) or
 * SF_E_LIMIT (past SF_GRAMMAR_MAX_DEPTH or SF_GRAMMAR_MAX_STACKS; m is unchanged). */
int sf_gmatch_bytes(struct sf_gmatch *m, const uint8_t *bytes, size_t len, struct sf_err *err);

/* Brings m to the state after toks[0..n) from the start, taking only the tokens past those it
 * has taken when they begin the same way (else it starts over). An SF_GTOK_END token must be
 * the last and allowed where it is; SF_GTOK_NEVER tokens only where a token edge names them. Errors as
 * sf_gmatch_bytes, naming the token; m is then at its start. */
int sf_gmatch_sync(struct sf_gmatch *m, const struct sf_grammar_vocab *v, const uint32_t *toks,
		   size_t n, struct sf_err *err);

/* Whether the root may end where m is (an end-of-generation token is allowed). */
bool sf_gmatch_can_end(const struct sf_gmatch *m);

/* Whether m has taken an end token, or can take nothing more than one. */
bool sf_gmatch_done(const struct sf_gmatch *m);

/* Sets bit t of mask (sf_grammar_vocab_size(v) bits, in 64-bit words) for each token t that m
 * allows next, clears the others. 0, or SF_E_LIMIT / SF_E_NOMEM (nothing allowed). */
int sf_gmatch_mask(struct sf_gmatch *m, const struct sf_grammar_vocab *v, uint64_t *mask,
		   struct sf_err *err);

/* Whether m allows token tok next (one token's check, without the cache). */
bool sf_gmatch_allows(struct sf_gmatch *m, const struct sf_grammar_vocab *v, uint32_t tok);

/* ---- grammars by text, shared by an engine's contexts ---- */

struct sf_grammar_cache;

/* A cache of up to cap compiled grammars (least recently used dropped first). */
int sf_grammar_cache_new(uint32_t cap, struct sf_grammar_cache **out, struct sf_err *err);

/* Frees the cache (dropping its references). NULL is a no-op. */
void sf_grammar_cache_free(struct sf_grammar_cache *c);

/* The grammar compiled from text, compiled now or found; *out holds a new reference. Errors as
 * sf_grammar_compile. */
int sf_grammar_cache_get(struct sf_grammar_cache *c, const char *text, size_t len,
			 struct sf_grammar **out, struct sf_err *err);

/* ---- an engine's side ---- */

/* What an engine needs for grammars: its vocabulary's trie (made on first use from fn, which
 * must stay valid), compiled grammars by text (a cache of cap), and one mask row. Used by the
 * engine's thread. */
struct sf_grammar_host;

int sf_grammar_host_new(uint32_t n_vocab, sf_gtok_fn fn, void *arg, uint32_t cap,
			struct sf_grammar_host **out, struct sf_err *err);

/* Frees a host (the matchers it made are the contexts' to free). NULL is a no-op. */
void sf_grammar_host_free(struct sf_grammar_host *h);

/* The mask for the next token of a generation under the grammar text[0..len) whose tokens so
 * far are gen[0..n_gen): *m is the context's matcher (made here, or made again for another
 * grammar). 0 with *mask (n_vocab bits, valid until the next call); SF_E_RANGE when the tokens
 * break the grammar (or the text does not compile), SF_E_LIMIT / SF_E_NOMEM past a bound. */
int sf_grammar_host_mask(struct sf_grammar_host *h, struct sf_gmatch **m, const char *text,
			 size_t len, const uint32_t *gen, size_t n_gen, const uint64_t **mask,
			 struct sf_err *err);

#endif
