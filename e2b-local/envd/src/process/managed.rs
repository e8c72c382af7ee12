//! One process started through `Start`: its configuration as sent, its input side (stdin pipe or
//! PTY master), its output readers and fan-out, signalling through a pidfd, and the task that
//! reaps it and publishes the end event.

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;

use envd_proto::process::ProcessConfig;
use envd_proto::process::process_event::data_event::Output as DataOutput;
use envd_proto::process::process_event::{DataEvent, EndEvent};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::{Mutex as AsyncMutex, watch};

use super::exit::end_event;
use super::fanout::{Fanout, Subscription};
use super::pty::{PtyMaster, PtyReader};
use super::spawn::{ChildIo, Spawned};

/// envd's read sizes: pipes in chunks of at most 32 KiB, PTYs of at most 16 KiB.
const PIPE_CHUNK: usize = 32 << 10;
const PTY_CHUNK: usize = 16 << 10;

/// Why an input operation was refused (each maps to the Connect code envd uses).
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    /// Wrong kind of input for this process, stdin closed, or a write failure: `internal`.
    #[error("{0}")]
    Internal(String),
    /// `CloseStdin` on a PTY process: `unknown`.
    #[error("{0}")]
    Unknown(String),
}

enum Input {
    Pipe(AsyncMutex<Option<ChildStdin>>),
    Pty(Arc<PtyMaster>),
}

/// A running (or just ended) process owned by the daemon.
pub(crate) struct ManagedProcess {
    pub pid: u32,
    pub config: ProcessConfig,
    pub tag: Option<String>,
    /// Start order, for "first process with this tag".
    pub sequence: u64,
    input: Input,
    fanout: Fanout,
    pidfd: OwnedFd,
    /// Set to true to make the output readers stop (SIGKILL/SIGTERM, deadline, shutdown).
    stop_output: watch::Sender<bool>,
    /// Becomes `Some` once the process is reaped.
    ended: watch::Sender<Option<EndEvent>>,
}

impl ManagedProcess {
    /// Takes ownership of a freshly spawned child and starts its output readers and reaper on
    /// the current tokio runtime. The returned subscription is attached before any output is
    /// read, so the `Start` stream misses nothing. `on_start` runs before the reaper starts (so
    /// a process that exits at once is registered before it is retired); `on_exit` runs once the
    /// process is reaped, before the end event is delivered to attached streams.
    pub(crate) fn start(
        spawned: Spawned,
        config: ProcessConfig,
        tag: Option<String>,
        sequence: u64,
        on_start: impl FnOnce(&Arc<ManagedProcess>),
        on_exit: impl FnOnce(&Arc<ManagedProcess>, &EndEvent) + Send + 'static,
    ) -> (Arc<Self>, Subscription) {
        let Spawned {
            pid,
            pidfd,
            child,
            io,
        } = spawned;
        let (input, readers) = match io {
            ChildIo::Pty(master) => (Input::Pty(Arc::clone(&master)), Readers::Pty(master)),
            ChildIo::Pipes {
                stdin,
                stdout,
                stderr,
            } => (
                Input::Pipe(AsyncMutex::new(stdin)),
                Readers::Pipes(Box::new(stdout), Box::new(stderr)),
            ),
        };
        let process = Arc::new(Self {
            pid,
            config,
            tag,
            sequence,
            input,
            fanout: Fanout::default(),
            pidfd,
            stop_output: watch::channel(false).0,
            ended: watch::channel(None).0,
        });
        let initial = process.fanout.subscribe();
        on_start(&process);
        tokio::spawn(Arc::clone(&process).reap(child, readers, on_exit));
        (process, initial)
    }

    /// Attaches another stream (`Connect`).
    pub(crate) fn subscribe(&self) -> Subscription {
        self.fanout.subscribe()
    }

    /// Reads output until EOF (or until told to stop), then waits for the exit, then publishes
    /// the end. envd orders it the same way: a process whose orphans keep its pipes open ends
    /// only when they close them, unless it was signalled through `SendSignal` or timed out.
    /// The readers stay open until the process is reaped, as envd's do (Go's `cmd.Wait` closes
    /// them): one told to stop only stops reading, so a process still writing when a signal is
    /// sent dies of the signal, never of a broken pipe the stop would otherwise cause first.
    async fn reap(
        self: Arc<Self>,
        mut child: Child,
        mut readers: Readers,
        on_exit: impl FnOnce(&Arc<ManagedProcess>, &EndEvent),
    ) {
        match &mut readers {
            Readers::Pty(master) => {
                self.pump(PtyReader(Arc::clone(master)), PTY_CHUNK, DataOutput::Pty)
                    .await;
            }
            Readers::Pipes(stdout, stderr) => {
                tokio::join!(
                    self.pump(stdout, PIPE_CHUNK, DataOutput::Stdout),
                    self.pump(stderr, PIPE_CHUNK, DataOutput::Stderr),
                );
            }
        }
        let end = match child.wait().await {
            Ok(status) => end_event(status.into_raw()),
            Err(err) => EndEvent {
                exit_code: -1,
                status: format!("wait failed: {err}"),
                error: Some(format!("wait failed: {err}")),
                ..Default::default()
            },
        };
        drop(readers);
        if let Input::Pipe(stdin) = &self.input {
            stdin.lock().await.take();
        }
        self.ended.send_replace(Some(end.clone()));
        on_exit(&self, &end);
        self.fanout.finish(end).await;
    }

