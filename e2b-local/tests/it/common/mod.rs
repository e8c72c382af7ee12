//! Test support: a minimal HTTP client for the control plane, a Connect client for envd's
//! `process.Process/Start` and one for `filesystem.Filesystem`, plus host-side process
//! accounting.

pub mod peers;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

pub use e2b_local::harness::LocalServer;

/// A response read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// HTTP/1.1 client for both of the server's ports.
#[derive(Clone)]
pub struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Default for Http {
    fn default() -> Self {
        Self {
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }
}

impl Http {
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Reply {
        let mut request = Request::builder().method(method.clone()).uri(url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(body.into())).expect("valid request");
        let response = tokio::time::timeout(Duration::from_secs(60), self.client.request(request))
            .await
            .unwrap_or_else(|_| panic!("{method} {url}: no response within 60 s"))
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: read body: {e}"))
            .to_bytes();
        Reply {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }
}

/// The control plane of one server, authenticated with its key.
pub struct Api<'a> {
    pub server: &'a LocalServer,
    pub http: Http,
}

impl<'a> Api<'a> {
    pub fn new(server: &'a LocalServer) -> Self {
        Self {
            server,
            http: Http::default(),
        }
    }

    pub async fn call(&self, method: Method, path: &str, body: &str) -> Reply {
        let url = format!("{}{path}", self.server.api_url());
        let headers = [
            ("x-api-key", self.server.api_key()),
            ("content-type", "application/json"),
        ];
        self.http
            .send(method, &url, &headers, body.to_owned())
            .await
    }

    /// Creates a sandbox from `body` and returns the create response; panics unless 201.
    pub async fn create(&self, body: Value) -> Value {
        let reply = self
            .call(Method::POST, "/sandboxes", &body.to_string())
            .await;
        assert_eq!(
            reply.status,
            StatusCode::CREATED,
            "create: {}",
            String::from_utf8_lossy(&reply.body)
        );
        reply.json()
    }

    /// A running sandbox with a 120 s timeout; returns its id.
    pub async fn sandbox(&self) -> String {
        let created = self
            .create(json!({"templateID": "base", "timeout": 120}))
            .await;
        created["sandboxID"].as_str().expect("sandboxID").to_owned()
    }

    pub async fn kill(&self, id: &str) -> StatusCode {
        self.call(Method::DELETE, &format!("/sandboxes/{id}"), "")
            .await
            .status
    }

    /// Pauses `id` keeping only its files (asserting the pause's 204), then connects, which
    /// reboots the world over them; returns the connect's status (201 once rebooted).
    pub async fn reboot(&self, id: &str) -> StatusCode {
        let paused = self
            .call(
                Method::POST,
                &format!("/sandboxes/{id}/pause"),
                r#"{"memory":false}"#,
            )
            .await;
        assert_eq!(
            paused.status,
            StatusCode::NO_CONTENT,
            "files-only pause of {id}"
        );
        self.call(Method::POST, &format!("/v2/sandboxes/{id}/connect"), "{}")
            .await
            .status
    }

    pub async fn info(&self, id: &str) -> Reply {
        self.call(Method::GET, &format!("/sandboxes/{id}"), "")
            .await
    }
}

/// Result of one command run through envd.
#[derive(Debug, Default)]
pub struct Exec {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: i32,
}

/// Runs `bash -c script` in sandbox `id` through the server's envd front as `user` (envd's
/// default user when `None`) with envd-proto's generated `ProcessClient`, speaking Connect
/// binary protobuf (the SDK suites cover JSON), and waits for the end event.
pub async fn exec(server: &LocalServer, id: &str, user: Option<&str>, script: &str) -> Exec {
    use envd_proto::process::__buffa::oneof::process_event::{Event, data_event::Output};
    let client = envd_proto::process::ProcessClient::new(
        connectrpc::client::HttpClient::plaintext(),
        envd_client_config(server, id, user),
    );
    let request = envd_proto::process::StartRequest {
        process: buffa::MessageField::some(envd_proto::process::ProcessConfig {
            cmd: "/bin/bash".to_owned(),
            args: vec!["-c".to_owned(), script.to_owned()],
            ..Default::default()
        }),
        stdin: Some(false),
        ..Default::default()
    };
    let mut stream = client
        .start(request)
        .await
        .unwrap_or_else(|e| panic!("Start in {id}: {e}"));
    let mut exec = Exec::default();
    let mut ended = false;
    while let Some(message) = stream
        .message()
        .await
        .unwrap_or_else(|e| panic!("Start stream in {id}: {e}"))
    {
        let Some(event) = message
            .to_owned_message()
            .event
            .into_option()
            .and_then(|e| e.event)
        else {
            continue;
        };
        match event {
            Event::Data(data) => match data.output {
                Some(Output::Stdout(bytes)) => {
                    exec.stdout.push_str(&String::from_utf8_lossy(&bytes))
                }
                Some(Output::Stderr(bytes)) => {
                    exec.stderr.push_str(&String::from_utf8_lossy(&bytes))
                }
                _ => {}
            },
            Event::End(end) => {
                exec.exit_code = end.exit_code;
                ended = true;
            }
            _ => {}
        }
    }
    assert!(ended, "Start in {id}: stream had no end event");
    exec
}

/// envd's `filesystem.Filesystem` in sandbox `id` through the server's envd front, as `user`
/// (Basic auth; envd's default user when `None`), speaking Connect binary protobuf.
pub fn filesystem(
    server: &LocalServer,
    id: &str,
    user: Option<&str>,
) -> envd_proto::filesystem::FilesystemClient<connectrpc::client::HttpClient> {
    envd_proto::filesystem::FilesystemClient::new(
        connectrpc::client::HttpClient::plaintext(),
        envd_client_config(server, id, user),
    )
}

/// Connect binary protobuf to sandbox `id`'s envd through the front, as `user` (Basic auth).
pub fn envd_client_config(
    server: &LocalServer,
    id: &str,
    user: Option<&str>,
) -> connectrpc::client::ClientConfig {
    let base = server.sandbox_url().parse().expect("sandbox URL");
    let mut config = connectrpc::client::ClientConfig::new(base)
        .proto()
        .with_default_header("e2b-sandbox-id", id)
        .with_default_header("e2b-sandbox-port", "49983");
    if let Some(user) = user {
        config = config.with_default_header(
            "authorization",
            format!("Basic {}", STANDARD.encode(format!("{user}:"))),
        );
    }
    config
}

/// One Connect envelope (flags 0) around `payload`.
pub fn envelope(payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(payload.len() + 5);
    frame.push(0);
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// The freezer cgroup dir of sandbox `id` on the host, if it exists.
pub fn sandbox_cgroup(id: &str) -> Option<PathBuf> {
    let roots = [
        "/sys/fs/cgroup/freezer/e2b-local",
        "/sys/fs/cgroup/e2b-local",
        "/sys/fs/cgroup/unified/e2b-local",
    ];
    roots
        .iter()
        .filter_map(|root| std::fs::read_dir(root).ok())
        .flat_map(|d| d.flatten())
        .find_map(|instance| {
            let dir = instance.path().join(id);
            dir.is_dir().then_some(dir)
        })
}

/// PID namespaces of one or more sandboxes, held open: a namespace's inode number can be reused
/// by a new namespace once the old one is freed, so holding a reference keeps the number unique
/// for as long as the test checks it.
#[derive(Debug, Default)]
pub struct Namespaces {
    names: BTreeSet<String>,
    _held: Vec<std::fs::File>,
}

impl Namespaces {
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_disjoint(&self, other: &Namespaces) -> bool {
        self.names.is_disjoint(&other.names)
    }

    pub fn extend(&mut self, other: Namespaces) {
        self.names.extend(other.names);
        self._held.extend(other._held);
    }
}

/// PID namespaces of sandbox `id`'s processes (the host's own namespace excluded).
pub fn sandbox_pid_namespaces(id: &str) -> Namespaces {
    let host = std::fs::read_link("/proc/self/ns/pid")
        .expect("own pid ns")
        .to_string_lossy()
        .into_owned();
    let cgroup = sandbox_cgroup(id).unwrap_or_else(|| panic!("no cgroup for sandbox {id}"));
    let procs = std::fs::read_to_string(cgroup.join("cgroup.procs")).expect("cgroup.procs");
    let mut namespaces = Namespaces::default();
    for pid in procs.lines() {
        let link = format!("/proc/{pid}/ns/pid");
        let (Ok(name), Ok(file)) = (std::fs::read_link(&link), std::fs::File::open(&link)) else {
            continue;
        };
        let name = name.to_string_lossy().into_owned();
        if name != host && namespaces.names.insert(name) {
            namespaces._held.push(file);
        }
    }
    namespaces
}

/// Processes living in any of `namespaces`, as `<host pid> <state> <comm>` lines.
pub fn processes_in(namespaces: &Namespaces) -> Vec<String> {
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/ns/pid"))
                .is_ok_and(|ns| namespaces.names.contains(ns.to_string_lossy().as_ref()))
        })
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let comm = stat.split(['(', ')']).nth(1).unwrap_or("?").to_owned();
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or("?")
                .to_owned();
            format!("{pid} {state} {comm}")
        })
        .collect()
}

/// Polls `check` every 50 ms for up to `timeout`.
pub async fn eventually(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A unique name for files written by one test.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        e2b_local::ids::sandbox_id()
    )
}

/// The message of an API error reply, checking its status and its numeric `code`.
pub fn error_of(reply: &Reply, status: StatusCode) -> String {
    assert_eq!(
        reply.status,
        status,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let body = reply.json();
    assert_eq!(
        body["code"],
        json!(status.as_u16()),
        "numeric code in {body}"
    );
    body["message"].as_str().expect("message").to_owned()
}
