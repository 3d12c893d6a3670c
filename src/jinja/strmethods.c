/* Python's str methods as templates call them: strip family (Unicode whitespace or given
 * characters), split/rsplit with maxsplit, startswith/endswith with tuples, replace, find, count,
 * case changes (ASCII, Latin-1, Greek and Cyrillic letters), join, format ({} {0} {name}). */
#include "jinja/jinja_int.h"

#include <stdlib.h>
#include <string.h>

int jj_str_method(struct jj_ctx *c, struct jv self, const char *name, const struct jj_args *a,
		  struct jv *out);
int jj_case(struct jj_ctx *c, struct jv s, int mode, struct jv *out);
int jj_strip(struct jj_ctx *c, struct jv s, const struct jv *chars, int sides, struct jv *out);
int jj_replace(struct jj_ctx *c, struct jv s, struct jv old, struct jv new_, int64_t count,
	       struct jv *out);

uint32_t jj_lower_cp(uint32_t c);
uint32_t jj_upper_cp(uint32_t c);

uint32_t jj_lower_cp(uint32_t c)
{
	if ((c >= 'A' && c <= 'Z') || (c >= 0xc0 && c <= 0xde && c != 0xd7) ||
	    (c >= 0x391 && c <= 0x3ab && c != 0x3a2) || (c >= 0x410 && c <= 0x42f))
		return c + 32;
	if (c >= 0x400 && c <= 0x40f)
		return c + 80;
	if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x138 && c != 0x149 && c != 0x178 &&
	    !((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)))
		return c | 1;
	if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) && (c & 1))
		return c + 1;
	return c;
}

uint32_t jj_upper_cp(uint32_t c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 0xe0 && c <= 0xfe && c != 0xf7) ||
	    (c >= 0x3b1 && c <= 0x3cb && c != 0x3c2) || (c >= 0x430 && c <= 0x44f))
		return c - 32;
	if (c >= 0x450 && c <= 0x45f)
		return c - 80;
	if (c == 0xff)
		return 0x178;
	if (c == 0x3c2)
		return 0x3a3;
	if (c >= 0x100 && c <= 0x17f && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17f &&
	    !((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)))
		return c & ~1u;
	if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) && !(c & 1))
		return c - 1;
	return c;
}

static bool is_alpha_cp(uint32_t c)
{
	return jj_lower_cp(c) != c || jj_upper_cp(c) != c || (c >= 0xaa && c != 0xd7 && c != 0xf7 && c > 0xbf);
}

/* mode: 0 lower, 1 upper, 2 capitalize, 3 str.title (letters after a non-letter), 4 Jinja's
 * title filter. */
int jj_case(struct jj_ctx *c, struct jv s, int mode, struct jv *out)
{
	struct jj_buf b = { 0 };
	size_t i = 0;
	bool prev_cased = false, first = true;
	int rc = 0;
	while (!rc && i < s.s->len) {
		uint32_t cp = jj_utf8_next(s.s->s, s.s->len, &i);
		uint32_t r = cp;
		bool up = mode == 1 || ((mode == 2 || mode == 4) && first) || (mode == 3 && !prev_cased);
		if (cp == 0xdf && up) { /* ß has no one-letter capital: SS (Ss when capitalized) */
			rc = jj_buf_add(c, &b, mode == 1 ? "SS" : "Ss", 2);
			prev_cased = true;
			first = false;
			continue;
		}
		switch (mode) {
		case 0: r = jj_lower_cp(cp); break;
		case 1: r = jj_upper_cp(cp); break;
		case 2: r = first ? jj_upper_cp(cp) : jj_lower_cp(cp); break;
		case 3: r = prev_cased ? jj_lower_cp(cp) : jj_upper_cp(cp); break;
		case 4: r = first ? jj_upper_cp(cp) : jj_lower_cp(cp); break;
		}
		prev_cased = is_alpha_cp(cp);
		if (mode == 4) { /* Jinja's title: a word starts after - ( { [ < or whitespace */
			first = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || jj_is_space(cp);
			char u4[4];
			rc = jj_buf_add(c, &b, u4, jj_utf8_put(r, u4));
			continue;
		}
		first = false;
		char u[4];
		rc = jj_buf_add(c, &b, u, jj_utf8_put(r, u));
	}
	if (rc) {
		free(b.p);
		return rc;
	}
	return jj_buf_to_str(c, &b, out);
}

