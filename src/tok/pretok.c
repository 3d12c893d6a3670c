/* The pre-tokenizers of byte-level BPE: llama.cpp's lists of regular expressions, run with
 * PCRE2 (UTF, Unicode properties, JIT where it exists) over a view of the text.
 *
 * llama.cpp runs some expressions through hand-written matchers, some through std::regex over
 * a text whose non-ASCII characters are replaced by their category, and some through
 * std::wregex; all of them treat a piece of text as the whole subject (a lookahead does not see
 * past it) and keep the text between matches as pieces of its own. The view makes PCRE2 see
 * the characters as those paths do: a whitespace character other than ASCII's becomes \v (the
 * wregex path does that; for \s nothing changes), U+180E (whitespace to PCRE2 10.42, not to
 * llama.cpp's tables) becomes U+200B, and a surrogate (which reaches here from overlong-free
 * but lenient decoding) becomes U+E000, which no expression names either. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tok/tok.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

/* Expressions as llama.cpp writes them (src/llama-vocab.cpp), in PCRE2 syntax. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3                                                                            \
	RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
			"|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                             \
	RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"      \
			"|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35                                                                            \
	RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"                              \
			"| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* tokenizer.json's cased-letter classes as llama.cpp rewrites them (an upper-case run is
 * letters not a-z, a lower-case one letters not A-Z): a word of upper then lower case letters,
 * and one of upper case letters then lower (tekken's and o200k's) */
#define RE_CASED_LOWER "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
#define RE_CASED_UPPER "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"
/* punctuation runs keeping a following newline or slash, then the whitespace rules */
#define RE_PUNCT_NL_SLASH " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Mistral's tekken: cased words, single digits, and punctuation runs that keep a following
 * newline or slash */
#define RE_TEKKEN RE_CASED_LOWER "|" RE_CASED_UPPER "|\\p{N}|" RE_PUNCT_NL_SLASH
/* o200k's (gpt-4o: Phi-4-mini, gpt-oss, Llama 4): tekken's, each cased word taking a following
 * contraction, with digits in groups of up to three */
#define RE_GPT4O                                                                             \
	RE_CASED_LOWER RE_CONTRACTIONS "?|" RE_CASED_UPPER RE_CONTRACTIONS "?|\\p{N}{1,3}|"      \
		RE_PUNCT_NL_SLASH
#define RE_CJK "[\\x{4e00}-\\x{9fa5}\\x{0800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+"

static const char *const exprs[SF__PRE_COUNT][SF__PRE_MAX_EXPRS] = {
	[SF__PRE_DEFAULT] = { "[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]" },
	[SF__PRE_LLAMA3] = { RE_LLAMA3 },
	[SF__PRE_QWEN2] = { RE_QWEN2 },
	[SF__PRE_QWEN35] = { RE_QWEN35 },
	[SF__PRE_TEKKEN] = { RE_TEKKEN },
	[SF__PRE_GPT4O] = { RE_GPT4O },
	[SF__PRE_GPT2] = { RE_GPT2 },
	[SF__PRE_STARCODER] = { "\\p{N}", RE_GPT2 },
	[SF__PRE_FALCON] = { "[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]" },
	[SF__PRE_DEEPSEEK_LLM] = {
		"[\\r\\n]",
		"\\s?[A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}"
		"\\x{1c4}-\\x{293}\\x{295}-\\x{2af}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37b}-\\x{37d}"
		"\\x{37f}\\x{386}\\x{388}-\\x{38a}\\x{38c}\\x{38e}-\\x{3a1}\\x{3a3}-\\x{3f5}"
		"\\x{3f7}-\\x{481}\\x{48a}-\\x{52f}\\x{531}-\\x{556}\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}"
		"\\x{13f8}-\\x{13fd}\\x{1c90}-\\x{1cba}\\x{1cbd}-\\x{1cbf}\\x{1d00}-\\x{1d2b}"
		"\\x{1d6b}-\\x{1d77}\\x{1d79}-\\x{1d9a}\\x{1e00}-\\x{1f15}\\x{1f18}-\\x{1f1d}"
		"\\x{1f20}-\\x{1f45}\\x{1f48}-\\x{1f4d}\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}\\x{1f5d}"
		"\\x{1f5f}-\\x{1f7d}\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-\\x{1fc4}"
		"\\x{1fc6}-\\x{1fcc}\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}\\x{1fe0}-\\x{1fec}"
		"\\x{1ff2}-\\x{1ff4}\\x{1ff6}-\\x{1ffc}\\x{2102}\\x{2107}\\x{210a}-\\x{2113}\\x{2115}"
		"\\x{2119}-\\x{211d}\\x{2124}\\x{2126}\\x{2128}\\x{212a}-\\x{212d}\\x{212f}-\\x{2134}"
		"\\x{2139}\\x{213c}-\\x{213f}\\x{2145}-\\x{2149}\\x{214e}\\x{2183}\\x{2184}"
		"\\x{2c00}-\\x{2c7b}\\x{2c7e}-\\x{2ce4}\\x{2ceb}-\\x{2cee}\\x{2cf2}\\x{2cf3}"
		"\\x{a640}-\\x{a66d}\\x{a680}-\\x{a69b}\\x{a722}-\\x{a76f}\\x{a771}-\\x{a787}"
		"\\x{a78b}-\\x{a78e}\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}\\x{fb13}-\\x{fb17}"
		"\\x{ff21}-\\x{ff3a}\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}\\x{104b0}-\\x{104d3}"
		"\\x{104d8}-\\x{104fb}\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}\\x{118a0}-\\x{118df}"
		"\\x{1e900}-\\x{1e943}]+",
		"\\s?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}\\x{3000}-\\x{3002}]+",
		"\\s+\\z",
		RE_CJK,
		"\\p{N}+",
	},
	[SF__PRE_DEEPSEEK_CODER] = { "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}" },
};

