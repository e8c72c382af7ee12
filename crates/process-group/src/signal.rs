//! Signals to a whole process group, and to one member found by a scan.

use std::io;

use rustix::process::{Pid, PidfdFlags, Signal};

use crate::table::{self, Stat};

/// Refuses ids ≤ 1: `kill(-1)` reaches every process the caller may
/// signal, `-0` is the caller's own group, and negative ids are no group.
fn checked(pgid: i32, what: &str) -> io::Result<Pid> {
    // `Pid::from_raw` insists on a non-negative number: check first.
    match (pgid > 1).then(|| Pid::from_raw(pgid)).flatten() {
        Some(pid) => Ok(pid),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to {what} process group {pgid}"),
        )),
    }
}

/// Whether no process has group id `pgid` at all (`kill(-pgid, 0)` answers
/// ESRCH) — a cheap proof of emptiness. `false` says nothing: members may
/// be zombies, or not ours to signal.
pub fn group_absent(pgid: i32) -> io::Result<bool> {
    let pid = checked(pgid, "probe")?;
    Ok(rustix::process::test_kill_process_group(pid) == Err(rustix::io::Errno::SRCH))
}

/// Whether `signal` is a signal number, `1..=SIGRTMAX`: the one range the
/// providers' `signal` and the helper accept (any other number is refused,
/// never sent).
pub fn is_signal_number(signal: i32) -> bool {
    (1..=libc::SIGRTMAX()).contains(&signal)
}

/// `kill(-pgid, signal)`, for any signal number (real-time ones too; 0
/// only checks). Refuses group ids ≤ 1.
pub fn signal_group(pgid: i32, signal: i32) -> io::Result<()> {
    checked(pgid, "signal")?;
    // libc, not rustix: rustix's `Signal` holds only named signals, and the
    // seam lets callers send any number.
    // SAFETY: kill takes no pointers and has no memory-safety preconditions.
    if unsafe { libc::kill(-pgid, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends `signal` to the process `member` (a row of an earlier scan of
/// session `sid`) if it still is that process: its pid is pinned with a
/// pidfd first, then its session and start time are re-read, so a pid
/// recycled since the scan is never signalled. A member already gone (or
/// no longer in the session) counts as done.
pub fn signal_member(member: &Stat, sid: i32, signal: Signal) -> io::Result<()> {
    let Some(pid) = Pid::from_raw(member.pid) else {
        return Ok(());
    };
    let pidfd = match rustix::process::pidfd_open(pid, PidfdFlags::empty()) {
        Ok(pidfd) => pidfd,
        Err(rustix::io::Errno::SRCH) => return Ok(()),
        Err(err) => return Err(io::Error::other(format!("pidfd of {pid}: {err}"))),
    };
    match table::stat_of(member.pid)? {
        Some(now) if now.sid == sid && now.starttime == member.starttime => {
            match rustix::process::pidfd_send_signal(&pidfd, signal) {
                Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
                Err(err) => Err(err.into()),
            }
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;

    use super::*;

    #[test]
    fn dangerous_group_ids_are_refused() {
        for pgid in [-5, 0, 1] {
            let err = signal_group(pgid, 0).expect_err("refused");
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert_eq!(
                err.to_string(),
                format!("refusing to signal process group {pgid}")
            );
            assert!(group_absent(pgid).is_err());
        }
    }

    #[test]
    fn an_unused_group_is_absent_and_a_used_one_is_not() {
        // No process has this group id (pid_max is far lower).
        assert!(group_absent(4_000_000).expect("probe"));
        assert_eq!(
            signal_group(4_000_000, 0)
                .expect_err("no such group")
                .raw_os_error(),
            Some(libc::ESRCH)
        );
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        let pgid = child.id() as i32;
        assert!(!group_absent(pgid).expect("probe"));
        signal_group(pgid, libc::SIGKILL).expect("kill the group");
        child.wait().expect("reap");
        assert!(group_absent(pgid).expect("probe"), "reaped: no member left");
    }

    #[test]
    fn a_member_that_is_not_what_the_scan_saw_is_left_alone() {
        let me = crate::table::stat_of(std::process::id() as i32)
            .expect("stat")
            .expect("this process");
        // Another start time: a recycled pid. SIGKILL would end this test
        // process if it were sent.
        let recycled = Stat {
            starttime: me.starttime + 1,
            ..me
        };
        signal_member(&recycled, me.sid, Signal::KILL).expect("nothing sent");
        // The same process, but no longer in the session being torn down.
        signal_member(&me, me.sid + 1, Signal::KILL).expect("nothing sent");
        let gone = Stat {
            pid: i32::MAX,
            ..me
        };
        signal_member(&gone, me.sid, Signal::KILL).expect("nothing sent");
    }
}
