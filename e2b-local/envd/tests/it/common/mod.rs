//! Test support: a daemon on a loopback port (or a Unix socket), generated Connect clients in
//! JSON and binary protobuf, and a raw HTTP client that sees the wire as the official SDKs do.

pub mod process;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use connectrpc::client::{ClientConfig, HttpClient};
use e2b_local_envd::{Envd, EnvdConfig, EnvdListener};
use envd_proto::filesystem::FilesystemClient;
use envd_proto::process::ProcessClient;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub type RequestBody = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// A config with `root` as default user and no token.
pub fn config() -> EnvdConfig {
    EnvdConfig {
        sandbox_id: "sbxtest".to_owned(),
        template_id: "base".to_owned(),
        env_vars: BTreeMap::new(),
        access_token: None,
        default_user: "root".to_owned(),
        default_workdir: None,
    }
}

/// A running daemon on 127.0.0.1:<ephemeral>. Stopped (and its processes killed) by
/// [`TestDaemon::stop`] or when the test's runtime ends.
pub struct TestDaemon {
    pub base: String,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), e2b_local_envd::EnvdError>>>,
}

impl TestDaemon {
    pub async fn start(config: EnvdConfig) -> Self {
        Self::start_with(Envd::new(config)).await
    }

    pub async fn start_with(envd: Envd) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let (shutdown, stop) = oneshot::channel::<()>();
        let task = tokio::spawn(envd.serve(EnvdListener::Tcp(listener), async move {
            let _ = stop.await;
        }));
        Self {
            base: format!("http://{addr}"),
            shutdown: Some(shutdown),
            task: Some(task),
        }
    }

    pub async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(task) = self.task.take() {
            task.await
                .expect("daemon task joined")
                .expect("daemon ended cleanly");
        }
    }

    pub fn url(&self, path_and_query: &str) -> String {
        format!("{}{}", self.base, path_and_query)
    }

    fn client_config(&self, json: bool) -> ClientConfig {
        let config = ClientConfig::new(self.base.parse().expect("base uri"));
        if json { config.json() } else { config.proto() }
    }

    pub fn process(&self, json: bool) -> ProcessClient<HttpClient> {
        ProcessClient::new(HttpClient::plaintext(), self.client_config(json))
    }

    pub fn process_with_headers(
        &self,
        json: bool,
        headers: &[(&str, &str)],
    ) -> ProcessClient<HttpClient> {
        let mut config = self.client_config(json);
        for (name, value) in headers {
            config = config.with_default_header(
                http::HeaderName::from_bytes(name.as_bytes()).expect("header name"),
                http::HeaderValue::from_str(value).expect("header value"),
            );
        }
        ProcessClient::new(HttpClient::plaintext(), config)
    }

    pub fn process_h2(&self, json: bool) -> ProcessClient<HttpClient> {
        ProcessClient::new(HttpClient::plaintext_http2_only(), self.client_config(json))
    }

    pub fn fs(&self, json: bool) -> FilesystemClient<HttpClient> {
        FilesystemClient::new(HttpClient::plaintext(), self.client_config(json))
    }

    pub fn fs_with_headers(
        &self,
        json: bool,
        headers: &[(&str, &str)],
    ) -> FilesystemClient<HttpClient> {
        let mut config = self.client_config(json);
        for (name, value) in headers {
            config = config.with_default_header(
                http::HeaderName::from_bytes(name.as_bytes()).expect("header name"),
                http::HeaderValue::from_str(value).expect("header value"),
            );
        }
        FilesystemClient::new(HttpClient::plaintext(), config)
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// A raw HTTP/1.1 client.
pub fn http_client() -> Client<HttpConnector, RequestBody> {
    Client::builder(TokioExecutor::new()).build_http()
}

pub fn body(bytes: impl Into<Bytes>) -> RequestBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// A fully read response.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|err| {
            panic!(
                "JSON body ({err}): {:?}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

/// Sends one request and reads the whole response.
pub async fn send(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    request_body: RequestBody,
) -> Reply {
    send_with(http_client(), method, url, headers, request_body).await
}

/// Like [`send`] over h2c (prior knowledge): a server may answer before reading a whole
/// oversized body without breaking the connection, which HTTP/1.1 cannot promise.
pub async fn send_h2(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    request_body: RequestBody,
) -> Reply {
    send_with(h2_client(), method, url, headers, request_body).await
}

/// An h2c client (prior knowledge), as e2b-local's front speaks to the daemon.
pub fn h2_client() -> Client<HttpConnector, RequestBody> {
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http()
}

async fn send_with(
    client: Client<HttpConnector, RequestBody>,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    request_body: RequestBody,
) -> Reply {
    let mut builder = Request::builder().method(method).uri(url);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = client
        .request(builder.body(request_body).expect("request"))
        .await
        .expect("request sent");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("response body").to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

/// A Connect envelope as received.
#[derive(Debug, Clone)]
pub struct Envelope {
    pub flags: u8,
    pub payload: Bytes,
}

impl Envelope {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.payload).unwrap_or_else(|err| {
            panic!(
                "envelope JSON ({err}): {:?}",
                String::from_utf8_lossy(&self.payload)
            )
        })
    }

    pub fn is_end(&self) -> bool {
        self.flags & 0x02 != 0
    }
}

pub fn envelope(payload: &[u8]) -> Bytes {
    let mut frame = BytesMut::with_capacity(payload.len() + 5);
    frame.extend_from_slice(&[0]);
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(payload);
    frame.freeze()
}

/// A Connect server stream read envelope by envelope, as the JS SDK reads it.
pub struct RawStream {
    pub status: StatusCode,
    pub headers: HeaderMap,
    body: hyper::body::Incoming,
    buffer: BytesMut,
}

impl RawStream {
    /// POSTs a JSON server-stream request (`application/connect+json`, one envelope).
    pub async fn open(url: &str, json: &str, headers: &[(&str, &str)]) -> Self {
        let mut builder = Request::builder()
            .method(Method::POST)
            .uri(url)
            .header("content-type", "application/connect+json")
            .header("connect-protocol-version", "1");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let response = http_client()
            .request(
                builder
                    .body(body(envelope(json.as_bytes())))
                    .expect("request"),
            )
            .await
            .expect("stream request sent");
        let (parts, body) = response.into_parts();
        Self {
            status: parts.status,
            headers: parts.headers,
            body,
            buffer: BytesMut::new(),
        }
    }

    /// The next envelope, or `None` at the end of the body.
    pub async fn next(&mut self) -> Option<Envelope> {
        loop {
            if self.buffer.len() >= 5 {
                let length = u32::from_be_bytes(self.buffer[1..5].try_into().unwrap()) as usize;
                if self.buffer.len() >= 5 + length {
                    let flags = self.buffer[0];
                    self.buffer.advance(5);
                    let payload = self.buffer.split_to(length).freeze();
                    return Some(Envelope { flags, payload });
                }
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
                Some(Err(err)) => panic!("stream body failed: {err}"),
                None => {
                    assert!(self.buffer.is_empty(), "trailing partial envelope");
                    return None;
                }
            }
        }
    }

    /// The next envelope within `limit`.
    pub async fn next_within(&mut self, limit: Duration) -> Option<Envelope> {
        tokio::time::timeout(limit, self.next())
            .await
            .expect("envelope arrived in time")
    }

    /// Every remaining envelope.
    pub async fn collect(mut self) -> Vec<Envelope> {
        let mut all = Vec::new();
        while let Some(envelope) = self.next_within(Duration::from_secs(30)).await {
            all.push(envelope);
        }
        all
    }
}

/// POSTs a unary JSON Connect request.
pub async fn unary_json(url: &str, json: &str, headers: &[(&str, &str)]) -> Reply {
    let mut all: Vec<(&str, &str)> = vec![
        ("content-type", "application/json"),
        ("connect-protocol-version", "1"),
    ];
    all.extend_from_slice(headers);
    send(Method::POST, url, &all, body(json.to_owned())).await
}

/// `Authorization: Basic base64("<user>:")`.
pub fn basic(user: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:"))
    )
}

/// A directory any user can write (for tests running commands as `nobody`).
pub fn shared_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
        .expect("chmod 777");
    dir
}
