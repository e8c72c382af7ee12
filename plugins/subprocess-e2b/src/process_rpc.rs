//! envd's unary process RPCs (`SendInput`, `CloseStdin`, `SendSignal`,
//! `Update`), called through the generated `connectrpc` client over the
//! provider's transport, failing with `e2b_client` errors.
//!
//! Why not `e2b_client::Envd`'s own methods for these: rustc cannot prove
//! their futures `Send` (its private unary helper is generic over a
//! `'static` message view whose lifetime the async state machine erases —
//! "implementation of `MessageView` is not general enough"), and every
//! seam method and provider task needs `Send`. Its streaming calls
//! (`start`, `connect_process`) and `/files` uploads are not affected and
//! are used as they are. Once `e2b-client` builds the owned message inside
//! each call's future, this module can go.

use std::time::Duration;

use bytes::Bytes;
use connectrpc::client::{CallOptions, ClientConfig, UnaryResponse};
use connectrpc::{ConnectError, ErrorCode};
use e2b_client::{Context, Error, PtySize, Selector, Signal};
use envd_proto::process as pb;
use envd_proto::process::ProcessClient;

use crate::transport::EnvdTransport;

/// Bound of the quick calls (`CloseStdin`, `SendSignal`, `Update`).
const QUICK: Duration = Duration::from_secs(60);

/// Input for a process.
#[derive(Debug, Clone)]
pub enum Input {
    Stdin(Bytes),
    Pty(Bytes),
}

/// The unary process calls of one sandbox's envd.
pub struct ProcessRpc<T> {
    client: ProcessClient<T>,
}

impl<T: Clone> Clone for ProcessRpc<T> {
    fn clone(&self) -> Self {
        ProcessRpc {
            client: self.client.clone(),
        }
    }
}

fn selector(selector: &Selector) -> pb::ProcessSelector {
    use envd_proto::process::__buffa::oneof::process_selector::Selector as S;
    pb::ProcessSelector {
        selector: Some(match selector {
            Selector::Pid(pid) => S::Pid(*pid),
            Selector::Tag(tag) => S::Tag(tag.clone()),
        }),
        ..Default::default()
    }
}

impl<T: EnvdTransport> ProcessRpc<T> {
    /// Calls through `transport` (path-only request URIs, as `Envd`'s
    /// transports take), in binary protobuf.
    pub fn new(transport: T) -> ProcessRpc<T> {
        let config = ClientConfig::new(http::Uri::from_static("/")).proto();
        ProcessRpc {
            client: ProcessClient::new(transport, config),
        }
    }

    /// `SendInput`: writes `input` to the process's stdin pipe or PTY.
    /// Without a bound: envd answers once the bytes are in the pipe, which
    /// takes as long as the reader makes it.
    pub async fn send_input(&self, pid: u32, input: Input) -> Result<(), Error> {
        use envd_proto::process::__buffa::oneof::process_input::Input as I;
        let context = Context::new("send input to process", format!("pid {pid}"));
        let request = pb::SendInputRequest {
            process: buffa::MessageField::some(selector(&Selector::Pid(pid))),
            input: buffa::MessageField::some(pb::ProcessInput {
                input: Some(match input {
                    Input::Stdin(bytes) => I::Stdin(bytes.to_vec()),
                    Input::Pty(bytes) => I::Pty(bytes.to_vec()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.client
            .send_input_with_options(request, CallOptions::default())
            .await
            .map(UnaryResponse::into_owned)
            .map(drop)
            .map_err(|err| classify(context, &err))
    }

    /// `CloseStdin`: the process reads end of file (a no-op when closed).
    pub async fn close_stdin(&self, pid: u32) -> Result<(), Error> {
        let context = Context::new("close stdin of process", format!("pid {pid}"));
        let request = pb::CloseStdinRequest {
            process: buffa::MessageField::some(selector(&Selector::Pid(pid))),
            ..Default::default()
        };
        self.client
            .close_stdin_with_options(request, CallOptions::default().with_timeout(QUICK))
            .await
            .map(UnaryResponse::into_owned)
            .map(drop)
            .map_err(|err| classify(context, &err))
    }

    /// `SendSignal`: SIGTERM or SIGKILL to the process envd started (not
    /// its group).
    pub async fn send_signal(&self, target: Selector, signal: Signal) -> Result<(), Error> {
        let context = Context::new("signal process", target.to_string());
        let request = pb::SendSignalRequest {
            process: buffa::MessageField::some(selector(&target)),
            signal: match signal {
                Signal::Term => pb::Signal::SIGNAL_SIGTERM,
                Signal::Kill => pb::Signal::SIGNAL_SIGKILL,
            }
            .into(),
            ..Default::default()
        };
        self.client
            .send_signal_with_options(request, CallOptions::default().with_timeout(QUICK))
            .await
            .map(UnaryResponse::into_owned)
            .map(drop)
            .map_err(|err| classify(context, &err))
    }

    /// `Update`: resizes the process's PTY.
    pub async fn resize(&self, pid: u32, size: PtySize) -> Result<(), Error> {
        let context = Context::new("resize PTY of process", format!("pid {pid}"));
        let request = pb::UpdateRequest {
            process: buffa::MessageField::some(selector(&Selector::Pid(pid))),
            pty: buffa::MessageField::some(pb::PTY {
                size: buffa::MessageField::some(pb::pty::Size {
                    cols: size.cols,
                    rows: size.rows,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.client
            .update_with_options(request, CallOptions::default().with_timeout(QUICK))
            .await
            .map(UnaryResponse::into_owned)
            .map(drop)
            .map_err(|err| classify(context, &err))
    }
}

/// The `e2b_client` class of a Connect failure of a unary call: the code
/// names it, and `unavailable` (a failure below the Connect layer, or the
/// edge's answer for a gone sandbox) is a transport failure, for which the
/// provider asks whether the sandbox still exists.
fn classify(context: Context, err: &ConnectError) -> Error {
    let message = err.message.clone().unwrap_or_default();
    match err.code {
        ErrorCode::NotFound => Error::NotFound { context, message },
        ErrorCode::InvalidArgument => Error::InvalidArgument { context, message },
        ErrorCode::DeadlineExceeded => Error::Timeout { context, message },
        ErrorCode::PermissionDenied => Error::PermissionDenied { context, message },
        ErrorCode::Unauthenticated => Error::Authentication { context, message },
        ErrorCode::Unavailable => Error::Transport {
            context,
            message,
            source: err.source_arc(),
        },
        code => Error::Rpc {
            context,
            code,
            message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_the_classes_the_provider_acts_on() {
        let context = || Context::new("send input to process", "pid 7");
        assert!(
            classify(
                context(),
                &ConnectError::not_found("process with pid 7 not found")
            )
            .is_not_found()
        );
        assert!(classify(context(), &ConnectError::unavailable("gone")).is_unavailable());
        let internal = classify(
            context(),
            &ConnectError::internal("stdin not enabled or closed"),
        );
        assert!(matches!(
            internal,
            Error::Rpc {
                code: ErrorCode::Internal,
                ..
            }
        ));
        assert!(
            internal
                .to_string()
                .starts_with("send input to process pid 7: ")
        );
    }
}
