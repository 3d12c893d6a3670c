/* JSON in Python's json.dumps style (chat_json.h). */
#include "api/chat_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sf__py_float(double x, char *buf)
{
	if (isnan(x))
		return strcpy(buf, "NaN");
	if (isinf(x))
		return strcpy(buf, x < 0 ? "-Infinity" : "Infinity");
	if (x == 0)
		return strcpy(buf, signbit(x) ? "-0.0" : "0.0");
	/* The shortest digits that read back as x, as d.ddde+X. */
	char e[40];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(e, sizeof(e), "%.*e", prec - 1, x);
		if (strtod(e, NULL) == x)
			break;
	}
	const char *q = e;
	bool neg = *q == '-';
	if (neg)
		q++;
	char digits[24];
	size_t nd = 0;
	for (; *q && *q != 'e'; q++)
		if (*q != '.')
			digits[nd++] = *q;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = 0;
	int decpt = atoi(q + 1) + 1; /* x = 0.digits * 10^decpt */
	char *o = buf;
	if (neg)
		*o++ = '-';
	if (decpt > -4 && decpt <= 16) {
		if (decpt <= 0) {
			o += sprintf(o, "0.");
			for (int i = 0; i < -decpt; i++)
				*o++ = '0';
			o += sprintf(o, "%s", digits);
		} else if ((size_t)decpt < nd) {
			o += sprintf(o, "%.*s.%s", decpt, digits, digits + decpt);
		} else {
			o += sprintf(o, "%s", digits);
			for (size_t i = nd; i < (size_t)decpt; i++)
				*o++ = '0';
			o += sprintf(o, ".0");
		}
	} else {
		if (nd > 1)
			o += sprintf(o, "%c.%s", digits[0], digits + 1);
		else
			*o++ = digits[0];
		o += sprintf(o, "e%+03d", decpt - 1);
	}
	*o = 0;
	return buf;
}

static int add_s(struct sf_str *out, const char *s)
{
	return sf_str_add(out, s, strlen(s));
}

static int add_string(struct sf_str *out, const char *s, size_t n)
{
	if (sf_str_add(out, "\"", 1))
		return -1;
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *esc = NULL;
		char u[8];
		switch (c) {
		case '"': esc = "\\\""; break;
		case '\\': esc = "\\\\"; break;
		case '\b': esc = "\\b"; break;
		case '\f': esc = "\\f"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		case '\t': esc = "\\t"; break;
		default:
			if (c < 0x20) {
				snprintf(u, sizeof(u), "\\u%04x", c);
				esc = u;
			}
		}
		if (!esc) {
			run++;
			continue;
		}
		if (sf_str_add(out, s + i - run, run) || add_s(out, esc))
			return -1;
		run = 0;
	}
	if (sf_str_add(out, s + n - run, run))
		return -1;
	return sf_str_add(out, "\"", 1);
}

int sf__py_json(struct sf_str *out, const json_t *v)
{
	char num[40];
	switch (json_typeof(v)) {
	case JSON_NULL:
		return add_s(out, "null");
	case JSON_TRUE:
		return add_s(out, "true");
	case JSON_FALSE:
		return add_s(out, "false");
	case JSON_INTEGER:
		snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return add_s(out, num);
	case JSON_REAL:
		return add_s(out, sf__py_float(json_real_value(v), num));
	case JSON_STRING:
		return add_string(out, json_string_value(v), json_string_length(v));
	case JSON_ARRAY: {
		if (add_s(out, "["))
			return -1;
		for (size_t i = 0; i < json_array_size(v); i++)
			if ((i && add_s(out, ", ")) || sf__py_json(out, json_array_get(v, i)))
				return -1;
		return add_s(out, "]");
	}
	case JSON_OBJECT: {
		if (add_s(out, "{"))
			return -1;
		const char *key;
		size_t klen;
		json_t *val;
		bool first = true;
		/* jansson keeps the keys in the order they came. */
		json_object_keylen_foreach((json_t *)v, key, klen, val) {
			if ((!first && add_s(out, ", ")) || add_string(out, key, klen) ||
			    add_s(out, ": ") || sf__py_json(out, val))
				return -1;
			first = false;
		}
		return add_s(out, "}");
	}
	}
	return -1;
}
