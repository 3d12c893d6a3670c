/* Every message of the fleet link, as one list of fields each. The C structs in wire.h and the
 * codec's field tables in src/wire/schema_tables.c are both made from these lists, so the two
 * cannot drift apart. docs/PROTOCOL.md describes the bytes.
 *
 * A list takes F(T, KIND, name, a, b) for a field and W(T, on, val, KIND, name, a, b) for a
 * field present only when the earlier u8/enum field `on` equals val. W(T, since, N, KIND, name,
 * a, b) is a field added in protocol version N: on the wire only on links of version N or
 * later, so the bytes of earlier versions stay what they were; below N the decoder gives it as
 * zero and the encoder refuses a value that is not zero (SF_E_VERSION), so nothing is lost
 * unseen. Zero must therefore mean "off" for such a field. KINDs:
 *   U8 U16 U32 U64 F32 BOOL   fixed-size little-endian scalars (BOOL: one byte, 0 or 1)
 *   ENUM  one byte, at most a
 *   STR   u32 length + bytes, at most a bytes, no NUL byte; decoded NUL-terminated
 *   BYTES u32 length + bytes, at most a bytes
 *   HASH  32 bytes (a SHA-256)
 *   U32S  u32 count + count u32s, at most a
 *   ARR   u32 count + count elements of struct sf_<a>, at most b
 *   SUB   one struct sf_<a>, inline
 */
#ifndef SUPERFLUID_WIRE_MSGS_H
#define SUPERFLUID_WIRE_MSGS_H

/* Limits on fields. A frame's payload limit (SF_FRAME_PAYLOAD_MAX) bounds everything too. */
#define SF_MAX_NAME 256             /* identities, model and codec names */
#define SF_MAX_REASON 1024          /* operator-facing sentences */
#define SF_MAX_TEXT (8u << 20)      /* text to tokenize, chat templates */
#define SF_MAX_TOKENS (4u << 20)    /* tokens in one append or one response */
#define SF_MAX_EVENT_TOKENS 65536   /* tokens in one token event */
#define SF_MAX_TOP_LOGPROBS 20
#define SF_MAX_LOGIT_BIAS 1024      /* logit_bias pairs of one session's sampling */
#define SF_MAX_BATCH 65536          /* entries in one coalesced batch (events, acks, leases) */
#define SF_MAX_MODELS 1024
#define SF_MAX_VOCAB (1u << 21)
#define SF_MAX_TOKEN_BYTES 1024     /* bytes of one vocabulary entry */
#define SF_MAX_SPECIALS 65536
#define SF_MAX_TEMPLATES 64
#define SF_MAX_RECONCILE (1u << 20) /* sessions in one reconcile */
#define SF_MAX_RANGES 4096          /* generations or retry ranges of one session */
#define SF_MAX_BLOB_CHUNK (4u << 20)
#define SF_MAX_BLOB_REFS 64
#define SF_MAX_STOPS 16
#define SF_MAX_OPAQUE (8u << 20)    /* state operation arguments and results, hidden state */
#define SF_MAX_QOS 3
#define SF_MAX_PREFIX_HASHES 65536  /* page hashes in one PREFIX_CACHE list */
#define SF_MAX_GRAMMAR (1u << 20)   /* a session's grammar (GBNF text, superfluid/grammar.h) */

/* Token event kinds (sf_token_event.kind). */
enum { SF_EVENT_TOKENS = 0, SF_EVENT_LOGPROBS = 1, SF_EVENT_FINISH = 2 };
/* Finish reasons (the payload of a finish event). */
enum {
	SF_FINISH_STOP = 0,      /* end-of-sequence or a stop sequence */
	SF_FINISH_LENGTH = 1,    /* max_new_tokens reached */
	SF_FINISH_WALL = 2,      /* max_wall_ms reached */
	SF_FINISH_CANCELLED = 3,
	SF_FINISH_ERROR = 4,
};
#define SF_FINISH_EXPIRED 0xffffffffu /* the session's lease ran out */
/* Tokenize modes. */
enum { SF_TOKENIZE_ENCODE = 0, SF_TOKENIZE_PLAIN = 1, SF_TOKENIZE_PIECES = 2 };
/* Stage forward results. */
enum { SF_STAGE_HIDDEN = 0, SF_STAGE_TOKEN = 1, SF_STAGE_ERROR = 2,
       SF_STAGE_HELD = 3 /* version 5: the pipe's context holds fewer positions than `from` */ };
