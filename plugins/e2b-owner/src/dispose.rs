//! Applying `onDispose` to the sandbox.

use dsh_e2b_gateway::plugin_error;
use dsh_plugin_api::Result;
use e2b_client::Sandbox;

use crate::config::OnDispose;

/// Kills, pauses or leaves `sandbox`. A sandbox that is already gone counts
/// as killed or paused (quiescent), and one already paused as paused.
///
/// Runs on the caller's runtime; dropping the future may leave the request
/// done or not.
///
/// # Errors
/// The mapped API error when the control plane cannot do it.
pub async fn release(sandbox: &Sandbox, on_dispose: OnDispose) -> Result<()> {
    let outcome = match on_dispose {
        OnDispose::Kill => match sandbox.kill().await {
            Err(err) if err.is_sandbox_gone() => {
                tracing::info!(sandbox_id = %sandbox.id(), "sandbox was already gone");
                Ok(())
            }
            other => other,
        },
        OnDispose::Pause => match sandbox.pause().await {
            Err(err) if err.is_sandbox_gone() => {
                tracing::info!(sandbox_id = %sandbox.id(), "sandbox was already gone");
                Ok(())
            }
            Err(e2b_client::Error::Conflict { .. }) => {
                tracing::info!(sandbox_id = %sandbox.id(), "sandbox was already paused");
                Ok(())
            }
            other => other,
        },
        OnDispose::Leave => Ok(()),
    };
    match outcome {
        Ok(()) => {
            tracing::info!(sandbox_id = %sandbox.id(), ?on_dispose, "sandbox released");
            Ok(())
        }
        Err(err) => Err(plugin_error(&err).context(format!(
            "dispose: {} the sandbox",
            match on_dispose {
                OnDispose::Kill => "kill",
                OnDispose::Pause => "pause",
                OnDispose::Leave => "leave",
            }
        ))),
    }
}
