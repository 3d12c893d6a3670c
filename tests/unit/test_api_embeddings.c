/* POST /v1/embeddings' request parser and answer (src/api/api_embeddings.c) and the "embed"
 * operation's codec (src/common/embed.c): every form of input, the 400s naming what is wrong,
 * floats and base64 the same values, dimensions the first values scaled to length 1 again. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "api/api_embeddings.h"

static struct sf_api_embed_req req;
static struct sf_api_error err;

static int parse(const char *body)
{
	sf_api_embed_req_free(&req);
	memset(&err, 0, sizeof(err));
	return sf_api_parse_embeddings((const uint8_t *)body, strlen(body), &req, &err);
}

static void refused(const char *body, int status, const char *param)
{
	if (parse(body) != -1)
		fail_msg("accepted: %s", body);
	assert_int_equal(err.status, status);
	assert_string_equal(err.param, param);
}

static void inputs(void **state)
{
	assert_int_equal(parse("{\"model\":\"m\",\"input\":\"a cat\"}"), 0);
	assert_int_equal(req.n, 1);
	assert_int_equal(req.inputs[0].kind, SF_EMBED_TEXT);
	assert_int_equal(req.inputs[0].len, 5);
	assert_memory_equal(req.inputs[0].text, "a cat", 5);
	assert_false(req.base64);
	assert_int_equal(parse("{\"model\":\"m\",\"input\":[\"a\",\"bc\"],\"encoding_format\":\"base64\","
			       "\"dimensions\":8,\"user\":\"u\"}"), 0);
	assert_int_equal(req.n, 2);
	assert_int_equal(req.inputs[1].len, 2);
	assert_true(req.base64);
	assert_int_equal(req.dimensions, 8);
	assert_int_equal(parse("{\"model\":\"m\",\"input\":[1,2,2147483647]}"), 0);
	assert_int_equal(req.n, 1);
	assert_int_equal(req.inputs[0].kind, SF_EMBED_TOKENS);
	assert_int_equal(req.inputs[0].tokens[2], 2147483647);
	assert_int_equal(parse("{\"model\":\"m\",\"input\":[[1],[2,3]]}"), 0);
	assert_int_equal(req.n, 2);
	assert_int_equal(req.inputs[1].len, 2);
	assert_int_equal(req.inputs[1].tokens[1], 3);
	refused("{\"model\":\"m\"}", 400, "input");
	refused("{\"input\":\"x\"}", 400, "model");
	refused("{\"model\":\"m\",\"input\":\"\"}", 400, "input");
	refused("{\"model\":\"m\",\"input\":[\"a\",\"\"]}", 400, "input[1]");
	refused("{\"model\":\"m\",\"input\":[]}", 400, "input");
	refused("{\"model\":\"m\",\"input\":[1,-2]}", 400, "input[1]");
	refused("{\"model\":\"m\",\"input\":[[1],[\"a\"]]}", 400, "input[1][0]");
	refused("{\"model\":\"m\",\"input\":5}", 400, "input");
	refused("{\"model\":\"m\",\"input\":\"x\",\"encoding_format\":\"int8\"}", 400,
		"encoding_format");
	refused("{\"model\":\"m\",\"input\":\"x\",\"dimensions\":0}", 400, "dimensions");
	char *big = malloc(SF_EMBED_MAX_INPUTS * 4 + 64);
	int o = sprintf(big, "{\"model\":\"m\",\"input\":[");
	for (int i = 0; i <= SF_EMBED_MAX_INPUTS; i++)
		o += sprintf(big + o, "%s\"a\"", i ? "," : "");
	sprintf(big + o, "]}");
	refused(big, 413, "input");
	free(big);
}

/* A result of two inputs of four values (3, 4, 0, 0 and 0, 0, 0, 1 before scaling). */
static void answer(void **state)
{
	uint8_t res[8 + 2 * (4 + 16)];
	float a[4] = { 3, 4, 0, 0 }, b[4] = { 0, 0, 0, 2 };
	sf_embed_result_head(res, 2, 4);
	sf_embed_result_put(res, 4, 0, 7, a);
	sf_embed_result_put(res, 4, 1, 5, b);
	assert_int_equal(parse("{\"model\":\"m\",\"input\":[\"a\",\"b\"]}"), 0);
	char *s = sf_api_embeddings_json(&req, res, sizeof(res), &err);
	assert_non_null(s);
	json_t *v = json_loads(s, 0, NULL);
	free(s);
	json_t *e0 = json_object_get(json_array_get(json_object_get(v, "data"), 0), "embedding");
	assert_true(fabs(json_number_value(json_array_get(e0, 0)) - 0.6) < 1e-6);
	assert_true(fabs(json_number_value(json_array_get(e0, 1)) - 0.8) < 1e-6);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(v, "usage"),
							    "prompt_tokens")), 12);
	json_decref(v);
	/* base64: the float32 bytes of the same values. */
	assert_int_equal(parse("{\"model\":\"m\",\"input\":[\"a\",\"b\"],\"encoding_format\":"
			       "\"base64\"}"), 0);
	s = sf_api_embeddings_json(&req, res, sizeof(res), &err);
	v = json_loads(s, 0, NULL);
	free(s);
	/* 0.6f, 0.8f, 0, 0 little-endian. */
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(v,
			    "data"), 0), "embedding")), "mpkZP83MTD8AAAAAAAAAAA==");
	json_decref(v);
	/* dimensions: the first values scaled again; past the model's a 400. */
	assert_int_equal(parse("{\"model\":\"m\",\"input\":[\"a\",\"b\"],\"dimensions\":1}"), 0);
	s = sf_api_embeddings_json(&req, res, sizeof(res), &err);
	v = json_loads(s, 0, NULL);
	free(s);
	e0 = json_object_get(json_array_get(json_object_get(v, "data"), 0), "embedding");
	assert_int_equal(json_array_size(e0), 1);
	assert_true(fabs(json_number_value(json_array_get(e0, 0)) - 1.0) < 1e-6);
	json_decref(v);
	assert_int_equal(parse("{\"model\":\"m\",\"input\":[\"a\",\"b\"],\"dimensions\":5}"), 0);
	assert_null(sf_api_embeddings_json(&req, res, sizeof(res), &err));
	assert_int_equal(err.status, 400);
	assert_string_equal(err.param, "dimensions");
	/* A result that does not hold together: another count, bytes missing. */
	assert_int_equal(parse("{\"model\":\"m\",\"input\":\"a\"}"), 0);
	assert_null(sf_api_embeddings_json(&req, res, sizeof(res), &err));
	assert_int_equal(err.status, 502);
	assert_null(sf_api_embeddings_json(&req, res, sizeof(res) - 1, &err));
}

static int teardown(void **state)
{
	sf_api_embed_req_free(&req);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(inputs, teardown),
		cmocka_unit_test_teardown(answer, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
