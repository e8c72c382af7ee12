//! [`StdinWriter`]: one writer of a process's stdin pipe, its bytes on one
//! long-lived client-streaming `StreamInput` request, or — on an envd
//! without it — one `SendInput` per piece (docs/e2b-protocol.md §5.4).
//!
//! A piece written on the stream is a message on a request already open
//! rather than an HTTP exchange of its own (0.03 ms against 0.4 ms through a
//! relayed transport). envd writes each message into the pipe before
//! reading the next, so a process that does not read stops the stream, and
//! the writer, once the few buffers between fill (backpressure). envd
//! answers only when the request ends, so a piece it could not deliver is
//! learnt at the next write.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use connectrpc::ErrorCode;
use connectrpc::client::ClientTransport;
use futures::SinkExt;
use futures::channel::{mpsc, oneshot};
use futures::future::BoxFuture;
use http_body::Body;

use super::Envd;
use super::options::CallOptions;
use super::process::ProcessInput;
use crate::error::{Error, Result};

/// Largest single message (a `SendInput`, or a `StreamInput` data event).
const PIECE: usize = 1 << 20;

/// Bound on finding out whether envd serves `StreamInput`.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// How a process's stdin reaches envd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputRoute {
    /// One `StreamInput` per writer.
    Stream,
    /// One `SendInput` per piece (an envd without `StreamInput`).
    Unary,
}

/// The [`InputRoute`] of one envd, asked at most once successfully
/// ([`Envd::input_route`]); a failed probe is not remembered.
#[derive(Debug, Default)]
pub struct InputRouteCell(tokio::sync::OnceCell<InputRoute>);

impl InputRouteCell {
    /// An empty cell.
    pub fn new() -> Self {
        InputRouteCell::default()
    }

    /// The route, probed through `pid` (a process whose stdin is open) the
    /// first time.
    ///
    /// # Errors
    /// As [`Envd::input_route`].
    pub async fn get<T>(&self, envd: &Envd<T>, pid: u32) -> Result<InputRoute>
    where
        T: ClientTransport,
        T::ResponseBody: Unpin,
        <T::ResponseBody as Body>::Error: fmt::Display,
    {
        self.0
            .get_or_try_init(|| envd.input_route(pid))
            .await
            .copied()
    }
}

/// Why a [`StdinWriter`] could not write or close. Cheap to clone: a failed
/// stream fails every later write with the same error.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StdinError {
    /// A `SendInput` failed (the [`InputRoute::Unary`] route).
    #[error("{0}")]
    Send(Arc<Error>),
    /// The writer's `StreamInput` ended with this error (pieces written
    /// before may be lost).
    #[error("its input stream to envd ended: {0}")]
    Stream(Arc<Error>),
    /// envd answered the writer's `StreamInput` before the writer ended it.
    #[error("envd ended its input stream early")]
    EndedEarly,
    /// The stream's request (see [`StdinWriter::new`]) was dropped before
    /// it ended.
    #[error("its input stream to envd was abandoned")]
    Abandoned,
    /// `CloseStdin` failed.
    #[error("{0}")]
    Close(Arc<Error>),
    /// A write after [`StdinWriter::finish`].
    #[error("its input stream was finished")]
    Finished,
}

/// Where the writer's pieces go.
enum Route {
    Stream {
        /// Into the request body; a send resolves once the body took the
        /// piece (the channel holds none).
        pieces: mpsc::Sender<Bytes>,
        /// How the request ended.
        end: oneshot::Receiver<std::result::Result<(), StdinError>>,
    },
    Unary,
    /// The stream ended before the writer finished it.
    Failed {
        error: StdinError,
        reported: bool,
    },
    /// Finished: nothing is written any more.
    Finished,
}

/// The request of a writer's `StreamInput`: whoever creates the writer runs
/// it (spawns it) for as long as it should last. It ends when the writer is
/// finished or dropped, envd ends the request, or the connection breaks,
/// with what the writer learns at its next write ([`StdinError::Stream`]),
/// so that a caller may act on a cut stream before writing again; dropped
/// earlier, it fails the writer with [`StdinError::Abandoned`].
pub type StdinRequest = BoxFuture<'static, std::result::Result<(), StdinError>>;

/// One writer of a process's stdin pipe.
///
/// Contract:
/// - [`StdinWriter::write`] resolves once the whole chunk is on its way
///   (taken by the request body on the stream, written into the pipe by
///   `SendInput` without); chunks arrive in the order written.
/// - A piece envd could not deliver (stdin closed, the process gone, the
///   connection broken) fails the next write and every later one, and
///   [`StdinWriter::finish`] unless a write already reported it. A cut
///   stream is not reopened: bytes written before it may be lost.
/// - [`StdinWriter::close`] ends the stream, waits for envd's answer (every
///   earlier chunk written into the pipe), then closes the pipe.
/// - Dropping the writer ends the stream without closing the pipe.
pub struct StdinWriter<T> {
    envd: Envd<T>,
    pid: u32,
    route: Route,
}

