//! Ownership of one command's process group; the terminate ladder itself
//! is `dsh-process-group`'s.
//!
//! What "owned" means: every process whose process-group id is the
//! command's pid. Descendants stay in it unless they move themselves out —
//! a program that calls `setsid` (or `setpgid` into another group) leaves
//! the group and is no longer owned, reached or waited for; that is the
//! line a process-group contract can draw without a cgroup.
//!
//! Pid reuse: the direct child is reaped as soon as it exits (so nothing
//! piles up as zombies), after which the group id stays reserved only while
//! some member lives. A signal is sent only while the group is not known to
//! be empty, and once a probe proves it empty the group is never signalled
//! again. The residual race — every member dying and the number being
//! recycled as a new *group* between a probe and a signal — needs a full
//! pid wrap-around within microseconds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_process_group::{Outcome, ladder, signal};

use crate::leader::Leader;
use crate::pause::TokioPause;
use crate::registry::{Membership, Owned};

/// How long after SIGKILL the probe keeps looking before giving up with
/// `Busy`. SIGKILL takes effect at once except for processes stuck in
/// uninterruptible sleep, which no signal can hurry.
pub const KILL_SETTLE: Duration = Duration::from_secs(2);

/// One owned process group.
#[derive(Debug)]
pub struct Group {
    leader: Leader,
    /// The provider's grace between TERM and KILL when disposal stops it.
    kill_grace: Duration,
    quiescent: AtomicBool,
    /// Serialises terminate ladders (and so makes them idempotent).
    ladder: tokio::sync::Mutex<()>,
    /// The provider's registration, released once the group is proven
    /// empty.
    membership: Membership,
}

impl Group {
    /// `kill_grace`: the provider's, for the ladder of disposal
    /// ([`Owned::stop`]).
    pub fn new(leader: Leader, kill_grace: Duration) -> Group {
        Group {
            leader,
            kill_grace,
            quiescent: AtomicBool::new(false),
            ladder: tokio::sync::Mutex::new(()),
            membership: Membership::default(),
        }
    }

    pub fn membership(&self) -> &Membership {
        &self.membership
    }

    pub fn leader(&self) -> &Leader {
        &self.leader
    }

    pub fn pgid(&self) -> i32 {
        self.leader.pid().as_raw_nonzero().get()
    }

    /// Whether the group has been proven empty.
    pub fn is_quiescent(&self) -> bool {
        self.quiescent.load(Ordering::Acquire)
    }

    /// Records that the group is proven empty if a cheap check (one
    /// `kill(-pgid, 0)`) says so; used right after the leader is reaped.
    pub fn note_if_empty(&self) -> bool {
        let empty = signal::group_absent(self.pgid()).unwrap_or(false);
        if empty {
            self.proven();
        }
        empty
    }

    /// SIGTERM (and SIGCONT, so stopped members can act on it) to the whole
    /// group, up to `grace` for it to empty, then SIGKILL and up to
    /// [`KILL_SETTLE`] for the probe to prove it empty
    /// ([`ladder::terminate_group`]). Succeeds only once the group is
    /// proven empty by `dsh-process-group`'s quiescence rule (true zombies
    /// count as gone; a zombie leader whose threads still run does not);
    /// otherwise fails with `Busy` and may be retried. A no-op once proven.
    /// Concurrent calls run one after the other. Dropping the future stops
    /// the ladder where it is (signals already sent stay sent).
    pub async fn terminate(&self, grace: Duration) -> Result<()> {
        let _ladder = self.ladder.lock().await;
        if self.is_quiescent() {
            return Ok(());
        }
        let pgid = self.pgid();
        match ladder::terminate_group(pgid, grace, KILL_SETTLE, &mut TokioPause).await {
            Ok(Outcome::Empty) => {
                self.proven();
                Ok(())
            }
            Ok(Outcome::Busy { live, failures }) if live.is_empty() => {
                Err(busy(pgid, "the group could not be proven empty", &failures))
            }
            Ok(Outcome::Busy { live, failures }) => Err(busy(
                pgid,
                &format!(
                    "{} process(es) still alive after SIGKILL: {live:?}",
                    live.len()
                ),
                &failures,
            )),
            Err(err) => Err(
                Error::from_io(&format!("terminate: process group {pgid}"), &err)
                    .with_subject(pgid.to_string()),
            ),
        }
    }

    fn proven(&self) {
        self.quiescent.store(true, Ordering::Release);
        self.membership.leave();
    }
}

#[async_trait]
impl Owned for Group {
    async fn stop(&self) -> Result<()> {
        self.terminate(self.kill_grace).await
    }
}

fn busy(pgid: i32, what: &str, failures: &[String]) -> Error {
    let mut message = format!("terminate: process group {pgid}: {what}");
    if !failures.is_empty() {
        message.push_str(&format!(" ({})", failures.join("; ")));
    }
    message.push_str("; retry terminate");
    Error::new(ErrorKind::Busy, message).with_subject(pgid.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_names_the_group_what_is_left_and_what_failed() {
        let err = busy(
            4242,
            "2 process(es) still alive after SIGKILL: [4243, 4244]",
            &["SIGTERM: Operation not permitted".to_owned()],
        );
        assert_eq!(err.kind(), ErrorKind::Busy);
        assert_eq!(err.subject(), Some("4242"));
        assert_eq!(
            err.message(),
            "terminate: process group 4242: 2 process(es) still alive after SIGKILL: [4243, 4244] (SIGTERM: Operation not permitted); retry terminate"
        );
    }
}
