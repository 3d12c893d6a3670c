/* The grammar engine's parts (include/superfluid/grammar.h has the contract): the automaton a
 * GBNF text compiles to (grammar_parse.c builds it, grammar_compile.c checks and flattens it),
 * stacks and their sets (grammar_stack.c), the token trie (grammar_vocab.c), the matcher
 * (grammar_match.c) and masks with their cache (grammar_mask.c). */
#ifndef SF_ENGINE_GRAMMAR_INTERNAL_H
#define SF_ENGINE_GRAMMAR_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/grammar.h>

#define GR_NONE UINT32_MAX       /* no state / no node */
#define GR_EMPTY UINT32_MAX      /* a stack's bottom: below it the root has ended */
#define GR_SENTINEL (UINT32_MAX - 1) /* a stack's bottom in the cache: "the rest of the stack" */
#define GR_MAX_WORK (1u << 20)   /* expansions in one step (ambiguity bound) */
#define GR_MAX_CLOSURE (1u << 23) /* closure items of all entry states together */

/* ---- building (grammar_parse.c) ---- */

enum { GR_E_BYTES = 0, GR_E_CALL = 1, GR_E_EPS = 2, GR_E_TOKEN = 3 };

/* An edge while building: bytes lo..hi, a call of rule (returning to `to`), epsilon, or the
 * token whose id is in rule (<[id]>). */
struct gr_bedge {
	uint32_t from, to, rule;
	uint8_t kind, lo, hi;
};

struct gr_rule {
	char *name;        /* malloc'd */
	uint32_t start, final;
	uint32_t line;     /* where it was defined (0: only referenced so far) */
	uint32_t ref_line; /* where it was first referenced */
	bool defined;
};

struct gr_build {
	uint32_t n_states;
	uint32_t *state_rule; /* by state: its rule */
	uint32_t cap_states;
	struct gr_bedge *edges;
	uint32_t n_edges, cap_edges;
	struct gr_rule *rules;
	uint32_t n_rules, cap_rules;
	uint32_t cur_rule; /* the rule being parsed: new states belong to it */
};

/* Parses GBNF text into b (rules as automata). SF_E_RANGE / SF_E_LIMIT / SF_E_NOMEM. */
int gr_parse(struct gr_build *b, const char *text, size_t len, struct sf_err *err);
void gr_build_free(struct gr_build *b);

/* Adds to b, between states from and to, the UTF-8 byte sequences of the code points in the
 * sorted, disjoint ranges lo[i]..hi[i] (surrogates left out). SF_E_LIMIT / SF_E_NOMEM. */
int gr_utf8_ranges(struct gr_build *b, const uint32_t *lo, const uint32_t *hi, size_t n,
		   uint32_t from, uint32_t to, struct sf_err *err);
/* A new state of the current rule, or GR_NONE past the limit (err set). */
uint32_t gr_state(struct gr_build *b, struct sf_err *err);
/* An edge: 0, or an error (err set). */
int gr_edge(struct gr_build *b, uint8_t kind, uint32_t from, uint32_t to, uint32_t rule,
	    uint8_t lo, uint8_t hi, struct sf_err *err);

/* ---- the compiled grammar (grammar_compile.c) ---- */

enum { GR_C_WAIT = 0, GR_C_CALL = 1, GR_C_FINAL = 2 };

/* A closure item: a state waiting for a byte or a token, a call of rule returning to state (tail: the
 * return would only end the caller: nothing is pushed), or the end of the rule. */
struct gr_item {
	uint32_t state;
	uint32_t rule;
	uint8_t kind;
	bool tail;
};

/* A byte edge of a waiting state. */
struct gr_byte_edge {
	uint8_t lo, hi;
	uint32_t to; /* an entry state */
};

/* A token edge of a waiting state (<[id]>). */
struct gr_tok_edge {
	uint32_t tok;
	uint32_t to; /* an entry state */
};

struct gr_mask_cache; /* grammar_mask.c */

struct sf_grammar {
	_Atomic uint32_t refs;
	uint64_t digest;
	uint32_t n_states, n_rules;
	uint32_t root;            /* rule id */
	uint32_t *rule_start;     /* by rule */
	char **rule_name;         /* by rule */
	/* By state: its byte edges (waiting states have some) and its closure (entry states). */
	uint32_t *edge0, *n_edge;
	struct gr_byte_edge *edges;
	uint32_t *clo0, *n_clo;
	struct gr_item *items;
	uint64_t (*first)[4];     /* by state: the bytes its edges take */
	/* By state: its token edges (most states have none). */
	uint32_t *tedge0, *n_tedge;
	struct gr_tok_edge *tedges;
	uint32_t n_tedges;        /* of all states */
	struct gr_mask_cache *cache;
};

/* ---- stacks (grammar_stack.c) ---- */

/* Stack nodes, hash-consed: one node per (state, parent), so equal stacks are equal ids. A
 * mark taken with gr_arena_mark is released with gr_arena_release (nodes made since go). */
