//! The operation gate of something that can be terminated (a terminal): the
//! seams promise that once `terminate` (or disposal) begins, new operations
//! fail with `Closed`, operations in flight are cancelled (a write blocked
//! on a full terminal would never end by itself), and `terminate` returns
//! only after every one of them has returned.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_plugin_api::{Error, Result};
use tokio::sync::{Notify, RwLock, RwLockWriteGuard};

/// Operations pass through the gate until [`Gate::close`].
#[derive(Debug)]
pub struct Gate {
    label: String,
    closed: AtomicBool,
    /// Wakes the operations in flight when the gate closes.
    closing: Notify,
    /// Each operation in flight holds a read guard; closing takes the write
    /// guard, so it waits for all of them.
    in_flight: RwLock<()>,
}

/// Held by one [`Gate::close`] while the gate is closed; excludes other
/// closers (a retried `terminate` waits for the first) until dropped.
#[derive(Debug)]
pub struct Closed<'a> {
    _exclusive: RwLockWriteGuard<'a, ()>,
}

impl Gate {
    /// An open gate; `label` names the guarded thing in errors
    /// (`terminal 1234`).
    pub fn new(label: String) -> Gate {
        Gate {
            label,
            closed: AtomicBool::new(false),
            closing: Notify::new(),
            in_flight: RwLock::new(()),
        }
    }

    /// Runs `op` unless the gate is closed. If the gate closes while `op`
    /// runs, `op` is dropped and the call fails with `Closed`
    /// (`"<operation>: <label> is terminated"`, subject the label).
    /// Dropping the returned future drops `op` and leaves the gate.
    pub async fn run<F, R>(&self, operation: &str, op: F) -> Result<R>
    where
        F: Future<Output = Result<R>>,
    {
        self.check(operation)?;
        let _in_flight = self.in_flight.read().await;
        // Registered before the second check, so a close between the check
        // and the select still wakes this operation.
        let mut closing = pin!(self.closing.notified());
        closing.as_mut().enable();
        self.check(operation)?;
        tokio::select! {
            biased;
            () = closing => Err(self.refusal(operation)),
            result = op => result,
        }
    }

    /// Closes the gate: refuses new operations at once, cancels the ones in
    /// flight, and waits until every one of them has returned. Closing a
    /// closed gate again works (it waits for the previous closer's guard).
    pub async fn close(&self) -> Closed<'_> {
        self.closed.store(true, Ordering::Release);
        self.closing.notify_waiters();
        Closed {
            _exclusive: self.in_flight.write().await,
        }
    }

    fn check(&self, operation: &str) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(self.refusal(operation))
        } else {
            Ok(())
        }
    }

    fn refusal(&self, operation: &str) -> Error {
        Error::closed(format!("{operation}: {} is terminated", self.label))
            .with_subject(self.label.clone())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use dsh_plugin_api::ErrorKind;

    use super::*;

    #[tokio::test]
    async fn closing_cancels_and_joins_what_is_in_flight_then_refuses() {
        let gate = Arc::new(Gate::new("terminal 9".into()));
        let stuck = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move {
                gate.run("write", std::future::pending::<Result<()>>())
                    .await
            }
        });
        // Let the operation enter the gate.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let closed = gate.close().await;
        let err = stuck.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed);
        assert_eq!(err.message(), "write: terminal 9 is terminated");
        assert_eq!(err.subject(), Some("terminal 9"));
        drop(closed);
        let err = gate.run("resize", async { Ok(()) }).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed);
        assert_eq!(err.message(), "resize: terminal 9 is terminated");
        // Closing again (a retried terminate) works.
        drop(gate.close().await);
    }

    #[tokio::test]
    async fn a_second_closer_waits_for_the_first() {
        let gate = Gate::new("terminal 3".into());
        let first = gate.close().await;
        let mut second = pin!(gate.close());
        assert!(futures::poll!(second.as_mut()).is_pending());
        drop(first);
        drop(second.await);
    }

    #[tokio::test]
    async fn an_open_gate_runs_operations() {
        let gate = Gate::new("terminal 1".into());
        assert_eq!(gate.run("x", async { Ok(7) }).await.unwrap(), 7);
    }
}
