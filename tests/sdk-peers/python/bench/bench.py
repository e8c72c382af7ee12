"""Benchmark driver: the official Python SDK against the server named by E2B_API_URL /
E2B_SANDBOX_URL / E2B_API_KEY. Prints one JSON object of figures (milliseconds).

Usage: python bench/bench.py [iterations] [concurrent sandboxes] [commands each]
"""

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from e2b import Sandbox


def stats(xs):
    s = sorted(xs)
    at = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    return {"n": len(s), "p50": round(at(0.5), 2), "p95": round(at(0.95), 2), "max": round(s[-1], 2)}


def timed(f):
    start = time.perf_counter()
    f()
    return (time.perf_counter() - start) * 1000


def main():
    iterations, concurrent, commands_each = (list(map(int, sys.argv[1:])) + [10, 20, 5][len(sys.argv) - 1 :])[:3]
    create_to_first = []
    for _ in range(iterations):
        box = {}

        def create_and_run():
            box["sbx"] = Sandbox.create(timeout=60)
            box["sbx"].commands.run("true")

        create_to_first.append(timed(create_and_run))
        box["sbx"].kill()

    sbx = Sandbox.create(timeout=120)
    sbx.commands.run("true")
    round_trip = [timed(lambda: sbx.commands.run("true")) for _ in range(iterations * 5)]
    sbx.kill()

    per_command = []

    def worker(_):
        s = Sandbox.create(timeout=120)
        try:
            for _ in range(commands_each):
                per_command.append(timed(lambda: s.commands.run("echo $RANDOM > /dev/null")))
        finally:
            s.kill()

    with ThreadPoolExecutor(max_workers=concurrent) as pool:
        wall = timed(lambda: list(pool.map(worker, range(concurrent))))

    print(
        json.dumps(
            {
                "sdk": "python e2b==2.63.0",
                "create_to_first_command_ms": stats(create_to_first),
                "true_round_trip_ms": stats(round_trip),
                "concurrent": {
                    "sandboxes": concurrent,
                    "commands_each": commands_each,
                    "wall_ms": round(wall, 1),
                    "per_command_ms": stats(per_command),
                },
            }
        )
    )


if __name__ == "__main__":
    main()
