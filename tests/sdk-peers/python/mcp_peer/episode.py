"""A scripted agent episode through `dsh mcp` with the official MCP Python SDK (issue 26): what a
coding agent does on a small task, step by step, checking each result as an agent would, so that a
broken tool fails the episode.

In the server's working directory it creates a small Python package with a bug (standard library
and `unittest` only), greps for the function, reads the files, runs the tests (they fail), fixes
the bug with edit_file, asks the language server (`lsp` diagnostics, pyright) about the file it
edited and about the module using it, fixes the type error found there, runs the tests again (they
pass), starts a dev server in the background (`python3 -m http.server` on a port the kernel
picks), fetches a file from it with curl (200), reads its log, stops it, and uses a Python REPL in
a terminal.

Prints on stdout, as JSON: the tools/list size, how long connecting took (starting the server, and
on an E2B composition creating the sandbox), per step the calls, the characters returned to the
model (the text content of every result, as bench.mjs counts them) and the wall time, and the
totals. On stderr: each call as it returns, then the figures in words. Connection: see scenario.py
(DSH_MCP_COMMAND or DSH_MCP_URL); DSH_EPISODE_LABEL names the composition in the figures.
Run by tests/benches/mcp/episode.sh (release) and crates/cli/tests/it/episode.rs (the test build).
"""

import asyncio
import json
import os
import re
import sys
import time

from scenario import connect

STATS = '''"""Summary statistics."""


def mean(values: list[float]) -> float:
    """The arithmetic mean of values (at least one)."""
    return sum(values) / len(values)


def median(values: list[float]) -> float:
    """The middle value of values (at least one); for an even count, the mean of the two middle ones."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return sum(ordered[middle:middle + 2]) / 2
'''

REPORT = '''"""A one-line description of a sample."""

from calc.stats import mean, median


def describe(values: list[float]) -> str:
    """'n=…, mean=…, median=…' for values (at least one)."""
    return "n=" + len(values) + f", mean={mean(values)}, median={median(values)}"
'''

TESTS = '''import unittest

from calc.stats import mean, median


class StatsTest(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)

    def test_median_of_an_odd_count(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_median_of_an_even_count(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)
'''

FILES = {
    "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1.0"\n',
    "calc/__init__.py": '"""calc: small statistics."""\n',
    "calc/stats.py": STATS,
    "calc/report.py": REPORT,
    "tests/__init__.py": "",
    "tests/test_stats.py": TESTS,
}


class EpisodeFailed(Exception):
    """A step's result is not what an agent needs to go on."""


def text_of(result):
    """What the model is shown of a result: its text content."""
    return "\n".join(getattr(block, "text", "") or "" for block in result.content)


class Agent:
    """Calls tools as an agent does and keeps the figures of each step."""

    def __init__(self, session):
        self.session = session
        self.steps = []

    def step(self, name):
        self.steps.append({"step": name, "calls": 0, "chars": 0, "ms": 0.0})

    async def call(self, tool, arguments):
        """The structured result of one call; a tool error fails the episode, naming the step."""
        current = self.steps[-1]
        start = time.perf_counter()
        try:
            result = await self.session.call_tool(tool, arguments)
        except Exception as error:  # a protocol error: an unknown tool, bad arguments, a lost server
            raise EpisodeFailed(f"step {current['step']}: {tool} {json.dumps(arguments)}: {error}") from error
        elapsed = (time.perf_counter() - start) * 1000
        current["ms"] += elapsed
        current["calls"] += 1
        text = text_of(result)
        current["chars"] += len(text)
        # Each call on stderr, so that a failed or stuck episode shows how far it got.
        print(f"episode: {current['step']}: {tool} {elapsed:.0f} ms", file=sys.stderr)
        if result.is_error:
            raise EpisodeFailed(f"step {current['step']}: {tool} {json.dumps(arguments)} failed: {text}")
        return result.structured_content

    def check(self, condition, what, result):
        if not condition:
            raise EpisodeFailed(f"step {self.steps[-1]['step']}: expected {what}; got {json.dumps(result)[:2000]}")

    async def until(self, tool, arguments, done, what, attempts=20):
        """Calls `tool` until `done(result)` (a terminal or log read that came early), at most
        `attempts` times."""
        for _ in range(attempts):
            result = await self.call(tool, arguments)
            if done(result):
                return result
        self.check(False, what, result)


