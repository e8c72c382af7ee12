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
use tokio_util::sync::CancellationToken;

/// Per-stream HTTP/2 receive window on the link to envd (see [`Upstream::new`]).
const STREAM_WINDOW: u32 = 256 * 1024;
/// Connection-wide HTTP/2 receive window on the link to envd; h2's small-frame budget is
/// half of it.
const CONNECTION_WINDOW: u32 = 64 * 1024 * 1024;

/// Connects every request to the same Unix socket, whatever the URI says.
#[derive(Clone)]
pub struct UnixConnector {
    path: Arc<PathBuf>,
}

impl UnixConnector {
    pub fn new(path: PathBuf) -> UnixConnector {
        UnixConnector {
            path: Arc::new(path),
        }
    }
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
/// streamed through (`Incoming` in, `Incoming` out), never buffered. Cheap to clone; clones share
/// the [`Upstream::cut`] signal.
#[derive(Clone)]
pub struct Upstream {
    socket: Arc<PathBuf>,
    client: Client<UnixConnector, Incoming>,
    cut: Arc<std::sync::Mutex<CancellationToken>>,
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
        //
        // Fixed windows, not adaptive ones: h2 closes a connection whose unread small DATA
        // frames exceed a budget of half the connection window, and envd sends a command's
        // every tiny write as its own frame. An adaptive window starts at 64 KiB (budget
        // 25.6 KiB, about a hundred tiny frames), which a reader stalled for a moment
        // exhausted, killing every stream of the sandbox. A 256 KiB stream window bounds one
        // stalled stream's unread frames (at most ~5 MiB of framing overhead even for
        // 13-byte events) far below the 32 MiB budget of a 64 MiB connection window, and
        // still streams at memory speed over the Unix socket.
        //
        // No bound on the streams reset for the peer's "errors": when the client of a complete
        // HTTP/1.1 answer (its Content-Length read) drops the body, the front resets the stream
        // (CANCEL), and envd's END_STREAM, already on its way, draws a STREAM_CLOSED reset that
        // h2 counts as envd's protocol error — after 1,024 of them (the code runtime's bench met
        // them within some 33,000 requests of one sandbox) it closed the connection
        // (ENHANCE_YOUR_CALM, "too_many_internal_resets"), and every stream of the sandbox with
        // it. The bound guards against a hostile peer; this one is our envd on a Unix socket.
        let client = Client::builder(TokioExecutor::new())
            .http2_only(true)
            .http2_max_local_error_reset_streams(None)
            .http2_initial_stream_window_size(STREAM_WINDOW)
            .http2_initial_connection_window_size(CONNECTION_WINDOW)
            .pool_idle_timeout(Duration::from_secs(60))
            .build(UnixConnector::new(socket.to_path_buf()));
        Self {
            socket,
            client,
            cut: Arc::default(),
        }
    }

    /// The signal of the exchanges with this sandbox starting now: cancelled by the next
    /// [`Upstream::cut`].
    pub fn cut_signal(&self) -> CancellationToken {
        self.cut.lock().expect("cut signal lock").clone()
    }

    /// Ends every exchange with this sandbox in flight — to envd or a server inside — that took
    /// its signal before now: a sandbox frozen by a pause answers nothing, and a request left
    /// waiting on it would wait until its resume, as no edge lets it (E2B's ends it). Later
    /// exchanges take a fresh signal.
    pub fn cut(&self) {
        let old = std::mem::take(&mut *self.cut.lock().expect("cut signal lock"));
        old.cancel();
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
