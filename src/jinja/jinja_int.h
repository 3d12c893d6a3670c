/* The Jinja renderer's insides: values (Python's objects as templates see them), the lexer's
 * tokens, the syntax tree, and the state of one rendering. The prefix is jj_. */
#ifndef SF_JINJA_INT_H
#define SF_JINJA_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>
#include <superfluid/jinja.h>

/* ---- values ---- */

enum jv_kind {
	JV_UNDEF, /* Jinja's Undefined: prints "", is false, iterates empty, fails when used */
	JV_NONE,
	JV_BOOL,
	JV_INT,
	JV_FLOAT,
	JV_STR,
	JV_LIST,  /* a list, or a tuple (jlist.tuple) */
	JV_DICT,  /* a dict, or a namespace() (jdict.ns) */
	JV_FUNC,  /* a macro, caller, builtin function or bound method */
	JV_LOOP,  /* a for loop's `loop` */
};

struct jstr;
struct jlist;
struct jdict;
struct jfunc;
struct jloop;

struct jv {
	uint8_t kind;
	union {
		bool b;
		int64_t i;
		double f;
		struct jstr *s;
		struct jlist *l;
		struct jdict *d;
		struct jfunc *fn;
		struct jloop *loop;
		const char *undef; /* the name that was undefined (template-owned) or NULL */
	};
};

#define JJ_IMMORTAL UINT32_MAX /* refs of a template's constants: never counted (threads share them) */

struct jstr {
	uint32_t refs;
	bool safe; /* markupsafe's Markup (the safe and escape filters): + escapes the other side */
	size_t len;
	char s[]; /* len bytes and a NUL */
};

#define JJ_MAX_NEST 256 /* lists and dicts inside each other: deeper is refused */

/* What a list stands for when it is not a plain list: Python's lazy iterables, which templates
 * can iterate but not index, measure (generators) or serialize. */
enum jl_view { JL_LIST, JL_GEN, JL_REVITER, JL_ITEMS, JL_KEYS, JL_VALUES };

struct jlist {
	uint32_t refs;
	bool tuple;
	uint8_t view;   /* enum jl_view */
	bool has_ns;    /* holds a namespace (at any depth) */
	uint16_t depth; /* 1 + the deepest item's depth */
	size_t n, cap;
	struct jv *v;
};

struct jdict {
	uint32_t refs;
	bool ns; /* a namespace(): attributes may be assigned, never a namespace as value */
	bool has_ns;
	uint16_t depth;
	size_t n, cap;
	struct jv *k, *v; /* in insertion order */
};

enum jfn_kind { FN_MACRO, FN_CALLER, FN_BUILTIN, FN_METHOD };

struct jj_site { /* where a call block's caller() renders: cleared when that block ends */
	uint32_t refs;
	struct jj_scope *scope;
};

struct jfunc {
	uint32_t refs;
	uint8_t kind;
	uint16_t id;                /* FN_BUILTIN, FN_METHOD: which */
	const struct jnode *node;   /* FN_MACRO: the macro; FN_CALLER: the call block */
	struct jv self;             /* FN_METHOD: the object */
	struct jj_site *site;       /* FN_CALLER */
};

struct jloop {
	uint32_t refs;
	struct jlist *items;
	size_t index0;
	uint32_t depth;
};

static inline struct jv jv_undef(const char *name) { return (struct jv){ .kind = JV_UNDEF, .undef = name }; }
static inline struct jv jv_none(void) { return (struct jv){ .kind = JV_NONE }; }
static inline struct jv jv_bool(bool b) { return (struct jv){ .kind = JV_BOOL, .b = b }; }
static inline struct jv jv_int(int64_t i) { return (struct jv){ .kind = JV_INT, .i = i }; }
static inline struct jv jv_float(double f) { return (struct jv){ .kind = JV_FLOAT, .f = f }; }

struct jj_ctx;

/* Reference counting: jv_ref returns v with one more reference, jv_unref drops one. */
struct jv jv_ref(struct jv v);
void jv_unref(struct jv v);

/* Constructors: NULL/undefined-kind on allocation failure is reported through c (may be NULL
 * at parse time, then a failure returns -1). Strings are bounded by the output limit. */
