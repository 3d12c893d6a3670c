/* Writes the seed corpora of the harnesses: make_corpus DIR [harness...] fills
 * DIR/<harness>/ (emptied first) for each harness named, or all of them. The output is the
 * same on every run: messages come from sf_msg_sample with fixed seeds, and libsodium draws
 * from the fuzzing generator, reset where the harness resets it, so the recorded sealed
 * handshakes get through when replayed. */
#include "fuzz_common.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <superfluid/gguf.h>
#include <superfluid/link.h>
#include <superfluid/noise.h>

#include "model/model.h"
#include "wal/wal.h"
#include "wal/wal_format.h"
#include "wal/wal_records.h"

static const char *out_dir; /* DIR/<harness> being written */
static unsigned n_written;

static void die(const char *what)
{
	fprintf(stderr, "make_corpus: %s: %s\n", what, strerror(errno));
	exit(1);
}

void put_file(const char *name, const struct sf_buf *b)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", out_dir, name);
	FILE *f = fopen(path, "wb");
	if (!f)
		die(path);
	if (sf_buf_used(b) && fwrite(sf_buf_head(b), 1, sf_buf_used(b), f) != sf_buf_used(b))
		die(path);
	if (fclose(f))
		die(path);
	n_written++;
}

void app(struct sf_buf *b, const void *p, size_t n)
{
	if (sf_buf_append(b, p, n))
		fuzz_fail("corpus buffer full");
}

void app_u8(struct sf_buf *b, uint8_t v)
{
	app(b, &v, 1);
}

