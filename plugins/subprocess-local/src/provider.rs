//! The `subprocess` provider on the host.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use dsh_plugin_api::subprocess::{Process, SpawnSpec, SubprocessProvider, Terminal, TerminalSpec};
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_provider_kit::failures::aggregate;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{Config, Settings};
use crate::env::Environment;
use crate::group::KILL_SETTLE;
use crate::registry::{Owned, Registry};
use crate::spill::SpillDir;

/// Commands and terminals on the host, as one execution world.
///
/// Every method must run inside a tokio runtime with I/O and time enabled
/// (the plugin's own runtime when loaded by a host; any multi-thread
/// runtime in-process). Handles keep working until [`LocalSubprocess::dispose`].
#[derive(Clone)]
pub struct LocalSubprocess {
    world: Arc<World>,
}

/// The shared state every handle of one provider refers to.
pub struct World {
    cwd: PathBuf,
    env: Environment,
    spills: SpillDir,
    kill_grace: Duration,
    registry: Registry,
    tracker: TaskTracker,
    disconnect: CancellationToken,
    abandon: CancellationToken,
    seq: AtomicU64,
}

impl LocalSubprocess {
    /// A provider configured by `config`, with the host's environment
    /// (captured now and scrubbed, see [`crate::env`]).
    pub fn new(config: &Config) -> Result<LocalSubprocess> {
        LocalSubprocess::with_environment(config, Environment::from_host())
    }

    /// A provider whose ambient environment is `env` instead of the host's.
    pub fn with_environment(config: &Config, env: Environment) -> Result<LocalSubprocess> {
        let Settings {
            cwd,
            spill_parent,
            kill_grace,
        } = config.settle()?;
        Ok(LocalSubprocess {
            world: Arc::new(World {
                cwd,
                env,
                spills: SpillDir::new(spill_parent),
                kill_grace,
                registry: Registry::new("the subprocess provider"),
                tracker: TaskTracker::new(),
                disconnect: CancellationToken::new(),
                abandon: CancellationToken::new(),
                seq: AtomicU64::new(0),
            }),
        })
    }

    /// The world's cwd.
    pub fn cwd(&self) -> &Path {
        &self.world.cwd
    }

    /// The private spill directory, once a spill created it.
    pub fn spill_dir(&self) -> Option<PathBuf> {
        self.world.spills.path()
    }

    /// How many process groups and terminal sessions are still owned (not
    /// yet proven empty).
    pub fn owned(&self) -> usize {
        self.world.registry.len()
    }

    /// Refuses new spawns, terminates every owned group and session (with
    /// the configured kill grace), disconnects and joins every output task,
    /// and removes the private spill directory. Every step runs even if an
    /// earlier one failed; failures are reported together (one error of the
    /// first failure's kind — `Busy` for a group not proven empty). Calling
    /// it again retries whatever is still owned. Handles stay usable
    /// afterwards: `wait` and `read_output` answer, `terminate` is a no-op.
    pub async fn dispose(&self) -> Result<()> {
        let world = &self.world;
        let owned = world.registry.close();
        let results = futures::future::join_all(owned.into_iter().map(|owned| async move {
            match owned {
                Owned::Group(group) => group.terminate(world.kill_grace).await,
                Owned::Terminal(terminal) => terminal.terminate().await,
            }
        }))
        .await;
        let mut failures: Vec<Error> = results.into_iter().filter_map(Result::err).collect();

        // Output of descendants that escaped their group must not hold
        // disposal hostage.
        world.disconnect.cancel();
        world.tracker.close();
        if tokio::time::timeout(KILL_SETTLE, world.tracker.wait())
            .await
            .is_err()
        {
            world.abandon.cancel();
            if tokio::time::timeout(KILL_SETTLE, world.tracker.wait())
                .await
                .is_err()
            {
                failures.push(Error::new(
                    ErrorKind::Busy,
                    "dispose: supervisor tasks did not finish",
                ));
            }
        }
        if let Err(err) = world.spills.remove() {
            failures.push(err);
        }
        aggregate("dispose", failures)
    }
}

impl World {
    pub fn check_open(&self, operation: &str) -> Result<()> {
        self.registry.check_open(operation)
    }

    /// The directory a command runs in: `requested` (relative paths join the
    /// world's cwd) or the world's cwd; it must be an existing directory.
    pub fn working_dir(&self, operation: &str, requested: Option<&str>) -> Result<PathBuf> {
        let dir = match requested {
            Some("") => {
                return Err(Error::invalid_input(format!(
                    "{operation}: cwd is empty (omit it for the world's cwd)"
                )));
            }
            Some(dir) => self.cwd.join(dir),
            None => self.cwd.clone(),
        };
        match std::fs::metadata(&dir) {
            Ok(meta) if meta.is_dir() => Ok(dir),
            Ok(_) => Err(Error::new(
                ErrorKind::NotADirectory,
                format!("{operation}: cwd is not a directory"),
            )
            .with_subject(dir.display().to_string())),
            Err(err) => Err(Error::from_io(&format!("{operation}: cwd"), &err)
                .with_subject(dir.display().to_string())),
        }
    }

    pub fn env(&self) -> &Environment {
        &self.env
    }

    pub fn spills(&self) -> &SpillDir {
        &self.spills
    }

    pub fn kill_grace(&self) -> Duration {
        self.kill_grace
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }

    pub fn disconnect_token(&self) -> CancellationToken {
        self.disconnect.clone()
    }

    pub fn abandon_token(&self) -> CancellationToken {
        self.abandon.clone()
    }

    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }
}

#[async_trait]
impl SubprocessProvider for LocalSubprocess {
    async fn resolve_executable(&self, name: &str, extra_path: &[String]) -> Result<String> {
        let none = Default::default();
        let env = self.world.env.block(&none);
        let path = crate::resolve::find_program(
            "resolve_executable",
            name,
            env.search_path(),
            extra_path,
        )?;
        path.into_os_string().into_string().map_err(|path| {
            Error::invalid_input(format!(
                "resolve_executable: {name}: resolved path {path:?} is not UTF-8"
            ))
        })
    }

    async fn spawn(&self, spec: SpawnSpec) -> Result<Arc<dyn Process>> {
        Ok(Arc::new(crate::command::start(&self.world, &spec)?))
    }

    async fn spawn_terminal(&self, spec: TerminalSpec) -> Result<Arc<dyn Terminal>> {
        Ok(crate::terminal::start(&self.world, &spec)?)
    }
}
