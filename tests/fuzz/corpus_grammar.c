/* fuzz_grammar's seeds for make_corpus: [seed] grammar NUL output (fuzz_grammar.c). */
#include "fuzz_common.h"

#include <string.h>

static void seed(const char *name, uint8_t first, const char *grammar, const char *out)
{
	struct sf_buf b;
	sf_buf_init(&b, 1u << 16);
	app_u8(&b, first);
	app(&b, grammar, strlen(grammar));
	app_u8(&b, 0);
	app(&b, out, strlen(out));
	put_file(name, &b);
	sf_buf_free(&b);
}

void make_grammar(void)
{
	seed("json", 1,
	     "root ::= object\n"
	     "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
	     "object ::= \"{\" ws (string \":\" ws value (\",\" ws string \":\" ws value)*)? \"}\" ws\n"
	     "array ::= \"[\" ws (value (\",\" ws value)*)? \"]\" ws\n"
	     "string ::= \"\\\"\" ([^\"\\\\\\x00-\\x1f] | \"\\\\\" [\"\\\\/bfnrt])* \"\\\"\" ws\n"
	     "number ::= \"-\"? [0-9]+ (\".\" [0-9]+)? ws\n"
	     "ws ::= [ \\t\\n]{0,4}\n",
	     "{\"a\": [1, \"x\\n\", {\"b\": null}], \"c\": -2.5}");
	seed("classes", 2, "root ::= [a-z\\u00e0-\\u00ff]+ [^\\x00-\\x7f]* \"!\"{1,3}\n",
	     "abc\xc3\xa9\xe4\xb8\x80!!");
	seed("expr", 3,
	     "root ::= e\ne ::= t ((\"+\" | \"-\") t)*\nt ::= [0-9]+ | \"(\" e \")\"\n",
	     "(1+2)-(3+(4))");
	seed("nullable", 4, "root ::= a b a\na ::= \"x\"?\nb ::= (a \"y\")* # c\n", "xyyx");
	seed("tool", 5,
	     "root ::= think? \"<tool_call>\\n\" call \"\\n</tool_call>\"\n"
	     "think ::= \"<think>\" ([^<] | \"<\" [^/])* \"</think>\\n\"\n"
	     "call ::= \"{\\\"name\\\": \\\"f\\\", \\\"arguments\\\": {}}\"\n",
	     "<think>hm</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
	/* Token terminals: the control token 46 (Mistral's [TOOL_CALLS] as it were), a text
	 * token named by its id, an end token named. */
	seed("tokens", 7,
	     "root ::= <[46]> \"[\" call (\", \" call)* \"]\" | <[3]>+ <[47]>?\n"
	     "call ::= \"{\\\"name\\\": \\\"f\\\"}\" | <[46]> [a-z]+\n",
	     "[{\"name\": \"f\"}, {\"name\": \"f\"}]");
	seed("bad", 6, "root ::= x\nx ::= x \"a\" | \"b\"\n", "ba");
}