async def episode(agent):
    agent.step("create the package")
    for path, content in FILES.items():
        await agent.call("write_file", {"path": path, "content": content})

    agent.step("grep for the function")
    found = await agent.call("grep", {"pattern": r"def median\(", "path": "."})
    agent.check(
        [(m["path"], m["line"]) for m in found["matches"]] == [("calc/stats.py", 9)],
        "one match, calc/stats.py:9",
        found,
    )

    agent.step("read the files")
    stats = await agent.call("read_file", {"path": "calc/stats.py"})
    agent.check("ordered[middle:middle + 2]" in stats["content"], "the median's code", stats)
    tests = await agent.call("read_file", {"path": "tests/test_stats.py"})
    agent.check("def test_median_of_an_even_count" in tests["content"], "the median's test", tests)

    agent.step("run the tests: they fail")
    failing = await agent.call("run", {"command": "python3 -m unittest"})
    agent.check(
        failing["exit_code"] == 1 and "FAILED (failures=1)" in failing["output"]
        and "test_median_of_an_even_count" in failing["output"],
        "exit 1 and the even-count test failing",
        failing,
    )

    agent.step("fix the bug")
    # The fix changes the file's size: at the same size and modification second Python would
    # run the bytecode it cached from the failing run (a trap for agents, not for this episode).
    fixed = await agent.call(
        "edit_file",
        {
            "path": "calc/stats.py",
            "old_string": "ordered[middle:middle + 2]",
            "new_string": "ordered[middle - 1:middle + 1]",
            "if_version": stats["version"],
        },
    )
    agent.check(
        fixed["replacements"] == 1 and "+    return sum(ordered[middle - 1:middle + 1]) / 2" in fixed["diff"],
        "the fix in the diff",
        fixed,
    )

    agent.step("diagnostics")
    edited = await agent.call("lsp", {"op": "diagnostics", "path": "calc/stats.py"})
    agent.check(
        edited["errors"] == 0 and edited["version"] != stats["version"],
        "no error in the edited version",
        edited,
    )
    # The whole package: pyright, sent several files at once, publishes each first empty and
    # then in full; the answer must be the full one.
    broken = await agent.call("lsp", {"op": "diagnostics", "path": "calc"})
    agent.check(
        broken["errors"] == 1 and broken["diagnostics"][0]["path"].endswith("calc/report.py")
        and broken["diagnostics"][0]["start"]["line"] == 8
        and "not supported" in broken["diagnostics"][0]["message"],
        "pyright's one error in the package, at calc/report.py:8 (str + int)",
        broken,
    )
    retyped = await agent.call(
        "edit_file",
        {"path": "calc/report.py", "old_string": '"n=" + len(values) + f"', "new_string": 'f"n={len(values)}'},
    )
    clean = await agent.call("lsp", {"op": "diagnostics", "path": "calc/report.py"})
    agent.check(
        clean["errors"] == 0 and clean["version"] == retyped["files"][0]["version"],
        "no error left in the edited version",
        clean,
    )

    agent.step("run the tests: they pass")
    passing = await agent.call("run", {"command": "python3 -m unittest"})
    agent.check(
        passing["exit_code"] == 0 and re.search(r"Ran 3 tests.*\n\s*OK", passing["output"], re.S),
        "exit 0 and 3 tests OK",
        passing,
    )

    agent.step("start a dev server")
    # -u: the log reaches the pipe as it is written. Port 0: the kernel picks a free one, and
    # the server prints it.
    started = await agent.call("run", {"command": "python3 -u -m http.server 0 --bind 127.0.0.1", "background": True})
    server = started["id"]
    serving = await agent.call("read_output", {"id": server, "pattern": r"port \d+", "wait_ms": 10000})
    port = re.search(r"port (\d+)", serving["output"])
    agent.check(port is not None, "the port it serves on", serving)
    url = f"http://127.0.0.1:{port[1]}/calc/stats.py"

    agent.step("fetch from it")
    fetched = await agent.call("run", {"argv": ["curl", "-sS", "-w", "\\n%{http_code}", url]})
    agent.check(
        fetched["exit_code"] == 0 and fetched["output"].endswith("\n200")
        and "ordered[middle - 1:middle + 1]" in fetched["output"],
        "200 and the fixed file",
        fetched,
    )

    agent.step("read its log")
    logged = await agent.call("read_output", {"id": server, "pattern": '"GET /calc/stats.py HTTP/1.1" 200', "wait_ms": 10000})
    agent.check('"GET /calc/stats.py HTTP/1.1" 200' in logged["output"], "the request in its log", logged)

    agent.step("stop it")
    stopped = await agent.call("kill", {"id": server})
    agent.check(
        stopped["status"] == "exited" and stopped.get("signal") == "SIGTERM",
        "the server ended by SIGTERM",
        stopped,
    )

    agent.step("a Python REPL in a terminal")
    terminal = (await agent.call("terminal_open", {"command": "python3"}))["id"]
    await agent.until(
        "terminal_read", {"id": terminal, "wait_ms": 10000},
        # The screen as a person sees it: trailing blanks trimmed.
        lambda read: read["screen"].rstrip().endswith(">>>"), "the REPL's prompt",
    )
    await agent.call(
        "terminal_send",
        {"id": terminal, "text": "from calc.report import describe; print(describe([4, 1, 3, 2]))", "keys": ["Enter"]},
    )
    await agent.until(
        "terminal_read", {"id": terminal, "wait_ms": 10000},
        lambda read: "n=4, mean=2.5, median=2.5" in read["screen"], "the value printed",
    )
    await agent.call("terminal_control", {"op": "close", "id": terminal})