static bool in_chars(uint32_t cp, const struct jv *chars)
{
	if (!chars || chars->kind == JV_NONE)
		return jj_is_space(cp);
	size_t i = 0;
	while (i < chars->s->len)
		if (jj_utf8_next(chars->s->s, chars->s->len, &i) == cp)
			return true;
	return false;
}

/* sides: 1 left, 2 right, 3 both. */
int jj_strip(struct jj_ctx *c, struct jv s, const struct jv *chars, int sides, struct jv *out)
{
	if (chars && chars->kind != JV_NONE && chars->kind != JV_STR)
		return jj_err(c, SF_E_TEMPLATE, "strip arg must be None or str");
	size_t lo = 0, hi = s.s->len;
	if (sides & 1)
		while (lo < hi) {
			size_t j = lo;
			if (!in_chars(jj_utf8_next(s.s->s, hi, &j), chars))
				break;
			lo = j;
		}
	if (sides & 2)
		while (hi > lo) {
			size_t st = hi - 1;
			while (st > lo && ((unsigned char)s.s->s[st] & 0xc0) == 0x80)
				st--;
			size_t j = st;
			if (!in_chars(jj_utf8_next(s.s->s, hi, &j), chars))
				break;
			hi = st;
		}
	return jv_str(c, s.s->s + lo, hi - lo, out);
}

int jj_replace(struct jj_ctx *c, struct jv s, struct jv old, struct jv new_, int64_t count,
	       struct jv *out)
{
	struct jj_buf b = { 0 };
	int rc = 0;
	const char *p = s.s->s, *end = p + s.s->len;
	if (old.s->len == 0) { /* inserts new before every character and at the end */
		size_t i = 0;
		while (!rc && i <= s.s->len) {
			if (count >= 0 && count-- == 0) {
				rc = jj_buf_add(c, &b, s.s->s + i, s.s->len - i);
				break;
			}
			rc = jj_buf_add(c, &b, new_.s->s, new_.s->len);
			if (i == s.s->len)
				break;
			size_t at = i;
			jj_utf8_next(s.s->s, s.s->len, &i);
			if (!rc)
				rc = jj_buf_add(c, &b, s.s->s + at, i - at);
		}
	} else {
		while (!rc && p < end) {
			const char *hit = count != 0 ? memmem(p, (size_t)(end - p), old.s->s, old.s->len) : NULL;
			if (!hit) {
				rc = jj_buf_add(c, &b, p, (size_t)(end - p));
				break;
			}
			rc = jj_buf_add(c, &b, p, (size_t)(hit - p));
			if (!rc)
				rc = jj_buf_add(c, &b, new_.s->s, new_.s->len);
			p = hit + old.s->len;
			if (count > 0)
				count--;
		}
	}
	if (rc) {
		free(b.p);
		return rc;
	}
	return jj_buf_to_str(c, &b, out);
}

static int push_piece(struct jj_ctx *c, struct jv list, const char *p, size_t n, bool front)
{
	struct jv s;
	if (jv_str(c, p, n, &s))
		return c->rc;
	if (jv_list_push(c, list, s))
		return c->rc;
	if (front) { /* rsplit collects from the right: rotate the new piece to the front */
		struct jlist *l = list.l;
		struct jv last = l->v[l->n - 1];
		memmove(l->v + 1, l->v, (l->n - 1) * sizeof *l->v);
		l->v[0] = last;
		if (jj_step(c, l->n / 16))
			return c->rc;
	}
	return 0;
}

