/* The grammar engine: what GBNF compiles to and what it refuses (by name), the bytes a matcher
 * takes, masks against a brute-force check of every token, state that follows from the tokens
 * alone, and its bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <superfluid/grammar.h>

#include "testutil.h"

static const char *JSON =
	"root   ::= object\n"
	"value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
	"object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
	"array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
	"string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] |\n"
	"           \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
	"number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)? ws\n"
	"ws ::= | \" \" | \"\\n\" [ \\t]{0,20}   # a comment\n";

static struct sf_grammar *compile(const char *text)
{
	struct sf_grammar *g;
	struct sf_err err;
	if (sf_grammar_compile(text, strlen(text), &g, &err))
		fail_msg("compile: %s", err.msg);
	return g;
}

static void refused(const char *text, int code, const char *needle)
{
	struct sf_grammar *g = NULL;
	struct sf_err err = { 0 };
	int rc = sf_grammar_compile(text, strlen(text), &g, &err);
	if (rc != code || !strstr(err.msg, needle))
		fail_msg("'%s': rc %d (want %d), \"%s\" (want \"%s\")", text, rc, code, err.msg,
			 needle);
	assert_null(g);
}

/* Whether the matcher takes the whole of s, and whether the root may end after it. */
static int takes(struct sf_grammar *g, const char *s, bool *can_end)
{
	struct sf_gmatch *m;
	struct sf_err err;
	assert_int_equal(sf_gmatch_new(g, &m, &err), 0);
	int rc = sf_gmatch_bytes(m, (const uint8_t *)s, strlen(s), &err);
	if (can_end)
		*can_end = !rc && sf_gmatch_can_end(m);
	sf_gmatch_free(m);
	return rc;
}

static void full(struct sf_grammar *g, const char *s)
{
	bool end;
	if (takes(g, s, &end) || !end)
		fail_msg("'%s' should be a whole match", s);
}

static void prefix_only(struct sf_grammar *g, const char *s)
{
	bool end;
	if (takes(g, s, &end) || end)
		fail_msg("'%s' should be a prefix, not a whole match", s);
}

static void no(struct sf_grammar *g, const char *s)
{
	if (takes(g, s, NULL) != SF_E_RANGE)
		fail_msg("'%s' should be refused", s);
}

static void syntax_and_refusals(void **state)
{
	refused("root ::= foo\n", SF_E_RANGE, "rule foo is used but never defined");
	refused("a ::= \"x\"\n", SF_E_RANGE, "no rule named root");
	refused("root ::= root \"x\" | \"y\"\n", SF_E_RANGE, "rule root is left-recursive");
	refused("root ::= a\na ::= b? a \"x\" | \"y\"\nb ::= \"z\"\n", SF_E_RANGE,
		"left-recursive");
	refused("root ::= \"x\" root\n", SF_E_RANGE, "rule root can never finish");
	refused("root ::= \"a\" | b\nb ::= \"x\" b\n", SF_E_RANGE, "rule b can never finish");
	refused("root ::= \"abc\n", SF_E_RANGE, "line 1: a literal or class is not closed");
	refused("root ::= [a-\n", SF_E_RANGE, "not closed");
	refused("root ::= [z-a]\n", SF_E_RANGE, "ends before it starts");
	refused("root ::= (\"a\"\n", SF_E_RANGE, "not closed by )");
	refused("root ::= \"a\")\n", SF_E_RANGE, "a ) closes no group");
	refused("root ::= \"a\"{3,1}\n", SF_E_RANGE, "n < m");
	refused("root ::= \"a\"{99999}\n", SF_E_LIMIT, "repetition count over");
	refused("root ::= \"a\"**\n", SF_E_RANGE, "two repetition operators");
	refused("root ::= <name>\n", SF_E_RANGE, "by name (<name>) is not supported");
	refused("root ::= !<[12]>\n", SF_E_RANGE, "negated token reference");
	refused("root ::= <[x]>\n", SF_E_RANGE, "needs a decimal id");
	refused("root ::= <[12\n", SF_E_RANGE, "not closed by ]>");
	refused("root ::= <[99999999]>\n", SF_E_LIMIT, "a token id past");
	refused("root ::= \"\\q\"\n", SF_E_RANGE, "unknown escape");
	refused("root ::= \"\\uD800\"\n", SF_E_RANGE, "surrogate");
	refused("root ::= \"a\"\nroot ::= \"b\"\n", SF_E_RANGE, "root is defined twice");
	refused("root = \"a\"\n", SF_E_RANGE, "expected ::=");
	refused("root ::= []\n", SF_E_RANGE, "matches nothing");
	refused("root ::= \"\xff\"\n", SF_E_RANGE, "not valid UTF-8");
	/* A deep group nesting and a repetition blow-up past the state bound. */
	char deep[2000];
	size_t k = (size_t)snprintf(deep, sizeof(deep), "root ::= ");
	for (int i = 0; i < 300; i++)
		deep[k++] = '(';
	deep[k++] = '"';
	deep[k++] = 'a';
	deep[k++] = '"';
	for (int i = 0; i < 300; i++)
		deep[k++] = ')';
	deep[k++] = '\n';
	deep[k] = 0;
	refused(deep, SF_E_LIMIT, "nested deeper than");
	refused("root ::= ((\"abcdefgh\"{1000}){1000}){100}\n", SF_E_LIMIT, "automaton states");
}

