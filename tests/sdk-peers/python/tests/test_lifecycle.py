import inspect
import threading
import time
from datetime import datetime, timedelta, timezone

import httpcore
import pytest
from e2b import Sandbox, SandboxNotFoundException, SandboxQuery, SandboxState

from conftest import eventually

try:  # pyqwest-based releases (2.29.1 speaks httpx and has no such classifier)
    from e2b.envd.rpc import is_transport_failure
except ImportError:
    is_transport_failure = None


def test_a_sandbox_created_with_the_sdks_defaults_lives_5_minutes():
    # The newest SDKs send no timeout unless one is given (2.29.1 sends 300 s): the v2 create's
    # own default must then be E2B's 300 s, not v1's 15 s.
    sbx = Sandbox.create()
    try:
        info = sbx.get_info()
        lifetime = (info.end_at - info.started_at).total_seconds()
        assert 299 <= lifetime <= 302, f"end_at is {lifetime} s after start"
    finally:
        Sandbox.kill(sbx.sandbox_id)


def test_create_info_kill(make_sandbox):
    sbx = make_sandbox(metadata={"suite": "py-lifecycle"}, envs={"A": "1"})
    info = sbx.get_info()
    assert info.sandbox_id == sbx.sandbox_id
    assert info.state == SandboxState.RUNNING
    assert info.metadata == {"suite": "py-lifecycle"}
    assert info.end_at > info.started_at
    assert sbx.is_running()
    sbx.kill()
    assert not sbx.is_running()
    assert Sandbox.kill(sbx.sandbox_id) is False
    with pytest.raises(SandboxNotFoundException):
        Sandbox.get_info(sbx.sandbox_id)


def test_timeout_expiry(make_sandbox):
    sbx = make_sandbox(timeout=2)
    assert sbx.is_running()
    time.sleep(3.5)
    assert not sbx.is_running()


def test_set_timeout(sbx):
    sbx.set_timeout(2)
    time.sleep(3.5)
    assert not sbx.is_running()


def test_pause_and_connect(sbx):
    sbx.files.write("/home/user/state.txt", "kept")
    bg = sbx.commands.run("sleep 600", background=True, timeout=0)
    sbx.pause()
    assert not sbx.is_running()
    assert Sandbox.get_info(sbx.sandbox_id).state == SandboxState.PAUSED
    resumed = Sandbox.connect(sbx.sandbox_id, timeout=60)
    assert resumed.is_running()
    assert resumed.files.read("/home/user/state.txt") == "kept"
    assert resumed.commands.run(f"kill -0 {bg.pid} && echo alive").stdout == "alive\n"


def test_a_request_racing_the_timeout_pause_is_answered(make_sandbox):
    """E2B's `keep_memory=None` test: the timeout's pause (full, the default) is forced with
    `set_timeout(0)` and `is_running` polled at once. A probe that reached the sandbox just before
    it froze must still be answered (502: not running), never left waiting on the frozen world."""
    sbx = make_sandbox(timeout=60, lifecycle={"on_timeout": "pause"})
    boot = sbx.files.read("/proc/sys/kernel/random/boot_id")
    for _ in range(5):
        sbx.set_timeout(0)
        assert eventually(lambda: not sbx.is_running(request_timeout=5), what="the pause")
        resumed = Sandbox.connect(sbx.sandbox_id, timeout=60)
        assert resumed.files.read("/proc/sys/kernel/random/boot_id") == boot, "resumed, not rebooted"


def test_a_pause_ends_the_calls_in_flight(sbx):
    """A command's stream open when the sandbox is paused ends (as a transport failure) rather
    than waiting on the frozen world until its resume."""
    threading.Timer(0.5, sbx.pause).start()
    started = time.monotonic()
    with pytest.raises(Exception):
        sbx.commands.run("sleep 30", timeout=60, request_timeout=60)
    assert time.monotonic() - started < 10


def test_list_by_metadata(make_sandbox):
    tag = f"py-{time.time_ns()}"
    a = make_sandbox(metadata={"tag": tag, "name": "a b&c=d"})
    b = make_sandbox(metadata={"tag": tag, "name": "other"})
    make_sandbox(metadata={"tag": "unrelated"})
    found = Sandbox.list(query=SandboxQuery(metadata={"tag": tag})).next_items()
    assert sorted(s.sandbox_id for s in found) == sorted([a.sandbox_id, b.sandbox_id])
    named = Sandbox.list(query=SandboxQuery(metadata={"tag": tag, "name": "a b&c=d"})).next_items()
    assert [s.sandbox_id for s in named] == [a.sandbox_id]
    b.pause()
    paused = Sandbox.list(query=SandboxQuery(metadata={"tag": tag}, state=[SandboxState.PAUSED])).next_items()
    assert [s.sandbox_id for s in paused] == [b.sandbox_id]


