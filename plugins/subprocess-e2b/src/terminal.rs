//! Terminals: a program on an envd PTY, in its own session.
//!
//! envd starts the helper on a new PTY as a session leader with the
//! terminal as controlling terminal; the helper takes on the sandbox
//! user's identity, installs the exact argv and scrubbed environment it
//! received, and replaces itself with the program (same pid, session and
//! terminal) right after a random boundary (see `crate::boundary`). No
//! bootstrap shell runs, so there is no prompt or echoed runner command to
//! hide; the boundary still separates the helper's bytes from the
//! program's, whose first byte is kept.
//!
//! Output is pushed to the handle's stream as it arrives: a paused consumer
//! buffers in host memory, a dropped stream discards, and envd is never
//! held up. Foreground group and signals run inside the sandbox (helper
//! subcommands); resize and input go through envd.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::subprocess::{ExitStatus, Signal, Terminal, TerminalSpec};
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_provider_kit::gate::Gate;
use dsh_provider_kit::status::{Ended, wait_published};
use dsh_provider_kit::terminal::check_resize;
use e2b_client::{
    CallOptions, ErrorCode, ProcessEvent, ProcessStream, PtySize, Selector, StreamOptions,
};
use futures::StreamExt;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot, watch};

use crate::boundary::{BoundaryScan, Scan};
use crate::control::{ControlError, Controller, Ladder};
use crate::delivery::{Delivery, deferred};
use crate::errors::{self, StartContext};
use crate::group::KILL_SETTLE;
use crate::registry::{Membership, Owned};
use crate::transport::EnvdTransport;
use crate::wire::{self, ExecRequest, Launch};
use crate::world::World;

const OP: &str = "spawn_terminal";

/// Starts `spec` on a new PTY in `world`. Like `spawn`, the start runs as
/// a task of the provider, so dropping this future rolls a started
/// terminal back (its session is torn down).
pub async fn spawn<T: EnvdTransport>(
    world: &Arc<World<T>>,
    spec: TerminalSpec,
) -> Result<Arc<dyn Terminal>> {
    spec.validate()?;
    world.check_open(OP)?;
    let ready = world.ready(OP).await?;
    let cwd = world.working_dir(OP, spec.cwd.as_deref())?;
    let env = ready.setup.ambient.for_command(&spec.env, &cwd);
    let search = dsh_supervisor::ambient::search_dirs(&env.path);
    let boundary = format!("{:032x}", rand::random::<u128>());
    let request = ExecRequest {
        launch: Launch {
            identity: ready.setup.identity.clone(),
            argv: spec.argv.clone(),
            env: env.entries,
            cwd: cwd.clone(),
            search: search.clone(),
        },
        boundary: boundary.clone(),
    };
    let encoded = wire::base64_encode(&request.encode());
    if encoded.len() > wire::MAX_REQUEST_ENV {
        return Err(Error::invalid_input(format!(
            "{OP}: {}: argv and environment take {} bytes once encoded; at most {} can be passed into the sandbox",
            spec.argv[0],
            encoded.len(),
            wire::MAX_REQUEST_ENV
        ))
        .with_subject(spec.argv[0].clone()));
    }
    let tag = format!(
        "dsh-subprocess-e2b-{}-t{}",
        world.instance(),
        world.next_seq()
    );
    let command = ready
        .control
        .helper_command(&["exec"])
        .env(wire::REQUEST_ENV, encoded)
        .pty(PtySize {
            cols: u32::from(spec.cols),
            rows: u32::from(spec.rows),
        })
        .tag(tag.clone());
    let plan = Plan {
        command,
        tag,
        boundary,
        program: spec.argv[0].clone(),
        cwd,
        search,
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
        Err(_) => Err(Error::io(format!(
            "{OP}: the start task ended without an answer (the provider's runtime is shutting down)"
        ))),
    }
}

struct Plan {
    command: e2b_client::Command,
    tag: String,
    boundary: String,
    program: String,
    cwd: String,
    search: Vec<String>,
}

