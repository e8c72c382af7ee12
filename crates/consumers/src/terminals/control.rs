//! `terminal_resize` and `terminal_signal`.

use std::num::NonZeroU16;

use dsh_plugin_api::Result;

use super::Terminals;
use super::open::{MAX_COLS, MAX_ROWS, dimension};
use super::signals::SignalName;
use crate::commands::from_seam;

/// Changes a terminal's size.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalResizeRequest {
    /// The terminal's id.
    pub id: String,
    /// New width in columns, 1 to 500.
    pub cols: u16,
    /// New height in rows, 1 to 200.
    pub rows: u16,
}

/// The terminal's new size.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct TerminalResizeResult {
    pub id: String,
    pub cols: u16,
    pub rows: u16,
}

impl crate::Outcome for TerminalResizeResult {
    fn text(&self) -> String {
        format!("{} is now {}x{}", self.id, self.cols, self.rows)
    }
}

/// Sends a signal to a terminal's foreground process group.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalSignalRequest {
    /// The terminal's id.
    pub id: String,
    /// The signal: a name (`INT`, `TERM`, `KILL`, `HUP`, `QUIT`, `TSTP`,
    /// `CONT`, `STOP`, `USR1`, `USR2`, `WINCH`, with or without `SIG`) or
    /// a number.
    pub signal: SignalName,
}

/// What `terminal_signal` sent.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct TerminalSignalResult {
    pub id: String,
    /// The signal sent (`SIGINT`, …).
    pub signal: String,
}

impl crate::Outcome for TerminalSignalResult {
    fn text(&self) -> String {
        format!(
            "sent {} to the foreground process group of {}",
            self.signal, self.id
        )
    }
}

impl Terminals {
    /// `terminal_resize`: resizes the terminal (its foreground program sees
    /// SIGWINCH) and the screen it is rendered on. Dropping the future may
    /// leave the terminal resized and the screen not yet: the next resize
    /// brings them together.
    pub async fn terminal_resize(
        &self,
        request: TerminalResizeRequest,
    ) -> Result<TerminalResizeResult> {
        const TOOL: &str = "terminal_resize";
        let session = self.registry.get(TOOL, &request.id)?;
        let cols: NonZeroU16 = dimension(TOOL, "cols", Some(request.cols), 0, MAX_COLS)?;
        let rows: NonZeroU16 = dimension(TOOL, "rows", Some(request.rows), 0, MAX_ROWS)?;
        session
            .terminal
            .resize(cols.get(), rows.get())
            .await
            .map_err(|err| from_seam(TOOL, err))?;
        session.shared().parser.screen_mut().set_size(rows, cols);
        Ok(TerminalResizeResult {
            id: session.id.clone(),
            cols: cols.get(),
            rows: rows.get(),
        })
    }

    /// `terminal_signal`: sends the signal to the terminal's foreground
    /// process group (what the keyboard would reach: Ctrl-C is `INT`).
    /// Dropping the future has no further effect.
    pub async fn terminal_signal(
        &self,
        request: TerminalSignalRequest,
    ) -> Result<TerminalSignalResult> {
        const TOOL: &str = "terminal_signal";
        let session = self.registry.get(TOOL, &request.id)?;
        let signal = request.signal.resolve(TOOL)?;
        session
            .terminal
            .signal(signal)
            .await
            .map_err(|err| from_seam(TOOL, err))?;
        Ok(TerminalSignalResult {
            id: session.id.clone(),
            signal: signal.to_string(),
        })
    }
}
