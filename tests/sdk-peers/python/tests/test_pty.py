import threading

from e2b import PtySize

from conftest import eventually


def test_pty_input_resize_kill(sbx):
    terminal = sbx.pty.create(PtySize(rows=24, cols=80), timeout=60)
    output = bytearray()
    reader = threading.Thread(target=lambda: _drain(terminal, output), daemon=True)
    reader.start()
    sbx.pty.send_stdin(terminal.pid, b'echo "cols=$(tput cols)"\n')
    eventually(lambda: b"cols=80" in output, what="tput cols = 80")
    sbx.pty.resize(terminal.pid, PtySize(rows=40, cols=123))
    sbx.pty.send_stdin(terminal.pid, b'echo "cols=$(tput cols)"\n')
    eventually(lambda: b"cols=123" in output, what="tput cols = 123 after resize")
    assert sbx.pty.kill(terminal.pid) is True
    reader.join(timeout=10)
    assert not reader.is_alive()
    assert all(p.pid != terminal.pid for p in sbx.commands.list())


def test_pty_exit_code(sbx):
    terminal = sbx.pty.create(PtySize(rows=24, cols=80), timeout=60)
    sbx.pty.send_stdin(terminal.pid, b"exit\n")
    assert terminal.wait(on_pty=lambda _: None).exit_code == 0


def _drain(handle, sink):
    try:
        handle.wait(on_pty=sink.extend)
    except Exception:  # noqa: BLE001 - a killed pty ends with an error; the test checks output
        pass