/// The start transaction, then the output pump.
async fn start<T: EnvdTransport>(
    world: Arc<World<T>>,
    control: Controller<T>,
    plan: Plan,
    answer: oneshot::Sender<Result<Delivery<Arc<dyn Terminal>>>>,
) {
    if answer.is_closed() {
        return;
    }
    let envd = control.envd().clone();
    let mut stream = match envd.start(&plan.command, &control.shell().options()).await {
        Ok(stream) => stream,
        Err(err) => {
            let error = control.classify(OP, &err).await.into_error();
            if !matches!(err, e2b_client::Error::InvalidArgument { .. }) {
                let _ = control.kill(Selector::Tag(plan.tag.clone())).await;
            }
            let _ = answer.send(Err(error.with_subject(plan.program.clone())));
            return;
        }
    };
    let pid = stream.pid();
    let first = match find_boundary(&control, &plan, &mut stream).await {
        Ok(first) => first,
        Err(err) => {
            control.kill_helper(pid).await;
            let _ = answer.send(Err(err));
            return;
        }
    };
    let (status_tx, status_rx) = watch::channel(None);
    let core = Arc::new(TerminalCore {
        pid,
        control: control.clone(),
        gate: Gate::new(format!("terminal {pid}")),
        writing: tokio::sync::Mutex::new(()),
        quiescent: AtomicBool::new(false),
        membership: Membership::default(),
        kill_grace: world.kill_grace(),
        status: status_rx,
    });
    let (output_tx, output_rx) = mpsc::unbounded_channel();
    let terminal: Arc<dyn Terminal> = Arc::new(E2bTerminal {
        core: Arc::clone(&core),
        output: Mutex::new(Some(output_rx)),
    });
    if let Err(err) = world.registry().adopt(OP, core.clone(), &core.membership) {
        rollback(&core).await;
        let _ = answer.send(Err(err));
        return;
    }
    let undo = {
        let core = Arc::clone(&core);
        deferred(world.tracker(), async move { rollback(&core).await })
    };
    if answer.send(Ok(Delivery::new(terminal, undo))).is_err() {
        // Nobody listens: the unclaimed delivery tore the session down.
        return;
    }
    if !first.is_empty() {
        let _ = output_tx.send(Ok(first));
    }
    // envd reports the program's end only once the terminal closed; a job
    // it left running may hold the terminal long after. The watcher reads
    // the exit from the program's zombie as soon as it happens.
    let watcher = {
        let control = control.clone();
        Box::pin(async move {
            match control.wait_exit(pid).await {
                Ok(Some(raw)) => Some(Ended::from_wait_status(raw).status(false)),
                Ok(None) => None,
                Err(err) => {
                    tracing::debug!(pid, err = %err.into_error(), "watching the terminal's program failed; envd's end event will tell");
                    None
                }
            }
        }) as BoxFuture<'static, Option<ExitStatus>>
    };
    pump(&world, &core, stream, output_tx, status_tx, watcher).await;
}

/// Reads until the helper's marker: the program's first bytes, or the
/// reason it could not start.
async fn find_boundary<T: EnvdTransport>(
    control: &Controller<T>,
    plan: &Plan,
    stream: &mut ProcessStream,
) -> Result<Bytes> {
    let mut scan = BoundaryScan::new(&plan.boundary);
    let garbled = |seen: &str| {
        Error::new(
            ErrorKind::Remote,
            format!(
                "{OP}: {}: the sandbox helper wrote {seen:?} instead of its start marker",
                plan.program
            ),
        )
    };
    loop {
        match stream.next().await {
            Some(Ok(ProcessEvent::Pty(bytes) | ProcessEvent::Stdout(bytes))) => {
                match scan.push(&bytes) {
                    Scan::More => {}
                    Scan::Started { rest } => return Ok(rest),
                    Scan::Failed {
                        stage,
                        errno,
                        detail,
                    } => {
                        return Err(errors::start_failure(
                            StartContext {
                                operation: OP,
                                program: &plan.program,
                                cwd: &plan.cwd,
                                search: &plan.search,
                            },
                            stage,
                            errno,
                            &detail,
                        ));
                    }
                    Scan::Garbage(seen) => return Err(garbled(&seen)),
                }
            }
            Some(Ok(ProcessEvent::Stderr(_))) => {}
            Some(Ok(ProcessEvent::End(end))) => {
                return Err(Error::io(format!(
                    "{OP}: {}: the sandbox helper ended ({}) before starting it; it wrote {:?}",
                    plan.program,
                    end.status,
                    scan.seen()
                )));
            }
            Some(Err(err)) => return Err(control.classify(OP, &err).await.into_error()),
            None => {
                return Err(Error::io(format!(
                    "{OP}: {}: the terminal's stream ended before the program started",
                    plan.program
                )));
            }
        }
    }
}