void app_u16(struct sf_buf *b, size_t v)
{
	uint8_t le[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
	app(b, le, 2);
}

/* Makes dir (if needed) and empties it of regular files. */
static void start_dir(const char *root, const char *harness)
{
	static char path[4096];
	snprintf(path, sizeof(path), "%s/%s", root, harness);
	if (mkdir(path, 0777) && errno != EEXIST)
		die(path);
	DIR *d = opendir(path);
	if (!d)
		die(path);
	struct dirent *e;
	while ((e = readdir(d))) {
		char f[4096 + 256];
		struct stat st;
		snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
		if (lstat(f, &st) == 0 && S_ISREG(st.st_mode) && unlink(f))
			die(f);
	}
	closedir(d);
	out_dir = path;
	n_written = 0;
}

/* Appends the frame of sample (type, seed, items) at version; false when the type is not
 * in it. */
static bool sample_frame(struct sf_buf *b, uint16_t type, uint64_t seed, uint32_t items,
			 uint32_t version)
{
	struct sf_arena a;
	struct sf_msg m;
	struct sf_err err;

	if (sf_msg_min_version(type) > version)
		return false;
	sf_arena_init(&a, 64u << 20);
	if (sf_msg_sample_at(type, seed, items, version, &a, &m))
		fuzz_fail("sample %s", sf_msg_name(type));
	if (sf_msg_encode(b, type, &m.u, version, SF_FRAME_PAYLOAD_MAX, &err))
		fuzz_fail("encode %s: %s", sf_msg_name(type), err.msg);
	sf_arena_free(&a);
	return true;
}

/* ---- fuzz_msg: u16 type index, payload ---- */

static void make_msg(void)
{
	static const uint32_t items[] = { 0, 1, 4 };
	struct sf_buf b, f;
	char name[128];

	sf_buf_init(&b, 64u << 20);
	sf_buf_init(&f, 64u << 20);
	for (size_t i = 0; i < sf_msg_type_count; i++) {
		for (uint64_t seed = 1; seed <= 3; seed++) {
			for (size_t k = 0; k < sizeof(items) / sizeof(items[0]); k++) {
				sf_buf_clear(&f);
				sample_frame(&f, sf_msg_types[i], seed, items[k], SF_VERSION_MAX);
				sf_buf_clear(&b);
				app_u16(&b, i);
				app(&b, sf_buf_head(&f) + SF_FRAME_HDR_LEN,
				    sf_buf_used(&f) - SF_FRAME_HDR_LEN);
				snprintf(name, sizeof(name), "%s-s%llu-n%u", sf_msg_name(sf_msg_types[i]),
					 (unsigned long long)seed, items[k]);
				put_file(name, &b);
			}
		}
	}
	sf_buf_free(&b);
	sf_buf_free(&f);
}

/* ---- fuzz_frame: [max choice] [version - 2] frames ---- */

static void make_frame(void)
{
	struct sf_buf b;
	char name[128];

	sf_buf_init(&b, 64u << 20);
	for (uint32_t v = SF_VERSION_MIN; v <= SF_VERSION_MAX; v++) {
		for (size_t i = 0; i < sf_msg_type_count; i++) {
			for (uint64_t seed = 1; seed <= 2; seed++) {
				sf_buf_clear(&b);
				app_u8(&b, FUZZ_FRAME_N_MAX - 1); /* SF_FRAME_PAYLOAD_MAX */
				app_u8(&b, (uint8_t)(v - SF_VERSION_MIN));
				/* 1 to 3 frames: this type, then two others. */
				size_t frames = 1 + (i + seed) % 3, put = 0;
				for (size_t k = 0; k < frames; k++) {
					uint16_t t = sf_msg_types[(i + k * 7) % sf_msg_type_count];
					put += sample_frame(&b, t, seed + k, (uint32_t)(seed * 2), v);
				}
				if (!put)
					continue;
				snprintf(name, sizeof(name), "v%u-%s-s%llu", v,
					 sf_msg_name(sf_msg_types[i]), (unsigned long long)seed);
				put_file(name, &b);
			}
		}
	}
	/* A few against a small limit (1024): some frames fit, some do not. */
	for (uint64_t seed = 1; seed <= 4; seed++) {
		sf_buf_clear(&b);
		app_u8(&b, 4);
		app_u8(&b, 1);
		sample_frame(&b, SF_MSG_HEARTBEAT, seed, 0, SF_VERSION_MAX);
		sample_frame(&b, SF_MSG_XFER_CHUNK, seed, (uint32_t)(seed * 400), SF_VERSION_MAX);
		snprintf(name, sizeof(name), "limit1024-s%llu", (unsigned long long)seed);
		put_file(name, &b);
	}
	sf_buf_free(&b);
}

/* ---- fuzz_noise: [mode] (u16 length, bytes)... ---- */

static void noise_init(struct sf_noise_hs *hs, bool psk_mode, bool initiator)
{
	uint8_t psk[SF_NOISE_PSKLEN];
	sf_noise_psk_from_token((const uint8_t *)FUZZ_TOKEN, strlen(FUZZ_TOKEN), psk);
	if (sf_noise_hs_init(hs, psk_mode ? SF_NOISE_NNPSK0 : SF_NOISE_NN, initiator,
			     (const uint8_t *)FUZZ_NOISE_PROLOGUE, strlen(FUZZ_NOISE_PROLOGUE),
			     psk_mode ? psk : NULL))
		fuzz_fail("noise init");
}

/* One handshake as the harness runs it, the peer's side recorded, then n_records transport
 * messages from the peer. */
static void noise_transcript(bool psk_mode, bool harness_initiates, const char *hello,
			     int n_records, const char *name)
{
	static uint8_t pl[SF_NOISE_MAX_MSG], msg1[256], msg2[256], ct[SF_NOISE_MAX_MSG];
	struct sf_noise_hs ini, resp;
	struct sf_noise_cs ini_tx, ini_rx, resp_tx, resp_rx;
	struct sf_buf b;
	int n1, n2;

	sf_buf_init(&b, 1u << 20);
	app_u8(&b, (uint8_t)((psk_mode ? FUZZ_NOISE_PSK : 0) |
			     (harness_initiates ? FUZZ_NOISE_INITIATOR : 0)));
	/* The harness's side starts from the reset generator, like the harness does. */
	if (harness_initiates)
		fuzz_rng_reset(FUZZ_RNG_SEED);
	noise_init(&ini, psk_mode, true);
	n1 = sf_noise_hs_write(&ini, (const uint8_t *)hello, hello ? strlen(hello) : 0, msg1,
			       sizeof(msg1));
	if (!harness_initiates)
		fuzz_rng_reset(FUZZ_RNG_SEED);
	noise_init(&resp, psk_mode, false);
	if (n1 < 0 || sf_noise_hs_read(&resp, msg1, (size_t)n1, pl, sizeof(pl)) < 0)
		fuzz_fail("noise message 1");
	n2 = sf_noise_hs_write(&resp, (const uint8_t *)"ok", 2, msg2, sizeof(msg2));
	if (n2 < 0 || sf_noise_hs_read(&ini, msg2, (size_t)n2, pl, sizeof(pl)) < 0)
		fuzz_fail("noise message 2");
	if (sf_noise_hs_split(&ini, &ini_tx, &ini_rx, NULL) ||
	    sf_noise_hs_split(&resp, &resp_tx, &resp_rx, NULL))
		fuzz_fail("noise split");
	struct sf_noise_cs *peer_tx = harness_initiates ? &resp_tx : &ini_tx;
	if (harness_initiates) {
		app_u16(&b, (size_t)n2);
		app(&b, msg2, (size_t)n2);
	} else {
		app_u16(&b, (size_t)n1);
		app(&b, msg1, (size_t)n1);
	}
	for (int i = 0; i < n_records; i++) {
		size_t len = (size_t)i * 37 % 300;
		memset(pl, 'a' + i, len);
		int c = sf_noise_cs_encrypt(peer_tx, NULL, 0, pl, len, ct);
		if (c < 0)
			fuzz_fail("noise encrypt");
		app_u16(&b, (size_t)c);
		app(&b, ct, (size_t)c);
	}
	put_file(name, &b);
	sf_buf_free(&b);
}

static void make_noise(void)
{
	char name[128];
	for (int psk = 0; psk <= 1; psk++) {
		for (int ini = 0; ini <= 1; ini++) {
			for (int recs = 0; recs <= 3; recs += 3) {
				snprintf(name, sizeof(name), "%s-%s-r%d", psk ? "nnpsk0" : "nn",
					 ini ? "initiator" : "responder", recs);
				noise_transcript(psk, ini, NULL, recs, name);
			}
			if (!ini) {
				snprintf(name, sizeof(name), "%s-responder-payload",
					 psk ? "nnpsk0" : "nn");
				noise_transcript(psk, false, "hello, node", 1, name);
			}
		}
	}
}

/* ---- fuzz_link: [mode] [flags] (u16 length, u8 step, bytes)... ---- */

static uint64_t now;

static void poll_all(struct sf_link *l)
{
	struct sf_link_event ev;
	for (int i = 0; i < 100000; i++)
		if (sf_link_poll(l, now, &ev) == SF_LINK_EV_NONE)
			return;
	fuzz_fail("recording: poll does not end");
}

/* Moves from's tx to to, recording it as chunks when rec is given. */
static void move(struct sf_link *from, struct sf_link *to, struct sf_buf *rec)
{
	const uint8_t *p;
	size_t n = sf_link_tx(from, &p);
	if (!n)
		return;
	now += FUZZ_LINK_STEP_MS;
	for (size_t off = 0; off < n;) {
		size_t k = n - off < 65535 ? n - off : 65535;
		if (rec) {
			app_u16(rec, k);
			app_u8(rec, 1);
			app(rec, p + off, k);
		}
		for (size_t took = 0; took < k;) {
			size_t t = sf_link_recv(to, p + off + took, k - took, now);
			poll_all(to);
			if (!t)
				break;
			took += t;
		}
		off += k;
	}
	sf_link_tx_done(from, n);
	poll_all(to);
}

/* Some messages the version has, from seed. */
static void send_some(struct sf_link *l, enum sf_role role, uint64_t seed, int n)
{
	for (int i = 0; i < n; i++) {
		uint16_t t = fuzz_pick_type(seed * 5 + (uint64_t)i * 11, role, sf_link_version(l));
		struct sf_arena a;
		struct sf_msg m;
		struct sf_err err;
		sf_arena_init(&a, 64u << 20);
		if (sf_msg_sample_at(t, seed + (uint64_t)i, 3, sf_link_version(l), &a, &m))
			fuzz_fail("recording: sample %s", sf_msg_name(t));
		if (sf_link_send(l, t, &m.u, now, &err))
			fuzz_fail("recording: send %s: %s", sf_msg_name(t), err.msg);
		sf_arena_free(&a);
	}
}

/* A head and a node against each other; records what the lone side (the harness's link,
 * made with flags) receives from the other (made with peer_flags). */
static void link_transcript(uint8_t mode, uint8_t flags, uint8_t peer_flags, int extra,
			    bool goodbye, const char *name)
{
	bool lone_head = mode == FUZZ_LINK_HEAD;
	struct sf_link *head, *node;
	struct sf_buf rec;

	sf_buf_init(&rec, 64u << 20);
	app_u8(&rec, mode);
	app_u8(&rec, flags);
	now = 1000000;
	/* The lone side starts from the reset generator, like in the harness. */
	uint8_t hf = lone_head ? flags : peer_flags, nf = lone_head ? peer_flags : flags;
	if (lone_head)
		fuzz_rng_reset(FUZZ_RNG_SEED);
	head = fuzz_link_new(SF_ROLE_HEAD, hf & FUZZ_LINK_SEALED, hf, now);
	if (!lone_head)
		fuzz_rng_reset(FUZZ_RNG_SEED);
	node = fuzz_link_new(SF_ROLE_NODE, nf & FUZZ_LINK_SEALED, nf, now);
	for (int i = 0; i < 8; i++) {
		move(head, node, lone_head ? NULL : &rec);
		move(node, head, lone_head ? &rec : NULL);
	}
	struct sf_link *peer = lone_head ? node : head, *lone = lone_head ? head : node;
	if (sf_link_state(peer) == SF_LINK_OPEN) {
		send_some(peer, lone_head ? SF_ROLE_NODE : SF_ROLE_HEAD, (uint64_t)flags * 31 + peer_flags, extra);
		if (goodbye)
			sf_link_goodbye(peer, 0, "fuzz corpus says goodbye", now);
		move(peer, lone, &rec);
	}
	put_file(name, &rec);
	sf_link_free(head);
	sf_link_free(node);
	sf_buf_free(&rec);
}

/* Post-handshake traffic for the pair modes: plain frames at the version the pair agrees. */
static void link_pair_stream(uint8_t mode, uint8_t flags, uint64_t seed, const char *name)
{
	uint32_t lo, hi;
	struct sf_buf rec, f;

	fuzz_link_versions(flags, &lo, &hi);
	sf_buf_init(&rec, 64u << 20);
	sf_buf_init(&f, 64u << 20);
	app_u8(&rec, mode);
	app_u8(&rec, flags);
	for (int k = 0; k < 4; k++) {
		/* The target's peer sends: a head to the node, a node to the head. */
		uint16_t t = fuzz_pick_type(seed * 7 + (uint64_t)k * 3,
					    mode == FUZZ_LINK_PAIR_NODE ? SF_ROLE_HEAD : SF_ROLE_NODE, hi);
		sf_buf_clear(&f);
		if (!sample_frame(&f, t, seed + (uint64_t)k, 3, hi))
			continue;
		app_u16(&rec, sf_buf_used(&f));
		app_u8(&rec, (uint8_t)(3 + k * 40)); /* never HELLO: see send_one */
		app(&rec, sf_buf_head(&f), sf_buf_used(&f));
	}
	put_file(name, &rec);
	sf_buf_free(&f);
	sf_buf_free(&rec);
}

static void make_link(void)
{
	/* Versions configurations 0 (2..3), 1 (2..2), 2 (3..3). */
	static const uint8_t vers[] = { 0, 1 << FUZZ_LINK_VER_SHIFT, 2 << FUZZ_LINK_VER_SHIFT };
	char name[128];

	for (uint8_t mode = FUZZ_LINK_HEAD; mode <= FUZZ_LINK_NODE; mode++) {
		const char *role = mode == FUZZ_LINK_HEAD ? "head" : "node";
		for (int sealed = 0; sealed <= 1; sealed++) {
			for (size_t v = 0; v < 3; v++) {
				uint8_t fl = (uint8_t)((sealed ? FUZZ_LINK_SEALED : 0) | vers[v]);
				/* The peer alike: a whole handshake and some traffic. */
				snprintf(name, sizeof(name), "%s-%s-v%zu", role,
					 sealed ? "sealed" : "plain", v);
				link_transcript(mode, fl, fl, 4, false, name);
				snprintf(name, sizeof(name), "%s-%s-v%zu-goodbye-eof", role,
					 sealed ? "sealed" : "plain", v);
				link_transcript(mode, fl | FUZZ_LINK_EOF, fl, 2, true, name);
				snprintf(name, sizeof(name), "%s-%s-v%zu-small-timers", role,
					 sealed ? "sealed" : "plain", v);
				link_transcript(mode, fl | FUZZ_LINK_SMALL | FUZZ_LINK_TIMERS,
						fl | FUZZ_LINK_SMALL, 3, false, name);
				/* The peer differs: mode or versions. */
				uint8_t other = (uint8_t)(fl ^ FUZZ_LINK_SEALED);
				snprintf(name, sizeof(name), "%s-%s-v%zu-mode-mismatch", role,
					 sealed ? "sealed" : "plain", v);
				link_transcript(mode, fl, other, 0, false, name);
				uint8_t ov = (uint8_t)((fl & FUZZ_LINK_SEALED) | vers[(v + 1) % 3]);
				snprintf(name, sizeof(name), "%s-%s-v%zu-peer-v%zu", role,
					 sealed ? "sealed" : "plain", v, (v + 1) % 3);
				link_transcript(mode, fl | FUZZ_LINK_EOF | FUZZ_LINK_RESET, ov, 1,
						false, name);
			}
		}
	}
	for (uint8_t mode = FUZZ_LINK_PAIR_NODE; mode <= FUZZ_LINK_PAIR_HEAD; mode++) {
		for (size_t v = 0; v < 3; v++) {
			for (uint64_t seed = 1; seed <= 4; seed++) {
				uint8_t fl = vers[v];
				if (seed == 3)
					fl |= FUZZ_LINK_TIMERS;
				if (seed == 4)
					fl |= FUZZ_LINK_EOF | FUZZ_LINK_SMALL;
				snprintf(name, sizeof(name), "pair-%s-v%zu-s%llu",
					 mode == FUZZ_LINK_PAIR_NODE ? "node" : "head", v,
					 (unsigned long long)seed);
				link_pair_stream(mode, fl, seed, name);
			}
		}
	}
}

/* ---- fuzz_http: [split seed] then requests ---- */

void put_bytes(const char *name, const void *p, size_t n)
{
	struct sf_buf b;
	sf_buf_init(&b, n + 1);
	app(&b, p, n);
	put_file(name, &b);
	sf_buf_free(&b);
}

void put_text(const char *name, uint8_t first, const char *text)
{
	struct sf_buf b;
	sf_buf_init(&b, strlen(text) + 1);
	app_u8(&b, first);
	app(&b, text, strlen(text));
	put_file(name, &b);
	sf_buf_free(&b);
}

static void make_http(void)
{
	put_text("get", 1, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
	put_text("post", 2, "POST /v1/chat/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
		 "Content-Length: 13\r\n\r\n{\"model\":\"m\"}");
	put_text("chunked", 3, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		 "5\r\nhello\r\n0\r\n\r\n");
	put_text("pipelined", 4, "GET /a HTTP/1.1\r\n\r\nHEAD /b HTTP/1.0\r\nConnection: keep-alive"
		 "\r\n\r\nGET /c?q=1 HTTP/1.1\r\nExpect: 100-continue\r\n\r\n");
}

/* ---- fuzz_api: [kind and flags] then a body ---- */

static void make_api(void)
{
	put_text("chat", 1, "{\"model\":\"sim-1\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"},"
		 "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}],"
		 "\"stop\":[\"lo\",\"x\"],\"temperature\":0.5,\"max_tokens\":9,\"stream\":true,"
		 "\"stream_options\":{\"include_usage\":true}}");
	put_text("tools", 7, "{\"model\":\"sim-1\",\"messages\":[{\"role\":\"user\",\"content\":\"w\"},"
		 "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":"
		 "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": 1}\"}}]},"
		 "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"}],\"tools\":[{\"type\":"
		 "\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],"
		 "\"tool_choice\":\"auto\",\"logprobs\":true,\"top_logprobs\":2}");
	put_text("completion", 0, "{\"model\":\"sim-1\",\"prompt\":[\"once\"],\"logprobs\":3,"
		 "\"seed\":5,\"echo\":false,\"session\":\"s-1\"}");
	put_text("sampling", 0, "{\"model\":\"sim-1\",\"prompt\":\"p\",\"top_k\":40,\"min_p\":0.05,"
		 "\"presence_penalty\":0.5,\"frequency_penalty\":-1,\"repetition_penalty\":1.2,"
		 "\"repeat_last_n\":-1,\"logit_bias\":{\"5\":-100,\"17\":2.5,\"300\":100}}");
	put_text("broken", 1, "{\"model\":\"sim-1\",\"messages\":[{\"role\":");
	put_text("more", 1, "{\"model\":\"sim-1\",\"messages\":[{\"role\":\"user\",\"content\":"
		 "\"x\"}],\"stop\":[\"ab\"],\"stop_token_ids\":[97,10],\"min_tokens\":3,"
		 "\"include_stop_str_in_output\":true,\"ignore_eos\":true,\"n_probs\":2,"
		 "\"cache_prompt\":false,\"best_of\":1}");
	put_text("responses", 8 | 4, "{\"model\":\"sim-1\",\"instructions\":\"be\",\"input\":["
		 "{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"w\"}]},"
		 "{\"type\":\"reasoning\",\"summary\":[],\"content\":[{\"type\":"
		 "\"reasoning_text\",\"text\":\"r\"}]},{\"type\":\"function_call\",\"call_id\":"
		 "\"c1\",\"name\":\"f\",\"arguments\":\"{}\"},{\"type\":\"function_call_output\","
		 "\"call_id\":\"c1\",\"output\":\"ok\"}],\"tools\":[{\"type\":\"function\","
		 "\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}],\"tool_choice\":{\"type\":"
		 "\"function\",\"name\":\"f\"},\"max_output_tokens\":9,\"store\":false,"
		 "\"metadata\":{\"k\":\"v\"},\"reasoning\":{\"effort\":\"low\"},\"text\":"
		 "{\"format\":{\"type\":\"text\"}},\"previous_response_id\":\"resp_1\"}");
	put_text("schema", 1, "{\"model\":\"sim-1\",\"messages\":[{\"role\":\"user\","
		 "\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
		 "\"json_schema\":{\"name\":\"p\",\"schema\":{\"type\":\"object\",\"properties\":"
		 "{\"a\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120},\"b\":{\"type\":"
		 "[\"string\",\"null\"],\"maxLength\":4},\"c\":{\"enum\":[1,\"x\",null]},\"d\":"
		 "{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/t\"},\"maxItems\":2},\"e\":"
		 "{\"type\":\"string\",\"pattern\":\"^[a-f]\\\\d{2}(x|y)*$\"},\"f\":{\"type\":"
		 "\"string\",\"format\":\"date-time\"},\"g\":{\"type\":\"number\",\"minimum\":"
		 "0.5,\"exclusiveMaximum\":9},\"h\":{\"anyOf\":[{\"const\":true},{\"type\":"
		 "\"object\",\"additionalProperties\":{\"type\":\"boolean\"}}]}},\"required\":"
		 "[\"a\",\"c\"],\"additionalProperties\":false,\"$defs\":{\"t\":{\"type\":"
		 "\"object\",\"properties\":{\"k\":{\"$ref\":\"#/$defs/t\"}}}}}}}}");
	put_text("structured", 0, "{\"model\":\"sim-1\",\"prompt\":\"p\",\"structured_outputs\":"
		 "{\"regex\":\"(ab|[^c-e\\\\s]){2,5}\\\\.\\\\u00e9?\"}}");
	put_text("choice", 0, "{\"model\":\"sim-1\",\"prompt\":\"p\",\"guided_choice\":"
		 "[\"yes\",\"n\\\"o\"]}");
	put_text("gbnf", 8 | 4, "{\"model\":\"sim-1\",\"input\":\"w\",\"grammar\":"
		 "\"root ::= a+ b?\\na ::= [x-z] | \\\"q\\\"\\nb ::= \\\"!\\\"{1,3}\\n\"}");
	put_text("embeddings", 32, "{\"model\":\"sim-1\",\"input\":[\"a cat\",\"dogs\"],"
		 "\"encoding_format\":\"base64\",\"dimensions\":8,\"user\":\"u\"}");
	put_text("embed_ids", 32, "{\"model\":\"sim-1\",\"input\":[[1,2,3],[4]]}");
	put_text("messages", 16 | 4, "{\"model\":\"sim-1\",\"max_tokens\":2000,\"system\":[{"
		 "\"type\":\"text\",\"text\":\"s\"}],\"messages\":[{\"role\":\"user\","
		 "\"content\":\"w\"},{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\","
		 "\"thinking\":\"t\",\"signature\":\"\"},{\"type\":\"tool_use\",\"id\":\"t1\","
		 "\"name\":\"f\",\"input\":{\"a\":1}}]},{\"role\":\"user\",\"content\":[{\"type\":"
		 "\"tool_result\",\"tool_use_id\":\"t1\",\"content\":[{\"type\":\"text\",\"text\":"
		 "\"ok\"}]},{\"type\":\"text\",\"text\":\"more\"}]}],\"tools\":[{\"name\":\"f\","
		 "\"input_schema\":{\"type\":\"object\"}}],\"tool_choice\":{\"type\":\"any\"},"
		 "\"stop_sequences\":[\"zz\"],\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":"
		 "1024},\"metadata\":{\"user_id\":\"u\"}}");
}

