//! The `subprocess` provider over one E2B sandbox: the facade that owns the
//! [`World`] and hands each operation to its worker module.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dsh_e2b_gateway::Liveness;
use dsh_plugin_api::durable::{AttachSpec, Attached, DurableCommand, DurableSpec};
use dsh_plugin_api::owner::SandboxInfo;
use dsh_plugin_api::subprocess::{Process, SpawnSpec, SubprocessProvider, Terminal, TerminalSpec};
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_provider_kit::failures::aggregate;
use e2b_client::Envd;

use crate::config::Config;
use crate::durable::Durable;
use crate::transport::EnvdTransport;
use crate::world::World;

/// How long disposal waits for supervisors and terminal pumps to finish
/// once their groups were terminated.
const JOIN_LIMIT: Duration = Duration::from_secs(5);

/// Commands and terminals in one E2B sandbox, as one execution world.
///
/// Generic over the transport of its envd client: the owner's
/// `OwnerTransport` in the plugin, the sandbox's own `SandboxTransport` in
/// tests. Every method runs on the tokio runtime that calls it (the
/// plugin's own when loaded by a host) and spawns its tasks there; handles
/// keep working until [`E2bSubprocess::dispose`].
pub struct E2bSubprocess<T: EnvdTransport> {
    world: Arc<World<T>>,
    durable: Arc<Durable<T>>,
}

impl<T: EnvdTransport> Clone for E2bSubprocess<T> {
    fn clone(&self) -> Self {
        E2bSubprocess {
            world: Arc::clone(&self.world),
            durable: Arc::clone(&self.durable),
        }
    }
}

impl<T: EnvdTransport> E2bSubprocess<T> {
    /// A provider for the sandbox `info` describes, reached through `envd`.
    /// `liveness` tells a gone sandbox from a broken connection. Nothing is
    /// sent until the first command: then the helper is installed under
    /// `info.runtime_root` and the sandbox probed, once.
    pub fn new(
        envd: Envd<T>,
        info: &SandboxInfo,
        liveness: Arc<dyn Liveness>,
        config: &Config,
    ) -> Result<E2bSubprocess<T>> {
        let settings = config.settle()?;
        if !info.cwd.starts_with('/') || !info.runtime_root.starts_with('/') {
            return Err(Error::config(format!(
                "sandbox {}: cwd {:?} and runtime root {:?} must be absolute",
                info.sandbox_id, info.cwd, info.runtime_root
            )));
        }
        let world = Arc::new(World::new(envd, info, liveness, settings));
        Ok(E2bSubprocess {
            durable: Arc::new(Durable::new(Arc::clone(&world))),
            world,
        })
    }

    /// The sandbox this provider runs commands in.
    pub fn sandbox_id(&self) -> &str {
        self.world.sandbox_id()
    }

    /// The private spill directory in the sandbox (created by the first
    /// spill).
    pub fn spill_dir(&self) -> &str {
        self.world.spill_dir()
    }

    /// Where the helper is installed (inside the owner's runtime root).
    pub fn install_dir(&self) -> &str {
        self.world.install_dir()
    }

    /// How many process groups and terminal sessions are still owned (not
    /// yet proven empty).
    pub fn owned(&self) -> usize {
        self.world.registry().len()
    }

    /// Refuses new spawns, terminates every owned group and session (with
    /// the configured kill grace) and joins them, disconnects and joins
    /// every supervisor, and removes the private state (the helper's
    /// directory, the spill directory: each only if something may have been
    /// put there). Every step runs even if an earlier
    /// one failed; failures are reported together (one error of the first
    /// failure's kind). A gone sandbox counts as clean. Handles stay usable:
    /// `wait` and `read_output` answer, `terminate` is a no-op or retries.
    pub async fn dispose(&self) -> Result<()> {
        let world = &self.world;
        let owned = world.registry().close();
        let results = futures::future::join_all(owned.iter().map(|owned| owned.stop())).await;
        let mut failures: Vec<Error> = results.into_iter().filter_map(Result::err).collect();
        world.disconnect_token().cancel();
        world.tracker().close();
        if tokio::time::timeout(JOIN_LIMIT, world.tracker().wait())
            .await
            .is_err()
        {
            failures.push(Error::new(
                ErrorKind::Busy,
                format!(
                    "dispose: {} supervisor task(s) did not finish",
                    world.tracker().len()
                ),
            ));
        }
        if let Err(err) = world.remove_private_state().await {
            failures.push(err);
        }
        aggregate("dispose", failures)
    }
}

#[async_trait]
impl<T: EnvdTransport> SubprocessProvider for E2bSubprocess<T> {
    async fn resolve_executable(&self, name: &str, extra_path: &[String]) -> Result<String> {
        crate::resolve::resolve(&self.world, name, extra_path).await
    }

    async fn spawn(&self, spec: SpawnSpec) -> Result<Arc<dyn Process>> {
        crate::start::spawn(&self.world, spec).await
    }

    async fn spawn_terminal(&self, spec: TerminalSpec) -> Result<Arc<dyn Terminal>> {
        crate::terminal::spawn(&self.world, spec).await
    }

    async fn spawn_durable(&self, spec: SpawnSpec, durable: DurableSpec) -> Result<Attached> {
        crate::durable::spawn(&self.durable, spec, durable).await
    }

    async fn list_durable(&self) -> Result<Vec<DurableCommand>> {
        dsh_supervisor_client::control::list(&*self.durable).await
    }

    async fn attach(&self, spec: AttachSpec) -> Result<Attached> {
        crate::durable::attach(&self.durable, spec).await
    }

    async fn forget(&self, id: &str) -> Result<()> {
        dsh_supervisor_client::control::forget(&*self.durable, id).await
    }
}
