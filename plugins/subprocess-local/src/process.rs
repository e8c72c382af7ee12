//! The handle of one running command, and the task that supervises it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use dsh_plugin_api::stream::{ByteStream, ByteWriter};
use dsh_plugin_api::subprocess::{ExitStatus, OutputSnapshot, OutputStream, Process};
use dsh_plugin_api::{Error, Result};
use dsh_provider_kit::status::wait_published;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::group::Group;
use crate::leader::Outcome;
use crate::output::OutputState;
use crate::pipe_stream::PipeStream;
use crate::stdin::StdinWriter;

/// The final status as `wait` reports it.
pub type StatusCell = watch::Sender<Option<Result<ExitStatus>>>;

/// A command started by `LocalSubprocess::spawn`.
pub struct LocalProcess {
    group: Arc<Group>,
    stdout: Arc<OutputState>,
    stderr: Arc<OutputState>,
    stdin_writer: Mutex<Option<StdinWriter>>,
    stdout_pipe: Mutex<Option<PipeStream>>,
    stderr_pipe: Mutex<Option<PipeStream>>,
    status: watch::Receiver<Option<Result<ExitStatus>>>,
    /// No pumps and no timeout: the status is the leader's exit, so `wait`
    /// reaps itself instead of waiting for the supervisor to relay it (one
    /// task wake-up less on the hot path of short commands).
    direct: Option<CancellationToken>,
}

/// The parts of a started command, assembled by [`crate::command`].
pub struct Parts {
    pub group: Arc<Group>,
    pub stdout: Arc<OutputState>,
    pub stderr: Arc<OutputState>,
    pub stdin_writer: Option<StdinWriter>,
    pub stdout_pipe: Option<PipeStream>,
    pub stderr_pipe: Option<PipeStream>,
    pub status: watch::Receiver<Option<Result<ExitStatus>>>,
    /// Set (to the provider's abandon token) when the status is simply the
    /// leader's exit; see [`LocalProcess`].
    pub direct: Option<CancellationToken>,
}

impl LocalProcess {
    pub fn new(parts: Parts) -> LocalProcess {
        LocalProcess {
            group: parts.group,
            stdout: parts.stdout,
            stderr: parts.stderr,
            stdin_writer: Mutex::new(parts.stdin_writer),
            stdout_pipe: Mutex::new(parts.stdout_pipe),
            stderr_pipe: Mutex::new(parts.stderr_pipe),
            status: parts.status,
            direct: parts.direct,
        }
    }
}

#[async_trait]
impl Process for LocalProcess {
    fn pid(&self) -> u32 {
        self.group.pgid() as u32
    }

    fn take_stdin(&self) -> Option<Box<dyn ByteWriter>> {
        let writer = self.stdin_writer.lock().expect("stdin lock").take()?;
        Some(Box::new(writer))
    }

    fn take_stdout(&self) -> Option<ByteStream> {
        let stream = self.stdout_pipe.lock().expect("stdout lock").take()?;
        Some(Box::pin(stream))
    }

    fn take_stderr(&self) -> Option<ByteStream> {
        let stream = self.stderr_pipe.lock().expect("stderr lock").take()?;
        Some(Box::pin(stream))
    }

    /// Resolves with the status the supervisor published: after the direct
    /// child was reaped and, for collect/inherit/null output, after the
    /// output reached end of file or the drain grace disconnected it.
    async fn wait(&self) -> Result<ExitStatus> {
        if let Some(abandon) = &self.direct {
            let outcome = tokio::select! {
                outcome = self.group.leader().reap() => outcome,
                () = abandon.cancelled() => Err(ABANDONED.to_owned()),
            };
            if outcome.is_ok() {
                self.group.note_if_empty();
            }
            return final_status(outcome, false);
        }
        let subject = format!("process {}", self.pid());
        wait_published(&self.status, &subject, "supervisor").await
    }

