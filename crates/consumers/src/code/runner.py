# The dsh code runner for Python (docs/design.md §11, the code runtime): started by the host through the
# `subprocess` seam as `python3 runner.py`, it runs the host's programs in one interpreter whose
# globals persist from run to run.
#
# Channel: the host's frames arrive on the process's stdin and the runner's frames leave on its
# stdout, one frame a line: base64 of a UTF-8 JSON object. Before any program runs, both are
# moved to descriptors 198 (in) and 199 (out), closed on exec, and descriptors 0, 1 and 2 are
# replaced by /dev/null and two pipes this runner reads: whatever the program and its children
# write to stdout or stderr reaches the host as "out" frames, never as a frame of its own.
import ast
import asyncio
import base64
import inspect
import itertools
import json
import keyword
import linecache
import os
import queue
import select
import signal
import sys
import threading
import time
import traceback
import types

CHANNEL_IN, CHANNEL_OUT = 198, 199
os.dup2(0, CHANNEL_IN, inheritable=False)
os.dup2(1, CHANNEL_OUT, inheritable=False)
_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)
os.close(_null)
_readers = {}
for _fd, _name in ((1, "stdout"), (2, "stderr")):
    _read, _write = os.pipe()
    os.dup2(_write, _fd)
    os.close(_write)
    os.set_blocking(_read, False)
    _readers[_read] = _name
sys.stdin = open(os.devnull)
sys.stdout.reconfigure(line_buffering=True)
sys.stderr.reconfigure(line_buffering=True)
# Like `python3 -c`: the program imports from the working directory, not from the runner's.
sys.path[0] = ""

# Ownership beyond the process group: every process a program starts inherits this runner's
# mark in its environment, also once it has left the group and session (setsid) and lost its
# parent. When the runner ends — the host closes the channel or terminates the group (SIGTERM) —
# it first kills every marked process and every descendant of its own.
_MARK = "DSH_CODE_RUNNER"
os.environ[_MARK] = os.urandom(16).hex()
_marked = f"{_MARK}={os.environ[_MARK]}".encode() + b"\0"


def _live_processes():
    """{pid: parent pid} of every process but this one that can still run (not a zombie)."""
    me = os.getpid()
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in (b"Z", b"X"):
            found[int(name)] = int(fields[1])
    return found


def _is_marked(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return _marked in f.read()
    except OSError:
        return False


def _sweep():
    """SIGKILLs the marked processes and the descendants of this runner and of them, pass after
    pass until a pass finds none (a process forking meanwhile is found by the next)."""
    for _ in range(100):
        live = _live_processes()
        children = {}
        for pid, parent in live.items():
            children.setdefault(parent, []).append(pid)
        doomed = {pid for pid in live if _is_marked(pid)}
        stack = [os.getpid(), *doomed]
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in doomed:
                    doomed.add(child)
                    stack.append(child)
        if not doomed:
            return
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.001)


def _end(*_):
    _sweep()
    os._exit(0)


signal.signal(signal.SIGTERM, _end)

_send_lock = threading.Lock()


def _send_line(line):
    with _send_lock:
        view = memoryview(line)
        while view:
            view = view[os.write(CHANNEL_OUT, view):]


def _send(message):
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    _send_line(base64.b64encode(text.encode("utf-8")) + b"\n")


# Output: the pump thread forwards what arrives; at the end of a run the runner drains what is
# left under the same lock, so every byte written before the run ended precedes its "done".
_pump_lock = threading.Lock()


def _drain(fd):
    while True:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        if not data:
            return
        _send({"t": "out", "s": _readers[fd], "b": base64.b64encode(data).decode("ascii")})


def _pump():
    while True:
        ready, _, _ = select.select(list(_readers), [], [])
        with _pump_lock:
            for fd in ready:
                _drain(fd)


def _flush_output():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    with _pump_lock:
        for fd in _readers:
            _drain(fd)


# Binding calls: each a "call" frame answered by a "reply" frame with the same id, from any
# thread (sync functions) or event loop (the `dsh.aio` coroutines), concurrently.
#
# The channel is read by one thread at a time, the leader, under `_channel`: a thread waiting for
# its reply leads itself, so a call made in sequence wakes one thread per reply instead of a
# reader thread and then the caller (each wake-up is a scheduling delay on a busy machine). The
# reader thread leads only between runs (for the next "run") and while coroutine calls wait, since
# nothing else would read for them.
_calls = {}
_call_ids = itertools.count(1)
_channel = threading.Condition()
_leading = False
_in_run = False
_async_waiting = 0
_pending = bytearray()


def _read_frames():
    """Reads one chunk as the leader (without holding `_channel`) and returns its whole frames."""
    chunk = os.read(CHANNEL_IN, 1 << 20)
    if not chunk:
        # The host closed the channel: nothing more will be asked of this runner.
        _end()
    _pending.extend(chunk)
    frames = []
    while True:
        end = _pending.find(b"\n")
        if end < 0:
            return frames
        frames.append(json.loads(base64.b64decode(bytes(_pending[:end]), validate=True)))
        del _pending[: end + 1]


def _lead_once():
    """With `_channel` held and no leader: reads one chunk as the leader and dispatches it."""
    global _leading, _in_run
    _leading = True
    _channel.release()
    try:
        frames = _read_frames()
    finally:
        _channel.acquire()
        _leading = False
    for message in frames:
        if message["t"] == "run":
            _in_run = True
            _runs.put(message)
        elif message["t"] == "reply":
            settle = _calls.pop(message["id"], None)
            if settle is not None:
                settle(message)
    _channel.notify_all()


