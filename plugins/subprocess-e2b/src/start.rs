//! Starting one command: `spawn` validates and prepares everything, then
//! hands the start to a task on the provider's runtime and awaits its
//! answer. The task owns the whole transaction, so dropping `spawn`'s
//! future cannot leave a half-started command: a start whose caller is gone
//! is killed (by its envd tag when its pid never reached us), and a handle
//! nobody claims is rolled back (see `Delivery`). Once the handle is out,
//! the same task becomes the command's supervisor (`crate::supervise`).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use dsh_plugin_api::subprocess::{OutputMode, OutputStream, Process, SpawnSpec, StdinMode};
use dsh_plugin_api::{Error, ErrorKind, Result};
use e2b_client::{Command, ProcessEvent, ProcessStream};
use futures::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};

use crate::control::Controller;
use crate::delivery::{Delivery, deferred};
use crate::errors::{self, StartContext};
use crate::frames::{Decoder, Frame};
use crate::group::Group;
use crate::output::OutputState;
use crate::pipe;
use crate::process::E2bProcess;
use crate::setup::Setup;
use crate::stdin::StdinWriter;
use crate::supervise::{Diagnostics, Sink, Supervisor};
use crate::transport::EnvdTransport;
use crate::wire::{self, Launch, ProbeFor, Relay, RunRequest, Spill};
use crate::world::{Ready, World};
use dsh_supervisor::ambient::search_dirs;

/// Whom a command runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAs {
    /// The sandbox user (every command of the seam).
    User,
    /// Root: the provider's own helpers that read root-owned state (a
    /// durable command's follower).
    Root,
}

/// Starts `spec` in `world` as the sandbox user (see the module docs).
pub async fn spawn<T: EnvdTransport>(
    world: &Arc<World<T>>,
    spec: SpawnSpec,
) -> Result<Arc<dyn Process>> {
    spawn_as(world, spec, RunAs::User).await
}

/// Starts `spec` in `world` as `run_as`.
pub async fn spawn_as<T: EnvdTransport>(
    world: &Arc<World<T>>,
    spec: SpawnSpec,
    run_as: RunAs,
) -> Result<Arc<dyn Process>> {
    spec.validate()?;
    world.check_open(OP)?;
    loop {
        match spawn_once(world, &spec, run_as).await? {
            Attempt::Started(process) => return Ok(process),
            // Nothing ran, and the world no longer offers the copy: again,
            // as in a sandbox without it.
            Attempt::NoTemplateCopy => {}
        }
    }
}

/// The operation's name in errors.
const OP: &str = "spawn";

/// What one attempt at a start came to.
enum Attempt {
    Started(Arc<dyn Process>),
    /// The first command ran the template's copy of the helper, which was
    /// not there ([`first_frame`]); the world now knows.
    NoTemplateCopy,
}

/// One attempt at starting `spec` (checked by the caller) as `run_as`.
async fn spawn_once<T: EnvdTransport>(
    world: &Arc<World<T>>,
    spec: &SpawnSpec,
    run_as: RunAs,
) -> Result<Attempt> {
    let known = Known::of(world, OP, run_as).await?;
    let tried_copy = matches!(known, Known::Probing(_));
    let cwd = world.working_dir(OP, spec.cwd.as_deref())?;
    let (control, identity, env, search, probing) = match known {
        Known::Ready(ready) => {
            let env = ready.setup.ambient.for_command(&spec.env, &cwd);
            let identity = match run_as {
                RunAs::User => ready.setup.identity.clone(),
                RunAs::Root => wire::Identity::root(),
            };
            let search = search_dirs(&env.path);
            (ready.control.clone(), identity, env.entries, search, None)
        }
        // The helper sets the identity, the environment (from the explicit
        // entries) and the search path once it has learned them.
        Known::Probing(control) => {
            let explicit = spec
                .env
                .iter()
                .map(|(name, value)| format!("{name}={value}"));
            let probing = Probing {
                user: world.user().to_owned(),
                explicit: spec.env.clone(),
            };
            (
                *control,
                wire::Identity::unlearned(),
                explicit.collect(),
                Vec::new(),
                Some(probing),
            )
        }
    };
    let seq = world.next_seq();
    let spill = spec.spill.map(|spill| Spill {
        dir: world.use_spill_dir().to_owned(),
        stdout: format!("{seq}.stdout"),
        stderr: format!("{seq}.stderr"),
        limit: spill.limit,
    });
    // The helper gives a merged stderr stdout's pipe (docs/design.md §5.2).
    let relay = |mode: OutputMode| match mode {
        OutputMode::Null => Relay::Count,
        OutputMode::IntoStdout => Relay::Merged,
        OutputMode::Pipe | OutputMode::Inherit | OutputMode::Collect { .. } => Relay::Data,
    };
    let request = RunRequest {
        launch: Launch {
            identity,
            argv: spec.argv.clone(),
            env,
            cwd: cwd.clone(),
            search: search.clone(),
        },
        stdout: relay(spec.stdout),
        stderr: relay(spec.stderr),
        spill: spill.clone(),
        probe: probing.as_ref().map(|probing| ProbeFor {
            user: probing.user.clone(),
        }),
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
    let command = control
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
        probing,
    };
    let (answer, outcome) = oneshot::channel();
    world.check_open(OP)?;
    world
        .tracker()
        .spawn(start(Arc::clone(world), control, plan, answer));
    // Claimed in the same poll it arrives in (see `Delivery`).
    match outcome.await {
        Ok(Ok(delivery)) => Ok(Attempt::Started(delivery.claim())),
        Ok(Err(_)) if tried_copy && world.template_copy().is_none() => Ok(Attempt::NoTemplateCopy),
        Ok(Err(err)) => Err(err),
        Err(_) => Err(Error::io(
            "spawn: the start task ended without an answer (the provider's runtime is shutting down)",
        )),
    }
}

