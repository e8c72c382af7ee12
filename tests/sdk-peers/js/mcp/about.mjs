// Prints what a `dsh mcp` server tells an agent before its first call, as the official MCP
// TypeScript SDK client sees it: the instructions, the listed tools (name, whether an output
// schema is listed) and the listing's size in characters. Connection: see connect.mjs.
import { connect } from "./connect.mjs";

const client = await connect();
const listing = await client.listTools();
const about = {
  instructions: client.getInstructions() ?? null,
  tools: listing.tools.map((tool) => ({ name: tool.name, output_schema: !!tool.outputSchema })),
  listing_chars: JSON.stringify(listing).length,
};
await client.close();
process.stdout.write(JSON.stringify(about));