/* ---- fuzz_multipart: [boundary length | 0x80 header too] boundary, body ---- */

static void make_multipart(void)
{
	put_text("form", 3, "XyZ--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n"
		 "sim-1\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\""
		 "\r\nContent-Type: audio/wav\r\n\r\n\x01\x02\r\n--Xy\r\n--XyZ--\r\n");
	put_text("preamble", 1, "bpre\r\n--b\r\nContent-Disposition: form-data; name=a\r\n\r\n"
		 "\r\n--b\r\nContent-Disposition: form-data; name=e\r\n\r\n--b--epilogue");
	put_text("header", 0x80 | 3, "multipart/form-data; charset=x; boundary=\"a;b\"");
	put_text("cut", 2, "ab--ab\r\nContent-Disposition: form-data; name=\"x");
}

/* ---- fuzz_wal: [flags: 1 two segments] [u16 LE split] segment bytes ---- */

static void wal_seg(struct sf_buf *b, uint64_t first_lsn, uint32_t flags)
{
	uint8_t hdr[SF_WAL_SEG_HDR];
	sf_wal_seg_hdr_put(hdr, first_lsn, flags);
	app(b, hdr, sizeof(hdr));
}

static void wal_rec(struct sf_buf *b, uint8_t type, uint64_t lsn, const void *p, uint32_t len)
{
	uint8_t *rec = malloc(SF_WAL_REC_HDR + (size_t)len);
	if (!rec)
		abort();
	sf_wal_rec_put(rec, type, lsn, p, len);
	app(b, rec, SF_WAL_REC_HDR + len);
	free(rec);
}

