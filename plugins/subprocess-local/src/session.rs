//! Tearing down every process group of one terminal session.
//!
//! Members are found by scanning the process table for the session id and
//! signalled one by one through pidfds: a pidfd pins the exact process, and
//! the member's session is re-checked after the pidfd is open, so a pid
//! recycled since the scan is never signalled. Processes that left the
//! session with `setsid` are not members and are not touched.

use std::io;
use std::time::Duration;

use rustix::process::{Pid, PidfdFlags, Signal};
use tokio::time::Instant;

use crate::group::KILL_SETTLE;
use crate::leader::Leader;
use crate::proc_table::{self, Entry};

/// Outcome of a teardown: proven empty, or what was still alive.
pub type Teardown = Result<(), String>;

/// SIGHUP and SIGCONT to every member (what a terminal hangup delivers;
/// interactive shells ignore SIGTERM but not SIGHUP), up to `grace` for the
/// session to empty, then SIGKILL to every member found until a scan comes
/// back empty or [`KILL_SETTLE`] passes. A failed scan or signal escalates.
pub async fn teardown(leader: &Leader, grace: Duration) -> Teardown {
    let sid = leader.pid().as_raw_nonzero().get();
    let mut failures = Vec::new();
    match proc_table::live_in_session(sid) {
        Ok(live) if live.is_empty() => return Ok(()),
        Ok(live) => {
            let mut escalate = false;
            for entry in &live {
                for signal in [Signal::HUP, Signal::CONT] {
                    if let Err(err) = signal_member(entry, sid, signal) {
                        failures.push(format!("{signal:?} to {}: {err}", entry.pid));
                        escalate = true;
                    }
                }
            }
            if !escalate {
                let deadline = Instant::now() + grace;
                let _ = tokio::time::timeout_at(deadline, leader.reap()).await;
                match proc_table::settle(deadline, || proc_table::live_in_session(sid)).await {
                    Ok(live) if live.is_empty() => return Ok(()),
                    Ok(_) => {}
                    Err(err) => failures.push(format!("probe: {err}")),
                }
            }
        }
        Err(err) => failures.push(format!("probe: {err}")),
    }
    let deadline = Instant::now() + KILL_SETTLE;
    let killed = proc_table::settle(deadline, || {
        let live = proc_table::live_in_session(sid)?;
        for entry in &live {
            if let Err(err) = signal_member(entry, sid, Signal::KILL) {
                tracing::warn!(pid = entry.pid, %err, "SIGKILL to a terminal session member failed");
            }
        }
        Ok(live)
    })
    .await;
    match killed {
        Ok(live) if live.is_empty() => Ok(()),
        Ok(live) => {
            let pids: Vec<i32> = live.iter().map(|entry| entry.pid).collect();
            failures.push(format!("still alive after SIGKILL: {pids:?}"));
            Err(failures.join("; "))
        }
        Err(err) => {
            failures.push(format!("probe: {err}"));
            Err(failures.join("; "))
        }
    }
}

/// Whether the session has no live member (used when its leader exits).
pub fn is_empty(leader: &Leader) -> io::Result<bool> {
    Ok(proc_table::live_in_session(leader.pid().as_raw_nonzero().get())?.is_empty())
}

/// Signals one scanned member if it is still that member. A member that
/// is already gone counts as done.
fn signal_member(entry: &Entry, sid: i32, signal: Signal) -> io::Result<()> {
    let Some(pid) = Pid::from_raw(entry.pid) else {
        return Ok(());
    };
    let pidfd = match rustix::process::pidfd_open(pid, PidfdFlags::empty()) {
        Ok(pidfd) => pidfd,
        Err(rustix::io::Errno::SRCH) => return Ok(()),
        Err(err) => return Err(err.into()),
    };
    let still_member = std::fs::read(format!("/proc/{}/stat", entry.pid))
        .ok()
        .and_then(|line| proc_table::parse_stat(&line))
        .is_some_and(|now| now.sid == sid);
    if !still_member {
        return Ok(());
    }
    match rustix::process::pidfd_send_signal(&pidfd, signal) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(err) => Err(err.into()),
    }
}
