/* The context a chat template renders, as Hugging Face's apply_chat_template (and vLLM) give
 * it: the request's messages (an assistant's tool_calls with their arguments as objects, as
 * templates expect; the content as vLLM gives it, below), its tools, add_generation_prompt, bos_token and eos_token, and the
 * members of chat_template_kwargs (enable_thinking, ...) at the top level. */
#ifndef SF_API_CHAT_CONTEXT_H
#define SF_API_CHAT_CONTEXT_H

#include <stdbool.h>

#include <jansson.h>

/* The context of chat_json (sf_api_request.chat_json); bos and eos are the tokens' texts ("" when
 * the model has none). Content: with parts (the template walks a content list:
 * sf_jinja_walks_content), every message's a list of {"type": "text", "text"} parts (a string
 * one part, null none); without, a string (text parts joined with "\n", null ""). A new
 * reference, or NULL when chat_json is not an object holding an array of message objects or
 * memory is short. how (SF_CHAT_CTX_*):
 *   TOOLS_IN_SYSTEM  (a template that reads the tools from a system message, Phi-4-mini's:
 *                    sf_chat_format_tools_in_system) the request's tools also go to the first
 *                    system message's "tools" as the JSON text of their function objects,
 *                    unless it has its own (one of empty content is put first when there is
 *                    none);
 *   THINKING         (a template that reads an assistant's reasoning from "thinking", gpt-oss's:
 *                    sf_chat_format_thinking_field) an assistant message's string
 *                    reasoning_content is also its "thinking", unless it has one, or has tool
 *                    calls beside non-empty content (which the template writes as their
 *                    reasoning, and refuses beside a thinking). */
#define SF_CHAT_CTX_TOOLS_IN_SYSTEM 1u
#define SF_CHAT_CTX_THINKING 2u
json_t *sf_chat_context(const char *chat_json, const char *bos, const char *eos,
			bool add_generation_prompt, bool parts, unsigned how);

/* The context of a later turn of a session: the messages past (a user's and an assistant's
 * turn whose contents are the two markers given) then chat_json's messages, so that the text
 * after the assistant marker is what the turn adds to the session (chat_template.c). NULL as
 * sf_chat_context. */
json_t *sf_chat_context_later(const char *chat_json, const char *bos, const char *eos,
			      bool add_generation_prompt, bool parts, unsigned how,
			      const char *user_marker, const char *assistant_marker);

#endif
