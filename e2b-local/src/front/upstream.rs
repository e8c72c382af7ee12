//! The connection pool from the front to one sandbox's envd, over its Unix socket.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::UnixStream;

/// Connects every request to the same Unix socket, whatever the URI says.
#[derive(Clone)]
pub struct UnixConnector {
    path: Arc<PathBuf>,
}

impl tower::Service<Uri> for UnixConnector {
    type Response = TokioIo<UnixStream>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: Uri) -> Self::Future {
        let path = self.path.clone();
        Box::pin(async move { UnixStream::connect(path.as_path()).await.map(TokioIo::new) })
    }
}

/// An HTTP/2 (h2c) client bound to one sandbox's envd socket. Request and response bodies are
/// streamed through (`Incoming` in, `Incoming` out), never buffered. Cheap to clone.
#[derive(Clone)]
pub struct Upstream {
    socket: Arc<PathBuf>,
    client: Client<UnixConnector, Incoming>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    pub fn new(socket: PathBuf) -> Self {
        let socket = Arc::new(socket);
        // h2c with prior knowledge: every request, streams included, multiplexes over one Unix
        // connection, and a daemon that answers before reading a request body to its end
        // resets just that stream (NO_ERROR) instead of closing a connection the front may
        // still be writing to — which over HTTP/1.1 surfaced as a spurious 502.
        let client = Client::builder(TokioExecutor::new())
            .http2_only(true)
            .http2_adaptive_window(true)
            .pool_idle_timeout(Duration::from_secs(60))
            .build(UnixConnector {
                path: socket.clone(),
            });
        Self { socket, client }
    }

    /// Sends `request` (its URI must be absolute, e.g. `http://envd/path`) and resolves with the
    /// response head; the body keeps streaming. Dropping the future aborts the exchange.
    pub async fn send(
        &self,
        request: http::Request<Incoming>,
    ) -> Result<http::Response<Incoming>, hyper_util::client::legacy::Error> {
        self.client.request(request).await
    }
}
