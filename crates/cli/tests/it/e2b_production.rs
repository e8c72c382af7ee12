//! The production path, offline: `config/e2b.yaml` unchanged against e2b-local in domain mode —
//! HTTPS on port 443 for `*.e2b.localhost` (names glibc's myhostname module resolves to
//! loopback; scripts/setup.sh configures it), only `E2B_DOMAIN` and the key as E2B's cloud is
//! addressed (the API at `api.<domain>`), no `E2B_SANDBOX_URL`, the server's CA trusted through `SSL_CERT_FILE` as
//! the SDKs trust it — through `dsh exec`, `dsh fs` and one `dsh mcp` round trip; and the same
//! manifest naming the CA itself (`caFile`) instead.
//!
//! Needs root (e2b-local, port 443), and port 443 free.

use std::io::{BufRead, BufReader, Write};
use std::net::ToSocketAddrs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use e2b_local::harness::{LocalServer, ServerOptions};
use serde_json::{Value, json};

use crate::support::{config_dir, dsh as dsh_command, require};

const DOMAIN: &str = "e2b.localhost";

/// `dsh --config MANIFEST` with the server's domain-mode environment and no other `E2B_*` or
/// certificate setting of this process.
fn dsh(server: &LocalServer, manifest: &Path) -> Command {
    let mut command = dsh_command();
    for (name, _) in std::env::vars() {
        if name.starts_with("E2B_") || name.starts_with("SSL_CERT_") {
            command.env_remove(name);
        }
    }
    command
        .env("E2B_DOMAIN", DOMAIN)
        .env("E2B_API_KEY", server.api_key())
        .env("SSL_CERT_FILE", server.state_dir().join("tls/ca.pem"))
        .arg("--config")
        .arg(manifest);
    command
}

/// `dsh --config config/e2b.yaml ARGS…`, which must succeed; its stdout.
fn run(server: &LocalServer, args: &[&str]) -> String {
    let output = dsh(server, &config_dir().join("e2b.yaml"))
        .args(args)
        .output()
        .expect("run dsh");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "dsh {args:?}: {stderr}");
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

#[test]
fn the_cloud_manifest_runs_unchanged_against_a_domain_mode_server() {
    require(&["dsh-e2b-owner", "dsh-fs-e2b", "dsh-subprocess-e2b"]);
    let probe = format!("49983-resolves.{DOMAIN}:443");
    assert!(
        probe
            .to_socket_addrs()
            .is_ok_and(|mut addrs| addrs.any(|a| a.ip().is_loopback())),
        "{probe} does not resolve to loopback: add glibc's myhostname module to the hosts line \
         of /etc/nsswitch.conf (scripts/setup.sh does)"
    );
    let server = LocalServer::start_with(
        &ServerOptions::new()
            .envd_port(443)
            .args(["--tls", "--domain", DOMAIN]),
    );

    // Each run is a sandbox of its own (`onDispose: kill`).
    run(&server, &["exec", "--", "true"]);
    assert_eq!(
        run(&server, &["exec", "--", "sh", "-c", "echo over TLS"]),
        "over TLS\n"
    );
    let written = run(
        &server,
        &["fs", "write", "/home/user/workspace/note.txt", "over TLS\n"],
    );
    assert!(!written.trim().is_empty(), "write prints the version");
    let hostname = run(&server, &["fs", "cat", "/etc/hostname"]);
    assert!(!hostname.trim().is_empty(), "the sandbox's /etc/hostname");

    // The CA named by the manifest (`caFile`) instead of SSL_CERT_FILE.
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("e2b-ca.yaml");
    let shipped = std::fs::read_to_string(config_dir().join("e2b.yaml")).unwrap();
    let ca = server.state_dir().join("tls/ca.pem");
    std::fs::write(
        &manifest,
        shipped.replace(
            "      template: base\n",
            &format!("      template: base\n      caFile: {}\n", ca.display()),
        ),
    )
    .unwrap();
    let output = dsh(&server, &manifest)
        .env_remove("SSL_CERT_FILE")
        .args(["exec", "--", "echo", "named CA"])
        .output()
        .expect("run dsh");
    assert!(
        output.status.success(),
        "caFile: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.stdout, b"named CA\n");

    // MCP over stdio, in one sandbox: a file written, then read back by a command.
    let mut mcp = dsh(&server, &config_dir().join("e2b.yaml"))
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start dsh mcp");
    let mut stdin = mcp.stdin.take().expect("stdin");
    let (lines_tx, lines) = std::sync::mpsc::channel();
    let stdout = BufReader::new(mcp.stdout.take().expect("stdout"));
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    // Sends `message`; a request's result is returned (a notification's is null). Dropping it
    // closes dsh mcp's stdin, which ends it.
    let mut answer = move |message: Value| -> Value {
        writeln!(stdin, "{message}").expect("write to dsh mcp");
        if message.get("id").is_none() {
            return Value::Null;
        }
        loop {
            let line = lines
                .recv_timeout(Duration::from_secs(60))
                .expect("dsh mcp answers");
            let reply: Value = serde_json::from_str(&line).expect("a JSON-RPC message");
            if reply["id"] == message["id"] {
                assert!(reply.get("error").is_none(), "{message}: {reply}");
                return reply["result"].clone();
            }
        }
    };
    answer(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05",
            "capabilities": {},
            "clientInfo": {"name": "dsh-it-production", "version": "1"},
        }}),
    );
    answer(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let written = answer(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "write_file",
            "arguments": {"path": "/home/user/workspace/note.txt", "content": "over TLS\n"},
        }}),
    );
    assert_ne!(written["isError"], Value::Bool(true), "{written}");
    let result = answer(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "run",
            "arguments": {"command": "cat /home/user/workspace/note.txt"},
        }}),
    );
    assert_ne!(result["isError"], Value::Bool(true), "{result}");
    let output = result["structuredContent"]["output"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(output, "over TLS\n", "{result}");
    drop(answer);
    let status = mcp.wait().expect("wait for dsh mcp");
    assert!(status.success(), "dsh mcp: {status}");
}
