//! Streamable HTTP: the same server at `http://ADDR/mcp`.
//!
//! Safe by default: loopback addresses only unless asked; the `Host` header
//! must name the bound address (or `localhost` on loopback) and a browser
//! `Origin` must be that same authority, against DNS rebinding; and beyond
//! loopback a bearer token is required on every request.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::server::DshMcp;

/// Where and how `dsh mcp --http` listens.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The address to bind (`127.0.0.1:0` picks a free loopback port).
    pub addr: SocketAddr,
    /// The bearer token every request must carry (`Authorization: Bearer
    /// …`); required when `addr` is not a loopback address.
    pub token: Option<String>,
}

/// Why the HTTP server could not serve.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "dsh mcp --http {0}: a non-loopback address needs a bearer token (--token or DSH_MCP_TOKEN)"
    )]
    TokenRequired(SocketAddr),
    #[error("dsh mcp --http {addr}: bind: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("dsh mcp --http: serve: {0}")]
    Serve(std::io::Error),
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
    let loopback = options.addr.ip().is_loopback();
    if !loopback && options.token.is_none() {
        return Err(HttpError::TokenRequired(options.addr));
    }
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|source| HttpError::Bind {
            addr: options.addr,
            source,
        })?;
    let bound = listener.local_addr().map_err(HttpError::Serve)?;
    let stop = CancellationToken::new();
    // The bound address (and `localhost` on loopback), with and without its
    // port for `Host`; with it for `Origin`.
    let mut authorities = vec![bound.to_string()];
    if loopback {
        authorities.push(format!("localhost:{}", bound.port()));
    }
    let origins = authorities
        .iter()
        .map(|authority| format!("http://{authority}"))
        .collect::<Vec<_>>();
    let mut hosts = authorities.clone();
    hosts.push(bound.ip().to_string());
    if loopback {
        hosts.push("localhost".to_owned());
    }
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_cancellation_token(stop.child_token());
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token = options.token.map(Arc::<str>::from);
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(move |request, next| {
                require_token(token.clone(), request, next)
            }));
    ready(bound);
    let stopping = stop.clone();
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            stopping.cancel();
        })
        .await
        .map_err(HttpError::Serve)
}

/// Refuses a request without the bearer token (when one is set) with 401.
async fn require_token(token: Option<Arc<str>>, request: Request, next: Next) -> Response {
    if let Some(token) = token {
        let presented = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        if !presented.is_some_and(|presented| constant_time_eq(presented, &token)) {
            return (
                StatusCode::UNAUTHORIZED,
                [(http::header::WWW_AUTHENTICATE, "Bearer")],
                "dsh mcp: a valid bearer token is required\n",
            )
                .into_response();
        }
    }
    next.run(request).await
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
}
