//! The one HTTP stack: hyper_util's pooled legacy client, used for the
//! control plane, envd's Connect services and `/files` alike.
//!
//! `https://` goes through rustls with ALPN (`h2`, `http/1.1`), so HTTP/2
//! wherever the server offers it. Plain `http://` is HTTP/1.1 unless
//! [`PlainHttp::H2cPriorKnowledge`] is chosen (HTTP/2 without TLS, which
//! e2b-local's front speaks but real envd does not).
//!
//! The stack builds its own clients rather than connectrpc's `HttpClient`
//! because it has to choose HTTP/2 receive windows, which that client
//! leaves at hyper's defaults (see [`STREAM_WINDOW`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use connectrpc::ConnectError;
use connectrpc::client::{BoxFuture, ClientBody, ClientTransport};
use http::{Request, Response, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// HTTP/2 receive window of each stream: how many bytes of one response
/// body the server may send ahead of the reader.
///
/// It bounds two things. Throughput of one stream over a WAN is at most
/// window / RTT: 1 MiB keeps a download or a chatty process at ≥ 10 MiB/s
/// up to 100 ms from E2B. And it bounds what a stalled reader holds:
/// h2 0.4 closes the *whole connection* (GOAWAY `ENHANCE_YOUR_CALM`) once
/// the unread DATA frames under 256 bytes, each counted as 256 − payload
/// bytes, exceed a budget of half the connection window (hyper exposes no
/// other way to set that budget). envd sends every small write of a command
/// as its own event in its own frame, and a caller that stops reading a
/// piped stdout stalls the stream by design (backpressure). The smallest
/// frame is a 12-byte protobuf event (5-byte envelope + 7-byte message for
/// one byte of output), so a fully stalled stream costs at most
/// 1 MiB / 12 × 244 ≈ 20.3 MiB of that budget.
///
/// Fixed, not adaptive: hyper's adaptive window starts at 64 KiB, whose
/// 32 KiB budget a hundred-odd tiny frames exhaust.
const STREAM_WINDOW: u32 = 1 << 20;

/// HTTP/2 receive window of a whole connection: the sum of unread bytes
/// across its streams.
///
/// Its half, the small-frame budget (128 MiB), covers six fully stalled
/// streams of the smallest events at once (6 × 20.3 MiB, see
/// [`STREAM_WINDOW`]), and about eight of realistic few-byte lines; hyper's
/// default of 5 MiB covered none, so one stalled reader broke every stream
/// of its sandbox. Memory stays bounded by the stalled streams themselves
/// (at most 1 MiB of data each, plus h2's bookkeeping per frame that the
/// budget is meant to cap), not by this window: reaching 256 MiB of unread
/// data would take 256 stalled streams.
const CONNECTION_WINDOW: u32 = 256 << 20;

/// Bound on one TCP `connect(2)`, divided among a name's addresses by
/// hyper. The same as connectrpc's `DEFAULT_TCP_CONNECT_TIMEOUT`.
const TCP_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Bound on establishing a connection as a whole: DNS, TCP and, for
/// `https://`, the TLS handshake (not the HTTP/2 preface, which runs inside
/// hyper's pool). The same as connectrpc's `DEFAULT_ESTABLISHMENT_TIMEOUT`.
const ESTABLISHMENT_TIMEOUT: Duration = Duration::from_secs(20);

/// HTTP version for plain `http://` URLs, the API's as well as envd's.
///
/// Measured on e2b-local (`examples/plain_http_versions.rs`, release
/// build, 2 cores): with 32 streams held open, 256 concurrent unary calls
/// took 36–38 ms over h2c against 48–55 ms over HTTP/1.1 (which also opens
/// a connection per open stream); 64 concurrent short process streams
/// showed no consistent difference (process start-up dominates). HTTP/1.1
/// stays the default because real envd serves nothing else.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PlainHttp {
    /// HTTP/1.1 with a connection pool (one request per connection at a
    /// time). Works with every server, including real envd.
    #[default]
    Http1,
    /// HTTP/2 with prior knowledge (h2c): many concurrent streams on one
    /// connection. Only for servers that speak h2c, such as e2b-local.
    H2cPriorKnowledge,
}

