//! `write_stdin` and `close_stdin`: input to a background command whose
//! stdin was left open.

use std::time::Duration;

use dsh_plugin_api::{Bytes, Error, ErrorKind, Result};

use super::Commands;
use super::errors::{from_seam, invalid};
use super::tracked::{Stdin, TrackedCommand};

/// The most bytes one `write_stdin` may carry.
pub const MAX_WRITE_BYTES: usize = 1024 * 1024;
/// How long `write_stdin` waits for the command to take the data (a
/// command that does not read its input fills the pipe, then blocks the
/// writer).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Writes text to a background command's stdin.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteStdinRequest {
    /// The command's id, from a `run` with `background: true` and no
    /// `stdin` text.
    pub id: String,
    /// The text to write, exactly (include `\n` to end a line). At most
    /// 1 MiB.
    pub data: String,
}

/// What `write_stdin` wrote.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct WriteStdinResult {
    pub id: String,
    /// Bytes handed to the command's stdin.
    pub bytes_written: u64,
}

impl crate::Outcome for WriteStdinResult {
    fn text(&self) -> String {
        format!(
            "wrote {} bytes to the stdin of {}",
            self.bytes_written, self.id
        )
    }
}

/// Closes a background command's stdin: it reads end of file.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CloseStdinRequest {
    /// The command's id.
    pub id: String,
}

/// What `close_stdin` did.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct CloseStdinResult {
    pub id: String,
    /// False when stdin had already been closed (closing is idempotent).
    pub was_open: bool,
}

impl crate::Outcome for CloseStdinResult {
    fn text(&self) -> String {
        if self.was_open {
            format!("closed the stdin of {}", self.id)
        } else {
            format!("the stdin of {} was already closed", self.id)
        }
    }
}

fn not_open(tool: &str, command: &TrackedCommand) -> Error {
    invalid(
        tool,
        format_args!(
            "{} has no open stdin: only a background run with keep_stdin: true keeps it open",
            command.id
        ),
    )
    .with_subject(command.id.clone())
}

impl Commands {
    /// `write_stdin`: writes `data` to the command's stdin pipe, waiting at
    /// most [`WRITE_TIMEOUT`] for the command to take it (`Timeout` then;
    /// part of the data may have been written). Dropping the future may
    /// leave part of the data written.
    pub async fn write_stdin(&self, request: WriteStdinRequest) -> Result<WriteStdinResult> {
        const TOOL: &str = "write_stdin";
        let command = self.lookup(TOOL, &request.id).await?;
        if request.data.len() > MAX_WRITE_BYTES {
            return Err(invalid(
                TOOL,
                format_args!(
                    "data is {} bytes, more than {MAX_WRITE_BYTES}",
                    request.data.len()
                ),
            ));
        }
        let mut stdin = command.stdin.lock().await;
        let writer = match &mut *stdin {
            Stdin::Open(writer) => writer,
            Stdin::NotOpen => return Err(not_open(TOOL, &command)),
            Stdin::Closed => {
                return Err(Error::closed(format!(
                    "{TOOL}: the stdin of {} was closed by close_stdin",
                    command.id
                ))
                .with_subject(command.id.clone()));
            }
        };
        let len = request.data.len() as u64;
        match tokio::time::timeout(WRITE_TIMEOUT, writer.write(Bytes::from(request.data))).await {
            Ok(written) => written.map_err(|err| from_seam(TOOL, err))?,
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "{TOOL}: {} did not take the data within {} s (is it reading its stdin?); part of it may have been written",
                        command.id,
                        WRITE_TIMEOUT.as_secs()
                    ),
                )
                .with_subject(command.id.clone()));
            }
        }
        Ok(WriteStdinResult {
            id: command.id.clone(),
            bytes_written: len,
        })
    }

    /// `close_stdin`: closes the command's stdin pipe so it reads end of
    /// file. Closing a closed stdin succeeds (`was_open: false`).
    pub async fn close_stdin(&self, request: CloseStdinRequest) -> Result<CloseStdinResult> {
        const TOOL: &str = "close_stdin";
        let command = self.lookup(TOOL, &request.id).await?;
        let mut stdin = command.stdin.lock().await;
        let was_open = match std::mem::replace(&mut *stdin, Stdin::Closed) {
            Stdin::Open(mut writer) => {
                writer.close().await.map_err(|err| from_seam(TOOL, err))?;
                true
            }
            Stdin::Closed => false,
            Stdin::NotOpen => {
                *stdin = Stdin::NotOpen;
                return Err(not_open(TOOL, &command));
            }
        };
        Ok(CloseStdinResult {
            id: command.id.clone(),
            was_open,
        })
    }
}