    async fn read_output(
        &self,
        stream: OutputStream,
        offset: u64,
        max_len: usize,
    ) -> Result<OutputSnapshot> {
        let state = match stream {
            OutputStream::Stdout => &self.stdout,
            OutputStream::Stderr => &self.stderr,
        };
        Ok(state.snapshot(offset, max_len))
    }

    async fn terminate(&self, grace: Duration) -> Result<()> {
        self.group.terminate(grace).await
    }
}

/// A pump future (collect, inherit or null output).
pub type Pump = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What the supervisor of one command needs.
pub struct Supervision {
    pub group: Arc<Group>,
    pub pumps: Vec<Pump>,
    /// Tells the pumps to read what is buffered and close their pipes: the
    /// supervisor cancels it when the drain grace runs out; it is a child of
    /// the provider's disconnect token, which disposal cancels once the
    /// groups were terminated (descendants that escaped their group must
    /// not hold disposal hostage).
    pub stop_pumps: CancellationToken,
    pub timeout: Option<Duration>,
    pub drain_grace: Duration,
    pub kill_grace: Duration,
    /// Cancelled at disposal if a supervisor still waits for an exit that
    /// cannot come (an unkillable process): `wait` then fails.
    pub abandon: CancellationToken,
    pub status: StatusCell,
}

/// How long the pumps may take to finish after being told to stop. Reading
/// what a pipe holds is immediate; only forwarding to a host descriptor
/// that does not drain (inherit mode) can make it slow, and that must not
/// hold the status back.
const STOP_LIMIT: Duration = Duration::from_secs(1);

/// Supervises one command until its status is final: reaps the direct
/// child, enforces the timeout, keeps the pumps running, applies the drain
/// grace, publishes the status, and releases the group from the registry
/// if it is already empty. Runs on the plugin's runtime as a tracked task.
pub async fn supervise(s: Supervision) {
    let mut live = !s.pumps.is_empty();
    let pump_set = s.pumps;
    let mut pumps: Pump = Box::pin(async move {
        futures::future::join_all(pump_set).await;
    });
    let exit = wait_exit(&s.group, s.timeout, s.kill_grace);
    tokio::pin!(exit);
    let (outcome, timed_out) = loop {
        tokio::select! {
            biased;
            result = &mut exit => break result,
            () = &mut pumps, if live => live = false,
            () = s.abandon.cancelled() => break (Err(ABANDONED.to_owned()), false),
        }
    };
    if live {
        tokio::select! {
            () = &mut pumps => live = false,
            () = tokio::time::sleep(s.drain_grace) => {}
        }
    }
    if live {
        s.stop_pumps.cancel();
        // Dropping the pumps (after the limit) closes their pipes anyway.
        let _ = tokio::time::timeout(STOP_LIMIT, &mut pumps).await;
    }
    drop(pumps);
    s.status
        .send_replace(Some(final_status(outcome, timed_out)));
    if s.group
        .leader()
        .exit()
        .is_some_and(|outcome| outcome.is_ok())
    {
        s.group.note_if_empty();
    }
}

/// Reaps the direct child; on timeout, runs the terminate ladder alongside.
async fn wait_exit(
    group: &Group,
    timeout: Option<Duration>,
    kill_grace: Duration,
) -> (Outcome, bool) {
    let Some(timeout) = timeout else {
        return (group.leader().reap().await, false);
    };
    tokio::select! {
        biased;
        outcome = group.leader().reap() => return (outcome, false),
        () = tokio::time::sleep(timeout) => {}
    }
    let (outcome, terminated) = tokio::join!(group.leader().reap(), group.terminate(kill_grace));
    if let Err(err) = terminated {
        tracing::warn!(pid = group.pgid(), %err, "terminating a timed-out command left its group busy");
    }
    (outcome, true)
}

const ABANDONED: &str = "the provider was disposed before the process exit could be observed";

/// The status `wait` reports for a leader outcome.
fn final_status(outcome: Outcome, timed_out: bool) -> Result<ExitStatus> {
    match outcome {
        Ok(exit) => Ok(exit.status(timed_out)),
        Err(message) => Err(Error::io(format!("wait: {message}"))),
    }
}
