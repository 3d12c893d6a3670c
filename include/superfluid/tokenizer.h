/* The tokenizers of GGUF models, built from a file's tokenizer.ggml.* metadata: SentencePiece
 * (tokenizer.ggml.model "llama") and byte-level BPE ("gpt2") with the pre-tokenizers named by
 * tokenizer.ggml.pre. Encoding gives exactly the tokens llama.cpp's llama_tokenize gives for
 * the same text and flags (where it differs, the difference is written down below).
 *
 * SentencePiece: spaces become U+2581, a space goes before the text at its start and after each
 * special token when add_space_prefix is set (its default), pairs of symbols merge best score
 * first while their text is a token, and what is left that is not a token falls back to byte
 * tokens (<0xNN>).
 *
 * Byte-level BPE: the text is cut into words by the pre-tokenizer's regular expressions
 * (PCRE2, UTF mode), each word's bytes are written as GPT-2's printable characters, and pairs
 * merge lowest tokenizer.ggml.merges rank first. Pre-tokenizers (tokenizer.ggml.pre):
 *   llama3, llama-v3, llama-bpe, falcon3, falcon-h1, pixtral, midm-2.0, lfm2, jina-v5-nano,
 *     dbrx, smaug-bpe, glm4, chatglm-bpe              Llama 3's expression
 *   qwen2, deepseek-r1-qwen, kormo, f2llmv2, megrez, stablelm2, hunyuan, solar-open, grok-2
 *                                                     Qwen2's (single digits)
 *   qwen35                                            Qwen3.5's (letters take marks)
 *   gpt-2, phi-2, mpt, olmo, jais, trillion, granite-docling, exaone4, roberta-bpe, jina-*,
 *     gigachat, a.x-4.0, mellum, modern-bert         GPT-2's
 *   starcoder, refact, command-r, smollm, codeshell, exaone, minerva-7b, mellum2
 *                                                     digits apart, then GPT-2's
 *   falcon, deepseek-llm, deepseek-coder             their expression lists
 *   default (or none)                                 llama.cpp's default list
 * Any other name is refused (SF_E_MODEL), as are other tokenizer models.
 *
 * Special tokens (CONTROL, USER_DEFINED, UNKNOWN types) are cut out of the text first, longest
 * first, when specials are parsed; USER_DEFINED ones always are. Text between them is encoded
 * as plain text.
 *
 * A tokenizer does not change after sf_tok_load: any number of threads may encode with it at
 * once. Everything it needs is copied out of the file.
 *
 * Known differences from llama.cpp (whose own Unicode tables follow Unicode 15.1): the
 * pre-tokenizers use PCRE2's Unicode data (10.42: Unicode 14), so characters assigned after
 * Unicode 14 (some 5,000 code points: CJK extensions H and I, Kawi, Nag Mundari, a few emoji)
 * count as unassigned, not letters or digits; input bytes whose decoding llama.cpp aborts on
 * (a 4-byte sequence above U+10FFFF) are read as invalid bytes (U+FFFD); equal-length special
 * tokens are tried in id order (llama.cpp's order there is std::sort's); a byte-level BPE
 * token holding a character outside GPT-2's byte map decodes to that character's UTF-8 (not
 * llama.cpp's "[UNK_BYTE_...]" text); an SPM text byte without a byte token encodes as the
 * unknown token (llama.cpp throws). */
#ifndef SUPERFLUID_TOKENIZER_H
#define SUPERFLUID_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <superfluid/err.h>
#include <superfluid/wire.h>

struct sf_gguf;
struct sf_tok;

/* Limits: a vocabulary over them is refused with SF_E_LIMIT at load, a longer text at encode. */
#define SF_TOK_MAX_VOCAB (1u << 22)         /* tokens */
#define SF_TOK_MAX_TOKEN_LEN 16384          /* bytes of one token's text */
#define SF_TOK_MAX_MERGES (1u << 23)        /* tokenizer.ggml.merges entries */
#define SF_TOK_MAX_TEXT ((size_t)4 << 20)   /* bytes of one text to encode */
#define SF_TOK_MAX_SPECIAL_LENGTHS 512      /* different lengths of special tokens (each is
					     * one pass over a text; real vocabularies have
					     * up to a few dozen) */