static void bytes_taken(void **state)
{
	struct sf_grammar *g = compile("root ::= \"ab\" [c-e]* (\"x\" | \"yz\"){2} [^a-z]? \"!\"\n");
	full(g, "abxx!");
	full(g, "abcdeyzx!");
	full(g, "abxyzQ!");
	full(g, "abxx\xc3\xa9!"); /* U+00E9 is not in a-z */
	prefix_only(g, "abc");
	no(g, "abf");
	no(g, "abxxq!");
	no(g, "abxxx");
	sf_grammar_unref(g);

	/* Classes over code points, as UTF-8: a 3-byte range and a negated ASCII class. */
	g = compile("root ::= [\\u4e00-\\u9fff]+ [^\\x00-\\x7f] \".\"?\n");
	full(g, "\xe4\xb8\x80\xe9\xbe\xa5\xc3\xa9");
	full(g, "\xe4\xb8\x80\xf0\x9f\x98\x80.");
	no(g, "\xe3\x80\x80");          /* U+3000 is below the range */
	no(g, "\xe4\xb8\x80" "a");      /* ASCII after */
	no(g, "\xe4\xb8\x80\xed\xa0\x80"); /* a surrogate's bytes */
	prefix_only(g, "\xe4\xb8");
	sf_grammar_unref(g);

	/* Counted repetition: {m}, {m,}, {m,n}, {,n} is not GBNF, {0,n}. */
	g = compile("root ::= \"a\"{2} \"b\"{1,} \"c\"{0,2} \"d\"{3,4}\n");
	full(g, "aabddd");
	full(g, "aabbbccdddd");
	no(g, "abddd");
	no(g, "aabcccddd");
	no(g, "aabddddd");
	prefix_only(g, "aabdd");
	sf_grammar_unref(g);

	/* Nullable rules, recursion through the middle, comments and continued lines. */
	g = compile("# parens\nroot ::= p\np ::= ( \"(\" p \")\" p )?  # balanced\n"
		    "  \n x ::= \"never\"\n");
	full(g, "");
	full(g, "(()())()");
	no(g, ")");
	prefix_only(g, "((");
	sf_grammar_unref(g);

	g = compile(JSON);
	full(g, "{}");
	full(g, "{\"a\": [1, -2.5e3, true, null, {\"b\": \"x\\u00e9\\n\"}], \"c\": \"\xc3\xa9\"}\n");
	prefix_only(g, "{\"a\": [1, ");
	no(g, "{\"a\" 1}");
	no(g, "{\"a\": 01}");
	no(g, "{\"a\": \"\x01\"}");
	no(g, "[]");
	sf_grammar_unref(g);
}

/* A vocabulary of n random tokens over an alphabet suited to g, plus two end tokens and a
 * control token. */