struct gr_arena {
	uint32_t *st, *par, *dep;
	uint32_t n, cap;
	uint32_t *tab; /* open addressing: node + 1, 0 empty */
	uint32_t tcap;
	uint32_t *seen; /* by node: a set's stamp (dedup) */
	uint32_t stamp;
};

/* A set of stacks: node ids (tops), and whether the root may end / the cached rule ended. */
struct gr_set {
	uint32_t *ids;
	uint32_t n, cap;
	bool accept, popped;
};

/* The work of one expansion: pending (entry, parent) pairs and those done. */
struct gr_work {
	uint32_t *todo; /* pairs */
	uint32_t n, cap;
	uint64_t *done; /* open addressing of (entry << 32 | parent) + 1 ... with stamps */
	uint32_t *done_stamp;
	uint32_t dcap;
	uint32_t stamp;
	uint32_t steps;
};

int gr_arena_init(struct gr_arena *a, uint32_t cap);
void gr_arena_fini(struct gr_arena *a);
static inline uint32_t gr_arena_mark(const struct gr_arena *a)
{
	return a->n;
}
void gr_arena_release(struct gr_arena *a, uint32_t mark);
/* The node (state, parent): found or made; GR_NONE when memory or the depth bound is out. */
uint32_t gr_intern(struct gr_arena *a, uint32_t state, uint32_t parent, struct sf_err *err);

void gr_set_clear(struct gr_set *s);
void gr_set_free(struct gr_set *s);
int gr_set_copy(struct gr_set *dst, const struct gr_set *src, struct sf_err *err);

void gr_work_free(struct gr_work *w);

/* Adds to out the stacks that entry state e with parent below it expands to (closures, calls,
 * returns). 0, or SF_E_LIMIT / SF_E_NOMEM. */
int gr_expand(const struct sf_grammar *g, struct gr_arena *a, struct gr_work *w, uint32_t e,
	      uint32_t parent, struct gr_set *out, struct sf_err *err);
/* out = the stacks of in after byte b (out cleared first). 0, or as gr_expand. */
int gr_advance(const struct sf_grammar *g, struct gr_arena *a, struct gr_work *w,
	       const struct gr_set *in, uint8_t b, struct gr_set *out, struct sf_err *err);
/* out = the stacks of in after token tok taken by a token edge (<[tok]>; out cleared first).
 * 0, or as gr_expand. */
int gr_advance_token(const struct sf_grammar *g, struct gr_arena *a, struct gr_work *w,
		     const struct gr_set *in, uint32_t tok, struct gr_set *out, struct sf_err *err);
/* Whether a token edge of some stack top of s names tok. */
bool gr_set_names(const struct sf_grammar *g, const struct gr_arena *a, const struct gr_set *s,
		  uint32_t tok);
/* Adds to dst the stacks of src it lacks, and src's accept. 0, or SF_E_LIMIT / SF_E_NOMEM. */
int gr_set_union(struct gr_arena *a, struct gr_set *dst, const struct gr_set *src,
		 struct sf_err *err);
/* Whether some stack of s can take byte b. */
static inline bool gr_set_takes(const struct sf_grammar *g, const struct gr_arena *a,
				const struct gr_set *s, uint8_t b)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (g->first[a->st[s->ids[i]]][b >> 6] >> (b & 63) & 1)
			return true;
	return false;
}

/* ---- the vocabulary's trie (grammar_vocab.c) ---- */

/* Nodes in preorder: node 0 is the root (no byte); node i's subtree is i .. end[i]-1; the
 * tokens whose bytes end at node i are tok[tok0[i] .. tok0[i] + ntok[i]). */
struct sf_grammar_vocab {
	uint32_t n_vocab;
	uint32_t n_nodes;
	uint8_t *byte;
	uint32_t *end;
	uint32_t *tok0;
	uint32_t *ntok;
	uint32_t *tok;
	uint8_t *kind;     /* by token: enum sf_gtok */
	uint32_t *ends;    /* the SF_GTOK_END tokens */
	uint32_t n_ends;
	uint64_t id;       /* unique per vocabulary made in this process */
	/* By token: its bytes (for one token's check and sync). */
	uint32_t *off;     /* n_vocab + 1 */
	uint8_t *bytes;
};

/* ---- the matcher (grammar_match.c) ---- */

struct sf_gmatch {
	struct sf_grammar *g;
	struct gr_arena a;
	struct gr_work w;
	struct gr_set cur, tmp, cont, alt;
	bool ended;      /* took an end token */
	uint32_t compact_at; /* arena nodes past which it is compacted */
	uint32_t *taken; /* the tokens taken since the start (sf_gmatch_sync) */
	size_t n_taken, cap_taken;
	uint32_t *pool;  /* sets of a mask's walk */
	size_t cap_pool;
};

/* The start state into s (arena a). */
int gr_start(const struct sf_grammar *g, struct gr_arena *a, struct gr_work *w, struct gr_set *s,
	     struct sf_err *err);

/* ---- masks (grammar_mask.c) ---- */

void gr_mask_cache_free(struct gr_mask_cache *c);

/* A word-sized FNV-1a-style digest of bytes. */
uint64_t gr_digest(const void *p, size_t n);

#endif
