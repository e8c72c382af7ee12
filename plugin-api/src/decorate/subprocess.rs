//! [`SubprocessHooks`] and [`DecoratedSubprocess`]: a `subprocess`
//! decorator's points of action.
//!
//! - [`SubprocessHooks::on_spawn`] / [`SubprocessHooks::on_spawn_terminal`]
//!   see every start before the wrapped provider does, and may refuse it
//!   (the error reaches the caller; nothing starts) or change its spec;
//! - [`SubprocessHooks::on_exit`] sees every started command and terminal
//!   end, whether or not anybody calls `wait`, with its status.
//!
//! The handles returned are the wrapped provider's own — a decorator adds
//! no layer to calls on a process or terminal (docs/design.md §4.9).
//!
//! **What `on_spawn` sees of dsh's own callers** (a deny list matches
//! `argv[0]`): `dsh exec -- ARGV…` and the agent tools' `run {"argv":
//! […]}` spawn exactly that argv — merging stderr into stdout is the
//! spec's [`OutputMode::IntoStdout`](crate::subprocess::OutputMode), not
//! a wrapper —, a relative program (`./build.sh`) made absolute against
//! the cwd; `run {"command": "…"}` is the shell invocation it is,
//! `["bash", "-c", "…"]`, so a policy on programs sees `bash` there
//! (refuse `bash` to refuse shell strings). Background runs pass
//! `on_spawn` too (`spawn_durable`). `terminal_open` reaches
//! `on_spawn_terminal` the same way (`argv` as given, `command` as `bash
//! -c …`, no argument as `bash -l`), and a language server is spawned
//! with its configured argv.

use std::sync::Arc;

use async_trait::async_trait;

use crate::durable::{AttachSpec, Attached, DurableCommand, DurableSpec};
use crate::error::Result;
use crate::subprocess::{
    ExitStatus, Process, SpawnSpec, SubprocessProvider, Terminal, TerminalSpec,
};

/// What a command or terminal [`SubprocessHooks::on_exit`] reports on was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// Its pid (process-group or session leader).
    pub pid: u32,
    /// The argv it was started with (after [`SubprocessHooks::on_spawn`]).
    pub argv: Vec<String>,
    /// Whether it runs on a terminal (`spawn_terminal`).
    pub terminal: bool,
}

/// The points a subprocess decorator acts at. Every hook defaults to
/// changing nothing, so a decorator implements only what it changes.
///
/// Hooks run on the decorator's own runtime: `on_spawn*` inside the
/// caller's `spawn*` call (dropping that call's future drops the hook's),
/// `on_exit` in a task of the decorator that lives until the command ends
/// or the decorator's instance is disposed.
#[async_trait]
pub trait SubprocessHooks: Send + Sync + 'static {
    /// Before `spec` reaches the wrapped provider: an `Err` refuses the
    /// start (the caller gets it, nothing runs); `Ok` carries the spec to
    /// start, changed or not.
    async fn on_spawn(&self, spec: SpawnSpec) -> Result<SpawnSpec> {
        Ok(spec)
    }

    /// [`SubprocessHooks::on_spawn`] for terminals.
    async fn on_spawn_terminal(&self, spec: TerminalSpec) -> Result<TerminalSpec> {
        Ok(spec)
    }

    /// Once a started command or terminal has ended: its exit status, or
    /// the error its `wait` reported (e.g. the world went away). Called
    /// once per start, whether or not the caller waits. Must not block.
    fn on_exit(&self, started: &Started, status: &Result<ExitStatus>) {
        let _ = (started, status);
    }
}

/// The provider `inner` with `hooks` applied (see the module docs).
pub struct DecoratedSubprocess<H> {
    inner: Arc<dyn SubprocessProvider>,
    hooks: Arc<H>,
}

impl<H: SubprocessHooks> DecoratedSubprocess<H> {
    /// Wraps `inner` (usually the injected `subprocess` service).
    pub fn new(inner: Arc<dyn SubprocessProvider>, hooks: H) -> DecoratedSubprocess<H> {
        DecoratedSubprocess {
            inner,
            hooks: Arc::new(hooks),
        }
    }

    /// The hooks, for a decorator that keeps state in them.
    pub fn hooks(&self) -> &Arc<H> {
        &self.hooks
    }

    /// Reports the end of `started` to `on_exit` from a task of the
    /// current (the decorator's) runtime, once `wait` answers. `wait` is
    /// idempotent and may be called concurrently, so the caller's own
    /// `wait` is unaffected.
    fn watch<F>(&self, started: Started, wait: F)
    where
        F: Future<Output = Result<ExitStatus>> + Send + 'static,
    {
        let hooks = self.hooks.clone();
        tokio::spawn(async move {
            let status = wait.await;
            hooks.on_exit(&started, &status);
        });
    }
}

#[async_trait]
impl<H: SubprocessHooks> SubprocessProvider for DecoratedSubprocess<H> {
    async fn resolve_executable(&self, name: &str, extra_path: &[String]) -> Result<String> {
        self.inner.resolve_executable(name, extra_path).await
    }

    async fn spawn(&self, spec: SpawnSpec) -> Result<Arc<dyn Process>> {
        let spec = self.hooks.on_spawn(spec).await?;
        let argv = spec.argv.clone();
        let process = self.inner.spawn(spec).await?;
        let watched = process.clone();
        self.watch(
            Started {
                pid: process.pid(),
                argv,
                terminal: false,
            },
            async move { watched.wait().await },
        );
        Ok(process)
    }

    async fn spawn_terminal(&self, spec: TerminalSpec) -> Result<Arc<dyn Terminal>> {
        let spec = self.hooks.on_spawn_terminal(spec).await?;
        let argv = spec.argv.clone();
        let terminal = self.inner.spawn_terminal(spec).await?;
        let watched = terminal.clone();
        self.watch(
            Started {
                pid: terminal.pid(),
                argv,
                terminal: true,
            },
            async move { watched.wait().await },
        );
        Ok(terminal)
    }

    /// Durable starts pass `on_spawn` like any other; attachments are
    /// handles on commands already seen, so they pass unhooked.
    async fn spawn_durable(&self, spec: SpawnSpec, durable: DurableSpec) -> Result<Attached> {
        let spec = self.hooks.on_spawn(spec).await?;
        let argv = spec.argv.clone();
        let attached = self.inner.spawn_durable(spec, durable).await?;
        let watched = attached.process.clone();
        self.watch(
            Started {
                pid: attached.process.pid(),
                argv,
                terminal: false,
            },
            async move { watched.wait().await },
        );
        Ok(attached)
    }

    async fn list_durable(&self) -> Result<Vec<DurableCommand>> {
        self.inner.list_durable().await
    }

    async fn attach(&self, spec: AttachSpec) -> Result<Attached> {
        self.inner.attach(spec).await
    }

    async fn forget(&self, id: &str) -> Result<()> {
        self.inner.forget(id).await
    }
}
