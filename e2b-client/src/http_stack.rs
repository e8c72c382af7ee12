//! The one HTTP stack: connectrpc's hyper-based [`HttpClient`], used for the
//! control plane, envd's Connect services and `/files` alike.
//!
//! `https://` goes through rustls with ALPN (`h2`, `http/1.1`), so HTTP/2
//! wherever the server offers it. Plain `http://` is HTTP/1.1 unless
//! [`PlainHttp::H2cPriorKnowledge`] is chosen (HTTP/2 without TLS, which
//! e2b-local's front speaks but real envd does not).

use std::sync::Arc;

use connectrpc::ConnectError;
use connectrpc::client::{BoxFuture, ClientBody, ClientTransport, HttpClient};
use http::{Request, Response};

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

/// A pooled HTTP client for both schemes; cheap to clone (clones share the
/// pools).
///
/// Connections are driven by tasks spawned on the tokio runtime that made
/// them, so use one `HttpStack` from one runtime (in dsh, each plugin's own).
#[derive(Clone)]
pub struct HttpStack {
    plain: HttpClient,
    tls: HttpClient,
    plain_version: PlainHttp,
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
    /// (webpki roots, ring provider); its ALPN list is reset to
    /// `h2, http/1.1` by connectrpc.
    pub fn new(plain: PlainHttp, tls: Option<Arc<rustls::ClientConfig>>) -> Self {
        let tls = tls.unwrap_or_else(default_tls_config);
        let plain_client = match plain {
            PlainHttp::Http1 => HttpClient::plaintext(),
            PlainHttp::H2cPriorKnowledge => HttpClient::plaintext_http2_only(),
        };
        HttpStack {
            plain: plain_client,
            tls: HttpClient::with_tls(tls),
            plain_version: plain,
        }
    }

    /// The HTTP version used for plain `http://` URLs.
    pub fn plain_version(&self) -> PlainHttp {
        self.plain_version
    }
}

/// webpki roots with the ring provider, chosen explicitly: connectrpc's
/// rustls dependency also enables aws-lc-rs, so the process-wide default
/// provider would be ambiguous.
fn default_tls_config() -> Arc<rustls::ClientConfig> {
    use hyper_rustls::ConfigBuilderExt;
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("ring supports the default TLS versions");
    Arc::new(builder.with_webpki_roots().with_no_client_auth())
}

impl ClientTransport for HttpStack {
    type ResponseBody = hyper::body::Incoming;
    type Error = ConnectError;

    /// Sends `request` (an absolute URL) on the pool for its scheme.
    /// Dropping the returned future aborts the request.
    fn send(
        &self,
        request: Request<ClientBody>,
    ) -> BoxFuture<'static, Result<Response<Self::ResponseBody>, Self::Error>> {
        match request.uri().scheme_str() {
            Some("https") => self.tls.send(request),
            Some("http") => self.plain.send(request),
            other => {
                let message = match other {
                    Some(scheme) => format!("unsupported URL scheme {scheme:?}"),
                    None => format!("request URL {} is not absolute", request.uri()),
                };
                Box::pin(async move { Err(ConnectError::invalid_argument(message)) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn relative_urls_are_rejected_before_sending() {
        let stack = HttpStack::new(PlainHttp::Http1, None);
        let request = Request::builder()
            .uri("/files?path=x")
            .body(connectrpc::client::full_body(bytes::Bytes::new()))
            .unwrap();
        let err = stack.send(request).await.unwrap_err();
        assert_eq!(err.code, connectrpc::ErrorCode::InvalidArgument);
        assert!(err.to_string().contains("not absolute"), "{err}");
    }

    #[tokio::test]
    async fn connection_refused_is_unavailable_with_a_source() {
        // Bind then drop a listener to get a port nothing listens on.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let stack = HttpStack::new(PlainHttp::Http1, None);
        let request = Request::builder()
            .uri(format!("http://127.0.0.1:{port}/health"))
            .body(connectrpc::client::full_body(bytes::Bytes::new()))
            .unwrap();
        let err = stack.send(request).await.unwrap_err();
        assert_eq!(err.code, connectrpc::ErrorCode::Unavailable);
        assert!(err.source_arc().is_some());
    }
}
