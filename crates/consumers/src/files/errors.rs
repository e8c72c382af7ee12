//! Errors of the file tools: the seam's errors re-worded to name the tool,
//! and the tools' own refusals.

use std::fmt::Display;

use dsh_plugin_api::{Error, ErrorKind};

/// `err` from the seam as the tool's error: the same kind, the message
/// prefixed with the tool's name (`"read_file: stream_text: …"`), the
/// seam's subject or else `subject`.
pub(super) fn from_seam(tool: &str, subject: &str, err: Error) -> Error {
    let subject = err.subject().unwrap_or(subject).to_owned();
    Error::new(err.kind(), format!("{tool}: {}", err.message())).with_subject(subject)
}

/// A refusal of the tool itself: `"<tool>: <detail>"` about `subject`.
pub(super) fn refuse(tool: &str, kind: ErrorKind, subject: &str, detail: impl Display) -> Error {
    Error::new(kind, format!("{tool}: {detail}")).with_subject(subject)
}

/// Bad input to the tool ([`ErrorKind::InvalidInput`]).
pub(super) fn invalid(tool: &str, subject: &str, detail: impl Display) -> Error {
    refuse(tool, ErrorKind::InvalidInput, subject, detail)
}

/// A seam error reading `path` as text, with a hint where the model has a
/// better tool (binary content, a directory).
pub(super) fn read_error(tool: &str, path: &str, err: Error) -> Error {
    match err.kind() {
        ErrorKind::Binary => refuse(
            tool,
            ErrorKind::Binary,
            path,
            "binary content (a NUL byte in the first 8192 bytes); look at it with a command \
             such as `xxd FILE | head -n 32` or `file FILE`",
        ),
        ErrorKind::IsADirectory => refuse(
            tool,
            ErrorKind::IsADirectory,
            path,
            "is a directory; list it with list_dir",
        ),
        _ => from_seam(tool, path, err),
    }
}