struct tvocab {
	uint8_t (*bytes)[8];
	uint8_t *len;
	uint32_t n;
};

static int tvocab_fn(void *arg, uint32_t t, const uint8_t **b, size_t *len)
{
	struct tvocab *v = arg;
	if (t == v->n - 1 || t == v->n - 2) {
		*b = NULL;
		*len = 0;
		return SF_GTOK_END;
	}
	if (t == v->n - 3) {
		*b = (const uint8_t *)"<|ctl|>";
		*len = 7;
		return SF_GTOK_NEVER;
	}
	*b = v->bytes[t];
	*len = v->len[t];
	return SF_GTOK_TEXT;
}

static struct sf_grammar_vocab *random_vocab(struct tvocab *tv, uint32_t n, const char *alpha,
					     uint64_t seed)
{
	tv->n = n;
	tv->bytes = calloc(n, sizeof(*tv->bytes));
	tv->len = calloc(n, 1);
	size_t na = strlen(alpha);
	uint64_t r = seed;
	for (uint32_t t = 0; t < n; t++) {
		/* Every single byte of the alphabet, then random words of 2-8 bytes (some twice). */
		if (t < na) {
			tv->bytes[t][0] = (uint8_t)alpha[t];
			tv->len[t] = 1;
			continue;
		}
		if (t % 50 == 0) {
			memcpy(tv->bytes[t], tv->bytes[t - 1], 8);
			tv->len[t] = tv->len[t - 1];
			continue;
		}
		tv->len[t] = (uint8_t)(2 + sf_test_rand(&r) % 7);
		for (int i = 0; i < tv->len[t]; i++)
			tv->bytes[t][i] = (uint8_t)alpha[sf_test_rand(&r) % na];
	}
	struct sf_grammar_vocab *v;
	struct sf_err err;
	if (sf_grammar_vocab_new(n, tvocab_fn, tv, &v, &err))
		fail_msg("vocab: %s", err.msg);
	return v;
}

static void tvocab_free(struct tvocab *tv)
{
	free(tv->bytes);
	free(tv->len);
}

/* Random walks: at each step the mask equals the brute-force check of every token; an allowed
 * token is taken; a second matcher synced from the token list alone agrees. */
