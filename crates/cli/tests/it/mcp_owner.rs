//! `dsh mcp` under hostile conditions: an HTTP server is its owner's only (another local
//! account without the token is refused, loopback included), its sessions stay bounded under
//! a flood of `initialize`s, a wildcard bind serves the names clients really use, a client
//! that disconnects mid-call leaves no process, and bytes that are not a message get a
//! JSON-RPC error over both transports instead of silence.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Child;
use std::time::Duration;

use serde_json::Value;

use crate::mcp::{RawSession, TOKEN, Transport, js_session, last_json, node, peers, start_http};
use crate::shutdown::{processes_with, send};
use crate::support::{dsh, require, wait_until};

const LOCAL: [&str; 2] = ["dsh-fs-local", "dsh-subprocess-local"];

/// The unprivileged account the other local user runs as.
const NOBODY: u32 = 65534;

/// A `dsh mcp --http` of a test: killed if the test fails before it [`stop`]s it.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl Server {
    fn id(&self) -> u32 {
        self.0.id()
    }
}

/// Ends `server` with SIGTERM (its usual end) and checks it went.
fn stop(mut server: Server) {
    send(server.id(), libc::SIGTERM);
    let status = server.0.wait().expect("wait for dsh mcp");
    assert_eq!(status.code(), Some(143), "SIGTERM ends dsh mcp");
}

/// `dsh mcp --http ADDR OPTIONS…` in a scratch directory with `envs` (and no DSH_MCP_TOKEN
/// unless given there): the server, its URL, the token it generated (if it did), and the port.
fn http(
    addr: &str,
    options: &[&str],
    envs: &[(&str, &str)],
    cwd: &Path,
) -> (Server, String, Option<String>, u16) {
    let mut command = dsh();
    command
        .args(["mcp", "--http", addr])
        .args(options)
        .env_remove("DSH_MCP_TOKEN")
        .envs(envs.iter().copied())
        .current_dir(cwd);
    let (child, url, token) = start_http(command);
    let port = url
        .trim_end_matches("/mcp")
        .rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .expect("a port in the URL");
    (Server(child), url, token, port)
}

/// The JS peers' client side (the SDK's `node_modules` and `mcp/connect.mjs`) copied where
/// every account can read it: the checkout may live where only its owner can (`/root`).
fn peers_for_everyone() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let js = peers().join("js");
    std::fs::create_dir(dir.path().join("mcp")).expect("mkdir");
    std::fs::copy(
        js.join("mcp/connect.mjs"),
        dir.path().join("mcp/connect.mjs"),
    )
    .expect("copy connect.mjs");
    let status = std::process::Command::new("cp")
        .arg("-R")
        .arg(js.join("node_modules"))
        .arg(dir.path())
        .status()
        .expect("run cp");
    assert!(status.success(), "copy the SDK's node_modules");
    dir
}

/// Runs `body` with the official TypeScript SDK's client (from `js`, a copy of the JS peers)
/// connected to `url` with `token` (none when `None`) as user `uid`; its last stdout line is
/// returned parsed. `body` sees `client` once connected; a failure to connect is printed as
/// `{"refused": "CODE message"}` (the HTTP status, for the SDK's HTTP errors).
fn js_as(uid: u32, js: &Path, url: &str, token: Option<&str>, body: &str) -> Value {
    let connect = js.join("mcp/connect.mjs");
    let script = format!(
        "import {{ connect }} from {connect:?};\n\
         let client;\n\
         try {{ client = await connect(); }} catch (err) {{\n\
           console.log(JSON.stringify({{ refused: `${{err.code ?? \"\"}} ${{err.message ?? err}}` }}));\n\
           process.exit(0);\n\
         }}\n\
         {body}\nawait client.close();",
        connect = connect.display().to_string(),
    );
    let mut command = node(&script);
    command
        .current_dir(js)
        .env("DSH_MCP_URL", url)
        .env_remove("DSH_MCP_TOKEN")
        .uid(uid)
        .gid(uid);
    if let Some(token) = token {
        command.env("DSH_MCP_TOKEN", token);
    }
    last_json(command)
}

