"""Benchmark driver for dsh-fs-e2b's bench (plugins/fs-e2b/benches/fs_vs_sdks.rs).

The official Python SDK (tests/sdk-peers/python, PyPI e2b 2.63.0, run with that venv's python) doing
the same file operations on the same sandbox of the same e2b-local. Connects with E2B_API_URL /
E2B_SANDBOX_URL / E2B_API_KEY and prints one JSON object of raw samples (milliseconds) on
stdout; the bench computes medians and ratios.

  python fs.py latency    <sandboxId> <small file> <iterations>  -> {stat_ms, read_small_ms, write_small_ms, edit_small_ms}

`edit_small_ms` is an agent's edit done with the SDK: read the file as text, replace one
character, write it back.
  python fs.py steps      <sandboxId> <large file>
                          warms (one read, one write), prints `ready`, then reads one step a
                          line on stdin — `read` the large file, or `write` its content to
                          <large file>.py-write — and prints the step's milliseconds on a line
                          of its own (the bench interleaves these with its other clients)
  python fs.py stream     <sandboxId> <file>                     -> {bytes, vm_hwm_kib}

`stream` reads the file as a stream and reports this process's peak RSS (VmHWM of
/proc/self/status: the kernel's high-water mark of this program's own memory).
"""

import json
import sys
import time

from e2b import Sandbox


def timed(f):
    start = time.perf_counter()
    result = f()
    return (time.perf_counter() - start) * 1000.0, result


def vm_hwm_kib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def main(argv):
    if len(argv) < 3 or argv[0] not in ("latency", "steps", "stream"):
        print("usage: fs.py latency|steps|stream <sandboxId> <path> [count]", file=sys.stderr)
        return 2
    mode, sandbox_id, path = argv[0], argv[1], argv[2]
    count = int(argv[3]) if len(argv) > 3 else 0
    # The timeout is explicit: without one this SDK sends an empty connect
    # body, which e2b-local refuses (it requires `timeout`).
    sbx = Sandbox.connect(sandbox_id, timeout=3600)

    if mode == "latency":
        size = sbx.files.get_info(path).size
        stat, read, write = [], [], []
        for _ in range(count):
            stat.append(timed(lambda: sbx.files.get_info(path))[0])
        for _ in range(count):
            ms, content = timed(lambda: sbx.files.read(path, format="bytes"))
            if len(content) != size:
                raise RuntimeError(f"read {len(content)} bytes, expected {size}")
            read.append(ms)
        target = path + ".py-write"
        for i in range(count):
            content = bytes([48 + i % 10]) * size
            write.append(timed(lambda: sbx.files.write(target, content))[0])
        edit = []
        for i in range(count):

            def edit_once():
                text = sbx.files.read(target)
                sbx.files.write(target, str(i % 10) + text[1:])

            edit.append(timed(edit_once)[0])
        sbx.files.remove(target)
        print(
            json.dumps(
                {"stat_ms": stat, "read_small_ms": read, "write_small_ms": write, "edit_small_ms": edit}
            )
        )
    elif mode == "steps":
        size = sbx.files.get_info(path).size
        target = path + ".py-write"

        def read():
            content = sbx.files.read(path, format="bytes")
            if len(content) != size:
                raise RuntimeError(f"read {len(content)} bytes, expected {size}")
            return content

        # Warm: the first read, and the first write (which creates the target: every timed
        # write replaces it, as the bench's other clients do). This SDK reads bytearray but
        # writes only bytes (and str, IO): converted once, outside the timed steps.
        content = bytes(read())
        sbx.files.write(target, content)
        print("ready", flush=True)
        for line in sys.stdin:
            step = line.strip()
            if step == "read":
                ms, _ = timed(read)
            elif step == "write":
                ms, _ = timed(lambda: sbx.files.write(target, content))
            else:
                raise RuntimeError(f"unknown step {step!r}: read or write")
            print(f"{ms:.3f}", flush=True)
        sbx.files.remove(target)
    else:
        total = 0
        for chunk in sbx.files.read(path, format="stream"):
            total += len(chunk)
        print(json.dumps({"bytes": total, "vm_hwm_kib": vm_hwm_kib()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
