"""Benchmark driver for dsh-cli's bench (crates/cli/benches/exec_vs_sdks.rs).

The official Python SDK (tests/sdk-peers/python, PyPI e2b 2.63.0, run with that venv's python), warm in
one process, doing what one cold `dsh --config config/e2b-local.yaml exec -- true` does: create a
sandbox, run `true` in it, kill it. Connects with E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY.

  python lifecycle.py steps   reads one line per iteration on stdin; after each, prints the
                              iteration's milliseconds on a line of its own

One untimed iteration first warms the process (imports, the first connections).
"""

import sys
import time

from e2b import Sandbox


def once():
    sbx = Sandbox.create()
    result = sbx.commands.run("true")
    if result.exit_code != 0:
        raise RuntimeError(f"true exited {result.exit_code}")
    sbx.kill()


def main(argv):
    if argv != ["steps"]:
        print("usage: lifecycle.py steps", file=sys.stderr)
        return 2
    once()
    print("ready", flush=True)
    for _ in sys.stdin:
        start = time.perf_counter()
        once()
        print(f"{(time.perf_counter() - start) * 1000.0:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