int jv_str(struct jj_ctx *c, const char *p, size_t len, struct jv *out);
int jv_list_new(struct jj_ctx *c, size_t cap, bool tuple, struct jv *out);
int jv_dict_new(struct jj_ctx *c, size_t cap, struct jv *out);
/* Appends v (taking its reference) to list l. */
int jv_list_push(struct jj_ctx *c, struct jv l, struct jv v);
/* Sets d[k] = v (taking both references). */
int jv_dict_set(struct jj_ctx *c, struct jv d, struct jv k, struct jv v);
/* d[k] borrowed, or NULL. Charges steps for the search when c is set. */
const struct jv *jv_dict_get(struct jj_ctx *c, struct jv d, struct jv k);
const struct jv *jv_dict_get_str(struct jv d, const char *key);

bool jv_truthy(struct jv v);
bool jv_is_num(struct jv v); /* bool, int or float */
double jv_num(struct jv v);
/* Python's ==. */
bool jv_eq(struct jv a, struct jv b);
/* Python's <: sets *lt, or fails (unorderable types) with -1 and no message. */
int jv_lt(struct jv a, struct jv b, bool *lt);
const char *jv_type_name(struct jv v); /* Python's type name: 'str', 'dict', 'NoneType' ... */
/* A plain list or tuple (not a generator or a dict view). */
static inline bool jv_is_seq(struct jv v) { return v.kind == JV_LIST && v.l->view == JL_LIST; }

/* ---- growable byte buffers (outputs and strings being built) ---- */

