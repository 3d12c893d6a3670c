/* multipart/form-data: the boundary from Content-Type, parts with names, filenames, types
 * and binary data, preambles and epilogues, empty parts, and malformed bodies refused with a
 * sentence saying what is wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/multipart.h"

static int parse(const char *body, size_t n, struct sf_mp_part *parts, uint32_t *np,
		 struct sf_err *err)
{
	return sf_mp_parse((const uint8_t *)body, n, "XyZ", 3, parts, SF_MP_MAX_PARTS, np, err);
}

static bool eq(const char *p, size_t n, const char *want)
{
	return p && n == strlen(want) && !memcmp(p, want, n);
}

static void test_boundary(void **state)
{
	const char *b;
	size_t n;
	struct sf_err err;
	assert_int_equal(sf_mp_boundary("multipart/form-data; boundary=abc123", &b, &n, &err), 0);
	assert_true(eq(b, n, "abc123"));
	assert_int_equal(sf_mp_boundary("Multipart/Form-Data;charset=utf-8; boundary=\"a b;c\"",
					&b, &n, &err), 0);
	assert_true(eq(b, n, "a b;c"));
	assert_int_equal(sf_mp_boundary("multipart/form-data; boundary=------------------------"
					"d74496d66958873e", &b, &n, &err), 0);
	assert_int_equal(n, 40);
	assert_int_equal(sf_mp_boundary("application/json", &b, &n, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "not multipart/form-data"));
	assert_int_equal(sf_mp_boundary(NULL, &b, &n, &err), SF_E_RANGE);
	assert_int_equal(sf_mp_boundary("multipart/form-data", &b, &n, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "no boundary"));
	assert_int_equal(sf_mp_boundary("multipart/form-data; boundary=", &b, &n, &err), SF_E_RANGE);
	assert_int_equal(sf_mp_boundary("multipart/form-data; boundary=\"abc", &b, &n, &err),
			 SF_E_RANGE);
	char longer[200];
	snprintf(longer, sizeof(longer), "multipart/form-data; boundary=%071d", 0);
	assert_int_equal(sf_mp_boundary(longer, &b, &n, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "1 to 70"));
}

static void test_parts(void **state)
{
	static const char body[] =
		"preamble to skip\r\n"
		"--XyZ\r\n"
		"Content-Disposition: form-data; name=\"model\"\r\n"
		"\r\n"
		"sim-1\r\n"
		"--XyZ  \r\n"
		"content-disposition: form-data; name=\"file\"; filename=\"a; b.wav\"\r\n"
		"Content-Type: audio/wav\r\n"
		"\r\n"
		"\x00\x01\r\n--Xy\r\n\xff\r\n"
		"--XyZ\r\n"
		"Content-Disposition: form-data; name=empty\r\n"
		"\r\n"
		"\r\n"
		"--XyZ\r\n"
		"Content-Disposition: form-data; name=\"tight\"\r\n"
		"\r\n"
		"--XyZ--\r\n"
		"epilogue --XyZ\r\n";
	struct sf_mp_part parts[SF_MP_MAX_PARTS];
	uint32_t np;
	struct sf_err err;
	assert_int_equal(parse(body, sizeof(body) - 1, parts, &np, &err), 0);
	assert_int_equal(np, 4);
	assert_true(eq(parts[0].name, parts[0].name_len, "model"));
	assert_null(parts[0].filename);
	assert_null(parts[0].content_type);
	assert_true(eq((const char *)parts[0].data, parts[0].len, "sim-1"));
	assert_true(eq(parts[1].name, parts[1].name_len, "file"));
	assert_true(eq(parts[1].filename, parts[1].filename_len, "a; b.wav"));
	assert_true(eq(parts[1].content_type, parts[1].content_type_len, "audio/wav"));
	assert_int_equal(parts[1].len, 11);
	assert_memory_equal(parts[1].data, "\x00\x01\r\n--Xy\r\n\xff", 11);
	assert_true(eq(parts[2].name, parts[2].name_len, "empty"));
	assert_int_equal(parts[2].len, 0);
	assert_true(eq(parts[3].name, parts[3].name_len, "tight"));
	assert_int_equal(parts[3].len, 0);
	const struct sf_mp_part *f = sf_mp_find(parts, np, "file");
	assert_ptr_equal(f, &parts[1]);
	assert_null(sf_mp_find(parts, np, "fil"));
	/* The body may open with the delimiter and end at the closing one. */
	static const char bare[] = "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--XyZ--";
	assert_int_equal(parse(bare, sizeof(bare) - 1, parts, &np, &err), 0);
	assert_int_equal(np, 1);
	assert_true(eq((const char *)parts[0].data, parts[0].len, "x"));
	/* No parts at all is a form too. */
	assert_int_equal(parse("--XyZ--\r\n", 9, parts, &np, &err), 0);
	assert_int_equal(np, 0);
}

