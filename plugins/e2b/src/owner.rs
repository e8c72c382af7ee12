//! [`SandboxOwner`]: the `e2b` service the adapters are handed.

use std::sync::atomic::{AtomicBool, Ordering};

use dsh_e2b_gateway::{ControlPlaneLiveness, EnvdGateway, Liveness, Presence};
use dsh_plugin_api::e2b::{E2bOwner, EnvdRequest, EnvdResponse, SandboxInfo};
use dsh_plugin_api::{Error, ErrorKind, Result, async_trait};
use e2b_client::Sandbox;

use crate::setup::Workspace;

/// The owner of one prepared sandbox, as its dependents see it: identity,
/// the envd gateway, and liveness from the control plane.
///
/// Runs on the owner plugin's runtime (the export layer enters it), where
/// its HTTP stack lives.
#[derive(Debug)]
pub struct SandboxOwner {
    info: SandboxInfo,
    gateway: EnvdGateway,
    liveness: ControlPlaneLiveness,
    closed: AtomicBool,
}

impl SandboxOwner {
    /// The owner of `sandbox`, prepared as `workspace`.
    pub fn new(sandbox: &Sandbox, workspace: Workspace) -> SandboxOwner {
        SandboxOwner {
            info: SandboxInfo {
                sandbox_id: sandbox.id().to_owned(),
                template_id: sandbox.info().template_id.clone(),
                envd_version: sandbox.info().envd_version.to_string(),
                cwd: workspace.cwd,
                runtime_root: workspace.runtime_root,
            },
            gateway: EnvdGateway::for_sandbox(sandbox),
            liveness: ControlPlaneLiveness::new(sandbox.api().clone(), sandbox.id()),
            closed: AtomicBool::new(false),
        }
    }

    /// Refuses every later `envd` call (disposal's first step). Calls in
    /// flight are not interrupted; they end with the sandbox.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl E2bOwner for SandboxOwner {
    fn info(&self) -> SandboxInfo {
        self.info.clone()
    }

    /// Serves `request` through the gateway (see
    /// [`EnvdGateway`](dsh_e2b_gateway::EnvdGateway) for its failures);
    /// `Closed` once the owner is being disposed.
    async fn envd(&self, request: EnvdRequest) -> Result<EnvdResponse> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::closed(format!(
                "envd {} {}: the e2b owner of sandbox {} is disposed",
                request.method, request.path_and_query, self.info.sandbox_id
            ))
            .with_subject(self.info.sandbox_id.clone()));
        }
        self.gateway.serve(request).await
    }

    /// `true` while the control plane reports the sandbox running; `false`
    /// once it is gone or paused.
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