static int split(struct jj_ctx *c, struct jv s, const struct jv *sep, int64_t maxsplit, bool right,
		 struct jv *out)
{
	if (jv_list_new(c, 0, false, out))
		return c->rc;
	const char *p = s.s->s;
	size_t len = s.s->len;
	if (sep && sep->kind == JV_STR) {
		if (sep->s->len == 0)
			return jj_err(c, SF_E_TEMPLATE, "empty separator");
		size_t sl = sep->s->len;
		if (!right) {
			size_t at = 0;
			while (maxsplit != 0) {
				const char *hit = memmem(p + at, len - at, sep->s->s, sl);
				if (!hit)
					break;
				if (push_piece(c, *out, p + at, (size_t)(hit - p) - at, false))
					return c->rc;
				at = (size_t)(hit - p) + sl;
				maxsplit--;
			}
			return push_piece(c, *out, p + at, len - at, false);
		}
		size_t end = len;
		while (maxsplit != 0 && end >= sl) {
			size_t k = end - sl + 1, hit = SIZE_MAX;
			while (k-- > 0)
				if (memcmp(p + k, sep->s->s, sl) == 0) {
					hit = k;
					break;
				}
			if (hit == SIZE_MAX)
				break;
			if (push_piece(c, *out, p + hit + sl, end - hit - sl, true))
				return c->rc;
			end = hit;
			maxsplit--;
		}
		return push_piece(c, *out, p, end, true);
	}
	if (sep && sep->kind != JV_NONE)
		return jj_err(c, SF_E_TEMPLATE, "must be str or None, not %s", jv_type_name(*sep));
	/* Runs of whitespace; empty pieces never appear. */
	if (!right) {
		size_t i = 0;
		for (;;) {
			size_t j = i;
			while (i < len) {
				j = i;
				if (!jj_is_space(jj_utf8_next(p, len, &j)))
					break;
				i = j;
			}
			if (i >= len)
				return 0;
			if (maxsplit == 0) {
				size_t e = len; /* the rest, trailing whitespace stripped */
				while (e > i) {
					size_t st = e - 1;
					while (st > i && ((unsigned char)p[st] & 0xc0) == 0x80)
						st--;
					size_t q = st;
					if (!jj_is_space(jj_utf8_next(p, len, &q)))
						break;
					e = st;
				}
				return push_piece(c, *out, p + i, e - i, false);
			}
			size_t start = i;
			while (i < len) {
				j = i;
				if (jj_is_space(jj_utf8_next(p, len, &j)))
					break;
				i = j;
			}
			if (push_piece(c, *out, p + start, i - start, false))
				return c->rc;
			maxsplit--;
		}
	}
	return jj_err(c, SF_E_TEMPLATE_UNSUPPORTED, "unsupported: rsplit without a separator");
}

static bool affix(struct jv s, struct jv a, bool end)
{
	if (a.s->len > s.s->len)
		return false;
	return memcmp(s.s->s + (end ? s.s->len - a.s->len : 0), a.s->s, a.s->len) == 0;
}

static int format(struct jj_ctx *c, struct jv s, const struct jj_args *a, struct jv *out)
{
	struct jj_buf b = { 0 };
	const char *p = s.s->s, *end = p + s.s->len;
	size_t auto_i = 0;
	int rc = 0;
	while (!rc && p < end) {
		if (*p == '{' && p + 1 < end && p[1] == '{') {
			rc = jj_buf_addc(c, &b, '{');
			p += 2;
		} else if (*p == '}' && p + 1 < end && p[1] == '}') {
			rc = jj_buf_addc(c, &b, '}');
			p += 2;
		} else if (*p == '{') {
			const char *q = memchr(p, '}', (size_t)(end - p));
			if (!q) {
				rc = jj_err(c, SF_E_TEMPLATE, "Single '{' encountered in format string");
				break;
			}
			const char *f = p + 1;
			size_t fl = (size_t)(q - f);
			if (memchr(f, ':', fl) || memchr(f, '!', fl) || memchr(f, '.', fl) || memchr(f, '[', fl)) {
				rc = jj_err(c, SF_E_TEMPLATE_UNSUPPORTED,
					    "unsupported: format specs in str.format");
				break;
			}
			const struct jv *v = NULL;
			if (fl == 0) {
				v = auto_i < a->n ? &a->v[auto_i] : NULL;
				auto_i++;
			} else if (*f >= '0' && *f <= '9') {
				size_t k = (size_t)strtoul(f, NULL, 10);
				v = k < a->n ? &a->v[k] : NULL;
			} else {
				for (size_t k = 0; k < a->n_kw; k++)
					if (strlen(a->kw_names[k]) == fl && memcmp(a->kw_names[k], f, fl) == 0)
						v = &a->kw_vals[k];
			}
			if (!v) {
				rc = jj_err(c, SF_E_TEMPLATE, "str.format: no argument for '{%.*s}'", (int)fl, f);
				break;
			}
			rc = jj_str(c, &b, *v);
			p = q + 1;
		} else if (*p == '}') {
			rc = jj_err(c, SF_E_TEMPLATE, "Single '}' encountered in format string");
		} else {
			const char *q = p;
			while (q < end && *q != '{' && *q != '}')
				q++;
			rc = jj_buf_add(c, &b, p, (size_t)(q - p));
			p = q;
		}
	}
	if (rc) {
		free(b.p);
		return rc;
	}
	return jj_buf_to_str(c, &b, out);
}