/* HELLO flags. */
#define SF_HELLO_ENCRYPTED 1u /* the sender believes the link is sealed; bound into the check */

/* ---- parts used inside messages ---- */

#define SF_FIELDS_capacity(F, W, T)                                                          \
	F(T, U32, max_sessions, 0, 0)                                                        \
	F(T, U32, free_sessions, 0, 0)                                                       \
	F(T, U64, ctx_bytes_total, 0, 0)                                                     \
	F(T, U64, ctx_bytes_free, 0, 0)                                                      \
	F(T, U32, batch_size, 0, 0)                                                          \
	F(T, U32, batch_running, 0, 0)                                                       \
	F(T, U32, queued, 0, 0)

#define SF_FIELDS_model_info(F, W, T)                                                        \
	F(T, STR, name, SF_MAX_NAME, 0)                                                      \
	F(T, U64, tokenizer_digest, 0, 0)                                                    \
	F(T, U32, n_layers, 0, 0)                                                            \
	F(T, U32, ctx_len, 0, 0)                                                             \
	F(T, U32, vocab_size, 0, 0)

#define SF_FIELDS_logit_bias(F, W, T)                                                        \
	F(T, U32, token, 0, 0)                                                               \
	F(T, F32, bias, 0, 0)

/* The sampler's parameters (superfluid/sampler.h says what each does). Version 4 added all but
 * the first four; each is 0 when off (repetition_penalty 0 means 1, no penalty). Version 6:
 * ignore_eos (the end-of-generation tokens are never drawn: llama.cpp's and vLLM's ignore_eos)
 * and min_tokens (nor before a generation drew that many: vLLM's), grammar (GBNF text: each
 * draw only takes a token that continues a valid output, superfluid/grammar.h; "" none).
 * Version 7: grammar_tokens (the grammar names tokens by id, <[id]>: a control token such as
 * Mistral's [TOOL_CALLS]; only a node of version 7 or later takes such a grammar). */
#define SF_FIELDS_sampling(F, W, T)                                                          \
	F(T, F32, temperature, 0, 0)                                                         \
	F(T, F32, top_p, 0, 0)                                                               \
	F(T, U32, top_k, 0, 0)                                                               \
	F(T, U64, seed, 0, 0)                                                                \
	W(T, since, 4, F32, min_p, 0, 0)                                                     \
	W(T, since, 4, F32, presence_penalty, 0, 0)                                          \
	W(T, since, 4, F32, frequency_penalty, 0, 0)                                         \
	W(T, since, 4, F32, repetition_penalty, 0, 0)                                        \
	W(T, since, 4, U32, repeat_last_n, 0, 0)                                             \
	W(T, since, 4, ARR, logit_bias, logit_bias, SF_MAX_LOGIT_BIAS)                     \
	W(T, since, 6, BOOL, ignore_eos, 0, 0)                                               \
	W(T, since, 6, U32, min_tokens, 0, 0)                                                \
	W(T, since, 6, STR, grammar, SF_MAX_GRAMMAR, 0)                                     \
	W(T, since, 7, BOOL, grammar_tokens, 0, 0)

#define SF_FIELDS_span(F, W, T)                                                              \
	F(T, U32, start, 0, 0)                                                               \
	F(T, U32, len, 0, 0)                                                                 \
	F(T, ENUM, kind, 1, 0)

#define SF_FIELDS_blob_ref(F, W, T) F(T, HASH, sha256, 0, 0)

#define SF_FIELDS_top_logprob(F, W, T)                                                       \
	F(T, U32, token, 0, 0)                                                               \
	F(T, F32, logprob, 0, 0)

#define SF_FIELDS_logprob(F, W, T)                                                           \
	F(T, U32, token, 0, 0)                                                               \
	F(T, F32, logprob, 0, 0)                                                             \
	F(T, ARR, top, top_logprob, SF_MAX_TOP_LOGPROBS)

