//! `dsh-e2b-owner`: the owner of one E2B sandbox (docs/design.md §5.3).
//!
//! Provides the owner service of kind `e2b` (`OwnerKind::E2B`) and injects
//! nothing. Manifests naming it by its first name, `dsh-e2b`, still load it
//! (dsh-host's alias table, with a deprecation warning). Creating the plugin
//! creates a sandbox (tagged `dsh-owner: dsh-e2b`, `dsh-entry: <entry id>`
//! in its metadata) or connects to `sandboxId`, then prepares the world
//! before the owner is handed out: the cwd exists, and the runtime root
//! `/var/lib/dsh-e2b` is a real directory, mode 0700, owned by root, under
//! ancestors only root may write (adapters write their control state there
//! as root, out of the sandbox user's reach, and the user can neither
//! rename it away nor replace its path), emptied of any earlier owner's
//! state. If that fails, a sandbox this plugin created is
//! deleted (one attempt) before the error is returned; a sandbox it
//! connected to is left as it was.
//!
//! The `e2b` service ([`SandboxOwner`]) gives the adapters the sandbox's
//! identity and the one gateway to its envd (`dsh_e2b_gateway`): their
//! requests get routing and credentials added here and share this plugin's
//! connection pool. The API key is only ever a header to the control plane:
//! nothing this plugin sends puts it into the sandbox, and it is never
//! logged.
//!
//! While the owner lives, it keeps the sandbox alive: its timeout is a
//! lease the owner renews ([`lease`]), so a sandbox outlives its owner by
//! at most `timeoutMs`.
//!
//! Disposal ends the lease, refuses new gateway calls, then applies `onDispose`: `kill`
//! (default), `pause` or `leave`; a sandbox already gone counts as done.
//!
//! Configuration: see [`config`]. Everything runs on the plugin's own
//! runtime (the export layer's).

#![forbid(unsafe_code)]

pub mod acquire;
pub mod config;
pub mod dispose;
pub mod lease;
pub mod owner;
pub mod setup;

use std::sync::{Arc, Mutex, PoisonError};

use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::{
    CreateContext, Descriptor, Error, Plugin, Result, Service, ServiceKind, async_trait,
};
use e2b_client::{Api, Sandbox};

use crate::acquire::{KillOnDrop, Origin, acquire};
use crate::config::{Acquisition, DEFAULT_TEMPLATE, OnDispose, OwnerConfig};
use crate::lease::Lease;
pub use crate::owner::SandboxOwner;

/// The `dsh-e2b-owner` plugin: one sandbox and its owner service.
#[derive(Debug)]
pub struct E2bPlugin {
    owner: Arc<SandboxOwner>,
    sandbox: Sandbox,
    on_dispose: OnDispose,
    /// Renews the sandbox's timeout until disposal takes it (`None` with
    /// `keepAlive: false`, in debug mode, and after disposal).
    lease: Mutex<Option<Lease>>,
}

impl E2bPlugin {
    /// Creates the plugin with `env` in place of the process environment
    /// for the `E2B_*` variables (embedders and tests keep their own).
    ///
    /// Runs on the caller's runtime. Dropping the future after the sandbox
    /// was created deletes it (spawned on the current runtime).
    ///
    /// # Errors
    /// `Config` for a bad config (naming the field), and whatever acquiring
    /// or preparing the sandbox failed with (see [`acquire::acquire`],
    /// [`setup::prepare`]); a setup failure says what became of the
    /// sandbox.
    pub async fn create_with_env(
        ctx: CreateContext,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<E2bPlugin> {
        let config = OwnerConfig::from_context(&ctx, env)?;
        let api = Api::new(config.connection.clone());
        let acquired = acquire(api, &config).await?;
        let mut guard = KillOnDrop::new(&acquired);
        let sandbox = acquired.sandbox;
        // A sandbox this owner just made from `base` cannot hold a runtime
        // root; any other (a reconnect, a template such as `dsh template`'s)
        // may.
        let may_be_ready = !matches!(
            &config.acquisition,
            Acquisition::Create { template, .. } if template == DEFAULT_TEMPLATE
        );
        let prepared = setup::prepare(sandbox.envd(), &config.cwd, may_be_ready).await;
        let workspace = match prepared {
            Ok(workspace) => workspace,
            Err(err) => {
                let fate = match acquired.origin {
                    Origin::Created => match sandbox.kill().await {
                        Ok(()) => format!("sandbox {} was deleted", sandbox.id()),
                        Err(kill) if kill.is_sandbox_gone() => {
                            format!("sandbox {} is gone", sandbox.id())
                        }
                        Err(kill) => format!(
                            "deleting sandbox {} failed ({kill}); it expires at its timeout",
                            sandbox.id()
                        ),
                    },
                    Origin::Connected { .. } => {
                        format!(
                            "sandbox {} was left as it was (it existed before)",
                            sandbox.id()
                        )
                    }
                };
                guard.disarm();
                let failed = Error::new(err.kind(), format!("{}; {fate}", err.message()));
                return Err(match err.subject() {
                    Some(subject) => failed.with_subject(subject.to_owned()),
                    None => failed,
                });
            }
        };
        guard.disarm();
        tracing::info!(
            sandbox_id = %sandbox.id(),
            cwd = %workspace.cwd,
            runtime_root = %workspace.runtime_root,
            "sandbox ready"
        );
        // Debug mode has no control plane to renew with (and no timeout).
        let lease = (config.keep_alive && !sandbox.api().config().debug())
            .then(|| Lease::start(sandbox.clone(), config.timeout));
        Ok(E2bPlugin {
            owner: Arc::new(SandboxOwner::new(&sandbox, workspace)),
            sandbox,
            on_dispose: config.on_dispose,
            lease: Mutex::new(lease),
        })
    }

    /// The owner service.
    pub fn owner(&self) -> &Arc<SandboxOwner> {
        &self.owner
    }

    /// The sandbox (control-plane calls and the direct envd client).
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }
}

#[async_trait]
impl Plugin for E2bPlugin {
    type Config = config::RawConfig;

    /// The checks of [`config::field_problems`], all at once.
    fn check_config(config: &config::RawConfig) -> Vec<dsh_plugin_api::FieldError> {
        config::field_problems(config)
    }

    const DESCRIPTOR: Descriptor = Descriptor {
        name: "dsh-e2b-owner",
        version: env!("CARGO_PKG_VERSION"),
        provides: &[ServiceKind::Owner(OwnerKind::E2B)],
        inject: &[],
    };

    /// [`E2bPlugin::create_with_env`] with the process environment.
    async fn create(ctx: CreateContext) -> Result<Self> {
        E2bPlugin::create_with_env(ctx, |name| std::env::var(name).ok()).await
    }

    fn services(&self) -> Vec<Service> {
        vec![Service::Owner(OwnerKind::E2B, self.owner.clone())]
    }

    /// Ends the lease, refuses new gateway calls, then applies `onDispose`
    /// (setup finished before the owner existed, so there is none to
    /// await).
    async fn dispose(&self) -> Result<()> {
        drop(
            self.lease
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        self.owner.close();
        dispose::release(&self.sandbox, self.on_dispose).await
    }
}

dsh_plugin_api::export_plugin!(E2bPlugin);