/// Another account on the machine reaches a loopback `dsh mcp --http` started by root without
/// a token (so one was generated and printed on the owner's stderr): without it, or with a
/// wrong one, the official SDK's client is refused (401) and nothing runs; only the printed
/// token gets in.
#[test]
fn another_local_user_without_the_token_is_refused_on_loopback() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, url, token, _) = http("127.0.0.1:0", &[], &[], dir.path());
    let token = token.expect("dsh mcp prints the token it generated on stderr");
    let js = peers_for_everyone();
    assert_eq!(token.len(), 64, "{token}");
    let witness = dir.path().join("ran");
    let attempt = format!(
        r#"const r = await client.callTool({{ name: "run", arguments: {{ command: "touch {witness}; id -u" }} }});
console.log(JSON.stringify({{ output: r.structuredContent.output.trim() }}));"#,
        witness = witness.display()
    );
    for presented in [None, Some("guessed-token"), Some(&token[..63])] {
        let result = js_as(NOBODY, js.path(), &url, presented, &attempt);
        let refused = result["refused"].as_str().unwrap_or_default();
        assert!(
            refused.contains("401") && refused.contains("bearer token is required"),
            "token {presented:?}: {result}"
        );
        assert!(!witness.exists(), "token {presented:?}: the command ran");
    }
    // The token, whoever presents it, is the key: commands run as the server's owner.
    let result = js_as(NOBODY, js.path(), &url, Some(&token), &attempt);
    assert_eq!(result["output"], "0", "{result}");
    assert!(witness.exists());
    stop(server);
}

/// `Authorization` and `Host` headers and a body for [`post`].
struct Post<'a> {
    host: &'a str,
    token: &'a str,
    session: Option<&'a str>,
    body: &'a [u8],
}

/// One HTTP/1.1 POST to `/mcp` at `addr` on a connection of its own: the status, the
/// headers (lowercase names) and the body as sent (an SSE stream unparsed).
fn post(addr: SocketAddr, request: &Post<'_>) -> (u16, Vec<(String, String)>, String) {
    let mut stream = TcpStream::connect(addr).expect("connect to dsh mcp");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let session = request
        .session
        .map(|id| format!("Mcp-Session-Id: {id}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n{session}\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        request.host,
        request.token,
        request.body.len()
    );
    stream.write_all(head.as_bytes()).expect("send the head");
    stream.write_all(request.body).expect("send the body");
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .expect("read the response");
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole response");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}"#;

/// Field `field` (`VmRSS`, `VmHWM`, …) of process `pid`'s status, in KiB.
fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// `count` bare `initialize` POSTs (a session each, never used again) from 4 threads.
fn initialize_flood(addr: SocketAddr, host: &str, count: usize) {
    std::thread::scope(|scope| {
        for share in 0..4 {
            scope.spawn(move || {
                for _ in (share..count).step_by(4) {
                    let (status, _, body) = post(
                        addr,
                        &Post {
                            host,
                            token: TOKEN,
                            session: None,
                            body: INITIALIZE.as_bytes(),
                        },
                    );
                    assert_eq!(status, 200, "initialize: {body}");
                }
            });
        }
    });
}

/// 10,000 bare `initialize` POSTs (each a session its client forgets) leave the server's
/// memory where it was after the first 100: idle sessions are evicted past the limit, the
/// oldest first, while the newest still serves.
#[test]
fn ten_thousand_forgotten_sessions_leave_memory_bounded() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _, _, port) = http("127.0.0.1:0", &["--token", TOKEN], &[], dir.path());
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let host = format!("127.0.0.1:{port}");
    let (status, headers, _) = post(
        addr,
        &Post {
            host: &host,
            token: TOKEN,
            session: None,
            body: INITIALIZE.as_bytes(),
        },
    );
    assert_eq!(status, 200);
    let first = headers
        .iter()
        .find(|(name, _)| name == "mcp-session-id")
        .map(|(_, id)| id.clone())
        .expect("a session id");
    initialize_flood(addr, &host, 99);
    let after_100 = memory_kib(server.id(), "VmRSS");
    initialize_flood(addr, &host, 9_900);
    let after_10_000 = memory_kib(server.id(), "VmRSS");
    eprintln!(
        "dsh mcp RSS: {after_100} KiB after 100 initializes, {after_10_000} KiB after 10,000"
    );
    assert!(
        after_10_000 * 5 <= after_100 * 6,
        "RSS grew from {after_100} KiB to {after_10_000} KiB"
    );
    let ping = br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let (status, _, _) = post(
        addr,
        &Post {
            host: &host,
            token: TOKEN,
            session: Some(&first),
            body: ping,
        },
    );
    assert_eq!(status, 404, "the oldest idle session was evicted");
    stop(server);
}

/// This machine's own address: the source address of its route to the outside world (a
/// connected UDP socket sends nothing). Not just any local address: the host ends of
/// e2b-local's sandbox links are local addresses too, and come and go with the sandboxes other
/// tests run at the same time.
fn machine_address() -> IpAddr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").expect("bind a UDP socket");
    // TEST-NET-1 (RFC 5737): routed like any outside address, never reached.
    socket
        .connect("192.0.2.1:9")
        .expect("this machine has a route to the outside (a default route)");
    let address = socket.local_addr().expect("the socket's address").ip();
    assert!(
        !address.is_loopback(),
        "the outside route leaves by loopback"
    );
    address
}

