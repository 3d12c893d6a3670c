/* JSON Schema to GBNF (schema_gbnf.h says what is taken and what is refused). Each schema
 * node becomes a rule sN; fixed rules (jval, jstr, ...) write any JSON value. A $ref'd schema
 * gets its rule before its body is compiled, so recursive schemas are recursive rules. */
#include "api/schema_gbnf.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <superfluid/grammar.h>

#include "api/api_request_internal.h"

#define MAX_PROPS 1024
#define FRAC "(\".\" [0-9]{1,6})?"

static const char base_rules[] =
	"ws ::= \" \"?\n"
	"jchar ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
	"jstr ::= \"\\\"\" jchar* \"\\\"\"\n"
	"jint ::= \"-\"? (\"0\" | [1-9] [0-9]{0,14})\n"
	"jnum ::= jint (\".\" [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?\n"
	"jbool ::= \"true\" | \"false\"\n"
	"jnull ::= \"null\"\n"
	"jval ::= jobj | jarr | jstr | jnum | jbool | jnull\n"
	"jobj ::= \"{\" ws (jstr ws \":\" ws jval (ws \",\" ws jstr ws \":\" ws jval)*)? ws \"}\"\n"
	"jarr ::= \"[\" ws (jval (ws \",\" ws jval)*)? ws \"]\"\n";

struct sc {
	struct sf_buf rules;
	uint32_t n_rules;
	const json_t *root;
	struct {
		const json_t *node;
		uint32_t rule;
	} refs[SF_SCHEMA_MAX_RULES]; /* each schema node compiled, by its rule */
	uint32_t n_refs;
	struct sf_api_error *e;
	char path[SF__API_PARAM_MAX]; /* the param of the node being compiled */
	int depth;
	bool failed;
};

static int sc_fail(struct sc *c, int status, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int sc_fail(struct sc *c, int status, const char *key, const char *fmt, ...)
{
	if (c->failed)
		return -1;
	c->failed = true;
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	char param[SF__API_PARAM_MAX];
	if (key)
		sf__api_path(param, "%s.%s", c->path, key);
	else
		sf__api_path(param, "%s", c->path);
	return sf_api_fail(c->e, status, "invalid_request_error",
			   status == 413 ? "too_large" : "unsupported_schema", param, "%s: %s",
			   param, msg);
}

static int app(struct sc *c, struct sf_buf *b, const char *s, size_t n)
{
	if (sf_buf_append(b, s, n))
		return sc_fail(c, 413, NULL, "the schema's grammar grows past %u bytes",
			       (unsigned)SF_GRAMMAR_MAX_TEXT);
	return 0;
}

static int put(struct sc *c, struct sf_buf *b, const char *s) { return app(c, b, s, strlen(s)); }

static int putf(struct sc *c, struct sf_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int putf(struct sc *c, struct sf_buf *b, const char *fmt, ...)
{
	char s[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s, sizeof(s), fmt, ap);
	va_end(ap);
	return put(c, b, s);
}

/* A new rule's number (its line is written by end_rule). */
static int new_rule(struct sc *c, uint32_t *id)
{
	if (c->n_rules >= SF_SCHEMA_MAX_RULES)
		return sc_fail(c, 413, NULL, "the schema compiles to more than %d rules",
			       SF_SCHEMA_MAX_RULES);
	*id = c->n_rules++;
	return 0;
}

static int end_rule(struct sc *c, uint32_t id, struct sf_buf *body)
{
	char head[32];
	snprintf(head, sizeof(head), "s%u ::= ", id);
	if (put(c, &c->rules, head) || app(c, &c->rules, (const char *)sf_buf_head(body),
					   sf_buf_used(body)) || put(c, &c->rules, "\n"))
		return -1;
	return 0;
}

int sf_gbnf_lit(struct sf_buf *b, const char *s, size_t n)
{
	int rc = sf_buf_append(b, "\"", 1);
	for (size_t i = 0; i < n && !rc; i++) {
		unsigned char ch = (unsigned char)s[i];
		char esc[8];
		if (ch == '"' || ch == '\\')
			snprintf(esc, sizeof(esc), "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			snprintf(esc, sizeof(esc), "\\x%02x", ch);
		else
			esc[0] = (char)ch, esc[1] = 0;
		rc = sf_buf_append(b, esc, strlen(esc));
	}
	return rc || sf_buf_append(b, "\"", 1) ? -1 : 0;
}

/* s[0..n) as a GBNF literal. */
static int put_lit(struct sc *c, struct sf_buf *b, const char *s, size_t n)
{
	if (sf_gbnf_lit(b, s, n))
		return sc_fail(c, 413, NULL, "the schema's grammar grows past %u bytes",
			       (unsigned)SF_GRAMMAR_MAX_TEXT);
	return 0;
}

/* A JSON value written as compact JSON, as a GBNF literal. */
static int put_json_lit(struct sc *c, struct sf_buf *b, const json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!s)
		return sc_fail(c, 400, NULL, "a value that cannot be written as JSON");
	int rc = put_lit(c, b, s, strlen(s));
	free(s);
	return rc;
}

static int compile(struct sc *c, const json_t *s, uint32_t *rule);

/* Compiles sub-schema s found at key (a path segment under the current one) to a rule. */
static int compile_at(struct sc *c, const json_t *s, const char *key, uint32_t *rule)
{
	char saved[SF__API_PARAM_MAX];
	memcpy(saved, c->path, sizeof(saved));
	char p[SF__API_PARAM_MAX];
	sf__api_path(p, "%s.%s", c->path, key);
	memcpy(c->path, p, sizeof(p));
	int rc = compile(c, s, rule);
	memcpy(c->path, saved, sizeof(saved));
	return rc;
}

/* ---- keywords ---- */

static const char *const known[] = {
	"type", "enum", "const", "anyOf", "allOf", "$ref", "properties", "required",
	"additionalProperties", "items", "prefixItems", "minItems", "maxItems", "minLength",
	"maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
	"exclusiveMaximum", "multipleOf", "uniqueItems",
	/* annotations */
	"title", "description", "default", "examples", "$schema", "$id", "$comment", "$defs",
	"definitions", "strict", "deprecated", "readOnly", "writeOnly", "nullable",
	"$anchor", "contentMediaType", "contentEncoding",
};

static int check_keywords(struct sc *c, const json_t *s)
{
	const char *k;
	const json_t *v;
	json_object_foreach((json_t *)s, k, v) {
		bool ok = false;
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]) && !ok; i++)
			ok = !strcmp(k, known[i]);
		if (!ok) {
			char a[48];
			sf__api_ascii(k, strlen(k), false, 40, a, sizeof(a));
			return sc_fail(c, 400, a, "the JSON Schema keyword %s cannot be enforced "
				       "while sampling (supported: type, enum, const, anyOf, $ref, "
				       "properties, required, additionalProperties, items, "
				       "prefixItems, minItems, maxItems, minLength, maxLength, "
				       "pattern, format, minimum, maximum and the exclusive bounds)", a);
		}
	}
	v = json_object_get(s, "uniqueItems");
	if (v && !json_is_false(v))
		return sc_fail(c, 400, "uniqueItems", "uniqueItems cannot be enforced while "
			       "sampling");
	return 0;
}

