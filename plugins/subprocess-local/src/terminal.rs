//! Terminals: a program on a real PTY, in its own session with the PTY as
//! its controlling terminal.
//!
//! The requested argv is exec'd directly (no wrapper shell), so the output
//! stream carries exactly the bytes the program and its jobs write. Output
//! is read continuously by a task and pushed into the stream's buffer: a
//! paused consumer accumulates it in host memory, a dropped stream makes
//! the task discard it, and the program never blocks on an unread terminal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::subprocess::{ExitStatus, Signal, Terminal, TerminalSpec};
use dsh_plugin_api::{Bytes, Error, ErrorKind, Result};
use dsh_provider_kit::gate::Gate;
use dsh_provider_kit::terminal::check_resize;
use tokio::io::Interest;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::fdio::{CHUNK, NonBlocking};
use crate::launch::FdAction;
use crate::leader::Leader;
use crate::registry::{Membership, Owned};
use crate::world::World;
use crate::{prepare, pty, session};

/// The shared core of one terminal, also held by the provider's registry.
#[derive(Debug)]
pub struct TerminalCore {
    leader: Leader,
    master: NonBlocking,
    gate: Gate,
    /// Keeps concurrent writes from interleaving.
    writing: tokio::sync::Mutex<()>,
    quiescent: AtomicBool,
    membership: Membership,
    kill_grace: Duration,
    abandon: CancellationToken,
}

impl TerminalCore {
    fn pid(&self) -> u32 {
        self.leader.pid().as_raw_nonzero().get() as u32
    }

    /// Tears the session down (see [`Terminal::terminate`]).
    pub async fn terminate(&self) -> Result<()> {
        let _closed = self.gate.close().await;
        if self.quiescent.load(Ordering::Acquire) {
            return Ok(());
        }
        match session::teardown(&self.leader, self.kill_grace).await {
            Ok(()) => {
                self.proven();
                Ok(())
            }
            Err(detail) => Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "terminate: terminal session {} not proven empty: {detail}; retry terminate",
                    self.pid()
                ),
            )
            .with_subject(self.pid().to_string())),
        }
    }

    fn proven(&self) {
        self.quiescent.store(true, Ordering::Release);
        self.membership.leave();
    }

    fn foreground(&self, operation: &str) -> Result<i32> {
        match rustix::termios::tcgetpgrp(self.master.as_fd()) {
            Ok(pgid) => Ok(pgid.as_raw_nonzero().get()),
            Err(errno) => Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "{operation}: terminal {} has no foreground process group ({errno})",
                    self.pid()
                ),
            )),
        }
    }
}

/// A terminal started by `LocalSubprocess::spawn_terminal`.
pub struct LocalTerminal {
    core: Arc<TerminalCore>,
    output: Mutex<Option<mpsc::UnboundedReceiver<Bytes>>>,
}

#[async_trait]
impl Owned for TerminalCore {
    /// Tears the session down with the kill grace the terminal was started
    /// with — the provider's, the same `grace` disposal passes.
    async fn stop(&self) -> Result<()> {
        self.terminate().await
    }
}

#[async_trait]
impl Terminal for LocalTerminal {
    fn pid(&self) -> u32 {
        self.core.pid()
    }

    fn take_output(&self) -> Option<ByteStream> {
        let mut output = self.output.lock().expect("output lock").take()?;
        Some(Box::pin(futures::stream::poll_fn(move |cx| {
            output.poll_recv(cx).map(|chunk| chunk.map(Ok))
        })))
    }

    /// Writes all of `data` to the terminal's input. Waits while the
    /// terminal's input queue is full; `terminate` cancels the wait.
    async fn write(&self, data: Bytes) -> Result<()> {
        let core = &self.core;
        core.gate
            .run("write", async {
                let _writing = core.writing.lock().await;
                core.master.write_all(&data).await.map_err(|err| {
                    if err.raw_os_error() == Some(libc::EIO) {
                        Error::closed(format!(
                            "write: terminal {} has no process left",
                            core.pid()
                        ))
                    } else {
                        Error::from_io(&format!("write to terminal {}", core.pid()), &err)
                    }
                })
            })
            .await
    }

    async fn resize(&self, cols: u16, rows: u16) -> Result<()> {
        check_resize(cols, rows)?;
        let core = &self.core;
        core.gate
            .run("resize", async {
                pty::resize(core.master.as_fd(), cols, rows)
                    .map_err(|err| Error::from_io(&format!("resize terminal {}", core.pid()), &err))
            })
            .await
    }

    async fn foreground_pgid(&self) -> Result<u32> {
        let core = &self.core;
        core.gate
            .run("foreground_pgid", async {
                core.foreground("foreground_pgid").map(|pgid| pgid as u32)
            })
            .await
    }