/// Bound to `0.0.0.0` with a token, `dsh mcp` serves the official SDK's client at
/// `127.0.0.1:P` and at the machine's own address, and a request naming the machine by its
/// hostname; without the token every one of them is refused.
#[test]
fn a_wildcard_bind_with_a_token_serves_loopback_and_the_machines_address() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _, _, port) = http("0.0.0.0:0", &["--token", TOKEN], &[], dir.path());
    let address = machine_address();
    let body = r#"const r = await client.callTool({ name: "run", arguments: { argv: ["echo", "served"] } });
console.log(JSON.stringify({ output: r.structuredContent.output.trim() }));"#;
    for host in ["127.0.0.1".to_owned(), address.to_string()] {
        let url = format!("http://{host}:{port}/mcp");
        let result = js_session(
            &Transport::Http {
                url: &url,
                token: TOKEN,
            },
            &[],
            body,
        );
        assert_eq!(result["output"], "served", "{url}: {result}");
        let refused = js_as(0, &peers().join("js"), &url, None, body);
        assert!(
            refused["refused"]
                .as_str()
                .unwrap_or_default()
                .contains("401"),
            "{url} without the token: {refused}"
        );
    }
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let named = format!("{}:{port}", hostname.trim());
    let (status, _, answer) = post(
        SocketAddr::new(address, port),
        &Post {
            host: &named,
            token: TOKEN,
            session: None,
            body: INITIALIZE.as_bytes(),
        },
    );
    assert_eq!(status, 200, "Host: {named}: {answer}");
    assert!(answer.contains("\"serverInfo\""), "{answer}");
    stop(server);
}

/// A body that is not JSON is answered 400 with a JSON-RPC parse error, JSON that is no
/// message 400 with an invalid request naming its id — also in a session, where only rmcp
/// decodes the body and its refusal is turned into the JSON-RPC error; the server serves on.
#[test]
fn an_http_body_that_is_not_a_message_is_answered_400_with_the_json_rpc_error() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _, _, port) = http("127.0.0.1:0", &["--token", TOKEN], &[], dir.path());
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let host = format!("127.0.0.1:{port}");
    let send = |body: &[u8]| {
        post(
            addr,
            &Post {
                host: &host,
                token: TOKEN,
                session: None,
                body,
            },
        )
    };
    let (status, headers, body) = send(b"{this is not json");
    assert_eq!(status, 400, "{body}");
    assert!(
        headers
            .iter()
            .any(|(name, value)| name == "content-type" && value == "application/json"),
        "{headers:?}"
    );
    let error: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert_eq!(error["id"], Value::Null, "{error}");
    let (status, _, body) =
        send(br#"{"jsonrpc":"2.0","id":"q1","method":"initialize","params":"no"}"#);
    assert_eq!(status, 400, "{body}");
    let error: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert_eq!(error["id"], "q1", "{error}");
    let (status, headers, body) = send(INITIALIZE.as_bytes());
    assert_eq!(status, 200, "{body}");
    let session = headers
        .iter()
        .find(|(name, _)| name == "mcp-session-id")
        .map(|(_, value)| value.clone())
        .expect("a session id");
    let in_session = |body: &[u8]| {
        post(
            addr,
            &Post {
                host: &host,
                token: TOKEN,
                session: Some(&session),
                body,
            },
        )
    };
    let (status, _, body) = in_session(b"{this is not json");
    assert_eq!(status, 400, "in a session: {body}");
    let error: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(error["error"]["code"], -32700, "{error}");
    let (status, _, body) =
        in_session(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"no"}"#);
    assert_eq!(status, 400, "in a session: {body}");
    let error: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert_eq!(error["id"], 7, "{error}");
    stop(server);
}

/// A client killed while its `run` waits on `--http`: the server sees the response stream
/// dropped and cancels the call as a stdio close would — the command's process group ends
/// long before its 120 s timeout — and serves the next client.
#[test]
fn a_client_that_disconnects_from_http_mid_call_leaves_no_process() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, url, _, _) = http("127.0.0.1:0", &["--token", TOKEN], &[], dir.path());
    let marker = format!("mcp-http-disconnect-{}", std::process::id());
    let connect = peers().join("js/mcp/connect.mjs");
    let script = format!(
        "import {{ connect }} from {connect:?};\n\
         const client = await connect();\n\
         await client.callTool({{ name: 'run', arguments: {{ command: 'sleep 300; : {marker}' }} }});",
        connect = connect.display().to_string(),
    );
    let mut node = node(&script)
        .env("DSH_MCP_URL", &url)
        .env("DSH_MCP_TOKEN", TOKEN)
        .spawn()
        .expect("run node");
    let client = node.id();
    let server_pid = server.id();
    let started = || {
        processes_with(&marker)
            .iter()
            .any(|pid| *pid != client && *pid != server_pid)
    };
    assert!(
        wait_until(Duration::from_secs(30), started),
        "the command did not start"
    );
    node.kill().expect("kill the client");
    node.wait().expect("reap the client");
    assert!(
        wait_until(Duration::from_secs(20), || processes_with(&marker)
            .is_empty()),
        "the call's command outlived its HTTP client: {:?}",
        processes_with(&marker)
    );
    let result = js_session(
        &Transport::Http {
            url: &url,
            token: TOKEN,
        },
        &[],
        r#"const r = await client.callTool({ name: "run", arguments: { argv: ["echo", "still serving"] } });
console.log(JSON.stringify({ output: r.structuredContent.output.trim() }));"#,
    );
    assert_eq!(result["output"], "still serving", "{result}");
    stop(server);
}

