/* The chat output parsers (src/api/chat_parse.h) on strangers' replies.
 *
 * Input: [cfg] text. cfg bits 0-1: the format (content, hermes, llama3, mistral; bit 7 set:
 * phi4, or harmony when bit 0 is set too); bits 2-5: the flags (TOOLS, THINK, THINK_BRACKETS, IN_REASONING); bit 6: the caller's
 * make_id and tool_known (names t0..t31 known by a fixed mask).
 * Checked: the events follow the rules of tests/unit/chat_parse_rec.h (text valid UTF-8,
 * arguments JSON objects, calls in order); fed byte by byte and in four pseudo-random splits
 * (seeded by the input) the transcript is the one of the whole text; with the content format
 * and no flags the transcript is the text itself, U+FFFD for invalid bytes. */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

#include "../unit/chat_parse_rec.h"

static void same(const char *how, const char *want, char *got)
{
	if (strcmp(want, got))
		fuzz_fail("%s gives another transcript:\n%s\n---- whole:\n%s", how, got, want);
	free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	uint8_t cfg = data[0];
	enum sf_chat_format f = !(cfg & 0x80) ? (enum sf_chat_format)(cfg & 3)
			       : cfg & 1 ? SF_CHAT_FORMAT_HARMONY : SF_CHAT_FORMAT_PHI4;
	unsigned flags = (cfg >> 2) & 15;
	bool hooks = cfg & 0x40;
	const unsigned mask = 0x5a5a5a5a;
	const char *text = (const char *)data + 1;
	size_t len = size - 1;

	char *whole = cp_run(f, flags, hooks, mask, text, len, NULL, 0);
	if (!strncmp(whole, "BROKEN", 6))
		fuzz_fail("%s", whole);
	if (f == SF_CHAT_FORMAT_CONTENT && !flags && len) {
		struct sf_str want = { 0 };
		sf_str_add(&want, "C:", 2);
		sf_utf8_append_valid(&want, (const uint8_t *)text, len);
		if (strcmp(want.p, whole))
			fuzz_fail("plain text is not its own content:\n%s", whole);
		sf_str_free(&want);
	}

	size_t *cuts = malloc((len + 5) * sizeof(*cuts)); /* len - 1 cuts, or 4 */
	if (!cuts)
		fuzz_fail("no memory");
	for (size_t i = 1; i < len; i++)
		cuts[i - 1] = i;
	same("byte by byte", whole, cp_run(f, flags, hooks, mask, text, len, cuts, len ? len - 1 : 0));
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < size; i++)
		h = (h ^ data[i]) * 0x100000001b3ull;
	for (size_t k = 1; k <= 4 && len > 1; k++) {
		size_t at = 0;
		for (size_t i = 0; i < k; i++) {
			h ^= h >> 29;
			h *= 0xbf58476d1ce4e5b9ull;
			at += (size_t)(h >> 33) % (len - at + 1);
			cuts[i] = at;
		}
		same("a random split", whole, cp_run(f, flags, hooks, mask, text, len, cuts, k));
	}
	free(cuts);
	free(whole);
	return 0;
}