/// How a start knows the sandbox.
enum Known<T: EnvdTransport> {
    /// Prepared: the command's identity and environment are composed here.
    Ready(Arc<Ready<T>>),
    /// Not yet, and the template holds the helper (this control's): the
    /// command learns the sandbox itself, in its helper, and the world
    /// learns it from the command's first frame — one process in the
    /// sandbox instead of a probe and then the command
    /// (docs/design.md §6.3). Boxed: a control is large, and rare here.
    Probing(Box<Controller<T>>),
}

impl<T: EnvdTransport> Known<T> {
    async fn of(world: &World<T>, op: &str, run_as: RunAs) -> Result<Known<T>> {
        if let Some(ready) = world.ready_now() {
            return Ok(Known::Ready(ready));
        }
        if run_as == RunAs::User
            && let Some(helper) = world.template_copy()
        {
            return Ok(Known::Probing(Box::new(world.controller(helper))));
        }
        world.ready(op).await.map(Known::Ready)
    }
}

/// A first command's learning of the sandbox: for whom, and its explicit
/// environment (to name the directories it searched).
struct Probing {
    user: String,
    explicit: BTreeMap<String, String>,
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
    probing: Option<Probing>,
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

/// The start transaction, then supervision (see the module docs).
async fn start<T: EnvdTransport>(
    world: Arc<World<T>>,
    control: Controller<T>,
    mut plan: Plan,
    answer: oneshot::Sender<Started>,
) {
    if answer.is_closed() {
        // The caller gave up before anything started.
        return;
    }
    let mut stream = match control
        .start_helper("spawn", &plan.command, &plan.tag)
        .await
    {
        Ok(stream) => stream,
        Err(err) => {
            let _ = answer.send(Err(err.with_subject(plan.program.clone())));
            return;
        }
    };
    let helper = stream.pid();
    let mut decoder = Decoder::default();
    let mut backlog = VecDeque::new();
    let mut diagnostics = Diagnostics::default();
    let started = first_frame(
        &world,
        &control,
        &mut plan,
        &mut stream,
        &mut decoder,
        &mut backlog,
        &mut diagnostics,
    )
    .await;
    let (pid, starttime) = match started {
        Ok(started) => started,
        Err(err) => {
            // The helper may have started the command: its death kills it
            // (a helper that reported a failed start is exiting anyway).
            control.kill_helper(helper).await;
            let _ = answer.send(Err(err));
            return;
        }
    };
    let answer = Answer(Some(answer));
    if pid <= 1 {
        control.kill_helper(helper).await;
        answer.send(Err(Error::new(
            ErrorKind::Remote,
            format!(
                "spawn: {}: the sandbox helper reported process group {pid}, which is never signalled",
                plan.program
            ),
        )));
        return;
    }

    let group = Arc::new(Group::new(pid, helper, control.clone(), world.kill_grace()));
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
                world
                    .tracker()
                    .spawn(crate::inherit::forward_to_host(rx, stream, pid));
            }
            OutputMode::Collect { .. } | OutputMode::Null | OutputMode::IntoStdout => {}
        }
    }
    let stdin = (plan.stdin == StdinMode::Pipe)
        .then(|| StdinWriter::new(Arc::clone(&world), control.envd().clone(), helper, pid));
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
        deferred(world.tracker(), async move { rollback(&group).await })
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

/// Reads until the helper says the command started (its pid and the
/// helper's start time) or could not start (the error for the caller);
/// what a probing helper learned first goes to `world` ([`World::learned`]);
/// anything else is an error too.
async fn first_frame<T: EnvdTransport>(
    world: &World<T>,
    control: &Controller<T>,
    plan: &mut Plan,
    stream: &mut ProcessStream,
    decoder: &mut Decoder,
    backlog: &mut VecDeque<Frame>,
    diagnostics: &mut Diagnostics,
) -> Result<(u32, u64)> {
    let mut frames = Vec::new();
    let mut heard = false;
    loop {
        match stream.next().await {
            Some(Ok(ProcessEvent::Stdout(bytes))) => {
                heard = true;
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
                            return Ok((pid, starttime));
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
                        Frame::Probed(record) if let Some(probing) = &plan.probing => {
                            let setup = Setup::probed(
                                &record.0,
                                &probing.user,
                                control.helper().to_owned(),
                                true,
                            )
                            .map_err(|err| err.context("spawn"))?;
                            plan.search = search_dirs(
                                &setup.ambient.for_command(&probing.explicit, &plan.cwd).path,
                            );
                            world.learned(setup, control.clone());
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
                // envd starts every program through `/bin/sh -c 'exec "$@"'`
                // (docs/e2b-protocol.md §5.4): a template copy that is not
                // there, or cannot be run, ends so before it said anything.
                if plan.probing.is_some()
                    && !heard
                    && end.exited
                    && matches!(end.exit_code, 126 | 127)
                {
                    world.mark_template_copy_missing();
                }
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
