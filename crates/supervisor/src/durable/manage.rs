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

/// How long `forget` waits for the supervisor of an ended command to exit.
/// It writes the command's status last and exits at once, but a loaded
/// machine can stretch that moment past a caller that saw the end.
const ENDED_SUPERVISOR_EXIT: Duration = Duration::from_secs(5);

/// Removes command `id`'s directory; EBUSY while its supervisor runs — for
/// an ended command (its status written), once the supervisor has not exited
/// within [`ENDED_SUPERVISOR_EXIT`].
pub fn forget(dir: &str, id: &str) -> Result<(), Failure> {
    let cmd_dir = store::command_dir(Path::new(dir), id)?;
    if let Some(record) = Record::read(&cmd_dir)
        && record.supervisor_alive()
        && !(store::Status::read(&cmd_dir).is_some()
            && exits_within(&record, ENDED_SUPERVISOR_EXIT))
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

/// Whether `record`'s supervisor is gone within `limit` (polled: it is no
/// child of ours to wait for).
fn exits_within(record: &Record, limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while record.supervisor_alive() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::process::{Child, Command};
    use std::time::Instant;

    use super::*;
    use store::Status;

    const ID: &str = "a9637410b6740ceb46563e72ec720b30";

    /// A state directory holding command `ID`, whose supervisor is `supervisor`.
    fn state_with(supervisor: &Child) -> tempfile::TempDir {
        let state = tempfile::tempdir().expect("a scratch dir");
        std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o700))
            .expect("a private state directory");
        let cmd_dir = state.path().join(ID);
        std::fs::create_dir(&cmd_dir).expect("command dir");
        let pid = supervisor.id();
        let starttime = store::starttime_of(pid).expect("starttime");
        let record = Record {
            pid,
            starttime,
            supervisor: pid,
            supervisor_starttime: starttime,
            started_unix_ms: 1,
            argv: vec!["sleep".into()],
            cwd: "/".into(),
            retain: 1 << 20,
        };
        store::write_atomic(&cmd_dir, store::COMMAND, &record.to_text()).expect("record");
        state
    }

    fn write_status(state: &tempfile::TempDir) {
        let status = Status {
            code: Some(0),
            signal: None,
            timed_out: false,
            totals: [0, 0],
            ended_unix_ms: 2,
        };
        store::write_atomic(&state.path().join(ID), store::STATUS, &status.to_text())
            .expect("status");
    }

    /// Reaps `child` on a thread, as the supervisor's real parent does.
    fn reaped(mut child: Child) {
        std::thread::spawn(move || child.wait());
    }

    #[test]
    fn a_running_command_is_busy_at_once() {
        let supervisor = Command::new("sleep").arg("30").spawn().expect("sleep");
        let state = state_with(&supervisor);
        let started = Instant::now();
        let err = forget(state.path().to_str().expect("utf-8"), ID).expect_err("busy");
        assert_eq!(err.0, libc::EBUSY, "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(state.path().join(ID).exists());
        let mut supervisor = supervisor;
        supervisor.kill().expect("kill");
        supervisor.wait().expect("reap");
    }

    #[test]
    fn an_ended_command_is_forgotten_once_its_supervisor_exits() {
        // The supervisor wrote the status and has yet to exit: a loaded
        // machine's moment, here 300 ms.
        let supervisor = Command::new("sleep").arg("0.3").spawn().expect("sleep");
        let state = state_with(&supervisor);
        write_status(&state);
        reaped(supervisor);
        forget(state.path().to_str().expect("utf-8"), ID).expect("forgotten");
        assert!(!state.path().join(ID).exists());
    }
}
