/* TLS over memory BIOs: OpenSSL reads ciphertext from rbio (what sf_tls_feed put there) and
 * writes ciphertext into wbio, which is emptied into ops->write_cipher after every call.
 * Plaintext the consumer did not take is kept (one record at most) and no more is read
 * until it is, so a consumer that stops reading stops the reading here too. */
#include "http/tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#define TLS_RBIO_MAX (16u << 20)   /* ciphertext kept unread: past it the session fails */
#define TLS_EARLY_MAX (1u << 20)   /* plaintext written before the handshake ended */
#define TLS_RECORD 16384

struct sf_tls_ctx {
	SSL_CTX *ctx;
};

struct sf_tls {
	SSL *ssl;
	BIO *rbio, *wbio;
	struct sf_tls_ops ops;
	bool done;          /* handshake complete */
	bool failed;
	uint8_t kept[TLS_RECORD]; /* plaintext on_plain did not take */
	size_t kept_off, kept_len;
	uint8_t *early;     /* plaintext written before the handshake ended */
	size_t early_len;
};

/* OpenSSL's reasons, the error queue emptied. */
static void reasons(char *buf, size_t n)
{
	unsigned long e;
	size_t at = 0;
	buf[0] = 0;
	while ((e = ERR_get_error()) && at + 2 < n) {
		char one[256];
		ERR_error_string_n(e, one, sizeof(one));
		at += (size_t)snprintf(buf + at, n - at, "%s%s", at ? "; " : "", one);
	}
	if (!buf[0])
		snprintf(buf, n, "no reason given");
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char ours[] = "\x08http/1.1";
	unsigned char *sel;
	if (SSL_select_next_proto(&sel, outlen, ours, sizeof(ours) - 1, in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

int sf_tls_ctx_new(struct sf_tls_ctx **out, const char *cert_file, const char *key_file,
		   struct sf_err *err)
{
	char why[768];
	*out = NULL;
	ERR_clear_error();
	struct sf_tls_ctx *c = calloc(1, sizeof(*c));
	if (!c || !(c->ctx = SSL_CTX_new(TLS_server_method()))) {
		free(c);
		return sf_err_set(err, SF_E_NOMEM, "no memory for the TLS context");
	}
	SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(c->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_alpn_select_cb(c->ctx, alpn_select, NULL);
	int rc = 0;
	if (SSL_CTX_use_certificate_chain_file(c->ctx, cert_file) != 1) {
		reasons(why, sizeof(why));
		rc = sf_err_set(err, SF_E_RANGE, "--tls-cert %s: cannot use it as a PEM certificate "
				"chain (%s)", cert_file, why);
	} else if (SSL_CTX_use_PrivateKey_file(c->ctx, key_file, SSL_FILETYPE_PEM) != 1) {
		reasons(why, sizeof(why));
		rc = sf_err_set(err, SF_E_RANGE, "--tls-key %s: cannot use it as a PEM private key "
				"(%s)", key_file, why);
	} else if (SSL_CTX_check_private_key(c->ctx) != 1) {
		reasons(why, sizeof(why));
		rc = sf_err_set(err, SF_E_RANGE, "--tls-key %s does not match the certificate in "
				"--tls-cert %s (%s)", key_file, cert_file, why);
	}
	if (rc) {
		sf_tls_ctx_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void sf_tls_ctx_free(struct sf_tls_ctx *ctx)
{
	if (!ctx)
		return;
	SSL_CTX_free(ctx->ctx);
	free(ctx);
}

struct sf_tls *sf_tls_new(struct sf_tls_ctx *ctx, const struct sf_tls_ops *ops)
{
	struct sf_tls *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->ops = *ops;
	t->ssl = SSL_new(ctx->ctx);
	t->rbio = BIO_new(BIO_s_mem());
	t->wbio = BIO_new(BIO_s_mem());
	if (!t->ssl || !t->rbio || !t->wbio) {
		BIO_free(t->rbio);
		BIO_free(t->wbio);
		SSL_free(t->ssl);
		free(t);
		return NULL;
	}
	BIO_set_mem_eof_return(t->rbio, -1); /* empty means "wait for more", not end of file */
	SSL_set_bio(t->ssl, t->rbio, t->wbio); /* the SSL owns them now */
	SSL_set_accept_state(t->ssl);
	return t;
}

void sf_tls_free(struct sf_tls *t)
{
	if (!t)
		return;
	SSL_free(t->ssl);
	free(t->early);
	free(t);
}

/* Sends what OpenSSL wrote. */
static void flush(struct sf_tls *t)
{
	char buf[16384];
	int n;
	while (!t->failed && (n = BIO_read(t->wbio, buf, sizeof(buf))) > 0)
		if (t->ops.write_cipher(t->ops.arg, buf, (size_t)n))
			t->failed = true;
}

static int fail(struct sf_tls *t, struct sf_err *err, const char *what)
{
	char why[512];
	reasons(why, sizeof(why));
	t->failed = true;
	flush(t); /* an alert, if OpenSSL wrote one */
	return sf_err_set(err, SF_E_CRYPTO, "TLS %s failed: %s", what, why);
}

/* The client spoke plain HTTP to this HTTPS port (OpenSSL saw a request line where a TLS
 * record belongs): it is told so in plain HTTP, then the session ends. */
static int plain_http(struct sf_tls *t, struct sf_err *err)
{
	static const char answer[] = "HTTP/1.1 400 Bad Request\r\nServer: superfluid\r\n"
				     "Content-Type: text/plain; charset=utf-8\r\n"
				     "Content-Length: 46\r\nConnection: close\r\n\r\n"
				     "This port speaks HTTPS: use an https:// URL.\r\n";
	ERR_clear_error();
	t->failed = true;
	(void)t->ops.write_cipher(t->ops.arg, answer, sizeof(answer) - 1);
	return sf_err_set(err, SF_E_PROTOCOL, "sent plain HTTP to the HTTPS port (answered 400)");
}

/* Offers kept plaintext, then reads more while the consumer takes it all. */
static int pump(struct sf_tls *t, struct sf_err *err)
{
	while (!t->failed) {
		if (t->kept_len) {
			size_t took = t->ops.on_plain(t->ops.arg, t->kept + t->kept_off, t->kept_len);
			if (took > t->kept_len)
				took = t->kept_len;
			t->kept_off += took;
			t->kept_len -= took;
			if (t->kept_len)
				return 0; /* the consumer is full: read no more now */
		}
		t->kept_off = 0;
		int n = SSL_read(t->ssl, t->kept, sizeof(t->kept));
		if (n > 0) {
			t->kept_len = (size_t)n;
			continue;
		}
		int e = SSL_get_error(t->ssl, n);
		flush(t);
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
			return 0;
		if (e == SSL_ERROR_ZERO_RETURN)
			return 0; /* close_notify: the socket's end follows */
		return fail(t, err, "read");
	}
	return t->failed ? SF_E_CLOSED : 0;
}

int sf_tls_feed(struct sf_tls *t, const uint8_t *p, size_t n, struct sf_err *err)
{
	if (t->failed)
		return sf_err_set(err, SF_E_CLOSED, "the TLS session failed already");
	ERR_clear_error();
	if (n && BIO_write(t->rbio, p, (int)n) != (int)n)
		return fail(t, err, "buffering");
	if (BIO_ctrl_pending(t->rbio) > TLS_RBIO_MAX)
		return sf_err_set(err, SF_E_LIMIT, "the client sent more than %u bytes it does not "
				  "read the answers to", TLS_RBIO_MAX);
	if (!t->done) {
		int rc = SSL_do_handshake(t->ssl);
		if (rc != 1) {
			int e = SSL_get_error(t->ssl, rc);
			flush(t);
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
				return 0;
			int why = ERR_GET_REASON(ERR_peek_error());
			if (why == SSL_R_HTTP_REQUEST || why == SSL_R_HTTPS_PROXY_REQUEST)
				return plain_http(t, err);
			return fail(t, err, "handshake");
		}
		t->done = true;
		flush(t);
		if (t->early_len) {
			uint8_t *e = t->early;
			size_t len = t->early_len;
			t->early = NULL;
			t->early_len = 0;
			int w = sf_tls_write(t, e, len);
			free(e);
			if (w)
				return fail(t, err, "write");
		}
	}
	return pump(t, err);
}

void sf_tls_poll(struct sf_tls *t)
{
	struct sf_err err;
	ERR_clear_error();
	if (t->done && !t->failed)
		(void)pump(t, &err);
}

int sf_tls_write(struct sf_tls *t, const void *p, size_t n)
{
	if (t->failed)
		return SF_E_CLOSED;
	if (!t->done) {
		if (t->early_len + n > TLS_EARLY_MAX)
			return SF_E_LIMIT;
		uint8_t *e = realloc(t->early, t->early_len + n);
		if (!e)
			return SF_E_NOMEM;
		memcpy(e + t->early_len, p, n);
		t->early = e;
		t->early_len += n;
		return 0;
	}
	ERR_clear_error();
	const uint8_t *q = p;
	while (n) {
		int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
		int w = SSL_write(t->ssl, q, chunk);
		if (w <= 0) {
			ERR_clear_error();
			t->failed = true;
			return SF_E_CRYPTO;
		}
		q += w;
		n -= (size_t)w;
		flush(t);
	}
	return t->failed ? SF_E_CLOSED : 0;
}

void sf_tls_shutdown(struct sf_tls *t)
{
	if (!t->done || t->failed)
		return;
	ERR_clear_error();
	(void)SSL_shutdown(t->ssl);
	ERR_clear_error();
	flush(t);
}

bool sf_tls_handshake_done(const struct sf_tls *t)
{
	return t->done;
}
