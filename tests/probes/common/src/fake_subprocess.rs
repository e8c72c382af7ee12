//! A deterministic fake `subprocess` world.
//!
//! - `resolve_executable(name, extra)`: a known program's bare name
//!   resolves to `/probe/bin/<name>`; `/probe/bin/<name>` is verified;
//!   anything else is `NotFound`; a relative path with `/` is
//!   `InvalidInput`. Magic names (`/.probe/error/<code>`, …) apply.
//! - `spawn(spec)`: validates the spec, then by `argv[0]`: `panic` panics,
//!   `error <code>` fails with that kind, `hang` never resolves (dropping
//!   the future counts a cancellation: the start is rolled back), an
//!   unknown program is `NotFound`; otherwise the program starts (see
//!   [`crate::fake_process`]) with pid 4242, 4243, … (pid = process group).
//! - `spawn_terminal(spec)`: validates, `panic` panics, else a fake
//!   terminal (see [`crate::fake_terminal`]).
//! - Disposal ([`FakeSubprocess::close`]) refuses new spawns and ends every
//!   live process (SIGTERM) and terminal (SIGHUP).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use dsh_plugin_api::subprocess::{
    Process, Signal, SpawnSpec, SubprocessProvider, Terminal, TerminalSpec,
};
use dsh_plugin_api::{Error, ErrorKind, Result, async_trait};

use crate::fake_process::{FakeProcess, PROGRAMS, World, program_name};
use crate::fake_terminal::FakeTerminal;
use crate::magic::{self, Magic};

/// The first pid handed out.
pub const FIRST_PID: u32 = 4242;

/// The fake subprocess provider.
pub struct FakeSubprocess {
    world: World,
    next_pid: AtomicU32,
    closed: AtomicBool,
    processes: Mutex<Vec<Weak<FakeProcess>>>,
    terminals: Mutex<Vec<Weak<FakeTerminal>>>,
}

impl FakeSubprocess {
    pub fn new(world: World) -> FakeSubprocess {
        FakeSubprocess {
            world,
            next_pid: AtomicU32::new(FIRST_PID),
            closed: AtomicBool::new(false),
            processes: Mutex::new(Vec::new()),
            terminals: Mutex::new(Vec::new()),
        }
    }

    /// Refuses new spawns and ends every live process and terminal.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        for process in self
            .processes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            if let Some(process) = process.upgrade() {
                process.kill(Signal::TERM);
            }
        }
        for terminal in self
            .terminals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            if let Some(terminal) = terminal.upgrade() {
                terminal.end(dsh_plugin_api::subprocess::ExitStatus {
                    code: None,
                    signal: Some(Signal::HUP),
                    timed_out: false,
                });
            }
        }
    }

    fn check_open(&self, operation: &str) -> Result<()> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::closed(format!(
                "{operation}: the subprocess provider was disposed"
            )));
        }
        Ok(())
    }

    async fn spawn_magic(&self, argv: &[String]) -> Result<()> {
        self.world.counters.calls.fetch_add(1, Ordering::SeqCst);
        match argv.first().map(String::as_str) {
            Some("panic") => panic!("spawn: probe panic"),
            Some("hang") => magic::hang(&self.world.counters).await,
            Some("error") => {
                let code = argv
                    .get(1)
                    .and_then(|code| code.parse().ok())
                    .unwrap_or(ErrorKind::Io.code());
                Err(magic::injected_error(code, "spawn", "error"))
            }
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl SubprocessProvider for FakeSubprocess {
    async fn resolve_executable(&self, name: &str, _extra_path: &[String]) -> Result<String> {
        self.world.counters.calls.fetch_add(1, Ordering::SeqCst);
        match magic::parse(name) {
            Some(Magic::Error(code)) => {
                return Err(magic::injected_error(code, "resolve_executable", name));
            }
            Some(Magic::Panic) => panic!("resolve_executable: probe panic"),
            Some(Magic::Hang) => magic::hang(&self.world.counters).await,
            _ => {}
        }
        if name.is_empty() {
            return Err(Error::invalid_input("resolve_executable: empty name"));
        }
        if !name.starts_with('/') && name.contains('/') {
            return Err(Error::invalid_input(format!(
                "resolve_executable: relative path {name:?} contains '/'"
            ))
            .with_subject(name));
        }
        let program = program_name(name);
        if PROGRAMS.contains(&program)
            && (!name.starts_with('/') || name.starts_with("/probe/bin/"))
        {
            return Ok(format!("/probe/bin/{program}"));
        }
        Err(Error::not_found(format!("resolve_executable: {name} not found")).with_subject(name))
    }

    async fn spawn(&self, spec: SpawnSpec) -> Result<Arc<dyn Process>> {
        self.check_open("spawn")?;
        spec.validate()?;
        self.spawn_magic(&spec.argv).await?;
        let program = program_name(&spec.argv[0]);
        if !PROGRAMS.contains(&program) {
            return Err(
                Error::not_found(format!("spawn: no such program {program:?}"))
                    .with_subject(spec.argv[0].clone()),
            );
        }
        let pid = self.next_pid.fetch_add(1, Ordering::SeqCst);
        let process = FakeProcess::start(pid, spec, self.world.clone());
        self.processes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::downgrade(&process));
        Ok(process)
    }

    async fn spawn_terminal(&self, spec: TerminalSpec) -> Result<Arc<dyn Terminal>> {
        self.check_open("spawn_terminal")?;
        spec.validate()?;
        self.spawn_magic(&spec.argv).await?;
        let pid = self.next_pid.fetch_add(1, Ordering::SeqCst);
        let terminal = Arc::new(FakeTerminal::start(pid, &spec));
        self.terminals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::downgrade(&terminal));
        Ok(terminal)
    }
}
