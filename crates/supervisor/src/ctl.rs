//! The helper's small one-shot subcommands: a terminal's foreground group
//! and signals to it, detaching a supervisor's output, resolving a program
//! and removing a tree as the sandbox user.

use std::time::Duration;

use dsh_process_group::{Outcome, table};
use dsh_supervisor::wire::{Launch, RemoveRequest, ResolveRequest};
use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, Signal};

use crate::launch::Prepared;
use crate::sys;

/// The foreground process group of session `sid`'s terminal, checking that
/// `sid` still leads that session and that the group belongs to it.
pub fn foreground(sid: i32) -> Result<i32, String> {
    if sid <= 1 {
        return Err(format!("refusing session {sid}"));
    }
    let leader = table::stat_of(sid)
        .map_err(|err| err.to_string())?
        .filter(|stat| stat.sid == sid && stat.is_live())
        .ok_or_else(|| format!("session {sid} has no live leader"))?;
    if leader.tpgid <= 1 {
        return Err(format!(
            "the terminal of session {sid} has no foreground process group"
        ));
    }
    Ok(leader.tpgid)
}

/// Sends `signal` to the foreground process group of session `sid`.
pub fn signal_foreground(sid: i32, signal: i32) -> Result<i32, String> {
    if !dsh_process_group::signal::is_signal_number(signal) {
        return Err(format!("{signal} is not a signal number"));
    }
    let pgid = foreground(sid)?;
    dsh_process_group::signal::signal_group(pgid, signal)
        .map_err(|err| format!("signal {signal} to process group {pgid}: {err}"))?;
    Ok(pgid)
}

/// Asks the supervising helper `pid` (started at `starttime` clock ticks)
/// to detach stdout (SIGUSR1), stderr (SIGUSR2) or both. Returns false
/// when that helper is gone (it was never signalled).
pub fn detach(pid: i32, starttime: u64, streams: &str) -> Result<bool, String> {
    let signals: &[Signal] = match streams {
        "stdout" => &[Signal::USR1],
        "stderr" => &[Signal::USR2],
        "both" => &[Signal::USR1, Signal::USR2],
        other => return Err(format!("unknown streams {other:?}")),
    };
    let Some(target) = (pid > 1).then(|| Pid::from_raw(pid)).flatten() else {
        return Err(format!("refusing pid {pid}"));
    };
    let pidfd = match rustix::process::pidfd_open(target, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(Errno::SRCH) => return Ok(false),
        Err(err) => return Err(format!("pidfd of {pid}: {err}")),
    };
    // The pidfd pins whatever had the pid when it was opened; the start
    // time read afterwards proves that is still the helper.
    match table::stat_of(pid) {
        Ok(Some(stat)) if stat.starttime == starttime && stat.is_live() => {
            let mut delivered = true;
            for &signal in signals {
                match rustix::process::pidfd_send_signal(&pidfd, signal) {
                    Ok(()) => {}
                    Err(Errno::SRCH) => delivered = false,
                    Err(err) => return Err(format!("signal {signal:?} to {pid}: {err}")),
                }
            }
            Ok(delivered)
        }
        Ok(_) => Ok(false),
        Err(err) => Err(err.to_string()),
    }
}

/// Waits for session leader `sid` (a terminal's program, which its parent
/// reaps only once the terminal closed) to exit, and returns its wait
/// status, read from its zombie. `Ok(None)`: it is gone already, or is not
/// that session's leader any more (its pid was reused), or it was reaped
/// before the status could be read.
pub fn wait_exit(sid: i32) -> Result<Option<i32>, String> {
    let Some(leader) = (sid > 1).then(|| Pid::from_raw(sid)).flatten() else {
        return Err(format!("refusing pid {sid}"));
    };
    let pidfd = match rustix::process::pidfd_open(leader, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(Errno::SRCH) => return Ok(None),
        Err(err) => return Err(format!("pidfd of {sid}: {err}")),
    };
    match table::stat_of(sid).map_err(|err| err.to_string())? {
        Some(stat) if stat.sid == sid => {
            // Readable once the whole thread group has exited.
            let mut fds = [PollFd::new(&pidfd, PollFlags::IN)];
            rustix::io::retry_on_intr(|| rustix::event::poll(&mut fds, None))
                .map_err(|err| format!("poll the pidfd of {sid}: {err}"))?;
            Ok(table::stat_of(sid)
                .map_err(|err| err.to_string())?
                .filter(|stat| !stat.is_live())
                .and_then(|stat| stat.exit_code))
        }
        _ => Ok(None),
    }
}