impl<T> StdinWriter<T>
where
    T: ClientTransport + Clone + Send + Sync + 'static,
    T::ResponseBody: Unpin + Send,
    <T::ResponseBody as Body>::Error: fmt::Display,
{
    /// A writer of `pid`'s stdin by `route` (usually from
    /// [`InputRouteCell::get`]); with [`InputRoute::Stream`] also the
    /// stream's request, which the caller must run (e.g. spawn) — nothing is
    /// sent before it does.
    pub fn new(envd: Envd<T>, pid: u32, route: InputRoute) -> (Self, Option<StdinRequest>) {
        match route {
            InputRoute::Unary => (
                StdinWriter {
                    envd,
                    pid,
                    route: Route::Unary,
                },
                None,
            ),
            InputRoute::Stream => {
                let (pieces, queued) = mpsc::channel::<Bytes>(0);
                let (done, end) = oneshot::channel();
                let stream = envd.clone();
                let request = Box::pin(async move {
                    let input = futures::StreamExt::map(queued, ProcessInput::Stdin);
                    // No bound (`stream_input`'s default): the stream lasts
                    // as long as the writer.
                    let ended = stream
                        .stream_input(pid, input, &CallOptions::default())
                        .await
                        .map_err(|err| StdinError::Stream(Arc::new(err)));
                    let _ = done.send(ended.clone());
                    ended
                });
                let writer = StdinWriter {
                    envd,
                    pid,
                    route: Route::Stream { pieces, end },
                };
                (writer, Some(request))
            }
        }
    }

    /// The process whose stdin this writes.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The envd it writes to.
    pub fn envd(&self) -> &Envd<T> {
        &self.envd
    }

    /// Writes `chunk` (in pieces of at most 1 MiB), resolving once all of it
    /// is on its way. Dropping the future may leave a chunk partly sent.
    ///
    /// # Errors
    /// An earlier piece that was not delivered, or this one on the unary
    /// route; [`StdinError::Send`] with [`Error::NotFound`] once the process
    /// is gone, `internal` (as [`Error::Rpc`]) once its stdin is closed.
    pub async fn write(&mut self, chunk: Bytes) -> std::result::Result<(), StdinError> {
        let mut at = 0;
        while at < chunk.len() {
            let end = (at + PIECE).min(chunk.len());
            let piece = chunk.slice(at..end);
            match &mut self.route {
                Route::Stream { pieces, .. } => {
                    if pieces.send(piece).await.is_err() {
                        // The request ended under the writer: learn why.
                        let error = match self.end_stream().await {
                            Err(err) => err,
                            Ok(()) => StdinError::EndedEarly,
                        };
                        self.route = Route::Failed {
                            error: error.clone(),
                            reported: true,
                        };
                        return Err(error);
                    }
                }
                Route::Unary => {
                    // Unbounded: a process that does not read may keep the
                    // write waiting as long as it likes.
                    let unbounded = CallOptions::default().no_timeout();
                    self.envd
                        .send_stdin(self.pid, piece, &unbounded)
                        .await
                        .map_err(|err| StdinError::Send(Arc::new(err)))?;
                }
                Route::Failed { error, reported } => {
                    *reported = true;
                    return Err(error.clone());
                }
                Route::Finished => return Err(StdinError::Finished),
            }
            at = end;
        }
        Ok(())
    }

    /// Ends the stream and waits for envd's answer: `Ok` once every chunk
    /// was written into the pipe (which a process that does not read can
    /// delay). Idempotent; the pipe stays open.
    ///
    /// # Errors
    /// A chunk that was not delivered, unless a write already reported it.
    pub async fn finish(&mut self) -> std::result::Result<(), StdinError> {
        match std::mem::replace(&mut self.route, Route::Finished) {
            route @ Route::Stream { .. } => {
                self.route = route;
                self.end_stream().await
            }
            Route::Failed {
                error,
                reported: false,
            } => Err(error),
            Route::Unary | Route::Failed { .. } | Route::Finished => Ok(()),
        }
    }

    /// [`StdinWriter::finish`], then `CloseStdin`: the process reads end of
    /// file. The pipe is closed whether or not every chunk was delivered; a
    /// process already gone (or its sandbox) counts as closed.
    ///
    /// # Errors
    /// The delivery failure first (it is the older news), else
    /// [`StdinError::Close`].
    pub async fn close(&mut self) -> std::result::Result<(), StdinError> {
        let delivered = self.finish().await;
        let closing = match self
            .envd
            .close_stdin(self.pid, &CallOptions::default())
            .await
        {
            Ok(()) => Ok(()),
            Err(err) if err.is_not_found() || err.is_sandbox_gone() => Ok(()),
            Err(err) => Err(StdinError::Close(Arc::new(err))),
        };
        delivered.and(closing)
    }

    /// Ends the request body and waits for the request's end.
    async fn end_stream(&mut self) -> std::result::Result<(), StdinError> {
        let Route::Stream { end, .. } = std::mem::replace(&mut self.route, Route::Finished) else {
            return Ok(());
        };
        end.await.unwrap_or(Err(StdinError::Abandoned))
    }
}

impl<T> Envd<T>
where
    T: ClientTransport,
    T::ResponseBody: Unpin,
    <T::ResponseBody as Body>::Error: fmt::Display,
{
    /// Asks envd whether it serves `StreamInput`: one such request selecting
    /// `pid` and carrying no data, which writes nothing. Any answer but
    /// `unimplemented` means it does (`not_found` too: the process just
    /// exited). Bounded by 30 s. [`InputRouteCell`] remembers the answer.
    ///
    /// # Errors
    /// Any other failure of the request (a gone sandbox, a transport
    /// failure).
    pub async fn input_route(&self, pid: u32) -> Result<InputRoute> {
        let options = CallOptions::default().timeout(PROBE_TIMEOUT);
        match self
            .stream_input(pid, futures::stream::empty(), &options)
            .await
        {
            Ok(()) => Ok(InputRoute::Stream),
            Err(Error::Rpc {
                code: ErrorCode::Unimplemented,
                ..
            }) => Ok(InputRoute::Unary),
            Err(err) if err.is_not_found() => Ok(InputRoute::Stream),
            Err(err) => Err(err),
        }
    }
}