#define SF_FIELDS_token_event(F, W, T)                                                       \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, U64, generation_id, 0, 0)                                                       \
	F(T, U64, epoch, 0, 0)                                                               \
	F(T, U64, seq, 0, 0)                                                                 \
	F(T, ENUM, kind, SF_EVENT_FINISH, 0)                                                 \
	W(T, kind, SF_EVENT_TOKENS, U32S, tokens, SF_MAX_EVENT_TOKENS, 0)                    \
	W(T, kind, SF_EVENT_LOGPROBS, ARR, logprobs, logprob, SF_MAX_EVENT_TOKENS)           \
	W(T, kind, SF_EVENT_FINISH, U32, reason, 0, 0)

#define SF_FIELDS_watermark(F, W, T)                                                         \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, U64, generation_id, 0, 0)                                                       \
	F(T, U64, epoch, 0, 0)                                                               \
	F(T, U64, seq, 0, 0)

#define SF_FIELDS_lease_ask(F, W, T)                                                         \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, U64, epoch, 0, 0)

#define SF_FIELDS_lease_answer(F, W, T)                                                      \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, U64, epoch, 0, 0)                                                               \
	F(T, BOOL, granted, 0, 0)                                                            \
	F(T, U32, lease_ms, 0, 0)

#define SF_FIELDS_reconcile_gen(F, W, T)                                                     \
	F(T, U64, generation_id, 0, 0)                                                       \
	F(T, U64, next_seq, 0, 0)                                                            \
	F(T, BOOL, finished, 0, 0)

#define SF_FIELDS_reconcile_session(F, W, T)                                                 \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, U64, epoch, 0, 0)                                                               \
	F(T, ARR, gens, reconcile_gen, SF_MAX_RANGES)

#define SF_FIELDS_retry_range(F, W, T)                                                       \
	F(T, U64, generation_id, 0, 0)                                                       \
	F(T, U64, from_seq, 0, 0)                                                            \
	F(T, U64, to_seq, 0, 0)

#define SF_FIELDS_reconcile_held(F, W, T)                                                    \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, U64, epoch, 0, 0)                                                               \
	F(T, BOOL, held, 0, 0)                                                               \
	F(T, ARR, ranges, retry_range, SF_MAX_RANGES)

/* Version 7: full, the model's full tokenizer digest (sf_tok_digest_full, PROTOCOL.md 6.6) over
 * everything that changes an encoding; 0: not stated (an engine without such a tokenizer). */
#define SF_FIELDS_model_digest(F, W, T)                                                      \
	F(T, STR, model, SF_MAX_NAME, 0)                                                     \
	F(T, U64, digest, 0, 0)                                                              \
	W(T, since, 7, U64, full, 0, 0)

#define SF_FIELDS_vocab_entry(F, W, T) F(T, BYTES, bytes, SF_MAX_TOKEN_BYTES, 0)

#define SF_FIELDS_special(F, W, T)                                                           \
	F(T, STR, name, SF_MAX_NAME, 0)                                                      \
	F(T, U32, token, 0, 0)

#define SF_FIELDS_named_template(F, W, T)                                                    \
	F(T, STR, name, SF_MAX_NAME, 0)                                                      \
	F(T, STR, text, SF_MAX_TEXT, 0)

#define SF_FIELDS_piece(F, W, T)                                                             \
	F(T, STR, text, SF_MAX_TEXT, 0)                                                      \
	F(T, BOOL, special, 0, 0)

#define SF_FIELDS_stop(F, W, T) F(T, U32S, tokens, 256, 0)

/* Version 6: prefix reuse (PROTOCOL.md 9.10). A page of the node's index, by its chain hash. */
#define SF_FIELDS_prefix_hash(F, W, T) F(T, U64, hash, 0, 0)

/* What one append of a session cost: prompt positions the node had (kept from the session's
 * context or adopted from its index) and those it computes. */
#define SF_FIELDS_prefix_use(F, W, T)                                                        \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, U64, epoch, 0, 0)                                                               \
	F(T, U32, reused, 0, 0)                                                              \
	F(T, U32, computed, 0, 0)

#define SF_FIELDS_segment(F, W, T)                                                           \
	F(T, U64, seq, 0, 0)                                                                 \
	F(T, U64, start_ms, 0, 0)                                                            \
	F(T, U64, end_ms, 0, 0)                                                              \
	F(T, STR, text, SF_MAX_TEXT, 0)

