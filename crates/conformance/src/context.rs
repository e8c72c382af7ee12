//! What a case works with: the world's providers, its own directory in the
//! scratch area, bounded provider calls, fixture helpers, and an owner list
//! of everything it started so the runner can stop it whatever the outcome.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_plugin_api::durable::{Attached, DurableSpec};
use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::subprocess::{Process, SpawnSpec, SubprocessProvider, Terminal, TerminalSpec};
use dsh_plugin_api::{Error, ErrorKind, Result};

use crate::check::{self, Failure};

/// Grace the runner gives leftover processes when it terminates them.
const CLEANUP_GRACE: Duration = Duration::from_millis(100);

/// Something a case started that the runner must stop afterwards.
enum Owned {
    Process(Arc<dyn Process>),
    Terminal(Arc<dyn Terminal>),
    /// A durable command's id, forgotten once its handle (owned before it)
    /// was terminated.
    Durable(String),
}

/// One case's view of the world.
pub(crate) struct Cx {
    fs: Option<Arc<dyn FsProvider>>,
    subprocess: Option<Arc<dyn SubprocessProvider>>,
    /// Whether fixtures may be written through `fs`.
    pub(crate) fs_writable: bool,
    /// The case's own directory: canonical, absolute, existing when the
    /// world allows creating it.
    pub(crate) dir: String,
    /// Bound on one provider call.
    pub(crate) limit: Duration,
    /// [`crate::KitOptions::fs_confined_to`], as given.
    pub(crate) confined_to: Option<String>,
    owned: Mutex<Vec<Owned>>,
}

impl Cx {
    pub(crate) fn new(
        fs: Option<Arc<dyn FsProvider>>,
        subprocess: Option<Arc<dyn SubprocessProvider>>,
        fs_writable: bool,
        dir: String,
        limit: Duration,
    ) -> Cx {
        Cx {
            fs,
            subprocess,
            fs_writable,
            dir,
            limit,
            confined_to: None,
            owned: Mutex::new(Vec::new()),
        }
    }

    /// The same context for an `fs` confined to `root`, if any.
    pub(crate) fn with_confinement(self, root: Option<String>) -> Cx {
        Cx {
            confined_to: root,
            ..self
        }
    }

    /// The `fs` provider. Only called by cases that declare `Need::Fs` (or
    /// `FsWrite`), which the runner checked.
    pub(crate) fn fs(&self) -> &dyn FsProvider {
        self.fs
            .as_deref()
            .expect("a case using fs declares Need::Fs")
    }

    /// The `subprocess` provider (cases declaring `Subprocess`, `Terminal`
    /// or `Shell`).
    /// The `fs` provider as shared, for `dsh_provider_kit::world`'s
    /// compositions (which own their provider).
    pub(crate) fn fs_shared(&self) -> Arc<dyn FsProvider> {
        self.fs.clone().expect("a case using fs declares Need::Fs")
    }

    pub(crate) fn sp(&self) -> &dyn SubprocessProvider {
        self.subprocess
            .as_deref()
            .expect("a case using subprocess declares Need::Subprocess or Need::Shell")
    }

    pub(crate) fn has_fs(&self) -> bool {
        self.fs.is_some()
    }

    /// Whether the `fs` may reach the absolute `path`: always, unless it is
    /// confined (`KitOptions::fs_confined_to`) to a root `path` is not
    /// inside. Cases check paths outside a root only in `fs.confine.*`.
    pub(crate) fn reaches(&self, path: &str) -> bool {
        self.confined_to.as_deref().is_none_or(|root| {
            let root = root.trim_end_matches('/');
            path == root || path.starts_with(&format!("{root}/"))
        })
    }

    /// `rel` inside the case directory.
    pub(crate) fn path(&self, rel: &str) -> String {
        format!("{}/{rel}", self.dir)
    }

    /// A provider call that must succeed, bounded by the call limit.
    pub(crate) async fn ok<T>(
        &self,
        what: &str,
        fut: impl Future<Output = Result<T>>,
    ) -> std::result::Result<T, Failure> {
        check::expect_ok(self.limit, what, fut).await
    }

    /// A provider call that must fail with `kind`.
    pub(crate) async fn err<T>(
        &self,
        what: &str,
        kind: ErrorKind,
        fut: impl Future<Output = Result<T>>,
    ) -> std::result::Result<Error, Failure> {
        check::expect_err(self.limit, what, kind, fut).await
    }

