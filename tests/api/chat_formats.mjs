// Chat requests through the official openai npm package, each sent whole and streamed; what
// the client got printed as one JSON array: [{name, full, chunks}] (full: the completion, or
// {status, error}; chunks: the stream's chunks as the client yields them, or {status, error}).
// Usage: node chat_formats.mjs BASE_URL MODEL CASES.json   (CASES: [{name, request}])
import { readFileSync } from "node:fs";
import OpenAI from "openai";

const [baseURL, model, file] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0, timeout: 60000 });
const failed = (e) => ({ status: e?.status, error: e?.error ?? String(e) });
const out = [];
for (const c of JSON.parse(readFileSync(file, "utf8"))) {
	const body = { ...c.request, model };
	let full, chunks = [];
	try {
		full = await client.chat.completions.create(body);
	} catch (e) {
		full = failed(e);
	}
	try {
		const stream = await client.chat.completions.create({ ...body, stream: true });
		for await (const chunk of stream) chunks.push(chunk);
	} catch (e) {
		chunks = failed(e);
	}
	out.push({ name: c.name, full, chunks });
}
console.log(JSON.stringify(out));
