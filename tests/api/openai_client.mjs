// The head's API through the official openai npm package: every reply is checked against the
// simulated engine's own output for the same prompt (sim_expect), rendered here with ChatML
// exactly as the engine's chat templates render it.
// Usage: node openai_client.mjs BASE_URL API_KEY SIM_EXPECT
import { execFileSync } from "node:child_process";
import OpenAI, { toFile } from "openai";

const [baseURL, apiKey, simExpect] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20000 });
let passes = 0, fails = 0;

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
function eq(got, want, what) {
	if (got !== want) throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}
// What the engine generates after prompt (text with ChatML specials).
function expected(prompt, { temperature = 1, top_p = 1, seed = 0, max_tokens = 4096 } = {}) {
	return execFileSync(simExpect, ["--temperature", String(temperature), "--top-p", String(top_p),
		"--seed", String(seed), "--max-tokens", String(max_tokens)], { input: prompt, stdio: ["pipe", "pipe", "ignore"] }).toString();
}
// Python's json.dumps with its default separators and ensure_ascii=False, as Hugging Face's
// tojson renders.
function pyjson(v) {
	if (Array.isArray(v)) return "[" + v.map(pyjson).join(", ") + "]";
	if (v && typeof v === "object")
		return "{" + Object.entries(v).map(([k, x]) => JSON.stringify(k) + ": " + pyjson(x)).join(", ") + "}";
	return JSON.stringify(v); // ensure_ascii=False: text as it is
}
function chatml(messages, tools) {
	let out = "", rest = messages;
	if (tools && tools.length) {
		out += "<|im_start|>system\n";
		if (messages[0].role === "system") {
			out += messages[0].content + "\n\n";
			rest = messages.slice(1);
		}
		out += "# Tools\n" + tools.map((t) => pyjson(t) + "\n").join("");
		out += 'Call a tool as <|tool_call|>{"name": <name>, "arguments": <object>}<|/tool_call|>';
		out += "<|im_end|>\n";
	}
	for (const m of rest) {
		let content = m.content ?? "";
		for (const c of m.tool_calls ?? [])
			content += `<|tool_call|>{"name": ${pyjson(c.function.name)}, "arguments": ${pyjson(JSON.parse(c.function.arguments))}}<|/tool_call|>`;
		out += `<|im_start|>${m.role}\n${content}<|im_end|>\n`;
	}
	return out + "<|im_start|>assistant\n";
}

await check("models.list() lists sim-1", async () => {
	const ids = [];
	for await (const m of client.models.list()) ids.push(m.id);
	eq(ids.join(","), "sim-1", "models");
});

await check("completions.create: text and usage equal the engine's", async () => {
	const r = await client.completions.create({ model: "sim-1", prompt: "The fleet", max_tokens: 30, temperature: 0 });
	eq(r.object, "text_completion", "object");
	eq(r.choices[0].text, expected("The fleet", { temperature: 0, max_tokens: 30 }), "text");
	eq(r.usage.prompt_tokens, 9, "prompt_tokens");
	eq(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens, "total_tokens");
});

const messages = [
	{ role: "system", content: "You are terse." },
	{ role: "user", content: "Describe a lighthouse." },
];
await check("chat.completions.create: the reply equals the engine's", async () => {
	const r = await client.chat.completions.create({ model: "sim-1", messages, seed: 11 });
	eq(r.object, "chat.completion", "object");
	eq(r.choices[0].message.role, "assistant", "role");
	eq(r.choices[0].message.content, expected(chatml(messages), { seed: 11 }), "content");
	eq(r.choices[0].finish_reason, "stop", "finish_reason");
	assert(r.id.startsWith("chatcmpl-"), "id");
});

await check("a streamed chat: the deltas spell the same reply; usage at the end", async () => {
	const stream = await client.chat.completions.create({
		model: "sim-1", messages, seed: 11, stream: true, stream_options: { include_usage: true },
	});
	let text = "", finish = null, usage = null, chunks = 0;
	for await (const c of stream) {
		chunks++;
		if (c.usage) usage = c.usage;
		for (const ch of c.choices) {
			text += ch.delta?.content ?? "";
			finish = ch.finish_reason ?? finish;
		}
	}
	eq(text, expected(chatml(messages), { seed: 11 }), "streamed text");
	eq(finish, "stop", "finish_reason");
	assert(usage && usage.completion_tokens > 0 && chunks > 3, "usage chunk");
});

