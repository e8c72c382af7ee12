//! Starting one command, and the task that supervises it until the helper
//! is done.
//!
//! `spawn` validates and prepares everything, then hands the start to a
//! task on the provider's runtime and awaits its answer. The task owns the
//! whole transaction, so dropping `spawn`'s future cannot leave a half-
//! started command: if the caller is gone when the command runs, the task
//! kills its group (and a helper whose pid never reached us is killed by
//! its envd tag). Once the handle is out, the same task supervises: it
//! decodes the helper's frames, feeds pipes (with backpressure), the host's
//! stdout/stderr, tails and counters, applies the timeout and the drain
//! grace, and publishes the status.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dsh_plugin_api::subprocess::{
    ExitStatus, OutputMode, OutputStream, Process, Signal, SpawnSpec, StdinMode,
};
use dsh_plugin_api::{Error, ErrorKind, Result};
use e2b_client::{Command, ProcessEvent, ProcessStream, Selector, StreamOptions};
use futures::StreamExt;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::control::{ControlError, Controller};
use crate::delivery::Delivery;
use crate::errors::{self, StartContext};
use crate::frames::{Decoder, Ended, Frame, Stream};
use crate::group::Group;
use crate::output::OutputState;
use crate::pipe;
use crate::process::E2bProcess;
use crate::provider::World;
use crate::stdin::StdinWriter;
use crate::transport::EnvdTransport;
use crate::wire::{self, Relay, RunRequest, Spill};

/// How long detached streams may take to report closed before the status
/// is published anyway.
const STOP_LIMIT: Duration = Duration::from_secs(1);
/// Attempts to re-attach to a helper after the connection to envd broke.
const REATTACH_ATTEMPTS: u32 = 5;
/// Most of the helper's own stderr kept for messages.
const DIAGNOSTICS_LIMIT: usize = 4096;

/// Starts `spec` in `world` (see the module docs).
pub async fn spawn<T: EnvdTransport>(
    world: &Arc<World<T>>,
    spec: SpawnSpec,
) -> Result<Arc<dyn Process>> {
    const OP: &str = "spawn";
    spec.validate()?;
    world.check_open(OP)?;
    let ready = world.ready(OP).await?;
    let cwd = world.working_dir(OP, spec.cwd.as_deref())?;
    let env = ready.setup.ambient.for_command(&spec.env, &cwd);
    let search = crate::env::search_dirs(&env.path);
    let seq = world.next_seq();
    let spill = spec.spill.map(|spill| Spill {
        dir: world.spill_dir().to_owned(),
        stdout: format!("{seq}.stdout"),
        stderr: format!("{seq}.stderr"),
        limit: spill.limit,
    });
    let relay = |mode: OutputMode| match mode {
        OutputMode::Null => Relay::Count,
        _ => Relay::Data,
    };
    let request = RunRequest {
        identity: ready.setup.identity.clone(),
        argv: spec.argv.clone(),
        env: env.entries,
        cwd: cwd.clone(),
        search: search.clone(),
        stdout: relay(spec.stdout),
        stderr: relay(spec.stderr),
        spill: spill.clone(),
    };
    let encoded = wire::base64_encode(&request.encode());
    if encoded.len() > wire::MAX_REQUEST_ENV {
        return Err(Error::invalid_input(format!(
            "spawn: {}: argv and environment take {} bytes once encoded; at most {} can be passed into the sandbox",
            spec.argv[0],
            encoded.len(),
            wire::MAX_REQUEST_ENV
        ))
        .with_subject(spec.argv[0].clone()));
    }
    let tag = format!("dsh-subprocess-e2b-{}-{seq}", world.instance());
    let command = ready
        .control
        .helper_command(&["run"])
        .env(wire::REQUEST_ENV, encoded)
        .stdin(spec.stdin == StdinMode::Pipe)
        .tag(tag.clone());
    let spill_paths = spill.map(|spill| {
        [
            (format!("{}/{}", spill.dir, spill.stdout), spill.limit),
            (format!("{}/{}", spill.dir, spill.stderr), spill.limit),
        ]
    });
    let plan = Plan {
        command,
        tag,
        program: spec.argv[0].clone(),
        cwd,
        search,
        modes: [spec.stdout, spec.stderr],
        stdin: spec.stdin,
        spill: spill_paths,
        timeout: spec.timeout,
        drain_grace: spec.drain_grace,
    };
    let (answer, outcome) = oneshot::channel();
    world.check_open(OP)?;
    world.tracker().spawn(start(
        Arc::clone(world),
        ready.control.clone(),
        plan,
        answer,
    ));
    // Claimed in the same poll it arrives in (see `Delivery`).
    match outcome.await {
        Ok(answer) => answer.map(Delivery::claim),
        Err(_) => Err(Error::io(
            "spawn: the start task ended without an answer (the provider's runtime is shutting down)",
        )),
    }
}