/* A number keyword's value, if given. */
static int num_kw(struct sc *c, const json_t *s, const char *key, bool *given, double *out)
{
	const json_t *v = json_object_get(s, key);
	*given = v && !json_is_null(v);
	if (!*given)
		return 0;
	if (json_is_boolean(v)) { /* draft 4's exclusiveMinimum: true */
		*given = false;
		return 0;
	}
	if (!json_is_number(v))
		return sc_fail(c, 400, key, "must be a number");
	*out = json_number_value(v);
	if (!isfinite(*out))
		return sc_fail(c, 400, key, "must be finite");
	return 0;
}

/* A count keyword (minItems...), default def. */
static int count_kw(struct sc *c, const json_t *s, const char *key, long long def, long long *out)
{
	const json_t *v = json_object_get(s, key);
	*out = def;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return sc_fail(c, 400, key, "must be a non-negative integer");
	*out = json_integer_value(v);
	return 0;
}

/* ---- integers in [lo, hi] ---- */

/* Digits of same-length decimal strings a <= b (leading zeros allowed past the first). */
static int digits_between(struct sc *c, struct sf_buf *b, const char *a, const char *z, size_t n)
{
	if (!n)
		return put(c, b, "\"\"");
	if (a[0] == z[0]) {
		if (putf(c, b, "\"%c\"", a[0]))
			return -1;
		if (n == 1)
			return 0;
		put(c, b, " ");
		return digits_between(c, b, a + 1, z + 1, n - 1);
	}
	bool lo_zero = true, hi_nine = true;
	for (size_t i = 1; i < n; i++) {
		lo_zero &= a[i] == '0';
		hi_nine &= z[i] == '9';
	}
	if (lo_zero && hi_nine) {
		putf(c, b, "[%c-%c]", a[0], z[0]);
		return n > 1 ? putf(c, b, " [0-9]{%zu}", n - 1) : 0;
	}
	char nines[24], zeros[24];
	memset(nines, '9', n);
	memset(zeros, '0', n);
	put(c, b, "(");
	putf(c, b, "\"%c\" ", a[0]);
	digits_between(c, b, a + 1, nines, n - 1);
	if (a[0] + 1 <= z[0] - 1) {
		putf(c, b, " | [%c-%c]", a[0] + 1, z[0] - 1);
		putf(c, b, " [0-9]{%zu}", n - 1);
	}
	putf(c, b, " | \"%c\" ", z[0]);
	digits_between(c, b, zeros, z + 1, n - 1);
	return put(c, b, ")");
}

