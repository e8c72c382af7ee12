"""Runs tests/sdk-peers/mcp/scenario.json against `dsh mcp` with the official MCP Python SDK and prints
the transcript (JSON) on stdout, exactly as tests/sdk-peers/js/mcp/scenario.mjs does.

Connection, as an agent would connect:
  DSH_MCP_URL=http://127.0.0.1:PORT/mcp [DSH_MCP_TOKEN=...]   streamable HTTP
  DSH_MCP_COMMAND='["/path/dsh","mcp","--config","..."]'       stdio (the client starts the server)
"""

import asyncio
import contextlib
import json
import os
import re
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

SCENARIO = Path(__file__).resolve().parents[2] / "mcp" / "scenario.json"
REFERENCE = re.compile(r"^\$\{([^.}]+)\.([^}]+)\}$")


def as_text(value):
    """A field as text: strings as they are, anything else (lists, objects) as its JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else "", separators=(",", ":"), ensure_ascii=False)


@contextlib.asynccontextmanager
async def connect():
    """An initialized client session to the server the environment names."""
    async with contextlib.AsyncExitStack() as stack:
        if os.environ.get("DSH_MCP_URL"):
            token = os.environ.get("DSH_MCP_TOKEN")
            headers = {"Authorization": f"Bearer {token}"} if token else None
            http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
            read, write = await stack.enter_async_context(
                streamable_http_client(os.environ["DSH_MCP_URL"], http_client=http)
            )
        elif os.environ.get("DSH_MCP_COMMAND"):
            command, *args = json.loads(os.environ["DSH_MCP_COMMAND"])
            params = StdioServerParameters(command=command, args=args, env=dict(os.environ))
            read, write = await stack.enter_async_context(stdio_client(params))
        else:
            raise SystemExit("set DSH_MCP_URL or DSH_MCP_COMMAND")
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield session


async def main():
    scenario = json.loads(SCENARIO.read_text())
    results = {}

    def resolve(value):
        if isinstance(value, str):
            reference = REFERENCE.match(value)
            return results[reference[1]][reference[2]] if reference else value
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        return value

    transcript = []
    async with connect() as session:
        for step in scenario["steps"]:
            async def call():
                return await session.call_tool(step["tool"], resolve(step["arguments"]))

            result = await call()
            retry = step.get("retry_until")
            for _ in range(30 if retry else 0):
                field = (result.structured_content or {}).get(retry["field"]) or ""
                if retry["contains"] in str(field):
                    break
                result = await call()
            entry = {"step": step["name"], "error": bool(result.is_error)}
            if result.is_error:
                entry["kind"] = result.content[0].text.split(":")[0]
            else:
                structured = result.structured_content
                results[step["name"]] = structured
                entry["kept"] = {f: structured.get(f) for f in step.get("keep", [])}
                images = [[c.mime_type, c.data] for c in result.content if c.type == "image"]
                if images:
                    entry["images"] = images
                checks = dict(step.get("contains", {}))
                if retry:
                    checks[retry["field"]] = retry["contains"]
                for field, text in checks.items():
                    entry[f"{field} contains {text}"] = text in as_text(structured.get(field))
            transcript.append(entry)
    print(json.dumps(transcript, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    asyncio.run(main())
