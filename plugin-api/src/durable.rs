//! Durable commands: the `subprocess` seam's extension for commands that
//! outlive the host that started them (docs/design.md §5.2.1).
//!
//! A durable command's output is retained in the world (at least the last
//! [`DurableSpec::retain`] bytes of each stream) and its exit status is
//! published there, so a later host — the same world reached again, e.g. an
//! E2B sandbox reconnected by id — can list it, attach to it from any
//! retained byte offset, learn how it ended, terminate it and forget it.
//! Disposing a provider stops its attachments, never the durable commands
//! themselves.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::subprocess::{ExitStatus, OutputMode, Process, SpawnSpec, StdinMode};

/// The default retention per output stream: 16 MiB.
pub const DEFAULT_RETAIN: u64 = 16 << 20;

/// How a durable command keeps its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurableSpec {
    /// Bytes of each stream that stay readable at least (the newest ones);
    /// older bytes are dropped and reported as dropped to an attach that
    /// asks for them.
    pub retain: u64,
}

impl Default for DurableSpec {
    fn default() -> DurableSpec {
        DurableSpec {
            retain: DEFAULT_RETAIN,
        }
    }
}

/// Where a durable command is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurableState {
    /// Still running.
    Running,
    /// Ended; the status is exact even when no host was attached.
    Ended(ExitStatus),
    /// Its supervisor disappeared without recording an end (the world
    /// rebooted or the supervisor was killed): nothing more will come.
    Lost,
}

/// One durable command of a world, as [`crate::subprocess::SubprocessProvider::list_durable`]
/// reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurableCommand {
    /// Its unguessable id (32 lowercase hex digits).
    pub id: String,
    /// Its pid, which is also its process-group and session id.
    pub pid: u32,
    pub argv: Vec<String>,
    pub cwd: String,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    pub state: DurableState,
    /// Bytes each stream has produced so far: stdout, stderr.
    pub totals: [u64; 2],
    /// The first retained offset of each stream (0 until something was
    /// dropped).
    pub retained_from: [u64; 2],
}

/// What [`crate::subprocess::SubprocessProvider::attach`] attaches to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachSpec {
    pub id: String,
    /// The byte offset both streams resume at (clamped up to what is still
    /// retained; an offset past a stream's end waits for new output).
    pub from: u64,
    /// What the handle does with each stream from there on, as for a
    /// spawned command (see [`crate::subprocess::SpawnSpec`]).
    pub stdout: OutputMode,
    pub stderr: OutputMode,
}

impl AttachSpec {
    /// Attaches to `id` from `from` with both streams piped.
    pub fn new(id: impl Into<String>, from: u64) -> AttachSpec {
        AttachSpec {
            id: id.into(),
            from,
            stdout: OutputMode::Pipe,
            stderr: OutputMode::Pipe,
        }
    }

    /// Refuses a malformed id before anything reaches the world.
    pub fn validate(&self) -> Result<()> {
        validate_id("attach", &self.id)
    }
}

/// A handle on a durable command.
///
/// `process` behaves as the handle `spawn` would have returned, from
/// [`Attached::from`] onward: its streams start there, `read_output`
/// offsets are the command's own absolute offsets, `wait` reports how the
/// command ended (also when it ended while no host was attached),
/// `terminate` ends the command's whole process group. Dropping it (or
/// disposing the provider) detaches only: the command keeps running.
/// Durable commands never have a stdin.
#[derive(Clone)]
pub struct Attached {
    pub id: String,
    pub process: Arc<dyn Process>,
    /// Where each stream actually resumed: stdout, stderr. Greater than the
    /// requested offset by the number of bytes dropped from retention.
    pub from: [u64; 2],
}

impl std::fmt::Debug for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attached")
            .field("id", &self.id)
            .field("pid", &self.process.pid())
            .field("from", &self.from)
            .finish()
    }
}

/// What `spawn_durable` refuses before anything starts: whatever
/// [`SpawnSpec::validate`] refuses, and a stdin other than `/dev/null` (a
/// pipe cannot outlive its host).
pub fn validate_spawn(spec: &SpawnSpec) -> Result<()> {
    spec.validate()?;
    if spec.stdin != StdinMode::Null {
        return Err(Error::invalid_input(
            "spawn_durable: durable commands read stdin from /dev/null; a stdin pipe cannot outlive its host",
        ));
    }
    Ok(())
}

/// Refuses anything but 32 lowercase hex digits, naming `operation`.
pub fn validate_id(operation: &str, id: &str) -> Result<()> {
    let well_formed = id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if well_formed {
        Ok(())
    } else {
        Err(Error::invalid_input(format!(
            "{operation}: {id:?} is not a durable command id (32 lowercase hex digits)"
        ))
        .with_subject(id.replace('\0', "\\0")))
    }
}

/// What a provider without durable commands answers.
pub fn unsupported(operation: &str) -> Error {
    Error::new(
        crate::ErrorKind::Unsupported,
        format!("{operation}: this subprocess provider has no durable commands"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn ids_are_32_lowercase_hex_digits() {
        assert!(validate_id("attach", "0123456789abcdef0123456789abcdef").is_ok());
        for bad in [
            "",
            "../x",
            "0123456789ABCDEF0123456789ABCDEF",
            "0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdef0",
            "0123456789abcdef0123456789abcdeg",
        ] {
            assert_eq!(
                validate_id("attach", bad).unwrap_err().kind(),
                ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
    }
}
