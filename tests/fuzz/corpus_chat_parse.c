/* fuzz_chat_parse's seeds for make_corpus: [cfg] reply, one per family and feature
 * (fuzz_chat_parse.c describes cfg). */
#include "fuzz_common.h"

enum { CONTENT = 0, HERMES = 1, LLAMA3 = 2, MISTRAL = 3, TOOLS = 4, THINK = 8, BRACKETS = 16,
       INSIDE = 32, HOOKS = 64, PHI4 = 128, HARMONY = 129 };

void make_chat_parse(void)
{
	put_text("plain", CONTENT, "Hello, world! \xc3\xa9\xff");
	put_text("hermes", HERMES | TOOLS | HOOKS,
		 "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
		 "{\"location\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"t1\", "
		 "\"arguments\": {\"s\": \"</tool_call>{[\"}}\n</tool_call>");
	put_text("qwen3", HERMES | TOOLS | THINK,
		 "<think>\nNeed the weather.\n</think>\n\n<tool_call>\n{\"name\": \"f\", "
		 "\"arguments\": \"{\\\"a\\\": 1}\"}\n</tool_call>");
	put_text("hermes-bad", HERMES | TOOLS, "x <tool_call>{\"name\": 1}</tool_call><tool_ca");
	put_text("r1", CONTENT | INSIDE, "Okay.\n</think>\n\nFour.");
	put_text("llama3", LLAMA3 | TOOLS,
		 "{\"name\": \"get_weather\", \"parameters\": {\"n\": 1e400}}\n{\"type\": \"function\", "
		 "\"name\": \"g\", \"parameters\": {}}");
	put_text("llama3-tag", LLAMA3 | TOOLS,
		 "Searching.<|python_tag|>brave_search.call(query=\"a 'b' (c)\", n=2, x=None)");
	put_text("mistral-nemo", MISTRAL | TOOLS,
		 "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}, \"id\": \"abc123def\"}, "
		 "{\"name\": \"b\", \"arguments\": {\"x\": [1]}}]");
	put_text("mistral-32", MISTRAL | TOOLS | BRACKETS | HOOKS,
		 "[THINK]Hmm.[/THINK]Ok.[TOOL_CALLS]t3[CALL_ID]xyz987uvw[ARGS]{\"q\": \"]\"}"
		 "[TOOL_CALLS]t2[ARGS]{}");
	put_text("phi4", PHI4 | TOOLS | HOOKS,
		 "Checking. functools[{\"name\": \"t3\", \"arguments\": {\"q\": \"]functools[\"}}, "
		 "{\"name\": \"b\", \"parameters\": {\"x\": [[1]]}}] done functools[{\"name\": 1}]");
	put_text("harmony", HARMONY | TOOLS | HOOKS,
		 "<|channel|>analysis<|message|>Need t3.<|end|><|start|>assistant<|channel|>commentary"
		 "<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary to=functions.t3 "
		 "<|constrain|>json<|message|>{\"q\": \"<|call|>\"}<|call|><|start|>assistant to="
		 "functions.t1<|channel|>commentary json<|message|>{}<|call|>");
	put_text("harmony-final", HARMONY,
		 "<|channel|>analysis<|message|>Hm \xc3\xa9<|end|>\n<|start|>assistant<|channel|>final"
		 "<|message|>Hi \xff<|return|><|channel|>bogus<|message|>x");
}
