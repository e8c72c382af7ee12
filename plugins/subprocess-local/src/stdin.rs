//! The writing end of a command's stdin pipe.

use async_trait::async_trait;
use dsh_plugin_api::stream::ByteWriter;
use dsh_plugin_api::{Bytes, Error, Result};

use crate::fdio::NonBlocking;

pub struct StdinWriter {
    pipe: Option<NonBlocking>,
    pid: u32,
}

impl StdinWriter {
    pub fn new(pipe: NonBlocking, pid: u32) -> StdinWriter {
        StdinWriter {
            pipe: Some(pipe),
            pid,
        }
    }
}

#[async_trait]
impl ByteWriter for StdinWriter {
    /// Resolves once the whole chunk is in the pipe; a child that stopped
    /// reading makes this wait (backpressure). A child that closed its
    /// stdin or exited makes it fail with `Closed`. Runs on whatever task
    /// polls it; the pipe is registered with the plugin's reactor.
    async fn write(&mut self, chunk: Bytes) -> Result<()> {
        let Some(pipe) = self.pipe.as_ref() else {
            return Err(Error::closed(format!(
                "write stdin of process {}: stdin was closed",
                self.pid
            )));
        };
        pipe.write_all(&chunk)
            .await
            .map_err(|err| Error::from_io(&format!("write stdin of process {}", self.pid), &err))
    }

    /// Closes the pipe: the child reads end of file. Idempotent.
    async fn close(&mut self) -> Result<()> {
        self.pipe = None;
        Ok(())
    }
}
