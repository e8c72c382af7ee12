//! The envd front: one TCP port for every sandbox's envd (and the servers in sandboxes).
//! Accepts HTTP/1.1 and h2c (prior knowledge), and with `--tls` HTTPS on the same port
//! ([`tls`]), routes each request ([`route`]) and streams it to the sandbox's daemon
//! ([`proxy`]) over h2c on the daemon's Unix socket ([`upstream`]); unroutable requests get
//! E2B's 502 JSON.

pub mod proxy;
pub mod route;
pub mod tls;
pub mod upstream;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::registry::{Phase, Registry};

/// Accepts connections on `listener` until `shutdown` resolves, then aborts every open
/// connection (their sandboxes are being killed anyway). With `tls`, a connection whose first
/// byte is a TLS handshake's is served over TLS. Runs on the caller's tokio runtime.
pub async fn serve(
    listener: TcpListener,
    registry: Arc<Registry>,
    tls: Option<tls::FrontTls>,
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
                    connections.spawn(async move {
                        /// A TLS record of type handshake.
                        const HANDSHAKE: u8 = 0x16;
                        let mut first = [0u8; 1];
                        match tls {
                            Some(tls) if matches!(stream.peek(&mut first).await, Ok(1) if first[0] == HANDSHAKE) => {
                                match tls.acceptor.accept(stream).await {
                                    Ok(stream) => serve_connection(stream, registry).await,
                                    Err(err) => tracing::debug!("front TLS handshake: {err}"),
                                }
                            }
                            _ => serve_connection(stream, registry).await,
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

/// Serves one client connection (plain or TLS) until it ends.
async fn serve_connection<S>(stream: S, registry: Arc<Registry>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request: http::Request<Incoming>| {
        let registry = registry.clone();
        async move { Ok::<_, Infallible>(handle(&registry, request).await) }
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
) -> http::Response<proxy::FrontBody> {
    let (parts, body) = request.into_parts();
    let (sandbox, port) = match route::resolve(&parts, registry) {
        Ok(routed) => routed,
        Err(unroutable) => return proxy::unroutable(&unroutable),
    };
    if matches!(sandbox.phase(), Phase::Paused { .. }) {
        // autoResume: traffic to a paused sandbox resumes it with its create-time timeout.
        if let Err(err) = registry.connect(&sandbox.id, sandbox.timeout, true).await {
            tracing::warn!(sandbox = %sandbox.id, "auto-resume failed: {}", err.message);
            return proxy::unroutable(&route::Unroutable::not_found(&sandbox.id));
        }
    }
    let request = http::Request::from_parts(parts, body);
    if port == route::ENVD_PORT {
        proxy::forward(&sandbox, request).await
    } else {
        proxy::forward_to_port(&sandbox, port, request).await
    }
}