/* X(part) for each part above, inner parts first. */
#define SF_PARTS(X)                                                                          \
	X(capacity) X(model_info) X(logit_bias) X(sampling) X(span) X(blob_ref)              \
	X(top_logprob) X(logprob) X(token_event) X(watermark) X(lease_ask) X(lease_answer)   \
	X(reconcile_gen)                                                                     \
	X(reconcile_session) X(retry_range) X(reconcile_held) X(model_digest) X(vocab_entry) \
	X(special) X(named_template) X(piece) X(stop) X(segment) X(prefix_hash) X(prefix_use)

/* ---- messages ---- */

#define SF_FIELDS_hello(F, W, T)                                                             \
	F(T, U32, version_min, 0, 0)                                                         \
	F(T, U32, version_max, 0, 0)                                                         \
	F(T, U32, flags, 0, 0)                                                               \
	F(T, STR, identity, SF_MAX_NAME, 0)                                                  \
	F(T, U32, heartbeat_ms, 0, 0)                                                        \
	F(T, U32, silence_ms, 0, 0)

#define SF_FIELDS_hello_ack(F, W, T)                                                         \
	F(T, U32, version, 0, 0)                                                             \
	F(T, U32, flags, 0, 0)                                                               \
	F(T, STR, identity, SF_MAX_NAME, 0)                                                  \
	F(T, SUB, capacity, capacity, 0)                                                     \
	F(T, ARR, models, model_info, SF_MAX_MODELS)

#define SF_FIELDS_goodbye(F, W, T)                                                           \
	F(T, U32, code, 0, 0)                                                                \
	F(T, STR, reason, SF_MAX_REASON, 0)

#define SF_FIELDS_heartbeat(F, W, T) F(T, U64, sent_ms, 0, 0)

#define SF_FIELDS_control_ask(F, W, T)                                                       \
	F(T, U64, request_id, 0, 0)                                                          \
	F(T, ENUM, purpose, 0, 0)

#define SF_FIELDS_refused(F, W, T)                                                           \
	F(T, U64, command_id, 0, 0)                                                          \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, U32, code, 0, 0)                                                                \
	F(T, STR, reason, SF_MAX_REASON, 0)

#define SF_FIELDS_tokenizer(F, W, T) F(T, ARR, models, model_digest, SF_MAX_MODELS)

#define SF_FIELDS_tokenizer_export_req(F, W, T)                                              \
	F(T, U64, request_id, 0, 0)                                                          \
	F(T, STR, model, SF_MAX_NAME, 0)

#define SF_FIELDS_tokenizer_export(F, W, T)                                                  \
	F(T, U64, request_id, 0, 0)                                                          \
	F(T, STR, model, SF_MAX_NAME, 0)                                                     \
	F(T, U64, digest, 0, 0)                                                              \
	F(T, ARR, vocab, vocab_entry, SF_MAX_VOCAB)                                          \
	F(T, ARR, specials, special, SF_MAX_SPECIALS)                                        \
	F(T, BOOL, has_bos, 0, 0)                                                            \
	F(T, U32, bos, 0, 0)                                                                 \
	F(T, U32, eos, 0, 0)                                                                 \
	F(T, STR, chat_template, SF_MAX_TEXT, 0)                                             \
	F(T, ARR, templates, named_template, SF_MAX_TEMPLATES)                               \
	F(T, BOOL, plain, 0, 0)                                                              \
	F(T, BOOL, pieces, 0, 0)

/* Version 5: after its export, the tokenizer's own file (the GGUF pairs it loads from), so that
 * a head encodes as the node does (PROTOCOL.md 9.7). */
#define SF_FIELDS_tokenizer_file(F, W, T)                                                    \
	F(T, STR, model, SF_MAX_NAME, 0)                                                     \
	F(T, U64, digest, 0, 0)                                                              \
	F(T, BYTES, file, SF_MAX_OPAQUE, 0)

#define SF_FIELDS_tokenize_req(F, W, T)                                                      \
	F(T, U64, request_id, 0, 0)                                                          \
	F(T, STR, model, SF_MAX_NAME, 0)                                                     \
	F(T, ENUM, mode, SF_TOKENIZE_PIECES, 0)                                              \
	W(T, mode, SF_TOKENIZE_ENCODE, STR, text, SF_MAX_TEXT, 0)                            \
	W(T, mode, SF_TOKENIZE_PLAIN, STR, plain_text, SF_MAX_TEXT, 0)                       \
	W(T, mode, SF_TOKENIZE_PIECES, ARR, pieces, piece, SF_MAX_BATCH)