/* How wal_head_recs damages its first session record's protocol 6 tail. */
enum { WAL_INTACT, WAL_IGNORE_EOS_2, WAL_GRAMMAR_PAST_LIMIT, WAL_GRAMMAR_NUL };

/* The head's records of one session with a structured output (its grammar, ignore_eos,
 * min_tokens, a logit_bias), a generation of it with tokens and an end, then a session of a
 * log before grammars (session-v3); LSNs from *lsn. */
static void wal_head_recs(struct sf_buf *b, uint64_t *lsn, int damage)
{
	struct sf_buf r;
	sf_buf_init(&r, 1 << 16);
	static const char gr[] = "root ::= \"{\" [a-z]* \"}\"";
	struct sf_logit_bias lb[1] = { { 7, -2.0f } };
	struct sf_walrec_session s = { .session_id = 1, .qos = 1, .lease_ms = 1000,
				       .grammar_digest = 0x1234,
				       .sampling = { .temperature = 1, .seed = 3, .logit_bias = lb,
						     .n_logit_bias = 1, .ignore_eos = true,
						     .min_tokens = 2,
						     .grammar = (char *)gr,
						     .grammar_len = sizeof(gr) - 1 } };
	snprintf(s.name, sizeof(s.name), "form");
	snprintf(s.model, sizeof(s.model), "sim-1");
	if (sf_walrec_put_session(&r, &s))
		abort();
	/* The tail: u8 ignore_eos, u32 min_tokens, u64 digest, u32 grammar length, grammar. */
	uint8_t *tail = sf_buf_head(&r) + sf_buf_used(&r) - 17 - s.sampling.grammar_len;
	if (damage == WAL_IGNORE_EOS_2)
		tail[0] = 2;
	else if (damage == WAL_GRAMMAR_PAST_LIMIT)
		for (int i = 0; i < 4; i++)
			tail[13 + i] = (uint8_t)((SF_MAX_GRAMMAR + 1u) >> (8 * i));
	else if (damage == WAL_GRAMMAR_NUL)
		tail[17 + 3] = 0;
	wal_rec(b, SF_WALREC_SESSION, (*lsn)++, sf_buf_head(&r), (uint32_t)sf_buf_used(&r));
	uint32_t t[3] = { 123, 97, 125 };
	if (sf_walrec_put_content(&r, 1, 0, t, 2))
		abort();
	wal_rec(b, SF_WALREC_CONTENT, (*lsn)++, sf_buf_head(&r), (uint32_t)sf_buf_used(&r));
	struct sf_walrec_gen g = { .session_id = 1, .generation_id = 2, .max_new = 9, .n_prompt = 2,
				   .body = (const uint8_t *)"{}", .body_len = 2 };
	snprintf(g.request_id, sizeof(g.request_id), "cmpl-1");
	if (sf_walrec_put_gen(&r, &g))
		abort();
	wal_rec(b, SF_WALREC_GEN, (*lsn)++, sf_buf_head(&r), (uint32_t)sf_buf_used(&r));
	if (sf_walrec_put_tokens(&r, 1, 2, 1, 0, t, 3))
		abort();
	wal_rec(b, SF_WALREC_TOKENS, (*lsn)++, sf_buf_head(&r), (uint32_t)sf_buf_used(&r));
	if (sf_walrec_put_end(&r, 1, 2, 1, 1, SF_FINISH_STOP, 0, ""))
		abort();
	wal_rec(b, SF_WALREC_END, (*lsn)++, sf_buf_head(&r), (uint32_t)sf_buf_used(&r));
	/* session-v3: the same bytes but protocol 6's tail (17 bytes and the grammar). */
	s.session_id = 2;
	if (sf_walrec_put_session(&r, &s))
		abort();
	wal_rec(b, SF_WALREC_SESSION_V3, (*lsn)++, sf_buf_head(&r),
		(uint32_t)sf_buf_used(&r) - 17 - s.sampling.grammar_len);
	sf_buf_free(&r);
}