    /// A provider call that must fail with one of `kinds`.
    pub(crate) async fn err_of<T>(
        &self,
        what: &str,
        kinds: &[ErrorKind],
        fut: impl Future<Output = Result<T>>,
    ) -> std::result::Result<Error, Failure> {
        check::expect_err_of(self.limit, what, kinds, fut).await
    }

    /// Any future, bounded by the call limit.
    pub(crate) async fn within<T>(
        &self,
        what: &str,
        fut: impl Future<Output = T>,
    ) -> std::result::Result<T, Failure> {
        check::within(self.limit, what, fut).await
    }

    // ---- processes ------------------------------------------------------

    /// Spawns `spec` and keeps the handle so the runner terminates the group
    /// after the case, whatever its outcome.
    pub(crate) async fn spawn(
        &self,
        what: &str,
        spec: SpawnSpec,
    ) -> std::result::Result<Arc<dyn Process>, Failure> {
        let process = self.ok(what, self.sp().spawn(spec)).await?;
        self.own(Owned::Process(process.clone()));
        Ok(process)
    }

    /// Spawns a terminal and keeps the handle for cleanup.
    pub(crate) async fn spawn_terminal(
        &self,
        what: &str,
        spec: TerminalSpec,
    ) -> std::result::Result<Arc<dyn Terminal>, Failure> {
        let terminal = self.ok(what, self.sp().spawn_terminal(spec)).await?;
        self.own(Owned::Terminal(terminal.clone()));
        Ok(terminal)
    }

    /// Starts `spec` as a durable command and keeps its handle and id so
    /// the runner terminates and forgets it after the case. A provider
    /// without durable commands makes the case unsupported (skipped).
    pub(crate) async fn spawn_durable(
        &self,
        what: &str,
        spec: SpawnSpec,
        durable: DurableSpec,
    ) -> std::result::Result<Attached, Failure> {
        let started = self
            .within(what, self.sp().spawn_durable(spec, durable))
            .await?;
        let attached = match started {
            Ok(attached) => attached,
            Err(err) if err.kind() == ErrorKind::Unsupported => {
                return Err(Failure::unsupported(format!(
                    "the subprocess provider has no durable commands ({err})"
                )));
            }
            Err(err) => return Err(Failure::new(format!("{what}: {err}"))),
        };
        self.own(Owned::Process(attached.process.clone()));
        self.own(Owned::Durable(attached.id.clone()));
        Ok(attached)
    }

    fn own(&self, owned: Owned) {
        self.owned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(owned);
    }

    /// Forgets a process that finished cleanly: nothing of it is left to
    /// stop.
    pub(crate) fn disown(&self, process: &Arc<dyn Process>) {
        self.owned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .retain(|owned| !matches!(owned, Owned::Process(p) if Arc::ptr_eq(p, process)));
    }

    /// Stops everything the case started: terminates every owned process
    /// group and terminal session, each bounded by the call limit. Returns
    /// what could not be stopped.
    pub(crate) async fn release(&self) -> std::result::Result<(), String> {
        let owned = std::mem::take(
            &mut *self
                .owned
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        let mut errors = Vec::new();
        for item in owned {
            let (what, result) = match item {
                Owned::Process(process) => {
                    let what = format!("terminate process {}", process.pid());
                    let result =
                        tokio::time::timeout(self.limit, process.terminate(CLEANUP_GRACE)).await;
                    (what, result)
                }
                Owned::Terminal(terminal) => {
                    let what = format!("terminate terminal {}", terminal.pid());
                    let result = tokio::time::timeout(self.limit, terminal.terminate()).await;
                    (what, result)
                }
                Owned::Durable(id) => {
                    let what = format!("forget durable command {id}");
                    let result = tokio::time::timeout(self.limit, self.sp().forget(&id))
                        .await
                        .map(|forgot| match forgot {
                            Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
                            other => other,
                        });
                    (what, result)
                }
            };
            match result {
                Ok(Ok(())) => {}
                Ok(Err(err)) => errors.push(format!("{what}: {err}")),
                Err(_) => errors.push(format!(
                    "{what}: no answer within {} ms",
                    self.limit.as_millis()
                )),
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}