#define SF_FIELDS_tokenize_resp(F, W, T)                                                     \
	F(T, U64, request_id, 0, 0)                                                          \
	F(T, BOOL, ok, 0, 0)                                                                 \
	F(T, U32S, tokens, SF_MAX_TOKENS, 0)                                                 \
	F(T, STR, error, SF_MAX_REASON, 0)

#define SF_FIELDS_session_assign(F, W, T)                                                    \
	F(T, U64, command_id, 0, 0)                                                          \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, U64, epoch, 0, 0)                                                               \
	F(T, U32, lease_ms, 0, 0)                                                            \
	F(T, ENUM, qos, SF_MAX_QOS, 0)                                                       \
	F(T, STR, model, SF_MAX_NAME, 0)                                                     \
	F(T, STR, codec, SF_MAX_NAME, 0)                                                     \
	F(T, SUB, sampling, sampling, 0)                                                     \
	W(T, since, 6, U64, cache_ns, 0, 0)

#define SF_FIELDS_session_append(F, W, T)                                                    \
	F(T, U64, command_id, 0, 0)                                                          \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, U64, epoch, 0, 0)                                                               \
	F(T, U32S, tokens, SF_MAX_TOKENS, 0)                                                 \
	F(T, ARR, spans, span, SF_MAX_RANGES)                                                \
	F(T, ARR, media, blob_ref, SF_MAX_BLOB_REFS)

#define SF_FIELDS_session_revoke(F, W, T)                                                    \
	F(T, U64, command_id, 0, 0)                                                          \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, U64, epoch, 0, 0)                                                               \
	F(T, BOOL, park, 0, 0)

#define SF_FIELDS_generate_opts(F, W, T)                                                     \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, U64, generation_id, 0, 0)                                                       \
	F(T, BOOL, logprobs, 0, 0)                                                           \
	F(T, ENUM, top_logprobs, SF_MAX_TOP_LOGPROBS, 0)                                     \
	F(T, ARR, stops, stop, SF_MAX_STOPS)                                                 \
	F(T, ARR, blobs, blob_ref, SF_MAX_BLOB_REFS)

/* Version 6: resumed, the tokens at the end of the session's content that this generation
 * made in an earlier run (a run the head continues after a failure): its grammar reads them. */
#define SF_FIELDS_generate(F, W, T)                                                          \
	F(T, U64, command_id, 0, 0)                                                          \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, U64, epoch, 0, 0)                                                               \
	F(T, U64, generation_id, 0, 0)                                                       \
	F(T, U32, max_new_tokens, 0, 0)                                                      \
	F(T, U32, max_wall_ms, 0, 0)                                                         \
	W(T, since, 6, U32, resumed, 0, 0)

#define SF_FIELDS_cancel(F, W, T)                                                            \
	F(T, U64, command_id, 0, 0)                                                          \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, U64, generation_id, 0, 0)

#define SF_FIELDS_token_events(F, W, T) F(T, ARR, events, token_event, SF_MAX_BATCH)
#define SF_FIELDS_watermark_ack(F, W, T) F(T, ARR, marks, watermark, SF_MAX_BATCH)
#define SF_FIELDS_lease_renew(F, W, T) F(T, ARR, leases, lease_ask, SF_MAX_BATCH)
#define SF_FIELDS_lease_grant(F, W, T) F(T, ARR, leases, lease_answer, SF_MAX_BATCH)

#define SF_FIELDS_node_status(F, W, T)                                                       \
	F(T, SUB, capacity, capacity, 0)                                                     \
	F(T, ARR, models, model_info, SF_MAX_MODELS)

/* Version 6: what the node's index of pages gained and lost since its last report (reset:
 * forget what it said before; the list that follows, in this frame and the next ones, is the
 * whole index), and what each append cost (PROTOCOL.md 9.10). */
#define SF_FIELDS_prefix_cache(F, W, T)                                                      \
	F(T, BOOL, reset, 0, 0)                                                              \
	F(T, ARR, added, prefix_hash, SF_MAX_PREFIX_HASHES)                                  \
	F(T, ARR, evicted, prefix_hash, SF_MAX_PREFIX_HASHES)                                \
	F(T, ARR, uses, prefix_use, SF_MAX_BATCH)