static void wal_input(const char *name, uint8_t flags, const struct sf_buf *a,
		      const struct sf_buf *b)
{
	struct sf_buf in;
	sf_buf_init(&in, 1 << 16);
	app_u8(&in, flags);
	app_u16(&in, sf_buf_used(a));
	app(&in, sf_buf_head(a), sf_buf_used(a));
	if (b)
		app(&in, sf_buf_head(b), sf_buf_used(b));
	put_file(name, &in);
	sf_buf_free(&in);
}

static void make_wal(void)
{
	struct sf_buf a, b;
	uint8_t end[8];
	sf_buf_init(&a, 1 << 15);
	sf_buf_init(&b, 1 << 15);
	/* Records, then a checkpoint segment: its snapshot, its end, more records. */
	wal_seg(&a, 1, SF_WAL_SEG_OPENED);
	for (uint64_t i = 1; i <= 5; i++)
		wal_rec(&a, 1, i, "record", (uint32_t)i);
	wal_seg(&b, 6, 0);
	wal_rec(&b, SF_WAL_TYPE_CKPT_BEGIN, 6, NULL, 0);
	wal_rec(&b, 2, 7, "snapshot", 8);
	wal_rec(&b, 2, 8, "snapshot", 8);
	sf_wal_put64(end, 6);
	wal_rec(&b, SF_WAL_TYPE_CKPT_END, 9, end, 8);
	wal_rec(&b, 3, 10, "after", 5);
	wal_input("checkpoint", 1, &a, &b);
	/* The same with the second segment's last record cut short: a torn tail. */
	b.len -= 3;
	wal_input("torn", 1, &a, &b);
	/* A checkpoint begun and never ended. */
	sf_buf_clear(&b);
	wal_seg(&b, 6, 0);
	wal_rec(&b, SF_WAL_TYPE_CKPT_BEGIN, 6, NULL, 0);
	wal_rec(&b, 2, 7, "snapshot", 8);
	wal_input("unfinished", 1, &a, &b);
	/* One segment, a byte flipped in its middle record. */
	wal_input("one", 0, &a, NULL);
	a.data[SF_WAL_SEG_HDR + 2 * SF_WAL_REC_HDR + 3] ^= 1;
	wal_input("corrupt", 0, &a, NULL);
	/* A header alone. */
	sf_buf_clear(&a);
	wal_seg(&a, 1, SF_WAL_SEG_OPENED);
	wal_input("empty", 0, &a, NULL);
	/* The head's own records; then again after a checkpoint whose snapshot holds them. */
	static const char *const damaged[] = { [WAL_IGNORE_EOS_2] = "head-ignore-eos-2",
					       [WAL_GRAMMAR_PAST_LIMIT] = "head-grammar-past-limit",
					       [WAL_GRAMMAR_NUL] = "head-grammar-nul" };
	for (int k = WAL_IGNORE_EOS_2; k <= WAL_GRAMMAR_NUL; k++) {
		uint64_t at = 1;
		sf_buf_clear(&a);
		wal_seg(&a, 1, SF_WAL_SEG_OPENED);
		wal_head_recs(&a, &at, k);
		wal_input(damaged[k], 0, &a, NULL);
	}
	uint64_t lsn = 1;
	sf_buf_clear(&a);
	wal_seg(&a, 1, SF_WAL_SEG_OPENED);
	wal_head_recs(&a, &lsn, WAL_INTACT);
	wal_input("head", 0, &a, NULL);
	sf_buf_clear(&b);
	wal_seg(&b, lsn, 0);
	uint64_t begin = lsn;
	wal_rec(&b, SF_WAL_TYPE_CKPT_BEGIN, lsn++, NULL, 0);
	wal_head_recs(&b, &lsn, WAL_INTACT);
	sf_wal_put64(end, begin);
	wal_rec(&b, SF_WAL_TYPE_CKPT_END, lsn++, end, 8);
	wal_input("head-checkpoint", 1, &a, &b);
	sf_buf_free(&a);
	sf_buf_free(&b);
}