static int need_str(struct jj_ctx *c, const struct jv *v, const char *method)
{
	if (!v || v->kind != JV_STR)
		return jj_err(c, SF_E_TEMPLATE, "str.%s needs a string argument", method);
	return 0;
}

int jj_str_method(struct jj_ctx *c, struct jv self, const char *name, const struct jj_args *a,
		  struct jv *out)
{
	const struct jv *a0 = jj_arg(a, 0, NULL), *a1 = jj_arg(a, 1, NULL);
#define IS(s) (strcmp(name, s) == 0)
	if (IS("strip") || IS("lstrip") || IS("rstrip"))
		return jj_strip(c, self, a0, IS("strip") ? 3 : IS("lstrip") ? 1 : 2, out);
	if (IS("lower") || IS("upper") || IS("capitalize") || IS("title"))
		return jj_case(c, self, IS("lower") ? 0 : IS("upper") ? 1 : IS("capitalize") ? 2 : 3, out);
	if (IS("split") || IS("rsplit")) {
		const struct jv *sep = jj_arg(a, 0, "sep"), *mx = jj_arg(a, 1, "maxsplit");
		int64_t maxsplit = -1;
		if (mx) {
			if (mx->kind != JV_INT)
				return jj_err(c, SF_E_TEMPLATE, "maxsplit must be an integer");
			maxsplit = mx->i;
		}
		return split(c, self, sep, maxsplit, IS("rsplit"), out);
	}
	if (IS("startswith") || IS("endswith")) {
		if (!a0 || a1)
			return jj_err(c, SF_E_TEMPLATE, "str.%s takes one argument here", name);
		bool end = IS("endswith"), r = false;
		if (a0->kind == JV_STR) {
			r = affix(self, *a0, end);
		} else if (a0->kind == JV_LIST && a0->l->tuple) {
			for (size_t i = 0; i < a0->l->n && !r; i++) {
				if (a0->l->v[i].kind != JV_STR)
					return jj_err(c, SF_E_TEMPLATE, "tuple for %s must only contain str", name);
				r = affix(self, a0->l->v[i], end);
			}
		} else {
			return jj_err(c, SF_E_TEMPLATE, "%s first arg must be str or a tuple of str, not %s",
				      name, jv_type_name(*a0));
		}
		*out = jv_bool(r);
		return 0;
	}
	if (IS("replace")) {
		if (need_str(c, a0, name) || need_str(c, a1, name))
			return c->rc;
		const struct jv *cnt = jj_arg(a, 2, "count");
		return jj_replace(c, self, *a0, *a1, cnt && cnt->kind == JV_INT ? cnt->i : -1, out);
	}
	if (IS("find") || IS("rfind") || IS("index") || IS("count")) {
		if (need_str(c, a0, name))
			return c->rc;
		if (a1)
			return jj_err(c, SF_E_TEMPLATE_UNSUPPORTED, "unsupported: str.%s with start/end", name);
		const char *h = self.s->s;
		size_t hl = self.s->len, nl = a0->s->len;
		int64_t at = -1, n = 0;
		if (IS("count") && nl == 0) {
			*out = jv_int((int64_t)jj_utf8_count(h, hl) + 1);
			return 0;
		}
		for (size_t i = 0; i + nl <= hl; i++)
			if (memcmp(h + i, a0->s->s, nl) == 0) {
				if (at < 0 || IS("rfind"))
					at = (int64_t)jj_utf8_count(h, i);
				n++;
				if (IS("count"))
					i += nl ? nl - 1 : 0;
				else if (!IS("rfind"))
					break;
			}
		if (IS("index") && at < 0)
			return jj_err(c, SF_E_TEMPLATE, "substring not found");
		*out = jv_int(IS("count") ? n : at);
		return jj_step(c, hl / 64);
	}
	if (IS("join")) {
		struct jv items;
		if (!a0 || jj_iter_list(c, *a0, &items))
			return c->rc ? c->rc : jj_err(c, SF_E_TEMPLATE, "str.join takes one argument");
		struct jj_buf b = { 0 };
		int rc = 0;
		for (size_t i = 0; !rc && i < items.l->n; i++) {
			if (items.l->v[i].kind != JV_STR) {
				rc = jj_err(c, SF_E_TEMPLATE, "sequence item %zu: expected str instance, %s found",
					    i, jv_type_name(items.l->v[i]));
				break;
			}
			if (i)
				rc = jj_buf_add(c, &b, self.s->s, self.s->len);
			if (!rc)
				rc = jj_buf_add(c, &b, items.l->v[i].s->s, items.l->v[i].s->len);
		}
		jv_unref(items);
		if (rc) {
			free(b.p);
			return rc;
		}
		return jj_buf_to_str(c, &b, out);
	}
	if (IS("format"))
		return format(c, self, a, out);
	if (IS("splitlines")) {
		if (jv_list_new(c, 0, false, out))
			return c->rc;
		size_t st = 0, i = 0, len = self.s->len;
		const char *p = self.s->s;
		while (i < len) {
			size_t at = i;
			uint32_t cp = jj_utf8_next(p, len, &i);
			if (cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) ||
			    cp == 0x85 || cp == 0x2028 || cp == 0x2029) {
				if (cp == '\r' && i < len && p[i] == '\n')
					i++;
				if (push_piece(c, *out, p + st, at - st, false))
					return c->rc;
				st = i;
			}
		}
		if (st < len && push_piece(c, *out, p + st, len - st, false))
			return c->rc;
		return 0;
	}
	if (IS("isdigit") || IS("isalpha") || IS("isalnum") || IS("isspace") || IS("islower") ||
	    IS("isupper")) {
		bool r = self.s->len > 0, cased = false;
		size_t i = 0;
		while (r && i < self.s->len) {
			uint32_t cp = jj_utf8_next(self.s->s, self.s->len, &i);
			bool dig = cp >= '0' && cp <= '9', alpha = is_alpha_cp(cp);
			if (IS("isdigit"))
				r = dig;
			else if (IS("isalpha"))
				r = alpha;
			else if (IS("isalnum"))
				r = dig || alpha;
			else if (IS("isspace"))
				r = jj_is_space(cp);
			else if (IS("islower")) {
				if (jj_upper_cp(cp) != cp)
					cased = true;
				r = jj_lower_cp(cp) == cp;
			} else {
				if (jj_lower_cp(cp) != cp)
					cased = true;
				r = jj_upper_cp(cp) == cp;
			}
		}
		if (IS("islower") || IS("isupper"))
			r = r && cased;
		*out = jv_bool(r);
		return 0;
	}
	if (IS("center") || IS("ljust") || IS("rjust") || IS("zfill")) {
		if (!a0 || a0->kind != JV_INT)
			return jj_err(c, SF_E_TEMPLATE, "str.%s needs an integer width", name);
		int64_t w = a0->i, n = (int64_t)jj_utf8_count(self.s->s, self.s->len);
		if (w > (int64_t)c->lim.max_output)
			return jj_err(c, SF_E_LIMIT, "str.%s width over max_output", name);
		int64_t pad = w > n ? w - n : 0, left = 0;
		if (IS("center"))
			left = pad / 2 + (pad & w & 1);
		else if (IS("rjust") || IS("zfill"))
			left = pad;
		struct jj_buf b = { 0 };
		char fill = IS("zfill") ? '0' : ' ';
		int rc = 0;
		for (int64_t k = 0; !rc && k < left; k++)
			rc = jj_buf_addc(c, &b, fill);
		if (!rc)
			rc = jj_buf_add(c, &b, self.s->s, self.s->len);
		for (int64_t k = left; !rc && k < pad; k++)
			rc = jj_buf_addc(c, &b, ' ');
		if (rc) {
			free(b.p);
			return rc;
		}
		return jj_buf_to_str(c, &b, out);
	}
#undef IS
	return jj_err(c, SF_E_TEMPLATE_UNSUPPORTED, "unsupported: str.%s", name);
}