/* No such token (an id the model does not have). */
#define SF_TOK_NONE UINT32_MAX

enum sf_tok_kind {
	SF_TOK_SPM = 1, /* SentencePiece ("llama") */
	SF_TOK_BPE = 2, /* byte-level BPE ("gpt2") */
};

/* A token's attributes (the bits of llama.cpp's llama_token_attr): the file's token type, as
 * llama.cpp adjusts it (end tokens become CONTROL, "unused" control tokens UNUSED, ...). */
enum sf_tok_attr {
	SF_TOK_ATTR_UNKNOWN = 1u << 0,
	SF_TOK_ATTR_UNUSED = 1u << 1,
	SF_TOK_ATTR_NORMAL = 1u << 2,
	SF_TOK_ATTR_CONTROL = 1u << 3,
	SF_TOK_ATTR_USER_DEFINED = 1u << 4,
	SF_TOK_ATTR_BYTE = 1u << 5,
	SF_TOK_ATTR_LSTRIP = 1u << 7, /* whitespace before it is dropped when it is cut out */
	SF_TOK_ATTR_RSTRIP = 1u << 8, /* whitespace after it is dropped when it is cut out */
};

/* A special token: one the encoder cuts out of the text (see above). text is NUL-terminated
 * for convenience but len is its length (a stranger's token may hold a NUL). */
struct sf_tok_special {
	const char *text;
	size_t len;
	uint32_t id;
	uint32_t attr; /* enum sf_tok_attr */
};

/* Builds the tokenizer described by g's tokenizer.ggml.* metadata (g may be closed after).
 * SF_E_NOT_FOUND / SF_E_TYPE naming a missing or mistyped key, SF_E_MODEL for a tokenizer model
 * or pre-tokenizer this code does not have, SF_E_FORMAT for contradictory metadata (fewer
 * scores or types than tokens, a token twice), SF_E_LIMIT past the limits above, SF_E_NOMEM. */
int sf_tok_load(const struct sf_gguf *g, struct sf_tok **out, struct sf_err *err)
	__attribute__((warn_unused_result));

/* t's tokenizer digest over its token bytes (sf_tok_token_bytes), as a fleet link states it
 * (DESIGN.md fleet link point 3); libsodium must be initialised. */
uint64_t sf_tok_digest(const struct sf_tok *t);

/* t's full digest (protocol 7, PROTOCOL.md 6.6): SHA-256 over everything that changes an
 * encoding: the kind and the pre-tokenizer (by their names: aliases of one pre-tokenizer
 * agree), each token's text, score and attributes, the role ids held (BOS, EOS, ... by their
 * GGUF keys), the add_bos/add_eos/add_space_prefix/ignore_merges flags and the merges in rank
 * order; never 0 when it returns 0. Two tokenizers of one digest encode alike; no internal
 * numbering enters it (a test pins its value). O(tokens + merges); SF_E_NOMEM. libsodium must
 * be initialised. */
int sf_tok_digest_full(const struct sf_tok *t, uint64_t *digest, struct sf_err *err)
	__attribute__((warn_unused_result));

/* Frees t. NULL is a no-op. */
void sf_tok_free(struct sf_tok *t);

