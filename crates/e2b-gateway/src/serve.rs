//! The owner side: [`EnvdGateway`] serves the generic [`DaemonRequest`]s of
//! the `e2b` owner service through the sandbox's transport.

use std::fmt::Display;
use std::sync::Arc;

use bytes::BytesMut;
use connectrpc::client::ClientTransport;
use connectrpc::{ConnectError, ErrorCode};
use dsh_plugin_api::owner::{DaemonRequest, DaemonResponse};
use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::{Error, Result};
use e2b_client::{Sandbox, SandboxTransport};
use futures::StreamExt;
use http::{Method, Request, StatusCode, Uri};
use http_body::Body;
use http_body_util::BodyExt;

use crate::bodies::{SourceFailure, StreamRequestBody};
use crate::gone::gone_error;
use crate::headers;
use crate::liveness::{ControlPlaneLiveness, Liveness, Presence, bounded_presence};

/// How much of the edge proxy's 502 body goes into the message.
const EDGE_BODY_LIMIT: usize = 4096;

/// Serves envd requests for one sandbox: adds nothing itself (the transport
/// adds routing and credentials) and buffers nothing (request and response
/// bodies stream through, one chunk in flight).
///
/// Failures, as the `Owner::envd` contract has them:
/// - the edge proxy's 502 (the sandbox is not running) is an
///   [`ErrorKind::Unavailable`](dsh_plugin_api::ErrorKind::Unavailable)
///   error about the sandbox;
/// - a transport failure (refused, reset, TLS, a body that breaks off) is
///   `Unavailable` too when the control plane then says the sandbox is gone
///   or paused, and [`ErrorKind::Io`](dsh_plugin_api::ErrorKind::Io)
///   otherwise (the sandbox still runs, or nobody can say) — asked within
///   [`crate::LIVENESS_TIMEOUT`];
/// - a malformed request (method, path, headers, or a header only the owner
///   may set) is `InvalidInput`, and nothing is sent;
/// - a failure of the request body's own stream keeps that stream's kind;
/// - every other HTTP status is a response, for the caller to classify.
///
/// Cheap to clone. Runs on the tokio runtime that polls it, which must be
/// the one the transport's HTTP stack belongs to (in dsh: the owner's).
pub struct EnvdGateway<T = SandboxTransport> {
    transport: T,
    sandbox_id: Arc<str>,
    liveness: Arc<dyn Liveness>,
}

impl<T: Clone> Clone for EnvdGateway<T> {
    fn clone(&self) -> Self {
        EnvdGateway {
            transport: self.transport.clone(),
            sandbox_id: Arc::clone(&self.sandbox_id),
            liveness: Arc::clone(&self.liveness),
        }
    }
}

impl<T> std::fmt::Debug for EnvdGateway<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvdGateway")
            .field("sandbox_id", &self.sandbox_id)
            .finish_non_exhaustive()
    }
}

impl EnvdGateway<SandboxTransport> {
    /// The gateway of `sandbox`: its transport, and its control plane as
    /// the judge of whether it is gone.
    pub fn for_sandbox(sandbox: &Sandbox) -> Self {
        EnvdGateway::new(
            sandbox.transport().clone(),
            sandbox.id(),
            Arc::new(ControlPlaneLiveness::new(
                sandbox.api().clone(),
                sandbox.id(),
            )),
        )
    }
}

