//! `write_stdin`: input to a background command whose stdin was kept open —
//! text, the end of input, or both in one call (`dsh-consumers`'
//! `write_stdin` then `close_stdin`).

use std::sync::Arc;

use dsh_consumers::commands::{CloseStdinRequest, WriteStdinRequest};
use dsh_consumers::{Outcome, Tools};
use dsh_plugin_api::{Error, Result};

use crate::entry::{Effect, Entry, entry};

/// Arguments of `write_stdin`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StdinRequest {
    /// The command's id, from a `run` with `background: true` and
    /// `keep_stdin: true`.
    id: String,
    /// The text to write, exactly (`\n` ends a line); at most 1 MiB.
    #[serde(default)]
    data: Option<String>,
    /// Close stdin once `data` (if any) is written: the command reads end
    /// of file. Closing a closed stdin is success.
    #[serde(default)]
    close: bool,
}

/// What `write_stdin` did.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub(crate) struct StdinResult {
    id: String,
    /// Bytes handed to the command's stdin.
    bytes_written: u64,
    /// With `close`: whether stdin was open until this call.
    #[serde(skip_serializing_if = "Option::is_none")]
    was_open: Option<bool>,
}

impl Outcome for StdinResult {
    fn text(&self) -> String {
        let mut text = format!(
            "wrote {} bytes to the stdin of {}",
            self.bytes_written, self.id
        );
        match self.was_open {
            Some(true) => text.push_str(", then closed it"),
            Some(false) => text.push_str("; it was already closed"),
            None => {}
        }
        text
    }
}

/// Writes `data`, then closes stdin if asked; a call that asks for neither
/// is refused.
async fn write_stdin(tools: Arc<Tools>, request: StdinRequest) -> Result<StdinResult> {
    let StdinRequest { id, data, close } = request;
    if data.is_none() && !close {
        return Err(Error::invalid_input(
            "write_stdin: nothing to do: give data, close: true, or both",
        )
        .with_subject(id));
    }
    let mut bytes_written = 0;
    if let Some(data) = data {
        let request = WriteStdinRequest {
            id: id.clone(),
            data,
        };
        bytes_written = tools.commands.write_stdin(request).await?.bytes_written;
    }
    let mut was_open = None;
    if close {
        let request = CloseStdinRequest { id: id.clone() };
        was_open = Some(tools.commands.close_stdin(request).await?.was_open);
    }
    Ok(StdinResult {
        id,
        bytes_written,
        was_open,
    })
}

/// The `write_stdin` tool.
pub(super) fn tool() -> Entry {
    entry(
        "commands",
        "write_stdin",
        "Write text to a background command's stdin (one run with keep_stdin), and with \
         close: true close it (end of input).",
        Effect::Additive,
        &[
            ("id", ""),
            ("data", "Exact text (\\n ends a line), at most 1 MiB."),
            ("close", ""),
        ],
        write_stdin,
    )
}
