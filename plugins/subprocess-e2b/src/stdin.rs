//! The writing end of a command's stdin: envd's pipe to the supervising
//! helper, which the command inherited (docs/design.md §6.3, "Stdin").
//!
//! A writer's chunks travel on one long-lived `StreamInput` request, opened
//! at its first write ([`e2b_client::StdinWriter`], whose contract this
//! follows): a chunk is a message on a request already open rather than a
//! request of its own (a `SendInput` each, as before: a full HTTP exchange
//! through the owner, the edge and envd per chunk, which is what a code
//! runtime's binding reply paid). A command that does not read stops the
//! stream, and the writer, once the few buffers between fill
//! (backpressure). An envd without `StreamInput` (it answers
//! `unimplemented`, found once per provider) gets one `SendInput` per
//! chunk.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use dsh_plugin_api::stream::ByteWriter;
use dsh_plugin_api::{Error, ErrorKind, Result};
use e2b_client::{Envd, ErrorCode, InputRoute, StdinError};

use crate::errors;
use crate::transport::EnvdTransport;
use crate::world::World;

pub struct StdinWriter<T: EnvdTransport> {
    world: Arc<World<T>>,
    envd: Envd<T>,
    /// envd's pid of the supervising helper.
    helper: u32,
    /// The command's pid, for messages.
    pid: u32,
    closed: bool,
    /// Nothing written yet: the route is chosen at the first write.
    input: Option<e2b_client::StdinWriter<T>>,
    /// Where the stream's request and a drop's close run.
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
            input: None,
            runtime: tokio::runtime::Handle::current(),
        }
    }

    fn closed_error(&self, why: &str) -> Error {
        closed_error(self.pid, why)
    }

    /// The writer for this command's first write: its stream's request runs
    /// on a task of the provider until the writer ends it, envd refuses a
    /// piece, the connection breaks, or the provider disconnects.
    async fn open(&self) -> Result<e2b_client::StdinWriter<T>> {
        let route = self
            .world
            .input_route(self.helper)
            .await
            .map_err(|err| delivery_error(self.pid, &StdinError::Send(Arc::new(err))))?;
        let disconnect = self.world.disconnect_token();
        if route == InputRoute::Stream && disconnect.is_cancelled() {
            return Err(disposed(self.pid));
        }
        let (writer, request) = e2b_client::StdinWriter::new(self.envd.clone(), self.helper, route);
        if let Some(request) = request {
            // Dropped at disconnection: the writer then fails as disposed.
            let request = async move {
                tokio::select! {
                    _ = request => {}
                    () = disconnect.cancelled() => {}
                }
            };
            self.runtime
                .spawn(self.world.tracker().track_future(request));
        }
        Ok(writer)
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
        let input = match &mut self.input {
            Some(input) => input,
            None => self.input.insert(self.open().await?),
        };
        input
            .write(chunk)
            .await
            .map_err(|err| delivery_error(self.pid, &err))
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
        self.input
            .take()
            .unwrap_or_else(|| self.unopened())
            .close()
            .await
            .map_err(|err| delivery_error(self.pid, &err))
    }
}

impl<T: EnvdTransport> StdinWriter<T> {
    /// A writer that never wrote has no stream to end: closing it is
    /// closing the pipe.
    fn unopened(&self) -> e2b_client::StdinWriter<T> {
        e2b_client::StdinWriter::new(self.envd.clone(), self.helper, InputRoute::Unary).0
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
        let mut input = self.input.take().unwrap_or_else(|| self.unopened());
        self.runtime.spawn(async move {
            let _ = input.close().await;
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

/// A writer's failure in the seam's vocabulary.
fn delivery_error(pid: u32, err: &StdinError) -> Error {
    let (err, how) = match err {
        StdinError::Send(err) => (err, ""),
        StdinError::Stream(err) => (err, "its input stream to envd ended"),
        StdinError::EndedEarly => return closed_error(pid, "envd ended its input stream early"),
        StdinError::Abandoned => return disposed(pid),
        StdinError::Finished => return closed_error(pid, "stdin was closed"),
        StdinError::Close(err) => {
            return errors::client(&format!("close stdin of process {pid}"), err);
        }
    };
    let because = |why: &str| {
        if how.is_empty() {
            closed_error(pid, why)
        } else {
            closed_error(pid, &format!("{how}: {why}"))
        }
    };
    match &**err {
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