/* Non-negative integers in [lo, hi] without leading zeros, as alternatives. */
static int nonneg_range(struct sc *c, struct sf_buf *b, long long lo, long long hi)
{
	bool first = true;
	put(c, b, "(");
	while (lo <= hi && !c->failed) {
		char a[24], z[24];
		int na = snprintf(a, sizeof(a), "%lld", lo);
		long long top = 9;
		for (int i = 1; i < na; i++)
			top = top * 10 + 9;
		long long end = hi < top ? hi : top;
		snprintf(z, sizeof(z), "%lld", end);
		if (!first)
			put(c, b, " | ");
		first = false;
		digits_between(c, b, a, z, (size_t)na);
		lo = end + 1;
	}
	return put(c, b, ")");
}

/* Integers in [lo, hi] (lo <= hi, both within +-SF_SCHEMA_MAX_INT). */
static int int_range(struct sc *c, struct sf_buf *b, long long lo, long long hi)
{
	put(c, b, "(");
	bool any = false;
	if (lo < 0) {
		put(c, b, "\"-\" ");
		nonneg_range(c, b, hi < 0 ? -hi : 1, -lo);
		any = true;
	}
	if (hi >= 0) {
		if (any)
			put(c, b, " | ");
		nonneg_range(c, b, lo > 0 ? lo : 0, hi);
	}
	return put(c, b, ")");
}

static int number(struct sc *c, const json_t *s, bool integer, struct sf_buf *b)
{
	double mn = 0, mx = 0, xmn = 0, xmx = 0, mul = 0;
	bool gmn, gmx, gxmn, gxmx, gmul;
	if (num_kw(c, s, "minimum", &gmn, &mn) || num_kw(c, s, "maximum", &gmx, &mx) ||
	    num_kw(c, s, "exclusiveMinimum", &gxmn, &xmn) ||
	    num_kw(c, s, "exclusiveMaximum", &gxmx, &xmx) ||
	    num_kw(c, s, "multipleOf", &gmul, &mul))
		return -1;
	const json_t *d4 = json_object_get(s, "exclusiveMinimum");
	if (json_is_true(d4) && gmn) {
		gxmn = true, xmn = mn, gmn = false;
	}
	d4 = json_object_get(s, "exclusiveMaximum");
	if (json_is_true(d4) && gmx) {
		gxmx = true, xmx = mx, gmx = false;
	}
	if (gmul && !(integer && mul == 1))
		return sc_fail(c, 400, "multipleOf", "multipleOf cannot be enforced while sampling "
			       "(but 1 on an integer)");
	if (!gmn && !gmx && !gxmn && !gxmx)
		return put(c, b, integer ? "jint" : "jnum");
	/* The bounds as integers the output stays within: lo <= x <= hi. */
	double lo = -(double)SF_SCHEMA_MAX_INT, hi = (double)SF_SCHEMA_MAX_INT;
	if (gmn)
		lo = fmax(lo, ceil(mn));
	if (gxmn)
		lo = fmax(lo, floor(xmn) + 1);
	if (gmx)
		hi = fmin(hi, floor(mx));
	if (gxmx)
		hi = fmin(hi, ceil(xmx) - 1);
	if (lo > hi)
		return sc_fail(c, 400, gmn ? "minimum" : "exclusiveMinimum",
			       "the bounds leave no %s to write", integer ? "integer" : "number "
			       "with an integer part");
	long long l = (long long)lo, h = (long long)hi;
	if (integer)
		return int_range(c, b, l, h);
	/* A number: its integer part k in [l, h] where k + (or -) a fraction stays in bounds:
	 * non-negative ones with a fraction when k < h, negative ones when -k > l. */
	put(c, b, "(");
	bool any = false;
	if (l < 0) {
		long long nlo = h < 0 ? -h : 1, nhi = -l; /* magnitudes */
		put(c, b, "\"-\" (");
		if (nlo <= nhi - 1) {
			nonneg_range(c, b, nlo, nhi - 1);
			put(c, b, " " FRAC " | ");
		}
		nonneg_range(c, b, nhi, nhi);
		put(c, b, ")");
		any = true;
	}
	if (h >= 0) {
		long long plo = l > 0 ? l : 0;
		if (any)
			put(c, b, " | ");
		if (plo <= h - 1) {
			nonneg_range(c, b, plo, h - 1);
			put(c, b, " " FRAC " | ");
		}
		nonneg_range(c, b, h, h);
	}
	return put(c, b, ")");
}

