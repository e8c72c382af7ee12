//! The `subprocess` provider over one E2B sandbox.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use dsh_e2b_gateway::{ControlShell, Liveness};
use dsh_plugin_api::e2b::SandboxInfo;
use dsh_plugin_api::subprocess::{Process, SpawnSpec, SubprocessProvider, Terminal, TerminalSpec};
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_provider_kit::failures::aggregate;
use e2b_client::Envd;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{Config, Settings};
use crate::control::Controller;
use crate::registry::Registry;
use crate::setup::{self, Setup};
use crate::transport::EnvdTransport;

/// How long disposal waits for supervisors and terminal pumps to finish
/// once their groups were terminated.
const JOIN_LIMIT: Duration = Duration::from_secs(5);
/// Bound on removing the private state at disposal.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Commands and terminals in one E2B sandbox, as one execution world.
///
/// Generic over the transport of its envd client: the owner's
/// `OwnerTransport` in the plugin, the sandbox's own `SandboxTransport` in
/// tests. Every method runs on the tokio runtime that calls it (the
/// plugin's own when loaded by a host) and spawns its tasks there; handles
/// keep working until [`E2bSubprocess::dispose`].
pub struct E2bSubprocess<T: EnvdTransport> {
    world: Arc<World<T>>,
}

impl<T: EnvdTransport> Clone for E2bSubprocess<T> {
    fn clone(&self) -> Self {
        E2bSubprocess {
            world: Arc::clone(&self.world),
        }
    }
}

/// What is known once the sandbox was prepared.
pub struct Ready<T: EnvdTransport> {
    pub setup: Setup,
    pub control: Controller<T>,
}

/// The state every handle of one provider shares.
pub struct World<T: EnvdTransport> {
    envd: Envd<T>,
    shell: ControlShell,
    liveness: Arc<dyn Liveness>,
    sandbox_id: String,
    cwd: String,
    settings: Settings,
    instance: String,
    install_dir: String,
    spill_dir: String,
    ready: tokio::sync::OnceCell<Arc<Ready<T>>>,
    /// Whether preparing the sandbox was ever attempted (so disposal knows
    /// whether there is private state to remove).
    prepared: AtomicBool,
    registry: Registry,
    tracker: TaskTracker,
    disconnect: CancellationToken,
    seq: AtomicU64,
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
        let instance = format!("{:016x}", rand::random::<u64>());
        Ok(E2bSubprocess {
            world: Arc::new(World {
                shell: ControlShell::for_sandbox(info),
                install_dir: format!("{}/subprocess-e2b-{instance}", info.runtime_root),
                spill_dir: format!("{}/dsh-subprocess-e2b-{instance}", settings.spill_parent),
                envd,
                liveness,
                sandbox_id: info.sandbox_id.clone(),
                cwd: info.cwd.clone(),
                settings,
                instance,
                ready: tokio::sync::OnceCell::new(),
                prepared: AtomicBool::new(false),
                registry: Registry::new("the subprocess provider"),
                tracker: TaskTracker::new(),
                disconnect: CancellationToken::new(),
                seq: AtomicU64::new(0),
            }),
        })
    }

    /// The sandbox this provider runs commands in.
    pub fn sandbox_id(&self) -> &str {
        &self.world.sandbox_id
    }

    /// The private spill directory in the sandbox (created by the first
    /// spill).
    pub fn spill_dir(&self) -> &str {
        &self.world.spill_dir
    }

    /// Where the helper is installed (inside the owner's runtime root).
    pub fn install_dir(&self) -> &str {
        &self.world.install_dir
    }

    /// How many process groups and terminal sessions are still owned (not
    /// yet proven empty).
    pub fn owned(&self) -> usize {
        self.world.registry.len()
    }

    /// Refuses new spawns, terminates every owned group and session (with
    /// the configured kill grace) and joins them, disconnects and joins
    /// every supervisor, and removes the private state (the helper's
    /// directory, the spill directory). Every step runs even if an earlier
    /// one failed; failures are reported together (one error of the first
    /// failure's kind). A gone sandbox counts as clean. Handles stay usable:
    /// `wait` and `read_output` answer, `terminate` is a no-op or retries.
    pub async fn dispose(&self) -> Result<()> {
        let world = &self.world;
        let owned = world.registry.close();
        let results =
            futures::future::join_all(owned.iter().map(|o| o.stop(world.settings.kill_grace)))
                .await;
        let mut failures: Vec<Error> = results.into_iter().filter_map(Result::err).collect();
        world.disconnect.cancel();
        world.tracker.close();
        if tokio::time::timeout(JOIN_LIMIT, world.tracker.wait())
            .await
            .is_err()
        {
            failures.push(Error::new(
                ErrorKind::Busy,
                format!(
                    "dispose: {} supervisor task(s) did not finish",
                    world.tracker.len()
                ),
            ));
        }
        if let Err(err) = world.remove_private_state().await {
            failures.push(err);
        }
        aggregate("dispose", failures)
    }
}

