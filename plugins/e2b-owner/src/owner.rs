//! [`SandboxOwner`]: the `e2b` service the adapters are handed.

use std::sync::atomic::{AtomicBool, Ordering};

use dsh_e2b_gateway::GatewayOwner;
use dsh_plugin_api::owner::{DaemonRequest, DaemonResponse, Owner, SandboxInfo};
use dsh_plugin_api::{Error, Result, async_trait};
use e2b_client::Sandbox;

use crate::setup::Workspace;

/// The owner of one prepared sandbox, as its dependents see it: the
/// gateway's [`GatewayOwner`] (identity, envd, liveness) that refuses envd
/// calls once disposal began.
///
/// Runs on the owner plugin's runtime (the export layer enters it), where
/// its HTTP stack lives.
#[derive(Debug)]
pub struct SandboxOwner {
    inner: GatewayOwner,
    closed: AtomicBool,
}

impl SandboxOwner {
    /// The owner of `sandbox`, prepared as `workspace`.
    pub fn new(sandbox: &Sandbox, workspace: Workspace) -> SandboxOwner {
        SandboxOwner {
            inner: GatewayOwner::new(
                sandbox,
                SandboxInfo {
                    sandbox_id: sandbox.id().to_owned(),
                    template_id: sandbox.info().template_id.clone(),
                    daemon_version: sandbox.info().envd_version.to_string(),
                    cwd: workspace.cwd,
                    runtime_root: workspace.runtime_root,
                },
            ),
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
impl Owner for SandboxOwner {
    fn info(&self) -> SandboxInfo {
        self.inner.info()
    }

    /// Serves `request` through the gateway (see [`GatewayOwner`]);
    /// `Closed` once the owner is being disposed.
    async fn daemon(&self, request: DaemonRequest) -> Result<DaemonResponse> {
        if self.closed.load(Ordering::SeqCst) {
            let sandbox_id = self.inner.info().sandbox_id;
            return Err(Error::closed(format!(
                "envd {} {}: the e2b owner of sandbox {sandbox_id} is disposed",
                request.method, request.path_and_query
            ))
            .with_subject(sandbox_id));
        }
        self.inner.daemon(request).await
    }

    /// As [`GatewayOwner::alive`]: `true` while the control plane reports
    /// the sandbox running; `false` once it is gone or paused.
    async fn alive(&self) -> Result<bool> {
        self.inner.alive().await
    }
}
