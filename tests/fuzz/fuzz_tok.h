/* fuzz_tok's input format, shared with the corpus maker (the format is described at the top
 * of fuzz_tok.c). */
#ifndef SF_FUZZ_TOK_H
#define SF_FUZZ_TOK_H

/* tokenizer.ggml.pre by bits 1-3 of the first byte (NULL: the key is left out). */
#define FUZZ_TOK_PRES                                                                     \
	{ NULL, "llama-bpe", "qwen2", "qwen35", "gpt-2", "starcoder", "deepseek-llm", "mystery" }

enum {
	FUZZ_TOK_GPT2 = 1,
	FUZZ_TOK_PRE_SHIFT = 1,
	FUZZ_TOK_NO_SCORES = 16,
	FUZZ_TOK_SCORES_I32 = 32,
	FUZZ_TOK_TYPES_F32 = 64,
	FUZZ_TOK_SCORES_SHORT = 128,
};

enum {
	FUZZ_TOK_ADD_BOS_SET = 1,
	FUZZ_TOK_ADD_BOS = 2,
	FUZZ_TOK_NO_SPACE_PREFIX = 4,
	FUZZ_TOK_PHI3 = 8,
	FUZZ_TOK_NO_TOKENS = 16,
	FUZZ_TOK_BYTES = 32,
	FUZZ_TOK_MERGES_U32 = 64,
	FUZZ_TOK_ADD_EOS = 128,
};

#define FUZZ_TOK_ABSENT 255 /* an id byte: the key is left out */

#endif