impl<T> EnvdGateway<T>
where
    T: ClientTransport,
    T::ResponseBody: Unpin,
    <T::ResponseBody as Body>::Error: Display,
{
    /// A gateway sending through `transport` (which must route to
    /// `sandbox_id` and add its credentials), asking `liveness` when a
    /// transport failure alone cannot say whether the sandbox is gone.
    pub fn new(transport: T, sandbox_id: impl Into<String>, liveness: Arc<dyn Liveness>) -> Self {
        EnvdGateway {
            transport,
            sandbox_id: Arc::from(sandbox_id.into()),
            liveness,
        }
    }

    /// The sandbox this gateway serves.
    pub fn sandbox_id(&self) -> &str {
        &self.sandbox_id
    }

    /// Sends `request` and returns the response once its head arrived; the
    /// body then streams as it is pulled. See the type docs for failures.
    ///
    /// Dropping the future, or the response body, aborts the request.
    pub async fn serve(&self, request: DaemonRequest) -> Result<DaemonResponse> {
        let call = format!("envd {} {}", request.method, request.path_and_query);
        let invalid = |why: String| Error::invalid_input(format!("{call}: {why}"));
        let method = Method::from_bytes(request.method.as_bytes())
            .map_err(|_| invalid(format!("method {:?} is not valid HTTP", request.method)))?;
        if !request.path_and_query.starts_with('/') {
            return Err(invalid(
                "the target must be a path (starting with '/') without scheme or host".to_owned(),
            ));
        }
        let uri: Uri = request
            .path_and_query
            .parse()
            .map_err(|err| invalid(format!("the path is not a valid URI path: {err}")))?;
        let (headers, content_length) =
            headers::request_from_list(request.headers).map_err(invalid)?;

        let failure = SourceFailure::default();
        let mut outgoing = Request::new(StreamRequestBody::boxed(
            request.body,
            failure.clone(),
            content_length,
        ));
        *outgoing.method_mut() = method;
        *outgoing.uri_mut() = uri;
        *outgoing.headers_mut() = headers;

        let response = match self.transport.send(outgoing).await {
            Ok(response) => response,
            Err(err) => return Err(self.send_failure(&call, &failure, &err).await),
        };
        if response.status() == StatusCode::BAD_GATEWAY {
            let text = edge_body(response.into_body()).await;
            tracing::debug!(sandbox_id = %self.sandbox_id, %call, "the edge proxy answered 502");
            return Err(gone_error(
                &self.sandbox_id,
                &call,
                &format!("the edge proxy answered 502: {text}"),
            ));
        }
        let (parts, body) = response.into_parts();
        Ok(DaemonResponse {
            status: parts.status.as_u16(),
            headers: headers::to_list(&parts.headers),
            body: self.relay(call, body),
        })
    }

    /// Why `send` failed, as an owner error.
    async fn send_failure(&self, call: &str, failure: &SourceFailure, err: &T::Error) -> Error {
        if let Some(source) = failure.get() {
            return source
                .clone()
                .context(format!("{call}: the request body failed"));
        }
        if let Some(connect) = find_connect_error(err)
            && connect.code == ErrorCode::InvalidArgument
        {
            return Error::invalid_input(format!("{call}: {connect}"));
        }
        transport_failure(&*self.liveness, &self.sandbox_id, call, &chain_text(err)).await
    }

    /// The response body as a stream: chunks as they arrive; a read failure
    /// becomes one classified error that ends the stream.
    fn relay(&self, call: String, body: T::ResponseBody) -> ByteStream {
        let liveness = Arc::clone(&self.liveness);
        let sandbox_id = Arc::clone(&self.sandbox_id);
        let call: Arc<str> = Arc::from(call);
        futures::stream::unfold(Some(body), move |state| {
            let liveness = Arc::clone(&liveness);
            let sandbox_id = Arc::clone(&sandbox_id);
            let call = Arc::clone(&call);
            async move {
                let mut body = state?;
                // The body's error is rendered inside the match: its type
                // need not be `Send`, so it must not live across the await
                // below.
                let broke_off = loop {
                    match body.frame().await {
                        None => return None,
                        Some(Ok(frame)) => match frame.into_data() {
                            Ok(data) if data.is_empty() => continue,
                            Ok(data) => return Some((Ok(data), Some(body))),
                            Err(_trailers) => continue,
                        },
                        Some(Err(err)) => break format!("the response body broke off: {err}"),
                    }
                };
                drop(body);
                let err = transport_failure(&*liveness, &sandbox_id, &call, &broke_off).await;
                Some((Err(err), None))
            }
        })
        .boxed()
    }
}

/// `Unavailable` when the control plane says the sandbox is gone, `Io`
/// otherwise.
async fn transport_failure(
    liveness: &dyn Liveness,
    sandbox_id: &str,
    call: &str,
    detail: &str,
) -> Error {
    match bounded_presence(liveness).await {
        Presence::Gone(reason) => gone_error(sandbox_id, call, &format!("{detail}; {reason}")),
        Presence::Running => Error::io(format!(
            "{call}: transport failure: {detail} (sandbox {sandbox_id} still runs)"
        )),
        Presence::Unknown(why) => Error::io(format!(
            "{call}: transport failure: {detail} (whether sandbox {sandbox_id} still exists is \
             unknown: {why})"
        )),
    }
}

/// An error and its sources as one line (`envd request failed: connection
/// refused`), skipping a source whose text its parent already shows.
fn chain_text(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut link = err.source();
    while let Some(current) = link {
        let part = current.to_string();
        if !text.contains(&part) {
            text = format!("{text}: {part}");
        }
        link = current.source();
    }
    text
}

fn find_connect_error<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a ConnectError> {
    let mut link: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(current) = link {
        if let Some(found) = current.downcast_ref::<ConnectError>() {
            return Some(found);
        }
        link = current.source();
    }
    None
}

/// The first [`EDGE_BODY_LIMIT`] bytes of the proxy's answer as text,
/// within [`crate::LIVENESS_TIMEOUT`] (the proxy sends a small complete
/// body; a stalled one must not hold the call).
async fn edge_body<B>(body: B) -> String
where
    B: Body<Data = bytes::Bytes> + Unpin,
{
    let read = async {
        let mut body = body;
        let mut buf = BytesMut::new();
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                let room = EDGE_BODY_LIMIT.saturating_sub(buf.len());
                buf.extend_from_slice(&data[..data.len().min(room)]);
                if buf.len() >= EDGE_BODY_LIMIT {
                    break;
                }
            }
        }
        buf
    };
    let bytes = tokio::time::timeout(crate::LIVENESS_TIMEOUT, read)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim();
    if text.is_empty() {
        "the sandbox was not found".to_owned()
    } else {
        text.to_owned()
    }
}
