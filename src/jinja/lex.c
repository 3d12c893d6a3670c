/* The lexer: template text into data and tag tokens, with Jinja's whitespace control as
 * transformers sets it (trim_blocks: a block or comment tag eats the newline after it;
 * lstrip_blocks: spaces and tabs from the line's start to a block or comment tag go; "-" strips
 * all whitespace on its side, "+" keeps it), raw blocks, and Python's string escapes. */
#include "jinja/jinja_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lexer {
	const char *s;
	size_t len, pos;
	struct jj_arena *a;
	struct jtok *t;
	size_t n, cap;
	struct sf_err *e;
	const char *line_base; /* for columns: start of the current line */
	uint32_t line;
};

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static void where(const struct lexer *L, size_t at, uint32_t *line, uint32_t *col)
{
	uint32_t ln = 1;
	size_t base = 0;
	for (size_t i = 0; i < at && i < L->len; i++)
		if (L->s[i] == '\n') {
			ln++;
			base = i + 1;
		}
	*line = ln;
	*col = (uint32_t)(at - base + 1);
}

static int fail(struct lexer *L, size_t at, const char *what)
{
	uint32_t line, col;
	where(L, at, &line, &col);
	return sf_err_set(L->e, SF_E_TEMPLATE, "template syntax error at line %u:%u: %s", line, col,
			  what);
}

static struct jtok *push(struct lexer *L, uint8_t kind, size_t at)
{
	if (L->n == L->cap) {
		size_t cap = L->cap ? L->cap * 2 : 256;
		struct jtok *nt = realloc(L->t, cap * sizeof *nt);
		if (!nt) {
			sf_err_set(L->e, SF_E_NOMEM, "out of memory lexing a template");
			return NULL;
		}
		L->t = nt;
		L->cap = cap;
	}
	struct jtok *t = &L->t[L->n++];
	memset(t, 0, sizeof *t);
	t->kind = kind;
	/* Lines advance monotonically: count from the last token's position. */
	while (L->line_base < L->s + at) {
		const char *nl = memchr(L->line_base, '\n', (size_t)(L->s + at - L->line_base));
		if (!nl)
			break;
		L->line++;
		L->line_base = nl + 1;
	}
	t->line = L->line;
	t->col = (uint32_t)(L->s + at - L->line_base + 1);
	t->p = L->s + at;
	return t;
}

static int data(struct lexer *L, size_t from, size_t to)
{
	if (to <= from)
		return 0;
	struct jtok *t = push(L, JT_DATA, from);
	if (!t)
		return SF_E_NOMEM;
	t->len = to - from;
	return 0;
}

/* Decodes a string literal's body [p, q) with Python's escapes into the arena. */
static int string_lit(struct lexer *L, size_t at, const char *p, const char *q, struct jtok *t)
{
	char *o = jj_alloc(L->a, (size_t)(q - p) + 1);
	if (!o)
		return sf_err_set(L->e, SF_E_NOMEM, "out of memory lexing a template");
	size_t n = 0;
	while (p < q) {
		if (*p != '\\' || p + 1 >= q) {
			o[n++] = *p++;
			continue;
		}
		char c = p[1];
		p += 2;
		switch (c) {
		case '\\': o[n++] = '\\'; break;
		case '\'': o[n++] = '\''; break;
		case '"': o[n++] = '"'; break;
		case 'a': o[n++] = '\a'; break;
		case 'b': o[n++] = '\b'; break;
		case 'f': o[n++] = '\f'; break;
		case 'n': o[n++] = '\n'; break;
		case 'r': o[n++] = '\r'; break;
		case 't': o[n++] = '\t'; break;
		case 'v': o[n++] = '\v'; break;
		case '\n': break;
		case 'x':
		case 'u':
		case 'U': {
			int want = c == 'x' ? 2 : c == 'u' ? 4 : 8;
			uint32_t cp = 0;
			for (int k = 0; k < want; k++) {
				char h = p < q ? *p : 0;
				int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 :
					h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
				if (d < 0)
					return fail(L, at, "truncated \\x, \\u or \\U escape in a string");
				cp = cp * 16 + (uint32_t)d;
				p++;
			}
			if (cp > 0x10ffff)
				return fail(L, at, "an escape above U+10FFFF in a string");
			n += jj_utf8_put(cp, o + n); /* never longer than the escape itself */
			break;
		}
		case 'N':
			return sf_err_set(L->e, SF_E_TEMPLATE_UNSUPPORTED,
					  "unsupported: \\N{...} escape in a string at line %u", t->line);
		default:
			if (c >= '0' && c <= '7') {
				uint32_t cp = (uint32_t)(c - '0');
				for (int k = 0; k < 2 && p < q && *p >= '0' && *p <= '7'; k++)
					cp = cp * 8 + (uint32_t)(*p++ - '0');
				n += jj_utf8_put(cp, o + n);
			} else {
				o[n++] = '\\';
				o[n++] = c;
			}
		}
	}
	o[n] = 0;
	t->p = o;
	t->len = n;
	return 0;
}

