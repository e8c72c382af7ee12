//! The helper's durable subcommands in the seam's types, run through
//! whatever reaches the provider's world ([`HelperRunner`]): one
//! implementation of list, forget, info and terminate for both providers.

use std::time::Duration;

use async_trait::async_trait;
use dsh_plugin_api::Result;
use dsh_plugin_api::durable::{DurableCommand, validate_id};

use crate::answers;
use crate::followed::DurableControl;

/// Bound on one control subcommand (a terminate adds its grace and
/// [`KILL_SETTLE`]).
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a terminate ladder may take to prove the group empty after
/// SIGKILL.
pub const KILL_SETTLE: Duration = Duration::from_secs(2);

/// How a provider runs the helper in its world.
#[async_trait]
pub trait HelperRunner: Send + Sync + 'static {
    /// The durable state directory, as the helper takes it.
    fn state_dir(&self) -> Result<&str>;

    /// Runs the helper with `args` (and `request` in its environment),
    /// bounded by `timeout`; returns its answer without the final newline.
    /// Errors name `operation`.
    async fn run_helper(
        &self,
        operation: &str,
        args: &[&str],
        request: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<String>;
}

/// `list_durable` through `runner`.
pub async fn list(runner: &impl HelperRunner) -> Result<Vec<DurableCommand>> {
    let dir = runner.state_dir()?;
    let answer = runner
        .run_helper(
            "list_durable",
            &["durable-list", dir],
            None,
            CONTROL_TIMEOUT,
        )
        .await?;
    answers::list(&answer)
}

/// `forget` through `runner`.
pub async fn forget(runner: &impl HelperRunner, id: &str) -> Result<()> {
    validate_id("forget", id)?;
    let dir = runner.state_dir()?;
    let line = runner
        .run_helper(
            "forget",
            &["durable-forget", dir, id],
            None,
            CONTROL_TIMEOUT,
        )
        .await?;
    answers::forget(id, &line)
}

#[async_trait]
impl<R: HelperRunner> DurableControl for R {
    async fn info(&self, id: &str) -> Result<DurableCommand> {
        let dir = self.state_dir()?;
        let line = self
            .run_helper("attach", &["durable-info", dir, id], None, CONTROL_TIMEOUT)
            .await?;
        answers::info(id, &line)
    }

    async fn terminate(&self, id: &str, grace: Duration) -> Result<()> {
        let dir = self.state_dir()?;
        let grace_ms = grace.as_millis().to_string();
        let settle_ms = KILL_SETTLE.as_millis().to_string();
        let line = self
            .run_helper(
                "terminate",
                &["durable-terminate", dir, id, &grace_ms, &settle_ms],
                None,
                grace + KILL_SETTLE + CONTROL_TIMEOUT,
            )
            .await?;
        answers::terminate(id, &line)
    }
}
