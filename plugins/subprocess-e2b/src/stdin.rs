//! The writing end of a command's stdin: envd's pipe to the supervising
//! helper, which the command inherited (docs/design.md §6.3, "Stdin").
//!
//! A writer's chunks travel on one long-lived `StreamInput` request, opened
//! at its first write: a chunk is a message on a request already open
//! rather than a request of its own (a `SendInput` each, as before: a full
//! HTTP exchange through the owner, the edge and envd per chunk, which is
//! what a code runtime's binding reply paid). envd writes each message into
//! the pipe before reading the next, so a command that does not read stops
//! the stream, and the writer, once the few buffers between fill
//! (backpressure). An envd without `StreamInput` (it answers
//! `unimplemented`, found once per provider) gets one `SendInput` per
//! chunk.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use dsh_plugin_api::stream::ByteWriter;
use dsh_plugin_api::{Error, ErrorKind, Result};
use e2b_client::{CallOptions, Envd, ErrorCode, ProcessInput};
use futures::SinkExt;
use futures::channel::{mpsc, oneshot};

use crate::errors;
use crate::transport::EnvdTransport;
use crate::world::World;

/// Largest single message (`SendInput` or `StreamInput` data event).
const PIECE: usize = 1 << 20;

/// Bound on finding out whether envd serves `StreamInput`.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// How stdin reaches envd in one sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputRoute {
    /// One `StreamInput` per writer.
    Stream,
    /// One `SendInput` per piece (an envd without `StreamInput`).
    Unary,
}

impl InputRoute {
    /// Asks envd once: a `StreamInput` selecting `helper` and carrying no
    /// data writes nothing. Any answer but `unimplemented` means the route
    /// exists (`not_found` too: the helper just exited).
    pub async fn probe<T: EnvdTransport>(
        envd: &Envd<T>,
        helper: u32,
    ) -> std::result::Result<InputRoute, e2b_client::Error> {
        let options = CallOptions::default().timeout(PROBE_TIMEOUT);
        match envd
            .stream_input(helper, futures::stream::empty(), &options)
            .await
        {
            Ok(()) => Ok(InputRoute::Stream),
            Err(e2b_client::Error::Rpc {
                code: ErrorCode::Unimplemented,
                ..
            }) => Ok(InputRoute::Unary),
            Err(err) if err.is_not_found() => Ok(InputRoute::Stream),
            Err(err) => Err(err),
        }
    }
}

/// Where the writer's chunks go.
enum Input {
    /// Nothing written yet: the route is chosen at the first write.
    Unopened,
    /// The writer's `StreamInput`.
    Stream(InputStream),
    /// `SendInput` per piece.
    Unary,
    /// The stream ended before the writer closed it; every later write
    /// fails with why, and so does `close` unless a write already did.
    Failed { error: Error, reported: bool },
}

/// An open `StreamInput`: pieces go in through `pieces`, whose sends
/// resolve once the request body has taken the piece (the channel holds
/// one), and `end` says how the request ended.
struct InputStream {
    pieces: mpsc::Sender<Bytes>,
    end: oneshot::Receiver<Result<()>>,
}

impl InputStream {
    /// Ends the request body and waits for envd's answer: `Ok` once every
    /// piece was written into the pipe.
    async fn finish(self, pid: u32) -> Result<()> {
        drop(self.pieces);
        self.end.await.unwrap_or_else(|_| Err(disposed(pid)))
    }
}

pub struct StdinWriter<T: EnvdTransport> {
    world: Arc<World<T>>,
    envd: Envd<T>,
    /// envd's pid of the supervising helper.
    helper: u32,
    /// The command's pid, for messages.
    pid: u32,
    closed: bool,
    input: Input,
    /// Where the stream's task and a drop's close run.
    runtime: tokio::runtime::Handle,
}

impl<T: EnvdTransport> StdinWriter<T> {
    /// Must be created on the provider's runtime. Sends nothing.
    pub fn new(world: Arc<World<T>>, envd: Envd<T>, helper: u32, pid: u32) -> StdinWriter<T> {
        StdinWriter {
            world,
            envd,
            helper,
            pid,
            closed: false,
            input: Input::Unopened,
            runtime: tokio::runtime::Handle::current(),
        }
    }

    fn closed_error(&self, why: &str) -> Error {
        closed_error(self.pid, why)
    }

    /// Opens the writer's stream: a task of the provider runs the request
    /// until its body ends (the writer closed or dropped), envd refuses a
    /// piece, the connection breaks, or the provider disconnects.
    fn open(&self) -> Result<InputStream> {
        let disconnect = self.world.disconnect_token();
        if disconnect.is_cancelled() {
            return Err(disposed(self.pid));
        }
        let (pieces, queued) = mpsc::channel::<Bytes>(0);
        let (done, end) = oneshot::channel();
        let envd = self.envd.clone();
        let (helper, pid) = (self.helper, self.pid);
        let request = async move {
            let input = futures::StreamExt::map(queued, ProcessInput::Stdin);
            // No bound (`stream_input`'s default): the stream lasts as long
            // as the writer.
            let options = CallOptions::default();
            let streamed = envd.stream_input(helper, input, &options);
            let outcome = tokio::select! {
                streamed = streamed => streamed.map_err(|err| {
                    delivery_error(pid, &err, "its input stream to envd ended")
                }),
                () = disconnect.cancelled() => Err(disposed(pid)),
            };
            let _ = done.send(outcome);
        };
        self.runtime
            .spawn(self.world.tracker().track_future(request));
        Ok(InputStream { pieces, end })
    }

