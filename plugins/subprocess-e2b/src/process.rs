//! The handle of one command.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use dsh_plugin_api::Result;
use dsh_plugin_api::stream::{ByteStream, ByteWriter};
use dsh_plugin_api::subprocess::{ExitStatus, OutputSnapshot, OutputStream, Process};
use dsh_provider_kit::status::wait_published;
use tokio::sync::watch;

use crate::group::Group;
use crate::output::OutputState;
use crate::pipe::PipeStream;
use crate::stdin::StdinWriter;
use crate::transport::EnvdTransport;

/// The final status as `wait` reports it, once published.
pub type StatusCell = watch::Receiver<Option<Result<ExitStatus>>>;

/// A command started by `E2bSubprocess::spawn`.
pub struct E2bProcess<T: EnvdTransport> {
    group: Arc<Group<T>>,
    outputs: [Arc<OutputState>; 2],
    stdin: Mutex<Option<StdinWriter<T>>>,
    pipes: [Mutex<Option<PipeStream>>; 2],
    status: StatusCell,
}

impl<T: EnvdTransport> E2bProcess<T> {
    pub fn new(
        group: Arc<Group<T>>,
        outputs: [Arc<OutputState>; 2],
        stdin: Option<StdinWriter<T>>,
        pipes: [Option<PipeStream>; 2],
        status: StatusCell,
    ) -> E2bProcess<T> {
        let [stdout, stderr] = pipes;
        E2bProcess {
            group,
            outputs,
            stdin: Mutex::new(stdin),
            pipes: [Mutex::new(stdout), Mutex::new(stderr)],
            status,
        }
    }

    fn take_pipe(&self, index: usize) -> Option<ByteStream> {
        let pipe = self.pipes[index]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        Some(Box::pin(pipe))
    }
}

#[async_trait]
impl<T: EnvdTransport> Process for E2bProcess<T> {
    fn pid(&self) -> u32 {
        self.group.pid()
    }

    fn take_stdin(&self) -> Option<Box<dyn ByteWriter>> {
        let writer = self
            .stdin
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        Some(Box::new(writer))
    }

    fn take_stdout(&self) -> Option<ByteStream> {
        self.take_pipe(0)
    }

    fn take_stderr(&self) -> Option<ByteStream> {
        self.take_pipe(1)
    }

    /// Resolves with the status the supervisor published: when the helper
    /// reported the direct child's end and, for collect/inherit/null
    /// output, the output closed or the drain grace detached it. A gone
    /// sandbox or a lost connection to envd without the exit observed is an
    /// error (`Unavailable`, `Io`). Dropping the future stops waiting only.
    async fn wait(&self) -> Result<ExitStatus> {
        let subject = format!("process {}", self.pid());
        wait_published(&self.status, &subject, "supervisor").await
    }

    async fn read_output(
        &self,
        stream: OutputStream,
        offset: u64,
        max_len: usize,
    ) -> Result<OutputSnapshot> {
        let index = match stream {
            OutputStream::Stdout => 0,
            OutputStream::Stderr => 1,
        };
        Ok(self.outputs[index].snapshot(offset, max_len))
    }

    /// See [`Group::terminate`].
    async fn terminate(&self, grace: Duration) -> Result<()> {
        self.group.terminate(grace).await
    }
}