static const struct {
	const char *s;
	uint8_t kind;
} ops[] = {
	{ "**", JT_POW }, { "//", JT_FLOORDIV }, { "==", JT_EQ }, { "!=", JT_NE }, { "<=", JT_LE },
	{ ">=", JT_GE }, { "+", JT_ADD }, { "-", JT_SUB }, { "*", JT_MUL }, { "/", JT_DIV },
	{ "%", JT_MOD }, { "~", JT_TILDE }, { "(", JT_LPAREN }, { ")", JT_RPAREN },
	{ "[", JT_LBRACKET }, { "]", JT_RBRACKET }, { "{", JT_LBRACE }, { "}", JT_RBRACE },
	{ ",", JT_COMMA }, { ".", JT_DOT }, { ":", JT_COLON }, { "|", JT_PIPE }, { "=", JT_ASSIGN },
	{ "<", JT_LT }, { ">", JT_GT }, { ";", JT_SEMICOLON },
};

static bool digits_at(const char *s, size_t len, size_t *i)
{
	/* (\d+_)*\d+ */
	size_t j = *i;
	if (j >= len || s[j] < '0' || s[j] > '9')
		return false;
	while (j < len && ((s[j] >= '0' && s[j] <= '9') ||
			   (s[j] == '_' && j + 1 < len && s[j + 1] >= '0' && s[j + 1] <= '9')))
		j++;
	*i = j;
	return true;
}

static double parse_num(const char *p, size_t n, bool is_float, int64_t *iv, bool *overflow)
{
	char buf[128];
	size_t k = 0;
	for (size_t i = 0; i < n && k < sizeof buf - 1; i++)
		if (p[i] != '_')
			buf[k++] = p[i];
	buf[k] = 0;
	*overflow = false;
	if (is_float)
		return strtod(buf, NULL);
	errno = 0;
	long long v = strtoll(buf, NULL, 10);
	if (errno == ERANGE || n >= sizeof buf)
		*overflow = true;
	*iv = v;
	return 0;
}

