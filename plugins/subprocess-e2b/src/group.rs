//! Ownership of one command's process group, and its terminate ladder.
//!
//! The group is the command's pid (it leads a new session and group).
//! Processes that move themselves out of it with `setsid` or `setpgid` are
//! not owned — the line a process-group contract draws, as on the host.
//!
//! Pid reuse: the helper reaps the direct child and reports whether the
//! group was empty at that moment; once a group is proven empty it is never
//! signalled again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use dsh_plugin_api::{Error, ErrorKind, Result};
use e2b_client::Selector;

use crate::control::{ControlError, Controller, Ladder};
use crate::registry::{Membership, Owned};
use crate::transport::EnvdTransport;

/// How long after SIGKILL the probe keeps looking before `Busy`: SIGKILL
/// acts at once except on processes in uninterruptible sleep.
pub const KILL_SETTLE: Duration = Duration::from_secs(2);

/// One owned process group.
pub struct Group<T> {
    pid: u32,
    /// envd's pid of the supervising helper (the command's parent).
    helper: u32,
    control: Controller<T>,
    /// The provider's grace between TERM and KILL when disposal stops it.
    kill_grace: Duration,
    quiescent: AtomicBool,
    /// Serialises ladders (and so makes `terminate` idempotent).
    ladder: tokio::sync::Mutex<()>,
    membership: Membership,
}

impl<T: EnvdTransport> Group<T> {
    /// `kill_grace`: the provider's, for the ladder of disposal
    /// ([`Owned::stop`]).
    pub fn new(pid: u32, helper: u32, control: Controller<T>, kill_grace: Duration) -> Group<T> {
        Group {
            pid,
            helper,
            control,
            kill_grace,
            quiescent: AtomicBool::new(false),
            ladder: tokio::sync::Mutex::new(()),
            membership: Membership::default(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn membership(&self) -> &Membership {
        &self.membership
    }

    pub fn is_quiescent(&self) -> bool {
        self.quiescent.load(Ordering::Acquire)
    }

    /// Records that nothing of the group runs any more (the helper found it
    /// empty, a ladder proved it, or the sandbox is gone): later
    /// terminates are no-ops and the provider no longer owns it.
    pub fn prove_empty(&self) {
        self.quiescent.store(true, Ordering::Release);
        self.membership.leave();
    }

    /// SIGTERM (and SIGCONT) to the whole group, `grace`, SIGKILL, and a
    /// bounded probe, all inside the sandbox in one round trip. Succeeds
    /// once the group is proven empty (zombies count as gone) or the
    /// sandbox is gone; otherwise fails with `Busy` and may be retried. If
    /// the ladder cannot run at all, the supervising helper is killed
    /// through envd as a fallback (its death SIGKILLs the command). A no-op
    /// once proven; concurrent calls run one after the other. Dropping the
    /// future abandons the wait, not the ladder already sent.
    pub async fn terminate(&self, grace: Duration) -> Result<()> {
        let _ladder = self.ladder.lock().await;
        if self.is_quiescent() {
            return Ok(());
        }
        if self.pid <= 1 {
            return Err(Error::invalid_input(format!(
                "terminate: refusing to signal process group {}",
                self.pid
            )));
        }
        match self
            .control
            .terminate_group(self.pid, grace, KILL_SETTLE)
            .await
        {
            Ok(Ladder::Empty) | Err(ControlError::Gone(_)) => {
                self.prove_empty();
                Ok(())
            }
            Ok(Ladder::Busy(what)) => Err(self.busy(&format!("still alive after SIGKILL: {what}"))),
            Err(ControlError::Failed(err)) => {
                let fallback = self.control.kill(Selector::Pid(self.helper)).await;
                match fallback {
                    Err(kill_err) if self.control.is_gone(&kill_err).await => {
                        self.prove_empty();
                        Ok(())
                    }
                    Err(kill_err) => Err(self.busy(&format!(
                        "the ladder could not run ({err}) and killing its supervisor failed ({kill_err})"
                    ))),
                    Ok(()) => Err(self.busy(&format!(
                        "the ladder could not run ({err}); its supervisor was killed, which kills the command, but the group is not proven empty"
                    ))),
                }
            }
        }
    }

    fn busy(&self, what: &str) -> Error {
        Error::new(
            ErrorKind::Busy,
            format!(
                "terminate: process group {}: {what}; retry terminate",
                self.pid
            ),
        )
        .with_subject(self.pid.to_string())
    }
}

#[async_trait]
impl<T: EnvdTransport> Owned for Group<T> {
    async fn stop(&self) -> Result<()> {
        self.terminate(self.kill_grace).await
    }
}