#define SF_FIELDS_reconcile(F, W, T) F(T, ARR, sessions, reconcile_session, SF_MAX_RECONCILE)
#define SF_FIELDS_reconcile_ack(F, W, T) F(T, ARR, sessions, reconcile_held, SF_MAX_RECONCILE)

#define SF_FIELDS_xfer_begin(F, W, T)                                                        \
	F(T, U64, transfer_id, 0, 0)                                                         \
	F(T, U64, total_len, 0, 0)                                                           \
	F(T, HASH, sha256, 0, 0)                                                             \
	F(T, U32, content_type, 0, 0)

#define SF_FIELDS_xfer_chunk(F, W, T)                                                        \
	F(T, U64, transfer_id, 0, 0)                                                         \
	F(T, U64, offset, 0, 0)                                                              \
	F(T, BYTES, data, SF_MAX_BLOB_CHUNK, 0)

#define SF_FIELDS_xfer_end(F, W, T) F(T, U64, transfer_id, 0, 0)

#define SF_FIELDS_xfer_result(F, W, T)                                                       \
	F(T, U64, transfer_id, 0, 0)                                                         \
	F(T, HASH, sha256, 0, 0)                                                             \
	F(T, BOOL, ok, 0, 0)                                                                 \
	F(T, STR, reason, SF_MAX_REASON, 0)

#define SF_FIELDS_state_op_req(F, W, T)                                                      \
	F(T, U64, request_id, 0, 0)                                                          \
	F(T, U64, session_id, 0, 0)                                                          \
	F(T, STR, op, SF_MAX_NAME, 0)                                                        \
	F(T, BYTES, args, SF_MAX_OPAQUE, 0)                                                  \
	F(T, ARR, blobs, blob_ref, SF_MAX_BLOB_REFS)

#define SF_FIELDS_state_op_segment(F, W, T)                                                  \
	F(T, U64, request_id, 0, 0)                                                          \
	F(T, SUB, segment, segment, 0)

#define SF_FIELDS_state_op_resp(F, W, T)                                                     \
	F(T, U64, request_id, 0, 0)                                                          \
	F(T, BOOL, ok, 0, 0)                                                                 \
	F(T, BYTES, result, SF_MAX_OPAQUE, 0)                                                \
	F(T, STR, error, SF_MAX_REASON, 0)

/* Version 5 added the pipe: pipe_id 0 is a stateless step (the whole context); otherwise the
 * stage keeps the pipe's context and the step is positions from `from` on (section 9.8). */
#define SF_FIELDS_stage_forward_req(F, W, T)                                                 \
	F(T, U64, request_id, 0, 0)                                                          \
	F(T, U32S, tokens, SF_MAX_TOKENS, 0)                                                 \
	F(T, U32, start_layer, 0, 0)                                                         \
	F(T, U32, end_layer, 0, 0)                                                           \
	F(T, BOOL, has_hidden, 0, 0)                                                         \
	F(T, BYTES, hidden, SF_MAX_OPAQUE, 0)                                                \
	W(T, since, 5, U64, pipe_id, 0, 0)                                                   \
	W(T, since, 5, U32, from, 0, 0)                                                      \
	W(T, since, 5, U32, generated, 0, 0)                                                 \
	W(T, since, 5, SUB, sampling, sampling, 0)                                           \
	W(T, since, 5, BOOL, logprobs, 0, 0)                                                 \
	W(T, since, 5, U8, top_logprobs, 0, 0)

#define SF_FIELDS_stage_forward_resp(F, W, T)                                                \
	F(T, U64, request_id, 0, 0)                                                          \
	F(T, ENUM, kind, SF_STAGE_HELD, 0)                                                   \
	W(T, kind, SF_STAGE_HIDDEN, BYTES, hidden, SF_MAX_OPAQUE, 0)                         \
	W(T, kind, SF_STAGE_TOKEN, U32, token, 0, 0)                                         \
	W(T, kind, SF_STAGE_ERROR, STR, error, SF_MAX_REASON, 0)                             \
	W(T, kind, SF_STAGE_HELD, U32, held, 0, 0)                                           \
	W(T, since, 5, SUB, logprob, logprob, 0)

#define SF_FIELDS_stage_release(F, W, T) F(T, U64, pipe_id, 0, 0)

