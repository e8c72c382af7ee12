//! The `subprocess` provider on the host: the facade that owns the
//! [`World`] and hands each operation to its worker module.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use dsh_plugin_api::durable::{AttachSpec, Attached, DurableCommand, DurableSpec};
use dsh_plugin_api::subprocess::{Process, SpawnSpec, SubprocessProvider, Terminal, TerminalSpec};
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_provider_kit::failures::aggregate;

use crate::config::{Config, Settings};
use crate::durable::Durable;
use crate::env::Environment;
use crate::group::KILL_SETTLE;
use crate::spill::SpillDir;
use crate::world::World;

/// Commands and terminals on the host, as one execution world.
///
/// Every method must run inside a tokio runtime with I/O and time enabled
/// (the plugin's own runtime when loaded by a host; any multi-thread
/// runtime in-process). Handles keep working until [`LocalSubprocess::dispose`].
#[derive(Clone)]
pub struct LocalSubprocess {
    world: Arc<World>,
    /// `None` without a state directory (see `Config::durable_dir`).
    durable: Option<Arc<Durable>>,
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
            durable_dir,
            durable_scope,
        } = config.settle()?;
        Ok(LocalSubprocess {
            world: Arc::new(World::new(
                cwd,
                env,
                SpillDir::new(spill_parent),
                kill_grace,
            )),
            durable: durable_dir.map(|dir| Arc::new(Durable::new(dir, &durable_scope))),
        })
    }

    /// Where this provider's scope of durable commands is kept, if
    /// anywhere.
    pub fn durable_dir(&self) -> Option<&Path> {
        self.durable.as_deref().map(Durable::dir)
    }

    fn durable(&self, operation: &str) -> Result<&Arc<Durable>> {
        self.durable.as_ref().ok_or_else(|| {
            Error::config(format!(
                "{operation}: durable commands need a state directory: set config.durableDir (no HOME to default to)"
            ))
        })
    }

    /// The world's cwd.
    pub fn cwd(&self) -> &Path {
        self.world.cwd()
    }

    /// The private spill directory, once a spill created it.
    pub fn spill_dir(&self) -> Option<PathBuf> {
        self.world.spills().path()
    }

    /// How many process groups and terminal sessions are still owned (not
    /// yet proven empty).
    pub fn owned(&self) -> usize {
        self.world.registry().len()
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
        let owned = world.registry().close();
        let results = futures::future::join_all(owned.iter().map(|owned| owned.stop())).await;
        let mut failures: Vec<Error> = results.into_iter().filter_map(Result::err).collect();

        // Output of descendants that escaped their group must not hold
        // disposal hostage.
        world.disconnect_token().cancel();
        world.tracker().close();
        if tokio::time::timeout(KILL_SETTLE, world.tracker().wait())
            .await
            .is_err()
        {
            world.abandon_token().cancel();
            if tokio::time::timeout(KILL_SETTLE, world.tracker().wait())
                .await
                .is_err()
            {
                failures.push(Error::new(
                    ErrorKind::Busy,
                    "dispose: supervisor tasks did not finish",
                ));
            }
        }
        if let Err(err) = world.spills().remove() {
            failures.push(err);
        }
        aggregate("dispose", failures)
    }
}

#[async_trait]
impl SubprocessProvider for LocalSubprocess {
    async fn resolve_executable(&self, name: &str, extra_path: &[String]) -> Result<String> {
        let none = Default::default();
        let env = self.world.env().block(&none);
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

    async fn spawn_durable(&self, spec: SpawnSpec, durable: DurableSpec) -> Result<Attached> {
        let state = self.durable("spawn_durable")?;
        crate::durable::spawn(&self.world, state, spec, durable).await
    }

    async fn list_durable(&self) -> Result<Vec<DurableCommand>> {
        dsh_supervisor_client::control::list(&**self.durable("list_durable")?).await
    }

    async fn attach(&self, spec: AttachSpec) -> Result<Attached> {
        crate::durable::attach(&self.world, self.durable("attach")?, spec).await
    }

    async fn forget(&self, id: &str) -> Result<()> {
        dsh_supervisor_client::control::forget(&**self.durable("forget")?, id).await
    }
}
