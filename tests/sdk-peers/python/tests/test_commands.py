import http.client
import os
import threading
import urllib.parse

import pytest
from e2b import CommandExitException

from conftest import eventually


def test_output_and_exit_codes(sbx):
    ok = sbx.commands.run("echo out; echo err >&2")
    assert (ok.exit_code, ok.stdout, ok.stderr) == (0, "out\n", "err\n")
    with pytest.raises(CommandExitException) as failed:
        sbx.commands.run("echo partial; exit 3")
    assert failed.value.exit_code == 3
    assert failed.value.stdout == "partial\n"


def test_env_cwd_user(make_sandbox):
    sbx = make_sandbox(envs={"GLOBAL_VAR": "g"})
    out = sbx.commands.run('echo "$E2B_SANDBOX $GLOBAL_VAR $LOCAL_VAR"', envs={"LOCAL_VAR": "l"})
    assert out.stdout == "true g l\n"
    assert sbx.commands.run('echo "[$LOCAL_VAR]"').stdout == "[]\n"
    assert sbx.commands.run("pwd").stdout == "/home/user\n"
    assert sbx.commands.run("pwd", cwd="/tmp").stdout == "/tmp\n"
    assert sbx.commands.run("whoami").stdout == "user\n"
    assert sbx.commands.run("whoami", user="root").stdout == "root\n"
    assert sbx.commands.run("sudo -n whoami").stdout == "root\n"
    assert sbx.commands.run("python3 -c 'import os; print(os.getuid())'").stdout == "1000\n"


def test_background_list_connect_kill(sbx):
    handle = sbx.commands.run(
        "for i in $(seq 1 600); do echo tick $i; sleep 0.1; done", background=True, timeout=0
    )
    assert handle.pid > 1
    assert any(p.pid == handle.pid for p in sbx.commands.list())
    seen = []
    ended = []
    connected = sbx.commands.connect(handle.pid, timeout=0)

    def follow():
        try:
            connected.wait(on_stdout=seen.append)
        except CommandExitException as err:
            ended.append(err)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    eventually(lambda: "tick" in "".join(seen), what="output through connect")
    assert sbx.commands.kill(handle.pid) is True
    reader.join(timeout=10)
    assert not reader.is_alive()
    assert [err.exit_code for err in ended] == [-1], "a SIGKILLed command ends with exit code -1"
    assert sbx.commands.kill(handle.pid) is False
    gone = sbx.commands.run(f"kill -0 {handle.pid} 2>/dev/null && echo alive || echo gone")
    assert gone.stdout == "gone\n"


def test_stdin_send_and_close(sbx):
    handle = sbx.commands.run("cat", background=True, stdin=True, timeout=30)
    sbx.commands.send_stdin(handle.pid, "hello ")
    handle.send_stdin("stdin\n")
    handle.close_stdin()
    assert handle.wait().stdout == "hello stdin\n"


def test_large_output(sbx):
    result = sbx.commands.run("head -c 3000000 /dev/zero | tr '\\0' a; echo")
    assert len(result.stdout) == 3_000_001
    assert result.stdout.strip("a") == "\n"


def test_python_is_offered_as_python_and_python3(sbx):
    """As in E2B's base template, whose users (and the SDKs' own tests) run `python`."""
    for name in ("python", "python3"):
        ran = sbx.commands.run(f"{name} -c 'import sys; print(sys.version_info[0])'")
        assert ran.stdout == "3\n", name


def test_ps_shows_only_the_sandbox(sbx):
    count = int(sbx.commands.run("ps -e -o pid= | wc -l").stdout.strip())
    assert count < 15, count


def test_a_web_server_in_the_sandbox_is_fetched_through_get_host(sbx):
    sbx.files.write("/home/user/site/index.html", "<h1>served in the sandbox</h1>\n")
    sbx.commands.run(
        "cd /home/user/site && python3 -m http.server 8765 --bind 127.0.0.1", background=True
    )
    # get_host names the port the way E2B's proxy routes it; the front is E2B_SANDBOX_URL here.
    host = sbx.get_host(8765)
    assert host.split(".")[0] == f"8765-{sbx.sandbox_id}"
    front = urllib.parse.urlsplit(os.environ["E2B_SANDBOX_URL"])

    def get(host_header):
        connection = http.client.HTTPConnection(front.hostname, front.port, timeout=10)
        try:
            connection.request("GET", "/index.html", headers={"Host": host_header})
            response = connection.getresponse()
            return response.status, response.read().decode()
        finally:
            connection.close()

    page = eventually(lambda: (lambda r: r if r[0] == 200 else None)(get(host)), what="the server")
    assert page[1] == "<h1>served in the sandbox</h1>\n"
    status, body = get(sbx.get_host(8766))
    assert status == 502 and "port is not open" in body