/* Who sends a message: the head, the node, or either. */
#define SF_DIR_H2N 1
#define SF_DIR_N2H 2
#define SF_DIR_BOTH 3

/* M(NAME, name, type code, first version that has it, who sends it), in type order. */
#define SF_MESSAGES(M)                                                                       \
	M(HELLO, hello, 0x0001, 2, SF_DIR_H2N)                                              \
	M(HELLO_ACK, hello_ack, 0x0002, 2, SF_DIR_N2H)                                      \
	M(GOODBYE, goodbye, 0x0003, 2, SF_DIR_BOTH)                                         \
	M(HEARTBEAT, heartbeat, 0x0004, 2, SF_DIR_BOTH)                                     \
	M(CONTROL_ASK, control_ask, 0x0005, 2, SF_DIR_H2N)                                  \
	M(REFUSED, refused, 0x0006, 2, SF_DIR_N2H)                                          \
	M(TOKENIZER, tokenizer, 0x0010, 3, SF_DIR_N2H)                                      \
	M(TOKENIZER_EXPORT_REQ, tokenizer_export_req, 0x0011, 3, SF_DIR_H2N)                \
	M(TOKENIZER_EXPORT, tokenizer_export, 0x0012, 3, SF_DIR_N2H)                        \
	M(TOKENIZE_REQ, tokenize_req, 0x0013, 3, SF_DIR_H2N)                                \
	M(TOKENIZE_RESP, tokenize_resp, 0x0014, 3, SF_DIR_N2H)                              \
	M(TOKENIZER_FILE, tokenizer_file, 0x0015, 5, SF_DIR_N2H)                            \
	M(SESSION_ASSIGN, session_assign, 0x0020, 2, SF_DIR_H2N)                            \
	M(SESSION_APPEND, session_append, 0x0021, 2, SF_DIR_H2N)                            \
	M(SESSION_REVOKE, session_revoke, 0x0022, 2, SF_DIR_H2N)                            \
	M(GENERATE_OPTS, generate_opts, 0x0030, 3, SF_DIR_H2N)                              \
	M(GENERATE, generate, 0x0031, 2, SF_DIR_H2N)                                        \
	M(CANCEL, cancel, 0x0032, 2, SF_DIR_H2N)                                            \
	M(TOKEN_EVENTS, token_events, 0x0033, 2, SF_DIR_N2H)                                \
	M(WATERMARK_ACK, watermark_ack, 0x0034, 2, SF_DIR_H2N)                              \
	M(LEASE_RENEW, lease_renew, 0x0040, 2, SF_DIR_N2H)                                  \
	M(LEASE_GRANT, lease_grant, 0x0041, 2, SF_DIR_H2N)                                  \
	M(NODE_STATUS, node_status, 0x0042, 2, SF_DIR_N2H)                                  \
	M(PREFIX_CACHE, prefix_cache, 0x0043, 6, SF_DIR_N2H)                                \
	M(RECONCILE, reconcile, 0x0050, 2, SF_DIR_H2N)                                      \
	M(RECONCILE_ACK, reconcile_ack, 0x0051, 2, SF_DIR_N2H)                              \
	M(XFER_BEGIN, xfer_begin, 0x0060, 2, SF_DIR_H2N)                                    \
	M(XFER_CHUNK, xfer_chunk, 0x0061, 2, SF_DIR_H2N)                                    \
	M(XFER_END, xfer_end, 0x0062, 2, SF_DIR_H2N)                                        \
	M(XFER_RESULT, xfer_result, 0x0063, 2, SF_DIR_N2H)                                  \
	M(STATE_OP_REQ, state_op_req, 0x0070, 3, SF_DIR_H2N)                                \
	M(STATE_OP_SEGMENT, state_op_segment, 0x0071, 3, SF_DIR_N2H)                        \
	M(STATE_OP_RESP, state_op_resp, 0x0072, 3, SF_DIR_N2H)                              \
	M(STAGE_FORWARD_REQ, stage_forward_req, 0x0080, 2, SF_DIR_H2N)                      \
	M(STAGE_FORWARD_RESP, stage_forward_resp, 0x0081, 2, SF_DIR_N2H)                    \
	M(STAGE_RELEASE, stage_release, 0x0082, 5, SF_DIR_H2N)

#endif