/// The client for plain `http://` URLs.
type PlainClient = Client<Establish<HttpConnector>, ClientBody>;
/// The client for `https://` URLs.
type TlsClient = Client<Establish<HttpsConnector<HttpConnector>>, ClientBody>;

/// A pooled HTTP client for both schemes; cheap to clone (clones share the
/// pools).
///
/// Every connection has TCP_NODELAY set, bounded establishment (5 s per
/// TCP connect, 20 s in all) and, when it speaks HTTP/2, fixed receive
/// windows (1 MiB per stream, 256 MiB per connection) under which a reader
/// that stops reading one stream does not get the connection closed under
/// its other streams.
///
/// Connections are driven by tasks spawned on the tokio runtime that made
/// them, so use one `HttpStack` from one runtime (in dsh, each plugin's own).
#[derive(Clone)]
pub struct HttpStack {
    plain: PlainClient,
    tls: Arc<LazyTls>,
    plain_version: PlainHttp,
}

/// The `https://` client, built on the first `https://` request: the
/// default configuration reads the system's certificate store (~2.7 ms of a
/// cold `dsh exec` here, on its critical path before the create), which a
/// stack that only ever speaks plain `http://` (e2b-local, a self-hosted
/// E2B behind a plain proxy) never needs.
struct LazyTls {
    config: Option<Arc<rustls::ClientConfig>>,
    establishment: Duration,
    client: OnceLock<TlsClient>,
}

impl LazyTls {
    /// The client, built now if this is the first `https://` request (on the
    /// calling thread, which then reads the store as `HttpStack::new` used
    /// to).
    fn client(&self) -> &TlsClient {
        self.client.get_or_init(|| {
            let config = self
                .config
                .clone()
                .unwrap_or_else(crate::tls::default_tls_config);
            tls_client(&config, self.establishment)
        })
    }
}

impl std::fmt::Debug for HttpStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpStack")
            .field("plain_version", &self.plain_version)
            .finish_non_exhaustive()
    }
}

impl HttpStack {
    /// Builds the stack. `tls` replaces the default TLS configuration
    /// ([`crate::default_tls_config`]); its ALPN list is replaced by
    /// `h2, http/1.1` (its certificate resolvers and verifier are kept).
    /// Opens no connection, and reads no certificate store until the first
    /// `https://` request.
    pub fn new(plain: PlainHttp, tls: Option<Arc<rustls::ClientConfig>>) -> Self {
        Self::build(plain, tls, ESTABLISHMENT_TIMEOUT)
    }

    /// [`HttpStack::new`] with the establishment bound as a parameter.
    fn build(
        plain: PlainHttp,
        tls: Option<Arc<rustls::ClientConfig>>,
        establishment: Duration,
    ) -> Self {
        HttpStack {
            plain: plain_client(plain, establishment),
            tls: Arc::new(LazyTls {
                config: tls,
                establishment,
                client: OnceLock::new(),
            }),
            plain_version: plain,
        }
    }

    /// The HTTP version used for plain `http://` URLs.
    pub fn plain_version(&self) -> PlainHttp {
        self.plain_version
    }
}

/// hyper's client builder with the stack's HTTP/2 windows.
fn client_builder() -> hyper_util::client::legacy::Builder {
    let mut builder = Client::builder(TokioExecutor::new());
    builder
        .http2_adaptive_window(false)
        .http2_initial_stream_window_size(STREAM_WINDOW)
        .http2_initial_connection_window_size(CONNECTION_WINDOW);
    builder
}

/// A TCP connector with TCP_NODELAY (small Connect messages must not wait
/// for Nagle plus delayed ACKs) and the connect bound.
fn tcp_connector() -> HttpConnector {
    let mut tcp = HttpConnector::new();
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(TCP_CONNECT_TIMEOUT));
    tcp
}

