//! The ladders that end a process group or a session and prove it: a
//! polite signal, a grace period, SIGKILL, and a bounded probe.
//!
//! Linux has no event for "this group became empty", so emptiness is proven
//! by scanning `/proc` ([`crate::table`]) with a backoff from 1 ms to
//! 50 ms, waiting through the caller's [`Pause`]. Empty means the
//! crate's quiescence rule: no live member (true zombies and absent
//! processes only).

use std::io;
use std::time::{Duration, Instant};

use rustix::process::Signal;

use crate::pause::Pause;
use crate::signal::{signal_group, signal_member};
use crate::table::{self, Stat};

/// The longest pause between two probes.
const MAX_STEP: Duration = Duration::from_millis(50);

/// What a ladder found in the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Proven empty (quiescent).
    Empty,
    /// Not proven empty: the live pids the last probe found (none if the
    /// probe itself failed), and what failed on the way.
    Busy {
        live: Vec<i32>,
        failures: Vec<String>,
    },
}

/// Probes until `probe` finds nothing live or `deadline` passes, pausing
/// with backoff in between; returns the last probe's members (empty =
/// proven). A failed probe ends the wait with its error.
pub async fn settle(
    pause: &mut impl Pause,
    deadline: Instant,
    mut probe: impl FnMut() -> io::Result<Vec<Stat>>,
) -> io::Result<Vec<Stat>> {
    let mut step = Duration::from_millis(1);
    loop {
        let live = probe()?;
        let now = Instant::now();
        if live.is_empty() || now >= deadline {
            return Ok(live);
        }
        pause.until(deadline.min(now + step)).await;
        step = (step * 2).min(MAX_STEP);
    }
}

/// SIGTERM and SIGCONT (so stopped members can act on the TERM) to group
/// `pgid`, up to `grace` for it to empty, then SIGKILL and up to
/// `settle_for` for the probe to prove it empty. A failed TERM or probe
/// escalates to KILL at once. `Empty` only once the group has no live
/// member — a zombie leader whose threads still run keeps it `Busy`.
///
/// Group ids ≤ 1 are refused (an `InvalidInput` error) before anything is
/// sent. Dropping the future stops the ladder where it is: signals already
/// sent stay sent.
pub async fn terminate_group(
    pgid: i32,
    grace: Duration,
    settle_for: Duration,
    pause: &mut impl Pause,
) -> io::Result<Outcome> {
    let mut failures = Vec::new();
    match signal_group(pgid, libc::SIGTERM) {
        Err(err) if err.kind() == io::ErrorKind::InvalidInput => return Err(err),
        Err(err) if err.raw_os_error() == Some(libc::ESRCH) => return Ok(Outcome::Empty),
        Err(err) => failures.push(format!("SIGTERM: {err}")),
        Ok(()) => {
            let _ = signal_group(pgid, libc::SIGCONT);
            let deadline = Instant::now() + grace;
            match settle(pause, deadline, || table::group_members(pgid)).await {
                Ok(live) if live.is_empty() => return Ok(Outcome::Empty),
                Ok(_) => {}
                Err(err) => failures.push(format!("probe: {err}")),
            }
        }
    }
    match signal_group(pgid, libc::SIGKILL) {
        Err(err) if err.raw_os_error() == Some(libc::ESRCH) => return Ok(Outcome::Empty),
        Err(err) => failures.push(format!("SIGKILL: {err}")),
        Ok(()) => {}
    }
    let deadline = Instant::now() + settle_for;
    let killed = settle(pause, deadline, || table::group_members(pgid)).await;
    Ok(verdict(killed, failures))
}