await check("n = 3: three choices, choice i the engine's reply at seed + i, whole and streamed", async () => {
	const r = await client.chat.completions.create({ model: "sim-1", messages, seed: 20, n: 3, max_tokens: 40 });
	eq(r.choices.length, 3, "choices");
	for (const c of r.choices)
		eq(c.message.content, expected(chatml(messages), { seed: 20 + c.index, max_tokens: 40 }), `choice ${c.index}`);
	const stream = await client.chat.completions.create({
		model: "sim-1", messages, seed: 20, n: 3, max_tokens: 40, stream: true,
		stream_options: { include_usage: true },
	});
	const texts = ["", "", ""], finishes = [null, null, null];
	let usage = null;
	for await (const c of stream) {
		if (c.usage) usage = c.usage;
		for (const ch of c.choices) {
			texts[ch.index] += ch.delta?.content ?? "";
			finishes[ch.index] = ch.finish_reason ?? finishes[ch.index];
		}
	}
	for (let i = 0; i < 3; i++) {
		eq(texts[i], r.choices[i].message.content, `streamed choice ${i}`);
		eq(finishes[i], r.choices[i].finish_reason, `finish_reason ${i}`);
	}
	eq(usage.completion_tokens, r.usage.completion_tokens, "usage: every choice's tokens");
});

await check("max_completion_tokens ends the reply with finish_reason length", async () => {
	const r = await client.chat.completions.create({ model: "sim-1", messages, seed: 11, max_completion_tokens: 5 });
	eq(r.choices[0].finish_reason, "length", "finish_reason");
	eq(r.usage.completion_tokens, 5, "completion_tokens");
	eq(r.choices[0].message.content, expected(chatml(messages), { seed: 11, max_tokens: 5 }), "content");
});

await check("a tool call round trip: tools, the assistant's call, the tool's answer", async () => {
	const tools = [{
		type: "function",
		function: {
			name: "get_weather", description: "The weather in a city.",
			parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
		},
	}];
	const convo = [
		{ role: "user", content: "Weather in Oslo?" },
		{ role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Oslo"}' } }] },
		{ role: "tool", tool_call_id: "call_1", content: "{\"temp_c\": 4}" },
	];
	const r = await client.chat.completions.create({ model: "sim-1", messages: convo, tools, temperature: 0 });
	eq(r.choices[0].message.content, expected(chatml(convo, tools), { temperature: 0 }), "content");
});

await check("logprobs through the client", async () => {
	const r = await client.chat.completions.create({ model: "sim-1", messages, temperature: 0, max_tokens: 8, logprobs: true, top_logprobs: 2 });
	const lp = r.choices[0].logprobs.content;
	eq(lp.length, 8, "entries");
	eq(lp.map((x) => x.token).join(""), r.choices[0].message.content, "tokens spell the content");
	assert(lp.every((x) => x.top_logprobs.length === 2 && x.logprob <= 0 && Array.isArray(x.bytes)), "shape");
});

await check("an unknown model: NotFoundError, code model_not_found", async () => {
	try {
		await client.chat.completions.create({ model: "gpt-nope", messages });
		throw new Error("no error");
	} catch (e) {
		assert(e instanceof OpenAI.NotFoundError, `got ${e?.constructor?.name}: ${e}`);
		eq(e.code, "model_not_found", "code");
		eq(e.param, "model", "param");
	}
});

await check("a bad parameter: BadRequestError naming it", async () => {
	try {
		await client.chat.completions.create({ model: "sim-1", messages, top_p: 7 });
		throw new Error("no error");
	} catch (e) {
		assert(e instanceof OpenAI.BadRequestError, `got ${e?.constructor?.name}: ${e}`);
		eq(e.param, "top_p", "param");
	}
});

await check("a wrong key: AuthenticationError", async () => {
	const bad = new OpenAI({ baseURL, apiKey: "sk-wrong", maxRetries: 0 });
	try {
		await bad.models.list();
		throw new Error("no error");
	} catch (e) {
		assert(e instanceof OpenAI.AuthenticationError, `got ${e?.constructor?.name}: ${e}`);
		eq(e.code, "invalid_api_key", "code");
	}
});

// Transcriptions: the engine's own transcript of the bytes (sim_transcribe, built beside
// sim_expect).
const simTranscribe = simExpect.replace(/sim_expect$/, "sim_transcribe");
const audio = Buffer.from(Array.from({ length: 200 }, (_, i) => (i * 37 + 11) & 255));
const transcript = execFileSync(simTranscribe, [], { input: audio, stdio: ["pipe", "pipe", "ignore"] }).toString();

await check("audio.transcriptions.create: json, verbose_json and a stream", async () => {
	const t = await client.audio.transcriptions.create({ file: await toFile(audio, "a.wav"), model: "sim-1" });
	eq(t.text, transcript, "text");
	const v = await client.audio.transcriptions.create({ file: await toFile(audio, "a.wav"), model: "sim-1",
		response_format: "verbose_json" });
	eq(v.segments.map((s) => s.text).join(" "), transcript, "segments");
	const stream = await client.audio.transcriptions.create({ file: await toFile(audio, "a.wav"), model: "sim-1",
		stream: true });
	let deltas = "", done = null;
	for await (const ev of stream) {
		if (ev.type === "transcript.text.delta") deltas += ev.delta;
		else if (ev.type === "transcript.text.done") done = ev.text;
	}
	eq(deltas, transcript, "deltas");
	eq(done, transcript, "done");
});

console.log(`${passes} passed, ${fails} failed`);
process.exit(fails ? 1 : 0);