/* Encodes len bytes of text (any bytes; invalid UTF-8 is encoded as llama.cpp does) into out.
 * parse_special: special tokens' texts in the text become those tokens (else only
 * USER_DEFINED ones do). add_special: the model's BOS first when its add_bos_token is set,
 * and its EOS last when add_eos_token is set (llama.cpp's add_special).
 * *n_out is the token count; when it is over cap, out holds the first cap tokens and the call
 * returns SF_E_LIMIT (nothing else is wrong then). The count is at most 6 * len + 2 (byte-level
 * BPE's worst: a bad byte is U+FFFD, whose three bytes may each fall back to two single-byte
 * tokens). SF_E_LIMIT also for a text over SF_TOK_MAX_TEXT (*n_out 0), SF_E_NOMEM.
 * Time is O(n log n) in the text's length; the call's scratch memory, freed before it returns,
 * is at most about 50 bytes per byte of its longest run of text between special tokens. */
int sf_tok_encode(const struct sf_tok *t, const char *text, size_t len, bool parse_special,
		  bool add_special, uint32_t *out, size_t cap, size_t *n_out, struct sf_err *err)
	__attribute__((warn_unused_result));

/* Encodes pieces[0..n): a special one must be exactly the text of one control or user-defined
 * token (else SF_E_RANGE naming the piece), the others are plain text (no special parsing, no
 * BOS). *n_out and SF_E_LIMIT as sf_tok_encode says, for all the pieces' tokens together. */
int sf_tok_encode_pieces(const struct sf_tok *t, const struct sf_piece *pieces, size_t n,
			 uint32_t *out, size_t cap, size_t *n_out, struct sf_err *err)
	__attribute__((warn_unused_result));

/* The bytes token id stands for in decoded text (llama.cpp's token_to_piece with special
 * set): a special token's text, a byte token's byte, an SPM token with U+2581 as spaces, a BPE
 * token through GPT-2's byte map; empty for UNUSED and undefined types. NULL for an id
 * past the vocabulary. Valid until sf_tok_free. */
const uint8_t *sf_tok_token_bytes(const struct sf_tok *t, uint32_t id, size_t *len);

/* The token's text as the vocabulary holds it; NULL past the vocabulary. */
const char *sf_tok_token_text(const struct sf_tok *t, uint32_t id, size_t *len);

/* The token's attributes (enum sf_tok_attr); 0 past the vocabulary. */
uint32_t sf_tok_token_attr(const struct sf_tok *t, uint32_t id);

/* The token whose text is exactly text[0..len): 0, or SF_E_NOT_FOUND. */
int sf_tok_find(const struct sf_tok *t, const char *text, size_t len, uint32_t *id);

uint32_t sf_tok_n_vocab(const struct sf_tok *t);
enum sf_tok_kind sf_tok_kind(const struct sf_tok *t);
/* The pre-tokenizer's name as the file gave it ("" for SPM or none). */
const char *sf_tok_pre(const struct sf_tok *t);

/* Token ids of the model's roles, SF_TOK_NONE when it has none. */
uint32_t sf_tok_bos(const struct sf_tok *t);
uint32_t sf_tok_eos(const struct sf_tok *t);
uint32_t sf_tok_eot(const struct sf_tok *t); /* end of turn (<|eot_id|>, <|im_end|>, ...) */
uint32_t sf_tok_eom(const struct sf_tok *t); /* end of message (<|eom_id|>) */
uint32_t sf_tok_unk(const struct sf_tok *t);
uint32_t sf_tok_pad(const struct sf_tok *t);
uint32_t sf_tok_sep(const struct sf_tok *t);

/* Whether encoding with add_special puts the BOS first / the EOS last. */
bool sf_tok_add_bos(const struct sf_tok *t);
bool sf_tok_add_eos(const struct sf_tok *t);

/* Whether id ends a generation: EOS, EOT, EOM, the FIM pad/repo/separator tokens and the end
 * tokens llama.cpp knows by their text (<|endoftext|>, <|im_end|>, <end_of_turn>, ...). */
bool sf_tok_is_eog(const struct sf_tok *t, uint32_t id);

/* The special tokens, in id order (tokenizer-owned). */
void sf_tok_specials(const struct sf_tok *t, const struct sf_tok_special **list, size_t *n);

#endif