/// The `http://` client: HTTP/1.1, or h2c only for
/// [`PlainHttp::H2cPriorKnowledge`].
fn plain_client(version: PlainHttp, establishment: Duration) -> PlainClient {
    let mut builder = client_builder();
    if version == PlainHttp::H2cPriorKnowledge {
        builder.http2_only(true);
    }
    builder.build(Establish {
        inner: tcp_connector(),
        limit: establishment,
    })
}

/// The `https://` client: HTTP/2 or HTTP/1.1 as ALPN settles, refusing
/// plain `http://` at the connector too.
fn tls_client(config: &rustls::ClientConfig, establishment: Duration) -> TlsClient {
    let mut tcp = tcp_connector();
    // The TCP connector refuses `https://` URIs unless told that TLS is
    // layered on top.
    tcp.enforce_http(false);
    // hyper-rustls sets ALPN itself and insists on an empty list; cloning
    // the config shares its resolvers and verifier (`Arc`s).
    let mut config = config.clone();
    config.alpn_protocols.clear();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_all_versions()
        .wrap_connector(tcp);
    client_builder().build(Establish {
        inner: https,
        limit: establishment,
    })
}

/// A connector whose connections must be established (DNS, TCP, TLS)
/// within `limit` ([`ESTABLISHMENT_TIMEOUT`]); a late one is dropped
/// mid-handshake and fails with [`std::io::ErrorKind::TimedOut`].
#[derive(Clone)]
struct Establish<C> {
    inner: C,
    limit: Duration,
}

impl<C> tower::Service<Uri> for Establish<C>
where
    C: tower::Service<Uri>,
    C::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    C::Future: Send + 'static,
{
    type Response = C::Response;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let limit = self.limit;
        let origin = origin(&uri);
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            match tokio::time::timeout(limit, connecting).await {
                Ok(connected) => connected.map_err(Into::into),
                Err(_) => Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("connect to {origin}: not established within {limit:?}"),
                )
                .into()),
            }
        })
    }
}

/// `scheme://authority` of an absolute URI: what error messages name,
/// without the path and query (a `/files` query carries a signature).
fn origin(uri: &Uri) -> String {
    format!(
        "{}://{}",
        uri.scheme_str().unwrap_or_default(),
        uri.authority().map(|a| a.as_str()).unwrap_or_default()
    )
}

impl ClientTransport for HttpStack {
    type ResponseBody = hyper::body::Incoming;
    type Error = ConnectError;