/* ---- strings ---- */

static const struct {
	const char *name, *gbnf;
} formats[] = {
	{ "date", "[1-9] [0-9]{3} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | \"1\" [0-9] | "
		  "\"2\" [0-8])" },
	{ "time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" "
		  "[0-9]{1,6})? (\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])" },
	{ "date-time", "[1-9] [0-9]{3} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | \"1\" "
		       "[0-9] | \"2\" [0-8]) \"T\" ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] "
		       "\":\" [0-5] [0-9] (\".\" [0-9]{1,6})? (\"Z\" | [+-] ([01] [0-9] | \"2\" "
		       "[0-3]) \":\" [0-5] [0-9])" },
	{ "uuid", "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" "
		  "[0-9a-f]{12}" },
	{ "email", "[a-z0-9] [a-z0-9._+]{0,30} [a-z0-9] \"@\" [a-z0-9]{1,30} (\".\" "
		   "[a-z]{2,10}){1,3}" },
	{ "ipv4", "([0-9] | [1-9] [0-9] | \"1\" [0-9]{2} | \"2\" [0-4] [0-9] | \"25\" [0-5]) "
		  "(\".\" ([0-9] | [1-9] [0-9] | \"1\" [0-9]{2} | \"2\" [0-4] [0-9] | \"25\" "
		  "[0-5])){3}" },
	{ "hostname", "[a-z0-9]{1,30} (\".\" [a-z0-9]{1,30}){0,4}" },
};

static int string(struct sc *c, const json_t *s, struct sf_buf *b)
{
	long long mn, mx;
	if (count_kw(c, s, "minLength", 0, &mn) || count_kw(c, s, "maxLength", -1, &mx))
		return -1;
	const json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
	bool lens = json_object_get(s, "minLength") || json_object_get(s, "maxLength");
	if ((pat || fmt) && lens)
		return sc_fail(c, 400, pat ? "pattern" : "format", "a %s with minLength or maxLength "
			       "cannot be enforced while sampling", pat ? "pattern" : "format");
	if (pat && fmt)
		return sc_fail(c, 400, "format", "a format with a pattern cannot be enforced while "
			       "sampling");
	if (pat) {
		if (!json_is_string(pat))
			return sc_fail(c, 400, "pattern", "must be a string");
		char why[160];
		put(c, b, "\"\\\"\" ");
		if (sf_regex_gbnf(json_string_value(pat), json_string_length(pat), true, b, why,
				  sizeof(why)))
			return sc_fail(c, 400, "pattern", "%s", why);
		return put(c, b, " \"\\\"\"");
	}
	if (fmt) {
		if (!json_is_string(fmt))
			return sc_fail(c, 400, "format", "must be a string");
		for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
			if (!strcmp(formats[i].name, json_string_value(fmt)))
				return putf(c, b, "\"\\\"\" ") || put(c, b, formats[i].gbnf) ||
				       put(c, b, " \"\\\"\"");
		char a[48];
		sf__api_ascii(json_string_value(fmt), json_string_length(fmt), true, 40, a,
			      sizeof(a));
		return sc_fail(c, 400, "format", "the format %s cannot be enforced while sampling "
			       "(known: date, time, date-time, uuid, email, ipv4, hostname)", a);
	}
	if (mx >= 0 && mx < mn)
		return sc_fail(c, 400, "maxLength", "maxLength is less than minLength");
	if (mn > SF_GRAMMAR_MAX_REPEAT || mx > SF_GRAMMAR_MAX_REPEAT)
		return sc_fail(c, 400, mn > SF_GRAMMAR_MAX_REPEAT ? "minLength" : "maxLength",
			       "a length past %d cannot be enforced while sampling",
			       SF_GRAMMAR_MAX_REPEAT);
	if (!lens)
		return put(c, b, "jstr");
	if (mx < 0)
		return putf(c, b, "\"\\\"\" jchar{%lld,} \"\\\"\"", mn);
	return putf(c, b, "\"\\\"\" jchar{%lld,%lld} \"\\\"\"", mn, mx);
}

/* ---- arrays ---- */

