// The client libraries people use, against a head (clients.sh): the official openai package,
// the Vercel AI SDK (`ai` with `@ai-sdk/openai`: its default model speaks the Responses API,
// .chat() the chat endpoint) and LangChain's `@langchain/openai` (ChatOpenAI, with
// useResponsesApi too; OpenAIEmbeddings). Each does a chat, a stream, a tool round trip, a
// message of text parts, a Responses exchange, embeddings, a structured output (a JSON schema)
// and a forced tool call, as their documentation shows.
// The node answers each prompt's last `sim-reply: "..."` line verbatim (a simulated engine
// with Qwen2.5's template, --sim-script on), so every reply is known.
// Usage: node clients.mjs BASE_URL MODEL EMBED_MODEL   prints "ok ..." / "FAIL ..." lines.
import OpenAI from "openai";
import { generateText, generateObject, streamText, embed, embedMany, tool, jsonSchema, stepCountIs } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { ChatOpenAI, OpenAIEmbeddings } from "@langchain/openai";
import { HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";

const [base, model, embedModel] = process.argv.slice(2);
let fails = 0;
const say = (reply) => "sim-reply: " + JSON.stringify(reply).replaceAll("<", "\\u003c");
const CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
const WEATHER = {
	type: "object",
	properties: { city: { type: "string", description: "The city" } },
	required: ["city"],
};

// Structured outputs: the schema goes to the head (compiled to a grammar the node enforces;
// the scripted reply is one it allows), the client parses the reply as its documentation shows.
const PERSON = {
	type: "object",
	properties: { name: { type: "string" }, age: { type: "integer", minimum: 0, maximum: 150 } },
	required: ["name", "age"],
	additionalProperties: false,
};
const ADA = '{"name": "Ada", "age": 36}';

async function check(name, fn) {
	try {
		const why = await fn();
		if (why) {
			fails++;
			console.log(`FAIL ${name}: ${why}`);
		} else {
			console.log(`ok   ${name}`);
		}
	} catch (e) {
		fails++;
		const body = e?.responseBody ?? e?.error ?? "";
		console.log(`FAIL ${name}: ${e?.message ?? e} ${typeof body === "string" ? body : JSON.stringify(body)}`.slice(0, 600));
	}
}
const same = (got, want) => (JSON.stringify(got) === JSON.stringify(want) ? "" : `got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const unit = (v) => (Math.abs(norm(v) - 1) < 1e-3 ? "" : `norm ${norm(v)}`);

// ---- openai ----
const oa = new OpenAI({ baseURL: base, apiKey: "sk-test", maxRetries: 0, timeout: 60000 });
await check("openai: chat", async () => {
	const r = await oa.chat.completions.create({ model, messages: [{ role: "user", content: "Hi\n" + say("Hello there.") }] });
	return same(r.choices[0].message.content, "Hello there.");
});
await check("openai: chat stream with usage", async () => {
	const s = await oa.chat.completions.create({ model, stream: true, stream_options: { include_usage: true },
		messages: [{ role: "user", content: "Hi\n" + say("Hello there.") }] });
	let t = "", usage = null;
	for await (const c of s) {
		t += c.choices[0]?.delta?.content ?? "";
		if (c.usage) usage = c.usage;
	}
	return same(t, "Hello there.") || (usage?.completion_tokens > 0 ? "" : "no usage");
});
await check("openai: text parts", async () => {
	const r = await oa.chat.completions.create({ model, messages: [{ role: "user",
		content: [{ type: "text", text: "Hi" }, { type: "text", text: say("Parts.") }] }] });
	return same(r.choices[0].message.content, "Parts.");
});
await check("openai: a tool round trip (null content beside the call)", async () => {
	const tools = [{ type: "function", function: { name: "get_weather", description: "The weather", parameters: WEATHER } }];
	const messages = [{ role: "user", content: "Weather?\n" + say(CALL) }];
	const r = await oa.chat.completions.create({ model, messages, tools });
	const call = r.choices[0].message.tool_calls?.[0];
	if (r.choices[0].finish_reason !== "tool_calls" || call?.function.name !== "get_weather") return `no call: ${JSON.stringify(r.choices[0])}`;
	messages.push({ role: "assistant", content: null, tool_calls: r.choices[0].message.tool_calls });
	messages.push({ role: "tool", tool_call_id: call.id, content: say("Sunny in Paris.") });
	const r2 = await oa.chat.completions.create({ model, messages, tools });
	return same([JSON.parse(call.function.arguments), r2.choices[0].message.content], [{ city: "Paris" }, "Sunny in Paris."]);
});
await check("openai: chat.completions.parse with a json_schema response_format", async () => {
	const r = await oa.chat.completions.parse({ model, messages: [{ role: "user", content: "Who?\n" + say(ADA) }],
		response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: PERSON } } });
	return same(r.choices[0].message.parsed, { name: "Ada", age: 36 });
});
await check("openai: tool_choice required and a named function", async () => {
	const tools = [{ type: "function", function: { name: "get_weather", description: "The weather", parameters: WEATHER } }];
	const messages = [{ role: "user", content: "Weather?\n" + say(CALL) }];
	const r = await oa.chat.completions.create({ model, messages, tools, tool_choice: "required" });
	const r2 = await oa.chat.completions.create({ model, messages, tools, parallel_tool_calls: false,
		tool_choice: { type: "function", function: { name: "get_weather" } } });
	return same([r, r2].map((x) => [x.choices[0].finish_reason, JSON.parse(x.choices[0].message.tool_calls[0].function.arguments)]),
		[["tool_calls", { city: "Paris" }], ["tool_calls", { city: "Paris" }]]);
});
await check("openai: responses, whole and streamed", async () => {
	const r = await oa.responses.create({ model, input: "Hi\n" + say("Hello there.") });
	const s = await oa.responses.create({ model, input: "Hi\n" + say("Hello there."), stream: true });
	let t = "", done = null;
	for await (const ev of s) {
		if (ev.type === "response.output_text.delta") t += ev.delta;
		if (ev.type === "response.completed") done = ev.response;
	}
	const last = done?.output?.find((i) => i.type === "message")?.content?.[0]?.text;
	return same([r.output_text, t, last], ["Hello there.", "Hello there.", "Hello there."]);
});
await check("openai: responses, a tool round trip over previous_response_id", async () => {
	const tools = [{ type: "function", name: "get_weather", description: "The weather", parameters: WEATHER }];
	const r = await oa.responses.create({ model, tools, input: "Weather?\n" + say(CALL) });
	const call = r.output.find((i) => i.type === "function_call");
	if (!call) return `no call: ${JSON.stringify(r.output)}`;
	const r2 = await oa.responses.create({ model, tools, previous_response_id: r.id,
		input: [{ type: "function_call_output", call_id: call.call_id, output: say("Sunny in Paris.") }] });
	return same([JSON.parse(call.arguments), r2.output_text], [{ city: "Paris" }, "Sunny in Paris."]);
});
await check("openai: responses, a fork (previous_response_id naming the first of two)", async () => {
	const r1 = await oa.responses.create({ model, input: "Hi\n" + say("One.") });
	const r2 = await oa.responses.create({ model, previous_response_id: r1.id, input: "More\n" + say("Two.") });
	const f = await oa.responses.create({ model, previous_response_id: r1.id, input: "Else\n" + say("Fork.") });
	const fresh = await oa.responses.create({ model, input: [{ role: "user", content: "Hi\n" + say("One.") },
		...r1.output, { role: "user", content: "Else\n" + say("Fork.") }] });
	return same([r2.output_text, f.output_text, f.previous_response_id, f.usage.input_tokens,
		f.usage.input_tokens_details.cached_tokens >= r1.usage.input_tokens],
		["Two.", "Fork.", r1.id, fresh.usage.input_tokens, true]);
});
await check("openai: responses.inputTokens.count, the response's input tokens", async () => {
	const input = "Hi\n" + say("Counted.");
	const n = await oa.responses.inputTokens.count({ model, input });
	const r = await oa.responses.create({ model, input });
	return same([n.object, n.input_tokens], ["response.input_tokens", r.usage.input_tokens]);
});
await check("openai: embeddings (float and base64, the same vectors)", async () => {
	const f = await oa.embeddings.create({ model: embedModel, input: ["a cat", "a dog"], encoding_format: "float" });
	const b = await oa.embeddings.create({ model: embedModel, input: ["a cat", "a dog"] }); // the SDK asks base64
	return same(f.data.length, 2) || unit(f.data[0].embedding) ||
		same(b.data[1].embedding.map((x) => x.toFixed(6)), f.data[1].embedding.map((x) => x.toFixed(6)));
});

// ---- Vercel AI SDK ----
const provider = createOpenAI({ baseURL: base, apiKey: "sk-test" });
for (const [label, m] of [["chat", provider.chat(model)], ["responses", provider(model)]]) {
	await check(`ai (${label}): generateText`, async () => {
		const r = await generateText({ model: m, prompt: "Hi\n" + say("Hello there.") });
		return same(r.text, "Hello there.") || (r.usage.outputTokens > 0 ? "" : "no usage");
	});
	await check(`ai (${label}): streamText`, async () => {
		const r = streamText({ model: m, prompt: "Hi\n" + say("Hello there.") });
		let t = "";
		for await (const p of r.textStream) t += p;
		return same(t, "Hello there.");
	});
	await check(`ai (${label}): a message of two text parts`, async () => {
		const r = await generateText({ model: m, messages: [{ role: "user",
			content: [{ type: "text", text: "Hi" }, { type: "text", text: say("Parts.") }] }] });
		return same(r.text, "Parts.");
	});
	await check(`ai (${label}): tools, executed and answered (two steps)`, async () => {
		const r = await generateText({ model: m, stopWhen: stepCountIs(3), prompt: "Weather?\n" + say(CALL),
			tools: { get_weather: tool({ description: "The weather", inputSchema: jsonSchema(WEATHER),
				execute: async ({ city }) => say(`Sunny in ${city}.`) }) } });
		return same([r.steps[0].toolCalls[0]?.input, r.text], [{ city: "Paris" }, "Sunny in Paris."]);
	});
	await check(`ai (${label}): generateObject with a JSON schema`, async () => {
		const r = await generateObject({ model: m, schema: jsonSchema(PERSON), prompt: "Who?\n" + say(ADA) });
		return same(r.object, { name: "Ada", age: 36 });
	});
	await check(`ai (${label}): toolChoice required`, async () => {
		const r = await generateText({ model: m, prompt: "Weather?\n" + say(CALL), toolChoice: "required",
			tools: { get_weather: tool({ description: "The weather", inputSchema: jsonSchema(WEATHER) }) } });
		return same(r.toolCalls[0]?.input, { city: "Paris" });
	});
	await check(`ai (${label}): a second turn after the first reply`, async () => {
		const r = await generateText({ model: m, prompt: "Name?\n" + say("Ada.") });
		const r2 = await generateText({ model: m, messages: [{ role: "user", content: "Name?\n" + say("Ada.") },
			...r.response.messages, { role: "user", content: "Again?\n" + say("Still Ada.") }] });
		return same([r.text, r2.text], ["Ada.", "Still Ada."]);
	});
}
await check("ai: embed and embedMany", async () => {
	const one = await embed({ model: provider.embedding(embedModel), value: "a cat" });
	const many = await embedMany({ model: provider.embedding(embedModel), values: ["a cat", "a dog"] });
	return unit(one.embedding) || same(many.embeddings.length, 2) ||
		same(many.embeddings[0].map((x) => x.toFixed(6)), one.embedding.map((x) => x.toFixed(6)));
});

// ---- LangChain ----
for (const [label, extra] of [["chat", {}], ["responses", { useResponsesApi: true }]]) {
	const lc = new ChatOpenAI({ model, apiKey: "sk-test", configuration: { baseURL: base }, maxRetries: 0, ...extra });
	const text = (m) => (typeof m.content === "string" ? m.content : m.content.map((p) => p.text ?? "").join(""));
	await check(`langchain (${label}): invoke`, async () => {
		const m = await lc.invoke([new SystemMessage("Be brief."), new HumanMessage("Hi\n" + say("Hello there."))]);
		return same(text(m), "Hello there.");
	});
	await check(`langchain (${label}): stream`, async () => {
		let t = "";
		for await (const c of await lc.stream("Hi\n" + say("Hello there."))) t += text(c);
		return same(t, "Hello there.");
	});
	await check(`langchain (${label}): a message of text parts`, async () => {
		const m = await lc.invoke([new HumanMessage({ content: [{ type: "text", text: "Hi" }, { type: "text", text: say("Parts.") }] })]);
		return same(text(m), "Parts.");
	});
	await check(`langchain (${label}): withStructuredOutput (jsonSchema)`, async () => {
		const s = lc.withStructuredOutput(PERSON, { name: "person", method: "jsonSchema", strict: true });
		return same(await s.invoke("Who?\n" + say(ADA)), { name: "Ada", age: 36 });
	});
	await check(`langchain (${label}): bindTools, a tool round trip`, async () => {
		const withTools = lc.bindTools([{ type: "function", function: { name: "get_weather", description: "The weather", parameters: WEATHER } }]);
		const first = new HumanMessage("Weather?\n" + say(CALL));
		const ai = await withTools.invoke([first]);
		const call = ai.tool_calls?.[0];
		if (!call) return `no call: ${JSON.stringify(ai)}`;
		const m = await withTools.invoke([first, ai, new ToolMessage({ tool_call_id: call.id, content: say("Sunny in Paris.") })]);
		return same([call.args, text(m)], [{ city: "Paris" }, "Sunny in Paris."]);
	});
}
await check("langchain: OpenAIEmbeddings", async () => {
	const e = new OpenAIEmbeddings({ model: embedModel, apiKey: "sk-test", configuration: { baseURL: base } });
	const docs = await e.embedDocuments(["a cat", "a dog"]);
	const q = await e.embedQuery("a cat");
	return same(docs.length, 2) || unit(q) || same(docs[0].map((x) => x.toFixed(6)), q.map((x) => x.toFixed(6)));
});
console.log(fails ? `${fails} failed` : "all passed");
process.exit(fails ? 1 : 0);
