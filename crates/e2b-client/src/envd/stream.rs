//! What the three server streams (`Start`, `Connect`, `WatchDir`) share:
//! turning a connectrpc `ServerStream` into items, and the handshake that
//! waits for the first event.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use connectrpc::client::ServerStream;
use connectrpc::{ConnectError, HasMessageView, JsonDeserialize, StreamMessage};
use futures::StreamExt;
use futures::stream::BoxStream;
use http_body::Body;

use crate::classify::{self, Stage};
use crate::error::{Context, Error, Result};

/// Why a raw stream stopped: the RPC failed, or a message did not make sense.
#[derive(Debug)]
pub(crate) enum Fault {
    Rpc(ConnectError),
    Decode(String),
}

impl Fault {
    pub(crate) fn into_error(self, context: Context, sandbox_id: &str, stage: Stage) -> Error {
        match self {
            Fault::Rpc(err) => classify::from_connect(context, sandbox_id, &err, stage),
            Fault::Decode(message) => Error::protocol(context, message),
        }
    }
}

/// Decoded stream items, ending after the first fault.
pub(crate) type RawStream<E> = BoxStream<'static, Result<E, Fault>>;

/// Items that may be keepalives, which the handshake skips.
pub(crate) trait StreamItem {
    fn is_keepalive(&self) -> bool;
}

/// Decodes every message of `stream` with `convert`. The stream ends after
/// a clean end-of-stream or after yielding one fault. Dropping it drops the
/// response body, which aborts the request.
pub(crate) fn raw_stream<B, V, M, E>(
    stream: ServerStream<B, V>,
    convert: fn(&StreamMessage<M>) -> Result<E, String>,
) -> RawStream<E>
where
    B: Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Display,
    V: buffa::MessageView<'static, Owned = M> + Send + 'static,
    M: HasMessageView<View<'static> = V> + buffa::Message + JsonDeserialize + Send + 'static,
    E: Send + 'static,
{
    futures::stream::unfold(Some(stream), move |state| async move {
        let mut stream = state?;
        match stream.message().await {
            Ok(Some(message)) => match convert(&message) {
                Ok(item) => Some((Ok(item), Some(stream))),
                Err(reason) => Some((Err(Fault::Decode(reason)), None)),
            },
            Ok(None) => None,
            Err(err) => Some((Err(Fault::Rpc(err)), None)),
        }
    })
    .boxed()
}

/// Starts a stream and waits for its first non-keepalive item, all within
/// `timeout`. Failures before that item are classified as handshake
/// failures (`unavailable` there means the sandbox is gone).
///
/// Dropping the future (or the timeout firing) drops the request.
pub(crate) async fn handshake<E, F>(
    context: &Context,
    sandbox_id: &str,
    timeout: Option<Duration>,
    call: F,
) -> Result<(E, RawStream<E>)>
where
    E: StreamItem,
    F: Future<Output = std::result::Result<RawStream<E>, ConnectError>>,
{
    let wait = async {
        let mut raw = call.await.map_err(|err| {
            classify::from_connect(context.clone(), sandbox_id, &err, Stage::Handshake)
        })?;
        loop {
            match raw.next().await {
                Some(Ok(item)) if item.is_keepalive() => continue,
                Some(Ok(item)) => return Ok((item, raw)),
                Some(Err(fault)) => {
                    return Err(fault.into_error(context.clone(), sandbox_id, Stage::Handshake));
                }
                None => {
                    return Err(Error::protocol(
                        context.clone(),
                        "the stream ended before its first event",
                    ));
                }
            }
        }
    };
    match timeout {
        Some(limit) => tokio::time::timeout(limit, wait).await.map_err(|_| {
            Error::timeout(
                context.clone(),
                format!("no first event within {} ms", limit.as_millis()),
            )
        })?,
        None => wait.await,
    }
}
