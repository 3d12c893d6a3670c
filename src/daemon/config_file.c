/* The config file reader (see config_file.h). */
#include "daemon/config_file.h"

#include <stdio.h>

#include <errno.h>
#include <string.h>

#define LINE_MAX_LEN 4096

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	char *e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		*--e = 0;
	return s;
}

static int bad_line(const char *prog, const char *path, unsigned line, const char *why)
{
	fprintf(stderr, "%s: %s:%u: %s\n", prog, path, line, why);
	return -1;
}

int sfd_config_file_read(const char *prog, const char *path, sfd_config_set_fn set, void *arg)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "%s: --config %s: %s\n", prog, path, strerror(errno));
		return -1;
	}
	char buf[LINE_MAX_LEN];
	char why[512];
	unsigned line = 0;
	int rc = 0;
	while (fgets(buf, sizeof(buf), f)) {
		line++;
		size_t len = strlen(buf);
		if (len == sizeof(buf) - 1 && buf[len - 1] != '\n' && !feof(f)) {
			rc = bad_line(prog, path, line, "line longer than 4095 bytes");
			break;
		}
		char *hash = strchr(buf, '#');
		if (hash)
			*hash = 0;
		char *s = trim(buf);
		if (!*s)
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			snprintf(why, sizeof(why), "expected 'key = value', got '%.200s'", s);
			rc = bad_line(prog, path, line, why);
			break;
		}
		*eq = 0;
		char *key = trim(s), *value = trim(eq + 1);
		if (!*key) {
			rc = bad_line(prog, path, line, "a value without a key");
			break;
		}
		if (set(arg, key, value, why, sizeof(why))) {
			rc = bad_line(prog, path, line, why);
			break;
		}
	}
	if (!rc && ferror(f)) {
		fprintf(stderr, "%s: --config %s: read error\n", prog, path);
		rc = -1;
	}
	fclose(f);
	return rc;
}