static int array(struct sc *c, const json_t *s, struct sf_buf *b)
{
	long long mn, mx;
	if (count_kw(c, s, "minItems", 0, &mn) || count_kw(c, s, "maxItems", -1, &mx))
		return -1;
	if (mx >= 0 && mx < mn)
		return sc_fail(c, 400, "maxItems", "maxItems is less than minItems");
	if (mn > SF_GRAMMAR_MAX_REPEAT)
		return sc_fail(c, 400, "minItems", "past %d cannot be enforced while sampling",
			       SF_GRAMMAR_MAX_REPEAT);
	if (mx > SF_GRAMMAR_MAX_REPEAT)
		mx = SF_GRAMMAR_MAX_REPEAT; /* fewer is still valid */
	const json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s,
										 "prefixItems");
	if (prefix) {
		if (!json_is_array(prefix))
			return sc_fail(c, 400, "prefixItems", "must be an array of schemas");
		size_t n = json_array_size(prefix);
		if ((long long)n < mn || (mx >= 0 && (long long)n > mx))
			return sc_fail(c, 400, "prefixItems", "a tuple whose length is not within "
				       "minItems and maxItems cannot be enforced while sampling");
		put(c, b, "\"[\" ws");
		for (size_t i = 0; i < n && !c->failed; i++) {
			char key[48];
			snprintf(key, sizeof(key), "prefixItems[%zu]", i);
			uint32_t r;
			if (compile_at(c, json_array_get(prefix, i), key, &r))
				return -1;
			putf(c, b, "%s s%u", i ? " ws \",\" ws" : "", r);
		}
		return put(c, b, " ws \"]\"");
	}
	if (items && json_is_false(items)) {
		if (mn > 0)
			return sc_fail(c, 400, "items", "items false with minItems leaves no array");
		return put(c, b, "\"[\" ws \"]\"");
	}
	char item[24] = "jval";
	if (items && !json_is_true(items)) {
		if (json_is_array(items))
			return sc_fail(c, 400, "items", "an array of item schemas (draft 4 tuples): "
				       "use prefixItems");
		uint32_t r;
		if (compile_at(c, items, "items", &r))
			return -1;
		snprintf(item, sizeof(item), "s%u", r);
	}
	if (mx == 0)
		return put(c, b, "\"[\" ws \"]\"");
	put(c, b, "\"[\" ws ");
	if (!mn)
		put(c, b, "(");
	putf(c, b, "%s (ws \",\" ws %s)", item, item);
	long long m1 = mn > 0 ? mn - 1 : 0;
	if (mx < 0)
		putf(c, b, "{%lld,}", m1);
	else
		putf(c, b, "{%lld,%lld}", m1, mx - 1);
	if (!mn)
		put(c, b, ")?");
	return put(c, b, " ws \"]\"");
}

/* ---- objects ---- */

