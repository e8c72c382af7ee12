//! The channel between the host and a runner: frames, one a line, each the
//! standard base64 (padded) of one UTF-8 JSON object whose `t` names the
//! message (docs/design.md §11, the code runtime).
//!
//! Frames are plain ASCII, so a byte split anywhere between chunks of the
//! pipe is reassembled by the line splitter, and nothing a frame carries —
//! newlines, NUL, invalid UTF-8 in program output — can end it early.
//! Everything the runner sends is validated here: a line longer than
//! [`MAX_FRAME_BYTES`], a byte outside the base64 alphabet, a payload that is
//! not a JSON object of a known message — each is a [`ChannelError`] naming
//! what was wrong, after which the host ends the runner.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest frame, encoded, either way (a binding's arguments, its
/// result, the program's result). Beyond it the runner is ended.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// What a runner sends.
#[derive(Debug, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum FromRunner {
    /// Started and waiting for runs.
    Ready { version: String },
    /// Bytes the program (or a child of it) wrote to stdout or stderr.
    Out { s: OutStream, b: String },
    /// A binding call, answered by [`ToRunner::Reply`] with the same id.
    Call { id: u64, name: String, args: Value },
    /// The run ended: its value, or the program's exception.
    Done {
        ok: bool,
        #[serde(default)]
        value: Value,
        #[serde(default)]
        error: Option<RaisedError>,
    },
    /// The runner itself failed (the JavaScript controller lost its worker).
    Fatal { message: String },
}

/// The stream an `out` frame belongs to.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OutStream {
    Stdout,
    Stderr,
}

/// The exception a program raised, as the runner saw it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RaisedError {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) message: String,
    pub(crate) frames: Vec<RaisedFrame>,
}

/// One frame of a traceback in the program's own files.
#[derive(Debug, Deserialize)]
pub(crate) struct RaisedFrame {
    pub(crate) file: String,
    pub(crate) line: u64,
    #[serde(default)]
    pub(crate) column: Option<u64>,
    pub(crate) function: String,
    #[serde(default)]
    pub(crate) text: String,
}

/// What the host sends.
#[derive(Debug, Serialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum ToRunner<'a> {
    /// Run a program: `code` is what the interpreter runs (types stripped),
    /// `source` what the user wrote (for traceback lines).
    Run {
        filename: &'a str,
        code: &'a str,
        source: &'a str,
        bindings: &'a [String],
        max_result_bytes: usize,
    },
    /// The outcome of binding call `id`.
    Reply {
        id: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        value: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<ReplyError>,
    },
}

/// A binding call's failure as the program sees it (`BindingError`).
#[derive(Debug, Serialize)]
pub(crate) struct ReplyError {
    pub(crate) kind: String,
    pub(crate) message: String,
}

/// A frame that broke the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    #[error("a frame of over {limit} bytes without an end")]
    TooLong { limit: usize },
    #[error("a frame that is not base64 ({detail}), starting {start:?}")]
    NotBase64 { detail: String, start: String },
    #[error("a frame that is not a message ({detail}), starting {start:?}")]
    NotAMessage { detail: String, start: String },
}

/// The line as text for an error message: its first bytes, escaped.
fn start_of(line: &[u8]) -> String {
    let shown = &line[..line.len().min(40)];
    String::from_utf8_lossy(shown).into_owned()
}

/// Encodes one frame, newline included.
pub(crate) fn encode(message: &impl Serialize) -> Vec<u8> {
    // Serializing our own message types cannot fail: every map key is a string.
    let json = serde_json::to_vec(message).unwrap_or_default();
    let mut line = STANDARD.encode(json).into_bytes();
    line.push(b'\n');
    line
}

/// Decodes and validates one frame (without its newline).
pub(crate) fn decode(line: &[u8]) -> Result<FromRunner, ChannelError> {
    let json = STANDARD
        .decode(line)
        .map_err(|err| ChannelError::NotBase64 {
            detail: err.to_string(),
            start: start_of(line),
        })?;
    serde_json::from_slice(&json).map_err(|err| ChannelError::NotAMessage {
        detail: err.to_string(),
        start: start_of(&json),
    })
}

/// Decodes an `out` frame's bytes.
pub(crate) fn decode_bytes(text: &str) -> Result<Vec<u8>, ChannelError> {
    STANDARD
        .decode(text)
        .map_err(|err| ChannelError::NotAMessage {
            detail: format!("out bytes not base64: {err}"),
            start: start_of(text.as_bytes()),
        })
}

/// Splits a byte stream into lines of at most [`MAX_FRAME_BYTES`].
#[derive(Debug, Default)]
pub(crate) struct Lines {
    pending: Vec<u8>,
    /// Where the next line starts in `pending` (taken lines are dropped
    /// lazily, so a chunk of many lines is not moved once per line).
    start: usize,
    /// Where the search for the next newline resumes in `pending`.
    searched: usize,
}

impl Lines {
    /// Adds a chunk; the complete lines are taken with [`Lines::next_line`].
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        if self.start > 0 {
            self.pending.drain(..self.start);
            self.searched -= self.start;
            self.start = 0;
        }
        self.pending.extend_from_slice(chunk);
    }

    /// The next complete line, `Ok(None)` when none is complete, or the
    /// error of a line grown past the bound.
    pub(crate) fn next_line(&mut self) -> Result<Option<Vec<u8>>, ChannelError> {
        let too_long = ChannelError::TooLong {
            limit: MAX_FRAME_BYTES,
        };
        match self.pending[self.searched..]
            .iter()
            .position(|&b| b == b'\n')
        {
            Some(at) => {
                let end = self.searched + at;
                if end - self.start > MAX_FRAME_BYTES {
                    return Err(too_long);
                }
                let line = self.pending[self.start..end].to_vec();
                self.start = end + 1;
                self.searched = self.start;
                Ok(Some(line))
            }
            None if self.pending.len() - self.start > MAX_FRAME_BYTES => Err(too_long),
            None => {
                self.searched = self.pending.len();
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_split_anywhere_is_one_frame() {
        let frame = encode(&serde_json::json!({"t": "ready", "version": "é"}));
        for cut in 0..frame.len() {
            let mut lines = Lines::default();
            lines.push(&frame[..cut]);
            assert_eq!(lines.next_line(), Ok(None));
            lines.push(&frame[cut..]);
            let line = lines.next_line().unwrap().unwrap();
            assert!(matches!(decode(&line), Ok(FromRunner::Ready { version }) if version == "é"));
        }
    }

    #[test]
    fn garbage_and_unknown_messages_are_named() {
        let garbage = decode(b"garbage!").unwrap_err();
        assert!(garbage.to_string().contains("not base64"), "{garbage}");
        let unknown = decode(STANDARD.encode(r#"{"t":"launch"}"#).as_bytes()).unwrap_err();
        assert!(unknown.to_string().contains("not a message"), "{unknown}");
    }

    #[test]
    fn an_endless_line_is_refused_at_the_bound() {
        let mut lines = Lines::default();
        lines.push(&vec![b'A'; MAX_FRAME_BYTES + 1]);
        assert_eq!(
            lines.next_line(),
            Err(ChannelError::TooLong {
                limit: MAX_FRAME_BYTES
            })
        );
    }
}