static void walks(const char *grammar, const char *alpha, int n_walks, int max_len, bool ends)
{
	struct sf_grammar *g = compile(grammar);
	struct tvocab tv;
	struct sf_grammar_vocab *v = random_vocab(&tv, 600, alpha, 7);
	uint32_t words = (tv.n + 63) / 64;
	uint64_t *mask = calloc(words, 8);
	uint32_t *toks = calloc((size_t)max_len + 1, sizeof(uint32_t));
	uint32_t *allowed = calloc(tv.n, sizeof(uint32_t));
	struct sf_err err;
	uint64_t r = 12345;
	int ended = 0;
	for (int w = 0; w < n_walks; w++) {
		struct sf_gmatch *m, *m2;
		assert_int_equal(sf_gmatch_new(g, &m, &err), 0);
		assert_int_equal(sf_gmatch_new(g, &m2, &err), 0);
		int n = 0;
		for (; n < max_len; n++) {
			if (sf_gmatch_mask(m, v, mask, &err))
				fail_msg("mask: %s", err.msg);
			uint32_t na = 0;
			for (uint32_t t = 0; t < tv.n; t++) {
				bool bit = mask[t >> 6] >> (t & 63) & 1;
				bool want = sf_gmatch_allows(m, v, t);
				if (bit != want)
					fail_msg("walk %d step %d: token %u (%.*s) mask %d, check %d", w,
						 n, t, tv.len[t], (const char *)tv.bytes[t], bit, want);
				if (bit)
					allowed[na++] = t;
			}
			if (!strstr(grammar, "<["))
				assert_false(mask[(tv.n - 3) >> 6] >> ((tv.n - 3) & 63) & 1);
			if (!na)
				break;
			/* Where the end is allowed, one time in four it is taken. */
			uint32_t t = allowed[sf_test_rand(&r) % na];
			if (allowed[na - 1] >= tv.n - 2 && sf_test_rand(&r) % 4 == 0)
				t = allowed[na - 1];
			toks[n] = t;
			if (sf_gmatch_sync(m, v, toks, (size_t)n + 1, &err))
				fail_msg("sync: %s", err.msg);
			if (t >= tv.n - 2) {
				n++;
				ended++;
				assert_true(sf_gmatch_done(m));
				break;
			}
		}
		/* The same state from the tokens alone, in one go. */
		if (sf_gmatch_sync(m2, v, toks, (size_t)n, &err))
			fail_msg("sync m2: %s", err.msg);
		uint64_t *mask2 = calloc(words, 8);
		assert_int_equal(sf_gmatch_mask(m, v, mask, &err), 0);
		assert_int_equal(sf_gmatch_mask(m2, v, mask2, &err), 0);
		assert_memory_equal(mask, mask2, words * 8);
		/* A diverging history starts over and still agrees. */
		if (n > 1) {
			uint32_t keep = toks[n - 1];
			/* A control token (past the vocabulary where the grammar names it):
			 * refused, m2 back at its start. */
			toks[n - 1] = strstr(grammar, "<[") ? tv.n + 1 : tv.n - 3;
			assert_int_equal(sf_gmatch_sync(m2, v, toks, (size_t)n, &err), SF_E_RANGE);
			toks[n - 1] = keep;
			assert_int_equal(sf_gmatch_sync(m2, v, toks, (size_t)n, &err), 0);
			assert_int_equal(sf_gmatch_mask(m2, v, mask2, &err), 0);
			assert_memory_equal(mask, mask2, words * 8);
		}
		free(mask2);
		sf_gmatch_free(m);
		sf_gmatch_free(m2);
	}
	if (ends && !ended)
		fail_msg("no walk of %s ended", grammar);
	free(mask);
	free(toks);
	free(allowed);
	sf_grammar_vocab_free(v);
	tvocab_free(&tv);
	sf_grammar_unref(g);
}

static void masks_match_brute_force(void **state)
{
	walks(JSON, "{}[]\":,. \n-+0123456789abcdeEflnrstu\\", 40, 60, false);
	walks("root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\n"
	      "term ::= num | \"(\" expr \")\"\nnum ::= [0-9]+ (\".\" [0-9]+)?\n",
	      "()+-.0123456789", 40, 40, true);
	walks("root ::= (\"ab\" | \"a\" \"b\" | [a-c]+ \"!\")* \"end\"\n", "abc!end", 30, 30, true);
	/* Nullable calls and returns in a row. */
	walks("root ::= a b c \"x\"\na ::= \"a\"?\nb ::= a a\nc ::= (b \"c\")*\n", "acx", 30, 20, true);
}

/* <[id]>: a control token the text cannot write, taken where named and only there (by the
 * mask, the one-token check and a sync from the tokens alone), and a text token named by its
 * id as well as by its text. */
