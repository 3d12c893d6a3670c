/* Token files: what is read, and what is refused with what sentence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <superfluid/token_file.h>

static char path[64];

static void write_token(const char *content, size_t n, mode_t mode)
{
	snprintf(path, sizeof(path), "/tmp/sf-token-test-%d", (int)getpid());
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	fwrite(content, 1, n, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void reads_without_the_newline(void **state)
{
	uint8_t tok[SF_TOKEN_MAX];
	size_t n = 0;
	struct sf_err err;
	write_token("s3cret\n", 7, 0600);
	assert_int_equal(sf_token_file_read(path, tok, &n, &err), 0);
	assert_int_equal(n, 6);
	assert_memory_equal(tok, "s3cret", 6);
	unlink(path);
}

static void refuses_what_others_can_read(void **state)
{
	uint8_t tok[SF_TOKEN_MAX];
	size_t n = 0;
	struct sf_err err;
	write_token("s3cret\n", 7, 0644);
	assert_int_equal(sf_token_file_read(path, tok, &n, &err), SF_E_AUTH);
	assert_non_null(strstr(err.msg, "mode 0644"));
	assert_non_null(strstr(err.msg, "chmod 600"));
	unlink(path);
}

static void refuses_empty_missing_and_huge(void **state)
{
	uint8_t tok[SF_TOKEN_MAX];
	size_t n = 0;
	struct sf_err err;
	write_token("\n", 1, 0600);
	assert_int_equal(sf_token_file_read(path, tok, &n, &err), SF_E_AUTH);
	assert_non_null(strstr(err.msg, "empty"));
	char *big = malloc(SF_TOKEN_MAX + 1);
	memset(big, 'x', SF_TOKEN_MAX + 1);
	write_token(big, SF_TOKEN_MAX + 1, 0600);
	free(big);
	assert_int_equal(sf_token_file_read(path, tok, &n, &err), SF_E_LIMIT);
	unlink(path);
	assert_int_equal(sf_token_file_read(path, tok, &n, &err), SF_E_IO);
	assert_non_null(strstr(err.msg, "No such file"));
}

static void refuses_blanks_only(void **state)
{
	uint8_t tok[SF_TOKEN_MAX];
	size_t n = 0;
	struct sf_err err;
	static const char *const blank[] = { "   \n", " ", "\t \r\n", "\n\n", " \r\n \n" };
	for (size_t i = 0; i < sizeof(blank) / sizeof(blank[0]); i++) {
		write_token(blank[i], strlen(blank[i]), 0600);
		assert_int_equal(sf_token_file_read(path, tok, &n, &err), SF_E_AUTH);
		assert_non_null(strstr(err.msg, "only blanks"));
		assert_non_null(strstr(err.msg, "openssl rand -hex 32"));
	}
	write_token(" a \n", 4, 0600); /* not blank: taken as it is */
	assert_int_equal(sf_token_file_read(path, tok, &n, &err), 0);
	assert_int_equal(n, 3);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reads_without_the_newline),
		cmocka_unit_test(refuses_what_others_can_read),
		cmocka_unit_test(refuses_empty_missing_and_huge),
		cmocka_unit_test(refuses_blanks_only),
	};
	return cmocka_run_group_tests_name("token_file", tests, NULL, NULL);
}