/// Tears down a session nobody will own.
async fn rollback<T: EnvdTransport>(core: &TerminalCore<T>) {
    if let Err(err) = core.teardown(Duration::ZERO).await {
        tracing::warn!(pid = core.pid, %err, "rolling back a terminal left its session busy");
    }
}

/// Pushes the terminal's output to the handle's stream and publishes the
/// program's exit, until the PTY is done (or the provider disconnects).
async fn pump<T: EnvdTransport>(
    world: &World<T>,
    core: &TerminalCore<T>,
    mut stream: ProcessStream,
    output: mpsc::UnboundedSender<Result<Bytes>>,
    status: watch::Sender<Option<Result<ExitStatus>>>,
    watcher: BoxFuture<'static, Option<ExitStatus>>,
) {
    let disconnect = world.disconnect_token();
    let mut output = Some(output);
    let mut watcher = Some(watcher);
    let publish = |result: Result<ExitStatus>| {
        if status.borrow().is_none() {
            status.send_replace(Some(result));
        }
    };
    loop {
        let event = tokio::select! {
            biased;
            () = disconnect.cancelled() => {
                publish(Err(Error::closed(format!(
                    "wait: terminal {}: the provider was disposed before the program's exit was observed",
                    core.pid
                ))));
                return;
            }
            exited = async { watcher.as_mut().expect("guarded").await }, if watcher.is_some() => {
                watcher = None;
                if let Some(exited) = exited {
                    publish(Ok(exited));
                }
                continue;
            }
            event = stream.next() => event,
        };
        match event {
            Some(Ok(ProcessEvent::Pty(bytes) | ProcessEvent::Stdout(bytes))) => {
                if let Some(tx) = &output
                    && tx.send(Ok(bytes)).is_err()
                {
                    // The stream was dropped: keep draining so the program
                    // never waits on output nobody reads.
                    output = None;
                }
            }
            Some(Ok(ProcessEvent::Stderr(_))) => {}
            Some(Ok(ProcessEvent::End(end))) => {
                publish(crate::status::from_envd(&end, false).ok_or_else(|| {
                    Error::io(format!(
                        "wait: terminal {}: envd reported neither an exit code nor a signal ({})",
                        core.pid, end.status
                    ))
                }));
                // The program and its terminal are done; if nothing else of
                // the session runs, nothing is left to own.
                if matches!(
                    core.control.session_members(core.pid).await,
                    Ok(Ladder::Empty) | Err(ControlError::Gone(_))
                ) {
                    core.proven();
                }
            }
            Some(Err(err)) => {
                if core.control.is_gone(&err).await {
                    core.proven();
                    let gone = Error::unavailable(format!(
                        "terminal {}: the sandbox is gone ({err})",
                        core.pid
                    ));
                    if let Some(tx) = output.take() {
                        let _ = tx.send(Err(gone.clone().context("read terminal output")));
                    }
                    publish(Err(gone.context("wait")));
                    return;
                }
                tracing::warn!(pid = core.pid, %err, "the connection to envd broke; re-attaching to the terminal");
                // Output produced while disconnected is gone: end the
                // stream rather than splice over the gap.
                if let Some(tx) = output.take() {
                    let _ = tx.send(Err(Error::io(format!(
                        "read terminal output: terminal {}: the connection to envd broke ({err}); output from here on is lost",
                        core.pid
                    ))));
                }
                match reattach(core).await {
                    Ok(reattached) => stream = reattached,
                    Err(last) => {
                        publish(Err(Error::io(format!(
                            "wait: terminal {}: the connection to envd broke and could not be re-established ({last}); terminate it to be sure it stopped",
                            core.pid
                        ))));
                        return;
                    }
                }
            }
            None => {
                publish(Err(Error::io(format!(
                    "wait: terminal {}: its stream ended without the program's exit",
                    core.pid
                ))));
                return;
            }
        }
    }
}

