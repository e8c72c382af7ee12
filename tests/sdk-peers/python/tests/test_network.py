"""Sandbox networking through the official Python SDK: a listener on the host is what a sandbox
reaches through its gateway — or not, as `allow_internet_access`, `network` and
`update_network` say."""

import http.server
import threading

import pytest
from e2b import Sandbox


@pytest.fixture
def host_port():
    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server API
            body = b"hello from the host"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def fetch(sbx, port):
    """GET / from the host through the sandbox's gateway: the body, or `failed: <stderr>`."""
    script = (
        "gw=$(ip -4 route show default | awk '/ via / {print $3}'); "
        f"exec 3<>/dev/tcp/$gw/{port} && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 "
        "&& sed '1,/^\\r$/d' <&3"
    )
    try:
        return sbx.commands.run(script, timeout=20).stdout
    except Exception as err:  # noqa: BLE001 - a failed connect is the expected outcome here
        return f"failed: {err}"


def test_egress_rules_at_create(make_sandbox, host_port):
    assert fetch(make_sandbox(), host_port) == "hello from the host"
    closed = make_sandbox(allow_internet_access=False)
    assert "No route to host" in fetch(closed, host_port)
    assert Sandbox.get_info(closed.sandbox_id).allow_internet_access is False
    pinhole = make_sandbox(network={"allow_out": ["10.0.0.0/8"], "deny_out": ["0.0.0.0/0"]})
    assert fetch(pinhole, host_port) == "hello from the host"
    with pytest.raises(Exception, match="egress proxy"):
        make_sandbox(network={"allow_out": ["example.com"]})


@pytest.mark.skipif(not hasattr(Sandbox, "update_network"), reason="not in this release")
def test_update_network(make_sandbox, host_port):
    sbx = make_sandbox()
    sbx.update_network({"deny_out": ["0.0.0.0/0"]})
    assert "No route to host" in fetch(sbx, host_port)
    sbx.update_network({})
    assert fetch(sbx, host_port) == "hello from the host"
