//! The writing end of a command's stdin: envd's pipe to the supervising
//! helper, which the command inherited. Each chunk is one `SendInput`,
//! which completes once envd wrote it into the pipe, so a command that
//! does not read stops the writer (backpressure).

use async_trait::async_trait;
use bytes::Bytes;
use dsh_plugin_api::stream::ByteWriter;
use dsh_plugin_api::{Error, ErrorKind, Result};
use e2b_client::{CallOptions, Envd, ErrorCode};

use crate::errors;
use crate::transport::EnvdTransport;

/// Largest single `SendInput`.
const PIECE: usize = 1 << 20;

pub struct StdinWriter<T: EnvdTransport> {
    envd: Envd<T>,
    /// envd's pid of the supervising helper.
    helper: u32,
    /// The command's pid, for messages.
    pid: u32,
    closed: bool,
    /// Where a drop sends the close.
    runtime: tokio::runtime::Handle,
}

impl<T: EnvdTransport> StdinWriter<T> {
    /// Must be created on the provider's runtime.
    pub fn new(envd: Envd<T>, helper: u32, pid: u32) -> StdinWriter<T> {
        StdinWriter {
            envd,
            helper,
            pid,
            closed: false,
            runtime: tokio::runtime::Handle::current(),
        }
    }

    fn closed_error(&self, why: &str) -> Error {
        Error::closed(format!("write stdin of process {}: {why}", self.pid))
            .with_subject(self.pid.to_string())
    }
}

#[async_trait]
impl<T: EnvdTransport> ByteWriter for StdinWriter<T> {
    /// Resolves once envd wrote the whole chunk into the pipe. A command
    /// that closed its stdin or exited makes it fail with `Closed`; a gone
    /// sandbox with `Unavailable`. Dropping the future aborts the request
    /// (part of the chunk may have been written).
    async fn write(&mut self, chunk: Bytes) -> Result<()> {
        if self.closed {
            return Err(self.closed_error("stdin was closed"));
        }
        let mut at = 0;
        while at < chunk.len() {
            let end = (at + PIECE).min(chunk.len());
            let piece = chunk.slice(at..end);
            // Unbounded: a command that does not read may keep the write
            // waiting as long as it likes.
            let unbounded = CallOptions::default().no_timeout();
            if let Err(err) = self.envd.send_stdin(self.helper, piece, &unbounded).await {
                return Err(match &err {
                    // envd: "stdin not enabled or closed", or the write
                    // failed (EPIPE: nobody reads the pipe any more).
                    e2b_client::Error::Rpc {
                        code: ErrorCode::Internal,
                        ..
                    } => self.closed_error("the command no longer reads its stdin"),
                    e2b_client::Error::NotFound { .. } => {
                        self.closed_error("the command and its supervisor have exited")
                    }
                    _ => {
                        let mapped =
                            errors::client(&format!("write stdin of process {}", self.pid), &err);
                        if mapped.kind() == ErrorKind::Unavailable {
                            mapped
                        } else {
                            mapped.with_subject(self.pid.to_string())
                        }
                    }
                });
            }
            at = end;
        }
        Ok(())
    }

    /// Closes the pipe: the command reads end of file. Idempotent; a
    /// command that already exited counts as closed.
    async fn close(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        match self
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
        }
    }
}

impl<T: EnvdTransport> Drop for StdinWriter<T> {
    /// Closes the pipe without waiting, on the provider's runtime.
    fn drop(&mut self) {
        if !self.closed {
            let envd = self.envd.clone();
            let helper = self.helper;
            self.runtime.spawn(async move {
                let _ = envd.close_stdin(helper, &CallOptions::default()).await;
            });
        }
    }
}