/// Re-attaches to the terminal's process after a broken connection.
async fn reattach<T: EnvdTransport>(
    core: &TerminalCore<T>,
) -> std::result::Result<ProcessStream, String> {
    let mut pause = Duration::from_millis(200);
    let mut last = String::new();
    for _ in 0..5 {
        match core
            .control
            .envd()
            .connect_process(core.pid, &StreamOptions::default())
            .await
        {
            Ok(stream) => return Ok(stream),
            Err(err) if err.is_not_found() => return Err(err.to_string()),
            Err(err) => last = err.to_string(),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
    Err(last)
}

/// The shared core of one terminal, also held by the provider's registry.
pub struct TerminalCore<T: EnvdTransport> {
    pid: u32,
    control: Controller<T>,
    gate: Gate,
    /// Keeps concurrent writes from interleaving.
    writing: tokio::sync::Mutex<()>,
    quiescent: AtomicBool,
    membership: Membership,
    kill_grace: Duration,
    status: watch::Receiver<Option<Result<ExitStatus>>>,
}

impl<T: EnvdTransport> TerminalCore<T> {
    fn proven(&self) {
        self.quiescent.store(true, Ordering::Release);
        self.membership.leave();
    }

    /// Closes the gate (rejecting new operations, cancelling and joining
    /// the ones in flight), then tears the session down.
    async fn terminate(&self) -> Result<()> {
        let _closed = self.gate.close().await;
        self.teardown(self.kill_grace).await
    }

    /// SIGHUP and SIGCONT to every member of the session, `grace`, SIGKILL
    /// until a scan finds it empty — inside the sandbox, one round trip.
    /// If that cannot run, the session leader is killed through envd as a
    /// fallback. A no-op once proven.
    async fn teardown(&self, grace: Duration) -> Result<()> {
        if self.quiescent.load(Ordering::Acquire) {
            return Ok(());
        }
        let busy = |what: String| {
            Error::new(
                ErrorKind::Busy,
                format!(
                    "terminate: terminal session {} not proven empty: {what}; retry terminate",
                    self.pid
                ),
            )
            .with_subject(self.pid.to_string())
        };
        match self
            .control
            .teardown_session(self.pid, grace, KILL_SETTLE)
            .await
        {
            Ok(Ladder::Empty) | Err(ControlError::Gone(_)) => {
                self.proven();
                Ok(())
            }
            Ok(Ladder::Busy(what)) => Err(busy(format!("still alive after SIGKILL: {what}"))),
            Err(ControlError::Failed(err)) => {
                let fallback = self.control.kill(Selector::Pid(self.pid)).await;
                match fallback {
                    Err(kill_err) if self.control.is_gone(&kill_err).await => {
                        self.proven();
                        Ok(())
                    }
                    Err(kill_err) => Err(busy(format!(
                        "the teardown could not run ({err}) and killing the program failed ({kill_err})"
                    ))),
                    Ok(()) => Err(busy(format!(
                        "the teardown could not run ({err}); the program was killed"
                    ))),
                }
            }
        }
    }

    fn control_error(&self, err: ControlError) -> Error {
        err.into_error().with_subject(self.pid.to_string())
    }
}

#[async_trait]
impl<T: EnvdTransport> Owned for TerminalCore<T> {
    async fn stop(&self) -> Result<()> {
        self.terminate().await
    }
}

/// A terminal started by `E2bSubprocess::spawn_terminal`.
pub struct E2bTerminal<T: EnvdTransport> {
    core: Arc<TerminalCore<T>>,
    output: Mutex<Option<mpsc::UnboundedReceiver<Result<Bytes>>>>,
}

#[async_trait]
impl<T: EnvdTransport> Terminal for E2bTerminal<T> {
    fn pid(&self) -> u32 {
        self.core.pid
    }

    /// Everything the program writes to the terminal, pushed as it arrives
    /// (a paused consumer buffers in host memory). Ends when the terminal
    /// closes; a gone sandbox or a lost connection ends it with an error.
    fn take_output(&self) -> Option<ByteStream> {
        let mut output = self
            .output
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        Some(Box::pin(futures::stream::poll_fn(move |cx| {
            output.poll_recv(cx)
        })))
    }

    /// Writes all of `data` as typed input (one envd call, waiting while
    /// the terminal's input queue is full); `terminate` cancels the wait.
    async fn write(&self, data: Bytes) -> Result<()> {
        let core = &self.core;
        core.gate
            .run("write", async {
                let _writing = core.writing.lock().await;
                // Unbounded: a full input queue keeps the write waiting.
                core.control
                    .envd()
                    .send_pty_input(core.pid, data, &CallOptions::default().no_timeout())
                    .await
                    .map_err(|err| match &err {
                        e2b_client::Error::NotFound { .. }
                        | e2b_client::Error::Rpc {
                            code: ErrorCode::Internal,
                            ..
                        } => Error::closed(format!(
                            "write: terminal {} has no process left",
                            core.pid
                        ))
                        .with_subject(core.pid.to_string()),
                        _ => errors::client(&format!("write to terminal {}", core.pid), &err),
                    })
            })
            .await
    }

    /// Changes the window size; the foreground program gets SIGWINCH.
    async fn resize(&self, cols: u16, rows: u16) -> Result<()> {
        check_resize(cols, rows)?;
        let core = &self.core;
        core.gate
            .run("resize", async {
                core.control
                    .envd()
                    .resize_pty(
                        core.pid,
                        PtySize {
                            cols: u32::from(cols),
                            rows: u32::from(rows),
                        },
                        &CallOptions::default(),
                    )
                    .await
                    .map_err(|err| errors::client(&format!("resize terminal {}", core.pid), &err))
            })
            .await
    }

    /// The terminal's foreground process group, read in the sandbox.
    async fn foreground_pgid(&self) -> Result<u32> {
        let core = &self.core;
        core.gate
            .run("foreground_pgid", async {
                core.control
                    .foreground(core.pid)
                    .await
                    .map_err(|err| core.control_error(err))
            })
            .await
    }

    /// Sends `signal` to the foreground process group (read and signalled
    /// in one step inside the sandbox). Numbers outside 1..=SIGRTMAX are
    /// `InvalidInput`.
    async fn signal(&self, signal: Signal) -> Result<()> {
        if !dsh_process_group::signal::is_signal_number(signal.0) {
            return Err(Error::invalid_input(format!(
                "signal: {signal} is not a valid signal number"
            )));
        }
        let core = &self.core;
        core.gate
            .run("signal", async {
                core.control
                    .signal_foreground(core.pid, signal.0)
                    .await
                    .map(drop)
                    .map_err(|err| core.control_error(err))
            })
            .await
    }

    /// Tears down every process group of the session (see
    /// `TerminalCore::teardown`); new operations are rejected from the
    /// start and in-flight ones joined. `Busy` if not proven empty;
    /// retrying is allowed; a no-op once it succeeded.
    async fn terminate(&self) -> Result<()> {
        self.core.terminate().await
    }

    /// Waits for the program to exit (envd reports it once the terminal
    /// closed). Idempotent.
    async fn wait(&self) -> Result<ExitStatus> {
        let subject = format!("terminal {}", self.core.pid);
        wait_published(&self.core.status, &subject, "pump").await
    }
}
