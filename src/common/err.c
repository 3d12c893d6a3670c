#include <superfluid/err.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *sf_code_name(int code)
{
	switch (code) {
	case SF_OK: return "ok";
	case SF_E_TRUNCATED: return "truncated";
	case SF_E_FRAME_TOO_BIG: return "frame_too_big";
	case SF_E_UNKNOWN_TYPE: return "unknown_type";
	case SF_E_RANGE: return "out_of_range";
	case SF_E_LIMIT: return "over_limit";
	case SF_E_TRAILING: return "trailing_bytes";
	case SF_E_VERSION: return "wrong_version";
	case SF_E_HEADER: return "bad_header";
	case SF_E_NOMEM: return "no_memory";
	case SF_E_TEXT: return "bad_text";
	case SF_E_BAD_MAGIC: return "not_fleet_link";
	case SF_E_MODE: return "mode_mismatch";
	case SF_E_AUTH: return "token_refused";
	case SF_E_SEAL: return "seal_failed";
	case SF_E_HANDSHAKE_TIMEOUT: return "handshake_timeout";
	case SF_E_NO_ANSWER: return "no_answer";
	case SF_E_CLOSED: return "closed";
	case SF_E_SILENT: return "silent";
	case SF_E_PROTOCOL: return "protocol";
	case SF_E_NO_VERSION: return "no_common_version";
	case SF_E_GOODBYE: return "goodbye";
	case SF_E_STATE: return "bad_state";
	case SF_E_UNSUPPORTED: return "unsupported_on_fleet";
	case SF_E_IO: return "io";
	case SF_E_CRYPTO: return "crypto";
	case SF_E_NOT_HELD: return "not_held";
	case SF_E_FORMAT: return "format";
	case SF_E_MODEL: return "model";
	case SF_E_NOT_FOUND: return "not_found";
	case SF_E_TYPE: return "type";
	case SF_E_TEMPLATE: return "template";
	case SF_E_RAISED: return "template_raised";
	case SF_E_TEMPLATE_UNSUPPORTED: return "template_unsupported";
	}
	return "unknown_error";
}

int sf_err_set(struct sf_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

void sf_err_prefix(struct sf_err *err, const char *fmt, ...)
{
	if (!err)
		return;
	char joined[2 * sizeof(err->msg)];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(joined, sizeof(err->msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	size_t at = (size_t)n < sizeof(err->msg) ? (size_t)n : sizeof(err->msg) - 1;
	joined[at++] = ':';
	joined[at++] = ' ';
	size_t old = strnlen(err->msg, sizeof(err->msg) - 1);
	memcpy(joined + at, err->msg, old);
	joined[at + old] = 0;
	memcpy(err->msg, joined, sizeof(err->msg) - 1);
	err->msg[sizeof(err->msg) - 1] = 0;
}
