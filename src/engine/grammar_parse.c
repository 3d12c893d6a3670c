/* GBNF text to automata: one per rule, built Thompson-style (groups, alternations and
 * repetitions inline in their rule's automaton; a rule name is a call edge, <[id]> a token
 * edge). */
#include "engine/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

#include <superfluid/wire.h>

struct gp {
	struct gr_build *b;
	const char *s, *end;
	const char *p;
	uint32_t line;
	uint32_t nest;
	struct sf_err *err;
};

/* A fragment of a rule's automaton: enter at start, leave at end. */
struct frag {
	uint32_t start, end;
};

static int fail(struct gp *g, const char *what)
{
	return sf_err_set(g->err, SF_E_RANGE, "grammar: line %u: %s", g->line, what);
}

uint32_t gr_state(struct gr_build *b, struct sf_err *err)
{
	if (b->n_states >= SF_GRAMMAR_MAX_STATES) {
		sf_err_set(err, SF_E_LIMIT, "grammar: more than %u automaton states (repetition "
			   "counts and long literals add up)", SF_GRAMMAR_MAX_STATES);
		return GR_NONE;
	}
	if (b->n_states == b->cap_states) {
		uint32_t cap = b->cap_states ? b->cap_states * 2 : 256;
		uint32_t *r = realloc(b->state_rule, cap * sizeof(*r));
		if (!r) {
			sf_err_set(err, SF_E_NOMEM, "grammar: no memory for its automaton");
			return GR_NONE;
		}
		b->state_rule = r;
		b->cap_states = cap;
	}
	b->state_rule[b->n_states] = b->cur_rule;
	return b->n_states++;
}

int gr_edge(struct gr_build *b, uint8_t kind, uint32_t from, uint32_t to, uint32_t rule,
	    uint8_t lo, uint8_t hi, struct sf_err *err)
{
	if (b->n_edges >= 4 * SF_GRAMMAR_MAX_STATES)
		return sf_err_set(err, SF_E_LIMIT, "grammar: more than %u automaton edges",
				  4 * SF_GRAMMAR_MAX_STATES);
	if (b->n_edges == b->cap_edges) {
		uint32_t cap = b->cap_edges ? b->cap_edges * 2 : 512;
		struct gr_bedge *e = realloc(b->edges, cap * sizeof(*e));
		if (!e)
			return sf_err_set(err, SF_E_NOMEM, "grammar: no memory for its automaton");
		b->edges = e;
		b->cap_edges = cap;
	}
	b->edges[b->n_edges++] = (struct gr_bedge){ .from = from, .to = to, .rule = rule,
						    .kind = kind, .lo = lo, .hi = hi };
	return 0;
}

void gr_build_free(struct gr_build *b)
{
	for (uint32_t i = 0; i < b->n_rules; i++)
		free(b->rules[i].name);
	free(b->rules);
	free(b->edges);
	free(b->state_rule);
	memset(b, 0, sizeof(*b));
}

/* ---- text ---- */

static bool word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

/* Skips blanks and comments, and line ends when newline_ok. */
static void space(struct gp *g, bool newline_ok)
{
	while (g->p < g->end) {
		char c = *g->p;
		if (c == '#') {
			while (g->p < g->end && *g->p != '\n' && *g->p != '\r')
				g->p++;
		} else if (c == ' ' || c == '\t') {
			g->p++;
		} else if (newline_ok && (c == '\n' || c == '\r')) {
			if (c == '\n')
				g->line++;
			g->p++;
		} else {
			break;
		}
	}
}

