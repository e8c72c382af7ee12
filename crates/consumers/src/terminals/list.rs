//! `list_terminals`: every terminal the tools remember.

use dsh_plugin_api::Result;

use super::Terminals;

/// Lists the open terminals (and those whose program exited but that were
/// not closed yet).
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListTerminalsRequest {}

/// The remembered terminals, oldest first.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct ListTerminalsResult {
    pub terminals: Vec<TerminalInfo>,
}

/// One remembered terminal.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct TerminalInfo {
    pub id: String,
    /// What runs on it.
    pub command: String,
    pub cols: u16,
    pub rows: u16,
    /// Whether its program has exited.
    pub exited: bool,
    /// Bytes it has printed in all.
    pub total_bytes: u64,
}

impl crate::Outcome for ListTerminalsResult {
    fn text(&self) -> String {
        if self.terminals.is_empty() {
            return "no terminals".to_owned();
        }
        self.terminals
            .iter()
            .map(|info| {
                format!(
                    "{}  {}x{}  {}  {} bytes  {}",
                    info.id,
                    info.cols,
                    info.rows,
                    if info.exited { "exited" } else { "running" },
                    info.total_bytes,
                    info.command
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Terminals {
    /// `list_terminals`: every remembered terminal with its size and state.
    /// Dropping the future has no effect.
    pub async fn list_terminals(
        &self,
        _request: ListTerminalsRequest,
    ) -> Result<ListTerminalsResult> {
        let terminals = self
            .registry
            .all()
            .iter()
            .map(|session| {
                let shared = session.shared();
                let (rows, cols) = shared.parser.screen().size();
                TerminalInfo {
                    id: session.id.clone(),
                    command: session.line.clone(),
                    cols: cols.get(),
                    rows: rows.get(),
                    exited: shared.exit.is_some(),
                    total_bytes: shared.log.total(),
                }
            })
            .collect();
        Ok(ListTerminalsResult { terminals })
    }
}