/// Everything the start task needs.
struct Plan {
    command: Command,
    tag: String,
    program: String,
    cwd: String,
    search: Vec<String>,
    modes: [OutputMode; 2],
    stdin: StdinMode,
    spill: Option<[(String, u64); 2]>,
    timeout: Option<Duration>,
    drain_grace: Duration,
}

impl Plan {
    fn context(&self) -> StartContext<'_> {
        StartContext {
            operation: "spawn",
            program: &self.program,
            cwd: &self.cwd,
            search: &self.search,
        }
    }
}

/// The helper's own stderr (its diagnostics), kept for messages.
#[derive(Default)]
struct Diagnostics(Vec<u8>);

impl Diagnostics {
    fn push(&mut self, bytes: &[u8]) {
        let room = DIAGNOSTICS_LIMIT.saturating_sub(self.0.len());
        self.0.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn suffix(&self) -> String {
        let text = String::from_utf8_lossy(&self.0);
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else {
            format!(": {text}")
        }
    }
}

/// The start transaction, then supervision (see the module docs).
async fn start<T: EnvdTransport>(
    world: Arc<World<T>>,
    control: Controller<T>,
    plan: Plan,
    answer: oneshot::Sender<Started>,
) {
    if answer.is_closed() {
        // The caller gave up before anything started.
        return;
    }
    let mut stream = match control
        .envd()
        .start(&plan.command, &control.shell().options())
        .await
    {
        Ok(stream) => stream,
        Err(err) => {
            let error = control.classify("spawn", &err).await.into_error();
            if !matches!(err, e2b_client::Error::InvalidArgument { .. }) {
                // The helper may run without its pid having reached us.
                let _ = control
                    .rpc()
                    .send_signal(Selector::Tag(plan.tag.clone()), e2b_client::Signal::Kill)
                    .await;
            }
            let _ = answer.send(Err(error.with_subject(plan.program.clone())));
            return;
        }
    };
    let helper = stream.pid();
    let mut decoder = Decoder::default();
    let mut backlog = VecDeque::new();
    let mut diagnostics = Diagnostics::default();
    let started = first_frame(
        &control,
        &plan,
        &mut stream,
        &mut decoder,
        &mut backlog,
        &mut diagnostics,
    )
    .await;
    let (pid, starttime) = match started {
        Ok(Some(started)) => started,
        Ok(None) => return, // failure answered; the helper exits by itself
        Err(err) => {
            // The helper may have started the command: its death kills it.
            let _ = control
                .rpc()
                .send_signal(Selector::Pid(helper), e2b_client::Signal::Kill)
                .await;
            let _ = answer.send(Err(err));
            return;
        }
    };
    let answer = Answer(Some(answer));
    if pid <= 1 {
        let _ = control
            .rpc()
            .send_signal(Selector::Pid(helper), e2b_client::Signal::Kill)
            .await;
        answer.send(Err(Error::new(
            ErrorKind::Remote,
            format!(
                "spawn: {}: the sandbox helper reported process group {pid}, which is never signalled",
                plan.program
            ),
        )));
        return;
    }

    let group = Arc::new(Group::new(pid, helper, control.clone()));
    let outputs = [0, 1].map(|i| {
        Arc::new(OutputState::new(
            plan.modes[i],
            plan.spill.as_ref().map(|spill| spill[i].clone()),
        ))
    });
    let (status_tx, status_rx) = watch::channel(None);
    let mut pipes = [None, None];
    let mut sinks = [Sink::Keep, Sink::Keep];
    for (i, mode) in plan.modes.iter().enumerate() {
        match mode {
            OutputMode::Pipe => {
                let (tx, rx) = pipe::channel();
                sinks[i] = Sink::Channel(tx);
                pipes[i] = Some(rx);
            }
            OutputMode::Inherit => {
                let (tx, rx) = mpsc::channel(pipe::PIPE_CHUNKS);
                sinks[i] = Sink::Channel(tx);
                let stream = if i == 0 {
                    OutputStream::Stdout
                } else {
                    OutputStream::Stderr
                };
                world.tracker().spawn(forward_to_host(rx, stream, pid));
            }
            OutputMode::Collect { .. } | OutputMode::Null => {}
        }
    }
    let stdin = (plan.stdin == StdinMode::Pipe)
        .then(|| StdinWriter::new(control.rpc().clone(), helper, pid));
    let handle: Arc<dyn Process> = Arc::new(E2bProcess::new(
        group.clone(),
        outputs.clone(),
        stdin,
        pipes,
        status_rx,
    ));
    if let Err(err) = world
        .registry()
        .adopt("spawn", group.clone(), group.membership())
    {
        rollback(&group).await;
        answer.send(Err(err));
        return;
    }
    let undo = {
        let group = Arc::clone(&group);
        let runtime = tokio::runtime::Handle::current();
        let tracker = world.tracker().clone();
        move || {
            runtime.spawn(tracker.track_future(async move { rollback(&group).await }));
        }
    };
    if !answer.send(Ok(Delivery::new(handle, undo))) {
        // The caller gave up while the command started; the unclaimed
        // delivery rolled it back.
        return;
    }
    let supervisor = Supervisor {
        world,
        control,
        group,
        helper,
        starttime,
        pid,
        modes: plan.modes,
        sinks,
        outputs,
        open: [true, true],
        exit: None,
        timed_out: false,
        status: status_tx,
        backlog,
        held: None,
        decoder,
        lost: false,
        wanted_detach: [false, false],
        sent_detach: [false, false],
        diagnostics,
    };
    supervisor.run(stream, plan.timeout, plan.drain_grace).await;
}

/// What the start task answers the caller.
type Started = Result<Delivery<Arc<dyn Process>>>;

/// The caller's answer channel; `send` says whether it was received.
struct Answer(Option<oneshot::Sender<Started>>);

impl Answer {
    fn send(mut self, result: Started) -> bool {
        self.0.take().is_some_and(|tx| tx.send(result).is_ok())
    }
}

/// Reads until the helper says the command started (`Ok(Some)`) or could
/// not start (answered here; `Ok(None)`); anything else is an error for
/// the caller, after which the helper is killed.
async fn first_frame<T: EnvdTransport>(
    control: &Controller<T>,
    plan: &Plan,
    stream: &mut ProcessStream,
    decoder: &mut Decoder,
    backlog: &mut VecDeque<Frame>,
    diagnostics: &mut Diagnostics,
) -> std::result::Result<Option<(u32, u64)>, Error> {
    let mut frames = Vec::new();
    loop {
        match stream.next().await {
            Some(Ok(ProcessEvent::Stdout(bytes))) => {
                decoder.push(&bytes, &mut frames).map_err(|err| {
                    Error::new(
                        ErrorKind::Remote,
                        format!(
                            "spawn: {}: unreadable answer from the sandbox helper: {err}",
                            plan.program
                        ),
                    )
                })?;
                let mut drained = frames.drain(..);
                while let Some(frame) = drained.next() {
                    match frame {
                        Frame::Started { pid, starttime } => {
                            backlog.extend(drained);
                            return Ok(Some((pid, starttime)));
                        }
                        Frame::Failed {
                            stage,
                            errno,
                            detail,
                        } => {
                            return Err(errors::start_failure(
                                plan.context(),
                                stage,
                                errno,
                                &detail,
                            ));
                        }
                        other => tracing::warn!(
                            ?other,
                            "the sandbox helper sent a frame before its start"
                        ),
                    }
                }
            }
            Some(Ok(ProcessEvent::Stderr(bytes))) => diagnostics.push(&bytes),
            Some(Ok(ProcessEvent::Pty(_))) => {}
            Some(Ok(ProcessEvent::End(end))) => {
                return Err(Error::io(format!(
                    "spawn: {}: the sandbox helper ended ({}) before starting it{}",
                    plan.program,
                    end.status,
                    diagnostics.suffix()
                )));
            }
            Some(Err(err)) => return Err(control.classify("spawn", &err).await.into_error()),
            None => {
                return Err(Error::io(format!(
                    "spawn: {}: the sandbox helper's stream ended before it started the command",
                    plan.program
                )));
            }
        }
    }
}

/// Undoes a start nobody will own: SIGKILL to the group at once.
async fn rollback<T: EnvdTransport>(group: &Group<T>) {
    if let Err(err) = group.terminate(Duration::ZERO).await {
        tracing::warn!(pid = group.pid(), %err, "rolling back a start left its group busy");
    }
}

/// Copies inherited output to the host's own stdout or stderr.
async fn forward_to_host(mut rx: mpsc::Receiver<pipe::Piece>, stream: OutputStream, pid: u32) {
    use tokio::io::AsyncWriteExt;
    let mut failed = false;
    while let Some(piece) = rx.recv().await {
        let Ok(bytes) = piece else { continue };
        if failed {
            continue;
        }
        let result = match stream {
            OutputStream::Stdout => {
                let mut out = tokio::io::stdout();
                match out.write_all(&bytes).await {
                    Ok(()) => out.flush().await,
                    Err(err) => Err(err),
                }
            }
            OutputStream::Stderr => {
                let mut out = tokio::io::stderr();
                match out.write_all(&bytes).await {
                    Ok(()) => out.flush().await,
                    Err(err) => Err(err),
                }
            }
        };
        if let Err(err) = result {
            tracing::warn!(pid, stream = stream.as_str(), %err, "copying output to the host failed; still accounting it");
            failed = true;
        }
    }
}

/// Where one stream's bytes go besides its account.
enum Sink {
    /// A pipe or the host: a bounded channel.
    Channel(mpsc::Sender<pipe::Piece>),
    /// Collect and null: the account is all.
    Keep,
    /// The consumer went away, or the stream ended.
    Gone,
}

/// The supervision of one started command.
struct Supervisor<T: EnvdTransport> {
    world: Arc<World<T>>,
    control: Controller<T>,
    group: Arc<Group<T>>,
    helper: u32,
    starttime: u64,
    pid: u32,
    modes: [OutputMode; 2],
    sinks: [Sink; 2],
    outputs: [Arc<OutputState>; 2],
    /// Streams the helper has not reported closed.
    open: [bool; 2],
    exit: Option<ExitStatus>,
    timed_out: bool,
    status: watch::Sender<Option<Result<ExitStatus>>>,
    /// Decoded frames not yet routed.
    backlog: VecDeque<Frame>,
    /// An output piece waiting for room in its channel.
    held: Option<(usize, Bytes)>,
    decoder: Decoder,
    /// The frame stream is no longer readable (connection lost, garbage):
    /// output is no longer accounted, only the helper's end is awaited.
    lost: bool,
    wanted_detach: [bool; 2],
    sent_detach: [bool; 2],
    diagnostics: Diagnostics,
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
    async fn run(
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
            Frame::Started { .. } | Frame::Failed { .. } => {
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
        match ended {
            Ended::Code(code) => ExitStatus {
                code: Some(code),
                signal: None,
                timed_out: self.timed_out,
            },
            Ended::Signal(signal) => ExitStatus {
                code: None,
                signal: Some(Signal(signal)),
                timed_out: self.timed_out,
            },
        }
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
        tracing::warn!(pid = self.pid, %err, "the connection to envd broke; re-attaching to the helper");
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