static void refused(const char *body, int code, const char *says)
{
	struct sf_mp_part parts[SF_MP_MAX_PARTS];
	uint32_t np = 99;
	struct sf_err err;
	int rc = parse(body, strlen(body), parts, &np, &err);
	if (rc != code || !strstr(err.msg, says))
		fail_msg("body %.60s: rc %d (%s), wanted %d saying \"%s\"", body, rc,
			 rc ? err.msg : "", code, says);
}

static void test_malformed(void **state)
{
	refused("", SF_E_RANGE, "does not contain the multipart boundary");
	refused("no delimiter here", SF_E_RANGE, "does not contain");
	refused("--XyZ", SF_E_RANGE, "not followed by a line end");
	refused("--XyZjunk\r\n", SF_E_RANGE, "not followed by a line end");
	refused("--XyZ\r\n\r\nbody\r\n--XyZ--", SF_E_RANGE, "no Content-Disposition");
	refused("--XyZ\r\nContent-Type: text/plain\r\n\r\nbody\r\n--XyZ--", SF_E_RANGE,
		"no Content-Disposition");
	refused("--XyZ\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--XyZ--", SF_E_RANGE,
		"not form-data");
	refused("--XyZ\r\nContent-Disposition: form-data\r\n\r\nx\r\n--XyZ--", SF_E_RANGE,
		"has no name");
	refused("--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--XyZ--", SF_E_RANGE,
		"has no name");
	refused("--XyZ\r\nno colon\r\n\r\nx\r\n--XyZ--", SF_E_RANGE, "no colon");
	refused("--XyZ\r\nContent-Disposition: form-data; name=a\r\n", SF_E_RANGE,
		"no blank line");
	refused("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\ncut short", SF_E_RANGE,
		"not ended by the boundary");
	/* A header block over the limit. */
	size_t n = SF_MP_MAX_HEAD + 200;
	char *big = malloc(n + 64);
	int at = sprintf(big, "--XyZ\r\nX-Long: ");
	memset(big + at, 'a', n);
	strcpy(big + at + n, "\r\n\r\nx\r\n--XyZ--");
	refused(big, SF_E_LIMIT, "over 8192 bytes");
	free(big);
	/* Too many parts. */
	size_t cap = (SF_MP_MAX_PARTS + 2) * 64 + 16;
	char *many = malloc(cap);
	size_t len = 0;
	for (int i = 0; i < SF_MP_MAX_PARTS + 1; i++)
		len += (size_t)snprintf(many + len, cap - len,
					"--XyZ\r\nContent-Disposition: form-data; name=p%d\r\n\r\nv\r\n",
					i);
	snprintf(many + len, cap - len, "--XyZ--");
	refused(many, SF_E_LIMIT, "more than 64 parts");
	free(many);
	/* A wrong boundary. */
	struct sf_mp_part parts[4];
	uint32_t np;
	struct sf_err err;
	assert_int_equal(sf_mp_parse((const uint8_t *)"--XyZ--", 7, "", 0, parts, 4, &np, &err),
			 SF_E_RANGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_boundary),
		cmocka_unit_test(test_parts),
		cmocka_unit_test(test_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
