//! The helper's small one-shot subcommands: a terminal's foreground group
//! and signals to it, detaching a supervisor's output, resolving a program
//! and removing a tree as the sandbox user.

use std::time::Duration;

use super::launch::{EISDIR, ENOEXEC, Prepared};
use super::procfs;
use super::sys;
use super::wire::{Launch, RemoveRequest, ResolveRequest};

/// The foreground process group of session `sid`'s terminal, checking that
/// `sid` still leads that session and that the group belongs to it.
pub fn foreground(sid: i32) -> Result<i32, String> {
    if sid <= 1 {
        return Err(format!("refusing session {sid}"));
    }
    let leader = procfs::stat_of(sid)
        .map_err(|err| format!("/proc/{sid}/stat: {err}"))?
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
    if !(1..=sys::SIGMAX).contains(&signal) {
        return Err(format!("{signal} is not a signal number"));
    }
    let pgid = foreground(sid)?;
    sys::send_signal(-pgid, signal)
        .map_err(|err| format!("signal {signal} to process group {pgid}: {err}"))?;
    Ok(pgid)
}

/// Asks the supervising helper `pid` (started at `starttime` clock ticks)
/// to detach stdout (SIGUSR1), stderr (SIGUSR2) or both. Returns false
/// when that helper is gone (it was never signalled).
pub fn detach(pid: i32, starttime: u64, streams: &str) -> Result<bool, String> {
    let signals: &[i32] = match streams {
        "stdout" => &[sys::SIGUSR1],
        "stderr" => &[sys::SIGUSR2],
        "both" => &[sys::SIGUSR1, sys::SIGUSR2],
        other => return Err(format!("unknown streams {other:?}")),
    };
    if pid <= 1 {
        return Err(format!("refusing pid {pid}"));
    }
    let pidfd = match sys::pidfd(pid) {
        Ok(fd) => fd,
        Err(err) if err.raw_os_error() == Some(sys::ESRCH) => return Ok(false),
        Err(err) => return Err(format!("pidfd of {pid}: {err}")),
    };
    // The pidfd pins whatever had the pid when it was opened; the start
    // time read afterwards proves that is still the helper.
    let result = match procfs::stat_of(pid) {
        Ok(Some(stat)) if stat.starttime == starttime && stat.is_live() => {
            let mut delivered = true;
            for &signal in signals {
                match sys::pidfd_signal(pidfd, signal) {
                    Ok(()) => {}
                    Err(err) if err.raw_os_error() == Some(sys::ESRCH) => delivered = false,
                    Err(err) => {
                        sys::close_fd(pidfd);
                        return Err(format!("signal {signal} to {pid}: {err}"));
                    }
                }
            }
            Ok(delivered)
        }
        Ok(_) => Ok(false),
        Err(err) => Err(format!("/proc/{pid}/stat: {err}")),
    };
    sys::close_fd(pidfd);
    result
}

/// Waits for session leader `sid` (a terminal's program, which its parent
/// reaps only once the terminal closed) to exit, and returns its wait
/// status, read from its zombie. `Ok(None)`: it is gone already, or is not
/// that session's leader any more (its pid was reused), or it was reaped
/// before the status could be read.
pub fn wait_exit(sid: i32) -> Result<Option<i32>, String> {
    if sid <= 1 {
        return Err(format!("refusing pid {sid}"));
    }
    let pidfd = match sys::pidfd(sid) {
        Ok(fd) => fd,
        Err(err) if err.raw_os_error() == Some(sys::ESRCH) => return Ok(None),
        Err(err) => return Err(format!("pidfd of {sid}: {err}")),
    };
    let leader = procfs::stat_of(sid).map_err(|err| format!("/proc/{sid}/stat: {err}"));
    let result = match leader {
        Ok(Some(stat)) if stat.sid == sid => {
            let mut fds = [sys::PollFd {
                fd: pidfd,
                events: sys::POLLIN,
                revents: 0,
            }];
            match sys::poll_fds(&mut fds, -1) {
                Ok(_) => procfs::stat_of(sid)
                    .map(|stat| stat.filter(|s| !s.is_live()).and_then(|s| s.exit_code))
                    .map_err(|err| format!("/proc/{sid}/stat: {err}")),
                Err(err) => Err(format!("poll: {err}")),
            }
        }
        Ok(_) => Ok(None),
        Err(err) => Err(err),
    };
    sys::close_fd(pidfd);
    result
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
    .map_err(|message| (sys::EINVAL, message))?;
    match prepared.find() {
        Ok(path) => Ok(path.to_string_lossy().into_owned()),
        Err(failure) => Err((
            failure.errno,
            match failure.errno {
                sys::ENOENT => "not found".to_owned(),
                EISDIR => "is a directory, not an executable".to_owned(),
                ENOEXEC => "not a regular file".to_owned(),
                sys::EACCES => "not executable".to_owned(),
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
                sys::new_session()?;
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
    fn millis_parse() {
        assert_eq!(millis("250"), Ok(Duration::from_millis(250)));
        assert!(millis("-1").is_err());
    }
}
