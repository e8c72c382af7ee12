//! [`World`]: the state every handle of one provider shares — the sandbox,
//! its envd client and control shell, the prepared helper, the registry of
//! owned groups and sessions, and the tasks that outlive an operation.
//! The provider facade creates it; the workers (`start`, `terminal`,
//! `resolve`, `supervise`) use it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use dsh_e2b_gateway::{ControlShell, Liveness};
use dsh_plugin_api::owner::SandboxInfo;
use dsh_plugin_api::{Error, Result};
use e2b_client::{CallOptions, Envd};
use futures::future::OptionFuture;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Settings;
use crate::control::Controller;
use crate::registry::Registry;
use crate::setup::{self, Setup};
use crate::transport::EnvdTransport;

/// Bound on removing the private state at disposal.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);

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
    durable_dir: String,
    install_dir: String,
    spill_dir: String,
    ready: tokio::sync::OnceCell<Arc<Ready<T>>>,
    /// Where the template's copy of the helper would be
    /// ([`dsh_e2b_gateway::template_copy_of`]; `None` in a sandbox from
    /// `base`).
    template_copy: Option<String>,
    /// Set once a start of the template's copy found none there.
    template_copy_missing: AtomicBool,
    /// How stdin reaches envd, asked once (`stdin`).
    input_route: e2b_client::InputRouteCell,
    /// Whether the install directory may hold anything: set before
    /// preparing the sandbox, cleared when the first preparation found the
    /// template's helper (it uploads nothing then). A later one after a
    /// failed or dropped attempt leaves it set: that attempt may have
    /// uploaded.
    install_dir_used: AtomicBool,
    /// Whether a command was ever given the spill directory.
    spill_dir_used: AtomicBool,
    registry: Registry,
    tracker: TaskTracker,
    disconnect: CancellationToken,
    seq: AtomicU64,
}

impl<T: EnvdTransport> World<T> {
    /// The world of the sandbox `info` describes, reached through `envd`,
    /// for a provider with `settings` (checked by the caller). Sends
    /// nothing.
    pub fn new(
        envd: Envd<T>,
        info: &SandboxInfo,
        liveness: Arc<dyn Liveness>,
        settings: Settings,
    ) -> World<T> {
        let instance = format!("{:016x}", rand::random::<u64>());
        World {
            shell: ControlShell::for_sandbox(info),
            install_dir: format!("{}/subprocess-e2b-{instance}", info.runtime_root),
            durable_dir: format!(
                "{}/{}",
                info.runtime_root,
                dsh_plugin_api::owner::DURABLE_STATE
            ),
            spill_dir: format!("{}/dsh-subprocess-e2b-{instance}", settings.spill_parent),
            envd,
            liveness,
            sandbox_id: info.sandbox_id.clone(),
            cwd: info.cwd.clone(),
            settings,
            instance,
            ready: tokio::sync::OnceCell::new(),
            template_copy: dsh_e2b_gateway::template_copy_of(info),
            template_copy_missing: AtomicBool::new(false),
            input_route: e2b_client::InputRouteCell::new(),
            install_dir_used: AtomicBool::new(false),
            spill_dir_used: AtomicBool::new(false),
            registry: Registry::new("the subprocess provider"),
            tracker: TaskTracker::new(),
            disconnect: CancellationToken::new(),
            seq: AtomicU64::new(0),
        }
    }

    /// The sandbox user commands run as.
    pub fn user(&self) -> &str {
        &self.settings.user
    }

    pub fn sandbox_id(&self) -> &str {
        &self.sandbox_id
    }

    /// Where the helper is installed (inside the owner's runtime root).
    pub fn install_dir(&self) -> &str {
        &self.install_dir
    }

    /// Where durable commands keep their state (inside the owner's runtime
    /// root, kept by its sweep).
    pub fn durable_dir(&self) -> &str {
        &self.durable_dir
    }

    pub fn check_open(&self, operation: &str) -> Result<()> {
        self.registry.check_open(operation)
    }