static void token_terminals(void **state)
{
	char gtext[512];
	/* The vocabulary's 597 is a control token, 598 and 599 end tokens. */
	snprintf(gtext, sizeof(gtext), "root ::= <[597]> \"[\" item (\",\" item)* \"]\"\n"
		 "item ::= [a-c]+ | <[597]> \"c\"\n");
	walks(gtext, "[],abc", 40, 30, true);
	/* Token 3 ("a", text) named by its id too; an end token named never matches. */
	snprintf(gtext, sizeof(gtext), "root ::= (<[3]> | \"b\" | <[597]>)+ \"!\" <[599]>?\n");
	walks(gtext, "bcda!", 40, 20, true);

	struct sf_grammar *g = compile("root ::= \"x\"? <[597]> [a-c]+\n");
	assert_true(sf_grammar_names_tokens(g));
	struct sf_grammar *plain = compile("root ::= \"<[597]>\"\n");
	assert_false(sf_grammar_names_tokens(plain));
	sf_grammar_unref(plain);
	/* From the text alone, as the head says it (literals, classes, comments skipped). */
	static const struct {
		const char *text;
		bool names;
	} scan[] = {
		{ "root ::= \"x\"? <[597]> [a-c]+\n", true },
		{ "root ::= \"<[597]>\"\n", false },
		{ "root ::= '<[' \"\\\"<[1]>\"\n", false },
		{ "root ::= [<[] \"]\" # <[3]>\nx ::= \"a\"\n", false },
		{ "root ::= [\\]<] <[3]>\n", true },
		{ "# c\nroot ::= x\nx ::= (<[12]>)*\n", true },
	};
	for (size_t i = 0; i < sizeof(scan) / sizeof(scan[0]); i++)
		if (sf_grammar_text_names_tokens(scan[i].text, strlen(scan[i].text)) != scan[i].names)
			fail_msg("'%s' names tokens: want %d", scan[i].text, scan[i].names);
	struct tvocab tv;
	struct sf_grammar_vocab *v = random_vocab(&tv, 600, "xabc", 3);
	uint64_t mask[10];
	struct sf_gmatch *m;
	struct sf_err err;
	assert_int_equal(sf_gmatch_new(g, &m, &err), 0);
	/* At the start: "x" or the control token, nothing else (no end). */
	assert_int_equal(sf_gmatch_mask(m, v, mask, &err), 0);
	for (uint32_t t = 0; t < 600; t++) {
		bool want = t == 597 || (tv.len[t] == 1 && tv.bytes[t][0] == 'x');
		assert_int_equal((int)(mask[t >> 6] >> (t & 63) & 1), want);
		assert_int_equal(sf_gmatch_allows(m, v, t), want);
	}
	/* x, the control token, a, b: then [a-c] or the end. */
	uint32_t toks[5] = { 0, 597, 1, 2, 599 };
	assert_int_equal(sf_gmatch_sync(m, v, toks, 4, &err), 0);
	assert_true(sf_gmatch_can_end(m));
	assert_false(sf_gmatch_allows(m, v, 597));
	assert_int_equal(sf_gmatch_sync(m, v, toks, 5, &err), 0);
	assert_true(sf_gmatch_done(m));
	/* Where it is not named, the control token is refused by name. */
	uint32_t bad[3] = { 0, 597, 597 };
	assert_int_equal(sf_gmatch_sync(m, v, bad, 3, &err), SF_E_RANGE);
	assert_non_null(strstr(err.msg, "control token"));
	uint32_t skip[2] = { 0, 1 };
	assert_int_equal(sf_gmatch_sync(m, v, skip, 2, &err), SF_E_RANGE);
	/* Bytes alone never make the control token: its text is not its bytes. */
	struct sf_gmatch *mb;
	assert_int_equal(sf_gmatch_new(g, &mb, &err), 0);
	assert_int_equal(sf_gmatch_bytes(mb, (const uint8_t *)"x<|ctl|>a", 9, &err), SF_E_RANGE);
	sf_gmatch_free(mb);
	sf_gmatch_free(m);
	sf_grammar_vocab_free(v);
	tvocab_free(&tv);
	sf_grammar_unref(g);
}

