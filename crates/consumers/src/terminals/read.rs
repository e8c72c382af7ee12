//! `terminal_read`: a terminal's raw output by cursor and its rendered
//! screen.

use std::time::Duration;

use dsh_plugin_api::Result;

use super::Terminals;
use crate::commands::{cut_character_start, decode_piece, invalid};

const TOOL: &str = "terminal_read";

/// Raw output bytes a read returns when `max_bytes` is not given.
pub const DEFAULT_READ_BYTES: u64 = 16 * 1024;
/// The most raw output bytes one read returns.
pub const MAX_READ_BYTES: u64 = 256 * 1024;
/// The longest a read waits, whatever `wait_ms` asks.
pub const MAX_WAIT_MS: u64 = 50_000;
/// How long output must pause for a waiting read to consider the program
/// done printing.
pub const QUIET: Duration = Duration::from_millis(200);

/// Reads a terminal: what it printed since a cursor, and its screen.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalReadRequest {
    /// The terminal's id.
    pub id: String,
    /// Byte offset in the terminal's raw output to read from. Default:
    /// where the previous `terminal_read` ended (0 at first). Past the end
    /// reads nothing and returns the end.
    #[serde(default)]
    pub cursor: Option<u64>,
    /// The most raw output bytes to return. Default 16384, at most 262144.
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Milliseconds to wait first: until output after the cursor has come
    /// and then paused for 200 ms, the program exited, or this passed.
    /// Default 0, at most 50000 (larger values wait that long).
    #[serde(default)]
    pub wait_ms: Option<u64>,
    /// Include the rendered screen. Default true.
    #[serde(default)]
    pub screen: Option<bool>,
}

/// A terminal's output since the cursor and its screen.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct TerminalReadResult {
    pub id: String,
    /// What the program printed from the cursor, raw (escape sequences
    /// included), as UTF-8 with invalid bytes replaced; never ends inside
    /// a character.
    pub output: String,
    /// The cursor for the next read.
    pub cursor: u64,
    /// Bytes between the requested cursor and `output` that are no longer
    /// kept (the log keeps the last 256 KiB); 0 normally.
    pub dropped: u64,
    /// Bytes the program has printed in all.
    pub total_bytes: u64,
    /// The screen as a person would see it: one line per row, trailing
    /// blanks and trailing empty rows trimmed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screen: Option<String>,
    /// The screen cursor's row (0 = top).
    pub cursor_row: u16,
    /// The screen cursor's column (0 = left).
    pub cursor_col: u16,
    /// Whether the program has exited.
    pub exited: bool,
    /// Its exit code, if it exited normally.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
}

impl crate::Outcome for TerminalReadResult {
    fn text(&self) -> String {
        let state = match (self.exited, self.exit_code, &self.signal) {
            (false, ..) => "running".to_owned(),
            (true, Some(code), _) => format!("exited, code {code}"),
            (true, None, Some(signal)) => format!("killed by {signal}"),
            (true, None, None) => "exited".to_owned(),
        };
        let meta = format!(
            "[{}: {state} · cursor {} of {} bytes · screen cursor at row {}, column {}]",
            self.id, self.cursor, self.total_bytes, self.cursor_row, self.cursor_col
        );
        match &self.screen {
            Some(screen) => format!("{screen}\n{meta}"),
            None if self.output.is_empty() => format!("(no new output)\n{meta}"),
            None => format!("{}\n{meta}", self.output),
        }
    }
}

impl Terminals {
    /// `terminal_read`: after waiting as `wait_ms` says, the raw output
    /// from the cursor (bounded) and the rendered screen. Dropping the
    /// future stops the wait; the terminal is not affected.
    pub async fn terminal_read(&self, request: TerminalReadRequest) -> Result<TerminalReadResult> {
        let session = self.registry.get(TOOL, &request.id)?;
        let max = match request.max_bytes {
            Some(0) => return Err(invalid(TOOL, "max_bytes must be at least 1")),
            Some(max) => max.min(MAX_READ_BYTES),
            None => DEFAULT_READ_BYTES,
        } as usize;
        let cursor = request.cursor.unwrap_or_else(|| session.default_cursor());
        let wait = Duration::from_millis(request.wait_ms.unwrap_or(0).min(MAX_WAIT_MS));
        if !wait.is_zero() {
            session.wait_for_quiet(cursor, wait, QUIET).await;
        }

        let shared = session.shared();
        let exit = shared.exit.clone();
        let total = shared.log.total();
        let (start, bytes) = shared.log.read(cursor, max);
        let dropped = start.saturating_sub(cursor);
        let skip = if dropped > 0 {
            cut_character_start(&bytes)
        } else {
            0
        };
        let end = start + bytes.len() as u64;
        let (output, used) = decode_piece(&bytes[skip..], exit.is_none() || end < total);
        let next = start + (skip + used) as u64;
        let screen = shared.parser.screen();
        let (cursor_row, cursor_col) = screen.cursor_position();
        let rendered = request.screen.unwrap_or(true).then(|| render(screen));
        drop(shared);
        session.advance_cursor(next);

        let exited = exit.is_some();
        let status = exit.and_then(Result::ok);
        Ok(TerminalReadResult {
            id: session.id.clone(),
            output,
            cursor: next,
            dropped: dropped + skip as u64,
            total_bytes: total,
            screen: rendered,
            cursor_row,
            cursor_col,
            exited,
            exit_code: status.and_then(|status| status.code),
            signal: status
                .and_then(|status| status.signal)
                .map(|signal| signal.to_string()),
        })
    }
}

/// The screen's rows as lines, trailing blanks and empty rows trimmed.
fn render(screen: &vt100::Screen) -> String {
    let (_, cols) = screen.size();
    let rows: Vec<String> = screen
        .rows(0, cols.get())
        .map(|row| row.trim_end().to_owned())
        .collect();
    let used = rows
        .iter()
        .rposition(|row| !row.is_empty())
        .map_or(0, |last| last + 1);
    rows[..used].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU16;

    #[test]
    fn the_screen_renders_as_a_person_sees_it() {
        let size = |n| NonZeroU16::new(n).unwrap();
        let mut parser = vt100::Parser::new(size(5), size(20), 0);
        parser.process(b"hello   \r\n\x1b[31mred\x1b[0m text\r\nover\x1b[4Dunder\r\n");
        assert_eq!(render(parser.screen()), "hello\nred text\nunder");
        assert_eq!(parser.screen().cursor_position(), (3, 0));
        // Clearing the screen leaves nothing.
        parser.process(b"\x1b[2J\x1b[H");
        assert_eq!(render(parser.screen()), "");
    }
}