async def main():
    label = os.environ.get("DSH_EPISODE_LABEL", "dsh mcp")
    start = time.perf_counter()
    async with connect() as session:
        connected = time.perf_counter()
        listing = await session.list_tools()
        agent = Agent(session)
        await episode(agent)
        done = time.perf_counter()
    figures = {
        "listing_chars": len(listing.model_dump_json(by_alias=True, exclude_none=True)),
        "connect_ms": round((connected - start) * 1000, 1),
        "calls": sum(s["calls"] for s in agent.steps),
        "chars": sum(s["chars"] for s in agent.steps),
        "episode_ms": round((done - connected) * 1000, 1),
        "steps": [{**s, "ms": round(s["ms"], 1)} for s in agent.steps],
    }
    print(json.dumps(figures))
    print(
        f"episode ({label}): {figures['calls']} calls, {figures['chars']} characters returned, "
        f"{figures['episode_ms'] / 1000:.2f} s (connecting {figures['connect_ms'] / 1000:.2f} s); "
        f"tools/list {figures['listing_chars']} characters",
        file=sys.stderr,
    )
    for s in figures["steps"]:
        print(f"  {s['step']}: {s['calls']} calls, {s['chars']} characters, {s['ms']:.0f} ms", file=sys.stderr)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except* EpisodeFailed as failed:
        # The SDK's task groups nest the error in exception groups.
        def leaves(error):
            if isinstance(error, BaseExceptionGroup):
                return [leaf for inner in error.exceptions for leaf in leaves(inner)]
            return [error]

        for error in leaves(failed):
            print(f"episode failed: {error}", file=sys.stderr)
        sys.exit(1)
