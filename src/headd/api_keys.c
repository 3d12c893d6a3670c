/* Bearer keys (--api-keys FILE): one key per line, blank lines and `#` comments skipped. The
 * head keeps only their SHA-256 and compares digests in constant time, so neither a key's
 * bytes nor its length show in the time an answer takes. */
#include "headd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "daemon/log.h"

#define HEADD_MAX_KEYS 65536
#define HEADD_KEY_MAX 1024

/* Every shard reads the file; shard 0 speaks for all (the same file says the same to each). */
#define keys_log(level, ...) \
	do { \
		if (d->shard == 0) \
			sfd_log_whole(level, __VA_ARGS__); \
	} while (0)
#define keys_err(...) keys_log(SFD_LOG_ERROR, __VA_ARGS__)

int headd_keys_load(struct headd *d, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		keys_err("--api-keys %s: cannot open it (%s)", path, strerror(errno));
		return -1;
	}
	struct sf_err err;
	if (sf_secret_file_check(fileno(f), path, "keys file", &err)) {
		keys_err("--api-keys: %s", err.msg);
		fclose(f);
		return -1;
	}
	char line[HEADD_KEY_MAX + 2];
	unsigned lineno = 0;
	int rc = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		size_t n = strlen(line);
		if (n && line[n - 1] != '\n' && !feof(f)) {
			keys_err("--api-keys %s:%u: a key longer than %d bytes", path, lineno,
				HEADD_KEY_MAX);
			rc = -1;
			break;
		}
		while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' ||
			     line[n - 1] == '\t'))
			line[--n] = 0;
		char *k = line;
		while (*k == ' ' || *k == '\t')
			k++;
		if (!*k || *k == '#')
			continue;
		if (strpbrk(k, " \t")) {
			keys_err("--api-keys %s:%u: a key holds a blank; one key per line", path,
				 lineno);
			rc = -1;
			break;
		}
		if (d->api.n_keys == HEADD_MAX_KEYS) {
			keys_err("--api-keys %s: more than %d keys", path, HEADD_MAX_KEYS);
			rc = -1;
			break;
		}
		uint8_t (*keys)[32] = realloc(d->api.keys, (d->api.n_keys + 1) * sizeof(*keys));
		if (!keys) {
			rc = -1;
			break;
		}
		d->api.keys = keys;
		crypto_hash_sha256(keys[d->api.n_keys++], (const uint8_t *)k, strlen(k));
		sodium_memzero(line, sizeof(line));
	}
	fclose(f);
	if (!rc && !d->api.n_keys) {
		keys_err("--api-keys %s: holds no key", path);
		rc = -1;
	}
	if (!rc)
		keys_log(SFD_LOG_INFO, "--api-keys %s: %u key%s", path, d->api.n_keys,
			 d->api.n_keys == 1 ? "" : "s");
	return rc;
}

bool headd_owner_is(const uint8_t a[static SF_WALREC_OWNER_LEN],
		    const uint8_t b[static SF_WALREC_OWNER_LEN])
{
	return sodium_memcmp(a, b, SF_WALREC_OWNER_LEN) == 0;
}

bool headd_keys_check(struct headd_http *h, const struct sf_http_request *r)
{
	struct headd *d = h->d;
	memset(h->owner, 0, sizeof(h->owner));
	if (!d->api.n_keys)
		return true;
	const char *auth = sf_http_header(r, "authorization");
	const char *xkey = sf_http_header(r, "x-api-key"); /* Anthropic's clients send it so */
	struct sf_api_error e;
	if ((!auth || strncasecmp(auth, "Bearer ", 7)) && !xkey) {
		sf_api_fail(&e, 401, "invalid_request_error", "missing_api_key", NULL,
			    "You didn't provide an API key. Send it in the Authorization header "
			    "as 'Bearer YOUR_KEY' (or as x-api-key)");
		headd_api_send_error(h, &e);
		return false;
	}
	const char *key = auth && !strncasecmp(auth, "Bearer ", 7) ? auth + 7 : xkey;
	while (*key == ' ')
		key++;
	uint8_t digest[32];
	crypto_hash_sha256(digest, (const uint8_t *)key, strlen(key));
	/* Every key is compared, whichever matches, so the time does not say which. */
	int match = 0;
	for (uint32_t i = 0; i < d->api.n_keys; i++)
		match |= sodium_memcmp(digest, d->api.keys[i], 32) == 0;
	if (match) {
		/* The owner tag: a hash of the digest, so the log holds neither key nor digest. */
		crypto_generichash(h->owner, sizeof(h->owner), digest, sizeof(digest),
				   (const uint8_t *)"superfluid-owner", 16);
		sodium_memzero(digest, sizeof(digest));
		return true;
	}
	sf_api_fail(&e, 401, "invalid_request_error", "invalid_api_key", NULL,
		    "Incorrect API key provided. The head's --api-keys file lists the keys it "
		    "takes");
	headd_api_send_error(h, &e);
	return false;
}