/* GGUF files written by the project's writer: metadata of every type, tensors of a few
 * types, a second alignment. */
static void gguf_seed(const char *name, uint32_t alignment, int n_tensors)
{
	static uint8_t data[4 * 34 * 2];
	struct sf_gguf_writer *w = sf_gguf_writer_new();
	if (!w)
		fuzz_fail("no memory");
	sf_gguf_set_str(w, "general.architecture", "llama", 5);
	if (alignment != SF_GGUF_DEFAULT_ALIGNMENT)
		sf_gguf_set_u32(w, "general.alignment", alignment);
	sf_gguf_set_u32(w, "llama.block_count", 2);
	sf_gguf_set_u64(w, "u64", 1ull << 33);
	sf_gguf_set_i32(w, "i32", -7);
	sf_gguf_set_f32(w, "f32", 0.5f);
	sf_gguf_set_bool(w, "bool", true);
	float f[4] = { 1, -2, 3.5f, 0 };
	sf_gguf_set_arr(w, "scores", SF_GGUF_F32, f, 4);
	int32_t t[4] = { 1, 2, 3, 6 };
	sf_gguf_set_arr(w, "types", SF_GGUF_I32, t, 4);
	struct sf_gguf_str s[3] = { { "<s>", 3 }, { "\xe2\x96\x81the", 6 }, { "", 0 } };
	sf_gguf_set_arr_str(w, "tokens", s, 3);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 13);
	uint64_t ne_q[2] = { 64, 4 }, ne_f[1] = { 32 };
	if (n_tensors > 0)
		sf_gguf_add_tensor(w, "blk.0.attn_q.weight", SF_GGUF_T_Q8_0, 2, ne_q, data, 4 * 68);
	if (n_tensors > 1)
		sf_gguf_add_tensor(w, "output_norm.weight", SF_GGUF_T_F32, 1, ne_f, data, 128);
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", out_dir, name);
	struct sf_err err;
	if (sf_gguf_writer_save(w, path, &err))
		fuzz_fail("%s", err.msg);
	sf_gguf_writer_free(w);
	n_written++;
}

