//! `terminal_send`: typing into a terminal.

use std::time::Duration;

use dsh_plugin_api::{Bytes, Error, ErrorKind, Result};

use super::Terminals;
use super::keys::{KNOWN_KEYS, key_bytes};
use crate::commands::{from_seam, invalid};

const TOOL: &str = "terminal_send";

/// The most bytes of `text` one send may carry.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
/// The most `keys` one send may carry.
pub const MAX_KEYS: usize = 256;
/// How long a send waits for the terminal to take the input (a program
/// that reads no input fills the terminal's buffer).
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Types text and named keys into a terminal.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalSendRequest {
    /// The terminal's id.
    pub id: String,
    /// Text to type, exactly as given (at most 65536 bytes). It is sent
    /// before `keys`; a newline in it is a line feed, so end a command
    /// line with the `Enter` key.
    #[serde(default)]
    pub text: Option<String>,
    /// Named keys to press after the text, in order (at most 256): Enter,
    /// Tab, Shift-Tab, Escape, Backspace, Space, Up, Down, Left, Right,
    /// Home, End, PageUp, PageDown, Insert, Delete, F1…F12, Ctrl-A…Ctrl-Z
    /// (Ctrl-C interrupts, Ctrl-D ends input), Ctrl-@, Ctrl-[, Ctrl-\,
    /// Ctrl-], Ctrl-^, Ctrl-_, and Alt-x for any character x. Case does not
    /// matter.
    #[serde(default)]
    pub keys: Option<Vec<String>>,
}

/// What `terminal_send` sent.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct TerminalSendResult {
    pub id: String,
    /// Bytes written to the terminal.
    pub bytes_sent: u64,
}

impl crate::Outcome for TerminalSendResult {
    fn text(&self) -> String {
        format!(
            "sent {} bytes to {}; see the effect with terminal_read",
            self.bytes_sent, self.id
        )
    }
}

impl Terminals {
    /// `terminal_send`: writes `text` and then the bytes of `keys` to the
    /// terminal as one input, waiting at most [`SEND_TIMEOUT`] for it to
    /// be taken. Cursor keys follow the program's cursor-key mode.
    /// Dropping the future may leave part of the input written.
    pub async fn terminal_send(&self, request: TerminalSendRequest) -> Result<TerminalSendResult> {
        let session = self.registry.get(TOOL, &request.id)?;
        let text = request.text.unwrap_or_default();
        let keys = request.keys.unwrap_or_default();
        if text.is_empty() && keys.is_empty() {
            return Err(invalid(TOOL, "nothing to send: give text, keys or both"));
        }
        if text.len() > MAX_TEXT_BYTES {
            return Err(invalid(
                TOOL,
                format_args!("text is {} bytes, more than {MAX_TEXT_BYTES}", text.len()),
            ));
        }
        if keys.len() > MAX_KEYS {
            return Err(invalid(
                TOOL,
                format_args!("{} keys, more than {MAX_KEYS}", keys.len()),
            ));
        }
        let application_cursor = session.shared().parser.screen().application_cursor();
        let mut input = text.into_bytes();
        for key in &keys {
            let bytes = key_bytes(key, application_cursor).ok_or_else(|| {
                invalid(
                    TOOL,
                    format_args!("unknown key {key:?}; known keys: {KNOWN_KEYS}"),
                )
            })?;
            input.extend_from_slice(&bytes);
        }
        let len = input.len() as u64;
        match tokio::time::timeout(SEND_TIMEOUT, session.terminal.write(Bytes::from(input))).await {
            Ok(written) => written.map_err(|err| from_seam(TOOL, err))?,
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "{TOOL}: {} did not take the input within {} s (is the program reading?); part of it may have been sent",
                        session.id,
                        SEND_TIMEOUT.as_secs()
                    ),
                )
                .with_subject(session.id.clone()));
            }
        }
        Ok(TerminalSendResult {
            id: session.id.clone(),
            bytes_sent: len,
        })
    }
}