impl<T: EnvdTransport> World<T> {
    pub fn check_open(&self, operation: &str) -> Result<()> {
        self.registry.check_open(operation)
    }

    /// The prepared sandbox (installing the helper and probing on first
    /// use). Dropping the future leaves preparation to the next caller.
    pub async fn ready(&self, operation: &str) -> Result<Arc<Ready<T>>> {
        self.ready
            .get_or_try_init(|| async {
                self.prepared.store(true, Ordering::Release);
                let setup = setup::prepare(
                    &self.envd,
                    &self.shell,
                    &self.install_dir,
                    &self.settings.user,
                )
                .await?;
                let control = Controller::new(
                    self.envd.clone(),
                    self.shell.clone(),
                    Arc::clone(&self.liveness),
                    &setup.helper,
                );
                Ok(Arc::new(Ready { setup, control }))
            })
            .await
            .cloned()
            .map_err(|err: Error| err.context(operation))
    }

    /// The directory a command runs in: `requested` (relative paths join
    /// the world's cwd) or the world's cwd. Whether it exists is checked
    /// in the sandbox, as the user, when the command starts.
    pub fn working_dir(&self, operation: &str, requested: Option<&str>) -> Result<String> {
        match requested {
            Some("") => Err(Error::invalid_input(format!(
                "{operation}: cwd is empty (omit it for the world's cwd)"
            ))),
            Some(dir) if dir.starts_with('/') => Ok(dir.to_owned()),
            Some(dir) => Ok(format!("{}/{dir}", self.cwd.trim_end_matches('/'))),
            None => Ok(self.cwd.clone()),
        }
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

    pub fn kill_grace(&self) -> Duration {
        self.settings.kill_grace
    }

    pub fn spill_dir(&self) -> &str {
        &self.spill_dir
    }

    pub fn instance(&self) -> &str {
        &self.instance
    }

    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Removes the helper's directory and the spill directory (as root; GNU
    /// `rm` never follows symlinks).
    async fn remove_private_state(&self) -> Result<()> {
        if !self.prepared.load(Ordering::Acquire) {
            return Ok(());
        }
        let script = self.shell.script(
            r#"rm -rf -- "$1" "$2""#,
            [self.install_dir.as_str(), self.spill_dir.as_str()],
        );
        match self
            .shell
            .run(&self.envd, &script, CLEANUP_TIMEOUT, 4096)
            .await
        {
            Ok(output) if output.status.success() => Ok(()),
            Ok(output) => Err(Error::io(format!(
                "dispose: remove {} and {}: {} ({})",
                self.install_dir,
                self.spill_dir,
                output.stderr_text(),
                output.status.status
            ))),
            Err(err) if err.is_sandbox_gone() => Ok(()),
            Err(err) => Err(crate::errors::client("dispose: remove private state", &err)),
        }
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
}