/// Finds `request.name` as the sandbox user would run it: `Ok(path)` or
/// `Err((errno, message))`.
pub fn resolve(request: &ResolveRequest) -> Result<String, (i32, String)> {
    let id = &request.identity;
    sys::become_user(id.uid, id.gid, &id.groups).map_err(|err| {
        (
            err.raw_os_error().unwrap_or(0),
            format!("become the sandbox user: {err}"),
        )
    })?;
    let prepared = Prepared::new(&Launch {
        identity: request.identity.clone(),
        argv: vec![request.name.clone()],
        env: Vec::new(),
        cwd: "/".to_owned(),
        search: request.search.clone(),
    })
    .map_err(|message| (libc::EINVAL, message))?;
    match prepared.find() {
        Ok(path) => Ok(path.to_string_lossy().into_owned()),
        Err(failure) => Err((
            failure.errno,
            match failure.errno {
                libc::ENOENT => "not found".to_owned(),
                libc::EISDIR => "is a directory, not an executable".to_owned(),
                libc::ENOEXEC => "not a regular file".to_owned(),
                libc::EACCES => "not executable".to_owned(),
                errno => std::io::Error::from_raw_os_error(errno).to_string(),
            },
        )),
    }
}

/// Removes `request.path` and everything in it, as the sandbox user
/// (symlinks are removed, never followed). A missing path is fine.
pub fn remove(request: &RemoveRequest) -> Result<(), (i32, String)> {
    let id = &request.identity;
    sys::become_user(id.uid, id.gid, &id.groups).map_err(|err| {
        (
            err.raw_os_error().unwrap_or(0),
            format!("become the sandbox user: {err}"),
        )
    })?;
    match std::fs::remove_dir_all(&request.path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err((err.raw_os_error().unwrap_or(0), err.to_string())),
    }
}

/// Whether group (`session == false`) or session `id` has live members (by
/// the quiescence rule of `dsh-process-group`), without signalling
/// anything.
pub fn members(session: bool, id: i32) -> Result<Outcome, String> {
    if id <= 1 {
        return Err(format!("refusing id {id}"));
    }
    let live = if session {
        table::session_members(id)
    } else {
        table::group_members(id)
    }
    .map_err(|err| format!("probe: {err}"))?;
    Ok(if live.is_empty() {
        Outcome::Empty
    } else {
        Outcome::Busy {
            live: live.iter().map(|stat| stat.pid).collect(),
            failures: Vec::new(),
        }
    })
}

/// The control line of a ladder's outcome: `empty`, or `busy <pids>;
/// <failures>`.
pub fn outcome_line(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Empty => "empty".to_owned(),
        Outcome::Busy { live, failures } => {
            let pids: Vec<String> = live.iter().map(ToString::to_string).collect();
            format!("busy {}; {}", pids.join(","), failures.join("; "))
        }
    }
}

/// Parses a millisecond argument.
pub fn millis(text: &str) -> Result<Duration, String> {
    text.parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| format!("{text:?} is not a number of milliseconds"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreground_refuses_bad_sessions() {
        assert!(foreground(1).is_err());
        assert!(foreground(i32::MAX).unwrap_err().contains("no live leader"));
        assert!(
            signal_foreground(i32::MAX, 0)
                .unwrap_err()
                .contains("not a signal")
        );
    }

    #[test]
    fn detach_of_a_gone_or_mismatched_process_signals_nothing() {
        assert_eq!(detach(i32::MAX, 1, "both"), Ok(false));
        // This test process, with a start time that is not its own.
        let me = std::process::id() as i32;
        assert_eq!(detach(me, 1, "stdout"), Ok(false));
        assert!(detach(me, 1, "sideways").is_err());
    }

    #[test]
    fn wait_exit_reads_a_childs_status_from_its_zombie() {
        // A child of this test (so it stays a zombie until reaped), in a
        // session of its own.
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sh");
        child.args(["-c", "sleep 0.2; exit 3"]);
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            child.pre_exec(|| {
                rustix::process::setsid()?;
                Ok(())
            });
        }
        let mut child = child.spawn().expect("spawn");
        let raw = wait_exit(child.id() as i32)
            .expect("wait")
            .expect("a status");
        assert_eq!((raw >> 8) & 0xff, 3);
        child.wait().expect("reap");
        assert_eq!(wait_exit(child.id() as i32), Ok(None), "gone");
        assert!(wait_exit(1).is_err());
    }

    #[test]
    fn outcome_lines_name_what_is_left() {
        assert_eq!(outcome_line(&Outcome::Empty), "empty");
        let busy = Outcome::Busy {
            live: vec![7, 8],
            failures: vec!["SIGTERM: denied".into()],
        };
        assert_eq!(outcome_line(&busy), "busy 7,8; SIGTERM: denied");
    }

    #[test]
    fn members_are_listed_without_signals() {
        let me = std::process::id() as i32;
        let own_group = table::stat_of(me).unwrap().unwrap().pgid;
        match members(false, own_group) {
            Ok(Outcome::Busy { live, .. }) => assert!(live.contains(&me)),
            other => panic!("this test's own group: {other:?}"),
        }
        assert_eq!(members(true, 4_000_000), Ok(Outcome::Empty));
        assert!(members(false, 1).is_err());
    }

    #[test]
    fn millis_parse() {
        assert_eq!(millis("250"), Ok(Duration::from_millis(250)));
        assert!(millis("-1").is_err());
    }
}
