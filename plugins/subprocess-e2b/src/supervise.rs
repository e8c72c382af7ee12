//! The supervisor of one started command: it decodes the helper's frames,
//! feeds pipes (with backpressure), the host's stdout/stderr, tails and
//! counters, applies the timeout and the drain grace, re-attaches after a
//! broken connection, settles a gone sandbox, and publishes the status. It
//! runs until the helper is done (or the provider disconnects it).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dsh_plugin_api::subprocess::{ExitStatus, OutputMode};
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_provider_kit::status::Ended;
use e2b_client::{ProcessEvent, ProcessStream, StreamOptions};
use futures::StreamExt;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::control::{ControlError, Controller};
use crate::frames::{Decoder, Frame, Stream};
use crate::group::Group;
use crate::output::OutputState;
use crate::pipe;
use crate::transport::EnvdTransport;
use crate::world::World;

/// How long detached streams may take to report closed before the status
/// is published anyway.
const STOP_LIMIT: Duration = Duration::from_secs(1);
/// Attempts to re-attach to a helper after the connection to envd broke.
const REATTACH_ATTEMPTS: u32 = 5;
/// Most of the helper's own stderr kept for messages.
const DIAGNOSTICS_LIMIT: usize = 4096;

/// The helper's own stderr (its diagnostics), kept for messages.
#[derive(Default)]
pub struct Diagnostics(Vec<u8>);

