//! Ending process groups and terminal sessions until they are proven gone.
//!
//! The seam's `terminate` succeeds only once a bounded probe proves the
//! group (or session) empty and otherwise fails with `Busy`, which may be
//! retried. Every place the tools end something — `kill`, `terminal_close`,
//! eviction, shutdown, a dropped foreground `run` — retries the same way.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use dsh_plugin_api::subprocess::Process;
use dsh_plugin_api::{ErrorKind, Result};
use tokio_util::task::TaskTracker;

/// How many times a terminate is attempted while it reports `Busy` (each
/// attempt runs the provider's whole ladder and bounded probe).
pub(crate) const TERMINATE_ATTEMPTS: usize = 3;

/// Runs `attempt` until it succeeds, fails with anything but `Busy`, or
/// has been tried [`TERMINATE_ATTEMPTS`] times; returns the last outcome.
pub(crate) async fn until_proven_gone<F, Fut>(mut attempt: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let mut tried = 1;
    loop {
        match attempt().await {
            Err(err) if err.kind() == ErrorKind::Busy && tried < TERMINATE_ATTEMPTS => tried += 1,
            outcome => return outcome,
        }
    }
}

/// The grace between SIGTERM and SIGKILL when the call that ran a
/// foreground command is dropped: the caller is gone, so the command gets
/// little time to clean up.
pub(crate) const DROPPED_CALL_GRACE: Duration = Duration::from_millis(500);

/// Terminates a foreground command's whole group if the call waiting for
/// it is dropped before [`TerminateOnDrop::disarm`]. The ladder runs on a
/// task of the current runtime, so it completes after the drop.
pub(crate) struct TerminateOnDrop {
    process: Option<Arc<dyn Process>>,
    /// Where that task is tracked, when its owner waits for it at shutdown.
    tracker: Option<TaskTracker>,
}

impl TerminateOnDrop {
    pub(crate) fn new(process: Arc<dyn Process>) -> TerminateOnDrop {
        TerminateOnDrop {
            process: Some(process),
            tracker: None,
        }
    }

    /// As [`TerminateOnDrop::new`], the ladder's task tracked by `tracker`
    /// (whose owner waits for it before it reports itself shut down).
    pub(crate) fn tracked(process: Arc<dyn Process>, tracker: &TaskTracker) -> TerminateOnDrop {
        TerminateOnDrop {
            process: Some(process),
            tracker: Some(tracker.clone()),
        }
    }

    /// The call completed: nothing is terminated on drop.
    pub(crate) fn disarm(mut self) {
        self.process = None;
    }
}

impl Drop for TerminateOnDrop {
    fn drop(&mut self) {
        let Some(process) = self.process.take() else {
            return;
        };
        let pid = process.pid();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let ladder = async move {
                    if let Err(err) =
                        until_proven_gone(|| process.terminate(DROPPED_CALL_GRACE)).await
                    {
                        tracing::warn!(pid, %err, "run: the group of a dropped call is not proven gone");
                    }
                };
                match &self.tracker {
                    Some(tracker) => drop(tracker.spawn_on(ladder, &runtime)),
                    None => drop(runtime.spawn(ladder)),
                }
            }
            // Only reachable if the future is dropped outside any runtime;
            // the provider still owns the group and ends it at disposal.
            Err(_) => {
                tracing::warn!(
                    pid,
                    "run: dropped outside a runtime; the group is left to the provider"
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_plugin_api::Error;

    #[tokio::test]
    async fn busy_is_retried_a_bounded_number_of_times() {
        let mut calls = 0;
        let outcome = until_proven_gone(|| {
            calls += 1;
            async { Err(Error::new(ErrorKind::Busy, "still there")) }
        })
        .await;
        assert_eq!(outcome.unwrap_err().kind(), ErrorKind::Busy);
        assert_eq!(calls, TERMINATE_ATTEMPTS);

        let mut calls = 0;
        let outcome = until_proven_gone(|| {
            calls += 1;
            let result = if calls == 2 {
                Ok(())
            } else {
                Err(Error::new(ErrorKind::Busy, "still there"))
            };
            async move { result }
        })
        .await;
        assert!(outcome.is_ok());
        assert_eq!(calls, 2);

        let mut calls = 0;
        let outcome = until_proven_gone(|| {
            calls += 1;
            async { Err(Error::unavailable("world gone")) }
        })
        .await;
        assert_eq!(outcome.unwrap_err().kind(), ErrorKind::Unavailable);
        assert_eq!(calls, 1, "only Busy is retried");
    }
}