/// SIGHUP and SIGCONT to every member of session `sid` (what a terminal
/// hangup delivers; interactive shells ignore SIGTERM but not SIGHUP), up
/// to `grace` for the session to empty, then SIGKILL to every member found
/// until a scan comes back empty or `settle_for` passes. Members are
/// signalled one by one ([`signal_member`]), so a recycled pid is never
/// hit; processes that left the session with `setsid` are not members. A
/// failed scan or signal escalates to KILL at once.
///
/// Session ids ≤ 1 are refused (an `InvalidInput` error). Dropping the
/// future stops the teardown where it is.
pub async fn teardown_session(
    sid: i32,
    grace: Duration,
    settle_for: Duration,
    pause: &mut impl Pause,
) -> io::Result<Outcome> {
    if sid <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to tear down session {sid}"),
        ));
    }
    let mut failures = Vec::new();
    match table::session_members(sid) {
        Ok(live) if live.is_empty() => return Ok(Outcome::Empty),
        Ok(live) => {
            let mut escalate = false;
            for member in &live {
                for signal in [Signal::HUP, Signal::CONT] {
                    if let Err(err) = signal_member(member, sid, signal) {
                        failures.push(format!("{signal:?} to {}: {err}", member.pid));
                        escalate = true;
                    }
                }
            }
            if !escalate {
                let deadline = Instant::now() + grace;
                match settle(pause, deadline, || table::session_members(sid)).await {
                    Ok(live) if live.is_empty() => return Ok(Outcome::Empty),
                    Ok(_) => {}
                    Err(err) => failures.push(format!("probe: {err}")),
                }
            }
        }
        Err(err) => failures.push(format!("probe: {err}")),
    }
    let deadline = Instant::now() + settle_for;
    let killed = settle(pause, deadline, || {
        let live = table::session_members(sid)?;
        for member in &live {
            // A member that could not be killed shows up in the next scan.
            let _ = signal_member(member, sid, Signal::KILL);
        }
        Ok(live)
    })
    .await;
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

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;

    use super::*;
    use crate::pause::{Blocking, run_blocking};
    use crate::testing::ZombieLeader;

    fn terminate(pgid: i32, grace: Duration, settle_for: Duration) -> io::Result<Outcome> {
        run_blocking(terminate_group(pgid, grace, settle_for, &mut Blocking))
    }

    #[test]
    fn dangerous_ids_are_refused() {
        for id in [-3, 0, 1] {
            let err = terminate(id, Duration::ZERO, Duration::ZERO).expect_err("refused");
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            let err = run_blocking(teardown_session(
                id,
                Duration::ZERO,
                Duration::ZERO,
                &mut Blocking,
            ))
            .expect_err("refused");
            assert_eq!(
                err.to_string(),
                format!("refusing to tear down session {id}")
            );
        }
    }

    #[test]
    fn settle_is_bounded_backs_off_and_stops_at_the_first_empty_probe() {
        let me = table::stat_of(std::process::id() as i32).unwrap().unwrap();
        let started = Instant::now();
        let mut probes = 0;
        let live = run_blocking(settle(
            &mut Blocking,
            started + Duration::from_millis(60),
            || {
                probes += 1;
                Ok(vec![me])
            },
        ))
        .expect("settle");
        assert_eq!(live, [me], "never empty: the last live list comes back");
        assert!(started.elapsed() >= Duration::from_millis(60));
        assert!(
            (2..=20).contains(&probes),
            "backoff, not a busy loop: {probes}"
        );

        let mut left = 3;
        let live = run_blocking(settle(
            &mut Blocking,
            Instant::now() + Duration::from_secs(5),
            || {
                left -= 1;
                Ok(if left == 0 { Vec::new() } else { vec![me] })
            },
        ))
        .expect("settle");
        assert!(live.is_empty());
        assert_eq!(left, 0, "returns as soon as the probe is empty");

        let err = run_blocking(settle(&mut Blocking, Instant::now(), || {
            Err(io::Error::other("no /proc"))
        }))
        .expect_err("probe failure");
        assert_eq!(err.to_string(), "no /proc");
    }

    #[test]
    fn an_unused_group_is_empty_at_once() {
        let started = Instant::now();
        let outcome = terminate(4_000_000, Duration::from_secs(5), Duration::from_secs(5));
        assert_eq!(outcome.expect("ladder"), Outcome::Empty);
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_group_ignoring_term_is_killed_and_proven_empty() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "trap '' TERM; sleep 30 & sleep 31"])
            .process_group(0)
            .spawn()
            .expect("spawn");
        let pgid = child.id() as i32;
        std::thread::sleep(Duration::from_millis(100));
        let outcome = terminate(pgid, Duration::from_millis(100), Duration::from_secs(2));
        assert_eq!(outcome.expect("ladder"), Outcome::Empty);
        let status = child.wait().expect("reap");
        assert!(!status.success());
    }

    #[test]
    fn a_zombie_leader_is_not_empty_until_its_last_thread_is_gone() {
        let child = ZombieLeader::spawn();
        let grace = Duration::from_millis(400);
        let started = Instant::now();
        let outcome = terminate(child.pgid(), grace, Duration::from_secs(2));
        assert_eq!(outcome.expect("ladder"), Outcome::Empty);
        // The thread ignores SIGTERM: only SIGKILL, after the whole grace,
        // can end it, so an earlier "empty" would have been wrong.
        assert!(
            started.elapsed() >= grace,
            "proven empty after {:?}, within the grace",
            started.elapsed()
        );
        let leader = child.leader_stat();
        assert_eq!((leader.state, leader.threads), (b'Z', 1), "{leader:?}");
    }

    #[test]
    fn a_session_is_torn_down_member_by_member() {
        let mut command = std::process::Command::new("sh");
        command.args(["-c", "trap '' HUP; sleep 30 & sleep 31 & wait"]);
        // SAFETY: setsid is async-signal-safe; nothing else runs between
        // fork and exec.
        unsafe {
            command.pre_exec(|| rustix::process::setsid().map(drop).map_err(Into::into));
        }
        let mut child = command.spawn().expect("spawn");
        let sid = child.id() as i32;
        std::thread::sleep(Duration::from_millis(100));
        assert!(table::session_members(sid).expect("scan").len() >= 3);
        let outcome = run_blocking(teardown_session(
            sid,
            Duration::from_millis(100),
            Duration::from_secs(2),
            &mut Blocking,
        ));
        assert_eq!(outcome.expect("teardown"), Outcome::Empty);
        child.wait().expect("reap");
        assert_eq!(table::session_members(sid).expect("scan"), []);
    }
}
