/* CORS (--cors-origin): browser pages of the origins given may call the API. Every answer to a
 * request from an allowed origin carries Access-Control-Allow-Origin (the origin itself, or *
 * when any is allowed), Vary: Origin and Access-Control-Expose-Headers; a preflight (OPTIONS)
 * is answered 204 with the methods and headers allowed, without a key; one from another
 * origin is a 403. Without --cors-origin nothing of this: no header, OPTIONS a 405 as any
 * method a path does not take (hostile by default). */
#include "headd.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define ORIGIN_MAX 200      /* bytes of an origin given or matched */
#define ASK_HEADERS_MAX 512 /* bytes of Access-Control-Request-Headers echoed */

static bool alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* SCHEME://HOST[:PORT]: a scheme of letters, digits, + - . (a letter first); a host of
 * letters, digits, - and . (or [an IPv6 address]); a port of up to 5 digits. */
static bool origin_ok(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n && (alnum(s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.') &&
	       (i || (s[i] >= 'a' && s[i] <= 'z')))
		i++;
	if (!i || n - i < 4 || memcmp(s + i, "://", 3))
		return false;
	i += 3;
	size_t host = i;
	if (s[i] == '[') {
		while (++i < n && (alnum(s[i]) || s[i] == ':' || s[i] == '.'))
			;
		if (i == n || s[i] != ']' || i == host + 1)
			return false;
		i++;
	} else {
		while (i < n && (alnum(s[i]) || s[i] == '-' || s[i] == '.'))
			i++;
		if (i == host)
			return false;
	}
	if (i < n && s[i] == ':') {
		size_t port = ++i;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == port || i - port > 5)
			return false;
	}
	return i == n;
}

int headd_cors_check(const char *list, char *why, size_t why_len)
{
	for (const char *s = list; ; ) {
		const char *comma = strchr(s, ',');
		size_t n = comma ? (size_t)(comma - s) : strlen(s);
		if (!(n == 1 && *s == '*') && (n > ORIGIN_MAX || !origin_ok(s, n))) {
			snprintf(why, why_len, "--cors-origin: '%.*s' is not * nor an origin "
				 "SCHEME://HOST[:PORT] (no path, at most %d bytes)",
				 (int)(n > 100 ? 100 : n), s, ORIGIN_MAX);
			return -1;
		}
		if (!comma)
			return 0;
		s = comma + 1;
	}
}

/* Whether origin may call: "*" among the list, or the origin itself (case aside). */
static bool allowed(const char *list, const char *origin, bool *any)
{
	*any = false;
	size_t len = origin ? strlen(origin) : 0;
	for (const char *s = list; s; ) {
		const char *comma = strchr(s, ',');
		size_t n = comma ? (size_t)(comma - s) : strlen(s);
		if (n == 1 && *s == '*')
			*any = true;
		else if (origin && n == len && !strncasecmp(s, origin, n))
			return true;
		s = comma ? comma + 1 : NULL;
	}
	return *any;
}

const char *headd_cors_headers(struct headd_http *h, const struct sf_http_request *r)
{
	const char *list = h->d->opts->cors_origin;
	if (!list)
		return NULL;
	const char *origin = sf_http_header(r, "origin");
	bool any;
	if (!allowed(list, origin, &any) || (origin && strlen(origin) > ORIGIN_MAX))
		return "Vary: Origin\r\n";
	/* Any: "*", which a page cannot turn into a credentialed call; else the origin itself,
	 * which is one of ours byte for byte (case aside): nothing of the client's is echoed. */
	snprintf(h->cors, sizeof(h->cors), "Access-Control-Allow-Origin: %s\r\nVary: Origin\r\n"
		 "Access-Control-Expose-Headers: *\r\n", any || !origin ? "*" : origin);
	return h->cors;
}

/* Access-Control-Request-Headers when it is a plain list of header names (letters, digits,
 * - and _, with commas and spaces), else the headers the API reads. */
static const char *ask_headers(const struct sf_http_request *r)
{
	static const char ours[] = "Authorization, Content-Type, X-Superfluid-Session, "
				   "Last-Event-ID";
	const char *v = sf_http_header(r, "access-control-request-headers");
	size_t n = v ? strlen(v) : 0;
	if (!n || n > ASK_HEADERS_MAX)
		return ours;
	for (size_t i = 0; i < n; i++) {
		char c = v[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == ',' || c == ' '))
			return ours;
	}
	return v;
}

bool headd_cors_preflight(struct headd_http *h, const struct sf_http_request *r)
{
	const char *list = h->d->opts->cors_origin;
	if (!list || strcmp(r->method, "OPTIONS"))
		return false;
	const char *origin = sf_http_header(r, "origin");
	bool any;
	h->ep = EP_OTHER;
	if (origin && !allowed(list, origin, &any)) {
		struct sf_api_error e;
		sf_api_fail(&e, 403, "invalid_request_error", "origin_not_allowed", NULL,
			    "pages of origin %.200s may not call this API (the head's --cors-origin "
			    "does not name it)", origin);
		headd_api_send_error(h, &e);
		return true;
	}
	char extra[ASK_HEADERS_MAX + 200];
	snprintf(extra, sizeof(extra), "Access-Control-Allow-Methods: GET, POST, DELETE, OPTIONS\r\n"
		 "Access-Control-Allow-Headers: %s\r\nAccess-Control-Max-Age: 600\r\n"
		 "Allow: GET, POST, DELETE, OPTIONS\r\n", ask_headers(r));
	headd_api_respond(h, 204, NULL, "", 0, extra);
	return true;
}
