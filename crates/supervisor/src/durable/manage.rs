//! `durable-list`, `durable-info`, `durable-terminate`, `durable-forget`:
//! reading the state directory and acting on one command in it.

use std::path::Path;
use std::time::Duration;

use dsh_process_group::Outcome;
use dsh_process_group::ladder::terminate_group;
use dsh_process_group::pause::{Blocking, run_blocking};

use super::store::{self, Failure, Record};

/// `entry <line>` per command whose record is readable, then `end`.
pub fn list(dir: &str) -> Result<Vec<String>, Failure> {
    let dir = Path::new(dir);
    let read = match std::fs::read_dir(dir) {
        Ok(read) => read,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(vec!["end".to_owned()]);
        }
        Err(err) => {
            return Err((
                err.raw_os_error().unwrap_or(libc::EIO),
                format!("{}: {err}", dir.display()),
            ));
        }
    };
    store::check_dir(dir)?;
    let mut lines = Vec::new();
    for dirent in read.flatten() {
        let Some(id) = dirent.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if !dsh_supervisor::wire::valid_durable_id(&id) {
            continue;
        }
        if let Some(entry) = store::entry(&dir.join(&id), &id) {
            lines.push(format!("entry {}", entry.to_line()));
        }
    }
    lines.push("end".to_owned());
    Ok(lines)
}

/// `ok <line>` for command `id`.
pub fn info(dir: &str, id: &str) -> Result<String, Failure> {
    let cmd_dir = store::command_dir(Path::new(dir), id)?;
    let entry = store::entry(&cmd_dir, id)
        .ok_or_else(|| (libc::ENOENT, format!("durable command {id} has no record")))?;
    Ok(format!("ok {}", entry.to_line()))
}

/// Runs the terminate ladder on the command's process group if the
/// command still exists (its pid has the recorded start time); an ended
/// or gone command is `Empty` and nothing is signalled.
pub fn terminate(
    dir: &str,
    id: &str,
    grace: Duration,
    settle: Duration,
) -> Result<Outcome, Failure> {
    let cmd_dir = store::command_dir(Path::new(dir), id)?;
    let record = Record::read(&cmd_dir)
        .ok_or_else(|| (libc::ENOENT, format!("durable command {id} has no record")))?;
    if !record.command_exists() {
        return Ok(Outcome::Empty);
    }
    // The command is its supervisor's unreaped child from here until the
    // supervisor reaps it; while any member of its group lives, its pid
    // (the group id) is not handed out again.
    run_blocking(terminate_group(
        record.pid as i32,
        grace,
        settle,
        &mut Blocking,
    ))
    .map_err(|err| (err.raw_os_error().unwrap_or(libc::EIO), err.to_string()))
}

/// Removes command `id`'s directory; EBUSY while its supervisor runs.
pub fn forget(dir: &str, id: &str) -> Result<(), Failure> {
    let cmd_dir = store::command_dir(Path::new(dir), id)?;
    if let Some(record) = Record::read(&cmd_dir)
        && record.supervisor_alive()
    {
        return Err((
            libc::EBUSY,
            format!("durable command {id} is still supervised; terminate it first"),
        ));
    }
    std::fs::remove_dir_all(&cmd_dir).map_err(|err| {
        (
            err.raw_os_error().unwrap_or(libc::EIO),
            format!("remove {}: {err}", cmd_dir.display()),
        )
    })
}