/* One UTF-8 code point of the grammar text. */
static int utf8(struct gp *g, uint32_t *cp)
{
	const unsigned char *p = (const unsigned char *)g->p;
	size_t left = (size_t)(g->end - g->p);
	uint32_t c = p[0];
	int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
	if (!n || (size_t)n > left)
		return fail(g, "the text is not valid UTF-8");
	if (n > 1)
		c &= 0x3fu >> (n - 1);
	for (int i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return fail(g, "the text is not valid UTF-8");
		c = c << 6 | (p[i] & 0x3f);
	}
	static const uint32_t least[5] = { 0, 0, 0x80, 0x800, 0x10000 };
	if (c < least[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return fail(g, "the text is not valid UTF-8");
	g->p += n;
	*cp = c;
	return 0;
}

static int hex(struct gp *g, int digits, uint32_t *cp)
{
	uint32_t v = 0;
	for (int i = 0; i < digits; i++) {
		if (g->p >= g->end)
			return fail(g, "an escape ends early");
		char c = *g->p++;
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (d < 0)
			return fail(g, "a hex escape holds a character that is not a hex digit");
		v = v << 4 | (uint32_t)d;
	}
	if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return fail(g, "an escape names no Unicode character (over U+10FFFF or a surrogate)");
	*cp = v;
	return 0;
}

/* One character of a literal or a class: escapes, else a code point. */
static int char_at(struct gp *g, uint32_t *cp)
{
	if (g->p >= g->end)
		return fail(g, "a literal or class is not closed");
	if (*g->p == '\n' || *g->p == '\r')
		return fail(g, "a literal or class is not closed on its line");
	if (*g->p != '\\')
		return utf8(g, cp);
	g->p++;
	if (g->p >= g->end)
		return fail(g, "an escape ends early");
	char c = *g->p++;
	switch (c) {
	case 'x': return hex(g, 2, cp);
	case 'u': return hex(g, 4, cp);
	case 'U': return hex(g, 8, cp);
	case 'n': *cp = '\n'; return 0;
	case 'r': *cp = '\r'; return 0;
	case 't': *cp = '\t'; return 0;
	case 'f': *cp = '\f'; return 0;
	case 'v': *cp = '\v'; return 0;
	case '0': *cp = 0; return 0;
	case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/':
	case '.': case '(': case ')': case '{': case '}': case '*': case '+': case '?': case '|':
	case ' ':
		*cp = (uint32_t)c;
		return 0;
	default:
		return fail(g, "an unknown escape (known: \\n \\r \\t \\xHH \\uHHHH \\UHHHHHHHH and "
			       "punctuation)");
	}
}

/* ---- elements ---- */

static int link_eps(struct gp *g, uint32_t from, uint32_t to)
{
	return gr_edge(g->b, GR_E_EPS, from, to, 0, 0, 0, g->err);
}

static int new_frag(struct gp *g, struct frag *f)
{
	f->start = gr_state(g->b, g->err);
	f->end = f->start == GR_NONE ? GR_NONE : gr_state(g->b, g->err);
	return f->end == GR_NONE ? g->err->code : 0;
}

/* Code point cp as its UTF-8 bytes, chained from state at; *at becomes the last state. */
static int literal_cp(struct gp *g, uint32_t cp, uint32_t *at)
{
	uint8_t u[4];
	int n;
	if (cp < 0x80) {
		u[0] = (uint8_t)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (uint8_t)(0xc0 | cp >> 6);
		u[1] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (uint8_t)(0xe0 | cp >> 12);
		u[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		u[2] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (uint8_t)(0xf0 | cp >> 18);
		u[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
		u[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		u[3] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 4;
	}
	for (int i = 0; i < n; i++) {
		uint32_t s = gr_state(g->b, g->err);
		if (s == GR_NONE || gr_edge(g->b, GR_E_BYTES, *at, s, 0, u[i], u[i], g->err))
			return g->err->code;
		*at = s;
	}
	return 0;
}

static int literal(struct gp *g, char quote, struct frag *f)
{
	g->p++; /* the opening quote */
	uint32_t at = gr_state(g->b, g->err);
	if (at == GR_NONE)
		return g->err->code;
	f->start = at;
	while (g->p < g->end && *g->p != quote) {
		uint32_t cp;
		int rc = char_at(g, &cp);
		if (!rc)
			rc = literal_cp(g, cp, &at);
		if (rc)
			return rc;
	}
	if (g->p >= g->end)
		return fail(g, "a literal is not closed");
	g->p++;
	f->end = at;
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The code points of ranges r[0..n) (pairs), sorted and merged, complemented when negate, as
 * UTF-8 sequences from f->start to f->end. */
static int class_frag(struct gp *g, uint32_t *r, size_t n, bool negate, struct frag *f)
{
	qsort(r, n, 2 * sizeof(uint32_t), cmp_range);
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (m && r[2 * i] <= r[2 * (m - 1) + 1] + 1) {
			if (r[2 * i + 1] > r[2 * (m - 1) + 1])
				r[2 * (m - 1) + 1] = r[2 * i + 1];
		} else {
			r[2 * m] = r[2 * i];
			r[2 * m + 1] = r[2 * i + 1];
			m++;
		}
	}
	uint32_t *lo = malloc((m + 2) * sizeof(uint32_t)), *hi = malloc((m + 2) * sizeof(uint32_t));
	int rc = 0;
	if (!lo || !hi) {
		rc = sf_err_set(g->err, SF_E_NOMEM, "grammar: no memory for a class");
		goto out;
	}
	size_t k = 0;
	if (!negate) {
		for (size_t i = 0; i < m; i++) {
			lo[k] = r[2 * i];
			hi[k++] = r[2 * i + 1];
		}
	} else {
		uint32_t next = 0;
		for (size_t i = 0; i < m; i++) {
			if (r[2 * i] > next) {
				lo[k] = next;
				hi[k++] = r[2 * i] - 1;
			}
			next = r[2 * i + 1] + 1;
		}
		if (next <= 0x10ffff) {
			lo[k] = next;
			hi[k++] = 0x10ffff;
		}
	}
	if (!(rc = new_frag(g, f)))
		rc = gr_utf8_ranges(g->b, lo, hi, k, f->start, f->end, g->err);
out:
	free(lo);
	free(hi);
	return rc;
}

static int char_class(struct gp *g, struct frag *f)
{
	g->p++; /* [ */
	bool negate = g->p < g->end && *g->p == '^';
	if (negate)
		g->p++;
	uint32_t *r = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	while (g->p < g->end && *g->p != ']') {
		uint32_t a, z;
		if ((rc = char_at(g, &a)))
			goto out;
		z = a;
		if (g->end - g->p >= 2 && g->p[0] == '-' && g->p[1] != ']') {
			g->p++;
			if ((rc = char_at(g, &z)))
				goto out;
			if (z < a) {
				rc = fail(g, "a class range ends before it starts");
				goto out;
			}
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			if (cap > SF_GRAMMAR_MAX_TEXT) {
				rc = fail(g, "a class is too long");
				goto out;
			}
			uint32_t *t = realloc(r, cap * 2 * sizeof(uint32_t));
			if (!t) {
				rc = sf_err_set(g->err, SF_E_NOMEM, "grammar: no memory for a class");
				goto out;
			}
			r = t;
		}
		r[2 * n] = a;
		r[2 * n + 1] = z;
		n++;
	}
	if (g->p >= g->end) {
		rc = fail(g, "a class is not closed");
		goto out;
	}
	g->p++;
	if (!n && !negate) {
		rc = fail(g, "an empty class [] matches nothing");
		goto out;
	}
	rc = class_frag(g, r, n, negate, f);
out:
	free(r);
	return rc;
}

/* The rule named name[0..len): found, or made (undefined until its definition). */
static int rule_id(struct gp *g, const char *name, size_t len, uint32_t *id)
{
	struct gr_build *b = g->b;
	for (uint32_t i = 0; i < b->n_rules; i++)
		if (strlen(b->rules[i].name) == len && !memcmp(b->rules[i].name, name, len)) {
			*id = i;
			return 0;
		}
	if (b->n_rules >= SF_GRAMMAR_MAX_RULES)
		return sf_err_set(g->err, SF_E_LIMIT, "grammar: more than %u rules",
				  SF_GRAMMAR_MAX_RULES);
	if (b->n_rules == b->cap_rules) {
		uint32_t cap = b->cap_rules ? 2 * b->cap_rules : 32;
		struct gr_rule *r = realloc(b->rules, cap * sizeof(*r));
		if (!r)
			return sf_err_set(g->err, SF_E_NOMEM, "grammar: no memory for its rules");
		b->rules = r;
		b->cap_rules = cap;
	}
	struct gr_rule *r = &b->rules[b->n_rules];
	memset(r, 0, sizeof(*r));
	r->name = strndup(name, len);
	if (!r->name)
		return sf_err_set(g->err, SF_E_NOMEM, "grammar: no memory for its rules");
	uint32_t saved = b->cur_rule;
	b->cur_rule = b->n_rules;
	r->start = gr_state(b, g->err);
	r->final = r->start == GR_NONE ? GR_NONE : gr_state(b, g->err);
	b->cur_rule = saved;
	if (r->final == GR_NONE) {
		free(r->name);
		return g->err->code;
	}
	r->ref_line = g->line;
	*id = b->n_rules++;
	return 0;
}

static int alternates(struct gp *g, bool nested, struct frag *f);

/* <[id]>: the token id (a control token a text element cannot write), by one edge. */
static int token_ref(struct gp *g, struct frag *f)
{
	if (g->end - g->p < 2 || g->p[1] != '[')
		return fail(g, "a token reference by name (<name>) is not supported: name the "
			       "token by its id, <[id]>, or write its text as a literal");
	g->p += 2;
	if (g->p >= g->end || *g->p < '0' || *g->p > '9')
		return fail(g, "a token reference <[id]> needs a decimal id");
	uint64_t id = 0;
	while (g->p < g->end && *g->p >= '0' && *g->p <= '9') {
		id = id * 10 + (uint64_t)(*g->p++ - '0');
		if (id >= SF_MAX_VOCAB)
			return sf_err_set(g->err, SF_E_LIMIT, "grammar: line %u: a token id past %u",
					  g->line, SF_MAX_VOCAB - 1);
	}
	if (g->end - g->p < 2 || g->p[0] != ']' || g->p[1] != '>')
		return fail(g, "a token reference <[id]> is not closed by ]>");
	g->p += 2;
	int rc = new_frag(g, f);
	return rc ? rc : gr_edge(g->b, GR_E_TOKEN, f->start, f->end, (uint32_t)id, 0, 0, g->err);
}

/* One element (without its postfix operator). */
static int element(struct gp *g, struct frag *f)
{
	char c = *g->p;
	if (c == '"' || c == '\'')
		return literal(g, c, f);
	if (c == '[')
		return char_class(g, f);
	if (c == '.') {
		g->p++;
		uint32_t r[2] = { 0, 0x10ffff };
		return class_frag(g, r, 1, false, f);
	}
	if (c == '(') {
		if (++g->nest > SF_GRAMMAR_MAX_NEST)
			return sf_err_set(g->err, SF_E_LIMIT, "grammar: line %u: parentheses nested "
					  "deeper than %u", g->line, SF_GRAMMAR_MAX_NEST);
		g->p++;
		space(g, true);
		int rc = alternates(g, true, f);
		if (rc)
			return rc;
		if (g->p >= g->end || *g->p != ')')
			return fail(g, "a group ( is not closed by )");
		g->p++;
		g->nest--;
		return 0;
	}
	if (c == '<')
		return token_ref(g, f);
	if (c == '!' && g->end - g->p > 1 && g->p[1] == '<')
		return fail(g, "a negated token reference (!<[id]>) is not supported: name the "
			       "tokens allowed");
	if (word_char(c)) {
		const char *name = g->p;
		while (g->p < g->end && word_char(*g->p))
			g->p++;
		uint32_t id;
		int rc = rule_id(g, name, (size_t)(g->p - name), &id);
		if (!rc)
			rc = new_frag(g, f);
		if (!rc)
			rc = gr_edge(g->b, GR_E_CALL, f->start, f->end, id, 0, 0, g->err);
		return rc;
	}
	return fail(g, "expected an element (a \"literal\", a [class], a rule name, <[id]>, ( or .)");
}

/* Reads a decimal count of {m,n}. */
static int count(struct gp *g, uint32_t *v)
{
	if (g->p >= g->end || *g->p < '0' || *g->p > '9')
		return fail(g, "a repetition {m,n} needs numbers");
	uint64_t x = 0;
	while (g->p < g->end && *g->p >= '0' && *g->p <= '9') {
		x = x * 10 + (uint64_t)(*g->p++ - '0');
		if (x > SF_GRAMMAR_MAX_REPEAT)
			return sf_err_set(g->err, SF_E_LIMIT, "grammar: line %u: a repetition count "
					  "over %u", g->line, SF_GRAMMAR_MAX_REPEAT);
	}
	*v = (uint32_t)x;
	return 0;
}

/* x{min,max} (max UINT32_MAX: unbounded) built from copies of the element that starts at
 * text position at (parsed again for each copy); g->p ends past the last copy's text. */
static int repeat(struct gp *g, const char *at, uint32_t min, uint32_t max, struct frag *f)
{
	int rc = new_frag(g, f);
	if (rc)
		return rc;
	const char *after = g->p;
	uint32_t line = g->line;
	uint32_t cur = f->start;
	uint32_t copies = max == UINT32_MAX ? min + 1 : max;
	for (uint32_t i = 0; i < copies; i++) {
		struct frag x;
		g->p = at;
		g->line = line;
		if ((rc = element(g, &x)))
			return rc;
		if (i >= min && (rc = link_eps(g, cur, f->end)))
			return rc; /* enough copies: may stop before this one */
		if ((rc = link_eps(g, cur, x.start)))
			return rc;
		if (max == UINT32_MAX && i == min && (rc = link_eps(g, x.end, x.start)))
			return rc; /* the last copy loops */
		cur = x.end;
	}
	rc = link_eps(g, cur, f->end);
	g->p = after;
	return rc;
}

/* An element and its postfix operator. */
static int postfixed(struct gp *g, struct frag *f)
{
	const char *at = g->p;
	uint32_t line = g->line;
	int rc = element(g, f);
	if (rc || g->p >= g->end)
		return rc;
	char c = *g->p;
	uint32_t min, max;
	if (c == '*') {
		min = 0;
		max = UINT32_MAX;
	} else if (c == '+') {
		min = 1;
		max = UINT32_MAX;
	} else if (c == '?') {
		min = 0;
		max = 1;
	} else if (c == '{') {
		g->p++;
		space(g, false);
		if ((rc = count(g, &min)))
			return rc;
		space(g, false);
		max = min;
		if (g->p < g->end && *g->p == ',') {
			g->p++;
			space(g, false);
			max = UINT32_MAX;
			if (g->p < g->end && *g->p != '}' && (rc = count(g, &max)))
				return rc;
			space(g, false);
		}
		if (g->p >= g->end || *g->p != '}')
			return fail(g, "a repetition {m,n} is not closed by }");
		if (max < min)
			return fail(g, "a repetition {m,n} has n < m");
	} else {
		return 0;
	}
	g->p++;
	const char *after = g->p;
	if (max == UINT32_MAX || max == 1) {
		/* *, +, ? and {m,} with small m keep the element parsed once where they can. */
		if (min <= 1) {
			struct frag r;
			if ((rc = new_frag(g, &r)))
				return rc;
			if ((rc = link_eps(g, r.start, f->start)) || (rc = link_eps(g, f->end, r.end)))
				return rc;
			if (min == 0 && (rc = link_eps(g, r.start, r.end)))
				return rc;
			if (max == UINT32_MAX && (rc = link_eps(g, f->end, f->start)))
				return rc;
			*f = r;
			goto next;
		}
	}
	/* The first parse stays as unreachable states; copies are parsed again. */
	g->line = line;
	if ((rc = repeat(g, at, min, max, f)))
		return rc;
	g->p = after;
next:
	if (g->p < g->end && (*g->p == '*' || *g->p == '+' || *g->p == '?' || *g->p == '{'))
		return fail(g, "two repetition operators in a row: put the first in ( )");
	return 0;
}

/* A sequence of elements; an empty one is epsilon. */
static int sequence(struct gp *g, bool nested, struct frag *f)
{
	int rc = new_frag(g, f);
	if (rc)
		return rc;
	uint32_t cur = f->start;
	while (g->p < g->end) {
		char c = *g->p;
		if (c == '|' || c == ')' || c == '\n' || c == '\r')
			break;
		struct frag x;
		if ((rc = postfixed(g, &x)) || (rc = link_eps(g, cur, x.start)))
			return rc;
		cur = x.end;
		space(g, nested);
	}
	return link_eps(g, cur, f->end);
}

static int alternates(struct gp *g, bool nested, struct frag *f)
{
	struct frag s;
	int rc = sequence(g, nested, &s);
	if (rc)
		return rc;
	if (g->p >= g->end || *g->p != '|') {
		*f = s;
		return 0;
	}
	if ((rc = new_frag(g, f)) || (rc = link_eps(g, f->start, s.start)) ||
	    (rc = link_eps(g, s.end, f->end)))
		return rc;
	while (g->p < g->end && *g->p == '|') {
		g->p++;
		space(g, true);
		if ((rc = sequence(g, nested, &s)) || (rc = link_eps(g, f->start, s.start)) ||
		    (rc = link_eps(g, s.end, f->end)))
			return rc;
	}
	return 0;
}

static int rule_def(struct gp *g)
{
	const char *name = g->p;
	while (g->p < g->end && word_char(*g->p))
		g->p++;
	if (g->p == name)
		return fail(g, "expected a rule name");
	uint32_t id;
	int rc = rule_id(g, name, (size_t)(g->p - name), &id);
	if (rc)
		return rc;
	struct gr_rule *r = &g->b->rules[id];
	if (r->defined)
		return sf_err_set(g->err, SF_E_RANGE, "grammar: line %u: rule %s is defined twice "
				  "(first on line %u)", g->line, r->name, r->line);
	r->defined = true;
	r->line = g->line;
	space(g, false);
	if (g->end - g->p < 3 || memcmp(g->p, "::=", 3))
		return fail(g, "expected ::= after the rule name");
	g->p += 3;
	space(g, true);
	g->b->cur_rule = id;
	struct frag f;
	if ((rc = alternates(g, false, &f)))
		return rc;
	r = &g->b->rules[id];
	if ((rc = link_eps(g, r->start, f.start)) || (rc = link_eps(g, f.end, r->final)))
		return rc;
	if (g->p < g->end && *g->p != '\n' && *g->p != '\r')
		return fail(g, *g->p == ')' ? "a ) closes no group" : "expected the end of the line");
	return 0;
}

int gr_parse(struct gr_build *b, const char *text, size_t len, struct sf_err *err)
{
	if (len > SF_GRAMMAR_MAX_TEXT)
		return sf_err_set(err, SF_E_LIMIT, "grammar: %zu bytes of text, over %u", len,
				  SF_GRAMMAR_MAX_TEXT);
	struct gp g = { .b = b, .s = text, .end = text + len, .p = text, .line = 1, .err = err };
	if (memchr(text, 0, len))
		return fail(&g, "the text holds a NUL byte");
	space(&g, true);
	while (g.p < g.end) {
		int rc = rule_def(&g);
		if (rc)
			return rc;
		space(&g, true);
	}
	return 0;
}

bool sf_grammar_text_names_tokens(const char *text, size_t len)
{
	if (!len || !memmem(text, len, "<[", 2))
		return false;
	/* The parser's lexing: comments to the line's end, literals and classes to their
	 * unescaped closer. */
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (c == '#') {
			while (i + 1 < len && text[i + 1] != '\n' && text[i + 1] != '\r')
				i++;
		} else if (c == '"' || c == '\'' || c == '[') {
			char close = c == '[' ? ']' : c;
			for (i++; i < len && text[i] != close; i++)
				if (text[i] == '\\')
					i++;
		} else if (c == '<' && i + 1 < len && text[i + 1] == '[') {
			return true;
		}
	}
	return false;
}