/* A whole model: a SentencePiece vocabulary of byte tokens, then `layers` layers of each test
 * shape in a small quantized type, so the fuzzer starts from files the model and tokenizer
 * load. */
static void gguf_model_seed(const char *name, const char *shape, const char *type,
			    uint32_t layers)
{
	char vpath[4200], path[4200];
	snprintf(vpath, sizeof(vpath), "%s/.vocab.tmp", out_dir);
	snprintf(path, sizeof(path), "%s/%s", out_dir, name);
	static char names[259][8];
	struct sf_gguf_str toks[259];
	float scores[259];
	int32_t types[259];
	for (int i = 0; i < 259; i++) {
		if (i < 3)
			snprintf(names[i], sizeof(names[i]), "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
		else
			snprintf(names[i], sizeof(names[i]), "<0x%02X>", i - 3);
		toks[i] = (struct sf_gguf_str){ names[i], strlen(names[i]) };
		scores[i] = 0;
		types[i] = i == 0 ? 2 : i < 3 ? 3 : 6; /* unknown, control, byte */
	}
	struct sf_gguf_writer *w = sf_gguf_writer_new();
	sf_gguf_set_str(w, "tokenizer.ggml.model", "llama", 5);
	sf_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, 259);
	sf_gguf_set_arr(w, "tokenizer.ggml.scores", SF_GGUF_F32, scores, 259);
	sf_gguf_set_arr(w, "tokenizer.ggml.token_type", SF_GGUF_I32, types, 259);
	sf_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
	sf_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
	struct sf_err err;
	if (sf_gguf_writer_save(w, vpath, &err))
		fuzz_fail("%s", err.msg);
	sf_gguf_writer_free(w);
	struct sf_gguf *vocab;
	if (sf_gguf_open(vpath, &vocab, &err))
		fuzz_fail("%s", err.msg);
	struct sf_model_gen gen = { .shape = shape, .type = type, .layers = layers, .seed = 3,
				    .vocab = vocab };
	struct sf_pool *pool = sf_pool_new(1);
	if (!pool || sf_model_gen_write(&gen, path, pool, NULL, &err))
		fuzz_fail("%s", pool ? err.msg : "no pool");
	sf_pool_free(pool);
	sf_gguf_close(vocab);
	unlink(vpath);
	n_written++;
}