/* Bounds on one match's work: far above what these expressions take on any text (they do
 * not nest quantifiers), there so that no input can make one run away. */
#define MATCH_LIMIT 100000000u
#define HEAP_LIMIT_KIB (64u * 1024)

int sf__pretok_init(struct sf__pretok *p, enum sf__pre pre, struct sf_err *err)
{
	memset(p, 0, sizeof(*p));
	pcre2_match_context *mctx = pcre2_match_context_create(NULL);
	if (!mctx)
		return sf_err_set(err, SF_E_NOMEM, "no memory for a PCRE2 match context");
	pcre2_set_match_limit(mctx, MATCH_LIMIT);
	pcre2_set_heap_limit(mctx, HEAP_LIMIT_KIB);
	p->mctx = mctx;
	for (unsigned i = 0; i < SF__PRE_MAX_EXPRS && exprs[pre][i]; i++) {
		int ec;
		PCRE2_SIZE eo;
		pcre2_code *code = pcre2_compile((PCRE2_SPTR)exprs[pre][i], PCRE2_ZERO_TERMINATED,
						 PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C,
						 &ec, &eo, NULL);
		if (!code) {
			PCRE2_UCHAR msg[160];
			pcre2_get_error_message(ec, msg, sizeof(msg));
			sf__pretok_free(p);
			return sf_err_set(err, SF_E_MODEL,
					  "PCRE2 refuses pre-tokenizer expression %u at %zu: %s", i,
					  (size_t)eo, (const char *)msg);
		}
		/* JIT where PCRE2 has it; the interpreter otherwise (same results). */
		(void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
		p->code[p->n++] = code;
	}
	return 0;
}

void sf__pretok_free(struct sf__pretok *p)
{
	for (unsigned i = 0; i < p->n; i++)
		pcre2_code_free(p->code[i]);
	pcre2_match_context_free(p->mctx);
	memset(p, 0, sizeof(*p));
}

/* The character PCRE2 sees for c (see the top of this file). */
static uint32_t view_char(uint32_t c)
{
	if (c < 0x80)
		return c;
	switch (c) {
	case 0x85: case 0xa0: case 0x1680: case 0x2028: case 0x2029: case 0x202f: case 0x205f:
	case 0x3000:
		return 0x0b;
	case 0x180e:
		return 0x200b;
	}
	if (c >= 0x2000 && c <= 0x200a)
		return 0x0b;
	if (c >= 0xd800 && c <= 0xdfff)
		return 0xe000;
	return c;
}

/* The code point whose view starts at byte b of the view (b is on a character boundary). */
static size_t cp_at(const uint32_t *off, size_t lo, size_t hi, size_t b)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (off[mid] < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* One expression over the piece cp[a..b): cuts at each match's ends. */
static int split_piece(const struct sf__pretok *p, pcre2_code *code, size_t a, size_t b,
		       uint8_t *cut, struct sf__scratch *s, struct sf_err *err)
{
	const uint32_t *off = s->view_off;
	PCRE2_SPTR subject = s->view + off[a];
	PCRE2_SIZE len = off[b] - off[a], at = 0;
	pcre2_match_data *md = s->md;
	while (at < len) {
		int rc = pcre2_match(code, subject, len, at, PCRE2_NO_UTF_CHECK, md, p->mctx);
		if (rc == PCRE2_ERROR_NOMATCH)
			break;
		if (rc < 0) {
			PCRE2_UCHAR msg[160];
			pcre2_get_error_message(rc, msg, sizeof(msg));
			return sf_err_set(err, SF_E_LIMIT, "pre-tokenizer expression failed: %s",
					  (const char *)msg);
		}
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
		size_t ms = cp_at(off, a, b, off[a] + ov[0]);
		size_t me = cp_at(off, a, b, off[a] + ov[1]);
		if (me == ms) { /* an empty match (none of these expressions has one): step on */
			at = off[ms + 1] - off[a];
			continue;
		}
		cut[ms] = 1;
		cut[me] = 1;
		at = ov[1];
	}
	return 0;
}

int sf__pretok_split(const struct sf__pretok *p, const uint32_t *cp, size_t n, uint8_t *cut,
		     struct sf__scratch *s, struct sf_err *err)
{
	int rc;
	if ((rc = sf__grow((void **)&s->view, &s->view_cap, 4 * n + 1, 1, err)) ||
	    (rc = sf__grow((void **)&s->view_off, &s->view_off_cap, n + 1, sizeof(uint32_t), err)))
		return rc;
	size_t v = 0;
	for (size_t i = 0; i < n; i++) {
		s->view_off[i] = (uint32_t)v;
		v += sf__utf8_put(view_char(cp[i]), s->view + v);
	}
	s->view_off[n] = (uint32_t)v;
	if (!s->md) {
		s->md = pcre2_match_data_create(1, NULL);
		if (!s->md)
			return sf_err_set(err, SF_E_NOMEM, "no memory for PCRE2 match data");
	}
	memset(cut, 0, n + 1);
	cut[0] = cut[n] = 1;
	for (unsigned e = 0; e < p->n; e++) {
		/* The pieces are the runs between the cuts made so far; new cuts fall inside them. */
		size_t a = 0;
		while (a < n) {
			size_t b = a + 1;
			while (!cut[b])
				b++;
			if ((rc = split_piece(p, p->code[e], a, b, cut, s, err)))
				return rc;
			a = b;
		}
	}
	return 0;
}