/* The tokens of one {{ }} or {% %} tag from L->pos; stops after its end delimiter. */
static int tag(struct lexer *L, bool block, size_t open_at)
{
	const char *s = L->s;
	size_t len = L->len;
	int balance = 0;
	for (;;) {
		size_t i = L->pos;
		if (i >= len)
			return fail(L, open_at, block ? "a block tag ({%) without its %}" :
							"a variable tag ({{) without its }}");
		if (balance == 0) {
			char endc = block ? '%' : '}';
			bool minus = s[i] == '-' && i + 2 < len && s[i + 1] == endc && s[i + 2] == '}';
			bool plus = block && s[i] == '+' && i + 2 < len && s[i + 1] == endc && s[i + 2] == '}';
			if (minus || plus || (s[i] == endc && i + 1 < len && s[i + 1] == '}')) {
				if (!push(L, block ? JT_BLOCK_END : JT_VAR_END, i))
					return SF_E_NOMEM;
				size_t p = i + (minus || plus ? 3 : 2);
				if (minus)
					while (p < len && is_ws(s[p]))
						p++;
				else if (block && !plus && p < len && s[p] == '\n')
					p++; /* trim_blocks */
				L->pos = p;
				return 0;
			}
		}
		char ch = s[i];
		if (is_ws(ch)) {
			L->pos++;
			continue;
		}
		if (ch == '\'' || ch == '"') {
			size_t j = i + 1;
			while (j < len && s[j] != ch) {
				if (s[j] == '\\' && j + 1 < len)
					j++;
				j++;
			}
			if (j >= len)
				return fail(L, i, "a string without its closing quote");
			struct jtok *t = push(L, JT_STRING, i);
			if (!t)
				return SF_E_NOMEM;
			int rc = string_lit(L, i, s + i + 1, s + j, t);
			if (rc)
				return rc;
			L->pos = j + 1;
			continue;
		}
		if (ch >= '0' && ch <= '9') {
			size_t j = i;
			digits_at(s, len, &j);
			bool is_float = false;
			bool after_dot = i > 0 && s[i - 1] == '.';
			if (!after_dot) {
				size_t k = j;
				if (k + 1 < len && s[k] == '.' && s[k + 1] >= '0' && s[k + 1] <= '9') {
					k++;
					digits_at(s, len, &k);
					is_float = true;
					j = k;
				}
				if (j < len && (s[j] == 'e' || s[j] == 'E')) {
					size_t m = j + 1;
					if (m < len && (s[m] == '+' || s[m] == '-'))
						m++;
					if (digits_at(s, len, &m)) {
						is_float = true;
						j = m;
					}
				}
			}
			struct jtok *t = push(L, is_float ? JT_FLOAT : JT_INT, i);
			if (!t)
				return SF_E_NOMEM;
			bool overflow;
			t->f = parse_num(s + i, j - i, is_float, &t->i, &overflow);
			if (overflow)
				return sf_err_set(L->e, SF_E_TEMPLATE_UNSUPPORTED,
						  "unsupported: integer literal beyond 64 bits at line %u", t->line);
			t->len = j - i;
			L->pos = j;
			continue;
		}
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_') {
			size_t j = i + 1;
			while (j < len && ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
					   (s[j] >= '0' && s[j] <= '9') || s[j] == '_'))
				j++;
			struct jtok *t = push(L, JT_NAME, i);
			if (!t)
				return SF_E_NOMEM;
			t->len = j - i;
			L->pos = j;
			continue;
		}
		size_t k;
		for (k = 0; k < sizeof ops / sizeof ops[0]; k++) {
			size_t ol = strlen(ops[k].s);
			if (i + ol <= len && memcmp(s + i, ops[k].s, ol) == 0)
				break;
		}
		if (k == sizeof ops / sizeof ops[0])
			return fail(L, i, "a character that starts no token");
		uint8_t kind = ops[k].kind;
		if (kind == JT_LPAREN || kind == JT_LBRACKET || kind == JT_LBRACE) {
			balance++;
		} else if (kind == JT_RPAREN || kind == JT_RBRACKET || kind == JT_RBRACE) {
			if (balance == 0)
				return fail(L, i, "a closing bracket that closes nothing");
			balance--;
		}
		if (!push(L, kind, i))
			return SF_E_NOMEM;
		L->pos = i + strlen(ops[k].s);
	}
}

/* At s[i] == '{' and s[i+1] == '%': a raw block "{%[-+]? raw [-]?%}"? Sets *body after it. */
static bool raw_begin(const struct lexer *L, size_t i, size_t *body)
{
	const char *s = L->s;
	size_t len = L->len, j = i + 2;
	if (j < len && (s[j] == '-' || s[j] == '+'))
		j++;
	while (j < len && is_ws(s[j]))
		j++;
	if (j + 3 > len || memcmp(s + j, "raw", 3) != 0)
		return false;
	j += 3;
	if (j < len && ((s[j] >= 'a' && s[j] <= 'z') || s[j] == '_'))
		return false;
	while (j < len && is_ws(s[j]))
		j++;
	if (j + 3 <= len && s[j] == '-' && s[j + 1] == '%' && s[j + 2] == '}') {
		j += 3;
		while (j < len && is_ws(s[j]))
			j++;
	} else if (j + 2 <= len && s[j] == '%' && s[j + 1] == '}') {
		j += 2;
	} else {
		return false;
	}
	*body = j;
	return true;
}