def test_list_paginates(make_sandbox):
    tag = f"page-{time.time_ns()}"
    ids = sorted(make_sandbox(metadata={"tag": tag}).sandbox_id for _ in range(3))
    paginator = Sandbox.list(query=SandboxQuery(metadata={"tag": tag}), limit=2)
    first = paginator.next_items()
    assert len(first) == 2 and paginator.has_next
    second = paginator.next_items()
    assert len(second) == 1 and not paginator.has_next
    assert sorted(s.sandbox_id for s in first + second) == ids


def test_list_is_newest_first_unless_asked_and_filters_by_start_time(make_sandbox):
    tag = f"order-{time.time_ns()}"
    ids = [make_sandbox(metadata={"tag": tag}).sandbox_id for _ in range(3)]

    def pages(query=None, **kwargs):
        query = query or SandboxQuery()
        query.metadata = {"tag": tag}
        paginator = Sandbox.list(query=query, **kwargs)
        got = []
        while paginator.has_next:
            got.append([s.sandbox_id for s in paginator.next_items()])
        return got

    # The API's default order, which the SDKs leave to the server.
    assert pages() == [ids[::-1]]
    assert pages(limit=2) == [[ids[2], ids[1]], [ids[0]]]
    if not hasattr(SandboxQuery(), "started_after"):
        return  # 2.29.1: no order or start-time filter to send
    assert pages(limit=2, order="asc") == [[ids[0], ids[1]], [ids[2]]]
    # At or after the second one's start (sent with a local offset and microseconds).
    started = Sandbox.get_info(ids[1]).started_at
    assert pages(SandboxQuery(started_after=started.astimezone())) == [[ids[2], ids[1]]]
    later = datetime.now(timezone.utc) + timedelta(minutes=1)
    assert pages(SandboxQuery(started_after=later)) == [[]]


def test_metrics(sbx):
    metrics = sbx.get_metrics()
    assert metrics
    m = metrics[-1]
    assert m.mem_used > 0 and m.mem_total > m.mem_used
    assert m.cpu_count >= 1 and m.disk_total > 0


def test_metrics_honour_the_time_range(sbx):
    """Only points inside [start, end] (second precision, as sent); none for a range that ended
    before the sandbox existed."""
    start = datetime.now(timezone.utc)
    end = start + timedelta(minutes=1)
    inside = sbx.get_metrics(start=start, end=end)
    assert inside, "a range around now has the current point"
    for m in inside:
        assert int(start.timestamp()) <= m.timestamp.timestamp() <= end.timestamp(), m
    before = sbx.get_metrics(start=start - timedelta(hours=1), end=start - timedelta(minutes=30))
    assert before == []


@pytest.mark.parametrize("how", ["killed", "timed out"])
def test_a_sandbox_that_ends_while_a_command_runs_ends_the_call_as_its_end(make_sandbox, how):
    """The call in flight fails as a transport failure — on HTTP/1.1, as here, a connection reset
    (HTTP/2 resets the stream) — which the SDK answers by probing the sandbox's health and then
    reports as the sandbox's end; later calls fail as not found."""
    sbx = make_sandbox(timeout=2) if how == "timed out" else make_sandbox()
    if how == "killed":
        killer = threading.Timer(0.5, Sandbox.kill, args=(sbx.sandbox_id,))
        killer.start()
    with pytest.raises(Exception) as raised:
        sbx.commands.run("sleep 30")
    if is_transport_failure is None:
        # 2.29.1 (httpx) probes only after httpcore's RemoteProtocolError (a stream reset, or an
        # HTTP/1.1 body cut short); a connection reset reaches it as the read error it is.
        assert isinstance(raised.value, httpcore.ReadError), repr(raised.value)
    else:
        assert "killed or reached its end of life while the request was in flight" in str(raised.value)
        # The SDK's own test of a transport failure (pyqwest's ReadError or StreamError), which
        # is what E2B's 2.45-2.62 SDKs probe on — not a body that merely ended early.
        assert is_transport_failure(raised.value.__cause__), repr(raised.value.__cause__.__cause__)
    with pytest.raises(Exception, match="sandbox was not found"):
        sbx.files.read("/etc/hostname")


FILES_ONLY = "mode" in inspect.signature(Sandbox.pause).parameters


# A process no other test runs, found by its arguments.
SLEEPER = "sleep 613"


BOOT_ID = "/proc/sys/kernel/random/boot_id"


def _populate(sbx):
    sbx.files.write("/home/user/kept.txt", "kept\n")
    sbx.files.write("/tmp/kept.txt", "tmp\n")
    sbx.commands.run(SLEEPER, background=True)
    assert SLEEPER in sbx.commands.run("ps -eo args").stdout, "the process to lose runs"
    return sbx.files.read(BOOT_ID)