static void bounds_are_errors(void **state)
{
	/* Nesting: each "(" pushes; past the depth bound the bytes are refused as a limit. */
	struct sf_grammar *g = compile("root ::= p\np ::= \"(\" p \")\" | \"x\"\n");
	struct sf_gmatch *m;
	struct sf_err err;
	assert_int_equal(sf_gmatch_new(g, &m, &err), 0);
	uint8_t *deep = malloc(SF_GRAMMAR_MAX_DEPTH + 10);
	memset(deep, '(', SF_GRAMMAR_MAX_DEPTH + 10);
	int rc = sf_gmatch_bytes(m, deep, SF_GRAMMAR_MAX_DEPTH + 10, &err);
	assert_int_equal(rc, SF_E_LIMIT);
	assert_non_null(strstr(err.msg, "nests deeper"));
	/* Unchanged by the refusal: it still takes a short nesting. */
	assert_int_equal(sf_gmatch_bytes(m, (const uint8_t *)"((x))", 5, &err), 0);
	assert_true(sf_gmatch_can_end(m));
	free(deep);
	sf_gmatch_free(m);
	sf_grammar_unref(g);

	/* Ambiguity: (a | a)* doubles its ways each byte... and dedups them, so it stays small;
	 * a grammar whose ways differ by their stacks grows past the bound. */
	g = compile("root ::= x*\nx ::= \"a\" | \"a\" y\ny ::= \"\" | \"\"\n");
	assert_int_equal(sf_gmatch_new(g, &m, &err), 0);
	uint8_t a[200];
	memset(a, 'a', sizeof(a));
	assert_int_equal(sf_gmatch_bytes(m, a, sizeof(a), &err), 0);
	sf_gmatch_free(m);
	sf_grammar_unref(g);
	g = compile("root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\"\n");
	assert_int_equal(sf_gmatch_new(g, &m, &err), 0);
	rc = sf_gmatch_bytes(m, a, 20, &err);
	assert_int_equal(rc, SF_E_LIMIT);
	assert_non_null(strstr(err.msg, "ambiguous"));
	sf_gmatch_free(m);
	sf_grammar_unref(g);
}

static void cache_shares_grammars(void **state)
{
	struct sf_grammar_cache *c;
	struct sf_err err;
	assert_int_equal(sf_grammar_cache_new(2, &c, &err), 0);
	struct sf_grammar *a, *b, *x, *y;
	assert_int_equal(sf_grammar_cache_get(c, JSON, strlen(JSON), &a, &err), 0);
	assert_int_equal(sf_grammar_cache_get(c, JSON, strlen(JSON), &b, &err), 0);
	assert_ptr_equal(a, b);
	assert_int_equal(sf_grammar_cache_get(c, "root ::= \"x\"\n", 13, &x, &err), 0);
	assert_int_equal(sf_grammar_cache_get(c, "root ::= \"y\"\n", 13, &y, &err), 0);
	/* JSON was used first and least recently: dropped from the cache, still held here. */
	struct sf_grammar *a2;
	assert_int_equal(sf_grammar_cache_get(c, JSON, strlen(JSON), &a2, &err), 0);
	assert_ptr_not_equal(a2, a);
	assert_int_equal(sf_grammar_cache_get(c, "root ::= x\n", 11, &x, &err) ? 0 : 1, 0);
	assert_non_null(strstr(err.msg, "never defined"));
	sf_grammar_unref(a);
	sf_grammar_unref(b);
	sf_grammar_unref(a2);
	sf_grammar_unref(x);
	sf_grammar_unref(y);
	sf_grammar_cache_free(c);
}

/* The trie: every text token at the node its bytes lead to, the others nowhere. */
static void trie_holds_every_text_token(void **state)
{
	struct tvocab tv;
	struct sf_grammar_vocab *v = random_vocab(&tv, 2000, "abcdefgh", 99);
	uint32_t nodes;
	assert_int_equal(sf_grammar_vocab_size(v, &nodes), 2000);
	assert_true(nodes > 100);
	/* A grammar that takes any text: every text token allowed, the ends at once too. */
	struct sf_grammar *g = compile("root ::= [a-h]*\n");
	struct sf_gmatch *m;
	struct sf_err err;
	assert_int_equal(sf_gmatch_new(g, &m, &err), 0);
	uint64_t mask[32];
	assert_int_equal(sf_gmatch_mask(m, v, mask, &err), 0);
	for (uint32_t t = 0; t < 2000; t++)
		assert_int_equal((int)(mask[t >> 6] >> (t & 63) & 1), t != 2000 - 3);
	assert_true(sf_grammar_cache_bytes(g) > 0);
	sf_gmatch_free(m);
	sf_grammar_unref(g);
	sf_grammar_vocab_free(v);
	tvocab_free(&tv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(syntax_and_refusals),
		cmocka_unit_test(bytes_taken),
		cmocka_unit_test(masks_match_brute_force),
		cmocka_unit_test(token_terminals),
		cmocka_unit_test(bounds_are_errors),
		cmocka_unit_test(cache_shares_grammars),
		cmocka_unit_test(trie_holds_every_text_token),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
