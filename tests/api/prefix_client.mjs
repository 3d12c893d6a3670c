// Prefix reuse through the official openai npm client, as ordinary clients use it: each turn
// sends the whole conversation again. Head A shares cached prefixes per API key (the default),
// head B has --prefix-cache off, head C shares them across keys; all three on the same two
// GGUF nodes; and a Responses fork (previous_response_id naming an earlier stored response)
// replayed as a new conversation finds the shared prefix cached. Prints "ok"/"FAIL" lines and
// "REUSED n" (the cached tokens head A reported).
// Usage: node prefix_client.mjs BASE_A BASE_B BASE_C KEY1 KEY2 MODEL
import OpenAI from "openai";

const [baseA, baseB, baseC, key1, key2, model] = process.argv.slice(2);
const client = (baseURL, apiKey) => new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
const a1 = client(baseA, key1), a2 = client(baseA, key2), b1 = client(baseB, key1);
const c1 = client(baseC, key1), c2 = client(baseC, key2);
let passes = 0, fails = 0, reusedA = 0;

async function check(name, fn) {
	try {
		await fn();
		passes++;
		console.log(`ok   ${name}`);
	} catch (e) {
		fails++;
		console.log(`FAIL ${name}\n     | ${String(e?.stack || e).split("\n").join("\n     | ")}`);
	}
}
function assert(cond, what) {
	if (!cond) throw new Error(what);
}

const words = "alpha beta gamma delta river stone cloud market engine fleet harbor winter".split(" ");
function text(seed, n) {
	let x = seed, out = [];
	for (let i = 0; i < n; i++) {
		x = (x * 1103515245 + 12345) % 2147483648;
		out.push(words[x % words.length]);
	}
	return out.join(" ");
}

// One turn: the reply's text and usage, streamed (with include_usage) or not.
async function turn(c, messages, sampling, stream) {
	const body = { model, messages, max_tokens: 12, ...sampling };
	if (!stream) {
		const r = await c.chat.completions.create(body);
		return { text: r.choices[0].message.content ?? "", usage: r.usage };
	}
	const s = await c.chat.completions.create({ ...body, stream: true,
						      stream_options: { include_usage: true } });
	let text = "", usage = null;
	for await (const chunk of s) {
		for (const ch of chunk.choices) text += ch.delta?.content ?? "";
		if (chunk.usage) usage = chunk.usage;
	}
	return { text, usage };
}
const cached = (u) => u?.prompt_tokens_details?.cached_tokens;

// A conversation of `turns` turns, each the whole history; returns each turn's reply and usage.
async function conversation(c, seed, turns, sampling, stream) {
	const messages = [{ role: "system", content: text(seed, 220) }];
	const out = [];
	for (let k = 0; k < turns; k++) {
		messages.push({ role: "user", content: text(seed + 100 + k, 30) });
		const r = await turn(c, messages, sampling, stream && k % 2 === 0);
		out.push(r);
		messages.push({ role: "assistant", content: r.text });
	}
	return out;
}

const samplings = [["greedy", { temperature: 0 }], ["seeded", { temperature: 0.8, top_p: 0.9, seed: 7 }]];
for (const [name, sampling] of samplings) {
	await check(`${name}: a conversation sent whole each turn gives the replies it gives with ` +
		    `--prefix-cache off, and costs only its new tokens`, async () => {
		const seed = name === "greedy" ? 1 : 2;
		const on = await conversation(a1, seed, 4, sampling, true);
		const off = await conversation(b1, seed, 4, sampling, true);
		for (let k = 0; k < 4; k++) {
			assert(on[k].text === off[k].text, `turn ${k + 1}: ${JSON.stringify(on[k].text)} with ` +
			       `reuse, ${JSON.stringify(off[k].text)} without`);
			assert(on[k].usage.prompt_tokens === off[k].usage.prompt_tokens, `turn ${k + 1}: prompt tokens`);
			assert(cached(off[k].usage) === 0, `turn ${k + 1}: off, yet ${cached(off[k].usage)} cached`);
			const c = cached(on[k].usage);
			reusedA += c;
			if (k === 0)
				assert(c === 0, `turn 1: ${c} cached tokens of a prompt never seen`);
			else
				assert(c >= 64 * Math.floor((on[k - 1].usage.prompt_tokens - 1) / 64) &&
				       c < on[k].usage.prompt_tokens,
				       `turn ${k + 1}: ${c} of ${on[k].usage.prompt_tokens} prompt tokens cached ` +
				       `(the last turn's prompt had ${on[k - 1].usage.prompt_tokens})`);
		}
	});
}