/// Over stdio, a line that is not JSON is answered with a parse error (-32700, id null), one
/// of more than 16 MiB with an error to its id, discarded as it streams (the server's peak
/// memory grows by less than the line), and the session goes on.
#[test]
fn stdio_answers_a_line_that_is_not_json_and_an_oversized_one_and_serves_on() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut session = RawSession::start(dir.path(), &[]);
    session.send_line(b"this is not JSON {");
    let parse = session.next_message();
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    assert_eq!(parse["id"], Value::Null, "{parse}");

    let peak_before = memory_kib(session.pid(), "VmHWM");
    // The TypeScript SDK writes a request's id after its params: 40 MiB of content first, so a
    // server that held the whole line would grow by more than the bound below.
    let mut huge = br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file","arguments":{"path":"huge.txt","content":""#.to_vec();
    huge.resize(huge.len() + 40 * 1024 * 1024, b'x');
    huge.extend_from_slice(br#""}},"id":77}"#);
    session.send_line(&huge);
    let refused = session.next_message();
    assert_eq!(refused["id"], 77, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("16 MiB"),
        "{refused}"
    );
    // At most the 16 MiB a message may take was ever held, never the whole line.
    let grown = memory_kib(session.pid(), "VmHWM").saturating_sub(peak_before);
    assert!(
        grown < 20 * 1024,
        "the peak RSS grew by {grown} KiB reading the line"
    );
    assert!(!dir.path().join("huge.txt").exists());

    let ran = session.call("run", serde_json::json!({"argv": ["echo", "serving on"]}));
    assert_eq!(ran["output"], "serving on\n", "{ran}");
    session.end();
}

/// The token can come from a file (its first line), kept out of `ps`, or from DSH_MCP_TOKEN,
/// which yields to the file; a file that holds no usable token stops `dsh mcp` at once with a
/// configuration error naming the file and the problem.
#[test]
fn the_token_comes_from_a_file_or_the_environment_and_an_unusable_one_is_refused() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("token");
    std::fs::write(&file, "from-a-file-0123\n").expect("write the token");
    let path = file.display().to_string();
    let environment = [("DSH_MCP_TOKEN", "from-the-environment")];
    let servers = [
        (&["--token-file", path.as_str()][..], "from-a-file-0123"),
        (&[][..], "from-the-environment"),
    ];
    for (options, expected) in servers {
        let (server, _, generated, port) = http("127.0.0.1:0", options, &environment, dir.path());
        assert_eq!(generated, None, "{options:?}: a token given is not printed");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let host = format!("127.0.0.1:{port}");
        for token in ["from-a-file-0123", "from-the-environment", TOKEN] {
            let (status, _, body) = post(
                addr,
                &Post {
                    host: &host,
                    token,
                    session: None,
                    body: INITIALIZE.as_bytes(),
                },
            );
            let accepted = if token == expected { 200 } else { 401 };
            assert_eq!(status, accepted, "{options:?}, {token}: {body}");
        }
        stop(server);
    }

    for (content, problem) in [("\n", "empty"), ("two words\n", "without spaces")] {
        std::fs::write(&file, content).expect("write the token");
        let output = dsh()
            .args(["mcp", "--http", "127.0.0.1:0", "--token-file", &path])
            .env_remove("DSH_MCP_TOKEN")
            .current_dir(dir.path())
            .output()
            .expect("run dsh mcp");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{content:?}: {stderr}");
        assert!(
            stderr.contains(problem) && stderr.contains(&path),
            "{content:?}: {stderr}"
        );
    }
    let output = dsh()
        .args(["mcp", "--http", "127.0.0.1:0", "--token-file"])
        .arg(dir.path().join("missing"))
        .env_remove("DSH_MCP_TOKEN")
        .output()
        .expect("run dsh mcp");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--token-file") && stderr.contains("missing"),
        "{stderr}"
    );
}