static int object(struct sc *c, const json_t *s, struct sf_buf *b)
{
	const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
	const json_t *addl = json_object_get(s, "additionalProperties");
	if (props && !json_is_object(props))
		return sc_fail(c, 400, "properties", "must be an object of schemas");
	if (req && !json_is_array(req))
		return sc_fail(c, 400, "required", "must be an array of names");
	if (addl && !json_is_boolean(addl) && !json_is_object(addl))
		return sc_fail(c, 400, "additionalProperties", "must be a boolean or a schema");
	size_t np = props ? json_object_size(props) : 0, nr = req ? json_array_size(req) : 0;
	if (np > MAX_PROPS || nr > MAX_PROPS)
		return sc_fail(c, 413, np > MAX_PROPS ? "properties" : "required",
			       "more than %d names", MAX_PROPS);
	for (size_t i = 0; i < nr; i++)
		if (!json_is_string(json_array_get(req, i)))
			return sc_fail(c, 400, "required", "must be an array of names");
	if (!np && !nr) {
		if (addl && json_is_false(addl))
			return put(c, b, "\"{\" ws \"}\"");
		if (!addl || json_is_true(addl))
			return put(c, b, "jobj");
		uint32_t r;
		if (compile_at(c, addl, "additionalProperties", &r))
			return -1;
		return putf(c, b, "\"{\" ws (jstr ws \":\" ws s%u (ws \",\" ws jstr ws \":\" ws "
			    "s%u)*)? ws \"}\"", r, r);
	}
	/* Each property a rule "key": value; required first (in the order required gives, and
	 * required names not under properties with any value), then the optional ones, each
	 * after a comma once something was written. */
	uint32_t *kv = calloc(np + nr + 1, sizeof(*kv));
	bool *is_req = calloc(np + nr + 1, sizeof(*is_req));
	uint32_t nreq = 0, nopt = 0, *reqs = calloc(np + nr + 1, sizeof(*reqs)),
		 *opts = calloc(np + nr + 1, sizeof(*opts));
	if (!kv || !is_req || !reqs || !opts) {
		free(kv), free(is_req), free(reqs), free(opts);
		return sf__api_nomem(c->e);
	}
	int rc = 0;
	for (size_t i = 0; i < nr && !rc; i++) {
		const char *name = json_string_value(json_array_get(req, i));
		bool dup = false;
		for (size_t j = 0; j < i; j++)
			dup |= !strcmp(name, json_string_value(json_array_get(req, j)));
		if (dup)
			continue;
		const json_t *sub = props ? json_object_get(props, name) : NULL;
		struct sf_buf kb;
		sf_buf_init(&kb, SF_GRAMMAR_MAX_TEXT);
		json_t *key = json_string(name);
		if (!key) {
			sf_buf_free(&kb);
			rc = sf__api_nomem(c->e);
			break;
		}
		uint32_t r = 0, id = 0;
		char seg[80];
		char a[48];
		sf__api_ascii(name, strlen(name), false, 40, a, sizeof(a));
		snprintf(seg, sizeof(seg), "properties.%s", a);
		rc = (sub && compile_at(c, sub, seg, &r)) || new_rule(c, &id) ||
		     put_json_lit(c, &kb, key) || put(c, &kb, " ws \":\" ws ") ||
		     (sub ? putf(c, &kb, "s%u", r) : put(c, &kb, "jval")) || end_rule(c, id, &kb);
		json_decref(key);
		sf_buf_free(&kb);
		reqs[nreq++] = id;
	}
	const char *name;
	const json_t *sub;
	if (props)
		json_object_foreach((json_t *)props, name, sub) {
			if (rc)
				break;
			bool required = false;
			for (size_t j = 0; j < nr && !required; j++)
				required = !strcmp(name, json_string_value(json_array_get(req, j)));
			if (required)
				continue;
			struct sf_buf kb;
			sf_buf_init(&kb, SF_GRAMMAR_MAX_TEXT);
			json_t *key = json_string(name);
			if (!key) {
				sf_buf_free(&kb);
				rc = sf__api_nomem(c->e);
				break;
			}
			uint32_t r = 0, id = 0;
			char seg[80], a[48];
			sf__api_ascii(name, strlen(name), false, 40, a, sizeof(a));
			snprintf(seg, sizeof(seg), "properties.%s", a);
			rc = compile_at(c, sub, seg, &r) || new_rule(c, &id) ||
			     put_json_lit(c, &kb, key) || put(c, &kb, " ws \":\" ws ") ||
			     putf(c, &kb, "s%u", r) || end_rule(c, id, &kb);
			json_decref(key);
			sf_buf_free(&kb);
			opts[nopt++] = id;
		}
	if (!rc) {
		put(c, b, "\"{\" ws ");
		for (uint32_t i = 0; i < nreq; i++)
			putf(c, b, "%ss%u", i ? " ws \",\" ws " : "", reqs[i]);
		if (nreq) {
			for (uint32_t i = 0; i < nopt; i++)
				putf(c, b, " (ws \",\" ws s%u)?", opts[i]);
		} else if (nopt) {
			/* The first optional one written starts without a comma: tails[i] is
			 * optionals i.. each after a comma. */
			uint32_t next = 0;
			for (uint32_t i = nopt; i-- > 1 && !rc;) {
				struct sf_buf tb;
				sf_buf_init(&tb, SF_GRAMMAR_MAX_TEXT);
				uint32_t id = 0;
				rc = new_rule(c, &id) ||
				     putf(c, &tb, "(ws \",\" ws s%u)?", opts[i]) ||
				     (next && putf(c, &tb, " s%u", next)) || end_rule(c, id, &tb);
				sf_buf_free(&tb);
				kv[i] = id;
				next = id;
			}
			put(c, b, "(");
			for (uint32_t i = 0; i < nopt; i++) {
				putf(c, b, "%ss%u", i ? " | " : "", opts[i]);
				if (i + 1 < nopt)
					putf(c, b, " s%u", kv[i + 1]);
			}
			put(c, b, ")?");
		}
		put(c, b, " ws \"}\"");
	}
	free(kv), free(is_req), free(reqs), free(opts);
	return rc || c->failed ? -1 : 0;
}

/* ---- a schema ---- */