    /// Sends `request` (an absolute URL) on the pool for its scheme and
    /// resolves with the response head; the body streams on. A URL that is
    /// relative or neither `http` nor `https` fails with `invalid_argument`
    /// before anything is sent; a failure to connect or to get the response
    /// head is `unavailable` with the cause as its source. Dropping the
    /// returned future aborts the request.
    fn send(
        &self,
        request: Request<ClientBody>,
    ) -> BoxFuture<'static, Result<Response<Self::ResponseBody>, Self::Error>> {
        let origin = origin(request.uri());
        let sending = match request.uri().scheme_str() {
            Some("https") => self.tls.client().request(request),
            Some("http") => self.plain.request(request),
            other => {
                let message = match other {
                    Some(scheme) => format!("unsupported URL scheme {scheme:?}"),
                    None => format!("request URL {} is not absolute", request.uri()),
                };
                return Box::pin(async move { Err(ConnectError::invalid_argument(message)) });
            }
        };
        Box::pin(async move {
            sending.await.map_err(|err| {
                ConnectError::unavailable_from_transport(
                    format_args!("HTTP request to {origin} failed"),
                    err,
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty_request(uri: &str) -> Request<ClientBody> {
        Request::builder()
            .uri(uri)
            .body(connectrpc::client::full_body(bytes::Bytes::new()))
            .unwrap()
    }

    /// A port nothing listens on: bind a listener, then drop it.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }

    #[tokio::test]
    async fn relative_urls_are_rejected_before_sending() {
        let stack = HttpStack::new(PlainHttp::Http1, None);
        let err = stack
            .send(empty_request("/files?path=x"))
            .await
            .unwrap_err();
        assert_eq!(err.code, connectrpc::ErrorCode::InvalidArgument);
        assert!(err.to_string().contains("not absolute"), "{err}");
    }

    /// Plain `http://` never builds the TLS client (nor reads the system's
    /// certificate store); the first `https://` request does, and clones
    /// share it.
    #[tokio::test]
    async fn the_tls_client_is_built_by_the_first_https_request() {
        let port = closed_port();
        let stack = HttpStack::new(PlainHttp::Http1, None);
        let clone = stack.clone();
        let _ = stack
            .send(empty_request(&format!("http://127.0.0.1:{port}/health")))
            .await;
        assert!(clone.tls.client.get().is_none(), "built for plain http");
        let _ = stack
            .send(empty_request(&format!("https://127.0.0.1:{port}/health")))
            .await;
        assert!(clone.tls.client.get().is_some(), "not built for https");
    }

    #[tokio::test]
    async fn other_schemes_are_rejected_before_sending() {
        let stack = HttpStack::new(PlainHttp::H2cPriorKnowledge, None);
        let err = stack
            .send(empty_request("ftp://127.0.0.1/x"))
            .await
            .unwrap_err();
        assert_eq!(err.code, connectrpc::ErrorCode::InvalidArgument);
        assert!(err.to_string().contains("\"ftp\""), "{err}");
    }

    #[tokio::test]
    async fn connection_refused_is_unavailable_with_a_source() {
        let port = closed_port();
        for version in [PlainHttp::Http1, PlainHttp::H2cPriorKnowledge] {
            let stack = HttpStack::new(version, None);
            let err = stack
                .send(empty_request(&format!("http://127.0.0.1:{port}/health")))
                .await
                .unwrap_err();
            assert_eq!(err.code, connectrpc::ErrorCode::Unavailable, "{version:?}");
            assert!(err.source_arc().is_some(), "{version:?}");
            assert!(
                err.to_string()
                    .contains(&format!("http://127.0.0.1:{port}")),
                "{err}"
            );
        }
        let stack = HttpStack::new(PlainHttp::Http1, None);
        let err = stack
            .send(empty_request(&format!("https://127.0.0.1:{port}/health")))
            .await
            .unwrap_err();
        assert_eq!(err.code, connectrpc::ErrorCode::Unavailable);
        assert!(err.source_arc().is_some());
    }

    /// A server that accepts TCP but never answers the TLS handshake: the
    /// establishment bound ends the wait with `unavailable`, its cause a
    /// timed-out I/O error, and the request is classified as a transport
    /// failure.
    #[tokio::test]
    async fn a_hanging_tls_handshake_ends_at_the_establishment_bound() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let (socket, _) = listener.accept().await.unwrap();
                held.push(socket);
            }
        });
        let stack = HttpStack::build(PlainHttp::Http1, None, Duration::from_millis(200));
        let started = std::time::Instant::now();
        let err = stack
            .send(empty_request(&format!("https://127.0.0.1:{port}/health")))
            .await
            .unwrap_err();
        silent.abort();
        assert!(started.elapsed() < Duration::from_secs(5), "bounded");
        assert_eq!(err.code, connectrpc::ErrorCode::Unavailable);
        let mut link: Option<&(dyn std::error::Error + 'static)> = Some(&err);
        let mut timed_out = false;
        while let Some(current) = link {
            timed_out |= current
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut);
            link = current.source();
        }
        assert!(timed_out, "a TimedOut cause in {err:?}");
        let classified = crate::classify::from_connect(
            crate::error::Context::new("stat", "/x"),
            "sbx",
            &err,
            crate::classify::Stage::Handshake,
        );
        assert!(
            matches!(classified, crate::Error::Transport { .. }),
            "{classified:?}"
        );
    }
}
