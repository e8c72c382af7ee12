//! [`GatewayOwner`]: an in-process `e2b` owner of one sandbox — identity, envd through the
//! [`EnvdGateway`], liveness from the control plane. `dsh-e2b-owner` serves its dependents with one
//! (adding disposal on top); tests and embedders hand one to `fs-e2b`/`subprocess-e2b` without
//! loading the owner plugin.

use dsh_plugin_api::owner::{DaemonRequest, DaemonResponse, Owner, SandboxInfo};
use dsh_plugin_api::{Error, ErrorKind, Result, async_trait};
use e2b_client::Sandbox;

use crate::liveness::{ControlPlaneLiveness, Liveness, Presence};
use crate::serve::EnvdGateway;

/// The `e2b` service of one sandbox, prepared elsewhere as `info` describes it.
///
/// Runs on the runtime of the sandbox's HTTP stack (for a plugin, its own runtime, which the
/// export layer enters).
#[derive(Debug)]
pub struct GatewayOwner {
    info: SandboxInfo,
    gateway: EnvdGateway,
    liveness: ControlPlaneLiveness,
}

impl GatewayOwner {
    /// Serves `sandbox` under `info` (its cwd and runtime root must already be set up).
    pub fn new(sandbox: &Sandbox, info: SandboxInfo) -> GatewayOwner {
        GatewayOwner::from_parts(
            info,
            EnvdGateway::for_sandbox(sandbox),
            ControlPlaneLiveness::new(sandbox.api().clone(), sandbox.id()),
        )
    }

    /// Serves `info`'s sandbox through `gateway`, asking `liveness` whether it runs (for a
    /// gateway on a transport of the caller's choosing).
    pub fn from_parts(
        info: SandboxInfo,
        gateway: EnvdGateway,
        liveness: ControlPlaneLiveness,
    ) -> GatewayOwner {
        GatewayOwner {
            info,
            gateway,
            liveness,
        }
    }
}

#[async_trait]
impl Owner for GatewayOwner {
    fn info(&self) -> SandboxInfo {
        self.info.clone()
    }

    /// Serves `request` through the gateway (see [`EnvdGateway`] for its failures).
    async fn daemon(&self, request: DaemonRequest) -> Result<DaemonResponse> {
        self.gateway.serve(request).await
    }

    /// `true` while the control plane reports the sandbox running; `false` once it is gone
    /// or paused; `Unavailable` when the control plane cannot be asked.
    async fn alive(&self) -> Result<bool> {
        match self.liveness.presence().await {
            Presence::Running => Ok(true),
            Presence::Gone(_) => Ok(false),
            Presence::Unknown(why) => Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "alive: cannot ask about sandbox {}: {why}",
                    self.info.sandbox_id
                ),
            )
            .with_subject(self.info.sandbox_id.clone())),
        }
    }
}
