//! The envd front: one TCP port for every sandbox's envd (and the servers in sandboxes).
//! Accepts HTTP/1.1 and h2c (prior knowledge), and with `--tls` HTTPS on the same port
//! ([`tls`]), routes each request ([`route`]) and streams it to the sandbox's daemon
//! ([`proxy`]) over h2c on the daemon's Unix socket ([`upstream`]); unroutable requests get
//! E2B's 502 JSON. A response body that fails mid-way (the sandbox was killed under a running
//! command, or paused: [`upstream::Upstream::cut`]) ends as a transport failure, as at E2B's
//! edge: an HTTP/2 stream is reset, an HTTP/1 connection is dropped with a TCP reset
//! (`Abort`), never closed as if the body were whole but cut short, which clients take for a
//! body that fails to decode.

pub mod api_host;
pub mod proxy;
pub mod route;
pub mod tls;
pub mod upstream;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::registry::{Phase, Registry};

/// Accepts connections on `listener` until `shutdown` resolves, then aborts every open
/// connection (their sandboxes are being killed anyway). With `tls`, a connection whose first
/// byte is a TLS handshake's is served over TLS; with `api`, requests for its host go to the
/// API ([`api_host`]). Runs on the caller's tokio runtime.
pub async fn serve(
    listener: TcpListener,
    registry: Arc<Registry>,
    tls: Option<tls::FrontTls>,
    api: Option<api_host::ApiHost>,
    shutdown: impl Future<Output = ()>,
) {
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let _ = stream.set_nodelay(true);
                    let registry = registry.clone();
                    let tls = tls.clone();
                    let api = api.clone();
                    connections.spawn(async move {
                        /// A TLS record of type handshake.
                        const HANDSHAKE: u8 = 0x16;
                        let mut first = [0u8; 1];
                        let is_tls = tls.is_some()
                            && matches!(stream.peek(&mut first).await, Ok(1) if first[0] == HANDSHAKE);
                        let abort = Abort::default();
                        let stream = Resettable { stream, abort: abort.clone() };
                        match tls {
                            Some(tls) if is_tls => match tls.acceptor.accept(stream).await {
                                Ok(stream) => serve_connection(stream, registry, api, true, abort).await,
                                Err(err) => tracing::debug!("front TLS handshake: {err}"),
                            },
                            _ => serve_connection(stream, registry, api, false, abort).await,
                        }
                    });
                }
                Err(err) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    tracing::warn!("front accept failed: {err}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.abort_all();
}

/// Serves one client connection (plain or, with `tls`, TLS) until it ends; `abort` is the flag
/// of its [`Resettable`] TCP stream.
async fn serve_connection<S>(
    stream: S,
    registry: Arc<Registry>,
    api: Option<api_host::ApiHost>,
    tls: bool,
    abort: Abort,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request: http::Request<Incoming>| {
        let registry = registry.clone();
        let api = api.clone().filter(|api| api.serves(&request));
        // HTTP/2 resets the one stream whose body failed; HTTP/1 can only drop the connection.
        let abort = (request.version() < http::Version::HTTP_2).then(|| abort.clone());
        async move {
            Ok::<_, Infallible>(match api {
                Some(api) => api.call(request, tls).await,
                None => handle(&registry, request, abort).await,
            })
        }
    });
    // envd's receive windows (the front relays uploads to it); with upgrades: a sandbox
    // server's WebSocket goes through.
    if let Err(err) = e2b_local_envd::connection_builder()
        .serve_connection_with_upgrades(TokioIo::new(stream), service)
        .await
    {
        tracing::debug!("front connection ended: {err}");
    }
}

async fn handle(
    registry: &Registry,
    request: http::Request<Incoming>,
    abort: Option<Abort>,
) -> http::Response<proxy::FrontBody> {
    let (parts, body) = request.into_parts();
    let (sandbox, port) = match route::resolve(&parts, registry) {
        Ok(routed) => routed,
        Err(unroutable) => return proxy::unroutable(&unroutable),
    };
    // Before anything else: a request a private sandbox refuses does not resume it.
    if let Some(refused) = proxy::traffic_refused(&sandbox, port, &parts.headers) {
        return refused;
    }
    if matches!(sandbox.phase(), Phase::Paused { .. }) {
        // autoResume: traffic to a paused sandbox resumes it with its create-time timeout.
        if let Err(err) = registry.connect(&sandbox.id, sandbox.timeout, true).await {
            tracing::warn!(sandbox = %sandbox.id, "auto-resume failed: {}", err.message);
            return proxy::unroutable(&route::Unroutable::not_found(&sandbox.id));
        }
    }
    // The signal first, then the phase: a pause sets the phase before it cuts, so this request
    // either sees the pause here or is cut by it.
    let cut = sandbox.upstream.cut_signal();
    if !matches!(sandbox.phase(), Phase::Running { .. }) {
        return proxy::unroutable(&route::Unroutable::not_found(&sandbox.id));
    }
    let request = http::Request::from_parts(parts, body);
    let exchange = async {
        if port == route::ENVD_PORT {
            proxy::forward(&sandbox, request).await
        } else {
            proxy::forward_to_port(&sandbox, port, request).await
        }
    };
    let response = tokio::select! {
        response = exchange => response,
        () = cut.cancelled() => {
            tracing::debug!(sandbox = %sandbox.id, "request cut by a pause before its answer");
            return proxy::unroutable(&route::Unroutable::not_found(&sandbox.id));
        }
    };
    response.map(|body| {
        Guarded {
            body,
            cut: Box::pin(cut.cancelled_owned()),
            abort,
        }
        .boxed()
    })
}

/// A relayed response body that ends as a transport failure when the exchange is cut (the
/// sandbox was paused) or the upstream fails mid-way: an error hyper turns into a stream reset
/// on HTTP/2, and, with `abort` set, a connection reset on HTTP/1 ([`Abort`]).
struct Guarded {
    body: proxy::FrontBody,
    cut: Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
    abort: Option<Abort>,
}

impl hyper::body::Body for Guarded {
    type Data = bytes::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let failed = if self.cut.as_mut().poll(cx).is_ready() {
            "the sandbox was paused while its answer was in flight".into()
        } else {
            match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Ready(Some(Err(err))) => err,
                other => return other,
            }
        };
        if let Some(abort) = &self.abort {
            abort.set();
        }
        Poll::Ready(Some(Err(failed)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Set when a response body relayed on an HTTP/1 connection failed mid-way ([`Guarded`]): the
/// connection's [`Resettable`] stream is then reset when hyper drops it, so the client reads a
/// connection reset (a transport failure the SDKs probe the sandbox's health on) rather than an
/// early end.
#[derive(Debug, Clone, Default)]
struct Abort(Arc<AtomicBool>);

impl Abort {
    /// Marks the connection for a reset when it is dropped.
    fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A client's TCP connection that is reset (`SO_LINGER` 0, so close sends RST), not closed, when
/// dropped after its [`Abort`] was set.
struct Resettable {
    stream: TcpStream,
    abort: Abort,
}

impl Drop for Resettable {
    fn drop(&mut self) {
        if self.abort.is_set()
            && let Err(err) = self.stream.set_zero_linger()
        {
            tracing::debug!("front: cannot reset an aborted connection: {err}");
        }
    }
}

impl AsyncRead for Resettable {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Resettable {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