await check("each conversation's later turns go to the node that holds it", async () => {
	// Conversation 3 starts while conversation 4's first turn keeps node one busy: the two
	// live on different nodes, and each later turn finds its own.
	const m3 = [{ role: "system", content: text(3, 220) }, { role: "user", content: text(31, 30) }];
	const m4 = [{ role: "system", content: text(4, 220) }, { role: "user", content: text(41, 30) }];
	// A stream that cannot end soon (every special token banned: Qwen2's 151643..151664, its
	// ends among them), running once its first chunk is here, cut when conversation 3 began.
	const ban = {};
	for (let t = 151643; t <= 151664; t++) ban[t] = -100;
	const ctl = new AbortController();
	const long = await a1.chat.completions.create({ model, messages: m4, max_tokens: 3000,
							temperature: 0, logit_bias: ban, stream: true },
						      { signal: ctl.signal });
	const it = long[Symbol.asyncIterator]();
	await it.next();
	const r3 = await turn(a1, m3, { temperature: 0 }, false);
	ctl.abort();
	try {
		while (!(await it.next()).done);
	} catch (e) { /* the abort */ }
	const r4 = await turn(a1, m4, { temperature: 0 }, false); /* its first turn, whole */
	reusedA += cached(r3.usage) + cached(r4.usage);
	m3.push({ role: "assistant", content: r3.text });
	m4.push({ role: "assistant", content: r4.text });
	for (let k = 0; k < 3; k++) {
		for (const m of [m3, m4]) {
			m.push({ role: "user", content: text(50 + k, 20) });
			const r = await turn(a1, m, { temperature: 0 }, false);
			reusedA += cached(r.usage);
			assert(cached(r.usage) >= 128, `turn ${k + 2}: ${cached(r.usage)} cached tokens`);
			m.push({ role: "assistant", content: r.text });
		}
	}
});

await check("another key's request shares nothing; with --prefix-cache shared it does", async () => {
	const m = [{ role: "system", content: text(1, 220) }, { role: "user", content: text(101, 30) }];
	const r2 = await turn(a2, m, { temperature: 0 }, false);
	assert(cached(r2.usage) === 0, `key 2 found ${cached(r2.usage)} tokens of key 1's prompt`);
	const r1 = await turn(a1, m, { temperature: 0 }, false);
	reusedA += cached(r1.usage);
	assert(cached(r1.usage) >= 192, `key 1 found ${cached(r1.usage)} tokens of its own prompt`);
	assert(r1.text === r2.text, "the same reply either way");
	const s1 = await turn(c1, m, { temperature: 0 }, false);
	const s2 = await turn(c2, m, { temperature: 0 }, false);
	assert(cached(s1.usage) === 0, `shared: the first saw ${cached(s1.usage)} cached`);
	assert(cached(s2.usage) >= 192, `shared: key 2 found ${cached(s2.usage)} of key 1's prompt`);
	assert(s2.text === r1.text && s1.text === r1.text, "the same reply either way");
});

await check("responses: a fork (previous_response_id naming the first of two) costs only its " +
	    "new tokens and gives the reply of the same items sent fresh", async () => {
	// On head C (its /metrics is not counted here); the fresh one on head B, reuse off.
	const respond = (c, body) => c.responses.create({ model, max_output_tokens: 12, temperature: 0,
							  ...body });
	const say = (r) => r.output.filter((i) => i.type === "message")
		.map((i) => i.content.map((p) => p.text).join("")).join("");
	const input = text(9, 220);
	const r1 = await respond(c1, { input });
	const r2 = await respond(c1, { previous_response_id: r1.id, input: text(91, 30) });
	const f = await respond(c1, { previous_response_id: r1.id, input: text(92, 30) });
	const fresh = await respond(b1, { input: [{ role: "user", content: input }, ...r1.output,
						  { role: "user", content: text(92, 30) }] });
	const fc = f.usage.input_tokens_details.cached_tokens;
	console.log(`     | fork: ${fc} of its ${f.usage.input_tokens} input tokens cached (the first ` +
		    `response's prompt: ${r1.usage.input_tokens}, the second's: ${r2.usage.input_tokens})`);
	assert(say(f) === say(fresh), `${JSON.stringify(say(f))} forked, ${JSON.stringify(say(fresh))} fresh`);
	assert(f.usage.input_tokens === fresh.usage.input_tokens &&
	       f.usage.input_tokens < r2.usage.input_tokens + 30, "input tokens");
	assert(fc >= 64 * Math.floor((r1.usage.input_tokens - 1) / 64) && fc < f.usage.input_tokens,
	       `${fc} cached tokens`);
});

console.log(`REUSED ${reusedA}`);
console.log(`${passes} passed, ${fails} failed`);
process.exit(fails ? 1 : 0);
