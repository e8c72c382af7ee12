//! Starting one command: checks, plumbing, launch, supervision.
//!
//! Everything from the launch to the returned handle is synchronous, so a
//! caller dropping `spawn`'s future can never observe (or leak) a half-set-up
//! command: either nothing started, or the handle is complete and the
//! provider owns the group.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use dsh_plugin_api::subprocess::{OutputMode, OutputStream, SpawnSpec, StdinMode};
use dsh_plugin_api::{Error, Result};
use rustix::process::Pid;
use tokio::io::Interest;
use tokio::sync::watch;

use crate::fdio::{self, NonBlocking};
use crate::group::Group;
use crate::launch::{self, FdAction, Launch};
use crate::leader::Leader;
use crate::output::OutputState;
use crate::pipe_stream::PipeStream;
use crate::process::{self, LocalProcess, Parts, Pump, Supervision};
use crate::provider::World;
use crate::pump::{self, Copy};
use crate::registry::Owned;
use crate::stdin::StdinWriter;

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
    world.check_open("spawn")?;
    let cwd = world.working_dir("spawn", spec.cwd.as_deref())?;
    let env = world.env().block(&spec.env);
    let program = crate::resolve::find_program("spawn", &spec.argv[0], env.search_path(), &[])?;

    let seq = world.next_seq();
    let mut outputs = Vec::with_capacity(2);
    for (stream, mode) in [
        (OutputStream::Stdout, spec.stdout),
        (OutputStream::Stderr, spec.stderr),
    ] {
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

    let program_c = c_path(&program);
    let argv_c: Vec<CString> = spec
        .argv
        .iter()
        .map(|arg| CString::new(arg.as_bytes()).expect("validated: no NUL"))
        .collect();
    let argv: Vec<&CStr> = argv_c.iter().map(CString::as_c_str).collect();
    let envp: Vec<&CStr> = env.entries().iter().map(AsRef::as_ref).collect();
    let cwd_c = c_path(&cwd);
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
    let pid = launch::spawn(&Launch {
        program: &program_c,
        argv: &argv,
        env: &envp,
        cwd: &cwd_c,
        fds: &fds,
    })
    .map_err(|err| launch_error("spawn", &spec.argv[0], &program, &err))?;

    // The child owns its ends now; ours must close so EOF can happen.
    let stdin_write = stdin_pipe.map(|(_, write)| write);
    let outputs: Vec<(OutputStream, OutputMode, OwnedFd, Arc<OutputState>)> = outputs
        .into_iter()
        .map(|plan| (plan.stream, plan.mode, plan.read, plan.state))
        .collect();

    match assemble(world, spec, pid, stdin_write, outputs) {
        Ok(process) => Ok(process),
        Err(err) => {
            rollback(pid);
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
    let group = Arc::new(Group::new(leader));

    let stdin_writer = match stdin_write {
        Some(fd) => Some(StdinWriter::new(
            NonBlocking::new(fd, Interest::WRITABLE)
                .map_err(|err| io_error("register stdin", err))?,
            raw_pid,
        )),
        None => None,
    };
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
                Copy::Host(stream),
                raw_pid,
            ))),
            OutputMode::Collect { .. } | OutputMode::Null => {
                pumps.push(Box::pin(pump::pump(
                    pipe,
                    state.clone(),
                    Copy::Nowhere,
                    raw_pid,
                )));
            }
        }
        states.push(state);
    }
    let stderr = states.pop().expect("two outputs");
    let stdout = states.pop().expect("two outputs");
    let [stdout_pipe, stderr_pipe] = pipes;

    world
        .registry()
        .insert("spawn", Owned::Group(group.clone()), group.ticket())?;
    let (status_tx, status_rx) = watch::channel(None);
    world.tracker().spawn(process::supervise(Supervision {
        group: group.clone(),
        pumps,
        timeout: spec.timeout,
        drain_grace: spec.drain_grace,
        kill_grace: world.kill_grace(),
        disconnect: world.disconnect_token(),
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
    }))
}

/// Kills and reaps a child whose handle could not be completed. It has run
/// for microseconds and is a fresh group leader, so SIGKILL to the group
/// ends it and everything it may have forked; the blocking reap returns as
/// soon as the kernel has torn it down.
pub fn rollback(pid: Pid) {
    let _ = crate::proc_table::signal_group(pid.as_raw_nonzero().get(), libc::SIGKILL);
    let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
}

/// Maps a failed `posix_spawn` to the seam's vocabulary.
pub fn launch_error(operation: &str, name: &str, program: &Path, err: &std::io::Error) -> Error {
    let subject = program.display().to_string();
    match err.raw_os_error() {
        Some(libc::ENOENT) => Error::not_found(format!(
            "{operation}: {name}: program or its interpreter not found"
        )),
        Some(libc::EACCES) => Error::new(
            dsh_plugin_api::ErrorKind::PermissionDenied,
            format!("{operation}: {name}: permission denied"),
        ),
        Some(libc::ENOEXEC) => {
            Error::invalid_input(format!("{operation}: {name}: not an executable format"))
        }
        _ => Error::from_io(&format!("{operation}: {name}"), err),
    }
    .with_subject(subject)
}

pub fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes())
        .expect("paths from the OS or validated strings have no NUL")
}
