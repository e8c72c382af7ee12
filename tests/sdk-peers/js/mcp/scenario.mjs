// Runs tests/sdk-peers/mcp/scenario.json against `dsh mcp` with the official MCP TypeScript SDK and
// prints the transcript (JSON) on stdout. Connection: see connect.mjs.
import { readFileSync } from "node:fs";
import { connect } from "./connect.mjs";

const scenario = JSON.parse(
  readFileSync(new URL("../../mcp/scenario.json", import.meta.url), "utf8"),
);
const results = {};

// "${step.field}" → that step's structured result field; anything else as is.
function resolve(value) {
  if (typeof value === "string") {
    const reference = /^\$\{([^.}]+)\.([^}]+)\}$/.exec(value);
    return reference ? results[reference[1]][reference[2]] : value;
  }
  if (Array.isArray(value)) return value.map(resolve);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolve(v)]));
  }
  return value;
}

// A field as text: strings as they are, anything else (lists, objects) as its JSON.
const asText = (value) => (typeof value === "string" ? value : JSON.stringify(value ?? ""));

const client = await connect();
const transcript = [];
for (const step of scenario.steps) {
  const call = () => client.callTool({ name: step.tool, arguments: resolve(step.arguments) });
  let result = await call();
  for (let attempt = 0; step.retry_until && attempt < 30; attempt++) {
    const field = result.structuredContent?.[step.retry_until.field] ?? "";
    if (String(field).includes(step.retry_until.contains)) break;
    result = await call();
  }
  const entry = { step: step.name, error: Boolean(result.isError) };
  if (result.isError) {
    entry.kind = result.content[0].text.split(":")[0];
  } else {
    results[step.name] = result.structuredContent;
    entry.kept = Object.fromEntries((step.keep ?? []).map((f) => [f, result.structuredContent[f] ?? null]));
    const images = result.content.filter((c) => c.type === "image").map((c) => [c.mimeType, c.data]);
    if (images.length > 0) entry.images = images;
    for (const [field, text] of Object.entries({
      ...(step.contains ?? {}),
      ...(step.retry_until ? { [step.retry_until.field]: step.retry_until.contains } : {}),
    })) {
      entry[`${field} contains ${text}`] = asText(result.structuredContent[field]).includes(text);
    }
  }
  transcript.push(entry);
}
await client.close();
process.stdout.write(JSON.stringify(transcript, null, 1) + "\n");