    /// The prepared sandbox (installing the helper and probing on first
    /// use). Dropping the future leaves preparation to the next caller.
    pub async fn ready(&self, operation: &str) -> Result<Arc<Ready<T>>> {
        self.ready
            .get_or_try_init(|| async {
                let attempted_before = self.install_dir_used.swap(true, Ordering::AcqRel);
                // Boxed: a large future, once per provider, kept out of
                // every operation's.
                let setup = Box::pin(setup::prepare(
                    &self.envd,
                    &self.shell,
                    &self.install_dir,
                    &self.settings.user,
                    self.template_copy_missing
                        .load(Ordering::Acquire)
                        .then_some(false),
                ))
                .await?;
                if setup.preinstalled && !attempted_before {
                    self.install_dir_used.store(false, Ordering::Release);
                }
                let control = self.controller(&setup.helper);
                Ok(Arc::new(Ready { setup, control }))
            })
            .await
            .cloned()
            .map_err(|err: Error| err.context(operation))
    }

    /// The prepared sandbox if it is prepared now (by [`World::ready`] or a
    /// first command's own probe, [`World::learned`]).
    pub fn ready_now(&self) -> Option<Arc<Ready<T>>> {
        self.ready.get().cloned()
    }

    /// The template's copy of the helper to run without a look of its own
    /// (the runtime root it is in vouches for it), unless the sandbox came
    /// from `base` or a start of it found none.
    pub fn template_copy(&self) -> Option<&str> {
        if self.template_copy_missing.load(Ordering::Acquire) {
            return None;
        }
        self.template_copy.as_deref()
    }

    /// A start of the template's copy found none: later starts and the
    /// preparation do without it.
    pub fn mark_template_copy_missing(&self) {
        self.template_copy_missing.store(true, Ordering::Release);
    }

    /// The control of the helper at `helper` (the template's copy, before
    /// the sandbox is prepared).
    pub fn controller(&self, helper: &str) -> Controller<T> {
        Controller::new(
            self.envd.clone(),
            self.shell.clone(),
            Arc::clone(&self.liveness),
            helper,
        )
    }

    /// What a first command learned of the sandbox (`setup`, run by
    /// `control`'s helper): the sandbox counts as prepared from now on,
    /// unless a preparation finished or is in flight meanwhile (the same
    /// facts): that one is kept, and should it fail, the next command
    /// learns again.
    pub fn learned(&self, setup: Setup, control: Controller<T>) {
        let _ = self.ready.set(Arc::new(Ready { setup, control }));
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

    /// How stdin reaches envd in this sandbox: asked of envd at the first
    /// write of any command (`helper` is that command's), then known. A
    /// failed probe is not remembered.
    pub async fn input_route(
        &self,
        helper: u32,
    ) -> std::result::Result<e2b_client::InputRoute, e2b_client::Error> {
        self.input_route.get(&self.envd, helper).await
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

    /// [`World::spill_dir`], for a command that will spill into it (so
    /// disposal removes it).
    pub fn use_spill_dir(&self) -> &str {
        self.spill_dir_used.store(true, Ordering::Release);
        &self.spill_dir
    }

    pub fn instance(&self) -> &str {
        &self.instance
    }

    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Removes the helper's directory and the spill directory, each only if
    /// something may have put anything there (an upload was possible, a
    /// command was given the spill directory): envd `Remove` calls as root,
    /// at once (a recursive removal that never follows a symlink it meets,
    /// the last component included). Not a control script: a process costs
    /// a few milliseconds in a sandbox, a call a fraction of one, and every
    /// `dsh` that ends pays this; a provider that used neither (a sandbox
    /// from a template with the helper, no spilling command) sends nothing.
    /// A gone sandbox counts as clean.
    pub async fn remove_private_state(&self) -> Result<()> {
        let options = CallOptions::default()
            .user(dsh_e2b_gateway::CONTROL_USER)
            .timeout(CLEANUP_TIMEOUT);
        let remove = |path: &str| {
            let options = &options;
            let path = path.to_owned();
            async move {
                match self.envd.remove(&path, options).await {
                    Err(err) if !err.is_sandbox_gone() => Err(crate::errors::client(
                        &format!("dispose: remove {path}"),
                        &err,
                    )),
                    _ => Ok(()),
                }
            }
        };
        let used = |flag: &AtomicBool, path: &str| {
            OptionFuture::from(flag.load(Ordering::Acquire).then(|| remove(path)))
        };
        let (install, spill) = tokio::join!(
            used(&self.install_dir_used, &self.install_dir),
            used(&self.spill_dir_used, &self.spill_dir)
        );
        install.unwrap_or(Ok(())).and(spill.unwrap_or(Ok(())))
    }
}