class BindingError(Exception):
    """A binding call the host refused or that failed: `kind` is the error's kind."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def _arguments(name, args, kwargs):
    if args and (len(args) > 1 or not isinstance(args[0], dict)):
        raise TypeError(f"dsh.{name} takes keyword arguments (or one dict of them)")
    merged = dict(args[0]) if args else {}
    # `from_=...` for an argument named by a Python keyword (`from`), as the stub writes it.
    merged.update(
        (key[:-1] if key.endswith("_") and keyword.iskeyword(key[:-1]) else key, value)
        for key, value in kwargs.items()
    )
    return merged


def _start_call(name, arguments, settle):
    call_id = next(_call_ids)
    with _channel:
        _calls[call_id] = settle
    _send({"t": "call", "id": call_id, "name": name, "args": arguments})


def _outcome(reply):
    error = reply.get("error")
    if error is not None:
        return BindingError(error.get("kind", "io"), error.get("message", "binding call failed"))
    return reply.get("value")


def _sync_binding(name):
    def call(*args, **kwargs):
        arguments = _arguments(name, args, kwargs)
        box = []
        _start_call(name, arguments, box.append)
        with _channel:
            while not box:
                if _leading:
                    _channel.wait()
                else:
                    _lead_once()
        outcome = _outcome(box[0])
        if isinstance(outcome, BindingError):
            raise outcome
        return outcome

    call.__name__ = name
    return call


def _async_binding(name):
    async def call(*args, **kwargs):
        global _async_waiting
        arguments = _arguments(name, args, kwargs)
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def resolve(reply):
            if future.cancelled():
                return
            outcome = _outcome(reply)
            if isinstance(outcome, BindingError):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

        def settle(reply):
            global _async_waiting
            _async_waiting -= 1
            loop.call_soon_threadsafe(resolve, reply)

        with _channel:
            _async_waiting += 1
            _channel.notify_all()
        _start_call(name, arguments, settle)
        return await future

    call.__name__ = name
    return call


dsh = types.ModuleType("dsh", "The world's tools as functions (see the generated stub).")
dsh.aio = types.ModuleType("dsh.aio", "The same functions as coroutines, for asyncio.gather.")
dsh.BindingError = BindingError
sys.modules["dsh"] = dsh
sys.modules["dsh.aio"] = dsh.aio


def _bind(names):
    for name in names:
        setattr(dsh, name, _sync_binding(name))
        setattr(dsh.aio, name, _async_binding(name))


_runs = queue.Queue()


def _read_channel():
    """The reader thread: leads when nobody else reads and someone needs the channel read."""
    with _channel:
        while True:
            if _leading or (_in_run and not _async_waiting):
                _channel.wait()
            else:
                _lead_once()


_globals = {"__name__": "__main__", "__builtins__": __builtins__, "dsh": dsh}
_files = set()
_loop = asyncio.new_event_loop()
_TOP_LEVEL_AWAIT = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


def _evaluate(code):
    value = eval(code, _globals)
    if code.co_flags & inspect.CO_COROUTINE:
        value = _loop.run_until_complete(value)
    return value


def _frames(error):
    frames = [
        {"file": frame.filename, "line": frame.lineno, "function": frame.name, "text": frame.line or ""}
        for frame in traceback.extract_tb(error.__traceback__)
        if frame.filename in _files
    ]
    if isinstance(error, SyntaxError) and error.filename in _files and error.lineno:
        text = linecache.getline(error.filename, error.lineno).rstrip("\n")
        frames.append({"file": error.filename, "line": error.lineno, "function": "<module>", "text": text.strip()})
    return frames


def _fallback(value):
    return repr(value)


def _execute(message):
    filename, source = message["filename"], message["code"]
    _files.add(filename)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    _bind(message["bindings"])
    value = None
    try:
        tree = ast.parse(source, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        _evaluate(compile(tree, filename, "exec", flags=_TOP_LEVEL_AWAIT))
        if last is not None:
            value = _evaluate(compile(last, filename, "eval", flags=_TOP_LEVEL_AWAIT))
        encoded = json.dumps(value, default=_fallback, allow_nan=False, ensure_ascii=False)
        limit = message["max_result_bytes"]
        if len(encoded.encode("utf-8")) > limit:
            raise ValueError(
                f"the program's result is {len(encoded.encode('utf-8'))} bytes of JSON, over the limit of {limit}"
            )
    except BaseException as error:  # noqa: BLE001 — the program's own failure, reported whole
        _flush_output()
        detail = "".join(traceback.format_exception_only(type(error), error)).strip()
        _send(
            {
                "t": "done",
                "ok": False,
                "error": {"type": type(error).__name__, "message": detail, "frames": _frames(error)},
            }
        )
        return
    _flush_output()
    head = '{"t":"done","ok":true,"value":'
    _send_line(base64.b64encode((head + encoded + "}").encode("utf-8")) + b"\n")


def main():
    global _in_run
    threading.Thread(target=_pump, daemon=True).start()
    threading.Thread(target=_read_channel, daemon=True).start()
    _send({"t": "ready", "version": sys.version.split()[0]})
    while True:
        _execute(_runs.get())
        with _channel:
            _in_run = False
            _channel.notify_all()


main()
