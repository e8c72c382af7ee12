"""Benchmark driver for dsh-subprocess-e2b's bench (plugins/subprocess-e2b/benches/commands_vs_sdks).

The official Python SDK (tests/sdk-peers/python, PyPI e2b 2.63.0, run with that venv's python) running
the same commands on the same sandbox of the same e2b-local. Connects with E2B_API_URL /
E2B_SANDBOX_URL / E2B_API_KEY and prints one JSON object on stdout; the bench computes medians
and ratios.

  python commands.py roundtrip  <sandboxId> <iterations>      -> {samples_ms}   commands.run("true")
  python commands.py throughput <sandboxId> <bytes> <runs>    -> {samples_ms, bytes}
  python commands.py collect    <sandboxId> <bytes>           -> {bytes, error?} (the bench measures peak RSS)
  python commands.py concurrent <sandboxId> <count> <rounds>  -> {samples_ms}   wall time of <count> at once (AsyncSandbox)
"""

import asyncio
import json
import sys
import time

from e2b import AsyncSandbox, Sandbox

MODES = ("roundtrip", "throughput", "collect", "concurrent")


def ms_since(start):
    return (time.perf_counter() - start) * 1000.0


async def concurrent(sandbox_id, count, rounds):
    sbx = await AsyncSandbox.connect(sandbox_id, timeout=3600)
    await sbx.commands.run("true")

    async def one(i):
        result = await sbx.commands.run(f"echo {i}")
        if result.stdout != f"{i}\n":
            raise RuntimeError(f"command {i} printed {result.stdout!r}")

    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(count)))
        samples.append(ms_since(start))
    return samples


def main(argv):
    if len(argv) < 3 or argv[0] not in MODES:
        print(f"usage: commands.py {'|'.join(MODES)} <sandboxId> <n> [m]", file=sys.stderr)
        return 2
    mode, sandbox_id, first = argv[0], argv[1], int(argv[2])
    second = int(argv[3]) if len(argv) > 3 else 0
    if mode == "concurrent":
        print(json.dumps({"samples_ms": asyncio.run(concurrent(sandbox_id, first, second))}))
        return 0
    # The timeout is explicit: without one this SDK sends an empty connect
    # body, which e2b-local refuses (it requires `timeout`).
    sbx = Sandbox.connect(sandbox_id, timeout=3600)
    if mode == "roundtrip":
        sbx.commands.run("true")
        samples = []
        for _ in range(first):
            start = time.perf_counter()
            sbx.commands.run("true")
            samples.append(ms_since(start))
        print(json.dumps({"samples_ms": samples}))
    elif mode == "throughput":
        samples = []
        for _ in range(second):
            seen = [0]

            def count(data):
                seen[0] += len(data)

            start = time.perf_counter()
            sbx.commands.run(f"head -c {first} /dev/zero", on_stdout=count, timeout=0)
            samples.append(ms_since(start))
            if seen[0] != first:
                raise RuntimeError(f"received {seen[0]} bytes, expected {first}")
        print(json.dumps({"samples_ms": samples, "bytes": first}))
    else:
        # The SDK keeps the whole output in the result; that is what is measured.
        try:
            result = sbx.commands.run(f"head -c {first} /dev/zero", timeout=0)
            print(json.dumps({"bytes": len(result.stdout)}))
        except Exception as err:  # the figure is the RSS, whatever the outcome
            print(json.dumps({"bytes": 0, "error": str(err)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