static void make_gguf(void)
{
	gguf_seed("meta-only", SF_GGUF_DEFAULT_ALIGNMENT, 0);
	gguf_seed("two-tensors", SF_GGUF_DEFAULT_ALIGNMENT, 2);
	gguf_seed("align-64", 64, 2);
	gguf_model_seed("model-llama-q4_0", "test-llama", "q4_0", 1);
	gguf_model_seed("model-qwen2-q8_0", "test-qwen2", "q8_0", 1);
	gguf_model_seed("model-qwen3-q4_k", "test-qwen3", "q4_k", 1);
	/* Granite 4's hybrid: a Mamba-2 layer (its ssm.* keys, the per-layer head counts), then
	 * an attention layer */
	gguf_model_seed("model-granitehybrid-q4_0", "test-granitehybrid", "q4_0", 2);
}

/* ---- fuzz_gguf_split: [n - 2] (u32 LE length, part)... the last part ---- */

/* One part of a split model as the writer makes it: split.no `no` of `count`, the tensors
 * [t0, t0 + nt) of the model's list, appended to b (length-prefixed unless last). */
static void split_part(struct sf_buf *b, uint32_t no, uint32_t count, uint32_t total, int t0,
		       int nt, bool last)
{
	static uint8_t data[64 * 34];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 1);
	struct sf_gguf_writer *w = sf_gguf_writer_new();
	if (!w)
		fuzz_fail("no memory");
	if (no == 0)
		sf_gguf_set_str(w, "general.architecture", "llama", 5);
	sf_gguf_set_u16(w, "split.no", (uint16_t)no);
	sf_gguf_set_u16(w, "split.count", (uint16_t)count);
	sf_gguf_set_i32(w, "split.tensors.count", (int32_t)total);
	static const char *const names[] = { "token_embd.weight", "blk.0.attn_q.weight",
					     "blk.0.ffn_up.weight", "output_norm.weight" };
	for (int t = t0; t < t0 + nt; t++) {
		uint64_t ne[2] = { 64, 2 };
		if (t == 3)
			sf_gguf_add_tensor(w, names[t], SF_GGUF_T_F32, 1, ne, data, 256);
		else
			sf_gguf_add_tensor(w, names[t], SF_GGUF_T_Q8_0, 2, ne, data, 2 * 68);
	}
	char path[4200];
	snprintf(path, sizeof(path), "%s/.part.tmp", out_dir);
	struct sf_err err;
	if (sf_gguf_writer_save(w, path, &err))
		fuzz_fail("%s", err.msg);
	sf_gguf_writer_free(w);
	FILE *f = fopen(path, "rb");
	if (!f)
		die(path);
	static uint8_t bytes[1 << 16];
	size_t n = fread(bytes, 1, sizeof(bytes), f);
	fclose(f);
	unlink(path);
	if (!last) {
		uint8_t le[4] = { (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16),
				  (uint8_t)(n >> 24) };
		app(b, le, 4);
	}
	app(b, bytes, n);
}

static void make_gguf_split(void)
{
	for (uint32_t count = 2; count <= 4; count++) {
		struct sf_buf b;
		sf_buf_init(&b, 1 << 18);
		app_u8(&b, (uint8_t)(count - 2));
		/* four tensors over the parts: the first part one, the last the rest */
		int t = 0;
		for (uint32_t no = 0; no < count; no++) {
			int nt = no + 1 < count ? 1 : 4 - t;
			split_part(&b, no, count, 4, t, nt, no + 1 == count);
			t += nt;
		}
		char name[32];
		snprintf(name, sizeof(name), "parts-%u", count);
		put_file(name, &b);
		sf_buf_free(&b);
	}
}

static const struct {
	const char *name;
	void (*make)(void);
} harnesses[] = {
	{ "fuzz_frame", make_frame },
	{ "fuzz_msg", make_msg },
	{ "fuzz_noise", make_noise },
	{ "fuzz_link", make_link },
	{ "fuzz_http", make_http },
	{ "fuzz_api", make_api },
	{ "fuzz_wal", make_wal },
	{ "fuzz_multipart", make_multipart },
	{ "fuzz_gguf", make_gguf },
	{ "fuzz_gguf_split", make_gguf_split },
	{ "fuzz_tok", make_tok },
	{ "fuzz_chat_parse", make_chat_parse },
	{ "fuzz_jinja", make_jinja },
	{ "fuzz_node", make_node },
	{ "fuzz_head", make_head },
	{ "fuzz_grammar", make_grammar },
};

int main(int argc, char **argv)
{
	size_t n_h = sizeof(harnesses) / sizeof(harnesses[0]);

	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: make_corpus DIR [harness...]\n");
		return 2;
	}
	fuzz_rng_install();
	if (mkdir(argv[1], 0777) && errno != EEXIST)
		die(argv[1]);
	for (int i = 2; i < argc; i++) {
		size_t k = 0;
		while (k < n_h && strcmp(argv[i], harnesses[k].name))
			k++;
		if (k == n_h) {
			fprintf(stderr, "make_corpus: no harness %s\n", argv[i]);
			return 2;
		}
	}
	for (size_t k = 0; k < n_h; k++) {
		bool want = argc == 2;
		for (int i = 2; i < argc; i++)
			want |= !strcmp(argv[i], harnesses[k].name);
		if (!want)
			continue;
		start_dir(argv[1], harnesses[k].name);
		harnesses[k].make();
		printf("make_corpus: %u inputs in %s\n", n_written, out_dir);
	}
	return 0;
}
