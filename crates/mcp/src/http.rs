//! Streamable HTTP: the same server at `http://ADDR/mcp`, for its owner only.
//!
//! - **A bearer token on every request, on every address** — loopback too:
//!   every local account can connect to a loopback port, and the tools run
//!   commands as the server's user. Checked before anything else, so a
//!   request without it can neither start nor evict a session.
//! - **`Host` and `Origin`**, against DNS rebinding: bound to one address,
//!   `Host` must name it (or `localhost` on loopback); bound to a wildcard
//!   (`0.0.0.0`, `[::]`), any `Host` is accepted — the names clients use for
//!   such a server (each interface's address, the machine's names, a port
//!   forwarded from a container's host or through a proxy) cannot be listed
//!   from inside it, and the token alone decides, which a rebinding page
//!   cannot send (it is no cookie). A browser's `Origin` must be the same
//!   authority as the `Host` it addressed.
//! - **Sessions bounded and expiring** ([`crate::sessions`]), a call whose
//!   client disconnected cancelled.
//! - **A body that is not a JSON-RPC message** is answered 400 with the
//!   JSON-RPC error (parse error or invalid request), as the MCP
//!   specification says, not rmcp's 415; more than 16 MiB, 413.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use http::{HeaderMap, Method, StatusCode, header};
use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::server::DshMcp;
use crate::sessions::{SessionLimits, Sessions};
use crate::wire::{MAX_MESSAGE_BYTES, Rejected, decode};

/// Where and how `dsh mcp --http` listens.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The address to bind (`127.0.0.1:0` picks a free loopback port).
    pub addr: SocketAddr,
    /// The bearer token every request must carry (`Authorization: Bearer
    /// …`): printable ASCII without spaces ([`check_token`]; see
    /// [`generate_token`]).
    pub token: String,
    /// How many sessions may exist and how long an idle one lives.
    pub sessions: SessionLimits,
}

/// Why the HTTP server could not serve.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("dsh mcp --http: {0}")]
    Token(String),
    #[error("dsh mcp --http {addr}: bind: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("dsh mcp --http: serve: {0}")]
    Serve(std::io::Error),
}

/// A new random token: 32 bytes from the operating system's generator, as
/// 64 hex digits.
pub fn generate_token() -> String {
    use rand::Rng;
    let bytes: [u8; 32] = rand::rng().random();
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Checks that `token` can be sent as a bearer token: not empty, printable
/// ASCII without spaces (what an HTTP header carries unchanged); the error
/// says which rule it breaks.
pub fn check_token(token: &str) -> Result<(), &'static str> {
    if token.is_empty() {
        return Err("the bearer token is empty");
    }
    if !token.bytes().all(|byte| byte.is_ascii_graphic()) {
        return Err("the bearer token must be printable ASCII without spaces");
    }
    Ok(())
}

/// Serves `server` at `http://<addr>/mcp` until `shutdown` resolves; calls
/// `ready` with the bound address (a port of 0 is chosen by the system) once
/// it accepts connections.
pub async fn serve_http(
    server: DshMcp,
    options: HttpOptions,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HttpError> {
    check_token(&options.token).map_err(|reason| HttpError::Token(reason.to_owned()))?;
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|source| HttpError::Bind {
            addr: options.addr,
            source,
        })?;
    let bound = listener.local_addr().map_err(HttpError::Serve)?;
    let stop = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(MAX_MESSAGE_BYTES)
        // `Origin` is checked by `guard`, against the `Host` the request names.
        .disable_allowed_origins()
        .with_cancellation_token(stop.child_token());
    let config = if bound.ip().is_unspecified() {
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts(hosts(bound))
    };
    let sessions = Arc::new(Sessions::new(options.sessions));
    let service =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::clone(&sessions), config);
    tokio::spawn(expire(
        Arc::clone(&sessions),
        options.sessions,
        stop.child_token(),
    ));
    let token = Arc::<str>::from(options.token);
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(move |request, next| {
                guard(Arc::clone(&token), Arc::clone(&sessions), request, next)
            }));
    ready(bound);
    let stopping = stop.clone();
    // Answers are small writes (an SSE event, then the end of the stream): without
    // TCP_NODELAY, Nagle's algorithm holds one back until the client acknowledges the last,
    // which a client delaying its acknowledgements makes a wait of tens of milliseconds.
    let listener = listener.tap_io(|stream| {
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!("dsh mcp --http: TCP_NODELAY: {err}");
        }
    });
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            stopping.cancel();
        })
        .await
        .map_err(HttpError::Serve);
    stop.cancel();
    served
}

/// The `Host` values a server bound to `bound` (one address, not a
/// wildcard) answers: its address with and without the port, and
/// `localhost` on loopback.
fn hosts(bound: SocketAddr) -> Vec<String> {
    let mut hosts = vec![bound.to_string(), bound.ip().to_string()];
    if bound.ip().is_loopback() {
        hosts.push(format!("localhost:{}", bound.port()));
        hosts.push("localhost".to_owned());
    }
    hosts
}

