//! `kill`: end a command's whole process group.

use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_plugin_api::Result;

use super::Commands;
use super::errors::{from_seam, invalid};
use super::status::{CommandStatus, ExitInfo, state_text};
use super::terminate::until_proven_gone;

const TOOL: &str = "kill";

/// The grace between SIGTERM and SIGKILL when `grace_ms` is not given.
pub const DEFAULT_KILL_GRACE_MS: u64 = 2000;
/// The longest grace `kill` accepts.
pub const MAX_KILL_GRACE_MS: u64 = 30_000;
/// How long `kill` waits, once the group is gone, for the world to report
/// the exit.
const EXIT_REPORT_WAIT: Duration = Duration::from_secs(5);

/// Ends a command and everything in its process group.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KillRequest {
    /// The command's id (also one of a durable command a previous server
    /// started).
    pub id: String,
    /// Milliseconds between SIGTERM and SIGKILL. Default 2000, at most
    /// 30000.
    #[serde(default)]
    pub grace_ms: Option<u64>,
}

/// How the killed command ended.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct KillResult {
    pub id: String,
    /// `exited` once the exit was reported (a command that had already
    /// exited reports its own exit).
    pub status: CommandStatus,
    #[serde(flatten)]
    pub exit: ExitInfo,
}

impl crate::Outcome for KillResult {
    fn text(&self) -> String {
        format!(
            "{}: process group gone; {}",
            self.id,
            state_text(self.status, &self.exit)
        )
    }
}

impl Commands {
    /// `kill`: SIGTERM to the command's whole process group, the grace,
    /// SIGKILL; succeeds once the group is proven empty (retrying a few
    /// times while the world reports it busy), then reports the exit. The
    /// command stays readable. Killing a finished command ends whatever it
    /// left running in its group. Dropping the future may leave the ladder
    /// half-run; kill again.
    ///
    /// A durable command's group is ended through its attachment, the
    /// same ladder; it stays readable here, and what the world retains of
    /// it is removed (`forget`) when the tools let it go — pushed out by
    /// newer commands, or when the server ends.
    pub async fn kill(&self, request: KillRequest) -> Result<KillResult> {
        let command = self.lookup(TOOL, &request.id).await?;
        let grace_ms = request.grace_ms.unwrap_or(DEFAULT_KILL_GRACE_MS);
        if grace_ms > MAX_KILL_GRACE_MS {
            return Err(invalid(
                TOOL,
                format_args!("grace_ms {grace_ms} is more than the maximum {MAX_KILL_GRACE_MS}"),
            ));
        }
        let grace = Duration::from_millis(grace_ms);
        command.killed.store(true, Ordering::Relaxed);
        let process = &command.process;
        until_proven_gone(|| process.terminate(grace))
            .await
            .map_err(|err| from_seam(TOOL, err).with_subject(command.id.clone()))?;
        let exit = command.wait_exit_for(EXIT_REPORT_WAIT).await;
        Ok(KillResult {
            id: command.id.clone(),
            status: CommandStatus::of(&exit),
            exit: ExitInfo::of(&exit),
        })
    }
}