impl Diagnostics {
    pub fn push(&mut self, bytes: &[u8]) {
        let room = DIAGNOSTICS_LIMIT.saturating_sub(self.0.len());
        self.0.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    pub fn suffix(&self) -> String {
        let text = String::from_utf8_lossy(&self.0);
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else {
            format!(": {text}")
        }
    }
}

/// Where one stream's bytes go besides its account.
pub enum Sink {
    /// A pipe or the host: a bounded channel.
    Channel(mpsc::Sender<pipe::Piece>),
    /// Collect and null: the account is all.
    Keep,
    /// The consumer went away, or the stream ended.
    Gone,
}

/// The supervision of one started command.
pub struct Supervisor<T: EnvdTransport> {
    pub world: Arc<World<T>>,
    pub control: Controller<T>,
    pub group: Arc<Group<T>>,
    pub helper: u32,
    pub starttime: u64,
    pub pid: u32,
    pub modes: [OutputMode; 2],
    pub sinks: [Sink; 2],
    pub outputs: [Arc<OutputState>; 2],
    /// Streams the helper has not reported closed.
    pub open: [bool; 2],
    pub exit: Option<ExitStatus>,
    pub timed_out: bool,
    pub status: watch::Sender<Option<Result<ExitStatus>>>,
    /// Decoded frames not yet routed.
    pub backlog: VecDeque<Frame>,
    /// An output piece waiting for room in its channel.
    pub held: Option<(usize, Bytes)>,
    pub decoder: Decoder,
    /// The frame stream is no longer readable (connection lost, garbage):
    /// output is no longer accounted, only the helper's end is awaited.
    pub lost: bool,
    pub wanted_detach: [bool; 2],
    pub sent_detach: [bool; 2],
    pub diagnostics: Diagnostics,
}

/// `Some(when)`: sleeps until then; `None`: never completes.
async fn at(when: Option<Instant>) {
    match when {
        Some(when) => tokio::time::sleep_until(when).await,
        None => std::future::pending().await,
    }
}

/// Completes `future` if there is one; never otherwise.
async fn maybe<F: std::future::Future + Unpin>(future: &mut Option<F>) -> F::Output {
    match future {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}

impl<T: EnvdTransport> Supervisor<T> {
    pub async fn run(
        mut self,
        mut stream: ProcessStream,
        timeout: Option<Duration>,
        drain_grace: Duration,
    ) {
        let kill_grace = self.world.kill_grace();
        let disconnect = self.world.disconnect_token();
        let deadline = timeout.map(|timeout| Instant::now() + timeout);
        let mut ladder: Option<BoxFuture<'static, Result<()>>> = None;
        let mut detach: Option<BoxFuture<'static, ()>> = None;
        let mut grace_at: Option<Instant> = None;
        let mut stop_at: Option<Instant> = None;
        let mut stream_done = false;
        loop {
            self.route_backlog();
            if detach.is_none() {
                detach = self.next_detach();
            }
            if self.lingering() && grace_at.is_none() && stop_at.is_none() {
                grace_at = Some(Instant::now() + drain_grace);
            }
            self.publish_if_drained(false);
            if stream_done && self.held.is_none() && self.backlog.is_empty() {
                break;
            }
            // Watches on the consumers (cloned senders: the handler may
            // drop the supervisor's own).
            let watch = |i: usize| match &self.sinks[i] {
                Sink::Channel(tx) if self.modes[i] == OutputMode::Pipe => Some(tx.clone()),
                _ => None,
            };
            let watchers = [watch(0), watch(1)];
            let room = self.held.as_ref().and_then(|(i, _)| match &self.sinks[*i] {
                Sink::Channel(tx) => Some(tx.clone()),
                _ => None,
            });
            let reading = !stream_done && self.held.is_none() && self.backlog.is_empty();
            tokio::select! {
                biased;
                () = disconnect.cancelled() => {
                    self.lose_output(Error::closed(format!(
                        "read output of process {}: the subprocess provider is disposed", self.pid
                    )));
                    self.publish_if_drained(true);
                    self.publish_error(Error::closed(format!(
                        "wait: process {}: the provider was disposed before its exit was observed", self.pid
                    )));
                    break;
                }
                permit = async { room.expect("guarded").reserve_owned().await }, if room.is_some() => {
                    let (i, bytes) = self.held.take().expect("held");
                    match permit {
                        Ok(permit) => {
                            self.outputs[i].record(&bytes);
                            permit.send(Ok(bytes));
                        }
                        Err(_) => {
                            self.outputs[i].record(&bytes);
                            self.consumer_gone(i);
                        }
                    }
                    self.backlog.pop_front();
                }
                event = stream.next(), if reading => match event {
                    Some(Ok(event)) => self.event(event),
                    Some(Err(err)) => {
                        if !self.broken(&err, &mut stream).await {
                            stream_done = true;
                        }
                    }
                    None => stream_done = true,
                },
                () = at(deadline), if deadline.is_some() && self.exit.is_none() && !self.timed_out && ladder.is_none() => {
                    self.timed_out = true;
                    let group = Arc::clone(&self.group);
                    ladder = Some(Box::pin(async move { group.terminate(kill_grace).await }));
                }
                result = maybe(&mut ladder) => {
                    ladder = None;
                    if let Err(err) = result {
                        tracing::warn!(pid = self.pid, %err, "terminating a timed-out command left its group busy");
                    }
                }
                () = maybe(&mut detach) => detach = None,
                () = at(grace_at), if grace_at.is_some() => {
                    grace_at = None;
                    stop_at = Some(Instant::now() + STOP_LIMIT);
                    for i in 0..2 {
                        if self.open[i] && self.modes[i] != OutputMode::Pipe {
                            self.wanted_detach[i] = true;
                        }
                    }
                }
                () = at(stop_at), if stop_at.is_some() => {
                    stop_at = None;
                    self.publish_if_drained(true);
                }
                () = closed(&watchers[0]) => self.consumer_gone(0),
                () = closed(&watchers[1]) => self.consumer_gone(1),
            }
        }
        self.publish_error(Error::io(format!(
            "wait: process {}: its supervisor's stream ended without the exit{}",
            self.pid,
            self.diagnostics.suffix()
        )));
        if !self.diagnostics.0.is_empty() {
            tracing::warn!(
                pid = self.pid,
                "sandbox helper said{}",
                self.diagnostics.suffix()
            );
        }
    }

    /// Routes decoded frames until one must wait for a consumer.
    fn route_backlog(&mut self) {
        while self.held.is_none() {
            let Some(frame) = self.backlog.front().cloned() else {
                return;
            };
            if let Some(held) = self.route(frame) {
                self.held = Some(held);
                return;
            }
            self.backlog.pop_front();
        }
    }

    /// Routes one frame; an output piece whose channel is full comes back.
    fn route(&mut self, frame: Frame) -> Option<(usize, Bytes)> {
        match frame {
            Frame::Output { stream, bytes } => {
                let i = stream.index();
                match &self.sinks[i] {
                    Sink::Channel(tx) => match tx.try_send(Ok(bytes.clone())) {
                        Ok(()) => self.outputs[i].record(&bytes),
                        Err(mpsc::error::TrySendError::Full(_)) => return Some((i, bytes)),
                        Err(mpsc::error::TrySendError::Closed(_)) => {
                            self.outputs[i].record(&bytes);
                            self.consumer_gone(i);
                        }
                    },
                    Sink::Keep | Sink::Gone => self.outputs[i].record(&bytes),
                }
            }
            Frame::Counted { stream, count } => self.outputs[stream.index()].count(count),
            Frame::Closed { stream, .. } => self.closed(stream),
            Frame::Exited {
                ended, group_empty, ..
            } => {
                self.exit = Some(self.status_of(ended));
                if group_empty {
                    self.group.prove_empty();
                }
            }
            Frame::SpillFailed { stream, errno } => {
                tracing::warn!(
                    pid = self.pid,
                    errno,
                    "the spill copy of {stream:?} is incomplete"
                );
                self.outputs[stream.index()].spill_failed();
            }
            Frame::Started { .. } | Frame::Failed { .. } | Frame::Probed(_) => {
                tracing::warn!(
                    pid = self.pid,
                    ?frame,
                    "the sandbox helper repeated a start frame"
                );
            }
        }
        None
    }

    fn status_of(&self, ended: Ended) -> ExitStatus {
        ended.status(self.timed_out)
    }

    fn closed(&mut self, stream: Stream) {
        let i = stream.index();
        self.open[i] = false;
        // Dropping the sender ends the pipe (or the host forwarder).
        if matches!(self.sinks[i], Sink::Channel(_)) {
            self.sinks[i] = Sink::Gone;
        }
    }

    /// The consumer of a piped stream went away: its bytes are counted
    /// from now on, and the command's end of the pipe is detached.
    fn consumer_gone(&mut self, i: usize) {
        self.sinks[i] = Sink::Gone;
        if self.open[i] && !self.lost {
            self.wanted_detach[i] = true;
        }
    }

    /// A detach to send now, if one is wanted and none is in flight.
    fn next_detach(&mut self) -> Option<BoxFuture<'static, ()>> {
        let want: Vec<usize> = (0..2)
            .filter(|&i| self.wanted_detach[i] && !self.sent_detach[i] && self.open[i])
            .collect();
        let streams = match want.as_slice() {
            [] => return None,
            [0] => "stdout",
            [1] => "stderr",
            _ => "both",
        };
        for i in want {
            self.sent_detach[i] = true;
        }
        let control = self.control.clone();
        let (helper, starttime, pid) = (self.helper, self.starttime, self.pid);
        Some(Box::pin(async move {
            match control.detach(helper, starttime, streams).await {
                Ok(_) => {}
                Err(ControlError::Gone(_)) => {}
                Err(ControlError::Failed(err)) => {
                    tracing::warn!(pid, %err, "detaching {streams} failed; it stays connected");
                }
            }
        }))
    }

    /// Whether the exit is known but a collect/inherit/null stream is open.
    fn lingering(&self) -> bool {
        self.exit.is_some()
            && !self.is_published()
            && (0..2).any(|i| self.open[i] && self.modes[i] != OutputMode::Pipe)
    }

    fn is_published(&self) -> bool {
        self.status.borrow().is_some()
    }

    /// Publishes the exit once the collect/inherit/null streams closed (or
    /// regardless, with `force`).
    fn publish_if_drained(&mut self, force: bool) {
        if self.is_published() {
            return;
        }
        let Some(status) = self.exit else {
            return;
        };
        let lingering = (0..2).any(|i| self.open[i] && self.modes[i] != OutputMode::Pipe);
        if force || !lingering {
            self.status.send_replace(Some(Ok(status)));
        }
    }

    /// Publishes `err` unless a status is out already.
    fn publish_error(&mut self, err: Error) {
        if !self.is_published() {
            self.status.send_replace(Some(Err(err)));
        }
    }

    fn event(&mut self, event: ProcessEvent) {
        match event {
            ProcessEvent::Stdout(bytes) => {
                if self.lost {
                    return;
                }
                let mut frames = Vec::new();
                match self.decoder.push(&bytes, &mut frames) {
                    Ok(()) => self.backlog.extend(frames),
                    Err(err) => {
                        self.backlog.extend(frames);
                        self.lose_output(Error::new(
                            ErrorKind::Remote,
                            format!(
                                "read output of process {}: unreadable frames from the sandbox helper: {err}",
                                self.pid
                            ),
                        ));
                    }
                }
            }
            ProcessEvent::Stderr(bytes) => self.diagnostics.push(&bytes),
            ProcessEvent::Pty(_) => {}
            ProcessEvent::End(end) => {
                // The helper is done: every stream of the command is
                // closed, and its exit mirrors the command's.
                for stream in [Stream::Stdout, Stream::Stderr] {
                    self.closed(stream);
                }
                if self.exit.is_none() {
                    match crate::status::from_envd(&end, self.timed_out) {
                        Some(status) => self.exit = Some(status),
                        None => self.publish_error(Error::io(format!(
                            "wait: process {}: its supervisor ended ({}) without reporting the exit{}",
                            self.pid,
                            end.status,
                            self.diagnostics.suffix()
                        ))),
                    }
                }
            }
        }
    }

    /// Output can no longer be followed: piped streams end with `err`,
    /// nothing more is accounted; the helper's end still gives the status.
    fn lose_output(&mut self, err: Error) {
        self.lost = true;
        self.backlog.retain(|frame| {
            !matches!(
                frame,
                Frame::Output { .. } | Frame::Counted { .. } | Frame::Closed { .. }
            )
        });
        self.held = None;
        self.decoder = Decoder::default();
        for i in 0..2 {
            self.open[i] = false;
            if let Sink::Channel(tx) = std::mem::replace(&mut self.sinks[i], Sink::Gone)
                && self.modes[i] == OutputMode::Pipe
            {
                let err = err.clone();
                // The reader may not be reading: deliver without blocking
                // the supervisor.
                self.world.tracker().spawn(async move {
                    let _ = tx.send(Err(err)).await;
                });
            }
        }
    }

    /// The stream broke. Returns true when a new stream (re-attached to the
    /// helper) replaced it.
    async fn broken(&mut self, err: &e2b_client::Error, stream: &mut ProcessStream) -> bool {
        if self.control.is_gone(err).await {
            self.settle_gone(err);
            return false;
        }
        // Info, not warn: the loss is reported to the reader through the
        // output streams below, where the caller decides how loud to be.
        tracing::info!(pid = self.pid, %err, "the connection to envd broke; re-attaching to the helper");
        self.lose_output(Error::io(format!(
            "read output of process {}: the connection to envd broke ({err}); output from here on is lost",
            self.pid
        )));
        let mut pause = Duration::from_millis(200);
        let mut last = err.to_string();
        for _ in 0..REATTACH_ATTEMPTS {
            match self
                .control
                .envd()
                .connect_process(self.helper, &StreamOptions::default())
                .await
            {
                Ok(reattached) => {
                    *stream = reattached;
                    return true;
                }
                Err(again) if again.is_not_found() => {
                    last = again.to_string();
                    break;
                }
                Err(again) => {
                    if self.control.is_gone(&again).await {
                        self.settle_gone(&again);
                        return false;
                    }
                    last = again.to_string();
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
        self.publish_if_drained(true);
        self.publish_error(Error::io(format!(
            "wait: process {}: the connection to envd broke and could not be re-established ({last}); terminate it to be sure it stopped",
            self.pid
        )));
        false
    }

    /// The sandbox is gone: nothing of the command can run any more.
    fn settle_gone(&mut self, err: &e2b_client::Error) {
        self.group.prove_empty();
        let gone = Error::unavailable(format!("process {}: the sandbox is gone ({err})", self.pid));
        self.lose_output(gone.clone().context("read output"));
        self.publish_if_drained(true);
        self.publish_error(gone.context("wait"));
    }
}

/// Completes when the receiver of `tx` is dropped; never without one.
async fn closed(tx: &Option<mpsc::Sender<pipe::Piece>>) {
    match tx {
        Some(tx) => tx.closed().await,
        None => std::future::pending().await,
    }
}