    /// Sends `signal` to the foreground process group. Signal numbers
    /// outside 1..=SIGRTMAX are `InvalidInput`.
    async fn signal(&self, signal: Signal) -> Result<()> {
        if !dsh_process_group::signal::is_signal_number(signal.0) {
            return Err(Error::invalid_input(format!(
                "signal: {signal} is not a valid signal number"
            )));
        }
        let core = &self.core;
        core.gate
            .run("signal", async {
                let pgid = core.foreground("signal")?;
                dsh_process_group::signal::signal_group(pgid, signal.0).map_err(|err| {
                    Error::from_io(&format!("signal: {signal} to process group {pgid}"), &err)
                        .with_subject(pgid.to_string())
                })
            })
            .await
    }

    async fn terminate(&self) -> Result<()> {
        self.core.terminate().await
    }

    /// Waits for the requested program to exit (jobs it left behind are not
    /// waited for; `terminate` ends them). Idempotent.
    async fn wait(&self) -> Result<ExitStatus> {
        let outcome = tokio::select! {
            outcome = self.core.leader.reap() => outcome,
            () = self.core.abandon.cancelled() => Err("the provider was disposed before the exit could be observed".to_owned()),
        };
        match outcome {
            Ok(exit) => Ok(exit.status(false)),
            Err(message) => Err(Error::io(format!(
                "wait: terminal {}: {message}",
                self.pid()
            ))),
        }
    }
}

/// Starts `spec` on a new PTY in `world`. Synchronous from the launch to the
/// returned handle, like [`crate::command::start`].
pub fn start(world: &World, spec: &TerminalSpec) -> Result<Arc<LocalTerminal>> {
    const OPERATION: &str = "spawn_terminal";
    spec.validate()?;
    let checked = prepare::check(world, OPERATION, &spec.argv, spec.cwd.as_deref(), &spec.env)?;
    let pty = pty::open(spec.cols, spec.rows)
        .map_err(|err| Error::from_io("spawn_terminal: open a pseudo-terminal", &err))?;

    let fds = [
        FdAction::Open {
            target: 0,
            path: &pty.slave_path,
            flags: libc::O_RDWR,
        },
        FdAction::Dup { src: 0, target: 1 },
        FdAction::Dup { src: 0, target: 2 },
    ];
    let pid = checked.launch(&fds)?;

    let assembled = (|| {
        let leader = Leader::open(pid)?;
        let master = NonBlocking::new(pty.master, Interest::READABLE | Interest::WRITABLE)?;
        Ok::<_, std::io::Error>((leader, master))
    })();
    let (leader, master) = match assembled {
        Ok(parts) => parts,
        Err(err) => {
            prepare::rollback(pid);
            return Err(Error::from_io("spawn_terminal: watch the terminal", &err));
        }
    };
    let core = Arc::new(TerminalCore {
        gate: Gate::new(format!("terminal {}", pid.as_raw_nonzero())),
        leader,
        master,
        writing: tokio::sync::Mutex::new(()),
        quiescent: AtomicBool::new(false),
        membership: Membership::default(),
        kill_grace: world.kill_grace(),
        abandon: world.abandon_token(),
    });
    if let Err(err) = world
        .registry()
        .adopt(OPERATION, core.clone(), &core.membership)
    {
        prepare::rollback(pid);
        return Err(err);
    }
    let (tx, rx) = mpsc::unbounded_channel();
    world
        .tracker()
        .spawn(supervise(core.clone(), tx, world.disconnect_token()));
    Ok(Arc::new(LocalTerminal {
        core,
        output: Mutex::new(Some(rx)),
    }))
}

/// Reads the terminal until no process holds it, and reaps the program;
/// when the program has exited and its session is empty, the terminal
/// leaves the registry.
async fn supervise(
    core: Arc<TerminalCore>,
    output: mpsc::UnboundedSender<Bytes>,
    disconnect: CancellationToken,
) {
    let read = async {
        tokio::select! {
            () = pump(&core, output) => {}
            () = disconnect.cancelled() => {}
        }
    };
    let reap = async {
        tokio::select! {
            outcome = core.leader.reap() => {
                if outcome.is_ok() && session::is_empty(&core.leader).unwrap_or(false) {
                    core.proven();
                }
            }
            () = core.abandon.cancelled() => {}
        }
    };
    tokio::join!(read, reap);
}

async fn pump(core: &TerminalCore, output: mpsc::UnboundedSender<Bytes>) {
    let mut buf = vec![0u8; CHUNK];
    let mut consumer = Some(output);
    loop {
        match core.master.read(&mut buf).await {
            Ok(0) => return,
            Ok(n) => {
                if let Some(tx) = &consumer
                    && tx.send(Bytes::copy_from_slice(&buf[..n])).is_err()
                {
                    // The stream was dropped: keep draining so the
                    // program never blocks on output nobody reads.
                    consumer = None;
                }
            }
            // EIO: every slave descriptor is closed — the terminal's end.
            Err(err) if err.raw_os_error() == Some(libc::EIO) => return,
            Err(err) => {
                tracing::warn!(pid = core.pid(), %err, "reading the terminal failed");
                return;
            }
        }
    }
}
