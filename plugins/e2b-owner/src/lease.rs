//! Keeping the sandbox alive while its owner lives (docs/design.md §5.3).
//!
//! E2B deletes a sandbox when its timeout runs out, however busy it is. The
//! owner therefore holds the sandbox on a lease of `timeoutMs`: every third
//! of it, a task on the plugin's runtime reads the sandbox's `endAt` and,
//! when less than `timeoutMs` remains, sets the timeout back to `timeoutMs`.
//! So the sandbox lives as long as the owner, and an owner that dies without
//! disposal (a killed dsh) leaves it behind for at most `timeoutMs`. The
//! lease never shortens a lifetime (a connected sandbox may have a longer
//! one) and leaves a paused sandbox alone (its clock is stopped).

use std::time::{Duration, SystemTime};

use e2b_client::{Sandbox, SandboxState};
use tokio::task::JoinHandle;

/// How long after a failed renewal the next attempt comes, at most.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The renewing task; aborted when the lease is dropped.
#[derive(Debug)]
pub struct Lease {
    task: JoinHandle<()>,
}

impl Lease {
    /// Starts renewing `sandbox`'s lifetime to `timeout`, first after a
    /// third of it, on the current tokio runtime (the plugin's).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start(sandbox: Sandbox, timeout: Duration) -> Lease {
        Lease {
            task: tokio::spawn(renew_until_gone(sandbox, timeout)),
        }
    }
}

impl Drop for Lease {
    /// Stops renewing. A renewal in flight may still land; the sandbox then
    /// keeps at most `timeout` of life, as after any renewal.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Renews every `timeout / 3` until the sandbox is gone.
async fn renew_until_gone(sandbox: Sandbox, timeout: Duration) {
    let period = timeout / 3;
    let mut wait = period;
    loop {
        tokio::time::sleep(wait).await;
        wait = match renew(&sandbox, timeout).await {
            Ok(()) => period,
            Err(err) if err.is_sandbox_gone() => {
                tracing::warn!(sandbox_id = %sandbox.id(), "sandbox is gone; its lease ends");
                return;
            }
            Err(err) => {
                tracing::warn!(sandbox_id = %sandbox.id(), error = %err, "renewing the sandbox's timeout failed; retrying");
                period.min(RETRY_AFTER)
            }
        };
    }
}

/// Sets the timeout back to `timeout` when the running sandbox has less
/// than that left.
async fn renew(sandbox: &Sandbox, timeout: Duration) -> e2b_client::Result<()> {
    let detail = sandbox.detail().await?;
    if detail.state != SandboxState::Running {
        return Ok(());
    }
    let remaining = SystemTime::from(detail.end_at)
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    if remaining >= timeout {
        return Ok(());
    }
    tracing::debug!(sandbox_id = %sandbox.id(), ?remaining, ?timeout, "renewing the sandbox's timeout");
    sandbox.set_timeout(timeout).await
}
