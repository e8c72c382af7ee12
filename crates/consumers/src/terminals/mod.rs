//! Terminals in the world: `terminal_open`, `terminal_send` (text and named
//! keys), `terminal_read` (raw output by cursor and the rendered screen),
//! `terminal_resize`, `terminal_signal`, `terminal_close`,
//! `list_terminals`.
//!
//! Each terminal is a pseudo-terminal of the `subprocess` seam running one
//! program in its own session. A task per terminal drains everything the
//! program prints into a `vt100` screen (what a person would see) and a
//! bounded log of the raw bytes (read by cursor), so the program never
//! blocks on unread output. A terminal is known by an id (`term-<n>`) until
//! `terminal_close`, until [`MAX_TERMINALS`] newer ones push it out after
//! its program exited, or [`Terminals::shutdown`].

mod close;
mod control;
mod keys;
mod list;
mod open;
mod read;
mod send;
mod session;
mod signals;

use std::sync::Arc;

use dsh_plugin_api::Error;
use dsh_plugin_api::subprocess::SubprocessProvider;

use crate::commands::{Kind, Registry};
use session::TerminalSession;

pub use close::{TerminalCloseRequest, TerminalCloseResult};
pub use control::{
    TerminalResizeRequest, TerminalResizeResult, TerminalSignalRequest, TerminalSignalResult,
};
pub use keys::KNOWN_KEYS;
pub use list::{ListTerminalsRequest, ListTerminalsResult, TerminalInfo};
pub use open::{
    DEFAULT_COLS, DEFAULT_ROWS, DEFAULT_TERM, MAX_COLS, MAX_ROWS, TerminalOpenRequest,
    TerminalOpenResult,
};
pub use read::{
    DEFAULT_READ_BYTES, MAX_READ_BYTES, MAX_WAIT_MS, QUIET, TerminalReadRequest, TerminalReadResult,
};
pub use send::{MAX_KEYS, MAX_TEXT_BYTES, SEND_TIMEOUT, TerminalSendRequest, TerminalSendResult};
pub use session::LOG_LIMIT;
pub use signals::SignalName;

/// How many terminals are remembered. Opening one more forgets the oldest
/// whose program exited; when every program still runs, `terminal_open`
/// refuses with `Busy`.
pub const MAX_TERMINALS: usize = 16;

/// The terminal tools of one world.
pub struct Terminals {
    subprocess: Arc<dyn SubprocessProvider>,
    registry: Registry<TerminalSession>,
}

impl Terminals {
    /// The terminal tools of the world `subprocess` serves.
    pub fn new(subprocess: Arc<dyn SubprocessProvider>) -> Terminals {
        Terminals {
            subprocess,
            registry: Registry::new(Kind {
                prefix: "term",
                noun: "terminal",
                list_tool: "list_terminals",
                end_tool: "terminal_control (op close)",
                max: MAX_TERMINALS,
                // A terminal's log lives in memory, bounded per terminal.
                max_kept_bytes: u64::MAX,
            }),
        }
    }

    /// Refuses new terminals, then tears down every remembered terminal's
    /// session (retrying while the world reports it busy). Returns the
    /// sessions not proven gone; empty when everything ended. A second
    /// call has nothing left to do.
    pub async fn shutdown(&self) -> Vec<Error> {
        self.registry.shutdown().await
    }
}
