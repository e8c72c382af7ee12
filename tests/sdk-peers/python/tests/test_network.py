"""Sandbox networking through the official Python SDK: a listener on the host is what a sandbox
reaches through its gateway — or not, as `allow_internet_access`, `network` and
`update_network` say; requests through the front to a sandbox's port carry the Host
`mask_request_host` names, and need the traffic access token when `allow_public_traffic` is
off."""

import http.client
import http.server
import os
import threading
import time
import urllib.parse

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


def host_echo(sbx, port):
    """Starts, in `sbx`, a server on `port` answering each GET with its Host header line as it
    was received (the name's case too)."""
    sbx.commands.run(
        f"""python3 -c 'import http.server as h
class Echo(h.BaseHTTPRequestHandler):
    def do_GET(self):
        body = "".join(k + ": " + v for k, v in self.headers.items() if k.lower() == "host").encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
h.HTTPServer(("127.0.0.1", {port}), Echo).serve_forever()'""",
        background=True,
    )


def via_front(sbx, port, headers=None):
    """GET / of `port` in `sbx` through the front (E2B_SANDBOX_URL) with `headers`, once the
    server answers (any status but 502) or 10 s passed: (status, body)."""
    front = urllib.parse.urlsplit(os.environ["E2B_SANDBOX_URL"])

    def get():
        connection = http.client.HTTPConnection(front.hostname, front.port, timeout=10)
        try:
            connection.request("GET", "/", headers={"Host": sbx.get_host(port), **(headers or {})})
            response = connection.getresponse()
            return response.status, response.read().decode()
        finally:
            connection.close()

    deadline = time.monotonic() + 10
    reply = get()
    while reply[0] == 502 and time.monotonic() < deadline:
        time.sleep(0.1)
        reply = get()
    return reply


def test_mask_request_host(make_sandbox):
    sbx = make_sandbox(network={"mask_request_host": "custom-host.example.com:${PORT}"})
    host_echo(sbx, 8767)
    assert via_front(sbx, 8767) == (200, "Host: custom-host.example.com:8767")


def test_allow_public_traffic_false_needs_the_token(make_sandbox):
    sbx = make_sandbox(network={"allow_public_traffic": False})
    assert sbx.traffic_access_token, "a token comes with the sandbox"
    host_echo(sbx, 8768)
    token = {"e2b-traffic-access-token": sbx.traffic_access_token}
    assert via_front(sbx, 8768, token) == (200, f"Host: {sbx.get_host(8768)}")
    assert via_front(sbx, 8768)[0] == 403
    assert via_front(sbx, 8768, {"e2b-traffic-access-token": "wrong"})[0] == 403
    # Public by default: no token, and none needed.
    public = make_sandbox()
    assert public.traffic_access_token is None
    host_echo(public, 8768)
    assert via_front(public, 8768)[0] == 200