    /// Publishes output read from `reader` in chunks of at most `chunk` bytes until EOF, an
    /// error, or a stop request.
    async fn pump<R: AsyncRead + Unpin>(
        &self,
        mut reader: R,
        chunk: usize,
        wrap: fn(Vec<u8>) -> DataOutput,
    ) {
        let mut stop = self.stop_output.subscribe();
        let mut buf = vec![0u8; chunk];
        loop {
            let read = tokio::select! {
                biased;
                _ = stop.wait_for(|stop| *stop) => return,
                read = reader.read(&mut buf) => read,
            };
            match read {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if !self.publish(&mut stop, wrap(buf[..n].to_vec())).await {
                        return;
                    }
                }
            }
        }
    }

    /// Hands one chunk to the fan-out; false if a stop request came first.
    async fn publish(&self, stop: &mut watch::Receiver<bool>, output: DataOutput) -> bool {
        let data = DataEvent {
            output: Some(output),
            ..Default::default()
        };
        tokio::select! {
            biased;
            _ = stop.wait_for(|stop| *stop) => false,
            () = self.fanout.publish(data) => true,
        }
    }

    /// Stops reading output (attached streams then get the end as soon as the process is
    /// reaped, even if orphans keep the pipes open).
    pub(crate) fn stop_output(&self) {
        self.stop_output.send_replace(true);
    }

    /// Sends `signal` to the process itself (not its group). A process that was already reaped
    /// counts as signalled.
    pub(crate) fn signal(&self, signal: rustix::process::Signal) -> std::io::Result<()> {
        match rustix::process::pidfd_send_signal(&self.pidfd, signal) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// True once the process has been reaped.
    pub(crate) fn has_ended(&self) -> bool {
        self.ended.borrow().is_some()
    }

    /// Writes `data` to the stdin pipe.
    pub(crate) async fn write_stdin(&self, data: &[u8]) -> Result<(), InputError> {
        let Input::Pipe(stdin) = &self.input else {
            return Err(InputError::Internal(
                "error writing to stdin: tty assigned to process \u{2014} input should be written to the pty, not the stdin".to_owned(),
            ));
        };
        let mut stdin = stdin.lock().await;
        let Some(pipe) = stdin.as_mut() else {
            return Err(InputError::Internal(
                "error writing to stdin: stdin not enabled or closed".to_owned(),
            ));
        };
        pipe.write_all(data).await.map_err(|err| {
            InputError::Internal(format!(
                "error writing to stdin: error writing to stdin of process '{}': {err}",
                self.pid
            ))
        })
    }

    /// Writes `data` to the terminal.
    pub(crate) async fn write_pty(&self, data: &[u8]) -> Result<(), InputError> {
        let Input::Pty(master) = &self.input else {
            return Err(InputError::Internal(
                "error writing to tty: tty not assigned to process \u{2014} input should be written to the stdin, not the tty".to_owned(),
            ));
        };
        master.write_all(data).await.map_err(|err| {
            InputError::Internal(format!(
                "error writing to tty: error writing to tty of process '{}': {err}",
                self.pid
            ))
        })
    }

    /// Closes the stdin pipe so the process reads EOF; a no-op when it is already closed or was
    /// never opened. PTY processes have no stdin to close.
    pub(crate) async fn close_stdin(&self) -> Result<(), InputError> {
        match &self.input {
            Input::Pty(_) => Err(InputError::Unknown(
                "error closing stdin: cannot close stdin for PTY process \u{2014} send Ctrl+D (0x04) instead".to_owned(),
            )),
            Input::Pipe(stdin) => {
                if let Some(mut pipe) = stdin.lock().await.take() {
                    // Flush is a no-op for pipes; shutdown drops nothing buffered.
                    let _ = pipe.shutdown().await;
                }
                Ok(())
            }
        }
    }

    /// Resizes the terminal of a PTY process.
    pub(crate) fn resize(&self, cols: u32, rows: u32) -> Result<(), InputError> {
        let Input::Pty(master) = &self.input else {
            return Err(InputError::Internal(
                "error resizing tty: tty not assigned to process".to_owned(),
            ));
        };
        master
            .resize(cols, rows)
            .map_err(|err| InputError::Internal(format!("error resizing tty: {err}")))
    }
}

enum Readers {
    Pty(Arc<PtyMaster>),
    Pipes(Box<ChildStdout>, Box<ChildStderr>),
}
