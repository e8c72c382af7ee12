// Connects the official MCP TypeScript SDK client to a `dsh mcp` server, as an agent would:
//   DSH_MCP_URL=http://127.0.0.1:PORT/mcp [DSH_MCP_TOKEN=…]   streamable HTTP
//   DSH_MCP_COMMAND='["/path/dsh","mcp","--config","…"]'       stdio (the client starts the server)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

export async function connect() {
  const client = new Client({ name: "dsh-peer-js", version: "1.0.0" });
  let transport;
  if (process.env.DSH_MCP_URL) {
    const headers = process.env.DSH_MCP_TOKEN
      ? { Authorization: `Bearer ${process.env.DSH_MCP_TOKEN}` }
      : {};
    transport = new StreamableHTTPClientTransport(new URL(process.env.DSH_MCP_URL), {
      requestInit: { headers },
    });
  } else if (process.env.DSH_MCP_COMMAND) {
    const [command, ...args] = JSON.parse(process.env.DSH_MCP_COMMAND);
    transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
  } else {
    throw new Error("set DSH_MCP_URL or DSH_MCP_COMMAND");
  }
  await client.connect(transport);
  return client;
}
