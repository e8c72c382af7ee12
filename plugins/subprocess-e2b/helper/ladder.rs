//! `terminate` and `teardown`: the signal ladders that end a command's
//! process group or a terminal's session, run as root inside the sandbox
//! so the whole ladder costs the host one round trip.
//!
//! Linux has no event for "this group became empty", so emptiness is
//! proven by scanning `/proc` with a backoff from 1 ms to 50 ms.

use std::io;
use std::time::{Duration, Instant};

use super::procfs::{self, Stat};
use super::sys;

/// What a ladder found in the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Proven empty.
    Empty,
    /// Still alive after SIGKILL (or never proven empty): the pids, and
    /// what failed on the way.
    Busy {
        live: Vec<i32>,
        failures: Vec<String>,
    },
}

impl Outcome {
    /// The control line: `empty` or `busy <pids>; <failures>`.
    pub fn line(&self) -> String {
        match self {
            Outcome::Empty => "empty".to_owned(),
            Outcome::Busy { live, failures } => {
                let pids: Vec<String> = live.iter().map(ToString::to_string).collect();
                format!("busy {}; {}", pids.join(","), failures.join("; "))
            }
        }
    }
}

/// Probes until `probe` finds nothing live or `deadline` passes; returns
/// the last probe's members (empty = proven).
fn settle(
    deadline: Instant,
    probe: &mut dyn FnMut() -> io::Result<Vec<Stat>>,
) -> io::Result<Vec<Stat>> {
    let mut pause = Duration::from_millis(1);
    loop {
        let live = probe()?;
        let now = Instant::now();
        if live.is_empty() || now >= deadline {
            return Ok(live);
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// SIGTERM and SIGCONT to group `pgid`, up to `grace` for it to empty,
/// SIGKILL, up to `settle_for` for the probe to prove it empty. A failed
/// TERM or probe escalates to KILL at once. Group ids ≤ 1 are refused
/// before anything is sent (`kill(-1)` reaches every process).
pub fn terminate_group(
    pgid: i32,
    grace: Duration,
    settle_for: Duration,
) -> Result<Outcome, String> {
    if pgid <= 1 {
        return Err(format!("refusing to signal process group {pgid}"));
    }
    let mut failures = Vec::new();
    match sys::send_signal(-pgid, sys::SIGTERM) {
        Err(err) if err.raw_os_error() == Some(sys::ESRCH) => return Ok(Outcome::Empty),
        Err(err) => failures.push(format!("SIGTERM: {err}")),
        Ok(()) => {
            let _ = sys::send_signal(-pgid, sys::SIGCONT);
            match settle(Instant::now() + grace, &mut || procfs::group_members(pgid)) {
                Ok(live) if live.is_empty() => return Ok(Outcome::Empty),
                Ok(_) => {}
                Err(err) => failures.push(format!("probe: {err}")),
            }
        }
    }
    match sys::send_signal(-pgid, sys::SIGKILL) {
        Err(err) if err.raw_os_error() == Some(sys::ESRCH) => return Ok(Outcome::Empty),
        Err(err) => failures.push(format!("SIGKILL: {err}")),
        Ok(()) => {}
    }
    let killed = settle(Instant::now() + settle_for, &mut || {
        procfs::group_members(pgid)
    });
    Ok(verdict(killed, failures))
}

/// What the last probe after SIGKILL says, with what failed before.
fn verdict(last: io::Result<Vec<Stat>>, mut failures: Vec<String>) -> Outcome {
    match last {
        Ok(live) if live.is_empty() => Outcome::Empty,
        Ok(live) => Outcome::Busy {
            live: live.iter().map(|stat| stat.pid).collect(),
            failures,
        },
        Err(err) => {
            failures.push(format!("probe: {err}"));
            Outcome::Busy {
                live: Vec::new(),
                failures,
            }
        }
    }
}

/// SIGHUP and SIGCONT to every member of session `sid` (what a hangup
/// delivers; interactive shells ignore SIGTERM), up to `grace` for the
/// session to empty, then SIGKILL to every member found until a scan comes
/// back empty or `settle_for` passes. Members are signalled through pidfds
/// after re-checking their session, so a recycled pid is never hit.
pub fn teardown_session(
    sid: i32,
    grace: Duration,
    settle_for: Duration,
) -> Result<Outcome, String> {
    if sid <= 1 {
        return Err(format!("refusing to tear down session {sid}"));
    }
    let mut failures = Vec::new();
    match procfs::session_members(sid) {
        Ok(live) if live.is_empty() => return Ok(Outcome::Empty),
        Ok(live) => {
            let mut escalate = false;
            for stat in &live {
                for signal in [sys::SIGHUP, sys::SIGCONT] {
                    if let Err(err) = signal_member(stat, sid, signal) {
                        failures.push(format!("signal {signal} to {}: {err}", stat.pid));
                        escalate = true;
                    }
                }
            }
            if !escalate {
                match settle(Instant::now() + grace, &mut || procfs::session_members(sid)) {
                    Ok(live) if live.is_empty() => return Ok(Outcome::Empty),
                    Ok(_) => {}
                    Err(err) => failures.push(format!("probe: {err}")),
                }
            }
        }
        Err(err) => failures.push(format!("probe: {err}")),
    }
    let killed = settle(Instant::now() + settle_for, &mut || {
        let live = procfs::session_members(sid)?;
        for stat in &live {
            let _ = signal_member(stat, sid, sys::SIGKILL);
        }
        Ok(live)
    });
    Ok(verdict(killed, failures))
}

/// Whether group (`session == false`) or session `id` has live members,
/// without signalling anything.
pub fn members(session: bool, id: i32) -> Result<Outcome, String> {
    if id <= 1 {
        return Err(format!("refusing id {id}"));
    }
    let live = if session {
        procfs::session_members(id)
    } else {
        procfs::group_members(id)
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

/// Signals one scanned member if it still is that member (same session,
/// same start time); a member already gone counts as done.
fn signal_member(stat: &Stat, sid: i32, signal: i32) -> io::Result<()> {
    let pidfd = match sys::pidfd(stat.pid) {
        Ok(fd) => fd,
        Err(err) if err.raw_os_error() == Some(sys::ESRCH) => return Ok(()),
        Err(err) => return Err(err),
    };
    let result = match procfs::stat_of(stat.pid) {
        Ok(Some(now)) if now.sid == sid && now.starttime == stat.starttime => {
            match sys::pidfd_signal(pidfd, signal) {
                Err(err) if err.raw_os_error() == Some(sys::ESRCH) => Ok(()),
                other => other,
            }
        }
        Ok(_) => Ok(()),
        Err(err) => Err(err),
    };
    sys::close_fd(pidfd);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dangerous_ids_are_refused() {
        for id in [-3, 0, 1] {
            assert!(terminate_group(id, Duration::ZERO, Duration::ZERO).is_err());
            assert!(teardown_session(id, Duration::ZERO, Duration::ZERO).is_err());
        }
    }

    #[test]
    fn outcome_lines_name_what_is_left() {
        assert_eq!(Outcome::Empty.line(), "empty");
        let busy = Outcome::Busy {
            live: vec![7, 8],
            failures: vec!["SIGTERM: denied".into()],
        };
        assert_eq!(busy.line(), "busy 7,8; SIGTERM: denied");
    }

    #[test]
    fn members_are_listed_without_signals() {
        let me = std::process::id() as i32;
        let own_group = procfs::stat_of(me).unwrap().unwrap().pgid;
        match members(false, own_group) {
            Ok(Outcome::Busy { live, .. }) => assert!(live.contains(&me)),
            other => panic!("this test's own group: {other:?}"),
        }
        assert_eq!(members(true, 4_000_000), Ok(Outcome::Empty));
        assert!(members(false, 1).is_err());
    }

    #[test]
    fn an_unused_group_is_empty_at_once() {
        // No process has this group id (the pid namespace has far fewer).
        let started = Instant::now();
        let outcome = terminate_group(4_000_000, Duration::from_secs(5), Duration::from_secs(5));
        assert_eq!(outcome, Ok(Outcome::Empty));
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_real_group_is_terminated_and_proven_empty() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "trap '' TERM; sleep 30 & sleep 31"])
            .process_group(0)
            .spawn()
            .expect("spawn");
        let pgid = child.id() as i32;
        std::thread::sleep(Duration::from_millis(100));
        let outcome = terminate_group(pgid, Duration::from_millis(100), Duration::from_secs(2));
        assert_eq!(outcome, Ok(Outcome::Empty));
        let status = child.wait().expect("reap");
        assert!(!status.success());
    }
}
