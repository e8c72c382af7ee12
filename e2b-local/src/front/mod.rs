//! The envd front: one TCP port for every sandbox's envd. Accepts HTTP/1.1 and h2c (prior
//! knowledge), routes each request ([`route`]) and streams it to the sandbox's daemon
//! ([`proxy`]) over h2c on the daemon's Unix socket ([`upstream`]); unroutable requests get
//! E2B's 502 JSON.

pub mod proxy;
pub mod route;
pub mod upstream;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use e2b_local_envd::{RECEIVE_CONNECTION_WINDOW, RECEIVE_STREAM_WINDOW};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::registry::{Phase, Registry};

/// Accepts connections on `listener` until `shutdown` resolves, then aborts every open
/// connection (their sandboxes are being killed anyway). Runs on the caller's tokio runtime.
pub async fn serve(
    listener: TcpListener,
    registry: Arc<Registry>,
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
                    connections.spawn(async move {
                        let service = service_fn(move |request: http::Request<Incoming>| {
                            let registry = registry.clone();
                            async move { Ok::<_, Infallible>(handle(&registry, request).await) }
                        });
                        let mut builder = auto::Builder::new(TokioExecutor::new());
                        builder
                            .http2()
                            .initial_stream_window_size(RECEIVE_STREAM_WINDOW)
                            .initial_connection_window_size(RECEIVE_CONNECTION_WINDOW);
                        // With upgrades: a sandbox server's WebSocket goes through.
                        if let Err(err) = builder
                            .serve_connection_with_upgrades(TokioIo::new(stream), service)
                            .await
                        {
                            tracing::debug!("front connection ended: {err}");
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