static int resolve_ref(struct sc *c, const json_t *ref, const json_t **out)
{
	if (!json_is_string(ref))
		return sc_fail(c, 400, "$ref", "must be a string");
	const char *r = json_string_value(ref);
	if (!strcmp(r, "#")) {
		*out = c->root;
		return 0;
	}
	const char *name = NULL;
	const json_t *defs = NULL;
	if (!strncmp(r, "#/$defs/", 8)) {
		defs = json_object_get(c->root, "$defs");
		name = r + 8;
	} else if (!strncmp(r, "#/definitions/", 14)) {
		defs = json_object_get(c->root, "definitions");
		name = r + 14;
	}
	char a[80];
	sf__api_ascii(r, strlen(r), true, 60, a, sizeof(a));
	if (!name || strchr(name, '/') || strchr(name, '~'))
		return sc_fail(c, 400, "$ref", "the reference %s is not supported (only \"#\", "
			       "\"#/$defs/NAME\" and \"#/definitions/NAME\")", a);
	*out = defs ? json_object_get(defs, name) : NULL;
	if (!*out)
		return sc_fail(c, 400, "$ref", "the reference %s names no definition", a);
	return 0;
}

/* The body of a schema's rule for one type (or none given: inferred, else any value). */
static int typed(struct sc *c, const json_t *s, const char *type, struct sf_buf *b)
{
	if (!type) {
		if (json_object_get(s, "properties") || json_object_get(s, "required") ||
		    json_object_get(s, "additionalProperties"))
			type = "object";
		else if (json_object_get(s, "items") || json_object_get(s, "prefixItems") ||
			 json_object_get(s, "minItems") || json_object_get(s, "maxItems"))
			type = "array";
		else if (json_object_get(s, "pattern") || json_object_get(s, "format") ||
			 json_object_get(s, "minLength") || json_object_get(s, "maxLength"))
			type = "string";
		else if (json_object_get(s, "minimum") || json_object_get(s, "maximum") ||
			 json_object_get(s, "exclusiveMinimum") ||
			 json_object_get(s, "exclusiveMaximum"))
			type = "number";
		else
			return put(c, b, "jval");
	}
	if (!strcmp(type, "object"))
		return object(c, s, b);
	if (!strcmp(type, "array"))
		return array(c, s, b);
	if (!strcmp(type, "string"))
		return string(c, s, b);
	if (!strcmp(type, "integer") || !strcmp(type, "number"))
		return number(c, s, type[0] == 'i', b);
	if (!strcmp(type, "boolean"))
		return put(c, b, "jbool");
	if (!strcmp(type, "null"))
		return put(c, b, "jnull");
	char a[48];
	sf__api_ascii(type, strlen(type), true, 40, a, sizeof(a));
	return sc_fail(c, 400, "type", "%s is not a JSON Schema type", a);
}

static int body_of(struct sc *c, const json_t *s, struct sf_buf *b)
{
	const json_t *v;
	if ((v = json_object_get(s, "const")))
		return put_json_lit(c, b, v);
	if ((v = json_object_get(s, "enum"))) {
		if (!json_is_array(v) || !json_array_size(v))
			return sc_fail(c, 400, "enum", "must be a non-empty array");
		put(c, b, "(");
		for (size_t i = 0; i < json_array_size(v) && !c->failed; i++) {
			if (i)
				put(c, b, " | ");
			put_json_lit(c, b, json_array_get(v, i));
		}
		return put(c, b, ")");
	}
	if ((v = json_object_get(s, "anyOf")) || (v = json_object_get(s, "allOf"))) {
		const char *kw = json_object_get(s, "anyOf") ? "anyOf" : "allOf";
		if (!json_is_array(v) || !json_array_size(v))
			return sc_fail(c, 400, kw, "must be a non-empty array of schemas");
		if (kw[1] == 'l' && json_array_size(v) != 1)
			return sc_fail(c, 400, kw, "allOf of more than one schema cannot be enforced "
				       "while sampling");
		put(c, b, "(");
		for (size_t i = 0; i < json_array_size(v) && !c->failed; i++) {
			char key[48];
			snprintf(key, sizeof(key), "%s[%zu]", kw, i);
			uint32_t r;
			if (compile_at(c, json_array_get(v, i), key, &r))
				return -1;
			putf(c, b, "%ss%u", i ? " | " : "", r);
		}
		return put(c, b, ")");
	}
	if ((v = json_object_get(s, "$ref"))) {
		const json_t *t;
		if (resolve_ref(c, v, &t))
			return -1;
		uint32_t r;
		if (compile_at(c, t, "$ref", &r))
			return -1;
		return putf(c, b, "s%u", r);
	}
	v = json_object_get(s, "type");
	if (!v || json_is_string(v))
		return typed(c, s, v ? json_string_value(v) : NULL, b);
	if (!json_is_array(v) || !json_array_size(v))
		return sc_fail(c, 400, "type", "must be a type's name or an array of them");
	put(c, b, "(");
	for (size_t i = 0; i < json_array_size(v) && !c->failed; i++) {
		const json_t *t = json_array_get(v, i);
		if (!json_is_string(t))
			return sc_fail(c, 400, "type", "must be a type's name or an array of them");
		if (i)
			put(c, b, " | ");
		if (typed(c, s, json_string_value(t), b))
			return -1;
	}
	return put(c, b, ")");
}