/* The raw block's body from L->pos: data up to {% endraw %}, with its own whitespace control. */
static int raw_body(struct lexer *L, size_t open_at, bool *line_starting)
{
	const char *s = L->s;
	size_t len = L->len;
	for (size_t i = L->pos; i + 1 < len; i++) {
		if (s[i] != '{' || s[i + 1] != '%')
			continue;
		size_t j = i + 2;
		char sign = 0;
		if (j < len && (s[j] == '-' || s[j] == '+'))
			sign = s[j++];
		while (j < len && is_ws(s[j]))
			j++;
		if (j + 6 > len || memcmp(s + j, "endraw", 6) != 0)
			continue;
		j += 6;
		while (j < len && is_ws(s[j]))
			j++;
		size_t end;
		bool minus = false;
		if (j + 3 <= len && (s[j] == '-' || s[j] == '+') && s[j + 1] == '%' && s[j + 2] == '}') {
			minus = s[j] == '-';
			end = j + 3;
			if (minus)
				while (end < len && is_ws(s[end]))
					end++;
		} else if (j + 2 <= len && s[j] == '%' && s[j + 1] == '}') {
			end = j + 2;
			if (end < len && s[end] == '\n')
				end++;
		} else {
			continue;
		}
		size_t to = i;
		if (sign == '-') {
			while (to > L->pos && is_ws(s[to - 1]))
				to--;
		} else if (sign != '+') {
			size_t l = to;
			while (l > L->pos && (s[l - 1] == ' ' || s[l - 1] == '\t'))
				l--;
			if ((l > L->pos && s[l - 1] == '\n') || (l == L->pos && *line_starting))
				to = l;
		}
		int rc = data(L, L->pos, to);
		if (rc)
			return rc;
		*line_starting = s[end - 1] == '\n';
		L->pos = end;
		return 0;
	}
	return fail(L, open_at, "a raw block without its endraw");
}

int jj_lex(const char *src, size_t len, struct jj_arena *a, struct jtok **toks, size_t *n,
	   struct sf_err *e)
{
	struct lexer L = { .s = src, .len = len, .a = a, .e = e, .line_base = src, .line = 1 };
	bool line_starting = true;
	int rc = 0;
	while (L.pos < len) {
		/* The next tag opener. */
		size_t i = L.pos;
		const char *hit = NULL;
		while (i + 1 < len) {
			const char *b = memchr(src + i, '{', len - i - 1);
			if (!b)
				break;
			char k = b[1];
			if (k == '{' || k == '%' || k == '#') {
				hit = b;
				break;
			}
			i = (size_t)(b - src) + 1;
		}
		if (!hit) {
			rc = data(&L, L.pos, len);
			L.pos = len;
			break;
		}
		size_t at = (size_t)(hit - src);
		char kind = hit[1];
		char sign = at + 2 < len && (src[at + 2] == '-' || src[at + 2] == '+') ? src[at + 2] : 0;
		size_t to = at;
		if (sign == '-') {
			while (to > L.pos && is_ws(src[to - 1]))
				to--;
		} else if (sign != '+' && kind != '{') {
			/* lstrip_blocks: only spaces and tabs between the line's start and the tag. */
			size_t l = to;
			while (l > L.pos && (src[l - 1] == ' ' || src[l - 1] == '\t'))
				l--;
			if ((l > L.pos && src[l - 1] == '\n') || (l == L.pos && line_starting))
				to = l;
		}
		if ((rc = data(&L, L.pos, to)))
			break;
		size_t body = at + 2 + (sign ? 1 : 0);
		if (kind == '#') {
			const char *end = NULL;
			for (size_t j = body; j + 1 < len; j++)
				if (src[j] == '#' && src[j + 1] == '}') {
					end = src + j;
					break;
				}
			if (!end) {
				rc = fail(&L, at, "a comment ({#) without its #}");
				break;
			}
			size_t p = (size_t)(end - src) + 2;
			size_t e_at = (size_t)(end - src);
			if (e_at > body && src[e_at - 1] == '-') {
				while (p < len && is_ws(src[p]))
					p++;
			} else if (!(e_at > body && src[e_at - 1] == '+') && p < len && src[p] == '\n') {
				p++;
			}
			line_starting = src[p - 1] == '\n';
			L.pos = p;
			continue;
		}
		size_t raw_at;
		if (kind == '%' && raw_begin(&L, at, &raw_at)) {
			L.pos = raw_at;
			line_starting = src[raw_at - 1] == '\n';
			if ((rc = raw_body(&L, at, &line_starting)))
				break;
			continue;
		}
		if (!push(&L, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, at)) {
			rc = SF_E_NOMEM;
			break;
		}
		L.pos = body;
		if ((rc = tag(&L, kind == '%', at)))
			break;
		line_starting = src[L.pos - 1] == '\n';
	}
	if (!rc && !push(&L, JT_EOF, len))
		rc = SF_E_NOMEM;
	if (rc) {
		free(L.t);
		return rc;
	}
	*toks = L.t;
	*n = L.n;
	return 0;
}