struct jj_buf {
	char *p;
	size_t len, cap;
};
int jj_buf_add(struct jj_ctx *c, struct jj_buf *b, const char *p, size_t n);
int jj_buf_addc(struct jj_ctx *c, struct jj_buf *b, char ch);
int jj_buf_printf(struct jj_ctx *c, struct jj_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Makes a string value of b's bytes and frees b. */
int jj_buf_to_str(struct jj_ctx *c, struct jj_buf *b, struct jv *out);

/* str(v) and repr(v) as Python writes them, appended to b. */
int jj_str(struct jj_ctx *c, struct jj_buf *b, struct jv v);
int jj_repr(struct jj_ctx *c, struct jj_buf *b, struct jv v);
/* Python's repr of a float ("1.0", "1e+20", "inf") into out (at least 32 bytes). */
void jj_float_repr(double f, char *out, size_t cap);
/* str(v) as a string value (v itself when it is one). */
int jj_to_str(struct jj_ctx *c, struct jv v, struct jv *out);

/* ---- tokens ---- */

enum jt_kind {
	JT_EOF, JT_DATA, JT_VAR_BEGIN, JT_VAR_END, JT_BLOCK_BEGIN, JT_BLOCK_END,
	JT_NAME, JT_STRING, JT_INT, JT_FLOAT,
	/* operators */
	JT_ADD, JT_SUB, JT_MUL, JT_DIV, JT_FLOORDIV, JT_MOD, JT_POW, JT_TILDE,
	JT_LPAREN, JT_RPAREN, JT_LBRACKET, JT_RBRACKET, JT_LBRACE, JT_RBRACE,
	JT_COMMA, JT_DOT, JT_COLON, JT_PIPE, JT_ASSIGN,
	JT_EQ, JT_NE, JT_LT, JT_LE, JT_GT, JT_GE, JT_SEMICOLON,
};

struct jtok {
	uint8_t kind;
	uint32_t line, col;
	const char *p; /* JT_DATA, JT_NAME: the source slice; JT_STRING: its decoded bytes (arena) */
	size_t len;
	int64_t i;
	double f;
};

/* ---- the syntax tree ---- */

enum jn_kind {
	/* statements */
	JN_BODY, JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SET_BLOCK, JN_MACRO, JN_CALL_BLOCK,
	JN_FILTER_BLOCK, JN_BREAK, JN_CONTINUE, JN_SCOPE,
	/* expressions */
	JN_CONST, JN_NAME, JN_NSREF, JN_GETATTR, JN_GETITEM, JN_SLICE, JN_CALL, JN_FILTER, JN_TEST,
	JN_NOT, JN_NEG, JN_POS, JN_BIN, JN_AND, JN_OR, JN_COMPARE, JN_COND, JN_LIST, JN_TUPLE, JN_DICT,
};

enum jn_op { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT };
enum jn_cmp { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN };

struct jnode {
	uint8_t kind;
	uint8_t op;
	uint32_t line, col;
	const char *name;      /* NAME, NSREF (the namespace), GETATTR, FILTER, TEST, MACRO */
	const char *attr;      /* NSREF: the attribute */
	struct jnode *a, *b, *c, *d, *e;
	struct jnode **kids;   /* BODY statements, call/filter/test args, list items, dict keys, macro params */
	struct jnode **vals;   /* DICT values, macro parameter defaults (NULL: none) */
	const char **kw_names; /* keyword arguments of a call, filter or test */
	struct jnode **kw_vals;
	uint8_t *ops;          /* COMPARE: one per kid */
	uint32_t n_kids, n_kw;
	struct jv value;       /* CONST, TEXT (immortal) */
};
/* Field use: IF a=cond b=body c=else; FOR a=target b=iter c=body d=else e=filter;
 * SET a=target b=value; SET_BLOCK a=target b=body c=filter chain; MACRO b=body;
 * CALL_BLOCK a=the call b=body; FILTER_BLOCK a=filter chain b=body; SCOPE b=body; OUTPUT a;
 * GETATTR a; GETITEM a b; SLICE a b c d; CALL a; FILTER a (NULL: the chain's input); TEST a;
 * NOT/NEG/POS a; BIN/AND/OR a b; COMPARE a then kids; COND a=cond b=then c=else. */

struct jj_arena {
	struct jj_chunk *head;
	size_t used_total;
};
void *jj_alloc(struct jj_arena *a, size_t n); /* zeroed; NULL when out of memory */
void jj_arena_free(struct jj_arena *a);

struct sf_jinja {
	struct jj_arena arena;
	struct jnode *root;
	struct jstr **consts; /* immortal strings to free */
	size_t n_consts, cap_consts;
};

/* The lexer: src (newlines normalized by the caller) into tokens (arena). */
int jj_lex(const char *src, size_t len, struct jj_arena *a, struct jtok **toks, size_t *n,
	   struct sf_err *e);

struct jj_parser {
	struct sf_jinja *t;
	const struct jtok *tok;
	size_t pos, n;
	uint32_t depth, max_depth;
	struct sf_err *e;
	int failed;
};
/* The token at the cursor; the next (the cursor moves on, never past the last: the end). */
static inline const struct jtok *jj_cur(struct jj_parser *p)
{
	return &p->tok[p->pos];
}
static inline const struct jtok *jj_next(struct jj_parser *p)
{
	const struct jtok *t = &p->tok[p->pos];
	if (p->pos + 1 < p->n)
		p->pos++;
	return t;
}
/* Takes a token of kind, or fails naming what was expected and what was found. */
int jj_expect(struct jj_parser *p, uint8_t kind, const char *what);
int jj_parse_template(struct jj_parser *p);
struct jnode *jj_parse_expr(struct jj_parser *p);          /* with inline if */
struct jnode *jj_parse_expr_nocond(struct jj_parser *p);   /* without (for's iterable, if's test) */
struct jnode *jj_parse_tuple(struct jj_parser *p, bool with_cond, bool explicit_paren);
struct jnode *jj_parse_filter_chain(struct jj_parser *p, struct jnode *input);
int jj_parse_call_args(struct jj_parser *p, struct jnode *n);
struct jnode *jj_node(struct jj_parser *p, uint8_t kind, const struct jtok *at);
int jj_fail(struct jj_parser *p, const struct jtok *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int jj_unsupported(struct jj_parser *p, const struct jtok *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
const char *jj_tok_desc(const struct jtok *t, char *buf, size_t cap);
bool jj_tok_is_name(const struct jtok *t, const char *name);
char *jj_strdup(struct jj_arena *a, const char *p, size_t n);
int jj_const_str(struct jj_parser *p, const char *s, size_t len, struct jv *out);

/* ---- rendering ---- */

struct jj_scope {
	struct jj_scope *parent;
	struct jv vars; /* a dict */
};

struct jj_ctx {
	const struct sf_jinja *t;
	struct sf_jinja_limits lim;
	int64_t now;
	uint64_t steps;
	uint32_t depth, max_rt_depth, macro_depth;
	struct jj_buf *out;      /* where output goes now */
	struct jj_scope *root;
	struct sf_err *e;
	int rc;                  /* the first error (negative), 0 while none */
	uint32_t line;           /* the line being evaluated, for messages */
	size_t live;             /* bytes of the values it holds now (max_bytes) */
};

/* The rendering that runs on this thread (sf_jinja_render sets it), whose live bytes
 * jv_unref takes back; NULL outside one. */
extern _Thread_local struct jj_ctx *jj_live_ctx;
/* Counts n more bytes of values held; fails past max_bytes (nothing counted then). c may be
 * NULL (parse time: not counted). */
int jj_charge(struct jj_ctx *c, size_t n);

/* Records the first error (with the current line) and returns it. */
int jj_err(struct jj_ctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Counts n steps of work; fails when over the limit. */
int jj_step(struct jj_ctx *c, uint64_t n);

int jj_exec(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s);
int jj_eval(struct jj_ctx *c, const struct jnode *n, struct jj_scope *s, struct jv *out);
/* Calls f with evaluated arguments (borrowed). */
int jj_call(struct jj_ctx *c, struct jv f, const struct jv *args, size_t n_args,
	    const char *const *kw_names, const struct jv *kw_vals, size_t n_kw, struct jv *out);
int jj_getattr(struct jj_ctx *c, struct jv obj, const char *name, size_t len, struct jv *out);
int jj_getitem(struct jj_ctx *c, struct jv obj, struct jv key, struct jv *out);
/* Iterates v as a for loop does: a new list of its items (dict: keys; string: characters). */
int jj_iter_list(struct jj_ctx *c, struct jv v, struct jv *out);
int jj_binop(struct jj_ctx *c, int op, struct jv a, struct jv b, struct jv *out);
int jj_contains(struct jj_ctx *c, struct jv hay, struct jv needle, bool *in);

/* Filters, tests, methods and globals (the evaluated arguments borrowed). */
struct jj_args {
	const struct jv *v;
	size_t n;
	const char *const *kw_names;
	const struct jv *kw_vals;
	size_t n_kw;
};
/* Finds an argument by position or keyword; NULL when not given. */
const struct jv *jj_arg(const struct jj_args *a, size_t pos, const char *kw);
int jj_filter(struct jj_ctx *c, const char *name, struct jv in, const struct jj_args *a,
	      struct jv *out);
bool jj_filter_exists(const char *name);
int jj_test(struct jj_ctx *c, const char *name, struct jv in, const struct jj_args *a, bool *res);
bool jj_test_exists(const char *name);
/* A method of a str, dict or list, or -1 when obj has none by that name. */
int jj_method_id(struct jv obj, const char *name, size_t len);
int jj_method_call(struct jj_ctx *c, struct jv self, int id, const struct jj_args *a, struct jv *out);
/* A global function (range, namespace, raise_exception, strftime_now, dict) or -1. */
int jj_global_id(const char *name);
int jj_global_call(struct jj_ctx *c, int id, const struct jj_args *a, struct jv *out);
int jj_loop_attr(struct jj_ctx *c, struct jv loop, const char *name, struct jv *out);

/* markupsafe's escape of s[0..len) (& < > " ' as entities), as a Markup string. */
int jj_html_escape(struct jj_ctx *c, const char *s, size_t len, struct jv *out);

/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) as Python writes it. indent: NULL
 * for none; item_sep/key_sep NULL for the defaults. */
int jj_tojson(struct jj_ctx *c, struct jj_buf *b, struct jv v, bool ensure_ascii,
	      const char *indent, const char *item_sep, const char *key_sep, bool sort_keys);

/* UTF-8: the code point at p (advancing *i), U+FFFD for a bad byte. */
uint32_t jj_utf8_next(const char *p, size_t len, size_t *i);
size_t jj_utf8_put(uint32_t cp, char *out);
size_t jj_utf8_count(const char *p, size_t len);
bool jj_is_space(uint32_t cp); /* Python's str.isspace */

#endif
