//! Starting one command: checks, plumbing, launch, supervision.
//!
//! Everything from the launch to the returned handle is synchronous, so a
//! caller dropping `spawn`'s future can never observe (or leak) a half-set-up
//! command: either nothing started, or the handle is complete and the
//! provider owns the group.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use dsh_plugin_api::subprocess::{OutputMode, OutputStream, SpawnSpec, StdinMode};
use dsh_plugin_api::{Error, Result};
use rustix::process::Pid;
use tokio::io::Interest;
use tokio::sync::watch;

use crate::fdio::{self, NonBlocking};
use crate::group::Group;
use crate::launch::FdAction;
use crate::leader::Leader;
use crate::output::OutputState;
use crate::pipe_stream::PipeStream;
use crate::prepare;
use crate::process::{self, LocalProcess, Parts, Pump, Supervision};
use crate::pump::{self, Forward};
use crate::stdin::StdinWriter;
use crate::world::World;

const DEV_NULL: &CStr = c"/dev/null";

/// One output stream's plumbing before launch.
struct OutputPlan {
    stream: OutputStream,
    mode: OutputMode,
    read: OwnedFd,
    write: OwnedFd,
    state: Arc<OutputState>,
}

/// Starts `spec` in `world`. Must run on the plugin's runtime.
pub fn start(world: &World, spec: &SpawnSpec) -> Result<LocalProcess> {
    spec.validate()?;
    let checked = prepare::check(world, "spawn", &spec.argv, spec.cwd.as_deref(), &spec.env)?;

    let seq = world.next_seq();
    // A merged stderr has no pipe of its own: fd 2 is a second copy of
    // stdout's write end (docs/design.md §5.2).
    let merged = spec.stderr == OutputMode::IntoStdout;
    let streams: &[(OutputStream, OutputMode)] = if merged {
        &[(OutputStream::Stdout, spec.stdout)]
    } else {
        &[
            (OutputStream::Stdout, spec.stdout),
            (OutputStream::Stderr, spec.stderr),
        ]
    };
    let mut outputs = Vec::with_capacity(2);
    for &(stream, mode) in streams {
        let spill = match spec.spill {
            Some(spill) => Some(
                world
                    .spills()
                    .create(&format!("{seq}.{}", stream.as_str()), spill.limit)?,
            ),
            None => None,
        };
        let (read, write) =
            fdio::pipe().map_err(|err| Error::from_io("spawn: create output pipe", &err))?;
        outputs.push(OutputPlan {
            stream,
            mode,
            read,
            write,
            state: Arc::new(OutputState::new(mode, spill)),
        });
    }
    let stdin_pipe = match spec.stdin {
        StdinMode::Null => None,
        StdinMode::Pipe => {
            Some(fdio::pipe().map_err(|err| Error::from_io("spawn: create stdin pipe", &err))?)
        }
    };

    let mut fds = Vec::with_capacity(3);
    match &stdin_pipe {
        Some((read, _)) => fds.push(FdAction::Dup {
            src: read.as_raw_fd(),
            target: 0,
        }),
        None => fds.push(FdAction::Open {
            target: 0,
            path: DEV_NULL,
            flags: libc::O_RDONLY,
        }),
    }
    for (target, plan) in (1..).zip(&outputs) {
        fds.push(FdAction::Dup {
            src: plan.write.as_raw_fd(),
            target,
        });
    }
    if merged {
        fds.push(FdAction::Dup {
            src: outputs[0].write.as_raw_fd(),
            target: 2,
        });
    }
    let pid = checked.launch(&fds)?;

    // The child owns its ends now; ours must close so EOF can happen.
    let stdin_write = stdin_pipe.map(|(_, write)| write);
    let outputs: Vec<(OutputStream, OutputMode, OwnedFd, Arc<OutputState>)> = outputs
        .into_iter()
        .map(|plan| (plan.stream, plan.mode, plan.read, plan.state))
        .collect();

    match assemble(world, spec, pid, stdin_write, outputs) {
        Ok(process) => Ok(process),
        Err(err) => {
            prepare::rollback(pid);
            Err(err)
        }
    }
}

/// Wraps the parent's descriptors, registers the group and starts the
/// supervisor. On error the caller kills and reaps the child.
fn assemble(
    world: &World,
    spec: &SpawnSpec,
    pid: Pid,
    stdin_write: Option<OwnedFd>,
    outputs: Vec<(OutputStream, OutputMode, OwnedFd, Arc<OutputState>)>,
) -> Result<LocalProcess> {
    let raw_pid = pid.as_raw_nonzero().get() as u32;
    let io_error = |what: &str, err: std::io::Error| {
        Error::from_io(&format!("spawn: {what} of process {raw_pid}"), &err)
    };
    let leader = Leader::open(pid).map_err(|err| io_error("watch exit", err))?;
    let group = Arc::new(Group::new(leader, world.kill_grace()));

    let stdin_writer = match stdin_write {
        Some(fd) => Some(StdinWriter::new(
            NonBlocking::new(fd, Interest::WRITABLE)
                .map_err(|err| io_error("register stdin", err))?,
            raw_pid,
        )),
        None => None,
    };
    let stop_pumps = world.disconnect_token().child_token();
    let mut pumps: Vec<Pump> = Vec::new();
    let mut pipes: [Option<PipeStream>; 2] = [None, None];
    let mut states = Vec::with_capacity(2);
    for (index, (stream, mode, read, state)) in outputs.into_iter().enumerate() {
        let pipe = NonBlocking::new(read, Interest::READABLE)
            .map_err(|err| io_error(&format!("register {}", stream.as_str()), err))?;
        match mode {
            OutputMode::Pipe => {
                pipes[index] = Some(PipeStream::new(pipe, state.clone(), stream, raw_pid))
            }
            OutputMode::Inherit => pumps.push(Box::pin(pump::pump(
                pipe,
                state.clone(),
                Forward::Host(stream),
                raw_pid,
                stop_pumps.clone(),
            ))),
            OutputMode::Collect { .. } | OutputMode::Null | OutputMode::IntoStdout => {
                pumps.push(Box::pin(pump::pump(
                    pipe,
                    state.clone(),
                    Forward::Nowhere,
                    raw_pid,
                    stop_pumps.clone(),
                )));
            }
        }
        states.push(state);
    }
    let stderr = if states.len() == 2 {
        states.pop().expect("two outputs")
    } else {
        // Merged into stdout: a stream that never produces a byte.
        Arc::new(OutputState::new(OutputMode::IntoStdout, None))
    };
    let stdout = states.pop().expect("a stdout");
    let [stdout_pipe, stderr_pipe] = pipes;

    world
        .registry()
        .adopt("spawn", group.clone(), group.membership())?;
    let (status_tx, status_rx) = watch::channel(None);
    let direct = (pumps.is_empty() && spec.timeout.is_none()).then(|| world.abandon_token());
    world.tracker().spawn(process::supervise(Supervision {
        group: group.clone(),
        pumps,
        timeout: spec.timeout,
        drain_grace: spec.drain_grace,
        kill_grace: world.kill_grace(),
        stop_pumps,
        abandon: world.abandon_token(),
        status: status_tx,
    }));
    Ok(LocalProcess::new(Parts {
        group,
        stdout,
        stderr,
        stdin_writer,
        stdout_pipe,
        stderr_pipe,
        status: status_rx,
        direct,
    }))
}