    /// The route for this writer's first write.
    async fn choose(&self) -> Result<Input> {
        match self.world.input_route(self.helper).await {
            Ok(InputRoute::Stream) => self.open().map(Input::Stream),
            Ok(InputRoute::Unary) => Ok(Input::Unary),
            Err(err) => Err(delivery_error(self.pid, &err, "")),
        }
    }
}

#[async_trait]
impl<T: EnvdTransport> ByteWriter for StdinWriter<T> {
    /// Resolves once the whole chunk is on its way: taken by the body of the
    /// writer's `StreamInput` (the HTTP connection's buffers and flow
    /// control carry it on), or, without one, written into the pipe by
    /// `SendInput`. Chunks arrive in
    /// the order written. A piece envd could not deliver — the command
    /// closed its stdin or exited, the connection broke — fails the next
    /// write (or `close`) and every later one: `Closed` for the command,
    /// `Unavailable` for a gone sandbox or a broken connection (bytes
    /// written before may then be lost). Dropping the future may leave a
    /// chunk partly sent.
    async fn write(&mut self, chunk: Bytes) -> Result<()> {
        if self.closed {
            return Err(self.closed_error("stdin was closed"));
        }
        if matches!(self.input, Input::Unopened) {
            self.input = self.choose().await?;
        }
        let mut at = 0;
        while at < chunk.len() {
            let end = (at + PIECE).min(chunk.len());
            let piece = chunk.slice(at..end);
            match &mut self.input {
                Input::Stream(stream) => {
                    if stream.pieces.send(piece).await.is_err() {
                        // The request ended under the writer: learn why.
                        let Input::Stream(stream) =
                            std::mem::replace(&mut self.input, Input::Unopened)
                        else {
                            unreachable!("matched above");
                        };
                        let error = match stream.finish(self.pid).await {
                            Err(err) => err,
                            Ok(()) => self.closed_error("envd ended its input stream early"),
                        };
                        self.input = Input::Failed {
                            error: error.clone(),
                            reported: true,
                        };
                        return Err(error);
                    }
                }
                Input::Unary => {
                    // Unbounded: a command that does not read may keep the
                    // write waiting as long as it likes.
                    let unbounded = CallOptions::default().no_timeout();
                    self.envd
                        .send_stdin(self.helper, piece, &unbounded)
                        .await
                        .map_err(|err| delivery_error(self.pid, &err, ""))?;
                }
                Input::Failed { error, reported } => {
                    *reported = true;
                    return Err(error.clone());
                }
                Input::Unopened => unreachable!("chosen above"),
            }
            at = end;
        }
        Ok(())
    }

    /// Ends the writer's stream — resolving once envd wrote every earlier
    /// chunk into the pipe, which a command that does not read can delay —
    /// then closes the pipe: the command reads end of file. A chunk that
    /// was not delivered fails the close (unless a write already reported
    /// it); the pipe is closed all the same. Idempotent; a command that
    /// already exited counts as closed.
    async fn close(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        let delivered = match std::mem::replace(&mut self.input, Input::Unopened) {
            Input::Stream(stream) => stream.finish(self.pid).await,
            Input::Failed {
                error,
                reported: false,
            } => Err(error),
            Input::Unopened | Input::Unary | Input::Failed { .. } => Ok(()),
        };
        let closing = match self
            .envd
            .close_stdin(self.helper, &CallOptions::default())
            .await
        {
            Ok(()) => Ok(()),
            Err(err) if err.is_not_found() || err.is_sandbox_gone() => Ok(()),
            Err(err) => Err(errors::client(
                &format!("close stdin of process {}", self.pid),
                &err,
            )),
        };
        // A delivery failure is the older news, and says more.
        delivered.and(closing)
    }
}

impl<T: EnvdTransport> Drop for StdinWriter<T> {
    /// Ends the stream and then closes the pipe, without waiting, on the
    /// provider's runtime (the close must follow the stream's end, or it
    /// could cut off chunks still on their way).
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        let input = std::mem::replace(&mut self.input, Input::Unopened);
        let envd = self.envd.clone();
        let (helper, pid) = (self.helper, self.pid);
        self.runtime.spawn(async move {
            if let Input::Stream(stream) = input {
                let _ = stream.finish(pid).await;
            }
            let _ = envd.close_stdin(helper, &CallOptions::default()).await;
        });
    }
}

fn closed_error(pid: u32, why: &str) -> Error {
    Error::closed(format!("write stdin of process {pid}: {why}")).with_subject(pid.to_string())
}

/// The provider disconnected while the stream was open.
fn disposed(pid: u32) -> Error {
    closed_error(pid, "the subprocess provider was disposed")
}

/// A `SendInput` or `StreamInput` failure in the seam's vocabulary; `how`
/// says which stream ended (empty for a single request).
fn delivery_error(pid: u32, err: &e2b_client::Error, how: &str) -> Error {
    let because = |why: &str| {
        if how.is_empty() {
            closed_error(pid, why)
        } else {
            closed_error(pid, &format!("{how}: {why}"))
        }
    };
    match err {
        // envd: "stdin not enabled or closed", or the write failed (EPIPE:
        // nobody reads the pipe any more).
        e2b_client::Error::Rpc {
            code: ErrorCode::Internal,
            ..
        } => because("the command no longer reads its stdin"),
        e2b_client::Error::NotFound { .. } => because("the command and its supervisor have exited"),
        _ => {
            let operation = if how.is_empty() {
                format!("write stdin of process {pid}")
            } else {
                format!("write stdin of process {pid}: {how} (chunks written before may be lost)")
            };
            let mapped = errors::client(&operation, err);
            if mapped.kind() == ErrorKind::Unavailable {
                mapped
            } else {
                mapped.with_subject(pid.to_string())
            }
        }
    }
}
