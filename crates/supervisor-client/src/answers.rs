//! The helper's `durable-*` answers (see `dsh_supervisor` for the lines) in
//! the seam's types, with errors that name the operation and the command.

use dsh_plugin_api::durable::{DurableCommand, DurableState};
use dsh_plugin_api::subprocess::{ExitStatus, Signal};
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_supervisor::wire::{self, DurableEntry, Stage};

/// What `durable-start` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// The command runs.
    Started { id: String, pid: u32 },
    /// It could not start at `stage` (nothing of it is left).
    Failed {
        stage: Stage,
        errno: i32,
        detail: String,
    },
}

/// Parses `durable-start`'s line.
pub fn start(line: &str) -> Result<Start> {
    const OP: &str = "spawn_durable";
    if let Some(rest) = line.strip_prefix("ok ") {
        let (id, pid) = rest.split_once(' ').ok_or_else(|| malformed(OP, line))?;
        let pid = pid.parse().map_err(|_| malformed(OP, line))?;
        if !wire::valid_durable_id(id) {
            return Err(malformed(OP, line));
        }
        return Ok(Start::Started {
            id: id.to_owned(),
            pid,
        });
    }
    if let Some(rest) = line.strip_prefix("failed ") {
        let mut words = rest.splitn(3, ' ');
        let stage = words
            .next()
            .and_then(|word| word.parse().ok())
            .and_then(Stage::from_u8)
            .ok_or_else(|| malformed(OP, line))?;
        let errno = words
            .next()
            .and_then(|word| word.parse().ok())
            .ok_or_else(|| malformed(OP, line))?;
        let detail = words.next().unwrap_or_default().to_owned();
        return Ok(Start::Failed {
            stage,
            errno,
            detail,
        });
    }
    Err(error_line(OP, "", line))
}

/// Parses `durable-list`'s lines (`entry …` then `end`).
pub fn list(text: &str) -> Result<Vec<DurableCommand>> {
    const OP: &str = "list_durable";
    let mut commands = Vec::new();
    for line in text.lines() {
        if line == "end" {
            return Ok(commands);
        }
        let entry = line
            .strip_prefix("entry ")
            .ok_or_else(|| error_line(OP, "", line))?;
        commands.push(command(entry, OP)?);
    }
    Err(Error::io(format!(
        "{OP}: the helper's list ended before its last line"
    )))
}

/// Parses `durable-info`'s line about `id`.
pub fn info(id: &str, line: &str) -> Result<DurableCommand> {
    const OP: &str = "attach";
    match line.strip_prefix("ok ") {
        Some(entry) => command(entry, OP),
        None => Err(error_line(OP, id, line)),
    }
}

/// Parses `durable-forget`'s line about `id`.
pub fn forget(id: &str, line: &str) -> Result<()> {
    match line {
        "ok" => Ok(()),
        _ => Err(error_line("forget", id, line)),
    }
}

/// Parses `durable-terminate`'s line about `id`: `Busy` unless the group
/// was proven empty.
pub fn terminate(id: &str, line: &str) -> Result<()> {
    if line == "empty" {
        return Ok(());
    }
    if let Some(rest) = line.strip_prefix("busy") {
        return Err(Error::new(
            ErrorKind::Busy,
            format!(
                "terminate: durable command {id}: its process group is not proven empty yet{rest}"
            ),
        )
        .with_subject(id.to_owned()));
    }
    Err(error_line("terminate", id, line))
}

fn command(entry: &str, operation: &str) -> Result<DurableCommand> {
    let entry = DurableEntry::parse_line(entry).map_err(|err| {
        Error::io(format!(
            "{operation}: the helper's entry is malformed: {}",
            err.0
        ))
    })?;
    Ok(DurableCommand {
        id: entry.id,
        pid: entry.pid,
        argv: entry.argv,
        cwd: entry.cwd,
        started_unix_ms: entry.started_unix_ms,
        state: match entry.state {
            wire::DurableState::Running => DurableState::Running,
            wire::DurableState::Lost => DurableState::Lost,
            wire::DurableState::Ended {
                code,
                signal,
                timed_out,
            } => DurableState::Ended(ExitStatus {
                code,
                signal: signal.map(Signal),
                timed_out,
            }),
        },
        totals: entry.totals,
        retained_from: entry.retained_from,
    })
}

/// An `error <errno> <message>` line (or anything unexpected) about `id`.
fn error_line(operation: &str, id: &str, line: &str) -> Error {
    const ENOENT: i32 = 2;
    const EBUSY: i32 = 16;
    const EINVAL: i32 = 22;
    let Some((errno, message)) = line
        .strip_prefix("error ")
        .and_then(|rest| rest.split_once(' '))
        .and_then(|(errno, message)| Some((errno.parse::<i32>().ok()?, message)))
    else {
        return malformed(operation, line);
    };
    let kind = match errno {
        ENOENT => ErrorKind::NotFound,
        EBUSY => ErrorKind::Busy,
        EINVAL => ErrorKind::InvalidInput,
        1 | 13 => ErrorKind::PermissionDenied,
        _ => ErrorKind::Io,
    };
    // The helper's messages name the command.
    let error = Error::new(kind, format!("{operation}: {message}"));
    if id.is_empty() {
        error
    } else {
        error.with_subject(id.to_owned())
    }
}

fn malformed(operation: &str, line: &str) -> Error {
    Error::io(format!(
        "{operation}: the helper answered {line:?}, which is not one of its answers"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn start_answers() {
        assert_eq!(
            start(&format!("ok {ID} 4242")).unwrap(),
            Start::Started {
                id: ID.into(),
                pid: 4242
            }
        );
        assert_eq!(
            start("failed 5 2 /usr/bin:/bin").unwrap(),
            Start::Failed {
                stage: Stage::Program,
                errno: 2,
                detail: "/usr/bin:/bin".into()
            }
        );
        let err = start("error 1 state directory /x is not private").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::PermissionDenied);
        assert!(err.message().contains("not private"), "{err}");
        for bad in ["ok ../x 1", "ok 1", "failed 99 2 x", "hello"] {
            assert_eq!(start(bad).unwrap_err().kind(), ErrorKind::Io, "{bad}");
        }
    }

    #[test]
    fn errors_name_the_operation_and_the_command() {
        let err = forget(ID, "error 16 it still runs").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Busy);
        assert_eq!(err.subject(), Some(ID));
        assert!(err.message().starts_with("forget: it still runs"), "{err}");
        assert_eq!(
            info(ID, "error 2 no such command").unwrap_err().kind(),
            ErrorKind::NotFound
        );
        assert_eq!(
            terminate(ID, "busy 3 left").unwrap_err().kind(),
            ErrorKind::Busy
        );
        assert!(terminate(ID, "empty").is_ok());
        assert!(forget(ID, "ok").is_ok());
    }

    #[test]
    fn a_list_must_end() {
        assert_eq!(list("end\n").unwrap(), Vec::new());
        assert_eq!(list("").unwrap_err().kind(), ErrorKind::Io);
    }
}