/// Ends idle sessions as they expire, until `stop`.
async fn expire(sessions: Arc<Sessions>, limits: SessionLimits, stop: CancellationToken) {
    // Often enough that an idle session outlives its limit by at most a quarter of it.
    let mut ticks = tokio::time::interval((limits.idle / 4).max(std::time::Duration::from_secs(1)));
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {
                sessions.expire().await;
            }
        }
    }
}

/// What every request passes before rmcp serves it: the token (401), the
/// browser's `Origin` (403), the body (400, 413), and room for a new session
/// (503).
///
/// A body is decoded here only when the request names no session (an
/// `initialize`, which needs room, or a request rmcp will refuse): a call in
/// a session is decoded once, by rmcp, and only a body rmcp cannot decode
/// (its answer 415, the content type being JSON) is decoded again, to answer
/// the JSON-RPC error.
async fn guard(token: Arc<str>, sessions: Arc<Sessions>, request: Request, next: Next) -> Response {
    if !bearer(request.headers()).is_some_and(|presented| constant_time_eq(presented, &token)) {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "dsh mcp: a valid bearer token is required (Authorization: Bearer TOKEN)\n",
        )
            .into_response();
    }
    if !same_origin(&request) {
        return (
            StatusCode::FORBIDDEN,
            "dsh mcp: the Origin is not the server's own\n",
        )
            .into_response();
    }
    if request.method() != Method::POST || !is_json(request.headers()) {
        // rmcp answers these (a GET stream, DELETE, 405, 415).
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_MESSAGE_BYTES).await {
        Ok(bytes) => bytes,
        Err(err) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "dsh mcp: the request body could not be read within {MAX_MESSAGE_BYTES} bytes: {err}\n"
                ),
            )
                .into_response();
        }
    };
    if parts.headers.contains_key(HEADER_SESSION_ID) {
        let response = next
            .run(Request::from_parts(parts, Body::from(bytes.clone())))
            .await;
        if response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
            return response;
        }
        return match decode(&bytes) {
            Err(rejected) => refusal(&rejected),
            Ok(_) => response,
        };
    }
    let message = match decode(&bytes) {
        Ok(message) => message,
        Err(rejected) => return refusal(&rejected),
    };
    let initialize = matches!(
        &message,
        JsonRpcMessage::Request(request) if matches!(request.request, ClientRequest::InitializeRequest(_))
    );
    if initialize && !sessions.has_room() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "10")],
            "dsh mcp: every session is busy; try again later\n",
        )
            .into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The answer to a body that is not a message the server can serve: 400
/// with the JSON-RPC error.
fn refusal(rejected: &Rejected) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        rejected.body(),
    )
        .into_response()
}

/// The bearer token a request presents.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

/// Whether the body is declared JSON (what rmcp serves; it answers others 415).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// True without an `Origin` (not a browser), or when it is `http://` and the
/// very authority the request's `Host` names.
fn same_origin(request: &Request) -> bool {
    let Some(origin) = request.headers().get(header::ORIGIN) else {
        return true;
    };
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(|authority| authority.as_str())
        });
    let (Ok(origin), Some(host)) = (origin.to_str(), host) else {
        return false;
    };
    origin
        .strip_prefix("http://")
        .is_some_and(|authority| authority.eq_ignore_ascii_case(host))
}

/// Compares without an early exit on the first differing byte, so the time
/// taken does not tell an attacker how much of a guess was right.
fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(constant_time_eq("abc", "abc"));
        assert!(!constant_time_eq("abc", "abd"));
        assert!(!constant_time_eq("abc", "ab"));
        assert!(!constant_time_eq("", "a"));
    }

    #[test]
    fn generated_tokens_are_fresh_and_sendable() {
        let (one, two) = (generate_token(), generate_token());
        assert_eq!(one.len(), 64);
        assert_ne!(one, two);
        assert!(check_token(&one).is_ok());
        assert!(check_token("").is_err());
        assert!(check_token("with space").is_err());
        assert!(check_token("tab\there").is_err());
    }

    #[test]
    fn an_origin_must_be_the_host_the_request_names() {
        let request = |origin: Option<&str>, host: &str| {
            let mut builder = Request::builder().uri("/mcp").header(header::HOST, host);
            if let Some(origin) = origin {
                builder = builder.header(header::ORIGIN, origin);
            }
            builder.body(Body::empty()).unwrap()
        };
        assert!(same_origin(&request(None, "127.0.0.1:8787")));
        assert!(same_origin(&request(
            Some("http://127.0.0.1:8787"),
            "127.0.0.1:8787"
        )));
        assert!(same_origin(&request(
            Some("http://LOCALHOST:1"),
            "localhost:1"
        )));
        assert!(!same_origin(&request(
            Some("http://evil.example"),
            "127.0.0.1:8787"
        )));
        assert!(!same_origin(&request(
            Some("http://127.0.0.1:9"),
            "127.0.0.1:8787"
        )));
        assert!(!same_origin(&request(Some("null"), "127.0.0.1:8787")));
    }
}
