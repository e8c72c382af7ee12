//! `terminal_close`: tear a terminal's session down.

use dsh_plugin_api::Result;

use super::Terminals;
use crate::commands::from_seam;

/// Closes a terminal: everything in its session ends.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalCloseRequest {
    /// The terminal's id.
    pub id: String,
}

/// How the terminal's program ended.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct TerminalCloseResult {
    pub id: String,
    /// Its exit code, if it exited normally.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it (`SIGHUP` for a program the close ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
}

impl crate::Outcome for TerminalCloseResult {
    fn text(&self) -> String {
        match (self.exit_code, &self.signal) {
            (Some(code), _) => format!("closed {}; its program exited with code {code}", self.id),
            (None, Some(signal)) => format!("closed {}; its program ended by {signal}", self.id),
            (None, None) => format!("closed {}", self.id),
        }
    }
}

impl Terminals {
    /// `terminal_close`: hangs up the terminal's session (SIGHUP to every
    /// group in it, SIGKILL after the provider's grace), succeeding only
    /// once it is proven empty (retried while the world reports it busy),
    /// then forgets the terminal. If it is not proven gone the terminal
    /// stays, so closing can be retried. Dropping the future may leave the
    /// teardown half-run; close again.
    pub async fn terminal_close(
        &self,
        request: TerminalCloseRequest,
    ) -> Result<TerminalCloseResult> {
        const TOOL: &str = "terminal_close";
        let session = self.registry.get(TOOL, &request.id)?;
        session
            .terminate()
            .await
            .map_err(|err| from_seam(TOOL, err).with_subject(session.id.clone()))?;
        self.registry.remove(session.seq);
        let status = session.shared().exit.clone().and_then(Result::ok);
        Ok(TerminalCloseResult {
            id: session.id.clone(),
            exit_code: status.and_then(|status| status.code),
            signal: status
                .and_then(|status| status.signal)
                .map(|signal| signal.to_string()),
        })
    }
}