def _rebooted(again, boot_id):
    assert again.files.read(BOOT_ID) != boot_id, "each boot has its own boot id"
    assert SLEEPER not in again.commands.run("ps -eo args").stdout
    assert again.files.read("/home/user/kept.txt") == "kept\n"
    assert again.files.read("/tmp/kept.txt") == "tmp\n"
    assert again.commands.run("echo up").stdout == "up\n"


@pytest.mark.skipif(not FILES_ONLY, reason="not in this release")
@pytest.mark.parametrize("how", ["pause(mode='filesystem')", "on_timeout filesystem", "on_resume reboot"])
def test_files_only(make_sandbox, how):
    """A pause that keeps only the files: every process ends, the files stay, and connecting
    reboots the world over them."""
    if how == "on_timeout filesystem":
        sbx = make_sandbox(timeout=2, lifecycle={"on_timeout": {"action": "pause", "mode": "filesystem"}})
    else:
        sbx = make_sandbox()
    boot_id = _populate(sbx)
    if how == "pause(mode='filesystem')":
        sbx.pause(mode="filesystem")
    elif how == "on_resume reboot":
        sbx.pause()
    else:
        time.sleep(3.5)
    info = Sandbox.get_info(sbx.sandbox_id)
    assert info.state == SandboxState.PAUSED
    resume = {"on_resume": "reboot"} if how == "on_resume reboot" else {}
    _rebooted(Sandbox.connect(sbx.sandbox_id, **resume), boot_id)


def _with_files(sbx):
    sbx.files.write("/home/user/kept.txt", "kept\n")
    sbx.commands.run("echo root > /etc/added && rm /etc/hostname", user="root")
    sbx.commands.run(SLEEPER, background=True)


def _has_files(sbx):
    assert sbx.files.read("/home/user/kept.txt") == "kept\n"
    assert sbx.files.read("/etc/added") == "root\n"
    assert not sbx.files.exists("/etc/hostname"), "a deletion is kept too"
    assert SLEEPER not in sbx.commands.run("ps -eo args").stdout


def test_snapshot_makes_sandboxes_with_its_files(make_sandbox):
    """e2b-local keeps the files only: a sandbox made from a snapshot starts with the source's
    files and no process; the source runs on; deleting it twice says so the second time."""
    sbx = make_sandbox()
    _with_files(sbx)
    snapshot = sbx.create_snapshot()
    try:
        _has_files(make_sandbox(template=snapshot.snapshot_id))
        listed = Sandbox.list_snapshots(sandbox_id=sbx.sandbox_id).next_items()
        assert [s.snapshot_id for s in listed] == [snapshot.snapshot_id]
    finally:
        assert Sandbox.delete_snapshot(snapshot.snapshot_id)
    assert not Sandbox.delete_snapshot(snapshot.snapshot_id)
    assert SLEEPER in sbx.commands.run("ps -eo args").stdout, "the source runs on"


@pytest.mark.skipif(
    "mode" not in inspect.signature(Sandbox.create_snapshot).parameters,
    reason="not in this release",
)
def test_a_memory_snapshot_is_refused_and_a_filesystem_one_taken(make_sandbox):
    """e2b-local cannot checkpoint processes: asking for memory says so; files-only works."""
    sbx = make_sandbox()
    with pytest.raises(Exception, match="memory snapshots are not supported"):
        sbx.create_snapshot(mode="full")
    snapshot = sbx.create_snapshot(mode="filesystem")
    assert Sandbox.delete_snapshot(snapshot.snapshot_id)


@pytest.mark.skipif(not hasattr(Sandbox, "fork"), reason="not in this release")
def test_fork_makes_sandboxes_with_the_sources_files(make_sandbox):
    sbx = make_sandbox()
    _with_files(sbx)
    forks = sbx.fork(count=2)
    try:
        assert all(not isinstance(f, Exception) for f in forks), forks
        assert len({f.sandbox_id for f in forks} | {sbx.sandbox_id}) == 3
        for fork in forks:
            _has_files(fork)
    finally:
        for fork in forks:
            if not isinstance(fork, Exception):
                fork.kill()
    assert SLEEPER in sbx.commands.run("ps -eo args").stdout, "the source runs on"


@pytest.mark.skipif(
    "idempotency_key" not in inspect.signature(Sandbox.create).parameters,
    reason="not in this release",
)
def test_an_idempotency_key_creates_at_most_once(make_sandbox):
    key = f"create-{time.time_ns()}"
    first = make_sandbox(idempotency_key=key)
    again = Sandbox.create(timeout=120, idempotency_key=key)
    assert again.sandbox_id == first.sandbox_id
    with pytest.raises(Exception, match="different request"):
        Sandbox.create(timeout=120, idempotency_key=key, metadata={"other": "request"})
