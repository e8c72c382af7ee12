//! The owner's transport, watched and bent for stdin tests: it counts the
//! requests of each envd procedure, can play an envd without `StreamInput`
//! (HTTP 404, what envd's router answers for a procedure it does not
//! serve), and can cut every `StreamInput` in flight as a reset connection
//! would.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use connectrpc::ConnectError;
use connectrpc::client::{BoxFuture, ClientBody, ClientTransport};
use dsh_e2b_gateway::{OwnerTransport, RelayedBody, envd_options};
use dsh_plugin_api::owner::Owner;
use dsh_subprocess_e2b::{Config, E2bSubprocess, OwnerLiveness};
use e2b_client::Envd;
use http::{Request, Response, StatusCode};
use http_body_util::{Either, Full};
use tokio::sync::watch;

use super::World;

pub const STREAM_INPUT: &str = "/process.Process/StreamInput";
pub const SEND_INPUT: &str = "/process.Process/SendInput";

#[derive(Clone)]
pub struct Wire {
    inner: OwnerTransport,
    /// Answer `StreamInput` with 404 (an envd older than it).
    without_stream_input: bool,
    counts: Arc<Mutex<BTreeMap<String, usize>>>,
    cuts: Arc<watch::Sender<u64>>,
}

impl Wire {
    /// The owner's transport of `world`; `without_stream_input` plays an
    /// envd that does not serve `StreamInput`.
    pub fn new(world: &World, without_stream_input: bool) -> Wire {
        Wire {
            inner: OwnerTransport::new(world.owner.clone()),
            without_stream_input,
            counts: Arc::default(),
            cuts: Arc::new(watch::channel(0).0),
        }
    }

    /// A provider sending through this transport, with a short kill grace.
    pub fn provider(&self, world: &World) -> E2bSubprocess<Wire> {
        let info = world.owner.info();
        E2bSubprocess::new(
            Envd::new(self.clone(), envd_options(&info)),
            &info,
            Arc::new(OwnerLiveness::new(world.owner.clone())),
            &Config {
                kill_grace_ms: Some(300),
                ..Config::default()
            },
        )
        .expect("provider")
    }

    /// Requests sent so far to the procedure at `path`.
    pub fn count(&self, path: &str) -> usize {
        self.counts
            .lock()
            .unwrap()
            .get(path)
            .copied()
            .unwrap_or_default()
    }

    /// Fails every `StreamInput` in flight as a reset connection does
    /// (the request is aborted in the owner); later ones are left alone.
    pub fn cut_input_streams(&self) {
        self.cuts.send_modify(|epoch| *epoch += 1);
    }
}

impl ClientTransport for Wire {
    type ResponseBody = Either<RelayedBody, Full<Bytes>>;
    type Error = ConnectError;

    fn send(
        &self,
        request: Request<ClientBody>,
    ) -> BoxFuture<'static, Result<Response<Self::ResponseBody>, ConnectError>> {
        let path = request.uri().path().to_owned();
        *self.counts.lock().unwrap().entry(path.clone()).or_default() += 1;
        if path == STREAM_INPUT && self.without_stream_input {
            return Box::pin(async {
                let mut refused = Response::new(Either::Right(Full::new(Bytes::from_static(
                    b"404 page not found\n",
                ))));
                *refused.status_mut() = StatusCode::NOT_FOUND;
                Ok(refused)
            });
        }
        let sent = self.inner.send(request);
        let mut cuts = self.cuts.subscribe();
        let start = *cuts.borrow();
        Box::pin(async move {
            let response = if path == STREAM_INPUT {
                tokio::select! {
                    response = sent => response?,
                    _ = cuts.wait_for(|now| *now > start) => {
                        return Err(ConnectError::unavailable("connection reset (test)"));
                    }
                }
            } else {
                sent.await?
            };
            Ok(response.map(Either::Left))
        })
    }
}
