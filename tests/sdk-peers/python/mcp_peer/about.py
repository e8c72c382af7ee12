"""Prints what a `dsh mcp` server tells an agent before its first call, as the official MCP Python
SDK client sees it: the instructions, the listed tools (name, whether an output schema is listed)
and the listing's size in characters, exactly as tests/sdk-peers/js/mcp/about.mjs does.
Connection: see scenario.py."""

import asyncio
import json

from scenario import connect


async def main():
    async with connect() as session:
        listing = await session.list_tools()
        about = {
            "instructions": session.instructions,
            "tools": [
                {"name": tool.name, "output_schema": tool.output_schema is not None}
                for tool in listing.tools
            ],
            "listing_chars": len(listing.model_dump_json(by_alias=True, exclude_none=True)),
        }
    print(json.dumps(about))


asyncio.run(main())
