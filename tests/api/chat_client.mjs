// One chat completion through the official openai npm package, its answer printed as JSON.
// Usage: node chat_client.mjs BASE_URL MODEL REQUEST.json   (REQUEST: messages, tools, and any
// other fields of the request; the model is set here)
import { readFileSync } from "node:fs";
import OpenAI from "openai";

const [baseURL, model, file] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0, timeout: 60000 });
const body = { ...JSON.parse(readFileSync(file, "utf8")), model };
try {
	const r = await client.chat.completions.create(body);
	console.log(JSON.stringify(r));
} catch (e) {
	console.log(JSON.stringify({ status: e?.status, error: e?.error ?? String(e) }));
}