static int compile(struct sc *c, const json_t *s, uint32_t *rule)
{
	if (c->failed)
		return -1;
	for (uint32_t i = 0; i < c->n_refs; i++)
		if (c->refs[i].node == s) {
			*rule = c->refs[i].rule;
			return 0;
		}
	if (c->depth >= SF_SCHEMA_MAX_DEPTH)
		return sc_fail(c, 413, NULL, "schemas nested past %d", SF_SCHEMA_MAX_DEPTH);
	if (json_is_true(s) || (json_is_object(s) && !json_object_size(s))) {
		struct sf_buf b;
		sf_buf_init(&b, 16);
		int rc = new_rule(c, rule) || put(c, &b, "jval") || end_rule(c, *rule, &b);
		sf_buf_free(&b);
		return rc ? -1 : 0;
	}
	if (json_is_false(s))
		return sc_fail(c, 400, NULL, "the schema false allows no value");
	if (!json_is_object(s))
		return sc_fail(c, 400, NULL, "a schema must be an object or a boolean");
	if (check_keywords(c, s) || new_rule(c, rule))
		return -1;
	/* Known before its body, for $refs back to it. */
	if (c->n_refs < SF_SCHEMA_MAX_RULES)
		c->refs[c->n_refs++] = (typeof(c->refs[0])){ s, *rule };
	c->depth++;
	struct sf_buf b;
	sf_buf_init(&b, SF_GRAMMAR_MAX_TEXT);
	int rc = body_of(c, s, &b);
	if (!rc && !c->failed)
		rc = end_rule(c, *rule, &b);
	sf_buf_free(&b);
	c->depth--;
	return rc || c->failed ? -1 : 0;
}

int sf_schemas_gbnf(const json_t *const *schemas, const char *const *params, size_t n,
		    struct sf_buf *out, uint32_t *roots, struct sf_api_error *e)
{
	struct sc *c = calloc(1, sizeof(*c));
	if (!c)
		return sf__api_nomem(e);
	sf_buf_init(&c->rules, SF_GRAMMAR_MAX_TEXT);
	c->e = e;
	int rc = put(c, &c->rules, base_rules);
	for (size_t i = 0; i < n && !rc; i++) {
		c->root = schemas[i];
		sf__api_path(c->path, "%s", params[i]);
		rc = compile(c, schemas[i], &roots[i]);
	}
	if (!rc && sf_buf_append(out, sf_buf_head(&c->rules), sf_buf_used(&c->rules)))
		rc = sf_api_fail(e, 413, "invalid_request_error", "too_large", params[0],
				 "%s: the grammar grows past %u bytes", params[0],
				 (unsigned)SF_GRAMMAR_MAX_TEXT);
	sf_buf_free(&c->rules);
	free(c);
	return rc ? -1 : 0;
}

int sf_schema_gbnf(const json_t *schema, const char *param, char **out, struct sf_api_error *e)
{
	*out = NULL;
	struct sf_buf b;
	sf_buf_init(&b, SF_GRAMMAR_MAX_TEXT + 64);
	uint32_t root;
	char line[48];
	int rc = sf_schemas_gbnf(&schema, &param, 1, &b, &root, e);
	if (!rc) {
		snprintf(line, sizeof(line), "root ::= s%u\n", root);
		if (sf_buf_append(&b, line, strlen(line) + 1) || !(*out = malloc(sf_buf_used(&b))))
			rc = sf__api_nomem(e);
		else
			memcpy(*out, sf_buf_head(&b), sf_buf_used(&b));
	}
	sf_buf_free(&b);
	return rc ? -1 : 0;
}

int sf_json_object_gbnf(char **out)
{
	size_t n = sizeof(base_rules) - 1;
	static const char root[] = "root ::= jobj\n";
	*out = malloc(n + sizeof(root));
	if (!*out)
		return -1;
	memcpy(*out, base_rules, n);
	memcpy(*out + n, root, sizeof(root));
	return 0;
}
